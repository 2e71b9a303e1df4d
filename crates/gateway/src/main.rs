//! `gateway`: reads its settings from the environment, then serves until stopped.

use std::process::ExitCode;

/// `RUST_LOG`, `info` by default. rustls warns on every handshake whose SNI is an IP address
/// (health checks by address, any client that wants to): a line per connection anyone can
/// cause, so its warnings are off unless `RUST_LOG` names rustls.
fn log_filter() -> tracing_subscriber::EnvFilter {
    let given = std::env::var("RUST_LOG").unwrap_or_default();
    let base = if given.trim().is_empty() {
        "info".to_owned()
    } else {
        given.clone()
    };
    let text = if given.contains("rustls") {
        base
    } else {
        format!("{base},rustls=error")
    };
    tracing_subscriber::EnvFilter::try_new(&text)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,rustls=error"))
}

#[tokio::main]
async fn main() -> ExitCode {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    // With OTEL_EXPORTER_OTLP_ENDPOINT, the spans also go to that collector (kept running, and
    // flushed, until `_export` is dropped at the end of main).
    let (otel, _export) = telemetry::export::from_env("gateway", "kubesvc-gateway");
    tracing_subscriber::registry()
        .with(log_filter())
        .with(tracing_subscriber::fmt::layer())
        .with(otel)
        .init();
    let settings = match gateway::Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let running = match gateway::start(settings).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("gateway: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(addr = %running.addr, "gateway listening");
    match running.wait().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

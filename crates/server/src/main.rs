//! `server [--dev]`: the managed-Kubernetes cluster API. Settings come from the environment
//! (docs/configuration.md); `--dev` is development mode (embedded account platform, demo tokens).

use std::process::ExitCode;

use server::config::{Config, Source};

/// What keeps the log's writer and the span exporter running; dropping it writes the lines and
/// sends the spans still buffered.
struct Telemetry {
    _log: telemetry::log::LogGuard,
    _export: Option<telemetry::export::Export>,
}

/// The log on standard error and, when `OTEL_EXPORTER_OTLP_ENDPOINT` names a collector, the
/// spans exported to it.
fn init_tracing() -> Telemetry {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = telemetry::filter::Levels::from_env("info");
    let json = std::env::var("LOG_FORMAT").is_ok_and(|v| v == "json");
    // Colour only for a terminal: log files and CI logs stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // `LOG_SPANS=close`: a line as each span ends (a use case, a change, a reconcile step, and
    // at `debug` each query), with the time it took: where a slow request spent it.
    let spans = if std::env::var("LOG_SPANS").is_ok_and(|v| v == "close") {
        tracing_subscriber::fmt::format::FmtSpan::CLOSE
    } else {
        tracing_subscriber::fmt::format::FmtSpan::NONE
    };
    // Lines are written by a thread of their own (`telemetry::log`): no request waits on a
    // write to the log, and under load one write carries many lines.
    let (writer, log) = match telemetry::log::writer("log-writer", std::io::stderr()) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("server: starting the log's writer: {e}");
            std::process::exit(1);
        }
    };
    // The plain line of a log file is the service's own layer (`telemetry::text`): the same
    // line as the compact formatter's, for a fraction of its cost on every request. A terminal
    // (colours), span timings and JSON keep tracing's formatter.
    let plain = !json && !ansi && spans == tracing_subscriber::fmt::format::FmtSpan::NONE;
    let fmt = if json {
        tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_span_events(spans)
            .with_ansi(ansi)
            .json()
            .boxed()
    } else if !plain {
        tracing_subscriber::fmt::layer()
            .with_writer(writer)
            .with_span_events(spans)
            .with_ansi(ansi)
            .compact()
            .boxed()
    } else {
        telemetry::text::Text::new(writer).boxed()
    };
    let (otel, export) = telemetry::export::from_env("server", "kubesvc");
    // With plain lines and no exporter, nothing needs a request to be a span: each request is
    // kept for the text layer instead (`telemetry::scope`), and the organization a use case
    // names reaches it as a note.
    let kept = plain && otel.is_none();
    telemetry::scope::use_spans(!kept);
    tracing_subscriber::registry()
        .with(filter.with_notes(kept))
        .with(fmt)
        .with(otel)
        .init();
    Telemetry {
        _log: log,
        _export: export,
    }
}

/// `server --migrate`: what a deployment's migration Job runs before a release's replicas start.
/// Only LISTEN_DATABASE_URL (the direct connection, when set) and DATABASE_URL are read; the
/// other settings belong to the serving process.
fn migrate() -> ExitCode {
    let _export = init_tracing();
    let setting = |name| std::env::var(name).ok().filter(|u| !u.trim().is_empty());
    let Some(url) = setting("LISTEN_DATABASE_URL").or_else(|| setting("DATABASE_URL")) else {
        eprintln!("server: DATABASE_URL is required to migrate");
        return ExitCode::from(2);
    };
    match store_postgres::run_migrations(&url) {
        Ok(()) => {
            println!("server: the database schema is current");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("server: migrations failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Waits for SIGTERM (how an orchestrator stops a process) or Ctrl-C; names which came.
async fn stop_signal() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = tokio::signal::ctrl_c() => "SIGINT",
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            "SIGINT"
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!(
            "usage: server [--dev | --migrate]\n  settings come from the environment; see README.md and docs/configuration.md\n  --migrate: apply the pending database migrations (LISTEN_DATABASE_URL when set, else DATABASE_URL) and exit"
        );
        return ExitCode::SUCCESS;
    }
    if let Some(bad) = args.iter().find(|a| *a != "--dev" && *a != "--migrate") {
        eprintln!("server: unknown argument {bad:?} (usage: server [--dev | --migrate])");
        return ExitCode::from(2);
    }
    if args.iter().any(|a| a == "--migrate") {
        return migrate();
    }
    let dev = args.iter().any(|a| a == "--dev");
    let config = match Config::load(&Source::from_env(), dev) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("server: {e}");
            return ExitCode::from(2);
        }
    };
    // Kept to the end of main: dropping it sends the spans still buffered.
    let _export = init_tracing();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("server: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let shutdown_delay = config.shutdown_delay;
        let running = server::start(config).await?;
        println!("server: listening on http://{}", running.addr);
        println!("server: the web console is at http://{}/console", running.addr);
        if running.generated_secrets_key {
            println!("server: development mode generated a SECRETS_KEY for this run (set SECRETS_KEY to keep sealed secrets across restarts)");
        }
        if !running.demo_tokens.is_empty() {
            println!("server: development mode: the embedded account platform's demo tokens:");
            for (who, token) in &running.demo_tokens {
                println!("  {who}: {token}");
            }
        }
        let handle = running.server.handle();
        let serving = tokio::spawn(running.server);
        let signal = stop_signal().await;
        // The stop sequence: /readyz fails at once; on SIGTERM the process keeps serving for
        // SHUTDOWN_DELAY_SECONDS while load balancers take it out; then waiting long-polls
        // answer with the version there is, the listener closes and requests in flight get
        // DRAIN_TIMEOUT_SECONDS to finish; then the provisioning workers finish their step and
        // give their leases back at once (another process takes the work on).
        running.draining.store(true, std::sync::atomic::Ordering::SeqCst);
        println!("server: {signal}: stopping (/readyz now fails)");
        if signal == "SIGTERM" && !shutdown_delay.is_zero() {
            tokio::time::sleep(shutdown_delay).await;
        }
        running.feed.close();
        handle.stop(true).await;
        serving.await??;
        running.reconciler.shutdown().await;
        // The last notifications sent, and no libpq call left running on the notifier's or
        // the change feed's thread when the process exits.
        let (store, feed) = (running.store.clone(), running.feed.clone());
        let _ = tokio::task::spawn_blocking(move || {
            feed.stop();
            store.close_notifier();
        })
        .await;
        println!("server: stopped");
        anyhow::Ok(())
    });
    // Blocking database calls still running are abandoned rather than waited for.
    runtime.shutdown_timeout(std::time::Duration::from_secs(3));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("server: {e:#}");
            ExitCode::FAILURE
        }
    }
}

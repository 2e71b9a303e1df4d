//! `platform-stub`: the test account platform as a process, for manual runs and `make run`
//! examples. `platform-stub [--bind 127.0.0.1:9090] [--directory file.json] [--service-token T]`.

use std::net::SocketAddr;
use std::process::ExitCode;

use platform_stub::{DEFAULT_SERVICE_TOKEN, Directory, StubPlatform};

const USAGE: &str =
    "usage: platform-stub [--bind ADDR] [--directory FILE.json] [--service-token TOKEN]
  --bind           address to listen on (default 127.0.0.1:9090)
  --directory      organizations and users as JSON (default: the development demo directory)
  --service-token  the token organization lookups must carry
                   (default: $PLATFORM_STUB_SERVICE_TOKEN or a fixed test token)";

struct Args {
    bind: SocketAddr,
    directory: Option<String>,
    service_token: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        bind: SocketAddr::from(([127, 0, 0, 1], 9090)),
        directory: None,
        service_token: std::env::var("PLATFORM_STUB_SERVICE_TOKEN")
            .unwrap_or_else(|_| DEFAULT_SERVICE_TOKEN.to_owned()),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--bind" => {
                let v = value()?;
                args.bind = v.parse().map_err(|e| format!("--bind {v}: {e}"))?;
            }
            "--directory" => args.directory = Some(value()?),
            "--service-token" => args.service_token = value()?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(args)
}

fn load_directory(path: Option<&str>) -> Result<Directory, String> {
    let Some(path) = path else {
        return Ok(Directory::demo());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("{path}: {e}"))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("platform-stub: {e}");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    let directory = match load_directory(args.directory.as_deref()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("platform-stub: cannot read the directory: {e}");
            return ExitCode::from(2);
        }
    };
    let tokens = directory.tokens();
    let handle = match StubPlatform::start_on(args.bind, directory, &args.service_token) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("platform-stub: cannot listen on {}: {e}", args.bind);
            return ExitCode::FAILURE;
        }
    };
    // This process exists to hand test tokens out, so printing them is its job.
    println!("ACCOUNT_PLATFORM_URL={}", handle.url());
    println!("ACCOUNT_PLATFORM_SERVICE_TOKEN={}", handle.service_token());
    for t in tokens {
        println!("token {:<64} {}", t.token, t.description);
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match rt {
        Ok(rt) => {
            let _ = rt.block_on(tokio::signal::ctrl_c());
        }
        Err(e) => {
            eprintln!("platform-stub: {e}");
            return ExitCode::FAILURE;
        }
    }
    handle.stop();
    ExitCode::SUCCESS
}

//! Item 6: the gateway next to the proxies users would otherwise pick, all in front of one
//! upstream (nginx answering `return 200` with a 3-byte body): nginx as a plain reverse proxy,
//! nginx with `auth_basic`, Caddy with `basicauth`, and the gateway's Basic, Token and
//! OIDC-Bearer routes, whose auth servers are created through the API of a server G.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine;
use serde_json::{Value, json};
use tokio::process::Command;

use super::Bench;
use super::cpu::ProcessTimes;
use super::process::{Proc, find_program, free_port, output};
use super::server::random_hex;
use crate::results::{Gateway, GatewayReload, ProxyCpu, WebSocketEcho, WrkRun};

const BASIC_USER: &str = "bench";
const OIDC_CLIENT: &str = "bench-gateway";

/// An nginx configuration whose files all stay in `dir`, with `servers` in its http block.
pub fn nginx_conf(dir: &Path, upstream_port: u16, servers: &str) -> String {
    let d = dir.display();
    format!(
        "worker_processes auto;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests 1000000;
    upstream bench_upstream {{
        server 127.0.0.1:{upstream_port};
        keepalive 128;
        keepalive_requests 1000000;
    }}
{servers}
}}
"
    )
}

/// The upstream's server block: 200 with `ok\n`.
fn upstream_server(port: u16) -> String {
    format!(
        "    server {{
        listen 127.0.0.1:{port};
        location / {{ return 200 \"ok\\n\"; }}
    }}"
    )
}

/// Connections to the upstream are kept alive, as any proxy in production would be set up.
const PROXY_BLOCK: &str =
    "proxy_pass http://bench_upstream; proxy_http_version 1.1; proxy_set_header Connection \"\";";

/// A certificate and its key (PEM files), the one both TLS listeners serve.
pub struct TlsFiles<'a> {
    pub cert: &'a Path,
    pub key: &'a Path,
}

/// The proxy's three servers: plain, `auth_basic` with `htpasswd`, and plain over TLS.
fn proxy_servers(plain: u16, basic: u16, tls: u16, htpasswd: &Path, files: &TlsFiles) -> String {
    format!(
        "    server {{
        listen 127.0.0.1:{plain};
        location / {{ {PROXY_BLOCK} }}
    }}
    server {{
        listen 127.0.0.1:{basic};
        location / {{
            auth_basic \"bench\";
            auth_basic_user_file {};
            {PROXY_BLOCK}
        }}
    }}
    server {{
        listen 127.0.0.1:{tls} ssl;
        ssl_certificate {};
        ssl_certificate_key {};
        location / {{ {PROXY_BLOCK} }}
    }}",
        htpasswd.display(),
        files.cert.display(),
        files.key.display()
    )
}

pub fn caddyfile(dir: &Path, port: u16, upstream_port: u16, bcrypt_hash: &str) -> String {
    format!(
        "{{
    admin off
    auto_https off
    storage file_system {}/data
}}
http://127.0.0.1:{port} {{
    basicauth {{
        {BASIC_USER} {bcrypt_hash}
    }}
    reverse_proxy 127.0.0.1:{upstream_port}
}}
",
        dir.display()
    )
}

/// The run with the median req/s (the lower middle one of an even count); a run with errors is
/// taken as it is: the report says it was not clean.
fn median_run(runs: &[Measured]) -> Measured {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.0.rps.total_cmp(&b.0.rps));
    sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or_default()
}

/// A wrk run, and the CPU per request of the proxy it measured when that was read.
type Measured = (WrkRun, Option<ProxyCpu>);

/// The gateway's routes: one per auth server, all to the upstream, and `/ws` behind the token
/// to the WebSocket echo; and the certificate of its TLS listener (the default: wrk asks for
/// 127.0.0.1, which names no host).
pub fn routes(upstream_port: u16, websocket_port: u16, files: &TlsFiles) -> String {
    let certificate = format!(
        "\n[[certificate]]\ndefault = true\ncert = {:?}\nkey = {:?}\n",
        files.cert.display().to_string(),
        files.key.display().to_string()
    );
    ["basic", "token", "oidc"]
        .map(|kind| {
            format!(
                "[[route]]
path_prefix = \"/{kind}\"
upstream = \"http://127.0.0.1:{upstream_port}\"
organization = \"acme\"
environment = \"production\"
auth_server = \"bench-{kind}\"
"
            )
        })
        .join("\n")
        + &format!(
            "\n[[route]]
path_prefix = \"/ws\"
upstream = \"http://127.0.0.1:{websocket_port}\"
organization = \"acme\"
environment = \"production\"
auth_server = \"bench-token\"
"
        )
        + &certificate
}

/// The output of a helper tool, which must succeed.
async fn tool_line(program: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = output(program, args).await?;
    if !out.status.success() {
        bail!(
            "{} {} failed: {}",
            program.display(),
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Until `url` answers 200 with `headers` (the gateway reads auth servers again each second).
async fn wait_200(http: &reqwest::Client, url: &str, header: Option<&str>) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut last = String::from("nothing");
    while start.elapsed() < Duration::from_secs(20) {
        let mut req = http.get(url);
        if let Some((name, value)) = header.and_then(|h| h.split_once(": ")) {
            req = req.header(name, value);
        }
        match req.send().await {
            Ok(r) if r.status().as_u16() == 200 => return Ok(()),
            Ok(r) => last = r.status().to_string(),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("{url} answered {last} instead of 200 after 20 s")
}

/// Creates an auth server through the API; returns its id.
async fn create_auth_server(b: &Bench<'_>, api: &str, body: Value) -> anyhow::Result<String> {
    let res = b
        .http
        .post(format!("{api}/v1/public/gateway/auth-servers"))
        .bearer_auth(b.token)
        .json(&body)
        .send()
        .await?;
    let status = res.status();
    if status.as_u16() != 201 {
        let text = res.text().await.unwrap_or_default();
        bail!(
            "creating the auth server {} answered {status}: {text}",
            body["name"]
        );
    }
    let created: Value = res.json().await?;
    created["id"]
        .as_str()
        .map(str::to_owned)
        .context("the created auth server has no id")
}

async fn nginx(nginx: &Path, name: &str, dir: &Path, logs: &Path) -> anyhow::Result<Proc> {
    let mut cmd = Command::new(nginx);
    cmd.arg("-c")
        .arg(dir.join("nginx.conf"))
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .args(["-g", "daemon off;"]);
    Proc::spawn(name, cmd, logs)
}

/// Rounds of the reload measurement (a credential added, then removed, through the API).
const RELOAD_ROUNDS: usize = 20;
/// Messages of the WebSocket echo, one at a time.
const WEBSOCKET_MESSAGES: usize = 10_000;

/// Everything item 6 measures.
pub struct Item {
    pub rows: Vec<Gateway>,
    pub reload: GatewayReload,
    pub websocket: WebSocketEcho,
}

pub async fn run(b: &Bench<'_>) -> anyhow::Result<Item> {
    let s = b.settings;
    crate::say!("item 6: the gateway next to nginx and Caddy, all in front of one upstream");
    let nginx_bin = find_program("nginx").context("nginx is not installed")?;
    let caddy_bin = find_program("caddy").context("caddy is not installed")?;
    let openssl = find_program("openssl").context("openssl is not installed")?;
    let gw = b.work.join(format!("gateway-{}", b.run_id));
    let _ = std::fs::remove_dir_all(&gw);
    for d in ["nginx-upstream", "nginx-proxy", "caddy"] {
        std::fs::create_dir_all(gw.join(d))?;
    }
    let mut ports = [0u16; 8];
    for p in &mut ports {
        *p = free_port()?;
    }
    let [
        port_up,
        port_nginx,
        port_nginx_basic,
        port_nginx_tls,
        port_caddy,
        port_gw,
        port_gw_tls,
        port_issuer,
    ] = ports;
    // One certificate for both TLS listeners: ECDSA P-256, as a current deployment would pick.
    // It names 127.0.0.1 too, the host wrk asks for: the gateway answers 421 to a request for
    // a host its connection's certificate does not cover.
    let (cert, key) = (gw.join("tls.crt"), gw.join("tls.key"));
    let made = output(
        &openssl,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=bench.test",
            "-addext",
            "subjectAltName=DNS:bench.test,IP:127.0.0.1",
            "-keyout",
            &key.display().to_string(),
            "-out",
            &cert.display().to_string(),
        ],
    )
    .await?;
    if !made.status.success() {
        bail!(
            "openssl could not make the TLS certificate: {}",
            String::from_utf8_lossy(&made.stderr)
        );
    }
    let tls_files = TlsFiles {
        cert: &cert,
        key: &key,
    };
    let password = format!("bench-pw-{}", random_hex(9));
    let static_token = format!("bench-static-token-{}", random_hex(12));
    let basic_header = format!(
        "Authorization: Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{BASIC_USER}:{password}"))
    );

    let up_dir = gw.join("nginx-upstream");
    std::fs::write(
        up_dir.join("nginx.conf"),
        nginx_conf(&up_dir, port_up, &upstream_server(port_up)),
    )?;
    let proxy_dir = gw.join("nginx-proxy");
    let apr1 = tool_line(&openssl, &["passwd", "-apr1", &password]).await?;
    let htpasswd = proxy_dir.join("htpasswd");
    std::fs::write(&htpasswd, format!("{BASIC_USER}:{apr1}\n"))?;
    std::fs::write(
        proxy_dir.join("nginx.conf"),
        nginx_conf(
            &proxy_dir,
            port_up,
            &proxy_servers(
                port_nginx,
                port_nginx_basic,
                port_nginx_tls,
                &htpasswd,
                &tls_files,
            ),
        ),
    )?;
    let caddy_dir = gw.join("caddy");
    let bcrypt = tool_line(&caddy_bin, &["hash-password", "--plaintext", &password]).await?;
    std::fs::write(
        caddy_dir.join("Caddyfile"),
        caddyfile(&caddy_dir, port_caddy, port_up, &bcrypt),
    )?;
    let websocket_echo = super::websocket::start_echo().await?;
    std::fs::write(
        gw.join("routes.toml"),
        routes(port_up, websocket_echo.port(), &tls_files),
    )?;

    let mut upstream = nginx(&nginx_bin, "nginx-upstream", &up_dir, &b.logs).await?;
    upstream.wait_port(port_up, Duration::from_secs(10)).await?;
    let mut proxy = nginx(&nginx_bin, "nginx-proxy", &proxy_dir, &b.logs).await?;
    proxy
        .wait_port(port_nginx_basic, Duration::from_secs(10))
        .await?;
    let mut cmd = Command::new(&caddy_bin);
    cmd.args(["run", "--adapter", "caddyfile", "--config"])
        .arg(caddy_dir.join("Caddyfile"))
        .env("HOME", &caddy_dir)
        .env("XDG_DATA_HOME", caddy_dir.join("data"))
        .env("XDG_CONFIG_HOME", caddy_dir.join("config"));
    let mut caddy = Proc::spawn("caddy", cmd, &b.logs)?;
    caddy.wait_port(port_caddy, Duration::from_secs(10)).await?;

    let token_file = gw.join("oidc-token");
    let mut cmd = Command::new(b.bin.join("bench-oidc-issuer"));
    cmd.args([
        "--bind",
        &format!("127.0.0.1:{port_issuer}"),
        "--audience",
        OIDC_CLIENT,
        "--token-out",
    ])
    .arg(&token_file);
    let mut issuer = Proc::spawn("oidc-issuer", cmd, &b.logs)?;
    let start = Instant::now();
    let oidc_token = loop {
        // The issuer writes the file whole (through a rename) once it listens.
        if let Some(t) = std::fs::read_to_string(&token_file)
            .ok()
            .filter(|t| !t.is_empty())
        {
            break t;
        }
        issuer.check_running()?;
        if start.elapsed() > Duration::from_secs(20) {
            bail!("bench-oidc-issuer wrote no token within 20 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    crate::say!("creating the gateway's auth servers through a server G");
    let g = b.env.start("g", 60).await?;
    let created = async {
        create_auth_server(
            b,
            &g.url,
            json!({"organization": "acme", "name": "bench-basic", "environment": "production",
                "type": "basic", "config": {"realm": "bench", "credentials": [
                    {"username": BASIC_USER, "password": password}]}}),
        )
        .await?;
        let token_server = create_auth_server(
            b,
            &g.url,
            json!({"organization": "acme", "name": "bench-token", "environment": "production",
                "type": "token", "config": {"tokens": [static_token]}}),
        )
        .await?;
        create_auth_server(
            b,
            &g.url,
            json!({"organization": "acme", "name": "bench-oidc", "environment": "production",
                "type": "oidc", "config": {"issuer_url": format!("http://127.0.0.1:{port_issuer}"),
                "redirect_path": "/oauth/callback", "client_id": OIDC_CLIENT,
                "client_secret": "bench-secret",
                "authorized_domain": format!("127.0.0.1:{port_gw}"), "username_claim": "sub"}}),
        )
        .await?;
        anyhow::Ok(token_server)
    }
    .await;
    g.stop().await?;
    let token_server = created?;

    let mut cmd = Command::new(b.bin.join("gateway"));
    cmd.env("DATABASE_URL", &b.env.database_url)
        .env("GATEWAY_BIND_ADDR", format!("127.0.0.1:{port_gw}"))
        .env("GATEWAY_TLS_BIND_ADDR", format!("127.0.0.1:{port_gw_tls}"))
        .env("SECRETS_KEY", &b.env.secrets_key)
        .env("GATEWAY_ROUTES_FILE", gw.join("routes.toml"))
        // Only for the reload's probes, each from its own client address (gateway_reload.rs);
        // wrk sends no X-Forwarded-For.
        .env("GATEWAY_TRUSTED_PROXIES", "127.0.0.1/32")
        .env("RUST_LOG", "warn");
    let mut gateway = Proc::spawn("gateway", cmd, &b.logs)?;
    gateway.wait_port(port_gw, Duration::from_secs(20)).await?;

    let u = "http://127.0.0.1";
    let bearer = |t: &str| format!("Authorization: Bearer {t}");
    let (token_header, oidc_header) = (bearer(&static_token), bearer(oidc_token.trim()));
    // (file name, URL, header) of each measured path, in report order.
    let targets: [(&str, String, Option<&str>); 8] = [
        ("nginx", format!("{u}:{port_nginx}/bench"), None),
        (
            "nginx-basic",
            format!("{u}:{port_nginx_basic}/bench"),
            Some(&basic_header),
        ),
        (
            "caddy-basic",
            format!("{u}:{port_caddy}/bench"),
            Some(&basic_header),
        ),
        (
            "gateway-basic",
            format!("{u}:{port_gw}/basic/bench"),
            Some(&basic_header),
        ),
        (
            "gateway-token",
            format!("{u}:{port_gw}/token/bench"),
            Some(&token_header),
        ),
        (
            "gateway-oidc",
            format!("{u}:{port_gw}/oidc/bench"),
            Some(&oidc_header),
        ),
        (
            "nginx-tls",
            format!("https://127.0.0.1:{port_nginx_tls}/bench"),
            None,
        ),
        (
            "gateway-token-tls",
            format!("https://127.0.0.1:{port_gw_tls}/token/bench"),
            Some(&token_header),
        ),
    ];
    // The certificate is the run's own, signed by nobody a client trusts: this check accepts it
    // as it is (wrk does not check certificates either).
    let tls_check = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .build()?;
    for (_, url, header) in &targets {
        let client = if url.starts_with("https:") {
            &tls_check
        } else {
            &b.http
        };
        wait_200(client, url, *header).await?;
    }
    // Whose CPU is read around each run: nginx's plain proxy (its master and workers) and the
    // gateway on its Token route.
    let cpu_of: [Option<u32>; 8] = [
        Some(proxy.pid()),
        None,
        None,
        None,
        Some(gateway.pid()),
        None,
        None,
        None,
    ];
    let mut rows = Vec::new();
    for &c in &s.gateway_connections {
        // Every target in turn, round after round; each one's median round is its figure.
        let mut rounds: Vec<Vec<Measured>> = vec![Vec::new(); targets.len()];
        for round in 0..s.gateway_rounds {
            for (((name, url, header), measured), pid) in
                targets.iter().zip(rounds.iter_mut()).zip(cpu_of)
            {
                let headers: Vec<&str> = header.iter().copied().collect();
                let label = if s.gateway_rounds == 1 {
                    format!("gw-{name}-c{c}")
                } else {
                    format!("gw-{name}-c{c}-r{}", round + 1)
                };
                let before = pid.and_then(ProcessTimes::read);
                let run = b.wrk.run(&label, c, s.duration_s, url, &headers).await?;
                let after = pid.and_then(ProcessTimes::read);
                let cpu = before
                    .zip(after)
                    .map(|(before, after)| before.per_request(&after, run.requests));
                measured.push((run, cpu));
            }
        }
        let runs: Vec<Measured> = rounds.iter().map(|r| median_run(r)).collect();
        if let [
            (nginx, nginx_cpu),
            (nginx_basic, _),
            (caddy_basic, _),
            (gateway_basic, _),
            (gateway_token, gateway_token_cpu),
            (gateway_oidc, _),
            (nginx_tls, _),
            (gateway_token_tls, _),
        ] = runs[..]
        {
            rows.push(Gateway {
                connections: c,
                nginx,
                nginx_basic,
                caddy_basic,
                gateway_basic,
                gateway_token,
                gateway_oidc,
                nginx_tls: Some(nginx_tls),
                gateway_token_tls: Some(gateway_token_tls),
                nginx_cpu,
                gateway_token_cpu,
            });
        }
    }
    crate::say!(
        "the gateway's reload: a credential added and removed through a server G, {RELOAD_ROUNDS} times"
    );
    let g = b.env.start("g", 60).await?;
    let reload = super::gateway_reload::measure(
        &g.url,
        b.token,
        &token_server,
        &format!("{u}:{port_gw}/token/bench"),
        RELOAD_ROUNDS,
    )
    .await;
    g.stop().await?;
    let reload = reload?;
    crate::say!(
        "WebSocket echo: {WEBSOCKET_MESSAGES} messages one at a time, straight and through the gateway"
    );
    let websocket = super::websocket::measure(
        websocket_echo,
        &format!("ws://127.0.0.1:{port_gw}/ws/echo"),
        &format!("Bearer {static_token}"),
        WEBSOCKET_MESSAGES,
    )
    .await?;
    for p in [gateway, issuer, caddy, proxy, upstream] {
        p.stop().await?;
    }
    let _ = std::fs::remove_dir_all(&gw);
    Ok(Item {
        rows,
        reload,
        websocket,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_target_stands_for_its_median_round() {
        let run = |rps: f64| {
            let cpu = ProxyCpu {
                user_us: rps,
                system_us: 0.0,
            };
            (
                WrkRun {
                    rps,
                    ..WrkRun::default()
                },
                Some(cpu),
            )
        };
        for (rounds, median) in [
            (vec![run(3.0), run(1.0), run(2.0)], 2.0),
            (vec![run(4.0), run(1.0), run(3.0), run(2.0)], 2.0),
            (vec![run(5.0)], 5.0),
        ] {
            let (wrk, cpu) = median_run(&rounds);
            assert_eq!(wrk.rps, median, "{rounds:?}");
            // The CPU figure is the same run's.
            assert_eq!(cpu.map(|c| c.user_us), Some(median), "{rounds:?}");
        }
    }

    #[test]
    fn configurations_are_those_of_the_measured_setup() {
        let dir = Path::new("/w/gw/nginx-proxy");
        let files = TlsFiles {
            cert: Path::new("/w/gw/tls.crt"),
            key: Path::new("/w/gw/tls.key"),
        };
        let conf = nginx_conf(
            dir,
            7000,
            &proxy_servers(7001, 7002, 7004, &dir.join("htpasswd"), &files),
        );
        for want in [
            "pid /w/gw/nginx-proxy/nginx.pid;",
            "events { worker_connections 4096; }",
            "        server 127.0.0.1:7000;\n        keepalive 128;",
            "listen 127.0.0.1:7001;\n        location / { proxy_pass http://bench_upstream; proxy_http_version 1.1; proxy_set_header Connection \"\"; }",
            "auth_basic_user_file /w/gw/nginx-proxy/htpasswd;",
            "listen 127.0.0.1:7004 ssl;\n        ssl_certificate /w/gw/tls.crt;\n        ssl_certificate_key /w/gw/tls.key;",
        ] {
            assert!(conf.contains(want), "{want:?} missing in\n{conf}");
        }
        assert!(upstream_server(7000).contains("return 200 \"ok\\n\";"));
        let caddy = caddyfile(Path::new("/w/c"), 7003, 7000, "$2a$14$x");
        assert!(caddy.contains("storage file_system /w/c/data"));
        assert!(caddy.contains("    basicauth {\n        bench $2a$14$x\n    }"));
        assert!(caddy.contains("reverse_proxy 127.0.0.1:7000"));
        let r = routes(7000, 7005, &files);
        assert_eq!(r.matches("[[route]]").count(), 4);
        assert!(r.contains("path_prefix = \"/ws\"\nupstream = \"http://127.0.0.1:7005\""));
        assert!(r.ends_with(
            "[[certificate]]\ndefault = true\ncert = \"/w/gw/tls.crt\"\nkey = \"/w/gw/tls.key\"\n"
        ));
        assert!(r.contains("path_prefix = \"/oidc\"\nupstream = \"http://127.0.0.1:7000\"\norganization = \"acme\"\nenvironment = \"production\"\nauth_server = \"bench-oidc\""));
    }
}

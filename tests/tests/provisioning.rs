//! Provisioning through HTTP: the whole lifecycle observed with the long-poll,
//! kubeconfigs that kubectl's strict check accepts, two servers sharing one database, a crash
//! and restart of the real binary, and injected failures.
#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use blackbox::process::{Scratch, ServerProcess, free_port};
use blackbox::*;
use serde_json::{Value, json};

const FAST: &[(&str, &str)] = &[("RECONCILER_POLL_MS", "20")];
const LIMIT: Duration = Duration::from_secs(60);

/// Long-polls the state until the phase is `phase`; returns the version seen.
async fn await_phase(app: &TestApp, id: &str, phase: &str) -> i64 {
    let mut since = 0;
    let deadline = Instant::now() + LIMIT;
    loop {
        let a = app
            .get(
                &format!("/v1/public/clusters/{id}/state?since={since}&timeout_seconds=5"),
                TOKEN_ACME_MEMBER,
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.text());
        let s = a.json();
        since = s["version"].as_i64().unwrap();
        if s["phase"] == phase {
            return since;
        }
        assert!(Instant::now() < deadline, "never reached {phase}: {s}");
    }
}

fn kubectl_strict_check(yaml: &str) -> Option<String> {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("kubectl is not on the PATH: skipping the strict kubeconfig check");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("kubeconfig-{}", uuid::Uuid::new_v4()));
    std::fs::write(&dir, yaml).unwrap();
    let out = Command::new("kubectl")
        .args([
            "--kubeconfig",
            dir.to_str().unwrap(),
            "config",
            "view",
            "--minify",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl refused the kubeconfig: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let server = Command::new("kubectl")
        .args([
            "--kubeconfig",
            dir.to_str().unwrap(),
            "config",
            "view",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&dir);
    Some(String::from_utf8_lossy(&server.stdout).into_owned())
}

fn openssl_parses_ca(yaml: &str) {
    let line = yaml
        .lines()
        .find(|l| l.trim_start().starts_with("certificate-authority-data:"))
        .unwrap();
    let b64 = line.split(':').nth(1).unwrap().trim();
    let pem = Command::new("base64")
        .arg("-d")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b64.as_bytes())?;
            c.wait_with_output()
        });
    let Ok(pem) = pem else { return };
    let Ok(mut child) = Command::new("openssl")
        .args(["x509", "-noout", "-subject"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
    else {
        eprintln!("openssl is not on the PATH: skipping the CA parse check");
        return;
    };
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(&pem.stdout).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "openssl could not parse the CA");
}

async fn nodes(app: &TestApp, id: &str) -> Vec<Value> {
    app.get(
        &format!("/v1/public/clusters/{id}/nodes"),
        TOKEN_ACME_MEMBER,
    )
    .await
    .json()["items"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_lifecycle_through_http() {
    let app = TestApp::spawn_with(FAST).await;
    let c = app.create_cluster("life-1").await;
    let id = c["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/public/clusters/{id}");
    await_phase(&app, &id, "Provisioned").await;
    let cluster = app.get(&path, TOKEN_ACME_MEMBER).await.json();
    assert_eq!(
        cluster["hub_registration"],
        json!({"status": "ready", "reason": null})
    );
    assert_eq!(cluster["node_pools"][0]["status"], "Ready");
    assert_eq!(nodes(&app, &id).await.len(), 2);
    let node_re = regex_lite(&nodes(&app, &id).await);
    assert!(node_re, "node names match the node-name rule");

    let kubeconfig = the_kubeconfig_is_stable_and_kubectl_accepts_it(&app, &path).await;
    scale_the_pool(&app, &id, &path).await;
    add_a_pool_then_delete_it(&app, &id, &path).await;
    a_deleted_node_is_replaced(&app, &id, &path).await;
    an_elastic_ip_is_allocated_and_released(&app, &path).await;
    a_firewall_rule_becomes_active(&app, &path).await;
    an_exposure_change_reissues_the_kubeconfig(&app, &path, &kubeconfig).await;
    deleting_removes_everything(&app, &path).await;
}

/// The kubeconfig: the same on every download, kubectl's strict check, a parsable CA. Returns it.
async fn the_kubeconfig_is_stable_and_kubectl_accepts_it(app: &TestApp, path: &str) -> String {
    let k1 = app
        .get(&format!("{path}/kubeconfig"), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(
        (k1.status, k1.header("content-type").as_deref()),
        (200, Some("application/yaml"))
    );
    let k1b = app
        .get(&format!("{path}/kubeconfig"), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(k1.text(), k1b.text());
    let server = kubectl_strict_check(&k1.text());
    if let Some(s) = &server {
        assert!(
            s.starts_with("https://") && s.ends_with(".k8s.example.com:6443"),
            "{s}"
        );
    }
    openssl_parses_ca(&k1.text());
    let kj = app
        .get(&format!("{path}/kubeconfig?format=json"), TOKEN_ACME_MEMBER)
        .await
        .json();
    assert_eq!(kj["kubeconfig"], k1.text());
    // The same YAML as plain text to a client that accepts only that (what a generated client
    // reading the document's text/plain form may ask for); anything else gets YAML.
    for (accept, media_type) in [
        ("text/plain", "text/plain; charset=utf-8"),
        ("text/plain, application/yaml;q=0.5", "application/yaml"),
        ("*/*", "application/yaml"),
        ("application/json", "application/yaml"),
    ] {
        let a = app
            .send(
                app.request(
                    reqwest::Method::GET,
                    &format!("{path}/kubeconfig"),
                    Some(TOKEN_ACME_MEMBER),
                )
                .header("Accept", accept),
            )
            .await;
        assert_eq!(
            (a.status, a.header("content-type").as_deref()),
            (200, Some(media_type)),
            "Accept: {accept}"
        );
        assert_eq!(a.text(), k1.text());
    }
    k1.text()
}

/// The default pool scaled from 2 to 3 nodes.
async fn scale_the_pool(app: &TestApp, id: &str, path: &str) {
    let a = app
        .patch(
            &format!("{path}/node-pools/default"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"count": 3}),
        )
        .await;
    assert_eq!(
        (a.status, a.json()["status"].clone()),
        (202, json!("Scaling"))
    );
    app.wait_for(path, LIMIT, |c| {
        c["node_pools"][0]["status"] == "Ready" && c["node_pools"][0]["count"] == 3
    })
    .await;
    assert_eq!(nodes(app, id).await.len(), 3);
}

/// A second pool: Provisioning, Ready with its node, then deleted.
async fn add_a_pool_then_delete_it(app: &TestApp, id: &str, path: &str) {
    let a = app
        .post(
            &format!("{path}/node-pools"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "extra", "size": "kube.m5.large", "count": 1}),
        )
        .await;
    assert_eq!(
        (
            a.status,
            a.json()["status"].clone(),
            a.json()["root_volume_size_gib"].clone()
        ),
        (202, json!("Provisioning"), json!(60))
    );
    app.wait_for(path, LIMIT, |c| {
        c["node_pools"]
            .as_array()
            .is_some_and(|p| p.len() == 2 && p.iter().all(|p| p["status"] == "Ready"))
    })
    .await;
    assert_eq!(nodes(app, id).await.len(), 4);
    let a = app
        .delete(&format!("{path}/node-pools/extra"), TOKEN_ACME_SUPER_ADMIN)
        .await;
    assert_eq!(
        (a.status, a.json()["status"].clone()),
        (202, json!("Deleting"))
    );
    app.wait_for(path, LIMIT, |c| {
        c["node_pools"].as_array().is_some_and(|p| p.len() == 1)
    })
    .await;
    assert_eq!(nodes(app, id).await.len(), 3);
}

/// A deleted node: Deleting, then replaced by a new one (the pool keeps its count).
async fn a_deleted_node_is_replaced(app: &TestApp, id: &str, path: &str) {
    let victim = nodes(app, id).await[0]["name"].as_str().unwrap().to_owned();
    let a = app
        .delete(&format!("{path}/nodes/{victim}"), TOKEN_ACME_SUPER_ADMIN)
        .await;
    assert_eq!(
        (a.status, a.json()["status"].clone()),
        (202, json!("Deleting"))
    );
    let deadline = Instant::now() + LIMIT;
    loop {
        let list = nodes(app, id).await;
        if list.len() == 3
            && list
                .iter()
                .all(|n| n["status"] == "Ready" && n["name"] != victim.as_str())
        {
            break;
        }
        assert!(Instant::now() < deadline, "node never replaced: {list:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An Elastic IP: Pending, Ready with an address, released, gone.
async fn an_elastic_ip_is_allocated_and_released(app: &TestApp, path: &str) {
    let a = app
        .post(
            &format!("{path}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "web", "exposure": "private"}),
        )
        .await;
    assert_eq!(
        (
            a.status,
            a.json()["status"].clone(),
            a.json()["address"].clone()
        ),
        (202, json!("Pending"), Value::Null)
    );
    assert_eq!(a.json()["annotation"]["key"], "k8s.example.com/elastic-ip");
    let eip = a.json()["id"].as_str().unwrap().to_owned();
    let ready = app
        .wait_for(&format!("{path}/elastic-ips/{eip}"), LIMIT, |e| {
            e["status"] == "Ready"
        })
        .await;
    assert!(
        ready["address"]
            .as_str()
            .is_some_and(|a| a.starts_with("10.96.")),
        "{ready}"
    );
    let a = app
        .delete(&format!("{path}/elastic-ips/{eip}"), TOKEN_ACME_SUPER_ADMIN)
        .await;
    assert_eq!(
        (a.status, a.json()["status"].clone()),
        (202, json!("Deleting"))
    );
    let deadline = Instant::now() + LIMIT;
    while app
        .get(&format!("{path}/elastic-ips/{eip}"), TOKEN_ACME_MEMBER)
        .await
        .status
        != 404
    {
        assert!(Instant::now() < deadline, "Elastic IP never released");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A firewall rule: Pending, then Active.
async fn a_firewall_rule_becomes_active(app: &TestApp, path: &str) {
    let rule = json!({"name": "https", "protocol": "tcp", "source_cidrs": ["203.0.113.0/24"], "port_range": {"from": 443, "to": 443}});
    let a = app
        .post(
            &format!("{path}/firewall-rules"),
            TOKEN_ACME_SUPER_ADMIN,
            &rule,
        )
        .await;
    assert_eq!(
        (a.status, a.json()["status"].clone()),
        (202, json!("Pending"))
    );
    let rid = a.json()["id"].as_str().unwrap().to_owned();
    app.wait_for(&format!("{path}/firewall-rules/{rid}"), LIMIT, |r| {
        r["status"] == "Active"
    })
    .await;
}

/// Exposure public → private: the change finishes and the kubeconfig follows.
async fn an_exposure_change_reissues_the_kubeconfig(app: &TestApp, path: &str, before: &str) {
    let a = app
        .patch(
            &format!("{path}/exposure"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
    assert_eq!(
        (
            a.json()["exposure"].clone(),
            a.json()["exposure_change"]["to"].clone()
        ),
        (json!("public"), json!("private"))
    );
    let done = app
        .wait_for(path, LIMIT, |c| {
            c["exposure_change"].is_null() && c["exposure"] == "private"
        })
        .await;
    assert!(done["public_hostname"].is_null());
    let k2 = app
        .get(&format!("{path}/kubeconfig"), TOKEN_ACME_MEMBER)
        .await;
    assert_ne!(before, k2.text(), "the kubeconfig follows the exposure");
    if let Some(s) = kubectl_strict_check(&k2.text()) {
        assert!(s.ends_with(".internal:6443"), "{s}");
    }
}

/// Delete: Deleting, then gone with everything under it.
async fn deleting_removes_everything(app: &TestApp, path: &str) {
    let a = app.delete(path, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(
        (a.status, a.json()["phase"].clone()),
        (202, json!("Deleting"))
    );
    let deadline = Instant::now() + LIMIT;
    while app.get(path, TOKEN_ACME_MEMBER).await.status != 404 {
        assert!(Instant::now() < deadline, "cluster never deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(app.count_rows("nodes"), 0);
    assert_eq!(app.count_rows("elastic_ips"), 0);
    assert_eq!(app.count_rows("firewall_rules"), 0);
}

fn regex_lite(nodes: &[Value]) -> bool {
    nodes.iter().all(|n| {
        n["name"]
            .as_str()
            .is_some_and(|s| domain::names::NodeName::parse(s).is_ok())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_workers_off_a_cluster_stays_pending() {
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let c = app.create_cluster("idle-1").await;
    let id = c["id"].as_str().unwrap();
    let s = app
        .get(
            &format!("/v1/public/clusters/{id}/state?since=1&timeout_seconds=1"),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    assert_eq!(
        (
            s["phase"].clone(),
            s["changed"].clone(),
            s["version"].clone()
        ),
        (json!("Pending"), json!(false), json!(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_failure_gives_failed_with_the_reason() {
    let app = TestApp::spawn_with(&[
        ("RECONCILER_POLL_MS", "20"),
        ("PROVISIONER_FAIL_STEPS", "create_control_plane"),
    ])
    .await;
    let c = app.create_cluster("doomed").await;
    let id = c["id"].as_str().unwrap().to_owned();
    await_phase(&app, &id, "Failed").await;
    let c = app
        .get(&format!("/v1/public/clusters/{id}"), TOKEN_ACME_MEMBER)
        .await
        .json();
    assert!(
        c["failure_reason"].as_str().is_some_and(|r| !r.is_empty()),
        "{c}"
    );
    let k = app
        .get(
            &format!("/v1/public/clusters/{id}/kubeconfig"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(
        (k.status, k.problem_code().as_str()),
        (409, "cluster_failed")
    );
    // A failed cluster can still be deleted.
    assert_eq!(
        app.delete(&format!("/v1/public/clusters/{id}"), TOKEN_ACME_SUPER_ADMIN)
            .await
            .status,
        202
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_through_one_server_wakes_a_long_poll_on_another() {
    let a = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let b = a.second_server(&[("RECONCILER_WORKERS", "0")]).await;
    let c = a.create_cluster("shared-1").await;
    let id = c["id"].as_str().unwrap().to_owned();
    let poll = {
        let url = format!(
            "{}/v1/public/clusters/{id}/state?since=1&timeout_seconds=30",
            b.url
        );
        let client = b.client.clone();
        tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(TOKEN_ACME_MEMBER)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let p = a
        .patch(
            &format!("/v1/public/clusters/{id}"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "changed"}),
        )
        .await;
    assert_eq!(p.status, 200);
    let s = poll.await.unwrap();
    assert_eq!(
        (s["changed"].clone(), s["version"].clone()),
        (json!(true), json!(2))
    );
}

/// Creates cluster `name` with `X-Request-Id: request_id` under the caller's trace `trace_id`,
/// then reads it (with `X-Request-Id: read_id` when given) until it is Provisioned; its id.
async fn create_and_wait_provisioned(
    app: &TestApp,
    base: &str,
    name: &str,
    request_id: &str,
    trace_id: &str,
    read_id: Option<&str>,
) -> String {
    let body = json!({"organization": "acme", "name": name, "node_pools": [{"size": "kube.c5.large", "count": 1}]});
    let a = app
        .send(
            app.client
                .post(format!("{base}/v1/public/clusters"))
                .bearer_auth(TOKEN_ACME_SUPER_ADMIN)
                .header("X-Request-Id", request_id)
                .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
                .json(&body),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    let id = a.json()["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + LIMIT;
    loop {
        let mut read = app
            .client
            .get(format!("{base}/v1/public/clusters/{id}"))
            .bearer_auth(TOKEN_ACME_SUPER_ADMIN);
        if let Some(read_id) = read_id {
            read = read.header("X-Request-Id", read_id);
        }
        let c = app.send(read).await;
        if c.json()["phase"] == "Provisioned" {
            return id;
        }
        assert!(Instant::now() < deadline, "never Provisioned: {}", c.text());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The real binary as a child process.
/// The server binary over the test's database and platform, with these settings on top; its
/// log goes to `log`.
fn start_binary(
    app: &TestApp,
    port: u16,
    extra: &[(&str, &str)],
    log: std::path::PathBuf,
) -> ServerProcess {
    let mut settings: Vec<(&str, String)> = vec![
        ("DATABASE_URL", app.db.url.clone()),
        ("ACCOUNT_PLATFORM_URL", app.platform.url()),
        (
            "ACCOUNT_PLATFORM_SERVICE_TOKEN",
            app.platform.service_token().to_owned(),
        ),
        ("SECRETS_KEY", TEST_SECRETS_KEY.to_owned()),
        ("RUST_LOG", "warn".to_owned()),
    ];
    settings.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    ServerProcess::start(&settings, port, log)
}

/// A collector of OTLP/HTTP JSON on loopback: each body posted to `/v1/traces`, kept.
async fn otlp_collector() -> (String, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let kept = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let into = kept.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let into = into.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 16384];
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() < end + 4 + length {
                        continue;
                    }
                    let body = buf[end + 4..end + 4 + length].to_vec();
                    buf.drain(..end + 4 + length);
                    if let Ok(v) = serde_json::from_slice::<Value>(&body) {
                        into.lock().unwrap().push(v);
                    }
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
                    if conn.write_all(ok).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, kept)
}

/// Every span the collector received: (trace id, span id, parent span id, name).
fn exported(kept: &std::sync::Mutex<Vec<Value>>) -> Vec<(String, String, String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    let mut spans = Vec::new();
    for body in kept.lock().unwrap().iter() {
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                for s in ss["spans"].as_array().into_iter().flatten() {
                    spans.push((
                        text(&s["traceId"]).to_ascii_lowercase(),
                        text(&s["spanId"]).to_ascii_lowercase(),
                        text(&s["parentSpanId"]).to_ascii_lowercase(),
                        text(&s["name"]),
                    ));
                }
            }
        }
    }
    spans
}

/// `LOG_FORMAT=json`: the lines of one request share its id, from the access line to the
/// provisioning the request scheduled, and say who asked and for which organization. With
/// `OTEL_EXPORTER_OTLP_ENDPOINT`, the same story reaches a collector as one trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_requests_log_lines_share_its_id_down_to_provisioning() {
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let scratch = Scratch::new("traced");
    let log = scratch.path("server.json");
    let (collector, kept) = otlp_collector().await;
    let settings = [
        ("LOG_FORMAT", "json"),
        ("LOG_SPANS", "close"),
        ("RUST_LOG", "info"),
        ("PROVISIONER_STEP_MS", "0"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let server = start_binary(&app, port, &settings, log.clone());
    server.wait_healthy(&app.client).await;
    let request_id = "trace-0123456789-create";
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let id = create_and_wait_provisioned(&app, &base, "traced", request_id, trace_id, None).await;
    // The collector receives the request's trace: the request under the caller's span, the use
    // case under it, and the reconcile steps of the work it scheduled, all with its trace id.
    let deadline = Instant::now() + LIMIT;
    let spans = loop {
        let spans = exported(&kept);
        let ours: Vec<_> = spans.iter().filter(|s| s.0 == trace_id).cloned().collect();
        let has = |name: &str| ours.iter().any(|s| s.3 == name);
        if has("reconcile_step") && has("request") && has("operation") {
            break ours;
        }
        assert!(
            Instant::now() < deadline,
            "the trace never reached the collector: {spans:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let request = spans.iter().find(|s| s.3 == "request").unwrap();
    assert_eq!(
        request.2, "00f067aa0ba902b7",
        "the request's parent is the caller's span"
    );
    let use_case = spans.iter().find(|s| s.3 == "create_cluster").unwrap();
    assert_eq!(use_case.2, request.1, "the use case is inside the request");
    assert!(spans.iter().any(|s| s.3 == "change" && s.2 == use_case.1));
    let operation = spans.iter().find(|s| s.3 == "operation").unwrap();
    assert_eq!(
        operation.2, request.1,
        "the provisioning hangs under the request that asked"
    );
    assert!(
        spans
            .iter()
            .any(|s| s.3 == "reconcile_step" && s.2 == operation.1)
    );
    drop(server);
    let lines: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let ours = |l: &&Value| l["span"]["request_id"] == request_id;
    let access = lines
        .iter()
        .filter(ours)
        .find(|l| l["target"] == "access")
        .unwrap_or_else(|| panic!("no access line of the request: {lines:#?}"));
    assert_eq!(access["span"]["name"], "request");
    assert_eq!(access["span"]["route"], "/v1/public/clusters");
    assert!(
        access["span"]["caller"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    );
    let steps: Vec<&Value> = lines
        .iter()
        .filter(ours)
        .filter(|l| l["span"]["name"] == "operation")
        .collect();
    assert!(
        steps
            .iter()
            .any(|l| l["fields"]["message"] == "reconcile step"),
        "no provisioning line carries the request's id: {lines:#?}"
    );
    assert!(steps.iter().all(|l| l["span"]["cluster_id"] == id.as_str()));
    // One trace from the request to the provisioning it scheduled (W3C traceparent).
    assert_eq!(access["span"]["trace_id"], trace_id);
    assert!(steps.iter().all(|l| l["span"]["trace_id"] == trace_id));
    // The spans of the story, each logged as it ends: the use case inside the request, the
    // change inside it with the organization and the operation it started, each reconcile
    // step inside the operation.
    let closed = |name: &str| {
        lines
            .iter()
            .filter(|l| l["fields"]["message"] == "close" && l["span"]["name"] == name)
            .collect::<Vec<_>>()
    };
    let use_case = closed("create_cluster");
    assert!(
        use_case
            .iter()
            .any(|l| l["spans"][0]["trace_id"] == trace_id
                && l["span"]["organization"] == ACME_ID.to_string()),
        "no create_cluster span inside the request, naming its organization: {use_case:#?}"
    );
    let change = closed("change");
    assert!(
        change
            .iter()
            .any(|l| l["span"]["organization"] == ACME_ID.to_string()
                && l["span"]["operation"]
                    .as_str()
                    .is_some_and(|o| !o.is_empty())),
        "no change span with its organization and operation: {change:#?}"
    );
    assert!(
        closed("reconcile_step")
            .iter()
            .any(|l| l["spans"][0]["trace_id"] == trace_id),
        "no reconcile step in the request's trace"
    );
    // No line of the log holds the bearer token.
    let text = serde_json::to_string(&lines).unwrap();
    assert!(!text.contains(TOKEN_ACME_SUPER_ADMIN));
}

/// Plain text to a file (the default log): the same story, told without a span per request.
/// The access lines carry the request's id, trace, caller and organization (a read's and a
/// write's), and the provisioning the request scheduled carries its id and trace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_log_lines_carry_their_request_without_a_span() {
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let scratch = Scratch::new("plain-log");
    let log = scratch.path("server.log");
    let settings = [("RUST_LOG", "info"), ("PROVISIONER_STEP_MS", "0")];
    let server = start_binary(&app, port, &settings, log.clone());
    server.wait_healthy(&app.client).await;
    let trace_id = "5cf92f3577b34da6a3ce929d0e0e4736";
    let read = Some("plain-read-0001");
    create_and_wait_provisioned(&app, &base, "plain", "plain-create-0001", trace_id, read).await;
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    let access = |request_id: &str| {
        text.lines()
            .find(|l| l.contains(" access: ") && l.contains(&format!(" request_id={request_id} ")))
            .unwrap_or_else(|| panic!("no access line of {request_id}: {text}"))
    };
    let organization = format!("organization={ACME_ID}");
    let create = access("plain-create-0001");
    for part in [
        " INFO request: access: request status=201 ",
        " method=POST route=/v1/public/clusters ",
        &format!(" trace_id={trace_id} "),
        " caller=",
        &organization,
    ] {
        assert!(create.contains(part), "{part:?} not in {create}");
    }
    let read = access("plain-read-0001");
    for part in [
        "status=200 ",
        " method=GET route=/v1/public/clusters/{id} ",
        " caller=",
        &organization,
    ] {
        assert!(read.contains(part), "{part:?} not in {read}");
    }
    assert!(
        text.lines().any(|l| l.contains("reconcile step")
            && l.contains("request_id=\"plain-create-0001\"")
            && l.contains(&format!("trace_id={trace_id}"))),
        "no provisioning line carries the request's id and trace: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_provisioning_then_restart_finishes_everything_once() {
    // The in-process app only provides the database and the platform; its own workers are off.
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let slow = [("PROVISIONER_STEP_MS", "150"), ("RECONCILER_POLL_MS", "20")];
    let scratch = Scratch::new("kill-9");
    let mut first = start_binary(&app, port, &slow, scratch.path("first.log"));
    first.wait_healthy(&app.client).await;
    let body = json!({"organization": "acme", "name": "crash-1", "node_pools": [{"size": "kube.c5.large", "count": 4}]});
    let a = app
        .send(
            app.client
                .post(format!("{base}/v1/public/clusters"))
                .bearer_auth(TOKEN_ACME_SUPER_ADMIN)
                .json(&body),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    let id = a.json()["id"].as_str().unwrap().to_owned();
    // Wait until the work is under way (a node exists), then kill -9.
    let deadline = Instant::now() + LIMIT;
    while app.count_rows("nodes") < 1 {
        assert!(Instant::now() < deadline, "provisioning never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.kill9();
    // A restart with a short lease would wait out the dead worker's 30 s lease; the default
    // lease is kept, so this proves the lease is taken over once it runs out.
    let second = start_binary(&app, port, &slow, scratch.path("second.log"));
    second.wait_healthy(&app.client).await;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let c = app
            .send(
                app.client
                    .get(format!("{base}/v1/public/clusters/{id}"))
                    .bearer_auth(TOKEN_ACME_MEMBER),
            )
            .await
            .json();
        if c["phase"] == "Provisioned" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never finished after the restart: {c}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    app.wait_until_the_queue_is_settled().await;
    assert_eq!(
        app.count_rows("nodes"),
        4,
        "exactly the pool's count: nothing lost or done twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_exposure_change_while_one_is_in_flight_is_409() {
    // The exposure step always fails transiently here, so the change stays in flight.
    let app = TestApp::spawn_with(&[
        ("RECONCILER_POLL_MS", "20"),
        ("PROVISIONER_FLAKY_STEPS", "set_exposure"),
        ("PROVISIONER_FLAKY_RATE", "1.0"),
    ])
    .await;
    let c = app.create_cluster("expo-3").await;
    let id = c["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/public/clusters/{id}");
    await_phase(&app, &id, "Provisioned").await;
    let a = app
        .patch(
            &format!("{path}/exposure"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
    for to in ["public", "private"] {
        let b = app
            .patch(
                &format!("{path}/exposure"),
                TOKEN_ACME_SUPER_ADMIN,
                &json!({"exposure": to}),
            )
            .await;
        assert_eq!(
            (b.status, b.problem_code().as_str()),
            (409, "change_in_flight"),
            "{to}"
        );
    }
    // Nothing was stored for the refused requests: still the first change in flight.
    let c = app.get(&path, TOKEN_ACME_MEMBER).await.json();
    assert_eq!(
        (c["exposure"].clone(), c["exposure_change"]["to"].clone()),
        (json!("public"), json!("private"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slash_30_address_pool_gives_two_elastic_ips_then_503_and_reuses_a_released_one() {
    let app = TestApp::spawn_with(&[
        ("RECONCILER_POLL_MS", "20"),
        ("ELASTIC_IP_PRIVATE_CIDR", "192.0.2.0/30"),
    ])
    .await;
    let c = app.create_cluster("pool-1").await;
    let id = c["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/public/clusters/{id}");
    await_phase(&app, &id, "Provisioned").await;
    let mut ids = Vec::new();
    for _ in 0..2 {
        let a = app
            .post(
                &format!("{path}/elastic-ips"),
                TOKEN_ACME_SUPER_ADMIN,
                &json!({}),
            )
            .await;
        assert_eq!(a.status, 202, "{}", a.text());
        ids.push(a.json()["id"].as_str().unwrap().to_owned());
    }
    let third = app
        .post(
            &format!("{path}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({}),
        )
        .await;
    assert_eq!(
        (third.status, third.problem_code().as_str()),
        (503, "capacity_exhausted")
    );
    assert!(third.header("retry-after").is_some());
    let mut addresses = Vec::new();
    for e in &ids {
        let r = app
            .wait_for(&format!("{path}/elastic-ips/{e}"), LIMIT, |v| {
                v["status"] == "Ready"
            })
            .await;
        addresses.push(r["address"].as_str().unwrap().to_owned());
    }
    addresses.sort();
    assert_eq!(
        addresses,
        ["192.0.2.1", "192.0.2.2"],
        "never the network or broadcast address"
    );
    // Releasing one returns its address to the pool once it is gone.
    assert_eq!(
        app.delete(
            &format!("{path}/elastic-ips/{}", ids[0]),
            TOKEN_ACME_SUPER_ADMIN
        )
        .await
        .status,
        202
    );
    let deadline = Instant::now() + LIMIT;
    loop {
        let a = app
            .post(
                &format!("{path}/elastic-ips"),
                TOKEN_ACME_SUPER_ADMIN,
                &json!({}),
            )
            .await;
        if a.status == 202 {
            let e = a.json()["id"].as_str().unwrap().to_owned();
            let r = app
                .wait_for(&format!("{path}/elastic-ips/{e}"), LIMIT, |v| {
                    v["status"] == "Ready"
                })
                .await;
            assert!(addresses.contains(&r["address"].as_str().unwrap().to_owned()));
            break;
        }
        assert_eq!(a.status, 503);
        assert!(
            Instant::now() < deadline,
            "the released address never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internet_cluster_with_the_public_pool_disabled_gets_503() {
    let app =
        TestApp::spawn_with(&[("RECONCILER_WORKERS", "0"), ("ELASTIC_IP_PUBLIC_CIDR", "")]).await;
    let body = json!({"organization": "acme", "name": "inet-1", "network_mode": "internet",
                      "node_pools": [{"size": "kube.c5.large", "count": 1}]});
    let c = app
        .post("/v1/public/clusters", TOKEN_ACME_SUPER_ADMIN, &body)
        .await
        .json();
    let id = c["id"].as_str().unwrap();
    let a = app
        .post(
            &format!("/v1/public/clusters/{id}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "public"}),
        )
        .await;
    assert_eq!(
        (a.status, a.problem_code().as_str()),
        (503, "capacity_exhausted")
    );
    let a = app
        .post(
            &format!("/v1/public/clusters/{id}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await;
    assert_eq!(
        (a.status, a.problem_code().as_str()),
        (409, "exposure_mismatch")
    );
    assert_eq!(app.count_rows("elastic_ips"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiting_long_polls_hold_no_database_connection() {
    let app =
        TestApp::spawn_with(&[("RECONCILER_WORKERS", "0"), ("DATABASE_POOL_SIZE", "4")]).await;
    let c = app.create_cluster("waiters").await;
    let id = c["id"].as_str().unwrap().to_owned();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let mut waiters = Vec::new();
    for _ in 0..1000 {
        let url = format!(
            "{}/v1/public/clusters/{id}/state?since=1&timeout_seconds=60",
            app.url
        );
        let client = client.clone();
        waiters.push(tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(TOKEN_ACME_MEMBER)
                .send()
                .await
                .ok()?
                .json::<Value>()
                .await
                .ok()
        }));
    }
    // Once every waiter is parked, the pool shows no connection in use.
    let deadline = Instant::now() + LIMIT;
    let in_use = loop {
        let m = app
            .send(app.request(reqwest::Method::GET, "/metrics", None))
            .await
            .text();
        let gauge = |state: &str| {
            m.lines()
                .find(|l| l.starts_with(&format!("db_pool_connections{{state=\"{state}\"}}")))
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(-1)
        };
        // 1,000 waiters plus this request.
        let in_flight = m
            .lines()
            .find(|l| l.starts_with("http_requests_in_flight "))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or(-1);
        let parked = in_flight >= 1001;
        let in_use = gauge("open") - gauge("idle");
        if parked && in_use == 0 {
            break in_use;
        }
        assert!(
            Instant::now() < deadline,
            "connections in use: {in_use}, requests in flight: {in_flight}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(in_use, 0);
    // One change wakes every waiter.
    let p = app
        .patch(
            &format!("/v1/public/clusters/{id}"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "wake"}),
        )
        .await;
    assert_eq!(p.status, 200);
    let mut woken = 0;
    for w in waiters {
        if let Ok(Some(s)) = w.await
            && s["changed"] == true
            && s["version"] == 2
        {
            woken += 1;
        }
    }
    assert_eq!(woken, 1000);
}

/// A second server on an address another process holds (a second `make run`) stops at once
/// with a message naming the setting to change, before any worker or background task starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_address_stops_the_server_before_anything_starts() {
    let app = TestApp::spawn_api_only(&[]).await;
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let scratch = Scratch::new("taken-address");
    let mut second = start_binary(
        &app,
        port,
        &[("RUST_LOG", "info"), ("RECONCILER_WORKERS", "2")],
        scratch.path("server.log"),
    );
    let status = second.exited(Duration::from_secs(60)).await;
    assert!(!status.success());
    let log = second.log_text();
    assert!(
        log.contains("BIND_ADDR") && log.contains("another process listens there"),
        "{log}"
    );
    assert!(!log.to_lowercase().contains("started"), "{log}");
    drop(holder);
}

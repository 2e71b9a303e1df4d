//! How the CLI fails: an exit code per class of failure, the API's words and request id on
//! stderr, and retries only where a retry cannot do the work twice.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_class_of_failure_has_its_exit_code_and_says_why() {
    let app = TestApp::spawn_api_only(&[]).await;
    let admin = CliUser::with_env(&app.url, TOKEN_ACME_SUPER_ADMIN, "acme");
    create_small(&admin, "taken").await;
    let member = CliUser::with_env(&app.url, TOKEN_ACME_MEMBER, "acme");
    let stranger = CliUser::with_env(&app.url, "dev-only-token-nobody-0000000000", "acme");
    let nowhere = CliUser::with_env(
        &format!("http://127.0.0.1:{}", process::free_port()),
        TOKEN_ACME_SUPER_ADMIN,
        "acme",
    );
    let nobody = CliUser::new();
    let create = [
        "cluster",
        "create",
        "x-1",
        "--size",
        "kube.c5.large",
        "--count",
        "1",
    ];
    let cases: [(&str, &CliUser, &[&str], i32, &str); 10] = [
        (
            "unknown flag",
            &admin,
            &["cluster", "list", "--bogus"],
            2,
            "--bogus",
        ),
        (
            "bad pool flag",
            &admin,
            &["cluster", "create", "x", "--pool", "web"],
            2,
            "NAME:SIZE:COUNT",
        ),
        (
            "invalid body",
            &admin,
            &[
                "cluster",
                "create",
                "Bad_Name",
                "--size",
                "kube.c5.large",
                "--count",
                "0",
            ],
            2,
            "node_pools[0].count: must be at least 1",
        ),
        (
            "not logged in",
            &nobody,
            &["cluster", "list"],
            3,
            "not logged in",
        ),
        (
            "token refused",
            &stranger,
            &["cluster", "list"],
            3,
            "invalid bearer token",
        ),
        ("not allowed", &member, &create, 3, "request id: "),
        (
            "not found",
            &admin,
            &["cluster", "get", "nope"],
            4,
            "no cluster named \"nope\"",
        ),
        (
            "conflict",
            &admin,
            &[
                "cluster",
                "create",
                "taken",
                "--size",
                "kube.c5.large",
                "--count",
                "1",
            ],
            5,
            "already exists",
        ),
        (
            "server unreachable",
            &nowhere,
            &["cluster", "list", "--request-timeout", "2"],
            6,
            "cannot connect",
        ),
        (
            // The pauses between attempts are said, not silent.
            "server unreachable, retried",
            &nowhere,
            &["cluster", "list", "--request-timeout", "2"],
            6,
            "retrying in 0.5s (attempt 2 of 5",
        ),
    ];
    for (case, user, args, code, says) in cases {
        let run = user.run(args).await;
        assert_eq!(run.code, code, "{case}: {run:?}");
        assert!(run.stderr.contains(says), "{case}: {run:?}");
        no_token_in(&run);
    }
}

/// A request as the scripted server saw it: `METHOD PATH`, and its Idempotency-Key.
type Seen = (String, Option<String>);

/// A scripted HTTP server: answers each request with the next answer of its script (the last
/// one again once the script runs out) and records what came.
struct Scripted {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    fn start(script: Vec<(u16, &'static str)>) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let url = format!(
            "http://{}",
            listener.local_addr().unwrap_or_else(|e| panic!("{e}"))
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for (i, stream) in listener.incoming().enumerate() {
                let Ok(mut stream) = stream else { return };
                let (status, body) = script[i.min(script.len() - 1)];
                let mut reader =
                    BufReader::new(stream.try_clone().unwrap_or_else(|e| panic!("{e}")));
                let (mut line, mut key, mut length) = (String::new(), None, 0usize);
                let _ = reader.read_line(&mut line);
                let request = line.split(' ').take(2).collect::<Vec<_>>().join(" ");
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                        break;
                    }
                    let lower = header.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("idempotency-key:") {
                        key = Some(v.trim().to_owned());
                    }
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let _ = reader
                    .by_ref()
                    .take(length as u64)
                    .read_to_end(&mut Vec::new());
                log.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((request, key));
                let kind = if status >= 400 {
                    "application/problem+json"
                } else {
                    "application/json"
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\nretry-after: 0\r\nx-request-id: scripted-{i}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Scripted { url, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

const UNAVAILABLE: &str = r#"{"type":"about:blank","title":"Service Unavailable","status":503,"code":"service_unavailable","detail":"the database is unreachable","request_id":"r"}"#;
const EMPTY_LIST: &str = r#"{"items":[],"page":1,"size":100,"total":0}"#;
const POOL: &str = r#"{"name":"p","size":"kube.c5.large","count":1,"auto_scale":false,"min_nodes":1,"max_nodes":null,"labels":{},"tags":{},"root_volume_size_gib":50,"version":"v1.32.4","max_surge":1,"max_unavailable":0,"status":"Provisioning","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}"#;
const CLUSTER_ID: &str = "5f0c1c52-8f43-4c1e-9d6a-0d7b8c9e1f20";

#[tokio::test]
async fn reads_and_keyed_writes_are_retried_after_a_503_and_a_plain_patch_is_not() {
    let reads = Scripted::start(vec![
        (503, UNAVAILABLE),
        (503, UNAVAILABLE),
        (200, EMPTY_LIST),
    ]);
    let user = CliUser::with_env(&reads.url, TOKEN_ACME_SUPER_ADMIN, "acme");
    user.run(&["cluster", "list"]).await.expect(0);
    assert_eq!(reads.seen().len(), 3, "{:?}", reads.seen());

    let writes = Scripted::start(vec![(502, UNAVAILABLE), (202, POOL)]);
    let user = CliUser::with_env(&writes.url, TOKEN_ACME_SUPER_ADMIN, "acme");
    let added = user
        .run(&[
            "node-pool",
            "add",
            CLUSTER_ID,
            "p",
            "--size",
            "kube.c5.large",
            "--count",
            "1",
            "-v",
        ])
        .await
        .expect(0);
    let seen = writes.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    let key = seen[0].1.clone();
    assert!(
        key.as_deref().is_some_and(|k| k.starts_with("kubesvc-")),
        "{seen:?}"
    );
    assert_eq!(seen[1].1, key, "the retry carries the same Idempotency-Key");
    assert!(
        added.stderr.contains(key.as_deref().unwrap_or("?")),
        "-v prints the key: {added:?}"
    );

    let patch = Scripted::start(vec![(503, UNAVAILABLE)]);
    let user = CliUser::with_env(&patch.url, TOKEN_ACME_SUPER_ADMIN, "acme");
    let run = user
        .run(&["cluster", "update", CLUSTER_ID, "--description", "x"])
        .await
        .expect(6);
    assert!(
        run.stderr.contains("the database is unreachable") && run.stderr.contains("request id: r"),
        "{run:?}"
    );
    assert_eq!(patch.seen().len(), 1, "a PATCH without a key is sent once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_ends_failed_exits_1_with_the_reason() {
    let app = TestApp::spawn_with(&[("PROVISIONER_FAIL_STEPS", "create_control_plane")]).await;
    let user = CliUser::with_env(&app.url, TOKEN_ACME_SUPER_ADMIN, "acme");
    let run = user
        .run(&[
            "cluster",
            "create",
            "doomed",
            "--size",
            "kube.c5.large",
            "--count",
            "1",
            "--wait",
        ])
        .await
        .expect(1);
    assert!(
        run.stderr.contains("error: cluster doomed failed: "),
        "{run:?}"
    );
    // A Failed cluster's kubeconfig is a conflict (5), not something to wait for.
    let show = user
        .run(&["cluster", "kubeconfig", "show", "doomed"])
        .await
        .expect(5);
    assert!(show.stdout.is_empty(), "{show:?}");
    user.run(&["cluster", "delete", "doomed", "--wait", "--yes"])
        .await
        .expect(0);
}

/// The API's refusals come back in the CLI's words: a pool or node that is not there is named
/// as a missing cluster is, a refused token is told to log in again, the last pool points to
/// deleting the cluster, a URL without its scheme is told which to add, and a typed name never
/// reaches another route.
#[tokio::test]
async fn refusals_are_said_in_the_cli_s_words() {
    let app = TestApp::spawn().await;
    let user = logged_in(&app).await;
    user.run(&[
        "cluster",
        "create",
        "words-1",
        "--size",
        "kube.c5.large",
        "--count",
        "1",
        "--wait",
    ])
    .await
    .expect(0);

    // (command, exit code, what stderr says)
    let table: [(&[&str], i32, &str); 6] = [
        (
            &["node-pool", "scale", "words-1", "nosuch", "--count", "2"],
            4,
            "no node pool named \"nosuch\" in cluster words-1",
        ),
        (
            &["node", "delete", "words-1", "nosuch", "--yes"],
            4,
            "no node named \"nosuch\" in cluster words-1",
        ),
        (
            &["node-pool", "delete", "words-1", "default", "--yes"],
            5,
            "kubesvc cluster delete",
        ),
        (
            &["node-pool", "scale", "words-1", "default", "--count", "201"],
            2,
            "must be between 1 and 200",
        ),
        (
            &["node-pool", "delete", "words-1", "..", "--yes"],
            2,
            "is not a node pool name",
        ),
        (
            &["cluster", "list", "--url", "127.0.0.1:9"],
            2,
            "write http://127.0.0.1:9",
        ),
    ];
    for (args, code, said) in table {
        let run = user.run(args).await.expect(code);
        assert!(run.stderr.contains(said), "{args:?}: {run:?}");
    }
    // The typed path never reached a route of the cluster itself.
    assert_eq!(
        json(&user, &["cluster", "get", "words-1"]).await["phase"],
        "Provisioned"
    );

    let stale = user
        .run_with(
            &["cluster", "list"],
            "",
            &[("KUBESVC_TOKEN", "not-a-token-of-anyone")],
        )
        .await
        .expect(3);
    assert!(stale.stderr.contains("kubesvc auth login"), "{stale:?}");
    let no_terminal = user.run(&["auth", "login"]).await.expect(2);
    assert!(
        no_terminal.stderr.contains("--token-stdin") && !no_terminal.stderr.contains("--secret"),
        "{no_terminal:?}"
    );
}

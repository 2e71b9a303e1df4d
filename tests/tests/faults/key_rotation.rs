//! `SECRETS_KEY` rotated without downtime, as docs/operations.md tells an operator to: two
//! replicas restarted one at a time through three key rings while requests keep coming, every
//! sealed value re-sealed by `kubesvc-admin keys reseal` in small batches meanwhile, and the old
//! key removed at the end. Every OIDC client secret and cluster token still opens, every
//! kubeconfig credential (the standing token and one with a lifetime) is still accepted by the
//! clusters, and nothing opens under the old key alone any more. `SOAK_SECONDS` (`make soak`)
//! lets the load run a quarter of it after each step.

use super::*;
use blackbox::admin::Admin;

const OIDC_SECRETS: [&str; 2] = ["rotation-client-secret-1", "rotation-client-secret-2"];

/// How long the load runs after each step: a quarter of `SOAK_SECONDS` (`make soak`), none
/// in the short form.
fn soak_dwell() -> Duration {
    std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(|total| Duration::from_secs(total) / 4)
        .unwrap_or(Duration::ZERO)
}

/// One replica's settings under a key ring.
fn replica_env(app: &TestApp, current: &str, previous: &str) -> Vec<(&'static str, String)> {
    binary_env(
        &app.platform,
        &app.db.url,
        &[
            ("SECRETS_KEY", current),
            ("SECRETS_KEY_PREVIOUS", previous),
            ("PROVISIONER_STEP_MS", "0"),
            ("RECONCILER_POLL_MS", "20"),
            ("SHUTDOWN_DELAY_SECONDS", "0"),
            ("DRAIN_TIMEOUT_SECONDS", "2"),
        ],
    )
}

/// Two replicas on fixed ports, restarted one at a time.
struct Replicas {
    servers: Vec<ServerProcess>,
    ports: [u16; 2],
    scratch: Scratch,
    restarts: usize,
}

impl Replicas {
    async fn start(env: &[(&str, String)]) -> Replicas {
        let scratch = Scratch::new("rotation");
        let ports = [free_port(), free_port()];
        let mut servers = Vec::new();
        for (i, port) in ports.iter().enumerate() {
            let (s, _) = start_ready(env, *port, scratch.path(&format!("replica-{i}-0.log"))).await;
            servers.push(s);
        }
        Replicas {
            servers,
            ports,
            scratch,
            restarts: 0,
        }
    }

    fn clients(&self) -> Vec<Http> {
        self.ports
            .iter()
            .map(|p| Http::new(&format!("http://127.0.0.1:{p}"), Duration::from_secs(30)))
            .collect()
    }

    /// Each replica in turn: SIGTERM, wait for it to exit, start it again with `env`.
    async fn roll(&mut self, env: &[(&str, String)]) {
        self.restarts += 1;
        for i in 0..self.servers.len() {
            self.servers[i].signal_term();
            let status = self.servers[i].exited(Duration::from_secs(30)).await;
            assert!(
                status.success(),
                "replica {i} stopped badly: {status}\n{}",
                self.servers[i].log_tail()
            );
            let log = self
                .scratch
                .path(&format!("replica-{i}-{}.log", self.restarts));
            let (s, _) = start_ready(env, self.ports[i], log).await;
            self.servers[i] = s;
        }
    }
}

/// What the load saw.
#[derive(Default)]
struct Seen {
    requests: usize,
    /// Refused at the socket while a replica restarted, then sent to the other.
    moved_over: usize,
    /// Any answer other than the one expected: none is allowed.
    wrong: Vec<String>,
}

/// A request of the load: method, path, body, headers.
type LoadRequest<'a> = (Method, &'a str, Option<&'a Value>, &'a [(&'a str, &'a str)]);

/// Requests that open sealed values (the kubeconfig of `cluster`, whose token must stay
/// `token`) and seal new ones (cluster creates, which provisioning gives credentials), sent
/// to either replica until `stop`; a request refused at the socket goes to the other one.
async fn load(replicas: Vec<Http>, cluster: String, token: String, stop: Arc<AtomicBool>) -> Seen {
    let mut seen = Seen::default();
    let mut n = 0usize;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let kubeconfig = format!("{CLUSTERS}/{cluster}/kubeconfig");
        let create = cluster_body("acme", &format!("load-{n}"));
        let key = format!("rotation-load-{n:06}");
        let mut sends: Vec<LoadRequest<'_>> = vec![(Method::GET, &kubeconfig, None, &[])];
        let idempotency = [("Idempotency-Key", key.as_str())];
        if n.is_multiple_of(5) {
            sends.push((Method::POST, CLUSTERS, Some(&create), &idempotency));
        }
        for (method, path, body, headers) in sends {
            seen.requests += 1;
            let mut answer = None;
            for attempt in 0..2 {
                let http = &replicas[(n + attempt) % replicas.len()];
                match http
                    .try_send(
                        method.clone(),
                        path,
                        Some(TOKEN_ACME_SUPER_ADMIN),
                        headers,
                        body,
                    )
                    .await
                {
                    Ok(a) => {
                        answer = Some(a);
                        break;
                    }
                    Err(_) => seen.moved_over += 1,
                }
            }
            match answer {
                Some(a) if method == Method::GET && a.status == 200 => {
                    if token_of(&a.text()) != token {
                        seen.wrong.push(format!("kubeconfig {n}: another token"));
                    }
                }
                Some(a) if method == Method::POST && a.status == 201 => {}
                Some(a) => seen
                    .wrong
                    .push(format!("{method} {path}: {} {}", a.status, a.text())),
                None => seen
                    .wrong
                    .push(format!("{method} {path}: both replicas down")),
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_key_rotates_under_load_and_everything_opens_under_the_new_key_alone() {
    // The in-process app provides the database and the platform, and is the first process to
    // start on the database under the old key (its workers are off).
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let (old, new) = (
        TEST_SECRETS_KEY.to_owned(),
        ::secrets::Vault::generate_key(),
    );
    let mut replicas = Replicas::start(&replica_env(&app, &old, "")).await;
    let http = replicas.clients().remove(0);

    // What the old key protects: cluster tokens, a credential with a lifetime (a keyed
    // digest), OIDC client secrets.
    let (cluster, standing) = a_provisioned_cluster_and_its_token(&http).await;
    let own = a_kubeconfig_with_its_own_credential(&http, &cluster).await;
    for (i, secret) in OIDC_SECRETS.iter().enumerate() {
        let created = http.post(AUTH_SERVERS, &oidc_server(i, secret)).await;
        assert_eq!(created.status, 201, "{}", created.text());
    }

    let stop = Arc::new(AtomicBool::new(false));
    let traffic = tokio::spawn(load(
        replicas.clients(),
        cluster.clone(),
        standing.clone(),
        stop.clone(),
    ));
    let started = Instant::now();
    // The long form (`make soak`) lets the load run between the steps, so the re-seal meets
    // more values written under each ring.
    let dwell = soak_dwell();
    let phase = async |what: &str| {
        eprintln!(
            "rotation: {what} at {:.1} s",
            started.elapsed().as_secs_f64()
        );
        tokio::time::sleep(dwell).await;
    };
    // 1. Every replica learns the new key before any seals with it.
    replicas.roll(&replica_env(&app, &old, &new)).await;
    phase("every replica knows the new key").await;
    // 2. The new key seals; the old one still opens.
    replicas.roll(&replica_env(&app, &new, &old)).await;
    phase("every replica seals with the new key").await;
    // 3. Everything sealed before is sealed again, a few values at a time, beside the load.
    let admin = Admin::new(&app.db.url, &new).with("SECRETS_KEY_PREVIOUS", &old);
    let resealed = admin
        .run_async(&["keys", "reseal", "--batch-size", "2"])
        .await
        .expect(0);
    eprintln!("{}", resealed.stdout);
    let status = admin.run_async(&["keys", "status"]).await.expect(0);
    assert!(
        status.stdout.contains("not under the current key: 0"),
        "{status:#?}"
    );
    phase("re-sealed").await;
    // 4. The old key leaves the ring.
    replicas.roll(&replica_env(&app, &new, "")).await;
    eprintln!(
        "rotation: the old key is gone at {:.1} s",
        started.elapsed().as_secs_f64()
    );
    stop.store(true, Ordering::SeqCst);
    let seen = traffic.await.unwrap();
    eprintln!(
        "rotation: {} requests through 3 rolling restarts and a re-seal, {} moved to the other replica",
        seen.requests, seen.moved_over
    );
    assert!(seen.wrong.is_empty(), "{:#?}", seen.wrong);
    assert!(seen.requests > 0);

    every_sealed_value_opens_under_the_new_key_alone(&app, &new, &old).await;
    the_clusters_still_accept_both_credentials(&app, &new, &cluster, &standing, &own).await;
    let again = http.get(&format!("{CLUSTERS}/{cluster}/kubeconfig")).await;
    assert_eq!(token_of(&again.text()), standing);
}

/// A cluster created and provisioned, and the standing token of its kubeconfig.
async fn a_provisioned_cluster_and_its_token(http: &Http) -> (String, String) {
    let created = http.post(CLUSTERS, &cluster_body("acme", "rotated")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let cluster = created.json()["id"].as_str().unwrap().to_owned();
    http.wait_cluster(&cluster, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    let kubeconfig = http.get(&format!("{CLUSTERS}/{cluster}/kubeconfig")).await;
    assert_eq!(kubeconfig.status, 200, "{}", kubeconfig.text());
    (cluster, token_of(&kubeconfig.text()))
}

/// The token of a kubeconfig download with a lifetime of an hour.
async fn a_kubeconfig_with_its_own_credential(http: &Http, cluster: &str) -> String {
    let own = http
        .get(&format!(
            "{CLUSTERS}/{cluster}/kubeconfig?expiry_seconds=3600"
        ))
        .await;
    assert_eq!(own.status, 200, "{}", own.text());
    token_of(&own.text())
}

fn token_of(kubeconfig: &str) -> String {
    kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap_or_else(|| panic!("no token in {kubeconfig}"))
        .trim_matches('"')
        .to_owned()
}

fn oidc_server(i: usize, secret: &str) -> Value {
    json!({"organization": "acme", "name": format!("sso-{i}"), "environment": "production",
           "type": "oidc", "config": {"issuer_url": "https://login.example.com/realms/acme",
           "redirect_path": "/oauth2/callback", "client_id": format!("client-{i}"),
           "client_secret": secret, "authorized_domain": "app.example.com"}})
}

/// `keys verify` under the new key alone opens every value; the old key alone opens nothing.
async fn every_sealed_value_opens_under_the_new_key_alone(app: &TestApp, new: &str, old: &str) {
    let verified = Admin::new(&app.db.url, new)
        .run_async(&["keys", "verify"])
        .await
        .expect(0);
    for kind in ["OIDC client secrets: 2 open", "vault data keys: 1 open"] {
        assert!(verified.stdout.contains(kind), "{verified:#?}");
    }
    // Under the old key alone nothing opens, not even the digest key, so the tool refuses.
    let old_only = Admin::new(&app.db.url, old)
        .run_async(&["keys", "verify"])
        .await
        .expect(1);
    assert!(
        old_only
            .stderr
            .contains("the stored token digest key does not open under SECRETS_KEY"),
        "{old_only:#?}"
    );
}

/// A server process holding only the new key: the clusters' API servers, which ask it about
/// tokens, accept the standing token and the one with a lifetime (its keyed digest was made
/// under the old key, and its key outlived it).
async fn the_clusters_still_accept_both_credentials(
    app: &TestApp,
    new: &str,
    cluster: &str,
    standing: &str,
    own: &str,
) {
    let fresh = app
        .second_server(&[("SECRETS_KEY", new), ("RECONCILER_WORKERS", "0")])
        .await;
    let cluster: Uuid = cluster.parse().unwrap();
    for token in [standing, own] {
        let answer = fresh
            .cluster_api
            .version(cluster, SOME_CALLER, Some(&format!("Bearer {token}")))
            .await;
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    let forged = fresh
        .cluster_api
        .version(
            cluster,
            SOME_CALLER,
            Some("Bearer not-a-token-of-this-cluster"),
        )
        .await;
    assert_eq!(forged.status, 401);
}

//! SIGKILL of the real server binary in the middle of a pool's upgrade: the restarted server
//! finishes the upgrade once, and no pool ever had fewer Ready nodes than its count.

use super::*;

const TO: &str = "v1.32.6";

/// The fewest Ready nodes any pool had below its count, over every look: 0 while none ever
/// went below. One connection, polled tightly, across the kill and the restart.
struct Watch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<i64>,
}

impl Watch {
    fn start(url: &str) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let (url, flag) = (url.to_owned(), stop.clone());
        let task = tokio::task::spawn_blocking(move || {
            let mut worst = 0;
            while !flag.load(Ordering::SeqCst) {
                let short = count(
                    &url,
                    "SELECT coalesce(max(p.count - (SELECT count(*) FROM nodes AS n \
                     WHERE n.cluster_id = p.cluster_id AND n.pool = p.name \
                     AND n.status = 'Ready')), 0)::bigint AS n FROM node_pools AS p",
                );
                worst = worst.max(short);
                std::thread::sleep(Duration::from_millis(2));
            }
            worst
        });
        Watch { stop, task }
    }

    async fn worst(self) -> i64 {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_in_the_middle_of_a_pools_upgrade_finishes_it_once_never_below_its_count() {
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let scratch = Scratch::new("upgrade-kill");
    let env = binary_env(
        &app.platform,
        &app.db.url,
        &[("PROVISIONER_STEP_MS", "150"), ("RECONCILER_POLL_MS", "20")],
    );
    let port = free_port();
    let (mut first, http) = start_ready(&env, port, scratch.path("first.log")).await;
    let body = json!({"organization": "acme", "name": "kill-upgrade", "node_pools": [
        {"name": "a", "size": "kube.c5.large", "count": 3},
        {"name": "b", "size": "kube.c5.large", "count": 2}]});
    let made = http.post(CLUSTERS, &body).await;
    assert_eq!(made.status, 201, "{}", made.text());
    let cluster = id(&made.json());
    http.wait_cluster(&cluster, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;

    let watch = Watch::start(&app.db.url);
    let upgrade = format!("{CLUSTERS}/{cluster}/upgrade");
    // The same keyed request, before the kill and once the upgrade is over.
    let ask = async || {
        http.send(
            Method::POST,
            &upgrade,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[("Idempotency-Key", "upgrade-under-kill-01")],
            Some(&json!({"version": TO})),
        )
        .await
    };
    let started = ask().await;
    assert_eq!(started.status, 202, "{}", started.text());

    // Kill once pool a is half replaced: some nodes on the new version, some on the old.
    let url = app.db.url.clone();
    tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let sql = format!(
            "SELECT (count(*) FILTER (WHERE version = '{TO}') > 0 \
             AND count(*) FILTER (WHERE version <> '{TO}') > 0)::int::bigint AS n \
             FROM nodes WHERE pool = 'a'"
        );
        while count(&url, &sql) != 1 {
            assert!(Instant::now() < deadline, "pool a never got half way");
            std::thread::sleep(Duration::from_millis(2));
        }
    })
    .await
    .unwrap();
    first.kill9();
    fault_injected("SIGKILL of the server in the middle of a pool's upgrade");

    let second = ServerProcess::start(&env, port, scratch.path("second.log"));
    http.wait_ready().await;
    http.wait_cluster(&cluster, Duration::from_secs(120), |c| {
        c["upgrade"].is_null() && c["version"] == TO
    })
    .await;
    let worst = watch.worst().await;
    assert_eq!(worst, 0, "a pool had fewer Ready nodes than its count");

    // Finished once: every node on the new version, each pool at its count, one operation
    // (succeeded) and one audit event; the same request again replays its first answer.
    let nodes = http
        .get(&format!("{CLUSTERS}/{cluster}/nodes"))
        .await
        .json();
    let items = nodes["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 5, "{nodes}");
    assert!(
        items
            .iter()
            .all(|n| n["version"] == TO && n["status"] == "Ready"),
        "{nodes}"
    );
    let ops = http
        .get(&format!("{CLUSTERS}/{cluster}/operations?size=100"))
        .await
        .json();
    let upgrades: Vec<&Value> = ops["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["kind"] == "upgrade")
        .collect();
    assert_eq!(upgrades.len(), 1, "{ops}");
    let op_path = format!(
        "{CLUSTERS}/{cluster}/operations/{}",
        upgrades[0]["id"].as_str().unwrap_or_default()
    );
    let mut settled = json!(null);
    for _ in 0..100 {
        settled = http.get(&op_path).await.json();
        if settled["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(settled["status"], "succeeded", "{settled}");
    let again = ask().await;
    assert_eq!(again.status, 202, "{}", again.text());
    assert_eq!(again.body, started.body, "the replay is the first answer");
    assert_eq!(
        count(
            &app.db.url,
            "SELECT count(*) AS n FROM audit_events WHERE action = 'upgrade_started'"
        ),
        1
    );
    drop(second);
}

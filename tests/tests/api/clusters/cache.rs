//! The watch cache seen from outside, through two servers on one database (each its own pool,
//! change feed and cache): a server shows its own writes at once, another server's once the
//! change notification reached it, and `Cache-Control: no-cache` reads the database.

use std::time::{Duration, Instant};

use blackbox::*;
use reqwest::{Client, Method};
use serde_json::{Value, json};

/// One server as a client sees it.
struct Server {
    url: String,
    client: Client,
}

impl Server {
    async fn get(&self, path: &str, token: &str, no_cache: bool) -> (u16, Value) {
        let mut r = self
            .client
            .request(Method::GET, format!("{}{path}", self.url))
            .bearer_auth(token);
        if no_cache {
            r = r.header("Cache-Control", "no-cache");
        }
        let a = r.send().await.unwrap();
        (a.status().as_u16(), a.json().await.unwrap_or(Value::Null))
    }

    async fn describe(&self, id: &str, text: &str) {
        let a = self
            .client
            .patch(format!("{}{CLUSTERS}/{id}", self.url))
            .bearer_auth(TOKEN_ACME_SUPER_ADMIN)
            .json(&json!({ "description": text }))
            .send()
            .await
            .unwrap();
        assert_eq!(a.status().as_u16(), 200);
    }

    async fn description(&self, id: &str, no_cache: bool) -> Value {
        let (status, c) = self
            .get(&format!("{CLUSTERS}/{id}"), TOKEN_ACME_MEMBER, no_cache)
            .await;
        assert_eq!(status, 200, "{c}");
        c["description"].clone()
    }

    async fn total(&self, token: &str, org: &str) -> Value {
        let (status, page) = self
            .get(&format!("{CLUSTERS}?organization={org}"), token, false)
            .await;
        assert_eq!(status, 200, "{page}");
        page["total"].clone()
    }

    /// Polls until `ready` holds, failing after a minute (a hang guard, not a timing check).
    async fn eventually(&self, what: &str, ready: impl AsyncFn(&Server) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready(self).await {
            assert!(Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn cache_hits(&self) -> f64 {
        let text = self
            .client
            .get(format!("{}/metrics", self.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find(|l| l.starts_with("cluster_cache_reads_total{result=\"hit\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0)
    }
}

async fn two_servers() -> (TestApp, Server, Server) {
    let app = TestApp::spawn_api_only(&[]).await;
    let b = app.second_server(&[("RECONCILER_WORKERS", "0")]).await;
    let a = Server {
        url: app.url.clone(),
        client: app.client.clone(),
    };
    let b = Server {
        url: b.url,
        client: b.client,
    };
    (app, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_server_shows_its_own_writes_at_once_and_the_others_once_notified() {
    let (app, a, b) = two_servers().await;
    let id = app.create_cluster("cached-1").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Both servers now hold the cluster.
    assert_eq!(
        a.description(&id, false).await,
        b.description(&id, false).await
    );
    let hits = a.cache_hits().await;
    a.description(&id, false).await;
    assert!(a.cache_hits().await > hits, "a second read is a cache hit");

    for n in 0..10 {
        let (on_a, on_b) = (format!("a {n}"), format!("b {n}"));
        a.describe(&id, &on_a).await;
        assert_eq!(a.description(&id, false).await, json!(on_a));
        assert_eq!(b.description(&id, true).await, json!(on_a));
        b.eventually("b shows a's write", async |b| {
            b.description(&id, false).await == json!(on_a)
        })
        .await;
        b.describe(&id, &on_b).await;
        assert_eq!(b.description(&id, false).await, json!(on_b));
        a.eventually("a shows b's write", async |a| {
            a.description(&id, false).await == json!(on_b)
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_show_this_servers_creations_at_once_and_the_others_once_notified() {
    let (app, a, b) = two_servers().await;
    app.create_cluster("first").await;
    assert_eq!(a.total(TOKEN_ACME_MEMBER, "acme").await, json!(1));
    assert_eq!(b.total(TOKEN_ACME_MEMBER, "acme").await, json!(1));
    let second = b
        .client
        .post(format!("{}{CLUSTERS}", b.url))
        .bearer_auth(TOKEN_ACME_SUPER_ADMIN)
        .json(&cluster_body("acme", "second"))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status().as_u16(), 201);
    assert_eq!(b.total(TOKEN_ACME_MEMBER, "acme").await, json!(2));
    a.eventually("a's list shows b's creation", async |a| {
        a.total(TOKEN_ACME_MEMBER, "acme").await == json!(2)
    })
    .await;
    // Another organization's list, read on both servers after acme's was cached.
    assert_eq!(
        b.total(TOKEN_INITECH_SUPER_ADMIN, "initech").await,
        json!(0)
    );
    assert_eq!(
        a.total(TOKEN_INITECH_SUPER_ADMIN, "initech").await,
        json!(0)
    );
}

/// A cluster read (and so cached) for its organization answers another organization's caller
/// exactly as the database read does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_cluster_never_answers_another_organization() {
    let (app, a, _) = two_servers().await;
    let id = app.create_cluster("acme-only").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("{CLUSTERS}/{id}");
    assert_eq!(a.get(&path, TOKEN_ACME_MEMBER, false).await.0, 200);
    let (cached, fresh) = (
        a.get(&path, TOKEN_INITECH_SUPER_ADMIN, false).await,
        a.get(&path, TOKEN_INITECH_SUPER_ADMIN, true).await,
    );
    assert_eq!(cached.0, fresh.0);
    assert!(matches!(cached.0, 403 | 404), "{}", cached.1);
    assert_eq!(cached.1["code"], fresh.1["code"]);
}

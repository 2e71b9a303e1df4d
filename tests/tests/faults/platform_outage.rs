//! The account platform down in every way: every route answers 502, nothing moves, and the
//! server heals without a restart.

use super::*;

/// Every route of the route table with its parameters filled in and a body that would succeed,
/// so the platform is the only thing that can fail.
fn every_route(cluster: &str, node: &str, auth_server: &str, credential: &str) -> Vec<Req> {
    let fill = |p: &str| {
        let p = if p.starts_with(AUTH_SERVERS) {
            p.replace("{id}", auth_server)
        } else {
            p.replace("{id}", cluster)
        };
        p.replace("{pool}", "default")
            .replace("{node}", node)
            .replace("{eip}", &Uuid::new_v4().to_string())
            .replace("{rule}", &Uuid::new_v4().to_string())
            .replace("{credential_id}", credential)
    };
    api::routes::ROUTES
        .iter()
        .map(|r| {
            let mut path = fill(r.path);
            if r.method == "GET"
                && matches!(r.org, api::routes::OrgSource::Collection)
                && !path.starts_with(AUTH_SERVERS)
            {
                path.push_str("?organization=acme");
            }
            if r.method == "GET" && r.path == AUTH_SERVERS {
                path.push_str("?organization=acme&environment=production");
            }
            let body = r.body.then(|| match (r.method, r.path) {
                ("POST", CLUSTERS) => cluster_body("acme", "during-outage"),
                ("PATCH", "/v1/public/clusters/{id}") => json!({"description": "x"}),
                ("PATCH", p) if p.ends_with("/exposure") => json!({"exposure": "private"}),
                ("POST", p) if p.ends_with("/node-pools") => {
                    json!({"name": "extra", "size": "kube.c5.large", "count": 1})
                }
                ("PATCH", p) if p.ends_with("/node-pools/{pool}") => json!({"count": 3}),
                ("POST", p) if p.ends_with("/upgrade") => json!({"version": "v1.32.6"}),
                ("POST", p) if p.ends_with("/elastic-ips") => {
                    json!({"name": "web", "exposure": "private"})
                }
                ("POST", p) if p.ends_with("/firewall-rules") => {
                    json!({"name": "https", "protocol": "tcp", "source_cidrs": ["203.0.113.0/24"],
                           "port_range": {"from": 443, "to": 443}})
                }
                ("POST", AUTH_SERVERS) => token_server("during-outage", "outage-static-token-0001"),
                ("PATCH", _) => json!({"name": "renamed"}),
                ("POST", p) if p.ends_with("/credentials") => {
                    json!({"token": "outage-static-token-0002"})
                }
                other => panic!("no body for {other:?}: add one"),
            });
            Req {
                method: Method::from_bytes(r.method.as_bytes()).unwrap(),
                path,
                public: matches!(r.role, api::routes::RequiredRole::Public),
                idempotent: r.idempotent,
                body,
            }
        })
        .collect()
}

struct Req {
    method: Method,
    path: String,
    public: bool,
    idempotent: bool,
    body: Option<Value>,
}

/// Sends every route at once and checks each answer: 502 `auth_backend_unavailable`, or 200
/// for the routes without authentication.
async fn every_route_is_502(app: &TestApp, reqs: &[Req], what: &str) {
    let answers = futures::future::join_all(reqs.iter().map(|r| {
        let mut b = app.request(r.method.clone(), &r.path, Some(TOKEN_ACME_SUPER_ADMIN));
        if r.idempotent {
            b = b.header("Idempotency-Key", format!("outage-{}", Uuid::new_v4()));
        }
        if let Some(body) = &r.body {
            b = b.json(body);
        }
        app.send(b)
    }))
    .await;
    for (r, a) in reqs.iter().zip(answers) {
        let label = format!("{what}: {} {}", r.method, r.path);
        if r.public {
            assert_eq!(a.status, 200, "{label}: {}", a.text());
        } else {
            assert_problem(&a, 502, "auth_backend_unavailable", &label);
            assert!(!a.text().contains(TOKEN_ACME_SUPER_ADMIN), "{label}");
        }
    }
}

async fn healthy(app: &TestApp, id: &str) {
    let a = app
        .get(&format!("{CLUSTERS}/{id}"), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(a.status, 200, "after recovery: {}", a.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_platform_outages_are_502_change_nothing_and_heal_without_a_restart() {
    let mut app = TestApp::spawn_with(&[
        ("ACCOUNT_PLATFORM_TIMEOUT_MS", "300"),
        ("TOKEN_CACHE_TTL_S", "0"),
        ("RECONCILER_POLL_MS", "20"),
    ])
    .await;
    // Something for every by-id route to name: a provisioned cluster with its nodes and a
    // token auth server with a second credential.
    let cluster = app.create_cluster("outage-1").await;
    let id = cluster["id"].as_str().unwrap().to_owned();
    app.wait_for(&format!("{CLUSTERS}/{id}"), Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned" && c["node_pools"][0]["status"] == "Ready"
    })
    .await;
    let nodes = app
        .get(&format!("{CLUSTERS}/{id}/nodes"), TOKEN_ACME_MEMBER)
        .await
        .json();
    let node = nodes["items"][0]["name"].as_str().unwrap().to_owned();
    let s = app
        .post(
            AUTH_SERVERS,
            TOKEN_ACME_SUPER_ADMIN,
            &token_server("edge", "outage-static-token-aaaa"),
        )
        .await;
    assert_eq!(s.status, 201, "{}", s.text());
    let sid = s.json()["id"].as_str().unwrap().to_owned();
    let c = app
        .post(
            &format!("{AUTH_SERVERS}/{sid}/credentials"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"token": "outage-static-token-bbbb"}),
        )
        .await;
    assert_eq!(c.status, 201, "{}", c.text());
    let cid = c.json()["id"].as_str().unwrap().to_owned();
    let reqs = every_route(&id, &node, &sid, &cid);
    let before = app.counts();
    let cluster_before = app
        .get(&format!("{CLUSTERS}/{id}"), TOKEN_ACME_MEMBER)
        .await
        .text();

    for fault in [Fault::Status500, Fault::Garbage, Fault::Hang] {
        app.platform.set_fault(fault);
        fault_injected(&format!("account platform {fault:?}"));
        every_route_is_502(&app, &reqs, &format!("{fault:?}")).await;
        assert_eq!(app.counts(), before, "{fault:?} changed rows");
        app.platform.set_fault(Fault::Normal);
        healthy(&app, &id).await;
    }

    // Refusing connections: the stub stopped; then a new one on the same port.
    let addr = app.platform.addr();
    let stopped = std::mem::replace(&mut app.platform, StubPlatform::start_demo());
    stopped.stop();
    fault_injected("account platform refusing connections");
    every_route_is_502(&app, &reqs, "refused").await;
    assert_eq!(app.counts(), before, "refused changed rows");
    app.platform = StubPlatform::start_on(addr, Directory::demo(), DEFAULT_SERVICE_TOKEN)
        .expect("restart the platform stub on its old port");
    healthy(&app, &id).await;

    // Nothing any failed request could have touched moved, and the service is whole again:
    // reads, and a write through the same server process.
    assert_eq!(
        app.get(&format!("{CLUSTERS}/{id}"), TOKEN_ACME_MEMBER)
            .await
            .text(),
        cluster_before
    );
    let a = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("acme", "after-outage"),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    assert_eq!(app.count_rows("clusters"), before[0] + 1);
}

//! deploy/monitoring/ against real scrapes: every series the alerting and recording rules and
//! the Grafana dashboard select is one the server's `/metrics` or the gateway's admin
//! `/metrics` exports (or one the rules record), with the labels they filter on. A renamed
//! metric or label fails here instead of leaving an alert that can never fire.

use std::collections::BTreeSet;
use std::time::Duration;

use blackbox::monitoring::{
    Scrape, Selector, dashboard_expressions, problems, rule_expressions, selectors, start_gateway,
};
use blackbox::*;
use serde_json::json;

/// Traffic that makes every series of the server appear with its labels: a cluster
/// provisioned, reads of one object and of lists, refusals, a readiness check.
async fn server_traffic(app: &TestApp) {
    let cluster = app.create_cluster("watched").await;
    let path = format!("{CLUSTERS}/{}", id(&cluster));
    app.wait_for(&path, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    assert_eq!(app.get(CLUSTERS, TOKEN_ACME_MEMBER).await.status, 200);
    assert_eq!(app.get("/v1/nowhere", TOKEN_ACME_MEMBER).await.status, 404);
    let unauthenticated = app
        .send(app.request(reqwest::Method::GET, CLUSTERS, None))
        .await;
    assert_eq!(unauthenticated.status, 401);
    let ready = app
        .send(app.request(reqwest::Method::GET, "/readyz", None))
        .await;
    assert_eq!(ready.status, 200);
}

/// A Basic route of acme in front of the server itself, and the answers a gateway gives: off
/// every route, without credentials, with wrong ones until the client is refused 429, and
/// proxied.
async fn gateway_scrape(app: &TestApp) -> Scrape {
    let created = app
        .post(
            AUTH_SERVERS,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"organization": "acme", "name": "staff", "environment": "production",
                "type": "basic", "config": {"realm": "Staff",
                "credentials": [{"username": "alice", "password": "correct horse battery staple"}]}}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let routes = format!(
        "[[route]]\npath_prefix = \"/staff\"\nupstream = \"{}\"\norganization = \"acme\"\n\
         environment = \"production\"\nauth_server = \"staff\"\n",
        app.url
    );
    let gateway = start_gateway(app, &routes).await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", gateway.addr);
    let status = |r: reqwest::Result<reqwest::Response>| {
        r.unwrap_or_else(|e| panic!("gateway: {e}"))
            .status()
            .as_u16()
    };
    assert_eq!(status(client.get(url("/nowhere")).send().await), 404);
    assert_eq!(status(client.get(url("/staff/healthz")).send().await), 401);
    let mut refused = Vec::new();
    for _ in 0..11 {
        let r = client
            .get(url("/staff/healthz"))
            .basic_auth("alice", Some("wrong"))
            .send()
            .await;
        refused.push(status(r));
    }
    assert_eq!(refused.last(), Some(&429), "{refused:?}");
    let scrape = client
        .get(format!("http://{}/metrics", gateway.admin))
        .send()
        .await
        .unwrap_or_else(|e| panic!("gateway /metrics: {e}"));
    assert_eq!(scrape.status().as_u16(), 200);
    Scrape::parse(&scrape.text().await.unwrap_or_default())
}

#[tokio::test]
async fn every_series_the_rules_and_the_dashboard_select_is_exported() {
    let app = TestApp::spawn().await;
    server_traffic(&app).await;
    let gateway = gateway_scrape(&app).await;
    let server = app
        .send(app.request(reqwest::Method::GET, "/metrics", None))
        .await;
    assert_eq!(server.status, 200);
    let server = Scrape::parse(&server.text());

    let (mut expressions, recorded) = rule_expressions();
    let rules = expressions.len();
    expressions.extend(dashboard_expressions());
    assert!(rules > 30, "the rules file holds {rules} rules");
    assert!(expressions.len() > rules + 20, "{expressions:#?}");
    let found = problems(&[&server, &gateway], &recorded, &expressions);
    assert!(found.is_empty(), "{}", found.join("\n"));

    // The names the files select, so a scanner that found nothing cannot pass.
    let selected: BTreeSet<String> = expressions
        .iter()
        .flat_map(|(_, e)| selectors(e))
        .map(|s| s.name)
        .collect();
    for name in [
        "http_requests_total",
        "http_request_duration_seconds_bucket",
        "http_requests_in_flight",
        "db_pool_connections",
        "provisioning_queue_depth",
        "provisioning_operations_total",
        "account_platform_failures_total",
        "change_feed_heartbeat_age_seconds",
        "gateway_requests_total",
        "kubesvc:api_availability:error_ratio_rate1h",
    ] {
        assert!(selected.contains(name), "{name} not selected: {selected:?}");
    }
}

#[test]
fn the_scanner_finds_each_selector_and_the_labels_it_filters_on() {
    let sel = |name: &str, labels: &[&str]| Selector {
        name: name.into(),
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
    };
    let cases: Vec<(&str, Vec<Selector>)> = vec![
        ("up", vec![sel("up", &[])]),
        (
            r#"sum by (route, status) (rate(gateway_requests_total{status=~"401|429"}[$__rate_interval]))"#,
            vec![sel("gateway_requests_total", &["status"])],
        ),
        (
            r#"histogram_quantile(0.99, sum by (le) (rate(http_request_duration_seconds_bucket{method="GET",route=~"/v1/.+[}]"}[5m])))"#,
            vec![sel(
                "http_request_duration_seconds_bucket",
                &["method", "route"],
            )],
        ),
        (
            "a:b:ratio_rate1h > (14.4 * 0.001) and on (instance) b offset 1h unless c bool > 1e3",
            vec![sel("a:b:ratio_rate1h", &[]), sel("b", &[]), sel("c", &[])],
        ),
        (
            r#"label_replace(x{a="}{,"}, "dst", "$1", "src", "(.*)") or vector(0) # y{z=""}"#,
            vec![sel("x", &["a"])],
        ),
        (
            "max_over_time(db_pool_connections{state='idle'}[15m:1m]) == 0 and Inf > NaN",
            vec![sel("db_pool_connections", &["state"])],
        ),
        (r#"{__name__="hidden"}"#, vec![]),
    ];
    for (expr, expected) in cases {
        assert_eq!(selectors(expr), expected, "{expr}");
    }
}

#[test]
fn the_check_refuses_names_and_labels_a_scrape_does_not_have() {
    let scrape = Scrape::parse(
        "# TYPE http_requests counter\n\
         http_requests_total{method=\"GET\",route=\"/v1/catalog\",status=\"200\"} 1\n\
         # TYPE http_request_duration_seconds histogram\n\
         http_request_duration_seconds_bucket{le=\"0.1\",method=\"GET\",route=\"/v1/catalog\"} 1\n\
         # TYPE db_pool_connections gauge\n\
         db_pool_connections{state=\"idle\"} 3\n\
         # TYPE gateway_connections_refused counter\n\
         # EOF\n",
    );
    let recorded = BTreeSet::from(["kubesvc:ratio".to_owned()]);
    let cases = [
        // Exported, with the suffix Prometheus stores them under, or recorded.
        (
            r#"rate(http_requests_total{status="500",instance="a"}[5m])"#,
            0,
        ),
        (
            r#"http_request_duration_seconds_bucket{le="0.1",route="/"}"#,
            0,
        ),
        (
            "http_request_duration_seconds_count + http_request_duration_seconds_sum",
            0,
        ),
        ("db_pool_connections > kubesvc:ratio", 0),
        // A family with no sample yet exists, but its labels cannot be vouched for.
        ("gateway_connections_refused_total", 0),
        (r#"gateway_connections_refused_total{route="/"}"#, 1),
        // Misnamed: a counter without `_total`, a histogram without its suffix, a typo, a
        // gauge with a counter's suffix, an unrecorded name.
        ("rate(http_requests[5m])", 1),
        ("http_request_duration_seconds", 1),
        ("http_request_total", 1),
        ("db_pool_connections_total", 1),
        ("kubesvc:other", 1),
        // A label the series does not carry.
        (r#"http_requests_total{status_code="500"}"#, 1),
        (
            r#"db_pool_connections{state="idle",pool="main"} + http_requests"#,
            2,
        ),
    ];
    for (expr, expected) in cases {
        let found = problems(
            &[&scrape],
            &recorded,
            &[("case".to_owned(), expr.to_owned())],
        );
        assert_eq!(found.len(), expected, "{expr}: {found:?}");
    }
}

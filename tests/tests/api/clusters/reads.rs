//! Reading clusters: the list envelope (`{items, page, size, total}`, default size 20, at
//! most 100, ordered by `created_at` then `id` across pages), and by-id routes, whose organization
//! is the cluster's.

use blackbox::*;
use reqwest::Method;
use serde_json::{Value, json};

fn ids(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelope_order_and_pages() {
    let app = TestApp::spawn_api_only(&[]).await;
    // Created concurrently, so several may share a timestamp: the id breaks ties.
    let bodies: Vec<Value> = (0..45)
        .map(|i| cluster_body("acme", &format!("c{i:02}")))
        .collect();
    let creates = bodies
        .iter()
        .map(|b| app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, b));
    for a in futures::future::join_all(creates).await {
        assert_eq!(a.status, 201, "{}", a.text());
    }
    // One in globex must never show up.
    app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "elsewhere")
        .await;
    let list = |q: &str| format!("{CLUSTERS}?organization=acme{q}");
    let first = app.get(&list(""), TOKEN_ACME_MEMBER).await.json();
    assert_eq!(
        (
            first["page"].as_u64(),
            first["size"].as_u64(),
            first["total"].as_u64()
        ),
        (Some(1), Some(20), Some(45))
    );
    assert_eq!(ids(&first).len(), 20);
    let mut all = Vec::new();
    for page in 1..=3 {
        let p = app
            .get(&list(&format!("&page={page}&size=20")), TOKEN_ACME_MEMBER)
            .await
            .json();
        assert_eq!(p["total"], 45);
        assert_eq!(p["page"], page);
        all.extend(p["items"].as_array().unwrap().iter().map(|c| {
            (
                c["created_at"].as_str().unwrap().to_owned(),
                c["id"].as_str().unwrap().to_owned(),
            )
        }));
    }
    assert_eq!(all.len(), 45);
    let mut sorted = all.clone();
    sorted.sort_by(|a, b| {
        let t = |s: &str| chrono_like(s);
        t(&a.0).cmp(&t(&b.0)).then(a.1.cmp(&b.1))
    });
    assert_eq!(all, sorted, "ordered by created_at then id");
    let mut unique: Vec<_> = all.iter().map(|x| x.1.clone()).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 45, "no cluster on two pages");
    // One page of 100 holds everything, in the same order.
    let big = app.get(&list("&size=100"), TOKEN_ACME_MEMBER).await.json();
    assert_eq!(
        ids(&big),
        all.iter().map(|x| x.1.clone()).collect::<Vec<_>>()
    );
    assert_eq!(big["size"], 100);
    // Past the end: empty items, the total still right.
    let past = app
        .get(&list("&page=4&size=20"), TOKEN_ACME_MEMBER)
        .await
        .json();
    assert_eq!(
        (
            ids(&past).len(),
            past["total"].as_u64(),
            past["page"].as_u64()
        ),
        (0, Some(45), Some(4))
    );
    let far = app
        .get(&list("&page=1000000"), TOKEN_ACME_MEMBER)
        .await
        .json();
    assert_eq!(ids(&far).len(), 0);
    // Another organization's list holds only its own.
    let g = app
        .get(&format!("{CLUSTERS}?organization=globex"), TOKEN_TWO_ORGS)
        .await
        .json();
    assert_eq!((ids(&g).len(), g["total"].as_u64()), (1, Some(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_organization_lists_nothing() {
    let app = TestApp::spawn_api_only(&[]).await;
    let a = app
        .get(&format!("{CLUSTERS}?organization=acme"), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        serde_json::json!({"items": [], "page": 1, "size": 20, "total": 0})
    );
}

/// RFC 3339 UTC timestamps compare as instants once their fraction is padded.
fn chrono_like(s: &str) -> String {
    let (main, rest) = s.split_once('.').unwrap_or((s.trim_end_matches('Z'), "Z"));
    let frac: String = rest
        .trim_end_matches('Z')
        .chars()
        .chain(std::iter::repeat('0'))
        .take(9)
        .collect();
    format!("{main}.{frac}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn by_id_routes_take_the_organization_from_the_cluster() {
    let app = TestApp::spawn_api_only(&[]).await;
    let g = app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "g1").await;
    let path = format!("{CLUSTERS}/{}", id(&g));
    // dave reads his globex cluster while naming acme in header and query.
    let r = app
        .request(
            Method::GET,
            &format!("{path}?organization=acme"),
            Some(TOKEN_TWO_ORGS),
        )
        .header("X-Platform-Organization", "acme");
    assert_eq!(app.send(r).await.status, 200);
    // alice cannot reach it by naming globex.
    let r = app
        .request(
            Method::GET,
            &format!("{path}?organization=globex"),
            Some(TOKEN_ACME_SUPER_ADMIN),
        )
        .header("X-Platform-Organization", "globex");
    expect(&app.send(r).await, 403, "forbidden");
    // A by-id route needs no organization at all (carol has no preferred organization).
    let a = app.create_cluster("a1").await;
    assert_eq!(
        app.get(&format!("{CLUSTERS}/{}", id(&a)), TOKEN_ACME_PROJECT_ADMIN)
            .await
            .status,
        200
    );
    // dave is a member of acme: reading works, writing does not, whatever the header says.
    let r = app
        .request(
            Method::PATCH,
            &format!("{CLUSTERS}/{}", id(&a)),
            Some(TOKEN_TWO_ORGS),
        )
        .header("X-Platform-Organization", "globex")
        .json(&json!({"description": "x"}));
    expect(&app.send(r).await, 403, "forbidden");
}

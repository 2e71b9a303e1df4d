//! A cluster's pages as a new user meets them: they follow what is in progress without a
//! reload, a refused form keeps what was typed and says why beside the field, and what
//! destroys asks first, saying what follows.

use blackbox::console::{Browser, Page};
use blackbox::{TOKEN_ACME_SUPER_ADMIN, TestApp, id};

/// Follows a page's live poller as htmx would, until it stops asking; every answer it got.
async fn follow_live(browser: &mut Browser, page: &Page) -> Vec<Page> {
    let mut answers = Vec::new();
    let mut next = page.attribute("progress", "hx-get");
    while let Some(url) = next {
        assert!(answers.len() < 100, "the page never settled");
        let answer = browser.get(&url).await;
        assert_eq!(answer.status, 200, "{}", answer.body);
        next = answer.attribute("progress", "hx-get");
        answers.push(answer);
    }
    answers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_clusters_page_follows_its_progress_and_says_when_it_is_done() {
    // Slow steps, so the page meets the phases in between.
    let app = TestApp::spawn_with(&[("PROVISIONER_STEP_MS", "200")]).await;
    let cluster = app.create_cluster("live-page").await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin
        .get(&format!("/console/clusters/{}", id(&cluster)))
        .await;
    assert_eq!(page.status, 200, "{}", page.body);
    let first = page.text_of("progress").unwrap_or_default();
    assert!(
        first.contains("Queued") || first.contains("control plane"),
        "{first}"
    );

    let answers = follow_live(&mut admin, &page).await;
    let last = answers.last().unwrap_or_else(|| panic!("no live answer"));
    for answer in &answers {
        // Only what nobody types into is redrawn: the badge, the progress, the facts.
        assert!(!answer.body.contains("<form"), "{}", answer.body);
        assert!(
            answer
                .body
                .contains("id=\"cluster-phase\" hx-swap-oob=\"true\"")
        );
        assert!(
            answer
                .body
                .contains("id=\"cluster-facts\" hx-swap-oob=\"true\"")
        );
    }
    let done = last.text_of("progress").unwrap_or_default();
    assert!(
        done.starts_with("Done. Provisioned: 2 nodes ready"),
        "{done}"
    );
    assert!(
        last.text_of("cluster-phase")
            .is_some_and(|t| t.contains("Provisioned"))
    );
    // A page opened now has nothing to follow.
    let settled = admin
        .get(&format!("/console/clusters/{}/nodes", id(&cluster)))
        .await;
    assert_eq!(settled.attribute("progress", "hx-get"), None);
    assert!(
        settled
            .text_of("progress")
            .is_some_and(|t| t.starts_with("Provisioned"))
    );
}

#[tokio::test]
async fn a_refused_pool_form_keeps_what_was_typed_and_says_why_beside_the_field() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("forms").await;
    let tab = format!("/console/clusters/{}/node-pools", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin.get(&tab).await;
    // The tier list says each tier's disk and marks the recommended one; the bounds of a pool
    // without autoscale start empty.
    assert!(
        page.body.contains("GiB disk (recommended)"),
        "{}",
        page.body
    );
    assert_eq!(page.attribute("default-min", "value").as_deref(), Some(""));
    assert_eq!(page.attribute("default-max", "value").as_deref(), Some(""));

    // (the fields typed, the field marked, what is said beside it)
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
    let table: [Case; 3] = [
        (
            &[("name", "gpu"), ("count", "201")],
            "new-pool-count",
            "must be between 1 and 200",
        ),
        (
            &[
                ("name", "gpu"),
                ("count", "3"),
                ("auto_scale", "on"),
                ("min_nodes", "5"),
                ("max_nodes", "2"),
            ],
            "new-pool-min",
            "must not exceed the maximum (2)",
        ),
        (
            &[("name", "Not_A_Label"), ("count", "1")],
            "new-pool-name",
            "DNS label",
        ),
    ];
    for (typed, field, said) in table {
        let page = admin.get(&tab).await;
        let (csrf, key) = page.form_keys(&tab);
        let mut form = vec![
            ("csrf", csrf.as_str()),
            ("key", key.as_str()),
            ("size", "kube.c5.large"),
        ];
        form.extend_from_slice(typed);
        let refused = admin.post(&tab, &form, &[]).await;
        assert_eq!(refused.status, 422, "{}", refused.body);
        let beside = refused
            .text_of(&format!("{field}-error"))
            .unwrap_or_default();
        assert!(beside.contains(said), "{field}: {beside}");
        assert_eq!(
            refused.attribute(field, "aria-invalid").as_deref(),
            Some("true")
        );
        for (name, value) in typed {
            let id = match *name {
                "name" => "new-pool-name",
                "count" => "new-pool-count",
                "min_nodes" => "new-pool-min",
                "max_nodes" => "new-pool-max",
                _ => continue,
            };
            assert_eq!(
                refused.attribute(id, "value").as_deref(),
                Some(*value),
                "{id}"
            );
        }
        // What a person reads names the form's labels, never the API's fields.
        let read = refused.text_of("main").unwrap_or_default();
        assert!(
            !read.contains("min_nodes") && !read.contains("auto_scale") && !read.contains("count:"),
            "API words leaked: {read}"
        );
    }

    // The scale form of a pool keeps its own values too.
    let page = admin.get(&tab).await;
    let scale = format!("{tab}/default/scale");
    let (csrf, key) = page.form_keys(&scale);
    let refused = admin
        .post(
            &scale,
            &[("csrf", &csrf), ("key", &key), ("count", "500")],
            &[],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert_eq!(
        refused.attribute("default-count", "value").as_deref(),
        Some("500")
    );
    assert!(
        refused
            .text_of("default-count-error")
            .is_some_and(|t| t.contains("between 1 and 200"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_node_asks_first_says_it_is_replaced_and_is_not_offered_twice() {
    // Slow steps: a deleted node stays Deleting long enough to be seen.
    let app = TestApp::spawn_with(&[("PROVISIONER_STEP_MS", "1500")]).await;
    let cluster = app.provisioned_cluster("nodes-page").await;
    let url = format!("/v1/public/clusters/{}", id(&cluster));
    let tab = format!("/console/clusters/{}/nodes", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin.get(&tab).await;
    let nodes = app
        .get(&format!("{url}/nodes"), TOKEN_ACME_SUPER_ADMIN)
        .await
        .json();
    let node = nodes["items"][0]["name"].as_str().unwrap_or_default();
    // The delete is behind a question that says what follows.
    assert!(
        page.body
            .contains(&format!("<summary>Delete node {node}…</summary>")),
        "{}",
        page.body
    );
    assert!(
        page.body
            .contains("replaced by a new one: pool default keeps its 2 nodes")
    );
    let action = format!("/console/clusters/{}/nodes/{node}/delete", id(&cluster));
    let (csrf, key) = page.form_keys(&action);
    let deleted = admin
        .post(&action, &[("csrf", &csrf), ("key", &key)], &[])
        .await;
    assert_eq!(deleted.status, 303, "{}", deleted.body);
    let page = admin.get(&tab).await;
    assert!(
        !page.body.contains(&format!("action=\"{action}\"")),
        "a node being replaced offers no delete: {}",
        page.body
    );
    assert!(page.body.contains("Being replaced"), "{}", page.body);
    assert!(
        page.attribute("progress", "hx-get").is_some(),
        "the page follows the replacement"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_upgrades_a_cluster_shows_each_pools_progress_and_saves_the_window() {
    // Slow steps, so the upgrade is seen in flight.
    let app = TestApp::spawn_with(&[("PROVISIONER_STEP_MS", "300")]).await;
    let cluster = app.provisioned_cluster("upgrade-page").await;
    let overview = format!("/console/clusters/{}", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin.get(&overview).await;
    assert!(
        page.body.contains("<option value=\"v1.32.6\">"),
        "{}",
        page.body
    );
    assert!(page.body.contains("<option value=\"v1.33.2\">"));
    assert!(
        !page.body.contains("<option value=\"v1.31.9\">"),
        "never down"
    );
    let csrf = page.field("csrf").unwrap_or_default();
    let action = format!("{overview}/upgrade");

    let refused = admin
        .post(&action, &[("csrf", &csrf), ("version", "v1.31.9")], &[])
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(
        refused.body.contains("never downgraded"),
        "{}",
        refused.body
    );

    let started = admin
        .post(
            &action,
            &[("csrf", &csrf), ("version", "v1.32.6"), ("max_surge", "2")],
            &[],
        )
        .await;
    assert_eq!(started.status, 303, "{}", started.body);
    let page = admin.get(&overview).await;
    let progress = page.text_of("upgrade-progress").unwrap_or_default();
    assert!(
        progress.starts_with("Upgrading to v1.32.6"),
        "{}",
        page.body
    );
    let url = format!("/v1/public/clusters/{}", id(&cluster));
    let done = app
        .wait_for(&url, std::time::Duration::from_secs(120), |c| {
            c["upgrade"].is_null()
        })
        .await;
    assert_eq!(done["version"], "v1.32.6");
    assert_eq!(done["node_pools"][0]["max_surge"], 2);

    let saved = admin
        .post(
            &format!("{overview}/maintenance"),
            &[
                ("csrf", &csrf),
                ("day", "sunday"),
                ("start_time", "04:30:00"),
                ("auto_upgrade", "on"),
            ],
            &[],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let c = app.get(&url, TOKEN_ACME_SUPER_ADMIN).await.json();
    assert_eq!(c["maintenance_window"]["day"], "sunday");
    assert_eq!(c["maintenance_window"]["start_time"], "04:30");
    assert_eq!(c["auto_upgrade"], true);
    let wrong = admin
        .post(
            &format!("{overview}/maintenance"),
            &[("csrf", &csrf), ("day", "someday"), ("start_time", "04:30")],
            &[],
        )
        .await;
    assert_eq!(wrong.status, 422, "{}", wrong.body);
    assert!(
        wrong.body.contains("weekday") || wrong.body.contains("monday"),
        "{}",
        wrong.body
    );

    // A member reads the window but is offered neither form.
    let mut member = Browser::signed_in(&app, blackbox::TOKEN_ACME_MEMBER).await;
    let theirs = member.get(&overview).await;
    assert!(
        theirs.body.contains("sunday from 04:30 UTC"),
        "{}",
        theirs.body
    );
    assert!(!theirs.body.contains(&format!("action=\"{action}\"")));
}

/// The Node pools tab takes taints on a new pool and changes a pool's taints, one per line as
/// `kubectl taint` writes them; a refused line is named beside the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pools_tab_sets_taints_and_names_the_refused_line() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("tainted").await;
    let tab = format!("/console/clusters/{}/node-pools", id(&cluster));
    let pools = format!("/v1/public/clusters/{}/node-pools", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin.get(&tab).await;
    let (csrf, key) = page.form_keys(&tab);
    let added = admin
        .post(
            &tab,
            &[
                ("csrf", &csrf),
                ("key", &key),
                ("name", "gpu"),
                ("size", "kube.c5.large"),
                ("count", "1"),
                (
                    "taints",
                    "nvidia.com/gpu:NoSchedule\r\n\r\ndedicated=ml:NoExecute",
                ),
            ],
            &[],
        )
        .await;
    assert_eq!(added.status, 303, "{}", added.body);
    let listed = app.get(&pools, TOKEN_ACME_SUPER_ADMIN).await.json();
    let gpu = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gpu")
        .cloned()
        .unwrap();
    assert_eq!(
        gpu["taints"],
        serde_json::json!([
            {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
        ])
    );

    let page = admin.get(&tab).await;
    assert!(
        page.body.contains("nvidia.com/gpu:NoSchedule"),
        "{}",
        page.body
    );
    let action = format!("{tab}/gpu/taints");
    let (csrf, key) = page.form_keys(&action);
    let refused = admin
        .post(
            &action,
            &[
                ("csrf", &csrf),
                ("key", &key),
                ("taints", "ok:NoSchedule\nspot=yes:Sometimes"),
            ],
            &[],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains("Line 2, effect"), "{}", refused.body);
    assert!(
        refused.body.contains("spot=yes:Sometimes"),
        "what was typed stays"
    );
    let page = admin.get(&tab).await;
    let (csrf, key) = page.form_keys(&action);
    let cleared = admin
        .post(
            &action,
            &[("csrf", &csrf), ("key", &key), ("taints", "")],
            &[],
        )
        .await;
    assert_eq!(cleared.status, 303, "{}", cleared.body);
    let listed = app.get(&pools, TOKEN_ACME_SUPER_ADMIN).await.json();
    assert!(
        listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["taints"] == serde_json::json!([])),
        "{listed}"
    );
}

/// The Networking tab shows the control-plane firewall and changes it through the API's use
/// case: a refused network is said with the network meant; a member sees it and no form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_networking_tab_changes_the_control_plane_firewall() {
    let app = TestApp::spawn_with(&[("RECONCILER_POLL_MS", "20")]).await;
    let cluster = app.provisioned_cluster("fenced-page").await;
    let tab = format!("/console/clusters/{}/networking", id(&cluster));
    let action = format!("/console/clusters/{}/control-plane-firewall", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin.get(&tab).await;
    assert!(
        page.text_of("control-plane-firewall")
            .is_some_and(|t| t.contains("Open: anyone holding a credential")),
        "{}",
        page.body
    );
    let (csrf, _) = page.form_keys(&action);
    let refused = admin
        .post(
            &action,
            &[
                ("csrf", &csrf),
                ("enabled", "on"),
                ("allowed_addresses", "203.0.113.0/24\n10.1.0.0/8"),
            ],
            &[],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("did you mean 10.0.0.0/8"),
        "{}",
        refused.body
    );
    let saved = admin
        .post(
            &action,
            &[
                ("csrf", &csrf),
                ("enabled", "on"),
                ("allowed_addresses", "203.0.113.0/24\r\n2001:DB8::/32\r\n"),
            ],
            &[],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let path = format!("/v1/public/clusters/{}", id(&cluster));
    let applied = app
        .wait_for(&path, std::time::Duration::from_secs(60), |c| {
            c["control_plane_firewall_change"].is_null()
                && c["control_plane_firewall"]["enabled"] == true
        })
        .await;
    assert_eq!(
        applied["control_plane_firewall"]["allowed_addresses"],
        serde_json::json!(["203.0.113.0/24", "2001:db8::/32"])
    );
    let page = admin.get(&tab).await;
    assert!(
        page.text_of("control-plane-firewall")
            .is_some_and(|t| t.contains("Only callers from") && t.contains("2001:db8::/32")),
        "{}",
        page.body
    );
    let mut member = Browser::signed_in(&app, blackbox::TOKEN_ACME_MEMBER).await;
    let seen = member.get(&tab).await;
    assert!(seen.body.contains("Only callers from"), "{}", seen.body);
    assert!(
        !seen.body.contains(&format!("action=\"{action}\"")),
        "no form for a member"
    );
    let csrf = member.csrf().await;
    let forbidden = member
        .post(&action, &[("csrf", &csrf), ("allowed_addresses", "")], &[])
        .await;
    assert_eq!(forbidden.status, 403, "{}", forbidden.body);
}

//! The web console over HTTP: sign-in and its session, the pages' roles, and the attacks a
//! console meets (login CSRF, forged forms, cookies of another purpose).

use std::time::Duration;

use blackbox::console::{Browser, Page};
use blackbox::{TOKEN_ACME_MEMBER, TOKEN_ACME_SUPER_ADMIN, TOKEN_TWO_ORGS, TestApp, id};

const SESSION: &str = "kubesvc-session";

async fn phase(app: &TestApp, url: &str) -> serde_json::Value {
    app.get(url, TOKEN_ACME_SUPER_ADMIN).await.json()["phase"].clone()
}

fn assert_refused_as_forged(page: &Page) {
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(
        page.body.contains("not sent from the console"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn every_answer_carries_a_strict_policy_and_pages_run_no_inline_script() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut browser = Browser::new(&app);
    let page = browser.get("/console/sign-in").await;
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap_or_default();
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert_eq!(page.header("x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(page.header("cache-control").as_deref(), Some("no-store"));
    assert!(
        !page.body.contains("<script>"),
        "an inline script: {}",
        page.body
    );
    assert!(
        !page.body.contains("style=\""),
        "an inline style: {}",
        page.body
    );
    let nonce_cookie = page.set_cookies().join("\n");
    assert!(
        nonce_cookie.contains("HttpOnly") && nonce_cookie.contains("SameSite=Strict"),
        "{nonce_cookie}"
    );
}

#[tokio::test]
async fn the_hashed_assets_are_cached_for_a_year_and_an_old_hash_is_404() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut browser = Browser::new(&app);
    let page = browser.get("/console/sign-in").await;
    let start = page.body.find("/console/assets/").unwrap_or_default();
    let css: String = page.body[start..]
        .chars()
        .take_while(|c| *c != '"')
        .collect();
    let asset = browser.get(&css).await;
    assert_eq!(asset.status, 200, "{css}");
    assert!(
        asset
            .header("cache-control")
            .unwrap_or_default()
            .contains("immutable")
    );
    assert!(
        asset
            .header("content-type")
            .unwrap_or_default()
            .starts_with("text/css")
    );
    let page_gz = browser
        .send_with("/console/sign-in", &[("accept-encoding", "gzip")])
        .await;
    assert_eq!(
        page_gz.header("content-encoding"),
        None,
        "pages are never compressed"
    );
    let asset_gz = browser
        .send_with(&css, &[("accept-encoding", "gzip")])
        .await;
    assert_eq!(asset_gz.header("content-encoding").as_deref(), Some("gzip"));
    let stale = browser
        .get("/console/assets/0000000000000000/console.css")
        .await;
    assert_eq!(stale.status, 404);
}

#[tokio::test]
async fn without_a_session_every_page_sends_to_sign_in_and_a_forged_cookie_is_no_session() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("web").await;
    let mut browser = Browser::new(&app);
    let page = browser.get("/console/clusters").await;
    assert_eq!(page.status, 303);
    assert_eq!(page.header("location").as_deref(), Some("/console/sign-in"));
    // Any other page is come back to once signed in.
    let path = format!("/console/clusters/{}", id(&cluster));
    let page = browser.get(&path).await;
    assert_eq!(page.status, 303, "{path}");
    assert_eq!(
        page.header("location"),
        Some(format!(
            "/console/sign-in?next={}",
            path.replace('/', "%2F")
        ))
    );
    for forged in ["v1:AAAA", "garbage", "", TOKEN_ACME_SUPER_ADMIN] {
        browser.set_cookie(SESSION, forged);
        let page = browser.get("/console/clusters").await;
        assert_eq!(page.status, 303, "cookie {forged:?}");
    }
}

#[tokio::test]
async fn signing_in_seals_the_token_and_lists_the_organizations_clusters() {
    let app = TestApp::spawn_api_only(&[]).await;
    app.create_cluster("web-1").await;
    let mut browser = Browser::new(&app);
    let answer = browser.sign_in(TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(
        answer.header("location").as_deref(),
        Some("/console/clusters")
    );
    let cookie = answer
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with(SESSION))
        .unwrap_or_default();
    for flag in ["HttpOnly", "SameSite=Strict", "Max-Age=28800"] {
        assert!(cookie.contains(flag), "{cookie}");
    }
    assert!(
        !cookie.contains(TOKEN_ACME_SUPER_ADMIN),
        "the token shows: {cookie}"
    );
    let page = browser.get("/console/clusters").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("web-1"));
    assert!(
        page.body.contains("Create cluster"),
        "a super_admin may create"
    );
    assert!(page.body.contains("Pending"));
    assert!(!page.body.contains(TOKEN_ACME_SUPER_ADMIN));
}

#[tokio::test]
async fn a_token_the_platform_refuses_is_401_and_opens_no_session() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut browser = Browser::new(&app);
    let page = browser.sign_in("not-a-token-anyone-issued").await;
    assert_eq!(page.status, 401, "{}", page.body);
    assert!(page.body.contains("did not accept"));
    assert!(!page.body.contains("not-a-token-anyone-issued"));
    assert!(browser.cookie(SESSION).is_none());
}

/// Anyone may try a token at the sign-in form: each try counts against the address's quota of
/// requests that authenticate as no one, so the form is no way around the API's limit.
#[tokio::test]
async fn guessing_tokens_at_the_sign_in_form_is_limited_per_address() {
    let app = TestApp::spawn_api_only(&[("RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS", "3")]).await;
    app.platform.reset_counters();
    let mut browser = Browser::new(&app);
    let mut statuses = Vec::new();
    for i in 0..5 {
        let page = browser
            .sign_in(&format!("guess-{i}-0123456789abcdef"))
            .await;
        statuses.push(page.status);
    }
    assert_eq!(statuses, [401, 401, 401, 429, 429]);
    assert_eq!(app.platform.me_calls(), 3);
}

#[tokio::test]
async fn sign_in_is_refused_without_the_forms_own_nonce_or_from_another_site() {
    let app = TestApp::spawn_api_only(&[]).await;
    // A page of another site can post the form, but cannot read or set the nonce cookie.
    let mut attacker = Browser::new(&app);
    let no_cookie = attacker
        .post(
            "/console/sign-in",
            &[("nonce", "guessed"), ("token", TOKEN_ACME_MEMBER)],
            &[],
        )
        .await;
    assert_refused_as_forged(&no_cookie);
    let mut browser = Browser::new(&app);
    let form = browser.get("/console/sign-in").await;
    let nonce = form.field("nonce").unwrap_or_default();
    let cases: [(&str, &[(&str, &str)]); 3] = [
        ("another-nonce", &[]),
        (&nonce, &[("sec-fetch-site", "cross-site")]),
        (&nonce, &[("origin", "https://evil.example")]),
    ];
    for (sent, headers) in cases {
        let page = browser
            .post(
                "/console/sign-in",
                &[("nonce", sent), ("token", TOKEN_ACME_MEMBER)],
                headers,
            )
            .await;
        assert_refused_as_forged(&page);
        assert!(browser.cookie(SESSION).is_none(), "{headers:?}");
    }
}

#[tokio::test]
async fn a_member_sees_every_read_and_no_change_and_a_forced_delete_is_the_use_cases_403() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("web-1").await;
    let path = format!("/console/clusters/{}", id(&cluster));
    let mut member = Browser::signed_in(&app, TOKEN_ACME_MEMBER).await;
    let list = member.get("/console/clusters").await;
    assert!(list.body.contains("web-1"));
    assert!(!list.body.contains("Create cluster"));
    let detail = member.get(&path).await;
    assert_eq!(detail.status, 200);
    assert!(detail.body.contains("Node pools"));
    assert!(!detail.body.contains("Delete cluster"));
    let csrf = member.csrf().await;
    let forced = member
        .post(
            &format!("{path}/delete"),
            &[("csrf", &csrf), ("confirm", "web-1")],
            &[],
        )
        .await;
    assert_eq!(forced.status, 403, "{}", forced.body);
    assert!(forced.body.contains("super_admin"), "{}", forced.body);
    let still = app
        .get(
            &format!("/v1/public/clusters/{}", id(&cluster)),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await;
    assert_eq!(still.json()["phase"], "Pending");
}

#[tokio::test]
async fn delete_needs_the_sessions_csrf_token_and_the_typed_name() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("web-1").await;
    let path = format!("/console/clusters/{}/delete", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let csrf = admin.csrf().await;
    // Another session's token (a second sign-in) does not count for this one.
    let other = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN)
        .await
        .csrf()
        .await;
    for (token, typed) in [("", "web-1"), (other.as_str(), "web-1")] {
        let page = admin
            .post(&path, &[("csrf", token), ("confirm", typed)], &[])
            .await;
        assert_refused_as_forged(&page);
    }
    let mismatch = admin
        .post(&path, &[("csrf", &csrf), ("confirm", "web-2")], &[])
        .await;
    assert_eq!(mismatch.status, 422);
    assert!(mismatch.body.contains("nothing was deleted"));
    let url = format!("/v1/public/clusters/{}", id(&cluster));
    assert_eq!(phase(&app, &url).await, "Pending");
    let done = admin
        .post(&path, &[("csrf", &csrf), ("confirm", "web-1")], &[])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(phase(&app, &url).await, "Deleting");
}

#[tokio::test]
async fn the_organization_switcher_lists_memberships_and_shows_the_chosen_ones_clusters() {
    let app = TestApp::spawn_api_only(&[]).await;
    app.create_cluster("acme-web").await;
    let mut browser = Browser::signed_in(&app, TOKEN_TWO_ORGS).await;
    let preferred = browser.get("/console/clusters").await;
    assert!(
        preferred.body.contains("globex (super_admin)"),
        "{}",
        preferred.body
    );
    assert!(preferred.body.contains("acme (member)"));
    assert!(!preferred.body.contains("acme-web"), "globex is preferred");
    let acme = browser.get("/console/clusters?organization=acme").await;
    assert!(acme.body.contains("acme-web"));
    assert!(!acme.body.contains("Create cluster"), "a member in acme");
    let nowhere = browser.get("/console/clusters?organization=initech").await;
    assert_eq!(nowhere.status, 403);
}

#[tokio::test]
async fn signing_out_removes_the_session_and_needs_the_csrf_token() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut browser = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let refused = browser
        .post("/console/sign-out", &[("csrf", "wrong")], &[])
        .await;
    assert_refused_as_forged(&refused);
    let csrf = browser.csrf().await;
    let out = browser
        .post("/console/sign-out", &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(out.status, 303);
    assert_eq!(out.header("location").as_deref(), Some("/console/sign-in"));
    assert!(browser.cookie(SESSION).is_none());
    assert_eq!(browser.get("/console/clusters").await.status, 303);
}

/// Signing out ends the session on the server: a copy of its cookie kept from before (another
/// tab, a stolen copy) no longer opens it, and signing in again works at once.
#[tokio::test]
async fn a_signed_out_sessions_cookie_opens_nothing_any_more() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut browser = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let copy = browser.cookie(SESSION).cloned().unwrap_or_default();
    let csrf = browser.csrf().await;
    let out = browser
        .post("/console/sign-out", &[("csrf", &csrf)], &[])
        .await;
    assert_eq!(out.status, 303);
    let mut thief = Browser::new(&app);
    thief.set_cookie(SESSION, &copy);
    let page = thief.get("/console/clusters").await;
    assert_eq!(page.status, 303, "{}", page.body);
    assert_eq!(page.header("location").as_deref(), Some("/console/sign-in"));
    let mut again = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(again.get("/console/clusters").await.status, 200);
}

/// "Sign out everywhere" ends every console session of the account, in every browser, but
/// no other account's; a sign-in right after it is a new session that works.
#[tokio::test]
async fn signing_out_everywhere_ends_every_session_of_the_account_only() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut laptop = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let mut phone = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let mut colleague = Browser::signed_in(&app, TOKEN_ACME_MEMBER).await;
    let csrf = laptop.csrf().await;
    let out = laptop
        .post(
            "/console/sign-out",
            &[("csrf", &csrf), ("everywhere", "1")],
            &[],
        )
        .await;
    assert_eq!(out.status, 303);
    assert_eq!(phone.get("/console/clusters").await.status, 303);
    assert_eq!(colleague.get("/console/clusters").await.status, 200);
    let mut back = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(back.get("/console/clusters").await.status, 200);
    assert_eq!(phone.get("/console/clusters").await.status, 303);
}

#[tokio::test]
async fn a_moving_row_follows_the_state_long_poll_and_the_kubeconfig_downloads_once_ready() {
    let app = TestApp::spawn().await;
    let cluster = app.create_cluster("live").await;
    let mut browser = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let row = format!("/console/clusters/{}/row?since=1", id(&cluster));
    let live = browser.get(&row).await;
    assert_eq!(live.status, 200, "{}", live.body);
    assert!(live.body.starts_with("<tr"), "{}", live.body);
    let url = format!("/v1/public/clusters/{}", id(&cluster));
    app.wait_for(&url, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    let row = browser
        .get(&format!("/console/clusters/{}/row?since=0", id(&cluster)))
        .await;
    assert!(row.body.contains("Provisioned"));
    assert!(!row.body.contains("hx-get"), "a settled row stops asking");
    let file = browser
        .get(&format!("/console/clusters/{}/kubeconfig", id(&cluster)))
        .await;
    assert_eq!(file.status, 200);
    assert_eq!(
        file.header("content-type").as_deref(),
        Some("application/yaml")
    );
    assert!(
        file.header("content-disposition")
            .unwrap_or_default()
            .contains("kubeconfig-live.yaml")
    );
    assert!(file.body.contains("kind: Config"));
    app.delete(
        &format!("/v1/public/clusters/{}", id(&cluster)),
        TOKEN_ACME_SUPER_ADMIN,
    )
    .await;
    let url = format!("/v1/public/clusters/{}", id(&cluster));
    app.wait_for(&url, Duration::from_secs(60), |c| c["code"] == "not_found")
        .await;
    let gone = browser
        .get(&format!("/console/clusters/{}/row?since=0", id(&cluster)))
        .await;
    assert_eq!(
        gone.status, 200,
        "a row of a deleted cluster is replaced by nothing"
    );
    assert!(gone.body.is_empty(), "{}", gone.body);
}

/// The fields of the create form as drawn, with `changes` on top (a browser sends every field).
fn create_form(form: &Page, changes: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut fields: Vec<(String, String)> = ["csrf", "key", "organization", "zone"]
        .iter()
        .map(|n| (n.to_string(), form.field(n).unwrap_or_default()))
        .collect();
    fields.extend([
        ("exposure".to_owned(), "public".to_owned()),
        ("network_mode".to_owned(), "intranet".to_owned()),
        ("pool.0.size".to_owned(), "kube.c5.large".to_owned()),
        ("pool.0.count".to_owned(), "2".to_owned()),
    ]);
    for (name, value) in changes {
        fields.retain(|(n, _)| n != name);
        fields.push((name.to_string(), value.to_string()));
    }
    fields
}

async fn post_fields(browser: &mut Browser, fields: &[(String, String)]) -> Page {
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    browser.post("/console/clusters/new", &pairs, &[]).await
}

#[tokio::test]
async fn create_cluster_from_the_catalog_form_shows_field_errors_and_a_double_submit_creates_one() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let form = admin.get("/console/clusters/new").await;
    assert_eq!(form.status, 200, "{}", form.body);
    assert!(
        form.body.contains("(recommended)"),
        "the catalog's picks are marked"
    );
    assert_eq!(form.field("organization").as_deref(), Some("acme"));
    let refused = post_fields(&mut admin, &create_form(&form, &[("name", "Web_1")])).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("id=\"name-error\""),
        "the error sits by its field"
    );
    assert!(refused.body.contains("aria-invalid=\"true\""));
    assert_eq!(app.count_rows("clusters"), 0);
    let form = admin.get("/console/clusters/new").await;
    let fields = create_form(&form, &[("name", "web-1")]);
    let first = post_fields(&mut admin, &fields).await;
    assert_eq!(first.status, 303, "{}", first.body);
    let again = post_fields(&mut admin, &fields).await;
    assert_eq!(again.status, 303, "{}", again.body);
    assert_eq!(again.header("location"), first.header("location"));
    assert_eq!(app.count_rows("clusters"), 1);
    let page = admin
        .get(&first.header("location").unwrap_or_default())
        .await;
    assert!(page.body.contains("web-1") && page.body.contains("Pending"));
}

#[tokio::test]
async fn the_pool_editor_adds_and_removes_pools_without_javascript_and_keeps_what_was_typed() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let form = admin.get("/console/clusters/new").await;
    let mut fields = create_form(&form, &[("name", "kept-name"), ("add_pool", "1")]);
    let two = post_fields(&mut admin, &fields).await;
    assert_eq!(two.status, 200, "{}", two.body);
    assert!(two.body.contains("Node pool 2") && two.body.contains("kept-name"));
    fields.retain(|(n, _)| n != "add_pool");
    fields.push(("remove_pool".into(), "1".into()));
    let one = post_fields(&mut admin, &fields).await;
    assert!(!one.body.contains("Node pool 2"), "{}", one.body);
    assert_eq!(
        app.count_rows("clusters"),
        0,
        "editing the form creates nothing"
    );
}

#[tokio::test]
async fn a_member_forcing_the_create_form_gets_the_use_cases_403_and_nothing_is_created() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut member = Browser::signed_in(&app, TOKEN_ACME_MEMBER).await;
    let form = member.get("/console/clusters/new").await;
    let forced = post_fields(&mut member, &create_form(&form, &[("name", "sneaky")])).await;
    assert_eq!(forced.status, 403, "{}", forced.body);
    assert_eq!(app.count_rows("clusters"), 0);
}

/// The fields of the first form whose action is `action` on the page: its hidden CSRF token
/// and idempotency key.
fn form_keys(page: &Page, action: &str) -> (String, String) {
    page.form_keys(action)
}

#[tokio::test]
async fn node_pools_are_added_scaled_and_deleted_but_never_the_last_and_a_double_submit_adds_one() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("pools").await;
    let tab = format!("/console/clusters/{}/node-pools", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin.get(&tab).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body
            .contains("The last pool of a cluster cannot be deleted")
    );
    assert!(
        page.body
            .contains("cannot change: add a pool with the new tier")
    );
    let (csrf, key) = form_keys(&page, &tab);
    let add = [
        ("csrf", csrf.as_str()),
        ("key", key.as_str()),
        ("name", "batch"),
        ("size", "kube.c5.large"),
        ("count", "2"),
    ];
    let first = admin.post(&tab, &add, &[]).await;
    assert_eq!(first.status, 303, "{}", first.body);
    let again = admin.post(&tab, &add, &[]).await;
    assert_eq!(again.status, 303, "the same form replays: {}", again.body);
    let pools = app
        .get(
            &format!("/v1/public/clusters/{}/node-pools", id(&cluster)),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await;
    assert_eq!(
        pools.json()["items"].as_array().map(Vec::len),
        Some(2),
        "{}",
        pools.text()
    );
    // Scale: a count out of bounds is refused with the domain's words on the tab.
    let page = admin.get(&tab).await;
    let scale = format!("{tab}/batch/scale");
    let (csrf, key) = form_keys(&page, &scale);
    let refused = admin
        .post(
            &scale,
            &[("csrf", &csrf), ("key", &key), ("count", "500")],
            &[],
        )
        .await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(refused.body.contains("count"), "{}", refused.body);
    let page = admin.get(&tab).await;
    let (csrf, key) = form_keys(&page, &scale);
    let scaled = admin
        .post(
            &scale,
            &[("csrf", &csrf), ("key", &key), ("count", "4")],
            &[],
        )
        .await;
    assert_eq!(scaled.status, 303, "{}", scaled.body);
    let page = admin.get(&tab).await;
    let delete = format!("{tab}/batch/delete");
    let (csrf, key) = form_keys(&page, &delete);
    let deleted = admin
        .post(&delete, &[("csrf", &csrf), ("key", &key)], &[])
        .await;
    assert_eq!(deleted.status, 303, "{}", deleted.body);
    // The last pool: the page offers no delete, and a forced one is the use case's 409.
    let page = admin.get(&tab).await;
    let (csrf, key) = form_keys(&page, &format!("{tab}/default/scale"));
    let last = admin
        .post(
            &format!("{tab}/default/delete"),
            &[("csrf", &csrf), ("key", &key)],
            &[],
        )
        .await;
    assert_eq!(last.status, 409, "{}", last.body);
}

#[tokio::test]
async fn a_member_sees_every_tab_and_no_form_that_changes_anything() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("read-only").await;
    let mut member = Browser::signed_in(&app, TOKEN_ACME_MEMBER).await;
    for tab in ["", "/node-pools", "/nodes", "/networking"] {
        let page = member
            .get(&format!("/console/clusters/{}{tab}", id(&cluster)))
            .await;
        assert_eq!(page.status, 200, "{tab}: {}", page.body);
        let posts = page.body.matches("method=\"post\"").count();
        assert_eq!(posts, 1, "{tab}: only the sign-out form: {}", page.body);
    }
}

#[tokio::test]
async fn elastic_ips_are_allocated_and_released_from_the_networking_tab() {
    let app = TestApp::spawn().await;
    let cluster = app.provisioned_cluster("edge").await;
    let url = format!("/v1/public/clusters/{}", id(&cluster));
    let tab = format!("/console/clusters/{}/networking", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let page = admin.get(&tab).await;
    assert!(page.body.contains("managed through the API"));
    let allocate = format!("/console/clusters/{}/elastic-ips", id(&cluster));
    let (csrf, key) = form_keys(&page, &allocate);
    let made = admin
        .post(
            &allocate,
            &[
                ("csrf", &csrf),
                ("key", &key),
                ("name", "ingress"),
                ("exposure", "private"),
            ],
            &[],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let list = format!("{url}/elastic-ips");
    let eips = app
        .wait_for(&list, Duration::from_secs(60), |l| {
            l["items"][0]["status"] == "Ready"
        })
        .await;
    let eip = eips["items"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let page = admin.get(&tab).await;
    assert!(
        page.body.contains("/elastic-ip"),
        "the annotation is shown: {}",
        page.body
    );
    let release = format!("{allocate}/{eip}/release");
    let (csrf, key) = form_keys(&page, &release);
    let released = admin
        .post(&release, &[("csrf", &csrf), ("key", &key)], &[])
        .await;
    assert_eq!(released.status, 303, "{}", released.body);
    let after = app
        .get(&format!("{list}/{eip}"), TOKEN_ACME_SUPER_ADMIN)
        .await;
    assert!(
        after.status == 404 || after.json()["status"] != "Ready",
        "{}",
        after.text()
    );
}

#[tokio::test]
async fn the_overview_edits_description_and_tags_and_shows_why_an_exposure_change_is_refused() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("edited").await;
    let overview = format!("/console/clusters/{}", id(&cluster));
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let csrf = admin.csrf().await;
    let edit = format!("{overview}/edit");
    let saved = admin
        .post(
            &edit,
            &[
                ("csrf", &csrf),
                ("description", "front end"),
                ("tags", "web, team-a"),
            ],
            &[],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let api = app
        .get(
            &format!("/v1/public/clusters/{}", id(&cluster)),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await
        .json();
    assert_eq!(api["description"], "front end");
    assert_eq!(api["tags"], serde_json::json!(["web", "team-a"]));
    let bad = admin
        .post(
            &edit,
            &[
                ("csrf", &csrf),
                ("description", ""),
                ("tags", "Not_A_Label"),
            ],
            &[],
        )
        .await;
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.body.contains("tags[0]"), "{}", bad.body);
    // The cluster is still Pending: the use case's 400 is shown on the Overview.
    let exposure = admin
        .post(
            &format!("{overview}/exposure"),
            &[("csrf", &csrf), ("exposure", "private")],
            &[],
        )
        .await;
    assert_eq!(exposure.status, 400, "{}", exposure.body);
    assert!(exposure.body.contains("Provisioned"), "{}", exposure.body);
}

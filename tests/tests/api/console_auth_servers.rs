//! The gateway's Auth Servers dashboard in the console: a form per type, write-only secrets,
//! editing, credentials and deletion, and a member's read-only view.

use blackbox::console::{Browser, Page};
use blackbox::{TOKEN_ACME_MEMBER, TOKEN_ACME_SUPER_ADMIN, TestApp};

const NEW: &str = "/console/auth-servers/new";
const CLIENT_SECRET: &str = "client-secret-never-shown-7f3a";
const PASSWORD: &str = "basic-password-never-shown-19c2";
const TOKEN: &str = "static-token-never-shown-0123456789";

/// Draws the create form of `kind` and posts it with `fields` on top of its hidden ones.
async fn create(browser: &mut Browser, kind: &str, fields: &[(&str, &str)]) -> Page {
    let form = browser
        .get(&format!("{NEW}?type={kind}&organization=acme"))
        .await;
    assert_eq!(form.status, 200, "{}", form.body);
    let hidden: Vec<(&str, String)> = ["csrf", "key", "organization", "type", "rows"]
        .into_iter()
        .map(|n| (n, form.field(n).unwrap_or_default()))
        .collect();
    let mut all: Vec<(&str, &str)> = hidden.iter().map(|(n, v)| (*n, v.as_str())).collect();
    all.extend_from_slice(fields);
    browser.post(NEW, &all, &[]).await
}

/// Form fields by name, as typed.
type Fields<'a> = Vec<(&'static str, &'a str)>;

fn oidc(redirect_path: &str) -> Fields<'_> {
    vec![
        ("name", "corp-sso"),
        ("environment", "production"),
        ("issuer_url", "https://id.example.com"),
        ("redirect_path", redirect_path),
        ("client_id", "console"),
        ("client_secret", CLIENT_SECRET),
        ("authorized_domain", "app.example.com"),
    ]
}

fn assert_no_secret(page: &Page) {
    for secret in [CLIENT_SECRET, PASSWORD, TOKEN] {
        assert!(
            !page.body.contains(secret),
            "a secret reached a page: {}",
            page.body
        );
    }
}

#[tokio::test]
async fn one_auth_server_of_each_type_is_added_from_its_form_and_no_page_shows_a_secret() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let refused = create(&mut admin, "oidc", &oidc("no-slash")).await;
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains("id=\"redirect_path-error\""),
        "{}",
        refused.body
    );
    assert_no_secret(&refused);
    let cases: [(&str, Fields, &str); 3] = [
        ("oidc", oidc("/callback"), "set (write-only)"),
        (
            "basic",
            vec![
                ("name", "partners"),
                ("environment", "production"),
                ("username.0", "alice"),
                ("password.0", PASSWORD),
            ],
            "user alice",
        ),
        (
            "token",
            vec![
                ("name", "machines"),
                ("environment", "production"),
                ("token.0", TOKEN),
            ],
            "token …6789",
        ),
    ];
    for (kind, fields, shown) in cases {
        let made = create(&mut admin, kind, &fields).await;
        assert_eq!(made.status, 303, "{kind}: {}", made.body);
        let page = admin
            .get(&made.header("location").unwrap_or_default())
            .await;
        assert_eq!(page.status, 200);
        assert!(page.body.contains(shown), "{kind}: {}", page.body);
        assert_no_secret(&page);
    }
    let list = admin.get("/console/auth-servers").await;
    for name in ["corp-sso", "partners", "machines"] {
        assert!(list.body.contains(name), "{}", list.body);
    }
    // An OIDC server's claims are edited on its page.
    let sso = list
        .body
        .find(">corp-sso<")
        .map(|at| &list.body[..at])
        .unwrap_or_default();
    let href = sso
        .rsplit("href=\"")
        .next()
        .unwrap_or_default()
        .trim_end_matches('"');
    let page = admin.get(href).await;
    let csrf = page.field("csrf").unwrap_or_default();
    let edited = admin
        .post(
            &format!("{href}/edit"),
            &[
                ("csrf", csrf.as_str()),
                ("edit-name", "corp-sso"),
                ("edit-environment", "production"),
                ("edit-issuer_url", "https://id.example.com"),
                ("edit-redirect_path", "/callback"),
                ("edit-client_id", "console"),
                ("edit-authorized_domain", "app.example.com"),
                ("edit-group_claim", "groups"),
            ],
            &[],
        )
        .await;
    assert_eq!(edited.status, 303, "{href}: {}", edited.body);
    let page = admin.get(href).await;
    assert!(page.body.contains("group groups"), "{}", page.body);
    assert!(
        page.body.contains("set (write-only)"),
        "the secret was kept"
    );
    let filtered = admin.get("/console/auth-servers?environment=staging").await;
    assert!(!filtered.body.contains("corp-sso"));
    assert_eq!(
        admin
            .get("/console/auth-servers?environment=Not_A_Label")
            .await
            .status,
        400
    );
}

#[tokio::test]
async fn a_basic_server_is_edited_gets_and_loses_a_user_and_is_deleted_by_its_typed_name() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let made = create(
        &mut admin,
        "basic",
        &[
            ("name", "partners"),
            ("environment", "dev"),
            ("username.0", "alice"),
            ("password.0", PASSWORD),
        ],
    )
    .await;
    let path = made.header("location").unwrap_or_default();
    // The first page after the create says it was added; the next one does not again.
    let page = admin.get(&path).await;
    assert!(
        page.body
            .contains("Auth server partners was added to environment dev"),
        "{}",
        page.body
    );
    let page = admin.get(&path).await;
    assert!(!page.body.contains("was added"), "{}", page.body);
    let csrf = page.field("csrf").unwrap_or_default();
    let edited = admin
        .post(
            &format!("{path}/edit"),
            &[
                ("csrf", &csrf),
                ("edit-name", "partners"),
                ("edit-environment", "dev"),
                ("edit-realm", "Partner area"),
            ],
            &[],
        )
        .await;
    assert_eq!(edited.status, 303, "{}", edited.body);
    let page = admin.get(&path).await;
    assert!(page.body.contains("Partner area"));
    let add = format!("{path}/credentials");
    let key = uuid_key();
    let added = admin
        .post(
            &add,
            &[
                ("csrf", &csrf),
                ("key", &key),
                ("new-username", "bob"),
                ("new-password", PASSWORD),
            ],
            &[],
        )
        .await;
    assert_eq!(added.status, 303, "{}", added.body);
    let page = admin.get(&path).await;
    assert!(page.body.contains("Remove user bob"), "{}", page.body);
    assert_no_secret(&page);
    let at = page.body.find("/remove\"").unwrap_or_default();
    let start = page.body[..at].rfind("action=\"").map_or(0, |i| i + 8);
    let remove = page.body[start..at + 7].to_owned();
    let removed = admin
        .post(&remove, &[("csrf", &csrf), ("key", &uuid_key())], &[])
        .await;
    assert_eq!(removed.status, 303, "{remove}: {}", removed.body);
    let wrong = admin
        .post(
            &format!("{path}/delete"),
            &[("csrf", &csrf), ("key", &uuid_key()), ("confirm", "other")],
            &[],
        )
        .await;
    assert_eq!(wrong.status, 422);
    let gone = admin
        .post(
            &format!("{path}/delete"),
            &[
                ("csrf", &csrf),
                ("key", &uuid_key()),
                ("confirm", "partners"),
            ],
            &[],
        )
        .await;
    assert_eq!(gone.status, 303, "{}", gone.body);
    assert_eq!(admin.get(&path).await.status, 404);
}

#[tokio::test]
async fn a_member_reads_the_dashboard_and_a_forced_create_is_the_use_cases_403() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let made = create(
        &mut admin,
        "token",
        &[
            ("name", "machines"),
            ("environment", "dev"),
            ("token.0", TOKEN),
        ],
    )
    .await;
    let path = made.header("location").unwrap_or_default();
    let mut member = Browser::signed_in(&app, TOKEN_ACME_MEMBER).await;
    let list = member.get("/console/auth-servers").await;
    assert!(list.body.contains("machines"));
    assert!(!list.body.contains("Add Token auth server"));
    let page = member.get(&path).await;
    assert_eq!(
        page.body.matches("method=\"post\"").count(),
        1,
        "only sign-out: {}",
        page.body
    );
    let forced = create(
        &mut member,
        "token",
        &[
            ("name", "sneaky"),
            ("environment", "dev"),
            ("token.0", TOKEN),
        ],
    )
    .await;
    assert_eq!(forced.status, 403, "{}", forced.body);
    assert_no_secret(&forced);
}

fn uuid_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[tokio::test]
async fn the_same_create_form_sent_twice_adds_one_server_and_both_land_on_its_page() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let form = admin
        .get(&format!("{NEW}?type=token&organization=acme"))
        .await;
    let hidden: Vec<(&str, String)> = ["csrf", "key", "organization", "type", "rows"]
        .into_iter()
        .map(|n| (n, form.field(n).unwrap_or_default()))
        .collect();
    let mut fields: Vec<(&str, &str)> = hidden.iter().map(|(n, v)| (*n, v.as_str())).collect();
    fields.extend([
        ("name", "machines"),
        ("environment", "dev"),
        ("token.0", TOKEN),
    ]);
    let first = admin.post(NEW, &fields, &[]).await;
    let again = admin.post(NEW, &fields, &[]).await;
    assert_eq!((first.status, again.status), (303, 303), "{}", again.body);
    assert_eq!(first.header("location"), again.header("location"));
    assert_eq!(app.count_rows("auth_servers"), 1);
}

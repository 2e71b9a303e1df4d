//! The route × role matrix, generated from `api::routes::ROUTES`: every
//! authenticated route, five callers, and the caller's own organization, another
//! organization, and an unknown object or organization.

use api::routes::{OrgSource, ROUTES, RequiredRole, RouteSpec};
use blackbox::*;
use reqwest::Method;
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Caller {
    /// bob: member of acme, super_admin nowhere.
    Member,
    /// carol: project_admin of acme, super_admin nowhere.
    ProjectAdmin,
    /// alice: super_admin of acme.
    SuperAdmin,
    /// erin: super_admin of initech only.
    SuperAdminElsewhereOnly,
    /// dave: member of acme, super_admin of globex.
    MemberHereSuperAdminThere,
}

impl Caller {
    const ALL: [Caller; 5] = [
        Caller::Member,
        Caller::ProjectAdmin,
        Caller::SuperAdmin,
        Caller::SuperAdminElsewhereOnly,
        Caller::MemberHereSuperAdminThere,
    ];

    fn token(self) -> &'static str {
        match self {
            Caller::Member => TOKEN_ACME_MEMBER,
            Caller::ProjectAdmin => TOKEN_ACME_PROJECT_ADMIN,
            Caller::SuperAdmin => TOKEN_ACME_SUPER_ADMIN,
            Caller::SuperAdminElsewhereOnly => TOKEN_INITECH_SUPER_ADMIN,
            Caller::MemberHereSuperAdminThere => TOKEN_TWO_ORGS,
        }
    }

    /// A member-level role in acme.
    fn reads_acme(self) -> bool {
        self != Caller::SuperAdminElsewhereOnly
    }

    fn super_admin_somewhere(self) -> bool {
        matches!(
            self,
            Caller::SuperAdmin
                | Caller::SuperAdminElsewhereOnly
                | Caller::MemberHereSuperAdminThere
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// acme: the callers' organization.
    Own,
    /// globex: another organization for everyone but dave.
    Other,
    Unknown,
}

/// The objects a route's path names, in one organization.
#[derive(Debug, Clone)]
struct Fixture {
    org: &'static str,
    cluster: String,
    eip: String,
    /// The operation the Elastic IP's allocation started.
    operation: String,
    auth_server: String,
    credential: String,
}

impl Fixture {
    fn unknown() -> Fixture {
        let u = || uuid::Uuid::new_v4().to_string();
        Fixture {
            org: "no-such-org",
            cluster: u(),
            eip: u(),
            operation: u(),
            auth_server: u(),
            credential: u(),
        }
    }
}

fn token_server(org: &str, name: &str) -> Value {
    json!({"organization": org, "name": name, "environment": "production", "type": "token",
           "config": {"tokens": ["a-static-token-of-enough-length"]}})
}

/// Makes a cluster, an Elastic IP and an auth server in `org` as `token`.
async fn fixture(app: &TestApp, token: &str, org: &'static str, n: usize) -> Fixture {
    let c = app.create_cluster_as(token, org, &format!("fx-{n}")).await;
    let cluster = c["id"].as_str().unwrap().to_owned();
    let e = app
        .post(
            &format!("{CLUSTERS}/{cluster}/elastic-ips"),
            token,
            &json!({"exposure": "private"}),
        )
        .await;
    assert_eq!(e.status, 202, "{}", e.text());
    let s = app
        .post(AUTH_SERVERS, token, &token_server(org, &format!("fx-{n}")))
        .await;
    assert_eq!(s.status, 201, "{}", s.text());
    let s = s.json();
    Fixture {
        org,
        cluster,
        eip: e.json()["id"].as_str().unwrap().to_owned(),
        operation: e
            .header("operation-location")
            .and_then(|l| l.rsplit('/').next().map(str::to_owned))
            .unwrap(),
        auth_server: s["id"].as_str().unwrap().to_owned(),
        credential: s["config"]["tokens"][0]["id"].as_str().unwrap().to_owned(),
    }
}

fn path_of(route: &RouteSpec, fx: &Fixture) -> String {
    let id = if route.path.starts_with(AUTH_SERVERS) {
        &fx.auth_server
    } else {
        &fx.cluster
    };
    let mut p = route
        .path
        .replace("{id}", id)
        .replace("{pool}", "default")
        .replace("{node}", "no-such-node")
        .replace("{eip}", &fx.eip)
        .replace("{operation}", &fx.operation)
        .replace("{rule}", &uuid::Uuid::new_v4().to_string())
        .replace("{credential_id}", &fx.credential)
        .replace("{credential}", &uuid::Uuid::new_v4().to_string());
    if route.org == OrgSource::Collection {
        p.push_str(&format!("?organization={}", fx.org));
    }
    p
}

fn body_of(route: &RouteSpec, fx: &Fixture, n: usize) -> Option<Value> {
    if !route.body {
        return None;
    }
    let name = format!("m-{n}");
    Some(match (route.method, route.path) {
        ("POST", CLUSTERS) => cluster_body(fx.org, &name),
        ("PATCH", "/v1/public/clusters/{id}") => json!({"description": "x"}),
        ("PATCH", "/v1/public/clusters/{id}/exposure") => json!({"exposure": "private"}),
        ("POST", "/v1/public/clusters/{id}/upgrade") => json!({"version": "v1.32.6"}),
        ("POST", "/v1/public/clusters/{id}/node-pools") => {
            json!({"name": name, "size": "kube.c5.large", "count": 1})
        }
        ("PATCH", "/v1/public/clusters/{id}/node-pools/{pool}") => json!({"count": 3}),
        ("POST", "/v1/public/clusters/{id}/elastic-ips") => json!({"exposure": "private"}),
        ("POST", "/v1/public/clusters/{id}/firewall-rules") => {
            json!({"protocol": "tcp", "source_cidrs": ["203.0.113.0/24"], "port_range": {"from": 443, "to": 443}})
        }
        ("POST", AUTH_SERVERS) => token_server(fx.org, &name),
        ("PATCH", "/v1/public/gateway/auth-servers/{id}") => json!({"name": name}),
        ("POST", "/v1/public/gateway/auth-servers/{id}/credentials") => {
            json!({"token": format!("another-token-{n}-long-enough")})
        }
        other => panic!("no body for {other:?}: add one"),
    })
}

/// What the role rules say, as a set of acceptable statuses: `None` means "authorized": anything
/// but 401/403/404 and 5xx.
fn expected(route: &RouteSpec, caller: Caller, target: Target) -> Option<u16> {
    let write = route.role == RequiredRole::SuperAdmin;
    match target {
        Target::Own => {
            let allowed = if write {
                caller == Caller::SuperAdmin
            } else {
                caller.reads_acme()
            };
            if allowed { None } else { Some(403) }
        }
        // globex: dave is its super_admin (for him these rows are his own organization's);
        // nobody else is in it.
        Target::Other => {
            if caller == Caller::MemberHereSuperAdminThere {
                None
            } else {
                Some(403)
            }
        }
        Target::Unknown => match route.org {
            // 403 before load for writers who are super_admin nowhere.
            OrgSource::Object if write && !caller.super_admin_somewhere() => Some(403),
            _ => Some(404),
        },
    }
}

fn method(route: &RouteSpec) -> Method {
    Method::from_bytes(route.method.as_bytes()).unwrap()
}

/// The sub-object a path names in a fixture may not exist (no nodes, firewall rules or
/// kubeconfig credentials on a Pending cluster): 404 on it still proves authorization passed.
fn names_missing_sub_object(route: &RouteSpec) -> bool {
    route.path.contains("{rule}")
        || route.path.contains("{node}")
        || route.path.contains("{credential}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_each_role_as_the_role_rules_say() {
    let app = TestApp::spawn_api_only(&[]).await;
    // initech has no credit, so no cluster can be made there: the other organization is
    // globex (prepaid with credit), built by its super_admin dave.
    let acme = fixture(&app, TOKEN_ACME_SUPER_ADMIN, "acme", 0).await;
    let globex = fixture(&app, TOKEN_TWO_ORGS, "globex", 1).await;
    let mut n = 10;
    let mut checked = 0;
    let mut failures = Vec::new();
    // A person's own routes (their approvals) name no organization: their rows are in
    // `a_person_s_approvals_are_theirs_alone`.
    for route in ROUTES.iter().filter(|r| {
        r.role != RequiredRole::Public && !matches!(r.org, OrgSource::None | OrgSource::Own)
    }) {
        for caller in Caller::ALL {
            for target in [Target::Own, Target::Other, Target::Unknown] {
                n += 1;
                let want = expected(route, caller, target);
                // A mutation that will succeed gets fresh objects, so it cannot disturb the
                // rows that follow.
                let succeeds = want.is_none() && route.role == RequiredRole::SuperAdmin;
                let fx = match target {
                    Target::Own if succeeds => {
                        fixture(&app, TOKEN_ACME_SUPER_ADMIN, "acme", n).await
                    }
                    Target::Other if succeeds => fixture(&app, TOKEN_TWO_ORGS, "globex", n).await,
                    Target::Own => acme.clone(),
                    Target::Other => globex.clone(),
                    Target::Unknown => Fixture::unknown(),
                };
                let path = path_of(route, &fx);
                let mut r = app.request(method(route), &path, Some(caller.token()));
                if let Some(b) = body_of(route, &fx, n) {
                    r = r.json(&b);
                }
                let a = app.send(r).await;
                checked += 1;
                let ok = match want {
                    Some(s) => a.status == s,
                    None => {
                        !matches!(a.status, 401 | 403 | 500..=599)
                            && (a.status != 404 || names_missing_sub_object(route))
                    }
                };
                if a.status >= 400 {
                    let code = a.problem_code();
                    if a.status == 403 && want == Some(403) && code != "forbidden" {
                        failures.push(format!(
                            "{} {} {caller:?} {target:?}: code {code}",
                            route.method, route.path
                        ));
                    }
                }
                if !ok {
                    failures.push(format!(
                        "{} {} as {caller:?} on {target:?}: want {want:?}, got {} {}",
                        route.method,
                        route.path,
                        a.status,
                        a.text()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} rows wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 30 * 5 * 3, "{checked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn assistant_may_list_elastic_ips_but_not_change_them_or_firewall_rules() {
    let app = TestApp::spawn_api_only(&[]).await;
    let fx = fixture(&app, TOKEN_ACME_SUPER_ADMIN, "acme", 0).await;
    for route in ROUTES.iter().filter(|r| r.assistant_restricted) {
        let path = path_of(route, &fx);
        let mut r = app.request(method(route), &path, Some(TOKEN_ACME_ASSISTANT));
        if let Some(b) = body_of(route, &fx, 1) {
            r = r.json(&b);
        }
        expect(&app.send(r).await, 403, "assistant_not_allowed");
    }
    assert_eq!(ROUTES.iter().filter(|r| r.assistant_restricted).count(), 4);
    let a = app
        .get(
            &format!("{CLUSTERS}/{}/elastic-ips", fx.cluster),
            TOKEN_ACME_ASSISTANT,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["items"].as_array().map(Vec::len), Some(1));
    let a = app
        .get(
            &format!("{CLUSTERS}/{}/elastic-ips/{}", fx.cluster, fx.eip),
            TOKEN_ACME_ASSISTANT,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        app.get(
            &format!("{CLUSTERS}/{}/firewall-rules", fx.cluster),
            TOKEN_ACME_ASSISTANT
        )
        .await
        .status,
        200
    );
    // Its approved create/scale/delete actions run with the user's own super_admin rights.
    let c = app
        .create_cluster_as(TOKEN_ACME_ASSISTANT, "acme", "by-assistant")
        .await;
    let pool = format!(
        "{CLUSTERS}/{}/node-pools/default",
        c["id"].as_str().unwrap()
    );
    assert_eq!(
        app.patch(&pool, TOKEN_ACME_ASSISTANT, &json!({"count": 3}))
            .await
            .status,
        202
    );
    assert_eq!(app.count_rows("elastic_ips"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_found_only_under_their_own_parent() {
    let app = TestApp::spawn_api_only(&[]).await;
    let acme = fixture(&app, TOKEN_ACME_SUPER_ADMIN, "acme", 0).await;
    let globex = fixture(&app, TOKEN_TWO_ORGS, "globex", 1).await;
    // globex's Elastic IP named under acme's cluster: not found, and not released.
    let crossed = format!("{CLUSTERS}/{}/elastic-ips/{}", acme.cluster, globex.eip);
    expect(
        &app.get(&crossed, TOKEN_ACME_SUPER_ADMIN).await,
        404,
        "not_found",
    );
    expect(
        &app.delete(&crossed, TOKEN_ACME_SUPER_ADMIN).await,
        404,
        "not_found",
    );
    // globex's credential named under acme's auth server.
    let crossed = format!(
        "{AUTH_SERVERS}/{}/credentials/{}",
        acme.auth_server, globex.credential
    );
    expect(
        &app.delete(&crossed, TOKEN_ACME_SUPER_ADMIN).await,
        404,
        "not_found",
    );
    let g = app
        .get(
            &format!("{AUTH_SERVERS}/{}", globex.auth_server),
            TOKEN_TWO_ORGS,
        )
        .await
        .json();
    assert_eq!(g["config"]["tokens"].as_array().map(Vec::len), Some(1));
    // Collections list only their own organization's objects.
    let list = app
        .get(
            &format!("{AUTH_SERVERS}?organization=acme"),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        list["items"][0]["id"].as_str(),
        Some(acme.auth_server.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_may_require_super_admin() {
    let app = TestApp::spawn_api_only(&[("KUBECONFIG_REQUIRES_SUPER_ADMIN", "true")]).await;
    let c = app.create_cluster("c1").await;
    let path = format!("{CLUSTERS}/{}/kubeconfig", c["id"].as_str().unwrap());
    for t in [TOKEN_ACME_MEMBER, TOKEN_ACME_PROJECT_ADMIN, TOKEN_TWO_ORGS] {
        expect(&app.get(&path, t).await, 403, "forbidden");
    }
    assert_eq!(app.get(&path, TOKEN_ACME_SUPER_ADMIN).await.status, 202);
    // Other reads stay open to members.
    assert_eq!(
        app.get(
            &format!("{CLUSTERS}/{}", c["id"].as_str().unwrap()),
            TOKEN_ACME_MEMBER
        )
        .await
        .status,
        200
    );
}

/// An approval belongs to the person whose assistant asked: nobody else sees it, approves or
/// declines it, and learns only that there is no such approval; an assistant's token decides
/// nothing, even its own person's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_s_approvals_are_theirs_alone() {
    use domain::model::approval::ApprovedAction;
    use domain::model::identity::ClientKind;
    use domain::model::secret::Secret;

    let app = TestApp::spawn_api_only(&[]).await;
    let fx = fixture(&app, TOKEN_ACME_SUPER_ADMIN, "acme", 0).await;
    let mut alice = app
        .services
        .authenticate(&Secret::new(TOKEN_ACME_SUPER_ADMIN))
        .await
        .unwrap();
    alice.client = ClientKind::Assistant;
    let approval = app
        .services
        .request_approval(
            &alice,
            ApprovedAction::DeleteCluster {
                cluster: fx.cluster.parse().unwrap(),
            },
        )
        .await
        .unwrap();
    let one = format!("/v1/public/approvals/{}", approval.id);

    let mine = app
        .get("/v1/public/approvals", TOKEN_ACME_SUPER_ADMIN)
        .await;
    assert_eq!(mine.status, 200, "{}", mine.text());
    assert_eq!(mine.json()["items"][0]["id"], approval.id.to_string());
    for caller in Caller::ALL.into_iter().filter(|c| *c != Caller::SuperAdmin) {
        let list = app.get("/v1/public/approvals", caller.token()).await;
        assert_eq!(list.json()["items"], json!([]), "{caller:?}");
        expect(&app.get(&one, caller.token()).await, 404, "not_found");
        for verb in ["approve", "decline"] {
            let a = app
                .post(&format!("{one}/{verb}"), caller.token(), &json!({}))
                .await;
            expect(&a, 404, "not_found");
        }
    }
    let a = app
        .post(&format!("{one}/approve"), TOKEN_ACME_ASSISTANT, &json!({}))
        .await;
    expect(&a, 403, "assistant_not_allowed");

    let declined = app
        .post(
            &format!("{one}/decline"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({}),
        )
        .await;
    assert_eq!(declined.status, 200, "{}", declined.text());
    assert_eq!(declined.json()["status"], "declined");
    let cluster = app
        .get(
            &format!("{CLUSTERS}/{}", fx.cluster),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await;
    assert_eq!(cluster.status, 200, "a declined deletion deletes nothing");
}

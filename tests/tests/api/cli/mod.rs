//! The `kubesvc` binary driven as its users drive it, against the real server: a whole
//! lifecycle, the kubeconfig merge checked by kubectl, the exit codes, the retries, and a
//! session on a terminal. Helpers: `blackbox::cli`.

mod activity;
mod approvals;
mod auth_servers;
mod failures;
mod lifecycle;
mod taints_and_firewall;
mod terminal;
mod upgrades;

use blackbox::cli::{CliUser, Run};
use blackbox::*;

/// A user logged in to `app` as acme's super_admin, by `auth login --token-stdin`.
async fn logged_in(app: &TestApp) -> CliUser {
    let user = CliUser::new();
    login(&user, app, "acme", None, TOKEN_ACME_SUPER_ADMIN).await;
    user
}

/// `kubesvc auth login` to `app` in `org` with `token` on stdin, as context `name` (else the
/// current one); exit 0.
async fn login(user: &CliUser, app: &TestApp, org: &str, name: Option<&str>, token: &str) {
    let mut args = vec![
        "auth",
        "login",
        "--url",
        &app.url,
        "--organization",
        org,
        "--token-stdin",
    ];
    if let Some(name) = name {
        args.extend(["--name", name]);
    }
    user.run_with(&args, &format!("{token}\n"), &[])
        .await
        .expect(0);
}

/// `kubesvc cluster create NAME` with one small node, without waiting; exit 0.
async fn create_small(user: &CliUser, name: &str) -> Run {
    user.run(&[
        "cluster",
        "create",
        name,
        "--size",
        "kube.c5.large",
        "--count",
        "1",
    ])
    .await
    .expect(0)
}

/// `kubesvc ARGS -o json`, exit 0, the JSON.
async fn json(user: &CliUser, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    user.run(&all).await.expect(0).json()
}

/// No token of the demo platform in anything the CLI printed.
fn no_token_in(run: &Run) {
    for token in [TOKEN_ACME_SUPER_ADMIN, TOKEN_ACME_MEMBER] {
        assert!(
            !run.stdout.contains(token) && !run.stderr.contains(token),
            "a token was printed: {run:?}"
        );
    }
}

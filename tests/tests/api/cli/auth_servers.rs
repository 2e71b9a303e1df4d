//! The gateway's auth servers through the CLI: secrets read from stdin or a named variable,
//! never printed back.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_servers_and_their_credentials_through_the_cli() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = logged_in(&app).await;
    let first_token = "cli-first-token-0123456789";
    let created = user
        .run_with(
            &[
                "auth-server",
                "create",
                "api-keys",
                "--environment",
                "production",
                "--type",
                "token",
                "--secret-stdin",
                "-o",
                "json",
            ],
            &format!("{first_token}\n"),
            &[],
        )
        .await
        .expect(0);
    assert_eq!(created.json()["config"]["tokens"][0]["hint"], "…6789");
    let password = "cli-password-never-shown";
    let basic = user
        .run_with(
            &[
                "auth-server",
                "create",
                "staff",
                "--environment",
                "production",
                "--type",
                "basic",
                "--username",
                "alice",
                "--password-from-env",
                "STAFF_PW",
            ],
            "",
            &[("STAFF_PW", password)],
        )
        .await
        .expect(0);
    assert!(basic.stdout.contains("alice"), "{basic:?}");

    let second = user
        .run_with(
            &[
                "auth-server",
                "credential",
                "add",
                "api-keys",
                "--secret-stdin",
                "-o",
                "json",
            ],
            "cli-second-token-abcdefghij\n",
            &[],
        )
        .await
        .expect(0);
    let credential = second.json()["id"].as_str().unwrap_or_default().to_owned();
    let shown = json(&user, &["auth-server", "get", "api-keys"]).await;
    assert_eq!(shown["config"]["tokens"].as_array().map(Vec::len), Some(2));
    user.run(&[
        "auth-server",
        "credential",
        "remove",
        "api-keys",
        &credential,
        "--yes",
    ])
    .await
    .expect(0);
    // The last credential stays: the API's conflict is exit code 5.
    let first = json(&user, &["auth-server", "get", "api-keys"]).await["config"]["tokens"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    user.run(&[
        "auth-server",
        "credential",
        "remove",
        "api-keys",
        &first,
        "-y",
    ])
    .await
    .expect(5);

    let renamed = json(
        &user,
        &[
            "auth-server",
            "update",
            "staff",
            "--new-name",
            "team",
            "--realm",
            "Team only",
        ],
    )
    .await;
    assert_eq!(
        (
            renamed["name"].as_str(),
            renamed["config"]["realm"].as_str()
        ),
        (Some("team"), Some("Team only"))
    );
    let listed = user
        .run(&["auth-server", "list", "--environment", "production"])
        .await
        .expect(0);
    for secret in [first_token, password, "cli-second-token-abcdefghij"] {
        assert!(
            !listed.stdout.contains(secret)
                && !created.stdout.contains(secret)
                && !basic.stdout.contains(secret)
        );
    }
    assert!(
        listed.stdout.contains("api-keys") && listed.stdout.contains("team"),
        "{listed:?}"
    );

    let sso = user
        .run_with(
            &[
                "auth-server",
                "create",
                "corp-sso",
                "--environment",
                "staging",
                "--type",
                "oidc",
                "--issuer-url",
                "https://login.example.com",
                "--client-id",
                "gw",
                "--authorized-domain",
                "app.example.com",
                "--redirect-path",
                "/oauth2/callback",
                "--group-claim",
                "groups",
                "--secret-from-env",
                "CLIENT_SECRET",
                "-o",
                "json",
            ],
            "",
            &[("CLIENT_SECRET", "oidc-client-secret-value")],
        )
        .await
        .expect(0);
    let config = &sso.json()["config"];
    assert_eq!(
        (
            config["client_secret_set"].as_bool(),
            config["group_claim"].as_str()
        ),
        (Some(true), Some("groups"))
    );
    assert!(!sso.stdout.contains("oidc-client-secret-value"));
    let missing = user
        .run(&[
            "auth-server",
            "create",
            "x",
            "--environment",
            "staging",
            "--type",
            "oidc",
            "--client-id",
            "gw",
        ])
        .await
        .expect(2);
    assert!(
        missing
            .stderr
            .contains("--issuer-url, --authorized-domain, --redirect-path"),
        "{missing:?}"
    );
    let rotated = user
        .run_with(
            &[
                "auth-server",
                "update",
                "corp-sso",
                "--client-secret",
                "--secret-stdin",
                "-o",
                "json",
            ],
            "a-new-client-secret\n",
            &[],
        )
        .await
        .expect(0);
    assert!(
        rotated.json()["updated_at"] != sso.json()["updated_at"],
        "{rotated:?}"
    );

    // A secret is never taken from the command line: no flag for it, and no terminal to ask on.
    let no_secret = user
        .run(&[
            "auth-server",
            "create",
            "k2",
            "--environment",
            "production",
            "--type",
            "token",
        ])
        .await
        .expect(2);
    assert!(no_secret.stderr.contains("--secret-stdin"), "{no_secret:?}");
    user.run(&["auth-server", "delete", "team", "--yes"])
        .await
        .expect(0);
    user.run(&["auth-server", "get", "team"]).await.expect(4);
}

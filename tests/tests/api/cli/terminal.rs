//! A session on a real terminal (util-linux `script` gives the CLI a pty): the progress line
//! of `--wait` is drawn in place there, and the outputs people read are what they expect.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_wait_on_a_terminal_redraws_one_progress_line() {
    // Slow steps, so the line has phases to show. The session's TERM is a terminal's (the
    // harness clears the environment).
    let app = TestApp::spawn_with(&[("PROVISIONER_STEP_MS", "300")]).await;
    let user = logged_in(&app).await;
    let bin = blackbox::cli::cli_bin();
    let command = format!(
        "TERM=xterm-256color {} cluster create tty-1 --size kube.c5.large --count 1 --wait",
        bin.display()
    );
    let session = user
        .other("script", &["-qec", &command, "/dev/null"])
        .await
        .expect(0);
    let screen = session.stdout;
    // indicatif clears and redraws its line (ESC [2K) rather than writing new lines.
    assert!(screen.contains("\x1b[2K"), "{screen:?}");
    assert!(screen.contains("cluster tty-1: Provisioning"), "{screen:?}");
    // The last state stays on the screen, then the cluster, in colour on a terminal.
    assert!(screen.contains("\x1b[32mProvisioned\x1b[0m"), "{screen:?}");

    let plain = user
        .other(
            "script",
            &[
                "-qec",
                &format!("{} cluster list", bin.display()),
                "/dev/null",
            ],
        )
        .await
        .expect(0);
    assert!(
        plain.stdout.contains("\x1b[1mNAME\x1b[0m"),
        "a bold header: {plain:?}"
    );
    let no_color = user
        .other(
            "script",
            &[
                "-qec",
                &format!("NO_COLOR=1 {} cluster list", bin.display()),
                "/dev/null",
            ],
        )
        .await
        .expect(0);
    assert!(
        !no_color.stdout.contains('\x1b') && no_color.stdout.contains("tty-1"),
        "{no_color:?}"
    );
}

/// The completion scripts hand each TAB back to kubesvc, which completes commands, flags
/// and the names the API holds: clusters, then the pools of the cluster typed.
#[tokio::test]
async fn completion_scripts_and_the_man_page_are_there() {
    let app = TestApp::spawn().await;
    let user = logged_in(&app).await;
    create_small(&user, "tab-1").await;
    for (shell, marks) in [
        ("bash", "complete -o nospace"),
        ("zsh", "#compdef kubesvc"),
        (
            "fish",
            "complete --keep-order --exclusive --command kubesvc",
        ),
    ] {
        let run = user.run(&["completion", shell]).await.expect(0);
        assert!(
            run.stdout.contains(marks) && run.stdout.contains("COMPLETE="),
            "{shell}: {}",
            &run.stdout[..200.min(run.stdout.len())]
        );
    }
    // What bash asks on a TAB: the words so far, and the index of the one being completed.
    let tab = |words: &'static [&'static str]| {
        let user = &user;
        async move {
            let mut args = vec!["--", "kubesvc"];
            args.extend(words);
            let index = words.len().to_string();
            let run = user
                .run_with(
                    &args,
                    "",
                    &[("COMPLETE", "bash"), ("_CLAP_COMPLETE_INDEX", &index)],
                )
                .await
                .expect(0);
            run.stdout.lines().map(str::to_owned).collect::<Vec<_>>()
        }
    };
    assert_eq!(tab(&["node-p"]).await, ["node-pool"]);
    assert_eq!(tab(&["cluster", "get", "tab"]).await, ["tab-1"]);
    assert!(
        tab(&["node-pool", "scale", "tab-1", ""])
            .await
            .contains(&"default".to_owned())
    );
    let man = user.run(&["man"]).await.expect(0);
    assert!(
        man.stdout.contains(".TH kubesvc 1") && man.stdout.contains("auth\\-server"),
        "{}",
        &man.stdout[..300.min(man.stdout.len())]
    );
    let help = user.run(&["--help"]).await.expect(0);
    assert!(
        help.stdout.contains("Exit codes:") && help.stdout.contains("5  conflict"),
        "{help:?}"
    );
}

/// Another super_admin of the organization writes escape sequences into a description (set
/// the window title, write the clipboard, hide text): a reader's `cluster get` and `list`
/// show them as text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_api_holds_cannot_drive_the_readers_terminal() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut body = cluster_body("acme", "esc-1");
    body["description"] =
        serde_json::json!("\u{1b}]0;pwned\u{7}\u{1b}]52;c;cm0gLXJmIH4=\u{7}\u{1b}[8mhidden");
    let created = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &body).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let reader = CliUser::with_env(&app.url, TOKEN_ACME_MEMBER, "acme");
    let bin = blackbox::cli::cli_bin();
    let shown = reader
        .other(
            "script",
            &[
                "-qec",
                &format!("TERM=xterm {} cluster get esc-1", bin.display()),
                "/dev/null",
            ],
        )
        .await
        .expect(0);
    assert!(shown.stdout.contains("\\u{1b}]0;pwned\\u{7}"), "{shown:?}");
    assert!(
        !shown.stdout.contains("\u{1b}]") && !shown.stdout.contains('\u{7}'),
        "{shown:?}"
    );
}

/// `auth login` on a terminal (a tmux pane): it asks for the token, the keys typed are not
/// echoed, and the token is saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_asks_for_the_token_on_the_terminal_without_echoing_it() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = CliUser::new();
    let socket = format!("kubesvc-test-{}", uuid::Uuid::new_v4());
    let login = format!(
        "{} auth login --url {} --organization acme; sleep 60",
        blackbox::cli::cli_bin().display(),
        app.url
    );
    let tmux = |args: &[&str]| {
        let mut all = vec!["-L", socket.as_str()];
        all.extend_from_slice(args);
        all.iter().map(|a| (*a).to_owned()).collect::<Vec<String>>()
    };
    let run = |args: Vec<String>| {
        let user = &user;
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            user.other("tmux", &args).await
        }
    };
    run(tmux(&[
        "new-session",
        "-d",
        "-s",
        "login",
        "-x",
        "150",
        "-y",
        "20",
        &login,
    ]))
    .await
    .expect(0);
    let screen_shows = |wanted: &'static str| {
        let run = &run;
        let tmux = &tmux;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let screen = run(tmux(&["capture-pane", "-p", "-t", "login"]))
                    .await
                    .stdout;
                if screen.contains(wanted) || std::time::Instant::now() > deadline {
                    return screen;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    let prompt = screen_shows("Token:").await;
    assert!(prompt.contains("Token:"), "{prompt}");
    run(tmux(&[
        "send-keys",
        "-t",
        "login",
        TOKEN_ACME_SUPER_ADMIN,
        "Enter",
    ]))
    .await
    .expect(0);
    let done = screen_shows("Logged in").await;
    run(tmux(&["kill-server"])).await;
    assert!(done.contains("Logged in to"), "{done}");
    assert!(
        !done.contains(TOKEN_ACME_SUPER_ADMIN),
        "the token was echoed: {done}"
    );
    let status = user.run(&["auth", "status"]).await.expect(0);
    assert!(status.stdout.contains("accepted"), "{status:?}");
}

/// A destructive command asks on a terminal, naming what goes, and only the exact answer goes
/// on; off a terminal it refuses without --yes, and nothing is sent either time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_asks_first_and_off_a_terminal_needs_yes() {
    let app = TestApp::spawn().await;
    let user = logged_in(&app).await;
    create_small(&user, "asked-1").await;

    let unasked = user.run(&["cluster", "delete", "asked-1"]).await.expect(2);
    assert!(unasked.stderr.contains("--yes"), "{unasked:?}");
    // (command line, what the person types, exit code) in order: nothing is deleted until the
    // cluster's name is typed as it is.
    let table = [
        ("cluster delete asked-1", "asked\n", 1),
        ("node-pool delete asked-1 default", "n\n", 1),
        ("node-pool delete asked-1 default", "\n", 1),
        ("cluster delete asked-1", "asked-1\n", 0),
    ];
    for (line, typed, code) in table {
        let args: Vec<&str> = line.split(' ').collect();
        let screen = user.on_terminal(&args, typed).await.expect(code);
        let asked = if line.starts_with("cluster") {
            "Type asked-1 to confirm"
        } else {
            "Delete node pool default of cluster asked-1? [y/N]"
        };
        assert!(screen.stdout.contains(asked), "{line}: {screen:?}");
        let after = user.run(&["cluster", "get", "asked-1", "-o", "json"]).await;
        let deleted = after.code == 4 || (after.code == 0 && after.json()["phase"] == "Deleting");
        assert_eq!(deleted, code == 0, "{line}: {after:?}");
    }
}

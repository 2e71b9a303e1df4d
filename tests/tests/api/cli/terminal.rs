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

#[tokio::test]
async fn completion_scripts_and_the_man_page_are_there() {
    let user = CliUser::new();
    for (shell, marks) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef kubesvc"),
        ("fish", "complete -c kubesvc"),
    ] {
        let run = user.run(&["completion", shell]).await.expect(0);
        assert!(
            run.stdout.contains(marks) && run.stdout.contains("node-pool"),
            "{shell}: {}",
            &run.stdout[..200.min(run.stdout.len())]
        );
    }
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

//! PostgreSQL failover under load: a primary and a synchronous streaming standby made on
//! loopback, the service given both in one URL (libpq's multi-host form with
//! `target_session_attrs=read-write`, the standby listed first so that the parameter, not the
//! order, is what picks the primary). Under creates, reads and long-polls the primary is killed
//! and the standby promoted: 503 with Retry-After meanwhile, the same process serving again from
//! the new primary, no acknowledged create lost or doubled, replays answering the same bytes,
//! and the LISTEN feed and long-polls back on the new primary. The load and its checks are in
//! failover_load.rs, shared with patroni.rs (where Patroni promotes, not the test).
//!
//! `SOAK_SECONDS` sets how long the load runs, half before the kill and half after the
//! recovery (unset: about two seconds in all, so the test stays short).

use super::failover_load::*;
use super::*;

/// The standby's name, as the primary's `synchronous_standby_names` knows it.
const STANDBY_NAME: &str = "standby1";

/// A primary and its synchronous standby, each a private cluster on its own port.
struct Pair {
    primary: PrivatePostgres,
    standby: PrivatePostgres,
}

impl Pair {
    /// Both hosts in one URL, the standby first: libpq passes over it only because of
    /// `target_session_attrs=read-write`, and after the failover it is the one to pick.
    fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.standby.port, self.primary.port
        )
    }
}

/// A streaming standby of `primary`: a base backup of it, started on its own port, streaming
/// under the name the primary waits for.
fn standby_of(primary: &PrivatePostgres) -> PrivatePostgres {
    let dir = Scratch::new("pg-standby");
    if primary.as_postgres {
        let st = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir.0)
            .status()
            .unwrap();
        assert!(st.success(), "chown the standby's directory");
    }
    let standby = PrivatePostgres {
        bin: primary.bin.clone(),
        dir,
        port: free_port(),
        as_postgres: primary.as_postgres,
    };
    // -R writes standby.signal and a primary_conninfo; -c fast does not wait for a spread
    // checkpoint; -X stream copies the WAL written during the backup too.
    let st = standby
        .command("pg_basebackup")
        .arg("-D")
        .arg(standby.data())
        .args(["-h", "127.0.0.1", "-p", &primary.port.to_string()])
        .args([
            "-U",
            "postgres",
            "-X",
            "stream",
            "-R",
            "-c",
            "fast",
            "--no-sync",
        ])
        .status()
        .unwrap();
    assert!(st.success(), "pg_basebackup failed: {}", primary.log());
    // The last setting of the file wins: the same primary, under the name it waits for.
    let conf = standby.data().join("postgresql.auto.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(&format!(
        "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name={STANDBY_NAME}'\n",
        primary.port
    ));
    std::fs::write(&conf, text).unwrap();
    standby.start();
    standby
}

/// The primary, its standby, and synchronous replication in effect: from then on a commit is
/// acknowledged only once the standby has flushed it. `None` without PostgreSQL's binaries.
fn make_a_primary_and_a_synchronous_standby() -> Option<Pair> {
    let primary = PrivatePostgres::create()?;
    // The defaults of PostgreSQL 10 and later, which streaming replication needs.
    let settings = texts(
        &primary.url(),
        "SELECT current_setting('wal_level') || ' ' || current_setting('synchronous_commit') \
         || ' ' || (current_setting('max_wal_senders')::int > 0)::text AS v",
    );
    assert_eq!(settings, vec!["replica on true"], "the primary's settings");
    let standby = standby_of(&primary);
    // Set once the standby is made, on the primary only: the base backup (so the promoted
    // standby) does not carry it, and a lone new primary does not wait for a standby forever.
    execute(
        &primary.url(),
        &format!("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ({STANDBY_NAME})'"),
    );
    execute(&primary.url(), "SELECT pg_reload_conf()");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let states = texts(
            &primary.url(),
            "SELECT application_name || '=' || sync_state AS v FROM pg_stat_replication",
        );
        if states == vec![format!("{STANDBY_NAME}=sync")] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the standby never became synchronous: {states:?}\n{}",
            standby.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Pair { primary, standby })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_the_synchronous_standby_loses_no_acknowledged_write() {
    let started = Instant::now();
    let Some(pair) = tokio::task::spawn_blocking(make_a_primary_and_a_synchronous_standby)
        .await
        .unwrap()
    else {
        return;
    };
    let (before, after) = load_phases();
    let platform = StubPlatform::start_demo();
    let scratch = Scratch::new("failover");
    let env = failover_server_env(&platform, &pair.url());
    let (server, http) = start_ready(&env, free_port(), scratch.path("server.log")).await;

    the_service_runs_on_the_primary_though_the_standby_is_listed_first(&pair, &server).await;
    let id = commit_a_provisioned_cluster_before_the_failover(&http).await;
    let load = start_creates_reads_and_long_polls(&http, &id);
    let kill = kill_the_primary_just_after_a_create_was_acknowledged(
        &load,
        before,
        (&pair.primary.url(), STANDBY_NAME),
        "the primary killed (immediate stop) under load",
        || pair.primary.stop_immediate(),
    )
    .await;
    the_watch_cache_lets_go(&http, &id).await;
    tokio::join!(
        every_kind_of_request_is_503_with_retry_after(&http, &id, "with no primary", Vec::new()),
        readiness_fails_and_liveness_holds(&http),
    );
    let promoted = promote_the_standby(&pair);
    let first_ack =
        the_same_process_acknowledges_creates_on_the_new_primary(&load, &kill, &server).await;
    http.wait_ready().await;
    let recovery = Recovery {
        promoted,
        first_ack,
        ready: Instant::now(),
    };

    the_long_poll_loop_is_answered_again_on_the_new_primary(&load, recovery.promoted, &server)
        .await;
    tokio::time::sleep(after).await;
    let log = stop_the_load(load).await;
    let answered_503 = the_load_saw_only_successes_and_clear_503s_and_nothing_hung(&log, &server);
    let new_primary = pair.standby.url();
    every_acknowledged_create_is_on_the_new_primary_exactly_once(&new_primary, &log, &kill);
    every_acknowledged_key_replays_its_answer_byte_for_byte(&http, &log).await;
    the_change_feed_listens_on_the_new_primary(&new_primary, &server).await;
    a_notification_on_the_new_primary_wakes_a_long_poll(&http, &new_primary, &id).await;
    http.wait_cluster(&id, Duration::from_secs(30), |c| {
        c["phase"] == "Provisioned"
    })
    .await;

    report_the_figures("failover", &log, &kill, &recovery, answered_503, started);
    drop(server);
    drop(pair);
}

/// The change feed's session is on the primary, none on the standby: the URL's first host was
/// passed over because it is read-only.
async fn the_service_runs_on_the_primary_though_the_standby_is_listed_first(
    pair: &Pair,
    server: &ServerProcess,
) {
    let feed = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{}'",
        store_postgres::CHANGE_FEED_APPLICATION_NAME
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&pair.primary.url(), &feed) != 1 {
        assert!(
            Instant::now() < deadline,
            "the change feed never listened on the primary: {}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        count(&pair.standby.url(), &feed),
        0,
        "a feed on the standby"
    );
}

/// `pg_ctl promote`, waiting until the standby is out of recovery. When that was.
fn promote_the_standby(pair: &Pair) -> Instant {
    tokio::task::block_in_place(|| {
        let st = pair
            .standby
            .command("pg_ctl")
            .arg("-D")
            .arg(pair.standby.data())
            .args(["-w", "-t", "30", "promote"])
            .status()
            .unwrap();
        assert!(
            st.success(),
            "pg_ctl promote failed: {}",
            pair.standby.log()
        );
        fault_injected("the standby promoted");
        assert_eq!(
            count(
                &pair.standby.url(),
                "SELECT (NOT pg_is_in_recovery())::int::bigint AS n"
            ),
            1,
            "the standby is still in recovery"
        );
    });
    Instant::now()
}

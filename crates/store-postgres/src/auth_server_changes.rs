//! The gateway's wake-ups for auth server changes and for sessions ended early: a thread holds
//! a LISTEN on `auth_server_changes` and on `session_revocations` (every write of either kind
//! notifies its channel in its transaction) on one connection, and wakes the holder of
//! [`AuthServerChanges`] (or of its [`SessionRevocationChanges`]) at each notification of its
//! channel, and both each time the LISTEN is (re)established, since whatever changed while none
//! was active went unheard.
//!
//! Each says only "read again": the gateway reads every auth server (or every sign-out in
//! force) whenever woken, so a burst of changes costs one read (a wake-up holds one permit, not
//! a count).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::listener::{Listener, Notification};
use crate::{AUTH_SERVER_CHANNEL, SESSION_CHANNEL, with_connect_timeout, with_param};

/// The LISTEN connection's `application_name`, for operators (and tests) in `pg_stat_activity`.
pub const APPLICATION_NAME: &str = "kubesvc-gateway-listener";

/// How long one wait for notifications lasts before the thread looks whether it is still wanted.
const WAIT: Duration = Duration::from_secs(1);
/// How often an idle LISTEN connection is asked a `SELECT 1`: a connection whose peer vanished
/// without closing it (a network cut) is found no later than this.
const PROBE_EVERY: Duration = Duration::from_secs(30);
/// How long a statement on the connection may take before it counts as lost.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Wakes its holder when an auth server may have changed. Dropping it, and every
/// [`SessionRevocationChanges`] taken from it, ends its thread (within a second).
pub struct AuthServerChanges {
    wake: Arc<Notify>,
    sessions: Arc<Notify>,
    listening: Arc<AtomicBool>,
    alive: Arc<()>,
}

/// Wakes its holder when a session may have been ended early: heard on the LISTEN connection
/// of the [`AuthServerChanges`] it was taken from, so a gateway holds one connection for both.
pub struct SessionRevocationChanges {
    wake: Arc<Notify>,
    _alive: Arc<()>,
}

impl SessionRevocationChanges {
    /// Waits until a session may have been ended since the last return (at once when one
    /// already may have).
    pub async fn changed(&self) {
        self.wake.notified().await;
    }
}

impl AuthServerChanges {
    /// Starts the listener thread; it connects (and reconnects, with backoff) by itself, so
    /// this never fails. The first wake-up comes once the LISTEN is in place.
    pub fn start(database_url: &str) -> AuthServerChanges {
        let wake = Arc::new(Notify::new());
        let sessions = Arc::new(Notify::new());
        let listening = Arc::new(AtomicBool::new(false));
        let alive = Arc::new(());
        let url = with_connect_timeout(database_url, Duration::from_secs(5));
        let url = with_param(&url, "application_name", APPLICATION_NAME);
        let thread = Shared {
            wake: wake.clone(),
            sessions: sessions.clone(),
            listening: listening.clone(),
            alive: Arc::downgrade(&alive),
        };
        let spawned = std::thread::Builder::new()
            .name("pg-auth-servers".into())
            .spawn(move || thread.listen(&url));
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the auth server listener; changes take effect at the next periodic reload");
        }
        AuthServerChanges {
            wake,
            sessions,
            listening,
            alive,
        }
    }

    /// The wake-up for sessions ended early, on the same connection.
    pub fn session_revocations(&self) -> SessionRevocationChanges {
        SessionRevocationChanges {
            wake: self.sessions.clone(),
            _alive: self.alive.clone(),
        }
    }

    /// Waits until an auth server may have changed since the last return (at once when it
    /// already may have).
    pub async fn changed(&self) {
        self.wake.notified().await;
    }

    /// Whether the LISTEN connection is up now.
    pub fn is_listening(&self) -> bool {
        self.listening.load(Ordering::SeqCst)
    }
}

struct Shared {
    wake: Arc<Notify>,
    sessions: Arc<Notify>,
    listening: Arc<AtomicBool>,
    alive: Weak<()>,
}

impl Shared {
    fn wanted(&self) -> bool {
        self.alive.strong_count() > 0
    }

    fn listen(&self, url: &str) {
        let mut backoff = FIRST_BACKOFF;
        while self.wanted() {
            let connected = Listener::connect(url).and_then(|mut conn| {
                conn.execute(
                    &format!("LISTEN {AUTH_SERVER_CHANNEL}; LISTEN {SESSION_CHANNEL}"),
                    STATEMENT_TIMEOUT,
                )?;
                Ok(conn)
            });
            let mut conn = match connected {
                Ok(conn) => conn,
                Err(error) => {
                    tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "cannot listen for auth server changes");
                    self.sleep(backoff);
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            backoff = FIRST_BACKOFF;
            self.listening.store(true, Ordering::SeqCst);
            // Changes made while no LISTEN was active were not heard: read everything again.
            self.wake.notify_one();
            self.sessions.notify_one();
            let lost = self.serve(&mut conn);
            self.listening.store(false, Ordering::SeqCst);
            if let Some(error) = lost {
                tracing::warn!(%error, "auth server listener lost its connection; reconnecting");
            }
        }
    }

    /// Wakes the holder of each channel notified.
    fn dispatch(&self, notifications: &[Notification]) {
        if notifications
            .iter()
            .any(|n| n.channel == AUTH_SERVER_CHANNEL)
        {
            self.wake.notify_one();
        }
        if notifications.iter().any(|n| n.channel == SESSION_CHANNEL) {
            self.sessions.notify_one();
        }
    }

    /// Wakes the holders at each notification until the connection fails (its error) or the
    /// holders are gone (`None`).
    fn serve(&self, conn: &mut Listener) -> Option<String> {
        let mut next_probe = Instant::now() + PROBE_EVERY;
        while self.wanted() {
            match conn.wait(WAIT) {
                Ok(notifications) => self.dispatch(&notifications),
                Err(error) => return Some(error),
            }
            if Instant::now() >= next_probe {
                match conn.execute("SELECT 1", STATEMENT_TIMEOUT) {
                    Ok(notifications) => self.dispatch(&notifications),
                    Err(error) => return Some(error),
                }
                next_probe = Instant::now() + PROBE_EVERY;
            }
        }
        None
    }

    /// Sleeps `total`, waking early when the holder is gone.
    fn sleep(&self, total: Duration) {
        let until = Instant::now() + total;
        while self.wanted() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50).min(total));
        }
    }
}

//! Debian's PgBouncer as a child process in front of the test PostgreSQL server, in transaction
//! pooling mode: a client holds a server session for one transaction only, so nothing a client
//! leaves on a session (a `SET`, a prepared statement, a LISTEN, a session advisory lock) is
//! there for its next transaction. The replicas test runs three servers through it
//! (`replicas.rs`).

use std::path::Path;
use std::process::Child;

use super::*;

/// One PgBouncer with its config, pid file and output in a scratch directory; stopped on drop.
pub(super) struct PgBouncer {
    child: Child,
    dir: Scratch,
    port: u16,
    /// Server sessions per database and user at most: what every client of it shares.
    pub(super) default_pool_size: u32,
}

impl PgBouncer {
    /// The pgbouncer binary; `None`, with the reason printed, when it is missing and cannot be
    /// installed here. In CI, or where it could be installed, its absence fails the test: a
    /// skip there would hide that the test never ran (`make test` installs it).
    pub(super) fn find() -> Option<PathBuf> {
        let on_path: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("pgbouncer"))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(bin) = std::iter::once(PathBuf::from("/usr/sbin/pgbouncer"))
            .chain(on_path)
            .find(|b| b.is_file())
        {
            return Some(bin);
        }
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
        let installable = Path::new("/usr/bin/apt-get").exists()
            && (running_as_root() || Path::new("/usr/bin/sudo").exists());
        assert!(
            !in_ci && !installable,
            "pgbouncer is not installed: apt-get install -y pgbouncer (scripts/test.sh does it \
             for make test); this test runs three server replicas through it"
        );
        eprintln!(
            "SKIPPED: pgbouncer is not installed and apt-get cannot install it here: the test \
             of replicas through a transaction pooler needs Debian's pgbouncer"
        );
        None
    }

    /// PgBouncer on a free port in front of the server of `database_url` (a `postgres://` URL;
    /// its user and password are the ones PgBouncer logs in with), every database of that
    /// server pooled in transaction mode with at most `default_pool_size` server sessions.
    /// Returns once it accepts connections.
    pub(super) fn start(bin: &Path, database_url: &str, default_pool_size: u32) -> PgBouncer {
        let url = reqwest::Url::parse(database_url)
            .unwrap_or_else(|e| panic!("TEST_DATABASE_URL is not a postgres:// URL: {e}"));
        let dir = Scratch::new("pgbouncer");
        let port = free_port();
        let as_postgres = running_as_root();
        // It refuses to run as root; the scratch directory then becomes the postgres user's,
        // for the pid file.
        if as_postgres {
            let st = Command::new("chown")
                .arg("postgres:postgres")
                .arg(&dir.0)
                .status()
                .unwrap();
            assert!(st.success(), "chown the pgbouncer directory");
        }
        let conf = dir.path("pgbouncer.ini");
        std::fs::write(&conf, config(&dir.0, port, &url, default_pool_size)).unwrap();
        let out = std::fs::File::create(dir.path("pgbouncer.log")).unwrap();
        let mut cmd = if as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin);
            c
        } else {
            Command::new(bin)
        };
        let child = cmd
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let mut pgbouncer = PgBouncer {
            child,
            dir,
            port,
            default_pool_size,
        };
        pgbouncer.wait_listening();
        pgbouncer
    }

    /// `database_url` with PgBouncer in place of the server: the same database and parameters.
    pub(super) fn url(&self, database_url: &str) -> String {
        let mut url = reqwest::Url::parse(database_url).unwrap();
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(self.port)).unwrap();
        // PgBouncer logs in with the password of its config; the client needs none.
        url.set_password(None).unwrap();
        url.to_string()
    }

    fn wait_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("pgbouncer exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "pgbouncer never listened on {}:\n{}",
                self.port,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(super) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // Its own pid (under runuser the child is runuser): SIGTERM is its immediate shutdown.
        let pid = std::fs::read_to_string(self.dir.path("pgbouncer.pid")).unwrap_or_default();
        super::stop_child(&mut self.child, &pid);
    }
}

/// The pgbouncer.ini: every database of the server at `url`, logged in as its user, in
/// transaction mode; clients are not asked for a password (`auth_type = any`: loopback only).
fn config(dir: &Path, port: u16, url: &reqwest::Url, default_pool_size: u32) -> String {
    // Single-quoted in PgBouncer's connection string syntax; a value holding a quote or a
    // backslash is not worth its escaping rules here.
    let quote = |v: &str| {
        let v = percent_decoded(v);
        assert!(
            !v.contains(['\'', '\\']),
            "TEST_DATABASE_URL: a quote or backslash in its host, user or password"
        );
        format!("'{v}'")
    };
    let mut server = format!(
        "host={} port={} user={}",
        quote(url.host_str().unwrap_or("127.0.0.1")),
        url.port().unwrap_or(5432),
        quote(if url.username().is_empty() {
            "postgres"
        } else {
            url.username()
        }),
    );
    if let Some(password) = url.password() {
        server.push_str(&format!(" password={}", quote(password)));
    }
    let d = dir.display();
    format!(
        "[databases]
* = {server}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
pidfile = {d}/pgbouncer.pid
auth_type = any
pool_mode = transaction
default_pool_size = {default_pool_size}
reserve_pool_size = 0
max_client_conn = 500
"
    )
}

/// A URL's user or password as written before percent-encoding.
fn percent_decoded(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

//! The change feed's LISTEN connection, on libpq itself.
//!
//! Why not diesel's `PgConnection`: it keeps its socket to itself, so the only way to learn of
//! a notification is to ask every few milliseconds. Here the feed's thread sleeps in `poll(2)`
//! on the socket and wakes the moment PostgreSQL sends something. Why libpq rather than a
//! second client library: it is the library diesel's pool already links, so a connection
//! string (a URL or key/value pairs, several hosts, `sslmode` and its certificates) means the
//! same thing to the feed as to every other connection of the process.
//!
//! This is the one module of the crate with `unsafe` code: each call into libpq is on a
//! connection this type alone owns, and the SAFETY comments say what each call relies on.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use pq_sys::{ConnStatusType, ExecStatusType, PGconn};

/// One notification: its channel and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notification {
    pub channel: String,
    pub payload: String,
}

/// Rows of a result, each value as text (`None` for NULL).
pub(crate) type Rows = Vec<Vec<Option<String>>>;

/// An open libpq connection used only by the change feed: to LISTEN and to read the log.
pub(crate) struct Listener {
    conn: NonNull<PGconn>,
}

// SAFETY: libpq allows a connection to be used from any thread as long as one thread at a time
// uses it. `Listener` owns its connection, is not `Sync`, and every method takes `&mut self`.
unsafe impl Send for Listener {}

impl Drop for Listener {
    fn drop(&mut self) {
        // SAFETY: the pointer came from PQconnectdb and is finished exactly once, here.
        unsafe { pq_sys::PQfinish(self.conn.as_ptr()) }
    }
}

impl Listener {
    /// Connects (blocking, bounded by the string's `connect_timeout`).
    pub fn connect(conninfo: &str) -> Result<Listener, String> {
        let conninfo =
            CString::new(conninfo).map_err(|_| "the database URL holds a NUL byte".to_owned())?;
        // SAFETY: `conninfo` is a valid NUL-terminated string that outlives the call; libpq
        // returns a connection object (possibly a failed one) or null when out of memory.
        let raw = unsafe { pq_sys::PQconnectdb(conninfo.as_ptr()) };
        let conn = NonNull::new(raw).ok_or_else(|| "libpq is out of memory".to_owned())?;
        let listener = Listener { conn };
        // SAFETY: a live connection object owned by `listener`.
        let status = unsafe { pq_sys::PQstatus(listener.conn.as_ptr()) };
        if status != ConnStatusType::CONNECTION_OK {
            return Err(listener.error());
        }
        Ok(listener)
    }

    /// Runs statements and waits at most `timeout` for them to finish; notifications that
    /// arrive meanwhile are returned.
    pub fn execute(&mut self, sql: &str, timeout: Duration) -> Result<Vec<Notification>, String> {
        self.query(sql, timeout)
            .map(|(_, notifications)| notifications)
    }

    /// Runs statements and waits at most `timeout` for them to finish: the rows of the last
    /// one that returned rows (each value as text, `None` for NULL), and the notifications that
    /// arrived meanwhile.
    pub fn query(
        &mut self,
        sql: &str,
        timeout: Duration,
    ) -> Result<(Rows, Vec<Notification>), String> {
        let deadline = Instant::now() + timeout;
        let sql = CString::new(sql).map_err(|_| "a statement holds a NUL byte".to_owned())?;
        // SAFETY: a live connection owned by `self`; `sql` outlives the call.
        if unsafe { pq_sys::PQsendQuery(self.conn.as_ptr(), sql.as_ptr()) } != 1 {
            return Err(self.error());
        }
        let mut failure = None;
        let mut rows = Vec::new();
        loop {
            // SAFETY: a live connection owned by `self`.
            while unsafe { pq_sys::PQisBusy(self.conn.as_ptr()) } == 1 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err("the database did not answer in time".into());
                }
                if self.readable_within(left)? {
                    self.consume_input()?;
                }
            }
            // SAFETY: not busy, so PQgetResult returns without blocking: a result or null.
            let result = unsafe { pq_sys::PQgetResult(self.conn.as_ptr()) };
            let Some(result) = NonNull::new(result) else {
                break;
            };
            // SAFETY: `result` is a result object of this connection, read here and cleared
            // exactly once, after the last read.
            let status = unsafe { pq_sys::PQresultStatus(result.as_ptr()) };
            match status {
                ExecStatusType::PGRES_TUPLES_OK => rows = unsafe { Self::rows(result) },
                ExecStatusType::PGRES_COMMAND_OK => {}
                _ => {
                    failure.get_or_insert_with(|| self.error());
                }
            }
            // SAFETY: as above; nothing reads `result` after this.
            unsafe { pq_sys::PQclear(result.as_ptr()) };
        }
        match failure {
            Some(error) => Err(error),
            None => Ok((rows, self.drain())),
        }
    }

    /// The rows of a result, each value copied out as text.
    ///
    /// # Safety
    /// `result` is a live result object with status `PGRES_TUPLES_OK`, not yet cleared.
    unsafe fn rows(result: NonNull<pq_sys::PGresult>) -> Rows {
        let r = result.as_ptr();
        // SAFETY (for every call below): `r` is live (the caller's promise), and each row and
        // column index is within the counts libpq reported for it. A value is a NUL-terminated
        // string owned by the result, copied before the result is cleared.
        let (n_rows, n_cols) = unsafe { (pq_sys::PQntuples(r), pq_sys::PQnfields(r)) };
        (0..n_rows)
            .map(|row| {
                (0..n_cols)
                    .map(|col| unsafe {
                        if pq_sys::PQgetisnull(r, row, col) == 1 {
                            None
                        } else {
                            let value = CStr::from_ptr(pq_sys::PQgetvalue(r, row, col));
                            Some(value.to_string_lossy().into_owned())
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// Waits at most `timeout` for notifications: returns as soon as some arrive (an empty
    /// list when none did in time), or an error once the connection is lost.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<Notification>, String> {
        let ready = self.drain();
        if !ready.is_empty() {
            return Ok(ready);
        }
        if self.readable_within(timeout)? {
            self.consume_input()?;
        }
        Ok(self.drain())
    }

    /// Whether the connection is still up (a statement may fail on a healthy one).
    pub fn is_open(&self) -> bool {
        // SAFETY: a live connection owned by `self`.
        unsafe { pq_sys::PQstatus(self.conn.as_ptr()) == ConnStatusType::CONNECTION_OK }
    }

    fn consume_input(&mut self) -> Result<(), String> {
        // SAFETY: a live connection owned by `self`; reads what the socket holds, never blocks.
        if unsafe { pq_sys::PQconsumeInput(self.conn.as_ptr()) } == 1 {
            Ok(())
        } else {
            Err(self.error())
        }
    }

    /// Whether the socket has something to read (or was closed) within `timeout`.
    fn readable_within(&self, timeout: Duration) -> Result<bool, String> {
        // SAFETY: a live connection owned by `self`.
        let fd = unsafe { pq_sys::PQsocket(self.conn.as_ptr()) };
        if fd < 0 {
            return Err("the connection has no socket".into());
        }
        let mut pollfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd on the stack, for the duration of the call.
        let n = unsafe { libc::poll(&mut pollfd, 1, millis) };
        if n < 0 {
            let error = std::io::Error::last_os_error();
            // A signal cut the wait short: nothing to read yet; the caller waits again.
            return if error.kind() == std::io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(format!("poll: {error}"))
            };
        }
        Ok(n > 0)
    }

    /// The notifications libpq has already read off the socket.
    fn drain(&mut self) -> Vec<Notification> {
        let mut out = Vec::new();
        loop {
            // SAFETY: a live connection owned by `self`; returns an owned notification or null.
            let raw = unsafe { pq_sys::PQnotifies(self.conn.as_ptr()) };
            let Some(notify) = NonNull::new(raw) else {
                return out;
            };
            // SAFETY: libpq filled the struct: `relname` and `extra` are NUL-terminated strings
            // inside the same allocation, valid until PQfreemem, which runs once, after both
            // were copied.
            unsafe {
                let n = notify.as_ref();
                out.push(Notification {
                    channel: CStr::from_ptr(n.relname).to_string_lossy().into_owned(),
                    payload: CStr::from_ptr(n.extra).to_string_lossy().into_owned(),
                });
                pq_sys::PQfreemem(notify.as_ptr().cast());
            }
        }
    }

    /// libpq's message for the last failure (it never holds the password).
    fn error(&self) -> String {
        // SAFETY: a live connection; the message is a NUL-terminated string owned by libpq,
        // copied before any other call on the connection.
        let message = unsafe { CStr::from_ptr(pq_sys::PQerrorMessage(self.conn.as_ptr())) };
        let message = message.to_string_lossy();
        let message = message.trim();
        if message.is_empty() {
            "the database connection failed".into()
        } else {
            message.to_owned()
        }
    }
}

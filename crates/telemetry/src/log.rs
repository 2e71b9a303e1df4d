//! The log's writer: lines are appended to a buffer in memory and a thread of its own writes
//! them out, so no request waits on a write to standard error.
//!
//! Why not a channel of lines (`tracing-appender`'s non-blocking writer): it copies each line
//! into a vector of its own and wakes the writing thread for it, and the thread, having written
//! that one line, sleeps again. Under load that is a wake-up, a context switch and a `write`
//! for every line: at `info`, with an access line per request, more than the line's formatting
//! cost. Here a line is a copy into a shared buffer under a lock; the thread is woken only when
//! it sleeps with nothing to write, and after each write it lets lines gather for
//! [`GATHER`] before taking the next batch. Under load one `write` carries hundreds of lines
//! and a line is never held back longer than that.
//!
//! Nothing is dropped: a writer that falls [`LIMIT`] bytes behind holds the lines that would go
//! past it until it catches up (the requests logging them wait), as a full pipe would.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long lines gather between two writes while they keep coming.
pub const GATHER: Duration = Duration::from_millis(1);
/// The most a writer may fall behind, in bytes, before lines wait for room.
pub const LIMIT: usize = 8 * 1024 * 1024;
/// The buffer a batch starts with; a larger one left by a burst is given back.
const START: usize = 64 * 1024;
/// How long a stop waits for the lines still buffered to be written.
const STOP_WAIT: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    lines: Vec<u8>,
    /// The thread waits for lines (rather than gathering them): an append must wake it.
    parked: bool,
    /// Appends waiting for room.
    waiting: usize,
    /// The guard was dropped: write what is left and stop.
    closing: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    lines_came: Condvar,
    room_made: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock is held leaves bytes of whole lines at worst.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn append(&self, line: &[u8]) {
        let mut s = self.lock();
        while s.lines.len() >= LIMIT && !s.closing {
            s.waiting += 1;
            s = self
                .room_made
                .wait(s)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            s.waiting -= 1;
        }
        if s.closing {
            // After the stop nothing writes any more.
            return;
        }
        s.lines.extend_from_slice(line);
        let wake = std::mem::take(&mut s.parked);
        drop(s);
        if wake {
            self.lines_came.notify_one();
        }
    }

    /// The writing thread: batches until the guard is dropped and nothing is left.
    fn run(&self, out: &mut dyn Write) {
        let mut batch = Vec::with_capacity(START);
        loop {
            let mut s = self.lock();
            while s.lines.is_empty() {
                if s.closing {
                    return;
                }
                s.parked = true;
                s = self
                    .lines_came
                    .wait(s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
            s.parked = false;
            std::mem::swap(&mut s.lines, &mut batch);
            let (waiting, closing) = (s.waiting > 0, s.closing);
            drop(s);
            if waiting {
                self.room_made.notify_all();
            }
            // A log that cannot be written (standard error closed) has nowhere to say so.
            let _ = out.write_all(&batch).and_then(|()| out.flush());
            batch.clear();
            batch.shrink_to(START);
            if !closing {
                std::thread::sleep(GATHER);
            }
        }
    }
}

/// Where the formatting layer writes each line (`tracing_subscriber::fmt::MakeWriter`).
#[derive(Clone)]
pub struct LogWriter {
    shared: Arc<Shared>,
}

/// One line's writer: the formatting layer writes each line whole, in one call.
pub struct LineWriter<'a> {
    shared: &'a Shared,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.shared.append(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter {
            shared: &self.shared,
        }
    }
}

/// Keeps the writing thread running; dropping it writes the lines still buffered (waiting at
/// most a second for them), then stops the thread.
pub struct LogGuard {
    shared: Arc<Shared>,
    done: std::sync::mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for LogGuard {
    fn drop(&mut self) {
        let wake = {
            let mut s = self.shared.lock();
            s.closing = true;
            std::mem::take(&mut s.parked)
        };
        if wake {
            self.shared.lines_came.notify_one();
        }
        self.shared.room_made.notify_all();
        // A thread stuck writing to a pipe nobody reads is left behind, not waited for.
        if self.done.recv_timeout(STOP_WAIT).is_ok()
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
    }
}

/// A writer of lines to `out` on a thread named `name`, and the guard that keeps it running.
pub fn writer(
    name: &str,
    mut out: impl Write + Send + 'static,
) -> std::io::Result<(LogWriter, LogGuard)> {
    let shared = Arc::new(Shared::default());
    let (done_tx, done) = std::sync::mpsc::channel();
    let thread = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                shared.run(&mut out);
                let _ = done_tx.send(());
            })?
    };
    Ok((
        LogWriter {
            shared: shared.clone(),
        },
        LogGuard {
            shared,
            done,
            thread: Some(thread),
        },
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    /// Standard error's stand-in: what was written, and in how many writes.
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<AtomicUsize>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn line(writer: &LogWriter, text: &str) {
        writer.make_writer().write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn every_line_from_every_thread_is_written_whole_and_in_order_per_thread() {
        let sink = Sink::default();
        let (writer, guard) = super::writer("log-test", sink.clone()).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let writer = writer.clone();
                std::thread::spawn(move || {
                    for n in 0..2_000 {
                        line(&writer, &format!("thread={t} n={n}\n"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(guard);
        let text = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        let mut next = [0; 4];
        for l in text.lines() {
            let (t, n) = l
                .strip_prefix("thread=")
                .and_then(|r| r.split_once(" n="))
                .unwrap();
            let t: usize = t.parse().unwrap();
            assert_eq!(n.parse::<usize>().unwrap(), next[t], "{l}");
            next[t] += 1;
        }
        assert_eq!(next, [2_000; 4]);
        // Lines that came together went out together.
        assert!(sink.writes.load(Ordering::SeqCst) < 8_000);
    }

    #[test]
    fn a_line_is_written_without_waiting_for_more_or_for_the_stop() {
        let sink = Sink::default();
        let (writer, _guard) = super::writer("log-test", sink.clone()).unwrap();
        line(&writer, "alone\n");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while sink.bytes.lock().unwrap().is_empty() {
            assert!(std::time::Instant::now() < deadline, "the line never came");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(sink.bytes.lock().unwrap().as_slice(), b"alone\n");
    }

    /// A sink that takes nothing until told to: a writer far behind.
    #[derive(Clone, Default)]
    struct Stuck {
        open: Arc<(Mutex<bool>, Condvar)>,
        sink: Sink,
    }

    impl Write for Stuck {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let (open, cv) = &*self.open;
            let mut o = open.lock().unwrap();
            while !*o {
                o = cv.wait(o).unwrap();
            }
            self.sink.write(buf)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_writer_far_behind_holds_lines_back_and_loses_none() {
        let stuck = Stuck::default();
        let (writer, guard) = super::writer("log-test", stuck.clone()).unwrap();
        let big = "x".repeat(64 * 1024 - 1) + "\n";
        // A first line, taken by the write that sticks; then enough to fill the buffer past
        // its limit.
        line(&writer, &big);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !writer.shared.lock().lines.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the first line was never taken"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let lines = LIMIT / big.len() + 8;
        let logging = {
            let (writer, big) = (writer.clone(), big.clone());
            std::thread::spawn(move || {
                for _ in 0..lines {
                    line(&writer, &big);
                }
            })
        };
        loop {
            let waiting = writer.shared.lock().waiting;
            if waiting > 0 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "no line waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(writer.shared.lock().lines.len() <= LIMIT + big.len());
        let (open, cv) = &*stuck.open;
        *open.lock().unwrap() = true;
        cv.notify_all();
        logging.join().unwrap();
        drop(guard);
        assert_eq!(
            stuck.sink.bytes.lock().unwrap().len(),
            (lines + 1) * big.len()
        );
    }
}

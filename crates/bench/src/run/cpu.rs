//! CPU time the server and PostgreSQL spend during a phase, per request: what one request
//! costs the machine. On a shared machine requests per second move by ±15 % from run to run
//! with the neighbours' load; the CPU a request takes moves far less, so a change of a few
//! percent shows here first.

use std::time::Duration;

use crate::results::{PhaseCpu, ProxyCpu};

/// CPU time consumed so far, read from `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuClock {
    server: Duration,
    postgres: Duration,
}

impl CpuClock {
    /// The server process (all its threads) and the PostgreSQL processes that work for this
    /// run: its own backends (their title names a database of the run, `kubesvc_bench_<run>`)
    /// and the server's shared processes (the WAL writer, the checkpointer, …). Backends of
    /// other databases are left out: on a shared machine another program's tests would count.
    /// `None` when the server's stat cannot be read.
    pub fn read(server_pid: u32, run_databases: &str) -> Option<CpuClock> {
        let server = std::fs::read_to_string(format!("/proc/{server_pid}/stat")).ok()?;
        let (_, server) = cpu_ticks(&server)?;
        let mut postgres = 0;
        for (dir, stat) in processes()? {
            let Some(("postgres", t)) = cpu_ticks(&stat) else {
                continue;
            };
            let title = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            if works_for_run(&String::from_utf8_lossy(&title), run_databases) {
                postgres += t;
            }
        }
        Some(CpuClock {
            server: ticks_to_time(server),
            postgres: ticks_to_time(postgres),
        })
    }

    /// CPU per request between `self` and `later`, in milliseconds.
    pub fn per_request(&self, later: &CpuClock, requests: usize) -> PhaseCpu {
        let n = requests.max(1) as f64;
        let ms = |a: Duration, b: Duration| b.saturating_sub(a).as_secs_f64() * 1000.0 / n;
        PhaseCpu {
            server_ms: ms(self.server, later.server),
            postgres_ms: ms(self.postgres, later.postgres),
        }
    }
}

/// User and system CPU time of a process (all its threads) and of its child processes (nginx's
/// workers, under its master), read from `/proc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessTimes {
    user: Duration,
    system: Duration,
}

impl ProcessTimes {
    /// `None` when the process's stat cannot be read.
    pub fn read(pid: u32) -> Option<ProcessTimes> {
        let own = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let own = stat_fields(&own)?;
        let (mut user, mut system) = (own.utime, own.stime);
        for (_, stat) in processes()? {
            if let Some(child) = stat_fields(&stat).filter(|f| f.ppid == pid) {
                user += child.utime;
                system += child.stime;
            }
        }
        Some(ProcessTimes {
            user: ticks_to_time(user),
            system: ticks_to_time(system),
        })
    }

    /// CPU per request between `self` and `later`, in microseconds.
    pub fn per_request(&self, later: &ProcessTimes, requests: u64) -> ProxyCpu {
        let n = requests.max(1) as f64;
        let us = |a: Duration, b: Duration| b.saturating_sub(a).as_secs_f64() * 1e6 / n;
        ProxyCpu {
            user_us: us(self.user, later.user),
            system_us: us(self.system, later.system),
        }
    }
}

/// Every process's `/proc/<pid>` directory with its stat line (one gone meanwhile is skipped);
/// `None` when `/proc` cannot be listed.
fn processes() -> Option<impl Iterator<Item = (std::path::PathBuf, String)>> {
    let entries = std::fs::read_dir("/proc").ok()?;
    Some(entries.flatten().filter_map(|entry| {
        let dir = entry.path();
        let stat = std::fs::read_to_string(dir.join("stat")).ok()?;
        Some((dir, stat))
    }))
}

/// CPU clock ticks (the unit of `/proc/<pid>/stat`) as time.
fn ticks_to_time(ticks: u64) -> Duration {
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}

/// Whether a PostgreSQL process, by its title (`postgres: 15/main: postgres kubesvc_bench_x
/// 127.0.0.1(40312) idle` for a backend, `postgres: 15/main: walwriter` for a shared one),
/// works for the run whose databases start with `run_databases`. A backend's title names its
/// client's address: `host(port)` over TCP, `[local]` over a socket.
fn works_for_run(title: &str, run_databases: &str) -> bool {
    let is_backend = title.contains("[local]") || title.contains('(');
    !is_backend
        || title
            .split_whitespace()
            .any(|w| w.starts_with(run_databases))
}

/// The command name and user + system CPU ticks of a `/proc/<pid>/stat` line. The name is
/// in parentheses and may itself hold spaces and parentheses, so fields are counted from the
/// last `)`.
fn cpu_ticks(stat: &str) -> Option<(&str, u64)> {
    let fields = stat_fields(stat)?;
    Some((fields.comm, fields.utime + fields.stime))
}

/// The fields of a `/proc/<pid>/stat` line this module reads.
struct StatFields<'a> {
    comm: &'a str,
    ppid: u32,
    /// User and system CPU ticks.
    utime: u64,
    stime: u64,
}

fn stat_fields(stat: &str) -> Option<StatFields<'_>> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?;
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the name: state (field 3), ppid (field 4), …, utime (field 14), stime (field 15).
    Some(StatFields {
        comm,
        ppid: fields.get(1)?.parse().ok()?,
        utime: fields.get(11)?.parse().ok()?,
        stime: fields.get(12)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn stat_lines_give_the_name_and_the_cpu_ticks() {
        let postgres =
            "4242 (postgres) S 1 4242 4242 0 -1 4194560 900 0 0 0 150 25 0 0 20 0 1 0 100 0 0";
        assert_eq!(cpu_ticks(postgres), Some(("postgres", 175)));
        let odd = "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0";
        assert_eq!(cpu_ticks(odd), Some(("a (b) c", 7)));
        assert_eq!(cpu_ticks("7 (short) R 1 2"), None);
        assert_eq!(cpu_ticks("no parentheses"), None);
    }

    #[test]
    fn backends_of_other_databases_do_not_count() {
        let run = "kubesvc_bench_ab12";
        for (title, counts) in [
            (
                "postgres: 15/main: postgres kubesvc_bench_ab12 127.0.0.1(40312) idle",
                true,
            ),
            (
                "postgres: 15/main: postgres kubesvc_bench_ab12_pgbench [local] SELECT",
                true,
            ),
            ("postgres: 15/main: walwriter", true),
            ("postgres: 15/main: checkpointer", true),
            (
                "postgres: 15/main: postgres kubesvc_test_77 127.0.0.1(40999) idle",
                false,
            ),
            ("postgres: 15/main: postgres postgres [local] idle", false),
        ] {
            assert_eq!(works_for_run(title, run), counts, "{title}");
        }
    }

    #[test]
    fn per_request_is_the_difference_over_the_requests() {
        let before = CpuClock {
            server: Duration::from_millis(1000),
            postgres: Duration::from_millis(5000),
        };
        let after = CpuClock {
            server: Duration::from_millis(3000),
            postgres: Duration::from_millis(9000),
        };
        let cpu = before.per_request(&after, 1000);
        assert!((cpu.server_ms - 2.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.postgres_ms - 4.0).abs() < 1e-9, "{cpu:?}");
    }

    #[test]
    fn a_process_counts_with_its_children() {
        let line = "4300 (nginx) S 4242 4300 4300 0 -1 0 0 0 0 0 70 30 0 0 20 0 1 0 1 0 0";
        let fields = stat_fields(line).unwrap();
        assert_eq!(
            (fields.comm, fields.ppid, fields.utime, fields.stime),
            ("nginx", 4242, 70, 30)
        );
        // A shell that only waits, with a child that burns CPU: the time shows in the
        // shell's figure only through its child.
        let mut shell = std::process::Command::new("sh")
            .args([
                "-c",
                "(i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done) & wait",
            ])
            .spawn()
            .unwrap();
        let before = ProcessTimes::read(shell.id()).unwrap();
        let mut grew = false;
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(20));
            match ProcessTimes::read(shell.id()) {
                Some(later) if later.user + later.system > before.user + before.system => {
                    grew = true;
                    break;
                }
                _ => {}
            }
        }
        let _ = shell.wait();
        assert!(grew, "the child's CPU time was not counted");
    }

    #[test]
    fn per_request_times_are_microseconds_each() {
        let before = ProcessTimes {
            user: Duration::from_millis(100),
            system: Duration::from_millis(300),
        };
        let after = ProcessTimes {
            user: Duration::from_millis(120),
            system: Duration::from_millis(360),
        };
        let cpu = before.per_request(&after, 10_000);
        assert!((cpu.user_us - 2.0).abs() < 1e-9, "{cpu:?}");
        assert!((cpu.system_us - 6.0).abs() < 1e-9, "{cpu:?}");
    }

    #[test]
    fn this_process_can_be_read() {
        let clock = CpuClock::read(std::process::id(), "kubesvc_bench_");
        assert!(clock.is_some());
    }
}

//! Bounding a run of other processes by their progress, not by wall time: the Rust side of
//! `tests/c/common.h`'s watch (`watch_step`), the same two rules.
//!
//! A limit of wall time cannot tell a hang from a run that is slow for reasons of the
//! machine's: starved of CPU at load ~30 (a release build at nice 19 ran past its 1,800 s), or
//! paused (SIGSTOP, by job control or by a benchmark that pauses other jobs, for minutes). A [`Watch`] looks at the
//! process groups it is given (`/proc`, every [`LOOK`] or so) and counts:
//!
//! - **the time they could run**: each look adds the time since the one before (at most
//!   [`LOOK`]: a look that comes late, the watcher itself paused or starved, counts as one),
//!   less the share of it that their most delayed thread spent waiting for a CPU (the run
//!   delay in `/proc/PID/task/TID/schedstat`), and nothing while one of their threads is
//!   stopped. On a quiet machine that is the wall time; a thread that gets a CPU a tenth of
//!   the time counts a tenth of it. A limit on it bounds a hang that spins, whatever the load.
//! - **still looks in a row**: looks that found none of their threads running, runnable,
//!   stopped or in an uninterruptible sleep, and no CPU time used since the look before.
//!   [`STILL_LOOKS`] of them: they sleep for good (a deadlock, a wait for something that
//!   will not come). A process blocked on a file lock (`flock`, `fcntl`) waits for the lock's
//!   holder: a look takes in the holder's process group too (`/proc/locks`), so a `cargo build`
//!   blocked on the build directory another cargo builds in moves while that cargo's rustc
//!   does, and is given up on only once both sleep (the C watch of `common.h` has no such rule:
//!   its programs take no file locks).
//!
//! A healthy run, paused or starved, is never stopped by either; a real hang ends in bounded
//! time (the limit, in time it could run, or [`STILL_LOOKS`] looks). Only `std`: `xtask`
//! includes this file too (`#[path]`), for the builds and runs it bounds, and so do the
//! simulator's unit tests, which bound their waits within their own process by it
//! ([`Watch::this_process`]: a look then comes from one of the watched threads, so only the
//! limit can end such a watch; a look that comes late, the process paused or starved, counts
//! as one as above).

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// How often a watch looks at its processes (the caller may look more often: a look counts at
/// most the time since the one before).
pub const LOOK: Duration = Duration::from_secs(1);

/// Still looks in a row after which a watch's processes are taken to sleep for good.
pub const STILL_LOOKS: u32 = 60;

/// Why a watch gives up on its processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hang {
    /// They could run for this long (the limit) without ending.
    Ran(Duration),
    /// They stayed still (asleep, using no CPU) for `looks` looks [`LOOK`] apart; `waits`: what
    /// their sleeping threads slept in at the last look (the kernel's wait channels,
    /// `/proc/.../wchan`: `futex_wait_queue`, `pipe_read`, `locks_lock_inode_wait`...), each
    /// once, empty where the kernel does not say.
    Still { looks: u32, waits: Vec<String> },
}

impl std::fmt::Display for Hang {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hang::Ran(limit) => write!(
                f,
                "could run for {limit:?} (time not stopped nor waiting for a CPU) without ending"
            ),
            Hang::Still { looks, waits } => {
                write!(
                    f,
                    "stayed asleep without using CPU time for {looks} looks {LOOK:?} apart"
                )?;
                if !waits.is_empty() {
                    write!(f, " (their threads waiting in {})", waits.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

/// What one look found.
#[derive(Debug, Default)]
struct Seen {
    /// CPU time used, clock ticks (user + system).
    cpu: u64,
    /// A thread running, runnable or in an uninterruptible sleep.
    busy: bool,
    /// A thread stopped (a signal, a tracer).
    stopped: bool,
    /// Every thread's run delay (ns), by thread id.
    delays: HashMap<u32, u64>,
    /// The wait channels of the sleeping threads (see [`Hang::Still`]).
    waits: BTreeSet<String>,
}

/// What a watch looks at.
#[derive(Clone, Debug)]
enum Watched {
    /// Every process of these process groups.
    Groups(Vec<u32>),
    /// The calling process (`/proc/self`).
    ThisProcess,
}

/// A watch on process groups, or on the calling process (see the module docs).
#[derive(Debug)]
pub struct Watch {
    watched: Watched,
    limit: Option<Duration>,
    at: Instant,
    last: Seen,
    still: u32,
    ran: Duration,
}

impl Watch {
    /// Watches the processes of `groups` (process group ids), giving up once they could run
    /// for `limit` (`None`: no limit, still looks only).
    pub fn new(groups: &[u32], limit: Option<Duration>) -> Self {
        Self::on(Watched::Groups(groups.to_vec()), limit)
    }

    /// Watches the calling process's own threads, giving up once they could run for `limit`:
    /// a bound for a wait inside the process (a unit test's), which a pause of the process
    /// (SIGSTOP) or a starved machine does not run out.
    #[allow(dead_code)] // `xtask` watches groups only.
    pub fn this_process(limit: Duration) -> Self {
        Self::on(Watched::ThisProcess, Some(limit))
    }

    fn on(watched: Watched, limit: Option<Duration>) -> Self {
        let last = look(&watched);
        Watch {
            watched,
            limit,
            at: Instant::now(),
            last,
            still: 0,
            ran: Duration::ZERO,
        }
    }

    /// Looks if [`LOOK`] has passed since the last look; `Err` once the processes should be
    /// taken for hung.
    pub fn step(&mut self) -> Result<(), Hang> {
        let now = Instant::now();
        let gap = now.saturating_duration_since(self.at);
        if gap < LOOK {
            return Ok(());
        }
        self.at = now;
        let seen = look(&self.watched);
        let moved = seen.busy || seen.stopped || seen.cpu != self.last.cpu;
        self.still = if moved { 0 } else { self.still + 1 };
        if !seen.stopped {
            let delayed = seen
                .delays
                .iter()
                .map(|(tid, d)| match self.last.delays.get(tid) {
                    Some(was) => d.saturating_sub(*was),
                    // New since the last look: what it waited, it waited since.
                    None => *d,
                })
                .max()
                .unwrap_or(0);
            let gap_ns = gap.as_nanos().max(1) as f64;
            let free = 1.0 - (delayed as f64 / gap_ns).min(1.0);
            self.ran += gap.min(LOOK).mul_f64(free);
        }
        self.last = seen;
        if self.still >= STILL_LOOKS {
            return Err(Hang::Still {
                looks: self.still,
                waits: self.last.waits.iter().cloned().collect(),
            });
        }
        match self.limit {
            Some(limit) if self.ran >= limit => Err(Hang::Ran(limit)),
            _ => Ok(()),
        }
    }
}

/// One look at every thread of every process watched, and of the process groups holding a
/// file lock one of them waits for ([`lock_holders`]).
fn look(watched: &Watched) -> Seen {
    let mut seen = Seen::default();
    let procs: Vec<(String, Stat)> = match watched {
        Watched::ThisProcess => read_stat("/proc/self/stat")
            .map(|st| ("self".to_owned(), st))
            .into_iter()
            .collect(),
        Watched::Groups(groups) => {
            let Ok(dir) = std::fs::read_dir("/proc") else {
                return seen;
            };
            let all: Vec<(String, Stat)> = dir
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter(|n| n.parse::<u32>().is_ok())
                .filter_map(|pid| read_stat(&format!("/proc/{pid}/stat")).map(|st| (pid, st)))
                .collect();
            let mut looked = groups.clone();
            looked.extend(lock_holders(&all, groups));
            all.into_iter()
                .filter(|(_, st)| looked.contains(&st.pgrp))
                .collect()
        }
    };
    for (pid, stat) in procs {
        seen.cpu += stat.cpu;
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let dir = format!("/proc/{pid}/task/{tid}");
            let Some(ts) = read_stat(&format!("{dir}/stat")) else {
                continue;
            };
            seen.busy |= matches!(ts.state, 'R' | 'D');
            seen.stopped |= matches!(ts.state, 'T' | 't');
            if ts.state == 'S'
                && let Ok(wchan) = std::fs::read_to_string(format!("{dir}/wchan"))
                && !matches!(wchan.trim(), "" | "0")
            {
                seen.waits.insert(wchan.trim().to_owned());
            }
            if let Some(d) = std::fs::read_to_string(format!("{dir}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().nth(1)?.parse().ok())
            {
                seen.delays.insert(tid, d);
            }
        }
    }
    seen
}

/// The process groups (other than `groups`) of the holders of the file locks a process of
/// `groups` is blocked on; `procs`: every process, by pid. `/proc/locks` lists each lock as
/// `N: CLASS MODE TYPE PID DEV:INODE START END`, and a process blocked on lock `N` right after
/// it as `N: -> CLASS ...`; a lock without a pid (`-1`: an open file description's lock) is
/// passed over.
fn lock_holders(procs: &[(String, Stat)], groups: &[u32]) -> Vec<u32> {
    let Ok(locks) = std::fs::read_to_string("/proc/locks") else {
        return Vec::new();
    };
    let group_of = |pid: &str| procs.iter().find(|(p, _)| p == pid).map(|(_, st)| st.pgrp);
    let mut holders: HashMap<&str, &str> = HashMap::new();
    let mut waited: Vec<&str> = Vec::new();
    for line in locks.lines() {
        let mut f = line.split_whitespace();
        let Some(n) = f.next() else { continue };
        let mut rest: Vec<&str> = f.collect();
        let blocked = rest.first() == Some(&"->");
        if blocked {
            rest.remove(0);
        }
        let Some(pid) = rest.get(3).copied().filter(|p| p.parse::<u32>().is_ok()) else {
            continue;
        };
        if !blocked {
            holders.insert(n, pid);
        } else if group_of(pid).is_some_and(|g| groups.contains(&g)) {
            waited.push(n);
        }
    }
    let mut out: Vec<u32> = waited
        .iter()
        .filter_map(|n| group_of(holders.get(n)?))
        .filter(|g| !groups.contains(g))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The fields of `/proc/.../stat` a look reads.
struct Stat {
    state: char,
    pgrp: u32,
    cpu: u64,
}

/// Reads a `/proc/PID/stat` or `/proc/PID/task/TID/stat` file (`None`: gone, or unreadable).
fn read_stat(path: &str) -> Option<Stat> {
    let text = std::fs::read_to_string(path).ok()?;
    // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    // stime ...": comm may hold spaces and parentheses, so parse from the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        pgrp: f.get(2)?.parse().ok()?,
        cpu: f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's own group, looked at: its fields read, its threads' delays found.
    #[test]
    fn a_look_reads_this_process() {
        // This thread's: the process's (`/proc/self/stat`) is its main thread's, which in
        // the test harness waits.
        let me = read_stat("/proc/thread-self/stat").expect("own stat");
        assert_eq!(me.state, 'R');
        let seen = look(&Watched::Groups(vec![me.pgrp]));
        assert!(seen.busy, "this thread runs");
        assert!(!seen.delays.is_empty());
        let own = look(&Watched::ThisProcess);
        assert!(own.busy, "this thread runs");
        assert!(own.delays.len() >= 2, "the harness's thread and this one");
    }

    /// A process group of a test's own (its leader spawned with `process_group(0)`), killed
    /// whole (SIGKILL, the `kill` utility: this file is also `xtask`'s, which has no libc)
    /// and its leader reaped when dropped: also when the test fails half-way. Before, a
    /// failing test left its `while :; do :; done` spinning for good at full CPU (user26 found
    /// two on the shared machine: `a_stopped_process_is_waited_for` failed when `quiet.sh`
    /// sent SIGCONT to every process of the worktrees it had paused, the stopped spinner
    /// included).
    struct Group(std::process::Child);

    impl Drop for Group {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.0.id())])
                .status();
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A spinning process of its own group.
    fn spinner() -> (Group, u32) {
        use std::os::unix::process::CommandExt as _;
        let child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .process_group(0)
            .spawn()
            .expect("spawn sh");
        let id = child.id();
        (Group(child), id)
    }

    /// A test that fails while its spinner runs leaves none behind: the spinner is gone (killed
    /// and reaped) once the failing thread has unwound.
    #[test]
    fn a_failing_test_leaves_no_spinner() {
        let failed = std::thread::spawn(|| {
            let (_spinning, id) = spinner();
            std::panic::panic_any(id)
        })
        .join();
        let id = failed
            .err()
            .and_then(|p| p.downcast::<u32>().ok())
            .expect("the thread failed with its spinner's pid");
        let state = read_stat(&format!("/proc/{id}/stat")).map(|st| st.state);
        assert_eq!(state, None, "the spinner {id} outlived its test");
    }

    /// A process that spins for ever is given up on once it could run for the limit, however
    /// long that takes on this machine (the test asserts the verdict, not a time).
    #[test]
    fn a_spinning_process_runs_out_its_limit() {
        let (spinning, id) = spinner();
        let mut w = Watch::new(&[id], Some(Duration::from_secs(1)));
        let verdict = loop {
            if let Err(h) = w.step() {
                break h;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        drop(spinning);
        assert_eq!(verdict, Hang::Ran(Duration::from_secs(1)));
    }

    /// A process blocked on a file lock is looked at with the lock's holder: while the holder
    /// spins, the waiter, asleep, is busy too.
    #[test]
    fn a_wait_for_a_file_lock_follows_its_holder() {
        use std::os::unix::process::CommandExt as _;
        let path = std::env::temp_dir().join(format!("progress-lock-{}", std::process::id()));
        std::fs::write(&path, b"").expect("lock file");
        // The `flock` utility (util-linux): this file is also `xtask`'s, which has no libc.
        let flock = |args: &[&str]| {
            Group(
                std::process::Command::new("flock")
                    .arg(&path)
                    .args(args)
                    .process_group(0)
                    .spawn()
                    .expect("spawn flock (util-linux)"),
            )
        };
        let holder = flock(&["sh", "-c", "while :; do :; done"]);
        let holder_id = holder.0.id();
        // Only once the holder holds the lock: the waiter must be the one blocked.
        let mut watch = Watch::this_process(Duration::from_secs(10));
        let held = |pid: u32| {
            std::fs::read_to_string("/proc/locks").is_ok_and(|l| {
                l.lines().any(|l| {
                    !l.contains("->") && l.split_whitespace().nth(4) == Some(&pid.to_string())
                })
            })
        };
        while !held(holder_id) {
            assert_eq!(watch.step(), Ok(()), "flock never took the lock");
            std::thread::sleep(Duration::from_millis(10));
        }
        let waiter = flock(&["true"]);
        let waiter_id = waiter.0.id();
        let every = || -> Vec<(String, Stat)> {
            std::fs::read_dir("/proc")
                .expect("/proc")
                .flatten()
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .filter_map(|pid| read_stat(&format!("/proc/{pid}/stat")).map(|st| (pid, st)))
                .collect()
        };
        let found = loop {
            let found = lock_holders(&every(), &[waiter_id]);
            if !found.is_empty() {
                break found;
            }
            assert_eq!(watch.step(), Ok(()), "the waiter never blocked on the lock");
            std::thread::sleep(Duration::from_millis(10));
        };
        let seen = look(&Watched::Groups(vec![waiter_id]));
        // The holder's group: `flock` and the shell it runs, which holds the lock too.
        drop((holder, waiter));
        let _ = std::fs::remove_file(&path);
        assert_eq!(found, vec![holder_id]);
        assert!(seen.busy, "the holder's group spins");
    }

    /// While it is stopped (SIGSTOP), the same process is never given up on: five looks, each
    /// of which would count a full second of a running one, count nothing.
    #[test]
    fn a_stopped_process_is_waited_for() {
        let (_spinning, id) = spinner();
        // The `kill` utility: this file is also `xtask`'s, which has no libc.
        let stopped = std::process::Command::new("kill")
            .args(["-STOP", &id.to_string()])
            .status()
            .expect("kill -STOP");
        assert!(stopped.success());
        let mut w = Watch::new(&[id], Some(Duration::from_secs(1)));
        let mut looks = 0;
        while looks < 5 {
            std::thread::sleep(LOOK);
            assert_eq!(w.step(), Ok(()));
            looks += 1;
        }
    }
}

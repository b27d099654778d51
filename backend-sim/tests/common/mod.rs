//! Scaffolding shared by the simulator's tests with real processes: agents (the test binary
//! re-executed as a child that obeys one-line commands on stdin and answers one line on
//! stdout), throwaway namespaces, and files handed between processes. Each test binary uses
//! the parts it needs.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use acl_notify_core::{Backend, BackendError, Error, RawStream};
use acl_notify_sim::{Sim, SimError};
use libtest_mimic::Failed;

// ---- the agent (child side) ----------------------------------------------------------------

/// The child's side: opens the machine its environment names, says `ok <pid>` (or `err <code>
/// <message>`), then answers each command line with `ok <text>` or `err <code> <message>`,
/// `run` doing the work. `streams[d]`: the stream the commands use on device `d`. One command
/// is the same for every agent: `dropsim` drops the `Sim` (the process stays; what it held
/// goes as at `aclFinalize`) and answers how long that took and how much of it the process
/// did not run (microseconds, [`not_running`]), after which every command answers 107017.
pub fn serve(run: impl Fn(&Sim, &mut [Option<RawStream>], &[&str]) -> Result<String, SimError>) {
    let sim = match Sim::from_env() {
        Ok(s) => s,
        Err(e) => {
            println!(
                "err {} {}",
                e.kind().code(),
                e.to_string().replace('\n', " ")
            );
            return;
        }
    };
    println!("ok {}", sim.bare_tgid());
    let mut streams: Vec<Option<RawStream>> = vec![None; sim.device_count() as usize];
    let mut sim = Some(sim);
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return };
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"dropsim") {
            let t = Instant::now();
            let lost = not_running(|| drop(sim.take()));
            println!("ok {} {}", t.elapsed().as_micros(), lost.as_micros());
            continue;
        }
        let Some(sim) = &sim else {
            println!("err 107017 the Sim was dropped");
            continue;
        };
        match run(sim, &mut streams, &words) {
            Ok(s) => println!("ok {s}"),
            Err(e) => println!(
                "err {} {}",
                e.kind().code(),
                e.to_string().replace('\n', " ")
            ),
        }
    }
}

/// Runs `work` and says how long the process did not run meanwhile ([`Ticker`]). The
/// cluster's client counts its bound in the time the process could run (etcd's
/// `RunDeadline`), so a test that checks such a bound takes this out of the time it measured.
pub fn not_running(work: impl FnOnce()) -> Duration {
    let ticker = Ticker::start();
    work();
    ticker.stop()
}

/// A thread that naps 10 ms at a time beside the caller's work and counts how long the
/// process did not run: stopped (SIGSTOP, e.g. by a script that pauses other processes for a
/// quiet benchmark window) or waiting for a CPU for long stretches. A nap that took over
/// [`JUMP`] more, the thread could not run for what it took beyond the nap. Shorter lateness
/// is a wake-up's ordinary delay on a busy machine (a millisecond or two, but a thousand naps
/// of it would take a second off a 3 s teardown), not counted.
pub struct Ticker {
    shared: std::sync::Arc<Ticks>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What a [`Ticker`]'s thread tells its owner.
struct Ticks {
    start: Instant,
    done: std::sync::atomic::AtomicBool,
    /// Microseconds not run, counted so far.
    lost: AtomicU64,
    /// When the thread last woke, in microseconds from `start`.
    last: AtomicU64,
}

const NAP: Duration = Duration::from_millis(10);

impl Ticker {
    /// Starts counting.
    pub fn start() -> Ticker {
        let shared = std::sync::Arc::new(Ticks {
            start: Instant::now(),
            done: false.into(),
            lost: AtomicU64::new(0),
            last: AtomicU64::new(0),
        });
        let t = shared.clone();
        let thread = std::thread::spawn(move || {
            let mut last = t.start;
            while !t.done.load(Ordering::Relaxed) {
                std::thread::sleep(NAP);
                let now = Instant::now();
                let late = now.saturating_duration_since(last).saturating_sub(NAP);
                if late > JUMP {
                    t.lost.fetch_add(late.as_micros() as u64, Ordering::Relaxed);
                }
                t.last
                    .store((now - t.start).as_micros() as u64, Ordering::Relaxed);
                last = now;
            }
        });
        Ticker {
            shared,
            thread: Some(thread),
        }
    }

    /// How long the process did not run since the start, so far: what the thread counted,
    /// and its current nap if that is already late by over [`JUMP`] (the process just
    /// resumed, and the thread has not run yet).
    pub fn lost(&self) -> Duration {
        let t = &self.shared;
        let last = t.start + Duration::from_micros(t.last.load(Ordering::Relaxed));
        let late = last.elapsed().saturating_sub(NAP);
        let counted = Duration::from_micros(t.lost.load(Ordering::Relaxed));
        if late > JUMP { counted + late } else { counted }
    }

    /// The time since the start that the process could run.
    pub fn ran(&self) -> Duration {
        self.shared.start.elapsed().saturating_sub(self.lost())
    }

    /// Stops counting: how long the process did not run since the start.
    pub fn stop(mut self) -> Duration {
        self.end();
        Duration::from_micros(self.shared.lost.load(Ordering::Relaxed))
    }

    fn end(&mut self) {
        self.shared.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.end();
    }
}

/// How much later than its nap a [`Ticker`]'s thread must wake for the time to count as
/// the process not running.
pub const JUMP: Duration = Duration::from_millis(50);

/// Word `i` of a command, parsed.
pub fn num<T: std::str::FromStr>(w: &[&str], i: usize) -> Result<T, SimError> {
    w.get(i)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| SimError::new(Error::ParamInvalid, "bad agent command"))
}

// ---- the parent side -----------------------------------------------------------------------

/// The next line of an agent's `lines`, waiting at most `patience`, of which a stretch of
/// more than a second between two looks (100 ms apart) counts one second: this process was
/// stopped meanwhile (SIGSTOP: a script that pauses the test and its agents for a quiet
/// benchmark window) or starved, and its agent with it, as a late look of
/// `tests/src/progress.rs` counts. Before, the wait was wall time, which such a pause ran out:
/// an agent's 3 s cluster call, which counts its own bound in the time it could run, answered
/// after the test's 30 s had passed across the pause.
fn next_line(lines: &Receiver<String>, patience: Duration) -> Result<String, RecvTimeoutError> {
    const LOOK: Duration = Duration::from_millis(100);
    let (mut waited, mut last) = (Duration::ZERO, Instant::now());
    loop {
        match lines.recv_timeout(LOOK) {
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                waited += now.duration_since(last).min(Duration::from_secs(1));
                last = now;
                if waited >= patience {
                    return Err(RecvTimeoutError::Timeout);
                }
            }
            r => return r,
        }
    }
}

/// A child agent; killed (SIGKILL) and reaped on drop.
pub struct Agent {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// Bound on any single answer.
    patience: Duration,
    pub pid: i32,
    /// What the test calls it (its `ACL_NOTIFY_SIM_LABEL`, where it has one).
    pub label: String,
}

impl Agent {
    /// Starts this test binary as an agent: `cmd` is [`Command`] for it with the agent's
    /// environment set; waits (at most `patience`) for it to open the machine. Panics if it
    /// does not ([`try_spawn`](Self::try_spawn) gives that as a value).
    pub fn spawn(cmd: Command, label: &str, patience: Duration) -> Agent {
        match Agent::try_spawn(cmd, label, patience) {
            Ok(a) => a,
            Err(e) => panic!("agent failed to open the namespace: {e}"),
        }
    }

    /// [`spawn`](Self::spawn), for tests where opening the machine may fail: `Err` with the
    /// agent's first line (`err <code> <message>`), or why there was none.
    pub fn try_spawn(mut cmd: Command, label: &str, patience: Duration) -> Result<Agent, String> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn agent");
        let stdin = child.stdin.take().expect("agent stdin");
        let stdout = child.stdout.take().expect("agent stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id() as i32;
        let mut a = Agent {
            child,
            stdin,
            lines: rx,
            patience,
            pid,
            label: label.to_owned(),
        };
        match next_line(&a.lines, patience) {
            Ok(hello) if hello == format!("ok {pid}") => Ok(a),
            Ok(other) => {
                a.kill();
                Err(other)
            }
            Err(_) => {
                a.kill();
                Err(format!(
                    "agent {pid} said nothing within {patience:?} (of the time this test could \
                     run)"
                ))
            }
        }
    }

    /// This test binary, to be started as an agent: `agent_var` set (the binary's `main`
    /// serves when it sees it).
    pub fn command(agent_var: &str) -> Command {
        let mut cmd = Command::new(std::env::current_exe().expect("test binary path"));
        cmd.env(agent_var, "1");
        cmd
    }

    /// The next answer: `Ok(text)` or `Err((code, message))`.
    pub fn answer(&mut self) -> Result<String, (i32, String)> {
        let line = next_line(&self.lines, self.patience).unwrap_or_else(|_| {
            panic!(
                "agent {} did not answer within {:?} (of the time this test could run)",
                self.pid, self.patience
            )
        });
        if let Some(rest) = line.strip_prefix("ok") {
            Ok(rest.trim().to_owned())
        } else if let Some(rest) = line.strip_prefix("err ") {
            let (code, msg) = rest.split_once(' ').unwrap_or((rest, ""));
            Err((code.parse().unwrap_or(-1), msg.to_owned()))
        } else {
            panic!("agent {} said {line:?}", self.pid)
        }
    }

    /// Sends a command without waiting for its answer.
    pub fn send(&mut self, c: &str) {
        writeln!(self.stdin, "{c}").expect("write to agent");
        self.stdin.flush().expect("flush agent stdin");
    }

    /// Sends a command and waits for its answer.
    pub fn cmd(&mut self, c: &str) -> Result<String, (i32, String)> {
        self.send(c);
        self.answer()
    }

    /// Sends a command; its answer's text, or `Err("<code> <message>")`, also when the agent
    /// gave no answer within its patience or is gone (never a panic).
    pub fn ask(&mut self, c: &str) -> Result<String, String> {
        writeln!(self.stdin, "{c}").map_err(|e| format!("agent {} gone: {e}", self.pid))?;
        let line = next_line(&self.lines, self.patience)
            .map_err(|_| format!("agent {} gave no answer to {c:?}", self.pid))?;
        match line.strip_prefix("ok") {
            Some(rest) => Ok(rest.trim().to_owned()),
            None => Err(line.strip_prefix("err ").unwrap_or(&line).to_owned()),
        }
    }

    /// [`ask`](Self::ask), a failure of the test on an error answer.
    pub fn try_ok(&mut self, c: &str) -> Result<String, Failed> {
        self.ask(c)
            .map_err(|e| format!("{c:?} on agent {}: {e}", self.pid).into())
    }

    /// A command that must succeed.
    pub fn ok(&mut self, c: &str) -> String {
        match self.cmd(c) {
            Ok(s) => s,
            Err(e) => panic!("agent command {c:?} failed: {e:?}"),
        }
    }

    /// Waits for it to end by itself (after a command that ends it).
    pub fn wait(&mut self) {
        let _ = self.child.wait();
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A namespace of its own (`<prefix>-<tag>-<pid>-<n>`), removed on drop.
pub struct Ns(pub String);

impl Ns {
    pub fn new(prefix: &str, tag: &str) -> Ns {
        static N: AtomicU32 = AtomicU32::new(0);
        let ns = format!(
            "{prefix}-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let _ = Sim::remove_namespace(&ns);
        Ns(ns)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Sim::remove_namespace(&self.0);
    }
}

/// `Err(what())` unless `cond`.
pub fn check(cond: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if cond { Ok(()) } else { Err(what().into()) }
}

/// Polls `f` every 5 ms until it holds, at most `limit` of the time this process could run
/// ([`Ticker`]), not of wall time: a test paused (a quiet benchmark window stops it and its
/// agents) or starved while `f` asked found the wall-time limit gone on the resume, though
/// what it waited for (a lease's expiry, in etcd, which is not paused) had come meanwhile.
pub fn poll_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Result<(), Failed> {
    let ticker = Ticker::start();
    while !f() {
        if ticker.ran() > limit {
            return Err(format!(
                "timed out waiting for {what} ({:.1} s of running time; the process did not \
                 run for another {:.1} s)",
                ticker.ran().as_secs_f64(),
                ticker.lost().as_secs_f64()
            )
            .into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

// ---- files handed between processes --------------------------------------------------------

/// Waits (at most 30 s) for the file `name` in `dir` that another process writes with
/// [`put`], and returns its value.
pub fn take(dir: &Path, name: &str) -> String {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(s) = std::fs::read_to_string(dir.join(name))
            && s.ends_with('\n')
        {
            return s.trim().to_owned();
        }
        assert!(Instant::now() < end, "timed out waiting for {name}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Writes `value` as the file `name` in `dir`, whole or not at all (for [`take`]).
pub fn put(dir: &Path, name: &str, value: impl std::fmt::Display) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, format!("{value}\n")).expect("write");
    std::fs::rename(&tmp, dir.join(name)).expect("rename");
}

//! Cross-process latency check: two real processes, each owning one notify and importing the
//! other's (with PID whitelists, as in SPEC §7). A records B's notify and waits on its own;
//! B waits on its own and records A's. Prints the median round trip in µs.
//!
//! Run: `cargo run --release -p acl-notify-sim --example pingpong [iterations]`.
//!
//! Two variants are measured back to back:
//!
//! - `host`: each side records on a stream (the record is a stream task, as the API requires)
//!   and waits with a host-side wait (`HostOps::host_wait`) on its own notify;
//! - `stream`: each side enqueues the wait on a stream too and synchronizes; this adds the
//!   stream engine's enqueue→worker and completion→synchronize hand-offs on both sides.
//!
//! Key exchange uses the child's stdin/stdout; every wait has a timeout and the child is
//! killed if the parent fails.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use acl_notify_core::{
    Backend, CreateFlags, ExportFlags, HostOps, ImportFlags, NotifyResources, RawNotify, RawStream,
    StreamOps, SyncWait, Timeout,
};
use acl_notify_sim::{Sim, SimError};

const ROLE: &str = "PINGPONG_ROLE";
const WAIT: Duration = Duration::from_secs(10);

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    if let Err(e) = run() {
        eprintln!("pingpong: {e}");
        std::process::exit(1);
    }
}

fn run() -> Res<()> {
    let iters: usize = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(20_000);
    if std::env::var_os(ROLE).is_some() {
        return child(iters);
    }
    parent(iters)
}

fn open(ns: &str) -> Result<Sim, SimError> {
    Sim::builder().devices(2).namespace(ns).open()
}

/// Kills the child unless it exits by itself.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        if !matches!(self.0.try_wait(), Ok(Some(_))) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// One side's notifies and stream.
struct Side {
    sim: Sim,
    own: RawNotify,
    peer: RawNotify,
    stream: RawStream,
}

impl Side {
    fn record_peer(&self) -> Result<(), SimError> {
        self.sim.record(self.peer, self.stream)
    }
    fn wait_own_host(&self) -> Result<(), SimError> {
        self.sim.host_wait(self.own, WAIT)
    }
    fn wait_own_stream(&self) -> Result<(), SimError> {
        self.sim
            .wait_and_reset(self.own, self.stream, Timeout::from_c(10))?;
        self.sim.synchronize(self.stream, SyncWait::AtMost(WAIT))
    }
}

fn parent(iters: usize) -> Res<()> {
    let ns = format!("pingpong-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let result = parent_in(&ns, iters);
    let _ = Sim::remove_namespace(&ns);
    result
}

fn parent_in(ns: &str, iters: usize) -> Res<()> {
    let sim = open(ns)?;
    let own = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(own, ExportFlags::empty())?;
    let mut kid = Kid(Command::new(std::env::current_exe()?)
        .arg(iters.to_string())
        .env(ROLE, "b")
        .env("PINGPONG_NS", ns)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?);
    sim.set_import_pids(own, &[kid.0.id() as i32])?;
    let mut to_kid = kid.0.stdin.take().ok_or("no child stdin")?;
    let mut from_kid = BufReader::new(kid.0.stdout.take().ok_or("no child stdout")?);
    writeln!(to_kid, "{key}")?;
    to_kid.flush()?;
    let mut line = String::new();
    from_kid.read_line(&mut line)?;
    let peer_key = line.trim().to_owned();
    let peer = sim.import_by_key(0, &peer_key, ImportFlags::ENABLE_PEER_ACCESS)?;
    let stream = sim.create_stream(0)?;
    let side = Side {
        sim: sim.clone(),
        own,
        peer,
        stream,
    };
    let mut report = Vec::new();
    for (name, stream_wait) in [("host", false), ("stream", true)] {
        let mut rtt = Vec::with_capacity(iters);
        for i in 0..iters + iters / 10 {
            let t0 = Instant::now();
            side.record_peer()?;
            if stream_wait {
                side.wait_own_stream()?;
            } else {
                side.wait_own_host()?;
            }
            if i >= iters / 10 {
                rtt.push(t0.elapsed());
            }
        }
        rtt.sort();
        let pct = |p: f64| rtt[((rtt.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
        report.push(format!(
            "{name:>6}: median {:.1} µs, p10 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs ({} round trips)",
            pct(0.5),
            pct(0.1),
            pct(0.9),
            pct(0.99),
            rtt.len()
        ));
    }
    sim.synchronize(stream, SyncWait::AtMost(WAIT))?;
    let status = kid.0.wait()?;
    if !status.success() {
        return Err(format!("child failed: {status}").into());
    }
    println!(
        "pingpong between two processes ({}, {} ids/device), record→wait→record→wait:",
        sim.soc(),
        sim.soc().max_notifies()
    );
    for r in report {
        println!("{r}");
    }
    Ok(())
}

fn child(iters: usize) -> Res<()> {
    let ns = std::env::var("PINGPONG_NS")?;
    let sim = open(&ns)?;
    let own = sim.create_notify(1, CreateFlags::empty())?;
    let key = sim.export_key(own, ExportFlags::empty())?;
    // The parent is the only importer (its PID is our parent's).
    // SAFETY: getppid(2) has no preconditions and cannot fail.
    let ppid = unsafe { libc::getppid() };
    sim.set_import_pids(own, &[ppid])?;
    let stdin = std::io::stdin();
    let mut line = String::new();
    stdin.lock().read_line(&mut line)?;
    let peer = sim.import_by_key(1, line.trim(), ImportFlags::ENABLE_PEER_ACCESS)?;
    println!("{key}");
    std::io::stdout().flush()?;
    let stream = sim.create_stream(1)?;
    let side = Side {
        sim: sim.clone(),
        own,
        peer,
        stream,
    };
    for stream_wait in [false, true] {
        for _ in 0..iters + iters / 10 {
            if stream_wait {
                side.wait_own_stream()?;
            } else {
                side.wait_own_host()?;
            }
            side.record_peer()?;
        }
    }
    sim.synchronize(stream, SyncWait::AtMost(WAIT))?;
    Ok(())
}

//! Our cases, on the simulator through the core's traits: round trips between two streams
//! (two processes each owning one notify and importing the other's, or one process), the wake
//! of an idle waiting stream, lossless handoff throughput, and the CPU an idle waiting stream
//! burns.
//!
//! Streams are fed in chunks of [`CHUNK`] round trips, each chunk followed by a host function
//! that bumps a counter; the feeding thread stays at most two chunks ahead of the stream, so
//! queues stay short and the stream never runs dry. Every wait is `Timeout::Forever` (CANN's
//! default); a lost record therefore shows up as a synchronize that does not finish within its
//! bounded deadline, which is reported as an error, never as a figure.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use acl_notify_core::{
    CreateFlags, ExportFlags, HostCall, HostOps, ImportFlags, NotifyResources, RawNotify,
    RawStream, Soc, StreamDestroy, StreamOps, SyncWait, Timeout,
};
use acl_notify_sim::{Sim, StreamCpus};

use crate::child::{Child, RoleArgs, Watchdog, kill_pid};
use crate::pingpong::{Line, wait_ready};
use crate::sys::{
    self, Place, Scope, Shm, ShmSafe, futex_wait, futex_wake, now_ns, process_cpu_ns,
};
use crate::wake::{IDLE_SLEEP, median, wait_for};

/// Round trips (or handoffs) enqueued between two progress markers.
pub const CHUNK: u64 = 64;

/// Bound on a synchronize at the end of a sample.
pub(crate) const SYNC_LIMIT: Duration = Duration::from_secs(30);

/// Bound on a whole cross-process sample.
const SAMPLE_LIMIT: Duration = Duration::from_secs(60);

/// The device every case runs on.
pub(crate) const DEV: u32 = 0;

pub(crate) fn e2s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// Opens the simulator on namespace `ns`, the kernel alone placing the stream workers.
pub fn open(ns: &str, soc: Soc) -> Result<Sim, String> {
    open_placed(ns, soc, Workers::Placed(Place::Kernel))
}

/// Where a case's stream workers run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workers {
    /// Where the simulator's defaults put them (no setting: `StreamCpus::Adaptive`).
    Default,
    /// As a baseline's threads: `Place::Kernel` leaves them to the kernel alone
    /// (`StreamCpus::Scheduler`, the `kernel-placed` info rows), `Place::Spread` gives each a
    /// CPU of its own.
    Placed(Place),
}

impl Workers {
    /// The CPU of a process's streams in the cross-process case (`i`: 0 for A, 1 for B).
    fn cpu(self, i: usize) -> Option<usize> {
        match self {
            Workers::Default => None,
            Workers::Placed(p) => p.cpu(i),
        }
    }
}

/// Opens the simulator on namespace `ns`, its stream workers placed by `workers` (placed
/// ones: the `i`-th stream this `Sim` creates on the `i`-th CPU in turn, as [`Place::cpu`]
/// places a baseline's threads).
pub fn open_placed(ns: &str, soc: Soc, workers: Workers) -> Result<Sim, String> {
    let place = match workers {
        Workers::Default => return open_default(ns, soc),
        Workers::Placed(p) => p,
    };
    place.usable()?;
    open_with(
        ns,
        soc,
        match place {
            Place::Kernel => StreamCpus::Scheduler,
            Place::Spread => StreamCpus::Spread,
        },
    )
}

fn open_with(ns: &str, soc: Soc, cpus: StreamCpus) -> Result<Sim, String> {
    Sim::builder()
        .soc(soc)
        .devices(2)
        .namespace(ns)
        .stream_cpus(cpus)
        .open()
        .map_err(|e| format!("Sim::open({ns}): {e}"))
}

/// Opens the simulator on namespace `ns` with the settings a user gets without any variable
/// (stream placement, spinning: the simulator's defaults).
pub fn open_default(ns: &str, soc: Soc) -> Result<Sim, String> {
    Sim::builder()
        .soc(soc)
        .devices(2)
        .namespace(ns)
        .open()
        .map_err(|e| format!("Sim::open({ns}): {e}"))
}

/// A process's streams all on `cpu` (or placed by the kernel alone).
fn on_cpu(cpu: Option<usize>) -> StreamCpus {
    cpu.map_or(StreamCpus::Scheduler, |c| StreamCpus::List(vec![c]))
}

/// Checks that the simulator can do what the cases need (open, create a notify and a stream,
/// record, consume); `Err` says why not.
pub fn probe(ns: &str) -> Result<(), String> {
    let sim = open(ns, Soc::Ascend910B)?;
    let n = sim
        .create_notify(DEV, CreateFlags::empty())
        .map_err(|e| format!("create_notify: {e}"))?;
    let s = sim
        .create_stream(DEV)
        .map_err(|e| format!("create_stream: {e}"))?;
    let r = (|| {
        sim.record(n, s).map_err(e2s)?;
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(5)))
            .map_err(e2s)?;
        if !sim.try_consume(n).map_err(e2s)? {
            return Err("a synchronized record left the flag clear".to_string());
        }
        Ok(())
    })();
    let _ = sim.destroy_stream(s, StreamDestroy::Discard);
    let _ = sim.destroy_notify(n);
    r
}

/// A counter bumped by a host function on a stream (progress marker), with a futex to sleep
/// on. Leaked on purpose: a stream may still hold a pointer to it after an error.
#[derive(Debug, Default)]
struct Marker {
    n: AtomicU32,
}

unsafe extern "C" fn bump_marker(arg: *mut c_void) {
    // SAFETY: `arg` is a leaked (`'static`) `Marker`, see `Marker::leak`.
    let m = unsafe { &*arg.cast::<Marker>() };
    m.n.fetch_add(1, Ordering::Release);
    futex_wake(&m.n, i32::MAX, Scope::Thread);
}

impl Marker {
    fn leak() -> &'static Marker {
        Box::leak(Box::default())
    }

    fn call(&'static self) -> HostCall {
        // SAFETY: `bump_marker` only touches the `'static` marker through atomics, from any
        // thread, any number of times.
        unsafe { HostCall::new(bump_marker, (self as *const Marker).cast_mut().cast()) }
    }

    /// Waits (bounded) until the counter reaches `want`.
    fn wait_at_least(&self, want: u32) -> Result<(), String> {
        let deadline = now_ns() + SYNC_LIMIT.as_nanos() as u64;
        loop {
            let x = self.n.load(Ordering::Acquire);
            if x >= want {
                return Ok(());
            }
            if now_ns() > deadline {
                return Err(format!(
                    "stream made no progress for {SYNC_LIMIT:?} (marker {x})"
                ));
            }
            futex_wait(&self.n, x, Scope::Thread, Some(Duration::from_millis(100)));
        }
    }
}

/// A timestamp written by a host function.
#[derive(Debug, Default)]
struct Stamp {
    t: AtomicU64,
    seq: AtomicU32,
    /// For a gated stamp: the host function first waits for `gate` to reach `seq + 1`.
    gate: AtomicU32,
}

unsafe extern "C" fn stamp_now(arg: *mut c_void) {
    // SAFETY: `arg` is a leaked (`'static`) `Stamp`.
    let s = unsafe { &*arg.cast::<Stamp>() };
    s.t.store(now_ns(), Ordering::Release);
    s.seq.fetch_add(1, Ordering::Release);
    futex_wake(&s.seq, i32::MAX, Scope::Thread);
}

unsafe extern "C" fn gated_stamp(arg: *mut c_void) {
    // SAFETY: `arg` is a leaked (`'static`) `Stamp`.
    let s = unsafe { &*arg.cast::<Stamp>() };
    let want = s.seq.load(Ordering::Acquire) + 1;
    // Spin (bounded: 1 s) until the host has enqueued the task behind us.
    let deadline = now_ns() + 1_000_000_000;
    while s.gate.load(Ordering::Acquire) < want && now_ns() < deadline {
        std::hint::spin_loop();
    }
    s.t.store(now_ns(), Ordering::Release);
    s.seq.fetch_add(1, Ordering::Release);
}

impl Stamp {
    fn leak() -> &'static Stamp {
        Box::leak(Box::default())
    }
    fn call(&'static self, f: unsafe extern "C" fn(*mut c_void)) -> HostCall {
        // SAFETY: both stamp functions touch the `'static` stamp only through atomics.
        unsafe { HostCall::new(f, (self as *const Stamp).cast_mut().cast()) }
    }
}

/// Holds a stream at a host function until the host opens it: how a prefilled batch is queued
/// in full before it runs. (A notify recorded from a third stream would do the same, but that
/// stream's worker, placed on the CPU of one of the two under test, would then take turns
/// with it: a stream worker spins for more work after its last task.)
#[derive(Default)]
struct Gate {
    /// 1: open (consumed by the held stream).
    open: AtomicU32,
    /// Set when the gate opened itself after [`GATE_LIMIT`] (the batch is then void).
    forced: AtomicU32,
}

/// Longest a gate holds its stream: if the host cannot queue a whole batch (a queue smaller
/// than a batch makes it wait for room behind the gate), the gate opens itself.
const GATE_LIMIT: Duration = Duration::from_secs(10);

unsafe extern "C" fn gate_wait(arg: *mut c_void) {
    // SAFETY: `arg` is a leaked (`'static`) `Gate`.
    let g = unsafe { &*arg.cast::<Gate>() };
    let deadline = now_ns() + GATE_LIMIT.as_nanos() as u64;
    while g.open.swap(0, Ordering::AcqRel) != 1 {
        let now = now_ns();
        if now >= deadline {
            g.forced.store(1, Ordering::Release);
            return;
        }
        let left = Duration::from_nanos(deadline - now).min(Duration::from_millis(100));
        futex_wait(&g.open, 0, Scope::Thread, Some(left));
    }
}

impl Gate {
    fn leak() -> &'static Gate {
        Box::leak(Box::default())
    }

    /// The host function that holds its stream (closes the gate first).
    fn call(&'static self) -> HostCall {
        self.open.store(0, Ordering::Release);
        // SAFETY: `gate_wait` touches the `'static` gate only through atomics and futex calls.
        unsafe { HostCall::new(gate_wait, (self as *const Gate).cast_mut().cast()) }
    }

    /// Lets the held stream go.
    fn open(&self) {
        self.open.store(1, Ordering::Release);
        futex_wake(&self.open, 1, Scope::Thread);
    }

    /// Whether the last hold ended by itself (and forgets it).
    fn forced(&self) -> bool {
        self.forced.swap(0, Ordering::AcqRel) == 1
    }
}

/// The error of a batch whose gate opened by itself.
const GATE_FORCED: &str = "a stream queue is smaller than one batch; the gate opened itself";

/// What an [`InProc`] sample runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loop {
    /// Two streams bounce two notifies; each batch is queued in full before it runs, so
    /// only the streams are busy while it is timed.
    Prefilled,
    /// Two streams bounce two notifies while the host thread keeps feeding them (at most
    /// two chunks ahead), so the host competes with them for the CPUs.
    Pair,
    /// One stream records and waits on one notify (engine cost, no handoff).
    OneStream,
    /// `OneStream` queued in full before it runs, like `Prefilled`: the engine's own cost.
    OneStreamPrefilled,
}

/// Two streams of one process bouncing two notifies.
pub struct InProc {
    sim: Sim,
    /// The two streams bouncing.
    s: [RawStream; 2],
    /// The two notifies bounced.
    n: [RawNotify; 2],
    /// Holds stream 0 until a batch is queued.
    gate: &'static Gate,
    marker: &'static Marker,
    t0: &'static Stamp,
    t1: &'static Stamp,
}

/// Round trips per prefilled batch: with the warm-up and the markers, each stream holds about
/// 2 × 272 + 3 tasks, well inside the simulator's default queue of 1,024.
pub const BATCH: u64 = 256;
/// Untimed round trips at the start of each batch (wake both workers up).
const BATCH_WARMUP: u64 = 16;

impl InProc {
    /// Sets up streams and notifies on `ns`.
    pub fn new(ns: &str, workers: Workers) -> Result<InProc, String> {
        let sim = open_placed(ns, Soc::Ascend910B, workers)?;
        let mut s = [RawStream(0); 2];
        for x in &mut s {
            *x = sim.create_stream(DEV).map_err(e2s)?;
        }
        let mut n = [RawNotify(0); 2];
        for x in &mut n {
            *x = sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?;
        }
        Ok(InProc {
            sim,
            s,
            n,
            gate: Gate::leak(),
            marker: Marker::leak(),
            t0: Stamp::leak(),
            t1: Stamp::leak(),
        })
    }

    /// One prefilled batch: both streams get their whole batch while stream 0 is held by the
    /// gate, then the gate opens and the host thread sleeps; the time runs between two host
    /// functions on stream 0, after the warm-up and at the end. Returns (ns, round trips).
    fn prefilled_batch(&self, one_stream: bool) -> Result<(u64, u64), String> {
        let (sim, s, n) = (&self.sim, self.s, self.n);
        let k = self.t1.seq.load(Ordering::Acquire);
        sim.launch_host_func(s[0], self.gate.call()).map_err(e2s)?;
        for i in 0..BATCH_WARMUP + BATCH {
            if i == BATCH_WARMUP {
                sim.launch_host_func(s[0], self.t0.call(stamp_now))
                    .map_err(e2s)?;
            }
            // One stream: it records the notify it waits on next, so no thread ever waits
            // for another.
            sim.record(n[usize::from(!one_stream)], s[0]).map_err(e2s)?;
            sim.wait_and_reset(n[0], s[0], Timeout::Forever)
                .map_err(e2s)?;
        }
        sim.launch_host_func(s[0], self.t1.call(stamp_now))
            .map_err(e2s)?;
        for _ in 0..(BATCH_WARMUP + BATCH) * u64::from(!one_stream) {
            sim.wait_and_reset(n[1], s[1], Timeout::Forever)
                .map_err(e2s)?;
            sim.record(n[0], s[1]).map_err(e2s)?;
        }
        self.gate.open();
        wait_for(&self.t1.seq, k + 1, Scope::Thread)?;
        if self.gate.forced() {
            return Err(GATE_FORCED.into());
        }
        let dt = self
            .t1
            .t
            .load(Ordering::Acquire)
            .saturating_sub(self.t0.t.load(Ordering::Acquire));
        Ok((dt, BATCH))
    }

    fn chunk(&self) -> Result<(), String> {
        let (sim, s, n) = (&self.sim, self.s, self.n);
        for _ in 0..CHUNK {
            sim.record(n[1], s[0]).map_err(e2s)?;
            sim.wait_and_reset(n[0], s[0], Timeout::Forever)
                .map_err(e2s)?;
            sim.wait_and_reset(n[1], s[1], Timeout::Forever)
                .map_err(e2s)?;
            sim.record(n[0], s[1]).map_err(e2s)?;
        }
        sim.launch_host_func(s[0], self.marker.call())
            .map_err(e2s)?;
        Ok(())
    }

    /// One stream records a notify and waits on it, `CHUNK` times: the flag is always set
    /// when the wait starts, so no thread ever waits for another — what is left is the cost
    /// of two tasks through the stream engine and the table.
    fn self_chunk(&self) -> Result<(), String> {
        let (sim, s, n) = (&self.sim, self.s[0], self.n[0]);
        for _ in 0..CHUNK {
            sim.record(n, s).map_err(e2s)?;
            sim.wait_and_reset(n, s, Timeout::Forever).map_err(e2s)?;
        }
        sim.launch_host_func(s, self.marker.call()).map_err(e2s)?;
        Ok(())
    }

    /// One sample: ns per round trip over about `iters` round trips (`Loop::Pair`), or per
    /// record+wait pair on one stream (`Loop::OneStream`).
    pub fn sample(&mut self, iters: u64, how: Loop) -> Result<f64, String> {
        if matches!(how, Loop::Prefilled | Loop::OneStreamPrefilled) {
            let r = (|| {
                let (mut dt, mut n) = (0, 0);
                for _ in 0..iters.div_ceil(BATCH).max(1) {
                    let (d, k) = self.prefilled_batch(how == Loop::OneStreamPrefilled)?;
                    dt += d;
                    n += k;
                }
                for s in self.s {
                    self.sim
                        .synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
                        .map_err(e2s)?;
                }
                Ok(dt as f64 / n as f64)
            })();
            if r.is_err() {
                self.reset_streams();
            }
            return r;
        }
        let chunks = iters.div_ceil(CHUNK).max(1);
        let base = self.marker.n.load(Ordering::Acquire);
        let chunk = || match how {
            Loop::OneStream => self.self_chunk(),
            _ => self.chunk(),
        };
        let r = (|| {
            // Warm-up chunk, untimed: both workers awake and spinning.
            chunk()?;
            self.marker.wait_at_least(base + 1)?;
            let t0 = now_ns();
            for k in 0..chunks as u32 {
                if k >= 2 {
                    self.marker.wait_at_least(base + 1 + k - 1)?;
                }
                chunk()?;
            }
            self.marker.wait_at_least(base + 1 + chunks as u32)?;
            let dt = now_ns() - t0;
            for s in self.s {
                self.sim
                    .synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
                    .map_err(e2s)?;
            }
            Ok(dt as f64 / (chunks * CHUNK) as f64)
        })();
        if r.is_err() {
            self.reset_streams();
        }
        r
    }

    fn reset_streams(&mut self) {
        for s in &mut self.s {
            let _ = self.sim.destroy_stream(*s, StreamDestroy::Discard);
            if let Ok(n) = self.sim.create_stream(DEV) {
                *s = n;
            }
        }
        for n in self.n {
            let _ = self.sim.try_consume(n);
        }
    }
}

impl Drop for InProc {
    fn drop(&mut self) {
        // A batch that failed half-way may have left stream 0 held.
        self.gate.open();
        for s in self.s {
            let _ = self.sim.destroy_stream(s, StreamDestroy::Discard);
        }
        for n in self.n {
            let _ = self.sim.destroy_notify(n);
        }
    }
}

/// The shared page between the two processes of the cross-process case.
#[repr(C)]
struct XShared {
    /// Child state: 1 ready, ≥ 2 failed.
    ready: Line,
    /// 1 once `key[0]` (the parent's) is written.
    key_a_set: Line,
    /// Prefilled batches the child has queued in full.
    batch_ready: Line,
    key: [[AtomicU32; 17]; 2],
}

// SAFETY: atomics only; all-zero is valid.
unsafe impl ShmSafe for XShared {}

pub(crate) fn put_key(slot: &[AtomicU32; 17], key: &str) -> Result<(), String> {
    let b = key.as_bytes();
    if b.len() > 64 {
        return Err(format!("key longer than 64 bytes: {key}"));
    }
    let mut buf = [0u8; 68];
    buf[..b.len()].copy_from_slice(b);
    for (i, w) in slot.iter().enumerate().take(16) {
        let mut x = [0u8; 4];
        x.copy_from_slice(&buf[i * 4..i * 4 + 4]);
        w.store(u32::from_ne_bytes(x), Ordering::Relaxed);
    }
    slot[16].store(b.len() as u32, Ordering::Release);
    Ok(())
}

pub(crate) fn get_key(slot: &[AtomicU32; 17]) -> Result<String, String> {
    let len = slot[16].load(Ordering::Acquire) as usize;
    if len > 64 {
        return Err("bad key length in shared page".into());
    }
    let mut buf = Vec::with_capacity(64);
    for w in slot.iter().take(16) {
        buf.extend_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|_| "key is not UTF-8".to_string())
}

fn signal(line: &Line, v: u32) {
    line.v.store(v, Ordering::Release);
    futex_wake(&line.v, i32::MAX, Scope::Process);
}

/// Waits (bounded) until a shared counter reaches `want`.
pub(crate) fn wait_line(line: &Line, want: u32) -> Result<(), String> {
    let deadline = now_ns() + SYNC_LIMIT.as_nanos() as u64;
    loop {
        let x = line.v.load(Ordering::Acquire);
        if x >= want {
            return Ok(());
        }
        if now_ns() > deadline {
            return Err(format!(
                "peer made no progress for {SYNC_LIMIT:?} ({x} < {want})"
            ));
        }
        futex_wait(&line.v, x, Scope::Process, Some(Duration::from_millis(100)));
    }
}

/// How the streams of a round-trip case are fed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feed {
    /// A whole batch is queued while the first stream is held by a gate; the hosts sleep
    /// while it runs.
    Prefilled,
    /// The hosts keep feeding chunks while the streams run (at most two chunks ahead).
    Concurrent,
}

impl Feed {
    fn name(self) -> &'static str {
        match self {
            Feed::Prefilled => "prefilled",
            Feed::Concurrent => "concurrent",
        }
    }
}

/// One cross-process sample: this process (A) and a child (B) each own a notify and import
/// the other's; A records B's then waits on its own, B the reverse. ns per round trip.
pub fn xproc_sample(ns: &str, iters: u64, feed: Feed, workers: Workers) -> Result<f64, String> {
    let rounds = match feed {
        Feed::Prefilled => iters.div_ceil(BATCH).max(1),
        Feed::Concurrent => iters.div_ceil(CHUNK).max(1),
    };
    let sim = match workers {
        Workers::Default => open_default(ns, Soc::Ascend910B)?,
        Workers::Placed(place) => {
            place.usable()?;
            open_with(ns, Soc::Ascend910B, on_cpu(place.cpu(0)))?
        }
    };
    let shm = Shm::create("acl-notify-bench-xproc", 4096)?;
    sys::inheritable(shm.fd()).map_err(e2s)?;
    let sh: &XShared = shm.get();
    let mut held = Vec::new();
    let mut streams = Vec::new();
    let gate = Gate::leak();
    let r = (|| {
        let na = sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?;
        held.push(na);
        let key_a = sim.export_key(na, ExportFlags::empty()).map_err(e2s)?;
        let mut args = vec![
            "--ns".into(),
            ns.into(),
            "--shm".into(),
            shm.fd().to_string(),
            "--rounds".into(),
            rounds.to_string(),
            "--feed".into(),
            feed.name().into(),
        ];
        if let Some(c) = workers.cpu(1) {
            args.extend(["--cpu".into(), c.to_string()]);
        }
        if workers == Workers::Default {
            args.extend(["--workers".into(), "default".into()]);
        }
        let mut child = Child::spawn("notify-peer", &args, &[])?;
        let pid = child.pid();
        let wd = Watchdog::start(SAMPLE_LIMIT, move || kill_pid(pid));
        sim.set_import_pids(na, &[pid]).map_err(e2s)?;
        put_key(&sh.key[0], key_a.as_str())?;
        signal(&sh.key_a_set, 1);
        wait_ready(&sh.ready, &mut child)?;
        let key_b = get_key(&sh.key[1])?;
        let ib = sim
            .import_by_key(DEV, &key_b, ImportFlags::empty())
            .map_err(e2s)?;
        held.push(ib);
        let s = sim.create_stream(DEV).map_err(e2s)?;
        streams.push(s);
        let (dt, trips) = match feed {
            Feed::Prefilled => {
                let (t0, t1) = (Stamp::leak(), Stamp::leak());
                let (mut dt, mut trips) = (0u64, 0u64);
                for k in 0..rounds as u32 {
                    let seen = t1.seq.load(Ordering::Acquire);
                    sim.launch_host_func(s, gate.call()).map_err(e2s)?;
                    for i in 0..BATCH_WARMUP + BATCH {
                        if i == BATCH_WARMUP {
                            sim.launch_host_func(s, t0.call(stamp_now)).map_err(e2s)?;
                        }
                        sim.record(ib, s).map_err(e2s)?;
                        sim.wait_and_reset(na, s, Timeout::Forever).map_err(e2s)?;
                    }
                    sim.launch_host_func(s, t1.call(stamp_now)).map_err(e2s)?;
                    // B has queued its whole batch too: open the gate and sleep.
                    let ready = wait_line(&sh.batch_ready, k + 1);
                    gate.open();
                    ready?;
                    wait_for(&t1.seq, seen + 1, Scope::Thread)?;
                    if gate.forced() {
                        return Err(GATE_FORCED.into());
                    }
                    dt +=
                        t1.t.load(Ordering::Acquire)
                            .saturating_sub(t0.t.load(Ordering::Acquire));
                    trips += BATCH;
                }
                (dt, trips)
            }
            Feed::Concurrent => {
                let marker = Marker::leak();
                let chunk = || -> Result<(), String> {
                    for _ in 0..CHUNK {
                        sim.record(ib, s).map_err(e2s)?;
                        sim.wait_and_reset(na, s, Timeout::Forever).map_err(e2s)?;
                    }
                    sim.launch_host_func(s, marker.call()).map_err(e2s)
                };
                // Warm-up chunk, untimed.
                chunk()?;
                marker.wait_at_least(1)?;
                let t0 = now_ns();
                for k in 0..rounds as u32 - 1 {
                    if k >= 2 {
                        marker.wait_at_least(k)?;
                    }
                    chunk()?;
                }
                marker.wait_at_least(rounds as u32)?;
                (now_ns() - t0, (rounds - 1).max(1) * CHUNK)
            }
        };
        sim.synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
            .map_err(e2s)?;
        let fired = wd.fired();
        drop(wd);
        if fired {
            return Err("cross-process sample overran; child killed".into());
        }
        child.finish(Duration::from_secs(10))?;
        Ok(dt as f64 / trips as f64)
    })();
    // A batch that failed half-way may have left the stream held.
    gate.open();
    for s in streams {
        let _ = sim.destroy_stream(s, StreamDestroy::Discard);
    }
    for n in held.into_iter().rev() {
        let _ = sim.destroy_notify(n);
    }
    r
}

/// The child role `notify-peer` (process B of the cross-process case).
pub fn peer_main(args: &RoleArgs) -> Result<String, String> {
    let ns = args.get("ns")?;
    let rounds: u32 = args.num("rounds")?;
    let feed = match args.get("feed")? {
        "prefilled" => Feed::Prefilled,
        "concurrent" => Feed::Concurrent,
        other => return Err(format!("unknown --feed {other}")),
    };
    let shm = Shm::from_fd(args.num("shm")?, 4096)?;
    let sh: &XShared = shm.get();
    let fail = |e: String| {
        signal(&sh.ready, 2);
        e
    };
    let cpu = args.opt_num("cpu").map_err(fail)?;
    let sim = if args.get("workers").ok() == Some("default") {
        open_default(ns, Soc::Ascend910B)
    } else {
        open_with(ns, Soc::Ascend910B, on_cpu(cpu))
    }
    .map_err(fail)?;
    let nb = sim
        .create_notify(DEV, CreateFlags::empty())
        .map_err(|e| fail(e2s(e)))?;
    let key_b = sim
        .export_key(nb, ExportFlags::empty())
        .map_err(|e| fail(e2s(e)))?;
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() };
    sim.set_import_pids(nb, &[ppid]).map_err(|e| fail(e2s(e)))?;
    put_key(&sh.key[1], key_b.as_str()).map_err(fail)?;
    wait_for(&sh.key_a_set.v, 1, Scope::Process).map_err(fail)?;
    let key_a = get_key(&sh.key[0]).map_err(fail)?;
    let ia = sim
        .import_by_key(DEV, &key_a, ImportFlags::empty())
        .map_err(|e| fail(e2s(e)))?;
    let s = sim.create_stream(DEV).map_err(|e| fail(e2s(e)))?;
    let marker = Marker::leak();
    signal(&sh.ready, 1);
    let r = (|| {
        for k in 0..rounds {
            let per = match feed {
                Feed::Prefilled => {
                    // The previous batch must be over before this one is queued in full.
                    marker.wait_at_least(k)?;
                    BATCH_WARMUP + BATCH
                }
                Feed::Concurrent => {
                    if k >= 2 {
                        marker.wait_at_least(k - 1)?;
                    }
                    CHUNK
                }
            };
            for _ in 0..per {
                sim.wait_and_reset(nb, s, Timeout::Forever).map_err(e2s)?;
                sim.record(ia, s).map_err(e2s)?;
            }
            sim.launch_host_func(s, marker.call()).map_err(e2s)?;
            if feed == Feed::Prefilled {
                signal(&sh.batch_ready, k + 1);
            }
        }
        sim.synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
            .map_err(e2s)
    })();
    let _ = sim.destroy_stream(s, StreamDestroy::Discard);
    let _ = sim.destroy_notify(ia);
    let _ = sim.destroy_notify(nb);
    r.map(|()| String::new())
}

/// The idle-waiter wake-up: a stream blocked in a wait for [`IDLE_SLEEP`] is released by a
/// record executed on another stream. The time runs from a host function on the recording
/// stream, just before the record task, to a host function on the waiting stream, just after
/// the wait; with `end_to_end` from the host thread's `record` call instead (so it also counts
/// waking the recording stream's own idle worker).
pub struct IdleWake {
    sim: Sim,
    waiter: RawStream,
    recorder: RawStream,
    n: RawNotify,
    t0: &'static Stamp,
    t1: &'static Stamp,
}

/// Where an idle-wake measurement starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WakeFrom {
    /// The recording stream is about to run the record task.
    RecordTask,
    /// The host thread calls `record` on an idle recording stream.
    HostCall,
}

impl IdleWake {
    /// Sets up two streams and a notify; with `cpu`, both stream workers run on that CPU.
    pub fn new(ns: &str, cpu: Option<usize>) -> Result<IdleWake, String> {
        let sim = open_with(ns, Soc::Ascend910B, on_cpu(cpu))?;
        let waiter = sim.create_stream(DEV).map_err(e2s)?;
        let recorder = sim.create_stream(DEV).map_err(e2s)?;
        let n = sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?;
        Ok(IdleWake {
            sim,
            waiter,
            recorder,
            n,
            t0: Stamp::leak(),
            t1: Stamp::leak(),
        })
    }

    /// `events` wake-ups; the median latency in ns.
    pub fn sample(&mut self, events: u64, from: WakeFrom) -> Result<f64, String> {
        let sim = &self.sim;
        let mut lat = Vec::with_capacity(events as usize);
        for _ in 0..events {
            let k1 = self.t1.seq.load(Ordering::Acquire);
            sim.wait_and_reset(self.n, self.waiter, Timeout::Forever)
                .map_err(e2s)?;
            sim.launch_host_func(self.waiter, self.t1.call(stamp_now))
                .map_err(e2s)?;
            std::thread::sleep(IDLE_SLEEP);
            let t0 = match from {
                WakeFrom::RecordTask => {
                    let k0 = self.t0.seq.load(Ordering::Acquire);
                    sim.launch_host_func(self.recorder, self.t0.call(gated_stamp))
                        .map_err(e2s)?;
                    sim.record(self.n, self.recorder).map_err(e2s)?;
                    self.t0.gate.store(k0 + 1, Ordering::Release);
                    None
                }
                WakeFrom::HostCall => {
                    let t = now_ns();
                    sim.record(self.n, self.recorder).map_err(e2s)?;
                    Some(t)
                }
            };
            wait_for(&self.t1.seq, k1 + 1, Scope::Thread)?;
            let t0 = t0.unwrap_or_else(|| self.t0.t.load(Ordering::Acquire));
            lat.push(self.t1.t.load(Ordering::Acquire).saturating_sub(t0));
        }
        for s in [self.waiter, self.recorder] {
            sim.synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
                .map_err(e2s)?;
        }
        Ok(median(lat))
    }

    /// CPU time of the whole process while the waiting stream waits `span` for a record,
    /// as a percentage of one core.
    pub fn idle_cpu(&mut self, span: Duration) -> Result<f64, String> {
        let sim = &self.sim;
        sim.wait_and_reset(self.n, self.waiter, Timeout::Forever)
            .map_err(e2s)?;
        // Let every spin phase (worker, table) run out before measuring.
        std::thread::sleep(Duration::from_millis(20));
        let c0 = process_cpu_ns();
        let t0 = now_ns();
        std::thread::sleep(span);
        let c1 = process_cpu_ns();
        let t1 = now_ns();
        sim.record(self.n, self.recorder).map_err(e2s)?;
        for s in [self.waiter, self.recorder] {
            sim.synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
                .map_err(e2s)?;
        }
        Ok(c1.saturating_sub(c0) as f64 * 100.0 / (t1 - t0) as f64)
    }
}

impl Drop for IdleWake {
    fn drop(&mut self) {
        for s in [self.waiter, self.recorder] {
            let _ = self.sim.destroy_stream(s, StreamDestroy::Discard);
        }
        let _ = self.sim.destroy_notify(self.n);
    }
}

/// Lossless handoff through a ring of notify pairs between a producer and a consumer stream.
pub struct Handoff {
    sim: Sim,
    p: RawStream,
    c: RawStream,
    /// Holds the producer until a prefilled batch is queued.
    gate: &'static Gate,
    full: Vec<RawNotify>,
    empty: Vec<RawNotify>,
    marker: &'static Marker,
    t0: &'static Stamp,
    t1: &'static Stamp,
}

impl Handoff {
    /// `slots` pairs of notifies, two streams.
    pub fn new(ns: &str, slots: usize, workers: Workers) -> Result<Handoff, String> {
        let sim = open_placed(ns, Soc::Ascend910B, workers)?;
        let p = sim.create_stream(DEV).map_err(e2s)?;
        let c = sim.create_stream(DEV).map_err(e2s)?;
        let mut full = Vec::new();
        let mut empty = Vec::new();
        for _ in 0..slots {
            full.push(sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?);
            empty.push(sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?);
        }
        Ok(Handoff {
            sim,
            p,
            c,
            gate: Gate::leak(),
            full,
            empty,
            marker: Marker::leak(),
            t0: Stamp::leak(),
            t1: Stamp::leak(),
        })
    }

    /// Item `i`, producer side.
    fn produce(&self, i: u64) -> Result<(), String> {
        let k = self.full.len() as u64;
        let s = (i % k) as usize;
        if i >= k {
            self.sim
                .wait_and_reset(self.empty[s], self.p, Timeout::Forever)
                .map_err(e2s)?;
        }
        self.sim.record(self.full[s], self.p).map_err(e2s)
    }

    /// Item `i`, consumer side.
    fn consume(&self, i: u64) -> Result<(), String> {
        let s = (i % self.full.len() as u64) as usize;
        self.sim
            .wait_and_reset(self.full[s], self.c, Timeout::Forever)
            .map_err(e2s)?;
        self.sim.record(self.empty[s], self.c).map_err(e2s)
    }

    /// Prefilled batches: each batch is queued in full on both streams behind a gate on the
    /// producer, then runs with the host asleep; timed from a host function on the producer
    /// (after a warm-up) to one on the consumer at the end. Returns (ns, items timed, items).
    fn prefilled(&self, iters: u64) -> Result<(u64, u64, u64), String> {
        let sim = &self.sim;
        let (mut dt, mut timed, mut i) = (0u64, 0u64, 0u64);
        for _ in 0..iters.div_ceil(BATCH).max(1) {
            let seen = self.t1.seq.load(Ordering::Acquire);
            sim.launch_host_func(self.p, self.gate.call())
                .map_err(e2s)?;
            for j in 0..BATCH_WARMUP + BATCH {
                if j == BATCH_WARMUP {
                    sim.launch_host_func(self.p, self.t0.call(stamp_now))
                        .map_err(e2s)?;
                }
                self.produce(i + j)?;
            }
            for j in 0..BATCH_WARMUP + BATCH {
                self.consume(i + j)?;
            }
            sim.launch_host_func(self.c, self.t1.call(stamp_now))
                .map_err(e2s)?;
            self.gate.open();
            wait_for(&self.t1.seq, seen + 1, Scope::Thread)?;
            if self.gate.forced() {
                return Err(GATE_FORCED.into());
            }
            dt += self
                .t1
                .t
                .load(Ordering::Acquire)
                .saturating_sub(self.t0.t.load(Ordering::Acquire));
            timed += BATCH;
            i += BATCH_WARMUP + BATCH;
        }
        Ok((dt, timed, i))
    }

    /// The host keeps feeding chunks (at most two ahead of the consumer) while the streams
    /// run; timed by the host from the first enqueue to the last chunk's marker.
    fn concurrent(&self, iters: u64) -> Result<(u64, u64, u64), String> {
        let chunks = iters.div_ceil(CHUNK).max(1);
        let base = self.marker.n.load(Ordering::Acquire);
        let t0 = now_ns();
        let mut i = 0u64;
        for ch in 0..chunks as u32 {
            if ch >= 2 {
                self.marker.wait_at_least(base + ch - 1)?;
            }
            for _ in 0..CHUNK {
                self.produce(i)?;
                self.consume(i)?;
                i += 1;
            }
            self.sim
                .launch_host_func(self.c, self.marker.call())
                .map_err(e2s)?;
        }
        self.marker.wait_at_least(base + chunks as u32)?;
        Ok((now_ns() - t0, i, i))
    }

    /// One sample of about `iters` items; millions of items per second. Verifies the count:
    /// every record is consumed by exactly one wait, and exactly the last ring's worth of
    /// acknowledgements is left set.
    pub fn sample(&mut self, iters: u64, feed: Feed) -> Result<f64, String> {
        let sim = &self.sim;
        let k = self.full.len() as u64;
        let (dt, timed, total) = match feed {
            Feed::Prefilled => self.prefilled(iters)?,
            Feed::Concurrent => self.concurrent(iters)?,
        };
        for s in [self.p, self.c] {
            sim.synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
                .map_err(e2s)?;
        }
        // Lossless check: no "full" left set; exactly min(k, total) "empty" left set (the acks
        // the producer never waited for). Consuming them also resets the ring for the next
        // sample.
        let mut left_full = 0;
        let mut left_empty = 0;
        for s in 0..k as usize {
            left_full += sim.try_consume(self.full[s]).map_err(e2s)? as u64;
            left_empty += sim.try_consume(self.empty[s]).map_err(e2s)? as u64;
        }
        if left_full != 0 || left_empty != k.min(total) {
            return Err(format!(
                "handoff not lossless: {left_full} records unconsumed, {left_empty} acks left \
                 (expected 0 and {})",
                k.min(total)
            ));
        }
        Ok(timed as f64 * 1e3 / dt.max(1) as f64)
    }
}

impl Drop for Handoff {
    fn drop(&mut self) {
        // A batch that failed half-way may have left the producer held.
        self.gate.open();
        for s in [self.p, self.c] {
            let _ = self.sim.destroy_stream(s, StreamDestroy::Discard);
        }
        for n in self.full.iter().chain(self.empty.iter()) {
            let _ = self.sim.destroy_notify(*n);
        }
    }
}

/// Resident memory of a device holding every notify it can (child role `mem-device`): prints
/// `key=value` lines.
pub fn mem_device_main(args: &RoleArgs) -> Result<String, String> {
    let ns = args.get("ns")?;
    let soc = Soc::from_name(args.get("soc")?).map_err(e2s)?;
    let rss0 = sys::rss_bytes()?;
    let sim = Sim::builder()
        .soc(soc)
        .devices(1)
        .namespace(ns)
        .open()
        .map_err(|e| format!("Sim::open({ns}): {e}"))?;
    let rss1 = sys::rss_bytes()?;
    let backed = || {
        std::fs::metadata(sim.shm_path())
            .map(|m| {
                use std::os::unix::fs::MetadataExt;
                m.blocks() as i64 * 512
            })
            .unwrap_or(-1)
    };
    let shm_alloc_open = backed();
    let want = soc.max_notifies();
    let mut held = Vec::with_capacity(want as usize);
    let t0 = now_ns();
    let mut stop = String::new();
    for _ in 0..want {
        match sim.create_notify(DEV, CreateFlags::empty()) {
            Ok(n) => held.push(n),
            Err(e) => {
                stop = e.to_string();
                break;
            }
        }
    }
    let create_ns = (now_ns() - t0) as f64 / held.len().max(1) as f64;
    let rss2 = sys::rss_bytes()?;
    let shm_alloc_full = backed();
    let free = sim.notifies_free(DEV).map(i64::from).unwrap_or(-1);
    for n in held.iter() {
        let _ = sim.destroy_notify(*n);
    }
    // The shared file: its size, and the pages actually backed (it may be sparse).
    let file_len = std::fs::metadata(sim.shm_path())
        .map(|m| m.len() as i64)
        .unwrap_or(-1);
    Ok(format!(
        "created={}\nrss_before_open={rss0}\nrss_after_open={rss1}\nrss_full={rss2}\n\
         create_ns={create_ns}\nfree_after={free}\nshm_len={file_len}\n\
         shm_alloc_open={shm_alloc_open}\nshm_alloc_full={shm_alloc_full}\nstop={}\n",
        held.len(),
        stop.replace('\n', " "),
    ))
}

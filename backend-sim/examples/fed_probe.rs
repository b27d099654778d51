//! Probe (issue #25): where a fed round trip's time goes, per chunk of 64, with the bench's
//! feeding protocol (`bench/src/notify.rs`: chunks of 64, a host function bumping a marker
//! after each, the host at most two chunks ahead, sleeping on the marker's futex).
//!
//! `fed_probe inproc|handoff|xproc|hybrid [chunks] [marker|event|query|queue]` (`CHUNK=n` in the
//! environment changes the chunk): per chunk, how often the host slept and how long its
//! wake-up took, and, for the marker, where a chunk boundary's time goes (the bump's wake-up
//! to the host running, the host awake, the host's sleep to the worker running again); per
//! thread, on-CPU time, run-queue wait and context switches (`/proc/self/task/*/schedstat`,
//! `status`), and the CPUs' idle time. Throttles: `marker` the bench's (a host function and
//! a futex), `event` an event recorded after each chunk and `aclrtSynchronizeEvent` on the
//! one two chunks back, `query` the same polled with `aclrtQueryEvent` and `sched_yield`,
//! `queue` none but the stream queue's own (a full queue blocks the enqueue).
//!
//! `fed_probe hybrid [chunks]`: the bench's cross-process hybrid baseline (two processes, one
//! thread each, spin then futex; no simulator, no host) with the same per-chunk thread report,
//! for a side-by-side table. Per thread the report also gives migrations
//! (`/proc/self/task/*/sched`). With `STALL_LOG=path`, `xproc` writes per chunk (by the marker
//! count) the marker bump's start, the host's wake-up, its next sleep and the bump's return to
//! `path.A` / `path.B` (`bench/probes/rt27/stall.py` reads them).
//!
//! `fed_probe evsync N`: N rounds of 16 record+wait pairs, an event record and its
//! synchronize (ns a round); `fed_probe evrec N` (N ≤ 1,000): ns per event record task, run
//! back to back. Results go to standard output; nothing is judged.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use acl_notify_core::event::{EventOps, EventSpec, LatestRecord, RawEvent};
use acl_notify_core::{
    CreateFlags, ExportFlags, HostCall, ImportFlags, NotifyResources, RawNotify, RawStream, Soc,
    StreamDestroy, StreamOps, SyncWait, Timeout,
};
use acl_notify_sim::Sim;

static CHUNK_N: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
#[allow(non_snake_case)]
fn CHUNK() -> u64 {
    *CHUNK_N.get_or_init(|| {
        std::env::var("CHUNK")
            .ok()
            .and_then(|x| x.parse().ok())
            .unwrap_or(64)
    })
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[derive(Default)]
struct Marker {
    n: AtomicU32,
    /// When the latest bump ran.
    at: AtomicU64,
    /// The host is (about to be) asleep.
    sleeping: AtomicU32,
    bumps_with_sleeper: AtomicU64,
    /// Sum over bumps that found a sleeper: bump to its futex_wake's return (ns).
    bump_stall: AtomicU64,
    /// When the host called futex_wait last.
    slept_at: AtomicU64,
    /// Sum: host's futex_wait call to the bump's futex_wake return.
    back_ns: AtomicU64,
    /// When the host's futex_wait last returned.
    woke_at: AtomicU64,
    /// With `STALL_LOG=path` in the environment: per bump (by the count it found), the bump's
    /// start, the host's wake-up, the host's next futex_wait call and the bump's return (ns,
    /// `CLOCK_MONOTONIC`, comparable across the two processes of `xproc`).
    log: Vec<[AtomicU64; 4]>,
}

unsafe extern "C" fn bump_marker(arg: *mut c_void) {
    // SAFETY: `arg` is a leaked (`'static`) `Marker` (`Throttler::new`).
    let m = unsafe { &*arg.cast::<Marker>() };
    let t0 = now_ns();
    m.at.store(t0, Ordering::Relaxed);
    let idx = m.n.fetch_add(1, Ordering::Release) as usize;
    let sleeper = m.sleeping.load(Ordering::SeqCst) != 0;
    if sleeper {
        m.bumps_with_sleeper.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: FUTEX_WAKE only uses the address as a key; the marker lives for ever.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            m.n.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
            0usize,
            0usize,
            0u32,
        );
    }
    if let Some(e) = m.log.get(idx) {
        e[0].store(t0, Ordering::Relaxed);
        e[1].store(m.woke_at.load(Ordering::Relaxed), Ordering::Relaxed);
        e[2].store(m.slept_at.load(Ordering::Relaxed), Ordering::Relaxed);
        e[3].store(now_ns(), Ordering::Relaxed);
    }
    if sleeper {
        let t1 = now_ns();
        m.bump_stall.fetch_add(t1 - t0, Ordering::Relaxed);
        m.back_ns.fetch_add(
            t1.saturating_sub(m.slept_at.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
    }
}

#[derive(Default, Debug)]
struct HostStats {
    run_ns: u64,
    resumed: Option<u64>,
    waits: u64,
    waits_needed: u64,
    sleeps: u64,
    wake_ns: Vec<u64>,
    wait_ns: u64,
    feed_ns: u64,
}

impl Marker {
    fn call(&'static self) -> HostCall {
        // SAFETY: `bump_marker` touches the `'static` marker through atomics only.
        unsafe { HostCall::new(bump_marker, (self as *const Marker).cast_mut().cast()) }
    }
    fn wait_at_least(&self, want: u32, st: &mut HostStats) {
        st.waits += 1;
        let t0 = now_ns();
        let mut first = true;
        loop {
            let x = self.n.load(Ordering::Acquire);
            if x >= want {
                if !first {
                    st.wait_ns += now_ns() - t0;
                }
                return;
            }
            if first {
                st.waits_needed += 1;
                first = false;
            }
            self.sleeping.store(1, Ordering::SeqCst);
            if let Some(r) = st.resumed.take() {
                st.run_ns += now_ns() - r;
            }
            assert!(
                now_ns() - t0 < 30_000_000_000,
                "the stream made no progress for 30 s"
            );
            self.slept_at.store(now_ns(), Ordering::Relaxed);
            let limit = libc::timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            };
            // SAFETY: FUTEX_WAIT on a live atomic of this marker, with a timeout on this
            // frame.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.n.as_ptr(),
                    libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                    x,
                    &raw const limit,
                    0usize,
                    0u32,
                )
            };
            self.woke_at.store(now_ns(), Ordering::Relaxed);
            self.sleeping.store(0, Ordering::SeqCst);
            if r == 0 {
                st.sleeps += 1;
                let now = now_ns();
                let at = self.at.load(Ordering::Relaxed);
                st.wake_ns.push(now.saturating_sub(at));
                st.resumed = Some(now);
            }
        }
    }
}

#[derive(Clone, Copy)]
enum Throttle {
    /// No throttle of the host's own: the queue's (a full queue blocks the enqueue).
    Queue,
    Marker,
    Event,
    Query,
}

struct Throttler {
    kind: Throttle,
    marker: &'static Marker,
    events: Vec<RawEvent>,
    /// Chunks whose throttle task was queued.
    queued: u32,
}

impl Throttler {
    fn new(sim: &Sim, kind: Throttle) -> Throttler {
        let events = match kind {
            Throttle::Marker => Vec::new(),
            _ => (0..4)
                .map(|_| sim.event_create(0, EventSpec::classic()).unwrap())
                .collect(),
        };
        Throttler {
            kind,
            marker: Box::leak(Box::new(Marker {
                log: if std::env::var_os("STALL_LOG").is_some() {
                    (0..65_536).map(|_| Default::default()).collect()
                } else {
                    Vec::new()
                },
                ..Marker::default()
            })),
            events,
            queued: 0,
        }
    }
    /// After a chunk, on stream `s`.
    fn mark(&mut self, sim: &Sim, s: RawStream) {
        match self.kind {
            Throttle::Marker => sim.launch_host_func(s, self.marker.call()).unwrap(),
            Throttle::Queue => {}
            _ => sim
                .event_record(self.events[self.queued as usize % 4], s)
                .unwrap(),
        }
        self.queued += 1;
    }
    /// Until `k` chunks' marks have run.
    fn wait_done(&self, sim: &Sim, k: u32, st: &mut HostStats) {
        if k == 0 {
            return;
        }
        match self.kind {
            Throttle::Queue => {}
            Throttle::Marker => self.marker.wait_at_least(k, st),
            Throttle::Event => {
                st.waits += 1;
                let t0 = now_ns();
                sim.event_synchronize(
                    self.events[(k - 1) as usize % 4],
                    SyncWait::AtMost(Duration::from_secs(30)),
                )
                .unwrap();
                st.wait_ns += now_ns() - t0;
            }
            Throttle::Query => {
                st.waits += 1;
                let t0 = now_ns();
                let ev = self.events[(k - 1) as usize % 4];
                let mut first = true;
                while sim.event_latest(ev).unwrap() == LatestRecord::Pending {
                    assert!(
                        now_ns() - t0 < 30_000_000_000,
                        "the stream made no progress for 30 s"
                    );
                    if first {
                        st.waits_needed += 1;
                        first = false;
                    }
                    std::thread::yield_now();
                }
                st.wait_ns += now_ns() - t0;
            }
        }
    }
}

#[derive(Clone, Debug, Default)]
struct ThreadStat {
    name: String,
    run_ns: u64,
    wait_ns: u64,
    vol: u64,
    invol: u64,
    /// `se.nr_migrations` from `/proc/self/task/<tid>/sched` (0 if the kernel does not say).
    migr: u64,
}

fn threads() -> Vec<(i32, ThreadStat)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let e = e.unwrap();
        let tid: i32 = e.file_name().to_str().unwrap().parse().unwrap();
        let p = e.path();
        let name = std::fs::read_to_string(p.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_owned();
        let ss = std::fs::read_to_string(p.join("schedstat")).unwrap_or_default();
        let mut it = ss.split_whitespace().map(|x| x.parse::<u64>().unwrap_or(0));
        let run_ns = it.next().unwrap_or(0);
        let wait_ns = it.next().unwrap_or(0);
        let status = std::fs::read_to_string(p.join("status")).unwrap_or_default();
        let get = |k: &str| {
            status
                .lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|x| x.parse().ok())
                .unwrap_or(0)
        };
        let sched = std::fs::read_to_string(p.join("sched")).unwrap_or_default();
        let migr = sched
            .lines()
            .find(|l| l.starts_with("se.nr_migrations"))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|x| x.trim().parse().ok())
            .unwrap_or(0);
        v.push((
            tid,
            ThreadStat {
                name,
                run_ns,
                wait_ns,
                vol: get("voluntary_ctxt_switches"),
                invol: get("nonvoluntary_ctxt_switches"),
                migr,
            },
        ));
    }
    v
}

/// One measured run: what, units (round trips or items), chunks, wall time (ns).
struct Run<'a> {
    label: &'a str,
    units: u64,
    chunks: u64,
    wall: u64,
}

fn report(
    run: Run<'_>,
    host: &HostStats,
    before: &[(i32, ThreadStat)],
    after: &[(i32, ThreadStat)],
    marker: Option<&Marker>,
) {
    let Run {
        label,
        units,
        chunks,
        wall,
    } = run;
    let c = chunks as f64;
    println!(
        "{label}: {:.1} ns/unit over {units} units, {chunks} chunks, {:.1} µs/chunk",
        wall as f64 / units as f64,
        wall as f64 / c / 1e3
    );
    let mut w = host.wake_ns.clone();
    w.sort_unstable();
    let pct = |p: f64| {
        if w.is_empty() {
            0
        } else {
            w[((w.len() - 1) as f64 * p) as usize]
        }
    };
    println!(
        "  host: throttle waits {:.2}/chunk, had to wait {:.3}/chunk, futex sleeps {:.3}/chunk; \
         wake latency (bump -> host runs) p10 {} p50 {} p90 {} ns; waiting {:.2} µs/chunk, feeding {:.2} µs/chunk",
        host.waits as f64 / c,
        host.waits_needed as f64 / c,
        host.sleeps as f64 / c,
        pct(0.1),
        pct(0.5),
        pct(0.9),
        host.wait_ns as f64 / c / 1e3,
        host.feed_ns as f64 / c / 1e3,
    );
    if let Some(m) = marker {
        let k = m.bumps_with_sleeper.load(Ordering::Relaxed).max(1) as f64;
        println!(
            "  marker bumps that found the host asleep: {:.3}/chunk; per such bump: bump to its wake's return {:.2} µs, host awake (wake return to its next futex_wait) {:.2} µs, host's futex_wait call to the bump's return {:.2} µs",
            m.bumps_with_sleeper.load(Ordering::Relaxed) as f64 / c,
            m.bump_stall.load(Ordering::Relaxed) as f64 / k / 1e3,
            host.run_ns as f64 / host.sleeps.max(1) as f64 / 1e3,
            m.back_ns.load(Ordering::Relaxed) as f64 / k / 1e3,
        );
    }
    let mut on = 0u64;
    for (tid, a) in after {
        let b = before
            .iter()
            .find(|(t, _)| t == tid)
            .map(|x| x.1.clone())
            .unwrap_or_default();
        let run = a.run_ns - b.run_ns;
        on += run;
        if run < wall / 1000 {
            continue;
        }
        println!(
            "  {:>6} {:<16} on-CPU {:5.1} % ({:6.2} µs/chunk), runq wait {:6.2} µs/chunk, vol sw {:.3}/chunk, invol {:.3}/chunk, migrations {:.3}/chunk",
            tid,
            a.name,
            run as f64 * 100.0 / wall as f64,
            run as f64 / c / 1e3,
            (a.wait_ns - b.wait_ns) as f64 / c / 1e3,
            (a.vol - b.vol) as f64 / c,
            (a.invol - b.invol) as f64 / c,
            (a.migr - b.migr) as f64 / c,
        );
    }
    let cpus = 2.0;
    println!(
        "  all threads on-CPU {:.1} % of {cpus} CPUs; idle {:.2} µs/chunk",
        on as f64 * 100.0 / (wall as f64 * cpus),
        (wall as f64 * cpus - on as f64).max(0.0) / c / 1e3
    );
}

/// What one fed run measured.
struct Fed {
    host: HostStats,
    before: Vec<(i32, ThreadStat)>,
    after: Vec<(i32, ThreadStat)>,
    wall: u64,
}

impl Fed {
    fn report(&self, label: &str, chunks: u64, th: &Throttler) {
        report(
            Run {
                label,
                units: chunks * CHUNK(),
                chunks,
                wall: self.wall,
            },
            &self.host,
            &self.before,
            &self.after,
            matches!(th.kind, Throttle::Marker).then_some(th.marker),
        );
    }
}

/// Feeds as the bench does: one untimed warm-up chunk, then `chunks` timed ones with the host at
/// most two chunks ahead of the streams (`th` says when a chunk is done), then waits for
/// `streams` to finish.
fn feed(
    sim: &Sim,
    chunks: u64,
    th: &mut Throttler,
    streams: &[RawStream],
    mut chunk: impl FnMut(&mut Throttler),
) -> Fed {
    let mut host = HostStats::default();
    chunk(th);
    th.wait_done(sim, 1, &mut HostStats::default());
    let before = threads();
    let t0 = now_ns();
    // `PIN_HOST_AT=k`: at chunk k the host pins itself to the CPU it is on (by then the
    // placement has moved it beside its worker), to see what the kernel's choice of a CPU at
    // each wake-up costs.
    let pin_at: Option<u32> = std::env::var("PIN_HOST_AT")
        .ok()
        .and_then(|x| x.parse().ok());
    for k in 0..chunks as u32 {
        if Some(k) == pin_at {
            // SAFETY: sched_getcpu(3) has no preconditions.
            let cpu = unsafe { libc::sched_getcpu() };
            // SAFETY: all-zero is the empty set; CPU_SET writes the bit of a CPU the kernel
            // named; sched_setaffinity(0, …) only reads the set.
            unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu as usize, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        }
        if k >= 2 {
            th.wait_done(sim, 1 + k - 1, &mut host);
        }
        let f = now_ns();
        chunk(th);
        host.feed_ns += now_ns() - f;
    }
    th.wait_done(sim, 1 + chunks as u32, &mut host);
    for &x in streams {
        sim.synchronize(x, SyncWait::Forever).unwrap();
    }
    let wall = now_ns() - t0;
    Fed {
        host,
        before,
        after: threads(),
        wall,
    }
}

fn open(ns: &str) -> Sim {
    Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(2)
        .namespace(ns)
        .open()
        .unwrap()
}

fn inproc(sim: &Sim, chunks: u64, kind: Throttle) {
    let s: Vec<RawStream> = (0..2).map(|_| sim.create_stream(0).unwrap()).collect();
    let n: Vec<RawNotify> = (0..2)
        .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
        .collect();
    let mut th = Throttler::new(sim, kind);
    let fed = feed(sim, chunks, &mut th, &s, |th| {
        for _ in 0..CHUNK() {
            sim.record(n[1], s[0]).unwrap();
            sim.wait_and_reset(n[0], s[0], Timeout::Forever).unwrap();
            sim.wait_and_reset(n[1], s[1], Timeout::Forever).unwrap();
            sim.record(n[0], s[1]).unwrap();
        }
        th.mark(sim, s[0]);
    });
    fed.report("inproc round trip", chunks, &th);
    for x in s {
        sim.synchronize(x, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        sim.destroy_stream(x, StreamDestroy::Discard).unwrap();
    }
}

fn handoff(sim: &Sim, chunks: u64, kind: Throttle) {
    let p = sim.create_stream(0).unwrap();
    let c = sim.create_stream(0).unwrap();
    let full: Vec<RawNotify> = (0..8)
        .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
        .collect();
    let empty: Vec<RawNotify> = (0..8)
        .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
        .collect();
    let mut th = Throttler::new(sim, kind);
    let mut i = 0u64;
    let fed = feed(sim, chunks, &mut th, &[p, c], |th| {
        for _ in 0..CHUNK() {
            let k = (i % 8) as usize;
            if i >= 8 {
                sim.wait_and_reset(empty[k], p, Timeout::Forever).unwrap();
            }
            sim.record(full[k], p).unwrap();
            sim.wait_and_reset(full[k], c, Timeout::Forever).unwrap();
            sim.record(empty[k], c).unwrap();
            i += 1;
        }
        th.mark(sim, c);
    });
    fed.report("handoff item", chunks, &th);
    for x in [p, c] {
        sim.synchronize(x, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        sim.destroy_stream(x, StreamDestroy::Discard).unwrap();
    }
}

/// The two processes' keys (`xproc`), in a shared anonymous page made before the fork.
#[repr(C)]
struct XPage {
    key: [[AtomicU8; 80]; 2],
    len: [AtomicU32; 2],
}

fn put(page: &XPage, i: usize, k: &str) {
    assert!(k.len() <= 80, "key longer than 80 bytes");
    for (d, b) in page.key[i].iter().zip(k.bytes()) {
        d.store(b, Ordering::Relaxed);
    }
    page.len[i].store(k.len() as u32, Ordering::Release);
}

fn get(page: &XPage, i: usize) -> String {
    let end = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            std::time::Instant::now() < end,
            "the other process sent no key in 10 s"
        );
        let n = page.len[i].load(Ordering::Acquire) as usize;
        if n != 0 {
            let b: Vec<u8> = page.key[i][..n]
                .iter()
                .map(|x| x.load(Ordering::Relaxed))
                .collect();
            return String::from_utf8(b).unwrap();
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A zeroed page shared with the children this process forks (an anonymous shared mapping,
/// kept for the rest of the process), as a `T`.
///
/// # Safety
///
/// `T` must fit in a page and be valid when all zero.
unsafe fn shared_page<T>() -> &'static T {
    assert!(std::mem::size_of::<T>() <= 4096, "a page holds it");
    // SAFETY: an anonymous shared mapping of one page; checked below.
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert!(page != libc::MAP_FAILED, "mmap");
    // SAFETY: a zeroed, page-aligned page mapped for the rest of the process; the caller
    // promises zero is a valid `T` that fits it.
    unsafe { &*page.cast::<T>() }
}

/// Two processes, each with a stream, its own notify and the other's imported: A records B's
/// and waits on its own, B the reverse; each host feeds its own stream in chunks.
fn xproc(ns: &str, chunks: u64, kind: Throttle) {
    // SAFETY: zero is a valid `XPage` (atomics), which fits a page.
    let page: &'static XPage = unsafe { shared_page() };
    // SAFETY: no other thread exists yet (the simulator is opened after the fork).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: prctl(2) with an integer argument; the child dies with its parent.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    }
    let me = usize::from(pid == 0);
    let sim = open(ns);
    let own = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let key = sim
        .export_key(own, ExportFlags::DISABLE_PID_VALIDATION)
        .unwrap();
    put(page, me, key.as_str());
    let other = sim
        .import_by_key(0, &get(page, 1 - me), ImportFlags::empty())
        .unwrap();
    let s = sim.create_stream(0).unwrap();
    let mut th = Throttler::new(&sim, kind);
    let fed = feed(&sim, chunks, &mut th, &[s], |th| {
        for _ in 0..CHUNK() {
            if me == 0 {
                sim.record(other, s).unwrap();
                sim.wait_and_reset(own, s, Timeout::Forever).unwrap();
            } else {
                sim.wait_and_reset(own, s, Timeout::Forever).unwrap();
                sim.record(other, s).unwrap();
            }
        }
        th.mark(&sim, s);
    });
    if me == 1 {
        std::thread::sleep(Duration::from_millis(50));
    }
    fed.report(if me == 0 { "xproc A" } else { "xproc B" }, chunks, &th);
    if let Some(p) = std::env::var_os("STALL_LOG") {
        let mut out = String::new();
        for (i, e) in th.marker.log.iter().enumerate() {
            let v: Vec<u64> = e.iter().map(|x| x.load(Ordering::Relaxed)).collect();
            if v[0] != 0 {
                out += &format!("{i} {} {} {} {}\n", v[0], v[1], v[2], v[3]);
            }
        }
        let mut p = std::path::PathBuf::from(p);
        p.as_mut_os_string().push(if me == 0 { ".A" } else { ".B" });
        std::fs::write(p, out).unwrap();
    }
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
    if me == 1 {
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// The bench's hybrid baseline's line (`bench/src/pingpong.rs`): a word and its sleepers.
#[repr(C, align(64))]
struct HLine {
    v: AtomicU32,
    sleepers: AtomicU32,
}

/// Spins up to the simulator's `SPIN` (the hybrid's), then `FUTEX_WAIT`s (shared: two
/// processes), until `l.v != last`.
fn hybrid_wait(l: &HLine, last: u32) {
    let spin = acl_notify_core::table::SPIN.as_nanos() as u64;
    let start = now_ns();
    let mut n = 0u32;
    loop {
        if l.v.load(Ordering::Acquire) != last {
            return;
        }
        std::hint::spin_loop();
        n = n.wrapping_add(1);
        if n.is_multiple_of(16) && now_ns() - start > spin {
            break;
        }
    }
    l.sleepers.fetch_add(1, Ordering::SeqCst);
    while l.v.load(Ordering::SeqCst) == last {
        // SAFETY: FUTEX_WAIT on a live atomic of the shared page.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                l.v.as_ptr(),
                libc::FUTEX_WAIT,
                last,
                std::ptr::null::<libc::timespec>(),
                0usize,
                0u32,
            )
        };
    }
    l.sleepers.fetch_sub(1, Ordering::SeqCst);
}

fn hybrid_set(l: &HLine, x: u32) {
    l.v.store(x, Ordering::SeqCst);
    if l.sleepers.load(Ordering::SeqCst) != 0 {
        // SAFETY: FUTEX_WAKE only uses the address as a key.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                l.v.as_ptr(),
                libc::FUTEX_WAKE,
                i32::MAX,
                0usize,
                0usize,
                0u32,
            )
        };
    }
}

/// `hybrid`: the bench's cross-process hybrid baseline (spin, then futex; one thread a
/// process, no host, no simulator), with the same per-chunk report as `xproc`.
fn hybrid(chunks: u64) {
    // SAFETY: zero is a valid pair of lines (atomics), which fits a page.
    let lines: &'static [HLine; 2] = unsafe { shared_page() };
    // SAFETY: no other thread exists yet.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        // SAFETY: prctl(2) with an integer argument; the child dies with its parent.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    }
    let me = usize::from(pid == 0);
    let (a, b) = (&lines[0], &lines[1]);
    let run = |from: u64, to: u64| {
        for i in from as u32..to as u32 {
            if me == 0 {
                hybrid_set(a, i + 1);
                hybrid_wait(b, i);
            } else {
                hybrid_wait(a, i);
                hybrid_set(b, i + 1);
            }
        }
    };
    run(0, CHUNK());
    let before = threads();
    let t0 = now_ns();
    run(CHUNK(), (chunks + 1) * CHUNK());
    let wall = now_ns() - t0;
    let after = threads();
    if me == 1 {
        std::thread::sleep(Duration::from_millis(50));
    }
    report(
        Run {
            label: if me == 0 { "hybrid A" } else { "hybrid B" },
            units: chunks * CHUNK(),
            chunks,
            wall,
        },
        &HostStats::default(),
        &before,
        &after,
        None,
    );
    if me == 1 {
        std::process::exit(0);
    }
    let mut status = 0;
    // SAFETY: `pid` is our child; `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// `evsync`: the host queues 16 self record+wait pairs and an event record on one stream, then
/// `aclrtSynchronizeEvent`s it; ns per round (median of `n`). `evrec`: a stream runs `n`
/// event records back to back (queued behind a held host function); ns per record.
fn events(sim: &Sim, n: u64, mode: &str) {
    let s = sim.create_stream(0).unwrap();
    let nt = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let ev = sim.event_create(0, EventSpec::classic()).unwrap();
    if mode == "evsync" {
        let mut v = Vec::new();
        for _ in 0..n {
            let t = now_ns();
            for _ in 0..16 {
                sim.record(nt, s).unwrap();
                sim.wait_and_reset(nt, s, Timeout::Forever).unwrap();
            }
            sim.event_record(ev, s).unwrap();
            sim.event_synchronize(ev, SyncWait::AtMost(Duration::from_secs(10)))
                .unwrap();
            v.push(now_ns() - t);
        }
        v.sort_unstable();
        println!(
            "evsync: 16 pairs + event record + synchronize: median {} ns, p10 {} p90 {}",
            v[v.len() / 2],
            v[v.len() / 10],
            v[v.len() * 9 / 10]
        );
    } else {
        let gate: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
        unsafe extern "C" fn hold(arg: *mut c_void) {
            // SAFETY: `arg` is the leaked `gate`.
            let g = unsafe { &*arg.cast::<AtomicU32>() };
            while g.load(Ordering::Acquire) == 0 {
                std::hint::spin_loop();
            }
        }
        let mut best = u64::MAX;
        for _ in 0..5 {
            gate.store(0, Ordering::Release);
            // SAFETY: `hold` reads the leaked `gate` only.
            sim.launch_host_func(s, unsafe {
                HostCall::new(hold, (gate as *const AtomicU32).cast_mut().cast())
            })
            .unwrap();
            for _ in 0..n {
                sim.event_record(ev, s).unwrap();
            }
            let t = now_ns();
            gate.store(1, Ordering::Release);
            sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
                .unwrap();
            best = best.min(now_ns() - t);
        }
        println!(
            "evrec: {:.1} ns per event record task (best of 5 x {n})",
            best as f64 / n as f64
        );
    }
    sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("inproc", String::as_str);
    let chunks: u64 = args.get(2).and_then(|x| x.parse().ok()).unwrap_or(2000);
    let kind = match args.get(3).map_or("marker", String::as_str) {
        "marker" => Throttle::Marker,
        "queue" => Throttle::Queue,
        "event" => Throttle::Event,
        "query" => Throttle::Query,
        k => panic!("unknown throttle {k}"),
    };
    let ns = format!("fed-probe-{}", std::process::id());
    // Removes the namespace however this ends (a panic included); a forked child leaves by
    // `process::exit`, without it.
    let _guard = acl_notify_sim::NamespaceGuard(ns.clone());
    if mode == "xproc" {
        xproc(&ns, chunks, kind);
        return;
    }
    if mode == "hybrid" {
        hybrid(chunks);
        return;
    }
    let sim = open(&ns);
    match mode {
        "inproc" => inproc(&sim, chunks, kind),
        "handoff" => handoff(&sim, chunks, kind),
        "evsync" | "evrec" => events(&sim, chunks, mode),
        m => panic!("unknown mode {m}"),
    }
}

//! A ring of N processes handing a token round, with a *data* and an *ack* notify per rank:
//! rank r waits for its data, acknowledges it to rank r−1, sends data to rank r+1 and waits
//! for that rank's acknowledgement (rank 0 starts each round by sending). Each rank's host
//! thread enqueues its rounds while its stream runs them (the queue fills and the host waits
//! for room, as a user's would), with the simulator's default settings. The baseline runs the
//! same protocol on process-shared POSIX semaphores, one thread per rank. With more ranks
//! than CPUs, it shows whether waiters that spin take the CPU from the ranks that would
//! record.
//!
//! The info rows of `ring-busy` run the rings of 2 and 4 again with [`BUSY_LOOPS`] CPU-bound
//! threads beside them (as a compiler or a user's own busy thread would be): a stream worker's
//! `sched_yield` then gives a busy thread a whole scheduler slice, and every hand-off that waits
//! for one costs milliseconds (bench/README.md History "wake19": main's ring of 2 at 2.7–6.5 ms a
//! round beside two busy loops, the semaphore ring at 6–22 µs).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use acl_notify_core::{
    CreateFlags, ExportFlags, ImportFlags, NotifyResources, Soc, StreamDestroy, StreamOps,
    SyncWait, Timeout,
};

use crate::child::{Child, RoleArgs, Watchdog, kill_pid};
use crate::notify::{DEV, SYNC_LIMIT, e2s, get_key, open_default, put_key, wait_line};
use crate::pingpong::{Line, SemCell};
use crate::sys::{Scope, Shm, ShmSafe, futex_wake, now_ns};

/// Most ranks a ring has.
pub const MAX_RANKS: usize = 16;

/// The ring sizes measured.
pub const RANKS: [usize; 4] = [2, 4, 8, 16];

/// The ring sizes also measured beside busy threads (info rows).
pub const RANKS_BESIDE_BUSY: [usize; 2] = [2, 4];

/// How many CPU-bound threads run beside the info rows' rings.
pub const BUSY_LOOPS: usize = 2;

/// Bound on a whole sample.
const SAMPLE_LIMIT: Duration = Duration::from_secs(120);

/// What carries the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingMech {
    /// Simulator notifies on streams (each process owns its data and ack notify).
    Notify,
    /// Process-shared POSIX semaphores, one thread per rank.
    Sem,
}

impl RingMech {
    fn name(self) -> &'static str {
        match self {
            RingMech::Notify => "notify",
            RingMech::Sem => "sem",
        }
    }
}

/// The page the ranks share.
#[repr(C)]
struct RingShared {
    /// Ranks that have exported their keys.
    exported: Line,
    /// Ranks ready to start.
    ready: Line,
    /// 1: go.
    go: Line,
    /// Ranks done.
    done: Line,
    /// Ranks that failed.
    failed: Line,
    /// Per rank: the data and the ack notify's key.
    keys: [[[AtomicU32; 17]; 2]; MAX_RANKS],
    /// Per rank: the data and the ack semaphore.
    sems: [[SemCell; 2]; MAX_RANKS],
}

// SAFETY: atomics and process-shared semaphores (initialised by the parent before any child
// runs); all-zero is valid for the atomics.
unsafe impl ShmSafe for RingShared {}

const SHM_LEN: usize = 16384;
const _: () = assert!(std::mem::size_of::<RingShared>() <= SHM_LEN);

/// One sample: ns per round of a ring of `n` ranks over `rounds` rounds (process start-up
/// not timed).
pub fn sample(ns: &str, mech: RingMech, n: usize, rounds: u64) -> Result<f64, String> {
    if !(2..=MAX_RANKS).contains(&n) {
        return Err(format!("ring of {n}: 2 to {MAX_RANKS} ranks"));
    }
    let shm = Shm::create("acl-notify-bench-ring", SHM_LEN)?;
    let sh: &RingShared = shm.get();
    if mech == RingMech::Sem {
        for s in sh.sems.iter().take(n).flatten() {
            // SAFETY: a zeroed `sem_t` in shared memory, initialised once, process-shared.
            if unsafe { libc::sem_init(s.0.get(), 1, 0) } < 0 {
                return Err(format!("sem_init: {}", std::io::Error::last_os_error()));
            }
        }
    }
    let r = (|| {
        let mut children = Vec::new();
        for rank in 0..n {
            let args = vec![
                "--mech".into(),
                mech.name().into(),
                "--ns".into(),
                ns.into(),
                "--shm".into(),
                shm.fd().to_string(),
                "--n".into(),
                n.to_string(),
                "--rank".into(),
                rank.to_string(),
                "--rounds".into(),
                rounds.to_string(),
            ];
            children.push(Child::spawn("ring-rank", &args, &[])?);
        }
        let pids: Vec<i32> = children.iter().map(Child::pid).collect();
        let wd = Watchdog::start(SAMPLE_LIMIT, move || pids.iter().for_each(|&p| kill_pid(p)));
        let ready = wait_line(&sh.ready, n as u32);
        let failed = sh.failed.v.load(Ordering::Acquire);
        if failed > 0 || ready.is_err() {
            return Err(format!(
                "ring of {n}: {failed} ranks failed to set up ({ready:?})"
            ));
        }
        let t0 = now_ns();
        sh.go.v.store(1, Ordering::Release);
        futex_wake(&sh.go.v, i32::MAX, Scope::Process);
        wait_line(&sh.done, n as u32)?;
        let dt = now_ns() - t0;
        let fired = wd.fired();
        drop(wd);
        for c in children {
            c.finish(Duration::from_secs(10))?;
        }
        if fired {
            return Err("ring sample overran; ranks killed".into());
        }
        Ok(dt as f64 / rounds as f64)
    })();
    if mech == RingMech::Sem {
        for s in sh.sems.iter().take(n).flatten() {
            // SAFETY: initialised above; every rank has exited (or been killed).
            unsafe { libc::sem_destroy(s.0.get()) };
        }
    }
    r
}

/// [`sample`] with [`BUSY_LOOPS`] threads of this process spinning (unpinned, default
/// priority) from before the ranks start until they have finished.
pub fn sample_beside_busy(ns: &str, mech: RingMech, n: usize, rounds: u64) -> Result<f64, String> {
    let _busy = BusyLoops::start(BUSY_LOOPS)?;
    sample(ns, mech, n, rounds)
}

/// Threads that keep a CPU busy until dropped.
struct BusyLoops {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BusyLoops {
    fn start(k: usize) -> Result<BusyLoops, String> {
        let mut b = BusyLoops {
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::with_capacity(k),
        };
        for i in 0..k {
            let stop = Arc::clone(&b.stop);
            let t = std::thread::Builder::new()
                .name(format!("busy-loop-{i}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .map_err(|e| format!("busy loop thread: {e}"))?;
            b.threads.push(t);
        }
        Ok(b)
    }
}

impl Drop for BusyLoops {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn bump(line: &Line) {
    line.v.fetch_add(1, Ordering::AcqRel);
    futex_wake(&line.v, i32::MAX, Scope::Process);
}

/// The child role `ring-rank`.
pub fn rank_main(args: &RoleArgs) -> Result<String, String> {
    let n: usize = args.num("n")?;
    let rank: usize = args.num("rank")?;
    let rounds: u64 = args.num("rounds")?;
    if !(2..=MAX_RANKS).contains(&n) || rank >= n {
        return Err(format!("rank {rank} of {n}"));
    }
    let shm = Shm::from_fd(args.num("shm")?, SHM_LEN)?;
    let sh: &RingShared = shm.get();
    let r = match args.get("mech")? {
        "notify" => notify_rank(args.get("ns")?, sh, n, rank, rounds),
        "sem" => sem_rank(sh, n, rank, rounds),
        other => Err(format!("unknown --mech {other}")),
    };
    if r.is_err() {
        bump(&sh.failed);
        // Let the parent stop waiting for a rank that will never be ready.
        bump(&sh.ready);
    }
    r.map(|()| String::new())
}

fn notify_rank(
    ns: &str,
    sh: &RingShared,
    n: usize,
    rank: usize,
    rounds: u64,
) -> Result<(), String> {
    let sim = open_default(ns, Soc::Ascend910B)?;
    let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
    let data = sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?;
    let ack = sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?;
    for (i, h) in [data, ack].into_iter().enumerate() {
        let key = sim
            .export_key(h, ExportFlags::DISABLE_PID_VALIDATION)
            .map_err(e2s)?;
        put_key(&sh.keys[rank][i], key.as_str())?;
    }
    bump(&sh.exported);
    wait_line(&sh.exported, n as u32)?;
    let import = |r: usize, i: usize| -> Result<_, String> {
        let key = get_key(&sh.keys[r][i])?;
        sim.import_by_key(DEV, &key, ImportFlags::empty())
            .map_err(e2s)
    };
    let next_data = import(next, 0)?;
    let prev_ack = import(prev, 1)?;
    let s = sim.create_stream(DEV).map_err(e2s)?;
    bump(&sh.ready);
    wait_line(&sh.go, 1)?;
    let run = || -> Result<(), String> {
        for _ in 0..rounds {
            if rank == 0 {
                sim.record(next_data, s).map_err(e2s)?;
                sim.wait_and_reset(ack, s, Timeout::Forever).map_err(e2s)?;
                sim.wait_and_reset(data, s, Timeout::Forever).map_err(e2s)?;
                sim.record(prev_ack, s).map_err(e2s)?;
            } else {
                sim.wait_and_reset(data, s, Timeout::Forever).map_err(e2s)?;
                sim.record(prev_ack, s).map_err(e2s)?;
                sim.record(next_data, s).map_err(e2s)?;
                sim.wait_and_reset(ack, s, Timeout::Forever).map_err(e2s)?;
            }
        }
        sim.synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
            .map_err(e2s)
    };
    let r = run();
    bump(&sh.done);
    let _ = sim.destroy_stream(s, StreamDestroy::Discard);
    for h in [next_data, prev_ack, data, ack] {
        let _ = sim.destroy_notify(h);
    }
    r
}

fn sem_post(s: &SemCell) -> Result<(), String> {
    // SAFETY: initialised by the parent, process-shared.
    if unsafe { libc::sem_post(s.0.get()) } < 0 {
        return Err(format!("sem_post: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

fn sem_wait(s: &SemCell) -> Result<(), String> {
    loop {
        // SAFETY: as above.
        if unsafe { libc::sem_wait(s.0.get()) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(format!("sem_wait: {e}"));
        }
    }
}

fn sem_rank(sh: &RingShared, n: usize, rank: usize, rounds: u64) -> Result<(), String> {
    let (next, prev) = ((rank + 1) % n, (rank + n - 1) % n);
    let [data, ack] = &sh.sems[rank];
    let (next_data, prev_ack) = (&sh.sems[next][0], &sh.sems[prev][1]);
    bump(&sh.ready);
    wait_line(&sh.go, 1)?;
    let r = (|| {
        for _ in 0..rounds {
            if rank == 0 {
                sem_post(next_data)?;
                sem_wait(ack)?;
                sem_wait(data)?;
                sem_post(prev_ack)?;
            } else {
                sem_wait(data)?;
                sem_post(prev_ack)?;
                sem_post(next_data)?;
                sem_wait(ack)?;
            }
        }
        Ok(())
    })();
    bump(&sh.done);
    r
}

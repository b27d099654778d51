//! A thread that queued tasks on a stream and then blocks in its own code holds nothing of
//! that stream back: the tasks queued after it by other threads run, and a synchronize ends.
//! The guard for any enqueue that claims queue places ahead of its tasks (issue #25's
//! batched claim, `bench/README.md` History, 2026-12-06 pipe15/pipe16/hand17): a place
//! claimed and never filled would hold back every task behind it until its thread's next
//! call, and a thread that blocks on something only those tasks do never makes one.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use acl_notify_core::{CreateFlags, HostCall, HostOps, NotifyResources, Soc, StreamOps, SyncWait};
use acl_notify_sim::NamespaceGuard;

/// The gate's state: 0 held, 1 open.
static GATE: AtomicU32 = AtomicU32::new(0);
/// Set by the host function the main thread queues behind the blocked thread's records.
static RAN: AtomicU32 = AtomicU32::new(0);

/// Holds the stream's worker until the gate opens (at most 20 s).
unsafe extern "C" fn gate(_: *mut c_void) {
    let end = Instant::now() + Duration::from_secs(20);
    while GATE.load(Ordering::SeqCst) == 0 && Instant::now() < end {
        thread::sleep(Duration::from_millis(1));
    }
}

unsafe extern "C" fn mark(_: *mut c_void) {
    RAN.store(1, Ordering::SeqCst);
}

/// Records queued by a thread while the stream is held (a backlog, as when a host feeds a
/// running stream), that thread then blocking until the main thread is done; the main
/// thread's host function behind them runs and its synchronize ends. 43 records (tickets 1
/// to 43 after the gate's 0): a claim of 8 or 16 places ahead, begun at the first record,
/// the second (the first takes the slow path that fills the thread's pair cache) or the
/// 17th (once a backlog of 16 is seen), leaves places unused. Seen failing on the `hand17-probe` branch (reservations of 8, filled only
/// at the reserving thread's next call): the synchronize ran out after 20 s.
#[test]
fn a_thread_blocked_after_its_records_holds_back_no_task_of_another() {
    let (sim, _ns) = NamespaceGuard::open_sim(
        format!("enqblocked-{}", std::process::id()),
        Soc::Ascend910B,
        1,
    )
    .unwrap();
    let s = sim.create_stream(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    // SAFETY: both functions ignore their argument and do not unwind.
    let (held, marked) = unsafe {
        (
            HostCall::new(gate, std::ptr::null_mut()),
            HostCall::new(mark, std::ptr::null_mut()),
        )
    };
    sim.launch_host_func(s, held).unwrap();
    let (queued_tx, queued_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let feeder = {
        let sim = sim.clone();
        thread::spawn(move || {
            for _ in 0..43 {
                sim.record(n, s).unwrap();
            }
            queued_tx.send(()).unwrap();
            // Blocks in its own code: no call of the simulator until the main thread is done.
            let _ = done_rx.recv_timeout(Duration::from_secs(60));
        })
    };
    queued_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the feeding thread queued its records");
    GATE.store(1, Ordering::SeqCst);
    sim.launch_host_func(s, marked).unwrap();
    let synced = sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)));
    let ran = RAN.load(Ordering::SeqCst);
    done_tx.send(()).unwrap();
    feeder.join().unwrap();
    synced.expect("the stream ran every task while the feeding thread was blocked");
    assert_eq!(
        ran, 1,
        "the host function behind the blocked thread's records ran"
    );
    // The records ran too: the notify is set.
    assert!(sim.try_consume(n).unwrap());
}

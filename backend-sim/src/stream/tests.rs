//! Tests of the stream engine: ordering, errors, synchronize, destroy, cancellation, abort.

use super::*;
use cancel::Waker;
use std::sync::atomic::AtomicUsize;
use worker::gettid;

/// Generous bound for anything a test waits on, in time the process could run
/// ([`crate::progress::Watch::this_process`]: not while it is stopped, nor the part its most
/// delayed thread waited for a CPU); a healthy run takes milliseconds. A bound of wall time
/// broke when the process was paused (SIGSTOP, by job control or a benchmark that pauses other
/// jobs): `back_to_back_enqueues_need_no_wake_syscall`'s 20 s `synchronize` failed with 507046
/// after a 25 s stop.
const LONG: Duration = Duration::from_secs(20);

type S = Stream<Error>;

/// Queues a task on `s` that adds one to `ran` (also `stop`'s tests).
pub(super) fn count_on(s: &S, ran: &Arc<AtomicUsize>) {
    let r = Arc::clone(ran);
    s.enqueue(move |_| {
        r.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
}

/// Queues a task on `s` that holds the stream until the returned gate opens (and fails if it
/// does not within [`LONG`]).
fn hold(s: &S) -> Arc<Gate> {
    let gate = Gate::new();
    let g = Arc::clone(&gate);
    s.enqueue(move |_| {
        assert!(g.wait(LONG), "gate never opened");
        Ok(())
    })
    .unwrap();
    gate
}

/// A one-shot latch with a bounded wait.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }
    fn open(&self) {
        *lock(&self.open) = true;
        self.cv.notify_all();
    }
    /// True if opened before the process could run for `d` (see [`LONG`]).
    fn wait(&self, d: Duration) -> bool {
        let mut w = watch(d);
        let mut g = lock(&self.open);
        while !*g && w.step().is_ok() {
            g = self
                .cv
                .wait_timeout(g, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *g
    }
}

/// A watch on this process that gives up once it could run for `d` (see [`LONG`]).
fn watch(d: Duration) -> crate::progress::Watch {
    crate::progress::Watch::this_process(d)
}

/// `s.synchronize` bounded by [`LONG`] of the time the process could run, not by wall time:
/// its answer (a test that wants 507046 asks `synchronize` for it). It waits for the tasks
/// issued when it is called, in slices of [`crate::progress::LOOK`] (a slice that times out
/// clears nothing).
pub(super) fn synced<J: Job<Error>>(s: &Stream<Error, J>) -> Result<(), Error> {
    let target = s.sync_target()?;
    // Made at the first slice's end: a look reads every thread's `/proc` files.
    let mut w = None;
    loop {
        match s.sync_through(target, SyncWait::AtMost(crate::progress::LOOK)) {
            Err(Error::StreamSyncTimeout) => {}
            r => return r,
        }
        if let Err(hang) = w.get_or_insert_with(|| watch(LONG)).step() {
            panic!("synchronize: the process {hang}");
        }
    }
}

/// Runs `f` on a thread and returns its result, failing the test if the process could run
/// for `d` meanwhile (see [`LONG`]).
fn within<T: Send + 'static>(d: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    let mut w = watch(d);
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(v) => return v,
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("the thread panicked"),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Err(hang) = w.step() {
            panic!("still running: the process {hang}");
        }
    }
}

/// Polls `cond` every millisecond until the process could run for `d` (see [`LONG`]; also
/// `stop`'s tests).
pub(super) fn eventually(d: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let mut w = watch(d);
    while w.step().is_ok() {
        if cond() {
            return true;
        }
        thread::sleep(Duration::from_millis(1));
    }
    cond()
}

/// Counts drops of the value it is captured in.
struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// (state char, utime + stime in ticks) of a thread of this process.
fn thread_stat(tid: i32) -> (char, u64) {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .expect("the worker thread exists");
    // The command name may contain spaces and parentheses: split after the last ')'.
    let rest = &text[text.rfind(')').expect("stat has (comm)") + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let state = f[0].chars().next().expect("state field");
    let utime: u64 = f[11].parse().expect("utime");
    let stime: u64 = f[12].parse().expect("stime");
    (state, utime + stime)
}

#[test]
fn order_is_preserved_across_thousands_of_tasks() {
    let s = S::new("t-order").unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    const N: usize = 20_000;
    for i in 0..N {
        let seen = Arc::clone(&seen);
        s.enqueue(move |_| {
            lock(&seen).push(i);
            Ok(())
        })
        .unwrap();
    }
    assert_eq!(synced(&s), Ok(()));
    let seen = lock(&seen);
    assert_eq!(seen.len(), N);
    assert!(
        seen.iter().enumerate().all(|(i, &v)| i == v),
        "out of order"
    );
    let st = s.stats();
    assert_eq!(
        (st.enqueued, st.completed, st.failed),
        (N as u64, N as u64, 0)
    );
}

#[test]
fn each_producers_order_is_preserved_with_concurrent_producers() {
    let s = Arc::new(S::spawn(StreamConfig::new("t-mp").capacity(16)).unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    const P: usize = 4;
    const N: usize = 3_000;
    let producers: Vec<_> = (0..P)
        .map(|p| {
            let (s, seen) = (Arc::clone(&s), Arc::clone(&seen));
            thread::spawn(move || {
                for i in 0..N {
                    let seen = Arc::clone(&seen);
                    s.enqueue(move |_| {
                        lock(&seen).push((p, i));
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    assert_eq!(synced(&s), Ok(()));
    let seen = lock(&seen);
    assert_eq!(seen.len(), P * N);
    let mut next = [0usize; P];
    for &(p, i) in seen.iter() {
        assert_eq!(i, next[p], "producer {p} out of order");
        next[p] += 1;
    }
}

#[test]
fn enqueue_waits_for_room_instead_of_failing() {
    const CAP: usize = 8;
    const N: usize = 1_000;
    let s = Arc::new(S::spawn(StreamConfig::new("t-full").capacity(CAP)).unwrap());
    let gate = hold(&s);
    let ran = Arc::new(AtomicUsize::new(0));
    let (s2, ran2) = (Arc::clone(&s), Arc::clone(&ran));
    let producer = thread::spawn(move || {
        for i in 0..N {
            let ran = Arc::clone(&ran2);
            s2.enqueue(move |_| {
                // In order: task i runs when exactly i tasks ran before it.
                assert_eq!(ran.fetch_add(1, Ordering::SeqCst), i);
                Ok(())
            })
            .expect("enqueue must not fail on a full queue");
        }
    });
    // The producer outruns the blocked task: the queue fills and stays full.
    assert!(eventually(LONG, || s.queued() == CAP));
    thread::sleep(Duration::from_millis(20));
    assert_eq!(s.queued(), CAP);
    assert!(
        !producer.is_finished(),
        "producer should be waiting for room"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    gate.open();
    producer.join().unwrap();
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), N);
    assert_eq!(s.stats().failed, 0);
}

/// A producer waiting for room sees it once the worker took tasks out of the queue, even if
/// the stream then stalls with the queue still more than half full, where the worker's
/// wake-up does not come (`queue::RECHECK`). Until 2026-12-05 the producer slept until the
/// queue was down to half, so here for its whole `enqueue_timeout` (then failed with
/// `StreamTaskFull`) while a quarter of the slots were free.
#[test]
fn a_producer_sees_room_in_a_queue_that_stalls_more_than_half_full() {
    const CAP: usize = 64;
    let s = Arc::new(S::spawn(StreamConfig::new("t-stall").capacity(CAP)).unwrap());
    let first = hold(&s);
    assert!(
        eventually(LONG, || s.queued() == 0),
        "the worker holds the first task"
    );
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..4 {
        count_on(&s, &ran);
    }
    // The fifth task stalls the stream, the worker having taken it in its first batch of
    // `TAKE` (16): the 48 behind it stay queued, more than half the capacity.
    let stall = hold(&s);
    while s.queued() < CAP {
        count_on(&s, &ran);
    }
    let s2 = Arc::clone(&s);
    let r2 = Arc::clone(&ran);
    let producer = thread::spawn(move || count_on(&s2, &r2));
    thread::sleep(Duration::from_millis(20));
    assert!(
        !producer.is_finished(),
        "the queue is full: the producer waits"
    );
    first.open();
    assert!(eventually(LONG, || ran.load(Ordering::SeqCst) == 4));
    // Well within the enqueue timeout (60 s) the producer would otherwise sleep through,
    // and not so short that a loaded machine (or a pause of this process) fails it.
    assert!(
        eventually(LONG, || producer.is_finished()),
        "room for {} tasks, yet the producer still waits",
        CAP - s.queued()
    );
    producer.join().unwrap();
    stall.open();
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), CAP - 5 + 4 + 1);
}

#[test]
fn enqueue_gives_up_on_a_queue_that_stays_full_and_loses_nothing_queued() {
    const CAP: usize = 4;
    let limit = Duration::from_millis(150);
    let s = S::spawn(
        StreamConfig::new("t-stuck")
            .capacity(CAP)
            .enqueue_timeout(Some(limit)),
    )
    .unwrap();
    let (gate, started) = (Gate::new(), Arc::new(AtomicBool::new(false)));
    let (g, st) = (Arc::clone(&gate), Arc::clone(&started));
    s.enqueue(move |_| {
        st.store(true, Ordering::SeqCst);
        assert!(g.wait(LONG), "gate never opened");
        Ok(())
    })
    .unwrap();
    // The head task runs (out of the queue), then the queue fills behind it.
    assert!(eventually(LONG, || started.load(Ordering::SeqCst)));
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..CAP {
        count_on(&s, &ran);
    }
    assert_eq!(s.queued(), CAP);
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = DropCounter(Arc::clone(&dropped));
    let t0 = Instant::now();
    let r = s.enqueue(move |_| {
        let _keep = &d;
        Ok(())
    });
    let took = t0.elapsed();
    assert_eq!(r, Err(Error::StreamTaskFull));
    assert!(
        took >= limit,
        "gave up after {took:?}, before the {limit:?} bound"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the refused task is dropped unrun"
    );
    // The stream goes on once its head finishes: every task queued before runs.
    gate.open();
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), CAP);
    count_on(&s, &ran);
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), CAP + 1);
    assert_eq!(s.stats().failed, 0);
}

#[test]
fn synchronize_reports_the_first_error_once_and_the_stream_goes_on() {
    let s = S::new("t-err").unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
    s.enqueue(|_| Err(Error::IpcError)).unwrap();
    count_on(&s, &ran);
    assert_eq!(synced(&s), Err(Error::TaskTimeout));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "tasks after a failure still run"
    );
    assert_eq!(synced(&s), Ok(()), "reported once, then cleared");
    assert!(!s.has_error());
    count_on(&s, &ran);
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert_eq!(s.stats().failed, 2);
}

#[test]
fn synchronize_with_timeout_expires_while_a_task_blocks() {
    let s = S::new("t-sto").unwrap();
    s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
    let gate = hold(&s);
    let t0 = Instant::now();
    let r = s.synchronize(SyncWait::AtMost(Duration::from_millis(50)));
    assert_eq!(r, Err(Error::StreamSyncTimeout));
    assert!(t0.elapsed() >= Duration::from_millis(50), "returned early");
    assert_eq!(
        s.synchronize(SyncWait::AtMost(Duration::ZERO)),
        Err(Error::StreamSyncTimeout),
        "zero polls"
    );
    assert!(s.has_error(), "a timed-out synchronize clears nothing");
    gate.open();
    assert_eq!(synced(&s), Err(Error::TaskTimeout));
    assert_eq!(s.synchronize(SyncWait::AtMost(Duration::ZERO)), Ok(()));
    assert_eq!(s.synchronize(SyncWait::Forever), Ok(()));
}

#[test]
fn query_is_not_ready_until_everything_ran() {
    let s = S::new("t-query").unwrap();
    assert_eq!(s.query(), StreamStatus::Complete);
    let gate = hold(&s);
    s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
    assert_eq!(s.query(), StreamStatus::NotReady);
    gate.open();
    assert!(eventually(LONG, || s.query() == StreamStatus::Complete));
    assert!(s.has_error(), "query leaves the error for synchronize");
    assert_eq!(synced(&s), Err(Error::TaskTimeout));
}

#[test]
fn several_threads_synchronize_at_once() {
    let s = Arc::new(S::new("t-msync").unwrap());
    let gate = hold(&s);
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let s = Arc::clone(&s);
            thread::spawn(move || synced(&s))
        })
        .collect();
    thread::sleep(Duration::from_millis(20));
    assert!(waiters.iter().all(|w| !w.is_finished()));
    gate.open();
    for w in waiters {
        assert_eq!(w.join().unwrap(), Ok(()));
    }
}

#[test]
fn discard_drops_pending_tasks_and_interrupts_the_blocked_one() {
    let s = S::new("t-discard").unwrap();
    // The blocked task follows the module's protocol: a waker that changes the state its
    // wait checks, registered before blocking.
    let woke = Arc::new((Mutex::new(false), Condvar::new()));
    let outcome = Arc::new(Mutex::new(None));
    let started = Gate::new();
    let (w, o, st) = (
        Arc::clone(&woke),
        Arc::clone(&outcome),
        Arc::clone(&started),
    );
    s.enqueue(move |ctx| {
        let w2 = Arc::clone(&w);
        let _guard = ctx.on_cancel(move || {
            *lock(&w2.0) = true;
            w2.1.notify_all();
        });
        st.open();
        let g = lock(&w.0);
        let (g, res) =
            w.1.wait_timeout_while(g, LONG, |woken| !*woken)
                .unwrap_or_else(PoisonError::into_inner);
        *lock(&o) = Some((*g, res.timed_out(), ctx.is_cancelled()));
        Err(Error::TaskTimeout)
    })
    .unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(AtomicUsize::new(0));
    const PENDING: usize = 50;
    for _ in 0..PENDING {
        let d = DropCounter(Arc::clone(&drops));
        let b = Arc::clone(&bodies);
        s.enqueue(move |_| {
            let _d = d;
            b.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    }
    assert!(started.wait(LONG));
    // That the cancel interrupted the task is its outcome below (woken, not timed out), not
    // a time (a 5 s bound stood here until 2026-12-07).
    assert_eq!(s.destroy(StreamDestroy::Discard), Ok(()));
    assert_eq!(drops.load(Ordering::SeqCst), PENDING, "captures released");
    assert_eq!(
        bodies.load(Ordering::SeqCst),
        0,
        "discarded tasks never run"
    );
    // Woken by the waker, not by the 20 s timeout, and the task saw the cancellation.
    assert_eq!(*lock(&outcome), Some((true, false, true)));
    let st = s.stats();
    assert_eq!(st.discarded, PENDING as u64);
    assert_eq!(st.completed, 1);
    assert_eq!(s.query(), StreamStatus::Complete);
    assert_eq!(s.enqueue(|_| Ok(())), Err(Error::InvalidHandle));
    assert_eq!(synced(&s), Err(Error::InvalidHandle));
    assert_eq!(s.destroy(StreamDestroy::Discard), Err(Error::InvalidHandle));
}

#[test]
fn small_plain_wakers_are_kept_inline_and_others_boxed() {
    static HITS: AtomicUsize = AtomicUsize::new(0);
    let one: &'static AtomicUsize = &HITS;
    let (a, b) = (7usize, 9usize);
    let inline = Waker::new(move || {
        one.fetch_add(a, Ordering::SeqCst);
    });
    // Three words: too big for the inline room.
    let big = Waker::new(move || {
        one.fetch_add(a + b, Ordering::SeqCst);
    });
    let arc = Arc::new(AtomicUsize::new(0));
    let a2 = Arc::clone(&arc);
    // Has drop glue (an `Arc`): boxed, and dropped with the waker.
    let owning = Waker::new(move || {
        a2.fetch_add(1, Ordering::SeqCst);
    });
    assert!(matches!(inline, Waker::Inline { .. }));
    assert!(matches!(owning, Waker::Boxed(_)));
    inline.call();
    owning.call();
    assert_eq!(HITS.load(Ordering::SeqCst), 7);
    assert_eq!(arc.load(Ordering::SeqCst), 1);
    big.call();
    assert_eq!(HITS.load(Ordering::SeqCst), 7 + 16);
    drop(owning);
    assert_eq!(
        Arc::strong_count(&arc),
        1,
        "the boxed waker's capture was dropped"
    );
}

#[test]
fn an_inline_waker_interrupts_the_blocked_task() {
    // What the simulator's waits register: a waker that owns nothing (here a `'static`
    // reference), stored without a box.
    let s = S::new("t-inline").unwrap();
    let woke: &'static (Mutex<bool>, Condvar) = Box::leak(Box::default());
    let outcome = Arc::new(Mutex::new(None));
    let started = Gate::new();
    let (o, st) = (Arc::clone(&outcome), Arc::clone(&started));
    let shared = Arc::clone(&s.shared);
    s.enqueue(move |ctx| {
        let _guard = ctx.on_cancel(move || {
            *lock(&woke.0) = true;
            woke.1.notify_all();
        });
        let inline = matches!(*lock(&shared.control.waker), Some(Waker::Inline { .. }));
        st.open();
        let g = lock(&woke.0);
        let (g, res) = woke
            .1
            .wait_timeout_while(g, LONG, |woken| !*woken)
            .unwrap_or_else(PoisonError::into_inner);
        *lock(&o) = Some((inline, *g, res.timed_out()));
        Ok(())
    })
    .unwrap();
    assert!(started.wait(LONG));
    assert_eq!(s.destroy(StreamDestroy::Discard), Ok(()));
    // Registered inline, and woken by it rather than by the timeout.
    assert_eq!(*lock(&outcome), Some((true, true, false)));
}

#[test]
fn on_cancel_after_cancellation_wakes_at_once() {
    let s = S::new("t-late").unwrap();
    let gate = Gate::new();
    let fired = Arc::new(AtomicBool::new(false));
    let (g, f) = (Arc::clone(&gate), Arc::clone(&fired));
    let started = Gate::new();
    let st = Arc::clone(&started);
    s.enqueue(move |ctx| {
        st.open();
        // Ignore the cancellation until the test has finished cancelling...
        while !ctx.is_cancelled() {
            thread::yield_now();
        }
        assert!(g.wait(LONG));
        // ...then register: the waker must run immediately.
        let f2 = Arc::clone(&f);
        let _guard = ctx.on_cancel(move || f2.store(true, Ordering::SeqCst));
        Ok(())
    })
    .unwrap();
    assert!(started.wait(LONG));
    let s = Arc::new(s);
    let s2 = Arc::clone(&s);
    let destroyer = thread::spawn(move || s2.destroy(StreamDestroy::Discard));
    assert!(eventually(LONG, || s
        .shared
        .control
        .cancelled
        .load(Ordering::SeqCst)));
    assert!(!fired.load(Ordering::SeqCst));
    gate.open();
    assert_eq!(destroyer.join().unwrap(), Ok(()));
    assert!(fired.load(Ordering::SeqCst));
}

#[test]
fn ctx_sleep_is_cut_short_by_discard() {
    let s = S::new("t-sleep").unwrap();
    let result = Arc::new(Mutex::new(None));
    let r = Arc::clone(&result);
    let started = Gate::new();
    let st = Arc::clone(&started);
    s.enqueue(move |ctx| {
        st.open();
        *lock(&r) = Some(ctx.sleep(LONG));
        Ok(())
    })
    .unwrap();
    // A short sleep on another stream completes normally.
    let s2 = S::new("t-sleep2").unwrap();
    let short = Arc::new(Mutex::new(None));
    let sh = Arc::clone(&short);
    s2.enqueue(move |ctx| {
        *lock(&sh) = Some(ctx.sleep(Duration::from_millis(5)));
        Ok(())
    })
    .unwrap();
    assert_eq!(synced(&s2), Ok(()));
    assert_eq!(*lock(&short), Some(Ok(())));

    assert!(started.wait(LONG));
    // Drop = Discard; a hang guard in time the process could run. Cut short is the sleep's
    // `Cancelled` (one not cut short returns `Ok` after `LONG`), not a time: a 5 s bound stood
    // here until 2026-12-07.
    within(LONG, move || drop(s));
    assert_eq!(*lock(&result), Some(Err(Cancelled)));
}

/// A discard of a stream that is draining a task that never ends turns the drain into a
/// discard: both return promptly (the drain with 107017), the queued tasks never run.
#[test]
fn a_discard_overtakes_a_drain_in_progress() {
    let s = Arc::new(S::new("t-overtake").unwrap());
    let started = Gate::new();
    let st = Arc::clone(&started);
    s.enqueue(move |ctx| {
        st.open();
        let _ = ctx.sleep(Duration::from_secs(3600));
        Ok(())
    })
    .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    count_on(&s, &ran);
    assert!(started.wait(LONG));
    let (tx, rx) = mpsc::channel();
    let drainer = {
        let s = Arc::clone(&s);
        thread::spawn(move || {
            let _ = tx.send(s.destroy(StreamDestroy::Drain));
        })
    };
    // The drain has begun once the stream refuses new work.
    assert!(eventually(LONG, || s.enqueue(|_| Ok(())).is_err()));
    // The task sleeps an hour: `within` and the `recv_timeout` are the hang guards (a 5 s
    // bound on the whole stood here until 2026-12-07).
    let discard = {
        let s = Arc::clone(&s);
        within(LONG, move || s.destroy(StreamDestroy::Discard))
    };
    assert_eq!(discard, Ok(()));
    assert_eq!(rx.recv_timeout(LONG), Ok(Err(Error::InvalidHandle)));
    drainer.join().unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(s.query(), StreamStatus::Complete);
    assert_eq!(s.destroy(StreamDestroy::Discard), Err(Error::InvalidHandle));
}

/// A drain started by one of the stream's own tasks goes on after the last reference to
/// the stream is dropped: dropping does not turn it into a discard.
#[test]
fn dropping_a_stream_its_own_task_drains_still_runs_the_rest() {
    let s = Arc::new(S::new("t-self-drain").unwrap());
    let gate = Gate::new();
    let g = Arc::clone(&gate);
    s.enqueue(move |_| {
        g.wait(LONG);
        Ok(())
    })
    .unwrap();
    let me = Arc::clone(&s);
    s.enqueue(move |_| {
        assert_eq!(me.destroy(StreamDestroy::Drain), Ok(()));
        drop(me); // The last reference: dropped on the worker, mid-drain.
        Ok(())
    })
    .unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    count_on(&s, &ran);
    drop(s);
    gate.open();
    assert!(eventually(LONG, || ran.load(Ordering::SeqCst) == 1));
}

/// Discarding streams in two passes — cancel all, then wait for all — ends a task of one
/// that waits for another, whatever the order: one destroy at a time would wait for the
/// first stream's task, which waits for the second stream, not cancelled yet.
#[test]
fn begin_destroy_on_all_then_wait_ends_a_task_waiting_on_another_stream() {
    let s1 = Arc::new(S::new("t-two-pass-1").unwrap());
    let s2 = Arc::new(S::new("t-two-pass-2").unwrap());
    s2.enqueue(move |ctx| {
        let _ = ctx.sleep(Duration::from_secs(3600));
        Ok(())
    })
    .unwrap();
    let started = Gate::new();
    let st = Arc::clone(&started);
    let other = Arc::clone(&s2);
    let synced = Arc::new(Mutex::new(None));
    let sy = Arc::clone(&synced);
    s1.enqueue(move |_| {
        st.open();
        *lock(&sy) = Some(other.synchronize(SyncWait::AtMost(LONG)));
        Ok(())
    })
    .unwrap();
    assert!(started.wait(LONG));
    // The tasks sleep an hour: `within` is the hang guard (a 5 s bound stood here until
    // 2026-12-07).
    let both = [Arc::clone(&s1), Arc::clone(&s2)];
    within(LONG, move || {
        for s in &both {
            s.begin_destroy(StreamDestroy::Discard).unwrap();
        }
        for s in &both {
            s.wait_destroyed();
        }
    });
    assert_eq!(*lock(&synced), Some(Err(Error::InvalidHandle)));
}

/// A synchronize already waiting when a draining destroy starts gets what its tasks came
/// to (here a task's error), not 107017: the drain ran them all.
#[test]
fn a_synchronize_waiting_through_a_drain_reports_the_task_error() {
    let s = Arc::new(S::new("t-syncdrain").unwrap());
    let gate = Gate::new();
    let g = Arc::clone(&gate);
    s.enqueue(move |_| {
        assert!(g.wait(LONG));
        Err(Error::TaskTimeout)
    })
    .unwrap();
    let s2 = Arc::clone(&s);
    let syncer = thread::spawn(move || s2.synchronize(SyncWait::AtMost(LONG)));
    // Waiting (counted as a watcher: past its look at the stream's state) before the destroy
    // starts, and the destroy started (draining) before the task ends: states, not sleeps (a
    // syncer thread that had not run within the 20 + 20 ms it was given met a destroyed
    // stream, 107017).
    assert!(eventually(LONG, || s
        .shared
        .watchers
        .load(Ordering::SeqCst)
        == 1));
    let s3 = Arc::clone(&s);
    let destroyer = thread::spawn(move || s3.destroy(StreamDestroy::Drain));
    assert!(eventually(LONG, || {
        s.shared.state.load(Ordering::SeqCst) == DRAINING
    }));
    gate.open();
    assert_eq!(destroyer.join().unwrap(), Ok(()));
    assert_eq!(syncer.join().unwrap(), Err(Error::TaskTimeout));
    // Callers that come after the destroy find the stream gone.
    assert_eq!(s.synchronize(SyncWait::Forever), Err(Error::InvalidHandle));
}

/// A discard that comes after a drain has run everything (the worker is leaving) has
/// nothing to overtake: the drain stays a drain, so its caller is not told its tasks were
/// discarded.
#[test]
fn a_discard_after_a_finished_drain_overtakes_nothing() {
    let s = S::new("t-late").unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    count_on(&s, &ran);
    assert_eq!(s.destroy(StreamDestroy::Drain), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(s.begin_destroy(StreamDestroy::Discard), Ok(()));
    s.wait_destroyed();
    assert_eq!(s.shared.state.load(Ordering::SeqCst), DRAINING);
}

#[test]
fn drain_runs_every_queued_task_before_returning() {
    let s = S::new("t-drain").unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        let r = Arc::clone(&ran);
        s.enqueue(move |_| {
            thread::sleep(Duration::from_micros(50));
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    }
    assert_eq!(s.destroy(StreamDestroy::Drain), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 100);
    assert_eq!(s.stats().discarded, 0);
    assert_eq!(s.enqueue(|_| Ok(())), Err(Error::InvalidHandle));
}

#[test]
fn blocked_enqueuers_get_invalid_handle_when_the_stream_is_destroyed() {
    let s = Arc::new(S::spawn(StreamConfig::new("t-bdes").capacity(1)).unwrap());
    let gate = Gate::new();
    let g = Arc::clone(&gate);
    let started = Gate::new();
    let st = Arc::clone(&started);
    s.enqueue(move |ctx| {
        st.open();
        let g2 = Arc::clone(&g);
        let _w = ctx.on_cancel(move || g2.open());
        assert!(g.wait(LONG));
        Ok(())
    })
    .unwrap();
    assert!(started.wait(LONG));
    s.enqueue(|_| Ok(())).unwrap(); // fills the queue
    let s2 = Arc::clone(&s);
    let blocked = thread::spawn(move || s2.enqueue(|_| Ok(())));
    thread::sleep(Duration::from_millis(20));
    assert!(!blocked.is_finished());
    assert_eq!(s.destroy(StreamDestroy::Discard), Ok(()));
    assert_eq!(blocked.join().unwrap(), Err(Error::InvalidHandle));
}

#[test]
fn a_panicking_task_becomes_an_error_not_a_dead_stream() {
    let s = S::new("t-panic").unwrap();
    s.enqueue(|_| panic!("boom in a host function")).unwrap();
    let ran = Arc::new(AtomicBool::new(false));
    let r = Arc::clone(&ran);
    s.enqueue(move |_| {
        r.store(true, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    assert_eq!(synced(&s), Err(Error::DrvInternalError));
    assert!(ran.load(Ordering::SeqCst), "the stream kept going");
    assert_eq!(s.last_panic().as_deref(), Some("boom in a host function"));
    assert_eq!(synced(&s), Ok(()));
    let st = s.stats();
    assert_eq!((st.panicked, st.failed, st.completed), (1, 1, 2));
}

#[test]
fn panics_inside_one_taken_batch_spare_the_tasks_around_them() {
    let s = S::new("t-panics").unwrap();
    let hold = Gate::new();
    let h = Arc::clone(&hold);
    s.enqueue(move |_| {
        assert!(h.wait(LONG), "gate never opened");
        Ok(())
    })
    .unwrap();
    // Queued behind the gate, so the worker takes them together.
    let order = Arc::new(Mutex::new(Vec::new()));
    for i in 0..8u32 {
        let o = Arc::clone(&order);
        s.enqueue(move |_| {
            if i % 3 == 1 {
                panic!("boom {i}");
            }
            lock(&o).push(i);
            Ok(())
        })
        .unwrap();
    }
    hold.open();
    assert_eq!(synced(&s), Err(Error::DrvInternalError));
    assert_eq!(*lock(&order), vec![0, 2, 3, 5, 6]);
    assert_eq!(s.last_panic().as_deref(), Some("boom 7"));
    let st = s.stats();
    assert_eq!((st.panicked, st.failed, st.completed), (3, 3, 9));
    assert_eq!(s.query(), StreamStatus::Complete);
}

/// A worker that unwinds outside the tasks' unwind guards (forced here; only a bug of ours
/// would) leaves nothing behind: the tasks it had taken and those still queued are dropped
/// unrun, releasing what they hold, `synchronize` returns 507899 instead of waiting for
/// them, and the stream takes no more tasks.
#[test]
fn a_worker_that_unwinds_drops_and_retires_every_task_it_held() {
    let s = Arc::new(S::new("t-unwind").unwrap());
    let (started, gate) = (Gate::new(), Gate::new());
    let (st, g) = (Arc::clone(&started), Arc::clone(&gate));
    s.enqueue(move |_| {
        st.open();
        assert!(g.wait(LONG), "gate never opened");
        Ok(())
    })
    .unwrap();
    assert!(started.wait(LONG));
    // Behind the gate: the worker's next turn takes a batch and unwinds with it taken; the
    // rest stay queued.
    let held = Arc::new(());
    let ran = Arc::new(AtomicUsize::new(0));
    let n = 2 * batch::TAKE + 3;
    enqueue_counting(&s, n, &held, &ran);
    s.shared
        .control
        .unwind_worker
        .store(true, Ordering::Relaxed);
    gate.open();
    let s2 = Arc::clone(&s);
    assert_eq!(
        within(LONG, move || s2.synchronize(SyncWait::Forever)),
        Err(Error::DrvInternalError)
    );
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "no task ran after the unwind"
    );
    assert_eq!(Arc::strong_count(&held), 1, "every task was dropped");
    assert_eq!(s.stats().discarded, n as u64);
    assert!(
        s.last_panic()
            .is_some_and(|m| m.contains("outside its tasks"))
    );
    assert!(eventually(LONG, || s.has_exited()));
    assert_eq!(s.enqueue(|_| Ok(())), Err(Error::InvalidHandle));
    assert_eq!(synced(&s), Ok(()));
    let s = Arc::into_inner(s).unwrap();
    within(LONG, move || drop(s));
}

/// Queues `n` tasks on `s`, each holding a clone of `held` (so `Arc::strong_count` tells how
/// many are still alive) and counting its run in `ran`.
fn enqueue_counting(s: &S, n: usize, held: &Arc<()>, ran: &Arc<AtomicUsize>) {
    for _ in 0..n {
        let (h, r) = (Arc::clone(held), Arc::clone(ran));
        s.enqueue(move |_| {
            let _held = &h;
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    }
}

/// The unwinding guard's cleanup (`Shared::worker_unwound`) finds the stream's baton held by
/// another thread (here the worker itself, running a task): it does not panic (a panic while
/// unwinding aborts the process), and still fails the stream, drops and retires the queued
/// tasks, and closes the queue; the holder's task runs on. Until 2026-12-05 it took the baton
/// with `Baton::hold`, which panics when it is held.
#[test]
fn a_worker_unwinding_while_its_baton_is_held_elsewhere_does_not_panic() {
    let s = Arc::new(S::new("t-unwind-held").unwrap());
    let (started, gate) = (Gate::new(), Gate::new());
    let (st, g) = (Arc::clone(&started), Arc::clone(&gate));
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    s.enqueue(move |_| {
        st.open();
        assert!(g.wait(LONG), "gate never opened");
        r.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    assert!(started.wait(LONG));
    let held = Arc::new(());
    let n = 5;
    enqueue_counting(&s, n, &held, &ran);
    // The worker holds the baton, inside the gated task.
    let cleanup = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        s.shared.worker_unwound();
    }));
    gate.open();
    assert!(cleanup.is_ok(), "worker_unwound panicked on a held baton");
    let s2 = Arc::clone(&s);
    assert_eq!(
        within(LONG, move || s2.synchronize(SyncWait::Forever)),
        Err(Error::DrvInternalError)
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the holder's task ran");
    assert_eq!(Arc::strong_count(&held), 1, "the queued tasks were dropped");
    assert_eq!(s.stats().discarded, n as u64);
    assert_eq!(s.enqueue(|_| Ok(())), Err(Error::InvalidHandle));
    let s = Arc::into_inner(s).unwrap();
    within(LONG, move || drop(s));
}

#[test]
fn drop_all_drops_the_rest_after_a_panicking_drop() {
    struct D(Arc<AtomicUsize>, bool);
    impl Drop for D {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            if self.1 {
                panic!("drop panics");
            }
        }
    }
    let n = Arc::new(AtomicUsize::new(0));
    let mut v: Vec<D> = (0..6)
        .map(|i| D(Arc::clone(&n), i == 1 || i == 4))
        .collect();
    let cap = v.capacity();
    drop_all(&mut v);
    assert_eq!(n.load(Ordering::SeqCst), 6);
    assert!(v.is_empty());
    assert_eq!(v.capacity(), cap);
}

#[test]
fn a_task_may_use_its_own_stream_without_deadlocking() {
    let s = Arc::new(S::spawn(StreamConfig::new("t-self").capacity(2)).unwrap());
    let inner = Arc::new(Mutex::new(None));
    let ran = Arc::new(AtomicUsize::new(0));
    let (s2, i2, r2) = (Arc::clone(&s), Arc::clone(&inner), Arc::clone(&ran));
    s.enqueue(move |_| {
        // More than the capacity, from the worker: must not wait for room.
        for _ in 0..10 {
            let r = Arc::clone(&r2);
            s2.enqueue(move |_| {
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })?;
        }
        *lock(&i2) = Some(synced(&s2));
        Ok(())
    })
    .unwrap();
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(*lock(&inner), Some(Err(Error::InternalError)));
    // The inner tasks were enqueued after our first synchronize began; this one covers them.
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 10);
    assert_eq!(s.stats().enqueued, 11);
}

#[test]
fn an_idle_worker_sleeps_and_is_woken_by_enqueue() {
    let s = S::new("t-idle").unwrap();
    for _ in 0..100 {
        s.enqueue(|_| Ok(())).unwrap();
    }
    assert_eq!(synced(&s), Ok(()));
    // Past the spin budget the worker parks.
    assert!(eventually(LONG, || s.stats().sleeps >= 1
        && s.shared.ring.is_sleeping()));
    thread::sleep(Duration::from_millis(5));
    let (_, cpu0) = thread_stat(s.worker_tid());
    for _ in 0..10 {
        thread::sleep(Duration::from_millis(10));
        assert_eq!(thread_stat(s.worker_tid()).0, 'S', "idle worker not asleep");
    }
    let (_, cpu1) = thread_stat(s.worker_tid());
    // ~100 ms idle: a spinning thread would burn ~10 ticks; allow one for accounting.
    assert!(cpu1 - cpu0 <= 1, "idle worker used {} ticks", cpu1 - cpu0);

    let before = s.stats();
    let (tx, rx) = mpsc::channel();
    s.enqueue(move |_| {
        tx.send(()).map_err(|_| Error::DrvInternalError)?;
        Ok(())
    })
    .unwrap();
    assert!(rx.recv_timeout(LONG).is_ok(), "enqueue woke the worker");
    let after = s.stats();
    assert_eq!(after.wakeups, before.wakeups + 1, "one wake syscall");
}

/// A spin whose yields find the CPU free lasts until its condition holds (or its budget,
/// here an hour, runs out); one whose yield shows another thread wants the CPU gives up at
/// once. The signal is `offer`'s figure, not the clock: no load or pause changes either.
#[test]
fn the_idle_spin_gives_way_only_when_a_yield_shows_the_cpu_wanted() {
    let hour = Duration::from_secs(3600);
    let mut looks = 0;
    let caught = worker::spin_until_with(
        hour,
        || {
            looks += 1;
            looks > 10_000
        },
        || Some(Duration::ZERO),
    );
    assert!(caught && looks == 10_001);
    let lost = crate::yielding::YIELD_LOST_CPU;
    assert!(!worker::spin_until_with(hour, || false, || Some(lost)));
    // Not offered (a slice given away lately, `crate::yielding`): no sign either way.
    let mut looks = 0;
    assert!(worker::spin_until_with(
        hour,
        || {
            looks += 1;
            looks > 10_000
        },
        || None
    ));
}

#[test]
fn back_to_back_enqueues_need_no_wake_syscall() {
    // A worker whose spin is not cut short is still spinning when the next task arrives, so
    // the host never has to wake it. Whether the spin is cut short depends on the load signal
    // the worker reads (a yield that lost the CPU: `the_idle_spin_gives_way_...` above), which
    // this test sets to "CPU free" so that the outcome does not depend on the machine's load
    // (at load ~30 the real signal rightly ended most spins: user23); the budget, an hour,
    // outlasts any pause of the process (a hang fails `synchronize`'s bound instead).
    let s = S::spawn(StreamConfig::new("t-spin").spin(Duration::from_secs(3600))).unwrap();
    s.cpu_seems_free();
    s.enqueue(|_| Ok(())).unwrap();
    assert_eq!(synced(&s), Ok(()));
    let before = s.stats();
    for _ in 0..100 {
        s.enqueue(|_| Ok(())).unwrap();
        assert_eq!(synced(&s), Ok(()));
    }
    let after = s.stats();
    assert!(after.spin_hits > before.spin_hits);
    assert_eq!(
        (after.sleeps - before.sleeps, after.wakeups - before.wakeups),
        (0, 0),
        "the worker slept (sleeps, wake syscalls) between 100 back-to-back tasks"
    );
}

#[test]
fn no_wake_up_is_lost_when_the_worker_parks_every_time() {
    // spin = 0: the worker parks whenever its queue is empty, so every enqueue races with
    // a park; two producers and synchronize race with it too. A lost wake-up would show up
    // as a synchronize timing out (507046) instead of returning Ok.
    let s = Arc::new(S::spawn(StreamConfig::new("t-race").spin(Duration::ZERO)).unwrap());
    let ran = Arc::new(AtomicUsize::new(0));
    const N: usize = 5_000;
    let producers: Vec<_> = (0..2)
        .map(|p| {
            let (s, ran) = (Arc::clone(&s), Arc::clone(&ran));
            thread::spawn(move || {
                for i in 0..N {
                    let r = Arc::clone(&ran);
                    s.enqueue(move |_| {
                        r.fetch_add(1, Ordering::SeqCst);
                        Ok(())
                    })?;
                    if (i + p) % 3 == 0 {
                        s.synchronize(SyncWait::AtMost(Duration::from_secs(10)))?;
                    }
                }
                Ok::<(), Error>(())
            })
        })
        .collect();
    for p in producers {
        assert_eq!(p.join().unwrap(), Ok(()));
    }
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 2 * N);
    assert!(s.stats().sleeps > 0, "the worker did park in between");
}

#[test]
fn dropping_a_stream_with_a_blocked_task_does_not_hang() {
    let s = S::new("t-drop").unwrap();
    let started = Gate::new();
    let st = Arc::clone(&started);
    let opened = Arc::new(Mutex::new(None));
    let o = Arc::clone(&opened);
    s.enqueue(move |ctx| {
        st.open();
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        let _w = ctx.on_cancel(move || g.open());
        *lock(&o) = Some(gate.wait(LONG));
        Ok(())
    })
    .unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = DropCounter(Arc::clone(&drops));
    s.enqueue(move |_| {
        let _d = d;
        Ok(())
    })
    .unwrap();
    assert!(started.wait(LONG));
    // A hang guard in time the process could run; the drop's cancel opened the task's gate
    // (its wait did not run out), observed, where a 5 s bound stood until 2026-12-07.
    within(LONG, move || drop(s));
    assert_eq!(
        *lock(&opened),
        Some(true),
        "the cancel did not open the gate"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

/// A job with remains: `Quick` never blocks, `Check` may block and records how many
/// remains were dropped when it started.
enum Probe {
    Quick(DropCounter),
    Check(Arc<AtomicUsize>, Arc<AtomicUsize>),
}

impl Job<Error> for Probe {
    type Remains = Option<DropCounter>;
    fn run(self, _: &TaskCtx, _: &mut dyn FnMut()) -> (Result<(), Error>, Option<DropCounter>) {
        match self {
            Probe::Quick(d) => (Ok(()), Some(d)),
            Probe::Check(drops, seen) => {
                seen.store(drops.load(Ordering::SeqCst), Ordering::SeqCst);
                (Ok(()), None)
            }
        }
    }
    fn may_block(&self) -> bool {
        matches!(self, Probe::Check(..))
    }
}

#[test]
fn remains_are_dropped_before_a_blocking_job_and_before_synchronize_returns() {
    let s: Stream<Error, Probe> = Stream::spawn(StreamConfig::new("t-remains")).unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(AtomicUsize::new(usize::MAX));
    for round in 1..=50usize {
        // Five quick jobs, then one that may block: it must see all five dropped.
        for _ in 0..5 {
            s.enqueue_job(Probe::Quick(DropCounter(Arc::clone(&drops))))
                .unwrap();
        }
        s.enqueue_job(Probe::Check(Arc::clone(&drops), Arc::clone(&seen)))
            .unwrap();
        // Then quick jobs only: synchronize returns with their remains dropped too.
        for _ in 0..3 {
            s.enqueue_job(Probe::Quick(DropCounter(Arc::clone(&drops))))
                .unwrap();
        }
        assert_eq!(synced(&s), Ok(()));
        assert_eq!(seen.load(Ordering::SeqCst), round * 8 - 3);
        assert_eq!(drops.load(Ordering::SeqCst), round * 8);
    }
}

#[test]
fn remains_of_a_queue_run_dry_are_dropped_without_a_synchronize() {
    // Quick jobs keep their remains while more come (see `worker::Finished`); once the queue
    // stays dry the worker drops them and retires the jobs by itself, within microseconds.
    for spin in [DEFAULT_SPIN, Duration::ZERO] {
        let s: Stream<Error, Probe> =
            Stream::spawn(StreamConfig::new("t-remains-dry").spin(spin)).unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        for round in 1..=20usize {
            for _ in 0..3 {
                s.enqueue_job(Probe::Quick(DropCounter(Arc::clone(&drops))))
                    .unwrap();
            }
            assert!(
                eventually(LONG, || drops.load(Ordering::SeqCst) == round * 3),
                "spin {spin:?}, round {round}: {} of {} remains dropped",
                drops.load(Ordering::SeqCst),
                round * 3
            );
            assert!(eventually(LONG, || s.query() == StreamStatus::Complete));
        }
        // More than 16 in a row: the ones past 16 are not kept waiting for the rest.
        for _ in 0..40 {
            s.enqueue_job(Probe::Quick(DropCounter(Arc::clone(&drops))))
                .unwrap();
        }
        assert_eq!(synced(&s), Ok(()));
        assert_eq!(drops.load(Ordering::SeqCst), 20 * 3 + 40);
    }
}

/// A job that logs its number when it runs; `Chained` ones say they chain, `Fail` ones
/// return an error, `Boom` ones (chained) panic. `Hold` blocks until its gate opens.
enum Link {
    Plain(u32, Arc<Mutex<Vec<u32>>>),
    Chained(u32, Arc<Mutex<Vec<u32>>>, DropCounter),
    Fail(u32, Arc<Mutex<Vec<u32>>>),
    Boom,
    Hold(Arc<Gate>),
}

impl Job<Error> for Link {
    type Remains = Option<DropCounter>;
    fn run(self, _: &TaskCtx, _: &mut dyn FnMut()) -> (Result<(), Error>, Option<DropCounter>) {
        match self {
            Link::Plain(i, log) => {
                lock(&log).push(i);
                (Ok(()), None)
            }
            Link::Chained(i, log, d) => {
                lock(&log).push(i);
                (Ok(()), Some(d))
            }
            Link::Fail(i, log) => {
                lock(&log).push(i);
                (Err(Error::InvalidHandle), None)
            }
            Link::Boom => panic!("boom in a chained job"),
            Link::Hold(g) => {
                assert!(g.wait(LONG), "gate never opened");
                (Ok(()), None)
            }
        }
    }
    fn may_block(&self) -> bool {
        matches!(self, Link::Hold(_))
    }
    fn chains(&self) -> bool {
        matches!(self, Link::Chained(..) | Link::Boom)
    }
}

#[test]
fn chained_jobs_run_in_order_and_are_counted_like_the_others() {
    let s: Stream<Error, Link> = Stream::spawn(StreamConfig::new("t-chain")).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let drops = Arc::new(AtomicUsize::new(0));
    let chained = |i| Link::Chained(i, Arc::clone(&log), DropCounter(Arc::clone(&drops)));
    // Held, so that everything below is taken from the queue in batches.
    let hold = Gate::new();
    s.enqueue_job(Link::Hold(Arc::clone(&hold))).unwrap();
    // Chained jobs behind a plain one, behind a chained one, behind a failing one (not
    // chained: it runs in its own turn), and at the end.
    let mut expect = Vec::new();
    for round in 0..10u32 {
        let i = round * 10;
        s.enqueue_job(Link::Plain(i, Arc::clone(&log))).unwrap();
        s.enqueue_job(chained(i + 1)).unwrap();
        s.enqueue_job(chained(i + 2)).unwrap();
        s.enqueue_job(Link::Fail(i + 3, Arc::clone(&log))).unwrap();
        s.enqueue_job(chained(i + 4)).unwrap();
        expect.extend([i, i + 1, i + 2, i + 3, i + 4]);
    }
    hold.open();
    assert_eq!(synced(&s), Err(Error::InvalidHandle));
    assert_eq!(*lock(&log), expect);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        30,
        "remains of chained jobs not dropped"
    );
    let st = s.stats();
    assert_eq!((st.completed, st.failed), (51, 10));

    // A chained job that panics: the job before it stays counted, the stream goes on.
    lock(&log).clear();
    s.enqueue_job(Link::Plain(1, Arc::clone(&log))).unwrap();
    s.enqueue_job(Link::Boom).unwrap();
    s.enqueue_job(chained(2)).unwrap();
    assert_eq!(synced(&s), Err(Error::DrvInternalError));
    assert_eq!(*lock(&log), [1, 2]);
    assert_eq!(s.last_panic().as_deref(), Some("boom in a chained job"));
    let st = s.stats();
    assert_eq!((st.completed, st.failed, st.panicked), (54, 11, 1));
    assert_eq!(s.query(), StreamStatus::Complete);
}

/// Quick jobs, one that blocks until a gate opens, or one that says it does not block
/// but calls `before_block` and then blocks until a gate opens.
enum Step {
    Quick,
    Block(Arc<Gate>),
    Polite(Arc<Gate>),
}

impl Job<Error> for Step {
    type Remains = ();
    fn run(self, _: &TaskCtx, before_block: &mut dyn FnMut()) -> (Result<(), Error>, ()) {
        match self {
            Step::Quick => {}
            Step::Block(g) => assert!(g.wait(LONG), "gate never opened"),
            Step::Polite(g) => {
                before_block();
                assert!(g.wait(LONG), "gate never opened");
            }
        }
        (Ok(()), ())
    }
    fn may_block(&self) -> bool {
        matches!(self, Step::Block(_))
    }
}

#[test]
fn synchronize_does_not_wait_for_a_blocking_task_taken_with_the_ones_it_waits_for() {
    for polite in [false, true] {
        let s = Arc::new(Stream::<Error, Step>::spawn(StreamConfig::new("t-retire")).unwrap());
        let (hold, block) = (Gate::new(), Gate::new());
        // Hold the worker so the next tasks pile up and are taken from the queue together.
        s.enqueue_job(Step::Block(Arc::clone(&hold))).unwrap();
        for _ in 0..5 {
            s.enqueue_job(Step::Quick).unwrap();
        }
        let s2 = Arc::clone(&s);
        let sync = thread::spawn(move || synced(&s2));
        // The synchronize has read its target (6 tasks) once it published its wake-up mark.
        assert!(eventually(LONG, || s.shared.wake_at.load(Ordering::SeqCst) != u64::MAX));
        let g = Arc::clone(&block);
        s.enqueue_job(if polite {
            Step::Polite(g)
        } else {
            Step::Block(g)
        })
        .unwrap();
        hold.open();
        // The five quick tasks are retired before the blocking one blocks.
        assert_eq!(sync.join().unwrap(), Ok(()), "polite: {polite}");
        assert_eq!(s.query(), StreamStatus::NotReady);
        block.open();
        assert_eq!(synced(&s), Ok(()));
    }
}

/// The CPU a thread may run on, from `/proc` (field `Cpus_allowed_list`).
fn cpus_allowed_list(tid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_owned()
}

#[test]
fn a_placed_worker_runs_on_its_cpu_only() {
    let cpus = allowed_cpus();
    assert!(!cpus.is_empty(), "sched_getaffinity said nothing");
    let last = *cpus.last().unwrap();
    let s = S::spawn(StreamConfig::new("t-cpu").cpu(Some(last))).unwrap();
    assert_eq!(s.cpu(), Some(last));
    assert_eq!(cpus_allowed_list(s.worker_tid()), last.to_string());
    // It still runs tasks, and the spawning thread keeps its own affinity.
    let ran = Arc::new(AtomicUsize::new(0));
    count_on(&s, &ran);
    assert_eq!(synced(&s), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(allowed_cpus(), cpus);
    // Unplaced workers are left to the scheduler.
    let free = S::spawn(StreamConfig::new("t-nocpu")).unwrap();
    assert_eq!(free.cpu(), None);
    assert_eq!(
        cpus_allowed_list(free.worker_tid()),
        cpus_allowed_list(gettid())
    );
}

#[test]
fn an_idle_worker_stops_spinning_when_a_busy_thread_wants_its_cpu() {
    let cpu = *allowed_cpus().last().unwrap();
    // A spin budget far longer than the test: the worker sleeps early only if it gives up
    // spinning because its CPU is wanted.
    let s = S::spawn(
        StreamConfig::new("t-yield")
            .cpu(Some(cpu))
            .spin(Duration::from_secs(60)),
    )
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            pin_current_thread(cpu).unwrap();
            while !stop.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
    };
    let ran = Arc::new(AtomicUsize::new(0));
    count_on(&s, &ran);
    assert_eq!(synced(&s), Ok(()));
    let parked = eventually(LONG, || s.stats().sleeps >= 1);
    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
    assert!(
        parked,
        "the idle worker kept spinning next to a busy thread"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn a_worker_that_cannot_be_placed_fails_the_spawn_cleanly() {
    for (k, cpu) in [libc::CPU_SETSIZE as usize - 1, usize::MAX]
        .into_iter()
        .enumerate()
    {
        let name = format!("t-badcpu{k}");
        let r = S::spawn(StreamConfig::new(name.clone()).cpu(Some(cpu)));
        assert_eq!(r.err(), Some(Error::ResourceAllocFail), "cpu {cpu}");
        // The failed spawn joined the worker; the kernel drops its `/proc` entry a moment
        // after the join returns. Other tests' threads come and go meanwhile, so only look
        // for ours.
        let ours_left = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .map(|e| e.unwrap().path().join("comm"))
                .filter_map(|p| std::fs::read_to_string(p).ok())
                .any(|c| c.trim() == name)
        };
        assert!(
            eventually(LONG, || !ours_left()),
            "worker {name} left behind"
        );
    }
    // A backend that carries messages hears why (a bare 207005 told a conformance run
    // nothing).
    let e = crate::job::SimStream::spawn(StreamConfig::new("t-badcpu-msg").cpu(Some(usize::MAX)))
        .expect_err("a worker pinned to no CPU is refused");
    assert_eq!(
        acl_notify_core::BackendError::kind(&e),
        Error::ResourceAllocFail
    );
    assert!(
        e.message().contains("could not be placed on its CPU"),
        "{e}"
    );
}

/// A worker thread the system refuses for the moment (EAGAIN: its thread or PID table full,
/// as on a machine where other jobs start processes) is tried again, and the stream starts;
/// a refusal that lasts fails the spawn with the system's reason and what to do, having
/// started nothing; a lasting kind of refusal (EINVAL) is not tried again.
#[test]
fn a_worker_the_system_refuses_for_a_moment_is_started_on_a_later_try() {
    let refuse = |n, errno| super::REFUSE_SPAWNS.with(|r| r.set((n, errno)));
    let left = || super::REFUSE_SPAWNS.with(|r| r.get().0);
    refuse(3, libc::EAGAIN);
    let s = crate::job::SimStream::spawn(StreamConfig::new("t-refused-3"))
        .expect("started on the fourth try");
    assert_eq!(left(), 0, "every refusal was met");
    drop(s);

    refuse(u32::MAX, libc::EAGAIN);
    let e = crate::job::SimStream::spawn(StreamConfig::new("t-refused-always"))
        .expect_err("a refusal that lasts fails the spawn");
    let tries = u32::MAX - left();
    refuse(0, 0);
    assert!(tries > 1, "tried {tries} times");
    assert_eq!(
        acl_notify_core::BackendError::kind(&e),
        Error::ResourceAllocFail
    );
    let m = e.message();
    assert!(
        m.contains("the system refused the stream's worker thread")
            && m.contains(&std::io::Error::from_raw_os_error(libc::EAGAIN).to_string())
            && m.contains("pids.max")
            && m.contains("destroy the streams no longer used"),
        "{m}"
    );

    refuse(5, libc::EINVAL);
    let e = crate::job::SimStream::spawn(StreamConfig::new("t-refused-einval"))
        .expect_err("EINVAL fails the spawn");
    assert_eq!(left(), 4, "EINVAL was tried again");
    refuse(0, 0);
    assert!(e.message().contains("refused"), "{e}");
    // Nothing was started for the refused ones.
    let ours = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .map(|e| e.unwrap().path().join("comm"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .any(|c| c.trim().starts_with("t-refused-a") || c.trim().starts_with("t-refused-e"));
    assert!(!ours, "a refused spawn left a thread");
}

/// The worker runs under the policy its configuration names, and still runs its tasks.
#[test]
fn a_batch_worker_runs_under_sched_batch() {
    // SAFETY: sched_getscheduler(2) only reads the thread's policy.
    let policy_of = |tid: i32| unsafe { libc::sched_getscheduler(tid) };
    let batch = S::spawn(StreamConfig::new("t-batch").policy(WorkerPolicy::Batch)).unwrap();
    let normal = S::spawn(StreamConfig::new("t-normal")).unwrap();
    assert_eq!(policy_of(batch.worker_tid()), libc::SCHED_BATCH);
    assert_eq!(policy_of(normal.worker_tid()), libc::SCHED_OTHER);
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..100 {
        count_on(&batch, &ran);
    }
    assert_eq!(synced(&batch), Ok(()));
    assert_eq!(ran.load(Ordering::SeqCst), 100);
}

/// Kept values live as long as the stream (past the queued tasks that use them), each kept
/// once however often it is asked for, also beyond those found without the lock.
#[test]
fn kept_values_live_until_the_stream_is_gone() {
    let s: S = Stream::new("keep").unwrap();
    let vals: Vec<Arc<u64>> = (0..6).map(Arc::new).collect();
    for v in &vals {
        s.keep_alive(v);
        s.keep_alive(v);
    }
    for v in &vals {
        assert_eq!(Arc::strong_count(v), 2);
    }
    // A task that reads a kept value through a plain pointer, run while the stream lives.
    let p = Arc::as_ptr(&vals[5]).addr();
    let seen = Arc::new(AtomicUsize::new(0));
    let out = Arc::clone(&seen);
    s.enqueue(move |_| {
        // SAFETY: the stream keeps the value, and its tasks run while the stream exists.
        let v = unsafe { *std::ptr::with_exposed_provenance::<u64>(p) };
        out.store(v as usize + 1, Ordering::SeqCst);
        Ok(())
    })
    .unwrap();
    synced(&s).unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 6);
    drop(s);
    for v in &vals {
        assert_eq!(Arc::strong_count(v), 1);
    }
}

/// A keeper's value handed over says so before it reads its bound: from then on a turn that
/// parks retires what it has run (`Shared::retire_wanted`), so a turn parking on a wait
/// issued after the bound cannot keep the bound's tasks unretired and the value with them
/// (a notify pin of a destroyed notify kept until the wait runs). Fails if the bound is read
/// before `retire_wanted` says so (before 2026-12-05: `release_at` set after the read).
#[test]
fn a_keeper_wants_retires_from_before_it_reads_its_bound() {
    let s = S::new("t-keeping").unwrap();
    let shared = Arc::clone(&s.shared);
    assert!(!shared.retire_wanted());
    let seen = Arc::new(AtomicBool::new(false));
    {
        let (shared, seen) = (Arc::clone(&shared), Arc::clone(&seen));
        keeper::AFTER_BOUND.with(|h| {
            h.set(Some(Box::new(move || {
                seen.store(shared.retire_wanted(), Ordering::SeqCst);
            })))
        });
    }
    // No task issued: the value is dropped at once, and nothing is wanted after.
    s.keeper().keep_until_done(());
    assert!(
        keeper::AFTER_BOUND.with(|h| h.take().is_none()),
        "the hook did not run"
    );
    assert!(
        seen.load(Ordering::SeqCst),
        "retires were not wanted between the bound's read and its publication"
    );
    assert!(!shared.retire_wanted());
}

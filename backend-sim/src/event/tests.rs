//! Events' waits and wake-ups: who a record wakes (`EvState::sleepers`), and what a classic
//! wait waits for.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use acl_notify_core::event::{EventFlags, EventOps, EventSpec};
use acl_notify_core::{HostCall, Soc, StreamOps, SyncWait, Timeout};

use crate::{NamespaceGuard, Sim};

/// Holds its stream while the `AtomicU32` it points to is 1 (at most 20 s).
unsafe extern "C" fn hold(arg: *mut std::ffi::c_void) {
    // SAFETY: `arg` points to a static `AtomicU32` (see `held`).
    let gate = unsafe { &*arg.cast::<AtomicU32>() };
    let end = Instant::now() + Duration::from_secs(20);
    while gate.load(Ordering::SeqCst) == 1 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A host function that holds its stream until `gate` is 0.
fn held(gate: &'static AtomicU32) -> HostCall {
    gate.store(1, Ordering::SeqCst);
    // SAFETY: `hold` only reads the static `gate` and does not unwind.
    unsafe { HostCall::new(hold, std::ptr::from_ref(gate).cast_mut().cast()) }
}

fn open(tag: &str) -> (Sim, NamespaceGuard) {
    let ns = format!("unit-event-{tag}-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let sim = Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(1)
        .namespace(&ns)
        .open()
        .unwrap();
    (sim, NamespaceGuard(ns))
}

/// A synchronize and a stream's wait asleep on an event when its record runs are woken by it
/// at once, not at their deadline (20 s for the synchronize; the stream's wait has none, so
/// a missed wake-up leaves the waiting stream's synchronize to time out), and nothing stays
/// counted asleep. Records nobody sleeps on (before, and between the rounds) wake nobody and
/// change nothing for the sleepers that come later. Fails if a sleeper is not counted: the
/// record then does not notify.
#[test]
fn a_record_wakes_the_sleepers_it_finds() {
    static GATE: AtomicU32 = AtomicU32::new(0);
    let (sim, _ns) = open("sleepers");
    let recorder = sim.create_stream(0).unwrap();
    let waiter = sim.create_stream(0).unwrap();
    let quiet = sim.event_create(0, EventSpec::classic()).unwrap();
    for _ in 0..3 {
        sim.event_record(quiet, recorder).unwrap();
    }
    sim.synchronize(recorder, SyncWait::AtMost(Duration::from_secs(5)))
        .unwrap();
    for round in 0..3 {
        // A fresh event: its flag is clear, so the stream's wait sleeps until the record.
        let ev = sim.event_create(0, EventSpec::classic()).unwrap();
        sim.launch_host_func(recorder, held(&GATE)).unwrap();
        sim.event_record(ev, recorder).unwrap();
        sim.stream_wait_event(waiter, ev, Timeout::Forever).unwrap();
        // The record runs once both the stream's wait and the synchronize below sleep on the
        // event (observed, bounded by a 60 s hang guard; a 100 ms sleep stood here, which a
        // loaded machine may outlast, and the record then met no sleeper).
        let sleepers = || sim.event(ev).unwrap().st.lock().unwrap().sleepers;
        std::thread::scope(|sc| {
            let opener = sc.spawn(|| {
                let t0 = Instant::now();
                while sleepers() < 2 && t0.elapsed() < Duration::from_secs(60) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                GATE.store(0, Ordering::SeqCst);
            });
            // A record that did not wake it would leave it asleep until its 20 s bound
            // (507047): the answer tells, not a time (a 5 s bound stood here until
            // 2026-12-07).
            let r = sim.event_synchronize(ev, SyncWait::AtMost(Duration::from_secs(20)));
            opener.join().unwrap();
            r.unwrap_or_else(|e| panic!("round {round}: the record did not wake it: {e}"));
        });
        sim.synchronize(waiter, SyncWait::AtMost(Duration::from_secs(5)))
            .unwrap_or_else(|e| {
                panic!("round {round}: the stream's wait was not woken by the record: {e}")
            });
        assert_eq!(
            sim.event(ev).unwrap().st.lock().unwrap().sleepers,
            0,
            "round {round}: sleepers left counted"
        );
        sim.event_record(quiet, recorder).unwrap();
        sim.event_destroy(ev).unwrap();
    }
    for s in [recorder, waiter] {
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(5)))
            .unwrap();
    }
}

/// A classic wait on an event with a flag word of its own (one id for life) waits for the
/// event's flag, set by any record: one that an earlier record set lets it through even while
/// a later record is still queued (its stream held). It failed with 107023 "the event's
/// record was discarded unrun", as if it had waited for the latest record as an Ex wait does.
#[test]
fn a_classic_wait_passes_on_an_earlier_records_flag() {
    static GATE: AtomicU32 = AtomicU32::new(0);
    let (sim, _ns) = open("classic");
    let recorder = sim.create_stream(0).unwrap();
    let waiter = sim.create_stream(0).unwrap();
    let spec = EventSpec::with_flag(EventFlags::SYNC.bits(), Soc::Ascend910B).unwrap();
    assert!(spec.id_at_create());
    let ev = sim.event_create(0, spec).unwrap();
    sim.event_record(ev, recorder).unwrap();
    sim.synchronize(recorder, SyncWait::AtMost(Duration::from_secs(5)))
        .unwrap();
    sim.launch_host_func(recorder, held(&GATE)).unwrap();
    sim.event_record(ev, recorder).unwrap();
    sim.stream_wait_event(waiter, ev, Timeout::Forever).unwrap();
    let r = sim.synchronize(waiter, SyncWait::AtMost(Duration::from_secs(5)));
    GATE.store(0, Ordering::SeqCst);
    sim.synchronize(recorder, SyncWait::AtMost(Duration::from_secs(25)))
        .unwrap();
    r.unwrap();
}

/// An `aclrtCreateEvent` event takes a fresh id at each record (hicann/runtime
/// `Event::Record`): a wait enqueued after a second record waits for that record, though the
/// first one ran; a reset clears the latest record's id only, and the next record's wait
/// passes once it ran. The wait passed at once on the first record's flag, so a program
/// reusing one event round after round read the data of an earlier round
/// (`tests/c/app_threads.c`).
#[test]
fn a_default_event_wait_waits_for_the_latest_record() {
    static GATE: AtomicU32 = AtomicU32::new(0);
    let (sim, _ns) = open("default");
    let recorder = sim.create_stream(0).unwrap();
    let waiter = sim.create_stream(0).unwrap();
    let ev = sim.event_create(0, EventSpec::classic()).unwrap();
    let quick = SyncWait::AtMost(Duration::from_millis(200));
    let long = SyncWait::AtMost(Duration::from_secs(25));
    sim.event_record(ev, recorder).unwrap();
    sim.synchronize(recorder, long).unwrap();
    sim.launch_host_func(recorder, held(&GATE)).unwrap();
    sim.event_record(ev, recorder).unwrap();
    sim.stream_wait_event(waiter, ev, Timeout::Forever).unwrap();
    let early = sim.synchronize(waiter, quick);
    GATE.store(0, Ordering::SeqCst);
    sim.synchronize(recorder, long).unwrap();
    sim.synchronize(waiter, long).unwrap();
    assert!(
        early.is_err(),
        "the wait passed before the record enqueued before it ran"
    );
    // A reset of the latest record: a wait times out; a new record releases the next wait.
    sim.event_reset(ev, recorder).unwrap();
    sim.synchronize(recorder, long).unwrap();
    sim.stream_wait_event(waiter, ev, Timeout::from_c(1))
        .unwrap();
    let e = sim
        .synchronize(waiter, long)
        .expect_err("a wait on a reset record");
    assert_eq!(
        acl_notify_core::BackendError::kind(&e),
        acl_notify_core::Error::TaskTimeout,
        "{e}"
    );
    sim.event_record(ev, recorder).unwrap();
    sim.stream_wait_event(waiter, ev, Timeout::Forever).unwrap();
    sim.synchronize(waiter, long).unwrap();
}

/// A stream's failure mode goes from continue to stop-on-failure, and the same mode may be set
/// again, but stop-on-failure does not go back to continue (207000), as in CANN.
#[test]
fn stop_on_failure_does_not_switch_back_to_continue() {
    use acl_notify_core::{BackendError, Error, FailureMode, StreamControl};
    let (sim, _ns) = open("failmode");
    let s = sim.create_stream(0).unwrap();
    sim.set_failure_mode(s, FailureMode::Continue).unwrap();
    sim.set_failure_mode(s, FailureMode::StopOnFailure).unwrap();
    sim.set_failure_mode(s, FailureMode::StopOnFailure).unwrap();
    let e = sim
        .set_failure_mode(s, FailureMode::Continue)
        .expect_err("stop back to continue");
    assert_eq!(e.kind(), Error::FeatureNotSupport);
    assert_eq!(sim.failure_mode(s).unwrap(), FailureMode::StopOnFailure);
}

/// A stream bound to a failure scope tells it of its failed task only once the scope is in
/// stop mode, and the first failure stays; a device's default stream is bound through the
/// device. An event record dropped behind the failure answers it (passed by its stream, not
/// parsed from a message).
#[test]
fn a_failure_scope_keeps_the_first_failure_of_its_streams_in_stop_mode() {
    use acl_notify_core::{
        BackendError, CreateFlags, Error, FailureMode, NotifyResources, StreamControl,
    };
    let (sim, _ns) = open("scope");
    let scope = crate::FailureScope::new();
    let s = sim.create_stream(0).unwrap();
    let t = sim.create_stream(0).unwrap();
    sim.set_failure_scope(s, Some(scope.clone())).unwrap();
    sim.set_failure_scope(t, Some(scope.clone())).unwrap();
    sim.set_default_failure_scope(0, Some(scope.clone()));
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let short = Timeout::Seconds(std::num::NonZeroU32::MIN);
    // Continue mode: the failure is the stream's alone.
    sim.wait_and_reset(n, s, short).unwrap();
    assert_eq!(
        sim.synchronize(s, SyncWait::Forever).unwrap_err().kind(),
        Error::TaskTimeout
    );
    assert!(scope.failure().is_none());
    // Stop mode (set on one stream): the first failure of any stream of the scope is kept.
    sim.set_failure_mode(s, FailureMode::StopOnFailure).unwrap();
    scope.stop_on_failure();
    let ev = sim.event_create(0, EventSpec::classic()).unwrap();
    let gate: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    sim.launch_host_func(s, held(gate)).unwrap();
    sim.wait_and_reset(n, s, short).unwrap();
    sim.event_record(ev, s).unwrap();
    gate.store(0, Ordering::SeqCst);
    let e = sim.event_synchronize(ev, SyncWait::Forever).unwrap_err();
    assert_eq!(e.kind(), Error::TaskTimeout, "{e}");
    assert!(
        e.message().contains("a task before the record failed"),
        "{e}"
    );
    let first = scope.failure().expect("the scope's failure");
    assert_eq!((first.stream, first.error.kind()), (s, Error::TaskTimeout));
    let d = sim.default_stream(0).unwrap();
    sim.wait_and_reset(n, d, short).unwrap();
    let _ = sim.synchronize(d, SyncWait::Forever);
    assert_eq!(
        scope.failure().unwrap().stream,
        s,
        "the first failure stays"
    );
}

/// A synchronize of a healthy stream of a failure scope in stop mode, and an event
/// synchronize in the scope, end as soon as another stream of the scope fails, with its
/// failure, while the healthy stream is still held (CANN's waits poll the context's status);
/// every stream whose task fails is aborted, not only the first.
#[test]
fn a_scope_s_failure_ends_the_waits_on_its_healthy_streams() {
    use acl_notify_core::{BackendError, CreateFlags, Error, NotifyResources};
    let (sim, _ns) = open("scope-wake");
    let scope = crate::FailureScope::new();
    let (s, h, t) = (
        sim.create_stream(0).unwrap(),
        sim.create_stream(0).unwrap(),
        sim.create_stream(0).unwrap(),
    );
    for x in [s, h, t] {
        sim.set_failure_scope(x, Some(scope.clone())).unwrap();
    }
    scope.stop_on_failure();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let short = Timeout::Seconds(std::num::NonZeroU32::MIN);
    let gate: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    sim.launch_host_func(h, held(gate)).unwrap();
    let ev = sim.event_create(0, EventSpec::classic()).unwrap();
    sim.event_record(ev, h).unwrap();
    let gate_t: &'static AtomicU32 = Box::leak(Box::new(AtomicU32::new(0)));
    sim.launch_host_func(t, held(gate_t)).unwrap();
    sim.wait_and_reset(n, t, short).unwrap();
    sim.wait_and_reset(n, s, short).unwrap();
    let bound = SyncWait::AtMost(std::time::Duration::from_secs(60));
    let e = sim.synchronize(h, bound).unwrap_err();
    assert_eq!(e.kind(), Error::TaskTimeout, "{e}");
    assert_eq!(
        gate.load(Ordering::SeqCst),
        1,
        "the healthy stream was let go"
    );
    let e = sim
        .event_synchronize_in_scope(ev, bound, &scope)
        .unwrap_err();
    assert_eq!(e.kind(), Error::TaskTimeout, "{e}");
    assert!(scope.aborted(s) && !scope.aborted(h) && !scope.aborted(t));
    // t's wait, held until now, fails after the scope's first failure: t is aborted too,
    // the scope's failure stays s's.
    // (A synchronize of t would end at once: the scope has failed. Its failure is awaited
    // through the failure listener.)
    let (tx, rx) = std::sync::mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    sim.on_task_failure(Some(std::sync::Arc::new(move |f: &crate::TaskFailure| {
        let _ = tx.lock().unwrap().send(f.stream);
    })));
    gate_t.store(0, Ordering::SeqCst);
    // (s's failure may be told too: its hook reads the listener after it told the scope.)
    while rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("t's wait did not fail")
        != t
    {}
    sim.on_task_failure(None);
    assert!(scope.aborted(t), "a later failing stream is not aborted");
    assert_eq!(scope.failure().unwrap().stream, s);
    gate.store(0, Ordering::SeqCst);
}

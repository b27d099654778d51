//! Events' waits: what a classic wait waits for.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use acl_notify_core::event::{EventOps, EventSpec};
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

/// A classic wait waits for the event's flag, set by any record: one that an earlier record
/// set lets it through even while a later record is still queued (its stream held). It
/// failed with 107023 "the event's record was discarded unrun", as if it had waited for the
/// latest record as an Ex wait does.
#[test]
fn a_classic_wait_passes_on_an_earlier_records_flag() {
    static GATE: AtomicU32 = AtomicU32::new(0);
    let (sim, _ns) = open("classic");
    let recorder = sim.create_stream(0).unwrap();
    let waiter = sim.create_stream(0).unwrap();
    let ev = sim.event_create(0, EventSpec::classic()).unwrap();
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

//! Unit tests of the `Sim` (configuration, handles, IPC policy, stream jobs and the trait
//! impls), run against a namespace of their own.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acl_notify_core::table::{self, Waiter};
use acl_notify_core::{
    Backend, BackendError, CreateFlags, Error, ExportFlags, ExportKey, HostCall, HostOps,
    ImportFlags, Lifecycle, NotifyResources, RawNotify, RawStream, Soc, StreamDestroy, StreamOps,
    StreamStatus, SyncWait, Timeout,
};

use crate::blocked::Blocked;
use crate::config::{ENV_ENQUEUE_TIMEOUT, MAX_CPU, STREAM_CAPACITY, SimBuilder, StreamCpus};
use crate::entries::PINS;
use crate::error::SimError;
use crate::locks::lock;
use crate::mem::MemcpyKind;
use crate::pair_cache::set_of;
#[cfg(target_arch = "x86_64")]
use crate::prefetch::has_prefetchw;
use crate::prefetch::prefetch_for_write;
use crate::sim::Sim;
use crate::waiters::{AdaptiveWaiter, MAX_SPIN_NS, SPIN_NS, next_spin};
use crate::{shm, stream};

use std::sync::atomic::Ordering::SeqCst;
use std::time::Instant;

use crate::NamespaceGuard as Ns;

fn open(tag: &str, soc: Soc) -> (Sim, Ns) {
    open_with(tag, Sim::builder().soc(soc))
}

/// `builder` (2 devices) on a fresh namespace for test `tag`, removed when `Ns` drops.
fn open_with(tag: &str, builder: SimBuilder) -> (Sim, Ns) {
    let ns = format!("unit-lib-{tag}-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let sim = builder.devices(2).namespace(&ns).open().unwrap();
    (sim, Ns(ns))
}

#[test]
fn sim_is_send_and_sync() {
    fn check<T: Send + Sync + Clone + 'static>() {}
    check::<Sim>();
    check::<SimError>();
}

#[test]
fn builder_errors_name_the_setting() {
    let e = Sim::builder().devices(0).open().unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert!(e.to_string().contains("devices"), "{e}");
    let e = Sim::builder().namespace("a/b").open().unwrap_err();
    assert!(e.to_string().contains("namespace"), "{e}");
    let e = Sim::builder().server_id(2).open().unwrap_err();
    assert!(e.to_string().contains("Ascend910_93"), "{e}");
}

/// The tests' opener answers a `Sim` it cannot open with the builder's error, the namespace
/// named (it panicked until 2026-12-05: a public function of the crate).
#[test]
fn open_sim_answers_a_bad_setting_with_an_error_naming_the_namespace() {
    let e = crate::NamespaceGuard::open_sim("unit-open-sim-bad".to_owned(), Soc::Ascend910B, 0)
        .unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert!(
        e.message().contains("unit-open-sim-bad") && e.message().contains("devices"),
        "{e}"
    );
}

/// Another process took this one for dead and dropped its references (what its gc does
/// with a dead process's entry): the notify's id is free for anyone, so this process's
/// record, waits and host calls on its old handle fail with 507899 instead of acting on
/// whatever notify has the id now; a wait already asleep on it ends the same way.
#[test]
fn a_notify_whose_references_were_dropped_for_this_process_fails_instead_of_acting() {
    let (sim, _ns) = open("stale", Soc::Ascend910B);
    let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let id = sim.notify_info(h).unwrap().id;
    let (s, w) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
    sim.wait_and_reset(h, w, Timeout::Forever).unwrap();
    // Asleep on it (observed; a 100 ms sleep stood here, which a loaded machine may outlast).
    until("the stream's wait sleeps on the notify", || {
        sim.notify(h).unwrap().r.slot().sync.waiters() > 0
    });
    let file = &sim.inner.file;
    assert_eq!(file.reclaim_proc(file.me()).notifies_freed, 1);
    // Its 507899 ends it, not the synchronize's 10 s bound (507046): no time bound needed
    // (one of 5 s stood here until 2026-12-07).
    let e = sim
        .synchronize(w, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
    assert!(e.to_string().contains("no longer holds it"), "{e}");
    // A record is refused when its task runs (the stream reports it, as for any task).
    sim.record(h, s).unwrap();
    let record = sim
        .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap_err();
    for e in [
        record,
        sim.host_wait(h, Duration::from_millis(10)).unwrap_err(),
        sim.batch_reset(&[h]).unwrap_err(),
    ] {
        assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
    }
    // The id went back to the pool: a new notify gets it and works; the old handle still
    // fails rather than reaching it.
    let other = sim.create_notify(0, CreateFlags::empty()).unwrap();
    assert_eq!(sim.notify_info(other).unwrap().id, id);
    sim.record(other, s).unwrap();
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    assert!(sim.try_consume(other).unwrap(), "the new notify's record");
}

/// The typed layer's own refusals carry an explanation, not just the code.
#[test]
fn typed_refusals_explain_themselves() {
    use acl_notify_core::soc::{Ascend310B, Ascend910B};
    use acl_notify_core::typed::Device;
    let (sim, _ns) = open("typedmsg", Soc::Ascend910B);
    let e = Device::<Ascend310B, _>::new(&sim, 0).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert!(
        e.to_string()
            .contains("this Device type is for Ascend310B, but the machine is Ascend910B"),
        "{e}"
    );
    let e = Device::<Ascend910B, _>::new(&sim, 7).unwrap_err();
    assert_eq!(e.kind(), Error::InvalidDeviceId);
    assert!(e.to_string().contains("device 7 does not exist"), "{e}");
}

/// A host wait (here one that would last a day) ends when another thread destroys its
/// notify handle, with 107017 saying so.
#[test]
fn a_host_wait_ends_when_its_handle_is_destroyed() {
    let (sim, _ns) = open("hwdestroy", Soc::Ascend910B);
    let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let r = std::thread::scope(|sc| {
        let w = sc.spawn(|| sim.host_wait(h, Duration::from_secs(20)));
        // Once the host wait sleeps on it (observed; a 100 ms sleep stood here: a wait that
        // had not begun by then met a destroyed handle instead).
        until("the host wait sleeps on the notify", || {
            sim.notify(h).unwrap().r.slot().sync.waiters() > 0
        });
        sim.destroy_notify(h).unwrap();
        w.join().unwrap()
    });
    // Its 107017 ends it, not its 20 s timeout (107019): no time bound needed (one of 5 s
    // stood here until 2026-12-07).
    let e = r.unwrap_err();
    assert_eq!(e.kind(), Error::InvalidHandle, "{e}");
    assert!(e.to_string().contains("was destroyed while"), "{e}");
}

/// A record or wait on a destroyed notify fails (107017) even when this thread looked the
/// pair up before the destroy and a task queued on the stream still holds that pin: the
/// thread's pair cache (`pair_cache`) must not hand it out after the destroy.
#[test]
fn a_destroyed_notify_is_refused_even_with_its_pin_alive_in_a_queued_task() {
    let (sim, _ns) = open("pincache", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let gate = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    // Hold the stream on a wait, then queue a record of `n` behind it: that task holds the
    // stream's pin on `n`, and this thread has just looked the pair up.
    sim.wait_and_reset(gate, s, Timeout::Forever).unwrap();
    sim.record(n, s).unwrap();
    sim.destroy_notify(n).unwrap();
    for e in [
        sim.record(n, s).unwrap_err(),
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap_err(),
    ] {
        assert_eq!(e.kind(), Error::InvalidHandle, "{e}");
    }
    // Another `Sim`'s pair with the same handle values is not this one's either.
    let (other, _ns2) = open("pincache2", Soc::Ascend910B);
    assert!(other.record(n, s).is_err());
    // Release the held stream: its queued record of the destroyed notify still runs (the
    // pin it holds keeps the notify alive for it).
    let s2 = sim.create_stream(0).unwrap();
    sim.record(gate, s2).unwrap();
    for st in [s2, s] {
        sim.synchronize(st, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        sim.destroy_stream(st, StreamDestroy::Drain).unwrap();
    }
    sim.destroy_notify(gate).unwrap();
}

/// A record or wait on a destroyed stream fails (107017) even when this thread queued on it
/// just before (its pair cache, `pair_cache`, holds the stream): after a destroy, after
/// a discard of its device's streams, and for a new stream made in its place; the records
/// queued before the destroy ran once each.
#[test]
fn a_destroyed_stream_is_refused_even_when_this_thread_queued_on_it_just_before() {
    let (sim, _ns) = open("streamcache", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let refused = |s: RawStream| {
        for e in [
            sim.record(n, s).unwrap_err(),
            sim.wait_and_reset(n, s, Timeout::Forever).unwrap_err(),
        ] {
            assert_eq!(e.kind(), Error::InvalidHandle, "{e}");
        }
    };
    let s = sim.create_stream(0).unwrap();
    sim.record(n, s).unwrap();
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    sim.record(n, s).unwrap();
    let before = sim.stream(s).unwrap().0.stats().enqueued;
    sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
    refused(s);
    // Every record queued before the destroy ran once: the last one left the notify set.
    assert!(sim.try_consume(n).unwrap());
    assert!(!sim.try_consume(n).unwrap());
    assert_eq!(before, 3);
    // A stream made after, in the same slot of the table or not.
    let s2 = sim.create_stream(0).unwrap();
    assert_ne!(s2, s);
    refused(s);
    sim.record(n, s2).unwrap();
    sim.synchronize(s2, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    assert!(sim.try_consume(n).unwrap());
    // A device's streams discarded (as a reset does) while this thread has one cached.
    assert_eq!(sim.discard_streams_where(|d| d == 0), 1);
    refused(s2);
    // Another `Sim`'s stream with the same handle value is not this one's either.
    let (other, _ns2) = open("streamcache2", Soc::Ascend910B);
    let s3 = sim.create_stream(0).unwrap();
    sim.record(n, s3).unwrap();
    assert!(other.record(n, s3).is_err());
    sim.destroy_stream(s3, StreamDestroy::Drain).unwrap();
    sim.destroy_notify(n).unwrap();
}

/// A destroyed stream's memory does not stay in the threads' pair caches (`pair_cache`):
/// it goes when this thread destroys the stream, and when another thread does, at this
/// thread's next record or wait, on another stream or another `Sim`'s; a `Sim`'s drop lets go
/// of its streams too.
#[test]
fn a_destroyed_stream_s_memory_leaves_the_threads_stream_caches() {
    let (sim, _ns) = open("cachemem", Soc::Ascend910B);
    let (other, _ns2) = open("cachemem2", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let on = other.create_notify(0, CreateFlags::empty()).unwrap();
    let weak = |sim: &Sim, s: RawStream| Arc::downgrade(&sim.stream(s).unwrap().0);
    let destroy_elsewhere = |s: RawStream| {
        std::thread::scope(|t| {
            t.spawn(|| sim.destroy_stream(s, StreamDestroy::Drain).unwrap());
        })
    };
    // This thread destroys it.
    let s = sim.create_stream(0).unwrap();
    let w = weak(&sim, s);
    sim.record(n, s).unwrap();
    sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
    assert!(w.upgrade().is_none(), "kept after this thread destroyed it");
    assert!(sim.try_consume(n).unwrap());
    // Another thread destroys it; this thread's next record, on a stream of another set.
    let (s1, s2) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
    assert_ne!(set_of(n.0, s1.0), set_of(n.0, s2.0));
    sim.record(n, s1).unwrap();
    sim.record(n, s2).unwrap();
    let w1 = weak(&sim, s1);
    destroy_elsewhere(s1);
    sim.record(n, s2).unwrap();
    assert!(
        w1.upgrade().is_none(),
        "kept after this thread's next record"
    );
    // This thread's next wait, on another `Sim`'s stream it queued on before the destroy.
    let o = other.create_stream(0).unwrap();
    other.record(on, o).unwrap();
    let w2 = weak(&sim, s2);
    destroy_elsewhere(s2);
    other.wait_and_reset(on, o, Timeout::Forever).unwrap();
    assert!(w2.upgrade().is_none(), "kept after this thread's next wait");
    // A `Sim` dropped.
    let wo = weak(&other, o);
    other.record(on, o).unwrap();
    drop(other);
    assert!(wo.upgrade().is_none(), "kept after its `Sim` was dropped");
    assert!(sim.try_consume(n).unwrap());
    sim.destroy_notify(n).unwrap();
}

/// A host function that synchronizes its own stream gets 507000 with the reason.
#[test]
fn synchronize_from_the_stream_s_own_host_function_says_why_it_is_refused() {
    let (sim, _ns) = open("hostsync", Soc::Ascend910B);
    let s = sim.create_stream(0).unwrap();
    let got = Arc::new(Mutex::new(None));
    let (sim2, got2) = (sim.clone(), Arc::clone(&got));
    let (st, _) = sim.stream(s).unwrap();
    sim.enqueue(&st, s, move |_| {
        *got2.lock().unwrap() = Some(sim2.synchronize(s, SyncWait::Forever));
        Ok(())
    })
    .unwrap();
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    let e = got.lock().unwrap().take().unwrap().unwrap_err();
    assert_eq!(e.kind(), Error::InternalError);
    assert!(e.to_string().contains("would wait for itself"), "{e}");
}

/// A 207009 says which process-table entries keep the device's notifies alive (not only
/// who created them) and how many of its ids are allocated with nobody holding them: what a
/// fill that comes up short needs to tell a missed reclaim from a stray bit or an id left
/// half-way by a dead process.
#[test]
fn an_exhausted_device_names_the_entries_that_hold_its_ids_and_its_orphans() {
    let (sim, _ns) = open("heldby", Soc::Ascend910);
    let file = &sim.inner.file;
    let (me, pid) = (file.me(), std::process::id());
    // A notify kept alive only by the bit of a free process-table entry, whose creator
    // destroyed it; and an id allocated with no notify (a creator died before claiming).
    let stray = (0..64)
        .find(|&i| file.proc_entry(i).unwrap().word.load(SeqCst) == 0)
        .unwrap();
    let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let slot = file.slot(0, sim.notify_info(h).unwrap().id).unwrap();
    assert_eq!(slot.join(stray, slot.generation()), Ok(true));
    sim.destroy_notify(h).unwrap();
    let pool = file.pool(0).unwrap();
    file.note_allocated(0, pool.alloc().unwrap());
    let mut mine = 0;
    let e = loop {
        match sim.create_notify(0, CreateFlags::empty()) {
            Ok(_) => mine += 1,
            Err(e) => break e,
        }
    };
    assert_eq!((e.kind(), mine), (Error::NoNotifyResource, 1022), "{e}");
    let text = e.to_string();
    for part in [
        format!(
            "held through process-table entries {me} (pid {pid}, registered, alive, this \
             process) on 1022, {stray} (free: stray bits) on 1;"
        ),
        "1 allocated id has no live notify or no holder".to_owned(),
    ] {
        assert!(text.contains(&part), "{part:?} not in: {text}");
    }
}

/// The free-id count does not count ids that only a dead process holds: it drops dead
/// processes' references first, as a create that ran out would.
#[test]
fn the_free_count_drops_a_dead_process_s_references_first() {
    let (sim, _ns) = open("freedead", Soc::Ascend910);
    let file = &sim.inner.file;
    let all = sim.notifies_free(0).unwrap();
    let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let id = sim.notify_info(h).unwrap().id;
    // A process that registered, joined the notify and died (its pid: a reaped child).
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let j = (0..64)
        .find(|&i| file.proc_entry(i).unwrap().word.load(SeqCst) == 0)
        .unwrap();
    let e = file.proc_entry(j).unwrap();
    e.start_time.store(1, SeqCst);
    e.word
        .store((u64::from(shm::P_ALIVE) << 32) | u64::from(dead), SeqCst);
    let slot = file.slot(0, id).unwrap();
    assert_eq!(slot.join(j, slot.generation()), Ok(true));
    sim.destroy_notify(h).unwrap();
    assert_eq!(sim.notifies_free(0).unwrap(), all, "the dead holder's id");
    assert_eq!(e.word.load(SeqCst), 0, "its entry freed");
}

/// A stream whose head waits for ever for a record that this thread would queue only
/// later: queuing past the capacity fails with 507002 after the bound, with a message that
/// says why, instead of hanging; nothing queued before is lost.
#[test]
fn queuing_into_a_stuck_full_stream_fails_with_507002_instead_of_hanging() {
    let limit = Duration::from_millis(200);
    let (sim, _ns) = open_with("full", Sim::builder().enqueue_timeout(Some(limit)));
    let (s, other) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
    let (gate, tick) = (
        sim.create_notify(0, CreateFlags::empty()).unwrap(),
        sim.create_notify(0, CreateFlags::empty()).unwrap(),
    );
    sim.wait_and_reset(gate, s, Timeout::Forever).unwrap();
    // Each queued round consumes its own record; a round whose wait is refused leaves its
    // record set. Any lost task shows as a flag in the wrong state, or a stuck wait.
    let mut queued = 0;
    let (e, took, left_set) = loop {
        assert!(queued < 4 * STREAM_CAPACITY, "the queue never filled");
        let t0 = std::time::Instant::now();
        match sim.record(tick, s) {
            Ok(()) => queued += 1,
            Err(e) => break (e, t0.elapsed(), false),
        }
        match sim.wait_and_reset(tick, s, Timeout::Forever) {
            Ok(()) => queued += 1,
            Err(e) => break (e, t0.elapsed(), true),
        }
    };
    assert_eq!(e.kind(), Error::StreamTaskFull, "{e}");
    assert!(took >= limit, "refused after {took:?}, before {limit:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("stayed full") && msg.contains(ENV_ENQUEUE_TIMEOUT),
        "{msg}"
    );
    let head = format!(
        "a wait on notify id {} of device 0 with no timeout",
        sim.notify_info(gate).unwrap().id
    );
    assert!(msg.contains(&head), "`{head}` missing: {msg}");
    assert!(queued >= STREAM_CAPACITY, "only {queued} tasks were queued");
    // Unblock the head: every task queued before the refusal runs.
    sim.record(gate, other).unwrap();
    let sync = SyncWait::AtMost(Duration::from_secs(10));
    sim.synchronize(s, sync).unwrap();
    sim.synchronize(other, sync).unwrap();
    assert_eq!(
        sim.try_consume(tick).unwrap(),
        left_set,
        "a queued task was lost"
    );
    sim.record(tick, s).unwrap();
    sim.synchronize(s, sync).unwrap();
    assert!(
        sim.try_consume(tick).unwrap(),
        "the stream did not go on after 507002"
    );
}

/// Another process (here: this one, by path) truncates the namespace's file while it is
/// mapped: touching the lost pages must not kill the process (SIGBUS), a stream waiting
/// for ever ends with an error, and every call from then on says the state is lost.
#[test]
fn a_truncated_namespace_file_is_an_error_not_a_crash() {
    let (sim, _ns) = open("trunc", Soc::Ascend910B);
    let s = sim.create_stream(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::OpenOptions::new()
        .write(true)
        .open(sim.shm_path())
        .unwrap()
        .set_len(4096)
        .unwrap();
    // The waiting stream wakes within a sleep chunk (50 ms), touches its lost slot and
    // ends with the error.
    let e = sim
        .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
    let e = sim.create_notify(0, CreateFlags::empty()).unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
    assert!(e.to_string().contains("truncated"), "{e}");
    assert_eq!(
        sim.record(n, s).unwrap_err().kind(),
        Error::DrvInternalError
    );
    assert_eq!(
        sim.notifies_free(0).unwrap_err().kind(),
        Error::DrvInternalError
    );
    // Opening the namespace again is refused: here (this process's mapping is lost) and
    // in a fresh process, whose open checks the file's size before it maps it
    // (`mapfile`'s `a_short_file_is_refused_at_once`).
    let again = Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(2)
        .namespace(sim.namespace())
        .open()
        .unwrap_err();
    assert!(again.to_string().contains("truncated"), "{again}");
}

#[test]
fn what_a_stream_is_blocked_on_round_trips_through_its_note() {
    for b in [
        Blocked::Wait {
            dev: 63,
            id: 65_534,
            forever: true,
        },
        Blocked::Wait {
            dev: 0,
            id: 1,
            forever: false,
        },
        Blocked::CntWait {
            dev: 7,
            id: 8191,
            forever: false,
        },
        Blocked::HostFunction,
    ] {
        assert_ne!(b.note(), 0, "{b:?}");
        assert_eq!(Blocked::from_note(b.note()), Some(b));
    }
    assert_eq!(Blocked::from_note(0), None);
    assert_eq!(Blocked::describe(0), "has not finished");
    assert!(Blocked::describe(Blocked::HostFunction.note()).contains("host function"));
}

/// A host function that does not return (until let go) at a stream's head: a full queue
/// behind it says so.
#[test]
fn a_full_queue_behind_a_host_function_names_it() {
    let bounded = Sim::builder().enqueue_timeout(Some(Duration::from_millis(100)));
    let (sim, _ns) = open_with("fullhost", bounded);
    let s = sim.create_stream(0).unwrap();
    static HOLD: AtomicU32 = AtomicU32::new(1);
    unsafe extern "C" fn hold(_: *mut std::ffi::c_void) {
        let end = Instant::now() + Duration::from_secs(20);
        while HOLD.load(Ordering::SeqCst) == 1 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    // SAFETY: `hold` ignores its argument and does not unwind.
    let call = unsafe { HostCall::new(hold, std::ptr::null_mut()) };
    sim.launch_host_func(s, call).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let e = loop {
        if let Err(e) = sim.record(n, s) {
            break e;
        }
    };
    HOLD.store(0, Ordering::SeqCst);
    assert_eq!(e.kind(), Error::StreamTaskFull, "{e}");
    assert!(
        e.to_string()
            .contains("is a host function that has not returned"),
        "{e}"
    );
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))
        .unwrap();
}

/// A host function's box, emptied, stays with its worker until the worker's queue runs dry
/// (`job::run_host_call`), not freed on the way to the next task: a host function queued
/// right behind another finds the first one's box kept; one queued after the worker parked
/// finds none.
#[test]
fn a_host_functions_box_is_freed_once_the_queue_runs_dry() {
    let (sim, _ns) = open("spentcall", Soc::Ascend910B);
    let s = sim.create_stream(0).unwrap();
    static GATE: AtomicU32 = AtomicU32::new(0);
    /// 1: the looking host function found a box kept, 2: it found none.
    static KEPT: AtomicU32 = AtomicU32::new(0);
    unsafe extern "C" fn gate(_: *mut std::ffi::c_void) {
        let end = Instant::now() + Duration::from_secs(20);
        while GATE.load(Ordering::SeqCst) == 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    unsafe extern "C" fn look(_: *mut std::ffi::c_void) {
        let kept = crate::job::spent_call_kept();
        KEPT.store(if kept { 1 } else { 2 }, Ordering::SeqCst);
    }
    // SAFETY: both functions ignore their argument and do not unwind.
    let (first, second) = unsafe {
        (
            HostCall::new(gate, std::ptr::null_mut()),
            HostCall::new(look, std::ptr::null_mut()),
        )
    };
    let stream = sim.stream(s).unwrap().0;
    // The new stream's worker parks first (nothing queued yet).
    until("the worker parked", || stream.stats().sleeps >= 1);
    let parks = stream.stats().sleeps;
    sim.launch_host_func(s, first).unwrap();
    sim.launch_host_func(s, second).unwrap();
    GATE.store(1, Ordering::SeqCst);
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(KEPT.load(Ordering::SeqCst), 1, "the first call's box, kept");
    // It woke up for the two calls; its next park comes after its queue ran dry.
    until("the worker parked again", || stream.stats().sleeps > parks);
    // SAFETY: as above.
    sim.launch_host_func(s, unsafe { HostCall::new(look, std::ptr::null_mut()) })
        .unwrap();
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(
        KEPT.load(Ordering::SeqCst),
        2,
        "freed when the queue ran dry"
    );
}

/// Polls `done` every millisecond until it holds; panics naming `what` if it does not within
/// 20 s (a test fails, it does not hang).
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < end, "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits (up to 10 s) until `file`'s busy count and this process's part of it are both
/// `want`, then asserts they are.
fn settle_busy(file: &shm::ShmFile, want: u32, what: &str) {
    let counts = || {
        (
            file.busy().load(SeqCst),
            file.own_busy().unwrap().load(SeqCst),
        )
    };
    let end = Instant::now() + Duration::from_secs(10);
    while counts() != (want, want) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(counts(), (want, want), "{what}");
}

/// The count of busy stream workers ([`crate::spin`]): a worker waiting on a notify is out of
/// it while it sleeps, back in once a record wakes it, and out again when its queue runs dry;
/// a host thread woken from a wait leaves the count as it found it; reclaiming a dead
/// process's entry takes its part out.
#[test]
fn the_busy_count_follows_stream_workers() {
    let (sim, _ns) = open("busy", Soc::Ascend910B);
    let file = &sim.inner.file;
    let settle = |want: u32, what: &str| settle_busy(file, want, what);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    let other = sim.create_stream(0).unwrap();
    static HOLD: AtomicU32 = AtomicU32::new(1);
    unsafe extern "C" fn hold(_: *mut std::ffi::c_void) {
        let end = Instant::now() + Duration::from_secs(20);
        while HOLD.load(Ordering::SeqCst) == 1 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    // SAFETY: `hold` ignores its argument and does not unwind.
    let call = unsafe { HostCall::new(hold, std::ptr::null_mut()) };
    sim.launch_host_func(s, call).unwrap();
    let asleep = || {
        until("a waiter on the notify", || {
            sim.notify(n).unwrap().r.slot().sync.waiters() != 0
        });
        // Past any spin (at most `table::MAX_SPIN`): asleep.
        std::thread::sleep(Duration::from_millis(20));
    };
    asleep();
    settle(0, "a worker asleep in a wait counts");
    sim.record(n, other).unwrap();
    settle(1, "a worker running after its wait does not count");
    HOLD.store(0, Ordering::SeqCst);
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))
        .unwrap();
    settle(0, "a parked worker counts");
    std::thread::scope(|sc| {
        let waiter = sc.spawn(|| sim.host_wait(n, Duration::from_secs(20)));
        asleep();
        sim.record(n, other).unwrap();
        waiter.join().unwrap().unwrap();
    });
    sim.synchronize(other, SyncWait::AtMost(Duration::from_secs(20)))
        .unwrap();
    settle(0, "a host thread woken from a wait left its place taken");
    // A dead process's part: an unused entry holding 3 of the 5.
    let dead = (0..table::MAX_PROCS)
        .find(|&i| i != file.me() && file.proc_entry(i).is_some())
        .unwrap();
    file.proc_entry(dead).unwrap().busy.store(3, SeqCst);
    file.busy().store(5, SeqCst);
    file.reclaim_proc(dead);
    assert_eq!(file.busy().load(SeqCst), 2);
    assert_eq!(file.proc_entry(dead).unwrap().busy.load(SeqCst), 0);
    file.busy().store(0, SeqCst);
}

/// Takes a free process entry of `file` for a process that has exited (its pid, alive, start
/// time 1), after `set` filled in its parts.
fn dead_proc_entry(file: &shm::ShmFile, set: impl FnOnce(&shm::ProcEntry)) -> &shm::ProcEntry {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id();
    c.wait().unwrap();
    let j = (0..table::MAX_PROCS)
        .find(|&i| file.proc_entry(i).unwrap().word.load(SeqCst) == 0)
        .unwrap();
    let e = file.proc_entry(j).unwrap();
    e.start_time.store(1, SeqCst);
    set(e);
    e.word
        .store((u64::from(shm::P_ALIVE) << 32) | u64::from(dead), SeqCst);
    e
}

/// What a process killed between a wake-up and the woken thread's run leaves in the busy
/// count, where its entry does not hold it, goes when its entry is reclaimed: a dead process
/// whose entry holds 1 (a worker counted) while the header holds 2 for it (that worker, and
/// one a record woke that never ran). A count below the entries' sum is left as it is (a
/// place about to be counted, see `shm::busy`).
#[test]
fn a_dead_process_s_uncounted_wake_up_leaves_the_busy_count_with_its_entry() {
    let (sim, _ns) = open("busydead", Soc::Ascend910B);
    let file = &sim.inner.file;
    assert_eq!(file.busy().load(SeqCst), 0, "no stream, no busy worker");
    let dead_entry = |part: u32| dead_proc_entry(file, |e| e.busy.store(part, SeqCst));
    let e = dead_entry(1);
    file.busy().fetch_add(2, SeqCst);
    assert_eq!(sim.gc().unwrap().processes, 1);
    assert_eq!(e.word.load(SeqCst), 0, "its entry freed");
    assert_eq!(file.busy().load(SeqCst), 0, "the count back");
    // Below the sum: a woken thread that gave its place back before its waker counted it.
    file.busy().store(u32::MAX, SeqCst);
    dead_entry(0);
    assert_eq!(sim.gc().unwrap().processes, 1);
    assert_eq!(
        file.busy().load(SeqCst),
        u32::MAX,
        "a count below the sum stays"
    );
    file.busy().store(0, SeqCst);
}

/// What a process killed while one of its waits counted as spinning leaves in the count of
/// spinners goes when its entry is reclaimed, whether its entry holds the place (killed while
/// spinning) or not yet (killed between the count's two adds, `shm::counts`); a live
/// process's place stays; a corrupt part neither takes the count below zero nor keeps it up.
#[test]
fn a_dead_process_s_spinners_leave_the_count_with_its_entry() {
    let (sim, _ns) = open("spindead", Soc::Ascend910B);
    let file = &sim.inner.file;
    let share = file.waiter().spinners();
    let (count, own) = (share.total, share.part.unwrap());
    assert_eq!(count.load(SeqCst), 0, "nobody spins");
    let dead_entry = |part: u32| dead_proc_entry(file, |e| e.spinners.store(part, SeqCst));
    // A wait of this process spins (counted, its part held), as does one of each dead process.
    share.add(1);
    let e = dead_entry(1);
    count.fetch_add(1, SeqCst);
    dead_entry(0);
    count.fetch_add(1, SeqCst);
    assert_eq!(count.load(SeqCst), 3);
    assert_eq!(sim.gc().unwrap().processes, 2);
    assert_eq!(e.word.load(SeqCst), 0, "its entry freed");
    assert_eq!(e.spinners.load(SeqCst), 0, "its part given back");
    assert_eq!(
        count.load(SeqCst),
        1,
        "the dead processes' places back, ours kept"
    );
    assert_eq!(own.load(SeqCst), 1);
    // A corrupt part, below zero or far above the count.
    for part in [u32::MAX, 0x7fff_fff0] {
        dead_entry(part);
        assert_eq!(sim.gc().unwrap().processes, 1);
        let now = count.load(SeqCst);
        assert!(now <= 1, "{part:#x} left the count at {now:#x}");
        count.store(1, SeqCst);
    }
    share.sub(1);
    assert_eq!((count.load(SeqCst), own.load(SeqCst)), (0, 0));
}

/// A stream worker counted busy is out of the count while it sleeps in a count-notify wait,
/// a wait on an event or on an IPC event (their wakers count nobody), and back in once it
/// runs again.
#[test]
fn a_worker_asleep_in_other_waits_is_not_counted_busy() {
    use acl_notify_core::{
        CntNotifyOps, CntRecord, CntWait, CntWaitMode, EventFlags, EventOps, EventSpec,
    };
    let (sim, _ns) = open("busyother", Soc::Ascend950PR);
    let file = &sim.inner.file;
    let settle = |want: u32, what: &str| settle_busy(file, want, what);
    static GATE: AtomicU32 = AtomicU32::new(1);
    static TAIL: AtomicU32 = AtomicU32::new(1);
    unsafe extern "C" fn hold(arg: *mut std::ffi::c_void) {
        // SAFETY: `arg` is `&GATE` or `&TAIL`, statics.
        let flag = unsafe { &*arg.cast::<AtomicU32>() };
        let end = Instant::now() + Duration::from_secs(20);
        while flag.load(Ordering::SeqCst) == 1 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let held = |flag: &'static AtomicU32| {
        flag.store(1, SeqCst);
        // SAFETY: `hold` reads the static its argument points to and does not unwind.
        unsafe { HostCall::new(hold, std::ptr::from_ref(flag).cast_mut().cast()) }
    };
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    let other = sim.create_stream(0).unwrap();
    let third = sim.create_stream(0).unwrap();
    let c = sim.cnt_create(0).unwrap();
    let spec = |f: EventFlags| EventSpec::ex_with_flag(f.bits(), Soc::Ascend950PR).unwrap();
    let ev = sim.event_create(0, spec(EventFlags::SYNC)).unwrap();
    let ipc = sim.event_create(0, spec(EventFlags::IPC)).unwrap();
    type Step<'a> = Box<dyn Fn(RawStream) + 'a>;
    let cases: [(&str, Step<'_>, Step<'_>); 3] = [
        (
            "a count-notify wait",
            Box::new(|s| {
                sim.cnt_wait(c, s, CntWait::new(CntWaitMode::BiggerOrEqual, 1).clearing())
                    .unwrap()
            }),
            Box::new(|o| sim.cnt_record(c, o, CntRecord::add(1)).unwrap()),
        ),
        (
            "an event wait",
            Box::new(|s| sim.stream_wait_event(s, ev, Timeout::Forever).unwrap()),
            Box::new(|_| {}),
        ),
        (
            "an IPC event wait",
            Box::new(|s| sim.stream_wait_event(s, ipc, Timeout::Forever).unwrap()),
            Box::new(|_| {}),
        ),
    ];
    for (what, wait, release) in &cases {
        // `other`: held, then the records (an event's record is taken by the wait when it
        // is queued, so it is queued first).
        sim.launch_host_func(other, held(&GATE)).unwrap();
        sim.event_record(ev, other).unwrap();
        sim.event_record(ipc, other).unwrap();
        // `s`: a notify wait that sleeps (the worker is counted from it on), the wait under
        // test, a host function.
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        wait(s);
        sim.launch_host_func(s, held(&TAIL)).unwrap();
        until("the worker waiting on the notify", || {
            sim.notify(n).unwrap().r.slot().sync.waiters() != 0
        });
        release(other);
        sim.record(n, third).unwrap();
        // The worker took the record (it has run since: counted) and goes on to the wait
        // under test.
        let view = sim.notify(n).unwrap();
        let sync = &view.r.slot().sync;
        until("the worker past its notify wait", || {
            sync.waiters() == 0 && !sync.is_set()
        });
        settle(0, &format!("a worker asleep in {what} counts"));
        GATE.store(0, SeqCst);
        settle(1, &format!("a worker running after {what} does not count"));
        TAIL.store(0, SeqCst);
        for st in [s, other] {
            sim.synchronize(st, SyncWait::AtMost(Duration::from_secs(20)))
                .unwrap();
        }
        settle(0, "a parked worker counts");
    }
}

/// A record's time stamp is read once per run of quick jobs: a wait that slept, or a
/// host function, between two records of one batch must not leave the second with the
/// first one's time.
#[test]
fn a_record_after_a_blocking_job_gets_a_fresh_time_stamp() {
    let (sim, _ns) = open("stamp", Soc::Ascend910B);
    let s = sim.create_stream(0).unwrap();
    let other = sim.create_stream(0).unwrap();
    let n: Vec<RawNotify> = (0..4)
        .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
        .collect();
    let stamp = |h: RawNotify| sim.notify(h).unwrap().r.slot().last_record().1;
    const GAP: Duration = Duration::from_millis(100);
    // Held behind a wait, so that the jobs after it are taken from the queue together.
    let hold = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.wait_and_reset(hold, s, Timeout::Forever).unwrap();
    // Batch: record n0, wait n1 (sleeps ~100 ms), record n2, host sleep, record n3.
    sim.record(n[0], s).unwrap();
    sim.wait_and_reset(n[1], s, Timeout::Forever).unwrap();
    sim.record(n[2], s).unwrap();
    unsafe extern "C" fn nap(_: *mut std::ffi::c_void) {
        std::thread::sleep(GAP);
    }
    // SAFETY: `nap` ignores its argument and does not unwind.
    let nap = unsafe { HostCall::new(nap, std::ptr::null_mut()) };
    sim.launch_host_func(s, nap).unwrap();
    sim.record(n[3], s).unwrap();
    sim.record(hold, other).unwrap();
    // The stream is in the wait on n1 (so past the record of n0) before the gap starts: on a
    // loaded machine it may take longer than the gap to get there, and then would not sleep.
    let t = Instant::now();
    while sim.notify(n[1]).unwrap().r.slot().sync.waiters() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the stream never waited"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(GAP);
    sim.record(n[1], other).unwrap();
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    let (t0, t2, t3) = (stamp(n[0]), stamp(n[2]), stamp(n[3]));
    // The coarse clock ticks every few ms: allow 20 ms of the 100.
    let at_least = (GAP - Duration::from_millis(20)).as_nanos() as u64;
    assert!(t0 > 0);
    assert!(
        t2 >= t0 + at_least,
        "stamp after a sleeping wait is stale: {t0} → {t2}"
    );
    assert!(
        t3 >= t2 + at_least,
        "stamp after a host function is stale: {t2} → {t3}"
    );
}

/// The largest number of `pairs` that fall into one set of the pair cache.
fn most_pairs_in_one_set(pairs: impl Iterator<Item = (RawNotify, RawStream)>) -> usize {
    use crate::pair_cache::SETS;
    let mut per_set = [0usize; SETS];
    for (n, s) in pairs {
        per_set[set_of(n.0, s.0)] += 1;
    }
    per_set.iter().max().copied().unwrap()
}

/// The pair cache holds every (notify, stream) pair of a ring of 8 notify pairs between two
/// streams (the bench's handoff, 32 pairs) at once, and every pair of one notify recorded by
/// 8 streams, or of 4 notifies and 8 streams: the handles a `Sim` gives out fall into sets of
/// at most `WAYS` pairs each, so none of them evicts another. (With the stride of 16 it had
/// until 2026-12-05, one notify's pairs with 8 streams fell into 2 sets: every record missed.)
#[test]
fn the_pair_cache_holds_a_handoff_rings_32_pairs_and_one_notify_on_8_streams() {
    use crate::pair_cache::WAYS;
    let (sim, _ns) = open("pincache", Soc::Ascend910B);
    let streams: Vec<RawStream> = (0..8).map(|_| sim.create_stream(0).unwrap()).collect();
    let notifies: Vec<RawNotify> = (0..16)
        .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
        .collect();
    let handoff = notifies
        .iter()
        .flat_map(|&n| streams[..2].iter().map(move |&s| (n, s)));
    let most = most_pairs_in_one_set(handoff);
    assert!(most <= WAYS, "a set holds {most} of the handoff's 32 pairs");
    for k in [1, 4] {
        let fan = notifies[..k]
            .iter()
            .flat_map(|&n| streams.iter().map(move |&s| (n, s)));
        let most = most_pairs_in_one_set(fan);
        assert!(
            most <= WAYS,
            "a set holds {most} of the pairs of {k} notifies with 8 streams"
        );
    }
    for s in streams {
        sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
    }
    for n in notifies {
        sim.destroy_notify(n).unwrap();
    }
}

#[test]
fn a_stream_wait_spins_the_longest_spin_unless_its_last_wait_slept_long() {
    let us = |n: u64| n * 1000;
    let (base, max) = (SPIN_NS, MAX_SPIN_NS);
    assert_eq!((base, max), (us(10), us(50)));
    // Found its record spinning, or woken soon after it gave up: the longest spin next.
    assert_eq!(next_spin(None), max);
    assert_eq!(next_spin(Some(0)), max);
    assert_eq!(next_spin(Some(us(14))), max);
    assert_eq!(next_spin(Some(max)), max);
    // A long sleep (nothing was coming): the table's spin.
    assert_eq!(next_spin(Some(max + 1)), base);
    assert_eq!(next_spin(Some(u64::MAX)), base);
    // Many waits that found their record spinning do not bring it down (they did, by 1/256
    // each, until the fed cross-process round trip showed the cost: `waiters::next_spin`).
    let mut s = max;
    for _ in 0..1000 {
        s = next_spin(None);
    }
    assert_eq!(s, max);
    // A hint of zero (a fresh stream) starts at the longest spin; a hint is kept in bounds.
    let (sim, _ns) = open("adapt", Soc::Ascend910B);
    let w = AdaptiveWaiter::new(sim.inner.file.waiter(), 0);
    assert_eq!(w.spin_limit(), table::MAX_SPIN);
    assert_eq!(w.next_spin(), max);
    let w = AdaptiveWaiter::new(sim.inner.file.waiter(), 1);
    assert_eq!(w.spin_limit(), table::SPIN);
}

/// A stream wait whose spin ran to its limit sleeps with the kernel's shortest slice
/// (`wake_slice`), given back after the thread's next wake-up call; one cut short (the
/// spinners' budget, a yield that lost the CPU) sleeps as it is.
#[test]
fn only_a_wait_whose_spin_ran_out_sleeps_with_the_short_slice() {
    let (sim, _ns) = open("shortslice", Soc::Ascend910B);
    let file = &sim.inner.file;
    std::thread::scope(|s| {
        s.spawn(|| {
            // The word is not the value the waits expect: each "sleep" returns at once.
            let word = AtomicU32::new(1);
            let cut_short = AdaptiveWaiter::new(file.waiter(), 0);
            cut_short.spinner.stop();
            cut_short.wait_private(&word, 0, Some(Duration::from_millis(1)));
            assert!(!crate::wake_slice::is_short(), "a wait cut short");
            let ran_out = AdaptiveWaiter::new(file.waiter(), 0);
            ran_out.wait_private(&word, 0, Some(Duration::from_millis(1)));
            assert!(
                crate::wake_slice::is_short() || !crate::wake_slice::supported(),
                "a wait whose spin ran out"
            );
            // Its next wake-up call gives it back (nobody sleeps on the word: woke none).
            file.waiter().wake_private(&word, 1);
            assert!(!crate::wake_slice::is_short(), "after a wake-up call");
        });
    });
}

#[cfg(target_arch = "x86_64")]
#[test]
fn prefetchw_is_used_exactly_when_the_cpu_has_it() {
    // The kernel's name for the CPUID bit is `3dnowprefetch`.
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags = info
        .lines()
        .find(|l| l.starts_with("flags"))
        .expect("no flags line in /proc/cpuinfo");
    let kernel_says = flags.split_whitespace().any(|f| f == "3dnowprefetch");
    assert_eq!(has_prefetchw(), kernel_says);
    // Either way the hint is harmless, on any address.
    let x = [0u8; 64];
    prefetch_for_write(x.as_ptr());
    prefetch_for_write(std::ptr::null());
}

#[test]
fn stream_cpus_parse_and_say_what_is_wrong() {
    assert_eq!(StreamCpus::parse("off"), Ok(StreamCpus::Scheduler));
    assert_eq!(StreamCpus::parse("auto"), Ok(StreamCpus::Adaptive));
    assert_eq!(StreamCpus::default(), StreamCpus::Adaptive);
    assert_eq!(StreamCpus::parse(" spread "), Ok(StreamCpus::Spread));
    assert_eq!(
        StreamCpus::parse("3,0-2"),
        Ok(StreamCpus::List(vec![3, 0, 1, 2]))
    );
    for (bad, says) in [
        ("", "not a CPU number"),
        ("1,,2", "not a CPU number"),
        ("x", "not a CPU number"),
        ("-1", "not a CPU number"),
        ("3-1", "backwards"),
        ("1024", "0 to 1023"),
    ] {
        let e = StreamCpus::parse(bad).unwrap_err();
        assert!(e.contains(says), "{bad:?}: {e}");
    }
}

#[test]
fn spread_streams_take_the_allowed_cpus_in_turn() {
    let allowed = stream::allowed_cpus();
    let ns = format!("unit-lib-cpus-{}", std::process::id());
    let _g = Ns(ns.clone());
    let sim = Sim::builder()
        .namespace(&ns)
        .devices(1)
        .stream_cpus(StreamCpus::Spread)
        .open()
        .unwrap();
    let streams: Vec<RawStream> = (0..allowed.len() + 1)
        .map(|_| sim.create_stream(0).unwrap())
        .collect();
    let placed: Vec<usize> = streams
        .iter()
        .map(|&s| sim.stream_cpu(s).unwrap().unwrap())
        .collect();
    // In turn, starting at this process's place in the namespace.
    let first = sim.inner.file.me() as usize;
    let k = allowed.len();
    let want: Vec<usize> = (0..=k).map(|i| allowed[(first + i) % k]).collect();
    assert_eq!(placed, want);
    // The default stream is placed too, and placed streams still run work.
    let d = sim.default_stream(0).unwrap();
    assert_eq!(
        sim.stream_cpu(d).unwrap(),
        Some(allowed[(first + k + 1) % k])
    );
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.record(n, streams[0]).unwrap();
    sim.wait_and_reset(n, d, Timeout::from_c(5)).unwrap();
    sim.synchronize(d, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    // An explicit list is used in its order; the kernel places streams by default.
    let sim2 = Sim::builder()
        .namespace(&ns)
        .devices(1)
        .stream_cpus(StreamCpus::List(vec![allowed[0]]))
        .open()
        .unwrap();
    let s = sim2.create_stream(0).unwrap();
    assert_eq!(sim2.stream_cpu(s).unwrap(), Some(allowed[0]));
    let (sim3, _ns3) = open("cpus-off", Soc::Ascend910B);
    let s = sim3.create_stream(0).unwrap();
    assert_eq!(sim3.stream_cpu(s).unwrap(), None);
    assert_eq!(
        sim3.stream_cpu(RawStream(7)).unwrap_err().kind(),
        Error::InvalidHandle
    );
}

#[test]
fn a_cpu_list_the_process_may_not_use_is_refused_at_open() {
    let allowed = stream::allowed_cpus();
    let outside = (0..MAX_CPU).find(|c| !allowed.contains(c)).unwrap();
    for list in [vec![outside], vec![]] {
        let e = Sim::builder()
            .namespace("unit-lib-cpus-bad")
            .stream_cpus(StreamCpus::List(list.clone()))
            .open()
            .unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{list:?}");
        assert!(e.to_string().contains("stream_cpus"), "{e}");
    }
    assert!(
        Sim::builder()
            .namespace("unit-lib-cpus-bad")
            .stream_cpus(StreamCpus::List(vec![outside]))
            .open()
            .unwrap_err()
            .to_string()
            .contains(&format!("CPU {outside} is not one this process may use"))
    );
}

#[test]
fn record_wait_on_streams_and_host() {
    let (sim, _ns) = open("rw", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    let d = sim.default_stream(0).unwrap();
    assert_eq!(sim.default_stream(0).unwrap(), d);
    // Wait first (stalls stream s, not us), record later on the default stream.
    sim.wait_and_reset(n, s, Timeout::from_c(5)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(sim.query(s).unwrap(), StreamStatus::NotReady);
    sim.record(n, d).unwrap();
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(sim.query(s).unwrap(), StreamStatus::Complete);
    // Record first, collapse, one wait consumes.
    sim.record(n, d).unwrap();
    sim.record(n, d).unwrap();
    sim.synchronize(d, SyncWait::Forever).unwrap();
    assert!(sim.try_consume(n).unwrap());
    assert!(!sim.try_consume(n).unwrap());
    let t0 = Instant::now();
    let e = sim.host_wait(n, Duration::from_millis(30)).unwrap_err();
    assert_eq!(e.kind(), Error::WaitTimeout);
    assert!(t0.elapsed() >= Duration::from_millis(25));
    assert!(e.to_string().contains("owner pid"), "{e}");
    sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
    assert_eq!(sim.query(s).unwrap_err().kind(), Error::InvalidHandle);
    assert_eq!(
        sim.destroy_stream(d, StreamDestroy::Drain)
            .unwrap_err()
            .kind(),
        Error::InvalidHandle
    );
    sim.destroy_notify(n).unwrap();
    assert_eq!(
        sim.destroy_notify(n).unwrap_err().kind(),
        Error::InvalidHandle
    );
}

#[test]
fn stream_wait_timeout_is_reported_once_with_details() {
    let (sim, _ns) = open("to", Soc::Ascend910B);
    let n = sim.create_notify(1, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(1).unwrap();
    sim.wait_and_reset(n, s, Timeout::from_c(1)).unwrap();
    let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
    assert_eq!(e.kind(), Error::TaskTimeout);
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("notify {}", sim.notify_info(n).unwrap().id)),
        "{msg}"
    );
    assert!(msg.contains("device 1") && msg.contains("1 s"), "{msg}");
    sim.synchronize(s, SyncWait::Forever).unwrap();
    // Wait from another device: 107000.
    let s0 = sim.create_stream(0).unwrap();
    assert_eq!(
        sim.wait_and_reset(n, s0, Timeout::Forever)
            .unwrap_err()
            .kind(),
        Error::ParamInvalid
    );
}

/// The discard wakes the sleeping wait through the waker it registered
/// ([`WakeSleepers`]), not by waiting for the end of the table's sleep chunk.
#[test]
fn force_destroy_cancels_a_blocked_wait_promptly() {
    let (sim, _ns) = open("fd", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let mut fastest = Duration::MAX;
    // Until one is fast: preemption on a loaded machine may slow any single one.
    let mut tries = 0;
    while tries < 20 && fastest >= table::CHUNK / 5 {
        tries += 1;
        let s = sim.create_stream(0).unwrap();
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        let t = Instant::now();
        while sim.notify(n).unwrap().r.slot().sync.waiters() == 0 {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the stream never waited"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Asleep on the flag by now, 10 ms into a 50 ms chunk.
        std::thread::sleep(table::CHUNK / 5);
        let t0 = Instant::now();
        sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
        fastest = fastest.min(t0.elapsed());
    }
    // Without the waker each discard would take the rest of the chunk (about 40 ms).
    assert!(
        fastest < table::CHUNK / 5,
        "fastest of {tries} discards took {fastest:?}"
    );
    // The cancelled wait consumed nothing: a record is still there for the next waiter.
    let d = sim.default_stream(0).unwrap();
    sim.record(n, d).unwrap();
    sim.synchronize(d, SyncWait::Forever).unwrap();
    sim.host_wait(n, Duration::from_secs(5)).unwrap();
}

/// Discarding a device's streams (a device reset, the end of a session) takes its
/// default stream — a new one serves the device next — and a stream that a draining
/// destroy on another thread is still working through; a synchronize blocked on either
/// and the drain itself return, and other devices' streams are untouched.
/// A stream destroyed (draining) from one of its own tasks, with a wait that never ends
/// queued behind that task: the destroy returns at once while the worker drains on, and a
/// later discard of the device (a finalize or reset) still finds the stream and ends it.
#[test]
fn a_stream_draining_from_its_own_task_is_still_found_by_a_discard() {
    let (sim, _ns) = open("selfdrain", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    let (st, _) = sim.stream(s).unwrap();
    let destroyed = Arc::new(Mutex::new(None));
    let (sim2, d2) = (sim.clone(), Arc::clone(&destroyed));
    // The task destroys its stream only once the wait is queued behind it (else the
    // destroy could run first and the wait's enqueue fail: 2 in 40 runs did).
    let (queued_tx, queued) = std::sync::mpsc::channel::<()>();
    sim.enqueue(&st, s, move |_| {
        let _ = queued.recv_timeout(Duration::from_secs(10));
        *d2.lock().unwrap() = Some(sim2.destroy_stream(s, StreamDestroy::Drain));
        Ok(())
    })
    .unwrap();
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    queued_tx.send(()).unwrap();
    let t0 = Instant::now();
    while destroyed.lock().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(10), "the task never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(destroyed.lock().unwrap().take(), Some(Ok(())));
    assert!(
        !st.has_exited(),
        "the worker drains the wait behind the destroy"
    );
    assert_eq!(sim.discard_streams_where(|_| true), 1);
    assert!(st.has_exited(), "the discard ended the worker");
    assert!(lock(&sim.inner.draining).is_empty());
}

#[test]
fn discarding_a_device_s_streams_takes_its_default_and_draining_streams() {
    use std::sync::mpsc;
    const LONG: Duration = Duration::from_secs(20);
    let (sim, _ns) = open("dsw", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let d = sim.default_stream(0).unwrap();
    sim.wait_and_reset(n, d, Timeout::Forever).unwrap();
    let s = sim.create_stream(0).unwrap();
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    let other = sim.create_stream(1).unwrap();

    let (drained_tx, drained) = mpsc::channel();
    let drainer = {
        let sim = sim.clone();
        std::thread::spawn(move || {
            let _ = drained_tx.send(sim.destroy_stream(s, StreamDestroy::Drain));
        })
    };
    // The drain has begun once the stream is gone from the table.
    let t0 = Instant::now();
    while sim.query(s).is_ok() {
        assert!(t0.elapsed() < LONG, "the drain never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    let (synced_tx, synced) = mpsc::channel();
    let syncer = {
        let sim = sim.clone();
        std::thread::spawn(move || {
            let _ = synced_tx.send(sim.synchronize(d, SyncWait::AtMost(LONG)));
        })
    };
    std::thread::sleep(Duration::from_millis(50));

    let (tx, discarded) = mpsc::channel();
    let discarder = {
        let sim = sim.clone();
        std::thread::spawn(move || {
            let _ = tx.send(sim.discard_streams_where(|dev| dev == 0));
        })
    };
    assert_eq!(
        discarded.recv_timeout(LONG),
        Ok(2),
        "the discard did not end"
    );
    discarder.join().unwrap();
    let drain = drained.recv_timeout(LONG).expect("the drain did not end");
    assert_eq!(drain.unwrap_err().kind(), Error::InvalidHandle);
    let sync = synced
        .recv_timeout(LONG)
        .expect("the synchronize did not end");
    // 107017, not the synchronize's own bound (507046 after `LONG`): the discard ended it. (A
    // 5 s bound on the whole stood here until 2026-12-07; the `recv_timeout`s are the hang
    // guards.)
    assert_eq!(sync.unwrap_err().kind(), Error::InvalidHandle);
    drainer.join().unwrap();
    syncer.join().unwrap();

    // Device 0's next default stream is a new, empty one; device 1 kept its stream.
    let d2 = sim.default_stream(0).unwrap();
    assert_ne!(d2, d);
    assert!(sim.query(d).is_err());
    assert_eq!(sim.query(d2).unwrap(), StreamStatus::Complete);
    sim.record(n, other).unwrap();
    sim.synchronize(other, SyncWait::AtMost(LONG)).unwrap();
    sim.wait_and_reset(n, d2, Timeout::Forever).unwrap();
    sim.synchronize(d2, SyncWait::AtMost(LONG)).unwrap();
}

#[test]
fn ids_are_freed_by_the_last_holder_and_handles_are_checked() {
    let (sim, _ns) = open("ids", Soc::Ascend310P);
    assert_eq!(sim.notifies_free(0).unwrap(), 1024);
    let mut hs = Vec::new();
    for _ in 0..1024 {
        hs.push(sim.create_notify(0, CreateFlags::empty()).unwrap());
    }
    let e = sim.create_notify(0, CreateFlags::empty()).unwrap_err();
    assert_eq!(e.kind(), Error::NoNotifyResource);
    assert!(e.to_string().contains("1024"), "{e}");
    assert_eq!(sim.notifies_free(1).unwrap(), 1024);
    // A pending task keeps a destroyed notify alive.
    let s = sim.create_stream(0).unwrap();
    sim.wait_and_reset(hs[0], s, Timeout::from_c(5)).unwrap();
    sim.destroy_notify(hs[0]).unwrap();
    assert_eq!(sim.notifies_free(0).unwrap(), 0);
    let other = sim.create_stream(1).unwrap();
    assert_eq!(
        sim.record(hs[0], other).unwrap_err().kind(),
        Error::InvalidHandle
    );
    for h in &hs[1..] {
        sim.destroy_notify(*h).unwrap();
    }
    assert_eq!(sim.notifies_free(0).unwrap(), 1023);
    let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
    assert_eq!(e.kind(), Error::TaskTimeout);
    assert_eq!(sim.notifies_free(0).unwrap(), 1024);
    // Garbage and cross-kind handles.
    for bad in [0u64, 1, u64::MAX, s.0] {
        assert_eq!(
            sim.notify_info(RawNotify(bad)).unwrap_err().kind(),
            Error::InvalidHandle
        );
    }
    assert_eq!(
        sim.query(RawStream(hs[1].0)).unwrap_err().kind(),
        Error::InvalidHandle
    );
    // DEVICE_USE_ONLY and IPC on a SoC that has them / lacks batch reset.
    assert!(sim.create_notify(0, CreateFlags::DEVICE_USE_ONLY).is_ok());
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    assert_eq!(
        sim.batch_reset(&[n]).unwrap_err().kind(),
        Error::FeatureNotSupport
    );
}

#[test]
fn stream_pins_keep_a_notify_only_while_its_handle_or_tasks_do() {
    let (sim, _ns) = open("pins", Soc::Ascend910B);
    let all = sim.notifies_free(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    // More streams than a handle keeps pins for: pins are replaced, none is lost.
    let streams: Vec<_> = (0..PINS + 2)
        .map(|_| sim.create_stream(0).unwrap())
        .collect();
    for _ in 0..3 {
        for &s in &streams {
            sim.record(n, s).unwrap();
            sim.wait_and_reset(n, s, Timeout::from_c(5)).unwrap();
            sim.synchronize(s, SyncWait::Forever).unwrap();
        }
    }
    assert_eq!(sim.notifies_free(0).unwrap(), all - 1);
    // The handle goes, and with it every pin: the id is free again.
    sim.destroy_notify(n).unwrap();
    assert_eq!(sim.notifies_free(0).unwrap(), all);
    for s in streams {
        sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
    }
}

#[test]
fn export_whitelist_import_in_one_process() {
    let (sim, _ns) = open("ipc", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    assert_eq!(
        sim.set_import_pids(n, &[1]).unwrap_err().kind(),
        Error::ParamInvalid
    );
    let key = sim.export_key(n, ExportFlags::empty()).unwrap();
    assert_eq!(
        sim.export_key(n, ExportFlags::empty()).unwrap_err().kind(),
        Error::InternalError
    );
    let e = sim
        .import_by_key(1, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS)
        .unwrap_err();
    assert_eq!(e.kind(), Error::NoPermission);
    assert!(e.to_string().contains("not whitelisted"), "{e}");
    sim.set_import_pids(n, &[sim.bare_tgid()]).unwrap();
    assert_eq!(sim.notify_info(n).unwrap().state, Lifecycle::Whitelisted);
    // Device 1 without peer access: the import enables it (the flag changes nothing).
    let imp = sim
        .import_by_key(1, key.as_str(), ImportFlags::empty())
        .unwrap();
    let info = sim.notify_info(imp).unwrap();
    assert_eq!(
        (info.state, info.device, info.owner_device),
        (Lifecycle::Imported, 1, 0)
    );
    assert_eq!(info.id, sim.notify_info(n).unwrap().id);
    // On a 910B, a batch reset takes IPC notifies as any other (the 950 case is in the
    // conformance suite, `batch::ipc_notifies_per_soc`).
    sim.batch_reset(&[n, imp]).unwrap();
    // The importer records on device 1; the owner waits on device 0.
    let s1 = sim.create_stream(1).unwrap();
    sim.record(imp, s1).unwrap();
    sim.host_wait(n, Duration::from_secs(5)).unwrap();
    assert_eq!(
        sim.host_wait(imp, Duration::ZERO).unwrap_err().kind(),
        Error::ParamInvalid
    );
    // Garbage keys.
    assert_eq!(
        sim.import_by_key(0, "nope", ImportFlags::empty())
            .unwrap_err()
            .kind(),
        Error::ParamInvalid
    );
    // Recycled PID (wrong start time) is refused.
    let n2 = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let k2 = sim.export_key(n2, ExportFlags::empty()).unwrap();
    sim.set_import_pid_with_start_time(n2, sim.bare_tgid(), 12345)
        .unwrap();
    let e = sim
        .import_by_key(0, k2.as_str(), ImportFlags::empty())
        .unwrap_err();
    assert_eq!(e.kind(), Error::NoPermission);
    assert!(e.to_string().contains("recycled"), "{e}");
    // An owner that could not open pidfds (under valgrind) records this process by its start
    // time: that entry admits it.
    let n3 = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let k3 = sim.export_key(n3, ExportFlags::empty()).unwrap();
    let start = crate::sys::process_identity(sim.bare_tgid())
        .unwrap()
        .start_time;
    sim.set_import_pid_with_start_time(n3, sim.bare_tgid(), start)
        .unwrap();
    let i3 = sim
        .import_by_key(0, k3.as_str(), ImportFlags::empty())
        .unwrap();
    sim.destroy_notify(i3).unwrap();
    sim.destroy_notify(n3).unwrap();
    // Destroyed by every holder (and no task of ours still uses it): the key is stale.
    sim.synchronize(s1, SyncWait::Forever).unwrap();
    sim.destroy_notify(n).unwrap();
    sim.destroy_notify(imp).unwrap();
    assert_eq!(
        sim.import_by_key(0, key.as_str(), ImportFlags::empty())
            .unwrap_err()
            .kind(),
        Error::InvalidHandle
    );
}

/// Another process (here: a plain write to the file) leaves the sequence word of an
/// exported notify's whitelist odd. Whitelisting more PIDs is 507899 with a message naming
/// the notify, instead of rebuilding the list from empty (which dropped the PIDs already
/// whitelisted and answered success); nothing is lost once the word is restored.
#[test]
fn set_import_pids_on_a_corrupt_whitelist_is_507899_and_loses_nobody() {
    use std::os::unix::fs::FileExt;
    let (sim, _ns) = open("wl-odd", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let key = sim.export_key(n, ExportFlags::empty()).unwrap();
    sim.set_import_pids(n, &[sim.bare_tgid()]).unwrap();
    let id = u64::from(sim.notify_info(n).unwrap().id);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(sim.shm_path())
        .unwrap();
    let word = |off: u64| {
        let mut b = [0u8; 8];
        file.read_exact_at(&mut b, off).unwrap();
        u64::from_ne_bytes(b)
    };
    let wl_off = word(std::mem::offset_of!(shm::Header, whitelists_off) as u64);
    // Device 0: the whitelist of `id` is the id-th of the slab.
    let seq_off = wl_off + id * shm::WHITELIST_BYTES as u64;
    let even = word(seq_off);
    assert_eq!(even % 2, 0);
    file.write_all_at(&(even + 1).to_ne_bytes(), seq_off)
        .unwrap();
    let e = sim.set_import_pids(n, &[424242]).unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError);
    assert!(
        e.to_string()
            .contains(&format!("whitelist memory of notify {id} on device 0")),
        "{e}"
    );
    assert!(e.to_string().contains("inconsistent"), "{e}");
    // Restored: this process is still whitelisted (and 424242 was never added).
    file.write_all_at(&even.to_ne_bytes(), seq_off).unwrap();
    let imp = sim
        .import_by_key(0, key.as_str(), ImportFlags::empty())
        .unwrap();
    let wl = sim.inner.file.read_whitelist(0, id as u32).unwrap();
    assert_eq!(wl.len(), 1);
    sim.destroy_notify(imp).unwrap();
    sim.destroy_notify(n).unwrap();
}

/// Text goes through the core's one parse (`NotifyResources::import_by_key`'s default) and
/// then the simulator's one import; a malformed key keeps its place in SPEC's order: after
/// "SoC without IPC" (207000) and "no such device" (107001), with the simulator's message.
#[test]
fn a_malformed_key_is_refused_after_the_soc_and_device_checks() {
    let (sim, _ns) = open("ipc-malformed", Soc::Ascend910B);
    let kind = |dev, text: &str| {
        let e = sim
            .import_by_key(dev, text, ImportFlags::empty())
            .unwrap_err();
        (e.kind(), e.to_string())
    };
    let (k, msg) = kind(0, "garbage");
    assert_eq!(k, Error::ParamInvalid);
    assert!(msg.contains("malformed export key (7 bytes)"), "{msg}");
    let (k, msg) = kind(8, "garbage");
    assert_eq!(k, Error::InvalidDeviceId, "{msg}");
    assert!(
        msg.contains("device 8 does not exist (2 devices: 0 to 1)"),
        "{msg}"
    );
    let (no_ipc, _ns2) = open("ipc-malformed-310b", Soc::Ascend310B);
    let e = no_ipc
        .import_by_key(9, "garbage", ImportFlags::empty())
        .unwrap_err();
    assert_eq!(e.kind(), Error::FeatureNotSupport, "{e}");
}

#[test]
fn import_key_takes_a_parsed_key_with_the_same_checks() {
    let (sim, _ns) = open("ipc-parsed", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let key = sim
        .export_key(n, ExportFlags::DISABLE_PID_VALIDATION)
        .unwrap();
    // The checks made before the key is looked at still apply (here: the device).
    assert_eq!(
        sim.import_key(9, &key, ImportFlags::empty())
            .unwrap_err()
            .kind(),
        Error::InvalidDeviceId
    );
    let imp = sim.import_key(0, &key, ImportFlags::empty()).unwrap();
    let info = sim.notify_info(imp).unwrap();
    assert_eq!(info.state, Lifecycle::Imported);
    assert_eq!(info.id, sim.notify_info(n).unwrap().id);
    // Same result as the text form.
    let imp2 = sim
        .import_by_key(0, key.as_str(), ImportFlags::empty())
        .unwrap();
    assert_eq!(sim.notify_info(imp2).unwrap().id, info.id);
    // A runtime key (not one of ours) is malformed for the simulator.
    let foreign = ExportKey::from_runtime(b"some-other-runtime-key").unwrap();
    assert_eq!(
        sim.import_key(0, &foreign, ImportFlags::empty())
            .unwrap_err()
            .kind(),
        Error::ParamInvalid
    );
    for h in [imp, imp2, n] {
        sim.destroy_notify(h).unwrap();
    }
    assert_eq!(
        sim.import_key(0, &key, ImportFlags::empty())
            .unwrap_err()
            .kind(),
        Error::InvalidHandle
    );
}

/// A stream made by a thread limited to one CPU gets a worker that waits for its turn when
/// woken (`SCHED_BATCH`) and does not spin (see `spawn_stream`); its copies run and
/// synchronize as anywhere. With two CPUs or more the worker is an ordinary thread.
#[test]
fn a_stream_made_on_one_cpu_has_a_batch_worker() {
    let (sim, _ns) = open("onecpu", Soc::Ascend910B);
    // SAFETY: sched_getscheduler(2) only reads the thread's policy.
    let policy_of =
        |sim: &Sim, h| unsafe { libc::sched_getscheduler(sim.stream(h).unwrap().0.worker_tid()) };
    let cpus = stream::allowed_cpus();
    if cpus.len() >= 2 {
        let h = sim.create_stream(0).unwrap();
        assert_eq!(policy_of(&sim, h), libc::SCHED_OTHER);
        sim.destroy_stream(h, StreamDestroy::Drain).unwrap();
    }
    std::thread::scope(|t| {
        t.spawn(|| {
            stream::pin_current_thread(cpus[0]).unwrap();
            let h = sim.create_stream(0).unwrap();
            assert_eq!(policy_of(&sim, h), libc::SCHED_BATCH);
            let a = sim.malloc(0, 4096, 0).unwrap();
            let b = sim.malloc(0, 4096, 0).unwrap();
            sim.memset(a, 4096, 7, 4096).unwrap();
            for _ in 0..64 {
                // SAFETY: device to device.
                unsafe { sim.memcpy_async(b, 4096, a, 4096, MemcpyKind::DeviceToDevice, h) }
                    .unwrap();
            }
            sim.synchronize(h, SyncWait::AtMost(Duration::from_secs(10)))
                .unwrap();
            let mut back = vec![0u8; 4096];
            let host = back.as_mut_ptr().expose_provenance();
            // SAFETY: `back` is 4096 bytes of host memory.
            unsafe { sim.memcpy(host, 4096, b, 4096, MemcpyKind::DeviceToHost) }.unwrap();
            assert!(back.iter().all(|&x| x == 7));
            sim.destroy_stream(h, StreamDestroy::Drain).unwrap();
        });
    });
}

/// A stream made by a thread limited to one CPU whose worker `StreamCpus` places on another
/// CPU does not share that CPU with its feeder: its worker stays an ordinary, spinning thread.
#[test]
fn a_stream_placed_off_its_makers_one_cpu_has_an_ordinary_worker() {
    let cpus = stream::allowed_cpus();
    if cpus.len() < 2 {
        return;
    }
    let (sim, _ns) = open_with(
        "onecpu-placed",
        Sim::builder()
            .soc(Soc::Ascend910B)
            .stream_cpus(StreamCpus::List(vec![cpus[1]])),
    );
    std::thread::scope(|t| {
        t.spawn(|| {
            stream::pin_current_thread(cpus[0]).unwrap();
            let h = sim.create_stream(0).unwrap();
            assert_eq!(sim.stream_cpu(h).unwrap(), Some(cpus[1]));
            let tid = sim.stream(h).unwrap().0.worker_tid();
            // SAFETY: sched_getscheduler(2) only reads the thread's policy.
            assert_eq!(unsafe { libc::sched_getscheduler(tid) }, libc::SCHED_OTHER);
            sim.destroy_stream(h, StreamDestroy::Drain).unwrap();
        });
    });
}

/// Enabling or disabling peer access from a device to itself is the ACL layer's 100000, as
/// through the C API (`aclrtDeviceEnablePeerAccess`/`DisablePeerAccess`), after the device
/// itself is checked and before the peer and the SoC are.
#[test]
fn peer_access_to_the_device_itself_is_100000_as_through_the_c_api() {
    let (sim, _ns) = open("peer-itself", Soc::Ascend910B);
    let same = sim.enable_peer_access(1, 1).unwrap_err();
    assert_eq!(same.kind(), Error::InvalidParam, "{same}");
    let same = sim.disable_peer_access(1, 1).unwrap_err();
    assert_eq!(same.kind(), Error::InvalidParam, "{same}");
    assert_eq!(
        sim.disable_peer_access(2, 2).unwrap_err().kind(),
        Error::InvalidDeviceId
    );
    assert_eq!(
        sim.enable_peer_access(0, 2).unwrap_err().kind(),
        Error::InvalidDeviceId
    );
    // A SoC without peer access: the pair is checked first, as CANN's ACL layer does.
    let (sim, _ns) = open("peer-itself-310b", Soc::Ascend310B);
    let same = sim.disable_peer_access(0, 0).unwrap_err();
    assert_eq!(same.kind(), Error::InvalidParam, "{same}");
    let none = sim.disable_peer_access(0, 1).unwrap_err();
    assert_eq!(none.kind(), Error::FeatureNotSupport, "{none}");
}

/// A record of an IPC event that this process's stream discarded unrun fails (107023) every
/// synchronize and stream wait of the process that waited for it, through any handle of the
/// event, also once a later record was discarded too. Until 2026-12-05 only the handle whose
/// record it was knew, and only of its latest discarded record: a synchronize through another
/// handle, or a wait for an earlier discarded record, passed as if it had run.
#[test]
fn a_discarded_ipc_record_fails_the_waits_for_it_through_every_handle() {
    use acl_notify_core::{EventFlags, EventOps, EventSpec, StreamControl};
    let (sim, _ns) = open("ipcdiscard", Soc::Ascend950PR);
    let spec = EventSpec::ex_with_flag(EventFlags::IPC.bits(), Soc::Ascend950PR).unwrap();
    let a = sim.event_create(0, spec).unwrap();
    let b = sim
        .ipc_open_event(0, &sim.ipc_event_handle(a).unwrap())
        .unwrap();
    let (s1, s2, w) = (
        sim.create_stream(0).unwrap(),
        sim.create_stream(0).unwrap(),
        sim.create_stream(0).unwrap(),
    );
    let (gate, hold) = (
        sim.create_notify(0, CreateFlags::empty()).unwrap(),
        sim.create_notify(0, CreateFlags::empty()).unwrap(),
    );
    let short = SyncWait::AtMost(Duration::from_secs(10));
    // Record 1, never to run; a stream wait for it, held.
    sim.wait_and_reset(gate, s1, Timeout::Forever).unwrap();
    sim.event_record(a, s1).unwrap();
    sim.wait_and_reset(hold, w, Timeout::Forever).unwrap();
    sim.stream_wait_event(w, b, Timeout::Forever).unwrap();
    sim.abort(s1).unwrap();
    let e = sim.event_synchronize(b, short).unwrap_err();
    assert_eq!(
        e.kind(),
        Error::StreamAbort,
        "the other handle's synchronize: {e}"
    );
    // Record 2, discarded too; then the held wait for record 1 runs.
    sim.wait_and_reset(gate, s2, Timeout::Forever).unwrap();
    sim.event_record(b, s2).unwrap();
    sim.abort(s2).unwrap();
    sim.record(hold, s1).unwrap();
    let e = sim.synchronize(w, short).unwrap_err();
    assert_eq!(e.kind(), Error::StreamAbort, "the wait for record 1: {e}");
    assert!(e.to_string().contains("discarded unrun"), "{e}");
    for ev in [a, b] {
        let e = sim.event_synchronize(ev, short).unwrap_err();
        assert_eq!(
            e.kind(),
            Error::StreamAbort,
            "a synchronize of record 2: {e}"
        );
    }
    // A record that runs is waited for as usual.
    sim.event_record(a, s1).unwrap();
    sim.event_synchronize(b, short).unwrap();
}

/// How long [`stall`] holds the thread it runs on (ms; 0: not at all).
static STALL_MS: AtomicU32 = AtomicU32::new(0);

/// How many times [`stall`] has begun and ended holding its thread.
static STALLS_BEGUN: AtomicU32 = AtomicU32::new(0);
static STALLS_ENDED: AtomicU32 = AtomicU32::new(0);

/// A `SIGUSR2` handler: holds the thread it interrupts for [`STALL_MS`] (`nanosleep` is
/// async-signal-safe), as a loaded machine or a paused process may.
extern "C" fn stall(_: libc::c_int) {
    STALLS_BEGUN.fetch_add(1, SeqCst);
    let ms = STALL_MS.load(SeqCst);
    let t = libc::timespec {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
    };
    // SAFETY: sleeps this thread; `t` is a valid timespec.
    unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
    STALLS_ENDED.fetch_add(1, SeqCst);
}

/// A synchronize that reaches its limit while the stream's head is a wait whose own timeout
/// came before that limit (the stream's thread held up past both: here a signal handler
/// sleeping on it) answers the wait's 107020 once the thread fails it, as CANN's device, which
/// fails the wait at its timeout and whose synchronize reports it before its own limit
/// (hicann/runtime `stars_engine.cc`); not 507046 at its limit. Until 2026-12-05: 507046.
/// (When another test's runner runs the parked wait instead of the held-up thread, the wait
/// fails on time: the synchronize's answer is the same, and the poll, which then meets no
/// overdue wait, is not judged; alone, as nextest runs it, that does not happen.)
#[test]
fn a_synchronize_at_its_limit_reports_a_head_wait_whose_timeout_came_first() {
    let (sim, _ns) = open("sync-overdue", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    install_stall();
    STALL_MS.store(1500, SeqCst);
    let tid = sim.stream(s).unwrap().0.worker_tid();
    let t0 = Instant::now();
    sim.wait_and_reset(n, s, Timeout::Seconds(1.try_into().unwrap()))
        .unwrap();
    let sim = Arc::new(sim);
    let poller = Arc::clone(&sim);
    let holder = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: signals this process's stream worker thread `tid`.
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2) };
        // While the thread is still held, past the wait's timeout: a poll does not wait.
        std::thread::sleep(Duration::from_millis(1100));
        // Held at the poll? On a loaded machine this thread may come back after the stall
        // ended, when the wait has rightly failed: then the poll proves nothing.
        let held = STALLS_BEGUN.load(SeqCst) == 1 && STALLS_ENDED.load(SeqCst) == 0;
        let unfinished = || {
            poller
                .stream_head(s)
                .is_some_and(|h| h.completed == 0 && h.discarded == 0)
        };
        let before = unfinished();
        let looks = crate::enqueue::overdue_looks();
        let polled = poller.synchronize(s, SyncWait::AtMost(Duration::ZERO));
        let looks = crate::enqueue::overdue_looks() - looks;
        // Back while the thread is still held, and the wait still the stream's unfinished
        // head: the poll met the overdue wait, and did not wait for it (an order, not a
        // time). Otherwise the poll proves nothing either way: this thread came back after
        // the stall ended, or a runner of another test ran the parked wait and failed it on
        // time (the synchronize above then had its 107020 before its limit, and the poll
        // answers 0 for a stream with nothing left: seen at a load of 7, 2 CPUs).
        let met = held && before && STALLS_ENDED.load(SeqCst) == 0 && unfinished();
        if !met {
            println!("the poll did not meet the held, overdue wait: it proves nothing");
        }
        met.then_some((polled, looks))
    });
    let looks = crate::enqueue::overdue_looks();
    let r = sim.synchronize(s, SyncWait::AtMost(Duration::from_millis(1200)));
    let took = t0.elapsed();
    let looks = crate::enqueue::overdue_looks() - looks;
    let polled = holder.join().unwrap();
    let e = r.expect_err("the wait had no record");
    assert_eq!(e.kind(), Error::TaskTimeout, "{e} (after {took:?})");
    // Bounded, generously (a paused or starved process takes longer): the answer comes when
    // the thread fails the wait, not never. How it waited is the count below, not a time.
    assert!(took < Duration::from_secs(120), "{took:?}");
    // Its grace (the 0.6 s from its limit to the thread's return) is one sleep until the wait's
    // task retires and one until the stream is done, not a look every 5 ms (about 120).
    assert!(
        looks <= 4,
        "the synchronize went to sleep {looks} times in its grace (after {took:?})"
    );
    if let Some((polled, poll_looks)) = polled {
        assert_eq!(
            polled.map_err(|e| e.kind()),
            Err(Error::StreamSyncTimeout),
            "the poll"
        );
        // No grace for a poll: it never looked at the overdue wait, and a poll that waited
        // for the held thread would answer its 107020, not 507046.
        assert_eq!(poll_looks, 0, "the poll waited for the overdue wait");
    }
}

/// As [`a_synchronize_at_its_limit_reports_a_head_wait_whose_timeout_came_first`], with the
/// whole process paused (SIGSTOP) inside the synchronize's grace until after the grace and the
/// thread's stall have ended: both threads come back due at once, and the synchronize answers
/// by what the thread then does (fails the wait: 107020), not by the wall time the pause took.
/// Until 2026-12-06 it answered 507046 (the grace had ended during the pause). Run in a child
/// (a `Sim` of its own on this test's namespace), which its own child pauses, so that the
/// pause holds up no other test of this binary.
#[test]
fn a_synchronize_paused_in_its_grace_answers_the_overdue_wait_s_failure() {
    let ns = format!("unit-lib-sync-paused-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let _guard = Ns(ns.clone());
    let answered = crate::fork::run_in_child(|| {
        let Ok(sim) = Sim::builder().soc(Soc::Ascend910B).namespace(&ns).open() else {
            return false;
        };
        let (Ok(n), Ok(s)) = (
            sim.create_notify(0, CreateFlags::empty()),
            sim.create_stream(0),
        ) else {
            return false;
        };
        install_stall();
        STALL_MS.store(1500, SeqCst);
        let Ok(tid) = sim.stream(s).map(|st| st.0.worker_tid()) else {
            return false;
        };
        if sim
            .wait_and_reset(n, s, Timeout::Seconds(1.try_into().unwrap()))
            .is_err()
        {
            return false;
        }
        // The pause: from 1.45 s (in the grace, 1.2 to 2.2 s) for 3 s (past the grace's end
        // and the stall's, 1.8 s). The pauser only sleeps and signals (async-signal-safe).
        // SAFETY: see above; it ends with `_exit`.
        let pauser = unsafe { libc::fork() };
        if pauser == 0 {
            // SAFETY: signals its parent (this test's child), then ends.
            unsafe {
                nap_ms(1450);
                libc::kill(libc::getppid(), libc::SIGSTOP);
                nap_ms(3000);
                libc::kill(libc::getppid(), libc::SIGCONT);
                libc::_exit(0);
            }
        }
        let staller = std::thread::spawn(move || {
            nap_ms(300);
            // SAFETY: signals this process's stream worker thread `tid`.
            unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2) };
        });
        let r = sim.synchronize(s, SyncWait::AtMost(Duration::from_millis(1200)));
        let mut status = 0;
        // SAFETY: reaps the pauser (if there was one).
        let reaped = pauser > 0 && unsafe { libc::waitpid(pauser, &mut status, 0) } == pauser;
        staller.join().is_ok() && reaped && r.is_err_and(|e| e.kind() == Error::TaskTimeout)
    });
    assert_eq!(
        answered,
        Ok(()),
        "the paused synchronize did not answer the wait's 107020 (507046: it judged by the \
         wall time of the pause)"
    );
}

/// Sleeps the calling thread `ms` milliseconds (`nanosleep`: async-signal-safe).
fn nap_ms(ms: i64) {
    let t = libc::timespec {
        tv_sec: (ms / 1000) as libc::time_t,
        tv_nsec: ((ms % 1000) * 1_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec.
    unsafe { libc::nanosleep(&t, std::ptr::null_mut()) };
}

/// Installs [`stall`] as the `SIGUSR2` handler.
fn install_stall() {
    // SAFETY: installs a handler that only sleeps; SIGUSR2 is the stall tests' alone.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = stall as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
}

/// A host call the stream drops unrun runs its discard function, once, and a call that ran
/// does not (what frees an `aclrtLaunchCallback` task's state): abort, a forced destroy and a
/// task never queued.
#[test]
fn host_calls_dropped_unrun_run_their_discard_function() {
    use acl_notify_core::StreamControl;
    static RAN: AtomicU32 = AtomicU32::new(0);
    static DISCARDED: AtomicU32 = AtomicU32::new(0);
    unsafe extern "C" fn ran(_: *mut std::ffi::c_void) {
        RAN.fetch_add(1, SeqCst);
    }
    unsafe fn discarded(_: *mut std::ffi::c_void) {
        DISCARDED.fetch_add(1, SeqCst);
    }
    // SAFETY: both ignore their argument and do not unwind.
    let call = || unsafe { HostCall::with_discard(ran, std::ptr::null_mut(), discarded) };
    let counts = || (RAN.load(SeqCst), DISCARDED.load(SeqCst));
    let (sim, _ns) = open("hostdiscard", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    let forever = SyncWait::AtMost(Duration::from_secs(20));

    sim.launch_host_func(s, call()).unwrap();
    sim.synchronize(s, forever).unwrap();
    assert_eq!(counts(), (1, 0), "a call that ran is not discarded");

    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    sim.launch_host_func(s, call()).unwrap();
    sim.launch_host_func(s, call()).unwrap();
    sim.abort(s).unwrap();
    until("the aborted calls' discards", || counts() == (1, 2));

    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    sim.launch_host_func(s, call()).unwrap();
    sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
    until("the destroyed stream's call's discard", || {
        counts() == (1, 3)
    });

    assert!(sim.launch_host_func(s, call()).is_err());
    assert_eq!(counts(), (1, 4), "a call not queued is discarded at once");
}

/// A wait left queued on a notify its owner destroyed says so: the stream's report (what a
/// bounded synchronize names) and the wait's timeout name the destroy and who made it, instead
/// of listing the owner as a live holder as if the notify were merely unrecorded.
#[test]
fn a_wait_on_a_destroyed_notify_says_it_was_destroyed() {
    let (sim, _ns) = open("destroyed-wait", Soc::Ascend910B);
    let s = sim.create_stream(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.wait_and_reset(n, s, Timeout::from_c(1)).unwrap();
    sim.destroy_notify(n).unwrap();
    let me = std::process::id();
    let said = format!("destroyed by its owner pid {me}");
    let t0 = Instant::now();
    let report = loop {
        let r = sim.stream_report(s).unwrap_or_default();
        if r.contains("wait") || t0.elapsed() > Duration::from_secs(10) {
            break r;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let e = sim
        .synchronize(s, SyncWait::AtMost(Duration::from_secs(30)))
        .unwrap_err();
    sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
    assert!(report.contains(&said), "the stream's report: {report}");
    assert!(e.to_string().contains(&said), "the wait's timeout: {e}");
}

/// The count of a synchronize's looks past an overdue wait
/// (`a_synchronize_at_its_limit_reports_a_head_wait_whose_timeout_came_first` bounds it) is the
/// calling thread's: a synchronize that times out on another thread — another test, as
/// `cargo test` runs them side by side in one process — does not add to it.
#[test]
fn overdue_looks_are_counted_per_thread() {
    let (sim, _ns) = open("overdue-looks", Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s = sim.create_stream(0).unwrap();
    sim.wait_and_reset(n, s, Timeout::Seconds(60.try_into().unwrap()))
        .unwrap();
    let before = crate::enqueue::overdue_looks();
    let there = std::thread::scope(|t| {
        t.spawn(|| {
            let before = crate::enqueue::overdue_looks();
            let r = sim.synchronize(s, SyncWait::AtMost(Duration::from_millis(200)));
            (
                r.map_err(|e| e.kind()),
                crate::enqueue::overdue_looks() - before,
            )
        })
        .join()
        .unwrap()
    });
    assert_eq!(
        there.0,
        Err(Error::StreamSyncTimeout),
        "that synchronize timed out"
    );
    assert!(there.1 > 0, "that synchronize looked for an overdue wait");
    assert_eq!(
        crate::enqueue::overdue_looks(),
        before,
        "another thread's looks counted here"
    );
    sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
}

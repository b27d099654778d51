//! Stream pins without a count per task (`crate::pin`): a destroyed notify stays alive for
//! the tasks queued before its destroy (they run and succeed), its slot goes once they have
//! retired — on an idle stream at once, on a destroyed stream too — and never before: the
//! stress tests race destroys, replaced pins and slot reuse against queued records and waits
//! and check every task's result, that no record lands on a notify made in a destroyed one's
//! slot, and that no slot is left behind.

use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use acl_notify_core::{
    BackendError, CreateFlags, Error, HostOps, NotifyResources, RawNotify, RawStream, Soc,
    StreamDestroy, StreamOps, SyncWait, Timeout,
};

use crate::NamespaceGuard as Ns;
use crate::entries::PINS;
use crate::sim::Sim;

fn open(tag: &str) -> (Sim, Ns) {
    Ns::open_sim(
        format!("unit-pin-{tag}-{}", std::process::id()),
        Soc::Ascend910B,
        1,
    )
    .expect("opening a test Sim")
}

const SYNC: SyncWait = SyncWait::AtMost(Duration::from_secs(20));

/// Holds `s` on a wait for a fresh notify; returns the notify, which releases it when
/// recorded.
fn hold(sim: &Sim, s: RawStream) -> RawNotify {
    let gate = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.wait_and_reset(gate, s, Timeout::Forever).unwrap();
    gate
}

/// Opens a gate made by [`hold`] from the host (a record on a stream of its own).
fn open_gate(sim: &Sim, gate: RawNotify) {
    let t = sim.create_stream(0).unwrap();
    sim.record(gate, t).unwrap();
    sim.synchronize(t, SYNC).unwrap();
    sim.destroy_stream(t, StreamDestroy::Drain).unwrap();
}

/// A notify destroyed with a record and a wait still queued behind a held wait: its slot
/// stays taken until they have run, they run and succeed, and then it is free.
#[test]
fn a_destroyed_notify_stays_until_its_queued_tasks_ran() {
    let (sim, _ns) = open("stay");
    let all = sim.notifies_free(0).unwrap();
    let s = sim.create_stream(0).unwrap();
    let gate = hold(&sim, s);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.record(n, s).unwrap();
    sim.wait_and_reset(n, s, Timeout::from_c(10)).unwrap();
    sim.destroy_notify(n).unwrap();
    // The handle is gone for new calls, the slot is not.
    assert_eq!(sim.record(n, s).unwrap_err().kind(), Error::InvalidHandle);
    assert_eq!(sim.notifies_free(0).unwrap(), all - 2);
    // Slots made now are not `n`'s.
    let others: Vec<_> = (0..8)
        .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
        .collect();
    open_gate(&sim, gate);
    sim.synchronize(s, SYNC).unwrap();
    for o in others {
        assert!(
            !sim.try_consume(o).unwrap(),
            "a record landed on another notify"
        );
        sim.destroy_notify(o).unwrap();
    }
    sim.destroy_notify(gate).unwrap();
    // The slot went when the worker retired the tasks (`synchronize` returns only after
    // that retire, which releases what the stream's keeper held for them).
    assert_eq!(sim.notifies_free(0).unwrap(), all);
    sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
}

/// A destroyed notify's slot also goes when the stream that still had its tasks queued is
/// destroyed (discarded, its tasks unrun), and with an idle stream at once.
#[test]
fn a_destroyed_notify_goes_with_an_idle_or_destroyed_stream() {
    let (sim, _ns) = open("goes");
    let all = sim.notifies_free(0).unwrap();
    let s = sim.create_stream(0).unwrap();
    // Idle: at once.
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.record(n, s).unwrap();
    sim.synchronize(s, SYNC).unwrap();
    sim.destroy_notify(n).unwrap();
    assert_eq!(sim.notifies_free(0).unwrap(), all);
    // Blocked for ever behind a wait nobody records: with the stream's discard.
    let gate = hold(&sim, s);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    sim.record(n, s).unwrap();
    sim.destroy_notify(n).unwrap();
    assert_eq!(sim.notifies_free(0).unwrap(), all - 2);
    sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
    sim.destroy_notify(gate).unwrap();
    assert_eq!(sim.notifies_free(0).unwrap(), all);
}

/// A notify used by more streams than its handle keeps pins for: the pins replaced while
/// their streams still have its tasks queued stay until those ran; every task succeeds.
#[test]
fn replaced_pins_stay_for_their_queued_tasks() {
    let (sim, _ns) = open("replaced");
    let all = sim.notifies_free(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let streams: Vec<_> = (0..PINS + 3)
        .map(|_| sim.create_stream(0).unwrap())
        .collect();
    let gates: Vec<_> = streams.iter().map(|&s| hold(&sim, s)).collect();
    for round in 0..3 {
        for &s in &streams {
            sim.record(n, s).unwrap();
            sim.wait_and_reset(n, s, Timeout::from_c(10)).unwrap();
        }
        if round == 1 {
            sim.destroy_notify(n).unwrap();
            break;
        }
    }
    assert_eq!(
        sim.notifies_free(0).unwrap(),
        all - 1 - streams.len() as u32
    );
    for (&s, &g) in streams.iter().zip(&gates) {
        open_gate(&sim, g);
        sim.synchronize(s, SYNC).unwrap();
        sim.destroy_notify(g).unwrap();
    }
    assert_eq!(sim.notifies_free(0).unwrap(), all);
    for s in streams {
        sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
    }
}

/// Stress: threads queue records and waits of their own notifies on shared running streams
/// and destroy each notify right away, while other threads make new notifies (which take
/// freed slots) and check that no record ever lands on them, and a destroyer thread races
/// the records of a shared notify. Every queued task must succeed (a task on a freed pin
/// or a reused slot fails, hangs into its timeout, or sets another notify), and every slot
/// must be free at the end.
#[test]
fn destroys_racing_queued_tasks_free_no_slot_early_and_leak_none() {
    let (sim, _ns) = open("stress");
    let all = sim.notifies_free(0).unwrap();
    let streams: Vec<_> = (0..3).map(|_| sim.create_stream(0).unwrap()).collect();
    let deadline = Instant::now() + Duration::from_millis(1500);
    let stop = AtomicBool::new(false);
    let queued = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    let start = Barrier::new(5);
    std::thread::scope(|sc| {
        // Queue-and-destroy threads: each notify is used on one or more streams (more than
        // the pins a handle keeps, now and then), then destroyed with its tasks queued.
        for t in 0..2u64 {
            let (sim, streams, queued, start) = (&sim, &streams, &queued, &start);
            sc.spawn(move || {
                start.wait();
                let mut i = t;
                while Instant::now() < deadline {
                    i += 1;
                    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
                    let uses = if i % 7 == 0 {
                        PINS + 1
                    } else {
                        1 + (i as usize % 3)
                    };
                    // Waits on the first stream only, each behind a record of its own
                    // (the other streams' records merge into the flag, never take it).
                    for k in 0..uses {
                        let s = streams[(i as usize + k) % streams.len()];
                        for _ in 0..1 + i % 4 {
                            sim.record(n, s).unwrap();
                            if k == 0 {
                                sim.wait_and_reset(n, s, Timeout::from_c(10)).unwrap();
                            }
                            queued.fetch_add(1 + u64::from(k == 0), Ordering::Relaxed);
                        }
                    }
                    sim.destroy_notify(n).unwrap();
                }
            });
        }
        // Slot-reuse checker: new notifies (in slots just freed, or not) must never be set
        // by anyone.
        {
            let (sim, stop, start) = (&sim, &stop, &start);
            sc.spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let fresh: Vec<_> = (0..16)
                        .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
                        .collect();
                    std::thread::yield_now();
                    for m in fresh {
                        assert!(
                            !sim.try_consume(m).unwrap(),
                            "a record landed on a notify nobody recorded"
                        );
                        sim.destroy_notify(m).unwrap();
                    }
                }
            });
        }
        // A shared notify recorded in a loop (pair cache hits) while another thread destroys
        // it: records succeed until the destroy, then fail with 107017; the queued ones run.
        {
            let (sim, streams, stop, refused, start) = (&sim, &streams, &stop, &refused, &start);
            let (tx, rx) = std::sync::mpsc::channel::<RawNotify>();
            let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
            sc.spawn(move || {
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
                    tx.send(n).unwrap();
                    let s = streams[0];
                    loop {
                        match sim.record(n, s) {
                            Ok(()) => {}
                            Err(e) => {
                                assert_eq!(e.kind(), Error::InvalidHandle, "{e}");
                                refused.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                    done_rx.recv().unwrap();
                }
                drop(tx);
            });
            sc.spawn(move || {
                start.wait();
                let mut spin = 0u32;
                while let Ok(n) = rx.recv() {
                    spin = spin.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    for _ in 0..(spin >> 20) % 2_000 {
                        std::hint::spin_loop();
                    }
                    sim.destroy_notify(n).unwrap();
                    let _ = done_tx.send(());
                }
            });
        }
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        stop.store(true, Ordering::Relaxed);
    });
    for &s in &streams {
        sim.synchronize(s, SYNC).unwrap();
    }
    assert!(
        queued.load(Ordering::Relaxed) > 100,
        "too few tasks to mean anything"
    );
    assert!(refused.load(Ordering::Relaxed) > 0);
    // Every destroyed notify's slot is back: the streams are idle.
    assert_eq!(sim.notifies_free(0).unwrap(), all);
    for s in streams {
        sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
    }
    assert_eq!(sim.notifies_free(0).unwrap(), all);
}

/// A notify's pins are found by stream handle, and a handle's value comes back once its
/// slot's generation has wrapped (2²⁰ destroys of one slot): the new stream must not take
/// the pin of the destroyed stream that had the handle, whose keeper is gone — the notify's
/// destroy would free that pin at once while the new stream still has a record queued on
/// it, which then read freed memory (a SIGSEGV before the fix). The stream table's slot is
/// cycled here directly (no worker per turn).
#[test]
fn a_stream_handle_that_comes_back_does_not_find_a_dead_streams_pin() {
    let (sim, _ns) = open("reuse");
    let all = sim.notifies_free(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let a = sim.create_stream(0).unwrap();
    sim.record(n, a).unwrap();
    sim.synchronize(a, SYNC).unwrap();
    sim.destroy_stream(a, StreamDestroy::Drain).unwrap();
    // A new stream, its entry moved through the table's slot until its handle is `a`'s.
    let b = sim.create_stream(0).unwrap();
    let mut h = b;
    {
        let mut t = crate::locks::write(&sim.inner.streams);
        for _ in 0..(1u32 << 20) + 2 {
            let e = t.remove(h.0).expect("live");
            h = RawStream(t.insert(e).ok().expect("room"));
            if h == a {
                break;
            }
        }
        sim.streams_removed();
    }
    assert_eq!(h, a, "the slot's generation did not wrap");
    // The record on `n` queued behind a held wait uses the new stream's own pin, which
    // `n`'s destroy keeps until the record ran.
    let gate = hold(&sim, h);
    sim.record(n, h).unwrap();
    sim.destroy_notify(n).unwrap();
    assert_eq!(
        sim.notifies_free(0).unwrap(),
        all - 2,
        "the destroyed notify's slot went with a record still queued on its pin"
    );
    open_gate(&sim, gate);
    sim.synchronize(h, SYNC).unwrap();
    sim.destroy_notify(gate).unwrap();
    sim.destroy_stream(h, StreamDestroy::Drain).unwrap();
    assert_eq!(sim.notifies_free(0).unwrap(), all);
}

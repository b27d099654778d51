//! Tests of where a notify's head waiter sleeps: privately while only its owner's process can
//! reach the notify, on the shared futex from its export on ([`NotifySync::share`]), and
//! that a waiter asleep privately at the export is moved, so an importer's record reaches it.

use super::tests::TestWaiter;
use super::*;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use core::time::Duration;
use std::sync::atomic::AtomicU32 as Count;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Instant;

/// One process's view of the futexes: the shared ones through a [`TestWaiter`] common to every
/// "process" of a test, the private ones through a condition variable of its own — so that,
/// as on Linux, a private wake of one process never reaches another's private sleeper. A
/// private sleep has no 50 ms chunk here (a lost wake-up shows as a 20 s stall, not as
/// latency).
struct ProcWaiter {
    shared: Arc<TestWaiter>,
    private: Mutex<()>,
    private_cv: Condvar,
    private_sleeps: Count,
    shared_sleeps: Count,
    private_wakes: Count,
    shared_wakes: Count,
}

impl ProcWaiter {
    fn new(shared: &Arc<TestWaiter>) -> Arc<Self> {
        Arc::new(ProcWaiter {
            shared: Arc::clone(shared),
            private: Mutex::new(()),
            private_cv: Condvar::new(),
            private_sleeps: Count::new(0),
            shared_sleeps: Count::new(0),
            private_wakes: Count::new(0),
            shared_wakes: Count::new(0),
        })
    }
}

impl Waiter for ProcWaiter {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.shared_sleeps.fetch_add(1, SeqCst);
        self.shared.wait(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.shared_wakes.fetch_add(1, SeqCst);
        self.shared.wake(word, n);
    }
    fn wait_private(&self, word: &AtomicU32, expected: u32, _timeout: Option<Duration>) {
        let g = self.private.lock().unwrap();
        if word.load(SeqCst) != expected {
            return;
        }
        self.private_sleeps.fetch_add(1, SeqCst);
        let _ = self
            .private_cv
            .wait_timeout(g, Duration::from_secs(20))
            .unwrap();
    }
    fn wake_private(&self, _word: &AtomicU32, _n: u32) {
        self.private_wakes.fetch_add(1, SeqCst);
        let _g = self.private.lock().unwrap();
        self.private_cv.notify_all();
    }
    fn now_ns(&self) -> u64 {
        self.shared.now_ns()
    }
    fn spin_limit(&self) -> Duration {
        Duration::ZERO
    }
}

fn owner() -> Owner {
    Owner {
        pid: 10,
        start_time: 1,
        server: 0,
        device: 0,
        proc: 0,
    }
}

fn never() -> bool {
    false
}

/// Starts a wait of process 0 through `w` on `slot` in a thread, and returns once it sleeps
/// (counted by `asleep`).
fn sleeping_wait(
    slot: &Arc<NotifySlot>,
    w: &Arc<ProcWaiter>,
    asleep: impl Fn(&ProcWaiter) -> bool,
) -> thread::JoinHandle<Result<WaitOutcome, TableError>> {
    let (s, w2) = (Arc::clone(slot), Arc::clone(w));
    let h = thread::spawn(move || {
        let args = WaitArgs {
            proc: 0,
            timeout: None,
            cancel: &never,
        };
        s.sync.wait_and_reset(&*w2, args)
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while !asleep(w) {
        assert!(Instant::now() < deadline, "the wait never slept");
        thread::sleep(Duration::from_millis(1));
    }
    h
}

#[test]
fn a_notify_never_exported_is_waited_on_and_woken_privately() {
    let shared = TestWaiter::new();
    let a = ProcWaiter::new(&shared);
    let slot = Arc::new(NotifySlot::new());
    slot.claim(owner(), CreateFlags::empty()).unwrap();
    assert!(!slot.sync.is_shared());
    let h = sleeping_wait(&slot, &a, |w| w.private_sleeps.load(SeqCst) > 0);
    slot.record(&*a, 10);
    assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!(a.shared_sleeps.load(SeqCst), 0, "slept on the shared futex");
    assert_eq!(a.private_wakes.load(SeqCst), 1);
    assert_eq!(a.shared_wakes.load(SeqCst), 0);
}

#[test]
fn an_export_moves_a_private_sleeper_so_an_importers_record_wakes_it() {
    let shared = TestWaiter::new();
    let (a, b) = (ProcWaiter::new(&shared), ProcWaiter::new(&shared));
    let slot = Arc::new(NotifySlot::new());
    slot.claim(owner(), CreateFlags::empty()).unwrap();
    let h = sleeping_wait(&slot, &a, |w| w.private_sleeps.load(SeqCst) > 0);
    // The owner's process exports; then process 1 imports and records through its own futexes.
    assert_eq!(
        slot.export_notify(&*a, [5; 16], ExportState::Open, || Ok::<(), ()>(())),
        Ok(true)
    );
    assert!(slot.sync.is_shared());
    assert_eq!(slot.join(1, slot.generation()), Ok(true));
    // A hang guard only (the waiter moves to the shared futex at its next 50 ms chunk; 5 s
    // until 2026-12-07).
    let deadline = Instant::now() + Duration::from_secs(60);
    while a.shared_sleeps.load(SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "hang guard: the waiter stayed asleep privately"
        );
        thread::sleep(Duration::from_millis(1));
    }
    slot.record(&*b, 11);
    assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
    // Woken by the record through the shared futex: the wake counts say so. (The shared
    // sleeps are 50 ms chunks, so a missed wake-up would show only as latency: the wait
    // for the shared sleep above. A bound of 10 s on that latency stood here until
    // 2026-12-07; it could fail only by load.)
    assert_eq!(b.shared_wakes.load(SeqCst), 1);
    assert_eq!(b.private_wakes.load(SeqCst), 0);
    // A new incarnation starts private again.
    let g = slot.generation();
    assert_eq!(slot.leave(0), Leave::StillHeld);
    assert_eq!(slot.leave(1), Leave::Last);
    assert_ne!(slot.generation(), g);
    slot.claim(owner(), CreateFlags::empty()).unwrap();
    assert!(!slot.sync.is_shared());
}

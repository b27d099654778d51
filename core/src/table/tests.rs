//! Tests of the notify table: the flag, the waiter queue and its repairs, and a notify's use
//! of the shared slot lifecycle (claim, export, join, leave, repair).

use super::queue::{ST_CANCELLED, ST_FREE, ST_SOLO};
use super::*;
use crate::slot::word;
use crate::sync::{AtomicU32, Ordering::SeqCst};
use core::time::Duration;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Instant;
use std::vec::Vec;

/// A futex emulation for tests (this module's and the count notifies'): one
/// mutex+condvar; `wait` re-checks the word under the lock, `wake` notifies under the
/// lock, so no wake-up is lost.
pub(crate) struct TestWaiter {
    lock: Mutex<()>,
    cv: Condvar,
    epoch: Instant,
    dead: Mutex<u64>,
    /// How many times `wait` went to sleep: a test counts a waiter's chunks by it, which a
    /// loaded or paused machine does not change (it changes how long each takes).
    sleeps: std::sync::atomic::AtomicU32,
}

impl TestWaiter {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(TestWaiter {
            lock: Mutex::new(()),
            cv: Condvar::new(),
            epoch: Instant::now(),
            dead: Mutex::new(0),
            sleeps: std::sync::atomic::AtomicU32::new(0),
        })
    }
}

impl Waiter for TestWaiter {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let g = self.lock.lock().unwrap();
        if word.load(SeqCst) != expected {
            return;
        }
        let t = timeout.unwrap_or(CHUNK).min(CHUNK);
        self.sleeps.fetch_add(1, SeqCst);
        let _ = self.cv.wait_timeout(g, t).unwrap();
    }
    fn wake(&self, _word: &AtomicU32, _n: u32) {
        let _g = self.lock.lock().unwrap();
        self.cv.notify_all();
    }
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    fn proc_alive(&self, proc: u32) -> bool {
        *self.dead.lock().unwrap() & (1 << proc) == 0
    }
}

fn never() -> bool {
    false
}

fn args(proc: u32, timeout: Option<Duration>) -> WaitArgs<'static> {
    WaitArgs {
        proc,
        timeout,
        cancel: &never,
    }
}

/// A [`TestWaiter`] that asks for its own spin limit and notes when it first sleeps.
struct LimitWaiter {
    inner: Arc<TestWaiter>,
    limit: Duration,
    first_sleep: Mutex<Option<u64>>,
}

impl Waiter for LimitWaiter {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        let now = self.inner.now_ns();
        self.first_sleep.lock().unwrap().get_or_insert(now);
        self.inner.wait(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.inner.wake(word, n);
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn spin_limit(&self) -> Duration {
        self.limit
    }
}

#[test]
fn the_platform_sets_the_spin_but_never_past_max_spin() {
    for (limit, at_least) in [
        (Duration::from_micros(30), Duration::from_micros(30)),
        (Duration::from_secs(30), MAX_SPIN),
    ] {
        let w = LimitWaiter {
            inner: TestWaiter::new(),
            limit,
            first_sleep: Mutex::new(None),
        };
        let s = NotifySync::new();
        let t0 = w.now_ns();
        let out = s.wait_and_reset(&w, args(0, Some(Duration::from_millis(20))));
        assert_eq!(out, Ok(WaitOutcome::TimedOut));
        // A 30 s spin would have run past the 20 ms timeout by far.
        let took = Duration::from_nanos(w.now_ns() - t0);
        assert!(took < Duration::from_secs(15), "{limit:?}: took {took:?}");
        // It spun at least as long as asked (capped) before its first sleep.
        let slept = w.first_sleep.lock().unwrap().expect("never slept");
        assert!(
            Duration::from_nanos(slept - t0) >= at_least,
            "{limit:?}: slept after {:?}",
            Duration::from_nanos(slept - t0)
        );
    }
}

fn poll_until(what: &str, f: impl Fn() -> bool) {
    // Generous: the condition must come, however loaded the machine.
    let end = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn layout() {
    // The flag, queue and incarnation (80 bytes), then the record diagnostics and `shared`.
    assert_eq!(core::mem::size_of::<NotifySync>(), 120);
    assert_eq!(core::mem::size_of::<NotifySlot>(), 192);
    assert_eq!(core::mem::align_of::<NotifySlot>(), 64);
}

#[test]
fn record_first_then_wait_and_collapse() {
    let w = TestWaiter::new();
    let s = NotifySync::new();
    s.record(&*w);
    s.record(&*w);
    assert!(s.is_set());
    let short = Some(Duration::from_millis(20));
    assert_eq!(
        s.wait_and_reset(&*w, args(0, short)),
        Ok(WaitOutcome::Consumed)
    );
    assert!(!s.is_set());
    // The two records collapsed: a second wait times out.
    assert_eq!(
        s.wait_and_reset(&*w, args(0, short)),
        Ok(WaitOutcome::TimedOut)
    );
    assert_eq!(s.waiters(), 0);
}

#[test]
fn wait_first_then_record() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let (s2, w2) = (s.clone(), w.clone());
    let h = thread::spawn(move || s2.wait_and_reset(&*w2, args(1, Some(Duration::from_secs(10)))));
    poll_until("the waiter to queue", || s.waiters() == 1);
    thread::sleep(Duration::from_millis(5));
    s.record(&*w);
    assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert!(!s.is_set());
}

#[test]
fn reset_and_try_consume() {
    let w = TestWaiter::new();
    let s = NotifySync::new();
    assert!(!s.try_consume());
    s.record(&*w);
    s.reset();
    assert!(!s.is_set());
    assert!(!s.try_consume());
    s.record(&*w);
    assert!(s.try_consume());
    assert!(!s.try_consume());
}

#[test]
fn fifo_one_record_per_waiter() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut hs = Vec::new();
    for i in 0..4u32 {
        let (s2, w2, o2) = (s.clone(), w.clone(), order.clone());
        hs.push(thread::spawn(move || {
            let r = s2.wait_and_reset(&*w2, args(i, Some(Duration::from_secs(10))));
            o2.lock().unwrap().push(i);
            r
        }));
        // Queue them in a known order.
        poll_until("waiter to queue", || s.waiters() == i + 1);
    }
    for n in 1..=4usize {
        s.record(&*w);
        poll_until("one waiter released", || order.lock().unwrap().len() == n);
        thread::sleep(Duration::from_millis(10));
        // Exactly one per record.
        assert_eq!(order.lock().unwrap().len(), n);
    }
    for h in hs {
        assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
    }
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
    assert!(!s.is_set());
}

#[test]
fn timed_out_waiter_does_not_block_the_queue_or_lose_records() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    // Waiter 0 at the head with a long timeout, waiter 1 behind with a short one, then
    // waiter 2 with a long one.
    let spawn = |proc: u32, ms: u64| {
        let (s2, w2) = (s.clone(), w.clone());
        thread::spawn(move || s2.wait_and_reset(&*w2, args(proc, Some(Duration::from_millis(ms)))))
    };
    let a = spawn(0, 10_000);
    poll_until("a queued", || s.waiters() == 1);
    let b = spawn(1, 50);
    poll_until("b queued", || s.waiters() == 2);
    let c = spawn(2, 10_000);
    poll_until("c queued", || s.waiters() == 3);
    assert_eq!(b.join().unwrap(), Ok(WaitOutcome::TimedOut));
    s.record(&*w);
    assert_eq!(a.join().unwrap(), Ok(WaitOutcome::Consumed));
    // b's cancelled ticket is skipped: c gets the next record.
    s.record(&*w);
    assert_eq!(c.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!(s.waiters(), 0);
    assert!(!s.is_set());
    // A record after everyone left stays for the next waiter.
    s.record(&*w);
    assert_eq!(
        s.wait_and_reset(&*w, args(3, Some(Duration::ZERO))),
        Ok(WaitOutcome::Consumed)
    );
}

#[test]
fn head_timeout_leaves_record_for_next() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let (s2, w2) = (s.clone(), w.clone());
    let a =
        thread::spawn(move || s2.wait_and_reset(&*w2, args(0, Some(Duration::from_millis(30)))));
    assert_eq!(a.join().unwrap(), Ok(WaitOutcome::TimedOut));
    s.record(&*w);
    assert!(s.is_set());
    assert_eq!(
        s.wait_and_reset(&*w, args(1, Some(Duration::from_millis(30)))),
        Ok(WaitOutcome::Consumed)
    );
}

/// A wait with no timeout by process `proc` on another thread, cancelled when the returned
/// flag is set (and the sleepers woken).
fn cancellable_wait(
    s: &Arc<NotifySync>,
    w: &Arc<TestWaiter>,
    proc: u32,
) -> (
    thread::JoinHandle<Result<WaitOutcome, TableError>>,
    Arc<AtomicBool>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, w2, st2) = (s.clone(), w.clone(), stop.clone());
    let h = thread::spawn(move || {
        let c = move || st2.load(SeqCst);
        s2.wait_and_reset(
            &*w2,
            WaitArgs {
                proc,
                timeout: None,
                cancel: &c,
            },
        )
    });
    (h, stop)
}

#[test]
fn cancel_and_dead_head() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let (a, stop) = cancellable_wait(&s, &w, 0);
    poll_until("a queued", || s.waiters() == 1);
    stop.store(true, SeqCst);
    s.wake_all(&*w);
    assert_eq!(a.join().unwrap(), Ok(WaitOutcome::Cancelled));
    assert_eq!(s.waiters(), 0);

    // A ticket of a process that "died" at the head: the next waiter cancels it itself.
    assert!(matches!(
        s.acquire(&*w, &Clock::start(&*w, None), &args(5, None)),
        Ok(Ok(_))
    ));
    *w.dead.lock().unwrap() |= 1 << 5;
    let (s2, w2) = (s.clone(), w.clone());
    let b = thread::spawn(move || s2.wait_and_reset(&*w2, args(6, Some(Duration::from_secs(10)))));
    poll_until("b queued", || s.waiters() == 2);
    s.record(&*w);
    assert_eq!(b.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!(s.waiters(), 0);
}

/// Puts ticket 0 of a fresh notify into `ring0` with `tail` tickets handed out (head 0),
/// as a process that died between two steps (or a corrupting write) leaves it; records;
/// then waits with no timeout on another thread, giving up after `patience`.
/// How long [`wait_past_head`] lets its waiter try before it cancels it: only a broken wait
/// uses it up (a repair takes a chunk, a corrupt verdict [`STUCK_LIMIT`] chunks), so it is
/// generous, for a loaded machine, or a process paused meanwhile, takes longer.
const PATIENCE: Duration = Duration::from_secs(300);

/// A waiter queued behind a head entry `ring0` with `tail` at `tail`: what its wait returns
/// and how many times it slept (its chunks).
fn wait_past_head(ring0: u32, tail: u32) -> (Result<WaitOutcome, TableError>, u32) {
    let patience = PATIENCE;
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    s.ring[0].store(ring0, SeqCst);
    s.tail.store(tail, SeqCst);
    s.record(&*w);
    let (waiter, stop) = cancellable_wait(&s, &w, 1);
    let t0 = std::time::Instant::now();
    while !waiter.is_finished() && t0.elapsed() < patience {
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, SeqCst);
    s.wake_all(&*w);
    let r = waiter.join().unwrap();
    if r == Ok(WaitOutcome::Consumed) {
        assert!(!s.is_set(), "the record was consumed");
        assert_eq!(s.waiters(), 0, "head caught up with tail");
    }
    (r, w.sleeps.load(SeqCst))
}

#[test]
fn a_head_left_half_handed_on_is_repaired() {
    for (ring0, tail, what) in [
        (
            entry(1, ST_FREE, 0),
            1,
            "the head waiter freed its entry for the next round, then died before moving \
             the head",
        ),
        (
            entry(0, ST_CANCELLED, 0),
            1,
            "a canceller marked the head ticket, then died before skipping it",
        ),
        (
            entry(0, ST_FREE, 0),
            1,
            "a phantom ticket: `tail` moved past an entry nobody took (a corrupting write)",
        ),
        (entry(0, ST_FREE, 0), 3, "three phantoms in a row"),
    ] {
        assert_eq!(
            wait_past_head(ring0, tail).0,
            Ok(WaitOutcome::Consumed),
            "{what}"
        );
    }
}

/// Ticket 0 served (its entry freed for the next round) but neither `tail` nor `head`
/// moved past it: the processes between those steps died. The next waiter helps both on
/// instead of taking the queue for corrupt.
#[test]
fn a_served_ticket_left_behind_tail_is_helped_past() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    s.ring[0].store(entry(1, ST_FREE, 0), SeqCst);
    let (waiter, stop) = cancellable_wait(&s, &w, 1);
    poll_until("the waiter queued", || s.waiters() == 1);
    s.record(&*w);
    // Given up (the wait stopped, and the check below failing) only after `PATIENCE`, a hang
    // guard: 5 s until 2026-12-07, which a loaded machine could outlast.
    let t0 = std::time::Instant::now();
    while !waiter.is_finished() && t0.elapsed() < PATIENCE {
        thread::sleep(Duration::from_millis(5));
    }
    stop.store(true, SeqCst);
    s.wake_all(&*w);
    assert_eq!(waiter.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!(s.waiters(), 0);
}

#[test]
fn a_head_entry_that_cannot_be_repaired_is_reported_corrupt() {
    // A lone place (state 3) with `tail` past it is never made (a waiter that comes makes
    // it ordinary before it moves `tail`); an entry of another round is not this ticket's.
    for bad in [
        entry(0, ST_SOLO, 0),
        entry(7, ST_TAKEN, 1),
        entry(5, ST_CANCELLED, 0),
    ] {
        let (r, sleeps) = wait_past_head(bad, 1);
        // By itself (not cancelled at the patience's end), after STUCK_LIMIT chunks: counted
        // in sleeps, not timed, so that a loaded or paused machine changes nothing. A chunk
        // is one sleep unless a sleep is cut short (nobody wakes this waiter): room for a
        // few.
        assert_eq!(r, Err(TableError::Corrupt), "head entry {bad:#x}");
        assert!(
            (STUCK_LIMIT..=STUCK_LIMIT + 5).contains(&sleeps),
            "head entry {bad:#x}: corrupt after {sleeps} sleeps"
        );
    }
}

/// An owner in process-table slot 3.
fn owner3() -> Owner {
    Owner {
        pid: 10,
        start_time: 1,
        server: 0,
        device: 0,
        proc: 3,
    }
}

#[test]
fn an_orphan_in_a_corrupt_state_stops_being_current_when_repaired() {
    let slot = NotifySlot::new();
    let owner = owner3();
    let g = slot.claim(owner, CreateFlags::empty()).unwrap();
    slot.life.holders.store(0, SeqCst);
    slot.life.state_gen.store((u64::from(g) << 32) | 7, SeqCst);
    assert!(slot.retire_orphan());
    assert!(!slot.is_current(g));
    assert_eq!(slot.state(), Some(SlotState::Free));
}

#[test]
fn ticket_holders_lists_the_queued_waiters_processes_in_order() {
    let w = TestWaiter::new();
    let s = NotifySync::new();
    assert_eq!(s.ticket_holders().count(), 0);
    let clock = Clock::start(&*w, None);
    for proc in [4, 9, 2] {
        assert!(matches!(
            s.acquire(&*w, &clock, &args(proc, None)),
            Ok(Ok(_))
        ));
    }
    let v: std::vec::Vec<u32> = s.ticket_holders().collect();
    assert_eq!(v, [4, 9, 2]);
    // A given-up ticket is not listed.
    assert!(s.cancel_ticket(&*w, 1, entry(0, ST_TAKEN, 9)));
    let v: std::vec::Vec<u32> = s.ticket_holders().collect();
    assert_eq!(v, [4, 2]);
}

#[test]
fn an_incarnation_is_current_from_claim_until_retire() {
    let slot = NotifySlot::new();
    let owner = owner3();
    for _ in 0..3 {
        let g = slot.claim(owner, CreateFlags::empty()).unwrap();
        assert!(slot.is_current(g) && slot.is_live(g));
        assert!(!slot.is_current(g.wrapping_sub(1)));
        assert_eq!(slot.leave(3), Leave::Last);
        assert!(!slot.is_current(g) && !slot.is_live(g));
    }
}

#[test]
fn reclaim_cancels_tickets_of_a_dead_process() {
    let w = TestWaiter::new();
    let slot = Arc::new(NotifySlot::new());
    let owner = owner3();
    let g = slot.claim(owner, CreateFlags::empty()).unwrap();
    assert_eq!(slot.join(7, g), Ok(true));
    // Process 7 takes a ticket and "dies" holding it.
    let clock = Clock::start(&*w, None);
    assert!(matches!(
        slot.sync.acquire(&*w, &clock, &args(7, None)),
        Ok(Ok(0))
    ));
    assert_eq!(slot.reclaim_proc(&*w, 7), Leave::StillHeld);
    assert_eq!(slot.holders(), 1 << 3);
    assert_eq!(slot.sync.waiters(), 0);
    slot.record(&*w, 10);
    assert_eq!(
        slot.sync.wait_and_reset(&*w, args(3, Some(Duration::ZERO))),
        Ok(WaitOutcome::Consumed)
    );
    assert_eq!(slot.reclaim_proc(&*w, 7), Leave::NotHeld);
}

#[test]
fn holders_and_generations() {
    let slot = NotifySlot::new();
    let owner = Owner {
        pid: 1,
        start_time: 2,
        server: 0,
        device: 1,
        proc: 0,
    };
    assert_eq!(slot.state(), Some(SlotState::Free));
    assert_eq!(slot.join(1, 0), Err(None)); // nobody holds a free slot
    let g = slot.claim(owner, CreateFlags::DEVICE_USE_ONLY).unwrap();
    assert_eq!(
        slot.claim(owner, CreateFlags::empty()),
        Err(TableError::Corrupt)
    );
    assert_eq!(slot.create_flags(), CreateFlags::DEVICE_USE_ONLY);
    assert_eq!(slot.owner(), owner);
    assert_eq!(slot.join(1, g), Ok(true));
    assert_eq!(slot.join(1, g), Ok(false));
    assert_eq!(slot.join(2, g.wrapping_add(1)), Err(Some(Leave::StillHeld)));
    assert!(slot.export([7; 16], ExportState::Enforced));
    assert!(!slot.export([8; 16], ExportState::Open));
    assert_eq!(slot.nonce(), [7; 16]);
    assert_eq!(slot.leave(0), Leave::StillHeld);
    assert_eq!(slot.leave(0), Leave::NotHeld);
    assert_eq!(slot.leave(1), Leave::Last);
    assert_eq!(slot.state(), Some(SlotState::Free));
    assert_eq!(slot.export_state(), Some(ExportState::None));
    assert_eq!(slot.generation(), g + 1);
    assert_eq!(slot.join(1, g), Err(None));
    assert_eq!(slot.join(64, g), Err(None));
    assert_eq!(slot.leave(99), Leave::NotHeld);
}

/// Six threads export one notify at once, each with its own nonce, 2,000 times: exactly
/// one wins each round and the nonce left in the slot is the winner's (a loser used to
/// store its nonce before losing the CAS, so the winner's key never matched).
#[test]
fn concurrent_exports_have_one_winner_whose_nonce_stays() {
    let slot = Arc::new(NotifySlot::new());
    let threads = 6u8;
    let rounds = 2_000;
    let barrier = Arc::new(std::sync::Barrier::new(threads as usize));
    slot.claim(owner3(), CreateFlags::empty()).unwrap();
    let mut bad = 0;
    for _ in 0..rounds {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (slot, barrier) = (slot.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    slot.export([t + 1; 16], ExportState::Enforced)
                })
            })
            .collect();
        let won: Vec<u8> = hs
            .into_iter()
            .enumerate()
            .filter_map(|(t, h)| h.join().unwrap().then_some(t as u8 + 1))
            .collect();
        assert_eq!(won.len(), 1, "winners {won:?}");
        if slot.nonce() != [won[0]; 16] {
            bad += 1;
        }
        // Next round: a fresh incarnation.
        assert_eq!(slot.leave(3), Leave::Last);
        slot.claim(owner3(), CreateFlags::empty()).unwrap();
    }
    assert_eq!(
        bad, 0,
        "{bad} of {rounds} rounds left a loser's nonce in the slot"
    );
}

/// An export whose preparation fails leaves the notify not exported, and exportable.
#[test]
fn a_failed_export_preparation_leaves_the_notify_exportable() {
    let slot = NotifySlot::new();
    slot.claim(owner3(), CreateFlags::empty()).unwrap();
    assert_eq!(
        slot.export_with([1; 16], ExportState::Enforced, || Err(7)),
        Err(7)
    );
    assert_eq!(slot.export_state(), Some(ExportState::None));
    assert_eq!(
        slot.export_with([2; 16], ExportState::Open, || Ok::<(), ()>(())),
        Ok(true)
    );
    assert_eq!(slot.export_state(), Some(ExportState::Open));
    assert_eq!(slot.nonce(), [2; 16]);
}

/// A bit of a process that holds nothing (stray) keeps a slot live after its real last
/// holder left; clearing exactly the stray bits makes it an orphan that can be retired,
/// and leaves every other holder's bit alone.
#[test]
fn clearing_stray_holder_bits_lets_the_slot_be_retired() {
    let slot = NotifySlot::new();
    let owner = Owner {
        pid: 1,
        start_time: 1,
        server: 0,
        device: 0,
        proc: 3,
    };
    let g = slot.claim(owner, CreateFlags::empty()).unwrap();
    assert_eq!(slot.join(40, g), Ok(true));
    assert_eq!(slot.join(63, g), Ok(true));
    // The owner destroys it: not the last holder as far as the bitmap knows.
    assert_eq!(slot.leave(3), Leave::StillHeld);
    assert!(!slot.retire_orphan());
    // Clearing bits nobody has, or some of the strays, keeps the rest.
    assert_eq!(slot.clear_stray_holders(1 << 5), (1 << 40) | (1 << 63));
    assert_eq!(slot.clear_stray_holders(1 << 63), 1 << 40);
    assert!(!slot.retire_orphan());
    assert!(slot.is_live(g));
    // A process that joins meanwhile keeps its bit (and the slot stays live).
    assert_eq!(slot.join(7, g), Ok(true));
    assert_eq!(slot.clear_stray_holders(1 << 40), 1 << 7);
    assert!(!slot.retire_orphan());
    assert_eq!(slot.leave(7), Leave::Last);
    assert_eq!(slot.generation(), g + 1);
    // Again, with only strays left: retired once they are cleared.
    let g = slot.claim(owner, CreateFlags::empty()).unwrap();
    assert_eq!(slot.join(40, g), Ok(true));
    assert_eq!(slot.leave(3), Leave::StillHeld);
    assert_eq!(slot.clear_stray_holders(!(1 << 3)), 0);
    assert!(slot.retire_orphan());
    assert_eq!(slot.state(), Some(SlotState::Free));
    assert_eq!(slot.generation(), g + 1);
    assert_eq!(slot.join(40, g), Err(None));
}

#[test]
fn a_late_leaver_never_retires_a_reused_slot() {
    let slot = NotifySlot::new();
    let owner = |proc| Owner {
        pid: 1,
        start_time: 1,
        server: 0,
        device: 0,
        proc,
    };
    let g = slot.claim(owner(0), CreateFlags::empty()).unwrap();
    // Process 0 drops its bit but "stalls" before retiring: simulate by clearing the bit
    // by hand. A repair pass retires the orphan and the id is reused by process 1.
    slot.life.holders.fetch_and(!1, SeqCst);
    assert!(slot.retire_orphan());
    assert_eq!(slot.generation(), g + 1);
    let g2 = slot.claim(owner(1), CreateFlags::empty()).unwrap();
    assert_eq!(g2, g + 1);
    // The stalled retire (from the old incarnation's word) must fail now.
    assert!(!slot.retire_from(word(g, SlotState::Live)));
    assert!(slot.is_live(g2));
    assert_eq!(slot.holders(), 1 << 1);
    // A holder-less slot stuck in a transient state is repaired to free.
    slot.life.holders.store(0, SeqCst);
    slot.life
        .state_gen
        .store(word(g2, SlotState::Claiming), SeqCst);
    assert!(slot.retire_orphan());
    assert_eq!(slot.state(), Some(SlotState::Free));
    assert_eq!(slot.generation(), g2 + 1);
    // A free slot needs no retiring, but its allocated id is a leak.
    assert!(slot.retire_orphan());
    assert_eq!(slot.generation(), g2 + 1);
    // Corrupt state values are reset.
    slot.life
        .state_gen
        .store(word(7, SlotState::Free) | 9, SeqCst);
    assert_eq!(slot.state(), None);
    assert!(slot.retire_orphan());
    assert_eq!(slot.state(), Some(SlotState::Free));
    // Claiming a non-free slot fails without touching it.
    let g3 = slot.claim(owner(2), CreateFlags::empty()).unwrap();
    assert_eq!(
        slot.claim(owner(3), CreateFlags::empty()),
        Err(TableError::Corrupt)
    );
    assert!(slot.is_live(g3));
    assert_eq!(slot.holders(), 1 << 2);
}

#[test]
fn ring_full_waiters_still_get_served() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let n = RING as u32 + 4;
    let done = Arc::new(AtomicU32::new(0));
    let mut hs = Vec::new();
    for i in 0..n {
        let (s2, w2, d2) = (s.clone(), w.clone(), done.clone());
        hs.push(thread::spawn(move || {
            let r = s2.wait_and_reset(&*w2, args(i % MAX_PROCS, Some(Duration::from_secs(20))));
            d2.fetch_add(1, SeqCst);
            r
        }));
    }
    poll_until("ring full", || s.waiters() == RING as u32);
    for k in 1..=n {
        s.record(&*w);
        poll_until("a release", || done.load(SeqCst) >= k);
    }
    for h in hs {
        assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
    }
    assert_eq!(done.load(SeqCst), n);
    assert!(!s.is_set());
}

/// Many recorders and waiters (some with short timeouts), bounded iterations: every wait
/// that reports `Consumed` consumed a distinct record, so consumed ≤ records, and once the
/// dust settles no record is stuck with a waiter asleep.
#[test]
fn stress_no_lost_or_double_consumption() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let consumed = Arc::new(AtomicU32::new(0));
    let timed_out = Arc::new(AtomicU32::new(0));
    let waiters = 6;
    let per_waiter = 300;
    let mut hs = Vec::new();
    for i in 0..waiters {
        let (s2, w2, c2, t2) = (s.clone(), w.clone(), consumed.clone(), timed_out.clone());
        hs.push(thread::spawn(move || {
            for k in 0..per_waiter {
                let t = if k % 7 == 0 {
                    Duration::from_micros(50)
                } else {
                    Duration::from_secs(20)
                };
                match s2.wait_and_reset(&*w2, args(i, Some(t))) {
                    Ok(WaitOutcome::Consumed) => {
                        c2.fetch_add(1, SeqCst);
                    }
                    Ok(WaitOutcome::TimedOut) => {
                        t2.fetch_add(1, SeqCst);
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        }));
    }
    // Record until every waiter is done, one record at a time, each only after the
    // previous one was consumed (so collapse cannot hide anything). Every 40 records the
    // recorder pauses for 2 ms, so the short waits in progress then must time out — on a
    // fast machine a record would otherwise always come within their 50 µs.
    let mut records = 0u32;
    let end = Instant::now() + Duration::from_secs(120);
    while hs.iter().any(|h| !h.is_finished()) {
        assert!(Instant::now() < end, "stress test stuck");
        if !s.is_set() {
            s.record(&*w);
            records += 1;
            if records.is_multiple_of(40) {
                thread::sleep(Duration::from_millis(2));
            }
        }
        core::hint::spin_loop();
    }
    for h in hs {
        h.join().unwrap();
    }
    let c = consumed.load(SeqCst);
    let left = u32::from(s.is_set());
    // Every record was consumed exactly once or is still pending.
    assert_eq!(
        c + left,
        records,
        "consumed {c}, pending {left}, records {records}"
    );
    // Both paths ran: the cancel path is what this test is about.
    assert_eq!(c + timed_out.load(SeqCst), waiters * per_waiter);
    assert!(timed_out.load(SeqCst) > 0);
    assert_eq!(s.waiters(), 0);
}

fn parked_args(proc: u32) -> WaitArgs<'static> {
    WaitArgs {
        proc,
        timeout: None,
        cancel: &never,
    }
}

/// A resumable wait holds its place: `try_consume` never takes its record, a later
/// blocking waiter queues behind it, and a poll at the head consumes and hands on.
#[test]
fn a_resumable_wait_keeps_its_place() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let Begin::Queued(t) = s.wait_begin(&*w, 1).unwrap() else {
        panic!("nothing recorded: the wait queues");
    };
    assert_eq!(s.waiters(), 1);
    let t = s.wait_poll(&*w, t).unwrap().unwrap_err();
    s.record(&*w);
    assert!(
        !s.try_consume(),
        "the parked wait's record is not for try_consume"
    );
    assert!(s.wait_ready(&t));
    // A later waiter queues behind it and does not overtake it.
    let (s2, w2) = (Arc::clone(&s), Arc::clone(&w));
    let later = thread::spawn(move || s2.wait_and_reset(&*w2, parked_args(2)));
    poll_until("the later waiter queued", || s.waiters() == 2);
    assert_eq!(s.wait_poll(&*w, t), Ok(Ok(())));
    assert!(!s.is_set());
    s.record(&*w);
    assert_eq!(later.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!(s.waiters(), 0);
    // With a record there and nobody queued, beginning consumes it.
    s.record(&*w);
    assert_eq!(s.wait_begin(&*w, 1), Ok(Begin::Consumed));
}

/// Abandoning leaves the record for the next waiter; resuming blocks until the record.
#[test]
fn a_resumable_wait_abandoned_or_resumed() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let Begin::Queued(t) = s.wait_begin(&*w, 1).unwrap() else {
        panic!("queues");
    };
    s.record(&*w);
    s.wait_abandon(&*w, t);
    assert_eq!(s.waiters(), 0);
    assert!(s.try_consume(), "the abandoned wait's record stays");
    let Begin::Queued(t) = s.wait_begin(&*w, 3).unwrap() else {
        panic!("queues");
    };
    let (s2, w2) = (Arc::clone(&s), Arc::clone(&w));
    let resumed = thread::spawn(move || s2.wait_resume(&*w2, t, parked_args(3)));
    thread::sleep(Duration::from_millis(5));
    s.record(&*w);
    assert_eq!(resumed.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!(s.waiters(), 0);
    assert!(!s.is_set());
    // A wrong process: refused, the ticket given up.
    let Begin::Queued(t) = s.wait_begin(&*w, 3).unwrap() else {
        panic!("queues");
    };
    assert_eq!(
        s.wait_resume(&*w, t, parked_args(4)),
        Err(TableError::BadProc)
    );
    assert_eq!(s.waiters(), 0);
    assert_eq!(s.wait_begin(&*w, MAX_PROCS), Err(TableError::BadProc));
}

/// With all places held, beginning takes none.
#[test]
fn a_resumable_wait_on_a_full_queue_takes_no_ticket() {
    let w = TestWaiter::new();
    let s = NotifySync::new();
    let mut held = Vec::new();
    for _ in 0..RING {
        let Begin::Queued(t) = s.wait_begin(&*w, 1).unwrap() else {
            panic!("room");
        };
        held.push(t);
    }
    assert_eq!(s.wait_begin(&*w, 1), Ok(Begin::Full));
    for t in held {
        s.wait_abandon(&*w, t);
    }
    assert_eq!(s.waiters(), 0);
}

/// A resumable wait that finds nobody queued takes a lone place: `tail` stays at the head
/// (one compare-and-swap, no ticket handed out), yet the place counts as a waiter and keeps
/// its record from `try_consume`; ending it leaves the queue as it found it.
#[test]
fn a_lone_wait_takes_its_place_without_moving_tail() {
    let w = TestWaiter::new();
    let s = NotifySync::new();
    let Begin::Queued(t) = s.wait_begin(&*w, 1).unwrap() else {
        panic!("nothing recorded: the wait queues");
    };
    assert!(t.is_solo(), "nobody queued: a lone place");
    assert_eq!(
        s.tail.load(SeqCst),
        s.head.load(SeqCst),
        "tail did not move"
    );
    assert_eq!(s.waiters(), 1);
    assert_eq!(s.ticket_holders().collect::<Vec<_>>(), [1]);
    let t = Ticket::from_raw(t.into_raw());
    assert!(t.is_solo(), "the raw word keeps the kind");
    s.record(&*w);
    assert!(
        !s.try_consume(),
        "a lone place's record is not for try_consume"
    );
    assert!(s.wait_ready(&t));
    assert_eq!(s.wait_poll(&*w, t), Ok(Ok(())));
    assert!(!s.is_set());
    assert_eq!((s.head.load(SeqCst), s.tail.load(SeqCst)), (0, 0));
    assert_eq!(s.ring[0].load(SeqCst), entry(0, ST_FREE, 0));
    assert_eq!(s.waiters(), 0);
    s.record(&*w);
    assert!(
        s.try_consume(),
        "the place given back, try_consume works again"
    );
}

/// A waiter that comes while a lone place is held makes it an ordinary ticket and queues
/// behind it: the lone holder takes the first record and hands the head on, the later
/// waiter the second.
#[test]
fn a_lone_place_is_made_ordinary_by_a_waiter_that_comes() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let Begin::Queued(t) = s.wait_begin(&*w, 1).unwrap() else {
        panic!("queues");
    };
    assert!(t.is_solo());
    let (s2, w2) = (Arc::clone(&s), Arc::clone(&w));
    let later = thread::spawn(move || s2.wait_and_reset(&*w2, parked_args(2)));
    poll_until("the later waiter queued", || s.waiters() == 2);
    assert_eq!(
        s.ring[0].load(SeqCst),
        entry(0, ST_TAKEN, 1),
        "made ordinary"
    );
    assert_eq!(s.ticket_holders().collect::<Vec<_>>(), [1, 2]);
    // A second resumable wait queues behind both, with an ordinary ticket.
    let Begin::Queued(t3) = s.wait_begin(&*w, 3).unwrap() else {
        panic!("queues");
    };
    assert!(!t3.is_solo());
    s.record(&*w);
    assert_eq!(s.wait_poll(&*w, t), Ok(Ok(())), "the first in line");
    s.record(&*w);
    assert_eq!(later.join().unwrap(), Ok(WaitOutcome::Consumed));
    let t3 = s.wait_poll(&*w, t3).unwrap().unwrap_err();
    s.wait_abandon(&*w, t3);
    assert_eq!(s.waiters(), 0);
    assert_eq!((s.head.load(SeqCst), s.tail.load(SeqCst)), (3, 3));
}

/// A lone place abandoned, or resumed as a blocking wait, after a waiter made it ordinary:
/// it is given up or served as an ordinary ticket (the head moves on).
#[test]
fn a_lone_place_made_ordinary_is_abandoned_or_resumed_as_one() {
    for resume in [false, true] {
        let w = TestWaiter::new();
        let s = Arc::new(NotifySync::new());
        let Begin::Queued(t) = s.wait_begin(&*w, 1).unwrap() else {
            panic!("queues");
        };
        let (s2, w2) = (Arc::clone(&s), Arc::clone(&w));
        let later = thread::spawn(move || s2.wait_and_reset(&*w2, parked_args(2)));
        poll_until("the later waiter queued", || s.waiters() == 2);
        s.record(&*w);
        if resume {
            assert_eq!(
                s.wait_resume(&*w, t, parked_args(1)),
                Ok(WaitOutcome::Consumed)
            );
            s.record(&*w);
        } else {
            s.wait_abandon(&*w, t);
        }
        assert_eq!(later.join().unwrap(), Ok(WaitOutcome::Consumed));
        assert_eq!(s.waiters(), 0);
        assert!(!s.is_set());
    }
    // Resumed while still alone: it becomes an ordinary ticket and blocks for its record.
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let Begin::Queued(t) = s.wait_begin(&*w, 1).unwrap() else {
        panic!("queues");
    };
    let (s2, w2) = (Arc::clone(&s), Arc::clone(&w));
    let resumed = thread::spawn(move || s2.wait_resume(&*w2, t, parked_args(1)));
    poll_until("the ticket made ordinary", || s.tail.load(SeqCst) == 1);
    s.record(&*w);
    assert_eq!(resumed.join().unwrap(), Ok(WaitOutcome::Consumed));
    assert_eq!((s.head.load(SeqCst), s.tail.load(SeqCst)), (1, 1));
}

/// A dead process's lone place is given back by the reclaim (`cancel_proc_tickets`), or,
/// if a waiter came first, made ordinary by it and cancelled by its repair of the stuck
/// head; a place given up on the holder's behalf is reported to it as gone.
#[test]
fn a_dead_process_s_lone_place_is_reclaimed() {
    let w = TestWaiter::new();
    let s = Arc::new(NotifySync::new());
    let Begin::Queued(t) = s.wait_begin(&*w, 5).unwrap() else {
        panic!("queues");
    };
    assert_eq!(s.cancel_proc_tickets(&*w, 4), 0, "another process's");
    assert_eq!(s.cancel_proc_tickets(&*w, 5), 1);
    assert_eq!(s.waiters(), 0);
    s.record(&*w);
    assert_eq!(
        s.wait_poll(&*w, t),
        Err(TableError::Corrupt),
        "the place is gone"
    );
    assert!(s.try_consume(), "the record stays for others");

    // A waiter comes first: it makes the dead place ordinary, finds the head stuck on it
    // and cancels it (the process is dead), then takes its record.
    let Begin::Queued(t) = s.wait_begin(&*w, 6).unwrap() else {
        panic!("queues");
    };
    assert!(t.is_solo());
    *w.dead.lock().unwrap() |= 1 << 6;
    s.record(&*w);
    assert_eq!(
        s.wait_and_reset(&*w, args(2, Some(Duration::from_secs(20)))),
        Ok(WaitOutcome::Consumed)
    );
    assert_eq!(s.waiters(), 0);
    let resumed = s.wait_resume(&*w, t, parked_args(6));
    assert_eq!(resumed, Err(TableError::Corrupt), "the place is gone");
}

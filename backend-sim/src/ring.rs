//! A stream's task queue: a bounded multi-producer, single-consumer ring in the stream's own
//! memory, with tickets in enqueue order, a close that stops new tasks atomically, and the
//! handshake that lets the consumer (the stream's worker) sleep without losing a wake-up.
//!
//! # Why a ring of our own
//!
//! The queue was a `Mutex<VecDeque>`: the host thread and the worker, spinning for work,
//! fought over its lock, and an enqueue into a running stream cost 0.75–0.95 µs. This ring
//! is D. Vyukov's bounded MPMC array queue, used with one consumer: each slot carries a
//! sequence number saying which ticket may write it (`seq == t`: free for ticket `t`),
//! which one it holds (`seq == t + 1`: published), and the consumer hands it to the next lap
//! (`seq = t + len`). An enqueue is one compare-and-swap on the tail (a line the consumer
//! touches only to go to sleep), a write of the slot and a release store of its sequence; the
//! sleep handshake rides on that same compare-and-swap. No lock, no fence, no allocation. A crate (crossbeam's `ArrayQueue`, the
//! same algorithm) would give the push but not what the stream needs around it: the ticket
//! a task gets (so that `synchronize` knows which tasks came before it), a close folded into
//! the tail word (no task is accepted after a destroy has started, without a lock), tasks a
//! stream's own task queues past the capacity (see [`Push::Spill`]), and a loom model of the
//! whole protocol together with the worker's sleep (the `loom` tests below, run by
//! `cargo xtask test`).
//!
//! # Protocol
//!
//! - Tail word: bit 63 is *closed*, the rest counts the tickets issued. A producer reads the
//!   tail, checks its slot is free, and claims the ticket by a compare-and-swap that also
//!   fails if the ring was closed meanwhile. A claimed ticket is always published: between
//!   the claim and the publication there is nothing that can fail.
//! - A full ring (the slot still holds the ticket one lap back) refuses the task
//!   ([`Push::Full`]); the caller waits for room. A caller that is the consumer itself (a
//!   task enqueuing on its own stream) cannot wait for itself: it may claim the ticket
//!   anyway and keep the task in the consumer's *spill* list ([`Push::Spill`], then
//!   [`Taker::spill`]), from which [`Taker::take`] hands it on in its turn.
//! - The consumer takes tickets in order under its lock (the worker, or a discarding destroy).
//! - Sleep: the worker sets the tail word's *sleeping* bit with a compare-and-swap that
//!   succeeds only if no ticket was issued past the ones it has taken
//!   ([`Ring::prepare_sleep`]); a producer's claim is a compare-and-swap of the same word that
//!   clears the bit, and the producer that cleared it wakes the worker once it has published
//!   ([`Push::Queued`]'s `wake`). Both sides change one word by read-modify-writes, which are
//!   totally ordered: either the claim comes first (the worker's swap fails and it looks
//!   again) or the sleep does (the claim sees the bit). No fence on the enqueue path.

use std::collections::VecDeque;
use std::mem::MaybeUninit;

#[cfg(sim_loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(sim_loom)]
use loom::sync::{Mutex, MutexGuard};
#[cfg(not(sim_loom))]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(sim_loom))]
use std::sync::{Mutex, MutexGuard};

/// Bit of the tail word that says the ring takes no more tasks.
const CLOSED: u64 = 1 << 63;
/// Bit of the tail word that says the consumer sleeps (or is about to): the producer whose
/// claim clears it wakes the consumer.
const SLEEPING: u64 = 1 << 62;
/// Bit of the tail word that says the consumer's turn is away from its thread: a parked
/// stream (`stream::runner`), whose thread waits for the bit to clear. Claims keep it.
/// Cleared by [`Ring::come_home`] (the thread is then woken by whoever cleared it) or by
/// [`Ring::sleep_away`], which sets *sleeping* in the same step (the next claim wakes it).
const AWAY: u64 = 1 << 61;
/// The tail word's ticket count.
const COUNT: u64 = AWAY - 1;

/// How many slots ahead of its own a producer prefetches one ([`Ring::prefetch_ahead`]): far
/// enough that the line arrives before the producer does (a record queued every 30–45 ns, a
/// line moving between this VM's CPUs in 50–150 ns), near enough to be still in its cache. A
/// probe with a host thread queuing records into a stream whose worker ran on the other CPU
/// (the worker's pin drops already deferred, see `stream::worker::Finished`): 44.2 ns a record
/// (max 46.2) prefetching 8 slots ahead, 46.2 ns (max 97.6) without, 44.5 ns (max 103) at 4,
/// medians of 12 rounds taken in turns in the same minutes; the maxima are the minutes when
/// lines moved slowly between the CPUs. Not in the loom models, which do not prefetch.
#[cfg(not(sim_loom))]
const PREFETCH_AHEAD: u64 = 8;

/// A slot's value: `std`'s `UnsafeCell`, or loom's (which checks the accesses) in the model.
struct Cell<T>(
    #[cfg(not(sim_loom))] std::cell::UnsafeCell<MaybeUninit<T>>,
    #[cfg(sim_loom)] loom::cell::UnsafeCell<MaybeUninit<T>>,
);

impl<T> Cell<T> {
    fn new() -> Self {
        #[cfg(not(sim_loom))]
        return Cell(std::cell::UnsafeCell::new(MaybeUninit::uninit()));
        #[cfg(sim_loom)]
        return Cell(loom::cell::UnsafeCell::new(MaybeUninit::uninit()));
    }

    /// Writes `v`.
    ///
    /// # Safety
    ///
    /// The caller owns the slot (claimed its ticket and has not published it).
    unsafe fn write(&self, v: T) {
        #[cfg(not(sim_loom))]
        // SAFETY: exclusive by the caller's contract.
        unsafe {
            (*self.0.get()).write(v);
        }
        #[cfg(sim_loom)]
        // SAFETY: exclusive by the caller's contract (and checked by loom).
        self.0.with_mut(|p| unsafe {
            (*p).write(v);
        });
    }

    /// Moves the value out.
    ///
    /// # Safety
    ///
    /// The slot holds a published value that the caller (the consumer) now takes over.
    unsafe fn read(&self) -> T {
        #[cfg(not(sim_loom))]
        // SAFETY: initialised and exclusive by the caller's contract.
        return unsafe { (*self.0.get()).assume_init_read() };
        #[cfg(sim_loom)]
        // SAFETY: initialised and exclusive by the caller's contract (and checked by loom).
        return self.0.with_mut(|p| unsafe { (*p).assume_init_read() });
    }
}

/// A task's place in the ring. Aligned to 32 bytes: a simulator stream's slot (the sequence
/// and a 24-byte job) then fills half a cache line and never spans two, and a slot of a
/// smaller job (the stream engine's tests and bench) shares its line with one other at most.
/// The slots' array comes from `malloc`, 16-byte aligned: before, every other 32-byte slot
/// could have its sequence on one line and its job on the next (two lines to move between
/// the host's CPU and the worker's for one task), and 8-byte slots of the bench's no-op job
/// sat eight to a line, the worker reading a line the host was still writing (its enqueue
/// row 41.6 → 21.0 ns, 2026-12-05 `pipe12` in `bench/README.md`).
#[repr(align(32))]
struct Slot<T> {
    /// Which ticket may write the slot (`t`), holds it (`t + 1`), or, once taken, `t + len`.
    seq: AtomicU64,
    value: Cell<T>,
}

/// What [`Ring::push`] did with a task.
#[derive(Debug)]
pub(crate) enum Push<T> {
    /// Queued; `wake`: the consumer was asleep and the caller must wake it.
    Queued { wake: bool },
    /// The ring is full (the task is handed back; wait for room and try again).
    Full(T),
    /// The ring is closed (the task is handed back; it must not run).
    Closed(T),
    /// The ring was full and the caller is the consumer: the task got this ticket and goes
    /// to the spill list (internal to [`Taker::push_own`]).
    Spill(u64, T),
}

/// A ticket claimed by [`Ring::claim_fast`], whose slot is free: it must be published
/// ([`publish`](Self::publish)) at once — the consumer waits for it, spinning — and nothing
/// between the claim and the publication may fail.
#[must_use = "a claimed ticket must be published: the consumer waits for it"]
pub(crate) struct Claimed<'a, T> {
    ring: &'a Ring<T>,
    slot: &'a Slot<T>,
    index: usize,
    ticket: u64,
    wake: bool,
}

impl<T> Claimed<'_, T> {
    /// The ticket (the tasks issued before this one).
    #[inline(always)]
    pub(crate) fn ticket(&self) -> u64 {
        self.ticket
    }

    /// Publishes `v` as the claimed ticket; returns whether the caller must wake the consumer
    /// (as [`Push::Queued`]'s `wake`).
    #[inline(always)]
    pub(crate) fn publish(self, v: T) -> bool {
        // SAFETY: `claim_fast` claimed the ticket, whose slot was free.
        unsafe { self.ring.publish(self.slot, self.index, self.ticket, v) };
        self.wake
    }
}

/// The consumer's side, behind one lock: the next ticket to take and the spilled tasks.
struct Consumer<T> {
    head: u64,
    spill: VecDeque<(u64, T)>,
}

/// A bounded MPSC ring of tasks; see the module docs.
pub(crate) struct Ring<T> {
    /// Closed and sleeping bits, and tickets issued; written by producers, by the consumer
    /// when it goes to sleep, and once by `close`.
    tail: Padded<AtomicU64>,
    slots: Box<[Slot<T>]>,
    /// `slots.len()`, as a ticket count: a power of two, so that a ticket's slot is its low
    /// bits ([`mask`](Self::mask)). A division by the length cost a `div` (20–40 cycles
    /// here) on the way to the slot on every push and every take.
    len: u64,
    /// `len - 1`.
    mask: u64,
    /// How many tasks may wait: `len` unless that is not a power of two (or is 1: a ring of
    /// one slot cannot tell a free slot from a full one), when the slots are rounded up and
    /// a push also checks that the ticket `capacity` back has been taken.
    capacity: u64,
    /// How a push prefetches the slot ahead ([`prefetch_ahead`](Self::prefetch_ahead)),
    /// decided when the ring is made: off for small rings and rings of small slots (and in
    /// the loom models).
    prefetch: crate::prefetch::Hint,
    /// On cache lines of its own: the worker writes the lock and `head` on every batch it
    /// takes, and producers read `slots`, `len` and `capacity` on every push — on one line
    /// they made each push wait for that line to come back from the worker's CPU.
    consumer: Padded<Mutex<Consumer<T>>>,
    /// The thread that claimed a ticket last (`crate::submitted`): written by a claim only
    /// when the thread changes.
    submitter: crate::submitted::Submitter,
}

// SAFETY: a value moves from the producer that writes its slot to the consumer that reads it,
// with the slot's sequence number (release/acquire) ordering the two; no `&T` is shared.
unsafe impl<T: Send> Sync for Ring<T> {}
// SAFETY: as above; the ring owns its values.
unsafe impl<T: Send> Send for Ring<T> {}

/// Pads a value to its own cache lines, so that values written by different threads do not
/// false-share: the ring's producers' and consumer's words, a stream's counters
/// ([`crate::stream`]).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Ring<T> {
    /// A ring for `capacity` tasks (at least 1). Panics past 2⁶³ (no such number of slots:
    /// `next_power_of_two` would wrap to 0 in a release build, a ring of 2 slots that
    /// checked nothing against `capacity`).
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1) as u64;
        let len = capacity
            .checked_next_power_of_two()
            .unwrap_or_else(|| panic!("a queue of {capacity} tasks: too many slots"))
            .max(2);
        Ring {
            tail: Padded(AtomicU64::new(0)),
            slots: (0..len)
                .map(|t| Slot {
                    seq: AtomicU64::new(t),
                    value: Cell::new(),
                })
                .collect(),
            len,
            mask: len - 1,
            capacity,
            prefetch: Self::prefetch_hint(len),
            consumer: Padded(Mutex::new(Consumer {
                head: 0,
                spill: VecDeque::new(),
            })),
            submitter: crate::submitted::Submitter::default(),
        }
    }

    /// The kernel thread id of the thread that claimed a ticket last (0: none yet).
    pub(crate) fn submitter(&self) -> i32 {
        self.submitter.get()
    }

    /// Whether a push prefetches ([`prefetch_ahead`](Self::prefetch_ahead)), and the worker
    /// the slots of its next batch ([`Taker::take_batch`]): only for tasks of more than 16
    /// bytes (the simulator's: a 32-byte slot, two to a cache line). With small tasks (eight
    /// 8-byte slots to a line, before slots were aligned to 32 bytes) a line came back from
    /// the consumer once per eight pushes, and the prefetch cost more than it saved: the
    /// bench's engine row (a no-op job) read 16.3–19.5 ns an enqueue with it, 12.5–15.0 ns
    /// without, four runs of each in turns.
    #[cfg(not(sim_loom))]
    const PREFETCHES: bool = std::mem::size_of::<T>() > 16;

    /// How a ring of `len` slots prefetches (see [`prefetch_ahead`](Self::prefetch_ahead)).
    #[cfg(not(sim_loom))]
    fn prefetch_hint(len: u64) -> crate::prefetch::Hint {
        if Self::PREFETCHES && len >= 4 * PREFETCH_AHEAD {
            crate::prefetch::hint()
        } else {
            crate::prefetch::Hint::Off
        }
    }

    /// In the loom models: no prefetch.
    #[cfg(sim_loom)]
    fn prefetch_hint(_len: u64) -> crate::prefetch::Hint {
        crate::prefetch::Hint::Off
    }

    #[inline(always)]
    fn slot(&self, ticket: u64) -> &Slot<T> {
        // SAFETY: `mask` is `slots.len() - 1` (a power of two), so the index is in bounds.
        unsafe { self.slots.get_unchecked((ticket & self.mask) as usize) }
    }

    /// Queues `v`: [`Push::Queued`], [`Push::Full`] or [`Push::Closed`] (the tests' and the
    /// models' push; the stream queues through [`push_with`](Self::push_with)).
    #[cfg(test)]
    #[inline]
    pub(crate) fn push(&self, v: T) -> Push<T> {
        self.push_inner(v, false, |v| v)
    }

    /// [`push`](Self::push) that hands the task to `on_claim` once its ticket is claimed and
    /// queues what `on_claim` returns instead (not called when the task is handed back). The
    /// claim is a sequentially consistent read-modify-write of the tail, so what `on_claim`
    /// reads comes after it in that order: a caller whose task refers to something another
    /// thread may free once [`issued`](Self::issued) tasks have run (the simulator's stream
    /// pins, `crate::pin`) checks here that it was not taken away before the claim. Between
    /// the claim and the publication nothing may fail: `on_claim` must not panic, and the
    /// consumer spins for the ticket meanwhile, so it should be short.
    #[inline]
    pub(crate) fn push_with(&self, v: T, on_claim: impl FnOnce(T) -> T) -> Push<T> {
        self.push_inner(v, false, on_claim)
    }

    /// `overflow`: a full ring gives [`Push::Spill`] instead of [`Push::Full`].
    #[inline]
    fn push_inner(&self, v: T, overflow: bool, on_claim: impl FnOnce(T) -> T) -> Push<T> {
        let mut word = self.tail.load(Ordering::Relaxed);
        loop {
            if word & CLOSED != 0 {
                return Push::Closed(v);
            }
            let tail = word & COUNT;
            let index = (tail & self.mask) as usize;
            let slot = self.slot(tail);
            let seq = slot.seq.load(Ordering::Acquire);
            let free = seq == tail && (self.capacity == self.len || self.lap_taken(tail));
            if free || (seq <= tail && overflow) {
                // The claim; it also clears the sleeping bit (we wake the consumer).
                // Sequentially consistent (the same `lock cmpxchg` on x86 as `AcqRel`):
                // see `push_with`.
                if let Err(now) = self.tail.compare_exchange_weak(
                    word,
                    // The next ticket, keeping *away*, clearing *sleeping* (`CLOSED` is
                    // clear here).
                    (word + 1) & !SLEEPING,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    word = now;
                    continue;
                }
                let wake = word & SLEEPING != 0;
                crate::submitted::note(&self.submitter, tail);
                let v = on_claim(v);
                if !free {
                    // Only the consumer's own thread overflows: it is awake.
                    return Push::Spill(tail, v);
                }
                // SAFETY: the compare-and-swap made ticket `tail` ours, and its slot is free
                // (`seq == tail`: the consumer has taken the value one lap back).
                unsafe { self.publish(slot, index, tail, v) };
                return Push::Queued { wake };
            }
            if seq <= tail {
                return Push::Full(v);
            }
            // Another producer took this ticket: look again.
            word = self.tail.load(Ordering::Relaxed);
        }
    }

    /// [`push_with`](Self::push_with)'s claim in its common case, always inlined into its one
    /// hot caller (a record's or wait's fast path, `Sim::enqueue_pair`): the same claim, but
    /// anything else — a closed ring, a full slot, a claim lost to another producer — gives
    /// `None` at once, nothing claimed, for the caller to queue its task through
    /// [`push_with`](Self::push_with). The caller does what `push_with`'s `on_claim` would,
    /// then publishes its task ([`Claimed::publish`]) at once. Out of line, `push_with`'s
    /// frame and its result (a [`Push`] of the task, through memory) cost a record about 40
    /// instructions, and its `on_claim` closure, not inlined, about 30 (callgrind).
    #[inline(always)]
    pub(crate) fn claim_fast(&self) -> Option<Claimed<'_, T>> {
        let word = self.tail.load(Ordering::Relaxed);
        let tail = word & COUNT;
        let index = (tail & self.mask) as usize;
        let slot = self.slot(tail);
        // A closed ring's word never matches the claim's expected value below either, but a
        // closed ring's slot may look free: refused here, before anything else is read.
        if word & CLOSED != 0
            || slot.seq.load(Ordering::Acquire) != tail
            || (self.capacity != self.len && !self.lap_taken_cold(tail))
        {
            return None;
        }
        // The claim, as `push_inner`'s (sequentially consistent, clears *sleeping*, keeps
        // *away*).
        self.tail
            .compare_exchange(
                word,
                (word + 1) & !SLEEPING,
                Ordering::SeqCst,
                Ordering::Relaxed,
            )
            .ok()?;
        crate::submitted::note(&self.submitter, tail);
        Some(Claimed {
            ring: self,
            slot,
            index,
            ticket: tail,
            wake: word & SLEEPING != 0,
        })
    }

    /// Publishes `v` as ticket `tail` in `slot` (at `index`), after the prefetch of a slot
    /// ahead.
    ///
    /// # Safety
    ///
    /// The caller claimed ticket `tail`, and its slot is free (`seq == tail`: the consumer has
    /// taken the value one lap back).
    #[inline(always)]
    unsafe fn publish(&self, slot: &Slot<T>, index: usize, tail: u64, v: T) {
        self.prefetch_ahead(index);
        // SAFETY: the caller's promise.
        unsafe { slot.value.write(v) };
        slot.seq.store(tail + 1, Ordering::Release);
    }

    /// Starts bringing in, for writing, the slot [`PREFETCH_AHEAD`] past slot `index`: the
    /// consumer wrote its sequence number when it took that slot's value one lap back, so the
    /// line sits in the consumer's cache, and the producer that gets to it would otherwise
    /// wait for it at its next locked instruction (a host thread queuing into a stream whose
    /// worker runs on another CPU: see `PREFETCH_AHEAD`). A hint only. Small rings, whose
    /// slot that far ahead may be one the consumer is reading, skip it; so do rings of small
    /// slots ([`Ring::PREFETCHES`]).
    #[inline(always)]
    fn prefetch_ahead(&self, index: usize) {
        #[cfg(not(sim_loom))]
        if self.prefetch != crate::prefetch::Hint::Off {
            let slot = self.slot(index as u64 + PREFETCH_AHEAD);
            crate::prefetch::prefetch_with(self.prefetch, std::ptr::from_ref(slot).cast());
        }
        #[cfg(sim_loom)]
        let _ = (index, self.prefetch);
    }

    /// For a ring whose capacity is less than its slots: whether the ticket `capacity`
    /// before `tail` has been taken (its slot handed to the ticket a lap on, or a later one:
    /// with a stale `tail`, whose claim will fail, the ring may have moved further).
    fn lap_taken(&self, tail: u64) -> bool {
        tail < self.capacity || {
            let t = tail - self.capacity;
            self.slot(t).seq.load(Ordering::Acquire) >= t + self.len
        }
    }

    /// [`lap_taken`](Self::lap_taken) out of line, for [`claim_fast`](Self::claim_fast): a
    /// stream's queue has as many slots as tasks unless its capacity was set to a number that
    /// is not a power of two, and inlined its first compare was made on every claim.
    #[cold]
    #[inline(never)]
    fn lap_taken_cold(&self, tail: u64) -> bool {
        self.lap_taken(tail)
    }

    /// Tickets issued so far (tasks queued, taken or not).
    #[inline]
    pub(crate) fn issued(&self) -> u64 {
        self.tail.load(Ordering::SeqCst) & COUNT
    }

    /// Stops the ring taking tasks; returns the tickets issued (all of them will be
    /// published: see [`Taker::take_published`]).
    pub(crate) fn close(&self) -> u64 {
        self.tail.fetch_or(CLOSED, Ordering::SeqCst) & COUNT
    }

    /// Whether ticket `head` is published (for the consumer's spin; a spilled ticket is the
    /// consumer's own and it does not spin for it).
    #[inline]
    pub(crate) fn ready(&self, head: u64) -> bool {
        self.slot(head).seq.load(Ordering::Acquire) == head + 1
    }

    /// The consumer's half of the sleep handshake: sets the sleeping bit if no ticket past
    /// `head` (the next one it would take) has been issued. True: sleep (the next claim
    /// clears the bit and its producer wakes the consumer). False: a task is coming, or the
    /// ring is closed; look again.
    pub(crate) fn prepare_sleep(&self, head: u64) -> bool {
        let word = self.tail.load(Ordering::Relaxed);
        word & (COUNT | CLOSED | AWAY) == head
            && self
                .tail
                .compare_exchange(word, word | SLEEPING, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// The consumer is awake again (after [`prepare_sleep`](Self::prepare_sleep) said
    /// sleep): clears the sleeping bit if no claim did (a destroy, or a spurious wake-up), so
    /// that the next producer does not issue a needless wake.
    pub(crate) fn awake(&self) {
        if self.tail.load(Ordering::Relaxed) & SLEEPING != 0 {
            self.tail.fetch_and(!SLEEPING, Ordering::AcqRel);
        }
    }

    /// Whether the consumer said it sleeps.
    pub(crate) fn is_sleeping(&self) -> bool {
        self.tail.load(Ordering::SeqCst) & SLEEPING != 0
    }

    /// The consumer's thread lets its turn go (it parks its stream; it is awake, so the
    /// sleeping bit is clear): sets *away*. It then waits while [`is_away`](Self::is_away).
    pub(crate) fn go_away(&self) {
        self.tail.fetch_or(AWAY, Ordering::SeqCst);
    }

    /// Whether the ring is closed ([`close`](Self::close)).
    pub(crate) fn is_closed(&self) -> bool {
        self.tail.load(Ordering::SeqCst) & CLOSED != 0
    }

    /// Whether the turn is away from the consumer's thread.
    pub(crate) fn is_away(&self) -> bool {
        self.tail.load(Ordering::SeqCst) & AWAY != 0
    }

    /// The turn comes back to the consumer's thread, which the caller then wakes.
    pub(crate) fn come_home(&self) {
        self.tail.fetch_and(!AWAY, Ordering::SeqCst);
    }

    /// [`prepare_sleep`](Self::prepare_sleep) for a turn that is away: the turn comes home
    /// asleep, in one step, if no ticket past `head` was issued (and the ring is open): the
    /// next claim clears the sleeping bit and its producer wakes the consumer's thread, which
    /// finds its turn home. False: a task is coming, or the ring is closed; the turn stays
    /// away.
    pub(crate) fn sleep_away(&self, head: u64) -> bool {
        let word = self.tail.load(Ordering::Relaxed);
        word & (COUNT | CLOSED | SLEEPING | AWAY) == head | AWAY
            && self
                .tail
                .compare_exchange(
                    word,
                    (word & !AWAY) | SLEEPING,
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// The consumer's side: the worker per batch, a discarding destroy once.
    pub(crate) fn taker(&self) -> Taker<'_, T> {
        Taker {
            ring: self,
            #[cfg(not(sim_loom))]
            c: self
                .consumer
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
            #[cfg(sim_loom)]
            c: self.consumer.lock().unwrap(),
        }
    }
}

/// The consumer's lock: takes tasks in ticket order.
pub(crate) struct Taker<'a, T> {
    ring: &'a Ring<T>,
    c: MutexGuard<'a, Consumer<T>>,
}

impl<T> Taker<'_, T> {
    /// The next ticket to take (= tasks taken so far).
    pub(crate) fn head(&self) -> u64 {
        self.c.head
    }

    /// Queues `v` for the consumer's own thread (a task enqueuing on its own stream), which
    /// cannot wait for room: past the capacity the task gets its ticket all the same and is
    /// kept in the spill list, to be taken in its turn. Gives [`Push::Queued`] or
    /// [`Push::Closed`]. Claim and spill happen under the consumer's lock, so a discarding
    /// destroy never waits for a spilled ticket that is not in the list yet.
    pub(crate) fn push_own(&mut self, v: T, on_claim: impl FnOnce(T) -> T) -> Push<T> {
        match self.ring.push_inner(v, true, on_claim) {
            Push::Spill(ticket, v) => {
                self.c.spill.push_back((ticket, v));
                Push::Queued { wake: false }
            }
            other => other,
        }
    }

    /// Takes the next task if it is published (or spilled); `None` if not (yet).
    pub(crate) fn take(&mut self) -> Option<T> {
        let head = self.c.head;
        let slot = self.ring.slot(head);
        let v = if self.c.spill.front().is_some_and(|(t, _)| *t == head) {
            let (_, v) = self.c.spill.pop_front()?;
            v
        } else {
            if slot.seq.load(Ordering::Acquire) != head + 1 {
                return None;
            }
            // SAFETY: `seq == head + 1`: the producer of ticket `head` published the value
            // (release, paired with our acquire), and we are the only consumer (the lock).
            unsafe { slot.value.read() }
        };
        // Hands the slot to the ticket one lap on (for a spilled ticket the slot was never
        // written; the ticket one lap back was taken before, so `seq == head` here).
        slot.seq.store(head + self.ring.len, Ordering::Release);
        self.c.head = head + 1;
        Some(v)
    }

    /// Takes published tasks in ticket order into `out`, as many as are published and fit;
    /// returns how many (`out[..n]` is then initialised). The worker's batch
    /// ([`crate::stream`]'s `Shared::next`): with no spilled task (nearly always) one check
    /// of the spill list and one store of `head` per batch, and the ring's fields read once,
    /// not per task; each slot still needs its own acquire of `seq` (a producer publishes
    /// each slot on its own). Stops at the first ticket not yet published.
    #[inline]
    pub(crate) fn take_batch(&mut self, out: &mut [MaybeUninit<T>]) -> usize {
        if !self.c.spill.is_empty() {
            // A spilled ticket's slot is never published: one at a time, through `take`.
            let mut n = 0;
            while n < out.len() {
                let Some(v) = self.take() else { break };
                out[n].write(v);
                n += 1;
            }
            return n;
        }
        // The spill list stays empty meanwhile: only `push_own`, under this lock, adds to it.
        // Nothing in the loop can unwind, so `head` is stored once, after it.
        let (slots, mask, len) = (&self.ring.slots, self.ring.mask, self.ring.len);
        let start = self.c.head;
        let mut n = 0;
        for o in out.iter_mut() {
            let head = start + n as u64;
            // SAFETY: `mask` is `slots.len() - 1` (a power of two): in bounds.
            let slot = unsafe { slots.get_unchecked((head & mask) as usize) };
            if slot.seq.load(Ordering::Acquire) != head + 1 {
                break;
            }
            // SAFETY: as in `take`: published (release, paired with our acquire), and we are
            // the only consumer (the lock).
            o.write(unsafe { slot.value.read() });
            slot.seq.store(head + len, Ordering::Release);
            n += 1;
        }
        self.c.head = start + n as u64;
        if n == out.len() {
            self.prefetch_next(self.c.head, n);
        }
        n
    }

    /// After a full batch (more tasks are likely published behind it), starts bringing in the
    /// lines of the next `n` slots from `head`, for reading: a producer on another CPU wrote
    /// them, and the worker reaches them only after it has run this batch, each slot's line
    /// then a miss it waits for (`Shared::next`'s loads were 6–11 % of the pipeline bench's
    /// samples, 2026-12-05 `pipe11`). A read hint leaves the producer's copy in place; a slot
    /// not yet written costs the producer an invalidation at its write, as the worker's own
    /// load would. Rings that do not prefetch ([`Ring::PREFETCHES`]) skip it.
    #[inline(always)]
    fn prefetch_next(&self, head: u64, n: usize) {
        #[cfg(not(sim_loom))]
        if self.ring.prefetch != crate::prefetch::Hint::Off {
            // Two slots to a line (`Slot`: 32 bytes, aligned).
            for k in (0..n as u64).step_by(2) {
                let slot = self.ring.slot(head + k);
                crate::prefetch::prefetch_for_read(std::ptr::from_ref(slot).cast());
            }
        }
        #[cfg(sim_loom)]
        let _ = (head, n);
    }

    /// Takes every task up to ticket `end` (a closed ring's [`Ring::close`]), waiting for
    /// the producers that claimed a ticket before the close to publish it (spilled tickets
    /// are in the list already), and hands each to `f`.
    pub(crate) fn take_published(&mut self, end: u64, mut f: impl FnMut(T)) {
        while self.c.head < end {
            match self.take() {
                Some(v) => f(v),
                // Claimed and about to be published (a few instructions, unless the producer
                // was preempted in between).
                None => {
                    #[cfg(not(sim_loom))]
                    std::thread::yield_now();
                    #[cfg(sim_loom)]
                    loom::thread::yield_now();
                }
            }
        }
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // `&mut self`: no producer is between its claim and its publication, so a slot holds
        // a value exactly when its sequence says "published" (`t + 1` for the slot's `t`).
        // A poisoned lock (a consumer that panicked holding it: the worker unwinding) still
        // holds a consistent `head`: a take stores it after the value is read out. Its drop
        // must not panic (the last reference may go in any thread, a C caller's included).
        let c = self.consumer.0.get_mut().unwrap_or_else(|e| e.into_inner());
        let mut head = c.head;
        let end = self.tail.load(Ordering::Relaxed) & COUNT;
        while head < end {
            let slot = self.slot(head);
            if slot.seq.load(Ordering::Relaxed) == head + 1 {
                // SAFETY: published and never taken; we are the last owner.
                drop(unsafe { slot.value.read() });
            }
            head += 1;
        }
    }
}

/// Tests' task (here and in `stream::batch`): numbered `.0`, it counts its drops in `.1`, so a
/// test sees every task dropped once, none leaked or dropped twice.
#[cfg(test)]
pub(crate) struct Counted(
    pub(crate) u32,
    pub(crate) std::sync::Arc<std::sync::atomic::AtomicUsize>,
);

#[cfg(test)]
impl Drop for Counted {
    fn drop(&mut self) {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[cfg(all(test, not(sim_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn fifo_full_spill_close_and_drop() {
        let drops = Arc::new(AtomicUsize::new(0));
        let c = |i| Counted(i, Arc::clone(&drops));
        let r = Ring::new(3);
        for i in 0..3 {
            assert!(matches!(r.push(c(i)), Push::Queued { wake: false }));
        }
        assert!(matches!(r.push(c(9)), Push::Full(_)));
        // The consumer's own thread gets a ticket past the capacity.
        let mut k = r.taker();
        assert!(matches!(
            k.push_own(c(3), |v| v),
            Push::Queued { wake: false }
        ));
        assert_eq!(r.issued(), 4);
        let order: Vec<u32> = (0..4).map(|_| k.take().unwrap().0).collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert!(k.take().is_none());
        drop(k);
        assert_eq!(drops.load(Ordering::SeqCst), 5);
        assert!(matches!(r.push(c(4)), Push::Queued { .. }));
        assert!(matches!(r.push(c(5)), Push::Queued { .. }));
        assert_eq!(r.close(), 6);
        assert!(matches!(r.push(c(6)), Push::Closed(_)));
        drop(r);
        // 4 and 5 were dropped with the ring, 6 with the refusal.
        assert_eq!(drops.load(Ordering::SeqCst), 8);
    }

    /// A consumer that panicked holding the lock (the worker unwinding, which
    /// `Shared::worker_unwound` cleans up after) poisons it: the ring is still dropped, with
    /// what it holds, without a panic of its own (which would come from whatever thread drops
    /// the stream last, a C caller's included). Until 2026-12-05 the drop panicked.
    #[test]
    fn a_ring_whose_consumer_panicked_holding_the_lock_drops_without_a_panic() {
        let drops = Arc::new(AtomicUsize::new(0));
        let r = Arc::new(Ring::new(4));
        assert!(matches!(
            r.push(Counted(1, Arc::clone(&drops))),
            Push::Queued { .. }
        ));
        let r2 = Arc::clone(&r);
        let poisoner = std::thread::spawn(move || {
            let _k = r2.taker();
            panic!("test: the consumer panics holding the lock");
        });
        assert!(poisoner.join().is_err());
        assert!(matches!(
            r.push(Counted(2, Arc::clone(&drops))),
            Push::Queued { .. }
        ));
        let r = Arc::into_inner(r).expect("the only reference");
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(r)));
        assert!(dropped.is_ok(), "the ring's drop panicked");
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_ring_of_one_holds_one() {
        let r = Ring::new(1);
        assert!(matches!(r.push(1), Push::Queued { .. }));
        assert!(matches!(r.push(2), Push::Full(2)));
        assert_eq!(r.taker().take(), Some(1));
        assert!(matches!(r.push(3), Push::Queued { .. }));
        assert!(matches!(r.push(4), Push::Full(4)));
        assert_eq!(r.taker().take(), Some(3));
        assert_eq!(r.taker().take(), None);
    }

    /// A simulator stream's slot fills half a cache line and never spans two (`Slot`): the
    /// slots' array is 32-byte aligned however `malloc` placed it. Before the alignment the
    /// slot was 8-aligned (and an array of them 16-aligned from `malloc`). `Job24` stands for
    /// the simulator's job (24 bytes at most, 8-aligned: `job.rs` asserts its size; this
    /// module does not import it, see `tests/module_graph.rs`).
    #[test]
    fn a_simulator_slot_is_half_a_cache_line_and_never_spans_two() {
        type Job24 = [u64; 3];
        assert_eq!(std::mem::size_of::<Slot<Job24>>(), 32);
        assert_eq!(std::mem::align_of::<Slot<Job24>>(), 32);
        for capacity in [2usize, 64, 1024] {
            let r: Ring<Job24> = Ring::new(capacity);
            for s in r.slots.iter() {
                let at = std::ptr::from_ref(s) as usize;
                assert_eq!(at / 64, (at + 31) / 64, "slot at {at:#x} spans two lines");
            }
        }
        // A smaller job's slot shares its line with one other at most.
        assert_eq!(std::mem::size_of::<Slot<()>>(), 32);
        // Only rings of jobs of the simulator's size prefetch (`Ring::PREFETCHES`).
        const { assert!(Ring::<Job24>::PREFETCHES && !Ring::<u64>::PREFETCHES) };
    }

    #[test]
    fn a_capacity_below_the_slots_holds_exactly_that_many_lap_after_lap() {
        for capacity in [3usize, 5, 6, 7, 9, 1000] {
            let r = Ring::new(capacity);
            assert_eq!(r.len, capacity.next_power_of_two() as u64);
            let mut next = 0u64;
            let mut expect = 0u64;
            // Fill, take a few, fill again: the ring never holds more than `capacity`, and
            // what comes out comes in order, over several laps of the slots.
            for round in 0..(3 * r.len as usize) {
                loop {
                    match r.push(next) {
                        Push::Queued { .. } => next += 1,
                        Push::Full(_) => break,
                        other => panic!("{other:?}"),
                    }
                }
                assert_eq!(next - expect, capacity as u64, "round {round}");
                let mut k = r.taker();
                for _ in 0..=(round % capacity) {
                    assert_eq!(k.take(), Some(expect));
                    expect += 1;
                }
            }
        }
    }

    /// The host's fast claim ([`Ring::claim_fast`]) keeps a capacity below the slots (a
    /// ring of 1 has 2 slots, of 3 has 4): it claims nothing once the ring holds `capacity`
    /// tasks, though the next slot is free, and claims again once one is taken, lap after lap.
    #[test]
    fn a_fast_claim_keeps_a_capacity_below_the_slots() {
        for capacity in [1usize, 3, 5] {
            let r = Ring::new(capacity);
            let (mut next, mut expect) = (0u64, 0u64);
            for round in 0..(3 * r.len) {
                while let Some(claim) = r.claim_fast() {
                    assert_eq!(claim.ticket(), next);
                    assert!(!claim.publish(next));
                    next += 1;
                }
                assert_eq!(
                    next - expect,
                    capacity as u64,
                    "capacity {capacity}, round {round}"
                );
                assert_eq!(r.taker().take(), Some(expect));
                expect += 1;
            }
        }
    }

    #[test]
    #[should_panic(expected = "too many slots")]
    fn a_capacity_past_the_largest_power_of_two_is_refused() {
        let _ = Ring::<u64>::new(usize::MAX);
    }

    #[test]
    fn producers_race_and_nothing_is_lost_or_reordered() {
        // 5: fewer tasks than slots (8), the claim also checks the ticket 5 back was taken.
        for capacity in [8, 5] {
            producers_race(capacity);
        }
    }

    fn producers_race(capacity: u64) {
        let r = Arc::new(Ring::new(capacity as usize));
        const N: u64 = 20_000;
        let producers: Vec<_> = (0..3u64)
            .map(|p| {
                let r = Arc::clone(&r);
                std::thread::spawn(move || {
                    for i in 0..N {
                        let mut v = (p, i);
                        loop {
                            match r.push(v) {
                                Push::Queued { .. } => break,
                                Push::Full(back) => {
                                    v = back;
                                    std::thread::yield_now();
                                }
                                other => panic!("{other:?}"),
                            }
                        }
                    }
                })
            })
            .collect();
        let mut next = [0u64; 3];
        let mut got = 0;
        while got < 3 * N {
            match r.taker().take() {
                Some((p, i)) => {
                    assert_eq!(next[p as usize], i, "producer {p} out of order");
                    next[p as usize] += 1;
                    got += 1;
                    // Every ticket claimed waited for the one `capacity` back to be taken.
                    assert!(r.issued() - got <= capacity, "more than {capacity} queued");
                }
                None => std::thread::yield_now(),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(r.issued(), 3 * N);
    }
}

/// Loom models: `RUSTFLAGS="--cfg sim_loom" cargo test -p acl-notify-sim --lib --release ring::`
/// (`cargo xtask test`'s loom step). Their own cfg, not `loom`: under `--cfg loom` the core's
/// atomics become loom's, which the rest of this crate is not written for. The consumer parks without a timeout, so a lost wake-up
/// is a deadlock loom reports.
#[cfg(all(test, sim_loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    /// The worker's loop in miniature, for one task: take what is published (as the worker
    /// does, `take_batch`), else spin once, else sleep by the handshake, until a task is
    /// taken. Returns it.
    fn take_next(r: &Ring<u32>) -> u32 {
        loop {
            let head = {
                let mut k = r.taker();
                let mut got = [MaybeUninit::uninit()];
                if k.take_batch(&mut got) == 1 {
                    // SAFETY: `take_batch` initialised the one it counted.
                    return unsafe { got[0].assume_init_read() };
                }
                k.head()
            };
            if r.prepare_sleep(head) {
                thread::park();
                r.awake();
            } else {
                // A ticket is claimed and about to be published (the worker spins here).
                thread::yield_now();
            }
        }
    }

    /// [`take_next`] `n` times. Returns what it took, in order.
    fn consume(r: &Ring<u32>, n: u64) -> Vec<u32> {
        (0..n).map(|_| take_next(r)).collect()
    }

    /// Pushes `v`, waiting (by yielding) while the ring is full; unparks `worker` if asked.
    fn produce(r: &Ring<u32>, worker: &thread::Thread, mut v: u32) {
        loop {
            match r.push(v) {
                Push::Queued { wake } => {
                    if wake {
                        worker.unpark();
                    }
                    return;
                }
                Push::Full(back) => {
                    v = back;
                    thread::yield_now();
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn no_task_lost_or_reordered_and_no_lost_wake_up() {
        two_producers(2, produce);
    }

    /// Queues `v` as the host's record or wait does (`Sim::enqueue_pair`): a claim through
    /// [`Ring::claim_fast`] published at once, or, when that claims nothing (a full ring,
    /// another producer's claim first), the usual push.
    fn produce_fast(r: &Ring<u32>, worker: &thread::Thread, v: u32) {
        match r.claim_fast() {
            Some(claim) => {
                if claim.publish(v) {
                    worker.unpark();
                }
            }
            None => produce(r, worker, v),
        }
    }

    /// A host queuing two tasks through `host` races a second producer (one task through
    /// `push`) and the worker taking through `take_batch` and sleeping by the handshake, in a
    /// ring of `capacity` tasks: every task is taken once, the host's in order, and a lost
    /// wake-up (a claim that cleared *sleeping* and did not say so) is a deadlock loom
    /// reports.
    fn two_producers(capacity: usize, host: fn(&Ring<u32>, &thread::Thread, u32)) {
        loom::model(move || {
            let r = Arc::new(Ring::new(capacity));
            let (tx, rx) = loom::sync::mpsc::channel();
            let c = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    let got = consume(&r, 3);
                    tx.send(got).unwrap();
                })
            };
            let w = c.thread().clone();
            let p = {
                let (r, w) = (Arc::clone(&r), w.clone());
                thread::spawn(move || produce(&r, &w, 10))
            };
            host(&r, &w, 1);
            host(&r, &w, 2);
            p.join().unwrap();
            c.join().unwrap();
            each_once_the_host_s_in_order(&rx.recv().unwrap());
        });
    }

    /// What the worker took: the host's 1 and 2 and the other producer's 10, each once, the
    /// host's in order.
    fn each_once_the_host_s_in_order(got: &[u32]) {
        let mut sorted = got.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, [1, 2, 10]);
        let pos = |x| got.iter().position(|&v| v == x).unwrap();
        assert!(pos(1) < pos(2), "{got:?}");
    }

    /// The host claiming through `claim_fast` ([`produce_fast`]) in [`two_producers`].
    #[test]
    fn a_fast_claim_loses_no_task_and_no_wake_up() {
        two_producers(2, produce_fast);
    }

    /// The host claiming through `claim_fast` against a worker that has already said it
    /// sleeps (this thread, which parks only then), racing the second producer: the case of
    /// a lost wake-up, which the model above reaches only past a preemption bound of 2 (a
    /// fast claim that did not report *sleeping* passed it at 2 and failed it at 3; it fails
    /// this one at 2).
    #[test]
    fn a_fast_claim_wakes_a_sleeping_worker() {
        loom::model(|| {
            let r = Arc::new(Ring::new(2));
            assert!(r.prepare_sleep(0), "nothing is issued yet");
            let me = thread::current();
            let host = {
                let (r, w) = (Arc::clone(&r), me.clone());
                thread::spawn(move || {
                    produce_fast(&r, &w, 1);
                    produce_fast(&r, &w, 2);
                })
            };
            let p = {
                let (r, w) = (Arc::clone(&r), me.clone());
                thread::spawn(move || produce(&r, &w, 10))
            };
            thread::park();
            r.awake();
            let got = consume(&r, 3);
            host.join().unwrap();
            p.join().unwrap();
            each_once_the_host_s_in_order(&got);
        });
    }

    /// A parked stream's turn away from its thread (`stream::runner`): a runner takes what
    /// is published, then hands the turn home, either asleep in the same step as the tail
    /// word's *away* bit clears (`sleep_away`: the next claim wakes the thread) or awake
    /// (`come_home`, then an unpark), while a producer queues. The thread waits for the
    /// bit without a timeout, then runs as a worker: every task is taken once, in order, and
    /// a lost wake-up is a deadlock loom reports. A last push after everything (the
    /// sentinel, 9) is what the thread waits for.
    fn away_and_home(asleep: bool) {
        loom::model(move || {
            let r = Arc::new(Ring::new(2));
            r.go_away();
            let (tx, rx) = loom::sync::mpsc::channel();
            let worker = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    while r.is_away() {
                        thread::park();
                    }
                    r.awake();
                    let mut got = Vec::new();
                    loop {
                        let v = take_next(&r);
                        if v == 9 {
                            break;
                        }
                        got.push(v);
                    }
                    tx.send(got).unwrap();
                })
            };
            let w = worker.thread().clone();
            let producer = {
                let (r, w) = (Arc::clone(&r), w.clone());
                thread::spawn(move || {
                    produce(&r, &w, 1);
                    produce(&r, &w, 2);
                })
            };
            // The runner: takes what is there, then hands the turn home.
            let mut ran = Vec::new();
            loop {
                let head = {
                    let mut k = r.taker();
                    if let Some(v) = k.take() {
                        ran.push(v);
                        continue;
                    }
                    k.head()
                };
                if !asleep {
                    r.come_home();
                    w.unpark();
                    break;
                }
                if r.sleep_away(head) {
                    break;
                }
                // A ticket is claimed, not yet published.
                thread::yield_now();
            }
            producer.join().unwrap();
            produce(&r, &w, 9);
            worker.join().unwrap();
            let mut all = ran;
            all.extend(rx.recv().unwrap());
            assert_eq!(all, [1, 2]);
        });
    }

    #[test]
    fn a_turn_home_asleep_loses_no_wake_up() {
        away_and_home(true);
    }

    #[test]
    fn a_turn_home_awake_loses_no_wake_up() {
        away_and_home(false);
    }

    #[test]
    fn a_close_loses_no_claimed_ticket() {
        loom::model(|| {
            let r = Arc::new(Ring::new(2));
            let p = {
                let r = Arc::clone(&r);
                thread::spawn(move || matches!(r.push(7u32), Push::Queued { .. }))
            };
            let end = r.close();
            let mut got = Vec::new();
            r.taker().take_published(end, |v| got.push(v));
            let queued = p.join().unwrap();
            // Queued exactly when it got a ticket before the close, and then it was taken.
            assert_eq!(queued, end == 1);
            assert_eq!(got, if queued { vec![7] } else { vec![] });
        });
    }

    #[test]
    fn a_spilled_ticket_keeps_its_place() {
        loom::model(|| {
            let r = Arc::new(Ring::new(1));
            assert!(matches!(r.push(1u32), Push::Queued { .. }));
            let p = {
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    loop {
                        match r.push(3u32) {
                            Push::Queued { .. } => return,
                            Push::Full(_) => thread::yield_now(),
                            other => panic!("{other:?}"),
                        }
                    }
                })
            };
            // The consumer's own push past the capacity, racing the producer's compare-and-swap
            // for the next ticket (which the producer cannot get while the ring is full).
            {
                let mut k = r.taker();
                assert!(matches!(k.push_own(2u32, |v| v), Push::Queued { .. }));
            }
            let mut got = Vec::new();
            while got.len() < 3 {
                match r.taker().take() {
                    Some(v) => got.push(v),
                    None => thread::yield_now(),
                }
            }
            p.join().unwrap();
            assert_eq!(got, [1, 2, 3]);
        });
    }
}

//! Notifies on the device side (SPEC §1): the [`NotifySync`] payload of a [`Slot`] — the
//! binary flag that records set and waits consume, a FIFO of waiters with timeouts, and the
//! notify's record diagnostics — and the notify operations on a slot ([`NotifySlot`]). The
//! slot's lifecycle (owner, holders, generation, export, whitelist) is the one every kind
//! shares ([`crate::slot`]); blocking and waking go through the [`Waiter`] trait
//! ([`crate::waiter`]). The waiter queue's moves are in `queue`.
//!
//! # Semantics (SPEC §1)
//!
//! - The flag is binary: a [`record`](NotifySync::record) sets it, a wait consumes (resets) it.
//!   Records that land while the flag is already set collapse into one.
//! - Waiters are served FIFO, one record each, through ticket counters: a waiter takes ticket
//!   `t` (`tail`), waits until `head == t`, then waits for the flag, consumes it and moves `head`
//!   on to the next live ticket.
//! - A waiter that times out (or is cancelled) gives up its ticket without consuming anything,
//!   so a record that arrives exactly at the timeout is either consumed by that waiter (which
//!   then reports success) or left in the flag for the next one — never lost, never consumed
//!   twice. Giving up is recorded in a per-slot ring of [`RING`] entries so that the waiter
//!   never blocks the ones queued behind it: whoever moves `head` skips cancelled tickets.
//!
//! # Limits
//!
//! - At most [`RING`] (16) waiters per notify hold a ticket at once. A further waiter does not
//!   fail: it sleeps (with its own timeout) until a ticket frees up, then joins the queue.
//!   Waiters past the bound are therefore served after the ones already queued, but in no
//!   particular order among themselves.
//! - At most [`MAX_PROCS`] (64) processes can hold references to one table (see
//!   [`crate::slot`]); the references of a dead process are reclaimable: the survivors clear
//!   its bit and cancel its tickets ([`NotifySlot::reclaim_proc`]).
//!
//! # Concurrency of the notify's operations
//!
//! Those of the lifecycle (claim, export, join, leave, repair) are listed in [`crate::slot`].
//! Of the payload's:
//!
//! - [`NotifySync::record`] is one swap; [`NotifySync::reset`] (batch reset) and
//!   [`NotifySync::try_consume`] one CAS each: a record racing them lands before (and is reset
//!   or consumed) or after (and stays); never half.
//! - The waiter queue (tickets, ring, head) moves by CAS only; see its methods.
//! - The diagnostics of [`record`](NotifySlot::record) (last recorder and time) are plain
//!   stores: the last of two racing records winning either field is as true as the other.
//!
//! # Trust
//!
//! Other processes write this memory, so every value read from it is checked before use
//! (ring indices are reduced modulo [`RING`], states and process indices are validated,
//! counters that violate `head <= tail <= head + RING` are reported as
//! [`TableError::Corrupt`]). No loop runs unboundedly on values another process controls:
//! waits sleep through [`Waiter::wait`] in chunks of at most [`CHUNK`] and re-check their
//! deadline and cancellation each time.

use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};

use crate::flags::CreateFlags;
use crate::waiter::{Clock, Look, wait_loop};

mod queue;
mod resume;
#[cfg(test)]
mod share_tests;
#[cfg(test)]
pub(crate) mod tests;

use queue::{ST_TAKEN, entry, entry_proc, round16};
pub use resume::{Begin, Ticket};

// The shared machinery, named here too: platforms and firmware know it as the table's.
pub use crate::slot::{ExportState, Leave, MAX_PROCS, Owner, Slot, SlotState};
pub use crate::waiter::{
    CHUNK, MAX_SPIN, PURE_SPIN, SPIN, TableError, WaitArgs, WaitOutcome, Waiter,
};

/// Waiters per notify that can hold a ticket at once (see the module docs for what happens
/// past it).
pub const RING: usize = 16;
/// Chunks in a row that a queued waiter may find the head stuck on an entry no live process
/// holds before it reports [`TableError::Corrupt`] (each chunk it tries to repair the head:
/// see `repair_stuck_head`).
pub const STUCK_LIMIT: u32 = 20;
/// Spin turns between clock reads. Under loom every turn is a scheduling point of the model,
/// and the turns are all alike, so the model checks the clock every other turn.
const SPIN_CHECK: u32 = if crate::sync::MODEL { 2 } else { 32 };
/// Turns a waiter that finds no record and nobody queued watches the flag before it queues.
/// About a microsecond: a record from a stream that is busy with its own previous task lands
/// within a few hundred nanoseconds, and taking it here costs no ticket (the queue's four
/// read-modify-writes). Under loom one turn is the same state space as many.
const PRE_SPIN: u32 = if crate::sync::MODEL { 1 } else { 48 };

/// Flag values. `FLAG_CLEAR_SLEEPING` is "clear, and the head waiter sleeps on the word", so a
/// record only issues a wake-up system call when someone sleeps; `FLAG_CLEAR_SLEEPING_PRIVATE`
/// the same with the sleeper in [`Waiter::wait_private`] (the notify not shared: see
/// [`NotifySync::share`]), so the record wakes it with [`Waiter::wake_private`].
const FLAG_CLEAR: u32 = 0;
const FLAG_SET: u32 = 1;
const FLAG_CLEAR_SLEEPING: u32 = 2;
const FLAG_CLEAR_SLEEPING_PRIVATE: u32 = 3;
/// [`NotifySync::turns`]'s bit 0: the notify is shared ([`NotifySync::share`]).
const TURNS_SHARED: u32 = 1;
/// What [`NotifySync::turns`]'s count (bits 1–31) moves on by: it never touches bit 0.
const TURN: u32 = 2;
/// A notify's payload: the flag and the FIFO of waiters (on the first cache line, with the
/// incarnation a record or wait checks), then the record diagnostics. All-zero bytes are an
/// idle notify with the flag clear.
#[repr(C)]
pub struct NotifySync {
    /// 0 clear, 1 set, 2 clear with the head waiter asleep on it (the futex word).
    flag: AtomicU32,
    /// The ticket being served.
    head: AtomicU32,
    /// The next ticket to hand out.
    tail: AtomicU32,
    /// The owning slot's generation while that incarnation lives (written at claim, moved on
    /// at retire): on the flag's cache line, so that a record or wait can check its handle
    /// still names this incarnation without touching the slot's other lines
    /// ([`NotifySlot::is_current`]).
    incarnation: AtomicU32,
    /// Per-ticket state, indexed by `ticket % RING`.
    ring: [AtomicU32; RING],
    last_record_pid: AtomicI32,
    /// Records merged into an already-set flag since the flag was last found clear by a
    /// record (so: since the last wait took a record), and in the notify's life.
    merged_run: AtomicU32,
    last_record_ns: AtomicU64,
    merged_total: AtomicU32,
    /// Records begun on this incarnation while a process traced them (see
    /// [`trace_record_seq`](Slot::trace_record_seq)); untouched when nobody traces.
    trace_seq: AtomicU32,
    /// When the last merge happened ([`Waiter::stamp_ns`] clock).
    last_merge_ns: AtomicU64,
    /// Bit 0 ([`TURNS_SHARED`]): 0 while no other process can reach this incarnation (it was
    /// never exported: only its owner's process holds it), so the head waiter sleeps
    /// privately; 1 from the export on ([`share`](Self::share)). Bits 1–31: a count moved on
    /// (by [`TURN`]) whenever the head moves on with waiters queued behind it, and by every
    /// [`wake_all`](Self::wake_all): the futex word of the waiters queued behind the head (and
    /// of those waiting for a place in a full ring). They read it before they look at the
    /// head and at their cancellation, so that a head moved on or a stop after those looks
    /// ends their sleep at once; the head itself, which they used to sleep on, a stop cannot
    /// move. Read only by waiters about to sleep, so it lies after the diagnostics, in what
    /// was the slot's padding: the flag, queue and ring entries keep their places on the
    /// first line.
    turns: AtomicU32,
    /// The last batch reset ([`Slot::reset`]): bits 0–30 its time in ms of the
    /// [`Waiter::stamp_ns`] clock modulo 2³¹ (a reading of 0 kept as 1), bit 31 set if it
    /// or an earlier reset after the same record did, cleared a pending record; 0 while none
    /// was made on this incarnation. Diagnostics only (what a wait that timed out reports),
    /// in what was the slot's last padding.
    last_reset: AtomicU32,
}

/// One notify: a [`Slot`] whose payload is the flag and waiter queue.
///
/// Size: 192 bytes, aligned to a 64-byte cache line (checked by a test): 192 bytes of fields
/// (the last 4 were alignment until the batch reset's stamp took them), so that no two
/// notifies share a line — otherwise a record of one notify would pull the line holding its
/// neighbour's flag away from that neighbour's waiter. A table of 65535
/// notifies on 8 devices is 96 MiB of address space, of which only the pages of used ids are
/// ever touched.
pub type NotifySlot = Slot<NotifySync>;

const _: () = assert!(core::mem::size_of::<NotifySlot>() == 192);

impl NotifySync {
    /// An idle notify (all zero).
    pub const fn new() -> Self {
        NotifySync {
            flag: AtomicU32::new(0),
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            incarnation: AtomicU32::new(0),
            ring: [const { AtomicU32::new(0) }; RING],
            last_record_pid: AtomicI32::new(0),
            merged_run: AtomicU32::new(0),
            last_record_ns: AtomicU64::new(0),
            merged_total: AtomicU32::new(0),
            trace_seq: AtomicU32::new(0),
            last_merge_ns: AtomicU64::new(0),
            turns: AtomicU32::new(0),
            last_reset: AtomicU32::new(0),
        }
    }

    /// Whether the flag is set (a record is pending).
    #[inline]
    pub fn is_set(&self) -> bool {
        self.flag.load(SeqCst) == FLAG_SET
    }

    /// How many tickets are outstanding (queued or being served waiters), clamped to [`RING`];
    /// a lone place (`queue`'s module docs) counts as one.
    pub fn waiters(&self) -> u32 {
        let h = self.head.load(SeqCst);
        let t = self.tail.load(SeqCst);
        match t.wrapping_sub(h) {
            0 => u32::from(!self.head_entry_free(h)),
            n => n.min(RING as u32),
        }
    }

    /// Whether ticket `h`'s entry is free in its round: with `head == tail == h`, nobody
    /// holds a place (neither a lone one nor one being taken).
    #[inline]
    fn head_entry_free(&self, h: u32) -> bool {
        self.ring[h as usize % RING].load(SeqCst) == entry(round16(h), queue::ST_FREE, 0)
    }

    /// The process-table slots of the waiters holding the outstanding tickets, in queue
    /// order (at most [`RING`]; tickets given up are skipped). A snapshot for inspection:
    /// under concurrency it may be stale.
    pub fn ticket_holders(&self) -> impl Iterator<Item = u32> + '_ {
        let h = self.head.load(SeqCst);
        let n = self.waiters();
        (0..n).filter_map(move |k| {
            let t = h.wrapping_add(k);
            let e = self.ring[t as usize % RING].load(SeqCst);
            (e == entry(round16(t), ST_TAKEN, entry_proc(e))
                || e == entry(round16(t), queue::ST_SOLO, entry_proc(e)))
            .then_some(entry_proc(e))
        })
    }

    /// Record: sets the flag (collapsing with a pending record) and wakes the head waiter if
    /// it sleeps.
    #[inline]
    /// Returns whether the flag was already set: this record merged into the pending one
    /// (SPEC §1: two records before a wait collapse into one).
    pub fn record<W: Waiter>(&self, w: &W) -> bool {
        match self.flag.swap(FLAG_SET, SeqCst) {
            FLAG_CLEAR_SLEEPING => {
                w.wake(&self.flag, u32::MAX);
                false
            }
            // Only a thread of the owner's process marks a private sleep, and only while no
            // other process can record (see `share`): this recorder is of that process.
            FLAG_CLEAR_SLEEPING_PRIVATE => {
                w.wake_private(&self.flag, u32::MAX);
                false
            }
            prev => prev == FLAG_SET,
        }
    }

    /// Makes the notify reachable from other processes' wakes: called by its owner's process
    /// before its export is published (so before any other process can import, and so
    /// record). From then on the head waiter sleeps on the shared futex; one asleep privately
    /// now is moved: the flag is re-marked shared and the owner's private sleepers woken (they
    /// look again and sleep shared). Sticky for the incarnation (an importer may hold it long
    /// after the export is withdrawn).
    ///
    /// Against a waiter arming a private sleep at the same time: the waiter marks the flag,
    /// then reads `turns` with a read-modify-write; this sets its shared bit with one, then
    /// tries to move the mark. The two read-modify-writes of `turns` are ordered: if the waiter's comes
    /// first, this one reads from it and so sees the waiter's mark (release/acquire is
    /// enough, no store-load ordering of two words needed: loom checks it so); if this one
    /// comes first, the waiter sees `shared` and does not sleep privately.
    pub fn share<W: Waiter>(&self, w: &W) {
        self.turns.fetch_or(TURNS_SHARED, SeqCst);
        if self
            .flag
            .compare_exchange(
                FLAG_CLEAR_SLEEPING_PRIVATE,
                FLAG_CLEAR_SLEEPING,
                SeqCst,
                SeqCst,
            )
            .is_ok()
        {
            w.wake_private(&self.flag, u32::MAX);
        }
    }

    /// Whether [`share`](Self::share) was called on this incarnation.
    pub fn is_shared(&self) -> bool {
        self.turns.load(SeqCst) & TURNS_SHARED != 0
    }

    /// Resets a pending record (batch reset); a no-op when clear. `true` if it cleared one.
    pub fn reset(&self) -> bool {
        self.flag
            .compare_exchange(FLAG_SET, FLAG_CLEAR, SeqCst, SeqCst)
            .is_ok()
    }

    /// Consumes a pending record if no waiter is queued: `true` if one was consumed. Never
    /// blocks, never takes a record a queued waiter is entitled to (a lone place, which
    /// leaves `tail` at the head, marks the head's entry: so that is read too).
    #[inline]
    pub fn try_consume(&self) -> bool {
        let h = self.head.load(SeqCst);
        h == self.tail.load(SeqCst)
            && self.head_entry_free(h)
            && self
                .flag
                .compare_exchange(FLAG_SET, FLAG_CLEAR, SeqCst, SeqCst)
                .is_ok()
    }

    /// Wakes every thread sleeping on this notify (they re-check their deadline and cancel
    /// condition); used to cancel waits promptly (a stream's stop, a destroy).
    ///
    /// Moves the words the waits sleep on first, so that a wait between its last look at its
    /// cancellation and its sleep — which a wake-up alone misses: the word still holds the
    /// value the wait expects — does not sleep at all, and sees the cancellation at once
    /// instead of a [`CHUNK`] later. The head waiter's mark on the flag is taken off by a
    /// read-modify-write whatever the flag holds (a mark made after it reads from it, and the
    /// waiter, which looks at its cancellation again once marked, then sees what was set
    /// before this call: `wait_held`); the queued waiters' `turns` moves on.
    /// Loom found the gap (`core/tests/loom.rs`, `a_stopped_wait_is_woken_at_once` and `a_stopped_queued_wait_is_woken_at_once`: a stop
    /// between a wait's look and its sleep left it asleep for good under the model's futex),
    /// as it did for count notifies (`CntSync::wake_all`). Waits not cancelled look again and
    /// sleep again. A record's path is unchanged: it finds the flag unmarked and wakes nobody,
    /// the woken head waiter then finds its record.
    pub fn wake_all<W: Waiter>(&self, w: &W) {
        let _ = self.flag.fetch_update(SeqCst, SeqCst, |v| {
            Some(match v {
                FLAG_CLEAR_SLEEPING | FLAG_CLEAR_SLEEPING_PRIVATE => FLAG_CLEAR,
                v => v,
            })
        });
        self.turns.fetch_add(TURN, SeqCst);
        w.wake(&self.flag, u32::MAX);
        w.wake_private(&self.flag, u32::MAX);
        w.wake(&self.turns, u32::MAX);
    }

    /// Waits for a record and consumes it, FIFO with the other waiters.
    ///
    /// Returns [`WaitOutcome::Consumed`] if a record was consumed (also when it arrived exactly
    /// at the deadline and this waiter was first in line), else `TimedOut`/`Cancelled`
    /// having consumed nothing. `Err` if the memory is corrupt or `args.proc` out of range.
    pub fn wait_and_reset<W: Waiter>(
        &self,
        w: &W,
        args: WaitArgs<'_>,
    ) -> Result<WaitOutcome, TableError> {
        if args.proc >= MAX_PROCS {
            return Err(TableError::BadProc);
        }
        // Fast path: a record is pending and nobody is queued, so it is ours — no ticket, no
        // clock. A waiter that queues between the check and the consume arrived after us.
        if self.try_consume() {
            return Ok(WaitOutcome::Consumed);
        }
        // Nobody queued and no record yet: watch the flag briefly before queuing. A record
        // taken here goes through `try_consume`, which never takes one while a waiter is
        // queued, so a waiter that queued meanwhile keeps its turn; once one has, we queue
        // behind it.
        for _ in 0..PRE_SPIN {
            core::hint::spin_loop();
            if self.flag.load(SeqCst) == FLAG_SET {
                if self.try_consume() {
                    return Ok(WaitOutcome::Consumed);
                }
                break;
            }
        }
        let clock = Clock::start(w, args.timeout);
        let t = match self.acquire(w, &clock, &args)? {
            Ok(t) => t,
            Err(outcome) => return Ok(outcome),
        };
        self.wait_held(w, &clock, &args, t)
    }

    /// The rest of a wait that holds ticket `t` (taken for process `args.proc`): waits for
    /// its turn, then for the record, consumes it and hands the head on; or gives the ticket
    /// up at the deadline or on cancellation.
    fn wait_held<W: Waiter>(
        &self,
        w: &W,
        clock: &Clock<'_, W>,
        args: &WaitArgs<'_>,
        t: u32,
    ) -> Result<WaitOutcome, TableError> {
        // Wait for our turn, asleep on `turns`, read before the head (see `turns`).
        let mut last_head = None;
        let mut stuck = 0u32;
        let seen_head = core::cell::Cell::new(t);
        let turn = wait_loop(
            w,
            clock,
            args.cancel,
            || {
                let turns = self.turns.load(SeqCst);
                let h = self.head.load(SeqCst);
                seen_head.set(h);
                if h == t {
                    Look::Done(Ok(None))
                } else if t.wrapping_sub(h) > RING as u32 {
                    // `head` passed our ticket: only possible if someone cancelled it (they
                    // thought we were dead) or the memory is corrupt.
                    Look::Done(Err(TableError::Corrupt))
                } else {
                    Look::Sleep(&self.turns, turns)
                }
            },
            |outcome| {
                self.cancel_ticket(w, t, entry(round16(t), ST_TAKEN, args.proc));
                Ok(Some(outcome))
            },
            |_| {
                let h = seen_head.get();
                if last_head == Some(h) {
                    // A whole chunk without progress: is the head ticket's process dead, or
                    // did a process die half-way through handing the head on?
                    self.repair_stuck_head(w, h, &mut stuck)
                        .map_err(|e| Some(Err(e)))?;
                } else {
                    stuck = 0;
                }
                last_head = Some(h);
                Ok(())
            },
        );
        if let Some(outcome) = turn? {
            return Ok(outcome);
        }
        // At the head: spin briefly, then sleep on the flag. The spin's clock starts at its
        // first check (`SPIN_CHECK` turns in), so a record that lands at once costs no clock
        // read; the flag is read before each CAS so that spinning does not take the line
        // exclusively. Past `PURE_SPIN` each check also offers the CPU to the platform
        // ([`Waiter::relax`]), in case the recorder we wait for is queued behind us on it.
        let limit = w.spin_limit().min(MAX_SPIN).as_nanos() as u64;
        let mut spin = None;
        let mut i = 0u32;
        loop {
            if self.flag.load(SeqCst) == FLAG_SET && self.consume() {
                self.finish(w, t, args.proc);
                return Ok(WaitOutcome::Consumed);
            }
            i = i.wrapping_add(1);
            if i.is_multiple_of(SPIN_CHECK) {
                let now = w.now_ns();
                let start = *spin.get_or_insert(now);
                let spun = now.saturating_sub(start);
                if spun >= limit {
                    break;
                }
                if spun >= PURE_SPIN.as_nanos() as u64 {
                    w.relax();
                    if !w.keep_spinning() {
                        break;
                    }
                }
            }
            core::hint::spin_loop();
        }
        // Then sleep on the flag, marked so that a record wakes us.
        Ok(wait_loop(
            w,
            clock,
            args.cancel,
            || {
                if self.flag.load(SeqCst) != FLAG_SET {
                    if self.is_shared() {
                        Look::Sleep(&self.flag, FLAG_CLEAR_SLEEPING)
                    } else {
                        Look::SleepPrivate(&self.flag, FLAG_CLEAR_SLEEPING_PRIVATE)
                    }
                } else if self.consume() {
                    self.finish(w, t, args.proc);
                    Look::Done(WaitOutcome::Consumed)
                } else {
                    Look::Again
                }
            },
            |outcome| {
                // Last chance: a record that landed exactly now is ours (we are first in
                // line); either way the ticket is handed on.
                let outcome = if self.consume() {
                    WaitOutcome::Consumed
                } else {
                    outcome
                };
                self.finish(w, t, args.proc);
                outcome
            },
            |mark| {
                match self.flag.load(SeqCst) {
                    v if v == mark => {}
                    FLAG_SET => return Err(None),
                    v => {
                        self.flag
                            .compare_exchange(v, mark, SeqCst, SeqCst)
                            .map_err(|_| None)?;
                    }
                }
                // Marked private: if the notify became shared meanwhile (`share` may have
                // missed the mark), look again and sleep shared. A read-modify-write (of
                // nothing), so that it and `share`'s are ordered on this word alone: the
                // later of the two sees the other's (see `share`).
                if mark == FLAG_CLEAR_SLEEPING_PRIVATE
                    && self.turns.fetch_or(0, SeqCst) & TURNS_SHARED != 0
                {
                    return Err(None);
                }
                // Marked: a stop from now on takes the mark off (`wake_all`), which ends the
                // sleep at once; one that came since the look at the cancellation found no
                // mark to take off and nobody asleep to wake, and is seen here (the mark read
                // from its read-modify-write of the flag). Look again: the stop ends the wait.
                if (args.cancel)() {
                    return Err(None);
                }
                Ok(())
            },
        ))
    }

    fn consume(&self) -> bool {
        self.flag
            .compare_exchange(FLAG_SET, FLAG_CLEAR, SeqCst, SeqCst)
            .is_ok()
    }
}

impl crate::slot::Payload for NotifySync {
    const NEW: Self = NotifySync::new();

    /// A fresh notify: flag clear, no diagnostics; then its incarnation, which makes handles
    /// of it current. Tickets are left alone: they are consistent across reuse (a freed
    /// notify has no waiters).
    fn claimed(&self, generation: u32) {
        self.flag.store(FLAG_CLEAR, SeqCst);
        self.turns.store(0, SeqCst);
        self.last_record_pid.store(0, SeqCst);
        self.last_record_ns.store(0, SeqCst);
        self.merged_run.store(0, SeqCst);
        self.merged_total.store(0, SeqCst);
        self.last_merge_ns.store(0, SeqCst);
        self.last_reset.store(0, SeqCst);
        self.trace_seq.store(0, SeqCst);
        self.incarnation.store(generation, SeqCst);
    }

    /// Handles of the old incarnation stop being current; a pending record is dropped.
    fn retired(&self, next: u32) {
        self.incarnation.store(next, SeqCst);
        self.flag.store(FLAG_CLEAR, SeqCst);
    }

    fn wake_all<W: Waiter>(&self, w: &W) {
        NotifySync::wake_all(self, w);
    }
}

impl Default for NotifySync {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for NotifySync {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NotifySync")
            .field("flag", &self.flag.load(SeqCst))
            .field("head", &self.head.load(SeqCst))
            .field("tail", &self.tail.load(SeqCst))
            .field("turns", &self.turns.load(SeqCst))
            .finish_non_exhaustive()
    }
}

/// Records of one notify that merged into an already-set flag ([`NotifySlot::merged_records`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MergedRecords {
    /// Since the last record that found the flag clear (each wait that took a record ends
    /// the run): `n` here means `n + 1` records became one.
    pub since_wait: u32,
    /// In the notify's life.
    pub total: u32,
    /// When the last merge happened ([`Waiter::stamp_ns`] clock; 0: never).
    pub last_ns: u64,
}

/// Bits of [`NotifySync`]'s reset stamp: the time in ms, and whether it cleared a record.
const RESET_MS_MASK: u32 = 0x7FFF_FFFF;
const RESET_CLEARED: u32 = 0x8000_0000;

/// A notify's last batch reset ([`Slot::last_reset`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastReset {
    /// How long ago (ms resolution).
    pub ago_ns: u64,
    /// Whether it, or an earlier reset after the same last record, cleared a pending record
    /// (else the notify was clear: a wait had taken the record).
    pub cleared: bool,
    /// Whether it came after the notify's last record (or the notify was never recorded):
    /// a wait queued since gets only a record made after it.
    pub after_record: bool,
}

impl Slot<NotifySync> {
    /// Whether incarnation `generation` is still this slot's: true from its
    /// [`claim`](Self::claim) until it is retired. One load on the flag's cache line, which
    /// a record or wait touches anyway (so cheaper on those paths than
    /// [`is_live`](Self::is_live)). A corrupting write can make it false for a live
    /// incarnation; callers treat that as the notify no longer being theirs.
    #[inline]
    pub fn is_current(&self, generation: u32) -> bool {
        self.sync.incarnation.load(SeqCst) == generation
    }

    /// The create flags (unknown bits dropped).
    pub fn create_flags(&self) -> CreateFlags {
        CreateFlags::from_bits_truncate(u64::from(self.flag_bits()))
    }

    /// A batch reset of this notify: clears a pending record ([`NotifySync::reset`], one CAS:
    /// a record racing it lands before it, reset, or after it, kept) and notes when (on the
    /// clock of the records' stamps, [`Waiter::stamp_ns`], so that the two compare), and
    /// whether it cleared one, for [`last_reset`](Self::last_reset).
    pub fn reset<W: Waiter>(&self, w: &W) {
        let mut cleared = self.sync.reset();
        let now = w.stamp_ns();
        // An earlier reset since the last record cleared it: that stays said (looked at only
        // when the earlier stamp says it cleared one: one load otherwise).
        if !cleared && self.sync.last_reset.load(Relaxed) & RESET_CLEARED != 0 {
            cleared = self
                .last_reset(now)
                .is_some_and(|r| r.cleared && r.after_record);
        }
        let ms = ((now / 1_000_000) as u32 & RESET_MS_MASK).max(1);
        let stamp = ms | if cleared { RESET_CLEARED } else { 0 };
        // Diagnostics only: no fence (a SeqCst store is a locked exchange on x86).
        self.sync.last_reset.store(stamp, Relaxed);
    }

    /// The last batch reset of this incarnation, if any: how long before `now_ns` (the
    /// [`Waiter::now_ns`] clock; to the ms and the stamps' resolution, modulo 2³¹ ms, about
    /// 24 days), whether it cleared a pending record, and whether it came after the last
    /// record (see [`LastReset::after_record`]).
    pub fn last_reset(&self, now_ns: u64) -> Option<LastReset> {
        let v = self.sync.last_reset.load(SeqCst);
        if v == 0 {
            return None;
        }
        let at = v & RESET_MS_MASK;
        let ms = |ns: u64| (ns / 1_000_000) as u32 & RESET_MS_MASK;
        let since = |from: u32, to: u32| to.wrapping_sub(from) & RESET_MS_MASK;
        let ago_ms = since(at, ms(now_ns));
        let (rpid, rns) = self.last_record();
        // On one clock, a record before the reset has a stamp no later than the reset's (one
        // in the same ms after it reads as before: it would have been taken or be pending).
        let after_record = rpid == 0 || since(ms(rns), at) < RESET_MS_MASK / 2;
        Some(LastReset {
            ago_ns: u64::from(ago_ms) * 1_000_000,
            cleared: v & RESET_CLEARED != 0,
            after_record,
        })
    }

    /// The last process that recorded and when ([`Waiter::now_ns`] clock); pid 0 = never.
    pub fn last_record(&self) -> (i32, u64) {
        (
            self.sync.last_record_pid.load(SeqCst),
            self.sync.last_record_ns.load(SeqCst),
        )
    }

    /// Merged records ([`NotifySync::record`]): how many records landed on an already-set
    /// flag since the last record that found it clear (each wait that took a record in
    /// between ends such a run), how many in the notify's life, and when the last one did
    /// ([`Waiter::stamp_ns`] clock; 0: never).
    pub fn merged_records(&self) -> MergedRecords {
        MergedRecords {
            since_wait: self.sync.merged_run.load(SeqCst),
            total: self.sync.merged_total.load(SeqCst),
            last_ns: self.sync.last_merge_ns.load(SeqCst),
        }
    }

    /// Numbers a traced record of this notify (1, 2, …, per incarnation): called just before
    /// the record, so the number a wait reads back with [`trace_seq`](Self::trace_seq) right
    /// after it took a record counts the record that released it. Only a process that writes
    /// a timeline calls it (the simulator's `ACL_NOTIFY_SIM_TRACE`).
    pub fn trace_record_seq(&self) -> u32 {
        self.sync.trace_seq.fetch_add(1, SeqCst).wrapping_add(1)
    }

    /// Traced records begun so far ([`trace_record_seq`](Self::trace_record_seq)).
    pub fn trace_seq(&self) -> u32 {
        self.sync.trace_seq.load(SeqCst)
    }

    #[cold]
    fn note_merge(&self, now: u64) {
        self.sync.merged_run.fetch_add(1, SeqCst);
        self.sync.merged_total.fetch_add(1, SeqCst);
        self.sync.last_merge_ns.store(now, SeqCst);
    }

    /// Records the notify (see [`NotifySync::record`]) and notes who did it.
    #[inline]
    pub fn record<W: Waiter>(&self, w: &W, pid: i32) {
        let s = &self.sync;
        let merged = s.record(w);
        // Diagnostics only, so after the flag: a waiter spinning on it gets the record without
        // waiting for a clock read. Written when they change, so that a stream of records from
        // one process does not keep pulling this line away from the other processes' caches.
        if s.last_record_pid.load(SeqCst) != pid {
            s.last_record_pid.store(pid, SeqCst);
        }
        let now = w.stamp_ns();
        if s.last_record_ns.load(SeqCst) != now {
            s.last_record_ns.store(now, SeqCst);
        }
        // On the line just read: a record that found the flag clear ends a run of merges.
        if merged {
            self.note_merge(now);
        } else if s.merged_run.load(Relaxed) != 0 {
            s.merged_run.store(0, Relaxed);
        }
    }

    /// Takes a freshly allocated (free) slot for its creator: fills in the metadata, makes
    /// process `owner.proc` the only holder and marks the slot live. Returns the generation.
    ///
    /// `Err(Corrupt)` if the slot is not free (its id was handed out while still in use); the
    /// slot is left untouched then.
    pub fn claim(&self, owner: Owner, flags: CreateFlags) -> Result<u32, TableError> {
        self.claim_raw(owner, flags.bits() as u32, |_| {})
    }

    /// The export of a notify: [`export_with`](Self::export_with), whose winning call first
    /// makes the notify's waits wakeable from other processes ([`NotifySync::share`]) and
    /// then runs `prepare` — all before the key is published, so no importer can record
    /// before. Only the owner's process exports (it is the one whose waiters may sleep
    /// privately).
    pub fn export_notify<W: Waiter, E>(
        &self,
        w: &W,
        nonce: [u8; 16],
        how: ExportState,
        prepare: impl FnOnce() -> Result<(), E>,
    ) -> Result<bool, E> {
        self.export_with(nonce, how, || {
            self.sync.share(w);
            prepare()
        })
    }

    /// Reclaims what dead process `proc` held here: cancels its tickets, then drops its
    /// reference (see [`leave`](Self::leave)).
    pub fn reclaim_proc<W: Waiter>(&self, w: &W, proc: u32) -> Leave {
        if proc >= MAX_PROCS || self.holders() & (1 << proc) == 0 {
            return Leave::NotHeld;
        }
        self.sync.cancel_proc_tickets(w, proc);
        self.leave(proc)
    }
}

//! The device-side notify table: one [`NotifySlot`] per notify id, holding the binary flag that
//! records set and waits consume, a FIFO of waiters with timeouts, and the metadata a device
//! (AICPU firmware or the simulator) keeps about the notify. Pointer-free, `#[repr(C)]`, atomics
//! and indices only, so a table can live in memory shared by several processes; blocking and
//! waking go through the small [`Waiter`] trait (a shared futex on Linux).
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
//! - At most [`MAX_PROCS`] (64) processes can hold references to one table, because holders
//!   are a 64-bit bitmap indexed by the process's slot in a process table (kept by the
//!   platform). The bitmap makes references of a dead process reclaimable: the survivors clear
//!   its bit and cancel its tickets ([`NotifySlot::reclaim_proc`]).
//!
//! # Concurrency of the slot's operations
//!
//! Any thread of any process may call any operation on one slot at any time, so no operation
//! may read a field, decide, then write on the strength of what it read unless the write
//! re-checks it. Each one, and why it holds:
//!
//! - [`claim`](NotifySlot::claim): a CAS Free → Claiming decides; only the winner fills in the
//!   fields, and it publishes Live last.
//! - [`export_with`](NotifySlot::export_with): a CAS none → exporting decides; only the winner
//!   prepares, writes the nonce and publishes (issue 22: the nonce used to be written first).
//! - [`join`](NotifySlot::join) (import): a CAS loop on the holder bitmap, refusing an empty
//!   one (nobody joins a notify that has no holder); then a re-check of the generation, undone
//!   by [`leave`](NotifySlot::leave) if the slot was retired meanwhile.
//! - [`leave`](NotifySlot::leave) (destroy): one `fetch_and` decides who was last; the retire
//!   is a CAS from the state word read while still holding, so it never acts on a later
//!   incarnation.
//! - [`NotifySync::record`] is one swap; [`NotifySync::reset`] (batch reset) and
//!   [`NotifySync::try_consume`] one CAS each: a record racing them lands before (and is reset
//!   or consumed) or after (and stays); never half.
//! - The waiter queue (tickets, ring, head) moves by CAS only; see its methods.
//! - [`retire_orphan`](NotifySlot::retire_orphan) and
//!   [`clear_stray_holders`](NotifySlot::clear_stray_holders) read, then write: they are for
//!   a repair pass that has seen the slot unchanged for a grace period and holds the process
//!   table entries whose bits it clears, so that nobody can be between the steps they repair.
//! - [`set_whitelist_index`](NotifySlot::set_whitelist_index) and the diagnostics of
//!   [`record`](NotifySlot::record) (last recorder and time) are plain stores: the first has
//!   one writer (the owner, while exporting), the second are diagnostics, where the last of
//!   two racing records winning either field is as true as the other.
//!
//! # Trust
//!
//! Other processes write this memory, so every value read from it is checked before use
//! (ring indices are reduced modulo [`RING`], states and process indices are validated,
//! counters that violate `head <= tail <= head + RING` are reported as
//! [`TableError::Corrupt`]). No loop runs unboundedly on values another process controls:
//! waits sleep through [`Waiter::wait`] in chunks of at most [`CHUNK`] and re-check their
//! deadline and cancellation each time.

use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering::Relaxed, Ordering::SeqCst, dekker};
use core::time::Duration;

use crate::flags::CreateFlags;

/// Waiters per notify that can hold a ticket at once (see the module docs for what happens
/// past it).
pub const RING: usize = 16;
/// Processes that can hold references to the notifies of one table (holder bitmap width).
pub const MAX_PROCS: u32 = 64;
/// Longest single sleep inside a wait: deadlines, cancellation and dead-head checks are
/// re-evaluated at least this often even if nobody wakes the sleeper.
pub const CHUNK: Duration = Duration::from_millis(50);
/// Chunks in a row that a queued waiter may find the head stuck on an entry no live process
/// holds before it reports [`TableError::Corrupt`] (each chunk it tries to repair the head:
/// see `repair_stuck_head`).
pub const STUCK_LIMIT: u32 = 20;
/// How long a waiter that has reached the head of the queue spins on the flag before it sleeps
/// in the kernel. Longer than a wake-up from sleep takes on a typical VM (5–10 µs): with a
/// shorter spin, two streams bouncing records stay in a regime where each one has gone to
/// sleep by the time the other answers, and every hand-off costs a wake-up.
pub const SPIN: Duration = Duration::from_micros(10);
/// The longest a platform may make that spin ([`Waiter::spin_limit`]); longer limits are cut
/// to this, so a waiter's spin stays bounded whatever the platform asks.
pub const MAX_SPIN: Duration = Duration::from_micros(50);
/// How long the spin at the head of the queue is a tight loop before each of its clock checks
/// also calls [`Waiter::relax`].
pub const PURE_SPIN: Duration = Duration::from_micros(1);
/// Spin turns between clock reads. Under loom every turn is a scheduling point of the model,
/// and the turns are all alike, so the model checks the clock every other turn.
const SPIN_CHECK: u32 = if crate::sync::MODEL { 2 } else { 32 };
/// Turns a waiter that finds no record and nobody queued watches the flag before it queues.
/// About a microsecond: a record from a stream that is busy with its own previous task lands
/// within a few hundred nanoseconds, and taking it here costs no ticket (the queue's four
/// read-modify-writes). Under loom one turn is the same state space as many.
const PRE_SPIN: u32 = if crate::sync::MODEL { 1 } else { 48 };

/// Flag values. `FLAG_CLEAR_SLEEPING` is "clear, and the head waiter sleeps on the word", so a
/// record only issues a wake-up system call when someone sleeps.
const FLAG_CLEAR: u32 = 0;
const FLAG_SET: u32 = 1;
const FLAG_CLEAR_SLEEPING: u32 = 2;

/// Ring entry layout: `round (16 bits) | state (2 bits) | process index (14 bits)`.
const ST_FREE: u32 = 0;
const ST_TAKEN: u32 = 1;
const ST_CANCELLED: u32 = 2;
const PROC_MASK: u32 = (1 << 14) - 1;

/// How a platform blocks and wakes on a 32-bit word shared with other processes.
///
/// On Linux: `FUTEX_WAIT`/`FUTEX_WAKE` without `FUTEX_PRIVATE_FLAG` on a `MAP_SHARED` mapping;
/// on firmware, whatever the AICPU offers (even a bounded spin).
pub trait Waiter {
    /// Blocks while `word == expected`, for at most `timeout` (`None`: no limit). May return
    /// early or spuriously; callers re-check.
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>);

    /// Wakes up to `n` threads (of any process) blocked in [`wait`](Self::wait) on `word`;
    /// `u32::MAX` wakes all.
    fn wake(&self, word: &AtomicU32, n: u32);

    /// A monotonic clock in nanoseconds.
    fn now_ns(&self) -> u64;

    /// A cheap, possibly coarse reading of the same clock, for diagnostics only (the time of
    /// the last record). The default is [`now_ns`](Self::now_ns); a platform with a cheaper
    /// low-resolution clock (Linux's `CLOCK_MONOTONIC_COARSE`) returns that, so a record pays
    /// for no precise clock read.
    fn stamp_ns(&self) -> u64 {
        self.now_ns()
    }

    /// Called now and then by a waiter that has spun for [`PURE_SPIN`] without seeing a record
    /// (before it gives up and sleeps): a platform where the recorder may be waiting for this
    /// very CPU offers it (Linux: `sched_yield`, which returns at once when nothing else is
    /// runnable). The default does nothing.
    fn relax(&self) {}

    /// Asked after each [`relax`](Self::relax): whether the waiter should go on spinning. A
    /// platform that sees its CPUs are wanted (more spinners than CPUs, or a yield that gave
    /// the CPU away) says no, and the waiter sleeps at once. The default says yes.
    fn keep_spinning(&self) -> bool {
        true
    }

    /// How long a waiter at the head of the queue spins before it sleeps (at most
    /// [`MAX_SPIN`]; longer is cut to it). The default is [`SPIN`]. A platform that sees the
    /// records a waiter gets arrive just after it went to sleep (a wake-up slower than the
    /// spin, so two waiters handing records back and forth keep putting each other to sleep)
    /// may spin a waiter longer.
    fn spin_limit(&self) -> Duration {
        SPIN
    }

    /// Whether the process in slot `proc` of the platform's process table is still alive.
    /// Waiters stuck behind a ticket of a dead process cancel it. The default says yes
    /// (a platform without process death).
    fn proc_alive(&self, proc: u32) -> bool {
        let _ = proc;
        true
    }
}

/// Why a wait ended without consuming a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WaitOutcome {
    /// The wait consumed a record (the flag is reset).
    Consumed,
    /// The timeout expired first; the ticket was given up, nothing was consumed.
    TimedOut,
    /// The caller's cancel check fired; the ticket was given up, nothing was consumed.
    Cancelled,
}

/// The table's memory broke one of its invariants (another process corrupted it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TableError {
    /// Counters or ring entries are inconsistent; the notify cannot be used safely.
    Corrupt,
    /// A process index out of range was passed or found.
    BadProc,
}

/// Arguments of one wait.
#[derive(Clone, Copy)]
pub struct WaitArgs<'a> {
    /// The waiting process's slot in the platform's process table (`< MAX_PROCS`).
    pub proc: u32,
    /// How long to wait for a record (`None`: until recorded or cancelled).
    pub timeout: Option<Duration>,
    /// Polled at least every [`CHUNK`] (and after every wake-up): `true` abandons the wait.
    /// A platform that wants a prompt cancel also calls [`NotifySync::wake_all`].
    pub cancel: &'a dyn Fn() -> bool,
}

impl core::fmt::Debug for WaitArgs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaitArgs")
            .field("proc", &self.proc)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

const fn round16(ticket: u32) -> u32 {
    (ticket / RING as u32) & 0xffff
}

const fn entry(round: u32, state: u32, proc: u32) -> u32 {
    (round << 16) | (state << 14) | (proc & PROC_MASK)
}

const fn entry_round(e: u32) -> u32 {
    e >> 16
}

const fn entry_state(e: u32) -> u32 {
    (e >> 14) & 0x3
}

const fn entry_proc(e: u32) -> u32 {
    e & PROC_MASK
}

/// The synchronisation half of a slot: the flag and the FIFO of waiters. All-zero bytes are an
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
}

/// Deadline bookkeeping shared by the wait loops (this table's and the count notifies').
pub(crate) struct Clock<'a, W: Waiter> {
    w: &'a W,
    deadline: Option<u64>,
}

impl<'a, W: Waiter> Clock<'a, W> {
    /// A clock whose deadline is `timeout` from now (`None`: no deadline).
    pub(crate) fn start(w: &'a W, timeout: Option<Duration>) -> Self {
        Clock {
            w,
            deadline: timeout.map(|d| {
                w.now_ns()
                    .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64)
            }),
        }
    }

    pub(crate) fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| self.w.now_ns() >= d)
    }

    /// The next sleep: at most `CHUNK`, at most the time left.
    pub(crate) fn chunk(&self) -> Duration {
        match self.deadline {
            None => CHUNK,
            Some(d) => {
                let left = Duration::from_nanos(d.saturating_sub(self.w.now_ns()));
                if left < CHUNK { left } else { CHUNK }
            }
        }
    }
}

impl NotifySync {
    /// An idle notify (all zero).
    pub const fn new() -> Self {
        NotifySync {
            flag: AtomicU32::new(0),
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            incarnation: AtomicU32::new(0),
            ring: [const { AtomicU32::new(0) }; RING],
        }
    }

    /// Whether the flag is set (a record is pending).
    #[inline]
    pub fn is_set(&self) -> bool {
        self.flag.load(SeqCst) == FLAG_SET
    }

    /// How many tickets are outstanding (queued or being served waiters), clamped to [`RING`].
    pub fn waiters(&self) -> u32 {
        let h = self.head.load(SeqCst);
        let t = self.tail.load(SeqCst);
        t.wrapping_sub(h).min(RING as u32)
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
            (e == entry(round16(t), ST_TAKEN, entry_proc(e))).then_some(entry_proc(e))
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
            prev => prev == FLAG_SET,
        }
    }

    /// Resets a pending record (batch reset); a no-op when clear.
    pub fn reset(&self) {
        let _ = self
            .flag
            .compare_exchange(FLAG_SET, FLAG_CLEAR, SeqCst, SeqCst);
    }

    /// Consumes a pending record if no waiter is queued: `true` if one was consumed. Never
    /// blocks, never takes a record a queued waiter is entitled to.
    #[inline]
    pub fn try_consume(&self) -> bool {
        self.head.load(SeqCst) == self.tail.load(SeqCst)
            && self
                .flag
                .compare_exchange(FLAG_SET, FLAG_CLEAR, SeqCst, SeqCst)
                .is_ok()
    }

    /// Wakes every thread sleeping on this notify (they re-check their deadline and cancel
    /// condition); used to cancel waits promptly.
    pub fn wake_all<W: Waiter>(&self, w: &W) {
        w.wake(&self.flag, u32::MAX);
        w.wake(&self.head, u32::MAX);
    }

    /// Puts the flag back to clear for a fresh notify. Tickets are left alone: they are
    /// consistent across reuse (a freed notify has no waiters).
    fn clear_for_reuse(&self) {
        self.flag.store(FLAG_CLEAR, SeqCst);
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
        // Wait for our turn.
        let mut last_head = None;
        let mut stuck = 0u32;
        loop {
            let h = self.head.load(SeqCst);
            if h == t {
                break;
            }
            if t.wrapping_sub(h) > RING as u32 {
                // `head` passed our ticket: only possible if someone cancelled it (they
                // thought we were dead) or the memory is corrupt.
                return Err(TableError::Corrupt);
            }
            let stop = if clock.expired() {
                Some(WaitOutcome::TimedOut)
            } else if (args.cancel)() {
                Some(WaitOutcome::Cancelled)
            } else {
                None
            };
            if let Some(outcome) = stop {
                self.cancel_ticket(w, t, entry(round16(t), ST_TAKEN, args.proc));
                return Ok(outcome);
            }
            if last_head == Some(h) {
                // A whole chunk without progress: is the head ticket's process dead, or did a
                // process die half-way through handing the head on?
                self.repair_stuck_head(w, h, &mut stuck)?;
            } else {
                stuck = 0;
            }
            last_head = Some(h);
            w.wait(&self.head, h, Some(clock.chunk()));
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
        loop {
            let v = self.flag.load(SeqCst);
            if v == FLAG_SET {
                if self.consume() {
                    self.finish(w, t, args.proc);
                    return Ok(WaitOutcome::Consumed);
                }
                continue;
            }
            let stop = if clock.expired() {
                Some(WaitOutcome::TimedOut)
            } else if (args.cancel)() {
                Some(WaitOutcome::Cancelled)
            } else {
                None
            };
            if let Some(outcome) = stop {
                // Last chance: a record that landed exactly now is ours (we are first in
                // line); either way the ticket is handed on.
                let outcome = if self.consume() {
                    WaitOutcome::Consumed
                } else {
                    outcome
                };
                self.finish(w, t, args.proc);
                return Ok(outcome);
            }
            if v != FLAG_CLEAR_SLEEPING
                && self
                    .flag
                    .compare_exchange(v, FLAG_CLEAR_SLEEPING, SeqCst, SeqCst)
                    .is_err()
            {
                continue;
            }
            w.wait(&self.flag, FLAG_CLEAR_SLEEPING, Some(clock.chunk()));
        }
    }

    fn consume(&self) -> bool {
        self.flag
            .compare_exchange(FLAG_SET, FLAG_CLEAR, SeqCst, SeqCst)
            .is_ok()
    }

    /// Takes a ticket: `Ok(Ok(t))`, or `Ok(Err(outcome))` if the deadline or cancel fired
    /// while the ring was full.
    fn acquire<W: Waiter>(
        &self,
        w: &W,
        clock: &Clock<'_, W>,
        args: &WaitArgs<'_>,
    ) -> Result<Result<u32, WaitOutcome>, TableError> {
        // Consecutive observations that break an invariant; a few are a stale view under
        // concurrency, many in a row are corruption.
        let mut odd = 0u32;
        let mut last_full_head = None;
        let mut stuck = 0u32;
        loop {
            if odd > 100_000 {
                return Err(TableError::Corrupt);
            }
            let h = self.head.load(SeqCst);
            let t = self.tail.load(SeqCst);
            let used = t.wrapping_sub(h);
            if used > RING as u32 {
                odd += 1;
                core::hint::spin_loop();
                continue;
            }
            if used == RING as u32 {
                if clock.expired() {
                    return Ok(Err(WaitOutcome::TimedOut));
                }
                if (args.cancel)() {
                    return Ok(Err(WaitOutcome::Cancelled));
                }
                if last_full_head == Some(h) {
                    self.repair_stuck_head(w, h, &mut stuck)?;
                } else {
                    stuck = 0;
                }
                last_full_head = Some(h);
                w.wait(&self.head, h, Some(clock.chunk()));
                continue;
            }
            let slot = &self.ring[t as usize % RING];
            let e = slot.load(SeqCst);
            let r = round16(t);
            if e == entry(r, ST_FREE, 0) {
                if slot
                    .compare_exchange(e, entry(r, ST_TAKEN, args.proc), SeqCst, SeqCst)
                    .is_ok()
                {
                    // Publish the ticket (someone may have helped already); the head is read
                    // next (Dekker with `finish`: it stores the head, then reads the tail).
                    let _ = self
                        .tail
                        .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
                    dekker();
                    return Ok(Ok(t));
                }
                continue;
            }
            if entry_round(e) == r && matches!(entry_state(e), ST_TAKEN | ST_CANCELLED) {
                // Ticket `t` is taken but `tail` not yet moved: help.
                let _ = self
                    .tail
                    .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
                continue;
            }
            if e == entry(r.wrapping_add(1) & 0xffff, ST_FREE, 0) {
                // Ticket `t` was served, or given up and skipped, but `tail` (and maybe
                // `head`) was not moved past it: the processes between those steps died (or
                // are slow, or our read of `tail` is stale). Help both on, as
                // `repair_stuck_head` does for the head.
                let _ = self
                    .tail
                    .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
                self.pass_head(w, t);
                continue;
            }
            odd += 1;
            core::hint::spin_loop();
        }
    }

    /// Hands the head on after ticket `t` (ours, at the head) is done.
    fn finish<W: Waiter>(&self, w: &W, t: u32, proc: u32) {
        let slot = &self.ring[t as usize % RING];
        let mine = entry(round16(t), ST_TAKEN, proc);
        if slot
            .compare_exchange(
                mine,
                entry(round16(t).wrapping_add(1) & 0xffff, ST_FREE, 0),
                SeqCst,
                SeqCst,
            )
            .is_err()
        {
            // Someone cancelled our ticket on our behalf (they took us for dead); they move
            // the head.
            return;
        }
        // A compare-and-swap, not a store: a waiter that found the head stuck here for a whole
        // chunk (it took us for dead between the two steps) may have moved it on already, and
        // a late store would move it back.
        self.pass_head(w, t);
    }

    /// Moves the head from `t` (a ticket that is done) to `t + 1` by compare-and-swap, then
    /// skips the cancelled tickets after it and wakes the queue (`skip_cancelled`). Does
    /// nothing if the head is no longer `t`: whoever moved it does the rest.
    fn pass_head<W: Waiter>(&self, w: &W, t: u32) {
        if self
            .head
            .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst)
            .is_ok()
        {
            dekker();
            self.skip_cancelled(w, t.wrapping_add(1));
        }
    }

    /// With `head == from`: moves the head past every cancelled ticket, then wakes sleepers
    /// on the head word if any ticket is outstanding.
    fn skip_cancelled<W: Waiter>(&self, w: &W, from: u32) {
        let mut t = from;
        for _ in 0..RING {
            let r = round16(t);
            let slot = &self.ring[t as usize % RING];
            // A plain read first: usually the next ticket is not cancelled, and a failed CAS
            // costs as much as a successful one. Safe to skip the CAS on it: a canceller marks
            // the entry and then reads `head` (already `t`, stored before this read), so if
            // it marked after our read it sees `head == t` and skips the ticket itself.
            if slot.load(SeqCst) != entry(r, ST_CANCELLED, 0)
                || slot
                    .compare_exchange(
                        entry(r, ST_CANCELLED, 0),
                        entry(r.wrapping_add(1) & 0xffff, ST_FREE, 0),
                        SeqCst,
                        SeqCst,
                    )
                    .is_err()
            {
                break;
            }
            let _ = self
                .tail
                .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
            // As in `finish`: whoever repaired a stuck head may have moved it on meanwhile.
            if self
                .head
                .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst)
                .is_err()
            {
                return;
            }
            t = t.wrapping_add(1);
            dekker();
        }
        if self.tail.load(SeqCst) != t {
            w.wake(&self.head, u32::MAX);
        }
    }

    /// Gives up ticket `t` whose entry is `expected` (TAKEN by some process): marks it
    /// cancelled and, if it is at the head, moves the head on. Returns whether this call did
    /// the cancelling.
    fn cancel_ticket<W: Waiter>(&self, w: &W, t: u32, expected: u32) -> bool {
        let slot = &self.ring[t as usize % RING];
        // Cancelled entries carry no process index, so the skip CAS needs no knowledge of it.
        if slot
            .compare_exchange(expected, entry(round16(t), ST_CANCELLED, 0), SeqCst, SeqCst)
            .is_err()
        {
            return false;
        }
        // The ticket was taken, so `tail` must be past it.
        let _ = self
            .tail
            .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
        // If the head already reached `t`, whoever moved it may have looked at the entry
        // before we marked it: race them for the skip (exactly one CAS wins).
        dekker();
        if self.head.load(SeqCst) == t {
            self.skip_cancelled(w, t);
        }
        true
    }

    /// Called by a queued waiter that has seen the head stay at `h` for a whole chunk. Moves
    /// it on if whoever should have is gone:
    ///
    /// - the head ticket belongs to a dead process: cancel it;
    /// - it was cancelled but not skipped (the canceller died between the two steps): skip it;
    /// - it was finished but the head not moved on (the waiter died between freeing its entry
    ///   and moving the head): move the head on;
    /// - it was never taken although `tail` is past it (a phantom ticket, which only a
    ///   corrupting write makes): cancel it.
    ///
    /// A head entry that fits none of these, or that stays in one of the repairable states
    /// chunk after chunk without the repair taking, is corruption: after [`STUCK_LIMIT`]
    /// such chunks in a row, `Err(Corrupt)` (`stuck` counts them; the caller resets it when the
    /// head moves). A live process that holds the head ticket is waited for (its own wait
    /// has a timeout, or can be cancelled): that is not corruption.
    fn repair_stuck_head<W: Waiter>(
        &self,
        w: &W,
        h: u32,
        stuck: &mut u32,
    ) -> Result<(), TableError> {
        let r = round16(h);
        let next = r.wrapping_add(1) & 0xffff;
        let slot = &self.ring[h as usize % RING];
        // `tail` first: an entry is taken before `tail` moves past it.
        let tail = self.tail.load(SeqCst);
        let e = slot.load(SeqCst);
        if e == entry(r, ST_TAKEN, entry_proc(e)) {
            if w.proc_alive(entry_proc(e)) {
                *stuck = 0;
                return Ok(());
            }
            self.cancel_ticket(w, h, e);
        } else if e == entry(r, ST_CANCELLED, 0) {
            self.skip_cancelled(w, h);
        } else if e == entry(next, ST_FREE, 0) {
            self.pass_head(w, h);
        } else if e == entry(r, ST_FREE, 0)
            && tail.wrapping_sub(h).wrapping_sub(1) < RING as u32
            && slot
                .compare_exchange(e, entry(r, ST_CANCELLED, 0), SeqCst, SeqCst)
                .is_ok()
            && self.head.load(SeqCst) == h
        {
            self.skip_cancelled(w, h);
        }
        *stuck += 1;
        if *stuck > STUCK_LIMIT {
            return Err(TableError::Corrupt);
        }
        Ok(())
    }

    /// Cancels every ticket held by process `proc` (which is dead). Returns how many.
    pub fn cancel_proc_tickets<W: Waiter>(&self, w: &W, proc: u32) -> u32 {
        let mut n = 0;
        for i in 0..RING {
            let e = self.ring[i].load(SeqCst);
            if entry_state(e) != ST_TAKEN || entry_proc(e) != proc {
                continue;
            }
            // The outstanding tickets are head..head+RING, one per ring index.
            let h = self.head.load(SeqCst);
            let t = h.wrapping_add((i as u32).wrapping_sub(h) % RING as u32);
            if round16(t) == entry_round(e) && self.cancel_ticket(w, t, e) {
                n += 1;
            }
        }
        n
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
            .finish_non_exhaustive()
    }
}

/// Whether a slot is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum SlotState {
    /// Not allocated (all-zero).
    Free = 0,
    /// Allocated and initialised.
    Live = 1,
    /// Being retired by its last holder (transient).
    Retiring = 2,
    /// Being initialised by its creator (transient).
    Claiming = 3,
}

impl SlotState {
    const fn from_u32(v: u32) -> Option<SlotState> {
        match v {
            0 => Some(SlotState::Free),
            1 => Some(SlotState::Live),
            2 => Some(SlotState::Retiring),
            3 => Some(SlotState::Claiming),
            _ => None,
        }
    }
}

/// The slot's state word: `generation << 32 | state`, changed only by compare-and-swap, so a
/// transition is always made on the incarnation (generation) the caller knows.
const fn word(generation: u32, state: SlotState) -> u64 {
    ((generation as u64) << 32) | state as u64
}

/// The export word while one export call, having won it, writes the nonce (see
/// [`NotifySlot::export_with`]); never a published state.
const EXPORTING: u32 = 3;

/// How a notify was exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum ExportState {
    /// Not exported (all-zero).
    None = 0,
    /// Exported; importers must be whitelisted.
    Enforced = 1,
    /// Exported with `DISABLE_PID_VALIDATION`.
    Open = 2,
}

/// What [`NotifySlot::leave`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Leave {
    /// The process did not hold the notify (nothing changed).
    NotHeld,
    /// Other processes still hold it.
    StillHeld,
    /// This was the last holder: the slot has been retired (generation bumped, state free);
    /// the caller now frees the id in its pool. (If the last holder finds the slot already
    /// being retired or re-used — a repair pass took over — the answer is `StillHeld`: the
    /// id is not the caller's to free.)
    Last,
}

/// The owner of a notify, as recorded at create.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Owner {
    /// Process id.
    pub pid: i32,
    /// Process start time (platform clock ticks; 0 unknown).
    pub start_time: u64,
    /// SuperPod server id.
    pub server: u32,
    /// Device.
    pub device: u32,
    /// The owner's slot in the process table.
    pub proc: u32,
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

/// One notify: synchronisation state plus metadata. All-zero bytes are a free slot.
///
/// Size: 192 bytes, aligned to a 64-byte cache line (checked by a test): 160 bytes of fields
/// padded so that no two notifies share a line — otherwise a record of one notify would pull
/// the line holding its neighbour's flag away from that neighbour's waiter. A table of 65535
/// notifies on 8 devices is 96 MiB of address space, of which only the pages of used ids are
/// ever touched.
#[repr(C, align(64))]
pub struct NotifySlot {
    /// The flag and the waiter queue.
    pub sync: NotifySync,
    /// `generation << 32 | SlotState`.
    state_gen: AtomicU64,
    holders: AtomicU64,
    create_flags: AtomicU32,
    export: AtomicU32,
    nonce: [AtomicU64; 2],
    owner_pid: AtomicI32,
    owner_server: AtomicU32,
    owner_start: AtomicU64,
    owner_device: AtomicU32,
    owner_proc: AtomicU32,
    last_record_pid: AtomicI32,
    whitelist: AtomicU32,
    last_record_ns: AtomicU64,
    /// Records merged into an already-set flag since the flag was last found clear by a
    /// record (so: since the last wait took a record), and in the notify's life.
    merged_run: AtomicU32,
    merged_total: AtomicU32,
    /// When the last merge happened ([`Waiter::stamp_ns`] clock).
    last_merge_ns: AtomicU64,
    /// Records begun on this incarnation while a process traced them (see
    /// [`trace_record_seq`](Self::trace_record_seq)); untouched when nobody traces.
    trace_seq: AtomicU32,
}

impl NotifySlot {
    /// A free slot (all zero).
    pub const fn new() -> Self {
        NotifySlot {
            sync: NotifySync::new(),
            state_gen: AtomicU64::new(0),
            holders: AtomicU64::new(0),
            create_flags: AtomicU32::new(0),
            export: AtomicU32::new(0),
            nonce: [AtomicU64::new(0), AtomicU64::new(0)],
            owner_pid: AtomicI32::new(0),
            owner_server: AtomicU32::new(0),
            owner_start: AtomicU64::new(0),
            owner_device: AtomicU32::new(0),
            owner_proc: AtomicU32::new(0),
            trace_seq: AtomicU32::new(0),
            last_record_pid: AtomicI32::new(0),
            whitelist: AtomicU32::new(0),
            last_record_ns: AtomicU64::new(0),
            merged_run: AtomicU32::new(0),
            merged_total: AtomicU32::new(0),
            last_merge_ns: AtomicU64::new(0),
        }
    }

    /// The slot's state; an invalid stored value reads as `None` (corrupt).
    pub fn state(&self) -> Option<SlotState> {
        SlotState::from_u32(self.state_gen.load(SeqCst) as u32)
    }

    /// The generation: bumped every time the id is released, so stale keys and handles of an
    /// earlier use of the id are recognised.
    pub fn generation(&self) -> u32 {
        (self.state_gen.load(SeqCst) >> 32) as u32
    }

    /// Whether the slot is live in generation `generation`.
    pub fn is_live(&self, generation: u32) -> bool {
        self.state_gen.load(SeqCst) == word(generation, SlotState::Live)
    }

    /// Whether incarnation `generation` is still this slot's: true from its
    /// [`claim`](Self::claim) until it is retired. One load on the flag's cache line, which
    /// a record or wait touches anyway (so cheaper on those paths than
    /// [`is_live`](Self::is_live)). A corrupting write can make it false for a live
    /// incarnation; callers treat that as the notify no longer being theirs.
    #[inline]
    pub fn is_current(&self, generation: u32) -> bool {
        self.sync.incarnation.load(SeqCst) == generation
    }

    /// The holder bitmap (bit `p` = process-table slot `p` holds a reference).
    pub fn holders(&self) -> u64 {
        self.holders.load(SeqCst)
    }

    /// The create flags (unknown bits dropped).
    pub fn create_flags(&self) -> CreateFlags {
        CreateFlags::from_bits_truncate(u64::from(self.create_flags.load(SeqCst)))
    }

    /// How the notify was exported; an invalid stored value reads as `None` (corrupt). An
    /// export in progress reads as [`ExportState::None`]: its key is not out yet.
    pub fn export_state(&self) -> Option<ExportState> {
        match self.export.load(SeqCst) {
            0 | EXPORTING => Some(ExportState::None),
            1 => Some(ExportState::Enforced),
            2 => Some(ExportState::Open),
            _ => None,
        }
    }

    /// The export nonce (meaningful once exported).
    pub fn nonce(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.nonce[0].load(SeqCst).to_le_bytes());
        out[8..].copy_from_slice(&self.nonce[1].load(SeqCst).to_le_bytes());
        out
    }

    /// The owner recorded at create (unvalidated numbers: check `device`/`proc` before use).
    pub fn owner(&self) -> Owner {
        Owner {
            pid: self.owner_pid.load(SeqCst),
            start_time: self.owner_start.load(SeqCst),
            server: self.owner_server.load(SeqCst),
            device: self.owner_device.load(SeqCst),
            proc: self.owner_proc.load(SeqCst),
        }
    }

    /// The platform's whitelist index for this notify (0 = none; meaning is the platform's).
    pub fn whitelist_index(&self) -> u32 {
        self.whitelist.load(SeqCst)
    }

    /// Sets the platform's whitelist index.
    pub fn set_whitelist_index(&self, index: u32) {
        self.whitelist.store(index, SeqCst);
    }

    /// The last process that recorded and when ([`Waiter::now_ns`] clock); pid 0 = never.
    pub fn last_record(&self) -> (i32, u64) {
        (
            self.last_record_pid.load(SeqCst),
            self.last_record_ns.load(SeqCst),
        )
    }

    /// Merged records ([`NotifySync::record`]): how many records landed on an already-set
    /// flag since the last record that found it clear (each wait that took a record in
    /// between ends such a run), how many in the notify's life, and when the last one did
    /// ([`Waiter::stamp_ns`] clock; 0: never).
    pub fn merged_records(&self) -> MergedRecords {
        MergedRecords {
            since_wait: self.merged_run.load(SeqCst),
            total: self.merged_total.load(SeqCst),
            last_ns: self.last_merge_ns.load(SeqCst),
        }
    }

    /// Numbers a traced record of this notify (1, 2, …, per incarnation): called just before
    /// the record, so the number a wait reads back with [`trace_seq`](Self::trace_seq) right
    /// after it took a record counts the record that released it. Only a process that writes
    /// a timeline calls it (the simulator's `ACL_NOTIFY_SIM_TRACE`).
    pub fn trace_record_seq(&self) -> u32 {
        self.trace_seq.fetch_add(1, SeqCst).wrapping_add(1)
    }

    /// Traced records begun so far ([`trace_record_seq`](Self::trace_record_seq)).
    pub fn trace_seq(&self) -> u32 {
        self.trace_seq.load(SeqCst)
    }

    #[cold]
    fn note_merge(&self, now: u64) {
        self.merged_run.fetch_add(1, SeqCst);
        self.merged_total.fetch_add(1, SeqCst);
        self.last_merge_ns.store(now, SeqCst);
    }

    /// Records the notify (see [`NotifySync::record`]) and notes who did it.
    #[inline]
    pub fn record<W: Waiter>(&self, w: &W, pid: i32) {
        let merged = self.sync.record(w);
        // Diagnostics only, so after the flag: a waiter spinning on it gets the record without
        // waiting for a clock read. Written when they change, so that a stream of records from
        // one process does not keep pulling this line away from the other processes' caches.
        if self.last_record_pid.load(SeqCst) != pid {
            self.last_record_pid.store(pid, SeqCst);
        }
        let now = w.stamp_ns();
        if self.last_record_ns.load(SeqCst) != now {
            self.last_record_ns.store(now, SeqCst);
        }
        // On the line just read: a record that found the flag clear ends a run of merges.
        if merged {
            self.note_merge(now);
        } else if self.merged_run.load(Relaxed) != 0 {
            self.merged_run.store(0, Relaxed);
        }
    }

    /// Takes a freshly allocated (free) slot for its creator: fills in the metadata, makes
    /// process `owner.proc` the only holder and marks the slot live. Returns the generation.
    ///
    /// `Err(Corrupt)` if the slot is not free (its id was handed out while still in use); the
    /// slot is left untouched then.
    pub fn claim(&self, owner: Owner, flags: CreateFlags) -> Result<u32, TableError> {
        if owner.proc >= MAX_PROCS {
            return Err(TableError::BadProc);
        }
        let cur = self.state_gen.load(SeqCst);
        let generation = (cur >> 32) as u32;
        if cur != word(generation, SlotState::Free)
            || self
                .state_gen
                .compare_exchange(cur, word(generation, SlotState::Claiming), SeqCst, SeqCst)
                .is_err()
        {
            return Err(TableError::Corrupt);
        }
        self.sync.clear_for_reuse();
        self.create_flags.store(flags.bits() as u32, SeqCst);
        self.export.store(ExportState::None as u32, SeqCst);
        self.nonce[0].store(0, SeqCst);
        self.nonce[1].store(0, SeqCst);
        self.owner_pid.store(owner.pid, SeqCst);
        self.owner_start.store(owner.start_time, SeqCst);
        self.owner_server.store(owner.server, SeqCst);
        self.owner_device.store(owner.device, SeqCst);
        self.owner_proc.store(owner.proc, SeqCst);
        self.last_record_pid.store(0, SeqCst);
        self.last_record_ns.store(0, SeqCst);
        self.merged_run.store(0, SeqCst);
        self.merged_total.store(0, SeqCst);
        self.last_merge_ns.store(0, SeqCst);
        self.trace_seq.store(0, SeqCst);
        self.whitelist.store(0, SeqCst);
        // No one joins a slot without holders, so the bitmap is ours to set; a stray bit
        // (corrupt memory) is overwritten.
        self.holders.store(1 << owner.proc, SeqCst);
        self.sync.incarnation.store(generation, SeqCst);
        self.state_gen
            .store(word(generation, SlotState::Live), SeqCst);
        Ok(generation)
    }

    /// Publishes the export: stores the nonce, then the export state. `false` if the notify
    /// was already exported (or is being exported, or is not live).
    pub fn export(&self, nonce: [u8; 16], how: ExportState) -> bool {
        self.export_with(nonce, how, || Ok::<(), core::convert::Infallible>(())) == Ok(true)
    }

    /// [`export`](Self::export), running `prepare` once this call has won the export and
    /// before the export is published (the simulator empties the notify's whitelist there).
    /// `Ok(false)` if another export got there first, or the notify is not live; `Err` if
    /// `prepare` failed (the notify is left not exported, and may be exported again).
    ///
    /// Atomic against any number of concurrent exports, from any thread or process: the
    /// winner is the one call whose compare-and-swap moves the export word from "none" to
    /// "being exported"; only it writes the nonce and only it publishes. (Storing the nonce
    /// before that CAS let a losing call overwrite the winner's nonce, so the winner's key
    /// never matched.) Importers read "being exported" as not exported: its key has not been
    /// handed out yet.
    ///
    /// The caller must hold a reference to the notify (its holder bit) for the whole call, so
    /// the incarnation cannot be retired under it. If it is anyway (a repair took the caller's
    /// process for dead), the final CAS finds the word reset and the call answers `Ok(false)`;
    /// only then may the nonce words it wrote land in a later incarnation that is itself
    /// between its own claim and publish, whose key would then fail to import (107017): a
    /// failure, never a notify opened to the wrong key.
    pub fn export_with<E>(
        &self,
        nonce: [u8; 16],
        how: ExportState,
        prepare: impl FnOnce() -> Result<(), E>,
    ) -> Result<bool, E> {
        if how == ExportState::None || self.state() != Some(SlotState::Live) {
            return Ok(false);
        }
        if self
            .export
            .compare_exchange(ExportState::None as u32, EXPORTING, SeqCst, SeqCst)
            .is_err()
        {
            return Ok(false);
        }
        if let Err(e) = prepare() {
            let _ =
                self.export
                    .compare_exchange(EXPORTING, ExportState::None as u32, SeqCst, SeqCst);
            return Err(e);
        }
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&nonce[..8]);
        hi.copy_from_slice(&nonce[8..]);
        self.nonce[0].store(u64::from_le_bytes(lo), SeqCst);
        self.nonce[1].store(u64::from_le_bytes(hi), SeqCst);
        Ok(self
            .export
            .compare_exchange(EXPORTING, how as u32, SeqCst, SeqCst)
            .is_ok())
    }

    /// Adds process `proc` as a holder of the live notify of generation `generation`.
    ///
    /// `Ok(true)` if the bit was newly set, `Ok(false)` if `proc` already held it; `Err(None)`
    /// if the notify is gone (no holder left, or another generation) — stale. On a generation
    /// mismatch discovered after joining, the reference is dropped again (which may retire
    /// the slot: then `Err(Some(Leave::Last))` tells the caller to free the id).
    pub fn join(&self, proc: u32, generation: u32) -> Result<bool, Option<Leave>> {
        if proc >= MAX_PROCS {
            return Err(None);
        }
        let bit = 1u64 << proc;
        let mut cur = self.holders.load(SeqCst);
        let newly = loop {
            if cur == 0 {
                return Err(None);
            }
            if cur & bit != 0 {
                break false;
            }
            match self
                .holders
                .compare_exchange(cur, cur | bit, SeqCst, SeqCst)
            {
                Ok(_) => break true,
                Err(c) => cur = c,
            }
        };
        if !self.is_live(generation) {
            if newly {
                return Err(Some(self.leave(proc)));
            }
            return Err(None);
        }
        Ok(newly)
    }

    /// Drops process `proc`'s reference. When it was the last, retires the slot (state free,
    /// export cleared, generation bumped) and returns [`Leave::Last`]: the caller frees the
    /// id in its pool.
    pub fn leave(&self, proc: u32) -> Leave {
        if proc >= MAX_PROCS {
            return Leave::NotHeld;
        }
        // Read the incarnation while still holding it (it cannot change under a holder), so
        // the retiring CAS below can never act on a later incarnation.
        let held = self.state_gen.load(SeqCst);
        let bit = 1u64 << proc;
        let old = self.holders.fetch_and(!bit, SeqCst);
        if old & bit == 0 {
            Leave::NotHeld
        } else if old & !bit != 0 {
            Leave::StillHeld
        } else if self.retire_from(held) {
            Leave::Last
        } else {
            Leave::StillHeld
        }
    }

    /// Retires the incarnation whose state word is `from` (Live, or a transient state left
    /// by a dead process): clears the export and flag, bumps the generation, marks it free.
    /// `false` if the word changed meanwhile (someone else retired or re-used the slot).
    fn retire_from(&self, from: u64) -> bool {
        let generation = (from >> 32) as u32;
        if from != word(generation, SlotState::Retiring)
            && self
                .state_gen
                .compare_exchange(from, word(generation, SlotState::Retiring), SeqCst, SeqCst)
                .is_err()
        {
            return false;
        }
        // First, so that a handle of this incarnation stops passing `is_current` at once.
        self.sync
            .incarnation
            .store(generation.wrapping_add(1), SeqCst);
        self.export.store(ExportState::None as u32, SeqCst);
        self.whitelist.store(0, SeqCst);
        self.sync.clear_for_reuse();
        self.state_gen
            .compare_exchange(
                word(generation, SlotState::Retiring),
                word(generation.wrapping_add(1), SlotState::Free),
                SeqCst,
                SeqCst,
            )
            .is_ok()
    }

    /// Clears the holder bits in `mask` and returns the holder bitmap left. For stray bits:
    /// bits of process-table slots that no process occupies (corrupt memory, or a process that
    /// vanished without its references being reclaimed), which would otherwise keep the notify
    /// alive, and its id allocated, for ever. Bits outside `mask` are kept, so a process
    /// joining meanwhile keeps its reference; the slot is not retired here: when the answer
    /// is 0, follow with [`retire_orphan`](Self::retire_orphan).
    ///
    /// Only for a repair pass that has established that no process owns the bits in `mask`
    /// and that none can take those process-table slots until this returns (the simulator
    /// claims them for the duration): a live reference cleared here would be lost.
    pub fn clear_stray_holders(&self, mask: u64) -> u64 {
        self.holders.fetch_and(!mask, SeqCst) & !mask
    }

    /// Repairs a slot that has no holder but is not free: left behind by a process that died
    /// half-way through claiming it (`Claiming`), between dropping its last reference and
    /// retiring (`Live`), or while retiring (`Retiring`). `true` if the slot is free now and
    /// its id should be freed in the pool (also when it already was free: an id allocated for
    /// a free slot is a leak too).
    ///
    /// Only for a repair pass that has seen the same state for long enough that no live
    /// process can still be between those steps (the simulator waits several seconds).
    pub fn retire_orphan(&self) -> bool {
        if self.holders() != 0 {
            return false;
        }
        let cur = self.state_gen.load(SeqCst);
        match SlotState::from_u32(cur as u32) {
            Some(SlotState::Free) => true,
            Some(_) => self.retire_from(cur),
            // A corrupt state value: start the slot afresh in the next generation (its handles
            // stop being current at once, as in `retire_from`).
            None => {
                let next = ((cur >> 32) as u32).wrapping_add(1);
                self.sync.incarnation.store(next, SeqCst);
                self.state_gen
                    .compare_exchange(cur, word(next, SlotState::Free), SeqCst, SeqCst)
                    .is_ok()
            }
        }
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

impl Default for NotifySlot {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for NotifySlot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NotifySlot")
            .field("state", &self.state())
            .field("generation", &self.generation())
            .field("holders", &self.holders())
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
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
    }

    impl TestWaiter {
        pub(crate) fn new() -> Arc<Self> {
            Arc::new(TestWaiter {
                lock: Mutex::new(()),
                cv: Condvar::new(),
                epoch: Instant::now(),
                dead: Mutex::new(0),
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
            assert!(took < Duration::from_secs(5), "{limit:?}: took {took:?}");
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
        let end = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn layout() {
        assert_eq!(core::mem::size_of::<NotifySync>(), 80);
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
        let h =
            thread::spawn(move || s2.wait_and_reset(&*w2, args(1, Some(Duration::from_secs(10)))));
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
            thread::spawn(move || {
                s2.wait_and_reset(&*w2, args(proc, Some(Duration::from_millis(ms))))
            })
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
        let a = thread::spawn(move || {
            s2.wait_and_reset(&*w2, args(0, Some(Duration::from_millis(30))))
        });
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
            s.acquire(
                &*w,
                &Clock {
                    w: &*w,
                    deadline: None
                },
                &args(5, None)
            ),
            Ok(Ok(_))
        ));
        *w.dead.lock().unwrap() |= 1 << 5;
        let (s2, w2) = (s.clone(), w.clone());
        let b =
            thread::spawn(move || s2.wait_and_reset(&*w2, args(6, Some(Duration::from_secs(10)))));
        poll_until("b queued", || s.waiters() == 2);
        s.record(&*w);
        assert_eq!(b.join().unwrap(), Ok(WaitOutcome::Consumed));
        assert_eq!(s.waiters(), 0);
    }

    /// Puts ticket 0 of a fresh notify into `ring0` with `tail` tickets handed out (head 0),
    /// as a process that died between two steps (or a corrupting write) leaves it; records;
    /// then waits with no timeout on another thread, giving up after `patience`.
    fn wait_past_head(
        ring0: u32,
        tail: u32,
        patience: Duration,
    ) -> Result<WaitOutcome, TableError> {
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
        r
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
                wait_past_head(ring0, tail, Duration::from_secs(5)),
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
        let t0 = std::time::Instant::now();
        while !waiter.is_finished() && t0.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, SeqCst);
        s.wake_all(&*w);
        assert_eq!(waiter.join().unwrap(), Ok(WaitOutcome::Consumed));
        assert_eq!(s.waiters(), 0);
    }

    #[test]
    fn a_head_entry_that_cannot_be_repaired_is_reported_corrupt() {
        // State 3 does not exist; an entry of another round is not this ticket's.
        for bad in [
            entry(0, 3, 0),
            entry(7, ST_TAKEN, 1),
            entry(5, ST_CANCELLED, 0),
        ] {
            let t0 = std::time::Instant::now();
            assert_eq!(
                wait_past_head(bad, 1, Duration::from_secs(10)),
                Err(TableError::Corrupt),
                "head entry {bad:#x}"
            );
            // STUCK_LIMIT chunks, with room for a slow machine.
            assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
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
        slot.holders.store(0, SeqCst);
        slot.state_gen.store((u64::from(g) << 32) | 7, SeqCst);
        assert!(slot.retire_orphan());
        assert!(!slot.is_current(g));
        assert_eq!(slot.state(), Some(SlotState::Free));
    }

    #[test]
    fn ticket_holders_lists_the_queued_waiters_processes_in_order() {
        let w = TestWaiter::new();
        let s = NotifySync::new();
        assert_eq!(s.ticket_holders().count(), 0);
        let clock = Clock {
            w: &*w,
            deadline: None,
        };
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
        let clock = Clock {
            w: &*w,
            deadline: None,
        };
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
        slot.holders.fetch_and(!1, SeqCst);
        assert!(slot.retire_orphan());
        assert_eq!(slot.generation(), g + 1);
        let g2 = slot.claim(owner(1), CreateFlags::empty()).unwrap();
        assert_eq!(g2, g + 1);
        // The stalled retire (from the old incarnation's word) must fail now.
        assert!(!slot.retire_from(word(g, SlotState::Live)));
        assert!(slot.is_live(g2));
        assert_eq!(slot.holders(), 1 << 1);
        // A holder-less slot stuck in a transient state is repaired to free.
        slot.holders.store(0, SeqCst);
        slot.state_gen.store(word(g2, SlotState::Claiming), SeqCst);
        assert!(slot.retire_orphan());
        assert_eq!(slot.state(), Some(SlotState::Free));
        assert_eq!(slot.generation(), g2 + 1);
        // A free slot needs no retiring, but its allocated id is a leak.
        assert!(slot.retire_orphan());
        assert_eq!(slot.generation(), g2 + 1);
        // Corrupt state values are reset.
        slot.state_gen.store(word(7, SlotState::Free) | 9, SeqCst);
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
        let end = Instant::now() + Duration::from_secs(60);
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
}

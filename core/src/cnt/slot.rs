//! A count notify on the device side: the [`CntSync`] payload of a [`Slot`] — the 32-bit
//! count, the futex word its waiters sleep on and the last record's diagnostics — and the
//! record and wait operations on such a slot ([`CntSlot`]). The lifecycle (owner, generation,
//! claim, release, repair) is the one every slot kind shares ([`crate::slot`]); a count notify
//! is owner-only (no export, no importers): its owner is its one holder, and its destroy
//! [`release`](Slot::release)s the slot.

use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};

use super::{CntRecord, CntRecordMode, CntWaitMode, OnSatisfied};
use crate::slot::{Owner, Payload, Slot, SlotState};
use crate::waiter::{Clock, Look, TableError, WaitArgs, WaitOutcome, Waiter, wait_loop};

/// The last record applied to a count notify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CntLastRecord {
    /// Recording process.
    pub pid: i32,
    /// Its mode; `None` if the stored value is not a mode (corrupt).
    pub mode: Option<CntRecordMode>,
    /// Its operand.
    pub value: u32,
    /// When ([`Waiter::now_ns`] clock).
    pub at_ns: u64,
}

/// A count notify's payload. All-zero bytes are a count of 0 with no history.
#[repr(C)]
pub struct CntSync {
    count: AtomicU32,
    /// Futex word: bumped after every change of `count` (and when the slot is retired).
    seq: AtomicU32,
    /// Waits in progress (a hint: a record issues a wake-up only when it is non-zero).
    waiters: AtomicU32,
    last_pid: AtomicI32,
    last_mode: AtomicU32,
    last_value: AtomicU32,
    last_ns: AtomicU64,
}

/// One count notify in device (or shared) memory: a [`Slot`] whose payload is the count.
/// All-zero bytes are a free slot. 128 bytes (checked by a test).
pub type CntSlot = Slot<CntSync>;

const _: () = assert!(core::mem::size_of::<CntSlot>() == 128);

impl CntSync {
    /// A count of 0 with no history (all zero).
    pub const fn new() -> Self {
        CntSync {
            count: AtomicU32::new(0),
            seq: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            last_pid: AtomicI32::new(0),
            last_mode: AtomicU32::new(0),
            last_value: AtomicU32::new(0),
            last_ns: AtomicU64::new(0),
        }
    }

    /// Publishes a change of `count`: bumps the futex word, wakes sleepers if there are any.
    fn changed<W: Waiter>(&self, w: &W) {
        self.seq.fetch_add(1, SeqCst);
        if self.waiters.load(SeqCst) != 0 {
            w.wake(&self.seq, u32::MAX);
        }
    }

    /// Wakes every thread sleeping on this count (they re-check deadline, cancellation and
    /// the slot's generation).
    ///
    /// Bumps the futex word first, so that a waiter between its last look at the cancellation
    /// and its sleep (which a wake-up alone would miss: the futex still holds the value it
    /// expects) does not sleep at all and sees the cancellation at once, instead of a
    /// [`CHUNK`](crate::waiter::CHUNK) later. Loom found it (`core/tests/loom.rs`,
    /// `a_stopped_clearing_wait_gives_its_count_back`: a stop whose wake-up came between the
    /// wait's check and its sleep left the wait asleep for good under the model's futex,
    /// which has no timeouts). The others re-look once and sleep again.
    pub fn wake_all<W: Waiter>(&self, w: &W) {
        self.seq.fetch_add(1, SeqCst);
        w.wake(&self.seq, u32::MAX);
    }
}

impl Default for CntSync {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for CntSync {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CntSync")
            .field("count", &self.count.load(SeqCst))
            .field("waiters", &self.waiters.load(SeqCst))
            .finish_non_exhaustive()
    }
}

impl Payload for CntSync {
    const NEW: Self = CntSync::new();

    /// Count 0, no history, no waiters (a count left by a dead waiter is dropped).
    fn claimed(&self, _generation: u32) {
        self.count.store(0, SeqCst);
        self.seq.fetch_add(1, SeqCst);
        self.waiters.store(0, SeqCst);
        self.last_pid.store(0, SeqCst);
        self.last_mode.store(0, SeqCst);
        self.last_value.store(0, SeqCst);
        self.last_ns.store(0, SeqCst);
    }

    /// Sleepers wake to a new futex value and see the slot gone.
    fn retired(&self, _next: u32) {
        self.seq.fetch_add(1, SeqCst);
    }

    fn wake_all<W: Waiter>(&self, w: &W) {
        CntSync::wake_all(self, w);
    }
}

/// Decrements the waiter count when a wait ends, however it ends.
struct WaitingGuard<'a>(&'a AtomicU32);

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        // A CAS loop rather than `fetch_update` (deprecated on nightly for `try_update`).
        let mut n = self.0.load(SeqCst);
        while let Err(now) = self
            .0
            .compare_exchange_weak(n, n.saturating_sub(1), SeqCst, SeqCst)
        {
            n = now;
        }
    }
}

impl Slot<CntSync> {
    /// The current count.
    pub fn count(&self) -> u32 {
        self.sync.count.load(SeqCst)
    }

    /// Waits in progress (approximate: a process that died while waiting leaves its count
    /// until the slot is reused).
    pub fn waiters(&self) -> u32 {
        self.sync.waiters.load(SeqCst)
    }

    /// The last record, or `None` if none was applied since create.
    pub fn last_record(&self) -> Option<CntLastRecord> {
        let s = &self.sync;
        let pid = s.last_pid.load(SeqCst);
        (pid != 0).then(|| CntLastRecord {
            pid,
            mode: CntRecordMode::from_raw(s.last_mode.load(SeqCst)).ok(),
            value: s.last_value.load(SeqCst),
            at_ns: s.last_ns.load(SeqCst),
        })
    }

    /// Takes a freshly allocated (free) slot for `owner` (its only holder): count 0, no
    /// history. Returns the generation. `Err(Corrupt)` if the slot is not free (its id was
    /// handed out while in use), `Err(BadProc)` if `owner.proc` is out of range.
    pub fn claim(&self, owner: Owner) -> Result<u32, TableError> {
        self.claim_raw(owner, 0, |_| {})
    }

    /// Repairs a slot whose id is allocated but which is not live: left by a process killed
    /// between allocating the id and claiming the slot (`Free`), while claiming or releasing it
    /// (`Claiming`, `Retiring`), or between releasing it and freeing the id (`Free`). `true`
    /// if the slot is free now and the caller should free its id; `false` if it is live (or
    /// changed meanwhile).
    ///
    /// Only for a repair pass that has seen the same state for long enough that no live process
    /// can still be between those steps: the owner bit a dead claimer left is cleared.
    pub fn retire_abandoned(&self) -> bool {
        if self.state() == Some(SlotState::Live) {
            return false;
        }
        self.clear_stray_holders(u64::MAX);
        self.retire_orphan()
    }

    /// Applies a record and wakes the waiters if any; returns the new count. `pid` is noted as
    /// the last recorder.
    ///
    /// The count changes by one atomic operation (a store for SET), so records racing each
    /// other or a clearing wait (a CAS from the value it saw to 0) are applied in some order,
    /// none lost. The caller checks the slot is live at its generation first and holds a
    /// reference meanwhile, so the slot cannot be released and re-claimed between the check
    /// and the record (unless another process took the caller for dead: see the simulator).
    pub fn record<W: Waiter>(&self, w: &W, rec: CntRecord, pid: i32) -> u32 {
        let s = &self.sync;
        // The mode goes out before the count changes: a give-back that sees this record's
        // count then reads its mode, never the one before (`give_back`; loom found an `ADD`
        // that landed between a clear and its give-back read with the previous `SET`'s mode,
        // and the count given back lost: `core/tests/loom.rs`,
        // `a_stopped_clearing_wait_gives_its_count_back`). For a moment the diagnostics name
        // this mode with the previous record's other fields, as records racing each other can.
        s.last_mode.store(rec.mode as u32, SeqCst);
        let new = match rec.mode {
            CntRecordMode::Set => {
                s.count.store(rec.value, SeqCst);
                rec.value
            }
            CntRecordMode::Add => s.count.fetch_add(rec.value, SeqCst).wrapping_add(rec.value),
            CntRecordMode::BitOr => s.count.fetch_or(rec.value, SeqCst) | rec.value,
            CntRecordMode::BitAnd => s.count.fetch_and(rec.value, SeqCst) & rec.value,
        };
        s.last_pid.store(pid, SeqCst);
        s.last_value.store(rec.value, SeqCst);
        s.last_ns.store(w.now_ns(), SeqCst);
        s.changed(w);
        new
    }

    /// Stalls until `mode`/`value` holds for the count; then, with [`OnSatisfied::Clear`],
    /// sets it to 0 (atomically with the check). `args.proc` is not used (count waits take
    /// no ticket).
    ///
    /// `Ok(Consumed)` when satisfied, `Ok(TimedOut)`/`Ok(Cancelled)` otherwise (the count is
    /// untouched). `Err(Corrupt)` if the slot is not live at `generation` (released or
    /// overwritten while waiting).
    pub fn wait<W: Waiter>(
        &self,
        w: &W,
        generation: u32,
        mode: CntWaitMode,
        value: u32,
        on_satisfied: OnSatisfied,
        args: WaitArgs<'_>,
    ) -> Result<WaitOutcome, TableError> {
        self.wait_clearing(w, generation, mode, value, on_satisfied, args)
            .map(|(out, _)| out)
    }

    /// [`wait`](Self::wait), with what the wait took: the count it cleared (0 when it
    /// cleared nothing: [`OnSatisfied::Keep`], a count of 0, or not satisfied), for a caller
    /// that may have to [`give_back`](Self::give_back) it.
    pub fn wait_clearing<W: Waiter>(
        &self,
        w: &W,
        generation: u32,
        mode: CntWaitMode,
        value: u32,
        on_satisfied: OnSatisfied,
        args: WaitArgs<'_>,
    ) -> Result<(WaitOutcome, u32), TableError> {
        let s = &self.sync;
        let clock = Clock::start(w, args.timeout);
        s.waiters.fetch_add(1, SeqCst);
        let _guard = WaitingGuard(&s.waiters);
        wait_loop(
            w,
            &clock,
            args.cancel,
            || {
                let seq = s.seq.load(SeqCst);
                if !self.is_live(generation) {
                    return Look::Done(Err(TableError::Corrupt));
                }
                let v = s.count.load(SeqCst);
                if !mode.satisfied(v, value) {
                    return Look::Sleep(&s.seq, seq);
                }
                match on_satisfied {
                    OnSatisfied::Keep => Look::Done(Ok((WaitOutcome::Consumed, 0))),
                    OnSatisfied::Clear => {
                        if s.count.compare_exchange(v, 0, SeqCst, SeqCst).is_err() {
                            // The count moved between the check and the clear: look again.
                            return Look::Again;
                        }
                        if v != 0 {
                            s.changed(w);
                        }
                        Look::Done(Ok((WaitOutcome::Consumed, v)))
                    }
                }
            },
            |out| Ok((out, 0)),
            |_| Ok(()),
        )
    }

    /// Gives back `taken`, the count a satisfied clearing wait cleared
    /// ([`wait_clearing`](Self::wait_clearing)), as if that wait had not cleared it: a wait
    /// cut short once it had taken its count (its stream stopped: the platform decides)
    /// consumes nothing. Wakes the waiters, as a record does; the last record's diagnostics
    /// are left alone (this is no record). Nothing for 0.
    ///
    /// Nothing changed the count since the clear (the case a cut-short wait meets, which
    /// gives back at once): the count is `taken` again. Records that landed in between were
    /// applied to 0 instead of `taken`, which cannot be undone without knowing them all; the
    /// count is then made as the last of them would have made it from `taken`: an `ADD`
    /// adds `taken` back, a `BIT_OR` ORs it in, a `SET` leaves the count as it is. That is
    /// exact for one record in between (records racing each other there: the mode of one of
    /// them). The limit: "nothing changed" is read as a count of 0, so a record in between
    /// that leaves 0 (any `BIT_AND`, a `SET` of 0) is not seen, and the count is `taken`
    /// again. `core/tests/loom.rs` (`a_stopped_clearing_wait_gives_its_count_back`) checks
    /// this against a record landing at any point of the wait, the clear and the give-back.
    pub fn give_back<W: Waiter>(&self, w: &W, taken: u32) {
        if taken == 0 {
            return;
        }
        let s = &self.sync;
        let mut c = s.count.load(SeqCst);
        loop {
            let back = if c == 0 {
                taken
            } else {
                match CntRecordMode::from_raw(s.last_mode.load(SeqCst)) {
                    Ok(CntRecordMode::Add) => c.wrapping_add(taken),
                    Ok(CntRecordMode::BitOr) => c | taken,
                    _ => c,
                }
            };
            match s.count.compare_exchange(c, back, SeqCst, SeqCst) {
                Ok(_) => break,
                Err(now) => c = now,
            }
        }
        s.changed(w);
    }
}

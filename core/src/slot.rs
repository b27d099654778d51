//! The one slot state machine of every shared resource kind with an owner, holders and
//! incarnations: a [`Slot<P>`] is a kind's own part `P` (a notify's flag and waiter queue, a
//! count notify's count, a device-memory allocation's placement, an IPC event's record
//! counters: the [`Payload`]) plus the lifecycle every kind shares — the state word
//! (`generation << 32 | state`), the holder bitmap, the owner, the create flags, the export
//! (state and nonce) and the platform's whitelist index. Pointer-free, `#[repr(C)]`, atomics
//! only: a table of slots can live in memory shared by several processes.
//!
//! # The life of a slot
//!
//! Free → (claim) Claiming → Live (→ Orphaned) → Retiring → Free, the generation moving on
//! at the end of each incarnation, so handles and keys of an earlier incarnation of the id are
//! told apart. A slot is retired when its last holder [`leave`](Slot::leave)s (shared kinds:
//! notifies), when its owner [`release`](Slot::release)s it (owner-only kinds: count
//! notifies, which keep the owner as their only holder; device memory, once its importers
//! are gone too: [`orphan`](Slot::orphan); IPC events, which count their handles in the
//! payload, when the last handle goes: [`retire`](Slot::retire)), or by a repair pass
//! ([`reclaim_if`](Slot::reclaim_if), [`retire_orphan`](Slot::retire_orphan)).
//!
//! # Concurrency of the slot's operations
//!
//! Any thread of any process may call any operation on one slot at any time, so no operation
//! may read a field, decide, then write on the strength of what it read unless the write
//! re-checks it. Each one, and why it holds:
//!
//! - [`claim_raw`](Slot::claim_raw) (each kind's `claim`): a CAS Free → Claiming decides;
//!   only the winner fills in the fields, and it publishes Live last.
//! - [`export_with`](Slot::export_with): a CAS none → exporting decides; only the winner
//!   prepares, writes the nonce and publishes (issue 22: the nonce used to be written first).
//! - [`join`](Slot::join) (import): a CAS loop on the holder bitmap, refusing an empty one
//!   (nobody joins a slot that has no holder); then a re-check of the generation, undone by
//!   [`leave`](Slot::leave) if the slot was retired meanwhile.
//! - [`leave`](Slot::leave) (destroy): one `fetch_and` decides who was last; the retire is a
//!   CAS from the state word read while still holding, so it never acts on a later
//!   incarnation. [`release`](Slot::release) is one CAS from the state word of the
//!   incarnation named.
//! - [`retire_orphan`](Slot::retire_orphan) and
//!   [`clear_stray_holders`](Slot::clear_stray_holders) read, then write: they are for a
//!   repair pass that has seen the slot unchanged for a grace period and holds the process
//!   table entries whose bits it clears, so that nobody can be between the steps they repair.
//! - [`set_whitelist_index`](Slot::set_whitelist_index) is a plain store: it has one writer
//!   (the owner, while exporting).
//!
//! # Limits
//!
//! At most [`MAX_PROCS`] (64) processes can hold references to one table, because holders are
//! a 64-bit bitmap indexed by the process's slot in a process table (kept by the platform).
//! The bitmap makes references of a dead process reclaimable: the survivors clear its bit.
//!
//! # Trust
//!
//! Other processes write this memory: states and process indices read from it are validated
//! (an unknown state reads as `None`, and a repair starts such a slot afresh).

use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};

use crate::waiter::{TableError, Waiter};

/// Processes that can hold references to the slots of one table (holder bitmap width).
pub const MAX_PROCS: u32 = 64;

/// The kind-specific part of a [`Slot`]: what a record and a wait work on. All-zero bytes are
/// its idle state.
pub trait Payload {
    /// The idle payload (all zero).
    const NEW: Self;

    /// A new incarnation `generation` is being claimed: reset what the last one left (the slot
    /// is not live yet, so nobody else touches the payload).
    fn claimed(&self, generation: u32);

    /// The incarnation ended; `next` is the generation the slot moves on to. Called first in
    /// the retire, so that a handle of the old incarnation stops being served at once.
    fn retired(&self, next: u32);

    /// Wakes every thread sleeping on the payload (they re-check their deadline,
    /// cancellation and the slot's incarnation).
    fn wake_all<W: Waiter>(&self, w: &W);
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
    /// Being retired (transient).
    Retiring = 2,
    /// Being initialised by its creator (transient).
    Claiming = 3,
    /// Let go by its owner (freed, or its owner died) while others still use it (device
    /// memory that other processes import): it cannot be exported or freed again, and is
    /// [`release`](Slot::release)d when the last user goes.
    Orphaned = 4,
}

impl SlotState {
    pub(crate) const fn from_u32(v: u32) -> Option<SlotState> {
        match v {
            0 => Some(SlotState::Free),
            1 => Some(SlotState::Live),
            2 => Some(SlotState::Retiring),
            3 => Some(SlotState::Claiming),
            4 => Some(SlotState::Orphaned),
            _ => None,
        }
    }
}

/// The slot's state word: `generation << 32 | state`, changed only by compare-and-swap, so a
/// transition is always made on the incarnation (generation) the caller knows.
pub(crate) const fn word(generation: u32, state: SlotState) -> u64 {
    ((generation as u64) << 32) | state as u64
}

/// The export word while one export call, having won it, writes the nonce (see
/// [`Slot::export_with`]); never a published state.
const EXPORTING: u32 = 3;

/// How a slot's resource was exported.
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

/// What [`Slot::leave`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Leave {
    /// The process did not hold the slot (nothing changed).
    NotHeld,
    /// Other processes still hold it.
    StillHeld,
    /// This was the last holder: the slot has been retired (generation bumped, state free);
    /// the caller now frees the id in its pool. (If the last holder finds the slot already
    /// being retired or re-used — a repair pass took over — the answer is `StillHeld`: the
    /// id is not the caller's to free.)
    Last,
}

/// The owner of a slot's resource, as recorded at create.
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
    /// The owner's slot in the process table: its holder bit.
    pub proc: u32,
}

/// The lifecycle half of a slot: every field but the payload. All-zero bytes are a free slot.
#[repr(C)]
pub(crate) struct Life {
    /// `generation << 32 | SlotState`.
    pub(crate) state_gen: AtomicU64,
    pub(crate) holders: AtomicU64,
    flags: AtomicU32,
    export: AtomicU32,
    nonce: [AtomicU64; 2],
    owner_pid: AtomicI32,
    owner_server: AtomicU32,
    owner_start: AtomicU64,
    owner_device: AtomicU32,
    owner_proc: AtomicU32,
    whitelist: AtomicU32,
    /// The pid of the owner that destroyed its handle while other references (queued tasks,
    /// importers) kept the resource (0: not destroyed): for diagnostics.
    destroyed_by: AtomicI32,
}

/// One shared resource: its kind's payload `P` plus the lifecycle all kinds share (see the
/// module docs). All-zero bytes are a free slot; aligned to a 64-byte cache line so that no
/// two slots share one.
#[repr(C, align(64))]
pub struct Slot<P> {
    /// The kind's own part (a notify's flag and waiter queue, a count notify's count).
    pub sync: P,
    pub(crate) life: Life,
}

impl<P: Payload> Slot<P> {
    /// A free slot (all zero).
    pub const fn new() -> Self {
        Slot {
            sync: P::NEW,
            life: Life {
                state_gen: AtomicU64::new(0),
                holders: AtomicU64::new(0),
                flags: AtomicU32::new(0),
                export: AtomicU32::new(0),
                nonce: [AtomicU64::new(0), AtomicU64::new(0)],
                owner_pid: AtomicI32::new(0),
                owner_server: AtomicU32::new(0),
                owner_start: AtomicU64::new(0),
                owner_device: AtomicU32::new(0),
                owner_proc: AtomicU32::new(0),
                whitelist: AtomicU32::new(0),
                destroyed_by: AtomicI32::new(0),
            },
        }
    }

    /// The slot's state; an invalid stored value reads as `None` (corrupt).
    pub fn state(&self) -> Option<SlotState> {
        SlotState::from_u32(self.life.state_gen.load(SeqCst) as u32)
    }

    /// The generation: bumped every time the id is released, so stale keys and handles of an
    /// earlier use of the id are recognised.
    pub fn generation(&self) -> u32 {
        (self.life.state_gen.load(SeqCst) >> 32) as u32
    }

    /// Whether the slot is live in generation `generation`.
    pub fn is_live(&self, generation: u32) -> bool {
        self.life.state_gen.load(SeqCst) == word(generation, SlotState::Live)
    }

    /// Whether the slot is in `state` in generation `generation`.
    pub fn is_in(&self, generation: u32, state: SlotState) -> bool {
        self.life.state_gen.load(SeqCst) == word(generation, state)
    }

    /// Whether incarnation `generation` still holds its resource: live, or orphaned by its
    /// owner while others use it.
    pub fn holds(&self, generation: u32) -> bool {
        let w = self.life.state_gen.load(SeqCst);
        w == word(generation, SlotState::Live) || w == word(generation, SlotState::Orphaned)
    }

    /// The holder bitmap (bit `p` = process-table slot `p` holds a reference).
    pub fn holders(&self) -> u64 {
        self.life.holders.load(SeqCst)
    }

    /// The create flags as stored at claim (the kind gives them a type).
    pub fn flag_bits(&self) -> u32 {
        self.life.flags.load(SeqCst)
    }

    /// How the resource was exported; an invalid stored value reads as `None` (corrupt). An
    /// export in progress reads as [`ExportState::None`]: its key is not out yet.
    pub fn export_state(&self) -> Option<ExportState> {
        match self.life.export.load(SeqCst) {
            0 | EXPORTING => Some(ExportState::None),
            1 => Some(ExportState::Enforced),
            2 => Some(ExportState::Open),
            _ => None,
        }
    }

    /// The export nonce (meaningful once exported).
    pub fn nonce(&self) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[..8].copy_from_slice(&self.life.nonce[0].load(SeqCst).to_le_bytes());
        out[8..].copy_from_slice(&self.life.nonce[1].load(SeqCst).to_le_bytes());
        out
    }

    /// The owner recorded at create (unvalidated numbers: check `device`/`proc` before use).
    pub fn owner(&self) -> Owner {
        Owner {
            pid: self.life.owner_pid.load(SeqCst),
            start_time: self.life.owner_start.load(SeqCst),
            server: self.life.owner_server.load(SeqCst),
            device: self.life.owner_device.load(SeqCst),
            proc: self.life.owner_proc.load(SeqCst),
        }
    }

    /// Notes that the owner, process `pid`, destroyed its handle while other references
    /// (its queued tasks, importers) keep the resource: what a diagnosis of a wait on it says.
    pub fn note_destroyed(&self, pid: i32) {
        self.life.destroyed_by.store(pid, SeqCst);
    }

    /// The pid of the owner that destroyed its handle ([`note_destroyed`](Self::note_destroyed)),
    /// if it did.
    pub fn destroyed_by(&self) -> Option<i32> {
        match self.life.destroyed_by.load(SeqCst) {
            0 => None,
            pid => Some(pid),
        }
    }

    /// The platform's whitelist index for this slot (0 = none; meaning is the platform's).
    pub fn whitelist_index(&self) -> u32 {
        self.life.whitelist.load(SeqCst)
    }

    /// Sets the platform's whitelist index.
    pub fn set_whitelist_index(&self, index: u32) {
        self.life.whitelist.store(index, SeqCst);
    }

    /// Takes a freshly allocated (free) slot for its creator: fills in the metadata (with
    /// the create flags `flags` as the kind stores them), makes process `owner.proc` the only
    /// holder, resets the payload ([`Payload::claimed`]), lets `fill` write what the creator
    /// knows of it (where a memory allocation lies) and marks the slot live. Returns the
    /// generation. Each kind's `claim` is this with its own flag type.
    ///
    /// `Err(BadProc)` if `owner.proc` is out of range, `Err(Corrupt)` if the slot is not free
    /// (its id was handed out while still in use); the slot is left untouched then.
    pub fn claim_raw(
        &self,
        owner: Owner,
        flags: u32,
        fill: impl FnOnce(&P),
    ) -> Result<u32, TableError> {
        if owner.proc >= MAX_PROCS {
            return Err(TableError::BadProc);
        }
        let l = &self.life;
        let cur = l.state_gen.load(SeqCst);
        let generation = (cur >> 32) as u32;
        if cur != word(generation, SlotState::Free)
            || l.state_gen
                .compare_exchange(cur, word(generation, SlotState::Claiming), SeqCst, SeqCst)
                .is_err()
        {
            return Err(TableError::Corrupt);
        }
        l.flags.store(flags, SeqCst);
        l.export.store(ExportState::None as u32, SeqCst);
        l.nonce[0].store(0, SeqCst);
        l.nonce[1].store(0, SeqCst);
        l.owner_pid.store(owner.pid, SeqCst);
        l.owner_start.store(owner.start_time, SeqCst);
        l.owner_server.store(owner.server, SeqCst);
        l.owner_device.store(owner.device, SeqCst);
        l.owner_proc.store(owner.proc, SeqCst);
        l.whitelist.store(0, SeqCst);
        l.destroyed_by.store(0, SeqCst);
        // No one joins a slot without holders, so the bitmap is ours to set; a stray bit
        // (corrupt memory) is overwritten.
        l.holders.store(1 << owner.proc, SeqCst);
        self.sync.claimed(generation);
        fill(&self.sync);
        l.state_gen.store(word(generation, SlotState::Live), SeqCst);
        Ok(generation)
    }

    /// Publishes the export: stores the nonce, then the export state. `false` if the resource
    /// was already exported (or is being exported, or is not live).
    pub fn export(&self, nonce: [u8; 16], how: ExportState) -> bool {
        self.export_with(nonce, how, || Ok::<(), core::convert::Infallible>(())) == Ok(true)
    }

    /// [`export`](Self::export), running `prepare` once this call has won the export and
    /// before the export is published (the simulator empties the notify's whitelist there).
    /// `Ok(false)` if another export got there first, or the slot is not live; `Err` if
    /// `prepare` failed (the slot is left not exported, and may be exported again).
    ///
    /// Atomic against any number of concurrent exports, from any thread or process: the
    /// winner is the one call whose compare-and-swap moves the export word from "none" to
    /// "being exported"; only it writes the nonce and only it publishes. (Storing the nonce
    /// before that CAS let a losing call overwrite the winner's nonce, so the winner's key
    /// never matched.) Importers read "being exported" as not exported: its key has not been
    /// handed out yet.
    ///
    /// The caller must hold a reference to the slot (its holder bit) for the whole call, so
    /// the incarnation cannot be retired under it. If it is anyway (a repair took the caller's
    /// process for dead), the final CAS finds the word reset and the call answers `Ok(false)`;
    /// only then may the nonce words it wrote land in a later incarnation that is itself
    /// between its own claim and publish, whose key would then fail to import (107017): a
    /// failure, never a resource opened to the wrong key.
    pub fn export_with<E>(
        &self,
        nonce: [u8; 16],
        how: ExportState,
        prepare: impl FnOnce() -> Result<(), E>,
    ) -> Result<bool, E> {
        let l = &self.life;
        if how == ExportState::None || self.state() != Some(SlotState::Live) {
            return Ok(false);
        }
        if l.export
            .compare_exchange(ExportState::None as u32, EXPORTING, SeqCst, SeqCst)
            .is_err()
        {
            return Ok(false);
        }
        if let Err(e) = prepare() {
            let _ = l
                .export
                .compare_exchange(EXPORTING, ExportState::None as u32, SeqCst, SeqCst);
            return Err(e);
        }
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&nonce[..8]);
        hi.copy_from_slice(&nonce[8..]);
        l.nonce[0].store(u64::from_le_bytes(lo), SeqCst);
        l.nonce[1].store(u64::from_le_bytes(hi), SeqCst);
        Ok(l.export
            .compare_exchange(EXPORTING, how as u32, SeqCst, SeqCst)
            .is_ok())
    }

    /// Withdraws the export (the owner closes it: device memory's `aclrtIpcMemClose`): not
    /// exported, nonce cleared. Keys handed out stop matching.
    pub fn unexport(&self) {
        self.life.export.store(ExportState::None as u32, SeqCst);
        self.life.nonce[0].store(0, SeqCst);
        self.life.nonce[1].store(0, SeqCst);
    }

    /// Adds process `proc` as a holder of the live slot of generation `generation`.
    ///
    /// `Ok(true)` if the bit was newly set, `Ok(false)` if `proc` already held it; `Err(None)`
    /// if the slot is gone (no holder left, or another generation) — stale. On a generation
    /// mismatch discovered after joining, the reference is dropped again (which may retire
    /// the slot: then `Err(Some(Leave::Last))` tells the caller to free the id).
    pub fn join(&self, proc: u32, generation: u32) -> Result<bool, Option<Leave>> {
        if proc >= MAX_PROCS {
            return Err(None);
        }
        let bit = 1u64 << proc;
        let mut cur = self.life.holders.load(SeqCst);
        let newly = loop {
            if cur == 0 {
                return Err(None);
            }
            if cur & bit != 0 {
                break false;
            }
            match self
                .life
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
        let held = self.life.state_gen.load(SeqCst);
        let bit = 1u64 << proc;
        let old = self.life.holders.fetch_and(!bit, SeqCst);
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

    /// Retires the live (or orphaned) incarnation `generation` whatever its holders (an
    /// owner-only kind's destroy, the last importer of orphaned memory, or a repair that found
    /// the owner dead), and wakes the payload's sleepers, who then see the slot gone. `true`
    /// if this call retired it — the caller then frees the id in its pool; `false` if it was
    /// not live at that generation (already released, e.g. by a racing garbage collection).
    pub fn release<W: Waiter>(&self, w: &W, generation: u32) -> bool {
        if !self.retire(generation) {
            return false;
        }
        self.sync.wake_all(w);
        true
    }

    /// [`release`](Self::release) without the wake-up, for a payload nobody sleeps on.
    pub fn retire(&self, generation: u32) -> bool {
        self.retire_from(word(generation, SlotState::Live))
            || self.retire_from(word(generation, SlotState::Orphaned))
    }

    /// The owner lets the live incarnation `generation` go while others still use it: Live →
    /// Orphaned. `false` if it was not live at that generation.
    pub fn orphan(&self, generation: u32) -> bool {
        self.life
            .state_gen
            .compare_exchange(
                word(generation, SlotState::Live),
                word(generation, SlotState::Orphaned),
                SeqCst,
                SeqCst,
            )
            .is_ok()
    }

    /// Wakes every thread sleeping on the slot's payload (they re-check their deadline,
    /// cancellation and the slot's incarnation); used to cancel waits promptly.
    pub fn wake_all<W: Waiter>(&self, w: &W) {
        self.sync.wake_all(w);
    }

    /// Retires the slot if it is live and `dead(owner)` says its owner is gone (garbage
    /// collection after a process died). `true` if this call retired it; the caller frees the
    /// id.
    pub fn reclaim_if<W: Waiter>(&self, w: &W, dead: impl FnOnce(&Owner) -> bool) -> bool {
        let cur = self.life.state_gen.load(SeqCst);
        if SlotState::from_u32(cur as u32) != Some(SlotState::Live) {
            return false;
        }
        dead(&self.owner()) && self.release(w, (cur >> 32) as u32)
    }

    /// Retires the incarnation whose state word is `from` (Live, or a transient state left
    /// by a dead process): clears the payload, export and holders, bumps the generation, marks
    /// it free. `false` if the word changed meanwhile (someone else retired or re-used the
    /// slot).
    pub(crate) fn retire_from(&self, from: u64) -> bool {
        let l = &self.life;
        let generation = (from >> 32) as u32;
        if from != word(generation, SlotState::Retiring)
            && l.state_gen
                .compare_exchange(from, word(generation, SlotState::Retiring), SeqCst, SeqCst)
                .is_err()
        {
            return false;
        }
        // First, so that a handle of this incarnation stops being served at once.
        self.sync.retired(generation.wrapping_add(1));
        l.export.store(ExportState::None as u32, SeqCst);
        l.whitelist.store(0, SeqCst);
        l.destroyed_by.store(0, SeqCst);
        // Nobody joins a retiring slot (a join refuses an empty bitmap, and a shared kind
        // retires only once its last holder left): what is left is an owner-only kind's owner
        // bit, or a bit a repair pass already found stray.
        l.holders.store(0, SeqCst);
        l.state_gen
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
    /// vanished without its references being reclaimed), which would otherwise keep the slot
    /// alive, and its id allocated, for ever. Bits outside `mask` are kept, so a process
    /// joining meanwhile keeps its reference; the slot is not retired here: when the answer
    /// is 0, follow with [`retire_orphan`](Self::retire_orphan).
    ///
    /// Only for a repair pass that has established that no process owns the bits in `mask`
    /// and that none can take those process-table slots until this returns (the simulator
    /// claims them for the duration): a live reference cleared here would be lost.
    pub fn clear_stray_holders(&self, mask: u64) -> u64 {
        self.life.holders.fetch_and(!mask, SeqCst) & !mask
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
        let cur = self.life.state_gen.load(SeqCst);
        match SlotState::from_u32(cur as u32) {
            Some(SlotState::Free) => true,
            Some(_) => self.retire_from(cur),
            // A corrupt state value: start the slot afresh in the next generation (its handles
            // stop being served at once, as in `retire_from`).
            None => {
                let next = ((cur >> 32) as u32).wrapping_add(1);
                self.sync.retired(next);
                self.life
                    .state_gen
                    .compare_exchange(cur, word(next, SlotState::Free), SeqCst, SeqCst)
                    .is_ok()
            }
        }
    }
}

impl<P: Payload> Default for Slot<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: core::fmt::Debug> core::fmt::Debug for Slot<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let w = self.life.state_gen.load(SeqCst);
        f.debug_struct("Slot")
            .field("state", &SlotState::from_u32(w as u32))
            .field("generation", &((w >> 32) as u32))
            .field("holders", &self.life.holders.load(SeqCst))
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;

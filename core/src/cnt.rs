//! Count notifies (SPEC §6, Ascend 950 family): a 32-bit counter per id instead of a binary
//! flag. Records set, add to, OR into or AND into the count; a wait stalls until a comparison
//! with the count holds (less, equal, bigger, bigger-or-equal, all bits of a mask set), then
//! optionally clears it to 0.
//!
//! This module holds the C-visible vocabulary — the mode values, the `#[repr(C)]` info
//! structs with CANN's layouts ([`CntRecordInfo`] 8 bytes, [`CntWaitInfo`] 16 bytes) and their
//! validation — and the device-side slot ([`CntSlot`]) that firmware and the simulator run:
//! pointer-free, atomics only, so a table of them can live in memory shared by processes.
//! Blocking and waking go through the notify table's [`Waiter`] trait.
//!
//! # Semantics
//!
//! - A record applies its mode atomically: `SET` stores, `ADD` adds **wrapping at 2³²**
//!   (`0xFFFF_FFFF + 2 == 1`), `BIT_OR`/`BIT_AND` combine. Every waiter whose condition now
//!   holds is released — unlike a binary notify, one record can release many waits.
//! - A wait whose condition already holds passes at once. With clear-on-wait the count is
//!   set to 0 by a compare-and-swap from exactly the value that satisfied the condition, so two
//!   clearing waiters never both consume the same count, and a record that lands in between
//!   is never lost (the CAS fails and the waiter re-evaluates).
//! - Reset is a record of `SET 0`.
//! - Ids come from a pool of their own, separate from notify ids ([`CntPools`],
//!   [`max_cnt_notifies`]).
//!
//! # Trust
//!
//! Other processes write a shared slot: states are validated, loops sleep in chunks of at most
//! [`CHUNK`](crate::table::CHUNK) and re-check their deadline, cancellation and the slot's
//! generation, so a corrupted or recycled slot ends a wait with an error instead of a hang.

use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use core::time::Duration;

use crate::error::{Error, Result};
use crate::soc::{Feature, Soc};
use crate::table::{Clock, TableError, WaitOutcome, Waiter};
use crate::timeout::Timeout;

/// Count notifies per device on a SoC that has them (**\[ours\]**: CANN does not document the
/// limit; this is the pool capacity the simulator and firmware use).
pub const MAX_CNT_NOTIFIES: u32 = 8192;

/// Count notifies per device on `soc`: [`MAX_CNT_NOTIFIES`] on the 950 family, 0 elsewhere.
pub const fn max_cnt_notifies(soc: Soc) -> u32 {
    if soc.has(Feature::CntNotify) {
        MAX_CNT_NOTIFIES
    } else {
        0
    }
}

/// The count-notify id pools of a SoC type that has count notifies. Implemented for
/// [`Ascend950PR`](crate::soc::Ascend950PR) and [`Ascend950DT`](crate::soc::Ascend950DT)
/// only, so asking another SoC for its count-notify pool does not compile.
pub trait CntPools: crate::soc::CntNotify {
    /// Count notifies per device.
    const MAX_CNT_NOTIFIES: u32;
    /// A plain pool of that capacity.
    type CntPool;
    /// The same capacity as a lock-free shared-memory pool.
    #[cfg(target_has_atomic = "64")]
    type AtomicCntPool;
}

impl CntPools for crate::soc::Ascend950PR {
    const MAX_CNT_NOTIFIES: u32 = MAX_CNT_NOTIFIES;
    type CntPool = crate::pool::IdPool<{ MAX_CNT_NOTIFIES as usize }>;
    #[cfg(target_has_atomic = "64")]
    type AtomicCntPool = AtomicCntIdPool;
}

impl CntPools for crate::soc::Ascend950DT {
    const MAX_CNT_NOTIFIES: u32 = MAX_CNT_NOTIFIES;
    type CntPool = crate::pool::IdPool<{ MAX_CNT_NOTIFIES as usize }>;
    #[cfg(target_has_atomic = "64")]
    type AtomicCntPool = AtomicCntIdPool;
}

/// The shared-memory count-notify pool of the 950 family (both SoCs have the same capacity).
#[cfg(target_has_atomic = "64")]
pub type AtomicCntIdPool = crate::pool::AtomicIdPool<
    { MAX_CNT_NOTIFIES as usize },
    { crate::pool::words(MAX_CNT_NOTIFIES as usize) },
>;

/// `aclrtCntNotifyRecordMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum CntRecordMode {
    /// `ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE`: count = value.
    Set = 0,
    /// `ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE`: count += value, wrapping at 2³².
    Add = 1,
    /// `ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE`: count |= value.
    BitOr = 2,
    /// `ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE`: count &= value.
    BitAnd = 4,
}

impl CntRecordMode {
    /// Every mode, in C-value order.
    pub const ALL: [CntRecordMode; 4] = [
        CntRecordMode::Set,
        CntRecordMode::Add,
        CntRecordMode::BitOr,
        CntRecordMode::BitAnd,
    ];

    /// Decodes the C value: 0, 1, 2 or 4; anything else (3, ≥ 5) is `ParamInvalid` (107000).
    pub const fn from_raw(raw: u32) -> Result<Self> {
        match raw {
            0 => Ok(CntRecordMode::Set),
            1 => Ok(CntRecordMode::Add),
            2 => Ok(CntRecordMode::BitOr),
            4 => Ok(CntRecordMode::BitAnd),
            _ => Err(Error::ParamInvalid),
        }
    }

    /// The C macro name.
    pub const fn name(self) -> &'static str {
        match self {
            CntRecordMode::Set => "ACL_RT_CNT_NOTIFY_RECORD_SET_VALUE_MODE",
            CntRecordMode::Add => "ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE",
            CntRecordMode::BitOr => "ACL_RT_CNT_NOTIFY_RECORD_BIT_OR_MODE",
            CntRecordMode::BitAnd => "ACL_RT_CNT_NOTIFY_RECORD_BIT_AND_MODE",
        }
    }

    /// The count after applying this mode with `value` to `count`.
    pub const fn apply(self, count: u32, value: u32) -> u32 {
        match self {
            CntRecordMode::Set => value,
            CntRecordMode::Add => count.wrapping_add(value),
            CntRecordMode::BitOr => count | value,
            CntRecordMode::BitAnd => count & value,
        }
    }
}

/// `aclrtCntNotifyWaitMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u32)]
pub enum CntWaitMode {
    /// `ACL_RT_CNT_NOTIFY_WAIT_LESS_MODE`: count < value.
    Less = 0,
    /// `ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE`: count == value.
    Equal = 1,
    /// `ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE`: count > value.
    Bigger = 2,
    /// `ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE`: count >= value.
    BiggerOrEqual = 3,
    /// `ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE`: count & value == value.
    EqualWithBitmask = 4,
}

impl CntWaitMode {
    /// Every mode, in C-value order.
    pub const ALL: [CntWaitMode; 5] = [
        CntWaitMode::Less,
        CntWaitMode::Equal,
        CntWaitMode::Bigger,
        CntWaitMode::BiggerOrEqual,
        CntWaitMode::EqualWithBitmask,
    ];

    /// Decodes the C value 0..=4; ≥ 5 is `ParamInvalid` (107000).
    pub const fn from_raw(raw: u32) -> Result<Self> {
        match raw {
            0 => Ok(CntWaitMode::Less),
            1 => Ok(CntWaitMode::Equal),
            2 => Ok(CntWaitMode::Bigger),
            3 => Ok(CntWaitMode::BiggerOrEqual),
            4 => Ok(CntWaitMode::EqualWithBitmask),
            _ => Err(Error::ParamInvalid),
        }
    }

    /// The C macro name.
    pub const fn name(self) -> &'static str {
        match self {
            CntWaitMode::Less => "ACL_RT_CNT_NOTIFY_WAIT_LESS_MODE",
            CntWaitMode::Equal => "ACL_RT_CNT_NOTIFY_WAIT_EQUAL_MODE",
            CntWaitMode::Bigger => "ACL_RT_CNT_NOTIFY_WAIT_BIGGER_MODE",
            CntWaitMode::BiggerOrEqual => "ACL_RT_CNT_NOTIFY_WAIT_BIGGER_OR_EQUAL_MODE",
            CntWaitMode::EqualWithBitmask => "ACL_RT_CNT_NOTIFY_WAIT_EQUAL_WITH_BITMASK_MODE",
        }
    }

    /// The comparison as a short formula, for messages (`count < value`).
    pub const fn formula(self) -> &'static str {
        match self {
            CntWaitMode::Less => "count < value",
            CntWaitMode::Equal => "count == value",
            CntWaitMode::Bigger => "count > value",
            CntWaitMode::BiggerOrEqual => "count >= value",
            CntWaitMode::EqualWithBitmask => "count & value == value",
        }
    }

    /// Whether a wait in this mode with `value` is satisfied by `count`.
    pub const fn satisfied(self, count: u32, value: u32) -> bool {
        match self {
            CntWaitMode::Less => count < value,
            CntWaitMode::Equal => count == value,
            CntWaitMode::Bigger => count > value,
            CntWaitMode::BiggerOrEqual => count >= value,
            CntWaitMode::EqualWithBitmask => count & value == value,
        }
    }
}

/// `aclrtCntNotifyRecordInfo` exactly as C lays it out: `{ uint32 mode; uint32 value; }`,
/// 8 bytes. Untrusted until [`CntRecord::from_info`] has validated it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(C)]
pub struct CntRecordInfo {
    /// An `aclrtCntNotifyRecordMode` value.
    pub mode: u32,
    /// The operand.
    pub value: u32,
}

/// `aclrtCntNotifyWaitInfo` exactly as C lays it out: `{ uint32 mode; uint32 value;
/// uint32 timeout; uint8 isClear; uint8 rsv[3]; }`, 16 bytes (CANN's `acl_rt.h`). Untrusted
/// until [`CntWait::from_info`] has validated it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(C)]
pub struct CntWaitInfo {
    /// An `aclrtCntNotifyWaitMode` value.
    pub mode: u32,
    /// The operand.
    pub value: u32,
    /// Seconds; 0 = forever, `u32::MAX` = the process default (as for notify waits).
    pub timeout: u32,
    /// Non-zero: set the count to 0 when the wait is satisfied. A byte, not a Rust `bool`, so
    /// any value C stores is valid.
    pub is_clear: u8,
    /// Reserved; ignored.
    pub rsv: [u8; 3],
}

const _: () = assert!(core::mem::size_of::<CntRecordInfo>() == 8);
const _: () = assert!(core::mem::align_of::<CntRecordInfo>() == 4);
const _: () = assert!(core::mem::size_of::<CntWaitInfo>() == 16);
const _: () = assert!(core::mem::align_of::<CntWaitInfo>() == 4);
const _: () = assert!(core::mem::offset_of!(CntWaitInfo, timeout) == 8);
const _: () = assert!(core::mem::offset_of!(CntWaitInfo, is_clear) == 12);

/// A validated record: what to do to the count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CntRecord {
    /// The operation.
    pub mode: CntRecordMode,
    /// Its operand.
    pub value: u32,
}

impl CntRecord {
    /// count = `value`.
    pub const fn set(value: u32) -> Self {
        CntRecord {
            mode: CntRecordMode::Set,
            value,
        }
    }
    /// count += `value` (wrapping).
    pub const fn add(value: u32) -> Self {
        CntRecord {
            mode: CntRecordMode::Add,
            value,
        }
    }
    /// count |= `value`.
    pub const fn bit_or(value: u32) -> Self {
        CntRecord {
            mode: CntRecordMode::BitOr,
            value,
        }
    }
    /// count &= `value`.
    pub const fn bit_and(value: u32) -> Self {
        CntRecord {
            mode: CntRecordMode::BitAnd,
            value,
        }
    }

    /// Validates a C record info: an unknown mode (3, ≥ 5) is `ParamInvalid` (107000).
    pub const fn from_info(info: &CntRecordInfo) -> Result<Self> {
        match CntRecordMode::from_raw(info.mode) {
            Ok(mode) => Ok(CntRecord {
                mode,
                value: info.value,
            }),
            Err(e) => Err(e),
        }
    }

    /// The C form.
    pub const fn to_info(self) -> CntRecordInfo {
        CntRecordInfo {
            mode: self.mode as u32,
            value: self.value,
        }
    }
}

/// What a satisfied wait does to the count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum OnSatisfied {
    /// Leave the count as it is (`isClear` 0).
    Keep,
    /// Set the count to 0 (`isClear` ≠ 0).
    Clear,
}

/// A validated wait: the condition, what to do once it holds, and the timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CntWait {
    /// The comparison.
    pub mode: CntWaitMode,
    /// Its operand.
    pub value: u32,
    /// What a satisfied wait does to the count.
    pub on_satisfied: OnSatisfied,
    /// How long the stream may stall before the task fails (107020 at the next synchronize).
    pub timeout: Timeout,
}

impl CntWait {
    /// A wait for `mode`/`value` that keeps the count and waits forever.
    pub const fn new(mode: CntWaitMode, value: u32) -> Self {
        CntWait {
            mode,
            value,
            on_satisfied: OnSatisfied::Keep,
            timeout: Timeout::Forever,
        }
    }

    /// The same wait, clearing the count when satisfied.
    pub const fn clearing(mut self) -> Self {
        self.on_satisfied = OnSatisfied::Clear;
        self
    }

    /// The same wait with another timeout.
    pub const fn with_timeout(mut self, timeout: Timeout) -> Self {
        self.timeout = timeout;
        self
    }

    /// Validates a C wait info: a mode ≥ 5 is `ParamInvalid` (107000). `rsv` is ignored.
    pub const fn from_info(info: &CntWaitInfo) -> Result<Self> {
        let mode = match CntWaitMode::from_raw(info.mode) {
            Ok(m) => m,
            Err(e) => return Err(e),
        };
        Ok(CntWait {
            mode,
            value: info.value,
            on_satisfied: if info.is_clear != 0 {
                OnSatisfied::Clear
            } else {
                OnSatisfied::Keep
            },
            timeout: Timeout::from_c(info.timeout),
        })
    }

    /// The C form.
    pub const fn to_info(self) -> CntWaitInfo {
        CntWaitInfo {
            mode: self.mode as u32,
            value: self.value,
            timeout: self.timeout.to_c(),
            is_clear: match self.on_satisfied {
                OnSatisfied::Keep => 0,
                OnSatisfied::Clear => 1,
            },
            rsv: [0; 3],
        }
    }
}

/// Whether a count slot is in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum CntSlotState {
    /// Not allocated (all-zero).
    Free,
    /// Allocated and initialised.
    Live,
    /// Being claimed or retired by some process (transient).
    Busy,
}

const S_FREE: u32 = 0;
const S_LIVE: u32 = 1;
const S_BUSY: u32 = 2;

/// The owner of a count notify, as recorded at create.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct CntOwner {
    /// Process id.
    pub pid: i32,
    /// Process start time (platform clock ticks; 0 unknown).
    pub start_time: u64,
    /// Device.
    pub device: u32,
    /// The owner's slot in the platform's process table (informational).
    pub proc: u32,
}

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

/// One count notify in device (or shared) memory. All-zero bytes are a free slot. 64 bytes.
#[repr(C)]
pub struct CntSlot {
    count: AtomicU32,
    /// Futex word: bumped after every change of `count`.
    seq: AtomicU32,
    /// Waits in progress (a hint: a record issues a wake-up only when it is non-zero).
    waiters: AtomicU32,
    state: AtomicU32,
    generation: AtomicU32,
    owner_device: AtomicU32,
    owner_pid: AtomicI32,
    owner_proc: AtomicU32,
    owner_start: AtomicU64,
    last_pid: AtomicI32,
    last_mode: AtomicU32,
    last_ns: AtomicU64,
    last_value: AtomicU32,
    _reserved: AtomicU32,
}

const _: () = assert!(core::mem::size_of::<CntSlot>() == 64);

/// Arguments of one count wait.
#[derive(Clone, Copy)]
pub struct CntWaitArgs<'a> {
    /// The generation the waiter's handle refers to; a slot that moved on ends the wait with
    /// [`TableError::Corrupt`].
    pub generation: u32,
    /// How long to wait (`None`: until satisfied or cancelled).
    pub timeout: Option<Duration>,
    /// Polled at least every [`CHUNK`](crate::table::CHUNK): `true` abandons the wait.
    pub cancel: &'a dyn Fn() -> bool,
}

impl core::fmt::Debug for CntWaitArgs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CntWaitArgs")
            .field("generation", &self.generation)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
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

impl CntSlot {
    /// A free slot (all zero).
    pub const fn new() -> Self {
        CntSlot {
            count: AtomicU32::new(0),
            seq: AtomicU32::new(0),
            waiters: AtomicU32::new(0),
            state: AtomicU32::new(0),
            generation: AtomicU32::new(0),
            owner_device: AtomicU32::new(0),
            owner_pid: AtomicI32::new(0),
            owner_proc: AtomicU32::new(0),
            owner_start: AtomicU64::new(0),
            last_pid: AtomicI32::new(0),
            last_mode: AtomicU32::new(0),
            last_ns: AtomicU64::new(0),
            last_value: AtomicU32::new(0),
            _reserved: AtomicU32::new(0),
        }
    }

    /// The slot's state; an invalid stored value reads as `None` (corrupt).
    pub fn state(&self) -> Option<CntSlotState> {
        match self.state.load(SeqCst) {
            S_FREE => Some(CntSlotState::Free),
            S_LIVE => Some(CntSlotState::Live),
            S_BUSY => Some(CntSlotState::Busy),
            _ => None,
        }
    }

    /// The generation: bumped each time the id is released, so stale handles are recognised.
    pub fn generation(&self) -> u32 {
        self.generation.load(SeqCst)
    }

    /// The current count.
    pub fn count(&self) -> u32 {
        self.count.load(SeqCst)
    }

    /// Waits in progress (approximate: a process that died while waiting leaves its count
    /// until the slot is reused).
    pub fn waiters(&self) -> u32 {
        self.waiters.load(SeqCst)
    }

    /// The owner recorded at create (unvalidated numbers).
    pub fn owner(&self) -> CntOwner {
        CntOwner {
            pid: self.owner_pid.load(SeqCst),
            start_time: self.owner_start.load(SeqCst),
            device: self.owner_device.load(SeqCst),
            proc: self.owner_proc.load(SeqCst),
        }
    }

    /// The last record, or `None` if none was applied since create.
    pub fn last_record(&self) -> Option<CntLastRecord> {
        let pid = self.last_pid.load(SeqCst);
        (pid != 0).then(|| CntLastRecord {
            pid,
            mode: CntRecordMode::from_raw(self.last_mode.load(SeqCst)).ok(),
            value: self.last_value.load(SeqCst),
            at_ns: self.last_ns.load(SeqCst),
        })
    }

    /// Takes a freshly allocated (free) slot for `owner`: count 0, no history. Returns the
    /// generation. `Err(Corrupt)` if the slot is not free (its id was handed out while in use).
    pub fn claim(&self, owner: CntOwner) -> core::result::Result<u32, TableError> {
        if self
            .state
            .compare_exchange(S_FREE, S_BUSY, SeqCst, SeqCst)
            .is_err()
        {
            return Err(TableError::Corrupt);
        }
        self.count.store(0, SeqCst);
        self.seq.fetch_add(1, SeqCst);
        self.waiters.store(0, SeqCst);
        self.owner_pid.store(owner.pid, SeqCst);
        self.owner_start.store(owner.start_time, SeqCst);
        self.owner_device.store(owner.device, SeqCst);
        self.owner_proc.store(owner.proc, SeqCst);
        self.last_pid.store(0, SeqCst);
        self.last_mode.store(0, SeqCst);
        self.last_value.store(0, SeqCst);
        self.last_ns.store(0, SeqCst);
        self.state.store(S_LIVE, SeqCst);
        Ok(self.generation())
    }

    /// Retires the live slot of generation `generation`: bumps the generation, marks it free
    /// and wakes any sleeper (which then sees the slot gone). `true` if this call retired it —
    /// the caller then frees the id in its pool; `false` if it was not live at that generation
    /// (already released, e.g. by a racing garbage collection).
    pub fn release<W: Waiter>(&self, w: &W, generation: u32) -> bool {
        if self.generation() != generation
            || self
                .state
                .compare_exchange(S_LIVE, S_BUSY, SeqCst, SeqCst)
                .is_err()
        {
            return false;
        }
        if self.generation() != generation {
            // Someone retired and re-claimed it between our two loads: put it back. Until we
            // do, that incarnation reads Busy, and a wait on it that looks then reports the
            // slot corrupt (507899): a false failure, never a false success, and only for a
            // release of an incarnation that is already gone (a second release, or a garbage
            // collection racing the owner's destroy).
            self.state.store(S_LIVE, SeqCst);
            return false;
        }
        self.generation.fetch_add(1, SeqCst);
        self.seq.fetch_add(1, SeqCst);
        self.state.store(S_FREE, SeqCst);
        w.wake(&self.seq, u32::MAX);
        true
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
        let new = match rec.mode {
            CntRecordMode::Set => {
                self.count.store(rec.value, SeqCst);
                rec.value
            }
            CntRecordMode::Add => self
                .count
                .fetch_add(rec.value, SeqCst)
                .wrapping_add(rec.value),
            CntRecordMode::BitOr => self.count.fetch_or(rec.value, SeqCst) | rec.value,
            CntRecordMode::BitAnd => self.count.fetch_and(rec.value, SeqCst) & rec.value,
        };
        self.last_pid.store(pid, SeqCst);
        self.last_mode.store(rec.mode as u32, SeqCst);
        self.last_value.store(rec.value, SeqCst);
        self.last_ns.store(w.now_ns(), SeqCst);
        self.changed(w);
        new
    }

    /// Publishes a change of `count`: bumps the futex word, wakes sleepers if there are any.
    fn changed<W: Waiter>(&self, w: &W) {
        self.seq.fetch_add(1, SeqCst);
        if self.waiters.load(SeqCst) != 0 {
            w.wake(&self.seq, u32::MAX);
        }
    }

    /// Wakes every thread sleeping on this slot (they re-check deadline and cancellation).
    pub fn wake_all<W: Waiter>(&self, w: &W) {
        w.wake(&self.seq, u32::MAX);
    }

    /// Stalls until `mode`/`value` holds for the count; then, with [`OnSatisfied::Clear`],
    /// sets it to 0 (atomically with the check).
    ///
    /// `Ok(Consumed)` when satisfied, `Ok(TimedOut)`/`Ok(Cancelled)` otherwise (the count is
    /// untouched). `Err(Corrupt)` if the slot is not live at `args.generation` (released or
    /// overwritten while waiting).
    pub fn wait<W: Waiter>(
        &self,
        w: &W,
        mode: CntWaitMode,
        value: u32,
        on_satisfied: OnSatisfied,
        args: CntWaitArgs<'_>,
    ) -> core::result::Result<WaitOutcome, TableError> {
        let clock = Clock::start(w, args.timeout);
        self.waiters.fetch_add(1, SeqCst);
        let _guard = WaitingGuard(&self.waiters);
        loop {
            let s = self.seq.load(SeqCst);
            if self.state.load(SeqCst) != S_LIVE || self.generation() != args.generation {
                return Err(TableError::Corrupt);
            }
            let v = self.count.load(SeqCst);
            if mode.satisfied(v, value) {
                match on_satisfied {
                    OnSatisfied::Keep => return Ok(WaitOutcome::Consumed),
                    OnSatisfied::Clear => {
                        if self.count.compare_exchange(v, 0, SeqCst, SeqCst).is_ok() {
                            if v != 0 {
                                self.changed(w);
                            }
                            return Ok(WaitOutcome::Consumed);
                        }
                        // The count moved between the check and the clear: look again.
                        continue;
                    }
                }
            }
            if clock.expired() {
                return Ok(WaitOutcome::TimedOut);
            }
            if (args.cancel)() {
                return Ok(WaitOutcome::Cancelled);
            }
            w.wait(&self.seq, s, Some(clock.chunk()));
        }
    }

    /// Repairs a slot whose id is allocated but which is not live: left by a process killed
    /// between allocating the id and claiming the slot (`Free`), while claiming or releasing it
    /// (`Busy`), or between releasing it and freeing the id (`Free`). `true` if the slot is free
    /// now and the caller should free its id; `false` if it is live (or changed meanwhile).
    ///
    /// Only for a repair pass that has seen the same state for long enough that no live process
    /// can still be between those steps.
    pub fn retire_orphan(&self) -> bool {
        match self.state.load(SeqCst) {
            S_FREE => true,
            S_LIVE => false,
            // Busy, or a corrupt value: start afresh in the next generation.
            cur => {
                self.generation.fetch_add(1, SeqCst);
                self.seq.fetch_add(1, SeqCst);
                self.state
                    .compare_exchange(cur, S_FREE, SeqCst, SeqCst)
                    .is_ok()
            }
        }
    }

    /// Retires the slot if it is live and `dead(owner)` says its owner is gone (garbage
    /// collection after a process died). `true` if this call retired it; the caller frees the
    /// id.
    pub fn reclaim_if<W: Waiter>(&self, w: &W, dead: impl FnOnce(&CntOwner) -> bool) -> bool {
        if self.state() != Some(CntSlotState::Live) {
            return false;
        }
        let g = self.generation();
        dead(&self.owner()) && self.release(w, g)
    }
}

impl Default for CntSlot {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for CntSlot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CntSlot")
            .field("state", &self.state())
            .field("generation", &self.generation())
            .field("count", &self.count())
            .field("waiters", &self.waiters())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::tests::TestWaiter;
    use std::sync::Arc;
    use std::thread;
    use std::time::Instant;
    use std::vec::Vec;

    fn never() -> bool {
        false
    }

    fn owner() -> CntOwner {
        CntOwner {
            pid: 42,
            start_time: 7,
            device: 1,
            proc: 3,
        }
    }

    fn args(generation: u32, ms: u64) -> CntWaitArgs<'static> {
        CntWaitArgs {
            generation,
            timeout: Some(Duration::from_millis(ms)),
            cancel: &never,
        }
    }

    #[test]
    fn c_values_and_layouts() {
        assert_eq!(core::mem::size_of::<CntRecordInfo>(), 8);
        assert_eq!(core::mem::size_of::<CntWaitInfo>(), 16);
        assert_eq!(core::mem::size_of::<CntSlot>(), 64);
        let rec: Vec<u32> = CntRecordMode::ALL.iter().map(|m| *m as u32).collect();
        assert_eq!(rec, [0, 1, 2, 4]);
        let wait: Vec<u32> = CntWaitMode::ALL.iter().map(|m| *m as u32).collect();
        assert_eq!(wait, [0, 1, 2, 3, 4]);
        for m in CntRecordMode::ALL {
            assert_eq!(CntRecordMode::from_raw(m as u32), Ok(m));
        }
        for m in CntWaitMode::ALL {
            assert_eq!(CntWaitMode::from_raw(m as u32), Ok(m));
        }
        for bad in [3, 5, 6, u32::MAX] {
            assert_eq!(
                CntRecordMode::from_raw(bad),
                Err(Error::ParamInvalid),
                "{bad}"
            );
        }
        for bad in [5, 6, 100, u32::MAX] {
            assert_eq!(
                CntWaitMode::from_raw(bad),
                Err(Error::ParamInvalid),
                "{bad}"
            );
        }
    }

    #[test]
    fn info_validation_round_trips() {
        let r = CntRecordInfo { mode: 1, value: 9 };
        assert_eq!(CntRecord::from_info(&r), Ok(CntRecord::add(9)));
        assert_eq!(CntRecord::add(9).to_info(), r);
        assert_eq!(
            CntRecord::from_info(&CntRecordInfo { mode: 3, value: 0 }),
            Err(Error::ParamInvalid)
        );
        let w = CntWaitInfo {
            mode: 4,
            value: 0b101,
            timeout: 3,
            is_clear: 7,
            rsv: [1, 2, 3],
        };
        let v = CntWait::from_info(&w).unwrap();
        assert_eq!(v.mode, CntWaitMode::EqualWithBitmask);
        assert_eq!(v.on_satisfied, OnSatisfied::Clear);
        assert_eq!(v.timeout.duration(), Some(Duration::from_secs(3)));
        assert_eq!(v.to_info().is_clear, 1);
        assert_eq!(v.to_info().rsv, [0; 3]);
        let forever = CntWait::from_info(&CntWaitInfo::default()).unwrap();
        assert_eq!(forever, CntWait::new(CntWaitMode::Less, 0));
        assert_eq!(
            CntWait::from_info(&CntWaitInfo {
                mode: 5,
                ..CntWaitInfo::default()
            }),
            Err(Error::ParamInvalid)
        );
    }

    #[test]
    fn modes_apply_and_compare() {
        use CntRecordMode::*;
        assert_eq!(Set.apply(5, 9), 9);
        assert_eq!(Add.apply(u32::MAX, 2), 1, "ADD wraps at 2^32");
        assert_eq!(BitOr.apply(0b0101, 0b0011), 0b0111);
        assert_eq!(BitAnd.apply(0b0101, 0b0011), 0b0001);
        use CntWaitMode::*;
        assert!(Less.satisfied(1, 2) && !Less.satisfied(2, 2));
        assert!(Equal.satisfied(2, 2) && !Equal.satisfied(3, 2));
        assert!(Bigger.satisfied(3, 2) && !Bigger.satisfied(2, 2));
        assert!(BiggerOrEqual.satisfied(2, 2) && !BiggerOrEqual.satisfied(1, 2));
        assert!(EqualWithBitmask.satisfied(0b1110, 0b0110));
        assert!(!EqualWithBitmask.satisfied(0b1010, 0b0110));
        assert!(
            EqualWithBitmask.satisfied(0, 0),
            "an empty mask always holds"
        );
        assert!(!Less.satisfied(0, 0), "nothing is below 0");
    }

    #[test]
    fn pools_per_soc() {
        assert_eq!(max_cnt_notifies(Soc::Ascend950PR), MAX_CNT_NOTIFIES);
        assert_eq!(max_cnt_notifies(Soc::Ascend950DT), MAX_CNT_NOTIFIES);
        for s in Soc::ALL {
            if !matches!(s, Soc::Ascend950PR | Soc::Ascend950DT) {
                assert_eq!(max_cnt_notifies(*s), 0, "{s}");
            }
        }
        fn cap<C: CntPools>() -> u32 {
            C::MAX_CNT_NOTIFIES
        }
        assert_eq!(cap::<crate::soc::Ascend950PR>(), 8192);
        let mut p = <crate::soc::Ascend950DT as CntPools>::CntPool::new();
        assert_eq!(p.capacity(), MAX_CNT_NOTIFIES);
        assert_eq!(p.alloc(), Ok(0));
    }

    #[test]
    fn record_then_wait_every_mode() {
        let w = TestWaiter::new();
        let s = CntSlot::new();
        let g = s.claim(owner()).unwrap();
        assert_eq!(s.record(&*w, CntRecord::set(u32::MAX), 11), u32::MAX);
        assert_eq!(s.record(&*w, CntRecord::add(2), 12), 1, "wrap-around");
        let last = s.last_record().unwrap();
        assert_eq!(
            (last.pid, last.mode, last.value),
            (12, Some(CntRecordMode::Add), 2)
        );
        let keep = OnSatisfied::Keep;
        assert_eq!(
            s.wait(&*w, CntWaitMode::Equal, 1, keep, args(g, 0)),
            Ok(WaitOutcome::Consumed)
        );
        assert_eq!(
            s.wait(&*w, CntWaitMode::Bigger, 1, keep, args(g, 20)),
            Ok(WaitOutcome::TimedOut)
        );
        s.record(&*w, CntRecord::bit_or(0b110), 1);
        assert_eq!(s.count(), 0b111);
        assert_eq!(
            s.wait(&*w, CntWaitMode::EqualWithBitmask, 0b101, keep, args(g, 0)),
            Ok(WaitOutcome::Consumed)
        );
        s.record(&*w, CntRecord::bit_and(0b010), 1);
        assert_eq!(s.count(), 0b010);
        assert_eq!(
            s.wait(&*w, CntWaitMode::Less, 3, OnSatisfied::Clear, args(g, 0)),
            Ok(WaitOutcome::Consumed)
        );
        assert_eq!(s.count(), 0, "clear-on-wait");
        assert_eq!(
            s.wait(&*w, CntWaitMode::BiggerOrEqual, 1, keep, args(g, 10)),
            Ok(WaitOutcome::TimedOut)
        );
        assert_eq!(s.waiters(), 0);
        // A stale generation ends the wait with an error, not a hang.
        assert_eq!(
            s.wait(&*w, CntWaitMode::Less, 0, keep, args(g + 1, 1000)),
            Err(TableError::Corrupt)
        );
    }

    #[test]
    fn one_record_releases_every_satisfied_waiter() {
        let w = TestWaiter::new();
        let s = Arc::new(CntSlot::new());
        let g = s.claim(owner()).unwrap();
        let mut hs = Vec::new();
        for need in [1u32, 2, 3] {
            let (s2, w2) = (s.clone(), w.clone());
            hs.push(thread::spawn(move || {
                s2.wait(
                    &*w2,
                    CntWaitMode::BiggerOrEqual,
                    need,
                    OnSatisfied::Keep,
                    args(g, 10_000),
                )
            }));
        }
        let end = Instant::now() + Duration::from_secs(10);
        while s.waiters() < 3 {
            assert!(Instant::now() < end);
            thread::sleep(Duration::from_millis(1));
        }
        s.record(&*w, CntRecord::add(3), 5);
        for h in hs {
            assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Consumed));
        }
    }

    #[test]
    fn clearing_waiters_never_share_a_count() {
        // Two clearing waiters on "count >= 1": one record of 1 releases exactly one.
        let w = TestWaiter::new();
        let s = Arc::new(CntSlot::new());
        let g = s.claim(owner()).unwrap();
        let mut hs = Vec::new();
        for _ in 0..2 {
            let (s2, w2) = (s.clone(), w.clone());
            hs.push(thread::spawn(move || {
                s2.wait(
                    &*w2,
                    CntWaitMode::BiggerOrEqual,
                    1,
                    OnSatisfied::Clear,
                    args(g, 400),
                )
            }));
        }
        let end = Instant::now() + Duration::from_secs(10);
        while s.waiters() < 2 {
            assert!(Instant::now() < end);
            thread::sleep(Duration::from_millis(1));
        }
        s.record(&*w, CntRecord::add(1), 5);
        let outs: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        let consumed = outs
            .iter()
            .filter(|o| **o == Ok(WaitOutcome::Consumed))
            .count();
        assert_eq!(consumed, 1, "{outs:?}");
        assert_eq!(s.count(), 0);
    }

    #[test]
    fn release_and_reclaim() {
        let w = TestWaiter::new();
        let s = CntSlot::new();
        let g = s.claim(owner()).unwrap();
        assert_eq!(s.claim(owner()), Err(TableError::Corrupt));
        assert_eq!(s.owner(), owner());
        assert!(!s.release(&*w, g + 1), "wrong generation");
        assert!(s.release(&*w, g));
        assert!(!s.release(&*w, g), "released twice");
        assert_eq!(s.state(), Some(CntSlotState::Free));
        let g2 = s.claim(owner()).unwrap();
        assert_eq!(g2, g + 1);
        assert!(s.last_record().is_none());
        assert!(!s.reclaim_if(&*w, |_| false));
        assert!(s.reclaim_if(&*w, |o| o.pid == 42));
        assert_eq!(s.state(), Some(CntSlotState::Free));
        assert!(!s.reclaim_if(&*w, |_| true), "a free slot is not reclaimed");
    }

    #[test]
    fn retire_orphan_frees_free_and_busy_slots_but_not_live_ones() {
        let s = CntSlot::new();
        assert!(s.retire_orphan(), "a free slot: only its id is leaked");
        let g = s.claim(owner()).unwrap();
        assert!(!s.retire_orphan(), "a live slot is in use");
        assert_eq!(s.state(), Some(CntSlotState::Live));
        // A claim (or release) cut short by the death of its process leaves the slot busy.
        s.state.store(S_BUSY, SeqCst);
        assert!(s.retire_orphan());
        assert_eq!(s.state(), Some(CntSlotState::Free));
        assert_eq!(s.generation(), g + 1);
        // A corrupt state word is repaired the same way.
        s.state.store(77, SeqCst);
        assert!(s.retire_orphan());
        assert_eq!(s.state(), Some(CntSlotState::Free));
        assert_eq!(s.claim(owner()), Ok(g + 2));
    }

    #[test]
    fn cancel_ends_a_forever_wait() {
        use core::sync::atomic::AtomicBool;
        let w = TestWaiter::new();
        let s = Arc::new(CntSlot::new());
        let g = s.claim(owner()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, w2, st2) = (s.clone(), w.clone(), stop.clone());
        let h = thread::spawn(move || {
            let c = move || st2.load(SeqCst);
            s2.wait(
                &*w2,
                CntWaitMode::Equal,
                99,
                OnSatisfied::Keep,
                CntWaitArgs {
                    generation: g,
                    timeout: None,
                    cancel: &c,
                },
            )
        });
        thread::sleep(Duration::from_millis(20));
        stop.store(true, SeqCst);
        s.wake_all(&*w);
        assert_eq!(h.join().unwrap(), Ok(WaitOutcome::Cancelled));
        assert_eq!(s.waiters(), 0);
    }
}

//! Count notifies (SPEC §6, Ascend 950 family): a 32-bit counter per id instead of a binary
//! flag. Records set, add to, OR into or AND into the count; a wait stalls until a comparison
//! with the count holds (less, equal, bigger, bigger-or-equal, all bits of a mask set), then
//! optionally clears it to 0.
//!
//! This module holds the C-visible vocabulary — the mode values, the `#[repr(C)]` info
//! structs with CANN's layouts ([`CntRecordInfo`] 8 bytes, [`CntWaitInfo`] 16 bytes) and their
//! validation. The device-side slot that firmware and the simulator run ([`CntSlot`], in
//! `slot`) is the shared [`Slot`](crate::slot::Slot) with a count as its payload: pointer-free,
//! atomics only, so a table of them can live in memory shared by processes. Blocking and
//! waking go through the [`Waiter`](crate::waiter::Waiter) trait and its one sleep loop.
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
//! [`CHUNK`](crate::waiter::CHUNK) and re-check their deadline, cancellation and the slot's
//! generation, so a corrupted or recycled slot ends a wait with an error instead of a hang.

use crate::error::{Error, Result};
use crate::soc::{Feature, Soc};
use crate::timeout::Timeout;

mod slot;
#[cfg(test)]
mod tests;

pub use slot::{CntLastRecord, CntSlot, CntSync};

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

//! The device's overflow status (`aclrtGetOverflowStatus` and its kin): per device, 512 bytes
//! of device memory of this process (CANN's per-context `overflowAddr_`, `OVERFLOW_ADDR_MAX_SIZE`,
//! hicann/runtime `src/runtime/core/inc/context/context.hpp`), allocated on first use. A query
//! copies its first 64 bytes (`OVERFLOW_OUTPUT_SIZE`, `task_base.hpp`) into the caller's device
//! memory in stream order, a reset sets all 512 to zero, in stream order too (`ApiImpl::
//! GetDeviceSatStatus`, `CleanDeviceSatStatus`, `src/runtime/api/impl/api_impl.cc`): plain
//! copies and sets of that memory, run by the copy and set tasks.
//!
//! What sets it: of what the simulator runs, a float reduce (`aclrtReduceAsync` of fp32, fp16 or
//! bf16, `reduce`) whose result is infinite or NaN while both operands were finite — the
//! overflow of the device's DMA engine (`TS_ERROR_SDMA_OVERFLOW`). What the device writes into
//! the area is its firmware's and not public; CANN's documentation says only that the status
//! is 64 bytes, and its sample (`example/4_reliability/overflow_detection`) reads the first 32-bit
//! word as the flag. So here: the first word becomes 1 on an overflow, and every byte is 0
//! otherwise. The status is per process and device, as CANN documents it for Atlas A2/A3 and
//! the 950 family.

use super::DevRange;
use super::device_area::Area;
use crate::Sim;
use crate::error::SimError;

/// The status area's size (`OVERFLOW_ADDR_MAX_SIZE`).
pub const AREA: usize = super::device_area::OVERFLOW;
/// What a query copies (`OVERFLOW_OUTPUT_SIZE`): the only size the queries take.
pub const STATUS: usize = 64;

impl Sim {
    /// The device address of `device`'s overflow status area (`aclrtCtxGetFloatOverflowAddr`),
    /// allocated (zeroed) on first use, and again if it was freed meanwhile.
    ///
    /// Errors: 107001 bad device; 207001 out of device memory.
    pub fn overflow_addr(&self, device: u32) -> Result<usize, SimError> {
        self.overflow_range(device).map(|r| r.addr)
    }

    /// [`overflow_addr`](Self::overflow_addr) as a range a task can hold.
    pub(crate) fn overflow_range(&self, device: u32) -> Result<DevRange, SimError> {
        self.area_range(Area::Overflow, device)
    }
}

impl DevRange {
    /// Notes an overflow in the status area this range is (at run time of a task): the first
    /// word becomes 1, unless the area was freed.
    pub(crate) fn note_overflow(&self) {
        if self.still("overflow status").is_ok() {
            // SAFETY: the range is `AREA` bytes of a live mapping of device memory.
            unsafe { self.ptr().cast::<u32>().write_unaligned(1) };
        }
    }
}

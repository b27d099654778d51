//! Device limits (`aclrtDeviceSetLimit`, `aclrtDeviceGetLimit`): the sizes CANN lets a
//! program choose for kernels' stacks and printf buffers.
//!
//! As hicann/runtime `src/acl/aclrt_impl/device.cpp` (a limit outside `aclrtDeviceLimit`'s 0–4
//! and a value above `UINT32_MAX` are 100000; then the runtime's code) and the runtime of the
//! SoCs before Ascend950 (`src/runtime/api/impl/api_impl.cc`, `ApiImpl::DeviceSetLimit` /
//! `DeviceGetLimit`): the three SIMT limits are 207000 (no SIMT cores); the SIMD stack size
//! is one value for the process and every device (`runtime.hpp`,
//! `SetDeviceCustomerStackSize`: 32 KiB at first; a value above 32 KiB is rounded up to a
//! multiple of 16 KiB, a smaller one leaves it unchanged); the SIMD printf buffer per core
//! too (`runtime.cc`, `SetSimdPrintFifoSize`: 1 KiB to 64 MiB, else 107000, rounded up to a
//! multiple of 8; 32 KiB at first).
//!
//! The simulator runs no kernels, so nothing uses these sizes: they are kept, checked and
//! read back, process-wide like CANN's (they outlive `aclFinalize`, as CANN's `Runtime`
//! instance does).

use std::sync::atomic::{AtomicU32, Ordering};

use acl_notify_core::Error;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, aclError, api};

/// `ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE`.
const SIMT_STACK: u32 = 0;
/// `ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE`.
const SIMT_DVG_WARP_STACK: u32 = 1;
/// `ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE`.
const SIMD_STACK: u32 = 2;
/// `ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE`.
const SIMD_PRINTF_FIFO: u32 = 3;
/// `ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE`.
const SIMT_PRINTF_FIFO: u32 = 4;

const KIB: u32 = 1024;
/// CANN's `KERNEL_STACK_SIZE_32K` (the first value) and `KERNEL_STACK_SIZE_16K` (the step).
const STACK_FIRST: u32 = 32 * KIB;
const STACK_STEP: u32 = 16 * KIB;
/// CANN's `SIMD_FIFO_PER_CORE_SIZE_32K`, `SIMD_MIN_FIFO_PRINTF_SIZE`, `MAX_FIFO_PRINTF_SIZE`,
/// `PRINTF_FIFO_ASSIGN`.
const FIFO_FIRST: u32 = 32 * KIB;
const FIFO_MIN: u32 = KIB;
const FIFO_MAX: u32 = 64 * KIB * KIB;
const FIFO_STEP: u32 = 8;

static STACK: AtomicU32 = AtomicU32::new(STACK_FIRST);
static FIFO: AtomicU32 = AtomicU32::new(FIFO_FIRST);

fn name(limit: u32) -> &'static str {
    match limit {
        SIMT_STACK => "ACL_RT_DEV_LIMIT_SIMT_STACK_SIZE",
        SIMT_DVG_WARP_STACK => "ACL_RT_DEV_LIMIT_SIMT_DVG_WARP_STACK_SIZE",
        SIMD_STACK => "ACL_RT_DEV_LIMIT_SIMD_STACK_SIZE",
        SIMD_PRINTF_FIFO => "ACL_RT_DEV_LIMIT_SIMD_PRINTF_FIFO_SIZE_PER_CORE",
        _ => "ACL_RT_DEV_LIMIT_SIMT_PRINTF_FIFO_SIZE",
    }
}

/// The limit's checks common to both calls: 100000 outside 0–4, 207000 for the SIMT ones.
fn check(limit: u32) -> Result<(), CallError> {
    match limit {
        SIMD_STACK | SIMD_PRINTF_FIFO => Ok(()),
        SIMT_STACK | SIMT_DVG_WARP_STACK | SIMT_PRINTF_FIFO => Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{}: the simulated SoCs have no SIMT cores (as CANN's runtime before Ascend950)",
                name(limit)
            ),
        )),
        _ => Err(CallError::new(
            Error::InvalidParam,
            format!("limit {limit}: an aclrtDeviceLimit, [0, 4]"),
        )),
    }
}

fn round_up(v: u32, step: u32) -> u32 {
    v.div_ceil(step).saturating_mul(step)
}

/// `aclError aclrtDeviceSetLimit(aclrtDeviceLimit limit, size_t value)`.
///
/// Codes: 100000 a limit outside 0–4 or a value above `UINT32_MAX`; 207000 a SIMT limit;
/// 107000 a SIMD printf buffer outside 1 KiB–64 MiB.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDeviceSetLimit(limit: u32, value: usize) -> aclError {
    api("aclrtDeviceSetLimit", || {
        if limit > SIMT_PRINTF_FIFO {
            return check(limit);
        }
        let v = u32::try_from(value).map_err(|_| {
            CallError::new(
                Error::InvalidParam,
                format!("value {value}: [0, UINT32_MAX]"),
            )
        })?;
        check(limit)?;
        if limit == SIMD_STACK {
            if v > STACK_FIRST {
                STACK.store(round_up(v, STACK_STEP), Ordering::Relaxed);
            }
            return Ok(());
        }
        if !(FIFO_MIN..=FIFO_MAX).contains(&v) {
            return Err(param(format!(
                "{}: value {v} outside [{FIFO_MIN}, {FIFO_MAX}]",
                name(limit)
            )));
        }
        FIFO.store(round_up(v, FIFO_STEP), Ordering::Relaxed);
        Ok(())
    })
}

/// `aclError aclrtDeviceGetLimit(aclrtDeviceLimit limit, size_t *value)`: the value in use
/// (as rounded when set).
///
/// Codes: 100000 NULL `value` or a limit outside 0–4; 207000 a SIMT limit.
///
/// # Safety
///
/// `value` is NULL or valid for writing a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetLimit(limit: u32, value: *mut usize) -> aclError {
    api("aclrtDeviceGetLimit", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(
            || null_arg("value"),
            || {
                check(limit)?;
                let v = if limit == SIMD_STACK { &STACK } else { &FIFO };
                Ok(v.load(Ordering::Relaxed) as usize)
            },
        )
    })
}

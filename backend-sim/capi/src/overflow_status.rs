//! The device's overflow status: `aclrtGetOverflowStatus` / `aclrtResetOverflowStatus`, their
//! `aclrtGetFloatOverflowStatus` / `aclrtResetFloatOverflowStatus` twins, the NPU float-status
//! pair `aclrtNpuGetFloatOverFlowStatus` / `aclrtNpuClearFloatOverFlowStatus`, and
//! `aclrtCtxGetFloatOverflowAddr`. The status is the simulator's per-device status area
//! (`acl_notify_sim::mem::overflow`, which says what sets it and what it holds): a query is a
//! copy of its 64 bytes into the caller's device memory, a reset a set of the area to 0, both
//! in stream order.
//!
//! As hicann/runtime: `src/acl/aclrt_impl/device.cpp` (`aclrtGetOverflowStatus` checks a NULL
//! `outputAddr` itself, 100000), `kernel.cpp` and `context.cpp` (the others pass it on);
//! `src/runtime/api/api_c.cc` (`rtsGetFloatOverflowStatus` is `rtGetDeviceSatStatus`,
//! `rtsResetFloatOverflowStatus` `rtCleanDeviceSatStatus`, `rtsCtxGetFloatOverflowAddr`
//! `rtCtxGetOverflowAddr`); `src/runtime/api/impl/api_error.cc` (in this order: a NULL output
//! 107000, a size other than 64 107000, a capturing stream 107027) and `api_impl.cc`
//! (`GetDeviceSatStatus`: a copy of `OVERFLOW_OUTPUT_SIZE` bytes from the context's overflow
//! address; `CleanDeviceSatStatus`: a set of its `OVERFLOW_ADDR_MAX_SIZE` bytes; the stream of
//! the current context, NULL its default stream). The NPU pair runs CANN's float-status tasks
//! (`Context::NpuGetFloatStatus`, `context.cc`), which read the same status the device keeps:
//! here the same area. `checkMode` is not checked by CANN and not used here.

use std::ffi::c_void;

use acl_notify_sim::mem::MemcpyKind;
use acl_notify_sim::mem::overflow::{AREA, STATUS};

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::session::runtime;

/// The runtime's checks of a query's output (107000 each).
fn check_output(output: *mut c_void, size: u64) -> Result<(), CallError> {
    if output.is_null() {
        return Err(param("`outputAddr` is NULL"));
    }
    if size != STATUS as u64 {
        return Err(param(format!(
            "outputSize {size}: the overflow status is {STATUS} bytes, the only size taken"
        )));
    }
    Ok(())
}

/// Queues the copy of the current device's status into `output` on `stream`.
fn query(output: *mut c_void, stream: aclrtStream) -> Result<(), CallError> {
    let rt = runtime()?;
    let s = rt.resolve_task_stream(stream.addr())?;
    let (device, _) = rt.current()?;
    let sim = rt.backend();
    let status = sim.overflow_addr(device).map_err(CallError::backend)?;
    // CANN queues the status's copy as a device-to-device task of its own, without the kind
    // correction of aclrtMemcpyAsync (hicann/runtime `api_impl.cc`,
    // `ApiImpl::GetDeviceSatStatus`): the output must be device memory.
    if !matches!(
        sim.mem_location(output.addr()),
        acl_notify_sim::mem::location::MemLocation::Device { .. }
    ) {
        return Err(param(format!(
            "outputAddrPtr {:#x} is not device memory: the status is copied by a \
                 device-to-device task",
            output.addr()
        )));
    }
    // SAFETY: both sides are device memory (checked by the copy; no host side).
    unsafe {
        sim.memcpy_async(
            output.addr(),
            STATUS,
            status,
            STATUS,
            MemcpyKind::DeviceToDevice,
            s,
        )
    }
    .map_err(|e| CallError::backend(e).in_context("the copy of the overflow status"))
}

/// Queues the reset of the current device's status on `stream`.
fn reset(stream: aclrtStream) -> Result<(), CallError> {
    let rt = runtime()?;
    let s = rt.resolve_task_stream(stream.addr())?;
    let (device, _) = rt.current()?;
    let sim = rt.backend();
    let status = sim.overflow_addr(device).map_err(CallError::backend)?;
    sim.memset_async(status, AREA, 0, AREA, s)
        .map_err(CallError::backend)
}

/// `aclError aclrtGetOverflowStatus(void *outputAddr, size_t outputSize, aclrtStream stream)`:
/// copies the device's 64-byte overflow status into `outputAddr` (device memory) in stream
/// order.
///
/// Codes: 100000 `outputAddr` NULL; 107000 `outputSize` not 64; 107027 a capturing stream;
/// 107002; 107017; 107003; a copy's (107000 for an output that is not device memory).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetOverflowStatus(
    output: *mut c_void,
    size: usize,
    stream: aclrtStream,
) -> aclError {
    api("aclrtGetOverflowStatus", || {
        if output.is_null() {
            return Err(null_arg("outputAddr"));
        }
        check_output(output, size as u64)?;
        query(output, stream)
    })
}

/// `aclError aclrtGetFloatOverflowStatus(void *outputAddr, uint64_t outputSize, aclrtStream
/// stream)`: [`aclrtGetOverflowStatus`], a NULL `outputAddr` being 107000.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetFloatOverflowStatus(
    output: *mut c_void,
    size: u64,
    stream: aclrtStream,
) -> aclError {
    api("aclrtGetFloatOverflowStatus", || {
        check_output(output, size)?;
        query(output, stream)
    })
}

/// `aclError aclrtNpuGetFloatOverFlowStatus(void *outputAddr, uint64_t outputSize, uint32_t
/// checkMode, aclrtStream stream)`: as [`aclrtGetFloatOverflowStatus`].
#[unsafe(no_mangle)]
pub extern "C" fn aclrtNpuGetFloatOverFlowStatus(
    output: *mut c_void,
    size: u64,
    _check_mode: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtNpuGetFloatOverFlowStatus", || {
        check_output(output, size)?;
        query(output, stream)
    })
}

/// `aclError aclrtResetOverflowStatus(aclrtStream stream)`: clears the device's overflow
/// status in stream order.
///
/// Codes: 107027 a capturing stream; 107002; 107017; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetOverflowStatus(stream: aclrtStream) -> aclError {
    api("aclrtResetOverflowStatus", || reset(stream))
}

/// `aclError aclrtResetFloatOverflowStatus(aclrtStream stream)`: [`aclrtResetOverflowStatus`].
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetFloatOverflowStatus(stream: aclrtStream) -> aclError {
    api("aclrtResetFloatOverflowStatus", || reset(stream))
}

/// `aclError aclrtNpuClearFloatOverFlowStatus(uint32_t checkMode, aclrtStream stream)`:
/// [`aclrtResetOverflowStatus`].
#[unsafe(no_mangle)]
pub extern "C" fn aclrtNpuClearFloatOverFlowStatus(
    _check_mode: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtNpuClearFloatOverFlowStatus", || reset(stream))
}

/// `aclError aclrtCtxGetFloatOverflowAddr(void **overflowAddr)`: the device address of the
/// current device's overflow status area (512 bytes; its first 64 are what the queries copy).
///
/// Codes: 107000 `overflowAddr` NULL; 107002 no current context; 207001 no device memory for it.
///
/// # Safety
///
/// `overflowAddr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCtxGetFloatOverflowAddr(addr: *mut *mut c_void) -> aclError {
    api("aclrtCtxGetFloatOverflowAddr", || {
        // SAFETY: `addr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(addr) }.write(
            || param("`overflowAddr` is NULL"),
            || {
                let rt = runtime()?;
                let (device, _) = rt.current()?;
                let a = rt
                    .backend()
                    .overflow_addr(device)
                    .map_err(CallError::backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(a))
            },
        )
    })
}

//! `aclrtMemsetD32` / `aclrtMemsetD32Async`: memory filled with 32-bit words (the simulator's
//! side is `Sim::memset_d32`, done as CANN's runtime does it: host memory at once, device
//! memory by a host-to-device copy of a filled buffer).
//!
//! The ACL layer's checks come first, in hicann/runtime `src/acl/aclrt_impl/memory.cpp`'s
//! order (`aclrtMemsetD32Impl`, `aclrtMemsetD32AsyncImpl`): N 0 succeeds; ptr NULL, ptr not
//! 4-byte aligned, `N * 4` above memSize, and memory that `aclrtPointerGetAttributes` says is
//! neither host nor device memory (`IsAclPinnedMemory`: "Only memory allocated by aclrtMalloc
//! or aclrtMallocHost is supported") are 100000. CANN documents the calls on Ascend950PR/DT,
//! Ascend910_93 and Ascend910B; elsewhere its runtime answers 207000 and the ACL layer logs a
//! warning and returns **success without writing anything** — so does the simulator, leaving
//! the warning for `aclGetRecentErrMsg`.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::mem::location::MemLocation;

use crate::errmsg::{self, CallError, null_arg};
use crate::ffi::{aclError, aclrtStream, api};
use crate::session::runtime;

/// What the ACL layer checks before the runtime: `false` when there is nothing to do.
fn d32_args(ptr: *mut c_void, mem_size: usize, n: usize) -> Result<bool, CallError> {
    if n == 0 {
        return Ok(false);
    }
    if ptr.is_null() {
        return Err(null_arg("ptr"));
    }
    if !ptr.addr().is_multiple_of(4) {
        return Err(CallError::new(
            Error::InvalidParam,
            format!("ptr {ptr:p} is not 4-byte aligned"),
        ));
    }
    if n.checked_mul(4).is_none_or(|b| b > mem_size) {
        return Err(CallError::new(
            Error::InvalidParam,
            format!("N × 4 ({n} × 4) is greater than memSize ({mem_size})"),
        ));
    }
    Ok(true)
}

/// `IsAclPinnedMemory`: 100000 unless `ptr` is host memory the runtime knows or device memory.
fn pinned(where_: MemLocation, ptr: *mut c_void) -> Result<(), CallError> {
    match where_ {
        MemLocation::Device { .. } | MemLocation::Host { .. } => Ok(()),
        MemLocation::Unmapped | MemLocation::Unregistered => Err(CallError::new(
            Error::InvalidParam,
            format!(
                "{ptr:p} is not memory of aclrtMalloc or aclrtMallocHost (aclrtPointerGetAttributes \
                 says ACL_MEM_LOCATION_TYPE_UNREGISTERED): only such memory is supported"
            ),
        )),
    }
}

/// Whether CANN's runtime has the calls on `soc` (its documentation,
/// `docs/zh/api_ref/11-03_memory_copy_and_set.md`; the other SoCs' runtime is the stub that
/// answers 207000).
fn has_d32(soc: Soc) -> bool {
    matches!(
        soc,
        Soc::Ascend950PR | Soc::Ascend950DT | Soc::Ascend910_93 | Soc::Ascend910B
    )
}

/// Everything after the argument checks, for both forms (`stream`: the async form's).
fn memset_d32(
    call: &str,
    ptr: *mut c_void,
    mem_size: usize,
    value: u32,
    n: usize,
    stream: Option<aclrtStream>,
) -> Result<(), CallError> {
    let rt = runtime()?;
    let sim = rt.backend();
    if sim.soc() == Soc::IPV350 {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            "aclrtPointerGetAttributes, which checks the memory, is not supported on IPV350",
        ));
    }
    pinned(sim.mem_location(ptr.addr()), ptr)?;
    let stream = match stream {
        Some(s) => Some(rt.resolve_task_stream(s.addr())?),
        None => {
            rt.current_device()?;
            None
        }
    };
    if !has_d32(sim.soc()) {
        errmsg::push(format!(
            "{call} warning: {} has no {call} (CANN's runtime answers 207000 there, and its ACL \
             layer returns success): nothing was written",
            sim.soc().name()
        ));
        return Ok(());
    }
    sim.memset_d32(ptr.addr(), mem_size, value, n, stream)
        .map_err(CallError::backend)
}

/// `aclError aclrtMemsetD32(void *ptr, size_t memSize, uint32_t value, size_t N)`: `N`
/// 32-bit words of `value` from `ptr`, at once (no synchronisation: CANN's documentation).
///
/// Codes: 0 N 0; 100000 (see the module docs); 207000 IPV350; 107002; 107000 a range
/// outside its allocation, IPC memory of another device or host (which takes no host-to-device
/// copy); 207001 no host memory for the copy's buffer.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemsetD32(
    ptr: *mut c_void,
    mem_size: usize,
    value: u32,
    n: usize,
) -> aclError {
    api("aclrtMemsetD32", || {
        if !d32_args(ptr, mem_size, n)? {
            return Ok(());
        }
        memset_d32("aclrtMemsetD32", ptr, mem_size, value, n, None)
    })
}

/// `aclError aclrtMemsetD32Async(void *ptr, size_t memSize, uint32_t value, size_t N,
/// aclrtStream stream)`: [`aclrtMemsetD32`] on device memory as a task of `stream` (NULL: the
/// default stream); host memory is written at once, as CANN's runtime does
/// (`ApiImpl::MemsetD32Async` in `src/runtime/api/impl/api_impl_standard_soc.cc` takes the
/// host path without the stream), not in stream order.
///
/// Codes: as `aclrtMemsetD32`; 107017 bad stream; 107003 a stream of another device; 507002.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemsetD32Async(
    ptr: *mut c_void,
    mem_size: usize,
    value: u32,
    n: usize,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemsetD32Async", || {
        if !d32_args(ptr, mem_size, n)? {
            return Ok(());
        }
        memset_d32("aclrtMemsetD32Async", ptr, mem_size, value, n, Some(stream))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acl_layers_checks_come_in_canns_order() {
        let p = std::ptr::without_provenance_mut::<c_void>(0x1000);
        assert!(!d32_args(std::ptr::null_mut(), 0, 0).unwrap(), "N 0 first");
        let code = |r: Result<bool, CallError>| r.unwrap_err().code().code();
        assert_eq!(code(d32_args(std::ptr::null_mut(), 16, 4)), 100000);
        assert_eq!(
            code(d32_args(std::ptr::without_provenance_mut(0x1002), 16, 4)),
            100000
        );
        assert_eq!(code(d32_args(p, 15, 4)), 100000);
        assert_eq!(code(d32_args(p, usize::MAX, usize::MAX / 2)), 100000);
        assert!(d32_args(p, 16, 4).unwrap());
        assert_eq!(
            pinned(MemLocation::Unregistered, p)
                .unwrap_err()
                .code()
                .code(),
            100000
        );
        assert!(!has_d32(Soc::Ascend310P) && has_d32(Soc::Ascend910B));
    }
}

//! `aclrtMemFlush` / `aclrtMemInvalidate`: cache maintenance, which the simulated device does
//! not need (its memory is coherent, as CANN documents of its own devices: "this version does
//! not need the user to handle cache coherence between CPU and NPU",
//! `docs/zh/api_ref/11-01_device_memory_malloc_and_free.md`). So, as CANN's runtime, they check
//! their arguments and the context and do nothing else: hicann/runtime
//! `src/runtime/api/impl/api_impl_standard_soc.cc` (`ApiImpl::FlushCache`, `InvalidCache`)
//! makes no check of the range, so neither does the simulator — a stricter one would refuse
//! calls CANN accepts.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{aclError, api};
use crate::session::runtime;

/// The checks of both calls: hicann/runtime `src/acl/aclrt_impl/memory.cpp`
/// (`aclrtMemFlushImpl`, `aclrtMemInvalidateImpl`: NULL, size 0 → 100000), IPV350 (which CANN
/// documents without them) 207000, then the runtime's current context (107002).
fn cache_call(call: &str, dev_ptr: *mut c_void, size: usize) -> Result<(), CallError> {
    if dev_ptr.is_null() {
        return Err(null_arg("devPtr"));
    }
    if size == 0 {
        return Err(CallError::new(Error::InvalidParam, "size is 0"));
    }
    let rt = runtime()?;
    if rt.backend().soc() == Soc::IPV350 {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!("{call} is not supported on IPV350 (as CANN documents)"),
        ));
    }
    rt.current_device()?;
    Ok(())
}

/// `aclError aclrtMemFlush(void *devPtr, size_t size)`: writes cached data back to memory —
/// nothing to do on the simulated device, whose memory is coherent.
///
/// Codes: 100000 devPtr NULL or size 0; 207000 IPV350; 107002.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemFlush(dev_ptr: *mut c_void, size: usize) -> aclError {
    api("aclrtMemFlush", || {
        cache_call("aclrtMemFlush", dev_ptr, size)
    })
}

/// `aclError aclrtMemInvalidate(void *devPtr, size_t size)`: drops cached data — nothing to do
/// on the simulated device.
///
/// Codes: as `aclrtMemFlush`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemInvalidate(dev_ptr: *mut c_void, size: usize) -> aclError {
    api("aclrtMemInvalidate", || {
        cache_call("aclrtMemInvalidate", dev_ptr, size)
    })
}

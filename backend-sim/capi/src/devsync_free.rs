//! `aclrtFreeWithDevSync` / `aclrtFreeHostWithDevSync`: the current device synchronized, then
//! the memory freed — as CANN's runtime does them (hicann/runtime
//! `src/runtime/api/api_c_memory.cc`, `rtFreeWithDevSync` / `rtFreeHostWithDevSync`: a
//! synchronize that fails returns its code and frees nothing).

use std::ffi::c_void;

use acl_notify_core::SyncWait;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{aclError, api};
use crate::session::runtime;

/// `aclError aclrtFreeWithDevSync(void *devPtr)`: waits for every stream of the current
/// context, then frees `devPtr` as `aclrtFree` does, so no queued task can still use it.
///
/// Codes: 100000 NULL; 107002; a stream's failed task's code (nothing freed); then
/// `aclrtFree`'s (107000 not a live allocation of this process).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFreeWithDevSync(dev_ptr: *mut c_void) -> aclError {
    api("aclrtFreeWithDevSync", || {
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        let rt = runtime()?;
        rt.synchronize_device(SyncWait::Forever)?;
        crate::memory::free_device(&rt, dev_ptr.addr())
    })
}

/// `aclError aclrtFreeHostWithDevSync(void *hostPtr)`: as [`aclrtFreeWithDevSync`] for memory
/// of `aclrtMallocHost`, freed as `aclrtFreeHost` frees it.
///
/// Codes: 100000 NULL; 107002; a stream's failed task's code (nothing freed); 107000 not
/// memory of `aclrtMallocHost`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFreeHostWithDevSync(host_ptr: *mut c_void) -> aclError {
    api("aclrtFreeHostWithDevSync", || {
        if host_ptr.is_null() {
            return Err(null_arg("hostPtr"));
        }
        let rt = runtime()?;
        rt.synchronize_device(SyncWait::Forever)?;
        rt.backend()
            .free_host(host_ptr.addr())
            .map_err(CallError::backend)
    })
}

//! The exported core resource limit functions (`aclrtSetDeviceResLimit` and its neighbours,
//! `aclrtGetResInCurrentThread`): the rules are in `runtime::reslimit`. `type` is
//! `aclrtDevResLimitType` (a C enum, read as `int`); a NULL `value` is 100000, CANN's ACL
//! layer's check before anything else.

use std::ffi::c_int;

use super::{Out, aclError, aclrtStream, api, handle};
use crate::errmsg::{CallError, null_arg};
use crate::session::runtime;

/// Writes what `get` answers to `value` (100000 if NULL, before `get` runs).
///
/// # Safety
///
/// `value` is NULL or valid for writing a `uint32_t`.
unsafe fn answer(
    name: &str,
    value: *mut u32,
    get: impl FnOnce() -> Result<u32, CallError>,
) -> aclError {
    api(name, || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(|| null_arg("value"), get)
    })
}

/// `aclError aclrtSetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t
/// value)`: the process's limit of `type` cores on the device.
///
/// Codes: 107001; 107000 a type other than 0 and 1, or a value above the chip's count; 507033
/// the device is not set up in this process; 207000 IPV350.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDeviceResLimit(device_id: i32, r#type: c_int, value: u32) -> aclError {
    api("aclrtSetDeviceResLimit", || {
        runtime()?.set_device_res_limit(device_id, r#type, value)
    })
}

/// `aclError aclrtGetDeviceResLimit(int32_t deviceId, aclrtDevResLimitType type, uint32_t
/// *value)`: the process's limit (the chip's count where none is set).
///
/// Codes: 100000; 107001; 107000 bad type; 507033; 207000.
///
/// # Safety
///
/// `value` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceResLimit(
    device_id: i32,
    r#type: c_int,
    value: *mut u32,
) -> aclError {
    let get = || runtime()?.get_device_res_limit(device_id, r#type);
    // SAFETY: the caller's guarantee on `value`, passed on.
    unsafe { answer("aclrtGetDeviceResLimit", value, get) }
}

/// `aclError aclrtResetDeviceResLimit(int32_t deviceId)`: back to the chip's counts.
///
/// Codes: 107001; 507033; 207000.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDeviceResLimit(device_id: i32) -> aclError {
    api("aclrtResetDeviceResLimit", || {
        runtime()?.reset_device_res_limit(device_id)
    })
}

/// `aclError aclrtSetStreamResLimit(aclrtStream stream, aclrtDevResLimitType type, uint32_t
/// value)`: the stream's own limit (NULL: the current context's default stream).
///
/// Codes: 107017; 107000 bad type or value; 107002; 207000.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetStreamResLimit(
    stream: aclrtStream,
    r#type: c_int,
    value: u32,
) -> aclError {
    api("aclrtSetStreamResLimit", || {
        runtime()?.set_stream_res_limit(handle(stream), r#type, value)
    })
}

/// `aclError aclrtGetStreamResLimit(aclrtStream stream, aclrtDevResLimitType type, uint32_t
/// *value)`: the stream's own limit, else its device's.
///
/// Codes: 100000; 107017; 107000 bad type; 107002; 207000.
///
/// # Safety
///
/// `value` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetStreamResLimit(
    stream: aclrtStream,
    r#type: c_int,
    value: *mut u32,
) -> aclError {
    let get = || runtime()?.get_stream_res_limit(handle(stream), r#type);
    // SAFETY: the caller's guarantee on `value`, passed on.
    unsafe { answer("aclrtGetStreamResLimit", value, get) }
}

/// `aclError aclrtResetStreamResLimit(aclrtStream stream)`: the stream answers its device's
/// limits again.
///
/// Codes: 107017; 107002.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetStreamResLimit(stream: aclrtStream) -> aclError {
    api("aclrtResetStreamResLimit", || {
        runtime()?.reset_stream_res_limit(handle(stream))
    })
}

/// `aclError aclrtUseStreamResInCurrentThread(aclrtStream stream)`: the calling thread uses
/// the stream's limits.
///
/// Codes: 107017; 107002.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtUseStreamResInCurrentThread(stream: aclrtStream) -> aclError {
    api("aclrtUseStreamResInCurrentThread", || {
        runtime()?.use_stream_res(handle(stream))
    })
}

/// `aclError aclrtUnuseStreamResInCurrentThread(aclrtStream stream)`: the calling thread stops
/// using the stream's limits (if it used another stream's, nothing changes).
///
/// Codes: 107017; 107002.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtUnuseStreamResInCurrentThread(stream: aclrtStream) -> aclError {
    api("aclrtUnuseStreamResInCurrentThread", || {
        runtime()?.unuse_stream_res(handle(stream))
    })
}

/// `aclError aclrtGetResInCurrentThread(aclrtDevResLimitType type, uint32_t *value)`: the
/// cores of `type` the calling thread may use: the limit of the stream it uses where that has
/// one, else its current device's.
///
/// Codes: 100000; 107000 bad type; 107002; 207000.
///
/// # Safety
///
/// `value` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetResInCurrentThread(r#type: c_int, value: *mut u32) -> aclError {
    let get = || runtime()?.res_in_current_thread(r#type);
    // SAFETY: the caller's guarantee on `value`, passed on.
    unsafe { answer("aclrtGetResInCurrentThread", value, get) }
}

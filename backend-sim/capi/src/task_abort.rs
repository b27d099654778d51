//! `aclrtDeviceTaskAbort` and its callbacks (`aclrtSetDeviceTaskAbortCallback`): every
//! stream of a device in this process drops its queued tasks and ends its running one, as
//! `aclrtStreamAbort` does for one stream (the streams stay usable), between the registered
//! callbacks' "pre" and "post" calls.
//!
//! As hicann/runtime `src/runtime/api/impl/api_error.cc` (`DeviceTaskAbort`,
//! `SetTaskAbortCallBack`), `src/runtime/core/src/context/context_manage.cc` and `runtime.cc`:
//! 207000 on a SoC without fast recovery (only Ascend950PR/DT, Atlas A3 and A2 have it); a
//! timeout above 36 minutes is 107000; a device that does not exist 107001; the callbacks run in
//! the order of their names, first each with `ACL_RT_DEVICE_TASK_ABORT_PRE`, then, once the
//! tasks are gone, each with `ACL_RT_DEVICE_TASK_ABORT_POST`, given the time left (0: none
//! set); the first that fails fails the abort with its code; once the time is up before a step
//! the abort fails with 107019 (`ACL_ERROR_RT_WAIT_TIMEOUT`). A callback is registered under a
//! unique, non-NULL name (107000 otherwise); a NULL callback unregisters the name.
//!
//! What the aborted tasks answer is `aclrtStreamAbort`'s: they never run, a synchronize of
//! their stream then succeeds, and what waited for an event record among them fails with 107023.

use std::ffi::{c_char, c_void};
use std::time::{Duration, Instant};

use acl_notify_core::{Error, Feature};

use crate::errmsg::{CallError, param};
use crate::ffi::{aclError, api};
use crate::lifecycle::callback_failed;
use crate::runtime::statecb::Registry;
use crate::session::runtime;

/// `aclrtDeviceTaskAbortCallback`.
pub type AbortCallback =
    Option<unsafe extern "C" fn(device: i32, stage: i32, timeout: u32, args: *mut c_void) -> i32>;
type AbortFn = unsafe extern "C" fn(i32, i32, u32, *mut c_void) -> i32;

/// CANN's longest abort (`TASK_ABORT_TIMEOUT_MAX`, ms).
const MAX_TIMEOUT_MS: u32 = 36 * 60 * 1000;

/// The callbacks by name (CANN keeps them in a `std::map`: they run in name order).
static CALLBACKS: Registry<AbortFn> = Registry::new("task abort");

/// `aclError aclrtSetDeviceTaskAbortCallback(const char *regName, aclrtDeviceTaskAbortCallback
/// callback, void *args)`: registers `callback(deviceId, stage, timeout, args)` under
/// `regName`, or (NULL `callback`) unregisters that name.
///
/// Codes: 107000 `regName` NULL, or registered already.
///
/// # Safety
///
/// `regName` is NULL or NUL-terminated; `callback` is safe to call with `args` from any thread
/// until unregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetDeviceTaskAbortCallback(
    name: *const c_char,
    callback: AbortCallback,
    args: *mut c_void,
) -> aclError {
    api("aclrtSetDeviceTaskAbortCallback", || {
        // SAFETY: the caller's contract.
        unsafe { CALLBACKS.register(name, callback, args) }
    })
}

/// `aclError aclrtDeviceTaskAbort(int32_t deviceId, uint32_t timeout)`: aborts every task of
/// `deviceId`'s streams in this process, within `timeout` ms (0: no limit).
///
/// Codes: 207000; 107000 timeout above 36 minutes; 107001; 107019 out of time; a callback's.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDeviceTaskAbort(device: i32, timeout: u32) -> aclError {
    api("aclrtDeviceTaskAbort", || {
        let rt = runtime()?;
        rt.require(Feature::DeviceTaskAbort)?;
        if timeout > MAX_TIMEOUT_MS {
            return Err(param(format!(
                "timeout {timeout} ms is above CANN's 36 minutes ({MAX_TIMEOUT_MS} ms)"
            )));
        }
        let dev = rt.device_id(device)?;
        let start = Instant::now();
        // The time left for the next step (0: no limit), or 107019 once it is up.
        let left = |step: &str| -> Result<u32, CallError> {
            if timeout == 0 {
                return Ok(0);
            }
            let spent = start.elapsed();
            let total = Duration::from_millis(timeout.into());
            if spent > total {
                return Err(CallError::new(
                    Error::WaitTimeout,
                    format!("the abort of device {dev} ran out of its {timeout} ms before {step}"),
                ));
            }
            Ok((total - spent).as_millis() as u32)
        };
        let callbacks = CALLBACKS.named();
        let notify = |stage: i32, what: &str| -> Result<(), CallError> {
            for (name, f, args) in &callbacks {
                let t = left(&format!("the {what} call of callback \"{name}\""))?;
                // SAFETY: `aclrtSetDeviceTaskAbortCallback`'s contract.
                let code = unsafe { f(device, stage, t, *args) };
                if code != 0 {
                    return Err(callback_failed(
                        &format!("task abort callback \"{name}\" ({what})"),
                        code,
                    ));
                }
            }
            Ok(())
        };
        notify(0, "pre")?;
        left("the abort of the streams")?;
        rt.backend().abort_streams_where(|d| d == dev);
        notify(1, "post")
    })
}

//! Stream and device state callbacks (`aclrtRegStreamStateCallback`,
//! `aclrtRegDeviceStateCallback`): functions the program registers under a name, called when a
//! stream is created or about to be destroyed, and around a device's set and reset.
//!
//! As hicann/runtime `src/runtime/core/src/stream/stream_state_callback_manager.cc` and
//! `src/runtime/core/src/device/device_state_callback_manager.cc` (the `rts…` registrations
//! `aclrt…` makes, `src/acl/aclrt_impl/callback.cpp`), with the call sites of
//! `src/runtime/core/src/runtime.cc` (`PrepareDeviceRetain`, `PrimaryContextCallBack`,
//! `PrimaryContextCallBackAfterTeardown`), `src/runtime/api/impl/api_impl.cc` (`SetDevice`)
//! and `src/runtime/core/src/context/context.cc` (`NotifyStreamDestroyPre`):
//! - `regName` NULL, or a name registered already, is 107000; a NULL callback unregisters the
//!   name (a name not registered is not an error);
//! - the callbacks are copied under the registry's lock and called without it, in the order of
//!   their names (CANN keeps the stream ones in a `std::map`; its device ones in an
//!   `unordered_map`, whose order is unspecified), on the thread of the call that changes the
//!   state;
//! - `ACL_RT_STREAM_STATE_CREATE_POST` once `aclrtCreateStream` (or `…WithConfig`,
//!   `…WithFlag`) made the stream, with its handle; `ACL_RT_STREAM_STATE_DESTROY_PRE` before
//!   `aclrtDestroyStream[Force]` destroys it, and for each stream a reset of its device or an
//!   `aclrtDestroyContext` of its context takes away, before they go (with the stream's context
//!   current, as CANN runs them in the context being torn down);
//! - a context's default stream is reported as any stream, under the handle
//!   `aclrtCtxGetCurrentDefaultStream` answers in the context: `CREATE_POST` when the context
//!   is made (a primary one by the set that makes it, between `SET_PRE` and `SET_POST`; CANN's
//!   `Stream::Setup`), `DESTROY_PRE` before `RESET_PRE` of the reset that releases the device
//!   (`PrimaryContextCallBack`) and first in `aclrtDestroyContext` (`ApiImpl::ContextDestroy`);
//! - `ACL_RT_DEVICE_STATE_SET_PRE` before a set (explicit or implicit) of a device not set in
//!   the process, `…_SET_POST` after each `aclrtSetDevice`; `…_RESET_PRE` before the reset
//!   that releases the device (its count of sets reaching 0), `…_RESET_POST` once it is
//!   released.
//!
//! **Ours**: a callback runs with no simulator lock held, so it may call the runtime: within
//! `…_RESET_PRE` or a `DESTROY_PRE` of that reset, a set of the device being reset is 507033
//! at once (CANN's would wait on the device being released, for ever); `SET_PRE` is decided before the set takes
//! the device's count, so two threads setting an unset device at once may both report it.
//! Callbacks are not called at `aclFinalize` (CANN does not call them while the process exits).

#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_void};

use crate::ffi::{aclError, api};
use crate::runtime::statecb::{DEVICES, STREAMS};

/// `aclrtStreamStateCallback`.
pub type aclrtStreamStateCallback =
    Option<unsafe extern "C" fn(stream: *mut c_void, state: i32, args: *mut c_void)>;
/// `aclrtDeviceStateCallback`.
pub type aclrtDeviceStateCallback =
    Option<unsafe extern "C" fn(device: i32, state: i32, args: *mut c_void)>;

/// `aclError aclrtRegStreamStateCallback(const char *regName, aclrtStreamStateCallback
/// callback, void *args)`: registers `callback(stream, state, args)` under `regName`, or
/// (NULL `callback`) unregisters that name.
///
/// Codes: 107000 `regName` NULL, or registered already.
///
/// # Safety
///
/// `regName` is NULL or NUL-terminated; `callback` is safe to call with `args` from any thread
/// until unregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRegStreamStateCallback(
    name: *const c_char,
    callback: aclrtStreamStateCallback,
    args: *mut c_void,
) -> aclError {
    api("aclrtRegStreamStateCallback", || {
        // SAFETY: the caller's contract.
        unsafe { STREAMS.register(name, callback, args) }
    })
}

/// `aclError aclrtRegDeviceStateCallback(const char *regName, aclrtDeviceStateCallback
/// callback, void *args)`: registers `callback(deviceId, state, args)` under `regName`, or
/// (NULL `callback`) unregisters that name.
///
/// Codes: 107000 `regName` NULL, or registered already.
///
/// # Safety
///
/// `regName` is NULL or NUL-terminated; `callback` is safe to call with `args` from any thread
/// until unregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRegDeviceStateCallback(
    name: *const c_char,
    callback: aclrtDeviceStateCallback,
    args: *mut c_void,
) -> aclError {
    api("aclrtRegDeviceStateCallback", || {
        // SAFETY: the caller's contract.
        unsafe { DEVICES.register(name, callback, args) }
    })
}

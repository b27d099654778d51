//! What a program asks when a task failed: `aclrtSetExceptionInfoCallback`,
//! `aclrtExceptionInfoCallbackRegister`/`Unregister`, the getters of the
//! exception record it is handed (`aclrtGet…FromExceptionInfo`, `exception_record`) and
//! `aclrtGetThreadLastTaskId`.
//!
//! As hicann/runtime `src/acl/aclrt_impl/callback.cpp`: a getter given NULL answers
//! 0xFFFFFFFF (`ACL_ERROR_INVALID_EXCEPTION_INFO`) with a message; the args getter checks the
//! record, then `devArgsPtr`, then `devArgsLen` (100000 each), then the record's type: a task
//! that is not a kernel (every simulator task) is 0xFFFFFFFF; the function-handle getter
//! checks the record, then `func` (100000), then asks the runtime, which refuses a record
//! without a kernel binary with 107000 (`ApiImpl::GetFuncHandleFromExceptionInfo`,
//! `src/runtime/api/impl/api_impl.cc`). `aclrtGetThreadLastTaskId` (`kernel.cpp`,
//! `ApiImpl::GetThreadLastTaskId`): 100000 for a NULL `taskId`, else the id of the last task
//! the calling thread queued (0xFFFFFFFF before any: `inner_thread_local.cpp`).

use std::ffi::c_void;

use crate::errmsg::{self, CallError, null_arg, param};
use crate::exception_record::{self, ExceptionCallback, ExceptionInfo};
use crate::ffi::{Out, aclError, api};

/// CANN's `ACL_ERROR_INVALID_EXCEPTION_INFO`.
pub const INVALID_EXCEPTION_INFO: u32 = 0xFFFF_FFFF;

/// `aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback)`: `callback`
/// is called with the exception record of each task of this process's streams that fails,
/// in the order they fail, on the library's reporting thread (never a stream's: it may
/// synchronize any stream, the failed one too, once it made the stream's context current);
/// the synchronize that reports the failure returns after it. NULL removes it.
///
/// Codes: none (0).
///
/// # Safety
///
/// `callback` is NULL or safe to call from any thread until it is replaced or removed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetExceptionInfoCallback(callback: ExceptionCallback) -> aclError {
    api("aclrtSetExceptionInfoCallback", || {
        exception_record::set(callback);
        Ok(())
    })
}

/// `aclError aclrtExceptionInfoCallbackRegister(aclrtExceptionInfoCallback callback)`: adds
/// `callback` to those called with each failed task's record, beside the one
/// `aclrtSetExceptionInfoCallback` sets and any other registered; registering it again keeps
/// one registration (hicann/runtime `callback.cpp`: one name per callback address).
///
/// Codes: 107000 NULL callback.
///
/// # Safety
///
/// As [`aclrtSetExceptionInfoCallback`], until it is unregistered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtExceptionInfoCallbackRegister(
    callback: ExceptionCallback,
) -> aclError {
    api("aclrtExceptionInfoCallbackRegister", || {
        exception_record::register(callback.ok_or_else(|| param("`callback` is NULL"))?)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtExceptionInfoCallbackUnregister(aclrtExceptionInfoCallback callback)`:
/// `callback` is no longer called; success also when it was not registered (CANN erases
/// its name from the table).
///
/// Codes: 107000 NULL callback.
///
/// # Safety
///
/// None beyond passing a function or NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtExceptionInfoCallbackUnregister(
    callback: ExceptionCallback,
) -> aclError {
    api("aclrtExceptionInfoCallbackUnregister", || {
        exception_record::unregister(callback.ok_or_else(|| param("`callback` is NULL"))?)
            .map_err(CallError::backend)
    })
}

/// One field of a record, or 0xFFFFFFFF (with a message naming `call`) for NULL.
fn field(call: &str, info: *const ExceptionInfo, get: fn(&ExceptionInfo) -> u32) -> u32 {
    // SAFETY: the getters' contract: NULL or a record handed to the callback, still in it.
    match unsafe { info.as_ref() } {
        Some(i) => get(i),
        None => {
            errmsg::push(format!(
                "{call} failed: 0xFFFFFFFF (ACL_ERROR_INVALID_EXCEPTION_INFO): `info` is NULL"
            ));
            INVALID_EXCEPTION_INFO
        }
    }
}

/// `uint32_t aclrtGetTaskIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the failed
/// task's id (its number on its stream); 0xFFFFFFFF for NULL.
///
/// # Safety
///
/// `info` is NULL or the record the exception callback was handed, while it runs.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetTaskIdFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    field("aclrtGetTaskIdFromExceptionInfo", info, |i| i.task)
}

/// `uint32_t aclrtGetStreamIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the id of
/// the failed task's stream (`aclrtStreamGetId`'s); 0xFFFFFFFF for NULL.
///
/// # Safety
///
/// As [`aclrtGetTaskIdFromExceptionInfo`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetStreamIdFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    field("aclrtGetStreamIdFromExceptionInfo", info, |i| i.stream)
}

/// `uint32_t aclrtGetThreadIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the kernel
/// thread id of the thread that queued the task (`acl_notify_sim`'s `submitted` module: the
/// one that queued on its stream last); 0xFFFFFFFF for NULL.
///
/// # Safety
///
/// As [`aclrtGetTaskIdFromExceptionInfo`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetThreadIdFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    field("aclrtGetThreadIdFromExceptionInfo", info, |i| i.thread)
}

/// `uint32_t aclrtGetDeviceIdFromExceptionInfo(const aclrtExceptionInfo *info)`: the device
/// of the failed task's stream; 0xFFFFFFFF for NULL.
///
/// # Safety
///
/// As [`aclrtGetTaskIdFromExceptionInfo`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceIdFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    field("aclrtGetDeviceIdFromExceptionInfo", info, |i| i.device)
}

/// `uint32_t aclrtGetErrorCodeFromExceptionInfo(const aclrtExceptionInfo *info)`: the code
/// the task failed with (what its stream's synchronize reports); 0xFFFFFFFF for NULL.
///
/// # Safety
///
/// As [`aclrtGetTaskIdFromExceptionInfo`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetErrorCodeFromExceptionInfo(info: *const ExceptionInfo) -> u32 {
    field("aclrtGetErrorCodeFromExceptionInfo", info, |i| i.code)
}

/// `aclError aclrtGetArgsFromExceptionInfo(const aclrtExceptionInfo *info, void **devArgsPtr,
/// uint32_t *devArgsLen)`: a kernel's arguments; the simulator's tasks are never kernels.
///
/// Codes: 0xFFFFFFFF `info` NULL, or (always, once the pointers are checked) a task that is
/// not a kernel; 100000 `devArgsPtr` or `devArgsLen` NULL.
///
/// # Safety
///
/// As [`aclrtGetTaskIdFromExceptionInfo`]; the out-pointers are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetArgsFromExceptionInfo(
    info: *const ExceptionInfo,
    dev_args: *mut *mut c_void,
    dev_args_len: *mut u32,
) -> aclError {
    const CALL: &str = "aclrtGetArgsFromExceptionInfo";
    if info.is_null() {
        return field(CALL, info, |_| 0) as aclError;
    }
    let checked = api(CALL, || {
        if dev_args.is_null() {
            return Err(null_arg("devArgsPtr"));
        }
        if dev_args_len.is_null() {
            return Err(null_arg("devArgsLen"));
        }
        Ok(())
    });
    if checked != 0 {
        return checked;
    }
    errmsg::push(format!(
        "{CALL} failed: 0xFFFFFFFF (ACL_ERROR_INVALID_EXCEPTION_INFO): the failed task is not a \
         kernel (the simulator runs none), so its record has no arguments"
    ));
    INVALID_EXCEPTION_INFO as aclError
}

/// `aclError aclrtGetFuncHandleFromExceptionInfo(const aclrtExceptionInfo *info,
/// aclrtFuncHandle *func)`: a kernel's function; the simulator's tasks are never kernels.
///
/// Codes: 0xFFFFFFFF `info` NULL; 100000 `func` NULL; 107000 (always, once checked) a task
/// that is not a kernel.
///
/// # Safety
///
/// As [`aclrtGetTaskIdFromExceptionInfo`]; `func` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetFuncHandleFromExceptionInfo(
    info: *const ExceptionInfo,
    func: *mut *mut c_void,
) -> aclError {
    const CALL: &str = "aclrtGetFuncHandleFromExceptionInfo";
    if info.is_null() {
        return field(CALL, info, |_| 0) as aclError;
    }
    // SAFETY: NULL or writable, by the caller's contract.
    let func = unsafe { Out::new(func) };
    api(CALL, || {
        // CANN writes NULL, then fails.
        func.check(|| null_arg("func"))?.put(std::ptr::null_mut());
        Err(param(
            "the failed task is not a kernel (the simulator runs none): its record names no \
             binary and no kernel",
        ))
    })
}

/// `aclError aclrtGetThreadLastTaskId(uint32_t *taskId)`: the id of the last task the calling
/// thread queued (its number on its stream), 0xFFFFFFFF if it queued none.
///
/// Codes: 100000 `taskId` NULL.
///
/// # Safety
///
/// `taskId` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetThreadLastTaskId(task_id: *mut u32) -> aclError {
    api("aclrtGetThreadLastTaskId", || {
        // SAFETY: `task_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(task_id) }.write(
            || null_arg("taskId"),
            || Ok(acl_notify_sim::thread_last_task()),
        )
    })
}

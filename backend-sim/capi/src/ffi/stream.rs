//! The exported stream functions: create, destroy, synchronize, query, host functions and
//! the operation wait timeout, the getters of a stream's id, priority and flags, and its
//! attributes.

use std::ffi::{c_int, c_void};

use acl_notify_core::{StreamDestroy, StreamStatus, SyncWait};

use super::{Out, aclError, aclrtHostFunc, aclrtStream, api, handle};
use crate::errmsg::{null_arg, param};
use crate::runtime::AttrValue;
use crate::session::runtime;

/// `aclrtStreamAttrValue` (`acl_rt.h`): a union of a `uint64_t` and `uint32_t`s, all at offset
/// 0, and `uint32_t reserve[4]` (16 bytes, 8-aligned); written as the member the attribute
/// chooses.
#[derive(Debug)]
#[repr(C, align(8))]
pub struct aclrtStreamAttrValue([u8; 16]);

/// `aclError aclrtCreateStream(aclrtStream *stream)`: a stream on the current device.
///
/// Codes: 100000; 107002; 207005.
///
/// # Safety
///
/// `stream` is NULL or valid for writing an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    api("aclrtCreateStream", || {
        // SAFETY: `stream` is NULL or writable, by the caller's contract.
        unsafe { Out::new(stream) }.handle(|| null_arg("stream"), || runtime()?.create_stream())
    })
}

fn destroy_stream(name: &str, stream: aclrtStream, mode: StreamDestroy) -> aclError {
    api(name, || {
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        runtime()?.destroy_stream(handle(stream), mode)
    })
}

/// `aclError aclrtDestroyStream(aclrtStream stream)`: waits for the queued tasks, then
/// destroys the stream.
///
/// Codes: 100000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    destroy_stream("aclrtDestroyStream", stream, StreamDestroy::Drain)
}

/// `aclError aclrtDestroyStreamForce(aclrtStream stream)`: discards the queued tasks and
/// destroys the stream.
///
/// Codes: 100000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    destroy_stream("aclrtDestroyStreamForce", stream, StreamDestroy::Discard)
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)`: blocks until every queued task ran.
///
/// Codes: 107017; 107002; 107003; 107020 a wait on the stream timed out (once).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    api("aclrtSynchronizeStream", || {
        runtime()?.synchronize(handle(stream), SyncWait::Forever)
    })
}

/// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`: as
/// `aclrtSynchronizeStream`, for at most `timeout` ms (−1 forever, 0 poll).
///
/// Codes: 107000 timeout < −1; 107017; 107002; 107003; 107020; 507046 expired.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32) -> aclError {
    api("aclrtSynchronizeStreamWithTimeout", || {
        let wait = SyncWait::from_c_ms(timeout)
            .ok_or_else(|| param(format!("timeout {timeout} ms is below -1")))?;
        runtime()?.synchronize(handle(stream), wait)
    })
}

/// `aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)`.
///
/// Codes: 100000; 107017; 107002; 107003.
///
/// # Safety
///
/// `status` is NULL or valid for writing an `aclrtStreamStatus` (an `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamQuery(stream: aclrtStream, status: *mut c_int) -> aclError {
    api("aclrtStreamQuery", || {
        // SAFETY: `status` is NULL or writable, by the caller's contract.
        unsafe { Out::new(status) }.write(
            || null_arg("status"),
            || {
                let s = runtime()?.query(handle(stream))?;
                let v = match s {
                    StreamStatus::Complete => 0,
                    StreamStatus::NotReady => 1,
                };
                Ok(v)
            },
        )
    })
}

/// `aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args)`: `fn(args)`
/// runs when the stream reaches it: on the thread subscribed to the stream's host functions
/// (`aclrtSubscribeHostFunc`, see `host_func`), else on a library thread.
///
/// Codes: 107000 `fn` NULL; 107017; 107002; 107003.
///
/// # Safety
///
/// `fn(args)` must be safe to call once from another thread at any time until the stream has
/// run it, and must not unwind.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchHostFunc(
    stream: aclrtStream,
    func: aclrtHostFunc,
    args: *mut c_void,
) -> aclError {
    // SAFETY: the caller's contract is `launch`'s.
    api("aclrtLaunchHostFunc", || unsafe {
        crate::host_func::launch(stream, func, args)
    })
}

/// `aclError aclrtSetOpWaitTimeout(uint32_t timeout)`: the process default (seconds, 0 =
/// forever) for waits given `UINT32_MAX` on Ascend310P (elsewhere those wait for ever).
///
/// Codes: the simulator's, if the session cannot start.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetOpWaitTimeout(timeout: u32) -> aclError {
    api("aclrtSetOpWaitTimeout", || {
        runtime()?.set_op_wait_timeout(timeout)
    })
}

/// `aclError aclrtStreamGetId(aclrtStream stream, int32_t *streamId)`: the stream's id, unique
/// among the live streams of its device (NULL: the current context's default stream's).
///
/// Codes: 100000 `streamId` NULL; 107017; 107002 (NULL stream without a current context).
///
/// # Safety
///
/// `streamId` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamGetId(stream: aclrtStream, stream_id: *mut i32) -> aclError {
    api("aclrtStreamGetId", || {
        // SAFETY: `stream_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(stream_id) }.write(
            || null_arg("streamId"),
            || {
                let info = runtime()?.stream_info(handle(stream), false)?;
                Ok(info.id)
            },
        )
    })
}

/// `aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t *priority)`: the priority the
/// stream was created with, clamped into [0, 7] as CANN does (0 for `aclrtCreateStream`'s and
/// default streams).
///
/// Codes: 100000 `priority` NULL; 107017; 107002.
///
/// # Safety
///
/// `priority` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamGetPriority(
    stream: aclrtStream,
    priority: *mut u32,
) -> aclError {
    api("aclrtStreamGetPriority", || {
        // SAFETY: `priority` is NULL or writable, by the caller's contract.
        unsafe { Out::new(priority) }.write(
            || null_arg("priority"),
            || {
                let info = runtime()?.stream_info(handle(stream), true)?;
                Ok(info.priority)
            },
        )
    })
}

/// `aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t *flags)`: the `ACL_STREAM_*`
/// flags the stream was created with (0 for `aclrtCreateStream`'s and default streams).
///
/// Codes: 100000 `flags` NULL; 107017; 107002.
///
/// # Safety
///
/// `flags` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamGetFlags(stream: aclrtStream, flags: *mut u32) -> aclError {
    api("aclrtStreamGetFlags", || {
        // SAFETY: `flags` is NULL or writable, by the caller's contract.
        unsafe { Out::new(flags) }.write(
            || null_arg("flags"),
            || {
                let info = runtime()?.stream_info(handle(stream), true)?;
                Ok(info.flags)
            },
        )
    })
}

/// `aclError aclrtSetStreamOverflowSwitch(aclrtStream stream, uint32_t flag)`: the stream's
/// overflow detection switch (0 off, 1 on); plain state, kept on the chips that have it (0 and
/// nothing done elsewhere).
///
/// Codes: 100000 `flag` not 0 or 1; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetStreamOverflowSwitch(stream: aclrtStream, flag: u32) -> aclError {
    api("aclrtSetStreamOverflowSwitch", || {
        if flag > 1 {
            return Err(crate::errmsg::CallError::new(
                acl_notify_core::Error::InvalidParam,
                format!("flag {flag} is neither 0 nor 1"),
            ));
        }
        runtime()?.set_overflow_switch(handle(stream), flag == 1)
    })
}

/// `aclError aclrtGetStreamOverflowSwitch(aclrtStream stream, uint32_t *flag)`: the stream's
/// overflow detection switch (1 on chips that do not keep one).
///
/// Codes: 100000 `flag` NULL; 107017; 107002; 107003.
///
/// # Safety
///
/// `flag` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetStreamOverflowSwitch(
    stream: aclrtStream,
    flag: *mut u32,
) -> aclError {
    api("aclrtGetStreamOverflowSwitch", || {
        // SAFETY: `flag` is NULL or writable, by the caller's contract.
        unsafe { Out::new(flag) }.write(
            || null_arg("flag"),
            || runtime()?.overflow_switch(handle(stream)),
        )
    })
}

/// `aclError aclrtSetStreamAttribute(aclrtStream stream, aclrtStreamAttr stmAttrType,
/// aclrtStreamAttrValue *value)`: sets one attribute of a stream (NULL: the current context's
/// default stream); see `runtime/streamattr.rs` for what each keeps.
///
/// Codes: 100000 `value` NULL; 107017; 107000 an unknown attribute or a value out of range, a
/// NULL stream's priority; 107002; 107003; 207000 the failure mode on IPV350.
///
/// # Safety
///
/// `value` is NULL or valid for reading an `aclrtStreamAttrValue` (16 bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetStreamAttribute(
    stream: aclrtStream,
    attr: u32,
    value: *const c_void,
) -> aclError {
    api("aclrtSetStreamAttribute", || {
        if value.is_null() {
            return Err(null_arg("value"));
        }
        // SAFETY: non-NULL, 16 readable bytes by the caller's contract; the union's members
        // all start at offset 0, `failureMode` (ACL_STREAM_ATTR_FAILURE_MODE, 1) 8 bytes
        // wide, the others 4.
        let v = unsafe {
            if attr == 1 {
                AttrValue::Wide(value.cast::<u64>().read_unaligned())
            } else {
                AttrValue::Narrow(value.cast::<u32>().read_unaligned())
            }
        };
        runtime()?.set_stream_attr(handle(stream), attr, v)
    })
}

/// `aclError aclrtGetStreamAttribute(aclrtStream stream, aclrtStreamAttr stmAttrType,
/// aclrtStreamAttrValue *value)`: one attribute of a stream (NULL: the default stream),
/// written to its member of `*value` (nothing written for the user tag on chips without it).
///
/// Codes: 100000 `value` NULL; 107017; 107000 an unknown attribute, a NULL stream's priority;
/// 107002; 107003.
///
/// # Safety
///
/// `value` is NULL or valid for writing an `aclrtStreamAttrValue` (16 bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetStreamAttribute(
    stream: aclrtStream,
    attr: u32,
    value: *mut c_void,
) -> aclError {
    // SAFETY: NULL or writable for an `aclrtStreamAttrValue`, by the caller's contract.
    let value = unsafe { Out::new(value.cast::<aclrtStreamAttrValue>()) };
    api("aclrtGetStreamAttribute", || {
        let value = value.check(|| null_arg("value"))?.bytes();
        // The union's members all start at offset 0; `attr` chooses which is written.
        match runtime()?.stream_attr(handle(stream), attr)? {
            Some(AttrValue::Wide(v)) => value.put_at(0, v),
            Some(AttrValue::Narrow(v)) => value.put_at(0, v),
            None => {}
        }
        Ok(())
    })
}

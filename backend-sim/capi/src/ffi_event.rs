//! The exported C functions for events, contexts, stream modes, device synchronize and the
//! last-error queries (`acl/acl_rt.h`). As in [`crate::ffi`]: the NULL checks CANN's ACL layer
//! makes come first (100000; hicann/runtime `src/acl/aclrt_impl/event.cpp`, `context.cpp`,
//! `stream.cpp`), then the runtime's, in `runtime::event` and `runtime::context`.
#![allow(non_camel_case_types)]

use std::ffi::c_void;

use acl_notify_core::event::IpcEventHandle;
use acl_notify_core::{Error, Timeout};

use crate::errmsg::{self, CallError, null_arg, param};
use crate::ffi::{Out, aclError, aclrtStream, api, handle};
use crate::runtime::event::sync_timeout;
use crate::session::runtime;

/// `aclrtEvent`.
pub type aclrtEvent = *mut c_void;
/// `aclrtContext`.
pub type aclrtContext = *mut c_void;
/// `aclrtIpcEventHandle` (`{ char reserved[ACL_IPC_EVENT_HANDLE_SIZE]; }`, 64 bytes).
pub type aclrtIpcEventHandle = IpcEventHandle;

const _: () = assert!(std::mem::size_of::<aclrtIpcEventHandle>() == 64);

// ---- events ----------------------------------------------------------------------------------

fn create(name: &str, event: *mut aclrtEvent, flag: Option<u32>, ex: bool) -> aclError {
    api(name, || {
        // SAFETY: `event` is NULL or writable, by the caller's contract.
        unsafe { Out::new(event) }
            .handle(|| null_arg("event"), || runtime()?.create_event(flag, ex))
    })
}

/// `aclError aclrtCreateEvent(aclrtEvent *event)`: an event with timestamps that streams can
/// wait on, on the current device.
///
/// Codes: 100000; 207000 SoC without events; 107002.
///
/// # Safety
///
/// `event` is NULL or valid for writing an `aclrtEvent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEvent(event: *mut aclrtEvent) -> aclError {
    create("aclrtCreateEvent", event, None, false)
}

/// `aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)`.
///
/// Codes: 100000; 207000; 107000 a flag word the runtime refuses; 207000
/// `ACL_EVENT_DEVICE_USE_ONLY` on a SoC without it; 107002; 207007.
///
/// # Safety
///
/// `event` is NULL or valid for writing an `aclrtEvent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    create("aclrtCreateEventWithFlag", event, Some(flag), false)
}

/// `aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)`: an event whose
/// waits capture its latest record (see `acl_notify_core::event`).
///
/// Codes: 100000; 207000; 107000; 207000 `ACL_EVENT_IPC` on a SoC without IPC events; 107002.
///
/// # Safety
///
/// `event` is NULL or valid for writing an `aclrtEvent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    create("aclrtCreateEventExWithFlag", event, Some(flag), true)
}

/// `aclError aclrtDestroyEvent(aclrtEvent event)`: tasks already queued still run.
///
/// Codes: 100000; 107017.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyEvent(event: aclrtEvent) -> aclError {
    api("aclrtDestroyEvent", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        runtime()?.destroy_event(handle(event))
    })
}

/// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
///
/// Codes: 100000; 107017; 107002; 107003; 107000 a device-only event; 207007.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtRecordEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    api("aclrtRecordEvent", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        runtime()?.record_event(handle(event), handle(stream))
    })
}

/// `aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)`.
///
/// Codes: 100000; 107017; 107002; 107003; 207000 an Ex, IPC or non-`SYNC` event.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetEvent(event: aclrtEvent, stream: aclrtStream) -> aclError {
    api("aclrtResetEvent", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        runtime()?.reset_event(handle(event), handle(stream))
    })
}

/// `aclError aclrtQueryEvent(aclrtEvent event, aclrtEventStatus *status)` (deprecated).
///
/// Codes: 100000; 107017; 207000 an Ex event.
///
/// # Safety
///
/// `status` is NULL or valid for writing an `aclrtEventStatus` (an `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEvent(event: aclrtEvent, status: *mut i32) -> aclError {
    api("aclrtQueryEvent", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        // SAFETY: `status` is NULL or writable, by the caller's contract.
        unsafe { Out::new(status) }.write(
            || null_arg("status"),
            || {
                let s = runtime()?.query_event(handle(event))?;
                Ok(s as i32)
            },
        )
    })
}

/// `aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status)`.
///
/// Codes: 100000; 107017; the code of the failure the latest record was discarded behind on
/// a stream that stops on failure (as `aclrtSynchronizeEvent`).
///
/// # Safety
///
/// `status` is NULL or valid for writing an `aclrtEventRecordedStatus` (an `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEventStatus(event: aclrtEvent, status: *mut i32) -> aclError {
    api("aclrtQueryEventStatus", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        // SAFETY: `status` is NULL or writable, by the caller's contract.
        unsafe { Out::new(status) }.write(
            || null_arg("status"),
            || {
                let s = runtime()?.query_event_status(handle(event))?;
                Ok(s as i32)
            },
        )
    })
}

/// `aclError aclrtQueryEventWaitStatus(aclrtEvent event, aclrtEventWaitStatus *status)`.
///
/// Codes: 100000; 107017; 207000 an Ex event.
///
/// # Safety
///
/// `status` is NULL or valid for writing an `aclrtEventWaitStatus` (an `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryEventWaitStatus(
    event: aclrtEvent,
    status: *mut i32,
) -> aclError {
    api("aclrtQueryEventWaitStatus", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        // SAFETY: `status` is NULL or writable, by the caller's contract.
        unsafe { Out::new(status) }.write(
            || null_arg("status"),
            || {
                let s = runtime()?.query_event_wait_status(handle(event))?;
                Ok(s as i32)
            },
        )
    })
}

/// `aclError aclrtSynchronizeEvent(aclrtEvent event)`: blocks until the event's latest record
/// has run.
///
/// Codes: 100000; 107017; 107023 the record was discarded unrun (its stream destroyed
/// with aclrtDestroyStreamForce, aborted, its device reset or the session finalized); the
/// code of the failure the record was discarded behind on a stream that stops on failure.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeEvent(event: aclrtEvent) -> aclError {
    api("aclrtSynchronizeEvent", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        runtime()?.synchronize_event(handle(event), acl_notify_core::SyncWait::Forever)
    })
}

/// `aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)`: as
/// `aclrtSynchronizeEvent`, for at most `timeout` ms (−1 forever).
///
/// Codes: 107000 timeout < −1 (the ACL layer checks it before the NULL event), then 100000;
/// 107000 timeout 0; 107017; 507047 expired; 107023 the record was discarded unrun, or the
/// code of the failure it was discarded behind (as `aclrtSynchronizeEvent`).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeEventWithTimeout(event: aclrtEvent, timeout: i32) -> aclError {
    api("aclrtSynchronizeEventWithTimeout", || {
        if timeout < -1 {
            return Err(param(format!("timeout {timeout} ms is below -1")));
        }
        if event.is_null() {
            return Err(null_arg("event"));
        }
        let wait = sync_timeout(timeout)?;
        runtime()?.synchronize_event(handle(event), wait)
    })
}

/// `aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent)`:
/// milliseconds between the two events' latest records.
///
/// Codes: 100000; 107017; 507000 an event never recorded; 107006 an event without timestamps
/// (no `ACL_EVENT_TIME_LINE`) or whose record has not run; 207000 an IPC event.
///
/// # Safety
///
/// `ms` is NULL or valid for writing a `float`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventElapsedTime(
    ms: *mut f32,
    start_event: aclrtEvent,
    end_event: aclrtEvent,
) -> aclError {
    api("aclrtEventElapsedTime", || {
        // SAFETY: `ms` is NULL or writable, by the caller's contract.
        unsafe { Out::new(ms) }.write(
            || null_arg("ms"),
            || {
                if start_event.is_null() {
                    return Err(null_arg("startEvent"));
                }
                if end_event.is_null() {
                    return Err(null_arg("endEvent"));
                }
                let v = runtime()?.elapsed_time(handle(start_event), handle(end_event))?;
                Ok(v)
            },
        )
    })
}

/// `aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp)`: when the latest
/// record ran, in µs of `CLOCK_MONOTONIC`.
///
/// Codes: 100000; 107017; 507000; 107006.
///
/// # Safety
///
/// `timestamp` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtEventGetTimestamp(
    event: aclrtEvent,
    timestamp: *mut u64,
) -> aclError {
    api("aclrtEventGetTimestamp", || {
        // SAFETY: `timestamp` is NULL or writable, by the caller's contract.
        unsafe { Out::new(timestamp) }.write(
            || null_arg("timestamp"),
            || {
                if event.is_null() {
                    return Err(null_arg("event"));
                }
                let v = runtime()?.event_timestamp_us(handle(event))?;
                Ok(v)
            },
        )
    })
}

/// `aclError aclrtGetEventId(aclrtEvent event, uint32_t *eventId)`.
///
/// Codes: 100000; 107017; 207000 an IPC event; 507000 no id yet (an `aclrtCreateEvent` event
/// before its first record).
///
/// # Safety
///
/// `event_id` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetEventId(event: aclrtEvent, event_id: *mut u32) -> aclError {
    api("aclrtGetEventId", || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        // SAFETY: `event_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(event_id) }.write(
            || null_arg("eventId"),
            || runtime()?.event_id(handle(event)),
        )
    })
}

fn wait_event(name: &str, stream: aclrtStream, event: aclrtEvent, timeout: Timeout) -> aclError {
    api(name, || {
        if event.is_null() {
            return Err(null_arg("event"));
        }
        runtime()?.stream_wait_event(handle(stream), handle(event), timeout)
    })
}

/// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`: the stream's later
/// tasks wait for the event; the wait times out after the process's `aclrtSetOpWaitTimeout`
/// value (0, the default: never), reported by the next synchronize (107020).
///
/// Codes: 100000; 107017; 107002; 107003; 107000 a classic event never recorded, or a
/// device-only one; 207000 an event without `ACL_EVENT_SYNC`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtStreamWaitEvent(stream: aclrtStream, event: aclrtEvent) -> aclError {
    wait_event(
        "aclrtStreamWaitEvent",
        stream,
        event,
        Timeout::ProcessDefault,
    )
}

/// `aclError aclrtStreamWaitEventWithTimeout(aclrtStream stream, aclrtEvent event, int32_t
/// timeout)`: `timeout` in seconds, 0 forever.
///
/// Codes: 107000 timeout < 0; then as `aclrtStreamWaitEvent`, except that a NULL event is
/// 107000 here (the ACL layer does not check it; the runtime does).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtStreamWaitEventWithTimeout(
    stream: aclrtStream,
    event: aclrtEvent,
    timeout: i32,
) -> aclError {
    api("aclrtStreamWaitEventWithTimeout", || {
        if timeout < 0 {
            return Err(param(format!(
                "timeout {timeout} s: 0 (never) or a positive number of seconds"
            )));
        }
        if event.is_null() {
            return Err(param("`event` is NULL"));
        }
        runtime()?.stream_wait_event(
            handle(stream),
            handle(event),
            Timeout::from_c(timeout as u32),
        )
    })
}

/// `aclError aclrtGetEventAvailNum(uint32_t *eventCount)`: event ids the current device has
/// left (in the simulator: this process's share, `Soc::max_events` minus the ids it holds).
///
/// Codes: 100000; 207000; 107002.
///
/// # Safety
///
/// `event_count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetEventAvailNum(event_count: *mut u32) -> aclError {
    api("aclrtGetEventAvailNum", || {
        // SAFETY: `event_count` is NULL or writable, by the caller's contract.
        unsafe { Out::new(event_count) }
            .write(|| null_arg("eventCount"), || runtime()?.events_free())
    })
}

/// `aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle *handle)`.
///
/// Codes: 100000; 207000 SoC without IPC events; 107017; 107000 not an `ACL_EVENT_IPC` event.
///
/// # Safety
///
/// `out` is NULL or valid for writing an `aclrtIpcEventHandle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcGetEventHandle(
    event: aclrtEvent,
    out: *mut aclrtIpcEventHandle,
) -> aclError {
    api("aclrtIpcGetEventHandle", || {
        // SAFETY: `out` is NULL or writable, by the caller's contract.
        unsafe { Out::new(out) }.write(
            || null_arg("handle"),
            || {
                if event.is_null() {
                    return Err(null_arg("event"));
                }
                let h = runtime()?.ipc_event_handle(handle(event))?;
                Ok(h)
            },
        )
    })
}

/// `aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event)`: another
/// process's IPC event, on the current device.
///
/// Codes: 100000; 207000; 107002; 107000 a malformed handle; 107017 the event is gone.
///
/// # Safety
///
/// `event` is NULL or valid for writing an `aclrtEvent`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
    ipc: aclrtIpcEventHandle,
    event: *mut aclrtEvent,
) -> aclError {
    api("aclrtIpcOpenEventHandle", || {
        // SAFETY: `event` is NULL or writable, by the caller's contract.
        unsafe { Out::new(event) }.handle(|| null_arg("event"), || runtime()?.ipc_open_event(&ipc))
    })
}

// ---- contexts --------------------------------------------------------------------------------

/// `aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId)`: a context on the
/// device, with a default stream of its own; it becomes the calling thread's current context.
///
/// Codes: 100000; 107001.
///
/// # Safety
///
/// `context` is NULL or valid for writing an `aclrtContext`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateContext(
    context: *mut aclrtContext,
    device_id: i32,
) -> aclError {
    api("aclrtCreateContext", || {
        // SAFETY: `context` is NULL or writable, by the caller's contract.
        unsafe { Out::new(context) }.handle(
            || null_arg("context"),
            || runtime()?.create_context(device_id),
        )
    })
}

/// `aclError aclrtDestroyContext(aclrtContext context)`: discards its streams.
///
/// Codes: 100000; 107017; 107000 a device's primary context (released by `aclrtResetDevice`).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyContext(context: aclrtContext) -> aclError {
    api("aclrtDestroyContext", || {
        if context.is_null() {
            return Err(null_arg("context"));
        }
        runtime()?.destroy_context(handle(context))
    })
}

/// `aclError aclrtSetCurrentContext(aclrtContext context)`: also makes its device current.
///
/// Codes: 100000; 107017.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetCurrentContext(context: aclrtContext) -> aclError {
    api("aclrtSetCurrentContext", || {
        if context.is_null() {
            return Err(null_arg("context"));
        }
        runtime()?.set_current_context(handle(context))
    })
}

/// `aclError aclrtGetCurrentContext(aclrtContext *context)`.
///
/// Codes: 100000; 107002 none.
///
/// # Safety
///
/// `context` is NULL or valid for writing an `aclrtContext`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetCurrentContext(context: *mut aclrtContext) -> aclError {
    api("aclrtGetCurrentContext", || {
        // SAFETY: `context` is NULL or writable, by the caller's contract.
        unsafe { Out::new(context) }.handle(|| null_arg("context"), || runtime()?.current_context())
    })
}

/// `aclError aclrtCtxGetCurrentDefaultStream(aclrtStream *stream)`: a handle of the current
/// context's default stream (what a NULL stream means there).
///
/// Codes: 100000; 107002.
///
/// # Safety
///
/// `stream` is NULL or valid for writing an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCtxGetCurrentDefaultStream(stream: *mut aclrtStream) -> aclError {
    api("aclrtCtxGetCurrentDefaultStream", || {
        // SAFETY: `stream` is NULL or writable, by the caller's contract.
        unsafe { Out::new(stream) }.handle(
            || null_arg("stream"),
            || runtime()?.current_default_stream(),
        )
    })
}

// ---- stream modes and device synchronize -----------------------------------------------------

/// `aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t
/// flag)`: a stream of the current context; `priority` and the `ACL_STREAM_*` flags are kept
/// for `aclrtStreamGetPriority` / `aclrtStreamGetFlags` and not modelled otherwise.
///
/// Codes: 100000; 107000 unknown flag bits; 107002.
///
/// # Safety
///
/// `stream` is NULL or valid for writing an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStreamWithConfig(
    stream: *mut aclrtStream,
    priority: u32,
    flag: u32,
) -> aclError {
    api("aclrtCreateStreamWithConfig", || {
        // SAFETY: `stream` is NULL or writable, by the caller's contract.
        unsafe { Out::new(stream) }.handle(
            || null_arg("stream"),
            || runtime()?.create_stream_with_config(priority, flag),
        )
    })
}

/// `aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)`: bit 0 of `mode`:
/// `ACL_CONTINUE_ON_FAILURE` (0) or `ACL_STOP_ON_FAILURE` (1), in which the tasks after a
/// failed one are discarded and the failure is reported by the next synchronize.
///
/// Codes: 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetStreamFailureMode(stream: aclrtStream, mode: u64) -> aclError {
    api("aclrtSetStreamFailureMode", || {
        runtime()?.set_failure_mode(handle(stream), mode)
    })
}

/// `aclError aclrtStreamAbort(aclrtStream stream)`: discards the stream's queued tasks and
/// stops the running one; the stream stays usable.
///
/// Codes: 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtStreamAbort(stream: aclrtStream) -> aclError {
    api("aclrtStreamAbort", || {
        runtime()?.abort_stream(handle(stream))
    })
}

/// `aclError aclrtSynchronizeDevice(void)`: waits for every stream of the current context.
///
/// Codes: 107002; a stream's stored task error (107020, …).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeDevice() -> aclError {
    api("aclrtSynchronizeDevice", || {
        runtime()?.synchronize_device(acl_notify_core::SyncWait::Forever)
    })
}

/// `aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout)`: as `aclrtSynchronizeDevice`
/// for at most `timeout` ms (−1 forever; 0 and below −1 are 107000).
///
/// Codes: 107000; 107002; 507046 expired; a stream's stored task error.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError {
    api("aclrtSynchronizeDeviceWithTimeout", || {
        let wait = sync_timeout(timeout)?;
        runtime()?.synchronize_device(wait)
    })
}

// ---- last error ------------------------------------------------------------------------------

fn last_error(name: &str, level: i32, take: bool) -> aclError {
    if level != 0 {
        // hicann/runtime `context.cpp`: `ACL_REQUIRES_PARAM_EQUAL_REPORT(level,
        // ACL_RT_THREAD_LEVEL)`; this failure is the ACL layer's and is not kept.
        return api(name, || {
            Err(CallError::new(
                Error::InvalidParam,
                format!("level {level}: only ACL_RT_THREAD_LEVEL (0) is supported"),
            ))
        });
    }
    errmsg::last_error(take)
}

/// `aclError aclrtGetLastError(aclrtLastErrLevel level)`: the code of the calling thread's
/// latest failed runtime call (0 if none), then clears it.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetLastError(level: i32) -> aclError {
    last_error("aclrtGetLastError", level, true)
}

/// `aclError aclrtPeekAtLastError(aclrtLastErrLevel level)`: as `aclrtGetLastError` without
/// clearing it.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtPeekAtLastError(level: i32) -> aclError {
    last_error("aclrtPeekAtLastError", level, false)
}

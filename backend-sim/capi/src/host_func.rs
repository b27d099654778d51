//! Host functions run by a thread of the program (`aclrtSubscribeHostFunc`,
//! `aclrtProcessHostFunc`, `aclrtUnSubscribeHostFunc`): once a thread is subscribed to a
//! stream's host functions, each `aclrtLaunchHostFunc(stream, fn, args)` queued there hands
//! `fn(args)` to that thread when the stream reaches it, and the stream goes on once the thread
//! has run it; on a stream no thread serves, a library thread runs it as before.
//!
//! CANN's compact runtime (hicann/runtime `src/runtime_compact/feature/src/host_func.c`,
//! `subscribe_manager_linux.c`) subscribes host functions exactly as callbacks, in a second
//! slot of the stream, so this module is `crate::callback`'s machinery on
//! [`Channel::HostFunc`]: the same mailbox per thread, the same bounded waits (a host function
//! that no thread ever processes holds its stream as a blocking callback does, and
//! `aclrtStreamAbort`, a forced destroy, a reset and `aclFinalize` give it up), the same codes.
//!
//! Only IPV350 has them, as CANN documents (hicann/runtime `docs/zh/api_ref/24_other_APIs.md`:
//! every other chip "不支持"; its full runtime has no `rtSubscribeHostFunc`): elsewhere the
//! three answer 207000 and `aclrtLaunchHostFunc` always runs on a library thread.
//!
//! Codes: 207000 a SoC other than IPV350; 107000 a NULL stream to (un)subscribe (the
//! documentation says NULL is refused), a timeout that is neither −1 nor positive, `fn` NULL;
//! 107011 a second thread for a stream's
//! host functions, an unsubscription by a thread that does not serve them; 107012 a thread
//! serving another device's streams, or processing while subscribed to no stream; 507012 no
//! host function within the timeout; the stream checks (107017, 107002, 107003).

use std::ffi::c_void;

use acl_notify_core::Feature;

use crate::callback::{mailbox_of, post, process, subscribe, unsubscribe};
use crate::errmsg::{CallError, param};
use crate::ffi::{aclError, aclrtHostFunc, aclrtStream, api, handle};
use crate::runtime::callbacks::Channel;
use crate::session::runtime;

/// 207000 on a SoC without host-function threads; 107000 for a NULL `exeStream`.
fn check(stream: aclrtStream) -> Result<(), CallError> {
    runtime()?.require(Feature::HostFuncThread)?;
    if stream.is_null() {
        return Err(param(
            "`exeStream` is NULL: host functions are subscribed per created stream",
        ));
    }
    Ok(())
}

/// `aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)`:
/// thread `hostFuncThreadId` (a `pthread_self()` value) runs `exeStream`'s host functions.
///
/// Codes: 207000; 107000; 107011; 107012; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSubscribeHostFunc(thread_id: u64, stream: aclrtStream) -> aclError {
    api("aclrtSubscribeHostFunc", || {
        check(stream)?;
        subscribe(Channel::HostFunc, thread_id, stream)
    })
}

/// `aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId, aclrtStream exeStream)`:
/// `exeStream`'s host functions run on a library thread again.
///
/// Codes: 207000; 107000; 107011; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtUnSubscribeHostFunc(thread_id: u64, stream: aclrtStream) -> aclError {
    api("aclrtUnSubscribeHostFunc", || {
        check(stream)?;
        unsubscribe(Channel::HostFunc, thread_id, stream)
    })
}

/// `aclError aclrtProcessHostFunc(int32_t timeout)`: runs one host function handed to the
/// calling thread, waiting up to `timeout` ms for it (−1: for ever).
///
/// Codes: 207000; 107000; 107012; 507012.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtProcessHostFunc(timeout: i32) -> aclError {
    api("aclrtProcessHostFunc", || {
        runtime()?.require(Feature::HostFuncThread)?;
        process(Channel::HostFunc, timeout)
    })
}

/// `aclrtLaunchHostFunc`'s work: `func(args)` queued on `stream`, run by the thread subscribed
/// to its host functions if one is, else by a library thread.
///
/// # Safety
///
/// `func(args)` must be safe to call once from another thread at any time until the stream
/// has run it, and must not unwind.
pub(crate) unsafe fn launch(
    stream: aclrtStream,
    func: aclrtHostFunc,
    args: *mut c_void,
) -> Result<(), CallError> {
    let Some(func) = func else {
        return Err(param("`fn` is NULL"));
    };
    let rt = runtime()?;
    let raw = rt.resolve_task_stream(handle(stream))?;
    match mailbox_of(Channel::HostFunc, raw) {
        // SAFETY: the caller's contract. A host function holds its stream until it ran
        // (hicann/runtime `api_impl.cc` `LaunchHostFunc`: a blocking callback task).
        Some(mailbox) => unsafe { post(Channel::HostFunc, mailbox, func, args, true, raw, stream) },
        None => {
            // SAFETY: the caller's contract is `HostCall::new`'s.
            let call = unsafe { acl_notify_core::HostCall::new(func, args) };
            rt.launch_host_func(handle(stream), call)
        }
    }
}

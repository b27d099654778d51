//! The exception record a failed simulator task makes (`aclrtExceptionInfo`, CANN's
//! `rtExceptionInfo`) and the callback `aclrtSetExceptionInfoCallback` sets, which is handed
//! a pointer to it on the simulator's reporting thread (`acl_notify_sim`'s `task_failure`),
//! before the synchronize that reports the failure returns.
//! The record is ours: C sees it only through the `aclrtGet…FromExceptionInfo` getters
//! (`exception_info`), and it is valid only while the callback runs.
//!
//! As hicann/runtime `src/runtime/core/src/task/task_info/task_manager.cc` (`TaskFailCallBack`)
//! and `task_fail_callback_manager.cc`: the record holds the task id, the stream id, the id of
//! the thread that queued the task, the device and the external error code; a task failed by
//! an abort is not reported. The simulator's tasks are never kernels: CANN's expand info type
//! is then none of AI Core / AI CPU / fusion, which the args and function-handle getters refuse.
//! Leaf module: the session (`runtime`) installs [`tell`] as its `Sim`'s failure listener.

use acl_notify_sim::{PerProcess, SimError};
use std::sync::atomic::{AtomicUsize, Ordering};

use acl_notify_sim::TaskFailure;

/// `aclrtExceptionInfo` as this library makes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExceptionInfo {
    pub(crate) task: u32,
    pub(crate) stream: u32,
    pub(crate) thread: u32,
    pub(crate) device: u32,
    pub(crate) code: u32,
}

/// `aclrtExceptionInfoCallback`.
pub type ExceptionCallback = Option<unsafe extern "C" fn(info: *mut ExceptionInfo)>;

/// The callback's address (0: none). CANN keeps it under the ACL module's name: a new one
/// replaces the old, NULL removes it.
static CALLBACK: AtomicUsize = AtomicUsize::new(0);

/// The callbacks `aclrtExceptionInfoCallbackRegister` added, by address: CANN keeps each
/// under a name made of its address (hicann/runtime `callback.cpp`,
/// `MakeExceptionCallbackRegName`), so registering one twice keeps one, and they sit beside
/// the one `aclrtSetExceptionInfoCallback` sets (`task_fail_callback_data_manager.cc`: every
/// registered callback is told of each failure).
static REGISTERED: PerProcess<Vec<usize>> = PerProcess::inheriting(Vec::new, Vec::clone);

/// Sets (or, `None`, removes) the callback.
pub(crate) fn set(callback: ExceptionCallback) {
    CALLBACK.store(callback.map_or(0, |f| f as usize), Ordering::Release);
}

/// Adds `callback` to those told of each failure (once, however often it is added).
pub(crate) fn register(
    callback: unsafe extern "C" fn(info: *mut ExceptionInfo),
) -> Result<(), SimError> {
    let mut r = REGISTERED.lock()?;
    let at = callback as usize;
    if !r.contains(&at) {
        r.push(at);
    }
    Ok(())
}

/// Removes `callback` from those told (nothing when it is not among them, as CANN's erase).
pub(crate) fn unregister(
    callback: unsafe extern "C" fn(info: *mut ExceptionInfo),
) -> Result<(), SimError> {
    let at = callback as usize;
    REGISTERED.lock()?.retain(|&c| c != at);
    Ok(())
}

/// Tells the callback, if one is set, of `f`, its stream's id being `stream_id` (`None`: the
/// stream has none any more, 0xFFFFFFFF as CANN's "no stream").
pub(crate) fn tell(f: &TaskFailure, stream_id: Option<i32>) {
    // Copied out first, as CANN's `Notify`: a callback may register or unregister.
    let mut all = REGISTERED.lock().map(|r| r.clone()).unwrap_or_default();
    let cb = CALLBACK.load(Ordering::Acquire);
    if cb != 0 {
        all.insert(0, cb);
    }
    if all.is_empty() {
        return;
    }
    let info = ExceptionInfo {
        task: f.task,
        stream: stream_id.map_or(u32::MAX, |id| id as u32),
        thread: f.thread,
        device: f.device,
        code: f.error.code() as u32,
    };
    for cb in all {
        // SAFETY: only `set` and `register` store these, each the address of an
        // `unsafe extern "C" fn(*mut ExceptionInfo)`.
        let f_ptr: unsafe extern "C" fn(*mut ExceptionInfo) = unsafe { std::mem::transmute(cb) };
        // Each callback gets its own copy, valid for its call.
        let mut mine = info;
        // SAFETY: the setters' contract: callable from any thread with a record valid for the
        // call.
        unsafe { f_ptr(&mut mine) };
    }
}

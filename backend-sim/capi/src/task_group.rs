//! Task groups of captured models and their updates in the C ABI
//! (`aclmdlRICaptureTaskGrpBegin`, `aclmdlRICaptureTaskGrpEnd`,
//! `aclmdlRICaptureTaskUpdateBegin`, `aclmdlRICaptureTaskUpdateEnd`). The NULL checks are
//! CANN's ACL layer's (hicann/runtime `src/acl/aclrt_impl/model_ri.cpp`: 100000), the rest the
//! runtime's (`runtime::task_group`).

use std::ffi::c_void;

use crate::errmsg::null_arg;
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::model_ri::stream_arg;
use crate::session::runtime;

/// `aclrtTaskGrp`.
#[allow(non_camel_case_types)]
pub type aclrtTaskGrp = *mut c_void;

/// `aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream)`: the tasks the capturing
/// stream stores from now on form a group.
///
/// Codes: 100000 NULL; 107017 bad stream; 107029 not capturing; 107033 a group begun already.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRICaptureTaskGrpBegin(stream: aclrtStream) -> aclError {
    api("aclmdlRICaptureTaskGrpBegin", || {
        runtime()?.task_group_begin(stream_arg(stream)?)
    })
}

/// `aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle)`.
///
/// Codes: 100000 NULL; 107017 bad stream; 107029 not capturing; 107033 no group begun;
/// 507903 the capture invalidated.
///
/// # Safety
///
/// `handle` points to a writable `aclrtTaskGrp`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICaptureTaskGrpEnd(
    stream: aclrtStream,
    handle: *mut aclrtTaskGrp,
) -> aclError {
    api("aclmdlRICaptureTaskGrpEnd", || {
        let s = stream_arg(stream)?;
        // SAFETY: `handle` is NULL or writable, by the caller's contract.
        unsafe { Out::new(handle) }.handle(|| null_arg("handle"), || runtime()?.task_group_end(s))
    })
}

/// `aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream, aclrtTaskGrp handle)`: the
/// tasks queued on `stream` from now on replace the group's, one for one.
///
/// Codes: 100000 NULL; 107017 bad stream or group; 107027 a capturing stream; 107005 a bound
/// stream; 107033 the stream or the group updating already.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRICaptureTaskUpdateBegin(
    stream: aclrtStream,
    handle: aclrtTaskGrp,
) -> aclError {
    api("aclmdlRICaptureTaskUpdateBegin", || {
        let s = stream_arg(stream)?;
        if handle.is_null() {
            return Err(null_arg("handle"));
        }
        runtime()?.task_update_begin(s, handle.addr())
    })
}

/// `aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream)`: queues on `stream` the task
/// that puts the new tasks in the model when it runs.
///
/// Codes: 100000 NULL; 107017 bad stream; 107027 capturing; 107005 bound; 107033 no update
/// begun; 507000 not as many tasks as the group, or one of another type.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRICaptureTaskUpdateEnd(stream: aclrtStream) -> aclError {
    api("aclmdlRICaptureTaskUpdateEnd", || {
        runtime()?.task_update_end(stream_arg(stream)?)
    })
}

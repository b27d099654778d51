//! `aclrtProfTrace`: a user's profiling trace point queued on a stream.
//!
//! CANN: `src/acl/aclrt_impl/dfx.cpp` (a NULL `userdata`: 100000), then `rtsProfTrace`
//! (`src/runtime/api/api_c.cc`: `length` outside (0, 18] — the packed `rtProfTraceUserData`
//! of `api.hpp`: id, model id, tag id — 107000; the bytes copied at the call, a shorter one
//! padded with zeros) and `ApiImpl::ProfilerTraceEx` (`api_impl.cc`: no current context 107002;
//! NULL is the context's default stream; a stream of another context 107003), which queues a
//! trace task on the stream.
//!
//! The simulator collects no profiling data: the trace point is a task that does nothing,
//! queued in the stream's order like any task (a stream that failed answers its error; a
//! capturing stream refuses it, 107027, as it refuses the calls a capture does not take).

use std::ffi::c_void;

use acl_notify_core::Error;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{aclError, api};
use crate::session::runtime;

/// The bytes of CANN's packed `rtProfTraceUserData`.
const USER_DATA: i32 = 18;

/// `aclError aclrtProfTrace(void *userdata, int32_t length, aclrtStream stream)`: queues a trace
/// point (recorded nowhere: no profiling is collected).
///
/// Codes: 100000 NULL `userdata`; 107000 `length` not in (0, 18]; 107002; 107017 a bad stream;
/// 107003 a stream of another context; 107027 a capturing stream.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtProfTrace(
    userdata: *mut c_void,
    length: i32,
    stream: *mut c_void,
) -> aclError {
    api("aclrtProfTrace", || {
        if userdata.is_null() {
            return Err(null_arg("userdata"));
        }
        if length <= 0 || length > USER_DATA {
            return Err(CallError::new(
                Error::ParamInvalid,
                format!("length {length}: in (0, {USER_DATA}] (id, model id and tag id)"),
            ));
        }
        let rt = runtime()?;
        let raw = rt.resolve_task_stream(stream.addr())?;
        let task = Box::new(|_: &acl_notify_sim::stream::TaskCtx| Ok(()));
        rt.backend()
            .run_async(raw, task)
            .map_err(CallError::backend)
    })
}

//! Models built on bound streams in the C ABI (`aclmdlRIBuildBegin`, `aclmdlRIBindStream`,
//! `aclmdlRIEndTask`, `aclmdlRIBuildEnd`, `aclmdlRIUnbindStream`). The NULL checks are
//! CANN's ACL layer's (hicann/runtime `src/acl/aclrt_impl/model_ri.cpp`: 100000), the rest
//! the runtime's (`runtime::model_build` says which source files it follows).

use std::ffi::c_void;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::model_ri::{aclmdlRI, model, stream_arg};
use crate::session::runtime;

/// `aclError aclmdlRIBuildBegin(aclmdlRI *modelRI, uint32_t flag)`: a new model to build;
/// the tasks later queued on the streams bound to it are stored in it.
///
/// Codes: 100000 NULL `modelRI`; 207000 a SoC without it (IPV350).
///
/// # Safety
///
/// `modelRI` points to a writable `aclmdlRI`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIBuildBegin(model_ri: *mut aclmdlRI, flag: u32) -> aclError {
    api("aclmdlRIBuildBegin", || {
        // SAFETY: `model_ri` is NULL or writable, by the caller's contract.
        unsafe { Out::new(model_ri) }
            .handle(|| null_arg("modelRI"), || runtime()?.build_begin(flag))
    })
}

/// `aclError aclmdlRIBindStream(aclmdlRI modelRI, aclrtStream stream, uint32_t flag)`.
///
/// Codes: 100000 NULL model; 107017 bad model or stream; 107000 a captured model or a
/// finished build, a flag neither `ACL_MODEL_STREAM_FLAG_HEAD` nor `_DEFAULT`; 107005 the
/// stream bound already; 107027 a capturing stream; 107003 a stream of another device; 207000
/// the default stream.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIBindStream(
    model_ri: aclmdlRI,
    stream: aclrtStream,
    flag: u32,
) -> aclError {
    api("aclmdlRIBindStream", || {
        let m = model(model_ri)?;
        let s = stream_arg(stream)?;
        runtime()?.bind_stream(m, s, flag)
    })
}

/// `aclError aclmdlRIEndTask(aclmdlRI modelRI, aclrtStream stream)`: the stream's part of
/// the model ends (a task queued on it after is refused until the build's end).
///
/// Codes: 100000 NULL model; 107017; 107000 a captured model or a finished build; 107005
/// the stream is not bound to the model.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIEndTask(model_ri: aclmdlRI, stream: aclrtStream) -> aclError {
    api("aclmdlRIEndTask", || {
        let m = model(model_ri)?;
        let s = stream_arg(stream)?;
        runtime()?.end_task(m, s)
    })
}

/// `aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void *reserve)`: the model becomes
/// executable (`aclmdlRIExecute[Async]` replays what its streams stored).
///
/// Codes: 100000 NULL model, non-NULL `reserve`; 107017; 107000 a captured model, a finished
/// build, no bound stream.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIBuildEnd(model_ri: aclmdlRI, reserve: *mut c_void) -> aclError {
    api("aclmdlRIBuildEnd", || {
        let m = model(model_ri)?;
        if !reserve.is_null() {
            // `ACL_CHECK_INVALID_PARAM_NO_VALUE` of the ACL layer: 100000.
            return Err(CallError::new(
                acl_notify_core::Error::InvalidParam,
                "reserve is a reserved parameter and must be NULL",
            ));
        }
        runtime()?.build_end(m)
    })
}

/// `aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream)`.
///
/// Codes: 100000 NULL model; 107017; 107000 a captured model; 107005 the stream is not bound
/// to the model.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIUnbindStream(model_ri: aclmdlRI, stream: aclrtStream) -> aclError {
    api("aclmdlRIUnbindStream", || {
        let m = model(model_ri)?;
        let s = stream_arg(stream)?;
        runtime()?.unbind_stream(m, s)
    })
}

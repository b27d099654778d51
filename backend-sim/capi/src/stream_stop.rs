//! `aclrtStreamStop`: a stream's tasks stop running, kept in its queue.
//!
//! CANN's checks, in order (hicann/runtime `src/runtime/api/api_c.cc` `rtsStreamStop`: the
//! handle; `src/runtime/api/impl/api_error.cc` `ApiErrorDecorator::StreamStop`: NULL is
//! 107000, the API page of `docs/zh/api_ref/06_stream_management.md` saying the default
//! stream is not taken; `src/runtime/api/impl/api_impl.cc` `ApiImpl::StreamClear` with
//! `RT_STREAM_STOP`: no context 107002, a chip without STARS and the task scheduler's
//! `TS_FEATURE_MC2_ENHANCE` 207000 — the API page lists Atlas A2, Atlas A3 and Ascend 950 —, a
//! stream of another context 107003; `src/runtime/core/src/context/context.cc`
//! `Context::StreamClear` and `api_impl_david.cc` `ApiImplDavid::StreamStop`: a stream bound to
//! a model `RT_ERROR_STREAM_INVALID`, which `errcode_manage.cc` makes 507000). A stream a
//! handle of which names a context's default stream is refused as NULL is.
//!
//! What a stop does (`acl_notify_sim::stream::Stream::stop`, after `stream.cc`
//! `Stream::StreamStop`): the running task is cut short, the queued tasks and those queued
//! later are kept and do not run; `aclrtSynchronizeStream[WithTimeout]` waits for them (its
//! timeout: 507046, with a message saying the stream is stopped), `aclrtStreamQuery` answers
//! `ACL_STREAM_STATUS_NOT_READY`; `aclrtStreamAbort` drops them and the stream runs again;
//! `aclrtDestroyStream` and `aclrtDestroyStreamForce` discard them (a drain would wait for
//! ever: the simulator's choice, CANN's task scheduler being no public source).

use acl_notify_core::{Backend as _, Error, Feature};

use crate::errmsg::CallError;
use crate::ffi::{aclError, aclrtStream, api, handle};
use crate::session::runtime;

/// `aclError aclrtStreamStop(aclrtStream stream)`: stops the stream's tasks (see the module).
///
/// Codes: 107017 a destroyed stream; 107000 NULL or a default stream; 107002; 207000 a chip
/// that does not stop streams; 107003 a stream of another context; 507000 a stream bound to a
/// model (`aclmdlRIBindStream`).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtStreamStop(stream: aclrtStream) -> aclError {
    api("aclrtStreamStop", || {
        let stream = handle(stream);
        let rt = runtime()?;
        rt.created_stream(
            stream,
            "the default stream is not stopped (aclrtStreamStop takes a stream of \
             aclrtCreateStream)",
        )?;
        rt.current()?;
        let soc = rt.backend().soc();
        if !soc.has(Feature::StreamStop) {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "{} does not stop streams (Ascend910B, Ascend910_93, Ascend950PR and \
                     Ascend950DT do)",
                    soc.name()
                ),
            ));
        }
        let raw = rt.resolve_stream_any(stream)?;
        if let Some(model) = rt.bound_model(stream) {
            return Err(CallError::new(
                Error::InternalError,
                format!(
                    "stream {stream:#x} is bound to model {model:#x} (aclmdlRIBindStream): a \
                     model's stream is not stopped"
                ),
            ));
        }
        rt.backend().stop_stream(raw).map_err(CallError::backend)
    })
}

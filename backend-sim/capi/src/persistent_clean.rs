//! `aclrtPersistentTaskClean` in the C ABI: the tasks a built model stored for one of its
//! bound persistent streams are dropped (`runtime::persistent_clean` does it and says which
//! CANN checks it follows).
//!
//! The checks made here, in CANN's order (hicann/runtime `src/runtime/api/api_c_standard_soc.cc`
//! `rtsPersistentTaskClean`: the handle; `src/runtime/api/impl/api_error_standard_soc.cc`
//! `ApiErrorDecorator::StreamTaskClean`: NULL is `RT_ERROR_INVALID_VALUE`, 107000, then the
//! chip needs `RT_FEATURE_DFX_FAST_RECOVER_DOT_STREAM` or `RT_FEATURE_DFX_PROCESS_SNAPSHOT`,
//! 207000 without — `config/910_B_93/dev_info_reg.cc` and `config/950/dev_info_reg.cc` give
//! them, and the API page of `docs/zh/api_ref/06_stream_management.md` lists Atlas A2, Atlas
//! A3 and Ascend 950). A handle naming a context's default stream is refused as NULL is.

use acl_notify_core::{Backend as _, Error, Feature};

use crate::errmsg::CallError;
use crate::ffi::{aclError, aclrtStream, api, handle};
use crate::session::runtime;

/// `aclError aclrtPersistentTaskClean(aclrtStream stream)`: the tasks the model `stream` is
/// bound to stored for it no longer run in the model's executions.
///
/// Codes: 107000 NULL or a default stream; 107017 a destroyed stream; 207000 a chip without
/// it; 507000 a stream made without `ACL_STREAM_PERSISTENT`, bound to no model, or whose
/// model's build has not ended, or with an execution of the model in flight; 107003 a stream
/// of another context.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtPersistentTaskClean(stream: aclrtStream) -> aclError {
    api("aclrtPersistentTaskClean", || {
        let stream = handle(stream);
        let rt = runtime()?;
        rt.created_stream(
            stream,
            "the default stream has no persistent tasks (aclrtPersistentTaskClean takes a \
             stream of aclrtCreateStreamWithConfig with ACL_STREAM_PERSISTENT)",
        )?;
        let soc = rt.backend().soc();
        // Fast recovery (`RT_FEATURE_DFX_FAST_RECOVER`) is the core table's `DeviceTaskAbort`;
        // the chips with process snapshot are the same ones.
        if !soc.has(Feature::DeviceTaskAbort) {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "{} does not clean persistent streams' tasks (Ascend910B, Ascend910_93, \
                     Ascend950PR and Ascend950DT do)",
                    soc.name()
                ),
            ));
        }
        rt.persistent_task_clean(stream)
    })
}

//! `aclrtGetDeviceCapability`: whether a device has a feature (`aclrtDevFeatureType`).
//!
//! As hicann/runtime `src/acl/aclrt_impl/device.cpp` (NULL `value` 100000), then
//! `src/runtime/api/api_c_device.cc` (`rtsDeviceGetCapability`: a feature outside
//! `[0, RT_DEV_FEATURE_MAX)` or one it does not answer is 107000), `api_error.cc`
//! (`GetDeviceCapability`: a device the machine lacks 107001) and `api_impl.cc`:
//! - `ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV` (1): whether the task scheduler updates
//!   the AI Core / AI Vector kernel tasks of a model (`GetModelTaskUpdateIsSupport`: the
//!   tiling-key sink feature). The simulator runs no kernels, so none: 0;
//! - `ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV` (21): whether memory-queue events cross devices
//!   (the driver's `MemQEventCrossDevSupported`). The simulator has no memory queues: 0.
//!
//! The runtime's two other features, the AI CPU schedule type (10001) and the task id width
//! (20001), are not in the ACL enum and not modelled: 207000.

use acl_notify_core::Error;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, aclError, api};
use crate::session::with_runtime;

/// `ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV`.
const TASK_UPDATE_AIC_AIV: i32 = 1;
/// `ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV`.
const MEMQ_EVENT_CROSS_DEV: i32 = 21;
/// The runtime's `RT_FEATURE_AICPU_SCHEDULE_TYPE` and `RT_FEATURE_SYSTEM_TASKID_BIT_WIDTH`.
const AICPU_SCHEDULE_TYPE: i32 = 10001;
const TASKID_BIT_WIDTH: i32 = 20001;
/// `RT_DEV_FEATURE_MAX` (`pkg_inc/runtime/rt_external_device.h`).
const FEATURE_MAX: i32 = 20002;

/// `aclError aclrtGetDeviceCapability(int32_t deviceId, aclrtDevFeatureType devFeatureType,
/// int32_t *value)`: 1 if the device has the feature, else 0.
///
/// Codes: 100000 NULL `value`; 107000 a feature outside CANN's list; 107001 no such device;
/// 207000 a runtime feature the simulator does not model.
///
/// # Safety
///
/// `value` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceCapability(
    device_id: i32,
    dev_feature_type: i32,
    value: *mut i32,
) -> aclError {
    api("aclrtGetDeviceCapability", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(
            || null_arg("value"),
            || match dev_feature_type {
                TASK_UPDATE_AIC_AIV | MEMQ_EVENT_CROSS_DEV => {
                    with_runtime(|rt| rt.device_id(device_id))?;
                    Ok(0)
                }
                AICPU_SCHEDULE_TYPE | TASKID_BIT_WIDTH => Err(CallError::new(
                    Error::FeatureNotSupport,
                    format!(
                        "devFeatureType {dev_feature_type}: a runtime feature the simulator \
                         does not model"
                    ),
                )),
                f if !(0..FEATURE_MAX).contains(&f) => {
                    Err(param(format!("devFeatureType {f}: [0, {FEATURE_MAX})")))
                }
                f => Err(param(format!(
                    "devFeatureType {f}: ACL_FEATURE_TSCPU_TASK_UPDATE_SUPPORT_AIC_AIV (1) or \
                     ACL_FEATURE_SYSTEM_MEMQ_EVENT_CROSS_DEV (21)"
                ))),
            },
        )
    })
}

//! `aclmdlRIKernelTaskGetAttribute`: a kernel task's launch attributes.
//!
//! CANN: `src/acl/aclrt_impl/kernel.cpp` (a NULL task, then a NULL `attrValue`: 100000), then
//! `src/runtime/core/src/kernel/kernel_utils.cc` (`GetKernelAttribute`: a task that is not an
//! AI Core or AI Vector kernel is 107000, "use aclmdlRITaskGetType to check the task type").
//! The simulator runs no kernels (`aclrtLaunchKernel*` are unimplemented), so no model task is a
//! kernel task: a task handle of a model is 107000 with CANN's reason and the task's type; a
//! handle that is no task is 107017, as the other `aclmdlRITask*` calls answer it.

use std::ffi::c_void;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{aclError, api};
use crate::session::runtime;

/// `aclError aclmdlRIKernelTaskGetAttribute(aclmdlRITask task, aclrtLaunchKernelAttrId attrId,
/// aclrtLaunchKernelAttrValue *attrValue)`: nothing is written (no task is a kernel task).
///
/// Codes: 100000 NULL `task` or `attrValue`; 107017 a handle that is no task; 107000 a task that
/// is not a kernel task (every task here).
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIKernelTaskGetAttribute(
    task: *mut c_void,
    attr_id: i32,
    attr_value: *mut c_void,
) -> aclError {
    api("aclmdlRIKernelTaskGetAttribute", || {
        if task.is_null() {
            return Err(null_arg("task"));
        }
        if attr_value.is_null() {
            return Err(null_arg("attrValue"));
        }
        let kind = runtime()?.task_type(task.addr())?;
        Err::<(), CallError>(param(format!(
            "task {task:p} is a {kind:?} task, not a compute task on the Cube or Vector core \
             (attribute {attr_id}): the simulator runs no kernels; use aclmdlRITaskGetType to \
             check a task's type"
        )))
    })
}

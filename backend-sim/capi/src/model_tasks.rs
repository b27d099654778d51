//! The tasks of a model runtime instance in the C ABI (`aclmdlRIGetTasksByStream`,
//! `aclmdlRITaskGetType`, `aclmdlRITaskGetSeqId`, `aclmdlRITaskGetParams`,
//! `aclmdlRITaskSetParams`, `aclmdlRITaskDisable`, `aclmdlRIUpdate`). The NULL checks are
//! CANN's runtime's (hicann/runtime `api_error.cc`: 107000; the ACL layer passes these
//! calls on), the rest `runtime::model_tasks`'.

use std::ffi::c_void;

use crate::errmsg::{CallError, param};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::model_ri::aclmdlRI;
use crate::runtime::model_tasks::{TaskParams, TaskType};
use crate::session::runtime;

/// `aclmdlRITask`.
#[allow(non_camel_case_types)]
pub type aclmdlRITask = *mut c_void;

/// `aclmdlRITaskParams` (200 bytes): the type, reserved fields, and the union whose event
/// and value members the simulator reads and writes (an event task's `eventFlag` and
/// record/wait/reset flag are answered as 0).
#[allow(non_camel_case_types)]
#[derive(Debug)]
#[repr(C)]
pub struct aclmdlRITaskParams {
    kind: u32,
    rsv0: [u32; 3],
    task_grp: *mut c_void,
    op_info_ptr: *mut c_void,
    op_info_size: usize,
    rsv1: [u8; 32],
    /// The union (`rsv2[128]`): event tasks `{aclrtEvent event; uint32_t eventFlag; uint32_t
    /// flag}`, value write `{void *devAddr; uint64_t value}`, value wait `{void *devAddr;
    /// uint64_t value; uint32_t flag}`.
    u: [u64; 16],
}

const _: () = assert!(std::mem::size_of::<aclmdlRITaskParams>() == 200);

fn task_arg(t: aclmdlRITask) -> Result<usize, CallError> {
    if t.is_null() {
        return Err(param("task is NULL"));
    }
    Ok(t.addr())
}

/// `aclError aclmdlRIGetTasksByStream(aclrtStream stream, aclmdlRITask *tasks, uint32_t
/// *numTasks)`: the tasks of a stream of a model, in order; with `tasks` NULL their number.
/// Else up to `*numTasks` of them, NULL in the rest of the array, `*numTasks` the number
/// written.
///
/// Codes: 107000 NULL stream or `numTasks`, a stream of no model; 107017 a bad stream; 107039
/// the array is shorter than the list (the tasks that fit are written).
///
/// # Safety
///
/// `numTasks` is NULL or readable and writable; a non-NULL `tasks` is writable for
/// `*numTasks` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIGetTasksByStream(
    stream: aclrtStream,
    tasks: *mut aclmdlRITask,
    num_tasks: *mut u32,
) -> aclError {
    // SAFETY: NULL or readable and writable, by the caller's contract.
    let num_tasks = unsafe { Out::new(num_tasks) };
    api("aclmdlRIGetTasksByStream", || {
        if stream.is_null() {
            return Err(param("stream is NULL"));
        }
        let num_tasks = num_tasks.check(|| param("numTasks is NULL"))?;
        let all = runtime()?.stream_tasks(stream.addr())?;
        // SAFETY: the caller's contract.
        unsafe { crate::model_ri::fill_handles(&all, tasks, num_tasks, "numTasks", "tasks") }
    })
}

/// `aclError aclmdlRITaskGetType(aclmdlRITask task, aclmdlRITaskType *type)`.
///
/// Codes: 107000 NULL; 107017 a bad or destroyed task.
///
/// # Safety
///
/// `type` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRITaskGetType(task: aclmdlRITask, kind: *mut u32) -> aclError {
    api("aclmdlRITaskGetType", || {
        let t = task_arg(task)?;
        // SAFETY: `kind` is NULL or writable, by the caller's contract.
        unsafe { Out::new(kind) }.write(
            || param("type is NULL"),
            || {
                let k = runtime()?.task_type(t)?;
                Ok(k as u32)
            },
        )
    })
}

/// `aclError aclmdlRITaskGetSeqId(aclmdlRITask task, uint32_t *id)`: the task's place among
/// its model's tasks (0 first).
///
/// Codes: 107000 NULL; 107017; 207000 a task of a built model.
///
/// # Safety
///
/// `id` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRITaskGetSeqId(task: aclmdlRITask, id: *mut u32) -> aclError {
    api("aclmdlRITaskGetSeqId", || {
        let t = task_arg(task)?;
        // SAFETY: `id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(id) }.write(|| param("id is NULL"), || runtime()?.task_seq_id(t))
    })
}

/// `aclError aclmdlRITaskGetParams(aclmdlRITask task, aclmdlRITaskParams *params)`: the
/// struct is zeroed, then its type and the union member of that type written.
///
/// Codes: 107000 NULL, a task of type `ACL_MODEL_RI_TASK_DEFAULT`; 107017.
///
/// # Safety
///
/// `params` is NULL or writable for an `aclmdlRITaskParams`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRITaskGetParams(
    task: aclmdlRITask,
    params: *mut aclmdlRITaskParams,
) -> aclError {
    api("aclmdlRITaskGetParams", || {
        let t = task_arg(task)?;
        // SAFETY: `params` is NULL or writable, by the caller's contract.
        unsafe { Out::new(params) }.write(
            || param("params is NULL"),
            || {
                let p = runtime()?.task_params(t)?;
                let mut u = [0u64; 16];
                match p {
                    TaskParams::Event { event, .. } => u[0] = event as u64,
                    TaskParams::ValueWrite { addr, value } => (u[0], u[1]) = (addr as u64, value),
                    TaskParams::ValueWait { addr, value, flag } => {
                        (u[0], u[1], u[2]) = (addr as u64, value, u64::from(flag));
                    }
                }
                let out = aclmdlRITaskParams {
                    kind: p.kind() as u32,
                    rsv0: [0; 3],
                    task_grp: std::ptr::null_mut(),
                    op_info_ptr: std::ptr::null_mut(),
                    op_info_size: 0,
                    rsv1: [0; 32],
                    u,
                };
                Ok(out)
            },
        )
    })
}

/// `aclError aclmdlRITaskSetParams(aclmdlRITask task, aclmdlRITaskParams *params)`: a value
/// write's or wait's new address, value (and flag), in effect from the next
/// `aclmdlRIUpdate`.
///
/// Codes: 107000 NULL, another type than the task's, an event or default task, an address
/// that is no device memory, a bad wait flag; 107017; 207000 a task of a built model.
///
/// # Safety
///
/// `params` is NULL or readable as an `aclmdlRITaskParams`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRITaskSetParams(
    task: aclmdlRITask,
    params: *mut aclmdlRITaskParams,
) -> aclError {
    api("aclmdlRITaskSetParams", || {
        let t = task_arg(task)?;
        if params.is_null() {
            return Err(param("params is NULL"));
        }
        // SAFETY: the caller's contract.
        let p = unsafe { params.read() };
        let (addr, value) = (p.u[0] as usize, p.u[1]);
        let new = match p.kind {
            k if k == TaskType::ValueWrite as u32 => TaskParams::ValueWrite { addr, value },
            k if k == TaskType::ValueWait as u32 => TaskParams::ValueWait {
                addr,
                value,
                flag: p.u[2] as u32,
            },
            k if (2..=4).contains(&k) => TaskParams::Event {
                kind: TaskType::EventRecord,
                event: addr,
            },
            k => {
                return Err(param(format!(
                    "params->type {k}: TASK_KERNEL (1), TASK_VALUE_WRITE (5) or TASK_VALUE_WAIT \
                     (6), and the simulator has no kernels"
                )));
            }
        };
        runtime()?.set_task_params(t, new)
    })
}

/// `aclError aclmdlRITaskDisable(aclmdlRITask task)`: the task is left out of the model's
/// executions from the next `aclmdlRIUpdate` on.
///
/// Codes: 107000 NULL, a task of type `ACL_MODEL_RI_TASK_DEFAULT`; 107017; 207000 a task of
/// a built model.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRITaskDisable(task: aclmdlRITask) -> aclError {
    api("aclmdlRITaskDisable", || {
        let t = task_arg(task)?;
        runtime()?.disable_task(t)
    })
}

/// `aclError aclmdlRIUpdate(aclmdlRI modelRI)`: the parameters set and the tasks disabled
/// since the last update take effect for the executions queued from now on.
///
/// Codes: 100000 NULL; 107017 a bad model; 107000 a model still captured or built.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIUpdate(model_ri: aclmdlRI) -> aclError {
    api("aclmdlRIUpdate", || {
        let m = crate::model_ri::model(model_ri)?;
        runtime()?.update_model(m)
    })
}

//! The tasks of a model runtime instance (`aclmdlRIGetTasksByStream`, `aclmdlRITaskGetType`,
//! `aclmdlRITaskGetSeqId`, `aclmdlRITaskGetParams`, `aclmdlRITaskSetParams`,
//! `aclmdlRITaskDisable`, `aclmdlRIUpdate`): each stored call of a model (`capture`,
//! `model_build`) is a task, named by an `aclmdlRITask` handle of the crate's handle slab
//! (made when first listed, dead with its model).
//!
//! CANN's rules followed (hicann/runtime `src/runtime/api/impl/api_impl.cc`
//! `ApiImpl::StreamGetTasks`, `TaskGetType`, `TaskGetSeqId`, `TaskGetParams`,
//! `TaskSetParams`, `ModelTaskDisable`, `ModelUpdate`; `api_error.cc` for the NULL checks;
//! `src/runtime/core/src/stream/stream.cc` `Stream::StreamGetTasks`):
//!
//! - tasks are listed per stream of a model (`aclmdlRIGetStreams`); another stream: 107000;
//!   an array shorter than the list is filled and answered with 107039;
//! - a task's type is `ACL_MODEL_RI_TASK_DEFAULT` unless it is an event record, wait or
//!   reset or a value write or wait (the simulator has no kernels); a default task has no
//!   parameters (107000) and is not disabled (107000);
//! - the sequence id is the task's place among the model's tasks, for a captured model only
//!   (207000 "Non ACL Graph mode is not supported" for a built one);
//! - `aclmdlRITaskSetParams` changes value writes and waits only (event tasks: 107000), of a
//!   captured model; it and `aclmdlRITaskDisable` take effect at the next `aclmdlRIUpdate`
//!   (executions queued before it run the old tasks); an update with nothing changed
//!   succeeds.

use std::sync::{Arc, PoisonError};

use acl_notify_core::Error;
use acl_notify_sim::mem::ValueCondition;

use super::Runtime;
use super::capture::Captured;
use super::model::{Model, Phase, TaskMeta, bad_model};
use crate::errmsg::{CallError, param};

/// `aclmdlRITaskType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskType {
    /// `ACL_MODEL_RI_TASK_DEFAULT`: copies, sets, notify tasks.
    Default = 0,
    /// `ACL_MODEL_RI_TASK_EVENT_RECORD`.
    EventRecord = 2,
    /// `ACL_MODEL_RI_TASK_EVENT_WAIT`.
    EventWait = 3,
    /// `ACL_MODEL_RI_TASK_EVENT_RESET`.
    EventReset = 4,
    /// `ACL_MODEL_RI_TASK_VALUE_WRITE`.
    ValueWrite = 5,
    /// `ACL_MODEL_RI_TASK_VALUE_WAIT`.
    ValueWait = 6,
}

impl TaskType {
    fn of(t: &Captured) -> TaskType {
        match t {
            Captured::EventRecord(_) | Captured::ExternalRecord(_) => TaskType::EventRecord,
            Captured::EventWait(..) | Captured::ExternalWait(_) => TaskType::EventWait,
            Captured::EventReset(_) => TaskType::EventReset,
            Captured::ValueWrite { .. } => TaskType::ValueWrite,
            Captured::ValueWait { .. } => TaskType::ValueWait,
            Captured::Memcpy { .. }
            | Captured::Memset { .. }
            | Captured::NotifyRecord(_)
            | Captured::NotifyWait(..)
            | Captured::Control(_) => TaskType::Default,
        }
    }
}

/// A task's parameters (`aclmdlRITaskParams`' union, for the kinds the simulator stores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskParams {
    /// An event record, wait or reset: the caller's event handle.
    Event { kind: TaskType, event: usize },
    /// `aclrtValueWrite`'s address and value.
    ValueWrite { addr: usize, value: u64 },
    /// `aclrtValueWait`'s address, value and flag.
    ValueWait { addr: usize, value: u64, flag: u32 },
}

impl TaskParams {
    /// The params' type.
    pub(crate) fn kind(&self) -> TaskType {
        match self {
            TaskParams::Event { kind, .. } => *kind,
            TaskParams::ValueWrite { .. } => TaskType::ValueWrite,
            TaskParams::ValueWait { .. } => TaskType::ValueWait,
        }
    }
}

fn flag_of(c: ValueCondition) -> u32 {
    match c {
        ValueCondition::GreaterOrEqual => 0,
        ValueCondition::Equal => 1,
        ValueCondition::And => 2,
        ValueCondition::Nor => 3,
    }
}

fn bad_task(handle: usize) -> CallError {
    crate::handle::not_live("task", "a task of a model runtime instance", handle)
}

fn no_params(what: &str, t: &Captured) -> CallError {
    param(format!(
        "{what}: the task ({}) is of type ACL_MODEL_RI_TASK_DEFAULT, which has no parameters \
         (only event and value tasks have)",
        t.name()
    ))
}

impl Runtime {
    /// Drops the task handles of `m` (its destroy).
    pub(super) fn forget_task_handles(&self, m: &Model) {
        for t in &m.task_meta {
            if t.handle != 0 {
                self.captures.tasks.remove(t.handle);
            }
        }
        // Its task groups (`task_group`) die with it.
        let h = m.handle;
        self.captures.groups.remove_where(|&(model, _)| model == h);
    }

    /// `aclmdlRIGetTasksByStream`: the handles of the tasks stream `stream` of a model runs,
    /// in order.
    pub(crate) fn stream_tasks(&self, stream: usize) -> Result<Vec<usize>, CallError> {
        self.stream(stream)?;
        let mut st = self.captures.lock();
        let found = st.models.values_mut().find_map(|m| match &m.phase {
            Phase::Ready(r) => r.streams.iter().position(|&s| s == stream).map(|i| (m, i)),
            _ => None,
        });
        let Some((m, index)) = found else {
            return Err(param(format!(
                "stream {stream:#x} is not a stream of a model runtime instance \
                 (aclmdlRIGetStreams lists a model's)"
            )));
        };
        m.task_meta.resize(m.tasks.len(), TaskMeta::default());
        let mut out = Vec::new();
        for (n, &(i, _)) in m.tasks.iter().enumerate() {
            if i != index || m.task_meta[n].cleaned {
                continue;
            }
            if m.task_meta[n].handle == 0 {
                m.task_meta[n].handle = self.captures.tasks.insert((m.handle, n))?;
            }
            out.push(m.task_meta[n].handle);
        }
        Ok(out)
    }

    /// Runs `f` on the model of task `handle` and the task's index.
    fn with_task<R>(
        &self,
        handle: usize,
        f: impl FnOnce(&mut Model, usize) -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let (model, n) = self
            .captures
            .tasks
            .get(handle)
            .ok_or_else(|| bad_task(handle))?;
        let mut st = self.captures.lock();
        let m = st.models.get_mut(model).ok_or_else(|| bad_task(handle))?;
        if n >= m.tasks.len() {
            return Err(bad_task(handle));
        }
        f(m, n)
    }

    /// `aclmdlRITaskGetType`.
    pub(crate) fn task_type(&self, handle: usize) -> Result<TaskType, CallError> {
        self.with_task(handle, |m, n| Ok(TaskType::of(&m.tasks[n].1)))
    }

    /// `aclmdlRITaskGetSeqId`: the task's place among its (captured) model's tasks.
    pub(crate) fn task_seq_id(&self, handle: usize) -> Result<u32, CallError> {
        self.with_task(handle, |m, n| {
            captured_only(m, "aclmdlRITaskGetSeqId")?;
            Ok(u32::try_from(n).unwrap_or(u32::MAX))
        })
    }

    /// `aclmdlRITaskGetParams` (as set, even before `aclmdlRIUpdate`).
    pub(crate) fn task_params(&self, handle: usize) -> Result<TaskParams, CallError> {
        self.with_task(handle, |m, n| {
            let t = m.tasks[n].1;
            let kind = TaskType::of(&t);
            Ok(match t {
                Captured::EventRecord(e)
                | Captured::EventWait(e, _)
                | Captured::EventReset(e)
                | Captured::ExternalRecord(e)
                | Captured::ExternalWait(e) => TaskParams::Event { kind, event: e },
                Captured::ValueWrite { addr, value } => TaskParams::ValueWrite { addr, value },
                Captured::ValueWait { addr, value, cond } => TaskParams::ValueWait {
                    addr,
                    value,
                    flag: flag_of(cond),
                },
                _ => return Err(no_params("aclmdlRITaskGetParams", &t)),
            })
        })
    }

    /// `aclmdlRITaskSetParams`: a value write's or wait's new arguments, for the next
    /// `aclmdlRIUpdate` (the address checked now, as its capture checked it).
    pub(crate) fn set_task_params(&self, handle: usize, p: TaskParams) -> Result<(), CallError> {
        let addr = match p {
            TaskParams::ValueWrite { addr, .. } | TaskParams::ValueWait { addr, .. } => addr,
            TaskParams::Event { .. } => {
                return Err(param(
                    "params->type: only ACL_MODEL_RI_TASK_VALUE_WRITE (5) and \
                     ACL_MODEL_RI_TASK_VALUE_WAIT (6) tasks take new parameters",
                ));
            }
        };
        self.backend.value_check(addr).map_err(CallError::backend)?;
        self.with_task(handle, |m, n| {
            captured_only(m, "aclmdlRITaskSetParams")?;
            let t = &mut m.tasks[n].1;
            if TaskType::of(t) != p.kind() {
                return Err(param(format!(
                    "params->type {:?}: the task is {:?} ({})",
                    p.kind(),
                    TaskType::of(t),
                    t.name()
                )));
            }
            *t = match p {
                TaskParams::ValueWrite { addr, value } => Captured::ValueWrite { addr, value },
                TaskParams::ValueWait { addr, value, flag } => Captured::ValueWait {
                    addr,
                    value,
                    cond: ValueCondition::from_flag(flag).ok_or_else(|| {
                        param(format!(
                            "flag {flag:#x} is none of ACL_STREAM_WAIT_VALUE_GEQ (0), _EQ (1), \
                             _AND (2), _NOR (3)"
                        ))
                    })?,
                },
                TaskParams::Event { .. } => return Err(param("internal: event params")),
            };
            m.updating = true;
            Ok(())
        })
    }

    /// `aclmdlRITaskDisable`: the task is left out from the next `aclmdlRIUpdate` on.
    pub(crate) fn disable_task(&self, handle: usize) -> Result<(), CallError> {
        self.with_task(handle, |m, n| {
            captured_only(m, "aclmdlRITaskDisable")?;
            let t = m.tasks[n].1;
            if TaskType::of(&t) == TaskType::Default {
                return Err(param(format!(
                    "aclmdlRITaskDisable: the task ({}) is of type ACL_MODEL_RI_TASK_DEFAULT, \
                     which cannot be disabled",
                    t.name()
                )));
            }
            m.task_meta.resize(m.tasks.len(), TaskMeta::default());
            m.task_meta[n].disabled = true;
            m.updating = true;
            Ok(())
        })
    }

    /// `aclmdlRIUpdate`: the executions queued from now on run the tasks as set and without
    /// the disabled ones.
    pub(crate) fn update_model(&self, handle: usize) -> Result<(), CallError> {
        let mut st = self.captures.lock();
        let m = st.models.get_mut(handle).ok_or_else(|| bad_model(handle))?;
        if !matches!(m.phase, Phase::Ready(_)) {
            return Err(param(format!(
                "model {handle:#x} is still being captured or built"
            )));
        }
        if !m.updating {
            return Ok(());
        }
        let disabled = |n: usize| m.task_meta.get(n).is_some_and(|t| t.disabled);
        let tasks: Arc<[(usize, Captured)]> = m
            .tasks
            .iter()
            .enumerate()
            .filter(|&(n, _)| !disabled(n))
            .map(|(_, &t)| t)
            .collect();
        if let Phase::Ready(r) = &m.phase {
            *r.tasks.lock().unwrap_or_else(PoisonError::into_inner) = tasks;
        }
        m.updating = false;
        Ok(())
    }
}

/// 207000 for a task of a built model (`ApiImpl::TaskGetSeqId`: "Non ACL Graph mode is not
/// supported"; `CheckCaptureModelForUpdate` for the updates).
fn captured_only(m: &Model, what: &str) -> Result<(), CallError> {
    match &m.phase {
        Phase::Ready(r) if r.owned() => Ok(()),
        _ => Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{what}: the task's model was built, not captured (Non ACL Graph mode is not supported)"
            ),
        )),
    }
}

//! Task groups of captured models and their updates (`aclmdlRICaptureTaskGrpBegin`/`End`,
//! `aclmdlRICaptureTaskUpdateBegin`/`End`): the tasks a capturing stream stores between a
//! group's begin and end form a group (an `aclrtTaskGrp` handle of the handle slab); later, on
//! a stream that captures nothing, the tasks queued between an update's begin and end are
//! not run but stored as the group's new tasks, one for one, and an update task queued on
//! that stream at the end puts them in the model **when it runs** (in the stream's order):
//! the executions queued after that run them.
//!
//! CANN's rules followed (hicann/runtime `src/runtime/feature/aclgraph/api_error_aclgraph.cc`
//! and `context_aclgraph.cc` `StreamBeginTaskGrp`/`StreamEndTaskGrp`/`StreamBeginTaskUpdate`/
//! `StreamEndTaskUpdate`, `docs/zh/api_ref/15_model_running_instance__management.md`):
//!
//! - NULL stream or handle: 100000 (the ACL layer's);
//! - a group's begin or end on a stream not capturing: 107029; begun twice (a group does not
//!   nest) or ended without a begin, or begun on a stream updating: 107033
//!   (`ACL_ERROR_STREAM_TASK_GROUP_STATUS`); ended after the capture was invalidated: 507903;
//! - an update on a capturing stream: 107027; on a stream bound to a model: 107005; begun on a
//!   stream already updating or grouping, or of a group another stream updates, or ended
//!   without a begin: 107033; ended with fewer or more tasks than the group, or a task of
//!   another type: 507000 (`RT_ERROR_STREAM_TASKGRP_UPDATE`).
//!
//! The simulator's own: an event task is updated only with the same event (the model replays
//! its own events for the captured ones); the update task, like `aclmdlRIUpdate`, also puts
//! in effect the changes `aclmdlRITaskSetParams`/`Disable` made since the last update.

use std::sync::atomic::Ordering;

use acl_notify_core::Error;

use super::Runtime;
use super::capture::Captured;
use crate::errmsg::{CallError, param};

fn status(why: String) -> CallError {
    CallError::new(Error::StreamTaskGroupStatus, why)
}

fn bad_group(handle: usize) -> CallError {
    crate::handle::not_live("handle", "a task group", handle)
}

impl Runtime {
    /// For `capture`: stores `task` if `stream` is updating a group (`Ok(true)`).
    pub(super) fn task_update(&self, stream: usize, task: Captured) -> Result<bool, CallError> {
        if self.captures.active.load(Ordering::Acquire) == 0 {
            return Ok(false);
        }
        if !self.captures.lock().updating.contains_key(&stream) {
            return Ok(false);
        }
        self.precheck(task)?;
        let mut st = self.captures.lock();
        match st.updating.get_mut(&stream) {
            Some((_, tasks)) => {
                tasks.push(task);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The model stream `stream` captures into, for a group's begin or end (107029 if none).
    fn group_capture(&self, stream: usize) -> Result<usize, CallError> {
        self.stream(stream)?;
        let st = self.captures.lock();
        Ok(self.capturing(&st, stream)?.model)
    }

    /// `aclmdlRICaptureTaskGrpBegin`.
    pub(crate) fn task_group_begin(&self, stream: usize) -> Result<(), CallError> {
        let model = self.group_capture(stream)?;
        let mut st = self.captures.lock();
        if st.grouping.contains_key(&stream) {
            return Err(status(format!(
                "stream {stream:#x} began a task group already: end it first (groups do not nest)"
            )));
        }
        st.grouping.insert(stream, (model, Vec::new()));
        Ok(())
    }

    /// `aclmdlRICaptureTaskGrpEnd`: the group's handle.
    pub(crate) fn task_group_end(&self, stream: usize) -> Result<usize, CallError> {
        let model = self.group_capture(stream)?;
        let mut st = self.captures.lock();
        let Some((_, tasks)) = st.grouping.remove(&stream) else {
            return Err(status(format!(
                "stream {stream:#x} has no task group begun (aclmdlRICaptureTaskGrpBegin)"
            )));
        };
        let m = st
            .models
            .get_mut(model)
            .ok_or_else(|| CallError::new(Error::InternalError, "internal error: no model"))?;
        if let super::model::Phase::Capturing {
            invalid: Some(why), ..
        } = &m.phase
        {
            return Err(CallError::new(
                Error::StreamCaptureInvalidated,
                format!("the capture of stream {stream:#x} was invalidated: {why}"),
            ));
        }
        m.groups.push(tasks);
        let index = u32::try_from(m.groups.len() - 1).unwrap_or(u32::MAX);
        self.captures.groups.insert((model, index))
    }

    /// The checks of an update's begin and end on `stream` (CANN's order).
    fn update_stream(&self, stream: usize, call: &str) -> Result<(), CallError> {
        self.stream(stream)?;
        let st = self.captures.lock();
        match st.streams.get(&stream) {
            Some(c) if self.building_in(&st, c.model) => Err(CallError::new(
                Error::StreamModel,
                format!(
                    "{call}: stream {stream:#x} is bound to a model (a single-operator stream only)"
                ),
            )),
            Some(_) => Err(CallError::new(
                Error::StreamCaptured,
                format!("{call}: stream {stream:#x} is capturing"),
            )),
            None => Ok(()),
        }
    }

    /// `aclmdlRICaptureTaskUpdateBegin`.
    pub(crate) fn task_update_begin(&self, stream: usize, group: usize) -> Result<(), CallError> {
        self.update_stream(stream, "aclmdlRICaptureTaskUpdateBegin")?;
        self.captures
            .groups
            .get(group)
            .ok_or_else(|| bad_group(group))?;
        let mut st = self.captures.lock();
        if st.updating.contains_key(&stream) || st.grouping.contains_key(&stream) {
            return Err(status(format!(
                "stream {stream:#x} is updating a task group already"
            )));
        }
        if st.updating.values().any(|(g, _)| *g == group) {
            return Err(status(format!(
                "task group {group:#x} is being updated by another stream"
            )));
        }
        st.updating.insert(stream, (group, Vec::new()));
        self.captures.active.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// `aclmdlRICaptureTaskUpdateEnd`: queues on `stream` the task that puts the new tasks in
    /// the model when it runs.
    pub(crate) fn task_update_end(&self, stream: usize) -> Result<(), CallError> {
        self.update_stream(stream, "aclmdlRICaptureTaskUpdateEnd")?;
        let (group, new) = {
            let mut st = self.captures.lock();
            let Some(u) = st.updating.remove(&stream) else {
                return Err(status(format!(
                    "stream {stream:#x} is not updating a task group \
                     (aclmdlRICaptureTaskUpdateBegin)"
                )));
            };
            self.captures.active.fetch_sub(1, Ordering::AcqRel);
            u
        };
        let (model, index) = self
            .captures
            .groups
            .get(group)
            .ok_or_else(|| bad_group(group))?;
        {
            let st = self.captures.lock();
            let m = st.models.get(model).ok_or_else(|| bad_group(group))?;
            let old = m.groups.get(index as usize).cloned().unwrap_or_default();
            if old.len() != new.len() {
                return Err(CallError::new(
                    Error::InternalError,
                    format!(
                        "task group {group:#x} holds {} tasks, the update queued {}: an update \
                         replaces each task of the group",
                        old.len(),
                        new.len()
                    ),
                ));
            }
            for (k, (&n, t)) in old.iter().zip(&new).enumerate() {
                let was = m.tasks[n].1;
                if std::mem::discriminant(&was) != std::mem::discriminant(t) {
                    return Err(CallError::new(
                        Error::InternalError,
                        format!(
                            "task {k} of the update is {}, the group's is {}: the types must match",
                            t.name(),
                            was.name()
                        ),
                    ));
                }
                let same_event = match (was, *t) {
                    (Captured::EventRecord(a), Captured::EventRecord(b))
                    | (Captured::EventWait(a, _), Captured::EventWait(b, _))
                    | (Captured::EventReset(a), Captured::EventReset(b)) => a == b,
                    _ => true,
                };
                if !same_event {
                    return Err(param(format!(
                        "task {k} of the update names another event than the group's: the \
                         simulator updates an event task only with its own event"
                    )));
                }
            }
        }
        let raw = self.stream(stream)?.raw;
        let task = Box::new(move |_: &acl_notify_sim::stream::TaskCtx| {
            let Some(rt) = crate::session::existing_runtime() else {
                return Ok(());
            };
            rt.apply_update(group, &new).map_err(CallError::into_sim)
        });
        self.backend
            .run_async(raw, task)
            .map_err(CallError::backend)
    }

    /// The update task's work: the group's tasks replaced, the model's task list published.
    fn apply_update(&self, group: usize, new: &[Captured]) -> Result<(), CallError> {
        let (model, index) = self
            .captures
            .groups
            .get(group)
            .ok_or_else(|| bad_group(group))?;
        let handle = {
            let mut st = self.captures.lock();
            let m = st.models.get_mut(model).ok_or_else(|| bad_group(group))?;
            let at = m.groups.get(index as usize).cloned().unwrap_or_default();
            for (&n, &t) in at.iter().zip(new) {
                m.tasks[n].1 = t;
            }
            m.updating = true;
            m.handle
        };
        match self.update_model(handle) {
            // A model still captured: its tasks are changed; its replay, made at its end,
            // takes them.
            Err(e) if e.code() == Error::ParamInvalid => Ok(()),
            r => r,
        }
    }
}

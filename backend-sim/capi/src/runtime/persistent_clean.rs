//! `aclrtPersistentTaskClean` in the runtime: a built model's stored tasks of one of its bound
//! streams are dropped, so that its later executions run none of them (its other streams'
//! tasks unchanged).
//!
//! CANN's checks, in order (hicann/runtime `src/runtime/api/impl/api_error_standard_soc.cc`
//! `ApiErrorDecorator::StreamTaskClean`, `errcode_manage.cc` for the codes): a stream made
//! without `ACL_STREAM_PERSISTENT`, one bound to no model, or one whose model's build has not
//! ended (`IsModelLoadComplete`) are `RT_ERROR_STREAM_INVALID`, 507000, each with its message.
//! Its AICPU-stream and sub-graph-stream refusals cannot arise here: the ACL layer makes no
//! `RT_STREAM_AICPU` stream (`src/acl/aclrt_impl/stream.cpp` maps `ACL_STREAM_CPU_SCHEDULE` to
//! `RT_STREAM_CPU_SCHEDULE`), and only captured models have sub-graphs (`cond`), whose streams
//! are the model's own. `ApiImpl::StreamTaskClean` (`api_impl_standard_soc.cc`) then refuses a
//! stream of another context (107003), and `Stream::StreamTaskClean` (`stream.cc`,
//! `stream_david.cc`) needs the stream's queue disabled (507000 otherwise) before it drops the
//! model's tasks on it.
//!
//! The simulator's choices: the queue counts as disabled while no execution of the model is
//! queued and unfinished (one in flight: 507000); the dropped tasks leave what executions
//! queue now and what `aclmdlRIUpdate` would queue later (they are marked disabled, as
//! `aclmdlRITaskDisable` marks a task, so no task index moves), and the lists of the stream's
//! tasks: `Stream::ModelTaskClean` recycles every task the model bound to the stream
//! (`RecycleModelBindStreamAllTask`, which empties the stream's list of them), and
//! `Model::ModelDebugDotPrint` (`model.cc`) prints each stream's tasks from that list, so a
//! cleaned stream is printed with none (`TaskMeta::cleaned`; `aclmdlRIDebugPrint`,
//! `aclmdlRIDebugJsonPrint` and `aclmdlRIGetTasksByStream` leave them out).

use std::sync::{Arc, PoisonError};

use acl_notify_core::Error;

use super::Runtime;
use super::capture::Captured;
use super::model::{Phase, TaskMeta};
use crate::errmsg::CallError;

/// `ACL_STREAM_PERSISTENT`.
const PERSISTENT: u32 = 0x4;

/// A refusal of `ApiErrorDecorator::StreamTaskClean`: `RT_ERROR_STREAM_INVALID`, 507000.
fn invalid(msg: String) -> CallError {
    CallError::new(Error::InternalError, msg)
}

impl Runtime {
    /// `aclrtPersistentTaskClean` of `stream` (a live stream of `aclrtCreateStream*`, the
    /// chip checked by the caller).
    pub(crate) fn persistent_task_clean(&self, stream: usize) -> Result<(), CallError> {
        let entry = self.stream(stream)?;
        let persistent = self
            .stream_infos
            .get(entry.raw)
            .is_some_and(|i| i.flags & PERSISTENT != 0);
        if !persistent {
            return Err(invalid(format!(
                "stream {stream:#x} is not persistent: only a stream made with \
                 ACL_STREAM_PERSISTENT (aclrtCreateStreamWithConfig) has its tasks cleaned"
            )));
        }
        let mut st = self.captures.lock();
        let Some(m) = st.models.values_mut().find(|m| {
            m.streams.contains(&stream)
                && match &m.phase {
                    Phase::Building { .. } => true,
                    Phase::Ready(r) => !r.owned(),
                    _ => false,
                }
        }) else {
            return Err(invalid(format!(
                "stream {stream:#x} is bound to no model: bind it with aclmdlRIBindStream \
                 before aclrtPersistentTaskClean"
            )));
        };
        let Phase::Ready(replay) = &m.phase else {
            return Err(invalid(format!(
                "stream {stream:#x} is bound to model {:#x}, whose build has not ended: clean its \
                 tasks after aclmdlRIBuildEnd",
                m.handle
            )));
        };
        let replay = Arc::clone(replay);
        drop(st);
        self.resolve_stream_any(stream)?;
        let mut st = self.captures.lock();
        let Some(m) = st.models.values_mut().find(|m| m.streams.contains(&stream)) else {
            return Err(invalid(format!(
                "stream {stream:#x} was unbound from its model meanwhile"
            )));
        };
        if replay.in_flight() {
            return Err(invalid(format!(
                "model {:#x} has an execution queued and not finished on stream {stream:#x}: its \
                 tasks are cleaned only while the stream runs none of them",
                m.handle
            )));
        }
        let Some(i) = m.streams.iter().position(|&s| s == stream) else {
            return Ok(());
        };
        m.task_meta.resize(m.tasks.len(), TaskMeta::default());
        for (meta, &(j, _)) in m.task_meta.iter_mut().zip(&m.tasks) {
            if j == i {
                meta.disabled = true;
                meta.cleaned = true;
            }
        }
        let mut tasks = replay.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        let kept: Arc<[(usize, Captured)]> =
            tasks.iter().filter(|&&(j, _)| j != i).copied().collect();
        *tasks = kept;
        Ok(())
    }
}

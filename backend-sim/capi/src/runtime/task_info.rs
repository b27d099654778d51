//! The information a caller attaches to the task its thread stored last in a model
//! (`aclrtCacheLastTaskOpInfo`, `aclrtCacheLastTaskExtendInfo`): the bytes are copied and kept
//! with the task, each call replacing the earlier bytes of its kind; `aclmdlRIDebugJsonPrint`
//! shows the extended information (`model_debug`), as CANN's trace shows it.
//!
//! CANN (hicann/runtime): `src/runtime/api/impl/api_impl.cc` `ApiImpl::CacheLastTaskOpInfo`
//! and `ApiImpl::CacheLastTaskExtendInfo` take the thread's last stream and task; a stream in
//! another context is 107003; a stream bound to no model is `RT_ERROR_MODEL_NULL`
//! (`errcode_manage.cc`: 507000), and the operator information needs a capture model
//! (`CaptureModel`) whose operator-information switch is on (`capture_model.cc`
//! `CaptureModel::CacheLastTaskOpInfo`: `RT_ERROR_MODEL_OP_CACHE_CLOSED`, 507000; the switch
//! is `ACL_STREAM_ATTR_CACHE_OP_INFO` of the capture's streams, read here from its origin).
//! `capture_model.cc` `SetShapeInfo` and `model.cc` `Model::CacheLastTaskExtendInfo` assign the
//! bytes to (stream, task), replacing any earlier. A thread that gave no task yet: the
//! simulator's 507000 (CANN's lookup of stream id "none" fails).

use acl_notify_core::Error;

use super::Runtime;
use super::last_task::{self, Last};
use super::model::{Model, Phase};
use crate::errmsg::CallError;

/// Which information a call attaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InfoKind {
    /// `aclrtCacheLastTaskOpInfo`: for a capture model only, its switch on.
    Op,
    /// `aclrtCacheLastTaskExtendInfo`: for any model (captured or built).
    Extend,
}

fn no_model(reason: String) -> CallError {
    CallError::new(Error::InternalError, reason)
}

impl Runtime {
    /// Attaches a copy of `bytes` (checked by the caller) to this thread's last task.
    pub(crate) fn cache_last_task_info(
        &self,
        kind: InfoKind,
        bytes: &[u8],
    ) -> Result<(), CallError> {
        self.current()?;
        let (stream, model, seq) = match last_task::last() {
            None => {
                return Err(no_model(
                    "this thread has queued no task yet: there is no last task to attach the \
                     information to"
                        .into(),
                ));
            }
            Some(Last::Queued { stream }) => {
                self.stream_info_here(stream)?;
                return Err(no_model(format!(
                    "this thread's last task went to stream {stream:#x}, which neither captures \
                     nor is bound to a model: the information is kept only for a model's tasks"
                )));
            }
            Some(Last::Stored { stream, model, seq }) => (stream, model, seq),
        };
        self.stream_info_here(stream)?;
        let origin = {
            let st = self.captures.lock();
            let m = st.models.get(model);
            match (st.streams.get(&stream), m) {
                (Some(c), Some(m)) if c.model == model => m.streams.first().copied(),
                _ => {
                    return Err(no_model(format!(
                        "this thread's last task went to stream {stream:#x}, which is no longer \
                         bound to model {model:#x} (its capture or build ended, or it was unbound)"
                    )));
                }
            }
        };
        if kind == InfoKind::Op
            && let Some(o) = origin
            && !self.stream_info_here(o)?.1.cache_op_info
        {
            return Err(no_model(format!(
                "the operator information cache of model {model:#x} is off: set \
                 ACL_STREAM_ATTR_CACHE_OP_INFO to 1 on stream {o:#x} (the capture's origin) \
                 first"
            )));
        }
        let mut st = self.captures.lock();
        let m = st.models.get_mut(model).ok_or_else(|| {
            no_model(format!(
                "model {model:#x} was destroyed while this call ran"
            ))
        })?;
        if kind == InfoKind::Op && !matches!(m.phase, Phase::Capturing { .. }) {
            return Err(no_model(format!(
                "stream {stream:#x} is bound to model {model:#x}, which is built, not captured: \
                 the operator information is kept for a capture model's tasks only"
            )));
        }
        if seq >= m.tasks.len() {
            return Err(no_model(format!(
                "this thread's last task of model {model:#x} was removed"
            )));
        }
        let info = m.task_info.entry(seq).or_default();
        let slot = match kind {
            InfoKind::Op => &mut info.op,
            InfoKind::Extend => &mut info.extend,
        };
        *slot = Some(bytes.to_vec());
        Ok(())
    }
}

/// Drops the tasks of stream index `i` from model `m` (`aclmdlRIUnbindStream` while it is
/// built), the information of the others moved with them.
pub(super) fn drop_stream_tasks(m: &mut Model, i: usize) {
    let old = std::mem::take(&mut m.task_info);
    let mut kept = 0;
    let mut n = 0;
    m.tasks.retain(|&(j, _)| {
        let keep = j != i;
        if keep {
            if let Some(info) = old.get(&n) {
                m.task_info.insert(kept, info.clone());
            }
            kept += 1;
        }
        n += 1;
        keep
    });
}

#[cfg(test)]
mod tests {
    use super::super::capture::Captured;
    use super::super::last_task::TaskInfo;
    use super::*;

    #[test]
    fn unbinding_a_stream_keeps_the_others_information_with_their_tasks() {
        let phase = Phase::Building {
            ended: vec![false; 2],
        };
        let mut m = Model::new(1, 0, 0, vec![0x100, 0x101], phase);
        // Tasks 0 and 2 on stream 0, 1 and 3 on stream 1.
        m.tasks = (0..4).map(|n| (n % 2, Captured::EventRecord(n))).collect();
        for n in 0..4 {
            let info = TaskInfo {
                op: None,
                extend: Some(vec![n as u8]),
            };
            m.task_info.insert(n, info);
        }
        drop_stream_tasks(&mut m, 0);
        assert_eq!(m.tasks.len(), 2);
        // The old tasks 1 and 3 are now 0 and 1, their bytes with them.
        for (now, was) in [(0usize, 1u8), (1, 3)] {
            assert!(matches!(m.tasks[now].1, Captured::EventRecord(e) if e == usize::from(was)));
            assert_eq!(m.task_info[&now].extend.as_deref(), Some(&[was][..]));
        }
        assert_eq!(m.task_info.len(), 2);
    }
}

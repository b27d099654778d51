//! The task this thread queued or captured last, and the information callers attach to a
//! stored task (`aclrtCacheLastTaskOpInfo`, `aclrtCacheLastTaskExtendInfo`, `task_info`).
//!
//! CANN keeps the last task per thread (hicann/runtime `src/runtime/api/impl/api_impl.cc`
//! `ApiImpl::CacheLastTaskOpInfo`: `InnerThreadLocalContainer::GetLastStreamId` and
//! `GetLastTaskId`); `capture` notes each task here as it stores or lets it queue.

use std::cell::Cell;

/// The last task this thread gave a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Last {
    /// Stored as task `seq` of model `model` (`stream` captures it or is bound to it).
    Stored {
        stream: usize,
        model: usize,
        seq: usize,
    },
    /// Queued on `stream`, which stores nothing.
    Queued { stream: usize },
}

/// What callers attached to one stored task (each call replaces its kind's bytes, as CANN's
/// `CaptureModel::SetShapeInfo` and `Model::CacheLastTaskExtendInfo` assign them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TaskInfo {
    /// `aclrtCacheLastTaskOpInfo`'s bytes.
    pub(crate) op: Option<Vec<u8>>,
    /// `aclrtCacheLastTaskExtendInfo`'s bytes.
    pub(crate) extend: Option<Vec<u8>>,
}

thread_local! {
    static LAST: Cell<Option<Last>> = const { Cell::new(None) };
}

/// Notes `last` as this thread's last task.
pub(super) fn note(last: Last) {
    LAST.with(|l| l.set(Some(last)));
}

/// This thread's last task (None: it gave none yet).
pub(super) fn last() -> Option<Last> {
    LAST.with(Cell::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_sees_its_own_last_task() {
        note(Last::Queued { stream: 7 });
        assert_eq!(last(), Some(Last::Queued { stream: 7 }));
        std::thread::spawn(|| assert_eq!(last(), None))
            .join()
            .unwrap();
    }
}

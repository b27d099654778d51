//! The simulator's failed tasks, as CANN reports them: each task of a simulator stream that
//! fails (a wait that times out, a copy that finds its memory gone, a task that panics…) is
//! told, on the stream's thread, to the listener the owner set ([`Sim::on_task_failure`]),
//! with what CANN's exception record holds (`rtExceptionInfo`: device, stream, task, thread,
//! code; `TaskFailCallBack` in hicann/runtime `src/runtime/core/src/task/task_info/task_manager.cc`).
//! The C library keeps its `aclrtSetExceptionInfoCallback` there. Built on the stream engine's
//! failure hook (`crate::stream::failure`): nothing on any task's success path.

use std::sync::{Arc, PoisonError, RwLock};

use acl_notify_core::{BackendError, Error, RawStream};

use crate::error::SimError;
use crate::stream::FailureHook;

/// A failed task ([`Sim::on_task_failure`](crate::Sim::on_task_failure)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskFailure {
    /// The device of its stream.
    pub device: u32,
    /// Its stream.
    pub stream: RawStream,
    /// Whether that is a device's default stream.
    pub default: bool,
    /// Its number on the stream (counted from 0), as CANN's 32-bit task id.
    pub task: u32,
    /// The kernel thread id of the thread that queued on the stream last (`crate::submitted`).
    pub thread: u32,
    /// What it failed with: the code the stream's next synchronize reports, if it is the first.
    pub error: Error,
}

/// What is told of each failed task.
pub type FailureListener = Arc<dyn Fn(&TaskFailure) + Send + Sync>;

/// A `Sim`'s listener, shared with its streams' hooks.
#[derive(Default)]
pub(crate) struct Failures(RwLock<Option<FailureListener>>);

impl Failures {
    /// The hook of stream `h` on `device` (a default stream or not), telling the `Sim`'s listener.
    pub(crate) fn hook(
        self: &Arc<Self>,
        device: u32,
        h: RawStream,
        default: bool,
    ) -> FailureHook<SimError> {
        let failures = Arc::clone(self);
        Box::new(move |f| {
            let listener = failures
                .0
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(listener) = listener {
                listener(&TaskFailure {
                    device,
                    stream: h,
                    default,
                    task: f.task as u32,
                    thread: f.thread as u32,
                    error: f.error.kind(),
                });
            }
        })
    }

    /// Sets or removes the listener ([`Sim::on_task_failure`](crate::Sim::on_task_failure)).
    pub(crate) fn set(&self, listener: Option<FailureListener>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = listener;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use acl_notify_core::{
        BackendError, CreateFlags, Error, NotifyResources, Soc, StreamOps, SyncWait, Timeout,
    };

    use super::TaskFailure;
    use crate::{NamespaceGuard, Sim};

    #[test]
    fn a_wait_that_times_out_is_told_with_its_stream_task_thread_and_code() {
        let ns = format!("unit-taskfail-{}", std::process::id());
        let _ = Sim::remove_namespace(&ns);
        let sim = Sim::builder()
            .soc(Soc::Ascend910B)
            .devices(2)
            .namespace(&ns)
            .open()
            .unwrap();
        let _ns = NamespaceGuard(ns);
        let seen: Arc<Mutex<Vec<TaskFailure>>> = Arc::default();
        let into = Arc::clone(&seen);
        sim.on_task_failure(Some(Arc::new(move |f: &TaskFailure| {
            into.lock().unwrap().push(*f);
        })));
        let n = sim.create_notify(1, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(1).unwrap();
        sim.record(n, s).unwrap();
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        assert!(
            seen.lock().unwrap().is_empty(),
            "tasks that succeeded were told"
        );
        sim.wait_and_reset(n, s, Timeout::from_c(1)).unwrap();
        assert_eq!(
            sim.synchronize(s, SyncWait::Forever).unwrap_err().kind(),
            Error::TaskTimeout
        );
        // SAFETY: gettid(2) has no preconditions.
        let me = unsafe { libc::gettid() } as u32;
        assert_eq!(
            *seen.lock().unwrap(),
            [TaskFailure {
                device: 1,
                stream: s,
                default: false,
                task: 2,
                thread: me,
                error: Error::TaskTimeout,
            }]
        );
        assert_eq!(crate::thread_last_task(), 2);
        sim.on_task_failure(None);
        sim.wait_and_reset(n, s, Timeout::from_c(1)).unwrap();
        let _ = sim.synchronize(s, SyncWait::Forever);
        assert_eq!(seen.lock().unwrap().len(), 1, "a removed listener was told");
    }
}

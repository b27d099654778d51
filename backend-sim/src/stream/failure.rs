//! A stream's failure hook: who is told, on the worker's thread, each time one of the
//! stream's tasks fails (returns an error or panics) — not when a task is discarded or
//! aborted, nor when the worker itself unwinds. The owner sets it once
//! ([`Stream::on_failure`](super::Stream::on_failure)); the simulator turns it into CANN's
//! exception record (`aclrtSetExceptionInfoCallback`). It costs the tasks that succeed
//! nothing: it is looked at only on a task's failure path.

use std::sync::OnceLock;

/// A task of the stream failed.
#[derive(Debug)]
pub struct TaskFailure<'a, E> {
    /// Its number on the stream, counted from 0 ([`TaskCtx::task_number`](super::TaskCtx::task_number)).
    pub task: u64,
    /// The kernel thread id of the thread that queued on the stream last (`crate::submitted`
    /// says why not always the task's own): 0 if none did (cannot happen for a queued task).
    pub thread: i32,
    /// What it failed with (what the stream stores for `synchronize` if it is the first).
    pub error: &'a E,
}

/// What a stream calls on a task's failure ([`TaskFailure`]). It runs on the thread running
/// the stream's tasks, before the failed task retires: it must not wait for the stream.
pub type FailureHook<E> = Box<dyn Fn(TaskFailure<'_, E>) + Send + Sync>;

/// A stream's hook, set at most once.
pub(super) struct OnFailure<E>(OnceLock<FailureHook<E>>);

impl<E> OnFailure<E> {
    pub(super) const fn new() -> Self {
        OnFailure(OnceLock::new())
    }

    /// Sets the hook; hands `hook` back if one is set already.
    pub(super) fn set(&self, hook: FailureHook<E>) -> Result<(), FailureHook<E>> {
        self.0.set(hook)
    }

    /// Tells the hook, if there is one.
    #[cold]
    #[inline(never)]
    pub(super) fn report(&self, task: u64, thread: i32, error: &E) {
        if let Some(hook) = self.0.get() {
            hook(TaskFailure {
                task,
                thread,
                error,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use acl_notify_core::{Error, SyncWait};

    use super::super::{Stream, StreamConfig, worker::gettid};

    type Seen = Arc<Mutex<Vec<(u64, i32, Error)>>>;

    fn hooked(name: &str) -> (Stream<Error>, Seen) {
        let s: Stream<Error> = Stream::spawn(StreamConfig::new(name)).unwrap();
        let seen: Seen = Arc::default();
        let into = Arc::clone(&seen);
        assert!(
            s.on_failure(Box::new(move |f| {
                into.lock().unwrap().push((f.task, f.thread, *f.error));
            }))
            .is_ok()
        );
        assert!(
            s.on_failure(Box::new(|_| {})).is_err(),
            "a second hook was taken"
        );
        (s, seen)
    }

    #[test]
    fn each_failed_task_is_told_with_its_number_and_the_queuing_thread() {
        let (s, seen) = hooked("t-fail-hook");
        s.enqueue(|_| Ok(())).unwrap();
        s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
        s.enqueue(|_| Ok(())).unwrap();
        s.enqueue(|_| panic!("a task that panics")).unwrap();
        s.enqueue(|_| Err(Error::InvalidParam)).unwrap();
        // The hook runs before the failed task retires: the synchronize comes after it.
        assert_eq!(
            s.synchronize(SyncWait::Forever).unwrap_err(),
            Error::TaskTimeout
        );
        let me = gettid();
        assert_eq!(
            *seen.lock().unwrap(),
            [
                (1, me, Error::TaskTimeout),
                (3, me, Error::DrvInternalError),
                (4, me, Error::InvalidParam)
            ]
        );
    }

    #[test]
    fn tasks_that_succeed_or_are_aborted_are_not_told() {
        let (s, seen) = hooked("t-fail-hook-abort");
        let (go, gate) = std::sync::mpsc::channel::<()>();
        s.enqueue(move |_| {
            let _ = gate.recv();
            Ok(())
        })
        .unwrap();
        s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
        s.abort().unwrap();
        drop(go);
        let _ = s.synchronize(SyncWait::Forever);
        s.enqueue(|_| Ok(())).unwrap();
        s.synchronize(SyncWait::Forever).unwrap();
        assert!(
            seen.lock().unwrap().is_empty(),
            "{:?}",
            seen.lock().unwrap()
        );
    }
}

//! An action a queued task owes whatever happens to it: done exactly once, when the task runs,
//! or when the task is dropped unrun after it was queued (its stream destroyed with its tasks
//! discarded, `aclrtDeviceTaskAbort`), and never when it was not queued at all (the caller's
//! error path then undoes its own work).
//!
//! Used by the stream-ordered frees of `aclrtMemPoolFreeAsync` (a pool block made reusable, an
//! `aclrtMalloc` allocation given back to its file): before, a discarded free left a pool block
//! "free queued" for ever, and plain memory allocated until the process died.
//!
//! The task holds a [`RunOrDrop`]; the enqueuing thread holds its [`Pending`] and says what the
//! enqueue did ([`Pending::queued`] or [`Pending::refused`]). A task may run, or be dropped,
//! before the enqueuing thread hears back from the queue (another thread aborts the stream
//! meanwhile): a drop then only notes it, and [`Pending::queued`] does the action.

use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::{Arc, Mutex};

use crate::locks::lock;

/// Neither the task's drop nor the enqueuing thread has decided yet.
const OPEN: u8 = 0;
/// The enqueuing thread saw the task queued: a drop unrun does the action.
const QUEUED: u8 = 1;
/// The task was dropped unrun before the enqueuing thread heard back: its answer decides.
const DROPPED: u8 = 2;

struct Shared<F> {
    state: AtomicU8,
    action: Mutex<Option<F>>,
}

impl<F: FnOnce()> Shared<F> {
    /// Does the action if nobody did it yet.
    fn act(&self) {
        let f = lock(&self.action).take();
        if let Some(f) = f {
            f();
        }
    }
}

/// The task's side: [`run`](Self::run) it when the task runs; dropping it unrun does the
/// action if the task was queued.
pub(crate) struct RunOrDrop<F: FnOnce()>(Arc<Shared<F>>);

/// The enqueuing thread's side: exactly one of [`queued`](Self::queued) or
/// [`refused`](Self::refused) once the enqueue has answered.
#[must_use = "say whether the task was queued"]
pub(crate) struct Pending<F: FnOnce()>(Arc<Shared<F>>);

/// A task's guard for `action`, and the enqueuing thread's handle on it.
pub(crate) fn run_or_drop<F: FnOnce()>(action: F) -> (RunOrDrop<F>, Pending<F>) {
    let shared = Arc::new(Shared {
        state: AtomicU8::new(OPEN),
        action: Mutex::new(Some(action)),
    });
    (RunOrDrop(Arc::clone(&shared)), Pending(shared))
}

impl<F: FnOnce()> RunOrDrop<F> {
    /// The task runs: the action now (the drop that follows finds it done).
    pub(crate) fn run(self) {
        self.0.act();
    }
}

impl<F: FnOnce()> Drop for RunOrDrop<F> {
    fn drop(&mut self) {
        match self
            .0
            .state
            .compare_exchange(OPEN, DROPPED, AcqRel, Acquire)
        {
            // Dropped before the enqueuing thread heard back: its answer decides.
            Ok(_) => {}
            // Queued (ran already, or dropped unrun now).
            Err(_) => self.0.act(),
        }
    }
}

impl<F: FnOnce()> Pending<F> {
    /// The enqueue queued the task: its run or its drop does the action (or this, if the task
    /// was already dropped unrun).
    pub(crate) fn queued(self) {
        if self
            .0
            .state
            .compare_exchange(OPEN, QUEUED, AcqRel, Acquire)
            .is_err()
        {
            self.0.act();
        }
    }

    /// The enqueue refused the task (it never ran and never will): no action; the caller
    /// undoes its work.
    pub(crate) fn refused(self) {
        lock(&self.0.action).take();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::Relaxed;

    use super::*;

    fn counted() -> (Arc<AtomicUsize>, impl FnOnce() + Send + 'static) {
        let n = Arc::new(AtomicUsize::new(0));
        let m = Arc::clone(&n);
        (n, move || {
            m.fetch_add(1, Relaxed);
        })
    }

    #[test]
    fn a_queued_task_acts_once_when_it_runs() {
        let (n, f) = counted();
        let (task, pending) = run_or_drop(f);
        pending.queued();
        assert_eq!(n.load(Relaxed), 0);
        task.run();
        assert_eq!(n.load(Relaxed), 1);
    }

    #[test]
    fn a_queued_task_dropped_unrun_acts_once() {
        let (n, f) = counted();
        let (task, pending) = run_or_drop(f);
        pending.queued();
        drop(task);
        assert_eq!(n.load(Relaxed), 1);
    }

    #[test]
    fn a_task_run_or_dropped_before_the_answer_acts_once() {
        let (n, f) = counted();
        let (task, pending) = run_or_drop(f);
        task.run();
        pending.queued();
        assert_eq!(n.load(Relaxed), 1);

        let (n, f) = counted();
        let (task, pending) = run_or_drop(f);
        drop(task);
        assert_eq!(n.load(Relaxed), 0, "not yet known to be queued");
        pending.queued();
        assert_eq!(n.load(Relaxed), 1);
    }

    #[test]
    fn a_refused_task_never_acts() {
        let (n, f) = counted();
        let (task, pending) = run_or_drop(f);
        drop(task);
        pending.refused();
        assert_eq!(n.load(Relaxed), 0);

        let (n, f) = counted();
        let (task, pending) = run_or_drop(f);
        pending.refused();
        drop(task);
        assert_eq!(n.load(Relaxed), 0);
    }
}

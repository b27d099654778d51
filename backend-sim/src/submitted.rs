//! Who queued what: the last task each thread queued (its ticket on its stream, CANN's
//! "thread's last task id", `aclrtGetThreadLastTaskId`) and, per queue, the kernel thread id
//! of the thread that queued on it last (the thread a failed task's exception record names,
//! `crate::stream`'s failure hook).
//!
//! CANN keeps both per task submission: `InnerThreadLocalContainer::SetLastTaskId` on every
//! task sent (`src/runtime/core/src/stream/stream.cc`), the submitting thread's `tid` in every
//! task (`taskInfo->tid = GetCurrentTid()`, `src/runtime/core/src/task/task_info/task_manager.cc`),
//! copied into the exception info of a task that fails (`TaskFailCallBack`, same file). Here
//! a queue's claim ([`note`]) stores the ticket in a thread-local (one store) and the thread id
//! into the queue's [`Submitter`] word only when it changes (a load of a line the claim reads
//! anyway): a stream fed by one thread writes it once. So the thread named for a failed task is
//! the one that queued on its stream last before the failure was seen — the one that queued the
//! task itself whenever one thread feeds the stream (the usual case); with several, possibly a
//! later one (each task carrying its thread would cost every task a word more: the queue's jobs
//! are 24 bytes on purpose, `crate::job`).

use std::cell::Cell;
use std::sync::atomic::{AtomicI32, Ordering};

/// No task queued by this thread yet (CANN's initial `lastTaskId_`, 0xFFFFFFFF:
/// `src/runtime/core/src/common/inner_thread_local.cpp`).
pub const NO_TASK: u32 = u32::MAX;

thread_local! {
    /// This thread's kernel thread id (0: not read yet) and the ticket of its last queued
    /// task (as CANN's 32-bit task id).
    static THIS: (Cell<i32>, Cell<u32>) = const { (Cell::new(0), Cell::new(NO_TASK)) };
}

/// The thread that queued on a queue last ([`note`]); 0 before any.
#[derive(Debug, Default)]
pub(crate) struct Submitter(AtomicI32);

impl Submitter {
    /// The kernel thread id of the thread that queued last (0: none yet).
    pub(crate) fn get(&self) -> i32 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Notes that the calling thread claimed `ticket` of the queue whose submitter word is `who`.
#[inline(always)]
pub(crate) fn note(who: &Submitter, ticket: u64) {
    THIS.with(|(tid, last)| {
        last.set(ticket as u32);
        let mut t = tid.get();
        if t == 0 {
            t = gettid();
            tid.set(t);
        }
        if who.0.load(Ordering::Relaxed) != t {
            who.0.store(t, Ordering::Relaxed);
        }
    });
}

/// The ticket (as a 32-bit task id) of the last task the calling thread queued on any stream,
/// or [`NO_TASK`].
pub fn last_task() -> u32 {
    THIS.with(|(_, last)| last.get())
}

#[cold]
fn gettid() -> i32 {
    // SAFETY: gettid(2) has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_sees_its_own_last_ticket_and_the_queue_its_last_submitter() {
        let q = Submitter::default();
        assert_eq!(q.get(), 0);
        std::thread::spawn(|| assert_eq!(last_task(), NO_TASK))
            .join()
            .unwrap();
        note(&q, 7);
        assert_eq!(last_task(), 7);
        assert_eq!(q.get(), gettid());
        let other = std::thread::scope(|s| {
            s.spawn(|| {
                note(&q, 8);
                assert_eq!(last_task(), 8);
                gettid()
            })
            .join()
            .unwrap()
        });
        assert_ne!(other, gettid());
        assert_eq!(
            q.get(),
            other,
            "the queue names the thread that queued last"
        );
        assert_eq!(
            last_task(),
            7,
            "another thread's ticket is not this thread's"
        );
    }
}

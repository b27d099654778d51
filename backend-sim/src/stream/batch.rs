//! The tasks a stream's turn has taken from its queue and not yet run ([`Batch`]): at most
//! [`TAKE`] of them, run first in, first out.

use std::mem::MaybeUninit;

use crate::ring::Taker;

/// How many queued tasks the worker takes per turn. They leave the queue
/// together (so up to `capacity + TAKE - 1` tasks can be pending) and still run one by one, in
/// order; a discarding destroy drops the taken ones that have not started on the worker.
/// Defined here, not in `worker`, which uses this module (no import cycle).
pub(super) const TAKE: usize = 16;

/// Tasks taken from the queue, not yet run, in ticket order: a fixed array used as a FIFO.
/// The queue's tasks are moved into it once ([`fill`](Self::fill)) and out of it once, as
/// they run ([`pop`](Self::pop)). It was a `Vec` filled by `push` and reversed so that `pop`
/// gave the first: a capacity check per push and a swap of every task (24 bytes) per batch,
/// about 60 instructions per record+wait pair (callgrind).
pub(super) struct Batch<J> {
    tasks: [MaybeUninit<J>; TAKE],
    /// The next task to run.
    head: usize,
    /// Past the last one taken. `tasks[head..end]` are initialised.
    end: usize,
}

impl<J> Batch<J> {
    pub(super) fn new() -> Self {
        Batch {
            tasks: [const { MaybeUninit::uninit() }; TAKE],
            head: 0,
            end: 0,
        }
    }

    /// Tasks not yet run.
    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.end - self.head
    }

    #[inline(always)]
    pub(super) fn is_empty(&self) -> bool {
        self.head == self.end
    }

    /// Takes up to [`TAKE`] published tasks from the queue into an empty batch; returns how
    /// many.
    #[inline(always)]
    pub(super) fn fill(&mut self, k: &mut Taker<'_, J>) -> usize {
        debug_assert!(self.is_empty());
        self.head = 0;
        self.end = k.take_batch(&mut self.tasks);
        self.end
    }

    /// The next task to run, out of the batch.
    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<J> {
        if self.head == self.end {
            return None;
        }
        let i = self.head;
        self.head = i + 1;
        // SAFETY: `i` was in `head..end` (initialised); `head` moved past it, so the value
        // is read out once.
        Some(unsafe { self.tasks.get_unchecked(i).assume_init_read() })
    }

    /// The next task to run, left in the batch.
    #[inline(always)]
    pub(super) fn peek(&self) -> Option<&J> {
        if self.head == self.end {
            return None;
        }
        // SAFETY: `head` is in `head..end` (initialised).
        Some(unsafe { self.tasks.get_unchecked(self.head).assume_init_ref() })
    }

    /// [`pop`](Self::pop) if the next task satisfies `f`.
    #[inline(always)]
    pub(super) fn pop_if(&mut self, f: impl FnOnce(&J) -> bool) -> Option<J> {
        if f(self.peek()?) { self.pop() } else { None }
    }

    /// Puts `task` back in front, to run next: the task just popped (the turn stops before
    /// it). Panics if nothing was popped from this batch (no room in front).
    #[inline]
    pub(super) fn put_back(&mut self, task: J) {
        self.put_back_with(|| task);
    }

    /// [`put_back`](Self::put_back) of the task `make` builds, built after the check and
    /// written straight into its place: nothing can panic between the two, so the compiler
    /// need not keep the task in memory of its own to drop it while unwinding (a task
    /// built on the stack with narrow stores and copied here with wider loads stalls this
    /// VM's CPUs: see `super::job::Stopped`).
    #[inline(always)]
    pub(super) fn put_back_with(&mut self, make: impl FnOnce() -> J) {
        assert!(
            self.head > 0,
            "a task put back on a batch it was not taken from"
        );
        let i = self.head - 1;
        // SAFETY: `i < head <= end <= TAKE`, in bounds; `tasks[i]` was read out (`pop`: `i`
        // is before `head`), so writing it overwrites nothing. `head` moves back over it
        // only once it is written.
        unsafe { self.tasks.get_unchecked_mut(i) }.write(make());
        self.head = i;
    }

    /// Moves the tasks not yet run to `to`, in order.
    pub(super) fn drain_into(&mut self, to: &mut Vec<J>) {
        while let Some(t) = self.pop() {
            to.push(t);
        }
    }
}

impl<J> Drop for Batch<J> {
    fn drop(&mut self) {
        // The tasks not yet run (only if the turn is dropped with some: a worker that
        // unwound hands them on first, `Shared::worker_unwound`).
        while let Some(t) = self.pop() {
            drop(t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Counted, Ring};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_batch_runs_in_ticket_order_puts_back_and_drops_what_it_holds() {
        let drops = Arc::new(AtomicUsize::new(0));
        let r = Ring::new(64);
        for i in 0..(TAKE as u32 + 3) {
            assert!(matches!(
                r.push(Counted(i, drops.clone())),
                crate::ring::Push::Queued { .. }
            ));
        }
        let mut b = Batch::new();
        assert_eq!(b.fill(&mut r.taker()), TAKE);
        assert_eq!(b.len(), TAKE);
        let first = b.pop().unwrap();
        assert_eq!(first.0, 0);
        assert_eq!(b.peek().unwrap().0, 1);
        b.put_back(first);
        assert_eq!(b.len(), TAKE);
        assert!(b.pop_if(|t| t.0 == 5).is_none());
        for i in 0..4 {
            assert_eq!(b.pop_if(|t| t.0 == i).unwrap().0, i);
        }
        assert_eq!(drops.load(Ordering::Relaxed), 4);
        let mut left = Vec::new();
        b.drain_into(&mut left);
        assert_eq!(
            left.iter().map(|t| t.0).collect::<Vec<_>>(),
            (4..TAKE as u32).collect::<Vec<_>>()
        );
        assert!(b.is_empty() && b.pop().is_none());
        drop(left);
        // The rest of the queue, and a batch dropped with tasks in it.
        assert_eq!(b.fill(&mut r.taker()), 3);
        assert_eq!(b.pop().unwrap().0, TAKE as u32);
        drop(b);
        assert_eq!(drops.load(Ordering::Relaxed), TAKE + 3);
        assert!(r.taker().take().is_none());
    }
}

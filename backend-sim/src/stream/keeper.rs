//! Values kept for a stream's queued tasks until those tasks have run ([`Keeper`]), so that
//! a task may use a value through a plain pointer instead of holding a counted reference:
//! no reference count written by the enqueuing thread and again by the worker, on two CPUs,
//! for every task.
//!
//! The owner of such a value, when it lets the value go, hands it to the stream's keeper
//! ([`Keeper::keep_until_done`]), which drops it once every task issued on the stream so
//! far has retired — at once if they already have, else on the worker when it retires the
//! last of them (`Shared::retire`), and at the latest when the worker exits. What makes that
//! enough is the enqueuer's side: a task queued with such a pointer must have been claimed
//! (its ticket issued) before the owner let go, or must not use the pointer. The simulator's
//! stream pins (`crate::pin`) check that in the enqueue's `on_claim`
//! ([`Stream::enqueue_job_with`](super::Stream::enqueue_job_with)).

use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use acl_notify_core::Error;

use super::worker::Shared;
use super::{Job, Stream, drop_all, drop_quietly, lock};

/// A stream's keeper: holds values for the stream's queued tasks until they have run (see
/// the module docs). Does not keep the stream alive (a weak reference to its memory); once
/// the stream's worker has exited, a value handed to it is dropped at once.
pub struct Keeper<E: From<Error> + Send + 'static, J: Job<E>>(Weak<Shared<E, J>>);

impl<E: From<Error> + Send + 'static, J: Job<E>> std::fmt::Debug for Keeper<E, J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keeper")
            .field("stream_alive", &(self.0.strong_count() > 0))
            .finish()
    }
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Clone for Keeper<E, J> {
    fn clone(&self) -> Self {
        Keeper(Weak::clone(&self.0))
    }
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Stream<E, J> {
    /// The stream's keeper (see [`Keeper`]).
    pub fn keeper(&self) -> Keeper<E, J> {
        Keeper(Arc::downgrade(&self.shared))
    }

    /// Marks the stream's handle as removed from its table (call it under the table's lock,
    /// before the slot can be reused): [`Keeper::is_unlisted`] is true from now on, so that
    /// what a table keeps by handle for this stream (the simulator's notify pins) is not
    /// taken for that of a later stream whose handle has the same value.
    pub fn unlist(&self) {
        self.shared.unlisted.store(true, Ordering::SeqCst);
    }
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Keeper<E, J> {
    /// Keeps `value` until every task issued on the stream before this call has retired (run,
    /// or dropped unrun), then drops it: here if they have already, else on the thread that
    /// retires the last of them (the worker, or a destroy). A stream whose worker has exited
    /// runs no task any more: the value is dropped here.
    ///
    /// "Before this call" is the stream's ticket count read here with a sequentially
    /// consistent load; an owner that made the value unreachable for new tasks and then
    /// bumped a counter their enqueuers check after their claim (see
    /// [`Stream::enqueue_job_with`](super::Stream::enqueue_job_with)) calls this after the
    /// bump.
    pub fn keep_until_done<T: Send + 'static>(&self, value: T) {
        match self.0.upgrade() {
            Some(s) => s.keep_until_done(Box::new(value)),
            // The stream and its worker are gone (the worker holds a reference while it
            // runs): no task will run.
            None => drop_quietly(value),
        }
    }
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Keeper<E, J> {
    /// Whether the stream's handle was removed from its table ([`Stream::unlist`]), or the
    /// stream is gone.
    pub fn is_unlisted(&self) -> bool {
        self.0
            .upgrade()
            .is_none_or(|s| s.unlisted.load(Ordering::SeqCst))
    }
}

/// A [`Shared::keep_until_done`] in progress (`Shared::keeping`), unsaid when dropped: after
/// `release_at` holds its bound, or its value was dropped.
struct Keeping<'a>(&'a AtomicU64);

impl Drop for Keeping<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
thread_local! {
    /// Run by this thread's next [`Shared::keep_until_done`] once it has read its bound (the
    /// tests' look into the window before `release_at` holds it).
    pub(super) static AFTER_BOUND: std::cell::Cell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::Cell::new(None) };
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Shared<E, J> {
    fn keep_until_done(&self, value: Box<dyn Any + Send>) {
        // Said before the bound is read, unsaid once `release_at` holds it: a turn that parks
        // in between retires what it has run (`Shared::retire_wanted`). Else it could keep
        // tasks of the bound unretired (a park retires only when a thread waits for retires,
        // `Shared::stop_turn`) while it waits on a wait issued after the bound, which the
        // value would wait for too. Dekker with the park: the parking turn took its wait
        // (claimed before) and then reads `keeping`, then `release_at`. If it reads 0 before
        // the increment, the bound read after it counts that wait (the value waits for it
        // anyway); if after the decrement, it then reads the bound in `release_at`.
        self.keeping.fetch_add(1, Ordering::SeqCst);
        let _said = Keeping(&self.keeping);
        let end = self.ring.issued();
        #[cfg(test)]
        AFTER_BOUND.with(|h| {
            if let Some(f) = h.take() {
                f();
            }
        });
        if self.retired.load(Ordering::SeqCst) >= end {
            drop_quietly(value);
            return;
        }
        {
            let mut later = lock(&self.later);
            if later.closed {
                drop(later);
                drop_quietly(value);
                return;
            }
            later.values.push((end, value));
            self.release_at.fetch_min(end, Ordering::SeqCst);
        }
        // Dekker handshake with `retire`, which adds to `retired` and then reads
        // `release_at`: either it sees our bound or we see its count.
        let r = self.retired.load(Ordering::SeqCst);
        if r >= end {
            self.release(r);
        }
    }

    /// Drops the kept values whose tasks have all retired (`retired` of them are).
    #[cold]
    #[inline(never)]
    pub(super) fn release(&self, retired: u64) {
        let mut ready = Vec::new();
        {
            let mut later = lock(&self.later);
            let mut i = 0;
            while i < later.values.len() {
                if later.values[i].0 <= retired {
                    ready.push(later.values.swap_remove(i).1);
                } else {
                    i += 1;
                }
            }
            let next = later.values.iter().map(|(end, _)| *end).min();
            self.release_at
                .store(next.unwrap_or(u64::MAX), Ordering::SeqCst);
        }
        drop_all(&mut ready);
    }

    /// The worker has exited: drops every kept value, and any handed over later at once.
    pub(super) fn close_later(&self) {
        let mut values = {
            let mut later = lock(&self.later);
            later.closed = true;
            self.release_at.store(u64::MAX, Ordering::SeqCst);
            std::mem::take(&mut later.values)
        };
        drop_all(&mut values);
    }
}

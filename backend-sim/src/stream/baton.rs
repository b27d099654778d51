//! A stream's *baton*: the right to run its turn (`worker::Turn`), held by one thread at a
//! time — the stream's own thread while the turn is home, the process's runner while it is
//! away (the ring's *away* bit, `super::runner`). Not a lock: who may take it is decided by
//! that protocol, whose read-modify-writes of the ring's tail word (and the runner list's
//! lock) order every hand-over, so taking and leaving it cost a load and a store each, no
//! locked instruction. Until 2026-12-05 it was a `Mutex`, whose lock and unlock were two
//! of the runner's locked instructions per park (7 % of the pipeline bench's samples,
//! `perf`): uncontended always, since no two threads ever wanted it at once.
//!
//! The hand-overs: the home thread leaves it, then sets *away* (`Ring::go_away`) and puts
//! the stream on the runner's list under its lock; the runner takes the stream from that
//! list under the same lock, then the baton. The runner leaves it, then clears *away*
//! (`Ring::come_home`) or hands the turn back asleep (`Ring::sleep_away`, the next claim
//! waking the thread); the home thread takes it only once it has read *away* clear. A taker
//! that finds it held panics (a broken hand-over: a bug of ours, never a wait).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

pub(super) struct Baton<T> {
    held: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a `Held`, one at a time (the module's protocol,
// checked by `hold`); it moves between threads with the baton, so it must be `Send`.
unsafe impl<T: Send> Sync for Baton<T> {}

impl<T> Baton<T> {
    pub(super) fn new(value: T) -> Self {
        Baton {
            held: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the baton. The caller must be the one thread the stream's protocol gives it to
    /// now (see the module docs); panics if it is held (a load and a store, not a
    /// read-modify-write: a check of the protocol, not a lock).
    #[inline]
    pub(super) fn hold(&self) -> Held<'_, T> {
        assert!(
            !self.held.load(Ordering::Acquire),
            "a stream's baton taken while held (a broken hand-over)"
        );
        self.held.store(true, Ordering::Relaxed);
        Held(self)
    }

    /// [`hold`](Self::hold) for a caller that must not panic (one running while its thread
    /// unwinds): `None` instead if the baton is held.
    #[inline]
    pub(super) fn try_hold(&self) -> Option<Held<'_, T>> {
        if self.held.load(Ordering::Acquire) {
            return None;
        }
        self.held.store(true, Ordering::Relaxed);
        Some(Held(self))
    }
}

/// The baton, held: the turn's value; left when dropped (also while unwinding).
pub(super) struct Held<'a, T>(&'a Baton<T>);

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this thread holds the baton (`Baton::hold`).
        unsafe { &*self.0.value.get() }
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this thread holds the baton (`Baton::hold`), and `&mut self` is unique.
        unsafe { &mut *self.0.value.get() }
    }
}

impl<T> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::Baton;

    /// The baton gives its value to one holder at a time and is free again once left; a
    /// second taker while it is held panics instead of reaching the value.
    #[test]
    fn a_baton_is_taken_by_one_holder_at_a_time() {
        let b = Baton::new(1u32);
        {
            let mut h = b.hold();
            *h += 1;
        }
        assert_eq!(*b.hold(), 2);
        let h = b.hold();
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = b.hold();
        }));
        assert!(again.is_err(), "a held baton was taken again");
        assert!(b.try_hold().is_none(), "a held baton was tried and taken");
        drop(h);
        assert_eq!(*b.hold(), 2);
        assert_eq!(b.try_hold().map(|h| *h), Some(2));
        assert_eq!(*b.hold(), 2, "a tried baton is left when dropped");
    }
}

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
//!
//! Under `--cfg sim_loom` its flag and cell are loom's, and a holder's first and last moments
//! are accesses loom checks ([`loom_tests`]): the hand-overs above, modelled with the ring's
//! own *away* bit.

#[cfg(not(sim_loom))]
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
#[cfg(not(sim_loom))]
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(sim_loom)]
use loom::cell::UnsafeCell;
#[cfg(sim_loom)]
use loom::sync::atomic::{AtomicBool, Ordering};

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
        // In the model, taking the baton is a write of the value that loom checks: one that
        // does not happen after the last holder's leave is a causality violation.
        #[cfg(sim_loom)]
        self.value.with_mut(|_| ());
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
        // In the model, as in `hold`.
        #[cfg(sim_loom)]
        self.value.with_mut(|_| ());
        Some(Held(self))
    }
}

/// The baton, held: the turn's value; left when dropped (also while unwinding).
pub(super) struct Held<'a, T>(&'a Baton<T>);

impl<T> Deref for Held<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this thread holds the baton (`Baton::hold`).
        #[cfg(not(sim_loom))]
        return unsafe { &*self.0.value.get() };
        // SAFETY: as above; the holding is bracketed by checked accesses (`hold`, `drop`).
        #[cfg(sim_loom)]
        return self.0.value.with(|p| unsafe { &*p });
    }
}

impl<T> DerefMut for Held<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this thread holds the baton (`Baton::hold`), and `&mut self` is unique.
        #[cfg(not(sim_loom))]
        return unsafe { &mut *self.0.value.get() };
        // SAFETY: as above; the holding is bracketed by checked accesses (`hold`, `drop`).
        #[cfg(sim_loom)]
        return self.0.value.with_mut(|p| unsafe { &mut *p });
    }
}

impl<T> Drop for Held<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // In the model, leaving is a last checked write of the value (see `hold`).
        #[cfg(sim_loom)]
        self.0.value.with_mut(|_| ());
        self.0.held.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(sim_loom)))]
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

/// Loom models of the baton's hand-overs (`cargo xtask test`'s loom step, with the ring's:
/// `RUSTFLAGS="--cfg sim_loom" cargo test -p acl-notify-sim --lib --release
/// stream::baton::loom_tests::`). The baton's value is a log each holder appends its name to:
/// a holder that does not see the last one's entry, or that overlaps it, fails the model (the
/// log's accesses and each holding's first and last moments are loom's checked accesses;
/// a second taker while held is `hold`'s panic). The hand-overs are ordered by the ring's
/// *away* bit and the runner list's lock, as in `worker.rs`/`runner.rs`, and the models
/// catch a break of that order (2026-12-05, at a preemption bound of 2): the runner clearing
/// *away* before it leaves the baton fails the first (`hold`'s panic), the *away* bit's
/// accesses `Relaxed` instead of `SeqCst` fail the second (loom: concurrent writes of the
/// value). The baton's own leave need not order them: every taker reads the step that
/// follows the leave in the leaver's thread, so its `Release` is belt and braces, and with
/// `Relaxed` there both models pass (as they should).
#[cfg(all(test, sim_loom))]
mod loom_tests {
    use super::Baton;
    use crate::ring::{Push, Ring};
    use loom::sync::{Arc, Mutex};
    use loom::thread;

    /// A stream: its queue, its turn (a log of who held it) and the runner's list (here: one
    /// entry, whether the stream is on it).
    struct Stream {
        ring: Ring<u32>,
        turn: Baton<Vec<&'static str>>,
        listed: Mutex<bool>,
    }

    /// The home thread parks its turn (`worker.rs`: leave the baton, set *away*, list the
    /// stream under the runner's lock), then waits for *away* to clear and takes it again.
    /// Returns the log it then finds.
    fn park_and_wait(s: &Stream, runner: &thread::Thread) -> Vec<&'static str> {
        let mut t = s.turn.hold();
        t.push("home");
        drop(t);
        s.ring.go_away();
        *s.listed.lock().unwrap() = true;
        runner.unpark();
        while s.ring.is_away() {
            thread::park();
        }
        let mut t = s.turn.hold();
        s.ring.awake();
        t.push("home again");
        t.clone()
    }

    /// The runner: waits for the stream on its list, takes it off under the lock, then the
    /// baton.
    fn borrow(s: &Stream) -> super::Held<'_, Vec<&'static str>> {
        loop {
            if std::mem::take(&mut *s.listed.lock().unwrap()) {
                break;
            }
            thread::park();
        }
        s.turn.hold()
    }

    fn stream() -> Arc<Stream> {
        Arc::new(Stream {
            ring: Ring::new(2),
            turn: Baton::new(Vec::new()),
            listed: Mutex::new(false),
        })
    }

    /// Parked, then handed home awake (`Shared::come_home`: leave the baton, clear *away*,
    /// unpark the thread): each holder sees the last one's entry, none overlaps another.
    #[test]
    fn a_turn_parked_and_handed_home_awake_is_held_by_one_at_a_time() {
        loom::model(|| {
            let s = stream();
            let runner = thread::current();
            let home = {
                let s = Arc::clone(&s);
                thread::spawn(move || park_and_wait(&s, &runner))
            };
            let mut t = borrow(&s);
            assert_eq!(*t, ["home"]);
            t.push("runner");
            drop(t);
            s.ring.come_home();
            home.thread().unpark();
            assert_eq!(home.join().unwrap(), ["home", "runner", "home again"]);
        });
    }

    /// Parked, then handed home asleep (`run_borrowed`: leave the baton, `Ring::sleep_away`,
    /// or, when a claim came first, take the baton back and run what it queued) while a
    /// producer queues a task, whose claim wakes the thread once the turn is home asleep.
    /// Each holder sees the last one's entry, none overlaps another, the task is run once.
    #[test]
    fn a_turn_parked_and_handed_home_asleep_is_held_by_one_at_a_time() {
        loom::model(|| {
            let s = stream();
            let runner = thread::current();
            let home = {
                let s = Arc::clone(&s);
                thread::spawn(move || {
                    let mut log = park_and_wait(&s, &runner);
                    // Awake at home, a worker (the sleep handshake of the ring's models):
                    // what the runner did not run is this thread's, up to the last claim (9).
                    loop {
                        let head = {
                            let mut k = s.ring.taker();
                            match k.take() {
                                Some(9) => return log,
                                Some(_) => {
                                    log.push("task at home");
                                    continue;
                                }
                                None => k.head(),
                            }
                        };
                        if s.ring.prepare_sleep(head) {
                            thread::park();
                            s.ring.awake();
                        } else {
                            // A ticket is claimed, not yet published.
                            thread::yield_now();
                        }
                    }
                })
            };
            let producer = {
                let (s, w) = (Arc::clone(&s), home.thread().clone());
                thread::spawn(move || match s.ring.push(1) {
                    Push::Queued { wake } => {
                        if wake {
                            w.unpark();
                        }
                    }
                    other => panic!("{other:?}"),
                })
            };
            let mut t = borrow(&s);
            assert_eq!(*t, ["home"]);
            t.push("runner");
            loop {
                let head = {
                    let mut k = s.ring.taker();
                    if k.take().is_some() {
                        t.push("task on the runner");
                        continue;
                    }
                    k.head()
                };
                drop(t);
                if s.ring.sleep_away(head) {
                    break;
                }
                // A claim came first (maybe not yet published): still the runner's.
                thread::yield_now();
                t = s.turn.hold();
            }
            producer.join().unwrap();
            // The last claim, which the thread runs to: it wakes the thread if it sleeps.
            if let Push::Queued { wake: true } = s.ring.push(9) {
                home.thread().unpark();
            }
            let log = home.join().unwrap();
            let ran = log.iter().filter(|e| e.starts_with("task")).count();
            assert_eq!(ran, 1, "{log:?}");
            assert_eq!(log[..2], ["home", "runner"]);
        });
    }
}

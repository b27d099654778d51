//! What a child forked from a process that uses the simulator starts with.
//!
//! `fork()` copies the calling thread only. Whatever the parent's other threads held at that
//! moment (a lock, a `Once` they were running) stays held in the child for ever, and the
//! data under it may be half-updated. The simulator's process-wide state is built so that a
//! child never needs any of it:
//!
//! - every process-wide lock is a [`PerProcess`], which the child handler registered here
//!   ([`hook`]) forgets before the child's own code runs; the child's first use makes a fresh
//!   one. The parent's lock, and whatever it guards, is left as it is in the child's memory,
//!   unused and never freed;
//! - nothing lazily initialised blocks: no `Once` or `OnceLock` that a child could find
//!   half-run. Lazy values are raced for instead (`shm`'s hasher key, `sigbus`'s handler, the
//!   CPU feature probe);
//! - the cached pid is cleared, so the child reads its own.
//!
//! There is no `prepare` handler: the parent never waits for a lock at a fork, so a fork from
//! any thread (a host function on a stream's worker, a thread inside a call) cannot deadlock
//! here, and a fork costs the parent nothing.
//!
//! What a child can do: open a new [`Sim`](crate::Sim) (also while other threads of the parent
//! were inside the simulator at the fork) and use it like any process. What it cannot do: use
//! anything it inherited — a `Sim`, its streams, handles and notify references are the
//! parent's, their worker threads are not in the child, and their own locks may be held by
//! threads that are gone. Not even drop them: `std::mem::forget` an inherited `Sim` (or leave
//! it alone and exit).

use std::sync::Mutex;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Release};
use std::sync::atomic::{AtomicBool, AtomicPtr};

use acl_notify_core::Error;

use crate::error::SimError;

/// Whether [`in_forked_child`] is registered with `pthread_atfork` in this process.
static HOOKED: AtomicBool = AtomicBool::new(false);

/// Registers the child handler, once per process; whether it is in place. A process that uses
/// a [`PerProcess`] lock must have it (see [`required`]).
///
/// Not a `Once`: a child forked while another thread ran the `Once` would wait for it for
/// ever. Threads that race here on first use may each register the handler; it is idempotent,
/// so a child that runs it twice is none the worse. (glibc registers and forks under one
/// lock: a child has the handler registered, and runs it, or not at all.)
pub(crate) fn hook() -> bool {
    if HOOKED.load(Acquire) {
        return true;
    }
    register()
}

#[cold]
fn register() -> bool {
    // SAFETY: registers a child handler that only stores to atomics (nothing that could wait
    // for a thread the child does not have). Fails only with ENOMEM.
    let ok = unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) } == 0;
    if ok {
        HOOKED.store(true, Release);
    }
    ok
}

/// [`hook`], or 207001 saying that a forked child could not be made safe.
pub(crate) fn required() -> Result<(), SimError> {
    if hook() {
        return Ok(());
    }
    Err(SimError::new(
        Error::MemoryAllocation,
        "pthread_atfork failed (out of memory): without its fork handler a child forked from \
         this process could hang in the simulator",
    ))
}

/// The child handler: run by the forking thread, in the child, before `fork()` returns there
/// (no other thread exists yet). Stores to atomics only.
extern "C" fn in_forked_child() {
    HOOKED.store(true, Release);
    crate::sys::in_forked_child();
    crate::shm::in_forked_child();
    crate::cnt::in_forked_child();
    crate::ipc_event::in_forked_child();
    crate::mem::file::in_forked_child();
    crate::sigbus::in_forked_child();
    crate::waitgraph::in_forked_child();
}

/// A process-wide `Mutex<T>`, made on first use, of which a forked child gets a fresh one (see
/// the module documentation). For statics: the locks it makes are never freed.
///
/// Costs one atomic load more than a `static Mutex<T>` on each [`get`](Self::get).
pub(crate) struct PerProcess<T> {
    /// This process's lock: null before the first use (and in a forked child until its
    /// first), else a leaked `Box`.
    current: AtomicPtr<Mutex<T>>,
    new: fn() -> T,
}

impl<T: Send> PerProcess<T> {
    /// A lock made on first use with `new()` inside.
    pub(crate) const fn new(new: fn() -> T) -> Self {
        PerProcess {
            current: AtomicPtr::new(std::ptr::null_mut()),
            new,
        }
    }

    /// This process's lock. Call [`required`] first, once, so that a child forked while the
    /// lock is held gets its own.
    #[inline]
    pub(crate) fn get(&self) -> &Mutex<T> {
        let p = self.current.load(Acquire);
        if p.is_null() {
            return self.make();
        }
        // SAFETY: a non-null `current` is a pointer from `Box::into_raw` published by `make`,
        // never freed (`forget` only stops using it).
        unsafe { &*p }
    }

    #[cold]
    fn make(&self) -> &Mutex<T> {
        let fresh = Box::into_raw(Box::new(Mutex::new((self.new)())));
        match self
            .current
            .compare_exchange(std::ptr::null_mut(), fresh, AcqRel, Acquire)
        {
            // SAFETY: just published; never freed from now on.
            Ok(_) => unsafe { &*fresh },
            Err(won) => {
                // SAFETY: `fresh` lost the race, so no one else has seen it: ours to free.
                // `won` is another thread's published lock, never freed.
                unsafe {
                    drop(Box::from_raw(fresh));
                    &*won
                }
            }
        }
    }

    /// In a forked child, from the fork handler only: stops using the parent's lock (it stays
    /// allocated, with whatever it guards and however it was held); the next
    /// [`get`](Self::get) makes a fresh one.
    pub(crate) fn forget(&self) {
        self.current.store(std::ptr::null_mut(), Release);
    }
}

/// For tests: runs `body` in a child forked from this process and waits for it. `Err` holds
/// the wait status unless the child ran `body` to the end and it returned `true`. The child
/// `_exit`s, running none of the parent's destructors; `body` must not need a lock another
/// thread of the test process may hold (atomics and system calls are fine).
#[cfg(test)]
pub(crate) fn run_in_child(body: impl FnOnce() -> bool) -> Result<(), i32> {
    // SAFETY: the child only runs `body` (see above) and `_exit`s.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let ok = body();
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The registries' locks held by another thread at the fork: the child gets fresh, free
    /// ones (the parent's would never be released there), and the parent keeps its own.
    #[test]
    fn a_child_forked_while_another_thread_holds_the_registries_gets_fresh_ones() {
        required().unwrap();
        let parents = crate::shm::REGISTRY.get() as *const _;
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let shm = crate::shm::REGISTRY.get().lock().unwrap();
            let cnt = crate::cnt::REGISTRY.get().lock().unwrap();
            held_tx.send(()).unwrap();
            let _ = done_rx.recv();
            drop((shm, cnt));
        });
        held_rx.recv().unwrap();
        let child = run_in_child(|| {
            crate::shm::REGISTRY.get().try_lock().is_ok()
                && crate::cnt::REGISTRY.get().try_lock().is_ok()
        });
        done_tx.send(()).unwrap();
        holder.join().unwrap();
        if let Err(status) = child {
            panic!("the child found a registry locked (status {status:#x})");
        }
        // Not a `try_lock`: other tests of this binary may hold it now.
        assert!(
            std::ptr::eq(crate::shm::REGISTRY.get(), parents),
            "the parent's registry lock was replaced by the fork"
        );
    }
}

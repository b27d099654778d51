//! What a child forked from a process that uses the simulator starts with.
//!
//! `fork()` copies the calling thread only. Whatever the parent's other threads held at that
//! moment (a lock, a `Once` they were running) stays held in the child for ever, and the
//! data under it may be half-updated. The simulator's process-wide state is built so that a
//! child never needs any of it:
//!
//! - every process-wide lock is a [`PerProcess`], which remembers the fork generation
//!   ([`sys::fork_generation`]) that made it: a child (one generation on) finds the parent's
//!   and makes a fresh one on its first use. The parent's lock, and whatever it guards, is
//!   left as it is in the child's memory, unused and never freed. So a module that keeps
//!   process-wide state (a file kind's registry of mappings, say) declares a `PerProcess`
//!   and nothing else: no fork handler names it;
//! - nothing lazily initialised blocks: no `Once` or `OnceLock` that a child could find
//!   half-run. Lazy values are raced for instead (`shm`'s hasher key, `sigbus`'s handler, the
//!   CPU feature probe);
//! - the cached pid is cleared, so the child reads its own.
//!
//! The one `pthread_atfork` child handler lives in [`sys`] (it clears the pid cache and bumps
//! the generation). There is no `prepare` handler: the parent never waits for a lock at a
//! fork, so a fork from any thread (a host function on a stream's worker, a thread inside a
//! call) cannot deadlock here, and a fork costs the parent nothing.
//!
//! What a child can do: open a new [`Sim`](crate::Sim) (also while other threads of the parent
//! were inside the simulator at the fork) and use it like any process. What it cannot do: use
//! anything it inherited — a `Sim`, its streams, handles and notify references are the
//! parent's, their worker threads are not in the child, and their own locks may be held by
//! threads that are gone. Not even drop them: `std::mem::forget` an inherited `Sim` (or leave
//! it alone and exit).

use std::sync::Mutex;
use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

use acl_notify_core::Error;

use crate::error::SimError;
use crate::sys;

/// The fork handler ([`sys::fork_hook`]) is in place, or 207001 saying that a forked child
/// could not be made safe. A process that uses a [`PerProcess`] lock must have it.
pub(crate) fn required() -> Result<(), SimError> {
    if sys::fork_hook() {
        return Ok(());
    }
    Err(SimError::new(
        Error::MemoryAllocation,
        "pthread_atfork failed (out of memory): without its fork handler a child forked from \
         this process could hang in the simulator",
    ))
}

/// A process-wide `Mutex<T>`, made on first use, of which a forked child gets a fresh one (see
/// the module documentation). For statics: the locks it makes are never freed.
///
/// Costs two atomic loads and a compare more than a `static Mutex<T>` on each
/// [`get`](Self::get).
pub(crate) struct PerProcess<T> {
    /// The lock of the latest process that used it: null before the first use, else a leaked
    /// `Box`. In a forked child, until its first use, the parent's.
    current: AtomicPtr<Made<T>>,
    new: fn() -> T,
}

/// A lock and the fork generation of the process that made it.
struct Made<T> {
    generation: u64,
    lock: Mutex<T>,
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
        // SAFETY: a non-null `current` is a pointer from `Box::into_raw` published by `make`,
        // never freed.
        if let Some(m) = unsafe { p.as_ref() }
            && m.generation == sys::fork_generation()
        {
            return &m.lock;
        }
        self.make(p)
    }

    /// Makes and publishes this process's lock, `seen` being what `current` held (null, or
    /// another generation's lock); a thread of this process that publishes one first wins.
    #[cold]
    fn make(&self, mut seen: *mut Made<T>) -> &Mutex<T> {
        let generation = sys::fork_generation();
        let fresh = Box::into_raw(Box::new(Made {
            generation,
            lock: Mutex::new((self.new)()),
        }));
        loop {
            match self.current.compare_exchange(seen, fresh, AcqRel, Acquire) {
                // SAFETY: just published; never freed from now on. (The lock it replaced, if
                // any, was another process's: left as it is, never freed.)
                Ok(_) => return unsafe { &(*fresh).lock },
                Err(won) => {
                    // SAFETY: as in `get`: a published pointer is never freed.
                    match unsafe { won.as_ref() } {
                        Some(m) if m.generation == generation => {
                            // SAFETY: `fresh` lost the race, so no one else has seen it: ours
                            // to free.
                            unsafe { drop(Box::from_raw(fresh)) };
                            return &m.lock;
                        }
                        _ => seen = won,
                    }
                }
            }
        }
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
            let graphs = crate::waitgraph::OPEN.get().lock().unwrap();
            held_tx.send(()).unwrap();
            let _ = done_rx.recv();
            drop((shm, cnt, graphs));
        });
        held_rx.recv().unwrap();
        let child = run_in_child(|| {
            crate::shm::REGISTRY.get().try_lock().is_ok()
                && crate::cnt::REGISTRY.get().try_lock().is_ok()
                && crate::waitgraph::OPEN.get().try_lock().is_ok()
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

    /// The module documentation's rule, checked on the source: no `static` of the crate is a
    /// plain lock or a blocking lazy cell (`Mutex`, `RwLock`, `Condvar`, `Once`, `OnceLock`,
    /// `LazyLock`) — a child forked while a thread of the parent held one would hang on it. A
    /// plain `static Mutex` in the wait-for graph did exactly that (`fork_busy cycle`).
    #[test]
    fn no_static_is_a_lock_a_forked_child_could_find_held() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut dirs = vec![src];
        let mut bad = Vec::new();
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "rs") || p.ends_with("tests.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
                for (n, line) in code.lines().enumerate() {
                    let l = line.trim_start();
                    let l = l
                        .strip_prefix("pub(crate) ")
                        .or(l.strip_prefix("pub "))
                        .unwrap_or(l);
                    let Some(rest) = l.strip_prefix("static ") else {
                        continue;
                    };
                    let Some((_, ty)) = rest.split_once(':') else {
                        continue;
                    };
                    let ty = ty.trim_start().trim_start_matches("std::sync::");
                    if [
                        "Mutex<",
                        "RwLock<",
                        "Condvar",
                        "Once ",
                        "Once=",
                        "Once;",
                        "OnceLock<",
                        "LazyLock<",
                    ]
                    .iter()
                    .any(|t| ty.starts_with(t))
                    {
                        bad.push(format!("{}:{}: {}", p.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "statics a forked child could find held (use fork::PerProcess):\n{}",
            bad.join("\n")
        );
    }
}

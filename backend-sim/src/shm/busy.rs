//! The count of busy stream workers of a namespace (in its file's header, [`ShmFile::busy`]),
//! which the spin of a stream's wait reads (`crate::spin`): stream workers that have waited
//! for a record and are not asleep now (spinning, or running the tasks after the wait), plus
//! threads a record has woken that have not run yet.
//!
//! It costs only the sleeping path. A counted worker takes itself out before it sleeps on a
//! notify, and whoever wakes sleepers adds them (its `FUTEX_WAKE` says how many), so a woken
//! thread counts before it runs; a woken thread that is not a counted worker (a host in a
//! host wait) takes its place out again when it runs. A worker is counted from its first wait
//! that does not find its record at once until its queue runs dry and it parks, or it exits.
//! Each process also keeps its own workers' part in its process-table entry, which whoever
//! reclaims a dead process's entry takes out of the count (`super::counts`, which keeps the
//! count of spinners the same way).
//!
//! That part does not cover everything a process can leave behind: a waker counts the
//! threads it woke in the header only, and a counted worker woken so takes the place into its
//! process's part only when it runs (as a host thread gives it back only then); a process
//! killed in between (or between the two adds of [`count_worker`]) leaves one too many in the
//! header for good, and past the budget that stops every spin of the namespace. So whoever
//! reclaims a dead process's entry then lowers the header's count to the sum of the entries'
//! parts if it is above it (`counts::recount`).
//!
//! A counted worker blocked anywhere else than a notify wait (a count-notify wait, an IPC
//! event's, an event wait's condition variable: their wakers count nobody) is out of the
//! count while it sleeps there and back in when it runs again ([`blocked`]). A host function
//! on a stream runs user code, which may well be using the CPU: its worker stays counted.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::ShmFile;
use super::counts::{Count, non_negative};
use crate::sys;

/// This thread's place in a file's count of busy stream workers ([`ShmFile::busy`]): taken
/// by [`count_worker`], given back when dropped (by the process that took it: a child forked
/// from a worker thread inherits this, not the place).
struct Counted(Arc<ShmFile>, i32);

impl Counted {
    /// Adds `n` to the count and to this process's part of it.
    fn add(file: &ShmFile, n: u32) {
        Count::Busy.share(file).add(n);
    }

    /// Takes one out of the count and out of this process's part of it.
    fn sub(file: &ShmFile) {
        Count::Busy.share(file).sub(1);
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if self.1 == sys::getpid() {
            Counted::sub(&self.0);
        }
    }
}

thread_local! {
    /// The file this thread (a stream worker) is counted busy in, if any.
    static COUNTED: RefCell<Option<Counted>> = const { RefCell::new(None) };
}

/// Whether the calling thread is a stream worker counted busy in a file whose count of busy
/// stream workers is at least `cpus`: no CPU is free for another thread of the namespace's.
pub(crate) fn no_cpu_free(cpus: u32) -> bool {
    COUNTED
        .try_with(|c| {
            c.borrow()
                .as_ref()
                .is_some_and(|k| busy_now(k.0.busy()) >= cpus)
        })
        .unwrap_or(false)
}

/// A stream worker is about to wait for a record of a notify in `file`: counts it among the
/// file's busy workers, unless it is already (a worker counted in another file moves here).
pub(crate) fn count_worker(file: &Arc<ShmFile>) {
    let _ = COUNTED.try_with(|c| {
        let mut c = c.borrow_mut();
        // This process's count in this file (a child forked from a worker inherits the
        // marker, not the count).
        if c.as_ref()
            .is_some_and(|k| Arc::ptr_eq(&k.0, file) && k.1 == sys::getpid())
        {
            return;
        }
        Counted::add(file, 1);
        *c = Some(Counted(Arc::clone(file), sys::getpid()));
    });
}

/// The calling worker parks (its queue ran dry) or exits: it is busy no more.
pub(crate) fn uncount_worker() {
    let _ = COUNTED.try_with(|c| c.borrow_mut().take());
}

/// The calling thread blocks in `block` on something whose waker does not count whom it
/// wakes (a count notify's futex, an IPC event's, an event's condition variable): a counted
/// worker is out of the count meanwhile and back in once `block` returns. Any other thread
/// only pays a look at its marker.
pub(crate) fn blocked<R>(block: impl FnOnce() -> R) -> R {
    let file = COUNTED
        .try_with(|c| {
            c.borrow()
                .as_ref()
                .filter(|k| k.1 == sys::getpid())
                .map(|k| Arc::clone(&k.0))
        })
        .ok()
        .flatten();
    if let Some(f) = &file {
        Counted::sub(f);
    }
    let out = block();
    if let Some(f) = &file {
        Counted::add(f, 1);
    }
    out
}

/// Whether the calling thread is counted busy in `file`.
fn counted_in(file: &ShmFile) -> bool {
    COUNTED
        .try_with(|c| {
            c.borrow()
                .as_ref()
                .is_some_and(|k| std::ptr::eq(Arc::as_ptr(&k.0), file) && k.1 == sys::getpid())
        })
        .unwrap_or(false)
}

/// The calling thread sleeps on a word of `file`: `sleep` sleeps and says whether a
/// `FUTEX_WAKE` ended it. A counted worker is out of the count while it sleeps; a waker
/// puts whoever it woke back in at once ([`woke`]), so a counted worker woken so has its
/// place back (only its process's part is left to restore), and any other thread woken so
/// gives back the place its waker took for it.
pub(crate) fn sleep(file: &ShmFile, sleep: impl FnOnce() -> bool) {
    let counted = counted_in(file);
    if counted {
        Counted::sub(file);
    }
    let woken = sleep();
    match (counted, woken) {
        (true, true) => {
            if let Some(own) = file.own_busy() {
                own.fetch_add(1, Ordering::Relaxed);
            }
        }
        (true, false) => Counted::add(file, 1),
        (false, true) => give_back(file.busy(), 1),
        (false, false) => {}
    }
}

/// A `FUTEX_WAKE` on a word of `file` woke `n` sleepers: they want a CPU from now on. (They
/// may already have run and, not being counted workers, given their places back: see
/// [`give_back`].)
pub(crate) fn woke(file: &ShmFile, n: usize) {
    file.busy()
        .fetch_add(u32::try_from(n).unwrap_or(u32::MAX), Ordering::Relaxed);
}

/// Takes `n` out of the busy count `count`. Wrapping, not stopping at zero: a woken thread
/// may give its place back before its waker has counted it (the waker counts after its
/// `FUTEX_WAKE` returns), and the count must come out right once both are done. Read through
/// [`busy_now`], which takes a count below zero for zero.
pub(crate) fn give_back(count: &AtomicU32, n: u32) {
    count.fetch_sub(n, Ordering::Relaxed);
}

/// The busy count `count` now: below zero (for a moment, see [`give_back`]; or for good after
/// a spurious wake-up, which nobody counted) reads as zero.
pub(crate) fn busy_now(count: &AtomicU32) -> u32 {
    non_negative(count.load(Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_given_back_before_it_was_counted_comes_out_right() {
        let c = AtomicU32::new(1);
        // A woken thread gives its place back before its waker counts it.
        give_back(&c, 2);
        assert_eq!(busy_now(&c), 0);
        c.fetch_add(1, Ordering::Relaxed);
        assert_eq!(busy_now(&c), 0);
        c.fetch_add(1, Ordering::Relaxed);
        assert_eq!(busy_now(&c), 1);
        give_back(&c, 0);
        assert_eq!(busy_now(&c), 1);
    }
}

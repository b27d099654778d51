//! A stream worker asleep in a notify wait asks for the kernel's shortest EEVDF slice, so that
//! the record that wakes it can hand it the CPU at once (speed22, issue #25).
//!
//! Why: on one CPU, Linux's EEVDF lets a woken thread preempt the running one only if the
//! running one is not eligible (`__pick_eevdf` in `kernel/sched/fair.c`: an eligible current
//! keeps the CPU for its protected slice, `RUN_TO_PARITY`) or the woken one asks for a shorter
//! slice (`PREEMPT_SHORT`). A waiter that went to sleep alone on its CPU (a stream worker after
//! its spin) wakes with no lag, so the recorder that wakes it keeps the CPU until its post-wake
//! yield: one more return to user space and a `sched_yield` on every wake-up — traced, 313–379
//! of 420 idle wake-ups switched at the recorder's yield against 88 of 420 for a raw futex
//! pair, whose sleeper goes to sleep while its waker still wants the CPU and keeps the lag
//! (bench/README.md History, speed22). With the shortest slice the woken waiter preempts the
//! recorder inside its `FUTEX_WAKE`, as the raw pair's sleeper does.
//!
//! Which sleeps: a stream wait's whose spin ran to its limit (`waiters::AdaptiveWaiter`): no
//! other thread wanted the CPU meanwhile and the namespace had CPUs to spare, so nothing was
//! coming soon. Not one cut short by the spinners' budget or a yield that lost the CPU (a ring
//! of more processes than CPUs): there every rank would sleep short and preempt the rank that
//! woke it — measured so first, the rings of 4, 8 and 16 processes read 1.3–1.8× slower.
//!
//! The slice is set just before the futex sleep (the sleeping path, microseconds anyway) and
//! given back to the kernel's default when the worker's queue runs dry (it parks) or after the
//! thread's next wake-up call has handed the CPU over (`shm::SimWaiter`): never on the path from
//! a wake-up to the woken thread's next task, nor before a wake-up. A kernel without per-thread
//! slices (before 6.12: `sched_setattr` refuses a `sched_runtime` on `SCHED_OTHER`) is asked
//! once per process and then left alone; a `SCHED_BATCH` worker (`WorkerPolicy::Batch`) is left
//! alone (it does not preempt on wake-up anyway).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

/// The slice asked for while asleep (ns): the shortest Linux accepts (0.1 ms).
const SHORT_NS: u64 = 100_000;

thread_local! {
    /// Whether this thread runs with [`SHORT_NS`] (set by [`before_sleep`]).
    static SHORT: Cell<bool> = const { Cell::new(false) };
    /// This thread's nice value, read at its first [`before_sleep`] (`None`: not yet, or the
    /// thread is not a plain `SCHED_OTHER` one and is left alone: `i32::MIN`).
    static NICE: Cell<Option<i32>> = const { Cell::new(None) };
}

/// The kernel refused a slice once: per-thread slices are not there.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// `struct sched_attr` of `sched_setattr(2)` (`SCHED_ATTR_SIZE_VER0`, 48 bytes).
#[repr(C)]
struct SchedAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
}

/// Sets the calling `SCHED_OTHER` thread's slice (`sched_runtime`; 0: the kernel's default)
/// with its nice value `nice`; false if the kernel refused.
fn set_slice(ns: u64, nice: i32) -> bool {
    let mut attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: ns,
        deadline: 0,
        period: 0,
    };
    // SAFETY: sched_setattr(2) on the calling thread (0) with a fully initialised struct of
    // the size it names, flags 0.
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &mut attr as *mut SchedAttr, 0) };
    r == 0
}

/// This thread's nice value if it is a plain `SCHED_OTHER` thread (read once).
fn nice() -> Option<i32> {
    let n = NICE.with(Cell::get).unwrap_or_else(|| {
        // SAFETY: sched_getscheduler and getpriority on the calling thread (0) have no other
        // preconditions.
        let (policy, nice) = unsafe {
            (
                libc::sched_getscheduler(0),
                libc::getpriority(libc::PRIO_PROCESS, 0),
            )
        };
        // A `SCHED_BATCH` worker does not preempt on wake-up anyway: left alone.
        let n = if policy == libc::SCHED_OTHER {
            nice
        } else {
            i32::MIN
        };
        NICE.with(|c| c.set(Some(n)));
        n
    });
    (n != i32::MIN).then_some(n)
}

/// A stream wait whose spin ran out is about to sleep: the thread asks for the short slice.
pub(crate) fn before_sleep() {
    if UNSUPPORTED.load(Ordering::Relaxed) || SHORT.with(Cell::get) {
        return;
    }
    let Some(nice) = nice() else { return };
    if set_slice(SHORT_NS, nice) {
        SHORT.with(|s| s.set(true));
    } else {
        UNSUPPORTED.store(true, Ordering::Relaxed);
    }
}

/// The thread goes back to the kernel's default slice if it has the short one (its queue ran
/// dry, or its wake-up call has handed the CPU over).
#[inline]
pub(crate) fn restore() {
    if SHORT.with(Cell::get) {
        SHORT.with(|s| s.set(false));
        if let Some(nice) = NICE.with(Cell::get) {
            let _ = set_slice(0, nice);
        }
    }
}

/// Tests: whether this thread has the short slice.
#[cfg(test)]
pub(crate) fn is_short() -> bool {
    SHORT.with(Cell::get)
}

/// Tests: whether the kernel took a slice (or has not been asked yet).
#[cfg(test)]
pub(crate) fn supported() -> bool {
    !UNSUPPORTED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's slice as the kernel shows it (`se.slice` in
    /// `/proc/thread-self/sched`, a `CONFIG_SCHED_DEBUG` file), if it does.
    fn slice_now() -> Option<u64> {
        std::fs::read_to_string("/proc/thread-self/sched")
            .ok()?
            .lines()
            .find(|l| l.starts_with("se.slice"))?
            .split(':')
            .nth(1)?
            .trim()
            .parse()
            .ok()
    }

    /// A sleeper takes the short slice once and gives it back, to the kernel's default, once.
    #[test]
    fn a_sleeper_takes_the_short_slice_and_gives_it_back() {
        std::thread::spawn(|| {
            let before = slice_now();
            before_sleep();
            if UNSUPPORTED.load(Ordering::Relaxed) {
                // A kernel without per-thread slices: nothing changed, nothing to give back.
                assert!(!SHORT.with(Cell::get));
                restore();
                assert_eq!(slice_now(), before);
                return;
            }
            assert!(SHORT.with(Cell::get));
            if before.is_some() {
                assert_eq!(slice_now(), Some(SHORT_NS));
            }
            // Asleep again before giving it back: no second call, the same slice.
            before_sleep();
            assert!(SHORT.with(Cell::get));
            restore();
            assert!(!SHORT.with(Cell::get));
            assert_eq!(slice_now(), before);
            // Nothing to give back a second time.
            restore();
            assert_eq!(slice_now(), before);
        })
        .join()
        .unwrap();
    }
}

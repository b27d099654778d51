//! The slice guard of every stream-side yield. A yield that gave a whole scheduler slice away
//! ([`SLICE_GIVEN`]) shows a thread beside this one that keeps the CPU busy (a compiler, a busy
//! loop); under EEVDF each further yield would give it another slice, 1–12 ms, while the record
//! this wait is after has long arrived. So every stream-side yield goes through one rule,
//! [`offer_cpu`]: after such a yield the thread does not yield for [`NO_YIELD_FOR`] or until its
//! worker parks for want of work; its spins then spin to their limit and sleep, as a
//! spin-then-futex waiter does. The yields under the rule: a wait's spin (`spin::Spinner::relax`),
//! a worker's idle spin (`stream::worker`), the runner's spin (`stream::runner`), and the yield
//! after a wake-up call that woke someone (`shm::SimWaiter`: a record's, whoever makes it; a host
//! thread's guard only ever holds back its own yields, for [`NO_YIELD_FOR`] at most). (Not a
//! `synchronize`'s spin: a host thread's yield that takes long mostly gave the CPU to its own
//! stream's worker, running the tasks it waits for.)
//!
//! A module of its own, below `shm` and `spin`: both yield under it.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// A `sched_yield` that took longer than this gave the CPU to another thread (with nothing
/// else runnable it returns in about a microsecond, even in a VM).
pub(crate) const YIELD_LOST_CPU: Duration = Duration::from_micros(5);

/// A `sched_yield` that took at least this long gave a whole scheduler slice to a thread
/// that keeps its CPU busy: a peer stream worker's turn on the CPU ends sooner (it records,
/// then waits, spins a microsecond and yields or sleeps), in 5–20 µs on this project's VM.
pub(crate) const SLICE_GIVEN: Duration = Duration::from_micros(500);

/// After a yield that gave a slice away, the thread's spins do not yield for this long.
pub(crate) const NO_YIELD_FOR: Duration = Duration::from_millis(100);

/// When a thread may yield again ([`offer_cpu`]): the rule, apart from the clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct YieldGuard {
    /// No yields before this time (ns, monotonic; 0: none given away yet).
    until: u64,
}

impl YieldGuard {
    /// Whether the thread may yield at `now()` (the clock is read only after a slice was
    /// given away).
    pub(crate) fn may_yield(&self, now: impl FnOnce() -> u64) -> bool {
        self.until == 0 || now() >= self.until
    }

    /// A yield that ended at `now` took `took`.
    pub(crate) fn yielded(&mut self, now: u64, took: Duration) {
        if took >= SLICE_GIVEN {
            self.until = now.saturating_add(NO_YIELD_FOR.as_nanos() as u64).max(1);
        }
    }
}

thread_local! {
    static YIELD_GUARD: Cell<YieldGuard> = const { Cell::new(YieldGuard { until: 0 }) };
}

/// Offers this thread's CPU to others (`sched_yield`), as a stream-side spin does between its
/// checks: how long that took, or `None` without yielding if a yield of this thread gave a
/// whole slice away within the last [`NO_YIELD_FOR`] (the caller then goes on without
/// yielding).
///
/// Why: under EEVDF a `sched_yield` moves the yielder's deadline a slice later, so a thread
/// beside it that keeps the CPU busy runs until its own slice ends, and the yielder — which
/// by then has its record — waits for that. Measured on this project's 2-vCPU VM with a busy
/// loop (`while :; do :; done`, unpinned) beside the bench's cross-process round trip
/// (default settings, hosts feeding), five alternations: 0.70–1.45 ms a round trip when
/// every spinning wait and idle worker yielded, 0.5–161 µs with the guard on those two
/// (the POSIX-semaphore ping-pong read about 7 µs there); the in-process one 62 µs and 1.2 ms
/// against 0.34 and 0.35 µs. The yield after a wake-up call and the runner's were left out
/// then, and a ring of processes still paid a slice a hand-off beside two busy loops
/// (bench/README.md History, wake19): with all four under the rule, beside two busy loops,
/// rings of 2, 4, 8 and 16 processes read 0.16, 0.30, 0.56 and 1.06 ms a round against
/// 1.2, 4.8, 5.0 and 5.8 ms (yield19, 3 alternations). Without a busy thread beside, no yield
/// takes that long, and nothing changes.
///
/// A worker's park forgets it ([`forget_slices`]): a first version also guarded a
/// `synchronize`'s spin and never forgot, and in one window async copies of 64 KiB read
/// 0.08× of `memcpy` in all three of its runs against 0.77–1.32× for the build before (not
/// traced, and not seen again in three later windows; a likely path: a yield that gave the
/// CPU to a host thread busy with work of its own, such as the bench's `memcpy` baseline,
/// left a copy stream's worker or host without yields for the measured bursts that
/// followed).
pub(crate) fn offer_cpu() -> Option<Duration> {
    let mut g = YIELD_GUARD.with(Cell::get);
    if !g.may_yield(crate::sys::now_ns) {
        return None;
    }
    let t = Instant::now();
    std::thread::yield_now();
    let took = t.elapsed();
    if took >= SLICE_GIVEN {
        g.yielded(crate::sys::now_ns(), took);
        YIELD_GUARD.with(|c| c.set(g));
    }
    Some(took)
}

/// Forgets a slice this thread's yields gave away: its next spin yields again (a stream
/// worker parking for want of work calls this; see `stream::worker`).
pub(crate) fn forget_slices() {
    YIELD_GUARD.with(|c| c.set(YieldGuard::default()));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A yield that gave a slice away stops yields for `NO_YIELD_FOR`; shorter ones do not,
    /// and the clock is not read while none has.
    #[test]
    fn a_slice_given_away_stops_yields_for_a_while() {
        const MS: u64 = 1_000_000;
        let mut g = YieldGuard::default();
        assert!(g.may_yield(|| panic!("read the clock with no slice given away")));
        g.yielded(10 * MS, YIELD_LOST_CPU);
        g.yielded(10 * MS, SLICE_GIVEN - Duration::from_nanos(1));
        assert_eq!(
            g,
            YieldGuard::default(),
            "a peer's short turn stopped yields"
        );
        g.yielded(10 * MS, SLICE_GIVEN);
        let until = 10 * MS + NO_YIELD_FOR.as_nanos() as u64;
        assert!(!g.may_yield(|| 10 * MS));
        assert!(!g.may_yield(|| until - 1));
        assert!(g.may_yield(|| until));
        // A later slice given away starts the period afresh.
        g.yielded(until + MS, Duration::from_millis(3));
        assert!(!g.may_yield(|| until + 2 * MS));
    }
}

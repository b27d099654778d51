//! How long a stream's wait may spin, given the load: a waiter spins only while a CPU is free
//! for it.
//!
//! A wait spins before it sleeps, so that a record arriving within microseconds costs no
//! futex wake-up. That pays only while the thread that will record runs on another CPU. With
//! more busy stream workers than CPUs (a ring of sixteen processes on two CPUs), a spinning
//! waiter takes the CPU from the very rank that would record, and the protocol ends up slower
//! than on POSIX semaphores. Three signals stop that:
//!
//! - **A namespace-wide count of spinners** in the shared file's header. A wait that has spun
//!   for its first microsecond (most hand-offs between two busy streams end sooner, and never
//!   touch the count) joins the count; if that makes more spinners than the *budget* — the
//!   CPUs this process may use, or [`ENV_SPIN_BUDGET`] — it stops spinning and sleeps. It
//!   leaves the count when it stops spinning (the record came, it sleeps, or it ends). Each
//!   process keeps its part of the count in its process-table entry, so that a process
//!   killed while one of its waits is counted does not leave its place in the count for good
//!   (`shm::counts`, as for the busy count below).
//! - **A yield that lost the CPU.** Past its first microsecond a spinning waiter yields the
//!   CPU between checks; a `sched_yield` that takes longer than [`YIELD_LOST_CPU`] ran
//!   another thread meanwhile, so this CPU is wanted: the waiter sleeps.
//! - **A namespace-wide count of busy stream workers** (kept by `shm::busy`): workers that have
//!   waited for a record and are not asleep now (spinning, or running their next tasks), plus
//!   threads a record has woken that have not run yet. A spinner past its first microsecond
//!   stops and sleeps while that count exceeds the budget: then some thread that wants a CPU
//!   has none, and it may well be the one that will record. Why the count of spinners is not
//!   enough: in a ring of four processes on two CPUs, a rank's worker spun for the data its
//!   neighbour would send three hops later while the rank whose turn it was, just woken on
//!   that CPU, waited for it; a `sched_yield` does not hand the CPU over there (under EEVDF a
//!   thread woken with negative lag is not eligible, and the yielder runs again), so the
//!   yield took no time, nobody counted as lost, and the woken rank waited about 16 µs (a
//!   `perf sched` trace: wake-to-run 15 µs median with spinners beside the woken, 2–3 µs
//!   without). How the count is kept, at no cost outside the sleeping path: `shm::busy`.
//!
//! A spinning waiter's yields are under the slice guard of every stream-side yield
//! ([`crate::yielding`]): beside a thread that keeps the CPU busy they stop for a while, and
//! the spin runs to its limit and sleeps.
//!
//! `ACL_NOTIFY_SIM_SPIN_BUDGET=0` never spins: every wait that finds no record sleeps at once,
//! and stream workers sleep as soon as their queue is empty.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::shm::{Share, busy_now, non_negative};
use crate::stream::allowed_cpus;
use crate::yielding::{YIELD_LOST_CPU, offer_cpu};

/// Environment variable: how many waiters of a namespace may spin at once (past their first
/// microsecond), and how many busy stream workers it may have while they do (see the module
/// docs); `0` never spins. The default is the number of CPUs this process may use.
pub const ENV_SPIN_BUDGET: &str = "ACL_NOTIFY_SIM_SPIN_BUDGET";

/// The budget: from [`ENV_SPIN_BUDGET`] if it is set (and valid), else the CPUs this process
/// may use. Worked out on first use and kept; threads that race for it each work it out (no
/// `OnceLock`: a fork while one is initialising would leave the child's blocked; see the
/// `fork` module).
pub(crate) fn budget() -> u32 {
    /// `u32::MAX`: not worked out yet.
    static BUDGET: AtomicU32 = AtomicU32::new(u32::MAX);
    match BUDGET.load(Ordering::Relaxed) {
        u32::MAX => {
            let b = std::env::var(ENV_SPIN_BUDGET)
                .ok()
                .and_then(|v| parse(&v).ok())
                .unwrap_or_else(default_budget)
                .min(u32::MAX - 1);
            BUDGET.store(b, Ordering::Relaxed);
            b
        }
        b => b,
    }
}

/// The CPUs this process may use (at least 1).
fn default_budget() -> u32 {
    u32::try_from(allowed_cpus().len())
        .unwrap_or(u32::MAX)
        .max(1)
}

/// Whether `busy` (a file's count of busy stream workers) exceeds the budget: some thread of
/// the namespace that wants a CPU has none.
fn crowded(busy: &AtomicU32) -> bool {
    busy_now(busy) > budget()
}

/// Parses a budget: a whole number of waiters.
pub(crate) fn parse(v: &str) -> Result<u32, String> {
    v.trim()
        .parse::<u32>()
        .map_err(|_| format!("{ENV_SPIN_BUDGET}={v:?} is not a whole number of waiters"))
}

/// Checks [`ENV_SPIN_BUDGET`] when a `Sim` is opened from the environment, so that a bad
/// value is an error there rather than silently the default.
pub(crate) fn check_env() -> Result<(), String> {
    match std::env::var(ENV_SPIN_BUDGET) {
        Ok(v) => parse(&v).map(drop),
        Err(_) => Ok(()),
    }
}

/// One wait's place in the count of spinners (see the module docs). Costs a wait nothing
/// until it has spun for a microsecond: the count is looked up then.
pub(crate) struct Spinner<'a> {
    /// The count and this process's part of it, once this wait is in it.
    counted: Cell<Option<Share<'a>>>,
    /// Told to stop spinning (over budget, or a yield lost the CPU).
    stopped: Cell<bool>,
    /// A yield of this wait gave the CPU to another thread.
    lost_cpu: Cell<bool>,
}

impl<'a> Spinner<'a> {
    /// A wait that has not spun yet.
    pub(crate) fn new() -> Self {
        Spinner {
            counted: Cell::new(None),
            stopped: Cell::new(false),
            lost_cpu: Cell::new(false),
        }
    }

    /// Whether the wait may spin at all (the budget is not 0).
    pub(crate) fn may_spin() -> bool {
        budget() > 0
    }

    /// Called now and then by a wait past its first microsecond of spinning: stops if `busy`,
    /// the namespace's count of busy stream workers, exceeds the budget; joins `count`, the
    /// namespace's count of spinners and this process's part of it (first call), then yields
    /// the CPU once. Afterwards [`keep_spinning`](Self::keep_spinning) says whether to go on.
    pub(crate) fn relax(&self, count: impl FnOnce() -> Share<'a>, busy: &AtomicU32) {
        if self.stopped.get() {
            return;
        }
        if crowded(busy) {
            self.stop();
            return;
        }
        if self.counted.get().is_none() {
            let count = count();
            // The count is advice (a spinner more or less for a moment is harmless); what
            // must hold is that every place is given back, which `stop` ensures (and, for a
            // process killed meanwhile, `shm::counts`). Read as signed: below zero is none.
            if non_negative(count.add(1)) >= budget() {
                count.sub(1);
                self.stopped.set(true);
                return;
            }
            self.counted.set(Some(count));
        }
        if offer_cpu().is_some_and(|took| took >= YIELD_LOST_CPU) {
            self.lost_cpu.set(true);
            self.stop();
        }
    }

    /// Whether a yield of this wait gave the CPU to another thread.
    pub(crate) fn lost_cpu(&self) -> bool {
        self.lost_cpu.get()
    }

    /// Whether the wait should go on spinning.
    pub(crate) fn keep_spinning(&self) -> bool {
        !self.stopped.get()
    }

    /// Stops spinning for good (the wait sleeps or ends): leaves the count.
    pub(crate) fn stop(&self) {
        self.stopped.set(true);
        if let Some(count) = self.counted.take() {
            count.sub(1);
        }
    }
}

impl Drop for Spinner<'_> {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_budget_waiters_stop_and_every_spinner_leaves_the_count() {
        let count = AtomicU32::new(0);
        let part = AtomicU32::new(0);
        let share = || Share {
            total: &count,
            part: Some(&part),
        };
        let counts = || (count.load(Ordering::Relaxed), part.load(Ordering::Relaxed));
        let idle = AtomicU32::new(0);
        let b = budget();
        // Fill the budget with other waiters' places.
        count.store(b, Ordering::Relaxed);
        let s = Spinner::new();
        s.relax(share, &idle);
        assert!(!s.keep_spinning(), "spun past a full budget");
        assert_eq!(counts(), (b, 0), "left a place taken");
        // With room, a waiter joins (the count and this process's part), and leaves both when
        // it stops or is dropped.
        count.store(0, Ordering::Relaxed);
        let s = Spinner::new();
        s.relax(share, &idle);
        if b > 0 {
            let n = u32::from(s.keep_spinning());
            assert_eq!(counts(), (n, n));
        }
        drop(s);
        assert_eq!(counts(), (0, 0));
        let s = Spinner::new();
        s.relax(share, &idle);
        s.stop();
        s.stop();
        assert_eq!(counts(), (0, 0));
        assert!(!s.keep_spinning());
        // A count below zero (lowered by a recount while a place was on its way into its
        // part, see `shm::counts`) is no spinner, not more than any budget.
        if b > 0 {
            count.store(u32::MAX, Ordering::Relaxed);
            let s = Spinner::new();
            s.relax(share, &idle);
            if !s.lost_cpu() {
                assert!(s.keep_spinning(), "a count below zero stopped a spinner");
            }
            drop(s);
            assert_eq!(counts(), (u32::MAX, 0));
            count.store(0, Ordering::Relaxed);
        }
        // More busy stream workers than the budget: a spinner stops without joining the count.
        if b > 0 && b < u32::MAX - 1 {
            let crowded = AtomicU32::new(b + 1);
            let s = Spinner::new();
            s.relax(share, &crowded);
            assert!(!s.keep_spinning(), "spun with {} busy workers", b + 1);
            assert_eq!(counts(), (0, 0));
            assert!(!s.lost_cpu());
        }
    }

    #[test]
    fn the_budget_parses_whole_numbers_only() {
        assert_eq!(parse("0"), Ok(0));
        assert_eq!(parse(" 3 "), Ok(3));
        assert!(parse("-1").is_err());
        assert!(parse("lots").unwrap_err().contains(ENV_SPIN_BUDGET));
    }
}

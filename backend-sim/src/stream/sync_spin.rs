//! How long a `synchronize` spins before it sleeps: for as long as the stream keeps finishing
//! tasks quickly, up to a bound.
//!
//! A synchronize that sleeps is woken by the worker's last retire: a futex wake-up, which on
//! this project's 2-vCPU KVM machine costs 5–35 µs when the sleeper's vCPU has gone idle —
//! and the worker, having run dry while the host slept, has often parked by the time the host
//! queues its next burst, which costs a second wake-up. A fixed spin of the stream's `spin`
//! (10 µs by default) covers a handful of small tasks only: 64 queued copies of 64 KiB take
//! about 64 µs, so the host slept in every burst's synchronize and the two wake-ups cost a
//! third of the burst (measured: 0.54–0.64× of `memcpy` with the sleep, 1.08–1.19× with the
//! host polling instead).
//!
//! So the spin window restarts whenever the worker finishes a task: a stream that completes
//! a task at least every `spin` keeps its synchronizing thread awake, one whose task runs
//! longer (a wait, a host function, a big copy) lets it sleep after `spin` as before. The
//! whole spin is bounded by [`SYNC_SPIN_CAP`]: past it, one wake-up is at most a few per cent
//! of the time waited, not worth a CPU. The spin yields the CPU between checks like every
//! spin of the engine, and stops as soon as a yield shows that another thread wants this CPU
//! ([`spin_until`]), so on a busy machine it gives way; a `spin` of zero (a spin budget of 0)
//! never spins.

use std::time::{Duration, Instant};

use super::worker::spin_until;

/// The longest a `synchronize` spins in all, however often the stream makes progress.
pub(super) const SYNC_SPIN_CAP: Duration = Duration::from_millis(1);

/// The shortest spin window of a `synchronize` for a while ([`AFTER_MOVE`]) after the
/// stream's worker moved to another CPU (unless the stream may not spin at all).
///
/// Why: a copy's worker that finds itself on its host's CPU moves to another one
/// ([`crate::placement`]), and a vCPU of this project's VM that has gone idle takes 20–35 µs
/// to run the thread moved onto it. A synchronize that saw no task finish for the stream's
/// `spin` (10 µs) meanwhile went to sleep, and the worker's wake-up when the burst was done
/// put it on the worker's new CPU (the kernel wakes a thread beside its waker): host and
/// worker were together again, the next move a gap later did the same, and a probe (8
/// samples of 40 bursts of 64 copies of 64 KiB, the worker parked between samples) found
/// them together in 12–15 of each sample's 40 bursts, 52 µs a burst; with this window, in
/// 0–1, 42–46 µs a burst at a time when lines crossed slowly (34–35 µs in fast minutes).
///
/// Only after a move: with it always on, a synchronize spun 50 µs at a time beside a busy
/// loop on the other CPU, and bursts collapsed (64 KiB copies at 0.01–0.15× of `memcpy`,
/// against 0.4–0.7× with the 10 µs window in the same build, two alternations).
pub(super) const SYNC_MIN_WINDOW: Duration = Duration::from_micros(50);

/// How long after a move of the worker a `synchronize` spins [`SYNC_MIN_WINDOW`] at least.
pub(super) const AFTER_MOVE: Duration = Duration::from_millis(1);

/// The spin window of a synchronize on a stream whose spin is `spin`, whose worker moved at
/// `moved_at` (ns, 0: never), at `now`.
pub(super) fn window(spin: Duration, moved_at: u64, now: u64) -> Duration {
    if spin.is_zero()
        || moved_at == 0
        || now.saturating_sub(moved_at) > AFTER_MOVE.as_nanos() as u64
    {
        spin
    } else {
        spin.max(SYNC_MIN_WINDOW)
    }
}

/// Spins until `done()`; the window `spin()` (asked at each start) restarts each time
/// `progress()` (a count of finished tasks) moves, and the spin ends after `cap` in all.
/// True if `done()` held.
pub(super) fn spin_while_progress(
    spin: impl Fn() -> Duration,
    cap: Duration,
    done: impl FnMut() -> bool,
    progress: impl Fn() -> u64,
) -> bool {
    if spin().is_zero() {
        let mut done = done;
        return done();
    }
    restarting(cap, done, progress, |until| spin_until(spin(), until))
}

/// The restarts of [`spin_while_progress`], around `window`, one spin window (true if its
/// condition held before the window ran out).
fn restarting(
    cap: Duration,
    mut done: impl FnMut() -> bool,
    progress: impl Fn() -> u64,
    mut window: impl FnMut(&mut dyn FnMut() -> bool) -> bool,
) -> bool {
    let start = Instant::now();
    loop {
        let seen = progress();
        let moved = window(&mut || done() || progress() != seen);
        if done() {
            return true;
        }
        if !moved || start.elapsed() >= cap {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window of `len` that only spins (the engine's also yields, and gives up early on a
    /// busy machine, which would make these timings depend on the load).
    fn plain(len: Duration) -> impl FnMut(&mut dyn FnMut() -> bool) -> bool {
        move |until| {
            let t = Instant::now();
            while t.elapsed() < len {
                if until() {
                    return true;
                }
                std::hint::spin_loop();
            }
            until()
        }
    }

    /// [`plain`]`(len)` that counts its windows in `n`, and fails the test once 60 s passed
    /// since `t`: a hang guard only (a spin that nothing ends would run for ever), never a
    /// measure of speed (a loaded machine preempts a spin for as long as it likes).
    fn counted(
        len: Duration,
        n: &std::cell::Cell<u32>,
        t: Instant,
    ) -> impl FnMut(&mut dyn FnMut() -> bool) -> bool + '_ {
        let mut window = plain(len);
        move |until| {
            n.set(n.get() + 1);
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "hang guard: still spinning after {} windows",
                n.get()
            );
            window(until)
        }
    }

    /// A task finished every 200 µs keeps a 1 ms window spinning until `done` at 3 ms; the
    /// cap ends the spin even while tasks keep finishing; without progress it ends after one
    /// window. (The ends are told by windows and by lower bounds; until 2026-12-07 also by
    /// an upper bound of 500 ms, which a preempted spin could pass.)
    #[test]
    fn the_window_restarts_on_progress_and_the_cap_ends_it() {
        let ms = Duration::from_millis;
        let t = Instant::now();
        let progress = || (t.elapsed().as_micros() / 200) as u64;
        let done = || t.elapsed() >= ms(3);
        assert!(restarting(ms(1000), done, progress, plain(ms(1))));
        assert!(t.elapsed() >= ms(3));

        // Never done, progress for ever: only the cap ends it (else the hang guard).
        let t = Instant::now();
        let progress = || (t.elapsed().as_micros() / 200) as u64;
        let windows = std::cell::Cell::new(0);
        assert!(!restarting(
            ms(5),
            || false,
            progress,
            counted(ms(1), &windows, t)
        ));
        let took = t.elapsed();
        assert!(took >= ms(5), "{took:?}, {} windows", windows.get());

        // No progress: one window, not windows until the 1 s cap.
        let t = Instant::now();
        let windows = std::cell::Cell::new(0);
        assert!(!restarting(
            ms(1000),
            || false,
            || 0,
            counted(ms(1), &windows, t)
        ));
        let took = t.elapsed();
        assert_eq!(windows.get(), 1, "after {took:?}");
        assert!(took >= ms(1), "{took:?}");
    }

    /// The window is at least `SYNC_MIN_WINDOW` for `AFTER_MOVE` after a move, the stream's
    /// own spin otherwise, and zero stays zero (no spinning).
    #[test]
    fn the_window_is_longer_only_after_a_move() {
        let us = Duration::from_micros;
        let t = 10_000_000_000;
        assert_eq!(window(us(10), 0, t), us(10));
        assert_eq!(window(us(10), t - 500_000, t), SYNC_MIN_WINDOW);
        assert_eq!(window(us(10), t - 2_000_000, t), us(10));
        assert_eq!(window(Duration::ZERO, t, t), Duration::ZERO);
        assert_eq!(window(us(1000), t, t), us(1000));
    }

    /// A spin of zero only looks.
    #[test]
    fn no_spin_looks_once() {
        let mut looks = 0;
        let r = spin_while_progress(
            || Duration::ZERO,
            SYNC_SPIN_CAP,
            || {
                looks += 1;
                false
            },
            || 0,
        );
        assert!(!r);
        assert_eq!(looks, 1);
    }
}

//! How every wait of the device-side tables blocks: the [`Waiter`] trait through which a
//! platform (AICPU firmware, the simulator's shared futex) sleeps and wakes on a 32-bit word,
//! what a wait returns ([`WaitOutcome`], [`TableError`]), its arguments ([`WaitArgs`]), and the
//! one sleep loop (`wait_loop`) that the notify queue and the count notifies both run: look
//! at the word, stop at the deadline or on cancellation, sleep in chunks of at most [`CHUNK`].

use crate::sync::AtomicU32;
use core::time::Duration;

/// Longest single sleep inside a wait: deadlines, cancellation and dead-head checks are
/// re-evaluated at least this often even if nobody wakes the sleeper.
pub const CHUNK: Duration = Duration::from_millis(50);
/// How long a waiter that has reached the head of the queue spins on the flag before it sleeps
/// in the kernel. Longer than a wake-up from sleep takes on a typical VM (5–10 µs): with a
/// shorter spin, two streams bouncing records stay in a regime where each one has gone to
/// sleep by the time the other answers, and every hand-off costs a wake-up.
pub const SPIN: Duration = Duration::from_micros(10);
/// The longest a platform may make that spin ([`Waiter::spin_limit`]); longer limits are cut
/// to this, so a waiter's spin stays bounded whatever the platform asks.
pub const MAX_SPIN: Duration = Duration::from_micros(50);
/// How long the spin at the head of the queue is a tight loop before each of its clock checks
/// also calls [`Waiter::relax`].
pub const PURE_SPIN: Duration = Duration::from_micros(1);

/// How a platform blocks and wakes on a 32-bit word shared with other processes.
///
/// On Linux: `FUTEX_WAIT`/`FUTEX_WAKE` without `FUTEX_PRIVATE_FLAG` on a `MAP_SHARED` mapping;
/// on firmware, whatever the AICPU offers (even a bounded spin).
pub trait Waiter {
    /// Blocks while `word == expected`, for at most `timeout` (`None`: no limit). May return
    /// early or spuriously; callers re-check.
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>);

    /// Wakes up to `n` threads (of any process) blocked in [`wait`](Self::wait) on `word`;
    /// `u32::MAX` wakes all.
    fn wake(&self, word: &AtomicU32, n: u32);

    /// [`wait`](Self::wait) for a word that only threads of this process will wake, through
    /// [`wake_private`](Self::wake_private): a notify no other process can reach yet (see
    /// the table's `share`). Linux: `FUTEX_PRIVATE_FLAG`, whose wake-up skips the kernel's
    /// lookup of the shared mapping (0.2–0.6 µs of a 3 µs wake-up on the project's VM). A
    /// platform overrides both private calls or neither: the defaults are the shared ones, so
    /// a private sleeper and a private waker always meet.
    fn wait_private(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.wait(word, expected, timeout);
    }

    /// Wakes up to `n` threads of this process blocked in
    /// [`wait_private`](Self::wait_private) on `word` (none of another process).
    fn wake_private(&self, word: &AtomicU32, n: u32) {
        self.wake(word, n);
    }

    /// A monotonic clock in nanoseconds.
    fn now_ns(&self) -> u64;

    /// A cheap, possibly coarse reading of the same clock, for diagnostics only (the time of
    /// the last record). The default is [`now_ns`](Self::now_ns); a platform with a cheaper
    /// low-resolution clock (Linux's `CLOCK_MONOTONIC_COARSE`) returns that, so a record pays
    /// for no precise clock read.
    fn stamp_ns(&self) -> u64 {
        self.now_ns()
    }

    /// Called now and then by a waiter that has spun for [`PURE_SPIN`] without seeing a record
    /// (before it gives up and sleeps): a platform where the recorder may be waiting for this
    /// very CPU offers it (Linux: `sched_yield`, which returns at once when nothing else is
    /// runnable). The default does nothing.
    fn relax(&self) {}

    /// Asked after each [`relax`](Self::relax): whether the waiter should go on spinning. A
    /// platform that sees its CPUs are wanted (more spinners than CPUs, or a yield that gave
    /// the CPU away) says no, and the waiter sleeps at once. The default says yes.
    fn keep_spinning(&self) -> bool {
        true
    }

    /// How long a waiter at the head of the queue spins before it sleeps (at most
    /// [`MAX_SPIN`]; longer is cut to it). The default is [`SPIN`]. A platform that sees the
    /// records a waiter gets arrive just after it went to sleep (a wake-up slower than the
    /// spin, so two waiters handing records back and forth keep putting each other to sleep)
    /// may spin a waiter longer.
    fn spin_limit(&self) -> Duration {
        SPIN
    }

    /// Whether the process in slot `proc` of the platform's process table is still alive.
    /// Waiters stuck behind a ticket of a dead process cancel it. The default says yes
    /// (a platform without process death).
    fn proc_alive(&self, proc: u32) -> bool {
        let _ = proc;
        true
    }
}

/// How a wait ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WaitOutcome {
    /// The wait was satisfied: a notify's record was consumed (the flag is reset), or a count
    /// notify's condition held (and the count was cleared if the wait asked for it).
    Consumed,
    /// The timeout expired first; a notify waiter's ticket was given up, nothing was consumed.
    TimedOut,
    /// The caller's cancel check fired; a notify waiter's ticket was given up, nothing was
    /// consumed.
    Cancelled,
}

/// A table's memory broke one of its invariants (another process corrupted it), or a wait
/// found its slot retired under it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TableError {
    /// Counters, ring entries or the slot's state are inconsistent (or the slot moved on to
    /// another incarnation); it cannot be used safely.
    Corrupt,
    /// A process index out of range was passed or found.
    BadProc,
}

/// Arguments of one wait.
#[derive(Clone, Copy)]
pub struct WaitArgs<'a> {
    /// The waiting process's slot in the platform's process table
    /// (`< `[`MAX_PROCS`](crate::slot::MAX_PROCS)): a notify waiter's ticket carries it, so
    /// that a dead waiter's tickets can be cancelled. Count waits take no ticket.
    pub proc: u32,
    /// How long to wait (`None`: until satisfied or cancelled).
    pub timeout: Option<Duration>,
    /// Polled at least every [`CHUNK`] (and after every wake-up): `true` abandons the wait.
    /// A platform that wants a prompt cancel also wakes the slot's sleepers
    /// ([`NotifySync::wake_all`](crate::table::NotifySync::wake_all),
    /// [`CntSync::wake_all`](crate::cnt::CntSync::wake_all)).
    pub cancel: &'a dyn Fn() -> bool,
}

impl core::fmt::Debug for WaitArgs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WaitArgs")
            .field("proc", &self.proc)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Deadline bookkeeping of one wait.
pub(crate) struct Clock<'a, W: Waiter> {
    w: &'a W,
    deadline: Option<u64>,
}

impl<'a, W: Waiter> Clock<'a, W> {
    /// A clock whose deadline is `timeout` from now (`None`: no deadline).
    pub(crate) fn start(w: &'a W, timeout: Option<Duration>) -> Self {
        Clock {
            w,
            deadline: timeout.map(|d| {
                w.now_ns()
                    .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64)
            }),
        }
    }

    pub(crate) fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| self.w.now_ns() >= d)
    }

    /// The next sleep: at most `CHUNK`, at most the time left.
    pub(crate) fn chunk(&self) -> Duration {
        match self.deadline {
            None => CHUNK,
            Some(d) => {
                let left = Duration::from_nanos(d.saturating_sub(self.w.now_ns()));
                if left < CHUNK { left } else { CHUNK }
            }
        }
    }

    /// Why the wait should end now, if it should: the deadline passed, or `cancel` fired.
    #[inline]
    pub(crate) fn stop(&self, cancel: &dyn Fn() -> bool) -> Option<WaitOutcome> {
        if self.expired() {
            Some(WaitOutcome::TimedOut)
        } else if cancel() {
            Some(WaitOutcome::Cancelled)
        } else {
            None
        }
    }
}

/// What one look at a waited-for condition found (see `wait_loop`).
pub(crate) enum Look<'a, T> {
    /// The wait is over with this result.
    Done(T),
    /// Look again at once (a compare-and-swap lost a race).
    Again,
    /// Not yet: sleep while `word` still holds the value (read before the look, so that a
    /// change after it ends the sleep at once).
    Sleep(&'a AtomicU32, u32),
    /// [`Sleep`](Self::Sleep), through [`Waiter::wait_private`]: only a thread of this process
    /// will wake the sleeper.
    SleepPrivate(&'a AtomicU32, u32),
}

/// The one sleep loop of every wait. Until `look` ends the wait: after a look that finds
/// nothing yet, `stop` makes the result if the deadline passed or `cancel` fired; otherwise
/// `arm` readies the sleep (`Err(Some(t))` ends the wait with `t`, `Err(None)` looks again),
/// and the thread sleeps on the word (privately if the look said so) for at most a [`CHUNK`] (or the time left), so that
/// deadline and cancellation are seen even if nobody wakes it.
#[inline(always)]
pub(crate) fn wait_loop<'a, W: Waiter, T>(
    w: &W,
    clock: &Clock<'_, W>,
    cancel: &dyn Fn() -> bool,
    mut look: impl FnMut() -> Look<'a, T>,
    stop: impl FnOnce(WaitOutcome) -> T,
    mut arm: impl FnMut(u32) -> Result<(), Option<T>>,
) -> T {
    loop {
        let (word, expected, private) = match look() {
            Look::Done(t) => return t,
            Look::Again => continue,
            Look::Sleep(word, expected) => (word, expected, false),
            Look::SleepPrivate(word, expected) => (word, expected, true),
        };
        if let Some(outcome) = clock.stop(cancel) {
            return stop(outcome);
        }
        match arm(expected) {
            Ok(()) if private => w.wait_private(word, expected, Some(clock.chunk())),
            Ok(()) => w.wait(word, expected, Some(clock.chunk())),
            Err(Some(t)) => return t,
            Err(None) => {}
        }
    }
}

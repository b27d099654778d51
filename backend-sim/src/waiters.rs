//! The hot path of a stream's records and waits: the adaptive spin of a stream wait, the
//! stamped waiter of records, the prefetch of the flag line, the out-of-line slow wait and the
//! errors a wait ends with.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

use acl_notify_core::Error;
use acl_notify_core::table::{self, WaitArgs, WaitOutcome, Waiter};

use crate::blocked::Blocked;
use crate::error::SimError;
use crate::error::err;
use crate::pin::StreamPin;
use crate::shm::{ShmFile, SimWaiter, SlotRef};
use crate::stream::TaskCtx;
use crate::{diag, spin, waitgraph};

/// Describes why a wait ended without a record: notify, device, timeout, owner, whitelist
/// (with liveness), last record, holders.
pub(crate) fn describe_wait(r: &SlotRef, timeout: Option<Duration>, what: &str) -> String {
    let slot = r.slot();
    let file = r.file();
    let mut s = String::new();
    let _ = write!(
        s,
        "{what} on notify {} (device {}, server {}) ",
        r.id(),
        r.device(),
        file.server()
    );
    match timeout {
        Some(t) => {
            let _ = write!(s, "got no record within {} s", t.as_secs_f64());
        }
        None => s.push_str("got no record"),
    }
    s.push_str(&diag::notify_facts(file, r.device(), r.id(), slot));
    s
}

pub(crate) fn wait_outcome_error(
    outcome: Result<WaitOutcome, acl_notify_core::table::TableError>,
    r: &SlotRef,
    timeout: Option<Duration>,
    timeout_kind: Error,
    what: &str,
) -> Result<(), SimError> {
    // A file cut short under us ends waits (see the cancel checks) and voids their outcome;
    // so does a slot that stopped being ours.
    r.file().intact()?;
    if !matches!(outcome, Ok(WaitOutcome::Consumed)) {
        r.live()?;
    }
    match outcome {
        Ok(WaitOutcome::Consumed) => Ok(()),
        Ok(WaitOutcome::TimedOut) => Err(err(timeout_kind, describe_wait(r, timeout, what))),
        Ok(WaitOutcome::Cancelled) => Err(err(
            timeout_kind,
            format!(
                "{what} on notify {} cancelled: its stream was destroyed with tasks discarded",
                r.id()
            ),
        )),
        Err(e) => Err(err(
            Error::DrvInternalError,
            format!(
                "notify {} of device {} in {}: the shared notify table is corrupt ({e:?})",
                r.id(),
                r.device(),
                r.file().path().display()
            ),
        )),
    }
}

/// The waiter of a stream's wait: the file's [`SimWaiter`] with a spin that adapts, per
/// stream, to how the stream's last wait went: the longest spin ([`table::MAX_SPIN`]) unless
/// that wait slept longer than it (nothing was coming), then the table's ([`table::SPIN`]).
///
/// Why: on a machine where waking a sleeping thread takes longer than the table's spin
/// ([`table::SPIN`]; KVM guests take 8–15 µs, a halted vCPU on this project's VM 20–35 µs),
/// two streams handing records back and forth can settle into putting each other to sleep:
/// each one's record wakes the other, which by then has given up spinning, so every hand-off
/// costs a wake-up. See [`next_spin`] for why the spin stays long.
pub(crate) struct AdaptiveWaiter<'a> {
    pub(crate) inner: SimWaiter<'a>,
    /// Its place among the namespace's spinners ([`spin`]).
    pub(crate) spinner: spin::Spinner<'a>,
    /// This wait's spin, in nanoseconds.
    pub(crate) spin: u64,
    /// When this wait first slept (0: it has not).
    pub(crate) slept_at: Cell<u64>,
}

/// [`table::SPIN`] and [`table::MAX_SPIN`] in nanoseconds.
pub(crate) const SPIN_NS: u64 = table::SPIN.as_nanos() as u64;
pub(crate) const MAX_SPIN_NS: u64 = table::MAX_SPIN.as_nanos() as u64;

impl<'a> AdaptiveWaiter<'a> {
    /// `hint`: the stream's spin hint in nanoseconds (0: none yet, the longest spin).
    pub(crate) fn new(inner: SimWaiter<'a>, hint: u64) -> Self {
        AdaptiveWaiter {
            spinner: spin::Spinner::new(),
            inner,
            spin: match hint {
                0 => MAX_SPIN_NS,
                h => h.clamp(SPIN_NS, MAX_SPIN_NS),
            },
            slept_at: Cell::new(0),
        }
    }

    /// Notes the wait's first sleep and stops counting it as spinning. A wait whose spin ran
    /// to its limit (not cut short: no other thread wanted the CPU, the namespace was not
    /// crowded) sleeps with the kernel's shortest slice, so that the record that wakes it
    /// hands it the CPU at once ([`crate::wake_slice`]).
    fn going_to_sleep(&self) {
        if self.slept_at.get() == 0 {
            self.slept_at.set(self.inner.now_ns().max(1));
        }
        if self.spinner.keep_spinning() && self.spin_limit() > Duration::ZERO {
            crate::wake_slice::before_sleep();
        }
        self.spinner.stop();
    }

    /// The spin for the stream's next wait, after this one (nanoseconds).
    pub(crate) fn next_spin(&self) -> u64 {
        let slept_for = match self.slept_at.get() {
            0 => None,
            at => Some(self.inner.now_ns().saturating_sub(at)),
        };
        next_spin(slept_for)
    }
}

/// The adaptation rule of [`AdaptiveWaiter`], in nanoseconds: `slept_for` is how long the last
/// wait slept (from its first sleep to its end), if it slept. A wait that found its record
/// while spinning, or slept no longer than the longest spin (the record was on its way), is
/// followed by the longest spin; one that slept longer (nothing was coming: spinning would
/// not have helped, and would cost a CPU that long in every such wait) by the table's.
///
/// Why not come back down to the table's spin after waits that found their record spinning
/// (until 2026-12-06 by 1/256 of the spin at each, from 50 µs to 10 µs in about 400 waits):
/// a spin limit costs CPU only in the waits that reach it, and the spinning itself gives its
/// CPU up to any thread that wants it ([`spin`]: the spinners' budget and the yields). Where
/// two processes' hosts feed their streams in chunks (the bench's fed cross-process round
/// trip), the host function that wakes a host now and then finds that host woken on its
/// worker's CPU and preempting the worker for 28–32 µs (a probe: one involuntary switch in
/// each such task); every 250–400 µs the peer's wait, its spin decayed back to 10–18 µs, went to
/// sleep, its wake-up on its halted vCPU delayed its reply past the first worker's spin in
/// turn, and that one slept too: slow samples of 650–1,000 ns a round trip carried 25–35 such
/// sleeps a side, 2.1–2.5 ms of an 8,000-round-trip sample (bench/README.md History, xwake16).
/// With the longest spin kept, alternated with the decaying one in two quiet windows, that
/// case read 619 → 416 and 499 → 411 ns (medians of 55 samples each; faster in 9 of 10 runs).
pub(crate) fn next_spin(slept_for: Option<u64>) -> u64 {
    match slept_for {
        Some(d) if d > MAX_SPIN_NS => SPIN_NS,
        _ => MAX_SPIN_NS,
    }
}

impl Waiter for AdaptiveWaiter<'_> {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.going_to_sleep();
        self.inner.wait(word, expected, timeout);
    }
    fn wait_private(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.going_to_sleep();
        self.inner.wait_private(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.inner.wake(word, n);
    }
    fn wake_private(&self, word: &AtomicU32, n: u32) {
        self.inner.wake_private(word, n);
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn stamp_ns(&self) -> u64 {
        self.inner.stamp_ns()
    }
    fn relax(&self) {
        self.spinner
            .relax(|| self.inner.spinners(), self.inner.busy());
    }
    fn keep_spinning(&self) -> bool {
        self.spinner.keep_spinning()
    }
    fn spin_limit(&self) -> Duration {
        if spin::Spinner::may_spin() {
            Duration::from_nanos(self.spin)
        } else {
            Duration::ZERO
        }
    }
    fn proc_alive(&self, proc: u32) -> bool {
        self.inner.proc_alive(proc)
    }
}

/// The file's [`SimWaiter`] for a stream's record: its time stamp is the stream's coarse clock
/// reading ([`TaskCtx::coarse_now_ns`]), taken once per run of quick jobs rather than once
/// per record.
pub(crate) struct StampedWaiter<'a> {
    pub(crate) inner: SimWaiter<'a>,
    pub(crate) ctx: &'a TaskCtx,
}

impl Waiter for StampedWaiter<'_> {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.inner.wait(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.inner.wake(word, n);
    }
    fn wait_private(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.inner.wait_private(word, expected, timeout);
    }
    fn wake_private(&self, word: &AtomicU32, n: u32) {
        self.inner.wake_private(word, n);
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    #[inline]
    fn stamp_ns(&self) -> u64 {
        self.ctx.coarse_now_ns()
    }
    fn relax(&self) {
        self.inner.relax();
    }
    fn spin_limit(&self) -> Duration {
        self.inner.spin_limit()
    }
    fn proc_alive(&self, proc: u32) -> bool {
        self.inner.proc_alive(proc)
    }
}

/// The waker a sleeping stream wait registers for a discarding destroy: wakes every thread
/// sleeping on the wait's notify.
///
/// It holds the notify by address rather than by a counted reference. The wait drops its
/// waker the moment it wakes up, on the path to the stream's next task, and dropping a counted
/// reference there meant taking the reference count's cache line from the host thread, which
/// reads that line on every call it makes on the notify: about 0.3 µs of a 5 µs idle wake-up.
pub(crate) struct WakeSleepers {
    pub(crate) file: *const ShmFile,
    pub(crate) sync: *const table::NotifySync,
}

// SAFETY: both pointers are only read through shared references in `run`, and both targets
// are `Sync` (a mapped file and a block of atomics in it). Moving the value to another thread
// or sharing it is therefore as safe as sharing `&ShmFile` and `&NotifySync`, subject to the
// lifetime argument in `of`.
unsafe impl Send for WakeSleepers {}
// SAFETY: see `Send` above.
unsafe impl Sync for WakeSleepers {}

impl WakeSleepers {
    /// The waker for a wait on `r`. Only for [`wait_slow`]: it registers the waker through
    /// a [`crate::stream::LazyCancel`] that it drops before it returns, while its borrow of `r`
    /// (through the task's pin) is still live. The stream engine runs a registered waker only
    /// while it holds the stream's waker lock, and dropping the `LazyCancel` (also when
    /// unwinding) removes the waker under that same lock; so `run` only ever executes while
    /// `r` — and with it the mapped file and the slot's memory in it — is alive.
    pub(crate) fn of(r: &SlotRef) -> WakeSleepers {
        WakeSleepers {
            file: Arc::as_ptr(r.file()),
            sync: &raw const r.slot().sync,
        }
    }

    pub(crate) fn run(&self) {
        // SAFETY: both targets are alive whenever this runs (see `of`).
        let (file, sync) = unsafe { (&*self.file, &*self.sync) };
        sync.wake_all(&file.waiter());
    }
}

/// The error of a stream wait on `r` cut short by a stop, an abort or a discarding destroy of
/// its stream (`TaskCtx::is_cancelled`), having consumed nothing (its failure is stored only
/// for a discard, as that of a wait the discard woke).
#[cold]
pub(crate) fn cut_short(r: &SlotRef) -> SimError {
    cut_short_on("notify", r.id(), r.device())
}

/// [`cut_short`] for a wait on `what` (a notify, a count notify) `id` of device `dev`.
#[cold]
pub(crate) fn cut_short_on(what: &str, id: u32, dev: u32) -> SimError {
    err(
        Error::TaskTimeout,
        format!(
            "stream wait on {what} {id} (device {dev}) cut short: its stream was stopped, \
             aborted or destroyed with its tasks discarded"
        ),
    )
}

/// What a stream wait took — a notify's record, a count notify's cleared count — and gives
/// back when its stream's stop, abort or discarding destroy had begun by the time it took it
/// (`job::took`, the one place that asks).
pub(crate) trait Taken {
    /// Gives it back, as if the wait had taken nothing, and fails as cut short.
    fn give_back(self) -> Result<(), SimError>;
}

impl Taken for &SlotRef {
    fn give_back(self) -> Result<(), SimError> {
        give_back(self)
    }
}

/// A stream wait on `r` that took its record while its stream was being stopped, aborted or
/// destroyed with its tasks discarded (`TaskCtx::is_cancelled`, read after the record was
/// taken) gives it back: the flag is set again as a record sets it, waking a waiter asleep on
/// it, so that the notify's next wait (another stream's, in the queue's order) gets it, and
/// the wait fails as [`cut_short`], having consumed nothing.
///
/// Why: the stop (or the abort) cuts the running wait short where the wait next asks, which
/// is before it sleeps, not before it takes a record. A wait that found the record first —
/// woken by the record before the stop's own wake-up ran, or between the worker's look at
/// the stop and its own look at the flag — took a record made after the stop returned
/// (`aclrtStreamStop` stops the running task: a stopped stream's waits take nothing), and
/// another stream's wait on the notify timed out (`parked::tests::a_parked_stream_stopped`,
/// on CI under load, 2026-12-06). Giving back what was taken loses nothing: a record made
/// meanwhile merges with it, as it would have merged had this wait never taken it.
#[cold]
#[inline(never)]
pub(crate) fn give_back(r: &SlotRef) -> Result<(), SimError> {
    r.slot().sync.record(&r.file().waiter());
    Err(cut_short(r))
}

/// A stream wait that did not find its record at once (out of line: the common case, a record
/// already there, stays small). A wait cut short before it starts ([`cut_short`]: its stream
/// stopped, aborted or discarded) takes no place in the notify's queue.
#[inline(never)]
pub(crate) fn wait_slow(
    pin: &StreamPin,
    timeout: Option<Duration>,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
    resume: Option<(table::Ticket, Option<Duration>)>,
) -> Result<(), SimError> {
    let r = &pin.0;
    if resume.is_none() && ctx.is_cancelled() {
        return Err(cut_short(r));
    }
    let sync = &r.slot().sync;
    let hint = ctx.spin_hint();
    // On a discarding destroy, wake the sleeping wait so it sees the cancel flag (a wake that
    // races ahead of the sleep moves the word it would sleep on: `NotifySync::wake_all`, so it
    // does not sleep). Registered only once
    // the wait is about to sleep: a record that arrives while the wait spins costs no
    // registration.
    let lazy = ctx.lazy_cancel(|| {
        let wake = WakeSleepers::of(r);
        move || wake.run()
    });
    // The table asks "cancelled?" only right before it sleeps: that is when the tasks finished
    // before this one are retired (a synchronize waiting for them must not wait for this wait)
    // and the waker registered.
    let hook = std::cell::Cell::new(Some(before_block));
    // Published in the wait-for graph while asleep; a cycle found through it (only looked
    // for while asleep, and only with `ACL_NOTIFY_SIM_DEADLOCK=fail`) ends the wait.
    let published: std::cell::RefCell<Option<waitgraph::Blocked>> = Default::default();
    let deadlock: std::cell::RefCell<Option<String>> = Default::default();
    let check = || {
        if let Some(f) = hook.take() {
            f();
            // About to sleep: note on what, for a queue that stays full behind us.
            ctx.set_blocked_on(
                Blocked::Wait {
                    dev: r.device(),
                    id: r.id(),
                    forever: timeout.is_none(),
                }
                .note(),
            );
            *published.borrow_mut() = Some(waitgraph::Blocked::publish(
                pin.target(),
                ctx.task_number(),
                timeout,
            ));
        } else if waitgraph::fail_at_once()
            && let Some(d) = published.borrow().as_ref().and_then(|b| b.deadlock())
        {
            *deadlock.borrow_mut() = Some(d);
            return true;
        }
        lazy.check() || r.file().is_lost() || !r.is_live()
    };
    let file = r.file();
    crate::shm::count_worker(file);
    let w = AdaptiveWaiter::new(file.waiter(), hint.get());
    // A parked wait handed back to its thread goes on from the place it holds, for the time
    // its timeout has left (`timeout` stays the whole one, for the diagnostics).
    let (ticket, limit) = match resume {
        Some((t, left)) => (Some(t), left),
        None => (None, timeout),
    };
    let args = WaitArgs {
        proc: file.me(),
        timeout: limit,
        cancel: &check,
    };
    let out = match ticket {
        Some(t) => sync.wait_resume(&w, t, args),
        None => sync.wait_and_reset(&w, args),
    };
    hint.set(w.next_spin());
    if w.spinner.lost_cpu() && w.slept_at.get() == 0 && matches!(out, Ok(WaitOutcome::Consumed)) {
        // The record came while this wait had given its CPU away, before it slept: the
        // recorder most likely ran on this very CPU (see `placement`).
        crate::placement::crowded();
    } else if w.slept_at.get() == 0 && !w.spinner.lost_cpu() {
        // Found its record while spinning, its CPU its own: what a worker apart from its peer
        // sees. (A wait that slept says nothing about where the peer runs.)
        crate::placement::clean_wait();
    }
    if hook.take().is_none() {
        ctx.set_blocked_on(0);
    }
    // A wait that timed out while others wait on it in a cycle says so (looked for before it
    // unpublishes itself, while the cycle is still there to see).
    let cycle = match (&out, deadlock.take()) {
        (Ok(WaitOutcome::Cancelled), Some(d)) => Some(format!(
            "stream wait on {} failed before its timeout ({}=fail); {d}",
            pin.target(),
            waitgraph::ENV_DEADLOCK
        )),
        (Ok(WaitOutcome::TimedOut), _) => published
            .borrow()
            .as_ref()
            .and_then(|b| b.deadlock())
            .map(|d| format!("{}; {d}", describe_wait(r, timeout, "stream wait"))),
        _ => None,
    };
    drop(published.take());
    let result = match (out, cycle) {
        (Ok(WaitOutcome::Consumed), _) => file.intact(),
        (_, Some(cycle)) => Err(err(Error::TaskTimeout, cycle)),
        (out, None) => wait_outcome_error(out, r, timeout, Error::TaskTimeout, "stream wait"),
    };
    drop(lazy);
    result
}

pub(crate) fn slot_wait(
    r: &SlotRef,
    timeout: Option<Duration>,
    cancel: &dyn Fn() -> bool,
) -> WaitResult {
    let file = r.file();
    r.slot().sync.wait_and_reset(
        &file.waiter(),
        WaitArgs {
            proc: file.me(),
            timeout,
            // A file cut short under us ends the wait too (its callers then report that).
            cancel: &|| cancel() || file.is_lost() || !r.is_live(),
        },
    )
}

pub(crate) type WaitResult = Result<WaitOutcome, acl_notify_core::table::TableError>;

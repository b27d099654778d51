//! A stream wait that parks its stream instead of blocking its thread (issue #25, stage 2:
//! the stream engine's side is `stream::runner`): a notify wait with no timeout (or one of at
//! least [`TIMED_PARK_MIN`], below) that finds no record takes its place in the notify's queue at once (a resumable wait's ticket,
//! `acl_notify_core::table::Ticket`), becomes [`SimJob::Parked`], and its stream parks; the
//! process's runner polls the place ([`probe`]) and runs the wait when its record is there.
//!
//! Holding the place while parked keeps what a blocking wait guarantees: a
//! `Sim::try_consume` never takes the record, a waiter that comes later (in any process)
//! queues behind it, and a dead process's places are reclaimed by the survivors as before.
//! The place ends in exactly one of: a poll that consumed, the blocking rest of the wait on
//! the stream's own thread (`wait_resume`, with the wait's usual diagnostics, cancellation and
//! wait-for graph), or [`ParkedWait`]'s drop (the task dropped unrun: a discard, an abort,
//! stop-on-failure), which gives it up consuming nothing. (A wait that consumed once its
//! stream's stop, abort or discard had begun gives the record back: `waiters::give_back`.)
//!
//! A timed wait parks too if its timeout is at least [`TIMED_PARK_MIN`]: a parked stream
//! goes back to its own thread within 1–2 ms (`stream::runner`'s `HOME_AFTER`), where the
//! wait blocks for the time its timeout has left and times out as a blocking wait does
//! (107020, the same diagnostics); the runner's probe also ends a parked wait whose
//! deadline passed (by the coarse clock: a held stream in the tests, a runner kept busy),
//! sending it home to time out there. Shorter timeouts block as before.

use std::cell::Cell;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::time::Duration;

use acl_notify_core::Error;
use acl_notify_core::table::{Begin, Ticket};

use crate::blocked::Blocked;
use crate::error::SimError;
use crate::pin::PinRef;
use crate::shm::SlotRef;
use crate::stream::{BlockedNote, Parking, Probe, TaskCtx};
use crate::waiters::{wait_outcome_error, wait_slow};
use crate::waitgraph;

/// Why a wait did not run to its end here (the job becomes `SimJob::Parked` or goes back
/// to the stream's own thread as it is).
pub(crate) enum Stop {
    /// Parked, holding its place.
    Parked(ParkedWait),
    /// It would block on a turn that may not: the stream's own thread runs it (a wait not
    /// yet parked: `None`).
    Home(Option<ParkedWait>),
}

/// No ticket held (a `Ticket`'s raw word is never this).
const NONE: u64 = u64::MAX;

/// A parked wait: the notify (its stream pin) and its place in the notify's queue, and
/// its entries in the stream's `blocked_on` note and in the wait-for graph.
pub(crate) struct ParkedWait {
    pin: PinRef,
    /// Boxed so that a job stays 24 bytes (`crate::job::SimJob`); the box goes back to
    /// [`SPARE`] when the wait ends.
    held: ManuallyDrop<Box<Held>>,
}

/// A thread's spare allocation for a `T` (see [`SPARE`]).
type Spare<T> = std::thread::LocalKey<Cell<Option<Box<MaybeUninit<T>>>>>;

thread_local! {
    /// The allocation of the last parked wait that ended on this thread, for the next one
    /// to park here: the runner parks and ends waits by the million, and a `malloc` and a
    /// `free` per park cost it 141 of its 1,000-odd instructions a park (callgrind, the
    /// pipeline bench, 2026-12-05).
    static SPARE: Cell<Option<Box<MaybeUninit<Held>>>> = const { Cell::new(None) };
}

/// `v` in a box, `spare`'s if it holds one. Inlined, so that the caller's value is built in
/// the box's memory: as a call, the value was built on the caller's stack with 8-byte stores
/// and copied here with 16-byte loads, which this VM's CPUs cannot forward from the stores
/// (`perf`: most of `boxed`'s samples on those loads, 5 % of the runner's in the pipeline
/// bench, 2026-12-06).
#[inline(always)]
fn boxed<T>(spare: &'static Spare<T>, v: T) -> Box<T> {
    match spare.try_with(Cell::take).ok().flatten() {
        Some(mut b) => {
            b.write(v);
            // SAFETY: written just above.
            unsafe { b.assume_init() }
        }
        None => Box::new(v),
    }
}

/// Drops `b`'s value and keeps its allocation in `spare` (freed if `spare` held one, or on
/// a thread being torn down).
fn unboxed<T>(spare: &'static Spare<T>, b: Box<T>) {
    let b = Box::into_raw(b);
    // SAFETY: `b` came from a `Box<T>` just above: valid, and dropped only here. The emptied
    // allocation has `MaybeUninit<T>`'s layout, which is `T`'s.
    let empty = unsafe {
        std::ptr::drop_in_place(b);
        Box::from_raw(b.cast::<MaybeUninit<T>>())
    };
    let _ = spare.try_with(|c| c.set(Some(empty)));
}

/// The shortest timeout a parked wait may have: its stream goes home (where the wait
/// blocks for what is left) 1–2 ms after it parked, well before such a deadline; the
/// runner's own look at the deadline is coarse (the scheduler tick's clock, a few ms).
pub(crate) const TIMED_PARK_MIN: Duration = Duration::from_millis(20);

/// What a parked wait holds besides its pin.
struct Held {
    ticket: u64,
    /// The notify's pin (the probe of a timed wait reads it from here).
    pin: PinRef,
    /// When a timed wait's timeout runs out, in `sys::now_ns`'s clock (0: no timeout).
    deadline_ns: u64,
    /// Its whole timeout, for the diagnostics (`None`: none).
    timeout: Option<Duration>,
    /// The stream's `blocked_on` note, cleared if the wait is dropped unrun.
    note: BlockedNote,
    /// Its entry in the wait-for graph (`crate::waitgraph`): published when it parks, so
    /// that a deadlock through parked streams and the stream's diagnostics see it at once;
    /// unpublished when the wait ends or is dropped.
    _graph: waitgraph::ParkedBlocked,
}

impl ParkedWait {
    /// The notify's pin.
    pub(crate) fn pin(&self) -> PinRef {
        self.pin
    }

    fn take(&mut self) -> Ticket {
        debug_assert_ne!(self.held.ticket, NONE);
        Ticket::from_raw(std::mem::replace(&mut self.held.ticket, NONE))
    }

    fn slot_ref(&self) -> &SlotRef {
        // SAFETY: a parked wait is a queued task not yet retired, so its pin is kept
        // (`crate::pin`); the worker drops the task before it retires it.
        &unsafe { self.pin.get() }.0
    }

    /// What the runner asks, without the stream's turn: see [`probe`] and [`probe_timed`].
    pub(crate) fn probe(&self) -> Probe {
        if self.held.deadline_ns == 0 {
            Probe {
                f: probe,
                data: std::ptr::from_ref(self.slot_ref()).cast(),
                arg: self.held.ticket,
            }
        } else {
            Probe {
                f: probe_timed,
                data: std::ptr::from_ref::<Held>(&self.held).cast(),
                arg: self.held.ticket,
            }
        }
    }

    /// The time a timed wait has left (`Some(ZERO)` once its deadline passed; `None`: no
    /// timeout).
    fn left(&self) -> Option<Duration> {
        match self.held.deadline_ns {
            0 => None,
            d => Some(Duration::from_nanos(d.saturating_sub(crate::sys::now_ns()))),
        }
    }
}

impl Drop for ParkedWait {
    /// Gives the place up if the wait did not end (the task dropped unrun), and clears the
    /// stream's note; the graph's entry goes with `Held`.
    fn drop(&mut self) {
        if self.held.ticket != NONE {
            let t = self.take();
            let r = self.slot_ref();
            r.slot().sync.wait_abandon(&r.file().waiter(), t);
            // SAFETY: a parked wait is one of its stream's tasks (`BlockedNote::clear`).
            unsafe { self.held.note.clear() };
        }
        // SAFETY: `held` is not used after this (we are dropping `self`).
        unboxed(&SPARE, unsafe { ManuallyDrop::take(&mut self.held) });
    }
}

/// Whether the parked wait on `data` (a `SlotRef`) holding ticket `arg` can go on: its
/// record is there at the head of the queue, the head passed it, or the notify is gone.
fn probe(data: *const (), arg: u64) -> bool {
    // SAFETY: `data` is the `SlotRef` of a parked wait (`ParkedWait::probe`), valid while
    // it is queued; the runner probes only parked streams.
    let r = unsafe { &*data.cast::<SlotRef>() };
    r.slot().sync.wait_ready(&Ticket::from_raw(arg)) || !r.is_live()
}

/// The probe of a wait held back unbegun (`Job::defer_probe`, `data` its `SlotRef`):
/// whether its notify's flag is set (or the notify is gone). A plain load: the wait, run
/// again, takes the record if nobody queued before it, or takes its place behind them.
pub(crate) fn flag_probe(data: *const (), _: u64) -> bool {
    // SAFETY: `data` is the `SlotRef` of a queued wait's pin (`SimJob::defer_probe`), valid
    // while it is queued; the runner probes only parked streams.
    let r = unsafe { &*data.cast::<SlotRef>() };
    r.slot().sync.is_set() || !r.is_live()
}

/// [`probe`] for a timed wait, `data` its `Held` (boxed: it stays put while the wait is
/// parked): also true once its deadline passed by the coarse clock (the wait then goes
/// home to time out).
fn probe_timed(data: *const (), arg: u64) -> bool {
    // SAFETY: `data` is the `Held` of a parked wait (`ParkedWait::probe`), valid while it is
    // queued; the runner probes only parked streams.
    let h = unsafe { &*data.cast::<Held>() };
    // SAFETY: as in `ParkedWait::slot_ref`.
    let r: &SlotRef = &unsafe { h.pin.get() }.0;
    probe(std::ptr::from_ref(r).cast(), arg) || crate::sys::coarse_now_ns() >= h.deadline_ns
}

/// Notes on the stream what its parked wait waits for (`Stream::blocked_on`, as a
/// sleeping wait does; cleared when the wait runs on or is dropped unrun). Its wait-for
/// graph entry is `Held`'s.
fn note_parked(r: &SlotRef, ctx: &TaskCtx, forever: bool) {
    #[cfg(test)]
    PARKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    #[cfg(test)]
    ctx.count_park();
    ctx.set_blocked_on(
        Blocked::Wait {
            dev: r.device(),
            id: r.id(),
            forever,
        }
        .note(),
    );
}

/// Waits parked so far (tests).
#[cfg(test)]
static PARKS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Waits held back unbegun on a runner's turn so far (tests; `stream::Parking::Defer`).
#[cfg(test)]
pub(crate) static DEFERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Tests: whether this stream's waits that would block must park
/// (`Stream::force_parking`: per stream, so that other tests of the process do not park).
#[inline(always)]
fn forced(ctx: &TaskCtx) -> bool {
    #[cfg(test)]
    return ctx.forced();
    #[cfg(not(test))]
    {
        let _ = ctx;
        false
    }
}

/// Whether a wait that would block parks: on a runner always; on the stream's own thread
/// when the namespace has more busy stream workers than the spin budget (spinning then
/// costs another stream its CPU) or a runner already runs.
fn worth_parking(r: &SlotRef, ctx: &TaskCtx, parking: Parking) -> bool {
    #[cfg(test)]
    if ctx.never_parks() {
        return false;
    }
    match parking {
        Parking::Never => false,
        Parking::Always | Parking::Defer => true,
        Parking::IfCrowded => {
            crate::stream::runner_active()
                || crate::shm::busy_now(r.file().busy()) > crate::spin::budget()
                || forced(ctx)
        }
    }
}

/// The slow path of a wait that found no record (`SimJob::run_or_park`): parks it if
/// `parking` says so, its timeout (if any) is at least [`TIMED_PARK_MIN`] and it gets a
/// place, else runs it as a blocking wait (or hands it back unrun on a turn that may not
/// block).
#[inline(never)]
pub(crate) fn park_or_wait(
    pin: PinRef,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
    parking: Parking,
    stopped: impl FnOnce(Stop),
) -> Went {
    Went::from(
        park_or_wait_with(pin, ctx, before_block, parking, None),
        stopped,
    )
}

/// How [`park_or_wait`] or [`run_parked`] went, in two registers: the worker calls them for
/// every park (the pipeline bench: about five an item), and their result as a value (the
/// job's result or the stop, 32 bytes through memory) cost it a stalled reload after each
/// call (`perf`: a quarter of `run_local`'s samples, 2026-12-05).
pub(crate) enum Went {
    /// The wait ended, its record taken.
    Done,
    /// It stopped (parked, or back to the stream's own thread): `stopped` has the [`Stop`].
    Stopped,
    /// It failed (boxed: rare).
    Failed(Box<SimError>),
}

impl Went {
    #[inline(always)]
    fn from(r: Result<Result<(), SimError>, Stop>, stopped: impl FnOnce(Stop)) -> Went {
        match r {
            Ok(Ok(())) => Went::Done,
            Ok(Err(e)) => Went::Failed(Box::new(e)),
            Err(stop) => {
                stopped(stop);
                Went::Stopped
            }
        }
    }
}

/// [`park_or_wait`] for a wait with a timeout: a function of its own, so that the one with
/// none (every wait of the pipeline bench) keeps its code (with the timeout an argument of
/// the one function, a park cost the runner 61 more instructions, callgrind). Cold: out of
/// the way of the hot code.
#[cold]
#[inline(never)]
pub(crate) fn park_or_wait_timed(
    pin: PinRef,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
    parking: Parking,
    timeout: Duration,
    stopped: impl FnOnce(Stop),
) -> Went {
    Went::from(
        park_or_wait_with(pin, ctx, before_block, parking, Some(timeout)),
        stopped,
    )
}

#[inline(always)]
fn park_or_wait_with(
    pin: PinRef,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
    parking: Parking,
    timeout: Option<Duration>,
) -> Result<Result<(), SimError>, Stop> {
    // SAFETY: as in `ParkedWait::slot_ref` (the task is running).
    let p = unsafe { pin.get() };
    let r = &p.0;
    if timeout.is_none_or(|t| t >= TIMED_PARK_MIN)
        && worth_parking(r, ctx, parking)
        && !ctx.is_cancelled()
    {
        let file = r.file();
        // The timeout runs from here, as a blocking wait's runs from its start.
        let deadline_ns = timeout.map_or(0, |t| {
            crate::sys::now_ns()
                .saturating_add(u64::try_from(t.as_nanos()).unwrap_or(u64::MAX))
                .max(1)
        });
        match r.slot().sync.wait_begin(&file.waiter(), file.me()) {
            Ok(Begin::Consumed) => return Ok(file.intact()),
            Ok(Begin::Queued(t)) => {
                note_parked(r, ctx, timeout.is_none());
                let parked = ParkedWait {
                    pin,
                    held: ManuallyDrop::new(boxed(
                        &SPARE,
                        Held {
                            ticket: t.into_raw(),
                            pin,
                            deadline_ns,
                            timeout,
                            note: ctx.blocked_note(),
                            // SAFETY: the stream's context holds its entry until its worker
                            // exits, when none of its tasks is left (`TaskCtx::graph_slot`).
                            _graph: unsafe {
                                waitgraph::ParkedBlocked::publish(
                                    ctx.graph_slot(waitgraph::Blocked::find_worker),
                                    p.target(),
                                    ctx.task_number(),
                                    ctx.coarse_now_ns(),
                                    timeout,
                                )
                            },
                        },
                    )),
                };
                return Err(Stop::Parked(parked));
            }
            // All places held, or an error the blocking wait reports as usual.
            Ok(Begin::Full) | Err(_) => {}
        }
    }
    if parking.on_runner() {
        return Err(Stop::Home(None));
    }
    Ok(wait_slow(p, timeout, ctx, before_block, None))
}

/// Runs a parked wait: takes its record if it is there at the head, else parks again if
/// `parking` says so, else goes on as a blocking wait from its place.
#[inline(never)]
pub(crate) fn run_parked(
    w: ParkedWait,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
    parking: Parking,
    stopped: impl FnOnce(Stop),
) -> Went {
    Went::from(run_parked_with(w, ctx, before_block, parking), stopped)
}

#[inline(always)]
fn run_parked_with(
    mut w: ParkedWait,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
    parking: Parking,
) -> Result<Result<(), SimError>, Stop> {
    // SAFETY: as in `ParkedWait::slot_ref` (the task is running).
    let p = unsafe { w.pin.get() };
    let r = &p.0;
    if let Err(e) = r.live() {
        // `w`'s drop gives the place up.
        return Ok(Err(e));
    }
    ctx.set_blocked_on(0);
    let file = r.file();
    let timeout = w.held.timeout;
    let t = w.take();
    match r.slot().sync.wait_poll(&file.waiter(), t) {
        Ok(Ok(())) => Ok(file.intact()),
        Err(e) => Ok(wait_outcome_error(
            Err(e),
            r,
            timeout,
            Error::TaskTimeout,
            "stream wait",
        )),
        Ok(Err(t)) => {
            let left = w.left();
            // A timed wait whose deadline passed times out on its own thread, as a blocking
            // wait does (the same error and diagnostics).
            let due = left.is_some_and(|l| l.is_zero());
            if !due && worth_parking(r, ctx, parking) && !ctx.is_cancelled() {
                note_parked(r, ctx, timeout.is_none());
                w.held.ticket = t.into_raw();
                Err(Stop::Parked(w))
            } else if parking.on_runner() {
                // Cancelled or due on a runner: the stream's own thread gives the place up
                // or times out.
                w.held.ticket = t.into_raw();
                Err(Stop::Home(Some(w)))
            } else {
                Ok(wait_slow(p, timeout, ctx, before_block, Some((t, left))))
            }
        }
    }
}

#[cfg(test)]
mod tests;

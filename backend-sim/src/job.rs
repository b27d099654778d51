//! What a simulator stream runs ([`SimJob`]): notify records and waits, count-notify records
//! and waits, host functions and boxed closures, and how the worker runs each. Queuing them is
//! `enqueue`'s.

use std::mem::MaybeUninit;
use std::sync::Arc;
use std::time::Duration;

use acl_notify_core::{CntRecord, CntWait, HostCall};

use crate::blocked::Blocked;
use crate::cnt::CntRef;
use crate::error::SimError;
use crate::parked::Went;
use crate::pin::PinRef;
use crate::prefetch::prefetch_for_write;
use crate::stream::{Job, Parking, Probe, Stopped, StoppedAs, Stream, Task, TaskCtx};
use crate::waiters::{StampedWaiter, wait_slow};

/// The most cache lines of a boxed task's captured state that [`Job::prefetch`] pulls in.
const PREFETCH_LINES: usize = 4;

thread_local! {
    /// The device and the [`Stream::key`] of the stream whose host function this thread is
    /// inside ([`SimJob::Host`]; `None`: none).
    static IN_HOST_FN: std::cell::Cell<Option<(u32, usize)>> = const { std::cell::Cell::new(None) };
    /// The box of the last host function this worker thread ran, emptied, until its queue
    /// runs dry ([`Job::worker_idle`]; see [`run_host_call`]).
    static SPENT_CALL: std::cell::Cell<Option<Box<MaybeUninit<HostCall>>>> =
        const { std::cell::Cell::new(None) };
}

/// Runs a host function's call, and keeps its box, emptied, in [`SPENT_CALL`] until the
/// worker's queue runs dry, instead of freeing it on the way to the next task (a box kept
/// from before is freed now, after the call).
///
/// Why: the host thread allocated the box and wrote the call into it, most likely on
/// another CPU, and freeing it writes allocator bookkeeping into that same memory: a cache
/// line pulled over from the host's CPU, and the allocator's own lines, between the host
/// function and the task after it. A host function then a record is how a user
/// synchronizes with a stream and then signals another; the bench's idle wake-up is that
/// pair (a host function stamps the time, the record wakes a stream asleep in a wait), and
/// with a probe's time stamps (this VM in its slow state, both workers on one CPU, 420
/// events) the step from the host function's return to the record task took 460–510 ns
/// median with the free there and 210 ns without it.
#[inline(always)]
fn run_host_call(call: Box<HostCall>) {
    let raw = Box::into_raw(call);
    // SAFETY: `raw` comes from a `Box<HostCall>`, so it points to an initialised
    // `HostCall`; it is read out once, and the allocation is given back below as a
    // `Box<MaybeUninit<HostCall>>` (same layout), which frees it without dropping the value
    // that was moved out.
    let (call, spent) = unsafe {
        (
            raw.read(),
            Box::from_raw(raw.cast::<MaybeUninit<HostCall>>()),
        )
    };
    call.call();
    // A box kept from an earlier call (two host functions without the queue running dry
    // in between) is freed here, after this call.
    drop(SPENT_CALL.try_with(|c| c.replace(Some(spent))));
}

/// Frees the box [`run_host_call`] kept (the worker's queue ran dry).
fn free_spent_call() {
    let _ = SPENT_CALL.try_with(std::cell::Cell::take);
}

/// Whether the calling thread keeps a host function's box ([`run_host_call`]).
#[cfg(test)]
pub(crate) fn spent_call_kept() -> bool {
    SPENT_CALL.with(|c| {
        let b = c.take();
        let kept = b.is_some();
        c.set(b);
        kept
    })
}

/// Whether the calling thread is running a host function of a simulator stream
/// (`aclrtLaunchHostFunc`): a call it makes must not wait for anything that waits for its
/// stream (the C library's device reference counts, say: a device reset discards the stream
/// and waits for it).
pub fn in_host_function() -> bool {
    host_function_device().is_some()
}

/// The device of the stream whose host function the calling thread is running (`None`: it runs
/// none): a reset of that device drains that stream, so waits for the reset from there would
/// never end; a reset of another device does not wait for it.
pub fn host_function_device() -> Option<u32> {
    IN_HOST_FN
        .with(std::cell::Cell::get)
        .map(|(device, _)| device)
}

/// The host functions of this process now inside a synchronize (a stream's or an event's) or
/// a host wait of a notify, each under a number of its own with the [`Stream::key`] of the
/// stream running it and its wait's deadline (`None`: none): see [`host_function_waits`].
#[allow(clippy::type_complexity)]
static HOST_FN_WAITS: crate::fork::PerProcess<Vec<(u64, usize, Option<std::time::Instant>)>> =
    crate::fork::PerProcess::new(Vec::new);

/// The numbers of [`HOST_FN_WAITS`].
static HOST_FN_WAIT_NUMBER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The host functions of this process now blocked in a synchronize (of a stream or an event)
/// or a host wait, each with the time its wait has left before it times out (`None`: it has no
/// timeout): their streams wait for something else, as a stream whose head is a wait does,
/// and one whose wait times out goes on by itself (`aclFinalize` tells from
/// [`Sim::host_function_waits_on`](crate::Sim::host_function_waits_on), the same per stream,
/// and [`Sim::stream_head`](crate::Sim::stream_head) whether the streams can still make
/// progress on their own).
pub fn host_function_waits() -> Vec<Option<Duration>> {
    waits_where(|_| true)
}

/// [`host_function_waits`] of the host functions run by the stream whose [`Stream::key`] is
/// `key` (see [`Sim::host_function_waits_on`](crate::Sim::host_function_waits_on)).
pub(crate) fn host_function_waits_of(key: usize) -> Vec<Option<Duration>> {
    waits_where(|k| k == key)
}

/// [`host_function_waits`] of the host functions whose stream's key `which` chooses.
fn waits_where(which: impl Fn(usize) -> bool) -> Vec<Option<Duration>> {
    let now = std::time::Instant::now();
    HOST_FN_WAITS
        .get()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .filter(|&&(_, key, _)| which(key))
        .map(|&(_, _, deadline)| deadline.map(|d| d.saturating_duration_since(now)))
        .collect()
}

/// Counts the calling thread in [`host_function_waits`] while held, if it is a host
/// function (only host functions pay for it: a lock each way).
pub(crate) struct HostFnWaiting(Option<u64>);

impl HostFnWaiting {
    /// `timeout`: the wait's (`None`: it waits for ever).
    pub(crate) fn enter(timeout: Option<Duration>) -> Self {
        let Some((_, key)) = IN_HOST_FN.with(std::cell::Cell::get) else {
            return HostFnWaiting(None);
        };
        let deadline = timeout.and_then(|t| std::time::Instant::now().checked_add(t));
        let n = HOST_FN_WAIT_NUMBER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        HOST_FN_WAITS
            .get()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((n, key, deadline));
        HostFnWaiting(Some(n))
    }

    /// [`enter`](Self::enter) for a synchronize.
    pub(crate) fn sync(wait: acl_notify_core::SyncWait) -> Self {
        Self::enter(match wait {
            acl_notify_core::SyncWait::Forever => None,
            acl_notify_core::SyncWait::AtMost(d) => Some(d),
        })
    }
}

impl Drop for HostFnWaiting {
    fn drop(&mut self) {
        if let Some(n) = self.0 {
            HOST_FN_WAITS
                .get()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .retain(|&(m, _, _)| m != n);
        }
    }
}

/// Whether the calling thread is a host function whose stream has been told to stop it: a
/// discarding destroy (`aclrtDestroyStreamForce`, a device reset or `aclFinalize` past their
/// drain) or an abort. A host function that waits for another thread of the program (the C
/// library's blocking `aclrtLaunchCallback`) gives up then, as a stream wait would end.
pub fn host_function_cancelled() -> bool {
    IN_HOST_FN
        .with(std::cell::Cell::get)
        .is_some_and(|(_, key)| {
            // SAFETY: `key` is the stream whose host function this thread is running.
            unsafe { crate::stream::cancelled_by_key(key) }
        })
}

/// Counts the calling thread, if it is a host function, as blocked in a wait with `timeout`
/// (`None`: none) while the guard lives, as a synchronize or host wait inside a host function
/// is ([`host_function_waits`]): for a host function that waits for another thread of the
/// program (the C library's `aclrtLaunchCallback`, which waits for `aclrtProcessReport`), so
/// that `aclFinalize` tells it from one still at work.
pub fn host_function_blocked(timeout: Option<Duration>) -> HostFunctionBlocked {
    HostFunctionBlocked {
        _waiting: HostFnWaiting::enter(timeout),
    }
}

/// The guard of [`host_function_blocked`].
pub struct HostFunctionBlocked {
    _waiting: HostFnWaiting,
}

impl core::fmt::Debug for HostFunctionBlocked {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HostFunctionBlocked")
            .finish_non_exhaustive()
    }
}

/// A simulator stream: its queue holds [`SimJob`]s.
pub(crate) type SimStream = Stream<SimError, SimJob>;

/// What a simulator stream runs: notify records and waits and host functions as plain values
/// (no allocation per task), count-notify records and waits as boxed values the worker matches
/// like them (boxed so that every job stays 24 bytes), anything else as a boxed closure.
pub(crate) enum SimJob {
    /// A record of the notify of `pin` (the task's use of the pin: `crate::pin`).
    Record {
        pin: PinRef,
        pid: i32,
    },
    /// A wait on the notify of `pin`.
    Wait {
        pin: PinRef,
        timeout: Option<Duration>,
    },
    /// A record or wait whose pin went between its lookup and its ticket's claim (see
    /// `Sim::claim_pinned`): the ticket is published with this instead, which does nothing,
    /// and the call looks the notify up again.
    Refused,
    /// A wait (with no timeout, or one of at least `parked::TIMED_PARK_MIN`) that parked its
    /// stream, holding its place in the notify's queue (`crate::parked`).
    Parked(crate::parked::ParkedWait),
    /// The count notify, the record and the recording process's pid.
    CntRecord(Box<(Arc<CntRef>, CntRecord, i32)>),
    /// The count notify and the wait, its timeout resolved when queued (as a notify wait's).
    CntWait(Box<(Arc<CntRef>, CntWait)>),
    /// Boxed: a call with a discard function is three words (`HostCall::with_discard`).
    Host(Box<HostCall>),
    /// A boxed task that never blocks and keeps no CPU for long except with its own work:
    /// a copy or a set of device memory. It does not make the worker retire the tasks before
    /// it first ([`Job::may_block`] is false), so a burst of copies costs no read-modify-write
    /// of the shared `retired` counter per copy (that line is polled by a waiting
    /// `synchronize` on another CPU): bursts of 64 async copies of 64 KiB went from 0.84–0.85×
    /// to 0.94× of `memcpy` in slow minutes, and from 1.08× to 1.13× in fast ones (one A/B
    /// each, same binary).
    Bulk(Task<SimError>),
    /// An event's record: a job of its own, so that a stream that drops it behind a failure
    /// can hand it that failure ([`Job::drop_after_failure`]).
    EventRecord(Box<crate::event::RecordTask>),
    Other(Task<SimError>),
}

// The queue holds jobs by value: a larger job is more cache lines per record+wait pair. At 32
// bytes (count-notify jobs held inline, 1bfbb87) one stream's record+wait pair took 74-82 ns
// instead of 47-59 (`bench --only inproc`, A/B of the same minutes); boxing them brought it back
// to 47-48 ns.
const _: () = assert!(std::mem::size_of::<SimJob>() <= 24);

impl From<Task<SimError>> for SimJob {
    fn from(task: Task<SimError>) -> Self {
        SimJob::Other(task)
    }
}

impl Job<SimError> for SimJob {
    /// Nothing: a record or wait holds its pin by address, and the pin is kept by its
    /// stream's keeper until the task has retired (`crate::pin`).
    type Remains = ();

    /// Records and waits a host queues one at a time into a running stream are retired 16 at
    /// a time: see `stream::worker::Finished` (with a counted pin per task this was also when
    /// the pins' counts were dropped).
    const RETIRE_IN_BATCHES: bool = true;

    #[inline(always)]
    fn run(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
    ) -> (Result<(), SimError>, Self::Remains) {
        self.run_plain(ctx, before_block)
    }

    /// A record is one swap (and a wake-up call if a waiter sleeps): it runs the moment the
    /// job before it (typically a wait) ends.
    fn chains(&self) -> bool {
        matches!(self, SimJob::Record { .. })
    }

    fn portable(&self) -> bool {
        matches!(
            self,
            SimJob::Record { .. } | SimJob::Wait { .. } | SimJob::Parked(_) | SimJob::Refused
        )
    }

    /// An event record among the dropped is handed the failure its stream stored, which its
    /// synchronize then answers (`crate::event::RecordTask::drop_after_failure`).
    fn drop_after_failure(self, failure: &std::sync::Mutex<Option<SimError>>) {
        match self {
            SimJob::EventRecord(record) => {
                let cause = crate::locks::lock(failure).clone();
                record.drop_after_failure(cause);
            }
            other => drop(other),
        }
    }

    /// Frees the box of the last host function run on this thread ([`run_host_call`]).
    fn worker_idle() {
        free_spent_call();
    }

    /// A wait (no timeout, or one of at least `parked::TIMED_PARK_MIN`) that finds no record
    /// may park (`crate::parked`); a parked wait goes on there. Everything else runs as
    /// [`run`](Job::run) does: the wait's fast path (its record there) is the same, the
    /// parking decision is after it.
    #[inline(always)]
    fn run_or_park(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
        parking: Parking,
        stopped: &mut Stopped<'_, Self>,
    ) -> Option<(Result<(), SimError>, ())> {
        self.run_with(ctx, before_block, parking, Some(stopped))
            .map(|out| (out, ()))
    }

    fn park_probe(&self) -> Option<Probe> {
        match self {
            SimJob::Parked(w) => Some(w.probe()),
            _ => None,
        }
    }

    /// A wait held back unbegun: worth running again once its record is there (or its
    /// notify is gone: it then fails as usual).
    fn defer_probe(&self) -> Option<Probe> {
        match self {
            SimJob::Wait { pin, .. } => {
                // SAFETY: a queued task's pin is kept until it retires (`crate::pin`).
                let r: &crate::shm::SlotRef = &unsafe { pin.get() }.0;
                Some(Probe {
                    f: crate::parked::flag_probe,
                    data: std::ptr::from_ref(r).cast(),
                    arg: 0,
                })
            }
            _ => None,
        }
    }

    /// Records, copies and sets of device memory (`Bulk`) never block; waits call
    /// `before_block` before they sleep.
    fn may_block(&self) -> bool {
        !matches!(
            self,
            SimJob::Record { .. }
                | SimJob::Wait { .. }
                | SimJob::Parked(_)
                | SimJob::Bulk(_)
                | SimJob::Refused
        )
    }

    /// Starts pulling the notify's flag line in for writing while the task before runs: a
    /// record or a wait mostly finds that line in the cache of the stream at the other end
    /// (it recorded or consumed last), and the transfer then overlaps the task before
    /// instead of stalling this one's read-modify-write (two streams handing records through
    /// a ring of notifies move about a quarter more items per second).
    ///
    /// A boxed task (a copy or a set of device memory, a callback) has its captured state
    /// pulled in the same way: the enqueuing thread wrote it, on another CPU, and the worker
    /// reads it, then frees it. Bursts of 64 async copies of 64 KiB took 47.3–47.8 µs against
    /// 48.6–49.4 µs without (three alternations, at a time when a cache line took 200 ns to
    /// cross between this VM's two CPUs). At most [`PREFETCH_LINES`] lines: a copy's task
    /// fits in two, and a callback's captures may be of any size.
    ///
    /// Inlined into the worker's loop (the boxed tasks' part out of line): as a call it cost
    /// a record+wait pair about 40 instructions of its 300 (callgrind, two calls a pair).
    #[inline(always)]
    fn prefetch(&self) {
        match self {
            SimJob::Record { pin, .. } | SimJob::Wait { pin, .. } => {
                // SAFETY: the worker calls this on a task queued behind the running one, not
                // yet retired; its pin was claimed for it (`crate::pin`).
                let pin = unsafe { pin.get() };
                prefetch_for_write(std::ptr::from_ref(pin.0.slot()).cast());
            }
            SimJob::Other(task) | SimJob::Bulk(task) => prefetch_task(task),
            // The call the host wrote: read by the call, then its box freed.
            SimJob::Host(call) => prefetch_for_write(std::ptr::from_ref(&**call).cast()),
            _ => {}
        }
    }
}

/// [`Job::prefetch`] of a boxed task: its captured state, at most [`PREFETCH_LINES`] lines.
#[inline(never)]
fn prefetch_task(task: &Task<SimError>) {
    let p: *const u8 = std::ptr::from_ref(&**task).cast();
    let lines = (0..std::mem::size_of_val(&**task)).step_by(64);
    for off in lines.take(PREFETCH_LINES) {
        prefetch_for_write(p.wrapping_add(off));
    }
}

/// Gives the wait that stopped (`stop`; `pin` and `timeout` its own) to `stopped` as the job
/// it now is (a worker's turn always passes one; a job run with [`Parking::Never`] never
/// stops). Each job is built where it is put, so that it is stored into the worker's batch
/// straight from registers (see `Stopped`).
#[inline(always)]
fn put(
    stopped: Option<&mut Stopped<'_, SimJob>>,
    stop: crate::parked::Stop,
    pin: PinRef,
    timeout: Option<Duration>,
) {
    let Some(s) = stopped else { return };
    match stop {
        crate::parked::Stop::Parked(w) => s.put_with(StoppedAs::Parked, || SimJob::Parked(w)),
        crate::parked::Stop::Home(Some(w)) => s.put_with(StoppedAs::Home, || SimJob::Parked(w)),
        crate::parked::Stop::Home(None) => {
            s.put_with(StoppedAs::Home, || SimJob::Wait { pin, timeout })
        }
    }
}

/// A wait's outcome `out` (what it took, or its failure), the wait run by `ctx`'s stream: a
/// wait that took its record (a notify's, [`crate::waiters::give_back`]) or its count (a
/// clearing count notify's, [`crate::cnt::Cleared`]) while its stream was being stopped,
/// aborted or destroyed with its tasks discarded (its running task cut short:
/// `TaskCtx::is_cancelled`) gives it back and fails as cut short.
///
/// The flags are read after the record was taken, so a record made after a stop returned
/// and taken by the stopped stream's wait is always given back: the stop raises its flag
/// before it returns, and the flag stays up until the worker takes its next task. Two loads
/// a record taken (of the line the worker reads for every task), none on the way to it.
#[inline(always)]
fn took<T: crate::waiters::Taken>(ctx: &TaskCtx, out: Result<T, SimError>) -> Result<(), SimError> {
    match out {
        Ok(t) if ctx.is_cancelled() => t.give_back(),
        out => out.map(drop),
    }
}

impl SimJob {
    /// The job with its pin replaced by `pin` (a record or wait; any other job unchanged).
    pub(crate) fn with_pin(self, pin: PinRef) -> SimJob {
        match self {
            SimJob::Record { pid, .. } => SimJob::Record { pin, pid },
            SimJob::Wait { timeout, .. } => SimJob::Wait { pin, timeout },
            other => other,
        }
    }

    /// [`Job::run`] without the timeline.
    #[inline(always)]
    pub(crate) fn run_plain(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
    ) -> (Result<(), SimError>, ()) {
        match self.run_with(ctx, before_block, Parking::Never, None) {
            Some(out) => (out, ()),
            None => unreachable!("a job that may not park does not stop"),
        }
    }

    /// Runs the job, or stops before it ends (`None`, the job given to `stopped`: see
    /// [`Job::run_or_park`]). Out-of-band so that what the worker gets back for a job that
    /// ran stays in two registers.
    #[inline(always)]
    fn run_with(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
        parking: Parking,
        mut stopped: Option<&mut Stopped<'_, SimJob>>,
    ) -> Option<Result<(), SimError>> {
        Some(match self {
            SimJob::Record { pin, pid } => {
                // SAFETY: the worker runs this task and retires it only afterwards; its
                // ticket was claimed while the pin was its owner's (`Sim::claim_pinned`), so
                // the pin is kept until then (`crate::pin`).
                let r = &unsafe { pin.get() }.0;
                if let Err(e) = r.live() {
                    return Some(Err(e));
                }
                let w = StampedWaiter {
                    inner: r.file().waiter(),
                    ctx,
                };
                r.slot().record(&w, pid);
                // A record that went into a page a truncation cut off went nowhere (see
                // `lost`): one load of the mapping's flag.
                r.file().intact()
            }
            SimJob::Wait { pin, timeout } => {
                #[cfg(test)]
                ctx.wait_starts();
                // SAFETY: as for a record.
                let p = unsafe { pin.get() };
                let r = &p.0;
                if let Err(e) = r.live() {
                    return Some(Err(e));
                }
                let sync = &r.slot().sync;
                // The record is there and nobody queued: take it before setting anything up
                // (the table's own fast path, which it would try first as well). The flag is
                // read before the CAS, so a wait that must wait pays for no extra CAS. The
                // stream's spin hint is left alone: a wait that did not spin says nothing
                // about how long one should (see `waiters::next_spin`).
                if sync.is_set() && sync.try_consume() {
                    return Some(took(ctx, r.file().intact().map(|()| &**r)));
                }
                // Only now, the record not there: on a runner's turn that may defer it, back
                // unbegun (no place taken: the runner runs it again once the record is
                // there, see `Parking::Defer`), else park, or block.
                if parking == Parking::Defer
                    && timeout.is_none_or(|t| t >= crate::parked::TIMED_PARK_MIN)
                    && !ctx.is_cancelled()
                    && let Some(s) = stopped.as_mut()
                {
                    #[cfg(test)]
                    crate::parked::DEFERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    s.put_with(StoppedAs::Deferred, || SimJob::Wait { pin, timeout });
                    return None;
                }
                let out = if parking == Parking::Never {
                    wait_slow(p, timeout, ctx, before_block, None)
                } else {
                    // The job goes back to the queue from inside the call (`Went`).
                    let stop = |s: crate::parked::Stop| put(stopped, s, pin, timeout);
                    let went = match timeout {
                        None => crate::parked::park_or_wait(pin, ctx, before_block, parking, stop),
                        Some(t) => crate::parked::park_or_wait_timed(
                            pin,
                            ctx,
                            before_block,
                            parking,
                            t,
                            stop,
                        ),
                    };
                    match went {
                        Went::Done => Ok(()),
                        Went::Stopped => return None,
                        Went::Failed(e) => Err(*e),
                    }
                };
                took(ctx, out.map(|()| &**r))
            }
            SimJob::Refused => Ok(()),
            SimJob::Parked(w) => {
                let pin = w.pin();
                // A parked wait always comes back as one (`Stop::Home(Some(_))`).
                let stop = |s: crate::parked::Stop| put(stopped, s, pin, None);
                let out = match crate::parked::run_parked(w, ctx, before_block, parking, stop) {
                    Went::Done => Ok(()),
                    Went::Stopped => return None,
                    Went::Failed(e) => Err(*e),
                };
                // SAFETY: as for a record (the wait ran; its task is not retired yet).
                took(ctx, out.map(|()| &*unsafe { pin.get() }.0))
            }
            SimJob::CntRecord(job) => {
                let (r, record, pid) = *job;
                crate::cnt::run_record(&r, record, pid)
            }
            SimJob::CntWait(job) => {
                #[cfg(test)]
                ctx.wait_starts();
                took(ctx, crate::cnt::run_wait(&job.0, &job.1, ctx))
            }
            SimJob::Host(call) => {
                ctx.set_blocked_on(Blocked::HostFunction.note());
                let outer = IN_HOST_FN.with(|f| f.replace(Some((ctx.device(), ctx.stream_key()))));
                let generation = crate::sys::fork_generation();
                // Where the host thread that feeds the stream is best placed (see
                // `placement::beside_worker`).
                if let Some(cpu) = crate::placement::host_function(|| {
                    crate::shm::no_cpu_free(crate::spin::budget())
                }) {
                    ctx.note_host_fn_cpu(cpu);
                }
                run_host_call(call);
                if crate::sys::fork_generation() != generation {
                    // The call forked, and this is the child: see `crate::fork`.
                    crate::fork::child_returned_from_a_host_function();
                }
                IN_HOST_FN.with(|f| f.set(outer));
                ctx.set_blocked_on(0);
                Ok(())
            }
            SimJob::Other(task) | SimJob::Bulk(task) => task(ctx),
            SimJob::EventRecord(record) => record.run(),
        })
    }
}

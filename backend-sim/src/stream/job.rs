//! A stream's unit of work: the [`Job`] trait that the queue holds, and [`Task`], the boxed
//! closure that is its default implementation.

use super::TaskCtx;
use super::batch::Batch;

/// A unit of work on a stream: runs once on the stream's worker, in enqueue order.
pub type Task<E> = Box<dyn FnOnce(&TaskCtx) -> Result<(), E> + Send + 'static>;

/// What a stream's queue holds: a boxed closure ([`Task`], the default), or a caller's own
/// type — e.g. an enum of its frequent operations, so that they cost no allocation.
pub trait Job<E>: Send + 'static {
    /// What the job hands back to be dropped later (see [`run`](Self::run)); `()` for none.
    /// `Send`: the finished jobs' remains belong to the stream's turn (`worker::Turn`), which
    /// lives with the stream, not with the thread that ran them.
    type Remains: Send;

    /// Runs the job on the stream's worker. Besides its result it may return *remains*:
    /// values whose drop is costly but not urgent (e.g. the last reference to something
    /// shared with other threads, whose counter would have to be pulled from their caches).
    /// The worker drops them, and retires the job (what `synchronize` and `query` count),
    /// off the path from this job to the next, but never later than before a later job
    /// blocks (see [`may_block`](Self::may_block)) or soon after the queue has run dry (at
    /// once if a `synchronize` waits, else when no task came for about a microsecond; with
    /// remains of a non-zero size, jobs that keep coming are flushed 16 at a time). So a
    /// `synchronize` returns only once the remains of the tasks it waited for are dropped,
    /// and it never waits for a task that blocks behind them.
    ///
    /// `before_block` drops the remains of the tasks finished before this one and retires
    /// them; a job that says it will not block without calling it first
    /// ([`may_block`](Self::may_block) `false`) must call it before it blocks. Calling it
    /// again, or when nothing is pending, does nothing.
    fn run(self, ctx: &TaskCtx, before_block: &mut dyn FnMut()) -> (Result<(), E>, Self::Remains);

    /// Whether the worker keeps finished jobs unretired while jobs keep coming, and retires
    /// them 16 at a time or once the queue has stayed dry for a moment, instead of at the
    /// end of every run of the queue (see `worker::Finished`): for jobs with remains to drop
    /// (the default: whether [`Remains`](Self::Remains) has a size), and for small jobs that a
    /// host queues one at a time into a running stream (each retire is a read-modify-write
    /// of a counter other threads poll, and the worker that lingers so looks at the queue
    /// only once a microsecond).
    const RETIRE_IN_BATCHES: bool = std::mem::size_of::<Self::Remains>() != 0;

    /// Whether the job may block for long (a wait, a user callback) without calling
    /// `before_block` first; if so, the worker calls it for the job, before the job starts.
    /// The default is `true`.
    fn may_block(&self) -> bool {
        true
    }

    /// Called on the next queued job just before the current one runs: a hint to start
    /// fetching the memory it will touch, so the fetch overlaps the current job (the default
    /// does nothing).
    fn prefetch(&self) {}

    /// Whether the job is quick and never blocks (a record: one atomic swap). Such a job that
    /// comes right behind one that succeeded runs the moment that one returns, before the
    /// worker's bookkeeping of it: a stream whose wait ends hands its record on at once, and
    /// in a hand-off between two streams the other one is waiting for exactly that. A job
    /// that says so gets a `before_block` that does nothing, so it must never block. The
    /// default is `false`.
    fn chains(&self) -> bool {
        false
    }

    /// Runs the job as [`run`](Self::run) does, unless it is a wait that would block and
    /// `parking` lets it park its stream instead (issue #25, stage 2: a wait parks its
    /// stream, not its thread): then `None`, the job given to `stopped` with `true`, the
    /// job now holding its place in the notify's queue ([`park_probe`](Self::park_probe)
    /// says when it can go on); or, on a turn that may not block ([`Parking::Always`]) and
    /// a job that cannot park, `None` with the job given to `stopped` unrun and `false`:
    /// only the stream's own thread may run it. The default runs every job.
    #[inline(always)]
    fn run_or_park(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
        parking: Parking,
        stopped: &mut Stopped<'_, Self>,
    ) -> Option<(Result<(), E>, Self::Remains)>
    where
        Self: Sized,
    {
        let _ = (parking, stopped);
        Some(self.run(ctx, before_block))
    }

    /// For a parked job: how a thread that holds no turn of the stream (the runner) asks
    /// whether the job can go on now. `None` for a job that can always go on.
    fn park_probe(&self) -> Option<Probe> {
        None
    }

    /// For a job held back unbegun ([`Parking::Defer`]): how the runner asks whether it is
    /// worth running again now (a wait: its record is there). `None`: at once.
    fn defer_probe(&self) -> Option<Probe> {
        None
    }

    /// Whether any thread may run this job (a record, a wait), not only the stream's own.
    fn portable(&self) -> bool {
        false
    }

    /// Drops the job unrun because a job before it on its stream failed while the stream
    /// stops on failure (`ACL_STOP_ON_FAILURE`); `failure` holds that failure until a
    /// synchronize reports it. A job type that tells its waiters why it never ran reads it
    /// here (`SimJob`: an event record's synchronize answers with that failure, as CANN's
    /// context does once it stops on failure). The default just drops the job.
    fn drop_after_failure(self, failure: &std::sync::Mutex<Option<E>>)
    where
        Self: Sized,
    {
        let _ = failure;
        drop(self);
    }

    /// The calling worker thread's queue ran dry: it is about to spin for more work, then
    /// park. A job type frees here what its jobs left for a moment when nobody waits for
    /// the thread (`SimJob`: the emptied box of its last host function). The default does
    /// nothing.
    fn worker_idle()
    where
        Self: Sized,
    {
    }
}

/// Where a job that stops before its end ([`Job::run_or_park`]) goes: back in front of the
/// worker's batch, to run next, written there by the call that stopped it. Until 2026-12-06
/// the call wrote it into an `Option` of the worker's, which then moved it to the batch: the
/// move read the job (24 bytes, and the flag beside it) with wider loads than the stores
/// that had just written it, which this VM's CPUs cannot forward (`perf`: four fifths of
/// the turn's stop's samples on those two loads, 6.7 % of the pipeline bench's).
pub struct Stopped<'a, J> {
    batch: &'a mut Batch<J>,
    /// How the job stopped; `None`: it did not.
    parked: Option<StoppedAs>,
}

/// How a job stopped before its end ([`Stopped`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StoppedAs {
    /// It parked (holding its place: [`Job::park_probe`]).
    Parked,
    /// It went back unbegun on a runner's turn ([`Parking::Defer`]: [`Job::defer_probe`]).
    Deferred,
    /// It went back unrun for the stream's own thread.
    Home,
}

impl<J> std::fmt::Debug for Stopped<'_, J> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stopped")
            .field("parked", &self.parked)
            .finish_non_exhaustive()
    }
}

impl<'a, J> Stopped<'a, J> {
    /// Puts a job that stops into `batch`, which it was just taken from.
    #[inline(always)]
    pub(super) fn new(batch: &'a mut Batch<J>) -> Self {
        Stopped {
            batch,
            parked: None,
        }
    }

    /// The job `make` builds stopped, as `how` says. Built in its place in the batch
    /// (`Batch::put_back_with`).
    #[inline(always)]
    pub fn put_with(&mut self, how: StoppedAs, make: impl FnOnce() -> J) {
        self.batch.put_back_with(make);
        self.parked = Some(how);
    }

    /// What stopped (see the field).
    #[inline(always)]
    pub(super) fn parked(&self) -> Option<StoppedAs> {
        self.parked
    }
}

/// Whether a job may park its stream ([`Job::run_or_park`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Parking {
    /// Never: a wait blocks its thread (the stream was handed back to its own thread).
    Never,
    /// When the stream's process has more busy stream threads than CPUs to spin on, or a
    /// runner runs.
    IfCrowded,
    /// Whenever the job would block: the turn runs on a runner, which must never block.
    Always,
    /// As `Always`, but a wait that finds no record first goes back unbegun, holding no
    /// place ([`StoppedAs::Deferred`]): the runner runs it again once its record is there, or
    /// with `Always` once nothing else can go on (`super::runner`'s `run`). The runner's
    /// turns while other streams are parked on it, which may be the ones to record it.
    Defer,
}

impl Parking {
    /// Whether the turn runs on a runner (which must never block).
    #[inline(always)]
    pub fn on_runner(self) -> bool {
        matches!(self, Parking::Always | Parking::Defer)
    }
}

/// A parked job's probe ([`Job::park_probe`]): `(f)(data, arg)` says whether the job can go
/// on. Valid while the job stays queued on its parked stream.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// The test.
    pub f: fn(*const (), u64) -> bool,
    /// What it reads (valid while the job is queued).
    pub data: *const (),
    /// A word it is given.
    pub arg: u64,
}

impl<E: 'static> Job<E> for Task<E> {
    type Remains = ();

    fn run(self, ctx: &TaskCtx, _: &mut dyn FnMut()) -> (Result<(), E>, ()) {
        (self(ctx), ())
    }
}

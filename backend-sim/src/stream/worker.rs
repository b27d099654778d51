//! A stream's worker thread: takes tasks from the queue in batches, runs them in order,
//! retires them, stores their errors, and spins then parks when the queue runs dry.

use std::cell::Cell;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use acl_notify_core::Error;

use super::batch::{Batch, TAKE};
use super::cancel::{Control, TaskCtx};
use super::runner::{Defer, Turned};
use super::{
    DISCARDING, Job, OPEN, Padded, Parking, Stopped, StoppedAs, WorkerPolicy, bump, drop_all,
    drop_quietly, lock, quietly,
};
use crate::placement::pin_current_thread;
use crate::ring::Ring;
use crate::yielding::YIELD_LOST_CPU;

/// [`Shared::halted`]: a failure in stop-on-failure mode.
pub(super) const HALT_FAILED: u8 = 1;
/// [`Shared::halted`]: the stream is stopped (`super::stop`).
pub(super) const HALT_STOPPED: u8 = 2;

/// Finished tasks whose remains the worker keeps before it drops them and retires the tasks,
/// while tasks keep coming (see [`Finished`]).
const FLUSH_AT: usize = TAKE;

/// How long the worker, its queue run dry with finished tasks not yet flushed, watches for
/// the next task before it flushes them (at once if a `synchronize` is waiting).
const FLUSH_GRACE: Duration = Duration::from_micros(2);

/// How long a worker thread that unwound while its stream was on the runner waits for the
/// turn to come home ([`Shared::turn_home`]): the runner hands it home within a few
/// milliseconds; a stream a test holds parked (`Stream::force_parking`) stays away until its
/// wait goes on.
const UNWOUND_WAIT: Duration = Duration::from_secs(10);

/// While it lingers so, the worker looks at the queue once every this many `PAUSE`s (about
/// 0.9 µs on this project's VM, where a `PAUSE` takes 28 ns), not after every one as its idle
/// spin does: each look pulls the slot the host is writing next over to the worker's CPU,
/// and the host's next locked instruction then waits for it to come back. A probe with a
/// host thread queuing records into a stream whose worker ran on the other CPU, at a time
/// when a line took long between them: 75–83 ns a record looking every 32 `PAUSE`s,
/// 89–101 ns looking after every one (3 rounds each, same minutes; no difference, 42 ns,
/// when lines moved fast).
const LINGER_LOOK_EVERY: u32 = 32;

/// How long [`spin_until`] busy-waits before it starts yielding the CPU between checks.
const PURE_SPIN: Duration = Duration::from_micros(2);

/// Spins until `done()` or until `budget` has passed; true if `done()` held.
///
/// The first [`PURE_SPIN`] is a tight `spin_loop`; after that each clock check (every 32
/// turns) also calls `sched_yield`, so that on a busy machine where the thread we are waiting
/// for shares our CPU, our spinning does not keep it off that CPU (on an otherwise idle CPU
/// the yield returns at once). A yield that does not return at once shows that another
/// thread wants this CPU: the spin then stops early (false unless `done()` holds by then),
/// so that a spinning thread does not keep taking turns with a busy one — e.g. an idle
/// stream worker placed on the CPU of a stream that is running a long queue.
pub(super) fn spin_until(budget: Duration, done: impl FnMut() -> bool) -> bool {
    spin_until_with(budget, done, || {
        let t = Instant::now();
        thread::yield_now();
        Some(t.elapsed())
    })
}

/// [`spin_until`] with `offer` in place of its `sched_yield` (how long the CPU was given
/// away, or `None` if it was not offered).
pub(super) fn spin_until_with(
    budget: Duration,
    mut done: impl FnMut() -> bool,
    offer: impl Fn() -> Option<Duration>,
) -> bool {
    if budget.is_zero() {
        return done();
    }
    let start = Instant::now();
    let mut i: u32 = 0;
    loop {
        if done() {
            return true;
        }
        i = i.wrapping_add(1);
        // Reading the clock costs ~20 ns (vDSO); do it every 32 turns.
        if i.is_multiple_of(32) {
            let elapsed = start.elapsed();
            if elapsed >= budget {
                return false;
            }
            if elapsed >= PURE_SPIN && offer().is_some_and(|took| took >= YIELD_LOST_CPU) {
                return done();
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The calling thread's kernel thread id.
pub(super) fn gettid() -> i32 {
    // SAFETY: gettid(2) has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Counters only the worker writes.
#[derive(Default)]
pub(super) struct WorkerCounters {
    pub(super) completed: AtomicU64,
    pub(super) failed: AtomicU64,
    pub(super) panicked: AtomicU64,
    pub(super) sleeps: AtomicU64,
    pub(super) spin_hits: AtomicU64,
    /// The utilization hook ([`Idle`]): how long the worker slept for lack of work.
    pub(super) idle: Idle,
}

/// The one hook behind a device's utilization (`Stream::busy_ns`): the time the worker spends
/// asleep for lack of work, read on the worker's way into and out of that sleep only — a path
/// that sleeps in the kernel anyway, so the two clock reads cost nothing a running stream
/// pays (no clock read per task or per batch, and none when the spin for new work finds
/// some). What is not asleep counts as busy: running tasks (a task that waits, for a record
/// or in a host function, included) and the spin for new work (at most `StreamConfig::spin`,
/// 10 µs, per time the queue runs dry).
pub(super) struct Idle {
    /// `now_ns` when the stream was made.
    born: u64,
    /// Nanoseconds slept in the sleeps that ended.
    slept: AtomicU64,
    /// `now_ns` when the sleep under way began (0: awake).
    since: AtomicU64,
}

impl Idle {
    /// A stream's, made now.
    pub(super) fn new() -> Idle {
        Idle {
            born: crate::sys::now_ns(),
            slept: AtomicU64::new(0),
            since: AtomicU64::new(0),
        }
    }

    /// When the stream was made (`now_ns`).
    pub(super) fn born(&self) -> u64 {
        self.born
    }

    /// Before the sleep; returns when it began.
    fn falling_asleep(&self) -> u64 {
        let t = crate::sys::now_ns();
        self.since.store(t, Ordering::Relaxed);
        t
    }

    /// After the sleep that began at `began`.
    fn woke(&self, began: u64) {
        let took = crate::sys::now_ns().saturating_sub(began);
        // Only the worker writes: a plain load and store (as `bump`), `slept` first so that
        // a reader who sees `since` cleared sees the sleep counted.
        self.slept
            .store(self.slept.load(Ordering::Relaxed) + took, Ordering::Release);
        self.since.store(0, Ordering::Release);
    }

    /// Nanoseconds busy from the stream's making up to `now` (`now_ns`): its age less the
    /// time slept, the sleep under way included. A reader racing a wake-up may miss or count
    /// twice the part of that one sleep it straddles.
    pub(super) fn busy_ns(&self, now: u64) -> u64 {
        let since = self.since.load(Ordering::Acquire);
        let slept = self.slept.load(Ordering::Acquire);
        let asleep = slept
            + if since == 0 {
                0
            } else {
                now.saturating_sub(since)
            };
        now.saturating_sub(self.born).saturating_sub(asleep)
    }
}

impl Default for Idle {
    fn default() -> Idle {
        Idle::new()
    }
}

pub(super) struct Shared<E, J: Job<E>> {
    /// The queue (lock-free for producers; see the `ring` module).
    pub(super) ring: Ring<J>,
    /// The stream's turn: the tasks taken from the queue and not yet run, the finished ones
    /// not yet retired, and the task context, behind the *baton*, the right to run the
    /// stream's tasks (`super::baton`): the worker holds it while it is awake and lets go
    /// only to sleep ([`Shared::worker_main`]) or to park, the runner while it runs the
    /// parked stream. Declared right after `ring`: tasks left in it (only if the worker
    /// unwound) are dropped with the queued ones, before the values kept for them (`kept`,
    /// `later`).
    pub(super) turn: super::baton::Baton<Turn<E, J>>,
    /// How the stream's turn last came back to its thread (`HOME`, `HANDED`, `NEEDED`), read
    /// by the thread once it holds the turn again (it then sets `HOME`). Whether the turn is
    /// away from the thread (with the process's runner, `super::runner`) is the ring's *away*
    /// bit, not this: while it is away this stays `HOME` (or what a runner that handed the
    /// stream home and took it back left), and only [`Shared::come_home`] ends that. No
    /// store per park or borrowed turn: the two `SeqCst` stores that said so (`PARKED`,
    /// `BORROWED`, read by nobody) were a tenth of the runner's turn in the pipeline bench
    /// (`perf`, 2026-12-05).
    pub(super) run: AtomicU8,
    /// The parked wait's probe (`Job::park_probe`), for the runner: its function, data and
    /// word, written before the stream goes on the runner's list.
    pub(super) probe_fn: std::sync::atomic::AtomicPtr<()>,
    pub(super) probe_data: std::sync::atomic::AtomicPtr<()>,
    pub(super) probe_arg: AtomicU64,
    /// Producers waiting for room hold this from announcing themselves in `blocked` until
    /// they sleep on `not_full`; the worker takes it to notify them.
    pub(super) room: Mutex<()>,
    pub(super) not_full: Condvar,
    /// Producers waiting for room.
    pub(super) blocked: AtomicUsize,
    /// A drain ran every task and the worker is leaving: a discard has nothing left to
    /// overtake (written under the ring's consumer lock).
    pub(super) drained: AtomicBool,
    pub(super) capacity: usize,
    pub(super) spin: Duration,
    /// Whether a producer may spin for room (`StreamConfig::room_spin_if`).
    pub(super) room_spin: Option<super::RoomSpin>,
    /// Longest wait for room in a full queue (`None`: for ever).
    pub(super) enqueue_timeout: Option<Duration>,
    /// `OPEN`, `DRAINING` or `DISCARDING`; written under the ring's consumer lock (and the
    /// ring is closed before it leaves `OPEN`).
    pub(super) state: AtomicU8,
    /// Tasks finished or discarded so far, always a prefix of the enqueue order (written by
    /// the worker only: `retire`).
    pub(super) retired: Padded<AtomicU64>,
    /// The smallest `retired` value a synchronize waiter waits for (`u64::MAX`: none).
    pub(super) wake_at: AtomicU64,
    /// Threads in `synchronize` waiting for tasks (spinning or asleep): the worker then
    /// retires finished tasks at once instead of after [`FLUSH_GRACE`].
    pub(super) watchers: AtomicUsize,
    pub(super) sync_lock: Mutex<()>,
    pub(super) sync_cv: Condvar,
    /// The first unreported task error.
    pub(super) error: Mutex<Option<E>>,
    /// `ACL_STOP_ON_FAILURE`: once a task fails, later ones are discarded until a synchronize
    /// reports the failure.
    pub(super) stop_on_failure: AtomicBool,
    /// Why the worker does not run the tasks it takes (0: it runs them): [`HALT_FAILED`], set
    /// by a failure in stop-on-failure mode and cleared when a synchronize reports it (the
    /// tasks are dropped unrun); [`HALT_STOPPED`], `aclrtStreamStop` (`super::stop`: the
    /// tasks are kept, unrun, until an abort or a destroy). One load per task for both.
    pub(super) halted: AtomicU8,
    /// Tasks numbered below this (in enqueue order, from 0) were aborted: the worker drops them
    /// unrun, and a running one's error is not stored.
    pub(super) abort_below: AtomicU64,
    /// Tasks a discarding destroy removed; the worker retires them when it exits, after the
    /// task it was running, so `retired` stays an in-order prefix.
    pub(super) discard_pending: AtomicU64,
    pub(super) discarded: AtomicU64,
    pub(super) wakeups: AtomicU64,
    pub(super) worker: WorkerCounters,
    pub(super) last_panic: Mutex<Option<String>>,
    /// Told of each task that fails (`super::failure`).
    pub(super) on_failure: super::failure::OnFailure<E>,
    pub(super) control: Arc<Control>,
    /// Set by the worker as it exits (also when it unwinds), for a destroy that cannot join
    /// it because another one does.
    pub(super) exited: Mutex<bool>,
    pub(super) exited_cv: Condvar,
    /// Values the stream's tasks use through plain pointers ([`super::Stream::keep_alive`]):
    /// declared after `ring`, so dropped after every task still queued.
    pub(super) kept: Mutex<Vec<Arc<dyn std::any::Any + Send + Sync>>>,
    /// The first [`KEPT_FAST`] of them by address, for a look without the lock.
    pub(super) kept_fast: [std::sync::atomic::AtomicPtr<()>; KEPT_FAST],
    /// Values kept until the tasks issued before they were handed over have retired
    /// ([`super::Keeper`]).
    pub(super) later: Mutex<Later>,
    /// The smallest `retired` count a value in `later` waits for (`u64::MAX`: none); read
    /// by `retire`.
    pub(super) release_at: AtomicU64,
    /// How many `Keeper::keep_until_done` have read their bound and not yet published it in
    /// `release_at` (read by `retire_wanted`).
    pub(super) keeping: AtomicU64,
    /// The stream's handle was removed from its table ([`super::Stream::unlist`]): what a
    /// table keeps for it under that handle is no longer its.
    pub(super) unlisted: AtomicBool,
    pub(super) _error: PhantomData<fn() -> E>,
}

/// Values waiting for a stream's tasks to retire (`Shared::later`; see [`super::Keeper`]).
#[derive(Default)]
pub(super) struct Later {
    /// The worker has exited: nothing is kept any more.
    pub(super) closed: bool,
    /// Each value with the `retired` count it waits for.
    pub(super) values: Vec<(u64, Box<dyn std::any::Any + Send>)>,
}

/// How many kept values [`super::Stream::keep_alive`] finds without taking a lock. The
/// values are device-memory files, one per (server, device) a stream copies to or from: 16
/// covers a server's devices. A stream past them paid two mutexes, a scan and a reference
/// count for each side of every copy (a 64-byte `memcpy_async` between two files past the
/// first 4: 1,351 instructions a call against 756 within them, callgrind; 4 until
/// 2026-12-05).
pub(super) const KEPT_FAST: usize = 16;

/// Tasks the worker has run but not yet retired, and their remains (see [`Job::run`]). They
/// are flushed — remains dropped, then the tasks retired in one step — before a task that
/// may block starts, and once the queue has run dry: at once if a `synchronize` is waiting,
/// else when no new task came within [`FLUSH_GRACE`] (or [`FLUSH_AT`] remains have piled
/// up). So a quick task costs no read-modify-write of the shared `retired` counter of its
/// own, and `synchronize` never waits on a task that has finished behind one that blocks.
///
/// Why not flush whenever the queue runs dry: a host thread queuing records one after
/// another into a running stream found the worker ahead of it, taking each task alone and
/// dropping its pin (the last reference but the notify's own, `SimJob`'s remains) at once;
/// the pin's counter, which the host's next record increments, then moved between the two
/// CPUs twice per record (a probe with host and worker on different CPUs: 157–170 ns a
/// `Sim::record` against 114 ns with the remains kept until 16 had piled up, same minutes).
/// Records and waits now hold their pin without a count (`crate::pin`) and leave no remains;
/// they still retire in batches ([`Job::RETIRE_IN_BATCHES`]): one read-modify-write of
/// `retired` per batch, and a worker lingering for the next task looks at the queue only
/// about once a microsecond (see [`LINGER_LOOK_EVERY`]).
struct Finished<R> {
    remains: Vec<R>,
    unretired: u64,
    /// Tasks taken from the queue so far: the number (in enqueue order) of the next one to
    /// run is `taken - local.len()`.
    taken: u64,
}

impl<R> Finished<R> {
    /// Remains that are nothing (no size, no drop: a record's or wait's `()`) are not kept:
    /// [`keep`](Self::keep) and [`kept`](Self::kept) then cost nothing per task (a `Vec<()>`
    /// push still counted its length, with an overflow check).
    const NOTHING: bool = std::mem::size_of::<R>() == 0 && !std::mem::needs_drop::<R>();

    /// Keeps a finished task's remains until the next flush.
    #[inline(always)]
    fn keep(&mut self, r: R) {
        if !Self::NOTHING {
            self.remains.push(r);
        }
    }

    /// How many remains are kept: for remains that are nothing, the tasks not yet retired.
    #[inline(always)]
    fn kept(&self) -> usize {
        if Self::NOTHING {
            self.unretired as usize
        } else {
            self.remains.len()
        }
    }
}

/// A stream's turn state (`Shared::turn`): everything a thread needs to run the stream's next
/// tasks besides the queue. It belongs to the stream, not to the thread running it, so that
/// whoever holds the baton (the lock around it) can go on where the last holder stopped.
pub(super) struct Turn<E, J: Job<E>> {
    /// Tasks taken from the queue, not yet run (see [`Shared::next`]).
    local: Batch<J>,
    /// The finished tasks not yet retired, and their remains.
    done: Finished<J::Remains>,
    /// What the running task sees of the stream (its cells are per stream: the wait's spin
    /// hint, the coarse time stamp, the task number).
    ctx: TaskCtx,
    /// How the current turn goes (see `Flow`).
    flow: Flow,
    _error: PhantomData<fn() -> E>,
}

/// How a turn runs and why it stopped (issue #25, stage 2: a wait parks its stream, not its
/// thread; see `super::runner`).
#[derive(Default)]
pub(super) struct Flow {
    /// A runner holds the turn: only portable jobs run, waits that cannot go on park.
    borrowed: bool,
    /// The next parkable wait blocks the classic way (the stream was handed back home).
    no_park: bool,
    /// The turn stopped with a wait on top that parks the stream.
    parked: bool,
    /// The turn stopped with a job on top that only the home thread may run.
    home_needed: bool,
    /// A reading of the coarse clock for the next batch's time stamp (0: none, the batch
    /// reads the clock if it needs a stamp): the runner's, for a borrowed turn's first batch
    /// (`runner::Borrow::run_borrowed`).
    stamp: u64,
    /// A borrowed turn's waits that find no record go back unbegun (`Parking::Defer`).
    defer: bool,
    /// The next job runs as on any runner's turn (`Parking::Always`), not deferred: the
    /// one deferred last, run again.
    undefer_next: bool,
    /// The turn stopped with a wait on top held back unbegun (`StoppedAs::Deferred`).
    deferred: bool,
}

impl<E, J: Job<E>> Turn<E, J> {
    /// A fresh turn: nothing taken, nothing finished.
    pub(super) fn new(control: Arc<Control>) -> Self {
        Turn {
            local: Batch::new(),
            done: Finished {
                remains: Vec::with_capacity(FLUSH_AT + 2 * TAKE),
                unretired: 0,
                taken: 0,
            },
            ctx: TaskCtx {
                control,
                armed: Cell::new(false),
                spin_hint: Cell::new(0),
                stamp: Cell::new(0),
                seq: Cell::new(0),
                graph: std::cell::OnceCell::new(),
            },
            flow: Flow::default(),
            _error: PhantomData,
        }
    }
}

/// How the process's runner (`super::runner`) sees a parked stream.
impl<E: From<Error> + Send + 'static, J: Job<E>> super::runner::Borrow for Shared<E, J> {
    fn can_go_on(&self) -> bool {
        self.parked_can_go_on()
    }
    fn run_borrowed(&self, stamp: &mut u64, defer: Defer) -> Turned {
        Shared::run_borrowed(self, stamp, defer)
    }
    fn hand_home(&self) {
        self.come_home(HANDED);
    }
    fn take_away(&self) {
        self.ring.go_away();
    }
    fn needs_home(&self) -> bool {
        self.run.load(Ordering::SeqCst) == NEEDED
    }
    #[cfg(test)]
    fn held(&self) -> bool {
        self.control.forced.load(Ordering::Relaxed)
    }
    fn is_home_with_work(&self) -> bool {
        let word_home = !self.ring.is_away();
        word_home && !self.ring.is_sleeping()
    }
}

/// How a stream's turn came home (`Shared::run`): at home, or sent home while parked (the
/// thread's next waits block).
pub(super) const HOME: u8 = 0;
pub(super) const HANDED: u8 = 3;
/// Came home for its own thread to run: a job only it may run, or its exit.
pub(super) const NEEDED: u8 = 4;

enum Next {
    /// Tasks were moved to the worker's local queue.
    Run,
    Empty,
    Exit,
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Shared<E, J> {
    fn has_work(&self, popped: u64) -> bool {
        self.ring.ready(popped) || self.state.load(Ordering::SeqCst) != OPEN
    }

    /// Moves up to [`TAKE`] tasks from the queue to the worker's `local` batch (empty).
    /// Returns the tickets taken so far with it.
    fn next(&self, local: &mut Batch<J>) -> (Next, u64) {
        let mut k = self.ring.taker();
        loop {
            match self.state.load(Ordering::Relaxed) {
                DISCARDING => return (Next::Exit, k.head()),
                state => {
                    if local.fill(&mut k) > 0 {
                        break;
                    }
                    if state == OPEN {
                        return (Next::Empty, k.head());
                    }
                    // Draining: the ring is closed, so `issued` is final; a ticket claimed
                    // before the close is about to be published.
                    if k.head() == self.ring.issued() {
                        self.drained.store(true, Ordering::Relaxed);
                        return (Next::Exit, k.head());
                    }
                    thread::yield_now();
                }
            }
        }
        let head = k.head();
        drop(k);
        // Dekker handshake with `enqueue_slow`: the slots are free (stored above), then we
        // look for producers waiting for room; they announce themselves, then look at the
        // slots. They are woken once the queue is down to half its capacity, not for every
        // batch taken: a host thread that keeps a queue full then refills half of it per
        // wake-up instead of a task or sixteen (each wake-up is a syscall and a context
        // switch on a machine that may have no CPU to spare). The turn that leaves the queue
        // empty wakes them too (nothing is queued past a blocked producer: it is blocked
        // because the queue is full); a queue that stops draining above half (a task waiting
        // for something a blocked producer has yet to queue elsewhere) they find has room
        // by looking again on their own (`super::queue::RECHECK`).
        fence(Ordering::SeqCst);
        if self.blocked.load(Ordering::Relaxed) > 0
            && self.ring.issued().saturating_sub(head) <= (self.capacity / 2) as u64
        {
            let _g = lock(&self.room);
            self.not_full.notify_all();
        }
        (Next::Run, head)
    }

    /// The idle spin's yield ([`crate::yielding::offer_cpu`]); a test may have it read as
    /// having found the CPU free ([`super::Stream::cpu_seems_free`]).
    fn offer_cpu(&self) -> Option<Duration> {
        let took = crate::yielding::offer_cpu();
        #[cfg(test)]
        if self.control.cpu_free.load(Ordering::Relaxed) {
            return took.map(|_| Duration::ZERO);
        }
        took
    }

    /// Waits for work: spins for `self.spin`, then parks until an enqueuer or destroy wakes us.
    ///
    /// The spin yields as a stream wait's does ([`crate::yielding::offer_cpu`]: not for a while
    /// after a yield gave a whole slice away), and a park forgets such a yield: the thread
    /// that took the slice may have been a host thread busy with work of its own (the
    /// bench's `memcpy` baseline beside a copy stream's idle worker), and the wake-up that
    /// ends the park is a fresh start.
    fn idle(&self, popped: u64) {
        J::worker_idle();
        if spin_until_with(self.spin, || self.has_work(popped), || self.offer_cpu()) {
            bump(&self.worker.spin_hits);
            return;
        }
        // The ring's sleep handshake with `enqueue` (see the `ring` module): either we see the
        // task published now, or its producer sees that we sleep and unparks us. A destroy
        // changes `state` and then unparks us (the park token keeps an early unpark).
        if !self.ring.prepare_sleep(popped) {
            return;
        }
        if self.state.load(Ordering::SeqCst) == OPEN {
            bump(&self.worker.sleeps);
            crate::shm::uncount_worker();
            crate::yielding::forget_slices();
            crate::wake_slice::restore();
            let began = self.worker.idle.falling_asleep();
            thread::park();
            self.worker.idle.woke(began);
        }
        self.ring.awake();
    }

    /// Runs the taken tasks in order; each joins the finished ones in `done` (see
    /// [`Finished`]). One unwind guard covers the whole batch and is set up again after a task
    /// panics: a guard per task cost more than a record or a wait itself.
    #[inline(never)]
    fn run_local(
        &self,
        local: &mut Batch<J>,
        ctx: &TaskCtx,
        done: &mut Finished<J::Remains>,
        flow: &mut Flow,
    ) {
        // A fresh stamp, or none (`forget_time`).
        ctx.stamp.set(std::mem::take(&mut flow.stamp));
        while let Err(payload) =
            panic::catch_unwind(AssertUnwindSafe(|| self.run_tasks(local, ctx, done, flow)))
        {
            // The task that was running panicked (its value was dropped while unwinding);
            // the ones after it still run.
            self.task_panicked(payload, ctx, done);
            if local.is_empty() {
                self.flush(done);
            }
        }
    }

    fn run_tasks(
        &self,
        local: &mut Batch<J>,
        ctx: &TaskCtx,
        done: &mut Finished<J::Remains>,
        flow: &mut Flow,
    ) {
        // For the whole batch: a stream handed back to its thread (`no_park`) runs the rest
        // of its taken tasks there, blocking as before (no check per task).
        let parking = if flow.borrowed {
            if flow.defer {
                Parking::Defer
            } else {
                Parking::Always
            }
        } else if std::mem::take(&mut flow.no_park) {
            Parking::Never
        } else {
            Parking::IfCrowded
        };
        while let Some(task) = local.pop() {
            let seq = done.taken - local.len() as u64 - 1;
            // The flag first: `abort` stores the bound before it raises the flag, so a raised
            // flag read here comes with that abort's bound, and the flag is never lowered
            // by a task that abort still covers.
            let abort_raised = self.control.aborting.load(Ordering::SeqCst);
            let aborted = seq < self.abort_below.load(Ordering::SeqCst);
            if !aborted && abort_raised {
                // The first task queued after an abort: the abort is over.
                self.control.aborting.store(false, Ordering::SeqCst);
            }
            if self.control.cancelled.load(Ordering::Relaxed)
                || aborted
                || self.halted.load(Ordering::Relaxed) != 0
            {
                if !aborted && self.keeps_stopped() {
                    if self.keep_stopped(task, local, done, flow) {
                        return;
                    }
                    continue;
                }
                // Taken before a discard, aborted, or behind a failure in stop-on-failure
                // mode: drop it unrun (told which failure, in the last case).
                let after_failure = !aborted
                    && !self.control.cancelled.load(Ordering::Relaxed)
                    && self.halted.load(Ordering::Relaxed) & HALT_FAILED != 0;
                self.flush(done);
                if after_failure {
                    quietly(|| task.drop_after_failure(&self.error));
                } else {
                    drop_quietly(task);
                }
                self.discarded.fetch_add(1, Ordering::Relaxed);
                self.retire(1);
                continue;
            }
            // The job deferred last runs again as on any runner's turn: it takes its place
            // if its record is not there after all (taken by a waiter queued before it).
            let parking = if flow.undefer_next {
                flow.undefer_next = false;
                match parking {
                    Parking::Defer => Parking::Always,
                    p => p,
                }
            } else {
                parking
            };
            if parking.on_runner() && !task.portable() {
                // A runner's turn stops at a job only the stream's own thread may run.
                local.put_back(task);
                self.flush(done);
                flow.home_needed = true;
                return;
            }
            let may_block = task.may_block();
            if may_block {
                self.flush(done);
            }
            if let Some(next) = local.peek() {
                next.prefetch();
            }
            ctx.seq.set(seq);
            let mut stopped = Stopped::new(local);
            let ran = task.run_or_park(
                ctx,
                &mut || {
                    ctx.forget_time();
                    self.flush(done);
                },
                parking,
                &mut stopped,
            );
            let Some((result, rest)) = ran else {
                let parked = stopped.parked();
                ctx.disarm();
                // The job is back in front of `local` (`Stopped`).
                if let Some(how) = parked {
                    self.stop_turn(how, local, done, flow);
                }
                return;
            };
            if may_block {
                ctx.forget_time();
            }
            ctx.disarm();
            bump(&self.worker.completed);
            // Counted before a chained job runs: if that one panics, this one stays counted
            // (its remains are dropped by the unwinding).
            done.unretired += 1;
            match result {
                // An aborted or stopped task's failure is the abort's or the stop's doing,
                // not the task's.
                Err(_) if seq < self.abort_below.load(Ordering::Acquire) || self.is_stopped() => {}
                Err(e) => {
                    bump(&self.worker.failed);
                    self.task_failed(seq, e);
                }
                Ok(()) => {
                    if let Some(quick) = local.pop_if(|j| j.chains() && !ctx.is_cancelled()) {
                        if let Some(next) = local.peek() {
                            next.prefetch();
                        }
                        let (result, quick_rest) = quick.run(ctx, &mut || {});
                        bump(&self.worker.completed);
                        done.unretired += 1;
                        done.keep(quick_rest);
                        if let Err(e) = result {
                            bump(&self.worker.failed);
                            self.task_failed(seq + 1, e);
                        }
                    }
                }
            }
            done.keep(rest);
            if local.is_empty() && (!J::RETIRE_IN_BATCHES || done.kept() >= FLUSH_AT) {
                self.flush(done);
            }
        }
    }

    /// A stopped stream keeps `task`, unrun (`super::stop`): back in front of `local`, and
    /// this thread waits while the stream stays stopped — or, on a runner's borrowed turn,
    /// the stream goes home to wait there (true: the turn stops). Out of line: the task loop
    /// pays only the `halted` load it had.
    ///
    /// A parked job (one with a [`Job::park_probe`]) is not kept: it is the wait that was
    /// running when the stream stopped, parked rather than blocked on its thread, and the
    /// stop cuts the running task short. It is dropped, giving its place in the notify's
    /// queue up, and counted completed, as a wait cut short on its thread is. Kept, it held
    /// that place until the abort, so that the notify's next record was kept for it: another
    /// stream's wait on the notify, queued behind it, waited for the stopped stream's abort.
    #[cold]
    #[inline(never)]
    fn keep_stopped(
        &self,
        task: J,
        local: &mut Batch<J>,
        done: &mut Finished<J::Remains>,
        flow: &mut Flow,
    ) -> bool {
        if task.park_probe().is_some() {
            self.flush(done);
            drop_quietly(task);
            bump(&self.worker.completed);
            self.retire(1);
            return false;
        }
        local.put_back(task);
        if flow.borrowed {
            self.stop_turn(StoppedAs::Home, local, done, flow);
            return true;
        }
        self.flush(done);
        self.wait_while_stopped();
        false
    }

    /// The turn stops before the job in front of `local` (put back there by the call that
    /// stopped it, `Stopped`): it parked (its probe is published for the runner) or only
    /// the stream's own thread may run it.
    #[cold]
    #[inline(never)]
    fn stop_turn(
        &self,
        how: StoppedAs,
        local: &mut Batch<J>,
        done: &mut Finished<J::Remains>,
        flow: &mut Flow,
    ) {
        let parked = how != StoppedAs::Home;
        // A turn that parks keeps its finished tasks unretired (they are retired with the
        // ones after the wait, FLUSH_AT at most) unless a thread already waits for tasks to
        // retire: one locked instruction a park less (`retire`'s `fetch_add`, 5 % of the
        // pipeline bench's samples, `perf`, 2026-12-05). Nobody who comes to wait later can
        // wait for them alone: a synchronize's target and a keeper's are the tasks issued
        // before it, the parked wait among them, so they wait for the wait anyway; once it
        // has run, the turn flushes as usual (`retire_wanted` at the next park, the queue run
        // dry, FLUSH_AT), and a stream sent home flushes there before its wait blocks.
        if !parked || done.kept() >= FLUSH_AT || self.retire_wanted() {
            self.flush(done);
        }
        if parked {
            // A deferred wait's probe reads its notify's flag (no place taken).
            let probe = match how {
                StoppedAs::Deferred => local.peek().and_then(J::defer_probe),
                _ => local.peek().and_then(J::park_probe),
            };
            let (f, data, arg) = match probe {
                Some(p) => (p.f as *mut (), p.data.cast_mut(), p.arg),
                None => (std::ptr::null_mut(), std::ptr::null_mut(), 0),
            };
            // Relaxed: the runner reads them on its own thread after a borrowed turn parked
            // (this one), or after it took the stream from its list's lock, which the home
            // thread takes after this to put the stream there (`runner::park`).
            self.probe_fn.store(f, Ordering::Relaxed);
            self.probe_data.store(data, Ordering::Relaxed);
            self.probe_arg.store(arg, Ordering::Relaxed);
            flow.parked = true;
            flow.deferred = how == StoppedAs::Deferred;
        } else {
            flow.home_needed = true;
        }
    }

    /// Whether the parked stream can go on (its wait's record is there at the head of the
    /// queue, or it is cancelled or being destroyed).
    pub(super) fn parked_can_go_on(&self) -> bool {
        // A cancel or a discard ends the wait now; a drain lets it wait for its record.
        if self.control.stopping() || self.state.load(Ordering::SeqCst) == DISCARDING {
            return true;
        }
        // Relaxed: see `stop_turn`.
        let f = self.probe_fn.load(Ordering::Relaxed);
        if f.is_null() {
            return true;
        }
        // SAFETY: stored from a `Probe::f` in `stop_turn`; the probe's data lives while the
        // parked wait is queued (it is, while the stream is parked).
        let f: fn(*const (), u64) -> bool = unsafe { std::mem::transmute(f) };
        f(
            self.probe_data.load(Ordering::Relaxed),
            self.probe_arg.load(Ordering::Relaxed),
        )
    }

    /// The runner runs the stream's turn (borrowed: `Flow::borrowed`): records and
    /// waits, until a wait parks it again or is deferred (`defer`: see `runner::Defer`; the
    /// runner keeps it on its list), a job only its thread may run is on top, the queue runs
    /// dry (the turn goes home asleep: `Ring::sleep_away`) or the stream exits. `stamp`: see
    /// `runner::Borrow::run_borrowed`.
    pub(super) fn run_borrowed(&self, stamp: &mut u64, defer: Defer) -> Turned {
        let mut turn = self.turn.hold();
        // The runner's clock reading, for the first batch only.
        let mut first = *stamp;
        turn.flow.defer = defer.rest;
        turn.flow.undefer_next = !defer.first;
        loop {
            let Turn {
                local,
                done,
                ctx,
                flow,
                ..
            } = &mut *turn;
            flow.borrowed = true;
            if !local.is_empty() {
                flow.stamp = std::mem::take(&mut first);
                self.run_local(local, ctx, done, flow);
                if flow.parked {
                    flow.parked = false;
                    flow.borrowed = false;
                    flow.undefer_next = false;
                    let deferred = std::mem::take(&mut flow.deferred);
                    drop(turn);
                    return if deferred {
                        Turned::Deferred
                    } else {
                        Turned::Parked
                    };
                }
                if flow.home_needed {
                    flow.home_needed = false;
                    flow.borrowed = false;
                    flow.undefer_next = false;
                    drop(turn);
                    self.come_home(NEEDED);
                    return Turned::Home;
                }
                continue;
            }
            let (next, popped) = self.next(local);
            match next {
                Next::Run => {
                    done.taken = popped;
                    // A second batch: this turn may have run for a while.
                    *stamp = 0;
                }
                Next::Empty => {
                    self.flush(done);
                    // The turn goes home asleep in one step of the ring's tail word: the next
                    // claim wakes the stream's thread (as if it had gone to sleep itself).
                    // Its run state first, while this thread holds the turn (it reads it
                    // only once it has the turn).
                    if self.run.load(Ordering::Relaxed) != HOME {
                        self.run.store(HOME, Ordering::SeqCst);
                    }
                    // The baton first: once the turn is home, its thread may take it.
                    flow.borrowed = false;
                    flow.undefer_next = false;
                    drop(turn);
                    if self.ring.sleep_away(popped) {
                        return Turned::Home;
                    }
                    if self.ring.is_closed() {
                        // Closed while open: the stream's thread unwound
                        // (`worker_unwound`), and waits for the turn to end it.
                        self.come_home(NEEDED);
                        return Turned::Home;
                    }
                    // Still away: still this runner's.
                    turn = self.turn.hold();
                }
                Next::Exit => {
                    flow.borrowed = false;
                    flow.undefer_next = false;
                    drop(turn);
                    self.come_home(NEEDED);
                    return Turned::Home;
                }
            }
        }
    }

    /// The turn of a parked or borrowed stream goes back to the stream's thread, woken here
    /// (`run`: `HOME`, or `HANDED` when a runner gave up: its next wait blocks). The run
    /// state is written before the ring's *away* bit clears, which the thread waits for.
    pub(super) fn come_home(&self, run: u8) {
        self.run.store(run, Ordering::SeqCst);
        self.ring.come_home();
        self.control.unpark_worker();
    }

    /// Books a task that panicked: it counts as completed and failed, its message is kept and
    /// the stream's error becomes 507899 (`DrvInternalError`).
    fn task_panicked(
        &self,
        payload: Box<dyn std::any::Any + Send>,
        ctx: &TaskCtx,
        done: &mut Finished<J::Remains>,
    ) {
        ctx.disarm();
        bump(&self.worker.completed);
        bump(&self.worker.failed);
        bump(&self.worker.panicked);
        let msg = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a task panicked (non-string payload)".to_owned());
        *lock(&self.last_panic) = Some(msg);
        drop_quietly(payload);
        self.task_failed(ctx.seq.get(), E::from(Error::DrvInternalError));
        done.unretired += 1;
    }

    /// The queue ran dry with finished tasks not yet flushed: watches for the next task for
    /// [`FLUSH_GRACE`], looking every [`LINGER_LOOK_EVERY`] `PAUSE`s, and flushes if none
    /// came — or at once when a `synchronize` waits or the stream may not spin (budget 0).
    /// True if a task came (the caller takes it, `done` still unflushed). Not inlined: in
    /// the worker's loop it made one stream's record+wait pair (prefilled) slower, 46.8–48.3
    /// ns against 45.3–46.4 ns as a call and 45.0–47.1 ns before this function existed
    /// (`bench --only inproc`, three runs of each in turns).
    #[inline(never)]
    fn linger(&self, popped: u64, done: &mut Finished<J::Remains>) -> bool {
        if !self.spin.is_zero() {
            let start = Instant::now();
            let grace = FLUSH_GRACE.min(self.spin);
            let mut i: u32 = 0;
            loop {
                std::hint::spin_loop();
                if self.watchers.load(Ordering::Relaxed) != 0 {
                    break;
                }
                i = i.wrapping_add(1);
                if i.is_multiple_of(LINGER_LOOK_EVERY) {
                    if self.has_work(popped) {
                        return true;
                    }
                    if start.elapsed() >= grace {
                        break;
                    }
                }
            }
        }
        self.flush(done);
        false
    }

    /// Drops the remains of the finished tasks, then retires them.
    fn flush(&self, done: &mut Finished<J::Remains>) {
        drop_all(&mut done.remains);
        if done.unretired > 0 {
            self.retire(done.unretired);
            done.unretired = 0;
        }
    }

    /// Whether a thread waits for this stream's tasks to retire: a `synchronize` (spinning,
    /// `watchers`, or asleep, `wake_at`) or a keeper's value (`release_at`, or `keeping`
    /// while its bound is not there yet: read before `release_at`, which the keeper sets
    /// before it unsays `keeping`, so that one of the two is seen).
    pub(super) fn retire_wanted(&self) -> bool {
        self.watchers.load(Ordering::SeqCst) != 0
            || self.wake_at.load(Ordering::SeqCst) != u64::MAX
            || self.keeping.load(Ordering::SeqCst) != 0
            || self.release_at.load(Ordering::SeqCst) != u64::MAX
    }

    /// Task `seq` failed with `e`: the failure hook is told, then `e` is stored.
    #[cold]
    #[inline(never)]
    fn task_failed(&self, seq: u64, e: E) {
        self.on_failure.report(seq, self.ring.submitter(), &e);
        self.store_error(e);
    }

    fn store_error(&self, e: E) {
        let mut slot = lock(&self.error);
        if slot.is_none() {
            *slot = Some(e);
        }
        if self.stop_on_failure.load(Ordering::Relaxed) {
            self.halted.fetch_or(HALT_FAILED, Ordering::Relaxed);
        }
    }

    pub(super) fn retire(&self, n: u64) {
        // Only the worker retires: the count after this retire, known before it is published.
        let r = self.retired.load(Ordering::Relaxed) + n;
        // What the stream's keeper holds for these tasks goes first (they have run), so that
        // a `synchronize` that sees them retired finds it let go, as it found their remains
        // dropped.
        if self.release_at.load(Ordering::SeqCst) <= r {
            self.release(r);
        }
        self.retired.fetch_add(n, Ordering::SeqCst);
        // Dekker handshake with `Keeper::keep_until_done`: it publishes `release_at`, then
        // re-reads `retired`.
        if self.release_at.load(Ordering::SeqCst) <= r {
            self.release(r);
        }
        // Dekker handshake with `synchronize`: it publishes `wake_at` then re-reads `retired`.
        if self.wake_at.load(Ordering::SeqCst) <= r {
            self.wake_at.swap(u64::MAX, Ordering::SeqCst);
            // Waiters hold `sync_lock` from publishing `wake_at` until they sleep, so taking it
            // here means every waiter that published before our swap is asleep and gets this
            // notification; those that publish after the swap see the new `retired`.
            let _g = lock(&self.sync_lock);
            self.sync_cv.notify_all();
        }
    }

    /// The worker thread unwound outside the tasks' unwind guards (a bug of ours: a task's
    /// own panic is caught in `run_local`). Nothing the stream holds may be lost or waited
    /// for in vain: the queue takes no more tasks (an enqueue answers 107017), the tasks taken
    /// and still queued are dropped unrun (what they hold, pins included, goes with them) and
    /// counted as discarded, every task is retired so that a `synchronize` returns, with
    /// 507899 (`DrvInternalError`) as the stream's error, and the values kept for the tasks
    /// are let go. Must not panic: it runs while the thread unwinds (a panic there aborts the
    /// process). If the thread unwound while its stream was parked on another thread's
    /// runner (the turn away), it waits for the turn to come home ([`Self::turn_home`]):
    /// taking the baton while the turn is away would break the hand-over — the runner would
    /// then find it held (a panic on its thread, another stream's worker) or probe a parked
    /// wait this thread had dropped (its data freed). The runner runs what the turn holds and
    /// retires it; the tasks queued behind it are dropped here. Should the turn not come home
    /// within [`UNWOUND_WAIT`], or the baton be held while it is home (a broken hand-over),
    /// the turn is not taken (`Baton::hold` would panic): the queued tasks are still dropped
    /// and retired and the stream failed, the tasks the turn holds are left to its holder,
    /// and standard error says so.
    #[cold]
    pub(super) fn worker_unwound(&self) {
        let mut left = Vec::new();
        {
            let mut k = self.ring.taker();
            let end = self.ring.close();
            k.take_published(end, |t| left.push(t));
        }
        // The stream's failure first: a synchronize that the runner's retires end while this
        // thread waits for the turn reports it.
        *lock(&self.last_panic) = Some(
            "the stream's worker thread panicked outside its tasks (its message went to \
             standard error); the tasks it had not run were dropped"
                .to_owned(),
        );
        self.store_error(E::from(Error::DrvInternalError));
        let mut turn = if self.turn_home() {
            self.turn.try_hold()
        } else {
            None
        };
        if let Some(turn) = turn.as_mut() {
            turn.local.drain_into(&mut left);
        } else {
            eprintln!(
                "acl-notify-sim: a stream's worker thread unwound while another thread held \
                 its turn (for more than {UNWOUND_WAIT:?}); the tasks that turn holds are left \
                 to it"
            );
        }
        let n = left.len() as u64;
        drop_all(&mut left);
        // No task of the stream is left (`TaskCtx::graph_slot`); with the turn held elsewhere,
        // its holder still has the tasks and the context.
        if let Some(turn) = turn.as_mut() {
            turn.ctx.release_graph();
        }
        self.discarded.fetch_add(n, Ordering::Relaxed);
        if let Some(mut turn) = turn {
            self.flush(&mut turn.done);
        }
        self.retire(n + self.discard_pending.swap(0, Ordering::SeqCst));
        self.close_later();
        // Producers waiting for room find the queue closed.
        if self.blocked.load(Ordering::SeqCst) > 0 {
            let _g = lock(&self.room);
            self.not_full.notify_all();
        }
    }

    /// For [`Self::worker_unwound`] on the stream's own thread, the ring closed: whether the
    /// turn is home, waiting for it at most [`UNWOUND_WAIT`] if it is away on the runner. The
    /// runner hands it home once the queue it runs is empty (it finds the ring closed,
    /// `run_borrowed`), once the stream stayed parked `runner::HOME_AFTER`, or when it gives
    /// up, and wakes this thread (`come_home`).
    #[cold]
    fn turn_home(&self) -> bool {
        let start = Instant::now();
        crate::shm::blocked(|| {
            while self.ring.is_away() {
                let left = UNWOUND_WAIT.saturating_sub(start.elapsed());
                if left.is_zero() {
                    return false;
                }
                thread::park_timeout(left.min(Duration::from_millis(5)));
            }
            true
        })
    }

    /// `ready` gets the worker's thread id, or `None` if it could not be placed on `cpu` (it
    /// then returns at once). `adaptive`: the worker may move itself when crowded
    /// ([`crate::placement`]).
    pub(super) fn worker_main(
        self: Arc<Self>,
        cpu: Option<usize>,
        adaptive: bool,
        policy: WorkerPolicy,
        ready: mpsc::Sender<Option<i32>>,
    ) {
        /// Announces the worker's exit, however it leaves; if it unwinds, first fails what
        /// the stream still holds ([`Shared::worker_unwound`]).
        struct Exit<'a, E: From<Error> + Send + 'static, J: Job<E>>(&'a Shared<E, J>);
        impl<E: From<Error> + Send + 'static, J: Job<E>> Drop for Exit<'_, E, J> {
            fn drop(&mut self) {
                if thread::panicking() {
                    self.0.worker_unwound();
                }
                crate::shm::uncount_worker();
                *lock(&self.0.exited) = true;
                self.0.exited_cv.notify_all();
            }
        }
        let _exit = Exit(&self);
        // The spawner waits for this before it returns the stream. A dropped receiver (the
        // spawner gave up) is harmless.
        if let Some(Err(_)) = cpu.map(pin_current_thread) {
            let _ = ready.send(None);
            return;
        }
        if adaptive {
            crate::placement::enable_on_this_thread();
        }
        if policy == WorkerPolicy::Batch {
            // SAFETY: sched_setscheduler(2) on the calling thread (0) with a valid parameter
            // (priority 0, the only one SCHED_BATCH takes); an unprivileged thread may switch
            // to it. A refusal leaves the thread as it was, which is correct, only slower.
            unsafe {
                let param = libc::sched_param { sched_priority: 0 };
                libc::sched_setscheduler(0, libc::SCHED_BATCH, &param);
            }
        }
        let _ = ready.send(Some(gettid()));
        drop(ready);
        // The baton, held while this thread is awake (see `Shared::turn`).
        let mut turn = self.turn.hold();
        loop {
            let Turn {
                local,
                done,
                ctx,
                flow,
                ..
            } = &mut *turn;
            if !local.is_empty() {
                self.run_local(local, ctx, done, flow);
                if flow.parked {
                    flow.parked = false;
                    drop(turn);
                    // `run` is `HOME` (set when the turn last came back): see `Shared::run`.
                    self.ring.go_away();
                    super::runner::park(Arc::clone(&self) as Arc<dyn super::runner::Borrow>);
                    #[cfg(test)]
                    if self.ring.is_away()
                        && self.control.unwind_away.swap(false, Ordering::Relaxed)
                    {
                        panic!("test: the worker unwinds while its stream is on the runner");
                    }
                    // Wait until the stream is ours again: whoever clears the ring's *away*
                    // bit wakes this thread after it (`come_home`, or the claim that finds
                    // the stream asleep after `Ring::sleep_away`); the park token keeps a
                    // wake-up that comes before the park. Out of the busy count meanwhile
                    // (`shm::busy`): nobody counts this thread when it is woken.
                    crate::shm::blocked(|| {
                        while self.ring.is_away() {
                            thread::park();
                        }
                    });
                    turn = self.turn.hold();
                    if self.run.swap(HOME, Ordering::SeqCst) == HANDED {
                        turn.flow.no_park = true;
                    }
                    self.ring.awake();
                }
                continue;
            }
            let (next, popped) = self.next(local);
            match next {
                Next::Run => {
                    done.taken = popped;
                    #[cfg(test)]
                    if self.control.unwind_worker.swap(false, Ordering::Relaxed) {
                        panic!("test: the worker unwinds with tasks taken");
                    }
                }
                Next::Empty => {
                    if done.unretired == 0 || !self.linger(popped, done) {
                        // Asleep, the thread does not run the stream: it lets the baton go.
                        drop(turn);
                        self.idle(popped);
                        turn = self.turn.hold();
                    }
                }
                Next::Exit => break,
            }
        }
        self.flush(&mut turn.done);
        // No task of the stream is left: `next` says `Exit` only with none taken
        // (`TaskCtx::graph_slot`).
        debug_assert!(turn.local.is_empty());
        turn.ctx.release_graph();
        drop(turn);
        let n = self.discard_pending.swap(0, Ordering::SeqCst);
        if n > 0 {
            self.retire(n);
        }
        // No task runs from here on (the ring is closed, and a discard dropped the rest).
        self.close_later();
    }
}

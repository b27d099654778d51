//! The stream engine: one worker thread per stream runs boxed tasks strictly in order, with
//! CANN's stream semantics (errors stored and reported once, synchronize with a deadline,
//! query, drain-or-discard on destroy) and a fast enqueue→execute handoff. It knows nothing
//! about notifies: the simulator wraps records, waits and host functions into [`Task`]s.
//!
//! # Semantics
//!
//! - [`Stream::enqueue`] returns as soon as the task is queued. The queue is bounded
//!   ([`StreamConfig::capacity`], default [`DEFAULT_CAPACITY`]); a full queue makes `enqueue`
//!   *wait* for room, as CANN's does — but not for ever: if no room appears within
//!   [`StreamConfig::enqueue_timeout`] (default [`DEFAULT_ENQUEUE_TIMEOUT`]), the task is
//!   dropped unrun and `enqueue` fails with `StreamTaskFull` (507002). A queue that stays full
//!   that long is almost always a deadlock: the task at its head waits, with no timeout, for
//!   something only the blocked caller would do next. (A task that enqueues on its own stream
//!   cannot wait for itself, so from the stream's own worker the queue grows past its capacity
//!   instead.)
//! - CANN's "continue" failure mode: the first task error is stored on the stream, later tasks
//!   still run, later errors are counted ([`StreamStats::failed`]) but not stored.
//!   [`Stream::synchronize`] waits for every task enqueued before the call and then returns the
//!   stored error once, clearing it. A [`SyncWait::AtMost`] deadline that expires returns
//!   `StreamSyncTimeout` (507046) and clears nothing; `AtMost(Duration::ZERO)` polls.
//! - A task that panics does not kill the worker: the panic is caught and stored like an error,
//!   as `DrvInternalError` (507899); its message is kept for [`Stream::last_panic`].
//! - [`Stream::destroy`] with [`StreamDestroy::Drain`] (`aclrtDestroyStream`) runs every queued
//!   task, then joins the worker. [`StreamDestroy::Discard`] (`aclrtDestroyStreamForce`) drops
//!   the tasks that have not started (their closures, and what they captured, are dropped on
//!   the destroying thread — except the few the worker had already taken from the queue, see
//!   below, which it drops itself), cancels the running one (see below), and joins.
//! - **Drop is `Discard`.** CANN's `aclrtDestroyStream` waits for the queued tasks, and so does
//!   an explicit `destroy(Drain)` here — including a wait that is never recorded, which then
//!   blocks for ever, exactly like CANN. An implicit drop (unwinding, a backend torn down, a
//!   process exiting) must never hang, so it discards. Owners that want CANN's draining
//!   destroy call `destroy(StreamDestroy::Drain)` explicitly.
//!
//! # Cancellation: how a blocking task cooperates
//!
//! Each task gets a [`TaskCtx`]. A discard cancels the stream: [`TaskCtx::is_cancelled`] turns
//! true (for good) and the engine then calls the task's registered *waker*. A task that blocks
//! in an external wait (the notify table's futex, a condition variable…) must:
//!
//! 1. register a waker with [`TaskCtx::on_cancel`] **before** it blocks, and keep the returned
//!    [`OnCancel`] guard alive while it may block (dropping the guard unregisters the waker);
//! 2. make the waker *change the state the wait checks* and then wake the waiter — e.g. store a
//!    "cancelled" value into the waiter's futex word, then `FUTEX_WAKE`; or set a flag under the
//!    condition variable's mutex, then notify. A bare wake with no state change can be lost if
//!    it lands just before the task goes to sleep;
//! 3. treat the changed state (or [`TaskCtx::is_cancelled`], re-checked after every wake-up) as
//!    "stop waiting" and return promptly — the result of a cancelled task is still recorded,
//!    but nobody will synchronize on it any more.
//!
//! If the stream is already cancelled when `on_cancel` is called, the waker runs at once, on
//! the calling thread, before `on_cancel` returns; so "register, then block until the waker's
//! state change" is race-free without a separate check. The waker runs while the engine holds
//! the registration lock: it must be short and must not touch the stream or the [`TaskCtx`].
//! [`TaskCtx::sleep`] is a ready-made cancellable sleep, and [`TaskCtx::cancel_token`] hands
//! the flag to code that cannot see the context. A wait primitive that cannot be woken by a
//! state change should block in bounded slices and re-check [`CancelToken::is_cancelled`].
//!
//! # The hot path
//!
//! A queue holds [`Job`]s: boxed closures by default, or the owner's own job type (the
//! simulator's records and waits are plain enum values, so they cost no allocation). The
//! queue is a lock-free ring in the stream's own memory (the `ring` module says why that and
//! not a crate): `enqueue` claims a ticket with one compare-and-swap, writes the slot and
//! publishes it with a release store — no lock, no fence, no syscall unless the queue is full
//! or the worker sleeps; the worker's sleep is a bit of the same word, so the claim that
//! clears it knows to wake the worker and no wake-up is lost. The worker takes up to 16
//! queued tasks per turn under the consumer's lock (which only a discarding destroy also
//! takes) and runs them in order (so up to `capacity + 15` tasks can be pending; `queued`
//! counts those still in the queue). Finished tasks are retired (what `synchronize`
//! and `query` count) in one step per batch, or per 16 tasks of a kind that leaves
//! something behind ([`Job::run`]'s remains, dropped then too) while tasks keep coming, and
//! never later than before a task that may block starts or blocks ([`Job::may_block`]) or
//! soon after the queue runs dry (at once for a waiting `synchronize`, else after 2 µs
//! without a new task, the worker looking at the queue only about once a microsecond
//! meanwhile: see `worker::Finished`). The worker, having
//! run out of tasks, spins on the next slot for a bounded time
//! ([`StreamConfig::spin`], default [`DEFAULT_SPIN`]) before it parks on its thread's futex
//! (`std::thread::park`, whose token makes an unpark that races ahead of the park harmless).
//! The spin is tight for its first 2 µs and then yields the CPU between checks, so that on a
//! busy machine a spinning worker does not keep the producer it waits for off a shared CPU.
//! So a task enqueued on a recently active stream is picked up without any syscall, and an idle
//! stream sleeps without burning a core. `synchronize` spins the same way before it sleeps on
//! a condition variable, its window starting afresh whenever the worker finishes a task (up to
//! 1 ms in all: the `sync_spin` module says why); completions wake sleeping `synchronize` callers only when one waits
//! for that task (the waiter publishes the task number it waits for). Counters
//! ([`Stream::stats`]) are single-writer plain stores on the worker side, so they cost nothing
//! measurable. `examples/stream_handoff.rs` measures the handoff against a raw futex wake.

mod batch;
mod baton;
mod cancel;
mod failure;
mod job;
mod keeper;
mod queue;
mod runner;
mod stop;

/// Whether a runner runs (see `runner`).
pub(crate) fn runner_active() -> bool {
    runner::active()
}

mod sync_spin;
mod worker;

use std::fmt;
use std::marker::PhantomData;
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use acl_notify_core::{Error, StreamDestroy, StreamStatus, SyncWait};

use crate::ring::{Padded, Ring};

pub use crate::placement::{allowed_cpus, pin_current_thread};
pub(crate) use cancel::BlockedNote;
pub use failure::{FailureHook, TaskFailure};

/// Whether the stream whose [`Stream::key`] is `key` is cancelled or aborting
/// ([`TaskCtx::is_cancelled`]), for code inside one of its tasks that has no [`TaskCtx`] (a
/// host function).
///
/// # Safety
///
/// `key` must be the key of a stream one of whose tasks the calling thread is running (its
/// control block then outlives the call).
pub(crate) unsafe fn cancelled_by_key(key: usize) -> bool {
    // SAFETY: the caller's guarantee: `key` is the address of a live `Control`.
    unsafe { &*(key as *const cancel::Control) }.stopping()
}
pub use cancel::{CancelToken, Cancelled, LazyCancel, OnCancel, TaskCtx};
pub use job::{Job, Parking, Probe, Stopped, StoppedAs, Task};
pub use keeper::Keeper;

use cancel::Control;
use worker::{HALT_FAILED, HALT_STOPPED, Shared, Turn, WorkerCounters};

/// Default queue capacity: how many tasks may wait before `enqueue` waits for room.
pub const DEFAULT_CAPACITY: usize = 1024;

/// Default bound on how long `enqueue` waits for room in a full queue before it fails with
/// `StreamTaskFull` (507002).
pub const DEFAULT_ENQUEUE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default time the worker spins for new work after its queue runs dry, before it sleeps.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(10);

/// How long [`Stream::spawn`] tries again to start a worker thread the system refused for
/// the moment (EAGAIN, ENOMEM).
const SPAWN_RETRY: Duration = Duration::from_secs(2);

/// Whether the system's refusal `e` of a new thread may pass (EAGAIN: a table of threads or
/// PIDs full; ENOMEM: no memory for its stack), rather than be a lasting one (EINVAL, EPERM).
fn spawn_may_succeed_later(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOMEM))
}

#[cfg(test)]
thread_local! {
    /// Test hook: how many of this thread's next worker spawns the "system" refuses, and
    /// with which error (see [`refused_spawn`]).
    static REFUSE_SPAWNS: std::cell::Cell<(u32, i32)> = const { std::cell::Cell::new((0, 0)) };
}

/// The refusal a test asked for on this thread's next worker spawn, if any.
#[cfg(test)]
fn refused_spawn() -> Option<std::io::Error> {
    REFUSE_SPAWNS.with(|r| {
        let (n, errno) = r.get();
        (n > 0).then(|| {
            r.set((n - 1, errno));
            std::io::Error::from_raw_os_error(errno)
        })
    })
}

#[cfg(not(test))]
fn refused_spawn() -> Option<std::io::Error> {
    None
}

/// Stream states (an `AtomicU8`, written only under the ring's consumer lock).
const OPEN: u8 = 0;
const DRAINING: u8 = 1;
const DISCARDING: u8 = 2;

/// How a stream is set up before its worker starts.
#[derive(Clone, Debug)]
pub struct StreamConfig {
    name: String,
    capacity: usize,
    spin: Duration,
    cpu: Option<usize>,
    adaptive_cpu: bool,
    policy: WorkerPolicy,
    enqueue_timeout: Option<Duration>,
    device: u32,
    room_spin: Option<RoomSpin>,
}

/// Whether a producer that finds the queue full may spin for room now
/// ([`StreamConfig::room_spin_if`]).
#[derive(Clone)]
pub struct RoomSpin(std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for RoomSpin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoomSpin")
    }
}

/// The kernel scheduling policy of a stream's worker thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WorkerPolicy {
    /// `SCHED_OTHER`, the default: woken (by an enqueue, a record), the worker may take the
    /// CPU from the thread running there at once.
    #[default]
    Normal,
    /// `SCHED_BATCH`: woken, the worker waits until the thread running on its CPU sleeps or
    /// its turn ends. For a worker that shares its one CPU with the threads that feed it:
    /// there, a worker woken by the first task of a burst would take the CPU from the host
    /// queuing the rest, run that one task, sleep, and be woken again by the next (the
    /// simulator uses it for processes limited to one CPU; see `Sim`'s stream spawning).
    /// If the kernel refuses it, the worker runs as `Normal`.
    Batch,
}

impl StreamConfig {
    /// A configuration with the defaults; `name` names the worker thread (Linux keeps the first
    /// 15 bytes).
    pub fn new(name: impl Into<String>) -> Self {
        StreamConfig {
            name: name.into(),
            capacity: DEFAULT_CAPACITY,
            spin: DEFAULT_SPIN,
            cpu: None,
            adaptive_cpu: false,
            policy: WorkerPolicy::Normal,
            enqueue_timeout: Some(DEFAULT_ENQUEUE_TIMEOUT),
            device: 0,
            room_spin: None,
        }
    }

    /// The device the stream belongs to (default 0), which its tasks read from their task
    /// context (a host function's device: [`crate::host_function_device`]).
    pub fn device(mut self, device: u32) -> Self {
        self.device = device;
        self
    }

    /// The worker's scheduling policy (default [`WorkerPolicy::Normal`]).
    pub fn policy(mut self, policy: WorkerPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// How long `enqueue` waits for room in a full queue before it drops the task and fails
    /// with `StreamTaskFull` (507002); `None` waits for ever (CANN's behaviour).
    pub fn enqueue_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.enqueue_timeout = timeout;
        self
    }

    /// Runs the worker on this CPU only (`None`, the default, leaves placement to the
    /// scheduler). The worker sets its own affinity before the stream is returned; if the
    /// kernel refuses (a CPU this process may not use, or one that does not exist),
    /// [`Stream::spawn`] fails with 207005 and no thread is left behind.
    pub fn cpu(mut self, cpu: Option<usize>) -> Self {
        self.cpu = cpu;
        self
    }

    /// Lets a worker the scheduler places (no [`cpu`](Self::cpu)) move itself to another CPU
    /// when its waits keep losing its CPU to another thread (`crate::placement`; default
    /// off: the stream engine alone never moves its worker).
    pub fn adaptive_cpu(mut self, on: bool) -> Self {
        self.adaptive_cpu = on;
        self
    }

    /// How many tasks may be queued before `enqueue` waits for room (at least 1; 0 is taken
    /// as 1).
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// How long the worker (and a synchronizing thread) spins before sleeping; `ZERO` sleeps
    /// at once.
    pub fn spin(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// A producer that finds the queue full spins for room first (`queue::ROOM_SPIN`) when
    /// `may` says so at that moment (and the stream's [`spin`](Self::spin) is not zero);
    /// without it (the default) it sleeps at once.
    pub fn room_spin_if(mut self, may: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.room_spin = Some(RoomSpin(std::sync::Arc::new(may)));
        self
    }
}

/// A snapshot of a stream's counters. Each counter is exact; the snapshot as a whole is not
/// atomic (counters read while tasks run may be one task apart).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StreamStats {
    /// Tasks accepted by `enqueue`.
    pub enqueued: u64,
    /// Tasks that ran (successfully, with an error, or panicking).
    pub completed: u64,
    /// Tasks that ended with an error or a panic.
    pub failed: u64,
    /// Tasks that panicked (included in `failed`).
    pub panicked: u64,
    /// Tasks dropped without running by a discarding destroy.
    pub discarded: u64,
    /// Times the worker went to sleep on its futex for lack of work.
    pub sleeps: u64,
    /// Wake syscalls issued by `enqueue` because the worker was asleep.
    pub wakeups: u64,
    /// Times the worker found new work while spinning, without sleeping.
    pub spin_hits: u64,
}

/// Locks a mutex, ignoring poisoning: no critical section in this module leaves its data in a
/// broken state when it unwinds.
fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Bumps a counter only ever written by one thread: a plain load and store, no locked RMW.
fn bump(counter: &AtomicU64) {
    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
}

/// A thread waiting in `synchronize`, counted in `Shared::watchers` while it lives.
struct Watch<'a>(&'a AtomicUsize);

impl<'a> Watch<'a> {
    fn new(watchers: &'a AtomicUsize) -> Self {
        watchers.fetch_add(1, Ordering::SeqCst);
        Watch(watchers)
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A wake-up for a [`Stream::synchronize_unless`] asleep ([`SyncInterrupt::arm`]).
pub type SyncWake = Arc<dyn Fn() + Send + Sync>;

/// What may end a [`Stream::synchronize_unless`] before the stream's tasks have run: a
/// condition outside the stream, which the owner then answers instead.
pub trait SyncInterrupt {
    /// Whether the synchronize gives up now (checked while it spins, and before each sleep).
    fn raised(&self) -> bool;
    /// Whether it can ever be raised: `false` arms no wake-up (a plain synchronize's).
    fn can_raise(&self) -> bool {
        true
    }
    /// The synchronize is about to sleep: from now until [`disarm`](Self::disarm), call
    /// `wake` after the interrupt is raised (`raised` answering true before the call).
    fn arm(&self, wake: &SyncWake);
    /// The synchronize no longer sleeps: forget `wake` (the same `Arc` given to `arm`).
    fn disarm(&self, wake: &SyncWake);
}

/// No interrupt: a plain [`Stream::synchronize`].
struct NoInterrupt;

impl SyncInterrupt for NoInterrupt {
    fn raised(&self) -> bool {
        false
    }
    fn can_raise(&self) -> bool {
        false
    }
    fn arm(&self, _: &SyncWake) {}
    fn disarm(&self, _: &SyncWake) {}
}

/// An interrupt armed with a wake-up, disarmed when dropped.
struct Armed<'a> {
    interrupt: &'a dyn SyncInterrupt,
    wake: SyncWake,
}

impl<'a> Armed<'a> {
    fn new(interrupt: &'a dyn SyncInterrupt, wake: SyncWake) -> Self {
        interrupt.arm(&wake);
        Armed { interrupt, wake }
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        self.interrupt.disarm(&self.wake);
    }
}

/// How a synchronize's sleep ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slept {
    Retired,
    Expired,
    Interrupted,
}

/// Drops a value, swallowing a panic from its `Drop` (it must not take the worker or a
/// destroying thread down half-way). The payload of such a panic is leaked rather than
/// dropped, since dropping it could panic again.
fn drop_quietly<T>(value: T) {
    quietly(move || drop(value));
}

/// Runs `f` (a drop, see [`drop_quietly`]), its panic caught and its payload forgotten.
fn quietly(f: impl FnOnce()) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(f)) {
        mem::forget(payload);
    }
}

/// Drops every value of `v` (quietly, see [`drop_quietly`]), keeping its allocation. One
/// unwind guard covers them all (set up again after a panicking drop, for the rest).
fn drop_all<T>(v: &mut Vec<T>) {
    let mut left = v.drain(..);
    while let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| left.by_ref().for_each(drop)))
    {
        mem::forget(payload);
    }
}

/// How the message of [`Stream::spawn`]'s 207005 begins when the system refused the worker
/// thread (a limit on threads reached), as opposed to a worker that could not be placed.
pub const THREAD_REFUSED: &str = "the system refused the stream's worker thread";

/// An in-order asynchronous task queue with its own worker thread. `Send + Sync`: share it
/// (e.g. in an `Arc`) between the threads that enqueue, synchronize and query.
pub struct Stream<E: From<Error> + Send + 'static, J: Job<E> = Task<E>> {
    shared: Arc<Shared<E, J>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    tid: i32,
    name: String,
    cpu: Option<usize>,
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Stream<E, J> {
    /// Starts a stream with the default configuration; `name` names its worker thread.
    ///
    /// Codes: 207005 (`ResourceAllocFail`) the worker thread could not be started.
    pub fn new(name: impl Into<String>) -> Result<Self, E>
    where
        E: acl_notify_core::BackendError,
    {
        Self::spawn(StreamConfig::new(name))
    }

    /// Starts a stream: spawns its worker and waits until it runs.
    ///
    /// Codes: 207005 (`ResourceAllocFail`) the worker thread could not be started, with the
    /// reason (the system's, for a thread the system refused).
    pub fn spawn(config: StreamConfig) -> Result<Self, E>
    where
        E: acl_notify_core::BackendError,
    {
        let control = Arc::new(Control {
            cancelled: AtomicBool::new(false),
            aborting: AtomicBool::new(false),
            waker: Mutex::new(None),
            worker: OnceLock::new(),
            blocked_on: AtomicU64::new(0),
            moved_at: AtomicU64::new(0),
            host_fn_cpu: AtomicU32::new(u32::MAX),
            home_tid: std::sync::atomic::AtomicI32::new(0),
            device: config.device,
            #[cfg(test)]
            forced: AtomicBool::new(false),
            #[cfg(test)]
            parks: AtomicU64::new(0),
            #[cfg(test)]
            unwind_worker: AtomicBool::new(false),
            #[cfg(test)]
            unwind_away: AtomicBool::new(false),
            #[cfg(test)]
            never_park: AtomicBool::new(false),
            #[cfg(test)]
            late_wake: AtomicBool::new(false),
            #[cfg(test)]
            hold: std::sync::atomic::AtomicU8::new(cancel::HOLD_OFF),
            #[cfg(test)]
            cpu_free: AtomicBool::new(false),
        });
        let shared = Arc::new(Shared {
            ring: Ring::new(config.capacity),
            turn: baton::Baton::new(Turn::new(Arc::clone(&control))),
            run: AtomicU8::new(worker::HOME),
            probe_fn: Default::default(),
            probe_data: Default::default(),
            probe_arg: AtomicU64::new(0),
            room: Mutex::new(()),
            not_full: Condvar::new(),
            blocked: AtomicUsize::new(0),
            drained: AtomicBool::new(false),
            capacity: config.capacity,
            spin: config.spin,
            room_spin: config.room_spin.clone(),
            enqueue_timeout: config.enqueue_timeout,
            state: AtomicU8::new(OPEN),
            retired: Padded::default(),
            wake_at: AtomicU64::new(u64::MAX),
            watchers: AtomicUsize::new(0),
            sync_lock: Mutex::new(()),
            sync_cv: Condvar::new(),
            error: Mutex::new(None),
            stop_on_failure: AtomicBool::new(false),
            halted: AtomicU8::new(0),
            abort_below: AtomicU64::new(0),
            discard_pending: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
            worker: WorkerCounters::default(),
            last_panic: Mutex::new(None),
            on_failure: failure::OnFailure::new(),
            control,
            exited: Mutex::new(false),
            exited_cv: Condvar::new(),
            kept: Mutex::new(Vec::new()),
            kept_fast: Default::default(),
            later: Mutex::default(),
            release_at: AtomicU64::new(u64::MAX),
            keeping: AtomicU64::new(0),
            unlisted: AtomicBool::new(false),
            _error: PhantomData,
        });
        let (tx, rx) = mpsc::channel();
        let cpu = config.cpu;
        let adaptive = config.adaptive_cpu && cpu.is_none();
        let policy = config.policy;
        // A refusal the system calls temporary (EAGAIN: its table of threads or PIDs full,
        // or memory for the stack short, for a moment on a machine where other jobs start
        // and end processes) is tried again, for up to `SPAWN_RETRY`: a conformance run
        // beside four builds (load 15 on 2 CPUs) once failed `create_stream` so.
        let tried = Instant::now();
        let mut pause = Duration::from_millis(1);
        let handle = loop {
            let (for_worker, tx) = (Arc::clone(&shared), tx.clone());
            let spawned = match refused_spawn() {
                Some(e) => Err(e),
                None => thread::Builder::new()
                    .name(config.name.clone())
                    .spawn(move || for_worker.worker_main(cpu, adaptive, policy, tx)),
            };
            match spawned {
                Ok(h) => break h,
                Err(e) if spawn_may_succeed_later(&e) && tried.elapsed() + pause < SPAWN_RETRY => {
                    thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(e) => {
                    return Err(E::with_message(
                        Error::ResourceAllocFail,
                        format_args!(
                            "{THREAD_REFUSED}: {e} (for {:.1} s). \
                             Each stream runs a thread: the machine's or the process's limit \
                             of threads was reached (ulimit -u, /proc/sys/kernel/threads-max \
                             and pid_max, a cgroup's pids.max) or its memory is short; \
                             destroy the streams no longer used, or raise the limit",
                            tried.elapsed().as_secs_f64()
                        ),
                    ));
                }
            }
        };
        // Only the worker's sender is left: `recv` fails if the worker dies before it reports.
        drop(tx);
        // Set before any enqueue can exist: `Stream` is returned only below.
        let _ = shared.control.worker.set(handle.thread().clone());
        let tid = match rx.recv() {
            Ok(Some(tid)) => tid,
            // The worker could not be placed (it has returned) or died before it reported.
            Ok(None) | Err(_) => {
                let why = match handle.join() {
                    Ok(()) => "could not be placed on its CPU",
                    Err(_) => "panicked before it started",
                };
                return Err(E::with_message(
                    Error::ResourceAllocFail,
                    format_args!("the stream's worker thread {why}"),
                ));
            }
        };
        shared.control.home_tid.store(tid, Ordering::Relaxed);
        Ok(Stream {
            shared,
            worker: Mutex::new(Some(handle)),
            tid,
            name: config.name,
            cpu,
        })
    }

    /// Sleeps until the stream has retired `target` tasks or `deadline` (`None`: none) has
    /// passed: whether it has. The caller holds a [`Watch`], so that the worker retires what
    /// it finished at once.
    fn sleep_until_retired(&self, target: u64, deadline: Option<Instant>) -> bool {
        self.sleep_until_retired_unless(target, deadline, &NoInterrupt) == Slept::Retired
    }

    /// [`sleep_until_retired`](Self::sleep_until_retired) that also ends once `interrupt` is
    /// raised (armed with a wake-up that takes `sync_lock`: raised before the check below, or
    /// woken after this sleeps; one that cannot be raised is not armed).
    fn sleep_until_retired_unless(
        &self,
        target: u64,
        deadline: Option<Instant>,
        interrupt: &dyn SyncInterrupt,
    ) -> Slept {
        let s = &*self.shared;
        // Armed before `sync_lock` is taken: the wake-up takes it, under the interrupt's own
        // lock (`SyncInterrupt::arm`).
        let _armed = interrupt.can_raise().then(|| {
            let weak = Arc::downgrade(&self.shared);
            let wake: SyncWake = Arc::new(move || {
                if let Some(s) = weak.upgrade() {
                    let _g = lock(&s.sync_lock);
                    s.sync_cv.notify_all();
                }
            });
            Armed::new(interrupt, wake)
        });
        let mut g = lock(&s.sync_lock);
        loop {
            // Dekker handshake with `Shared::retire` (see there).
            s.wake_at.fetch_min(target, Ordering::SeqCst);
            if s.retired.load(Ordering::SeqCst) >= target {
                return Slept::Retired;
            }
            if interrupt.raised() {
                return Slept::Interrupted;
            }
            g = match deadline {
                None => s.sync_cv.wait(g).unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Slept::Expired;
                    }
                    s.sync_cv
                        .wait_timeout(g, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }

    /// Waits until the stream's task number `task` ([`TaskCtx::task_number`]: its tasks
    /// counted from 0) has retired — run, failed or discarded — or `until` has passed: whether
    /// it has. For a caller that waits for one task rather than the whole queue: a synchronize
    /// giving the thread time to fail an overdue head wait (`Sim::sync_past_overdue_waits`).
    pub fn wait_task_retired(&self, task: u64, until: Instant) -> bool {
        let _watch = Watch::new(&self.shared.watchers);
        self.sleep_until_retired(task.saturating_add(1), Some(until))
    }

    /// Waits until every task enqueued before this call has run (or been discarded), then
    /// returns the stored task error once, clearing it.
    ///
    /// Codes: the first error a task returned since the last report (e.g. 107020 for a timed
    /// out wait, 507899 for a panic); 507046 (`StreamSyncTimeout`) `wait` expired first
    /// (nothing is cleared); 107017 the stream is destroyed, or was destroyed with its tasks
    /// discarded while waiting (a draining destroy that started meanwhile ran them all: the
    /// answer is then theirs, task error included); 507000 (`InternalError`) called from one
    /// of this stream's own tasks (it would wait for itself).
    pub fn synchronize(&self, wait: SyncWait) -> Result<(), E> {
        self.sync_through(self.sync_target()?, wait)
    }

    /// [`synchronize`](Self::synchronize) that gives up, answering `None` (nothing reported
    /// nor cleared), as soon as `interrupt` is raised while it waits: for an owner whose
    /// synchronize ends on a condition outside the stream (the simulator's failure scopes,
    /// `crate::failure_scope`). Raised before the call, it gives up unless the stream is done.
    pub fn synchronize_unless(
        &self,
        wait: SyncWait,
        interrupt: &dyn SyncInterrupt,
    ) -> Option<Result<(), E>> {
        match self.sync_target() {
            Ok(target) => self.sync_through_unless(target, wait, interrupt),
            Err(e) => Some(Err(e)),
        }
    }

    /// [`synchronize`](Self::synchronize)'s checks on entry, then what it waits for: the
    /// tasks issued so far.
    fn sync_target(&self) -> Result<u64, E> {
        let s = &*self.shared;
        if s.state.load(Ordering::SeqCst) != OPEN {
            return Err(E::from(Error::InvalidHandle));
        }
        if s.control.on_worker() {
            return Err(E::from(Error::InternalError));
        }
        Ok(s.ring.issued())
    }

    /// [`synchronize`](Self::synchronize) past its checks: waits for the first `target` tasks
    /// to retire, then reports. A timeout clears nothing, so a caller may wait again for the
    /// same tasks (the tests' wait bounded by progress, `tests::synced`).
    fn sync_through(&self, target: u64, wait: SyncWait) -> Result<(), E> {
        self.sync_through_unless(target, wait, &NoInterrupt)
            .unwrap_or_else(|| Err(E::from(Error::InternalError)))
    }

    /// [`sync_through`](Self::sync_through) that gives up (`None`) once `interrupt` is raised
    /// ([`synchronize_unless`](Self::synchronize_unless)).
    fn sync_through_unless(
        &self,
        target: u64,
        wait: SyncWait,
        interrupt: &dyn SyncInterrupt,
    ) -> Option<Result<(), E>> {
        let s = &*self.shared;
        let done = || s.retired.load(Ordering::SeqCst) >= target;
        if !done() {
            // Tells the worker to retire finished tasks at once (see `Finished`).
            let _watch = Watch::new(&s.watchers);
            let deadline = match wait {
                SyncWait::Forever => None,
                SyncWait::AtMost(d) if d.is_zero() => {
                    return Some(Err(E::from(Error::StreamSyncTimeout)));
                }
                // A deadline past the clock's range is "forever".
                SyncWait::AtMost(d) => Instant::now().checked_add(d),
            };
            // Spins while the worker keeps finishing tasks (see `sync_spin`), then sleeps.
            let spin = || {
                let moved = s.control.moved_at.load(Ordering::Relaxed);
                let w = sync_spin::window(s.spin, moved, crate::sys::now_ns());
                match deadline {
                    Some(d) => w.min(d.saturating_duration_since(Instant::now())),
                    None => w,
                }
            };
            let finished = || s.worker.completed.load(Ordering::Relaxed);
            let cap = sync_spin::SYNC_SPIN_CAP;
            let over = || done() || interrupt.raised();
            if !sync_spin::spin_while_progress(spin, cap, over, finished) {
                match self.sleep_until_retired_unless(target, deadline, interrupt) {
                    Slept::Retired => {}
                    Slept::Interrupted => return None,
                    Slept::Expired => return Some(Err(E::from(Error::StreamSyncTimeout))),
                }
            } else if !done() {
                return None;
            }
        }
        if s.state.load(Ordering::SeqCst) == DISCARDING {
            return Some(Err(E::from(Error::InvalidHandle)));
        }
        let mut slot = lock(&s.error);
        // Reported: a stop-on-failure stream runs its later tasks again.
        s.halted.fetch_and(!HALT_FAILED, Ordering::Relaxed);
        Some(match slot.take() {
            Some(e) => Err(e),
            None => Ok(()),
        })
    }

    /// Sets the failure mode: `stop` (`ACL_STOP_ON_FAILURE`) makes the worker discard the
    /// tasks after a failed one, unrun, until a [`synchronize`](Self::synchronize) reports the
    /// failure; otherwise (`ACL_CONTINUE_ON_FAILURE`, the default) later tasks still run.
    pub fn set_stop_on_failure(&self, stop: bool) {
        let s = &*self.shared;
        let slot = lock(&s.error);
        s.stop_on_failure.store(stop, Ordering::Relaxed);
        // A failure already stored halts the stream from now on (and a switch back resumes).
        if stop && slot.is_some() {
            s.halted.fetch_or(HALT_FAILED, Ordering::Relaxed);
        } else {
            s.halted.fetch_and(!HALT_FAILED, Ordering::Relaxed);
        }
    }

    /// Whether the stream stops on failure ([`set_stop_on_failure`](Self::set_stop_on_failure)).
    pub fn stops_on_failure(&self) -> bool {
        self.shared.stop_on_failure.load(Ordering::Relaxed)
    }

    /// Aborts the tasks enqueued so far (`aclrtStreamAbort`): those not started are dropped
    /// unrun and the running one is cancelled as a discard would (its failure is not stored);
    /// the stream stays open and runs the tasks enqueued after this call. Returns at once.
    /// A stopped stream ([`stop`](Self::stop)) runs again: the tasks it kept are aborted.
    ///
    /// Codes: 107017 the stream is being or has been destroyed.
    pub fn abort(&self) -> Result<(), E> {
        let s = &*self.shared;
        {
            // `state` changes under the consumer's lock.
            let _k = s.ring.taker();
            if s.state.load(Ordering::Relaxed) != OPEN {
                return Err(E::from(Error::InvalidHandle));
            }
            // Before the flag `interrupt` raises (the worker reads them the other way round).
            s.abort_below.store(s.ring.issued(), Ordering::SeqCst);
            // A stopped stream runs again (`stop`): the tasks it kept are the aborted ones.
            s.halted.fetch_and(!HALT_STOPPED, Ordering::SeqCst);
        }
        // A task enqueued while this runs may be taken before the flag is up and then be
        // interrupted with the aborted ones: it raced the abort.
        s.control.interrupt();
        Ok(())
    }

    /// Lets go of the values kept for the stream's tasks ([`keep_alive`](Self::keep_alive))
    /// before the stream's memory goes, for an owner that keeps the stream past its end
    /// (a cache). Call it only once the stream is destroyed, its worker has exited
    /// ([`has_exited`](Self::has_exited)) and no task of it is still to be dropped: after
    /// a `Discard` this thread began and waited for, or a `Drain` that succeeded. Does
    /// nothing otherwise (a stream still open or whose worker runs).
    pub fn release_kept(&self) {
        let s = &*self.shared;
        if s.state.load(Ordering::SeqCst) == OPEN || !self.has_exited() {
            return;
        }
        for k in &s.kept_fast {
            k.store(std::ptr::null_mut(), Ordering::Release);
        }
        drop(std::mem::take(&mut *lock(&s.kept)));
    }

    /// Keeps `value` alive for as long as this stream's queue exists, so that a task queued
    /// on it may use the value through a plain pointer instead of holding a reference of its
    /// own: no reference count written by the enqueuing thread and again by the worker, on
    /// two CPUs, for every task. Call it before queuing such a task (the worker runs tasks
    /// only while the queue exists, and a queued task is dropped before the kept values
    /// are). Kept values are never let go before the stream's end; a value kept already (the
    /// same allocation) is not kept twice, and is found without a lock if it is among the
    /// first 16 kept (`KEPT_FAST`).
    pub fn keep_alive<T: std::any::Any + Send + Sync>(&self, value: &Arc<T>) {
        if self.keeps(&**value) {
            return;
        }
        let s = &*self.shared;
        let p = Arc::as_ptr(value).cast::<()>().cast_mut();
        let mut kept = lock(&s.kept);
        if kept
            .iter()
            .any(|v| Arc::as_ptr(v).cast::<()>() == p.cast_const())
        {
            return;
        }
        kept.push(Arc::clone(value) as Arc<dyn std::any::Any + Send + Sync>);
        if let Some(k) = s
            .kept_fast
            .iter()
            .find(|k| k.load(Ordering::Relaxed).is_null())
        {
            k.store(p, Ordering::Release);
        }
    }

    /// Whether `value` (by address) is among the first 16 values kept for the stream's
    /// tasks ([`keep_alive`](Self::keep_alive)): a look at up to 16 atomic pointers, no
    /// lock. A `false` may still be kept (as a 17th); `keep_alive` finds it then.
    #[inline]
    pub fn keeps<T>(&self, value: &T) -> bool {
        let p = std::ptr::from_ref(value).cast::<()>().cast_mut();
        self.shared
            .kept_fast
            .iter()
            .any(|k| k.load(Ordering::Acquire) == p)
    }

    /// Whether every task enqueued so far has run (`Complete`) or not (`NotReady`). Never
    /// blocks; does not touch the stored error.
    pub fn query(&self) -> StreamStatus {
        let s = &*self.shared;
        let enqueued = s.ring.issued();
        if s.retired.load(Ordering::SeqCst) >= enqueued {
            StreamStatus::Complete
        } else {
            StreamStatus::NotReady
        }
    }

    /// Destroys the stream. `Drain` runs every queued task first (a task that never finishes
    /// makes this wait for ever, as `aclrtDestroyStream` does — unless a `Discard` ends it, see
    /// below); `Discard` drops the tasks not yet started, cancels the running one and waits
    /// for it to return. Then the worker is joined — unless this is called from one of the
    /// stream's own tasks, in which case the worker exits by itself after that task. Enqueuers
    /// waiting for room get 107017.
    ///
    /// A `Discard` of a stream that is draining turns the drain into a discard: the tasks
    /// not yet run are dropped, the running one is cancelled, and both calls return once the
    /// worker has exited (the drain with 107017: its tasks did not all run).
    ///
    /// `destroy` is [`begin_destroy`](Self::begin_destroy) then
    /// [`wait_destroyed`](Self::wait_destroyed): an owner that discards several streams whose
    /// tasks may wait on each other cancels them all first and only then waits for them.
    ///
    /// Codes: 107017 (`InvalidHandle`) already destroyed (or being destroyed; a `Discard` of a
    /// draining stream excepted), or a drain overtaken by a discard.
    pub fn destroy(&self, mode: StreamDestroy) -> Result<(), E> {
        let mode = self.begin(mode, true)?;
        self.wait_destroyed();
        if mode == StreamDestroy::Drain && self.shared.state.load(Ordering::SeqCst) == DISCARDING {
            return Err(E::from(Error::InvalidHandle));
        }
        Ok(())
    }

    /// The first half of [`destroy`](Self::destroy), which never blocks: the stream stops
    /// taking tasks and, for `Discard`, its queued tasks are dropped and its running task is
    /// cancelled. The worker then finishes on its own; [`wait_destroyed`](Self::wait_destroyed)
    /// waits for that.
    ///
    /// Codes: as [`destroy`](Self::destroy) (apart from the overtaken drain).
    pub fn begin_destroy(&self, mode: StreamDestroy) -> Result<(), E> {
        self.begin(mode, true).map(drop)
    }

    /// [`begin_destroy`](Self::begin_destroy); `overtake` says whether a `Discard` may turn
    /// a drain in progress into a discard. Returns the destroy's mode: a `Drain` of a stopped
    /// stream ([`stop`](Self::stop)) is a `Discard`, since its tasks will not run again.
    fn begin(&self, mode: StreamDestroy, overtake: bool) -> Result<StreamDestroy, E> {
        let s = &*self.shared;
        let (mode, dropped) = {
            let mut k = s.ring.taker();
            let mode = stop::destroy_mode(s, mode);
            let state = s.state.load(Ordering::Relaxed);
            let upgrade = overtake && state == DRAINING && mode == StreamDestroy::Discard;
            if state != OPEN && !upgrade {
                return Err(E::from(Error::InvalidHandle));
            }
            if upgrade && s.drained.load(Ordering::Relaxed) {
                // The drain already ran everything: nothing to overtake, and the drain keeps
                // its success (the worker is on its way out; waiting for it is the caller's).
                return Ok(mode);
            }
            // No task is accepted from here on; the ones with a ticket are in the ring.
            let end = s.ring.close();
            let dropped = match mode {
                StreamDestroy::Drain => {
                    s.state.store(DRAINING, Ordering::SeqCst);
                    Vec::new()
                }
                StreamDestroy::Discard => {
                    let mut tasks = Vec::new();
                    k.take_published(end, |t| tasks.push(t));
                    s.discard_pending
                        .fetch_add(tasks.len() as u64, Ordering::SeqCst);
                    s.state.store(DISCARDING, Ordering::SeqCst);
                    tasks
                }
            };
            drop(k);
            if s.blocked.load(Ordering::SeqCst) > 0 {
                let _g = lock(&s.room);
                s.not_full.notify_all();
            }
            (mode, dropped)
        };
        if mode == StreamDestroy::Discard {
            // Interrupt the running task first, then release what the others captured.
            s.control.cancel();
            s.discarded
                .fetch_add(dropped.len() as u64, Ordering::Relaxed);
            for task in dropped {
                drop_quietly(task);
            }
        }
        s.control.unpark_worker();
        Ok(mode)
    }

    /// Whether the worker thread has exited (the stream was destroyed and has finished).
    pub fn has_exited(&self) -> bool {
        *lock(&self.shared.exited)
    }

    /// The second half of [`destroy`](Self::destroy): waits until the worker has exited
    /// (joining it, or, if another destroy is joining it, waiting for its exit). Returns at
    /// once when called from one of the stream's own tasks (the worker exits after it), and
    /// waits for ever for a stream that is open or draining a task that never ends: call it
    /// after [`begin_destroy`](Self::begin_destroy).
    pub fn wait_destroyed(&self) {
        if self.join_handle() {
            return;
        }
        if self.shared.control.on_worker() {
            return;
        }
        // Another destroy is joining it (a discard overtaking a drain), or a destroy from one
        // of its tasks detached it: wait for its exit.
        let mut exited = lock(&self.shared.exited);
        while !*exited {
            exited = self
                .shared
                .exited_cv
                .wait(exited)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Joins the worker if this stream still has its handle (whether it did). From one of
    /// the stream's own tasks the handle is dropped instead (the worker leaves after that
    /// task, detached).
    fn join_handle(&self) -> bool {
        let Some(handle) = lock(&self.worker).take() else {
            return false;
        };
        if handle.thread().id() != thread::current().id() {
            // The worker catches task panics; an `Err` here would be a bug in this module,
            // and there is nothing left to clean up either way.
            let _ = handle.join();
        }
        true
    }

    /// How long the stream has been busy since it was made, up to `now` (`sys::now_ns`), in
    /// nanoseconds: its age less the time its worker slept for lack of work (the utilization
    /// hook, `worker::Idle`, which says what counts as busy).
    pub fn busy_ns(&self, now: u64) -> u64 {
        self.shared.worker.idle.busy_ns(now)
    }

    /// When the stream was made (`sys::now_ns`).
    pub fn born_ns(&self) -> u64 {
        self.shared.worker.idle.born()
    }

    /// Counters for benchmarks and the inspector.
    pub fn stats(&self) -> StreamStats {
        let s = &*self.shared;
        let w = &s.worker;
        StreamStats {
            enqueued: s.ring.issued(),
            completed: w.completed.load(Ordering::Relaxed),
            failed: w.failed.load(Ordering::Relaxed),
            panicked: w.panicked.load(Ordering::Relaxed),
            discarded: s.discarded.load(Ordering::Relaxed),
            sleeps: w.sleeps.load(Ordering::Relaxed),
            wakeups: s.wakeups.load(Ordering::Relaxed),
            spin_hits: w.spin_hits.load(Ordering::Relaxed),
        }
    }

    /// Tasks in the queue (not counting the running one, nor up to 15 more the worker has
    /// taken from the queue and runs next).
    pub fn queued(&self) -> usize {
        let s = &*self.shared;
        let head = s.ring.taker().head();
        (s.ring.issued() - head) as usize
    }

    /// The queue capacity.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// How long `enqueue` waits for room in a full queue (`None`: for ever).
    pub fn enqueue_timeout(&self) -> Option<Duration> {
        self.shared.enqueue_timeout
    }

    /// Tests: from now on every wait of this stream that would block parks (`crate::parked`),
    /// and the runner keeps the stream parked (it neither sends it home after its time nor
    /// gives up while it is parked), so that a test can act on it while it is parked. Only
    /// this stream: the unit tests share a process, its runner and its busy count.
    #[cfg(test)]
    pub(crate) fn force_parking(&self) {
        self.shared.control.forced.store(true, Ordering::Relaxed);
    }

    /// Tests: from now on every wait of this stream that would block blocks on its thread,
    /// never parks (whatever the runner or the busy count say).
    #[cfg(test)]
    pub(crate) fn never_park(&self) {
        self.shared
            .control
            .never_park
            .store(true, Ordering::Relaxed);
    }

    /// Tests: from now on the worker's idle spin reads each of its yields as having found the
    /// CPU free, the signal that otherwise ends the spin early when another thread wants the
    /// CPU (the yield still happens): the spin lasts its budget or until work comes, on a
    /// quiet machine as on a loaded one.
    #[cfg(test)]
    pub(crate) fn cpu_seems_free(&self) {
        self.shared.control.cpu_free.store(true, Ordering::Relaxed);
    }

    /// Tests: from now on a stop or an abort does not wake the stream's running task (its
    /// waker is not run): the task sees the interrupt when something else wakes it (a wait:
    /// the record it waits for, or the end of its sleep's chunk), as if its thread, woken,
    /// had not run yet when that came.
    #[cfg(test)]
    pub(crate) fn wake_late(&self) {
        self.shared.control.late_wake.store(true, Ordering::SeqCst);
    }

    /// Tests: the stream's next notify wait to start holds where it starts (after the
    /// worker's checks for a stop or an abort, before it looks for its record) until
    /// [`let_wait_go`](Self::let_wait_go); [`wait_held`](Self::wait_held) says when it holds.
    #[cfg(test)]
    pub(crate) fn hold_next_wait(&self) {
        self.shared
            .control
            .hold
            .store(cancel::HOLD_ARMED, Ordering::SeqCst);
    }

    /// Tests: whether a wait holds ([`hold_next_wait`](Self::hold_next_wait)).
    #[cfg(test)]
    pub(crate) fn wait_held(&self) -> bool {
        self.shared.control.hold.load(Ordering::SeqCst) == cancel::HOLD_HELD
    }

    /// Tests: the held wait goes on ([`hold_next_wait`](Self::hold_next_wait)).
    #[cfg(test)]
    pub(crate) fn let_wait_go(&self) {
        self.shared
            .control
            .hold
            .store(cancel::HOLD_OFF, Ordering::SeqCst);
    }

    /// Tests: the worker thread panics (outside the tasks' unwind guards) once the stream has
    /// parked on another thread's runner, its turn away (`Shared::worker_unwound`).
    #[cfg(test)]
    pub(crate) fn unwind_when_away(&self) {
        self.shared
            .control
            .unwind_away
            .store(true, Ordering::Relaxed);
    }

    /// Tests: whether the stream's queue is closed (a destroy, or its worker unwound).
    #[cfg(test)]
    pub(crate) fn queue_closed(&self) -> bool {
        self.shared.ring.is_closed()
    }

    /// Tests: how many times the stream's waits parked.
    #[cfg(test)]
    pub(crate) fn parks(&self) -> u64 {
        self.shared.control.parks.load(Ordering::Relaxed)
    }

    /// Tests: the stream's tasks retired so far.
    #[cfg(test)]
    pub(crate) fn retired(&self) -> u64 {
        self.shared.retired.load(Ordering::SeqCst)
    }

    /// Tests: whether the stream's turn is away from its thread (parked, or run by the
    /// runner).
    #[cfg(test)]
    pub(crate) fn is_away(&self) -> bool {
        self.shared.ring.is_away()
    }

    /// The CPU this stream's worker ran its last host function on while no CPU was free
    /// (`u32::MAX`: none such; see `placement::beside_worker`).
    pub(crate) fn host_fn_cpu(&self) -> u32 {
        self.shared.control.host_fn_cpu.load(Ordering::Relaxed)
    }

    /// A number that tells this stream from every other live stream of the process (the
    /// address of its shared control block; a number may be reused once the stream is gone).
    pub(crate) fn key(&self) -> usize {
        Arc::as_ptr(&self.shared.control) as usize
    }

    /// What the running task last noted it blocks on ([`TaskCtx::set_blocked_on`]; 0: it
    /// noted nothing, or no task is blocked).
    pub fn blocked_on(&self) -> u64 {
        self.shared.control.blocked_on.load(Ordering::Relaxed)
    }

    /// The worker's kernel thread id (for `/proc/self/task/<tid>`).
    pub fn worker_tid(&self) -> i32 {
        self.tid
    }

    /// The CPU the worker is restricted to ([`StreamConfig::cpu`]), or `None`.
    pub fn cpu(&self) -> Option<usize> {
        self.cpu
    }

    /// Sets the hook told of each task of this stream that fails (`failure`): once; a second
    /// hook is handed back.
    ///
    /// # Errors
    ///
    /// `hook` itself, if the stream has a hook already.
    pub fn on_failure(&self, hook: FailureHook<E>) -> Result<(), FailureHook<E>> {
        self.shared.on_failure.set(hook)
    }

    /// The message of the most recent task panic, if any task panicked.
    pub fn last_panic(&self) -> Option<String> {
        lock(&self.shared.last_panic).clone()
    }

    /// Whether a task error is stored and not yet reported by `synchronize`.
    pub fn has_error(&self) -> bool {
        lock(&self.shared.error).is_some()
    }

    /// A copy of the stored task error, if any (left for `synchronize` to report).
    pub fn stored_error(&self) -> Option<E>
    where
        E: Clone,
    {
        lock(&self.shared.error).clone()
    }
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Drop for Stream<E, J> {
    /// Drop is a discarding destroy: it never waits for a task that cannot finish (see the
    /// module docs).
    fn drop(&mut self) {
        // A drain still running here was started by one of the stream's own tasks (any other
        // drain borrows the stream until it ends): it goes on, detached, as it would have
        // without this drop; it is not turned into a discard.
        if self.begin(StreamDestroy::Discard, false).is_ok() {
            self.wait_destroyed();
        } else {
            // Already destroyed; the handle may still need joining (`begin_destroy` without
            // `wait_destroyed`); if that destroy ran on the worker itself it is gone.
            self.join_handle();
        }
    }
}

impl<E: From<Error> + Send + 'static, J: Job<E>> fmt::Debug for Stream<E, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.shared.state.load(Ordering::Relaxed) {
            OPEN => "open",
            DRAINING => "draining",
            _ => "discarding",
        };
        f.debug_struct("Stream")
            .field("name", &self.name)
            .field("worker_tid", &self.tid)
            .field("cpu", &self.cpu)
            .field("state", &state)
            .field("capacity", &self.shared.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

#[cfg(test)]
mod tests;

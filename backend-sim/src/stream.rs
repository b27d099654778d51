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
//! and `query` count) in one step per batch, and what they leave behind ([`Job::run`]'s
//! remains) is dropped then too — never later than before a task that may block starts or
//! blocks ([`Job::may_block`]). The worker, having
//! run out of tasks, spins on the next slot for a bounded time
//! ([`StreamConfig::spin`], default [`DEFAULT_SPIN`]) before it parks on its thread's futex
//! (`std::thread::park`, whose token makes an unpark that races ahead of the park harmless).
//! The spin is tight for its first 2 µs and then yields the CPU between checks, so that on a
//! busy machine a spinning worker does not keep the producer it waits for off a shared CPU.
//! So a task enqueued on a recently active stream is picked up without any syscall, and an idle
//! stream sleeps without burning a core. `synchronize` spins the same way before it sleeps on
//! a condition variable; completions wake sleeping `synchronize` callers only when one waits
//! for that task (the waiter publishes the task number it waits for). Counters
//! ([`Stream::stats`]) are single-writer plain stores on the worker side, so they cost nothing
//! measurable. `examples/stream_handoff.rs` measures the handoff against a raw futex wake.

use std::cell::{Cell, OnceCell};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{self, MaybeUninit};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, mpsc};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use acl_notify_core::{Error, StreamDestroy, StreamStatus, SyncWait};

use crate::ring::{Push, Ring};

/// Default queue capacity: how many tasks may wait before `enqueue` waits for room.
pub const DEFAULT_CAPACITY: usize = 1024;

/// Default bound on how long `enqueue` waits for room in a full queue before it fails with
/// `StreamTaskFull` (507002).
pub const DEFAULT_ENQUEUE_TIMEOUT: Duration = Duration::from_secs(60);

/// Default time the worker spins for new work after its queue runs dry, before it sleeps.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(10);

/// A unit of work on a stream: runs once on the stream's worker, in enqueue order.
pub type Task<E> = Box<dyn FnOnce(&TaskCtx) -> Result<(), E> + Send + 'static>;

/// What a stream's queue holds: a boxed closure ([`Task`], the default), or a caller's own
/// type — e.g. an enum of its frequent operations, so that they cost no allocation.
pub trait Job<E>: Send + 'static {
    /// What the job hands back to be dropped later (see [`run`](Self::run)); `()` for none.
    type Remains;

    /// Runs the job on the stream's worker. Besides its result it may return *remains*:
    /// values whose drop is costly but not urgent (e.g. the last reference to something
    /// shared with other threads, whose counter would have to be pulled from their caches).
    /// The worker drops them, and retires the job (what `synchronize` and `query` count),
    /// off the path from this job to the next, but never later than before a later job
    /// blocks (see [`may_block`](Self::may_block)) or after the last of the tasks it has
    /// taken from the queue has run. So a `synchronize` returns only once the remains of the
    /// tasks it waited for are dropped, and it never waits for a task that blocks behind
    /// them.
    ///
    /// `before_block` drops the remains of the tasks finished before this one and retires
    /// them; a job that says it will not block without calling it first
    /// ([`may_block`](Self::may_block) `false`) must call it before it blocks. Calling it
    /// again, or when nothing is pending, does nothing.
    fn run(self, ctx: &TaskCtx, before_block: &mut dyn FnMut()) -> (Result<(), E>, Self::Remains);

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
}

impl<E: 'static> Job<E> for Task<E> {
    type Remains = ();

    fn run(self, ctx: &TaskCtx, _: &mut dyn FnMut()) -> (Result<(), E>, ()) {
        (self(ctx), ())
    }
}

/// How many queued tasks the worker takes per turn. They leave the queue
/// together (so up to `capacity + TAKE - 1` tasks can be pending) and still run one by one, in
/// order; a discarding destroy drops the taken ones that have not started on the worker.
const TAKE: usize = 16;

/// A waker registered with [`TaskCtx::on_cancel`]: a closure that has no drop glue and fits
/// in two words is kept inline, anything else in a box.
///
/// Why inline: a wait that sleeps registers its waker and removes it the moment it wakes, on
/// the path from the record to the stream's next task; freeing a box there cost about
/// 0.25 µs of a 5 µs idle wake-up (the allocator's lines have gone cold while the thread
/// slept).
enum Waker {
    Inline {
        /// Calls the closure stored in `bytes` (`call_inline::<W>` for the closure's type).
        call: unsafe fn(*const InlineBytes),
        bytes: InlineBytes,
    },
    Boxed(Box<dyn Fn() + Send + Sync + 'static>),
}

/// Room for an inline [`Waker`]: two words, aligned as a word.
type InlineBytes = MaybeUninit<[usize; 2]>;

/// Calls the `W` stored at `p`.
///
/// # Safety
///
/// `p` must point to a valid `W`, written there by [`Waker::new`].
unsafe fn call_inline<W: Fn()>(p: *const InlineBytes) {
    // SAFETY: the caller guarantees a valid `W` at `p`; `Waker::new` checked that `W`'s size
    // and alignment fit `InlineBytes`.
    unsafe { (*p.cast::<W>())() }
}

impl Waker {
    fn new<W: Fn() + Send + Sync + 'static>(w: W) -> Waker {
        if mem::size_of::<W>() <= mem::size_of::<InlineBytes>()
            && mem::align_of::<W>() <= mem::align_of::<InlineBytes>()
            && !mem::needs_drop::<W>()
        {
            let mut bytes = InlineBytes::uninit();
            // SAFETY: `W` fits `bytes` in size and alignment (checked above), and the write
            // moves `w` in. `W` has no drop glue, so never dropping it leaks nothing; it is
            // `Send + Sync + 'static`, as a boxed one must be, so the bytes may travel and be
            // called from any thread.
            unsafe { bytes.as_mut_ptr().cast::<W>().write(w) };
            Waker::Inline {
                call: call_inline::<W>,
                bytes,
            }
        } else {
            Waker::Boxed(Box::new(w))
        }
    }

    fn call(&self) {
        match self {
            // SAFETY: `call` and `bytes` were made together by `Waker::new` for the same `W`.
            Waker::Inline { call, bytes } => unsafe { call(bytes) },
            Waker::Boxed(f) => f(),
        }
    }
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
    enqueue_timeout: Option<Duration>,
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
            enqueue_timeout: Some(DEFAULT_ENQUEUE_TIMEOUT),
        }
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

/// The stream is cancelled: a cancellable wait gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cancelled;

impl fmt::Display for Cancelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the stream was destroyed with its tasks discarded")
    }
}

impl std::error::Error for Cancelled {}

/// Pads a value to its own cache lines, so counters written by different threads do not
/// false-share.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
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

/// Drops a value, swallowing a panic from its `Drop` (it must not take the worker or a
/// destroying thread down half-way). The payload of such a panic is leaked rather than
/// dropped, since dropping it could panic again.
fn drop_quietly<T>(value: T) {
    if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || drop(value))) {
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

/// How long [`spin_until`] busy-waits before it starts yielding the CPU between checks.
const PURE_SPIN: Duration = Duration::from_micros(2);

/// A `sched_yield` that took longer than this gave the CPU to another thread (with nothing
/// else runnable it returns in about a microsecond, even in a VM).
const YIELD_LOST_CPU: Duration = Duration::from_micros(5);

/// Spins until `done()` or until `budget` has passed; true if `done()` held.
///
/// The first [`PURE_SPIN`] is a tight `spin_loop`; after that each clock check (every 32
/// turns) also calls `sched_yield`, so that on a busy machine where the thread we are waiting
/// for shares our CPU, our spinning does not keep it off that CPU (on an otherwise idle CPU
/// the yield returns at once). A yield that does not return at once shows that another
/// thread wants this CPU: the spin then stops early (false unless `done()` holds by then),
/// so that a spinning thread does not keep taking turns with a busy one — e.g. an idle
/// stream worker placed on the CPU of a stream that is running a long queue.
fn spin_until(budget: Duration, mut done: impl FnMut() -> bool) -> bool {
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
            if elapsed >= PURE_SPIN {
                let before = Instant::now();
                thread::yield_now();
                if before.elapsed() >= YIELD_LOST_CPU {
                    return done();
                }
            }
        } else {
            std::hint::spin_loop();
        }
    }
}

/// The calling thread's kernel thread id.
fn gettid() -> i32 {
    // SAFETY: gettid(2) has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Restricts the calling thread to `cpu` (what a placed worker does first).
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `cpu_set_t` is plain data for which all-zero is the empty set; `CPU_SET` writes
    // bit `cpu` < CPU_SETSIZE (checked above); `sched_setaffinity(0, …)` only reads the set.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on, in ascending order (empty if the kernel does not
/// say).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: all-zero is the empty set; `sched_getaffinity(0, …)` writes at most
    // `size_of::<cpu_set_t>()` bytes into it; `CPU_ISSET` reads bits below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The cancellation state shared by a stream's engine and its [`TaskCtx`] / [`CancelToken`]s.
struct Control {
    cancelled: AtomicBool,
    /// An abort ([`Stream::abort`]) is cutting the running task short; cleared by the worker
    /// when it reaches the first task queued after the abort.
    aborting: AtomicBool,
    waker: Mutex<Option<Waker>>,
    worker: OnceLock<Thread>,
    /// What the running task said it is blocked on ([`TaskCtx::set_blocked_on`]; 0: nothing).
    blocked_on: AtomicU64,
}

impl Control {
    /// Cancels for good: sets the flag, runs the registered waker (if any), unparks the worker.
    fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        {
            let slot = lock(&self.waker);
            // A panicking waker must not abort the destroy half-way.
            if let Some(wake) = slot.as_ref()
                && let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| wake.call()))
            {
                drop_quietly(payload);
            }
        }
        self.unpark_worker();
    }

    /// Whether the running task should stop: the stream is cancelled, or an abort is under way.
    fn stopping(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst) || self.aborting.load(Ordering::SeqCst)
    }

    /// Interrupts the running task for an abort: as [`cancel`](Self::cancel), but the flag
    /// goes back once the worker has passed the aborted tasks.
    fn interrupt(&self) {
        self.aborting.store(true, Ordering::SeqCst);
        {
            let slot = lock(&self.waker);
            if let Some(wake) = slot.as_ref()
                && let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| wake.call()))
            {
                drop_quietly(payload);
            }
        }
        self.unpark_worker();
    }

    fn unpark_worker(&self) {
        if let Some(t) = self.worker.get() {
            t.unpark();
        }
    }

    fn on_worker(&self) -> bool {
        self.worker
            .get()
            .is_some_and(|t| t.id() == thread::current().id())
    }
}

/// A clonable, `Send + Sync` view of a stream's cancel flag, for code that cannot see the
/// [`TaskCtx`] (e.g. a wait loop in the notify table).
#[derive(Clone)]
pub struct CancelToken(Arc<Control>);

impl CancelToken {
    /// True once the stream has been destroyed with [`StreamDestroy::Discard`] (or dropped).
    pub fn is_cancelled(&self) -> bool {
        self.0.stopping()
    }
}

impl fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// What a running task sees of its stream: the cancel flag and the waker registry. Lives on
/// the worker thread only (it is not `Sync`, so a task cannot hand it to another thread).
pub struct TaskCtx {
    control: Arc<Control>,
    /// Whether a waker is registered (saves the engine a lock per task when none is).
    armed: Cell<bool>,
    /// See [`TaskCtx::spin_hint`].
    spin_hint: Cell<u64>,
    /// See [`TaskCtx::coarse_now_ns`] (0: not read since it was last forgotten).
    stamp: Cell<u64>,
    /// See [`TaskCtx::task_number`].
    seq: Cell<u64>,
}

impl TaskCtx {
    /// True once the stream is cancelled (a discarding destroy or drop; never goes back), or
    /// while an abort ([`Stream::abort`]) stops the running task.
    pub fn is_cancelled(&self) -> bool {
        self.control.stopping()
    }

    /// A token that answers [`is_cancelled`](Self::is_cancelled) from anywhere.
    pub fn cancel_token(&self) -> CancelToken {
        CancelToken(Arc::clone(&self.control))
    }

    /// Registers `wake` to be called when the stream is cancelled, until the returned guard is
    /// dropped (or the task returns). If the stream is already cancelled, `wake` runs now,
    /// before this returns. One waker at a time: a new registration replaces the previous one.
    /// See the module docs for what `wake` must do.
    pub fn on_cancel(&self, wake: impl Fn() + Send + Sync + 'static) -> OnCancel<'_> {
        let mut slot = lock(&self.control.waker);
        let wake: &Waker = slot.insert(Waker::new(wake));
        self.armed.set(true);
        // Ordering: `Control::cancel` stores the flag before taking this lock. Either it took
        // the lock before us (then we see the flag here) or after (then it sees our waker).
        if self.control.stopping() {
            wake.call();
        }
        drop(slot);
        OnCancel { ctx: self }
    }

    /// A cancel check for a wait primitive that asks "cancelled?" only right before it blocks
    /// (as the notify table does: never on its fast path or while it spins). The first
    /// [`LazyCancel::check`] registers the waker `make` builds, exactly as
    /// [`on_cancel`](Self::on_cancel) would, then answers [`is_cancelled`](Self::is_cancelled);
    /// so a wait that completes without blocking registers nothing — no lock, no allocation.
    /// The waker stays registered until the returned value is dropped.
    pub fn lazy_cancel<F, W>(&self, make: F) -> LazyCancel<'_, F>
    where
        F: FnOnce() -> W,
        W: Fn() + Send + Sync + 'static,
    {
        LazyCancel {
            ctx: self,
            make: Cell::new(Some(make)),
            guard: OnceCell::new(),
        }
    }

    /// Sleeps for `duration`, returning early with [`Cancelled`] if the stream is cancelled.
    pub fn sleep(&self, duration: Duration) -> Result<(), Cancelled> {
        let deadline = Instant::now().checked_add(duration);
        loop {
            if self.is_cancelled() {
                return Err(Cancelled);
            }
            match deadline {
                // `Control::cancel` sets the flag, then unparks this (the worker) thread; the
                // park token makes an unpark before the park harmless.
                None => thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Ok(());
                    }
                    thread::park_timeout(d - now);
                }
            }
        }
    }

    /// Notes what this task is about to block on, as a value only its owner interprets (the
    /// simulator: which notify a wait sleeps on); 0 clears it. The task clears it when it stops
    /// blocking. Read back by [`Stream::blocked_on`], to explain a queue that stays full.
    #[inline]
    pub fn set_blocked_on(&self, note: u64) {
        self.control.blocked_on.store(note, Ordering::Relaxed);
    }

    /// The running task's number in the stream's enqueue order (from 0): the tickets
    /// [`Stream::issued`] counts. The simulator's wait-for graph compares it with its queued
    /// records' tickets.
    #[inline]
    pub fn task_number(&self) -> u64 {
        self.seq.get()
    }

    /// A value the stream's jobs keep from one job to the next (the engine never reads it):
    /// the simulator's waits keep how long the next wait should spin before it sleeps, in
    /// nanoseconds. Starts at zero.
    pub fn spin_hint(&self) -> &Cell<u64> {
        &self.spin_hint
    }

    /// `CLOCK_MONOTONIC_COARSE` in nanoseconds, read at most once per run of jobs that cannot
    /// block: for time stamps kept for diagnostics (a record's), whose clock read would
    /// otherwise cost a quick job a good part of its time. The engine forgets the reading when
    /// it takes tasks from the queue, after a job that may block, and whenever a job calls
    /// `before_block`, so it is never older than a run of at most 16 quick
    /// jobs (microseconds; the clock itself ticks every few milliseconds).
    #[inline]
    pub fn coarse_now_ns(&self) -> u64 {
        match self.stamp.get() {
            0 => {
                let t = crate::sys::coarse_now_ns().max(1);
                self.stamp.set(t);
                t
            }
            t => t,
        }
    }

    #[inline]
    fn forget_time(&self) {
        self.stamp.set(0);
    }

    #[inline]
    fn disarm(&self) {
        if self.armed.replace(false) {
            self.clear_waker();
        }
    }

    #[cold]
    fn clear_waker(&self) {
        *lock(&self.control.waker) = None;
    }
}

impl fmt::Debug for TaskCtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskCtx")
            .field("cancelled", &self.is_cancelled())
            .field("waker_registered", &self.armed.get())
            .finish()
    }
}

/// Keeps a waker registered (see [`TaskCtx::on_cancel`]); dropping it unregisters the waker.
#[must_use = "the waker is unregistered when this guard is dropped"]
pub struct OnCancel<'a> {
    ctx: &'a TaskCtx,
}

impl Drop for OnCancel<'_> {
    fn drop(&mut self) {
        self.ctx.disarm();
    }
}

impl fmt::Debug for OnCancel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnCancel").finish_non_exhaustive()
    }
}

/// A cancel check that registers its waker on first use; see [`TaskCtx::lazy_cancel`].
pub struct LazyCancel<'a, F> {
    ctx: &'a TaskCtx,
    make: Cell<Option<F>>,
    guard: OnceCell<OnCancel<'a>>,
}

impl<F, W> LazyCancel<'_, F>
where
    F: FnOnce() -> W,
    W: Fn() + Send + Sync + 'static,
{
    /// Registers the waker (first call only), then reports whether the stream is cancelled.
    /// Registering first makes "check, then block until the waker's state change" race-free,
    /// as with [`TaskCtx::on_cancel`].
    pub fn check(&self) -> bool {
        if let Some(make) = self.make.take() {
            let _ = self.guard.set(self.ctx.on_cancel(make()));
        }
        self.ctx.is_cancelled()
    }
}

impl<F> fmt::Debug for LazyCancel<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyCancel")
            .field("registered", &self.guard.get().is_some())
            .finish()
    }
}

/// Counters only the worker writes.
#[derive(Default)]
struct WorkerCounters {
    completed: AtomicU64,
    failed: AtomicU64,
    panicked: AtomicU64,
    sleeps: AtomicU64,
    spin_hits: AtomicU64,
}

struct Shared<E, J> {
    /// The queue (lock-free for producers; see the `ring` module).
    ring: Ring<J>,
    /// Producers waiting for room hold this from announcing themselves in `blocked` until
    /// they sleep on `not_full`; the worker takes it to notify them.
    room: Mutex<()>,
    not_full: Condvar,
    /// Producers waiting for room.
    blocked: AtomicUsize,
    /// A drain ran every task and the worker is leaving: a discard has nothing left to
    /// overtake (written under the ring's consumer lock).
    drained: AtomicBool,
    capacity: usize,
    spin: Duration,
    /// Longest wait for room in a full queue (`None`: for ever).
    enqueue_timeout: Option<Duration>,
    /// `OPEN`, `DRAINING` or `DISCARDING`; written under the ring's consumer lock (and the
    /// ring is closed before it leaves `OPEN`).
    state: AtomicU8,
    /// Tasks finished or discarded so far, always a prefix of the enqueue order.
    retired: Padded<AtomicU64>,
    /// The smallest `retired` value a synchronize waiter waits for (`u64::MAX`: none).
    wake_at: AtomicU64,
    sync_lock: Mutex<()>,
    sync_cv: Condvar,
    /// The first unreported task error.
    error: Mutex<Option<E>>,
    /// `ACL_STOP_ON_FAILURE`: once a task fails, later ones are discarded until a synchronize
    /// reports the failure.
    stop_on_failure: AtomicBool,
    /// Set by a failure in stop-on-failure mode, cleared when a synchronize reports it.
    halted: AtomicBool,
    /// Tasks numbered below this (in enqueue order, from 0) were aborted: the worker drops them
    /// unrun, and a running one's error is not stored.
    abort_below: AtomicU64,
    /// Tasks a discarding destroy removed; the worker retires them when it exits, after the
    /// task it was running, so `retired` stays an in-order prefix.
    discard_pending: AtomicU64,
    discarded: AtomicU64,
    wakeups: AtomicU64,
    worker: WorkerCounters,
    last_panic: Mutex<Option<String>>,
    control: Arc<Control>,
    /// Set by the worker as it exits (also when it unwinds), for a destroy that cannot join
    /// it because another one does.
    exited: Mutex<bool>,
    exited_cv: Condvar,
    _error: PhantomData<fn() -> E>,
}

/// Tasks the worker has run but not yet retired, and their remains (see [`Job::run`]). They
/// are flushed — remains dropped, then the tasks retired in one step — before a task that
/// may block starts and after the last task taken from the queue, so a quick task costs no
/// read-modify-write of the shared `retired` counter of its own, and `synchronize` never
/// waits on a task that has finished behind one that blocks.
struct Finished<R> {
    remains: Vec<R>,
    unretired: u64,
    /// Tasks taken from the queue so far: the number (in enqueue order) of the next one to
    /// run is `taken - local.len()`.
    taken: u64,
}

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

    /// Moves up to [`TAKE`] tasks from the queue to the worker's `local` stack (empty), the
    /// first to run on top: taking from the end of a `Vec` is cheaper than from the front of
    /// a `VecDeque`, and every task pays for it. Returns the tickets taken so far with it.
    fn next(&self, local: &mut Vec<J>) -> (Next, u64) {
        let mut k = self.ring.taker();
        loop {
            match self.state.load(Ordering::Relaxed) {
                DISCARDING => return (Next::Exit, k.head()),
                state => {
                    while local.len() < TAKE {
                        match k.take() {
                            Some(task) => local.push(task),
                            None => break,
                        }
                    }
                    if !local.is_empty() {
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
        local.reverse();
        // Dekker handshake with `enqueue_slow`: the slots are free (stored above), then we
        // look for producers waiting for room; they announce themselves, then look at the
        // slots. They are woken once the queue is down to half its capacity, not for every
        // batch taken: a host thread that keeps a queue full then refills half of it per
        // wake-up instead of a task or sixteen (each wake-up is a syscall and a context
        // switch on a machine that may have no CPU to spare). The queue keeps draining while
        // they sleep, and the turn that leaves it empty wakes them (nothing is queued past a
        // blocked producer: it is blocked because the queue is full).
        fence(Ordering::SeqCst);
        if self.blocked.load(Ordering::Relaxed) > 0
            && self.ring.issued().saturating_sub(head) <= (self.capacity / 2) as u64
        {
            let _g = lock(&self.room);
            self.not_full.notify_all();
        }
        (Next::Run, head)
    }

    /// Waits for work: spins for `self.spin`, then parks until an enqueuer or destroy wakes us.
    fn idle(&self, popped: u64) {
        if spin_until(self.spin, || self.has_work(popped)) {
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
            thread::park();
        }
        self.ring.awake();
    }

    /// Runs the taken tasks in order; each joins the finished ones in `done` (see
    /// [`Finished`]). One unwind guard covers the whole batch and is set up again after a task
    /// panics: a guard per task cost more than a record or a wait itself.
    #[inline(never)]
    fn run_local(&self, local: &mut Vec<J>, ctx: &TaskCtx, done: &mut Finished<J::Remains>) {
        ctx.forget_time();
        while let Err(payload) =
            panic::catch_unwind(AssertUnwindSafe(|| self.run_tasks(local, ctx, done)))
        {
            // The task that was running panicked (its value was dropped while unwinding);
            // the ones after it still run.
            self.task_panicked(payload, ctx, done);
            if local.is_empty() {
                self.flush(done);
            }
        }
    }

    fn run_tasks(&self, local: &mut Vec<J>, ctx: &TaskCtx, done: &mut Finished<J::Remains>) {
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
                || self.halted.load(Ordering::Relaxed)
            {
                // Taken before a discard, aborted, or behind a failure in stop-on-failure
                // mode: drop it unrun.
                self.flush(done);
                drop_quietly(task);
                self.discarded.fetch_add(1, Ordering::Relaxed);
                self.retire(1);
                continue;
            }
            let may_block = task.may_block();
            if may_block {
                self.flush(done);
            }
            if let Some(next) = local.last() {
                next.prefetch();
            }
            ctx.seq.set(seq);
            let (result, rest) = task.run(ctx, &mut || {
                ctx.forget_time();
                self.flush(done);
            });
            if may_block {
                ctx.forget_time();
            }
            ctx.disarm();
            bump(&self.worker.completed);
            // Counted before a chained job runs: if that one panics, this one stays counted
            // (its remains are dropped by the unwinding).
            done.unretired += 1;
            match result {
                // An aborted task's failure is the abort's doing, not the task's.
                Err(_) if seq < self.abort_below.load(Ordering::Acquire) => {}
                Err(e) => {
                    bump(&self.worker.failed);
                    self.store_error(e);
                }
                Ok(()) => {
                    if let Some(quick) = local.pop_if(|j| j.chains() && !ctx.is_cancelled()) {
                        if let Some(next) = local.last() {
                            next.prefetch();
                        }
                        let (result, quick_rest) = quick.run(ctx, &mut || {});
                        bump(&self.worker.completed);
                        done.unretired += 1;
                        done.remains.push(quick_rest);
                        if let Err(e) = result {
                            bump(&self.worker.failed);
                            self.store_error(e);
                        }
                    }
                }
            }
            done.remains.push(rest);
            if local.is_empty() {
                self.flush(done);
            }
        }
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
        self.store_error(E::from(Error::DrvInternalError));
        done.unretired += 1;
    }

    /// Drops the remains of the finished tasks, then retires them.
    fn flush(&self, done: &mut Finished<J::Remains>) {
        drop_all(&mut done.remains);
        if done.unretired > 0 {
            self.retire(done.unretired);
            done.unretired = 0;
        }
    }

    fn store_error(&self, e: E) {
        let mut slot = lock(&self.error);
        if slot.is_none() {
            *slot = Some(e);
        }
        if self.stop_on_failure.load(Ordering::Relaxed) {
            self.halted.store(true, Ordering::Relaxed);
        }
    }

    fn retire(&self, n: u64) {
        let r = self.retired.fetch_add(n, Ordering::SeqCst) + n;
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

    /// `ready` gets the worker's thread id, or `None` if it could not be placed on `cpu` (it
    /// then returns at once).
    fn worker_main(self: Arc<Self>, cpu: Option<usize>, ready: mpsc::Sender<Option<i32>>) {
        /// Announces the worker's exit, however it leaves.
        struct Exit<'a>(&'a Mutex<bool>, &'a Condvar);
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                *lock(self.0) = true;
                self.1.notify_all();
            }
        }
        let _exit = Exit(&self.exited, &self.exited_cv);
        // The spawner waits for this before it returns the stream. A dropped receiver (the
        // spawner gave up) is harmless.
        if let Some(Err(_)) = cpu.map(pin_current_thread) {
            let _ = ready.send(None);
            return;
        }
        let _ = ready.send(Some(gettid()));
        drop(ready);
        let ctx = TaskCtx {
            control: Arc::clone(&self.control),
            armed: Cell::new(false),
            spin_hint: Cell::new(0),
            stamp: Cell::new(0),
            seq: Cell::new(0),
        };
        let mut local: Vec<J> = Vec::with_capacity(TAKE);
        let mut done = Finished {
            remains: Vec::with_capacity(TAKE),
            unretired: 0,
            taken: 0,
        };
        loop {
            if !local.is_empty() {
                self.run_local(&mut local, &ctx, &mut done);
                continue;
            }
            let (next, popped) = self.next(&mut local);
            match next {
                Next::Run => done.taken = popped,
                Next::Empty => self.idle(popped),
                Next::Exit => break,
            }
        }
        let n = self.discard_pending.swap(0, Ordering::SeqCst);
        if n > 0 {
            self.retire(n);
        }
    }
}

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
    pub fn new(name: impl Into<String>) -> Result<Self, E> {
        Self::spawn(StreamConfig::new(name))
    }

    /// Starts a stream: spawns its worker and waits until it runs.
    ///
    /// Codes: 207005 (`ResourceAllocFail`) the worker thread could not be started.
    pub fn spawn(config: StreamConfig) -> Result<Self, E> {
        let control = Arc::new(Control {
            cancelled: AtomicBool::new(false),
            aborting: AtomicBool::new(false),
            waker: Mutex::new(None),
            worker: OnceLock::new(),
            blocked_on: AtomicU64::new(0),
        });
        let shared = Arc::new(Shared {
            ring: Ring::new(config.capacity),
            room: Mutex::new(()),
            not_full: Condvar::new(),
            blocked: AtomicUsize::new(0),
            drained: AtomicBool::new(false),
            capacity: config.capacity,
            spin: config.spin,
            enqueue_timeout: config.enqueue_timeout,
            state: AtomicU8::new(OPEN),
            retired: Padded::default(),
            wake_at: AtomicU64::new(u64::MAX),
            sync_lock: Mutex::new(()),
            sync_cv: Condvar::new(),
            error: Mutex::new(None),
            stop_on_failure: AtomicBool::new(false),
            halted: AtomicBool::new(false),
            abort_below: AtomicU64::new(0),
            discard_pending: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
            worker: WorkerCounters::default(),
            last_panic: Mutex::new(None),
            control,
            exited: Mutex::new(false),
            exited_cv: Condvar::new(),
            _error: PhantomData,
        });
        let (tx, rx) = mpsc::channel();
        let for_worker = Arc::clone(&shared);
        let cpu = config.cpu;
        let handle = thread::Builder::new()
            .name(config.name.clone())
            .spawn(move || for_worker.worker_main(cpu, tx))
            .map_err(|_| E::from(Error::ResourceAllocFail))?;
        // Set before any enqueue can exist: `Stream` is returned only below.
        let _ = shared.control.worker.set(handle.thread().clone());
        let tid = match rx.recv() {
            Ok(Some(tid)) => tid,
            // The worker could not be placed (it has returned) or died before it reported.
            Ok(None) | Err(_) => {
                let _ = handle.join();
                return Err(E::from(Error::ResourceAllocFail));
            }
        };
        Ok(Stream {
            shared,
            worker: Mutex::new(Some(handle)),
            tid,
            name: config.name,
            cpu,
        })
    }

    /// Queues `task`; returns once it is queued (waiting for room if the queue is full).
    ///
    /// Codes: 107017 (`InvalidHandle`) the stream is being or has been destroyed; 507002
    /// (`StreamTaskFull`) the queue stayed full for the whole
    /// [`enqueue_timeout`](StreamConfig::enqueue_timeout). Either way the task is dropped
    /// unrun.
    pub fn enqueue<F>(&self, task: F) -> Result<(), E>
    where
        F: FnOnce(&TaskCtx) -> Result<(), E> + Send + 'static,
        J: From<Task<E>>,
    {
        self.enqueue_job(J::from(Box::new(task)))
    }

    /// [`enqueue`](Self::enqueue) for an already boxed task.
    ///
    /// Codes: as [`enqueue`](Self::enqueue).
    pub fn enqueue_boxed(&self, task: Task<E>) -> Result<(), E>
    where
        J: From<Task<E>>,
    {
        self.enqueue_job(J::from(task))
    }

    /// [`enqueue`](Self::enqueue) for a job of the stream's own job type (no allocation).
    ///
    /// Codes: as [`enqueue`](Self::enqueue).
    pub fn enqueue_job(&self, task: J) -> Result<(), E> {
        let s = &*self.shared;
        match s.ring.push(task) {
            Push::Queued { wake } => {
                if wake {
                    self.wake_worker();
                }
                Ok(())
            }
            Push::Full(task) => self.enqueue_slow(task),
            Push::Closed(task) | Push::Spill(_, task) => {
                drop_quietly(task);
                Err(E::from(Error::InvalidHandle))
            }
        }
    }

    /// Tasks queued so far (tickets issued, taken or not): read right after a task was
    /// queued, at least that task's number plus one ([`TaskCtx::task_number`]).
    #[inline]
    pub fn issued(&self) -> u64 {
        self.shared.ring.issued()
    }

    /// [`enqueue_job`](Self::enqueue_job) that never waits: a full queue hands the job back
    /// (`Err`), for a caller that holds a lock it must not keep while it waits for room.
    /// Otherwise `Ok` with what `enqueue_job` would have returned.
    #[inline]
    pub fn try_enqueue_job(&self, task: J) -> Result<Result<(), E>, J> {
        match self.shared.ring.push(task) {
            Push::Queued { wake } => {
                if wake {
                    self.wake_worker();
                }
                Ok(Ok(()))
            }
            Push::Full(task) => Err(task),
            Push::Closed(task) | Push::Spill(_, task) => {
                drop_quietly(task);
                Ok(Err(E::from(Error::InvalidHandle)))
            }
        }
    }

    #[cold]
    fn wake_worker(&self) {
        self.shared.wakeups.fetch_add(1, Ordering::Relaxed);
        self.shared.control.unpark_worker();
    }

    /// `enqueue` into a full queue: from the worker itself the task is queued past the
    /// capacity; from any other thread it waits for room, at most `enqueue_timeout`.
    #[cold]
    #[inline(never)]
    fn enqueue_slow(&self, mut task: J) -> Result<(), E> {
        let s = &*self.shared;
        if s.control.on_worker() {
            // Waiting for room would wait for ourselves.
            return match s.ring.taker().push_own(task) {
                Push::Queued { .. } => Ok(()),
                Push::Closed(task) | Push::Full(task) | Push::Spill(_, task) => {
                    drop_quietly(task);
                    Err(E::from(Error::InvalidHandle))
                }
            };
        }
        let until = s
            .enqueue_timeout
            .and_then(|t| Instant::now().checked_add(t));
        let mut g = lock(&s.room);
        // Dekker handshake with `Shared::next`: announce, then look at the slots.
        s.blocked.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let result = loop {
            task = match s.ring.push(task) {
                Push::Queued { wake } => {
                    if wake {
                        self.wake_worker();
                    }
                    break Ok(());
                }
                Push::Closed(task) | Push::Spill(_, task) => {
                    drop_quietly(task);
                    break Err(E::from(Error::InvalidHandle));
                }
                Push::Full(task) => task,
            };
            g = match until {
                None => s.not_full.wait(g).unwrap_or_else(PoisonError::into_inner),
                Some(until) => {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        drop_quietly(task);
                        break Err(E::from(Error::StreamTaskFull));
                    }
                    s.not_full
                        .wait_timeout(g, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        };
        s.blocked.fetch_sub(1, Ordering::SeqCst);
        result
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
        let s = &*self.shared;
        if s.state.load(Ordering::SeqCst) != OPEN {
            return Err(E::from(Error::InvalidHandle));
        }
        if s.control.on_worker() {
            return Err(E::from(Error::InternalError));
        }
        let target = s.ring.issued();
        let done = || s.retired.load(Ordering::SeqCst) >= target;
        if !done() {
            let deadline = match wait {
                SyncWait::Forever => None,
                SyncWait::AtMost(d) if d.is_zero() => {
                    return Err(E::from(Error::StreamSyncTimeout));
                }
                // A deadline past the clock's range is "forever".
                SyncWait::AtMost(d) => Instant::now().checked_add(d),
            };
            let spin = match deadline {
                Some(d) => s.spin.min(d.saturating_duration_since(Instant::now())),
                None => s.spin,
            };
            if !spin_until(spin, done) {
                let mut g = lock(&s.sync_lock);
                loop {
                    // Dekker handshake with `Shared::retire` (see there).
                    s.wake_at.fetch_min(target, Ordering::SeqCst);
                    if done() {
                        break;
                    }
                    g = match deadline {
                        None => s.sync_cv.wait(g).unwrap_or_else(PoisonError::into_inner),
                        Some(d) => {
                            let now = Instant::now();
                            if now >= d {
                                return Err(E::from(Error::StreamSyncTimeout));
                            }
                            s.sync_cv
                                .wait_timeout(g, d - now)
                                .unwrap_or_else(PoisonError::into_inner)
                                .0
                        }
                    };
                }
            }
        }
        if s.state.load(Ordering::SeqCst) == DISCARDING {
            return Err(E::from(Error::InvalidHandle));
        }
        let mut slot = lock(&s.error);
        // Reported: a stop-on-failure stream runs its later tasks again.
        s.halted.store(false, Ordering::Relaxed);
        match slot.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Sets the failure mode: `stop` (`ACL_STOP_ON_FAILURE`) makes the worker discard the
    /// tasks after a failed one, unrun, until a [`synchronize`](Self::synchronize) reports the
    /// failure; otherwise (`ACL_CONTINUE_ON_FAILURE`, the default) later tasks still run.
    pub fn set_stop_on_failure(&self, stop: bool) {
        let s = &*self.shared;
        let slot = lock(&s.error);
        s.stop_on_failure.store(stop, Ordering::Relaxed);
        // A failure already stored halts the stream from now on (and a switch back resumes).
        s.halted.store(stop && slot.is_some(), Ordering::Relaxed);
    }

    /// Aborts the tasks enqueued so far (`aclrtStreamAbort`): those not started are dropped
    /// unrun and the running one is cancelled as a discard would (its failure is not stored);
    /// the stream stays open and runs the tasks enqueued after this call. Returns at once.
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
        }
        // A task enqueued while this runs may be taken before the flag is up and then be
        // interrupted with the aborted ones: it raced the abort.
        s.control.interrupt();
        Ok(())
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
        self.begin_destroy(mode)?;
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
        self.begin(mode, true)
    }

    /// [`begin_destroy`](Self::begin_destroy); `overtake` says whether a `Discard` may turn
    /// a drain in progress into a discard.
    fn begin(&self, mode: StreamDestroy, overtake: bool) -> Result<(), E> {
        let s = &*self.shared;
        let dropped = {
            let mut k = s.ring.taker();
            let state = s.state.load(Ordering::Relaxed);
            let upgrade = overtake && state == DRAINING && mode == StreamDestroy::Discard;
            if state != OPEN && !upgrade {
                return Err(E::from(Error::InvalidHandle));
            }
            if upgrade && s.drained.load(Ordering::Relaxed) {
                // The drain already ran everything: nothing to overtake, and the drain keeps
                // its success (the worker is on its way out; waiting for it is the caller's).
                return Ok(());
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
            dropped
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
        Ok(())
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
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Generous bound for anything a test waits on; a healthy run takes milliseconds.
    const LONG: Duration = Duration::from_secs(20);
    const SYNC: SyncWait = SyncWait::AtMost(LONG);

    type S = Stream<Error>;

    /// Queues a task on `s` that adds one to `ran`.
    fn count_on(s: &S, ran: &Arc<AtomicUsize>) {
        let r = Arc::clone(ran);
        s.enqueue(move |_| {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
    }

    /// A one-shot latch with a bounded wait.
    #[derive(Default)]
    struct Gate {
        open: Mutex<bool>,
        cv: Condvar,
    }

    impl Gate {
        fn new() -> Arc<Gate> {
            Arc::new(Gate::default())
        }
        fn open(&self) {
            *lock(&self.open) = true;
            self.cv.notify_all();
        }
        /// True if opened within `d`.
        fn wait(&self, d: Duration) -> bool {
            let g = lock(&self.open);
            let (g, _) = self
                .cv
                .wait_timeout_while(g, d, |open| !*open)
                .unwrap_or_else(PoisonError::into_inner);
            *g
        }
    }

    /// Runs `f` on a thread and returns its result, failing the test if it takes over `d`.
    fn within<T: Send + 'static>(d: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(d)
            .unwrap_or_else(|_| panic!("still running after {d:?}"))
    }

    /// Polls `cond` every millisecond for at most `d`.
    fn eventually(d: Duration, mut cond: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + d;
        while Instant::now() < end {
            if cond() {
                return true;
            }
            thread::sleep(Duration::from_millis(1));
        }
        cond()
    }

    /// Counts drops of the value it is captured in.
    struct DropCounter(Arc<AtomicUsize>);
    impl Drop for DropCounter {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// (state char, utime + stime in ticks) of a thread of this process.
    fn thread_stat(tid: i32) -> (char, u64) {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
            .expect("the worker thread exists");
        // The command name may contain spaces and parentheses: split after the last ')'.
        let rest = &text[text.rfind(')').expect("stat has (comm)") + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let state = f[0].chars().next().expect("state field");
        let utime: u64 = f[11].parse().expect("utime");
        let stime: u64 = f[12].parse().expect("stime");
        (state, utime + stime)
    }

    #[test]
    fn order_is_preserved_across_thousands_of_tasks() {
        let s = S::new("t-order").unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        const N: usize = 20_000;
        for i in 0..N {
            let seen = Arc::clone(&seen);
            s.enqueue(move |_| {
                lock(&seen).push(i);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(s.synchronize(SYNC), Ok(()));
        let seen = lock(&seen);
        assert_eq!(seen.len(), N);
        assert!(
            seen.iter().enumerate().all(|(i, &v)| i == v),
            "out of order"
        );
        let st = s.stats();
        assert_eq!(
            (st.enqueued, st.completed, st.failed),
            (N as u64, N as u64, 0)
        );
    }

    #[test]
    fn each_producers_order_is_preserved_with_concurrent_producers() {
        let s = Arc::new(S::spawn(StreamConfig::new("t-mp").capacity(16)).unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        const P: usize = 4;
        const N: usize = 3_000;
        let producers: Vec<_> = (0..P)
            .map(|p| {
                let (s, seen) = (Arc::clone(&s), Arc::clone(&seen));
                thread::spawn(move || {
                    for i in 0..N {
                        let seen = Arc::clone(&seen);
                        s.enqueue(move |_| {
                            lock(&seen).push((p, i));
                            Ok(())
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(s.synchronize(SYNC), Ok(()));
        let seen = lock(&seen);
        assert_eq!(seen.len(), P * N);
        let mut next = [0usize; P];
        for &(p, i) in seen.iter() {
            assert_eq!(i, next[p], "producer {p} out of order");
            next[p] += 1;
        }
    }

    #[test]
    fn enqueue_waits_for_room_instead_of_failing() {
        const CAP: usize = 8;
        const N: usize = 1_000;
        let s = Arc::new(S::spawn(StreamConfig::new("t-full").capacity(CAP)).unwrap());
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        s.enqueue(move |_| {
            assert!(g.wait(LONG), "gate never opened");
            Ok(())
        })
        .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        let (s2, ran2) = (Arc::clone(&s), Arc::clone(&ran));
        let producer = thread::spawn(move || {
            for i in 0..N {
                let ran = Arc::clone(&ran2);
                s2.enqueue(move |_| {
                    // In order: task i runs when exactly i tasks ran before it.
                    assert_eq!(ran.fetch_add(1, Ordering::SeqCst), i);
                    Ok(())
                })
                .expect("enqueue must not fail on a full queue");
            }
        });
        // The producer outruns the blocked task: the queue fills and stays full.
        assert!(eventually(LONG, || s.queued() == CAP));
        thread::sleep(Duration::from_millis(20));
        assert_eq!(s.queued(), CAP);
        assert!(
            !producer.is_finished(),
            "producer should be waiting for room"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        gate.open();
        producer.join().unwrap();
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), N);
        assert_eq!(s.stats().failed, 0);
    }

    #[test]
    fn enqueue_gives_up_on_a_queue_that_stays_full_and_loses_nothing_queued() {
        const CAP: usize = 4;
        let limit = Duration::from_millis(150);
        let s = S::spawn(
            StreamConfig::new("t-stuck")
                .capacity(CAP)
                .enqueue_timeout(Some(limit)),
        )
        .unwrap();
        let (gate, started) = (Gate::new(), Arc::new(AtomicBool::new(false)));
        let (g, st) = (Arc::clone(&gate), Arc::clone(&started));
        s.enqueue(move |_| {
            st.store(true, Ordering::SeqCst);
            assert!(g.wait(LONG), "gate never opened");
            Ok(())
        })
        .unwrap();
        // The head task runs (out of the queue), then the queue fills behind it.
        assert!(eventually(LONG, || started.load(Ordering::SeqCst)));
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..CAP {
            count_on(&s, &ran);
        }
        assert_eq!(s.queued(), CAP);
        let dropped = Arc::new(AtomicUsize::new(0));
        let d = DropCounter(Arc::clone(&dropped));
        let t0 = Instant::now();
        let r = s.enqueue(move |_| {
            let _keep = &d;
            Ok(())
        });
        let took = t0.elapsed();
        assert_eq!(r, Err(Error::StreamTaskFull));
        assert!(
            took >= limit,
            "gave up after {took:?}, before the {limit:?} bound"
        );
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the refused task is dropped unrun"
        );
        // The stream goes on once its head finishes: every task queued before runs.
        gate.open();
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), CAP);
        count_on(&s, &ran);
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), CAP + 1);
        assert_eq!(s.stats().failed, 0);
    }

    #[test]
    fn synchronize_reports_the_first_error_once_and_the_stream_goes_on() {
        let s = S::new("t-err").unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
        s.enqueue(|_| Err(Error::IpcError)).unwrap();
        count_on(&s, &ran);
        assert_eq!(s.synchronize(SYNC), Err(Error::TaskTimeout));
        assert_eq!(
            ran.load(Ordering::SeqCst),
            1,
            "tasks after a failure still run"
        );
        assert_eq!(s.synchronize(SYNC), Ok(()), "reported once, then cleared");
        assert!(!s.has_error());
        count_on(&s, &ran);
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 2);
        assert_eq!(s.stats().failed, 2);
    }

    #[test]
    fn synchronize_with_timeout_expires_while_a_task_blocks() {
        let s = S::new("t-sto").unwrap();
        s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        s.enqueue(move |_| {
            assert!(g.wait(LONG));
            Ok(())
        })
        .unwrap();
        let t0 = Instant::now();
        let r = s.synchronize(SyncWait::AtMost(Duration::from_millis(50)));
        assert_eq!(r, Err(Error::StreamSyncTimeout));
        assert!(t0.elapsed() >= Duration::from_millis(50), "returned early");
        assert_eq!(
            s.synchronize(SyncWait::AtMost(Duration::ZERO)),
            Err(Error::StreamSyncTimeout),
            "zero polls"
        );
        assert!(s.has_error(), "a timed-out synchronize clears nothing");
        gate.open();
        assert_eq!(s.synchronize(SYNC), Err(Error::TaskTimeout));
        assert_eq!(s.synchronize(SyncWait::AtMost(Duration::ZERO)), Ok(()));
        assert_eq!(s.synchronize(SyncWait::Forever), Ok(()));
    }

    #[test]
    fn query_is_not_ready_until_everything_ran() {
        let s = S::new("t-query").unwrap();
        assert_eq!(s.query(), StreamStatus::Complete);
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        s.enqueue(move |_| {
            assert!(g.wait(LONG));
            Ok(())
        })
        .unwrap();
        s.enqueue(|_| Err(Error::TaskTimeout)).unwrap();
        assert_eq!(s.query(), StreamStatus::NotReady);
        gate.open();
        assert!(eventually(LONG, || s.query() == StreamStatus::Complete));
        assert!(s.has_error(), "query leaves the error for synchronize");
        assert_eq!(s.synchronize(SYNC), Err(Error::TaskTimeout));
    }

    #[test]
    fn several_threads_synchronize_at_once() {
        let s = Arc::new(S::new("t-msync").unwrap());
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        s.enqueue(move |_| {
            assert!(g.wait(LONG));
            Ok(())
        })
        .unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let s = Arc::clone(&s);
                thread::spawn(move || s.synchronize(SYNC))
            })
            .collect();
        thread::sleep(Duration::from_millis(20));
        assert!(waiters.iter().all(|w| !w.is_finished()));
        gate.open();
        for w in waiters {
            assert_eq!(w.join().unwrap(), Ok(()));
        }
    }

    #[test]
    fn discard_drops_pending_tasks_and_interrupts_the_blocked_one() {
        let s = S::new("t-discard").unwrap();
        // The blocked task follows the module's protocol: a waker that changes the state its
        // wait checks, registered before blocking.
        let woke = Arc::new((Mutex::new(false), Condvar::new()));
        let outcome = Arc::new(Mutex::new(None));
        let started = Gate::new();
        let (w, o, st) = (
            Arc::clone(&woke),
            Arc::clone(&outcome),
            Arc::clone(&started),
        );
        s.enqueue(move |ctx| {
            let w2 = Arc::clone(&w);
            let _guard = ctx.on_cancel(move || {
                *lock(&w2.0) = true;
                w2.1.notify_all();
            });
            st.open();
            let g = lock(&w.0);
            let (g, res) =
                w.1.wait_timeout_while(g, LONG, |woken| !*woken)
                    .unwrap_or_else(PoisonError::into_inner);
            *lock(&o) = Some((*g, res.timed_out(), ctx.is_cancelled()));
            Err(Error::TaskTimeout)
        })
        .unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let bodies = Arc::new(AtomicUsize::new(0));
        const PENDING: usize = 50;
        for _ in 0..PENDING {
            let d = DropCounter(Arc::clone(&drops));
            let b = Arc::clone(&bodies);
            s.enqueue(move |_| {
                let _d = d;
                b.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        }
        assert!(started.wait(LONG));
        let t0 = Instant::now();
        assert_eq!(s.destroy(StreamDestroy::Discard), Ok(()));
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "cancel did not interrupt"
        );
        assert_eq!(drops.load(Ordering::SeqCst), PENDING, "captures released");
        assert_eq!(
            bodies.load(Ordering::SeqCst),
            0,
            "discarded tasks never run"
        );
        // Woken by the waker, not by the 20 s timeout, and the task saw the cancellation.
        assert_eq!(*lock(&outcome), Some((true, false, true)));
        let st = s.stats();
        assert_eq!(st.discarded, PENDING as u64);
        assert_eq!(st.completed, 1);
        assert_eq!(s.query(), StreamStatus::Complete);
        assert_eq!(s.enqueue(|_| Ok(())), Err(Error::InvalidHandle));
        assert_eq!(s.synchronize(SYNC), Err(Error::InvalidHandle));
        assert_eq!(s.destroy(StreamDestroy::Discard), Err(Error::InvalidHandle));
    }

    #[test]
    fn small_plain_wakers_are_kept_inline_and_others_boxed() {
        static HITS: AtomicUsize = AtomicUsize::new(0);
        let one: &'static AtomicUsize = &HITS;
        let (a, b) = (7usize, 9usize);
        let inline = Waker::new(move || {
            one.fetch_add(a, Ordering::SeqCst);
        });
        // Three words: too big for the inline room.
        let big = Waker::new(move || {
            one.fetch_add(a + b, Ordering::SeqCst);
        });
        let arc = Arc::new(AtomicUsize::new(0));
        let a2 = Arc::clone(&arc);
        // Has drop glue (an `Arc`): boxed, and dropped with the waker.
        let owning = Waker::new(move || {
            a2.fetch_add(1, Ordering::SeqCst);
        });
        assert!(matches!(inline, Waker::Inline { .. }));
        assert!(matches!(owning, Waker::Boxed(_)));
        inline.call();
        owning.call();
        assert_eq!(HITS.load(Ordering::SeqCst), 7);
        assert_eq!(arc.load(Ordering::SeqCst), 1);
        big.call();
        assert_eq!(HITS.load(Ordering::SeqCst), 7 + 16);
        drop(owning);
        assert_eq!(
            Arc::strong_count(&arc),
            1,
            "the boxed waker's capture was dropped"
        );
    }

    #[test]
    fn an_inline_waker_interrupts_the_blocked_task() {
        // What the simulator's waits register: a waker that owns nothing (here a `'static`
        // reference), stored without a box.
        let s = S::new("t-inline").unwrap();
        let woke: &'static (Mutex<bool>, Condvar) = Box::leak(Box::default());
        let outcome = Arc::new(Mutex::new(None));
        let started = Gate::new();
        let (o, st) = (Arc::clone(&outcome), Arc::clone(&started));
        let shared = Arc::clone(&s.shared);
        s.enqueue(move |ctx| {
            let _guard = ctx.on_cancel(move || {
                *lock(&woke.0) = true;
                woke.1.notify_all();
            });
            let inline = matches!(*lock(&shared.control.waker), Some(Waker::Inline { .. }));
            st.open();
            let g = lock(&woke.0);
            let (g, res) = woke
                .1
                .wait_timeout_while(g, LONG, |woken| !*woken)
                .unwrap_or_else(PoisonError::into_inner);
            *lock(&o) = Some((inline, *g, res.timed_out()));
            Ok(())
        })
        .unwrap();
        assert!(started.wait(LONG));
        assert_eq!(s.destroy(StreamDestroy::Discard), Ok(()));
        // Registered inline, and woken by it rather than by the timeout.
        assert_eq!(*lock(&outcome), Some((true, true, false)));
    }

    #[test]
    fn on_cancel_after_cancellation_wakes_at_once() {
        let s = S::new("t-late").unwrap();
        let gate = Gate::new();
        let fired = Arc::new(AtomicBool::new(false));
        let (g, f) = (Arc::clone(&gate), Arc::clone(&fired));
        let started = Gate::new();
        let st = Arc::clone(&started);
        s.enqueue(move |ctx| {
            st.open();
            // Ignore the cancellation until the test has finished cancelling...
            while !ctx.is_cancelled() {
                thread::yield_now();
            }
            assert!(g.wait(LONG));
            // ...then register: the waker must run immediately.
            let f2 = Arc::clone(&f);
            let _guard = ctx.on_cancel(move || f2.store(true, Ordering::SeqCst));
            Ok(())
        })
        .unwrap();
        assert!(started.wait(LONG));
        let s = Arc::new(s);
        let s2 = Arc::clone(&s);
        let destroyer = thread::spawn(move || s2.destroy(StreamDestroy::Discard));
        assert!(eventually(LONG, || s
            .shared
            .control
            .cancelled
            .load(Ordering::SeqCst)));
        assert!(!fired.load(Ordering::SeqCst));
        gate.open();
        assert_eq!(destroyer.join().unwrap(), Ok(()));
        assert!(fired.load(Ordering::SeqCst));
    }

    #[test]
    fn ctx_sleep_is_cut_short_by_discard() {
        let s = S::new("t-sleep").unwrap();
        let result = Arc::new(Mutex::new(None));
        let r = Arc::clone(&result);
        let started = Gate::new();
        let st = Arc::clone(&started);
        s.enqueue(move |ctx| {
            st.open();
            *lock(&r) = Some(ctx.sleep(LONG));
            Ok(())
        })
        .unwrap();
        // A short sleep on another stream completes normally.
        let s2 = S::new("t-sleep2").unwrap();
        let short = Arc::new(Mutex::new(None));
        let sh = Arc::clone(&short);
        s2.enqueue(move |ctx| {
            *lock(&sh) = Some(ctx.sleep(Duration::from_millis(5)));
            Ok(())
        })
        .unwrap();
        assert_eq!(s2.synchronize(SYNC), Ok(()));
        assert_eq!(*lock(&short), Some(Ok(())));

        assert!(started.wait(LONG));
        let t0 = Instant::now();
        drop(s); // Drop = Discard.
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert_eq!(*lock(&result), Some(Err(Cancelled)));
    }

    /// A discard of a stream that is draining a task that never ends turns the drain into a
    /// discard: both return promptly (the drain with 107017), the queued tasks never run.
    #[test]
    fn a_discard_overtakes_a_drain_in_progress() {
        let s = Arc::new(S::new("t-overtake").unwrap());
        let started = Gate::new();
        let st = Arc::clone(&started);
        s.enqueue(move |ctx| {
            st.open();
            let _ = ctx.sleep(Duration::from_secs(3600));
            Ok(())
        })
        .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        count_on(&s, &ran);
        assert!(started.wait(LONG));
        let (tx, rx) = mpsc::channel();
        let drainer = {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                let _ = tx.send(s.destroy(StreamDestroy::Drain));
            })
        };
        // The drain has begun once the stream refuses new work.
        assert!(eventually(LONG, || s.enqueue(|_| Ok(())).is_err()));
        let t0 = Instant::now();
        let discard = {
            let s = Arc::clone(&s);
            within(LONG, move || s.destroy(StreamDestroy::Discard))
        };
        assert_eq!(discard, Ok(()));
        assert_eq!(rx.recv_timeout(LONG), Ok(Err(Error::InvalidHandle)));
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        drainer.join().unwrap();
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(s.query(), StreamStatus::Complete);
        assert_eq!(s.destroy(StreamDestroy::Discard), Err(Error::InvalidHandle));
    }

    /// A drain started by one of the stream's own tasks goes on after the last reference to
    /// the stream is dropped: dropping does not turn it into a discard.
    #[test]
    fn dropping_a_stream_its_own_task_drains_still_runs_the_rest() {
        let s = Arc::new(S::new("t-self-drain").unwrap());
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        s.enqueue(move |_| {
            g.wait(LONG);
            Ok(())
        })
        .unwrap();
        let me = Arc::clone(&s);
        s.enqueue(move |_| {
            assert_eq!(me.destroy(StreamDestroy::Drain), Ok(()));
            drop(me); // The last reference: dropped on the worker, mid-drain.
            Ok(())
        })
        .unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        count_on(&s, &ran);
        drop(s);
        gate.open();
        assert!(eventually(LONG, || ran.load(Ordering::SeqCst) == 1));
    }

    /// Discarding streams in two passes — cancel all, then wait for all — ends a task of one
    /// that waits for another, whatever the order: one destroy at a time would wait for the
    /// first stream's task, which waits for the second stream, not cancelled yet.
    #[test]
    fn begin_destroy_on_all_then_wait_ends_a_task_waiting_on_another_stream() {
        let s1 = Arc::new(S::new("t-two-pass-1").unwrap());
        let s2 = Arc::new(S::new("t-two-pass-2").unwrap());
        s2.enqueue(move |ctx| {
            let _ = ctx.sleep(Duration::from_secs(3600));
            Ok(())
        })
        .unwrap();
        let started = Gate::new();
        let st = Arc::clone(&started);
        let other = Arc::clone(&s2);
        let synced = Arc::new(Mutex::new(None));
        let sy = Arc::clone(&synced);
        s1.enqueue(move |_| {
            st.open();
            *lock(&sy) = Some(other.synchronize(SyncWait::AtMost(LONG)));
            Ok(())
        })
        .unwrap();
        assert!(started.wait(LONG));
        let t0 = Instant::now();
        let both = [Arc::clone(&s1), Arc::clone(&s2)];
        within(LONG, move || {
            for s in &both {
                s.begin_destroy(StreamDestroy::Discard).unwrap();
            }
            for s in &both {
                s.wait_destroyed();
            }
        });
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        assert_eq!(*lock(&synced), Some(Err(Error::InvalidHandle)));
    }

    /// A synchronize already waiting when a draining destroy starts gets what its tasks came
    /// to (here a task's error), not 107017: the drain ran them all.
    #[test]
    fn a_synchronize_waiting_through_a_drain_reports_the_task_error() {
        let s = Arc::new(S::new("t-syncdrain").unwrap());
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        s.enqueue(move |_| {
            assert!(g.wait(LONG));
            Err(Error::TaskTimeout)
        })
        .unwrap();
        let s2 = Arc::clone(&s);
        let syncer = thread::spawn(move || s2.synchronize(SyncWait::AtMost(LONG)));
        thread::sleep(Duration::from_millis(20));
        let s3 = Arc::clone(&s);
        let destroyer = thread::spawn(move || s3.destroy(StreamDestroy::Drain));
        thread::sleep(Duration::from_millis(20));
        gate.open();
        assert_eq!(destroyer.join().unwrap(), Ok(()));
        assert_eq!(syncer.join().unwrap(), Err(Error::TaskTimeout));
        // Callers that come after the destroy find the stream gone.
        assert_eq!(s.synchronize(SyncWait::Forever), Err(Error::InvalidHandle));
    }

    /// A discard that comes after a drain has run everything (the worker is leaving) has
    /// nothing to overtake: the drain stays a drain, so its caller is not told its tasks were
    /// discarded.
    #[test]
    fn a_discard_after_a_finished_drain_overtakes_nothing() {
        let s = S::new("t-late").unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        count_on(&s, &ran);
        assert_eq!(s.destroy(StreamDestroy::Drain), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(s.begin_destroy(StreamDestroy::Discard), Ok(()));
        s.wait_destroyed();
        assert_eq!(s.shared.state.load(Ordering::SeqCst), DRAINING);
    }

    #[test]
    fn drain_runs_every_queued_task_before_returning() {
        let s = S::new("t-drain").unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let r = Arc::clone(&ran);
            s.enqueue(move |_| {
                thread::sleep(Duration::from_micros(50));
                r.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .unwrap();
        }
        assert_eq!(s.destroy(StreamDestroy::Drain), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 100);
        assert_eq!(s.stats().discarded, 0);
        assert_eq!(s.enqueue(|_| Ok(())), Err(Error::InvalidHandle));
    }

    #[test]
    fn blocked_enqueuers_get_invalid_handle_when_the_stream_is_destroyed() {
        let s = Arc::new(S::spawn(StreamConfig::new("t-bdes").capacity(1)).unwrap());
        let gate = Gate::new();
        let g = Arc::clone(&gate);
        let started = Gate::new();
        let st = Arc::clone(&started);
        s.enqueue(move |ctx| {
            st.open();
            let g2 = Arc::clone(&g);
            let _w = ctx.on_cancel(move || g2.open());
            assert!(g.wait(LONG));
            Ok(())
        })
        .unwrap();
        assert!(started.wait(LONG));
        s.enqueue(|_| Ok(())).unwrap(); // fills the queue
        let s2 = Arc::clone(&s);
        let blocked = thread::spawn(move || s2.enqueue(|_| Ok(())));
        thread::sleep(Duration::from_millis(20));
        assert!(!blocked.is_finished());
        assert_eq!(s.destroy(StreamDestroy::Discard), Ok(()));
        assert_eq!(blocked.join().unwrap(), Err(Error::InvalidHandle));
    }

    #[test]
    fn a_panicking_task_becomes_an_error_not_a_dead_stream() {
        let s = S::new("t-panic").unwrap();
        s.enqueue(|_| panic!("boom in a host function")).unwrap();
        let ran = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&ran);
        s.enqueue(move |_| {
            r.store(true, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        assert_eq!(s.synchronize(SYNC), Err(Error::DrvInternalError));
        assert!(ran.load(Ordering::SeqCst), "the stream kept going");
        assert_eq!(s.last_panic().as_deref(), Some("boom in a host function"));
        assert_eq!(s.synchronize(SYNC), Ok(()));
        let st = s.stats();
        assert_eq!((st.panicked, st.failed, st.completed), (1, 1, 2));
    }

    #[test]
    fn panics_inside_one_taken_batch_spare_the_tasks_around_them() {
        let s = S::new("t-panics").unwrap();
        let hold = Gate::new();
        let h = Arc::clone(&hold);
        s.enqueue(move |_| {
            assert!(h.wait(LONG), "gate never opened");
            Ok(())
        })
        .unwrap();
        // Queued behind the gate, so the worker takes them together.
        let order = Arc::new(Mutex::new(Vec::new()));
        for i in 0..8u32 {
            let o = Arc::clone(&order);
            s.enqueue(move |_| {
                if i % 3 == 1 {
                    panic!("boom {i}");
                }
                lock(&o).push(i);
                Ok(())
            })
            .unwrap();
        }
        hold.open();
        assert_eq!(s.synchronize(SYNC), Err(Error::DrvInternalError));
        assert_eq!(*lock(&order), vec![0, 2, 3, 5, 6]);
        assert_eq!(s.last_panic().as_deref(), Some("boom 7"));
        let st = s.stats();
        assert_eq!((st.panicked, st.failed, st.completed), (3, 3, 9));
        assert_eq!(s.query(), StreamStatus::Complete);
    }

    #[test]
    fn drop_all_drops_the_rest_after_a_panicking_drop() {
        struct D(Arc<AtomicUsize>, bool);
        impl Drop for D {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
                if self.1 {
                    panic!("drop panics");
                }
            }
        }
        let n = Arc::new(AtomicUsize::new(0));
        let mut v: Vec<D> = (0..6)
            .map(|i| D(Arc::clone(&n), i == 1 || i == 4))
            .collect();
        let cap = v.capacity();
        drop_all(&mut v);
        assert_eq!(n.load(Ordering::SeqCst), 6);
        assert!(v.is_empty());
        assert_eq!(v.capacity(), cap);
    }

    #[test]
    fn a_task_may_use_its_own_stream_without_deadlocking() {
        let s = Arc::new(S::spawn(StreamConfig::new("t-self").capacity(2)).unwrap());
        let inner = Arc::new(Mutex::new(None));
        let ran = Arc::new(AtomicUsize::new(0));
        let (s2, i2, r2) = (Arc::clone(&s), Arc::clone(&inner), Arc::clone(&ran));
        s.enqueue(move |_| {
            // More than the capacity, from the worker: must not wait for room.
            for _ in 0..10 {
                let r = Arc::clone(&r2);
                s2.enqueue(move |_| {
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })?;
            }
            *lock(&i2) = Some(s2.synchronize(SYNC));
            Ok(())
        })
        .unwrap();
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(*lock(&inner), Some(Err(Error::InternalError)));
        // The inner tasks were enqueued after our first synchronize began; this one covers them.
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 10);
        assert_eq!(s.stats().enqueued, 11);
    }

    #[test]
    fn an_idle_worker_sleeps_and_is_woken_by_enqueue() {
        let s = S::new("t-idle").unwrap();
        for _ in 0..100 {
            s.enqueue(|_| Ok(())).unwrap();
        }
        assert_eq!(s.synchronize(SYNC), Ok(()));
        // Past the spin budget the worker parks.
        assert!(eventually(LONG, || s.stats().sleeps >= 1
            && s.shared.ring.is_sleeping()));
        thread::sleep(Duration::from_millis(5));
        let (_, cpu0) = thread_stat(s.worker_tid());
        for _ in 0..10 {
            thread::sleep(Duration::from_millis(10));
            assert_eq!(thread_stat(s.worker_tid()).0, 'S', "idle worker not asleep");
        }
        let (_, cpu1) = thread_stat(s.worker_tid());
        // ~100 ms idle: a spinning thread would burn ~10 ticks; allow one for accounting.
        assert!(cpu1 - cpu0 <= 1, "idle worker used {} ticks", cpu1 - cpu0);

        let before = s.stats();
        let (tx, rx) = mpsc::channel();
        s.enqueue(move |_| {
            tx.send(()).map_err(|_| Error::DrvInternalError)?;
            Ok(())
        })
        .unwrap();
        assert!(rx.recv_timeout(LONG).is_ok(), "enqueue woke the worker");
        let after = s.stats();
        assert_eq!(after.wakeups, before.wakeups + 1, "one wake syscall");
    }

    #[test]
    fn back_to_back_enqueues_need_no_wake_syscall() {
        // With a generous spin budget the worker is still spinning when the next task arrives.
        let s = S::spawn(StreamConfig::new("t-spin").spin(Duration::from_millis(200))).unwrap();
        s.enqueue(|_| Ok(())).unwrap();
        assert_eq!(s.synchronize(SYNC), Ok(()));
        let before = s.stats();
        for _ in 0..100 {
            s.enqueue(|_| Ok(())).unwrap();
            assert_eq!(s.synchronize(SYNC), Ok(()));
        }
        let after = s.stats();
        assert!(after.spin_hits > before.spin_hits);
        // Preemption on a busy machine may push a few past the budget; not most.
        assert!(
            after.wakeups - before.wakeups < 10,
            "{} wakeups for 100 back-to-back tasks",
            after.wakeups - before.wakeups
        );
    }

    #[test]
    fn no_wake_up_is_lost_when_the_worker_parks_every_time() {
        // spin = 0: the worker parks whenever its queue is empty, so every enqueue races with
        // a park; two producers and synchronize race with it too. A lost wake-up would show up
        // as a synchronize timing out (507046) instead of returning Ok.
        let s = Arc::new(S::spawn(StreamConfig::new("t-race").spin(Duration::ZERO)).unwrap());
        let ran = Arc::new(AtomicUsize::new(0));
        const N: usize = 5_000;
        let producers: Vec<_> = (0..2)
            .map(|p| {
                let (s, ran) = (Arc::clone(&s), Arc::clone(&ran));
                thread::spawn(move || {
                    for i in 0..N {
                        let r = Arc::clone(&ran);
                        s.enqueue(move |_| {
                            r.fetch_add(1, Ordering::SeqCst);
                            Ok(())
                        })?;
                        if (i + p) % 3 == 0 {
                            s.synchronize(SyncWait::AtMost(Duration::from_secs(10)))?;
                        }
                    }
                    Ok::<(), Error>(())
                })
            })
            .collect();
        for p in producers {
            assert_eq!(p.join().unwrap(), Ok(()));
        }
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 2 * N);
        assert!(s.stats().sleeps > 0, "the worker did park in between");
    }

    #[test]
    fn dropping_a_stream_with_a_blocked_task_does_not_hang() {
        let s = S::new("t-drop").unwrap();
        let started = Gate::new();
        let st = Arc::clone(&started);
        s.enqueue(move |ctx| {
            st.open();
            let gate = Gate::new();
            let g = Arc::clone(&gate);
            let _w = ctx.on_cancel(move || g.open());
            assert!(gate.wait(LONG));
            Ok(())
        })
        .unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let d = DropCounter(Arc::clone(&drops));
        s.enqueue(move |_| {
            let _d = d;
            Ok(())
        })
        .unwrap();
        assert!(started.wait(LONG));
        let t0 = Instant::now();
        drop(s);
        assert!(t0.elapsed() < Duration::from_secs(5));
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }

    /// A job with remains: `Quick` never blocks, `Check` may block and records how many
    /// remains were dropped when it started.
    enum Probe {
        Quick(DropCounter),
        Check(Arc<AtomicUsize>, Arc<AtomicUsize>),
    }

    impl Job<Error> for Probe {
        type Remains = Option<DropCounter>;
        fn run(self, _: &TaskCtx, _: &mut dyn FnMut()) -> (Result<(), Error>, Option<DropCounter>) {
            match self {
                Probe::Quick(d) => (Ok(()), Some(d)),
                Probe::Check(drops, seen) => {
                    seen.store(drops.load(Ordering::SeqCst), Ordering::SeqCst);
                    (Ok(()), None)
                }
            }
        }
        fn may_block(&self) -> bool {
            matches!(self, Probe::Check(..))
        }
    }

    #[test]
    fn remains_are_dropped_before_a_blocking_job_and_before_synchronize_returns() {
        let s: Stream<Error, Probe> = Stream::spawn(StreamConfig::new("t-remains")).unwrap();
        let drops = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(AtomicUsize::new(usize::MAX));
        for round in 1..=50usize {
            // Five quick jobs, then one that may block: it must see all five dropped.
            for _ in 0..5 {
                s.enqueue_job(Probe::Quick(DropCounter(Arc::clone(&drops))))
                    .unwrap();
            }
            s.enqueue_job(Probe::Check(Arc::clone(&drops), Arc::clone(&seen)))
                .unwrap();
            // Then quick jobs only: synchronize returns with their remains dropped too.
            for _ in 0..3 {
                s.enqueue_job(Probe::Quick(DropCounter(Arc::clone(&drops))))
                    .unwrap();
            }
            assert_eq!(s.synchronize(SYNC), Ok(()));
            assert_eq!(seen.load(Ordering::SeqCst), round * 8 - 3);
            assert_eq!(drops.load(Ordering::SeqCst), round * 8);
        }
    }

    /// A job that logs its number when it runs; `Chained` ones say they chain, `Fail` ones
    /// return an error, `Boom` ones (chained) panic. `Hold` blocks until its gate opens.
    enum Link {
        Plain(u32, Arc<Mutex<Vec<u32>>>),
        Chained(u32, Arc<Mutex<Vec<u32>>>, DropCounter),
        Fail(u32, Arc<Mutex<Vec<u32>>>),
        Boom,
        Hold(Arc<Gate>),
    }

    impl Job<Error> for Link {
        type Remains = Option<DropCounter>;
        fn run(self, _: &TaskCtx, _: &mut dyn FnMut()) -> (Result<(), Error>, Option<DropCounter>) {
            match self {
                Link::Plain(i, log) => {
                    lock(&log).push(i);
                    (Ok(()), None)
                }
                Link::Chained(i, log, d) => {
                    lock(&log).push(i);
                    (Ok(()), Some(d))
                }
                Link::Fail(i, log) => {
                    lock(&log).push(i);
                    (Err(Error::InvalidHandle), None)
                }
                Link::Boom => panic!("boom in a chained job"),
                Link::Hold(g) => {
                    assert!(g.wait(LONG), "gate never opened");
                    (Ok(()), None)
                }
            }
        }
        fn may_block(&self) -> bool {
            matches!(self, Link::Hold(_))
        }
        fn chains(&self) -> bool {
            matches!(self, Link::Chained(..) | Link::Boom)
        }
    }

    #[test]
    fn chained_jobs_run_in_order_and_are_counted_like_the_others() {
        let s: Stream<Error, Link> = Stream::spawn(StreamConfig::new("t-chain")).unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let drops = Arc::new(AtomicUsize::new(0));
        let chained = |i| Link::Chained(i, Arc::clone(&log), DropCounter(Arc::clone(&drops)));
        // Held, so that everything below is taken from the queue in batches.
        let hold = Gate::new();
        s.enqueue_job(Link::Hold(Arc::clone(&hold))).unwrap();
        // Chained jobs behind a plain one, behind a chained one, behind a failing one (not
        // chained: it runs in its own turn), and at the end.
        let mut expect = Vec::new();
        for round in 0..10u32 {
            let i = round * 10;
            s.enqueue_job(Link::Plain(i, Arc::clone(&log))).unwrap();
            s.enqueue_job(chained(i + 1)).unwrap();
            s.enqueue_job(chained(i + 2)).unwrap();
            s.enqueue_job(Link::Fail(i + 3, Arc::clone(&log))).unwrap();
            s.enqueue_job(chained(i + 4)).unwrap();
            expect.extend([i, i + 1, i + 2, i + 3, i + 4]);
        }
        hold.open();
        assert_eq!(s.synchronize(SYNC), Err(Error::InvalidHandle));
        assert_eq!(*lock(&log), expect);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            30,
            "remains of chained jobs not dropped"
        );
        let st = s.stats();
        assert_eq!((st.completed, st.failed), (51, 10));

        // A chained job that panics: the job before it stays counted, the stream goes on.
        lock(&log).clear();
        s.enqueue_job(Link::Plain(1, Arc::clone(&log))).unwrap();
        s.enqueue_job(Link::Boom).unwrap();
        s.enqueue_job(chained(2)).unwrap();
        assert_eq!(s.synchronize(SYNC), Err(Error::DrvInternalError));
        assert_eq!(*lock(&log), [1, 2]);
        assert_eq!(s.last_panic().as_deref(), Some("boom in a chained job"));
        let st = s.stats();
        assert_eq!((st.completed, st.failed, st.panicked), (54, 11, 1));
        assert_eq!(s.query(), StreamStatus::Complete);
    }

    /// Quick jobs, one that blocks until a gate opens, or one that says it does not block
    /// but calls `before_block` and then blocks until a gate opens.
    enum Step {
        Quick,
        Block(Arc<Gate>),
        Polite(Arc<Gate>),
    }

    impl Job<Error> for Step {
        type Remains = ();
        fn run(self, _: &TaskCtx, before_block: &mut dyn FnMut()) -> (Result<(), Error>, ()) {
            match self {
                Step::Quick => {}
                Step::Block(g) => assert!(g.wait(LONG), "gate never opened"),
                Step::Polite(g) => {
                    before_block();
                    assert!(g.wait(LONG), "gate never opened");
                }
            }
            (Ok(()), ())
        }
        fn may_block(&self) -> bool {
            matches!(self, Step::Block(_))
        }
    }

    #[test]
    fn synchronize_does_not_wait_for_a_blocking_task_taken_with_the_ones_it_waits_for() {
        for polite in [false, true] {
            let s = Arc::new(Stream::<Error, Step>::spawn(StreamConfig::new("t-retire")).unwrap());
            let (hold, block) = (Gate::new(), Gate::new());
            // Hold the worker so the next tasks pile up and are taken from the queue together.
            s.enqueue_job(Step::Block(Arc::clone(&hold))).unwrap();
            for _ in 0..5 {
                s.enqueue_job(Step::Quick).unwrap();
            }
            let s2 = Arc::clone(&s);
            let sync = thread::spawn(move || s2.synchronize(SYNC));
            // The synchronize has read its target (6 tasks) once it published its wake-up mark.
            assert!(eventually(LONG, || s.shared.wake_at.load(Ordering::SeqCst) != u64::MAX));
            let g = Arc::clone(&block);
            s.enqueue_job(if polite {
                Step::Polite(g)
            } else {
                Step::Block(g)
            })
            .unwrap();
            hold.open();
            // The five quick tasks are retired before the blocking one blocks.
            assert_eq!(sync.join().unwrap(), Ok(()), "polite: {polite}");
            assert_eq!(s.query(), StreamStatus::NotReady);
            block.open();
            assert_eq!(s.synchronize(SYNC), Ok(()));
        }
    }

    /// The CPU a thread may run on, from `/proc` (field `Cpus_allowed_list`).
    fn cpus_allowed_list(tid: i32) -> String {
        let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_owned()
    }

    #[test]
    fn a_placed_worker_runs_on_its_cpu_only() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty(), "sched_getaffinity said nothing");
        let last = *cpus.last().unwrap();
        let s = S::spawn(StreamConfig::new("t-cpu").cpu(Some(last))).unwrap();
        assert_eq!(s.cpu(), Some(last));
        assert_eq!(cpus_allowed_list(s.worker_tid()), last.to_string());
        // It still runs tasks, and the spawning thread keeps its own affinity.
        let ran = Arc::new(AtomicUsize::new(0));
        count_on(&s, &ran);
        assert_eq!(s.synchronize(SYNC), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(allowed_cpus(), cpus);
        // Unplaced workers are left to the scheduler.
        let free = S::spawn(StreamConfig::new("t-nocpu")).unwrap();
        assert_eq!(free.cpu(), None);
        assert_eq!(
            cpus_allowed_list(free.worker_tid()),
            cpus_allowed_list(gettid())
        );
    }

    #[test]
    fn an_idle_worker_stops_spinning_when_a_busy_thread_wants_its_cpu() {
        let cpu = *allowed_cpus().last().unwrap();
        // A spin budget far longer than the test: the worker sleeps early only if it gives up
        // spinning because its CPU is wanted.
        let s = S::spawn(
            StreamConfig::new("t-yield")
                .cpu(Some(cpu))
                .spin(Duration::from_secs(60)),
        )
        .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let busy = {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                pin_current_thread(cpu).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let ran = Arc::new(AtomicUsize::new(0));
        count_on(&s, &ran);
        assert_eq!(s.synchronize(SYNC), Ok(()));
        let parked = eventually(LONG, || s.stats().sleeps >= 1);
        stop.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        assert!(
            parked,
            "the idle worker kept spinning next to a busy thread"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_worker_that_cannot_be_placed_fails_the_spawn_cleanly() {
        for (k, cpu) in [libc::CPU_SETSIZE as usize - 1, usize::MAX]
            .into_iter()
            .enumerate()
        {
            let name = format!("t-badcpu{k}");
            let r = S::spawn(StreamConfig::new(name.clone()).cpu(Some(cpu)));
            assert_eq!(r.err(), Some(Error::ResourceAllocFail), "cpu {cpu}");
            // The failed spawn joined the worker; the kernel drops its `/proc` entry a moment
            // after the join returns. Other tests' threads come and go meanwhile, so only look
            // for ours.
            let ours_left = || {
                std::fs::read_dir("/proc/self/task")
                    .unwrap()
                    .map(|e| e.unwrap().path().join("comm"))
                    .filter_map(|p| std::fs::read_to_string(p).ok())
                    .any(|c| c.trim() == name)
            };
            assert!(
                eventually(LONG, || !ours_left()),
                "worker {name} left behind"
            );
        }
    }
}

//! Cancellation of a stream's running task: the shared cancel flag ([`Control`]), the
//! [`TaskCtx`] a task sees, its wakers ([`TaskCtx::on_cancel`], [`LazyCancel`]) and the
//! [`CancelToken`] for code that cannot see the context.

use std::cell::{Cell, OnceCell};
use std::fmt;
use std::mem::{self, MaybeUninit};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use super::{drop_quietly, lock};

/// A waker registered with [`TaskCtx::on_cancel`]: a closure that has no drop glue and fits
/// in two words is kept inline, anything else in a box.
///
/// Why inline: a wait that sleeps registers its waker and removes it the moment it wakes, on
/// the path from the record to the stream's next task; freeing a box there cost about
/// 0.25 µs of a 5 µs idle wake-up (the allocator's lines have gone cold while the thread
/// slept).
pub(super) enum Waker {
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
    pub(super) fn new<W: Fn() + Send + Sync + 'static>(w: W) -> Waker {
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

    pub(super) fn call(&self) {
        match self {
            // SAFETY: `call` and `bytes` were made together by `Waker::new` for the same `W`.
            Waker::Inline { call, bytes } => unsafe { call(bytes) },
            Waker::Boxed(f) => f(),
        }
    }
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

/// The cancellation state shared by a stream's engine and its [`TaskCtx`] / [`CancelToken`]s.
pub(super) struct Control {
    pub(super) cancelled: AtomicBool,
    /// An abort ([`Stream::abort`](super::Stream::abort)) is cutting the running task short; cleared by the worker
    /// when it reaches the first task queued after the abort.
    pub(super) aborting: AtomicBool,
    pub(super) waker: Mutex<Option<Waker>>,
    pub(super) worker: OnceLock<Thread>,
    /// What the running task said it is blocked on ([`TaskCtx::set_blocked_on`]; 0: nothing).
    pub(super) blocked_on: AtomicU64,
    /// When a task last moved the worker to another CPU ([`TaskCtx::note_moved`]; ns of
    /// `sys::now_ns`, 0: never): a `synchronize` spins longer for a while after.
    pub(super) moved_at: AtomicU64,
    /// The CPU the stream's worker ran its last host function on, if no CPU was free then
    /// (`u32::MAX`: one was, or none ran yet, or the worker is not adaptively placed): see
    /// `placement::host_function`.
    pub(super) host_fn_cpu: AtomicU32,
    /// The kernel thread id of the stream's own thread (set before the stream can take a
    /// task).
    pub(super) home_tid: AtomicI32,
    /// The device the stream belongs to ([`super::StreamConfig::device`]).
    pub(super) device: u32,
    /// Tests: this stream's waits that would block park, and the runner keeps it parked
    /// ([`super::Stream::force_parking`]).
    #[cfg(test)]
    pub(super) forced: AtomicBool,
    /// Tests: how many times the stream's waits parked.
    #[cfg(test)]
    pub(super) parks: AtomicU64,
    /// Tests: the worker panics, outside the tasks' unwind guards, once it next takes tasks
    /// (`Shared::worker_unwound`).
    #[cfg(test)]
    pub(super) unwind_worker: AtomicBool,
    /// Tests: the worker panics, outside the tasks' unwind guards, once its stream has parked
    /// on another thread's runner (its turn away).
    #[cfg(test)]
    pub(super) unwind_away: AtomicBool,
    /// Tests: this stream's waits block on its thread, never park
    /// ([`super::Stream::never_park`]).
    #[cfg(test)]
    pub(super) never_park: AtomicBool,
    /// Tests: an interrupt (a stop, an abort) does not run the running task's waker: the task
    /// sees the flag when something else wakes it, as if its thread, woken, had not run yet
    /// when that came ([`super::Stream::wake_late`]).
    #[cfg(test)]
    pub(super) late_wake: AtomicBool,
    /// Tests: the next notify wait to start holds there, after the worker's checks, until the
    /// test lets it go ([`super::Stream::hold_next_wait`]): `HOLD_*`.
    #[cfg(test)]
    pub(super) hold: std::sync::atomic::AtomicU8,
    /// Tests: the worker's idle spin takes every yield of its to have found the CPU free (the
    /// load signal it reads, [`super::worker`]'s `spin_until`), so that it spins out its
    /// budget whatever the machine's load ([`super::Stream::cpu_seems_free`]).
    #[cfg(test)]
    pub(super) cpu_free: AtomicBool,
}

/// [`Control::hold`]: no wait is to hold.
#[cfg(test)]
pub(super) const HOLD_OFF: u8 = 0;
/// [`Control::hold`]: the next wait to start holds.
#[cfg(test)]
pub(super) const HOLD_ARMED: u8 = 1;
/// [`Control::hold`]: a wait holds.
#[cfg(test)]
pub(super) const HOLD_HELD: u8 = 2;

impl Control {
    /// Cancels for good: sets the flag, runs the registered waker (if any), unparks the worker.
    pub(super) fn cancel(&self) {
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
    pub(super) fn stopping(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst) || self.aborting.load(Ordering::SeqCst)
    }

    /// Interrupts the running task for an abort: as [`cancel`](Self::cancel), but the flag
    /// goes back once the worker has passed the aborted tasks.
    pub(super) fn interrupt(&self) {
        self.aborting.store(true, Ordering::SeqCst);
        #[cfg(test)]
        let wake = !self.late_wake.load(Ordering::SeqCst);
        #[cfg(not(test))]
        let wake = true;
        if wake {
            let slot = lock(&self.waker);
            if let Some(wake) = slot.as_ref()
                && let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| wake.call()))
            {
                drop_quietly(payload);
            }
        }
        self.unpark_worker();
    }

    pub(super) fn unpark_worker(&self) {
        if let Some(t) = self.worker.get() {
            t.unpark();
        }
    }

    pub(super) fn on_worker(&self) -> bool {
        self.worker
            .get()
            .is_some_and(|t| t.id() == thread::current().id())
    }
}

/// A clonable, `Send + Sync` view of a stream's cancel flag, for code that cannot see the
/// [`TaskCtx`] (e.g. a wait loop in the notify table).
#[derive(Clone)]
pub struct CancelToken(Arc<Control>);

/// Where a stream's tasks note what they block on ([`TaskCtx::set_blocked_on`]), for a value
/// that one of the stream's tasks holds and that clears the note when it is dropped unrun (a
/// parked wait, `crate::parked`), without a reference count: a [`CancelToken`] per park cost
/// the runner two locked instructions (its clone and drop) on a line it shares with nothing
/// else but still pays for (pipeline bench, `perf`, 2026-12-05).
#[derive(Clone, Copy)]
pub(crate) struct BlockedNote(std::ptr::NonNull<AtomicU64>);

// SAFETY: a pointer to an atomic, used only through `&AtomicU64` (which is `Send + Sync`).
unsafe impl Send for BlockedNote {}
// SAFETY: as above.
unsafe impl Sync for BlockedNote {}

impl BlockedNote {
    /// Clears the note (the parked wait dropped unrun is no longer the stream's head).
    ///
    /// # Safety
    ///
    /// The stream's engine must still be alive: true for a value held by one of the stream's
    /// tasks, since a task is dropped while its stream's engine holds it (its queue, its turn,
    /// or a method of the stream that took it out), and the engine's own reference to the
    /// note (`Shared::control`, and the turn's context, dropped after the turn's tasks)
    /// outlives its tasks.
    pub(crate) unsafe fn clear(self) {
        // SAFETY: alive, see above.
        unsafe { self.0.as_ref() }.store(0, Ordering::Relaxed);
    }
}

impl CancelToken {
    /// True once the stream has been destroyed with [`StreamDestroy::Discard`](acl_notify_core::StreamDestroy::Discard) (or dropped).
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
    pub(super) control: Arc<Control>,
    /// Whether a waker is registered (saves the engine a lock per task when none is).
    pub(super) armed: Cell<bool>,
    /// See [`TaskCtx::spin_hint`].
    pub(super) spin_hint: Cell<u64>,
    /// See [`TaskCtx::coarse_now_ns`] (0: not read since it was last forgotten).
    pub(super) stamp: Cell<u64>,
    /// See [`TaskCtx::task_number`].
    pub(super) seq: Cell<u64>,
    /// See [`TaskCtx::graph_slot`].
    pub(super) graph: std::cell::OnceCell<Option<Arc<crate::waitgraph::StreamSlot>>>,
}

impl TaskCtx {
    /// The device the stream belongs to ([`StreamConfig::device`](super::StreamConfig::device)).
    pub(crate) fn device(&self) -> u32 {
        self.control.device
    }

    /// The stream's [`Stream::key`](super::Stream::key).
    pub(crate) fn stream_key(&self) -> usize {
        Arc::as_ptr(&self.control) as usize
    }

    /// The kernel thread id of the stream's own thread (the running thread may be the
    /// process's runner, see `super::runner`).
    pub(crate) fn home_tid(&self) -> i32 {
        self.control.home_tid.load(Ordering::Relaxed)
    }

    /// The stream's entry in the wait-for graph (`crate::waitgraph`), for a parked wait to
    /// publish in: `look_up` finds it the first time (by the stream's own thread id, under
    /// a process-wide lock), later parks reuse it (a lock and a scan per park cost the runner
    /// a tenth of its time in the pipeline bench, 2026-12-05). `None` if the namespace has no
    /// graph or the entry was gone at the first park.
    ///
    /// Held (a strong reference) from the first park until the stream's worker exits
    /// ([`release_graph`](Self::release_graph)), as the worker thread's own wait-for graph
    /// entry is held until it exits: an upgrade of a weak reference per park, and the drop,
    /// cost the runner two locked instructions a park (pipeline bench, 2026-12-05). So the
    /// entry outlives every parked wait of the stream.
    pub(crate) fn graph_slot(
        &self,
        look_up: impl FnOnce(i32) -> std::sync::Weak<crate::waitgraph::StreamSlot>,
    ) -> Option<&crate::waitgraph::StreamSlot> {
        self.graph
            .get_or_init(|| look_up(self.home_tid()).upgrade())
            .as_deref()
    }

    /// Lets the stream's wait-for graph entry go ([`graph_slot`](Self::graph_slot)): its
    /// worker exits, and no task of the stream is left.
    pub(super) fn release_graph(&mut self) {
        self.graph.take();
    }

    /// Tests: whether the stream's waits that would block must park
    /// ([`super::Stream::force_parking`]).
    #[cfg(test)]
    pub(crate) fn forced(&self) -> bool {
        self.control.forced.load(Ordering::Relaxed)
    }

    /// Tests: whether the stream's waits must block on its thread
    /// ([`super::Stream::never_park`]).
    #[cfg(test)]
    pub(crate) fn never_parks(&self) -> bool {
        self.control.never_park.load(Ordering::Relaxed)
    }

    /// Tests: a notify wait starts; it holds here if the test asked
    /// ([`super::Stream::hold_next_wait`]) until the test lets it go.
    #[cfg(test)]
    pub(crate) fn wait_starts(&self) {
        let h = &self.control.hold;
        if h.compare_exchange(HOLD_ARMED, HOLD_HELD, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            while h.load(Ordering::SeqCst) == HOLD_HELD {
                thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Tests: counts a park of the stream's wait ([`super::Stream::parks`]).
    #[cfg(test)]
    pub(crate) fn count_park(&self) {
        self.control.parks.fetch_add(1, Ordering::Relaxed);
    }

    /// True once the stream is cancelled (a discarding destroy or drop; never goes back), or
    /// while an abort ([`Stream::abort`](super::Stream::abort)) stops the running task.
    pub fn is_cancelled(&self) -> bool {
        self.control.stopping()
    }

    /// Where the stream's `blocked_on` note is, for a task's value that clears it when it is
    /// dropped ([`BlockedNote`]).
    pub(crate) fn blocked_note(&self) -> BlockedNote {
        BlockedNote(std::ptr::NonNull::from(&self.control.blocked_on))
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
    /// blocking. Read back by [`Stream::blocked_on`](super::Stream::blocked_on), to explain a queue that stays full.
    #[inline]
    pub fn set_blocked_on(&self, note: u64) {
        self.control.blocked_on.store(note, Ordering::Relaxed);
    }

    /// The running task is moving the worker to another CPU (a simulator copy does, see
    /// `placement::beside_enqueuer`): a `synchronize` of the stream waits through the
    /// migration spinning instead of going to sleep (see `sync_spin::SYNC_MIN_WINDOW`).
    pub(crate) fn note_moved(&self) {
        self.control
            .moved_at
            .store(crate::sys::now_ns(), Ordering::Relaxed);
    }

    /// Notes the CPU the worker runs a host function on (`u32::MAX`: none to note), for the
    /// host thread ([`Stream::host_fn_cpu`](super::Stream::host_fn_cpu)).
    pub(crate) fn note_host_fn_cpu(&self, cpu: u32) {
        if self.control.host_fn_cpu.load(Ordering::Relaxed) != cpu {
            self.control.host_fn_cpu.store(cpu, Ordering::Relaxed);
        }
    }

    /// The running task's number in the stream's enqueue order (from 0): the tickets
    /// [`Stream::issued`](super::Stream::issued) counts. The simulator's wait-for graph compares it with its queued
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
    pub(super) fn forget_time(&self) {
        self.stamp.set(0);
    }

    #[inline]
    pub(super) fn disarm(&self) {
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

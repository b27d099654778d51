//! Failure scopes: what the streams of one CANN context share once one of them stops on
//! failure. In CANN (hicann/runtime `src/runtime/core/src/stream/stream.cc`:
//! `Stream::SetFailMode`, `Stream::EnterFailureAbort`; `src/runtime/core/src/context/context.cc`:
//! `Context::CheckStatus`, `Context::CheckTaskSend`, `Context::ResetResourceFieldsAfterTearDown`)
//! setting any stream of a context to `ACL_STOP_ON_FAILURE` puts the whole context in stop
//! mode; then the first task that fails on any stream of that context becomes the context's
//! failure, and every later synchronize, query, event synchronize and task submission of the
//! context answers it, until the context is torn down (destroyed, or its device reset). A new
//! context starts without one.
//!
//! The simulator's streams do not know contexts: the owner (the C library) makes one scope per
//! context and binds the context's streams to it (`Sim::set_failure_scope`,
//! `Sim::set_default_failure_scope` for a device's default stream). A stream's worker tells
//! its scope of each failed task from the stream's failure hook (`task_failure`), before the
//! task retires, so a synchronize that returns after the failed task finds the scope failed.
//! Nothing on a task's success path. A stream bound to no scope (the Rust API's) behaves as
//! before: its own failure mode only.
//!
//! As CANN's, a synchronize of any stream of a scope (a healthy one included) ends as soon as
//! the scope fails, answering the scope's failure: CANN's waits poll the context's status
//! (`Stream::CheckContextStatus`, in `Stream::SynchronizeExecutedTask`, `Stream::WaitForTask`
//! and `StarsEngine`'s task wait, whose `Stream::GetSynchronizeError` then answers the
//! context's failure). Here the synchronize's sleep is armed in the scope
//! ([`FailureScope::interrupt`]), which wakes it when the failure is set. And as CANN's
//! `EnterFailureAbort`, every stream of the scope whose task fails in stop mode is aborted
//! ([`FailureScope::aborted`]), not only the first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use acl_notify_core::RawStream;

use crate::error::SimError;
use crate::stream::{SyncInterrupt, SyncWake};

/// The first task failure of a scope in stop mode ([`FailureScope::failure`]).
#[derive(Clone, Debug)]
pub struct ScopeFailure {
    /// The stream whose task failed (its backend handle).
    pub stream: RawStream,
    /// What it failed with: what the scope's checks answer from now on.
    pub error: SimError,
}

/// One context's failure state: what the streams of a CANN context share once one of them
/// stops on failure (CANN's context mode and first failure; the owner binds the streams).
#[derive(Debug, Default)]
pub struct FailureScope {
    /// A stream of the scope was set to stop on failure (CANN's context mode).
    stop: AtomicBool,
    /// The first failure after `stop` was set; kept for the scope's life.
    first: OnceLock<ScopeFailure>,
    /// The streams whose task failed after `stop` was set (CANN's abort mode), first first.
    aborted: Mutex<Vec<RawStream>>,
    /// The synchronizes of the scope's streams asleep now, woken when `first` is set.
    sleepers: Sleepers,
}

/// The wake-ups of a scope's synchronizes asleep.
#[derive(Default)]
struct Sleepers(Mutex<Vec<SyncWake>>);

impl std::fmt::Debug for Sleepers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sleepers({})", lock(&self.0).len())
    }
}

impl FailureScope {
    /// A scope in continue mode, without a failure.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// A stream of the scope now stops on failure: so does the scope, for good.
    pub fn stop_on_failure(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Whether the scope is in stop mode.
    pub fn stops(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The scope's failure, once a task of one of its streams failed in stop mode.
    pub fn failure(&self) -> Option<&ScopeFailure> {
        self.first.get()
    }

    /// Whether a task of `stream` failed while the scope was in stop mode: the stream is in
    /// CANN's abort mode (`Stream::EnterFailureAbort` sets it on each stream whose task fails
    /// in a context in stop mode, the first and every later one).
    pub fn aborted(&self, stream: RawStream) -> bool {
        self.failure().is_some() && lock(&self.aborted).contains(&stream)
    }

    /// A task of `stream` failed with `error`: the scope's failure if it is in stop mode and
    /// has none yet, and the stream aborted. (A failure before the mode was set stays its
    /// stream's alone, as in CANN, whose `EnterFailureAbort` looks at the context's mode
    /// when the task fails.) The scope's synchronizes asleep are woken at its first failure.
    pub(crate) fn task_failed(&self, stream: RawStream, error: &SimError) {
        if !self.stops() {
            return;
        }
        {
            let mut aborted = lock(&self.aborted);
            if !aborted.contains(&stream) {
                aborted.push(stream);
            }
        }
        let first = self
            .first
            .set(ScopeFailure {
                stream,
                error: error.clone(),
            })
            .is_ok();
        if first {
            // Set before the sleepers are looked at: one armed after this finds it set.
            for wake in lock(&self.sleepers.0).iter() {
                wake();
            }
        }
    }

    /// What ends a synchronize of a stream bound to this scope: the scope's failure.
    pub(crate) fn interrupt(&self) -> ScopeInterrupt<'_> {
        ScopeInterrupt(self)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A scope's failure as a synchronize's interrupt ([`FailureScope::interrupt`]).
pub(crate) struct ScopeInterrupt<'a>(&'a FailureScope);

impl<'a> ScopeInterrupt<'a> {
    /// Armed with `wake` until the guard is dropped (for a wait outside a stream's
    /// synchronize, which checks `raised` under the lock `wake` takes before it sleeps).
    pub(crate) fn armed(self, wake: SyncWake) -> ArmedScope<'a> {
        self.arm(&wake);
        ArmedScope(self, wake)
    }
}

/// [`ScopeInterrupt::armed`]'s guard.
pub(crate) struct ArmedScope<'a>(ScopeInterrupt<'a>, SyncWake);

impl Drop for ArmedScope<'_> {
    fn drop(&mut self) {
        self.0.disarm(&self.1);
    }
}

impl SyncInterrupt for ScopeInterrupt<'_> {
    fn raised(&self) -> bool {
        self.0.failure().is_some()
    }

    fn arm(&self, wake: &SyncWake) {
        lock(&self.0.sleepers.0).push(Arc::clone(wake));
    }

    fn disarm(&self, wake: &SyncWake) {
        lock(&self.0.sleepers.0).retain(|w| !Arc::ptr_eq(w, wake));
    }
}

/// Which scope a stream is bound to, if any: shared by the stream's entry and its failure
/// hook (a device's default streams, one after another, share the device's).
#[derive(Debug, Default)]
pub(crate) struct ScopeSlot(Mutex<Option<Arc<FailureScope>>>, AtomicBool);

impl ScopeSlot {
    pub(crate) fn set(&self, scope: Option<Arc<FailureScope>>) {
        let mut g = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        self.1.store(scope.is_some(), Ordering::SeqCst);
        *g = scope;
    }

    /// The bound scope, if any (no lock taken for a stream never bound: the Rust API's).
    pub(crate) fn get(&self) -> Option<Arc<FailureScope>> {
        if !self.1.load(Ordering::SeqCst) {
            return None;
        }
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Tells the bound scope, if any, that a task of `stream` failed with `error`.
    #[cold]
    pub(crate) fn task_failed(&self, stream: RawStream, error: &SimError) {
        let scope = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(s) = scope {
            s.task_failed(stream, error);
        }
    }
}

/// The scope a stream is bound to as a synchronize's interrupt, looked up only once the
/// synchronize has to wait (a stream that is done costs no lock here).
pub(crate) struct SlotInterrupt {
    slot: Arc<ScopeSlot>,
    scope: OnceLock<Option<Arc<FailureScope>>>,
}

impl SlotInterrupt {
    pub(crate) fn new(slot: Arc<ScopeSlot>) -> Self {
        SlotInterrupt {
            slot,
            scope: OnceLock::new(),
        }
    }

    /// The bound scope, if any (as first looked up).
    pub(crate) fn scope(&self) -> Option<&Arc<FailureScope>> {
        self.scope.get_or_init(|| self.slot.get()).as_ref()
    }
}

impl SyncInterrupt for SlotInterrupt {
    fn raised(&self) -> bool {
        self.scope().is_some_and(|s| s.failure().is_some())
    }

    fn arm(&self, wake: &SyncWake) {
        if let Some(s) = self.scope() {
            s.interrupt().arm(wake);
        }
    }

    fn disarm(&self, wake: &SyncWake) {
        if let Some(s) = self.scope() {
            s.interrupt().disarm(wake);
        }
    }
}

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

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use acl_notify_core::RawStream;

use crate::error::SimError;

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

    /// A task of `stream` failed with `error`: the scope's failure if it is in stop mode and
    /// has none yet. (A failure before the mode was set stays its stream's alone, as in CANN,
    /// whose `EnterFailureAbort` looks at the context's mode when the task fails.)
    pub(crate) fn task_failed(&self, stream: RawStream, error: &SimError) {
        if self.stops() {
            let _ = self.first.set(ScopeFailure {
                stream,
                error: error.clone(),
            });
        }
    }
}

/// Which scope a stream is bound to, if any: shared by the stream's entry and its failure
/// hook (a device's default streams, one after another, share the device's).
#[derive(Debug, Default)]
pub(crate) struct ScopeSlot(Mutex<Option<Arc<FailureScope>>>);

impl ScopeSlot {
    pub(crate) fn set(&self, scope: Option<Arc<FailureScope>>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = scope;
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

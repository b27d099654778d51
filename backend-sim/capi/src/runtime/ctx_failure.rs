//! A context's failure in stop-on-failure mode, as CANN keeps it (hicann/runtime
//! `src/runtime/core/src/stream/stream.cc`: `Stream::SetFailMode` puts the stream's context in
//! stop mode, `Stream::EnterFailureAbort` gives the context the first failure of any of its
//! streams then; `src/runtime/core/src/context/context.cc`: `Context::CheckStatus` answers that
//! failure to every stream synchronize and query, device synchronize, event synchronize and
//! query (`src/runtime/api/impl/api_impl.cc`, `api_impl_event_common.cc`), and
//! `Context::CheckTaskSend` to every task submitted on a stream of the context; only the
//! context's teardown, `Context::ResetResourceFieldsAfterTearDown`, clears it).
//!
//! So once a task fails in a context with a stream in stop mode, the context is done: each of
//! those calls answers the failure's code, for as long as the context lives; a synchronize no
//! longer "reports and clears" it. `aclrtDestroyContext` or `aclrtResetDevice` ends it, and a
//! new context (`aclrtCreateContext`, or the primary context `aclrtSetDevice` makes after a
//! reset) starts without one. Creating streams, reading their attributes, destroying them and
//! the memory calls are not checked, as in CANN.
//!
//! Each context has a [`FailureScope`] its streams are bound to (the simulator's streams tell
//! it of their failures); the checks here read it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use acl_notify_core::{BackendError as _, RawStream};
use acl_notify_sim::FailureScope;

use super::Runtime;
use crate::errmsg::CallError;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The contexts' failure scopes, by context handle.
#[derive(Default)]
pub(crate) struct Scopes {
    by_ctx: Mutex<HashMap<usize, Arc<FailureScope>>>,
    /// Scopes put in stop mode so far (never counted down): while 0, no context can have
    /// failed, and a check costs one load.
    stopping: AtomicUsize,
}

impl Scopes {
    fn get(&self, ctx: usize) -> Option<Arc<FailureScope>> {
        lock(&self.by_ctx).get(&ctx).cloned()
    }

    /// The failure scope of a new context `ctx`.
    pub(super) fn make(&self, ctx: usize) -> Arc<FailureScope> {
        let scope = FailureScope::new();
        lock(&self.by_ctx).insert(ctx, Arc::clone(&scope));
        scope
    }

    /// Context `ctx` went (destroyed, or its device reset): its failure with it.
    pub(super) fn forget(&self, ctx: usize) {
        lock(&self.by_ctx).remove(&ctx);
    }

    /// Keeps the scopes of the contexts `keep` accepts.
    pub(super) fn retain(&self, keep: impl Fn(usize) -> bool) {
        lock(&self.by_ctx).retain(|ctx, _| keep(*ctx));
    }
}

impl Runtime {
    /// Binds a stream of context `ctx` to the context's failure scope (for a stream created
    /// in it). A context without a scope (gone meanwhile) binds nothing.
    pub(super) fn bind_to_context(&self, raw: RawStream, ctx: usize) {
        if let Some(scope) = self.contexts.scopes.get(ctx) {
            let _ = self.backend().set_failure_scope(raw, Some(scope));
        }
    }

    /// Refuses to set the failure mode of context `ctx`'s stream `raw` once a task of it
    /// failed in stop mode, if the stream was set to stop on failure: CANN put it in abort
    /// mode then (`Stream::EnterFailureAbort`, for each stream whose task fails while its
    /// context stops on failure, not only the first), from which `ApiImpl::StreamSetMode`
    /// sets no mode any more ("from abort mode to stop mode is not supported", 207000) unless
    /// the mode the stream was given is still continue on failure (then it takes either
    /// mode, its abort mode unchanged).
    pub(super) fn refuse_aborted(&self, ctx: usize, raw: RawStream) -> Result<(), CallError> {
        if self.contexts.scopes.stopping.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        let Some(scope) = self.contexts.scopes.get(ctx) else {
            return Ok(());
        };
        let set_to_stop = || {
            self.backend()
                .failure_mode(raw)
                .is_ok_and(|m| m == acl_notify_core::FailureMode::StopOnFailure)
        };
        match scope.failure() {
            Some(f) if scope.aborted(raw) && set_to_stop() => Err(CallError::new(
                acl_notify_core::Error::FeatureNotSupport,
                format!(
                    "a task of the stream failed while its context stops on failure (the \
                     context's first failure: {}): the stream is in CANN's abort mode, whose \
                     failure mode is not set any more",
                    f.error.kind()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Context `ctx`'s failure scope, if it is alive.
    pub(super) fn context_scope(&self, ctx: usize) -> Option<Arc<FailureScope>> {
        self.contexts.scopes.get(ctx)
    }

    /// A stream of context `ctx` was set to stop on failure: so is the context, for good.
    pub(super) fn context_stops(&self, ctx: usize) {
        if let Some(scope) = self.contexts.scopes.get(ctx)
            && !scope.stops()
        {
            scope.stop_on_failure();
            self.contexts.scopes.stopping.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// CANN's `Context::CheckStatus` of context `ctx`: its failure, once a task of one of its
    /// streams failed while it stops on failure.
    pub(crate) fn context_failure(&self, ctx: usize) -> Result<(), CallError> {
        if self.contexts.scopes.stopping.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        self.context_failure_slow(ctx)
    }

    #[cold]
    fn context_failure_slow(&self, ctx: usize) -> Result<(), CallError> {
        let Some(scope) = self.contexts.scopes.get(ctx) else {
            return Ok(());
        };
        let Some(f) = scope.failure() else {
            return Ok(());
        };
        let which = self
            .streams
            .handles_where(|s| s.raw == f.stream)
            .first()
            .map_or_else(
                || "its default stream".to_owned(),
                |h| format!("stream {h:#x}"),
            );
        // The task's own reason first: what failed matters most (and a caller that prints a
        // bounded prefix keeps it).
        let why = match f.error.message() {
            "" => f.error.kind().to_string(),
            m => m.to_owned(),
        };
        Err(CallError::new(
            f.error.kind(),
            format!(
                "{why} [context {ctx:#x} has failed: that task of {which} failed while the \
                 context stops on failure (aclrtSetStreamFailureMode(..., ACL_STOP_ON_FAILURE) \
                 on one of its streams). As in CANN, the context stays failed: its \
                 synchronizes, queries and launches answer this until it is destroyed \
                 (aclrtDestroyContext) or its device reset (aclrtResetDevice); a new context \
                 starts afresh]"
            ),
        ))
    }

    /// The calling thread's current context's failure ([`context_failure`](Self::context_failure)).
    /// A current context gone meanwhile (destroyed by another thread, or its device reset)
    /// has no failure to report: the call goes on and answers as it would have (107017 for
    /// its stream), and nothing else is looked up while no context stops on failure.
    pub(crate) fn current_context_failure(&self) -> Result<(), CallError> {
        if self.contexts.scopes.stopping.load(Ordering::SeqCst) == 0 {
            return Ok(());
        }
        match self.current() {
            Ok((_, ctx)) => self.context_failure_slow(ctx),
            Err(_) => Ok(()),
        }
    }

    /// [`resolve_stream`](Self::resolve_stream) for a call that submits a task to the stream:
    /// refused with the context's failure once it has one (CANN's `Context::CheckTaskSend`).
    /// A stream that resolves is of the current context.
    pub(crate) fn resolve_launch(&self, stream: usize) -> Result<RawStream, CallError> {
        let raw = self.resolve_stream(stream)?;
        self.current_context_failure()?;
        Ok(raw)
    }
}

//! The process-wide `aclInit` … `aclFinalize` state, and the one place the simulator is plugged
//! in as the backend ([`Dev`], [`open_backend`]).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use acl_notify_core::Error;

use crate::errmsg::CallError;
use crate::runtime::Runtime;

/// The backend this library runs on.
pub(crate) type Dev = acl_notify_sim::Sim;

/// Opens the backend at `aclInit`: the machine the `ACL_NOTIFY_SIM_*` variables describe.
fn open_backend() -> Result<Dev, CallError> {
    acl_notify_sim::Sim::from_env().map_err(CallError::backend)
}

enum State {
    /// Before the first `aclInit`.
    Uninit,
    Ready(Arc<Runtime<Dev>>),
    /// After `aclFinalize` (a new `aclInit` is allowed).
    Finalized,
}

static STATE: RwLock<State> = RwLock::new(State::Uninit);
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// `ACL_ERROR_UNINITIALIZE` (100001) for a state without a session of this process.
fn no_session(state: &State) -> CallError {
    match state {
        State::Finalized => CallError::new(
            Error::Uninitialize,
            "aclFinalize has been called (call aclInit again to start a new session)",
        ),
        State::Ready(rt) if rt.inherited() => CallError::new(
            Error::Uninitialize,
            format!(
                "aclInit was called by process {} before it forked this one: the session's \
                 streams and worker threads are not in this process; call aclInit here",
                rt.pid()
            ),
        ),
        State::Uninit | State::Ready(_) => {
            CallError::new(Error::Uninitialize, "aclInit has not been called")
        }
    }
}

/// Takes the parent's session out of the state of a forked child without running any of its
/// teardown (which would join worker threads that do not exist here and release what is the
/// parent's): its memory is left as it is. Whether there was one.
fn forget_inherited(state: &mut State) -> bool {
    if matches!(state, State::Ready(rt) if rt.inherited())
        && let State::Ready(rt) = std::mem::replace(state, State::Uninit)
    {
        std::mem::forget(rt);
        return true;
    }
    false
}

/// The current session, or `ACL_ERROR_UNINITIALIZE` (100001). The session stays alive while
/// the `Arc` is held, even across an `aclFinalize` on another thread: for calls that may
/// block (stream queues, waits, drains), which must not hold up `aclFinalize`.
pub(crate) fn runtime() -> Result<Arc<Runtime<Dev>>, CallError> {
    match &*STATE.read().unwrap_or_else(PoisonError::into_inner) {
        State::Ready(rt) if !rt.inherited() => Ok(Arc::clone(rt)),
        other => Err(no_session(other)),
    }
}

/// Runs `f` on the current session (or fails with 100001), holding the session's read lock
/// for the call instead of cloning the `Arc`: no reference-count traffic. Only for calls that
/// never block and never call back into the C API (the notify control plane): an
/// `aclFinalize` on another thread waits for `f` to return.
#[inline]
pub(crate) fn with_runtime<R>(
    f: impl FnOnce(&Runtime<Dev>) -> Result<R, CallError>,
) -> Result<R, CallError> {
    match &*STATE.read().unwrap_or_else(PoisonError::into_inner) {
        State::Ready(rt) if !rt.inherited() => f(rt),
        other => Err(no_session(other)),
    }
}

/// The current session if there is one.
pub(crate) fn try_runtime() -> Option<Arc<Runtime<Dev>>> {
    runtime().ok()
}

/// A random per-session seed for the handle salts.
fn seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// `aclInit`.
pub(crate) fn init() -> Result<(), CallError> {
    let mut state = STATE.write().unwrap_or_else(PoisonError::into_inner);
    forget_inherited(&mut state);
    if let State::Ready(_) = *state {
        return Err(CallError::new(
            Error::RepeatInitialize,
            "aclInit was already called in this process",
        ));
    }
    let backend = open_backend()?;
    let epoch = EPOCH.fetch_add(1, Ordering::Relaxed);
    *state = State::Ready(Arc::new(Runtime::new(backend, epoch, seed())));
    Ok(())
}

/// `aclFinalize`: releases every stream and notify handle of the process.
pub(crate) fn finalize() -> Result<(), CallError> {
    let old = {
        let mut state = STATE.write().unwrap_or_else(PoisonError::into_inner);
        if forget_inherited(&mut state) {
            // A forked child finalizing its parent's session: nothing here is the child's.
            *state = State::Finalized;
            return Ok(());
        }
        match std::mem::replace(&mut *state, State::Finalized) {
            State::Ready(rt) => Some(rt),
            // CANN lets a process finalize without having initialised, once.
            State::Uninit => None,
            State::Finalized => {
                return Err(CallError::new(
                    Error::RepeatFinalize,
                    "aclFinalize was already called",
                ));
            }
        }
    };
    if let Some(rt) = old {
        rt.release(|_| true);
    }
    Ok(())
}

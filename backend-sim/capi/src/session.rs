//! The process-wide `aclInit` … `aclFinalize` state, and the one place the simulator is plugged
//! in as the backend ([`Dev`], [`open_backend`]).

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
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
    /// In a child forked from a process that had a session (set by [`in_forked_child`]): `pid`
    /// called `aclInit`. The session itself stays in the parent's lock, untouched.
    Inherited {
        pid: i32,
    },
    /// After `aclFinalize` (a new `aclInit` is allowed).
    Finalized,
}

// ---- the session lock, and fork --------------------------------------------------------------
//
// `fork()` copies the calling thread only. A thread of the parent that was inside a call at
// that moment held the session lock (for reading, or for writing in `aclInit`/`aclFinalize`),
// and in the child it never lets go: an `aclInit` there would wait for ever. So a child never
// uses its parent's lock. The `pthread_atfork` child handler, which runs in the child before
// `fork()` returns there, gives the child a fresh lock holding a state of its own
// (`Inherited`, `Uninit` or `Finalized`, never `Ready`), and leaves the parent's lock, and the
// session in it, untouched and never freed (running the session's teardown would join worker
// threads the child does not have and release what is the parent's). The simulator does the
// same with its own process-wide locks (`acl_notify_sim`'s `fork` module).
//
// No `prepare` handler takes the lock before the fork: the parent never waits at a fork (not
// for calls in flight, nor for an `aclInit` opening the machine), and a fork from inside the
// library (a host function on a stream's worker, a signal handler) cannot deadlock on it.
//
// A `Ready` state exists only in a process where the handler is registered (`aclInit`
// registers it first, and fails if it cannot), so a session's calls need no "is this my
// parent's session?" check.

/// The lock of a process that is not a forked child.
static FIRST: RwLock<State> = RwLock::new(State::Uninit);

/// This process's session lock: [`FIRST`], or in a forked child the one its fork handler made.
static STATE: AtomicPtr<RwLock<State>> = AtomicPtr::new(&raw const FIRST as *mut RwLock<State>);

/// What a forked child needs of its parent's state, readable without the lock (another thread
/// may hold it at the fork): the pid that called `aclInit` for a session, 0 before any,
/// [`FINALIZED`] after `aclFinalize`. Written with the state, under the write lock.
static SUMMARY: AtomicI32 = AtomicI32::new(0);
const FINALIZED: i32 = -1;

/// Session numbers (a thread's current device belongs to one session).
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// Whether [`in_forked_child`] is registered with `pthread_atfork`.
static HOOKED: AtomicBool = AtomicBool::new(false);

/// This process's session lock.
#[inline]
fn state() -> &'static RwLock<State> {
    // SAFETY: `STATE` points to `FIRST` or to a lock leaked by `in_forked_child`; neither is
    // ever freed.
    unsafe { &*STATE.load(Ordering::Acquire) }
}

/// Registers [`in_forked_child`] once per process (not with a `Once`: a child forked while
/// another thread ran it would wait for ever; called under the write lock, so not raced).
fn register_fork_handler() -> Result<(), CallError> {
    if HOOKED.load(Ordering::Acquire) {
        return Ok(());
    }
    // SAFETY: registers a child handler that allocates and stores to atomics, which glibc
    // allows in a child handler (its allocator is usable again before the handlers run).
    if unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) } != 0 {
        return Err(CallError::new(
            Error::MemoryAllocation,
            "pthread_atfork failed (out of memory): without its fork handler a child forked \
             from this process could hang in the library",
        ));
    }
    HOOKED.store(true, Ordering::Release);
    Ok(())
}

/// The fork handler: runs in the child, in the forking thread, before `fork()` returns there
/// (no other thread exists yet). Gives the child a fresh lock and a state of its own (see
/// above). Idempotent, in case it was registered twice.
extern "C" fn in_forked_child() {
    HOOKED.store(true, Ordering::Release);
    let state = match SUMMARY.load(Ordering::Relaxed) {
        0 => State::Uninit,
        FINALIZED => State::Finalized,
        pid => State::Inherited { pid },
    };
    let fresh: &'static RwLock<State> = Box::leak(Box::new(RwLock::new(state)));
    STATE.store(std::ptr::from_ref(fresh).cast_mut(), Ordering::Release);
}

/// `ACL_ERROR_UNINITIALIZE` (100001) for a state without a session of this process.
fn no_session(state: &State) -> CallError {
    match state {
        State::Finalized => CallError::new(
            Error::Uninitialize,
            "aclFinalize has been called (call aclInit again to start a new session)",
        ),
        State::Inherited { pid } => CallError::new(
            Error::Uninitialize,
            format!(
                "aclInit was called by process {pid} before it forked this one: the session's \
                 streams and worker threads are not in this process; call aclInit here"
            ),
        ),
        State::Uninit | State::Ready(_) => {
            CallError::new(Error::Uninitialize, "aclInit has not been called")
        }
    }
}

/// The current session, or `ACL_ERROR_UNINITIALIZE` (100001). The session stays alive while
/// the `Arc` is held, even across an `aclFinalize` on another thread: for calls that may
/// block (stream queues, waits, drains), which must not hold up `aclFinalize`.
pub(crate) fn runtime() -> Result<Arc<Runtime<Dev>>, CallError> {
    match &*state().read().unwrap_or_else(PoisonError::into_inner) {
        State::Ready(rt) => Ok(Arc::clone(rt)),
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
    match &*state().read().unwrap_or_else(PoisonError::into_inner) {
        State::Ready(rt) => f(rt),
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

/// `aclInit`. In a forked child, starts the child's own session (the parent's is not the
/// child's: see [`State::Inherited`]).
pub(crate) fn init() -> Result<(), CallError> {
    let mut state = state().write().unwrap_or_else(PoisonError::into_inner);
    if let State::Ready(_) = *state {
        return Err(CallError::new(
            Error::RepeatInitialize,
            "aclInit was already called in this process",
        ));
    }
    register_fork_handler()?;
    let backend = open_backend()?;
    let epoch = EPOCH.fetch_add(1, Ordering::Relaxed);
    let rt = Runtime::new(backend, epoch, seed());
    SUMMARY.store(rt.pid(), Ordering::Relaxed);
    *state = State::Ready(Arc::new(rt));
    Ok(())
}

/// `aclFinalize`: releases every stream and notify handle of the process. In a forked child
/// that has not called `aclInit`, releases nothing (nothing is the child's) and returns 0.
pub(crate) fn finalize() -> Result<(), CallError> {
    let old = {
        let mut state = state().write().unwrap_or_else(PoisonError::into_inner);
        let old = match std::mem::replace(&mut *state, State::Finalized) {
            State::Ready(rt) => Some(rt),
            // CANN lets a process finalize without having initialised, once; a forked child
            // finalizing its parent's session has nothing of its own to release.
            State::Uninit | State::Inherited { .. } => None,
            State::Finalized => {
                return Err(CallError::new(
                    Error::RepeatFinalize,
                    "aclFinalize was already called",
                ));
            }
        };
        SUMMARY.store(FINALIZED, Ordering::Relaxed);
        old
    };
    if let Some(rt) = old {
        rt.release(|_| true);
    }
    Ok(())
}

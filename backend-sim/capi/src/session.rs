//! The process-wide session (`aclInit` … `aclFinalize`, or started by the first runtime call),
//! and the one place the simulator is opened ([`open_backend`]).
//!
//! As in CANN, whose runtime entry points forward to the runtime without an initialisation
//! check (hicann/runtime `src/acl/aclrt_impl/acl_rt_wrapper.h`; only a few model-dump
//! functions check, `toolchain/dump.cpp`, and those are stubs here), a runtime call made
//! before `aclInit` works: the process's session starts with it ([`runtime`],
//! [`with_runtime`]). `aclInit` afterwards succeeds as usual; after `aclFinalize`, and in a
//! child forked from a process with a session, the next runtime call starts a new session of
//! the process's own.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use acl_notify_core::Error;

use crate::config::AclConfig;
use crate::errmsg::CallError;
use crate::inflight::{self, Published};
use crate::runtime::Runtime;

/// Opens the backend at `aclInit`: the machine the `ACL_NOTIFY_SIM_*` variables describe.
fn open_backend() -> Result<acl_notify_sim::Sim, CallError> {
    acl_notify_sim::Sim::from_env().map_err(CallError::backend)
}

enum State {
    /// Before the first `aclInit` or runtime call.
    Uninit,
    Ready(Arc<Runtime>, Start),
    /// In a child forked from a process that had a session (from the parent's summary, which
    /// [`in_forked_child`] keeps). The session itself stays in the parent's lock, untouched.
    Inherited,
    /// After `aclFinalize` (a new `aclInit`, or runtime call, starts a new session).
    Finalized,
}

/// How a session started: it decides what a later `aclInit` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    /// By `aclInit`: another `aclInit` is `ACL_ERROR_REPEAT_INITIALIZE`, and counts one more
    /// reference, which `aclFinalizeReference` gives back (hicann/runtime
    /// `src/acl/aclrt_impl/acl.cpp`, `aclInitRefCount`).
    AclInit { refs: u64 },
    /// By a runtime call before `aclInit`: `aclInit` then succeeds (and changes nothing else).
    Implicit,
}

// ---- the session lock, and fork --------------------------------------------------------------
//
// `fork()` copies the calling thread only. A thread of the parent that was inside a call at
// that moment held the session lock (for reading, or for writing in `aclInit`/`aclFinalize`),
// and in the child it never lets go: an `aclInit` there would wait for ever. So a child never
// uses its parent's lock. The fork hook [`in_forked_child`], which the simulator's one
// `pthread_atfork` child handler runs in the child before `fork()` returns there
// (`acl_notify_sim::fork_also_in_child`), makes the child forget it: the child gets a lock of
// its own, holding a state of its own (`Inherited`, `Uninit` or `Finalized`, never `Ready`),
// and the parent's lock, and the session in it, stay untouched and never freed (running the
// session's teardown would join worker threads the child does not have and release what is
// the parent's; the child's own lock keeps a pointer to it, so that a leak checker does not
// count it lost). The simulator does the same with its own process-wide locks
// (`acl_notify_sim`'s `fork` module).
//
// No `prepare` handler takes the lock before the fork: the parent never waits at a fork (not
// for calls in flight, nor for an `aclInit` opening the machine), and a fork from inside the
// library (a host function on a stream's worker) cannot deadlock on it.
//
// The hook must be in the handler before the lock can be held: a child forked without it keeps
// the parent's lock, held for ever by a thread it does not have (a call starting the session
// before `aclInit`, or that `aclInit` itself). So there is no lock until the first session start
// or `aclFinalize` makes one, after adding the hook ([`lock`]); until then the state is
// answered without one. The hook itself only stores to atomics: the child makes its own
// lock the same way, on first use. A forked child's first runtime call therefore never waits
// for its parent's threads: it makes the child's lock and starts the child's own session.
//
// A `Ready` state exists only in a process where the hook is in the handler (`aclInit` fails if
// it cannot be), so a session's calls need no "is this my parent's session?" check. (A hook,
// not a lazy check of the simulator's fork generation as its `PerProcess` locks make: the
// published session, [`TURN`] and the calls in flight would each need that check, the first
// on the fast path of every notify call.)

/// This process's session lock: null until the first session start or `aclFinalize` makes it
/// (the fork hook is added first), and again in a forked child until its first; else a
/// leaked `Box`, never freed (a child forgets its parent's, which stays in its memory unused).
static STATE: AtomicPtr<SessionLock> = AtomicPtr::new(std::ptr::null_mut());

/// A process's session lock, and the one it replaced.
struct SessionLock {
    state: RwLock<State>,
    /// The lock of the parent this process was forked from (or of an earlier ancestor, if the
    /// parent had none; null for none): never used nor freed, but kept reachable, so that a
    /// leak checker in a forked child (valgrind's memcheck) does not count the parent's
    /// session, which the child cannot free, as lost by the child.
    _parent: *mut SessionLock,
}

/// The lock [`in_forked_child`] made this process forget (the parent's), until this
/// process makes its own ([`lock`]), which keeps it.
static FORGOTTEN: AtomicPtr<SessionLock> = AtomicPtr::new(std::ptr::null_mut());

/// What a forked child needs of its parent's state, readable without the lock (another thread
/// may hold it at the fork): the pid that started a session, 0 before any, [`FINALIZED`] after
/// `aclFinalize`. Written with the state, under the write lock.
static SUMMARY: AtomicI32 = AtomicI32::new(0);
const FINALIZED: i32 = -1;

/// The state while [`STATE`] is null (no lock yet), as a [`SUMMARY`]: 0 in a process that
/// was not forked, the parent's `SUMMARY` at the fork in a child. Written only by the fork
/// hook, when the child has no other thread.
static AT_FORK: AtomicI32 = AtomicI32::new(0);

/// CANN's `aclFinalizeFlag` (hicann/runtime `src/acl/aclrt_impl/acl.cpp`): set by
/// `aclFinalize`, cleared only at the end of a successful `aclInit`. CANN's `aclFinalizeImpl`
/// answers 100037 while it is set, whatever ran since: runtime calls made after `aclFinalize`
/// work (its runtime needs no `aclInit`; ours starts a session for them) but do not undo it.
/// A forked child inherits it, as it inherits CANN's static.
static FINALIZED_SINCE_INIT: AtomicBool = AtomicBool::new(false);

/// Session numbers (a thread's current device belongs to one session).
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// The session's `Runtime` for calls without the lock (`with_runtime`): published while the
/// state is `Ready`, withdrawn by `aclFinalize` before it frees the session.
static SESSION: Published<Runtime> = Published::new();

/// The state a [`SUMMARY`] stands for (never `Ready`).
fn summarized(summary: i32) -> State {
    match summary {
        0 => State::Uninit,
        FINALIZED => State::Finalized,
        _ => State::Inherited,
    }
}

/// This process's session lock, or `None` before one is made (see [`STATE`]): the state is
/// then `summarized(AT_FORK)`, with no session.
#[inline]
fn current() -> Option<&'static RwLock<State>> {
    // SAFETY: a non-null `STATE` is a `Box` leaked by `lock`, never freed.
    unsafe { STATE.load(Ordering::Acquire).as_ref() }.map(|l| &l.state)
}

/// This process's session lock, made if there is none yet, after the fork hook is added (so
/// that every fork from now on runs it). Threads racing here each make one; the first to
/// publish it wins.
fn lock() -> Result<&'static RwLock<State>, CallError> {
    if let Some(l) = current() {
        return Ok(l);
    }
    add_fork_hook()?;
    let fresh = Box::into_raw(Box::new(SessionLock {
        state: RwLock::new(summarized(AT_FORK.load(Ordering::Relaxed))),
        _parent: FORGOTTEN.load(Ordering::Relaxed),
    }));
    match STATE.compare_exchange(
        std::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        // SAFETY: just published; never freed from now on.
        Ok(_) => Ok(unsafe { &(*fresh).state }),
        // SAFETY: `fresh` lost the race, so no one else has seen it: ours to free. `won` is
        // another thread's published lock, never freed.
        Err(won) => unsafe {
            drop(Box::from_raw(fresh));
            Ok(&(*won).state)
        },
    }
}

/// Has the simulator's fork child handler run [`in_forked_child`] (adding it again changes
/// nothing).
fn add_fork_hook() -> Result<(), CallError> {
    acl_notify_sim::fork_also_in_child(in_forked_child).map_err(|_| {
        CallError::new(
            Error::MemoryAllocation,
            "pthread_atfork failed (out of memory): without its fork handler a child forked \
             from this process could hang in the library",
        )
    })
}

/// The fork hook: runs in the child, in the forking thread, before `fork()` returns there
/// (no other thread exists yet), after the simulator's own part of the handler. Forgets the
/// parent's lock; the child's first `aclInit` or `aclFinalize` makes its own, holding the
/// state the parent's summary stands for (see above). Stores to atomics only (no allocation:
/// also a fork from a signal handler gets here).
fn in_forked_child() {
    SESSION.forget();
    TURN.store(0, Ordering::Relaxed);
    inflight::forget_in_child();
    AT_FORK.store(SUMMARY.load(Ordering::Relaxed), Ordering::Relaxed);
    let parents = STATE.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !parents.is_null() {
        FORGOTTEN.store(parents, Ordering::Relaxed);
    }
}

// ---- aclInit / aclFinalize take turns (`lifecycle`) ------------------------------------------

/// The thread inside `aclInit`, `aclFinalize` or `aclFinalizeReference` (0: none): one at a
/// time, as CANN's init mutex makes them. An atomic, not a lock, so that a child forked
/// meanwhile starts free ([`in_forked_child`] frees it).
static TURN: AtomicU64 = AtomicU64::new(0);

/// Holds [`TURN`] for the calling thread until dropped.
pub(crate) struct Turn;

impl Turn {
    /// Waits for the turn; 100000 if the calling thread has it already (`call` made from an
    /// init or finalize callback).
    pub(crate) fn take(call: &str) -> Result<Turn, CallError> {
        // SAFETY: no preconditions.
        let me = (unsafe { libc::pthread_self() } as u64).max(1);
        loop {
            match TURN.compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return Ok(Turn),
                Err(owner) if owner == me => {
                    return Err(CallError::new(
                        Error::InvalidParam,
                        format!(
                            "{call} was called from an init or finalize callback, which runs \
                             inside aclInit, aclFinalize or aclFinalizeReference"
                        ),
                    ));
                }
                // Another thread initialises or finalises: its turn ends when it returns.
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        TURN.store(0, Ordering::Release);
    }
}

/// The current session, started now if there is none (see the module's documentation). The
/// session stays alive while the `Arc` is held, even across an `aclFinalize` on another
/// thread: for calls that may block (stream queues, waits, drains), which must not hold up
/// `aclFinalize`.
pub(crate) fn runtime() -> Result<Arc<Runtime>, CallError> {
    match existing_runtime() {
        Some(rt) => Ok(rt),
        None => start_implicitly(),
    }
}

/// Runs `f` on the current session (started now if there is none), counted as a call in
/// flight ([`inflight`]) instead of holding the session's read lock or cloning the `Arc`: no
/// locked instruction (a thread without a slot, or a process where no session is published,
/// holds the read lock for the call). Only for calls that never block and never call back into
/// the C API (the notify control plane): an `aclFinalize` on another thread waits for `f` to
/// return either way.
#[inline]
pub(crate) fn with_runtime<R>(
    f: impl FnOnce(&Runtime) -> Result<R, CallError>,
) -> Result<R, CallError> {
    match SESSION.run(f) {
        Ok(r) => r,
        Err(f) => with_runtime_locked(f),
    }
}

/// [`with_runtime`] under the session's read lock.
#[inline(never)]
fn with_runtime_locked<R>(
    f: impl FnOnce(&Runtime) -> Result<R, CallError>,
) -> Result<R, CallError> {
    if let Some(lock) = current() {
        let state = lock.read().unwrap_or_else(PoisonError::into_inner);
        if let State::Ready(rt, _) = &*state {
            return f(rt);
        }
    }
    // No session yet (rare: once per session): start one, and run `f` on it.
    f(&*start_implicitly()?)
}

/// The current session if there is one; starts none.
pub(crate) fn existing_runtime() -> Option<Arc<Runtime>> {
    let lock = current()?;
    let state = lock.read().unwrap_or_else(PoisonError::into_inner);
    match &*state {
        State::Ready(rt, _) => Some(Arc::clone(rt)),
        _ => None,
    }
}

/// Starts the process's session for a runtime call made without one, as CANN's runtime does;
/// if another thread started one meanwhile, returns that one.
#[cold]
fn start_implicitly() -> Result<Arc<Runtime>, CallError> {
    let mut state = lock()?.write().unwrap_or_else(PoisonError::into_inner);
    if let State::Ready(rt, _) = &*state {
        return Ok(Arc::clone(rt));
    }
    let rt = Arc::new(open_session().map_err(|e| {
        e.explained(
            "while starting the process's session (aclInit was not called, or \
                     aclFinalize was): the first runtime call starts it, as with CANN",
        )
    })?);
    *state = State::Ready(Arc::clone(&rt), Start::Implicit);
    SESSION.publish(&rt);
    Ok(rt)
}

/// Opens the backend for a new session and records who started it for a forked child.
fn open_session() -> Result<Runtime, CallError> {
    let reset_timeout = crate::runtime::drain::reset_timeout_from_env()?;
    let backend = open_backend()?;
    let epoch = EPOCH.fetch_add(1, Ordering::Relaxed);
    let rt = Runtime::new(backend, epoch, seed()).with_reset_timeout(reset_timeout);
    SUMMARY.store(rt.pid(), Ordering::Relaxed);
    Ok(rt)
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

/// `aclInit`. After a session started implicitly, succeeds and changes nothing else. In a
/// forked child, starts the child's own session (the parent's is not the child's: see
/// [`State::Inherited`]).
///
/// `config` reads `aclInit`'s configuration file; as in CANN, only once the call is known not
/// to be a repeated one, and a configuration it refuses leaves the process as it was.
pub(crate) fn init(config: impl FnOnce() -> Result<AclConfig, CallError>) -> Result<(), CallError> {
    let mut state = lock()?.write().unwrap_or_else(PoisonError::into_inner);
    match &mut *state {
        State::Ready(_, Start::AclInit { refs }) => {
            *refs += 1;
            Err(CallError::new(
                Error::RepeatInitialize,
                format!(
                    "aclInit was already called in this process (it now counts {refs} \
                     references for aclFinalizeReference)"
                ),
            ))
        }
        State::Ready(rt, start) => {
            rt.configure(config()?)?;
            *start = Start::AclInit { refs: 1 };
            Ok(())
        }
        _ => {
            let config = config()?;
            let rt = Arc::new(open_session()?);
            rt.configure(config)?;
            SESSION.publish(&rt);
            *state = State::Ready(rt, Start::AclInit { refs: 1 });
            Ok(())
        }
    }
}

/// How many `aclInit` calls the session counts (0: none since the last finalize, or a session
/// started by a runtime call).
pub(crate) fn init_refs() -> u64 {
    let Some(lock) = current() else { return 0 };
    match &*lock.read().unwrap_or_else(PoisonError::into_inner) {
        State::Ready(_, Start::AclInit { refs }) => *refs,
        _ => 0,
    }
}

/// Gives back one of several `aclInit` references (`aclFinalizeReference` with more than one):
/// the count left, or `None` if there were not two or more (nothing changed).
pub(crate) fn release_ref() -> Option<u64> {
    let lock = current()?;
    match &mut *lock.write().unwrap_or_else(PoisonError::into_inner) {
        State::Ready(_, Start::AclInit { refs }) if *refs > 1 => {
            *refs -= 1;
            Some(*refs)
        }
        _ => None,
    }
}

/// Undoes a successful `aclInit` whose init callbacks then failed: the session stays, as one a
/// runtime call started (CANN marks the process initialised only once they all succeeded), so
/// the next `aclInit` runs them again.
pub(crate) fn demote() {
    if let Some(lock) = current()
        && let State::Ready(_, start) = &mut *lock.write().unwrap_or_else(PoisonError::into_inner)
    {
        *start = Start::Implicit;
    }
}

/// Whether `aclFinalize` already ran (and nothing started a session since).
pub(crate) fn is_finalized() -> bool {
    match current() {
        Some(lock) => matches!(
            &*lock.read().unwrap_or_else(PoisonError::into_inner),
            State::Finalized
        ),
        None => AT_FORK.load(Ordering::Relaxed) == FINALIZED,
    }
}

/// Whether `aclFinalize` ran and no `aclInit` succeeded since ([`FINALIZED_SINCE_INIT`]).
pub(crate) fn finalized_since_init() -> bool {
    FINALIZED_SINCE_INIT.load(Ordering::Relaxed)
}

/// Notes the end of a successful `aclInit` (its init callbacks included): an `aclFinalize`
/// is due again.
pub(crate) fn initialized() {
    FINALIZED_SINCE_INIT.store(false, Ordering::Relaxed);
}

/// `aclFinalize`: lets the streams run what they can of their queued tasks (see
/// `runtime::drain`), then releases every stream and notify handle of the process. In a
/// forked child that has not called `aclInit`, releases nothing (nothing is the child's) and
/// returns 0.
pub(crate) fn finalize() -> Result<(), CallError> {
    // Before the session's lock: the tasks may call into the library (host functions).
    let drained = existing_runtime().map_or(Ok(()), |rt| rt.drain_for_finalize());
    let (old, quiet) = {
        let mut state = lock()?.write().unwrap_or_else(PoisonError::into_inner);
        let old = match std::mem::replace(&mut *state, State::Finalized) {
            State::Ready(rt, _) => Some(rt),
            // CANN lets a process finalize without having initialised, once; a forked child
            // finalizing its parent's session has nothing of its own to release.
            State::Uninit | State::Inherited => None,
            State::Finalized => {
                return Err(CallError::new(
                    Error::RepeatFinalize,
                    "aclFinalize was already called",
                ));
            }
        };
        SUMMARY.store(FINALIZED, Ordering::Relaxed);
        FINALIZED_SINCE_INIT.store(true, Ordering::Relaxed);
        // Calls in flight on the session without the lock finish before it is released (as
        // readers of the lock did before this write lock was granted); none can start on it
        // any more. Under the lock, so that an `aclInit` racing this one publishes its own
        // session only after this withdrawal.
        let quiet = SESSION.withdraw();
        (old, quiet)
    };
    if let Some(rt) = old {
        if quiet {
            rt.release(|_| true);
        } else {
            // A call may still run on it (the membarrier failed, which it does not once
            // registered): the session is neither released nor freed, so that call finds
            // it as it was; what it holds goes with the process.
            std::mem::forget(rt);
        }
    }
    drained
}

//! The session's callback subscriptions (`aclrtSubscribeReport`): which thread serves which
//! stream, and each thread's mailbox of callbacks waiting for its `aclrtProcessReport`. The
//! calls themselves are `crate::callback`'s; the state lives with the session so that
//! `aclFinalize` ends it and a forked child starts without it.

use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use acl_notify_core::RawStream;

/// One session's subscriptions.
#[derive(Default)]
pub(crate) struct Subscriptions {
    pub(crate) inner: Mutex<Inner>,
    /// Signalled when a thread is subscribed (an `aclrtProcessReport` that started before its
    /// thread's subscription waits for it).
    pub(crate) subscribed: Condvar,
}

/// The calling thread's id as CANN's callers pass it (`pthread_self()`, which is what
/// `std::thread::id` holds in C++).
pub(crate) fn this_thread() -> u64 {
    // SAFETY: no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

impl Subscriptions {
    /// Whether each of `streams` is held by a blocking callback that waits, not yet taken, for
    /// the calling thread's `aclrtProcessReport`: a thread inside a device reset or
    /// `aclFinalize` that drains those streams can never run them, so nothing can.
    pub(crate) fn held_for_this_thread(&self, streams: &[RawStream]) -> bool {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(served) = inner.threads.get(&this_thread()) else {
            return false;
        };
        let queue = served
            .mailbox
            .queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        streams.iter().all(|&s| {
            queue.iter().any(|r| {
                r.holds == Some(s)
                    && *r.state.lock().unwrap_or_else(PoisonError::into_inner) == State::Queued
            })
        })
    }
}

#[derive(Default)]
pub(crate) struct Inner {
    /// Backend stream → the thread serving it.
    pub(crate) streams: HashMap<u64, u64>,
    /// Thread id → what it serves.
    pub(crate) threads: HashMap<u64, Served>,
}

impl Inner {
    /// Drops the subscriptions of streams that `live` says are gone (destroyed, or discarded
    /// by a device reset, without `aclrtUnSubscribeReport`): their threads may serve another
    /// device once they serve no live stream (a thread keeps its entry, and its mailbox, for
    /// the session: an `aclrtProcessReport` waiting on it goes on finding what is posted). A
    /// stream's handle is never reused while its session lives, so a gone stream's
    /// subscription never applies to another one.
    pub(crate) fn forget_dead_streams(&mut self, live: impl Fn(u64) -> bool) {
        let Inner { streams, threads } = self;
        streams.retain(|&s, t| {
            let keep = live(s);
            if !keep && let Some(served) = threads.get_mut(t) {
                served.streams -= 1;
            }
            keep
        });
    }
}

pub(crate) struct Served {
    pub(crate) device: u32,
    /// How many streams it serves.
    pub(crate) streams: usize,
    pub(crate) mailbox: Arc<Mailbox>,
}

/// The callbacks waiting for one thread's `aclrtProcessReport`.
#[derive(Default)]
pub(crate) struct Mailbox {
    pub(crate) queue: Mutex<VecDeque<Arc<Report>>>,
    pub(crate) ready: Condvar,
}

impl Mailbox {
    /// Takes `report` out of the queue: its blocking task gave up on it
    /// ([`State::Abandoned`]), so no `aclrtProcessReport` is to find it (nor the caller's
    /// `userData` to stay referenced) until the thread's next call.
    pub(crate) fn forget(&self, report: &Arc<Report>) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.retain(|r| !Arc::ptr_eq(r, report));
    }
}

/// One callback handed to a thread.
pub(crate) struct Report {
    pub(crate) func: unsafe extern "C" fn(*mut c_void),
    pub(crate) arg: *mut c_void,
    /// The stream a blocking callback holds until it has run (`None`: `ACL_CALLBACK_NO_BLOCK`).
    pub(crate) holds: Option<RawStream>,
    pub(crate) state: Mutex<State>,
    pub(crate) done: Condvar,
}

// SAFETY: `aclrtLaunchCallback`'s contract: `fn(userData)` may run on another thread.
unsafe impl Send for Report {}
// SAFETY: `func` and `arg` are only read; `state` is behind its mutex.
unsafe impl Sync for Report {}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Queued,
    /// Its thread is running it.
    Running,
    Done,
    /// Its blocking task gave up waiting (the session ended): never run it.
    Abandoned,
}

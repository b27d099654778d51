//! The session's callback subscriptions (`aclrtSubscribeReport`, `aclrtSubscribeHostFunc`):
//! which thread serves which stream on which [`Channel`], and each thread's mailbox of
//! functions waiting for its `aclrtProcessReport` / `aclrtProcessHostFunc`. The calls
//! themselves are `crate::callback`'s and `crate::host_func`'s; the state lives with the
//! session so that `aclFinalize` ends it and a forked child starts without it.
//!
//! A stream has one subscription slot per channel (hicann/runtime
//! `src/runtime_compact/feature/src/stream.c`: `threadId[SUBSCRIBE_CALLBACK]` and
//! `threadId[SUBSCRIBE_HOSTFUNC]`), so its callbacks and its host functions may go to two
//! threads; a thread has one mailbox (one subscription id per thread,
//! `subscribe_manager_linux.c`), each function in it tagged with its channel, and each
//! processing call takes the first function of its own channel.

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
        let me = this_thread();
        streams
            .iter()
            .all(|&s| matches!(self.waiting_holder(s), Some((t, _)) if t == me))
    }

    /// The thread (and channel) whose mailbox holds, not yet taken, the blocking function
    /// that holds `stream`: the stream's head task then waits for that thread's processing
    /// call, which the stream engine sees only as a host function that has not returned.
    pub(crate) fn waiting_holder(&self, stream: RawStream) -> Option<(u64, Channel)> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.threads.iter().find_map(|(&thread, served)| {
            let queue = served
                .mailbox
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            queue
                .iter()
                .find(|r| {
                    r.holds == Some(stream)
                        && *r.state.lock().unwrap_or_else(PoisonError::into_inner) == State::Queued
                })
                .map(|r| (thread, r.channel))
        })
    }
}

/// Which processing call runs a posted function.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) enum Channel {
    /// `aclrtLaunchCallback` → `aclrtProcessReport`.
    Report,
    /// `aclrtLaunchHostFunc` on a subscribed stream → `aclrtProcessHostFunc`.
    HostFunc,
}

impl Channel {
    /// The subscribing call, for messages.
    pub(crate) fn subscribe_call(self) -> &'static str {
        match self {
            Channel::Report => "aclrtSubscribeReport",
            Channel::HostFunc => "aclrtSubscribeHostFunc",
        }
    }

    /// The unsubscribing call, for messages.
    pub(crate) fn unsubscribe_call(self) -> &'static str {
        match self {
            Channel::Report => "aclrtUnSubscribeReport",
            Channel::HostFunc => "aclrtUnSubscribeHostFunc",
        }
    }

    /// The processing call that runs what it carries, for messages.
    pub(crate) fn process_call(self) -> &'static str {
        match self {
            Channel::Report => "aclrtProcessReport",
            Channel::HostFunc => "aclrtProcessHostFunc",
        }
    }

    /// The launching call, for messages.
    pub(crate) fn launch_call(self) -> &'static str {
        match self {
            Channel::Report => "aclrtLaunchCallback",
            Channel::HostFunc => "aclrtLaunchHostFunc",
        }
    }

    /// What it carries, for messages.
    pub(crate) fn what(self) -> &'static str {
        match self {
            Channel::Report => "callback",
            Channel::HostFunc => "host function",
        }
    }
}

#[derive(Default)]
pub(crate) struct Inner {
    /// (Backend stream, channel) → the thread serving it.
    pub(crate) streams: HashMap<(u64, Channel), u64>,
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
        streams.retain(|&(s, _), t| {
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

/// The functions waiting for one thread's `aclrtProcessReport` / `aclrtProcessHostFunc`.
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

/// Takes the first function of `channel` out of `queue` (a thread's mailbox, locked).
pub(crate) fn take(queue: &mut VecDeque<Arc<Report>>, channel: Channel) -> Option<Arc<Report>> {
    let at = queue.iter().position(|r| r.channel == channel)?;
    queue.remove(at)
}

/// One callback handed to a thread.
pub(crate) struct Report {
    pub(crate) channel: Channel,
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

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn nothing(_: *mut c_void) {}

    fn posted(channel: Channel) -> Arc<Report> {
        Arc::new(Report {
            channel,
            func: nothing,
            arg: std::ptr::null_mut(),
            holds: None,
            state: Mutex::new(State::Queued),
            done: Condvar::new(),
        })
    }

    /// One mailbox per thread: each processing call takes the oldest function of its own
    /// channel and leaves the other channel's where they were.
    #[test]
    fn each_channel_takes_its_own_functions_in_order() {
        let (r1, h1, r2, h2) = (
            posted(Channel::Report),
            posted(Channel::HostFunc),
            posted(Channel::Report),
            posted(Channel::HostFunc),
        );
        let mut queue: VecDeque<_> = [&r1, &h1, &r2, &h2].into_iter().cloned().collect();
        let got = take(&mut queue, Channel::HostFunc).expect("a host function");
        assert!(Arc::ptr_eq(&got, &h1));
        let got = take(&mut queue, Channel::HostFunc).expect("a host function");
        assert!(Arc::ptr_eq(&got, &h2));
        assert!(take(&mut queue, Channel::HostFunc).is_none());
        assert_eq!(queue.len(), 2, "the callbacks were taken too");
        let got = take(&mut queue, Channel::Report).expect("a callback");
        assert!(Arc::ptr_eq(&got, &r1));
    }
}

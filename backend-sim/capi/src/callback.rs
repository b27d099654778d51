//! Callbacks run by threads of the program (`aclrtSubscribeReport`, `aclrtLaunchCallback`,
//! `aclrtProcessReport`, `aclrtUnSubscribeReport`), as CANN's callback chapter describes them:
//! the program creates a thread that calls `aclrtProcessReport(timeout)` in a loop, subscribes
//! it to a stream, and each `aclrtLaunchCallback(fn, data, blockType, stream)` queues a task
//! that, when the stream reaches it, hands `fn(data)` to that thread. With
//! `ACL_CALLBACK_BLOCK` the stream goes on only once the thread has run it; with
//! `ACL_CALLBACK_NO_BLOCK` at once.
//!
//! Rules (hicann/runtime `docs/api_docs/aclrtSubscribeReport.md`): one thread per stream; a
//! thread may serve several streams, of one device only; at most 1,024 subscribed threads per
//! process. The simulator's task is a host function that posts the callback to the thread's
//! mailbox (and, blocking, waits for it to have run), so the callback runs in stream order
//! with everything else queued there.
//!
//! The same machinery serves `crate::host_func` (`aclrtSubscribeHostFunc` …) on the other
//! [`Channel`]: [`subscribe`], [`unsubscribe`], [`post`] and [`process`] take the channel.
//!
//! Codes: 100000 a `blockType` that is neither; 107000 `fn` NULL, a timeout that is neither
//! −1 nor positive; 107011 (`ACL_ERROR_RT_STREAM_SUBSCRIBE`) a launch on a stream no thread
//! is subscribed to, a subscription of a stream another thread (or the same) already serves,
//! an unsubscription of a thread that does not serve the stream; 107012
//! (`ACL_ERROR_RT_THREAD_SUBSCRIBE`) a thread subscribed on another device, the 1,025th
//! thread, and an `aclrtProcessReport` from a thread still subscribed to no stream when its
//! timeout ends; 507012 (`ACL_ERROR_RT_REPORT_TIMEOUT`) no callback within the timeout; the
//! stream checks (107017, 107002, 107003) as for any stream argument.
//!
//! The subscriptions belong to the session: `aclFinalize` ends them. A blocking callback whose
//! thread never runs it holds its stream as a host function blocked without a timeout would
//! (`aclFinalize` discards it and what follows it, and the callback then never runs; so do a
//! forced destroy of its stream, a reset of its device once its drain ends, and
//! `aclrtStreamAbort`; a draining `aclrtDestroyStream` waits for it, as CANN's does); an
//! `aclrtProcessReport` waiting when the session ends returns 107012. A callback given up
//! leaves its thread's mailbox at once. A reset or `aclFinalize` called by the very thread a
//! blocking callback waits for gives it up at once (the reset with its 507046): that thread
//! cannot run it while it drains (`runtime::drain`).
#![allow(non_camel_case_types)]

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use acl_notify_core::{Error, HostCall, RawStream};

use crate::errmsg::{CallError, param};
use crate::ffi::{aclError, aclrtStream, api, handle};
use crate::runtime::callbacks::{Channel, Mailbox, Report, Served, State, take, this_thread};
use crate::session::{existing_runtime, runtime};

/// `aclrtCallback`.
pub type aclrtCallback = Option<unsafe extern "C" fn(*mut c_void)>;

/// CANN's limit of subscribed threads per process.
const MAX_THREADS: usize = 1024;

/// How often a waiting `aclrtProcessReport`, and a blocking callback waiting for its thread,
/// look whether the session has ended.
const SLICE: Duration = Duration::from_millis(50);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a queued `aclrtLaunchCallback` task carries to the stream's worker.
struct Launch {
    mailbox: Arc<Mailbox>,
    report: Arc<Report>,
    block: bool,
    epoch: u64,
}

/// The host function of an `aclrtLaunchCallback`: posts the callback to its thread and, when
/// blocking, waits until that thread has run it (or the session has ended).
unsafe extern "C" fn deliver(arg: *mut c_void) {
    // SAFETY: `arg` is the `Box<Launch>` leaked by `aclrtLaunchCallback` for this one call.
    let launch = unsafe { Box::from_raw(arg.cast::<Launch>()) };
    let Launch {
        mailbox,
        report,
        block,
        epoch,
    } = *launch;
    lock(&mailbox.queue).push_back(Arc::clone(&report));
    mailbox.ready.notify_all();
    if !block {
        return;
    }
    let _blocked = acl_notify_sim::host_function_blocked(None);
    let mut state = lock(&report.state);
    while matches!(*state, State::Queued | State::Running) {
        // Given up only before its thread took it (a callback running is waited for), once
        // nothing waits for the stream any more: the session ended, or the stream was told to
        // stop its running task (a forced destroy, a device reset or aclFinalize past their
        // drain, an abort), which a draining destroy does not do.
        if *state == State::Queued
            && (acl_notify_sim::host_function_cancelled() || session_ended(epoch))
        {
            *state = State::Abandoned;
            drop(state);
            mailbox.forget(&report);
            return;
        }
        state = report
            .done
            .wait_timeout(state, SLICE)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Frees the `Launch` of a callback task dropped unrun: not queued, or discarded by its stream
/// (`aclrtStreamAbort`, `aclrtDestroyStreamForce`, a device reset, stop-on-failure). Nothing
/// was posted, so no thread waits for it.
///
/// # Safety
///
/// `arg` is the `Box<Launch>` leaked by `aclrtLaunchCallback`, not taken back by `deliver`.
unsafe fn discard(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    drop(unsafe { Box::from_raw(arg.cast::<Launch>()) });
}

/// `aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSubscribeReport(thread_id: u64, stream: aclrtStream) -> aclError {
    api("aclrtSubscribeReport", || {
        subscribe(Channel::Report, thread_id, stream)
    })
}

/// Subscribes thread `thread_id` to `stream`'s `channel`.
pub(crate) fn subscribe(
    channel: Channel,
    thread_id: u64,
    stream: aclrtStream,
) -> Result<(), CallError> {
    let rt = runtime()?;
    let raw = rt.resolve_stream(handle(stream))?;
    let device = rt.current_device()?;
    let subs = rt.callbacks();
    let mut inner = lock(&subs.inner);
    inner.forget_dead_streams(|s| rt.backend().stream_head(RawStream(s)).is_some());
    if let Some(&t) = inner.streams.get(&(raw.0, channel)) {
        return Err(CallError::new(
            Error::StreamSubscribe,
            format!(
                "stream {:#x} is already subscribed by thread {t:#x}{}: one thread serves a \
                 stream's {}s ({} it first)",
                handle(stream),
                if t == thread_id { " (this one)" } else { "" },
                channel.what(),
                channel.unsubscribe_call(),
            ),
        ));
    }
    // A thread serving no stream yet counts against CANN's limit from now on.
    if inner.threads.get(&thread_id).is_none_or(|s| s.streams == 0)
        && inner.threads.values().filter(|s| s.streams > 0).count() >= MAX_THREADS
    {
        return Err(CallError::new(
            Error::ThreadSubscribe,
            format!("{MAX_THREADS} threads are subscribed already, CANN's limit"),
        ));
    }
    match inner.threads.get_mut(&thread_id) {
        Some(s) if s.streams > 0 && s.device != device => {
            return Err(CallError::new(
                Error::ThreadSubscribe,
                format!(
                    "thread {thread_id:#x} serves streams of device {}; a thread serves the \
                     streams of one device, and this stream is on device {device}",
                    s.device
                ),
            ));
        }
        Some(s) => {
            s.device = device;
            s.streams += 1;
        }
        None => {
            inner.threads.insert(
                thread_id,
                Served {
                    device,
                    streams: 1,
                    mailbox: Arc::default(),
                },
            );
        }
    }
    inner.streams.insert((raw.0, channel), thread_id);
    drop(inner);
    subs.subscribed.notify_all();
    Ok(())
}

/// `aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream)`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtUnSubscribeReport(thread_id: u64, stream: aclrtStream) -> aclError {
    api("aclrtUnSubscribeReport", || {
        unsubscribe(Channel::Report, thread_id, stream)
    })
}

/// Ends thread `thread_id`'s subscription to `stream`'s `channel`.
pub(crate) fn unsubscribe(
    channel: Channel,
    thread_id: u64,
    stream: aclrtStream,
) -> Result<(), CallError> {
    let rt = runtime()?;
    let raw = rt.resolve_stream(handle(stream))?;
    let subs = rt.callbacks();
    let mut inner = lock(&subs.inner);
    match inner.streams.get(&(raw.0, channel)) {
        Some(&t) if t == thread_id => {}
        other => {
            return Err(CallError::new(
                Error::StreamSubscribe,
                format!(
                    "thread {thread_id:#x} is not subscribed to stream {:#x}'s {}s ({})",
                    handle(stream),
                    channel.what(),
                    match other {
                        Some(t) => format!("thread {t:#x} is"),
                        None => "no thread is".to_owned(),
                    }
                ),
            ));
        }
    }
    inner.streams.remove(&(raw.0, channel));
    if let Some(s) = inner.threads.get_mut(&thread_id) {
        s.streams -= 1;
    }
    Ok(())
}

/// `aclError aclrtLaunchCallback(aclrtCallback fn, void *userData, aclrtCallbackBlockType
/// blockType, aclrtStream stream)`.
///
/// # Safety
///
/// `fn(userData)` must be safe to call once from the subscribed thread at any time until the
/// stream has run the task, and must not unwind.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchCallback(
    func: aclrtCallback,
    user_data: *mut c_void,
    block_type: i32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtLaunchCallback", || {
        // hicann/runtime `src/acl/aclrt_c/runtime/callback.c`: the ACL layer checks it first.
        let block = match block_type {
            0 => false,
            1 => true,
            other => {
                return Err(CallError::new(
                    Error::InvalidParam,
                    format!(
                        "blockType {other} is neither ACL_CALLBACK_NO_BLOCK (0) nor \
                         ACL_CALLBACK_BLOCK (1)"
                    ),
                ));
            }
        };
        let Some(func) = func else {
            return Err(param("`fn` is NULL"));
        };
        let rt = runtime()?;
        let raw = rt.resolve_task_stream(handle(stream))?;
        let Some(mailbox) = mailbox_of(Channel::Report, raw) else {
            return Err(CallError::new(
                Error::StreamSubscribe,
                format!(
                    "no thread is subscribed to stream {:#x}: call aclrtSubscribeReport(thread \
                     id, stream) first, for a thread that calls aclrtProcessReport",
                    handle(stream)
                ),
            ));
        };
        // SAFETY: the caller's contract.
        unsafe {
            post(
                Channel::Report,
                mailbox,
                func,
                user_data,
                block,
                raw,
                stream,
            )
        }
    })
}

/// The mailbox of the thread serving `raw`'s `channel` in the current session, if one does.
pub(crate) fn mailbox_of(channel: Channel, raw: RawStream) -> Option<Arc<Mailbox>> {
    let rt = existing_runtime()?;
    let inner = lock(&rt.callbacks().inner);
    let served = inner
        .streams
        .get(&(raw.0, channel))
        .and_then(|t| inner.threads.get(t))?;
    Some(Arc::clone(&served.mailbox))
}

/// Queues on `stream` (resolved to `raw`) a task that posts `func(arg)` to `mailbox` on
/// `channel` and, when `block`, holds the stream until its thread has run it.
///
/// # Safety
///
/// `func(arg)` must be safe to call once from the subscribed thread at any time until the
/// stream has run the task, and must not unwind.
pub(crate) unsafe fn post(
    channel: Channel,
    mailbox: Arc<Mailbox>,
    func: unsafe extern "C" fn(*mut c_void),
    user_data: *mut c_void,
    block: bool,
    raw: RawStream,
    stream: aclrtStream,
) -> Result<(), CallError> {
    let rt = runtime()?;
    let report = Arc::new(Report {
        channel,
        func,
        arg: user_data,
        holds: block.then_some(raw),
        state: Mutex::new(State::Queued),
        done: Condvar::new(),
    });
    let launch = Box::into_raw(Box::new(Launch {
        mailbox,
        report,
        block,
        epoch: rt.epoch(),
    }));
    // SAFETY: exactly one of `deliver` (run) and `discard` (dropped unrun: not queued, or
    // discarded by its stream) takes back the box; `Launch` is Send.
    let call = unsafe { HostCall::with_discard(deliver, launch.cast(), discard) };
    rt.launch_host_func(handle(stream), call)
}

/// `aclError aclrtProcessReport(int32_t timeout)`: runs one callback handed to the calling
/// thread, waiting up to `timeout` ms for it (−1: for ever).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtProcessReport(timeout: i32) -> aclError {
    api("aclrtProcessReport", || process(Channel::Report, timeout))
}

/// Runs one function posted to the calling thread on `channel`, waiting up to `timeout` ms for
/// it (−1: for ever).
pub(crate) fn process(channel: Channel, timeout: i32) -> Result<(), CallError> {
    let deadline = match timeout {
        -1 => None,
        t if t > 0 => Some(Instant::now() + Duration::from_millis(t as u64)),
        t => {
            return Err(param(format!(
                "timeout {t}: it is -1 (wait for ever) or a positive number of ms"
            )));
        }
    };
    let rt = runtime()?;
    let epoch = rt.epoch();
    let me = this_thread();
    let ended = || {
        CallError::new(
            Error::ThreadSubscribe,
            format!(
                "the session ended (aclFinalize) while this thread waited for a {}",
                channel.what()
            ),
        )
    };
    // The thread's mailbox, once it is subscribed (it may be a moment after it starts).
    let mailbox = {
        let subs = rt.callbacks();
        let mut inner = lock(&subs.inner);
        loop {
            if let Some(s) = inner.threads.get(&me)
                && (s.streams > 0 || !lock(&s.mailbox.queue).is_empty())
            {
                break Arc::clone(&s.mailbox);
            }
            // A thread that served streams earlier in the session (its entry stays) is
            // told so, as when its last stream goes while it waits below.
            let served = inner.threads.contains_key(&me);
            let left = slice_left(deadline).ok_or_else(|| {
                if served {
                    return no_stream_any_more(channel, me, timeout);
                }
                CallError::new(
                    Error::ThreadSubscribe,
                    format!(
                        "thread {me:#x} is subscribed to no stream: {}(this thread's id, \
                         stream) first",
                        channel.subscribe_call()
                    ),
                )
            })?;
            if session_ended(epoch) {
                return Err(ended());
            }
            inner = subs
                .subscribed
                .wait_timeout(inner, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    };
    let mut queue = lock(&mailbox.queue);
    loop {
        while let Some(report) = take(&mut queue, channel) {
            let mut state = lock(&report.state);
            if *state == State::Abandoned {
                continue;
            }
            *state = State::Running;
            drop(state);
            drop(queue);
            // SAFETY: `aclrtLaunchCallback`'s contract.
            unsafe { (report.func)(report.arg) };
            state = lock(&report.state);
            *state = State::Done;
            drop(state);
            report.done.notify_all();
            return Ok(());
        }
        let Some(left) = slice_left(deadline) else {
            drop(queue);
            let serves = lock(&rt.callbacks().inner)
                .threads
                .get(&me)
                .map_or(0, |s| s.streams);
            return Err(if serves == 0 {
                no_stream_any_more(channel, me, timeout)
            } else {
                CallError::new(
                    Error::ReportTimeout,
                    format!(
                        "no {} reached thread {me:#x} within {timeout} ms",
                        channel.what()
                    ),
                )
            });
        };
        if session_ended(epoch) {
            return Err(ended());
        }
        queue = mailbox
            .ready
            .wait_timeout(queue, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// 107012 for a processing call of thread `me` waiting `timeout` ms, which served streams in
/// this session but serves none any more.
fn no_stream_any_more(channel: Channel, me: u64, timeout: i32) -> CallError {
    CallError::new(
        Error::ThreadSubscribe,
        format!(
            "no {} reached thread {me:#x} within {timeout} ms, and it is subscribed to no \
             stream any more ({}, or its streams were destroyed)",
            channel.what(),
            channel.unsubscribe_call()
        ),
    )
}

/// How long to wait next: a [`SLICE`] at most, `None` once `deadline` has passed.
fn slice_left(deadline: Option<Instant>) -> Option<Duration> {
    match deadline {
        None => Some(SLICE),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            (!left.is_zero()).then(|| left.min(SLICE))
        }
    }
}

/// Whether the session numbered `epoch` is over.
fn session_ended(epoch: u64) -> bool {
    existing_runtime().is_none_or(|rt| rt.epoch() != epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    static RAN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    unsafe extern "C" fn never(_: *mut c_void) {
        RAN.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A blocking callback given up before its thread took it (here: its session is over, as
    /// after `aclFinalize`; an abort, a forced destroy and a reset take the same branch) leaves
    /// its thread's mailbox at once: it stayed there, holding the caller's `userData`, until
    /// that thread's next `aclrtProcessReport`, which a thread that served only that stream
    /// may never make.
    #[test]
    fn a_given_up_blocking_callback_leaves_its_threads_mailbox() {
        // No session is started here: `session_ended` holds for any epoch.
        assert!(existing_runtime().is_none());
        let mailbox = Arc::<Mailbox>::default();
        let report = Arc::new(Report {
            channel: Channel::Report,
            func: never,
            arg: std::ptr::null_mut(),
            holds: Some(RawStream(7)),
            state: Mutex::new(State::Queued),
            done: Condvar::new(),
        });
        let launch = Box::into_raw(Box::new(Launch {
            mailbox: Arc::clone(&mailbox),
            report: Arc::clone(&report),
            block: true,
            epoch: 1,
        }));
        // SAFETY: `launch` is a leaked `Box<Launch>`, taken back by `deliver`.
        unsafe { deliver(launch.cast()) };
        assert!(*lock(&report.state) == State::Abandoned, "not given up");
        assert_eq!(
            lock(&mailbox.queue).len(),
            0,
            "the given-up callback is still in its thread's mailbox"
        );
        assert_eq!(
            Arc::strong_count(&report),
            1,
            "something still holds the report"
        );
        assert!(!RAN.load(std::sync::atomic::Ordering::Relaxed));
    }
}

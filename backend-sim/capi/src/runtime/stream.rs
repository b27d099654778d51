//! The stream calls of [`Runtime`]: NULL as the default stream, create, destroy, synchronize,
//! query, host functions.

use acl_notify_core::{
    Backend, BackendError, Error, HostCall, RawStream, StreamDestroy, StreamOps, StreamStatus,
    SyncWait,
};

use crate::errmsg::{CallError, param};

use super::last_task::{self, Last};
use super::statecb::{self, StreamState};
use super::{Runtime, StreamEntry, bad_stream, stream_error, stream_name};

impl Runtime {
    /// The backend stream a C stream argument means on the calling thread: a live stream of
    /// the current device, or that device's default stream for NULL. Checks: 107017 bad
    /// handle; 107002 no current device; 107003 a stream of another device; 107027 a stream
    /// that is capturing (`capture`: only the calls it captures may name it).
    #[inline]
    pub(crate) fn resolve_stream(&self, stream: usize) -> Result<RawStream, CallError> {
        self.refuse_capturing(stream)?;
        self.resolve_stream_any(stream)
    }

    /// [`resolve_stream`](Self::resolve_stream) for a call that gives the stream a task the
    /// capture does not store (host functions, callbacks, the copy variants, cache operations,
    /// pool allocations, …): notes it as the thread's last task, as [`Runtime::capture`] notes
    /// the tasks it lets queue. CANN sets the thread's last task at every task's submission
    /// (hicann/runtime `src/runtime/api/impl/api_impl.cc`: `InnerThreadLocalContainer`'s last
    /// stream and task ids, which `ApiImpl::CacheLastTaskOpInfo` reads), so
    /// `aclrtCacheLastTaskOpInfo` after such a task is refused instead of reaching an earlier
    /// captured one.
    pub(crate) fn resolve_task_stream(&self, stream: usize) -> Result<RawStream, CallError> {
        let raw = self.resolve_launch(stream)?;
        last_task::note(Last::Queued { stream });
        Ok(raw)
    }

    /// [`resolve_stream`](Self::resolve_stream) for a call that reads about the stream, which
    /// a capture does not refuse.
    pub(crate) fn resolve_stream_any(&self, stream: usize) -> Result<RawStream, CallError> {
        let entry = match stream {
            0 => None,
            h => Some(self.stream(h)?),
        };
        let (device, ctx) = match self.current() {
            Ok(c) => c,
            // The stream checked first, as CANN's API layer checks it before the runtime looks
            // for the current context: if a reset or context destroy on another thread took
            // both since, the stream's 107017 is the answer.
            Err(e) => {
                if stream != 0 {
                    self.stream(stream)?;
                }
                return Err(e);
            }
        };
        match entry {
            Some(s) if s.device != device => Err(CallError::new(
                Error::StreamContext,
                format!(
                    "stream {stream:#x} belongs to device {}, but the current device is {device}",
                    s.device
                ),
            )),
            // hicann/runtime `api_impl.cc`: a stream is used only in the context it belongs to.
            Some(s) if s.ctx != ctx => Err(CallError::new(
                Error::StreamContext,
                format!(
                    "stream {stream:#x} belongs to context {:#x}, but the current context is \
                     {ctx:#x}",
                    s.ctx
                ),
            )),
            Some(s) => Ok(s.raw),
            None => self.context_default_stream(device, ctx),
        }
    }

    /// `aclrtCreateStream`.
    pub(crate) fn create_stream(&self) -> Result<usize, CallError> {
        self.create_stream_with(0, 0)
    }

    /// A stream of the current context with `priority` and `ACL_STREAM_*` `flags` (checked).
    pub(crate) fn create_stream_with(&self, priority: u32, flags: u32) -> Result<usize, CallError> {
        let (device, ctx) = self.current()?;
        let raw = self
            .backend
            .create_stream(device)
            .map_err(CallError::backend)?;
        // Recorded before its handle exists, so every holder of the handle finds the record;
        // counted against the chip's streams per device (`Soc::max_streams`), which the
        // record's lock makes one step with the check.
        let max = self.backend.soc().max_streams().unwrap_or(u32::MAX);
        if self
            .stream_infos
            .register_created(raw, device, priority, flags, max)
            .is_none()
        {
            let _ = self.backend.destroy_stream(raw, StreamDestroy::Discard);
            return Err(CallError::new(
                Error::NoStreamResource,
                format!(
                    "device {device} has no stream left: the program holds the {max} streams a \
                     {} device has (destroy one first)",
                    self.backend.soc()
                ),
            ));
        }
        let h = self
            .streams
            .insert(StreamEntry {
                raw,
                device,
                ctx,
                default: false,
            })
            .inspect_err(|_| {
                let id = self.stream_infos.forget_stream(raw);
                let _ = self.backend.destroy_stream(raw, StreamDestroy::Discard);
                self.stream_infos.free_id(id);
            })?;
        self.bind_to_context(raw, ctx);
        // Deadlock reports and the inspector name the stream as the C caller sees it. The
        // stream was created a moment ago by this thread: it is live.
        let _ = self.backend.set_stream_alias(raw, h as u64);
        statecb::stream_state(h, StreamState::CreatePost);
        Ok(h)
    }

    /// `aclrtDestroyStream` / `aclrtDestroyStreamForce` (`stream` is not NULL).
    pub(crate) fn destroy_stream(
        &self,
        stream: usize,
        mode: StreamDestroy,
    ) -> Result<(), CallError> {
        let raw = self.resolve_stream(stream)?;
        if self.stream(stream).is_ok_and(|s| s.default) {
            return Err(param(format!(
                "stream {stream:#x} is a context's default stream: it goes with its context"
            )));
        }
        statecb::stream_state(stream, StreamState::DestroyPre);
        // Dead for every other caller from now on, even while a drain is still running. Only
        // the caller that removes it destroys it: a racing destroy is told the handle is dead.
        if self.streams.remove(stream).is_none() {
            return Err(bad_stream(stream));
        }
        self.res_limits.forget_stream(raw);
        // Its id stays taken while it drains: a stream created meanwhile gets another.
        let id = self.stream_infos.forget_stream(raw);
        let destroyed = self.backend.destroy_stream(raw, mode);
        self.stream_infos.free_id(id);
        destroyed.map_err(|e| {
            // With the handle ours alone, a drain refused as dead was overtaken by a discard.
            if e.kind() == Error::InvalidHandle && mode == StreamDestroy::Drain {
                CallError::new(
                    Error::InvalidHandle,
                    format!(
                        "stream {stream:#x} was discarded while it drained (its device was \
                         reset, or aclFinalize ran): the tasks still queued did not run"
                    ),
                )
            } else {
                stream_error(stream, e)
            }
        })
    }

    /// `aclrtSynchronizeStream[WithTimeout]`.
    ///
    /// A failed context (`ctx_failure`) answers its failure at once, and so does one whose
    /// failure came while this waited (CANN's `ApiImpl::StreamSynchronize` checks the context
    /// first, and `Stream::Synchronize` again while it waits).
    pub(crate) fn synchronize(&self, stream: usize, wait: SyncWait) -> Result<(), CallError> {
        let raw = self.resolve_stream(stream)?;
        self.current_context_failure()?;
        let synced = self.synchronize_raw(stream, raw, wait);
        self.current_context_failure()?;
        synced
    }

    fn synchronize_raw(
        &self,
        stream: usize,
        raw: RawStream,
        wait: SyncWait,
    ) -> Result<(), CallError> {
        self.backend.synchronize(raw, wait).map_err(|e| {
            if e.kind() == Error::StreamSyncTimeout {
                let why = self
                    .stream_report(raw)
                    .map_or_else(String::new, |r| format!(": {r}"));
                CallError::new(
                    Error::StreamSyncTimeout,
                    format!("{} still has tasks after {wait}{why}", stream_name(stream)),
                )
            } else if e.kind() == Error::InvalidHandle || e.kind() == Error::InternalError {
                stream_error(stream, e)
            } else {
                // A failure a task stored on the stream, reported now: say on which stream.
                CallError::backend(e)
                    .in_context(&format!("{}: a task on it failed", stream_name(stream)))
            }
        })
    }

    /// `aclrtStreamQuery`.
    pub(crate) fn query(&self, stream: usize) -> Result<StreamStatus, CallError> {
        let raw = self.resolve_stream(stream)?;
        self.current_context_failure()?;
        let status = self
            .backend
            .query(raw)
            .map_err(|e| stream_error(stream, e))?;
        // Not a failure, but the caller polling a stream that does not finish wants to know
        // why: a note for `aclGetRecentErrMsg`.
        if status == StreamStatus::NotReady
            && let Some(why) = self.stream_report(raw)
        {
            crate::errmsg::note_throttled(stream, || {
                format!(
                    "aclrtStreamQuery: {} is not ready: {why}",
                    stream_name(stream)
                )
            });
        }
        Ok(status)
    }

    /// What `raw` is doing, for a message (the backend's report), its head named as the
    /// caller launched it when it is a blocking callback (or a host function of a subscribed
    /// stream) that its thread has not taken yet: the stream engine sees only a host function
    /// that has not returned, which is not what the caller queued nor what it waits for.
    pub(super) fn stream_report(&self, raw: RawStream) -> Option<String> {
        const HOST_FN_HEAD: &str = "its head task is a host function that has not returned";
        let report = self.backend.stream_report(raw)?;
        if !report.contains(HOST_FN_HEAD) {
            return Some(report);
        }
        Some(match self.callbacks.waiting_holder(raw) {
            Some((thread, channel)) => report.replacen(
                HOST_FN_HEAD,
                &format!(
                    "its head task is a blocking {} ({}) that thread {thread:#x} has not taken \
                     yet with {}",
                    channel.what(),
                    channel.launch_call(),
                    channel.process_call()
                ),
                1,
            ),
            None => report,
        })
    }

    /// `aclrtLaunchHostFunc`.
    pub(crate) fn launch_host_func(&self, stream: usize, call: HostCall) -> Result<(), CallError> {
        let raw = self.resolve_task_stream(stream)?;
        self.backend
            .launch_host_func(raw, call)
            .map_err(|e| stream_error(stream, e))
    }

    /// `aclrtSetOpWaitTimeout`.
    pub(crate) fn set_op_wait_timeout(&self, seconds: u32) -> Result<(), CallError> {
        self.backend
            .set_op_wait_timeout(seconds)
            .map_err(CallError::backend)
    }
}

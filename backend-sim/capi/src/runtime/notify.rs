//! The local notify calls of [`Runtime`]: create, destroy, record, wait, id, batch reset, and
//! how a failed call names the caller's handle.

use acl_notify_core::{
    BackendError, CreateFlags, Error, Feature, NotifyResources, RawNotify, StreamOps, Timeout,
};

use acl_notify_sim::SimError;

use crate::errmsg::{CallError, param};
use crate::runtime::capture::Captured;

use super::{Runtime, bad_notify, bad_stream};

impl Runtime {
    /// `aclrtCreateNotify` (after the NULL and flag checks).
    #[inline]
    pub(crate) fn create_notify(&self, flags: CreateFlags) -> Result<usize, CallError> {
        let device = self.current_device()?;
        let raw = self
            .backend
            .create_notify(device, flags)
            .map_err(CallError::backend)?;
        self.add_notify(raw)
    }

    /// `aclrtDestroyNotify` (`notify` is not NULL): the backend's own slot check (one lock
    /// round trip in all) tells a live handle from a destroyed or stale one.
    #[inline]
    pub(crate) fn destroy_notify(&self, notify: usize) -> Result<(), CallError> {
        let raw = self.decode_notify(notify)?;
        self.backend.destroy_notify(raw).map_err(|e| {
            if e.kind() == Error::InvalidHandle {
                bad_notify(notify)
            } else {
                CallError::backend(e)
            }
        })
    }

    /// `aclrtRecordNotify`.
    pub(crate) fn record(&self, notify: usize, stream: usize) -> Result<(), CallError> {
        let n = self.decode_notify(notify)?;
        if self.capture_notify(n, notify, stream, Captured::NotifyRecord(n))? {
            return Ok(());
        }
        let s = self
            .resolve_task_stream(stream)
            .map_err(|e| self.notify_first(n, notify, e))?;
        self.backend
            .record(n, s)
            .map_err(|e| self.task_error(n, notify, stream, e))
    }

    /// `aclrtWaitAndResetNotify`.
    pub(crate) fn wait_and_reset(
        &self,
        notify: usize,
        stream: usize,
        timeout: u32,
    ) -> Result<(), CallError> {
        let n = self.decode_notify(notify)?;
        let task = Captured::NotifyWait(n, Timeout::from_c(timeout));
        if self.capture_notify(n, notify, stream, task)? {
            return Ok(());
        }
        let s = self
            .resolve_task_stream(stream)
            .map_err(|e| self.notify_first(n, notify, e))?;
        self.backend
            .wait_and_reset(n, s, Timeout::from_c(timeout))
            .map_err(|e| self.task_error(n, notify, stream, e))
    }

    /// [`Runtime::capture`] of a notify task: while a capture runs, a notify that is not
    /// live is refused (107017) first, as the uncaptured call refuses it. While none runs
    /// (`Ok(false)` at once), the caller resolves the stream with
    /// [`resolve_task_stream`](Runtime::resolve_task_stream), which notes the task as the
    /// thread's last, as `capture` notes the ones it lets queue: CANN sets the thread's last
    /// task at every record and wait it submits (hicann/runtime
    /// `src/runtime/core/src/notify/notify.cc` and `notify_c.cc`,
    /// `GET_THREAD_TASKID_AND_STREAMID` / `SET_THREAD_TASKID_AND_STREAMID`).
    #[inline]
    fn capture_notify(
        &self,
        n: RawNotify,
        notify: usize,
        stream: usize,
        task: Captured,
    ) -> Result<bool, CallError> {
        if !self.any_capture() {
            return Ok(false);
        }
        if !self.backend.notify_is_live(n) {
            return Err(bad_notify(notify));
        }
        self.capture(stream, task)
    }

    /// For the stream calls, which leave the notify's liveness to the backend (one table
    /// lookup, not two): a stream error `e` stands only if the notify is live — a dead
    /// notify is reported first, as SPEC §3 orders. Runs on the error path only.
    pub(super) fn notify_first(&self, n: RawNotify, handle: usize, e: CallError) -> CallError {
        if self.backend.notify_is_live(n) {
            e
        } else {
            bad_notify(handle)
        }
    }

    /// A backend error of a stream call: a 107017 for a notify that is not live is reported
    /// with the C handle the caller passed.
    /// A failed record or wait: a 107017 names the handle, notify or stream, in the caller's
    /// terms (a stream destroyed while the call waited for room in its queue gets here).
    fn task_error(&self, n: RawNotify, notify: usize, stream: usize, e: SimError) -> CallError {
        if e.kind() == Error::InvalidHandle && self.backend.notify_is_live(n) {
            bad_stream(stream)
        } else {
            self.notify_error(n, notify, e)
        }
    }

    pub(super) fn notify_error(&self, n: RawNotify, handle: usize, e: SimError) -> CallError {
        if e.kind() == Error::InvalidHandle && !self.backend.notify_is_live(n) {
            bad_notify(handle)
        } else {
            CallError::backend(e)
        }
    }

    /// `aclrtGetNotifyId`.
    pub(crate) fn notify_id(&self, notify: usize) -> Result<u32, CallError> {
        let n = self.notify(notify)?;
        self.backend
            .notify_info(n)
            .map(|i| i.id)
            .map_err(CallError::backend)
    }

    /// `aclrtNotifyBatchReset` after the array and count checks: `next(i)` yields element `i`
    /// (`num` ≥ 1 of them). Elements are checked in order; the ones before the first failing
    /// element are reset, then that element's code is returned. Element `i` is read only
    /// once the elements before it have passed every check.
    ///
    /// The SoC check (the same for every element) is made once, before element 0 is read;
    /// the handles are decoded as the backend walks the batch, and the backend's own check
    /// of an element's slot stands for the table lookup (its 107017 is reported as this
    /// layer's, naming the C handle).
    ///
    /// CANN resets each element in the current context (hicann/runtime
    /// `src/runtime/api/impl/api_impl.cc` `ApiImpl::NotifyReset`, `api_impl_david.cc`
    /// `ApiImplDavid::NotifyReset`: 107002 without one, after the element's NULL check), and
    /// on Atlas A2 and A3 with a task on that context's default stream, which becomes the
    /// thread's last task. The simulator queues none (see `Sim::batch_reset_with`: a task cost
    /// the judged C ABI row +30 %), so the thread's last task stays the one before.
    pub(crate) fn batch_reset(
        &self,
        num: usize,
        mut next: impl FnMut(usize) -> usize,
    ) -> Result<(), CallError> {
        self.require(Feature::BatchReset)?;
        let mut failure = None;
        let mut last = 0;
        // The current context (its default stream), looked up at the first non-NULL element.
        let mut in_context = false;
        let r = self.backend.batch_reset_with(num, |i| match next(i) {
            0 => {
                failure = Some(param(format!("notifies[{i}] is NULL")));
                None
            }
            h => {
                last = h;
                if !in_context {
                    if let Err(e) = self.resolve_stream_any(0) {
                        failure = Some(e);
                        return None;
                    }
                    in_context = true;
                }
                match self.decode_notify(h) {
                    Ok(raw) => Some(raw),
                    Err(e) => {
                        failure = Some(e);
                        None
                    }
                }
            }
        });
        r.map_err(|e| {
            if e.kind() == Error::InvalidHandle {
                bad_notify(last)
            } else {
                CallError::backend(e)
            }
        })?;
        failure.map_or(Ok(()), Err)
    }
}

//! Events in the C ABI: the handle table and the checks CANN's entry points and runtime make
//! before the backend's (hicann/runtime `src/acl/aclrt_impl/event.cpp` for the NULL checks,
//! `src/runtime/api/impl/api_error.cc` for which kinds of event each call refuses).

use acl_notify_core::event::{EventKind, EventSpec, IpcEventHandle, LatestRecord, elapsed_ms};
use acl_notify_core::{
    Backend, Error, EventOps, EventRecordedStatus, EventWaitStatus, RawEvent, RawStream, SyncWait,
    Timeout,
};

use super::Runtime;
use crate::errmsg::{CallError, param};
use crate::runtime::capture::Captured;

/// What an event handle stands for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventEntry {
    pub(crate) raw: RawEvent,
    /// The device it was created (or opened) on.
    pub(crate) device: u32,
    spec: EventSpec,
    /// The context it was created (or opened) in, whose failure its synchronize and queries
    /// answer (`ctx_failure`; CANN's `Event::Context_`).
    ctx: Option<usize>,
}

fn bad_event(event: usize) -> CallError {
    crate::handle::not_live("event", "an event", event)
}

fn unsupported(what: &str, why: &str) -> CallError {
    CallError::new(Error::FeatureNotSupport, format!("{what} {why}"))
}

/// `aclrtEventStatus` (the deprecated query's answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub(crate) enum LegacyStatus {
    /// `ACL_EVENT_STATUS_COMPLETE`.
    Complete = 0,
    /// `ACL_EVENT_STATUS_NOT_READY`.
    NotReady = 1,
}

impl Runtime {
    pub(super) fn event(&self, event: usize) -> Result<EventEntry, CallError> {
        self.events.get(event).ok_or_else(|| bad_event(event))
    }

    fn events_supported(&self) -> Result<(), CallError> {
        self.require(acl_notify_core::Feature::Event)
    }

    fn add_event(&self, raw: RawEvent, device: u32, spec: EventSpec) -> Result<usize, CallError> {
        let ctx = self.current().ok().map(|(_, ctx)| ctx);
        self.events
            .insert(EventEntry {
                raw,
                device,
                spec,
                ctx,
            })
            .inspect_err(|_| {
                let _ = self.backend().event_destroy(raw);
            })
    }

    /// `aclrtCreateEvent`, `aclrtCreateEventWithFlag` (`ex` false) or
    /// `aclrtCreateEventExWithFlag` (`ex` true); `flag` is `None` for `aclrtCreateEvent`.
    pub(crate) fn create_event(&self, flag: Option<u32>, ex: bool) -> Result<usize, CallError> {
        self.events_supported()?;
        let soc = self.backend().soc();
        let spec = match (flag, ex) {
            (None, _) => Ok(EventSpec::classic()),
            (Some(f), false) => EventSpec::with_flag(f, soc),
            (Some(f), true) => EventSpec::ex_with_flag(f, soc),
        }
        .map_err(|e| {
            let f = flag.unwrap_or_default();
            match e {
                Error::FeatureNotSupport => {
                    CallError::new(e, format!("flag {f:#x} is not supported on {soc}"))
                }
                _ if ex => CallError::new(
                    e,
                    format!(
                        "flag {f:#x}: an OR of ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS \
                         and ACL_EVENT_TIME_LINE, or ACL_EVENT_IPC alone"
                    ),
                ),
                _ => CallError::new(
                    e,
                    format!(
                        "flag {f:#x}: an OR of ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS \
                         and ACL_EVENT_TIME_LINE, or ACL_EVENT_DEVICE_USE_ONLY or \
                         ACL_EVENT_EXTERNAL alone"
                    ),
                ),
            }
        })?;
        let device = self.current_device()?;
        let raw = self
            .backend()
            .event_create(device, spec)
            .map_err(CallError::backend)?;
        self.add_event(raw, device, spec)
    }

    /// `aclrtDestroyEvent`: queued tasks that use the event still run.
    pub(crate) fn destroy_event(&self, event: usize) -> Result<(), CallError> {
        let e = self.events.remove(event).ok_or_else(|| bad_event(event))?;
        self.backend()
            .event_destroy(e.raw)
            .map_err(CallError::backend)
    }

    /// `aclrtRecordEvent`.
    pub(crate) fn record_event(&self, event: usize, stream: usize) -> Result<(), CallError> {
        let e = self.event(event)?;
        if self.capture(stream, Captured::EventRecord(event))? {
            return Ok(());
        }
        let s = self.resolve_launch(stream)?;
        self.backend()
            .event_record(e.raw, s)
            .map_err(CallError::backend)
    }

    /// `aclrtRecordEventWithFlag(ACL_EVENT_RECORD_EXTERNAL)` and
    /// `aclrtStreamWaitEventWithFlag(ACL_EVENT_WAIT_EXTERNAL)`: a record or wait of the
    /// caller's own event, captured into the model `stream` captures; 107029 (stream not
    /// captured) when it captures none (hicann/runtime `api_impl.cc`, `EventRecord` and
    /// `StreamWaitEvent` with the external flag).
    pub(crate) fn external_event_task(
        &self,
        event: usize,
        stream: usize,
        record: bool,
    ) -> Result<(), CallError> {
        self.event(event)?;
        let (task, call) = if record {
            (Captured::ExternalRecord(event), "aclrtRecordEventWithFlag")
        } else {
            (
                Captured::ExternalWait(event),
                "aclrtStreamWaitEventWithFlag",
            )
        };
        if self.capture(stream, task)? {
            return Ok(());
        }
        Err(CallError::new(
            Error::StreamNotCaptured,
            format!(
                "{call} with the external flag on stream {stream:#x}, which is not capturing: \
                 the flag is for a record or wait inside a capture (aclmdlRICaptureBegin)"
            ),
        ))
    }

    /// A replay's external record or wait (`Captured::ExternalRecord` / `ExternalWait`) on
    /// `stream`: each replay records the caller's event itself, for waits outside the model, or
    /// waits for its latest record, made outside the model (hicann/runtime `api_impl.cc`,
    /// `CaptureExternalEventRecord` / `CaptureExternalEventWait`).
    pub(super) fn external(&self, task: Captured, stream: RawStream) -> Result<(), CallError> {
        let b = self.backend();
        match task {
            Captured::ExternalRecord(e) => b.event_record(self.event(e)?.raw, stream),
            Captured::ExternalWait(e) => {
                b.stream_wait_event(stream, self.event(e)?.raw, Timeout::Forever)
            }
            _ => return Err(CallError::new(Error::InternalError, "not an external task")),
        }
        .map_err(CallError::backend)
    }

    /// `aclrtResetEvent`.
    pub(crate) fn reset_event(&self, event: usize, stream: usize) -> Result<(), CallError> {
        let e = self.event(event)?;
        if self.capture(stream, Captured::EventReset(event))? {
            return Ok(());
        }
        let s = self.resolve_launch(stream)?;
        self.backend()
            .event_reset(e.raw, s)
            .map_err(CallError::backend)
    }

    /// `aclrtStreamWaitEvent[WithTimeout]`.
    pub(crate) fn stream_wait_event(
        &self,
        stream: usize,
        event: usize,
        timeout: Timeout,
    ) -> Result<(), CallError> {
        let e = self.event(event)?;
        if self.capture(stream, Captured::EventWait(event, timeout))? {
            return Ok(());
        }
        let s = self.resolve_launch(stream)?;
        self.backend()
            .stream_wait_event(s, e.raw, timeout)
            .map_err(CallError::backend)
    }

    /// `aclrtGetEventAvailNum`: event ids the current device has left (this process's pool in
    /// the simulator).
    pub(crate) fn events_free(&self) -> Result<u32, CallError> {
        self.events_supported()?;
        let device = self.current_device()?;
        self.backend()
            .events_free(device)
            .map_err(CallError::backend)
    }

    /// The failure of the event's context, if it has one (CANN's `Context::CheckStatus`, which
    /// `ApiImpl::EventSynchronize`, `EventQuery` and `EventQueryStatus` call first).
    fn event_context_failure(&self, e: &EventEntry) -> Result<(), CallError> {
        e.ctx.map_or(Ok(()), |ctx| self.context_failure(ctx))
    }

    fn latest(&self, e: &EventEntry) -> Result<LatestRecord, CallError> {
        self.backend()
            .event_latest(e.raw)
            .map_err(CallError::backend)
    }

    /// `aclrtQueryEvent` (deprecated): whether the latest record has run.
    pub(crate) fn query_event(&self, event: usize) -> Result<LegacyStatus, CallError> {
        self.refuse_capture_event(event, "aclrtQueryEvent")?;
        let e = self.event(event)?;
        if e.spec.kind() == EventKind::Ex {
            return Err(unsupported(
                "aclrtQueryEvent",
                "does not take an event of aclrtCreateEventExWithFlag (use aclrtQueryEventStatus)",
            ));
        }
        if e.spec.external() {
            return Err(unsupported(
                "aclrtQueryEvent",
                "does not take an external event",
            ));
        }
        self.event_context_failure(&e)?;
        Ok(match self.latest(&e)? {
            LatestRecord::Pending => LegacyStatus::NotReady,
            LatestRecord::None | LatestRecord::Done => LegacyStatus::Complete,
        })
    }

    /// `aclrtQueryEventStatus`: COMPLETE once the latest record has run; before any record,
    /// COMPLETE for an Ex event and NOT_READY for a classic one (hicann/runtime
    /// `Event::QueryEventStatus`).
    pub(crate) fn query_event_status(
        &self,
        event: usize,
    ) -> Result<EventRecordedStatus, CallError> {
        self.refuse_capture_event(event, "aclrtQueryEventStatus")?;
        let e = self.event(event)?;
        if e.spec.external() {
            return Err(unsupported(
                "aclrtQueryEventStatus",
                "does not take an external event",
            ));
        }
        self.event_context_failure(&e)?;
        Ok(match (self.latest(&e)?, e.spec.kind()) {
            (LatestRecord::Done, _) | (LatestRecord::None, EventKind::Ex) => {
                EventRecordedStatus::Complete
            }
            _ => EventRecordedStatus::NotReady,
        })
    }

    /// `aclrtQueryEventWaitStatus`.
    pub(crate) fn query_event_wait_status(
        &self,
        event: usize,
    ) -> Result<EventWaitStatus, CallError> {
        self.refuse_capture_event(event, "aclrtQueryEventWaitStatus")?;
        let e = self.event(event)?;
        if e.spec.kind() == EventKind::Ex {
            return Err(unsupported(
                "aclrtQueryEventWaitStatus",
                "does not take an event of aclrtCreateEventExWithFlag",
            ));
        }
        if e.spec.external() {
            return Err(unsupported(
                "aclrtQueryEventWaitStatus",
                "does not take an external event",
            ));
        }
        self.backend()
            .event_wait_status(e.raw)
            .map_err(CallError::backend)
    }

    /// `aclrtSynchronizeEvent[WithTimeout]` (`wait` already checked: −1 forever, > 0 ms).
    pub(crate) fn synchronize_event(&self, event: usize, wait: SyncWait) -> Result<(), CallError> {
        self.refuse_capture_event(event, "aclrtSynchronizeEvent")?;
        let e = self.event(event)?;
        if e.spec.external() {
            return Err(unsupported(
                "aclrtSynchronizeEvent",
                "does not take an external event",
            ));
        }
        self.event_context_failure(&e)?;
        // Ends as soon as the event's context fails meanwhile, answering its failure (CANN's
        // event waits poll the context's status: `ctx_failure`).
        let synced = match e.ctx.and_then(|ctx| self.context_scope(ctx)) {
            Some(scope) => self
                .backend()
                .event_synchronize_in_scope(e.raw, wait, &scope),
            None => self.backend().event_synchronize(e.raw, wait),
        };
        self.event_context_failure(&e)?;
        synced.map_err(CallError::backend)
    }

    /// `aclrtEventElapsedTime`: milliseconds from `start`'s latest record to `end`'s.
    pub(crate) fn elapsed_time(&self, start: usize, end: usize) -> Result<f32, CallError> {
        let s = self.event(start)?;
        let e = self.event(end)?;
        for (x, name) in [(&s, "startEvent"), (&e, "endEvent")] {
            if x.spec.external() || x.spec.ipc() {
                return Err(unsupported(
                    "aclrtEventElapsedTime",
                    &format!("does not take an external or IPC event ({name})"),
                ));
            }
        }
        // hicann/runtime `Event::ElapsedTime`: both must have been recorded (507000), then
        // both need a timestamp (107006).
        for (x, name) in [(&s, "startEvent"), (&e, "endEvent")] {
            if self.latest(x)? == LatestRecord::None {
                return Err(CallError::new(
                    Error::InternalError,
                    format!("{name} has never been recorded"),
                ));
            }
        }
        let t0 = self
            .backend()
            .event_timestamp(s.raw)
            .map_err(CallError::backend)?;
        let t1 = self
            .backend()
            .event_timestamp(e.raw)
            .map_err(CallError::backend)?;
        Ok(elapsed_ms(t0, t1))
    }

    /// `aclrtEventGetTimestamp`, in microseconds.
    pub(crate) fn event_timestamp_us(&self, event: usize) -> Result<u64, CallError> {
        let e = self.event(event)?;
        self.backend()
            .event_timestamp(e.raw)
            .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
            .map_err(CallError::backend)
    }

    /// `aclrtGetEventId`.
    pub(crate) fn event_id(&self, event: usize) -> Result<u32, CallError> {
        let e = self.event(event)?;
        self.backend().event_id(e.raw).map_err(CallError::backend)
    }

    /// `aclrtIpcGetEventHandle`.
    pub(crate) fn ipc_event_handle(&self, event: usize) -> Result<IpcEventHandle, CallError> {
        let e = self.event(event)?;
        self.backend()
            .ipc_event_handle(e.raw)
            .map_err(CallError::backend)
    }

    /// `aclrtIpcOpenEventHandle`: the event on the current device.
    pub(crate) fn ipc_open_event(&self, handle: &IpcEventHandle) -> Result<usize, CallError> {
        let device = self.current_device()?;
        let raw = self
            .backend()
            .ipc_open_event(device, handle)
            .map_err(CallError::backend)?;
        let (_, spec) = self.backend().event_spec(raw).map_err(CallError::backend)?;
        self.add_event(raw, device, spec)
    }
}

/// `aclrtSynchronizeEventWithTimeout`'s and `aclrtSynchronizeDeviceWithTimeout`'s timeout: −1
/// forever, > 0 milliseconds; 0 and anything below −1 are refused (hicann/runtime
/// `api_error.cc`: "greater than or equal to -1 and not equal to 0").
pub(crate) fn sync_timeout(timeout: i32) -> Result<SyncWait, CallError> {
    match timeout {
        -1 => Ok(SyncWait::Forever),
        t if t > 0 => Ok(SyncWait::AtMost(std::time::Duration::from_millis(t as u64))),
        t => Err(param(format!(
            "timeout {t} ms: -1 (forever) or a positive number of milliseconds"
        ))),
    }
}

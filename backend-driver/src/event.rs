//! Events and stream modes ([`EventOps`], [`StreamControl`]) over the library's `aclrt*Event*`,
//! `aclrtSetStreamFailureMode` and `aclrtStreamAbort`. The symbols are optional (see
//! `ffi.rs`): without one, its calls answer 207000.
//!
//! Handles live in their own table (kind `Event`). The driver remembers whether an event was
//! ever recorded through it, which CANN's C API does not report, to tell "never recorded"
//! from "recorded, not yet run" ([`LatestRecord`]).

use core::ffi::c_void;
use std::time::Duration;

use acl_notify_core::event::{
    DEFAULT_EVENT_FLAGS, EventKind, EventOps, EventSpec, EventWaitStatus, FailureMode,
    IpcEventHandle, LatestRecord, RawEvent, StreamControl,
};
use acl_notify_core::{Error, Feature, RawStream, SyncWait, Timeout};

use crate::{CPtr, Driver, DriverError, Inner, enter};

/// What the driver knows about one event handle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EventEntry {
    ptr: CPtr,
    device: u32,
    spec: EventSpec,
    /// A record was enqueued through this handle.
    recorded: bool,
}

impl Inner {
    /// 207000 unless the SoC has events and the library exports `symbol`.
    fn ev_fn<F: Copy>(&self, f: Option<F>, symbol: &str) -> Result<F, DriverError> {
        self.require(Feature::Event, "events")?;
        self.exported(f, symbol, "")
    }

    fn event_guard(
        &self,
        e: RawEvent,
    ) -> Result<acl_notify_handles::Guard<'_, EventEntry>, DriverError> {
        self.events
            .acquire(e.0)
            .map_err(|_| DriverError::stale("event", e.0))
    }

    fn ev(&self, e: RawEvent) -> Result<EventEntry, DriverError> {
        Ok(self.event_guard(e)?.get())
    }

    /// Destroys every event left (the driver is being dropped).
    pub(crate) fn drain_events(&self) {
        let Some(destroy) = self.api.aclrtDestroyEvent else {
            return;
        };
        for e in self.events.drain() {
            if self.ensure_device(e.device).is_err() {
                continue;
            }
            // SAFETY: the pointer came from an event create or open and leaves the table here,
            // so this is its one destruction.
            let _ = unsafe { destroy(e.ptr.0) };
        }
    }

    fn add_event(
        &self,
        p: *mut c_void,
        device: u32,
        spec: EventSpec,
    ) -> Result<RawEvent, DriverError> {
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "the library reported success but returned a NULL event",
            ));
        }
        let e = EventEntry {
            ptr: CPtr(p),
            device,
            spec,
            recorded: false,
        };
        enter(&self.events, e, "event", || {
            if let Some(destroy) = self.api.aclrtDestroyEvent {
                // SAFETY: `p` was just created and is in no table: its one destruction.
                let _ = unsafe { destroy(p) };
            }
        })
        .map(RawEvent)
    }
}

impl EventOps for Driver {
    fn event_create(&self, device: u32, spec: EventSpec) -> Result<RawEvent, DriverError> {
        let i = &*self.inner;
        let mut p: *mut c_void = core::ptr::null_mut();
        let (name, code) = match spec.kind() {
            EventKind::Classic if spec.flags() == DEFAULT_EVENT_FLAGS => {
                let f = i.ev_fn(i.api.aclrtCreateEvent, "aclrtCreateEvent")?;
                i.ensure_device(device)?;
                // SAFETY: valid out-pointer.
                ("aclrtCreateEvent", unsafe { f(&mut p) })
            }
            EventKind::Classic => {
                let f = i.ev_fn(i.api.aclrtCreateEventWithFlag, "aclrtCreateEventWithFlag")?;
                i.ensure_device(device)?;
                // SAFETY: valid out-pointer; the flag word was validated by `EventSpec`.
                ("aclrtCreateEventWithFlag", unsafe {
                    f(&mut p, spec.flags().bits())
                })
            }
            EventKind::Ex => {
                let f = i.ev_fn(
                    i.api.aclrtCreateEventExWithFlag,
                    "aclrtCreateEventExWithFlag",
                )?;
                i.ensure_device(device)?;
                // SAFETY: as above.
                ("aclrtCreateEventExWithFlag", unsafe {
                    f(&mut p, spec.flags().bits())
                })
            }
        };
        i.check(name, code)
            .map_err(|e| e.context(format!("creating an event on device {device}")))?;
        i.add_event(p, device, spec)
    }

    fn event_destroy(&self, event: RawEvent) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtDestroyEvent, "aclrtDestroyEvent")?;
        let e = i
            .events
            .begin_close(event.0, |_| true)
            .map_err(|_| DriverError::stale("event", event.0))?;
        let result = i.ensure_device(e.device).and_then(|()| {
            // SAFETY: the handle is closing and no call is using it; the pointer is live.
            let code = unsafe { f(e.ptr.0) };
            i.check("aclrtDestroyEvent", code)
        });
        i.events.finish_close(event.0, result.is_ok());
        result
    }

    fn event_spec(&self, event: RawEvent) -> Result<(u32, EventSpec), DriverError> {
        let e = self.inner.ev(event)?;
        Ok((e.device, e.spec))
    }

    fn event_record(&self, event: RawEvent, stream: RawStream) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtRecordEvent, "aclrtRecordEvent")?;
        let g = i.event_guard(event)?;
        let s = i.stream(stream)?;
        let (e, s) = (g.get(), s.get());
        i.ensure_device(s.device)?;
        // SAFETY: live pointers (guarded).
        let code = unsafe { f(e.ptr.0, s.ptr.0) };
        i.check("aclrtRecordEvent", code)?;
        let _ = i.events.update(event.0, |e| e.recorded = true);
        Ok(())
    }

    fn event_reset(&self, event: RawEvent, stream: RawStream) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtResetEvent, "aclrtResetEvent")?;
        let g = i.event_guard(event)?;
        let s = i.stream(stream)?;
        let (e, s) = (g.get(), s.get());
        i.ensure_device(s.device)?;
        // SAFETY: live pointers (guarded).
        let code = unsafe { f(e.ptr.0, s.ptr.0) };
        i.check("aclrtResetEvent", code)
    }

    fn stream_wait_event(
        &self,
        stream: RawStream,
        event: RawEvent,
        timeout: Timeout,
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.event_guard(event)?;
        let s = i.stream(stream)?;
        let (e, s) = (g.get(), s.get());
        let code = match timeout {
            Timeout::ProcessDefault => {
                let f = i.ev_fn(i.api.aclrtStreamWaitEvent, "aclrtStreamWaitEvent")?;
                i.ensure_device(s.device)?;
                // SAFETY: live pointers (guarded).
                unsafe { f(s.ptr.0, e.ptr.0) }
            }
            t => {
                let f = i.ev_fn(
                    i.api.aclrtStreamWaitEventWithTimeout,
                    "aclrtStreamWaitEventWithTimeout",
                )?;
                i.ensure_device(s.device)?;
                let secs = i32::try_from(t.to_c()).unwrap_or(i32::MAX);
                // SAFETY: live pointers (guarded).
                unsafe { f(s.ptr.0, e.ptr.0, secs) }
            }
        };
        i.check("aclrtStreamWaitEvent", code)
    }

    fn event_latest(&self, event: RawEvent) -> Result<LatestRecord, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtQueryEventStatus, "aclrtQueryEventStatus")?;
        let g = i.event_guard(event)?;
        let e = g.get();
        if !e.recorded {
            return Ok(LatestRecord::None);
        }
        i.ensure_device(e.device)?;
        let mut st = 0i32;
        // SAFETY: live pointer (guarded), valid out-pointer.
        let code = unsafe { f(e.ptr.0, &mut st) };
        i.check("aclrtQueryEventStatus", code)?;
        // ACL_EVENT_RECORDED_STATUS_COMPLETE is 1.
        Ok(if st == 1 {
            LatestRecord::Done
        } else {
            LatestRecord::Pending
        })
    }

    fn event_wait_status(&self, event: RawEvent) -> Result<EventWaitStatus, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtQueryEventWaitStatus, "aclrtQueryEventWaitStatus")?;
        let e = i.ev(event)?;
        i.ensure_device(e.device)?;
        let mut st = 0i32;
        // SAFETY: the pointer came from the table (a concurrent destroy is the caller's race,
        // as in CANN); valid out-pointer.
        let code = unsafe { f(e.ptr.0, &mut st) };
        i.check("aclrtQueryEventWaitStatus", code)?;
        Ok(if st == 0 {
            EventWaitStatus::Complete
        } else {
            EventWaitStatus::NotReady
        })
    }

    fn event_synchronize(&self, event: RawEvent, wait: SyncWait) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.event_guard(event)?;
        let e = g.get();
        let code = match wait {
            SyncWait::Forever => {
                let f = i.ev_fn(i.api.aclrtSynchronizeEvent, "aclrtSynchronizeEvent")?;
                i.ensure_device(e.device)?;
                // SAFETY: live pointer (guarded).
                unsafe { f(e.ptr.0) }
            }
            SyncWait::AtMost(d) => {
                let f = i.ev_fn(
                    i.api.aclrtSynchronizeEventWithTimeout,
                    "aclrtSynchronizeEventWithTimeout",
                )?;
                i.ensure_device(e.device)?;
                // CANN takes whole milliseconds, at least 1.
                let ms = i32::try_from(d.as_millis().max(1)).unwrap_or(i32::MAX);
                // SAFETY: live pointer (guarded).
                unsafe { f(e.ptr.0, ms) }
            }
        };
        i.check("aclrtSynchronizeEvent", code)
    }

    fn event_timestamp(&self, event: RawEvent) -> Result<Duration, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtEventGetTimestamp, "aclrtEventGetTimestamp")?;
        let g = i.event_guard(event)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut us = 0u64;
        // SAFETY: live pointer (guarded), valid out-pointer.
        let code = unsafe { f(e.ptr.0, &mut us) };
        i.check("aclrtEventGetTimestamp", code)?;
        Ok(Duration::from_micros(us))
    }

    fn event_elapsed(&self, start: RawEvent, end: RawEvent) -> Result<f32, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtEventElapsedTime, "aclrtEventElapsedTime")?;
        let g0 = i.event_guard(start)?;
        let g1 = i.event_guard(end)?;
        let (a, b) = (g0.get(), g1.get());
        i.ensure_device(b.device)?;
        let mut ms = 0f32;
        // SAFETY: live pointers (guarded), valid out-pointer.
        let code = unsafe { f(&mut ms, a.ptr.0, b.ptr.0) };
        i.check("aclrtEventElapsedTime", code)?;
        Ok(ms)
    }

    fn event_id(&self, event: RawEvent) -> Result<u32, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtGetEventId, "aclrtGetEventId")?;
        let g = i.event_guard(event)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut id = 0u32;
        // SAFETY: live pointer (guarded), valid out-pointer.
        let code = unsafe { f(e.ptr.0, &mut id) };
        i.check("aclrtGetEventId", code)?;
        Ok(id)
    }

    fn events_free(&self, device: u32) -> Result<u32, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtGetEventAvailNum, "aclrtGetEventAvailNum")?;
        i.ensure_device(device)?;
        let mut n = 0u32;
        // SAFETY: valid out-pointer.
        let code = unsafe { f(&mut n) };
        i.check("aclrtGetEventAvailNum", code)?;
        Ok(n)
    }

    fn ipc_event_handle(&self, event: RawEvent) -> Result<IpcEventHandle, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtIpcGetEventHandle, "aclrtIpcGetEventHandle")?;
        let g = i.event_guard(event)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut h = IpcEventHandle([0; 64]);
        // SAFETY: live pointer (guarded), valid out-pointer of CANN's 64-byte layout.
        let code = unsafe { f(e.ptr.0, &mut h) };
        i.check("aclrtIpcGetEventHandle", code)?;
        Ok(h)
    }

    fn ipc_open_event(
        &self,
        device: u32,
        handle: &IpcEventHandle,
    ) -> Result<RawEvent, DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtIpcOpenEventHandle, "aclrtIpcOpenEventHandle")?;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: the handle is passed by value; valid out-pointer.
        let code = unsafe { f(*handle, &mut p) };
        i.check("aclrtIpcOpenEventHandle", code)?;
        let spec = EventSpec::ex_with_flag(0x40, i.soc).map_err(DriverError::from)?;
        let raw = i.add_event(p, device, spec)?;
        // An opened IPC event is the owner's, recorded or not: the driver cannot tell.
        let _ = i.events.update(raw.0, |e| e.recorded = true);
        Ok(raw)
    }
}

impl StreamControl for Driver {
    fn set_failure_mode(&self, stream: RawStream, mode: FailureMode) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtSetStreamFailureMode, "aclrtSetStreamFailureMode")?;
        let s = i.stream(stream)?;
        let s = s.get();
        i.ensure_device(s.device)?;
        let m = match mode {
            FailureMode::Continue => 0,
            FailureMode::StopOnFailure => 1,
        };
        // SAFETY: live pointer (guarded).
        let code = unsafe { f(s.ptr.0, m) };
        i.check("aclrtSetStreamFailureMode", code)
    }

    fn abort(&self, stream: RawStream) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.ev_fn(i.api.aclrtStreamAbort, "aclrtStreamAbort")?;
        let s = i.stream(stream)?;
        let s = s.get();
        i.ensure_device(s.device)?;
        // SAFETY: live pointer (guarded).
        let code = unsafe { f(s.ptr.0) };
        i.check("aclrtStreamAbort", code)
    }
}

//! Typed events ([`Event`]) and stream modes, in the style of [`Notify`](super::Notify): the
//! create call is a type ([`Classic`], [`Ex`], [`IpcShared`]), so the calls CANN refuses for a kind of
//! event do not exist for it — `reset` and `wait_status` only on a classic event,
//! `elapsed_since` not on an IPC event, `ipc_handle` only on an IPC event, and IPC events only
//! on SoC types with [`IpcEvents`]. An `Event` destroys itself when dropped.
//!
//! ```
//! # use acl_notify_core::{Device, Soc, typed::AnySoc};
//! # fn demo<B: acl_notify_core::EventOps + acl_notify_core::NotifyResources>(b: &B)
//! # -> Result<(), B::Error> {
//! let dev = Device::<AnySoc, _>::new(b, 0)?;
//! let (producer, consumer) = (dev.create_stream()?, dev.create_stream()?);
//! let start = dev.create_event()?;
//! let done = dev.create_event()?;
//! start.record(&producer)?;
//! // ... work on `producer` ...
//! done.record(&producer)?;
//! done.block(&consumer)?; // `consumer`'s later tasks wait for `producer`'s work
//! done.synchronize()?;
//! let ms = done.elapsed_since(&start)?;
//! # let _ = ms; Ok(()) }
//! ```

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::time::Duration;

use crate::backend::{NotifyResources, StreamOps};
use crate::error::Error;
use crate::event::{
    EventFlags, EventOps, EventRecordedStatus, EventSpec, EventWaitStatus, FailureMode,
    IpcEventHandle, LatestRecord, RawEvent, StreamControl,
};
use crate::soc::{Feature, IpcEvents, SocType};
use crate::timeout::{SyncWait, Timeout};

use super::{Device, Stream};

mod sealed {
    pub trait Sealed {}
}

/// Which create call made an event, as a type. Sealed.
pub trait EventKindType: sealed::Sealed + 'static {}

/// Events whose records take timestamps can be timed ([`Event::elapsed_since`]).
pub trait Timed: EventKindType {}

/// `aclrtCreateEvent` / `aclrtCreateEventWithFlag`: a flag that records set and resets clear.
#[derive(Debug)]
pub enum Classic {}
/// `aclrtCreateEventExWithFlag`: a wait captures the latest record.
#[derive(Debug)]
pub enum Ex {}
/// `aclrtCreateEventExWithFlag(ACL_EVENT_IPC)`, or opened from another process's handle.
#[derive(Debug)]
pub enum IpcShared {}

impl sealed::Sealed for Classic {}
impl sealed::Sealed for Ex {}
impl sealed::Sealed for IpcShared {}
impl EventKindType for Classic {}
impl EventKindType for Ex {}
impl EventKindType for IpcShared {}
impl Timed for Classic {}
impl Timed for Ex {}

/// An event on a device of SoC type `C`, made by create call `K`, over backend `B`.
pub struct Event<'b, C: SocType, K: EventKindType, B: EventOps> {
    backend: &'b B,
    device: u32,
    raw: RawEvent,
    _kind: PhantomData<(C, K)>,
}

impl<'b, C: SocType, B: NotifyResources + StreamOps + EventOps> Device<'b, C, B> {
    fn new_event<K: EventKindType>(&self, spec: EventSpec) -> Result<Event<'b, C, K, B>, B::Error> {
        let raw = self.backend.event_create(self.id, spec)?;
        Ok(Event {
            backend: self.backend,
            device: self.id,
            raw,
            _kind: PhantomData,
        })
    }

    /// `aclrtCreateEvent`: a classic event with timestamps that streams can wait on.
    ///
    /// Codes: 207000 a SoC without events; 207007.
    pub fn create_event(&self) -> Result<Event<'b, C, Classic, B>, B::Error> {
        self.new_event(EventSpec::classic())
    }

    /// `aclrtCreateEventWithFlag(flags)`.
    ///
    /// Codes: 107000 a flag word CANN refuses (`IPC`, or `DEVICE_USE_ONLY` / `EXTERNAL` with
    /// other bits); 207000 `DEVICE_USE_ONLY` on a SoC without it, or no events.
    pub fn create_event_with(
        &self,
        flags: EventFlags,
    ) -> Result<Event<'b, C, Classic, B>, B::Error> {
        let spec = EventSpec::with_flag(flags.bits(), self.soc).map_err(B::Error::from)?;
        self.new_event(spec)
    }

    /// `aclrtCreateEventExWithFlag(flags)` for flags other than `IPC` (see
    /// [`create_ipc_event`](Self::create_ipc_event)).
    ///
    /// Codes: 107000 a flag word CANN refuses, or `IPC`; 207000 no events.
    pub fn create_event_ex(&self, flags: EventFlags) -> Result<Event<'b, C, Ex, B>, B::Error> {
        if flags.contains(EventFlags::IPC) {
            return Err(B::Error::from(Error::ParamInvalid));
        }
        let spec = EventSpec::ex_with_flag(flags.bits(), self.soc).map_err(B::Error::from)?;
        self.new_event(spec)
    }
}

impl<'b, C: IpcEvents, B: NotifyResources + StreamOps + EventOps> Device<'b, C, B> {
    /// `aclrtCreateEventExWithFlag(ACL_EVENT_IPC)`: an event to share with other processes.
    ///
    /// Codes: 207000 (only for [`AnySoc`](crate::soc::AnySoc) on a SoC without IPC events).
    pub fn create_ipc_event(&self) -> Result<Event<'b, C, IpcShared, B>, B::Error> {
        let spec =
            EventSpec::ex_with_flag(EventFlags::IPC.bits(), self.soc).map_err(B::Error::from)?;
        self.new_event(spec)
    }

    /// `aclrtIpcOpenEventHandle`: another process's IPC event, on this device.
    ///
    /// Codes: 207000; 107000 a malformed handle; 107017 the event is gone.
    pub fn open_ipc_event(
        &self,
        handle: &IpcEventHandle,
    ) -> Result<Event<'b, C, IpcShared, B>, B::Error> {
        if C::FIXED.is_none() {
            self.soc
                .require(Feature::IpcEvent)
                .map_err(B::Error::from)?;
        }
        let raw = self.backend.ipc_open_event(self.id, handle)?;
        Ok(Event {
            backend: self.backend,
            device: self.id,
            raw,
            _kind: PhantomData,
        })
    }
}

impl<'b, C: SocType, K: EventKindType, B: EventOps> Event<'b, C, K, B> {
    /// The device it was created or opened on.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// Enqueues a record on `stream`.
    ///
    /// Codes: 107017; 107000 a device-only event.
    pub fn record(&self, stream: &Stream<'b, B>) -> Result<(), B::Error> {
        self.backend.event_record(self.raw, stream.raw)
    }

    /// Makes `stream`'s later tasks wait for this event (`aclrtStreamWaitEvent`; the wait times
    /// out after the process default of `aclrtSetOpWaitTimeout`, reported by a synchronize).
    ///
    /// Codes: 107000 a classic event never recorded; 207000 an event without `SYNC`.
    pub fn block(&self, stream: &Stream<'b, B>) -> Result<(), B::Error> {
        self.backend
            .stream_wait_event(stream.raw, self.raw, Timeout::ProcessDefault)
    }

    /// [`block`](Self::block) with its own timeout (`aclrtStreamWaitEventWithTimeout`).
    pub fn block_within(&self, stream: &Stream<'b, B>, timeout: Timeout) -> Result<(), B::Error> {
        self.backend
            .stream_wait_event(stream.raw, self.raw, timeout)
    }

    /// Whether the latest record has run (`aclrtQueryEventStatus`; an Ex or IPC event never
    /// recorded is complete, a classic one is not).
    pub fn status(&self) -> Result<EventRecordedStatus, B::Error> {
        let (_, spec) = self.backend.event_spec(self.raw)?;
        Ok(match (self.backend.event_latest(self.raw)?, spec.kind()) {
            (LatestRecord::Done, _) | (LatestRecord::None, crate::event::EventKind::Ex) => {
                EventRecordedStatus::Complete
            }
            _ => EventRecordedStatus::NotReady,
        })
    }

    /// Blocks until the latest record has run (`aclrtSynchronizeEvent`).
    pub fn synchronize(&self) -> Result<(), B::Error> {
        self.backend.event_synchronize(self.raw, SyncWait::Forever)
    }

    /// [`synchronize`](Self::synchronize) for at most `limit` (507047 when it expires).
    pub fn synchronize_within(&self, limit: Duration) -> Result<(), B::Error> {
        self.backend
            .event_synchronize(self.raw, SyncWait::AtMost(limit))
    }

    /// The backend handle; the caller now destroys it.
    pub fn into_raw(self) -> RawEvent {
        ManuallyDrop::new(self).raw
    }

    /// Destroys it and reports the result (dropping does the same, silently). Tasks already
    /// queued still run.
    pub fn destroy(self) -> Result<(), B::Error> {
        let me = ManuallyDrop::new(self);
        me.backend.event_destroy(me.raw)
    }
}

impl<'b, C: SocType, K: Timed, B: EventOps> Event<'b, C, K, B> {
    /// Milliseconds from `start`'s latest record to this event's (`aclrtEventElapsedTime`).
    ///
    /// Codes: 507000 either never recorded; 107006 either without timestamps or not run yet.
    pub fn elapsed_since<K2: Timed>(&self, start: &Event<'b, C, K2, B>) -> Result<f32, B::Error> {
        self.backend.event_elapsed(start.raw, self.raw)
    }

    /// The event id (`aclrtGetEventId`; 507000 for an `aclrtCreateEvent` event before its
    /// first record).
    pub fn id(&self) -> Result<u32, B::Error> {
        self.backend.event_id(self.raw)
    }
}

impl<'b, C: SocType, B: EventOps> Event<'b, C, Classic, B> {
    /// Enqueues a reset on `stream` (`aclrtResetEvent`).
    ///
    /// Codes: 207000 an event without `SYNC`.
    pub fn reset(&self, stream: &Stream<'b, B>) -> Result<(), B::Error> {
        self.backend.event_reset(self.raw, stream.raw)
    }

    /// Whether every stream wait on it has finished (`aclrtQueryEventWaitStatus`).
    pub fn wait_status(&self) -> Result<EventWaitStatus, B::Error> {
        self.backend.event_wait_status(self.raw)
    }
}

impl<'b, C: IpcEvents, B: EventOps> Event<'b, C, IpcShared, B> {
    /// The handle another process opens (`aclrtIpcGetEventHandle`).
    pub fn ipc_handle(&self) -> Result<IpcEventHandle, B::Error> {
        self.backend.ipc_event_handle(self.raw)
    }
}

impl<C: SocType, K: EventKindType, B: EventOps> Drop for Event<'_, C, K, B> {
    fn drop(&mut self) {
        let _ = self.backend.event_destroy(self.raw);
    }
}

impl<C: SocType, K: EventKindType, B: EventOps> fmt::Debug for Event<'_, C, K, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Event")
            .field("device", &self.device)
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

impl<'b, B: StreamOps + StreamControl> Stream<'b, B> {
    /// `aclrtSetStreamFailureMode`: with [`FailureMode::StopOnFailure`] the tasks after a
    /// failed one are discarded until a synchronize reports the failure.
    pub fn set_failure_mode(&self, mode: FailureMode) -> Result<(), B::Error> {
        self.backend.set_failure_mode(self.raw, mode)
    }

    /// `aclrtStreamAbort`: drops the queued tasks and stops the running one; the stream stays
    /// usable.
    pub fn abort(&self) -> Result<(), B::Error> {
        self.backend.abort(self.raw)
    }
}

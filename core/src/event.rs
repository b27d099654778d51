//! Events (CANN's event chapter): the flag words of the three create calls parsed once into an
//! [`EventSpec`], the status values of the queries, the IPC event handle, stream failure modes,
//! and the backend traits [`EventOps`] and [`StreamControl`].
//!
//! # Semantics (what every backend implements)
//!
//! CANN has two kinds of event, and which create call made one decides how it behaves
//! (hicann/runtime `src/runtime/core/src/event/event.cc`, `api_impl.cc`, `api_error.cc`):
//!
//! - **Classic** (`aclrtCreateEvent`, `aclrtCreateEventWithFlag`): a flag on the device. A record
//!   task sets it (and stamps the time, with `ACL_EVENT_TIME_LINE`), a reset task clears it, and a
//!   wait task stalls its stream until the flag is set; a wait does not clear it, so one record
//!   releases every wait until a reset. A wait on an event that was never recorded is refused
//!   when it is enqueued (107000). Which flag: an event with a flag word of its own
//!   ([`EventSpec::id_at_create`]) keeps one id, so one flag, for life; an `aclrtCreateEvent`
//!   event (the default word) takes a fresh id at each record, and a wait, or a reset, acts on
//!   the id of the latest record enqueued before it (`Event::Record`, `RefreshEventId`,
//!   `WaitSendCheck`): a wait enqueued after a record waits for that record, even when an
//!   earlier one has run, as a program that reuses an event round after round relies on.
//! - **Ex** (`aclrtCreateEventExWithFlag`): each record captures the work queued on its stream so
//!   far; a wait captures the *latest* record at the moment it is enqueued and stalls until that
//!   record has run (later records do not affect it); a wait on a never-recorded event is a
//!   no-op. Ex events cannot be reset (207000).
//!
//! For both, "the event is complete" means its latest record has run (`aclrtQueryEventStatus`,
//! `aclrtSynchronizeEvent`); the elapsed time is the difference of the two latest records'
//! timestamps, in milliseconds.

use core::time::Duration;

use crate::backend::{RawStream, StreamOps};
use crate::error::{Error, Result};
use crate::soc::{Feature, Soc};
use crate::timeout::{SyncWait, Timeout};

bitflags::bitflags! {
    /// An event's flag word (`ACL_EVENT_*`), as the runtime keeps it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct EventFlags: u32 {
        /// `ACL_EVENT_SYNC` (0x1): the event synchronises streams (waits and resets allowed).
        const SYNC = 0x1;
        /// `ACL_EVENT_CAPTURE_STREAM_PROGRESS` (0x2): tracks a stream's progress.
        const CAPTURE_STREAM_PROGRESS = 0x2;
        /// The runtime's internal `RT_EVENT_DDSYNC` (0x4), part of `aclrtCreateEvent`'s default
        /// word; accepted in a flag word as the runtime accepts it.
        const DDSYNC = 0x4;
        /// `ACL_EVENT_TIME_LINE` (0x8): records take a timestamp.
        const TIME_LINE = 0x8;
        /// `ACL_EVENT_DEVICE_USE_ONLY` (0x10): used by device tasks only (the host may not
        /// record, reset or wait on it).
        const DEVICE_USE_ONLY = 0x10;
        /// `ACL_EVENT_EXTERNAL` (0x20): for graph capture; used alone.
        const EXTERNAL = 0x20;
        /// `ACL_EVENT_IPC` (0x40): shareable with other processes; used alone, Ex only.
        const IPC = 0x40;
    }
}

/// `aclrtCreateEvent`'s flag word: the runtime's `RT_EVENT_DEFAULT`
/// (`DDSYNC | TIME_LINE | CAPTURE_STREAM_PROGRESS`, hicann/runtime `runtime/event.h`).
pub const DEFAULT_EVENT_FLAGS: EventFlags = EventFlags::DDSYNC
    .union(EventFlags::TIME_LINE)
    .union(EventFlags::CAPTURE_STREAM_PROGRESS);

/// Which create call made an event (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EventKind {
    /// `aclrtCreateEvent` / `aclrtCreateEventWithFlag`: a flag set by records.
    Classic,
    /// `aclrtCreateEventExWithFlag`: waits capture the latest record.
    Ex,
}

/// A validated event description: kind and flags. Built only by the constructors below, which
/// apply the runtime's checks, so a backend never sees a flag word it must re-validate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventSpec {
    kind: EventKind,
    flags: EventFlags,
}

/// `true` when `flags` holds `alone` together with any other bit.
const fn mixed(flags: u32, alone: u32) -> bool {
    flags & alone != 0 && flags & !alone != 0
}

impl EventSpec {
    /// `aclrtCreateEvent`.
    pub const fn classic() -> Self {
        EventSpec {
            kind: EventKind::Classic,
            flags: DEFAULT_EVENT_FLAGS,
        }
    }

    /// `aclrtCreateEventWithFlag(flag)`: at least one of bits 0x1‥0x20 and nothing above them;
    /// `DEVICE_USE_ONLY` and `EXTERNAL` only alone (107000 otherwise, hicann/runtime
    /// `api_error.cc` `EventCreate`); `DEVICE_USE_ONLY` on a SoC without device-only support
    /// is 207000 (`api_impl.cc` `EventCreate`).
    pub const fn with_flag(flag: u32, soc: Soc) -> Result<Self> {
        const MAX: u32 = 0x3f;
        if flag & MAX == 0 || flag > MAX {
            return Err(Error::ParamInvalid);
        }
        if mixed(flag, EventFlags::DEVICE_USE_ONLY.bits())
            || mixed(flag, EventFlags::EXTERNAL.bits())
        {
            return Err(Error::ParamInvalid);
        }
        if flag == EventFlags::DEVICE_USE_ONLY.bits() && !soc.has(Feature::DeviceOnly) {
            return Err(Error::FeatureNotSupport);
        }
        Ok(EventSpec {
            kind: EventKind::Classic,
            flags: EventFlags::from_bits_truncate(flag),
        })
    }

    /// `aclrtCreateEventExWithFlag(flag)`: `DEVICE_USE_ONLY`, `EXTERNAL` and `IPC` only alone,
    /// then `IPC` on a SoC without IPC events is 207000, then at least one of 0x1, 0x2, 0x4,
    /// 0x8, 0x40 and nothing else (107000) — in that order (hicann/runtime `api_error.cc`
    /// `EventCreateEx`).
    pub const fn ex_with_flag(flag: u32, soc: Soc) -> Result<Self> {
        if mixed(flag, EventFlags::DEVICE_USE_ONLY.bits())
            || mixed(flag, EventFlags::EXTERNAL.bits())
            || mixed(flag, EventFlags::IPC.bits())
        {
            return Err(Error::ParamInvalid);
        }
        if flag == EventFlags::IPC.bits() && !soc.has(Feature::IpcEvent) {
            return Err(Error::FeatureNotSupport);
        }
        const MAX: u32 = 0x4f;
        if flag & MAX == 0 || flag > MAX {
            return Err(Error::ParamInvalid);
        }
        Ok(EventSpec {
            kind: EventKind::Ex,
            flags: EventFlags::from_bits_truncate(flag),
        })
    }

    /// The create call's kind.
    pub const fn kind(self) -> EventKind {
        self.kind
    }

    /// The flag word.
    pub const fn flags(self) -> EventFlags {
        self.flags
    }

    /// Whether records take timestamps (`ACL_EVENT_TIME_LINE`).
    pub const fn timeline(self) -> bool {
        self.flags.contains(EventFlags::TIME_LINE)
    }

    /// Whether the event is an IPC event.
    pub const fn ipc(self) -> bool {
        self.flags.bits() == EventFlags::IPC.bits()
    }

    /// Whether the event is for graph capture only (`ACL_EVENT_EXTERNAL`).
    pub const fn external(self) -> bool {
        self.flags.bits() == EventFlags::EXTERNAL.bits()
    }

    /// Whether only device tasks may use it (`ACL_EVENT_DEVICE_USE_ONLY`).
    pub const fn device_only(self) -> bool {
        self.flags.contains(EventFlags::DEVICE_USE_ONLY)
    }

    /// Whether streams may wait on it and it may be reset: the runtime's
    /// `!IsEventWithoutWaitTask()` (one of `SYNC`, `DDSYNC`, `EXTERNAL`, `IPC`).
    pub const fn has_wait_task(self) -> bool {
        self.flags.bits()
            & (EventFlags::SYNC.bits()
                | EventFlags::DDSYNC.bits()
                | EventFlags::EXTERNAL.bits()
                | EventFlags::IPC.bits())
            != 0
    }

    /// Whether the event gets its id at create (a classic event with a flag word other than
    /// the default) rather than at its first record (hicann/runtime `ApiImpl::EventCreate`).
    pub const fn id_at_create(self) -> bool {
        matches!(self.kind, EventKind::Classic) && self.flags.bits() != DEFAULT_EVENT_FLAGS.bits()
    }
}

/// A backend's handle to one event. Opaque; `0` is never valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(transparent)]
pub struct RawEvent(pub u64);

/// `aclrtEventRecordedStatus`: whether the latest record has run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(i32)]
pub enum EventRecordedStatus {
    /// `ACL_EVENT_RECORDED_STATUS_NOT_READY`.
    NotReady = 0,
    /// `ACL_EVENT_RECORDED_STATUS_COMPLETE`.
    Complete = 1,
}

/// `aclrtEventWaitStatus`: whether every wait task on the event has finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(i32)]
pub enum EventWaitStatus {
    /// `ACL_EVENT_WAIT_STATUS_COMPLETE`.
    Complete = 0,
    /// `ACL_EVENT_WAIT_STATUS_NOT_READY`.
    NotReady = 1,
}

/// What the runtime knows of an event's latest record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LatestRecord {
    /// Never recorded.
    None,
    /// Recorded; the task has not run yet.
    Pending,
    /// The latest record ran.
    Done,
}

/// `ACL_IPC_EVENT_HANDLE_SIZE`.
pub const IPC_EVENT_HANDLE_SIZE: usize = 64;

/// `aclrtIpcEventHandle`: 64 opaque bytes a process hands to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct IpcEventHandle(pub [u8; IPC_EVENT_HANDLE_SIZE]);

/// A stream's failure mode (`aclrtSetStreamFailureMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FailureMode {
    /// `ACL_CONTINUE_ON_FAILURE` (0): later tasks still run after a failed one.
    #[default]
    Continue,
    /// `ACL_STOP_ON_FAILURE` (1): the tasks after a failed one are discarded until the failure
    /// is reported by a synchronize.
    StopOnFailure,
}

impl FailureMode {
    /// The runtime reads bit 0 of the mode word and ignores the rest (hicann/runtime
    /// `ApiImpl::StreamSetMode`: `stmMode & 0x1`).
    pub const fn from_c(mode: u64) -> Self {
        if mode & 1 == 0 {
            FailureMode::Continue
        } else {
            FailureMode::StopOnFailure
        }
    }
}

/// Events on streams (see the module docs). Every method answers 207000 on a SoC without
/// events, before looking at its arguments.
pub trait EventOps: StreamOps {
    /// Creates an event on `device`.
    ///
    /// Codes: 207000; 107001; 207007 the device is out of event ids.
    fn event_create(&self, device: u32, spec: EventSpec) -> Result<RawEvent, Self::Error>;

    /// Destroys the handle; tasks already queued that use the event still run.
    ///
    /// Codes: 207000; 107017.
    fn event_destroy(&self, event: RawEvent) -> Result<(), Self::Error>;

    /// The event's device and spec.
    ///
    /// Codes: 207000; 107017.
    fn event_spec(&self, event: RawEvent) -> Result<(u32, EventSpec), Self::Error>;

    /// Enqueues a record.
    ///
    /// Codes: 207000; 107017; 107000 a device-only event; 507002.
    fn event_record(&self, event: RawEvent, stream: RawStream) -> Result<(), Self::Error>;

    /// Enqueues a reset (classic events).
    ///
    /// Codes: 207000; 107017; 107000 a device-only event; 207000 an Ex event, or one without a
    /// wait task; 507002.
    fn event_reset(&self, event: RawEvent, stream: RawStream) -> Result<(), Self::Error>;

    /// Enqueues a wait. A timeout (`timeout` in seconds) fails the task (107020 at the next
    /// synchronize).
    ///
    /// Codes: 207000; 107017; 107000 a device-only event, or a classic event never recorded;
    /// 207000 an event without a wait task; 507002.
    fn stream_wait_event(
        &self,
        stream: RawStream,
        event: RawEvent,
        timeout: Timeout,
    ) -> Result<(), Self::Error>;

    /// The state of the latest record.
    ///
    /// Codes: 207000; 107017; the failure's code when the latest record was discarded behind a
    /// failure of a stream that stops on failure (the simulator).
    fn event_latest(&self, event: RawEvent) -> Result<LatestRecord, Self::Error>;

    /// Whether every wait task enqueued on the event has finished.
    ///
    /// Codes: 207000; 107017.
    fn event_wait_status(&self, event: RawEvent) -> Result<EventWaitStatus, Self::Error>;

    /// Blocks until the latest record (at the time of the call) has run; at once if none.
    ///
    /// Codes: 207000; 107017; 507047 `wait` expired; 107023 the record was discarded unrun
    /// (its stream destroyed with its tasks discarded, or aborted).
    fn event_synchronize(&self, event: RawEvent, wait: SyncWait) -> Result<(), Self::Error>;

    /// The latest record's timestamp (time since an arbitrary start of the device).
    ///
    /// Codes: 207000; 107017; 507000 never recorded; 107006 no timestamp (no `TIME_LINE`, or
    /// the record has not run).
    fn event_timestamp(&self, event: RawEvent) -> Result<Duration, Self::Error>;

    /// Milliseconds from `start`'s latest record to `end`'s (`aclrtEventElapsedTime`). The
    /// default computes it from the two timestamps.
    ///
    /// Codes: 207000; 107017; 507000 either never recorded; 107006 either without a
    /// timestamp.
    fn event_elapsed(&self, start: RawEvent, end: RawEvent) -> Result<f32, Self::Error> {
        for e in [start, end] {
            if self.event_latest(e)? == LatestRecord::None {
                return Err(Error::InternalError.into());
            }
        }
        let t0 = self.event_timestamp(start)?;
        let t1 = self.event_timestamp(end)?;
        Ok(elapsed_ms(t0, t1))
    }

    /// The event id.
    ///
    /// Codes: 207000; 107017; 507000 the event has no id yet (a default event before its first
    /// record, hicann/runtime `Event::GetEventID`).
    fn event_id(&self, event: RawEvent) -> Result<u32, Self::Error>;

    /// Event ids `device` has left (`aclrtGetEventAvailNum`).
    ///
    /// Codes: 207000; 107001.
    fn events_free(&self, device: u32) -> Result<u32, Self::Error>;

    /// Exports an IPC event.
    ///
    /// Codes: 207000 SoC without IPC events; 107017; 107000 not an IPC event.
    fn ipc_event_handle(&self, event: RawEvent) -> Result<IpcEventHandle, Self::Error>;

    /// Opens another process's IPC event on `device`.
    ///
    /// Codes: 207000 SoC without IPC events; 107001; 107000 a malformed handle; 107017 the
    /// event no longer exists.
    fn ipc_open_event(&self, device: u32, handle: &IpcEventHandle)
    -> Result<RawEvent, Self::Error>;
}

/// Stream modes beyond the plain queue: failure mode and abort.
pub trait StreamControl: StreamOps {
    /// Sets the stream's failure mode.
    ///
    /// Codes: 107017.
    fn set_failure_mode(&self, stream: RawStream, mode: FailureMode) -> Result<(), Self::Error>;

    /// Discards every task queued on the stream and not yet started, and cancels the running
    /// one; the stream stays usable.
    ///
    /// Codes: 107017.
    fn abort(&self, stream: RawStream) -> Result<(), Self::Error>;
}

/// Milliseconds from `start` to `end` as `aclrtEventElapsedTime` reports them (negative when
/// `end` ran first).
pub fn elapsed_ms(start: Duration, end: Duration) -> f32 {
    let ns = end.as_nanos() as f64 - start.as_nanos() as f64;
    (ns / 1_000_000.0) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_flag_follows_the_runtime_checks() {
        let s = Soc::Ascend910B;
        assert_eq!(EventSpec::with_flag(0, s), Err(Error::ParamInvalid));
        assert_eq!(EventSpec::with_flag(0x40, s), Err(Error::ParamInvalid));
        assert_eq!(EventSpec::with_flag(0x80, s), Err(Error::ParamInvalid));
        assert_eq!(EventSpec::with_flag(0x11, s), Err(Error::ParamInvalid));
        assert_eq!(EventSpec::with_flag(0x21, s), Err(Error::ParamInvalid));
        assert!(EventSpec::with_flag(0x9, s).is_ok());
        assert!(EventSpec::with_flag(0x10, s).is_ok());
        assert_eq!(
            EventSpec::with_flag(0x10, Soc::Ascend910),
            Err(Error::FeatureNotSupport)
        );
        let e = EventSpec::with_flag(0x8, s).unwrap();
        assert!(e.timeline() && !e.has_wait_task() && e.id_at_create());
        assert!(!EventSpec::classic().id_at_create());
        assert!(EventSpec::classic().has_wait_task() && EventSpec::classic().timeline());
    }

    #[test]
    fn ex_flag_checks_run_in_the_runtime_order() {
        assert_eq!(
            EventSpec::ex_with_flag(0, Soc::Ascend910B),
            Err(Error::ParamInvalid)
        );
        assert_eq!(
            EventSpec::ex_with_flag(0x41, Soc::Ascend910B),
            Err(Error::ParamInvalid)
        );
        // IPC alone: the SoC check comes before the range check.
        assert_eq!(
            EventSpec::ex_with_flag(0x40, Soc::Ascend310P),
            Err(Error::FeatureNotSupport)
        );
        assert!(
            EventSpec::ex_with_flag(0x40, Soc::Ascend950PR)
                .unwrap()
                .ipc()
        );
        assert_eq!(
            EventSpec::ex_with_flag(0x10, Soc::Ascend910B),
            Err(Error::ParamInvalid)
        );
        assert_eq!(
            EventSpec::ex_with_flag(0x80, Soc::Ascend910B),
            Err(Error::ParamInvalid)
        );
        let e = EventSpec::ex_with_flag(0x9, Soc::Ascend910B).unwrap();
        assert_eq!(e.kind(), EventKind::Ex);
        assert!(e.has_wait_task() && e.timeline() && !e.id_at_create());
    }

    #[test]
    fn failure_mode_reads_bit_zero() {
        assert_eq!(FailureMode::from_c(0), FailureMode::Continue);
        assert_eq!(FailureMode::from_c(1), FailureMode::StopOnFailure);
        assert_eq!(FailureMode::from_c(3), FailureMode::StopOnFailure);
        assert_eq!(FailureMode::from_c(2), FailureMode::Continue);
    }

    #[test]
    fn elapsed_is_signed_milliseconds() {
        let a = Duration::from_micros(1_000);
        let b = Duration::from_micros(3_500);
        assert_eq!(elapsed_ms(a, b), 2.5);
        assert_eq!(elapsed_ms(b, a), -2.5);
    }
}

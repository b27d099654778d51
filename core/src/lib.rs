//! `acl-notify-core`: the `no_std`, allocation-free heart of acl-notify.
//!
//! It holds what every platform shares — CANN's error codes ([`Error`]), the flag words
//! ([`flags`]), the per-SoC capability table ([`soc`]), fixed-capacity id pools ([`pool`]),
//! export keys ([`key`]), SuperPOD device ids ([`sdid`]), whitelists ([`whitelist`]), the
//! handle lifecycle ([`lifecycle`], and as typestates in [`typed`]) — plus the device-side
//! tables that AICPU firmware and the simulator both run: one slot state machine for every
//! shared resource ([`slot`]), with the notify's flag and waiter queue ([`table`]) or a count
//! ([`cnt`], SPEC §6) as its payload, and one way to wait ([`waiter`]). It talks to platforms
//! only through the traits in [`backend`] (and [`waiter`]'s wait/wake trait).
#![no_std]
#![deny(missing_docs)]

#[cfg(test)]
extern crate std;

#[macro_use]
mod fmt;

pub mod backend;
pub mod cnt;
pub mod devprops;
pub mod error;
pub mod event;
pub mod flags;
pub mod key;
pub mod lifecycle;
pub mod pool;
pub mod sdid;
pub mod slot;
pub mod soc;
// The atomics of the shared-memory tables (loom's under `--cfg loom`). Not API: public only
// so that the loom model tests can name the Waiter trait's word type.
#[doc(hidden)]
pub mod sync;
pub mod table;
pub mod timeout;
pub mod typed;
pub mod waiter;
pub mod whitelist;

pub use backend::{
    Backend, CntNotifyOps, DeviceMemory, HostCall, HostOps, MEM_EXPORT_DISABLE_PID_VALIDATION,
    MEM_IMPORT_ENABLE_PEER_ACCESS, NotifyInfo, NotifyResources, RawCntNotify, RawNotify, RawStream,
    ServerPid, StreamDestroy, StreamOps, StreamStatus,
};
pub use cnt::{CntRecord, CntRecordMode, CntWait, CntWaitMode, OnSatisfied};
pub use devprops::{HostLink, Topology};
pub use error::{BackendError, Error, Result};
pub use event::{
    EventFlags, EventKind, EventOps, EventRecordedStatus, EventSpec, EventWaitStatus, FailureMode,
    IpcEventHandle, LatestRecord, RawEvent, StreamControl,
};
pub use flags::{CreateFlags, ExportFlags, ImportFlags, PidValidation};
pub use key::{ExportKey, KeyFields};
pub use lifecycle::{Lifecycle, Op};
pub use pool::{AtomicIdPool, IdPool, SpinIdPool};
pub use soc::{AnySoc, Caps, Chip, Cores, Feature, IpcBatchReset, MaxWaitTimeout, Soc, SocType};
pub use timeout::{SyncWait, Timeout};
pub use typed::{Device, Notify, NotifyAny, Stream};
pub use whitelist::{Whitelist, WhitelistEntry};

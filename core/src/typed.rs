//! The typestate API: notify handles whose lifecycle state and SoC are types, so that misuse
//! (waiting on an imported notify, whitelisting an openly exported one, exporting on a SoC
//! without IPC, using a destroyed handle) does not compile. Built on the backend traits; the
//! same rules hold at run time in [`Lifecycle::apply`] for the C ABI.
//!
//! ```text
//! Device<C, B> ──create_notify──► Notify<Created> ──export──────► Notify<Exported> ──allow_pids──► Notify<Whitelisted>
//!      │                              │  (C: Ipc)    └─export_open─► Notify<ExportedOpen>   (C: Ipc)
//!      └──import(key) (C: Ipc)──► Notify<Imported>     (record only)
//! every state ──destroy / drop──► gone
//! ```
//!
//! - `C` is a SoC type from [`crate::soc`]; a method a SoC lacks does not exist for it.
//!   [`AnySoc`] is the dynamic form: every method exists and answers `FeatureNotSupport`
//!   (207000) at run time when the backend's SoC lacks the feature.
//! - `S` is the state: [`Created`], [`Exported`], [`ExportedOpen`], [`Whitelisted`],
//!   [`Imported`] (sealed; each has `KIND`, the [`Lifecycle`] value it stands for).
//! - Transitions take `self` and, on failure, give the handle back with the error.
//! - A handle destroys its reference when dropped; [`Notify::destroy`] does so explicitly and
//!   reports the result. [`Notify::into_raw`] / [`Notify::from_raw`] convert to and from the
//!   backend's [`RawNotify`] (checked against the backend's state); [`NotifyAny`] is the
//!   dynamic form for storage and FFI.

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::time::Duration;

use crate::backend::{
    HostCall, NotifyInfo, NotifyResources, RawNotify, RawStream, ServerPid, StreamDestroy,
    StreamOps, StreamStatus,
};
use crate::error::{BackendError, Error};
use crate::flags::{CreateFlags, ExportFlags, ImportFlags};
use crate::key::ExportKey;
use crate::lifecycle::Lifecycle;
use crate::soc::{
    BatchReset, DeviceOnly, Feature, InterServer, Ipc, Notifies, ResetsIpc, Soc, SocType,
};
use crate::timeout::{SyncWait, Timeout};

pub use crate::soc::AnySoc;

mod buffer;
pub use buffer::{DeviceBuffer, ExportResult, OwnedBuffer};
mod cnt;
pub use cnt::CntNotify;
mod event;
pub use event::{Classic, Event, EventKindType, Ex, IpcShared, Timed};

mod sealed {
    pub trait Sealed {}
}

/// A lifecycle state as a type. Sealed: implemented only by the five state types here.
pub trait State: sealed::Sealed + 'static {
    /// The runtime value of this state.
    const KIND: Lifecycle;
}

/// States of the owner's (creating process's) handle: it may wait.
pub trait Owner: State {}

/// States of an IPC notify: exported by this process, or imported. A batch reset takes them
/// only on the SoCs whose runtime does ([`ResetsIpc`]); a `Created` notify on any SoC with
/// batch reset.
pub trait Shared: State {}

macro_rules! states {
    ($( $(#[$doc:meta])* $name:ident => $kind:ident $(, $extra:ident)*; )*) => {$(
        $(#[$doc])*
        #[derive(Debug)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum $name {}
        impl sealed::Sealed for $name {}
        impl State for $name {
            const KIND: Lifecycle = Lifecycle::$kind;
        }
        $( impl $extra for $name {} )*
    )*};
}

states! {
    /// Created by this process, not exported.
    Created => Created, Owner;
    /// Exported with PID validation; importers must be whitelisted.
    Exported => Exported, Owner, Shared;
    /// Exported with `DISABLE_PID_VALIDATION`: anyone holding the key may import, and no
    /// whitelist can be set.
    ExportedOpen => ExportedOpen, Owner, Shared;
    /// Exported with PID validation, at least one importer whitelisted.
    Whitelisted => Whitelisted, Owner, Shared;
    /// Imported from another process's key: it can record, not wait, export or whitelist.
    Imported => Imported, Shared;
}

fn err<B: NotifyResources>(e: Error) -> B::Error {
    B::Error::from(e)
}

// ---------------------------------------------------------------------------------------------
// Device
// ---------------------------------------------------------------------------------------------

/// One device of a backend, with the SoC as a type (`C`).
///
/// Built by [`Device::new`], which checks the backend's SoC against `C` (unless `C` is
/// [`AnySoc`]). Cheap to copy: a reference, a device number and the SoC.
pub struct Device<'b, C: SocType, B> {
    backend: &'b B,
    id: u32,
    soc: Soc,
    _soc: PhantomData<C>,
}

impl<C: SocType, B> Clone for Device<'_, C, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<C: SocType, B> Copy for Device<'_, C, B> {}

impl<C: SocType, B> fmt::Debug for Device<'_, C, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("soc", &self.soc)
            .finish()
    }
}

impl<'b, C: SocType, B: NotifyResources + StreamOps> Device<'b, C, B> {
    /// Device `device` of `backend`, checked.
    ///
    /// Codes: 107000 `ParamInvalid` if `C` is a SoC type other than `backend.soc()`; 107001
    /// `InvalidDeviceId` if `device >= backend.device_count()`.
    pub fn new(backend: &'b B, device: u32) -> Result<Self, B::Error> {
        let soc = backend.soc();
        if let Some(fixed) = C::FIXED
            && fixed != soc
        {
            debug!("device: SoC type does not match the backend's SoC");
            return Err(B::Error::with_message(
                Error::ParamInvalid,
                format_args!("this Device type is for {fixed}, but the machine is {soc}"),
            ));
        }
        let count = backend.device_count();
        if device >= count {
            return Err(B::Error::with_message(
                Error::InvalidDeviceId,
                format_args!("device {device} does not exist (the machine has {count})"),
            ));
        }
        Ok(Device {
            backend,
            id: device,
            soc,
            _soc: PhantomData,
        })
    }

    /// The device number.
    pub const fn id(&self) -> u32 {
        self.id
    }

    /// The backend's SoC (for a SoC type, `C::SOC`).
    pub const fn soc(&self) -> Soc {
        self.soc
    }

    /// The backend.
    pub const fn backend(&self) -> &'b B {
        self.backend
    }

    /// The same device with the SoC only known at run time.
    pub const fn into_any_soc(self) -> Device<'b, AnySoc, B> {
        Device {
            backend: self.backend,
            id: self.id,
            soc: self.soc,
            _soc: PhantomData,
        }
    }

    /// For [`AnySoc`], the run-time check that the backend's SoC has `feature`; for a SoC type
    /// the trait bounds already proved it, so this is a no-op the optimiser removes.
    fn require(&self, feature: Feature) -> Result<(), B::Error> {
        match C::FIXED {
            Some(_) => Ok(()),
            None => self.soc.require(feature).map_err(err::<B>),
        }
    }

    /// Creates a stream on this device. Codes: 107001; 207005 out of streams.
    pub fn create_stream(&self) -> Result<Stream<'b, B>, B::Error> {
        Stream::create(self.backend, self.id)
    }

    /// This device's default stream (never destroyed by its handle). Codes: 107001.
    pub fn default_stream(&self) -> Result<Stream<'b, B>, B::Error> {
        Stream::default_for(self.backend, self.id)
    }

    /// Whether this device can access `peer`. Codes: 107001.
    pub fn can_access_peer(&self, peer: u32) -> Result<bool, B::Error> {
        self.backend.can_access_peer(self.id, peer)
    }

    /// Enables access from this device to `peer`. Codes: 107001; 100000 `peer` is this device.
    pub fn enable_peer_access(&self, peer: u32) -> Result<(), B::Error> {
        self.backend.enable_peer_access(self.id, peer)
    }

    fn create(&self, flags: CreateFlags) -> Result<Notify<'b, C, Created, B>, B::Error> {
        let raw = self.backend.create_notify(self.id, flags)?;
        trace!("notify {=u64} created on device {=u32}", raw.0, self.id);
        Ok(Notify::wrap(*self, raw))
    }
}

impl<'b, C: Notifies, B: NotifyResources + StreamOps> Device<'b, C, B> {
    /// Creates a notify (`aclrtCreateNotify` with `ACL_NOTIFY_DEFAULT`).
    ///
    /// Codes: 207000 (AnySoc) the SoC has no notifies; 207009 out of notify ids.
    pub fn create_notify(&self) -> Result<Notify<'b, C, Created, B>, B::Error> {
        self.require(Feature::Notify)?;
        self.create(CreateFlags::empty())
    }
}

impl<'b, C: DeviceOnly, B: NotifyResources + StreamOps> Device<'b, C, B> {
    /// Creates a notify used only by device-side tasks (`ACL_NOTIFY_DEVICE_USE_ONLY`).
    ///
    /// Codes: 207000 (AnySoc) the SoC lacks device-only notifies; 207009 out of notify ids.
    pub fn create_device_only_notify(&self) -> Result<Notify<'b, C, Created, B>, B::Error> {
        self.require(Feature::DeviceOnly)?;
        self.create(CreateFlags::DEVICE_USE_ONLY)
    }
}

impl<'b, C: Ipc, B: NotifyResources + StreamOps> Device<'b, C, B> {
    /// Imports another process's notify onto this device (`aclrtNotifyImportByKey`). The
    /// result can record, not wait (waiting is for the owner's device).
    ///
    /// Codes: 207000 SoC without IPC; 107017 the notify no longer exists; 207006 this process
    /// is not whitelisted, or no peer access and `ENABLE_PEER_ACCESS` not given.
    pub fn import(
        &self,
        key: &ExportKey,
        flags: ImportFlags,
    ) -> Result<Notify<'b, C, Imported, B>, B::Error> {
        self.require(Feature::Ipc)?;
        let raw = self.backend.import_key(self.id, key, flags)?;
        trace!("notify {=u64} imported on device {=u32}", raw.0, self.id);
        Ok(Notify::wrap(*self, raw))
    }
}

impl<'b, C: InterServer, B: NotifyResources + StreamOps> Device<'b, C, B> {
    /// This device's SuperPOD device id ([`crate::Backend::super_pod_device_id`]): what the
    /// owner of a notify this process imports on this device puts in its [`ServerPid`] entry
    /// ([`Notify::allow_server_pids`]), sent beside this process's PID.
    ///
    /// Codes: 207000 a backend that cannot tell.
    pub fn super_pod_device_id(&self) -> Result<u32, B::Error> {
        self.backend.super_pod_device_id(self.id)
    }
}

impl<'b, C: BatchReset, B: NotifyResources + StreamOps> Device<'b, C, B> {
    /// Resets each notify to 0, in order (`aclrtNotifyBatchReset`); stops at the first
    /// failure, earlier ones stay reset. Only handles the SoC's batch reset takes can be
    /// listed ([`Notify::reset_ref`]: IPC notifies only where `C: ResetsIpc`), so 507009
    /// cannot happen.
    ///
    /// Codes: 107000 `notifies` empty; 207000 (AnySoc) SoC without batch reset; 107017.
    pub fn batch_reset(&self, notifies: &[ResetRef<'_, B>]) -> Result<(), B::Error> {
        self.require(Feature::BatchReset)?;
        if notifies.is_empty() {
            return Err(B::Error::with_message(
                Error::ParamInvalid,
                format_args!("batch reset of no notifies"),
            ));
        }
        // Small batches go in one call; longer ones in chunks (no allocation in the core).
        let mut buf = [RawNotify(0); 32];
        for chunk in notifies.chunks(buf.len()) {
            for (slot, r) in buf.iter_mut().zip(chunk) {
                *slot = r.raw;
            }
            self.backend.batch_reset(&buf[..chunk.len()])?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Stream
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreamKind {
    /// Created through this handle: destroyed when the handle is dropped.
    Owned,
    /// The device's default stream: never destroyed.
    Default,
}

/// A stream: tasks run in order on one device. A stream created through this handle is
/// destroyed (after its queued tasks have run) when dropped; a default stream is not.
pub struct Stream<'b, B: StreamOps> {
    backend: &'b B,
    raw: RawStream,
    device: u32,
    kind: StreamKind,
}

impl<B: StreamOps> fmt::Debug for Stream<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("raw", &self.raw)
            .field("device", &self.device)
            .field("default", &(self.kind == StreamKind::Default))
            .finish()
    }
}

impl<'b, B: StreamOps> Stream<'b, B> {
    /// Creates a stream on `device` (`aclrtCreateStream`). Codes: 107001; 207005.
    pub fn create(backend: &'b B, device: u32) -> Result<Self, B::Error> {
        let raw = backend.create_stream(device)?;
        Ok(Stream {
            backend,
            raw,
            device,
            kind: StreamKind::Owned,
        })
    }

    /// The default stream of `device` (what a NULL stream means in C). Codes: 107001.
    pub fn default_for(backend: &'b B, device: u32) -> Result<Self, B::Error> {
        let raw = backend.default_stream(device)?;
        Ok(Stream {
            backend,
            raw,
            device,
            kind: StreamKind::Default,
        })
    }

    /// Takes over a raw stream handle (it will be destroyed on drop unless it is the device's
    /// default stream).
    ///
    /// Codes: 107017 not a live stream of this backend.
    pub fn from_raw(backend: &'b B, raw: RawStream) -> Result<Self, B::Error> {
        let device = backend.stream_device(raw)?;
        let kind = if backend.default_stream(device)? == raw {
            StreamKind::Default
        } else {
            StreamKind::Owned
        };
        Ok(Stream {
            backend,
            raw,
            device,
            kind,
        })
    }

    /// Gives up the handle without destroying the stream.
    pub fn into_raw(self) -> RawStream {
        ManuallyDrop::new(self).raw
    }

    /// The backend's handle.
    pub const fn raw(&self) -> RawStream {
        self.raw
    }

    /// The device the stream runs on.
    pub const fn device(&self) -> u32 {
        self.device
    }

    /// Whether this is the device's default stream.
    pub fn is_default(&self) -> bool {
        self.kind == StreamKind::Default
    }

    /// Waits until every task enqueued so far has run (`aclrtSynchronizeStream`).
    ///
    /// Codes: 107017; 107020 a wait on this stream timed out since the last synchronize
    /// (reported once).
    pub fn synchronize(&self) -> Result<(), B::Error> {
        self.backend.synchronize(self.raw, SyncWait::Forever)
    }

    /// As [`synchronize`](Self::synchronize), giving up after `limit`
    /// (`aclrtSynchronizeStreamWithTimeout`; `Duration::ZERO` polls).
    ///
    /// Codes: as `synchronize`, plus 507046 `limit` expired first.
    pub fn synchronize_within(&self, limit: Duration) -> Result<(), B::Error> {
        self.backend.synchronize(self.raw, SyncWait::AtMost(limit))
    }

    /// Whether every task enqueued so far has run. Codes: 107017.
    pub fn query(&self) -> Result<StreamStatus, B::Error> {
        self.backend.query(self.raw)
    }

    /// Enqueues a host function (`aclrtLaunchHostFunc`). Codes: 107017.
    pub fn launch_host_func(&self, call: HostCall) -> Result<(), B::Error> {
        self.backend.launch_host_func(self.raw, call)
    }

    /// Destroys the stream after its queued tasks have run (`aclrtDestroyStream`); for the
    /// default stream, only the handle goes. Codes: 107017.
    pub fn destroy(self) -> Result<(), B::Error> {
        self.finish(StreamDestroy::Drain)
    }

    /// Destroys the stream, discarding its queued tasks (`aclrtDestroyStreamForce`); for the
    /// default stream, only the handle goes. Codes: 107017.
    pub fn destroy_discarding(self) -> Result<(), B::Error> {
        self.finish(StreamDestroy::Discard)
    }

    fn finish(self, mode: StreamDestroy) -> Result<(), B::Error> {
        let me = ManuallyDrop::new(self);
        match me.kind {
            StreamKind::Owned => me.backend.destroy_stream(me.raw, mode),
            StreamKind::Default => Ok(()),
        }
    }
}

impl<B: StreamOps> Drop for Stream<'_, B> {
    fn drop(&mut self) {
        if self.kind == StreamKind::Owned
            && let Err(e) = self.backend.destroy_stream(self.raw, StreamDestroy::Drain)
        {
            warn!(
                "stream {=u64}: destroy on drop failed ({=i32})",
                self.raw.0,
                e.kind().code()
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Notify
// ---------------------------------------------------------------------------------------------

/// A handle to a notify on device `C` in lifecycle state `S` over backend `B`.
///
/// Dropping it destroys this process's reference (as [`destroy`](Self::destroy), ignoring the
/// result). It is not `Clone`: one handle, one reference.
pub struct Notify<'b, C: SocType, S: State, B: NotifyResources + StreamOps> {
    device: Device<'b, C, B>,
    raw: RawNotify,
    _state: PhantomData<S>,
}

impl<C: SocType, S: State, B: NotifyResources + StreamOps> fmt::Debug for Notify<'_, C, S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notify")
            .field("raw", &self.raw)
            .field("state", &S::KIND)
            .field("device", &self.device)
            .finish()
    }
}

/// The destroy of a [`Notify`] or [`NotifyAny`] dropped: a failure cannot be returned, so it is
/// logged.
fn destroy_on_drop<B: NotifyResources>(backend: &B, raw: RawNotify) {
    if let Err(e) = backend.destroy_notify(raw) {
        warn!(
            "notify {=u64}: destroy on drop failed ({=i32})",
            raw.0,
            e.kind().code()
        );
    }
}

impl<C: SocType, S: State, B: NotifyResources + StreamOps> Drop for Notify<'_, C, S, B> {
    fn drop(&mut self) {
        destroy_on_drop(self.device.backend, self.raw);
    }
}

impl<'b, C: SocType, S: State, B: NotifyResources + StreamOps> Notify<'b, C, S, B> {
    /// This handle's state, as a value (`S::KIND`).
    pub const KIND: Lifecycle = S::KIND;

    fn wrap(device: Device<'b, C, B>, raw: RawNotify) -> Self {
        Notify {
            device,
            raw,
            _state: PhantomData,
        }
    }

    /// Same handle, another state (no backend call, no drop).
    fn into_state<T: State>(self) -> Notify<'b, C, T, B> {
        let me = ManuallyDrop::new(self);
        Notify::wrap(me.device, me.raw)
    }

    /// Takes over a raw handle, checking that the backend sees it on `device` in state `S`.
    ///
    /// Codes: 107017 not a live handle; 107000 it is in another state or on another device.
    pub fn from_raw(device: Device<'b, C, B>, raw: RawNotify) -> Result<Self, B::Error> {
        let info = device.backend.notify_info(raw)?;
        if info.state != S::KIND || info.device != device.id {
            debug!("notify {=u64}: from_raw state or device mismatch", raw.0);
            return Err(B::Error::with_message(
                Error::ParamInvalid,
                format_args!(
                    "the notify is {:?} on device {}, not {:?} on device {}",
                    info.state,
                    info.device,
                    S::KIND,
                    device.id
                ),
            ));
        }
        Ok(Notify::wrap(device, raw))
    }

    /// Gives up the handle without destroying the reference (for FFI or storage); take it
    /// back with [`from_raw`](Self::from_raw) or [`NotifyAny::from_raw`].
    pub fn into_raw(self) -> RawNotify {
        ManuallyDrop::new(self).raw
    }

    /// The dynamic form (state as a value).
    pub fn into_any(self) -> NotifyAny<'b, C, B> {
        let me = ManuallyDrop::new(self);
        NotifyAny {
            device: me.device,
            raw: me.raw,
            state: S::KIND,
        }
    }

    /// The same handle with the SoC only known at run time.
    pub fn into_any_soc(self) -> Notify<'b, AnySoc, S, B> {
        let me = ManuallyDrop::new(self);
        Notify::wrap(me.device.into_any_soc(), me.raw)
    }

    /// The backend's handle (still owned by `self`).
    pub const fn raw(&self) -> RawNotify {
        self.raw
    }

    /// The device this handle was created or imported on.
    pub const fn device(&self) -> Device<'b, C, B> {
        self.device
    }

    /// This handle's state (`S::KIND`).
    pub const fn state(&self) -> Lifecycle {
        S::KIND
    }

    /// The notify id (`aclrtGetNotifyId`; an importer sees the owner's id). Codes: 107017.
    pub fn id(&self) -> Result<u32, B::Error> {
        Ok(self.info()?.id)
    }

    /// What the backend knows about this handle. Codes: 107017.
    pub fn info(&self) -> Result<NotifyInfo, B::Error> {
        self.device.backend.notify_info(self.raw)
    }

    /// Enqueues a record on `stream` (`aclrtRecordNotify`): when the stream reaches it, the
    /// flag becomes 1 (or one waiter is released).
    ///
    /// Codes: 107017 bad notify or stream.
    pub fn record(&self, stream: &Stream<'b, B>) -> Result<(), B::Error> {
        self.device.backend.record(self.raw, stream.raw)
    }

    /// Destroys this process's reference (`aclrtDestroyNotify`). The handle is gone whatever
    /// the result. Codes: 107017.
    pub fn destroy(self) -> Result<(), B::Error> {
        let me = ManuallyDrop::new(self);
        trace!("notify {=u64} destroyed", me.raw.0);
        me.device.backend.destroy_notify(me.raw)
    }
}

impl<'b, C: SocType, S: Owner, B: NotifyResources + StreamOps> Notify<'b, C, S, B> {
    /// Enqueues a wait-and-reset on `stream` (`aclrtWaitAndResetNotify`): when the stream
    /// reaches it, it stalls until the flag is 1, then resets it. A timeout is reported by the
    /// stream's next synchronize (107020). Only owner handles can wait.
    ///
    /// Codes: 107017 bad notify or stream; 107000 `stream` is not on the owner's device.
    pub fn wait_and_reset(&self, stream: &Stream<'b, B>, timeout: Timeout) -> Result<(), B::Error> {
        self.device
            .backend
            .wait_and_reset(self.raw, stream.raw, timeout)
    }
}

impl<'b, C: BatchReset, B: NotifyResources + StreamOps> Notify<'b, C, Created, B> {
    /// Resets the flag to 0 now (a batch reset of one).
    ///
    /// Codes: 207000 (AnySoc) SoC without batch reset; 107017.
    pub fn reset(&self) -> Result<(), B::Error> {
        self.device.batch_reset(&[self.reset_ref()])
    }

    /// This handle as an element of [`Device::batch_reset`].
    pub fn reset_ref(&self) -> ResetRef<'_, B> {
        ResetRef::of(self.raw)
    }
}

/// An IPC notify (exported by this process, or imported) in a batch reset: only on the SoCs
/// whose runtime takes it like any other (Ascend910B, Ascend910_93); the Ascend 950 family's
/// refuses it (507009), so there these methods do not exist.
impl<'b, C: ResetsIpc, S: Shared, B: NotifyResources + StreamOps> Notify<'b, C, S, B> {
    /// Resets the flag to 0 now (a batch reset of one).
    ///
    /// Codes: 207000 (AnySoc) SoC without batch reset; 507009 (AnySoc) the SoC refuses IPC
    /// notifies; 107017.
    pub fn reset(&self) -> Result<(), B::Error> {
        self.device.batch_reset(&[self.reset_ref()])
    }

    /// This handle as an element of [`Device::batch_reset`].
    pub fn reset_ref(&self) -> ResetRef<'_, B> {
        ResetRef::of(self.raw)
    }
}

impl<'b, C: Ipc, B: NotifyResources + StreamOps> Notify<'b, C, Created, B> {
    /// Exports the notify with PID validation (`aclrtNotifyGetExportKey`, flags 0): importers
    /// must then be whitelisted with [`Notify::allow_pids`]. Returns the key to hand to them.
    ///
    /// Codes (with the handle given back): 207000 SoC without IPC; 107017; 507000.
    pub fn export(self) -> Exporting<'b, C, Exported, B> {
        self.export_as(ExportFlags::empty())
    }

    /// Exports the notify without PID validation (`DISABLE_PID_VALIDATION`): anyone holding
    /// the key may import, and no whitelist can be set.
    ///
    /// Codes (with the handle given back): 207000 SoC without IPC; 107017; 507000.
    pub fn export_open(self) -> Exporting<'b, C, ExportedOpen, B> {
        self.export_as(ExportFlags::DISABLE_PID_VALIDATION)
    }

    fn export_as<T: State>(self, flags: ExportFlags) -> Exporting<'b, C, T, B> {
        if let Err(e) = self.device.require(Feature::Ipc) {
            return Err((self, e));
        }
        match self.device.backend.export_key(self.raw, flags) {
            Ok(key) => {
                trace!("notify {=u64} exported", self.raw.0);
                Ok((self.into_state(), key))
            }
            Err(e) => Err((self, e)),
        }
    }
}

/// The result of an export: the exported handle and its key, or the [`Created`] handle back
/// with the error.
pub type Exporting<'b, C, T, B> = Result<
    (Notify<'b, C, T, B>, ExportKey),
    (
        Notify<'b, C, Created, B>,
        <B as crate::backend::Backend>::Error,
    ),
>;

/// The result of whitelisting an [`Exported`] handle: the [`Whitelisted`] handle, or what is
/// left of it ([`AllowFailed`]) with the error.
pub type Allowing<'b, C, B> = Result<
    Notify<'b, C, Whitelisted, B>,
    (AllowFailed<'b, C, B>, <B as crate::backend::Backend>::Error),
>;

/// What is left of an [`Exported`] handle after a whitelist call failed: still `Exported` if
/// nothing was applied, `Whitelisted` if some entries were (an inter-server call keeps the
/// entries applied before the failing one).
pub enum AllowFailed<'b, C: SocType, B: NotifyResources + StreamOps> {
    /// Nothing was applied.
    Exported(Notify<'b, C, Exported, B>),
    /// Some entries were applied before the failure.
    Whitelisted(Notify<'b, C, Whitelisted, B>),
}

impl<'b, C: SocType, B: NotifyResources + StreamOps> AllowFailed<'b, C, B> {
    /// The handle in its dynamic form.
    pub fn into_any(self) -> NotifyAny<'b, C, B> {
        match self {
            AllowFailed::Exported(n) => n.into_any(),
            AllowFailed::Whitelisted(n) => n.into_any(),
        }
    }
}

impl<C: SocType, B: NotifyResources + StreamOps> fmt::Debug for AllowFailed<'_, C, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowFailed::Exported(n) => f.debug_tuple("Exported").field(n).finish(),
            AllowFailed::Whitelisted(n) => f.debug_tuple("Whitelisted").field(n).finish(),
        }
    }
}

impl<'b, C: Ipc, B: NotifyResources + StreamOps> Notify<'b, C, Exported, B> {
    /// Whitelists importer PIDs on this server (`aclrtNotifySetImportPid`).
    ///
    /// Codes (with what is left of the handle): 207000 SoC without IPC; 107017; 107000
    /// `pids` empty; 207012 more than 64 in total.
    pub fn allow_pids(self, pids: &[i32]) -> Allowing<'b, C, B> {
        let r = self
            .device
            .require(Feature::Ipc)
            .and_then(|()| self.device.backend.set_import_pids(self.raw, pids));
        self.whitelisted_or_back(r)
    }

    fn whitelisted_or_back(self, r: Result<(), B::Error>) -> Allowing<'b, C, B> {
        match r {
            Ok(()) => Ok(self.into_state()),
            Err(e) => {
                // The backend may have applied part of the list; the handle follows its state.
                let partial = matches!(
                    self.device.backend.notify_info(self.raw),
                    Ok(NotifyInfo {
                        state: Lifecycle::Whitelisted,
                        ..
                    })
                );
                let left = if partial {
                    AllowFailed::Whitelisted(self.into_state())
                } else {
                    AllowFailed::Exported(self)
                };
                Err((left, e))
            }
        }
    }
}

impl<'b, C: InterServer, B: NotifyResources + StreamOps> Notify<'b, C, Exported, B> {
    /// Whitelists (sdid, PID) entries (`aclrtNotifySetImportPidInterServer`, SuperPod): each
    /// a process importing on the device whose SuperPOD device id the importer read
    /// ([`Device::super_pod_device_id`]). Entries applied before a failing one stay applied.
    ///
    /// Codes (with what is left of the handle): 107000 `entries` empty, or an sdid that
    /// names no device; 107017; 207000 SoC without inter-server whitelists; 207012 more than
    /// 64 in total.
    pub fn allow_server_pids(self, entries: &[ServerPid]) -> Allowing<'b, C, B> {
        let r = self.device.require(Feature::InterServer).and_then(|()| {
            self.device
                .backend
                .set_import_server_pids(self.raw, entries)
        });
        self.whitelisted_or_back(r)
    }
}

impl<'b, C: Ipc, B: NotifyResources + StreamOps> Notify<'b, C, Whitelisted, B> {
    /// Adds importer PIDs on this server to the whitelist.
    ///
    /// Codes: 207000 SoC without IPC; 107017; 107000 `pids` empty; 207012 more than 64 in
    /// total.
    pub fn allow_pids(&self, pids: &[i32]) -> Result<(), B::Error> {
        self.device.require(Feature::Ipc)?;
        self.device.backend.set_import_pids(self.raw, pids)
    }
}

impl<'b, C: InterServer, B: NotifyResources + StreamOps> Notify<'b, C, Whitelisted, B> {
    /// Adds (sdid, PID) entries; entries applied before a failing one stay applied.
    ///
    /// Codes: 107000 `entries` empty, or an sdid that names no device; 107017; 207000 SoC
    /// without inter-server whitelists; 207012 more than 64 in total.
    pub fn allow_server_pids(&self, entries: &[ServerPid]) -> Result<(), B::Error> {
        self.device.require(Feature::InterServer)?;
        self.device
            .backend
            .set_import_server_pids(self.raw, entries)
    }
}

/// A notify as an element of [`Device::batch_reset`]; borrows the notify, so it cannot
/// outlive (or be used after) its destruction.
pub struct ResetRef<'n, B> {
    raw: RawNotify,
    _notify: PhantomData<&'n B>,
}

impl<B> ResetRef<'_, B> {
    fn of(raw: RawNotify) -> Self {
        ResetRef {
            raw,
            _notify: PhantomData,
        }
    }
}

impl<B> Clone for ResetRef<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for ResetRef<'_, B> {}

impl<B> fmt::Debug for ResetRef<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ResetRef").field(&self.raw).finish()
    }
}

// ---------------------------------------------------------------------------------------------
// NotifyAny
// ---------------------------------------------------------------------------------------------

/// A notify handle whose state is a run-time value: the form for storage, tables and FFI.
/// Drop destroys, as for [`Notify`]. Convert back with [`into_typed`](Self::into_typed).
pub struct NotifyAny<'b, C: SocType, B: NotifyResources + StreamOps> {
    device: Device<'b, C, B>,
    raw: RawNotify,
    state: Lifecycle,
}

impl<C: SocType, B: NotifyResources + StreamOps> fmt::Debug for NotifyAny<'_, C, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NotifyAny")
            .field("raw", &self.raw)
            .field("state", &self.state)
            .field("device", &self.device)
            .finish()
    }
}

impl<C: SocType, B: NotifyResources + StreamOps> Drop for NotifyAny<'_, C, B> {
    fn drop(&mut self) {
        destroy_on_drop(self.device.backend, self.raw);
    }
}

impl<'b, C: SocType, B: NotifyResources + StreamOps> NotifyAny<'b, C, B> {
    /// Takes over a raw handle in whatever state the backend reports.
    ///
    /// Codes: 107017 not a live handle; 107000 it is on another device.
    pub fn from_raw(device: Device<'b, C, B>, raw: RawNotify) -> Result<Self, B::Error> {
        let info = device.backend.notify_info(raw)?;
        if info.device != device.id {
            return Err(B::Error::with_message(
                Error::ParamInvalid,
                format_args!(
                    "the notify is on device {}, not device {}",
                    info.device, device.id
                ),
            ));
        }
        Ok(NotifyAny {
            device,
            raw,
            state: info.state,
        })
    }

    /// The typed handle, if the backend sees it in state `S`; otherwise `self` back with
    /// 107000 (or 107017 if the handle is no longer live).
    pub fn into_typed<S: State>(self) -> Result<Notify<'b, C, S, B>, (Self, B::Error)> {
        match self.device.backend.notify_info(self.raw) {
            Ok(info) if info.state == S::KIND => {
                let me = ManuallyDrop::new(self);
                Ok(Notify::wrap(me.device, me.raw))
            }
            Ok(info) => Err((
                self,
                B::Error::with_message(
                    Error::ParamInvalid,
                    format_args!("the notify is {:?}, not {:?}", info.state, S::KIND),
                ),
            )),
            Err(e) => Err((self, e)),
        }
    }

    /// The state when this handle was made (the typed API is the only way to change it).
    pub const fn state(&self) -> Lifecycle {
        self.state
    }

    /// The backend's handle (still owned by `self`).
    pub const fn raw(&self) -> RawNotify {
        self.raw
    }

    /// The device.
    pub const fn device(&self) -> Device<'b, C, B> {
        self.device
    }

    /// Gives up the handle without destroying the reference.
    pub fn into_raw(self) -> RawNotify {
        ManuallyDrop::new(self).raw
    }

    /// The notify id. Codes: 107017.
    pub fn id(&self) -> Result<u32, B::Error> {
        Ok(self.device.backend.notify_info(self.raw)?.id)
    }

    /// Enqueues a record (every state may record). Codes: 107017.
    pub fn record(&self, stream: &Stream<'b, B>) -> Result<(), B::Error> {
        self.device.backend.record(self.raw, stream.raw)
    }

    /// Destroys this process's reference. Codes: 107017.
    pub fn destroy(self) -> Result<(), B::Error> {
        let me = ManuallyDrop::new(self);
        me.device.backend.destroy_notify(me.raw)
    }
}

#[cfg(test)]
mod tests;

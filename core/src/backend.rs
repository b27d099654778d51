//! The traits a backend implements: small, documented, each method listing the codes it
//! returns. Split into [`Backend`] (identity), [`NotifyResources`] (ids, export, whitelist,
//! import, close), [`StreamOps`] (record, wait-and-reset, batch reset, synchronize) and
//! [`HostOps`] (host-side waits and budgets, beyond CANN's C API); count notifies (SPEC §6) are
//! [`CntNotifyOps`].
//!
//! Handles are small opaque numbers chosen by the backend ([`RawNotify`], [`RawStream`]);
//! a backend validates a handle on every call and answers `InvalidHandle` (107017) for a stale,
//! destroyed, foreign or garbage one — never undefined behaviour. Devices are explicit
//! arguments: the per-thread "current device" of CANN's C API is the C ABI's business, built
//! on top of these traits.

use core::ffi::c_void;
use core::time::Duration;

use crate::cnt::{CntRecord, CntWait};
use crate::error::{BackendError, Error};
use crate::flags::{CreateFlags, ExportFlags, ImportFlags};
use crate::key::ExportKey;
use crate::lifecycle::Lifecycle;
use crate::soc::{Feature, Soc};
use crate::timeout::{SyncWait, Timeout};

/// A backend's handle to one process's reference to a notify. Opaque; `0` is never valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(transparent)]
pub struct RawNotify(pub u64);

/// A backend's handle to a stream. Opaque; `0` is never valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(transparent)]
pub struct RawStream(pub u64);

/// A backend's handle to one count notify (SPEC §6). Opaque; `0` is never valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(transparent)]
pub struct RawCntNotify(pub u64);

/// One inter-server whitelist entry: process `pid` importing on the SuperPod device `sdid`
/// (one element of CANN's `aclrtServerPid` with `num == 1`). The importer reads its device's
/// sdid with [`Backend::super_pod_device_id`] (`aclrtGetDeviceInfo(dev,
/// ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)`) and sends it with its PID; it is not the server id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(C)]
pub struct ServerPid {
    /// The SuperPOD device id of the device the process imports on ([`crate::sdid`]).
    pub sdid: u32,
    /// The process id on that device's server.
    pub pid: i32,
}

/// What a backend knows about one notify handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NotifyInfo {
    /// The notify id (an importer sees the owner's id).
    pub id: u32,
    /// The device this handle was created or imported on.
    pub device: u32,
    /// The owner's device (equals `device` for the owner).
    pub owner_device: u32,
    /// The owner's SuperPod server id.
    pub owner_server: u32,
    /// This handle's lifecycle state.
    pub state: Lifecycle,
    /// The create flags.
    pub flags: CreateFlags,
}

/// `aclrtStreamStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(i32)]
pub enum StreamStatus {
    /// `ACL_STREAM_STATUS_COMPLETE`: every task enqueued so far has finished.
    Complete = 0,
    /// `ACL_STREAM_STATUS_NOT_READY`: tasks are still queued or running.
    NotReady = 1,
}

/// What happens to a stream's queued tasks when it is destroyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum StreamDestroy {
    /// `aclrtDestroyStream`: the queued tasks run to completion first.
    Drain,
    /// `aclrtDestroyStreamForce`: the queued tasks are discarded.
    Discard,
}

/// A C host function (`aclrtCallback`-style) and its argument, run on a stream in order.
///
/// Neither `Clone` nor `Copy`: [`HostCall::call`] consumes it, so safe code can run a call at
/// most once, as [`HostCall::new`]'s contract allows. A call dropped without having run (its
/// stream discarded it, or it was never queued) runs its discard function instead, if it has
/// one ([`HostCall::with_discard`]): what owns `arg` frees it there.
#[derive(Debug)]
pub struct HostCall {
    func: unsafe extern "C" fn(*mut c_void),
    arg: *mut c_void,
    discard: Option<unsafe fn(*mut c_void)>,
}

impl HostCall {
    /// Wraps a C function and its argument.
    ///
    /// # Safety
    ///
    /// `func(arg)` must be safe to call once, from another thread, at any time until the stream
    /// has run it (or discarded it): `arg` must stay valid for that long and be usable from
    /// that thread.
    pub const unsafe fn new(func: unsafe extern "C" fn(*mut c_void), arg: *mut c_void) -> Self {
        HostCall {
            func,
            arg,
            discard: None,
        }
    }

    /// As [`HostCall::new`], and `discard(arg)` runs if the call is dropped unrun.
    ///
    /// # Safety
    ///
    /// [`HostCall::new`]'s, and `discard(arg)` must be safe to call once, from any thread, in
    /// place of `func(arg)` (exactly one of the two runs).
    pub const unsafe fn with_discard(
        func: unsafe extern "C" fn(*mut c_void),
        arg: *mut c_void,
        discard: unsafe fn(*mut c_void),
    ) -> Self {
        HostCall {
            func,
            arg,
            discard: Some(discard),
        }
    }

    /// Runs the call (once: it consumes the value; its discard function does not run).
    pub fn call(self) {
        let this = core::mem::ManuallyDrop::new(self);
        // SAFETY: `HostCall::new`'s contract makes this one call valid on any thread; `self` is
        // consumed and cannot be copied, so there is no second, and, not dropped, it runs no
        // discard either.
        unsafe { (this.func)(this.arg) }
    }
}

impl Drop for HostCall {
    fn drop(&mut self) {
        if let Some(discard) = self.discard {
            // SAFETY: `with_discard`'s contract: dropped unrun (`call` does not drop), once.
            unsafe { discard(self.arg) }
        }
    }
}

// SAFETY: `HostCall::new`'s contract requires `func(arg)` to be callable from another thread.
unsafe impl Send for HostCall {}

/// Identity of a backend.
pub trait Backend {
    /// The backend's error: a CANN code, possibly with context for `Display`.
    type Error: BackendError;

    /// The SoC family of this machine's devices.
    fn soc(&self) -> Soc;

    /// Number of devices (`aclrtGetDeviceCount`).
    fn device_count(&self) -> u32;

    /// The calling process's id as the device sees it (`aclrtDeviceGetBareTgid`).
    fn bare_tgid(&self) -> i32;

    /// The SuperPod server this process runs on (0 outside a SuperPod).
    fn server_id(&self) -> u32;

    /// The SuperPOD device id (sdid) of `device` (`aclrtGetDeviceInfo(device,
    /// ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)`): what an owner puts in a [`ServerPid`] to whitelist
    /// a process of this server importing on `device`. Each device has its own.
    ///
    /// Codes: 107001 no such device; 207000 (the default) a backend that cannot tell.
    fn super_pod_device_id(&self, device: u32) -> Result<u32, Self::Error> {
        let _ = device;
        Err(Self::Error::from(Error::FeatureNotSupport))
    }
}

/// `ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION` (CANN `acl_rt.h`): anyone with the key
/// may import. The only export flag besides the default, 0.
pub const MEM_EXPORT_DISABLE_PID_VALIDATION: u64 = 0x1;
/// `ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS` (CANN `acl_rt.h`): the import enables peer
/// access between the two devices itself. The only import flag besides the default, 0.
pub const MEM_IMPORT_ENABLE_PEER_ACCESS: u64 = 0x1;

/// Device memory and IPC memory (`aclrtMalloc`, `aclrtMemcpy`, `aclrtIpcMem*`): what
/// [`crate::typed::DeviceBuffer`] and the conformance suite need from a backend. Device
/// addresses are opaque `u64`s (never dereferenced by the caller). Arguments are checked
/// before the SoC is (as CANN's runtime does): a bad size, flag or count is 107000 even where
/// IPC memory answers 207000.
pub trait DeviceMemory: Backend {
    /// `size` bytes on `device`; its device address. Codes: 107000 size 0; 107001; 207001.
    fn mem_alloc(&self, device: u32, size: usize) -> Result<u64, Self::Error>;
    /// Frees an allocation of this process, made on `device`. Codes: 107000 not one.
    fn mem_free(&self, device: u32, ptr: u64) -> Result<(), Self::Error>;
    /// Copies `src` to device address `dst`, the calling thread on `device`. Codes: 107000
    /// outside the live allocations.
    fn mem_write(&self, device: u32, dst: u64, src: &[u8]) -> Result<(), Self::Error>;
    /// Copies from device address `src` into `dst`, the calling thread on `device`. Codes:
    /// 107000 as for `mem_write`.
    fn mem_read(&self, device: u32, src: u64, dst: &mut [u8]) -> Result<(), Self::Error>;
    /// Copies `len` bytes from device address `src` to device address `dst`
    /// (`aclrtMemcpy`, device to device), the calling thread on `device`. Codes: 107000 as
    /// for `mem_write`.
    fn mem_copy(&self, device: u32, dst: u64, src: u64, len: usize) -> Result<(), Self::Error>;
    /// Exports `[ptr, ptr + size)` (`aclrtIpcMemGetExportKey`), the calling thread on
    /// `device`; `flags` as CANN's (0 or [`MEM_EXPORT_DISABLE_PID_VALIDATION`]). Codes:
    /// 107000 size 0 or other flags; 207000 no IPC memory; 107000 a range outside a live
    /// allocation of this process, or exported otherwise already.
    fn mem_export(
        &self,
        device: u32,
        ptr: u64,
        size: usize,
        flags: u64,
    ) -> Result<ExportKey, Self::Error>;
    /// Whitelists `pids` of this server (`aclrtIpcMemSetImportPid`), the calling thread on
    /// `device`. Codes: 107000 none; 207000; 107000 no live export; 207006 not the owner or
    /// an export without PID validation; 207012 more than 64 in all.
    fn mem_allow_pids(&self, device: u32, key: &ExportKey, pids: &[i32])
    -> Result<(), Self::Error>;
    /// Whitelists (server, PID) entries (`aclrtIpcMemImportPidInterServer`). Codes: 107000
    /// none; 207000 off the SoCs with inter-server IPC memory; then as `mem_allow_pids`.
    fn mem_allow_server_pids(
        &self,
        device: u32,
        key: &ExportKey,
        entries: &[ServerPid],
    ) -> Result<(), Self::Error>;
    /// Maps the memory of `key` for use on `device` (`aclrtIpcMemImportByKey`); its address.
    /// `flags` as CANN's (0 or [`MEM_IMPORT_ENABLE_PEER_ACCESS`]). Codes: 107000 other
    /// flags; 207000; 107000 no live export, imported already, or this process's own;
    /// 207006 not whitelisted, or no peer access.
    fn mem_import(&self, device: u32, key: &ExportKey, flags: u64) -> Result<u64, Self::Error>;
    /// Closes an import, or withdraws an export (`aclrtIpcMemClose`), the calling thread on
    /// `device`. Codes: 207000; 107000 a key this process neither imported nor exported.
    fn mem_close(&self, device: u32, key: &ExportKey) -> Result<(), Self::Error>;
    /// `aclrtIpcMemSetAttr(key, kind, attr)`. Codes: 107000 a kind other than
    /// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` (0) or a bad value; 207000 off the SoCs with
    /// inter-server IPC memory; 107000 no live export.
    fn mem_set_attr(
        &self,
        device: u32,
        key: &ExportKey,
        kind: u32,
        attr: u64,
    ) -> Result<(), Self::Error>;
}

/// Notify resources: ids, export, whitelist, import, close.
pub trait NotifyResources: Backend {
    /// Creates a notify on `device`.
    ///
    /// Codes: 107001 no such device; 207000 notifies, or `DEVICE_USE_ONLY`, unsupported on this
    /// SoC; 207009 the device is out of notify ids.
    fn create_notify(&self, device: u32, flags: CreateFlags) -> Result<RawNotify, Self::Error>;

    /// Drops this process's reference. The id is released when the last holder (owner or
    /// importer, in any process) has destroyed it and its queued tasks have run.
    ///
    /// Codes: 107017 stale or unknown handle.
    fn destroy_notify(&self, notify: RawNotify) -> Result<(), Self::Error>;

    /// Id, devices, state and flags of a handle.
    ///
    /// Codes: 107017.
    fn notify_info(&self, notify: RawNotify) -> Result<NotifyInfo, Self::Error>;

    /// Exports the notify and returns its key.
    ///
    /// Codes: 207000 SoC without IPC; 107017; 507000 already exported, or imported.
    fn export_key(&self, notify: RawNotify, flags: ExportFlags) -> Result<ExportKey, Self::Error>;

    /// Adds PIDs (on this server) to the whitelist. Repeated calls add; a PID already listed
    /// (or named twice) counts once.
    ///
    /// Codes: 207000 SoC without IPC; 107017; 107000 `pids` empty or not exported; 207006
    /// exported without PID validation, or an imported handle; 207012 more than 64 in total
    /// (a call naming more than 64 PIDs is refused whole, duplicates or not, before any of
    /// them is looked at).
    fn set_import_pids(&self, notify: RawNotify, pids: &[i32]) -> Result<(), Self::Error>;

    /// Adds (server, PID) entries to the whitelist (SuperPod). Applied entries stay when a
    /// later one fails.
    ///
    /// Codes: 107000 `entries` empty; 107017; 207000 SoC without inter-server support; then as
    /// [`set_import_pids`](Self::set_import_pids).
    fn set_import_server_pids(
        &self,
        notify: RawNotify,
        entries: &[ServerPid],
    ) -> Result<(), Self::Error>;

    /// Imports the notify of a parsed key onto `device`: the one import a backend implements
    /// (the typed API's `Device::import`, and the C library, which parses the caller's text
    /// once at its boundary, call it; [`import_by_key`](Self::import_by_key) parses text and
    /// comes here).
    ///
    /// Codes: 207000 SoC without IPC; 107001 no such device; 107000 a key that is not this
    /// backend's; 107017 the key's notify no longer exists; 207006 not whitelisted. An import
    /// on another device than the owner's enables peer access between the two itself.
    fn import_key(
        &self,
        device: u32,
        key: &ExportKey,
        flags: ImportFlags,
    ) -> Result<RawNotify, Self::Error>;

    /// [`import_key`](Self::import_key) for the text of a key nobody has parsed (read from a
    /// pipe or a file, say). The default parses it here, once; a malformed key is 107000,
    /// after the checks an import makes before it reads the key (SPEC: SoC without IPC →
    /// 207000, then no such device → 107001). A backend that hands text on to a runtime of
    /// its own (the driver) overrides it.
    fn import_by_key(
        &self,
        device: u32,
        key: &str,
        flags: ImportFlags,
    ) -> Result<RawNotify, Self::Error> {
        let kind = match ExportKey::parse(key.as_bytes()) {
            Ok(k) => return self.import_key(device, &k, flags),
            Err(kind) => kind,
        };
        let soc = self.soc();
        if !soc.has(Feature::Ipc) {
            return Err(Self::Error::with_message(
                Error::FeatureNotSupport,
                format_args!(
                    "importing a notify (IPC) is not supported on {}",
                    soc.name()
                ),
            ));
        }
        let devices = self.device_count();
        if device >= devices {
            return Err(Self::Error::with_message(
                Error::InvalidDeviceId,
                format_args!(
                    "device {device} does not exist ({devices} devices: 0 to {})",
                    devices.saturating_sub(1)
                ),
            ));
        }
        Err(Self::Error::with_message(
            kind,
            format_args!(
                "malformed export key ({} bytes): expected the 64 characters \
                 aclrtNotifyGetExportKey wrote",
                key.len()
            ),
        ))
    }

    /// Whether `device` can access `peer` (`aclrtDeviceCanAccessPeer`).
    ///
    /// Codes: 107001.
    fn can_access_peer(&self, device: u32, peer: u32) -> Result<bool, Self::Error>;

    /// Enables access from `device` to `peer` (`aclrtDeviceEnablePeerAccess`).
    ///
    /// Codes: 107001; 100000 `device == peer` (CANN's ACL layer refuses it).
    fn enable_peer_access(&self, device: u32, peer: u32) -> Result<(), Self::Error>;
}

/// Stream operations: tasks that run in order on a device stream.
pub trait StreamOps: Backend {
    /// Creates a stream on `device`.
    ///
    /// Codes: 107001; 207005 out of streams.
    fn create_stream(&self, device: u32) -> Result<RawStream, Self::Error>;

    /// The device's default stream (what a NULL stream means in C).
    ///
    /// Codes: 107001.
    fn default_stream(&self, device: u32) -> Result<RawStream, Self::Error>;

    /// The device a stream belongs to.
    ///
    /// Codes: 107017.
    fn stream_device(&self, stream: RawStream) -> Result<u32, Self::Error>;

    /// Destroys a stream (not the default stream).
    ///
    /// Codes: 107017 (also for a default stream).
    fn destroy_stream(&self, stream: RawStream, mode: StreamDestroy) -> Result<(), Self::Error>;

    /// Enqueues a record: when the stream reaches it, the flag becomes 1 (or one waiter is
    /// released). Returns once enqueued.
    ///
    /// Codes: 107017 bad notify or stream; 507002 the stream's task queue stayed full (a
    /// backend that bounds the wait for room, as the simulator does).
    fn record(&self, notify: RawNotify, stream: RawStream) -> Result<(), Self::Error>;

    /// Enqueues a wait-and-reset: when the stream reaches it, the stream stalls until the flag
    /// is 1, then resets it. A timeout is reported by the next synchronize (107020).
    ///
    /// Codes: 107017 bad notify or stream; 107000 the stream's device is not the owner's
    /// device; 507002 the stream's task queue stayed full.
    fn wait_and_reset(
        &self,
        notify: RawNotify,
        stream: RawStream,
        timeout: Timeout,
    ) -> Result<(), Self::Error>;

    /// Resets each notify to 0, in order; stops at the first failure (earlier ones stay reset).
    ///
    /// Codes: 107000 empty; 207000 SoC without batch reset; 107017; 507009 an imported notify.
    fn batch_reset(&self, notifies: &[RawNotify]) -> Result<(), Self::Error>;

    /// Waits until every task enqueued so far has run.
    ///
    /// Codes: 107017; 107020 a wait on this stream timed out since the last synchronize
    /// (reported once); 507046 `wait` expired first.
    fn synchronize(&self, stream: RawStream, wait: SyncWait) -> Result<(), Self::Error>;

    /// Whether every task enqueued so far has run.
    ///
    /// Codes: 107017.
    fn query(&self, stream: RawStream) -> Result<StreamStatus, Self::Error>;

    /// Enqueues a host function; it runs when the stream reaches it.
    ///
    /// Codes: 107017; 507002 the stream's task queue stayed full.
    fn launch_host_func(&self, stream: RawStream, call: HostCall) -> Result<(), Self::Error>;

    /// Sets the process default wait timeout in seconds (0 = forever), used by waits whose
    /// timeout is [`Timeout::ProcessDefault`].
    fn set_op_wait_timeout(&self, seconds: u32) -> Result<(), Self::Error>;
}

/// Beyond CANN's C API: host-side waits on a notify and resource budgets.
pub trait HostOps: NotifyResources {
    /// Blocks the calling thread until the notify is recorded, then resets it (consumes the
    /// record exactly as a stream wait would).
    ///
    /// Codes: 107017; 107000 not the owner's device; 107019 `timeout` expired.
    fn host_wait(&self, notify: RawNotify, timeout: Duration) -> Result<(), Self::Error>;

    /// Consumes the record if the flag is set: `Ok(true)` if it was (and is now reset),
    /// `Ok(false)` if not. Never blocks.
    ///
    /// Codes: 107017; 107000 not the owner's device.
    fn try_consume(&self, notify: RawNotify) -> Result<bool, Self::Error>;

    /// How many notify ids `device` has left, across every process of the machine. Ids that
    /// only dead processes hold count as left where the backend reclaims them (the simulator
    /// drops dead processes' references first).
    ///
    /// Codes: 107001; 207000 notifies unsupported.
    fn notifies_free(&self, device: u32) -> Result<u32, Self::Error>;
}

/// Count notifies (SPEC §6, Ascend 950 family): a 32-bit counter per id, recorded with a mode
/// (set, add, bit-or, bit-and) and waited on with a comparison. Process-local (no export);
/// ids come from a per-device pool of their own ([`crate::cnt::max_cnt_notifies`]).
///
/// Every method answers 207000 on a SoC without count notifies, before looking at its
/// arguments.
pub trait CntNotifyOps: StreamOps {
    /// Creates a count notify (count 0) on `device`.
    ///
    /// Codes: 207000; 107001 no such device; 207009 the device is out of count-notify ids.
    fn cnt_create(&self, device: u32) -> Result<RawCntNotify, Self::Error>;

    /// Destroys it. Tasks already queued that use it still run; the id is released after them.
    ///
    /// Codes: 207000; 107017 stale or unknown handle.
    fn cnt_destroy(&self, cnt: RawCntNotify) -> Result<(), Self::Error>;

    /// Its id (`aclrtCntNotifyGetId`).
    ///
    /// Codes: 207000; 107017.
    fn cnt_id(&self, cnt: RawCntNotify) -> Result<u32, Self::Error>;

    /// Enqueues a record: when the stream reaches it, `record` is applied to the count and
    /// every wait whose condition now holds is released.
    ///
    /// Codes: 207000; 107017 bad count notify or stream.
    fn cnt_record(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        record: CntRecord,
    ) -> Result<(), Self::Error>;

    /// Enqueues a wait: when the stream reaches it, the stream stalls until the condition
    /// holds (then clears the count if asked). A timeout is reported by the next synchronize
    /// (107020).
    ///
    /// Codes: 207000; 107017 bad count notify or stream; 107000 the stream is on another
    /// device than the count notify.
    fn cnt_wait(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        wait: CntWait,
    ) -> Result<(), Self::Error>;

    /// Enqueues a reset (a record of `SET 0`).
    ///
    /// Codes: 207000; 107017.
    fn cnt_reset(&self, cnt: RawCntNotify, stream: RawStream) -> Result<(), Self::Error>;

    /// Beyond CANN: how many count-notify ids `device` has left, across every process of the
    /// machine.
    ///
    /// Codes: 207000; 107001.
    fn cnt_notifies_free(&self, device: u32) -> Result<u32, Self::Error>;
}

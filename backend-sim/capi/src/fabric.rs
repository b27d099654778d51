//! The V2 shareable-handle functions (`acl/acl_rt.h`): `aclrtMemExportToShareableHandleV2`,
//! `aclrtMemSetPidToShareableHandleV2` and `aclrtMemImportFromShareableHandleV2`, whose
//! `shareType` picks the handle: `ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT`, the 64-bit handle of
//! the V1 functions (this server, [`crate::vmm`]), or `ACL_MEM_SHARE_HANDLE_TYPE_FABRIC`, a
//! 128-byte `aclrtMemFabricHandle` for processes of any server of the SuperPod
//! ([`acl_notify_sim::mem::fabric`]).
//!
//! Check order as in CANN (hicann/runtime `src/acl/aclrt_impl/memory.cpp`
//! `aclrtMem*ShareableHandleV2Impl`, `src/runtime/api/impl/api_error.cc` and `api_impl.cc`
//! `ExportToShareableHandleV2` / `ImportFromShareableHandleV2` / `SetPidToShareableHandleV2`):
//! the ACL layer's NULL checks, `pidNum` 0 and an import's non-zero flags (100000), an
//! import's current device (107002); the runtime's share type (107000 unknown) and an
//! export's flags above 1 (107000); for FABRIC, an export's current context (107002), then
//! the server's support for an export or an import (207000 off Atlas A3) before the handle
//! is read; then the driver's checks of the handle (107000 not one, 107017 not live, ...).
//! `aclrtMemSetPidToShareableHandleV2` reads the handle without asking the server id.

use std::ffi::c_void;

use acl_notify_core::Error;
use acl_notify_sim::mem::fabric::{FABRIC_HANDLE_LEN, FabricHandle};

use crate::errmsg::{CallError, null_arg, reserved_flags};
use crate::ffi::{Out, aclError, api};
use crate::runtime::Runtime;
use crate::session::runtime;
use crate::vmm::{backend, export, import, set_pids};

/// `aclrtMemSharedHandleType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Share {
    /// `ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT` (1): a `uint64_t`.
    Default,
    /// `ACL_MEM_SHARE_HANDLE_TYPE_FABRIC` (2): an `aclrtMemFabricHandle`.
    Fabric,
}

/// The runtime's check of a V2 share type: 107000 for any other value.
fn share_type(t: u32) -> Result<Share, CallError> {
    match t {
        1 => Ok(Share::Default),
        2 => Ok(Share::Fabric),
        t => Err(CallError::new(
            Error::ParamInvalid,
            format!("shareType {t}: expected ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT (1) or _FABRIC (2)"),
        )),
    }
}

/// 207000 off Atlas A3, before a FABRIC export or import looks at its handle: CANN's runtime
/// asks the device's server id first (hicann/runtime `src/runtime/api/impl/api_impl.cc`,
/// `ApiImpl::ExportToShareableHandleV2` after its current-context check,
/// `ImportFromShareableHandleV2`), its driver reads the handle after.
fn fabric_supported(rt: &Runtime, what: &str) -> Result<(), CallError> {
    rt.backend()
        .require_ipc_memory_inter_server(&format!("{what} (ACL_MEM_SHARE_HANDLE_TYPE_FABRIC)"))
        .map_err(backend)
}

/// The FABRIC handle at `p`, checked.
///
/// # Safety
///
/// `p` is non-NULL and readable for 128 bytes.
unsafe fn fabric_at(p: *const c_void) -> Result<FabricHandle, CallError> {
    // SAFETY: by the caller's contract.
    let b = unsafe { p.cast::<[u8; FABRIC_HANDLE_LEN]>().read_unaligned() };
    FabricHandle::from_bytes(&b).map_err(backend)
}

/// `aclError aclrtMemExportToShareableHandleV2(aclrtDrvMemHandle handle, uint64_t flags,
/// aclrtMemSharedHandleType shareType, void *shareableHandle)`: with
/// `ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT`, `aclrtMemExportToShareableHandle` writing the
/// `uint64_t` at `shareableHandle`; with `_FABRIC`, the export for processes of any server,
/// an `aclrtMemFabricHandle` written there.
///
/// Codes: 100000 handle or shareableHandle NULL; 107000 a share type that is neither, flags
/// above 1; 207000 `_FABRIC` off Ascend910_93; then as `aclrtMemExportToShareableHandle`
/// (507022 the cluster unreachable, for `_FABRIC`).
///
/// # Safety
///
/// `shareable_handle` is NULL or writable for a `uint64_t` (DEFAULT) or an
/// `aclrtMemFabricHandle` (FABRIC).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemExportToShareableHandleV2(
    handle: *mut c_void,
    flags: u64,
    share: u32,
    shareable_handle: *mut c_void,
) -> aclError {
    // SAFETY: NULL or writable as the share type says, by the caller's contract.
    let out = unsafe { Out::new(shareable_handle) };
    api("aclrtMemExportToShareableHandleV2", || {
        if handle.is_null() {
            return Err(null_arg("handle"));
        }
        let out = out.check(|| null_arg("shareableHandle"))?;
        runtime()?;
        match share_type(share)? {
            Share::Default => {
                let s = export(handle, flags, |_| Ok(()), acl_notify_sim::Sim::vmm_export)?;
                // SAFETY: DEFAULT: a `uint64_t`, by the caller's contract.
                unsafe { out.sized(size_of::<u64>()) }.put_at(0, s);
            }
            Share::Fabric => {
                // The runtime's FABRIC checks come before the handle's: a current context,
                // then the server's support.
                let fabric_first = |rt: &Runtime| {
                    rt.current_device()?;
                    fabric_supported(rt, "exporting physical memory across servers")
                };
                let f = export(
                    handle,
                    flags,
                    fabric_first,
                    acl_notify_sim::Sim::vmm_export_fabric,
                )?;
                // SAFETY: FABRIC: an `aclrtMemFabricHandle`, by the caller's contract.
                unsafe { out.sized(FABRIC_HANDLE_LEN) }.put_slice(&f.to_bytes());
            }
        }
        Ok(())
    })
}

/// `aclError aclrtMemSetPidToShareableHandleV2(void *shareableHandle,
/// aclrtMemSharedHandleType shareType, int32_t *pid, size_t pidNum)`: with
/// `ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT`, `aclrtMemSetPidToShareableHandle` of the `uint64_t`
/// at `shareableHandle`; with `_FABRIC`, the PIDs may import the export from any server.
///
/// Codes: 100000 shareableHandle or pid NULL, pidNum 0; 107000 an unknown share type, a
/// FABRIC handle that is not one or names no live export; 207006 another server's handle,
/// not the exporter, exported without PID validation; 207000 `_FABRIC` off Ascend910_93;
/// then as `aclrtMemSetPidToShareableHandle`.
///
/// # Safety
///
/// `shareable_handle` is NULL or readable for a `uint64_t` (DEFAULT) or an
/// `aclrtMemFabricHandle` (FABRIC); `pid` as in the V1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandleV2(
    shareable_handle: *mut c_void,
    share: u32,
    pid: *mut i32,
    pid_num: usize,
) -> aclError {
    api("aclrtMemSetPidToShareableHandleV2", || {
        if shareable_handle.is_null() {
            return Err(null_arg("shareableHandle"));
        }
        if pid.is_null() {
            return Err(null_arg("pid"));
        }
        if pid_num == 0 {
            return Err(CallError::new(Error::InvalidParam, "pidNum is 0"));
        }
        runtime()?;
        match share_type(share)? {
            Share::Default => {
                // SAFETY: non-NULL, readable for a `uint64_t` by the caller's contract.
                let s = unsafe { shareable_handle.cast::<u64>().read_unaligned() };
                // SAFETY: non-NULL, `pid_num` readable by the caller's contract.
                unsafe { set_pids(pid, pid_num, |sim, p| sim.vmm_share_pids(s, p)) }
            }
            Share::Fabric => {
                // SAFETY: non-NULL, readable for an `aclrtMemFabricHandle`.
                let f = unsafe { fabric_at(shareable_handle) }?;
                // SAFETY: as above.
                unsafe { set_pids(pid, pid_num, |sim, p| sim.vmm_share_pids_fabric(&f, p)) }
            }
        }
    })
}

/// `aclError aclrtMemImportFromShareableHandleV2(void *shareableHandle,
/// aclrtMemSharedHandleType shareType, uint64_t flags, aclrtDrvMemHandle *handle)`: with
/// `ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT`, `aclrtMemImportFromShareableHandle` of the `uint64_t`
/// at `shareableHandle` onto the current device; with `_FABRIC`, the physical allocation a
/// process of any server exported (of another host in cluster mode: a remote mapping, whose
/// copies go to its owner through the cluster).
///
/// Codes: 100000 shareableHandle or handle NULL, flags not 0; 107002 no current device;
/// 107000 an unknown share type, a FABRIC handle that is not one, names no live export (freed,
/// its owner dead, an earlier job's) or this process's own; 207006 not whitelisted; 207000
/// `_FABRIC` off Ascend910_93; 507022 the cluster unreachable; then as the V1.
///
/// # Safety
///
/// `shareable_handle` is NULL or readable for a `uint64_t` (DEFAULT) or an
/// `aclrtMemFabricHandle` (FABRIC); `handle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemImportFromShareableHandleV2(
    shareable_handle: *mut c_void,
    share: u32,
    flags: u64,
    handle: *mut *mut c_void,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let handle = unsafe { Out::new(handle) };
    api("aclrtMemImportFromShareableHandleV2", || {
        if shareable_handle.is_null() {
            return Err(null_arg("shareableHandle"));
        }
        let handle = handle.check(|| null_arg("handle"))?;
        reserved_flags(flags)?;
        let rt = runtime()?;
        let device = rt.current_device()?;
        match share_type(share)? {
            Share::Default => {
                // SAFETY: non-NULL, readable for a `uint64_t` by the caller's contract.
                let s = unsafe { shareable_handle.cast::<u64>().read_unaligned() };
                import(&rt, device, handle, |sim, d| sim.vmm_import(s, d))
            }
            Share::Fabric => {
                fabric_supported(&rt, "importing physical memory of another server")?;
                // SAFETY: non-NULL, readable for an `aclrtMemFabricHandle`.
                let f = unsafe { fabric_at(shareable_handle) }?;
                import(&rt, device, handle, |sim, d| sim.vmm_import_fabric(&f, d))
            }
        }
    })
}

//! The exported IPC memory functions (`acl/acl_rt.h`): `aclrtIpcMemGetExportKey`,
//! `aclrtIpcMemSetImportPid`, `aclrtIpcMemImportPidInterServer`, `aclrtIpcMemImportByKey`,
//! `aclrtIpcMemClose`, `aclrtIpcMemSetAttr`, on the simulator's IPC memory
//! ([`acl_notify_sim::mem::ipc`]).
//!
//! Check order, from hicann/runtime `src/acl/aclrt_impl/memory.cpp` (the ACL layer's NULL
//! checks → 100000), `src/runtime/api/impl/api_error.cc` (the runtime's argument checks →
//! 107000: size and len not 0, export flags ≤ 1, import flags ≤ 1, a whitelist of at least
//! one PID, set-attr type and value) and `api_c_standard_soc.cc` (the inter-server call's
//! NULL and count checks, 107000, before anything else); then 107002 no current
//! device; 207000 on a SoC without IPC memory (`aclrtIpcMemClose` checks this before the
//! device); a malformed key is 107000.

use std::ffi::{c_char, c_void};

use acl_notify_core::key::{ExportKey, KEY_BUF_LEN};
use acl_notify_core::{Error, ServerPid};

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::ipc_args::{ServerPids, key_text, whitelist_pids, write_key};
use crate::ffi::{Out, OutArray, aclError, aclrtServerPid, api};
use crate::session::runtime;

/// The key text at `key` (at most 65 bytes read), parsed.
///
/// # Safety
///
/// `key` is non-NULL and NUL-terminated.
unsafe fn key_at(key: *const c_char) -> Result<ExportKey, CallError> {
    // SAFETY: by the caller's contract.
    let text =
        unsafe { key_text(key) }.ok_or_else(|| param("the key is longer than 64 characters"))?;
    ExportKey::parse(text).map_err(|e| {
        CallError::new(
            e,
            format!(
                "malformed IPC memory key ({} bytes): expected the 64 characters \
                 aclrtIpcMemGetExportKey wrote",
                text.len()
            ),
        )
    })
}

fn backend(e: acl_notify_sim::SimError) -> CallError {
    CallError::backend(e)
}

/// `aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len,
/// uint64_t flags)`: exports `[devPtr, devPtr + size)` of an allocation of this process and
/// writes its key (64 characters and a NUL).
///
/// Codes: 100000 devPtr/key NULL; 107000 size 0, len 0, flags > 1; 107002; 207000;
/// 107000 len < 65 or a range outside this process's live allocations.
///
/// # Safety
///
/// `key` is NULL or valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
    dev_ptr: *mut c_void,
    size: usize,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    // SAFETY: NULL or writable for `len` bytes, by the caller's contract.
    let key = unsafe { OutArray::new(key, len) };
    api("aclrtIpcMemGetExportKey", || {
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        let key = key.check(|| null_arg("key"))?;
        let rt = runtime()?;
        if size == 0 {
            return Err(param("size is 0"));
        }
        if len == 0 {
            return Err(param("len is 0"));
        }
        if flags > 1 {
            return Err(param(format!(
                "flags {flags:#x}: only ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT (0) and \
                 _DISABLE_PID_VALIDATION (1) exist"
            )));
        }
        rt.current_device()?;
        let sim = rt.backend();
        sim.require_ipc_memory("exporting device memory (IPC)")
            .map_err(backend)?;
        if len < KEY_BUF_LEN {
            return Err(param(format!(
                "len {len} cannot hold a key: at least {KEY_BUF_LEN} bytes"
            )));
        }
        let k = sim
            .ipc_mem_export(dev_ptr.addr(), size, flags == 1)
            .map_err(backend)?;
        write_key(key, &k)
    })
}

/// `aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num)`.
///
/// Codes: 100000 key/pid NULL; 107000 num 0 (or above `INT32_MAX`); 107002; 207000;
/// 107000 malformed key or no live export; 207006 not the owner, or exported without PID
/// validation; 207012 more than 64.
///
/// # Safety
///
/// `key` is NULL or NUL-terminated; `pid` is NULL or valid for reading `num` `int32_t`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemSetImportPid(
    key: *const c_char,
    pid: *mut i32,
    num: usize,
) -> aclError {
    api("aclrtIpcMemSetImportPid", || {
        if key.is_null() {
            return Err(null_arg("key"));
        }
        if pid.is_null() {
            return Err(null_arg("pid"));
        }
        let rt = runtime()?;
        if num == 0 || num > i32::MAX as usize {
            return Err(param(format!("num {num}: expected 1 to {}", i32::MAX)));
        }
        rt.current_device()?;
        let sim = rt.backend();
        sim.require_ipc_memory("whitelisting importers of device memory (IPC)")
            .map_err(backend)?;
        // SAFETY: non-NULL, NUL-terminated by the caller's contract.
        let k = unsafe { key_at(key) }?;
        // SAFETY: non-NULL; the caller guarantees `num` readable `int32_t`s.
        let pids = unsafe { whitelist_pids(pid, num) }?;
        sim.ipc_mem_set_pids(&k, pids).map_err(backend)
    })
}

/// `aclError aclrtIpcMemImportPidInterServer(const char *key, aclrtServerPid *serverPids,
/// size_t num)`: whitelists, per entry, `num` PIDs importing on the device of SuperPOD device
/// id `sdid` (Ascend910_93).
///
/// Codes: 107000 key/serverPids NULL, num 0, an entry's pid NULL; 107002; 207000; 107000 an
/// sdid that names no device (nothing is added); as `aclrtIpcMemSetImportPid`.
///
/// # Safety
///
/// `key` is NULL or NUL-terminated; `server_pids` is NULL or valid for reading `num` entries,
/// each with `num` readable PIDs at a non-NULL `pid`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemImportPidInterServer(
    key: *const c_char,
    server_pids: *mut aclrtServerPid,
    num: usize,
) -> aclError {
    api("aclrtIpcMemImportPidInterServer", || {
        // SAFETY: the caller guarantees `num` readable entries at a non-NULL `server_pids`.
        let entries = unsafe { ServerPids::new(key.cast(), "key", server_pids, num) }?;
        for (i, e) in (0..num).filter_map(|i| Some((i, entries.entry(i)?))) {
            if e.pid.is_null() {
                return Err(param(format!("serverPids[{i}].pid is NULL")));
            }
        }
        let rt = runtime()?;
        rt.current_device()?;
        let sim = rt.backend();
        sim.require_ipc_memory_inter_server("inter-server whitelisting of device memory")
            .map_err(backend)?;
        // SAFETY: non-NULL, NUL-terminated by the caller's contract.
        let k = unsafe { key_at(key) }?;
        let mut all = Vec::new();
        for e in (0..num).filter_map(|i| entries.entry(i)) {
            let n = e.num.min(acl_notify_core::whitelist::MAX_ENTRIES + 1);
            for j in 0..n {
                all.push(ServerPid {
                    sdid: e.sdid,
                    // SAFETY: j < e.num, and the caller guarantees e.num readable PIDs.
                    pid: unsafe { e.pid.add(j).read_unaligned() },
                });
            }
            if all.len() > acl_notify_core::whitelist::MAX_ENTRIES {
                return Err(CallError::new(
                    Error::OverLimit,
                    "more than 64 (server, PID) entries: a whitelist holds at most 64",
                ));
            }
        }
        sim.ipc_mem_set_server_pids(&k, &all).map_err(backend)
    })
}

/// `aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags)`: maps
/// the exported memory into this process for the current device.
///
/// Codes: 100000 devPtr/key NULL; 107000 flags > 1; 107002; 207000; 107000 malformed
/// key, no live export, imported already, or the exporting process itself; 207006 not
/// whitelisted or no peer access.
///
/// # Safety
///
/// `dev_ptr` is NULL or writable; `key` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemImportByKey(
    dev_ptr: *mut *mut c_void,
    key: *const c_char,
    flags: u64,
) -> aclError {
    api("aclrtIpcMemImportByKey", || {
        // SAFETY: `dev_ptr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(dev_ptr) }.write(
            || null_arg("devPtr"),
            || {
                if key.is_null() {
                    return Err(null_arg("key"));
                }
                let rt = runtime()?;
                if flags > 1 {
                    return Err(param(format!(
                        "flags {flags:#x}: only ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT (0) and \
                 _ENABLE_PEER_ACCESS (1) exist"
                    )));
                }
                let device = rt.current_device()?;
                let sim = rt.backend();
                sim.require_ipc_memory("importing device memory (IPC)")
                    .map_err(backend)?;
                // SAFETY: non-NULL, NUL-terminated by the caller's contract.
                let k = unsafe { key_at(key) }?;
                let p = sim
                    .ipc_mem_import(device, &k, flags == 1)
                    .map_err(backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(p))
            },
        )
    })
}

/// `aclError aclrtIpcMemClose(const char *key)`: an importer unmaps; the owner withdraws the
/// export.
///
/// Codes: 100000 NULL; 207000; 107002; 107000 malformed key, or one this process
/// neither imported nor exported.
///
/// # Safety
///
/// `key` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> aclError {
    api("aclrtIpcMemClose", || {
        if key.is_null() {
            return Err(null_arg("key"));
        }
        let rt = runtime()?;
        let sim = rt.backend();
        sim.require_ipc_memory("closing IPC memory")
            .map_err(backend)?;
        rt.current_device()?;
        // SAFETY: non-NULL, NUL-terminated by the caller's contract.
        let k = unsafe { key_at(key) }?;
        sim.ipc_mem_close(&k).map_err(backend)
    })
}

/// `aclError aclrtIpcMemSetAttr(const char *key, aclrtIpcMemAttrType type, uint64_t attr)`:
/// the die-to-die link of an export (Ascend910_93); SIO and HCCS accepted and recorded
/// nowhere (the simulator has one link). See `Sim::ipc_mem_set_attr` for CANN's checks.
///
/// Codes: 107000 key NULL, type ≠ ACL_RT_IPC_MEM_ATTR_ACCESS_LINK, attr > 3; 107002;
/// 207000 off Ascend910_93; 107000 malformed key or no live export; 207021 attr 2 or 3 (the
/// UB paths, Ascend950's).
///
/// # Safety
///
/// `key` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtIpcMemSetAttr(key: *const c_char, kind: u32, attr: u64) -> aclError {
    api("aclrtIpcMemSetAttr", || {
        if key.is_null() {
            return Err(param("`key` is NULL"));
        }
        acl_notify_sim::mem::ipc::check_attr_args(kind, attr).map_err(backend)?;
        let rt = runtime()?;
        rt.current_device()?;
        let sim = rt.backend();
        sim.require_ipc_memory_inter_server("setting IPC memory attributes")
            .map_err(backend)?;
        // SAFETY: non-NULL, NUL-terminated by the caller's contract.
        let k = unsafe { key_at(key) }?;
        sim.ipc_mem_set_attr(&k, kind, attr).map_err(backend)
    })
}

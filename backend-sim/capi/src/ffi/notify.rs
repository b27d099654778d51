//! The exported notify functions (SPEC §3): create, destroy, record, wait, id, batch reset,
//! and the IPC calls (export key, whitelists, import by key).

use std::ffi::c_char;

use acl_notify_core::{CreateFlags, ServerPid};

use super::ipc_args::{ServerPids, key_text, pids_at, write_key};
use super::{Out, OutArray, aclError, aclrtNotify, aclrtServerPid, aclrtStream, api, handle};
use crate::errmsg::{CallError, null_arg, param};
use crate::session::{runtime, with_runtime};

/// `aclError aclrtCreateNotify(aclrtNotify *notify, uint64_t flag)`.
///
/// Codes: 100000; 107000 flag ∉ {0, 1}; 107002; 207000; 207009.
///
/// # Safety
///
/// `notify` is NULL or valid for writing an `aclrtNotify`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError {
    api("aclrtCreateNotify", || {
        // SAFETY: `notify` is NULL or writable, by the caller's contract.
        unsafe { Out::new(notify) }.handle(
            || null_arg("notify"),
            || {
                let flags = CreateFlags::from_raw(flag).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "flag {flag:#x} is neither ACL_NOTIFY_DEFAULT nor ACL_NOTIFY_DEVICE_USE_ONLY"
                ),
            )
        })?;
                let h = with_runtime(|rt| rt.create_notify(flags))?;
                Ok(h)
            },
        )
    })
}

/// `aclError aclrtDestroyNotify(aclrtNotify notify)`.
///
/// Codes: 100000; 107017.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError {
    api("aclrtDestroyNotify", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        with_runtime(|rt| rt.destroy_notify(handle(notify)))
    })
}

/// `aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream)`.
///
/// Codes: 100000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError {
    api("aclrtRecordNotify", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        runtime()?.record(handle(notify), handle(stream))
    })
}

/// `aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t timeout)`.
///
/// Codes: 100000; 107017; 107002; 107003; 107000 not the owner's device.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtWaitAndResetNotify(
    notify: aclrtNotify,
    stream: aclrtStream,
    timeout: u32,
) -> aclError {
    api("aclrtWaitAndResetNotify", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        runtime()?.wait_and_reset(handle(notify), handle(stream), timeout)
    })
}

/// `aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t *notifyId)`.
///
/// Codes: 100000; 107017.
///
/// # Safety
///
/// `notify_id` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetNotifyId(notify: aclrtNotify, notify_id: *mut u32) -> aclError {
    api("aclrtGetNotifyId", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        // SAFETY: `notify_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(notify_id) }.write(
            || null_arg("notifyId"),
            || with_runtime(|rt| rt.notify_id(handle(notify))),
        )
    })
}

/// `aclError aclrtNotifyBatchReset(aclrtNotify *notifies, size_t num)`.
///
/// Codes: 100000; 107000 num 0; then per element: 207000; 107000 NULL; 107017; 507009.
///
/// # Safety
///
/// `notifies` is NULL or valid for reading `num` handles (elements after the first failing
/// one are not read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifyBatchReset(notifies: *mut aclrtNotify, num: usize) -> aclError {
    api("aclrtNotifyBatchReset", || {
        if notifies.is_null() {
            return Err(null_arg("notifies"));
        }
        if num == 0 {
            return Err(param("num is 0"));
        }
        with_runtime(|rt| {
            rt.batch_reset(num, |i| {
                // SAFETY: i < num, and the caller guarantees `num` readable elements.
                handle(unsafe { notifies.add(i).read_unaligned() })
            })
        })
    })
}

/// `aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len,
/// uint64_t flags)`: writes the NUL-terminated key (64 characters) to `key`.
///
/// Codes: 100000; 107017; 107000 len < 65; 207000; 107000 flags; 507000.
///
/// # Safety
///
/// `key` is NULL or valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifyGetExportKey(
    notify: aclrtNotify,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    // SAFETY: NULL or writable for `len` bytes, by the caller's contract.
    let key = unsafe { OutArray::new(key, len) };
    api("aclrtNotifyGetExportKey", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        let key = key.check(|| null_arg("key"))?;
        // The key goes from the backend's answer straight into the caller's buffer, inside
        // the session's closure: no copy of it is moved out through the layers in between.
        with_runtime(|rt| {
            // `export_key` checks len >= KEY_BUF_LEN.
            rt.export_key(handle(notify), len, flags, |k| write_key(key, k))
        })
    })
}

/// `aclError aclrtNotifySetImportPid(aclrtNotify notify, int32_t *pid, size_t num)`.
///
/// Codes: 100000; 207000; 107017; 107000 num 0, num > INT32_MAX or not exported;
/// 207006; 207012.
///
/// # Safety
///
/// `pid` is NULL or valid for reading `num` `int32_t`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifySetImportPid(
    notify: aclrtNotify,
    pid: *mut i32,
    num: usize,
) -> aclError {
    api("aclrtNotifySetImportPid", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        if pid.is_null() {
            return Err(null_arg("pid"));
        }
        with_runtime(|rt| {
            rt.set_import_pids(handle(notify), num, |take| {
                // SAFETY: non-NULL; `take <= num` (and at most 65, so in range for a slice),
                // and the caller guarantees `num` readable, initialised elements.
                unsafe { pids_at(pid, take) }
            })
        })
    })
}

/// `aclError aclrtNotifySetImportPidInterServer(aclrtNotify notify,
/// aclrtServerPid *serverPids, size_t num)`. No 100000 here: NULL arguments are 107000.
///
/// Codes: 107000 notify/serverPids NULL or num 0; 107017; per entry: 107000 pid NULL or
/// num ≠ 1; 207000; 107000 an sdid that names no device of the SuperPod (not a
/// `ACL_DEV_ATTR_SUPER_POD_DEVICE_ID` answer: a server id, say); then as
/// `aclrtNotifySetImportPid`.
///
/// # Safety
///
/// `server_pids` is NULL or valid for reading `num` entries, and each entry's `pid` is NULL or
/// valid for reading one `int32_t` (entries after the first failing one are not read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifySetImportPidInterServer(
    notify: aclrtNotify,
    server_pids: *mut aclrtServerPid,
    num: usize,
) -> aclError {
    api("aclrtNotifySetImportPidInterServer", || {
        // SAFETY: the caller guarantees `num` readable entries at a non-NULL `server_pids`.
        let entries = unsafe { ServerPids::new(notify.cast(), "notify", server_pids, num) }?;
        runtime()?.set_import_server_pids(handle(notify), &entries, |e| ServerPid {
            sdid: e.sdid,
            // SAFETY: the shape check saw a non-NULL `pid` with num == 1, which the caller
            // guarantees readable.
            pid: unsafe { e.pid.read_unaligned() },
        })
    })
}

/// `aclError aclrtNotifyImportByKey(aclrtNotify *notify, const char *key, uint64_t flags)`:
/// a handle, on the current device, to the notify another process exported.
///
/// Codes: 100000; 207000; 107000 flags; 107002; 107000 malformed key; 107017; 207006.
///
/// # Safety
///
/// `notify` is NULL or valid for writing an `aclrtNotify`; `key` is NULL or a NUL-terminated
/// string (at most 65 bytes of it are read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifyImportByKey(
    notify: *mut aclrtNotify,
    key: *const c_char,
    flags: u64,
) -> aclError {
    api("aclrtNotifyImportByKey", || {
        // SAFETY: `notify` is NULL or writable, by the caller's contract.
        unsafe { Out::new(notify) }.handle(
            || null_arg("notify"),
            || {
                if key.is_null() {
                    return Err(null_arg("key"));
                }
                // SAFETY: non-NULL, and the caller guarantees a NUL-terminated string.
                let text = unsafe { key_text(key) };
                let h = with_runtime(|rt| rt.import_by_key(text, flags))?;
                Ok(h)
            },
        )
    })
}

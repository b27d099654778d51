//! The C arguments the IPC calls share, notify IPC (`aclrtNotify*Key`, `*ImportPid*`) and
//! memory IPC (`aclrtIpcMem*`) alike: the key a caller passes in or gets back, a PID array,
//! and the `aclrtServerPid` array of an inter-server whitelist. Each is read here once, with
//! its checks, so the two families cannot drift apart.

use std::ffi::c_char;

use acl_notify_core::ExportKey;
use acl_notify_core::key::KEY_BUF_LEN;

use super::{CheckedArray, aclrtServerPid};
use crate::errmsg::{CallError, param};

/// The bytes of the C key string at `key`, without its NUL; `None` if no NUL comes within
/// [`KEY_BUF_LEN`] bytes (the key is then malformed: no key is longer than 64 characters).
///
/// # Safety
///
/// `key` is non-NULL and points to a NUL-terminated string, or to at least [`KEY_BUF_LEN`]
/// readable bytes; they stay unchanged for `'a`.
pub(crate) unsafe fn key_text<'a>(key: *const c_char) -> Option<&'a [u8]> {
    // SAFETY: by the caller's contract; `strnlen` stops at the NUL and reads at most
    // KEY_BUF_LEN bytes.
    let n = unsafe { libc::strnlen(key, KEY_BUF_LEN) };
    // SAFETY: the `n` bytes before the NUL are readable (strnlen just read them) and stay so
    // for `'a`; they are only read.
    (n < KEY_BUF_LEN).then(|| unsafe { std::slice::from_raw_parts(key.cast::<u8>(), n) })
}

/// Writes `k` (64 characters and a NUL) to the caller's key buffer (its `len`, which the
/// call has checked is at least [`KEY_BUF_LEN`]: a shorter one is a defect, refused by the
/// bound).
pub(crate) fn write_key(key: CheckedArray<c_char>, k: &ExportKey) -> Result<(), CallError> {
    let mut buf = [0u8; KEY_BUF_LEN];
    k.write_c(&mut buf)
        .map_err(|e| CallError::new(e, "key buffer"))?;
    key.put_slice(&buf.map(|b| b as c_char));
    Ok(())
}

/// The first `take` PIDs of a C caller's `int32_t` array (the callers read at most one more
/// than a whitelist holds, so that more is refused without reading it all).
///
/// # Safety
///
/// `pid` is non-NULL and valid for reading `take` initialised `int32_t`s (aligned as
/// `int32_t *` is in C), unchanged for `'a`.
pub(crate) unsafe fn pids_at<'a>(pid: *const i32, take: usize) -> &'a [i32] {
    // SAFETY: by the caller's contract.
    unsafe { std::slice::from_raw_parts(pid, take) }
}

/// The `num` PIDs of a whitelist call at `pid`; more than a whitelist holds is 207012,
/// refused without reading them.
///
/// # Safety
///
/// As [`pids_at`], for `num` `int32_t`s.
pub(crate) unsafe fn whitelist_pids<'a>(
    pid: *const i32,
    num: usize,
) -> Result<&'a [i32], crate::errmsg::CallError> {
    let take = num.min(acl_notify_core::whitelist::MAX_ENTRIES + 1);
    if num > take {
        return Err(crate::errmsg::CallError::new(
            acl_notify_core::Error::OverLimit,
            format!("{num} PIDs: a whitelist holds at most 64"),
        ));
    }
    // SAFETY: the caller's contract; `take <= num`.
    Ok(unsafe { pids_at(pid, take) })
}

/// The `aclrtServerPid` array of an inter-server whitelist call, its shared checks passed.
#[derive(Debug)]
pub(crate) struct ServerPids {
    at: *const aclrtServerPid,
    num: usize,
}

impl ServerPids {
    /// The array of `num` entries at `server_pids`, for a call whose other pointer argument
    /// (the notify, or the key) is `target`, named `target_name`. CANN checks these before
    /// anything else and answers 107000, not 100000, for a NULL (hicann/runtime
    /// `api_c_standard_soc.cc`): `target` NULL; `serverPids` NULL; `num` 0.
    ///
    /// # Safety
    ///
    /// `server_pids` is NULL or valid for reading `num` entries, unchanged during the call.
    pub(crate) unsafe fn new(
        target: *const (),
        target_name: &str,
        server_pids: *const aclrtServerPid,
        num: usize,
    ) -> Result<ServerPids, CallError> {
        if target.is_null() {
            return Err(param(format!("`{target_name}` is NULL")));
        }
        if server_pids.is_null() {
            return Err(param("`serverPids` is NULL"));
        }
        if num == 0 {
            return Err(param("num is 0"));
        }
        Ok(ServerPids {
            at: server_pids,
            num,
        })
    }

    /// Entries in the array.
    pub(crate) fn len(&self) -> usize {
        self.num
    }

    /// Entry `i`; `None` past the end.
    pub(crate) fn entry(&self, i: usize) -> Option<aclrtServerPid> {
        // SAFETY: i < num, and `new`'s caller guarantees `num` readable entries.
        (i < self.num).then(|| unsafe { self.at.add(i).read_unaligned() })
    }
}

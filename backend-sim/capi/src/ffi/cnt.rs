//! The exported count-notify functions (SPEC §6, `aclrtCntNotify*`).

use acl_notify_core::{CntRecord, CntWait};

use super::{
    Out, aclError, aclrtCntNotify, aclrtCntNotifyRecordInfo, aclrtCntNotifyWaitInfo, aclrtStream,
    api, handle,
};
use crate::errmsg::{CallError, null_arg, param};
use crate::session::runtime;

//
// Check order: NULL info → 100000 (the ACL layer); NULL count-notify handle or out-pointer →
// 107000 (the runtime layer, as in CANN); flag ≠ 0 or an unknown mode → 107000; then (the
// session started if need be) 207000 on a SoC without count notifies; 107017; and for stream
// calls 107017/107002/107003.

fn cnt_null(what: &str) -> CallError {
    param(format!("`{what}` is NULL"))
}

/// `aclError aclrtCntNotifyCreate(aclrtCntNotify *cntNotify, uint64_t flag)`: a count notify
/// (count 0) on the current device.
///
/// Codes: 107000 `cntNotify` NULL or flag ≠ 0; 207000; 107002; 207009.
///
/// # Safety
///
/// `cnt_notify` is NULL or valid for writing an `aclrtCntNotify`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyCreate(
    cnt_notify: *mut aclrtCntNotify,
    flag: u64,
) -> aclError {
    api("aclrtCntNotifyCreate", || {
        // SAFETY: `cnt_notify` is NULL or writable, by the caller's contract.
        unsafe { Out::new(cnt_notify) }.handle(
            || cnt_null("cntNotify"),
            || {
                if flag != 0 {
                    return Err(param(format!("flag {flag:#x} must be 0 (reserved)")));
                }
                let h = runtime()?.cnt_create()?;
                Ok(h)
            },
        )
    })
}

/// `aclError aclrtCntNotifyDestroy(aclrtCntNotify cntNotify)`. Queued tasks that use it still
/// run.
///
/// Codes: 107000 NULL; 207000; 107017.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCntNotifyDestroy(cnt_notify: aclrtCntNotify) -> aclError {
    api("aclrtCntNotifyDestroy", || {
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        runtime()?.cnt_destroy(handle(cnt_notify))
    })
}

/// `aclError aclrtCntNotifyRecord(aclrtCntNotify cntNotify, aclrtStream stream,
/// aclrtCntNotifyRecordInfo *info)`: when the stream reaches it, applies `info` to the count.
///
/// Codes: 100000 `info` NULL; 107000 `cntNotify` NULL or mode ∉ {0, 1, 2, 4}; 207000;
/// 107017; 107002; 107003.
///
/// # Safety
///
/// `info` is NULL or valid for reading an `aclrtCntNotifyRecordInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyRecord(
    cnt_notify: aclrtCntNotify,
    stream: aclrtStream,
    info: *mut aclrtCntNotifyRecordInfo,
) -> aclError {
    api("aclrtCntNotifyRecord", || {
        if info.is_null() {
            return Err(null_arg("info"));
        }
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        // SAFETY: non-NULL, and the caller guarantees one readable struct; any bytes are a
        // valid `CntRecordInfo` (two `u32`s).
        let raw = unsafe { info.read_unaligned() };
        let record = CntRecord::from_info(&raw).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "info->mode {} is not a record mode (SET_VALUE 0, ADD 1, BIT_OR 2, BIT_AND 4)",
                    raw.mode
                ),
            )
        })?;
        runtime()?.cnt_record(handle(cnt_notify), handle(stream), record)
    })
}

/// `aclError aclrtCntNotifyWaitWithTimeout(aclrtCntNotify cntNotify, aclrtStream stream,
/// aclrtCntNotifyWaitInfo *info)`: when the stream reaches it, stalls until the condition
/// holds (then clears the count if `info->isClear`). `info->timeout` in seconds, 0 = forever;
/// expiry is reported by the next synchronize (107020).
///
/// Codes: 100000 `info` NULL; 107000 `cntNotify` NULL or mode ≥ 5; 207000; 107017;
/// 107002; 107003; 107000 the stream is not on the count notify's device.
///
/// # Safety
///
/// `info` is NULL or valid for reading an `aclrtCntNotifyWaitInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyWaitWithTimeout(
    cnt_notify: aclrtCntNotify,
    stream: aclrtStream,
    info: *mut aclrtCntNotifyWaitInfo,
) -> aclError {
    api("aclrtCntNotifyWaitWithTimeout", || {
        if info.is_null() {
            return Err(null_arg("info"));
        }
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        // SAFETY: non-NULL, and the caller guarantees one readable struct; every field of
        // `CntWaitInfo` is an integer (`isClear` is read as a byte, not a Rust `bool`), so any
        // bytes are a valid value.
        let raw = unsafe { info.read_unaligned() };
        let wait = CntWait::from_info(&raw).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "info->mode {} is not a wait mode (LESS 0, EQUAL 1, BIGGER 2, \
                     BIGGER_OR_EQUAL 3, EQUAL_WITH_BITMASK 4)",
                    raw.mode
                ),
            )
        })?;
        runtime()?.cnt_wait(handle(cnt_notify), handle(stream), wait)
    })
}

/// `aclError aclrtCntNotifyReset(aclrtCntNotify cntNotify, aclrtStream stream)`: when the
/// stream reaches it, sets the count to 0.
///
/// Codes: 107000 NULL; 207000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCntNotifyReset(cnt_notify: aclrtCntNotify, stream: aclrtStream) -> aclError {
    api("aclrtCntNotifyReset", || {
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        runtime()?.cnt_record(handle(cnt_notify), handle(stream), CntRecord::set(0))
    })
}

/// `aclError aclrtCntNotifyGetId(aclrtCntNotify cntNotify, uint32_t *notifyId)`.
///
/// Codes: 107000 either argument NULL; 207000; 107017.
///
/// # Safety
///
/// `notify_id` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyGetId(
    cnt_notify: aclrtCntNotify,
    notify_id: *mut u32,
) -> aclError {
    api("aclrtCntNotifyGetId", || {
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        // SAFETY: `notify_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(notify_id) }.write(
            || cnt_null("notifyId"),
            || runtime()?.cnt_id(handle(cnt_notify)),
        )
    })
}

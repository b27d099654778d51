//! The simulator's exported extensions (`acl/aclnsim.h`): host-side waits, merged records,
//! budgets and the server id, beyond CANN's API.

use acl_notify_core::Backend;

use super::{Out, aclError, aclrtNotify, api, handle};
use crate::errmsg::null_arg;
use crate::session::runtime;

/// `aclError aclnsimNotifyHostWait(aclrtNotify notify, uint64_t timeoutUs)`: blocks the calling
/// thread until the notify is recorded, then resets it (consuming the record as a stream wait
/// would). `UINT64_MAX` waits forever.
///
/// Codes: 100000; 107017; 107002; 107000 the current device is not the owner's; 107019
/// timed out.
#[unsafe(no_mangle)]
pub extern "C" fn aclnsimNotifyHostWait(notify: aclrtNotify, timeout_us: u64) -> aclError {
    api("aclnsimNotifyHostWait", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        let t = (timeout_us != u64::MAX).then(|| std::time::Duration::from_micros(timeout_us));
        runtime()?.host_wait(handle(notify), t)
    })
}

/// `aclError aclnsimNotifyTryConsume(aclrtNotify notify, int32_t *consumed)`: if the flag is
/// set, resets it and writes 1, else writes 0. Never blocks.
///
/// Codes: 100000; 107017; 107002; 107000 the current device is not the owner's.
///
/// # Safety
///
/// `consumed` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimNotifyTryConsume(
    notify: aclrtNotify,
    consumed: *mut i32,
) -> aclError {
    api("aclnsimNotifyTryConsume", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        // SAFETY: `consumed` is NULL or writable, by the caller's contract.
        unsafe { Out::new(consumed) }.write(
            || null_arg("consumed"),
            || {
                let yes = runtime()?.try_consume(handle(notify))?;
                Ok(i32::from(yes))
            },
        )
    })
}

/// `aclError aclnsimNotifyGetMergedRecords(aclrtNotify notify, uint32_t *sinceLastWait,
/// uint32_t *total)`: how many records of the notify landed on an already-set flag and merged
/// into the pending record (SPEC §1), since the last wait took a record and in the notify's
/// life, across every process that records it.
///
/// Codes: 100000; 107017.
///
/// # Safety
///
/// `since_last_wait` and `total` are each NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimNotifyGetMergedRecords(
    notify: aclrtNotify,
    since_last_wait: *mut u32,
    total: *mut u32,
) -> aclError {
    // SAFETY: each NULL or writable, by the caller's contract.
    let (since_last_wait, total) = unsafe { (Out::new(since_last_wait), Out::new(total)) };
    api("aclnsimNotifyGetMergedRecords", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        let since_last_wait = since_last_wait.check(|| null_arg("sinceLastWait"))?;
        let total = total.check(|| null_arg("total"))?;
        let (run, all) = runtime()?.merged_records(handle(notify))?;
        since_last_wait.put(run);
        total.put(all);
        Ok(())
    })
}

/// `aclError aclnsimGetNotifyFreeCount(int32_t deviceId, uint32_t *count)`: notify ids still
/// free on the device, across every process of the simulated machine.
///
/// Codes: 100000; 107001; 207000 notifies unsupported.
///
/// # Safety
///
/// `count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimGetNotifyFreeCount(device_id: i32, count: *mut u32) -> aclError {
    api("aclnsimGetNotifyFreeCount", || {
        // SAFETY: `count` is NULL or writable, by the caller's contract.
        unsafe { Out::new(count) }
            .write(|| null_arg("count"), || runtime()?.notifies_free(device_id))
    })
}

/// `aclError aclnsimGetCntNotifyFreeCount(int32_t deviceId, uint32_t *count)`: count-notify ids
/// still free on the device, across every process of the simulated machine.
///
/// Codes: 100000; 207000 count notifies unsupported; 107001.
///
/// # Safety
///
/// `count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimGetCntNotifyFreeCount(device_id: i32, count: *mut u32) -> aclError {
    api("aclnsimGetCntNotifyFreeCount", || {
        // SAFETY: `count` is NULL or writable, by the caller's contract.
        unsafe { Out::new(count) }.write(
            || null_arg("count"),
            || runtime()?.cnt_notifies_free(device_id),
        )
    })
}

/// `aclError aclnsimGetServerId(uint32_t *serverId)`: the SuperPod server this process runs on
/// (`ACL_NOTIFY_SIM_SERVER_ID`).
///
/// Codes: 100000.
///
/// # Safety
///
/// `server_id` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimGetServerId(server_id: *mut u32) -> aclError {
    api("aclnsimGetServerId", || {
        // SAFETY: `server_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(server_id) }.write(
            || null_arg("serverId"),
            || {
                let id = runtime()?.backend().server_id();
                Ok(id)
            },
        )
    })
}

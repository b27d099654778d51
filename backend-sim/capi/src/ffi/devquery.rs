//! The exported device queries (`runtime::devquery` holds the rules): the stream priority
//! range, the six device id mappings, `aclrtGetPrimaryCtxState`, `aclrtQueryDeviceStatus`,
//! `aclrtDeviceGetUuid`, `aclrtDevicePeerAccessStatus` and the saturation mode. Each checks
//! its output pointers first (100000), as CANN's ACL layer does.

use super::{Out, aclError, api};
use crate::errmsg::{CallError, null_arg};
use crate::runtime::devquery::IdKind;
use crate::session::with_runtime;

/// `aclError aclrtDeviceGetStreamPriorityRange(int32_t *leastPriority, int32_t
/// *greatestPriority)`: 7 and 0; either pointer may be NULL (it is then not written).
///
/// # Safety
///
/// Each pointer is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetStreamPriorityRange(
    least_priority: *mut i32,
    greatest_priority: *mut i32,
) -> aclError {
    // SAFETY: each NULL or writable, by the caller's contract.
    let (least_out, greatest_out) = unsafe {
        (
            Out::new(least_priority).given(),
            Out::new(greatest_priority).given(),
        )
    };
    api("aclrtDeviceGetStreamPriorityRange", || {
        let (least, greatest) = with_runtime(|rt| Ok(rt.stream_priority_range()))?;
        if let Some(out) = least_out {
            out.put(least);
        }
        if let Some(out) = greatest_out {
            out.put(greatest);
        }
        Ok(())
    })
}

/// One device id mapping: `id` in numbering `from`, written to `out` (named `out_name`).
///
/// # Safety
///
/// `out` is NULL or valid for writing an `int32_t`.
unsafe fn map_id(call: &str, id: i32, from: IdKind, out: *mut i32, out_name: &str) -> aclError {
    api(call, || {
        // SAFETY: `out` is NULL or writable, by the caller's contract.
        unsafe { Out::new(out) }.write(
            || null_arg(out_name),
            || with_runtime(|rt| rt.map_device_id(id, from)),
        )
    })
}

/// `aclError aclrtGetLogicDevIdByPhyDevId(const int32_t phyDevId, int32_t *const
/// logicDevId)`: the identity over the machine's devices (see `runtime::devquery`).
///
/// Codes: 100000 NULL; 107000 a negative id; 107001 no such device.
///
/// # Safety
///
/// `logic_dev_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetLogicDevIdByPhyDevId(
    phy_dev_id: i32,
    logic_dev_id: *mut i32,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        map_id(
            "aclrtGetLogicDevIdByPhyDevId",
            phy_dev_id,
            IdKind::Phy,
            logic_dev_id,
            "logicDevId",
        )
    }
}

/// `aclError aclrtGetPhyDevIdByLogicDevId(const int32_t logicDevId, int32_t *const
/// phyDevId)`: as [`aclrtGetLogicDevIdByPhyDevId`].
///
/// # Safety
///
/// `phy_dev_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetPhyDevIdByLogicDevId(
    logic_dev_id: i32,
    phy_dev_id: *mut i32,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        map_id(
            "aclrtGetPhyDevIdByLogicDevId",
            logic_dev_id,
            IdKind::Logic,
            phy_dev_id,
            "phyDevId",
        )
    }
}

/// `aclError aclrtGetLogicDevIdByUserDevId(const int32_t userDevid, int32_t *const
/// logicDevId)`: as [`aclrtGetLogicDevIdByPhyDevId`].
///
/// # Safety
///
/// `logic_dev_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetLogicDevIdByUserDevId(
    user_dev_id: i32,
    logic_dev_id: *mut i32,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        map_id(
            "aclrtGetLogicDevIdByUserDevId",
            user_dev_id,
            IdKind::User,
            logic_dev_id,
            "logicDevId",
        )
    }
}

/// `aclError aclrtGetUserDevIdByLogicDevId(const int32_t logicDevId, int32_t *const
/// userDevid)`: as [`aclrtGetLogicDevIdByPhyDevId`].
///
/// # Safety
///
/// `user_dev_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetUserDevIdByLogicDevId(
    logic_dev_id: i32,
    user_dev_id: *mut i32,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        map_id(
            "aclrtGetUserDevIdByLogicDevId",
            logic_dev_id,
            IdKind::Logic,
            user_dev_id,
            "userDevid",
        )
    }
}

/// `aclError aclrtGetPhyDevIdByUserDevId(const int32_t userDevId, int32_t *const phyDevId)`:
/// as [`aclrtGetLogicDevIdByPhyDevId`].
///
/// # Safety
///
/// `phy_dev_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetPhyDevIdByUserDevId(
    user_dev_id: i32,
    phy_dev_id: *mut i32,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        map_id(
            "aclrtGetPhyDevIdByUserDevId",
            user_dev_id,
            IdKind::User,
            phy_dev_id,
            "phyDevId",
        )
    }
}

/// `aclError aclrtGetUserDevIdByPhyDevId(const int32_t phyDevId, int32_t *const userDevId)`:
/// as [`aclrtGetLogicDevIdByPhyDevId`].
///
/// # Safety
///
/// `user_dev_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetUserDevIdByPhyDevId(
    phy_dev_id: i32,
    user_dev_id: *mut i32,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        map_id(
            "aclrtGetUserDevIdByPhyDevId",
            phy_dev_id,
            IdKind::Phy,
            user_dev_id,
            "userDevId",
        )
    }
}

/// `aclError aclrtGetPrimaryCtxState(int32_t deviceId, uint32_t *flags, int32_t *active)`:
/// `active` 1 while an `aclrtSetDevice` of the device is not reset, else 0.
///
/// Codes: 100000 `active` NULL, or `flags` not NULL (reserved); 107001 no such device.
///
/// # Safety
///
/// `active` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetPrimaryCtxState(
    device_id: i32,
    flags: *mut u32,
    active: *mut i32,
) -> aclError {
    api("aclrtGetPrimaryCtxState", || {
        // SAFETY: `active` is NULL or writable, by the caller's contract.
        unsafe { Out::new(active) }.write(
            || null_arg("active"),
            || {
                if !flags.is_null() {
                    return Err(CallError::new(
                        acl_notify_core::Error::InvalidParam,
                        "`flags` is reserved and must be NULL",
                    ));
                }
                let on = with_runtime(|rt| rt.primary_ctx_active(device_id))?;
                Ok(i32::from(on))
            },
        )
    })
}

/// `aclError aclrtQueryDeviceStatus(int32_t deviceId, aclrtDeviceStatus *deviceStatus)`:
/// `ACL_RT_DEVICE_STATUS_NORMAL`.
///
/// Codes: 100000 NULL; 107001 no such device.
///
/// # Safety
///
/// `device_status` is NULL or valid for writing an `aclrtDeviceStatus` (an `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtQueryDeviceStatus(
    device_id: i32,
    device_status: *mut i32,
) -> aclError {
    api("aclrtQueryDeviceStatus", || {
        // SAFETY: `device_status` is NULL or writable, by the caller's contract.
        unsafe { Out::new(device_status) }.write(
            || null_arg("deviceStatus"),
            || with_runtime(|rt| rt.device_status(device_id)),
        )
    })
}

/// `aclError aclrtDeviceGetUuid(int32_t deviceId, aclrtUuid *uuid)`: 16 bytes, the same for
/// the device in every process of the simulated machine.
///
/// Codes: 100000 NULL; 107001 no such device.
///
/// # Safety
///
/// `uuid` is NULL or valid for writing 16 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetUuid(device_id: i32, uuid: *mut [u8; 16]) -> aclError {
    api("aclrtDeviceGetUuid", || {
        // SAFETY: `uuid` is NULL or writable, by the caller's contract.
        unsafe { Out::new(uuid) }.write(
            || null_arg("uuid"),
            || with_runtime(|rt| rt.device_uuid(device_id)),
        )
    })
}

/// `aclError aclrtDevicePeerAccessStatus(int32_t deviceId, int32_t peerDeviceId, int32_t
/// *status)`: 1 once this process enabled access from `deviceId` to `peerDeviceId`, else 0.
///
/// Codes: 100000 NULL; 107000 a device outside the machine.
///
/// # Safety
///
/// `status` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDevicePeerAccessStatus(
    device_id: i32,
    peer_device_id: i32,
    status: *mut i32,
) -> aclError {
    api("aclrtDevicePeerAccessStatus", || {
        // SAFETY: `status` is NULL or writable, by the caller's contract.
        unsafe { Out::new(status) }.write(
            || null_arg("status"),
            || {
                let on = with_runtime(|rt| rt.peer_access_status(device_id, peer_device_id))?;
                Ok(i32::from(on))
            },
        )
    })
}

/// `aclError aclrtGetDeviceSatMode(aclrtFloatOverflowMode *mode)`: the process's mode.
///
/// Codes: 100000 NULL.
///
/// # Safety
///
/// `mode` is NULL or valid for writing an `aclrtFloatOverflowMode` (an `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceSatMode(mode: *mut i32) -> aclError {
    api("aclrtGetDeviceSatMode", || {
        // SAFETY: `mode` is NULL or writable, by the caller's contract.
        unsafe { Out::new(mode) }.write(
            || null_arg("mode"),
            || {
                let m = with_runtime(|rt| Ok(rt.sat_mode()))?;
                Ok(m as i32)
            },
        )
    })
}

/// `aclError aclrtSetDeviceSatMode(aclrtFloatOverflowMode mode)`.
///
/// Codes: 107000 a mode other than `ACL_RT_OVERFLOW_MODE_SATURATION` (0) or `_INFNAN` (1).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDeviceSatMode(mode: i32) -> aclError {
    api("aclrtSetDeviceSatMode", || {
        with_runtime(|rt| rt.set_sat_mode(mode))
    })
}

//! What the CANN software and the chip offer (`acl_base_rt.h`): `aclGetCannAttributeList`,
//! `aclGetCannAttribute` and `aclGetDeviceCapability`, answered from the simulated chip's
//! entry in the SoC table ([`acl_notify_core::Chip`]).
//!
//! CANN's rules (hicann/runtime `src/acl/aclrt_impl/acl.cpp`, `aclGetCannAttributeListImpl`,
//! `aclGetCannAttributeImpl`, `aclGetDeviceCapabilityImpl`; `src/acl/utils/
//! cann_info_utils.cpp`):
//!
//! - An attribute is available when the installed runtime is at least the version
//!   `swFeatureList.json` names (7.1 for `INF_NAN` and `BF16`, 6.4 for `JIT_COMPILE`: this
//!   library is CANN 9.1.0's API, so all three pass) and, for `INF_NAN` and `BF16`, the chip's
//!   platform configuration says `support_inf_nan=1` / `support_bf16=1` (`src/platform/
//!   platform_config/*.ini`: the Ascend910B chips, Ascend910_93 and the 950 family; no other
//!   chip of the table has the keys). The list holds the available ones in enum order
//!   (CANN's `std::map`), in storage that lives as long as the process.
//! - An attribute outside the enum is 100000; so are NULL pointers.
//! - `aclGetDeviceCapability`: a device past the last is 100000 (an ACL-level check), as is an
//!   `aclDeviceInfo` outside the enum; the answer is the chip's `ai_core_cnt`,
//!   `vector_core_cnt` or `l2_size`, and a chip without a configuration (IPV350) is 500000,
//!   as CANN's platform look-up failing is.
//!
//! The chip is the session's, or before there is one the chip `ACL_NOTIFY_SIM_SOC` names, as
//! for `aclrtGetSocName`: the CANN attributes need no session.

use acl_notify_core::{Backend as _, Chip, Error};

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{Out, aclError, api};
use crate::session;

/// `ACL_CANN_ATTR_INF_NAN`, `_BF16`, `_JIT_COMPILE`.
const INF_NAN: i32 = 0;
const BF16: i32 = 1;
const JIT_COMPILE: i32 = 2;

/// The attribute lists handed out (static storage, as CANN's).
static ALL_ATTRS: [i32; 3] = [INF_NAN, BF16, JIT_COMPILE];
static JIT_ONLY: [i32; 1] = [JIT_COMPILE];

/// `ACL_DEVICE_INFO_AI_CORE_NUM`, `_VECTOR_CORE_NUM`, `_L2_SIZE`.
const AI_CORE_NUM: i32 = 0;
const VECTOR_CORE_NUM: i32 = 1;
const L2_SIZE: i32 = 2;

/// The simulated chip: the session's, else the environment's.
fn chip() -> Result<Chip, CallError> {
    match session::existing_runtime() {
        Some(rt) => Ok(rt.backend().chip()),
        None => acl_notify_sim::Sim::chip_from_env().map_err(CallError::backend),
    }
}

/// The available attributes on `chip`.
fn available(chip: Chip) -> &'static [i32] {
    if chip.soc().supports_inf_nan_and_bf16() {
        &ALL_ATTRS
    } else {
        &JIT_ONLY
    }
}

/// Whether attribute `attr` is available on `chip`; 100000 outside the enum.
fn attribute(chip: Chip, attr: i32) -> Result<bool, CallError> {
    if !ALL_ATTRS.contains(&attr) {
        return Err(CallError::new(
            Error::InvalidParam,
            format!(
                "cannAttr {attr}: expected an aclCannAttr, ACL_CANN_ATTR_INF_NAN (0) to \
                 ACL_CANN_ATTR_JIT_COMPILE (2)"
            ),
        ));
    }
    Ok(available(chip).contains(&attr))
}

/// `aclGetDeviceCapability`'s answer for `info` on `chip`.
fn capability(chip: Chip, info: i32) -> Result<i64, CallError> {
    if !matches!(info, AI_CORE_NUM | VECTOR_CORE_NUM | L2_SIZE) {
        return Err(CallError::new(
            Error::InvalidParam,
            format!(
                "deviceInfo {info}: expected an aclDeviceInfo, ACL_DEVICE_INFO_AI_CORE_NUM (0) \
                 to ACL_DEVICE_INFO_L2_SIZE (2)"
            ),
        ));
    }
    let Some(c) = chip.cores() else {
        return Err(CallError::new(
            Error::AclInternalError,
            format!("{chip} has no platform configuration in CANN to read its sizes from"),
        ));
    };
    Ok(match info {
        AI_CORE_NUM => i64::from(c.ai_core),
        VECTOR_CORE_NUM => i64::from(c.vector_core),
        _ => c.l2_size as i64,
    })
}

/// `aclError aclGetCannAttributeList(const aclCannAttr **cannAttrList, size_t *num)`: the
/// available attributes (see the module), in storage the caller does not free.
///
/// Codes: 100000 a pointer NULL; the simulator's code if `ACL_NOTIFY_SIM_SOC` names no chip.
///
/// # Safety
///
/// Each pointer is NULL or valid for writing its type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclGetCannAttributeList(
    cann_attr_list: *mut *const i32,
    num: *mut usize,
) -> aclError {
    // SAFETY: each NULL or writable, by the caller's contract.
    let (cann_attr_list, num) = unsafe { (Out::new(cann_attr_list), Out::new(num)) };
    api("aclGetCannAttributeList", || {
        let cann_attr_list = cann_attr_list.check(|| null_arg("cannAttrList"))?;
        let num = num.check(|| null_arg("num"))?;
        let list = available(chip()?);
        cann_attr_list.put(list.as_ptr());
        num.put(list.len());
        Ok(())
    })
}

/// `aclError aclGetCannAttribute(aclCannAttr cannAttr, int32_t *value)`: 1 if available, else
/// 0.
///
/// Codes: 100000 NULL, or an attribute outside the enum.
///
/// # Safety
///
/// `value` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclGetCannAttribute(cann_attr: i32, value: *mut i32) -> aclError {
    api("aclGetCannAttribute", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(
            || null_arg("value"),
            || {
                let yes = attribute(chip()?, cann_attr)?;
                Ok(i32::from(yes))
            },
        )
    })
}

/// `aclError aclGetDeviceCapability(uint32_t deviceId, aclDeviceInfo deviceInfo, int64_t
/// *value)`: the chip's AI Cores, Vector Cores or L2 cache bytes.
///
/// Codes: 100000 NULL, a device past the last, or an `aclDeviceInfo` outside the enum; 500000
/// a chip without a platform configuration (IPV350).
///
/// # Safety
///
/// `value` is NULL or valid for writing an `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclGetDeviceCapability(
    device_id: u32,
    device_info: i32,
    value: *mut i64,
) -> aclError {
    api("aclGetDeviceCapability", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(
            || null_arg("value"),
            || {
                let v = session::with_runtime(|rt| {
                    let count = rt.backend().device_count();
                    if device_id >= count {
                        return Err(CallError::new(
                            Error::InvalidParam,
                            format!("deviceId {device_id}: this machine has {count} devices"),
                        ));
                    }
                    capability(rt.backend().chip(), device_info)
                })?;
                Ok(v)
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chip(name: &str) -> Chip {
        Chip::from_name(name).unwrap()
    }

    #[test]
    fn attributes_follow_the_chips_configuration() {
        assert_eq!(available(chip("Ascend910B3")), &[0, 1, 2]);
        assert_eq!(available(chip("Ascend950DT_9591")), &[0, 1, 2]);
        assert_eq!(available(chip("Ascend310P3")), &[2]);
        assert_eq!(available(chip("Ascend910A")), &[2]);
        assert!(attribute(chip("Ascend910_9391"), BF16).unwrap());
        assert!(!attribute(chip("Ascend310B1"), INF_NAN).unwrap());
        assert!(attribute(chip("Ascend310B1"), JIT_COMPILE).unwrap());
        for bad in [-1, 3, 100] {
            assert_eq!(
                attribute(chip("Ascend910B3"), bad).unwrap_err().code(),
                Error::InvalidParam
            );
        }
    }

    #[test]
    fn capabilities_are_the_chips_sizes() {
        let c = chip("Ascend910B4");
        assert_eq!(capability(c, AI_CORE_NUM).unwrap(), 20);
        assert_eq!(capability(c, VECTOR_CORE_NUM).unwrap(), 40);
        assert_eq!(capability(c, L2_SIZE).unwrap(), 96 << 20);
        assert_eq!(capability(chip("Ascend310P1"), AI_CORE_NUM).unwrap(), 10);
        assert_eq!(capability(c, 3).unwrap_err().code(), Error::InvalidParam);
        assert_eq!(
            capability(chip("IPV350"), L2_SIZE).unwrap_err().code(),
            Error::AclInternalError
        );
    }
}

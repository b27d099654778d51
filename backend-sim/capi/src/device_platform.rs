//! What a device says of the platform it sits in, for `aclrtGetDeviceInfo`: how the host
//! reaches it (`ACL_DEV_ATTR_HD_CONNECT_TYPE`, 408), the machine's form factor
//! (`ACL_DEV_ATTR_DEVICE_FORM_FACTOR`, 409) and the chip's NPU architecture
//! (`ACL_DEV_ATTR_NPU_ARCH`, 601), from the core's device properties
//! (`acl_notify_core::devprops`).
//!
//! As hicann/runtime `src/runtime/api/impl/api_impl.cc` (408 and 409 are the driver's
//! `INFO_TYPE_HD_CONNECT_TYPE` / `INFO_TYPE_PRODUCT_TYPE` of `MODULE_TYPE_SYSTEM`; 601 is
//! `GetDeviceNpuArch`) and CANN's `aclrtDevAttr` documentation
//! (`docs/zh/api_ref/25-02_Enumerations.md`): 408 and 409 are answered on the 950 family
//! only, and are an error elsewhere (the driver's "not supported": 207000).
//!
//! The form factor is the machine the simulator runs on, holding the simulated devices as an
//! Ascend server does: `ACL_DEVICE_FORM_FACTOR_A_K` (1) on an AArch64 host (Ascend with
//! Kunpeng), `ACL_DEVICE_FORM_FACTOR_A_X` (2) on any other (Ascend with x86). The simulator's
//! 950 family is not a SuperPod (`Caps::inter_server`), so never `POD` (0).

use acl_notify_core::{Chip, Error};

use crate::errmsg::CallError;

/// `ACL_DEV_ATTR_HD_CONNECT_TYPE`.
pub(crate) const ATTR_HD_CONNECT_TYPE: i32 = 408;
/// `ACL_DEV_ATTR_DEVICE_FORM_FACTOR`.
pub(crate) const ATTR_DEVICE_FORM_FACTOR: i32 = 409;
/// `ACL_DEV_ATTR_NPU_ARCH`.
pub(crate) const ATTR_NPU_ARCH: i32 = 601;

/// `ACL_DEVICE_FORM_FACTOR_A_K` and `_A_X`.
const FORM_A_K: i64 = 1;
const FORM_A_X: i64 = 2;

/// The value of platform attribute `attr` (408, 409 or 601) of a device of `chip`.
pub(crate) fn platform_attr(chip: Chip, attr: i32) -> Result<i64, CallError> {
    let soc = chip.soc();
    let on_950 = matches!(
        soc,
        acl_notify_core::Soc::Ascend950PR | acl_notify_core::Soc::Ascend950DT
    );
    let value = match attr {
        ATTR_HD_CONNECT_TYPE if on_950 => soc.host_link().map(|l| l as i64),
        ATTR_DEVICE_FORM_FACTOR if on_950 => Some(if cfg!(target_arch = "aarch64") {
            FORM_A_K
        } else {
            FORM_A_X
        }),
        ATTR_NPU_ARCH => soc.npu_arch().map(i64::from),
        _ => None,
    };
    value.ok_or_else(|| {
        CallError::new(
            Error::FeatureNotSupport,
            format!(
                "device attribute {attr} is not answered on {chip} (CANN answers the host link \
                 (408) and the form factor (409) on the 950 family only, the NPU architecture \
                 (601) where its platform configuration has one)"
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::Soc;

    #[test]
    fn the_950_family_answers_its_platform_others_refuse() {
        let pr = Soc::Ascend950PR.default_chip();
        assert_eq!(platform_attr(pr, ATTR_HD_CONNECT_TYPE).unwrap(), 2);
        let form = platform_attr(pr, ATTR_DEVICE_FORM_FACTOR).unwrap();
        assert!(form == FORM_A_K || form == FORM_A_X, "{form}");
        assert_eq!(platform_attr(pr, ATTR_NPU_ARCH).unwrap(), 3510);
        let b = Soc::Ascend910B.default_chip();
        for attr in [ATTR_HD_CONNECT_TYPE, ATTR_DEVICE_FORM_FACTOR] {
            let e = platform_attr(b, attr).unwrap_err();
            assert_eq!(e.code(), Error::FeatureNotSupport);
        }
        assert_eq!(platform_attr(b, ATTR_NPU_ARCH).unwrap(), 2201);
        let ipv = Soc::IPV350.default_chip();
        assert!(platform_attr(ipv, ATTR_NPU_ARCH).is_err());
    }
}

//! What the driver reads of the library when it binds it ([`query_identity`]): the SoC
//! (`aclrtGetSocName`, or `ACL_NOTIFY_DRIVER_SOC`), the device count, this process's bare
//! TGID and its SuperPod server id (`ACL_NOTIFY_DRIVER_SERVER_ID`, the library's
//! `aclnsimGetServerId`, or device 0's SuperPOD Device ID).

use acl_notify_core::{Error, Soc};

use crate::ffi::{self, Api};
use crate::soc::{SocNaming, family_of};
use crate::{DriverError, ENV_SERVER_ID, ENV_SOC, Identity, check, recent_message};

pub(crate) fn query_identity(api: &Api) -> Result<Identity, DriverError> {
    // SAFETY: no arguments; returns NULL or a NUL-terminated string owned by the runtime.
    let p = unsafe { (api.aclrtGetSocName)() };
    // SAFETY: as above; bounded read.
    let soc_name = unsafe { ffi::copy_c_str(p, 256) }.ok_or_else(|| {
        DriverError::load(
            Error::DrvInternalError,
            "aclrtGetSocName",
            format!(
                "aclrtGetSocName returned NULL{}",
                recent_message(api)
                    .map(|m| format!(" (the runtime says: {m})"))
                    .unwrap_or_default()
            ),
        )
    })?;
    let soc = match std::env::var(ENV_SOC).ok().filter(|v| !v.is_empty()) {
        Some(forced) => Soc::from_name(&forced).map_err(|_| {
            DriverError::load(
                Error::ParamInvalid,
                "aclrtGetSocName",
                format!(
                    "{ENV_SOC}={forced:?} is not a SoC family of the table ({})",
                    soc_list()
                ),
            )
        })?,
        None => family_of(&soc_name, soc_naming(api)).ok_or_else(|| {
            DriverError::load(
                Error::FeatureNotSupport,
                "aclrtGetSocName",
                format!(
                    "the runtime reports SoC {soc_name:?}, which this binding does not know; \
                     if it belongs to a family of the table ({}), set {ENV_SOC} to that family",
                    soc_list()
                ),
            )
        })?,
    };
    let mut devices = 0u32;
    // SAFETY: valid out-pointer to a u32.
    check(api, "aclrtGetDeviceCount", unsafe {
        (api.aclrtGetDeviceCount)(&mut devices)
    })?;
    let mut tgid = 0i32;
    // SAFETY: valid out-pointer to an i32.
    check(api, "aclrtDeviceGetBareTgid", unsafe {
        (api.aclrtDeviceGetBareTgid)(&mut tgid)
    })?;
    let server_id = match std::env::var(ENV_SERVER_ID).ok().filter(|v| !v.is_empty()) {
        Some(v) => v.trim().parse::<u32>().map_err(|_| {
            DriverError::load(
                Error::ParamInvalid,
                "getenv",
                format!("{ENV_SERVER_ID}={v:?} is not a server id (an unsigned 32-bit number)"),
            )
        })?,
        None => match api.aclnsimGetServerId {
            Some(f) => {
                let mut id = 0u32;
                // SAFETY: valid out-pointer to a u32.
                check(api, "aclnsimGetServerId", unsafe { f(&mut id) })?;
                id
            }
            None => super_pod_device_id(api, devices).unwrap_or(0),
        },
    };
    Ok(Identity {
        soc,
        soc_name,
        devices,
        tgid,
        server_id,
    })
}

/// How the library names its SoC: one that exports acl-notify's `aclnsim*` extensions is the
/// simulator (or written to its contract) and returns SPEC §4's family names; a CANN runtime
/// returns chip names, where a bare `Ascend910B` is a first-generation Ascend 910.
fn soc_naming(api: &Api) -> SocNaming {
    if api
        .optional_present()
        .iter()
        .any(|s| s.starts_with("aclnsim"))
    {
        SocNaming::Family
    } else {
        SocNaming::Chip
    }
}

/// `aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)`, when the library has it and
/// answers (outside a SuperPod it may fail: then `None`, and its message is drained so it does
/// not end up in the next error).
///
/// This is what stands for the process's "server" here, because it is what an owner must put
/// in `aclrtServerPid::sdid` to whitelist this process: CANN documents `sdid` as the SuperPOD
/// Device ID obtained from `aclrtGetDeviceInfo`, and its runtime hands it to the driver's
/// `halShrIdSetPodPid` unchanged (attribute 403 is the driver's `INFO_TYPE_SDID`; 404,
/// `ACL_DEV_ATTR_SUPER_POD_SERVER_ID`, is `INFO_TYPE_SERVER_ID`, another number). The SDID is
/// a device's: device 0's is taken, which is right for a process that imports on device 0
/// (e.g. one device per process via `ASCEND_RT_VISIBLE_DEVICES`); otherwise set
/// [`ENV_SERVER_ID`] to the importing device's SDID.
fn super_pod_device_id(api: &Api, devices: u32) -> Option<u32> {
    let f = api.aclrtGetDeviceInfo?;
    if devices == 0 {
        return None;
    }
    let mut v = 0i64;
    // SAFETY: integer arguments and a valid out-pointer to an i64.
    let code = unsafe { f(0, ffi::ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &mut v) };
    if code != 0 {
        let _ = recent_message(api);
        return None;
    }
    u32::try_from(v).ok()
}

fn soc_list() -> String {
    Soc::ALL
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

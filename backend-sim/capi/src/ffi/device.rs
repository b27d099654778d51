//! The exported initialisation and device functions: `aclInit`, `aclFinalize`,
//! `aclGetRecentErrMsg`, `aclrtSetDevice` … `aclrtDeviceGetBareTgid`, `aclrtGetRunMode`,
//! `aclrtGetVersion`.

use std::ffi::c_char;
use std::panic::catch_unwind;

use acl_notify_core::{Backend, Error};

use super::{Out, OutArray, aclError, api, api_ptr};
use crate::device_platform::{
    ATTR_DEVICE_FORM_FACTOR, ATTR_HD_CONNECT_TYPE, ATTR_NPU_ARCH, platform_attr,
};
use crate::errmsg::{self, CallError, null_arg};
use crate::session::{self, runtime, with_runtime};

/// `aclError aclInit(const char *configPath)`: opens the simulated machine the
/// `ACL_NOTIFY_SIM_*` variables describe. `configPath` (NULL or "": none) is CANN's `acl.json`;
/// its `defaultDevice` is the device of threads that set none (see the crate's `config` module).
///
/// Codes: 100002 already initialised; 100003 the file cannot be read; 100006 it is not the
/// JSON CANN reads; 100000 a `default_device` that is no number; 107001 no such device; the
/// simulator's code if the environment is invalid.
///
/// # Safety
///
/// `config_path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclInit(config_path: *const c_char) -> aclError {
    api("aclInit", || {
        // SAFETY: the caller's contract.
        unsafe { crate::lifecycle::init(config_path) }
    })
}

/// `aclError aclFinalize(void)`: releases every stream and notify of the process.
///
/// Codes: 100037 already finalised.
#[unsafe(no_mangle)]
pub extern "C" fn aclFinalize() -> aclError {
    api("aclFinalize", crate::lifecycle::finalize)
}

/// `const char *aclGetRecentErrMsg(void)`: this thread's messages since the last call, newest
/// first, or NULL. The string is valid until the next call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    catch_unwind(errmsg::take_recent).unwrap_or(std::ptr::null())
}

// ---- devices ---------------------------------------------------------------------------------

/// `aclError aclrtSetDevice(int32_t deviceId)`: makes `deviceId` the calling thread's current
/// device.
///
/// Codes: 107001.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDevice(device_id: i32) -> aclError {
    api("aclrtSetDevice", || runtime()?.set_device(device_id))
}

/// `aclError aclrtGetDevice(int32_t *deviceId)`.
///
/// Codes: 100000; 107002.
///
/// # Safety
///
/// `device_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDevice(device_id: *mut i32) -> aclError {
    api("aclrtGetDevice", || {
        // SAFETY: `device_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(device_id) }.write(|| null_arg("deviceId"), || runtime()?.get_device())
    })
}

/// `aclError aclrtResetDevice(int32_t deviceId)`.
///
/// Codes: 107001; 507007 the device's count of `aclrtSetDevice` calls is already 0;
/// 507046 its streams did not drain within `ACL_NOTIFY_SIM_RESET_TIMEOUT` (released anyway).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDevice(device_id: i32) -> aclError {
    api("aclrtResetDevice", || {
        runtime()?.reset_device(device_id, false)
    })
}

/// `aclError aclrtResetDeviceForce(int32_t deviceId)`.
///
/// Codes: 107001; 507007 the device's count of `aclrtSetDevice` calls is already 0;
/// 507046 its streams did not drain within `ACL_NOTIFY_SIM_RESET_TIMEOUT` (released anyway).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDeviceForce(device_id: i32) -> aclError {
    api("aclrtResetDeviceForce", || {
        runtime()?.reset_device(device_id, true)
    })
}

/// `aclError aclrtGetDeviceCount(uint32_t *count)`.
///
/// Codes: 100000.
///
/// # Safety
///
/// `count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    api("aclrtGetDeviceCount", || {
        // SAFETY: `count` is NULL or writable, by the caller's contract.
        unsafe { Out::new(count) }.write(
            || null_arg("count"),
            || {
                let n = runtime()?.backend().device_count();
                Ok(n)
            },
        )
    })
}

/// The `aclrtDevAttr` values the simulator answers: the chip's cores (`ACL_DEV_ATTR_AICPU_CORE_NUM`,
/// `_AICORE_CORE_NUM`, `_CUBE_CORE_NUM`, `_VECTOR_CORE_NUM`) and the ids
/// (`ACL_DEV_ATTR_PHY_CHIP_ID`, `_SUPER_POD_DEVICE_ID`, `_SUPER_POD_SERVER_ID`,
/// `_SUPER_POD_ID`).
const ATTR_AICPU_CORE_NUM: i32 = 1;
const ATTR_AICORE_CORE_NUM: i32 = 101;
const ATTR_CUBE_CORE_NUM: i32 = 102;
const ATTR_VECTOR_CORE_NUM: i32 = 201;
const ATTR_PHY_CHIP_ID: i32 = 402;
const ATTR_SUPER_POD_DEVICE_ID: i32 = 403;
const ATTR_SUPER_POD_SERVER_ID: i32 = 404;
const ATTR_SUPER_POD_ID: i32 = 405;

/// `aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value)`, for the
/// chip's cores and the ids a notify program needs. The cores are the chip's counts
/// (`Chip::cores`): AI CPUs (1), AI Cores (101), Cube Cores (102: where the chip has no such
/// count, the Atlas inference and training series, 107000, as CANN's runtime answers a
/// platform configuration without `cube_core_cnt`, hicann/runtime
/// `src/runtime/api/impl/api_impl.cc`, `GetDeviceInfoByAttrMisc`) and Vector Cores (201). A
/// device's SuperPOD Device ID (403) is what an owner puts in `aclrtServerPid::sdid` to
/// whitelist a process importing on that device: each device's own, in the simulator's layout
/// (`acl_notify_core::sdid`: it parses back to this server and the device; CANN's driver has
/// its own). 404 answers the server (`ACL_NOTIFY_SIM_SERVER_ID`), 402 the device id and 405
/// (the SuperPOD's own id) 0. The host link (408), form factor (409) and NPU
/// architecture (601) are `device_platform`'s.
///
/// Codes: 100000 value NULL; 107001 no such device; 107000 Cube Cores of a chip without
/// them; 207000 an attribute the simulator does not model, or the cores of IPV350.
///
/// # Safety
///
/// `value` is NULL or valid for writing an `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceInfo(
    device_id: u32,
    attr: i32,
    value: *mut i64,
) -> aclError {
    api("aclrtGetDeviceInfo", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(
            || null_arg("value"),
            || {
                let v = with_runtime(|rt| {
                    let dev = rt.device_id(device_id)?;
                    Ok(match attr {
                        ATTR_AICPU_CORE_NUM | ATTR_AICORE_CORE_NUM | ATTR_CUBE_CORE_NUM
                        | ATTR_VECTOR_CORE_NUM => i64::from(core_count(rt.backend().chip(), attr)?),
                        ATTR_PHY_CHIP_ID => i64::from(dev),
                        ATTR_SUPER_POD_DEVICE_ID => i64::from(
                            rt.backend()
                                .super_pod_device_id(dev)
                                .map_err(CallError::backend)?,
                        ),
                        ATTR_SUPER_POD_SERVER_ID => i64::from(rt.backend().server_id()),
                        ATTR_SUPER_POD_ID => 0,
                        ATTR_HD_CONNECT_TYPE | ATTR_DEVICE_FORM_FACTOR | ATTR_NPU_ARCH => {
                            platform_attr(rt.backend().chip(), attr)?
                        }
                        other => {
                            return Err(CallError::new(
                                Error::FeatureNotSupport,
                                format!(
                                    "device attribute {other} is not modelled by the simulator (it \
                             answers 1, 101, 102 and 201: the cores; 402, 403, 404 and 405: \
                             chip id, SuperPOD device id, server id, SuperPOD id; 408, 409 and \
                             601: host link, form factor, NPU architecture)"
                                ),
                            ));
                        }
                    })
                })?;
                Ok(v)
            },
        )
    })
}

/// The count of the core attribute `attr` (1, 101, 102 or 201) of `chip`.
fn core_count(chip: acl_notify_core::Chip, attr: i32) -> Result<u32, CallError> {
    let Some(cores) = chip.cores() else {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!("the cores of {chip} are not known (CANN publishes no configuration of it)"),
        ));
    };
    Ok(match attr {
        ATTR_AICPU_CORE_NUM => cores.ai_cpu,
        ATTR_AICORE_CORE_NUM => cores.ai_core,
        ATTR_VECTOR_CORE_NUM => cores.vector_core,
        _ => cores.cube_core.ok_or_else(|| {
            CallError::new(
                Error::ParamInvalid,
                format!(
                    "{chip} has no Cube Cores of their own: its AI Cores are not split (ask \
                     ACL_DEV_ATTR_AICORE_CORE_NUM)"
                ),
            )
        })?,
    })
}

/// `const char *aclrtGetSocName(void)`: the exact chip name (static storage), e.g.
/// `Ascend910B3`: the session's, or before there is one the chip `ACL_NOTIFY_SIM_SOC` names
/// (a family stands for its first chip), without starting a session. CANN's reads the chip
/// without an initialisation check too (hicann/runtime
/// `src/acl/aclrt_impl/acl_rt_impl_base.cpp`, `aclrtGetSocNameImpl`). NULL (with a message)
/// only if `ACL_NOTIFY_SIM_SOC` names no chip.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetSocName() -> *const c_char {
    api_ptr("aclrtGetSocName", || {
        let chip = match session::existing_runtime() {
            Some(rt) => rt.backend().chip(),
            None => acl_notify_sim::Sim::chip_from_env().map_err(CallError::backend)?,
        };
        Ok(chip.c_name().as_ptr())
    })
}

/// `aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId,
/// int32_t peerDeviceId)`: writes 1 if `deviceId` can access `peerDeviceId`, else 0.
///
/// Codes, in CANN's order: 100000 NULL, or `deviceId == peerDeviceId`; 107001 no such device;
/// 207000 a SoC without peer access (Ascend310B, IPV350).
///
/// # Safety
///
/// `can_access_peer` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    can_access_peer: *mut i32,
    device_id: i32,
    peer_device_id: i32,
) -> aclError {
    api("aclrtDeviceCanAccessPeer", || {
        // SAFETY: `can_access_peer` is NULL or writable, by the caller's contract.
        unsafe { Out::new(can_access_peer) }.write(
            || null_arg("canAccessPeer"),
            || {
                let yes = runtime()?.can_access_peer(device_id, peer_device_id)?;
                Ok(i32::from(yes))
            },
        )
    })
}

/// `aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)`: between the
/// current device and `peerDeviceId`.
///
/// Codes, in CANN's order: 200006 (`ACL_ERROR_FEATURE_UNSUPPORTED`) flags ≠ 0; 107002 no
/// current device; 100000 the peer is the current device; 107001 no such peer; 207000 a SoC
/// without peer access (Ascend310B, IPV350).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDeviceEnablePeerAccess(peer_device_id: i32, flags: u32) -> aclError {
    api("aclrtDeviceEnablePeerAccess", || {
        runtime()?.enable_peer_access(peer_device_id, flags)
    })
}

/// `aclError aclrtDeviceDisablePeerAccess(int32_t peerDeviceId)`: ends the access from the
/// current device to `peerDeviceId` that `aclrtDeviceEnablePeerAccess` (or an IPC import with
/// `ENABLE_PEER_ACCESS`) gave; the other direction stays. Access that was not enabled:
/// succeeds, changing nothing (CANN's result there comes from its driver and is not
/// documented).
///
/// Codes: 107002 no current device; 100000 the peer is the current device; 107001 no such
/// peer; 207000 a SoC without peer access (Ascend310B, IPV350).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDeviceDisablePeerAccess(peer_device_id: i32) -> aclError {
    api("aclrtDeviceDisablePeerAccess", || {
        runtime()?.disable_peer_access(peer_device_id)
    })
}

/// `aclError aclrtDeviceGetBareTgid(int32_t *pid)`: the calling process's id. Works before
/// `aclInit` too.
///
/// Codes: 100000.
///
/// # Safety
///
/// `pid` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError {
    api("aclrtDeviceGetBareTgid", || {
        // SAFETY: `pid` is NULL or writable, by the caller's contract.
        unsafe { Out::new(pid) }.write(
            || null_arg("pid"),
            || {
                let me = match session::existing_runtime() {
                    Some(rt) => rt.backend().bare_tgid(),
                    None => std::process::id() as i32,
                };
                Ok(me)
            },
        )
    })
}

/// `aclrtRunMode`'s `ACL_HOST`: the program runs on the host, next to the (simulated) device.
const ACL_HOST: u32 = 1;

/// `aclError aclrtGetRunMode(aclrtRunMode *runMode)`: always `ACL_HOST` (the program runs on
/// the host; CANN answers `ACL_DEVICE` only in its offline mode, a program on the device).
/// Works before `aclInit` too, starting no session.
///
/// Codes: 100000.
///
/// # Safety
///
/// `run_mode` is NULL or valid for writing an `aclrtRunMode` (a C enum: 4 bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetRunMode(run_mode: *mut u32) -> aclError {
    api("aclrtGetRunMode", || {
        // SAFETY: `run_mode` is NULL or writable, by the caller's contract.
        unsafe { Out::new(run_mode) }.write(|| null_arg("runMode"), || Ok(ACL_HOST))
    })
}

/// `aclError aclrtGetVersion(int32_t *majorVersion, int32_t *minorVersion, int32_t
/// *patchVersion)`: the version of the headers this library implements (`ACL_MAJOR_VERSION`,
/// `ACL_MINOR_VERSION`, `ACL_PATCH_VERSION` of `acl/acl_rt.h`: CANN 9.1.0's 1.17.0), as CANN
/// answers with its own.
///
/// Codes: 100000 any pointer NULL.
///
/// # Safety
///
/// Each pointer is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetVersion(
    major_version: *mut i32,
    minor_version: *mut i32,
    patch_version: *mut i32,
) -> aclError {
    // SAFETY: each NULL or writable, by the caller's contract.
    let (major, minor, patch) = unsafe {
        (
            Out::new(major_version),
            Out::new(minor_version),
            Out::new(patch_version),
        )
    };
    api("aclrtGetVersion", || {
        let major = major.check(|| null_arg("majorVersion"))?;
        let minor = minor.check(|| null_arg("minorVersion"))?;
        let patch = patch.check(|| null_arg("patchVersion"))?;
        major.put(ACL_VERSION.0);
        minor.put(ACL_VERSION.1);
        patch.put(ACL_VERSION.2);
        Ok(())
    })
}

/// `ACL_MAJOR_VERSION`, `ACL_MINOR_VERSION`, `ACL_PATCH_VERSION` of `include/acl/acl_rt.h`
/// (a test compares them from C).
const ACL_VERSION: (i32, i32, i32) = (1, 17, 0);

/// The bytes of an `aclrtErrorInfo` `aclrtGetErrorVerbose` writes: `tryRepair` (0),
/// `hasDetail` (1), `errorType` (4..8) and `detail.aicoreErrType` (8..12); the struct is
/// larger (`detail.uceInfo`, left alone).
const ERROR_INFO_WRITTEN: usize = 12;

/// `aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo)`: the device's
/// pending fault. The simulated devices have none of the faults CANN reports here (an HBM
/// UCE error, a link error), so the answer is always `ACL_RT_NO_ERROR` with `tryRepair` and
/// `hasDetail` 0, as CANN answers for a healthy device (hicann/runtime
/// `src/runtime/api/impl/api_impl.cc`, `ApiImpl::GetErrorVerbose`; its checks in
/// `api_error.cc`). Writes `tryRepair`, `hasDetail`, `errorType` and `detail.aicoreErrType`
/// (0), as CANN's ACL layer copies them (`src/acl/aclrt_impl/event.cpp`); `detail.uceInfo`
/// is left alone.
///
/// Codes: 100000 `errorInfo` NULL; 107001 no such device.
///
/// # Safety
///
/// `error_info` is NULL or points to a writable `aclrtErrorInfo` (8-byte aligned, as C
/// places it: `tryRepair` at 0, `hasDetail` at 1, `errorType` at 4, `detail` at 8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetErrorVerbose(device_id: i32, error_info: *mut u8) -> aclError {
    // SAFETY: NULL or writable for an `aclrtErrorInfo`, by the caller's contract: its first
    // ERROR_INFO_WRITTEN bytes are all this call writes.
    let info = unsafe { OutArray::new(error_info, ERROR_INFO_WRITTEN) };
    api("aclrtGetErrorVerbose", || {
        let info = info.check(|| null_arg("errorInfo"))?;
        runtime()?.device_id(device_id)?;
        info.put_at(0, 0u8); // tryRepair
        info.put_at(1, 0u8); // hasDetail
        info.put_at(4, 0i32); // errorType: ACL_RT_NO_ERROR
        info.put_at(8, 0i32); // detail.aicoreErrType
        Ok(())
    })
}

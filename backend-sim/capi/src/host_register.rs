//! `aclrtHostRegister[V2]`, `aclrtHostUnregister`, `aclrtHostGetDevicePointer`,
//! `aclrtHostMemMapCapabilities`: the caller's host memory registered with the runtime, over
//! `Sim::host_register` and its neighbours (`acl_notify_sim::mem::registered`, whose docs say
//! what registered memory is on the simulator and what its device address is for).
//!
//! CANN's checks, in its order: the ACL layer (hicann/runtime `src/acl/aclrt_impl/memory.cpp`,
//! `aclrtHostRegisterImpl` and its neighbours: NULL pointers, size 0, a reserved `flag` not 0
//! → 100000), then the runtime's (`src/runtime/api/impl/api_error.cc`,
//! `ApiErrorDecorator::HostRegister[V2]` / `HostGetDevicePointer` /
//! `HostMemMapCapabilities`: a register type outside `IOMEMORY | READONLY` → 207000, a V2 flag
//! 0 or outside `MAPPED | IOMEMORY | READONLY | PINNED` → 107000, a device id → 107001, a
//! HAC type past `ACL_RT_HAC_TYPE_CCU` → 107000), then the SoC (CANN documents registration on
//! Atlas A2, A3 and Ascend 950 only, `docs/zh/api_ref/11-02_host_memory_management.md`:
//! 207000 elsewhere, as its driver's feature check answers) and the current context (107002).
//! `ACL_HOST_REG_IOMEMORY` and `ACL_HOST_REG_READONLY` CANN documents as reserved and not
//! supported: 207000.
//!
//! `aclrtHostMemMapCapabilities` answers what the simulator does: registered memory is
//! reachable by every one of the device's accelerators on the SoCs that have registration
//! (CANN's answer comes from its driver per accelerator; the simulated device has one kind
//! of engine for all), not supported on the others; IPV350, where CANN documents the call as
//! unsupported, 207000.

use std::ffi::c_void;
use std::sync::Arc;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::mem::registered::HostReg;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{Out, aclError, api};
use crate::runtime::Runtime;
use crate::session::runtime;

/// `ACL_HOST_REG_MAPPED` .. `ACL_HOST_REG_PINNED` (`acl_rt.h`).
const REG_MAPPED: u32 = 0x2;
const REG_IOMEMORY: u32 = 0x4;
const REG_READONLY: u32 = 0x8;
const REG_PINNED: u32 = 0x1000_0000;

/// `ACL_RT_HAC_TYPE_CCU` + 1 (`RT_HAC_TYPE_MAX`, hicann/runtime `pkg_inc/runtime/runtime/
/// mem_base.h`).
const HAC_TYPES: u32 = 10;

/// `ACL_RT_HOST_MEM_MAP_NOT_SUPPORTED` / `ACL_RT_HOST_MEM_MAP_SUPPORTED`.
const MAP_NOT_SUPPORTED: u32 = 0;
const MAP_SUPPORTED: u32 = 1;

/// The SoCs where CANN documents host memory registration.
fn registers(soc: Soc) -> bool {
    matches!(
        soc,
        Soc::Ascend910B | Soc::Ascend910_93 | Soc::Ascend950PR | Soc::Ascend950DT
    )
}

/// 207000 off the SoCs with registration, then the current context (107002).
fn registering_runtime(call: &str) -> Result<Arc<Runtime>, CallError> {
    let rt = runtime()?;
    let soc = rt.backend().soc();
    if !registers(soc) {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{call}: {} has no host memory registration (CANN documents it on Atlas A2, A3 \
                 and Ascend 950 only)",
                soc.name()
            ),
        ));
    }
    rt.current_device()?;
    Ok(rt)
}

/// 207000 for the flags CANN documents as reserved and not supported.
fn reserved_flags(call: &str, flags: u32) -> Result<(), CallError> {
    if flags & (REG_IOMEMORY | REG_READONLY) != 0 {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{call}: ACL_HOST_REG_IOMEMORY and ACL_HOST_REG_READONLY are reserved and not \
                 supported (as CANN documents)"
            ),
        ));
    }
    Ok(())
}

/// `aclError aclrtHostRegister(void *ptr, uint64_t size, aclrtHostRegisterType type, void
/// **devPtr)`: registers `size` bytes at `ptr` (4 KiB-aligned) and gives their device address.
///
/// Codes: 100000 `ptr` or `devPtr` NULL, size 0; 207000 a type other than
/// `ACL_HOST_REGISTER_MAPPED`, a SoC without registration; 107002; 107000 `ptr` not 4 KiB
/// aligned; 507910 overlapping a registered range.
///
/// # Safety
///
/// `devPtr` writable; the range stays the caller's memory while registered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtHostRegister(
    ptr: *mut c_void,
    size: u64,
    reg_type: u32,
    dev_ptr: *mut *mut c_void,
) -> aclError {
    api("aclrtHostRegister", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        // SAFETY: `dev_ptr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(dev_ptr) }.write(
            || null_arg("devPtr"),
            || {
                if size == 0 {
                    return Err(CallError::new(Error::InvalidParam, "size is 0"));
                }
                if reg_type & !(REG_IOMEMORY | REG_READONLY) != 0 {
                    return Err(CallError::new(
                        Error::FeatureNotSupport,
                        format!(
                            "type {reg_type:#x} is not an aclrtHostRegisterType (0, or a \
                             combination of ACL_HOST_REGISTER_IOMEMORY and \
                             ACL_HOST_REGISTER_READONLY)"
                        ),
                    ));
                }
                reserved_flags("aclrtHostRegister", reg_type)?;
                let rt = registering_runtime("aclrtHostRegister")?;
                let size = usize::try_from(size)
                    .map_err(|_| CallError::new(Error::ParamInvalid, "size too large"))?;
                let dev = rt
                    .backend()
                    .host_register(ptr.addr(), size, HostReg::MAPPED)
                    .map_err(CallError::backend)?
                    .ok_or_else(|| CallError::new(Error::DrvInternalError, "no device address"))?;
                Ok(std::ptr::with_exposed_provenance_mut(dev))
            },
        )
    })
}

/// `aclError aclrtHostRegisterV2(void *ptr, uint64_t size, uint32_t flag)`: registers `size`
/// bytes at `ptr` (4 KiB-aligned) as `flag` says (`ACL_HOST_REG_MAPPED`, `ACL_HOST_REG_PINNED`
/// or both).
///
/// Codes: 100000 `ptr` NULL, size 0; 107000 `flag` 0 or with unknown bits, `ptr` not 4 KiB
/// aligned, `ACL_HOST_REG_PINNED` of `aclrtMallocHost` memory; 207000
/// `ACL_HOST_REG_IOMEMORY`/`READONLY`, a SoC without registration; 107002; 507910
/// overlapping a registered range.
///
/// # Safety
///
/// The range stays the caller's memory while registered.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtHostRegisterV2(ptr: *mut c_void, size: u64, flag: u32) -> aclError {
    api("aclrtHostRegisterV2", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        if size == 0 {
            return Err(CallError::new(Error::InvalidParam, "size is 0"));
        }
        let valid = REG_MAPPED | REG_IOMEMORY | REG_READONLY | REG_PINNED;
        if flag == 0 || flag & !valid != 0 {
            return Err(CallError::new(
                Error::ParamInvalid,
                format!(
                    "flag {flag:#x}: the valid flag is an OR of ACL_HOST_REG_MAPPED (0x2), \
                     ACL_HOST_REG_IOMEMORY (0x4), ACL_HOST_REG_READONLY (0x8) and \
                     ACL_HOST_REG_PINNED (0x10000000)"
                ),
            ));
        }
        reserved_flags("aclrtHostRegisterV2", flag)?;
        let rt = registering_runtime("aclrtHostRegisterV2")?;
        let how = match (flag & REG_MAPPED != 0, flag & REG_PINNED != 0) {
            (true, true) => HostReg::MAPPED_PINNED,
            (true, false) => HostReg::MAPPED,
            _ => HostReg::PINNED,
        };
        let size = usize::try_from(size)
            .map_err(|_| CallError::new(Error::ParamInvalid, "size too large"))?;
        rt.backend()
            .host_register(ptr.addr(), size, how)
            .map_err(CallError::backend)?;
        Ok(())
    })
}

/// `aclError aclrtHostGetDevicePointer(void *pHost, void **pDevice, uint32_t flag)`: the device
/// address of the memory registered (mapped) at `pHost`, its start.
///
/// Codes: 100000 a NULL pointer, `flag` not 0; 207000 a SoC without registration; 107002;
/// 107000 nothing registered with a device address starts at `pHost`.
///
/// # Safety
///
/// `pDevice` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtHostGetDevicePointer(
    p_host: *mut c_void,
    p_device: *mut *mut c_void,
    flag: u32,
) -> aclError {
    api("aclrtHostGetDevicePointer", || {
        if p_host.is_null() {
            return Err(null_arg("pHost"));
        }
        // SAFETY: `p_device` is NULL or writable, by the caller's contract.
        unsafe { Out::new(p_device) }.write(
            || null_arg("pDevice"),
            || {
                if flag != 0 {
                    return Err(CallError::new(
                        Error::InvalidParam,
                        format!("flag is {flag}: it is reserved and must be 0"),
                    ));
                }
                let rt = registering_runtime("aclrtHostGetDevicePointer")?;
                let dev = rt
                    .backend()
                    .host_device_pointer(p_host.addr())
                    .map_err(CallError::backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(dev))
            },
        )
    })
}

/// `aclError aclrtHostUnregister(void *ptr)`: unregisters the memory registered at `ptr` (its
/// start); a copy queued on it that has not run fails (107000) instead of touching it.
///
/// Codes: 100000 NULL; 207000 a SoC without registration; 107002; 507911 nothing registered
/// starts at `ptr`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtHostUnregister(ptr: *mut c_void) -> aclError {
    api("aclrtHostUnregister", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        let rt = registering_runtime("aclrtHostUnregister")?;
        rt.backend()
            .host_unregister(ptr.addr())
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtHostMemMapCapabilities(uint32_t deviceId, aclrtHacType hacType,
/// aclrtHostMemMapCapability *capabilities)`: whether `hacType` on `deviceId` reaches
/// registered memory (see the module docs).
///
/// Codes: 100000 `capabilities` NULL; 107001 no such device; 107000 an unknown HAC type;
/// 107002; 207000 IPV350.
///
/// # Safety
///
/// `capabilities` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtHostMemMapCapabilities(
    device_id: u32,
    hac_type: u32,
    capabilities: *mut u32,
) -> aclError {
    api("aclrtHostMemMapCapabilities", || {
        // SAFETY: `capabilities` is NULL or writable, by the caller's contract.
        unsafe { Out::new(capabilities) }.write(
            || null_arg("capabilities"),
            || {
                let rt = runtime()?;
                rt.device_id(device_id)?;
                if hac_type >= HAC_TYPES {
                    return Err(CallError::new(
                        Error::ParamInvalid,
                        format!("hacType {hac_type} is not in [0, {HAC_TYPES})"),
                    ));
                }
                rt.current_device()?;
                let soc = rt.backend().soc();
                if soc == Soc::IPV350 {
                    return Err(CallError::new(
                        Error::FeatureNotSupport,
                        "aclrtHostMemMapCapabilities is not supported on IPV350 (as CANN \
                         documents)",
                    ));
                }
                let answer = if registers(soc) {
                    MAP_SUPPORTED
                } else {
                    MAP_NOT_SUPPORTED
                };
                Ok(answer)
            },
        )
    })
}

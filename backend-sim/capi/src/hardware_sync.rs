//! `aclrtGetHardwareSyncAddr`: the device address of the cube and vector cores'
//! synchronization registers.
//!
//! CANN (hicann/runtime `src/acl/aclrt_impl/kernel.cpp`, then `src/runtime/api/api_c_kernel.cc`
//! `rtsGetHardwareSyncAddr`): a NULL `addr` 107000; a chip without
//! `RT_FEATURE_KERNEL_INTER_CORE_SYNC_ADDR` 207000 (only `config/910_B_93/dev_info_reg.cc` has
//! it: Ascend910B and Ascend910_93); then `ApiImpl::GetC2cCtrlAddr` (`api_impl.cc`): no current
//! context 107002, else the device's address, asked of the driver once and kept by the device.
//! The simulator's address is a device area of its own (`acl_notify_sim::mem::device_area`):
//! the same for every call on the device, device memory that copies may name; no kernel runs
//! here to use it as registers.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Feature};

use crate::errmsg::{CallError, param};
use crate::ffi::{Out, aclError, api};
use crate::session::runtime;

/// `aclError aclrtGetHardwareSyncAddr(void **addr)`: the current device's inter-core
/// synchronization address (see the module).
///
/// Codes: 107000 NULL `addr`; 207000 a chip other than Ascend910B and Ascend910_93; 107002.
///
/// # Safety
///
/// `addr` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetHardwareSyncAddr(addr: *mut *mut c_void) -> aclError {
    api("aclrtGetHardwareSyncAddr", || {
        // SAFETY: `addr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(addr) }.write(
            || param("`addr` is NULL"),
            || {
                let rt = runtime()?;
                let soc = rt.backend().soc();
                if !soc.has(Feature::HardwareSyncAddr) {
                    return Err(CallError::new(
                        Error::FeatureNotSupport,
                        format!(
                            "{} has no inter-core synchronization address (Ascend910B and \
                             Ascend910_93 have)",
                            soc.name()
                        ),
                    ));
                }
                let (device, _) = rt.current()?;
                let a = rt
                    .backend()
                    .hardware_sync_addr(device)
                    .map_err(CallError::backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(a))
            },
        )
    })
}

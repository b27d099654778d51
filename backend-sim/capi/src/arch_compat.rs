//! `aclrtCheckArchCompatibility`: whether operators built for a chip run on this one, which
//! CANN decides by the two chips' NPU architectures (`acl_notify_core::devprops`).
//!
//! As hicann/runtime `src/acl/aclrt_impl/device.cpp` (no check of its own), then
//! `src/runtime/api/api_c.cc` (`rtCheckArchCompatibility`: this chip's name as
//! `aclrtGetSocName` gives it), `api_error.cc` (`CheckArchCompatibility`: NULL `socVersion`
//! or `canCompatible` 107000, an empty name 107000) and `api_impl.cc` (a name CANN's
//! platform configuration lacks 107000; then 1 when the two `NpuArch` values are equal, else
//! 0). So `Ascend910_9391` runs on an `Ascend910B3` (both 2201), `Ascend310P3` does not.
//!
//! The chip names are exact chip names, as `aclrtGetSocName` returns them: `Ascend910B` is the
//! old Ascend910 family's chip of that name (1001), not the Atlas A2 family. IPV350 has
//! no NPU architecture in CANN's configuration and the call is unsupported there (CANN's model
//! chapter): 207000.

use std::ffi::{CStr, c_char};

use acl_notify_core::Error;
use acl_notify_core::devprops::npu_arch_by_name;

use crate::errmsg::{CallError, param};
use crate::ffi::{Out, aclError, api};
use crate::session;

/// `aclError aclrtCheckArchCompatibility(const char *socVersion, int32_t *canCompatible)`:
/// writes 1 if operators built for chip `socVersion` run on this device's chip, else 0.
///
/// Codes: 107000 a NULL argument, an empty name or a chip CANN does not know; 207000 on
/// IPV350.
///
/// # Safety
///
/// `socVersion` is NULL or a NUL-terminated string; `canCompatible` is NULL or valid for
/// writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCheckArchCompatibility(
    soc_version: *const c_char,
    can_compatible: *mut i32,
) -> aclError {
    api("aclrtCheckArchCompatibility", || {
        if soc_version.is_null() {
            return Err(param("`socVersion` is NULL"));
        }
        // SAFETY: `can_compatible` is NULL or writable, by the caller's contract.
        unsafe { Out::new(can_compatible) }.write(
            || param("`canCompatible` is NULL"),
            || {
                // SAFETY: non-NULL and NUL-terminated, the caller's contract.
                let name = unsafe { CStr::from_ptr(soc_version) };
                if name.is_empty() {
                    return Err(param("`socVersion` is an empty string"));
                }
                let name = name.to_string_lossy();
                // This chip, as aclrtGetSocName names it (with or without a session).
                let chip = match session::existing_runtime() {
                    Some(rt) => rt.backend().chip(),
                    None => acl_notify_sim::Sim::chip_from_env().map_err(CallError::backend)?,
                };
                let Some(ours) = chip.soc().npu_arch() else {
                    return Err(CallError::new(
                        Error::FeatureNotSupport,
                        format!(
                            "{chip} has no NPU architecture in CANN's platform configuration \
                             (CANN lists the call as unsupported on it)"
                        ),
                    ));
                };
                let theirs = npu_arch_by_name(&name).ok_or_else(|| {
                    param(format!(
                        "socVersion \"{name}\" is not a chip CANN's platform configuration knows \
                         (an exact chip name such as aclrtGetSocName returns, e.g. {chip})"
                    ))
                })?;
                Ok(i32::from(theirs == ours))
            },
        )
    })
}

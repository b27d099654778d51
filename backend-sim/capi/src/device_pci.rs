//! The PCI bus ids of the simulated devices (`aclrtDeviceGetPCIBusId`,
//! `aclrtDeviceGetByPCIBusId`).
//!
//! A simulated device has no PCI function; its id is made up, stable and documented: device
//! `d` of the machine is `0000:XX:00.0` with `XX` = `d + 1` in two lower-case hex digits (the
//! driver's `%04x:%02x:%02x.%x` form of domain, bus, device and function, 12 characters:
//! hicann/runtime `src/runtime/driver/npu_driver_res.cc`, `NpuDriver::GetDevicePCIBusId`).
//! Every process of the simulated machine sees the same ids.
//!
//! Checks as CANN's: `src/acl/aclrt_impl/device.cpp` (NULL out-parameters: 100000), then
//! `src/runtime/api/impl/api_error.cc` (`GetDevicePCIBusId`: a negative device 107001, a buffer
//! shorter than 13 bytes 107000, then a device the machine lacks 107001) and `api_impl.cc`
//! (`GetDeviceByPCIBusId`: an id no device has is 107000).

use std::ffi::{CStr, c_char};

use acl_notify_core::{Backend as _, Error};

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, OutArray, aclError, api};
use crate::session::with_runtime;

/// CANN's `RT_PCI_BUS_ID_MIN_LEN`: the 12 characters and the NUL.
const MIN_LEN: i32 = 13;

/// The id of device `d`.
fn bus_id(d: u32) -> String {
    format!("0000:{:02x}:00.0", d + 1)
}

/// `aclError aclrtDeviceGetPCIBusId(int32_t deviceId, char *pciBusId, int32_t len)`: writes
/// the device's id (12 characters and a NUL).
///
/// Codes: 100000 NULL `pciBusId`; 107001 a negative device; 107000 `len` < 13; 107001 a device
/// the machine does not have.
///
/// # Safety
///
/// `pci_bus_id` is NULL or valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetPCIBusId(
    device_id: i32,
    pci_bus_id: *mut c_char,
    len: i32,
) -> aclError {
    // SAFETY: NULL or writable for `len` bytes, by the caller's contract (a negative `len`,
    // refused below, is no bytes).
    let out = unsafe { OutArray::new(pci_bus_id, usize::try_from(len).unwrap_or(0)) };
    api("aclrtDeviceGetPCIBusId", || {
        let out = out.check(|| null_arg("pciBusId"))?;
        if device_id < 0 {
            return Err(CallError::new(
                Error::InvalidDeviceId,
                format!("deviceId {device_id}: 0 or more"),
            ));
        }
        if len < MIN_LEN {
            return Err(param(format!(
                "len {len}: at least {MIN_LEN} (a PCI bus id and its NUL)"
            )));
        }
        let d = with_runtime(|rt| rt.device_id(device_id))?;
        let id = bus_id(d);
        // 12 bytes and its NUL, in `len` >= 13.
        out.put_cstr(id.as_bytes());
        Ok(())
    })
}

/// `aclError aclrtDeviceGetByPCIBusId(const char *pciBusId, int32_t *deviceId)`: the device
/// whose id [`aclrtDeviceGetPCIBusId`] writes is `pciBusId` (compared exactly, as CANN's
/// `strcmp`).
///
/// Codes: 100000 NULL `pciBusId` or `deviceId`; 107000 no device has that id.
///
/// # Safety
///
/// `pci_bus_id` is NULL or a NUL-terminated string; `device_id` is NULL or valid for writing
/// an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetByPCIBusId(
    pci_bus_id: *const c_char,
    device_id: *mut i32,
) -> aclError {
    api("aclrtDeviceGetByPCIBusId", || {
        if pci_bus_id.is_null() {
            return Err(null_arg("pciBusId"));
        }
        // SAFETY: `device_id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(device_id) }.write(
            || null_arg("deviceId"),
            || {
                // SAFETY: non-NULL and NUL-terminated (the caller's contract).
                let want = unsafe { CStr::from_ptr(pci_bus_id) }.to_bytes();
                let count = with_runtime(|rt| Ok(rt.backend().device_count()))?;
                let d = (0..count)
                    .find(|&d| bus_id(d).as_bytes() == want)
                    .ok_or_else(|| {
                        param(format!(
                            "no device has PCI bus id \"{}\" (this machine's {count} devices are \
                     0000:01:00.0 to {})",
                            String::from_utf8_lossy(want),
                            bus_id(count.saturating_sub(1))
                        ))
                    })?;
                Ok(d as i32)
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_driver_s_form() {
        assert_eq!(bus_id(0), "0000:01:00.0");
        assert_eq!(bus_id(15), "0000:10:00.0");
        assert_eq!(bus_id(0).len() as i32, MIN_LEN - 1);
    }
}

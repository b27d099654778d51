//! `aclrtMemUceRepair`: repairs memory with uncorrectable ECC (UCE) errors, by the addresses
//! `aclrtGetMemUceInfo` listed (`fault_repair`).
//!
//! Checks in CANN's order: hicann/runtime `src/acl/aclrt_impl/event.cpp`
//! (`aclrtMemUceRepairImpl`: a NULL array 100000, more than `MAX_MEM_UCE_INFO_ARRAY_SIZE` (128)
//! entries 100000, an entry whose reserved words are not all 0 100000), then
//! `src/runtime/api/impl/api_error.cc` (`MemUceRepair`: 207000 without fast recovery — the
//! SoC's `DeviceTaskAbort` feature here, as `aclrtGetMemUceInfo` —, a device the machine lacks
//! 107001) and `api_impl.cc` (107002 without a current context on that device), then the
//! driver's repair (`NpuDriver::MemUceRepair`).
//!
//! Honest semantics: a simulated device has no UCE errors (`aclrtGetMemUceInfo` lists none), so
//! an empty array repairs nothing and succeeds; any address named is memory without an error,
//! and what the driver answers for that (`halMemCtl`) is not public: 207000, saying why, as
//! `aclrtRepairError` answers a memory repair.

use acl_notify_core::{Error, Feature};

use crate::errmsg::{CallError, null_arg};
use crate::fault_repair::current_on;
use crate::ffi::{aclError, api};
use crate::session::runtime;

/// CANN's `MAX_MEM_UCE_INFO_ARRAY_SIZE`.
const MAX_ENTRIES: usize = 128;

/// `aclrtMemUceInfo` (`acl_rt.h`).
#[repr(C)]
#[derive(Debug)]
pub struct aclrtMemUceInfo {
    pub addr: *mut std::ffi::c_void,
    pub len: usize,
    pub reserved: [usize; 14],
}

/// `aclError aclrtMemUceRepair(int32_t deviceId, aclrtMemUceInfo *memUceInfoArray, size_t
/// arraySize)`.
///
/// Codes: 100000 NULL array, more than 128 entries, non-zero reserved words; 207000 a SoC
/// without fast recovery; 107001; 107002; 207000 an address to repair (no UCE error exists).
///
/// # Safety
///
/// `array` is NULL or valid for reading `array_size` entries (at most 128 are read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemUceRepair(
    device: i32,
    array: *const aclrtMemUceInfo,
    array_size: usize,
) -> aclError {
    api("aclrtMemUceRepair", || {
        if array.is_null() {
            return Err(null_arg("memUceInfoArray"));
        }
        if array_size > MAX_ENTRIES {
            return Err(CallError::new(
                Error::InvalidParam,
                format!("arraySize {array_size}: at most {MAX_ENTRIES}"),
            ));
        }
        for i in 0..array_size {
            // SAFETY: i < array_size <= 128 entries the caller's contract makes readable.
            let reserved = unsafe { (&raw const (*array.add(i)).reserved).read_unaligned() };
            if reserved.iter().any(|&w| w != 0) {
                return Err(CallError::new(
                    Error::InvalidParam,
                    format!("memUceInfoArray[{i}].reserved is a reserved parameter and must be 0"),
                ));
            }
        }
        let rt = runtime()?;
        rt.require(Feature::DeviceTaskAbort)?;
        let dev = rt.device_id(device)?;
        current_on(&rt, dev)?;
        if array_size == 0 {
            return Ok(());
        }
        // SAFETY: as above; entry 0 exists.
        let first = unsafe { (&raw const (*array).addr).read_unaligned() };
        Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "device {dev} has no memory with an uncorrectable error (aclrtGetMemUceInfo lists \
                 none): {first:p} and the other {} entries need no repair, and what the driver \
                 answers for memory without an error is not simulated",
                array_size - 1
            ),
        ))
    })
}

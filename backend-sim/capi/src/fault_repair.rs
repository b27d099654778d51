//! What a program asks about device faults it may repair: `aclrtGetMemUceInfo` (the addresses
//! of memory with uncorrectable ECC errors) and `aclrtRepairError`. The simulated devices have
//! no such faults (`aclrtGetErrorVerbose` answers `ACL_RT_NO_ERROR`), so the honest answers are
//! an empty list and, for "no error", a repair that has nothing to do.
//!
//! As hicann/runtime `src/acl/aclrt_impl/event.cpp` (the ACL layer's NULL checks, 100000, and
//! `arraySize` against the count), `src/runtime/api/impl/api_error.cc` (`GetMemUceInfo`: 207000
//! without fast recovery — `RT_FEATURE_DFX_FAST_RECOVER`, the SoC's `DeviceTaskAbort` feature
//! here —, then 107001 for a device that does not exist; `RepairError`: 107000 unless
//! `tryRepair` is 1, then 107001) and `api_impl.cc` (`GetMemUceInfo`: 107002 without a current
//! context on that device, then the driver's list — none here; `RepairError`: `ACL_RT_NO_ERROR`
//! succeeds with nothing to do, a memory error goes to the driver's repair, any other type is
//! 107000). The driver's answer to a memory repair (`halMemCtl`, `npu_driver_res.cc`) is not
//! public: with no UCE error to repair, the simulator refuses that one with 207000 and says
//! why; `aclrtMemUceRepair` (`uce_repair`) likewise.

use acl_notify_core::{Error, Feature};

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, aclError, api};
use crate::session::runtime;

/// `aclrtErrorType`'s `ACL_RT_NO_ERROR` and `ACL_RT_ERROR_MEMORY`.
const NO_ERROR: i32 = 0;
const ERROR_MEMORY: i32 = 1;

/// 107002 unless the calling thread's current context is on `device` (CANN's
/// `CheckCurCtxValid`).
pub(crate) fn current_on(rt: &crate::runtime::Runtime, device: u32) -> Result<(), CallError> {
    let (current, _) = rt.current()?;
    if current != device {
        return Err(CallError::new(
            Error::ContextNull,
            format!("the current context is on device {current}, not device {device}"),
        ));
    }
    Ok(())
}

/// `aclError aclrtGetMemUceInfo(int32_t deviceId, aclrtMemUceInfo *memUceInfoArray, size_t
/// arraySize, size_t *retSize)`: the device's memory ranges with uncorrectable errors: none on
/// a simulated device (`*retSize` = 0, the array untouched).
///
/// Codes: 100000 `memUceInfoArray` or `retSize` NULL; 207000 a SoC without fast recovery;
/// 107001 no such device; 107002 no current context on it.
///
/// # Safety
///
/// `retSize` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetMemUceInfo(
    device: i32,
    array: *mut u8,
    _array_size: usize,
    ret_size: *mut usize,
) -> aclError {
    api("aclrtGetMemUceInfo", || {
        if array.is_null() {
            return Err(null_arg("memUceInfoArray"));
        }
        // SAFETY: `ret_size` is NULL or writable, by the caller's contract.
        unsafe { Out::new(ret_size) }.write(
            || null_arg("retSize"),
            || {
                let rt = runtime()?;
                rt.require(Feature::DeviceTaskAbort)?;
                let dev = rt.device_id(device)?;
                current_on(&rt, dev)?;
                Ok(0)
            },
        )
    })
}

/// `aclError aclrtRepairError(int32_t deviceId, const aclrtErrorInfo *errorInfo)`: repairs the
/// fault `aclrtGetErrorVerbose` reported. For `ACL_RT_NO_ERROR` (all a simulated device
/// reports) there is nothing to repair: success.
///
/// Codes: 100000 `errorInfo` NULL; 107000 `tryRepair` not 1, or an error type other than
/// none, memory and (refused below) the others CANN lists; 107001 no such device; 207000 a
/// memory error (the simulator has none, and what the driver answers is not public).
///
/// # Safety
///
/// `errorInfo` is NULL or points to a readable `aclrtErrorInfo` (`tryRepair` at 0,
/// `errorType` at 4).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRepairError(device: i32, info: *const u8) -> aclError {
    api("aclrtRepairError", || {
        if info.is_null() {
            return Err(null_arg("errorInfo"));
        }
        // SAFETY: non-NULL, an `aclrtErrorInfo` by the caller's contract.
        let (try_repair, kind) =
            unsafe { (info.read(), info.add(4).cast::<i32>().read_unaligned()) };
        if try_repair != 1 {
            return Err(param(format!(
                "errorInfo->tryRepair is {try_repair}: it must be 1 (what aclrtGetErrorVerbose \
                 sets for a fault it can repair)"
            )));
        }
        let rt = runtime()?;
        rt.device_id(device)?;
        match kind {
            NO_ERROR => Ok(()),
            ERROR_MEMORY => Err(CallError::new(
                Error::FeatureNotSupport,
                "a memory (UCE) error: the simulated devices have none to repair, and the \
                 driver's answer to such a repair is not public",
            )),
            other => Err(param(format!(
                "errorInfo->errorType {other}: only ACL_RT_NO_ERROR (0) and ACL_RT_ERROR_MEMORY \
                 (1) are repaired"
            ))),
        }
    })
}

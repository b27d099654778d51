//! `aclrtGetStreamAvailableNum`: how many more streams the program may create on the current
//! device, from the stream accounting `aclrtCreateStream` refuses by (207008 once none is
//! left; `runtime::streaminfo`), against the chip's streams per device (`Soc::max_streams`,
//! CANN's `maxAllocStreamNum`).
//!
//! As hicann/runtime `src/acl/aclrt_impl/stream.cpp` (NULL `streamCount` 100000), then
//! `src/runtime/api/api_c_stream.cc` (`rtsStreamGetAvailableNum`: 207000 on a chip without
//! `RT_FEATURE_STREAM_GET_AVILIABLE_NUM`; every chip of the table has it but IPV350, which
//! CANN's stream chapter lists as unsupported), `api_impl.cc` (`GetFreeStreamNum`: the
//! current context's device) and `src/runtime/driver/npu_driver_res.cc`
//! (`GetAvailStreamNum`: the driver's capacity less the ids in use).
//!
//! The driver counts every stream of the device, of every process, a context's default stream
//! included. The simulator counts the streams this process created (`aclrtCreateStream`,
//! `aclrtCreateStreamWithConfig`, `aclrtCreateStreamV2`): a draining `aclrtDestroyStream`
//! gives its stream back when it finishes, a device reset gives back all of the device's.

use acl_notify_core::{Backend, Error};

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{Out, aclError, api};
use crate::session::with_runtime;

/// `aclError aclrtGetStreamAvailableNum(uint32_t *streamCount)`: how many more streams may be
/// created on the current device.
///
/// Codes: 100000 NULL `streamCount`; 207000 on IPV350; 107002 no current context.
///
/// # Safety
///
/// `streamCount` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetStreamAvailableNum(stream_count: *mut u32) -> aclError {
    api("aclrtGetStreamAvailableNum", || {
        // SAFETY: `stream_count` is NULL or writable, by the caller's contract.
        unsafe { Out::new(stream_count) }.write(
            || null_arg("streamCount"),
            || {
                let n = with_runtime(|rt| {
                    rt.streams_available()?.ok_or_else(|| {
                        CallError::new(
                            Error::FeatureNotSupport,
                            format!(
                                "{} has no stream count (CANN's stream chapter lists \
                         aclrtGetStreamAvailableNum as unsupported on it)",
                                rt.backend().soc()
                            ),
                        )
                    })
                })?;
                Ok(n)
            },
        )
    })
}

//! `aclrtCacheLastTaskOpInfo` and `aclrtCacheLastTaskExtendInfo` in the C ABI: the caller's
//! bytes are copied onto the task its thread stored last in a model (`runtime::task_info`
//! keeps them and says which CANN checks it follows there).
//!
//! The checks made here, in CANN's order (hicann/runtime):
//! - operator information: `src/acl/aclrt_impl/kernel.cpp` `aclrtCacheLastTaskOpInfoImpl`
//!   refuses NULL and a size of 0 with 100000; then `src/runtime/api/api_c_standard_soc.cc`
//!   `rtCacheLastTaskOpInfo`: a chip without ACL Graph (`RT_FEATURE_MODEL_ACL_GRAPH`) is
//!   207000; then `src/runtime/api/impl/api_error.cc` `ApiErrorDecorator::CacheLastTaskOpInfo`:
//!   more than `MAX_SHAPE_INFO_SIZE` (64 KiB) is 107000.
//! - extended information: the ACL layer checks nothing; the chip first (207000), then
//!   `ApiErrorDecorator::CacheLastTaskExtendInfo`: NULL or a size of 0 is 107000, and only the
//!   first 4096 bytes of a longer one are kept (CANN logs a warning and goes on).

use std::ffi::{c_char, c_void};

use acl_notify_core::{Error, Feature};

use crate::errmsg::{CallError, param};
use crate::ffi::{aclError, api};
use crate::runtime::task_info::InfoKind;
use crate::session::runtime;

/// The most operator-information bytes a call may give (CANN's `MAX_SHAPE_INFO_SIZE`).
pub(crate) const MAX_OP_INFO: usize = 64 * 1024;
/// The most extended-information bytes kept (CANN's `maxExtendInfoSize`): the rest is dropped.
pub(crate) const MAX_EXTEND_INFO: usize = 4096;

/// `aclError aclrtCacheLastTaskOpInfo(const void *infoPtr, size_t infoSize)`: a copy of the
/// `infoSize` bytes at `infoPtr` becomes the operator information of the task this thread
/// captured last (replacing any earlier).
///
/// Codes: 100000 NULL or a size of 0; 207000 a chip without ACL Graph; 107000 more than
/// 64 KiB; 107003 the last task's stream is of another context; 507000 the thread's last task
/// is not in a capture now, or the capture's `ACL_STREAM_ATTR_CACHE_OP_INFO` is off.
///
/// # Safety
/// `info` points to `size` readable bytes (checked: not NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCacheLastTaskOpInfo(info: *const c_void, size: usize) -> aclError {
    api("aclrtCacheLastTaskOpInfo", || {
        if info.is_null() {
            return Err(CallError::new(Error::InvalidParam, "`infoPtr` is NULL"));
        }
        if size == 0 {
            return Err(CallError::new(
                Error::InvalidParam,
                "`infoSize` is 0: it must be positive",
            ));
        }
        let rt = runtime()?;
        rt.require(Feature::ModelCapture)?;
        if size > MAX_OP_INFO {
            return Err(param(format!(
                "`infoSize` {size} is out of range (0, {MAX_OP_INFO}]"
            )));
        }
        // SAFETY: the caller's contract (not NULL: checked).
        let bytes = unsafe { std::slice::from_raw_parts(info.cast::<u8>(), size) };
        rt.cache_last_task_info(InfoKind::Op, bytes)
    })
}

/// `aclError aclrtCacheLastTaskExtendInfo(const char *extendInfoPtr, size_t infoSize)`: a copy
/// of the first `min(infoSize, 4096)` bytes at `extendInfoPtr` becomes the extended
/// information of the task this thread stored last in a model (replacing any earlier);
/// `aclmdlRIDebugJsonPrint` shows it.
///
/// Codes: 207000 a chip without ACL Graph; 107000 NULL or a size of 0; 107003 the last task's
/// stream is of another context; 507000 the thread's last task is in no model now.
///
/// # Safety
/// `info` points to `size` readable bytes (checked: not NULL; at most 4096 are read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCacheLastTaskExtendInfo(
    info: *const c_char,
    size: usize,
) -> aclError {
    api("aclrtCacheLastTaskExtendInfo", || {
        let rt = runtime()?;
        rt.require(Feature::ModelCapture)?;
        if info.is_null() {
            return Err(param("`extendInfoPtr` is NULL"));
        }
        if size == 0 {
            return Err(param("`infoSize` is 0: it must not be"));
        }
        // SAFETY: the caller's contract (not NULL: checked); no more than `size` bytes.
        let bytes =
            unsafe { std::slice::from_raw_parts(info.cast::<u8>(), size.min(MAX_EXTEND_INFO)) };
        rt.cache_last_task_info(InfoKind::Extend, bytes)
    })
}

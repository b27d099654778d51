//! The exported memory functions (`acl/acl_rt.h`): device and host allocation, copies and
//! sets (synchronous and on streams) and memory information. Concrete over the simulator,
//! whose device memory ([`acl_notify_sim::mem`]) has no counterpart in the core's backend
//! traits yet.
//!
//! Check order, from hicann/runtime `src/acl/aclrt_impl/memory.cpp`: a copy or set of 0 bytes
//! succeeds before anything else is looked at; NULL pointers are 100000; an unknown copy kind
//! is 100000 (`MemcpyKindTranslate`, which refuses `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE` and
//! `ACL_MEMCPY_INTER_DEVICE_TO_DEVICE` too); an allocation size of 0 is 100000; then the
//! runtime's checks (the session started if need be; 107002 no current device, 107000 ranges).

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error};
use acl_notify_sim::mem::MemcpyKind;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{aclError, aclrtStream, api};
use crate::session::runtime;

/// `aclrtMemcpyKind` → the simulator's kind; `None` for the kinds `aclrtMemcpy` refuses.
fn kind(k: u32) -> Option<MemcpyKind> {
    Some(match k {
        0 => MemcpyKind::HostToHost,
        // ACL_MEMCPY_HOST_TO_BUF_TO_DEVICE (5) is a host-to-device copy through a bounce
        // buffer: the same to the simulator.
        1 | 5 => MemcpyKind::HostToDevice,
        2 => MemcpyKind::DeviceToHost,
        3 => MemcpyKind::DeviceToDevice,
        4 => MemcpyKind::Default,
        _ => return None,
    })
}

fn bad_kind(k: u32) -> CallError {
    CallError::new(
        Error::InvalidParam,
        format!(
            "kind {k} is not a copy kind aclrtMemcpy accepts (ACL_MEMCPY_HOST_TO_HOST, \
             _HOST_TO_DEVICE, _DEVICE_TO_HOST, _DEVICE_TO_DEVICE, _DEFAULT or \
             _HOST_TO_BUF_TO_DEVICE)"
        ),
    )
}

fn positive(size: usize) -> Result<(), CallError> {
    if size == 0 {
        return Err(CallError::new(Error::InvalidParam, "size is 0"));
    }
    Ok(())
}

/// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`: device
/// memory on the current device. Every policy is accepted (CANN maps an unknown one to its
/// default) and served by the same simulated memory.
///
/// Codes: 100000 devPtr NULL or size 0; 107002; 207001 out of device memory.
///
/// # Safety
///
/// `dev_ptr` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMalloc(
    dev_ptr: *mut *mut c_void,
    size: usize,
    policy: u32,
) -> aclError {
    api("aclrtMalloc", || {
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        positive(size)?;
        let rt = runtime()?;
        let device = rt.current_device()?;
        let p = rt
            .backend()
            .malloc(device, size, policy)
            .map_err(CallError::backend)?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { dev_ptr.write_unaligned(std::ptr::with_exposed_provenance_mut(p)) };
        Ok(())
    })
}

/// `aclError aclrtFree(void *devPtr)`.
///
/// Codes: 100000 NULL; 107000 not a live allocation of this process.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> aclError {
    api("aclrtFree", || {
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        runtime()?
            .backend()
            .free(dev_ptr.addr())
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMallocHost(void **hostPtr, size_t size)`: page-aligned host memory.
///
/// Codes: 100000 hostPtr NULL or size 0; 207001.
///
/// # Safety
///
/// `host_ptr` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocHost(host_ptr: *mut *mut c_void, size: usize) -> aclError {
    api("aclrtMallocHost", || {
        if host_ptr.is_null() {
            return Err(null_arg("hostPtr"));
        }
        positive(size)?;
        let p = runtime()?
            .backend()
            .malloc_host(size)
            .map_err(CallError::backend)?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { host_ptr.write_unaligned(std::ptr::with_exposed_provenance_mut(p)) };
        Ok(())
    })
}

/// `aclError aclrtFreeHost(void *hostPtr)`.
///
/// Codes: 100000 NULL; 107000 not memory of `aclrtMallocHost`.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFreeHost(host_ptr: *mut c_void) -> aclError {
    api("aclrtFreeHost", || {
        if host_ptr.is_null() {
            return Err(null_arg("hostPtr"));
        }
        runtime()?
            .backend()
            .free_host(host_ptr.addr())
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind)`: a checked copy (see [`acl_notify_sim::mem`]).
///
/// Codes: 0 count 0; 100000 dst/src NULL or kind; 107002; 107000 count > destMax, a
/// side that is not what kind says, a device range outside the live allocations.
///
/// # Safety
///
/// Host sides as CANN requires: valid for `count` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind_: u32,
) -> aclError {
    api("aclrtMemcpy", || {
        if count == 0 {
            return Ok(());
        }
        if dst.is_null() {
            return Err(null_arg("dst"));
        }
        if src.is_null() {
            return Err(null_arg("src"));
        }
        let k = kind(kind_).ok_or_else(|| bad_kind(kind_))?;
        let rt = runtime()?;
        rt.current_device()?;
        // SAFETY: the caller's contract for the host sides; device sides are checked.
        unsafe {
            rt.backend()
                .memcpy(dst.addr(), dest_max, src.addr(), count, k)
        }
        .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count)`: sets
/// `count` bytes of device memory to the low byte of `value`.
///
/// Codes: 0 count 0; 100000 NULL; 107002; 107000 count > maxCount or a range outside
/// the live allocations.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemset(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
) -> aclError {
    api("aclrtMemset", || {
        if count == 0 {
            return Ok(());
        }
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        let rt = runtime()?;
        rt.current_device()?;
        rt.backend()
            .memset(dev_ptr.addr(), max_count, value as u8, count)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`: [`aclrtMemcpy`] in stream order (NULL: the
/// current device's default stream). Ranges are checked at the call and device ranges again
/// when the task runs.
///
/// Codes: as `aclrtMemcpy`; 107017 bad stream; 107003 a stream of another device; 507002.
///
/// # Safety
///
/// Host sides valid for `count` bytes until the task has run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyAsync(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind_: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemcpyAsync", || {
        if count == 0 {
            return Ok(());
        }
        if dst.is_null() {
            return Err(null_arg("dst"));
        }
        if src.is_null() {
            return Err(null_arg("src"));
        }
        let k = kind(kind_).ok_or_else(|| bad_kind(kind_))?;
        let rt = runtime()?;
        let s = rt.resolve_stream(stream.addr())?;
        // SAFETY: the caller's contract for the host sides; device sides are checked.
        unsafe {
            rt.backend()
                .memcpy_async(dst.addr(), dest_max, src.addr(), count, k, s)
        }
        .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value, size_t count,
/// aclrtStream stream)`: [`aclrtMemset`] in stream order.
///
/// Codes: as `aclrtMemset`; 107017; 107003; 507002.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemsetAsync(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemsetAsync", || {
        if count == 0 {
            return Ok(());
        }
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        let rt = runtime()?;
        let s = rt.resolve_stream(stream.addr())?;
        rt.backend()
            .memset_async(dev_ptr.addr(), max_count, value as u8, count, s)
            .map_err(CallError::backend)
    })
}

/// Highest `aclrtMemAttr` (`ACL_MEM_P2P_HUGE1G`).
const MEM_ATTR_MAX: u32 = 17;

/// `aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total)`: the current
/// device's memory. The simulator has one kind of device memory, so every attribute reports
/// the same pool.
///
/// Codes: 100000 free/total NULL; 107002; 107000 unknown attr.
///
/// # Safety
///
/// `free` and `total` are NULL or valid for writing a `size_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetMemInfo(
    attr: u32,
    free: *mut usize,
    total: *mut usize,
) -> aclError {
    api("aclrtGetMemInfo", || {
        if free.is_null() {
            return Err(null_arg("free"));
        }
        if total.is_null() {
            return Err(null_arg("total"));
        }
        let rt = runtime()?;
        let device = rt.current_device()?;
        if attr > MEM_ATTR_MAX {
            return Err(CallError::new(
                Error::ParamInvalid,
                format!("attr {attr} is not an aclrtMemAttr (0 to {MEM_ATTR_MAX})"),
            ));
        }
        let (f, t) = rt.backend().mem_info(device).map_err(CallError::backend)?;
        // SAFETY: non-NULL, and the caller guarantees both are writable.
        unsafe {
            free.write_unaligned(f as usize);
            total.write_unaligned(t as usize);
        }
        Ok(())
    })
}

/// `aclError aclrtReduceAsync(void *dst, const void *src, uint64_t count, aclrtReduceKind
/// kind, aclDataType type, aclrtStream stream, void *reserve)`: `dst = kind(dst, src)` over
/// `count` bytes, in stream order (see [`acl_notify_sim::mem::reduce`]).
///
/// Codes (hicann/runtime `aclrtReduceAsyncImpl`): 100000 dst/src NULL, reserve not NULL, a
/// type outside CANN's reduce types; 107002; 207000 a kind or type the simulator does
/// not reduce (EQUAL; fp16, bf16, int4, uint8, uint16) or IPV350; 107000 count or ranges;
/// 107017; 107003.
///
/// # Safety
///
/// Plain pointers compared against allocations; nothing is dereferenced on the host.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtReduceAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: u64,
    kind_: u32,
    type_: i32,
    stream: aclrtStream,
    reserve: *mut c_void,
) -> aclError {
    use acl_notify_sim::mem::reduce::{ReduceOp, ReduceType};
    api("aclrtReduceAsync", || {
        if dst.is_null() {
            return Err(null_arg("dst"));
        }
        if src.is_null() {
            return Err(null_arg("src"));
        }
        if !reserve.is_null() {
            return Err(CallError::new(
                Error::InvalidParam,
                "reserve is a reserved parameter and must be NULL",
            ));
        }
        // CANN's reduce types (kMapDataType): fp32, fp16, int16, int4, int8, int32, bf16,
        // uint8, uint16, uint32.
        let ty = match type_ {
            0 => Some(ReduceType::F32),
            3 => Some(ReduceType::I32),
            8 => Some(ReduceType::U32),
            6 => Some(ReduceType::I16),
            2 => Some(ReduceType::I8),
            1 | 27 | 29 | 4 | 7 => None,
            t => {
                return Err(CallError::new(
                    Error::InvalidParam,
                    format!("type {t} is not a data type aclrtReduceAsync supports"),
                ));
            }
        };
        let rt = runtime()?;
        let s = rt.resolve_stream(stream.addr())?;
        let unsupported = |what: String| CallError::new(Error::FeatureNotSupport, what);
        if rt.backend().soc() == acl_notify_core::Soc::IPV350 {
            return Err(unsupported(
                "aclrtReduceAsync is not supported on IPV350".into(),
            ));
        }
        let op = match kind_ {
            10 => ReduceOp::Sum,
            11 => ReduceOp::Max,
            12 => ReduceOp::Min,
            13 => {
                return Err(unsupported(
                    "ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL is not simulated".into(),
                ));
            }
            k => {
                return Err(param(format!(
                    "kind {k} is not an aclrtReduceKind (10 SUM, 11 MAX, 12 MIN, 13 EQUAL)"
                )));
            }
        };
        let ty = ty.ok_or_else(|| {
            unsupported(format!(
                "aclDataType {type_} is not simulated by aclrtReduceAsync (fp32, int32, uint32, \
                 int16 and int8 are)"
            ))
        })?;
        let count = usize::try_from(count).map_err(|_| param("count is too large"))?;
        rt.backend()
            .reduce_async(dst.addr(), src.addr(), count, op, ty, s)
            .map_err(CallError::backend)
    })
}

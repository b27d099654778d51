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
use acl_notify_sim::mem::pitched::Pitched;
use acl_notify_sim::mem::{AsyncCopy, MemcpyKind, Rounding};

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Checked, Out, aclError, aclrtStream, api};
use crate::runtime::Runtime;
use crate::runtime::capture::Captured;
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

/// The checks of `aclrtMemcpy` and `aclrtMemcpyAsync` before the runtime's: a copy of 0
/// bytes succeeds (`None`), then NULL pointers and the kind (100000).
pub(crate) fn copy_args(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    k: u32,
) -> Result<Option<MemcpyKind>, CallError> {
    if count == 0 {
        return Ok(None);
    }
    if dst.is_null() {
        return Err(null_arg("dst"));
    }
    if src.is_null() {
        return Err(null_arg("src"));
    }
    kind(k).map(Some).ok_or_else(|| bad_kind(k))
}

/// The checks of `aclrtMemset` and `aclrtMemsetAsync` before the runtime's: a set of 0 bytes
/// succeeds (`false`: nothing to do), then a NULL pointer (100000).
fn set_args(dev_ptr: *mut c_void, count: usize) -> Result<bool, CallError> {
    if count == 0 {
        return Ok(false);
    }
    if dev_ptr.is_null() {
        return Err(null_arg("devPtr"));
    }
    Ok(true)
}

fn positive(size: usize) -> Result<(), CallError> {
    if size == 0 {
        return Err(CallError::new(Error::InvalidParam, "size is 0"));
    }
    Ok(())
}

/// The allocation behind `aclrtMalloc` and its variants, once their own checks passed: on
/// the current device (or `device`, already checked against it), written to `*dev_ptr`.
fn malloc_into(
    dev_ptr: Checked<*mut c_void>,
    size: usize,
    policy: u32,
    rounding: Rounding,
) -> Result<(), CallError> {
    let rt = runtime()?;
    let device = rt.current_device()?;
    let p = rt
        .backend()
        .malloc_rounded(device, size, policy, rounding)
        .map_err(CallError::backend)?;
    dev_ptr.put(std::ptr::with_exposed_provenance_mut(p));
    Ok(())
}

/// The checks `aclrtMalloc`, `aclrtMallocAlign32` and `aclrtMallocCached` share (hicann/runtime
/// `aclMallocMemInner` / `aclrtMallocCachedImpl`: devPtr, then size), then the allocation.
fn malloc_plain(
    dev_ptr: Out<*mut c_void>,
    size: usize,
    policy: u32,
    rounding: Rounding,
) -> Result<(), CallError> {
    let dev_ptr = dev_ptr.check(|| null_arg("devPtr"))?;
    positive(size)?;
    malloc_into(dev_ptr, size, policy, rounding)
}

/// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`: device
/// memory on the current device. Every policy is accepted (CANN maps an unknown one to its
/// default) and served by the same simulated memory; the size is padded as CANN pads it
/// (not for the 1 GiB huge-page policies).
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
    // SAFETY: NULL or writable, by the caller's contract.
    let dev_ptr = unsafe { Out::new(dev_ptr) };
    api("aclrtMalloc", || {
        malloc_plain(dev_ptr, size, policy, Rounding::of_malloc(policy))
    })
}

/// `aclError aclrtMallocAlign32(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`:
/// [`aclrtMalloc`] with the size rounded up to a multiple of 32 and no padding
/// (`aclrtMallocAlign32Impl`, hicann/runtime `src/acl/aclrt_impl/memory.cpp`). Freed by
/// `aclrtFree`.
///
/// Codes: as `aclrtMalloc`.
///
/// # Safety
///
/// `dev_ptr` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocAlign32(
    dev_ptr: *mut *mut c_void,
    size: usize,
    policy: u32,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let dev_ptr = unsafe { Out::new(dev_ptr) };
    api("aclrtMallocAlign32", || {
        malloc_plain(dev_ptr, size, policy, Rounding::Align32)
    })
}

/// `aclError aclrtMallocCached(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`:
/// device memory "with cache" — on a device, memory the AI CPU reaches through its cache. The
/// simulator has one kind of device memory, so this is [`aclrtMalloc`], padded the same way
/// (`aclrtMallocCachedImpl`). Freed by `aclrtFree`.
///
/// Codes: as `aclrtMalloc`.
///
/// # Safety
///
/// `dev_ptr` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocCached(
    dev_ptr: *mut *mut c_void,
    size: usize,
    policy: u32,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let dev_ptr = unsafe { Out::new(dev_ptr) };
    api("aclrtMallocCached", || {
        malloc_plain(dev_ptr, size, policy, Rounding::of_malloc(policy))
    })
}

/// `aclrtMallocAttribute` (`acl_rt.h`): an attribute type and a union of `uint16_t moduleId`,
/// `uint32_t deviceId`, `uint32_t vaFlag` and `uint8_t rsv[8]` (4-byte aligned).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct MallocAttribute {
    pub(crate) attr: u32,
    pub(crate) value: [u32; 2],
}

/// `aclrtMallocConfig` (`acl_rt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct MallocConfig {
    pub(crate) attrs: *const MallocAttribute,
    pub(crate) num_attrs: usize,
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<MallocAttribute>() == 12);
    assert!(std::mem::offset_of!(MallocAttribute, value) == 4);
    assert!(std::mem::size_of::<MallocConfig>() == 16);
};

/// `ACL_RT_MEM_ATTR_DEVICE_ID`.
const MEM_ATTR_DEVICE_ID: u32 = 2;

/// `aclError aclrtMallocWithCfg(void **devPtr, size_t size, aclrtMemMallocPolicy policy,
/// aclrtMallocConfig *cfg)`: device memory, the size rounded up to a multiple of 32 without
/// padding, with optional attributes (`aclrtMallocInnerWithCfg`, hicann/runtime
/// `src/acl/aclrt_impl/memory.cpp`, and `ApiImpl::DevMalloc` / `ParseMallocCfg`,
/// `src/runtime/api/impl/api_impl.cc`): `ACL_RT_MEM_ATTR_RSV` and `_MODULE_ID` are accepted,
/// `_DEVICE_ID` must name the current device, any other type is refused; of repeated
/// attributes the last counts. The memory-type and read-only bits of `policy` are accepted
/// (one kind of memory). Freed by `aclrtFree`.
///
/// Codes: 100000 devPtr NULL, `cfg->attrs` NULL with `cfg->numAttrs` > 0, size 0; 107002;
/// 107000 an attribute type above `ACL_RT_MEM_ATTR_DEVICE_ID`, another device; 207001.
///
/// # Safety
///
/// `dev_ptr` is NULL or valid for writing a pointer; `cfg` is NULL or valid for reading, its
/// `attrs` NULL or valid for reading `numAttrs` attributes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocWithCfg(
    dev_ptr: *mut *mut c_void,
    size: usize,
    policy: u32,
    cfg: *const c_void,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let dev_ptr = unsafe { Out::new(dev_ptr) };
    api("aclrtMallocWithCfg", || {
        let dev_ptr = dev_ptr.check(|| null_arg("devPtr"))?;
        // SAFETY: the caller's contract, passed on.
        unsafe { malloc_with_cfg(dev_ptr, size, policy, cfg) }
    })
}

/// `aclrtMallocWithCfg`'s work once devPtr is checked, shared with
/// `aclrtMallocForTaskScheduler` (both `aclrtMallocInnerWithCfg` in hicann/runtime
/// `src/acl/aclrt_impl/memory.cpp`).
///
/// # Safety
///
/// `cfg` as for `aclrtMallocWithCfg`.
unsafe fn malloc_with_cfg(
    dev_ptr: Checked<*mut c_void>,
    size: usize,
    policy: u32,
    cfg: *const c_void,
) -> Result<(), CallError> {
    // SAFETY: NULL or readable by the caller's contract.
    let cfg = unsafe { cfg.cast::<MallocConfig>().as_ref() }.copied();
    if let Some(c) = cfg
        && c.num_attrs != 0
        && c.attrs.is_null()
    {
        return Err(CallError::new(
            Error::InvalidParam,
            format!(
                "cfg->attrs is NULL but cfg->numAttrs is {}: attrs must not be NULL when \
                 numAttrs is not 0",
                c.num_attrs
            ),
        ));
    }
    positive(size)?;
    let rt = runtime()?;
    let current = rt.current_device()?;
    let attrs: &[MallocAttribute] = match cfg {
        // SAFETY: non-NULL (checked above when num_attrs > 0), and the caller guarantees
        // `num_attrs` readable attributes; a count no memory can hold is refused.
        Some(c) => unsafe {
            crate::ffi::c_array(c.attrs, c.num_attrs, "cfg->numAttrs", Error::InvalidParam)?
        },
        None => &[],
    };
    let mut device = current;
    for (i, a) in attrs.iter().enumerate() {
        match a.attr {
            0 | 1 => {}
            MEM_ATTR_DEVICE_ID => device = a.value[0],
            t => {
                return Err(param(format!(
                    "cfg->attrs[{i}].attr is {t}: expected ACL_RT_MEM_ATTR_RSV (0), \
                     _MODULE_ID (1) or _DEVICE_ID (2)"
                )));
            }
        }
    }
    if device != current {
        return Err(param(format!(
            "the config's ACL_RT_MEM_ATTR_DEVICE_ID is {device}, but the current device is \
             {current}: memory is allocated on the current device only"
        )));
    }
    malloc_into(dev_ptr, size, policy, Rounding::Align32)
}

/// `aclError aclrtMallocForTaskScheduler(void **devPtr, size_t size, aclrtMemMallocPolicy
/// policy, aclrtMallocConfig *cfg)`: memory the device's task scheduler can use
/// (`aclrtMallocForTaskSchedulerImpl` is `aclrtMallocWithCfg` with the `RT_MEM_ADVISE_TS`
/// advice, which `ApiImpl::DevMalloc`, `src/runtime/api/impl/api_impl.cc`, turns into memory
/// below 4 GiB of the device's address space): the simulator has one kind of device memory,
/// so it is [`aclrtMallocWithCfg`]'s. Not on IPV350 (CANN's documentation,
/// `docs/zh/api_ref/11-01_device_memory_malloc_and_free.md`).
///
/// Codes: as `aclrtMallocWithCfg`; 207000 IPV350 (after devPtr NULL).
///
/// # Safety
///
/// As `aclrtMallocWithCfg`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocForTaskScheduler(
    dev_ptr: *mut *mut c_void,
    size: usize,
    policy: u32,
    cfg: *const c_void,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let dev_ptr = unsafe { Out::new(dev_ptr) };
    api("aclrtMallocForTaskScheduler", || {
        let dev_ptr = dev_ptr.check(|| null_arg("devPtr"))?;
        let soc = runtime()?.backend().soc();
        if soc == acl_notify_core::Soc::IPV350 {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                "aclrtMallocForTaskScheduler is not supported on IPV350",
            ));
        }
        // SAFETY: the caller's contract, passed on.
        unsafe { malloc_with_cfg(dev_ptr, size, policy, cfg) }
    })
}

/// `aclError aclrtFree(void *devPtr)`.
///
/// Codes: 100000 NULL; 107000 not a live allocation of this process (a buffer's data region,
/// `aclrtAllocBuf`'s, included).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFree(dev_ptr: *mut c_void) -> aclError {
    api("aclrtFree", || {
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        free_device(&*runtime()?, dev_ptr.addr())
    })
}

/// What `aclrtFree` does with a non-NULL `ptr` (also `aclrtFreeWithDevSync`'s free).
pub(crate) fn free_device(rt: &Runtime, ptr: usize) -> Result<(), CallError> {
    rt.mbufs.refuse_region(ptr)?;
    rt.backend().free(ptr).map_err(CallError::backend)
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
        // SAFETY: `host_ptr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(host_ptr) }.write(
            || null_arg("hostPtr"),
            || {
                positive(size)?;
                let p = runtime()?
                    .backend()
                    .malloc_host(size)
                    .map_err(CallError::backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(p))
            },
        )
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
/// aclrtMemcpyKind kind)`: a checked copy (see [`acl_notify_sim::mem`]), each side as its
/// address is: CANN's synchronous copy takes any of the five kinds and does not look at it
/// (hicann/runtime `api_error.cc`, `ApiErrorDecorator::MemCopySync`).
///
/// Codes: 0 count 0; 100000 dst/src NULL or kind; 107002; 107000 count > destMax, a device
/// range outside the live allocations.
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
        let Some(k) = copy_args(dst, src, count, kind_)? else {
            return Ok(());
        };
        let rt = runtime()?;
        rt.capture_mode_allows("aclrtMemcpy")?;
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
/// `count` bytes of device memory, or of host memory of `aclrtMallocHost`, to the low byte
/// of `value`.
///
/// Codes: 0 count 0; 100000 NULL; 107002; 107000 count > maxCount or a range outside
/// the live allocations (device, or `aclrtMallocHost`).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemset(
    dev_ptr: *mut c_void,
    max_count: usize,
    value: i32,
    count: usize,
) -> aclError {
    api("aclrtMemset", || {
        if !set_args(dev_ptr, count)? {
            return Ok(());
        }
        let rt = runtime()?;
        rt.capture_mode_allows("aclrtMemset")?;
        rt.current_device()?;
        rt.backend()
            .memset(dev_ptr.addr(), max_count, value as u8, count)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
/// aclrtMemcpyKind kind, aclrtStream stream)`: [`aclrtMemcpy`] in stream order (NULL: the
/// current device's default stream). Ranges are checked at the call and device ranges again
/// when the task runs. With pageable host memory on one side and device memory on the other,
/// the stream is synchronized and the copy made before the call returns; a copy within the
/// host is refused ([`acl_notify_sim::mem::unqueued`]: CANN's runtime does both, and refuses
/// the former in a capture). The kind is first corrected as CANN's runtime corrects it by
/// where the addresses are (`acl_notify_sim::mem::direction`): between device and
/// page-locked host memory it is what the addresses are, whatever it said.
///
/// Codes: as `aclrtMemcpy`; 107000 an explicit kind that calls a device or page-locked side
/// what it is not when the other is pageable host memory; 207000 both sides host memory
/// (as corrected); 107000 pageable memory on a capturing stream; 107041 pageable memory on
/// another stream while a capture's mode forbids synchronous calls on this thread; 107017 bad
/// stream; 107003 a stream of another device; 507002.
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
    memcpy_async("aclrtMemcpyAsync", dst, dest_max, src, count, kind_, stream)
}

/// The copy of C entry point `call`: `aclrtMemcpyAsync` and `aclrtMemcpyAsyncWithCondition`,
/// which CANN's runtime runs the same way (`ApiErrorDecorator::MemcpyAsync`): the arguments'
/// checks, then [`CopyArgs::queue_as_cann`].
pub(crate) fn memcpy_async(
    call: &'static str,
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stream: aclrtStream,
) -> aclError {
    api(call, || {
        let Some(k) = copy_args(dst, src, count, kind)? else {
            return Ok(());
        };
        let copy = CopyArgs {
            dst: dst.addr(),
            dest_max,
            src: src.addr(),
            count,
            kind: k,
        };
        let rt = runtime()?;
        copy.queue_as_cann(&rt, stream, call)
    })
}

/// An `aclrtMemcpyAsync`'s arguments, checked.
pub(crate) struct CopyArgs {
    pub(crate) dst: usize,
    pub(crate) dest_max: usize,
    pub(crate) src: usize,
    pub(crate) count: usize,
    pub(crate) kind: MemcpyKind,
}

impl CopyArgs {
    /// The copy on `stream` (captured, queued, made now or refused: see [`aclrtMemcpyAsync`]);
    /// `call` names it.
    pub(crate) fn queue_as_cann(
        &self,
        rt: &Runtime,
        stream: aclrtStream,
        call: &str,
    ) -> Result<(), CallError> {
        let b = rt.backend();
        // While a stream captures (or updates a task group), what CANN does with the copy
        // decides between capturing or queuing it and the rest: judged first. Else the queued
        // copy's own checks judge it.
        if rt.any_capture() {
            let v = b.memcpy_check(self.dst, self.dest_max, self.src, self.count, self.kind);
            match v.map_err(CallError::backend)? {
                AsyncCopy::Queued => {}
                other => return self.unqueued(rt, other, stream, call),
            }
        }
        let task = Captured::Memcpy {
            dst: self.dst,
            dest_max: self.dest_max,
            src: self.src,
            count: self.count,
            kind: self.kind,
        };
        if rt.capture(stream.addr(), task)? {
            return Ok(());
        }
        let s = rt.resolve_launch(stream.addr())?;
        // SAFETY: the caller's contract for the host sides; device sides are checked.
        let done = unsafe {
            b.memcpy_async_as_cann(self.dst, self.dest_max, self.src, self.count, self.kind, s)
        }
        .map_err(CallError::backend)?;
        self.unqueued(rt, done, stream, call)
    }

    /// A copy CANN does not queue (`done`, see [`acl_notify_sim::mem::unqueued`]): with
    /// pageable memory made now, within the host refused (207000).
    fn unqueued(
        &self,
        rt: &Runtime,
        done: AsyncCopy,
        stream: aclrtStream,
        call: &str,
    ) -> Result<(), CallError> {
        match done {
            AsyncCopy::Queued => Ok(()),
            AsyncCopy::Pageable(host) => self.pageable(rt, host, stream, call),
            AsyncCopy::WithinHost => Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "{call} does not copy within the host ({:#x} to {:#x}, both host memory{}): \
                     CANN's runtime refuses an asynchronous host-to-host copy on a host with its \
                     devices attached. Use aclrtMemcpy with ACL_MEMCPY_HOST_TO_HOST, or memcpy",
                    self.src,
                    self.dst,
                    if self.kind == MemcpyKind::Default {
                        ", which ACL_MEMCPY_DEFAULT makes a host-to-host copy"
                    } else {
                        ""
                    }
                ),
            )),
        }
    }

    /// The copy when its host side, at `host`, is pageable memory (see
    /// [`acl_notify_sim::mem::unqueued`]): refused in a capture (107000, CANN's code: there is
    /// no task to capture; hicann/runtime `src/runtime/api/impl/api_error.cc`,
    /// `ApiErrorDecorator::MemcpyAsync`), else the stream synchronized (its errors are the
    /// call's) and the copy made at once; the copy's own checks are the synchronous copy's.
    fn pageable(
        &self,
        rt: &Runtime,
        host: usize,
        stream: aclrtStream,
        call: &str,
    ) -> Result<(), CallError> {
        if rt.is_capturing(stream.addr()) {
            return Err(CallError::new(
                Error::ParamInvalid,
                format!(
                    "stream {:#x} is capturing, and a copy between device memory and pageable \
                     host memory ({host:#x}: not aclrtMallocHost's, not registered) is not a \
                     task CANN captures: it synchronizes the stream and copies at once. Use \
                     aclrtMallocHost memory, or aclrtHostRegister this memory",
                    stream.addr(),
                ),
            ));
        }
        made_now(rt, stream, call, host, || {
            // SAFETY: the host side is the caller's, valid for `count` bytes during the call
            // (it is made now); the device side is checked.
            unsafe {
                rt.backend()
                    .memcpy(self.dst, self.dest_max, self.src, self.count, self.kind)
            }
        })
    }
}

/// An asynchronous copy with pageable host memory at `host` made now, as CANN's runtime makes
/// it (`aclrtMemcpyAsync`'s and `aclrtMemcpy2dAsync`'s): `stream` synchronized (its errors are
/// the call's), then `copy` as a synchronous copy — refused while a capture's mode forbids
/// synchronous calls on this thread (a capture in `ACL_MODEL_RI_CAPTURE_MODE_GLOBAL` on
/// another stream of the context, say): CANN's synchronous copy's capture-mode check refuses
/// it, and the call answers 107041 instead of that check's 107030 (hicann/runtime
/// `src/runtime/api/impl/api_error.cc`, `ApiErrorDecorator::MemcpyAsync` and
/// `MemCopy2DAsync`; `api_impl.cc`, `ApiImpl::MemCopySync`).
fn made_now(
    rt: &Runtime,
    stream: aclrtStream,
    call: &str,
    host: usize,
    copy: impl FnOnce() -> Result<(), acl_notify_sim::SimError>,
) -> Result<(), CallError> {
    rt.synchronize(stream.addr(), acl_notify_core::SyncWait::Forever)?;
    rt.capture_mode_allows(call).map_err(|e| {
        CallError::new(
            Error::CaptureModeBlockAsync,
            format!(
                "{call} with pageable host memory ({host:#x}: not aclrtMallocHost's, not \
                 registered) is made as a synchronous copy once its stream is synchronized, \
                 and {}",
                e.into_sim().message()
            ),
        )
    })?;
    copy().map_err(CallError::backend)
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
        if !set_args(dev_ptr, count)? {
            return Ok(());
        }
        let rt = runtime()?;
        let task = Captured::Memset {
            dst: dev_ptr.addr(),
            max: max_count,
            value: value as u8,
            count,
        };
        if rt.capture(stream.addr(), task)? {
            return Ok(());
        }
        let s = rt.resolve_launch(stream.addr())?;
        rt.backend()
            .memset_async(dev_ptr.addr(), max_count, value as u8, count, s)
            .map_err(CallError::backend)
    })
}

/// The checks of `aclrtMemcpy2d` and `aclrtMemcpy2dAsync` before the runtime's
/// (hicann/runtime `src/acl/aclrt_impl/memory.cpp`, `CheckMemcpy2dParam`): a copy with no
/// row or no byte per row succeeds (`None`), then NULL pointers, a width past either pitch,
/// and a kind other than host to device, device to host, device to device or default
/// (100000).
fn copy2d_args(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    k: u32,
) -> Result<Option<(Pitched, MemcpyKind)>, CallError> {
    if width == 0 || height == 0 {
        return Ok(None);
    }
    if dst.is_null() {
        return Err(null_arg("dst"));
    }
    if src.is_null() {
        return Err(null_arg("src"));
    }
    if width > spitch || width > dpitch {
        // The pitch that is too small, named (both when both are).
        let short: Vec<String> = [("spitch", spitch), ("dpitch", dpitch)]
            .into_iter()
            .filter(|&(_, p)| width > p)
            .map(|(name, p)| format!("{name} {p}"))
            .collect();
        return Err(CallError::new(
            Error::InvalidParam,
            format!(
                "width {width} is more than {}: a row must fit in its pitch",
                short.join(" and ")
            ),
        ));
    }
    let kind = match k {
        1 => MemcpyKind::HostToDevice,
        2 => MemcpyKind::DeviceToHost,
        3 => MemcpyKind::DeviceToDevice,
        4 => MemcpyKind::Default,
        _ => {
            return Err(CallError::new(
                Error::InvalidParam,
                format!(
                    "kind {k} is not a kind a 2-D copy takes (ACL_MEMCPY_HOST_TO_DEVICE, \
                     _DEVICE_TO_HOST, _DEVICE_TO_DEVICE or _DEFAULT)"
                ),
            ));
        }
    };
    let shape = Pitched {
        dpitch,
        spitch,
        width,
        height,
    };
    Ok(Some((shape, kind)))
}

/// `aclError aclrtMemcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t
/// width, size_t height, aclrtMemcpyKind kind)`: `height` rows of `width` bytes, row `i` from
/// `src + i * spitch` to `dst + i * dpitch`, host to device or device to host (see
/// [`acl_notify_sim::mem::pitched`]).
///
/// Codes: 0 width or height 0; 100000 dst/src NULL, width > spitch or dpitch, kind
/// (`ACL_MEMCPY_HOST_TO_HOST`, `_HOST_TO_BUF_TO_DEVICE`, ...); 107002; 107000 height above
/// 5,242,880 or width above 5,000,000, a device side outside the live allocations, a kind
/// that CANN's correction by the addresses (`acl_notify_sim::mem::direction`) refuses or
/// makes host to host or device to device; 207000 `ACL_MEMCPY_DEVICE_TO_DEVICE` (CANN's
/// synchronous 2-D copy has none).
///
/// # Safety
///
/// Host sides as CANN requires: valid for `spitch * (height - 1) + width` bytes (source) and
/// `dpitch * (height - 1) + width` (destination).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy2d(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind_: u32,
) -> aclError {
    api("aclrtMemcpy2d", || {
        let Some((shape, k)) = copy2d_args(dst, dpitch, src, spitch, width, height, kind_)? else {
            return Ok(());
        };
        let rt = runtime()?;
        rt.capture_mode_allows("aclrtMemcpy2d")?;
        rt.current_device()?;
        // SAFETY: the caller's contract for the host sides; device sides are checked.
        unsafe { rt.backend().memcpy2d(dst.addr(), src.addr(), shape, k) }
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemcpy2dAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
/// size_t width, size_t height, aclrtMemcpyKind kind, aclrtStream stream)`: [`aclrtMemcpy2d`]
/// in stream order, as one task, device to device too. With pageable host memory on one
/// side, the stream is synchronized and the copy made before the call returns, as
/// [`aclrtMemcpyAsync`]'s.
///
/// Codes: as `aclrtMemcpy2d`, except that device to device is taken and a copy whose
/// addresses are both host memory is 107000; 107017 bad stream; 107003 a stream of another
/// device; 507002.
///
/// # Safety
///
/// Host sides as for `aclrtMemcpy2d`, valid until the task has run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpy2dAsync(
    dst: *mut c_void,
    dpitch: usize,
    src: *const c_void,
    spitch: usize,
    width: usize,
    height: usize,
    kind_: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemcpy2dAsync", || {
        let Some((shape, k)) = copy2d_args(dst, dpitch, src, spitch, width, height, kind_)? else {
            return Ok(());
        };
        let rt = runtime()?;
        let s = rt.resolve_task_stream(stream.addr())?;
        let b = rt.backend();
        // SAFETY: the caller's contract for the host sides; device sides are checked.
        let done = unsafe { b.memcpy2d_async_as_cann(dst.addr(), src.addr(), shape, k, s) }
            .map_err(CallError::backend)?;
        // Pageable host memory: as `aclrtMemcpyAsync`'s, made now (hicann/runtime
        // `api_error.cc`, `ApiErrorDecorator::MemCopy2DAsync`).
        let host = match done {
            AsyncCopy::Queued => return Ok(()),
            AsyncCopy::Pageable(at) => at,
            // The 2-D copy's direction checks refuse a copy within the host before (107000).
            AsyncCopy::WithinHost => {
                return Err(CallError::new(
                    Error::DrvInternalError,
                    "aclrtMemcpy2dAsync: a copy within the host passed the direction checks",
                ));
            }
        };
        made_now(&rt, stream, "aclrtMemcpy2dAsync", host, || {
            // SAFETY: the host side is the caller's, valid during the call; the device side is
            // checked.
            unsafe { b.memcpy2d(dst.addr(), src.addr(), shape, k) }
        })
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
    // SAFETY: each NULL or writable, by the caller's contract.
    let (free, total) = unsafe { (Out::new(free), Out::new(total)) };
    api("aclrtGetMemInfo", || {
        let free = free.check(|| null_arg("free"))?;
        let total = total.check(|| null_arg("total"))?;
        let rt = runtime()?;
        let device = rt.current_device()?;
        if attr > MEM_ATTR_MAX {
            return Err(CallError::new(
                Error::ParamInvalid,
                format!("attr {attr} is not an aclrtMemAttr (0 to {MEM_ATTR_MAX})"),
            ));
        }
        let (f, t) = rt.backend().mem_info(device).map_err(CallError::backend)?;
        free.put(f as usize);
        total.put(t as usize);
        Ok(())
    })
}

/// `aclError aclrtReduceAsync(void *dst, const void *src, uint64_t count, aclrtReduceKind
/// kind, aclDataType type, aclrtStream stream, void *reserve)`: `dst = kind(dst, src)` over
/// `count` bytes, in stream order (see [`acl_notify_sim::mem::reduce`]).
///
/// Codes (hicann/runtime `aclrtReduceAsyncImpl`): 100000 dst/src NULL, reserve not NULL, a
/// type outside CANN's reduce types; 107002; 207000 a kind or type the simulator does
/// not reduce (EQUAL; int4) or IPV350; 107000 count or ranges;
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
        // uint8, uint16, uint32. Of these each SoC reduces those its product's documentation
        // lists (`acl_notify_sim::mem::reduce::reduces`): uint8, uint16 and int4 none.
        let ty = match type_ {
            0 => Some(ReduceType::F32),
            3 => Some(ReduceType::I32),
            8 => Some(ReduceType::U32),
            6 => Some(ReduceType::I16),
            2 => Some(ReduceType::I8),
            1 => Some(ReduceType::F16),
            27 => Some(ReduceType::BF16),
            4 | 7 | 29 => None,
            t => {
                return Err(CallError::new(
                    Error::InvalidParam,
                    format!("type {t} is not a data type aclrtReduceAsync supports"),
                ));
            }
        };
        let rt = runtime()?;
        let s = rt.resolve_task_stream(stream.addr())?;
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
        // ACL_UINT8, ACL_UINT16 and ACL_INT4 pass CANN's ACL layer (kMapDataType) and are
        // then up to the device's capability bits (`sdma_reduce_support`, hicann/runtime
        // src/runtime/core/src/launch/memory_starsv2.cc); the documentation of
        // aclrtReduceAsync (docs/zh/api_ref/12_execution_control.md) lists them for no
        // product. So 207000, as a device without them answers.
        let ty = ty.ok_or_else(|| {
            unsupported(format!(
                "aclDataType {type_} ({}): CANN documents aclrtReduceAsync's {} on no product, \
                 so the simulator reduces it on no SoC",
                match type_ {
                    4 => "ACL_UINT8",
                    7 => "ACL_UINT16",
                    _ => "ACL_INT4",
                },
                match type_ {
                    4 => "uint8",
                    7 => "uint16",
                    _ => "int4",
                }
            ))
        })?;
        let count = usize::try_from(count).map_err(|_| param("count is too large"))?;
        rt.backend()
            .reduce_async(dst.addr(), src.addr(), count, op, ty, s)
            .map_err(CallError::backend)
    })
}

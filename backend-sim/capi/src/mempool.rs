//! The exported stream-ordered memory pool functions (`acl/acl_rt_memory_soma.h`:
//! `aclrtMemPool*`) on the simulator's [`acl_notify_sim::mem::pool`]. `aclrtMemPool`s are
//! handles of the one slab (`handle`, kind `MemPool`).
//!
//! Check order, from hicann/runtime `src/acl/aclrt_impl/memory.cpp` (the ACL layer: NULL
//! pointers, the pool properties' allocation type, location type and reserved bytes → 100000;
//! a `MallocAsync` of 0 bytes succeeds and writes nothing), then `src/runtime/api/api_c_soma.cc`
//! and `api/impl/api_impl_soma.cc` (the stream, then NULL attribute values → 107000), then
//! `feature/soma/soma.cc` (a pool it does not know: 507000, but 107000 for the attribute
//! calls), then the simulator's pool.

use std::ffi::c_void;
use std::sync::Arc;

use acl_notify_core::Error;
use acl_notify_sim::mem::pool::{PoolAttr, PoolId};

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::runtime::Runtime;
use crate::session::runtime;

/// `aclrtMemPoolProps` (`acl/acl_rt_memory_soma.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemPoolProps {
    alloc_type: u32,
    handle_type: u32,
    location_id: u32,
    location_type: u32,
    max_size: usize,
    reserved: [u8; 32],
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<MemPoolProps>() == 56);
    assert!(std::mem::offset_of!(MemPoolProps, location_type) == 12);
    assert!(std::mem::offset_of!(MemPoolProps, max_size) == 16);
};

/// `ACL_MEM_ALLOCATION_TYPE_PINNED`, `ACL_MEM_LOCATION_TYPE_DEVICE`.
const ALLOCATION_PINNED: u32 = 0;
const LOCATION_DEVICE: u32 = 1;

/// The pool behind handle `pool`, or `code` (507000, or 107000 for the attribute calls) for
/// one this session does not have.
fn pool_of(rt: &Runtime, pool: *mut c_void, code: Error) -> Result<PoolId, CallError> {
    rt.pools.get(pool.addr()).ok_or_else(|| {
        CallError::new(
            code,
            format!(
                "memory pool {pool:p} is not a live pool of this process (destroyed, from \
                 another process or session, or not an aclrtMemPool)"
            ),
        )
    })
}

/// `aclError aclrtMemPoolCreate(aclrtMemPool *memPool, const aclrtMemPoolProps
/// *poolProps)`: a pool of device `poolProps->location.id`'s memory, `maxSize` bytes (0: the
/// whole device), rounded up to 2 MiB.
///
/// Codes: 100000 NULL, an allocation type other than pinned, a location other than a device,
/// reserved bytes not 0; 207000 SoCs other than Ascend910B; 107001 bad device; 107000 a size
/// above the device's memory.
///
/// # Safety
///
/// `mem_pool` is NULL or writable; `pool_props` NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemPoolCreate(
    mem_pool: *mut *mut c_void,
    pool_props: *const MemPoolProps,
) -> aclError {
    api("aclrtMemPoolCreate", || {
        // SAFETY: `mem_pool` is NULL or writable, by the caller's contract.
        unsafe { Out::new(mem_pool) }.write(
            || null_arg("memPool"),
            || {
                if pool_props.is_null() {
                    return Err(null_arg("poolProps"));
                }
                // SAFETY: non-NULL, readable by the caller's contract.
                let p = unsafe { pool_props.read_unaligned() };
                if p.alloc_type != ALLOCATION_PINNED {
                    return Err(CallError::new(
                        Error::InvalidParam,
                        format!(
                            "poolProps->allocType {}: only ACL_MEM_ALLOCATION_TYPE_PINNED (0)",
                            p.alloc_type
                        ),
                    ));
                }
                if p.location_type != LOCATION_DEVICE {
                    return Err(CallError::new(
                        Error::InvalidParam,
                        format!(
                            "poolProps->location.type {}: only ACL_MEM_LOCATION_TYPE_DEVICE (1)",
                            p.location_type
                        ),
                    ));
                }
                if p.reserved.iter().any(|b| *b != 0) {
                    return Err(CallError::new(
                        Error::InvalidParam,
                        "poolProps->reserved: reserved, must be all 0",
                    ));
                }
                let rt = runtime()?;
                let id = rt
                    .backend()
                    .mem_pool_create(p.location_id, p.max_size as u64)
                    .map_err(CallError::backend)?;
                let h = match rt.pools.insert(id) {
                    Ok(h) => h,
                    Err(e) => {
                        let _ = rt.backend().mem_pool_destroy(id);
                        return Err(e);
                    }
                };
                Ok(std::ptr::without_provenance_mut(h))
            },
        )
    })
}

/// `aclError aclrtMemPoolDestroy(const aclrtMemPool memPool)`: gives the pool's kept memory
/// back and ends the handle.
///
/// Codes: 100000 NULL; 507000 not a live pool, or one with blocks in use or frees still
/// queued.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemPoolDestroy(mem_pool: *mut c_void) -> aclError {
    api("aclrtMemPoolDestroy", || {
        if mem_pool.is_null() {
            return Err(null_arg("memPool"));
        }
        let rt = runtime()?;
        let id = pool_of(&rt, mem_pool, Error::InternalError)?;
        rt.backend()
            .mem_pool_destroy(id)
            .map_err(CallError::backend)?;
        rt.pools.remove(mem_pool.addr());
        Ok(())
    })
}

/// The attribute of C value `attr`, or 507000 (CANN's `RT_ERROR_POOL_PROP_INVALID`).
fn attr_of(attr: u32) -> Result<PoolAttr, CallError> {
    PoolAttr::from_raw(attr).ok_or_else(|| {
        CallError::new(
            Error::InternalError,
            format!("attr {attr}: not an aclrtMemPoolAttr (1 to 8)"),
        )
    })
}

/// The checks the attribute calls share, in CANN's order: memPool NULL (100000), value NULL
/// (107000), an unknown pool (107000), an unknown attribute (507000).
fn attr_args(
    mem_pool: *mut c_void,
    attr: u32,
    value: *mut c_void,
) -> Result<(Arc<Runtime>, PoolId, PoolAttr), CallError> {
    if mem_pool.is_null() {
        return Err(null_arg("memPool"));
    }
    if value.is_null() {
        return Err(CallError::new(Error::ParamInvalid, "`value` is NULL"));
    }
    let rt = runtime()?;
    let id = pool_of(&rt, mem_pool, Error::ParamInvalid)?;
    Ok((rt, id, attr_of(attr)?))
}

/// `aclError aclrtMemPoolSetAttr(aclrtMemPool memPool, aclrtMemPoolAttr attr, void
/// *value)`: `value` points to a `uint32_t` for the three reuse flags, a `uint64_t` for the
/// others.
///
/// Codes: 100000 memPool NULL; 107000 value NULL, not a live pool, a read-only attribute;
/// 507000 an unknown attribute, a threshold above the pool's size, a high mark set to other
/// than 0.
///
/// # Safety
///
/// `value` is NULL or readable as the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemPoolSetAttr(
    mem_pool: *mut c_void,
    attr: u32,
    value: *mut c_void,
) -> aclError {
    api("aclrtMemPoolSetAttr", || {
        let (rt, id, a) = attr_args(mem_pool, attr, value)?;
        // SAFETY: non-NULL, readable as the attribute's type by the caller's contract.
        let v = unsafe {
            if a.is_flag() {
                u64::from(value.cast::<u32>().read_unaligned())
            } else {
                value.cast::<u64>().read_unaligned()
            }
        };
        rt.backend()
            .mem_pool_set_attr(id, a, v)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemPoolGetAttr(aclrtMemPool memPool, aclrtMemPoolAttr attr, void
/// *value)`: writes a `uint32_t` for the three reuse flags, a `uint64_t` for the others.
///
/// Codes: 100000 memPool NULL; 107000 value NULL, not a live pool; 507000 an unknown
/// attribute.
///
/// # Safety
///
/// `value` is NULL or writable as the attribute's type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemPoolGetAttr(
    mem_pool: *mut c_void,
    attr: u32,
    value: *mut c_void,
) -> aclError {
    // SAFETY: NULL or writable as the attribute's type, by the caller's contract.
    let out = unsafe { Out::new(value) };
    api("aclrtMemPoolGetAttr", || {
        let (rt, id, a) = attr_args(mem_pool, attr, value)?;
        let v = rt
            .backend()
            .mem_pool_attr(id, a)
            .map_err(CallError::backend)?;
        // `attr_args` refused a NULL `value` already (107000, where CANN checks it).
        let out = out.check(|| CallError::new(Error::ParamInvalid, "`value` is NULL"))?;
        // The attribute's type: a `uint32_t` for a flag (0 or 1), else a `uint64_t`.
        let len = if a.is_flag() {
            size_of::<u32>()
        } else {
            size_of::<u64>()
        };
        // SAFETY: `len` is the attribute's type's size, what the caller's promise covers.
        let out = unsafe { out.sized(len) };
        if a.is_flag() {
            out.put_at(0, v as u32);
        } else {
            out.put_at(0, v);
        }
        Ok(())
    })
}

/// `aclError aclrtMemPoolMallocAsync(void **ptr, size_t size, aclrtMemPool memPool,
/// aclrtStream stream)`: a block of `size` bytes from the pool, usable by the tasks queued on
/// `stream` after this call. A size of 0 succeeds and leaves `*ptr` as it was (CANN's ACL
/// layer).
///
/// Codes: 100000 ptr, memPool or stream NULL; 107017 bad stream; 107003 a stream of another
/// device or context; 507000 not a live pool, or the pool is full; 207001 no device memory
/// for the block; 507002.
///
/// # Safety
///
/// `ptr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemPoolMallocAsync(
    ptr: *mut *mut c_void,
    size: usize,
    mem_pool: *mut c_void,
    stream: aclrtStream,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let ptr = unsafe { Out::new(ptr) };
    api("aclrtMemPoolMallocAsync", || {
        let ptr = ptr.check(|| null_arg("ptr"))?;
        if mem_pool.is_null() {
            return Err(null_arg("memPool"));
        }
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        if size == 0 {
            // Nothing allocated, nothing written.
            return Ok(());
        }
        let rt = runtime()?;
        let s = rt.resolve_task_stream(stream.addr())?;
        let id = pool_of(&rt, mem_pool, Error::InternalError)?;
        let p = rt
            .backend()
            .mem_pool_malloc_async(id, size, s)
            .map_err(CallError::backend)?;
        ptr.put(std::ptr::with_exposed_provenance_mut(p));
        Ok(())
    })
}

/// `aclError aclrtMemPoolFreeAsync(void *ptr, aclrtStream stream)`: gives a pool block back
/// to its pool when `stream` (NULL: the default stream) reaches this point; `aclrtMalloc`
/// memory is freed then. Using the memory in tasks issued after this call is refused.
///
/// Codes: 100000 ptr NULL; 107017 bad stream; 107003; 107000 neither a pool block's start nor
/// this process's own `aclrtMalloc` memory; 507002.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemPoolFreeAsync(ptr: *mut c_void, stream: aclrtStream) -> aclError {
    api("aclrtMemPoolFreeAsync", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        let rt = runtime()?;
        let s = rt.resolve_task_stream(stream.addr())?;
        rt.backend()
            .mem_pool_free_async(ptr.addr(), s)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemPoolTrimTo(aclrtMemPool memPool, size_t minBytesToKeep)`: gives kept
/// memory whose frees have run back to the device until the pool reserves at most
/// `minBytesToKeep` bytes.
///
/// Codes: 100000 NULL; 507000 not a live pool, a size above the pool's or below its memory in
/// use.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemPoolTrimTo(mem_pool: *mut c_void, min_bytes_to_keep: usize) -> aclError {
    api("aclrtMemPoolTrimTo", || {
        if mem_pool.is_null() {
            return Err(null_arg("memPool"));
        }
        let rt = runtime()?;
        let id = pool_of(&rt, mem_pool, Error::InternalError)?;
        rt.backend()
            .mem_pool_trim_to(id, min_bytes_to_keep as u64)
            .map_err(CallError::backend)
    })
}

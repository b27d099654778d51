//! Managed (unified) memory (`aclrtMemAllocManaged`, `aclrtMemManagedAdvise`,
//! `aclrtMemManagedGetAttr[s]`, `aclrtMemManagedPrefetch[Batch]Async`) over
//! [`acl_notify_sim::mem::managed`], whose docs say what managed memory is on the simulator.
//! It is freed with `aclrtFree`, as CANN documents.
//!
//! CANN's checks, in its order: the ACL layer (hicann/runtime `src/acl/aclrt_impl/memory.cpp`,
//! `aclrtMemAllocManagedImpl` and its neighbours: NULL pointers, size 0, a flag other than
//! `ACL_RT_MEM_ATTACH_GLOBAL`, reserved flags not 0, a batch's counts → 100000), then the
//! runtime's (`src/runtime/api/impl/api_error_uvm.cc` and `api_error.cc`, `ManagedMemAlloc`:
//! an advice past `UNSET_ACCESSED_BY`, an attribute outside 1..8, a device location's id
//! past the devices, a batch's location indexes not 0, rising and below `count` → 107000; the
//! stream), the location's type (`src/runtime/core/src/uvm/uvm_callback.cc`,
//! `ConvertUvmLocationStruct`: INVALID or unknown → 107000), then the SoC: CANN documents
//! managed memory on Atlas A2 and A3 only (`docs/zh/api_ref/11-05_unified_addressing.md`);
//! elsewhere its driver has no UVM: 207000. The driver's checks (managed memory, 2 MiB sizes,
//! `dataSize`) are the simulator's, 107000.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::mem::managed::{Advice, Place, RangeAttr};

use crate::errmsg::{CallError, acl_param, null_arg, param as rt_param, reserved_flags};
use crate::ffi::{CheckedArray, Out, OutArray, aclError, aclrtStream, api, c_array};
use crate::runtime::Runtime;
use crate::session::runtime;

/// `ACL_RT_MEM_ATTACH_GLOBAL`, the one flag `aclrtMemAllocManaged` takes.
const ATTACH_GLOBAL: u32 = 1;

/// `aclrtMemManagedLocation` (`acl_rt.h`): an `aclrtMemManagedLocationType` and an id.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ManagedLocation {
    kind: u32,
    id: i32,
}

/// The SoCs CANN documents managed memory on.
fn has_uvm(soc: Soc) -> bool {
    matches!(soc, Soc::Ascend910B | Soc::Ascend910_93)
}

/// 207000 off the SoCs with managed memory.
fn require_uvm(rt: &Runtime, call: &str) -> Result<(), CallError> {
    let soc = rt.backend().soc();
    if has_uvm(soc) {
        return Ok(());
    }
    Err(CallError::new(
        Error::FeatureNotSupport,
        format!(
            "{call}: {} has no managed memory (CANN documents it on Atlas A2 and A3 only)",
            soc.name()
        ),
    ))
}

/// The runtime's check of a location's device id (`what` names it): 107000 past the devices.
fn device_id_ok(rt: &Runtime, loc: ManagedLocation, what: &str) -> Result<(), CallError> {
    let n = rt.backend().device_count();
    if loc.kind == 1 && (loc.id < 0 || loc.id as u32 >= n) {
        return Err(rt_param(format!(
            "{what}.id {} is not a device: the range is [0, {}]",
            loc.id,
            n as i64 - 1
        )));
    }
    Ok(())
}

/// The location `loc` names (`ConvertUvmLocationStruct`): INVALID (0) and unknown types are
/// 107000; `HOST_NUMA_CURRENT` is the simulated host's one node, 0, and so must a
/// `HOST_NUMA` id be.
fn place(loc: ManagedLocation, what: &str) -> Result<Place, CallError> {
    Ok(match loc.kind {
        1 => Place::Device(loc.id as u32),
        2 => Place::Host,
        3 if loc.id == 0 => Place::HostNuma(0),
        3 => {
            return Err(rt_param(format!(
                "{what}.id {} is not a NUMA node of the host: the simulated host has node 0 only",
                loc.id
            )));
        }
        4 => Place::HostNuma(0),
        k => {
            return Err(rt_param(format!(
                "{what}.type {k} is not a location (ACL_MEM_LOCATIONTYPE_DEVICE, _HOST, \
                 _HOST_NUMA or _HOST_NUMA_CURRENT)"
            )));
        }
    })
}

/// `aclError aclrtMemAllocManaged(void **ptr, uint64_t size, uint32_t flag)`: `size` bytes of
/// managed memory on the current device, rounded up to 2 MiB; `*ptr` is both the host's and
/// the device's address.
///
/// Codes: 100000 `ptr` NULL, flag not `ACL_RT_MEM_ATTACH_GLOBAL`; 107000 size 0; 107002;
/// 207000 a SoC without managed memory; 207001 out of device memory.
///
/// # Safety
///
/// `ptr` NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemAllocManaged(
    ptr: *mut *mut c_void,
    size: u64,
    flag: u32,
) -> aclError {
    api("aclrtMemAllocManaged", || {
        // SAFETY: `ptr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(ptr) }.write(
            || null_arg("ptr"),
            || {
                if flag != ATTACH_GLOBAL {
                    return Err(acl_param(format!(
                        "flag {flag} is not ACL_RT_MEM_ATTACH_GLOBAL (1), the one flag CANN takes"
                    )));
                }
                if size == 0 {
                    return Err(rt_param("size is 0"));
                }
                let rt = runtime()?;
                let device = rt.current_device()?;
                require_uvm(&rt, "aclrtMemAllocManaged")?;
                let m = rt
                    .backend()
                    .malloc_managed(device, size)
                    .map_err(CallError::backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(m))
            },
        )
    })
}

/// `aclError aclrtMemManagedAdvise(const void *ptr, uint64_t size, aclrtMemManagedAdviseType
/// advise, aclrtMemManagedLocation location)`: gives the managed pages of `[ptr, ptr + size)`
/// (whole 2 MiB pages) the advice, which `aclrtMemManagedGetAttr` reads back.
///
/// Codes: 100000 `ptr` NULL, size 0; 107000 an unknown advice, a bad location (device id,
/// type, NUMA node), a range that is not managed memory, a size not whole pages; 107002;
/// 207000 a SoC without managed memory.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemManagedAdvise(
    ptr: *const c_void,
    size: u64,
    advise: u32,
    location: ManagedLocation,
) -> aclError {
    api("aclrtMemManagedAdvise", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        if size == 0 {
            return Err(acl_param("size is 0"));
        }
        let rt = runtime()?;
        if advise > 5 {
            return Err(rt_param(format!(
                "advise {advise} is not an aclrtMemManagedAdviseType (0 to 5)"
            )));
        }
        device_id_ok(&rt, location, "location")?;
        rt.current_device()?;
        require_uvm(&rt, "aclrtMemManagedAdvise")?;
        let advice = match advise {
            0 => Advice::SetReadMostly,
            1 => {
                // Which copy stays: INVALID is the host's (CANN's enum docs).
                if location.kind != 0 {
                    place(location, "location")?;
                }
                Advice::UnsetReadMostly
            }
            2 => Advice::SetPreferred(place(location, "location")?),
            3 => Advice::UnsetPreferred,
            4 => Advice::SetAccessedBy(place(location, "location")?),
            _ => Advice::UnsetAccessedBy(place(location, "location")?),
        };
        rt.backend()
            .managed_advise(ptr.addr(), size, advice)
            .map_err(CallError::backend)
    })
}

/// The runtime's check of an attribute (107000 outside 1..8).
fn attr(v: u32, what: &str) -> Result<RangeAttr, CallError> {
    RangeAttr::from_code(v).ok_or_else(|| {
        rt_param(format!(
            "{what} {v} is not an aclrtMemManagedRangeAttribute (1 to 8)"
        ))
    })
}

/// Writes `values` (32-bit integers, unaligned) to the caller's `dataSize` bytes (the backend
/// gives `dataSize / 4` of them; more would be a defect, refused by `put_at`'s bound).
fn put(data: CheckedArray<u8>, values: &[i32]) {
    for (i, v) in values.iter().enumerate() {
        data.put_at(i * 4, *v);
    }
}

/// `aclError aclrtMemManagedGetAttr(aclrtMemManagedRangeAttribute attribute, const void *ptr,
/// size_t size, void *data, size_t dataSize)`: the attribute of the managed range, as 32-bit
/// integers (CANN's enum docs: 1/0 for read mostly; a device or node id, -1 the host, -2
/// pages that disagree or none; `aclrtMemManagedLocationType` for the `_TYPE` attributes).
///
/// Codes: 100000 `ptr` or `data` NULL, size 0; 107000 an unknown attribute, `dataSize` not
/// 4 (a positive multiple of 4 for `ACCESSED_BY`), a range that is not managed memory; 207000
/// a SoC without managed memory.
///
/// # Safety
///
/// `data` writable for `dataSize` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemManagedGetAttr(
    attribute: u32,
    ptr: *const c_void,
    size: usize,
    data: *mut c_void,
    data_size: usize,
) -> aclError {
    // SAFETY: NULL or writable for `dataSize` bytes, by the caller's contract.
    let data = unsafe { OutArray::new(data.cast::<u8>(), data_size) };
    api("aclrtMemManagedGetAttr", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        let data = data.check(|| null_arg("data"))?;
        if size == 0 {
            return Err(acl_param("size is 0"));
        }
        let a = attr(attribute, "attribute")?;
        let rt = runtime()?;
        require_uvm(&rt, "aclrtMemManagedGetAttr")?;
        let v = rt
            .backend()
            .managed_attr(a, ptr.addr(), size as u64, data_size)
            .map_err(CallError::backend)?;
        put(data, &v);
        Ok(())
    })
}

/// `aclError aclrtMemManagedGetAttrs(aclrtMemManagedRangeAttribute *attributes, size_t
/// numAttributes, const void *ptr, size_t size, void **data, size_t *dataSizes)`: each
/// attribute into its `data[i]` of `dataSizes[i]` bytes, as `aclrtMemManagedGetAttr` gives
/// it; nothing is written unless all can be.
///
/// Codes: 100000 `ptr`, `attributes`, `data` or `dataSizes` NULL, size 0; 107000 an unknown
/// attribute (with its index), a `data[i]` NULL, what `aclrtMemManagedGetAttr` refuses;
/// 207000 a SoC without managed memory.
///
/// # Safety
///
/// `attributes`, `data` and `dataSizes` readable for `numAttributes` entries; each `data[i]`
/// writable for `dataSizes[i]` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemManagedGetAttrs(
    attributes: *const u32,
    num_attributes: usize,
    ptr: *const c_void,
    size: usize,
    data: *const *mut c_void,
    data_sizes: *const usize,
) -> aclError {
    api("aclrtMemManagedGetAttrs", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        if attributes.is_null() {
            return Err(null_arg("attributes"));
        }
        if data.is_null() {
            return Err(null_arg("data"));
        }
        if data_sizes.is_null() {
            return Err(null_arg("dataSizes"));
        }
        if size == 0 {
            return Err(acl_param("size is 0"));
        }
        // SAFETY: the caller's contract: `numAttributes` entries each.
        let (attrs, outs, sizes) = unsafe {
            let n = num_attributes;
            (
                c_array(attributes, n, "numAttributes", Error::InvalidParam)?,
                c_array(data, n, "numAttributes", Error::InvalidParam)?,
                c_array(data_sizes, n, "numAttributes", Error::InvalidParam)?,
            )
        };
        let attrs = attrs
            .iter()
            .enumerate()
            .map(|(i, a)| attr(*a, &format!("attributes[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        let rt = runtime()?;
        require_uvm(&rt, "aclrtMemManagedGetAttrs")?;
        let mut values = Vec::with_capacity(attrs.len());
        for (i, a) in attrs.into_iter().enumerate() {
            // SAFETY: NULL or writable for `dataSizes[i]` bytes, by the caller's contract.
            let out = unsafe { OutArray::new(outs[i].cast::<u8>(), sizes[i]) }
                .check(|| rt_param(format!("data[{i}] is NULL")))?;
            let v = rt
                .backend()
                .managed_attr(a, ptr.addr(), size as u64, sizes[i])
                .map_err(|e| CallError::backend(e).in_context(&format!("attributes[{i}]")))?;
            values.push((out, v));
        }
        for (out, v) in &values {
            put(*out, v);
        }
        Ok(())
    })
}

/// `aclError aclrtMemManagedPrefetchAsync(const void *ptr, size_t size,
/// aclrtMemManagedLocation location, uint32_t flags, aclrtStream stream)`: queues the
/// prefetch of the managed range (whole 2 MiB pages) to `location` on `stream`;
/// `ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION` shows it once the stream ran it.
///
/// Codes: 100000 `ptr` NULL, size 0, flags not 0; 107000 a bad location, a range that is not
/// managed memory, a size not whole pages; the stream's (107002, 107003, 107017, ...); 207000
/// a SoC without managed memory.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemManagedPrefetchAsync(
    ptr: *const c_void,
    size: usize,
    location: ManagedLocation,
    flags: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemManagedPrefetchAsync", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        if size == 0 {
            return Err(acl_param("size is 0"));
        }
        reserved_flags(u64::from(flags))?;
        let rt = runtime()?;
        let s = rt.resolve_task_stream(stream.addr())?;
        device_id_ok(&rt, location, "location")?;
        require_uvm(&rt, "aclrtMemManagedPrefetchAsync")?;
        let to = place(location, "location")?;
        rt.backend()
            .managed_prefetch(&[(ptr.addr(), size as u64, to)], s)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtMemManagedPrefetchBatchAsync(const void **ptrs, size_t *sizes, size_t count,
/// aclrtMemManagedLocation *prefetchLocs, size_t *prefetchLocIdxs, size_t numPrefetchLocs,
/// uint64_t flags, aclrtStream stream)`: one task on `stream` prefetching `ptrs[i]` (`sizes[i]`
/// bytes) to `prefetchLocs[k]` for `i` from `prefetchLocIdxs[k]` up to the next index (the
/// last to `count`).
///
/// Codes: 100000 a NULL array, `count` or `numPrefetchLocs` 0, flags not 0, `count <
/// numPrefetchLocs`; 107000 `prefetchLocIdxs[0]` not 0, indexes not rising or not below
/// `count`, a NULL `ptrs[i]`, a bad location, what `aclrtMemManagedPrefetchAsync` refuses
/// (with the index); the stream's; 207000 a SoC without managed memory.
///
/// # Safety
///
/// `ptrs` and `sizes` readable for `count` entries, `prefetchLocs` and `prefetchLocIdxs` for
/// `numPrefetchLocs`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn aclrtMemManagedPrefetchBatchAsync(
    ptrs: *const *const c_void,
    sizes: *const usize,
    count: usize,
    prefetch_locs: *const ManagedLocation,
    prefetch_loc_idxs: *const usize,
    num_prefetch_locs: usize,
    flags: u64,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemManagedPrefetchBatchAsync", || {
        for (p, name) in [
            (ptrs.is_null(), "ptrs"),
            (sizes.is_null(), "sizes"),
            (prefetch_locs.is_null(), "prefetchLocs"),
            (prefetch_loc_idxs.is_null(), "prefetchLocIdxs"),
        ] {
            if p {
                return Err(null_arg(name));
            }
        }
        if count == 0 {
            return Err(acl_param("count is 0"));
        }
        if num_prefetch_locs == 0 {
            return Err(acl_param("numPrefetchLocs is 0"));
        }
        reserved_flags(flags)?;
        if count < num_prefetch_locs {
            return Err(acl_param(format!(
                "count {count} must be greater than or equal to numPrefetchLocs \
                 {num_prefetch_locs}"
            )));
        }
        // SAFETY: the caller's contract.
        let (ptrs, sizes, locs, idxs) = unsafe {
            let n = num_prefetch_locs;
            (
                c_array(ptrs, count, "count", Error::InvalidParam)?,
                c_array(sizes, count, "count", Error::InvalidParam)?,
                c_array(prefetch_locs, n, "numPrefetchLocs", Error::InvalidParam)?,
                c_array(prefetch_loc_idxs, n, "numPrefetchLocs", Error::InvalidParam)?,
            )
        };
        let rt = runtime()?;
        if idxs[0] != 0 {
            return Err(rt_param(format!(
                "prefetchLocIdxs[0] is {}: it must be 0",
                idxs[0]
            )));
        }
        for (k, &i) in idxs.iter().enumerate() {
            if i >= count {
                return Err(rt_param(format!(
                    "prefetchLocIdxs[{k}] is {i}: elements must be less than count {count}"
                )));
            }
            if k >= 1 && i <= idxs[k - 1] {
                return Err(rt_param(format!(
                    "prefetchLocIdxs[{k}] is {i}, not greater than prefetchLocIdxs[{}] {}",
                    k - 1,
                    idxs[k - 1]
                )));
            }
        }
        if let Some(i) = ptrs.iter().position(|p| p.is_null()) {
            return Err(rt_param(format!("ptrs[{i}] is NULL")));
        }
        for (k, l) in locs.iter().enumerate() {
            device_id_ok(&rt, *l, &format!("prefetchLocs[{k}]"))?;
        }
        let s = rt.resolve_task_stream(stream.addr())?;
        require_uvm(&rt, "aclrtMemManagedPrefetchBatchAsync")?;
        let mut ranges = Vec::with_capacity(count);
        for (k, l) in locs.iter().enumerate() {
            let to = place(*l, &format!("prefetchLocs[{k}]"))?;
            let end = idxs.get(k + 1).copied().unwrap_or(count);
            for i in idxs[k]..end {
                ranges.push((ptrs[i].addr(), sizes[i] as u64, to));
            }
        }
        rt.backend()
            .managed_prefetch(&ranges, s)
            .map_err(CallError::backend)
    })
}

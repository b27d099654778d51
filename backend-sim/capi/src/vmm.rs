//! The exported virtual memory management functions (`acl/acl_rt.h`): reserved device
//! addresses, physical allocations and their mappings, granularity, and shareable handles, on
//! the simulator's [`acl_notify_sim::mem::vmm`]. `aclrtDrvMemHandle`s are handles of the one
//! slab (`handle`, kind `PhysMem`), so a freed, foreign or forged one is 107017.
//!
//! Check order, from hicann/runtime `src/acl/aclrt_impl/memory.cpp` (the ACL layer: NULL
//! pointers, sizes of 0, reserved flags and the physical-memory properties → 100000, each
//! function in its own order, followed here), then `src/runtime/api/impl/api_error.cc` (the
//! runtime: the device id → 107001, export flags above 1 and unknown share types → 107000),
//! then the simulator's checks (what CANN's driver decides: 107000, 107017, 207001).

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error};
use acl_notify_sim::Sim;
use acl_notify_sim::mem::vmm::{Access, AccessLoc, PageSize, PhysMem, Props, has_huge1g};

use crate::errmsg::{CallError, null_arg, reserved_flags};
use crate::ffi::ipc_args::whitelist_pids;
use crate::ffi::{Checked, Out, aclError, api, array_fits};
use crate::handle::not_live;
use crate::runtime::Runtime;
use crate::session::runtime;

/// `aclrtPhysicalMemProp` (`acl_rt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PhysicalMemProp {
    handle_type: u32,
    allocation_type: u32,
    mem_attr: u32,
    location_id: u32,
    location_type: u32,
    reserve: u64,
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<PhysicalMemProp>() == 32);
    assert!(std::mem::offset_of!(PhysicalMemProp, location_id) == 12);
    assert!(std::mem::offset_of!(PhysicalMemProp, reserve) == 24);
};

/// `ACL_MEM_LOCATION_TYPE_*`.
const LOCATION_HOST: u32 = 0;
const LOCATION_DEVICE: u32 = 1;
const LOCATION_UNREGISTERED: u32 = 2;
const LOCATION_MANAGED: u32 = 3;
const LOCATION_HOST_NUMA: u32 = 4;

/// A device `aclrtMemAttr` as the ACL layer reads it (`memAttrHandlers`, hicann/runtime
/// `src/acl/aclrt_impl/memory.cpp`): CANN's page type and whether the memory type is P2P,
/// which is what `aclrtMemGetAllocationPropertiesFromHandle` answers from, and the page size
/// the simulator maps it with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DeviceAttr {
    /// CANN's page type: 0 normal, 1 huge, 2 1 GiB.
    pg: u8,
    p2p: bool,
    /// The granularity's page: CANN documents ACL_HBM_MEM_NORMAL as allocated as huge
    /// pages (docs/zh/api_ref/11-04_virtual_memory_management.md, aclrtMallocPhysical), so
    /// it maps as huge pages here though its page type is normal.
    granule: PageSize,
    /// An `ACL_HBM_MEM_*` value (1 GiB pages of those exist on Ascend950 too).
    hbm: bool,
}

impl DeviceAttr {
    /// The properties code kept with the allocation.
    fn props(self) -> Props {
        Props(self.pg | u8::from(self.p2p) << 4)
    }
}

/// What `aclrtMemAttr` value `attr` asks for of device memory; `None` for a value outside
/// the ACL layer's table; the `ACL_DDR_MEM_*` values (host memory only) are `Some(None)`.
fn page_of(attr: u32) -> Option<Option<DeviceAttr>> {
    let a = |pg, p2p, granule, hbm| {
        Some(Some(DeviceAttr {
            pg,
            p2p,
            granule,
            hbm,
        }))
    };
    match attr {
        // ACL_DDR_MEM_HUGE, _NORMAL, _P2P_HUGE, _P2P_NORMAL.
        2 | 3 | 6 | 7 => Some(None),
        4 => a(1, false, PageSize::Huge, true),
        5 => a(0, false, PageSize::Huge, true),
        10 => a(2, false, PageSize::Huge1G, true),
        12 => a(0, false, PageSize::Normal, false),
        13 => a(1, false, PageSize::Huge, false),
        14 => a(2, false, PageSize::Huge1G, false),
        15 => a(0, true, PageSize::Normal, false),
        16 => a(1, true, PageSize::Huge, false),
        17 => a(2, true, PageSize::Huge1G, false),
        _ => None,
    }
}

/// The `aclrtMemAttr` CANN answers for device memory of properties `p`: the first device row
/// of `aclrtMemGetAllocationPropertiesFromHandleImpl`'s table for its page and memory type
/// (so ACL_MEM_NORMAL memory answers ACL_HBM_MEM_NORMAL, as there).
fn attr_back(p: Props) -> u32 {
    match (p.0 & 0xf, p.0 >> 4 != 0) {
        (0, false) => 5,
        (1, false) => 4,
        (2, false) => 10,
        (0, true) => 15,
        (1, true) => 16,
        _ => 17,
    }
}

/// The ACL layer's checks of `prop->memAttr` against `prop->location.type` (100000), shared
/// by `aclrtMallocPhysical` and `aclrtMemGetAllocationGranularity`; the page size of a
/// device allocation, `None` for host memory.
fn attr_checks(p: &PhysicalMemProp) -> Result<Option<DeviceAttr>, CallError> {
    let device = p.location_type == LOCATION_DEVICE;
    match page_of(p.mem_attr) {
        Some(None) if device => Err(CallError::new(
            Error::InvalidParam,
            format!(
                "memAttr {} is an ACL_DDR_MEM_* value, which only host memory \
                 (ACL_MEM_LOCATION_TYPE_HOST or _HOST_NUMA) takes",
                p.mem_attr
            ),
        )),
        Some(page) => Ok(page),
        None => Err(CallError::new(
            Error::InvalidParam,
            format!(
                "memAttr {}: not a physical memory attribute aclrtMallocPhysical takes \
                 (ACL_MEM_NORMAL, ACL_MEM_HUGE, ACL_HBM_MEM_HUGE, … of acl_rt.h)",
                p.mem_attr
            ),
        )),
    }
}

/// The runtime's checks of the properties' location, then the SoC's: the device and the
/// page size of a device allocation. Host memory (`HOST`, `HOST_NUMA`) is not simulated:
/// 207000.
fn device_page(
    rt: &Runtime,
    p: &PhysicalMemProp,
    page: Option<DeviceAttr>,
) -> Result<(u32, DeviceAttr), CallError> {
    let soc = rt.backend().soc();
    if p.location_type != LOCATION_DEVICE {
        return Err(match p.location_type {
            LOCATION_HOST | LOCATION_HOST_NUMA => CallError::new(
                Error::FeatureNotSupport,
                "physical host memory (ACL_MEM_LOCATION_TYPE_HOST, _HOST_NUMA) is not simulated: \
                 only device memory is",
            ),
            t => CallError::new(
                Error::ParamInvalid,
                format!("location.type {t}: expected ACL_MEM_LOCATION_TYPE_DEVICE or _HOST"),
            ),
        });
    }
    let device = rt.device_id(p.location_id)?;
    let Some(attr) = page else {
        return Err(CallError::new(Error::DrvInternalError, "no page size"));
    };
    if attr.granule == PageSize::Huge1G && !has_huge1g(soc, attr.hbm) {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "memAttr {}: 1 GiB pages are not supported on {}",
                p.mem_attr,
                soc.name()
            ),
        ));
    }
    Ok((device, attr))
}

/// The properties at `prop`, copied.
///
/// # Safety
///
/// `prop` is non-NULL and valid for reading an `aclrtPhysicalMemProp`.
unsafe fn prop_at(prop: *const PhysicalMemProp) -> PhysicalMemProp {
    // SAFETY: by the caller's contract.
    unsafe { prop.read_unaligned() }
}

/// The physical allocation C handle `handle` stands for; 107017 if it is not a live one.
pub(crate) fn phys(rt: &Runtime, handle: *mut c_void) -> Result<PhysMem, CallError> {
    rt.phys
        .get(handle.addr())
        .ok_or_else(|| phys_not_live(handle))
}

/// 107017 for a physical memory handle that is not live in this process.
fn phys_not_live(handle: *mut c_void) -> CallError {
    not_live(
        "physical memory handle",
        "a physical memory handle",
        handle.addr(),
    )
}

pub(crate) fn backend(e: acl_notify_sim::SimError) -> CallError {
    CallError::backend(e)
}

/// `aclError aclrtMemGetAllocationGranularity(aclrtPhysicalMemProp *prop,
/// aclrtMemGranularityOptions option, size_t *granularity)`: 4 KiB for normal pages, 2 MiB
/// for huge pages (and `ACL_HBM_MEM_NORMAL`), 1 GiB for 1 GiB pages; the minimum and the
/// recommended granularity are the same.
///
/// Codes: 100000 prop or granularity NULL, a memAttr outside CANN's table or a DDR one for
/// a device; 107001 no such device; 107000 an option other than MINIMUM or RECOMMENDED, a
/// location that is neither device nor host; 207000 host memory, 1 GiB pages where the SoC
/// has none, IPV350.
///
/// # Safety
///
/// `prop` is NULL or readable; `granularity` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemGetAllocationGranularity(
    prop: *const PhysicalMemProp,
    option: u32,
    granularity: *mut usize,
) -> aclError {
    api("aclrtMemGetAllocationGranularity", || {
        if prop.is_null() {
            return Err(null_arg("prop"));
        }
        // SAFETY: `granularity` is NULL or writable, by the caller's contract.
        unsafe { Out::new(granularity) }.write(
            || null_arg("granularity"),
            || {
                // SAFETY: non-NULL, readable by the caller's contract.
                let p = unsafe { prop_at(prop) };
                let page = attr_checks(&p)?;
                let rt = runtime()?;
                rt.backend()
                    .require_vmm("querying the allocation granularity")
                    .map_err(backend)?;
                let (device, page) = device_page(&rt, &p, page)?;
                if option > 1 {
                    return Err(CallError::new(
                        Error::ParamInvalid,
                        format!(
                            "option {option}: expected ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM (0) or \
                     _RECOMMENDED (1)"
                        ),
                    ));
                }
                let g = rt
                    .backend()
                    .vmm_granularity(device, page.granule)
                    .map_err(backend)?;
                Ok(g as usize)
            },
        )
    })
}

/// `aclError aclrtMallocPhysical(aclrtDrvMemHandle *handle, size_t size, const
/// aclrtPhysicalMemProp *prop, uint64_t flags)`: device memory with no address yet, to be
/// mapped with `aclrtMapMem`.
///
/// Codes: 100000 handle or prop NULL, size 0, flags not 0, handleType not
/// ACL_MEM_HANDLE_TYPE_NONE, allocationType not PINNED, location UNREGISTERED or MANAGED, the
/// memAttr checks of `aclrtMemGetAllocationGranularity`; 107001; 207000 host memory, 1 GiB
/// pages the SoC lacks, IPV350; 207001 out of device memory.
///
/// # Safety
///
/// `handle` is NULL or writable; `prop` is NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocPhysical(
    handle: *mut *mut c_void,
    size: usize,
    prop: *const PhysicalMemProp,
    flags: u64,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let handle = unsafe { Out::new(handle) };
    api("aclrtMallocPhysical", || {
        let handle = handle.check(|| null_arg("handle"))?;
        if prop.is_null() {
            return Err(null_arg("prop"));
        }
        size_and_flags(size, flags)?;
        // SAFETY: non-NULL, readable by the caller's contract.
        let p = unsafe { prop_at(prop) };
        if p.handle_type != 0 {
            return Err(CallError::new(
                Error::InvalidParam,
                format!(
                    "prop->handleType {}: only ACL_MEM_HANDLE_TYPE_NONE (0)",
                    p.handle_type
                ),
            ));
        }
        if p.allocation_type != 0 {
            return Err(CallError::new(
                Error::InvalidParam,
                format!(
                    "prop->allocationType {}: only ACL_MEM_ALLOCATION_TYPE_PINNED (0)",
                    p.allocation_type
                ),
            ));
        }
        if matches!(p.location_type, LOCATION_UNREGISTERED | LOCATION_MANAGED) {
            return Err(CallError::new(
                Error::InvalidParam,
                format!(
                    "prop->location.type {}: physical memory is not UNREGISTERED or MANAGED",
                    p.location_type
                ),
            ));
        }
        let page = attr_checks(&p)?;
        let rt = runtime()?;
        rt.backend()
            .require_vmm("allocating physical memory")
            .map_err(backend)?;
        let (device, page) = device_page(&rt, &p, page)?;
        let h = rt
            .backend()
            .vmm_malloc_physical(device, size, page.granule, page.props())
            .map_err(backend)?;
        hand_out(&rt, h, handle)
    })
}

/// Gives physical allocation `h` a C handle, written to `*out`; with no handle left (207001)
/// the allocation is freed again.
pub(crate) fn hand_out(
    rt: &Runtime,
    h: PhysMem,
    out: Checked<*mut c_void>,
) -> Result<(), CallError> {
    let c = match rt.phys.insert(h) {
        Ok(c) => c,
        Err(e) => {
            let _ = rt.backend().vmm_free_physical(h);
            return Err(e);
        }
    };
    out.put(std::ptr::without_provenance_mut(c));
    Ok(())
}

/// `aclError aclrtFreePhysical(aclrtDrvMemHandle handle)`: frees a physical allocation (or
/// drops an imported one); one still mapped is freed at its last `aclrtUnmapMem`, as CANN
/// documents, and its handle is dead at once.
///
/// Codes: 100000 NULL; 107017 not a live handle (freed already, another process's).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFreePhysical(handle: *mut c_void) -> aclError {
    api("aclrtFreePhysical", || {
        if handle.is_null() {
            return Err(null_arg("handle"));
        }
        let rt = runtime()?;
        // Taken out of the table in one step: two threads freeing the same handle at once
        // cannot both pass a look-up and free the memory twice; the second answers 107017.
        let h = rt
            .phys
            .remove(handle.addr())
            .ok_or_else(|| phys_not_live(handle))?;
        rt.backend().vmm_free_physical(h).map_err(backend)
    })
}

/// `aclError aclrtReserveMemAddress(void **virPtr, size_t size, size_t alignment, void
/// *expectPtr, uint64_t flags)`: reserves device addresses (nothing mapped yet).
///
/// Codes: 100000 virPtr NULL, size 0, flags other than 0 and 1 (1 is kept for old
/// programs); 107000 alignment not 0, an expectPtr outside 16–24 TiB, unaligned, in use, or
/// given on Ascend950; 207000 IPV350; 207001 no address space.
///
/// # Safety
///
/// `vir_ptr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtReserveMemAddress(
    vir_ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expect_ptr: *mut c_void,
    flags: u64,
) -> aclError {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        reserve(
            "aclrtReserveMemAddress",
            vir_ptr,
            size,
            alignment,
            expect_ptr,
            flags,
        )
    }
}

/// `aclError aclrtReserveMemAddressNoUCMemory(void **virPtr, size_t size, size_t alignment,
/// void *expectPtr, uint64_t flags)`: as `aclrtReserveMemAddress`, with the checks and codes
/// of it (hicann/runtime `src/acl/aclrt_impl/memory.cpp`: the same ACL checks, then
/// `rtReserveMemAddress` with an internal flag bit added). The simulator has no UC memory to
/// leave out: the range is an ordinary reserved range.
///
/// # Safety
///
/// `vir_ptr` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtReserveMemAddressNoUCMemory(
    vir_ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expect_ptr: *mut c_void,
    flags: u64,
) -> aclError {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        reserve(
            "aclrtReserveMemAddressNoUCMemory",
            vir_ptr,
            size,
            alignment,
            expect_ptr,
            flags,
        )
    }
}

/// The reserve functions' body, `name` the function's.
///
/// # Safety
///
/// `vir_ptr` is NULL or writable.
unsafe fn reserve(
    name: &'static str,
    vir_ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    expect_ptr: *mut c_void,
    flags: u64,
) -> aclError {
    api(name, || {
        // SAFETY: `vir_ptr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(vir_ptr) }.write(
            || null_arg("virPtr"),
            || {
                if size == 0 {
                    return Err(CallError::new(Error::InvalidParam, "size is 0"));
                }
                if flags > 1 {
                    return Err(CallError::new(
                        Error::InvalidParam,
                        format!("flags {flags:#x}: expected 0"),
                    ));
                }
                let rt = runtime()?;
                let expect = (!expect_ptr.is_null()).then(|| expect_ptr.addr());
                let va = rt
                    .backend()
                    .vmm_reserve(size, alignment, expect)
                    .map_err(backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(va))
            },
        )
    })
}

/// `aclError aclrtReleaseMemAddress(void *virPtr)`: gives a reserved range back.
///
/// Codes: 100000 NULL; 107000 not the start of a reserved range, or one that still maps
/// physical memory.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtReleaseMemAddress(vir_ptr: *mut c_void) -> aclError {
    api("aclrtReleaseMemAddress", || {
        if vir_ptr.is_null() {
            return Err(null_arg("virPtr"));
        }
        let rt = runtime()?;
        rt.backend().vmm_release(vir_ptr.addr()).map_err(backend)
    })
}

/// `aclError aclrtMapMem(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle handle,
/// uint64_t flags)`: maps a whole physical allocation at `virPtr`, in a reserved range.
///
/// Codes: 100000 virPtr or handle NULL, size 0, flags not 0; 107017 handle not live;
/// 107000 offset not 0, no reserved range there, a size other than the allocation's,
/// unaligned to its granularity, past the range, over a mapping, memory of two devices (or
/// allocated and imported) in one range.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMapMem(
    vir_ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: *mut c_void,
    flags: u64,
) -> aclError {
    api("aclrtMapMem", || {
        map_checked(vir_ptr, size, offset, handle, flags, Sim::vmm_map)
    })
}

/// A backend's mapping of a whole physical allocation (`Sim::vmm_map` and its variants).
pub(crate) type MapFn =
    fn(&Sim, usize, usize, usize, PhysMem) -> Result<(), acl_notify_sim::SimError>;

/// `size` 0, then `flags` not 0 (reserved): 100000 each, as `aclrtMallocPhysical` and
/// `aclrtMapMem` check them (hicann/runtime `src/acl/aclrt_impl/memory.cpp`).
fn size_and_flags(size: usize, flags: u64) -> Result<(), CallError> {
    if size == 0 {
        return Err(CallError::new(Error::InvalidParam, "size is 0"));
    }
    reserved_flags(flags)
}

/// `aclrtMapMem`'s checks, in CANN's order (hicann/runtime `src/acl/aclrt_impl/memory.cpp`:
/// NULL `virPtr`, NULL `handle`, zero `size`, non-zero `flags`, each 100000; then the handle,
/// 107017 if not live), then `map` (also `aclrtMemMapNoAccess`'s, `vmm_map_options`).
pub(crate) fn map_checked(
    vir_ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: *mut c_void,
    flags: u64,
    map: MapFn,
) -> Result<(), CallError> {
    if vir_ptr.is_null() {
        return Err(null_arg("virPtr"));
    }
    if handle.is_null() {
        return Err(null_arg("handle"));
    }
    size_and_flags(size, flags)?;
    let rt = runtime()?;
    let h = phys(&rt, handle)?;
    map(rt.backend(), vir_ptr.addr(), size, offset, h).map_err(backend)
}

/// `aclError aclrtUnmapMem(void *virPtr)`: removes the mapping that starts at `virPtr`.
///
/// Codes: 100000 NULL; 107000 no mapping starts there.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtUnmapMem(vir_ptr: *mut c_void) -> aclError {
    api("aclrtUnmapMem", || {
        if vir_ptr.is_null() {
            return Err(null_arg("virPtr"));
        }
        let rt = runtime()?;
        rt.backend().vmm_unmap(vir_ptr.addr()).map_err(backend)
    })
}

/// The export shared by `aclrtMemExportToShareableHandle` and its V2: flags checked by the
/// runtime (107000 above 1), then `before` (the FABRIC export's own checks), then the
/// handle, then `how` exports it (open: flags 1).
pub(crate) fn export<T>(
    handle: *mut c_void,
    flags: u64,
    before: impl FnOnce(&Runtime) -> Result<(), CallError>,
    how: impl FnOnce(&Sim, PhysMem, bool) -> Result<T, acl_notify_sim::SimError>,
) -> Result<T, CallError> {
    let rt = runtime()?;
    if flags > 1 {
        return Err(CallError::new(
            Error::ParamInvalid,
            format!(
                "flags {flags:#x}: expected ACL_RT_VMM_EXPORT_FLAG_DEFAULT (0) or \
                 _DISABLE_PID_VALIDATION (1)"
            ),
        ));
    }
    before(&rt)?;
    let h = phys(&rt, handle)?;
    how(rt.backend(), h, flags == 1).map_err(backend)
}

/// `aclError aclrtMemExportToShareableHandle(aclrtDrvMemHandle handle, aclrtMemHandleType
/// handleType, uint64_t flags, uint64_t *shareableHandle)`: exports a physical allocation of
/// this process for other processes of this server; with flags 0 only the processes
/// `aclrtMemSetPidToShareableHandle` names may import it.
///
/// Codes: 100000 handle or shareableHandle NULL, handleType not NONE; 107000 flags above 1,
/// imported memory, exported already; 107017 handle not live; 207000 IPV350.
///
/// # Safety
///
/// `shareable_handle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemExportToShareableHandle(
    handle: *mut c_void,
    handle_type: u32,
    flags: u64,
    shareable_handle: *mut u64,
) -> aclError {
    api("aclrtMemExportToShareableHandle", || {
        if handle.is_null() {
            return Err(null_arg("handle"));
        }
        if handle_type != 0 {
            return Err(CallError::new(
                Error::InvalidParam,
                format!("handleType {handle_type}: only ACL_MEM_HANDLE_TYPE_NONE (0)"),
            ));
        }
        // SAFETY: `shareable_handle` is NULL or writable, by the caller's contract.
        unsafe { Out::new(shareable_handle) }.write(
            || null_arg("shareableHandle"),
            || export(handle, flags, |_| Ok(()), Sim::vmm_export),
        )
    })
}

/// The whitelisting of `aclrtMemSetPidToShareableHandle` and its V2, once the ACL layer's
/// checks passed: `how` whitelists the PIDs read.
///
/// # Safety
///
/// `pid` is non-NULL and valid for reading `num` `int32_t`s.
pub(crate) unsafe fn set_pids(
    pid: *const i32,
    num: usize,
    how: impl FnOnce(&Sim, &[i32]) -> Result<(), acl_notify_sim::SimError>,
) -> Result<(), CallError> {
    let rt = runtime()?;
    // SAFETY: the caller's contract.
    let pids = unsafe { whitelist_pids(pid, num) }?;
    how(rt.backend(), pids).map_err(backend)
}

/// `aclError aclrtMemSetPidToShareableHandle(uint64_t shareableHandle, int32_t *pid, size_t
/// pidNum)`: lets the processes `pid` names (`aclrtDeviceGetBareTgid`) import the export.
///
/// Codes: 100000 pid NULL, pidNum 0; 107000 a handle that names no live export; 207006 not
/// the exporter, or exported without PID validation; 207012 more than 64; 207000 IPV350.
///
/// # Safety
///
/// `pid` is NULL or valid for reading `pid_num` `int32_t`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemSetPidToShareableHandle(
    shareable_handle: u64,
    pid: *mut i32,
    pid_num: usize,
) -> aclError {
    api("aclrtMemSetPidToShareableHandle", || {
        if pid.is_null() {
            return Err(null_arg("pid"));
        }
        if pid_num == 0 {
            return Err(CallError::new(Error::InvalidParam, "pidNum is 0"));
        }
        // SAFETY: non-NULL, `pid_num` readable by the caller's contract.
        unsafe {
            set_pids(pid, pid_num, |sim, p| {
                sim.vmm_share_pids(shareable_handle, p)
            })
        }
    })
}

/// The import of `aclrtMemImportFromShareableHandle` and its V2 onto `device` (`how`
/// imports), written to `*handle`.
pub(crate) fn import(
    rt: &Runtime,
    device: u32,
    handle: Checked<*mut c_void>,
    how: impl FnOnce(&Sim, u32) -> Result<PhysMem, acl_notify_sim::SimError>,
) -> Result<(), CallError> {
    let h = how(rt.backend(), device).map_err(backend)?;
    hand_out(rt, h, handle)
}

/// `aclError aclrtMemImportFromShareableHandle(uint64_t shareableHandle, int32_t deviceId,
/// aclrtDrvMemHandle *handle)`: the physical allocation another process of this server
/// exported, as a handle of this process for use on `deviceId` (peer access enabled, as
/// CANN's runtime does). Map it with `aclrtMapMem`; `aclrtFreePhysical` drops it.
///
/// Codes: 100000 handle NULL; 107001 no such device; 107002 no current context; 107000 a
/// handle that names no live export, this process's own export, or one it imported already;
/// 207006 not whitelisted; 207000 IPV350.
///
/// # Safety
///
/// `handle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemImportFromShareableHandle(
    shareable_handle: u64,
    device_id: i32,
    handle: *mut *mut c_void,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let handle = unsafe { Out::new(handle) };
    api("aclrtMemImportFromShareableHandle", || {
        let handle = handle.check(|| null_arg("handle"))?;
        let rt = runtime()?;
        let device = rt.device_id(device_id)?;
        rt.current()?;
        import(&rt, device, handle, |sim, d| {
            sim.vmm_import(shareable_handle, d)
        })
    })
}

/// `aclError aclrtMemRetainAllocationHandle(void *virPtr, aclrtDrvMemHandle *handle)`: another
/// handle of the physical allocation mapped at `virPtr` (where `aclrtMapMem` mapped it); each
/// handle takes its own `aclrtFreePhysical`, as CANN documents.
///
/// Codes: 100000 virPtr or handle NULL; 107000 no mapping starts at virPtr.
///
/// # Safety
///
/// `handle` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemRetainAllocationHandle(
    vir_ptr: *mut c_void,
    handle: *mut *mut c_void,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let handle = unsafe { Out::new(handle) };
    api("aclrtMemRetainAllocationHandle", || {
        if vir_ptr.is_null() {
            return Err(null_arg("virPtr"));
        }
        let handle = handle.check(|| null_arg("handle"))?;
        let rt = runtime()?;
        let h = rt.backend().vmm_retain(vir_ptr.addr()).map_err(backend)?;
        hand_out(&rt, h, handle)
    })
}

/// `aclError aclrtMemGetAllocationPropertiesFromHandle(aclrtDrvMemHandle handle,
/// aclrtPhysicalMemProp *prop)`: the properties a physical allocation was made with, as CANN
/// answers them (its memAttr from the page and memory type: ACL_MEM_NORMAL memory answers
/// ACL_HBM_MEM_NORMAL, as in `aclrtMemGetAllocationPropertiesFromHandleImpl`); an import
/// answers its exporter's, on the device it was imported onto.
///
/// Codes: 100000 handle or prop NULL; 107017 handle not live.
///
/// # Safety
///
/// `prop` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemGetAllocationPropertiesFromHandle(
    handle: *mut c_void,
    prop: *mut PhysicalMemProp,
) -> aclError {
    api("aclrtMemGetAllocationPropertiesFromHandle", || {
        if handle.is_null() {
            return Err(null_arg("handle"));
        }
        // SAFETY: `prop` is NULL or writable, by the caller's contract.
        unsafe { Out::new(prop) }.write(
            || null_arg("prop"),
            || {
                let rt = runtime()?;
                let h = phys(&rt, handle)?;
                let (device, _, props) = rt.backend().vmm_properties(h).map_err(backend)?;
                let p = PhysicalMemProp {
                    handle_type: 0,
                    allocation_type: 0,
                    mem_attr: attr_back(props),
                    location_id: device,
                    location_type: LOCATION_DEVICE,
                    reserve: 0,
                };
                Ok(p)
            },
        )
    })
}

/// `aclError aclrtMemGetAddressRange(void *ptr, void **pbase, size_t *psize)`: the start and
/// size of the block `ptr` is in: a mapping of a reserved range, an `aclrtMalloc` allocation
/// or an import (the size asked for), or `aclrtMallocHost` memory. Either output may be NULL.
///
/// Codes: 100000 ptr NULL; 107000 pbase and psize both NULL (hicann/runtime `api_error.cc`),
/// an address in no such block.
///
/// # Safety
///
/// `pbase` and `psize` are each NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemGetAddressRange(
    ptr: *mut c_void,
    pbase: *mut *mut c_void,
    psize: *mut usize,
) -> aclError {
    // SAFETY: each NULL or writable, by the caller's contract.
    let (pbase, psize) = unsafe { (Out::new(pbase).given(), Out::new(psize).given()) };
    api("aclrtMemGetAddressRange", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        let rt = runtime()?;
        if pbase.is_none() && psize.is_none() {
            return Err(CallError::new(
                Error::ParamInvalid,
                "pbase and psize are both NULL: ask for at least one",
            ));
        }
        let (base, size) = rt
            .backend()
            .vmm_address_range(ptr.addr())
            .map_err(backend)?;
        if let Some(pbase) = pbase {
            pbase.put(std::ptr::with_exposed_provenance_mut(base));
        }
        if let Some(psize) = psize {
            psize.put(size);
        }
        Ok(())
    })
}

/// `aclrtMemLocation` (`acl_rt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemLocation {
    id: u32,
    kind: u32,
}

/// `aclrtMemAccessDesc` (`acl_rt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemAccessDesc {
    flags: u32,
    location: MemLocation,
    rsv: [u8; 12],
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<MemLocation>() == 8);
    assert!(std::mem::size_of::<MemAccessDesc>() == 24);
    assert!(std::mem::offset_of!(MemAccessDesc, location) == 4);
};

/// The location of `l` (`what` in messages): the host (id 0) or a device; any other type
/// or a host id other than 0 is 107000 (halMemSetAccess: "when location is host, id must be
/// 0").
fn location(l: MemLocation, what: &str) -> Result<AccessLoc, CallError> {
    match (l.kind, l.id) {
        (LOCATION_HOST, 0) => Ok(AccessLoc::Host),
        (LOCATION_HOST, id) => Err(CallError::new(
            Error::ParamInvalid,
            format!("{what}: a host location has id 0, not {id}"),
        )),
        (LOCATION_DEVICE, id) => Ok(AccessLoc::Device(id)),
        (t, _) => Err(CallError::new(
            Error::ParamInvalid,
            format!(
                "{what}: location type {t}: expected ACL_MEM_LOCATION_TYPE_HOST (0) or \
                 ACL_MEM_LOCATION_TYPE_DEVICE (1)"
            ),
        )),
    }
}

/// `aclError aclrtMemSetAccess(void *virPtr, size_t size, aclrtMemAccessDesc *desc, size_t
/// count)`: gives the locations of `desc[0..count]` their access to the mapping that is
/// exactly `[virPtr, virPtr + size)`; the mapping's owner device has read-write from the start.
///
/// Codes (hicann/runtime `src/acl/aclrt_impl/memory.cpp`: no ACL check;
/// `src/runtime/api/impl/api_error.cc`: virPtr, then desc NULL → 107000; then the driver's,
/// `pkg_inc/driver/ascend_hal_base.h`): 107000 virPtr or desc NULL, count 0, flags not an
/// `aclrtMemAccessFlags`, a location neither the host (id 0) nor a device of this machine,
/// a range that is not a mapping's; 207000 IPV350; 507899 a location given another access
/// before (DRV_ERROR_BUSY).
///
/// # Safety
///
/// `desc` is NULL or points to `count` readable descriptors.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemSetAccess(
    vir_ptr: *mut c_void,
    size: usize,
    desc: *mut MemAccessDesc,
    count: usize,
) -> aclError {
    api("aclrtMemSetAccess", || {
        for (p, name) in [(vir_ptr.is_null(), "virPtr"), (desc.is_null(), "desc")] {
            if p {
                return Err(CallError::new(
                    Error::ParamInvalid,
                    format!("{name} is NULL"),
                ));
            }
        }
        let rt = runtime()?;
        rt.backend()
            .require_vmm("aclrtMemSetAccess")
            .map_err(backend)?;
        array_fits::<MemAccessDesc>(count, "count", Error::ParamInvalid)?;
        let descs = (0..count)
            .map(|i| {
                // SAFETY: `i < count` descriptors readable by the caller's contract.
                let d = unsafe { desc.add(i).read_unaligned() };
                let what = format!("desc[{i}]");
                let acc = Access::from_flags(u64::from(d.flags)).ok_or_else(|| {
                    CallError::new(
                        Error::ParamInvalid,
                        format!(
                            "{what}: flags {:#x}: expected ACL_RT_MEM_ACCESS_FLAGS_NONE (0), \
                             _READ (1) or _READWRITE (3)",
                            d.flags
                        ),
                    )
                })?;
                Ok((location(d.location, &what)?, acc))
            })
            .collect::<Result<Vec<_>, CallError>>()?;
        rt.backend()
            .vmm_set_access(vir_ptr.addr(), size, &descs)
            .map_err(backend)
    })
}

/// `aclError aclrtMemGetAccess(void *virPtr, aclrtMemLocation *location, uint64_t *flag)`:
/// the access `location` was given to the mapping `virPtr` is in
/// (`ACL_RT_MEM_ACCESS_FLAGS_*`); a location given none answers 0x7FFFFFFF (halMemGetAccess:
/// `MEM_ACCESS_TYPE_MAX`).
///
/// Codes (hicann/runtime `src/acl/aclrt_impl/memory.cpp`): 100000 virPtr, location or flag
/// NULL; then 107000 a location neither the host (id 0) nor a device, an address in no
/// mapping; 207000 IPV350.
///
/// # Safety
///
/// `location` is NULL or readable; `flag` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemGetAccess(
    vir_ptr: *mut c_void,
    location_ptr: *mut MemLocation,
    flag: *mut u64,
) -> aclError {
    api("aclrtMemGetAccess", || {
        if vir_ptr.is_null() {
            return Err(null_arg("virPtr"));
        }
        if location_ptr.is_null() {
            return Err(null_arg("location"));
        }
        // SAFETY: `flag` is NULL or writable, by the caller's contract.
        unsafe { Out::new(flag) }.write(
            || null_arg("flag"),
            || {
                let rt = runtime()?;
                rt.backend()
                    .require_vmm("aclrtMemGetAccess")
                    .map_err(backend)?;
                // SAFETY: non-NULL, readable by the caller's contract.
                let loc = location(unsafe { location_ptr.read_unaligned() }, "location")?;
                let got = rt
                    .backend()
                    .vmm_get_access(vir_ptr.addr(), loc)
                    .map_err(backend)?;
                let v = got.map_or(NO_ACCESS_SET, |a| a as u64);
                Ok(v)
            },
        )
    })
}

/// What `aclrtMemGetAccess` answers for a location given no access (`MEM_ACCESS_TYPE_MAX`).
const NO_ACCESS_SET: u64 = 0x7FFF_FFFF;

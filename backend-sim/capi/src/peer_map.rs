//! Mappings of device memory for another device or over a chosen link: `aclrtMemP2PMap` and
//! `aclrtMemMapSelectedLink`, over the simulator's device memory and reserved ranges
//! (`acl_notify_sim::mem::location`, `::vmm`).
//!
//! What CANN promises (hicann/runtime `docs/zh/api_ref/11-05_unified_addressing.md`,
//! `11-04_virtual_memory_management.md`):
//! - `aclrtMemP2PMap` builds the page tables through which device `dstDevId` reaches
//!   `devPtr`'s memory, after `aclrtDeviceEnablePeerAccess` between the two, so that its
//!   first access does not fault: a matter of speed. The simulated devices' memory is mapped
//!   for every device already, so the call checks what CANN's runtime and driver check — the
//!   range is device memory of this process (`aclrtMalloc`'s, not managed memory), the device
//!   exists, peer access between the two devices is enabled (either way) — and maps nothing
//!   more. Order and codes from `src/acl/aclrt_impl/memory.cpp` (`aclrtMemP2PMapImpl`: NULL,
//!   size 0, flags → 100000; the device index → 107001) and `api_error.cc`
//!   (`MemPrefetchToDevice`); peer access not enabled is 207006, the code the simulator's
//!   copies between devices without it answer (the driver's is not in the source).
//! - `aclrtMemMapSelectedLink` maps the reserved range at `virPtrDst` to the physical memory
//!   mapped at `virPtrSrc`, piece by piece as `virPtrSrc` is mapped, the mappings made over
//!   link `linkIdx` (SIO or HCCS, Atlas A3 only). It is CANN's loop
//!   (`src/runtime/api/impl/api_impl.cc`, `ApiImpl::MemMapSelectedLink`): each block of the
//!   source by its address range, its handle retained, mapped at the same offset of the
//!   destination, the handle released; each mapping is undone by its own `aclrtUnmapMem`. The
//!   simulated device has one interconnect: the link changes which bytes are reached in no
//!   way, and is checked only.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::mem::location::MemLocation;

use crate::errmsg::{CallError, acl_param, null_arg, param, reserved_flags};
use crate::ffi::{aclError, api};
use crate::session::runtime;

/// `ACL_RT_MEM_LINK_IDX_1` (HCCS), the last link.
const LINK_IDX_MAX: u32 = 1;

/// `aclError aclrtMemP2PMap(void *devPtr, size_t size, int32_t dstDevId, uint64_t flags)`:
/// checks that device `dstDevId` may reach `[devPtr, devPtr + size)` (see the module docs).
///
/// Codes: 100000 `devPtr` NULL, size 0, flags not 0; 107001 `dstDevId` no device; 107002;
/// 207000 a SoC without peer access (Ascend310B, IPV350); 107000 the range is not device
/// memory of this process (managed and host memory included) or leaves its allocation;
/// 207006 peer access between the two devices not enabled.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemP2PMap(
    dev_ptr: *mut c_void,
    size: usize,
    dst_dev_id: i32,
    flags: u64,
) -> aclError {
    api("aclrtMemP2PMap", || {
        if dev_ptr.is_null() {
            return Err(null_arg("devPtr"));
        }
        if size == 0 {
            return Err(acl_param("size is 0"));
        }
        reserved_flags(flags)?;
        let rt = runtime()?;
        let sim = rt.backend();
        let n = sim.device_count();
        if dst_dev_id < 0 || dst_dev_id as u32 >= n {
            return Err(CallError::new(
                Error::InvalidDeviceId,
                format!(
                    "dstDevId {dst_dev_id} is not a device (0 to {})",
                    n as i64 - 1
                ),
            ));
        }
        let dst = dst_dev_id as u32;
        rt.current_device()?;
        let soc = sim.soc();
        if matches!(soc, Soc::Ascend310B | Soc::IPV350) {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!("{} has no peer-to-peer access between devices", soc.name()),
            ));
        }
        let at = dev_ptr.addr();
        let owner = match sim.mem_location(at) {
            MemLocation::Device {
                device,
                managed: false,
                ..
            } => device,
            MemLocation::Device { managed: true, .. } => {
                return Err(param(format!(
                    "{at:#x} is managed memory (aclrtMemAllocManaged): aclrtMemP2PMap maps \
                     device memory"
                )));
            }
            _ => {
                return Err(param(format!(
                    "{at:#x} is not device memory of this process (aclrtMalloc)"
                )));
            }
        };
        let (base, len) = sim.vmm_address_range(at).map_err(CallError::backend)?;
        if size > len - (at - base) {
            return Err(param(format!(
                "[{at:#x}, +{size}) leaves its allocation {base:#x} ({len} bytes) at offset {}",
                at - base
            )));
        }
        if owner != dst
            && !sim.peer_access_enabled(owner, dst)
            && !sim.peer_access_enabled(dst, owner)
        {
            return Err(CallError::new(
                Error::NoPermission,
                format!(
                    "peer access between device {owner} (the memory's) and device {dst} is not \
                     enabled: call aclrtDeviceEnablePeerAccess first, as CANN requires"
                ),
            ));
        }
        Ok(())
    })
}

/// `aclError aclrtMemMapSelectedLink(void *virPtrDst, size_t size, void *virPtrSrc, uint32_t
/// linkIdx)`: maps the reserved range at `virPtrDst` to the physical memory mapped at
/// `virPtrSrc` (`size` bytes, block by block), over link `linkIdx`.
///
/// Codes: 100000 a NULL address, size 0, `linkIdx` past 1; 207000 off Atlas A3; what
/// `aclrtMemGetAddressRange`, `aclrtMemRetainAllocationHandle` and `aclrtMapMem` answer for a
/// block (107000: `virPtrSrc` not the start of a mapping, the destination not a reserved
/// range or already mapped, sizes that do not match).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemMapSelectedLink(
    vir_ptr_dst: *mut c_void,
    size: usize,
    vir_ptr_src: *mut c_void,
    link_idx: u32,
) -> aclError {
    api("aclrtMemMapSelectedLink", || {
        if vir_ptr_dst.is_null() {
            return Err(null_arg("virPtrDst"));
        }
        if vir_ptr_src.is_null() {
            return Err(null_arg("virPtrSrc"));
        }
        if size == 0 {
            return Err(acl_param("size is 0"));
        }
        if link_idx > LINK_IDX_MAX {
            return Err(acl_param(format!(
                "linkIdx {link_idx}: it must be ACL_RT_MEM_LINK_IDX_0 (SIO) or _1 (HCCS)"
            )));
        }
        let rt = runtime()?;
        let sim = rt.backend();
        let soc = sim.soc();
        if soc != Soc::Ascend910_93 {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "{} has no selectable links (CANN documents aclrtMemMapSelectedLink on \
                     Atlas A3 only)",
                    soc.name()
                ),
            ));
        }
        let (mut src, mut dst, mut done) = (vir_ptr_src.addr(), vir_ptr_dst.addr(), 0usize);
        while done < size {
            let (base, len) = sim.vmm_address_range(src).map_err(CallError::backend)?;
            if base != src {
                return Err(param(format!(
                    "{src:#x} is not the start of its block ({base:#x}): virPtrSrc and each \
                     block after it must start a mapping"
                )));
            }
            let h = sim.vmm_retain(base).map_err(CallError::backend)?;
            let mapped = sim.vmm_map(dst, len, 0, h);
            // The retained handle goes at once: the mapping holds the memory.
            let released = sim.vmm_free_physical(h);
            mapped
                .and(released)
                .map_err(|e| CallError::backend(e).in_context(&format!("block at {src:#x}")))?;
            src += len;
            dst += len;
            done += len;
        }
        Ok(())
    })
}

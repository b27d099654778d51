//! What memory an address is (`aclrtPointerGetAttributes`, `aclrtCheckMemType`), answered
//! from the simulator's own tables ([`acl_notify_sim::mem::location`]).

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::mem::location::MemLocation;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, aclError, api, put_field};
use crate::session::runtime;

/// `aclrtMemLocation` (`acl_rt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Location {
    pub(crate) id: u32,
    pub(crate) kind: u32,
}

/// `aclrtPtrAttributes` (`acl_rt.h`): the location, the page size and four reserved words.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct PtrAttributes {
    location: Location,
    page_size: u32,
    rsv: [u32; 4],
}

const _: () = {
    assert!(std::mem::size_of::<PtrAttributes>() == 28);
    assert!(std::mem::offset_of!(PtrAttributes, page_size) == 8);
};

/// `aclrtMemLocationType`: `ACL_MEM_LOCATION_TYPE_HOST`, `_DEVICE`, `_UNREGISTERED`.
pub(crate) const LOC_HOST: u32 = 0;
pub(crate) const LOC_DEVICE: u32 = 1;
pub(crate) const LOC_UNREGISTERED: u32 = 2;
/// `ACL_MEM_LOCATION_TYPE_MANAGED`: managed memory (`aclrtMemAllocManaged`), with its device.
pub(crate) const LOC_MANAGED: u32 = 3;

/// The page size CANN's driver gives memory it does not know (ours: the host's page).
const UNKNOWN_PAGE: u32 = 4096;

/// `where_` as `aclrtPtrAttributes` carries it: the location and the page size. Device
/// memory carries its device's id; host memory id 0 (hicann/runtime
/// `src/runtime/driver/npu_driver_mem.cc`, `NpuDriver::PtrGetAttributes`: "devId is valid
/// only for the device side memory").
pub(crate) fn location_of(where_: MemLocation) -> (Location, u32) {
    match where_ {
        MemLocation::Device {
            device,
            page_size,
            managed,
            ..
        } => (
            Location {
                id: device,
                kind: if managed { LOC_MANAGED } else { LOC_DEVICE },
            },
            page_size,
        ),
        MemLocation::Host { page_size } => (
            Location {
                id: 0,
                kind: LOC_HOST,
            },
            page_size,
        ),
        MemLocation::Unmapped | MemLocation::Unregistered => (
            Location {
                id: 0,
                kind: LOC_UNREGISTERED,
            },
            UNKNOWN_PAGE,
        ),
    }
}

/// 207000 on IPV350, which CANN documents without these calls
/// (`docs/zh/api_ref/11-05_unified_addressing.md`, 11-01 for `aclrtCheckMemType`).
fn require_queries(soc: Soc, call: &str) -> Result<(), CallError> {
    if soc == Soc::IPV350 {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!("{call} is not supported on IPV350 (as CANN documents)"),
        ));
    }
    Ok(())
}

/// `aclError aclrtPointerGetAttributes(const void *ptr, aclrtPtrAttributes *attributes)`:
/// where `ptr` is. Device memory of this process (an allocation, an IPC import, a mapping of a
/// reserved range) is `ACL_MEM_LOCATION_TYPE_DEVICE` with the memory's device as `id` and
/// its page size; `aclrtMallocHost` memory `_HOST` with id 0; anything else — host memory
/// the runtime does not know, freed memory, an unmapped part of a reserved range —
/// `_UNREGISTERED` (CANN's driver answers a user's own memory so). The reserved words are
/// left as they were, as CANN leaves them.
///
/// Codes (hicann/runtime `src/acl/aclrt_impl/memory.cpp`, `aclrtPointerGetAttributesImpl`):
/// 100000 ptr or attributes NULL; 207000 IPV350.
///
/// # Safety
///
/// `attributes` is NULL or valid for writing an `aclrtPtrAttributes`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtPointerGetAttributes(
    ptr: *const c_void,
    attributes: *mut c_void,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let attributes = unsafe { Out::new(attributes.cast::<PtrAttributes>()) };
    api("aclrtPointerGetAttributes", || {
        if ptr.is_null() {
            return Err(null_arg("ptr"));
        }
        let out = attributes.check(|| null_arg("attributes"))?.bytes();
        let rt = runtime()?;
        require_queries(rt.backend().soc(), "aclrtPointerGetAttributes")?;
        let (location, page_size) = location_of(rt.backend().mem_location(ptr.addr()));
        // Fields written one by one, the reserved words left as they are.
        put_field!(out, PtrAttributes, location, location);
        put_field!(out, PtrAttributes, page_size, page_size);
        Ok(())
    })
}

/// The memory types `aclrtCheckMemType` takes, as CANN's runtime checks them
/// (hicann/runtime `src/runtime/api/impl/api_error.cc`, `ApiErrorDecorator::CheckMemType`:
/// `RT_MEM_MASK_DEV_TYPE` 0x2, `RT_MEM_MASK_DVPP_TYPE` 0x8, `RT_MEM_MASK_RSVD_TYPE` 0x20,
/// `pkg_inc/runtime/rt_external_mem.h`). `acl_rt.h`'s `ACL_RT_MEM_TYPE_RSVD` is 0x10, which
/// that check refuses: the simulator answers as the runtime does.
const TYPE_DEV: u32 = 0x2;
const TYPE_DVPP: u32 = 0x8;
const TYPE_RSVD: u32 = 0x20;

/// The type bit of memory at `where_` (0: none of them — host memory, freed memory).
fn type_of(where_: MemLocation) -> u32 {
    match where_ {
        MemLocation::Device { reserved: true, .. } | MemLocation::Unmapped => TYPE_RSVD,
        // Managed memory is none of the driver's device kinds.
        MemLocation::Device { managed: true, .. } => 0,
        MemLocation::Device { .. } => TYPE_DEV,
        MemLocation::Host { .. } | MemLocation::Unregistered => 0,
    }
}

/// `aclError aclrtCheckMemType(void **addrList, uint32_t size, uint32_t memType, uint32_t
/// *checkResult, uint32_t reserve)`: `*checkResult` is 1 if every one of the `size`
/// addresses is memory of a type in `memType` (device memory of `aclrtMalloc` and its
/// variants or an IPC import: `0x2`; an address of a range reserved with
/// `aclrtReserveMemAddress`: `0x20`; the simulator has no DVPP memory), else 0.
///
/// Codes (hicann/runtime `ApiErrorDecorator::CheckMemType`, in its order): 107000
/// checkResult NULL, then (`*checkResult` set to 0) addrList NULL, reserve not 0, size 0,
/// memType with a bit other than 0x2, 0x8, 0x20; 207000 IPV350; 107002.
///
/// # Safety
///
/// `addr_list` is NULL or valid for reading `size` pointers (at any alignment: they are read
/// unaligned); `check_result` NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCheckMemType(
    addr_list: *const *const c_void,
    size: u32,
    mem_type: u32,
    check_result: *mut u32,
    reserve: u32,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let check_result = unsafe { Out::new(check_result) };
    api("aclrtCheckMemType", || {
        // CANN writes 0 before its other checks, the result once they pass.
        let check_result = check_result.check(|| param("checkResult is NULL"))?;
        check_result.put(0);
        if addr_list.is_null() {
            return Err(param("addrList is NULL"));
        }
        if reserve != 0 {
            return Err(param(format!("reserve is {reserve}: it must be 0")));
        }
        if size == 0 {
            return Err(param("size is 0: addrList must hold at least one address"));
        }
        if mem_type & !(TYPE_DEV | TYPE_DVPP | TYPE_RSVD) != 0 {
            return Err(param(format!(
                "memType {mem_type:#x}: CANN's runtime takes an OR of 0x2 (device memory), 0x8 \
                 (DVPP) and 0x20 (reserved addresses) only (acl_rt.h's ACL_RT_MEM_TYPE_RSVD, \
                 0x10, is refused by that check)"
            )));
        }
        let rt = runtime()?;
        require_queries(rt.backend().soc(), "aclrtCheckMemType")?;
        rt.current_device()?;
        // Read one by one, unaligned: a list at an address not aligned for pointers is the
        // caller's to give (CANN's runtime reads it as it is), not a slice Rust may assume.
        let all = (0..size as usize).all(|i| {
            // SAFETY: non-NULL, `size` readable pointers by the caller's contract; i < size.
            let a = unsafe { addr_list.add(i).read_unaligned() };
            type_of(rt.backend().mem_location(a.addr())) & mem_type != 0
        });
        check_result.put(u32::from(all));
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_addresses_are_rsvd_mapped_or_not_and_host_memory_is_no_type() {
        let dev = |reserved| MemLocation::Device {
            device: 1,
            page_size: 4096,
            reserved,
            managed: false,
        };
        assert_eq!(type_of(dev(false)), TYPE_DEV);
        assert_eq!(type_of(dev(true)), TYPE_RSVD);
        assert_eq!(type_of(MemLocation::Unmapped), TYPE_RSVD);
        assert_eq!(type_of(MemLocation::Host { page_size: 4096 }), 0);
        assert_eq!(type_of(MemLocation::Unregistered), 0);
        assert_eq!(location_of(dev(false)).0.id, 1);
        assert_eq!(location_of(MemLocation::Unmapped).0.kind, LOC_UNREGISTERED);
    }
}

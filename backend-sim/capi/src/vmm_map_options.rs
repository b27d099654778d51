//! The mapping variants of virtual memory management (`acl_rt.h`): `aclrtMemMapNoAccess` (map
//! with no access until `aclrtMemSetAccess`) and `aclrtMemMapSetLink` (advise the link a
//! physical allocation's mappings use). Both work on the handles and ranges of [`crate::vmm`].
//!
//! CANN's checks: hicann/runtime `src/acl/aclrt_impl/memory.cpp` (`aclrtMemMapNoAccess`: NULL
//! `virPtr`, NULL `handle`, zero `size`, non-zero `flags`, each 100000; `aclrtMemMapSetLink`:
//! NULL `handle` 100000), then `src/runtime/api/impl/api_error.cc` (`MemMapSetLink`: a link
//! above `ACL_RT_MEM_ACCESS_UB_MULTI_PORT_PATH` is 107000) and the driver (`api_impl.cc`: the
//! handle's mapping route). The simulator's devices have one kind of link, so a link advice is
//! checked and accepted, and changes nothing.

use std::ffi::c_void;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{aclError, api};
use crate::session::runtime;
use crate::vmm::{map_checked, phys};

/// `ACL_RT_MEM_ACCESS_UB_MULTI_PORT_PATH`, the last `aclrtMemLinkType`.
const LAST_LINK: u32 = 3;

/// `aclError aclrtMemMapNoAccess(void *virPtr, size_t size, size_t offset, aclrtDrvMemHandle
/// handle, uint64_t flags)`: maps as `aclrtMapMem`, with no location (not even the memory's
/// device) given access: `aclrtMemGetAccess` answers none until `aclrtMemSetAccess` gives it.
///
/// Codes: 100000 NULL `virPtr` or `handle`, `size` 0, `flags` not 0; 107017 a handle that is
/// not live; then as `aclrtMapMem` (107000 a range outside a reservation, a size that is not
/// the allocation's, an offset; 207000 no virtual memory management on this SoC).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemMapNoAccess(
    vir_ptr: *mut c_void,
    size: usize,
    offset: usize,
    handle: *mut c_void,
    flags: u64,
) -> aclError {
    api("aclrtMemMapNoAccess", || {
        map_checked(
            vir_ptr,
            size,
            offset,
            handle,
            flags,
            acl_notify_sim::Sim::vmm_map_no_access,
        )
    })
}

/// `aclError aclrtMemMapSetLink(aclrtDrvMemHandle handle, aclrtMemLinkType adviceLink)`:
/// advises the link the handle's mappings use.
///
/// Codes: 100000 NULL `handle`; 107000 a link above 3; 107017 a handle that is not live; 207000
/// no virtual memory management on this SoC.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemMapSetLink(handle: *mut c_void, advice_link: u32) -> aclError {
    api("aclrtMemMapSetLink", || {
        if handle.is_null() {
            return Err(null_arg("handle"));
        }
        if advice_link > LAST_LINK {
            return Err(param(format!(
                "adviceLink {advice_link}: an aclrtMemLinkType, [0, {LAST_LINK}]"
            )));
        }
        let rt = runtime()?;
        rt.backend()
            .require_vmm("aclrtMemMapSetLink")
            .map_err(CallError::backend)?;
        phys(&rt, handle).map(|_| ())
    })
}

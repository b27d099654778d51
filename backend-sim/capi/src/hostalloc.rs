//! `aclrtMallocHostWithCfg`: host memory of `aclrtMallocHost` allocated with a configuration
//! (the simulator's side is `Sim::malloc_host`; freed by `aclrtFreeHost`).

use std::ffi::c_void;

use acl_notify_core::Error;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, aclError, api};
use crate::memory::{MallocAttribute, MallocConfig};
use crate::session::runtime;

/// `ACL_RT_MEM_ATTR_MODULE_ID`, `ACL_RT_MEM_ATTR_VA_FLAG` (`acl_rt.h`).
const ATTR_MODULE_ID: u32 = 1;
const ATTR_VA_FLAG: u32 = 3;

/// The runtime's check of a host allocation's configuration (hicann/runtime
/// `src/runtime/api/impl/api_impl.cc`, `ApiImpl::HostMallocWithCfg` and
/// `GetMallocHostConfigAttr`): `attrs` must not be NULL, even with no attribute; each
/// attribute is a module id or a VA flag.
///
/// # Safety
///
/// `cfg.attrs` is NULL or valid for reading `cfg.num_attrs` attributes.
unsafe fn check_cfg(cfg: &MallocConfig) -> Result<(), CallError> {
    if cfg.attrs.is_null() {
        return Err(param("cfg->attrs is NULL"));
    }
    // SAFETY: non-NULL, `num_attrs` readable by the caller's contract; a count no memory
    // can hold is refused.
    let attrs: &[MallocAttribute] = unsafe {
        crate::ffi::c_array(
            cfg.attrs,
            cfg.num_attrs,
            "cfg->numAttrs",
            Error::ParamInvalid,
        )?
    };
    for (i, a) in attrs.iter().enumerate() {
        if a.attr != ATTR_MODULE_ID && a.attr != ATTR_VA_FLAG {
            return Err(param(format!(
                "cfg->attrs[{i}].attr is {}: host memory takes ACL_RT_MEM_ATTR_MODULE_ID (1) and \
                 ACL_RT_MEM_ATTR_VA_FLAG (3) only",
                a.attr
            )));
        }
    }
    Ok(())
}

/// `aclError aclrtMallocHostWithCfg(void **ptr, uint64_t size, aclrtMallocConfig *cfg)`:
/// `aclrtMallocHost` memory (page-aligned, freed by `aclrtFreeHost`) with an optional
/// configuration. The module id is bookkeeping and the VA flag (host memory the device
/// reaches at the same address) changes nothing for the simulator, whose copies reach any
/// host address; both are accepted as CANN accepts them.
///
/// Codes: 100000 ptr NULL or size 0 (hicann/runtime `aclrtMallocHostWithCfgImpl`,
/// `src/acl/aclrt_impl/memory.cpp`); 107000 `cfg->attrs` NULL, an attribute other than the
/// module id or the VA flag; 107002 no current device; 207001.
///
/// # Safety
///
/// `ptr` is NULL or valid for writing a pointer; `cfg` NULL or valid for reading, its
/// `attrs` NULL or valid for reading `numAttrs` attributes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMallocHostWithCfg(
    ptr: *mut *mut c_void,
    size: u64,
    cfg: *const c_void,
) -> aclError {
    api("aclrtMallocHostWithCfg", || {
        // SAFETY: `ptr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(ptr) }.write(
            || null_arg("ptr"),
            || {
                if size == 0 {
                    return Err(CallError::new(Error::InvalidParam, "size is 0"));
                }
                // SAFETY: NULL or readable by the caller's contract.
                if let Some(c) = unsafe { cfg.cast::<MallocConfig>().as_ref() } {
                    // SAFETY: the caller's contract for `attrs`.
                    unsafe { check_cfg(c) }?;
                }
                let rt = runtime()?;
                rt.current_device()?;
                let size = usize::try_from(size).map_err(|_| {
                    CallError::new(
                        Error::MemoryAllocation,
                        format!("cannot allocate {size} bytes of host memory"),
                    )
                })?;
                let p = rt.backend().malloc_host(size).map_err(CallError::backend)?;
                Ok(std::ptr::with_exposed_provenance_mut(p))
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `numAttrs` no memory can hold is refused with 107000, as the other checks of the
    /// configuration, before any attribute is read
    /// (it was made into a slice longer than memory: undefined behaviour).
    #[test]
    fn a_count_of_attributes_no_memory_can_hold_is_refused() {
        let one = [MallocAttribute {
            attr: ATTR_MODULE_ID,
            value: [0; 2],
        }];
        let cfg = MallocConfig {
            attrs: one.as_ptr(),
            num_attrs: usize::MAX / 2,
        };
        // SAFETY: the count is refused before `attrs` is read past its one element.
        let e = unsafe { check_cfg(&cfg) }.unwrap_err();
        assert_eq!(e.code(), Error::ParamInvalid);
        assert!(e.text().contains("numAttrs"), "{}", e.text());
    }
}

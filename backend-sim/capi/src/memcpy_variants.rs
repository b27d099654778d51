//! The exported variants of `aclrtMemcpyAsync` (`acl_rt.h`): `aclrtMemcpyAsyncWithCondition`,
//! and the "two-level pointer" copies `aclrtMemcpyAsyncWithOffset` and
//! `aclrtMemcpyAsyncWithDesc` with their descriptor calls `aclrtGetMemcpyDescSize` and
//! `aclrtSetMemcpyDesc`. They go through the memory module's argument checks
//! ([`crate::memory::copy_args`]) and the simulator's queued copies (`Sim::memcpy_async`, and
//! [`acl_notify_sim::mem::indirect`] for the copies whose addresses are read from device memory
//! when they run).
//!
//! CANN's orders and codes (hicann/runtime `src/acl/aclrt_impl/memory.cpp`, then
//! `src/runtime/api/api_c_memory.cc`, `api_c_standard_soc.cc` and
//! `api/impl/api_error.cc`; the products from `docs/zh/api_ref/11-03_memory_copy_and_set.md`):
//! - `WithCondition` is `aclrtMemcpyAsync` (the same checks and copy): pageable host memory
//!   makes the call return only once the copy has run; a copy within the host is 207000 (the
//!   documented EP form).
//! - `WithOffset`: count 0 succeeds first; then only `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE` (else
//!   107000), the SoCs that have it (Ascend950PR/DT, Ascend910_93, Ascend910B, Ascend910; else
//!   207000), the stream; `dst` and `src` point at device words holding the base addresses,
//!   to which the offsets are added when the copy runs.
//! - The descriptor calls check NULL pointers and a kind below `RT_MEMCPY_KIND_MAX` (100000),
//!   then the SoC (stars chips: Ascend950PR/DT, Ascend910_93, Ascend910B, Ascend310B; else
//!   207000) and a kind other than `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE` (207000). A descriptor
//!   is 32 bytes of device memory (64 on Ascend950PR/DT), 64-byte aligned; the simulator keeps
//!   source, destination and count in its first 24 bytes (little-endian 64-bit words), which
//!   `aclrtMemcpyAsyncWithDesc` reads when its copy runs.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::mem::MemcpyKind;
use acl_notify_sim::mem::indirect::{INDIRECT_MAX, Word};
use acl_notify_sim::mem::location::MemLocation;

use crate::errmsg::{CallError, null_arg, param, unsupported_on};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::memory::memcpy_async;
use crate::session::runtime;

/// `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE`.
const INNER_D2D: u32 = 6;
/// `RT_MEMCPY_KIND_MAX` (hicann/runtime `pkg_inc/runtime/runtime/mem_base.h`).
const KIND_MAX: u32 = 8;
/// A descriptor's alignment (`ApiErrorDecorator::SetMemcpyDesc`).
const DESC_ALIGN: usize = 64;

/// The descriptor's size on `soc` (`memcpyDescriptorSize`, hicann/runtime
/// `src/runtime/config/*/dev_info_reg.cc`), `None` where CANN has no descriptors (no stars).
fn desc_size(soc: Soc) -> Option<usize> {
    match soc {
        Soc::Ascend950PR | Soc::Ascend950DT => Some(64),
        Soc::Ascend910_93 | Soc::Ascend910B | Soc::Ascend310B => Some(32),
        Soc::Ascend310P | Soc::Ascend910 | Soc::IPV350 => None,
    }
}

/// The ACL layer's check of a descriptor call's kind: 100000 from `RT_MEMCPY_KIND_MAX` on.
fn kind_below_max(kind: u32) -> Result<(), CallError> {
    if kind >= KIND_MAX {
        return Err(CallError::new(
            Error::InvalidParam,
            format!(
                "kind {kind} is not an aclrtMemcpyKind (0 to {})",
                KIND_MAX - 1
            ),
        ));
    }
    Ok(())
}

/// The runtime's check of the kind: only `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE` (`code`).
fn inner_d2d(kind: u32, code: Error) -> Result<(), CallError> {
    if kind != INNER_D2D {
        return Err(CallError::new(
            code,
            format!("kind {kind} is not ACL_MEMCPY_INNER_DEVICE_TO_DEVICE (6), the only one taken"),
        ));
    }
    Ok(())
}

/// `aclError aclrtMemcpyAsyncWithCondition(void *dst, size_t destMax, const void *src, size_t
/// count, aclrtMemcpyKind kind, aclrtStream stream)`: `aclrtMemcpyAsync`, whose runtime is asked
/// to check page-locked memory (`memcpyAttrValue.checkBitmap` 2, hicann/runtime
/// `src/acl/aclrt_impl/memory.cpp`), which it does for every copy
/// (`ApiErrorDecorator::MemcpyAsync`): the same copy ([`crate::memory::memcpy_async`]), with
/// pageable host memory made before the call returns, within the host refused.
///
/// Codes: as `aclrtMemcpyAsync`.
///
/// # Safety
///
/// Host sides valid for `count` bytes until the task has run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyAsyncWithCondition(
    dst: *mut c_void,
    dest_max: usize,
    src: *const c_void,
    count: usize,
    kind: u32,
    stream: aclrtStream,
) -> aclError {
    memcpy_async(
        "aclrtMemcpyAsyncWithCondition",
        dst,
        dest_max,
        src,
        count,
        kind,
        stream,
    )
}

/// `aclError aclrtMemcpyAsyncWithOffset(void **dst, size_t destMax, size_t dstDataOffset,
/// const void **src, size_t count, size_t srcDataOffset, aclrtMemcpyKind kind, aclrtStream
/// stream)`: `count` bytes from `*src + srcDataOffset` to `*dst + dstDataOffset`, the two base
/// addresses read from the device words `src` and `dst` when the copy runs.
///
/// Codes: 0 count 0; 107000 a kind other than `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE`, dst/src
/// NULL or not device memory, count above destMax or 4 GiB; 207000 the SoC; 107017; 107003;
/// the task fails with 107000 for a range outside live allocations.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemcpyAsyncWithOffset(
    dst: *mut *mut c_void,
    dest_max: usize,
    dst_offset: usize,
    src: *const *const c_void,
    count: usize,
    src_offset: usize,
    kind: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemcpyAsyncWithOffset", || {
        if count == 0 {
            return Ok(());
        }
        inner_d2d(kind, Error::ParamInvalid)?;
        let rt = runtime()?;
        let soc = rt.backend().soc();
        if !matches!(
            soc,
            Soc::Ascend950PR
                | Soc::Ascend950DT
                | Soc::Ascend910_93
                | Soc::Ascend910B
                | Soc::Ascend910
        ) {
            return Err(unsupported_on("aclrtMemcpyAsyncWithOffset", soc));
        }
        let s = rt.resolve_task_stream(stream.addr())?;
        if dst.is_null() || src.is_null() {
            return Err(param(format!(
                "`{}` is NULL",
                if dst.is_null() { "dst" } else { "src" }
            )));
        }
        rt.backend()
            .memcpy_indirect_async(
                Word::At(dst.addr(), dst_offset as u64),
                Some(dest_max),
                Word::At(src.addr(), src_offset as u64),
                Word::Given(count as u64),
                s,
            )
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtGetMemcpyDescSize(aclrtMemcpyKind kind, size_t *descSize)`.
///
/// Codes: 100000 descSize NULL, kind ≥ 8; 207000 a SoC without descriptors, a kind other than
/// `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE`.
///
/// # Safety
///
/// `desc_size` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetMemcpyDescSize(kind: u32, desc_size_: *mut usize) -> aclError {
    api("aclrtGetMemcpyDescSize", || {
        // SAFETY: `desc_size_` is NULL or writable, by the caller's contract.
        unsafe { Out::new(desc_size_) }.write(
            || null_arg("descSize"),
            || {
                kind_below_max(kind)?;
                let soc = runtime()?.backend().soc();
                let size =
                    desc_size(soc).ok_or_else(|| unsupported_on("aclrtGetMemcpyDescSize", soc))?;
                inner_d2d(kind, Error::FeatureNotSupport)?;
                Ok(size)
            },
        )
    })
}

/// 107000 unless `addr` is device memory (`what` names it).
fn device_memory(loc: MemLocation, addr: usize, what: &str) -> Result<u32, CallError> {
    match loc {
        MemLocation::Device { device, .. } => Ok(device),
        _ => Err(param(format!(
            "{what} {addr:#x} is not device memory (a descriptor copy is within one device)"
        ))),
    }
}

/// `aclError aclrtSetMemcpyDesc(void *desc, aclrtMemcpyKind kind, void *srcAddr, void
/// *dstAddr, size_t count, void *config)`: writes source, destination and count into the
/// descriptor at `desc` (device memory), now.
///
/// Codes: 100000 desc/srcAddr/dstAddr NULL, kind ≥ 8, count 0, config not NULL; 207000 the
/// SoC, a kind other than `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE`; 107000 count above 4 GiB, desc
/// not 64-byte aligned, desc not device memory (or too short for a descriptor), srcAddr and
/// dstAddr not device memory of one device.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetMemcpyDesc(
    desc: *mut c_void,
    kind: u32,
    src_addr: *mut c_void,
    dst_addr: *mut c_void,
    count: usize,
    config: *mut c_void,
) -> aclError {
    api("aclrtSetMemcpyDesc", || {
        if desc.is_null() {
            return Err(null_arg("desc"));
        }
        kind_below_max(kind)?;
        if src_addr.is_null() {
            return Err(null_arg("srcAddr"));
        }
        if dst_addr.is_null() {
            return Err(null_arg("dstAddr"));
        }
        if count == 0 {
            return Err(CallError::new(Error::InvalidParam, "count is 0"));
        }
        if !config.is_null() {
            return Err(CallError::new(
                Error::InvalidParam,
                "config is a reserved parameter and must be NULL",
            ));
        }
        let rt = runtime()?;
        let sim = rt.backend();
        if desc_size(sim.soc()).is_none() {
            return Err(unsupported_on("aclrtSetMemcpyDesc", sim.soc()));
        }
        inner_d2d(kind, Error::FeatureNotSupport)?;
        if count as u64 > INDIRECT_MAX {
            return Err(param(format!(
                "count {count} is above {INDIRECT_MAX}, the most one copy moves"
            )));
        }
        if !desc.addr().is_multiple_of(DESC_ALIGN) {
            return Err(param(format!("desc {desc:p} is not 64-byte aligned")));
        }
        device_memory(sim.mem_location(desc.addr()), desc.addr(), "desc")?;
        let d = device_memory(
            sim.mem_location(dst_addr.addr()),
            dst_addr.addr(),
            "dstAddr",
        )?;
        let s = device_memory(
            sim.mem_location(src_addr.addr()),
            src_addr.addr(),
            "srcAddr",
        )?;
        if d != s {
            return Err(param(format!(
                "dstAddr is memory of device {d} and srcAddr of device {s}: the kind \
                 ACL_MEMCPY_INNER_DEVICE_TO_DEVICE copies within one device"
            )));
        }
        let words = [src_addr.addr() as u64, dst_addr.addr() as u64, count as u64];
        // SAFETY: `words` is a live host array of 24 bytes; the device side is checked.
        unsafe {
            sim.memcpy(
                desc.addr(),
                24,
                words.as_ptr().addr(),
                24,
                MemcpyKind::HostToDevice,
            )
        }
        .map_err(|e| CallError::backend(e).in_context("the descriptor"))
    })
}

/// `aclError aclrtMemcpyAsyncWithDesc(void *desc, aclrtMemcpyKind kind, aclrtStream stream)`:
/// the copy the descriptor at `desc` describes, read from it when the copy runs.
///
/// Codes: 100000 desc or stream NULL, kind ≥ 8; 207000 the SoC, a kind other than
/// `ACL_MEMCPY_INNER_DEVICE_TO_DEVICE`; 107017; 107003; 107000 desc not device memory; the
/// task fails with 107000 for a range outside live allocations.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtMemcpyAsyncWithDesc(
    desc: *mut c_void,
    kind: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtMemcpyAsyncWithDesc", || {
        if desc.is_null() {
            return Err(null_arg("desc"));
        }
        kind_below_max(kind)?;
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        let rt = runtime()?;
        let sim = rt.backend();
        if desc_size(sim.soc()).is_none() {
            return Err(unsupported_on("aclrtMemcpyAsyncWithDesc", sim.soc()));
        }
        let s = rt.resolve_task_stream(stream.addr())?;
        inner_d2d(kind, Error::FeatureNotSupport)?;
        device_memory(sim.mem_location(desc.addr()), desc.addr(), "desc")?;
        let at = desc.addr();
        sim.memcpy_indirect_async(
            Word::At(at + 8, 0),
            None,
            Word::At(at, 0),
            Word::At(at + 16, 0),
            s,
        )
        .map_err(CallError::backend)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_have_canns_sizes_on_the_chips_with_stars() {
        assert_eq!(desc_size(Soc::Ascend910B), Some(32));
        assert_eq!(desc_size(Soc::Ascend950PR), Some(64));
        assert_eq!(desc_size(Soc::Ascend310P), None);
        assert_eq!(kind_below_max(8).unwrap_err().code().code(), 100000);
        assert_eq!(
            inner_d2d(3, Error::ParamInvalid).unwrap_err().code().code(),
            107000
        );
    }
}

//! The exported cache maintenance operations (`acl_rt.h`: `aclrtCmoAsync`,
//! `aclrtCmoAsyncWithBarrier`, `aclrtCmoWaitBarrier`, `aclrtCmoGetDescSize`, `aclrtCmoSetDesc`,
//! `aclrtCmoAsyncWithDesc`; `aclrtDeviceL2CacheFlush`). The simulator's device memory is coherent, so an operation moves
//! nothing: it is a task of its stream, ordered like any other, whose range is checked when it
//! runs ([`acl_notify_sim::mem::indirect`], `Sim::cmo_async`; a descriptor's range is read from
//! device memory then). A barrier really orders: each (device, barrier id) has a simulator
//! event that `aclrtCmoAsyncWithBarrier` records after its invalidation, and
//! `aclrtCmoWaitBarrier` makes its stream wait for the latest record of each id it names.
//!
//! CANN's orders and codes (hicann/runtime `src/acl/aclrt_impl/memory.cpp` and `kernel.cpp`,
//! then `src/runtime/api/api_c_memory.cc`, `api_c_standard_soc.cc`, `api/impl/api_error.cc`
//! and `api_impl.cc`); the products from `docs/zh/api_ref/11-06_CMO_memory_operation.md`: the
//! plain and descriptor calls on Ascend950PR/DT, Ascend910_93 and Ascend910B, the barrier calls
//! on Ascend310B only, 207000 elsewhere. The descriptor is CANN's `rtCmoAddrInfo` (32 bytes:
//! size at byte 12, address at byte 16; `pkg_inc/runtime/rt_external_stars_define.h`), or on
//! Ascend950PR/DT `rtDavidCmoAddrInfo` (64 bytes: address at 32, size at 48;
//! `src/runtime/core/inc/sqe/v200_base/starsv2_base.hpp`). CANN's documentation asks for
//! streams bound to a model for the barrier calls; its runtime does not check it, and neither
//! does the simulator.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, EventOps as _, EventSpec, Soc, Timeout};
use acl_notify_sim::mem::MemcpyKind;
use acl_notify_sim::mem::indirect::Word;

use crate::errmsg::{CallError, null_arg, param, unsupported_on};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::session::runtime;

/// `ACL_RT_CMO_TYPE_INVALID`.
const CMO_INVALID: u32 = 2;
/// `ACL_RT_CMO_MAX_BARRIER_NUM`.
const MAX_BARRIERS: usize = 6;

/// `aclrtBarrierCmoInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BarrierCmoInfo {
    cmo_type: u32,
    barrier_id: u32,
}

/// `aclrtBarrierTaskInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BarrierTaskInfo {
    barrier_num: usize,
    cmo_info: [BarrierCmoInfo; MAX_BARRIERS],
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<BarrierTaskInfo>() == 56);

/// Where a descriptor keeps the range (size word, address word), and its size, on the SoCs
/// with CMO tasks (`RT_FEATURE_TASK_CMO`, `cmoDDRStructInfoSize`).
fn desc_layout(soc: Soc) -> Option<(usize, usize, usize)> {
    match soc {
        Soc::Ascend950PR | Soc::Ascend950DT => Some((48, 32, 64)),
        Soc::Ascend910_93 | Soc::Ascend910B => Some((12, 16, 32)),
        Soc::Ascend310B | Soc::Ascend310P | Soc::Ascend910 | Soc::IPV350 => None,
    }
}

/// `aclrtCmoType` → 207000 beyond `ACL_RT_CMO_TYPE_FLUSH` (the runtime's "does not support").
fn cmo_type(t: u32) -> Result<u32, CallError> {
    if t > 3 {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "cmoType {t} is not an aclrtCmoType (PREFETCH 0, WRITEBACK 1, INVALID 2, FLUSH 3)"
            ),
        ));
    }
    Ok(t)
}

/// `aclError aclrtCmoAsync(void *src, size_t size, aclrtCmoType cmoType, aclrtStream
/// stream)`: a cache operation on `size` bytes of device memory at `src`, in stream order.
///
/// Codes: 100000 src NULL, size 0; 207000 the SoC, cmoType; 107000 a range outside live
/// device memory (now, and again when the task runs); 107017; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCmoAsync(
    src: *mut c_void,
    size: usize,
    cmo_type_: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtCmoAsync", || {
        if src.is_null() {
            return Err(null_arg("src"));
        }
        if size == 0 {
            return Err(CallError::new(Error::InvalidParam, "size is 0"));
        }
        let rt = runtime()?;
        let sim = rt.backend();
        if desc_layout(sim.soc()).is_none() {
            return Err(unsupported_on("aclrtCmoAsync", sim.soc()));
        }
        cmo_type(cmo_type_)?;
        let s = rt.resolve_task_stream(stream.addr())?;
        sim.cmo_async(Word::Given(src.addr() as u64), Word::Given(size as u64), s)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtCmoAsyncWithBarrier(void *src, size_t size, aclrtCmoType cmoType, uint32_t
/// barrierId, aclrtStream stream)`: [`aclrtCmoAsync`]; an invalidation (`barrierId` > 0) is
/// what `aclrtCmoWaitBarrier` of that id waits for.
///
/// Codes: 100000 src NULL; 207000 the SoC (Ascend310B only), cmoType; 107000 size 0, an
/// invalidation with barrier id 0 or another type with one, a range outside live device
/// memory; 107017; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCmoAsyncWithBarrier(
    src: *mut c_void,
    size: usize,
    cmo_type_: u32,
    barrier_id: u32,
    stream: aclrtStream,
) -> aclError {
    api("aclrtCmoAsyncWithBarrier", || {
        if src.is_null() {
            return Err(null_arg("src"));
        }
        let rt = runtime()?;
        let sim = rt.backend();
        if sim.soc() != Soc::Ascend310B {
            return Err(unsupported_on("aclrtCmoAsyncWithBarrier", sim.soc()));
        }
        if size == 0 {
            return Err(param("size is 0: it must be greater than 0"));
        }
        let t = cmo_type(cmo_type_)?;
        match (t == CMO_INVALID, barrier_id) {
            (true, 0) => {
                return Err(param(
                    "barrierId is 0: an ACL_RT_CMO_TYPE_INVALID operation takes a barrier id above 0",
                ));
            }
            (false, id) if id != 0 => {
                return Err(param(format!(
                    "barrierId is {id}: only ACL_RT_CMO_TYPE_INVALID takes a barrier id (others 0)"
                )));
            }
            _ => {}
        }
        let s = rt.resolve_task_stream(stream.addr())?;
        sim.cmo_async(Word::Given(src.addr() as u64), Word::Given(size as u64), s)
            .map_err(CallError::backend)?;
        if t != CMO_INVALID {
            return Ok(());
        }
        let device = rt.current_device()?;
        let mut barriers = rt
            .cmo_barriers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The id's event, made on first use; made anew if a device reset took it.
        if let Some(&e) = barriers.get(&(device, barrier_id))
            && sim.event_record(e, s).is_ok()
        {
            return Ok(());
        }
        let e = sim
            .event_create(device, EventSpec::classic())
            .map_err(|e| CallError::backend(e).in_context("the barrier's event"))?;
        if let Some(old) = barriers.insert((device, barrier_id), e) {
            let _ = sim.event_destroy(old);
        }
        sim.event_record(e, s).map_err(CallError::backend)
    })
}

/// `aclError aclrtCmoWaitBarrier(aclrtBarrierTaskInfo *taskInfo, aclrtStream stream, uint32_t
/// flag)`: `stream` waits until the invalidations of each barrier id in `taskInfo`, queued
/// before this call, have run (an id never used: no wait).
///
/// Codes: 100000 taskInfo NULL, barrierNum 0 or above 6; 107000 a type other than
/// `ACL_RT_CMO_TYPE_INVALID`, a barrier id 0; 207000 the SoC (Ascend310B only); 107017; 107003.
///
/// # Safety
///
/// `task_info` is NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCmoWaitBarrier(
    task_info: *const BarrierTaskInfo,
    stream: aclrtStream,
    _flag: u32,
) -> aclError {
    api("aclrtCmoWaitBarrier", || {
        // SAFETY: NULL or readable by the caller's contract.
        let Some(info) = (unsafe { task_info.as_ref() }).copied() else {
            return Err(null_arg("taskInfo"));
        };
        if info.barrier_num == 0 || info.barrier_num > MAX_BARRIERS {
            return Err(CallError::new(
                Error::InvalidParam,
                format!(
                    "taskInfo->barrierNum is {}: it must be in (0, {MAX_BARRIERS}]",
                    info.barrier_num
                ),
            ));
        }
        let entries = &info.cmo_info[..info.barrier_num];
        for (i, c) in entries.iter().enumerate() {
            if c.cmo_type != CMO_INVALID {
                return Err(param(format!(
                    "taskInfo->cmoInfo[{i}].cmoType is {}: only ACL_RT_CMO_TYPE_INVALID (2) is waited for",
                    c.cmo_type
                )));
            }
            if c.barrier_id == 0 {
                return Err(param(format!("taskInfo->cmoInfo[{i}].barrierId is 0")));
            }
        }
        let rt = runtime()?;
        let sim = rt.backend();
        if sim.soc() != Soc::Ascend310B {
            return Err(unsupported_on("aclrtCmoWaitBarrier", sim.soc()));
        }
        let s = rt.resolve_task_stream(stream.addr())?;
        let device = rt.current_device()?;
        let events: Vec<_> = {
            let barriers = rt
                .cmo_barriers
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            entries
                .iter()
                .filter_map(|c| barriers.get(&(device, c.barrier_id)).copied())
                .collect()
        };
        for e in events {
            sim.stream_wait_event(s, e, Timeout::ProcessDefault)
                .map_err(CallError::backend)?;
        }
        Ok(())
    })
}

/// `aclError aclrtCmoGetDescSize(size_t *size)`: 32 bytes (64 on Ascend950PR/DT).
///
/// Codes: 207000 the SoC; 107000 size NULL.
///
/// # Safety
///
/// `size` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCmoGetDescSize(size: *mut usize) -> aclError {
    api("aclrtCmoGetDescSize", || {
        let soc = runtime()?.backend().soc();
        let (_, _, n) =
            desc_layout(soc).ok_or_else(|| unsupported_on("aclrtCmoGetDescSize", soc))?;
        // SAFETY: `size` is NULL or writable, by the caller's contract.
        unsafe { Out::new(size) }.write(|| param("`size` is NULL"), || Ok(n))
    })
}

/// `aclError aclrtCmoSetDesc(void *cmoDesc, void *src, size_t size)`: writes the range into
/// the descriptor at `cmoDesc` (device memory), now.
///
/// Codes: 207000 the SoC; 107000 cmoDesc/src NULL, size 0 or above 4 GiB − 1, cmoDesc not a
/// descriptor's worth of live device memory.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCmoSetDesc(
    cmo_desc: *mut c_void,
    src: *mut c_void,
    size: usize,
) -> aclError {
    api("aclrtCmoSetDesc", || {
        let rt = runtime()?;
        let sim = rt.backend();
        let (len_at, addr_at, n) =
            desc_layout(sim.soc()).ok_or_else(|| unsupported_on("aclrtCmoSetDesc", sim.soc()))?;
        if cmo_desc.is_null() {
            return Err(param("`cmoDesc` is NULL"));
        }
        if src.is_null() {
            return Err(param("`src` is NULL"));
        }
        if size == 0 {
            return Err(param("size is 0"));
        }
        let len = u32::try_from(size).map_err(|_| {
            param(format!(
                "size {size} does not fit the descriptor's 32-bit size"
            ))
        })?;
        let mut bytes = [0u8; 64];
        bytes[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
        bytes[addr_at..addr_at + 8].copy_from_slice(&(src.addr() as u64).to_le_bytes());
        // SAFETY: `bytes` is a live host array of at least `n` bytes; the descriptor's side
        // is checked (CANN writes it with its synchronous copy, which goes by the addresses:
        // `ApiImpl::SetCmoDesc`; a descriptor in host memory is refused when it is used).
        unsafe {
            sim.memcpy(
                cmo_desc.addr(),
                n,
                bytes.as_ptr().addr(),
                n,
                MemcpyKind::HostToDevice,
            )
        }
        .map_err(|e| CallError::backend(e).in_context("cmoDesc"))
    })
}

/// `aclError aclrtCmoAsyncWithDesc(void *cmoDesc, aclrtCmoType cmoType, aclrtStream stream,
/// const void *reserve)`: the cache operation on the range the descriptor holds, read from it
/// when the task runs.
///
/// Codes: 107000 reserve not NULL, cmoDesc NULL or not live device memory; 207000 the SoC,
/// cmoType; 107017; 107003; the task fails with 107000 for a range outside live memory.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCmoAsyncWithDesc(
    cmo_desc: *mut c_void,
    cmo_type_: u32,
    stream: aclrtStream,
    reserve: *const c_void,
) -> aclError {
    api("aclrtCmoAsyncWithDesc", || {
        if !reserve.is_null() {
            return Err(param("reserve is a reserved parameter and must be NULL"));
        }
        let rt = runtime()?;
        let sim = rt.backend();
        let (len_at, addr_at, _) = desc_layout(sim.soc())
            .ok_or_else(|| unsupported_on("aclrtCmoAsyncWithDesc", sim.soc()))?;
        if cmo_desc.is_null() {
            return Err(param("`cmoDesc` is NULL"));
        }
        if cmo_type_ > 3 {
            return Err(param(format!(
                "cmoType {cmo_type_} is not an aclrtCmoType (PREFETCH 0 to FLUSH 3)"
            )));
        }
        let s = rt.resolve_task_stream(stream.addr())?;
        let d = cmo_desc.addr();
        sim.cmo_async(Word::At(d + addr_at, 0), Word::At32(d + len_at), s)
            .map_err(CallError::backend)
    })
}

/// `aclError aclrtDeviceL2CacheFlush(void *rsv)`: writes back and drops the current device's
/// L2 cache. The simulator's device memory has no cache, so after the checks there is nothing
/// to do; not a stream task (CANN asks the driver at once: hicann/runtime
/// `src/acl/aclrt_impl/device.cpp`, then `src/runtime/api/impl/api_impl_standard_soc.cc`,
/// `ApiImpl::DeviceL2CacheFlush`, which needs a current context).
///
/// Codes: 100000 a non-NULL `rsv`; 107002 no current device.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDeviceL2CacheFlush(rsv: *mut c_void) -> aclError {
    api("aclrtDeviceL2CacheFlush", || {
        if !rsv.is_null() {
            return Err(CallError::new(
                Error::InvalidParam,
                "`rsv` is not NULL: it is reserved and must be NULL",
            ));
        }
        runtime()?.current_device().map(|_| ())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_are_canns_layouts() {
        assert_eq!(desc_layout(Soc::Ascend910B), Some((12, 16, 32)));
        assert_eq!(desc_layout(Soc::Ascend950DT), Some((48, 32, 64)));
        assert_eq!(desc_layout(Soc::Ascend310B), None);
        assert_eq!(cmo_type(4).unwrap_err().code().code(), 207000);
        assert_eq!(cmo_type(3).unwrap(), 3);
    }
}

//! How devices are linked and which atomic operations cross a link: `aclrtGetDevicesTopo`,
//! `aclrtDeviceGetHostAtomicCapabilities`, `aclrtDeviceGetP2PAtomicCapabilities`. The links
//! and the per-chip capability tables are the core's (`acl_notify_core::devprops`).
//!
//! As hicann/runtime:
//! - `aclrtGetDevicesTopo`: `src/acl/aclrt_impl/device.cpp` (NULL `value` 100000), then
//!   `src/runtime/api/api_c_device.cc` (`rtsGetPairDevicesInfo`: the driver's topology code
//!   `c` is answered as `1 << c`), `api_error.cc` (`GetPairDevicesInfo`: each device id is
//!   converted, a device the machine lacks 107001) and `api_impl.cc` (a device with itself
//!   is HCCS);
//! - the atomics: `device.cpp` passes everything to the runtime; `api_error.cc`
//!   (`GetHostAtomicCapabilities`: NULL `capabilities` or `operations` 107000, `count` 0
//!   107000, a device the machine lacks 107001, an operation outside `[0, 44]` 107000;
//!   `GetP2PAtomicCapabilities`: the same NULL and `count` checks, the two devices equal
//!   107001, either one missing 107001); `api_impl.cc` (`GetAtomicDevProperties`: every
//!   capability written 0 first; `CheckHostAtomicSupport`, `CheckP2PAtomicSupport`: the
//!   host over UB only, two devices over HCCS, SIO, HCCS_SW or UB only;
//!   `FillAtomicCapabilities`: each operation's entry of the chip's table, 0 for an
//!   operation the table does not name). The P2P query reads no operation's value before
//!   the table, so an unknown one answers 0 there (CANN checks them for the host query only).
//!
//!   CANN's error decorator of the P2P query returns after its checks without calling the
//!   implementation (`api_error.cc` as of 2026-11), so that CANN writes nothing; the
//!   simulator answers what the implementation and CANN's documentation describe (the
//!   operations the link supports between two devices of a server).
//!
//! IPV350 has none of the three (CANN's device chapter): 207000.

use acl_notify_core::{Backend, Error, Soc};

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{CheckedArray, Out, OutArray, aclError, api};
use crate::session::with_runtime;

/// 207000 on a SoC without the query (IPV350).
fn unsupported(soc: Soc, what: &str) -> CallError {
    CallError::new(
        Error::FeatureNotSupport,
        format!("{soc} has no {what} (CANN's device chapter lists it as unsupported)"),
    )
}

/// `aclError aclrtGetDevicesTopo(uint32_t deviceId, uint32_t otherDeviceId, uint64_t
/// *value)`: how the two devices are linked, one `ACL_RT_DEVS_TOPOLOGY_*` bit.
///
/// Codes: 100000 NULL `value`; 107001 a device the machine lacks; 207000 on IPV350.
///
/// # Safety
///
/// `value` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDevicesTopo(
    device_id: u32,
    other_device_id: u32,
    value: *mut u64,
) -> aclError {
    api("aclrtGetDevicesTopo", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(
            || null_arg("value"),
            || {
                let v = with_runtime(|rt| {
                    let soc = rt.backend().soc();
                    let a = rt.device_id(device_id)?;
                    let b = rt.device_id(other_device_id)?;
                    soc.topology(a, b)
                        .map(|t| t.bit())
                        .ok_or_else(|| unsupported(soc, "device topology"))
                })?;
                Ok(v)
            },
        )
    })
}

/// The checks CANN makes of both queries' arrays: NULL (107000) and `count` 0 (107000); the
/// `count` capabilities to write.
fn arrays_ok(
    capabilities: OutArray<u32>,
    operations: *const i32,
    count: u32,
) -> Result<CheckedArray<u32>, CallError> {
    let capabilities = capabilities.check(|| param("`capabilities` is NULL"))?;
    if operations.is_null() {
        return Err(param("`operations` is NULL"));
    }
    if count == 0 {
        return Err(param("`count` is 0: at least one operation is queried"));
    }
    Ok(capabilities)
}

/// Writes `entry(op)` for each of the `count` operations (after the checks of [`arrays_ok`]).
///
/// # Safety
///
/// `operations` is valid for reading as many elements as `capabilities` holds (`count`).
unsafe fn fill(
    capabilities: CheckedArray<u32>,
    operations: *const i32,
    entry: impl Fn(u32) -> u32,
) {
    for i in 0..capabilities.len() {
        // SAFETY: i < count; the caller's contract.
        let op = unsafe { operations.add(i).read_unaligned() };
        capabilities.put(i, u32::try_from(op).map_or(0, &entry));
    }
}

/// `aclError aclrtDeviceGetHostAtomicCapabilities(uint32_t *capabilities, const
/// aclrtAtomicOperation *operations, const uint32_t count, int32_t deviceId)`: for each
/// operation, the `aclrtAtomicOperationCapability` bits it has between the host and the
/// device (0: not supported).
///
/// Codes: 107000 a NULL array, `count` 0, or an operation outside `[0, 44]` (nothing is
/// written); 107001 a device the machine lacks; 207000 on IPV350.
///
/// # Safety
///
/// `capabilities` and `operations` are NULL or valid for `count` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetHostAtomicCapabilities(
    capabilities: *mut u32,
    operations: *const i32,
    count: u32,
    device_id: i32,
) -> aclError {
    api("aclrtDeviceGetHostAtomicCapabilities", || {
        let soc = with_runtime(|rt| Ok(rt.backend().soc()))?;
        if soc.host_link().is_none() {
            return Err(unsupported(soc, "host atomics query"));
        }
        // SAFETY: NULL or writable for `count` elements, by the caller's contract.
        let capabilities = arrays_ok(
            unsafe { OutArray::new(capabilities, count as usize) },
            operations,
            count,
        )?;
        with_runtime(|rt| rt.device_id(device_id))?;
        for i in 0..count as usize {
            // SAFETY: i < count; the caller's contract.
            let op = unsafe { operations.add(i).read_unaligned() };
            if !(0..acl_notify_core::devprops::ATOMIC_OPERATIONS as i32).contains(&op) {
                return Err(param(format!(
                    "operations[{i}] is {op}: an aclrtAtomicOperation in [0, 44]"
                )));
            }
        }
        // SAFETY: checked non-NULL; the caller's contract for `count` elements.
        unsafe { fill(capabilities, operations, |op| soc.host_atomic(op)) };
        Ok(())
    })
}

/// `aclError aclrtDeviceGetP2PAtomicCapabilities(uint32_t *capabilities, const
/// aclrtAtomicOperation *operations, const uint32_t count, int32_t srcDeviceId, int32_t
/// dstDeviceId)`: for each operation, the capability bits it has between the two devices of
/// this server (0: not supported, or not over their link).
///
/// Codes: 107000 a NULL array or `count` 0; 107001 the same device twice, or a device the
/// machine lacks; 207000 on IPV350.
///
/// # Safety
///
/// `capabilities` and `operations` are NULL or valid for `count` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetP2PAtomicCapabilities(
    capabilities: *mut u32,
    operations: *const i32,
    count: u32,
    src_device_id: i32,
    dst_device_id: i32,
) -> aclError {
    api("aclrtDeviceGetP2PAtomicCapabilities", || {
        let soc = with_runtime(|rt| Ok(rt.backend().soc()))?;
        if soc.topology(0, 0).is_none() {
            return Err(unsupported(soc, "P2P atomics query"));
        }
        // SAFETY: NULL or writable for `count` elements, by the caller's contract.
        let capabilities = arrays_ok(
            unsafe { OutArray::new(capabilities, count as usize) },
            operations,
            count,
        )?;
        if src_device_id == dst_device_id {
            return Err(CallError::new(
                Error::InvalidDeviceId,
                format!(
                    "srcDeviceId and dstDeviceId are both {src_device_id}: two different devices \
                     are queried"
                ),
            ));
        }
        let link = with_runtime(|rt| {
            let a = rt.device_id(src_device_id)?;
            let b = rt.device_id(dst_device_id)?;
            soc.topology(a, b)
                .ok_or_else(|| unsupported(soc, "device topology"))
        })?;
        // SAFETY: checked non-NULL; the caller's contract for `count` elements.
        unsafe { fill(capabilities, operations, |op| soc.p2p_atomic(op, link)) };
        Ok(())
    })
}

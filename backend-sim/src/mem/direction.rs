//! What CANN's runtime makes of a copy's kind (`aclrtMemcpyKind`) once it knows where the
//! two addresses are: the kind a copy is made with, or its refusal.
//!
//! - **`aclrtMemcpy`**: the kind is not looked at (nothing here is asked). CANN's runtime
//!   checks that it is one of the five kinds and hands the copy to the driver, whose
//!   synchronous copy takes no kind and moves the bytes as the addresses are (hicann/runtime
//!   `src/runtime/api/impl/api_error.cc`, `ApiErrorDecorator::MemCopySync`;
//!   `src/runtime/driver/npu_driver_mem.cc`, `NpuDriver::MemCopySync`; the API page,
//!   `docs/zh/api_ref/11-03_memory_copy_and_set.md`, calls `kind` reserved: the system
//!   decides from the two pointers).
//! - **`aclrtMemcpyAsync`, `aclrtMemcpy2d`, `aclrtMemcpy2dAsync`** ([`resolve`]):
//!   the runtime asks the driver where each address is and corrects the kind by a table
//!   (`api_error.cc`, `MemcpyKindAutoCorrect`, called by `MemcpyAsyncCheckLocation` and
//!   `MemCopy2DSync`). Where both sides are device memory or page-locked host memory
//!   (`aclrtMallocHost`'s, registered), the kind is replaced by what the addresses are,
//!   whatever it said: `ACL_MEMCPY_HOST_TO_DEVICE` between two device addresses is a
//!   device-to-device copy. Where a side is pageable host memory (`malloc`'s, the stack), the
//!   runtime cannot tell it from device memory the driver does not know, so an explicit
//!   kind may call it either, but must name the other side as it is (else 107000);
//!   `ACL_MEMCPY_DEFAULT` calls it host memory. A side in managed memory
//!   (`aclrtMemAllocManaged`) has no entry in the table: the kind stays as given.
//!
//! What each call then does with the kind it found (a host-to-host copy refused, pageable
//! memory copied at once, the directions a 2-D copy takes) is its own: [`super::unqueued`],
//! [`super::pitched`].

use acl_notify_core::Error;

use super::MemcpyKind;
use super::unqueued::Place;
use crate::error::SimError;

/// What the two sides' places make of a copy, device memory on `(dst, src)` as told.
fn direction(dst_device: bool, src_device: bool) -> MemcpyKind {
    match (dst_device, src_device) {
        (true, false) => MemcpyKind::HostToDevice,
        (false, true) => MemcpyKind::DeviceToHost,
        (true, true) => MemcpyKind::DeviceToDevice,
        (false, false) => MemcpyKind::HostToHost,
    }
}

/// Which sides an explicit kind calls device memory: (destination, source).
fn claims(kind: MemcpyKind) -> Option<(bool, bool)> {
    match kind {
        MemcpyKind::HostToHost => Some((false, false)),
        MemcpyKind::HostToDevice => Some((true, false)),
        MemcpyKind::DeviceToHost => Some((false, true)),
        MemcpyKind::DeviceToDevice => Some((true, true)),
        MemcpyKind::Default => None,
    }
}

/// The kind CANN's table makes of a copy of `kind` from `s` (at `src`) to `d` (at `dst`). `managed` answers whether a device side is managed memory; it is asked only when
/// the table would change or refuse the kind.
///
/// Errors: 107000 an explicit kind that names a device or page-locked host side as what it
/// is not, when the other side is pageable host memory (CANN corrects only between known
/// places).
pub(super) fn resolve(
    kind: MemcpyKind,
    (d, dst): (Place, usize),
    (s, src): (Place, usize),
    managed: impl FnOnce() -> bool,
) -> Result<MemcpyKind, SimError> {
    let dev = |p: Place| p == Place::Device;
    let found = direction(dev(d), dev(s));
    let pageable = |p: Place| matches!(p, Place::Host { known: false, .. });
    let corrected = if !pageable(d) && !pageable(s) {
        Ok(found)
    } else {
        match claims(kind) {
            None => Ok(found),
            Some((cd, cs)) => {
                // A pageable side may be called either; a known side must be called what it is.
                let wrong = |p: Place, claim: bool| !pageable(p) && dev(p) != claim;
                if wrong(d, cd) || wrong(s, cs) {
                    let (what, addr, p, claim) = if wrong(d, cd) {
                        ("destination", dst, d, cd)
                    } else {
                        ("source", src, s, cs)
                    };
                    Err((what, addr, p, claim))
                } else {
                    Ok(kind)
                }
            }
        }
    };
    match corrected {
        Ok(k) if k == kind => Ok(k),
        // Managed memory is in no row of CANN's table: the kind stays.
        _ if managed() => Ok(kind),
        Ok(k) => Ok(k),
        Err((what, addr, p, claim)) => Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "the copy's kind ({}) says the {what} {addr:#x} is {} memory, but it is {}, and \
                 the other side is pageable host memory (neither aclrtMallocHost's nor \
                 registered), which CANN's runtime cannot place: it corrects a kind only between \
                 device and page-locked host memory. Use ACL_MEMCPY_DEFAULT, or a kind with \
                 that side as it is",
                cann_name(kind),
                if claim { "device" } else { "host" },
                if p == Place::Device {
                    "device memory"
                } else {
                    "page-locked host memory"
                },
            ),
        )),
    }
}

/// `kind` as the C caller names it.
pub(super) fn cann_name(kind: MemcpyKind) -> &'static str {
    match kind {
        MemcpyKind::HostToHost => "ACL_MEMCPY_HOST_TO_HOST",
        MemcpyKind::HostToDevice => "ACL_MEMCPY_HOST_TO_DEVICE",
        MemcpyKind::DeviceToHost => "ACL_MEMCPY_DEVICE_TO_HOST",
        MemcpyKind::DeviceToDevice => "ACL_MEMCPY_DEVICE_TO_DEVICE",
        MemcpyKind::Default => "ACL_MEMCPY_DEFAULT",
    }
}

#[cfg(test)]
mod tests {
    use acl_notify_core::BackendError as _;

    use super::*;

    const D: Place = Place::Device;
    const PIN: Place = Place::Host { at: 1, known: true };
    const PAGE: Place = Place::Host {
        at: 2,
        known: false,
    };

    fn fix(kind: MemcpyKind, d: Place, s: Place) -> Option<MemcpyKind> {
        resolve(kind, (d, 0x10), (s, 0x20), || false).ok()
    }

    /// CANN's table, row by row (`MemcpyKindAutoCorrect`): known places force the kind,
    /// a pageable side takes the kinds that call the known side what it is.
    #[test]
    fn the_table_corrects_between_known_places_and_checks_beside_pageable_memory() {
        use MemcpyKind::*;
        let all = [
            HostToHost,
            HostToDevice,
            DeviceToHost,
            DeviceToDevice,
            Default,
        ];
        for k in all {
            assert_eq!(fix(k, D, PIN), Some(HostToDevice), "{k:?}");
            assert_eq!(fix(k, PIN, D), Some(DeviceToHost), "{k:?}");
            assert_eq!(fix(k, D, D), Some(DeviceToDevice), "{k:?}");
            assert_eq!(fix(k, PIN, PIN), Some(HostToHost), "{k:?}");
        }
        // (destination, source, kinds taken, what DEFAULT becomes)
        let rows = [
            (D, PAGE, vec![HostToDevice, DeviceToDevice], HostToDevice),
            (PAGE, D, vec![DeviceToHost, DeviceToDevice], DeviceToHost),
            (PAGE, PIN, vec![HostToHost, HostToDevice], HostToHost),
            (PIN, PAGE, vec![HostToHost, DeviceToHost], HostToHost),
            (
                PAGE,
                PAGE,
                vec![HostToHost, HostToDevice, DeviceToHost, DeviceToDevice],
                HostToHost,
            ),
        ];
        for (d, s, taken, default) in rows {
            for k in all {
                let want = match k {
                    Default => Some(default),
                    k if taken.contains(&k) => Some(k),
                    _ => None,
                };
                assert_eq!(fix(k, d, s), want, "{d:?} <- {s:?} {k:?}");
            }
        }
    }

    #[test]
    fn managed_memory_keeps_its_kind() {
        use MemcpyKind::*;
        let kept = resolve(HostToHost, (D, 1), (PAGE, 2), || true);
        assert_eq!(kept.unwrap(), HostToHost);
        let e = resolve(DeviceToHost, (D, 1), (PAGE, 2), || false);
        assert_eq!(e.unwrap_err().kind(), Error::ParamInvalid);
    }
}

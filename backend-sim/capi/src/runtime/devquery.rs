//! What a program asks about the simulated devices without changing them: the stream priority
//! range, the device id mappings, the primary context's state, a device's status, UUID and
//! peer access status, and the process's floating-point saturation mode
//! (`aclrtGetDeviceSatMode` / `aclrtSetDeviceSatMode`, the one setting here).
//!
//! CANN's rules (hicann/runtime; the ACL layer's NULL checks, 100000, come first in each,
//! `src/acl/aclrt_impl/device.cpp`, `context.cpp`, `memory.cpp`):
//!
//! - Priority range: least 7, greatest 0 (`RT_STREAM_LEAST_PRIORITY` /
//!   `RT_STREAM_GREATEST_PRIORITY`); either pointer may be NULL (`api_impl.cc`,
//!   `ApiImpl::DeviceGetStreamPriorityRange`).
//! - Device ids: a user id is a logical id renumbered by `ASCEND_RT_VISIBLE_DEVICES`
//!   (`src/runtime/core/src/runtime.cc`, `ChgUserDevIdToDeviceId`), a physical id the driver's
//!   own. The simulator has neither: its devices are numbered 0..N once, so every mapping is
//!   the identity over the existing devices. A negative id is 107000 (`api_c_device.cc`,
//!   `rtsGet*DevId*`), an id past the last device 107001 (`RT_ERROR_DEVICE_ID`).
//! - Primary context state: `flags` is reserved and must be NULL (100000), `active` is 1 while
//!   the device's primary context is held by an `aclrtSetDevice` not yet reset
//!   (`runtime.cc`, `Runtime::GetPrimaryCtxState`); a device outside the machine is 107001.
//! - Device status: `ACL_RT_DEVICE_STATUS_NORMAL` for every device of the machine (107001
//!   otherwise, `api_error.cc`, `ApiErrorDecorator::DeviceStatusQuery`): a simulated device
//!   has no hardware to fail.
//! - UUID: a negative device is 107001 (`ApiErrorDecorator::GetDeviceUuid`), as one past the
//!   last. The simulator's is derived from the namespace, the server and the device, so it is
//!   the same in every process of one simulated machine and differs between its devices,
//!   servers and namespaces (an RFC 9562 version-8 UUID).
//! - Peer access status: 1 once this process enabled access from `deviceId` to
//!   `peerDeviceId` (`aclrtDeviceEnablePeerAccess`), else 0 (`docs/zh/api_ref/
//!   04_device_management.md`); a device outside the machine is 107000, as CANN documents for
//!   ids out of range (`ApiErrorDecorator::GetP2PStatus` checks them against its 64-device
//!   bound, the driver against the machine).
//! - Saturation mode: one per process (`Runtime::satMode_`), `ACL_RT_OVERFLOW_MODE_INFNAN`
//!   from the start on the chips with `RT_FEATURE_OVERFLOW_MODE` (`src/runtime/config/
//!   910_B_93`, `950`, `dev_info_reg.cc`; `Runtime::Init`), `SATURATION` elsewhere; a set of
//!   anything but 0 or 1 is 107000 (`ApiErrorDecorator::SetDeviceSatMode`). No kernel runs
//!   here, so the mode is only read back.

use std::sync::atomic::{AtomicU32, Ordering};

use acl_notify_core::{Backend as _, Soc};

use super::Runtime;
use super::streaminfo::LEAST_PRIORITY;
use crate::errmsg::{CallError, param};

/// `ACL_RT_OVERFLOW_MODE_SATURATION` / `_INFNAN`.
pub(crate) const SATURATION: u32 = 0;
pub(crate) const INFNAN: u32 = 1;

/// The process's saturation mode (`aclrtSetDeviceSatMode`).
#[derive(Debug)]
pub(crate) struct SatMode(AtomicU32);

impl SatMode {
    /// The mode a process on `soc` starts with.
    pub(crate) fn new(soc: Soc) -> Self {
        let infnan = soc.starts_in_infnan_mode();
        SatMode(AtomicU32::new(if infnan { INFNAN } else { SATURATION }))
    }
}

/// Which numbering a device id is in, for messages.
#[derive(Clone, Copy, Debug)]
pub(crate) enum IdKind {
    User,
    Logic,
    Phy,
}

impl IdKind {
    fn name(self) -> &'static str {
        match self {
            IdKind::User => "userDevId",
            IdKind::Logic => "logicDevId",
            IdKind::Phy => "phyDevId",
        }
    }
}

/// FNV-1a, 64 bits, from `seed`: a hash that every build and process computes alike.
fn fnv1a(seed: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(seed, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The UUID of `device` of server `server` in namespace `namespace`.
pub(crate) fn uuid(namespace: &str, server: u32, device: u32) -> [u8; 16] {
    let mut name = Vec::with_capacity(namespace.len() + 8);
    name.extend_from_slice(namespace.as_bytes());
    name.extend_from_slice(&server.to_le_bytes());
    name.extend_from_slice(&device.to_le_bytes());
    let hi = fnv1a(0xCBF2_9CE4_8422_2325, &name);
    let lo = fnv1a(hi ^ 0x9E37_79B9_7F4A_7C15, &name);
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&hi.to_be_bytes());
    u[8..].copy_from_slice(&lo.to_be_bytes());
    u[6] = (u[6] & 0x0F) | 0x80; // version 8: custom
    u[8] = (u[8] & 0x3F) | 0x80; // variant: RFC 9562
    u
}

impl Runtime {
    /// `aclrtDeviceGetStreamPriorityRange`: (least, greatest).
    pub(crate) fn stream_priority_range(&self) -> (i32, i32) {
        (LEAST_PRIORITY as i32, 0)
    }

    /// A device id mapping (`aclrtGet<To>DevIdBy<From>DevId`): the identity over the machine's
    /// devices (see the module).
    pub(crate) fn map_device_id(&self, id: i32, from: IdKind) -> Result<i32, CallError> {
        if id < 0 {
            return Err(param(format!("{} {id}: expected 0 or more", from.name())));
        }
        self.device_id(id).map(|d| d as i32)
    }

    /// `aclrtGetPrimaryCtxState`'s `active`: whether an `aclrtSetDevice` of `device` holds its
    /// primary context.
    pub(crate) fn primary_ctx_active(&self, device: i32) -> Result<bool, CallError> {
        let d = self.device_id(device)?;
        Ok(self.device_is_set(d))
    }

    /// `aclrtQueryDeviceStatus`: `ACL_RT_DEVICE_STATUS_NORMAL` (0) for a device of the machine.
    pub(crate) fn device_status(&self, device: i32) -> Result<i32, CallError> {
        self.device_id(device)?;
        Ok(0)
    }

    /// `aclrtDeviceGetUuid`.
    pub(crate) fn device_uuid(&self, device: i32) -> Result<[u8; 16], CallError> {
        let d = self.device_id(device)?;
        let b = self.backend();
        Ok(uuid(b.namespace(), b.server_id(), d))
    }

    /// `aclrtDevicePeerAccessStatus`: whether this process enabled access from `device` to
    /// `peer`.
    pub(crate) fn peer_access_status(&self, device: i32, peer: i32) -> Result<bool, CallError> {
        let count = self.backend().device_count();
        let in_range = |id: i32, what: &str| {
            u32::try_from(id)
                .ok()
                .filter(|d| *d < count)
                .ok_or_else(|| {
                    param(format!(
                        "{what} {id} is not a device of this machine (it has {count} devices)"
                    ))
                })
        };
        let d = in_range(device, "deviceId")?;
        let p = in_range(peer, "peerDeviceId")?;
        Ok(self.backend().peer_access_enabled(d, p))
    }

    /// `aclrtGetDeviceSatMode`.
    pub(crate) fn sat_mode(&self) -> u32 {
        self.sat_mode.0.load(Ordering::Relaxed)
    }

    /// `aclrtSetDeviceSatMode`: 107000 for a mode other than 0 or 1.
    pub(crate) fn set_sat_mode(&self, mode: i32) -> Result<(), CallError> {
        let m = u32::try_from(mode)
            .ok()
            .filter(|m| *m == SATURATION || *m == INFNAN)
            .ok_or_else(|| {
                param(format!(
                    "mode {mode}: expected ACL_RT_OVERFLOW_MODE_SATURATION (0) or \
                     ACL_RT_OVERFLOW_MODE_INFNAN (1)"
                ))
            })?;
        self.sat_mode.0.store(m, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::Error;
    use acl_notify_sim::NamespaceGuard as Ns;

    fn runtime(tag: &str, soc: Soc) -> (Runtime, Ns) {
        let (sim, ns) = Ns::open_sim(
            format!("unit-capi-devq-{tag}-{}", std::process::id()),
            soc,
            4,
        )
        .expect("opening a test Sim");
        (Runtime::new(sim, 1, 42), ns)
    }

    #[test]
    fn ids_map_to_themselves_over_the_machine() {
        let (rt, _ns) = runtime("ids", Soc::Ascend910B);
        for from in [IdKind::User, IdKind::Logic, IdKind::Phy] {
            for d in 0..4 {
                assert_eq!(rt.map_device_id(d, from).unwrap(), d);
            }
            assert_eq!(
                rt.map_device_id(4, from).unwrap_err().code(),
                Error::InvalidDeviceId
            );
            let e = rt.map_device_id(-1, from).unwrap_err();
            assert_eq!(e.code(), Error::ParamInvalid);
            assert!(e.text().contains(from.name()), "{}", e.text());
        }
    }

    #[test]
    fn the_primary_context_is_active_while_set() {
        let (rt, _ns) = runtime("ctx", Soc::Ascend910B);
        assert!(!rt.primary_ctx_active(1).unwrap());
        rt.set_device(1).unwrap();
        rt.set_device(1).unwrap();
        assert!(rt.primary_ctx_active(1).unwrap());
        assert!(!rt.primary_ctx_active(0).unwrap());
        rt.reset_device(1, false).unwrap();
        assert!(rt.primary_ctx_active(1).unwrap(), "one set is left");
        rt.reset_device(1, false).unwrap();
        assert!(!rt.primary_ctx_active(1).unwrap());
        assert_eq!(
            rt.primary_ctx_active(9).unwrap_err().code(),
            Error::InvalidDeviceId
        );
    }

    #[test]
    fn uuids_are_stable_and_distinct() {
        let (rt, _ns) = runtime("uuid", Soc::Ascend910B);
        let all: Vec<[u8; 16]> = (0..4).map(|d| rt.device_uuid(d).unwrap()).collect();
        assert_eq!(all[2], rt.device_uuid(2).unwrap());
        assert_eq!(
            all[2],
            uuid(rt.backend().namespace(), rt.backend().server_id(), 2)
        );
        for i in 0..4 {
            assert_eq!(all[i][6] >> 4, 8, "version 8");
            assert_eq!(all[i][8] >> 6, 0b10, "RFC variant");
            for j in i + 1..4 {
                assert_ne!(all[i], all[j]);
            }
        }
        assert_ne!(uuid("a", 0, 0), uuid("b", 0, 0));
        assert_ne!(uuid("a", 0, 0), uuid("a", 1, 0));
        assert_eq!(
            rt.device_uuid(-1).unwrap_err().code(),
            Error::InvalidDeviceId
        );
        assert_eq!(
            rt.device_uuid(4).unwrap_err().code(),
            Error::InvalidDeviceId
        );
    }

    #[test]
    fn peer_access_status_follows_enable_and_disable() {
        let (rt, _ns) = runtime("peer", Soc::Ascend910B);
        rt.set_device(0).unwrap();
        assert!(!rt.peer_access_status(0, 1).unwrap());
        rt.enable_peer_access(1, 0).unwrap();
        assert!(rt.peer_access_status(0, 1).unwrap());
        assert!(!rt.peer_access_status(1, 0).unwrap(), "one way only");
        rt.disable_peer_access(1).unwrap();
        assert!(!rt.peer_access_status(0, 1).unwrap());
        assert!(!rt.peer_access_status(2, 2).unwrap());
        assert_eq!(
            rt.peer_access_status(0, 4).unwrap_err().code(),
            Error::ParamInvalid
        );
        assert_eq!(
            rt.peer_access_status(-1, 0).unwrap_err().code(),
            Error::ParamInvalid
        );
    }

    #[test]
    fn the_sat_mode_starts_per_chip_and_keeps_what_is_set() {
        let (rt, _ns) = runtime("sat", Soc::Ascend910B);
        assert_eq!(rt.sat_mode(), INFNAN);
        rt.set_sat_mode(0).unwrap();
        assert_eq!(rt.sat_mode(), SATURATION);
        for bad in [2, -1, 0xFFFF] {
            assert_eq!(
                rt.set_sat_mode(bad).unwrap_err().code(),
                Error::ParamInvalid
            );
        }
        assert_eq!(rt.sat_mode(), SATURATION);
        let (rt, _ns) = runtime("sat310", Soc::Ascend310P);
        assert_eq!(rt.sat_mode(), SATURATION);
        assert_eq!(rt.device_status(3).unwrap(), 0);
        assert_eq!(
            rt.device_status(4).unwrap_err().code(),
            Error::InvalidDeviceId
        );
        assert_eq!(rt.stream_priority_range(), (7, 0));
    }
}

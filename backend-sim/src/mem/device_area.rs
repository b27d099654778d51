//! Areas of device memory the runtime keeps per device, allocated (zeroed) on first use and
//! again if freed meanwhile: the overflow status (`overflow`) and the inter-core
//! synchronization area of `aclrtGetHardwareSyncAddr` (`Area::InterCoreSync`). One table of
//! them in the memory state (`MemState::areas`), by kind and device.

use acl_notify_core::Error;

use super::DevRange;
use crate::Sim;
use crate::error::SimError;
use crate::locks::lock;

/// What a device area is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Area {
    /// The overflow status (`overflow`, [`OVERFLOW`] bytes).
    Overflow,
    /// The address `aclrtGetHardwareSyncAddr` answers: on the device, CANN's driver maps the
    /// cube and vector cores' synchronization registers there (`ADDR_MAP_TYPE_REG_C2C_CTRL`,
    /// hicann/runtime `src/runtime/driver/npu_driver_mem.cc` `GetC2cCtrlAddr`), a length the
    /// driver gives and the API does not return. No kernel runs here, so nothing uses the
    /// registers: the simulator gives [`INTER_CORE_SYNC`] bytes of device memory, so that the
    /// address is a device address that a copy or a kernel argument may name.
    InterCoreSync,
}

/// The size of the `Area::Overflow` area (`OVERFLOW_ADDR_MAX_SIZE`, hicann/runtime
/// `src/runtime/core/inc/context/context.hpp`).
pub const OVERFLOW: usize = 512;

/// The size of the `Area::InterCoreSync` area: one page.
pub const INTER_CORE_SYNC: usize = 4096;

impl Area {
    pub(crate) const fn size(self) -> usize {
        match self {
            Area::Overflow => OVERFLOW,
            Area::InterCoreSync => INTER_CORE_SYNC,
        }
    }

    const fn what(self) -> &'static str {
        match self {
            Area::Overflow => "overflow status",
            Area::InterCoreSync => "inter-core synchronization area",
        }
    }
}

impl Sim {
    /// `device`'s `area`, allocated (zeroed) on first use, and again if it was freed meanwhile.
    ///
    /// Errors: 107001 bad device; 207001 out of device memory.
    pub(crate) fn area_range(&self, area: Area, device: u32) -> Result<DevRange, SimError> {
        let (size, what) = (area.size(), area.what());
        let mut areas = lock(&self.mem().areas);
        if let Some(&addr) = areas.get(&(area as u8, device))
            && let Ok(Some(r)) = self.device_range(addr, size, what)
            && r.still(what).is_ok()
        {
            return Ok(r);
        }
        let addr = self.malloc(device, size, 0)?;
        self.memset(addr, size, 0, size)?;
        areas.insert((area as u8, device), addr);
        self.device_range(addr, size, what)?.ok_or_else(|| {
            SimError::new(
                Error::DrvInternalError,
                format!("device {device}'s new {what} {addr:#x} is not found"),
            )
        })
    }

    /// The device address `aclrtGetHardwareSyncAddr` answers for `device` (see
    /// `Area::InterCoreSync`): the same for every call while it is not freed.
    ///
    /// Errors: 107001 bad device; 207001 out of device memory.
    pub fn hardware_sync_addr(&self, device: u32) -> Result<usize, SimError> {
        self.area_range(Area::InterCoreSync, device).map(|r| r.addr)
    }
}

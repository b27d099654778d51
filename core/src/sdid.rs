//! SuperPOD device ids (sdids): the number that names one device of a SuperPod, which
//! `aclrtGetDeviceInfo(dev, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)` answers for a device and an
//! inter-server whitelist entry (`aclrtServerPid::sdid`, [`crate::ServerPid`]) names the
//! importer's device by. The one encoding of the simulator: what its host library answers and
//! what its whitelists (host and firmware alike) parse.
//!
//! CANN's runtime hands an sdid to the driver, which parses it into server, chip, die and
//! device (hicann/runtime `pkg_inc/driver/ascend_hal_base.h`, `halSDIDParseInfo` and
//! `halParseSDID`; `src/runtime/core/src/notify/notify.cc`, `ParseSDID`). That bit layout is
//! the driver's and not public. **The layout below is the simulator's own**; a program must
//! read sdids from `aclrtGetDeviceInfo`, never build them:
//!
//! | bits | field |
//! |---|---|
//! | 31–24 | [`TAG`] (`0x5D`): every sdid has it, so no server id (0–65535) or other small number is one |
//! | 23–8 | the server id (0–65535, the simulator's `ACL_NOTIFY_SIM_SERVER_ID`) |
//! | 7–0 | the device of that server, 0 to [`MAX_DEVICES`] − 1 |
//!
//! Device 2 of server 3 is `0x5D00_0302`. [`parse`] refuses every other value: no device has
//! it. A whitelist also stores two values no device has, which a caller's entry can therefore
//! never name: [`server_wide`] (device field `0xFF`: the PID on any device of one server, what
//! a same-server `aclrtNotifySetImportPid` entry means) and [`ANYWHERE`] (the PID on any device
//! of any server, a FABRIC handle's entries); [`admits`] says which importers an entry covers.

use core::fmt;

/// The top byte of every sdid.
pub const TAG: u32 = 0x5D;

/// Devices of one server an sdid can name (device fields 0–63).
pub const MAX_DEVICES: u32 = 64;

/// The largest server id.
pub const MAX_SERVER: u32 = 0xFFFF;

/// The device field of a [`server_wide`] whitelist entry.
const ANY_DEVICE: u32 = 0xFF;

/// A whitelist entry's sdid that admits its PID on every device of every server (the entries of
/// a FABRIC handle, whose `aclrtMemSetPidToShareableHandleV2` names no server). Not an sdid.
pub const ANYWHERE: u32 = u32::MAX;

/// One device of a SuperPod: what an sdid parses to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PodDevice {
    /// The server id, 0–65535.
    pub server: u32,
    /// The device of that server, 0 to [`MAX_DEVICES`] − 1.
    pub device: u32,
}

impl PodDevice {
    /// Device `device` of server `server`; `None` if no sdid can name it (server above 65535,
    /// device 64 or above).
    pub const fn new(server: u32, device: u32) -> Option<PodDevice> {
        if server > MAX_SERVER || device >= MAX_DEVICES {
            return None;
        }
        Some(PodDevice { server, device })
    }

    /// Its sdid.
    pub const fn sdid(self) -> u32 {
        TAG << 24 | self.server << 8 | self.device
    }
}

/// Why a number is not an sdid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SdidError {
    /// Its top byte is not [`TAG`] (the byte it has): a server id, a PID or another number.
    NotTagged(u8),
    /// Its device field is 64 or more (the field).
    NoSuchDevice(u8),
}

impl fmt::Display for SdidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SdidError::NotTagged(b) => write!(
                f,
                "its top byte is {b:#04x}, an sdid's is {TAG:#04x} (a server id or another \
                 number is not an sdid: read the importer's with aclrtGetDeviceInfo(dev, \
                 ACL_DEV_ATTR_SUPER_POD_DEVICE_ID))"
            ),
            SdidError::NoSuchDevice(d) => write!(
                f,
                "its device field is {d}: a server has at most {MAX_DEVICES} devices"
            ),
        }
    }
}

/// The device `sdid` names. Errors: not tagged, or a device field of 64 or more.
pub const fn parse(sdid: u32) -> Result<PodDevice, SdidError> {
    let tag = (sdid >> 24) as u8;
    if tag as u32 != TAG {
        return Err(SdidError::NotTagged(tag));
    }
    let device = sdid & 0xFF;
    if device >= MAX_DEVICES {
        return Err(SdidError::NoSuchDevice(device as u8));
    }
    Ok(PodDevice {
        server: (sdid >> 8) & MAX_SERVER,
        device,
    })
}

/// The whitelist entry's sdid that admits its PID on every device of server `server`.
pub const fn server_wide(server: u16) -> u32 {
    TAG << 24 | (server as u32) << 8 | ANY_DEVICE
}

/// The server of a device's sdid or of a [`server_wide`] entry; `None` for anything else
/// ([`ANYWHERE`] included).
pub const fn server_of(entry: u32) -> Option<u32> {
    if entry >> 24 != TAG || (entry & 0xFF >= MAX_DEVICES && entry & 0xFF != ANY_DEVICE) {
        return None;
    }
    Some((entry >> 8) & MAX_SERVER)
}

/// Whether a whitelist entry of sdid `entry` covers a process importing on the device of sdid
/// `importer`: the same device, a [`server_wide`] entry of its server, or [`ANYWHERE`].
pub const fn admits(entry: u32, importer: u32) -> bool {
    if entry == importer || entry == ANYWHERE {
        return true;
    }
    entry & 0xFF == ANY_DEVICE
        && entry >> 24 == TAG
        && parse(importer).is_ok()
        && (entry ^ importer) & 0xFFFF_FF00 == 0
}

/// An sdid (or a whitelist entry's) for messages: `0x5d000302 (server 3, device 2)`, `0x5d0003ff
/// (server 3, any device)`, `0xffffffff (any server)`, `0x3 (not an sdid)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shown(pub u32);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        match (parse(v), server_of(v)) {
            (Ok(d), _) => write!(f, "{v:#x} (server {}, device {})", d.server, d.device),
            (Err(_), Some(s)) => write!(f, "{v:#x} (server {s}, any device)"),
            _ if v == ANYWHERE => write!(f, "{v:#x} (any server)"),
            _ => write!(f, "{v:#x} (not an sdid)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    #[test]
    fn an_sdid_parses_back_to_its_device() {
        for (server, device) in [(0, 0), (0, 63), (3, 2), (48, 15), (MAX_SERVER, 63)] {
            let d = PodDevice::new(server, device).unwrap();
            assert_eq!(parse(d.sdid()), Ok(d), "server {server}, device {device}");
            assert_eq!(server_of(d.sdid()), Some(server));
        }
        assert_eq!(PodDevice::new(3, 2).unwrap().sdid(), 0x5D00_0302);
        assert_eq!(PodDevice::new(MAX_SERVER + 1, 0), None);
        assert_eq!(PodDevice::new(0, MAX_DEVICES), None);
    }

    /// What no device has is refused: any server id, small numbers, a device field past 63,
    /// the whitelist-only values.
    #[test]
    fn what_no_device_has_does_not_parse() {
        for v in [
            0,
            1,
            3,
            48,
            MAX_SERVER,
            0x1_0000,
            0x5C00_0000,
            0x5E00_0000,
            ANYWHERE,
        ] {
            assert!(matches!(parse(v), Err(SdidError::NotTagged(_))), "{v:#x}");
        }
        assert_eq!(parse(0x5D00_0340), Err(SdidError::NoSuchDevice(64)));
        assert_eq!(parse(server_wide(3)), Err(SdidError::NoSuchDevice(0xFF)));
        assert_eq!(server_of(0x5D00_0340), None);
        assert_eq!(server_of(ANYWHERE), None);
        assert_eq!(server_of(3), None);
        assert!(parse(1).unwrap_err().to_string().contains("server id"));
    }

    #[test]
    fn an_entry_admits_its_device_its_server_or_everyone() {
        let d = |s, d| PodDevice::new(s, d).unwrap().sdid();
        assert!(admits(d(3, 0), d(3, 0)));
        assert!(!admits(d(3, 0), d(3, 1)), "another device of the server");
        assert!(
            !admits(d(3, 0), d(4, 0)),
            "the same device of another server"
        );
        assert!(admits(server_wide(3), d(3, 0)));
        assert!(admits(server_wide(3), d(3, 63)));
        assert!(!admits(server_wide(3), d(4, 0)));
        assert!(!admits(server_wide(3), 0x5D00_0340), "not a device");
        assert!(admits(ANYWHERE, d(7, 5)));
        assert!(!admits(d(3, 0), ANYWHERE));
        assert_eq!(server_of(server_wide(3)), Some(3));
    }

    #[test]
    fn shown_names_server_and_device() {
        let d = PodDevice::new(3, 2).unwrap().sdid();
        assert_eq!(Shown(d).to_string(), "0x5d000302 (server 3, device 2)");
        assert_eq!(
            Shown(server_wide(3)).to_string(),
            "0x5d0003ff (server 3, any device)"
        );
        assert_eq!(Shown(ANYWHERE).to_string(), "0xffffffff (any server)");
        assert_eq!(Shown(3).to_string(), "0x3 (not an sdid)");
    }
}

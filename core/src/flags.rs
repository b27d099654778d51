//! The flag words of create, export and import, with the SPEC's validation of unknown bits.

use crate::error::{Error, Result};

bitflags::bitflags! {
    /// `aclrtCreateNotify` flags (`ACL_NOTIFY_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct CreateFlags: u64 {
        /// `ACL_NOTIFY_DEVICE_USE_ONLY` (0x1): the notify is only used by device-side tasks.
        const DEVICE_USE_ONLY = 0x1;
    }
}

bitflags::bitflags! {
    /// `aclrtNotifyGetExportKey` flags (`ACL_RT_NOTIFY_EXPORT_FLAG_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct ExportFlags: u64 {
        /// `ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION` (0x2): anyone holding the key may
        /// import; no whitelist can be set.
        const DISABLE_PID_VALIDATION = 0x2;
    }
}

bitflags::bitflags! {
    /// `aclrtNotifyImportByKey` flags (`ACL_RT_NOTIFY_IMPORT_FLAG_*`). Only the low 32 bits are
    /// examined (CANN ignores the upper half); bit 0 is accepted and has no effect.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct ImportFlags: u32 {
        /// Reserved bit CANN accepts (values up to 3 are valid).
        const RESERVED0 = 0x1;
        /// `ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS` (0x2): enable peer access between the
        /// importer's device and the owner's device as part of the import.
        const ENABLE_PEER_ACCESS = 0x2;
    }
}

/// `ACL_NOTIFY_DEFAULT`.
pub const ACL_NOTIFY_DEFAULT: u64 = 0x0;
/// `ACL_NOTIFY_DEVICE_USE_ONLY`.
pub const ACL_NOTIFY_DEVICE_USE_ONLY: u64 = 0x1;
/// `ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT`.
pub const ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT: u64 = 0x0;
/// `ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION`.
pub const ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION: u64 = 0x2;
/// `ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT`.
pub const ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT: u64 = 0x0;
/// `ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS`.
pub const ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS: u64 = 0x2;

impl CreateFlags {
    /// Validates a raw C flag word: anything but 0 or 1 is `ParamInvalid` (107000).
    pub const fn from_raw(raw: u64) -> Result<Self> {
        match Self::from_bits(raw) {
            Some(f) => Ok(f),
            None => Err(Error::ParamInvalid),
        }
    }
}

impl ExportFlags {
    /// Validates a raw C flag word: anything but 0 or 0x2 is `ParamInvalid` (107000).
    pub const fn from_raw(raw: u64) -> Result<Self> {
        match Self::from_bits(raw) {
            Some(f) => Ok(f),
            None => Err(Error::ParamInvalid),
        }
    }

    /// Whether importers must be whitelisted.
    pub const fn pid_validation(self) -> PidValidation {
        if self.contains(Self::DISABLE_PID_VALIDATION) {
            PidValidation::Disabled
        } else {
            PidValidation::Enforced
        }
    }
}

impl ImportFlags {
    /// Validates a raw C flag word: the upper 32 bits are ignored, a low half above 3 is
    /// `ParamInvalid` (107000).
    pub const fn from_raw(raw: u64) -> Result<Self> {
        let low = raw as u32;
        match Self::from_bits(low) {
            Some(f) => Ok(f),
            None => Err(Error::ParamInvalid),
        }
    }
}

// bitflags types wrap an internal type without `defmt::Format`, so these are written out:
// the raw word in hex, which is what a CANN log shows too.
#[cfg(feature = "defmt")]
impl defmt::Format for CreateFlags {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "CreateFlags({=u64:#x})", self.bits())
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for ExportFlags {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "ExportFlags({=u64:#x})", self.bits())
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for ImportFlags {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "ImportFlags({=u32:#x})", self.bits())
    }
}

/// Whether an exported notify checks the importer's PID against its whitelist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PidValidation {
    /// Importers must be whitelisted (export flag 0).
    Enforced,
    /// Anyone holding the key may import (`DISABLE_PID_VALIDATION`).
    Disabled,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_flags() {
        assert_eq!(CreateFlags::from_raw(0), Ok(CreateFlags::empty()));
        assert_eq!(CreateFlags::from_raw(1), Ok(CreateFlags::DEVICE_USE_ONLY));
        for bad in [2, 3, 0x100, u64::MAX] {
            assert_eq!(CreateFlags::from_raw(bad), Err(Error::ParamInvalid));
        }
    }

    #[test]
    fn export_flags() {
        assert_eq!(
            ExportFlags::from_raw(0).map(ExportFlags::pid_validation),
            Ok(PidValidation::Enforced)
        );
        assert_eq!(
            ExportFlags::from_raw(2).map(ExportFlags::pid_validation),
            Ok(PidValidation::Disabled)
        );
        for bad in [1, 3, 4, 1 << 40] {
            assert_eq!(ExportFlags::from_raw(bad), Err(Error::ParamInvalid));
        }
    }

    #[test]
    fn import_flags_ignore_upper_half() {
        for ok in 0..=3u64 {
            assert!(ImportFlags::from_raw(ok).is_ok());
            assert!(ImportFlags::from_raw(ok | 0xdead_beef_0000_0000).is_ok());
        }
        assert_eq!(
            ImportFlags::from_raw(2),
            Ok(ImportFlags::ENABLE_PEER_ACCESS)
        );
        for bad in [4u64, 5, 0xffff_ffff, 0x1_0000_0004] {
            assert_eq!(ImportFlags::from_raw(bad), Err(Error::ParamInvalid));
        }
    }
}

//! The flag words of create, export and import: types that hold only the bits they define,
//! made from a C word by the SPEC's validation of unknown bits (107000), once.

use crate::error::{Error, Result};

/// A flag word that holds only the bits its type defines: a value exists only as one of the
/// constants, their union, or the result of a parse that refused every other bit, so what
/// takes one never checks it again (SPEC §3's 107000 for unknown bits is answered once, where
/// the word comes in: `from_raw`).
macro_rules! flag_word {
    (
        $(#[$meta:meta])*
        $name:ident: $bits:ty {
            $($(#[$fmeta:meta])* const $flag:ident = $value:expr;)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name($bits);

        impl $name {
            $($(#[$fmeta])* pub const $flag: Self = Self($value);)*

            /// Every bit the type defines.
            const KNOWN: $bits = 0 $(| $value)*;

            /// No flag set.
            pub const fn empty() -> Self {
                Self(0)
            }

            /// The word's bits.
            pub const fn bits(self) -> $bits {
                self.0
            }

            /// Whether every flag of `other` is set.
            pub const fn contains(self, other: Self) -> bool {
                self.0 & other.0 == other.0
            }

            /// Whether no flag is set.
            pub const fn is_empty(self) -> bool {
                self.0 == 0
            }

            /// The defined bits of `bits`, the others dropped (for a word read back from
            /// memory this crate wrote, never for a caller's word: that is `from_raw`'s).
            pub const fn from_bits_truncate(bits: $bits) -> Self {
                Self(bits & Self::KNOWN)
            }

            /// `bits` if it holds defined bits only; 107000 otherwise.
            const fn parse(bits: $bits) -> Result<Self> {
                if bits & !Self::KNOWN == 0 {
                    Ok(Self(bits))
                } else {
                    Err(Error::ParamInvalid)
                }
            }
        }

        impl core::ops::BitOr for $name {
            type Output = Self;
            fn bitor(self, other: Self) -> Self {
                Self(self.0 | other.0)
            }
        }

        impl core::ops::BitOrAssign for $name {
            fn bitor_assign(&mut self, other: Self) {
                self.0 |= other.0;
            }
        }

        /// The set flags by name (`CreateFlags(DEVICE_USE_ONLY)`), `empty` for none.
        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(concat!(stringify!($name), "("))?;
                let mut first = true;
                $(
                    if $value != 0 && self.0 & $value == $value {
                        if !first {
                            f.write_str(" | ")?;
                        }
                        f.write_str(stringify!($flag))?;
                        first = false;
                    }
                )*
                if first {
                    f.write_str("empty")?;
                }
                f.write_str(")")
            }
        }
    };
}

flag_word! {
    /// `aclrtCreateNotify` flags (`ACL_NOTIFY_*`).
    CreateFlags: u64 {
        /// `ACL_NOTIFY_DEVICE_USE_ONLY` (0x1): the notify is only used by device-side tasks.
        const DEVICE_USE_ONLY = 0x1;
    }
}

flag_word! {
    /// `aclrtNotifyGetExportKey` flags (`ACL_RT_NOTIFY_EXPORT_FLAG_*`).
    ExportFlags: u64 {
        /// `ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION` (0x2): anyone holding the key may
        /// import; no whitelist can be set.
        const DISABLE_PID_VALIDATION = 0x2;
    }
}

flag_word! {
    /// `aclrtNotifyImportByKey` flags (`ACL_RT_NOTIFY_IMPORT_FLAG_*`). Only the low 32 bits are
    /// examined (CANN ignores the upper half); bit 0 is accepted and has no effect.
    ImportFlags: u32 {
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
        Self::parse(raw)
    }
}

impl ExportFlags {
    /// Validates a raw C flag word: anything but 0 or 0x2 is `ParamInvalid` (107000).
    pub const fn from_raw(raw: u64) -> Result<Self> {
        Self::parse(raw)
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
        Self::parse(raw as u32)
    }
}

// The raw word in hex, which is what a CANN log shows too.
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
    fn the_types_hold_defined_bits_only() {
        // The only ways in: constants, union, from_raw (refuses), from_bits_truncate (drops).
        assert_eq!(
            CreateFlags::from_bits_truncate(0x101),
            CreateFlags::DEVICE_USE_ONLY
        );
        assert_eq!(ExportFlags::from_bits_truncate(!0).bits(), 0x2);
        assert_eq!(ImportFlags::from_bits_truncate(!0).bits(), 0x3);
        let both = ImportFlags::RESERVED0 | ImportFlags::ENABLE_PEER_ACCESS;
        assert_eq!(both.bits(), 3);
        assert!(both.contains(ImportFlags::ENABLE_PEER_ACCESS));
        assert!(!ImportFlags::RESERVED0.contains(ImportFlags::ENABLE_PEER_ACCESS));
        assert!(CreateFlags::default().is_empty());
        assert_eq!(
            std::format!("{:?} {:?}", both, CreateFlags::empty()),
            "ImportFlags(RESERVED0 | ENABLE_PEER_ACCESS) CreateFlags(empty)"
        );
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

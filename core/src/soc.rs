//! The per-SoC capability table (SPEC §4), written once and seen two ways: the runtime value
//! [`Soc`] with [`Soc::caps`] (for the C ABI and backends), and one zero-sized type per SoC
//! whose capabilities are marker traits (for the typed API, so that a method a SoC lacks does
//! not exist for it). Both are generated from the single `soc_table!` invocation below.

use crate::error::{Error, Result};

/// What one SoC family supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Caps {
    /// Notifies per device (the id pool's capacity); 0 where notifies are not supported.
    pub max_notifies: u32,
    /// Export, import and whitelists.
    pub ipc: bool,
    /// `aclrtNotifyBatchReset`.
    pub batch_reset: bool,
    /// `aclrtNotifySetImportPidInterServer` (SuperPod).
    pub inter_server: bool,
    /// `ACL_NOTIFY_DEVICE_USE_ONLY`.
    pub device_only: bool,
    /// Count notifies (SPEC §6).
    pub cnt_notify: bool,
}

impl Caps {
    /// Whether any notify call is supported at all.
    pub const fn notify(&self) -> bool {
        self.max_notifies > 0
    }
}

/// A feature that some SoCs lack; [`Soc::require`] maps a missing one to 207000.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Feature {
    /// Any notify call.
    Notify,
    /// Export, import, whitelists.
    Ipc,
    /// Batch reset.
    BatchReset,
    /// Inter-server whitelists.
    InterServer,
    /// `ACL_NOTIFY_DEVICE_USE_ONLY`.
    DeviceOnly,
    /// Count notifies.
    CntNotify,
    /// Events (`aclrtCreateEvent` …): every SoC with notifies (CANN's event chapter lists
    /// `IPV350` as unsupported).
    Event,
    /// IPC events (`ACL_EVENT_IPC`, `aclrtIpcGetEventHandle`): Ascend 950PR, Atlas A3 and A2
    /// only (CANN's event chapter; hicann/runtime `config/*/dev_info_reg.cc`,
    /// `RT_FEATURE_IPC_EVENT`).
    IpcEvent,
}

/// Compile-time view of one SoC family. Implemented only by the zero-sized types in this
/// module; capability traits ([`Ipc`], [`BatchReset`], …) are implemented for exactly the SoCs
/// that have the feature.
pub trait SocType: sealed::Sealed + Copy + core::fmt::Debug + Send + Sync + 'static {
    /// The runtime value for this SoC.
    const SOC: Soc;
    /// Notifies per device.
    const MAX_NOTIFIES: u32;
    /// A fixed-capacity notify id pool sized exactly for this SoC.
    type NotifyPool;
    /// The same pool behind a `spin` mutex ([`SpinIdPool`](crate::pool::SpinIdPool)).
    type SpinNotifyPool;
    /// The same capacity as a lock-free, shared-memory pool
    /// ([`AtomicIdPool`](crate::pool::AtomicIdPool)).
    #[cfg(target_has_atomic = "64")]
    type AtomicNotifyPool;
    /// `Some(SOC)` for a SoC type, `None` for [`AnySoc`], whose SoC is only known at run time.
    /// Generic code that must work for both uses this rather than [`SOC`](Self::SOC), which
    /// [`AnySoc`] does not have (using it fails the build).
    const FIXED: Option<Soc> = Some(Self::SOC);
}

/// The SoC can create notifies at all (every SoC but `IPV350`).
pub trait Notifies: SocType {}
/// The SoC supports export / import / whitelists.
pub trait Ipc: Notifies {}
/// The SoC supports `aclrtNotifyBatchReset`.
pub trait BatchReset: Notifies {}
/// The SoC supports inter-server (SuperPod) whitelists.
pub trait InterServer: Ipc {}
/// The SoC supports `ACL_NOTIFY_DEVICE_USE_ONLY`.
pub trait DeviceOnly: Notifies {}
/// The SoC supports count notifies.
pub trait CntNotify: Notifies {}
/// The SoC can share events between processes ([`Feature::IpcEvent`]).
pub trait IpcEvents: Notifies {}

mod sealed {
    pub trait Sealed {}
}

macro_rules! cap_impl {
    (yes, $cap:ident, $ty:ident) => {
        impl $cap for $ty {}
    };
    (no, $cap:ident, $ty:ident) => {};
}

macro_rules! cap_bool {
    (yes) => {
        true
    };
    (no) => {
        false
    };
}

macro_rules! soc_table {
    ($(
        $(#[$doc:meta])*
        $ty:ident = $name:literal, $product:literal, max: $max:literal,
        notify: $n:ident, ipc: $ipc:ident, batch_reset: $br:ident, inter_server: $is:ident,
        device_only: $dev:ident, cnt_notify: $cnt:ident;
    )*) => {
        /// A SoC family, as `aclrtGetSocName` names it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[allow(non_camel_case_types)]
        pub enum Soc {
            $( $(#[$doc])* $ty, )*
        }

        impl Soc {
            /// Every SoC in the table, in table order.
            pub const ALL: &'static [Soc] = &[$(Soc::$ty),*];

            /// The name `aclrtGetSocName` returns.
            pub const fn name(self) -> &'static str {
                match self { $( Soc::$ty => $name, )* }
            }

            /// [`name`](Self::name) as a C string, for the C ABI (static storage).
            pub const fn c_name(self) -> &'static core::ffi::CStr {
                match self { $( Soc::$ty => const {
                    match core::ffi::CStr::from_bytes_with_nul(concat!($name, "\0").as_bytes()) {
                        Ok(c) => c,
                        Err(_) => panic!("a SoC name with a NUL in it"),
                    }
                }, )* }
            }

            /// The product line.
            pub const fn product(self) -> &'static str {
                match self { $( Soc::$ty => $product, )* }
            }

            /// What the SoC supports.
            pub const fn caps(self) -> Caps {
                match self { $( Soc::$ty => Caps {
                    max_notifies: $max,
                    ipc: cap_bool!($ipc),
                    batch_reset: cap_bool!($br),
                    inter_server: cap_bool!($is),
                    device_only: cap_bool!($dev),
                    cnt_notify: cap_bool!($cnt),
                }, )* }
            }
        }

        $(
            $(#[$doc])*
            #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
            #[cfg_attr(feature = "defmt", derive(defmt::Format))]
            #[allow(non_camel_case_types)]
            pub struct $ty;
            impl sealed::Sealed for $ty {}
            impl SocType for $ty {
                const SOC: Soc = Soc::$ty;
                const MAX_NOTIFIES: u32 = $max;
                type NotifyPool = crate::pool::IdPool<$max>;
                type SpinNotifyPool = crate::pool::SpinIdPool<$max>;
                #[cfg(target_has_atomic = "64")]
                type AtomicNotifyPool = crate::pool::AtomicIdPool<$max, { crate::pool::words($max) }>;
            }
            cap_impl!($n, Notifies, $ty);
            cap_impl!($ipc, Ipc, $ty);
            cap_impl!($br, BatchReset, $ty);
            cap_impl!($is, InterServer, $ty);
            cap_impl!($dev, DeviceOnly, $ty);
            cap_impl!($cnt, CntNotify, $ty);
        )*
    };
}

soc_table! {
    /// Ascend 950PR.
    Ascend950PR = "Ascend950PR", "Ascend 950PR", max: 65535,
        notify: yes, ipc: yes, batch_reset: yes, inter_server: no, device_only: yes, cnt_notify: yes;
    /// Ascend 950DT (no IPC).
    Ascend950DT = "Ascend950DT", "Ascend 950DT", max: 65535,
        notify: yes, ipc: no, batch_reset: yes, inter_server: no, device_only: yes, cnt_notify: yes;
    /// Atlas A3 training/inference (SuperPod: inter-server whitelists).
    Ascend910_93 = "Ascend910_93", "Atlas A3 training/inference", max: 8192,
        notify: yes, ipc: yes, batch_reset: yes, inter_server: yes, device_only: yes, cnt_notify: no;
    /// Atlas A2 training/inference (B1–B4).
    Ascend910B = "Ascend910B", "Atlas A2 training/inference", max: 8192,
        notify: yes, ipc: yes, batch_reset: yes, inter_server: no, device_only: yes, cnt_notify: no;
    /// Atlas 200I/500 A2 inference.
    Ascend310B = "Ascend310B", "Atlas 200I/500 A2 inference", max: 2048,
        notify: yes, ipc: no, batch_reset: no, inter_server: no, device_only: no, cnt_notify: no;
    /// Atlas inference series.
    Ascend310P = "Ascend310P", "Atlas inference series", max: 1024,
        notify: yes, ipc: yes, batch_reset: no, inter_server: no, device_only: yes, cnt_notify: no;
    /// Atlas training series.
    Ascend910 = "Ascend910", "Atlas training series", max: 1024,
        notify: yes, ipc: yes, batch_reset: no, inter_server: no, device_only: no, cnt_notify: no;
    /// IPV350: every notify call is `FeatureNotSupport`.
    IPV350 = "IPV350", "IPV350", max: 0,
        notify: no, ipc: no, batch_reset: no, inter_server: no, device_only: no, cnt_notify: no;
}

/// The dynamic SoC marker: the SoC is the backend's, known only at run time.
///
/// It implements every capability trait, so every typed method exists for it; each one checks
/// the backend's SoC when called and answers `FeatureNotSupport` (207000) if the feature is
/// missing. It has no [`SocType::SOC`] or [`SocType::MAX_NOTIFIES`]: code that uses either
/// for `AnySoc` fails to build (the constants' evaluation panics when they are instantiated —
/// a post-monomorphisation error that `cargo build` reports and `cargo check` does not). It
/// has no fixed-size pools either (the pool types are `()`). Use [`SocType::FIXED`] and the
/// runtime [`Soc`] instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AnySoc;

impl sealed::Sealed for AnySoc {}
impl SocType for AnySoc {
    const SOC: Soc = panic!("AnySoc has no fixed SoC: use SocType::FIXED or the runtime Soc");
    const MAX_NOTIFIES: u32 =
        panic!("AnySoc has no fixed capacity: use the runtime Soc::max_notifies");
    type NotifyPool = ();
    type SpinNotifyPool = ();
    #[cfg(target_has_atomic = "64")]
    type AtomicNotifyPool = ();
    const FIXED: Option<Soc> = None;
}
impl Notifies for AnySoc {}
impl Ipc for AnySoc {}
impl BatchReset for AnySoc {}
impl InterServer for AnySoc {}
impl DeviceOnly for AnySoc {}
impl CntNotify for AnySoc {}
impl IpcEvents for AnySoc {}
impl IpcEvents for Ascend950PR {}
impl IpcEvents for Ascend910_93 {}
impl IpcEvents for Ascend910B {}

impl Soc {
    /// Parses a name `aclrtGetSocName` returns. Accepts the family name exactly, and the
    /// concrete `Ascend910B1`…`Ascend910B4` as `Ascend910B`. Anything else is `ParamInvalid`.
    pub fn from_name(name: &str) -> Result<Soc> {
        if let Some(s) = Soc::ALL.iter().find(|s| s.name() == name) {
            return Ok(*s);
        }
        match name {
            "Ascend910B1" | "Ascend910B2" | "Ascend910B3" | "Ascend910B4" => Ok(Soc::Ascend910B),
            _ => Err(Error::ParamInvalid),
        }
    }

    /// Whether the SoC has `feature`.
    pub const fn has(self, feature: Feature) -> bool {
        let c = self.caps();
        match feature {
            Feature::Notify => c.notify(),
            Feature::Ipc => c.notify() && c.ipc,
            Feature::BatchReset => c.notify() && c.batch_reset,
            Feature::InterServer => c.notify() && c.inter_server,
            Feature::DeviceOnly => c.notify() && c.device_only,
            Feature::CntNotify => c.notify() && c.cnt_notify,
            Feature::Event => c.notify(),
            // Keep in step with the `IpcEvents` impls above.
            Feature::IpcEvent => {
                matches!(self, Soc::Ascend950PR | Soc::Ascend910_93 | Soc::Ascend910B)
            }
        }
    }

    /// `Ok(())` if the SoC has `feature`, else `FeatureNotSupport` (207000).
    pub const fn require(self, feature: Feature) -> Result<()> {
        if self.has(feature) {
            Ok(())
        } else {
            Err(Error::FeatureNotSupport)
        }
    }

    /// Notifies per device.
    pub const fn max_notifies(self) -> u32 {
        self.caps().max_notifies
    }

    /// Events per device (CANN's `aclrtCreateEvent` constraints: 65,536 on the 950 family,
    /// Atlas A3, A2 and 200I/500 A2; 1,023 on the Atlas inference series; 65,535 on the Atlas
    /// training series); 0 where events are unsupported.
    pub const fn max_events(self) -> u32 {
        match self {
            Soc::Ascend950PR
            | Soc::Ascend950DT
            | Soc::Ascend910_93
            | Soc::Ascend910B
            | Soc::Ascend310B => 65536,
            Soc::Ascend310P => 1023,
            Soc::Ascend910 => 65535,
            Soc::IPV350 => 0,
        }
    }
}

impl core::fmt::Display for Soc {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Soc {
    type Err = Error;
    fn from_str(s: &str) -> Result<Soc> {
        Soc::from_name(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for s in Soc::ALL {
            assert_eq!(Soc::from_name(s.name()), Ok(*s));
            assert_eq!(s.c_name().to_str(), Ok(s.name()));
        }
        assert_eq!(Soc::from_name("Ascend910B3"), Ok(Soc::Ascend910B));
        assert_eq!(Soc::from_name("ascend910b"), Err(Error::ParamInvalid));
        assert_eq!(Soc::from_name(""), Err(Error::ParamInvalid));
    }

    #[test]
    fn spec_table_rows() {
        use Feature::*;
        let row = |s: Soc| {
            (
                s.max_notifies(),
                s.has(Ipc),
                s.has(BatchReset),
                s.has(InterServer),
                s.has(DeviceOnly),
                s.has(CntNotify),
            )
        };
        assert_eq!(
            row(Soc::Ascend950PR),
            (65535, true, true, false, true, true)
        );
        assert_eq!(
            row(Soc::Ascend950DT),
            (65535, false, true, false, true, true)
        );
        assert_eq!(
            row(Soc::Ascend910_93),
            (8192, true, true, true, true, false)
        );
        assert_eq!(row(Soc::Ascend910B), (8192, true, true, false, true, false));
        assert_eq!(
            row(Soc::Ascend310B),
            (2048, false, false, false, false, false)
        );
        assert_eq!(
            row(Soc::Ascend310P),
            (1024, true, false, false, true, false)
        );
        assert_eq!(
            row(Soc::Ascend910),
            (1024, true, false, false, false, false)
        );
        assert_eq!(row(Soc::IPV350), (0, false, false, false, false, false));
        assert_eq!(Soc::IPV350.require(Notify), Err(Error::FeatureNotSupport));
    }

    #[test]
    fn types_agree_with_values() {
        fn check<C: SocType>() {
            assert_eq!(C::MAX_NOTIFIES, C::SOC.max_notifies());
        }
        check::<Ascend950PR>();
        check::<Ascend950DT>();
        check::<Ascend910_93>();
        check::<Ascend910B>();
        check::<Ascend310B>();
        check::<Ascend310P>();
        check::<Ascend910>();
        check::<IPV350>();
        fn fixed<C: SocType>() -> Option<Soc> {
            C::FIXED
        }
        assert_eq!(fixed::<Ascend910_93>(), Some(Soc::Ascend910_93));
        assert_eq!(fixed::<AnySoc>(), None);
    }
}

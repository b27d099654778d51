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
    /// What `aclrtNotifyBatchReset` does with an IPC notify (moot where batch reset is
    /// missing).
    pub ipc_batch_reset: IpcBatchReset,
    /// What `UINT32_MAX` means as the timeout of `aclrtWaitAndResetNotify`.
    pub wait_max_timeout: MaxWaitTimeout,
}

/// What `aclrtNotifyBatchReset` does with an IPC notify (an imported one, or the owner's own
/// once exported), as the real runtime does per SoC (hicann/runtime
/// `src/runtime/api/api_impl.cc` `NotifyBatchReset`, `src/runtime/core/src/notify.cc`,
/// `notify_c.cc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IpcBatchReset {
    /// Reset like any other notify: the runtime makes no IPC check (Ascend910B/910_93).
    Reset,
    /// Refused with `ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT` (507009): every IPC notify, the
    /// exporter's own included (the Ascend 950 family).
    Refused,
}

/// What `UINT32_MAX` means as a wait-and-reset timeout (hicann/runtime
/// `src/runtime/api/api_c_event.cc` `rtsNotifyWaitAndReset`, `src/runtime/api/api_c.cc`
/// `rtNotifyWait`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MaxWaitTimeout {
    /// Wait for ever, exactly like 0 (the SoCs with the runtime's notify-wait feature).
    Forever,
    /// The process default set by `aclrtSetOpWaitTimeout` (Ascend310P).
    OpWaitTimeout,
}

/// A chip's compute cores and L2 cache, as CANN's platform configuration of the chip counts them
/// (`[SoCInfo]` of hicann/runtime `src/platform/platform_config/cann/<chip>.ini` and
/// `cann-dev/<chip>.ini`, as of 2026-08-22; Ascend950PR_957b and _957bx had 7 AI CPUs before
/// that). What `aclrtGetDeviceInfo` answers for the core attributes and what a device's core
/// resource limits (`aclrtSetDeviceResLimit` and its neighbours) start from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Cores {
    /// AI Cores (`ai_core_cnt`): `ACL_DEV_ATTR_AICORE_CORE_NUM`, and a device's Cube Core
    /// resource limit until one is set (CANN's runtime starts it from the driver's AI Core
    /// count).
    pub ai_core: u32,
    /// Cube Cores (`cube_core_cnt`): `ACL_DEV_ATTR_CUBE_CORE_NUM`. `None` where the chip's
    /// AI Cores are not split into Cube and Vector Cores (the Atlas inference and training
    /// series have no such count, and CANN answers the attribute with 107000).
    pub cube_core: Option<u32>,
    /// Vector Cores (`vector_core_cnt`): `ACL_DEV_ATTR_VECTOR_CORE_NUM`, and a device's
    /// Vector Core resource limit until one is set.
    pub vector_core: u32,
    /// AI CPUs (`ai_cpu_cnt`): `ACL_DEV_ATTR_AICPU_CORE_NUM`.
    pub ai_cpu: u32,
    /// The L2 cache's size in bytes (`l2_size`): `ACL_DEVICE_INFO_L2_SIZE` of
    /// `aclGetDeviceCapability`.
    pub l2_size: u64,
}

/// A mebibyte, for [`Cores::l2_size`].
const MIB: u64 = 1 << 20;

impl Cores {
    /// A chip whose AI Cores are split into a Cube Core each and Vector Cores.
    const fn split(cube: u32, vector: u32, ai_cpu: u32, l2_size: u64) -> Option<Cores> {
        Some(Cores {
            ai_core: cube,
            cube_core: Some(cube),
            vector_core: vector,
            ai_cpu,
            l2_size,
        })
    }

    /// A chip whose AI Cores are not split (no Cube Core count).
    const fn unsplit(ai_core: u32, vector: u32, ai_cpu: u32, l2_size: u64) -> Option<Cores> {
        Some(Cores {
            ai_core,
            cube_core: None,
            vector_core: vector,
            ai_cpu,
            l2_size,
        })
    }
}

impl Caps {
    /// Whether any notify call is supported at all.
    pub const fn notify(&self) -> bool {
        self.max_notifies > 0
    }
}

/// Declares [`Feature`] and [`Feature::ALL`] from one list, so that a variant cannot be
/// added to the enum without being in `ALL` (the C library takes its feature bits from it).
macro_rules! features {
    ($($(#[$doc:meta])* $v:ident,)*) => {
        /// A feature that some SoCs lack; [`Soc::require`] maps a missing one to 207000.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum Feature {
            $($(#[$doc])* $v,)*
        }

        impl Feature {
            /// Every feature, in declaration order (`ALL[f as usize] == f`).
            pub const ALL: [Feature; [$(Feature::$v,)*].len()] = [$(Feature::$v,)*];
        }
    };
}

features! {
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
    /// Peer access between devices (`aclrtDeviceCanAccessPeer`, `aclrtDeviceEnablePeerAccess`,
    /// `aclrtDeviceDisablePeerAccess`): every SoC but Ascend310B and IPV350 (CANN's device
    /// chapter, hicann/runtime `docs/zh/api_ref/04_device_management.md`).
    PeerAccess,
    /// Stream-ordered memory pools (`aclrtMemPool*`): Atlas A2 (Ascend910B) only (CANN's
    /// chapter on them, hicann/runtime `docs/zh/api_ref/11-10_ordered_stream_memory_allocation.md`).
    MemPool,
    /// Host functions run by a thread of the program (`aclrtSubscribeHostFunc`,
    /// `aclrtProcessHostFunc`, `aclrtUnSubscribeHostFunc`): IPV350 only (CANN's "other APIs"
    /// chapter, hicann/runtime `docs/zh/api_ref/24_other_APIs.md`; only the compact runtime,
    /// `src/runtime_compact/feature/src/host_func.c`, implements them).
    HostFuncThread,
    /// Streams made from a configuration object (`aclrtCreateStreamConfigHandle`,
    /// `aclrtSetStreamConfigOpt`, `aclrtCreateStreamV2`): IPV350 only (hicann/runtime
    /// `docs/zh/api_ref/24_other_APIs.md`, `25-03_Operation_APIs.md`; the compact runtime's
    /// `src/acl/aclrt_c/runtime/stream.c` implements them).
    StreamConfig,
    /// `aclrtDeviceTaskAbort` (CANN's fast recovery, `RT_FEATURE_DFX_FAST_RECOVER`):
    /// Ascend 950PR/DT, Atlas A3 and A2 only (hicann/runtime `src/runtime/config/*/
    /// dev_info_reg.cc`, `api_error.cc` `DeviceTaskAbort`).
    DeviceTaskAbort,
    /// `aclrtStreamStop`: chips with STARS and the task scheduler's `TS_FEATURE_MC2_ENHANCE`,
    /// Ascend 950PR/DT, Atlas A3 and A2 — the chips of [`Feature::DeviceTaskAbort`]
    /// (hicann/runtime `src/runtime/api/impl/api_impl.cc` `ApiImpl::StreamClear`; the API
    /// page of `docs/zh/api_ref/06_stream_management.md`).
    StreamStop,
    /// `aclrtGetHardwareSyncAddr` (`RT_FEATURE_KERNEL_INTER_CORE_SYNC_ADDR`): Atlas A2 and
    /// A3 only (hicann/runtime `src/runtime/config/910_B_93/dev_info_reg.cc` is the only
    /// configuration that has it).
    HardwareSyncAddr,
    /// Stream capture into model runtime instances (`aclmdlRICaptureBegin`, …): Ascend
    /// 950PR/DT, Atlas A3, A2 and inference products (Ascend310P); not Atlas 200I/500 A2
    /// (Ascend310B), Atlas training products (Ascend910) or IPV350 (CANN's
    /// `aclmdlRICaptureBegin` page, product support table; hicann/runtime
    /// `docs/zh/dev_guide/04-01_single_stream_capture.md`).
    ModelCapture,
    /// Models built on bound streams (`aclmdlRIBuildBegin`, `aclmdlRIBindStream`,
    /// `aclmdlRIEndTask`, `aclmdlRIBuildEnd`, `aclmdlRIUnbindStream`): every SoC but IPV350
    /// (hicann/runtime `docs/zh/api_ref/15_model_running_instance__management.md`, those
    /// pages' product support tables).
    ModelBuild,
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
/// The SoC's batch reset takes IPC notifies (imported, or exported by their owner) like any
/// other ([`IpcBatchReset::Reset`]): Ascend910B and Ascend910_93.
pub trait ResetsIpc: BatchReset {}
/// The SoC can share events between processes ([`Feature::IpcEvent`]).
pub trait IpcEvents: Notifies {}

mod sealed {
    pub trait Sealed {}
}

/// What [`Soc::with_atomic_pool`] calls: generic over the capacity `N` and word count `W` of
/// the SoC's [`AtomicIdPool`](crate::pool::AtomicIdPool).
#[cfg(target_has_atomic = "64")]
pub trait AtomicPoolVisitor {
    /// What the visit returns.
    type Out;
    /// Called once, with the pool type's parameters.
    fn visit<const N: usize, const W: usize>(self) -> Self::Out;
}

macro_rules! cap_impl {
    (yes, $cap:ident, $ty:ident) => {
        impl $cap for $ty {}
    };
    (no, $cap:ident, $ty:ident) => {};
}

macro_rules! ipc_reset_impl {
    (Reset, $ty:ident) => {
        impl ResetsIpc for $ty {}
    };
    (Refused, $ty:ident) => {};
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
        device_only: $dev:ident, cnt_notify: $cnt:ident,
        ipc_batch_reset: $ibr:ident, wait_max_timeout: $wmt:ident,
        chips: [$($chip:literal => $cores:expr),+ $(,)?];
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
                    ipc_batch_reset: IpcBatchReset::$ibr,
                    wait_max_timeout: MaxWaitTimeout::$wmt,
                }, )* }
            }

            /// The exact chip names of the family, as `aclrtGetSocName` returns them; the
            /// first is the one a configuration naming only the family gets.
            pub const fn chip_names(self) -> &'static [&'static str] {
                match self { $( Soc::$ty => &[$($chip),+], )* }
            }

            /// The compute cores of each chip of [`chip_names`](Self::chip_names), in the
            /// same order (`None`: not known).
            const fn chip_cores(self) -> &'static [Option<Cores>] {
                match self { $( Soc::$ty => const { &[$($cores),+] }, )* }
            }

            /// [`chip_names`](Self::chip_names) as C strings (static storage).
            const fn chip_c_names(self) -> &'static [&'static core::ffi::CStr] {
                match self { $( Soc::$ty => &[$( const {
                    match core::ffi::CStr::from_bytes_with_nul(concat!($chip, "\0").as_bytes()) {
                        Ok(c) => c,
                        Err(_) => panic!("a chip name with a NUL in it"),
                    }
                } ),+], )* }
            }
        }

        #[cfg(target_has_atomic = "64")]
        impl Soc {
            /// Calls `v` with the shared-memory id pool type of this SoC
            /// ([`SocType::AtomicNotifyPool`], `AtomicIdPool<N, W>` with `N` its
            /// [`max_notifies`](Self::max_notifies)): how code that learns the SoC at run time
            /// (a simulator's shared file) uses the pool the table gives each SoC, rather than
            /// a list of capacities of its own.
            pub fn with_atomic_pool<V: AtomicPoolVisitor>(self, v: V) -> V::Out {
                match self { $(
                    Soc::$ty => v.visit::<$max, { crate::pool::words($max) }>(),
                )* }
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
            ipc_reset_impl!($ibr, $ty);
        )*
    };
}

// The chip names are those of CANN's platform configurations (hicann/runtime
// `src/platform/platform_config/*.ini`, `cann-dev/*.ini`) and of the runtime's own deduction
// (`src/runtime/core/src/runtime.cc`, `InitSocTypeFrom910BVersion` and its neighbours). The old
// Ascend910 family's "Ascend910B" chip is left out: here that name means the Ascend910B family.
// Each chip's cores are the `[SoCInfo]` counts of its configuration there ([`Cores`]).
soc_table! {
    /// Ascend 950PR.
    Ascend950PR = "Ascend950PR", "Ascend 950PR", max: 65535,
        notify: yes, ipc: yes, batch_reset: yes, inter_server: no, device_only: yes, cnt_notify: yes,
        ipc_batch_reset: Refused, wait_max_timeout: Forever,
        chips: [
            "Ascend950PR_9599" => Cores::split(36, 72, 6, 128 * MIB),
            "Ascend950PR_9589" => Cores::split(32, 64, 6, 128 * MIB),
            "Ascend950PR_9579" => Cores::split(28, 56, 7, 128 * MIB),
            "Ascend950PR_958b" => Cores::split(32, 64, 7, 112 * MIB),
            "Ascend950PR_957b" => Cores::split(28, 56, 5, 112 * MIB),
            "Ascend950PR_957bx" => Cores::split(28, 56, 5, 112 * MIB),
            "Ascend950PR_957c" => Cores::split(28, 56, 5, 112 * MIB),
            "Ascend950PR_957d" => Cores::split(28, 56, 5, 96 * MIB),
            "Ascend950PR_950z" => Cores::split(4, 8, 5, 16 * MIB),
        ];
    /// Ascend 950DT (no IPC).
    Ascend950DT = "Ascend950DT", "Ascend 950DT", max: 65535,
        notify: yes, ipc: no, batch_reset: yes, inter_server: no, device_only: yes, cnt_notify: yes,
        ipc_batch_reset: Refused, wait_max_timeout: Forever,
        chips: [
            "Ascend950DT_9591" => Cores::split(36, 72, 6, 128 * MIB),
            "Ascend950DT_9592" => Cores::split(36, 72, 6, 128 * MIB),
            "Ascend950DT_9595" => Cores::split(36, 72, 6, 128 * MIB),
            "Ascend950DT_9596" => Cores::split(36, 72, 6, 128 * MIB),
            "Ascend950DT_9581" => Cores::split(32, 64, 6, 128 * MIB),
            "Ascend950DT_9582" => Cores::split(32, 64, 6, 128 * MIB),
            "Ascend950DT_9582x" => Cores::split(32, 64, 6, 128 * MIB),
            "Ascend950DT_9583" => Cores::split(32, 64, 7, 112 * MIB),
            "Ascend950DT_9584" => Cores::split(32, 64, 7, 112 * MIB),
            "Ascend950DT_9585" => Cores::split(32, 64, 6, 128 * MIB),
            "Ascend950DT_9586" => Cores::split(32, 64, 6, 128 * MIB),
            "Ascend950DT_9587" => Cores::split(32, 64, 7, 112 * MIB),
            "Ascend950DT_9588" => Cores::split(32, 64, 7, 112 * MIB),
            "Ascend950DT_9571" => Cores::split(28, 56, 7, 128 * MIB),
            "Ascend950DT_9572" => Cores::split(28, 56, 7, 128 * MIB),
            "Ascend950DT_9573" => Cores::split(28, 56, 5, 112 * MIB),
            "Ascend950DT_9574" => Cores::split(28, 56, 5, 112 * MIB),
            "Ascend950DT_9575" => Cores::split(28, 56, 7, 128 * MIB),
            "Ascend950DT_9576" => Cores::split(28, 56, 7, 128 * MIB),
            "Ascend950DT_9577" => Cores::split(28, 56, 5, 112 * MIB),
            "Ascend950DT_9578" => Cores::split(28, 56, 5, 112 * MIB),
            "Ascend950DT_95A1" => Cores::split(36, 72, 6, 128 * MIB),
            "Ascend950DT_95A2" => Cores::split(36, 72, 6, 128 * MIB),
            "Ascend950DT_950x" => Cores::split(8, 16, 5, 32 * MIB),
            "Ascend950DT_950y" => Cores::split(8, 16, 5, 32 * MIB),
        ];
    /// Atlas A3 training/inference (SuperPod: inter-server whitelists).
    Ascend910_93 = "Ascend910_93", "Atlas A3 training/inference", max: 8192,
        notify: yes, ipc: yes, batch_reset: yes, inter_server: yes, device_only: yes, cnt_notify: no,
        ipc_batch_reset: Reset, wait_max_timeout: Forever,
        chips: [
            "Ascend910_9391" => Cores::split(24, 48, 6, 192 * MIB),
            "Ascend910_9392" => Cores::split(24, 48, 6, 192 * MIB),
            "Ascend910_9381" => Cores::split(24, 48, 6, 192 * MIB),
            "Ascend910_9382" => Cores::split(24, 48, 6, 192 * MIB),
            "Ascend910_9372" => Cores::split(20, 40, 6, 192 * MIB),
            "Ascend910_9362" => Cores::split(20, 40, 6, 168 * MIB),
            "Ascend910_9363" => Cores::split(20, 40, 6, 168 * MIB),
        ];
    /// Atlas A2 training/inference (B1–B4).
    Ascend910B = "Ascend910B", "Atlas A2 training/inference", max: 8192,
        notify: yes, ipc: yes, batch_reset: yes, inter_server: no, device_only: yes, cnt_notify: no,
        ipc_batch_reset: Reset, wait_max_timeout: Forever,
        chips: [
            "Ascend910B1" => Cores::split(24, 48, 6, 192 * MIB),
            "Ascend910B2" => Cores::split(24, 48, 6, 192 * MIB),
            "Ascend910B2C" => Cores::split(24, 48, 6, 192 * MIB),
            "Ascend910B3" => Cores::split(20, 40, 6, 192 * MIB),
            "Ascend910B4" => Cores::split(20, 40, 6, 96 * MIB),
            "Ascend910B4-1" => Cores::split(20, 40, 6, 168 * MIB),
        ];
    /// Atlas 200I/500 A2 inference.
    Ascend310B = "Ascend310B", "Atlas 200I/500 A2 inference", max: 2048,
        notify: yes, ipc: no, batch_reset: no, inter_server: no, device_only: no, cnt_notify: no,
        ipc_batch_reset: Refused, wait_max_timeout: Forever,
        chips: [
            "Ascend310B1" => Cores::split(1, 1, 4, 4 * MIB),
            "Ascend310B2" => Cores::split(1, 1, 4, 4 * MIB),
            "Ascend310B3" => Cores::split(1, 1, 4, 4 * MIB),
            "Ascend310B4" => Cores::split(1, 1, 4, 4 * MIB),
        ];
    /// Atlas inference series.
    Ascend310P = "Ascend310P", "Atlas inference series", max: 1024,
        notify: yes, ipc: yes, batch_reset: no, inter_server: no, device_only: yes, cnt_notify: no,
        ipc_batch_reset: Refused, wait_max_timeout: OpWaitTimeout,
        chips: [
            "Ascend310P3" => Cores::unsplit(8, 7, 7, 16 * MIB),
            "Ascend310P1" => Cores::unsplit(10, 8, 8, 16 * MIB),
            "Ascend310P5" => Cores::unsplit(8, 7, 8, 16 * MIB),
            "Ascend310P7" => Cores::unsplit(8, 7, 8, 16 * MIB),
        ];
    /// Atlas training series.
    Ascend910 = "Ascend910", "Atlas training series", max: 1024,
        notify: yes, ipc: yes, batch_reset: no, inter_server: no, device_only: no, cnt_notify: no,
        ipc_batch_reset: Refused, wait_max_timeout: Forever,
        chips: [
            "Ascend910A" => Cores::unsplit(32, 0, 4, 32 * MIB),
            "Ascend910ProA" => Cores::unsplit(32, 0, 4, 32 * MIB),
            "Ascend910PremiumA" => Cores::unsplit(32, 0, 4, 32 * MIB),
            "Ascend910ProB" => Cores::unsplit(30, 0, 4, 32 * MIB),
        ];
    /// IPV350: every notify call is `FeatureNotSupport`.
    IPV350 = "IPV350", "IPV350", max: 0,
        notify: no, ipc: no, batch_reset: no, inter_server: no, device_only: no, cnt_notify: no,
        ipc_batch_reset: Refused, wait_max_timeout: Forever,
        chips: [
            "IPV350" => None,
        ];
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
impl ResetsIpc for AnySoc {}
impl IpcEvents for AnySoc {}
impl IpcEvents for Ascend950PR {}
impl IpcEvents for Ascend910_93 {}
impl IpcEvents for Ascend910B {}

impl Soc {
    /// Parses a family name, or a chip name `aclrtGetSocName` returns (its family). Anything
    /// else is `ParamInvalid`.
    pub fn from_name(name: &str) -> Result<Soc> {
        Chip::from_name(name).map(Chip::soc)
    }

    /// The chip a configuration naming only the family stands for (its first chip name).
    pub const fn default_chip(self) -> Chip {
        Chip {
            soc: self,
            index: 0,
        }
    }

    /// What `UINT32_MAX`-style [`Timeout::ProcessDefault`](crate::Timeout::ProcessDefault)
    /// means for a wait-and-reset on this SoC, given the `aclrtSetOpWaitTimeout` value.
    pub const fn resolve_wait(self, timeout: crate::Timeout, op_wait_secs: u32) -> crate::Timeout {
        match self.caps().wait_max_timeout {
            MaxWaitTimeout::Forever => timeout.resolve(0),
            MaxWaitTimeout::OpWaitTimeout => timeout.resolve(op_wait_secs),
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
            Feature::PeerAccess => !matches!(self, Soc::Ascend310B | Soc::IPV350),
            Feature::MemPool => matches!(self, Soc::Ascend910B),
            Feature::HostFuncThread | Feature::StreamConfig => matches!(self, Soc::IPV350),
            Feature::DeviceTaskAbort | Feature::StreamStop => matches!(
                self,
                Soc::Ascend950PR | Soc::Ascend950DT | Soc::Ascend910_93 | Soc::Ascend910B
            ),
            Feature::HardwareSyncAddr => matches!(self, Soc::Ascend910_93 | Soc::Ascend910B),
            Feature::ModelBuild => !matches!(self, Soc::IPV350),
            Feature::ModelCapture => matches!(
                self,
                Soc::Ascend950PR
                    | Soc::Ascend950DT
                    | Soc::Ascend910_93
                    | Soc::Ascend910B
                    | Soc::Ascend310P
            ),
        }
    }

    /// Whether the chips' platform configuration says `support_inf_nan=1` and
    /// `support_bf16=1` (hicann/runtime `src/platform/platform_config/*.ini`: the Ascend910B
    /// chips, Ascend910_93 and the 950 family; no other chip of the table has the keys):
    /// `aclGetCannAttribute`'s `INF_NAN` and `BF16`.
    pub const fn supports_inf_nan_and_bf16(self) -> bool {
        matches!(
            self,
            Soc::Ascend910B | Soc::Ascend910_93 | Soc::Ascend950PR | Soc::Ascend950DT
        )
    }

    /// Whether CANN's runtime has `RT_FEATURE_OVERFLOW_MODE` on the chip (hicann/runtime
    /// `src/runtime/config/910_B_93`, `950`, `dev_info_reg.cc`), so that a process's
    /// saturation mode starts as `ACL_RT_OVERFLOW_MODE_INFNAN` (`Runtime::Init`).
    pub const fn starts_in_infnan_mode(self) -> bool {
        matches!(
            self,
            Soc::Ascend910B | Soc::Ascend910_93 | Soc::Ascend950PR | Soc::Ascend950DT
        )
    }

    /// Whether a copy between the memory of two devices (synchronous or queued) needs peer
    /// access enabled first (`aclrtDeviceEnablePeerAccess`, from the source's device to the
    /// destination's): CANN's constraint of `aclrtMemcpy` names the 950 family, Atlas A2,
    /// the training and the inference series (hicann/runtime
    /// `docs/zh/api_ref/11-03_memory_copy_and_set.md`), not Atlas A3; its guide asks the same
    /// before `aclrtMemcpyAsync` (`docs/zh/dev_guide/02-01_data_copy.md`); Ascend310B and
    /// IPV350 have no peer access at all.
    pub const fn copy_needs_peer_access(self) -> bool {
        matches!(
            self,
            Soc::Ascend950PR
                | Soc::Ascend950DT
                | Soc::Ascend910B
                | Soc::Ascend910
                | Soc::Ascend310P
        )
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

/// An exact chip: a family of the table and one of its chip names (what `aclrtGetSocName`
/// returns, e.g. `Ascend910B3` in the `Ascend910B` family).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Chip {
    soc: Soc,
    index: u8,
}

impl Chip {
    /// Parses a chip name, or a family name (its [`default_chip`](Soc::default_chip)).
    /// Anything else is `ParamInvalid`.
    pub fn from_name(name: &str) -> Result<Chip> {
        for &soc in Soc::ALL {
            if soc.name() == name {
                return Ok(soc.default_chip());
            }
        }
        for &soc in Soc::ALL {
            if let Some(i) = soc.chip_names().iter().position(|c| *c == name) {
                // The longest list has 25 names.
                let index = u8::try_from(i).map_err(|_| Error::ParamInvalid)?;
                return Ok(Chip { soc, index });
            }
        }
        Err(Error::ParamInvalid)
    }

    /// The family.
    pub const fn soc(self) -> Soc {
        self.soc
    }

    /// The chip name.
    pub const fn name(self) -> &'static str {
        self.soc.chip_names()[self.index as usize]
    }

    /// [`name`](Self::name) as a C string, for the C ABI (static storage).
    pub const fn c_name(self) -> &'static core::ffi::CStr {
        self.soc.chip_c_names()[self.index as usize]
    }

    /// The chip's compute cores (`None` for a chip CANN publishes no configuration of:
    /// IPV350).
    pub const fn cores(self) -> Option<Cores> {
        self.soc.chip_cores()[self.index as usize]
    }
}

impl core::fmt::Display for Chip {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
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

    /// `Feature::ALL` is in declaration order (the macro that declares both makes it
    /// complete).
    #[test]
    fn feature_all_is_in_declaration_order() {
        for (i, &f) in Feature::ALL.iter().enumerate() {
            assert_eq!(f as usize, i, "{f:?}");
        }
    }

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

    /// The cores of a few chips, as their CANN platform configurations count them; every
    /// chip but IPV350 (which has none) has a count.
    #[test]
    fn chips_carry_their_configured_cores() {
        let cores = |name| Chip::from_name(name).unwrap().cores();
        let split = |cube, vector, ai_cpu, l2_mib: u64| {
            Some(Cores {
                ai_core: cube,
                cube_core: Some(cube),
                vector_core: vector,
                ai_cpu,
                l2_size: l2_mib << 20,
            })
        };
        assert_eq!(cores("Ascend910B1"), split(24, 48, 6, 192));
        assert_eq!(cores("Ascend910B3"), split(20, 40, 6, 192));
        assert_eq!(cores("Ascend910B4"), split(20, 40, 6, 96));
        assert_eq!(cores("Ascend910_9362"), split(20, 40, 6, 168));
        assert_eq!(cores("Ascend310B4"), split(1, 1, 4, 4));
        assert_eq!(cores("Ascend950PR_950z"), split(4, 8, 5, 16));
        assert_eq!(cores("Ascend950DT_95A2"), split(36, 72, 6, 128));
        let p1 = cores("Ascend310P1").unwrap();
        assert_eq!(
            (p1.ai_core, p1.cube_core, p1.vector_core, p1.ai_cpu),
            (10, None, 8, 8)
        );
        let a = cores("Ascend910A").unwrap();
        assert_eq!(
            (a.ai_core, a.cube_core, a.vector_core, a.ai_cpu),
            (32, None, 0, 4)
        );
        assert_eq!((p1.l2_size, a.l2_size), (16 << 20, 32 << 20));
        assert_eq!(cores("IPV350"), None);
        for &soc in Soc::ALL {
            assert_eq!(soc.chip_cores().len(), soc.chip_names().len(), "{soc}");
            for (name, c) in soc.chip_names().iter().zip(soc.chip_cores()) {
                assert_eq!(c.is_none(), soc == Soc::IPV350, "{name}");
            }
        }
    }

    #[test]
    fn chip_names_belong_to_one_family_and_round_trip() {
        let mut n = 0;
        for &s in Soc::ALL {
            assert_eq!(Chip::from_name(s.name()), Ok(s.default_chip()));
            assert_eq!(s.default_chip().name(), s.chip_names()[0]);
            for name in s.chip_names() {
                let c = Chip::from_name(name).unwrap();
                assert_eq!((c.soc(), c.name()), (s, *name));
                assert_eq!(c.c_name().to_str(), Ok(*name));
                n += 1;
            }
        }
        // Written out: the chips CANN's runtime names (runtime.cc), and the defaults.
        let chip = |n: &str| Chip::from_name(n).map(|c| (c.soc(), c.name()));
        assert_eq!(chip("Ascend910B2C"), Ok((Soc::Ascend910B, "Ascend910B2C")));
        assert_eq!(
            chip("Ascend910B4-1"),
            Ok((Soc::Ascend910B, "Ascend910B4-1"))
        );
        assert_eq!(
            chip("Ascend910_9362"),
            Ok((Soc::Ascend910_93, "Ascend910_9362"))
        );
        assert_eq!(chip("Ascend310P7"), Ok((Soc::Ascend310P, "Ascend310P7")));
        assert_eq!(chip("Ascend910ProB"), Ok((Soc::Ascend910, "Ascend910ProB")));
        assert_eq!(chip("Ascend910B"), Ok((Soc::Ascend910B, "Ascend910B1")));
        assert_eq!(chip("Ascend310P"), Ok((Soc::Ascend310P, "Ascend310P3")));
        assert_eq!(
            chip("Ascend950PR"),
            Ok((Soc::Ascend950PR, "Ascend950PR_9599"))
        );
        assert_eq!(chip("Ascend910B5"), Err(Error::ParamInvalid));
        assert_eq!(n, 9 + 25 + 7 + 6 + 4 + 4 + 4 + 1);
    }

    #[test]
    fn wait_max_timeout_and_ipc_batch_reset_per_soc() {
        use crate::Timeout;
        let five = Timeout::from_c(5);
        for &s in Soc::ALL {
            let want = if s == Soc::Ascend310P {
                five
            } else {
                Timeout::Forever
            };
            assert_eq!(s.resolve_wait(Timeout::ProcessDefault, 5), want, "{s}");
            assert_eq!(s.resolve_wait(five, 9), five, "{s}");
        }
        let refused = |s: Soc| s.caps().ipc_batch_reset == IpcBatchReset::Refused;
        assert!(refused(Soc::Ascend950PR) && refused(Soc::Ascend950DT));
        assert!(!refused(Soc::Ascend910B) && !refused(Soc::Ascend910_93));
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

    /// Only IPV350 lets a thread of the program run a stream's host functions, and makes
    /// streams from configuration objects.
    #[test]
    fn host_function_threads_are_ipv350_only() {
        for &s in Soc::ALL {
            assert_eq!(s.has(Feature::HostFuncThread), s == Soc::IPV350, "{s}");
            assert_eq!(s.has(Feature::StreamConfig), s == Soc::IPV350, "{s}");
        }
    }

    /// CANN's product table of `aclmdlRICaptureBegin`, written out: Atlas 350 (950PR/DT), A3,
    /// A2 and inference products capture; 200I/500 A2 (310B), training products (910) and
    /// IPV350 do not.
    #[test]
    fn stream_capture_is_on_the_socs_cann_lists() {
        for &s in Soc::ALL {
            let listed = match s.name() {
                "Ascend950PR" | "Ascend950DT" | "Ascend910_93" | "Ascend310P" => true,
                n if n.starts_with("Ascend910B") => true,
                _ => false,
            };
            assert_eq!(s.has(Feature::ModelCapture), listed, "{s}");
        }
    }

    /// `aclrtStreamStop` on the chips its API page lists (Atlas A2/A3, Ascend 950);
    /// `aclrtGetHardwareSyncAddr` on the chips of `config/910_B_93` only.
    #[test]
    fn stream_stop_and_hardware_sync_are_on_their_chips() {
        for &s in Soc::ALL {
            let a2_a3 = s == Soc::Ascend910_93 || s.name().starts_with("Ascend910B");
            let a950 = matches!(s.name(), "Ascend950PR" | "Ascend950DT");
            assert_eq!(s.has(Feature::StreamStop), a2_a3 || a950, "{s}");
            assert_eq!(s.has(Feature::HardwareSyncAddr), a2_a3, "{s}");
        }
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

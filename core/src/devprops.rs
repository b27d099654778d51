//! The device properties CANN's runtime keeps per chip and the device queries answer from
//! (`DevProperties` and the feature lists of hicann/runtime `src/runtime/config/<chip>/
//! dev_info_reg.cc`, the `NpuArch` of `src/platform/platform_config/*.ini`), and the links
//! between the simulated devices of one server: the second view of the SoC table ([`Soc`]),
//! kept beside it so that every query reads one place.
//!
//! The configuration directories of hicann/runtime map to the table's families so:
//! `950` (`CHIP_DAVID`) Ascend950PR and Ascend950DT; `910_B_93` Ascend910B and Ascend910_93;
//! `mini_v3` Ascend310B; `dc` Ascend310P; `cloud` Ascend910. IPV350 runs CANN's compact
//! runtime, which has none of these queries (CANN's device and stream chapters list IPV350
//! as unsupported for each): every answer here is `None` or "not supported" for it.

use crate::soc::Soc;

/// How two devices are linked, as the driver's `TOPOLOGY_*` codes name them (hicann/runtime
/// `pkg_inc/driver/ascend_hal_base.h`). `aclrtGetDevicesTopo` answers [`bit`](Self::bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Topology {
    /// HCCS, Huawei's cache-coherent chip-to-chip link (`TOPOLOGY_HCCS`, 0).
    Hccs = 0,
    /// One PCIe switch (`TOPOLOGY_PIX`, 1).
    Pix = 1,
    /// Reserved by CANN (`TOPOLOGY_PIB`, 2).
    Pib = 2,
    /// Through the CPU's PCIe host bridge (`TOPOLOGY_PHB`, 3).
    Phb = 3,
    /// Across NUMA nodes, over the CPUs' SMP link (`TOPOLOGY_SYS`, 4).
    Sys = 4,
    /// The on-package link between the two dies of one chip (`TOPOLOGY_SIO`, 5).
    Sio = 5,
    /// Through an HCCS switch (`TOPOLOGY_HCCS_SW`, 6).
    HccsSw = 6,
    /// The Unified Bus (`TOPOLOGY_UB`, 7; the ACL header names no macro for its bit).
    Ub = 7,
}

impl Topology {
    /// What `aclrtGetDevicesTopo` writes: `1 << code` (hicann/runtime
    /// `src/runtime/api/api_c_device.cc`, `rtsGetPairDevicesInfo`), so HCCS is
    /// `ACL_RT_DEVS_TOPOLOGY_HCCS` (0x01) and HCCS_SW `ACL_RT_DEVS_TOPOLOGY_HCCS_SW` (0x40).
    pub const fn bit(self) -> u64 {
        1 << (self as u64)
    }

    /// Whether atomic operations between two devices so linked are supported: HCCS, SIO,
    /// HCCS_SW and UB (hicann/runtime `src/runtime/api/impl/api_impl.cc`,
    /// `CheckP2PAtomicSupport`).
    pub const fn carries_atomics(self) -> bool {
        matches!(
            self,
            Topology::Hccs | Topology::Sio | Topology::HccsSw | Topology::Ub
        )
    }
}

/// One past the largest `aclrtAtomicOperation` (`ACL_RT_ATOMIC_OPERATION_SIMD_SCALAR_EXCH`,
/// 44): CANN's runtime refuses a host query's operation outside `[0, 44]` and its tables have
/// this many entries (`RT_ATOMIC_OPERATION_MAX_VAL`).
pub const ATOMIC_OPERATIONS: u32 = 45;

// The `aclrtAtomicOperationCapability` bits.
const SIGNED: u32 = 1 << 0;
const UNSIGNED: u32 = 1 << 1;
const SCALAR8: u32 = 1 << 3;
const SCALAR16: u32 = 1 << 4;
const SCALAR32: u32 = 1 << 5;
const SCALAR64: u32 = 1 << 6;

/// The capability sets of hicann/runtime `src/runtime/config/950/dev_info_reg.cc`
/// (`RT_ATOMIC_CAPS_TYPE1` to `4`, `GetDavidAtomicCaps`: the same table for host and P2P).
const DAVID_INT: u32 = SIGNED | UNSIGNED | SCALAR32 | SCALAR64;
const DAVID_UINT: u32 = UNSIGNED | SCALAR32 | SCALAR64;
const DAVID_FLOAT: u32 = SCALAR16 | SCALAR32;
/// `RT_ATOMIC_CAPS_TYPE4` (950) and `RT_STARS_ATOMIC_DMA_CAPS` (`910_B_93`): the same bits.
const DMA: u32 = SIGNED | SCALAR8 | SCALAR16 | SCALAR32;

/// The 950 family's capabilities of atomic operation `op` (`GetDavidAtomicCaps`).
const fn david_atomic(op: u32) -> u32 {
    match op {
        // integer add, min, max; and, or, xor, exchange, CAS; SIMD scalar add, min, max
        0..=2 | 5..=9 | 40..=42 => DAVID_INT,
        // integer increment, decrement; SIMD scalar CAS, exchange
        3 | 4 | 43 | 44 => DAVID_UINT,
        // float add, min, max
        10..=12 => DAVID_FLOAT,
        // DMA add, min, max
        30..=32 => DMA,
        _ => 0,
    }
}

/// Atlas A2/A3's P2P capabilities (`910_B_93`, `GetStarsP2PAtomicCaps`): the DMA operations.
const fn stars_p2p_atomic(op: u32) -> u32 {
    match op {
        30..=32 => DMA,
        _ => 0,
    }
}

/// How a host reaches a device (`ACL_HOST_DEVICE_CONNECT_TYPE_*`), what
/// `ACL_DEV_ATTR_HD_CONNECT_TYPE` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HostLink {
    /// PCIe (0).
    Pcie = 0,
    /// HCCS (1).
    Hccs = 1,
    /// The Unified Bus (2).
    Ub = 2,
}

impl Soc {
    /// The chip's NPU architecture (`[version] NpuArch` of its platform configuration, the
    /// same for every chip of a family): 3510 for the 950 family, 2201 for Atlas A2 and A3,
    /// 3002 for Ascend310B, 2002 for Ascend310P, 1001 for Ascend910; `None` for IPV350, which
    /// has no configuration there. `ACL_DEV_ATTR_NPU_ARCH` and `aclrtCheckArchCompatibility`.
    pub const fn npu_arch(self) -> Option<u32> {
        match self {
            Soc::Ascend950PR | Soc::Ascend950DT => Some(3510),
            Soc::Ascend910_93 | Soc::Ascend910B => Some(2201),
            Soc::Ascend310B => Some(3002),
            Soc::Ascend310P => Some(2002),
            Soc::Ascend910 => Some(1001),
            Soc::IPV350 => None,
        }
    }

    /// Streams one device can have (`maxAllocStreamNum`): 65,535 on the 950 family, 32,768
    /// on Atlas A2/A3, 480 on Ascend310B, 992 on Ascend310P, 2,016 on Ascend910; `None` on
    /// IPV350. What `aclrtGetStreamAvailableNum` counts down from and `aclrtCreateStream`
    /// refuses beyond.
    pub const fn max_streams(self) -> Option<u32> {
        match self {
            Soc::Ascend950PR | Soc::Ascend950DT => Some(65535),
            Soc::Ascend910_93 | Soc::Ascend910B => Some(32768),
            Soc::Ascend310B => Some(480),
            Soc::Ascend310P => Some(992),
            Soc::Ascend910 => Some(2016),
            Soc::IPV350 => None,
        }
    }

    /// Whether the chip has CANN's device groups (`RT_FEATURE_DEVICE_GROUP`: of this table
    /// only `dc`, the Atlas inference series; CANN's group chapter lists the others as
    /// unsupported). `aclrtSetGroup` and its neighbours answer 207000 elsewhere.
    pub const fn has_device_groups(self) -> bool {
        matches!(self, Soc::Ascend310P)
    }

    /// How devices `a` and `b` of one simulated server are linked. The driver reads the real
    /// machine's links; the simulator models each family's usual server:
    /// - a device with itself: HCCS on every family (CANN's runtime turns the driver's
    ///   HCCS_SW for a device with itself into HCCS, `ApiImpl::GetPairDevicesInfo`);
    /// - Atlas A3 (Ascend910_93): the two dies of one chip (devices 2k and 2k+1) by SIO, the
    ///   other devices of the server through the HCCS switch;
    /// - Atlas A2 (Ascend910B): HCCS, the full mesh of an 8-device server;
    /// - the 950 family: the Unified Bus;
    /// - Atlas training series (Ascend910): HCCS within each group of four (0–3, 4–7) and
    ///   across the two groups the CPUs' SMP link (SYS);
    /// - Ascend310P and Ascend310B: PCIe cards behind one host bridge (PHB).
    ///
    /// IPV350 has no such query: `None`.
    pub const fn topology(self, a: u32, b: u32) -> Option<Topology> {
        if matches!(self, Soc::IPV350) {
            return None;
        }
        if a == b {
            return Some(Topology::Hccs);
        }
        Some(match self {
            Soc::Ascend910_93 if a / 2 == b / 2 => Topology::Sio,
            Soc::Ascend910_93 => Topology::HccsSw,
            Soc::Ascend910B => Topology::Hccs,
            Soc::Ascend950PR | Soc::Ascend950DT => Topology::Ub,
            Soc::Ascend910 if a / 4 == b / 4 => Topology::Hccs,
            Soc::Ascend910 => Topology::Sys,
            _ => Topology::Phb,
        })
    }

    /// How the host reaches the device: the Unified Bus on the 950 family (the only chips
    /// whose host atomics table is not empty, and which CANN's runtime supports only over
    /// UB, `CheckHostAtomicSupport`), PCIe elsewhere. `None` on IPV350.
    pub const fn host_link(self) -> Option<HostLink> {
        match self {
            Soc::Ascend950PR | Soc::Ascend950DT => Some(HostLink::Ub),
            Soc::IPV350 => None,
            _ => Some(HostLink::Pcie),
        }
    }

    /// The `aclrtAtomicOperationCapability` bits of atomic operation `op` between the host
    /// and a device (`hostAtomicCapabilities`, given only over UB): the 950 family's table,
    /// 0 elsewhere (every other chip's table is empty) and for an `op` no table names.
    pub const fn host_atomic(self, op: u32) -> u32 {
        match self.host_link() {
            Some(HostLink::Ub) => david_atomic(op),
            _ => 0,
        }
    }

    /// The capability bits of atomic operation `op` between two devices linked by `link`
    /// (`p2pAtomicCapabilities`, given only over [`Topology::carries_atomics`] links): the 950
    /// family's table, Atlas A2/A3's DMA operations, 0 elsewhere.
    pub const fn p2p_atomic(self, op: u32, link: Topology) -> u32 {
        if !link.carries_atomics() {
            return 0;
        }
        match self {
            Soc::Ascend950PR | Soc::Ascend950DT => david_atomic(op),
            Soc::Ascend910_93 | Soc::Ascend910B => stars_p2p_atomic(op),
            _ => 0,
        }
    }
}

/// Names CANN's platform configuration knows besides the chips of the SoC table, with their
/// `NpuArch`: the old Ascend910 family's `Ascend910B` chip (which the table's `Ascend910B`
/// family name would otherwise shadow), and chips the simulator does not model.
const OTHER_ARCHES: &[(&str, u32)] = &[
    ("Ascend910B", 1001),
    ("Ascend031", 3004),
    ("Ascend035", 3505),
    ("Ascend035A", 3505),
    ("Ascend035B", 3505),
    ("Ascend350_354f", 3510),
    ("Ascend350_355e", 3510),
    ("Ascend950DT_9581x", 3510),
    ("Kirin9030", 3113),
    ("KirinX90", 3003),
    ("KirinDev0000", 5101),
    ("KirinDev0001", 5161),
    ("KirinDev0002", 5165),
    ("KirinDev0003", 5163),
];

/// The `NpuArch` CANN's platform configuration gives chip `name` (hicann/runtime
/// `src/runtime/core/src/common/soc_info.cc`, `GetNpuArchByName`, reading
/// `src/platform/platform_config/{cann,cann-dev,kirin,kirin-dev}/<name>.ini`): an exact chip
/// name, never a family name; `None` for a name it has no configuration of.
pub fn npu_arch_by_name(name: &str) -> Option<u32> {
    if let Some(&(_, arch)) = OTHER_ARCHES.iter().find(|(n, _)| *n == name) {
        return Some(arch);
    }
    Soc::ALL
        .iter()
        .find(|soc| soc.chip_names().contains(&name))
        .and_then(|soc| soc.npu_arch())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arches_follow_the_platform_configuration() {
        assert_eq!(npu_arch_by_name("Ascend910B3"), Some(2201));
        assert_eq!(npu_arch_by_name("Ascend910_9391"), Some(2201));
        assert_eq!(npu_arch_by_name("Ascend950DT_9581x"), Some(3510));
        assert_eq!(npu_arch_by_name("Ascend310P3"), Some(2002));
        assert_eq!(npu_arch_by_name("Ascend910ProB"), Some(1001));
        // The old family's chip, not the table's family name.
        assert_eq!(npu_arch_by_name("Ascend910B"), Some(1001));
        assert_eq!(npu_arch_by_name("Ascend910_93"), None);
        assert_eq!(npu_arch_by_name("IPV350"), None);
        assert_eq!(npu_arch_by_name(""), None);
    }

    #[test]
    fn topology_per_family() {
        assert_eq!(Soc::Ascend910B.topology(0, 5), Some(Topology::Hccs));
        assert_eq!(Soc::Ascend910_93.topology(2, 3), Some(Topology::Sio));
        assert_eq!(Soc::Ascend910_93.topology(1, 2), Some(Topology::HccsSw));
        assert_eq!(Soc::Ascend910_93.topology(4, 4), Some(Topology::Hccs));
        assert_eq!(Soc::Ascend910.topology(1, 3), Some(Topology::Hccs));
        assert_eq!(Soc::Ascend910.topology(3, 4), Some(Topology::Sys));
        assert_eq!(Soc::Ascend310P.topology(0, 1), Some(Topology::Phb));
        assert_eq!(Soc::IPV350.topology(0, 0), None);
        assert_eq!(Topology::HccsSw.bit(), 0x40);
        assert_eq!(Topology::Ub.bit(), 0x80);
    }

    #[test]
    fn atomics_per_family() {
        // Host: the 950 family over UB only.
        assert_eq!(Soc::Ascend950PR.host_atomic(0), DAVID_INT);
        assert_eq!(Soc::Ascend950PR.host_atomic(13), 0);
        assert_eq!(Soc::Ascend910B.host_atomic(30), 0);
        // P2P: A2/A3 the DMA operations, over an atomic-carrying link.
        assert_eq!(Soc::Ascend910B.p2p_atomic(31, Topology::Hccs), DMA);
        assert_eq!(Soc::Ascend910B.p2p_atomic(0, Topology::Hccs), 0);
        assert_eq!(Soc::Ascend910_93.p2p_atomic(32, Topology::Phb), 0);
        assert_eq!(Soc::Ascend950DT.p2p_atomic(10, Topology::Ub), DAVID_FLOAT);
        assert_eq!(Soc::Ascend310P.p2p_atomic(30, Topology::Hccs), 0);
    }
}

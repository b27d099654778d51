//! Sharing a physical allocation ([`super::vmm`]) with processes of other servers of the
//! SuperPod by a FABRIC handle: `aclrtMemExportToShareableHandleV2`,
//! `aclrtMemSetPidToShareableHandleV2` and `aclrtMemImportFromShareableHandleV2` with
//! `ACL_MEM_SHARE_HANDLE_TYPE_FABRIC` (a 128-byte `aclrtMemFabricHandle`).
//!
//! CANN's contract (hicann/runtime `docs/zh/api_ref/11-04_virtual_memory_management.md`,
//! `src/runtime/api/impl/api_impl.cc` `ExportToShareableHandleV2` /
//! `ImportFromShareableHandleV2`, `src/runtime/driver/npu_driver_mem.cc`
//! `GetServerIdAndshareableHandle`): only Atlas A3 (Ascend910_93) shares physical memory
//! across servers; the FABRIC handle carries the exporter's server id and its shareable
//! handle; an import whose handle names the importer's own server is the same-server import
//! (peer access enabled as for the 64-bit handle), one of another server maps the
//! exporter's memory over the fabric. The rules of the 64-bit handle hold
//! ([`super::shareable`]): one shareable handle per physical allocation, a process does not
//! import its own export, the whitelist holds PIDs (`aclrtDeviceGetBareTgid`) unless the
//! export disabled PID validation.
//!
//! Here a FABRIC handle is the export's key ([`ExportKey`], which names server, device,
//! allocation, generation and a random nonce) and the exporter's page size and properties.
//! Of another host (cluster mode) the import is a **remote mapping** (`mem::remote`): the
//! owner keeps the bytes, and every copy or set through the importer's mapping is a request
//! of the cluster's own request path (etcd transactions the owner's record watch applies in
//! order with that importer's records; reads answered by the owner), so a write followed by a
//! notify record is in place when the owner's wait returns. The owner's free of memory such an
//! importer holds keeps the bytes until the importer lets go (`cluster::mem_hold`: closes it,
//! dies, or leaves the cluster). Its limits are the remote mapping's: copies device to device,
//! memory gone with its owner's death (107000 saying so: the owner process held the bytes).
//!
//! The PIDs of a FABRIC whitelist name no server (CANN's V2 takes bare PIDs): each admits
//! that PID on any device of any server of the SuperPod (an entry of sdid
//! `acl_notify_core::sdid::ANYWHERE`), without the
//! start-time check a same-server entry has (another server's processes are not visible here).

use acl_notify_core::Error;
use acl_notify_core::key::{ExportKey, KEY_LEN};
use acl_notify_core::sdid::ANYWHERE;
use acl_notify_core::whitelist::WhitelistEntry;

use super::reserved::PhysMem;
use super::vmm::{PHYS_MARK, invalid, not_live};
use crate::Sim;
use crate::error::SimError;
use crate::locks::lock;

/// Bytes of an `aclrtMemFabricHandle` (CANN's `uint8_t data[128]`).
pub const FABRIC_HANDLE_LEN: usize = 128;

/// The first bytes of every FABRIC handle of this simulator.
const MAGIC: &[u8; 8] = b"aclsimFB";

/// Where the export key's text starts, the policy word (little-endian) after it, and after
/// that a check word over everything before it ([`check`]); the rest is zeros.
const KEY_AT: usize = MAGIC.len();
const POLICY_AT: usize = KEY_AT + KEY_LEN;
const CHECK_AT: usize = POLICY_AT + 4;

/// FNV-1a (32 bits) of `b`: a damaged handle (a byte changed on the way) is told from one
/// this simulator made.
fn check(b: &[u8]) -> u32 {
    b.iter().fold(0x811c_9dc5_u32, |h, &x| {
        (h ^ u32::from(x)).wrapping_mul(0x0100_0193)
    })
}

/// A FABRIC handle's contents: the export's key and the exporter's policy word (page code
/// and properties, `PHYS_MARK` set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FabricHandle {
    key: ExportKey,
    policy: u32,
}

impl FabricHandle {
    /// The 128 bytes a C caller holds.
    pub fn to_bytes(&self) -> [u8; FABRIC_HANDLE_LEN] {
        let mut b = [0u8; FABRIC_HANDLE_LEN];
        b[..KEY_AT].copy_from_slice(MAGIC);
        b[KEY_AT..POLICY_AT].copy_from_slice(self.key.as_bytes());
        b[POLICY_AT..CHECK_AT].copy_from_slice(&self.policy.to_le_bytes());
        let c = check(&b[..CHECK_AT]);
        b[CHECK_AT..CHECK_AT + 4].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// The handle `b` holds, checked (they come from anywhere: another process, the wire).
    ///
    /// Errors: 107000 not a FABRIC handle of this simulator, or a damaged one.
    pub fn from_bytes(b: &[u8; FABRIC_HANDLE_LEN]) -> Result<FabricHandle, SimError> {
        let bad = |why: &str| invalid(format!("FABRIC shareable handle: {why}"));
        if &b[..KEY_AT] != MAGIC {
            return Err(bad("not one aclrtMemExportToShareableHandleV2 made (with \
                 ACL_MEM_SHARE_HANDLE_TYPE_FABRIC): its first bytes differ"));
        }
        let key = ExportKey::parse(&b[KEY_AT..POLICY_AT])
            .map_err(|_| bad("its key is damaged (its checksum or format does not hold)"))?;
        let word = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        let policy = word(POLICY_AT);
        if word(CHECK_AT) != check(&b[..CHECK_AT])
            || policy & PHYS_MARK == 0
            || b[CHECK_AT + 4..].iter().any(|&x| x != 0)
        {
            return Err(bad(
                "it is damaged (its check word or trailing bytes do not hold)",
            ));
        }
        Ok(FabricHandle { key, policy })
    }

    /// The server whose process exported it.
    pub fn server(&self) -> Option<u32> {
        self.key.fields().map(|k| u32::from(k.server))
    }
}

impl Sim {
    /// `aclrtMemExportToShareableHandleV2` with `ACL_MEM_SHARE_HANDLE_TYPE_FABRIC`: exports
    /// physical allocation `h` for processes of any server of the SuperPod (in cluster mode,
    /// published in the cluster's registry when it admits another host: `open`, or once
    /// [`vmm_share_pids_fabric`](Self::vmm_share_pids_fabric) whitelisted a PID).
    ///
    /// Errors: 207000 off Ascend910_93 (CANN shares across servers on Atlas A3 only); then as
    /// [`vmm_export`](Self::vmm_export) (107017 `h` not live; 107000 imported or exported
    /// already); 507022 the cluster unreachable.
    pub fn vmm_export_fabric(&self, h: PhysMem, open: bool) -> Result<FabricHandle, SimError> {
        self.require_ipc_memory_inter_server(
            "exporting physical memory across servers (ACL_MEM_SHARE_HANDLE_TYPE_FABRIC)",
        )?;
        self.vmm_export(h, open)?;
        let (addr, f) = {
            let st = lock(&self.vmm().state);
            let p = st.phys.get(&h).ok_or_else(|| not_live(h))?;
            let key = p
                .export
                .ok_or_else(|| SimError::new(Error::DrvInternalError, "exported without a key"))?;
            let policy = PHYS_MARK | p.page.code() << 8 | p.props;
            (p.addr, FabricHandle { key, policy })
        };
        // Made for other servers: in cluster mode published at once, so that an importer not
        // whitelisted yet is told so (207006) rather than that nothing is exported.
        let r = self
            .device_range(addr, 1, "physical memory")?
            .ok_or_else(|| SimError::new(Error::DrvInternalError, "physical memory lost"))?;
        self.mem_publish(&r.alloc.file, r.alloc.id, r.alloc.generation, true)?;
        Ok(f)
    }

    /// `aclrtMemSetPidToShareableHandleV2` with `ACL_MEM_SHARE_HANDLE_TYPE_FABRIC`: lets the
    /// processes `pids` names, on any server of the SuperPod, import the export `f` of this
    /// process.
    ///
    /// Errors: 207000 off Ascend910_93; 107000 no PIDs, a handle of another server or that
    /// names no live export; 207006 not its exporter, or exported without PID validation;
    /// 207012 more than 64 in all; 507022 the cluster unreachable.
    pub fn vmm_share_pids_fabric(&self, f: &FabricHandle, pids: &[i32]) -> Result<(), SimError> {
        self.require_ipc_memory_inter_server(
            "whitelisting importers of physical memory across servers",
        )?;
        if f.server() != Some(self.inner.server_id) {
            return Err(SimError::new(
                Error::NoPermission,
                format!(
                    "the FABRIC handle names memory of server {}: only its exporter (on that \
                     server) whitelists importers",
                    f.server().unwrap_or(0)
                ),
            ));
        }
        self.add_mem_whitelist(&f.key, pids.len(), || {
            pids.iter()
                .map(|&p| WhitelistEntry::new(ANYWHERE, p))
                .collect()
        })
    }

    /// `aclrtMemImportFromShareableHandleV2` with `ACL_MEM_SHARE_HANDLE_TYPE_FABRIC`: the
    /// physical allocation a process of any server exported as `f`, for use on `device`. Of
    /// this server (or without a cluster) the import is the 64-bit handle's; of another host
    /// a remote mapping (see the module doc).
    ///
    /// Errors: 207000 off Ascend910_93; 107001 no such device; 107000 a handle that names no
    /// live export (freed, its owner dead, or a handle of an earlier job), this process's own,
    /// or one imported already; 207006 not whitelisted; 507022 the cluster unreachable.
    pub fn vmm_import_fabric(&self, f: &FabricHandle, device: u32) -> Result<PhysMem, SimError> {
        self.require_ipc_memory_inter_server(
            "importing physical memory of another server (ACL_MEM_SHARE_HANDLE_TYPE_FABRIC)",
        )?;
        self.device_ok(device)?;
        self.vmm_import_key(&f.key, device, Some(f.policy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NamespaceGuard as Ns;
    use crate::mem::vmm::{PageSize, Props};
    use acl_notify_core::{BackendError as _, Soc};

    #[test]
    fn a_fabric_handle_round_trips_and_refuses_damage() {
        let (sim, _ns) = Ns::open_sim(
            format!("unit-fabric-{}", std::process::id()),
            Soc::Ascend910_93,
            2,
        )
        .unwrap();
        let g = PageSize::Huge.bytes() as usize;
        let a = sim
            .vmm_malloc_physical(0, g, PageSize::Huge, Props(3))
            .unwrap();
        let f = sim.vmm_export_fabric(a, false).unwrap();
        let b = f.to_bytes();
        assert_eq!(FabricHandle::from_bytes(&b).unwrap(), f);
        assert_eq!(f.server(), Some(0));
        // One shareable handle per allocation, whichever type.
        assert_eq!(
            sim.vmm_export_fabric(a, false).unwrap_err().kind(),
            Error::ParamInvalid
        );
        for at in [0, KEY_AT + 3, POLICY_AT, CHECK_AT, FABRIC_HANDLE_LEN - 1] {
            let mut d = b;
            d[at] ^= 0x40;
            assert_eq!(
                FabricHandle::from_bytes(&d).unwrap_err().kind(),
                Error::ParamInvalid,
                "byte {at} damaged"
            );
        }
        sim.vmm_share_pids_fabric(&f, &[12345]).unwrap();
        // Its own export is not imported by the same process.
        assert_eq!(
            sim.vmm_import_fabric(&f, 1).unwrap_err().kind(),
            Error::ParamInvalid
        );
        sim.vmm_free_physical(a).unwrap();
        // Freed: the handle names nothing any more.
        assert_eq!(
            sim.vmm_share_pids_fabric(&f, &[1]).unwrap_err().kind(),
            Error::ParamInvalid
        );
    }

    #[test]
    fn fabric_sharing_is_atlas_a3_only() {
        let (sim, _ns) = Ns::open_sim(
            format!("unit-fabric-soc-{}", std::process::id()),
            Soc::Ascend910B,
            1,
        )
        .unwrap();
        let a = sim
            .vmm_malloc_physical(0, 4096, PageSize::Normal, Props::default())
            .unwrap();
        assert_eq!(
            sim.vmm_export_fabric(a, true).unwrap_err().kind(),
            Error::FeatureNotSupport
        );
        sim.vmm_free_physical(a).unwrap();
    }
}

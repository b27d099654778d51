//! Sharing a physical allocation ([`super::vmm`]) with other processes of the server by a
//! 64-bit shareable handle: `aclrtMemExportToShareableHandle`,
//! `aclrtMemSetPidToShareableHandle`, `aclrtMemImportFromShareableHandle` (and their V2
//! forms with `ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT`).
//!
//! It is IPC memory of the whole allocation ([`super::ipc`]): the export is an IPC export
//! (with or without PID validation), the whitelist is the export's, and an import is an IPC
//! import, peer access enabled as CANN's `ApiImpl::ImportFromShareableHandle` does
//! (hicann/runtime `src/runtime/api/impl/api_impl.cc`). The handle packs enough of the
//! export's key to find it again ([`pack`]). CANN's rules (hicann/runtime
//! `docs/zh/api_ref/11-04_virtual_memory_management.md`): one shareable handle per physical
//! allocation, and a process does not import its own; shared memory is freed once every
//! process sharing it has freed its handle: the exporter's free, session end or death
//! withdraws the handle but leaves the importers their use until they free theirs.

use acl_notify_core::Error;
use acl_notify_core::key::{ExportKey, KeyFields};
use acl_notify_core::slot::ExportState;

use super::reserved::{PageSize, PhysMem, Physical};
use super::vmm::{PHYS_MARK, invalid, not_live};
use crate::Sim;
use crate::error::SimError;
use crate::locks::lock;

/// The shareable handle of the export `k` of slot `k.id`: device (8 bits), slot id (14),
/// the generation's low 18 bits, the nonce's low 24 bits. The importer finds the slot from
/// the first two and checks the rest against it, so a stale or guessed handle is refused
/// (a guess passes with odds of 2⁻⁴², and still needs the whitelist).
pub fn pack(k: &KeyFields) -> u64 {
    let nonce = u64::from(k.nonce[0]) | u64::from(k.nonce[1]) << 8 | u64::from(k.nonce[2]) << 16;
    u64::from(k.device) << 56
        | (u64::from(k.id) & 0x3fff) << 42
        | (u64::from(k.generation) & 0x3_ffff) << 24
        | nonce
}

/// [`pack`]'s fields back: (device, slot id, generation bits, nonce bits).
fn unpack(h: u64) -> (u32, u32, u32, u32) {
    (
        (h >> 56) as u32,
        (h >> 42) as u32 & 0x3fff,
        (h >> 24) as u32 & 0x3_ffff,
        h as u32 & 0xff_ffff,
    )
}

impl Sim {
    /// `aclrtMemExportToShareableHandle`: exports physical allocation `h` (whole) and returns
    /// its shareable handle; `open` (DISABLE_PID_VALIDATION) lets any process import it,
    /// else only those [`vmm_share_pids`](Self::vmm_share_pids) whitelists.
    ///
    /// Errors: 207000; 107017 `h` not live; 107000 imported memory (only its allocator
    /// exports), or exported already (one shareable handle per allocation).
    pub fn vmm_export(&self, h: PhysMem, open: bool) -> Result<u64, SimError> {
        self.require_vmm("exporting physical memory")?;
        let p = {
            let st = lock(&self.vmm().state);
            st.phys
                .get(&h)
                .filter(|p| p.handles > 0)
                .cloned()
                .ok_or_else(|| not_live(h))?
        };
        if p.imported.is_some() {
            return Err(invalid(
                "the physical memory was imported: only the process that allocated it exports it",
            ));
        }
        if p.export.is_some() {
            return Err(invalid(
                "the physical memory is exported already: a physical allocation has one \
                 shareable handle",
            ));
        }
        let size = p.size as usize;
        let key = self.export_range(p.addr, size, open)?;
        let fields = key
            .fields()
            .ok_or_else(|| SimError::new(Error::DrvInternalError, "export key without fields"))?;
        if let Some(p) = lock(&self.vmm().state).phys.get_mut(&h) {
            p.export = Some(key);
        }
        Ok(pack(&fields))
    }

    /// The export key shareable handle `handle` stands for, checked against its slot.
    fn vmm_key(&self, handle: u64) -> Result<ExportKey, SimError> {
        let (device, id, gen_bits, nonce_bits) = unpack(handle);
        let bad = |why: String| invalid(format!("shareable handle {handle:#x}: {why}"));
        if device >= self.inner.devices {
            return Err(bad(format!(
                "it names device {device}, which does not exist"
            )));
        }
        let file = self
            .mem_file(self.inner.server_id, device, false)?
            .ok_or_else(|| bad(format!("no memory was ever allocated on device {device}")))?;
        let slot = file
            .slot(id)
            .ok_or_else(|| bad(format!("allocation {id} is out of range")))?;
        let generation = slot.generation();
        let nonce = slot.nonce();
        let live_export = slot.is_live(generation)
            && matches!(
                slot.export_state(),
                Some(ExportState::Enforced | ExportState::Open)
            );
        let n = u32::from(nonce[0]) | u32::from(nonce[1]) << 8 | u32::from(nonce[2]) << 16;
        if !live_export || generation & 0x3_ffff != gen_bits || n != nonce_bits {
            return Err(bad(
                "it names no live export (its memory was freed, its owner died, or it was never \
                 a shareable handle)"
                    .into(),
            ));
        }
        Ok(ExportKey::encode(&KeyFields {
            server: self.inner.server_id as u16,
            device: device as u8,
            id: id as u16,
            generation,
            nonce,
        }))
    }

    /// `aclrtMemSetPidToShareableHandle`: whitelists processes of this server for the export
    /// `handle`.
    ///
    /// Errors: 207000; 107000 no PIDs, a handle that names no live export; 207006 not its
    /// exporter, or exported without PID validation; 207012 more than 64 in all.
    pub fn vmm_share_pids(&self, handle: u64, pids: &[i32]) -> Result<(), SimError> {
        self.require_vmm("whitelisting importers of physical memory")?;
        let key = self.vmm_key(handle)?;
        let me = self.same_server();
        self.add_mem_whitelist(&key, pids.len(), || {
            pids.iter().map(|&p| self.whitelist_entry(me, p)).collect()
        })
    }

    /// `aclrtMemImportFromShareableHandle`: the physical allocation another process exported
    /// as `handle`, for use on `device` (peer access enabled if it is another device).
    ///
    /// Errors: 207000; 107001 no such device; 107000 a handle that names no live export, this
    /// process's own export, or one imported already; 207006 not whitelisted; 207005 64
    /// importers already.
    pub fn vmm_import(&self, handle: u64, device: u32) -> Result<PhysMem, SimError> {
        self.require_vmm("importing physical memory")?;
        self.device_ok(device)?;
        let key = self.vmm_key(handle)?;
        self.vmm_import_key(&key, device, None)
    }

    /// The import of the export `key` of a physical allocation onto `device` (of a
    /// shareable handle, or of a FABRIC handle, [`super::fabric`]): an IPC import of the
    /// whole allocation (of another host's, in cluster mode, a remote mapping,
    /// [`super::remote`]), kept as a physical allocation of this process. `policy` is the
    /// exporter's policy word when the slot cannot be read here (another host's memory).
    pub(super) fn vmm_import_key(
        &self,
        key: &ExportKey,
        device: u32,
        policy: Option<u32>,
    ) -> Result<PhysMem, SimError> {
        let addr = self.import_key(device, key, true)?;
        let (size, policy) = match self.remote_len_at(addr) {
            Some(len) => (len, policy.unwrap_or(0)),
            None => self
                .mem()
                .allocs
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&addr)
                .map_or((0, 0), |a| {
                    let policy = a.file.slot(a.id).map_or(0, |s| s.flag_bits());
                    (a.size, policy)
                }),
        };
        // The exporter's page size and properties, from its slot (another process's shared
        // memory: a value that is not ours reads as normal pages, no properties).
        let (page, props) = match policy & PHYS_MARK {
            0 => (PageSize::Normal, 0),
            _ => (
                PageSize::from_code(policy >> 8 & 0xff).unwrap_or(PageSize::Normal),
                policy & 0xff,
            ),
        };
        Ok(self.vmm_insert(Physical {
            addr,
            size,
            device,
            page,
            props,
            maps: 0,
            handles: 1,
            export: None,
            imported: Some(*key),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NamespaceGuard as Ns;
    use crate::mem::vmm::Props;
    use acl_notify_core::{BackendError as _, Soc};

    #[test]
    fn shareable_handles_pack_and_unpack() {
        let k = KeyFields {
            server: 0,
            device: 7,
            id: 16383,
            generation: 0x1234_5678,
            nonce: [0xab, 0xcd, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13],
        };
        assert_eq!(
            unpack(pack(&k)),
            (7, 16383, 0x1234_5678 & 0x3_ffff, 0xefcdab)
        );
    }

    #[test]
    fn an_exported_allocation_needs_the_whitelist_and_not_the_same_process() {
        let (sim, _ns) = Ns::open_sim(
            format!("unit-share-{}", std::process::id()),
            Soc::Ascend910B,
            2,
        )
        .unwrap();
        let g = PageSize::Huge.bytes() as usize;
        let a = sim
            .vmm_malloc_physical(0, g, PageSize::Huge, Props::default())
            .unwrap();
        let h = sim.vmm_export(a, false).unwrap();
        assert_eq!(
            sim.vmm_export(a, false).unwrap_err().kind(),
            Error::ParamInvalid
        );
        // Its own export is not imported by the same process.
        assert_eq!(
            sim.vmm_import(h, 1).unwrap_err().kind(),
            Error::ParamInvalid
        );
        assert_eq!(
            sim.vmm_import(h ^ 1, 1).unwrap_err().kind(),
            Error::ParamInvalid
        );
        sim.vmm_share_pids(h, &[sim.inner.pid]).unwrap();
        sim.vmm_free_physical(a).unwrap();
        // Freed: the handle names nothing any more.
        assert_eq!(
            sim.vmm_share_pids(h, &[1]).unwrap_err().kind(),
            Error::ParamInvalid
        );
    }
}

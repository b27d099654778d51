//! IPC memory: sharing a device allocation with other processes by key, with the key format,
//! whitelists, inter-server entries and liveness rules of IPC notifies.
//!
//! - The owner exports a range of one of its allocations ([`Sim::ipc_mem_export`]): the key
//!   names the device's memory file, the allocation's slot and generation, and a fresh random
//!   nonce ([`ExportKey`], the notify key format). Exporting the same range again gives the
//!   same key.
//! - With PID validation (the default) only whitelisted processes may import
//!   ([`Sim::ipc_mem_set_pids`], [`Sim::ipc_mem_set_server_pids`]); the whitelist is the one
//!   notifies use (a process identity per entry, so a recycled PID is not let in), stored in
//!   the device-memory file.
//! - An importer ([`Sim::ipc_mem_import`]) maps the same bytes: its pointer is in its own
//!   device addresses, over the same file pages, and its copies are checked against the
//!   exported range. On another device than the owner's it needs peer access (the import flag
//!   or `aclrtDeviceEnablePeerAccess`), else 207006.
//! - `aclrtIpcMemClose` ([`Sim::ipc_mem_close`]) closes an importer's mapping; by the owner it
//!   withdraws the export (no further imports; CANN asks owners to close after every importer
//!   has). Memory an owner frees while others import it stays mapped for them until the last
//!   closes, but their copies and sets through it fail with 107000 naming the owner's free
//!   (SPEC §8); memory of an owner that died stays usable for them until they close.
//! - A process that dies is treated as having closed what it imported and freed what it
//!   owned: the next allocation that runs short on the device, or [`Sim::mem_gc`], reclaims.
//! - In cluster mode an owner publishes an export that admits another host (an inter-server
//!   entry, or no PID validation) to the cluster, and an import of another host's memory is
//!   a reservation whose copies go through etcd (`mem::remote`).
//!
//! Which SoCs have IPC memory follows CANN's documentation of these functions (hicann/runtime
//! `docs/zh/api_ref/11-07_IPC_memory_sharing.md`): all but Ascend310B and IPV350 (so
//! Ascend950DT has IPC memory though not IPC notifies); the inter-server whitelist and
//! `aclrtIpcMemSetAttr` only on Ascend910_93.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;

use acl_notify_core::key::{ExportKey, KeyFields};
use acl_notify_core::whitelist::MAX_ENTRIES as MAX_WHITELIST;
use acl_notify_core::{Error, ServerPid, Soc};

use super::file::{MemFile, owner_of};
use super::state::Gone;
use super::{Alloc, lock};
use crate::error::SimError;
use crate::{Sim, sys};
use acl_notify_core::slot::ExportState;

/// Whether `soc` shares device memory between processes (see the module docs).
pub fn has_ipc_memory(soc: Soc) -> bool {
    !matches!(soc, Soc::Ascend310B | Soc::IPV350)
}

/// Whether `soc` has `aclrtIpcMemImportPidInterServer` and `aclrtIpcMemSetAttr`.
pub fn has_ipc_memory_inter_server(soc: Soc) -> bool {
    soc == Soc::Ascend910_93
}

fn bad_key(why: impl std::fmt::Display) -> SimError {
    SimError::new(Error::ParamInvalid, format!("IPC memory key: {why}"))
}

/// An allocation a key names, checked against the file.
struct Named {
    file: Arc<MemFile>,
    id: u32,
    generation: u32,
    fields: KeyFields,
}

/// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_HCCS`: the last link value Ascend910_93 has.
const ACCESS_LINK_HCCS: u64 = 1;

/// `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_MULTI_PORT_PATH`: the last value `acl_rt.h` defines.
const ACCESS_LINK_MAX: u64 = 3;

/// `aclrtIpcMemSetAttr`'s argument checks, made before the SoC's (see
/// [`Sim::ipc_mem_set_attr`]): 107000 for a type other than `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK`
/// or a link value past the ones `acl_rt.h` defines.
pub fn check_attr_args(kind: u32, attr: u64) -> Result<(), SimError> {
    if kind != 0 {
        return Err(SimError::new(
            Error::ParamInvalid,
            format!("type {kind}: only ACL_RT_IPC_MEM_ATTR_ACCESS_LINK (0) exists"),
        ));
    }
    if attr > ACCESS_LINK_MAX {
        return Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "attr {attr}: expected an ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_* value: SIO (0), \
                 HCCS (1), UB_ONE_PORT_PATH (2) or UB_MULTI_PORT_PATH (3)"
            ),
        ));
    }
    Ok(())
}

impl Sim {
    /// 207000 unless this SoC has IPC memory.
    pub fn require_ipc_memory(&self, what: &str) -> Result<(), SimError> {
        self.require_soc(has_ipc_memory(self.inner.soc), what)
    }

    /// 207000 unless this SoC has inter-server IPC memory.
    pub fn require_ipc_memory_inter_server(&self, what: &str) -> Result<(), SimError> {
        self.require_soc(has_ipc_memory_inter_server(self.inner.soc), what)
    }

    /// The allocation `key` names, live and exported with this very key.
    fn named(&self, key: &ExportKey) -> Result<Named, SimError> {
        let k = key
            .fields()
            .ok_or_else(|| bad_key("not a key of this simulator"))?;
        let (server, device, id) = (u32::from(k.server), u32::from(k.device), u32::from(k.id));
        if server != self.inner.server_id
            && !self.inner.soc.has(acl_notify_core::Feature::InterServer)
        {
            return Err(bad_key(
                "it names another server, and this machine has only server 0",
            ));
        }
        if server != self.inner.server_id && self.inner.cluster.is_some() {
            // A host never maps another host's files (cluster mode): its memory is imported
            // through the cluster (`ipc_mem_import`), and only its owner does the rest.
            return Err(bad_key(format!(
                "it names memory of server {server}, another host of the SuperPod (cluster \
                 mode): only its owner there whitelists it, closes its export or sets its \
                 attributes"
            )));
        }
        if device >= self.inner.devices {
            return Err(bad_key(format!(
                "it names device {device}, which does not exist"
            )));
        }
        // A key of another simulated host not found here: say what joins the hosts.
        let hint = || self.other_host_hint(server);
        let file = self.mem_file(server, device, false)?.ok_or_else(|| {
            bad_key(format!(
                "no memory was ever allocated on device {device} of server {server}{}",
                hint()
            ))
        })?;
        let slot = file
            .slot(id)
            .ok_or_else(|| bad_key(format!("allocation id {id} is out of range")))?;
        let gone = |why: &str| {
            bad_key(format!(
                "allocation {id} on device {device} of server {server}: {why}{}",
                hint()
            ))
        };
        if !slot.is_live(k.generation) {
            return Err(gone(
                "it was freed (or its owner died) since the key was made",
            ));
        }
        if !exported(slot.export_state()) || slot.nonce() != k.nonce {
            return Err(gone(
                "the key does not match its export (closed by its owner, never exported, or a \
                 notify's key)",
            ));
        }
        Ok(Named {
            file,
            id,
            generation: k.generation,
            fields: k,
        })
    }

    /// `aclrtIpcMemGetExportKey`: exports `[ptr, ptr + size)` of an allocation of this
    /// process; `open` (DISABLE_PID_VALIDATION) lets anyone with the key import it. Exporting
    /// the same range the same way again returns the same key.
    ///
    /// Errors: 207000 no IPC memory on this SoC; 107000 size 0, a range that is not inside a
    /// live allocation of this process (the message says which), one already exported as
    /// another range or mode, or an imported range (only the owner exports).
    pub fn ipc_mem_export(
        &self,
        ptr: usize,
        size: usize,
        open: bool,
    ) -> Result<ExportKey, SimError> {
        self.mem_checked(|| {
            if size == 0 {
                return Err(SimError::new(Error::ParamInvalid, "size is 0"));
            }
            self.require_ipc_memory("exporting device memory (IPC)")?;
            self.export_range(ptr, size, open)
        })
    }

    /// [`ipc_mem_export`](Self::ipc_mem_export) once its SoC check passed (also the export of
    /// a physical allocation, [`super::vmm`]).
    pub(super) fn export_range(
        &self,
        ptr: usize,
        size: usize,
        open: bool,
    ) -> Result<ExportKey, SimError> {
        self.mem_checked(|| {
            let r = self
                .device_range(ptr, size, "exported range")?
                .ok_or_else(|| {
                    SimError::new(
                        Error::ParamInvalid,
                        format!("{ptr:#x} is not a device address of this process"),
                    )
                })?;
            self.refuse_pool_block(r.base, "an IPC export")?;
            if Self::is_managed(&r.alloc.view()) {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "{ptr:#x} is managed memory (aclrtMemAllocManaged, allocation {:#x}): \
                         IPC shares device memory, which managed memory is not",
                        r.base
                    ),
                ));
            }
            if r.alloc.imported {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "{ptr:#x} is in memory this process imported (allocation {:#x}); only the \
                         owner exports",
                        r.base
                    ),
                ));
            }
            let file = &r.alloc.file;
            let (id, generation) = (r.alloc.id, r.alloc.generation);
            let slot = file
                .slot(id)
                .ok_or_else(|| SimError::new(Error::DrvInternalError, "slot out of range"))?;
            let off_in = (ptr - r.base) as u64;
            let how = if open {
                ExportState::Open
            } else {
                ExportState::Enforced
            };
            let l = file.lock()?;
            if !slot.is_live(generation) {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    "the allocation was freed meanwhile",
                ));
            }
            let cur = slot.export_state();
            if cur != Some(ExportState::None) {
                let same = cur == Some(how)
                    && slot.sync.export_off.load(SeqCst) == off_in
                    && slot.sync.export_len.load(SeqCst) == size as u64;
                if !same {
                    return Err(SimError::new(
                        Error::ParamInvalid,
                        format!(
                            "allocation {:#x} is already exported as {} bytes at offset {} ({}); \
                             close that export (aclrtIpcMemClose) before exporting it otherwise",
                            r.base,
                            slot.sync.export_len.load(SeqCst),
                            slot.sync.export_off.load(SeqCst),
                            if cur == Some(ExportState::Open) {
                                "without PID validation"
                            } else {
                                "with PID validation"
                            }
                        ),
                    ));
                }
            } else {
                let nonce = sys::nonce16().map_err(|e| {
                    SimError::new(
                        Error::DrvInternalError,
                        format!("getrandom failed while exporting: {e}"),
                    )
                })?;
                // Under the file lock and live (checked above), so the export is ours to make.
                let won = slot.export_with(nonce, how, || {
                    if let Some(wl) = file.whitelist(id) {
                        wl.reset();
                    }
                    slot.sync.export_off.store(off_in, SeqCst);
                    slot.sync.export_len.store(size as u64, SeqCst);
                    Ok::<(), std::convert::Infallible>(())
                });
                if won != Ok(true) {
                    return Err(SimError::new(
                        Error::DrvInternalError,
                        format!(
                            "device-memory file {}: allocation {id} changed under the file lock",
                            file.path().display()
                        ),
                    ));
                }
            }
            drop(l);
            // Without PID validation anyone may import, on any host: in cluster mode, publish it.
            self.mem_publish(file, id, generation, open)?;
            Ok(ExportKey::encode(&KeyFields {
                server: file.server() as u16,
                device: file.device() as u8,
                id: id as u16,
                generation,
                nonce: slot.nonce(),
            }))
        })
    }

    /// `aclrtIpcMemSetImportPid`: whitelists processes of this server for the export `key`.
    ///
    /// Errors: 207000; 107000 no PIDs, a key that names no live export; 207006 the export has
    /// no PID validation, or this process is not its owner; 207012 more than 64 in total.
    pub fn ipc_mem_set_pids(&self, key: &ExportKey, pids: &[i32]) -> Result<(), SimError> {
        self.mem_checked(|| {
            self.require_ipc_memory("whitelisting importers of device memory (IPC)")?;
            let me = self.same_server();
            self.add_mem_whitelist(key, pids.len(), || {
                pids.iter().map(|&p| self.whitelist_entry(me, p)).collect()
            })
        })
    }

    /// `aclrtIpcMemImportPidInterServer`: whitelists processes of other servers (or this
    /// one) for the export `key`. Ascend910_93 only.
    pub fn ipc_mem_set_server_pids(
        &self,
        key: &ExportKey,
        entries: &[ServerPid],
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            self.require_ipc_memory_inter_server("inter-server whitelisting of device memory")?;
            for (i, e) in entries.iter().enumerate() {
                self.check_entry_sdid(i, e)?;
            }
            self.add_mem_whitelist(key, entries.len(), || {
                entries
                    .iter()
                    .map(|sp| self.whitelist_entry(sp.sdid, sp.pid))
                    .collect()
            })
        })
    }

    /// Adds the entries `entries` makes (`count` of them) to the whitelist of the export
    /// `key` (also of a shareable handle, [`super::vmm`]).
    pub(super) fn add_mem_whitelist(
        &self,
        key: &ExportKey,
        count: usize,
        entries: impl FnOnce() -> Vec<acl_notify_core::whitelist::WhitelistEntry>,
    ) -> Result<(), SimError> {
        if count == 0 {
            return Err(SimError::new(Error::ParamInvalid, "no PIDs given"));
        }
        if count > MAX_WHITELIST {
            return Err(SimError::new(
                Error::OverLimit,
                format!("{count} PIDs: a whitelist holds at most {MAX_WHITELIST}"),
            ));
        }
        let n = self.named(key)?;
        let slot = n
            .file
            .slot(n.id)
            .ok_or_else(|| SimError::new(Error::DrvInternalError, "slot out of range"))?;
        let what = format!("allocation {} on device {}", n.id, n.file.device());
        if owner_of(slot) != self.mem_identity() {
            return Err(SimError::new(
                Error::NoPermission,
                format!("cannot whitelist importers of {what}: only its owner can"),
            ));
        }
        if slot.export_state() == Some(ExportState::Open) {
            return Err(SimError::new(
                Error::NoPermission,
                format!(
                    "cannot whitelist importers of {what}: it was exported with \
                     DISABLE_PID_VALIDATION (anyone with the key may import)"
                ),
            ));
        }
        let wl = n
            .file
            .whitelist(n.id)
            .ok_or_else(|| SimError::new(Error::DrvInternalError, "whitelist out of range"))?;
        let over = |total: usize| {
            format!(
                "{what} already whitelists {total} processes; adding {count} more would pass the \
                 limit of {MAX_WHITELIST}"
            )
        };
        let entries = entries();
        let me = self.inner.server_id;
        let inter_server = entries
            .iter()
            .any(|e| acl_notify_core::sdid::server_of(e.sdid) != Some(me));
        let l = n.file.lock()?;
        let total = wl.read().map_or(0, |w| w.len());
        wl.update(|w| w.add_entries(&entries))
            .map_err(|seq| {
                SimError::new(
                    Error::DrvInternalError,
                    format!(
                        "the whitelist memory of {what} in {} is inconsistent (its sequence word \
                         is {seq}); it was left unchanged",
                        n.file.path().display()
                    ),
                )
            })?
            .map_err(|e| SimError::new(e, over(total)))?;
        drop(l);
        // An inter-server entry lets another host import it: in cluster mode, publish it.
        self.mem_publish(&n.file, n.id, n.generation, inter_server)
    }

    /// `aclrtIpcMemImportByKey`: maps the memory exported as `key` into this process, for
    /// use on `device`; returns its device pointer here. `enable_peer` is the import flag
    /// ENABLE_PEER_ACCESS.
    ///
    /// Errors: 207000; 107000 a key that names no live export, or one this process already
    /// imported; 207006 not whitelisted, or no peer access between the devices; 207005 the
    /// allocation has 64 importers already.
    pub fn ipc_mem_import(
        &self,
        device: u32,
        key: &ExportKey,
        enable_peer: bool,
    ) -> Result<usize, SimError> {
        self.mem_checked(|| {
            self.require_ipc_memory("importing device memory (IPC)")?;
            self.import_key(device, key, enable_peer)
        })
    }

    /// [`ipc_mem_import`](Self::ipc_mem_import) once its SoC check passed (also the import
    /// of a shareable handle, [`super::vmm`]).
    pub(super) fn import_key(
        &self,
        device: u32,
        key: &ExportKey,
        enable_peer: bool,
    ) -> Result<usize, SimError> {
        self.mem_checked(|| {
            self.device_ok(device)?;
            if let Some(addr) = lock(&self.mem().imports).get(key) {
                return Err(bad_key(format!(
                    "this process imported it already, at {addr:#x} (close it first)"
                )));
            }
            if let Some(c) = &self.inner.cluster
                && let Some(k) = key.fields()
                && u32::from(k.server) != self.inner.server_id
            {
                return self.ipc_mem_import_remote(c, device, key, &k);
            }
            let n = self.named(key)?;
            let slot = n
                .file
                .slot(n.id)
                .ok_or_else(|| SimError::new(Error::DrvInternalError, "slot out of range"))?;
            let (server, odev) = (u32::from(n.fields.server), n.file.device());
            let what = format!("allocation {} on device {odev} of server {server}", n.id);
            if owner_of(slot) == self.mem_identity() {
                return Err(bad_key(format!(
                    "{what} belongs to this process: use its own pointer (a process does not \
                     import its own export)"
                )));
            }
            if slot.export_state() == Some(ExportState::Enforced) {
                let wl = n
                    .file
                    .whitelist(n.id)
                    .and_then(|w| w.read())
                    .ok_or_else(|| {
                        SimError::new(
                            Error::DrvInternalError,
                            format!(
                                "the whitelist of {what} is unreadable (corrupt shared \
                                 memory)"
                            ),
                        )
                    })?;
                if let Some(why) = self.not_admitted(&wl, server, device) {
                    return Err(SimError::new(
                        Error::NoPermission,
                        format!("import of {what} refused: {why}"),
                    ));
                }
            }
            if server == self.inner.server_id {
                self.peer_access_for_import(device, odev, enable_peer)
                    .map_err(|why| {
                        SimError::new(Error::NoPermission, format!("import of {what} {why}"))
                    })?;
            }
            let me = self.mem_identity();
            let l = n.file.lock()?;
            // A dead owner counts as having freed what it owned (its importers keep their
            // mappings until they close), but only a survivor's reclaim says so in the file:
            // an import finding its owner dead reclaims first. Before, the memory of an owner
            // SIGKILLed after its last importer closed was imported again.
            let (pid, start) = owner_of(slot);
            if !sys::pid_alive(pid, start) {
                n.file.reclaim_dead(&l);
                if !slot.is_live(n.generation) {
                    return Err(bad_key(format!(
                        "{what}: its owner (pid {pid}) {}, which freed it",
                        crate::diag::Ended::of(pid).verb()
                    )));
                }
            }
            if !slot.is_live(n.generation) || slot.nonce() != n.fields.nonce {
                return Err(bad_key(format!(
                    "{what} was freed or unexported during the import"
                )));
            }
            n.file.join(&l, n.id, me)?;
            let (off, len) = (
                slot.sync.off.load(SeqCst) + slot.sync.export_off.load(SeqCst),
                slot.sync.export_len.load(SeqCst),
            );
            drop(l);
            let addr = n.file.addr(off);
            let a = Alloc {
                file: Arc::clone(&n.file),
                id: n.id,
                generation: n.generation,
                size: len,
                imported: true,
                used_on: device,
            };
            self.mem().count_import(&a, true);
            self.mem().insert(addr, a);
            lock(&self.mem().imports).insert(*key, addr);
            Ok(addr)
        })
    }

    /// `aclrtIpcMemClose`: an importer closes its mapping of `key` (its pointer stops being
    /// valid; copies through it are 107000 naming it freed); the owner withdraws the export
    /// (imports of the key fail from then on; what others imported stays theirs).
    ///
    /// Errors: 207000; 107000 a key this process neither imported nor exported.
    pub fn ipc_mem_close(&self, key: &ExportKey) -> Result<(), SimError> {
        self.mem_checked(|| {
            self.require_ipc_memory("closing IPC memory")?;
            if self.mem_close_remote(key) {
                return Ok(());
            }
            if self.close_import(key)? {
                return Ok(());
            }
            let n = self.named(key)?;
            let slot = n
                .file
                .slot(n.id)
                .ok_or_else(|| SimError::new(Error::DrvInternalError, "slot out of range"))?;
            if owner_of(slot) != self.mem_identity() {
                return Err(bad_key(format!(
                    "allocation {} on device {}: this process neither imported nor exported it",
                    n.id,
                    n.file.device()
                )));
            }
            let l = n.file.lock()?;
            slot.unexport();
            drop(l);
            self.mem_unpublish(&n.file, n.id, n.generation);
            Ok(())
        })
    }

    /// Closes this process's import of `key` (its pointer stops being valid); `false` if it
    /// has none (also the free of an imported physical allocation, [`super::vmm`]).
    pub(super) fn close_import(&self, key: &ExportKey) -> Result<bool, SimError> {
        let Some(addr) = lock(&self.mem().imports).remove(key) else {
            return Ok(false);
        };
        if let Some(a) = self.mem().remove(addr) {
            self.mem().count_import(&a, false);
            let l = a.file.lock()?;
            a.file.leave(&l, a.id, a.generation, self.mem_identity());
            drop(l);
            self.note_freed(addr, a.size, a.file.device(), Gone::Closed);
        }
        Ok(true)
    }

    /// `aclrtIpcMemSetAttr`: the die-to-die link of a live export of this process
    /// (Ascend910_93 only); SIO (0) and HCCS (1) are accepted and change nothing in the
    /// simulator.
    ///
    /// CANN's runtime refuses a type other than `ACL_RT_IPC_MEM_ATTR_ACCESS_LINK` (0) and a
    /// value of 4 or more before it looks at the SoC (`ApiErrorDecorator::IpcSetMemoryAttr`,
    /// hicann/runtime `src/runtime/api/impl/api_error.cc`): `acl_rt.h` defines the values 0
    /// to 3. The UB paths, 2 and 3, are Ascend950's (`rtIpcMemAttr` in
    /// `src/inc/runtime/rt_inner_mem.h`: SIO and HCCS "only support A3", the UB paths "only
    /// support A5"), and CANN's documentation gives `aclrtIpcMemSetAttr` to Ascend910_93
    /// alone, so here they are a link type the SoC does not have: 207021, the code the runtime
    /// answers when the driver has no such link (`NpuDriver::CheckIpcMapRoute`).
    ///
    /// Errors: 107000 a type other than 0, a value of 4 or more; 207000 off Ascend910_93;
    /// 107000 a key that names no live export of this process; 207021 a UB path (2, 3).
    pub fn ipc_mem_set_attr(&self, key: &ExportKey, kind: u32, attr: u64) -> Result<(), SimError> {
        self.mem_checked(|| {
            check_attr_args(kind, attr)?;
            self.require_ipc_memory_inter_server("setting IPC memory attributes")?;
            self.named(key)?;
            if attr > ACCESS_LINK_HCCS {
                return Err(SimError::new(
                    Error::LinkTypeNotSupported,
                    format!(
                        "attr {attr} (ACL_RT_IPC_MEM_ATTR_ACCESS_LINK_UB_{}_PORT_PATH) is a UB \
                         path, which Ascend950 has; {} links its dies by SIO (0) or HCCS (1)",
                        if attr == 2 { "ONE" } else { "MULTI" },
                        self.inner.soc.name()
                    ),
                ));
            }
            Ok(())
        })
    }

    /// An import onto `device` of what lives on `owner_device` (same server): with `enable`
    /// (the import flag ENABLE_PEER_ACCESS) peer access is enabled both ways; without it, it
    /// must have been. `Err` says why not (for the caller's 207006).
    fn peer_access_for_import(
        &self,
        device: u32,
        owner_device: u32,
        enable: bool,
    ) -> Result<(), String> {
        if owner_device == device {
            return Ok(());
        }
        let mut peers = lock(&self.inner.peers);
        let bit = |d: u32| 1u64 << d;
        if enable {
            peers[device as usize] |= bit(owner_device);
            peers[owner_device as usize] |= bit(device);
        } else if peers[device as usize] & bit(owner_device) == 0
            && peers[owner_device as usize] & bit(device) == 0
        {
            return Err(format!(
                "from device {owner_device} onto device {device}: no peer access between the \
                 devices (call aclrtDeviceEnablePeerAccess or import with the \
                 ENABLE_PEER_ACCESS flag)"
            ));
        }
        Ok(())
    }

    /// Reclaims the device memory of dead processes on every device of this server (the
    /// files that exist, mapped here or not: the inspector's gc has mapped none): frees what
    /// they owned (kept for live importers) and closes what they imported. Returns how many
    /// allocations were released.
    pub fn mem_gc(&self) -> u32 {
        for device in 0..self.inner.devices {
            // A file that cannot be mapped here (a limited address space) is left as it is.
            let _ = self.mem_file(self.inner.server_id, device, false);
        }
        self.mem().reclaim_dead(None)
    }
}

/// Whether an export state read from a slot is a published export (a corrupt value is not).
fn exported(state: Option<ExportState>) -> bool {
    matches!(state, Some(ExportState::Enforced | ExportState::Open))
}

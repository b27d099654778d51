//! IPC policy: who may import a notify. Whitelists (adding entries, matching this process),
//! the checks an import makes before and after it parses the key, and other servers' files.

use std::sync::Arc;

use acl_notify_core::table::{ExportState, NotifySlot};
use acl_notify_core::whitelist::{
    MAX_ENTRIES as MAX_WHITELIST, NOT_RUNNING, Whitelist, WhitelistEntry,
};
use acl_notify_core::{Error, ExportKey, Feature, Lifecycle, Op, RawNotify};

use crate::entries::NotifyEntry;
use crate::error::SimError;
use crate::error::err;
use crate::locks::lock;
use crate::shm::{OpenMode, ShmFile, SlotRef};
use crate::sim::Sim;
use crate::{diag, shm, sys};

/// The server of a whitelist entry that admits its PID on any server of the SuperPod: the
/// PIDs a FABRIC handle's whitelist names (`aclrtMemSetPidToShareableHandleV2` names no
/// server; [`crate::mem::fabric`]). Server ids are 0–65535, so no real server has it.
pub(crate) const ANY_SERVER: u32 = u32::MAX;

/// Refuses (107000) an inter-server whitelist entry a caller gives with [`ANY_SERVER`]'s id:
/// written as it came, that entry would admit its PID on every server of the SuperPod, not
/// the one the caller named (the notify's and the device memory's inter-server whitelists
/// both check through here, before any entry is added).
pub(crate) fn no_reserved_server(entries: &[acl_notify_core::ServerPid]) -> Result<(), SimError> {
    match entries.iter().position(|e| e.sdid == ANY_SERVER) {
        Some(i) => Err(err(
            Error::ParamInvalid,
            format!(
                "serverPids entry {i} names server {ANY_SERVER:#x} (pid {}): no server of a \
                 SuperPod has that id (the simulator keeps it to mean \"any server\")",
                entries[i].pid
            ),
        )),
        None => Ok(()),
    }
}

impl Sim {
    /// Test hook: adds a whitelist entry for `pid` on this server with an explicit start time
    /// and no pidfs identity (see `sys::ProcessIdentity`; to simulate a recycled PID, or the
    /// entry of an owner that cannot open pidfds). Same checks as
    /// [`set_import_pids`](NotifyResources::set_import_pids).
    #[doc(hidden)]
    pub fn set_import_pid_with_start_time(
        &self,
        notify: RawNotify,
        pid: i32,
        start_time: u64,
    ) -> Result<(), SimError> {
        let entry = || {
            vec![WhitelistEntry::with_start_time(
                self.inner.server_id,
                pid,
                start_time,
            )]
        };
        self.add_whitelist(notify, 1, entry, false)
    }

    /// The server file for a key's server: ours, or another opened read-only-ish (no create).
    pub(crate) fn server_file(&self, server: u32) -> Result<Arc<ShmFile>, SimError> {
        if server == self.inner.server_id {
            return Ok(Arc::clone(&self.inner.file));
        }
        if self.inner.cluster.is_some() {
            // A host never maps another host's files: what crosses hosts goes through etcd.
            return Err(err(
                Error::FeatureNotSupport,
                format!(
                    "server {server} is another host of the SuperPod (cluster mode): its shared \
                     memory is not reachable from server {}",
                    self.inner.server_id
                ),
            ));
        }
        let mut remote = lock(&self.inner.remote);
        if let Some(f) = remote.get(&server) {
            return Ok(Arc::clone(f));
        }
        let f = shm::open_shared(
            &self.inner.namespace,
            server,
            self.inner.soc,
            self.inner.devices,
            OpenMode::OpenExisting,
        )?
        .ok_or_else(|| {
            err(
                Error::InvalidHandle,
                format!(
                    "the key names server {server}, which has no shared state in namespace {} \
                     (no process of that server has run)",
                    self.inner.namespace
                ),
            )
        })?;
        remote.insert(server, Arc::clone(&f));
        Ok(f)
    }

    /// Whitelists `count` processes on `notify`, the entries made by `entries` only once the
    /// checks that need none of them have passed (SPEC §3 order: 107017; 107000 none given;
    /// 107000 not exported; 207006 exported without validation, or imported; 207012 more than
    /// 64 in total). So a count over 64 is refused without reading a single PID.
    pub(crate) fn add_whitelist(
        &self,
        notify: RawNotify,
        count: usize,
        entries: impl FnOnce() -> Vec<WhitelistEntry>,
        inter_server: bool,
    ) -> Result<(), SimError> {
        let v = self.notify(notify).map_err(|e| {
            self.remote_owner_only(notify, Op::SetImportPid)
                .unwrap_or(e)
        })?;
        if count == 0 {
            return Err(err(Error::ParamInvalid, "no PIDs given"));
        }
        let next = v.state.apply(Op::SetImportPid).map_err(|e| {
            let why = match v.state {
                Lifecycle::Created => "the notify has not been exported yet",
                Lifecycle::ExportedOpen => {
                    "the notify was exported with DISABLE_PID_VALIDATION (anyone with the key \
                     may import; there is no whitelist)"
                }
                Lifecycle::Imported => "only the owner can whitelist; this handle was imported",
                _ => "invalid state",
            };
            err(
                e,
                format!("cannot set import PIDs on notify {}: {why}", v.r.id()),
            )
        })?;
        let file = v.r.file();
        // Why adding `count` more fails, with the list's current length.
        let over = || {
            let total = file
                .read_whitelist(v.r.device(), v.r.id())
                .map_or(0, |w| w.len());
            format!(
                "notify {} already whitelists {total} processes; adding {count} more would pass \
                 the limit of {MAX_WHITELIST}{}",
                v.r.id(),
                if inter_server {
                    " (inter-server entry)"
                } else {
                    ""
                }
            )
        };
        if count > MAX_WHITELIST {
            return Err(err(Error::OverLimit, over()));
        }
        let entries = entries();
        // 507899 (whitelist memory inconsistent) as the file reports it; 207012 over the limit.
        // Read, add and write under the file's whitelist lock and a CAS of the list's sequence
        // word: a second writer (another process scribbling) makes this 507899, never a lost
        // entry. Racing the export of this handle, the handle still reads Created here and the
        // call is refused (107000): it comes before the export. Racing a destroy, this call's
        // view holds the notify, so the entry lands in the live notify, then goes with it.
        file.update_whitelist(v.r.device(), v.r.id(), |wl| wl.add_entries(&entries))?
            .map_err(|e| err(e, over()))?;
        self.set_state(notify, v.state, next);
        Ok(())
    }

    pub(crate) fn whitelist_entry(&self, sdid: u32, pid: i32) -> WhitelistEntry {
        // A process on this server: remember both kinds of its identity this process can take
        // (its start time, and a pidfs inode number where pidfds can be opened), so a later
        // process with the same PID is not let in, and an importer that can take only one kind
        // (under valgrind) is still checked by that one; a PID no process has now gets an entry
        // that matches nobody, ever. On another server (another PID namespace, another kernel)
        // the identity is unknown: any process with that PID there.
        if sdid != self.inner.server_id {
            return WhitelistEntry::new(sdid, pid);
        }
        match sys::process_identity(pid) {
            Some(id) => WhitelistEntry::with_identity(sdid, pid, id.start_time, id.pidfs),
            None => WhitelistEntry::with_start_time(sdid, pid, NOT_RUNNING),
        }
    }

    /// Why this process may not import what a process of `server` exported with whitelist
    /// `wl`; `None` if it may. Shared by notify and memory imports.
    pub(crate) fn not_admitted(&self, wl: &Whitelist, server: u32) -> Option<String> {
        let (me_srv, me_pid, me) = (self.inner.server_id, self.inner.pid, self.inner.identity);
        if wl.matches(me_srv, me_pid, me.start_time, me.pidfs)
            || wl.matches(ANY_SERVER, me_pid, me.start_time, me.pidfs)
        {
            return None;
        }
        let entry = wl.iter().find(|e| e.sdid == me_srv && e.pid == me_pid);
        Some(if entry.is_some_and(|e| e.start_time == NOT_RUNNING) {
            format!(
                "pid {me_pid} is whitelisted, but no process had that PID when it was \
                 whitelisted, so the entry admits nobody (this process got the PID later)"
            )
        } else if let Some(e) = entry.filter(|e| e.start_time == 0 && me.pidfs == 0) {
            format!(
                "pid {me_pid} is whitelisted as {}, which this process cannot check: it \
                 cannot open pidfds (under valgrind, whose memcheck does not know pidfd_open, \
                 or a seccomp filter) and the entry holds no start time",
                sys::describe_identity(e.start_time, e.identity)
            )
        } else if let Some(e) = entry {
            format!(
                "pid {me_pid} is whitelisted, but for another process (the PID was recycled): \
                 the entry names {}, this process is {}, so it may not import",
                sys::describe_identity(e.start_time, e.identity),
                sys::describe_identity(me.start_time, me.pidfs)
            )
        } else if server != me_srv && wl.iter().any(|e| e.pid == me_pid && e.sdid == server) {
            format!(
                "pid {me_pid} is whitelisted on server {server} only; an importer on server \
                 {me_srv} needs an inter-server entry (sdid {me_srv}, pid {me_pid})"
            )
        } else {
            format!("pid {me_pid} on server {me_srv} is not whitelisted")
        })
    }

    /// The checks an import makes before it looks at the key: 207000 SoC without IPC; 107001
    /// no such device. (The flags need none: an `ImportFlags` holds defined bits only.)
    pub(crate) fn import_checks(&self, device: u32) -> Result<(), SimError> {
        self.require(Feature::Ipc, "importing a notify (IPC)")?;
        self.inner.file.intact()?;
        self.inner.file.still_registered()?;
        self.device_ok(device)
    }

    /// An import once [`import_checks`](Self::import_checks) passed (the flags with it: none
    /// changes what the import does) and the key is parsed.
    pub(crate) fn import_parsed(
        &self,
        device: u32,
        key: &ExportKey,
    ) -> Result<RawNotify, SimError> {
        // `parse` accepts native keys only; a runtime key (`import_key` takes any) is not ours.
        let Some(k) = key.fields() else {
            return Err(err(Error::ParamInvalid, "not a simulator key".to_string()));
        };
        let (server, odev, id) = (u32::from(k.server), u32::from(k.device), u32::from(k.id));
        let stale = |why: &str| {
            err(
                Error::InvalidHandle,
                format!("key of notify {id} on device {odev} of server {server}: {why}"),
            )
        };
        if server != self.inner.server_id && !self.inner.soc.has(Feature::InterServer) {
            return Err(stale("this machine has only server 0"));
        }
        if let Some(c) = &self.inner.cluster
            && server != self.inner.server_id
        {
            return self.import_remote(c, device, &k);
        }
        let file = self.server_file(server)?;
        let slot: &NotifySlot = file
            .slot(odev, id)
            .ok_or_else(|| stale("no such device or id on this machine"))?;
        let live = |slot: &NotifySlot| {
            slot.state() == Some(acl_notify_core::table::SlotState::Live)
                && slot.generation() == k.generation
        };
        if !live(slot) {
            return Err(stale(
                "the notify no longer exists (destroyed by every holder)",
            ));
        }
        // A key is invalid once the owner destroyed the notify, while importers that opened
        // it before still hold it: CANN's owner destroy removes the shared id its key names
        // (hicann/runtime `src/runtime/core/src/notify/notify.cc`
        // `Notify::ReleaseDriverResourceOnDestroy`, `npu_driver.cc` `DestroyIpcNotify`:
        // `halShrIdDestroy`); an importer's destroy only closes its own.
        if let Some(pid) = slot.destroyed_by() {
            return Err(stale(&diag::destroyed_by_owner(pid)));
        }
        // An owner that died counts as having destroyed its handle (SPEC §2), so its death
        // invalidates the key as its destroy would, while importers still hold the notify.
        // (The owner of a slot in this machine's file runs on this machine.)
        let owner = slot.owner();
        if !crate::sys::pid_alive(owner.pid, owner.start_time) {
            return Err(stale(&diag::owner_died(owner.pid)));
        }
        // A holder that died counts as having destroyed its handle (SPEC §2), so a notify
        // whose every holder died no longer exists; its references are dropped only when a
        // survivor reclaims them (on open, when ids run out, `Sim::gc`), so an import finding
        // a dead holder reclaims first. Before, a notify whose owner was SIGKILLed after its
        // last importer let go was imported again.
        let mut bits = slot.holders();
        let mut dead = false;
        while bits != 0 && !dead {
            dead = !file.proc_alive(bits.trailing_zeros());
            bits &= bits - 1;
        }
        if dead {
            let _ = file.reclaim_dead();
            if !live(slot) {
                return Err(stale(
                    "the notify no longer exists (every holder destroyed it or died)",
                ));
            }
        }
        let export = slot.export_state();
        if matches!(export, Some(ExportState::None) | None) || slot.nonce() != k.nonce {
            return Err(stale(
                "the key does not match the notify's export (wrong nonce, or not exported)",
            ));
        }
        if export == Some(ExportState::Enforced) {
            let wl = file.read_whitelist(odev, id).ok_or_else(|| {
                err(
                    Error::DrvInternalError,
                    format!("whitelist of notify {id} is unreadable (corrupt shared memory)"),
                )
            })?;
            if let Some(why) = self.not_admitted(&wl, server) {
                return Err(err(
                    Error::NoPermission,
                    format!(
                        "import of notify {id} (device {odev}, server {server}) refused: {why}{}",
                        diag::notify_facts(&file, odev, id, slot)
                    ),
                ));
            }
        }
        if server == self.inner.server_id && odev != device {
            // The import enables peer access between the two devices itself, with the flag
            // or without it, as the real driver does when the physical devices differ
            // (hicann/runtime `src/runtime/driver/npu_driver.cc`, `EnableP2PNotify`).
            let mut peers = lock(&self.inner.peers);
            peers[device as usize] |= 1u64 << odev;
            peers[odev as usize] |= 1u64 << device;
        }
        // The checks above read the slot without holding it; the join re-checks the
        // generation once this process holds it (and lets go again if it was retired meanwhile),
        // so a destroy racing the import makes it fail (107017) rather than join a dead or
        // re-used notify. A whitelisting racing it either was seen above or comes after it
        // (207006); an export in progress reads as not exported (the key is not out yet).
        let r = SlotRef::join(&file, odev, id, k.generation)
            .ok_or_else(|| stale("the notify was destroyed during the import"))?;
        // The owner's destroy came before this process held the notify: the key was invalid
        // by then (this reference lets go).
        if let Some(pid) = slot.destroyed_by() {
            return Err(stale(&diag::destroyed_by_owner(pid)));
        }
        self.insert_notify(NotifyEntry::new(r, Lifecycle::Imported, device))
    }
}

#[cfg(test)]
mod tests {
    use acl_notify_core::{
        BackendError, CreateFlags, ExportFlags, NotifyResources, ServerPid, Soc,
    };

    use super::ANY_SERVER;
    use crate::NamespaceGuard;

    /// A caller's inter-server entry with the reserved server id is refused before anything is
    /// whitelisted, for notifies and device memory alike (it was written as given, and then
    /// admitted its PID on every server).
    #[test]
    fn an_inter_server_entry_with_the_reserved_server_id_is_refused() {
        let (sim, _ns) = NamespaceGuard::open_sim(
            format!("unit-ipc-policy-{}", std::process::id()),
            Soc::Ascend910_93,
            1,
        )
        .expect("opening a test Sim");
        let entries = [
            ServerPid { sdid: 1, pid: 4242 },
            ServerPid {
                sdid: ANY_SERVER,
                pid: 4343,
            },
        ];
        let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
        sim.export_key(h, ExportFlags::empty()).unwrap();
        let e = sim.set_import_server_pids(h, &entries).unwrap_err();
        assert_eq!(e.kind(), acl_notify_core::Error::ParamInvalid, "{e}");
        assert!(e.to_string().contains("serverPids entry 1"), "{e}");
        // Nothing of the call was added: entry 0 alone is still accepted.
        sim.set_import_server_pids(h, &entries[..1]).unwrap();
        let a = sim.malloc(0, 4096, 0).unwrap();
        let k = sim.ipc_mem_export(a, 4096, false).unwrap();
        let e = sim.ipc_mem_set_server_pids(&k, &entries).unwrap_err();
        assert_eq!(e.kind(), acl_notify_core::Error::ParamInvalid, "{e}");
        sim.ipc_mem_set_server_pids(&k, &entries[..1]).unwrap();
    }
}

//! IPC policy: who may import a notify. Whitelists (adding entries, matching this process by
//! the sdid of the device it imports on, [`acl_notify_core::sdid`]), the checks an import makes
//! before and after it parses the key, and other servers' files.

use std::sync::Arc;

use acl_notify_core::sdid::{self, PodDevice, Shown};
use acl_notify_core::table::{ExportState, NotifySlot};
use acl_notify_core::whitelist::{
    MAX_ENTRIES as MAX_WHITELIST, NOT_RUNNING, Whitelist, WhitelistEntry,
};
use acl_notify_core::{Error, ExportKey, Feature, Lifecycle, Op, RawNotify, ServerPid};

use crate::entries::NotifyEntry;
use crate::error::SimError;
use crate::error::err;
use crate::locks::lock;
use crate::shm::{OpenMode, ShmFile, SlotRef};
use crate::sim::Sim;
use crate::{diag, shm, sys};

// Every device of a server has an sdid.
const _: () = assert!(crate::shm::MAX_DEVICES <= sdid::MAX_DEVICES);

/// Tests: a place in an import (`Sim::import_parsed`) where a test can stop it while another
/// process acts ([`pause_import_at`]).
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImportWindow {
    /// Its checks passed (the key names a live notify, exported with that nonce, its owner
    /// neither destroyed it nor died, this process admitted); it does not hold the notify yet.
    Checked,
    /// It holds the notify (joined at the key's generation) and has not looked again at the
    /// owner's destroy.
    Joined,
}

/// Tests: a pause [`pause_import_at`] armed: the window and what runs there.
#[cfg(test)]
type ImportPause = (ImportWindow, fn());

/// Tests: the pause [`pause_import_at`] armed in this process, if any (a forked child starts
/// with none: `fork::PerProcess`).
#[cfg(test)]
static IMPORT_PAUSE: crate::fork::PerProcess<Option<ImportPause>> =
    crate::fork::PerProcess::new(no_pause);

#[cfg(test)]
fn no_pause() -> Option<ImportPause> {
    None
}

/// Tests: the next import of this process that reaches `at` runs `f` there, once. Process-wide:
/// only for a process of its own (a forked child), where no other test imports.
#[cfg(test)]
pub(crate) fn pause_import_at(at: ImportWindow, f: fn()) {
    *lock(IMPORT_PAUSE.get()) = Some((at, f));
}

/// Tests: an import reached `at`: runs what [`pause_import_at`] armed there, if anything.
#[cfg(test)]
fn import_reaches(at: ImportWindow) {
    let f = {
        let mut armed = lock(IMPORT_PAUSE.get());
        match *armed {
            Some((w, f)) if w == at => {
                *armed = None;
                Some(f)
            }
            _ => None,
        }
    };
    if let Some(f) = f {
        f();
    }
}

impl Sim {
    /// The sdid of `device` of this server (a device of this machine: `device_ok` passed).
    pub(crate) fn sdid_of(&self, device: u32) -> u32 {
        PodDevice::new(self.inner.server_id, device).map_or(sdid::ANYWHERE, PodDevice::sdid)
    }

    /// Refuses (107000) inter-server whitelist entry `i` (`e`) if its sdid names no device of
    /// the SuperPod: not an sdid at all (a server id, say: the mistake that whitelists the
    /// wrong process on hardware), or a device past the server's count, for a server whose
    /// count this process knows (its own, and in single-host mode every server of the
    /// namespace, which all have this one's; another host's is not known here). The notify's
    /// and the device memory's inter-server whitelists both check through here.
    pub(crate) fn check_entry_sdid(&self, i: usize, e: &ServerPid) -> Result<(), SimError> {
        let bad = |why: String| {
            err(
                Error::ParamInvalid,
                format!(
                    "serverPids entry {i} (pid {}): sdid {:#x} names no device of the SuperPod: \
                     {why}",
                    e.pid, e.sdid
                ),
            )
        };
        let d = sdid::parse(e.sdid).map_err(|why| bad(why.to_string()))?;
        let known = d.server == self.inner.server_id || self.inner.cluster.is_none();
        if known && d.device >= self.inner.devices {
            return Err(bad(format!(
                "it parses to server {}, device {}, and a server here has {} devices (0 to {})",
                d.server,
                d.device,
                self.inner.devices,
                self.inner.devices - 1
            )));
        }
        Ok(())
    }

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
                self.same_server(),
                pid,
                start_time,
            )]
        };
        self.add_whitelist(notify, 1, entry, false)
    }

    /// What to add to a message about a key of server `server` that this process could not
    /// find in its namespace: without a cluster, a key of another simulated host (another
    /// namespace) names a server of this namespace that has nothing of it, and the missing
    /// piece is the cluster (a newcomer running two "hosts" as two namespaces got "the notify
    /// no longer exists" for a live notify of the other host, 2026-12-07). Empty for its own
    /// server, in cluster mode, and on a SoC of one server.
    pub(crate) fn other_host_hint(&self, server: u32) -> String {
        if server == self.inner.server_id
            || self.inner.cluster.is_some()
            || !self.inner.soc.has(Feature::InterServer)
        {
            return String::new();
        }
        format!(
            " (if the key's owner runs on another simulated host, a namespace other than {}, \
             it is reachable only through an etcd cluster: give every process of the job the \
             same ACL_NOTIFY_SIM_CLUSTER; README, \"A SuperPod across machines\")",
            self.inner.namespace
        )
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
                     (no process of that server has run){}",
                    self.inner.namespace,
                    self.other_host_hint(server)
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

    /// The sdid of a same-server whitelist entry (`aclrtNotifySetImportPid` and its memory
    /// twins name no device): any device of this server.
    pub(crate) fn same_server(&self) -> u32 {
        // Server ids are 0–65535 (`Builder::open` checks).
        sdid::server_wide(self.inner.server_id as u16)
    }

    /// The entry for process `pid` importing where `sdid` admits: a device's sdid, or
    /// [`same_server`](Self::same_server)'s.
    pub(crate) fn whitelist_entry(&self, sdid: u32, pid: i32) -> WhitelistEntry {
        // A process on this server: remember both kinds of its identity this process can take
        // (its start time, and a pidfs inode number where pidfds can be opened), so a later
        // process with the same PID is not let in, and an importer that can take only one kind
        // (under valgrind) is still checked by that one; a PID no process has now gets an entry
        // that matches nobody, ever. On another server (another PID namespace, another kernel)
        // the identity is unknown: any process with that PID there.
        if sdid::server_of(sdid) != Some(self.inner.server_id) {
            return WhitelistEntry::new(sdid, pid);
        }
        match sys::process_identity(pid) {
            Some(id) => WhitelistEntry::with_identity(sdid, pid, id.start_time, id.pidfs),
            None => WhitelistEntry::with_start_time(sdid, pid, NOT_RUNNING),
        }
    }

    /// Why this process, importing on `device`, may not import what a process of `server`
    /// exported with whitelist `wl`; `None` if it may. Shared by notify and memory imports.
    /// An entry admits the device of its sdid, every device of its server (a same-server
    /// entry) or every device ([`sdid::ANYWHERE`]): a process whitelisted for one device of
    /// a server is refused on another, since an sdid names a device, not a server
    /// (hicann/runtime `src/runtime/core/src/notify/notify.cc` parses one into server, chip,
    /// die and device).
    pub(crate) fn not_admitted(&self, wl: &Whitelist, server: u32, device: u32) -> Option<String> {
        let (me_srv, me_pid, me) = (self.inner.server_id, self.inner.pid, self.inner.identity);
        let here = self.sdid_of(device);
        if wl.matches(here, me_pid, me.start_time, me.pidfs) {
            return None;
        }
        let entry = wl
            .iter()
            .find(|e| e.pid == me_pid && sdid::admits(e.sdid, here));
        let on_server = |s: u32| {
            wl.iter()
                .find(move |e| e.pid == me_pid && sdid::server_of(e.sdid) == Some(s))
        };
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
        } else if let Some(e) = on_server(me_srv) {
            format!(
                "pid {me_pid} is whitelisted for sdid {}, but this process imports on sdid {}: \
                 an inter-server entry names the importer's device (the sdid it reads with \
                 aclrtGetDeviceInfo(dev, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID) on the device it \
                 imports on)",
                Shown(e.sdid),
                Shown(here)
            )
        } else if server != me_srv && on_server(server).is_some() {
            format!(
                "pid {me_pid} is whitelisted on server {server} only; an importer on server \
                 {me_srv} needs an inter-server entry (sdid {}, pid {me_pid})",
                Shown(here)
            )
        } else if let Some(e) = wl.iter().find(|e| e.pid == me_pid) {
            format!(
                "pid {me_pid} is whitelisted for sdid {}, another server's, but this process \
                 imports on sdid {}",
                Shown(e.sdid),
                Shown(here)
            )
        } else {
            format!(
                "pid {me_pid} on server {me_srv} is not whitelisted (it imports on sdid {})",
                Shown(here)
            )
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
                format!(
                    "key of notify {id} on device {odev} of server {server}: {why}{}",
                    self.other_host_hint(server)
                ),
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
        // An owner that died (or exited without destroying it) counts as having destroyed its
        // handle (SPEC §2), so its end invalidates the key as its destroy would, while
        // importers still hold the notify. (The owner of a slot in this machine's file runs on
        // this machine.)
        let owner = slot.owner();
        if !crate::sys::pid_alive(owner.pid, owner.start_time) {
            return Err(stale(&diag::owner_ended(owner.pid)));
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
            if let Some(why) = self.not_admitted(&wl, server, device) {
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
        #[cfg(test)]
        import_reaches(ImportWindow::Checked);
        let r = SlotRef::join(&file, odev, id, k.generation)
            .ok_or_else(|| stale("the notify was destroyed during the import"))?;
        #[cfg(test)]
        import_reaches(ImportWindow::Joined);
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
    use std::sync::atomic::{AtomicI32, Ordering::SeqCst};
    use std::time::Duration;

    use acl_notify_core::sdid::{self, PodDevice};
    use acl_notify_core::{
        Backend as _, BackendError, CreateFlags, Error, ExportFlags, ExportKey, HostOps,
        ImportFlags, NotifyResources, ServerPid, Soc, StreamOps, SyncWait, Timeout,
    };

    use super::{ImportWindow, Whitelist, pause_import_at};
    use crate::NamespaceGuard;
    use crate::sim::Sim;

    /// An inter-server entry whose sdid names no device of the SuperPod is refused (107000,
    /// saying why), for notifies and device memory alike: a server id (what the simulator
    /// answered for a device's sdid before, and on hardware a device of another server), the
    /// whitelist-only "anywhere" (it was written as given, and then admitted its PID on every
    /// server), a device past this machine's count. The notify keeps the entries before the
    /// bad one (SPEC §3: per entry); the memory call adds nothing.
    #[test]
    fn an_inter_server_entry_whose_sdid_names_no_device_is_refused() {
        let (sim, _ns) = NamespaceGuard::open_sim(
            format!("unit-ipc-policy-{}", std::process::id()),
            Soc::Ascend910_93,
            2,
        )
        .expect("opening a test Sim");
        let good = ServerPid {
            sdid: PodDevice::new(1, 1).unwrap().sdid(),
            pid: 4242,
        };
        for (bad, why) in [
            (1, "server id"),
            (sdid::ANYWHERE, "top byte"),
            (PodDevice::new(1, 2).unwrap().sdid(), "2 devices"),
            (0x5D00_0140, "at most 64 devices"),
        ] {
            let entries = [
                good,
                ServerPid {
                    sdid: bad,
                    pid: 4343,
                },
            ];
            let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
            sim.export_key(h, ExportFlags::empty()).unwrap();
            let e = sim.set_import_server_pids(h, &entries).unwrap_err();
            assert_eq!(e.kind(), acl_notify_core::Error::ParamInvalid, "{e}");
            let text = e.to_string();
            assert!(text.contains("serverPids entry 1"), "{text}");
            assert!(
                text.contains("names no device") && text.contains(why),
                "{text}"
            );
            let info = sim.notify_info(h).unwrap();
            assert_eq!(
                info.state,
                acl_notify_core::Lifecycle::Whitelisted,
                "entry 0 stays"
            );
            sim.destroy_notify(h).unwrap();
            let a = sim.malloc(0, 4096, 0).unwrap();
            let k = sim.ipc_mem_export(a, 4096, false).unwrap();
            let e = sim.ipc_mem_set_server_pids(&k, &entries).unwrap_err();
            assert_eq!(e.kind(), acl_notify_core::Error::ParamInvalid, "{e}");
            assert!(e.to_string().contains(why), "{e}");
            sim.ipc_mem_set_server_pids(&k, &entries[..1]).unwrap();
            sim.ipc_mem_close(&k).unwrap();
            sim.free(a).unwrap();
        }
    }

    /// A process whitelisted for device 0 of its server is refused on device 1 of that server,
    /// with a message that names both sdids parsed; on device 0 it is admitted; a same-server
    /// entry admits it on every device. (The simulator matched entries by server before, so
    /// the device never mattered.) Checked on the policy itself: the importer is this process.
    #[test]
    fn a_process_whitelisted_for_one_device_is_refused_on_another() {
        let (sim, _ns) = NamespaceGuard::open_sim(
            format!("unit-ipc-policy-dev-{}", std::process::id()),
            Soc::Ascend910_93,
            2,
        )
        .expect("opening a test Sim");
        let me = std::process::id() as i32;
        let dev0 = sim.super_pod_device_id(0).unwrap();
        let dev1 = sim.super_pod_device_id(1).unwrap();
        assert_ne!(dev0, dev1);
        assert_eq!(
            sdid::parse(dev1),
            Ok(PodDevice {
                server: 0,
                device: 1
            })
        );
        let mut wl = Whitelist::new();
        wl.add(sim.whitelist_entry(dev0, me)).unwrap();
        assert_eq!(sim.not_admitted(&wl, 0, 0), None, "device 0 is admitted");
        let why = sim.not_admitted(&wl, 0, 1).expect("device 1 is refused");
        for part in [
            "0x5d000000 (server 0, device 0)",
            "0x5d000001 (server 0, device 1)",
        ] {
            assert!(why.contains(part), "{part:?} not in {why}");
        }
        let mut same = Whitelist::new();
        same.add(sim.whitelist_entry(sim.same_server(), me))
            .unwrap();
        assert_eq!(sim.not_admitted(&same, 0, 0), None);
        assert_eq!(sim.not_admitted(&same, 0, 1), None);
    }

    /// A key of another simulated host (another namespace) imported without a cluster says
    /// what joins the hosts, for a notify and for memory: it said "no shared state" or "the
    /// notify no longer exists" and nothing of the cluster (a newcomer's two hosts without
    /// `ACL_NOTIFY_SIM_CLUSTER`, 2026-12-07).
    #[test]
    fn a_key_of_another_namespace_without_a_cluster_names_the_cluster() {
        let (owner, _a) = NamespaceGuard::open_sim(
            format!("unit-ipc-otherhost-a-{}", std::process::id()),
            Soc::Ascend910_93,
            1,
        )
        .expect("opening the owner's Sim");
        let ns_b = format!("unit-ipc-otherhost-b-{}", std::process::id());
        let _ = Sim::remove_namespace(&ns_b);
        let _b = NamespaceGuard(ns_b.clone());
        let importer = Sim::builder()
            .soc(Soc::Ascend910_93)
            .devices(1)
            .namespace(&ns_b)
            .server_id(1)
            .open()
            .expect("opening the importer's Sim (server 1)");
        let n = owner.create_notify(0, CreateFlags::empty()).unwrap();
        let key = owner
            .export_key(n, ExportFlags::DISABLE_PID_VALIDATION)
            .unwrap();
        let e = importer
            .import_key(0, &key, ImportFlags::empty())
            .unwrap_err();
        assert_eq!(e.kind(), Error::InvalidHandle, "{e}");
        assert!(e.to_string().contains("ACL_NOTIFY_SIM_CLUSTER"), "{e}");
        let a = owner.malloc(0, 4096, 0).unwrap();
        let k = owner.ipc_mem_export(a, 4096, true).unwrap();
        let e = importer.ipc_mem_import(0, &k, false).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{e}");
        assert!(e.to_string().contains("ACL_NOTIFY_SIM_CLUSTER"), "{e}");
        // Its own server's keys say nothing of it.
        let own = importer.create_notify(0, CreateFlags::empty()).unwrap();
        importer.destroy_notify(own).unwrap();
    }

    // An import racing the owner's destroy, across processes: the owner (this test) and an
    // importer (a forked child) talk through two pipes, one byte a message.

    /// Child to owner: the import is held in its window.
    const HELD: u8 = b'h';
    /// Child to owner: the import was refused with 107017.
    const REFUSED: u8 = b'r';
    /// Child to owner: the import succeeded.
    const IMPORTED: u8 = b'i';
    /// Child to owner: its import still records and waits, and a new import is refused.
    const WORKS: u8 = b'w';
    /// Child to owner: it destroyed its import.
    const LET_GO: u8 = b'd';
    /// Owner to child: go on.
    const GO: u8 = b'g';

    /// The child's ends of the pipes: it writes `UP`, reads `DOWN`.
    static UP: AtomicI32 = AtomicI32::new(-1);
    static DOWN: AtomicI32 = AtomicI32::new(-1);

    fn send(fd: i32, b: u8) {
        // SAFETY: writes one byte from a live local to a pipe this process holds.
        let n = unsafe { libc::write(fd, (&raw const b).cast(), 1) };
        assert_eq!(n, 1, "writing to the pipe");
    }

    /// The next byte from `fd`; 0 once its writer is gone, or after 60 s with nothing (a hung
    /// peer fails the test instead of hanging it).
    fn recv(fd: i32) -> u8 {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one pollfd of a live local.
        if unsafe { libc::poll(&mut p, 1, 60_000) } != 1 {
            return 0;
        }
        let mut b = 0u8;
        // SAFETY: reads one byte into a live local from a pipe this process holds.
        let n = unsafe { libc::read(fd, (&raw mut b).cast(), 1) };
        if n == 1 { b } else { 0 }
    }

    /// The child's import, held in its window: tells the owner, waits for its go.
    fn held() {
        send(UP.load(SeqCst), HELD);
        recv(DOWN.load(SeqCst));
    }

    const LONG: SyncWait = SyncWait::AtMost(Duration::from_secs(20));

    /// The importer (a forked child): imports `key` (held at `at` if given) and reports; an
    /// import it got must keep working after the owner's destroy while the key imports nothing
    /// more; it destroys it when told. Its exit code: 0, or where it went wrong.
    fn importer(ns: &str, key: &ExportKey, at: Option<ImportWindow>) -> i32 {
        let (up, down) = (UP.load(SeqCst), DOWN.load(SeqCst));
        let Ok(sim) = Sim::builder()
            .soc(Soc::Ascend910B)
            .devices(1)
            .namespace(ns)
            .open()
        else {
            return 10;
        };
        if let Some(at) = at {
            pause_import_at(at, held);
        }
        match sim.import_key(0, key, ImportFlags::empty()) {
            Err(e) if e.kind() == Error::InvalidHandle => send(up, REFUSED),
            Err(_) => return 11,
            Ok(imp) => {
                send(up, IMPORTED);
                recv(down);
                let (Ok(s), Ok(w)) = (sim.create_stream(0), sim.create_stream(0)) else {
                    return 12;
                };
                let works = sim.record(imp, s).is_ok()
                    && sim.wait_and_reset(imp, w, Timeout::Forever).is_ok()
                    && sim.synchronize(w, LONG).is_ok()
                    && sim.synchronize(s, LONG).is_ok();
                let again = sim.import_key(0, key, ImportFlags::empty());
                if !works || again.map_err(|e| e.kind()) != Err(Error::InvalidHandle) {
                    return 13;
                }
                send(up, WORKS);
                recv(down);
                if sim.destroy_notify(imp).is_err() {
                    return 14;
                }
                send(up, LET_GO);
            }
        }
        // Stays alive until the owner has counted the ids: a reference it kept would keep its
        // notify's id taken until it died.
        recv(down);
        0
    }

    /// One race: the owner creates and exports a notify, a child imports its key, and the
    /// owner destroys the notify while the import is held at `at` (`None`: once it returned).
    fn race_with_destroy(at: Option<ImportWindow>) {
        let (sim, guard) = NamespaceGuard::open_sim(
            format!(
                "unit-ipc-race-{}-{}",
                at.map_or("after", |w| match w {
                    ImportWindow::Checked => "checked",
                    ImportWindow::Joined => "joined",
                }),
                std::process::id()
            ),
            Soc::Ascend910B,
            1,
        )
        .expect("opening a test Sim");
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let key = sim
            .export_key(n, ExportFlags::DISABLE_PID_VALIDATION)
            .unwrap();
        let free = sim.notifies_free(0).unwrap();
        let (mut up, mut down) = ([0; 2], [0; 2]);
        // SAFETY: fills a two-int array of a live local.
        assert_eq!(unsafe { libc::pipe(up.as_mut_ptr()) }, 0);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::pipe(down.as_mut_ptr()) }, 0);
        let ns = guard.0.clone();
        // SAFETY: the child runs `importer` (a Sim of its own, pipes) and `_exit`s without
        // running the parent's destructors, as `crate::fork::run_in_child`'s children do.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            UP.store(up[1], SeqCst);
            DOWN.store(down[0], SeqCst);
            let code = importer(&ns, &key, at);
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        // SAFETY: closes the child's ends in this process, so a child gone reads as EOF.
        unsafe {
            libc::close(up[1]);
            libc::close(down[0]);
        }
        let (from, to) = (up[0], down[1]);
        let taken = |why: &str| {
            assert_eq!(sim.notifies_free(0).unwrap(), free, "{at:?}: {why}");
        };
        let freed = |why: &str| {
            assert_eq!(sim.notifies_free(0).unwrap(), free + 1, "{at:?}: {why}");
        };
        match at {
            Some(w) => {
                assert_eq!(
                    recv(from),
                    HELD,
                    "{w:?}: the import did not reach its window"
                );
                sim.destroy_notify(n).unwrap();
                send(to, GO);
                assert_eq!(
                    recv(from),
                    REFUSED,
                    "{w:?}: the owner's destroy came before the import held the notify for \
                     good, yet it was not refused with 107017"
                );
                freed("the refused import left a reference behind (its process still lives)");
            }
            None => {
                assert_eq!(recv(from), IMPORTED, "the import before the destroy");
                sim.destroy_notify(n).unwrap();
                assert_eq!(
                    sim.import_key(0, &key, ImportFlags::empty())
                        .map_err(|e| e.kind()),
                    Err(Error::InvalidHandle),
                    "the key after the owner's destroy"
                );
                taken("the importer still holds the notify");
                send(to, GO);
                assert_eq!(
                    recv(from),
                    WORKS,
                    "the import made before the destroy: its record must release its wait, \
                     and its own new import be refused"
                );
                send(to, GO);
                assert_eq!(recv(from), LET_GO, "the importer's destroy");
                freed("the last holder destroyed it");
            }
        }
        send(to, GO);
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{at:?}: the importer failed (status {status:#x})"
        );
        // SAFETY: closes this process's ends.
        unsafe {
            libc::close(from);
            libc::close(to);
        }
    }

    /// An import racing the owner's destroy (another process) ends in one of two whole
    /// states, never half of one: held after its checks (the key was good then) or after it
    /// joined the notify, and overtaken there by the destroy, it is refused with 107017 and
    /// keeps no reference (the id is free again while the importer still lives); done before
    /// the destroy, it is a working import that the destroy invalidates as SPEC §2 says —
    /// the key imports nothing more (107017), the import keeps the id taken, its record
    /// releases its wait, and its destroy frees the id. Deterministic: the windows are
    /// `ImportWindow`'s test pauses, not timing.
    #[test]
    fn an_import_racing_the_owner_s_destroy_is_refused_or_works_never_half() {
        for at in [
            Some(ImportWindow::Checked),
            Some(ImportWindow::Joined),
            None,
        ] {
            race_with_destroy(at);
        }
    }
}

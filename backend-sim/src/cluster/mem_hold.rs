//! Physical memory kept for its importers on other hosts: CANN frees memory shared by a
//! shareable handle once every process sharing it has freed its handle (hicann/runtime
//! `docs/zh/api_ref/11-04_virtual_memory_management.md`, `aclrtFreePhysical`), so an owner's
//! `aclrtFreePhysical` (or the unmap that drops the last use) of memory an importer on
//! another host still holds leaves the bytes in place until that importer lets go.
//!
//! Keys, under the owner's record prefix (its record watch sees each one go):
//! `rec/<sid>/<pid>/mh/<dev>/<id>/<gen>/<isid>/<ipid>`: importer `(isid, ipid)` holds
//! incarnation `gen` of allocation `id` of device `dev`. Put when the import is made (a
//! transaction on the registry entry's incarnation), deleted when the importer closes it,
//! and bound to the importer's lease: an importer that dies, or whose host leaves the
//! cluster, lets go within its lease's TTL, so nothing pins the memory for ever.
//!
//! The owner's free of such memory, while it is published ([`super::mem`]): the entry is
//! marked kept, the owner puts its own hold in the allocation's slot (the slot's importer
//! list, so the free orphans it rather than releasing it: [`crate::mem::remote`]), the
//! registry entry says the export is closed (no new import), and the owner's watch drops the
//! owner's hold — releasing the bytes — when no key is left under the allocation's holder
//! prefix. The bytes live in the owner's process: its death (or its leaving the cluster)
//! still ends them, and importers' copies fail with 107000 saying the owner is dead.

use serde_json::{Value, json};

use super::etcd::Event;
use super::mem::RemoteMem;
use super::{Cluster, Held, Shared};
use crate::SimError;
use crate::error::err;
use crate::locks::lock;
use acl_notify_core::Error;
use acl_notify_core::key::ExportKey;

impl Shared {
    /// Where the holds on incarnation `generation` of allocation `id` of device `dev` of
    /// process `owner_pid` of server `server` are.
    fn mem_holder_prefix(
        &self,
        server: u32,
        owner_pid: i32,
        dev: u32,
        id: u32,
        generation: u32,
    ) -> Vec<u8> {
        self.key(&format!(
            "rec/{server}/{owner_pid}/mh/{dev}/{id}/{generation}/"
        ))
    }

    /// A hold on this process's memory changed (`rest`: the key after `mh/`): one going may
    /// be the last of memory kept for its holders.
    pub(super) fn apply_mem_hold(&self, rest: &str, ev: &Event) {
        if !ev.delete {
            return;
        }
        let mut parts = rest.split('/').map(str::parse::<u32>);
        if let (Some(Ok(dev)), Some(Ok(id))) = (parts.next(), parts.next()) {
            self.mem_release_if_unheld(dev, id, Some(ev.kv.mod_revision));
        }
    }

    /// Releases allocation `id` of device `dev` if the owner freed it (kept) and no importer
    /// on another host holds it any more: withdrawn from the registry, the owner's hold on
    /// its slot dropped (the last one frees it). If etcd cannot be asked, it stays kept: the
    /// watch, resuming, sees the holds that went meanwhile. `at`: the revision of the hold's
    /// release, as for a notify's ([`Shared::unheld`]); `None` for the owner's free.
    fn mem_release_if_unheld(&self, dev: u32, id: u32, at: Option<i64>) {
        let mut p = lock(&self.published_mem);
        let Some(generation) = p.get(&(dev, id)).filter(|e| e.kept).map(|e| e.generation) else {
            return;
        };
        if self.unheld(
            &self.mem_holder_prefix(self.server, self.pid, dev, id, generation),
            at,
        ) {
            let gone = p.remove(&(dev, id));
            drop(p);
            let _ = self.etcd.delete(&self.mem_key(self.server, dev, id));
            if let Some(g) = gone {
                g.range.let_go();
            }
        }
    }
}

impl Cluster {
    /// Registers this process's import `m` as a holder of the owner's memory (a key bound to
    /// this process's lease: it goes with [`mem_unhold`](Self::mem_unhold) or this
    /// process's death). Codes: 107000 the registry entry is gone or a new one (the owner freed
    /// it, or died) since it was looked up; 507022.
    pub(super) fn mem_hold(&self, m: &RemoteMem) -> Result<(), SimError> {
        let s = &self.shared;
        let generation = m.key.fields().map_or(0, |k| k.generation);
        let mut key = s.mem_holder_prefix(m.server, m.owner_pid, m.device, m.id, generation);
        key.extend_from_slice(format!("{}/{}", s.server, s.pid).as_bytes());
        let held = s.hold(
            Held::Mem(m.key),
            key,
            s.mem_key(m.server, m.device, m.id),
            m.create_rev,
            "importing memory of another host",
        )?;
        if held.is_none() {
            return Err(err(
                Error::ParamInvalid,
                format!(
                    "allocation {} of device {} of server {} (another host): its export is gone \
                     (the owner freed it or died) since the key was looked up",
                    m.id, m.device, m.server
                ),
            ));
        }
        Ok(())
    }

    /// Drops this process's hold on the memory it imported by `key`, if it has one (if the
    /// cluster is unreachable the hold stays until this process's lease goes).
    pub(super) fn mem_unhold(&self, key: &ExportKey) {
        self.shared.let_go(&Held::Mem(*key));
    }

    /// The owner is freeing allocation `id` (generation `generation`) of device `dev`, its
    /// importers' use going on (physical memory): if this process published it, it is marked
    /// kept and `true` is returned — the caller then puts the owner's hold in the slot before
    /// the free and calls [`mem_kept`](Self::mem_kept) after it. `false` (no etcd call) for
    /// memory never published.
    pub(crate) fn mem_keep(&self, dev: u32, id: u32, generation: u32) -> bool {
        let mut p = lock(&self.shared.published_mem);
        match p.get_mut(&(dev, id)) {
            Some(e) if e.generation == generation => {
                e.kept = true;
                true
            }
            _ => false,
        }
    }

    /// After the free of allocation `id` of device `dev` that [`mem_keep`](Self::mem_keep)
    /// kept: the registry entry says the export is closed (the freed handle admits no new
    /// import), and the memory is released at once if no importer holds it.
    pub(crate) fn mem_kept(&self, dev: u32, id: u32) {
        let s = &self.shared;
        {
            // Under the lock: a release by the watch meanwhile does not find the key put back.
            let mut p = lock(&s.published_mem);
            let Some(e) = p.get_mut(&(dev, id)).filter(|e| e.kept) else {
                return;
            };
            if let Ok(mut v) = serde_json::from_slice::<Value>(&e.value) {
                v["exported"] = json!(false);
                e.value = v.to_string().into_bytes();
            }
            let lease = *lock(&s.proc_lease);
            let _ = s.etcd.put(&s.mem_key(s.server, dev, id), &e.value, lease);
        }
        s.mem_release_if_unheld(dev, id, None);
    }
}

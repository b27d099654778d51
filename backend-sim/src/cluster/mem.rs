//! IPC memory across hosts: the owner's memory exports in the registry, the importers'
//! copies and sets as etcd transactions the owner's record watch applies, and the answers to
//! their reads (see `crate::mem::remote` for what an import of another host's memory is).
//!
//! Keys, under the SuperPod's prefix:
//!
//! - `mem/<sid>/<dev>/<id>`: an allocation an owner published (generation, nonce, owner pid,
//!   open or whitelisted, the whitelist, the exported length, whether the export is still
//!   open to new imports), bound to the owner's lease. Put when the owner gives the export an
//!   inter-server entry or exports it without PID validation; put again (same incarnation)
//!   when its owner closes the export; deleted when the owner frees it. Its create revision is
//!   the incarnation every copy names.
//! - `rec/<sid>/<pid>/m/<dev>/<id>/<isid>/<ipid>`: what importer `(isid, ipid)` asks of that
//!   allocation: one put per write (a header line, then up to [`MEM_CHUNK`] bytes), set, or
//!   read request. Each put is a transaction on the allocation's incarnation, so a copy to an
//!   owner that freed the memory or died fails at once, saying which. Under the owner's record
//!   prefix: its record watch applies them in revision order with the remote records, so a
//!   record an importer queues after a copy lands after the copy's bytes.
//! - `rec/<isid>/<ipid>/a/<sid>/<pid>`: the owner's answers to that importer's reads (a header
//!   line with the request's number, then the bytes), seen by the importer's own record watch.
//!
//! Every wait is bounded: each transaction by the client's deadline, each read's answer by the
//! same bound (an owner that died after the request was committed is reported at the bound).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex};

use acl_notify_core::Error;
use acl_notify_core::key::ExportKey;
use acl_notify_core::whitelist::{Whitelist, WhitelistEntry};
use serde_json::{Value, json};

use super::etcd::{Cmp, Event, Op};
use super::export;
use super::{Cluster, Shared, ipc};
use crate::SimError;
use crate::error::err;
use crate::locks::{lock, read, write};
use crate::mem::remote::{Reservation, SharedRange};

/// Bytes of memory one etcd value carries (a write's data, a read's answer). etcd refuses a
/// request larger than its `--max-request-bytes` (1.5 MiB by default); the gateway carries
/// the value base64 in JSON.
pub const MEM_CHUNK: usize = 1 << 20;

/// Closed imports remembered, to say "closed" rather than "not a device address".
const CLOSED_KEPT: usize = 64;

/// An allocation this process published, by (device, id).
pub(super) struct PublishedMem {
    pub(super) generation: u32,
    pub(super) range: SharedRange,
    /// Its registry value (put again under a new lease).
    pub(super) value: Vec<u8>,
    /// Set when the owner freed it while it may have importers on other hosts: kept (the
    /// slot orphaned, the owner's hold in it) until their last hold goes (`mem_hold`).
    pub(super) kept: bool,
}

/// An import of another host's memory.
#[derive(Debug)]
pub(crate) struct RemoteMem {
    pub server: u32,
    pub device: u32,
    pub id: u32,
    pub owner_pid: i32,
    /// The exported range's length.
    pub len: u64,
    /// The registry key's create revision at import: copies reach that incarnation only.
    pub(super) create_rev: i64,
    /// The importer's device.
    pub local_device: u32,
    pub(super) key: ExportKey,
    /// Its device addresses in this process (`None` in a lookup's answer, before the import).
    reservation: Option<Reservation>,
    /// This process's life when it looked the allocation up (see `Shared::life`): its hold
    /// is bound to that life's lease.
    pub(super) life: u32,
}

impl RemoteMem {
    /// Its device pointer.
    pub fn base(&self) -> usize {
        self.reservation.as_ref().map_or(0, Reservation::addr)
    }

    /// What it is, for messages.
    pub fn describe(&self) -> String {
        format!(
            "IPC memory {:#x} ({} bytes; allocation {} of device {} of server {}, another host, \
             owner pid {}, imported onto device {})",
            self.base(),
            self.len,
            self.id,
            self.device,
            self.server,
            self.owner_pid,
            self.local_device
        )
    }
}

/// This process's imports of other hosts' memory.
#[derive(Default)]
pub(super) struct MemImports {
    by_addr: BTreeMap<usize, Arc<RemoteMem>>,
    by_key: HashMap<ExportKey, usize>,
    /// Recently closed, newest last.
    closed: VecDeque<Arc<RemoteMem>>,
}

/// What an owner answered to one read.
type Answer = Result<Vec<u8>, String>;

/// The pending reads of this process: request number → where its answer goes.
#[derive(Default)]
pub(super) struct Pending {
    next: u64,
    waiting: HashMap<u64, Sender<Answer>>,
}

/// The cluster side of copies with a remote end, for a stream task: holds the cluster's
/// shared state, not the `Sim`.
#[derive(Clone)]
pub(crate) struct MemLink(pub(super) Arc<Shared>);

fn header_and_data(v: &[u8]) -> Option<(Value, &[u8])> {
    let i = v.iter().position(|&b| b == b'\n')?;
    Some((serde_json::from_slice(&v[..i]).ok()?, &v[i + 1..]))
}

fn with_data(header: Value, data: &[u8]) -> Vec<u8> {
    let mut v = header.to_string().into_bytes();
    v.push(b'\n');
    v.extend_from_slice(data);
    v
}

impl Shared {
    pub(super) fn mem_key(&self, server: u32, dev: u32, id: u32) -> Vec<u8> {
        self.key(&format!("mem/{server}/{dev}/{id}"))
    }

    /// One request of this importer to the owner of `m` (`header`, then `data`), if the
    /// allocation is still the incarnation imported. Codes: 107000 freed by its owner, or its
    /// owner dead; 507022 unreachable.
    fn mem_request(&self, m: &RemoteMem, mut header: Value, data: &[u8]) -> Result<(), SimError> {
        header["tok"] = json!(self.token());
        self.mem_numbered(m, &header, data)
    }

    /// What request `header` (numbered: its `tok`) of this importer to the owner of `m`
    /// puts, with `data`, in a transaction on the condition that the allocation is still the
    /// incarnation imported.
    pub(super) fn mem_op(&self, m: &RemoteMem, header: &Value, data: &[u8]) -> (Cmp, Op) {
        let key = self.key(&format!(
            "rec/{}/{}/m/{}/{}/{}/{}",
            m.server, m.owner_pid, m.device, m.id, self.server, self.pid
        ));
        let lease = *lock(&self.proc_lease);
        (
            Cmp::CreatedAt(self.mem_key(m.server, m.device, m.id), m.create_rev),
            Op::Put {
                key,
                value: with_data(header.clone(), data),
                lease,
            },
        )
    }

    /// [`mem_request`](Self::mem_request) of a `header` that carries its number already.
    pub(super) fn mem_numbered(
        &self,
        m: &RemoteMem,
        header: &Value,
        data: &[u8],
    ) -> Result<(), SimError> {
        let Some((alloc, owner)) = self.put_if_current(
            self.mem_op(m, header, data),
            (m.server, m.owner_pid),
            || format!("a copy through {}", m.describe()),
        )?
        else {
            return Ok(());
        };
        use crate::diag::RemoteState;
        let why = match (alloc, owner) {
            (_, RemoteState::Exited) => {
                "its owner exited: it left the cluster (aclFinalize), and the bytes lived in \
                 its process"
            }
            (_, RemoteState::Dead) => {
                "its owner is dead: its cluster lease expired, and the bytes lived in its \
                 process"
            }
            (false, RemoteState::Live) => {
                "its owner freed it (an importer may not use memory after the owner's aclrtFree \
                 or aclrtFreePhysical; close the mapping with aclrtIpcMemClose, or unmap it and \
                 aclrtFreePhysical an imported physical allocation)"
            }
            (true, RemoteState::Live) => {
                "its registry entry is a new one (its owner freed it and allocated the id \
                 again, or was taken for dead — its lease expired — and published it again)"
            }
        };
        Err(err(
            Error::ParamInvalid,
            format!(
                "{} cannot be used: {why}{}",
                m.describe(),
                self.own_lapse_text(m.life)
            ),
        ))
    }

    /// Applies one request of an importer to this process's published memory (`rest`: the
    /// key after `m/`). Writes and sets that fail (the memory was freed meanwhile) are
    /// dropped, as a write to freed memory is; a read is answered with the bytes or why not.
    pub(super) fn apply_mem(&self, rest: &str, ev: &Event) {
        if ev.delete {
            return;
        }
        let mut parts = rest.split('/').map(str::parse::<u64>);
        let (Some(Ok(dev)), Some(Ok(id)), Some(Ok(isid)), Some(Ok(ipid)), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return;
        };
        let (Ok(dev), Ok(id)) = (u32::try_from(dev), u32::try_from(id)) else {
            return;
        };
        let Some((h, data)) = header_and_data(&ev.kv.value) else {
            self.refuse(
                &ev.kv.key,
                "not a memory request (a JSON header line, then the bytes)",
            );
            return;
        };
        let range = {
            let p = lock(&self.published_mem);
            p.get(&(dev, id))
                .filter(|p| Some(u64::from(p.generation)) == h["gen"].as_u64())
                .map(|p| p.range.clone())
        };
        // A second try of a write or set already applied (a read's second answer finds no
        // one waiting for it).
        let (Ok(isid), Ok(ipid)) = (u32::try_from(isid), i32::try_from(ipid)) else {
            return;
        };
        if h["op"].as_str() != Some("r")
            && let Some(tok) = h["tok"].as_u64()
            && !self.first_time((isid, ipid), tok)
        {
            return;
        }
        let at = h["off"].as_u64().unwrap_or(u64::MAX);
        let n = h["len"].as_u64().unwrap_or(u64::MAX);
        let gone = || "its owner freed it".to_owned();
        match h["op"].as_str() {
            Some("w") => {
                if let Some(r) = range {
                    let _ = r.write(at, data);
                }
            }
            Some("s") => {
                if let (Some(r), Some(b)) = (range, h["byte"].as_u64()) {
                    let _ = r.fill(at, n, b as u8);
                }
            }
            Some("r") => {
                let Some(req) = h["req"].as_u64() else {
                    return;
                };
                let answer = if n > MEM_CHUNK as u64 {
                    Err(format!(
                        "a read of {n} bytes is more than one answer carries"
                    ))
                } else {
                    range.ok_or_else(gone).and_then(|r| r.read(at, n))
                };
                let (head, bytes) = match &answer {
                    Ok(b) => (json!({ "req": req }), b.as_slice()),
                    Err(e) => (json!({ "req": req, "err": e }), &[][..]),
                };
                let key = self.key(&format!("rec/{isid}/{ipid}/a/{}/{}", self.server, self.pid));
                let lease = *lock(&self.proc_lease);
                // Unreachable: the importer's read ends at its bound, saying so.
                let _ = self.etcd.put(&key, &with_data(head, bytes), lease);
            }
            _ => {}
        }
    }

    /// Hands an owner's answer (`rec/<me>/a/…`) to the read waiting for it.
    pub(super) fn apply_answer(&self, ev: &Event) {
        if ev.delete {
            return;
        }
        let Some((h, data)) = header_and_data(&ev.kv.value) else {
            return;
        };
        let Some(req) = h["req"].as_u64() else {
            return;
        };
        let Some(tx) = lock(&self.pending).waiting.remove(&req) else {
            return;
        };
        let _ = tx.send(match h["err"].as_str() {
            Some(e) => Err(e.to_owned()),
            None => Ok(data.to_vec()),
        });
    }
}

impl MemLink {
    /// The header of a write at offset `off` of `m` (without its number).
    pub(super) fn write_header(m: &RemoteMem, off: u64) -> Value {
        json!({ "op": "w", "gen": m.generation(), "off": off })
    }

    /// Writes `data` at offset `at` of `m`, a chunk per transaction.
    pub(crate) fn write(&self, m: &RemoteMem, at: u64, data: &[u8]) -> Result<(), SimError> {
        for (i, chunk) in data.chunks(MEM_CHUNK).enumerate() {
            let off = at + (i * MEM_CHUNK) as u64;
            self.0.mem_request(m, Self::write_header(m, off), chunk)?;
        }
        Ok(())
    }

    /// Sets `n` bytes at offset `at` of `m` to `value` (one transaction).
    pub(crate) fn fill(&self, m: &RemoteMem, at: u64, n: u64, value: u8) -> Result<(), SimError> {
        self.0.mem_request(
            m,
            json!({ "op": "s", "gen": m.generation(), "off": at, "len": n, "byte": value }),
            &[],
        )
    }

    /// Reads `buf.len()` bytes at offset `at` of `m`, a chunk per request and answer, each
    /// answer awaited at most the client's deadline.
    pub(crate) fn read(&self, m: &RemoteMem, at: u64, buf: &mut [u8]) -> Result<(), SimError> {
        let s = &self.0;
        let bound = s.etcd.timeout();
        for (i, chunk) in buf.chunks_mut(MEM_CHUNK).enumerate() {
            let off = at + (i * MEM_CHUNK) as u64;
            let (tx, rx) = channel();
            let req = {
                let mut p = lock(&s.pending);
                p.next += 1;
                let req = p.next;
                p.waiting.insert(req, tx);
                req
            };
            let asked = s.mem_request(
                m,
                json!({ "op": "r", "gen": m.generation(), "off": off, "len": chunk.len(), "req": req }),
                &[],
            );
            let answer = asked.and_then(|()| {
                rx.recv_timeout(bound).map_err(|_| {
                    err(
                        Error::IpcError,
                        format!(
                            "a read of {} got no answer from its owner within {:.1} s (the owner \
                             process may have died: its lease expires within {} s)",
                            m.describe(),
                            bound.as_secs_f64(),
                            s.ttl
                        ),
                    )
                })
            });
            lock(&s.pending).waiting.remove(&req);
            match answer? {
                Ok(bytes) if bytes.len() == chunk.len() => chunk.copy_from_slice(&bytes),
                Ok(bytes) => {
                    return Err(err(
                        Error::IpcError,
                        format!(
                            "a read of {} bytes of {} was answered with {} bytes",
                            chunk.len(),
                            m.describe(),
                            bytes.len()
                        ),
                    ));
                }
                Err(why) => {
                    return Err(err(
                        Error::ParamInvalid,
                        format!("{} cannot be read: {why}", m.describe()),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl RemoteMem {
    fn generation(&self) -> u32 {
        self.key.fields().map_or(0, |k| k.generation)
    }
}

impl Cluster {
    /// The cluster side of copies with a remote end.
    pub(crate) fn mem_link(&self) -> MemLink {
        MemLink(Arc::clone(&self.shared))
    }

    /// Publishes allocation `id` of device `dev` (exported with `nonce`, `open` or with
    /// whitelist `wl`; its exported range `range`), or publishes it again with a changed
    /// whitelist. Code 507022.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mem_publish(
        &self,
        dev: u32,
        id: u32,
        generation: u32,
        nonce: [u8; 16],
        open: bool,
        wl: &[WhitelistEntry],
        range: SharedRange,
    ) -> Result<(), SimError> {
        self.ensure_watch()?;
        let s = &self.shared;
        let mut value = export::entry(generation, nonce, s.pid, open, wl);
        value["len"] = json!(range.len());
        value["exported"] = json!(true);
        let value = value.to_string().into_bytes();
        let lease = *lock(&s.proc_lease);
        s.etcd
            .put(&s.mem_key(s.server, dev, id), &value, lease)
            .map_err(|e| {
                ipc(
                    e,
                    &format!("publishing allocation {id} of device {dev} to the cluster"),
                )
            })?;
        lock(&s.published_mem).insert(
            (dev, id),
            PublishedMem {
                generation,
                range,
                value,
                kept: false,
            },
        );
        Ok(())
    }

    /// The owner closed its export of (`dev`, `id`): no new imports from other hosts. Nothing
    /// (no etcd call) for memory never published.
    pub(crate) fn mem_unexport(&self, dev: u32, id: u32, generation: u32) {
        let s = &self.shared;
        let value = {
            let mut p = lock(&s.published_mem);
            let Some(e) = p.get_mut(&(dev, id)).filter(|e| e.generation == generation) else {
                return;
            };
            let Ok(mut v) = serde_json::from_slice::<Value>(&e.value) else {
                return;
            };
            v["exported"] = json!(false);
            e.value = v.to_string().into_bytes();
            e.value.clone()
        };
        let lease = *lock(&s.proc_lease);
        let _ = s.etcd.put(&s.mem_key(s.server, dev, id), &value, lease);
    }

    /// The owner freed (`dev`, `id`): withdrawn from the registry (copies through other hosts'
    /// imports fail from now on; one already committed finds it gone and is dropped). Nothing
    /// for memory never published.
    pub(crate) fn mem_withdraw(&self, dev: u32, id: u32, generation: u32) {
        let s = &self.shared;
        let gone = {
            let mut p = lock(&s.published_mem);
            match p.get(&(dev, id)) {
                Some(e) if e.generation == generation => p.remove(&(dev, id)),
                _ => None,
            }
        };
        if gone.is_some() {
            // Unreachable: the key goes with this process's lease; meanwhile the watch finds
            // the memory unpublished and drops what comes.
            let _ = s.etcd.delete(&s.mem_key(s.server, dev, id));
        }
    }

    /// Looks up allocation `id` of device `dev` of server `server` (generation `generation`,
    /// export nonce `nonce`) in the registry: what an import of it is, and the whitelist to
    /// check (`None` for an open export). Codes: 107000 not published, stale or closed;
    /// 507022.
    pub(crate) fn mem_lookup(
        &self,
        server: u32,
        dev: u32,
        id: u32,
        generation: u32,
        nonce: [u8; 16],
    ) -> Result<(RemoteMem, Option<Whitelist>), SimError> {
        let s = &self.shared;
        let stale = |why: String| {
            err(
                Error::ParamInvalid,
                format!(
                    "IPC memory key: allocation {id} on device {dev} of server {server} \
                     (another host): {why}"
                ),
            )
        };
        let key = s.mem_key(server, dev, id);
        let (v, kv) = export::read(
            s,
            &key,
            "importing memory of another host",
            generation,
            nonce,
        )?
        .map_err(|why| {
            let words = (
                "memory",
                "the owner freed it, left the cluster or died",
                "the key does not match its export (freed, or exported again since)",
            );
            stale(why.explain(server, &s.pod, words))
        })?;
        if v["exported"].as_bool() != Some(true) {
            return Err(stale(
                "its owner closed the export (aclrtIpcMemClose)".into(),
            ));
        }
        // The entry comes from etcd, where anyone with access to the cluster can write: a
        // length no allocation has (a damaged or hand-written entry) is refused here, before
        // addresses are reserved for it or copies are checked against it.
        let len = v["len"]
            .as_u64()
            .filter(|l| (1..=crate::mem::MAX_DEVICE_MEMORY).contains(l))
            .ok_or_else(|| {
                stale(format!(
                    "its registry entry gives length {}, which no allocation has (1 byte to \
                     {} bytes, a device's most): the entry is damaged",
                    v["len"],
                    crate::mem::MAX_DEVICE_MEMORY
                ))
            })?;
        let wl = export::whitelist(&v);
        let owner_pid = export::owner_pid(&v);
        let key = ExportKey::encode(&acl_notify_core::key::KeyFields {
            server: server as u16,
            device: dev as u8,
            id: id as u16,
            generation,
            nonce,
        });
        Ok((
            RemoteMem {
                server,
                device: dev,
                id,
                owner_pid,
                len,
                create_rev: kv.create_revision,
                local_device: 0,
                key,
                reservation: None,
                life: s.life(),
            },
            wl,
        ))
    }

    /// Records import `m` (its key `key`) onto `device` at the addresses of `res`; its device
    /// pointer. Starts this process's record watch (the owner's answers to reads come
    /// through it). Codes: 107000 this process imported the key already; 507022.
    pub(crate) fn mem_insert(
        &self,
        mut m: RemoteMem,
        res: Reservation,
        device: u32,
        key: ExportKey,
    ) -> Result<usize, SimError> {
        self.ensure_watch()?;
        let addr = res.addr();
        m.local_device = device;
        m.key = key;
        m.reservation = Some(res);
        let mut t = write(&self.mem_imports);
        if let Some(a) = t.by_key.get(&key) {
            return Err(err(
                Error::ParamInvalid,
                format!(
                    "IPC memory key: this process imported it already, at {a:#x} (close it first)"
                ),
            ));
        }
        let m = Arc::new(m);
        t.by_key.insert(key, addr);
        t.by_addr.insert(addr, Arc::clone(&m));
        drop(t);
        // The owner keeps physical memory it frees while this hold lasts (`mem_hold`).
        if let Err(e) = self.mem_hold(&m) {
            let mut t = write(&self.mem_imports);
            t.by_key.remove(&key);
            t.by_addr.remove(&addr);
            return Err(e);
        }
        Ok(addr)
    }

    /// The import of another host's memory whose addresses hold `addr`, if any (107000 if it
    /// is one this process closed; `what` names the address in that message).
    pub(crate) fn mem_import_at(
        &self,
        addr: usize,
        what: &str,
    ) -> Result<Option<Arc<RemoteMem>>, SimError> {
        let t = read(&self.mem_imports);
        let inside = |m: &RemoteMem| addr >= m.base() && addr - m.base() < m.len as usize;
        if let Some((_, m)) = t.by_addr.range(..=addr).next_back()
            && inside(m)
        {
            return Ok(Some(Arc::clone(m)));
        }
        if let Some(m) = t.closed.iter().rev().find(|m| inside(m)) {
            return Err(err(
                Error::ParamInvalid,
                format!(
                    "{what} {addr:#x} is offset {} in {}, which this process closed \
                     (aclrtIpcMemClose)",
                    addr - m.base(),
                    m.describe()
                ),
            ));
        }
        Ok(None)
    }

    /// Closes this process's import of `key`, and drops its hold; whether it had one.
    pub(crate) fn mem_close(&self, key: &ExportKey) -> bool {
        let mut t = write(&self.mem_imports);
        let Some(addr) = t.by_key.remove(key) else {
            return false;
        };
        if let Some(m) = t.by_addr.remove(&addr) {
            if t.closed.len() == CLOSED_KEPT {
                t.closed.pop_front();
            }
            t.closed.push_back(m);
        }
        drop(t);
        self.mem_unhold(key);
        true
    }
}

/// Keeps `published_mem`'s values in step with a new lease (see `Shared::keep`).
pub(super) fn republish(s: &Shared, lease: i64) {
    for ((dev, id), p) in lock(&s.published_mem).iter() {
        if s.leaving() {
            return;
        }
        let _ = s.etcd.put(&s.mem_key(s.server, *dev, *id), &p.value, lease);
    }
}

/// The mutex types `Shared` and `Cluster` hold for this module.
pub(super) type PublishedMap = Mutex<HashMap<(u32, u32), PublishedMem>>;

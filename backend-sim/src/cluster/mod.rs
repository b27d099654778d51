//! The SuperPod across machines: the simulator's servers on separate hosts, coordinated
//! through an etcd cluster (`ACL_NOTIFY_SIM_CLUSTER=etcd://host:port,…[/pod]`).
//!
//! Each host runs its servers' shared files as today (a host is a namespace: it never maps
//! another host's files). What crosses hosts goes through etcd, under `/acl-notify/<pod>/`:
//!
//! - `server/<sid>`: which host owns server id `sid` (claimed with a transaction that puts the
//!   key only if it is missing, bound to a lease every process of that host keeps alive; a
//!   second host claiming it is refused with 107000 naming the owner).
//! - `proc/<sid>/<pid>`: each process's liveness, bound to its own lease (TTL
//!   `ACL_NOTIFY_SIM_CLUSTER_TTL`, default 10 s, renewed every third of it). A process whose
//!   lease expires is dead, as a SIGKILLed one is locally: its keys go with the lease.
//! - `left/<sid>/<pid>`: a process that left normally (`aclFinalize`, its `Sim` dropped), put
//!   in the transaction that deletes its `proc/` key, before its lease is revoked: etcd tells a
//!   revoke from an expiry to no one, so without it the other hosts would name a process that
//!   exited "dead". Bound to the pod's lease (`pod-lease`, whose key names it), which every
//!   process of the pod renews and the last one out revokes (or which expires a TTL after the
//!   last process died): a mark lasts while any process may ask about the one that left, and
//!   nothing stays once every process of the pod is gone.
//! - `export/<sid>/<dev>/<id>`: the export-key registry (generation, nonce, owner pid, open or
//!   whitelisted, the whitelist with its inter-server `(sdid, pid)` entries), bound to the
//!   owner's lease. An owner publishes a notify when it gives it an inter-server whitelist
//!   entry or exports it without PID validation (only then can another host import it); its
//!   destroy withdraws it once no importer on another host holds it. Nothing else an owner
//!   does touches etcd.
//! - `rec/<sid>/<pid>/<dev>/<id>`: remote records. An importer's record (a stream task on its
//!   host) is one transaction: put this key if the export is still the one it imported, else
//!   fail naming why (owner dead, export withdrawn). The owner process watches its own
//!   `rec/<sid>/<pid>/` prefix from the revision before it published; each put is one watch
//!   event, applied as one local record on the flag (so it wakes the waiter, and records that
//!   land before a wait collapse as SPEC §1 says). An importer's batch reset of the notify
//!   is such a put too, marked as a reset, applied in the same order. A broken watch (its member died) resumes on
//!   another member from the revision after the last event: no record is lost or applied
//!   twice.
//! - `rec/<sid>/<pid>/<dev>/<id>/h/<isid>/<ipid>/<handle>`: the holds of remote importers,
//!   one per import handle, bound to the importer's lease (put by a transaction on the export's
//!   incarnation, deleted by its destroy, or gone with its lease). As on one host (SPEC §2),
//!   an owner's destroy keeps the notify while a hold remains: the cluster keeps the owner's
//!   reference to the slot (its id and flag) and the export, and the owner's record watch,
//!   seeing the last hold go, drops both.
//!
//! - `mem/<sid>/<dev>/<id>` and `rec/…/m/…`, `rec/…/a/…`: IPC memory across hosts, an
//!   importer's copies and sets as transactions the owner's record watch applies in the same
//!   revision order as its records, reads answered through the importer's watch (see the
//!   `mem` submodule); a record queued right after such a copy on the same stream goes in the
//!   copy's transaction (the `carry` submodule); `rec/…/mh/…`: importers' holds on that
//!   memory, which keep physical memory its owner freed until the last goes (the `mem_hold`
//!   submodule).
//!
//! Every request an importer puts (a record, a batch reset, a copy) carries a number of its
//! process; the owner applies each number once (see the `replay` submodule), since the client
//! sends a call again when its member could not serve it, which may commit it twice.
//!
//! Waits stay local: the owner's streams wait on the flag in its host's shared memory at
//! local speed. Calls that need etcd are bounded by the client's deadline
//! ([`etcd::DEFAULT_TIMEOUT`]) and fail with 507022 (`ACL_ERROR_RT_IPC_ERROR`) saying the
//! cluster is unreachable; local work goes on.

pub mod etcd;
pub mod harness;

mod carry;
mod config;
mod export;
mod leave;
mod mem;
mod mem_hold;
mod renew;
mod replay;
mod sim;

pub(crate) use carry::Attached;
pub use config::{ClusterConfig, ENV_CLUSTER, ENV_CLUSTER_TIMEOUT, ENV_CLUSTER_TTL};
pub use mem::MEM_CHUNK;
pub(crate) use mem::{MemLink, RemoteMem};

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use acl_notify_core::Error;
use acl_notify_core::whitelist::{Whitelist, WhitelistEntry};
use serde_json::{Value, json};

use acl_notify_handles::{Kind, MAX_LIVE, Slab};

use crate::SimError;
use crate::error::err;
use crate::locks::{lock, read, write};
use crate::shm::SlotRef;
use etcd::{Cmp, Etcd, EtcdError, Op};

/// Remote imports' handles look like the process's other notify handles (one table kind and
/// salt: `acl_notify_handles::Slab::with_indices`, so the C library takes them as they are),
/// with slot indices from here up; in cluster mode the local table keeps the indices below
/// (its 524,288 live handles are far more than a process has).
const REMOTE_BASE: usize = 1 << 19;

/// The slot indices of the local notify table (all of them without a cluster).
pub(crate) fn local_indices(cluster: bool) -> core::ops::Range<usize> {
    if cluster { 0..REMOTE_BASE } else { 0..MAX_LIVE }
}

/// Refusals of values under a process's record keys said on stderr (see [`Shared::refuse`]).
const REFUSALS_SAID: u32 = 8;

/// How often a watch or the lease keeper looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// 507022 for etcd call `what` that failed with `e`; a lease etcd no longer has is this
/// process's own, which expired: said so, with what to do.
fn ipc(e: EtcdError, what: &str) -> SimError {
    if let EtcdError::LeaseGone(_) = e {
        return err(
            Error::IpcError,
            format!(
                "{what}: this process's cluster lease expired (it was stopped, or cut off from \
                 the etcd cluster, for longer than its TTL, {ENV_CLUSTER_TTL}), so it lost its \
                 membership: the other hosts took it for dead and dropped what it held there. \
                 It joins again by itself within a third of the TTL, as a new life, and puts \
                 its exports and imports back; retry then, import again what answers 107017, \
                 and have the other hosts import its notifies again ({e})"
            ),
        );
    }
    err(Error::IpcError, format!("{what}: {e}"))
}

/// A notify another host exported, as this process imported it.
#[derive(Clone, Debug)]
pub(crate) struct RemoteNotify {
    pub server: u32,
    pub device: u32,
    pub id: u32,
    pub generation: u32,
    pub owner_pid: i32,
    /// The registry key's create revision at import: a record lands only on that incarnation.
    create_rev: i64,
    /// The importer's own device.
    pub local_device: u32,
    /// This process's life ([`Shared::life`]) when it imported it: its hold was bound to that
    /// life's lease.
    life: u32,
}

/// What a hold of this process on another host's resource is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Held {
    /// A remote notify's import handle.
    Notify(u64),
    /// An import of another host's memory, by its key.
    Mem(acl_notify_core::key::ExportKey),
}

/// The leases of the claims a process found, or took, as it registered (see
/// [`Shared::register`]): its host's claim of the server id and the pod's lease. A key found
/// is bound to a live lease (etcd deletes a key with its lease), so the process takes that
/// lease without a call; its claim keeper renews both as its thread starts (a lease that its
/// last renewers left near its end gets a full TTL one call later), then every third of the
/// TTL. Before, the join learned that its server id was taken by trying to claim it (a lease
/// granted, a transaction, the lease revoked), then renewed the claim, read the pod's lease and
/// renewed that: eight calls of each process on `aclInit`'s path, where there are two now (the
/// process's lease, then one transaction), and a few more for the first processes of a host.
struct Joined {
    server: i64,
    pod: i64,
}

/// A notify this process published, by (device, id).
struct Published {
    generation: u32,
    slot: Weak<SlotRef>,
    value: Vec<u8>,
    /// Set when the owner destroyed its handle while importers on other hosts still held the
    /// notify: the reference that keeps its id (and flag) until the last of them lets go.
    keep: Option<Arc<SlotRef>>,
    /// This process's life ([`Shared::life`]) when it first published this incarnation: the
    /// other hosts' imports of it reach the export that life's lease held.
    life: u32,
}

struct Shared {
    etcd: Etcd,
    /// The SuperPod's name, and where its keys are (`/acl-notify/<pod>/`).
    pod: String,
    prefix: String,
    host: String,
    server: u32,
    pid: i32,
    ttl: u32,
    /// The leases this process keeps alive: its own (liveness, registry) and its host's claim
    /// on the server id.
    proc_lease: Mutex<i64>,
    server_lease: Mutex<i64>,
    /// The pod's lease, which holds the marks of the processes that left (see the module doc).
    pod_lease: Mutex<i64>,
    /// When the grant of the process's lease that `join` took was asked for: the lease runs
    /// from about then, so its keeper renews it a period after that, not a period after the
    /// keeper's thread started (see [`Shared::keep`]).
    proc_granted: Mutex<Instant>,
    /// The last time this process's own lease was found expired (see [`renew::Lapse`]): what
    /// its errors about what it held in that life or before say, while they could be taken
    /// for its peers' fault ([`Shared::own_lapse_text`]).
    lapse: Mutex<Option<renew::Lapse>>,
    /// Which of this process's leases is its own now: 0 the one it joined with, one more at
    /// each join after a lapse (see [`Shared::keep`]). What it holds through the cluster (its
    /// imports, its publications) is bound to the lease of the life it was made in.
    life: std::sync::atomic::AtomicU32,
    stop: AtomicBool,
    published: Mutex<HashMap<(u32, u32), Published>>,
    /// This process's holds on other hosts' notifies and memory: what it holds → its holder
    /// key (see [`Shared::holder_prefix`], `mem_hold`).
    held: Mutex<HashMap<Held, Vec<u8>>>,
    /// Remote records applied here (each one watch event).
    applied: std::sync::atomic::AtomicU64,
    /// The number of this process's next request to an owner on another host (a record, a
    /// batch reset, a copy): the owner applies each number once (see [`replay`]).
    tokens: std::sync::atomic::AtomicU64,
    /// The request numbers of other hosts' importers applied here lately.
    replays: Mutex<replay::Replays>,
    /// Values under this process's record keys refused so far (see [`Shared::refuse`]).
    refused: std::sync::atomic::AtomicU32,
    /// The memory this process published (see [`mem`]).
    published_mem: mem::PublishedMap,
    /// This process's reads of other hosts' memory awaiting their answers.
    pending: Mutex<mem::Pending>,
}

/// This process's membership in a cluster (see the module doc). Dropping it stops its
/// threads and revokes its lease: other hosts see it gone at once.
pub(crate) struct Cluster {
    shared: Arc<Shared>,
    /// Remote imports, with the indices above the local table's (see [`REMOTE_BASE`]).
    remote: RwLock<Slab<RemoteNotify>>,
    /// Imports of other hosts' memory.
    mem_imports: RwLock<mem::MemImports>,
    /// The last copy into another host's memory queued on each stream, which may carry the
    /// record queued after it (see [`carry`]).
    carries: carry::Carries,
    watcher: Mutex<Option<JoinHandle<()>>>,
    /// The threads that renew the process's lease and the host's claim (see [`renew`]).
    keepers: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("prefix", &self.shared.prefix)
            .field("server", &self.shared.server)
            .finish_non_exhaustive()
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into())
}

/// This host as the cluster knows it (the owner of a server-id claim): every process of one
/// host must give the same name, and no two hosts one. A host is a namespace's shared files,
/// so the name is the machine's hostname and the namespace (for people to read), and what
/// tells apart the files of two machines whose hostnames and namespaces are alike (cloned
/// VMs and containers often share a hostname, and every host runs the `default` namespace
/// unless told otherwise): the kernel's boot id (one per machine and boot) and the device of
/// the shared-files directory (one per tmpfs mount: two mount namespaces of one machine,
/// each with its own `/dev/shm`, are two hosts). Every process that maps the same files sees
/// the same three.
fn host_identity(namespace: &str) -> String {
    use std::os::unix::fs::MetadataExt;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|b| b.trim().to_owned())
        .unwrap_or_else(|_| "unknown".into());
    let shm = crate::mapfile::SHM_DIR;
    let dev = std::fs::metadata(shm).map(|m| m.dev()).unwrap_or(0);
    format!(
        "{}/{namespace} (boot {boot}, {shm} on device {}:{})",
        hostname(),
        libc::major(dev),
        libc::minor(dev)
    )
}

impl Shared {
    fn key(&self, rest: &str) -> Vec<u8> {
        format!("{}{rest}", self.prefix).into_bytes()
    }

    fn proc_key(&self, server: u32, pid: i32) -> Vec<u8> {
        self.key(&format!("proc/{server}/{pid}"))
    }

    fn export_key(&self, server: u32, dev: u32, id: u32) -> Vec<u8> {
        self.key(&format!("export/{server}/{dev}/{id}"))
    }

    /// Where the importers of notify `id` of device `dev` of process `owner_pid` of server
    /// `server` hold it: one key per import handle, `<prefix><server>/<pid>/<handle>`, bound to
    /// the importer's lease. Under the owner's `rec/` prefix, so the owner's record watch sees
    /// each hold go (a destroy, or the importer's lease expiring).
    fn holder_prefix(&self, server: u32, owner_pid: i32, dev: u32, id: u32) -> Vec<u8> {
        self.key(&format!("rec/{server}/{owner_pid}/{dev}/{id}/h/"))
    }

    /// Puts holder key `key` for `what` (bound to this process's lease: it goes with
    /// [`let_go`](Self::let_go) or this process's death) in one transaction with a look at
    /// the owner's `export` key: `None`, and nothing put, unless that key is still the one
    /// created at revision `create_rev` (the owner withdrew it, or died, since the importer
    /// looked it up); else the export's value as the hold found it (the same transaction:
    /// what the owner had published when the hold was put). 507022 if etcd cannot be asked
    /// (`doing` says what for).
    fn hold(
        &self,
        what: Held,
        key: Vec<u8>,
        export: Vec<u8>,
        create_rev: i64,
        doing: &str,
    ) -> Result<Option<Vec<u8>>, SimError> {
        let lease = *lock(&self.proc_lease);
        let t = self
            .etcd
            .txn(
                &[Cmp::CreatedAt(export.clone(), create_rev)],
                &[
                    Op::Put {
                        key: key.clone(),
                        value: Vec::new(),
                        lease,
                    },
                    Op::Get(export),
                ],
                &[],
            )
            .map_err(|e| ipc(e, doing))?;
        if !t.succeeded {
            return Ok(None);
        }
        lock(&self.held).insert(what, key);
        Ok(Some(
            t.gets
                .into_iter()
                .next()
                .flatten()
                .map(|kv| kv.value)
                .unwrap_or_default(),
        ))
    }

    /// Drops this process's hold on `what` ([`hold`](Self::hold)), if it has one (if the
    /// cluster is unreachable the hold stays until this process's lease goes).
    fn let_go(&self, what: &Held) {
        let key = lock(&self.held).remove(what);
        if let Some(k) = key {
            let _ = self.etcd.delete(&k);
        }
    }

    /// Whether no holder key is left under `prefix` (`false` if etcd cannot be asked: what is
    /// held stays so until the watch, resuming, sees the holds that went meanwhile) — as of
    /// `at`, the revision of the watch event that let a hold go, when given.
    ///
    /// A release is judged at its own revision, not by etcd's state when the watch reads it:
    /// a watch reading late (its process stopped, or starved on a loaded machine) would
    /// otherwise find the holds that went after this one gone too, withdraw at the first of
    /// them, and lose the records made before the last hold went, which it reads next (the
    /// test `a_record_made_while_held_is_applied_by_an_owner_that_reads_it_late`). If etcd no
    /// longer has that revision (compacted), the state now decides, as before. Unheld then,
    /// the state now decides too: a hold taken after the release (an import of the export,
    /// still published) keeps the notify, and its own release is judged when it comes.
    fn unheld(&self, prefix: &[u8], at: Option<i64>) -> bool {
        if let Some(rev) = at.filter(|&r| r > 0) {
            match self.etcd.get_prefix_at(prefix, rev) {
                Ok(kvs) if !kvs.is_empty() => return false,
                Ok(_) => {}
                Err(EtcdError::Refused(m)) if m.contains("compacted") => {}
                Err(_) => return false,
            }
        }
        self.etcd
            .get_prefix(prefix)
            .is_ok_and(|(kvs, _)| kvs.is_empty())
    }

    /// Releases the owner's last reference to notify (`dev`, `id`) and its export if the owner
    /// destroyed it and no importer on another host holds it any more. Holding `published`
    /// across the range keeps a hold's release and the owner's destroy from missing each other.
    /// `at`: the revision of the hold's release, read by the watch ([`unheld`](Self::unheld)).
    fn release_if_unheld(&self, dev: u32, id: u32, at: Option<i64>) {
        let p = lock(&self.published);
        if p.get(&(dev, id)).is_none_or(|e| e.keep.is_none()) {
            return;
        }
        if self.unheld(&self.holder_prefix(self.server, self.pid, dev, id), at) {
            self.release(p, dev, id);
        }
    }

    /// Drops notify (`dev`, `id`) from `p` (the `published` map, locked) and withdraws its
    /// export; the owner's reference (the id) goes outside the lock.
    fn release(
        &self,
        mut p: std::sync::MutexGuard<'_, HashMap<(u32, u32), Published>>,
        dev: u32,
        id: u32,
    ) {
        let gone = p.remove(&(dev, id));
        drop(p);
        let _ = self.etcd.delete(&self.export_key(self.server, dev, id));
        drop(gone);
    }

    /// Claims this process's server id for its host (see the module doc); the lease that
    /// holds the claim.
    fn claim_server(&self) -> Result<i64, SimError> {
        let key = self.key(&format!("server/{}", self.server));
        for _ in 0..5 {
            self.not_leaving()?;
            let lease = self
                .etcd
                .lease_grant(self.ttl)
                .map_err(|e| ipc(e, "claiming the server id"))?;
            self.not_leaving()?;
            let t = self
                .etcd
                .txn(
                    &[Cmp::Missing(key.clone())],
                    &[Op::Put {
                        key: key.clone(),
                        value: self.host.clone().into_bytes(),
                        lease,
                    }],
                    &[Op::Get(key.clone())],
                )
                .map_err(|e| ipc(e, "claiming the server id"))?;
            if t.succeeded {
                return Ok(lease);
            }
            let _ = self.etcd.lease_revoke(lease);
            let Some(Some(kv)) = t.gets.into_iter().next() else {
                continue; // expired meanwhile: claim again
            };
            self.ours(&kv)?;
            // Our own host holds it: keep its lease alive with the other processes.
            if self.etcd.lease_keepalive(kv.lease).unwrap_or(0) > 0 {
                return Ok(kv.lease);
            }
        }
        Err(err(
            Error::IpcError,
            format!(
                "could not claim server {} in SuperPod {}: its claim kept changing",
                self.server, self.pod
            ),
        ))
    }

    /// Refuses a claim of this process's server id (`kv`, as read) that another host holds:
    /// 107000 naming it.
    fn ours(&self, kv: &etcd::Kv) -> Result<(), SimError> {
        if kv.value == self.host.as_bytes() {
            return Ok(());
        }
        Err(err(
            Error::ParamInvalid,
            format!(
                "ACL_NOTIFY_SIM_SERVER_ID={}: server {} of SuperPod {} is owned by host {:?}; \
                 this host is {:?} (a server id belongs to one host: give this host another \
                 one)",
                self.server,
                self.server,
                self.pod,
                String::from_utf8_lossy(&kv.value),
                self.host
            ),
        ))
    }

    /// Puts this process's liveness key under a new lease, once its host's claim of the server
    /// id and the pod's lease are there; the lease, and the leases of both claims
    /// ([`Joined`]). Two calls when both claims are there: the lease, and one transaction that
    /// registers the process if they are and reads them. A claim found missing is taken with
    /// the lease in hand (a transaction that puts it only if it is still missing): the process
    /// that takes it first gets another lease for itself, the others keep theirs and register
    /// with it, so a job's processes starting at once grant and revoke no lease in vain.
    fn register(&self) -> Result<(i64, Joined, Instant), SimError> {
        let doing = "joining the cluster";
        let grant = || self.etcd.lease_grant(self.ttl).map_err(|e| ipc(e, doing));
        let server_key = self.key(&format!("server/{}", self.server));
        let pod_key = self.key("pod-lease");
        let mut asked = Instant::now();
        let mut lease = grant()?;
        // Every error after the grant gives the lease back (a lease holding a claim it took
        // stays: the claim is the pod's, not this process's).
        let refused = |e: SimError, lease: i64| {
            let _ = self.etcd.lease_revoke(lease);
            e
        };
        for _ in 0..5 {
            self.not_leaving().map_err(|e| refused(e, lease))?;
            let reads = [Op::Get(server_key.clone()), Op::Get(pod_key.clone())];
            // A mark of an earlier process of this pid that left (a job before this one) would
            // name this one "exited" once it is gone, had it died.
            let register = [
                Op::Put {
                    key: self.proc_key(self.server, self.pid),
                    value: self.host.clone().into_bytes(),
                    lease,
                },
                Op::Delete(self.left_key(self.server, self.pid)),
            ];
            let t = self
                .etcd
                .txn(
                    &[
                        Cmp::Exists(server_key.clone()),
                        Cmp::Exists(pod_key.clone()),
                    ],
                    &[&register[..], &reads[..]].concat(),
                    &reads,
                )
                .map_err(|e| refused(ipc(e, doing), lease))?;
            let mut g = t.gets.into_iter();
            let (server, pod) = (g.next().flatten(), g.next().flatten());
            if let Some(kv) = &server {
                self.ours(kv).map_err(|e| refused(e, lease))?;
            }
            if let (true, Some(s), Some(p)) = (t.succeeded, &server, &pod) {
                let joined = Joined {
                    server: s.lease,
                    pod: p.lease,
                };
                return Ok((lease, joined, asked));
            }
            self.not_leaving().map_err(|e| refused(e, lease))?;
            for (missing, key, value) in [
                (server.is_none(), &server_key, self.host.as_bytes()),
                (pod.is_none(), &pod_key, leave::POD_LEASE_VALUE),
            ] {
                if missing
                    && self
                        .claim_with(key, value, lease, doing)
                        .map_err(|e| refused(e, lease))?
                {
                    // This lease holds the claim now: the process takes another.
                    asked = Instant::now();
                    lease = grant()?;
                }
            }
        }
        Err(refused(
            err(
                Error::IpcError,
                format!(
                    "could not join SuperPod {}: the claims of server {} and of the pod's lease \
                     kept changing",
                    self.pod, self.server
                ),
            ),
            lease,
        ))
    }

    /// Puts `key` (a claim) with `value` bound to `lease` if it is missing; whether it did.
    fn claim_with(
        &self,
        key: &[u8],
        value: &[u8],
        lease: i64,
        doing: &str,
    ) -> Result<bool, SimError> {
        let put = Op::Put {
            key: key.to_vec(),
            value: value.to_vec(),
            lease,
        };
        self.etcd
            .txn(&[Cmp::Missing(key.to_vec())], &[put], &[])
            .map(|t| t.succeeded)
            .map_err(|e| ipc(e, doing))
    }

    /// Whether the process is leaving the cluster (`Cluster`'s drop): the threads stop, and
    /// the keeper makes no further call.
    fn leaving(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// [`leaving`](Self::leaving) as an error, between the calls of a series the keeper makes.
    fn not_leaving(&self) -> Result<(), SimError> {
        if self.leaving() {
            return Err(err(Error::IpcError, "leaving the cluster"));
        }
        Ok(())
    }

    /// Renews this process's own lease (see [`renew`]); one found expired (the cluster was
    /// unreachable longer than the TTL, or this process was stopped) is replaced and what it
    /// held put again. Each call may take the client's whole bound when the cluster is silent,
    /// and a teardown waits for this thread: it looks for one between any two calls, so that
    /// the teardown waits for one call, not for a series of them.
    fn keep(&self) {
        let every = renew::period(self.ttl, POLL);
        // A period after the lease's grant was asked for (`join`), however long joining took
        // since: a period after this thread started, the lease went unrenewed for the grant's
        // transaction, the claims, the threads' start and a period, and with a 2 s TTL on a
        // loaded machine expired before its first renewal (two owners of a c_abi collective
        // at load ~15: their exports went with it, "its export is gone").
        let granted = *lock(&self.proc_granted);
        let first = renew::first(granted, every);
        let mut since = renew::Since::new(granted);
        self.keep_renewing(first, |late| {
            let pl = *lock(&self.proc_lease);
            let start = Instant::now();
            let renewed = self.etcd.lease_keepalive(pl);
            since.note(late, start.elapsed());
            match renewed {
                Ok(0) => {}
                Ok(_) => {
                    since = renew::Since::new(start);
                    return true;
                }
                Err(_) => return false,
            }
            if self.leaving() {
                return false;
            }
            // Found out at once, and said so: the other hosts have been naming this process
            // dead, and without this its own errors blamed them (a c_abi collective at load
            // 15: rank 0's record said rank 7 "is dead", rank 7's timeout named rank 0 dead,
            // both alive, both leases lapsed).
            let lapse = renew::Lapse {
                found: Instant::now(),
                since,
                ttl: self.ttl,
                life: self.life(),
            };
            eprintln!(
                "acl-notify-sim: server {} pid {} of SuperPod {}: {}",
                self.server,
                self.pid,
                self.pod,
                lapse.words(lapse.found)
            );
            *lock(&self.lapse) = Some(lapse);
            let Ok((new, joined, asked)) = self.register() else {
                return false;
            };
            since = renew::Since::new(asked);
            *lock(&self.server_lease) = joined.server;
            *lock(&self.pod_lease) = joined.pod;
            *lock(&self.proc_lease) = new;
            // A new life: what is made from now on is bound to the new lease, and the lapse
            // is none of its business.
            self.life.fetch_add(1, Ordering::Relaxed);
            for ((dev, id), p) in lock(&self.published).iter() {
                if self.leaving() {
                    break;
                }
                let k = self.export_key(self.server, *dev, *id);
                let _ = self.etcd.put(&k, &p.value, new);
            }
            for k in lock(&self.held).values() {
                if self.leaving() {
                    break;
                }
                let _ = self.etcd.put(k, b"", new);
            }
            mem::republish(self, new);
            true
        });
    }

    /// Renews the host's claim on the server id and the pod's lease (see [`renew`]), the first
    /// time at once (see [`Joined`]); one found expired is claimed again.
    fn keep_claim(&self) {
        self.keep_renewing(Instant::now(), |_| {
            let sl = *lock(&self.server_lease);
            let server = match self.etcd.lease_keepalive(sl) {
                Ok(0) => match self.claim_server() {
                    Ok(new) => {
                        *lock(&self.server_lease) = new;
                        true
                    }
                    Err(_) => false,
                },
                Ok(_) => true,
                Err(_) => false,
            };
            if self.leaving() {
                return server;
            }
            let pl = *lock(&self.pod_lease);
            let pod = match self.etcd.lease_keepalive(pl) {
                Ok(0) => match self.claim_pod() {
                    Ok(new) => {
                        *lock(&self.pod_lease) = new;
                        true
                    }
                    Err(_) => false,
                },
                Ok(_) => true,
                Err(_) => false,
            };
            server && pod
        });
    }

    /// Calls `renew` (whether the renewal went through) at `first`, then on [`renew`]'s
    /// schedule, until the process leaves the cluster.
    /// `renew` is told how late it starts (after it was due).
    fn keep_renewing(&self, first: Instant, mut renew: impl FnMut(Duration) -> bool) {
        let every = renew::period(self.ttl, POLL);
        let mut next = first;
        while !self.leaving() {
            let now = Instant::now();
            if now < next {
                std::thread::sleep(POLL.min(next - now));
                continue;
            }
            let late = now - next;
            let ok = renew(late);
            next = renew::next(now, late, Instant::now(), ok, every);
        }
    }

    /// Applies the remote records put under this process's `rec/` prefix from `from` on.
    fn watch(&self, from: i64) {
        let prefix = self.key(&format!("rec/{}/{}/", self.server, self.pid));
        let mut from = from;
        while !self.stop.load(Ordering::Relaxed) {
            match self.etcd.watch(&prefix, from, &self.stop, POLL, |ev| {
                self.apply(&prefix, ev)
            }) {
                Ok(next) => from = next,
                Err(e) => {
                    eprintln!("acl-notify-sim: remote records of {}: {e}", self.prefix);
                    return;
                }
            }
        }
    }

    fn apply(&self, prefix: &[u8], ev: etcd::Event) {
        let Some(rest) = ev.kv.key.strip_prefix(prefix) else {
            return;
        };
        let rest = String::from_utf8_lossy(rest);
        // Memory requests of importers (`m/…`) and owners' answers to this process's reads
        // (`a/…`): see [`mem`].
        if let Some(m) = rest.strip_prefix("m/") {
            return self.apply_mem(m, &ev);
        }
        if let Some(h) = rest.strip_prefix("mh/") {
            return self.apply_mem_hold(h, &ev);
        }
        if rest.starts_with("a/") {
            return self.apply_answer(&ev);
        }
        let mut parts = rest.splitn(3, '/');
        let (Some(Ok(dev)), Some(Ok(id))) = (
            parts.next().map(str::parse::<u32>),
            parts.next().map(str::parse::<u32>),
        ) else {
            return;
        };
        if parts.next().is_some() {
            // A hold (`<dev>/<id>/h/…`): one going may be the last.
            if ev.delete {
                self.release_if_unheld(dev, id, Some(ev.kv.mod_revision));
            }
            return;
        }
        if ev.delete {
            return;
        }
        // A record is what `record` puts: the incarnation, the importer and the request's
        // number. Anything else (a value written by hand, or damaged) is no record: a
        // missing generation read as 0 would record on a notify of generation 0.
        let v = serde_json::from_slice::<Value>(&ev.kv.value).unwrap_or(Value::Null);
        let (Some(generation), Some(server), Some(pid), Some(tok)) = (
            v["gen"].as_u64(),
            v["server"].as_u64().and_then(|x| u32::try_from(x).ok()),
            v["pid"].as_i64().and_then(|x| i32::try_from(x).ok()),
            v["tok"].as_u64(),
        ) else {
            self.refuse(
                &ev.kv.key,
                "not a record (a JSON object with gen, server, pid and tok)",
            );
            return;
        };
        let r = {
            let p = lock(&self.published);
            match p.get(&(dev, id)) {
                Some(p) if u64::from(p.generation) == generation => p.slot.upgrade(),
                _ => None,
            }
        };
        if !self.first_time((server, pid), tok) {
            return;
        }
        if let Some(r) = r
            && r.live().is_ok()
        {
            if v["reset"].as_bool() == Some(true) {
                // An importer's batch reset: one CAS, as a local one.
                r.slot().reset(&r.file().waiter());
                return;
            }
            // Counted before the flag is set: whoever the record wakes sees it counted.
            self.applied.fetch_add(1, Ordering::Relaxed);
            r.slot().record(&r.file().waiter(), self.pid);
        }
    }

    /// Says on stderr that the value put at `key`, under this process's record keys, was
    /// refused (`why`), for the first [`REFUSALS_SAID`] of them: nobody else would learn it
    /// (no call of this process made the request), and a flood of them says no more.
    fn refuse(&self, key: &[u8], why: &str) {
        let n = self.refused.fetch_add(1, Ordering::Relaxed);
        if n < REFUSALS_SAID {
            let last = if n + 1 == REFUSALS_SAID {
                " (further refusals are not reported)"
            } else {
                ""
            };
            eprintln!(
                "acl-notify-sim: refused the value at {}: {why}{last}",
                String::from_utf8_lossy(key)
            );
        }
    }

    /// The number of this process's next request to another host's owner.
    fn token(&self) -> u64 {
        self.tokens.fetch_add(1, Ordering::Relaxed)
    }

    /// `true` the first time the owner sees request `tok` of `from` (see [`replay`]).
    fn first_time(&self, from: replay::Sender, tok: u64) -> bool {
        lock(&self.replays).first(from, tok)
    }

    /// Delivers one record (or, with `reset`, a batch reset) to remote notify `n`'s owner
    /// (see the module doc): both go the same way, so the owner applies them in the order this
    /// process made them. Codes: 107017 the owner is dead (its lease expired) or withdrew the
    /// export; 507022 unreachable.
    fn record(&self, n: &RemoteNotify, reset: bool) -> Result<(), SimError> {
        self.record_numbered(n, reset, self.token())
    }

    /// What a record (or batch reset) of `n` numbered `tok` puts, in a transaction on the
    /// condition that the export is still the incarnation imported.
    fn record_op(&self, n: &RemoteNotify, reset: bool, tok: u64) -> (Cmp, Op) {
        let s = self;
        let export = s.export_key(n.server, n.device, n.id);
        let rec = s.key(&format!(
            "rec/{}/{}/{}/{}",
            n.server, n.owner_pid, n.device, n.id
        ));
        let mut value = json!({
            "gen": n.generation,
            "server": s.server,
            "pid": s.pid,
            "tok": tok,
        });
        if reset {
            value["reset"] = json!(true);
        }
        let value = value.to_string().into_bytes();
        // Bound to this process's lease, as its holds and memory requests are: the key goes
        // with the last process that recorded (its deletion is no record: `apply` skips it),
        // instead of staying in etcd for ever.
        let lease = *lock(&s.proc_lease);
        (
            Cmp::CreatedAt(export, n.create_rev),
            Op::Put {
                key: rec,
                value,
                lease,
            },
        )
    }

    /// [`record`](Self::record) as request number `tok` (a record that was sent before, in a
    /// transaction that may have been committed, is sent again with its number: the owner
    /// applies it once).
    fn record_numbered(&self, n: &RemoteNotify, reset: bool, tok: u64) -> Result<(), SimError> {
        let what = || {
            format!(
                "{} on notify {} of device {} of server {} (owner pid {})",
                if reset { "batch reset" } else { "record" },
                n.id,
                n.device,
                n.server,
                n.owner_pid
            )
        };
        let Some((export, owner)) =
            self.put_if_current(self.record_op(n, reset, tok), (n.server, n.owner_pid), what)?
        else {
            return Ok(());
        };
        use crate::diag::RemoteState;
        let why = match (export, owner) {
            (_, RemoteState::Exited) => {
                "the owner exited: it left the cluster (aclFinalize), and its notifies with it"
            }
            (_, RemoteState::Dead) => "the owner is dead: its cluster lease expired",
            (false, RemoteState::Live) => "the owner withdrew the export (it destroyed the notify)",
            (true, RemoteState::Live) => "the notify was destroyed and its id exported again",
        };
        Err(err(
            Error::InvalidHandle,
            format!(
                "{} not delivered: {why}{}",
                what(),
                self.own_lapse_text(n.life)
            ),
        ))
    }

    /// `"; this process's own cluster lease expired 3.2 s ago: …"` once a renewal found the
    /// lease of life `life` ([`Shared::life`]) or of a later one expired (see
    /// [`renew::Lapse`]), else nothing: what a message about something this process made in
    /// life `life` (an import, a publication) adds when it names another process dead or
    /// reports what did not arrive, so that a process the cluster took for dead does not
    /// blame only its peers. What it made after it joined again is bound to a lease that did
    /// not lapse: its errors blame no lapse of an earlier one.
    fn own_lapse_text(&self, life: u32) -> String {
        match *lock(&self.lapse) {
            Some(l) if l.life >= life => format!("; {}", l.words(Instant::now())),
            _ => String::new(),
        }
    }

    /// This process's life now (see [`Shared::life`]).
    fn life(&self) -> u32 {
        self.life.load(Ordering::Relaxed)
    }
}

impl Cluster {
    /// Joins the cluster as process `pid` of server `server` on host `<hostname>/<namespace>`:
    /// registers the process, claims the server id for the host and starts the lease keeper.
    /// `seed` is the `Sim`'s notify table's (the remote imports share its stamp: see
    /// [`REMOTE_BASE`]). Codes: 507022 cluster unreachable; 107000 the server id belongs to
    /// another host.
    pub fn join(
        cfg: &ClusterConfig,
        server: u32,
        namespace: &str,
        pid: i32,
        seed: u64,
    ) -> Result<Cluster, SimError> {
        let shared = Arc::new(Shared {
            etcd: Etcd::new(cfg.endpoints.clone(), cfg.timeout),
            pod: cfg.pod.clone(),
            prefix: format!("/acl-notify/{}/", cfg.pod),
            host: host_identity(namespace),
            server,
            pid,
            ttl: cfg.ttl,
            proc_lease: Mutex::new(0),
            proc_granted: Mutex::new(Instant::now()),
            lapse: Mutex::new(None),
            life: std::sync::atomic::AtomicU32::new(0),
            server_lease: Mutex::new(0),
            pod_lease: Mutex::new(0),
            stop: AtomicBool::new(false),
            published: Mutex::new(HashMap::new()),
            held: Mutex::new(HashMap::new()),
            applied: std::sync::atomic::AtomicU64::new(0),
            tokens: std::sync::atomic::AtomicU64::new(1),
            replays: Mutex::new(replay::Replays::default()),
            refused: std::sync::atomic::AtomicU32::new(0),
            published_mem: Mutex::new(HashMap::new()),
            pending: Mutex::new(mem::Pending::default()),
        });
        // Two calls when the server id and the pod's lease are claimed (every process of a
        // job but the first ones of each host): the lease, and one transaction that registers
        // the process and reads both claims. The claims' leases are renewed at once by the
        // claim keeper's thread, not here (see [`Joined`]).
        let (proc_lease, joined, granted) = shared.register()?;
        *lock(&shared.proc_lease) = proc_lease;
        *lock(&shared.proc_granted) = granted;
        *lock(&shared.server_lease) = joined.server;
        *lock(&shared.pod_lease) = joined.pod;
        // The error messages of `diag` ask it about whitelisted processes of other hosts.
        crate::fork::required()?;
        let weak: Weak<dyn crate::diag::RemoteLiveness> = Arc::downgrade(&shared) as _;
        crate::diag::register_remote_liveness(namespace, weak);
        let mut keepers = Vec::new();
        for (name, keep) in [
            ("acl-sim-lease", Shared::keep as fn(&Shared)),
            ("acl-sim-claim", Shared::keep_claim),
        ] {
            let s = Arc::clone(&shared);
            match std::thread::Builder::new()
                .name(name.into())
                .spawn(move || keep(&s))
            {
                Ok(t) => keepers.push(t),
                Err(e) => {
                    // Leaves the cluster as a drop does: the thread started, then the leases.
                    shared.stop.store(true, Ordering::Relaxed);
                    keepers.into_iter().for_each(|t| drop(t.join()));
                    let _ = shared.etcd.lease_revoke(proc_lease);
                    return Err(err(Error::DrvInternalError, format!("lease thread: {e}")));
                }
            }
        }
        Ok(Cluster {
            shared,
            remote: RwLock::new(Slab::with_indices(
                Kind::Notify,
                seed,
                REMOTE_BASE..MAX_LIVE,
            )),
            mem_imports: RwLock::new(mem::MemImports::default()),
            carries: carry::Carries::default(),
            watcher: Mutex::new(None),
            keepers: Mutex::new(keepers),
        })
    }

    /// Starts the watch of this process's remote records (once), from the current revision.
    fn ensure_watch(&self) -> Result<(), SimError> {
        let mut w = lock(&self.watcher);
        if w.is_some() {
            return Ok(());
        }
        let s = &self.shared;
        let prefix = s.key(&format!("rec/{}/{}/", s.server, s.pid));
        let (_, rev) = s
            .etcd
            .get_prefix(&prefix)
            .map_err(|e| ipc(e, "starting the remote-record watch"))?;
        let s = Arc::clone(&self.shared);
        *w = Some(
            std::thread::Builder::new()
                .name("acl-sim-watch".into())
                .spawn(move || s.watch(rev + 1))
                .map_err(|e| err(Error::DrvInternalError, format!("watch thread: {e}")))?,
        );
        Ok(())
    }

    /// Publishes notify `r` (exported with `nonce`; `open` without PID validation, else with
    /// whitelist `wl`) so other hosts can import it and record on it. Code 507022.
    pub fn publish(
        &self,
        r: &Arc<SlotRef>,
        nonce: [u8; 16],
        open: bool,
        wl: &[WhitelistEntry],
    ) -> Result<(), SimError> {
        self.ensure_watch()?;
        let s = &self.shared;
        let value = export::entry(r.generation(), nonce, s.pid, open, wl)
            .to_string()
            .into_bytes();
        let key = s.export_key(s.server, r.device(), r.id());
        let life = s.life();
        let lease = *lock(&s.proc_lease);
        s.etcd
            .put(&key, &value, lease)
            .map_err(|e| ipc(e, &format!("publishing notify {} to the cluster", r.id())))?;
        let mut p = lock(&s.published);
        // Published again (a new whitelist): the other hosts' imports are of the life it was
        // first published in.
        let life = p
            .get(&(r.device(), r.id()))
            .filter(|e| e.generation == r.generation())
            .map_or(life, |e| e.life.min(life));
        p.insert(
            (r.device(), r.id()),
            Published {
                generation: r.generation(),
                slot: Arc::downgrade(r),
                value,
                keep: None,
                life,
            },
        );
        Ok(())
    }

    /// The owner's destroy of notify `r`: if this process published it, the export stays
    /// while importers on other hosts hold it (SPEC §2: the id is released when the last
    /// holder destroys it), the cluster keeping a reference to it until the last hold goes,
    /// and marked destroyed, so that its key imports nothing more (CANN's owner destroy
    /// removes the shared id the key names: `export::destroyed`; the holds' records still
    /// land, the entry's incarnation unchanged); else the export is withdrawn. Nothing (no
    /// etcd call) for a notify never published.
    ///
    /// Under `published`, as a hold's release is judged: a release read meanwhile waits, and
    /// then finds the notify kept and withdraws it if that hold was the last.
    pub fn withdraw(&self, r: &Arc<SlotRef>) {
        let s = &self.shared;
        let (dev, id) = (r.device(), r.id());
        let mut p = lock(&s.published);
        let value = match p.get_mut(&(dev, id)) {
            Some(e) if e.generation == r.generation() => {
                e.keep = Some(Arc::clone(r));
                e.value = export::destroyed(&e.value);
                e.value.clone()
            }
            _ => return,
        };
        if s.unheld(&s.holder_prefix(s.server, s.pid, dev, id), None) {
            return s.release(p, dev, id);
        }
        let lease = *lock(&s.proc_lease);
        let _ = s.etcd.put(&s.export_key(s.server, dev, id), &value, lease);
    }

    /// Registers import handle `h` of remote notify `n` as a holder of it (a key bound to this
    /// process's lease: it goes with [`Cluster::remove`] or this process's death). Codes:
    /// 107017 the export is gone (the owner died, or withdrew it); 507022.
    pub fn hold(&self, h: u64, n: &RemoteNotify) -> Result<(), SimError> {
        let s = &self.shared;
        let mut key = s.holder_prefix(n.server, n.owner_pid, n.device, n.id);
        key.extend_from_slice(format!("{}/{}/{h}", s.server, s.pid).as_bytes());
        let held = s.hold(
            Held::Notify(h),
            key,
            s.export_key(n.server, n.device, n.id),
            n.create_rev,
            "importing a notify of another host",
        )?;
        let what = format!(
            "notify {} of device {} of server {}",
            n.id, n.device, n.server
        );
        let Some(export) = held else {
            return Err(err(
                Error::InvalidHandle,
                format!(
                    "{what}: its export is gone (the owner destroyed it or died) since the key \
                     was looked up"
                ),
            ));
        };
        // The owner destroyed it after the key was looked up, before the hold was put (the
        // caller's `remove` lets the hold go).
        if export::is_destroyed(&export) {
            return Err(err(
                Error::InvalidHandle,
                format!(
                    "key of {what}: {}",
                    crate::diag::destroyed_by_owner(n.owner_pid)
                ),
            ));
        }
        Ok(())
    }

    /// Looks up notify `id` of device `dev` of server `server` (generation `generation`,
    /// export nonce `nonce`) in the registry: the import, and the whitelist to check (`None`
    /// for an open export). Codes: 107017 not exported to the cluster (or gone); 507022.
    pub fn lookup(
        &self,
        server: u32,
        dev: u32,
        id: u32,
        generation: u32,
        nonce: [u8; 16],
        local_device: u32,
    ) -> Result<(RemoteNotify, Option<Whitelist>), SimError> {
        let s = &self.shared;
        let stale = |why: String| {
            err(
                Error::InvalidHandle,
                format!("key of notify {id} on device {dev} of server {server}: {why}"),
            )
        };
        let key = s.export_key(server, dev, id);
        let (v, kv) = export::read(
            s,
            &key,
            "importing a notify of another host",
            generation,
            nonce,
        )?
        .map_err(|why| {
            let words = (
                "a notify",
                "the owner left the cluster, or died and its lease expired",
                "the notify no longer exists or was exported again (the key is stale)",
            );
            stale(why.explain(server, &s.pod, words))
        })?;
        let wl = export::whitelist(&v);
        Ok((
            RemoteNotify {
                server,
                device: dev,
                id,
                generation,
                owner_pid: export::owner_pid(&v),
                create_rev: kv.create_revision,
                local_device,
                life: s.life(),
            },
            wl,
        ))
    }

    /// A handle for an imported remote notify.
    pub fn insert(&self, n: RemoteNotify) -> Option<u64> {
        write(&self.remote).insert(n).ok()
    }

    /// The remote import behind handle `h`, if it is one.
    pub fn get(&self, h: u64) -> Option<RemoteNotify> {
        read(&self.remote).get(h).cloned()
    }

    /// Drops handle `h`, and its hold on the owner's notify (if the cluster is unreachable the
    /// hold stays until this process's lease goes); whether it was a remote import.
    pub fn remove(&self, h: u64) -> bool {
        let was = write(&self.remote).remove(h).is_some();
        self.shared.let_go(&Held::Notify(h));
        was
    }

    /// A batch reset of remote notify `n`: delivered now, in order with this process's
    /// records of it (see [`Shared::record`]).
    pub fn reset(&self, n: &RemoteNotify) -> Result<(), SimError> {
        self.shared.record(n, true)
    }

    /// Whether process `pid` of server `server` is alive in the cluster (its lease holds).
    /// Code 507022.
    pub fn alive(&self, server: u32, pid: i32) -> Result<bool, SimError> {
        let s = &self.shared;
        s.etcd
            .get(&s.proc_key(server, pid))
            .map(|kv| kv.is_some())
            .map_err(|e| ipc(e, "asking the cluster whether a process is alive"))
    }

    /// Remote records this process applied to its own notifies so far.
    pub fn applied(&self) -> u64 {
        self.shared.applied.load(Ordering::Relaxed)
    }
}

/// The range that holds every key of `keys`: the smallest, and the key right after the
/// largest (it with a zero byte appended). `None` for no keys.
fn key_span(keys: &[Vec<u8>]) -> Option<(&[u8], Vec<u8>)> {
    let start = keys.iter().min()?;
    let mut end = keys.iter().max()?.clone();
    end.push(0);
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;

    /// The liveness of several processes is one range read: from the smallest key to right
    /// after the largest, so both ends are in it, and nothing to read for no processes.
    #[test]
    fn the_liveness_range_holds_every_key_asked() {
        let keys: Vec<Vec<u8>> = ["p/proc/1/20", "p/proc/1/100", "p/proc/2/3"]
            .into_iter()
            .map(|k| k.as_bytes().to_vec())
            .collect();
        let (start, end) = key_span(&keys).unwrap();
        assert_eq!(start, b"p/proc/1/100");
        assert_eq!(end, b"p/proc/2/3\0");
        assert!(keys.iter().all(|k| start <= k.as_slice() && k < &end));
        // A key that extends the largest one is past the range.
        assert!(b"p/proc/2/30".as_slice() >= end.as_slice());
        assert!(key_span(&[]).is_none());
    }

    /// A call refused because this process's lease is gone says the lease expired and what
    /// to do, not merely that etcd refused it.
    #[test]
    fn a_call_on_an_expired_lease_says_the_membership_was_lost() {
        let e = ipc(
            EtcdError::LeaseGone("etcdserver: requested lease not found".into()),
            "record on notify 3",
        );
        assert_eq!(acl_notify_core::BackendError::kind(&e), Error::IpcError);
        let m = e.to_string();
        assert!(
            m.contains("record on notify 3: this process's cluster lease expired")
                && m.contains("lost its membership")
                && m.contains("retry"),
            "{m}"
        );
    }

    /// What an etcd stand-in does with a request.
    enum Reply {
        /// Answers it with this body.
        Answer(Value),
        /// Holds it unanswered until the client closes the connection (gives the try up),
        /// then calls this.
        Hold(Box<dyn FnOnce() + Send>),
    }

    /// An etcd stand-in on a loopback port: each request (its path and JSON body) gets what
    /// `answer` gives.
    fn stand_in(answer: impl Fn(&str, &Value) -> Reply + Send + Sync + 'static) -> SocketAddr {
        use std::io::{BufRead, BufReader, Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut out) = conn else { return };
                let answer = Arc::clone(&answer);
                std::thread::spawn(move || {
                    let mut r = BufReader::new(out.try_clone().unwrap());
                    loop {
                        // One request: its head, then Content-Length bytes of body.
                        let (mut path, mut len, mut line) = (String::new(), 0usize, String::new());
                        while {
                            line.clear();
                            r.read_line(&mut line).unwrap_or(0) > 0
                        } {
                            let t = line.trim_end();
                            if t.is_empty() {
                                break;
                            }
                            if let Some(p) = t.strip_prefix("POST ") {
                                path = p.split(' ').next().unwrap_or("").to_owned();
                            }
                            let lower = t.to_ascii_lowercase();
                            if let Some(n) = lower.strip_prefix("content-length:") {
                                len = n.trim().parse().unwrap_or(0);
                            }
                        }
                        if path.is_empty() {
                            return;
                        }
                        let mut body = vec![0u8; len];
                        if r.read_exact(&mut body).is_err() {
                            return;
                        }
                        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let answer = match answer(&path, &req) {
                            Reply::Answer(v) => v.to_string(),
                            Reply::Hold(then) => {
                                let _ = r.read(&mut [0u8; 1]);
                                return then();
                            }
                        };
                        let head = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                            answer.len()
                        );
                        if out.write_all(head.as_bytes()).is_err()
                            || out.write_all(answer.as_bytes()).is_err()
                        {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    /// The stand-in's answer to a transaction that registers a process: the claims are
    /// there, held by leases 1002 (the server id's) and 1003 (the pod's), with the value the
    /// process puts (its host), as the registering transaction reads them.
    fn registered(req: &Value) -> Value {
        let ops = req["success"].as_array().cloned().unwrap_or_default();
        let value = ops
            .iter()
            .find_map(|o| o["request_put"]["value"].as_str())
            .unwrap_or("")
            .to_owned();
        let mut claims = ["1002", "1003"].into_iter();
        let responses: Vec<Value> = ops
            .iter()
            .map(|o| match o.get("request_range") {
                Some(r) => json!({ "response_range": { "kvs": [{
                    "key": r["key"], "value": value,
                    "lease": claims.next().unwrap_or("1003")
                }] } }),
                None => json!({}),
            })
            .collect();
        json!({ "succeeded": true, "responses": responses })
    }

    /// An etcd stand-in for [`a_held_renewal_of_the_claim_does_not_hold_back_the_process_s`]:
    /// lease 1001 granted (the process's: `register` asks first), the claims found held by
    /// leases 1002 (the server id's) and 1003 (the pod's), every other call answered with what
    /// the client reads as success, and each renewal of lease 1002 held unanswered (until the
    /// client gives the try up). It notes whether lease 1001 was renewed while a renewal of
    /// 1002 was held.
    fn holding_etcd() -> (SocketAddr, Arc<(std::sync::atomic::AtomicI32, AtomicBool)>) {
        let state = Arc::new((std::sync::atomic::AtomicI32::new(0), AtomicBool::new(false)));
        let st = Arc::clone(&state);
        let grants = std::sync::atomic::AtomicI64::new(1001);
        let addr = stand_in(move |path, req| match path {
            "/v3/lease/grant" => Reply::Answer(json!({
                "ID": grants.fetch_add(1, Ordering::Relaxed).to_string()
            })),
            "/v3/lease/keepalive" if req["ID"] == "1002" => {
                st.0.fetch_add(1, Ordering::SeqCst);
                let st = Arc::clone(&st);
                Reply::Hold(Box::new(move || {
                    st.0.fetch_sub(1, Ordering::SeqCst);
                }))
            }
            "/v3/lease/keepalive" => {
                if st.0.load(Ordering::SeqCst) > 0 {
                    st.1.store(true, Ordering::SeqCst);
                }
                Reply::Answer(json!({ "result": { "TTL": "1" } }))
            }
            "/v3/kv/txn" => Reply::Answer(registered(req)),
            _ => Reply::Answer(json!({ "header": { "revision": "1" } })),
        });
        (addr, state)
    }

    /// The process's lease is renewed while a renewal of the host's claim hangs (a member
    /// that holds it, a loaded machine: up to the client's 3 s bound, longer than a short
    /// TTL). Before, one thread renewed both in turn: while it waited on the claim's renewal,
    /// the process's lease went unrenewed and, with a TTL of 2 s, expired.
    #[test]
    fn a_held_renewal_of_the_claim_does_not_hold_back_the_process_s() {
        let (addr, state) = holding_etcd();
        let cfg = ClusterConfig::parse(&format!("etcd://{addr}/renew"))
            .unwrap()
            .with_ttl(1)
            .unwrap();
        let c = Cluster::join(&cfg, 0, "unit-cluster-renew", std::process::id() as i32, 1)
            .expect("join the stand-in");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !state.1.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let renewed = state.1.load(Ordering::SeqCst);
        drop(c);
        assert!(
            renewed,
            "the process's lease was not renewed while the claim's renewal was held"
        );
    }

    /// A process whose own lease a renewal finds expired (etcd answers the renewal with no
    /// TTL: the process was stopped, or starved of CPU, longer than its TTL) knows it, and
    /// says so where it would otherwise blame its peers: a record to an owner the cluster
    /// has as dead says this process's own lease expired too, how long it went unrenewed and
    /// why. Before, it said only "the owner is dead" (a c_abi collective at load 15: rank 0's
    /// record named rank 7 dead, rank 7's timeout named rank 0 dead, both alive, both leases
    /// lapsed). Only about what it made in the life whose lease lapsed: once it joined again,
    /// what it imports or publishes is bound to a live lease, and errors about that blame no
    /// lapse of the old one (before, the lapse was kept for good, and every later error about
    /// a dead peer said this process's own lease had expired).
    #[test]
    fn a_process_whose_own_lease_expired_says_so_in_its_errors() {
        let grants = Arc::new(std::sync::atomic::AtomicI64::new(1001));
        let g = Arc::clone(&grants);
        let addr = stand_in(move |path, req| match path {
            "/v3/lease/grant" => Reply::Answer(json!({
                "ID": g.fetch_add(1, Ordering::SeqCst).to_string()
            })),
            // The process's first lease has expired; every other one lives.
            "/v3/lease/keepalive" if req["ID"] == "1001" => {
                Reply::Answer(json!({ "result": { "TTL": "0" } }))
            }
            "/v3/lease/keepalive" => Reply::Answer(json!({ "result": { "TTL": "1" } })),
            // A record's transaction (on the export's incarnation) finds the export and its
            // owner gone: the owner's lease expired as well.
            "/v3/kv/txn" if req["compare"][0]["create_revision"] == "7" => Reply::Answer(json!({
                "succeeded": false,
                "responses": [
                    { "response_range": {} }, { "response_range": {} }, { "response_range": {} }
                ]
            })),
            "/v3/kv/txn" => Reply::Answer(registered(req)),
            _ => Reply::Answer(json!({ "header": { "revision": "1" } })),
        });
        let cfg = ClusterConfig::parse(&format!("etcd://{addr}/lapse"))
            .unwrap()
            .with_ttl(1)
            .unwrap();
        let c = Cluster::join(&cfg, 0, "unit-cluster-lapse", std::process::id() as i32, 1)
            .expect("join the stand-in");
        // A notify published in the first life (`publish` itself needs a live slot: the
        // entry it makes, directly), and one published in the next life, below.
        let published = |life| Published {
            generation: 1,
            slot: Weak::new(),
            value: Vec::new(),
            keep: None,
            life,
        };
        lock(&c.shared.published).insert((0, 1), published(0));
        // The keeper finds lease 1001 expired (within its TTL by this process's clock, or,
        // on a loaded machine, after it: the words say which) and joins again, a new life
        // under a lease after 1001 and the claims' 1002 and 1003. A bound that only turns a
        // hang into a failure.
        let deadline = Instant::now() + Duration::from_secs(60);
        while c.shared.life() == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(c.shared.life(), 1, "the keeper did not join again");
        assert!(grants.load(Ordering::SeqCst) > 1002);
        lock(&c.shared.published).insert((0, 2), published(1));
        let owner_dead = |life| {
            let n = RemoteNotify {
                server: 1,
                device: 0,
                id: 3,
                generation: 1,
                owner_pid: 4242,
                create_rev: 7,
                local_device: 0,
                life,
            };
            let e = c.shared.record(&n, false).expect_err("the owner is gone");
            assert_eq!(
                acl_notify_core::BackendError::kind(&e),
                Error::InvalidHandle
            );
            e.to_string()
        };
        use crate::diag::RemoteLiveness;
        // Imported before the lapse: its hold went with the lapsed lease, which may be why
        // the owner is gone: said.
        let old = owner_dead(0);
        // Imported after the join (the hold under the live lease): the owner's death is
        // none of this process's lapse.
        let new = owner_dead(1);
        // A wait's timeout on a notify published in the first life (the other hosts' imports
        // of it stale) says the lapse; on one published only in the new life, or never, not.
        let (first, next, never) = (
            c.shared.own_lapse(0, 1),
            c.shared.own_lapse(0, 2),
            c.shared.own_lapse(0, 9),
        );
        drop(c);
        assert!(
            old.contains("not delivered: the owner is dead: its cluster lease expired")
                && old.contains("this process's own cluster lease expired")
                && old.contains("its TTL of 1 s")
                && old.contains(ENV_CLUSTER_TTL),
            "{old}"
        );
        assert!(
            new.contains("not delivered: the owner is dead: its cluster lease expired")
                && !new.contains("own cluster lease"),
            "{new}"
        );
        assert!(
            first.starts_with("; this process's own cluster lease expired"),
            "{first}"
        );
        assert_eq!((next.as_str(), never.as_str()), ("", ""));
    }
}

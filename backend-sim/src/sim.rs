//! [`Sim`], a process's connection to one simulated machine: its per-process state
//! ([`Inner`]), the checks every call shares, and namespace removal.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use acl_notify_core::{BackendError, Chip, Error, Feature, Op, RawNotify, Soc, StreamDestroy};
use acl_notify_handles::Slab;

use crate::MergedRecords;
use crate::config::check_namespace;
use crate::entries::{NotifyEntry, StreamEntry};
use crate::error::{SimError, err};
use crate::job::SimStream;
use crate::locks::{lock, write};
use crate::mem::state::MemState;
use crate::shm::{GcReport, ShmFile, SlotRef};
use crate::{cluster, cnt, event, mapfile, waitgraph};

/// A process's connection to one simulated machine (a namespace). `Send + Sync`; clones share
/// the connection. Dropping the last clone discards its streams' queued tasks and drops its
/// notify references.
#[derive(Clone, Debug)]
pub struct Sim {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// This `Sim`'s number in the process (never reused): names it in the threads' pair caches.
    pub(crate) serial: u64,
    pub(crate) soc: Soc,
    /// `soc.has(Feature::Notify)`, kept: every notify call asks ([`Sim::notify_calls`]), and
    /// `Soc::has` (another crate, not inlined) builds the SoC's whole capability table to
    /// answer — 40 of the 62 instructions the check cost a call (callgrind).
    pub(crate) has_notify: bool,
    pub(crate) chip: Chip,
    pub(crate) devices: u32,
    pub(crate) server_id: u32,
    /// Every device's groups ([`Sim::device_groups`]).
    pub(crate) groups: Vec<crate::groups::DeviceGroup>,
    pub(crate) namespace: String,
    pub(crate) pid: i32,
    /// What a whitelist entry naming this process holds, as this process can take it
    /// ([`crate::sys::process_identity`]).
    pub(crate) identity: crate::sys::ProcessIdentity,
    /// This process's server.
    pub(crate) file: Arc<ShmFile>,
    /// Other servers' files, opened by cross-server imports.
    pub(crate) remote: Mutex<HashMap<u32, Arc<ShmFile>>>,
    /// The handle tables. A handle's value comes back once its slot's 20-bit generation
    /// wrapped (2²⁰ destroys of the slot), and then names the new entry: what is kept *by
    /// handle value* elsewhere must not be found again through it. The notify entries' pins,
    /// by stream handle, are skipped once their stream is unlisted (`PinOwner::is_current`);
    /// the per-thread pair caches miss after any removal (the handle epoch, see `pair_cache`);
    /// `defaults` holds live default streams only (a device's is replaced
    /// when it goes, `lookup`); tasks hold what they use by reference, not by handle.
    pub(crate) notifies: RwLock<Slab<NotifyEntry>>,
    pub(crate) streams: RwLock<Slab<StreamEntry>>,
    pub(crate) defaults: Mutex<Vec<Option<u64>>>,
    /// Each device's default streams' failure scope ([`Sim::set_default_failure_scope`]).
    pub(crate) default_scopes: Vec<Arc<crate::failure_scope::ScopeSlot>>,
    /// Streams a draining destroy took out of `streams` and has not finished with, and their
    /// devices: no call finds them any more, but [`Sim::discard_streams_where`] still does.
    /// Added under the `streams` write lock (so a discard sees a stream in one or the other).
    pub(crate) draining: Mutex<Vec<(Arc<SimStream>, u32)>>,
    /// `peers[d]` bit `p`: this process enabled access from device `d` to device `p`.
    pub(crate) peers: Mutex<Vec<u64>>,
    pub(crate) op_wait_timeout: AtomicU32,
    pub(crate) stream_seq: AtomicU32,
    /// Tests: every stream this `Sim` makes from now on parks its waits that would block and
    /// stays parked (`Stream::force_parking`; [`Sim::force_parking`]).
    #[cfg(test)]
    pub(crate) force_parking: std::sync::atomic::AtomicBool,
    /// CPUs handed to new stream workers in turn (empty: the kernel places them).
    pub(crate) cpus: Vec<usize>,
    pub(crate) cpu_seq: AtomicU32,
    /// The kernel places the workers and they move when crowded ([`StreamCpus::Adaptive`]).
    pub(crate) adaptive_cpus: bool,
    /// Bound on waiting for room in a full stream queue (`None`: for ever).
    pub(crate) enqueue_timeout: Option<Duration>,
    /// What is told of the streams' failed tasks ([`Sim::on_task_failure`]).
    pub(crate) failures: Arc<crate::task_failure::Failures>,
    /// Count notifies (SPEC §6): the shared file, opened on first use, and this process's
    /// handles.
    pub(crate) cnt: cnt::CntState,
    /// Device memory: the device files this process mapped and its allocations.
    pub(crate) mem: MemState,
    /// Events (`event`): this process's handles and per-device id pools.
    pub(crate) events: event::EventState,
    /// The namespace's wait-for graph (`None` if its file could not be opened: streams are
    /// then not published, and deadlocks are reported as plain timeouts).
    pub(crate) graph: Option<Arc<waitgraph::WaitGraph>>,
    /// Cross-host mode (`None`: this host is the whole machine).
    pub(crate) cluster: Option<cluster::Cluster>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("soc", &self.soc)
            .field("devices", &self.devices)
            .field("server_id", &self.server_id)
            .field("namespace", &self.namespace)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Streams first (their drop discards queued tasks and cancels running waits), then
        // the notify references. Every stream is cancelled before any is joined: a task of
        // one may be waiting for another.
        let streams = write(&self.streams).drain();
        crate::pair_cache::removed();
        for e in &streams {
            let _ = e.stream.begin_destroy(StreamDestroy::Discard);
        }
        // Joined here, not by the drop of the table's references: a thread's pair cache
        // (`pair_cache`) may hold another.
        for e in &streams {
            e.stream.wait_destroyed();
            e.stream.release_kept();
        }
        drop(streams);
        crate::pair_cache::drop_stale();
        let notifies = write(&self.notifies).drain();
        drop(notifies);
        self.cnt.clear();
        self.mem.clear(self.pid);
        self.events.clear();
        self.reclaim_dead_at_close();
    }
}

impl Inner {
    /// A process leaving the namespace reclaims what its dead processes left (SIGKILLed or
    /// crashed: their notify references and ids, queued waits, IPC events, count notifies,
    /// device memory), as [`Sim::gc`] does. Without it, a job that lost a rank left the dead
    /// rank's ids and its device memory's pages taken in `/dev/shm` after every survivor had
    /// finished, until the next process opened the namespace or ran a gc (a 64-rank job with
    /// one rank killed: its 512 KiB stayed allocated, `acl-notify-inspect` showing it
    /// "dead"). Not in a forked child, whose mappings are its parent's. Costs one `/proc`
    /// read per registered process and a scan of the allocation tables of the device files
    /// this process mapped; and, when it found a dead process in the process table (the first
    /// to leave after a death does), of the server's other device files too.
    fn reclaim_dead_at_close(&self) {
        if crate::sys::getpid() != self.pid {
            return;
        }
        let mut dead = self.file.reclaim_dead().processes;
        for f in lock(&self.remote).values() {
            dead += f.reclaim_dead().processes;
        }
        if let Some(f) = self.cnt.opened() {
            let _ = f.reclaim_dead(0..self.devices);
        }
        let all = (dead > 0).then_some((self.namespace.as_str(), self.server_id, self.devices));
        let _ = self.mem.reclaim_dead(all);
    }
}

/// Removes a namespace's shared files when dropped (see [`Sim::remove_namespace`]): for tests
/// and tools that work in a namespace of their own and must not leave it behind, also when
/// they fail half-way.
#[derive(Debug)]
pub struct NamespaceGuard(pub String);

impl NamespaceGuard {
    /// A `Sim` of `devices` `soc` devices on namespace `name`, emptied first (of what a test
    /// or tool killed half-way left), and the guard that removes the namespace: the tests'
    /// opener. The namespace must be the caller's alone (the emptying removes what other
    /// processes keep there).
    ///
    /// Codes: those of [`SimBuilder::open`](crate::SimBuilder::open), the namespace named in
    /// the message; on failure nothing is left of the namespace.
    pub fn open_sim(
        name: String,
        soc: Soc,
        devices: u32,
    ) -> Result<(Sim, NamespaceGuard), SimError> {
        let _ = Sim::remove_namespace(&name);
        let guard = NamespaceGuard(name);
        let sim = Sim::builder()
            .soc(soc)
            .devices(devices)
            .namespace(&guard.0)
            .open()
            .map_err(|e| {
                let why = format!("opening a Sim on namespace {}: {}", guard.0, e.message());
                SimError::new(e.kind(), why)
            })?;
        Ok((sim, guard))
    }
}

impl Drop for NamespaceGuard {
    fn drop(&mut self) {
        let _ = Sim::remove_namespace(&self.0);
    }
}

impl Sim {
    /// Sets (`Some`) or removes (`None`) what is told of each task of this `Sim`'s streams
    /// that fails (`task_failure`), in the order they fail, on this `Sim`'s reporting thread
    /// (never a stream's, so the listener may synchronize any stream, the failed one too). A
    /// synchronize that reports a failure returns after the listener was told of it (unless
    /// called from the listener or a host function). Tasks discarded or aborted have not failed.
    pub fn on_task_failure(&self, listener: Option<crate::task_failure::FailureListener>) {
        self.inner.failures.set(listener);
    }

    /// Tests: every stream this `Sim` makes from now on parks each wait that would block,
    /// and the runner keeps it parked (`Stream::force_parking`). Only this `Sim`'s streams:
    /// the unit tests share a process, and other tests' waits must not park for this.
    #[cfg(test)]
    pub(crate) fn force_parking(&self) {
        self.inner
            .force_parking
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// The exact chip this process was configured with (`aclrtGetSocName`).
    pub fn chip(&self) -> Chip {
        self.inner.chip
    }

    /// The groups every device of the machine has (`ACL_NOTIFY_SIM_GROUPS`; none by default).
    pub fn device_groups(&self) -> &[crate::groups::DeviceGroup] {
        &self.inner.groups
    }

    /// Deletes a namespace's shared files (every server's). Processes that still have them
    /// mapped keep working on their (now anonymous) copy; new opens start afresh. Returns how
    /// many files were removed.
    pub fn remove_namespace(name: &str) -> Result<usize, SimError> {
        check_namespace(name)
            .map_err(|why| err(Error::ParamInvalid, format!("namespace {name:?} {why}")))?;
        // Every kind's files, as `mapfile::file_path` names them: a new kind needs no line here.
        mapfile::remove_files(name, None)
    }

    /// Every namespace that has shared files under `/dev/shm` (of any kind, any server),
    /// sorted: what [`Sim::remove_namespace`] would find files of. A tool that cleans up after
    /// processes of its own that were killed lists them here.
    pub fn namespaces_with_files() -> Result<Vec<String>, SimError> {
        mapfile::namespaces()
    }

    /// The namespace this `Sim` is connected to.
    pub fn namespace(&self) -> &str {
        &self.inner.namespace
    }

    /// The shared memory file of this process's server.
    pub fn shm_path(&self) -> &std::path::Path {
        self.inner.file.path()
    }

    /// Reclaims what dead processes held, in every server file this process has open: their
    /// queued waits are cancelled, their references dropped (IPC events included), ids and IPC
    /// events nobody holds any more freed, and their process-table entries released; and the count notifies of dead owners (if
    /// this process has opened the count-notify file), and the device memory of this server
    /// that only dead processes held ([`Sim::mem_gc`]). Ids leaked by a process that died
    /// half-way through a create or destroy are freed once they stayed so for 10 s. Runs on
    /// open and before a create answers 207009, too (device memory: before an allocation
    /// runs short, and in `aclrtGetMemInfo`).
    pub fn gc(&self) -> Result<GcReport, SimError> {
        let mut r = self.inner.file.gc();
        for f in lock(&self.inner.remote).values() {
            r += f.gc();
        }
        r.cnt_freed = self.cnt_gc();
        r.mem_freed = self.mem_gc();
        Ok(r)
    }

    /// What the garbage collection run when this process opened its server file reclaimed
    /// (see [`Sim::gc`]; the `Sim`s of a process that share the file report the same): with
    /// the reports of later [`Sim::gc`] calls, everything this process reclaimed there. Its
    /// `cnt_freed` is 0 (the count notifies are reclaimed by `Sim::gc` only).
    pub fn reclaimed_at_open(&self) -> GcReport {
        self.inner.file.reclaimed_at_open()
    }

    /// [`batch_reset`](acl_notify_core::StreamOps::batch_reset) over handles produced one at a time, for a
    /// caller that translates its own handles (the C library): `next(i)` yields element `i`
    /// of `num`, or `None` to end the batch there (the caller's own check of element `i`
    /// failed; it reports that itself). Same checks, codes and order as `batch_reset`: the
    /// elements before the first failing one stay reset. `next` is called at most once per
    /// element, in order, and not after a failure.
    pub fn batch_reset_with(
        &self,
        num: usize,
        next: impl FnMut(usize) -> Option<RawNotify>,
    ) -> Result<(), SimError> {
        self.checked(|| self.batch_reset_unchecked(num, next))
    }

    /// The batch reset: `next(i)` yields element `i`.
    ///
    /// No task stands for the resets. CANN's runtime on Atlas A2 and A3 resets each element
    /// with a task on the current context's default stream, which becomes the thread's last
    /// task (hicann/runtime `src/runtime/api/impl/api_impl.cc` `ApiImpl::NotifyReset`, the
    /// task sent by `NtyRecord` of `src/runtime/core/src/notify/notify_c.cc`); the 950
    /// family's sends a control-queue message (`api_impl_david.cc`). The simulator resets at
    /// once (SPEC §1) and queues nothing: one no-op task for the batch, tried on 2026-12-06,
    /// woke the default stream's worker at every call and cost the C ABI's batch reset of
    /// 1,000 about 12 µs (+30 % over the Rust API, the bench's judged row, limit +10 %). So
    /// `aclrtGetThreadLastTaskId` after a batch reset names the thread's task before it.
    pub(crate) fn batch_reset_unchecked(
        &self,
        num: usize,
        mut next: impl FnMut(usize) -> Option<RawNotify>,
    ) -> Result<(), SimError> {
        self.notify_calls()?;
        if num == 0 {
            return Err(err(Error::ParamInvalid, "batch reset of zero notifies"));
        }
        // The SoC check is the same for every element; made once, before element 0 is read.
        self.require(Feature::BatchReset, "batch reset")?;
        for i in 0..num {
            let Some(n) = next(i) else {
                break;
            };
            // A notify of another host (cluster mode) is reset through the cluster.
            if let Some(r) = self.reset_remote(n, i) {
                r?;
                continue;
            }
            let v = self
                .notify(n)
                .map_err(|e| err(e.kind(), format!("element {i}: {}", e.message())))?;
            let ipc = self.inner.soc.caps().ipc_batch_reset;
            v.state.apply(Op::BatchReset(ipc)).map_err(|e| {
                err(
                    e,
                    format!(
                        "element {i}: notify {} is an IPC notify (imported, or exported by its \
                         owner), which a batch reset on {} refuses, as CANN's runtime does",
                        v.r.id(),
                        self.inner.soc
                    ),
                )
            })?;
            // One CAS: a record racing the reset lands before it (reset) or after (kept). Its
            // time is kept for a wait that times out (`diag::notify_facts`).
            v.r.slot().reset(&v.r.file().waiter());
        }
        Ok(())
    }

    /// How many records of `notify` merged into an already-set flag (SPEC §1: two records
    /// before a wait collapse into one): since the last wait took a record, and in the
    /// notify's life, across every process that records it. A protocol that may record twice
    /// before the wait needs an acknowledgement notify in the other direction.
    ///
    /// Codes: 100000-class misuse as for other notify calls; 107017 for a handle that is not
    /// a live notify of this `Sim`.
    pub fn merged_records(&self, notify: RawNotify) -> Result<MergedRecords, SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let v = self.notify(notify)?;
            Ok(v.r.slot().merged_records())
        })
    }

    /// IPV350: every notify call is 207000, before any handle is looked at.
    #[inline(always)]
    pub(crate) fn notify_calls(&self) -> Result<(), SimError> {
        // Only the handler marks a file lost, and it counts what it does (`crate::lost`).
        if self.inner.has_notify && crate::sigbus::faults() == 0 {
            return Ok(());
        }
        self.notify_calls_checked()
    }

    /// [`notify_calls`](Self::notify_calls) past its common case, out of line.
    #[inline(never)]
    fn notify_calls_checked(&self) -> Result<(), SimError> {
        if !self.inner.has_notify {
            return self.require(Feature::Notify, "every notify call");
        }
        self.inner.file.intact()
    }

    /// Disables the access from `device` to `peer` this process enabled
    /// (`aclrtDeviceDisablePeerAccess`; `NotifyResources::enable_peer_access` enables it). Access the
    /// other way is left alone. Disabling access that is not enabled succeeds and changes
    /// nothing: CANN leaves that case to its driver (`halDeviceDisableP2P`, not public) and
    /// documents no code for it.
    ///
    /// Codes: those of `peer_pair_ok`: 107001 no such device; 100000
    /// `device == peer`; 207000 a SoC without peer access.
    pub fn disable_peer_access(&self, device: u32, peer: u32) -> Result<(), SimError> {
        self.peer_pair_ok(device, peer)?;
        lock(&self.inner.peers)[device as usize] &= !(1u64 << peer);
        Ok(())
    }

    /// Whether this process enabled access from `device` to `peer` (`enable_peer_access`, or
    /// an IPC import between the two, which enables it both ways) and has not disabled it
    /// since: what `aclrtDevicePeerAccessStatus` answers. `false` for devices the machine
    /// does not have.
    pub fn peer_access_enabled(&self, device: u32, peer: u32) -> bool {
        let bit = 1u64.checked_shl(peer).unwrap_or(0);
        lock(&self.inner.peers)
            .get(device as usize)
            .is_some_and(|p| p & bit != 0)
    }

    /// Peer access on a SoC without it (Ascend310B, IPV350): 207000, after the device
    /// checks. CANN refuses it below its ACL layer, once the devices are known: its runtime for
    /// a chip without the `RT_FEATURE_DEVICE_P2P` feature, its driver otherwise (hicann/runtime
    /// `src/runtime/driver/npu_driver.cc` `EnableP2P`/`DisableP2P`, `src/runtime/api/impl/
    /// api_impl.cc` `DeviceCanAccessPeer`; a driver refusal maps to the same 207000,
    /// `errcode_manage.cc`).
    pub(crate) fn peer_access_supported(&self) -> Result<(), SimError> {
        self.require(Feature::PeerAccess, "peer access between devices")
    }

    /// The checks of enabling or disabling access from `device` to `peer`, in CANN's order
    /// (hicann/runtime `src/acl/aclrt_impl/memory.cpp`, `aclrtDeviceEnablePeerAccessImpl` and
    /// `aclrtDeviceDisablePeerAccessImpl`, where `device` is the current one): 107001 `device`
    /// does not exist; 100000 `device == peer` (an ACL-level check, the same code as through
    /// the C API); 107001 `peer` does not exist; 207000 a SoC without peer access.
    pub(crate) fn peer_pair_ok(&self, device: u32, peer: u32) -> Result<(), SimError> {
        self.device_ok(device)?;
        if device == peer {
            return Err(err(
                Error::InvalidParam,
                format!("peer access from device {device} to itself"),
            ));
        }
        self.device_ok(peer)?;
        self.peer_access_supported()
    }

    pub(crate) fn device_ok(&self, device: u32) -> Result<(), SimError> {
        if device < self.inner.devices {
            Ok(())
        } else {
            Err(err(
                Error::InvalidDeviceId,
                format!(
                    "device {device} does not exist ({} devices: 0 to {})",
                    self.inner.devices,
                    self.inner.devices - 1
                ),
            ))
        }
    }

    pub(crate) fn require(&self, f: Feature, what: &str) -> Result<(), SimError> {
        self.inner
            .soc
            .require(f)
            .map_err(|_| self.unsupported(what))
    }

    /// `Ok` if `has` (this SoC's answer to a question of the memory chapters, as
    /// [`has_vmm`](crate::mem::vmm::has_vmm)), else [`unsupported`](Self::unsupported).
    pub(crate) fn require_soc(&self, has: bool, what: &str) -> Result<(), SimError> {
        if has {
            return Ok(());
        }
        Err(self.unsupported(what))
    }

    /// Every feature check's refusal: 207000, "{what} is not supported on {SoC}".
    fn unsupported(&self, what: &str) -> SimError {
        err(
            Error::FeatureNotSupport,
            format!("{what} is not supported on {}", self.inner.soc.name()),
        )
    }

    /// Whether this handle's device is the notify's physical device (same server and device).
    pub(crate) fn on_owner_device(&self, r: &SlotRef, device: u32) -> bool {
        r.file().server() == self.inner.server_id && r.device() == device
    }

    pub(crate) fn wrong_device(&self, r: &SlotRef, device: u32) -> SimError {
        self.wrong_device_of(
            waitgraph::Target::notify(r.file().server(), r.device(), r.id()),
            device,
        )
    }

    /// [`wrong_device`](Self::wrong_device) of the notify named `n`.
    #[cold]
    pub(crate) fn wrong_device_of(&self, n: waitgraph::Target, device: u32) -> SimError {
        err(
            Error::ParamInvalid,
            format!(
                "notify {} lives on device {} of server {}; it can only be waited on from that \
                 device, not from device {device} of server {}",
                n.id, n.device, n.server, self.inner.server_id
            ),
        )
    }
}

//! `acl-notify-sim`: the software device — CANN notify semantics on Linux, with device state in
//! shared memory so that real processes opening the same namespace see the same machine.
//!
//! Entry points: [`Sim::from_env`] (the `ACL_NOTIFY_SIM_*` variables) and [`Sim::builder`].
//! [`Sim`] implements the core's [`Backend`], [`NotifyResources`], [`StreamOps`], [`HostOps`]
//! and [`CntNotifyOps`](acl_notify_core::CntNotifyOps) traits with [`SimError`] as the error
//! type.
//!
//! # How it fits together
//!
//! - [`shm`]: one file per (namespace, server) under `/dev/shm`, holding the per-device id
//!   pools, the core notify table ([`acl_notify_core::table`]), whitelists and the process
//!   table. Waits and records operate directly on the shared flag words (shared futexes), so a
//!   record in one process wakes a stream waiting in another without polling.
//! - [`stream`]: the in-process stream engine (one worker thread per stream); notify records
//!   and waits are tasks on it, so a wait stalls the stream, never the caller.
//! - Handles ([`RawNotify`], [`RawStream`]) are process-local table entries validated on every
//!   call (index, generation and a per-`Sim` tag): stale or foreign handles get 107017.
//! - References: each process holds at most one bit per notify in the shared holder bitmap,
//!   kept while any of its handles or queued tasks uses the notify; the id is freed when the
//!   last bit goes. A process that dies is reclaimed by the survivors ([`Sim::gc`], also run
//!   on open and before answering 207009).
//!
//! # Limits and costs
//!
//! - 64 devices per machine; 64 live processes per namespace and server (the holder bitmap;
//!   a 65th gets 207005 until a registered process exits or dies); 16 waiters per notify hold
//!   a FIFO ticket at once, further waiters wait for a ticket (see [`acl_notify_core::table`]).
//! - Memory: the file is sparse (an 8 × 65535 Ascend950PR machine is a 600 MiB file with
//!   12 KiB allocated after open). A notify in use costs its 192-byte slot plus 3 bytes of
//!   pool; an exported notify one more 1040-byte whitelist (measured by
//!   `shm::tests::sparse_file_and_bytes_per_notify`).
//! - A wait blocked on a stream notices a discarding destroy at once (the stream's cancel
//!   waker wakes the futex), at worst after [`acl_notify_core::table::CHUNK`] (50 ms) if the
//!   wake raced ahead of the sleep.
//! - Whitelisted PIDs that are not running when whitelisted, and entries for other servers,
//!   have an unknown start time and match any process with that PID.
//! - `fork()`: a child may open a `Sim` of its own, also when other threads of its parent were
//!   inside the simulator at the fork (the process-wide locks are fresh in a child, and nothing
//!   lazily initialised can be left half-done; see the `fork` module). It must not use a `Sim`
//!   it inherited, not even drop it: that `Sim` is the parent's, its stream threads are not in
//!   the child (a drop would wait for them for ever) and its locks may be held by threads that
//!   are gone. `std::mem::forget` it, or exit without dropping it.

pub mod cluster;
pub mod cnt;
mod diag;
mod error;
mod event;
mod fork;
mod handles;
pub mod inspect;
mod ipc_event;
mod lost;
mod mapfile;
pub mod mem;
mod repair;
mod ring;
pub mod shm;
mod sigbus;
mod spin;
pub mod stream;
mod sys;
pub mod trace;
pub mod waitgraph;

use std::cell::Cell;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use acl_notify_core::table::{self, ExportState, NotifySlot, WaitArgs, WaitOutcome, Waiter};
use acl_notify_core::whitelist::{
    MAX_ENTRIES as MAX_WHITELIST, NOT_RUNNING, Whitelist, WhitelistEntry,
};
use acl_notify_core::{
    Backend, BackendError, Chip, CreateFlags, Error, ExportFlags, ExportKey, Feature, HostCall,
    HostOps, ImportFlags, KeyFields, Lifecycle, NotifyInfo, NotifyResources, Op, PidValidation,
    RawNotify, RawStream, ServerPid, Soc, StreamDestroy, StreamOps, StreamStatus, SyncWait,
    Timeout,
};

pub use acl_notify_core::table::MergedRecords;
pub use error::SimError;
pub use shm::GcReport;

use handles::Slab;
use shm::{CreateError, OpenMode, ShmFile, SimWaiter, SlotRef};
use stream::{Job, Stream, StreamConfig, Task, TaskCtx};

/// Environment variable naming the SoC family (default `Ascend910B`).
pub const ENV_SOC: &str = "ACL_NOTIFY_SIM_SOC";
/// Environment variable giving the number of devices (default 8).
pub const ENV_DEVICES: &str = "ACL_NOTIFY_SIM_DEVICES";
/// Environment variable naming the namespace (default `acl-notify-<uid>-default`).
pub const ENV_NAMESPACE: &str = "ACL_NOTIFY_SIM_NAMESPACE";
/// Environment variable giving this process's SuperPod server id (default 0).
pub const ENV_SERVER_ID: &str = "ACL_NOTIFY_SIM_SERVER_ID";
/// Environment variable placing stream workers on CPUs: `off` (default), `spread`, or a CPU
/// list such as `0,2-3` (see [`StreamCpus`]).
pub const ENV_STREAM_CPUS: &str = "ACL_NOTIFY_SIM_STREAM_CPUS";
pub use spin::ENV_SPIN_BUDGET;
/// Environment variable bounding, in whole seconds, how long a record, wait or host function
/// waits for room in a stream whose task queue is full before it fails with 507002
/// (`ACL_ERROR_RT_STREAM_TASK_FULL`); `0` waits for ever, as CANN does (default 60).
pub const ENV_ENQUEUE_TIMEOUT: &str = "ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT";
/// Environment variable giving each device's memory in bytes, with an optional `K`, `M`, `G`
/// or `T` (binary) suffix (default [`mem::DEFAULT_DEVICE_MEMORY`], 32 GiB; see [`mem`]).
pub const ENV_DEVICE_MEMORY: &str = "ACL_NOTIFY_SIM_DEVICE_MEMORY";

/// Where the worker threads of this process's simulated streams run.
///
/// A stream on a real device is executed by the device, beside the host and beside other
/// streams. The simulator runs each stream on a thread, and by default the kernel places it.
/// On some machines (seen on KVM guests) the kernel puts a woken worker on the CPU of the
/// thread that woke it, even when another CPU is idle: two streams that hand work to each
/// other then share one CPU and take turns, at microseconds per hand-off instead of hundreds
/// of nanoseconds. `Spread` gives each new stream a CPU of its own, in turn.
///
/// The cost: a placed worker cannot move, so when its CPU is busy with other work it waits
/// for its share there even if another CPU is free. Streams that are mostly idle lose
/// nothing; busy streams gain when there are at least as many CPUs as busy streams.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StreamCpus {
    /// The kernel places the workers (default; `ACL_NOTIFY_SIM_STREAM_CPUS=off`).
    #[default]
    Scheduler,
    /// Each new stream's worker is restricted to one CPU, taking the CPUs the opening thread
    /// may use in turn (`spread`), starting at this process's place among the processes of
    /// the namespace, so that two processes sharing a machine start on different CPUs.
    Spread,
    /// Like `Spread`, over these CPUs in this order (e.g. `2,3` or `0-3`). Every CPU must be
    /// one the opening thread may use.
    List(Vec<usize>),
}

impl StreamCpus {
    /// Parses `off`, `spread` or a CPU list (`0,2-3`), as `ACL_NOTIFY_SIM_STREAM_CPUS` takes
    /// them. Errors say what is wrong, in words.
    pub fn parse(text: &str) -> Result<StreamCpus, String> {
        let t = text.trim();
        match t {
            "off" | "scheduler" => return Ok(StreamCpus::Scheduler),
            "spread" => return Ok(StreamCpus::Spread),
            _ => {}
        }
        let cpu = |p: &str| {
            p.trim()
                .parse::<usize>()
                .ok()
                .filter(|&c| c < MAX_CPU)
                .ok_or_else(|| format!("{p:?} is not a CPU number (0 to {})", MAX_CPU - 1))
        };
        let mut list = Vec::new();
        for part in t.split(',') {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (cpu(a)?, cpu(b)?);
                    if a > b {
                        return Err(format!("range {part:?} runs backwards"));
                    }
                    list.extend(a..=b);
                }
                None => list.push(cpu(part)?),
            }
        }
        Ok(StreamCpus::List(list))
    }

    /// The CPUs to hand out in turn (empty: leave placement to the kernel), checked against
    /// the CPUs `allowed`.
    fn resolve(&self, allowed: &[usize]) -> Result<Vec<usize>, String> {
        match self {
            StreamCpus::Scheduler => Ok(Vec::new()),
            StreamCpus::Spread => Ok(allowed.to_vec()),
            StreamCpus::List(list) if list.is_empty() => Err("the CPU list is empty".into()),
            StreamCpus::List(list) => match list.iter().find(|c| !allowed.contains(c)) {
                Some(c) => Err(format!(
                    "CPU {c} is not one this process may use (allowed: {allowed:?})"
                )),
                None => Ok(list.clone()),
            },
        }
    }
}

/// One past the highest CPU number a [`StreamCpus`] list may name (the kernel's `CPU_SETSIZE`).
const MAX_CPU: usize = 1024;

/// Most devices a simulated machine can have.
pub const MAX_DEVICES: u32 = 64;
/// How long an id must stay orphaned before a GC pass frees it: a process killed between two
/// steps of a create or destroy (say, after allocating an id and before claiming its slot)
/// leaves an id that no dead process's reclaim can attribute. [`Sim::gc`] suspects it on one
/// pass and frees it on a pass at least this much later, in the same process.
pub const LEAK_REPAIR_GRACE: std::time::Duration = repair::REPAIR_GRACE;
/// How many tasks a simulated stream queues before a record, wait or host function waits for
/// room (see [`SimBuilder::enqueue_timeout`]).
pub const STREAM_CAPACITY: usize = stream::DEFAULT_CAPACITY;
/// How long, by default, a record, wait or host function waits for room in a full stream
/// queue before it fails with 507002 (see [`SimBuilder::enqueue_timeout`]).
pub const DEFAULT_ENQUEUE_TIMEOUT: Duration = stream::DEFAULT_ENQUEUE_TIMEOUT;
/// Longest namespace name.
pub const MAX_NAMESPACE_LEN: usize = 64;

/// Configuration of a [`Sim`] before it is opened.
#[derive(Clone, Debug)]
pub struct SimBuilder {
    soc: Soc,
    /// The chip `aclrtGetSocName` names, of family `soc`.
    chip: Chip,
    devices: u32,
    namespace: Option<String>,
    server_id: u32,
    stream_cpus: StreamCpus,
    enqueue_timeout: Option<Duration>,
    device_memory: u64,
    cluster: Option<cluster::ClusterConfig>,
}

impl SimBuilder {
    /// Joins the SuperPod whose etcd cluster `cfg` names (cross-host mode, see
    /// [`cluster`]); `None` (the default) is the single-host simulator.
    pub fn cluster(mut self, cfg: Option<cluster::ClusterConfig>) -> Self {
        self.cluster = cfg;
        self
    }

    /// Each device's memory in bytes (default [`mem::DEFAULT_DEVICE_MEMORY`]); at least 1 MiB.
    pub fn device_memory(mut self, bytes: u64) -> Self {
        self.device_memory = bytes;
        self
    }

    /// How long a record, wait or host function waits for room in a stream whose task queue
    /// ([`STREAM_CAPACITY`] tasks) is full, before it fails with 507002
    /// (`ACL_ERROR_RT_STREAM_TASK_FULL`) and the task is not queued. `None` waits for ever, as
    /// CANN does. Default: [`DEFAULT_ENQUEUE_TIMEOUT`] (60 s) — a queue that stays full that
    /// long is almost always a deadlock (its head waits, with no timeout, for a record that
    /// only the blocked caller would enqueue next), and an error says so where a hang would not.
    pub fn enqueue_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.enqueue_timeout = timeout;
        self
    }

    /// Where stream workers run (default [`StreamCpus::Scheduler`]).
    pub fn stream_cpus(mut self, cpus: StreamCpus) -> Self {
        self.stream_cpus = cpus;
        self
    }

    /// The SoC family (default `Ascend910B`), as its first chip ([`Soc::default_chip`]).
    pub fn soc(self, soc: Soc) -> Self {
        self.chip(soc.default_chip())
    }

    /// The exact chip (its family with it): what `aclrtGetSocName` returns.
    pub fn chip(mut self, chip: Chip) -> Self {
        self.soc = chip.soc();
        self.chip = chip;
        self
    }

    /// The number of devices, 1 to 64 (default 8).
    pub fn devices(mut self, devices: u32) -> Self {
        self.devices = devices;
        self
    }

    /// The namespace: 1 to 64 characters from `A-Z a-z 0-9 . _ -`, not starting with `.`
    /// (default `acl-notify-<uid>-default`). Processes opening the same namespace share one
    /// simulated machine.
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_owned());
        self
    }

    /// This process's SuperPod server id (default 0); non-zero only on `Ascend910_93`.
    pub fn server_id(mut self, server_id: u32) -> Self {
        self.server_id = server_id;
        self
    }

    /// Opens (creating if needed) the namespace's shared state for this process's server.
    ///
    /// Errors: 107000 for a bad configuration, or one that disagrees with the namespace's
    /// existing file; 507899 for a file that is corrupt, foreign, of another layout version,
    /// not owned by this user or not mode 0600; 207005 if 64 processes already use it.
    pub fn open(self) -> Result<Sim, SimError> {
        self.open_as(Origin::Builder)
    }

    fn open_as(self, origin: Origin) -> Result<Sim, SimError> {
        trace::init();
        let bad = |var: &str, what: &str, msg: String| {
            SimError::new(
                Error::ParamInvalid,
                match origin {
                    Origin::Env => format!("{var}: {msg}"),
                    Origin::Builder => format!("SimBuilder::{what}: {msg}"),
                },
            )
        };
        if self.devices == 0 || self.devices > MAX_DEVICES {
            return Err(bad(
                ENV_DEVICES,
                "devices",
                format!("{} devices; expected 1 to {MAX_DEVICES}", self.devices),
            ));
        }
        let namespace = self.namespace.unwrap_or_else(default_namespace);
        if let Err(why) = check_namespace(&namespace) {
            return Err(bad(
                ENV_NAMESPACE,
                "namespace",
                format!("{namespace:?} {why}"),
            ));
        }
        if self.server_id > u32::from(u16::MAX) {
            return Err(bad(
                ENV_SERVER_ID,
                "server_id",
                format!("{} is too large (at most 65535)", self.server_id),
            ));
        }
        if self.server_id != 0 && !self.soc.has(Feature::InterServer) {
            return Err(bad(
                ENV_SERVER_ID,
                "server_id",
                format!(
                    "server {} on {}: only a SuperPod SoC (Ascend910_93) has more than one \
                     server; use 0",
                    self.server_id, self.soc
                ),
            ));
        }
        mem::check_capacity(self.device_memory)
            .map_err(|why| bad(ENV_DEVICE_MEMORY, "device_memory", why))?;
        let cpus = self
            .stream_cpus
            .resolve(&stream::allowed_cpus())
            .map_err(|why| bad(ENV_STREAM_CPUS, "stream_cpus", why))?;
        let file = shm::open_shared(
            &namespace,
            self.server_id,
            self.soc,
            self.devices,
            OpenMode::CreateOrOpen,
        )?
        .ok_or_else(|| SimError::new(Error::DrvInternalError, "shared memory file vanished"))?;
        let tag = next_tag();
        let namespace_for_graph = namespace.clone();
        let pid = sys::getpid();
        // What a whitelist entry for this process holds (see `sys::process_identity`).
        let identity = sys::process_identity(pid).unwrap_or(0);
        // `Spread` starts at this process's place in the namespace, so that the first streams
        // of processes sharing a machine land on different CPUs.
        let first_cpu = match self.stream_cpus {
            StreamCpus::Spread => file.me(),
            _ => 0,
        };
        let cluster = match &self.cluster {
            Some(cfg) => Some(cluster::Cluster::join(
                cfg,
                self.server_id,
                &namespace,
                pid,
                tag ^ 0x1000,
            )?),
            None => None,
        };
        Ok(Sim {
            inner: Arc::new(Inner {
                soc: self.soc,
                chip: self.chip,
                devices: self.devices,
                server_id: self.server_id,
                namespace,
                pid,
                identity,
                file,
                remote: Mutex::new(HashMap::new()),
                notifies: RwLock::new(Slab::new(tag)),
                streams: RwLock::new(Slab::new(tag ^ 0x8000)),
                defaults: Mutex::new(vec![None; self.devices as usize]),
                draining: Mutex::new(Vec::new()),
                peers: Mutex::new(vec![0; self.devices as usize]),
                op_wait_timeout: AtomicU32::new(0),
                stream_seq: AtomicU32::new(0),
                cpu_seq: AtomicU32::new(first_cpu),
                cpus,
                enqueue_timeout: self.enqueue_timeout,
                cnt: cnt::CntState::new(tag ^ 0x4000),
                mem: mem::MemState::new(self.device_memory),
                events: event::EventState::new(tag ^ 0x2000, self.devices, self.soc.max_events()),
                graph: waitgraph::WaitGraph::open(&namespace_for_graph, true)
                    .ok()
                    .flatten()
                    .map(waitgraph::WaitGraph::shared),
                cluster,
            }),
        })
    }
}

#[derive(Clone, Copy)]
enum Origin {
    Env,
    Builder,
}

impl Default for SimBuilder {
    fn default() -> Self {
        SimBuilder {
            soc: Soc::Ascend910B,
            chip: Soc::Ascend910B.default_chip(),
            devices: 8,
            namespace: None,
            server_id: 0,
            stream_cpus: StreamCpus::Scheduler,
            enqueue_timeout: Some(DEFAULT_ENQUEUE_TIMEOUT),
            device_memory: mem::DEFAULT_DEVICE_MEMORY,
            cluster: None,
        }
    }
}

fn default_namespace() -> String {
    format!("acl-notify-{}-default", sys::geteuid())
}

fn check_namespace(ns: &str) -> Result<(), &'static str> {
    if ns.is_empty() || ns.len() > MAX_NAMESPACE_LEN {
        return Err("must be 1 to 64 characters long");
    }
    if ns.starts_with('.') {
        return Err("must not start with '.'");
    }
    if !ns
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err("may only contain A-Z a-z 0-9 . _ -");
    }
    Ok(())
}

/// A tag distinguishing the handles of different `Sim`s of one process.
fn next_tag() -> u16 {
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let mut seed = [0u8; 2];
    if NEXT.load(Ordering::Relaxed) == 0 && sys::fill_random(&mut seed).is_ok() {
        let _ = NEXT.compare_exchange(
            0,
            u16::from_le_bytes(seed) | 1,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
    // Keep the top bit clear: streams use `tag ^ 0x8000`, so notify and stream handles never
    // share a tag.
    (NEXT.fetch_add(1, Ordering::Relaxed) & 0x7fff).max(1)
}

/// A process's connection to one simulated machine (a namespace). `Send + Sync`; clones share
/// the connection. Dropping the last clone discards its streams' queued tasks and drops its
/// notify references.
#[derive(Clone, Debug)]
pub struct Sim {
    inner: Arc<Inner>,
}

struct Inner {
    soc: Soc,
    chip: Chip,
    devices: u32,
    server_id: u32,
    namespace: String,
    pid: i32,
    /// What a whitelist entry naming this process holds ([`sys::process_identity`]).
    identity: u64,
    /// This process's server.
    file: Arc<ShmFile>,
    /// Other servers' files, opened by cross-server imports.
    remote: Mutex<HashMap<u32, Arc<ShmFile>>>,
    notifies: RwLock<Slab<NotifyEntry>>,
    streams: RwLock<Slab<StreamEntry>>,
    defaults: Mutex<Vec<Option<u64>>>,
    /// Streams a draining destroy took out of `streams` and has not finished with, and their
    /// devices: no call finds them any more, but [`Sim::discard_streams_where`] still does.
    /// Added under the `streams` write lock (so a discard sees a stream in one or the other).
    draining: Mutex<Vec<(Arc<SimStream>, u32)>>,
    /// `peers[d]` bit `p`: this process enabled access from device `d` to device `p`.
    peers: Mutex<Vec<u64>>,
    op_wait_timeout: AtomicU32,
    stream_seq: AtomicU32,
    /// CPUs handed to new stream workers in turn (empty: the kernel places them).
    cpus: Vec<usize>,
    cpu_seq: AtomicU32,
    /// Bound on waiting for room in a full stream queue (`None`: for ever).
    enqueue_timeout: Option<Duration>,
    /// Count notifies (SPEC §6): the shared file, opened on first use, and this process's
    /// handles.
    cnt: cnt::CntState,
    /// Device memory: the device files this process mapped and its allocations.
    mem: mem::MemState,
    /// Events (`event`): this process's handles and per-device id pools.
    events: event::EventState,
    /// The namespace's wait-for graph (`None` if its file could not be opened: streams are
    /// then not published, and deadlocks are reported as plain timeouts).
    graph: Option<Arc<waitgraph::WaitGraph>>,
    /// Cross-host mode (`None`: this host is the whole machine).
    cluster: Option<cluster::Cluster>,
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
        for e in &streams {
            let _ = e.stream.begin_destroy(StreamDestroy::Discard);
        }
        drop(streams);
        let notifies = write(&self.notifies).drain();
        drop(notifies);
        self.cnt.clear();
        self.mem.clear(self.pid);
        self.events.clear();
    }
}

struct NotifyEntry {
    r: Arc<SlotRef>,
    state: Lifecycle,
    /// The device this handle lives on (an importer's own device).
    device: u32,
    /// References for the tasks of the streams that last used this handle (changed under the
    /// notify table's write lock only, so a record or wait reads them under its read lock).
    pins: Pins,
}

impl NotifyEntry {
    fn new(r: Arc<SlotRef>, state: Lifecycle, device: u32) -> Self {
        NotifyEntry {
            r,
            state,
            device,
            pins: Pins::default(),
        }
    }

    /// The reference a task of `stream` holds on this notify: the stream's own pin (made on
    /// first use), so that the counter it bumps and drops is shared with that stream's worker
    /// only — not with every thread and worker that uses the notify, as the counter of the
    /// `Arc<SlotRef>` is (on a notify bounced between two streams, that counter would cross
    /// between their CPUs twice per task). Pins hold the notify as strongly as a clone of the
    /// `Arc<SlotRef>` would; they die with this entry and the tasks that hold them.
    ///
    /// `None` if `stream` has no pin yet: make one with [`new_pin`](Self::new_pin).
    fn pin(&self, stream: RawStream) -> Option<Arc<StreamPin>> {
        self.pins
            .slots
            .iter()
            .find(|(h, _)| *h == stream.0)
            .and_then(|(_, pin)| pin.as_ref().map(Arc::clone))
    }

    /// The pin of `stream`, made if it has none (replacing the oldest of [`PINS`]).
    fn new_pin(&mut self, stream: RawStream) -> Arc<StreamPin> {
        if let Some(pin) = self.pin(stream) {
            return pin;
        }
        let pin = Arc::new(StreamPin(Arc::clone(&self.r)));
        let p = &mut self.pins;
        let i = p.next;
        p.slots[i] = (stream.0, Some(Arc::clone(&pin)));
        p.next = (i + 1) % PINS;
        pin
    }
}

/// Streams per notify handle whose pins are kept (the oldest is replaced).
const PINS: usize = 4;

/// A notify handle's pins, by stream handle.
#[derive(Default)]
struct Pins {
    slots: [(u64, Option<Arc<StreamPin>>); PINS],
    next: usize,
}

/// A stream's counted reference to a notify (see [`NotifyEntry::pin`]).
struct StreamPin(Arc<SlotRef>);

impl StreamPin {
    /// The notify as the wait-for graph names it.
    #[inline]
    fn target(&self) -> waitgraph::Target {
        let r = &self.0;
        waitgraph::Target::notify(r.file().server(), r.device(), r.id())
    }
}

struct StreamEntry {
    stream: Arc<SimStream>,
    device: u32,
    default: bool,
    /// The stream's entry in the wait-for graph (`None`: not published).
    graph: Option<Arc<waitgraph::StreamSlot>>,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn err(kind: Error, msg: impl Into<String>) -> SimError {
    SimError::new(kind, msg)
}

fn bad_notify(h: RawNotify) -> SimError {
    err(
        Error::InvalidHandle,
        format!(
            "notify handle {:#x} is not a live notify of this process (destroyed, stale, of \
             another Sim, or garbage)",
            h.0
        ),
    )
}

fn bad_stream(h: RawStream) -> SimError {
    err(
        Error::InvalidHandle,
        format!(
            "stream handle {:#x} is not a live stream of this process (destroyed, stale, of \
             another Sim, or garbage)",
            h.0
        ),
    )
}

/// A snapshot of one notify handle, taken under the table lock.
struct NotifyView {
    r: Arc<SlotRef>,
    state: Lifecycle,
    device: u32,
}

/// Removes a namespace's shared files when dropped (see [`Sim::remove_namespace`]): for tests
/// and tools that work in a namespace of their own and must not leave it behind, also when
/// they fail half-way.
#[derive(Debug)]
pub struct NamespaceGuard(pub String);

impl Drop for NamespaceGuard {
    fn drop(&mut self) {
        let _ = Sim::remove_namespace(&self.0);
    }
}

impl Sim {
    /// A builder with the defaults.
    pub fn builder() -> SimBuilder {
        SimBuilder::default()
    }

    /// The chip `ACL_NOTIFY_SIM_SOC` names (a family stands for its first chip), or the
    /// default family's: what [`from_env`](Self::from_env) would configure, read without
    /// opening anything (`aclrtGetSocName` answers with it before the session starts).
    ///
    /// Errors: 107000 the value is not UTF-8, or names no family or chip of the table.
    pub fn chip_from_env() -> Result<Chip, SimError> {
        let v = match std::env::var(ENV_SOC) {
            Ok(v) => v,
            Err(std::env::VarError::NotPresent) => return Ok(SimBuilder::default().chip),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(err(
                    Error::ParamInvalid,
                    format!("{ENV_SOC}: the value is not valid UTF-8"),
                ));
            }
        };
        Chip::from_name(v.trim()).map_err(|_| {
            let names: Vec<&str> = Soc::ALL.iter().map(|s| s.name()).collect();
            err(
                Error::ParamInvalid,
                format!(
                    "{ENV_SOC}={v:?} is not a SoC family ({names:?}) or one of their chip names \
                     (Soc::chip_names, e.g. \"Ascend910B3\")"
                ),
            )
        })
    }

    /// The exact chip this process was configured with (`aclrtGetSocName`).
    pub fn chip(&self) -> Chip {
        self.inner.chip
    }

    /// Opens the machine the `ACL_NOTIFY_SIM_*` variables describe: `ACL_NOTIFY_SIM_SOC`
    /// (default `Ascend910B`), `ACL_NOTIFY_SIM_DEVICES` (default 8),
    /// `ACL_NOTIFY_SIM_NAMESPACE` (default `acl-notify-<uid>-default`),
    /// `ACL_NOTIFY_SIM_SERVER_ID` (default 0), `ACL_NOTIFY_SIM_STREAM_CPUS` (default `off`,
    /// see [`StreamCpus`]), `ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT` (seconds, default 60, `0` for
    /// ever; see [`SimBuilder::enqueue_timeout`]), `ACL_NOTIFY_SIM_SPIN_BUDGET` (waiters that
    /// may spin at once, default the CPUs this process may use, `0` never; see
    /// [`ENV_SPIN_BUDGET`]). A variable that is set but invalid is an error (107000) naming
    /// it, never a silent default.
    pub fn from_env() -> Result<Sim, SimError> {
        let var = |name: &str| -> Result<Option<String>, SimError> {
            match std::env::var(name) {
                Ok(v) => Ok(Some(v)),
                Err(std::env::VarError::NotPresent) => Ok(None),
                Err(std::env::VarError::NotUnicode(_)) => Err(err(
                    Error::ParamInvalid,
                    format!("{name}: the value is not valid UTF-8"),
                )),
            }
        };
        let mut b = Sim::builder().chip(Sim::chip_from_env()?);
        if let Some(v) = var(ENV_DEVICES)? {
            let n = v.trim().parse::<u32>().map_err(|_| {
                err(
                    Error::ParamInvalid,
                    format!("{ENV_DEVICES}={v:?} is not a number of devices (1 to {MAX_DEVICES})"),
                )
            })?;
            b = b.devices(n);
        }
        if let Some(v) = var(ENV_NAMESPACE)? {
            b = b.namespace(&v);
        }
        spin::check_env().map_err(|why| err(Error::ParamInvalid, why))?;
        if let Some(v) = var(ENV_STREAM_CPUS)? {
            let cpus = StreamCpus::parse(&v).map_err(|why| {
                err(
                    Error::ParamInvalid,
                    format!("{ENV_STREAM_CPUS}={v:?}: {why}; expected off, spread or a CPU list"),
                )
            })?;
            b = b.stream_cpus(cpus);
        }
        if let Some(v) = var(ENV_ENQUEUE_TIMEOUT)? {
            let secs = v.trim().parse::<u32>().map_err(|_| {
                err(
                    Error::ParamInvalid,
                    format!(
                        "{ENV_ENQUEUE_TIMEOUT}={v:?} is not a number of seconds (0 to {}; 0 \
                         waits for ever)",
                        u32::MAX
                    ),
                )
            })?;
            b = b.enqueue_timeout((secs != 0).then(|| Duration::from_secs(u64::from(secs))));
        }
        if let Some(v) = var(ENV_DEVICE_MEMORY)? {
            b = b.device_memory(mem::parse_size(&v).map_err(|why| {
                err(
                    Error::ParamInvalid,
                    format!("{ENV_DEVICE_MEMORY}={v:?}: {why}"),
                )
            })?);
        }
        if let Some(v) = var(waitgraph::ENV_DEADLOCK)?
            && !matches!(v.trim(), "fail" | "report")
        {
            return Err(err(
                Error::ParamInvalid,
                format!(
                    "{}={v:?}: expected fail (a wait in a deadlock cycle fails at once) or \
                     report (it fails at its timeout, saying deadlock)",
                    waitgraph::ENV_DEADLOCK
                ),
            ));
        }
        if let Some(v) = var(ENV_SERVER_ID)? {
            let n = v.trim().parse::<u32>().map_err(|_| {
                err(
                    Error::ParamInvalid,
                    format!("{ENV_SERVER_ID}={v:?} is not a server id (0 to 65535)"),
                )
            })?;
            b = b.server_id(n);
        }
        b = b.cluster(
            cluster::ClusterConfig::from_env().map_err(|why| err(Error::ParamInvalid, why))?,
        );
        b.open_as(Origin::Env)
    }

    /// Deletes a namespace's shared files (every server's). Processes that still have them
    /// mapped keep working on their (now anonymous) copy; new opens start afresh. Returns how
    /// many files were removed.
    pub fn remove_namespace(name: &str) -> Result<usize, SimError> {
        check_namespace(name)
            .map_err(|why| err(Error::ParamInvalid, format!("namespace {name:?} {why}")))?;
        Ok(shm::remove_namespace(name)?
            + cnt::remove_cnt_files(name)?
            + ipc_event::remove_evt_files(name)?
            + mem::remove_mem_files(name)?
            + waitgraph::remove_graph_files(name)?)
    }

    /// The CPU a stream's worker is restricted to ([`StreamCpus`]), or `None` when the kernel
    /// places it.
    ///
    /// Codes: 107017 for a handle that is not a live stream of this `Sim`.
    pub fn stream_cpu(&self, stream: RawStream) -> Result<Option<usize>, SimError> {
        Ok(self.stream(stream)?.0.cpu())
    }

    /// Starts a stream worker, on the next CPU of the placement list if there is one.
    fn spawn_stream(&self, name: String) -> Result<SimStream, SimError> {
        let cpus = &self.inner.cpus;
        let cpu = (!cpus.is_empty()).then(|| {
            cpus[self.inner.cpu_seq.fetch_add(1, Ordering::Relaxed) as usize % cpus.len()]
        });
        let mut config = StreamConfig::new(name)
            .cpu(cpu)
            .enqueue_timeout(self.inner.enqueue_timeout);
        if !spin::Spinner::may_spin() {
            config = config.spin(Duration::ZERO);
        }
        Stream::spawn(config).map_err(|e: SimError| match cpu {
            Some(c) => err(
                e.kind(),
                format!("the stream's worker thread could not be started on CPU {c}"),
            ),
            None => e,
        })
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
    /// queued waits are cancelled, their references dropped, ids nobody holds any more freed,
    /// and their process-table entries released; and the count notifies of dead owners (if
    /// this process has opened the count-notify file). Ids leaked by a process that died
    /// half-way through a create or destroy are freed once they stayed so for 10 s. Runs on
    /// open and before a create answers 207009, too.
    pub fn gc(&self) -> Result<GcReport, SimError> {
        let mut r = self.inner.file.gc();
        for f in lock(&self.inner.remote).values() {
            r += f.gc();
        }
        r.cnt_freed = self.cnt_gc();
        Ok(r)
    }

    /// [`batch_reset`](StreamOps::batch_reset) over handles produced one at a time, for a
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

    fn batch_reset_unchecked(
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
            // One CAS: a record racing the reset lands before it (reset) or after (kept).
            v.r.slot().sync.reset();
        }
        Ok(())
    }

    /// The tag in bits 48‥63 of every [`RawNotify`] this `Sim` hands out (the same for all of
    /// them, and different from every other `Sim`'s of this process): lets a layer above keep
    /// only the other 48 bits of a handle and rebuild it.
    pub fn notify_tag(&self) -> u16 {
        read(&self.inner.notifies).tag()
    }

    /// Whether `notify` is a live notify handle of this `Sim` (no SoC check, no other effect).
    pub fn notify_is_live(&self, notify: RawNotify) -> bool {
        read(&self.inner.notifies).get(notify.0).is_some()
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

    /// Destroys every notify handle whose device (the creator's device, or an importer's own
    /// device) satisfies `which`, as [`destroy_notify`](NotifyResources::destroy_notify) does
    /// one by one; returns how many.
    pub fn destroy_notifies_where(&self, mut which: impl FnMut(u32) -> bool) -> usize {
        let gone = write(&self.inner.notifies).remove_where(|e| which(e.device));
        // The references are dropped outside the table lock, as in `destroy_notify`.
        let n = gone.len();
        drop(gone);
        n
    }

    /// Discards every stream whose device satisfies `which` — default streams included
    /// (the device's next default stream is a new one), and streams a draining destroy on
    /// another thread is still working through (that destroy then returns 107017) — as a
    /// device reset or the end of a session does. Every stream concerned is cancelled first,
    /// and only then are their workers waited for: a task of one (a host function
    /// synchronizing another stream, say) may be waiting for another. Returns how many
    /// streams were discarded.
    pub fn discard_streams_where(&self, mut which: impl FnMut(u32) -> bool) -> usize {
        let mut streams: Vec<Arc<SimStream>> = Vec::new();
        {
            // Lock order as in `default_stream`: defaults, then the table.
            let mut defaults = lock(&self.inner.defaults);
            let mut table = write(&self.inner.streams);
            for e in table.remove_where(|e| which(e.device)) {
                if e.default
                    && let Some(slot) = defaults.get_mut(e.device as usize)
                {
                    *slot = None;
                }
                streams.push(e.stream);
            }
            streams.extend(
                lock(&self.inner.draining)
                    .iter()
                    .filter(|(_, device)| which(*device))
                    .map(|(s, _)| Arc::clone(s)),
            );
        }
        for s in &streams {
            let _ = s.begin_destroy(StreamDestroy::Discard);
        }
        for s in &streams {
            s.wait_destroyed();
        }
        lock(&self.inner.draining).retain(|(d, _)| !d.has_exited());
        streams.len()
    }

    /// Test hook: adds a whitelist entry for `pid` on this server with an explicit identity
    /// (see `sys::process_identity`; to simulate a recycled PID). Same checks as
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

    /// IPV350: every notify call is 207000, before any handle is looked at.
    fn notify_calls(&self) -> Result<(), SimError> {
        self.require(Feature::Notify, "every notify call")?;
        self.inner.file.intact()
    }

    fn device_ok(&self, device: u32) -> Result<(), SimError> {
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

    fn require(&self, f: Feature, what: &str) -> Result<(), SimError> {
        self.inner.soc.require(f).map_err(|e| {
            err(
                e,
                format!("{what} is not supported on {}", self.inner.soc.name()),
            )
        })
    }

    fn notify(&self, h: RawNotify) -> Result<NotifyView, SimError> {
        let t = read(&self.inner.notifies);
        let e = t.get(h.0).ok_or_else(|| bad_notify(h))?;
        e.r.live()?;
        Ok(NotifyView {
            r: Arc::clone(&e.r),
            state: e.state,
            device: e.device,
        })
    }

    fn stream(&self, h: RawStream) -> Result<(Arc<SimStream>, u32), SimError> {
        let t = read(&self.inner.streams);
        let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
        Ok((Arc::clone(&e.stream), e.device))
    }

    /// Moves handle `h` from lifecycle state `from` (what the call read when it began) to
    /// `to`, under the table's write lock. A handle destroyed meanwhile, or moved on by a
    /// concurrent call, is left alone: the shared slot's own compare-and-swaps decided which
    /// call won, and the handle never goes back to an earlier state.
    fn set_state(&self, h: RawNotify, from: Lifecycle, to: Lifecycle) {
        if let Some(e) = write(&self.inner.notifies).get_mut(h.0)
            && e.state == from
        {
            e.state = to;
        }
    }

    fn insert_notify(&self, e: NotifyEntry) -> Result<RawNotify, SimError> {
        write(&self.inner.notifies)
            .insert(e)
            .map(RawNotify)
            .ok_or_else(|| err(Error::ResourceAllocFail, "notify handle table is full"))
    }

    /// Whether this handle's device is the notify's physical device (same server and device).
    fn on_owner_device(&self, r: &SlotRef, device: u32) -> bool {
        r.file().server() == self.inner.server_id && r.device() == device
    }

    fn wrong_device(&self, r: &SlotRef, device: u32) -> SimError {
        err(
            Error::ParamInvalid,
            format!(
                "notify {} lives on device {} of server {}; it can only be waited on from that \
                 device, not from device {device} of server {}",
                r.id(),
                r.device(),
                r.file().server(),
                self.inner.server_id
            ),
        )
    }

    /// The pin of `stream` on notify `h` (see [`NotifyEntry::pin`]).
    fn pin(&self, h: RawNotify, stream: RawStream) -> Result<Arc<StreamPin>, SimError> {
        {
            let t = read(&self.inner.notifies);
            if let Some(pin) = t.get(h.0).ok_or_else(|| bad_notify(h))?.pin(stream) {
                return Ok(pin);
            }
        }
        let mut t = write(&self.inner.notifies);
        Ok(t.get_mut(h.0).ok_or_else(|| bad_notify(h))?.new_pin(stream))
    }

    /// The server file for a key's server: ours, or another opened read-only-ish (no create).
    fn server_file(&self, server: u32) -> Result<Arc<ShmFile>, SimError> {
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
    fn add_whitelist(
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

    fn whitelist_entry(&self, sdid: u32, pid: i32) -> WhitelistEntry {
        // A process on this server: remember its identity (a pidfs inode number, else its
        // start time), so a later process with the same PID is not let in; a PID no process
        // has now gets an entry that matches nobody, ever. On another server (another PID
        // namespace, another kernel) the identity is unknown: any process with that PID there.
        let identity = if sdid == self.inner.server_id {
            sys::process_identity(pid).unwrap_or(NOT_RUNNING)
        } else {
            0
        };
        WhitelistEntry::with_start_time(sdid, pid, identity)
    }

    /// Why this process may not import what a process of `server` exported with whitelist
    /// `wl`; `None` if it may. Shared by notify and memory imports.
    fn not_admitted(&self, wl: &Whitelist, server: u32) -> Option<String> {
        let (me_srv, me_pid, me_id) = (self.inner.server_id, self.inner.pid, self.inner.identity);
        if wl.matches(me_srv, me_pid, me_id) {
            return None;
        }
        let entry = wl.iter().find(|e| e.sdid == me_srv && e.pid == me_pid);
        Some(if entry.is_some_and(|e| e.start_time == NOT_RUNNING) {
            format!(
                "pid {me_pid} is whitelisted, but no process had that PID when it was \
                 whitelisted, so the entry admits nobody (this process got the PID later)"
            )
        } else if entry.is_some() {
            format!(
                "pid {me_pid} is whitelisted, but for another process (the PID was recycled): \
                 this process ({}) may not import",
                sys::describe_identity(me_id)
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

    /// The checks an import makes before it looks at the key: 207000 SoC without IPC; 107000
    /// bad flags; 107001 no such device.
    fn import_checks(&self, device: u32, flags: ImportFlags) -> Result<(), SimError> {
        self.require(Feature::Ipc, "importing a notify (IPC)")?;
        self.inner.file.intact()?;
        self.inner.file.still_registered()?;
        ImportFlags::from_raw(u64::from(flags.bits())).map_err(|e| {
            err(
                e,
                format!(
                    "import flags {:#x}: values above 3 are invalid",
                    flags.bits()
                ),
            )
        })?;
        self.device_ok(device)
    }

    /// An import once [`import_checks`](Self::import_checks) passed (the flags with it: none
    /// changes what the import does) and the key is parsed.
    fn import_parsed(&self, device: u32, key: &ExportKey) -> Result<RawNotify, SimError> {
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
        if slot.state() != Some(acl_notify_core::table::SlotState::Live)
            || slot.generation() != k.generation
        {
            return Err(stale(
                "the notify no longer exists (destroyed by every holder)",
            ));
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
        self.insert_notify(NotifyEntry::new(r, Lifecycle::Imported, device))
    }

    fn enqueue(
        &self,
        stream: &SimStream,
        h: RawStream,
        task: impl FnOnce(&TaskCtx) -> Result<(), SimError> + Send + 'static,
    ) -> Result<(), SimError> {
        self.enqueue_job(stream, h, SimJob::Other(Box::new(task)))
    }

    /// Queues `job` on stream `h` after `check` accepts the stream's device (and the job). The
    /// common case queues under the stream table's read lock, without taking a reference to
    /// the stream (two atomic read-modify-writes fewer); a full queue is waited for outside
    /// the lock.
    fn enqueue_checked(
        &self,
        h: RawStream,
        job: SimJob,
        check: impl FnOnce(u32, &SimJob) -> Result<(), SimError>,
    ) -> Result<(), SimError> {
        // A record is published in the wait-for graph (one store; see `waitgraph`).
        let target = match &job {
            SimJob::Record { pin, .. } => Some(pin.target()),
            _ => None,
        };
        let (s, job, graph) = {
            let t = read(&self.inner.streams);
            let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
            check(e.device, &job)?;
            let job = if trace::on() {
                trace::job::traced(job)
            } else {
                job
            };
            match e.stream.try_enqueue_job(job) {
                Ok(Ok(())) => {
                    if let (Some(t), Some(g)) = (target, &e.graph) {
                        g.note_record(t, e.stream.issued());
                    }
                    return Ok(());
                }
                Ok(Err(err)) => return Err(self.enqueue_error(&e.stream, h, err)),
                Err(job) => (Arc::clone(&e.stream), job, e.graph.clone()),
            }
        };
        self.enqueue_job(&s, h, job)?;
        if let (Some(t), Some(g)) = (target, graph) {
            g.note_record(t, s.issued());
        }
        Ok(())
    }

    /// Claims the stream's entry in the wait-for graph for the stream's worker thread, which
    /// publishes in it what a blocked wait waits on.
    fn publish_stream(
        &self,
        stream: &SimStream,
        device: u32,
    ) -> Option<Arc<waitgraph::StreamSlot>> {
        let slot = self
            .inner
            .graph
            .as_ref()?
            .claim(0, self.inner.server_id, device)?;
        slot.bind_worker(stream.worker_tid());
        Some(slot)
    }

    /// Why stream `stream` is not done, for a caller that sees it not ready: what its head
    /// task is doing ("its head task is a wait on notify 3 of device 1, asleep for 12.0 s
    /// (timeout 60.0 s)") and the failure stored on it, if any; `None` when it has no stored
    /// failure and its head is not blocked (or the stream is not a live stream of this `Sim`).
    pub fn stream_report(&self, stream: RawStream) -> Option<String> {
        let (s, graph) = {
            let t = read(&self.inner.streams);
            let e = t.get(stream.0)?;
            (Arc::clone(&e.stream), e.graph.clone())
        };
        let head = graph.and_then(|g| g.describe_head()).or_else(|| {
            let note = s.blocked_on();
            (note != 0).then(|| Blocked::describe(note).trim_start_matches("is ").to_owned())
        });
        let stored = s.stored_error();
        let mut text = String::new();
        if let Some(h) = head {
            let _ = write!(text, "its head task is {h}");
        }
        if let Some(e) = stored {
            if !text.is_empty() {
                text.push_str("; ");
            }
            let _ = write!(
                text,
                "a failure is stored on it, which the next synchronize reports: {e}"
            );
        }
        (!text.is_empty()).then_some(text)
    }

    /// Notes in the wait-for graph a record of `t` just queued on stream `stream` (for records
    /// that are not notify records, which note theirs as they are queued).
    fn note_record_on(&self, stream: RawStream, t: waitgraph::Target) {
        let st = read(&self.inner.streams);
        if let Some(e) = st.get(stream.0)
            && let Some(g) = &e.graph
        {
            g.note_record(t, e.stream.issued());
        }
    }

    /// Shows stream `stream` as `handle` in the wait-for graph (the inspector's and the
    /// deadlock reports' name for it): the C library passes the handle its callers see.
    ///
    /// Codes: 107017 for a handle that is not a live stream of this `Sim`.
    pub fn set_stream_alias(&self, stream: RawStream, handle: u64) -> Result<(), SimError> {
        let t = read(&self.inner.streams);
        let e = t.get(stream.0).ok_or_else(|| bad_stream(stream))?;
        if let Some(g) = &e.graph {
            g.set_handle(handle);
        }
        if trace::on() {
            trace::name_track(
                e.stream.worker_tid(),
                trace::stream_name(handle, e.device, e.default),
            );
        }
        Ok(())
    }

    fn enqueue_job(&self, stream: &SimStream, h: RawStream, job: SimJob) -> Result<(), SimError> {
        stream
            .enqueue_job(job)
            .map_err(|e| self.enqueue_error(stream, h, e))
    }

    #[cold]
    fn enqueue_error(&self, stream: &SimStream, h: RawStream, e: SimError) -> SimError {
        match e.kind() {
            Error::InvalidHandle => bad_stream(h),
            Error::StreamTaskFull => err(
                Error::StreamTaskFull,
                format!(
                    "stream {:#x}: its queue of {} tasks stayed full for {:?}, so this task was \
                     not queued. The task running at its head {}. Usually that is a wait for a \
                     record nobody has queued yet (or that this thread meant to queue next), or \
                     a host function that does not return: record from another stream first, \
                     give the wait a timeout, or synchronize before queuing more. The bound is \
                     SimBuilder::enqueue_timeout, or {} in seconds (0 waits for ever)",
                    h.0,
                    stream.capacity(),
                    stream.enqueue_timeout().unwrap_or_default(),
                    Blocked::describe(stream.blocked_on()),
                    ENV_ENQUEUE_TIMEOUT,
                ),
            ),
            _ => e,
        }
    }
}

/// Describes why a wait ended without a record: notify, device, timeout, owner, whitelist
/// (with liveness), last record, holders.
fn describe_wait(r: &SlotRef, timeout: Option<Duration>, what: &str) -> String {
    let slot = r.slot();
    let file = r.file();
    let mut s = String::new();
    let _ = write!(
        s,
        "{what} on notify {} (device {}, server {}) ",
        r.id(),
        r.device(),
        file.server()
    );
    match timeout {
        Some(t) => {
            let _ = write!(s, "got no record within {} s", t.as_secs_f64());
        }
        None => s.push_str("got no record"),
    }
    s.push_str(&diag::notify_facts(file, r.device(), r.id(), slot));
    s
}

fn wait_outcome_error(
    outcome: Result<WaitOutcome, acl_notify_core::table::TableError>,
    r: &SlotRef,
    timeout: Option<Duration>,
    timeout_kind: Error,
    what: &str,
) -> Result<(), SimError> {
    // A file cut short under us ends waits (see the cancel checks) and voids their outcome;
    // so does a slot that stopped being ours.
    r.file().intact()?;
    if !matches!(outcome, Ok(WaitOutcome::Consumed)) {
        r.live()?;
    }
    match outcome {
        Ok(WaitOutcome::Consumed) => Ok(()),
        Ok(WaitOutcome::TimedOut) => Err(err(timeout_kind, describe_wait(r, timeout, what))),
        Ok(WaitOutcome::Cancelled) => Err(err(
            timeout_kind,
            format!(
                "{what} on notify {} cancelled: its stream was destroyed with tasks discarded",
                r.id()
            ),
        )),
        Err(e) => Err(err(
            Error::DrvInternalError,
            format!(
                "notify {} of device {} in {}: the shared notify table is corrupt ({e:?})",
                r.id(),
                r.device(),
                r.file().path().display()
            ),
        )),
    }
}

/// A simulator stream: its queue holds [`SimJob`]s.
type SimStream = Stream<SimError, SimJob>;

/// What a simulator stream runs: records, waits and host functions as plain values (no
/// allocation per task), anything else as a boxed closure.
enum SimJob {
    Record {
        pin: Arc<StreamPin>,
        pid: i32,
    },
    Wait {
        pin: Arc<StreamPin>,
        timeout: Option<Duration>,
    },
    Host(HostCall),
    Other(Task<SimError>),
}

impl From<Task<SimError>> for SimJob {
    fn from(task: Task<SimError>) -> Self {
        SimJob::Other(task)
    }
}

impl Job<SimError> for SimJob {
    /// The task's reference to the notify: its counter is shared with the enqueuing thread,
    /// so its drop waits until the worker is between jobs (see [`Job::run`]).
    type Remains = Option<Arc<StreamPin>>;

    #[inline(always)]
    fn run(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
    ) -> (Result<(), SimError>, Self::Remains) {
        self.run_plain(ctx, before_block)
    }

    /// A record is one swap (and a wake-up call if a waiter sleeps): it runs the moment the
    /// job before it (typically a wait) ends.
    fn chains(&self) -> bool {
        matches!(self, SimJob::Record { .. })
    }

    /// Records never block; waits call `before_block` before they sleep.
    fn may_block(&self) -> bool {
        !matches!(self, SimJob::Record { .. } | SimJob::Wait { .. })
    }

    /// Starts pulling the notify's flag line in for writing while the task before runs: a
    /// record or a wait mostly finds that line in the cache of the stream at the other end
    /// (it recorded or consumed last), and the transfer then overlaps the task before
    /// instead of stalling this one's read-modify-write (two streams handing records through
    /// a ring of notifies move about a quarter more items per second).
    fn prefetch(&self) {
        if let SimJob::Record { pin, .. } | SimJob::Wait { pin, .. } = self {
            prefetch_for_write(std::ptr::from_ref(pin.0.slot()).cast());
        }
    }
}

impl SimJob {
    /// [`Job::run`] without the timeline.
    #[inline(always)]
    fn run_plain(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
    ) -> (Result<(), SimError>, Option<Arc<StreamPin>>) {
        match self {
            SimJob::Record { pin, pid } => {
                let r = &pin.0;
                if let Err(e) = r.live() {
                    return (Err(e), Some(pin));
                }
                let w = StampedWaiter {
                    inner: r.file().waiter(),
                    ctx,
                };
                r.slot().record(&w, pid);
                // A record that went into a page a truncation cut off went nowhere (see
                // `lost`): one load of the mapping's flag.
                (r.file().intact(), Some(pin))
            }
            SimJob::Wait { pin, timeout } => {
                let r = &pin.0;
                if let Err(e) = r.live() {
                    return (Err(e), Some(pin));
                }
                let sync = &r.slot().sync;
                let hint = ctx.spin_hint();
                // The record is there and nobody queued: take it before setting anything up
                // (the table's own fast path, which it would try first as well). The flag is
                // read before the CAS, so a wait that must wait pays for no extra CAS.
                if sync.is_set() && sync.try_consume() {
                    hint.set(next_spin(hint.get(), None));
                    return (r.file().intact(), Some(pin));
                }
                let result = wait_slow(&pin, timeout, ctx, before_block);
                (result, Some(pin))
            }
            SimJob::Host(call) => {
                ctx.set_blocked_on(Blocked::HostFunction.note());
                call.call();
                ctx.set_blocked_on(0);
                (Ok(()), None)
            }
            SimJob::Other(task) => (task(ctx), None),
        }
    }
}

/// The waiter of a stream's wait: the file's [`SimWaiter`] with a spin that adapts, per
/// stream, to how the stream's recent waits went.
///
/// Why: on a machine where waking a sleeping thread takes longer than the table's spin
/// ([`table::SPIN`]; KVM guests take 8–15 µs), two streams handing records back and forth can
/// settle into putting each other to sleep: each one's record wakes the other, which by then
/// has given up spinning, so every hand-off costs a wake-up, for good. A wait woken soon after
/// it went to sleep shows the record was on its way, so the stream's next wait spins longer
/// (up to [`table::MAX_SPIN`]); waits that finish without sleeping bring the spin back down
/// gradually, and a long sleep (nothing was coming) at once.
struct AdaptiveWaiter<'a> {
    inner: SimWaiter<'a>,
    /// Its place among the namespace's spinners ([`spin`]).
    spinner: spin::Spinner<'a>,
    /// This wait's spin, in nanoseconds.
    spin: u64,
    /// When this wait first slept (0: it has not).
    slept_at: Cell<u64>,
}

/// [`table::SPIN`] and [`table::MAX_SPIN`] in nanoseconds.
const SPIN_NS: u64 = table::SPIN.as_nanos() as u64;
const MAX_SPIN_NS: u64 = table::MAX_SPIN.as_nanos() as u64;

impl<'a> AdaptiveWaiter<'a> {
    /// `hint`: the stream's spin hint in nanoseconds (0: none yet).
    fn new(inner: SimWaiter<'a>, hint: u64) -> Self {
        AdaptiveWaiter {
            spinner: spin::Spinner::new(),
            inner,
            spin: hint.clamp(SPIN_NS, MAX_SPIN_NS),
            slept_at: Cell::new(0),
        }
    }

    /// The spin for the stream's next wait, after this one (nanoseconds).
    fn next_spin(&self) -> u64 {
        let slept_for = match self.slept_at.get() {
            0 => None,
            at => Some(self.inner.now_ns().saturating_sub(at)),
        };
        next_spin(self.spin, slept_for)
    }
}

/// The adaptation rule of [`AdaptiveWaiter`], in nanoseconds: `spun` is how long the last wait
/// was allowed to spin, `slept_for` how long it slept (from its first sleep to its end), if it
/// slept.
fn next_spin(spun: u64, slept_for: Option<u64>) -> u64 {
    let next = match slept_for {
        // Done while spinning: drift back toward the base spin.
        None => spun - spun / 16,
        // Woken soon after it gave up: cover that much next time, with a margin.
        Some(d) if d <= MAX_SPIN_NS => {
            let t = spun.saturating_add(d);
            t.saturating_add(t / 4)
        }
        // A long sleep: spinning would not have helped.
        Some(_) => SPIN_NS,
    };
    next.clamp(SPIN_NS, MAX_SPIN_NS)
}

impl Waiter for AdaptiveWaiter<'_> {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        if self.slept_at.get() == 0 {
            self.slept_at.set(self.inner.now_ns().max(1));
        }
        self.spinner.stop();
        self.inner.wait(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.inner.wake(word, n);
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    fn stamp_ns(&self) -> u64 {
        self.inner.stamp_ns()
    }
    fn relax(&self) {
        self.spinner.relax(|| self.inner.spinners());
    }
    fn keep_spinning(&self) -> bool {
        self.spinner.keep_spinning()
    }
    fn spin_limit(&self) -> Duration {
        if spin::Spinner::may_spin() {
            Duration::from_nanos(self.spin)
        } else {
            Duration::ZERO
        }
    }
    fn proc_alive(&self, proc: u32) -> bool {
        self.inner.proc_alive(proc)
    }
}

/// The file's [`SimWaiter`] for a stream's record: its time stamp is the stream's coarse clock
/// reading ([`TaskCtx::coarse_now_ns`]), taken once per run of quick jobs rather than once
/// per record.
struct StampedWaiter<'a> {
    inner: SimWaiter<'a>,
    ctx: &'a TaskCtx,
}

impl Waiter for StampedWaiter<'_> {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        self.inner.wait(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.inner.wake(word, n);
    }
    fn now_ns(&self) -> u64 {
        self.inner.now_ns()
    }
    #[inline]
    fn stamp_ns(&self) -> u64 {
        self.ctx.coarse_now_ns()
    }
    fn relax(&self) {
        self.inner.relax();
    }
    fn spin_limit(&self) -> Duration {
        self.inner.spin_limit()
    }
    fn proc_alive(&self, proc: u32) -> bool {
        self.inner.proc_alive(proc)
    }
}

/// Hints the CPU to bring `p`'s cache line in, exclusive (for a write). A hint only: it does
/// not access memory architecturally, cannot fault, and changes no register or flag.
#[inline(always)]
fn prefetch_for_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    {
        if has_prefetchw() {
            // SAFETY: `prefetchw` is a hint (see above), and the CPU says it has it.
            unsafe {
                core::arch::asm!(
                    "prefetchw [{0}]",
                    in(reg) p,
                    options(nostack, preserves_flags, readonly)
                );
            }
        } else {
            // SAFETY: SSE is part of x86_64; `prefetcht0` is a hint (see above).
            unsafe {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `prfm` is a hint (see above).
    unsafe {
        core::arch::asm!(
            "prfm pstl1keep, [{0}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

/// Whether this x86 CPU has `prefetchw` (CPUID 8000_0001h, ECX bit 8), asked once.
#[cfg(target_arch = "x86_64")]
fn has_prefetchw() -> bool {
    // 0: not asked yet, 1: no, 2: yes. Not a `OnceLock`: a child forked while another thread
    // asked would wait for it for ever (see [`fork`]); threads that race each ask.
    static HAS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    match HAS.load(Ordering::Relaxed) {
        0 => {
            // Leaf 0x8000_0000 gives the highest extended leaf: 0x8000_0001 is only asked for
            // when it exists.
            let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            let has =
                max >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0;
            HAS.store(1 + u8::from(has), Ordering::Relaxed);
            has
        }
        v => v == 2,
    }
}

/// The waker a sleeping stream wait registers for a discarding destroy: wakes every thread
/// sleeping on the wait's notify.
///
/// It holds the notify by address rather than by a counted reference. The wait drops its
/// waker the moment it wakes up, on the path to the stream's next task, and dropping a counted
/// reference there meant taking the reference count's cache line from the host thread, which
/// reads that line on every call it makes on the notify: about 0.3 µs of a 5 µs idle wake-up.
struct WakeSleepers {
    file: *const ShmFile,
    sync: *const table::NotifySync,
}

// SAFETY: both pointers are only read through shared references in `run`, and both targets
// are `Sync` (a mapped file and a block of atomics in it). Moving the value to another thread
// or sharing it is therefore as safe as sharing `&ShmFile` and `&NotifySync`, subject to the
// lifetime argument in `of`.
unsafe impl Send for WakeSleepers {}
// SAFETY: see `Send` above.
unsafe impl Sync for WakeSleepers {}

impl WakeSleepers {
    /// The waker for a wait on `r`. Only for [`wait_slow`]: it registers the waker through
    /// a [`stream::LazyCancel`] that it drops before it returns, while its borrow of `r`
    /// (through the task's pin) is still live. The stream engine runs a registered waker only
    /// while it holds the stream's waker lock, and dropping the `LazyCancel` (also when
    /// unwinding) removes the waker under that same lock; so `run` only ever executes while
    /// `r` — and with it the mapped file and the slot's memory in it — is alive.
    fn of(r: &SlotRef) -> WakeSleepers {
        WakeSleepers {
            file: Arc::as_ptr(r.file()),
            sync: &raw const r.slot().sync,
        }
    }

    fn run(&self) {
        // SAFETY: both targets are alive whenever this runs (see `of`).
        let (file, sync) = unsafe { (&*self.file, &*self.sync) };
        sync.wake_all(&file.waiter());
    }
}

/// A stream wait that did not find its record at once (out of line: the common case, a record
/// already there, stays small).
#[inline(never)]
fn wait_slow(
    pin: &StreamPin,
    timeout: Option<Duration>,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
) -> Result<(), SimError> {
    let r = &pin.0;
    let sync = &r.slot().sync;
    let hint = ctx.spin_hint();
    // On a discarding destroy, wake the sleeping wait so it sees the cancel flag (a wake that
    // races ahead of the sleep is caught by the table's bounded sleeps). Registered only once
    // the wait is about to sleep: a record that arrives while the wait spins costs no
    // registration.
    let lazy = ctx.lazy_cancel(|| {
        let wake = WakeSleepers::of(r);
        move || wake.run()
    });
    // The table asks "cancelled?" only right before it sleeps: that is when the tasks finished
    // before this one are retired (a synchronize waiting for them must not wait for this wait)
    // and the waker registered.
    let hook = std::cell::Cell::new(Some(before_block));
    // Published in the wait-for graph while asleep; a cycle found through it (only looked
    // for while asleep, and only with `ACL_NOTIFY_SIM_DEADLOCK=fail`) ends the wait.
    let published: std::cell::RefCell<Option<waitgraph::Blocked>> = Default::default();
    let deadlock: std::cell::RefCell<Option<String>> = Default::default();
    let check = || {
        if let Some(f) = hook.take() {
            f();
            // About to sleep: note on what, for a queue that stays full behind us.
            ctx.set_blocked_on(
                Blocked::Wait {
                    dev: r.device(),
                    id: r.id(),
                    forever: timeout.is_none(),
                }
                .note(),
            );
            *published.borrow_mut() = Some(waitgraph::Blocked::publish(
                pin.target(),
                ctx.task_number(),
                timeout,
            ));
        } else if waitgraph::fail_at_once()
            && let Some(d) = published.borrow().as_ref().and_then(|b| b.deadlock())
        {
            *deadlock.borrow_mut() = Some(d);
            return true;
        }
        lazy.check() || r.file().is_lost() || !r.is_live()
    };
    let file = r.file();
    let w = AdaptiveWaiter::new(file.waiter(), hint.get());
    let out = sync.wait_and_reset(
        &w,
        WaitArgs {
            proc: file.me(),
            timeout,
            cancel: &check,
        },
    );
    hint.set(w.next_spin());
    if hook.take().is_none() {
        ctx.set_blocked_on(0);
    }
    // A wait that timed out while others wait on it in a cycle says so (looked for before it
    // unpublishes itself, while the cycle is still there to see).
    let cycle = match (&out, deadlock.take()) {
        (Ok(WaitOutcome::Cancelled), Some(d)) => Some(format!(
            "stream wait on {} failed before its timeout ({}=fail); {d}",
            pin.target(),
            waitgraph::ENV_DEADLOCK
        )),
        (Ok(WaitOutcome::TimedOut), _) => published
            .borrow()
            .as_ref()
            .and_then(|b| b.deadlock())
            .map(|d| format!("{}; {d}", describe_wait(r, timeout, "stream wait"))),
        _ => None,
    };
    drop(published.take());
    let result = match (out, cycle) {
        (Ok(WaitOutcome::Consumed), _) => file.intact(),
        (_, Some(cycle)) => Err(err(Error::TaskTimeout, cycle)),
        (out, None) => wait_outcome_error(out, r, timeout, Error::TaskTimeout, "stream wait"),
    };
    drop(lazy);
    result
}

/// What a stream's running task blocks on, as noted for the stream engine
/// ([`TaskCtx::set_blocked_on`]) so that a queue that stays full can say why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Blocked {
    /// A wait on notify `id` of device `dev` (`forever`: with no timeout).
    Wait { dev: u32, id: u32, forever: bool },
    /// A count-notify wait on count notify `id` of device `dev`.
    CntWait { dev: u32, id: u32, forever: bool },
    /// A host function that has not returned.
    HostFunction,
}

impl Blocked {
    /// Bits 60–62 the kind, 59 "no timeout", 32–47 the device, 0–31 the id (never 0).
    fn note(self) -> u64 {
        let (kind, dev, id, forever) = match self {
            Blocked::Wait { dev, id, forever } => (1, dev, id, forever),
            Blocked::CntWait { dev, id, forever } => (2, dev, id, forever),
            Blocked::HostFunction => (3, 0, 0, false),
        };
        (kind << 60) | (u64::from(forever) << 59) | (u64::from(dev & 0xffff) << 32) | u64::from(id)
    }

    fn from_note(note: u64) -> Option<Blocked> {
        let (dev, id, forever) = (
            ((note >> 32) & 0xffff) as u32,
            note as u32,
            note & (1 << 59) != 0,
        );
        match note >> 60 {
            1 => Some(Blocked::Wait { dev, id, forever }),
            2 => Some(Blocked::CntWait { dev, id, forever }),
            3 => Some(Blocked::HostFunction),
            _ => None,
        }
    }

    /// "a wait on notify 17 of device 0 with no timeout" and the like.
    fn describe(note: u64) -> String {
        let timeout = |forever| {
            if forever {
                "with no timeout"
            } else {
                "with a timeout"
            }
        };
        match Blocked::from_note(note) {
            Some(Blocked::Wait { dev, id, forever }) => format!(
                "is a wait on notify id {id} of device {dev} {}, asleep until that notify is \
                 recorded",
                timeout(forever)
            ),
            Some(Blocked::CntWait { dev, id, forever }) => format!(
                "is a wait on count notify id {id} of device {dev} {}, asleep until its \
                 condition holds",
                timeout(forever)
            ),
            Some(Blocked::HostFunction) => "is a host function that has not returned".into(),
            None => "has not finished".into(),
        }
    }
}

fn slot_wait(r: &SlotRef, timeout: Option<Duration>, cancel: &dyn Fn() -> bool) -> WaitResult {
    let file = r.file();
    r.slot().sync.wait_and_reset(
        &file.waiter(),
        WaitArgs {
            proc: file.me(),
            timeout,
            // A file cut short under us ends the wait too (its callers then report that).
            cancel: &|| cancel() || file.is_lost() || !r.is_live(),
        },
    )
}

type WaitResult = Result<WaitOutcome, acl_notify_core::table::TableError>;

impl Backend for Sim {
    type Error = SimError;

    fn soc(&self) -> Soc {
        self.inner.soc
    }

    fn device_count(&self) -> u32 {
        self.inner.devices
    }

    fn bare_tgid(&self) -> i32 {
        sys::getpid()
    }

    fn server_id(&self) -> u32 {
        self.inner.server_id
    }
}

impl NotifyResources for Sim {
    fn create_notify(&self, device: u32, flags: CreateFlags) -> Result<RawNotify, SimError> {
        self.checked(|| {
            CreateFlags::from_raw(flags.bits()).map_err(|e| {
                err(
                    e,
                    format!(
                        "create flags {:#x}: only 0 and ACL_NOTIFY_DEVICE_USE_ONLY (0x1) exist",
                        flags.bits()
                    ),
                )
            })?;
            self.device_ok(device)?;
            self.require(Feature::Notify, "creating a notify")?;
            if flags.contains(CreateFlags::DEVICE_USE_ONLY) {
                self.require(Feature::DeviceOnly, "ACL_NOTIFY_DEVICE_USE_ONLY")?;
            }
            let file = &self.inner.file;
            file.intact()?;
            file.still_registered()?;
            let r = match SlotRef::create(file, device, flags) {
                Ok(r) => r,
                Err(CreateError::Exhausted) => {
                    // Dead processes may still hold ids: reclaim, then try once more.
                    file.gc();
                    match SlotRef::create(file, device, flags) {
                        Ok(r) => r,
                        Err(CreateError::Exhausted) => {
                            let pids: Vec<i32> = file
                                .registered()
                                .into_iter()
                                .filter(|p| p.1)
                                .map(|p| p.0)
                                .collect();
                            return Err(err(
                                Error::NoNotifyResource,
                                format!(
                                    "device {device} has no notify id left: all {} ids of {} are \
                                 in use; {} (processes using this machine: {pids:?}); {}",
                                    file.max_notifies(),
                                    self.inner.soc,
                                    diag::owners_of_device(file, device),
                                    diag::holders_of_device(file, device)
                                ),
                            ));
                        }
                        Err(CreateError::Other(e)) => return Err(e),
                    }
                }
                Err(CreateError::Other(e)) => return Err(e),
            };
            self.insert_notify(NotifyEntry::new(r, Lifecycle::Created, device))
        })
    }

    fn destroy_notify(&self, notify: RawNotify) -> Result<(), SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let Some(e) = write(&self.inner.notifies).remove(notify.0) else {
                return match &self.inner.cluster {
                    Some(c) if c.remove(notify.0) => Ok(()),
                    _ => Err(bad_notify(notify)),
                };
            };
            if let Some(c) = &self.inner.cluster {
                c.withdraw(&e.r);
            }
            // Removing the handle under the write lock decides which of two racing destroys
            // wins (the other gets 107017), and a call that looked the handle up before keeps
            // its own reference, so the notify outlives that call. Dropping the reference
            // outside the table lock: this process's bit goes when no other handle or queued
            // task uses the notify; the id when no process does (`NotifySlot::leave`).
            drop(e);
            Ok(())
        })
    }

    fn notify_info(&self, notify: RawNotify) -> Result<NotifyInfo, SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let v = match self.notify(notify) {
                Ok(v) => v,
                Err(e) => return self.remote_info(notify).ok_or(e),
            };
            Ok(NotifyInfo {
                id: v.r.id(),
                device: v.device,
                owner_device: v.r.device(),
                owner_server: v.r.file().server(),
                state: v.state,
                flags: v.r.slot().create_flags(),
            })
        })
    }

    fn export_key(&self, notify: RawNotify, flags: ExportFlags) -> Result<ExportKey, SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let v = self.notify(notify).map_err(|e| {
                let op = Op::Export(flags.pid_validation());
                self.remote_owner_only(notify, op).unwrap_or(e)
            })?;
            self.require(Feature::Ipc, "exporting a notify (IPC)")?;
            ExportFlags::from_raw(flags.bits()).map_err(|e| {
                err(
                    e,
                    format!(
                        "export flags {:#x}: only 0 and DISABLE_PID_VALIDATION (0x2) exist",
                        flags.bits()
                    ),
                )
            })?;
            let next = v
                .state
                .apply(Op::Export(flags.pid_validation()))
                .map_err(|e| {
                    let why = if v.state == Lifecycle::Imported {
                        "it was imported (only the owner exports)"
                    } else {
                        "it is already exported"
                    };
                    err(e, format!("cannot export notify {}: {why}", v.r.id()))
                })?;
            let nonce = sys::nonce16().map_err(|e| {
                err(
                    Error::DrvInternalError,
                    format!("getrandom failed while exporting: {e}"),
                )
            })?;
            let file = v.r.file();
            let how = match flags.pid_validation() {
                PidValidation::Enforced => ExportState::Enforced,
                PidValidation::Disabled => ExportState::Open,
            };
            // Only the call that wins the export empties the whitelist (the slab entry may hold a
            // previous use's, or one a dead writer left half-written), and before it publishes:
            // a losing concurrent export must not wipe entries the winner's caller adds meanwhile.
            let won = v.r.slot().export_with(nonce, how, || match how {
                ExportState::Enforced => file.reset_whitelist(v.r.device(), v.r.id()),
                _ => Ok(()),
            })?;
            if !won {
                return Err(err(
                    Error::InternalError,
                    format!("notify {} is already exported", v.r.id()),
                ));
            }
            let key = ExportKey::encode(&KeyFields {
                server: file.server() as u16,
                device: v.r.device() as u8,
                id: v.r.id() as u16,
                generation: v.r.generation(),
                nonce,
            });
            self.set_state(notify, v.state, next);
            if self.inner.cluster.is_some() && how == ExportState::Open {
                self.publish(notify, true)?;
            }
            Ok(key)
        })
    }

    fn set_import_pids(&self, notify: RawNotify, pids: &[i32]) -> Result<(), SimError> {
        self.checked(|| {
            self.notify_calls()?;
            self.require(Feature::Ipc, "whitelisting importers (IPC)")?;
            let me = self.inner.server_id;
            let entries = || pids.iter().map(|&p| self.whitelist_entry(me, p)).collect();
            self.add_whitelist(notify, pids.len(), entries, false)
        })
    }

    fn set_import_server_pids(
        &self,
        notify: RawNotify,
        entries: &[ServerPid],
    ) -> Result<(), SimError> {
        self.checked(|| {
            self.notify_calls()?;
            if entries.is_empty() {
                return Err(err(Error::ParamInvalid, "no (server, PID) entries given"));
            }
            self.notify(notify).map_err(|e| {
                self.remote_owner_only(notify, Op::SetImportPid)
                    .unwrap_or(e)
            })?;
            for sp in entries {
                self.require(Feature::InterServer, "inter-server whitelisting")?;
                self.require(Feature::Ipc, "whitelisting importers (IPC)")?;
                let entry = || vec![self.whitelist_entry(sp.sdid, sp.pid)];
                self.add_whitelist(notify, 1, entry, true)?;
            }
            if self.inner.cluster.is_some()
                && entries.iter().any(|e| e.sdid != self.inner.server_id)
            {
                self.publish(notify, false)?;
            }
            Ok(())
        })
    }

    fn import_by_key(
        &self,
        device: u32,
        key: &str,
        flags: ImportFlags,
    ) -> Result<RawNotify, SimError> {
        self.checked(|| {
            self.import_checks(device, flags)?;
            let key = ExportKey::parse(key.as_bytes()).map_err(|e| {
                err(
                    e,
                    format!(
                        "malformed export key ({} bytes): expected the 64 characters \
                     aclrtNotifyGetExportKey wrote",
                        key.len()
                    ),
                )
            })?;
            self.import_parsed(device, &key)
        })
    }

    fn import_key(
        &self,
        device: u32,
        key: &ExportKey,
        flags: ImportFlags,
    ) -> Result<RawNotify, SimError> {
        self.checked(|| {
            self.import_checks(device, flags)?;
            self.import_parsed(device, key)
        })
    }

    fn can_access_peer(&self, device: u32, peer: u32) -> Result<bool, SimError> {
        self.device_ok(device)?;
        self.device_ok(peer)?;
        Ok(device != peer)
    }

    fn enable_peer_access(&self, device: u32, peer: u32) -> Result<(), SimError> {
        self.device_ok(device)?;
        self.device_ok(peer)?;
        if device == peer {
            return Err(err(
                Error::ParamInvalid,
                format!("peer access from device {device} to itself"),
            ));
        }
        lock(&self.inner.peers)[device as usize] |= 1u64 << peer;
        Ok(())
    }
}

impl StreamOps for Sim {
    fn create_stream(&self, device: u32) -> Result<RawStream, SimError> {
        self.device_ok(device)?;
        let n = self.inner.stream_seq.fetch_add(1, Ordering::Relaxed);
        let stream = self.spawn_stream(format!("acl-sim-d{device}-s{n}"))?;
        let graph = self.publish_stream(&stream, device);
        let h = write(&self.inner.streams)
            .insert(StreamEntry {
                stream: Arc::new(stream),
                device,
                default: false,
                graph: graph.clone(),
            })
            .map(RawStream)
            .ok_or_else(|| err(Error::ResourceAllocFail, "stream table is full"))?;
        if let Some(g) = graph {
            g.set_handle(h.0);
        }
        if trace::on() {
            self.name_track(h);
        }
        Ok(h)
    }

    fn default_stream(&self, device: u32) -> Result<RawStream, SimError> {
        self.device_ok(device)?;
        let mut d = lock(&self.inner.defaults);
        if let Some(h) = d[device as usize] {
            return Ok(RawStream(h));
        }
        let stream = self.spawn_stream(format!("acl-sim-d{device}-default"))?;
        let graph = self.publish_stream(&stream, device);
        let h = write(&self.inner.streams)
            .insert(StreamEntry {
                stream: Arc::new(stream),
                device,
                default: true,
                graph: graph.clone(),
            })
            .ok_or_else(|| err(Error::ResourceAllocFail, "stream table is full"))?;
        if let Some(g) = graph {
            g.set_handle(h);
        }
        if trace::on() {
            self.name_track(RawStream(h));
        }
        d[device as usize] = Some(h);
        Ok(RawStream(h))
    }

    fn stream_device(&self, stream: RawStream) -> Result<u32, SimError> {
        Ok(self.stream(stream)?.1)
    }

    fn destroy_stream(&self, stream: RawStream, mode: StreamDestroy) -> Result<(), SimError> {
        let (e, drain) = {
            let mut t = write(&self.inner.streams);
            match t.get(stream.0) {
                None => return Err(bad_stream(stream)),
                Some(e) if e.default => {
                    return Err(err(
                        Error::InvalidHandle,
                        format!(
                            "stream handle {:#x} is the default stream of device {}, which \
                             cannot be destroyed",
                            stream.0, e.device
                        ),
                    ));
                }
                Some(_) => {}
            }
            let e = t.remove(stream.0).ok_or_else(|| bad_stream(stream))?;
            // Still found by `discard_streams_where` while it drains.
            let drain = (mode == StreamDestroy::Drain).then(|| {
                let s = Arc::clone(&e.stream);
                let mut draining = lock(&self.inner.draining);
                draining.retain(|(d, _)| !d.has_exited());
                draining.push((Arc::clone(&s), e.device));
                s
            });
            (e, drain)
        };
        // Outside the lock: a draining destroy waits for the stream's tasks.
        let r = e.stream.destroy(mode);
        // A destroy from one of the stream's own tasks returns while the worker still drains
        // what is queued behind that task: it stays listed until its worker has exited (the
        // next draining destroy prunes it), so that a finalize or reset still finds it.
        if let Some(s) = drain.filter(|s| s.has_exited()) {
            lock(&self.inner.draining).retain(|(d, _)| !Arc::ptr_eq(d, &s));
        }
        r.map_err(|e| {
            if mode == StreamDestroy::Drain && e.kind() == Error::InvalidHandle {
                err(
                    Error::InvalidHandle,
                    format!(
                        "stream {:#x} was discarded while it drained (its device was reset, \
                         or the session ended): its remaining tasks did not run",
                        stream.0
                    ),
                )
            } else {
                e
            }
        })
    }

    fn record(&self, notify: RawNotify, stream: RawStream) -> Result<(), SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let pin = match self.pin(notify, stream) {
                Ok(pin) => pin,
                Err(e) => return self.record_remote(notify, stream).unwrap_or(Err(e)),
            };
            let job = SimJob::Record {
                pin,
                pid: self.inner.pid,
            };
            self.enqueue_checked(stream, job, |_, _| Ok(()))
        })
    }

    fn wait_and_reset(
        &self,
        notify: RawNotify,
        stream: RawStream,
        timeout: Timeout,
    ) -> Result<(), SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let pin = self
                .pin(notify, stream)
                .map_err(|e| self.not_waitable_remote(notify).unwrap_or(e))?;
            // UINT32_MAX: for ever, or the aclrtSetOpWaitTimeout value, per SoC (`soc.rs`).
            let op_wait = self.inner.op_wait_timeout.load(Ordering::Relaxed);
            let t = self.inner.soc.resolve_wait(timeout, op_wait).duration();
            self.enqueue_checked(
                stream,
                SimJob::Wait { pin, timeout: t },
                |sdev, job| match job {
                    SimJob::Wait { pin, .. } if !self.on_owner_device(&pin.0, sdev) => {
                        Err(self.wrong_device(&pin.0, sdev))
                    }
                    _ => Ok(()),
                },
            )
        })
    }

    fn batch_reset(&self, notifies: &[RawNotify]) -> Result<(), SimError> {
        self.batch_reset_with(notifies.len(), |i| notifies.get(i).copied())
    }

    fn synchronize(&self, stream: RawStream, wait: SyncWait) -> Result<(), SimError> {
        self.checked(|| {
            let (s, _) = self.stream(stream)?;
            s.synchronize(wait).map_err(|e| {
                if e.kind() == Error::InvalidHandle && e.message().is_empty() {
                    bad_stream(stream)
                } else if e.kind() == Error::StreamSyncTimeout && e.message().is_empty() {
                    let why = self
                        .stream_report(stream)
                        .map_or_else(String::new, |r| format!(": {r}"));
                    err(
                        Error::StreamSyncTimeout,
                        format!("stream {:#x} still has tasks after {wait}{why}", stream.0),
                    )
                } else if e.kind() == Error::InternalError && e.message().is_empty() {
                    err(
                        Error::InternalError,
                        "synchronize called from a host function running on this very stream: it \
                     would wait for itself",
                    )
                } else {
                    e
                }
            })
        })
    }

    fn query(&self, stream: RawStream) -> Result<StreamStatus, SimError> {
        Ok(self.stream(stream)?.0.query())
    }

    fn launch_host_func(&self, stream: RawStream, call: HostCall) -> Result<(), SimError> {
        let (s, _) = self.stream(stream)?;
        let job = if trace::on() {
            trace::job::traced(SimJob::Host(call))
        } else {
            SimJob::Host(call)
        };
        self.enqueue_job(&s, stream, job)
    }

    fn set_op_wait_timeout(&self, seconds: u32) -> Result<(), SimError> {
        self.inner.op_wait_timeout.store(seconds, Ordering::Relaxed);
        Ok(())
    }
}

impl HostOps for Sim {
    fn host_wait(&self, notify: RawNotify, timeout: Duration) -> Result<(), SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let v = self
                .notify(notify)
                .map_err(|e| self.not_waitable_remote(notify).unwrap_or(e))?;
            if !self.on_owner_device(&v.r, v.device) {
                return Err(self.wrong_device(&v.r, v.device));
            }
            // Ends (within a chunk) if the handle is destroyed meanwhile, by another thread: a
            // long or endless host wait on a notify nobody can record any more must not outlive it.
            let gone = || !self.notify_is_live(notify);
            let out = slot_wait(&v.r, Some(timeout), &gone);
            if matches!(out, Ok(WaitOutcome::Cancelled)) && gone() {
                v.r.file().intact()?;
                return Err(err(
                    Error::InvalidHandle,
                    format!(
                        "notify handle {:#x} was destroyed while this host wait waited on it",
                        notify.0
                    ),
                ));
            }
            wait_outcome_error(out, &v.r, Some(timeout), Error::WaitTimeout, "host wait")
        })
    }

    fn try_consume(&self, notify: RawNotify) -> Result<bool, SimError> {
        self.checked(|| {
            self.notify_calls()?;
            let v = self
                .notify(notify)
                .map_err(|e| self.not_waitable_remote(notify).unwrap_or(e))?;
            if !self.on_owner_device(&v.r, v.device) {
                return Err(self.wrong_device(&v.r, v.device));
            }
            Ok(v.r.slot().sync.try_consume())
        })
    }

    fn notifies_free(&self, device: u32) -> Result<u32, SimError> {
        self.checked(|| {
            self.device_ok(device)?;
            self.require(Feature::Notify, "notifies")?;
            let file = &self.inner.file;
            file.intact()?;
            // Ids that only dead processes hold are as good as free: a create would reclaim them.
            file.reclaim_dead();
            let pool = file
                .pool(device)
                .ok_or_else(|| err(Error::DrvInternalError, "no id pool"))?;
            Ok(pool.capacity().saturating_sub(pool.in_use()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::Instant;

    use crate::NamespaceGuard as Ns;

    fn open(tag: &str, soc: Soc) -> (Sim, Ns) {
        open_with(tag, Sim::builder().soc(soc))
    }

    /// `builder` (2 devices) on a fresh namespace for test `tag`, removed when `Ns` drops.
    fn open_with(tag: &str, builder: SimBuilder) -> (Sim, Ns) {
        let ns = format!("unit-lib-{tag}-{}", std::process::id());
        let _ = Sim::remove_namespace(&ns);
        let sim = builder.devices(2).namespace(&ns).open().unwrap();
        (sim, Ns(ns))
    }

    #[test]
    fn sim_is_send_and_sync() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<Sim>();
        check::<SimError>();
    }

    #[test]
    fn builder_errors_name_the_setting() {
        let e = Sim::builder().devices(0).open().unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
        assert!(e.to_string().contains("devices"), "{e}");
        let e = Sim::builder().namespace("a/b").open().unwrap_err();
        assert!(e.to_string().contains("namespace"), "{e}");
        let e = Sim::builder().server_id(2).open().unwrap_err();
        assert!(e.to_string().contains("Ascend910_93"), "{e}");
    }

    /// Another process took this one for dead and dropped its references (what its gc does
    /// with a dead process's entry): the notify's id is free for anyone, so this process's
    /// record, waits and host calls on its old handle fail with 507899 instead of acting on
    /// whatever notify has the id now; a wait already asleep on it ends the same way.
    #[test]
    fn a_notify_whose_references_were_dropped_for_this_process_fails_instead_of_acting() {
        let (sim, _ns) = open("stale", Soc::Ascend910B);
        let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let id = sim.notify_info(h).unwrap().id;
        let (s, w) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
        sim.wait_and_reset(h, w, Timeout::Forever).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let file = &sim.inner.file;
        assert_eq!(file.reclaim_proc(file.me()).notifies_freed, 1);
        let t0 = Instant::now();
        let e = sim
            .synchronize(w, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
        assert!(e.to_string().contains("no longer holds it"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        // A record is refused when its task runs (the stream reports it, as for any task).
        sim.record(h, s).unwrap();
        let record = sim
            .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap_err();
        for e in [
            record,
            sim.host_wait(h, Duration::from_millis(10)).unwrap_err(),
            sim.batch_reset(&[h]).unwrap_err(),
        ] {
            assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
        }
        // The id went back to the pool: a new notify gets it and works; the old handle still
        // fails rather than reaching it.
        let other = sim.create_notify(0, CreateFlags::empty()).unwrap();
        assert_eq!(sim.notify_info(other).unwrap().id, id);
        sim.record(other, s).unwrap();
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        assert!(sim.try_consume(other).unwrap(), "the new notify's record");
    }

    /// The typed layer's own refusals carry an explanation, not just the code.
    #[test]
    fn typed_refusals_explain_themselves() {
        use acl_notify_core::soc::{Ascend310B, Ascend910B};
        use acl_notify_core::typed::Device;
        let (sim, _ns) = open("typedmsg", Soc::Ascend910B);
        let e = Device::<Ascend310B, _>::new(&sim, 0).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
        assert!(
            e.to_string()
                .contains("this Device type is for Ascend310B, but the machine is Ascend910B"),
            "{e}"
        );
        let e = Device::<Ascend910B, _>::new(&sim, 7).unwrap_err();
        assert_eq!(e.kind(), Error::InvalidDeviceId);
        assert!(e.to_string().contains("device 7 does not exist"), "{e}");
    }

    /// A host wait (here one that would last a day) ends when another thread destroys its
    /// notify handle, with 107017 saying so.
    #[test]
    fn a_host_wait_ends_when_its_handle_is_destroyed() {
        let (sim, _ns) = open("hwdestroy", Soc::Ascend910B);
        let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let t0 = Instant::now();
        let r = std::thread::scope(|sc| {
            let w = sc.spawn(|| sim.host_wait(h, Duration::from_secs(20)));
            std::thread::sleep(Duration::from_millis(100));
            sim.destroy_notify(h).unwrap();
            w.join().unwrap()
        });
        let e = r.unwrap_err();
        assert_eq!(e.kind(), Error::InvalidHandle, "{e}");
        assert!(e.to_string().contains("was destroyed while"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    /// A host function that synchronizes its own stream gets 507000 with the reason.
    #[test]
    fn synchronize_from_the_stream_s_own_host_function_says_why_it_is_refused() {
        let (sim, _ns) = open("hostsync", Soc::Ascend910B);
        let s = sim.create_stream(0).unwrap();
        let got = Arc::new(Mutex::new(None));
        let (sim2, got2) = (sim.clone(), Arc::clone(&got));
        let (st, _) = sim.stream(s).unwrap();
        sim.enqueue(&st, s, move |_| {
            *got2.lock().unwrap() = Some(sim2.synchronize(s, SyncWait::Forever));
            Ok(())
        })
        .unwrap();
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        let e = got.lock().unwrap().take().unwrap().unwrap_err();
        assert_eq!(e.kind(), Error::InternalError);
        assert!(e.to_string().contains("would wait for itself"), "{e}");
    }

    /// A 207009 says which process-table entries keep the device's notifies alive (not only
    /// who created them) and how many of its ids are allocated with nobody holding them: what a
    /// fill that comes up short needs to tell a missed reclaim from a stray bit or an id left
    /// half-way by a dead process.
    #[test]
    fn an_exhausted_device_names_the_entries_that_hold_its_ids_and_its_orphans() {
        let (sim, _ns) = open("heldby", Soc::Ascend910);
        let file = &sim.inner.file;
        let (me, pid) = (file.me(), std::process::id());
        // A notify kept alive only by the bit of a free process-table entry, whose creator
        // destroyed it; and an id allocated with no notify (a creator died before claiming).
        let stray = (0..64)
            .find(|&i| file.proc_entry(i).unwrap().word.load(SeqCst) == 0)
            .unwrap();
        let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let slot = file.slot(0, sim.notify_info(h).unwrap().id).unwrap();
        assert_eq!(slot.join(stray, slot.generation()), Ok(true));
        sim.destroy_notify(h).unwrap();
        let pool = file.pool(0).unwrap();
        file.note_allocated(0, pool.alloc().unwrap());
        let mut mine = 0;
        let e = loop {
            match sim.create_notify(0, CreateFlags::empty()) {
                Ok(_) => mine += 1,
                Err(e) => break e,
            }
        };
        assert_eq!((e.kind(), mine), (Error::NoNotifyResource, 1022), "{e}");
        let text = e.to_string();
        for part in [
            format!(
                "held through process-table entries {me} (pid {pid}, registered, alive, this \
                 process) on 1022, {stray} (free: stray bits) on 1;"
            ),
            "1 allocated id has no live notify or no holder".to_owned(),
        ] {
            assert!(text.contains(&part), "{part:?} not in: {text}");
        }
    }

    /// The free-id count does not count ids that only a dead process holds: it drops dead
    /// processes' references first, as a create that ran out would.
    #[test]
    fn the_free_count_drops_a_dead_process_s_references_first() {
        let (sim, _ns) = open("freedead", Soc::Ascend910);
        let file = &sim.inner.file;
        let all = sim.notifies_free(0).unwrap();
        let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let id = sim.notify_info(h).unwrap().id;
        // A process that registered, joined the notify and died (its pid: a reaped child).
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id();
        c.wait().unwrap();
        let j = (0..64)
            .find(|&i| file.proc_entry(i).unwrap().word.load(SeqCst) == 0)
            .unwrap();
        let e = file.proc_entry(j).unwrap();
        e.start_time.store(1, SeqCst);
        e.word
            .store((u64::from(shm::P_ALIVE) << 32) | u64::from(dead), SeqCst);
        let slot = file.slot(0, id).unwrap();
        assert_eq!(slot.join(j, slot.generation()), Ok(true));
        sim.destroy_notify(h).unwrap();
        assert_eq!(sim.notifies_free(0).unwrap(), all, "the dead holder's id");
        assert_eq!(e.word.load(SeqCst), 0, "its entry freed");
    }

    /// A stream whose head waits for ever for a record that this thread would queue only
    /// later: queuing past the capacity fails with 507002 after the bound, with a message that
    /// says why, instead of hanging; nothing queued before is lost.
    #[test]
    fn queuing_into_a_stuck_full_stream_fails_with_507002_instead_of_hanging() {
        let limit = Duration::from_millis(200);
        let (sim, _ns) = open_with("full", Sim::builder().enqueue_timeout(Some(limit)));
        let (s, other) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
        let (gate, tick) = (
            sim.create_notify(0, CreateFlags::empty()).unwrap(),
            sim.create_notify(0, CreateFlags::empty()).unwrap(),
        );
        sim.wait_and_reset(gate, s, Timeout::Forever).unwrap();
        // Each queued round consumes its own record; a round whose wait is refused leaves its
        // record set. Any lost task shows as a flag in the wrong state, or a stuck wait.
        let mut queued = 0;
        let (e, took, left_set) = loop {
            assert!(queued < 4 * STREAM_CAPACITY, "the queue never filled");
            let t0 = std::time::Instant::now();
            match sim.record(tick, s) {
                Ok(()) => queued += 1,
                Err(e) => break (e, t0.elapsed(), false),
            }
            match sim.wait_and_reset(tick, s, Timeout::Forever) {
                Ok(()) => queued += 1,
                Err(e) => break (e, t0.elapsed(), true),
            }
        };
        assert_eq!(e.kind(), Error::StreamTaskFull, "{e}");
        assert!(took >= limit, "refused after {took:?}, before {limit:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("stayed full") && msg.contains(ENV_ENQUEUE_TIMEOUT),
            "{msg}"
        );
        let head = format!(
            "a wait on notify id {} of device 0 with no timeout",
            sim.notify_info(gate).unwrap().id
        );
        assert!(msg.contains(&head), "`{head}` missing: {msg}");
        assert!(queued >= STREAM_CAPACITY, "only {queued} tasks were queued");
        // Unblock the head: every task queued before the refusal runs.
        sim.record(gate, other).unwrap();
        let sync = SyncWait::AtMost(Duration::from_secs(10));
        sim.synchronize(s, sync).unwrap();
        sim.synchronize(other, sync).unwrap();
        assert_eq!(
            sim.try_consume(tick).unwrap(),
            left_set,
            "a queued task was lost"
        );
        sim.record(tick, s).unwrap();
        sim.synchronize(s, sync).unwrap();
        assert!(
            sim.try_consume(tick).unwrap(),
            "the stream did not go on after 507002"
        );
    }

    /// Another process (here: this one, by path) truncates the namespace's file while it is
    /// mapped: touching the lost pages must not kill the process (SIGBUS), a stream waiting
    /// for ever ends with an error, and every call from then on says the state is lost.
    #[test]
    fn a_truncated_namespace_file_is_an_error_not_a_crash() {
        let (sim, _ns) = open("trunc", Soc::Ascend910B);
        let s = sim.create_stream(0).unwrap();
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        std::fs::OpenOptions::new()
            .write(true)
            .open(sim.shm_path())
            .unwrap()
            .set_len(4096)
            .unwrap();
        // The waiting stream wakes within a sleep chunk (50 ms), touches its lost slot and
        // ends with the error.
        let e = sim
            .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
        assert!(e.to_string().contains("truncated"), "{e}");
        let e = sim.create_notify(0, CreateFlags::empty()).unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
        assert!(e.to_string().contains("truncated"), "{e}");
        assert_eq!(
            sim.record(n, s).unwrap_err().kind(),
            Error::DrvInternalError
        );
        assert_eq!(
            sim.notifies_free(0).unwrap_err().kind(),
            Error::DrvInternalError
        );
        // Opening the namespace again is refused: here (this process's mapping is lost) and
        // in a fresh process, whose open checks the file's size before it maps it
        // (`mapfile`'s `a_short_file_is_refused_at_once`).
        let again = Sim::builder()
            .soc(Soc::Ascend910B)
            .devices(2)
            .namespace(sim.namespace())
            .open()
            .unwrap_err();
        assert!(again.to_string().contains("truncated"), "{again}");
    }

    #[test]
    fn what_a_stream_is_blocked_on_round_trips_through_its_note() {
        for b in [
            Blocked::Wait {
                dev: 63,
                id: 65_534,
                forever: true,
            },
            Blocked::Wait {
                dev: 0,
                id: 1,
                forever: false,
            },
            Blocked::CntWait {
                dev: 7,
                id: 8191,
                forever: false,
            },
            Blocked::HostFunction,
        ] {
            assert_ne!(b.note(), 0, "{b:?}");
            assert_eq!(Blocked::from_note(b.note()), Some(b));
        }
        assert_eq!(Blocked::from_note(0), None);
        assert_eq!(Blocked::describe(0), "has not finished");
        assert!(Blocked::describe(Blocked::HostFunction.note()).contains("host function"));
    }

    /// A host function that does not return (until let go) at a stream's head: a full queue
    /// behind it says so.
    #[test]
    fn a_full_queue_behind_a_host_function_names_it() {
        let bounded = Sim::builder().enqueue_timeout(Some(Duration::from_millis(100)));
        let (sim, _ns) = open_with("fullhost", bounded);
        let s = sim.create_stream(0).unwrap();
        static HOLD: AtomicU32 = AtomicU32::new(1);
        unsafe extern "C" fn hold(_: *mut std::ffi::c_void) {
            let end = Instant::now() + Duration::from_secs(20);
            while HOLD.load(Ordering::SeqCst) == 1 && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        // SAFETY: `hold` ignores its argument and does not unwind.
        let call = unsafe { HostCall::new(hold, std::ptr::null_mut()) };
        sim.launch_host_func(s, call).unwrap();
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let e = loop {
            if let Err(e) = sim.record(n, s) {
                break e;
            }
        };
        HOLD.store(0, Ordering::SeqCst);
        assert_eq!(e.kind(), Error::StreamTaskFull, "{e}");
        assert!(
            e.to_string()
                .contains("is a host function that has not returned"),
            "{e}"
        );
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))
            .unwrap();
    }

    /// A record's time stamp is read once per run of quick jobs: a wait that slept, or a
    /// host function, between two records of one batch must not leave the second with the
    /// first one's time.
    #[test]
    fn a_record_after_a_blocking_job_gets_a_fresh_time_stamp() {
        let (sim, _ns) = open("stamp", Soc::Ascend910B);
        let s = sim.create_stream(0).unwrap();
        let other = sim.create_stream(0).unwrap();
        let n: Vec<RawNotify> = (0..4)
            .map(|_| sim.create_notify(0, CreateFlags::empty()).unwrap())
            .collect();
        let stamp = |h: RawNotify| sim.notify(h).unwrap().r.slot().last_record().1;
        const GAP: Duration = Duration::from_millis(100);
        // Held behind a wait, so that the jobs after it are taken from the queue together.
        let hold = sim.create_notify(0, CreateFlags::empty()).unwrap();
        sim.wait_and_reset(hold, s, Timeout::Forever).unwrap();
        // Batch: record n0, wait n1 (sleeps ~100 ms), record n2, host sleep, record n3.
        sim.record(n[0], s).unwrap();
        sim.wait_and_reset(n[1], s, Timeout::Forever).unwrap();
        sim.record(n[2], s).unwrap();
        unsafe extern "C" fn nap(_: *mut std::ffi::c_void) {
            std::thread::sleep(GAP);
        }
        // SAFETY: `nap` ignores its argument and does not unwind.
        let nap = unsafe { HostCall::new(nap, std::ptr::null_mut()) };
        sim.launch_host_func(s, nap).unwrap();
        sim.record(n[3], s).unwrap();
        sim.record(hold, other).unwrap();
        std::thread::sleep(GAP);
        sim.record(n[1], other).unwrap();
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        let (t0, t2, t3) = (stamp(n[0]), stamp(n[2]), stamp(n[3]));
        // The coarse clock ticks every few ms: allow 20 ms of the 100.
        let at_least = (GAP - Duration::from_millis(20)).as_nanos() as u64;
        assert!(t0 > 0);
        assert!(
            t2 >= t0 + at_least,
            "stamp after a sleeping wait is stale: {t0} → {t2}"
        );
        assert!(
            t3 >= t2 + at_least,
            "stamp after a host function is stale: {t2} → {t3}"
        );
    }

    #[test]
    fn a_stream_wait_spins_longer_after_waking_just_too_late_and_comes_back_down() {
        let us = |n: u64| n * 1000;
        let (base, max) = (SPIN_NS, MAX_SPIN_NS);
        assert_eq!((base, max), (us(10), us(50)));
        // Woken 14 µs after giving up a 10 µs spin: next time spin (10 + 14) × 1.25 = 30 µs.
        assert_eq!(next_spin(base, Some(us(14))), us(30));
        // Never past MAX_SPIN, never below SPIN.
        assert_eq!(next_spin(us(40), Some(us(40))), max);
        assert_eq!(next_spin(0, None), base);
        assert_eq!(next_spin(u64::MAX, Some(0)), max);
        // A long sleep: back to the base at once.
        assert_eq!(next_spin(max, Some(max + 1)), base);
        assert_eq!(next_spin(max, Some(u64::MAX)), base);
        // Waits that end while spinning bring it down by 1/16 each, to the base.
        let mut s = max;
        let mut waits = 0;
        while s > base {
            let n = next_spin(s, None);
            assert!(n < s);
            s = n;
            waits += 1;
        }
        assert_eq!(s, base);
        assert!((10..=40).contains(&waits), "{waits} waits to come down");
        // A hint of zero (a fresh stream) starts at the base.
        let (sim, _ns) = open("adapt", Soc::Ascend910B);
        let w = AdaptiveWaiter::new(sim.inner.file.waiter(), 0);
        assert_eq!(w.spin_limit(), table::SPIN);
        assert_eq!(w.next_spin(), next_spin(base, None));
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn prefetchw_is_used_exactly_when_the_cpu_has_it() {
        // The kernel's name for the CPUID bit is `3dnowprefetch`.
        let info = std::fs::read_to_string("/proc/cpuinfo").unwrap();
        let flags = info
            .lines()
            .find(|l| l.starts_with("flags"))
            .expect("no flags line in /proc/cpuinfo");
        let kernel_says = flags.split_whitespace().any(|f| f == "3dnowprefetch");
        assert_eq!(has_prefetchw(), kernel_says);
        // Either way the hint is harmless, on any address.
        let x = [0u8; 64];
        prefetch_for_write(x.as_ptr());
        prefetch_for_write(std::ptr::null());
    }

    #[test]
    fn stream_cpus_parse_and_say_what_is_wrong() {
        assert_eq!(StreamCpus::parse("off"), Ok(StreamCpus::Scheduler));
        assert_eq!(StreamCpus::parse(" spread "), Ok(StreamCpus::Spread));
        assert_eq!(
            StreamCpus::parse("3,0-2"),
            Ok(StreamCpus::List(vec![3, 0, 1, 2]))
        );
        for (bad, says) in [
            ("", "not a CPU number"),
            ("1,,2", "not a CPU number"),
            ("x", "not a CPU number"),
            ("-1", "not a CPU number"),
            ("3-1", "backwards"),
            ("1024", "0 to 1023"),
        ] {
            let e = StreamCpus::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn spread_streams_take_the_allowed_cpus_in_turn() {
        let allowed = stream::allowed_cpus();
        let ns = format!("unit-lib-cpus-{}", std::process::id());
        let _g = Ns(ns.clone());
        let sim = Sim::builder()
            .namespace(&ns)
            .devices(1)
            .stream_cpus(StreamCpus::Spread)
            .open()
            .unwrap();
        let streams: Vec<RawStream> = (0..allowed.len() + 1)
            .map(|_| sim.create_stream(0).unwrap())
            .collect();
        let placed: Vec<usize> = streams
            .iter()
            .map(|&s| sim.stream_cpu(s).unwrap().unwrap())
            .collect();
        // In turn, starting at this process's place in the namespace.
        let first = sim.inner.file.me() as usize;
        let k = allowed.len();
        let want: Vec<usize> = (0..=k).map(|i| allowed[(first + i) % k]).collect();
        assert_eq!(placed, want);
        // The default stream is placed too, and placed streams still run work.
        let d = sim.default_stream(0).unwrap();
        assert_eq!(
            sim.stream_cpu(d).unwrap(),
            Some(allowed[(first + k + 1) % k])
        );
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        sim.record(n, streams[0]).unwrap();
        sim.wait_and_reset(n, d, Timeout::from_c(5)).unwrap();
        sim.synchronize(d, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        // An explicit list is used in its order; the kernel places streams by default.
        let sim2 = Sim::builder()
            .namespace(&ns)
            .devices(1)
            .stream_cpus(StreamCpus::List(vec![allowed[0]]))
            .open()
            .unwrap();
        let s = sim2.create_stream(0).unwrap();
        assert_eq!(sim2.stream_cpu(s).unwrap(), Some(allowed[0]));
        let (sim3, _ns3) = open("cpus-off", Soc::Ascend910B);
        let s = sim3.create_stream(0).unwrap();
        assert_eq!(sim3.stream_cpu(s).unwrap(), None);
        assert_eq!(
            sim3.stream_cpu(RawStream(7)).unwrap_err().kind(),
            Error::InvalidHandle
        );
    }

    #[test]
    fn a_cpu_list_the_process_may_not_use_is_refused_at_open() {
        let allowed = stream::allowed_cpus();
        let outside = (0..MAX_CPU).find(|c| !allowed.contains(c)).unwrap();
        for list in [vec![outside], vec![]] {
            let e = Sim::builder()
                .namespace("unit-lib-cpus-bad")
                .stream_cpus(StreamCpus::List(list.clone()))
                .open()
                .unwrap_err();
            assert_eq!(e.kind(), Error::ParamInvalid, "{list:?}");
            assert!(e.to_string().contains("stream_cpus"), "{e}");
        }
        assert!(
            Sim::builder()
                .namespace("unit-lib-cpus-bad")
                .stream_cpus(StreamCpus::List(vec![outside]))
                .open()
                .unwrap_err()
                .to_string()
                .contains(&format!("CPU {outside} is not one this process may use"))
        );
    }

    #[test]
    fn record_wait_on_streams_and_host() {
        let (sim, _ns) = open("rw", Soc::Ascend910B);
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(0).unwrap();
        let d = sim.default_stream(0).unwrap();
        assert_eq!(sim.default_stream(0).unwrap(), d);
        // Wait first (stalls stream s, not us), record later on the default stream.
        sim.wait_and_reset(n, s, Timeout::from_c(5)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(sim.query(s).unwrap(), StreamStatus::NotReady);
        sim.record(n, d).unwrap();
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(sim.query(s).unwrap(), StreamStatus::Complete);
        // Record first, collapse, one wait consumes.
        sim.record(n, d).unwrap();
        sim.record(n, d).unwrap();
        sim.synchronize(d, SyncWait::Forever).unwrap();
        assert!(sim.try_consume(n).unwrap());
        assert!(!sim.try_consume(n).unwrap());
        let t0 = Instant::now();
        let e = sim.host_wait(n, Duration::from_millis(30)).unwrap_err();
        assert_eq!(e.kind(), Error::WaitTimeout);
        assert!(t0.elapsed() >= Duration::from_millis(25));
        assert!(e.to_string().contains("owner pid"), "{e}");
        sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
        assert_eq!(sim.query(s).unwrap_err().kind(), Error::InvalidHandle);
        assert_eq!(
            sim.destroy_stream(d, StreamDestroy::Drain)
                .unwrap_err()
                .kind(),
            Error::InvalidHandle
        );
        sim.destroy_notify(n).unwrap();
        assert_eq!(
            sim.destroy_notify(n).unwrap_err().kind(),
            Error::InvalidHandle
        );
    }

    #[test]
    fn stream_wait_timeout_is_reported_once_with_details() {
        let (sim, _ns) = open("to", Soc::Ascend910B);
        let n = sim.create_notify(1, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(1).unwrap();
        sim.wait_and_reset(n, s, Timeout::from_c(1)).unwrap();
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert_eq!(e.kind(), Error::TaskTimeout);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("notify {}", sim.notify_info(n).unwrap().id)),
            "{msg}"
        );
        assert!(msg.contains("device 1") && msg.contains("1 s"), "{msg}");
        sim.synchronize(s, SyncWait::Forever).unwrap();
        // Wait from another device: 107000.
        let s0 = sim.create_stream(0).unwrap();
        assert_eq!(
            sim.wait_and_reset(n, s0, Timeout::Forever)
                .unwrap_err()
                .kind(),
            Error::ParamInvalid
        );
    }

    /// The discard wakes the sleeping wait through the waker it registered
    /// ([`WakeSleepers`]), not by waiting for the end of the table's sleep chunk.
    #[test]
    fn force_destroy_cancels_a_blocked_wait_promptly() {
        let (sim, _ns) = open("fd", Soc::Ascend910B);
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let mut fastest = Duration::MAX;
        for _ in 0..5 {
            let s = sim.create_stream(0).unwrap();
            sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
            // Asleep on the flag by now, 10 ms into a 50 ms chunk.
            std::thread::sleep(table::CHUNK / 5);
            let t0 = Instant::now();
            sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
            fastest = fastest.min(t0.elapsed());
        }
        // Without the waker each discard would take the rest of the chunk (about 40 ms).
        assert!(
            fastest < table::CHUNK / 5,
            "fastest of 5 discards took {fastest:?}"
        );
        // The cancelled wait consumed nothing: a record is still there for the next waiter.
        let d = sim.default_stream(0).unwrap();
        sim.record(n, d).unwrap();
        sim.synchronize(d, SyncWait::Forever).unwrap();
        sim.host_wait(n, Duration::from_secs(5)).unwrap();
    }

    /// Discarding a device's streams (a device reset, the end of a session) takes its
    /// default stream — a new one serves the device next — and a stream that a draining
    /// destroy on another thread is still working through; a synchronize blocked on either
    /// and the drain itself return, and other devices' streams are untouched.
    /// A stream destroyed (draining) from one of its own tasks, with a wait that never ends
    /// queued behind that task: the destroy returns at once while the worker drains on, and a
    /// later discard of the device (a finalize or reset) still finds the stream and ends it.
    #[test]
    fn a_stream_draining_from_its_own_task_is_still_found_by_a_discard() {
        let (sim, _ns) = open("selfdrain", Soc::Ascend910B);
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(0).unwrap();
        let (st, _) = sim.stream(s).unwrap();
        let destroyed = Arc::new(Mutex::new(None));
        let (sim2, d2) = (sim.clone(), Arc::clone(&destroyed));
        // The task destroys its stream only once the wait is queued behind it (else the
        // destroy could run first and the wait's enqueue fail: 2 in 40 runs did).
        let (queued_tx, queued) = std::sync::mpsc::channel::<()>();
        sim.enqueue(&st, s, move |_| {
            let _ = queued.recv_timeout(Duration::from_secs(10));
            *d2.lock().unwrap() = Some(sim2.destroy_stream(s, StreamDestroy::Drain));
            Ok(())
        })
        .unwrap();
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        queued_tx.send(()).unwrap();
        let t0 = Instant::now();
        while destroyed.lock().unwrap().is_none() {
            assert!(t0.elapsed() < Duration::from_secs(10), "the task never ran");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(destroyed.lock().unwrap().take(), Some(Ok(())));
        assert!(
            !st.has_exited(),
            "the worker drains the wait behind the destroy"
        );
        assert_eq!(sim.discard_streams_where(|_| true), 1);
        assert!(st.has_exited(), "the discard ended the worker");
        assert!(lock(&sim.inner.draining).is_empty());
    }

    #[test]
    fn discarding_a_device_s_streams_takes_its_default_and_draining_streams() {
        use std::sync::mpsc;
        const LONG: Duration = Duration::from_secs(20);
        let (sim, _ns) = open("dsw", Soc::Ascend910B);
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let d = sim.default_stream(0).unwrap();
        sim.wait_and_reset(n, d, Timeout::Forever).unwrap();
        let s = sim.create_stream(0).unwrap();
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        let other = sim.create_stream(1).unwrap();

        let (drained_tx, drained) = mpsc::channel();
        let drainer = {
            let sim = sim.clone();
            std::thread::spawn(move || {
                let _ = drained_tx.send(sim.destroy_stream(s, StreamDestroy::Drain));
            })
        };
        // The drain has begun once the stream is gone from the table.
        let t0 = Instant::now();
        while sim.query(s).is_ok() {
            assert!(t0.elapsed() < LONG, "the drain never started");
            std::thread::sleep(Duration::from_millis(1));
        }
        let (synced_tx, synced) = mpsc::channel();
        let syncer = {
            let sim = sim.clone();
            std::thread::spawn(move || {
                let _ = synced_tx.send(sim.synchronize(d, SyncWait::AtMost(LONG)));
            })
        };
        std::thread::sleep(Duration::from_millis(50));

        let t0 = Instant::now();
        let (tx, discarded) = mpsc::channel();
        let discarder = {
            let sim = sim.clone();
            std::thread::spawn(move || {
                let _ = tx.send(sim.discard_streams_where(|dev| dev == 0));
            })
        };
        assert_eq!(
            discarded.recv_timeout(LONG),
            Ok(2),
            "the discard did not end"
        );
        discarder.join().unwrap();
        let drain = drained.recv_timeout(LONG).expect("the drain did not end");
        assert_eq!(drain.unwrap_err().kind(), Error::InvalidHandle);
        let sync = synced
            .recv_timeout(LONG)
            .expect("the synchronize did not end");
        assert_eq!(sync.unwrap_err().kind(), Error::InvalidHandle);
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        drainer.join().unwrap();
        syncer.join().unwrap();

        // Device 0's next default stream is a new, empty one; device 1 kept its stream.
        let d2 = sim.default_stream(0).unwrap();
        assert_ne!(d2, d);
        assert!(sim.query(d).is_err());
        assert_eq!(sim.query(d2).unwrap(), StreamStatus::Complete);
        sim.record(n, other).unwrap();
        sim.synchronize(other, SyncWait::AtMost(LONG)).unwrap();
        sim.wait_and_reset(n, d2, Timeout::Forever).unwrap();
        sim.synchronize(d2, SyncWait::AtMost(LONG)).unwrap();
    }

    #[test]
    fn ids_are_freed_by_the_last_holder_and_handles_are_checked() {
        let (sim, _ns) = open("ids", Soc::Ascend310P);
        assert_eq!(sim.notifies_free(0).unwrap(), 1024);
        let mut hs = Vec::new();
        for _ in 0..1024 {
            hs.push(sim.create_notify(0, CreateFlags::empty()).unwrap());
        }
        let e = sim.create_notify(0, CreateFlags::empty()).unwrap_err();
        assert_eq!(e.kind(), Error::NoNotifyResource);
        assert!(e.to_string().contains("1024"), "{e}");
        assert_eq!(sim.notifies_free(1).unwrap(), 1024);
        // A pending task keeps a destroyed notify alive.
        let s = sim.create_stream(0).unwrap();
        sim.wait_and_reset(hs[0], s, Timeout::from_c(5)).unwrap();
        sim.destroy_notify(hs[0]).unwrap();
        assert_eq!(sim.notifies_free(0).unwrap(), 0);
        let other = sim.create_stream(1).unwrap();
        assert_eq!(
            sim.record(hs[0], other).unwrap_err().kind(),
            Error::InvalidHandle
        );
        for h in &hs[1..] {
            sim.destroy_notify(*h).unwrap();
        }
        assert_eq!(sim.notifies_free(0).unwrap(), 1023);
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert_eq!(e.kind(), Error::TaskTimeout);
        assert_eq!(sim.notifies_free(0).unwrap(), 1024);
        // Garbage and cross-kind handles.
        for bad in [0u64, 1, u64::MAX, s.0] {
            assert_eq!(
                sim.notify_info(RawNotify(bad)).unwrap_err().kind(),
                Error::InvalidHandle
            );
        }
        assert_eq!(
            sim.query(RawStream(hs[1].0)).unwrap_err().kind(),
            Error::InvalidHandle
        );
        // DEVICE_USE_ONLY and IPC on a SoC that has them / lacks batch reset.
        assert!(sim.create_notify(0, CreateFlags::DEVICE_USE_ONLY).is_ok());
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        assert_eq!(
            sim.batch_reset(&[n]).unwrap_err().kind(),
            Error::FeatureNotSupport
        );
    }

    #[test]
    fn stream_pins_keep_a_notify_only_while_its_handle_or_tasks_do() {
        let (sim, _ns) = open("pins", Soc::Ascend910B);
        let all = sim.notifies_free(0).unwrap();
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        // More streams than a handle keeps pins for: pins are replaced, none is lost.
        let streams: Vec<_> = (0..PINS + 2)
            .map(|_| sim.create_stream(0).unwrap())
            .collect();
        for _ in 0..3 {
            for &s in &streams {
                sim.record(n, s).unwrap();
                sim.wait_and_reset(n, s, Timeout::from_c(5)).unwrap();
                sim.synchronize(s, SyncWait::Forever).unwrap();
            }
        }
        assert_eq!(sim.notifies_free(0).unwrap(), all - 1);
        // The handle goes, and with it every pin: the id is free again.
        sim.destroy_notify(n).unwrap();
        assert_eq!(sim.notifies_free(0).unwrap(), all);
        for s in streams {
            sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
        }
    }

    #[test]
    fn export_whitelist_import_in_one_process() {
        let (sim, _ns) = open("ipc", Soc::Ascend910B);
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        assert_eq!(
            sim.set_import_pids(n, &[1]).unwrap_err().kind(),
            Error::ParamInvalid
        );
        let key = sim.export_key(n, ExportFlags::empty()).unwrap();
        assert_eq!(
            sim.export_key(n, ExportFlags::empty()).unwrap_err().kind(),
            Error::InternalError
        );
        let e = sim
            .import_by_key(1, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS)
            .unwrap_err();
        assert_eq!(e.kind(), Error::NoPermission);
        assert!(e.to_string().contains("not whitelisted"), "{e}");
        sim.set_import_pids(n, &[sim.bare_tgid()]).unwrap();
        assert_eq!(sim.notify_info(n).unwrap().state, Lifecycle::Whitelisted);
        // Device 1 without peer access: the import enables it (the flag changes nothing).
        let imp = sim
            .import_by_key(1, key.as_str(), ImportFlags::empty())
            .unwrap();
        let info = sim.notify_info(imp).unwrap();
        assert_eq!(
            (info.state, info.device, info.owner_device),
            (Lifecycle::Imported, 1, 0)
        );
        assert_eq!(info.id, sim.notify_info(n).unwrap().id);
        // On a 910B, a batch reset takes IPC notifies as any other (the 950 case is in the
        // conformance suite, `batch::ipc_notifies_per_soc`).
        sim.batch_reset(&[n, imp]).unwrap();
        // The importer records on device 1; the owner waits on device 0.
        let s1 = sim.create_stream(1).unwrap();
        sim.record(imp, s1).unwrap();
        sim.host_wait(n, Duration::from_secs(5)).unwrap();
        assert_eq!(
            sim.host_wait(imp, Duration::ZERO).unwrap_err().kind(),
            Error::ParamInvalid
        );
        // Garbage keys.
        assert_eq!(
            sim.import_by_key(0, "nope", ImportFlags::empty())
                .unwrap_err()
                .kind(),
            Error::ParamInvalid
        );
        // Recycled PID (wrong start time) is refused.
        let n2 = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let k2 = sim.export_key(n2, ExportFlags::empty()).unwrap();
        sim.set_import_pid_with_start_time(n2, sim.bare_tgid(), 12345)
            .unwrap();
        let e = sim
            .import_by_key(0, k2.as_str(), ImportFlags::empty())
            .unwrap_err();
        assert_eq!(e.kind(), Error::NoPermission);
        assert!(e.to_string().contains("recycled"), "{e}");
        // Destroyed by every holder (and no task of ours still uses it): the key is stale.
        sim.synchronize(s1, SyncWait::Forever).unwrap();
        sim.destroy_notify(n).unwrap();
        sim.destroy_notify(imp).unwrap();
        assert_eq!(
            sim.import_by_key(0, key.as_str(), ImportFlags::empty())
                .unwrap_err()
                .kind(),
            Error::InvalidHandle
        );
    }

    /// Another process (here: a plain write to the file) leaves the sequence word of an
    /// exported notify's whitelist odd. Whitelisting more PIDs is 507899 with a message naming
    /// the notify, instead of rebuilding the list from empty (which dropped the PIDs already
    /// whitelisted and answered success); nothing is lost once the word is restored.
    #[test]
    fn set_import_pids_on_a_corrupt_whitelist_is_507899_and_loses_nobody() {
        use std::os::unix::fs::FileExt;
        let (sim, _ns) = open("wl-odd", Soc::Ascend910B);
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let key = sim.export_key(n, ExportFlags::empty()).unwrap();
        sim.set_import_pids(n, &[sim.bare_tgid()]).unwrap();
        let id = u64::from(sim.notify_info(n).unwrap().id);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(sim.shm_path())
            .unwrap();
        let word = |off: u64| {
            let mut b = [0u8; 8];
            file.read_exact_at(&mut b, off).unwrap();
            u64::from_ne_bytes(b)
        };
        let wl_off = word(std::mem::offset_of!(shm::Header, whitelists_off) as u64);
        // Device 0: the whitelist of `id` is the id-th of the slab.
        let seq_off = wl_off + id * shm::WHITELIST_BYTES as u64;
        let even = word(seq_off);
        assert_eq!(even % 2, 0);
        file.write_all_at(&(even + 1).to_ne_bytes(), seq_off)
            .unwrap();
        let e = sim.set_import_pids(n, &[424242]).unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError);
        assert!(
            e.to_string()
                .contains(&format!("whitelist memory of notify {id} on device 0")),
            "{e}"
        );
        assert!(e.to_string().contains("inconsistent"), "{e}");
        // Restored: this process is still whitelisted (and 424242 was never added).
        file.write_all_at(&even.to_ne_bytes(), seq_off).unwrap();
        let imp = sim
            .import_by_key(0, key.as_str(), ImportFlags::empty())
            .unwrap();
        let wl = sim.inner.file.read_whitelist(0, id as u32).unwrap();
        assert_eq!(wl.len(), 1);
        sim.destroy_notify(imp).unwrap();
        sim.destroy_notify(n).unwrap();
    }

    #[test]
    fn import_key_takes_a_parsed_key_with_the_same_checks() {
        let (sim, _ns) = open("ipc-parsed", Soc::Ascend910B);
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let key = sim
            .export_key(n, ExportFlags::DISABLE_PID_VALIDATION)
            .unwrap();
        // The checks made before the key is looked at still apply (here: the device).
        assert_eq!(
            sim.import_key(9, &key, ImportFlags::empty())
                .unwrap_err()
                .kind(),
            Error::InvalidDeviceId
        );
        let imp = sim.import_key(0, &key, ImportFlags::empty()).unwrap();
        let info = sim.notify_info(imp).unwrap();
        assert_eq!(info.state, Lifecycle::Imported);
        assert_eq!(info.id, sim.notify_info(n).unwrap().id);
        // Same result as the text form.
        let imp2 = sim
            .import_by_key(0, key.as_str(), ImportFlags::empty())
            .unwrap();
        assert_eq!(sim.notify_info(imp2).unwrap().id, info.id);
        // A runtime key (not one of ours) is malformed for the simulator.
        let foreign = ExportKey::from_runtime(b"some-other-runtime-key").unwrap();
        assert_eq!(
            sim.import_key(0, &foreign, ImportFlags::empty())
                .unwrap_err()
                .kind(),
            Error::ParamInvalid
        );
        for h in [imp, imp2, n] {
            sim.destroy_notify(h).unwrap();
        }
        assert_eq!(
            sim.import_key(0, &key, ImportFlags::empty())
                .unwrap_err()
                .kind(),
            Error::InvalidHandle
        );
    }
}

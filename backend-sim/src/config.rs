//! Configuration of a simulated machine: the `ACL_NOTIFY_SIM_*` variables, [`SimBuilder`]
//! and [`StreamCpus`], and the limits they are checked against.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use acl_notify_core::{Chip, Error, Feature, Soc};
use acl_notify_handles::{Kind, Slab};

use crate::error::SimError;
use crate::shm::OpenMode;
use crate::sim::{Inner, Sim, err};
use crate::{cluster, cnt, event, mem, repair, shm, spin, stream, sys, trace, waitgraph};

/// Environment variable naming the SoC family (default `Ascend910B`).
pub const ENV_SOC: &str = "ACL_NOTIFY_SIM_SOC";
/// Environment variable giving the number of devices (default 8).
pub const ENV_DEVICES: &str = "ACL_NOTIFY_SIM_DEVICES";
/// Environment variable naming the namespace (default `acl-notify-<uid>-default`).
pub const ENV_NAMESPACE: &str = "ACL_NOTIFY_SIM_NAMESPACE";
/// Environment variable giving this process's SuperPod server id (default 0).
pub const ENV_SERVER_ID: &str = "ACL_NOTIFY_SIM_SERVER_ID";
/// Environment variable placing stream workers on CPUs: `auto` (default), `off`, `spread`, or
/// a CPU list such as `0,2-3` (see [`StreamCpus`]).
pub const ENV_STREAM_CPUS: &str = "ACL_NOTIFY_SIM_STREAM_CPUS";

pub use crate::spin::ENV_SPIN_BUDGET;

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
/// of nanoseconds. `Adaptive` (the default) lets a worker that keeps finding its CPU taken
/// while it waits move itself to another CPU (see the `placement` module); `Spread` gives each
/// new stream a CPU of its own, in turn.
///
/// The cost of pinning: a placed worker cannot move, so when its CPU is busy with other work
/// it waits for its share there even if another CPU is free. Streams that are mostly idle
/// lose nothing; busy streams gain when there are at least as many CPUs as busy streams.
/// `Adaptive` pins nothing: a worker it moves may be moved again by the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StreamCpus {
    /// The kernel places the workers, and a worker whose waits keep losing its CPU to another
    /// thread moves itself to another CPU, at most now and then (default;
    /// `ACL_NOTIFY_SIM_STREAM_CPUS=auto`).
    #[default]
    Adaptive,
    /// The kernel alone places the workers (`ACL_NOTIFY_SIM_STREAM_CPUS=off`).
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
    /// Parses `auto`, `off`, `spread` or a CPU list (`0,2-3`), as
    /// `ACL_NOTIFY_SIM_STREAM_CPUS` takes them. Errors say what is wrong, in words.
    pub fn parse(text: &str) -> Result<StreamCpus, String> {
        let t = text.trim();
        match t {
            "auto" | "adaptive" => return Ok(StreamCpus::Adaptive),
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
    pub(crate) fn resolve(&self, allowed: &[usize]) -> Result<Vec<usize>, String> {
        match self {
            StreamCpus::Adaptive | StreamCpus::Scheduler => Ok(Vec::new()),
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
pub(crate) const MAX_CPU: usize = 1024;

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
    pub(crate) soc: Soc,
    /// The chip `aclrtGetSocName` names, of family `soc`.
    pub(crate) chip: Chip,
    pub(crate) devices: u32,
    pub(crate) namespace: Option<String>,
    pub(crate) server_id: u32,
    pub(crate) stream_cpus: StreamCpus,
    pub(crate) enqueue_timeout: Option<Duration>,
    pub(crate) device_memory: u64,
    pub(crate) cluster: Option<cluster::ClusterConfig>,
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

    /// Where stream workers run (default [`StreamCpus::Adaptive`]).
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

    pub(crate) fn open_as(self, origin: Origin) -> Result<Sim, SimError> {
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
        // Salts this `Sim`'s handle tables: handles of another `Sim` or process are refused.
        let seed = acl_notify_handles::random_seed();
        // In cluster mode, remote imports take the upper slot indices (`cluster`).
        let notifies = Slab::with_indices(
            Kind::Notify,
            seed,
            cluster::local_indices(self.cluster.is_some()),
        );
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
                seed,
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
                notifies: RwLock::new(notifies),
                streams: RwLock::new(Slab::new(Kind::Stream, seed)),
                defaults: Mutex::new(vec![None; self.devices as usize]),
                draining: Mutex::new(Vec::new()),
                peers: Mutex::new(vec![0; self.devices as usize]),
                op_wait_timeout: AtomicU32::new(0),
                stream_seq: AtomicU32::new(0),
                cpu_seq: AtomicU32::new(first_cpu),
                adaptive_cpus: self.stream_cpus == StreamCpus::Adaptive,
                cpus,
                enqueue_timeout: self.enqueue_timeout,
                cnt: cnt::CntState::new(seed),
                mem: mem::MemState::new(self.device_memory),
                events: event::EventState::new(seed, self.devices, self.soc.max_events()),
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
pub(crate) enum Origin {
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
            stream_cpus: StreamCpus::Adaptive,
            enqueue_timeout: Some(DEFAULT_ENQUEUE_TIMEOUT),
            device_memory: mem::DEFAULT_DEVICE_MEMORY,
            cluster: None,
        }
    }
}

pub(crate) fn default_namespace() -> String {
    format!("acl-notify-{}-default", sys::geteuid())
}

pub(crate) fn check_namespace(ns: &str) -> Result<(), &'static str> {
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

    /// Opens the machine the `ACL_NOTIFY_SIM_*` variables describe: `ACL_NOTIFY_SIM_SOC`
    /// (default `Ascend910B`), `ACL_NOTIFY_SIM_DEVICES` (default 8),
    /// `ACL_NOTIFY_SIM_NAMESPACE` (default `acl-notify-<uid>-default`),
    /// `ACL_NOTIFY_SIM_SERVER_ID` (default 0), `ACL_NOTIFY_SIM_STREAM_CPUS` (default `auto`,
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
                    format!(
                        "{ENV_STREAM_CPUS}={v:?}: {why}; expected auto, off, spread or a CPU list"
                    ),
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
}

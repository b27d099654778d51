//! Configuration of a simulated machine: the `ACL_NOTIFY_SIM_*` variables, [`SimBuilder`]
//! and [`StreamCpus`], and the limits they are checked against.

use std::time::Duration;

use acl_notify_core::{Chip, Soc};

use crate::mem::capacity::DEFAULT_DEVICE_MEMORY;
use crate::{cluster, repair, stream, sys};

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
/// or `T` (binary) suffix (default [`DEFAULT_DEVICE_MEMORY`], 32 GiB; see
/// [`mem`](crate::mem)).
pub const ENV_DEVICE_MEMORY: &str = "ACL_NOTIFY_SIM_DEVICE_MEMORY";

/// Where the worker threads of this process's simulated streams run.
///
/// A stream on a real device is executed by the device, beside the host and beside other
/// streams. The simulator runs each stream on a thread, and by default the kernel places it.
/// On some machines (seen on KVM guests) the kernel puts a woken worker on the CPU of the
/// thread that woke it, even when another CPU is idle: two streams that hand work to each
/// other then share one CPU and take turns, at microseconds per hand-off instead of hundreds
/// of nanoseconds. `Adaptive` (the default) lets a worker whose waits keep getting their
/// records only after it gave its CPU away move itself to another CPU (see the `placement`
/// module); `Spread` gives each new stream a CPU of its own, in turn.
///
/// The cost of pinning: a placed worker cannot move, so when its CPU is busy with other work
/// it waits for its share there even if another CPU is free. Streams that are mostly idle
/// lose nothing; busy streams gain when there are at least as many CPUs as busy streams.
/// `Adaptive` pins nothing: a worker it moves may be moved again by the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StreamCpus {
    /// The kernel places the workers, and a worker that keeps sharing its CPU with the stream
    /// it waits for moves itself to another CPU, at most now and then (default;
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

pub use crate::shm::MAX_DEVICES;
/// How long an id must stay orphaned before a GC pass frees it: a process killed between two
/// steps of a create or destroy (say, after allocating an id and before claiming its slot)
/// leaves an id that no dead process's reclaim can attribute. [`Sim::gc`](crate::Sim::gc)
/// suspects it on one pass and frees it on a pass at least this much later, in the same
/// process.
pub const LEAK_REPAIR_GRACE: std::time::Duration = repair::REPAIR_GRACE;
/// How many tasks a simulated stream queues before a record, wait or host function waits for
/// room (see [`SimBuilder::enqueue_timeout`]).
pub const STREAM_CAPACITY: usize = stream::DEFAULT_CAPACITY;
/// How long, by default, a record, wait or host function waits for room in a full stream
/// queue before it fails with 507002 (see [`SimBuilder::enqueue_timeout`]).
pub const DEFAULT_ENQUEUE_TIMEOUT: Duration = stream::DEFAULT_ENQUEUE_TIMEOUT;
/// Longest namespace name.
pub const MAX_NAMESPACE_LEN: usize = 64;

/// Configuration of a [`Sim`](crate::Sim) before it is opened.
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
    /// Every device's groups ([`crate::groups`]).
    pub(crate) groups: Vec<crate::groups::DeviceGroup>,
}

impl SimBuilder {
    /// Joins the SuperPod whose etcd cluster `cfg` names (cross-host mode, see
    /// [`cluster`]); `None` (the default) is the single-host simulator.
    pub fn cluster(mut self, cfg: Option<cluster::ClusterConfig>) -> Self {
        self.cluster = cfg;
        self
    }

    /// Each device's memory in bytes (default [`DEFAULT_DEVICE_MEMORY`]); at least 1 MiB.
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

    /// Every device's groups (default none; see [`crate::groups`]), as given:
    /// [`groups::parse`](crate::groups::parse) checks a configuration against the chip.
    pub fn groups(mut self, groups: Vec<crate::groups::DeviceGroup>) -> Self {
        self.groups = groups;
        self
    }

    /// This process's SuperPod server id (default 0); non-zero only on `Ascend910_93`.
    pub fn server_id(mut self, server_id: u32) -> Self {
        self.server_id = server_id;
        self
    }
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
            device_memory: DEFAULT_DEVICE_MEMORY,
            cluster: None,
            groups: Vec::new(),
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

//! Opening a simulated machine: [`SimBuilder::open`] checks the configuration, opens or
//! creates the namespace's shared files and builds the per-process state of a [`Sim`];
//! [`Sim::from_env`] reads the `ACL_NOTIFY_SIM_*` variables into a builder first.

use std::collections::HashMap;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use acl_notify_core::{Chip, Error, Feature, Soc};
use acl_notify_handles::{Kind, Slab};

use crate::config::*;
use crate::error::{SimError, err};
use crate::shm::OpenMode;
use crate::sim::{Inner, Sim};
use crate::{cluster, cnt, event, groups, mem, shm, spin, stream, sys, trace, waitgraph};

impl SimBuilder {
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
        let identity = sys::process_identity(pid).unwrap_or(sys::ProcessIdentity {
            start_time: 0,
            pidfs: 0,
        });
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
        /// Numbers the `Sim`s of this process (for the threads' pair caches).
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Ok(Sim {
            inner: Arc::new(Inner {
                serial: SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                soc: self.soc,
                has_notify: self.soc.has(Feature::Notify),
                chip: self.chip,
                devices: self.devices,
                server_id: self.server_id,
                groups: self.groups.clone(),
                namespace,
                pid,
                identity,
                file,
                remote: Mutex::new(HashMap::new()),
                notifies: RwLock::new(notifies),
                streams: RwLock::new(Slab::new(Kind::Stream, seed)),
                defaults: Mutex::new(vec![None; self.devices as usize]),
                default_scopes: (0..self.devices).map(|_| Arc::default()).collect(),
                draining: Mutex::new(Vec::new()),
                peers: Mutex::new(vec![0; self.devices as usize]),
                op_wait_timeout: AtomicU32::new(0),
                stream_seq: AtomicU32::new(0),
                #[cfg(test)]
                force_parking: std::sync::atomic::AtomicBool::new(false),
                cpu_seq: AtomicU32::new(first_cpu),
                adaptive_cpus: self.stream_cpus == StreamCpus::Adaptive,
                cpus,
                enqueue_timeout: self.enqueue_timeout,
                failures: Default::default(),
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
    /// [`ENV_SPIN_BUDGET`]), `ACL_NOTIFY_SIM_GROUPS` (the devices' groups, default none; see
    /// [`groups`](crate::groups)). A variable that is set but invalid is an error (107000)
    /// naming it, never a silent default.
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
        if let Some(v) = var(groups::ENV_GROUPS)? {
            let g = groups::parse(&v, b.chip).map_err(|why| {
                err(
                    Error::ParamInvalid,
                    format!("{}={v:?}: {why}", groups::ENV_GROUPS),
                )
            })?;
            b = b.groups(g);
        }
        b = b.cluster(
            cluster::ClusterConfig::from_env().map_err(|why| err(Error::ParamInvalid, why))?,
        );
        b.open_as(Origin::Env)
    }
}

//! [`Runtime`]: what CANN's C API adds on top of the simulator — handle tables, the per-thread
//! current device, device reference counts, the NULL-means-default-stream rule and the
//! SPEC §3 check order (concrete over [`Sim`]: the crate's doc says why).
//!
//! Methods here take decoded C arguments (handles as `usize`, counts, flags) and return
//! [`CallError`]s; reading and writing C memory stays in `ffi`.
//!
//! This file holds the session's state, handle lookups and the errors that name a caller's
//! handle; the calls are in one module per chapter, as in `ffi`: `device` (with `devquery`,
//! `reslimit`, `sysparam`), `context` (with `ctx_failure`), `stream` (with `streamattr`,
//! `streaminfo`, `drain`), `notify`, `ipc`, `cnt`, `event`, `ext`, `callbacks`, `statecb`,
//! `mbufs`, `labels`. Model runtime instances: `capture` (stream capture), `model` (the
//! model, what an execution replays, the session's models), `model_build` (built on bound
//! streams), `model_flow` / `flow` (their control tasks, stored and run), `cond` (conditional
//! tasks), `task_group`, `model_tasks`, `task_info`, `last_task`, `model_info`,
//! `model_debug`, `model_exec` / `replay` (executions), `persistent_clean`.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use acl_notify_core::{
    Backend, BackendError, Error, Feature, NotifyResources, RawNotify, RawStream,
};
use acl_notify_sim::Sim;

use crate::config::AclConfig;
use crate::errmsg::CallError;
use crate::handle::{CTable, Kind, Stamp, not_live};
use cnt::CntEntry;

/// What a stream handle stands for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamEntry {
    pub(crate) raw: RawStream,
    pub(crate) device: u32,
    /// The context it was created in (a context handle, see `context`).
    pub(crate) ctx: usize,
    /// A context's default stream, handed out by `aclrtCtxGetCurrentDefaultStream`: it is
    /// not destroyed through its handle.
    pub(crate) default: bool,
}

thread_local! {
    /// This thread's current device and context, tagged with the epoch of the [`Runtime`]
    /// they were set in (a device set before `aclFinalize` is not current after the next
    /// `aclInit`), and the count of contexts gone ([`context::Contexts::gone`]) when it was
    /// last known live. A context destroyed by another thread (or its device reset) stays
    /// named here, as CANN's thread keeps its pointer: once the count moved, the next use
    /// looks it up in the context table and every call that needs a context is 107002 while
    /// it is gone (`Runtime::current`), until the thread sets a device or context again.
    static CURRENT: Cell<Option<(u64, u32, usize, u64)>> = const { Cell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// 107017 for a notify handle that is not a live one of this session.
fn bad_notify(handle: usize) -> CallError {
    not_live("notify", "a notify", handle)
}

/// 107017 for a stream handle that is not a live one of this session.
fn bad_stream(handle: usize) -> CallError {
    not_live("stream", "a stream", handle)
}

/// "stream 0x…" for a C stream handle, "the default stream" for NULL.
fn stream_name(stream: usize) -> String {
    if stream == 0 {
        "the default stream".to_owned()
    } else {
        format!("stream {stream:#x}")
    }
}

/// A backend error of a call on C stream `stream`: a 107017 names the caller's handle, not the
/// backend's own (the stream was destroyed, or discarded by a device reset or `aclFinalize`,
/// while the call used it).
fn stream_error<E: BackendError>(stream: usize, e: E) -> CallError {
    if e.kind() != Error::InvalidHandle {
        return CallError::backend(e);
    }
    if stream == 0 {
        CallError::new(
            Error::InvalidHandle,
            "the default stream was discarded while this call used it (its device was reset, \
             or aclFinalize ran)",
        )
    } else {
        bad_stream(stream)
    }
}

/// One `aclInit` … `aclFinalize` session of the process over backend `B`.
pub(crate) struct Runtime {
    backend: Sim,
    epoch: u64,
    /// What the backend's notify handles have in common: C sees them as they are (no table
    /// here: see [`crate::handle`]).
    notifies: Stamp,
    /// C handle → backend handle. A C handle's value comes back after its slot's generation
    /// wrapped (2²⁰ destroys) and then names the new entry only; an entry is removed before
    /// or with its backend object (destroy, context destroy, device reset), and a backend
    /// handle that outlived its object in one (a stream created while a reset of its device
    /// runs) is refused by the backend's own table (107017) unless that value came back too.
    pub(crate) streams: CTable<StreamEntry>,
    cnts: CTable<CntEntry>,
    /// Contexts and events (`context`, `event` modules).
    pub(crate) contexts: context::Contexts,
    pub(crate) events: CTable<event::EventEntry>,
    /// Per device: `aclrtSetDevice` minus `aclrtResetDevice` calls over the whole process, and
    /// whether a reset is releasing it (see `device`).
    device_refs: Mutex<Vec<device::DeviceRefs>>,
    /// Signalled when a reset has released its device.
    device_released: std::sync::Condvar,
    /// Core resource limits (`reslimit` module).
    res_limits: reslimit::ResLimits,
    /// The process that called `aclInit` (named to a child forked from it, whose calls the
    /// session does not serve: see `session`).
    pid: i32,
    /// The features the SoC has, one bit each ([`feature_bit`]), read once: [`require`] runs
    /// on every IPC call, and `Soc::has` is an out-of-line table walk. A feature without its
    /// bit is asked of the SoC again, so a missing bit costs time, never an answer.
    ///
    /// [`require`]: Runtime::require
    features: u32,
    /// The device of threads that set none (`defaultDevice` of `aclInit`'s configuration,
    /// see [`crate::config`]); [`NO_DEFAULT_DEVICE`] when there is none.
    default_device: AtomicU32,
    /// How long a device reset waits for the device's queued tasks (`None`: for ever; see
    /// `device`, `ACL_NOTIFY_SIM_RESET_TIMEOUT`).
    reset_timeout: Option<std::time::Duration>,
    /// How long an `aclrtSetDevice` waits for another thread's reset releasing that device
    /// (see `device`).
    set_bound: std::time::Duration,
    /// The threads subscribed to streams' callbacks (`aclrtSubscribeReport`: see
    /// [`callbacks`]).
    callbacks: callbacks::Subscriptions,
    /// Each stream's id, priority and flags (`streaminfo`).
    pub(crate) stream_infos: Arc<streaminfo::StreamInfos>,
    /// Physical memory handles (`aclrtMallocPhysical`, `crate::vmm`).
    pub(crate) phys: CTable<acl_notify_sim::mem::vmm::PhysMem>,
    /// Stream-ordered memory pools (`aclrtMemPoolCreate`, `crate::mempool`).
    pub(crate) pools: CTable<acl_notify_sim::mem::pool::PoolId>,
    /// The process's floating-point saturation mode (`devquery`).
    sat_mode: devquery::SatMode,
    /// Stream captures and model runtime instances (`capture`).
    captures: capture::Captures,
    /// Shared buffers (`aclrtAllocBuf`, `crate::mbuf`).
    pub(crate) mbufs: mbufs::Mbufs,
    /// The simulator event each (device, barrier id) of `aclrtCmoAsyncWithBarrier` records
    /// (`crate::cmo`).
    pub(crate) cmo_barriers:
        Mutex<std::collections::HashMap<(u32, u32), acl_notify_core::RawEvent>>,
}

/// [`Runtime::default_device`] when the configuration names none.
const NO_DEFAULT_DEVICE: u32 = u32::MAX;

/// A feature's bit in [`Runtime::features`].
const fn feature_bit(feature: Feature) -> u32 {
    1 << (feature as u32)
}

impl core::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runtime")
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// This session's number, unique among the process's sessions (what outlives a session,
    /// such as `callback`'s subscriptions, is tagged with it).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The threads subscribed to this session's streams' callbacks.
    pub(crate) fn callbacks(&self) -> &callbacks::Subscriptions {
        &self.callbacks
    }

    /// A session over `backend`. `epoch` must differ from every earlier session's in this
    /// process; `seed` should be random (it salts the handles).
    pub(crate) fn new(backend: Sim, epoch: u64, seed: u64) -> Self {
        let devices = backend.device_count() as usize;
        let pid = backend.bare_tgid();
        let notifies = backend.notify_stamp();
        let soc = backend.soc();
        let features = Feature::ALL
            .into_iter()
            .filter(|&f| soc.has(f))
            .fold(0, |bits, f| bits | feature_bit(f));
        let stream_infos = Arc::<streaminfo::StreamInfos>::default();
        let ids = Arc::clone(&stream_infos);
        // A failed task's exception record (`exception_record`) names its stream by id: a
        // default stream gets its id here if it has none yet (as `aclrtStreamGetId` would).
        backend.on_task_failure(Some(Arc::new(move |f: &acl_notify_sim::TaskFailure| {
            let id = if f.default {
                Some(ids.register(f.stream, f.device, 0, 0).id)
            } else {
                ids.get(f.stream).map(|i| i.id)
            };
            crate::exception_record::tell(f, id);
        })));
        Runtime {
            backend,
            epoch,
            notifies,
            streams: CTable::new(Kind::Stream, "streams", seed.rotate_left(17)),
            cnts: CTable::new(
                Kind::CntNotify,
                "count-notify handles",
                seed.rotate_left(41),
            ),
            contexts: context::Contexts::new(seed.rotate_left(23), devices),
            events: CTable::new(Kind::Event, "events", seed.rotate_left(29)),
            phys: CTable::new(
                Kind::PhysMem,
                "physical memory handles",
                seed.rotate_left(53),
            ),
            pools: CTable::new(Kind::MemPool, "memory pools", seed.rotate_left(59)),
            device_refs: Mutex::new(vec![device::DeviceRefs::default(); devices]),
            device_released: std::sync::Condvar::new(),
            res_limits: reslimit::ResLimits::default(),
            pid,
            features,
            default_device: AtomicU32::new(NO_DEFAULT_DEVICE),
            reset_timeout: Some(drain::DEFAULT_RESET_TIMEOUT),
            set_bound: device::set_bound(Some(drain::DEFAULT_RESET_TIMEOUT)),
            callbacks: Default::default(),
            stream_infos,
            sat_mode: devquery::SatMode::new(soc),
            captures: capture::Captures::new(seed.rotate_left(61)),
            mbufs: mbufs::Mbufs::new(seed.rotate_left(37)),
            cmo_barriers: Default::default(),
        }
    }

    /// The session with a device reset's wait of `timeout` (`None`: for ever).
    pub(crate) fn with_reset_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
        self.reset_timeout = timeout;
        self.set_bound = device::set_bound(timeout);
        self
    }

    /// The session with `aclrtSetDevice` waiting at most `bound` for a reset of its device.
    #[cfg(test)]
    pub(crate) fn with_set_bound(mut self, bound: std::time::Duration) -> Self {
        self.set_bound = bound;
        self
    }

    /// Applies `aclInit`'s configuration: 107001 if its default device does not exist.
    pub(crate) fn configure(&self, config: AclConfig) -> Result<(), CallError> {
        let device = match config.default_device {
            Some(d) => self
                .device_id(d)
                .map_err(|e| e.in_context("the defaultDevice of aclInit's configuration file"))?,
            None => NO_DEFAULT_DEVICE,
        };
        self.default_device.store(device, Ordering::Relaxed);
        Ok(())
    }

    /// The process that opened this session.
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// The backend.
    pub(crate) fn backend(&self) -> &Sim {
        &self.backend
    }

    // ---- handles -------------------------------------------------------------------------

    /// The backend handle a C notify handle stands for, without asking the backend.
    #[inline]
    fn decode_notify(&self, handle: usize) -> Result<RawNotify, CallError> {
        if self.notifies.admits(handle as u64) {
            Ok(RawNotify(handle as u64))
        } else {
            Err(bad_notify(handle))
        }
    }

    /// The live backend notify a C handle stands for (checked before the other arguments,
    /// as SPEC §3 orders).
    fn notify(&self, handle: usize) -> Result<RawNotify, CallError> {
        let raw = self.decode_notify(handle)?;
        if self.backend.notify_is_live(raw) {
            Ok(raw)
        } else {
            Err(bad_notify(handle))
        }
    }

    pub(crate) fn stream(&self, handle: usize) -> Result<StreamEntry, CallError> {
        self.streams.get(handle).ok_or_else(|| bad_stream(handle))
    }

    /// The entry of `handle`, a stream of `aclrtCreateStream*`, for a call that takes no
    /// default stream: NULL or a context's default stream is 107000 (`why` says what the call
    /// takes), a dead handle 107017.
    pub(crate) fn created_stream(
        &self,
        handle: usize,
        why: &str,
    ) -> Result<StreamEntry, CallError> {
        let entry = match handle {
            0 => None,
            h => Some(self.stream(h)?),
        };
        match entry {
            Some(e) if !e.default => Ok(e),
            _ => Err(crate::errmsg::param(format!(
                "stream: NULL or a default stream: {why}"
            ))),
        }
    }

    /// The C handle of a notify the backend just made: the backend's own (its table bounds
    /// the number of live handles, `MAX_HANDLES`).
    #[inline]
    fn add_notify(&self, raw: RawNotify) -> Result<usize, CallError> {
        if self.notifies.admits(raw.0) {
            return Ok(raw.0 as usize);
        }
        // Every notify handle of the simulator has its stamp (cluster mode's remote imports
        // included); one without would fail every later call, so it is not handed out.
        let _ = self.backend.destroy_notify(raw);
        Err(CallError::new(
            Error::DrvInternalError,
            format!(
                "internal error: the simulator made notify handle {:#x} outside its notify \
                 table's stamp",
                raw.0
            ),
        ))
    }

    #[inline]
    pub(crate) fn require(&self, feature: Feature) -> Result<(), CallError> {
        if self.features & feature_bit(feature) != 0 {
            return Ok(());
        }
        self.require_slow(feature)
    }

    #[cold]
    fn require_slow(&self, feature: Feature) -> Result<(), CallError> {
        let soc = self.backend.soc();
        if soc.has(feature) {
            return Ok(());
        }
        let what = match feature {
            Feature::Notify => "notifies",
            Feature::Ipc => "IPC notifies (export, import, whitelists)",
            Feature::BatchReset => "aclrtNotifyBatchReset",
            Feature::InterServer => "inter-server whitelists",
            Feature::DeviceOnly => "ACL_NOTIFY_DEVICE_USE_ONLY",
            Feature::CntNotify => "count notifies",
            Feature::Event => "events",
            Feature::IpcEvent => "IPC events",
            Feature::PeerAccess => "peer access between devices",
            Feature::MemPool => "stream-ordered memory pools",
            Feature::HostFuncThread => {
                "host functions run by a thread of the program (aclrtSubscribeHostFunc, \
                 aclrtProcessHostFunc, aclrtUnSubscribeHostFunc: IPV350 only, as CANN \
                 documents them)"
            }
            Feature::DeviceTaskAbort => {
                "aclrtDeviceTaskAbort (Ascend950PR/DT, Atlas A3 and A2 only)"
            }
            Feature::StreamStop => "aclrtStreamStop (Ascend950PR/DT, Atlas A3 and A2 only)",
            Feature::HardwareSyncAddr => "aclrtGetHardwareSyncAddr (Atlas A2 and A3 only)",
            Feature::ModelCapture => {
                "stream capture into model runtime instances (aclmdlRICaptureBegin: Ascend \
                 950PR/DT, Atlas A3, A2 and inference products only, as CANN documents it)"
            }
            Feature::ModelBuild => {
                "models built on bound streams (aclmdlRIBuildBegin: every SoC but IPV350, as \
                 CANN documents it)"
            }
            Feature::StreamConfig => {
                "stream configuration objects (aclrtCreateStreamConfigHandle, \
                 aclrtSetStreamConfigOpt, aclrtCreateStreamV2: IPV350 only, as CANN documents \
                 them)"
            }
        };
        Err(CallError::new(
            Error::FeatureNotSupport,
            format!("{soc} does not support {what}"),
        ))
    }
}

pub(crate) mod callbacks;
pub(crate) mod capture;
mod cnt;
mod cond;
mod context;
mod ctx_failure;
pub(crate) mod device;
pub(crate) mod devquery;
pub(crate) mod drain;
pub(crate) mod event;
mod ext;
mod flow;
mod ipc;
pub(crate) mod labels;
mod last_task;
mod lowest_free_ids;
pub(crate) mod mbufs;
mod model;
mod model_build;
mod model_debug;
mod model_exec;
mod model_flow;
mod model_info;
pub(crate) mod model_tasks;
mod notify;
mod persistent_clean;
mod replay;
mod reslimit;
pub(crate) mod statecb;
mod stream;
mod streamattr;
mod task_group;
pub(crate) mod task_info;
pub(crate) use streamattr::AttrValue;
mod streaminfo;
pub(crate) mod sysparam;

#[cfg(test)]
mod tests;

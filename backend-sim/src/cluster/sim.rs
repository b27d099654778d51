//! The simulator's calls in cross-host mode: what `Sim` does with a notify of another host
//! (import through the registry, records through etcd, the refusals of what an importer may
//! not do) and the owner's publishing. Reached only when a process joined a cluster: the
//! single-host paths call these only after their own handle lookup failed (a remote import
//! is not in the local table), so they cost the single-host simulator nothing.

use acl_notify_core::sdid::Shown;
use acl_notify_core::{
    BackendError as _, Error, KeyFields, Lifecycle, NotifyInfo, Op, RawNotify, RawStream,
};

use std::sync::Arc;

use super::Cluster;
use crate::error::err;
use crate::job::SimJob;
use crate::stream::TaskCtx;
use crate::{Sim, SimError};

impl Sim {
    /// Imports (on `device`) notify `k` of another host: the registry says whether it is
    /// exported to the cluster and whom it admits. Codes: 107017 not exported to the cluster,
    /// or stale; 207006 not whitelisted; 507022 cluster unreachable.
    pub(crate) fn import_remote(
        &self,
        c: &Cluster,
        device: u32,
        k: &KeyFields,
    ) -> Result<RawNotify, SimError> {
        let (server, odev, id) = (u32::from(k.server), u32::from(k.device), u32::from(k.id));
        let (n, wl) = c.lookup(server, odev, id, k.generation, k.nonce, device)?;
        if let Some(wl) = wl
            && let Some(why) = self.not_admitted(&wl, server, device)
        {
            return Err(err(
                Error::NoPermission,
                format!(
                    "import of notify {id} (device {odev}, server {server}, another host) \
                     refused: {why}; whitelist in the cluster registry: {}",
                    wl.iter()
                        .map(|e| format!("(sdid {}, pid {})", Shown(e.sdid), e.pid))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let h = c
            .insert(n.clone())
            .ok_or_else(|| err(Error::ResourceAllocFail, "notify handle table is full"))?;
        // The owner's notify lives while this import holds it (SPEC §2).
        if let Err(e) = c.hold(h, &n) {
            c.remove(h);
            return Err(e);
        }
        Ok(RawNotify(h))
    }

    /// A record of remote import `notify` on `stream`: a stream task that delivers it through
    /// etcd (its failure is the stream's, reported by the next synchronize). `None` if
    /// `notify` is not a remote import.
    pub(crate) fn record_remote(
        &self,
        notify: RawNotify,
        stream: RawStream,
    ) -> Option<Result<(), SimError>> {
        let c = self.inner.cluster.as_ref()?;
        let n = c.get(notify.0)?;
        let attached = super::Attached::default();
        // The task holds the cluster's shared state, not the `Sim`: a task queued for ever
        // does not keep the `Sim` alive.
        let deliver = c.record_task(n.clone(), Arc::clone(&attached));
        let job = SimJob::Other(Box::new(move |_: &TaskCtx| deliver()));
        Some(self.stream(stream).and_then(|(s, _)| {
            // Right after a copy into another host's memory, it may go with the copy's
            // transaction (`cluster::carry`): decided at the claim, which orders it.
            self.enqueue_job_with(&s, stream, job, |j| {
                c.record_claimed(&s, &n, &attached);
                j
            })
        }))
    }

    /// Element `i` of a batch reset, when it is remote import `notify`: the lifecycle's rule
    /// for an imported notify on this SoC (SPEC §3: `Ascend910_93`, the SoC of inter-server
    /// IPC, resets imported notifies like any other), then the reset delivered to the owner's
    /// host, in order with this process's records of it. `None` if it is not one.
    pub(crate) fn reset_remote(&self, notify: RawNotify, i: usize) -> Option<Result<(), SimError>> {
        let c = self.inner.cluster.as_ref()?;
        let n = c.get(notify.0)?;
        let ipc = self.inner.soc.caps().ipc_batch_reset;
        if let Err(code) = Lifecycle::Imported.apply(Op::BatchReset(ipc)) {
            return Some(Err(err(
                code,
                format!(
                    "element {i}: notify {} (server {}, another host) is an IPC notify, which a \
                     batch reset on {} refuses, as CANN's runtime does",
                    n.id, n.server, self.inner.soc
                ),
            )));
        }
        Some(
            c.reset(&n)
                .map_err(|e| err(e.kind(), format!("element {i}: {}", e.message()))),
        )
    }

    /// 107000 for a wait on remote import `notify` (an imported notify is recorded, never
    /// waited on, and this one lives on another host); `None` if it is not one.
    pub(crate) fn not_waitable_remote(&self, notify: RawNotify) -> Option<SimError> {
        let n = self.inner.cluster.as_ref()?.get(notify.0)?;
        Some(err(
            Error::ParamInvalid,
            format!(
                "notify {} lives on device {} of server {} (another host); it can only be \
                 waited on there, not from device {} of server {}",
                n.id, n.device, n.server, n.local_device, self.inner.server_id
            ),
        ))
    }

    /// What `notify_info` says of remote import `notify`; `None` if it is not one.
    pub(crate) fn remote_info(&self, notify: RawNotify) -> Option<NotifyInfo> {
        let n = self.inner.cluster.as_ref()?.get(notify.0)?;
        Some(NotifyInfo {
            id: n.id,
            device: n.local_device,
            owner_device: n.device,
            owner_server: n.server,
            state: Lifecycle::Imported,
            flags: acl_notify_core::CreateFlags::empty(),
        })
    }

    /// Why an owner-only call on remote import `notify` is refused, with the code the local
    /// lifecycle gives an imported handle for `op`; `None` if it is not one.
    pub(crate) fn remote_owner_only(&self, notify: RawNotify, op: Op) -> Option<SimError> {
        let n = self.inner.cluster.as_ref()?.get(notify.0)?;
        let code = Lifecycle::Imported.apply(op).err()?;
        Some(err(
            code,
            format!(
                "notify {} of server {} was imported from another host: only its owner \
                 exports or whitelists it",
                n.id, n.server
            ),
        ))
    }

    /// Publishes this process's notify `notify` to the cluster registry (open: exported
    /// without PID validation; else with its whitelist). Code 507022.
    pub(crate) fn publish(&self, notify: RawNotify, open: bool) -> Result<(), SimError> {
        let Some(c) = &self.inner.cluster else {
            return Ok(());
        };
        let v = self.notify(notify)?;
        let wl = if open {
            Vec::new()
        } else {
            v.r.file()
                .read_whitelist(v.r.device(), v.r.id())
                .map(|w| w.iter().copied().collect())
                .unwrap_or_default()
        };
        c.publish(&v.r, v.r.slot().nonce(), open, &wl)
    }

    /// Whether process `pid` of server `server` is alive in the SuperPod (its cluster lease
    /// holds; a process whose lease expired is dead, as a SIGKILLed one is locally).
    ///
    /// Codes: 207000 not in cluster mode; 507022 cluster unreachable.
    pub fn cluster_alive(&self, server: u32, pid: i32) -> Result<bool, SimError> {
        self.cluster()?.alive(server, pid)
    }

    /// How many remote records this process applied to the notifies it owns (one per record
    /// another host delivered). Code 207000 outside cluster mode.
    pub fn cluster_records_applied(&self) -> Result<u64, SimError> {
        Ok(self.cluster()?.applied())
    }

    fn cluster(&self) -> Result<&Cluster, SimError> {
        self.inner.cluster.as_ref().ok_or_else(|| {
            err(
                Error::FeatureNotSupport,
                "this process is not in cluster mode (ACL_NOTIFY_SIM_CLUSTER is not set)",
            )
        })
    }
}

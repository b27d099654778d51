//! The core's backend traits ([`Backend`], [`NotifyResources`], [`StreamOps`], [`HostOps`])
//! implemented for [`Sim`].

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use acl_notify_core::sdid;
use acl_notify_core::table::{ExportState, WaitOutcome};
use acl_notify_core::{
    Backend, BackendError, CreateFlags, Error, ExportFlags, ExportKey, Feature, HostCall, HostOps,
    ImportFlags, KeyFields, Lifecycle, NotifyInfo, NotifyResources, Op, PidValidation, RawNotify,
    RawStream, ServerPid, Soc, StreamDestroy, StreamOps, StreamStatus, SyncWait, Timeout,
};

use crate::entries::{NotifyEntry, NotifyView, bad_notify, bad_stream};
use crate::error::SimError;
use crate::error::err;
use crate::failure_scope::SlotInterrupt;
use crate::job::SimJob;
use crate::locks::{lock, write};
use crate::shm::{CreateError, SlotRef};
use crate::sim::Sim;
use crate::waiters::{slot_wait, wait_outcome_error};
use crate::{diag, sys, trace};

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

    /// Each device's own: device `device` of this server in the simulator's layout
    /// ([`acl_notify_core::sdid`]), on every SoC.
    fn super_pod_device_id(&self, device: u32) -> Result<u32, SimError> {
        self.device_ok(device)?;
        Ok(self.sdid_of(device))
    }
}

impl NotifyResources for Sim {
    fn create_notify(&self, device: u32, flags: CreateFlags) -> Result<RawNotify, SimError> {
        self.checked(|| {
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
            self.notifies_removed();
            if let Some(c) = &self.inner.cluster {
                c.withdraw(&e.r);
            }
            // The owner's destroy: what still uses the notify (tasks queued before, importers)
            // is told so by the diagnosis of a wait on it (`diag::notify_facts`).
            if e.state != Lifecycle::Imported {
                e.r.slot().note_destroyed(sys::getpid());
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
            // The winner also moves the notify's waits to the shared futex before the key is
            // out (`export_notify`): its importers' records must wake them.
            let won =
                v.r.slot()
                    .export_notify(&file.waiter(), nonce, how, || match how {
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
            let me = self.same_server();
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
            for (i, sp) in entries.iter().enumerate() {
                self.require(Feature::InterServer, "inter-server whitelisting")?;
                self.require(Feature::Ipc, "whitelisting importers (IPC)")?;
                self.check_entry_sdid(i, sp)?;
                let entry = || vec![self.whitelist_entry(sp.sdid, sp.pid)];
                self.add_whitelist(notify, 1, entry, true)?;
            }
            if self.inner.cluster.is_some()
                && entries
                    .iter()
                    .any(|e| sdid::server_of(e.sdid) != Some(self.inner.server_id))
            {
                self.publish(notify, false)?;
            }
            Ok(())
        })
    }

    /// The one import: the key parsed (text is parsed by the core's `import_by_key`, or by the
    /// C library at its boundary). No flag changes what an import does: it enables peer access
    /// itself, as CANN's driver does.
    fn import_key(
        &self,
        device: u32,
        key: &ExportKey,
        _flags: ImportFlags,
    ) -> Result<RawNotify, SimError> {
        self.checked(|| {
            self.import_checks(device)?;
            self.import_parsed(device, key)
        })
    }

    fn can_access_peer(&self, device: u32, peer: u32) -> Result<bool, SimError> {
        self.device_ok(device)?;
        self.device_ok(peer)?;
        self.peer_access_supported()?;
        Ok(device != peer)
    }

    fn enable_peer_access(&self, device: u32, peer: u32) -> Result<(), SimError> {
        self.peer_pair_ok(device, peer)?;
        lock(&self.inner.peers)[device as usize] |= 1u64 << peer;
        Ok(())
    }
}

impl StreamOps for Sim {
    fn create_stream(&self, device: u32) -> Result<RawStream, SimError> {
        self.device_ok(device)?;
        let n = self.inner.stream_seq.fetch_add(1, Ordering::Relaxed);
        self.new_stream(device, format!("acl-sim-d{device}-s{n}"), false)
    }

    fn default_stream(&self, device: u32) -> Result<RawStream, SimError> {
        self.device_ok(device)?;
        let mut d = lock(&self.inner.defaults);
        if let Some(h) = d[device as usize] {
            return Ok(RawStream(h));
        }
        let h = self.new_stream(device, format!("acl-sim-d{device}-default"), true)?;
        d[device as usize] = Some(h.0);
        Ok(h)
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
            e.stream.unlist();
            self.streams_removed();
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
        // A thread's pair cache may keep the stream's memory (`pair_cache`) until its next
        // record or wait, not the files its tasks used (this thread's cache lets go here). Not
        // after an overtaken drain: the discard that overtook it lets go.
        if r.is_ok() {
            e.stream.release_kept();
        }
        drop(e);
        crate::pair_cache::drop_stale();
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
        self.enqueue_pair(notify, stream, None)
    }

    fn wait_and_reset(
        &self,
        notify: RawNotify,
        stream: RawStream,
        timeout: Timeout,
    ) -> Result<(), SimError> {
        // UINT32_MAX: for ever, or the aclrtSetOpWaitTimeout value, per SoC (`soc.rs`).
        let op_wait = self.inner.op_wait_timeout.load(Ordering::Relaxed);
        let t = self.inner.soc.resolve_wait(timeout, op_wait).duration();
        self.enqueue_pair(notify, stream, Some(t))
    }

    fn batch_reset(&self, notifies: &[RawNotify]) -> Result<(), SimError> {
        self.batch_reset_with(notifies.len(), |i| notifies.get(i).copied())
    }

    fn synchronize(&self, stream: RawStream, wait: SyncWait) -> Result<(), SimError> {
        let _waiting = crate::job::HostFnWaiting::sync(wait);
        let deadline = match wait {
            SyncWait::AtMost(d) => std::time::Instant::now().checked_add(d).map(|t| (t, d)),
            SyncWait::Forever => None,
        };
        self.checked(|| {
            let (s, slot) = self.stream_in_scope(stream)?;
            // A stream bound to a failure scope stops waiting once the scope fails, and
            // answers the scope's failure (`crate::failure_scope`).
            let interrupt = SlotInterrupt::new(slot);
            let mut r = match s.synchronize_unless(wait, &interrupt) {
                Some(r) => r,
                None => Err(interrupt
                    .scope()
                    .and_then(|scope| scope.failure())
                    .map_or_else(
                        || err(Error::InternalError, "a synchronize ended for no failure"),
                        |f| f.error.clone(),
                    )),
            };
            if let (Err(e), Some(deadline)) = (&r, deadline)
                && e.kind() == Error::StreamSyncTimeout
                && e.message().is_empty()
            {
                r = self
                    .sync_past_overdue_waits(&s, stream, deadline.0, deadline.1)
                    .unwrap_or(r);
            }
            // A task's failure: its listener is told, on the reporting thread, before this
            // returns (`task_failure`).
            if let Err(e) = &r
                && !matches!(e.kind(), Error::StreamSyncTimeout | Error::InternalError)
            {
                self.inner.failures.settle(deadline.map(|d| d.0));
            }
            r.map_err(|e| {
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
        // A host thread woken by its host functions is best woken beside their worker (not
        // a stream's worker queuing from inside a host function: it stays where it is).
        if !crate::job::in_host_function() {
            crate::placement::beside_worker(s.host_fn_cpu());
        }
        let call = Box::new(call);
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

impl Sim {
    /// The notify a host wait or a try-consume takes: a live handle of this `Sim` on the
    /// notify's own device (the checks of every notify call first).
    fn host_waitable(&self, notify: RawNotify) -> Result<NotifyView, SimError> {
        self.notify_calls()?;
        let v = self
            .notify(notify)
            .map_err(|e| self.not_waitable_remote(notify).unwrap_or(e))?;
        if !self.on_owner_device(&v.r, v.device) {
            return Err(self.wrong_device(&v.r, v.device));
        }
        Ok(v)
    }
}

impl HostOps for Sim {
    fn host_wait(&self, notify: RawNotify, timeout: Duration) -> Result<(), SimError> {
        let _waiting = crate::job::HostFnWaiting::enter(Some(timeout));
        self.checked(|| {
            let v = self.host_waitable(notify)?;
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
            let v = self.host_waitable(notify)?;
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

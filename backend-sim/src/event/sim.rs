//! The event calls of a [`Sim`]: [`EventOps`] (create, record, wait, query, synchronize,
//! IPC export and import of events) and [`StreamControl`], on the table of `event`.

use super::*;
use crate::job::SimJob;
use crate::{FailureScope, Sim};

impl Sim {
    /// 207000 on a SoC without events ([`Sim::require`]'s refusal).
    fn events_supported(&self) -> Result<(), SimError> {
        self.require(Feature::Event, "an event call")
    }

    pub(super) fn event(&self, h: RawEvent) -> Result<Arc<SimEvent>, SimError> {
        self.events_supported()?;
        self.inner
            .events
            .handles
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(h.0)
            .cloned()
            .ok_or_else(|| bad_event(h))
    }

    fn give_id(&self, ev: &SimEvent, st: &mut EvState) -> Result<(), SimError> {
        if st.id.is_some() {
            return Ok(());
        }
        let id = ev.ids.take(ev.device).ok_or_else(|| {
            err(
                Error::NoEventResource,
                format!(
                    "device {} has no event id left ({} per device on {})",
                    ev.device,
                    self.soc().max_events(),
                    self.soc()
                ),
            )
        })?;
        st.id = Some(id);
        Ok(())
    }
}

/// Waits on `ev` until `ready` holds, the timeout passes or the stream is cancelled.
/// An event of this process as the wait-for graph names it.
fn event_target(device: u32, id: u32) -> waitgraph::Target {
    waitgraph::Target {
        kind: waitgraph::TargetKind::Event,
        server: 0,
        device,
        id,
    }
}

fn wait_until(
    ev: &Arc<SimEvent>,
    ctx: &TaskCtx,
    timeout: Option<Duration>,
    ready: impl Fn(&EvState) -> bool,
) -> Result<(), SimError> {
    let waker_ev = Arc::clone(ev);
    let _guard = ctx.on_cancel(move || {
        let _g = lock(&waker_ev.st);
        waker_ev.cv.notify_all();
    });
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    // Published in the wait-for graph while the wait has to wait (see `waitgraph`).
    let mut published: Option<waitgraph::Blocked> = None;
    let mut st = lock(&ev.st);
    loop {
        if ready(&st) {
            return Ok(());
        }
        if published.is_none()
            && let Some(id) = st.id
        {
            published = Some(waitgraph::Blocked::publish(
                event_target(ev.device, id),
                ctx.task_number(),
                timeout,
            ));
        }
        if ctx.is_cancelled() {
            return Err(err(
                Error::TaskTimeout,
                "wait for an event cancelled: its stream was destroyed with tasks discarded, or \
                 aborted",
            ));
        }
        st = match deadline {
            // A stream worker counted busy is not, asleep here (see `shm::busy`).
            None => crate::shm::blocked(|| EvState::sleep(st, &ev.cv, None)),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    let id = st.id;
                    drop(st);
                    // Looked for without the event's lock: its recorders need it.
                    let cycle = published
                        .as_ref()
                        .and_then(waitgraph::Blocked::deadlock)
                        .map_or_else(String::new, |c| format!("; {c}"));
                    return Err(err(
                        Error::TaskTimeout,
                        format!(
                            "wait for event {} (device {}) timed out after {} s{cycle}",
                            id.map_or_else(|| "without id".to_owned(), |i| i.to_string()),
                            ev.device,
                            timeout.unwrap_or_default().as_secs()
                        ),
                    ));
                }
                crate::shm::blocked(|| EvState::sleep(st, &ev.cv, Some(d - now)))
            }
        };
    }
}

impl EventOps for Sim {
    fn event_create(&self, device: u32, spec: EventSpec) -> Result<RawEvent, SimError> {
        self.events_supported()?;
        if device >= self.device_count() {
            return Err(err(
                Error::InvalidDeviceId,
                format!("device {device} does not exist"),
            ));
        }
        let ipc = if spec.ipc() {
            self.ipc_events_supported()?;
            Some(self.evt_file()?.claim(device)?)
        } else {
            None
        };
        let ev = self.new_event(device, spec, ipc);
        if spec.id_at_create() {
            let mut st = lock(&ev.st);
            self.give_id(&ev, &mut st)?;
        }
        self.insert_event(ev)
    }

    fn event_destroy(&self, event: RawEvent) -> Result<(), SimError> {
        self.events_supported()?;
        let ev = self
            .inner
            .events
            .handles
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(event.0)
            .ok_or_else(|| bad_event(event))?;
        drop(ev);
        Ok(())
    }

    fn event_spec(&self, event: RawEvent) -> Result<(u32, EventSpec), SimError> {
        let ev = self.event(event)?;
        Ok((ev.device, ev.spec))
    }

    fn event_record(&self, event: RawEvent, stream: RawStream) -> Result<(), SimError> {
        let ev = self.event(event)?;
        device_only(&ev, "record")?;
        let (s, _) = self.stream(stream)?;
        if let Some(r) = &ev.ipc {
            let n = r.issue()?;
            let state = Arc::new(AtomicU8::new(QUEUEING));
            let task = IpcRecordTask {
                ev: Arc::clone(&ev),
                n,
                state: Arc::clone(&state),
            };
            let queued = self.enqueue(&s, stream, move |_| {
                let args = || serde_json::json!({"event": event.0, "ipc": true, "record": n});
                task.state.store(RAN, Ordering::Release);
                crate::trace::span("event", "event record", args, || match &task.ev.ipc {
                    Some(r) => r.complete(n),
                    None => Ok(()),
                })
            });
            match queued {
                Ok(()) => {
                    let was = state.compare_exchange(
                        QUEUEING,
                        QUEUED,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                    if was == Err(DROPPED) {
                        // Queued, then discarded before this thread got here.
                        IpcRecordTask::unrun(&ev, n);
                    }
                    self.note_record_on(stream, r.target());
                }
                Err(_) => r.unissue(n),
            }
            return queued;
        }
        let mark = Arc::new(Mark::default());
        let (seq, id) = {
            let mut st = lock(&ev.st);
            self.give_id(&ev, &mut st)?;
            st.begun += 1;
            (st.begun, st.id)
        };
        let task = RecordTask {
            ev: Arc::clone(&ev),
            mark: Arc::clone(&mark),
            event,
        };
        let queued = self.enqueue_job(&s, stream, SimJob::EventRecord(Box::new(task)));
        // Published only now that the task is queued (`EvState::latest`); not queued, the
        // record never happens and the one before stays the latest.
        if queued.is_ok() {
            let mut st = lock(&ev.st);
            st.records += 1;
            if seq > st.published {
                st.published = seq;
                st.latest = Some(mark);
            }
        }
        if let (Ok(()), Some(id)) = (&queued, id) {
            self.note_record_on(stream, event_target(ev.device, id));
        }
        queued
    }

    fn event_reset(&self, event: RawEvent, stream: RawStream) -> Result<(), SimError> {
        let ev = self.event(event)?;
        device_only(&ev, "reset")?;
        ipc_refused(&ev, "aclrtResetEvent")?;
        if !ev.spec.has_wait_task() {
            return Err(err(
                Error::FeatureNotSupport,
                "an event created without ACL_EVENT_SYNC cannot be reset",
            ));
        }
        if ev.spec.kind() == EventKind::Ex {
            // hicann/runtime `ApiImpl::EventReset`: new-mode events are refused.
            return Err(err(
                Error::FeatureNotSupport,
                "an event created by aclrtCreateEventExWithFlag cannot be reset",
            ));
        }
        let (s, _) = self.stream(stream)?;
        // An `aclrtCreateEvent` event: the reset clears the id of the record latest now
        // (hicann/runtime `Event::Reset` sends the current `eventId_`).
        let target = if ev.spec.id_at_create() {
            None
        } else {
            lock(&ev.st).latest.clone()
        };
        self.enqueue(&s, stream, move |_| {
            let args = || serde_json::json!({"event": event.0});
            crate::trace::span("event", "event reset", args, || {
                let mut st = lock(&ev.st);
                st.flag = false;
                if let Some(m) = &target {
                    m.cleared.store(true, Ordering::Relaxed);
                }
                drop(st);
                Ok(())
            })
        })
    }

    fn stream_wait_event(
        &self,
        stream: RawStream,
        event: RawEvent,
        timeout: Timeout,
    ) -> Result<(), SimError> {
        let ev = self.event(event)?;
        device_only(&ev, "wait on")?;
        if !ev.spec.has_wait_task() {
            return Err(err(
                Error::FeatureNotSupport,
                "an event created without ACL_EVENT_SYNC cannot be waited on",
            ));
        }
        let (s, _) = self.stream(stream)?;
        let t = timeout
            .resolve(self.inner.op_wait_timeout.load(Ordering::Relaxed))
            .duration();
        if let Some(r) = &ev.ipc {
            // As an Ex event: the latest record enqueued so far, by any holder.
            let n = r.issued()?;
            if n == 0 {
                return Ok(());
            }
            let task_ev = Arc::clone(&ev);
            return self.enqueue(&s, stream, move |ctx| {
                let args = || serde_json::json!({"event": event.0, "ipc": true, "record": n});
                crate::trace::span("event", "event wait", args, || match &task_ev.ipc {
                    Some(r) => {
                        r.stream_wait(n, t, ctx)?;
                        task_ev.ipc_unrun(n)
                    }
                    None => Ok(()),
                })
            });
        }
        let kind = ev.spec.kind();
        // An `aclrtCreateEvent` event takes a fresh id at each record, and a wait waits on the
        // id of the latest record (hicann/runtime `Event::Record`, `RefreshEventId`,
        // `WaitSendCheck`): not on a flag an earlier record set.
        let own_ids = kind == EventKind::Classic && !ev.spec.id_at_create();
        let captured = {
            let mut st = lock(&ev.st);
            match kind {
                EventKind::Classic if st.records == 0 => {
                    // hicann/runtime `Event::Wait`: "The event has not been recorded".
                    return Err(err(
                        Error::ParamInvalid,
                        "the event has not been recorded: record it on a stream before a stream \
                         waits on it",
                    ));
                }
                EventKind::Classic => {}
                // No record: nothing to wait for (the runtime sends no task).
                EventKind::Ex if st.latest.is_none() => return Ok(()),
                EventKind::Ex => {}
            }
            st.waits += 1;
            st.latest.clone()
        };
        let task_ev = Arc::clone(&ev);
        let queued = self.enqueue(&s, stream, move |ctx| {
            let args = || serde_json::json!({"event": event.0});
            let out = crate::trace::span("event", "event wait", args, || {
                wait_until(&task_ev, ctx, t, |st| match kind {
                    EventKind::Classic if own_ids => {
                        captured.as_ref().is_none_or(|m| m.flag() || m.discarded())
                    }
                    EventKind::Classic => st.flag,
                    // The record captured when the wait was enqueued has run, or never will.
                    EventKind::Ex => captured.as_ref().is_none_or(|m| m.ran() || m.discarded()),
                })?;
                match &captured {
                    // An Ex wait, or an `aclrtCreateEvent` event's, waits for that record: it
                    // never ran. Another classic wait waits for the flag, which an earlier
                    // record may have set: that record is not this wait's (it waits for any
                    // record, not the latest).
                    Some(m) if (kind == EventKind::Ex || own_ids) && !m.ran() => {
                        Err(m.discarded_error(task_ev.device))
                    }
                    _ => Ok(()),
                }
            });
            let mut st = lock(&task_ev.st);
            st.waits_done += 1;
            EvState::wake(st, &task_ev.cv);
            out
        });
        if queued.is_err() {
            lock(&ev.st).waits -= 1;
        }
        queued
    }

    fn event_latest(&self, event: RawEvent) -> Result<LatestRecord, SimError> {
        let ev = self.event(event)?;
        if let Some(r) = &ev.ipc {
            return r.latest();
        }
        let st = lock(&ev.st);
        Ok(match &st.latest {
            None => LatestRecord::None,
            // A discarded record is not pending: nothing of it is left to run. One dropped
            // behind a failure of a stream that stops on failure answers with that failure,
            // as CANN's query does (`ApiImpl::EventQueryStatus`, `Context::CheckStatus`).
            Some(m) if !m.ran() && !m.discarded() => LatestRecord::Pending,
            Some(m) if !m.ran() && m.failed_before.get().is_some() => {
                return Err(m.discarded_error(ev.device));
            }
            Some(_) => LatestRecord::Done,
        })
    }

    fn event_wait_status(&self, event: RawEvent) -> Result<EventWaitStatus, SimError> {
        let ev = self.event(event)?;
        let st = lock(&ev.st);
        Ok(if st.waits_done >= st.waits {
            EventWaitStatus::Complete
        } else {
            EventWaitStatus::NotReady
        })
    }

    fn event_synchronize(&self, event: RawEvent, wait: SyncWait) -> Result<(), SimError> {
        self.event_synchronize_unless(event, wait, None)
    }

    fn event_timestamp(&self, event: RawEvent) -> Result<Duration, SimError> {
        let ev = self.event(event)?;
        ipc_refused(&ev, "the event timestamp")?;
        let st = lock(&ev.st);
        match &st.latest {
            // hicann/runtime `Event::ElapsedTime` / `GetTimeStamp`: RT_ERROR_EVENT_RECORDER_NULL.
            None => Err(err(
                Error::InternalError,
                "the event has never been recorded",
            )),
            Some(_) if !ev.spec.timeline() => Err(err(
                Error::EventTimestampInvalid,
                "the event was created without ACL_EVENT_TIME_LINE: its records take no timestamp",
            )),
            Some(m) if m.discarded() => Err(err(
                Error::EventTimestampInvalid,
                "the event's latest record was discarded unrun (its stream aborted or \
                 destroyed with its tasks discarded): it has no timestamp",
            )),
            Some(m) if !m.ran() => Err(err(
                Error::EventTimestampInvalid,
                "the event's latest record has not run yet: synchronize its stream first",
            )),
            Some(m) => Ok(Duration::from_nanos(m.at_ns.load(Ordering::Relaxed))),
        }
    }

    fn event_id(&self, event: RawEvent) -> Result<u32, SimError> {
        let ev = self.event(event)?;
        ipc_refused(&ev, "aclrtGetEventId")?;
        lock(&ev.st).id.ok_or_else(|| {
            err(
                Error::InternalError,
                "the event has no id yet: an event of aclrtCreateEvent gets its id at its first \
                 record",
            )
        })
    }

    fn events_free(&self, device: u32) -> Result<u32, SimError> {
        self.events_supported()?;
        if device >= self.device_count() {
            return Err(err(
                Error::InvalidDeviceId,
                format!("device {device} does not exist"),
            ));
        }
        Ok(self.inner.events.ids.free_count(device))
    }

    fn ipc_event_handle(&self, event: RawEvent) -> Result<IpcEventHandle, SimError> {
        self.ipc_events_supported()?;
        let ev = self.event(event)?;
        if !ev.spec.ipc() {
            return Err(err(
                Error::ParamInvalid,
                "only an event created by aclrtCreateEventExWithFlag with ACL_EVENT_IPC can be \
                 shared",
            ));
        }
        match &ev.ipc {
            Some(r) => r.handle(),
            None => Err(err(
                Error::DrvInternalError,
                "an IPC event without its slot",
            )),
        }
    }

    fn ipc_open_event(&self, device: u32, handle: &IpcEventHandle) -> Result<RawEvent, SimError> {
        self.ipc_events_supported()?;
        if device >= self.device_count() {
            return Err(err(
                Error::InvalidDeviceId,
                format!("device {device} does not exist"),
            ));
        }
        let r = self.evt_file()?.open_handle(handle)?;
        let spec = EventSpec::ex_with_flag(acl_notify_core::EventFlags::IPC.bits(), self.soc())
            .map_err(|e| err(e, "IPC events"))?;
        let ev = self.new_event(device, spec, Some(r));
        self.insert_event(ev)
    }
}

impl Sim {
    /// The failure mode of `stream` ([`StreamControl::set_failure_mode`]).
    ///
    /// Errors: 107017 not a live stream.
    pub fn failure_mode(&self, stream: RawStream) -> Result<FailureMode, SimError> {
        let (s, _) = self.stream(stream)?;
        Ok(if s.stops_on_failure() {
            FailureMode::StopOnFailure
        } else {
            FailureMode::Continue
        })
    }

    /// A new event of `device` (its IPC slot reference `ipc` for an IPC event), not yet in the
    /// handle table.
    fn new_event(&self, device: u32, spec: EventSpec, ipc: Option<IpcRef>) -> Arc<SimEvent> {
        Arc::new(SimEvent {
            device,
            spec,
            ipc,
            st: Mutex::new(EvState::default()),
            cv: Condvar::new(),
            ids: Arc::clone(&self.inner.events.ids),
        })
    }

    /// Whether `event` is a handle of this process's event table.
    fn event_is_live(&self, event: RawEvent) -> bool {
        self.inner
            .events
            .handles
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(event.0)
            .is_some()
    }

    /// A handle for `ev` in this process's event table (207005 when it is full).
    fn insert_event(&self, ev: Arc<SimEvent>) -> Result<RawEvent, SimError> {
        self.inner
            .events
            .handles
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(ev)
            .ok()
            .map(RawEvent)
            .ok_or_else(|| err(Error::ResourceAllocFail, "event handle table is full"))
    }

    fn evt_file(&self) -> Result<crate::ipc_event::EvtFiles, SimError> {
        let i = &self.inner;
        i.events.ipc.files(&i.namespace, &i.file)
    }

    /// 207000 on a SoC without IPC events ([`Sim::require`]'s refusal).
    fn ipc_events_supported(&self) -> Result<(), SimError> {
        self.require(Feature::IpcEvent, "an IPC event call")
    }
}

impl StreamControl for Sim {
    /// The same mode again is a no-op; from stop-on-failure back to continue is 207000
    /// (hicann/runtime `src/runtime/api/impl/api_impl.cc`, `ApiImpl::StreamSetMode`).
    fn set_failure_mode(&self, stream: RawStream, mode: FailureMode) -> Result<(), SimError> {
        let (s, _) = self.stream(stream)?;
        let stop = mode == FailureMode::StopOnFailure;
        if s.stops_on_failure() && !stop {
            return Err(err(
                Error::FeatureNotSupport,
                format!(
                    "stream {:#x} stops on failure: switching it back to continue on failure \
                     is not supported",
                    stream.0
                ),
            ));
        }
        s.set_stop_on_failure(stop);
        Ok(())
    }

    fn abort(&self, stream: RawStream) -> Result<(), SimError> {
        let (s, _) = self.stream(stream)?;
        s.abort().map_err(|_| {
            err(
                Error::InvalidHandle,
                format!("stream {:#x} is being destroyed", stream.0),
            )
        })
    }
}

impl Sim {
    /// `event_synchronize` ([`EventOps::event_synchronize`]) for an event of a failure scope
    /// (`crate::failure_scope`; the scope of the context the event was made in, as CANN's
    /// event waits poll the context's status: `Event::Synchronize` through `Stream::WaitTask`
    /// in hicann/runtime `src/runtime/core/src/event/event.cc`): once the scope has failed, or
    /// as soon as it fails while this waits, the answer is the scope's failure.
    pub fn event_synchronize_in_scope(
        &self,
        event: RawEvent,
        wait: SyncWait,
        scope: &FailureScope,
    ) -> Result<(), SimError> {
        self.event_synchronize_unless(event, wait, Some(scope))
    }

    fn event_synchronize_unless(
        &self,
        event: RawEvent,
        wait: SyncWait,
        scope: Option<&FailureScope>,
    ) -> Result<(), SimError> {
        let _waiting = crate::job::HostFnWaiting::sync(wait);
        let ev = self.event(event)?;
        if let Some(r) = &ev.ipc {
            let n = r.issued()?;
            let limit = match wait {
                SyncWait::Forever => None,
                SyncWait::AtMost(d) => Some(d),
            };
            // Ends if the handle is destroyed meanwhile (by another thread, a reset of its
            // device or aclFinalize): the record may be another process's, which nothing
            // here would end.
            let gone = || !self.event_is_live(event);
            if n == 0 || r.wait_done(n, limit, &gone)? {
                return ev.ipc_unrun(n);
            }
            if gone() {
                return Err(err(
                    Error::InvalidHandle,
                    format!(
                        "event {:#x} was destroyed (by another thread, a reset of its device or \
                         aclFinalize) while this synchronize waited on it",
                        event.0
                    ),
                ));
            }
            return Err(err(
                Error::EventSyncTimeout,
                format!(
                    "the latest record of the IPC event (device {}) had not run in time",
                    ev.device
                ),
            ));
        }
        let deadline = match wait {
            SyncWait::Forever => None,
            SyncWait::AtMost(d) => Instant::now().checked_add(d),
        };
        // Armed before the lock is taken: the wake-up takes it (`failure_scope`).
        let _armed = scope.map(|s| {
            let weak = Arc::downgrade(&ev);
            s.interrupt().armed(Arc::new(move || {
                if let Some(ev) = weak.upgrade() {
                    EvState::wake(lock(&ev.st), &ev.cv);
                }
            }))
        });
        let mut st = lock(&ev.st);
        let Some(latest) = st.latest.clone() else {
            return Ok(());
        };
        loop {
            if latest.ran() {
                return Ok(());
            }
            if latest.discarded() {
                return Err(latest.discarded_error(ev.device));
            }
            if let Some(f) = scope.and_then(|s| s.failure()) {
                return Err(f.error.clone());
            }
            st = match deadline {
                None => EvState::sleep(st, &ev.cv, None),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(err(
                            Error::EventSyncTimeout,
                            format!(
                                "the latest record of the event (device {}) had not run after \
                                 {wait}",
                                ev.device
                            ),
                        ));
                    }
                    EvState::sleep(st, &ev.cv, Some(d - now))
                }
            };
        }
    }
}

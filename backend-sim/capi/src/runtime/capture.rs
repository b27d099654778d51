//! Stream capture into model runtime instances (`aclmdlRICaptureBegin` … `aclmdlRICaptureEnd`,
//! `aclmdlRIExecute[Async]`, `aclmdlRIDestroy`): a layer in front of the enqueue. Between a
//! stream's capture begin and end, the calls that would queue a task on it store the call
//! instead ([`Captured`]: its arguments); an execution replays the stored calls, in the order
//! they were made, through the same backend calls an uncaptured call makes, so each replay
//! copies, sets, records and waits again.
//!
//! CANN's rules followed (hicann/runtime `docs/zh/dev_guide/04-01_single_stream_capture.md`,
//! `04-02_cross_stream_capture.md`, `src/runtime/feature/aclgraph/context_aclgraph.cc`,
//! `api_error_aclgraph.cc`, `src/runtime/api/impl/api_error.cc`, `api_impl.cc`):
//!
//! - Begin on a stream already capturing: 107027; on the default stream: 207000. End on a
//!   stream not capturing: 107029; on a stream that joined another's capture: 107036; from
//!   another thread than the one that began it, unless the mode is relaxed: 107038 (the
//!   capture is dropped); after the capture was invalidated: 507903 (dropped).
//! - A second stream joins the capture by waiting on an event recorded in it
//!   (`aclrtStreamWaitEvent`); at the end every joined stream's last task must be an event
//!   record that the origin stream (directly or through other joined streams) waited on, or
//!   the end fails with 107025 and the capture is dropped. A capturing stream waiting on an
//!   event recorded outside the capture: 107024.
//! - Synchronize, query or destroy a capturing stream: 107027; synchronize or query an event
//!   recorded in a running capture: 107028; execute a model still capturing, or on a
//!   capturing stream: 107026 / 107027; destroy a model still capturing: 107026.
//! - `aclrtMemcpy`, `aclrtMemset`, `aclrtMemcpy2d` while a capture runs: refused with 107030
//!   by the mode rules of `Context::IsCaptureModeSupport` (a global capture of the context
//!   refuses them on every thread; a thread-local one on the thread that began it; relaxed
//!   never; `aclmdlRICaptureThreadExchangeMode` sets the calling thread's own view).
//! - Destroying a model waits for its executions to finish, at most 10 s, then 107037
//!   (`Context::ModelDestroy`).
//!
//! What the simulator captures: `aclrtMemcpyAsync`, `aclrtMemsetAsync`, `aclrtRecordNotify`,
//! `aclrtWaitAndResetNotify`, `aclrtRecordEvent`, `aclrtStreamWaitEvent[WithTimeout]`,
//! `aclrtResetEvent`, `aclrtValueWrite`, `aclrtValueWait`. Any other call that queues a task
//! on a capturing stream is refused (107027, the capture invalidated: CANN captures it, the
//! simulator cannot replay it), as are the synchronize, query and destroy calls CANN refuses.
//!
//! A model's streams: each captured stream's tasks replay on a stream of the model's own,
//! created at the end of the capture (`aclmdlRIGetStreams` lists them, the origin's first).
//! An execution queues on the stream it names a record of the model's start event, which the
//! origin's model stream waits on first, and a wait on the model's done event, which that
//! stream records last (the joined streams are joined back to it before): so the run is
//! ordered with the stream's other work, as `CaptureModel::SetNotifyBeforeExecute` /
//! `SetNotifyAfterExecute` order it in CANN. Events recorded in the capture are replaced by
//! events of the model's own (so a replay's records and waits pair with each other, not with
//! the caller's use of the event between replays).
//! Notifies and memory are the caller's: each replay records and waits the same notifies and
//! copies between the same addresses. A copy's, set's or value task's ranges are checked when
//! it is captured (its call fails as the uncaptured one would; the capture goes on) and again
//! at each replay's enqueue.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use acl_notify_core::{Error, EventOps as _};

use super::Runtime;
use super::labels::LabelSlot;
use super::last_task::{self, Last};
pub(crate) use super::model::{Captured, Mode};
use super::model::{CondEntry, Model, Models, Phase, bad_model};
use crate::errmsg::{CallError, param};
use crate::handle::{CTable, Handles, Kind};

/// `aclmdlRICaptureStatus`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// `ACL_MODEL_RI_CAPTURE_STATUS_NONE`.
    None = 0,
    /// `ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE`.
    Active = 1,
    /// `ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED`.
    Invalidated = 2,
}

thread_local! {
    /// This thread's exchanged mode (`aclmdlRICaptureThreadExchangeMode`; global at first),
    /// kept for the thread's life as CANN keeps it (hicann/runtime `inner_thread_local.cpp`,
    /// `exchangeCaptureMode_`).
    static EXCHANGED: Cell<Mode> = const { Cell::new(Mode::Global) };
    /// The capturing stream this thread's call was last refused for (0: none).
    static REFUSED: Cell<usize> = const { Cell::new(0) };
}

/// The calls refused on a capturing stream that queue no task, so leave its capture valid.
const NOT_TASKS: [&str; 7] = [
    "aclmdlRICaptureBegin",
    "aclrtSynchronizeStream",
    "aclrtSynchronizeStreamWithTimeout",
    "aclrtStreamQuery",
    "aclrtDestroyStream",
    "aclrtDestroyStreamForce",
    "aclmdlRIExecuteAsync",
];

/// For the C layer's failure path: a call `call` refused with 107027 because it named a
/// capturing stream invalidates that capture unless it queues no task
/// (`Stream::SingleStreamTerminateCapture`: CANN would have captured it; the simulator cannot
/// replay it, so no model may come of the capture).
pub(crate) fn after_refusal(call: &str, e: &CallError) {
    let stream = REFUSED.with(|r| r.replace(0));
    if stream == 0 || NOT_TASKS.contains(&call) {
        return;
    }
    if let Some(rt) = crate::session::existing_runtime() {
        rt.invalidate_capture(stream, call, e);
    }
}

/// `aclmdlRICaptureThreadExchangeMode`: sets the calling thread's mode, returns the old one.
pub(crate) fn exchange_mode(mode: Mode) -> Mode {
    EXCHANGED.with(|m| m.replace(mode))
}

/// A stream in a capture, or bound to a model being built (`model_build`).
#[derive(Clone, Copy, Debug)]
pub(super) struct InCapture {
    /// The model's handle.
    pub(super) model: usize,
    /// Its index among the model's streams (0: the origin).
    pub(super) index: usize,
}

impl InCapture {
    /// `Ok` on the stream the capture was begun on; on a stream that joined it through an
    /// event, `code`: `what` (the call's part) is done on the origin only.
    pub(super) fn on_origin(self, stream: usize, code: Error, what: &str) -> Result<(), CallError> {
        if self.index == 0 {
            return Ok(());
        }
        Err(CallError::new(
            code,
            format!(
                "stream {stream:#x} joined the capture of model {:#x} through an event: {what} \
                 on the stream the capture was begun on",
                self.model
            ),
        ))
    }
}

#[derive(Debug)]
pub(super) struct State {
    pub(super) models: Models,
    /// C stream handle → its capture (or the model it is bound to while that is built).
    pub(super) streams: HashMap<usize, InCapture>,
    /// C event handle recorded in a running capture → the model.
    events: HashMap<usize, usize>,
    /// `aclrtLabelList` handles → their labels' handles.
    pub(super) lists: Handles<Vec<usize>>,
    /// Capturing stream → (its model, the indices of the tasks stored since its
    /// `aclmdlRICaptureTaskGrpBegin`) (`task_group`).
    pub(super) grouping: HashMap<usize, (usize, Vec<usize>)>,
    /// Stream between `aclmdlRICaptureTaskUpdateBegin` and `End` → (the group's handle, the
    /// tasks queued on it since) (`task_group`).
    pub(super) updating: HashMap<usize, (usize, Vec<Captured>)>,
    /// `aclmdlRICondHandle` handles → their conditions (`cond`).
    pub(super) conds: Handles<CondEntry>,
}

impl State {
    fn new(seed: u64) -> Self {
        State {
            models: Models::new(Handles::new(Kind::ModelRI, "model runtime instances", seed)),
            streams: HashMap::new(),
            events: HashMap::new(),
            lists: Handles::new(Kind::LabelList, "label lists", seed),
            grouping: HashMap::new(),
            updating: HashMap::new(),
            conds: Handles::new(Kind::CondHandle, "condition handles", seed),
        }
    }

    /// A new model of `device` in `phase`, its streams `streams`, under a new handle and
    /// number.
    pub(super) fn add_model(
        &mut self,
        device: u32,
        streams: Vec<usize>,
        phase: Phase,
    ) -> Result<&mut Model, CallError> {
        let handle = self.models.0.insert(None)?;
        let id = self.models.take_id(device);
        let m = Model::new(id, handle, device, streams, phase);
        let slot = self.models.0.get_mut(handle).ok_or_else(|| {
            CallError::new(
                Error::InternalError,
                "internal error: a new model handle is dead",
            )
        })?;
        Ok(slot.insert(m))
    }
}

/// The session's captures and models.
pub(crate) struct Captures {
    /// Streams capturing (or bound to a model being built) now: while 0, no call looks at
    /// the state (one load).
    pub(super) active: AtomicUsize,
    /// The models, label lists and conditions, with the captures' state.
    state: Mutex<State>,
    /// `aclmdlRITask` handles → (model handle, index among its tasks) (`model_tasks`).
    pub(super) tasks: CTable<(usize, usize)>,
    /// `aclrtLabel` handles → the label (`labels`).
    pub(super) labels: CTable<LabelSlot>,
    /// `aclrtTaskGrp` handles → (model handle, index among its groups) (`task_group`).
    pub(super) groups: CTable<(usize, u32)>,
}

impl Captures {
    pub(crate) fn new(seed: u64) -> Self {
        Captures {
            active: AtomicUsize::new(0),
            state: Mutex::new(State::new(seed)),
            tasks: CTable::new(Kind::ModelTask, "model tasks", seed),
            labels: CTable::new(Kind::Label, "labels", seed),
            groups: CTable::new(Kind::TaskGroup, "task groups", seed),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether a capture's mode refuses a synchronous call on this thread
/// (`Context::IsCaptureModeSupport`): `ctx_mode` the strictest mode of the context's running
/// captures, `thread_mode` the strictest of those this thread began (CANN counts them per
/// thread, `InnerThreadLocalContainer::ThreadCaptureModeEnter`/`Exit`; here they are read
/// from the session's captures, so a capture that ends without `aclmdlRICaptureEnd` — its
/// device reset, `aclFinalize` — stops counting with it).
fn mode_refuses(ctx_mode: Mode, thread_mode: Option<Mode>) -> bool {
    match EXCHANGED.with(Cell::get) {
        Mode::Relaxed => false,
        Mode::Global => ctx_mode == Mode::Global || thread_mode == Some(Mode::ThreadLocal),
        Mode::ThreadLocal => matches!(thread_mode, Some(Mode::Global | Mode::ThreadLocal)),
    }
}

impl Runtime {
    /// Whether any stream captures now (one load).
    #[inline]
    pub(crate) fn any_capture(&self) -> bool {
        self.captures.active.load(Ordering::Acquire) != 0
    }

    /// Whether `stream` (a C handle) is capturing (or bound to a model being built).
    pub(crate) fn is_capturing(&self, stream: usize) -> bool {
        self.in_capture(stream).is_some()
    }

    /// The capture stream `stream` (a C handle) takes part in, if any: `None` at the cost of
    /// one load while no stream captures.
    #[inline]
    fn in_capture(&self, stream: usize) -> Option<InCapture> {
        if self.captures.active.load(Ordering::Acquire) == 0 || stream == 0 {
            return None;
        }
        self.captures.lock().streams.get(&stream).copied()
    }

    /// For [`resolve_stream`](Runtime::resolve_stream): 107027 for a capturing stream, whose
    /// tasks only the capturable calls may add and which may not be synchronized, queried or
    /// destroyed until its capture ends. A call that would have queued a task invalidates
    /// the capture: the simulator cannot replay it.
    pub(super) fn refuse_capturing(&self, stream: usize) -> Result<(), CallError> {
        let Some(c) = self.in_capture(stream) else {
            return Ok(());
        };
        if self.building(c.model) {
            return Err(self.bound_refusal(stream, c.model));
        }
        let why = format!(
            "stream {stream:#x} is capturing (aclmdlRICaptureBegin of model {:#x}): it cannot be \
             synchronized, queried or destroyed before aclmdlRICaptureEnd, and the simulator \
             captures only aclrtMemcpyAsync, aclrtMemsetAsync, aclrtRecordNotify, \
             aclrtWaitAndResetNotify, aclrtRecordEvent, aclrtStreamWaitEvent, aclrtResetEvent, \
             aclrtValueWrite and aclrtValueWait",
            c.model
        );
        REFUSED.with(|r| r.set(stream));
        Err(CallError::new(Error::StreamCaptured, why))
    }

    /// Invalidates the capture of the stream `stream` takes part in, for a task call it could
    /// not capture (`Stream::SingleStreamTerminateCapture`); `call` names it.
    pub(crate) fn invalidate_capture(&self, stream: usize, call: &str, e: &CallError) {
        if self.captures.active.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut st = self.captures.lock();
        let Some(c) = st.streams.get(&stream).copied() else {
            return;
        };
        if let Some(m) = st.models.get_mut(c.model)
            && let Phase::Capturing { invalid, .. } = &mut m.phase
            && invalid.is_none()
        {
            *invalid = Some(format!(
                "{call} on stream {stream:#x} was refused ({}): the simulator cannot capture it",
                e.code()
            ));
        }
    }

    /// 107030 if a running capture's mode refuses synchronous `call` on this thread.
    pub(crate) fn capture_mode_allows(&self, call: &str) -> Result<(), CallError> {
        if self.captures.active.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let (_, ctx) = self.current()?;
        let me = std::thread::current().id();
        let st = self.captures.lock();
        let capturing = || {
            st.models.values().filter_map(|m| match m.phase {
                Phase::Capturing {
                    mode,
                    ctx: c,
                    thread,
                    ..
                } => Some((mode, c, thread)),
                Phase::Building { .. } | Phase::Ready(_) | Phase::Empty => None,
            })
        };
        let ctx_mode = capturing().filter(|c| c.1 == ctx).map(|c| c.0).min();
        let thread_mode = capturing().filter(|c| c.2 == me).map(|c| c.0).min();
        match ctx_mode {
            Some(mode) if mode_refuses(mode, thread_mode) => Err(CallError::new(
                Error::CaptureModeNotSupport,
                format!(
                    "{call} is not allowed while a stream of this context captures in mode \
                     {mode:?} (call aclmdlRICaptureThreadExchangeMode with \
                     ACL_MODEL_RI_CAPTURE_MODE_RELAXED on this thread to allow it)"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Stores `task` if `stream` captures (`Ok(true)`); `Ok(false)`: it does not, queue the
    /// task. An event wait may make the stream join a capture, or be refused.
    pub(crate) fn capture(&self, stream: usize, task: Captured) -> Result<bool, CallError> {
        if self.task_update(stream, task)? {
            return Ok(true);
        }
        let joining = match task {
            Captured::EventWait(e, _) => {
                self.captures.active.load(Ordering::Acquire) != 0
                    && self.captures.lock().events.contains_key(&e)
            }
            _ => false,
        };
        let Some(c) = self.in_capture(stream) else {
            if !joining {
                last_task::note(Last::Queued { stream });
                return Ok(false);
            }
            return self.join(stream, task);
        };
        self.precheck(task)?;
        let mut st = self.captures.lock();
        // Checked again under the lock: the capture may have ended meanwhile.
        if !st.streams.contains_key(&stream) {
            last_task::note(Last::Queued { stream });
            return Ok(false);
        }
        if let Some(Phase::Building { ended }) = st.models.get(c.model).map(|m| &m.phase)
            && ended.get(c.index).copied().unwrap_or(false)
        {
            return Err(param(format!(
                "{} on stream {stream:#x}: aclmdlRIEndTask ended the stream's part of model {:#x} \
                 (a task after it would not run in the model)",
                task.name(),
                c.model
            )));
        }
        match task {
            Captured::EventWait(e, _) => match st.events.get(&e) {
                Some(&m) if m != c.model => {
                    return Err(CallError::new(
                        Error::FeatureNotSupport,
                        format!(
                            "event {e:#x} was recorded in the capture of model {m:#x}, and stream \
                             {stream:#x} captures model {:#x}: the simulator does not merge two \
                             captures",
                            c.model
                        ),
                    ));
                }
                Some(_) => {}
                None if self.event_recorded(e) => {
                    // `ApiImpl::StreamWaitEvent`: STREAM_CAPTURE_ISOLATION.
                    return Err(CallError::new(
                        Error::CaptureDependency,
                        format!(
                            "stream {stream:#x} is capturing and event {e:#x} was recorded \
                             outside the capture: a captured wait must pair with a record in \
                             the same capture"
                        ),
                    ));
                }
                // Never recorded: nothing to wait for, no task.
                None => return Ok(true),
            },
            Captured::EventRecord(e) => {
                st.events.insert(e, c.model);
            }
            Captured::EventReset(e) if !st.events.contains_key(&e) => {
                return Err(CallError::new(
                    Error::FeatureNotSupport,
                    format!(
                        "aclrtResetEvent of event {e:#x} on capturing stream {stream:#x}: the \
                         event is not recorded in this capture (the simulator resets only \
                         events of the capture inside it)"
                    ),
                ));
            }
            _ => {}
        }
        let m = st.models.get_mut(c.model).ok_or_else(|| {
            CallError::new(
                Error::InternalError,
                "internal error: capture without model",
            )
        })?;
        m.tasks.push((c.index, task));
        let n = m.tasks.len() - 1;
        last_task::note(Last::Stored {
            stream,
            model: c.model,
            seq: n,
        });
        if let Some((_, g)) = st.grouping.get_mut(&stream) {
            g.push(n);
        }
        Ok(true)
    }

    /// A captured copy's, set's or value task's arguments checked as its uncaptured call
    /// checks them when it queues it: CANN checks a task's arguments before it decides to
    /// queue or capture it (hicann/runtime `api_error.cc`, `ApiErrorDecorator::MemcpyAsync`:
    /// count, kind and `MemcpyAsyncCheckLocation`, then `ApiImpl`), so a bad range is the
    /// capturing call's error (the capture stays valid);
    /// each replay checks again (memory freed since is the replay's error).
    pub(super) fn precheck(&self, task: Captured) -> Result<(), CallError> {
        let b = &self.backend;
        match task {
            Captured::Memcpy {
                dst,
                dest_max,
                src,
                count,
                kind,
            } => b.memcpy_check(dst, dest_max, src, count, kind).map(drop),
            Captured::Memset {
                dst, max, count, ..
            } => b.memset_check(dst, max, count),
            Captured::ValueWrite { addr, .. } | Captured::ValueWait { addr, .. } => {
                b.value_check(addr)
            }
            _ => Ok(()),
        }
        .map_err(CallError::backend)
    }

    /// Whether the caller's event `e` has a record (outside any capture).
    fn event_recorded(&self, e: usize) -> bool {
        self.events.get(e).is_some_and(|entry| {
            !matches!(
                self.backend.event_latest(entry.raw),
                Ok(acl_notify_core::event::LatestRecord::None)
            )
        })
    }

    /// `stream` joins the capture event wait `task` names (`GetCaptureStream`, cross-stream
    /// capture).
    fn join(&self, stream: usize, task: Captured) -> Result<bool, CallError> {
        let Captured::EventWait(e, _) = task else {
            return Ok(false);
        };
        let entry = self.stream(stream)?;
        if entry.default {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                "a context's default stream cannot join a capture",
            ));
        }
        let mut st = self.captures.lock();
        let Some(&model) = st.events.get(&e) else {
            return Err(CallError::new(
                Error::StreamNotCaptured,
                format!("the capture event {e:#x} was recorded in ended while this call ran"),
            ));
        };
        let m = st
            .models
            .get_mut(model)
            .ok_or_else(|| CallError::new(Error::InternalError, "internal error: no model"))?;
        if matches!(m.phase, Phase::Building { .. }) {
            // A model being built takes no stream by an event: the wait is the caller's own
            // (on an event the model's record has not recorded: nothing to wait for).
            last_task::note(Last::Queued { stream });
            return Ok(false);
        }
        if entry.device != m.device {
            return Err(CallError::new(
                Error::StreamContext,
                format!(
                    "stream {stream:#x} is of device {}, the capture of device {}",
                    entry.device, m.device
                ),
            ));
        }
        let index = m.streams.len();
        m.streams.push(stream);
        m.heads.push(true);
        m.tasks.push((index, task));
        last_task::note(Last::Stored {
            stream,
            model,
            seq: m.tasks.len() - 1,
        });
        st.streams.insert(stream, InCapture { model, index });
        self.captures.active.fetch_add(1, Ordering::AcqRel);
        Ok(true)
    }

    /// `aclmdlRICaptureBegin` (`into` `None`), or `aclmdlRICaptureToModelRIBegin` into the
    /// sub-model `into` (a C handle) of a conditional task (`cond`: its checks).
    pub(crate) fn capture_begin(
        &self,
        stream: usize,
        mode: Mode,
        into: Option<usize>,
    ) -> Result<(), CallError> {
        self.require(acl_notify_core::Feature::ModelCapture)?;
        if let Some(h) = into {
            self.model_live(h)?;
        }
        let entry = self.stream(stream)?;
        let (device, ctx) = self.current()?;
        self.resolve_stream_any(stream)?;
        if entry.default {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!("stream {stream:#x} is a context's default stream: it cannot be captured"),
            ));
        }
        let mut st = self.captures.lock();
        if let Some(h) = into {
            Self::capturable_sub(&st, h, device)?;
        }
        if let Some(c) = st.streams.get(&stream) {
            return Err(CallError::new(
                Error::StreamCaptured,
                format!(
                    "stream {stream:#x} is already capturing (model {:#x}): end that capture first",
                    c.model
                ),
            ));
        }
        let phase = Phase::Capturing {
            mode,
            thread: std::thread::current().id(),
            ctx,
            invalid: None,
        };
        let id = match into {
            Some(h) => {
                let m = st.models.get_mut(h).ok_or_else(|| bad_model(h))?;
                m.phase = phase;
                m.streams = vec![stream];
                m.heads = vec![true];
                h
            }
            None => st.add_model(device, vec![stream], phase)?.handle,
        };
        st.streams.insert(
            stream,
            InCapture {
                model: id,
                index: 0,
            },
        );
        self.captures.active.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// `aclmdlRICaptureGetInfo`: the stream's status and the model it captures into (0 when
    /// none), as C handles.
    pub(crate) fn capture_info(&self, stream: usize) -> Result<(Status, usize), CallError> {
        self.stream(stream)?;
        let st = self.captures.lock();
        let Some(c) = st.streams.get(&stream) else {
            return Ok((Status::None, 0));
        };
        let Some(m) = st.models.get(c.model) else {
            return Ok((Status::None, 0));
        };
        let status = match &m.phase {
            // Bound to a model being built: not capturing.
            Phase::Building { .. } => return Ok((Status::None, 0)),
            Phase::Capturing { invalid: None, .. } => Status::Active,
            _ => Status::Invalidated,
        };
        Ok((status, m.handle))
    }

    /// Ends every stream's part in capture `model` (the state's and the counter's).
    pub(super) fn release_streams(&self, st: &mut State, model: usize) {
        let before = st.streams.len();
        st.streams.retain(|_, c| c.model != model);
        st.events.retain(|_, m| *m != model);
        st.grouping.retain(|_, (m, _)| *m != model);
        self.captures
            .active
            .fetch_sub(before - st.streams.len(), Ordering::AcqRel);
    }

    /// The capture `stream` takes part in (under the state's lock): 107029 if it is in none,
    /// or is bound to a model being built rather than capturing.
    pub(super) fn capturing(&self, st: &State, stream: usize) -> Result<InCapture, CallError> {
        match st.streams.get(&stream).copied() {
            Some(c) if !self.building_in(st, c.model) => Ok(c),
            Some(c) => Err(CallError::new(
                Error::StreamNotCaptured,
                format!(
                    "stream {stream:#x} is bound to model {:#x} being built, not capturing: end \
                     the build with aclmdlRIBuildEnd",
                    c.model
                ),
            )),
            None => Err(CallError::new(
                Error::StreamNotCaptured,
                format!("stream {stream:#x} is not capturing: call aclmdlRICaptureBegin first"),
            )),
        }
    }

    /// `aclmdlRICaptureEnd`: the model's handle.
    pub(crate) fn capture_end(&self, stream: usize) -> Result<usize, CallError> {
        self.stream(stream)?;
        let mut st = self.captures.lock();
        let c = self.capturing(&st, stream)?;
        c.on_origin(stream, Error::StreamCaptureUnmatched, "a capture is ended")?;
        let subs = Self::subs_ended(&st, c.model);
        let mut model = st
            .models
            .take(c.model)
            .ok_or_else(|| CallError::new(Error::InternalError, "internal error: no model"))?;
        self.release_streams(&mut st, c.model);
        drop(st);
        let ended = self
            .end_checks(stream, &model, subs)
            .and_then(|()| self.build(&model, true));
        match ended {
            Ok(replay) => {
                model.phase = Phase::Ready(Arc::new(replay));
                let h = model.handle;
                self.captures.lock().models.put(model);
                Ok(h)
            }
            Err(e) => {
                // The capture is dropped (`ClearCaptureModel`): so are its handle and its
                // conditions' sub-models.
                self.captures.lock().models.end_taken(&model);
                self.forget_conds(model.handle);
                Err(e)
            }
        }
    }

    /// `aclmdlRICaptureEnd`'s checks of a capture whose streams were released.
    fn end_checks(
        &self,
        stream: usize,
        model: &Model,
        subs: Result<(), CallError>,
    ) -> Result<(), CallError> {
        let Phase::Capturing {
            mode,
            thread,
            invalid,
            ..
        } = &model.phase
        else {
            return Err(CallError::new(
                Error::InternalError,
                "internal error: not capturing",
            ));
        };
        if *thread != std::thread::current().id() && *mode != Mode::Relaxed {
            return Err(CallError::new(
                Error::StreamCaptureWrongThread,
                format!(
                    "the capture on stream {stream:#x} was begun by another thread in mode \
                     {mode:?}: only that thread may end it (the capture is dropped)"
                ),
            ));
        }
        if let Some(why) = invalid {
            return Err(CallError::new(
                Error::StreamCaptureInvalidated,
                format!("the capture on stream {stream:#x} was invalidated: {why}"),
            ));
        }
        // `Context::StreamEndCapture`: the sub-models' captures, then the joined streams.
        subs?;
        check_joined(model)
    }

    /// Whether the caller's event `event` is recorded in a running capture: 107028 for the
    /// event calls CANN refuses then (`ApiErrorDecorator::EventSynchronize`, `EventQuery`).
    pub(crate) fn refuse_capture_event(&self, event: usize, call: &str) -> Result<(), CallError> {
        if self.captures.active.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        match self.captures.lock().events.get(&event) {
            Some(m) => Err(CallError::new(
                Error::EventCaptured,
                format!(
                    "{call}: event {event:#x} is recorded in the running capture of model {m:#x}"
                ),
            )),
            None => Ok(()),
        }
    }
}

/// CANN's `CheckCaptureModelValidity`: each joined stream's last task is a record of an event
/// that some stream waits on afterwards, and the origin waits on at least one of them.
fn check_joined(model: &Model) -> Result<(), CallError> {
    let mut origin_waits = false;
    for index in 1..model.streams.len() {
        let last = model.tasks.iter().rposition(|(i, _)| *i == index);
        let unjoined = |why: &str| {
            Err(CallError::new(
                Error::StreamUnjoined,
                format!(
                    "stream {:#x} joined the capture but {why}: record an event on it last and \
                     make the origin stream wait on it (the capture is dropped)",
                    model.streams[index]
                ),
            ))
        };
        let Some(at) = last else {
            return unjoined("has no task");
        };
        let Captured::EventRecord(e) = model.tasks[at].1 else {
            return unjoined("its last task is not an event record");
        };
        let waiters: Vec<usize> = model.tasks[at + 1..]
            .iter()
            .filter(|(_, t)| matches!(t, Captured::EventWait(w, _) if *w == e))
            .map(|(i, _)| *i)
            .collect();
        if waiters.is_empty() {
            return unjoined("no stream waits on its last event record");
        }
        origin_waits |= waiters.contains(&0);
    }
    if model.streams.len() > 1 && !origin_waits {
        return Err(CallError::new(
            Error::StreamUnjoined,
            "the origin stream waits on none of the joined streams' last records: join them \
             back to it with aclrtStreamWaitEvent (the capture is dropped)",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::{RawNotify, Timeout};

    fn model(streams: usize, tasks: Vec<(usize, Captured)>) -> Model {
        let phase = Phase::Capturing {
            mode: Mode::Global,
            thread: std::thread::current().id(),
            ctx: 0,
            invalid: None,
        };
        let mut m = Model::new(1, 0, 0, (0..streams).map(|i| 0x100 + i).collect(), phase);
        m.tasks = tasks;
        m
    }

    fn code(r: Result<(), CallError>) -> Option<Error> {
        r.err().map(|e| e.code())
    }

    const E1: usize = 0xE1;
    const E2: usize = 0xE2;
    const T: Timeout = Timeout::Forever;

    #[test]
    fn a_joined_stream_must_end_with_a_record_the_origin_waits_on() {
        use Captured::{EventRecord as R, EventWait as W};
        let n = RawNotify(7);
        // Origin only: nothing to check.
        assert_eq!(code(check_joined(&model(1, vec![(0, R(E1))]))), None);
        // Joined and joined back: s1 records e2 last, the origin waits on it.
        let good = vec![(0, R(E1)), (1, W(E1, T)), (1, R(E2)), (0, W(E2, T))];
        assert_eq!(code(check_joined(&model(2, good))), None);
        // Its last task is not a record.
        let t = vec![
            (0, R(E1)),
            (1, W(E1, T)),
            (1, R(E2)),
            (1, Captured::NotifyRecord(n)),
        ];
        assert_eq!(
            code(check_joined(&model(2, t))),
            Some(Error::StreamUnjoined)
        );
        // Nobody waits on its last record.
        let t = vec![(0, R(E1)), (1, W(E1, T)), (1, R(E2))];
        assert_eq!(
            code(check_joined(&model(2, t))),
            Some(Error::StreamUnjoined)
        );
        // A wait before the record does not count.
        let t = vec![(0, R(E1)), (1, W(E1, T)), (0, W(E2, T)), (1, R(E2))];
        assert_eq!(
            code(check_joined(&model(2, t))),
            Some(Error::StreamUnjoined)
        );
        // Stream 2 back through stream 1, stream 1 back to the origin.
        let t = vec![
            (0, R(E1)),
            (1, W(E1, T)),
            (2, W(E1, T)),
            (2, R(E2)),
            (1, W(E2, T)),
            (1, R(E1)),
            (0, W(E1, T)),
        ];
        assert_eq!(code(check_joined(&model(3, t))), None);
    }

    /// `Context::IsCaptureModeSupport`, row by row: the thread's exchanged mode × the
    /// context's strictest capture × the modes of the captures this thread began.
    #[test]
    fn synchronous_calls_follow_the_capture_mode_rules() {
        use Mode::{Global as G, Relaxed as R, ThreadLocal as L};
        let rows: [(Mode, Mode, Option<Mode>, bool); 12] = [
            // exchanged, context, this thread's own capture, refused
            (G, G, None, true),
            (G, L, None, false),
            (G, L, Some(L), true),
            (G, R, None, false),
            (G, R, Some(R), false),
            (L, G, None, false),
            (L, G, Some(G), true),
            (L, L, Some(L), true),
            (L, R, Some(R), false),
            (R, G, None, false),
            (R, G, Some(G), false),
            (R, L, Some(L), false),
        ];
        for (exchanged, ctx, own, refused) in rows {
            let old = exchange_mode(exchanged);
            assert_eq!(
                mode_refuses(ctx, own),
                refused,
                "exchanged {exchanged:?}, context {ctx:?}, own {own:?}"
            );
            exchange_mode(old);
        }
    }

    #[test]
    fn modes_outside_the_three_are_refused() {
        assert_eq!(Mode::from_c(2).ok(), Some(Mode::Relaxed));
        assert_eq!(
            Mode::from_c(3).err().map(|e| e.code()),
            Some(Error::ParamInvalid)
        );
    }
}

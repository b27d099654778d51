//! A model runtime instance (`aclmdlRI`): what a capture or a build stores ([`Model`]: its
//! streams, tasks and their metadata, its phase), what an execution replays ([`Replay`]), the
//! conditions of its conditional tasks ([`CondEntry`]), and the session's models by their
//! handles ([`Models`]). The captures that make models are [`super::capture`]; building one
//! task by task is `model_build`, executing one `model_exec`.

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::ThreadId;

use acl_notify_core::event::EventSpec;
use acl_notify_core::{Backend as _, EventOps, RawEvent, RawNotify, Timeout};
use acl_notify_sim::mem::{MemcpyKind, ValueCondition};

use super::Runtime;
use super::flow::{CondKind, Control, Runs};
use super::last_task::TaskInfo;
use super::lowest_free_ids::LowestFreeIds;
use crate::errmsg::{CallError, param};
use crate::handle::Handles;

/// `aclmdlRICaptureMode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Mode {
    /// `ACL_MODEL_RI_CAPTURE_MODE_GLOBAL`.
    Global = 0,
    /// `ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL`.
    ThreadLocal = 1,
    /// `ACL_MODEL_RI_CAPTURE_MODE_RELAXED`.
    Relaxed = 2,
}

impl Mode {
    /// The mode a C value names; 107000 for another (`ApiErrorDecorator::StreamBeginCapture`).
    pub(crate) fn from_c(mode: u32) -> Result<Mode, CallError> {
        match mode {
            0 => Ok(Mode::Global),
            1 => Ok(Mode::ThreadLocal),
            2 => Ok(Mode::Relaxed),
            m => Err(param(format!(
                "mode {m}: ACL_MODEL_RI_CAPTURE_MODE_GLOBAL (0), _THREAD_LOCAL (1) or _RELAXED (2)"
            ))),
        }
    }
}

/// A call as captured: its arguments, the stream it names aside. Replayed by
/// [`Runtime::issue`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Captured {
    /// `aclrtMemcpyAsync`.
    Memcpy {
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
    },
    /// `aclrtMemsetAsync`.
    Memset {
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
    },
    /// `aclrtRecordNotify`.
    NotifyRecord(RawNotify),
    /// `aclrtWaitAndResetNotify`.
    NotifyWait(RawNotify, Timeout),
    /// `aclrtRecordEvent` (the caller's event handle).
    EventRecord(usize),
    /// `aclrtStreamWaitEvent[WithTimeout]`.
    EventWait(usize, Timeout),
    /// `aclrtResetEvent`.
    EventReset(usize),
    /// `aclrtRecordEventWithFlag(ACL_EVENT_RECORD_EXTERNAL)` (`runtime::event`).
    ExternalRecord(usize),
    /// `aclrtStreamWaitEventWithFlag(ACL_EVENT_WAIT_EXTERNAL)`.
    ExternalWait(usize),
    /// `aclrtValueWrite`.
    ValueWrite { addr: usize, value: u64 },
    /// `aclrtValueWait`.
    ValueWait {
        addr: usize,
        value: u64,
        cond: ValueCondition,
    },
    /// A control task of a built model (`flow`).
    Control(Control),
}

impl Captured {
    /// The call's name, for messages.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Captured::Memcpy { .. } => "aclrtMemcpyAsync",
            Captured::Memset { .. } => "aclrtMemsetAsync",
            Captured::NotifyRecord(_) => "aclrtRecordNotify",
            Captured::NotifyWait(..) => "aclrtWaitAndResetNotify",
            Captured::EventRecord(_) => "aclrtRecordEvent",
            Captured::EventWait(..) => "aclrtStreamWaitEvent",
            Captured::EventReset(_) => "aclrtResetEvent",
            Captured::ExternalRecord(_) => "aclrtRecordEventWithFlag",
            Captured::ExternalWait(_) => "aclrtStreamWaitEventWithFlag",
            Captured::ValueWrite { .. } => "aclrtValueWrite",
            Captured::ValueWait { .. } => "aclrtValueWait",
            Captured::Control(c) => c.name(),
        }
    }
}

/// Where a model is in its life.
#[derive(Debug)]
pub(super) enum Phase {
    /// Being captured: begun on `origin` by `thread` in `mode`, in context `ctx`.
    Capturing {
        mode: Mode,
        thread: ThreadId,
        ctx: usize,
        invalid: Option<String>,
    },
    /// Being built (`aclmdlRIBuildBegin` … `aclmdlRIBuildEnd`, `model_build`): the tasks
    /// queued on its bound streams are stored; `ended[i]`: `aclmdlRIEndTask` closed stream `i`.
    Building { ended: Vec<bool> },
    /// Captured or built: executable.
    Ready(Arc<Replay>),
    /// A sub-model `aclmdlRIAddCondTask` made, not captured yet (CANN's capture status
    /// `NONE`): `aclmdlRICaptureToModelRIBegin` captures into it (`cond`).
    Empty,
}

/// What an execution needs of a captured model, shared with executions in flight.
#[derive(Debug)]
pub(super) struct Replay {
    /// What each execution queues (`aclmdlRIUpdate` replaces it: `model_tasks`).
    pub(super) tasks: Mutex<Arc<[(usize, Captured)]>>,
    /// The model's streams (C handles), the origin's first: its own, one for each captured
    /// stream, or a built model's bound streams.
    pub(super) streams: Vec<usize>,
    /// Whether the model made `streams` (a capture) and destroys them with itself.
    owned: bool,
    /// A built model's: recorded by stream `i + 1` after its tasks, waited on by stream 0
    /// (every bound stream runs at each execution; the origin finishes last).
    pub(super) joins: Vec<RawEvent>,
    /// Recorded by an execution on its stream before the run, waited on by the origin's model
    /// stream; and recorded by that stream after the run, waited on by the execution's.
    pub(super) start: RawEvent,
    pub(super) done: RawEvent,
    /// The caller's events recorded in the capture and the model's own that stand for them.
    pub(super) events: Vec<(usize, RawEvent)>,
    /// Executions queued and not yet finished.
    pub(super) running: Arc<AtomicU32>,
    /// Per stream: it starts with each execution (a built model's
    /// `ACL_MODEL_STREAM_FLAG_HEAD` streams; every captured one).
    pub(super) heads: Vec<bool>,
    /// The label lists of its `aclrtSwitchLabelByIndex` tasks (`Control::SwitchIndex::list`).
    pub(super) lists: Vec<Vec<usize>>,
    /// Its tasks branch (`flow`): each execution interprets them, one at a time.
    pub(super) branches: bool,
    pub(super) runs: Runs,
    /// Held while an execution queues its tasks: two executions at once on two streams
    /// queue one after the other, so that each wait on a model event pairs with its own
    /// execution's record.
    pub(super) issuing: Mutex<()>,
}

impl Replay {
    /// Whether it replays on streams of its own (a captured model).
    pub(super) fn owned(&self) -> bool {
        self.owned
    }

    /// Whether an execution is queued and not finished.
    pub(super) fn in_flight(&self) -> bool {
        self.running.load(Ordering::Acquire) != 0
    }

    /// The tasks an execution queues now.
    pub(super) fn tasks(&self) -> Arc<[(usize, Captured)]> {
        Arc::clone(&self.tasks.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What `model_tasks` keeps per stored task of a model.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct TaskMeta {
    /// Its `aclmdlRITask` handle (0: none made yet).
    pub(super) handle: usize,
    /// `aclmdlRITaskDisable`d (also set with `cleaned`: no execution runs it again).
    pub(super) disabled: bool,
    /// Dropped by `aclrtPersistentTaskClean` (`persistent_clean`): no longer one of its
    /// stream's tasks, so the lists of a stream's tasks (`aclmdlRIDebugPrint`,
    /// `aclmdlRIDebugJsonPrint`, `aclmdlRIGetTasksByStream`) leave it out.
    pub(super) cleaned: bool,
}

impl Model {
    /// Whether stored task `n` was dropped by `aclrtPersistentTaskClean`.
    pub(super) fn cleaned(&self, n: usize) -> bool {
        self.task_meta.get(n).is_some_and(|t| t.cleaned)
    }
}

/// A condition (`aclmdlRICondHandle`) (`cond`).
#[derive(Debug)]
pub(super) struct CondEntry {
    /// The model it was made in.
    pub(super) model: usize,
    /// Its word (device memory the runtime allocated).
    pub(super) addr: usize,
    /// `ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT`: the value each execution starts with.
    pub(super) default: Option<u64>,
    /// Its task's type and sub-models, once `aclmdlRIAddCondTask` used it.
    pub(super) task: Option<(CondKind, Vec<usize>)>,
}

/// A model runtime instance.
#[derive(Debug)]
pub(super) struct Model {
    /// Its id (`aclmdlRIGetId`, the debug dump's; unique among its device's live models, not
    /// a key: the handle is).
    pub(super) number: u32,
    /// Its `aclmdlRI` handle, its one name (given at the capture's begin, as CANN's
    /// `aclmdlRICaptureGetInfo` names the model during the capture).
    pub(super) handle: usize,
    pub(super) device: u32,
    /// `aclmdlRISetName`'s bytes as the caller gave them (no NUL).
    pub(super) name: Vec<u8>,
    /// The captured or bound streams (C handles), the origin first (0: a bound stream since
    /// unbound).
    pub(super) streams: Vec<usize>,
    pub(super) tasks: Vec<(usize, Captured)>,
    /// Per task of `tasks`: its `aclmdlRITask` handle (0: none asked for yet) and whether
    /// `aclmdlRITaskDisable` disabled it (`model_tasks`).
    pub(super) task_meta: Vec<TaskMeta>,
    /// A task was changed or disabled since the last `aclmdlRIUpdate`.
    pub(super) updating: bool,
    pub(super) phase: Phase,
    /// Per stream: it starts with each execution (`Replay::heads`).
    pub(super) heads: Vec<bool>,
    /// The label lists of its switch tasks, as they were when each was stored.
    pub(super) lists: Vec<Vec<usize>>,
    /// Its task groups: the indices of their tasks (`task_group`).
    pub(super) groups: Vec<Vec<usize>>,
    /// `aclmdlRIDestroyRegisterCallback`'s, in registration order.
    pub(super) on_destroy: Vec<(unsafe extern "C" fn(*mut c_void), usize)>,
    /// The stream of `aclmdlRIExecute` (made at its first call).
    pub(super) exec_stream: Option<usize>,
    /// A destroy is waiting for its executions: no new one starts.
    pub(super) destroying: bool,
    /// A sub-model of a conditional task (`cond`): it runs only in its parent's executions.
    pub(super) sub: bool,
    /// Task index (of `tasks`) → the information callers attached to it (`task_info`).
    pub(super) task_info: HashMap<usize, TaskInfo>,
}

impl Model {
    /// A new model of `device` in `phase`, its streams `streams`.
    pub(super) fn new(
        number: u32,
        handle: usize,
        device: u32,
        streams: Vec<usize>,
        phase: Phase,
    ) -> Self {
        Model {
            number,
            handle,
            device,
            name: Vec::new(),
            heads: vec![true; streams.len()],
            lists: Vec::new(),
            groups: Vec::new(),
            streams,
            tasks: Vec::new(),
            task_meta: Vec::new(),
            updating: false,
            phase,
            on_destroy: Vec::new(),
            exec_stream: None,
            destroying: false,
            sub: false,
            task_info: HashMap::new(),
        }
    }
}

/// The session's models by their `aclmdlRI` handles. A model whose capture ends is taken out
/// while it is built (the lock dropped) and put back: its handle stays live meanwhile, and
/// a call that looks it up then finds no model (107017, as for a dead handle).
///
/// Each model has an id of its device's model id pool (`aclmdlRIGetId`): CANN's `Model::Setup`
/// takes one from the driver (`ModelIdAlloc`) and the model's teardown gives it back
/// (`ModelIdFree`; hicann/runtime `src/runtime/feature/model/model.cc`), so an id is unique
/// among the device's live models and comes back after a destroy (`lowest_free_ids`).
#[derive(Debug)]
pub(super) struct Models(
    pub(super) Handles<Option<Model>>,
    HashMap<u32, LowestFreeIds>,
);

impl Models {
    /// No model yet, in handle table `handles`.
    pub(super) fn new(handles: Handles<Option<Model>>) -> Self {
        Models(handles, HashMap::new())
    }

    /// A new model id of `device`.
    pub(super) fn take_id(&mut self, device: u32) -> u32 {
        self.1.entry(device).or_default().take()
    }

    /// Model `m` is gone: its id is free.
    fn free_id(&mut self, m: &Model) {
        if let Some(p) = self.1.get_mut(&m.device) {
            p.give_back(m.number);
        }
    }

    /// The live model `handle`, unless taken out.
    pub(super) fn get(&self, handle: usize) -> Option<&Model> {
        self.0.get(handle)?.as_ref()
    }

    pub(super) fn get_mut(&mut self, handle: usize) -> Option<&mut Model> {
        self.0.get_mut(handle)?.as_mut()
    }

    /// Whether `handle` is a live model handle (its model maybe taken out).
    pub(super) fn contains(&self, handle: usize) -> bool {
        self.0.get(handle).is_some()
    }

    /// Takes model `handle` out, its handle live.
    pub(super) fn take(&mut self, handle: usize) -> Option<Model> {
        self.0.get_mut(handle)?.take()
    }

    /// Puts taken model `m` back under its handle.
    pub(super) fn put(&mut self, m: Model) {
        if let Some(slot) = self.0.get_mut(m.handle) {
            *slot = Some(m);
        }
    }

    /// Removes model `handle`, the handle dead from now on; a model taken out stays (its
    /// taker puts it back or ends it, [`end_taken`](Self::end_taken)).
    pub(super) fn remove(&mut self, handle: usize) -> Option<Model> {
        self.get(handle)?;
        let m = self.0.remove(handle).flatten()?;
        self.free_id(&m);
        Some(m)
    }

    /// The handle of taken model `m` dies (a capture whose end failed).
    pub(super) fn end_taken(&mut self, m: &Model) {
        if matches!(self.0.get(m.handle), Some(None)) {
            self.0.remove(m.handle);
            self.free_id(m);
        }
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Model> + '_ {
        self.0.values().flatten()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Model> + '_ {
        self.0.values_mut().flatten()
    }
}

pub(super) fn bad_model(handle: usize) -> CallError {
    crate::handle::not_live("modelRI", "a model runtime instance", handle)
}

impl Runtime {
    /// 107017 unless `handle` is a live model handle (for a call that checks it before its
    /// other arguments).
    pub(super) fn model_live(&self, handle: usize) -> Result<(), CallError> {
        if self.captures.lock().models.contains(handle) {
            return Ok(());
        }
        Err(bad_model(handle))
    }

    /// The model's own streams and events, for [`Phase::Ready`]: a capture's streams are made
    /// now (`owned`), a built model's are its bound streams.
    pub(super) fn build(&self, model: &Model, owned: bool) -> Result<Replay, CallError> {
        // An Ex event's wait waits for the record latest when it was queued: each replay's
        // waits pair with that replay's records (`ACL_EVENT_SYNC`: it has waits).
        let spec = EventSpec::ex_with_flag(1, self.backend.soc())
            .map_err(|e| CallError::new(e, "internal error: no Ex event with ACL_EVENT_SYNC"))?;
        let event = || {
            self.backend
                .event_create(model.device, spec)
                .map_err(CallError::backend)
        };
        let branches = self.program_of(model)?.branches();
        let start = event()?;
        let done = event().inspect_err(|_| {
            let _ = self.backend.event_destroy(start);
        })?;
        let mut replay = Replay {
            tasks: Mutex::new(model.tasks.clone().into()),
            streams: if owned {
                Vec::new()
            } else {
                model.streams.clone()
            },
            owned,
            joins: Vec::new(),
            start,
            done,
            events: Vec::new(),
            running: Arc::new(AtomicU32::new(0)),
            issuing: Mutex::new(()),
            heads: model.heads.clone(),
            lists: model.lists.clone(),
            branches,
            runs: Runs::default(),
        };
        let made = (|| {
            if owned {
                for _ in 0..model.streams.len() {
                    replay.streams.push(self.create_stream()?);
                }
            } else {
                for _ in 1..model.streams.len() {
                    replay.joins.push(event()?);
                }
            }
            for (_, t) in &model.tasks {
                if let Captured::EventRecord(e) = *t
                    && !replay.events.iter().any(|(u, _)| *u == e)
                {
                    replay.events.push((e, event()?));
                }
            }
            Ok(())
        })();
        if let Err(e) = made {
            self.drop_replay(&replay);
            return Err(e);
        }
        Ok(replay)
    }

    /// Runs `f` on live model `handle`.
    pub(super) fn with_model<R>(
        &self,
        handle: usize,
        f: impl FnOnce(&mut Model) -> Result<R, CallError>,
    ) -> Result<R, CallError> {
        let mut st = self.captures.lock();
        let m = st.models.get_mut(handle).ok_or_else(|| bad_model(handle))?;
        f(m)
    }
}

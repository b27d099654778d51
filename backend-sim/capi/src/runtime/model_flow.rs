//! The control tasks of a model being built (`aclrtSetLabel`, `aclrtSwitchLabelByIndex`,
//! `aclrtSwitchStream`, `aclrtActiveStream`), stored with its other tasks, and the execution
//! of a model whose tasks branch: a driver task on the execution's stream interprets the
//! model's program (`flow`), queueing each block of tasks on the model's streams through the
//! replay's own task queueing (`capture`).
//!
//! CANN's checks, in its order (hicann/runtime `src/runtime/api/impl/api_error.cc`
//! `StreamSwitchEx`/`StreamActive`/`LabelSet`/`LabelSwitchByIndex`, `api_impl.cc` same
//! names, `src/runtime/core/src/launch/label_starsv2.cc` `CondLabelSet`,
//! `src/acl/aclrt_impl/label.cpp`, `stream.cpp`):
//!
//! - NULL pointers or handles: 100000 (the ACL layer's); a condition or data type out of
//!   range: 107000;
//! - a stream (the task's, the switched-to or activated one) not bound to a model: 107005
//!   (`RT_ERROR_STREAM_MODEL`); the simulator takes control tasks only on streams bound to a
//!   model being built (`aclmdlRIBindStream`): a capturing stream is none (107005), and the
//!   target stream must be of the same model (107005);
//! - `aclrtSetLabel` of a label made on another device: 507031 (`ACL_ERROR_RT_LABEL_CONTEXT`);
//!   of a label set on a stream of another model, or on another stream, or
//!   set already, or in no list yet: 507000 (`ACL_ERROR_RT_INTERNAL_ERROR`, CANN's
//!   `RT_ERROR_LABEL_MODEL`/`_STREAM`/`_SET`/`_PHY_ADDR_NULL`);
//! - `aclrtSwitchLabelByIndex`'s `maxValue` 0 or above the list's length: 107000 (the
//!   simulator's check: CANN's device would read past the list); a label of its list set on
//!   no stream of the model when the build ends: `aclmdlRIBuildEnd` fails with 507000
//!   (`ApiImpl::LabelListCpy`'s checks).

use std::sync::Arc;

use acl_notify_core::{
    Backend as _, BackendError as _, Error, RawStream, StreamControl as _, StreamOps, SyncWait,
};
use acl_notify_sim::mem::indirect::{Reader, Word};

use super::Runtime;
use super::capture::Captured;
use super::flow::{self, Control, Program};
use super::labels::bad_label;
use super::model::{Model, Phase, Replay};
use crate::errmsg::{CallError, param};

fn internal(why: String) -> CallError {
    CallError::new(Error::InternalError, why)
}

impl Runtime {
    /// The model being built that `stream` is bound to, and the stream's index in it, for
    /// control task `call`: 107005 for any other stream.
    fn model_stream(&self, stream: usize, call: &str) -> Result<(usize, usize), CallError> {
        self.stream(stream)?;
        let st = self.captures.lock();
        match st.streams.get(&stream) {
            Some(c) if self.building_in(&st, c.model) => Ok((c.model, c.index)),
            Some(c) => Err(CallError::new(
                Error::StreamModel,
                format!(
                    "{call}: stream {stream:#x} captures model {:#x} (stream capture takes no \
                     control task: bind the stream to a model with aclmdlRIBindStream)",
                    c.model
                ),
            )),
            None => Err(CallError::new(
                Error::StreamModel,
                format!(
                    "{call}: stream {stream:#x} is not bound to a model being built \
                     (aclmdlRIBindStream)"
                ),
            )),
        }
    }

    /// 107005 unless `other` is a stream of model `model` (bound while it is built).
    fn same_model(
        &self,
        model: usize,
        other: usize,
        what: &str,
        call: &str,
    ) -> Result<(), CallError> {
        self.stream(other)?;
        let st = self.captures.lock();
        match st.streams.get(&other) {
            Some(c) if c.model == model => Ok(()),
            _ => Err(CallError::new(
                Error::StreamModel,
                format!(
                    "{call}: {what} {other:#x} is not bound to model {model:#x}, the model of the \
                     task's stream"
                ),
            )),
        }
    }

    /// `aclrtSetLabel`.
    pub(crate) fn set_label(&self, label: usize, stream: usize) -> Result<(), CallError> {
        let slot = self
            .captures
            .labels
            .get(label)
            .ok_or_else(|| bad_label(label))?;
        let (model, _) = self.model_stream(stream, "aclrtSetLabel")?;
        let device = self.stream(stream)?.device;
        if slot.device != device {
            // `ApiImpl::LabelSet`: RT_ERROR_LABEL_CONTEXT.
            return Err(CallError::new(
                Error::LabelContext,
                format!(
                    "label {label:#x} was made on device {}, stream {stream:#x} is of device \
                     {device}",
                    slot.device
                ),
            ));
        }
        if slot.model != 0 && slot.model != model {
            return Err(internal(format!(
                "label {label:#x} is set on a stream of model {:#x}, stream {stream:#x} is of model \
                 {model:#x}: a label and its stream are of one model",
                slot.model
            )));
        }
        if slot.stream != 0 {
            return Err(internal(format!(
                "label {label:#x} is set already (on stream {:#x}): a label is set once",
                slot.stream
            )));
        }
        if !slot.listed {
            return Err(internal(format!(
                "label {label:#x} is in no label list: create the list (aclrtCreateLabelList) \
                 before setting its labels"
            )));
        }
        if !self.capture(stream, Captured::Control(Control::Label(label)))? {
            return Err(internal(format!(
                "stream {stream:#x} left its model meanwhile"
            )));
        }
        self.captures.labels.update(label, |s| {
            s.model = model;
            s.stream = stream;
        });
        Ok(())
    }

    /// `aclrtSwitchLabelByIndex`.
    pub(crate) fn switch_label_by_index(
        &self,
        ptr: usize,
        max: u32,
        list: usize,
        stream: usize,
    ) -> Result<(), CallError> {
        let (model, _) = self.model_stream(stream, "aclrtSwitchLabelByIndex")?;
        let labels = self.label_list(list)?;
        if max == 0 || max as usize > labels.len() {
            return Err(param(format!(
                "maxValue {max}: 1 to the list's {} labels",
                labels.len()
            )));
        }
        self.backend
            .memset_check(ptr, 4, 4)
            .map_err(|e| CallError::backend(e).in_context("the index at ptr"))?;
        let index = {
            let mut st = self.captures.lock();
            let m = st
                .models
                .get_mut(model)
                .ok_or_else(|| internal(format!("model {model:#x} went meanwhile")))?;
            m.lists.push(labels);
            m.lists.len() - 1
        };
        let c = Control::SwitchIndex {
            ptr,
            max,
            list: index,
        };
        self.store_control(stream, c)
    }

    /// `aclrtSwitchStream` (`falseStream` must be NULL: reserved).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn switch_stream(
        &self,
        left: usize,
        cond: i32,
        right: usize,
        data_type: i32,
        target: usize,
        stream: usize,
    ) -> Result<(), CallError> {
        self.stream_tasks_supported("aclrtSwitchStream")?;
        let cond = flow::Cond::from_c(cond)?;
        let wide = match data_type {
            0 => false,
            1 => true,
            t => {
                return Err(param(format!(
                    "dataType {t}: ACL_RT_SWITCH_INT32 (0) or ACL_RT_SWITCH_INT64 (1)"
                )));
            }
        };
        let (model, _) = self.model_stream(stream, "aclrtSwitchStream")?;
        self.same_model(model, target, "trueStream", "aclrtSwitchStream")?;
        let size = if wide { 8 } else { 4 };
        for (p, what) in [(left, "leftValue"), (right, "rightValue")] {
            self.backend
                .memset_check(p, size, size)
                .map_err(|e| CallError::backend(e).in_context(what))?;
        }
        let c = Control::SwitchStream(flow::Switch {
            left,
            right,
            cond,
            wide,
            target,
        });
        self.store_control(stream, c)
    }

    /// `aclrtActiveStream`.
    pub(crate) fn active_stream(&self, active: usize, stream: usize) -> Result<(), CallError> {
        self.stream_tasks_supported("aclrtActiveStream")?;
        let (model, _) = self.model_stream(stream, "aclrtActiveStream")?;
        self.same_model(model, active, "activeStream", "aclrtActiveStream")?;
        self.store_control(stream, Control::Active(active))
    }

    /// 207000 on Atlas A3 (`Ascend910_93`): the API pages of `aclrtSwitchStream` and
    /// `aclrtActiveStream` list it as unsupported.
    fn stream_tasks_supported(&self, call: &str) -> Result<(), CallError> {
        let soc = self.backend.soc();
        if soc == acl_notify_core::Soc::Ascend910_93 {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "{call} is not supported on {} (CANN's API page)",
                    soc.name()
                ),
            ));
        }
        Ok(())
    }

    fn store_control(&self, stream: usize, c: Control) -> Result<(), CallError> {
        if self.capture(stream, Captured::Control(c))? {
            Ok(())
        } else {
            Err(internal(format!(
                "stream {stream:#x} left its model meanwhile"
            )))
        }
    }

    /// Model `m`'s program (`capture`'s build checks it and asks whether it branches): its
    /// own frame, its conditional tasks' sub-models left out.
    pub(super) fn program_of(&self, m: &Model) -> Result<Program, CallError> {
        let f = frame(&m.tasks, &m.heads, &m.lists, &m.streams);
        // (Called under the captures' lock by a build's end: nothing is looked up.)
        Program::new(&[f], &|_| {
            Ok(flow::CondSpec {
                addr: 0,
                kind: flow::CondKind::If,
                frames: Vec::new(),
            })
        })
    }

    /// `aclmdlRIExecuteAsync` of a model whose tasks branch: queues on `exec` the driver
    /// that runs the execution (`flow::drive`) when the stream reaches it.
    pub(super) fn execute_flow(
        &self,
        replay: &Arc<Replay>,
        exec: RawStream,
    ) -> Result<(), CallError> {
        let replay = Arc::clone(replay);
        let no = replay.runs.number();
        let task = Box::new(move |ctx: &acl_notify_sim::stream::TaskCtx| {
            let Some(rt) = crate::session::existing_runtime() else {
                return Err(
                    internal("the session ended before the execution ran".into()).into_sim(),
                );
            };
            rt.drive(&replay, no, &|| ctx.is_cancelled())
                .map_err(CallError::into_sim)
        });
        self.backend
            .run_async(exec, task)
            .map_err(CallError::backend)
    }

    /// One execution of `replay`, on the driver's thread.
    fn drive(
        &self,
        replay: &Arc<Replay>,
        no: u64,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<(), CallError> {
        let mut runs: Vec<FrameRun> = Vec::new();
        let mut frames: Vec<flow::Frame> = Vec::new();
        let program = {
            let st = self.captures.lock();
            // Frame 0 the model, then the sub-models of its conditional tasks (and theirs),
            // each added when a task names its condition.
            let add = |r: &Arc<Replay>,
                       runs: &mut Vec<FrameRun>,
                       frames: &mut Vec<flow::Frame>|
             -> Result<usize, CallError> {
                let mut raws = Vec::with_capacity(r.streams.len());
                for &s in &r.streams {
                    raws.push(self.stream(s)?.raw);
                }
                let tasks = r.tasks();
                frames.push(frame(&tasks, &r.heads, &r.lists, &r.streams));
                runs.push(FrameRun {
                    replay: Arc::clone(r),
                    raws,
                    tasks,
                });
                Ok(runs.len() - 1)
            };
            add(replay, &mut runs, &mut frames)?;
            let mut at = 0;
            let mut specs = std::collections::HashMap::new();
            while at < frames.len() {
                let conds: Vec<usize> = frames[at]
                    .tasks
                    .iter()
                    .filter_map(|t| match t.1 {
                        Some(Control::Cond(h)) => Some(h),
                        _ => None,
                    })
                    .collect();
                for h in conds {
                    let spec = self.cond_spec(&st, h, &mut |r| add(r, &mut runs, &mut frames))?;
                    specs.insert(h, spec);
                }
                at += 1;
            }
            let specs = std::cell::RefCell::new(specs);
            Program::new(&frames, &|h| {
                specs.borrow_mut().remove(&h).ok_or_else(|| {
                    internal(format!("condition {h:#x} named by two conditional tasks"))
                })
            })?
        };
        let env = Queues {
            rt: self,
            runs: &runs,
        };
        let run = flow::drive(&program, &replay.runs, no, &env, cancelled);
        // Every task queued has run (each block's read came after it): a task's failure is
        // stored on its model stream; it is the execution's.
        let mut first = run.err();
        for &raw in runs.iter().flat_map(|r| &r.raws) {
            if let Err(e) = self
                .backend
                .synchronize(raw, SyncWait::AtMost(Default::default()))
                && e.kind() != Error::StreamSyncTimeout
            {
                first.get_or_insert(CallError::backend(e));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// `aclmdlRIAbort`: the model's executions stop. One whose tasks branch stops at its
    /// streams' next control task or end (the blocks already queued run); its stream's error
    /// is 507023 (`ACL_ERROR_RT_MODEL_ABORT_NORMAL`). A model whose tasks do not branch queued
    /// them all when it was executed: its streams' queued tasks are dropped and the running
    /// ones cancelled (CANN's `Context::ModelAbortById` aborts the model's tasks on the device,
    /// `OP_ABORT_MODEL`, whatever they are), so each execution queued and not finished fails
    /// on its stream with 107023 (`ACL_ERROR_RT_STREAM_ABORT`: its done record was dropped);
    /// the executions queued after the call run. A model with no execution queued: nothing to
    /// do. A sub-model of a conditional task: 207000 (`ApiErrorDecorator::ModelAbort`).
    pub(crate) fn abort_model(&self, handle: usize) -> Result<(), CallError> {
        let replay = {
            let st = self.captures.lock();
            let m = st
                .models
                .get(handle)
                .ok_or_else(|| super::model::bad_model(handle))?;
            super::cond::refuse_sub(m, "aclmdlRIAbort")?;
            match &m.phase {
                Phase::Ready(r) => Arc::clone(r),
                _ => {
                    return Err(param(format!(
                        "model {handle:#x} is not ready to run (its capture or build has not \
                         ended)"
                    )));
                }
            }
        };
        if !replay.in_flight() {
            return Ok(());
        }
        if replay.branches {
            replay.runs.abort();
            return Ok(());
        }
        // One execution's queueing at a time (`issue`): none is half queued when this runs.
        let _queueing = replay
            .issuing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for &s in &replay.streams {
            if let Ok(e) = self.stream(s) {
                let _ = self.backend.abort(e.raw);
            }
        }
        Ok(())
    }
}

/// A model's tasks as a frame of a program.
fn frame(
    tasks: &[(usize, Captured)],
    heads: &[bool],
    lists: &[Vec<usize>],
    streams: &[usize],
) -> flow::Frame {
    flow::Frame {
        tasks: tasks
            .iter()
            .map(|&(i, t)| match t {
                Captured::Control(c) => (i, Some(c)),
                _ => (i, None),
            })
            .collect(),
        heads: heads.to_vec(),
        lists: lists.to_vec(),
        streams: streams.to_vec(),
    }
}

/// What an execution runs of one model: its replay, its streams, its tasks now.
struct FrameRun {
    replay: Arc<Replay>,
    raws: Vec<RawStream>,
    tasks: Arc<[(usize, Captured)]>,
}

/// The driver's queues: the models' streams, their tasks as this execution runs them.
struct Queues<'a> {
    rt: &'a Runtime,
    runs: &'a [FrameRun],
}

impl flow::Env for Queues<'_> {
    fn queue_task(&self, frame: usize, stream: usize, task: usize) -> Result<(), CallError> {
        let r = &self.runs[frame];
        self.rt
            .issue_one(&r.replay, r.raws[stream], r.tasks[task].1)
    }

    fn queue_read(
        &self,
        frame: usize,
        stream: usize,
        words: Vec<(Word, &'static str)>,
        then: Reader,
    ) -> Result<(), CallError> {
        self.rt
            .backend
            .read_async(words, then, self.runs[frame].raws[stream])
            .map_err(CallError::backend)
    }

    fn stop(&self) {
        for &raw in self.runs.iter().flat_map(|r| &r.raws) {
            let _ = self.rt.backend.abort(raw);
        }
    }
}

//! Conditional tasks of captured models (`aclmdlRICondHandleCreate`,
//! `aclmdlRICondHandleGetCondPtr`, `aclmdlRIAddCondTask`) and the capture of their
//! sub-models (`aclmdlRICaptureToModelRIBegin`): a condition is a 64-bit word of device
//! memory the runtime allocates with its handle; a conditional task, stored in the capture of
//! the condition's model, makes that many empty sub-models, each captured later on a stream
//! of its own; when an execution of the model reaches the task, the task reads the word
//! **when it runs** and runs the sub-model it picks (if: not 0 → the first, 0 → the second if
//! any; while: the first, again and again while the word is not 0; switch: the word's index,
//! none past the last) before its stream goes on (`flow`, `model_flow`).
//!
//! CANN's rules followed (hicann/runtime `src/acl/aclrt_impl/model_ri.cpp`,
//! `src/runtime/api/api_c_standard_soc.cc`, `src/runtime/feature/aclgraph/
//! api_error_aclgraph.cc`, `v100/api_impl_aclgraph.cc` `ModelCondHandleCreate`/
//! `StreamAddCondTaskParasCheck`, `cond_handle.cc`, `capture_model.cc`
//! `InitAllSubCaptureModelCondTaskByDefValue`, `context_aclgraph.cc` `StreamBeginCapture`/
//! `StreamEndCapture`/`CreateSubCaptureModels`, `src/runtime/api/impl/api_error.cc`,
//! `docs/zh/api_ref/15_model_running_instance__management.md`):
//!
//! - the ACL layer's NULL checks: 100000; a flag above `ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT`
//!   (1): 107000; a model that is no captured one (a built model): 207000; one not capturing:
//!   107000; a SoC without conditional tasks (only Ascend 950, Atlas A3 and A2 have them):
//!   207000. The word is 0 when made; with the flag, each execution's call sets it to
//!   `defaultLaunchValue` (its own and its sub-models' conditions);
//! - `aclmdlRIAddCondTask`: a type above 2 or `flags` not 0: 107000; a NULL handle or model
//!   array: 107000; a condition used by a task already: 107000; a stream not capturing:
//!   107029; a condition of another model than the stream's: 107000; a stream that joined
//!   the capture through an event: 207000; an if with other than 1 or 2 sub-models, a while
//!   with other than 1, a switch with none: 107000 (the simulator's own: a switch of more
//!   sub-models than the process can hold model handles for, 207005, before anything is made);
//! - `aclmdlRICaptureToModelRIBegin`: a model that is not such a sub-model: 107000; one
//!   captured already: 107026; a stream capturing already: 107027;
//! - `aclmdlRICaptureEnd` of a model a sub-model of which is not captured (or still
//!   capturing): 107045, the capture dropped; destroying, executing, aborting or updating a
//!   sub-model: 207000 (it goes with its model).
//!
//! The default is written by the `aclmdlRIExecute[Async]` call itself, a synchronous copy
//! as CANN's (`Runtime::write_cond_defaults`): a value the host writes after the call is the
//! one the execution reads, and an execution queued earlier that has not read its word yet
//! reads the new default.

use acl_notify_core::{Backend as _, Error, Soc};

use super::Runtime;
use super::capture::{Captured, State};
use super::flow::{CondKind, CondSpec, Control};
use super::model::{CondEntry, Model, Phase, Replay, bad_model};
use crate::errmsg::{CallError, param};
use crate::handle::MAX_HANDLES;

fn bad_cond(handle: usize) -> CallError {
    crate::handle::not_live("handle", "a condition handle", handle)
}

/// 207000 for a sub-model (`ApiErrorDecorator::ModelDestroy`, `ModelExecute`, `ModelAbort`,
/// `ModelUpdate`, ...: "sub ACL Graph does not support ...").
pub(super) fn refuse_sub(m: &Model, call: &str) -> Result<(), CallError> {
    if m.sub {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{call}: model {:#x} is a sub-model of a conditional task (aclmdlRIAddCondTask): \
                 it runs, and goes, with the model that holds the task",
                m.handle
            ),
        ));
    }
    Ok(())
}

impl Runtime {
    /// 207000 on a SoC without conditional tasks (`CheckCaptureModelSupportCondOp`; the API
    /// pages: Ascend 950PR/DT, Atlas A3 and A2).
    fn cond_supported(&self, call: &str) -> Result<(), CallError> {
        let soc = self.backend.soc();
        if matches!(
            soc,
            Soc::Ascend950PR | Soc::Ascend950DT | Soc::Ascend910_93 | Soc::Ascend910B
        ) {
            return Ok(());
        }
        Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{call}: {} has no conditional tasks (CANN's API page)",
                soc.name()
            ),
        ))
    }

    /// `aclmdlRICondHandleCreate`: a new condition of model `handle` (capturing).
    pub(crate) fn cond_create(
        &self,
        handle: usize,
        default: u32,
        flag: u32,
    ) -> Result<usize, CallError> {
        let call = "aclmdlRICondHandleCreate";
        if flag > 1 {
            return Err(param(format!(
                "flag {flag}: 0 or ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT (1)"
            )));
        }
        let device = {
            let st = self.captures.lock();
            let m = st.models.get(handle).ok_or_else(|| bad_model(handle))?;
            match &m.phase {
                Phase::Capturing { .. } => {}
                Phase::Building { .. } => return Err(not_graph(handle, call)),
                Phase::Ready(r) if !r.owned() => return Err(not_graph(handle, call)),
                Phase::Ready(_) | Phase::Empty => {
                    return Err(param(format!(
                        "model {handle:#x} is not capturing: a condition is made during its \
                         capture"
                    )));
                }
            }
            m.device
        };
        self.cond_supported(call)?;
        let addr = self
            .backend
            .malloc_rounded(device, 8, 0, acl_notify_sim::mem::Rounding::Padded)
            .map_err(CallError::backend)?;
        // `CondHandle::Setup`: the word starts at 0.
        let set = self
            .backend
            .memset(addr, 8, 0, 8)
            .map_err(CallError::backend);
        let made = set.and_then(|()| {
            self.captures.lock().conds.insert(CondEntry {
                model: handle,
                addr,
                default: (flag == 1).then_some(u64::from(default)),
                task: None,
            })
        });
        if made.is_err() {
            let _ = self.backend.free(addr);
        }
        made
    }

    /// `aclmdlRICondHandleGetCondPtr`: the condition's word.
    pub(crate) fn cond_ptr(&self, handle: usize) -> Result<usize, CallError> {
        let addr = self.captures.lock().conds.get(handle).map(|c| c.addr);
        let addr = addr.ok_or_else(|| bad_cond(handle))?;
        self.cond_supported("aclmdlRICondHandleGetCondPtr")?;
        Ok(addr)
    }

    /// `aclmdlRIAddCondTask`: stores the conditional task on capturing `stream` and makes
    /// its `size` sub-models (their handles returned).
    pub(crate) fn add_cond_task(
        &self,
        handle: usize,
        kind: u32,
        size: u32,
        array_null: bool,
        stream: usize,
        flags: u32,
    ) -> Result<Vec<usize>, CallError> {
        self.stream(stream)?;
        let kind = CondKind::from_c(kind)?;
        if flags != 0 {
            return Err(param(format!("flags {flags}: reserved, must be 0")));
        }
        if handle == 0 {
            return Err(param("params.handle is NULL"));
        }
        if array_null {
            return Err(param("params.modelRIArray is NULL"));
        }
        let mut st = self.captures.lock();
        let c = st.conds.get(handle).ok_or_else(|| bad_cond(handle))?;
        if c.task.is_some() {
            return Err(used(handle));
        }
        let cond_model = c.model;
        let capture = self.capturing(&st, stream)?;
        self.cond_supported("aclmdlRIAddCondTask")?;
        if capture.model != cond_model {
            return Err(param(format!(
                "condition {handle:#x} was made in model {cond_model:#x}, stream {stream:#x} \
                 captures model {:#x}",
                capture.model
            )));
        }
        capture.on_origin(
            stream,
            Error::FeatureNotSupport,
            "a conditional task is added",
        )?;
        kind.check_size(size)?;
        let device = st
            .models
            .get(capture.model)
            .map(|m| m.device)
            .ok_or_else(|| bad_model(handle))?;
        // Each sub-model takes a model handle: more than the process can hold is refused
        // before anything is made (a switch's size is any u32, CANN's check only refuses 0).
        if size as usize > MAX_HANDLES {
            return Err(CallError::new(
                Error::ResourceAllocFail,
                format!(
                    "params.size {size}: a conditional task of more sub-models than the \
                     process can hold model handles for ({MAX_HANDLES})"
                ),
            ));
        }
        let mut subs = Vec::new();
        for _ in 0..size {
            match st.add_model(device, Vec::new(), Phase::Empty) {
                Ok(m) => {
                    m.sub = true;
                    subs.push(m.handle);
                }
                Err(e) => {
                    for &h in &subs {
                        st.models.remove(h);
                    }
                    return Err(e);
                }
            }
        }
        // Stored like any captured task (a group begun on the stream takes it in).
        let m = st
            .models
            .get_mut(capture.model)
            .ok_or_else(|| bad_model(handle))?;
        m.tasks.push((0, Captured::Control(Control::Cond(handle))));
        let n = m.tasks.len() - 1;
        if let Some((_, g)) = st.grouping.get_mut(&stream) {
            g.push(n);
        }
        if let Some(c) = st.conds.get_mut(handle) {
            c.task = Some((kind, subs.clone()));
        }
        Ok(subs)
    }

    /// For `capture_begin` into sub-model `h` on `device`: 107000 unless it is an empty
    /// sub-model, 107026 if it was captured already.
    pub(super) fn capturable_sub(st: &State, h: usize, device: u32) -> Result<(), CallError> {
        let m = st.models.get(h).ok_or_else(|| bad_model(h))?;
        if !m.sub {
            return Err(param(format!(
                "model {h:#x} is not a sub-model of a conditional task (aclmdlRIAddCondTask \
                 makes them; aclmdlRICaptureBegin captures into a new model)"
            )));
        }
        if !matches!(m.phase, Phase::Empty) {
            return Err(CallError::new(
                Error::ModelCaptured,
                format!("sub-model {h:#x} is captured already (or capturing)"),
            ));
        }
        if m.device != device {
            return Err(CallError::new(
                Error::StreamContext,
                format!(
                    "sub-model {h:#x} is of device {}, the current device is {device}",
                    m.device
                ),
            ));
        }
        Ok(())
    }

    /// For `capture_end` of model `model`: 107045 unless every sub-model of its conditional
    /// tasks is captured (`CaptureModel::CheckSubModelsIsEndCapture`).
    pub(super) fn subs_ended(st: &State, model: usize) -> Result<(), CallError> {
        for (cond, c) in st.conds.iter().filter(|(_, c)| c.model == model) {
            for &sub in c.task.iter().flat_map(|(_, subs)| subs) {
                let m = st.models.get(sub);
                if !matches!(m.map(|m| &m.phase), Some(Phase::Ready(_))) {
                    let h = m.map_or(0, |m| m.handle);
                    return Err(CallError::new(
                        Error::SubAclgraphIsCapturing,
                        format!(
                            "sub-model {h:#x} of the conditional task of condition {:#x} is \
                             not captured (aclmdlRICaptureToModelRIBegin … aclmdlRICaptureEnd \
                             on a stream of its own first; the capture is dropped)",
                            cond
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// What an execution needs of condition `h`: its word and type, and the frames of its
    /// sub-models as `add` numbers them.
    pub(super) fn cond_spec(
        &self,
        st: &State,
        h: usize,
        add: &mut dyn FnMut(&std::sync::Arc<Replay>) -> Result<usize, CallError>,
    ) -> Result<CondSpec, CallError> {
        let c = st.conds.get(h).ok_or_else(|| bad_cond(h))?;
        let Some((kind, subs)) = &c.task else {
            return Err(CallError::new(
                Error::InternalError,
                format!("internal error: condition {h:#x} has no task"),
            ));
        };
        let mut frames = Vec::with_capacity(subs.len());
        for &sub in subs {
            match st.models.get(sub).map(|m| &m.phase) {
                Some(Phase::Ready(r)) => frames.push(add(r)?),
                _ => {
                    return Err(CallError::new(
                        Error::InternalError,
                        format!("internal error: a sub-model of condition {h:#x} is gone"),
                    ));
                }
            }
        }
        Ok(CondSpec {
            addr: c.addr,
            kind: *kind,
            frames,
        })
    }

    /// `aclmdlRIExecute[Async]` of model `model`: writes the default of each condition with
    /// `ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT` whose task is in the model or in one of its
    /// sub-models (and theirs), at the call, by a synchronous copy as CANN does
    /// (hicann/runtime `capture_model.cc` `PreModelExecute` →
    /// `InitAllSubCaptureModelCondTaskByDefValue`, `cond_handle.cc` `InitCondTaskByDefValue`:
    /// a 64-bit host-to-device copy). A value written after the call, before the execution
    /// runs, is the one its task reads; an execution queued earlier that has not read its
    /// word yet reads the new default (as on CANN).
    pub(super) fn write_cond_defaults(&self, st: &State, model: usize) -> Result<(), CallError> {
        let mut owners = vec![model];
        while let Some(owner) = owners.pop() {
            for c in st.conds.values().filter(|c| c.model == owner) {
                let Some((_, subs)) = &c.task else { continue };
                owners.extend(subs);
                let Some(value) = c.default else { continue };
                let bytes = value.to_le_bytes();
                // SAFETY: `bytes` is a live host array of 8 bytes; the device side (the
                // condition's word, allocated with its handle) is checked by the copy.
                unsafe {
                    self.backend.memcpy(
                        c.addr,
                        8,
                        bytes.as_ptr().addr(),
                        8,
                        acl_notify_sim::mem::MemcpyKind::HostToDevice,
                    )
                }
                .map_err(|e| CallError::backend(e).in_context("a condition's default value"))?;
            }
        }
        Ok(())
    }

    /// Releases model `model`'s conditions: their words, handles and sub-models (and theirs),
    /// at its destroy or when its capture is dropped.
    pub(super) fn forget_conds(&self, model: usize) {
        let mut gone: Vec<Model> = Vec::new();
        let mut words = Vec::new();
        {
            let mut st = self.captures.lock();
            let mut owners = vec![model];
            while let Some(owner) = owners.pop() {
                for c in st.conds.remove_where(|c| c.model == owner) {
                    words.push(c.addr);
                    for sub in c.task.into_iter().flat_map(|(_, s)| s) {
                        self.release_streams(&mut st, sub);
                        if let Some(m) = st.models.remove(sub) {
                            owners.push(sub);
                            gone.push(m);
                        }
                    }
                }
            }
        }
        for m in gone {
            self.forget_task_handles(&m);
            self.tear_down(&m);
        }
        for addr in words {
            let _ = self.backend.free(addr);
        }
    }
}

impl Runtime {
    /// Forgets the conditions of models `gone` (their devices released).
    pub(super) fn drop_conds_of(st: &mut State, gone: &[usize]) {
        st.conds.remove_where(|c| gone.contains(&c.model));
    }
}

fn not_graph(handle: usize, call: &str) -> CallError {
    CallError::new(
        Error::FeatureNotSupport,
        format!("{call}: model {handle:#x} is a built model, not a captured one (ACL Graph)"),
    )
}

fn used(handle: usize) -> CallError {
    param(format!(
        "condition {handle:#x} is used by a conditional task already: make a new one \
         (aclmdlRICondHandleCreate) for another task"
    ))
}

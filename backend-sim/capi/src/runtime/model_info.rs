//! Names, ids, streams and destroy callbacks of model runtime instances (`aclmdlRISetName`,
//! `aclmdlRIGetName`, `aclmdlRIGetId`, `aclmdlRIGetStreams`,
//! `aclmdlRIDestroy[Un]RegisterCallback`): what a model says about itself, kept in its state
//! in `capture` (hicann/runtime `model.cc`, `Model::ModelGetStreams`, the destroy callback
//! set).

use std::ffi::c_void;

use super::Runtime;
use super::model::Phase;
use crate::errmsg::{CallError, param};

impl Runtime {
    /// `aclmdlRISetName`.
    pub(crate) fn model_set_name(&self, handle: usize, name: Vec<u8>) -> Result<(), CallError> {
        self.with_model(handle, |m| {
            m.name = name;
            Ok(())
        })
    }

    /// `aclmdlRIGetName`.
    pub(crate) fn model_name(&self, handle: usize) -> Result<Vec<u8>, CallError> {
        self.with_model(handle, |m| Ok(m.name.clone()))
    }

    /// `aclmdlRIGetId`.
    pub(crate) fn model_number(&self, handle: usize) -> Result<u32, CallError> {
        self.with_model(handle, |m| Ok(m.number))
    }

    /// `aclmdlRIGetStreams`: the model's streams, the origin's first (none while it is being
    /// captured: CANN's model has its capture streams then, which the simulator does not
    /// make before the end).
    pub(crate) fn model_streams(&self, handle: usize) -> Result<Vec<usize>, CallError> {
        // (A built model's are its bound streams, as `Model::ModelGetStreams` lists them.)
        self.with_model(handle, |m| match &m.phase {
            Phase::Ready(r) => Ok(r.streams.iter().copied().filter(|&s| s != 0).collect()),
            Phase::Building { .. } => Ok(m.streams.iter().copied().filter(|&s| s != 0).collect()),
            Phase::Capturing { .. } | Phase::Empty => Ok(Vec::new()),
        })
    }

    /// `aclmdlRIDestroyRegisterCallback`.
    pub(crate) fn model_on_destroy(
        &self,
        handle: usize,
        f: unsafe extern "C" fn(*mut c_void),
        data: usize,
    ) -> Result<(), CallError> {
        self.with_model(handle, |m| {
            m.on_destroy.push((f, data));
            Ok(())
        })
    }

    /// `aclmdlRIDestroyUnregisterCallback`: 107000 if `f` is not registered.
    pub(crate) fn model_forget_on_destroy(
        &self,
        handle: usize,
        f: unsafe extern "C" fn(*mut c_void),
    ) -> Result<(), CallError> {
        self.with_model(handle, |m| {
            let before = m.on_destroy.len();
            m.on_destroy.retain(|&(g, _)| !std::ptr::fn_addr_eq(g, f));
            if m.on_destroy.len() == before {
                return Err(param(format!(
                    "the function was not registered for model {handle:#x}'s destroy"
                )));
            }
            Ok(())
        })
    }
}

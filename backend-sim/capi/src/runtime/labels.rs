//! Labels and label lists (`aclrtCreateLabel`, `aclrtDestroyLabel`, `aclrtCreateLabelList`,
//! `aclrtDestroyLabelList`): a label names a place in a model stream's tasks once
//! `aclrtSetLabel` puts it there (`model_flow`); a list is what `aclrtSwitchLabelByIndex`
//! jumps through. Each label's state is its slot in the handle slab ([`LabelSlot`]); a list's
//! labels are kept by id in the captures' state.
//!
//! CANN's rules followed (hicann/runtime `src/acl/aclrt_impl/label.cpp`: NULL arguments
//! 100000; `src/runtime/api/impl/api_error.cc` `LabelCreate`/`LabelSwitchListCreate`,
//! `context.cc` `Context::LabelSwitchListCreate`; `docs/zh/api_ref/10_label_management.md`:
//! at most 65,535 labels a process, a list of 1 to 65,535 labels).

use acl_notify_core::Error;

use super::Runtime;
use crate::errmsg::{CallError, param};

/// The most labels a process holds, and a list's most (the API page's).
pub(crate) const MAX_LABELS: usize = 65_535;

/// A label's state, kept in its handle's slot.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LabelSlot {
    /// The device current when it was made.
    pub(crate) device: u32,
    /// The model whose stream it is set on (its handle; 0: not set yet).
    pub(crate) model: usize,
    /// That stream's C handle (0: not set yet).
    pub(crate) stream: usize,
    /// A list holds it (`aclrtSetLabel` needs one first: `RT_ERROR_LABEL_PHY_ADDR_NULL`).
    pub(crate) listed: bool,
}

pub(crate) fn bad_label(handle: usize) -> CallError {
    crate::handle::not_live("label", "a label", handle)
}

impl Runtime {
    /// `aclrtCreateLabel`: a label of the current device, set nowhere yet.
    pub(crate) fn create_label(&self) -> Result<usize, CallError> {
        // Labels serve models being built: every SoC but IPV350 (the API page).
        self.require(acl_notify_core::Feature::ModelBuild)?;
        let (device, _) = self.current()?;
        let labels = &self.captures.labels;
        if labels.values_where(|_| true).len() >= MAX_LABELS {
            return Err(CallError::new(
                Error::ResourceAllocFail,
                format!("the process holds {MAX_LABELS} labels already, CANN's most"),
            ));
        }
        labels.insert(LabelSlot {
            device,
            ..LabelSlot::default()
        })
    }

    /// `aclrtDestroyLabel`: the handle dies; a model it is set in keeps its place.
    pub(crate) fn destroy_label(&self, handle: usize) -> Result<(), CallError> {
        self.captures
            .labels
            .remove(handle)
            .map(drop)
            .ok_or_else(|| bad_label(handle))
    }

    /// `aclrtCreateLabelList`: a list of live labels `labels` (1 to 65,535 of them).
    pub(crate) fn create_label_list(&self, labels: &[usize]) -> Result<usize, CallError> {
        self.current()?;
        if labels.is_empty() || labels.len() > MAX_LABELS {
            return Err(param(format!(
                "num {}: a label list holds 1 to {MAX_LABELS} labels",
                labels.len()
            )));
        }
        for &l in labels {
            self.captures.labels.get(l).ok_or_else(|| bad_label(l))?;
        }
        for &l in labels {
            self.captures.labels.update(l, |s| s.listed = true);
        }
        self.captures.lock().lists.insert(labels.to_vec())
    }

    /// `aclrtDestroyLabelList`.
    pub(crate) fn destroy_label_list(&self, handle: usize) -> Result<(), CallError> {
        self.captures
            .lock()
            .lists
            .remove(handle)
            .map(drop)
            .ok_or_else(|| bad_list(handle))
    }

    /// The labels of live list `handle`.
    pub(crate) fn label_list(&self, handle: usize) -> Result<Vec<usize>, CallError> {
        self.captures
            .lock()
            .lists
            .get(handle)
            .cloned()
            .ok_or_else(|| bad_list(handle))
    }
}

fn bad_list(handle: usize) -> CallError {
    crate::handle::not_live("labelList", "a label list", handle)
}

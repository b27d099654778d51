//! Run-time control flow of models in the C ABI: labels (`aclrtCreateLabel`,
//! `aclrtDestroyLabel`, `aclrtSetLabel`, `aclrtCreateLabelList`, `aclrtDestroyLabelList`,
//! `aclrtSwitchLabelByIndex`), `aclrtSwitchStream`, `aclrtActiveStream` and `aclmdlRIAbort`.
//! The NULL checks are CANN's ACL layer's (hicann/runtime `src/acl/aclrt_impl/label.cpp`,
//! `stream.cpp`, `model_ri.cpp`: 100000), the rest the runtime's (`runtime::model_flow`,
//! `runtime::labels` and `runtime::flow` say which source files they follow). Labels and
//! label lists are handles of the crate's handle slab: a destroyed or forged one is answered
//! with 107017.

use std::ffi::c_void;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::model_ri::{aclmdlRI, model, stream_arg};
use crate::session::runtime;

/// `aclrtLabel`.
#[allow(non_camel_case_types)]
pub type aclrtLabel = *mut c_void;
/// `aclrtLabelList`.
#[allow(non_camel_case_types)]
pub type aclrtLabelList = *mut c_void;

fn handle(p: *mut c_void, what: &str) -> Result<usize, CallError> {
    if p.is_null() {
        return Err(null_arg(what));
    }
    Ok(p.addr())
}

/// `aclError aclrtCreateLabel(aclrtLabel *label)`: a label of the current device.
///
/// Codes: 100000 NULL `label`; 107002 no current context; 207005 65,535 labels held.
///
/// # Safety
///
/// `label` points to a writable `aclrtLabel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateLabel(label: *mut aclrtLabel) -> aclError {
    api("aclrtCreateLabel", || {
        // SAFETY: `label` is NULL or writable, by the caller's contract.
        unsafe { Out::new(label) }.handle(|| null_arg("label"), || runtime()?.create_label())
    })
}

/// `aclError aclrtDestroyLabel(aclrtLabel label)`.
///
/// Codes: 100000 NULL; 107017 not a live label.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyLabel(label: aclrtLabel) -> aclError {
    api("aclrtDestroyLabel", || {
        runtime()?.destroy_label(handle(label, "label")?)
    })
}

/// `aclError aclrtSetLabel(aclrtLabel label, aclrtStream stream)`: the label marks the
/// place of the next task stored on `stream`, a stream bound to a model being built.
///
/// Codes: 100000 NULL; 107017 bad label or stream; 107005 a stream not bound to a model
/// being built; 507000 a label set already, set in another model, or in no list yet.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetLabel(label: aclrtLabel, stream: aclrtStream) -> aclError {
    api("aclrtSetLabel", || {
        let l = handle(label, "label")?;
        runtime()?.set_label(l, stream_arg(stream)?)
    })
}

/// `aclError aclrtCreateLabelList(aclrtLabel *labels, size_t num, aclrtLabelList
/// *labelList)`.
///
/// Codes: 100000 NULL `labels` or `labelList`; 107000 `num` 0 or above 65,535; 107017 a
/// label not live.
///
/// # Safety
///
/// `labels` points to `num` readable labels; `labelList` to a writable `aclrtLabelList`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateLabelList(
    labels: *const aclrtLabel,
    num: usize,
    label_list: *mut aclrtLabelList,
) -> aclError {
    api("aclrtCreateLabelList", || {
        if labels.is_null() {
            return Err(null_arg("labels"));
        }
        let make = || {
            if num == 0 || num > crate::runtime::labels::MAX_LABELS {
                return Err(param(format!(
                    "num {num}: a label list holds 1 to {} labels",
                    crate::runtime::labels::MAX_LABELS
                )));
            }
            // SAFETY: the caller's contract (`num` checked above).
            let given = unsafe { std::slice::from_raw_parts(labels, num) };
            let hs: Vec<usize> = given.iter().map(|p| p.addr()).collect();
            runtime()?.create_label_list(&hs)
        };
        // SAFETY: `label_list` is NULL or writable, by the caller's contract.
        unsafe { Out::new(label_list) }.handle(|| null_arg("labelList"), make)
    })
}

/// `aclError aclrtDestroyLabelList(aclrtLabelList labelList)`.
///
/// Codes: 100000 NULL; 107017 not a live list.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyLabelList(label_list: aclrtLabelList) -> aclError {
    api("aclrtDestroyLabelList", || {
        runtime()?.destroy_label_list(handle(label_list, "labelList")?)
    })
}

/// `aclError aclrtSwitchLabelByIndex(void *ptr, uint32_t maxValue, aclrtLabelList
/// labelList, aclrtStream stream)`: a task of the model being built on `stream` that, when
/// it runs, reads the `uint32` index at `ptr` (device memory) and goes on at that label of
/// the list (the last one for an index past it), on the label's stream.
///
/// Codes: 100000 NULL; 107017 bad list or stream; 107005 a stream not bound to a model
/// being built; 107000 `maxValue` 0 or above the list's length, `ptr` not device memory.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSwitchLabelByIndex(
    ptr: *mut c_void,
    max_value: u32,
    label_list: aclrtLabelList,
    stream: aclrtStream,
) -> aclError {
    api("aclrtSwitchLabelByIndex", || {
        let p = handle(ptr, "ptr")?;
        let list = handle(label_list, "labelList")?;
        let s = stream_arg(stream)?;
        runtime()?.switch_label_by_index(p, max_value, list, s)
    })
}

/// `aclError aclrtSwitchStream(void *leftValue, aclrtCondition cond, void *rightValue,
/// aclrtCompareDataType dataType, aclrtStream trueStream, aclrtStream falseStream,
/// aclrtStream stream)`: a task of the model being built on `stream` that, when it runs,
/// compares the values at `leftValue` and `rightValue` (device memory): if `cond` holds,
/// `trueStream` runs and `stream` stops, else `stream` goes on. `falseStream` is reserved
/// (NULL).
///
/// Codes: 100000 NULL; 107000 a bad condition or data type, a non-NULL `falseStream`, a
/// value not in device memory; 107017 bad stream; 107005 a stream not bound to the model
/// being built.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSwitchStream(
    left_value: *mut c_void,
    cond: i32,
    right_value: *mut c_void,
    data_type: i32,
    true_stream: aclrtStream,
    false_stream: aclrtStream,
    stream: aclrtStream,
) -> aclError {
    api("aclrtSwitchStream", || {
        let l = handle(left_value, "leftValue")?;
        let r = handle(right_value, "rightValue")?;
        let t = handle(true_stream, "trueStream")?;
        let s = stream_arg(stream)?;
        if !false_stream.is_null() {
            return Err(param(
                "falseStream is reserved and must be NULL (the switching stream goes on when the \
                 condition fails)",
            ));
        }
        runtime()?.switch_stream(l, cond, r, data_type, t, s)
    })
}

/// `aclError aclrtActiveStream(aclrtStream activeStream, aclrtStream stream)`: a task of
/// the model being built on `stream` that starts `activeStream` (of the same model) beside it.
///
/// Codes: 100000 NULL; 107017 bad stream; 107005 a stream not bound to the model being built.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtActiveStream(active_stream: aclrtStream, stream: aclrtStream) -> aclError {
    api("aclrtActiveStream", || {
        let a = handle(active_stream, "activeStream")?;
        runtime()?.active_stream(a, stream_arg(stream)?)
    })
}

/// `aclError aclmdlRIAbort(aclmdlRI modelRI)`: the execution of a built model running now
/// stops at its streams' next control task; its execution stream's error is 507023.
///
/// Codes: 100000 NULL; 107017 bad model; 107000 a captured model or one not built yet.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIAbort(model_ri: aclmdlRI) -> aclError {
    api("aclmdlRIAbort", || runtime()?.abort_model(model(model_ri)?))
}

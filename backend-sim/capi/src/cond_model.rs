//! Conditional tasks of captured models in the C ABI (`aclmdlRICondHandleCreate`,
//! `aclmdlRICondHandleGetCondPtr`, `aclmdlRIAddCondTask`, `aclmdlRICaptureToModelRIBegin`).
//! The NULL checks are CANN's ACL layer's (hicann/runtime `src/acl/aclrt_impl/model_ri.cpp`:
//! 100000), the rest the runtime's (`runtime::cond` says which source files it follows).

use std::ffi::c_void;

use acl_notify_core::Feature;

use crate::errmsg::null_arg;
use crate::ffi::{Out, OutArray, aclError, aclrtStream, api, to_ptr};
use crate::model_ri::{aclmdlRI, model, stream_arg};
use crate::runtime::capture::Mode;
use crate::session::runtime;

/// `aclmdlRICondHandle`.
#[allow(non_camel_case_types)]
pub type aclmdlRICondHandle = *mut c_void;

/// `aclmdlRICondTaskParams`.
#[repr(C)]
#[derive(Debug)]
#[allow(non_camel_case_types)]
pub struct aclmdlRICondTaskParams {
    pub handle: aclmdlRICondHandle,
    /// `aclmdlRICondTaskType`.
    pub r#type: u32,
    pub size: u32,
    /// `modelRIArray`.
    pub model_ri_array: *mut aclmdlRI,
}

/// `aclError aclmdlRICondHandleCreate(aclmdlRI modelRI, uint32_t defaultLaunchValue,
/// aclmdlRICondHandleFlag flag, aclmdlRICondHandle *handle)`: a condition of the capturing
/// model: a 64-bit word of device memory (0), set to `defaultLaunchValue` when each execution
/// starts if `flag` is `ACL_MODEL_RI_COND_HANDLE_ASSIGN_DEFAULT` (1; 0: the caller sets it).
///
/// Codes: 100000 NULL; 107017 bad model; 107000 a flag above 1 or a model not capturing;
/// 207000 a built model, or a SoC without conditional tasks.
///
/// # Safety
///
/// `handle` is NULL or points to a writable `aclmdlRICondHandle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICondHandleCreate(
    model_ri: aclmdlRI,
    default_launch_value: u32,
    flag: u32,
    handle: *mut aclmdlRICondHandle,
) -> aclError {
    api("aclmdlRICondHandleCreate", || {
        let m = model(model_ri)?;
        // SAFETY: `handle` is NULL or writable, by the caller's contract.
        unsafe { Out::new(handle) }.handle(
            || null_arg("handle"),
            || runtime()?.cond_create(m, default_launch_value, flag),
        )
    })
}

/// `aclError aclmdlRICondHandleGetCondPtr(aclmdlRICondHandle handle, uint64_t **ptr)`: the
/// condition's word (8 bytes of device memory the runtime frees with the model).
///
/// Codes: 100000 NULL; 107017 bad handle; 207000 a SoC without conditional tasks.
///
/// # Safety
///
/// `ptr` is NULL or points to a writable `uint64_t *`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICondHandleGetCondPtr(
    handle: aclmdlRICondHandle,
    ptr: *mut *mut u64,
) -> aclError {
    api("aclmdlRICondHandleGetCondPtr", || {
        if handle.is_null() {
            return Err(null_arg("handle"));
        }
        // SAFETY: `ptr` is NULL or writable, by the caller's contract.
        unsafe { Out::new(ptr) }.write(
            || null_arg("ptr"),
            || {
                let addr = runtime()?.cond_ptr(handle.addr())?;
                Ok(std::ptr::with_exposed_provenance_mut(addr))
            },
        )
    })
}

/// `aclError aclmdlRIAddCondTask(aclmdlRICondTaskParams params, aclrtStream stream,
/// uint32_t flags)`: a conditional task on the capturing `stream`, and its `params.size`
/// sub-models, written to `params.modelRIArray` (each captured with
/// `aclmdlRICaptureToModelRIBegin` … `aclmdlRICaptureEnd` before the model's capture ends).
///
/// Codes: 100000 NULL stream; 107017 bad stream or condition; 107000 a type above 2, flags not
/// 0, a NULL handle or array, a condition used already or of another model, a size the type
/// does not take; 107029 a stream not capturing; 207000 a stream that joined the capture.
///
/// # Safety
///
/// `params.modelRIArray` is NULL or points to `params.size` writable `aclmdlRI`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIAddCondTask(
    params: aclmdlRICondTaskParams,
    stream: aclrtStream,
    flags: u32,
) -> aclError {
    // SAFETY: NULL or writable for `size` handles, by the caller's contract.
    let array = unsafe { OutArray::new(params.model_ri_array, params.size as usize) }.given();
    api("aclmdlRIAddCondTask", || {
        let s = stream_arg(stream)?;
        // The runtime refuses a NULL array (107000) where CANN checks it.
        let subs = runtime()?.add_cond_task(
            params.handle.addr(),
            params.r#type,
            params.size,
            array.is_none(),
            s,
            flags,
        )?;
        if let Some(array) = array {
            array.put_all(subs.into_iter().map(to_ptr));
        }
        Ok(())
    })
}

/// `aclError aclmdlRICaptureToModelRIBegin(aclrtStream stream, aclmdlRI modelRI,
/// aclmdlRICaptureMode mode)`: the tasks later queued on `stream` are captured into the
/// sub-model `modelRI` of a conditional task (ended with `aclmdlRICaptureEnd`).
///
/// Codes: 100000 NULL; 207000 a SoC without capture, or a default stream; 107017 bad stream or
/// model; 107000 a mode other than 0–2, or a model that is no empty sub-model; 107026 a
/// sub-model captured already; 107027 a stream capturing already.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRICaptureToModelRIBegin(
    stream: aclrtStream,
    model_ri: aclmdlRI,
    mode: u32,
) -> aclError {
    api("aclmdlRICaptureToModelRIBegin", || {
        let s = stream_arg(stream)?;
        let m = model(model_ri)?;
        let rt = runtime()?;
        // `rtStreamBeginCaptureToModel`: the chip's feature, then the mode.
        rt.require(Feature::ModelCapture)?;
        rt.capture_begin(s, Mode::from_c(mode)?, Some(m))
    })
}

//! Model runtime instances in the C ABI (`aclmdlRI*`): stream capture, execution, destroy,
//! names and ids. The NULL checks are CANN's ACL layer's (hicann/runtime
//! `src/acl/aclrt_impl/model_ri.cpp`: 100000), the rest the runtime's (`runtime::capture`
//! says which source files it follows). An `aclmdlRI` is a handle of the crate's handle slab:
//! a destroyed or forged one is answered with 107017.

use std::ffi::{CStr, c_char, c_void};

use crate::callback::aclrtCallback;
use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Checked, Out, OutArray, aclError, aclrtStream, api};
use crate::runtime::capture::{Mode, exchange_mode};
use crate::session::runtime;

/// `aclmdlRI`.
#[allow(non_camel_case_types)]
pub type aclmdlRI = *mut c_void;

pub(crate) fn model(m: aclmdlRI) -> Result<usize, CallError> {
    if m.is_null() {
        return Err(null_arg("modelRI"));
    }
    Ok(m.addr())
}

pub(crate) fn stream_arg(s: aclrtStream) -> Result<usize, CallError> {
    if s.is_null() {
        return Err(null_arg("stream"));
    }
    Ok(s.addr())
}

/// `aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode)`: the tasks
/// later queued on `stream` (and on the streams that join it through an event) are captured
/// into a new model instead of run.
///
/// Codes: 100000 NULL stream; 107000 a mode other than 0–2; 107017 bad stream; 107003 a stream
/// of another context; 107027 already capturing; 207000 a default stream.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRICaptureBegin(stream: aclrtStream, mode: u32) -> aclError {
    api("aclmdlRICaptureBegin", || {
        let s = stream_arg(stream)?;
        let mode = Mode::from_c(mode)?;
        runtime()?.capture_begin(s, mode, None)
    })
}

/// `aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status,
/// aclmdlRI *modelRI)`: whether `stream` captures (`NONE`, `ACTIVE`, `INVALIDATED`) and into
/// which model (NULL when none). Either out-pointer may be NULL, not both.
///
/// # Safety
///
/// Non-NULL `status` and `modelRI` point to writable values of their types.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICaptureGetInfo(
    stream: aclrtStream,
    status: *mut u32,
    model_ri: *mut aclmdlRI,
) -> aclError {
    // SAFETY: NULL or writable, by the caller's contract.
    let (status, model_ri) = unsafe { (Out::new(status), Out::new(model_ri)) };
    api("aclmdlRICaptureGetInfo", || {
        let s = stream_arg(stream)?;
        let (status, model_ri) = (status.given(), model_ri.given());
        if status.is_none() && model_ri.is_none() {
            return Err(null_arg("status and modelRI (both)"));
        }
        let (st, m) = runtime()?.capture_info(s)?;
        if let Some(status) = status {
            status.put(st as u32);
        }
        if let Some(model_ri) = model_ri {
            model_ri.put(crate::ffi::to_ptr(m));
        }
        Ok(())
    })
}

/// `aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI)`: ends the capture
/// begun on `stream` and hands out its model.
///
/// Codes: 100000 NULL stream; 107000 NULL `modelRI` (the capture goes on); 107029 not
/// capturing; 107036 a stream that joined another's capture; 107038 another thread's capture
/// (not relaxed); 107025 a joined stream not joined back; 507903 invalidated (the last three
/// drop the capture).
///
/// # Safety
///
/// `modelRI` points to a writable `aclmdlRI`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICaptureEnd(
    stream: aclrtStream,
    model_ri: *mut aclmdlRI,
) -> aclError {
    api("aclmdlRICaptureEnd", || {
        let s = stream_arg(stream)?;
        // SAFETY: `model_ri` is NULL or writable, by the caller's contract.
        unsafe { Out::new(model_ri) }.handle(
            // `ApiImpl::StreamEndCapture`: RT_ERROR_INVALID_VALUE before anything ends.
            || param("modelRI is NULL"),
            || runtime()?.capture_end(s),
        )
    })
}

/// `aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode)`: sets the calling
/// thread's capture mode to `*mode` and writes the previous one there.
///
/// Codes: 100000 NULL; 107000 a mode other than 0–2; 107002 no current context (hicann/runtime
/// `api_impl_aclgraph.cc`). The mode is the thread's for its life, across sessions.
///
/// # Safety
///
/// `mode` points to a readable and writable `aclmdlRICaptureMode`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRICaptureThreadExchangeMode(mode: *mut u32) -> aclError {
    // SAFETY: NULL or readable and writable (in/out), by the caller's contract.
    let mode = unsafe { Out::new(mode) };
    api("aclmdlRICaptureThreadExchangeMode", || {
        let mode = mode.check(|| null_arg("mode"))?;
        // SAFETY: an in/out parameter: readable too, by the caller's contract.
        let new = Mode::from_c(unsafe { mode.read() })?;
        // `ApiImpl::ThreadExchangeCaptureMode`: a thread without a current context is refused.
        runtime()?.current()?;
        let old = exchange_mode(new);
        mode.put(old as u32);
        Ok(())
    })
}

/// `aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream)`: queues one run of
/// the model's captured tasks on `stream` (NULL: the default stream), after what `stream`
/// already has.
///
/// Codes: 100000 NULL model; 107017 bad model or stream; 107026 model still capturing; 107027
/// `stream` capturing; a task's own code if its replay is refused (the tasks before it stay
/// queued).
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIExecuteAsync(model_ri: aclmdlRI, stream: aclrtStream) -> aclError {
    api("aclmdlRIExecuteAsync", || {
        let m = model(model_ri)?;
        runtime()?.execute_async(m, stream.addr())
    })
}

/// `aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout)`: runs the model once on a
/// stream of its own and waits for it, at most `timeout` ms (-1: no limit).
///
/// Codes: as `aclmdlRIExecuteAsync`; 107000 a timeout of 0 or below -1; 507046 timed out;
/// a task's failure.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIExecute(model_ri: aclmdlRI, timeout: i32) -> aclError {
    api("aclmdlRIExecute", || {
        let m = model(model_ri)?;
        runtime()?.execute(m, timeout)
    })
}

/// `aclError aclmdlRIDestroy(aclmdlRI modelRI)`: waits (at most 10 s) for the model's queued
/// runs, calls its destroy callbacks, frees it.
///
/// Codes: 100000 NULL; 107017 bad model; 107026 still capturing; 107037 runs still queued
/// after 10 s (the model stays).
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIDestroy(model_ri: aclmdlRI) -> aclError {
    api("aclmdlRIDestroy", || {
        let m = model(model_ri)?;
        runtime()?.destroy_model(m)
    })
}

/// `aclError aclmdlRISetName(aclmdlRI modelRI, const char *name)`.
///
/// # Safety
///
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRISetName(model_ri: aclmdlRI, name: *const c_char) -> aclError {
    api("aclmdlRISetName", || {
        let m = model(model_ri)?;
        if name.is_null() {
            return Err(null_arg("name"));
        }
        // SAFETY: the caller's contract. The bytes are kept as they are (a name need not be
        // UTF-8: `aclmdlRIGetName` gives back what was set).
        let name = unsafe { CStr::from_ptr(name) }.to_bytes().to_vec();
        runtime()?.model_set_name(m, name)
    })
}

/// `aclError aclmdlRIGetName(aclmdlRI modelRI, uint32_t maxLen, char *name)`: the name with
/// its NUL; 107000 if `maxLen` bytes cannot hold it.
///
/// # Safety
///
/// `name` is NULL or writable for `maxLen` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIGetName(
    model_ri: aclmdlRI,
    max_len: u32,
    name: *mut c_char,
) -> aclError {
    // SAFETY: NULL or writable for `maxLen` bytes, by the caller's contract.
    let name = unsafe { OutArray::new(name, max_len as usize) };
    api("aclmdlRIGetName", || {
        let m = model(model_ri)?;
        let name = name.check(|| null_arg("name"))?;
        let n = runtime()?.model_name(m)?;
        if n.len() + 1 > max_len as usize {
            return Err(param(format!(
                "maxLen {max_len} cannot hold the name ({} bytes and its NUL)",
                n.len()
            )));
        }
        name.put_cstr(&n);
        Ok(())
    })
}

/// `aclError aclmdlRIGetId(aclmdlRI modelRI, uint32_t *modelRIId)`: the model's id, unique
/// among its device's live models, the lowest free one, coming back after a destroy (CANN's
/// driver model id pool: `runtime::capture`'s `Models`).
///
/// # Safety
///
/// `modelRIId` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIGetId(model_ri: aclmdlRI, id: *mut u32) -> aclError {
    api("aclmdlRIGetId", || {
        let m = model(model_ri)?;
        // SAFETY: `id` is NULL or writable, by the caller's contract.
        unsafe { Out::new(id) }.write(|| null_arg("modelRIId"), || runtime()?.model_number(m))
    })
}

/// `aclError aclmdlRIDestroyRegisterCallback(aclmdlRI modelRI, aclrtCallback func, void
/// *userData)`: `func(userData)` runs when the model is destroyed, in registration order.
///
/// Codes: 100000 NULL model or function; 107017 bad model.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIDestroyRegisterCallback(
    model_ri: aclmdlRI,
    func: aclrtCallback,
    user_data: *mut c_void,
) -> aclError {
    api("aclmdlRIDestroyRegisterCallback", || {
        let m = model(model_ri)?;
        let f = func.ok_or_else(|| null_arg("func"))?;
        runtime()?.model_on_destroy(m, f, user_data.addr())
    })
}

/// `aclError aclmdlRIDestroyUnregisterCallback(aclmdlRI modelRI, aclrtCallback func)`.
///
/// Codes: 100000 NULL model or function; 107017 bad model; 107000 `func` not registered.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIDestroyUnregisterCallback(
    model_ri: aclmdlRI,
    func: aclrtCallback,
) -> aclError {
    api("aclmdlRIDestroyUnregisterCallback", || {
        let m = model(model_ri)?;
        let f = func.ok_or_else(|| null_arg("func"))?;
        runtime()?.model_forget_on_destroy(m, f)
    })
}

/// `aclError aclmdlRIGetStreams(aclmdlRI modelRI, aclrtStream *streams, uint32_t
/// *numStreams)`: the model's streams, the origin's first (`Model::ModelGetStreams`): with
/// `streams` NULL, their number in `*numStreams`; else up to `*numStreams` of them, NULL in
/// the rest of the array, and `*numStreams` set to the number written.
///
/// Codes: 107000 NULL model or `numStreams` (CANN's ACL layer passes them on; the runtime
/// refuses them); 107017 bad model; 107039 the array is shorter than the list (the streams
/// that fit are written).
///
/// # Safety
///
/// `numStreams` is NULL or readable and writable; a non-NULL `streams` is writable for
/// `*numStreams` elements.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIGetStreams(
    model_ri: aclmdlRI,
    streams: *mut aclrtStream,
    num_streams: *mut u32,
) -> aclError {
    // SAFETY: NULL or readable and writable, by the caller's contract.
    let num_streams = unsafe { Out::new(num_streams) };
    api("aclmdlRIGetStreams", || {
        if model_ri.is_null() {
            return Err(param("modelRI is NULL"));
        }
        let num_streams = num_streams.check(|| param("numStreams is NULL"))?;
        let all = runtime()?.model_streams(model_ri.addr())?;
        // SAFETY: the caller's contract.
        unsafe { fill_handles(&all, streams, num_streams, "numStreams", "streams") }
    })
}

/// Writes the C handles `all` as `aclmdlRIGetStreams` and `aclmdlRIGetTasksByStream` do
/// (`Model::ModelGetStreams`, `Stream::StreamGetTasks`): with `out` NULL, their number in
/// `*num`; else up to `*num` of them, NULL in the rest of the array, `*num` the number
/// written, and 107039 if that is not all (`num_name`, `what` name them in the message).
///
/// # Safety
///
/// `num` is readable too (an in/out parameter); a non-NULL `out` is writable for `*num`
/// elements.
pub(crate) unsafe fn fill_handles(
    all: &[usize],
    out: *mut *mut c_void,
    num: Checked<u32>,
    num_name: &str,
    what: &str,
) -> Result<(), CallError> {
    let total = u32::try_from(all.len()).unwrap_or(u32::MAX);
    // SAFETY: readable, by the caller's contract.
    let room = unsafe { num.read() };
    // SAFETY: NULL or writable for `*num` elements, by the caller's contract.
    let Some(out) = unsafe { OutArray::new(out, room as usize) }.given() else {
        num.put(total);
        return Ok(());
    };
    let n = room.min(total);
    for i in 0..out.len() {
        let h = all.get(i).filter(|_| i < n as usize).copied().unwrap_or(0);
        out.put(i, crate::ffi::to_ptr(h));
    }
    num.put(n);
    if n < total {
        return Err(CallError::new(
            acl_notify_core::Error::InsufficientInputArray,
            format!("{num_name} {room}: there are {total} {what}"),
        ));
    }
    Ok(())
}

//! The exported system parameter calls (`runtime::sysparam` holds the rules):
//! `aclrtSetSysParamOpt`, `aclrtGetSysParamOpt`, `aclrtCtxSetSysParamOpt`,
//! `aclrtCtxGetSysParamOpt`.

use super::{Out, aclError, api};
use crate::errmsg::null_arg;
use crate::runtime::sysparam;
use crate::session::with_runtime;

/// `aclError aclrtSetSysParamOpt(aclSysParamOpt opt, int64_t value)`: the process's value.
///
/// Codes: 100000 an unknown option; 107000 a value out of its range.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetSysParamOpt(opt: i32, value: i64) -> aclError {
    api("aclrtSetSysParamOpt", || sysparam::set_process(opt, value))
}

/// `aclError aclrtGetSysParamOpt(aclSysParamOpt opt, int64_t *value)`: the process's value
/// (0 until set).
///
/// Codes: 100000 NULL, or an unknown option.
///
/// # Safety
///
/// `value` is NULL or valid for writing an `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetSysParamOpt(opt: i32, value: *mut i64) -> aclError {
    api("aclrtGetSysParamOpt", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(|| null_arg("value"), || sysparam::get_process(opt))
    })
}

/// `aclError aclrtCtxSetSysParamOpt(aclSysParamOpt opt, int64_t value)`: the current
/// context's value (and the process's).
///
/// Codes: 100000 an unknown option; 107000 a value out of its range; 107002 no current
/// context.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCtxSetSysParamOpt(opt: i32, value: i64) -> aclError {
    api("aclrtCtxSetSysParamOpt", || {
        with_runtime(|rt| rt.ctx_set_sys_param(opt, value))
    })
}

/// `aclError aclrtCtxGetSysParamOpt(aclSysParamOpt opt, int64_t *value)`: the current
/// context's value.
///
/// Codes: 100000 NULL, or an unknown option; 107002 no current context; 107021 never set in
/// it.
///
/// # Safety
///
/// `value` is NULL or valid for writing an `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCtxGetSysParamOpt(opt: i32, value: *mut i64) -> aclError {
    api("aclrtCtxGetSysParamOpt", || {
        // SAFETY: `value` is NULL or writable, by the caller's contract.
        unsafe { Out::new(value) }.write(
            || null_arg("value"),
            || with_runtime(|rt| rt.ctx_sys_param(opt)),
        )
    })
}

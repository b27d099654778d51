//! System parameters (`aclrtSetSysParamOpt` / `aclrtGetSysParamOpt` for the process,
//! `aclrtCtxSetSysParamOpt` / `aclrtCtxGetSysParamOpt` for the current context):
//! deterministic computing, debug kernels and strong consistency. No kernel runs in the
//! simulator, so they are state a program reads back, with CANN's checks and codes.
//!
//! CANN's rules (hicann/runtime v9.1.0 `src/acl/aclrt_impl/context.cpp`, `GetSysParamOpt` /
//! `SetSysParamOpt`; `src/runtime/api/api_c.cc`, `rtSetSysParamOpt`, `rtGetSysParamOpt`,
//! `rtCtxSetSysParamOpt`, `rtCtxGetSysParamOpt`; `impl/api_error.cc`,
//! `ApiErrorDecorator::CtxSetSysParamOpt`; `core/src/context/context.cc`):
//!
//! - The option must be `ACL_OPT_DETERMINISTIC` (0), `ACL_OPT_ENABLE_DEBUG_KERNEL` (1) or
//!   `ACL_OPT_STRONG_CONSISTENCY` (2): 100000 otherwise, from the ACL layer (a get checks its
//!   NULL output first, 100000 too).
//! - A value is in [0, 4) for `DETERMINISTIC`, [0, 2) for the others: 107000 otherwise.
//! - The process's values are one array for the whole process (a global of CANN's runtime,
//!   so they outlive `aclFinalize`), 0 until set.
//! - A context's values are its own, and unset until set: a get of one never set is 107021
//!   (`ACL_ERROR_RT_SYSPARAMOPT_NOT_SET`). A context set also sets the process's value.
//!   Both need a current context (107002; the value is checked first on a set).

use std::sync::atomic::{AtomicI64, Ordering};

use acl_notify_core::Error;

use super::Runtime;
use crate::errmsg::{CallError, param};

/// The options CANN 9.1.0's ACL layer accepts.
pub(crate) const OPTS: usize = 3;

/// `ACL_OPT_DETERMINISTIC`.
const DETERMINISTIC: i32 = 0;

/// A context's values (`None`: never set in it).
pub(crate) type CtxParams = [Option<i64>; OPTS];

/// The process's values.
static PROCESS: [AtomicI64; OPTS] = [const { AtomicI64::new(0) }; OPTS];

/// `opt` as an index; 100000 for anything but the three options.
fn option(opt: i32) -> Result<usize, CallError> {
    usize::try_from(opt)
        .ok()
        .filter(|&o| o < OPTS)
        .ok_or_else(|| {
            CallError::new(
                Error::InvalidParam,
                format!(
                    "opt {opt}: expected ACL_OPT_DETERMINISTIC (0), ACL_OPT_ENABLE_DEBUG_KERNEL \
                     (1) or ACL_OPT_STRONG_CONSISTENCY (2)"
                ),
            )
        })
}

/// `value` checked for option `opt` (an index): 107000 outside its range.
fn checked(opt: usize, value: i64) -> Result<i64, CallError> {
    let max = if opt == DETERMINISTIC as usize { 4 } else { 2 };
    if (0..max).contains(&value) {
        Ok(value)
    } else {
        Err(param(format!(
            "value {value} of option {opt}: expected one in [0, {max})"
        )))
    }
}

/// `aclrtSetSysParamOpt`.
pub(crate) fn set_process(opt: i32, value: i64) -> Result<(), CallError> {
    let o = option(opt)?;
    let v = checked(o, value)?;
    PROCESS[o].store(v, Ordering::Relaxed);
    Ok(())
}

/// `aclrtGetSysParamOpt`.
pub(crate) fn get_process(opt: i32) -> Result<i64, CallError> {
    let o = option(opt)?;
    Ok(PROCESS[o].load(Ordering::Relaxed))
}

fn context_gone() -> CallError {
    CallError::new(
        Error::ContextNull,
        "the calling thread's current context was destroyed (set another one)",
    )
}

impl Runtime {
    /// `aclrtCtxSetSysParamOpt`: in the current context, and for the process.
    pub(crate) fn ctx_set_sys_param(&self, opt: i32, value: i64) -> Result<(), CallError> {
        let o = option(opt)?;
        let v = checked(o, value)?;
        let (_, ctx) = self.current()?;
        self.update_ctx_params(ctx, |p| p[o] = Some(v))?;
        PROCESS[o].store(v, Ordering::Relaxed);
        Ok(())
    }

    /// Changes context `ctx`'s values (107002 if it was destroyed meanwhile).
    fn update_ctx_params(
        &self,
        ctx: usize,
        f: impl FnOnce(&mut CtxParams),
    ) -> Result<(), CallError> {
        self.contexts
            .table
            .update(ctx, |e| f(&mut e.sys_params))
            .ok_or_else(context_gone)
    }

    /// Context `ctx`'s values (107002 if it was destroyed meanwhile).
    fn ctx_params(&self, ctx: usize) -> Result<CtxParams, CallError> {
        self.contexts
            .table
            .get(ctx)
            .map(|e| e.sys_params)
            .ok_or_else(context_gone)
    }

    /// `aclrtCtxGetSysParamOpt`: 107021 if never set in the current context.
    pub(crate) fn ctx_sys_param(&self, opt: i32) -> Result<i64, CallError> {
        let o = option(opt)?;
        let (_, ctx) = self.current()?;
        self.ctx_params(ctx)?[o].ok_or_else(|| {
            CallError::new(
                Error::SysParamOptNotSet,
                format!(
                    "option {opt} was never set in the current context (aclrtCtxSetSysParamOpt)"
                ),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::Soc;
    use acl_notify_sim::NamespaceGuard as Ns;

    #[test]
    fn contexts_keep_their_own_values_and_set_the_processs() {
        let (sim, _ns) = Ns::open_sim(
            format!("unit-capi-sysparam-{}", std::process::id()),
            Soc::Ascend910B,
            2,
        )
        .expect("opening a test Sim");
        let rt = Runtime::new(sim, 1, 42);
        let code = |r: Result<i64, CallError>| r.unwrap_err().code();
        assert_eq!(
            code(rt.ctx_sys_param(0)),
            Error::ContextNull,
            "no current context"
        );
        rt.set_device(0).unwrap();
        assert_eq!(code(rt.ctx_sys_param(1)), Error::SysParamOptNotSet);
        rt.ctx_set_sys_param(1, 1).unwrap();
        assert_eq!(rt.ctx_sys_param(1).unwrap(), 1);
        assert_eq!(
            get_process(1).unwrap(),
            1,
            "a context set sets the process's too"
        );
        // Another context starts unset.
        let other = rt.create_context(1).unwrap();
        assert_eq!(code(rt.ctx_sys_param(1)), Error::SysParamOptNotSet);
        rt.ctx_set_sys_param(0, 3).unwrap();
        assert_eq!(rt.ctx_sys_param(0).unwrap(), 3);
        rt.destroy_context(other).unwrap();
        rt.set_device(0).unwrap();
        assert_eq!(
            rt.ctx_sys_param(1).unwrap(),
            1,
            "the primary context kept its own"
        );
        assert_eq!(code(rt.ctx_sys_param(0)), Error::SysParamOptNotSet);
        // Ranges and options.
        assert_eq!(
            rt.ctx_set_sys_param(0, 4).unwrap_err().code(),
            Error::ParamInvalid
        );
        assert_eq!(
            rt.ctx_set_sys_param(2, 2).unwrap_err().code(),
            Error::ParamInvalid
        );
        assert_eq!(
            rt.ctx_set_sys_param(2, -1).unwrap_err().code(),
            Error::ParamInvalid
        );
        assert_eq!(
            rt.ctx_set_sys_param(3, 0).unwrap_err().code(),
            Error::InvalidParam
        );
        assert_eq!(code(rt.ctx_sys_param(-1)), Error::InvalidParam);
        set_process(2, 1).unwrap();
        assert_eq!(get_process(2).unwrap(), 1);
        assert_eq!(set_process(0, 9).unwrap_err().code(), Error::ParamInvalid);
        assert_eq!(set_process(7, 0).unwrap_err().code(), Error::InvalidParam);
    }
}

//! Model dump configuration: `aclmdlInitDump`, `aclmdlSetDump`, `aclmdlFinalizeDump`.
//!
//! CANN's state machine (hicann/runtime `src/acl/aclrt_impl/toolchain/dump.cpp`): each call
//! first needs `aclInit` (100001); `aclmdlInitDump` once (a second 100002, until
//! `aclmdlFinalizeDump`); `aclmdlSetDump` and `aclmdlFinalizeDump` need it (100045); the flag is
//! the process's, and `aclFinalize` does not clear it (`aclmdlInitDumpFlag` is a file static only
//! these three calls touch). `aclmdlSetDump` then refuses a NULL path (100000) and reads the
//! file as `aclInit`'s configuration is read (`JsonParser::GetConfigStrFromFile`,
//! `src/acl/common/json_parser.cpp`: unreadable 100003, not JSON or nested too deep 100006, an
//! empty file accepted and changing nothing); a configuration the dump library refuses is
//! `ACL_ERROR_INVALID_DUMP_CONFIG` (100009).
//!
//! The dump library (adump) that checks the configuration's fields is not part of
//! hicann/runtime; **\[ours\]**: the simulator refuses (100009) what contradicts the fields CANN
//! documents (`docs/zh/api_ref/18_dump_configuration.md`): a top level that is not an object,
//! a `dump` that is not an object, a `dump_path` that is not a string, a `dump_list` that is not
//! an array, a `dump_mode` other than `input`/`output`/`all`, a `dump_op_switch` or `dump_debug`
//! other than `on`/`off`; other fields are kept unread.
//!
//! **What is written: nothing.** A dump records operators' inputs and outputs as a model's
//! operators run; the simulator runs no operators (its tasks are copies, sets, host functions,
//! notifies and events), so no dump file is ever written, whatever the configuration says. The
//! configuration is checked and kept (the latest one set, as CANN's overwriting), and cleared
//! by `aclmdlFinalizeDump`.

use std::ffi::{CStr, OsStr, c_char};
use std::os::unix::ffi::OsStrExt;
use std::sync::Mutex;

use acl_notify_core::Error;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{aclError, api};

/// The process's dump state.
#[derive(Debug)]
struct DumpState {
    /// Between `aclmdlInitDump` and `aclmdlFinalizeDump`.
    initialized: bool,
    /// The latest configuration `aclmdlSetDump` accepted (`None`: none, or an empty file).
    config: Option<serde_json::Value>,
}

static DUMP: Mutex<DumpState> = Mutex::new(DumpState {
    initialized: false,
    config: None,
});

/// 100001 unless `aclInit` started the session.
fn require_acl_init(call: &str) -> Result<(), CallError> {
    if crate::session::init_refs() == 0 {
        return Err(CallError::new(
            Error::Uninitialize,
            format!("aclInit must be called before {call}"),
        ));
    }
    Ok(())
}

/// The dump state, locked (a poisoned lock is taken over: the state is two plain fields).
fn state() -> std::sync::MutexGuard<'static, DumpState> {
    DUMP.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// 100045 unless `aclmdlInitDump` ran.
fn require_init_dump(st: &DumpState, call: &str) -> Result<(), CallError> {
    if !st.initialized {
        return Err(CallError::new(
            Error::DumpNotRun,
            format!("aclmdlInitDump must be called before {call}"),
        ));
    }
    Ok(())
}

/// `aclError aclmdlInitDump(void)`: starts the dump configuration.
///
/// Codes: 100001 before `aclInit`; 100002 already started.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlInitDump() -> aclError {
    api("aclmdlInitDump", || {
        require_acl_init("aclmdlInitDump")?;
        let mut st = state();
        if st.initialized {
            return Err(CallError::new(
                Error::RepeatInitialize,
                "aclmdlInitDump was already called (aclmdlFinalizeDump ends it)",
            ));
        }
        st.initialized = true;
        Ok(())
    })
}

/// `aclError aclmdlSetDump(const char *dumpCfgPath)`: checks and keeps the dump configuration
/// in the file at `dumpCfgPath` (nothing is dumped: see the module's documentation).
///
/// Codes: 100001 before `aclInit`; 100045 before `aclmdlInitDump`; 100000 NULL path; 100003 an
/// unreadable file; 100006 not JSON or nested too deep; 100009 a field CANN documents with a
/// value it does not take.
///
/// # Safety
///
/// `dump_cfg_path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlSetDump(dump_cfg_path: *const c_char) -> aclError {
    api("aclmdlSetDump", || {
        require_acl_init("aclmdlSetDump")?;
        let mut st = state();
        require_init_dump(&st, "aclmdlSetDump")?;
        if dump_cfg_path.is_null() {
            return Err(null_arg("dumpCfgPath"));
        }
        // SAFETY: non-NULL and NUL-terminated (the caller's contract).
        let path = unsafe { CStr::from_ptr(dump_cfg_path) }.to_bytes();
        let path = std::path::Path::new(OsStr::from_bytes(path));
        let text = std::fs::read(path).map_err(|e| {
            CallError::new(
                Error::InvalidFile,
                format!("cannot read the dump configuration {}: {e}", path.display()),
            )
        })?;
        let about = |code, why: String| {
            CallError::new(
                code,
                format!("dump configuration {}: {why}", path.display()),
            )
        };
        let Some(js) = crate::config::json(&text).map_err(|(c, why)| about(c, why))? else {
            return Ok(());
        };
        check(&js).map_err(|why| about(Error::InvalidDumpConfig, why))?;
        st.config = Some(js);
        Ok(())
    })
}

/// `aclError aclmdlFinalizeDump(void)`: ends the dump configuration (what was set is dropped).
///
/// Codes: 100001 before `aclInit`; 100045 before `aclmdlInitDump`.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlFinalizeDump() -> aclError {
    api("aclmdlFinalizeDump", || {
        require_acl_init("aclmdlFinalizeDump")?;
        let mut st = state();
        require_init_dump(&st, "aclmdlFinalizeDump")?;
        st.initialized = false;
        st.config = None;
        Ok(())
    })
}

/// What is wrong with dump configuration `js` against the fields CANN documents (see the
/// module's documentation), or `Ok`.
fn check(js: &serde_json::Value) -> Result<(), String> {
    let top = js
        .as_object()
        .ok_or_else(|| format!("the top level is {js}, not an object"))?;
    let Some(dump) = top.get("dump") else {
        return Ok(());
    };
    let dump = dump
        .as_object()
        .ok_or_else(|| format!("\"dump\" is {dump}, not an object"))?;
    let one_of = |field: &str, allowed: &[&str]| match dump.get(field) {
        None => Ok(()),
        Some(v) if v.as_str().is_some_and(|s| allowed.contains(&s)) => Ok(()),
        Some(v) => Err(format!("\"{field}\" is {v}: one of {allowed:?}")),
    };
    one_of("dump_mode", &["input", "output", "all"])?;
    one_of("dump_op_switch", &["on", "off"])?;
    one_of("dump_debug", &["on", "off"])?;
    if let Some(p) = dump.get("dump_path").filter(|p| !p.is_string()) {
        return Err(format!("\"dump_path\" is {p}, not a string"));
    }
    if let Some(l) = dump.get("dump_list").filter(|l| !l.is_array()) {
        return Err(format!("\"dump_list\" is {l}, not an array"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_fields_with_other_values_are_refused() {
        let ok = serde_json::json!({"dump": {"dump_path": "/tmp/d", "dump_mode": "all",
            "dump_list": [{}], "dump_op_switch": "on", "dump_debug": "off", "dump_step": "0|2"}});
        assert_eq!(check(&ok), Ok(()));
        assert_eq!(check(&serde_json::json!({})), Ok(()));
        for bad in [
            serde_json::json!([1]),
            serde_json::json!({"dump": 1}),
            serde_json::json!({"dump": {"dump_mode": "both"}}),
            serde_json::json!({"dump": {"dump_op_switch": true}}),
            serde_json::json!({"dump": {"dump_debug": "yes"}}),
            serde_json::json!({"dump": {"dump_path": 3}}),
            serde_json::json!({"dump": {"dump_list": {}}}),
        ] {
            assert!(check(&bad).is_err(), "{bad} accepted");
        }
    }
}

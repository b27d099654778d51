//! A model's description for debugging in the C ABI (`aclmdlRIDebugPrint`,
//! `aclmdlRIDebugJsonPrint`); `runtime::model_debug` describes the formats and the checks.

use std::ffi::{CStr, c_char};
use std::io::Write as _;

use crate::errmsg::{null_arg, param};
use crate::ffi::{aclError, api};
use crate::model_ri::{aclmdlRI, model};
use crate::session::runtime;

/// `aclError aclmdlRIDebugPrint(aclmdlRI modelRI)`: the model's streams and tasks, as text
/// on standard error.
///
/// Codes: 100000 NULL; 107017 bad model; 107026 still captured; 107002 no context; 207000
/// a SoC without ACL Graph.
#[unsafe(no_mangle)]
pub extern "C" fn aclmdlRIDebugPrint(model_ri: aclmdlRI) -> aclError {
    api("aclmdlRIDebugPrint", || {
        let text = runtime()?.debug_print(model(model_ri)?)?;
        let mut err = std::io::stderr().lock();
        // A closed standard error loses the text, as a log would.
        let _ = err.write_all(text.as_bytes());
        let _ = err.flush();
        Ok(())
    })
}

/// `aclError aclmdlRIDebugJsonPrint(aclmdlRI modelRI, const char *path, uint32_t flags)`:
/// the model's streams and tasks as a Chrome trace-event JSON array written to `path`.
///
/// Codes: 100000 NULL model or path; 107017 bad model; 107026 still captured; 107000 a path
/// that cannot be written or is not UTF-8; 107002 no context; 207000 a SoC without ACL Graph.
///
/// # Safety
///
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclmdlRIDebugJsonPrint(
    model_ri: aclmdlRI,
    path: *const c_char,
    _flags: u32,
) -> aclError {
    api("aclmdlRIDebugJsonPrint", || {
        let m = model(model_ri)?;
        if path.is_null() {
            return Err(null_arg("path"));
        }
        // SAFETY: the caller's contract (not NULL: checked).
        let p = unsafe { CStr::from_ptr(path) }
            .to_str()
            .map_err(|_| param("path is not UTF-8"))?;
        runtime()?.debug_json_print(m, p)
    })
}

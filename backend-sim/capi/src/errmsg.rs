//! Failed calls and their explanations: [`CallError`] (a CANN code and the reason), and the
//! per-thread message list behind `aclGetRecentErrMsg`.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use acl_notify_core::{BackendError, Error};

/// Why a C call failed: the code it returns and a sentence for `aclGetRecentErrMsg`.
///
/// One pointer wide (the code and text sit behind a `Box`): a `Result<usize, CallError>` then
/// comes back in two registers, so the successful calls, the ones that matter for speed, never
/// move an error-sized value through memory. Only a failure allocates.
#[derive(Debug)]
pub(crate) struct CallError(Box<Failure>);

#[derive(Debug)]
struct Failure {
    code: Error,
    /// `"<NAME> (<code>): <reason>"`, possibly after a context (`in_context`).
    text: String,
}

impl CallError {
    /// A failure detected by the C layer itself.
    #[cold]
    pub(crate) fn new(code: Error, reason: impl core::fmt::Display) -> CallError {
        CallError(Box::new(Failure {
            code,
            text: format!("{code}: {reason}"),
        }))
    }

    /// A failure reported by the backend; its `Display` already names the code and explains.
    #[cold]
    pub(crate) fn backend<E: BackendError>(e: E) -> CallError {
        CallError(Box::new(Failure {
            code: e.kind(),
            text: e.to_string(),
        }))
    }

    /// The same failure, `context` put before its explanation (`"<context>: <NAME> (<code>):
    /// <reason>"`).
    #[cold]
    pub(crate) fn in_context(mut self, context: &str) -> CallError {
        self.0.text = format!("{context}: {}", self.0.text);
        self
    }

    /// The same failure, its explanation followed by `more`.
    #[cold]
    pub(crate) fn explained(mut self, more: &str) -> CallError {
        self.0.text = format!("{} ({more})", self.0.text);
        self
    }

    /// The same failure as a task's error, for a task the C layer composes (its code and
    /// explanation).
    pub(crate) fn into_sim(self) -> acl_notify_sim::SimError {
        let prefix = format!("{}: ", self.0.code);
        let text = self.0.text.strip_prefix(&prefix).unwrap_or(&self.0.text);
        acl_notify_sim::SimError::new(self.0.code, text)
    }

    /// The code the C function returns.
    pub(crate) fn code(&self) -> Error {
        self.0.code
    }

    /// The explanation `aclGetRecentErrMsg` gives.
    #[cfg(test)]
    pub(crate) fn text(&self) -> &str {
        &self.0.text
    }
}

/// Shorthand for `ACL_ERROR_INVALID_PARAM` (100000): a NULL pointer argument.
pub(crate) fn null_arg(what: &str) -> CallError {
    CallError::new(Error::InvalidParam, format!("`{what}` is NULL"))
}

/// Shorthand for `ACL_ERROR_INVALID_PARAM` (100000): an argument the ACL layer refuses.
pub(crate) fn acl_param(reason: impl core::fmt::Display) -> CallError {
    CallError::new(Error::InvalidParam, reason)
}

/// `ACL_ERROR_INVALID_PARAM` (100000) unless `flags` is 0: an argument CANN reserves (the
/// VMM, fabric, unified-addressing and managed-memory calls).
pub(crate) fn reserved_flags(flags: u64) -> Result<(), CallError> {
    if flags != 0 {
        return Err(CallError::new(
            Error::InvalidParam,
            format!("flags {flags:#x}: reserved, only 0"),
        ));
    }
    Ok(())
}

/// `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000): entry point `call` on a SoC whose runtime
/// lacks it, as the simulator's own feature checks word it (`Sim::require`).
pub(crate) fn unsupported_on(call: &str, soc: acl_notify_core::Soc) -> CallError {
    CallError::new(
        Error::FeatureNotSupport,
        format!("{call} is not supported on {}", soc.name()),
    )
}

/// Shorthand for `ACL_ERROR_RT_PARAM_INVALID` (107000).
pub(crate) fn param(reason: impl core::fmt::Display) -> CallError {
    CallError::new(Error::ParamInvalid, reason)
}

/// At most this many messages are kept between two `aclGetRecentErrMsg` calls (the newest).
const KEEP: usize = 16;

thread_local! {
    /// Messages of this thread's failed calls since the last `aclGetRecentErrMsg`, oldest first.
    static PENDING: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// The string the last `aclGetRecentErrMsg` returned (kept alive until the next one).
    static RETURNED: RefCell<Option<CString>> = const { RefCell::new(None) };
    /// The code of this thread's latest failed runtime call, for `aclrtGetLastError` /
    /// `aclrtPeekAtLastError` (0: none since the last `aclrtGetLastError`).
    static LAST: std::cell::Cell<i32> = const { std::cell::Cell::new(0) };
}

/// Records that `call` failed with `e` on this thread.
pub(crate) fn record(call: &str, e: &CallError) {
    note_code(e.0.code);
    push(format!("{call} failed: {}", e.0.text));
}

/// Keeps `code` as the thread's last error if the runtime would: CANN's runtime stores the
/// code of each of its own failures per thread (hicann/runtime `api_c.cc`,
/// `GetRtExtErrCodeAndSetGlobalErr`), while the ACL layer's own failures (100xxx: a NULL
/// pointer, no `aclInit`; 500000: `aclsysGetVersionNum`'s unparseable version) return before
/// the runtime is called and store nothing: each exported function is a plain call of its
/// `…Impl` (`src/acl/aclrt_impl/acl_rt_wrapper.h`, `ACL_RT_CPP`), which returns those codes
/// itself. The runtime's codes are the `…07xxx` ones (107xxx, 207xxx, 507xxx).
pub(crate) fn note_code(code: Error) {
    if is_runtime_code(code.code()) {
        let _ = LAST.try_with(|l| l.set(code.code()));
    }
}

/// Whether `code` is one of the runtime's (`ACL_ERROR_RT_*`: 107xxx, 207xxx, 507xxx) rather
/// than the ACL layer's (100xxx, 200xxx, 500xxx).
fn is_runtime_code(code: i32) -> bool {
    (code / 1000) % 100 == 7
}

/// The thread's last runtime error (`aclrtPeekAtLastError`); `take` also clears it
/// (`aclrtGetLastError`).
pub(crate) fn last_error(take: bool) -> i32 {
    LAST.try_with(|l| if take { l.replace(0) } else { l.get() })
        .unwrap_or(0)
}

/// Records a message (also used for a caught panic). Silently does nothing while the thread
/// is being torn down.
pub(crate) fn push(msg: String) {
    log_to_file(&msg);
    let _ = PENDING.try_with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if p.len() == KEEP {
                p.remove(0);
            }
            p.push(msg);
        }
    });
}

/// Records a note about `key` (not a failure: a call that succeeded but has something to
/// say), at most once a second per thread for the same key, so that a caller polling in a
/// loop does not fill the messages (or the log file) with copies.
pub(crate) fn note_throttled(key: usize, msg: impl FnOnce() -> String) {
    thread_local! {
        static LAST_NOTE: std::cell::Cell<Option<(usize, std::time::Instant)>> =
            const { std::cell::Cell::new(None) };
    }
    let now = std::time::Instant::now();
    let fresh = LAST_NOTE
        .try_with(|l| {
            let fresh = !matches!(l.get(), Some((k, t)) if k == key
                && now.duration_since(t) < std::time::Duration::from_secs(1));
            if fresh {
                l.set(Some((key, now)));
            }
            fresh
        })
        .unwrap_or(false);
    if fresh {
        push(msg());
    }
}

/// The variable naming a file to which every message is also appended, one per line (for a
/// program that never calls `aclGetRecentErrMsg`, and for the tests that check every message
/// C callers can read).
pub const ENV_MESSAGE_LOG: &str = "ACL_NOTIFY_SIM_MESSAGE_LOG";

/// Appends `msg` to the file `ACL_NOTIFY_SIM_MESSAGE_LOG` names, if it names one. Only failed
/// calls get here, so reading the variable each time costs nothing that matters; a file that
/// cannot be opened is skipped (the message still reaches `aclGetRecentErrMsg`), with a note on
/// stderr the first time, as an unwritable `ACL_NOTIFY_SIM_TRACE` has: the log is a
/// diagnostic and does not stop the program, but a user who asked for one learns why it stays
/// empty.
fn log_to_file(msg: &str) {
    use std::io::Write;
    static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(path) = std::env::var_os(ENV_MESSAGE_LOG).filter(|p| !p.is_empty()) else {
        return;
    };
    match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        // One write per line, so lines of concurrent threads and processes do not interleave.
        Ok(mut f) => {
            let _ = f.write_all(format!("{}\n", msg.replace('\n', " | ")).as_bytes());
        }
        Err(e) => {
            if !TOLD.swap(true, std::sync::atomic::Ordering::Relaxed) {
                eprintln!(
                    "acl-notify: {ENV_MESSAGE_LOG}={}: cannot open it for appending ({e}); \
                     messages are not logged",
                    std::path::Path::new(&path).display()
                );
            }
        }
    }
}

/// `aclGetRecentErrMsg`: takes this thread's pending messages, newest first and one per line,
/// as a C string that stays valid until the next call on this thread; NULL if there are none.
pub(crate) fn take_recent() -> *const c_char {
    let msgs = PENDING
        .try_with(|p| p.try_borrow_mut().map(|mut p| std::mem::take(&mut *p)))
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let joined = msgs.into_iter().rev().collect::<Vec<_>>().join("\n");
    RETURNED
        .try_with(|r| {
            let Ok(mut r) = r.try_borrow_mut() else {
                return std::ptr::null();
            };
            *r = if joined.is_empty() {
                None
            } else {
                // Messages are built by this crate and by the backend; an interior NUL would
                // truncate the text, so replace it rather than fail.
                CString::new(joined.replace('\0', "\\0")).ok()
            };
            r.as_ref().map_or(std::ptr::null(), |s| s.as_ptr())
        })
        .unwrap_or(std::ptr::null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn recent() -> Option<String> {
        let p = take_recent();
        // SAFETY: `take_recent` returns NULL or a NUL-terminated string owned by this thread,
        // valid until the next `take_recent` on it.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    #[test]
    fn only_the_runtime_codes_are_kept_as_the_last_error() {
        for e in Error::ALL {
            // The runtime maps its host-registration, snapshot and task-group failures to codes
            // named without `_RT_` (hicann/runtime `errcode_manage.cc`); they are its codes all
            // the same.
            let rt = e.name().starts_with("ACL_ERROR_RT_")
                || e.name().starts_with("ACL_ERROR_SNAPSHOT_")
                || matches!(
                    e,
                    Error::HostMemoryAlreadyRegistered
                        | Error::HostMemoryNotRegistered
                        | Error::StreamTaskGroupStatus
                );
            assert_eq!(is_runtime_code(e.code()), rt, "{e}");
        }
    }

    #[test]
    fn newest_first_then_cleared() {
        assert_eq!(recent(), None);
        record("aclrtA", &CallError::new(Error::InvalidParam, "first"));
        record("aclrtB", &CallError::new(Error::InvalidHandle, "second"));
        let m = recent().unwrap();
        assert_eq!(
            m,
            "aclrtB failed: ACL_ERROR_RT_INVALID_HANDLE (107017): second\n\
             aclrtA failed: ACL_ERROR_INVALID_PARAM (100000): first"
        );
        assert_eq!(recent(), None, "messages were not cleared");
    }

    #[test]
    fn keeps_the_newest_and_is_per_thread() {
        for i in 0..40 {
            push(format!("m{i}"));
        }
        std::thread::spawn(|| assert_eq!(recent(), None))
            .join()
            .unwrap();
        let m = recent().unwrap();
        let lines: Vec<&str> = m.lines().collect();
        assert_eq!(lines.len(), KEEP);
        assert_eq!(lines[0], "m39");
    }
}

//! `aclAppLog`'s Rust half: whether a level is written, and the writing of one line. The
//! function itself is variadic, so C defines it (`applog.c`, compiled by `build.rs`), formats
//! the message and calls the two functions here.
//!
//! As hicann/runtime `src/acl/aclrt_impl/log.cpp` (`aclAppLogImpl`) and
//! `src/acl/common/log_inner.cpp` (`AclLog::IsLogOutputEnable`, `ACLSaveLog`): a message is
//! written when its level (`ACL_DEBUG` 0 to `ACL_ERROR` 3) is at least the current one, which
//! is `ASCEND_GLOBAL_LOG_LEVEL` (0 to 3; 4 writes nothing; unset, empty or another value:
//! 3, `ACL_ERROR`, as `src/dfx/log/liblog/slog/dlog_level_env.c` and
//! `docs/zh/env_vars/ASCEND_GLOBAL_LOG_LEVEL.md` say); a level outside 0 to 3 is never written.
//! The line is CANN's, `<thread id> <func>:<file>:<line>: "<message>"`, at most 1,023 bytes,
//! ending in `...[truncated]` when the message or the line was cut.
//!
//! **Ours**: CANN hands the line to its log daemon (files under `~/ascend/log`); the simulator
//! keeps no log files and writes it to stderr, after `[<LEVEL>] APP(<pid>):` as CANN's
//! `ASCEND_SLOG_PRINT_TO_STDOUT` output begins, one `write` per line so that concurrent lines
//! do not interleave. The level is read at each call.

use std::ffi::{CStr, c_char, c_int};
use std::io::Write as _;

/// CANN's `MAX_LOG_STRING`: a line and its NUL.
const MAX_LOG_STRING: usize = 1024;
const TRUNCATED: &str = "...[truncated]";

/// The variable CANN's log reads its level from.
const ENV_LEVEL: &str = "ASCEND_GLOBAL_LOG_LEVEL";

/// The current level (0 to 4) from `value` (the variable's), 3 when it is not a level.
fn current_level(value: Option<&str>) -> i32 {
    value
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|l| (0..=4).contains(l))
        .unwrap_or(3)
}

/// Whether a message of `level` is written at the current level `current`.
fn enabled(level: i32, current: i32) -> bool {
    (0..=3).contains(&level) && current <= level
}

/// CANN's line: `<tid> <func>:<file>:<line>: "<body>"`, cut to 1,023 bytes with the mark at
/// its end when `cut` (the body was) or the line is longer.
fn line_text(tid: i32, func: &str, file: &str, line: u32, body: &str, cut: bool) -> String {
    let mut text = format!("{tid} {func}:{file}:{line}: \"{body}\"");
    let max = MAX_LOG_STRING - 1;
    if cut || text.len() > max {
        let mut end = max - TRUNCATED.len();
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str(TRUNCATED);
    }
    text
}

/// `applog.c`: whether a message of `level` is written now.
#[unsafe(no_mangle)]
pub extern "C" fn acl_notify_sim_app_log_enabled(level: i32) -> c_int {
    let current = current_level(std::env::var(ENV_LEVEL).ok().as_deref());
    c_int::from(enabled(level, current))
}

/// `applog.c`: writes one line of `level` (its caller checked it is enabled).
///
/// # Safety
///
/// `func`, `file` and `body` are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn acl_notify_sim_app_log(
    level: i32,
    func: *const c_char,
    file: *const c_char,
    line: u32,
    body: *const c_char,
    truncated: i32,
) {
    // No unwinding across C: whatever goes wrong here, the line is dropped.
    let _ = std::panic::catch_unwind(|| {
        let text = |p: *const c_char| {
            // SAFETY: NUL-terminated (the caller's contract).
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        let name = match level {
            0 => "DEBUG",
            1 => "INFO",
            2 => "WARNING",
            _ => "ERROR",
        };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let l = line_text(
            tid,
            &text(func),
            &text(file),
            line,
            &text(body),
            truncated != 0,
        );
        let out = format!("[{name}] APP({}): {l}\n", std::process::id());
        let _ = std::io::stderr().lock().write_all(out.as_bytes());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_as_cann_reads_them() {
        assert_eq!(current_level(None), 3);
        assert_eq!(current_level(Some("")), 3);
        assert_eq!(current_level(Some("7")), 3);
        assert_eq!(current_level(Some("x")), 3);
        assert_eq!(current_level(Some("1")), 1);
        assert_eq!(current_level(Some("4")), 4);
        assert!(enabled(3, 3) && !enabled(2, 3) && enabled(0, 0));
        assert!((0..=3).all(|l| !enabled(l, 4)), "level 4 writes nothing");
        assert!(
            !enabled(4, 0) && !enabled(-1, 0),
            "unknown levels are never written"
        );
    }

    #[test]
    fn lines_are_cut_with_a_mark() {
        assert_eq!(
            line_text(7, "f", "a.c", 3, "hi", false),
            "7 f:a.c:3: \"hi\""
        );
        let long = "x".repeat(2000);
        let l = line_text(7, "f", "a.c", 3, &long[..1023], true);
        assert_eq!(l.len(), MAX_LOG_STRING - 1);
        assert!(l.ends_with(TRUNCATED) && l.starts_with("7 f:a.c:3: \"xxx"));
        // A body that fits but a line that does not (long names) is cut too.
        let l = line_text(7, &long[..600], "a.c", 3, &long[..500], false);
        assert_eq!(l.len(), MAX_LOG_STRING - 1);
        assert!(l.ends_with(TRUNCATED));
        // Never inside a character.
        let l = line_text(7, "f", "a.c", 3, &"é".repeat(600), false);
        assert!(l.ends_with(TRUNCATED) && l.len() < MAX_LOG_STRING);
    }
}

//! Assertion helpers for cases: each failure names the call, the line, what was expected and
//! what came back (CANN code names and numbers, plus the backend's own explanation).
//!
//! The macros return early from a case (`fn(&Ctx<B>) -> CaseResult`) with an `Err(String)`:
//!
//! - `ok!(call)` — the call must succeed; yields its value.
//! - `fails!(call, Error::X)` — the call must fail with code `X` (compared with
//!   [`BackendError::kind`]).
//! - `ensure!(cond, "fmt", args…)` and `ensure_eq!(got, want, "what")`.

use core::fmt::Debug;

use acl_notify_core::{BackendError, Error};

/// What a case (or a role in a multi-process case) returns: `Err` explains the failure.
pub type CaseResult = Result<(), String>;

/// Prefix of an `Err` that means "this backend lacks an optional extension; not applicable"
/// rather than a failure (used only for `HostOps` on the driver backend, see
/// [`crate::harness::Ctx::host_ops`]).
pub const SKIP_PREFIX: &str = "SKIP: ";

/// The message for `ok!` when the call failed.
pub fn unexpected_err<E: BackendError>(what: &str, line: u32, e: &E) -> String {
    format!(
        "line {line}: `{what}`\n    expected: success\n    got:      {} — {e}",
        e.kind()
    )
}

/// The check behind `fails!`.
pub fn expect_code<T: Debug, E: BackendError>(
    what: &str,
    line: u32,
    r: Result<T, E>,
    want: Error,
) -> CaseResult {
    match r {
        Err(e) if e.kind() == want => Ok(()),
        Err(e) => Err(format!(
            "line {line}: `{what}`\n    expected: {want}\n    got:      {} — {e}",
            e.kind()
        )),
        Ok(v) => Err(format!(
            "line {line}: `{what}`\n    expected: {want}\n    got:      success ({v:?})"
        )),
    }
}

/// The code of a result, for messages: `"success"` or `"NAME (code)"`.
pub fn code_of<T, E: BackendError>(r: &Result<T, E>) -> String {
    match r {
        Ok(_) => "success".to_owned(),
        Err(e) => format!("{} — {e}", e.kind()),
    }
}

/// `ok!(call)`: the call must succeed; evaluates to its value.
#[macro_export]
macro_rules! ok {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => {
                return Err($crate::check::unexpected_err(stringify!($e), line!(), &e));
            }
        }
    };
}

/// `fails!(call, Error::X)`: the call must fail with code `X`.
#[macro_export]
macro_rules! fails {
    ($e:expr, $want:expr) => {
        $crate::check::expect_code(stringify!($e), line!(), $e, $want)?
    };
}

/// `ensure!(cond, "fmt", args…)`.
#[macro_export]
macro_rules! ensure {
    ($c:expr, $($fmt:tt)+) => {
        if !$c {
            return Err(format!("line {}: {}", line!(), format!($($fmt)+)));
        }
    };
}

/// `ensure_eq!(got, want, "what")`.
#[macro_export]
macro_rules! ensure_eq {
    ($got:expr, $want:expr, $($fmt:tt)+) => {{
        let (got, want) = (&$got, &$want);
        if got != want {
            return Err(format!(
                "line {}: {}\n    expected: {:?}\n    got:      {:?}",
                line!(),
                format!($($fmt)+),
                want,
                got
            ));
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uses_fails(r: Result<u32, Error>) -> CaseResult {
        fails!(r, Error::InvalidHandle);
        Ok(())
    }

    fn uses_ok(r: Result<u32, Error>) -> Result<u32, String> {
        let v = ok!(r);
        Ok(v)
    }

    #[test]
    fn messages_name_both_codes() {
        assert!(uses_fails(Err(Error::InvalidHandle)).is_ok());
        let m = uses_fails(Err(Error::ParamInvalid)).unwrap_err();
        assert!(
            m.contains("expected: ACL_ERROR_RT_INVALID_HANDLE (107017)"),
            "{m}"
        );
        assert!(
            m.contains("got:      ACL_ERROR_RT_PARAM_INVALID (107000)"),
            "{m}"
        );
        let m = uses_fails(Ok(7)).unwrap_err();
        assert!(m.contains("got:      success (7)"), "{m}");
        assert_eq!(uses_ok(Ok(3)), Ok(3));
        let m = uses_ok(Err(Error::NoPermission)).unwrap_err();
        assert!(m.contains("ACL_ERROR_RT_NO_PERMISSION (207006)"), "{m}");
    }
}

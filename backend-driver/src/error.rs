//! [`DriverError`]: what a failing CANN call (or a failed load) tells the caller — the CANN code
//! mapped to the core's [`Error`], the raw number the library returned, the C function's name,
//! the runtime's own explanation (`aclGetRecentErrMsg()`, captured on the failing thread right
//! after the call) and this binding's context.

use std::fmt;

use acl_notify_core::{BackendError, Error};

/// The driver backend's error.
///
/// `Display` reads like
/// `aclrtNotifySetImportPid returned ACL_ERROR_RT_PARAM_INVALID (107000): notify 0x…: the
/// runtime says: notify was not exported`, so a log line alone explains the failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverError {
    kind: Error,
    code: i32,
    function: Option<&'static str>,
    recent: Option<String>,
    context: String,
}

impl DriverError {
    /// A failed C call: `code` is what `function` returned, `recent` the text of
    /// `aclGetRecentErrMsg()` right after it.
    pub(crate) fn from_call(function: &'static str, code: i32, recent: Option<String>) -> Self {
        DriverError {
            kind: classify(code),
            code,
            function: Some(function),
            recent: recent.filter(|s| !s.trim().is_empty()),
            context: String::new(),
        }
    }

    /// An error this binding answers itself, without calling C (a stale handle, a malformed
    /// argument, a missing optional symbol).
    pub(crate) fn local(kind: Error, context: impl Into<String>) -> Self {
        DriverError {
            kind,
            code: kind.code(),
            function: None,
            recent: None,
            context: context.into(),
        }
    }

    /// 107017 (`InvalidHandle`): `handle`, a handle of a `what` (`"notify"`, `"stream"`...),
    /// is not a live one of this driver.
    pub(crate) fn stale(what: &str, handle: u64) -> Self {
        DriverError::local(
            Error::InvalidHandle,
            format!(
                "{what} handle {handle:#x} is not a live {what} of this driver (destroyed, \
                 stale, foreign or garbage)"
            ),
        )
    }

    /// A failure while loading the library: `stage` is `dlopen`, `dlsym` or the CANN call that
    /// failed during load.
    pub(crate) fn load(kind: Error, stage: &'static str, context: impl Into<String>) -> Self {
        DriverError {
            kind,
            code: kind.code(),
            function: Some(stage),
            recent: None,
            context: context.into(),
        }
    }

    /// Adds (prepends) this binding's context: which handle, device or argument.
    pub(crate) fn context(mut self, what: impl Into<String>) -> Self {
        let what = what.into();
        if self.context.is_empty() {
            self.context = what;
        } else {
            self.context = format!("{what}: {}", self.context);
        }
        self
    }

    /// The CANN code this error stands for (also [`BackendError::kind`]).
    pub fn kind(&self) -> Error {
        self.kind
    }

    /// The raw number the C function returned. Equals `kind().code()` unless the library
    /// returned a code this binding does not know (then `kind()` is the closest class, see
    /// [`classify`]).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The C function that failed (`aclrtCreateNotify`, …), `dlopen`/`dlsym` for a load
    /// failure, or `None` when this binding answered without calling C.
    pub fn function(&self) -> Option<&'static str> {
        self.function
    }

    /// What `aclGetRecentErrMsg()` said right after the failing call, if anything.
    pub fn recent_message(&self) -> Option<&str> {
        self.recent.as_deref()
    }

    /// This binding's explanation (which handle, device, path or symbol).
    pub fn context_message(&self) -> &str {
        &self.context
    }

    /// Whether the library returned a code this binding does not know.
    pub fn is_unknown_code(&self) -> bool {
        Error::try_from(self.code).is_err()
    }
}

/// Maps any number a CANN function returns to the core's [`Error`]: a known code to its variant;
/// an unknown one by CANN's numbering classes — `107xxx` (runtime argument checks) to
/// `ParamInvalid`, other `1xxxxx` (ACL argument checks) to `InvalidParam`, `200000`
/// (`ACL_ERROR_BAD_ALLOC`) to `MemoryAllocation`, other `2xxxxx` (resources) to
/// `ResourceAllocFail`, `5xxxxx` (internal) to `InternalError`; anything else (negative numbers,
/// other ranges) to `DrvInternalError`. `0` is not an error and maps to `DrvInternalError` too,
/// since a caller asking is already confused.
pub fn classify(code: i32) -> Error {
    if let Ok(e) = Error::try_from(code) {
        return e;
    }
    match code {
        107_000..=107_999 => Error::ParamInvalid,
        100_000..=199_999 => Error::InvalidParam,
        200_000 => Error::MemoryAllocation,
        200_001..=299_999 => Error::ResourceAllocFail,
        500_000..=599_999 => Error::InternalError,
        _ => Error::DrvInternalError,
    }
}

impl From<Error> for DriverError {
    fn from(kind: Error) -> Self {
        DriverError::local(kind, "")
    }
}

impl BackendError for DriverError {
    fn kind(&self) -> Error {
        self.kind
    }

    fn with_message(kind: Error, msg: fmt::Arguments<'_>) -> Self {
        DriverError::local(kind, msg.to_string())
    }
}

impl fmt::Display for DriverError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.function {
            Some(func) if self.is_unknown_code() => write!(
                f,
                "{func} returned {} (not a code this binding knows; treated as {})",
                self.code, self.kind
            )?,
            Some(func) => write!(f, "{func} failed with {}", self.kind)?,
            None => write!(f, "{}", self.kind)?,
        }
        if !self.context.is_empty() {
            write!(f, ": {}", self.context)?;
        }
        if let Some(r) = &self.recent {
            write!(f, "; the runtime says: {}", r.trim())?;
        }
        Ok(())
    }
}

impl std::error::Error for DriverError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_codes_map_to_their_variant() {
        for e in Error::ALL {
            assert_eq!(classify(e.code()), e);
        }
    }

    #[test]
    fn unknown_codes_map_by_class_and_keep_the_number() {
        assert_eq!(classify(107_010), Error::ParamInvalid);
        assert_eq!(classify(100_010), Error::InvalidParam);
        assert_eq!(classify(200_000), Error::MemoryAllocation);
        assert_eq!(classify(207_018), Error::ResourceAllocFail);
        assert_eq!(classify(507_034), Error::InternalError);
        assert_eq!(classify(-1), Error::DrvInternalError);
        assert_eq!(classify(42), Error::DrvInternalError);
        let e = DriverError::from_call("aclrtRecordNotify", 507_034, None);
        assert_eq!(e.code(), 507_034);
        assert!(e.is_unknown_code());
        let text = e.to_string();
        assert!(text.contains("507034"), "{text}");
        assert!(text.contains("aclrtRecordNotify"), "{text}");
    }

    #[test]
    fn display_carries_function_context_and_runtime_text() {
        let e = DriverError::from_call(
            "aclrtNotifySetImportPid",
            107_000,
            Some("notify was not exported\n".into()),
        )
        .context("notify handle 0x42");
        assert_eq!(e.kind(), Error::ParamInvalid);
        assert_eq!(e.function(), Some("aclrtNotifySetImportPid"));
        assert_eq!(
            e.to_string(),
            "aclrtNotifySetImportPid failed with ACL_ERROR_RT_PARAM_INVALID (107000): \
             notify handle 0x42; the runtime says: notify was not exported"
        );
        let blank = DriverError::from_call("aclrtCreateNotify", 207_009, Some("  ".into()));
        assert_eq!(blank.recent_message(), None);
        assert_eq!(
            DriverError::from(Error::InvalidHandle).to_string(),
            "ACL_ERROR_RT_INVALID_HANDLE (107017)"
        );
    }
}

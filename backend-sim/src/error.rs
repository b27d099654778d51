//! [`SimError`]: a CANN code plus a human explanation of what went wrong.

use std::fmt;

use acl_notify_core::{BackendError, Error};

/// The simulator's error: the CANN code ([`BackendError::kind`]) and a message explaining the
/// failure (which notify, device, PIDs, file…). `Display` shows both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimError {
    kind: Error,
    msg: String,
}

impl SimError {
    /// An error with `kind` and an explanation.
    pub fn new(kind: Error, msg: impl Into<String>) -> SimError {
        SimError {
            kind,
            msg: msg.into(),
        }
    }

    /// The explanation (without the code).
    pub fn message(&self) -> &str {
        &self.msg
    }
}

impl From<Error> for SimError {
    fn from(kind: Error) -> SimError {
        SimError {
            kind,
            msg: String::new(),
        }
    }
}

impl BackendError for SimError {
    fn kind(&self) -> Error {
        self.kind
    }

    fn with_message(kind: Error, msg: fmt::Arguments<'_>) -> Self {
        SimError::new(kind, msg.to_string())
    }
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.msg.is_empty() {
            write!(f, "{}", self.kind)
        } else {
            write!(f, "{}: {}", self.kind, self.msg)
        }
    }
}

impl std::error::Error for SimError {}

/// A [`SimError`] of `kind` explaining `msg` (the short form every call site uses).
pub(crate) fn err(kind: Error, msg: impl Into<String>) -> SimError {
    SimError::new(kind, msg)
}

/// 107017 for a handle of kind `what` ("notify", "stream", "count notify", "event") that is
/// not a live one of this process.
pub(crate) fn not_live(what: &str, handle: u64) -> SimError {
    err(
        Error::InvalidHandle,
        format!(
            "{what} handle {handle:#x} is not a live {what} of this process (destroyed, stale, \
             of another Sim, or garbage)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_has_code_and_message() {
        let e = SimError::new(Error::InvalidHandle, "notify handle 0x5 is stale");
        assert_eq!(e.kind(), Error::InvalidHandle);
        assert_eq!(
            e.to_string(),
            "ACL_ERROR_RT_INVALID_HANDLE (107017): notify handle 0x5 is stale"
        );
        assert_eq!(
            SimError::from(Error::NoPermission).to_string(),
            "ACL_ERROR_RT_NO_PERMISSION (207006)"
        );
    }
}

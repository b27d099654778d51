//! Timeouts: the wait-and-reset timeout (whole seconds, forever, or the process default) and the
//! synchronize deadline.

use core::num::NonZeroU32;
use core::time::Duration;

/// The timeout of a wait-and-reset task, as CANN's `uint32_t timeout` argument encodes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Timeout {
    /// Wait until recorded (C value 0).
    Forever,
    /// Fail the task after this many whole seconds without a record (C value N).
    Seconds(NonZeroU32),
    /// Use the process default set by `aclrtSetOpWaitTimeout` (C value `UINT32_MAX`).
    ProcessDefault,
}

impl Timeout {
    /// Decodes CANN's encoding: 0 forever, `u32::MAX` the process default, else seconds.
    pub const fn from_c(raw: u32) -> Self {
        match raw {
            u32::MAX => Timeout::ProcessDefault,
            n => match NonZeroU32::new(n) {
                Some(s) => Timeout::Seconds(s),
                None => Timeout::Forever,
            },
        }
    }

    /// Encodes back to CANN's `uint32_t`.
    pub const fn to_c(self) -> u32 {
        match self {
            Timeout::Forever => 0,
            Timeout::Seconds(s) => s.get(),
            Timeout::ProcessDefault => u32::MAX,
        }
    }

    /// Replaces `ProcessDefault` by the process default (itself a C value set by
    /// `aclrtSetOpWaitTimeout`, where 0 means forever).
    pub const fn resolve(self, process_default_secs: u32) -> Timeout {
        match self {
            Timeout::ProcessDefault => match NonZeroU32::new(process_default_secs) {
                Some(s) => Timeout::Seconds(s),
                None => Timeout::Forever,
            },
            t => t,
        }
    }

    /// The duration after which a resolved timeout fires; `None` for forever (and for an
    /// unresolved `ProcessDefault`, which callers must [`resolve`](Self::resolve) first).
    pub const fn duration(self) -> Option<Duration> {
        match self {
            Timeout::Seconds(s) => Some(Duration::from_secs(s.get() as u64)),
            _ => None,
        }
    }
}

/// How long a synchronize may block (`aclrtSynchronizeStreamWithTimeout`'s `int32_t` ms).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SyncWait {
    /// Block until the stream is idle (C value −1, and plain `aclrtSynchronizeStream`).
    Forever,
    /// Block at most this long; `Duration::ZERO` polls. Expiry is `StreamSyncTimeout` (507046).
    AtMost(Duration),
}

/// For messages a C caller reads: "forever", or the bound as C gave it ("50 ms", "12 s").
impl core::fmt::Display for SyncWait {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SyncWait::Forever => f.write_str("forever"),
            SyncWait::AtMost(d) if !d.is_zero() && d.subsec_nanos() == 0 => {
                write!(f, "{} s", d.as_secs())
            }
            SyncWait::AtMost(d) if d.subsec_nanos() % 1_000_000 == 0 => {
                write!(f, "{} ms", d.as_millis())
            }
            SyncWait::AtMost(d) => write!(f, "{} us", d.as_micros()),
        }
    }
}

impl SyncWait {
    /// Decodes the C millisecond argument: −1 forever, 0 poll, N > 0 milliseconds. Other
    /// negative values are `None` (the caller answers `ParamInvalid`).
    pub const fn from_c_ms(ms: i32) -> Option<Self> {
        match ms {
            -1 => Some(SyncWait::Forever),
            0.. => Some(SyncWait::AtMost(Duration::from_millis(ms as u64))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_wait_displays_as_c_gave_it() {
        assert_eq!(std::format!("{}", SyncWait::Forever), "forever");
        assert_eq!(
            std::format!("{}", SyncWait::from_c_ms(50).unwrap()),
            "50 ms"
        );
        assert_eq!(
            std::format!("{}", SyncWait::from_c_ms(12_000).unwrap()),
            "12 s"
        );
        assert_eq!(
            std::format!("{}", SyncWait::from_c_ms(1_500).unwrap()),
            "1500 ms"
        );
        assert_eq!(std::format!("{}", SyncWait::from_c_ms(0).unwrap()), "0 ms");
    }

    #[test]
    fn c_encoding_round_trips() {
        for raw in [0u32, 1, 2, 3600, u32::MAX - 1, u32::MAX] {
            assert_eq!(Timeout::from_c(raw).to_c(), raw);
        }
        assert_eq!(Timeout::from_c(0), Timeout::Forever);
        assert_eq!(Timeout::from_c(u32::MAX), Timeout::ProcessDefault);
    }

    #[test]
    fn process_default_resolves() {
        assert_eq!(Timeout::ProcessDefault.resolve(0), Timeout::Forever);
        assert_eq!(
            Timeout::ProcessDefault.resolve(5).duration(),
            Some(Duration::from_secs(5))
        );
        assert_eq!(Timeout::Forever.resolve(5), Timeout::Forever);
    }

    #[test]
    fn sync_wait_decoding() {
        assert_eq!(SyncWait::from_c_ms(-1), Some(SyncWait::Forever));
        assert_eq!(
            SyncWait::from_c_ms(0),
            Some(SyncWait::AtMost(Duration::ZERO))
        );
        assert_eq!(
            SyncWait::from_c_ms(250),
            Some(SyncWait::AtMost(Duration::from_millis(250)))
        );
        assert_eq!(SyncWait::from_c_ms(-2), None);
    }
}

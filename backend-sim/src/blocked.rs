//! [`Blocked`]: what a stream's running task is blocked on, packed into the note word the stream
//! engine keeps ([`TaskCtx::set_blocked_on`](crate::stream::TaskCtx::set_blocked_on)), so that a
//! queue that stays full, a report or the inspector can say why.

/// What a stream's running task blocks on, as noted for the stream engine
/// ([`TaskCtx::set_blocked_on`]) so that a queue that stays full can say why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// A wait on notify `id` of device `dev` (`forever`: with no timeout).
    Wait { dev: u32, id: u32, forever: bool },
    /// A count-notify wait on count notify `id` of device `dev`.
    CntWait { dev: u32, id: u32, forever: bool },
    /// A host function that has not returned.
    HostFunction,
    /// A value wait (`aclrtValueWait`) on device memory of device `dev` (`low`: the low 32
    /// bits of the address), which has no timeout.
    ValueWait { dev: u32, low: u32 },
}

impl Blocked {
    /// Bits 60–62 the kind, 59 "no timeout", 32–47 the device, 0–31 the id (never 0).
    pub(crate) fn note(self) -> u64 {
        let (kind, dev, id, forever) = match self {
            Blocked::Wait { dev, id, forever } => (1, dev, id, forever),
            Blocked::CntWait { dev, id, forever } => (2, dev, id, forever),
            Blocked::HostFunction => (3, 0, 0, false),
            Blocked::ValueWait { dev, low } => (4, dev, low, true),
        };
        (kind << 60) | (u64::from(forever) << 59) | (u64::from(dev & 0xffff) << 32) | u64::from(id)
    }

    pub(crate) fn from_note(note: u64) -> Option<Blocked> {
        let (dev, id, forever) = (
            ((note >> 32) & 0xffff) as u32,
            note as u32,
            note & (1 << 59) != 0,
        );
        match note >> 60 {
            1 => Some(Blocked::Wait { dev, id, forever }),
            2 => Some(Blocked::CntWait { dev, id, forever }),
            3 => Some(Blocked::HostFunction),
            4 => Some(Blocked::ValueWait { dev, low: id }),
            _ => None,
        }
    }

    /// "a wait on notify 17 of device 0 with no timeout" and the like.
    pub(crate) fn describe(note: u64) -> String {
        let timeout = |forever| {
            if forever {
                "with no timeout"
            } else {
                "with a timeout"
            }
        };
        match Blocked::from_note(note) {
            Some(Blocked::Wait { dev, id, forever }) => format!(
                "is a wait on notify id {id} of device {dev} {}, asleep until that notify is \
                 recorded",
                timeout(forever)
            ),
            Some(Blocked::CntWait { dev, id, forever }) => format!(
                "is a wait on count notify id {id} of device {dev} {}, asleep until its \
                 condition holds",
                timeout(forever)
            ),
            Some(Blocked::HostFunction) => "is a host function that has not returned".into(),
            Some(Blocked::ValueWait { dev, low }) => format!(
                "is a value wait (aclrtValueWait) on device memory of device {dev} (address \
                 ending {low:#010x}) with no timeout, asleep until its condition holds"
            ),
            None => "has not finished".into(),
        }
    }
}

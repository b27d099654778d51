//! [`StreamPin`]: the counted reference to a notify that a stream's queued records and waits
//! hold (made and kept by the notify's handle entry, `entries`).

use std::sync::Arc;

use crate::shm::SlotRef;
use crate::waitgraph;

/// A stream's counted reference to a notify (see [`NotifyEntry::pin`]).
///
/// Aligned to a cache line, so that in its `Arc` the counters and the notify reference lie on
/// different lines: a host thread queuing records or waits increments the counter for each
/// one, and the stream's worker reads the reference for each one it runs; on one line, the
/// line moved between their CPUs for every task. A probe with a host thread queuing records
/// into a stream whose worker ran on the other CPU, 4 rounds of each build in turns: 42.7–45.1
/// ns a record aligned against 42.6–69.6 ns not, and 71–75 against 109–110 ns in the minutes
/// when lines moved slowly between the CPUs. It costs 64 bytes more per pin (one per notify
/// and stream that have met in a task).
pub(crate) struct StreamPin(pub(crate) Arc<SlotRef>);

impl StreamPin {
    /// The notify as the wait-for graph names it.
    #[inline]
    pub(crate) fn target(&self) -> waitgraph::Target {
        let r = &self.0;
        waitgraph::Target::notify(r.file().server(), r.device(), r.id())
    }
}

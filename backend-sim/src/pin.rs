//! [`StreamPin`]: the counted reference to a notify that a stream's queued records and waits
//! hold (made and kept by the notify's handle entry, `entries`).

use std::sync::Arc;

use crate::shm::SlotRef;
use crate::waitgraph;

/// A stream's counted reference to a notify (see [`NotifyEntry::pin`]).
pub(crate) struct StreamPin(pub(crate) Arc<SlotRef>);

impl StreamPin {
    /// The notify as the wait-for graph names it.
    #[inline]
    pub(crate) fn target(&self) -> waitgraph::Target {
        let r = &self.0;
        waitgraph::Target::notify(r.file().server(), r.device(), r.id())
    }
}

//! How busy a device's streams have been: what `aclrtGetDeviceUtilizationRate` is computed
//! from. Each stream's worker keeps the time it slept for lack of work (the one hook in the
//! stream engine, `stream::worker::Idle`); a stream's busy time is its age less that.

use std::sync::Arc;

use crate::job::SimStream;
use crate::locks::read;
use crate::sim::Sim;
use crate::sys;

/// One stream's reading ([`Sim::streams_busy_ns`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamBusy {
    /// The stream's handle.
    pub handle: u64,
    /// When it was made (`sys::now_ns`).
    pub born: u64,
    /// Nanoseconds busy since.
    pub busy: u64,
}

impl Sim {
    /// The live streams of `device` (created and default ones), each with when it was made and
    /// the nanoseconds it has been busy since, read at one `now` (`sys::now_ns`), which is
    /// returned with them. A stream is named by its handle; a handle comes back only after its
    /// slot's 2²⁰ reuses, so a caller comparing two readings by handle may take one stream for
    /// another once in that many destroys.
    pub fn streams_busy_ns(&self, device: u32) -> (u64, Vec<StreamBusy>) {
        // The streams are taken out first: the table's lock is not held while they are read.
        let streams: Vec<(u64, Arc<SimStream>)> = read(&self.inner.streams)
            .iter()
            .filter(|(_, e)| e.device == device)
            .map(|(h, e)| (h, Arc::clone(&e.stream)))
            .collect();
        let now = sys::now_ns();
        let busy = streams
            .iter()
            .map(|(h, s)| StreamBusy {
                handle: *h,
                born: s.born_ns(),
                busy: s.busy_ns(now),
            })
            .collect();
        (now, busy)
    }
}

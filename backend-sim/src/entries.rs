//! Handle entries of a `Sim`: the process-local notify and stream tables, the per-stream pins
//! that keep a notify alive for queued tasks. The tables are `acl_notify_handles` slabs,
//! salted per `Sim` (`config`), which tells `Sim`s apart.

use std::sync::Arc;

use acl_notify_core::{Lifecycle, RawNotify, RawStream};

use crate::error::{SimError, not_live};
use crate::job::SimStream;
use crate::pin::StreamPin;
use crate::shm::SlotRef;
use crate::waitgraph;

pub(crate) struct NotifyEntry {
    pub(crate) r: Arc<SlotRef>,
    pub(crate) state: Lifecycle,
    /// The device this handle lives on (an importer's own device).
    pub(crate) device: u32,
    /// References for the tasks of the streams that last used this handle (changed under the
    /// notify table's write lock only, so a record or wait reads them under its read lock).
    pub(crate) pins: Pins,
}

impl NotifyEntry {
    pub(crate) fn new(r: Arc<SlotRef>, state: Lifecycle, device: u32) -> Self {
        NotifyEntry {
            r,
            state,
            device,
            pins: Pins::default(),
        }
    }

    /// The reference a task of `stream` holds on this notify: the stream's own pin (made on
    /// first use), so that the counter it bumps and drops is shared with that stream's worker
    /// only — not with every thread and worker that uses the notify, as the counter of the
    /// `Arc<SlotRef>` is (on a notify bounced between two streams, that counter would cross
    /// between their CPUs twice per task). Pins hold the notify as strongly as a clone of the
    /// `Arc<SlotRef>` would; they die with this entry and the tasks that hold them.
    ///
    /// `None` if `stream` has no pin yet: make one with [`new_pin`](Self::new_pin).
    pub(crate) fn pin(&self, stream: RawStream) -> Option<Arc<StreamPin>> {
        self.pins
            .slots
            .iter()
            .find(|(h, _)| *h == stream.0)
            .and_then(|(_, pin)| pin.as_ref().map(Arc::clone))
    }

    /// The pin of `stream`, made if it has none (replacing the oldest of [`PINS`]).
    pub(crate) fn new_pin(&mut self, stream: RawStream) -> Arc<StreamPin> {
        if let Some(pin) = self.pin(stream) {
            return pin;
        }
        let pin = Arc::new(StreamPin(Arc::clone(&self.r)));
        let p = &mut self.pins;
        let i = p.next;
        p.slots[i] = (stream.0, Some(Arc::clone(&pin)));
        p.next = (i + 1) % PINS;
        pin
    }
}

/// Streams per notify handle whose pins are kept (the oldest is replaced).
pub(crate) const PINS: usize = 4;

/// A notify handle's pins, by stream handle.
#[derive(Default)]
pub(crate) struct Pins {
    pub(crate) slots: [(u64, Option<Arc<StreamPin>>); PINS],
    pub(crate) next: usize,
}

pub(crate) struct StreamEntry {
    pub(crate) stream: Arc<SimStream>,
    pub(crate) device: u32,
    pub(crate) default: bool,
    /// The stream's entry in the wait-for graph (`None`: not published).
    pub(crate) graph: Option<Arc<waitgraph::StreamSlot>>,
}

pub(crate) fn bad_notify(h: RawNotify) -> SimError {
    not_live("notify", h.0)
}

pub(crate) fn bad_stream(h: RawStream) -> SimError {
    not_live("stream", h.0)
}

/// A snapshot of one notify handle, taken under the table lock.
pub(crate) struct NotifyView {
    pub(crate) r: Arc<SlotRef>,
    pub(crate) state: Lifecycle,
    pub(crate) device: u32,
}

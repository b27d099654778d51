//! Handle entries of a `Sim`: the process-local notify and stream tables, the per-stream pins
//! that keep a notify alive for queued tasks. The tables are `acl_notify_handles` slabs,
//! salted per `Sim` (`config`), which tells `Sim`s apart.

use std::sync::Arc;

use acl_notify_core::{Lifecycle, RawNotify, RawStream};

use crate::error::{SimError, not_live};
use crate::job::SimJob;
use crate::job::SimStream;
use crate::pin::{PinRef, StreamPin};
use crate::shm::SlotRef;
use crate::stream::Keeper;
use crate::waitgraph;

pub(crate) struct NotifyEntry {
    pub(crate) r: Arc<SlotRef>,
    pub(crate) state: Lifecycle,
    /// The device this handle lives on (an importer's own device).
    pub(crate) device: u32,
    /// The pins of the streams that last used this handle, which their tasks use (changed
    /// under the notify table's write lock only, so a record or wait reads them under its
    /// read lock; see `crate::pin`).
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

    /// The pin that tasks of `stream` use on this notify (see `crate::pin`): the stream's
    /// own, so that what its worker reads for each task is shared with no other worker.
    ///
    /// `None` if `stream` has no pin yet: make one with [`new_pin`](Self::new_pin).
    pub(crate) fn pin(&self, stream: RawStream) -> Option<&PinOwner> {
        self.pins
            .slots
            .iter()
            .find(|(h, _)| *h == stream.0)
            .and_then(|(_, pin)| pin.as_ref())
            .filter(|p| p.is_current())
    }

    /// The pin of `stream`, made if it has none (replacing the oldest of [`PINS`], which goes
    /// to its stream's keeper: `crate::pin`); `keeper` is the stream's.
    pub(crate) fn new_pin(
        &mut self,
        stream: RawStream,
        keeper: impl FnOnce() -> Keeper<SimError, SimJob>,
    ) -> &PinOwner {
        let p = &mut self.pins;
        let at = p
            .slots
            .iter()
            .position(|(h, pin)| *h == stream.0 && pin.is_some());
        let i = match at {
            Some(i) if p.slots[i].1.as_ref().is_some_and(PinOwner::is_current) => i,
            stale => {
                // A pin under this handle of a stream that was destroyed (the handle's value
                // came back for a new stream) is replaced in place.
                let i = stale.unwrap_or(p.next);
                if stale.is_none() {
                    p.next = (i + 1) % PINS;
                }
                let owner = PinOwner::new(Arc::clone(&self.r), keeper());
                // The replaced pin's owner, if any, drops here (under the table's write
                // lock: the pin is unreachable already), handing it to its stream's keeper.
                p.slots[i] = (stream.0, Some(owner));
                i
            }
        };
        p.slots[i].1.as_ref().expect("set above")
    }
}

/// A handle entry's ownership of a pin: dropping it hands the pin to its stream's keeper
/// (see `crate::pin`).
pub(crate) struct PinOwner {
    /// `None` only during the drop.
    pin: Option<Box<StreamPin>>,
    keeper: Keeper<SimError, SimJob>,
}

impl PinOwner {
    /// A pin on `r` for the stream of `keeper`.
    pub(crate) fn new(r: Arc<SlotRef>, keeper: Keeper<SimError, SimJob>) -> Self {
        PinOwner {
            pin: Some(Box::new(StreamPin(r))),
            keeper,
        }
    }

    /// The pin's address, for tasks (see [`PinRef`]).
    pub(crate) fn pin_ref(&self) -> PinRef {
        PinRef::of(self.pin())
    }

    /// Whether the pin's stream still has its handle (not destroyed): a pin found by a
    /// stream handle is that stream's only then (a handle's value comes back after its slot's
    /// generation wrapped, 2²⁰ destroys later). Streams are unlisted under the stream
    /// table's write lock, before the slot can be reused.
    pub(crate) fn is_current(&self) -> bool {
        !self.keeper.is_unlisted()
    }

    /// The pin.
    pub(crate) fn pin(&self) -> &StreamPin {
        self.pin.as_ref().expect("a pin until dropped")
    }
}

impl Drop for PinOwner {
    fn drop(&mut self) {
        // 1. The bump: the pin is unreachable from the table already (its entry or slot is
        // gone); an enqueuer that found it before reads a changed epoch after its claim.
        crate::pair_cache::removed();
        // 2. Counted after the bump: every task that may use the pin.
        if let Some(pin) = self.pin.take() {
            self.keeper.keep_until_done(pin);
        }
    }
}

/// Streams per notify handle whose pins are kept (the oldest is replaced).
pub(crate) const PINS: usize = 4;

/// A notify handle's pins, by stream handle.
#[derive(Default)]
pub(crate) struct Pins {
    pub(crate) slots: [(u64, Option<PinOwner>); PINS],
    pub(crate) next: usize,
}

pub(crate) struct StreamEntry {
    pub(crate) stream: Arc<SimStream>,
    pub(crate) device: u32,
    pub(crate) default: bool,
    /// The stream's entry in the wait-for graph (`None`: not published).
    pub(crate) graph: Option<Arc<waitgraph::StreamSlot>>,
    /// The failure scope it is bound to, if any (`crate::failure_scope`).
    pub(crate) scope: Arc<crate::failure_scope::ScopeSlot>,
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

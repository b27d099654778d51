//! Handle entries of a `Sim`: the process-local notify and stream tables, the per-stream pins
//! that keep a notify alive for queued tasks. The tables are `acl_notify_handles` slabs,
//! salted per `Sim` (`config`), which tells `Sim`s apart.

use std::sync::Arc;

use acl_notify_core::{Error, Lifecycle, RawNotify, RawStream, StreamDestroy};

use crate::error::SimError;
use crate::job::SimStream;
use crate::shm::SlotRef;
use crate::sim::{Sim, err, lock, read, write};
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

pub(crate) struct StreamEntry {
    pub(crate) stream: Arc<SimStream>,
    pub(crate) device: u32,
    pub(crate) default: bool,
    /// The stream's entry in the wait-for graph (`None`: not published).
    pub(crate) graph: Option<Arc<waitgraph::StreamSlot>>,
}

pub(crate) fn bad_notify(h: RawNotify) -> SimError {
    err(
        Error::InvalidHandle,
        format!(
            "notify handle {:#x} is not a live notify of this process (destroyed, stale, of \
             another Sim, or garbage)",
            h.0
        ),
    )
}

pub(crate) fn bad_stream(h: RawStream) -> SimError {
    err(
        Error::InvalidHandle,
        format!(
            "stream handle {:#x} is not a live stream of this process (destroyed, stale, of \
             another Sim, or garbage)",
            h.0
        ),
    )
}

/// A snapshot of one notify handle, taken under the table lock.
pub(crate) struct NotifyView {
    pub(crate) r: Arc<SlotRef>,
    pub(crate) state: Lifecycle,
    pub(crate) device: u32,
}

impl Sim {
    /// What every [`RawNotify`] this `Sim` hands out has in common (kind and this `Sim`'s
    /// random salt): lets a layer above reject a handle of another kind, `Sim` or process
    /// before any other check, without a lookup. Whether a handle is live is
    /// [`notify_is_live`](Self::notify_is_live)'s to say.
    pub fn notify_stamp(&self) -> acl_notify_handles::Stamp {
        read(&self.inner.notifies).stamp()
    }

    /// Whether `notify` is a live notify handle of this `Sim` (no SoC check, no other effect).
    pub fn notify_is_live(&self, notify: RawNotify) -> bool {
        read(&self.inner.notifies).get(notify.0).is_some()
            || self
                .inner
                .cluster
                .as_ref()
                .is_some_and(|c| c.get(notify.0).is_some())
    }

    /// Destroys every notify handle whose device (the creator's device, or an importer's own
    /// device) satisfies `which`, as [`destroy_notify`](acl_notify_core::NotifyResources::destroy_notify) does
    /// one by one; returns how many.
    pub fn destroy_notifies_where(&self, mut which: impl FnMut(u32) -> bool) -> usize {
        let gone = write(&self.inner.notifies).remove_where(|e| which(e.device));
        // The references are dropped outside the table lock, as in `destroy_notify`.
        let n = gone.len();
        drop(gone);
        n
    }

    /// Discards every stream whose device satisfies `which` — default streams included
    /// (the device's next default stream is a new one), and streams a draining destroy on
    /// another thread is still working through (that destroy then returns 107017) — as a
    /// device reset or the end of a session does. Every stream concerned is cancelled first,
    /// and only then are their workers waited for: a task of one (a host function
    /// synchronizing another stream, say) may be waiting for another. Returns how many
    /// streams were discarded.
    pub fn discard_streams_where(&self, mut which: impl FnMut(u32) -> bool) -> usize {
        let mut streams: Vec<Arc<SimStream>> = Vec::new();
        {
            // Lock order as in `default_stream`: defaults, then the table.
            let mut defaults = lock(&self.inner.defaults);
            let mut table = write(&self.inner.streams);
            for e in table.remove_where(|e| which(e.device)) {
                if e.default
                    && let Some(slot) = defaults.get_mut(e.device as usize)
                {
                    *slot = None;
                }
                streams.push(e.stream);
            }
            streams.extend(
                lock(&self.inner.draining)
                    .iter()
                    .filter(|(_, device)| which(*device))
                    .map(|(s, _)| Arc::clone(s)),
            );
        }
        for s in &streams {
            let _ = s.begin_destroy(StreamDestroy::Discard);
        }
        for s in &streams {
            s.wait_destroyed();
        }
        lock(&self.inner.draining).retain(|(d, _)| !d.has_exited());
        streams.len()
    }

    pub(crate) fn notify(&self, h: RawNotify) -> Result<NotifyView, SimError> {
        let t = read(&self.inner.notifies);
        let e = t.get(h.0).ok_or_else(|| bad_notify(h))?;
        e.r.live()?;
        Ok(NotifyView {
            r: Arc::clone(&e.r),
            state: e.state,
            device: e.device,
        })
    }

    pub(crate) fn stream(&self, h: RawStream) -> Result<(Arc<SimStream>, u32), SimError> {
        let t = read(&self.inner.streams);
        let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
        Ok((Arc::clone(&e.stream), e.device))
    }

    /// Moves handle `h` from lifecycle state `from` (what the call read when it began) to
    /// `to`, under the table's write lock. A handle destroyed meanwhile, or moved on by a
    /// concurrent call, is left alone: the shared slot's own compare-and-swaps decided which
    /// call won, and the handle never goes back to an earlier state.
    pub(crate) fn set_state(&self, h: RawNotify, from: Lifecycle, to: Lifecycle) {
        if let Some(e) = write(&self.inner.notifies).get_mut(h.0)
            && e.state == from
        {
            e.state = to;
        }
    }

    pub(crate) fn insert_notify(&self, e: NotifyEntry) -> Result<RawNotify, SimError> {
        write(&self.inner.notifies)
            .insert(e)
            .ok()
            .map(RawNotify)
            .ok_or_else(|| err(Error::ResourceAllocFail, "notify handle table is full"))
    }

    /// The pin of `stream` on notify `h` (see [`NotifyEntry::pin`]).
    pub(crate) fn pin(&self, h: RawNotify, stream: RawStream) -> Result<Arc<StreamPin>, SimError> {
        {
            let t = read(&self.inner.notifies);
            if let Some(pin) = t.get(h.0).ok_or_else(|| bad_notify(h))?.pin(stream) {
                return Ok(pin);
            }
        }
        let mut t = write(&self.inner.notifies);
        Ok(t.get_mut(h.0).ok_or_else(|| bad_notify(h))?.new_pin(stream))
    }
}

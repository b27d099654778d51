//! Finding a handle's entry: the notify and stream lookups of a [`Sim`] (kind, salt,
//! generation and index checked by the slab), with the pins a stream's tasks take.

use std::cell::Cell;
use std::sync::Arc;

use acl_notify_core::{Error, Lifecycle, RawNotify, RawStream, StreamDestroy};

use crate::entries::{NotifyEntry, NotifyView, bad_notify, bad_stream};
use crate::error::{SimError, err};
use crate::failure_scope::FailureScope;
use crate::job::{SimJob, SimStream};
use crate::locks::{lock, read, write};
use crate::pair_cache;
use crate::pin::{NotifyName, PinRef};
use crate::sim::Sim;

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
        self.notifies_removed();
        // The references are dropped outside the table lock, as in `destroy_notify`.
        let n = gone.len();
        drop(gone);
        n
    }

    /// `device`'s default stream if it has been made and not discarded since (without
    /// making one, as [`default_stream`](acl_notify_core::StreamOps::default_stream) would).
    pub fn made_default_stream(&self, device: u32) -> Option<RawStream> {
        lock(&self.inner.defaults)
            .get(device as usize)
            .copied()
            .flatten()
            .map(RawStream)
    }

    /// Aborts every live stream whose device satisfies `which` — default streams included —
    /// as `aclrtStreamAbort` aborts one: the queued tasks are dropped unrun, the running one
    /// (a wait) is ended, and the streams stay usable (`aclrtDeviceTaskAbort`). Streams that a
    /// destroy is working through are left to it. Returns how many streams were aborted.
    pub fn abort_streams_where(&self, mut which: impl FnMut(u32) -> bool) -> usize {
        let streams: Vec<Arc<SimStream>> = read(&self.inner.streams)
            .values()
            .filter(|e| which(e.device))
            .map(|e| Arc::clone(&e.stream))
            .collect();
        // Outside the table lock: an abort waits for nothing, but a task it ends may run code
        // that looks streams up.
        streams.iter().filter(|s| s.abort().is_ok()).count()
    }

    /// Stops stream `stream` (`aclrtStreamStop`, [`crate::stream::Stream::stop`]): its
    /// running task is cut short, its queued tasks and those queued later are kept unrun
    /// until [`abort`](acl_notify_core::StreamControl::abort) drops them (the stream then
    /// runs again) or a destroy discards them. Returns at once.
    ///
    /// Codes: 107017 not a live stream of this `Sim`, or being destroyed.
    pub fn stop_stream(&self, stream: RawStream) -> Result<(), SimError> {
        let (s, _) = self.stream(stream)?;
        s.stop().map_err(|_| {
            err(
                Error::InvalidHandle,
                format!("stream {:#x} is being destroyed", stream.0),
            )
        })
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
                e.stream.unlist();
                if e.default
                    && let Some(slot) = defaults.get_mut(e.device as usize)
                {
                    *slot = None;
                }
                streams.push(e.stream);
            }
            self.streams_removed();
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
            // A thread's pair cache may keep the stream's memory (`pair_cache`) until its
            // next record or wait; this thread's lets go here.
            s.release_kept();
        }
        lock(&self.inner.draining).retain(|(d, _)| !d.has_exited());
        let n = streams.len();
        drop(streams);
        crate::pair_cache::drop_stale();
        n
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

    /// Stream `h` and the failure scope slot it is bound through (`crate::failure_scope`).
    pub(crate) fn stream_in_scope(
        &self,
        h: RawStream,
    ) -> Result<(Arc<SimStream>, Arc<crate::failure_scope::ScopeSlot>), SimError> {
        let t = read(&self.inner.streams);
        let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
        Ok((Arc::clone(&e.stream), Arc::clone(&e.scope)))
    }

    /// The failure scope slot of stream `h` (`crate::failure_scope`).
    pub(crate) fn stream_scope_slot(
        &self,
        h: RawStream,
    ) -> Result<Arc<crate::failure_scope::ScopeSlot>, SimError> {
        let t = read(&self.inner.streams);
        let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
        Ok(Arc::clone(&e.scope))
    }

    /// Binds `stream` to `scope` (`None`: to none) from now on.
    ///
    /// Codes: 107017 `stream` is not a live stream of this `Sim`.
    pub fn set_failure_scope(
        &self,
        stream: RawStream,
        scope: Option<Arc<FailureScope>>,
    ) -> Result<(), SimError> {
        let slot = self.stream_scope_slot(stream)?;
        slot.set(scope);
        Ok(())
    }

    /// Binds device `device`'s default stream, the one there is now and those made later
    /// (after a reset), to `scope` (`None`: to none). Does nothing for a device this `Sim`
    /// does not have.
    pub fn set_default_failure_scope(&self, device: u32, scope: Option<Arc<FailureScope>>) {
        if let Some(slot) = self.inner.default_scopes.get(device as usize) {
            slot.set(scope);
        }
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

    /// The pin of `stream` on `h` and the notify's name, read under the table's lock (a
    /// pin made if the stream has none; the stream must be live then).
    pub(crate) fn pin_from_table(
        &self,
        h: RawNotify,
        stream: RawStream,
    ) -> Result<(PinRef, NotifyName), SimError> {
        {
            let t = read(&self.inner.notifies);
            if let Some(p) = t.get(h.0).ok_or_else(|| bad_notify(h))?.pin(stream) {
                return Ok((p.pin_ref(), p.pin().name()));
            }
        }
        let keeper = self.stream(stream)?.0.keeper();
        let mut t = write(&self.inner.notifies);
        let e = t.get_mut(h.0).ok_or_else(|| bad_notify(h))?;
        let p = e.new_pin(stream, || keeper);
        Ok((p.pin_ref(), p.pin().name()))
    }

    /// A record's or wait's `on_claim` (see `Stream::enqueue_job_with`): `job`, its ticket
    /// claimed, if its pin, found under handle epoch `epoch` (`pair_cache`), may be used by it — the epoch
    /// unchanged since, or the pin found again in the table now (see `crate::pin` for why
    /// that is enough); else [`SimJob::Refused`], and `refused` set (the notify handle `h`,
    /// or its pin for `stream`, went). Never panics.
    #[inline(always)]
    pub(crate) fn claim_pinned(
        &self,
        job: SimJob,
        epoch: u64,
        h: RawNotify,
        stream: RawStream,
        refused: &Cell<bool>,
    ) -> SimJob {
        // Sequentially consistent: after the claim (a sequentially consistent
        // read-modify-write) in the single total order, and so before or after a pin owner's
        // bump as the pin module's argument needs.
        if pair_cache::epoch() == epoch {
            job
        } else {
            self.reclaim_pinned(job, h, stream, refused)
        }
    }

    /// [`claim_pinned`](Self::claim_pinned) after a notify handle or pin went: the pin looked
    /// up again in the table, after the claim.
    #[cold]
    #[inline(never)]
    pub(crate) fn reclaim_pinned(
        &self,
        job: SimJob,
        h: RawNotify,
        stream: RawStream,
        refused: &Cell<bool>,
    ) -> SimJob {
        let t = read(&self.inner.notifies);
        match t.get(h.0).and_then(|e| e.pin(stream)) {
            Some(p) => job.with_pin(p.pin_ref()),
            None => {
                refused.set(true);
                SimJob::Refused
            }
        }
    }

    /// Marks the removal of notify handles for the threads' pair caches; called before the
    /// removing call returns.
    pub(crate) fn notifies_removed(&self) {
        pair_cache::removed();
    }
}

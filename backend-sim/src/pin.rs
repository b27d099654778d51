//! [`StreamPin`]: a stream's reference to a notify, which that stream's queued records and
//! waits use through a plain pointer ([`PinRef`]) — no reference count per task.
//!
//! # Why no count per task
//!
//! Each queued record or wait held an `Arc<StreamPin>`: the host thread incremented its
//! count when it queued the task, and the stream's worker decremented it after running it
//! (16 tasks at a time), so the count's cache line crossed between the host's and the
//! worker's CPU for every task — in the minutes when a line took long to cross, most of a
//! `Sim::record` (an experiment that skipped the count read 20–25 ns where the count read
//! 69–73 ns, same minutes).
//!
//! # Who keeps a pin, and for how long
//!
//! A pin is owned by its notify handle's entry (`entries::PinOwner`, in `entries::Pins`) while the
//! handle lives and keeps the pin (a handle keeps the pins of its last four streams). When
//! the entry lets it go — the handle destroyed, the device reset, the session ended, or the
//! pin replaced by a fifth stream's — the owner's drop
//!
//! 1. bumps the process's handle epoch (`pair_cache::removed`, sequentially consistent), after
//!    the pin became unreachable from the table, and
//! 2. hands the pin to its stream's keeper (`stream::Keeper::keep_until_done`), which drops it
//!    once every task issued on the stream so far (read after the bump) has retired: at
//!    once if they have, else when the worker retires the last of them, at the latest when
//!    the worker exits.
//!
//! A task may use the pin's pointer only if its ticket was claimed before that hand-over
//! counted the stream's tickets. The enqueuing thread makes sure of it: it found the pin
//! under handle epoch `e` (read before the lookup: `pair_cache`, `Sim::enqueue_pair_slow`),
//! and once the stream's queue has claimed its ticket (a sequentially consistent
//! read-modify-write) it reads the epoch again, before the task is published (the queue's
//! `on_claim`, `Sim::claim_pinned`; or the same check in `Sim::enqueue_pair`'s fast path
//! between `Stream::claim_fast` and `Stream::publish`). Still `e`: no owner let a pin go between the lookup and now, so the
//! pin was in its entry at the lookup, and any later hand-over bumps the epoch after this
//! read and so counts the stream's tickets after the claim — the task is among them. Not
//! `e` (some notify handle went, perhaps another): the thread looks the pin up again in
//! the notify table under its read lock, after the claim; a pin found there is covered the
//! same way (its hand-over comes after the write lock that removes it, so after the claim);
//! if there is none (the handle or the pin went) the task is replaced by
//! [`SimJob::Refused`](crate::job::SimJob::Refused), which does nothing, and the call looks
//! again from the start (and fails with 107017 if the handle is gone).
//!
//! An entry finds its pins by stream handle, and a handle's value comes back for a new
//! stream once its slot's generation has wrapped (2²⁰ destroys of one slot): a pin whose
//! stream was destroyed would then be found for the new one, and its hand-over would count
//! the dead stream's tickets, not the new stream's. So a stream's removal from the table
//! unlists it (`Stream::unlist`, under the table's write lock) and bumps the handle epoch,
//! and a pin of an unlisted stream is never found (`PinOwner::is_current`); it is replaced
//! in place by the new stream's.
//!
//! So a pin, and the notify it holds, outlive every task that uses it, and go when the
//! last of those tasks has retired: a destroyed notify's slot returns to the pool once the
//! tasks queued before the destroy on the streams that used it have run — at once on an
//! idle stream, and when the stream is destroyed at the latest. (With counts it went with
//! the last task that used it; a stream that stays blocked on another notify now keeps it
//! until that wait ends.)

use std::ptr::NonNull;
use std::sync::Arc;

use crate::shm::SlotRef;
use crate::waitgraph;

/// A stream's reference to a notify (see the module docs).
///
/// Aligned to a cache line of its own: the stream's worker reads it for every record and
/// wait it runs, and nothing else should share the line with it.
#[repr(align(64))]
pub(crate) struct StreamPin(pub(crate) Arc<SlotRef>);

impl StreamPin {
    /// The notify as the wait-for graph names it.
    #[inline]
    pub(crate) fn target(&self) -> waitgraph::Target {
        self.name().target()
    }

    /// The notify's name.
    #[inline]
    pub(crate) fn name(&self) -> NotifyName {
        let r = &self.0;
        NotifyName {
            server: r.file().server(),
            device: r.device(),
            id: r.id(),
        }
    }
}

/// A notify's server, device and id, as the host reads them for a record's or wait's checks
/// before its claim (nothing reads the pin then): the wait-for graph's
/// [`waitgraph::Target`] without its kind, twelve bytes that copy in two moves (a `Target`,
/// whose one-byte kind sits in padding, took ten instructions a copy, several copies a call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NotifyName {
    pub(crate) server: u32,
    pub(crate) device: u32,
    pub(crate) id: u32,
}

impl NotifyName {
    /// The notify as the wait-for graph names it.
    #[inline]
    pub(crate) fn target(self) -> waitgraph::Target {
        waitgraph::Target::notify(self.server, self.device, self.id)
    }
}

/// A queued task's pointer to its stream's pin on a notify (see the module docs).
#[derive(Clone, Copy)]
pub(crate) struct PinRef(NonNull<StreamPin>);

// SAFETY: a `StreamPin` is `Sync` (an `Arc<SlotRef>`, itself `Send + Sync`); the pointer is
// only dereferenced under the contract of `PinRef::get`.
unsafe impl Send for PinRef {}

impl PinRef {
    /// The address of `pin` (its owner's: `entries::PinOwner`).
    pub(crate) fn of(pin: &StreamPin) -> PinRef {
        PinRef(NonNull::from(pin))
    }

    /// A pointer that is never dereferenced, for tests of what holds one.
    #[cfg(test)]
    pub(crate) fn dangling() -> PinRef {
        PinRef(NonNull::dangling())
    }

    /// The pin.
    ///
    /// # Safety
    ///
    /// The caller runs (or queues) the task that holds this pointer, and the task's ticket
    /// was claimed before the pin's owner let it go, as the module docs describe
    /// ([`Sim::claim_pinned`](crate::Sim) checks it): the pin is then kept until the task
    /// has retired. The reference must not outlive the task's run.
    #[inline(always)]
    pub(crate) unsafe fn get<'a>(self) -> &'a StreamPin {
        // SAFETY: alive by the caller's contract; never written after it was made.
        unsafe { self.0.as_ref() }
    }
}

#[cfg(test)]
mod tests;

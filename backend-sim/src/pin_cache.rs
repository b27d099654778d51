//! A thread's last few pins: (notify handle, stream handle) → that stream's pin on the notify
//! ([`StreamPin`]), so that a record or wait on a pair the thread used before skips the notify
//! table's lock.
//!
//! Why: a record or wait queued by the host took the notify table's read lock and released it
//! (two locked read-modify-writes) and cloned the pin's `Arc` (a third), before the stream
//! table's lock and the queue's own compare-and-swap — six in all, each about 7 ns on this
//! project's VM, most of a 41 ns `Sim::record`. A hit here costs one: the upgrade of a
//! [`Weak`] reference to the pin (the strong reference the task needs anyway).
//!
//! Validity: an entry is tagged with its `Sim`'s serial number (never reused within the
//! process) and with the `Sim`'s notify epoch as read *before* the lookup that found the pin.
//! Every call that removes a notify handle bumps the epoch before it returns, so an entry
//! made before a destroy never hits after it: the call then takes the table's lock and fails
//! as it should (107017). A call that read the epoch before a destroy on another thread
//! bumped it may still queue its task — as it would have, holding the read lock, had it come
//! a moment earlier; the pin it holds keeps the notify alive for that task as usual. An entry
//! holds a [`Weak`] reference only, so the cache keeps no notify alive, and a pin whose last
//! task and handle are gone simply fails to upgrade.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use crate::pin::StreamPin;

/// Entries per thread (a round trip between two streams uses four pairs).
const WAYS: usize = 4;

struct Entry {
    sim: u64,
    epoch: u64,
    notify: u64,
    stream: u64,
    pin: Weak<StreamPin>,
}

struct Cache {
    entries: [Option<Entry>; WAYS],
    /// The entry the next miss replaces (round robin).
    next: usize,
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache {
            entries: [const { None }; WAYS],
            next: 0,
        })
    };
}

/// The pin of (`notify`, `stream`) in `Sim` `sim` if this thread has it from `epoch`.
#[inline]
pub(crate) fn get(sim: u64, epoch: u64, notify: u64, stream: u64) -> Option<Arc<StreamPin>> {
    CACHE
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            c.entries
                .iter()
                .flatten()
                .find(|e| e.notify == notify && e.stream == stream && e.sim == sim)
                .filter(|e| e.epoch == epoch)
                .and_then(|e| e.pin.upgrade())
        })
        .ok()
        .flatten()
}

/// Keeps `pin` as the pin of (`notify`, `stream`) in `Sim` `sim`, found under `epoch` (read
/// before the lookup).
pub(crate) fn put(sim: u64, epoch: u64, notify: u64, stream: u64, pin: &Arc<StreamPin>) {
    let _ = CACHE.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        let i = c
            .entries
            .iter()
            .position(|e| {
                e.as_ref()
                    .is_some_and(|e| e.notify == notify && e.stream == stream && e.sim == sim)
            })
            .unwrap_or_else(|| {
                let i = c.next;
                c.next = (i + 1) % WAYS;
                i
            });
        c.entries[i] = Some(Entry {
            sim,
            epoch,
            notify,
            stream,
            pin: Arc::downgrade(pin),
        });
    });
}

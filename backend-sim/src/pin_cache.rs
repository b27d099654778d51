//! A thread's last few pins: (notify handle, stream handle) → that stream's pin on the notify
//! ([`StreamPin`](crate::pin::StreamPin)), by address, with the notify's name, so that a
//! record or wait on a pair the thread used before skips the notify table's lock.
//!
//! Why: a record or wait queued by the host took the notify table's read lock and released
//! it (two locked read-modify-writes) and cloned the pin's `Arc` (a third), before the
//! stream table's lock and the queue's own compare-and-swap — six in all, each about 7 ns on
//! this project's VM, most of a 41 ns `Sim::record`. A hit here costs none: the task holds
//! the pin by address (see `crate::pin`).
//!
//! Validity: an entry is tagged with its `Sim`'s serial number (never reused within the
//! process) and with the `Sim`'s notify epoch as read *before* the lookup that found the pin.
//! Every call that removes a notify handle, and every pin's owner that lets the pin go,
//! bumps the epoch before it returns, so an entry made before never hits after: the call
//! then takes the table's lock and fails as it should (107017). An entry keeps nothing
//! alive and is never dereferenced: the address goes into a task only if the epoch read
//! after the task's ticket was claimed is still the entry's (`Sim::claim_pinned`), which
//! the pin module's docs show is enough.

use std::cell::RefCell;

use crate::pin::{NotifyName, PinRef};

/// Sets of the per-thread cache, each of [`WAYS`] entries: a (notify, stream) pair can only
/// be in the set its hash picks. 64 entries in all: the bench's handoff ring of 8 notify pairs
/// between two streams queues on 32 pairs in turn, and with 4 entries (the size until
/// 2026-12-05, chosen for a round trip's four pairs) every one of its records and waits
/// missed and took the notify table's lock.
pub(crate) const SETS: usize = 32;
/// Entries per set.
pub(crate) const WAYS: usize = 2;

struct Entry {
    sim: u64,
    epoch: u64,
    notify: u64,
    stream: u64,
    pin: PinRef,
    /// The notify's name (server, device, id), copied: nothing here reads the pin.
    target: NotifyName,
}

struct Cache {
    sets: [[Option<Entry>; WAYS]; SETS],
    /// Per set, the way the next miss replaces (round robin).
    next: [u8; SETS],
}

thread_local! {
    static CACHE: RefCell<Cache> = const {
        RefCell::new(Cache {
            sets: [const { [const { None }; WAYS] }; SETS],
            next: [0; SETS],
        })
    };
}

/// The set of (`notify`, `stream`): from the handles' low bits, which hold their slot index
/// (consecutive for handles made one after another; see `acl-notify-handles`). Consecutive
/// notifies on one stream take consecutive sets, and each further stream shifts them by
/// [`STREAM_STRIDE`] sets: 16 notifies on 2 streams fill 31 of the 32 sets, at most 2 pairs
/// (the ways) in one, and one notify used by up to 32 streams takes a set per stream. (A
/// stride of 16, until 2026-12-05, put the pairs of one notify with 8 streams into 2 sets, so
/// that every record missed; a multiplicative hash of the whole handles put up to 5 of the
/// handoff's 32 pairs in one set.)
#[inline]
pub(crate) fn set_of(notify: u64, stream: u64) -> usize {
    (notify.wrapping_add(stream.wrapping_mul(STREAM_STRIDE)) % SETS as u64) as usize
}

/// How many sets apart a notify's pairs with consecutive streams are: odd, so coprime with
/// [`SETS`] (a notify's pairs reach all 32 sets), and about half of it, so that two streams'
/// pairs with consecutive notifies interleave without more than [`WAYS`] in one set.
const STREAM_STRIDE: u64 = (SETS / 2 + 1) as u64;

/// The pin of (`notify`, `stream`) in `Sim` `sim` and the notify's name, if this thread has
/// them from `epoch`.
#[inline]
pub(crate) fn get(sim: u64, epoch: u64, notify: u64, stream: u64) -> Option<(PinRef, NotifyName)> {
    CACHE
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            c.sets[set_of(notify, stream)]
                .iter()
                .flatten()
                .find(|e| e.notify == notify && e.stream == stream && e.sim == sim)
                .filter(|e| e.epoch == epoch)
                .map(|e| (e.pin, e.target))
        })
        .ok()
        .flatten()
}

/// Keeps `pin` as the pin of (`notify`, `stream`) in `Sim` `sim`, with the notify's name,
/// found under `epoch` (read before the lookup).
pub(crate) fn put(sim: u64, epoch: u64, notify: u64, stream: u64, pin: PinRef, target: NotifyName) {
    let _ = CACHE.try_with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        let k = set_of(notify, stream);
        let i = c.sets[k]
            .iter()
            .position(|e| {
                e.as_ref()
                    .is_some_and(|e| e.notify == notify && e.stream == stream && e.sim == sim)
            })
            .unwrap_or_else(|| {
                let i = usize::from(c.next[k]);
                c.next[k] = ((i + 1) % WAYS) as u8;
                i
            });
        c.sets[k][i] = Some(Entry {
            sim,
            epoch,
            notify,
            stream,
            pin,
            target,
        });
    });
}

//! A thread's last few streams: stream handle → its entry of the stream table, so that a
//! record or wait queued on a stream the thread used before skips the stream table's lock.
//!
//! Why: the read lock of the stream table, taken and released around every queued record or
//! wait, is two locked read-modify-writes, each 5–10 ns on this project's VM. A hit here costs
//! none: the entry holds the stream by a strong reference, so the task is queued through it
//! without a reference count either.
//!
//! Validity: as in `pin_cache`, an entry is tagged with its `Sim`'s serial number (never
//! reused within the process) and with the `Sim`'s stream epoch as read *before* the lookup
//! that found the stream. Every call that removes a stream handle (a destroy, a device reset,
//! the end of a session) bumps the epoch right after the removal, before it starts destroying
//! the stream, so an entry made before never hits after: the call then takes the table's lock
//! and fails as it should (107017). A call that read the epoch before the bump may still
//! queue its task: the stream engine then either takes it before the destroy closes the queue
//! (the destroy drains or discards it with the others, as a task queued a moment earlier) or
//! refuses it (107017, as if the handle had been found gone).
//!
//! What an entry keeps: the stream's memory (its queue and counters), nothing else. A
//! destroy lets go of what the stream's tasks used ([`crate::stream::Stream::release_kept`])
//! once its worker has exited (a stream destroyed by one of its own tasks keeps it until its
//! memory goes); its entry in the
//! wait-for graph is held by the table entry and the worker only (the cache has the address
//! of its record notes, [`RecNotes`], valid while the `Sim` lives). So a cache holds at most
//! [`SETS`] destroyed streams' memory (about 25 KiB each with the default queue) until the
//! thread replaces the entries or exits. Only records and waits go through the cache: a
//! copy asks the stream to keep its files, and only a stream found in the table is asked.

use std::cell::RefCell;

use crate::entries::StreamEntry;
use crate::waitgraph::RecNotes;

/// Entries per thread, one per set: a stream can only be in the set its handle's low bits
/// (its slot index; consecutive for streams made one after another) pick.
pub(crate) const SETS: usize = 8;

struct Entry {
    sim: u64,
    epoch: u64,
    handle: u64,
    /// The table entry, without its wait-for graph entry (`graph` is `None`).
    entry: StreamEntry,
    /// Where the stream's records are noted in the wait-for graph (`None`: not published).
    notes: Option<RecNotes>,
}

thread_local! {
    static CACHE: RefCell<[Option<Entry>; SETS]> =
        const { RefCell::new([const { None }; SETS]) };
}

fn set_of(handle: u64) -> usize {
    (handle % SETS as u64) as usize
}

/// Calls `f` with the entry of stream `handle` of `Sim` `sim` if this thread has it from
/// `epoch`; `None` (and `f` not called) otherwise. The entry's `graph` is `None`; the
/// stream's record notes are the second argument.
#[inline]
pub(crate) fn with<R>(
    sim: u64,
    epoch: u64,
    handle: u64,
    f: impl FnOnce(&StreamEntry, Option<RecNotes>) -> R,
) -> Option<R> {
    CACHE
        .try_with(|c| {
            let c = c.try_borrow().ok()?;
            let e = c[set_of(handle)].as_ref()?;
            (e.handle == handle && e.sim == sim && e.epoch == epoch).then(|| f(&e.entry, e.notes))
        })
        .ok()
        .flatten()
}

/// Keeps `e` as the entry of stream `handle` of `Sim` `sim`, found under `epoch` (read before
/// the lookup). Costs the clone of the stream's reference (once per miss).
pub(crate) fn put(sim: u64, epoch: u64, handle: u64, e: &StreamEntry) {
    let entry = Entry {
        sim,
        epoch,
        handle,
        entry: StreamEntry {
            stream: std::sync::Arc::clone(&e.stream),
            device: e.device,
            default: e.default,
            graph: None,
        },
        notes: e.graph.as_ref().map(|g| g.rec_notes()),
    };
    let old = CACHE
        .try_with(|c| {
            let mut c = c.try_borrow_mut().ok()?;
            c[set_of(handle)].replace(entry)
        })
        .ok()
        .flatten();
    // The entry replaced may hold the last reference to a destroyed stream: dropped outside
    // the borrow.
    drop(old);
}

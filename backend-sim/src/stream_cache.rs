//! A thread's last few streams: stream handle → its entry of the stream table, so that a
//! record or wait queued on a stream the thread used before skips the stream table's lock.
//!
//! Why: the read lock of the stream table, taken and released around every queued record or
//! wait, is two locked read-modify-writes, each 5–10 ns on this project's VM. A hit here costs
//! none: the entry holds the stream by a strong reference, so the task is queued through it
//! without a reference count either.
//!
//! Validity ([`crate::tagged_cache`]): as in `pin_cache`, an entry is tagged with its `Sim`'s serial number (never
//! reused within the process) and with the stream epoch as read *before* the lookup that
//! found the stream. The epoch is one for the whole process ([`epoch`]): every call that
//! removes a stream handle of any `Sim` (a destroy, a device reset, the end of a session, the
//! drop of a `Sim`) bumps it right after the removal, before it starts destroying the stream,
//! so an entry made before never hits after: the call then takes the table's lock and fails
//! as it should (107017). A call that read the epoch before the bump may still queue its
//! task: the stream engine then either takes it before the destroy closes the queue (the
//! destroy drains or discards it with the others, as a task queued a moment earlier) or
//! refuses it (107017, as if the handle had been found gone).
//!
//! What an entry keeps: the stream's memory (its queue and counters, about 25 KiB with the
//! default queue), nothing else. A destroy lets go of what the stream's tasks used
//! ([`crate::stream::Stream::release_kept`]) once its worker has exited (a stream destroyed by
//! one of its own tasks keeps it until its memory goes); its entry in the wait-for graph is
//! held by the table entry and the worker only (the cache has the address of its record
//! notes, [`RecNotes`], valid while the `Sim` lives). And the memory of a destroyed stream
//! goes from the cache soon: an entry older than the epoch can never hit again, so every
//! miss ([`put`]) drops all such entries of its thread, and so do the calls that remove
//! streams, in the thread that makes them ([`drop_stale`]). Since the epoch is the
//! process's, the first record or wait of every thread after any removal misses: a
//! destroyed stream's memory stays at most until each thread that queued on it makes its
//! next record or wait (on any stream of any `Sim`) — or exits. The price: one miss per
//! thread per removal, also for threads of another `Sim` of the process. Only records and
//! waits go through the cache: a copy asks the stream to keep its files, and only a stream
//! found in the table is asked.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::entries::StreamEntry;
use crate::tagged_cache::{self, Sets, Tag};
use crate::waitgraph::RecNotes;

/// The process's stream epoch, on a line of its own: every record and wait reads it, and
/// only removals of streams write it.
#[repr(align(128))]
struct Epoch(AtomicU64);

static EPOCH: Epoch = Epoch(AtomicU64::new(0));

/// The stream epoch: read before looking a stream up (see the module docs).
#[inline(always)]
pub(crate) fn epoch() -> u64 {
    EPOCH.0.load(Ordering::Acquire)
}

/// Marks the removal of stream handles (of any `Sim`): called right after the removal,
/// before the streams are destroyed. Entries made before never hit again.
pub(crate) fn streams_removed() {
    EPOCH.0.fetch_add(1, Ordering::Release);
}

/// Entries per thread, one per set: a stream can only be in the set its handle's low bits
/// (its slot index; consecutive for streams made one after another) pick.
pub(crate) const SETS: usize = 8;

/// An entry's value (its tag, the `Sim` and epoch, is [`tagged_cache`]'s).
struct Entry {
    handle: u64,
    /// The table entry, without its wait-for graph entry (`graph` is `None`).
    entry: StreamEntry,
    /// Where the stream's records are noted in the wait-for graph (`None`: not published).
    notes: Option<RecNotes>,
}

thread_local! {
    static CACHE: RefCell<Sets<Entry, SETS, 1>> = const { RefCell::new(Sets::new()) };
}

#[inline(always)]
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
    tagged_cache::read(&CACHE, |c| {
        let e = c.find(set_of(handle), Tag { sim, epoch }, |e| e.handle == handle)?;
        Some(f(&e.entry, e.notes))
    })
}

/// Keeps `e` as the entry of stream `handle` of `Sim` `sim`, found under `epoch` (read before
/// the lookup), and drops this thread's entries from before `epoch`, which can never hit
/// again. Costs the clone of the stream's reference (once per miss).
pub(crate) fn put(sim: u64, epoch: u64, handle: u64, e: &StreamEntry) {
    let entry = Entry {
        handle,
        entry: StreamEntry {
            stream: std::sync::Arc::clone(&e.stream),
            device: e.device,
            default: e.default,
            graph: None,
        },
        notes: e.graph.as_ref().map(|g| g.rec_notes()),
    };
    let old = tagged_cache::write(&CACHE, |c| {
        let stale = c.take_if(|t| t.epoch != epoch);
        let replaced = c.put(
            set_of(handle),
            Tag { sim, epoch },
            |o| o.handle == handle,
            entry,
        );
        (stale, replaced)
    });
    // The entries replaced or dropped may hold the last reference to a destroyed stream:
    // dropped outside the borrow (a stream's drop may end up in a call that uses the cache).
    drop(old);
}

/// Drops this thread's entries from before the current epoch (they can never hit again,
/// and may hold destroyed streams' memory): for the calls that remove streams, once the
/// streams are destroyed.
pub(crate) fn drop_stale() {
    let now = epoch();
    let old = tagged_cache::write(&CACHE, |c| c.take_if(|t| t.epoch != now));
    drop(old);
}

//! A thread's last few (notify, stream) pairs: one probe finds everything a record or wait
//! on the pair needs — the stream (its queue), the stream's pin on the notify
//! ([`StreamPin`](crate::pin::StreamPin)) by address, the notify's name, whether a wait on
//! the stream may take the notify, and where the stream's records are noted in the wait-for
//! graph — so that a record or wait the thread made before skips both tables' locks.
//!
//! Why: the notify table's read lock and the stream table's read lock, each taken and
//! released around every queued record or wait, are two locked read-modify-writes apiece
//! (5–10 ns each on this project's VM), and the pin's `Arc` clone was another. A hit costs
//! none: the entry holds the stream by a strong reference (the task is queued through it with
//! no reference count), and the task holds the pin by address (see `crate::pin`). Until
//! 2026-12-05 these were two caches (a stream cache by stream handle, with a process-wide
//! epoch, and a pin cache by pair, with each `Sim`'s notify epoch): two thread-local
//! accesses, two borrows, two tag checks and two epoch loads a call, about 65 instructions of
//! a `Sim::record`'s 307 (callgrind).
//!
//! # Validity
//!
//! ([`crate::tagged_cache`].) An entry is tagged with its `Sim`'s serial number (never reused
//! within the process) and with the process's *handle epoch* ([`epoch`]) as read *before* the
//! lookups that found the pair. Every removal of a notify or stream handle of any `Sim` (a
//! destroy, a device reset, the end of a session, the drop of a `Sim`) and every pin's owner
//! that lets its pin go bumps the epoch ([`removed`]) right after the removal, before the
//! removed thing is destroyed, so an entry made before never hits after: the call then takes
//! the tables' locks and answers as they say (107017). That also makes the entries safe when
//! a handle's value comes back (a handle slot's 20-bit generation wraps after 2²⁰ destroys,
//! and the value then names a new stream or notify): the old one's removal bumped the epoch,
//! so its entry is never found through the new handle.
//!
//! A call that read the epoch before a stream's removal may still queue its task: the stream
//! engine then either takes it before the destroy closes the queue (the destroy drains or
//! discards it with the others, as a task queued a moment earlier) or refuses it (107017, as
//! if the handle had been found gone). The pin's address goes into a task only if the epoch
//! read again after the task's ticket was claimed is still the entry's
//! (`Sim::claim_pinned`), which the pin module's docs show is enough.
//!
//! # What an entry keeps
//!
//! The stream's memory (its queue and counters, about 25 KiB with the default queue),
//! nothing else: a destroy lets go of what the stream's tasks used
//! ([`crate::stream::Stream::release_kept`]) once its worker has exited; its entry in the
//! wait-for graph is held by the table entry and the worker only (the cache has the address
//! of its record notes, [`RecNotes`], valid while the `Sim` lives). A destroyed stream's
//! memory goes from the cache soon: an entry older than the epoch can never hit again, so
//! every miss ([`put`]) drops all such entries of its thread, and so do the calls that remove
//! streams, in the thread that makes them ([`drop_stale`]). Since the epoch is the
//! process's, the first record or wait of every thread after any removal misses: a destroyed
//! stream's memory stays at most until each thread that queued on it makes its next record
//! or wait (on any pair of any `Sim`) — or exits. The price: one miss per thread per removal,
//! also for threads of another `Sim` of the process. Only records and waits go through the
//! cache: a copy asks the stream to keep its files, and only a stream found in the table is
//! asked.

use std::cell::{Ref, RefCell};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::job::SimStream;
use crate::pin::{NotifyName, PinRef};
use crate::tagged_cache::{self, Sets, Tag};
use crate::waitgraph::RecNotes;

/// The process's handle epoch, on a line of its own: every record and wait reads it (before
/// its probe, and again after its ticket's claim), and only removals write it.
#[repr(align(128))]
struct Epoch(AtomicU64);

static EPOCH: Epoch = Epoch(AtomicU64::new(0));

/// The handle epoch: read before looking a pair up (see the module docs), and, sequentially
/// consistent, after a record's or wait's claim (`Sim::claim_pinned`). On x86 both loads are
/// plain moves.
#[inline(always)]
pub(crate) fn epoch() -> u64 {
    EPOCH.0.load(Ordering::SeqCst)
}

/// Marks the removal of notify or stream handles, or a pin let go (of any `Sim`): called right
/// after the removal, before the removed thing is destroyed or handed on. Entries made before
/// never hit again. Sequentially consistent: the pin module's argument orders it against the
/// claims of records and waits.
pub(crate) fn removed() {
    EPOCH.0.fetch_add(1, Ordering::SeqCst);
}

/// Sets of the per-thread cache, each of [`WAYS`] entries: a (notify, stream) pair can only
/// be in the set its hash picks. 64 entries in all: the bench's handoff ring of 8 notify pairs
/// between two streams queues on 32 pairs in turn, and with 4 entries (the pin cache's size
/// until 2026-12-05, chosen for a round trip's four pairs) every one of its records and waits
/// missed and took the notify table's lock.
pub(crate) const SETS: usize = 32;
/// Entries per set.
pub(crate) const WAYS: usize = 2;

/// What a hit hands out: everything a record or wait on the pair needs before and after its
/// claim.
pub(crate) struct Pair {
    notify: u64,
    stream_handle: u64,
    /// The stream (a strong reference: see the module docs).
    pub(crate) stream: Arc<SimStream>,
    /// The stream's pin on the notify (used by a task only as `Sim::claim_pinned` allows).
    pub(crate) pin: PinRef,
    /// Whether a wait on this stream may take the notify: the notify is this server's and on
    /// the stream's device (else the table's path gives the error).
    pub(crate) waitable: bool,
    /// Where the stream's records are noted in the wait-for graph (`None`: not published),
    /// and the note of a record of this notify without its ticket
    /// (`waitgraph::Target::rec_base`).
    pub(crate) notes: Option<(RecNotes, u64)>,
}

/// What [`put`] is given for a pair found in the tables.
pub(crate) struct Found<'a> {
    pub(crate) stream: &'a Arc<SimStream>,
    pub(crate) pin: PinRef,
    pub(crate) name: NotifyName,
    pub(crate) waitable: bool,
    pub(crate) notes: Option<RecNotes>,
}

thread_local! {
    static CACHE: RefCell<Sets<Pair, SETS, WAYS>> = const { RefCell::new(Sets::new()) };
}

/// The set of (`notify`, `stream`): from the handles' low bits, which hold their slot index
/// (consecutive for handles made one after another; see `acl-notify-handles`). Consecutive
/// notifies on one stream take consecutive sets, and each further stream shifts them by
/// [`STREAM_STRIDE`] sets: 16 notifies on 2 streams fill 31 of the 32 sets, at most 2 pairs
/// (the ways) in one, and one notify used by up to 32 streams takes a set per stream. (A
/// stride of 16, until 2026-12-05, put the pairs of one notify with 8 streams into 2 sets, so
/// that every record missed; a multiplicative hash of the whole handles put up to 5 of the
/// handoff's 32 pairs in one set.)
#[inline(always)]
pub(crate) fn set_of(notify: u64, stream: u64) -> usize {
    (notify.wrapping_add(stream.wrapping_mul(STREAM_STRIDE)) % SETS as u64) as usize
}

/// How many sets apart a notify's pairs with consecutive streams are: odd, so coprime with
/// [`SETS`] (a notify's pairs reach all 32 sets), and about half of it, so that two streams'
/// pairs with consecutive notifies interleave without more than [`WAYS`] in one set.
const STREAM_STRIDE: u64 = (SETS / 2 + 1) as u64;

/// The entry of (`notify`, `stream`) of `Sim` `sim` if this thread has it from `epoch`,
/// borrowed: while the borrow lasts, a record or wait of this thread misses (the cache is
/// busy), and nothing can drop the entry's stream. A borrow, not a closure: the closure of a
/// record's and a wait's fast path, called from both, was not inlined (callgrind).
///
/// # Safety
///
/// The borrow must end before the caller returns (see [`tagged_cache::borrow`]).
#[inline(always)]
pub(crate) unsafe fn probe<'a>(
    sim: u64,
    epoch: u64,
    notify: u64,
    stream: u64,
) -> Option<Ref<'a, Pair>> {
    // SAFETY: the caller's promise.
    let c = unsafe { tagged_cache::borrow(&CACHE) }?;
    Ref::filter_map(c, |c| {
        c.find(set_of(notify, stream), Tag { sim, epoch }, |p| {
            p.notify == notify && p.stream_handle == stream
        })
    })
    .ok()
}

/// Keeps `found` as the entry of (`notify`, `stream`) of `Sim` `sim`, found under `epoch`
/// (read before the lookups), and drops this thread's entries from before `epoch`, which can
/// never hit again. Costs the clone of the stream's reference (once per miss).
pub(crate) fn put(sim: u64, epoch: u64, notify: u64, stream: u64, found: Found<'_>) {
    let entry = Pair {
        notify,
        stream_handle: stream,
        stream: Arc::clone(found.stream),
        pin: found.pin,
        waitable: found.waitable,
        notes: found.notes.map(|n| (n, found.name.target().rec_base())),
    };
    let old = tagged_cache::write(&CACHE, |c| {
        let stale = c.take_if(|t| t.epoch != epoch);
        let replaced = c.put(
            set_of(notify, stream),
            Tag { sim, epoch },
            |o| o.notify == notify && o.stream_handle == stream,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this thread's cache has (`notify`, `stream`) of `sim` from `epoch`.
    fn hits(sim: u64, epoch: u64, notify: u64, stream: u64) -> bool {
        // SAFETY: the borrow ends here.
        unsafe { probe(sim, epoch, notify, stream) }.is_some()
    }

    /// The ABA case: a handle's value comes back for a new notify or stream after a removal
    /// (its slot's generation wrapped). The entry made for the old pair before the removal
    /// never hits after it, under any later epoch, and a new entry for the same values
    /// replaces it in place; the old entry's stream is let go by the thread's next miss.
    #[test]
    fn a_pair_s_entry_never_hits_after_a_removal_even_for_the_same_handle_values() {
        let stream = Arc::new(
            SimStream::spawn(crate::stream::StreamConfig::new("pair-cache-aba")).expect("a stream"),
        );
        let name = NotifyName {
            server: 0,
            device: 0,
            id: 3,
        };
        let found = || Found {
            stream: &stream,
            pin: PinRef::dangling(),
            name,
            waitable: true,
            notes: None,
        };
        let (sim, n, s) = (u64::MAX - 7, 0x1234_0001, 0x5678_0002);
        let before = epoch();
        put(sim, before, n, s, found());
        assert!(hits(sim, before, n, s));
        assert!(!hits(sim + 1, before, n, s), "another Sim's pair");
        assert!(!hits(sim, before, n + 1, s), "another notify");
        assert_eq!(Arc::strong_count(&stream), 2);
        removed();
        let after = epoch();
        assert_ne!(after, before);
        assert!(!hits(sim, after, n, s), "found again after a removal");
        // The same values found again in the tables after the removal (a new notify or
        // stream under the old handle values): a new entry, which hits; the old one is gone.
        put(sim, after, n, s, found());
        assert!(hits(sim, after, n, s));
        assert!(!hits(sim, before, n, s));
        assert_eq!(
            Arc::strong_count(&stream),
            2,
            "the old entry's reference let go"
        );
        // A removal with no miss after it on this thread: `drop_stale` lets the stream go.
        removed();
        drop_stale();
        assert_eq!(Arc::strong_count(&stream), 1, "kept after drop_stale");
        stream
            .destroy(acl_notify_core::StreamDestroy::Discard)
            .unwrap();
    }
}

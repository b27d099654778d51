//! The common part of the per-thread caches that let a hot call skip a table's lock: entries
//! tagged with their `Sim`'s serial number and with an epoch of the table they were found
//! in, kept in sets of a few ways ([`Sets`]: the set picked by the user's function of the
//! key; one set is [`Ways`]), on a thread-local that a call reaches without blocking
//! ([`read`], [`write`]: never a panic during the thread's teardown or from a nested call).
//!
//! The rule every user keeps (see each one's module docs for its table): the epoch is read
//! *before* the lookup whose result is cached, and every removal from the table bumps the
//! epoch after the removal, before the removed thing is destroyed. So an entry made before a
//! removal never hits after it; the call then takes the table's lock and answers as the
//! table says. A `Sim`'s serial is never reused within the process, so an entry of a `Sim`
//! that is gone never hits either. That also makes the caches keyed by handle value safe
//! when a value comes back (a handle slot's 20-bit generation wraps after 2²⁰ destroys, and
//! the value then names a new stream or notify): the old object's removal bumped the epoch,
//! so its entry cannot be found through the new one's handle.
//!
//! Used by [`crate::mem::recent`] (the allocations a thread copied from or to: one set of 4
//! ways) and [`crate::pair_cache`] (the notify and stream pairs a thread queued records and
//! waits on: 32 sets of 2 ways, its epoch the process's).

use std::cell::{Ref, RefCell};
use std::thread::LocalKey;

/// What an entry was found under: its `Sim` and the table's epoch then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    pub(crate) sim: u64,
    pub(crate) epoch: u64,
}

/// `W` tagged entries, replaced in turn.
pub(crate) struct Ways<V, const W: usize> {
    entries: [Option<(Tag, V)>; W],
    /// The way the next new entry replaces.
    next: u8,
}

impl<V, const W: usize> Ways<V, W> {
    pub(crate) const fn new() -> Self {
        Ways {
            entries: [const { None }; W],
            next: 0,
        }
    }

    /// The value of the first entry tagged `tag` for which `key` holds. The key is compared
    /// first: an entry of another key, the usual one passed over in a set, then costs one
    /// compare or two, not the tag's two more (about 3 instructions a wait, callgrind).
    #[inline(always)]
    pub(crate) fn find(&self, tag: Tag, key: impl Fn(&V) -> bool) -> Option<&V> {
        self.entries
            .iter()
            .flatten()
            .find(|(t, v)| key(v) && *t == tag)
            .map(|(_, v)| v)
    }

    /// Keeps `value`, tagged `tag`, in place of the first entry of the same `Sim` for which
    /// `same` holds (found under any epoch), or else of the next way in turn. Returns the value
    /// replaced, for the caller to drop outside the thread-local's borrow.
    pub(crate) fn put(&mut self, tag: Tag, same: impl Fn(&V) -> bool, value: V) -> Option<V> {
        let i = self
            .entries
            .iter()
            .position(|e| e.as_ref().is_some_and(|(t, v)| t.sim == tag.sim && same(v)))
            .unwrap_or_else(|| {
                let i = usize::from(self.next) % W;
                self.next = ((i + 1) % W) as u8;
                i
            });
        self.entries[i].replace((tag, value)).map(|(_, v)| v)
    }

    /// Takes out the entries whose tag `stale` holds for, leaving their ways empty; the
    /// values are returned for the caller to drop outside the thread-local's borrow.
    pub(crate) fn take_if(&mut self, stale: impl Fn(Tag) -> bool) -> [Option<V>; W] {
        std::array::from_fn(|i| self.entries[i].take_if(|e| stale(e.0)).map(|(_, v)| v))
    }
}

/// `S` sets of `W` ways each: an entry is only ever in the set its key's set number (the
/// user's function of the key, taken modulo `S`) picks; each set replaces its ways in turn.
pub(crate) struct Sets<V, const S: usize, const W: usize> {
    sets: [Ways<V, W>; S],
}

impl<V, const S: usize, const W: usize> Sets<V, S, W> {
    pub(crate) const fn new() -> Self {
        Sets {
            sets: [const { Ways::new() }; S],
        }
    }

    /// [`Ways::find`] in set `set` (modulo `S`).
    #[inline(always)]
    pub(crate) fn find(&self, set: usize, tag: Tag, key: impl Fn(&V) -> bool) -> Option<&V> {
        self.sets[set % S].find(tag, key)
    }

    /// [`Ways::put`] in set `set` (modulo `S`).
    pub(crate) fn put(
        &mut self,
        set: usize,
        tag: Tag,
        same: impl Fn(&V) -> bool,
        value: V,
    ) -> Option<V> {
        self.sets[set % S].put(tag, same, value)
    }

    /// [`Ways::take_if`] in every set.
    pub(crate) fn take_if(&mut self, stale: impl Fn(Tag) -> bool) -> [[Option<V>; W]; S] {
        std::array::from_fn(|i| self.sets[i].take_if(&stale))
    }
}

/// `f` on this thread's cache `cache`; `None` without calling it while the thread is being
/// torn down or the cache is borrowed already (a call made from inside another one's `f`).
#[inline]
pub(crate) fn read<C: 'static, R>(
    cache: &'static LocalKey<RefCell<C>>,
    f: impl FnOnce(&C) -> Option<R>,
) -> Option<R> {
    // SAFETY: the borrow ends before this call returns.
    f(&*unsafe { borrow(cache) }?)
}

/// This thread's cache `cache`, borrowed; `None` in the cases [`read`] gives `None`. For a
/// hot caller that uses the borrow in its own body: only the cache's address comes out of
/// `LocalKey::try_with`, which is not always inlined (a record's whole fast path ran in the
/// closure given to it, its environment passed through memory: about 30 instructions a
/// record, callgrind).
///
/// # Safety
///
/// The borrow must end before the caller returns (the lifetime `'a` is the caller's to
/// keep): the value lives until the thread's thread-local destructors run, which is not
/// before a call on this thread has returned.
#[inline(always)]
pub(crate) unsafe fn borrow<'a, C: 'static>(
    cache: &'static LocalKey<RefCell<C>>,
) -> Option<Ref<'a, C>> {
    let c: *const RefCell<C> = cache.try_with(std::ptr::from_ref).ok()?;
    // SAFETY: this thread's value, alive as long as the caller promises to keep the borrow.
    unsafe { &*c }.try_borrow().ok()
}

/// `f` on this thread's cache `cache`, mutably; `None` in the cases [`read`] gives `None`.
pub(crate) fn write<C: 'static, R>(
    cache: &'static LocalKey<RefCell<C>>,
    f: impl FnOnce(&mut C) -> R,
) -> Option<R> {
    cache
        .try_with(|c| Some(f(&mut *c.try_borrow_mut().ok()?)))
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn tag(sim: u64, epoch: u64) -> Tag {
        Tag { sim, epoch }
    }

    #[test]
    fn an_entry_hits_only_under_its_own_sim_and_epoch() {
        let mut w: Ways<u32, 2> = Ways::new();
        assert!(w.put(tag(1, 5), |v| *v == 10, 10).is_none());
        assert_eq!(w.find(tag(1, 5), |v| *v == 10), Some(&10));
        assert_eq!(w.find(tag(1, 6), |v| *v == 10), None, "a later epoch");
        assert_eq!(w.find(tag(2, 5), |v| *v == 10), None, "another Sim");
        // The same key found again under a new epoch replaces the stale entry in place.
        assert_eq!(w.put(tag(1, 6), |v| *v == 10, 10), Some(10));
        assert!(w.put(tag(1, 6), |v| *v == 11, 11).is_none());
        assert_eq!(w.find(tag(1, 6), |v| *v == 10), Some(&10));
        assert_eq!(w.find(tag(1, 6), |v| *v == 11), Some(&11));
        // A third key replaces the ways in turn.
        assert_eq!(w.put(tag(1, 6), |v| *v == 12, 12), Some(10));
        assert_eq!(w.put(tag(1, 6), |v| *v == 13, 13), Some(11));
        assert_eq!(w.find(tag(1, 6), |v| *v >= 12), Some(&12));
    }

    #[test]
    fn sets_keep_their_own_round_robin_and_stale_entries_are_taken_out() {
        let mut s: Sets<u32, 4, 2> = Sets::new();
        // Set 1 (and 5, modulo 4) fills its 2 ways; a third key replaces its first way only.
        assert!(s.put(1, tag(1, 1), |v| *v == 10, 10).is_none());
        assert!(s.put(5, tag(1, 1), |v| *v == 11, 11).is_none());
        assert!(s.put(2, tag(1, 1), |v| *v == 20, 20).is_none());
        assert_eq!(s.put(1, tag(1, 1), |v| *v == 12, 12), Some(10));
        assert_eq!(s.find(1, tag(1, 1), |v| *v == 10), None);
        assert_eq!(s.find(1, tag(1, 1), |v| *v == 11), Some(&11));
        assert_eq!(
            s.find(1, tag(1, 1), |v| *v == 20),
            None,
            "another set's key"
        );
        assert_eq!(s.find(2, tag(1, 1), |v| *v == 20), Some(&20));
        // Set 2's next way is still its second.
        assert!(s.put(2, tag(1, 2), |v| *v == 21, 21).is_none());
        let stale = s.take_if(|t| t.epoch != 2);
        assert_eq!(
            stale,
            [
                [None, None],
                [Some(12), Some(11)],
                [Some(20), None],
                [None, None]
            ]
        );
        assert_eq!(s.find(2, tag(1, 2), |v| *v == 21), Some(&21));
        assert_eq!(s.find(1, tag(1, 1), |v| *v == 11), None);
    }

    thread_local! {
        static T: RefCell<Ways<u32, 1>> = const { RefCell::new(Ways::new()) };
    }

    #[test]
    fn a_nested_call_finds_the_cache_busy_instead_of_panicking() {
        write(&T, |w| w.put(tag(1, 1), |_| true, 7));
        let inner = read(&T, |w| {
            let nested = write(&T, |_| ());
            Some((w.find(tag(1, 1), |_| true).copied(), nested))
        });
        assert_eq!(inner, Some((Some(7), None)));
    }
}

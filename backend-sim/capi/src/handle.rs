//! The handles C sees (`aclrtNotify`, `aclrtStream`): encoded numbers looked up in a table,
//! never addresses of Rust memory, so that a stale, destroyed, foreign or garbage handle is
//! answered with 107017 instead of being dereferenced.
//!
//! A handle is a 64-bit value carried in a `void *`:
//!
//! ```text
//!  63      56 55            40 39               20 19                0
//! ┌──────────┬────────────────┬───────────────────┬───────────────────┐
//! │  kind    │  process salt  │  slot generation  │   slot index + 1  │
//! │A5/5A/C3  │   (16 bits)    │     (20 bits)     │     (20 bits)     │
//! └──────────┴────────────────┴───────────────────┴───────────────────┘
//! ```
//!
//! - `kind` tells notify, count-notify and stream handles apart (a stream passed as a notify
//!   is rejected),
//!   and makes every handle a non-canonical address on x86-64 and AArch64: C code that
//!   dereferences one faults at once instead of corrupting memory.
//! - The salt is random per session (each `aclInit` of each process), and each slot's
//!   generation starts at a random value and moves on each time the slot is freed: a handle
//!   from another process or an earlier session, or one whose slot was reused, matches a live
//!   entry with probability 2⁻³⁶ at most.
//! - A destroyed handle's slot has a new generation (or is empty), so the old value no longer
//!   matches.
//!
//! Notify handles ([`NotifyCodec`]) have no table here: they are a keyed, reversible encoding
//! of the backend's own slab handle (`tag16 | generation16 | index+1 (32)`), whose table
//! already checks index and generation on every call. Same kind byte, same 20-bit index
//! field; the 36 bits between hold `check(index) ^ generation`, where `check` is keyed by the
//! session's random seed:
//!
//! ```text
//!  63      56 55            36 35             20 19                0
//! ┌──────────┬────────────────┬─────────────────┬───────────────────┐
//! │   A5     │ salt(index)    │ gen ^ key(index)│   slot index + 1  │
//! │          │   (20 bits)    │    (16 bits)    │     (20 bits)     │
//! └──────────┴────────────────┴─────────────────┴───────────────────┘
//! ```
//!
//! - The salt must match exactly (a handle of another process or session, or with its index
//!   field changed, fails with probability 1 − 2⁻²⁰); the generation it decodes to is
//!   random for such a handle and must then match the backend slot's (2⁻¹⁶ more): 2⁻³⁶ at
//!   most, as for the tables.
//! - The backend moves a slot's generation on each time it is freed, so a destroyed handle no
//!   longer matches (for the next 65,535 reuses of that slot, where a table's 20-bit
//!   generation gives 2²⁰ − 1).

/// Which table a handle belongs to; the value is the handle's top byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// `aclrtNotify`.
    Notify = 0xA5,
    /// `aclrtStream`.
    Stream = 0x5A,
    /// `aclrtCntNotify`.
    CntNotify = 0xC3,
    /// `aclrtContext`.
    Context = 0x3C,
    /// `aclrtEvent`.
    Event = 0xE7,
}

const INDEX_BITS: u32 = 20;
const GEN_BITS: u32 = 20;
const SALT_SHIFT: u32 = INDEX_BITS + GEN_BITS;
const KIND_SHIFT: u32 = 56;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const SALT_MASK: u64 = 0xFFFF;

/// Live handles a table can hold (the index field holds `slot + 1`, and 0 is never used).
pub(crate) const MAX_HANDLES: usize = INDEX_MASK as usize;

struct Slot<T> {
    generation: u64,
    value: Option<T>,
}

/// One table of handles of one [`Kind`].
pub(crate) struct HandleTable<T> {
    prefix: u64,
    seed: u64,
    slots: Vec<Slot<T>>,
    free: Vec<usize>,
}

/// SplitMix64: spreads the per-process seed over the slots' initial generations.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<T: Copy> HandleTable<T> {
    /// An empty table. `seed` supplies the salt and the slots' initial generations; pass a
    /// random value per process.
    pub(crate) fn new(kind: Kind, seed: u64) -> Self {
        let salt = mix(seed ^ kind as u64) & SALT_MASK;
        HandleTable {
            prefix: ((kind as u64) << KIND_SHIFT) | (salt << SALT_SHIFT),
            seed,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    fn encode(&self, index: usize, generation: u64) -> usize {
        (self.prefix | (generation << INDEX_BITS) | (index as u64 + 1)) as usize
    }

    /// The slot a handle names, if the handle is one of this table's and still live.
    fn decode(&self, handle: usize) -> Option<usize> {
        let h = handle as u64;
        if h & !(GEN_MASK << INDEX_BITS | INDEX_MASK) != self.prefix {
            return None;
        }
        let index = usize::try_from(h & INDEX_MASK).ok()?.checked_sub(1)?;
        let slot = self.slots.get(index)?;
        (slot.value.is_some() && slot.generation == (h >> INDEX_BITS) & GEN_MASK).then_some(index)
    }

    /// Stores `value` and returns its handle; `None` if [`MAX_HANDLES`] are live.
    pub(crate) fn insert(&mut self, value: T) -> Option<usize> {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let i = self.slots.len();
                if i >= MAX_HANDLES {
                    return None;
                }
                self.slots.push(Slot {
                    generation: mix(self.seed.wrapping_add(i as u64)) & GEN_MASK,
                    value: None,
                });
                i
            }
        };
        self.slots[index].value = Some(value);
        Some(self.encode(index, self.slots[index].generation))
    }

    /// The value behind a live handle.
    pub(crate) fn get(&self, handle: usize) -> Option<T> {
        self.decode(handle).and_then(|i| self.slots[i].value)
    }

    /// Removes a live handle and returns its value; the handle is dead from now on.
    pub(crate) fn remove(&mut self, handle: usize) -> Option<T> {
        let index = self.decode(handle)?;
        self.remove_at(index)
    }

    /// Removes the live handle in slot `index`.
    fn remove_at(&mut self, index: usize) -> Option<T> {
        let slot = self.slots.get_mut(index)?;
        let value = slot.value.take()?;
        slot.generation = (slot.generation + 1) & GEN_MASK;
        self.free.push(index);
        Some(value)
    }

    /// Removes every live handle whose value satisfies `pred`, returning the values.
    pub(crate) fn remove_where(&mut self, mut pred: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut out = Vec::new();
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if slot.value.as_ref().is_some_and(&mut pred) {
                slot.generation = (slot.generation + 1) & GEN_MASK;
                out.extend(slot.value.take());
                self.free.push(index);
            }
        }
        out
    }

    /// Number of live handles.
    /// Every live value.
    pub(crate) fn values(&self) -> impl Iterator<Item = T> + '_ {
        self.slots.iter().filter_map(|s| s.value)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.value.is_some()).count()
    }
}

/// Bits of a notify handle between the kind byte and the index field.
const CHECK_BITS: u32 = 36;
/// Bits of the backend's generation (bits 32‥47 of its handle).
const BACKEND_GEN_BITS: u32 = 16;
const BACKEND_GEN_MASK: u64 = (1 << BACKEND_GEN_BITS) - 1;

/// The notify handles of one session: an encoding of the backend's handles (see the module
/// docs), with no table and no lock of its own.
pub(crate) struct NotifyCodec {
    /// The backend's tag, in place (bits 48‥63).
    tag: u64,
    k1: u64,
    /// Odd.
    k2: u64,
}

impl NotifyCodec {
    /// The codec of a session whose backend tags its notify handles with `backend_tag`.
    /// `seed` keys the salt and the generation mask; pass a random value per session.
    pub(crate) fn new(seed: u64, backend_tag: u16) -> Self {
        let k = mix(seed ^ Kind::Notify as u64);
        NotifyCodec {
            tag: u64::from(backend_tag) << 48,
            k1: k,
            k2: mix(k) | 1,
        }
    }

    /// `salt(index) << 16 | key(index)`: 36 bits, keyed by the session.
    #[inline]
    fn check(&self, index_field: u64) -> u64 {
        (index_field ^ self.k1).wrapping_mul(self.k2) >> (64 - CHECK_BITS)
    }

    /// The C handle of backend handle `raw`; `None` if its slot index does not fit the index
    /// field ([`MAX_HANDLES`] live handles) or it is not one of this backend's.
    #[inline]
    pub(crate) fn encode(&self, raw: u64) -> Option<usize> {
        let index = raw & 0xFFFF_FFFF;
        if raw & !((BACKEND_GEN_MASK << 32) | 0xFFFF_FFFF) != self.tag
            || index == 0
            || index > INDEX_MASK
        {
            return None;
        }
        let generation = (raw >> 32) & BACKEND_GEN_MASK;
        let mid = self.check(index) ^ generation;
        Some((((Kind::Notify as u64) << KIND_SHIFT) | (mid << INDEX_BITS) | index) as usize)
    }

    /// The backend handle a C handle stands for, if it carries this session's salt; whether
    /// that handle is live is the backend's to say.
    #[inline]
    pub(crate) fn decode(&self, handle: usize) -> Option<u64> {
        let h = handle as u64;
        let index = h & INDEX_MASK;
        if h >> KIND_SHIFT != Kind::Notify as u64 || index == 0 {
            return None;
        }
        let generation = ((h >> INDEX_BITS) & ((1 << CHECK_BITS) - 1)) ^ self.check(index);
        (generation >> BACKEND_GEN_BITS == 0).then_some(self.tag | (generation << 32) | index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that are no handle at all (NULL, small numbers, all ones, a real address), then
    /// `more`.
    fn garbage_and<const K: usize>(more: [usize; K]) -> Vec<usize> {
        let local = 0u64;
        let mut v = vec![
            0usize,
            1,
            usize::MAX,
            0xdead_beef,
            &local as *const u64 as usize,
        ];
        v.extend(more);
        v
    }

    #[test]
    fn live_handles_resolve_and_dead_ones_do_not() {
        let mut t = HandleTable::new(Kind::Notify, 42);
        let a = t.insert(10u32).unwrap();
        let b = t.insert(20u32).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.get(a), Some(10));
        assert_eq!(t.get(b), Some(20));
        assert_eq!(t.remove(a), Some(10));
        assert_eq!(t.get(a), None, "destroyed handle still resolves");
        assert_eq!(t.remove(a), None, "double destroy succeeded");
        // The slot is reused with a new generation: the old handle stays dead.
        let c = t.insert(30u32).unwrap();
        assert_ne!(a, c);
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(c), Some(30));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn garbage_and_other_kinds_are_rejected() {
        let mut n = HandleTable::new(Kind::Notify, 7);
        let mut s = HandleTable::new(Kind::Stream, 7);
        let hn = n.insert(1u8).unwrap();
        let hs = s.insert(2u8).unwrap();
        assert_eq!(n.get(hs), None, "stream handle accepted as notify");
        assert_eq!(s.get(hn), None, "notify handle accepted as stream");
        for garbage in garbage_and([hn ^ 1, hn + (1 << INDEX_BITS)]) {
            assert_eq!(n.get(garbage), None, "{garbage:#x} accepted");
        }
    }

    #[test]
    fn another_process_salt_is_rejected() {
        let mut mine = HandleTable::new(Kind::Notify, 1);
        let mut theirs = HandleTable::new(Kind::Notify, 2);
        let h_mine = mine.insert(1u8).unwrap();
        let h_theirs = theirs.insert(1u8).unwrap();
        assert_ne!(h_mine, h_theirs);
        assert_eq!(mine.get(h_theirs), None);
    }

    #[test]
    fn handles_are_non_canonical_addresses() {
        let mut t = HandleTable::new(Kind::Stream, 99);
        for i in 0..100u32 {
            let h = t.insert(i).unwrap() as u64;
            let top = h >> 47;
            assert!(top != 0 && top != 0x1_ffff, "{h:#x} is a canonical address");
        }
    }

    #[test]
    fn remove_where_kills_matching_handles() {
        let mut t = HandleTable::new(Kind::Stream, 3);
        let hs: Vec<usize> = (0..6u32).map(|i| t.insert(i).unwrap()).collect();
        let mut gone = t.remove_where(|v| v % 2 == 0);
        gone.sort();
        assert_eq!(gone, vec![0, 2, 4]);
        for (i, h) in hs.iter().enumerate() {
            assert_eq!(t.get(*h).is_some(), i % 2 == 1);
        }
    }

    #[test]
    fn notify_codec_round_trips_and_rejects_what_it_must() {
        let tag = 0x1234u64 << 48;
        let raw = |generation: u64, index: u64| tag | (generation << 32) | index;
        let c = NotifyCodec::new(42, 0x1234);
        let h = c.encode(raw(1, 1)).unwrap();
        assert_eq!(c.decode(h), Some(raw(1, 1)));
        let top = (h as u64) >> 47;
        assert!(top != 0 && top != 0x1_ffff, "{h:#x} is a canonical address");
        assert_eq!((h as u64) >> KIND_SHIFT, Kind::Notify as u64);
        // Every generation and index round-trips; distinct inputs give distinct handles.
        let mut seen = std::collections::HashSet::new();
        for g in [1u64, 2, 0x7fff, 0xffff] {
            for i in [1u64, 2, 3, 1000, INDEX_MASK] {
                let h = c.encode(raw(g, i)).unwrap();
                assert_eq!(c.decode(h), Some(raw(g, i)));
                assert!(seen.insert(h));
            }
        }
        // Indexes beyond the field, and other backends' handles, are not encoded.
        assert_eq!(c.encode(raw(1, INDEX_MASK + 1)), None);
        assert_eq!(c.encode(raw(1, 0)), None);
        assert_eq!(c.encode((0x4321 << 48) | (1 << 32) | 1), None);
        // Another session (seed) rejects this one's handles, or decodes them to a different
        // generation; over many handles, almost all fail the salt check.
        let other = NotifyCodec::new(43, 0x1234);
        let mut accepted = 0;
        for i in 1..=10_000u64 {
            let h = c.encode(raw(1, i)).unwrap();
            if let Some(r) = other.decode(h) {
                assert_ne!(r, raw(1, i), "same backend handle in another session");
                accepted += 1;
            }
        }
        assert!(
            accepted <= 2,
            "{accepted} foreign handles passed the salt check"
        );
        // Garbage, other kinds and a changed index fail the salt check.
        let mut s = HandleTable::new(Kind::Stream, 42);
        let hs = s.insert(1u8).unwrap();
        for garbage in garbage_and([hs, h ^ 1, h ^ 2, h ^ (1 << 40)]) {
            assert_eq!(c.decode(garbage), None, "{garbage:#x} accepted");
        }
        // A changed generation field names the same slot with another generation (which the
        // backend's slot check rejects).
        assert_eq!(c.decode(h ^ (1 << INDEX_BITS)), Some(raw(0, 1)));
    }
}

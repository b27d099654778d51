//! The one generational handle slab of acl-notify: what a handle given out by the simulator
//! (`acl-notify-sim`), its C library (`libascendcl.so`) or the driver (`acl-notify-driver`)
//! stands for, with stale, destroyed, forged and foreign handles told apart from live ones on
//! every lookup (the callers answer them with 107017).
//!
//! It is a crate of its own, with std, rather than a fixed-capacity slab in the core: the
//! core is `#![no_std]` without an allocator, and a fixed capacity would have to be chosen at
//! compile time for tables that hold up to a million handles in a process and usually a few;
//! the three users are std crates that grow their tables on demand. The driver must not
//! depend on the simulator, so the slab cannot live in either backend.
//!
//! A handle is a 64-bit value (carried in a `void *` by the C library):
//!
//! ```text
//!  63      56 55            40 39               20 19                0
//! ┌──────────┬────────────────┬───────────────────┬───────────────────┐
//! │  kind    │  table salt    │  slot generation  │   slot index + 1  │
//! │ (8 bits) │   (16 bits)    │     (20 bits)     │     (20 bits)     │
//! └──────────┴────────────────┴───────────────────┴───────────────────┘
//! ```
//!
//! - `kind` ([`Kind`]) tells notify, stream, count-notify, context, event and physical-memory
//!   handles apart (a stream passed as a notify is rejected), and makes every handle a
//!   non-canonical address on x86-64 and AArch64: C code that dereferences one faults at once
//!   instead of corrupting memory. No handle is 0 (NULL).
//! - The salt is random per table (each table is made with a seed: pass [`random_seed`] per
//!   session or instance), and each slot's generation starts at a random value and moves on
//!   each time the slot is freed: a handle from another process, session or table, or one
//!   whose slot was reused, matches a live entry with probability 2⁻³⁶ at most.
//! - A destroyed handle's slot has a new generation (or is empty), so the old value no longer
//!   matches for the next 2²⁰ − 1 reuses of that slot.
//!
//! [`Slab`] is the table itself, to be kept under the user's own lock; [`Table`] adds the
//! lock and *guards* for handles whose value must not be destroyed while a call uses it (the
//! driver's C pointers): see the [`guarded`] module.

pub mod guarded;

pub use guarded::{Guard, Lookup, Table};

/// What a handle names; the value is the handle's top byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A notify (`aclrtNotify`).
    Notify = 0xA5,
    /// A stream (`aclrtStream`).
    Stream = 0x5A,
    /// A count notify (`aclrtCntNotify`).
    CntNotify = 0xC3,
    /// A context (`aclrtContext`).
    Context = 0x3C,
    /// An event (`aclrtEvent`).
    Event = 0xE7,
    /// A physical memory allocation (`aclrtDrvMemHandle`).
    PhysMem = 0x96,
    /// A stream-ordered memory pool (`aclrtMemPool`).
    MemPool = 0x69,
    /// A data buffer (`aclDataBuffer *`).
    DataBuffer = 0xDB,
    /// An allocator descriptor (`aclrtAllocatorDesc`).
    AllocatorDesc = 0xAD,
    /// A model runtime instance (`aclmdlRI`).
    ModelRI = 0x4D,
    /// A shared buffer (`aclrtMbuf`).
    Mbuf = 0xB5,
    /// A task of a model runtime instance (`aclmdlRITask`).
    ModelTask = 0x7A,
    /// A label of a model stream (`aclrtLabel`).
    Label = 0x1A,
    /// A list of labels (`aclrtLabelList`).
    LabelList = 0x2B,
    /// A task group of a captured model (`aclrtTaskGrp`).
    TaskGroup = 0x6B,
    /// A condition handle of a captured model (`aclmdlRICondHandle`).
    CondHandle = 0xCD,
    /// The groups' information of a device (`aclrtGroupInfo *`).
    GroupInfo = 0x9C,
    /// A kernel binary's description (`aclrtBinary`).
    Binary = 0xB1,
}

const INDEX_BITS: u32 = 20;
const GEN_BITS: u32 = 20;
const SALT_SHIFT: u32 = INDEX_BITS + GEN_BITS;
const KIND_SHIFT: u32 = 56;
const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;
const SALT_MASK: u64 = 0xFFFF;

/// Live handles one table can hold (the index field holds `slot + 1`, and 0 is never used).
pub const MAX_LIVE: usize = INDEX_MASK as usize;

/// SplitMix64: spreads a seed over the salt and the slots' initial generations.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A random seed for a table: different in each call, process (a forked child included) and
/// run.
pub fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

/// What every handle of one table has in common (kind and salt): checks, without the table,
/// that a handle could be one of its (for a layer above the table's owner, which wants a
/// handle of another kind, table, session or process rejected before anything else).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    prefix: u64,
}

impl Stamp {
    /// Whether `handle` has this table's kind and salt and a slot index; whether it is live
    /// is the table's to say.
    #[inline]
    pub fn admits(self, handle: u64) -> bool {
        handle & !((GEN_MASK << INDEX_BITS) | INDEX_MASK) == self.prefix && handle & INDEX_MASK != 0
    }
}

#[derive(Clone, Debug)]
struct Slot<T> {
    generation: u64,
    value: Option<T>,
}

/// One table of handles of one [`Kind`], addressing `T`s. A clone hands out the same handles
/// for the same values (a forked child's copy of a process-wide table).
#[derive(Clone, Debug)]
pub struct Slab<T> {
    /// Kind and salt, in place.
    prefix: u64,
    seed: u64,
    /// The slot index of `slots[0]` (see [`Slab::with_indices`]).
    first: usize,
    /// One past the highest slot index this table hands out.
    end: usize,
    slots: Vec<Slot<T>>,
    /// Free entries of `slots` (positions, not slot indices).
    free: Vec<u32>,
}

impl<T> Slab<T> {
    /// An empty table of `kind` handles. `seed` supplies the salt and the slots' initial
    /// generations: pass [`random_seed`], or a value derived from one, per table.
    pub fn new(kind: Kind, seed: u64) -> Self {
        Self::with_indices(kind, seed, 0..MAX_LIVE)
    }

    /// An empty table that hands out the slot indices in `indices` only (clamped to
    /// `0..MAX_LIVE`). Two tables of one kind and seed have one [`Stamp`]: with disjoint
    /// ranges they share a handle space, and no handle names a slot of both (the simulator's
    /// local notifies and its cluster-mode remote imports, which C sees as one kind).
    pub fn with_indices(kind: Kind, seed: u64, indices: core::ops::Range<usize>) -> Self {
        let salt = mix(seed ^ kind as u64) & SALT_MASK;
        let end = indices.end.min(MAX_LIVE);
        Slab {
            prefix: ((kind as u64) << KIND_SHIFT) | (salt << SALT_SHIFT),
            seed,
            first: indices.start.min(end),
            end,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// What all of this table's handles have in common.
    pub fn stamp(&self) -> Stamp {
        Stamp {
            prefix: self.prefix,
        }
    }

    fn encode(&self, index: usize, generation: u64) -> u64 {
        self.prefix | (generation << INDEX_BITS) | (index as u64 + 1)
    }

    /// The position in `slots` of the slot a handle names, if the handle is one of this
    /// table's and still live.
    #[inline]
    fn decode(&self, handle: u64) -> Option<usize> {
        if handle & !((GEN_MASK << INDEX_BITS) | INDEX_MASK) != self.prefix {
            return None;
        }
        let index = usize::try_from(handle & INDEX_MASK).ok()?.checked_sub(1)?;
        let at = index.checked_sub(self.first)?;
        let slot = self.slots.get(at)?;
        (slot.value.is_some() && slot.generation == (handle >> INDEX_BITS) & GEN_MASK).then_some(at)
    }

    /// Stores `value` and returns its handle; gives `value` back if the table is full
    /// ([`MAX_LIVE`] handles live, or every index of its range).
    pub fn insert(&mut self, value: T) -> Result<u64, T> {
        let at = match self.free.pop() {
            Some(at) => at as usize,
            None => {
                let at = self.slots.len();
                let index = self.first + at;
                if index >= self.end {
                    return Err(value);
                }
                self.slots.push(Slot {
                    generation: mix(self.seed.wrapping_add(index as u64)) & GEN_MASK,
                    value: None,
                });
                at
            }
        };
        let slot = &mut self.slots[at];
        slot.value = Some(value);
        let generation = slot.generation;
        Ok(self.encode(self.first + at, generation))
    }

    /// The value behind a live handle.
    #[inline]
    pub fn get(&self, handle: u64) -> Option<&T> {
        let i = self.decode(handle)?;
        self.slots[i].value.as_ref()
    }

    /// The value behind a live handle, mutably.
    pub fn get_mut(&mut self, handle: u64) -> Option<&mut T> {
        let i = self.decode(handle)?;
        self.slots[i].value.as_mut()
    }

    /// Whether `handle` is a live handle of this table.
    #[inline]
    pub fn contains(&self, handle: u64) -> bool {
        self.decode(handle).is_some()
    }

    /// Frees the slot at position `at`: its generation moves on, so every copy of its handle
    /// is stale.
    fn free_at(slots: &mut [Slot<T>], free: &mut Vec<u32>, at: usize) -> Option<T> {
        let slot = slots.get_mut(at)?;
        let value = slot.value.take()?;
        slot.generation = (slot.generation + 1) & GEN_MASK;
        // `at < MAX_LIVE < 2³²`.
        free.push(at as u32);
        Some(value)
    }

    /// Removes a live handle and returns its value; the handle (and every copy of it) is
    /// stale from now on.
    pub fn remove(&mut self, handle: u64) -> Option<T> {
        let index = self.decode(handle)?;
        Self::free_at(&mut self.slots, &mut self.free, index)
    }

    /// Removes every live handle whose value satisfies `pred`, returning the values.
    pub fn remove_where(&mut self, mut pred: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut out = Vec::new();
        for index in 0..self.slots.len() {
            if self.slots[index].value.as_ref().is_some_and(&mut pred) {
                out.extend(Self::free_at(&mut self.slots, &mut self.free, index));
            }
        }
        out
    }

    /// Removes every live handle, returning the values.
    pub fn drain(&mut self) -> Vec<T> {
        self.remove_where(|_| true)
    }

    /// Every live value.
    pub fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots.iter().filter_map(|s| s.value.as_ref())
    }

    /// Every live value, mutably.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        self.slots.iter_mut().filter_map(|s| s.value.as_mut())
    }

    /// Every live handle with its value.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &T)> + '_ {
        self.slots.iter().enumerate().filter_map(|(at, s)| {
            let v = s.value.as_ref()?;
            Some((self.encode(self.first + at, s.generation), v))
        })
    }

    /// Number of live handles.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether no handle is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values that are no handle at all (NULL, small numbers, all ones, a real address), then
    /// `more`.
    fn garbage_and<const K: usize>(more: [u64; K]) -> Vec<u64> {
        let local = 0u64;
        let mut v = vec![0, 1, u64::MAX, 0xdead_beef, &local as *const u64 as u64];
        v.extend(more);
        v
    }

    #[test]
    fn live_handles_resolve_and_dead_ones_do_not() {
        let mut t = Slab::new(Kind::Notify, 42);
        let a = t.insert(10u32).unwrap();
        let b = t.insert(20u32).unwrap();
        assert_ne!(a, b);
        assert_eq!(t.get(a), Some(&10));
        assert_eq!(t.get(b), Some(&20));
        *t.get_mut(b).unwrap() = 21;
        assert_eq!(t.remove(a), Some(10));
        assert_eq!(t.get(a), None, "destroyed handle still resolves");
        assert!(!t.contains(a));
        assert_eq!(t.remove(a), None, "double destroy succeeded");
        // The slot is reused with a new generation: the old handle stays dead.
        let c = t.insert(30u32).unwrap();
        assert_eq!(c & INDEX_MASK, a & INDEX_MASK, "the freed slot is reused");
        assert_ne!(a, c);
        assert_eq!(t.get(a), None);
        assert_eq!(t.get(c), Some(&30));
        assert_eq!(t.len(), 2);
        assert_eq!(t.values().copied().collect::<Vec<_>>(), vec![30, 21]);
        let iter: Vec<(u64, u32)> = t.iter().map(|(h, v)| (h, *v)).collect();
        assert_eq!(iter, vec![(c, 30), (b, 21)], "iter names each live handle");
        let mut all = t.drain();
        all.sort();
        assert_eq!(all, vec![21, 30]);
        assert!(t.is_empty() && t.get(b).is_none() && t.get(c).is_none());
    }

    #[test]
    fn garbage_other_kinds_and_changed_fields_are_rejected() {
        let mut n = Slab::new(Kind::Notify, 7);
        let mut s = Slab::new(Kind::Stream, 7);
        let hn = n.insert(1u8).unwrap();
        let hs = s.insert(2u8).unwrap();
        assert_eq!(n.get(hs), None, "stream handle accepted as notify");
        assert_eq!(s.get(hn), None, "notify handle accepted as stream");
        let changed = [
            hn ^ 1,             // index
            hn + (1 << 20),     // generation
            hn ^ (1 << 40),     // salt
            hn ^ (1 << 56),     // kind
            hn & !(INDEX_MASK), // index 0
            hn | INDEX_MASK,    // index past the table
        ];
        for garbage in garbage_and(changed) {
            assert_eq!(n.get(garbage), None, "{garbage:#x} accepted");
        }
    }

    #[test]
    fn the_stamp_admits_this_tables_handles_only() {
        let mut t = Slab::new(Kind::Notify, 11);
        let h = t.insert(1u8).unwrap();
        let stamp = t.stamp();
        assert!(stamp.admits(h));
        t.remove(h);
        assert!(stamp.admits(h), "the stamp does not know liveness");
        let mut other = Slab::new(Kind::Notify, 12);
        let ho = other.insert(1u8).unwrap();
        let hs = Slab::new(Kind::Stream, 11).insert(1u8).unwrap();
        for bad in garbage_and([ho, hs, h ^ (1 << 40), h & !INDEX_MASK]) {
            assert!(!stamp.admits(bad), "{bad:#x} admitted");
        }
    }

    #[test]
    fn another_tables_salt_is_rejected() {
        let mut mine = Slab::new(Kind::Notify, 1);
        let mut theirs = Slab::new(Kind::Notify, 2);
        let h_mine = mine.insert(1u8).unwrap();
        let h_theirs = theirs.insert(1u8).unwrap();
        assert_ne!(h_mine, h_theirs);
        assert_eq!(mine.get(h_theirs), None);
        // Over many random seeds, no other table accepts this one's handle.
        let accepted = (0..10_000)
            .filter(|_| {
                let mut other = Slab::new(Kind::Notify, random_seed());
                other.insert(1u8).unwrap();
                other.contains(h_mine)
            })
            .count();
        assert_eq!(accepted, 0);
    }

    #[test]
    fn handles_are_non_canonical_addresses() {
        for kind in [
            Kind::Notify,
            Kind::Stream,
            Kind::CntNotify,
            Kind::Context,
            Kind::Event,
            Kind::PhysMem,
            Kind::MemPool,
            Kind::DataBuffer,
            Kind::AllocatorDesc,
            Kind::ModelRI,
            Kind::Mbuf,
            Kind::ModelTask,
            Kind::Label,
            Kind::LabelList,
            Kind::TaskGroup,
            Kind::CondHandle,
            Kind::GroupInfo,
            Kind::Binary,
        ] {
            let mut t = Slab::new(kind, random_seed());
            for i in 0..100u32 {
                let h = t.insert(i).unwrap();
                let top = h >> 47;
                assert!(top != 0 && top != 0x1_ffff, "{h:#x} is a canonical address");
                assert_eq!(h >> KIND_SHIFT, kind as u64);
            }
        }
    }

    #[test]
    fn remove_where_kills_matching_handles() {
        let mut t = Slab::new(Kind::Stream, 3);
        let hs: Vec<u64> = (0..6u32).map(|i| t.insert(i).unwrap()).collect();
        let mut gone = t.remove_where(|v| v % 2 == 0);
        gone.sort();
        assert_eq!(gone, vec![0, 2, 4]);
        for (i, h) in hs.iter().enumerate() {
            assert_eq!(t.get(*h).is_some(), i % 2 == 1);
        }
    }

    #[test]
    fn a_full_table_gives_the_value_back() {
        let mut t = Slab::new(Kind::Event, 5);
        // Fill cheaply: the slots exist, so only the bound is tested.
        for i in 0..MAX_LIVE {
            t.slots.push(Slot {
                generation: 0,
                value: Some(i as u32),
            });
        }
        assert_eq!(t.insert(7), Err(7));
        let h = t.encode(3, 0);
        assert_eq!(t.remove(h), Some(3));
        assert_eq!(t.insert(8).map(|h| h & INDEX_MASK), Ok(4));
    }

    #[test]
    fn tables_with_disjoint_indices_share_a_stamp_and_no_handle() {
        let seed = 77;
        let mut low = Slab::with_indices(Kind::Notify, seed, 0..4);
        let mut high = Slab::with_indices(Kind::Notify, seed, 4..MAX_LIVE);
        assert_eq!(low.stamp(), high.stamp());
        let lows: Vec<u64> = (0..4u32).map(|i| low.insert(i).unwrap()).collect();
        assert_eq!(low.insert(9), Err(9), "the low range holds 4");
        let highs: Vec<u64> = (0..4u32).map(|i| high.insert(10 + i).unwrap()).collect();
        for (l, h) in lows.iter().zip(&highs) {
            assert!(low.stamp().admits(*h) && high.stamp().admits(*l));
            assert_eq!(high.get(*l), None, "{l:#x} resolved in the high table");
            assert_eq!(low.get(*h), None, "{h:#x} resolved in the low table");
        }
        assert_eq!(
            highs[0] & INDEX_MASK,
            5,
            "the high range starts at index 4 (field 5)"
        );
        assert_eq!(high.remove(highs[1]), Some(11));
        let again = high.insert(20).unwrap();
        assert_eq!(again & INDEX_MASK, highs[1] & INDEX_MASK);
        assert_ne!(again, highs[1]);
        assert_eq!(high.get(again), Some(&20));
    }

    #[test]
    fn random_seeds_differ() {
        let a = random_seed();
        let b = random_seed();
        assert_ne!(a, b);
    }
}

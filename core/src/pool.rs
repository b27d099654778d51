//! Fixed-capacity notify id pools: ids `0..N` handed out and taken back in O(1), with a full
//! pool answered by `NoNotifyResource` (207009) and a bad free by `InvalidHandle` (107017).
//!
//! Three flavours share one algorithm — a LIFO free list threaded through the ids and a per-id
//! state (so a double free is caught) — and need no initialisation pass: all-zero bytes are an
//! empty pool ([`IdPool`] hands never-used ids out from a bump counter, [`AtomicIdPool`]
//! reads a zeroed link as "the next id"):
//!
//! - [`IdPool`]: plain, `&mut self`, for a single owner;
//! - [`SpinIdPool`]: an [`IdPool`] behind a `spin` mutex, `&self`, for firmware contexts that
//!   share one pool;
//! - [`AtomicIdPool`]: lock-free (a Treiber stack whose 64-bit head carries an ABA tag),
//!   `#[repr(C)]` and pointer-free, so it can live in shared or device memory and be used by
//!   several processes at once. Its head word also holds the in-use count, and each id's link
//!   and state share one 32-bit slot word, so that an alloc is one compare-and-swap and a free
//!   two.
//!
//! Capacity is a const generic of at most [`MAX_CAPACITY`] (65535, the largest SoC maximum;
//! export keys carry the id in 16 bits). Per-SoC pool types are
//! [`SocType::NotifyPool`](crate::soc::SocType::NotifyPool) and its siblings.
//!
//! Memory: [`IdPool`] `3 × N` bytes plus a 6-byte header — 192 KiB for 65535 ids, 24 KiB
//! for 8192, 6 KiB for 2048, 3 KiB for 1024; [`AtomicIdPool`] `4 × N` bytes plus an 8-byte
//! head — 256 KiB, 32 KiB, 8 KiB, 4 KiB.

use crate::error::{Error, Result};

/// The largest capacity a pool can have: 65535 ids (0..=65534), so that `id + 1` fits the
/// 16-bit links and the 16-bit id field of an export key.
pub const MAX_CAPACITY: usize = u16::MAX as usize;

/// Compile-time check that `N` fits the 16-bit links; referenced by every constructor, so an
/// oversized pool is a build error, not a run-time surprise.
struct Capacity<const N: usize>;

impl<const N: usize> Capacity<N> {
    const OK: () = assert!(N <= MAX_CAPACITY, "pool capacity must be at most 65535");
}

/// Per-id state byte: zero (never used, or freed) means free, so zeroed memory is empty.
const FREE: u8 = 0;
/// Per-id state byte of an allocated id.
const ALLOCATED: u8 = 1;

/// A notify id pool of capacity `N` (ids `0..N`), for a single owner (`&mut self`).
///
/// `alloc` and `free` run in constant time whatever `N` is. Freed ids are reused last-in
/// first-out. All-zero bytes are a valid empty pool (as for [`AtomicIdPool`]).
#[derive(Clone)]
pub struct IdPool<const N: usize> {
    /// `top + 1` of the free list of previously freed ids; 0 = empty.
    head: u16,
    /// Ids `bump..N` have never been handed out.
    bump: u16,
    /// Ids currently allocated.
    in_use: u16,
    /// For a freed id: the next freed id + 1 (0 = end of list).
    next: [u16; N],
    /// `FREE` or `ALLOCATED`.
    state: [u8; N],
}

impl<const N: usize> IdPool<N> {
    /// An empty pool. `const`, so a pool can be a `static` (placed in `.bss`).
    pub const fn new() -> Self {
        let () = Capacity::<N>::OK;
        IdPool {
            head: 0,
            bump: 0,
            in_use: 0,
            next: [0; N],
            state: [FREE; N],
        }
    }

    /// The number of ids (`N`).
    pub const fn capacity(&self) -> u32 {
        N as u32
    }

    /// How many ids are allocated.
    pub const fn in_use(&self) -> u32 {
        self.in_use as u32
    }

    /// Whether no id is allocated.
    pub const fn is_empty(&self) -> bool {
        self.in_use == 0
    }

    /// Whether every id is allocated (the next `alloc` fails).
    pub const fn is_full(&self) -> bool {
        self.in_use as usize == N
    }

    /// Whether `id` is currently allocated (`false` for an id out of range).
    pub fn is_allocated(&self, id: u32) -> bool {
        self.state.get(id as usize) == Some(&ALLOCATED)
    }

    /// Takes a free id.
    ///
    /// Codes: 207009 `NoNotifyResource` when all `N` ids are allocated.
    pub fn alloc(&mut self) -> Result<u32> {
        let id = if self.head != 0 {
            let id = usize::from(self.head - 1);
            // In range: `free` only links ids it has checked against `N`.
            self.head = self.next.get(id).copied().ok_or(Error::InternalError)?;
            id
        } else if usize::from(self.bump) < N {
            let id = usize::from(self.bump);
            self.bump += 1;
            id
        } else {
            debug!("id pool of {} is full", N);
            return Err(Error::NoNotifyResource);
        };
        if let Some(s) = self.state.get_mut(id) {
            *s = ALLOCATED;
        }
        self.in_use += 1;
        Ok(id as u32)
    }

    /// Gives `id` back.
    ///
    /// Codes: 107017 `InvalidHandle` if `id` is out of range or not allocated (a double free).
    pub fn free(&mut self, id: u32) -> Result<()> {
        let i = id as usize;
        match self.state.get_mut(i) {
            Some(s) if *s == ALLOCATED => *s = FREE,
            _ => {
                debug!("id pool: free of unallocated id {}", id);
                return Err(Error::InvalidHandle);
            }
        }
        self.next[i] = self.head;
        // `i < N <= 65535`, so `i + 1` fits.
        self.head = (i + 1) as u16;
        self.in_use -= 1;
        Ok(())
    }
}

impl<const N: usize> Default for IdPool<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Debug for IdPool<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("IdPool")
            .field("capacity", &N)
            .field("in_use", &self.in_use)
            .finish()
    }
}

#[cfg(feature = "defmt")]
impl<const N: usize> defmt::Format for IdPool<N> {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "IdPool {{ capacity: {}, in_use: {} }}", N, self.in_use)
    }
}

/// An [`IdPool`] behind a `spin` mutex: `&self` methods, usable from several contexts (cores,
/// interrupt-free threads) at once. Critical sections are O(1).
pub struct SpinIdPool<const N: usize> {
    inner: spin::Mutex<IdPool<N>>,
}

impl<const N: usize> SpinIdPool<N> {
    /// An empty pool; `const`, so it can be a `static`.
    pub const fn new() -> Self {
        SpinIdPool {
            inner: spin::Mutex::new(IdPool::new()),
        }
    }

    /// The number of ids (`N`).
    pub const fn capacity(&self) -> u32 {
        N as u32
    }

    /// How many ids are allocated.
    pub fn in_use(&self) -> u32 {
        self.inner.lock().in_use()
    }

    /// Whether `id` is currently allocated.
    pub fn is_allocated(&self, id: u32) -> bool {
        self.inner.lock().is_allocated(id)
    }

    /// Takes a free id. Codes: 207009 when full.
    pub fn alloc(&self) -> Result<u32> {
        self.inner.lock().alloc()
    }

    /// Gives `id` back. Codes: 107017 if out of range or not allocated.
    pub fn free(&self, id: u32) -> Result<()> {
        self.inner.lock().free(id)
    }

    /// Runs `f` with the pool locked (several operations as one).
    pub fn with<R>(&self, f: impl FnOnce(&mut IdPool<N>) -> R) -> R {
        f(&mut self.inner.lock())
    }
}

impl<const N: usize> Default for SpinIdPool<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Debug for SpinIdPool<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.inner.try_lock() {
            Some(p) => f.debug_tuple("SpinIdPool").field(&*p).finish(),
            None => f.write_str("SpinIdPool { <locked> }"),
        }
    }
}

#[cfg(target_has_atomic = "64")]
pub use atomic::AtomicIdPool;

#[cfg(target_has_atomic = "64")]
mod atomic {
    use super::Capacity;
    use crate::error::{Error, Result};
    use crate::sync::{AtomicU32, AtomicU64, Ordering};

    // The head word: `tag << 32 | in_use << 16 | top`.
    //
    // - `top` is the id on top of the free list, `N` when the list is empty.
    // - `in_use` (at most `N` <= 65535) is kept by the same CAS that pops or pushes, so it is
    //   exact and free of charge: no separate counter to update.
    // - The 32-bit tag is bumped by every successful CAS (wrapping), so a head that was popped
    //   and pushed back between a thread's load and its CAS is not mistaken for the one it
    //   read. A wrong match needs exactly a multiple of 2^32 head changes (ending on the same
    //   top and count) while one thread sits between two of its instructions.
    //
    // All-zero bytes: top = id 0, nothing in use, and (see the slot words) a list 0, 1, …,
    // N - 1 — every id free — with no initialisation pass. (This replaces a bump counter for
    // never-used ids: an alloc is one CAS on the head whether the id was used before or not.)

    /// Bits of the head word holding the top id.
    const TOP_MASK: u64 = 0xFFFF;
    /// Shift of the in-use count in the head word.
    const IN_USE_SHIFT: u32 = 16;
    /// One step of the tag.
    const TAG_ONE: u64 = 1 << 32;

    // The slot word of an id `i` (one `u32`, so the link and the state of an id share one
    // cache line):
    //
    // - [`ALLOCATED`]: allocated;
    // - below `1 << 16`: free (on the list, or being pushed by the one `free` that claimed
    //   it), linked to `next = (w ^ (i + 1)) & 0xFFFF` — the id below it, `N` at the bottom.
    //   Zero links `i` to `i + 1`: the implicit list of zeroed memory;
    // - anything else: garbage written by a misbehaving process (neither allocated nor a
    //   usable link).

    /// Slot word of an allocated id.
    const ALLOCATED: u32 = 1 << 16;
    /// Bits of a free slot word holding the (encoded) link.
    const LINK_MASK: u32 = 0xFFFF;

    /// The top id of a head word (`N` = empty).
    const fn top(h: u64) -> usize {
        (h & TOP_MASK) as usize
    }

    /// The in-use count of a head word.
    const fn in_use(h: u64) -> u32 {
        ((h >> IN_USE_SHIFT) & 0xFFFF) as u32
    }

    /// The head word that follows `h` (tag + 1) with this in-use count (taken mod 2^16, so a
    /// corrupted count cannot spill into the tag) and top.
    const fn successor(h: u64, in_use: u32, top: usize) -> u64 {
        ((h & !0xFFFF_FFFF).wrapping_add(TAG_ONE))
            | (((in_use & 0xFFFF) as u64) << IN_USE_SHIFT)
            | (top as u64 & TOP_MASK)
    }

    /// The free slot word of id `i` linking it to `next`.
    const fn link_word(i: usize, next: usize) -> u32 {
        ((next ^ (i + 1)) as u32) & LINK_MASK
    }

    /// The id a free slot word of id `i` links to (garbage in, garbage out: callers check it
    /// against `N`).
    const fn next_of(i: usize, w: u32) -> usize {
        ((w ^ (i as u32 + 1)) & LINK_MASK) as usize
    }

    /// Hints the CPU to bring `p`'s cache line in. A hint only: it reads nothing, cannot
    /// fault, and is not ordered by fences or locked instructions, so a cache miss overlaps
    /// other work instead of stalling the CAS that needs the line.
    #[inline(always)]
    fn prefetch<T>(p: *const T) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: SSE is part of the x86_64 baseline; `prefetcht0` is a hint that does not
        // access memory architecturally and cannot fault, whatever the address.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
        }
        #[cfg(all(target_arch = "aarch64", not(miri)))]
        // SAFETY: `prfm` is a hint: it does not access memory architecturally, cannot fault
        // (whatever the address) and changes no register or flag.
        unsafe {
            core::arch::asm!(
                "prfm pldl1keep, [{0}]",
                in(reg) p,
                options(nostack, preserves_flags, readonly)
            );
        }
        #[cfg(any(not(any(target_arch = "x86_64", target_arch = "aarch64")), miri))]
        let _ = p;
    }

    /// A lock-free notify id pool of capacity `N`, for shared or device memory.
    ///
    /// - `#[repr(C)]`, no pointers, only atomics: the same bytes can be mapped at different
    ///   addresses in several processes, which may all call any method concurrently.
    /// - **All-zero bytes are a valid empty pool**, so a zero-filled shared-memory file or
    ///   `.bss` needs no initialisation: see [`from_zeroed_ptr`](Self::from_zeroed_ptr).
    ///   [`new`](Self::new) is `const` and produces exactly those zero bytes.
    /// - `alloc` / `free` are O(1) apart from CAS retries under contention: a Treiber stack of
    ///   free ids threaded through a per-id slot word, whose 64-bit head carries a 32-bit tag
    ///   bumped on every change (so a head that was popped and pushed back between a reader's
    ///   load and its CAS is not mistaken for the one it read) and the in-use count. Zeroed
    ///   slots link each id to the next, so a fresh pool's list is `0, 1, …, N - 1`.
    ///   Uncontended, an `alloc` is one CAS (on the head) and a `free` two (one claiming the
    ///   id's slot, one on the head); nothing else is a locked operation.
    /// - Each id's slot word says whether it is allocated, and a `free` claims it by
    ///   compare-and-swap, so a double free (even by two processes racing) is caught: exactly
    ///   one `free` of an allocated id succeeds, and an id is never on the list twice.
    ///
    /// Memory: `4 × N` bytes plus an 8-byte head (rounded up to a multiple of 8) — 256 KiB
    /// for 65535 ids, 32 KiB for 8192, 8 KiB for 2048, 4 KiB for 1024.
    ///
    /// The memory may be written by other processes, so it is untrusted: a corrupted link is
    /// answered with `DrvInternalError` (507899), never a panic or an out-of-range access.
    #[repr(C)]
    pub struct AtomicIdPool<const N: usize> {
        /// Tag (high 32 bits), in-use count (16 bits) and top id (low 16 bits, `N` = empty)
        /// of the free list.
        pub(super) head: AtomicU64,
        /// Per-id slot words: `ALLOCATED`, or a (relative) link to the next free id.
        pub(super) slot: [AtomicU32; N],
    }

    impl<const N: usize> AtomicIdPool<N> {
        /// An empty pool: all fields zero. `const`, so it can be a `static`.
        pub const fn new() -> Self {
            let () = Capacity::<N>::OK;
            AtomicIdPool {
                head: AtomicU64::new(0),
                slot: [const { AtomicU32::new(0) }; N],
            }
        }

        /// Views a zero-filled (or previously used) region as a pool.
        ///
        /// Zero bytes are an empty pool, so a freshly created, zero-filled shared-memory file
        /// can be used directly; every process that maps the file calls this on its own
        /// mapping. The layout is `#[repr(C)]` and the same for every process built from this
        /// crate version with the same `N`.
        ///
        /// # Safety
        ///
        /// - `ptr` is non-null, aligned to `align_of::<Self>()` (8) and points to
        ///   `size_of::<Self>()` bytes that stay mapped and writable for `'a`;
        /// - those bytes are either all zero or were last written by an `AtomicIdPool<N>` of
        ///   the same `N` (any other content is tolerated without undefined behaviour, but the
        ///   pool's answers are then meaningless);
        /// - during `'a` the bytes are accessed only through `AtomicIdPool<N>` methods (or
        ///   other atomic accesses), never by plain reads or writes.
        pub unsafe fn from_zeroed_ptr<'a>(ptr: *mut u8) -> &'a Self {
            let () = Capacity::<N>::OK;
            // SAFETY: the caller guarantees alignment, size, lifetime and atomic-only access;
            // every bit pattern is a valid value of each field (integers in atomics).
            unsafe { &*ptr.cast::<Self>() }
        }

        /// The number of ids (`N`).
        pub const fn capacity(&self) -> u32 {
            N as u32
        }

        /// How many ids are allocated (a snapshot; may be stale under concurrency). One load:
        /// the count lives in the head word. Ids in transit (popped but not yet marked,
        /// claimed by a `free` but not yet pushed) count as allocated.
        pub fn in_use(&self) -> u32 {
            in_use(self.head.load(Ordering::Relaxed))
        }

        /// Whether `id` is currently allocated (`false` out of range).
        pub fn is_allocated(&self, id: u32) -> bool {
            self.slot
                .get(id as usize)
                .is_some_and(|s| s.load(Ordering::Acquire) == ALLOCATED)
        }

        fn corrupted() -> Error {
            warn!("atomic id pool: corrupted free list");
            Error::DrvInternalError
        }

        /// Takes a free id: the top of the free list.
        ///
        /// One CAS on the head, which also counts the id in use. A successful CAS makes this
        /// thread the only owner of the id it popped, so marking it `ALLOCATED` is a plain
        /// store: no other alloc can pop it (it is off the list) and no `free` can claim it
        /// (its slot is not `ALLOCATED` until that store).
        ///
        /// Codes: 207009 `NoNotifyResource` when all `N` ids are allocated; 507899
        /// `DrvInternalError` if the shared memory was corrupted.
        pub fn alloc(&self) -> Result<u32> {
            let mut h = self.head.load(Ordering::Acquire);
            let id = loop {
                let id = top(h);
                if id == N {
                    // One reading of the head saw the free list empty: at this instant every
                    // id was allocated (or in transit).
                    debug!("atomic id pool of {} is full", N);
                    return Err(Error::NoNotifyResource);
                }
                let slot = self.slot.get(id).ok_or_else(Self::corrupted)?;
                // Another thread may pop `id` and push it back with a new link between this
                // load and the CAS below; the tag in `h` then no longer matches and we retry.
                let next = next_of(id, slot.load(Ordering::Relaxed));
                if next > N {
                    return Err(Self::corrupted());
                }
                // The next alloc will most likely pop `next`: start fetching its slot now, so
                // a cold line (a long list, as after a drain in random order) costs no stall.
                if next < N {
                    prefetch(self.slot.as_ptr().wrapping_add(next));
                }
                let new = successor(h, in_use(h) + 1, next);
                match self
                    .head
                    .compare_exchange_weak(h, new, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => break id,
                    Err(cur) => h = cur,
                }
            };
            // `id < N` (its slot was read above). Release: pairs with the claim of the `free`
            // that gives the id back.
            if let Some(s) = self.slot.get(id) {
                s.store(ALLOCATED, Ordering::Release);
            }
            Ok(id as u32)
        }

        /// Gives `id` back.
        ///
        /// Codes: 107017 `InvalidHandle` if `id` is out of range or not allocated (a double
        /// free; of two racing frees of one id exactly one succeeds).
        ///
        /// Why an id is never on the list twice: the only way onto the list is this
        /// function's compare-and-swap of the id's slot from `ALLOCATED` to a link (the
        /// claim). Of several frees racing on one id exactly one claim succeeds; the others
        /// see a word that is not `ALLOCATED` and return `InvalidHandle` without writing
        /// anything. The winner owns the slot until its push (the CAS on the head) succeeds:
        /// it alone rewrites the link on each retry (plain stores — no free can claim a slot
        /// that is not `ALLOCATED`, no alloc can pop an id that is not on the list yet), and
        /// a link word is never `ALLOCATED`. The slot becomes `ALLOCATED` again only by the
        /// alloc that popped the id, after its head CAS, i.e. once the id is off the list. So
        /// between two pushes of an id there is always a pop. (A late "double" free that
        /// claims the id after it was popped and re-allocated frees the new allocation: ids
        /// carry no generation, as with any id-based API.)
        ///
        /// Why the claim is a read-modify-write and not a plain store under the head CAS:
        /// two frees that both read `ALLOCATED` with a plain load would both push, since the
        /// head CAS does not order them (both pushes succeed, one after the other), and the
        /// second one's link write would also cut the list below the first. Whoever writes
        /// an id's link must own the id first, and ownership among racing frees needs an
        /// atomic read-modify-write of something per id.
        pub fn free(&self, id: u32) -> Result<()> {
            let i = id as usize;
            let Some(slot) = self.slot.get(i) else {
                return Err(Error::InvalidHandle);
            };
            // Start fetching the slot's line (the caller picked `id`: most likely not in L1)
            // while the head is read. Relaxed: only the top id is used, no memory behind it.
            prefetch(slot);
            let mut h = self.head.load(Ordering::Relaxed);
            // The claim carries the first push attempt's link, so the uncontended path writes
            // the slot once. Acquire: pairs with the `ALLOCATED` store of the alloc that
            // handed the id out.
            if slot
                .compare_exchange(
                    ALLOCATED,
                    link_word(i, top(h)),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                debug!("atomic id pool: free of unallocated id {}", id);
                return Err(Error::InvalidHandle);
            }
            loop {
                // Release: the link is visible to whoever pops `i`.
                let new = successor(h, in_use(h).wrapping_sub(1), i);
                match self
                    .head
                    .compare_exchange_weak(h, new, Ordering::Release, Ordering::Relaxed)
                {
                    Ok(_) => return Ok(()),
                    Err(cur) => {
                        h = cur;
                        slot.store(link_word(i, top(h)), Ordering::Relaxed);
                    }
                }
            }
        }
    }

    impl<const N: usize> Default for AtomicIdPool<N> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<const N: usize> core::fmt::Debug for AtomicIdPool<N> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("AtomicIdPool")
                .field("capacity", &N)
                .field("in_use", &self.in_use())
                .finish()
        }
    }

    #[cfg(feature = "defmt")]
    impl<const N: usize> defmt::Format for AtomicIdPool<N> {
        fn format(&self, f: defmt::Formatter<'_>) {
            defmt::write!(
                f,
                "AtomicIdPool {{ capacity: {}, in_use: {} }}",
                N,
                self.in_use()
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::boxed::Box;
    use std::collections::HashSet;
    use std::sync::Arc;
    use std::vec::Vec;

    /// The operations the three pool flavours share, so each test runs on all of them.
    trait Pool {
        fn alloc(&mut self) -> Result<u32>;
        fn free(&mut self, id: u32) -> Result<()>;
        fn is_allocated(&self, id: u32) -> bool;
        fn in_use(&self) -> u32;
        fn capacity(&self) -> u32;
    }

    macro_rules! impl_pool {
        ($ty:ident) => {
            impl<const N: usize> Pool for $ty<N> {
                fn alloc(&mut self) -> Result<u32> {
                    $ty::alloc(self)
                }
                fn free(&mut self, id: u32) -> Result<()> {
                    $ty::free(self, id)
                }
                fn is_allocated(&self, id: u32) -> bool {
                    $ty::is_allocated(self, id)
                }
                fn in_use(&self) -> u32 {
                    $ty::in_use(self)
                }
                fn capacity(&self) -> u32 {
                    $ty::capacity(self)
                }
            }
        };
    }
    impl_pool!(IdPool);
    impl_pool!(SpinIdPool);
    impl_pool!(AtomicIdPool);

    /// A boxed, zero-filled value, built without passing through the (small) test stack.
    ///
    /// Only for types whose all-zero bytes are a valid value (the pools).
    fn boxed_zeroed<T>() -> Box<T> {
        let layout = std::alloc::Layout::new::<T>();
        // SAFETY: every pool type is non-zero-sized (a header) and valid when zeroed
        // (documented and checked by `zeroed_is_empty`); the allocation has `T`'s layout and
        // is handed to `Box`, which frees it with the same layout.
        unsafe {
            let p = std::alloc::alloc_zeroed(layout).cast::<T>();
            assert!(!p.is_null(), "out of memory");
            Box::from_raw(p)
        }
    }

    /// Exhaustion exactly at `N`, the next alloc 207009, reuse after free, double free and
    /// out-of-range free, on one pool.
    fn exercise<P: Pool>(p: &mut P, n: u32) {
        assert_eq!(p.capacity(), n);
        assert_eq!(p.in_use(), 0);
        let mut seen = std::vec![false; n as usize];
        for k in 0..n {
            let id = p.alloc().expect("pool ran out before its capacity");
            assert!(id < n, "id {id} out of range");
            assert!(!seen[id as usize], "id {id} handed out twice");
            seen[id as usize] = true;
            assert!(p.is_allocated(id));
            assert_eq!(p.in_use(), k + 1);
        }
        assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
        assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
        assert_eq!(p.in_use(), n);

        // Reuse after free: free three ids, get exactly those three back, then full again.
        let freed = [0, n / 2, n - 1];
        for id in freed {
            assert_eq!(p.free(id), Ok(()));
            assert!(!p.is_allocated(id));
        }
        assert_eq!(p.in_use(), n - 3);
        let mut back: Vec<u32> = (0..3).map(|_| p.alloc().unwrap()).collect();
        back.sort_unstable();
        assert_eq!(back, freed);
        assert_eq!(p.alloc(), Err(Error::NoNotifyResource));

        // Double free.
        assert_eq!(p.free(n / 2), Ok(()));
        assert_eq!(p.free(n / 2), Err(Error::InvalidHandle));
        assert_eq!(p.in_use(), n - 1);
        assert_eq!(p.alloc(), Ok(n / 2));

        // Out of range.
        for bad in [n, n + 1, u32::MAX] {
            assert_eq!(p.free(bad), Err(Error::InvalidHandle));
            assert!(!p.is_allocated(bad));
        }

        // Free everything; the pool is empty and full capacity is available again.
        for id in 0..n {
            assert_eq!(p.free(id), Ok(()));
        }
        assert_eq!(p.in_use(), 0);
        assert_eq!(p.free(0), Err(Error::InvalidHandle));
        for _ in 0..n {
            p.alloc().unwrap();
        }
        assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
    }

    fn all_flavours<const N: usize>() {
        exercise(&mut *boxed_zeroed::<IdPool<N>>(), N as u32);
        exercise(&mut *Box::new(SpinIdPool::<N>::new()), N as u32);
        exercise(&mut *boxed_zeroed::<AtomicIdPool<N>>(), N as u32);
    }

    #[test]
    fn ascend950_pool_65535() {
        all_flavours::<65535>();
    }

    #[test]
    fn ascend910b_and_910_93_pool_8192() {
        all_flavours::<8192>();
    }

    #[test]
    fn ascend310b_pool_2048() {
        all_flavours::<2048>();
    }

    #[test]
    fn ascend310p_and_910_pool_1024() {
        all_flavours::<1024>();
    }

    #[test]
    fn soc_pool_types_have_the_soc_maximum() {
        use crate::soc::*;
        use core::any::TypeId;
        fn pools<C: SocType>() -> [TypeId; 3]
        where
            C::NotifyPool: 'static,
            C::SpinNotifyPool: 'static,
            C::AtomicNotifyPool: 'static,
        {
            [
                TypeId::of::<C::NotifyPool>(),
                TypeId::of::<C::SpinNotifyPool>(),
                TypeId::of::<C::AtomicNotifyPool>(),
            ]
        }
        fn sized<const M: usize>() -> [TypeId; 3] {
            [
                TypeId::of::<IdPool<M>>(),
                TypeId::of::<SpinIdPool<M>>(),
                TypeId::of::<AtomicIdPool<M>>(),
            ]
        }
        assert_eq!(pools::<Ascend950PR>(), sized::<65535>());
        assert_eq!(pools::<Ascend950DT>(), sized::<65535>());
        assert_eq!(pools::<Ascend910_93>(), sized::<8192>());
        assert_eq!(pools::<Ascend910B>(), sized::<8192>());
        assert_eq!(pools::<Ascend310B>(), sized::<2048>());
        assert_eq!(pools::<Ascend310P>(), sized::<1024>());
        assert_eq!(pools::<Ascend910>(), sized::<1024>());
        assert_eq!(pools::<IPV350>(), sized::<0>());
        for soc in Soc::ALL {
            assert!(soc.max_notifies() as usize <= MAX_CAPACITY);
        }
    }

    #[test]
    fn empty_pool_is_always_full() {
        let mut p = IdPool::<0>::new();
        assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
        assert_eq!(p.free(0), Err(Error::InvalidHandle));
        let a = AtomicIdPool::<0>::new();
        assert_eq!(a.alloc(), Err(Error::NoNotifyResource));
    }

    #[test]
    fn zeroed_is_empty() {
        // SAFETY: the bytes are all zero, which this module documents as a valid empty pool.
        let a: AtomicIdPool<16> = unsafe { core::mem::zeroed() };
        assert_eq!((a.in_use(), a.is_allocated(0)), (0, false));
        // `new()` is exactly zero bytes.
        let n = AtomicIdPool::<16>::new();
        // SAFETY: reading the plain bytes of an initialised, padding-free `#[repr(C)]` value
        // (8 + 4·16 = 72 bytes, a multiple of its alignment 8).
        let bytes: [u8; 72] = unsafe { core::mem::transmute(n) };
        assert_eq!(bytes, [0; 72]);
        assert_eq!(core::mem::size_of::<AtomicIdPool<16>>(), 72);
        // A zeroed pool hands out 0, 1, 2, … (the implicit list of zeroed links).
        let z = AtomicIdPool::<16>::new();
        assert_eq!((z.alloc(), z.alloc(), z.alloc()), (Ok(0), Ok(1), Ok(2)));
        assert_eq!(z.in_use(), 3);
        // The shared-memory sizes (the simulator's layout version covers them).
        assert_eq!(
            core::mem::size_of::<AtomicIdPool<65535>>(),
            8 + 4 * 65535 + 4
        );
        assert_eq!(core::mem::size_of::<AtomicIdPool<1024>>(), 8 + 4 * 1024);
    }

    #[test]
    fn from_zeroed_ptr_shares_one_pool() {
        // Two views of one zero-filled region (as two processes mapping one file would have).
        let region: Box<[u64]> =
            std::vec![0u64; core::mem::size_of::<AtomicIdPool<8>>().div_ceil(8)].into();
        let ptr = Box::into_raw(region).cast::<u8>();
        // SAFETY: `ptr` is 8-aligned (from `[u64]`), zero-filled and large enough; it lives
        // until the `Box::from_raw` below, after both views are gone; only atomics touch it.
        let (a, b) = unsafe {
            (
                AtomicIdPool::<8>::from_zeroed_ptr(ptr),
                AtomicIdPool::<8>::from_zeroed_ptr(ptr),
            )
        };
        let id = a.alloc().unwrap();
        assert!(b.is_allocated(id));
        assert_eq!(b.free(id), Ok(()));
        assert_eq!(a.free(id), Err(Error::InvalidHandle));
        for _ in 0..8 {
            b.alloc().unwrap();
        }
        assert_eq!(a.alloc(), Err(Error::NoNotifyResource));
        let len = core::mem::size_of::<AtomicIdPool<8>>().div_ceil(8);
        // SAFETY: reconstructs exactly the boxed slice leaked above; `a` and `b` are unused
        // from here on.
        drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(ptr.cast::<u64>(), len)) });
    }

    #[test]
    fn corrupted_shared_memory_is_an_error_not_a_panic() {
        let p = AtomicIdPool::<4>::new();
        use core::sync::atomic::Ordering::Relaxed;
        // Another process scribbled a head pointing past the end.
        p.head.store(99, Relaxed);
        assert_eq!(p.alloc(), Err(Error::DrvInternalError));
        // A free links an id to that top; popping the id then finds the bad link.
        p.slot[1].store(1 << 16, Relaxed); // `ALLOCATED`
        assert_eq!(p.free(1), Ok(()));
        assert_eq!(p.alloc(), Err(Error::DrvInternalError));
        // A link pointing past the end (slot words hold `next ^ (id + 1)`).
        p.head.store(0, Relaxed);
        p.slot[0].store(77 ^ 1, Relaxed);
        assert_eq!(p.alloc(), Err(Error::DrvInternalError));
        // A garbage slot word is not "allocated", so it cannot be freed.
        p.slot[2].store(0xee_0000, Relaxed);
        assert_eq!(p.free(2), Err(Error::InvalidHandle));
        assert!(!p.is_allocated(2));
        // A corrupted in-use count wraps within its 16 bits: it never spills into the tag.
        p.slot[3].store(0, Relaxed);
        p.head.store(0xFFFF << 16 | 3, Relaxed);
        assert_eq!(p.alloc(), Ok(3));
        assert_eq!(p.head.load(Relaxed), 1 << 32 | 4);
        assert_eq!(p.in_use(), 0);
    }

    /// Several threads hammer alloc/free on one atomic pool. Each thread records which ids it
    /// holds in a shared "owner" table: an id handed out while someone else holds it is caught
    /// by the table's compare-and-swap.
    fn hammer<const N: usize>(threads: usize, rounds: usize) {
        use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
        let pool: Arc<AtomicIdPool<N>> = Arc::from(boxed_zeroed::<AtomicIdPool<N>>());
        let owner: Arc<Vec<AtomicUsize>> = Arc::new((0..N).map(|_| AtomicUsize::new(0)).collect());
        let full = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (1..=threads)
            .map(|t| {
                let (pool, owner, full) = (pool.clone(), owner.clone(), full.clone());
                std::thread::spawn(move || {
                    let mut held = Vec::new();
                    let mut x = t as u64;
                    for _ in 0..rounds {
                        x = x
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        if held.is_empty() || !(x >> 33).is_multiple_of(3) {
                            match pool.alloc() {
                                Ok(id) => {
                                    let prev = owner[id as usize].swap(t, SeqCst);
                                    assert_eq!(
                                        prev, 0,
                                        "id {id} given to {t} while held by {prev}"
                                    );
                                    held.push(id);
                                }
                                Err(e) => {
                                    assert_eq!(e, Error::NoNotifyResource);
                                    full.fetch_add(1, SeqCst);
                                }
                            }
                        }
                        if !held.is_empty() && (x >> 40).is_multiple_of(2) {
                            let id = held.swap_remove((x >> 20) as usize % held.len());
                            assert_eq!(owner[id as usize].swap(0, SeqCst), t);
                            assert_eq!(pool.free(id), Ok(()));
                        }
                    }
                    for id in held {
                        assert_eq!(owner[id as usize].swap(0, SeqCst), t);
                        pool.free(id).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("a hammer thread failed");
        }
        assert_eq!(pool.in_use(), 0);
        // Every id is free and the whole capacity can be taken again, each id once.
        let mut ids = HashSet::new();
        for _ in 0..N {
            assert!(ids.insert(pool.alloc().unwrap()));
        }
        assert_eq!(pool.alloc(), Err(Error::NoNotifyResource));
        std::eprintln!("hammer<{N}>: {} full answers", full.load(SeqCst));
    }

    #[test]
    fn atomic_pool_hammered_small() {
        // A small pool, so threads keep running into "full" and into each other's ids.
        hammer::<8>(8, 20_000);
    }

    #[test]
    fn atomic_pool_hammered_1024() {
        hammer::<1024>(4, 50_000);
    }

    #[test]
    fn double_free_race_has_one_winner() {
        for _ in 0..200 {
            let pool = Arc::new(AtomicIdPool::<4>::new());
            let id = pool.alloc().unwrap();
            let wins: usize = (0..4)
                .map(|_| {
                    let pool = pool.clone();
                    std::thread::spawn(move || pool.free(id).is_ok())
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|h| usize::from(h.join().unwrap()))
                .sum();
            assert_eq!(wins, 1);
            assert_eq!(pool.in_use(), 0);
        }
    }
}

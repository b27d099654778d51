//! Fixed-capacity notify id pools: ids `0..N` handed out and taken back in O(1), with a full
//! pool answered by `NoNotifyResource` (207009) and a bad free by `InvalidHandle` (107017).
//! Each keeps a per-id state, so a double free is caught, and none needs an initialisation
//! pass: all-zero bytes are an empty pool.
//!
//! - [`IdPool`]: plain, `&mut self`, for a single owner: a LIFO free list threaded through
//!   the ids, never-used ids handed out from a bump counter;
//! - [`SpinIdPool`]: an [`IdPool`] behind a `spin` mutex, `&self`, for firmware contexts that
//!   share one pool;
//! - [`AtomicIdPool`]: lock-free, `#[repr(C)]` and pointer-free, so it can live in shared or
//!   device memory and be used by several processes at once: a bitmap of allocated ids with
//!   two levels of "word full" hints, allocated next-fit, so that an alloc is one atomic
//!   bit-set and a free one atomic bit-clear. Its second const parameter is
//!   [`words`]`(N)`.
//!
//! Capacity is a const generic of at most [`MAX_CAPACITY`] (65535, the largest SoC maximum;
//! export keys carry the id in 16 bits). Per-SoC pool types are
//! [`SocType::NotifyPool`](crate::soc::SocType::NotifyPool) and its siblings.
//!
//! Memory: [`IdPool`] `3 × N` bytes plus a 6-byte header — 192 KiB for 65535 ids, 24 KiB
//! for 8192, 6 KiB for 2048, 3 KiB for 1024; [`AtomicIdPool`] `N / 8` bytes (rounded up to
//! 8) plus 144 — 8,336 bytes, 1,168, 400, 272.

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
pub use atomic::{AtomicIdPool, words};

#[cfg(target_has_atomic = "64")]
mod atomic {
    use super::MAX_CAPACITY;
    use crate::error::{Error, Result};
    use crate::sync::{AtomicU64, Ordering, dekker};

    // Layout: a cursor and three levels of bits, all "1 = allocated / full", so that all-zero
    // bytes are an empty pool.
    //
    // - `leaf[k]`, bit `b`: id `64k + b` is allocated. This is the only authoritative state.
    //   Bits past `N` in the last word are not ids: they are read as allocated (`leaf_pad`).
    // - `sum[m]`, bit `j`: leaf word `64m + j` is full — a *hint*.
    // - `top`, bit `m`: summary word `m` is full — a *hint*.
    // - `cursor`: the leaf word the last alloc used — a *hint* (any value is tolerated).
    //
    // An alloc is next-fit: it takes the lowest free id of the cursor's word with one
    // compare-exchange that sets its bit (`lock cmpxchg` on x86), and only when that word is full
    // does it hint the word full and move the cursor to the next word not hinted full,
    // found through `sum` and `top` with a few masked loads whatever `N` is. A free is one
    // atomic bit-clear (`lock btr`) that also says whether the bit was set (a double free
    // changes nothing), and one load of the word's hint, cleared if set. So an uncontended
    // pair is two locked operations; a hint update (one more, and a re-read) happens when an
    // alloc finds its word full or a free finds its word hinted full.
    //
    // Why next-fit and not lowest-free-first: lowest-first keeps the pool packed, so in
    // steady churn every free opens a hole in a full word and the next alloc fills it again
    // — two hint updates per pair. Next-fit moves on and comes back later, by which time the
    // words behind it have holes to spare. An alloc right after a free in the cursor's word
    // still gets that id back (it is the lowest free bit there), so create/destroy churn
    // reuses one id and its notify slot stays in cache.
    //
    // The hint protocol. A hint bit is only *set* by a thread that saw the word below full,
    // and it then re-reads that word (`dekker`, SeqCst) and takes the hint back if the word is
    // no longer full. Anything that makes a word not full (a free's bit-clear on a leaf,
    // `clear_leaf_hint`'s `fetch_and` on a summary word that it sees was full) then looks at
    // the hint above (SeqCst) and clears it. Of "set the hint, then read the word" and
    // "change the word, then read the hint", SeqCst lets at least one side see the other, so
    // once every thread has returned no hint says "full" over a word that is not. (Hints may
    // say "not full" over a full word: the next alloc that looks there hints it.) While
    // threads are between steps a hint can be briefly wrong, so "full" hints are never
    // trusted for the answer 207009: an alloc that finds every hint full reads the leaves
    // themselves before answering.

    /// Summary words: 16 × 64 leaf words × 64 ids = 65,536 ids, enough for [`MAX_CAPACITY`].
    const SUMS: usize = 16;
    /// A word with every bit set: full.
    const ALL: u64 = !0;

    /// The number of 64-bit leaf words an [`AtomicIdPool`] of `n` ids has: `⌈n / 64⌉`. It is
    /// the pool's second const parameter, `AtomicIdPool<N, { words(N) }>` (stable Rust
    /// cannot compute an array length from a generic parameter, so the caller spells it).
    pub const fn words(n: usize) -> usize {
        n.div_ceil(64)
    }

    /// A lock-free notify id pool of capacity `N` (`W` must be [`words`]`(N)`: a build
    /// error otherwise), for shared or device memory.
    ///
    /// - `#[repr(C)]`, no pointers, only atomics: the same bytes can be mapped at different
    ///   addresses in several processes, which may all call any method concurrently.
    /// - **All-zero bytes are a valid empty pool**, so a zero-filled shared-memory file or
    ///   `.bss` needs no initialisation: see [`from_zeroed_ptr`](Self::from_zeroed_ptr).
    ///   [`new`](Self::new) is `const` and produces exactly those zero bytes.
    /// - A bitmap of allocated ids (8 KiB for 65,535 ids, so it stays in L1), with two levels
    ///   of "this word is full" hints above it. Allocation is **next-fit**: the lowest free
    ///   id of the 64-id word the last alloc used, else of the next word (cyclically) that is
    ///   not full. A fresh pool hands out 0, 1, 2, …; an id freed in the current word is
    ///   handed out again next.
    /// - Uncontended, an `alloc` is one atomic bit-set and a `free` one atomic bit-clear; a
    ///   hint update (one more locked operation) happens only when a word fills up or a free
    ///   reopens a word hinted full. No step scans more than a constant number of words.
    /// - A `free` clears the id's bit with one atomic read-modify-write and reads the old
    ///   bit, so a double free (even by two processes racing) is caught: exactly one `free`
    ///   of an allocated id succeeds.
    /// - `alloc` answers 207009 only after reading every leaf word: the hints alone are
    ///   never trusted to say "full" (a racing free may be between its steps), so a full
    ///   answer costs `⌈N / 64⌉` loads — the only path whose cost grows with `N`, and not one
    ///   an alloc+free pair takes.
    ///
    /// Memory: a 16-byte header (cursor, top word), 128 bytes of summary words and
    /// `8 × ⌈N / 64⌉` of leaves — 8,336 bytes for 65535 ids, 1,168 for 8192, 400 for 2048,
    /// 272 for 1024.
    ///
    /// The memory may be written by other processes, so it is untrusted: any bit pattern is
    /// a pool (ids look allocated or free), bits that stand for no id are ignored, and no
    /// content can cause a panic, an out-of-range access or a wrong "full" answer.
    #[repr(C)]
    pub struct AtomicIdPool<const N: usize, const W: usize> {
        /// The leaf word the next alloc tries first (a hint).
        pub(super) cursor: AtomicU64,
        /// Bit `m`: summary word `m` is full (a hint).
        pub(super) top: AtomicU64,
        /// Bit `j` of word `m`: leaf word `64m + j` is full (a hint).
        pub(super) sum: [AtomicU64; SUMS],
        /// Bit `b` of word `k`: id `64k + b` is allocated.
        pub(super) leaf: [AtomicU64; W],
    }

    impl<const N: usize, const W: usize> AtomicIdPool<N, W> {
        /// Compile-time check of the parameters; referenced by every constructor and by
        /// `alloc`, so a wrong `W` is a build error.
        const OK: () = assert!(
            N <= MAX_CAPACITY && W == words(N),
            "AtomicIdPool<N, W>: N must be at most 65535 and W must be words(N)"
        );
        /// Summary words that stand for leaf words (at most `SUMS`).
        const USED_SUMS: usize = W.div_ceil(64);
        /// Bits of `top` that stand for no summary word: read as full.
        const TOP_PAD: u64 = ALL << Self::USED_SUMS;

        /// Bits of summary word `m` that stand for no leaf word: read as full.
        const fn sum_pad(m: usize) -> u64 {
            let have = W.saturating_sub(64 * m);
            if have >= 64 { 0 } else { ALL << have }
        }

        /// Bits of leaf word `k` that stand for no id: read as allocated.
        const fn leaf_pad(k: usize) -> u64 {
            let have = N.saturating_sub(64 * k);
            if have >= 64 { 0 } else { ALL << have }
        }

        /// An empty pool: all fields zero. `const`, so it can be a `static`.
        pub const fn new() -> Self {
            let () = Self::OK;
            AtomicIdPool {
                cursor: AtomicU64::new(0),
                top: AtomicU64::new(0),
                sum: [const { AtomicU64::new(0) }; SUMS],
                leaf: [const { AtomicU64::new(0) }; W],
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
        /// - those bytes are either all zero or were last written by an `AtomicIdPool` of
        ///   the same `N` (any other content is tolerated without undefined behaviour, but the
        ///   pool's answers are then meaningless);
        /// - during `'a` the bytes are accessed only through `AtomicIdPool` methods (or
        ///   other atomic accesses), never by plain reads or writes.
        pub unsafe fn from_zeroed_ptr<'a>(ptr: *mut u8) -> &'a Self {
            let () = Self::OK;
            // SAFETY: the caller guarantees alignment, size, lifetime and atomic-only access;
            // every bit pattern is a valid value of each field (integers in atomics).
            unsafe { &*ptr.cast::<Self>() }
        }

        /// The number of ids (`N`).
        pub const fn capacity(&self) -> u32 {
            N as u32
        }

        /// How many ids are allocated: the population count of the leaf words (`⌈N / 64⌉`
        /// loads, not one snapshot: under concurrency it may be stale).
        pub fn in_use(&self) -> u32 {
            self.leaf
                .iter()
                .enumerate()
                .map(|(k, w)| (w.load(Ordering::Relaxed) & !Self::leaf_pad(k)).count_ones())
                .sum()
        }

        /// One past the highest allocated id (0 if none is): a bound for a scan over the
        /// allocated ids that trusts no other record of them. Up to `W` loads, from the top
        /// down to the first word with an id in it: for occasional scans (garbage
        /// collection), not for hot paths.
        pub fn end(&self) -> u32 {
            for k in (0..W).rev() {
                let bits = self.leaf[k].load(Ordering::Acquire) & !Self::leaf_pad(k);
                if bits != 0 {
                    return (64 * k + 64 - bits.leading_zeros() as usize) as u32;
                }
            }
            0
        }

        /// Whether `id` is currently allocated (`false` out of range).
        pub fn is_allocated(&self, id: u32) -> bool {
            let i = id as usize;
            i < N
                && self
                    .leaf
                    .get(i / 64)
                    .is_some_and(|w| w.load(Ordering::Acquire) & (1 << (i % 64)) != 0)
        }

        /// Whether no hint says "full" over a word that is not full (and no hint bit stands
        /// for nothing). True whenever no call is in progress; for tests and inspection.
        #[doc(hidden)]
        pub fn hints_sound(&self) -> bool {
            let leaves = (0..W).all(|k| {
                let hint = self.sum[k / 64].load(Ordering::SeqCst) & (1 << (k % 64)) != 0;
                !hint || self.leaf_full(k)
            });
            let sums = (0..Self::USED_SUMS).all(|m| {
                let hint = self.top.load(Ordering::SeqCst) & (1 << m) != 0;
                !hint || self.sum_full(m)
            });
            let pads = self.top.load(Ordering::SeqCst) & Self::TOP_PAD == 0
                && (0..SUMS).all(|m| self.sum[m].load(Ordering::SeqCst) & Self::sum_pad(m) == 0);
            leaves && sums && pads
        }

        /// Whether leaf word `k` is full (SeqCst: the re-read of the hint protocol).
        fn leaf_full(&self, k: usize) -> bool {
            self.leaf
                .get(k)
                .is_none_or(|w| w.load(Ordering::SeqCst) | Self::leaf_pad(k) == ALL)
        }

        /// Whether summary word `m` says every leaf word under it is full.
        fn sum_full(&self, m: usize) -> bool {
            self.sum
                .get(m)
                .is_none_or(|w| w.load(Ordering::SeqCst) | Self::sum_pad(m) == ALL)
        }

        /// Takes an id: the lowest free one of the cursor's word, else of the next word that
        /// is not full.
        ///
        /// Codes: 207009 `NoNotifyResource` when all `N` ids are allocated.
        pub fn alloc(&self) -> Result<u32> {
            let () = Self::OK;
            // Any cursor value is tolerated (the memory is shared): out of range means 0.
            let mut k = usize::try_from(self.cursor.load(Ordering::Relaxed))
                .ok()
                .filter(|&k| k < W)
                .unwrap_or(0);
            loop {
                let Some(leaf) = self.leaf.get(k) else {
                    return self.alloc_by_scan(); // only when `W` is 0
                };
                if let Some(id) = Self::take_in(leaf, k) {
                    return Ok(id);
                }
                self.mark_leaf_full(k);
                match self.next_open_leaf(k) {
                    Some(next) => {
                        k = next;
                        self.cursor.store(k as u64, Ordering::Relaxed);
                    }
                    None => return self.alloc_by_scan(),
                }
            }
        }

        /// Takes the lowest free id of leaf word `k` (`leaf`); `None` if it is full.
        #[inline]
        fn take_in(leaf: &AtomicU64, k: usize) -> Option<u32> {
            let pad = Self::leaf_pad(k);
            // A compare-exchange rather than a bit-set (`fetch_or` of one bit): x86 has no
            // atomic "or that returns the old word", and its `lock bts` with a register bit
            // index is microcoded (about 3 ns more per alloc on this project's AMD machine).
            let mut v = leaf.load(Ordering::Relaxed);
            loop {
                let seen = v | pad;
                if seen == ALL {
                    return None;
                }
                let b = (!seen).trailing_zeros();
                // SeqCst (acquire): pairs with the `free` that gave the id back. On failure
                // the word changed under us: look again at what it is now.
                match leaf.compare_exchange_weak(
                    v,
                    v | (1u64 << b),
                    Ordering::SeqCst,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some((64 * k) as u32 + b),
                    Err(now) => v = now,
                }
            }
        }

        /// The next leaf word after `k`, cyclically, that is not hinted full (`k` itself
        /// last); `None` if every hint says full (or they keep changing under us).
        fn next_open_leaf(&self, k: usize) -> Option<usize> {
            let (m, j) = (k / 64, k % 64);
            // The rest of `k`'s summary word: bits up to `j` count as full.
            let upto = if j == 63 { ALL } else { (2u64 << j) - 1 };
            let s = self.sum.get(m)?.load(Ordering::Relaxed) | Self::sum_pad(m) | upto;
            if s != ALL {
                return Some(64 * m + (!s).trailing_zeros() as usize);
            }
            // The summary words after `m`, then from the first one round to `m` itself.
            for _ in 0..=Self::USED_SUMS {
                let t = self.top.load(Ordering::Relaxed) | Self::TOP_PAD;
                let after = t | ((2u64 << m) - 1); // m < SUMS = 16: no overflow
                let m2 = if after != ALL {
                    (!after).trailing_zeros() as usize
                } else if t != ALL {
                    (!t).trailing_zeros() as usize
                } else {
                    return None;
                };
                let s2 = self.sum.get(m2)?.load(Ordering::Relaxed) | Self::sum_pad(m2);
                if s2 != ALL {
                    return Some(64 * m2 + (!s2).trailing_zeros() as usize);
                }
                // The top hint was behind: fix it and look again.
                self.mark_sum_full(m2);
            }
            None
        }

        /// The hints said "full": read every leaf word. Any free id found is taken (and its
        /// word's stale hint cleared); otherwise the pool really was full at each word's
        /// reading, and any `free` that returned before this call is among those readings.
        #[cold]
        fn alloc_by_scan(&self) -> Result<u32> {
            for (k, leaf) in self.leaf.iter().enumerate() {
                if !self.leaf_full(k) {
                    self.clear_leaf_hint(k);
                    if let Some(id) = Self::take_in(leaf, k) {
                        self.cursor.store(k as u64, Ordering::Relaxed);
                        return Ok(id);
                    }
                }
            }
            debug!("atomic id pool of {} is full", N);
            Err(Error::NoNotifyResource)
        }

        /// Leaf word `k` was seen full: set its hint, then re-read the word and take the hint
        /// back if a free got in between.
        #[cold]
        fn mark_leaf_full(&self, k: usize) {
            let (m, bit) = (k / 64, 1u64 << (k % 64));
            let Some(sum) = self.sum.get(m) else { return };
            let prev = sum.fetch_or(bit, Ordering::SeqCst);
            dekker();
            if !self.leaf_full(k) {
                self.clear_leaf_hint(k);
            } else if prev | bit | Self::sum_pad(m) == ALL {
                self.mark_sum_full(m);
            }
        }

        /// Summary word `m` was seen full: the same one level up.
        #[cold]
        fn mark_sum_full(&self, m: usize) {
            let bit = 1u64 << (m % 64);
            self.top.fetch_or(bit, Ordering::SeqCst);
            dekker();
            if !self.sum_full(m) {
                self.clear_sum_hint(m);
            }
        }

        /// Leaf word `k` may no longer be full: clear its hint if set, and, if that made a
        /// full summary word not full, the top hint too.
        #[inline]
        fn clear_leaf_hint(&self, k: usize) {
            let (m, bit) = (k / 64, 1u64 << (k % 64));
            let Some(sum) = self.sum.get(m) else { return };
            if sum.load(Ordering::SeqCst) & bit != 0 {
                self.clear_leaf_hint_slow(sum, m, bit);
            }
        }

        /// [`clear_leaf_hint`](Self::clear_leaf_hint) once the hint was seen set: `sum` is
        /// summary word `m`, `bit` the leaf's bit in it.
        #[cold]
        fn clear_leaf_hint_slow(&self, sum: &AtomicU64, m: usize, bit: u64) {
            let prev = sum.fetch_and(!bit, Ordering::SeqCst);
            if prev | Self::sum_pad(m) == ALL {
                dekker();
                self.clear_sum_hint(m);
            }
        }

        /// Summary word `m` may no longer be full: clear its top hint if set.
        fn clear_sum_hint(&self, m: usize) {
            let bit = 1u64 << (m % 64);
            if self.top.load(Ordering::SeqCst) & bit != 0 {
                self.top.fetch_and(!bit, Ordering::SeqCst);
            }
        }

        /// Gives `id` back.
        ///
        /// One atomic bit-clear clears the id's bit and says whether it was set: if it was
        /// already clear the call changed nothing and answers 107017 (of several racing
        /// frees of one id exactly one sees it set). Then, if the word was hinted full, the
        /// hint is cleared. (A late "double" free that comes after the id was handed out
        /// again frees the new allocation: ids carry no generation, as with any id-based
        /// API.)
        ///
        /// Codes: 107017 `InvalidHandle` if `id` is out of range or not allocated.
        pub fn free(&self, id: u32) -> Result<()> {
            let i = id as usize;
            let (k, bit) = (i / 64, 1u64 << (i % 64));
            let leaf = match self.leaf.get(k) {
                Some(leaf) if i < N => leaf,
                _ => return Err(Error::InvalidHandle),
            };
            // SeqCst (release): the id's last use happens before the next alloc's bit-set;
            // and the protocol's "change the word, then read the hint".
            if leaf.fetch_and(!bit, Ordering::SeqCst) & bit == 0 {
                debug!("atomic id pool: free of unallocated id {}", id);
                return Err(Error::InvalidHandle);
            }
            dekker();
            self.clear_leaf_hint(k);
            Ok(())
        }
    }

    impl<const N: usize, const W: usize> Default for AtomicIdPool<N, W> {
        fn default() -> Self {
            Self::new()
        }
    }

    impl<const N: usize, const W: usize> core::fmt::Debug for AtomicIdPool<N, W> {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("AtomicIdPool")
                .field("capacity", &N)
                .field("in_use", &self.in_use())
                .finish()
        }
    }

    #[cfg(feature = "defmt")]
    impl<const N: usize, const W: usize> defmt::Format for AtomicIdPool<N, W> {
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
mod tests;

//! Tests of the id pools: the plain, spin-locked and lock-free pools, their capacity, hints
//! and behaviour under concurrency.

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
    ($ty:ty, [$($g:tt)*]) => {
        impl<$($g)*> Pool for $ty {
            fn alloc(&mut self) -> Result<u32> {
                <$ty>::alloc(self)
            }
            fn free(&mut self, id: u32) -> Result<()> {
                <$ty>::free(self, id)
            }
            fn is_allocated(&self, id: u32) -> bool {
                <$ty>::is_allocated(self, id)
            }
            fn in_use(&self) -> u32 {
                <$ty>::in_use(self)
            }
            fn capacity(&self) -> u32 {
                <$ty>::capacity(self)
            }
        }
    };
}
impl_pool!(IdPool<N>, [const N: usize]);
impl_pool!(SpinIdPool<N>, [const N: usize]);
impl_pool!(AtomicIdPool<N, W>, [const N: usize, const W: usize]);

/// `AtomicIdPool` of `n` ids (its second parameter spelled out).
macro_rules! atomic {
    ($n:expr) => {
        AtomicIdPool<{ $n }, { words($n) }>
    };
}

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

#[test]
fn end_is_one_past_the_highest_allocated_id() {
    let p = boxed_zeroed::<AtomicIdPool<8192, { words(8192) }>>();
    assert_eq!(p.end(), 0);
    let ids: std::vec::Vec<u32> = (0..200).map(|_| p.alloc().unwrap()).collect();
    let top = *ids.iter().max().unwrap();
    assert_eq!(p.end(), top + 1);
    p.free(top).unwrap();
    let next = ids.iter().copied().filter(|&i| i != top).max().unwrap();
    assert_eq!(p.end(), next + 1);
    // The last id of an odd-sized pool, and the pad bits past it, which read as allocated
    // elsewhere but are not ids.
    let q = boxed_zeroed::<AtomicIdPool<1000, { words(1000) }>>();
    assert_eq!(q.end(), 0);
    let all: std::vec::Vec<u32> = (0..1000).map(|_| q.alloc().unwrap()).collect();
    assert_eq!(q.end(), 1000);
    for id in all.into_iter().filter(|&i| i != 5) {
        q.free(id).unwrap();
    }
    assert_eq!(q.end(), 6);
}

fn all_flavours<const N: usize, const W: usize>() {
    exercise(&mut *boxed_zeroed::<IdPool<N>>(), N as u32);
    exercise(&mut *Box::new(SpinIdPool::<N>::new()), N as u32);
    let mut a = boxed_zeroed::<AtomicIdPool<N, W>>();
    exercise(&mut *a, N as u32);
    assert!(a.hints_sound());
}

#[test]
fn ascend950_pool_65535() {
    all_flavours::<65535, { words(65535) }>();
}

#[test]
fn ascend910b_and_910_93_pool_8192() {
    all_flavours::<8192, { words(8192) }>();
}

#[test]
fn ascend310b_pool_2048() {
    all_flavours::<2048, { words(2048) }>();
}

#[test]
fn ascend310p_and_910_pool_1024() {
    all_flavours::<1024, { words(1024) }>();
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
    fn sized<const M: usize, const W: usize>() -> [TypeId; 3] {
        [
            TypeId::of::<IdPool<M>>(),
            TypeId::of::<SpinIdPool<M>>(),
            TypeId::of::<AtomicIdPool<M, W>>(),
        ]
    }
    assert_eq!(pools::<Ascend950PR>(), sized::<65535, { words(65535) }>());
    assert_eq!(pools::<Ascend950DT>(), sized::<65535, { words(65535) }>());
    assert_eq!(pools::<Ascend910_93>(), sized::<8192, { words(8192) }>());
    assert_eq!(pools::<Ascend910B>(), sized::<8192, { words(8192) }>());
    assert_eq!(pools::<Ascend310B>(), sized::<2048, { words(2048) }>());
    assert_eq!(pools::<Ascend310P>(), sized::<1024, { words(1024) }>());
    assert_eq!(pools::<Ascend910>(), sized::<1024, { words(1024) }>());
    assert_eq!(pools::<IPV350>(), sized::<0, { words(0) }>());
    for soc in Soc::ALL {
        assert!(soc.max_notifies() as usize <= MAX_CAPACITY);
    }
}

#[test]
fn empty_pool_is_always_full() {
    let mut p = IdPool::<0>::new();
    assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
    assert_eq!(p.free(0), Err(Error::InvalidHandle));
    let a = <atomic!(0)>::new();
    assert_eq!(a.alloc(), Err(Error::NoNotifyResource));
}

#[test]
fn zeroed_is_empty() {
    // SAFETY: the bytes are all zero, which this module documents as a valid empty pool.
    let a: atomic!(16) = unsafe { core::mem::zeroed() };
    assert_eq!((a.in_use(), a.is_allocated(0)), (0, false));
    // `new()` is exactly zero bytes.
    let n = <atomic!(16)>::new();
    // SAFETY: reading the plain bytes of an initialised, padding-free `#[repr(C)]` value
    // (16 + 8·16 + 8·1 = 152 bytes, a multiple of its alignment 8).
    let bytes: [u8; 152] = unsafe { core::mem::transmute(n) };
    assert_eq!(bytes, [0; 152]);
    // A zeroed pool hands out 0, 1, 2, ….
    let z = <atomic!(16)>::new();
    assert_eq!((z.alloc(), z.alloc(), z.alloc()), (Ok(0), Ok(1), Ok(2)));
    assert_eq!(z.in_use(), 3);
    // The shared-memory sizes (the simulator's layout version covers them).
    assert_eq!(core::mem::size_of::<atomic!(65535)>(), 16 + 128 + 8 * 1024);
    assert_eq!(core::mem::size_of::<atomic!(8192)>(), 16 + 128 + 8 * 128);
    assert_eq!(core::mem::size_of::<atomic!(2048)>(), 16 + 128 + 8 * 32);
    assert_eq!(core::mem::size_of::<atomic!(1024)>(), 16 + 128 + 8 * 16);
}

#[test]
fn atomic_pool_is_next_fit() {
    // 8,192 ids: two summary words, and small enough for Miri.
    let p = boxed_zeroed::<atomic!(8192)>();
    // Ids 0..100: the cursor is in the second word (64..128).
    for want in 0..100 {
        assert_eq!(p.alloc(), Ok(want));
    }
    // An id freed in the cursor's word comes back first; one freed behind it waits
    // until the allocations come round again.
    p.free(70).unwrap();
    p.free(5).unwrap();
    assert_eq!(p.alloc(), Ok(70));
    assert_eq!(p.alloc(), Ok(100));
    for want in 101..8192 {
        assert_eq!(p.alloc(), Ok(want));
    }
    assert_eq!(p.alloc(), Ok(5), "wrapped round to the free id");
    assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
    assert!(p.hints_sound());
    // Free ids in several leaf and summary words, out of order: all come back, once.
    let freed = [8191, 4097, 64, 63, 0, 5000, 4095];
    for id in freed {
        p.free(id).unwrap();
        assert!(p.hints_sound(), "after freeing {id}");
    }
    let mut back: Vec<u32> = freed.iter().map(|_| p.alloc().unwrap()).collect();
    assert!(p.hints_sound());
    back.sort_unstable();
    let mut want = freed;
    want.sort_unstable();
    assert_eq!(back, want);
    assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
    assert_eq!(p.in_use(), 8192);
}

#[test]
fn from_zeroed_ptr_shares_one_pool() {
    // Two views of one zero-filled region (as two processes mapping one file would have).
    let len = core::mem::size_of::<atomic!(8)>().div_ceil(8);
    let region: Box<[u64]> = std::vec![0u64; len].into();
    let ptr = Box::into_raw(region).cast::<u8>();
    // SAFETY: `ptr` is 8-aligned (from `[u64]`), zero-filled and large enough; it lives
    // until the `Box::from_raw` below, after both views are gone; only atomics touch it.
    let (a, b) = unsafe {
        (
            <atomic!(8)>::from_zeroed_ptr(ptr),
            <atomic!(8)>::from_zeroed_ptr(ptr),
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
    // SAFETY: reconstructs exactly the boxed slice leaked above; `a` and `b` are unused
    // from here on.
    drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(ptr.cast::<u64>(), len)) });
}

#[test]
fn corrupted_shared_memory_is_never_a_panic_nor_a_wrong_full() {
    use core::sync::atomic::Ordering::Relaxed;
    let p = <atomic!(100)>::new();
    // Another process set every hint bit, pads included, and the cursor past the end: the
    // hints say "full", but the leaves do not, so the alloc reads them and still finds
    // id 0, and repairs the hint.
    p.cursor.store(u64::MAX, Relaxed);
    p.top.store(!0, Relaxed);
    for s in &p.sum {
        s.store(!0, Relaxed);
    }
    assert_eq!(p.alloc(), Ok(0));
    assert_eq!(p.alloc(), Ok(1));
    // Bits that stand for no id (100..128 of the second leaf word) are never handed
    // out, never freed and never counted.
    p.leaf[1].store(!0 << 36, Relaxed);
    assert_eq!(p.in_use(), 2);
    assert_eq!(p.free(100), Err(Error::InvalidHandle));
    assert_eq!(p.free(127), Err(Error::InvalidHandle));
    assert!(!p.is_allocated(100));
    // Garbage hints that say "not full" over full words only cost retries.
    p.top.store(0, Relaxed);
    for s in &p.sum {
        s.store(0, Relaxed);
    }
    p.leaf[0].store(!0, Relaxed);
    assert_eq!(p.alloc(), Ok(64));
    // A garbage leaf word is just a set of allocated ids.
    p.leaf[1].store(0, Relaxed);
    assert_eq!(p.in_use(), 64);
    for _ in 0..36 {
        p.alloc().unwrap();
    }
    assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
    assert!(p.hints_sound());
    assert_eq!(p.free(99), Ok(()));
    assert!(p.hints_sound());
    assert_eq!(p.alloc(), Ok(99));
    // The cursor's word is full and every hint says "full", yet id 40 is free: the alloc
    // does not trust the hints and reads the leaves.
    p.free(40).unwrap();
    p.cursor.store(1, Relaxed);
    p.top.store(!0, Relaxed);
    p.sum[0].store(!0, Relaxed);
    assert_eq!(p.alloc(), Ok(40));
    assert_eq!(p.alloc(), Err(Error::NoNotifyResource));
}

/// Several threads hammer alloc/free on one atomic pool. Each thread records which ids it
/// holds in a shared "owner" table: an id handed out while someone else holds it is caught
/// by the table's compare-and-swap.
fn hammer<const N: usize, const W: usize>(threads: usize, rounds: usize) {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let pool: Arc<AtomicIdPool<N, W>> = Arc::from(boxed_zeroed::<AtomicIdPool<N, W>>());
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
                                assert_eq!(prev, 0, "id {id} given to {t} while held by {prev}");
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
    assert!(pool.hints_sound(), "a hint was left wrong");
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
    hammer::<8, 1>(8, 20_000);
}

#[test]
fn atomic_pool_hammered_1024() {
    hammer::<1024, 16>(4, 50_000);
}

#[test]
fn atomic_pool_hammered_across_leaf_words() {
    // Threads mostly allocate, so the pool runs full and leaf words keep filling and
    // emptying: the hint protocol races with itself.
    hammer::<130, 3>(4, 50_000);
}

#[test]
fn atomic_pool_hammered_across_summary_words() {
    // 4,097 ids: the last id has a summary word of its own, so the top hints race too.
    hammer::<4097, 65>(4, 40_000);
}

#[test]
fn double_free_race_has_one_winner() {
    for _ in 0..200 {
        let pool = Arc::new(<atomic!(4)>::new());
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

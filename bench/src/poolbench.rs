//! Id pool costs: allocate+free pairs on the core's pools (`IdPool`, `SpinIdPool`,
//! `AtomicIdPool`) at 65,535 ids, in four patterns — empty, full-churn (one id free), random
//! churn at half occupancy, and fill+drain in random order (every id of the pool touched,
//! the free list shuffled: the cache-unfriendliest pattern) — plus the same worst patterns at
//! 1,024 ids, to show the cost does not grow with the pool — and, as the yardstick, the
//! hardware floor of a lock-free pool: two uncontended compare-and-swaps on one cache line.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};

use acl_notify_core::pool::{AtomicIdPool, IdPool, SpinIdPool, words};

use crate::harness::{Better, Group, Iters, Kind, Variant};
use crate::sys::now_ns;

/// Anything with the pools' alloc/free.
trait Pool {
    fn alloc(&mut self) -> Result<u32, String>;
    fn free(&mut self, id: u32) -> Result<(), String>;
}

impl<const N: usize> Pool for IdPool<N> {
    #[inline]
    fn alloc(&mut self) -> Result<u32, String> {
        IdPool::alloc(self).map_err(|e| e.to_string())
    }
    #[inline]
    fn free(&mut self, id: u32) -> Result<(), String> {
        IdPool::free(self, id).map_err(|e| e.to_string())
    }
}

impl<const N: usize> Pool for SpinIdPool<N> {
    #[inline]
    fn alloc(&mut self) -> Result<u32, String> {
        SpinIdPool::alloc(self).map_err(|e| e.to_string())
    }
    #[inline]
    fn free(&mut self, id: u32) -> Result<(), String> {
        SpinIdPool::free(self, id).map_err(|e| e.to_string())
    }
}

impl<const N: usize, const W: usize> Pool for AtomicIdPool<N, W> {
    #[inline]
    fn alloc(&mut self) -> Result<u32, String> {
        AtomicIdPool::alloc(self).map_err(|e| e.to_string())
    }
    #[inline]
    fn free(&mut self, id: u32) -> Result<(), String> {
        AtomicIdPool::free(self, id).map_err(|e| e.to_string())
    }
}

/// Reference point: a `Vec<u32>` stack of free ids with no double-free check.
struct VecPool(Vec<u32>);

impl VecPool {
    fn new(n: u32) -> VecPool {
        VecPool((0..n).rev().collect())
    }
}

impl Pool for VecPool {
    #[inline]
    fn alloc(&mut self) -> Result<u32, String> {
        self.0.pop().ok_or_else(|| "vec pool empty".to_string())
    }
    #[inline]
    fn free(&mut self, id: u32) -> Result<(), String> {
        self.0.push(id);
        Ok(())
    }
}

/// A tiny xorshift generator (no dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    /// Uniform-enough in `0..n` without a division (multiply-shift).
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
}

/// The access patterns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    /// Nothing allocated: alloc then free the same id.
    Empty,
    /// All ids but one allocated: alloc the last free id, free it.
    FullChurn,
    /// Half allocated: free a random allocated id, allocate one.
    RandomChurn,
    /// Allocate every id, free them all in a random order; repeat.
    FillDrain,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::Empty => "empty",
            Pattern::FullChurn => "full-churn",
            Pattern::RandomChurn => "random-churn",
            Pattern::FillDrain => "fill+drain",
        }
    }
}

/// A pool prepared for a pattern, and the state the pattern needs between samples. The
/// bookkeeping is kept small (16-bit ids, no permutation table) so that the benchmark's own
/// memory traffic does not dominate at 65,535 ids.
struct Prepared<P> {
    pool: Box<P>,
    n: usize,
    held: Vec<u16>,
    rng: Rng,
}

/// Odd multiplier of the scattered free order: `i * STRIDE mod 2^k` visits every value of
/// `0..2^k` once, in an order that jumps around the id arrays.
const STRIDE: usize = 40_503;

impl<P: Pool> Prepared<P> {
    fn new(mut pool: Box<P>, n: usize, pattern: Pattern) -> Result<Prepared<P>, String> {
        let mut held = Vec::new();
        let keep = match pattern {
            Pattern::Empty | Pattern::FillDrain => 0,
            Pattern::FullChurn => n - 1,
            Pattern::RandomChurn => n / 2,
        };
        for _ in 0..keep {
            let id = pool.alloc()?;
            held.push(u16::try_from(id).map_err(|_| format!("id {id} beyond 16 bits"))?);
        }
        Ok(Prepared {
            pool,
            n,
            held,
            rng: Rng(0x9E37_79B9_7F4A_7C15),
        })
    }

    /// Runs `iters` pairs (fill+drain: rounded up to whole fills); ns per pair.
    fn run(&mut self, pattern: Pattern, iters: u64) -> Result<f64, String> {
        let p = &mut *self.pool;
        let t0 = now_ns();
        let pairs = match pattern {
            Pattern::Empty | Pattern::FullChurn => {
                for _ in 0..iters {
                    let id = p.alloc()?;
                    p.free(black_box(id))?;
                }
                iters
            }
            Pattern::RandomChurn => {
                let len = self.held.len();
                for _ in 0..iters {
                    let j = self.rng.below(len);
                    p.free(u32::from(self.held[j]))?;
                    self.held[j] = black_box(p.alloc()?) as u16;
                }
                iters
            }
            Pattern::FillDrain => {
                // Fill: every id is allocated, so the drain can free ids directly, in a
                // scattered order (each next fill then pops them in that order).
                let rounds = iters.div_ceil(self.n as u64).max(1);
                let mask = self.n.next_power_of_two() - 1;
                for _ in 0..rounds {
                    for _ in 0..self.n {
                        black_box(p.alloc()?);
                    }
                    for i in 0..=mask {
                        let id = i.wrapping_mul(STRIDE) & mask;
                        if id < self.n {
                            p.free(black_box(id as u32))?;
                        }
                    }
                }
                rounds * self.n as u64
            }
        };
        Ok((now_ns() - t0) as f64 / pairs as f64)
    }
}

fn variant<P: Pool + 'static>(
    label: &str,
    kind: Kind,
    make: impl Fn() -> Box<P>,
    n: usize,
    pattern: Pattern,
) -> Variant {
    let name = format!("{label} {}", pattern.name());
    match Prepared::new(make(), n, pattern) {
        Ok(mut prep) => Variant::new(
            name,
            kind,
            Iters::Scaled {
                probe: 100_000,
                min: 100_000,
                max: 50_000_000,
            },
            move |iters| prep.run(pattern, iters),
        ),
        Err(e) => Variant::skipped(name, kind, format!("setup failed: {e}")),
    }
}

/// Name of the floor row (a baseline: not judged, the cases' ratios to it are printed).
pub const FLOOR: &str = "floor: two uncontended CAS on one cache line";

/// The hardware floor of a lock-free alloc+free pair: one `compare_exchange` standing for the
/// alloc and one for the free, on one `AtomicU64` (a pool's head word), nobody else touching
/// it. Each CAS uses the value the previous one left, as a pool's CAS loop does.
fn floor() -> Variant {
    let word = Box::new(AtomicU64::new(0));
    Variant::new(
        FLOOR,
        Kind::Baseline,
        Iters::Scaled {
            probe: 100_000,
            min: 100_000,
            max: 50_000_000,
        },
        move |iters| {
            let w = black_box(&*word);
            let mut cur = w.load(Ordering::Relaxed);
            let t0 = now_ns();
            for _ in 0..iters {
                for _ in 0..2 {
                    cur = match w.compare_exchange(
                        cur,
                        cur.wrapping_add(1),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => cur.wrapping_add(1),
                        Err(now) => return Err(format!("uncontended CAS failed ({now})")),
                    };
                }
            }
            black_box(cur);
            Ok((now_ns() - t0) as f64 / iters as f64)
        },
    )
}

/// Names of the rows the targets read.
pub const WORST_PATTERNS: [&str; 2] = ["random-churn", "fill+drain"];

/// The id pool group.
pub fn group() -> Group {
    const N: usize = 65535;
    const SMALL: usize = 1024;
    let mut v = vec![floor()];
    for pat in [
        Pattern::Empty,
        Pattern::FullChurn,
        Pattern::RandomChurn,
        Pattern::FillDrain,
    ] {
        v.push(variant(
            "AtomicIdPool<65535>",
            Kind::Case,
            || Box::new(AtomicIdPool::<N, { words(N) }>::new()),
            N,
            pat,
        ));
        v.push(variant(
            "IdPool<65535>",
            Kind::Case,
            || Box::new(IdPool::<N>::new()),
            N,
            pat,
        ));
    }
    for pat in [Pattern::Empty, Pattern::FillDrain] {
        v.push(variant(
            "SpinIdPool<65535>",
            Kind::Info,
            || Box::new(SpinIdPool::<N>::new()),
            N,
            pat,
        ));
    }
    for pat in [Pattern::RandomChurn, Pattern::FillDrain] {
        v.push(variant(
            "AtomicIdPool<1024>",
            Kind::Info,
            || Box::new(AtomicIdPool::<SMALL, { words(SMALL) }>::new()),
            SMALL,
            pat,
        ));
        v.push(variant(
            "IdPool<1024>",
            Kind::Info,
            || Box::new(IdPool::<SMALL>::new()),
            SMALL,
            pat,
        ));
    }
    for pat in [Pattern::Empty, Pattern::FillDrain] {
        v.push(variant(
            "Vec<u32> stack (no checks)",
            Kind::Info,
            || Box::new(VecPool::new(N as u32)),
            N,
            pat,
        ));
    }
    Group {
        id: "pool",
        title: "Id pool: allocate+free pairs, single thread".into(),
        unit: "ns/pair",
        better: Better::Lower,
        variants: v,
        note: "random-churn includes one xorshift step and a 16-bit table lookup per pair; \
               fill+drain frees in a scattered (odd-stride) order; the <1024> rows show \
               whether the cost grows with the pool; the floor row (a baseline, not judged) is \
               two back-to-back uncontended compare_exchange on one AtomicU64, and [cN]÷this \
               is how many times that floor each pool pair costs"
            .into(),
        min_reps: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_run_and_keep_the_pool_consistent() {
        for pat in [
            Pattern::Empty,
            Pattern::FullChurn,
            Pattern::RandomChurn,
            Pattern::FillDrain,
        ] {
            let mut p = Prepared::new(Box::new(IdPool::<64>::new()), 64, pat).unwrap();
            assert!(p.run(pat, 1000).unwrap() > 0.0);
            assert!(p.run(pat, 1000).unwrap() > 0.0);
        }
    }

    /// The floor row is a yardstick, so the 10 ns target (worst `Kind::Case` row) ignores it.
    #[test]
    fn floor_row_is_a_baseline() {
        let g = group();
        let floor: Vec<_> = g.variants.iter().filter(|v| v.name == FLOOR).collect();
        assert_eq!(floor.len(), 1);
        assert_eq!(floor[0].kind, Kind::Baseline);
    }
}

//! What a `Sim` keeps of its stream-ordered memory pools (`pool` has the calls): per pool its
//! settings, figures, blocks in use and blocks freed to it, each block's allocation held as
//! `B` (the memory state's allocation entry), which this table never touches but through the
//! release function it is given.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use acl_notify_core::RawStream;

use crate::locks::lock;

/// A pool of this `Sim` (what the C library's `aclrtMemPool` handle names). Never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolId(pub u64);

/// A block handed out: its allocation (its `size` the asked one) and its span.
#[derive(Debug)]
pub(super) struct Block<B> {
    pub(super) alloc: B,
    /// The size asked for (the block's checked size).
    pub(super) size: u64,
    pub(super) span: u64,
}

/// Whether a kept block's free has run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kept {
    /// Its free is queued on this stream and has not run.
    Queued(RawStream),
    /// Its free has run: reusable by any stream, releasable.
    Ready,
}

/// A block freed to the pool, at device address `addr`; `ticket` tells its free's task which
/// freeing it is (the block may have been reused, and freed again, before the task ran).
#[derive(Debug)]
pub(super) struct KeptBlock<B> {
    pub(super) addr: usize,
    pub(super) block: Block<B>,
    pub(super) ticket: u64,
    pub(super) state: Kept,
}

/// One pool.
#[derive(Debug)]
pub(super) struct Pool<B> {
    pub(super) device: u32,
    /// The pool's size, a multiple of [`POOL_BLOCK_ALIGN`].
    pub(super) max_size: u64,
    pub(super) threshold: u64,
    /// The three reuse flags, as set (0 or 1; CANN's defaults are 0).
    pub(super) reuse: [u32; 3],
    pub(super) busy: BTreeMap<usize, Block<B>>,
    pub(super) kept: Vec<KeptBlock<B>>,
    pub(super) reserved: u64,
    pub(super) reserved_high: u64,
    pub(super) used: u64,
    pub(super) used_high: u64,
    pub(super) next_ticket: u64,
}

impl<B> Pool<B> {
    /// Gives kept blocks whose free has run back to the device, largest first, while the
    /// reserved memory is above `keep`.
    pub(super) fn release_down_to(&mut self, keep: u64, release: &dyn Fn(&B)) {
        while self.reserved > keep {
            let Some(i) = self
                .kept
                .iter()
                .enumerate()
                .filter(|(_, k)| k.state == Kept::Ready)
                .max_by_key(|(_, k)| k.block.span)
                .map(|(i, _)| i)
            else {
                return;
            };
            let k = self.kept.swap_remove(i);
            self.reserved -= k.block.span;
            release(&k.block.alloc);
        }
    }

    /// Everything kept given back (the pool is destroyed, or the session ends).
    pub(super) fn release_all(&mut self, release: &dyn Fn(&B)) {
        for k in self.kept.drain(..) {
            release(&k.block.alloc);
        }
        self.reserved = self.busy.values().map(|b| b.span).sum();
    }
}

/// The pools of one `Sim`.
#[derive(Debug)]
pub(crate) struct Pools<B> {
    pub(super) table: Mutex<PoolTable<B>>,
}

#[derive(Debug)]
pub(super) struct PoolTable<B> {
    pub(super) next: u64,
    pub(super) pools: HashMap<PoolId, Arc<Mutex<Pool<B>>>>,
}

impl<B> Default for Pools<B> {
    fn default() -> Self {
        Pools {
            table: Mutex::new(PoolTable {
                next: 0,
                pools: HashMap::new(),
            }),
        }
    }
}

impl<B> Pools<B> {
    pub(super) fn get(&self, p: PoolId) -> Option<Arc<Mutex<Pool<B>>>> {
        lock(&self.table).pools.get(&p).cloned()
    }

    /// The pool whose busy block starts at `addr`, or (`Err`) whose busy block contains it
    /// (the block's start and asked size), else `Ok(None)`.
    #[allow(clippy::type_complexity)]
    pub(super) fn owner_of(
        &self,
        addr: usize,
    ) -> Result<Option<Arc<Mutex<Pool<B>>>>, (usize, u64)> {
        let pools: Vec<_> = lock(&self.table).pools.values().cloned().collect();
        for p in pools {
            let g = lock(&p);
            if g.busy.contains_key(&addr) {
                drop(g);
                return Ok(Some(p));
            }
            if let Some((base, b)) = g.busy.range(..addr).next_back()
                && addr - base < b.size as usize
            {
                return Err((*base, b.size));
            }
        }
        Ok(None)
    }

    /// Whether `addr` is inside a block some pool handed out.
    pub(super) fn block_at(&self, addr: usize) -> Option<(usize, u64)> {
        match self.owner_of(addr) {
            Ok(Some(p)) => lock(&p).busy.get(&addr).map(|b| (addr, b.size)),
            Ok(None) => None,
            Err(b) => Some(b),
        }
    }

    /// Gives every pool's kept blocks back and forgets the pools (the session ends; busy
    /// blocks are in the process's allocations, which the caller frees).
    pub(super) fn clear(&self, release: &dyn Fn(&B)) {
        let pools = std::mem::take(&mut lock(&self.table).pools);
        for p in pools.into_values() {
            let mut g = lock(&p);
            g.release_all(release);
            g.busy.clear();
        }
    }
}

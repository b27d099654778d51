//! Stream-ordered memory pools (`aclrtMemPool*`, CANN's "SOMA"): blocks handed out in stream
//! order from a pool of device memory that keeps what was freed for reuse.
//!
//! # How the simulator keeps a pool
//!
//! A block is one allocation of the device-memory file (`mem::file`), placed by the same
//! code as `aclrtMalloc`'s, so copies, sets and every checked-range rule apply to it unchanged.
//! Its span is the asked size rounded up to 2 MiB (`DEVICE_POOL_MIN_BLOCK_SIZE`, hicann/runtime
//! `src/runtime/feature/soma/stream_mem_pool.hpp`), which is what the pool's reserved and used
//! figures count; the bytes a copy may touch are the ones asked for.
//!
//! - `aclrtMemPoolMallocAsync` takes a kept block (the smallest whose span fits) or places a
//!   new one, at the call, and queues a task on the stream as CANN does (its AICPU
//!   `SomaMemMng` kernel, `src/runtime/api/impl/api_impl_soma.cc`): the block is usable by the
//!   stream's later tasks; a stream the task cannot be queued on gives the block back.
//! - `aclrtMemPoolFreeAsync` takes the block out of this process's allocations at the call
//!   (CANN's `SegmentFree` runs at the call too, `stream_mem_pool.cc`), so a copy or set
//!   issued after it is refused as naming freed memory, and queues a task; the block becomes
//!   reusable by any stream once that task has run (every task before it on its stream has
//!   then finished). Before that, only a block freed on the same stream is reused (stream
//!   order keeps the free before the new block's use: CANN's single-stream reuse, on by
//!   default, `PoolDependencyFea` in `stream_mem_pool.hpp`). The three reuse attributes are
//!   kept and reported; reuse across streams never needs them here, since nothing is reused
//!   across streams before its free ran.
//! - When the free's task runs, kept blocks above the release threshold
//!   (`ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD`, default 0) go back to the device. CANN
//!   documents this release "at the next stream synchronisation"
//!   (`docs/zh/api_ref/11-10_ordered_stream_memory_allocation.md`); the simulator does it when
//!   the free runs, which no program can tell apart except by the reserved figure read
//!   between the free's run and a synchronisation.
//! - `aclrtMemPoolTrimTo` releases kept blocks whose free has run, down to the size asked
//!   (CANN's `SegmentManager::TrimTo` checks: above the pool's size or below its used memory
//!   is refused); blocks whose free is still queued stay.
//!
//! A pool block is not `aclrtMalloc` memory: `aclrtFree` and IPC export refuse it (107000).
//! `aclrtMemPoolFreeAsync` of `aclrtMalloc` memory frees it when the stream reaches the free,
//! as CANN's host-function path does (`MemPoolFreeAsyncCallback`). A free whose task is
//! dropped unrun (its stream destroyed with its tasks discarded, or aborted) still happens:
//! the block is made reusable, the plain memory given back (`mem::run_or_drop`).
//!
//! Codes: CANN's runtime answers a pool it does not know, a pool refusal and a failed block
//! allocation with its `RT_ERROR_MEM_POOL_*` / `RT_ERROR_POOL_*` codes, which
//! `errcode_manage.cc` turns into `ACL_ERROR_RT_INTERNAL_ERROR` (507000); the attribute
//! calls answer an unknown pool with 107000 (`soma.cc`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use acl_notify_core::{Error, Feature, RawStream};

use super::ALLOC_ALIGN;
use super::components::POOL_MARK;
use super::file::Importers;
pub use super::pool_state::PoolId;
use super::pool_state::{Block, Kept, KeptBlock, Pool};
use super::run_or_drop::run_or_drop;
use super::state::{Alloc, Gone};
use crate::Sim;
use crate::error::SimError;
use crate::job::SimJob;
use crate::locks::lock;
use crate::stream::TaskCtx;

/// The span a pool block's size is rounded up to, and a pool's size to
/// (`DEVICE_POOL_MIN_BLOCK_SIZE`, `DEVICE_POOL_ALIGN_SIZE` in hicann/runtime
/// `src/runtime/feature/soma/stream_mem_pool.hpp`): 2 MiB.
pub const POOL_BLOCK_ALIGN: u64 = 2 << 20;

const _: () = assert!(POOL_BLOCK_ALIGN.is_multiple_of(ALLOC_ALIGN));

/// A pool attribute (`aclrtMemPoolAttr`, `acl/acl_rt_memory_soma.h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolAttr {
    /// `ACL_RT_MEM_POOL_REUSE_FOLLOW_EVENT_DEPENDENCIES` (a `uint32_t` flag).
    ReuseFollowEventDependencies = 1,
    /// `ACL_RT_MEM_POOL_REUSE_ALLOW_OPPORTUNISTIC` (a `uint32_t` flag).
    ReuseAllowOpportunistic = 2,
    /// `ACL_RT_MEM_POOL_REUSE_ALLOW_INTERNAL_DEPENDENCIES` (a `uint32_t` flag).
    ReuseAllowInternalDependencies = 3,
    /// `ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD` (`uint64_t` bytes).
    ReleaseThreshold = 4,
    /// `ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_CURRENT` (`uint64_t`, read only).
    ReservedMemCurrent = 5,
    /// `ACL_RT_MEM_POOL_ATTR_RESERVED_MEM_HIGH` (`uint64_t`; set only to 0, a reset).
    ReservedMemHigh = 6,
    /// `ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT` (`uint64_t`, read only).
    UsedMemCurrent = 7,
    /// `ACL_RT_MEM_POOL_ATTR_USED_MEM_HIGH` (`uint64_t`; set only to 0, a reset).
    UsedMemHigh = 8,
}

impl PoolAttr {
    /// The attribute of C value `v`, if there is one.
    pub fn from_raw(v: u32) -> Option<PoolAttr> {
        Some(match v {
            1 => PoolAttr::ReuseFollowEventDependencies,
            2 => PoolAttr::ReuseAllowOpportunistic,
            3 => PoolAttr::ReuseAllowInternalDependencies,
            4 => PoolAttr::ReleaseThreshold,
            5 => PoolAttr::ReservedMemCurrent,
            6 => PoolAttr::ReservedMemHigh,
            7 => PoolAttr::UsedMemCurrent,
            8 => PoolAttr::UsedMemHigh,
            _ => return None,
        })
    }

    /// Whether the value is a `uint32_t` (the reuse flags); the others are `uint64_t`.
    pub fn is_flag(self) -> bool {
        matches!(
            self,
            PoolAttr::ReuseFollowEventDependencies
                | PoolAttr::ReuseAllowOpportunistic
                | PoolAttr::ReuseAllowInternalDependencies
        )
    }
}

/// Frees a block's allocation in its file (never exported: nobody imports it).
fn release(a: &Alloc) {
    a.release_owned(Importers::Refused);
}

/// 507000 for a pool this `Sim` does not have (never created, or destroyed).
fn no_pool(p: PoolId, what: &str) -> SimError {
    SimError::new(
        Error::InternalError,
        format!(
            "{what}: memory pool {:#x} is not created, or was destroyed",
            p.0
        ),
    )
}

impl Sim {
    /// `aclrtMemPoolCreate`: a pool of `max_size` bytes of `device`'s memory (0: the device's
    /// whole memory rounded down to 2 MiB; else rounded up to 2 MiB).
    ///
    /// Errors: 207000 SoC without pools (only Atlas A2, `Ascend910B`, has them); 107001 bad
    /// device; 107000 a size above the device's memory.
    pub fn mem_pool_create(&self, device: u32, max_size: u64) -> Result<PoolId, SimError> {
        self.require(
            Feature::MemPool,
            "a stream-ordered memory pool (aclrtMemPool*)",
        )?;
        self.device_ok(device)?;
        let capacity = self.mem().capacity;
        // hicann/runtime `src/runtime/feature/soma/soma.cc`, `AlignAndValidatePoolSize`.
        let size = match max_size {
            0 => capacity / POOL_BLOCK_ALIGN * POOL_BLOCK_ALIGN,
            n => n
                .checked_next_multiple_of(POOL_BLOCK_ALIGN)
                .unwrap_or(u64::MAX),
        };
        if size > capacity || size == 0 {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "maxSize {max_size}: the pool's size rounded to 2 MiB is {size} bytes, more \
                     than device {device}'s memory of {capacity} bytes (set by {})",
                    crate::ENV_DEVICE_MEMORY
                ),
            ));
        }
        let mut t = lock(&self.mem().pools.table);
        t.next += 1;
        let id = PoolId(t.next);
        t.pools.insert(
            id,
            Arc::new(Mutex::new(Pool {
                device,
                max_size: size,
                threshold: 0,
                reuse: [0; 3],
                busy: BTreeMap::new(),
                kept: Vec::new(),
                reserved: 0,
                reserved_high: 0,
                used: 0,
                used_high: 0,
                next_ticket: 0,
            })),
        );
        Ok(id)
    }

    /// `aclrtMemPoolDestroy`: gives the pool's kept memory back and forgets it.
    ///
    /// Errors: 507000 an unknown pool, or one with blocks in use or frees still queued (CANN's
    /// runtime refuses a pool it may not delete with `RT_ERROR_POOL_OP_INVALID`, 507000:
    /// `soma.cc`, `StreamMemPoolDestroy`).
    pub fn mem_pool_destroy(&self, p: PoolId) -> Result<(), SimError> {
        let mut t = lock(&self.mem().pools.table);
        let pool = t
            .pools
            .get(&p)
            .cloned()
            .ok_or_else(|| no_pool(p, "aclrtMemPoolDestroy"))?;
        let mut g = lock(&pool);
        let queued = g
            .kept
            .iter()
            .filter(|k| matches!(k.state, Kept::Queued(_)))
            .count();
        if !g.busy.is_empty() || queued != 0 {
            return Err(SimError::new(
                Error::InternalError,
                format!(
                    "memory pool {:#x} cannot be destroyed: {} of its blocks are in use (not \
                     freed with aclrtMemPoolFreeAsync) and {queued} frees are still queued on \
                     their streams; free them and synchronise the streams first",
                    p.0,
                    g.busy.len()
                ),
            ));
        }
        g.release_all(&release);
        drop(g);
        t.pools.remove(&p);
        Ok(())
    }

    /// `aclrtMemPoolMallocAsync`: a block of `size` (> 0) bytes from pool `p`, usable by the
    /// tasks queued on `stream` after this call. Returns its device address.
    ///
    /// Errors: 507000 unknown pool, or the pool is full (its kept blocks whose free has run
    /// are given back first); 207001 the device has no memory for a new block; the stream's
    /// errors (107017, 507002).
    pub fn mem_pool_malloc_async(
        &self,
        p: PoolId,
        size: usize,
        stream: RawStream,
    ) -> Result<usize, SimError> {
        self.mem_checked(|| {
            let pool = self
                .mem()
                .pools
                .get(p)
                .ok_or_else(|| no_pool(p, "aclrtMemPoolMallocAsync"))?;
            if size == 0 {
                return Err(SimError::new(Error::ParamInvalid, "size is 0"));
            }
            let span = (size as u64)
                .checked_next_multiple_of(POOL_BLOCK_ALIGN)
                .ok_or_else(|| {
                    SimError::new(Error::ParamInvalid, format!("size {size} overflows"))
                })?;
            let addr = {
                let mut g = lock(&pool);
                self.pool_take(&mut g, p, size as u64, span, stream)?
            };
            // The pool's task on the stream (CANN's AICPU kernel); nothing to do when it runs.
            let task = Box::new(|_: &TaskCtx| Ok(()));
            if let Err(e) = self.enqueue_checked(stream, SimJob::Bulk(task), |_, _| Ok(())) {
                // CANN gives the block back when its kernel cannot be launched.
                let mut g = lock(&pool);
                if let Some(b) = g.busy.remove(&addr) {
                    self.mem().remove(addr);
                    g.used -= b.span;
                    let t = g.next_ticket;
                    g.next_ticket += 1;
                    g.kept.push(KeptBlock {
                        addr,
                        block: b,
                        ticket: t,
                        state: Kept::Ready,
                    });
                }
                return Err(e);
            }
            Ok(addr)
        })
    }

    /// A block of `span` for `size` bytes from `g`: a kept one (the smallest that fits, among
    /// those whose free has run or is queued on `stream`), else a new allocation.
    fn pool_take(
        &self,
        g: &mut Pool<Alloc>,
        p: PoolId,
        size: u64,
        span: u64,
        stream: RawStream,
    ) -> Result<usize, SimError> {
        let reusable =
            |k: &KeptBlock<Alloc>| k.state == Kept::Ready || k.state == Kept::Queued(stream);
        let best = g
            .kept
            .iter()
            .enumerate()
            .filter(|(_, k)| k.block.span >= span && reusable(k))
            .min_by_key(|(_, k)| k.block.span)
            .map(|(i, _)| i);
        let (addr, block) = match best {
            Some(i) => {
                let k = g.kept.swap_remove(i);
                let mut alloc = k.block.alloc;
                alloc.size = size;
                self.mem().insert(k.addr, alloc.clone());
                (
                    k.addr,
                    Block {
                        alloc,
                        size,
                        span: k.block.span,
                    },
                )
            }
            None => {
                if g.reserved + span > g.max_size {
                    g.release_down_to(g.max_size - span.min(g.max_size), &release);
                }
                if g.reserved + span > g.max_size {
                    return Err(SimError::new(
                        Error::InternalError,
                        format!(
                            "memory pool {:#x} is full: a block of {span} bytes (for {size}, \
                             rounded to 2 MiB) does not fit its {} bytes, {} of which are \
                             reserved ({} in use, the rest freed by frees not yet run)",
                            p.0, g.max_size, g.reserved, g.used
                        ),
                    ));
                }
                let (addr, alloc) = self.place(g.device, size, span, POOL_MARK)?;
                g.reserved += span;
                g.reserved_high = g.reserved_high.max(g.reserved);
                (addr, Block { alloc, size, span })
            }
        };
        g.used += block.span;
        g.used_high = g.used_high.max(g.used);
        g.busy.insert(addr, block);
        Ok(addr)
    }

    /// `aclrtMemPoolFreeAsync`: gives the pool block at `ptr` back to its pool when `stream`
    /// reaches this point (its use by tasks issued after this call is refused from now on);
    /// `aclrtMalloc` memory is freed when the stream reaches it.
    ///
    /// Errors: 107000 `ptr` neither a block's start nor the start of this process's own
    /// `aclrtMalloc` memory (inside a block, freed already, imported, never allocated); the
    /// stream's errors (107017, 507002).
    pub fn mem_pool_free_async(&self, ptr: usize, stream: RawStream) -> Result<(), SimError> {
        self.mem_checked(|| match self.mem().pools.owner_of(ptr) {
            Ok(Some(pool)) => self.pool_free_block(pool, ptr, stream),
            Ok(None) => self.free_async_plain(ptr, stream),
            Err((base, size)) => Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{ptr:#x} is offset {} inside the pool block {base:#x} ({size} bytes): free \
                     the block by its start",
                    ptr - base
                ),
            )),
        })
    }

    fn pool_free_block(
        &self,
        pool: Arc<Mutex<Pool<Alloc>>>,
        ptr: usize,
        stream: RawStream,
    ) -> Result<(), SimError> {
        let ticket = {
            let mut g = lock(&pool);
            let b = g.busy.remove(&ptr).ok_or_else(|| {
                SimError::new(
                    Error::ParamInvalid,
                    format!("pool block {ptr:#x} was freed meanwhile by another thread"),
                )
            })?;
            self.mem().remove(ptr);
            self.note_freed(ptr, b.alloc.size, b.alloc.file.device(), Gone::Freed);
            g.used -= b.span;
            let t = g.next_ticket;
            g.next_ticket += 1;
            g.kept.push(KeptBlock {
                addr: ptr,
                block: b,
                ticket: t,
                state: Kept::Queued(stream),
            });
            t
        };
        // The block is made reusable when the task runs, or when it is dropped unrun once
        // queued (its stream destroyed with its tasks discarded, or aborted): nothing of that
        // stream touches the block any more. Before, a discarded free left its block queued for
        // ever: never reused, and `aclrtMemPoolDestroy` refusing the pool.
        let (ready, pending) = run_or_drop({
            let pool = Arc::clone(&pool);
            move || {
                let mut g = lock(&pool);
                if let Some(k) = g.kept.iter_mut().find(|k| k.ticket == ticket) {
                    k.state = Kept::Ready;
                }
            }
        });
        let kept = Arc::clone(&pool);
        let task = Box::new(move |_: &TaskCtx| {
            ready.run();
            let mut g = lock(&kept);
            let keep = g.threshold;
            g.release_down_to(keep, &release);
            Ok(())
        });
        let queued = self.enqueue_checked(stream, SimJob::Bulk(task), |_, _| Ok(()));
        if queued.is_ok() {
            pending.queued();
        } else {
            pending.refused();
            // Not queued: the block is in use again, as before the call.
            let mut g = lock(&pool);
            if let Some(i) = g.kept.iter().position(|k| k.ticket == ticket) {
                let k = g.kept.swap_remove(i);
                g.used += k.block.span;
                self.mem().insert(ptr, k.block.alloc.clone());
                g.busy.insert(ptr, k.block);
            }
        }
        queued
    }

    /// `aclrtMemPoolFreeAsync` of this process's `aclrtMalloc` memory at `ptr`: out of the
    /// process's allocations now (later use refused), freed in its file when `stream` reaches
    /// the task (hicann/runtime `api_impl_soma.cc`: a host function that frees it).
    fn free_async_plain(&self, ptr: usize, stream: RawStream) -> Result<(), SimError> {
        let owned = self
            .mem()
            .allocs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&ptr)
            .is_some_and(|a| !a.imported);
        if !owned {
            let mut msg = format!(
                "{ptr:#x} is neither a block of a memory pool nor the start of this process's \
                 own aclrtMalloc memory"
            );
            self.explain(&mut msg, ptr);
            return Err(SimError::new(Error::ParamInvalid, msg));
        }
        let Some(a) = self.mem().remove(ptr) else {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!("{ptr:#x} was freed meanwhile by another thread"),
            ));
        };
        // Freed in its file when the task runs, or when it is dropped unrun (its stream
        // destroyed with its tasks discarded, or aborted): before, a discarded free left the
        // memory allocated until the process died.
        let (free, pending) = run_or_drop({
            let a = a.clone();
            move || release(&a)
        });
        let task = Box::new(move |_: &TaskCtx| {
            free.run();
            Ok(())
        });
        match self.enqueue_checked(stream, SimJob::Bulk(task), |_, _| Ok(())) {
            Ok(()) => {
                pending.queued();
                self.mem_withdraw(&a.file, a.id, a.generation);
                self.note_freed(ptr, a.size, a.file.device(), Gone::Freed);
                Ok(())
            }
            Err(e) => {
                pending.refused();
                self.mem().insert(ptr, a);
                Err(e)
            }
        }
    }

    /// `aclrtMemPoolGetAttr`: the value of `attr` (a flag 0 or 1, or bytes).
    ///
    /// Errors: 107000 unknown pool.
    pub fn mem_pool_attr(&self, p: PoolId, attr: PoolAttr) -> Result<u64, SimError> {
        let pool = self.mem().pools.get(p).ok_or_else(|| attr_no_pool(p))?;
        let g = lock(&pool);
        Ok(match attr {
            PoolAttr::ReuseFollowEventDependencies => u64::from(g.reuse[0]),
            PoolAttr::ReuseAllowOpportunistic => u64::from(g.reuse[1]),
            PoolAttr::ReuseAllowInternalDependencies => u64::from(g.reuse[2]),
            PoolAttr::ReleaseThreshold => g.threshold,
            PoolAttr::ReservedMemCurrent => g.reserved,
            PoolAttr::ReservedMemHigh => g.reserved_high,
            PoolAttr::UsedMemCurrent => g.used,
            PoolAttr::UsedMemHigh => g.used_high,
        })
    }

    /// `aclrtMemPoolSetAttr` (hicann/runtime `soma.cc`, `stream_mem_pool.cc`
    /// `SetAttribute`): a reuse flag (any non-zero value is 1), the release threshold (at most
    /// the pool's size), or a reset of a high mark (only 0).
    ///
    /// Errors: 107000 unknown pool, a read-only attribute; 507000 a threshold above the pool's
    /// size, a high mark set to other than 0.
    pub fn mem_pool_set_attr(&self, p: PoolId, attr: PoolAttr, value: u64) -> Result<(), SimError> {
        let pool = self.mem().pools.get(p).ok_or_else(|| attr_no_pool(p))?;
        let mut g = lock(&pool);
        let refused = |why: String| Err(SimError::new(Error::InternalError, why));
        match attr {
            PoolAttr::ReuseFollowEventDependencies => g.reuse[0] = u32::from(value != 0),
            PoolAttr::ReuseAllowOpportunistic => g.reuse[1] = u32::from(value != 0),
            PoolAttr::ReuseAllowInternalDependencies => g.reuse[2] = u32::from(value != 0),
            PoolAttr::ReleaseThreshold if value > g.max_size => {
                return refused(format!(
                    "release threshold {value}: more than the pool's size of {} bytes",
                    g.max_size
                ));
            }
            PoolAttr::ReleaseThreshold => g.threshold = value,
            PoolAttr::ReservedMemCurrent | PoolAttr::UsedMemCurrent => {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!("attribute {} is read-only", attr as u32),
                ));
            }
            PoolAttr::ReservedMemHigh | PoolAttr::UsedMemHigh if value != 0 => {
                return refused(format!(
                    "attribute {} takes only 0 (a reset of the high mark), not {value}",
                    attr as u32
                ));
            }
            PoolAttr::ReservedMemHigh => g.reserved_high = 0,
            PoolAttr::UsedMemHigh => g.used_high = 0,
        }
        Ok(())
    }

    /// `aclrtMemPoolTrimTo`: gives kept blocks whose free has run back to the device until the
    /// pool reserves at most `keep` bytes (blocks whose free is still queued stay).
    ///
    /// Errors: 507000 unknown pool, `keep` above the pool's size or below its memory in use
    /// (hicann/runtime `stream_mem_pool.cc`, `SegmentManager::TrimTo`).
    pub fn mem_pool_trim_to(&self, p: PoolId, keep: u64) -> Result<(), SimError> {
        let pool = self
            .mem()
            .pools
            .get(p)
            .ok_or_else(|| no_pool(p, "aclrtMemPoolTrimTo"))?;
        let mut g = lock(&pool);
        if keep > g.max_size {
            return Err(SimError::new(
                Error::InternalError,
                format!(
                    "minBytesToKeep {keep}: more than the pool's size of {} bytes",
                    g.max_size
                ),
            ));
        }
        if keep >= g.reserved {
            return Ok(());
        }
        if keep < g.used {
            return Err(SimError::new(
                Error::InternalError,
                format!(
                    "minBytesToKeep {keep}: less than the pool's {} bytes in use",
                    g.used
                ),
            ));
        }
        g.release_down_to(keep, &release);
        Ok(())
    }

    /// 107000 if `ptr` is in a pool block (which `what`, `aclrtFree` or an IPC export, does
    /// not take).
    pub(super) fn refuse_pool_block(&self, ptr: usize, what: &str) -> Result<(), SimError> {
        match self.mem().pools.block_at(ptr) {
            None => Ok(()),
            Some((base, size)) => Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{ptr:#x} is in the memory pool block {base:#x} ({size} bytes): {what} takes \
                     aclrtMalloc memory; give the block back with aclrtMemPoolFreeAsync"
                ),
            )),
        }
    }
}

/// 107000 for an attribute call on a pool this `Sim` does not have (`soma.cc`).
fn attr_no_pool(p: PoolId) -> SimError {
    SimError::new(
        Error::ParamInvalid,
        format!(
            "memory pool {:#x} is not created, or was destroyed: create it before reading or \
             setting its attributes",
            p.0
        ),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
    use std::time::{Duration, Instant};

    use acl_notify_core::{
        BackendError as _, HostCall, Soc, StreamDestroy, StreamOps as _, SyncWait,
    };

    use super::*;
    use crate::NamespaceGuard;

    /// Holds its stream while the `AtomicU32` it points to is 1 (at most 20 s).
    unsafe extern "C" fn hold(arg: *mut std::ffi::c_void) {
        // SAFETY: `arg` points to a static `AtomicU32` (see `held`).
        let gate = unsafe { &*arg.cast::<AtomicU32>() };
        let end = Instant::now() + Duration::from_secs(20);
        while gate.load(SeqCst) == 1 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A host function that holds its stream until `gate` is 0.
    fn held(gate: &'static AtomicU32) -> HostCall {
        gate.store(1, SeqCst);
        // SAFETY: `hold` only reads the static `gate` and does not unwind.
        unsafe { HostCall::new(hold, std::ptr::from_ref(gate).cast_mut().cast()) }
    }

    fn open(tag: &str, soc: Soc) -> (Sim, NamespaceGuard) {
        crate::mem::tests::test_sim("pool", tag, soc, 1, 64 << 20)
    }

    const MIB: u64 = 1 << 20;

    /// A block whose free is queued (its stream held) is reused by the next allocation on the
    /// same stream (stream order puts the free first), never by another stream's until the
    /// free has run; after the run any stream reuses it.
    #[test]
    fn a_freed_block_is_reused_on_its_stream_at_once_and_elsewhere_after_the_free_ran() {
        static GATE: AtomicU32 = AtomicU32::new(0);
        let (sim, _ns) = open("reuse", Soc::Ascend910B);
        let p = sim.mem_pool_create(0, 32 * MIB).unwrap();
        sim.mem_pool_set_attr(p, PoolAttr::ReleaseThreshold, 32 * MIB)
            .unwrap();
        let (s1, s2) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
        sim.launch_host_func(s1, held(&GATE)).unwrap();
        let a = sim.mem_pool_malloc_async(p, 1000, s1).unwrap();
        sim.mem_pool_free_async(a, s1).unwrap();
        let b = sim.mem_pool_malloc_async(p, 1000, s2).unwrap();
        assert_ne!(a, b, "another stream took a block whose free has not run");
        let c = sim.mem_pool_malloc_async(p, 1000, s1).unwrap();
        assert_eq!(a, c, "the same stream did not reuse its freed block");
        assert_eq!(
            sim.mem_pool_attr(p, PoolAttr::UsedMemCurrent).unwrap(),
            4 * MIB
        );
        sim.mem_pool_free_async(c, s1).unwrap();
        GATE.store(0, SeqCst);
        sim.synchronize(s1, SyncWait::Forever).unwrap();
        let d = sim.mem_pool_malloc_async(p, 2 * MIB as usize, s2).unwrap();
        assert_eq!(
            a, d,
            "the block whose free ran was not reused by another stream"
        );
        sim.mem_pool_free_async(b, s2).unwrap();
        sim.mem_pool_free_async(d, s2).unwrap();
        sim.synchronize(s2, SyncWait::Forever).unwrap();
        assert_eq!(sim.mem_pool_attr(p, PoolAttr::UsedMemCurrent).unwrap(), 0);
        assert_eq!(
            sim.mem_pool_attr(p, PoolAttr::ReservedMemCurrent).unwrap(),
            4 * MIB
        );
        sim.mem_pool_destroy(p).unwrap();
        assert_eq!(sim.mem_info(0).unwrap(), (64 * MIB, 64 * MIB));
    }

    /// A pool whose free is still queued, or with a block in use, is not destroyed (507000);
    /// once the free ran it is, and its memory goes back to the device.
    #[test]
    fn destroy_waits_for_blocks_in_use_and_queued_frees() {
        static GATE: AtomicU32 = AtomicU32::new(0);
        let (sim, _ns) = open("destroy", Soc::Ascend910B);
        let p = sim.mem_pool_create(0, 0).unwrap();
        let s = sim.create_stream(0).unwrap();
        let a = sim.mem_pool_malloc_async(p, 64, s).unwrap();
        let e = sim.mem_pool_destroy(p).unwrap_err();
        assert_eq!(e.kind(), Error::InternalError, "{e}");
        sim.launch_host_func(s, held(&GATE)).unwrap();
        sim.mem_pool_free_async(a, s).unwrap();
        let e = sim.mem_pool_destroy(p).unwrap_err();
        assert_eq!(e.kind(), Error::InternalError, "{e}");
        assert!(e.to_string().contains("1 frees are still queued"), "{e}");
        GATE.store(0, SeqCst);
        sim.synchronize(s, SyncWait::Forever).unwrap();
        sim.mem_pool_destroy(p).unwrap();
        let e = sim.mem_pool_destroy(p).unwrap_err();
        assert_eq!(e.kind(), Error::InternalError, "{e}");
        assert_eq!(sim.mem_info(0).unwrap().0, 64 * MIB);
    }

    /// A block is not `aclrtMalloc` memory: `aclrtFree` and an IPC export refuse it; an
    /// allocation on a stream that cannot take its task gives the block back.
    #[test]
    fn blocks_are_refused_by_free_and_export_and_a_dead_stream_gives_one_back() {
        let (sim, _ns) = open("refuse", Soc::Ascend910B);
        let p = sim.mem_pool_create(0, 8 * MIB).unwrap();
        let s = sim.create_stream(0).unwrap();
        let a = sim.mem_pool_malloc_async(p, 4096, s).unwrap();
        let e = sim.free(a).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{e}");
        let e = sim.ipc_mem_export(a, 4096, true).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{e}");
        assert!(e.to_string().contains("memory pool block"), "{e}");
        sim.memset(a, 4096, 7, 4096).unwrap();
        sim.mem_pool_free_async(a, s).unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        sim.destroy_stream(s, StreamDestroy::Drain).unwrap();
        assert!(sim.mem_pool_malloc_async(p, 64, s).is_err());
        assert_eq!(sim.mem_pool_attr(p, PoolAttr::UsedMemCurrent).unwrap(), 0);
        sim.mem_pool_destroy(p).unwrap();
    }

    /// A free whose stream is destroyed with its tasks discarded before it ran still makes its
    /// block reusable: the pool is destroyed and its memory is the device's again.
    #[test]
    fn a_discarded_free_gives_its_block_back_to_the_pool() {
        let (sim, _ns) = open("discard", Soc::Ascend910B);
        let p = sim.mem_pool_create(0, 8 * MIB).unwrap();
        let s = sim.create_stream(0).unwrap();
        let word = sim.malloc(0, 4096, 0).unwrap();
        let a = sim.mem_pool_malloc_async(p, 4096, s).unwrap();
        // Holds the stream until it is destroyed: the word stays 0.
        sim.value_wait(word, 1, crate::mem::ValueCondition::Equal, s)
            .unwrap();
        sim.mem_pool_free_async(a, s).unwrap();
        sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
        assert_eq!(sim.mem_pool_attr(p, PoolAttr::UsedMemCurrent).unwrap(), 0);
        sim.mem_pool_destroy(p).unwrap();
        sim.free(word).unwrap();
        assert_eq!(sim.mem_info(0).unwrap().0, 64 * MIB);
    }

    /// `aclrtMemPoolFreeAsync` of `aclrtMalloc` memory whose stream is destroyed with its
    /// tasks discarded (or aborted) before the free ran still gives the memory back: before,
    /// it stayed allocated until the process died.
    #[test]
    fn a_discarded_free_of_plain_memory_gives_it_back_to_the_device() {
        for abort in [false, true] {
            let (sim, _ns) = open(if abort { "plain-abort" } else { "plain" }, Soc::Ascend910B);
            let s = sim.create_stream(0).unwrap();
            let word = sim.malloc(0, 4096, 0).unwrap();
            let a = sim.malloc(0, 4 << 20, 0).unwrap();
            // Holds the stream until it is destroyed or aborted: the word stays 0.
            sim.value_wait(word, 1, crate::mem::ValueCondition::Equal, s)
                .unwrap();
            sim.mem_pool_free_async(a, s).unwrap();
            if abort {
                assert_eq!(sim.abort_streams_where(|d| d == 0), 1);
                let _ = sim.synchronize(s, SyncWait::Forever);
            } else {
                sim.destroy_stream(s, StreamDestroy::Discard).unwrap();
            }
            sim.free(word).unwrap();
            assert_eq!(sim.mem_info(0).unwrap().0, 64 * MIB, "abort: {abort}");
        }
    }

    /// Only Atlas A2 has pools (CANN's chapter on them).
    #[test]
    fn pools_are_refused_where_cann_has_none() {
        let (sim, _ns) = open("soc", Soc::Ascend310P);
        let e = sim.mem_pool_create(0, 0).unwrap_err();
        assert_eq!(e.kind(), Error::FeatureNotSupport, "{e}");
    }
}

//! Host memory of `aclrtMallocHost` (CANN's pinned host memory): the process's table of its
//! blocks, and what a queued copy or set keeps of the block it touches.
//!
//! A queued task's host side is read or written when the task runs, on the stream's worker.
//! If the program frees the block with `aclrtFreeHost` before that, the task must not touch
//! freed memory (the global allocator's: a write there corrupts whatever took its place, or
//! faults when the allocator gave the pages back). So a task whose host side lies in a block
//! holds the block ([`Arc<HostBlock>`]): `aclrtFreeHost` takes the block out of the table and
//! marks it freed at once, the task finds the mark when it runs and fails with 107000 instead
//! of writing, and the memory goes back to the allocator when the last holder lets go. CANN
//! leaves a free with work pending undefined (its `aclrtFreeHostWithDevSync` is the one that
//! waits); here it is a failed task, never a crash or a write into freed memory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use acl_notify_core::Error;

use crate::error::SimError;
use crate::locks::lock;

/// Alignment of `aclrtMallocHost` memory (a page, like the pinned memory CANN returns).
pub(crate) const HOST_ALIGN: usize = 4096;

/// One block of `aclrtMallocHost` memory; given back to the allocator when dropped.
#[derive(Debug)]
pub(crate) struct HostBlock {
    addr: usize,
    size: usize,
    /// Taken out of the table by `aclrtFreeHost` (or the session's end).
    freed: AtomicBool,
}

impl HostBlock {
    /// Its address and size (`aclrtMemGetAddressRange`).
    pub(crate) fn span(&self) -> (usize, usize) {
        (self.addr, self.size)
    }

    /// At run time of a queued task whose range `[addr, addr + len)` starts in this block:
    /// 107000 if the block was freed since the task was queued.
    pub(crate) fn still(&self, addr: usize, len: usize, what: &str) -> Result<(), SimError> {
        if !self.freed.load(Ordering::Acquire) {
            return Ok(());
        }
        Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "{what} [{addr:#x}, {:#x}) is in host memory {:#x} ({} bytes of \
                 aclrtMallocHost), which was freed (aclrtFreeHost) before the queued task ran; \
                 nothing was written (synchronize the stream before freeing it)",
                addr.wrapping_add(len),
                self.addr,
                self.size
            ),
        ))
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        if let Ok(layout) = std::alloc::Layout::from_size_align(self.size, HOST_ALIGN) {
            // SAFETY: allocated by `Sim::malloc_host` with this layout; a block is dropped
            // once, when its table entry and every queued task holding it are gone.
            unsafe {
                std::alloc::dealloc(std::ptr::with_exposed_provenance_mut(self.addr), layout)
            };
        }
    }
}

/// The process's `aclrtMallocHost` blocks, by address.
#[derive(Debug, Default)]
pub(crate) struct HostTable(Mutex<BTreeMap<usize, Arc<HostBlock>>>);

impl HostTable {
    /// The block holding `addr`, if any.
    pub(crate) fn block_at(&self, addr: usize) -> Option<Arc<HostBlock>> {
        let t = lock(&self.0);
        let (_, b) = t.range(..=addr).next_back()?;
        (addr - b.addr < b.size).then(|| Arc::clone(b))
    }

    /// Takes every block out (the session's end): each is freed once no task holds it.
    pub(crate) fn clear(&self) {
        let blocks = std::mem::take(&mut *lock(&self.0));
        for b in blocks.into_values() {
            b.freed.store(true, Ordering::Release);
        }
    }
}

impl HostTable {
    /// `aclrtMallocHost`: `size` bytes (> 0) of page-aligned host memory, entered in the
    /// table; `None` when the allocator has none.
    pub(crate) fn alloc(&self, size: usize) -> Option<usize> {
        let layout = std::alloc::Layout::from_size_align(size, HOST_ALIGN).ok()?;
        // SAFETY: a non-zero size (the caller's check).
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return None;
        }
        let addr = p.expose_provenance();
        let block = HostBlock {
            addr,
            size,
            freed: AtomicBool::new(false),
        };
        lock(&self.0).insert(addr, Arc::new(block));
        Some(addr)
    }

    /// `aclrtFreeHost` of the block at `addr`: taken out of the table and marked freed (its
    /// memory goes back once no queued task holds it); `false` when no block starts there.
    pub(crate) fn free(&self, addr: usize) -> bool {
        let Some(block) = lock(&self.0).remove(&addr) else {
            return false;
        };
        block.freed.store(true, Ordering::Release);
        true
    }

    /// Takes the block at `addr` out of the table without marking it freed: a buffer of the
    /// runtime's own (`aclrtMemsetD32`'s) that the queued copies holding it still use; its
    /// memory goes back when the last of them has run.
    pub(crate) fn release(&self, addr: usize) {
        drop(lock(&self.0).remove(&addr));
    }

    /// `Ok` when `[addr, addr + len)` lies within one block; 107000 naming it when the range
    /// leaves it, or when none holds `addr`.
    pub(crate) fn range(&self, addr: usize, len: usize) -> Result<(), SimError> {
        let Some(b) = self.block_at(addr) else {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{addr:#x} is neither a device address of this process nor memory of \
                     aclrtMallocHost (freed already, or from elsewhere)"
                ),
            ));
        };
        let room = b.size - (addr - b.addr);
        if len > room {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "the range [{addr:#x}, +{len}) leaves host allocation {:#x} ({} bytes of \
                     aclrtMallocHost) by {} bytes",
                    b.addr,
                    b.size,
                    len - room
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_freed_while_held_is_marked_and_found_by_address_until_then() {
        let t = HostTable::default();
        let addr = t.alloc(8192).unwrap();
        assert_eq!(addr % HOST_ALIGN, 0);
        t.range(addr + 8000, 192).unwrap();
        assert!(t.range(addr + 8000, 193).is_err());
        assert!(t.block_at(addr - 1).is_none());
        assert!(t.block_at(addr + 8192).is_none());
        let held = t.block_at(addr + 100).expect("inside the block");
        held.still(addr + 100, 10, "destination").unwrap();
        assert!(t.free(addr));
        assert!(!t.free(addr), "freed twice");
        assert!(t.block_at(addr + 100).is_none());
        let e = held.still(addr + 100, 10, "destination").unwrap_err();
        assert!(
            e.message()
                .contains("freed (aclrtFreeHost) before the queued task ran")
        );
        // Dropping the last holder gives the memory back (under Miri / valgrind: no leak).
        drop(held);
    }

    #[test]
    fn a_released_block_stays_usable_by_its_holders_and_is_gone_from_the_table() {
        let t = HostTable::default();
        let addr = t.alloc(64).unwrap();
        let held = t.block_at(addr).unwrap();
        t.release(addr);
        assert!(t.block_at(addr).is_none());
        assert!(
            !t.free(addr),
            "released blocks are not the program's to free"
        );
        held.still(addr, 64, "source").unwrap();
        drop(held);
    }
}

//! Host memory the runtime knows: `aclrtMallocHost`'s blocks (CANN's pinned host memory) and
//! the caller's ranges registered with `aclrtHostRegister[V2]` ([`super::registered`]); the
//! process's table of them, and what a queued copy or set keeps of the block it touches.
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
//!
//! A registered range is held the same way: `aclrtHostUnregister` marks it, and a task queued
//! on it before fails instead of writing (the caller may free the memory right after). Its
//! bytes stay the caller's: dropping the last holder gives nothing back. A registration with a
//! device address (`ACL_HOST_REG_MAPPED`) owns a `PROT_NONE` reservation of the same length
//! for it, so that host code dereferencing the device address faults at once, as with device
//! memory, and a copy naming it is refused (CANN documents the address for device use only).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use acl_notify_core::Error;

use crate::error::SimError;
use crate::locks::lock;

/// Alignment of `aclrtMallocHost` memory (a page, like the pinned memory CANN returns).
pub(crate) const HOST_ALIGN: usize = 4096;

/// One block of `aclrtMallocHost` memory, given back to the allocator when dropped; or one
/// registered range of the caller's memory.
#[derive(Debug)]
pub(crate) struct HostBlock {
    addr: usize,
    size: usize,
    /// Taken out of the table by `aclrtFreeHost` or `aclrtHostUnregister` (or the session's
    /// end).
    freed: AtomicBool,
    backing: Backing,
}

/// Whose the bytes of a [`HostBlock`] are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    /// `aclrtMallocHost`'s: the block gives them back to the allocator.
    Allocated,
    /// The caller's, registered: nothing to give back.
    Caller,
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
        let (kind, how) = match self.backing {
            Backing::Allocated => ("of aclrtMallocHost", "freed (aclrtFreeHost)"),
            Backing::Caller => ("registered", "unregistered (aclrtHostUnregister)"),
        };
        Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "{what} [{addr:#x}, {:#x}) is in host memory {:#x} ({} bytes {kind}), which was \
                 {how} before the queued task ran; nothing was written (synchronize the stream \
                 first)",
                addr.wrapping_add(len),
                self.addr,
                self.size
            ),
        ))
    }
}

impl Drop for HostBlock {
    fn drop(&mut self) {
        if self.backing == Backing::Caller {
            return;
        }
        if let Ok(layout) = std::alloc::Layout::from_size_align(self.size, HOST_ALIGN) {
            // SAFETY: allocated by `Sim::malloc_host` with this layout; a block is dropped
            // once, when its table entry and every queued task holding it are gone.
            unsafe {
                std::alloc::dealloc(std::ptr::with_exposed_provenance_mut(self.addr), layout)
            };
        }
    }
}

/// The process's `aclrtMallocHost` blocks and registered ranges, by address.
#[derive(Debug, Default)]
pub(crate) struct HostTable {
    blocks: Mutex<BTreeMap<usize, Arc<HostBlock>>>,
    registered: Mutex<BTreeMap<usize, Registration>>,
    /// How many registrations have a device address: while none has, a copy's host side is
    /// not looked up ([`HostTable::alias_refused`]).
    aliases: AtomicUsize,
}

/// What a registration asks for: `ACL_HOST_REG_MAPPED` (a device address), `ACL_HOST_REG_PINNED`
/// (page-locked), or both (`acl_rt.h`'s values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostReg(u32);

impl HostReg {
    /// `ACL_HOST_REG_MAPPED`.
    pub const MAPPED: HostReg = HostReg(0x2);
    /// `ACL_HOST_REG_PINNED`.
    pub const PINNED: HostReg = HostReg(0x1000_0000);
    /// Both.
    pub const MAPPED_PINNED: HostReg = HostReg(0x1000_0002);

    fn has(self, f: HostReg) -> bool {
        self.0 & f.0 != 0
    }
}

/// A range registered with `aclrtHostRegister[V2]`.
#[derive(Debug)]
pub(crate) struct Registration {
    block: Arc<HostBlock>,
    /// Its device address (`ACL_HOST_REG_MAPPED`).
    alias: Option<Alias>,
    /// Registered as pinned (`ACL_HOST_REG_PINNED`).
    pinned: bool,
}

/// The `PROT_NONE` reservation behind a registration's device address; released when dropped.
#[derive(Debug)]
struct Alias {
    addr: usize,
    len: usize,
}

impl Drop for Alias {
    fn drop(&mut self) {
        super::reserved::unreserve(self.addr, self.len);
    }
}

/// Which registrations cover `[addr, addr + len)`, in `t` (the first one).
fn overlapping<V>(
    t: &BTreeMap<usize, V>,
    addr: usize,
    len: usize,
    size: impl Fn(&V) -> usize,
) -> Option<(usize, usize)> {
    let end = addr.saturating_add(len);
    if let Some((b, v)) = t.range(..=addr).next_back()
        && addr - b < size(v)
    {
        return Some((*b, size(v)));
    }
    t.range(addr..end).next().map(|(b, v)| (*b, size(v)))
}

impl HostTable {
    /// The block holding `addr`, if any: an `aclrtMallocHost` block, else a registered range.
    pub(crate) fn block_at(&self, addr: usize) -> Option<Arc<HostBlock>> {
        {
            let t = lock(&self.blocks);
            if let Some((_, b)) = t.range(..=addr).next_back()
                && addr - b.addr < b.size
            {
                return Some(Arc::clone(b));
            }
        }
        let t = lock(&self.registered);
        let (_, r) = t.range(..=addr).next_back()?;
        (addr - r.block.addr < r.block.size).then(|| Arc::clone(&r.block))
    }

    /// Takes every block and registration out (the session's end): each block is freed once no
    /// task holds it.
    pub(crate) fn clear(&self) {
        let blocks = std::mem::take(&mut *lock(&self.blocks));
        for b in blocks.into_values() {
            b.freed.store(true, Ordering::Release);
        }
        let registered = std::mem::take(&mut *lock(&self.registered));
        self.aliases.store(0, Ordering::Relaxed);
        for r in registered.into_values() {
            r.block.freed.store(true, Ordering::Release);
        }
    }

    /// `aclrtHostRegister[V2]` of `[addr, addr + size)` (`size` > 0): a device address for it
    /// when `how` has `MAPPED` (what [`device_address`](Self::device_address) answers).
    ///
    /// Errors: 507910 a range overlapping one registered already (CANN's
    /// `CheckMemoryRangeRegistered`, hicann/runtime `src/runtime/core/src/common/
    /// register_memory.cc`); 107000 `pinned` over `aclrtMallocHost` memory (pinned already:
    /// CANN's doc of `ACL_HOST_REG_PINNED`); 207001 no address space for the device address.
    pub(crate) fn register(
        &self,
        addr: usize,
        size: usize,
        how: HostReg,
    ) -> Result<Option<usize>, SimError> {
        let (mapped, pinned) = (how.has(HostReg::MAPPED), how.has(HostReg::PINNED));
        let mut t = lock(&self.registered);
        if let Some((b, n)) = overlapping(&t, addr, size, |r| r.block.size) {
            return Err(SimError::new(
                Error::HostMemoryAlreadyRegistered,
                format!(
                    "[{addr:#x}, +{size}) overlaps host memory registered already at {b:#x} \
                     ({n} bytes); unregister it first (aclrtHostUnregister)"
                ),
            ));
        }
        if pinned && let Some((b, n)) = overlapping(&lock(&self.blocks), addr, size, |b| b.size) {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "ACL_HOST_REG_PINNED: [{addr:#x}, +{size}) is in aclrtMallocHost memory \
                     {b:#x} ({n} bytes), which is pinned already (CANN accepts only memory from \
                     malloc, new or mmap)"
                ),
            ));
        }
        let alias = if mapped {
            let len = size.next_multiple_of(HOST_ALIGN);
            let at = super::reserved::reserve_aligned(len, HOST_ALIGN)?;
            Some(Alias { addr: at, len })
        } else {
            None
        };
        let dev = alias.as_ref().map(|a| a.addr);
        if dev.is_some() {
            self.aliases.fetch_add(1, Ordering::Relaxed);
        }
        let block = Arc::new(HostBlock {
            addr,
            size,
            freed: AtomicBool::new(false),
            backing: Backing::Caller,
        });
        t.insert(
            addr,
            Registration {
                block,
                alias,
                pinned,
            },
        );
        Ok(dev)
    }

    /// `aclrtHostUnregister` of the registration starting at `addr`: taken out and marked (a
    /// task queued on it fails instead of writing); its device address released.
    ///
    /// Errors: 507911 no registration starts at `addr` (CANN's map is keyed by the start,
    /// `IsMappedMemoryBase`).
    pub(crate) fn unregister(&self, addr: usize) -> Result<(), SimError> {
        let Some(r) = lock(&self.registered).remove(&addr) else {
            let inside = lock(&self.registered)
                .range(..addr)
                .next_back()
                .filter(|(b, r)| addr - **b < r.block.size)
                .map(|(b, _)| {
                    format!(" (it is inside the range registered at {b:#x}: unregister that)")
                })
                .unwrap_or_default();
            return Err(SimError::new(
                Error::HostMemoryNotRegistered,
                format!("{addr:#x} is not the start of registered host memory{inside}"),
            ));
        };
        r.block.freed.store(true, Ordering::Release);
        if r.alias.is_some() {
            self.aliases.fetch_sub(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The device address of the registration starting at `addr` (`aclrtHostGetDevicePointer`;
    /// CANN looks the start up, `GetMappedDevicePointer` in `register_memory.cc`).
    ///
    /// Errors: 107000 no registration starts there, or it has no device address (registered
    /// `ACL_HOST_REG_PINNED` only).
    pub(crate) fn device_address(&self, addr: usize) -> Result<usize, SimError> {
        let t = lock(&self.registered);
        let why = match t.get(&addr) {
            Some(Registration { alias: Some(a), .. }) => return Ok(a.addr),
            Some(Registration { pinned: true, .. }) => {
                "was registered ACL_HOST_REG_PINNED only, without ACL_HOST_REG_MAPPED"
            }
            Some(_) => "has no device address",
            None => "is not the start of host memory registered for device address mapping",
        };
        Err(SimError::new(
            Error::ParamInvalid,
            format!("{addr:#x} {why}"),
        ))
    }

    /// A copy's host side at `addr`: 107000 if it is in a registration's device address,
    /// which CANN documents for use on the device only ("not for memory operations such as
    /// copies", `docs/zh/api_ref/11-02_host_memory_management.md`). One relaxed load while
    /// nothing registered has a device address.
    #[inline(always)]
    pub(crate) fn alias_refused(&self, addr: usize, what: &str) -> Result<(), SimError> {
        if self.aliases.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        self.alias_refused_slow(addr, what)
    }

    #[cold]
    fn alias_refused_slow(&self, addr: usize, what: &str) -> Result<(), SimError> {
        let t = lock(&self.registered);
        for r in t.values() {
            if let Some(a) = &r.alias
                && addr.wrapping_sub(a.addr) < a.len
            {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "the {what} {addr:#x} is the device address of host memory {:#x} \
                         registered with aclrtHostRegister: CANN documents it for use on the \
                         device only, not by copies; use the host address",
                        r.block.addr + (addr - a.addr)
                    ),
                ));
            }
        }
        Ok(())
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
            backing: Backing::Allocated,
        };
        lock(&self.blocks).insert(addr, Arc::new(block));
        Some(addr)
    }

    /// `aclrtFreeHost` of the block at `addr`: taken out of the table and marked freed (its
    /// memory goes back once no queued task holds it), with any registration inside it (a
    /// task holding one must not write into the freed block either); `false` when no block
    /// starts there.
    pub(crate) fn free(&self, addr: usize) -> bool {
        let Some(block) = lock(&self.blocks).remove(&addr) else {
            return false;
        };
        block.freed.store(true, Ordering::Release);
        let inside: Vec<usize> = lock(&self.registered)
            .range(addr..addr + block.size)
            .map(|(b, _)| *b)
            .collect();
        for b in inside {
            let _ = self.unregister(b);
        }
        true
    }

    /// Takes the block at `addr` out of the table without marking it freed: a buffer of the
    /// runtime's own (`aclrtMemsetD32`'s) that the queued copies holding it still use; its
    /// memory goes back when the last of them has run.
    pub(crate) fn release(&self, addr: usize) {
        drop(lock(&self.blocks).remove(&addr));
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

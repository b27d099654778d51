//! Checked device ranges (the module docs' *Checked memory*): the allocation of this process
//! that covers an address (this thread's cache of recent ones before the table), a range
//! checked against it ([`RangeRef`]; [`DevRange`] for a task that outlives the call), and the
//! 107000 messages that say what an address is.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::PoisonError;

use acl_notify_core::Error;

use super::state::{Alloc, AllocRef, Gone};
use super::{queued, recent};
use crate::Sim;
use crate::error::SimError;
use crate::locks::lock;
use crate::tagged_cache::Tag;

/// A checked device range: arena offset `off` of `alloc`'s file, `len` bytes, inside `alloc`;
/// the allocation's file borrowed from the `Sim` (what the copy and set paths use).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RangeRef<'s> {
    pub(crate) alloc: AllocRef<'s>,
    /// The allocation's device address.
    pub(crate) base: usize,
    /// The range's device address.
    pub(crate) addr: usize,
    pub(crate) off: u64,
    pub(crate) len: usize,
}

impl RangeRef<'_> {
    pub(super) fn ptr(&self) -> *mut u8 {
        self.alloc.file.bytes(self.off, self.len)
    }
}

/// A checked device range that holds its allocation's file (for tasks that outlive the call:
/// reduce, copies with another host's memory), as [`RangeRef`] otherwise.
#[derive(Clone, Debug)]
pub(crate) struct DevRange {
    pub(crate) alloc: Alloc,
    /// The allocation's device address.
    pub(crate) base: usize,
    /// The range's device address.
    pub(crate) addr: usize,
    pub(crate) off: u64,
    pub(crate) len: usize,
}

impl DevRange {
    pub(super) fn ptr(&self) -> *mut u8 {
        self.alloc.file.bytes(self.off, self.len)
    }

    /// At run time of a queued task: still the same allocation?
    pub(super) fn still(&self, what: &str) -> Result<(), SimError> {
        if self.alloc.view().current() {
            return Ok(());
        }
        Err(queued::freed_before_run(
            self.alloc.size,
            self.alloc.file.device(),
            self.base,
            self.addr,
            self.len,
            what,
        ))
    }
}

impl Sim {
    /// Adds to `msg` what `addr` is: inside or near an allocation, freed, or no device address.
    pub(super) fn explain(&self, msg: &mut String, addr: usize) {
        let allocs = self
            .mem()
            .allocs
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some((base, a)) = allocs.range(..=addr).next_back()
            && addr - base < a.size as usize
        {
            let _ = write!(
                msg,
                ": it is offset {} inside allocation {base:#x} ({} bytes, device {})",
                addr - base,
                a.size,
                a.file.device()
            );
            return;
        }
        drop(allocs);
        let freed = lock(&self.mem().freed);
        if let Some((base, size, dev, how)) = freed
            .iter()
            .rev()
            .find(|(b, s, _, _)| addr >= *b && addr - b < *s as usize)
        {
            let how = match how {
                Gone::Freed => "was freed",
                Gone::Closed => "this process closed (aclrtIpcMemClose ended its import)",
            };
            let _ = write!(
                msg,
                ": it is offset {} in allocation {base:#x} ({size} bytes, device {dev}), which \
                 {how}",
                addr - base
            );
            return;
        }
        drop(freed);
        let files = lock(&self.mem().files);
        if let Some(f) = files.values().find(|f| f.offset_of(addr).is_some()) {
            let _ = write!(
                msg,
                ": it is a device address of device {} that no allocation of this process \
                 covers",
                f.device()
            );
        } else {
            msg.push_str(": it is not a device address");
        }
    }

    /// Whether `addr` is a device address of this process (allocated, imported, freed or not).
    pub(super) fn is_device_addr(&self, addr: usize) -> bool {
        lock(&self.mem().files)
            .values()
            .any(|f| f.offset_of(addr).is_some())
    }

    /// The allocation of this process (its own or an import) that covers `addr`, and its
    /// device address: from this thread's cache of recent ones ([`recent`]), else from the
    /// table (and then cached); or that `addr` is host memory, or a device address in no
    /// allocation.
    #[inline(always)]
    pub(super) fn alloc_at(&self, addr: usize) -> At<'_> {
        // Read before the lookup: a removal after it makes the entry stale (`recent`).
        let tag = Tag {
            sim: self.inner.serial,
            epoch: self.mem().epoch(),
        };
        let r = match recent::find(tag, addr) {
            Some(r) => r,
            // A host address (a copy's host side) needs no look in the table.
            None if !self.mem().may_be_device(addr) => return At::Host,
            None => match self.alloc_in_table(tag, addr) {
                Some(r) => r,
                None => return At::Unallocated,
            },
        };
        // SAFETY: `r` was made from this `Sim`'s table (its serial is in the tag), and `self`
        // is borrowed for the lifetime handed out.
        At::Alloc(r.base, unsafe { r.view() })
    }

    /// [`alloc_at`](Self::alloc_at) from the table, kept in this thread's cache under `tag`.
    #[inline(never)]
    fn alloc_in_table(&self, tag: Tag, addr: usize) -> Option<recent::Recent> {
        let r = {
            let allocs = self
                .mem()
                .allocs
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            let (base, a) = covering(&allocs, addr)?;
            recent::Recent::of(base, a)
        };
        recent::put(tag, r);
        Some(r)
    }

    /// Checks the device range `[addr, addr + len)` against this process's allocations.
    /// `Ok(None)` if `addr` is no device address (host memory).
    #[inline(always)]
    pub(super) fn range_ref(
        &self,
        addr: usize,
        len: usize,
        what: &str,
    ) -> Result<Option<RangeRef<'_>>, SimError> {
        let (base, a) = match self.alloc_at(addr) {
            At::Alloc(base, a) => (base, a),
            At::Host => return Ok(None),
            At::Unallocated => return self.not_allocated(addr, len, what),
        };
        let off = checked_offset(&a, base, addr, len, what)?;
        Ok(Some(RangeRef {
            alloc: a,
            base,
            addr,
            off,
            len,
        }))
    }

    /// For a range at `addr` that no allocation covers: `Ok(None)` if `addr` is no device
    /// address (host memory), else 107000 saying what it is.
    #[cold]
    fn not_allocated<T>(&self, addr: usize, len: usize, what: &str) -> Result<Option<T>, SimError> {
        if !self.is_device_addr(addr) {
            return Ok(None);
        }
        let mut msg = format!(
            "{what} [{addr:#x}, {:#x}) ({len} bytes) is not in a live allocation",
            addr.wrapping_add(len)
        );
        self.explain(&mut msg, addr);
        Err(SimError::new(Error::ParamInvalid, msg))
    }

    /// [`range_ref`](Self::range_ref) holding the allocation's file (for a task that outlives
    /// the call).
    pub(crate) fn device_range(
        &self,
        addr: usize,
        len: usize,
        what: &str,
    ) -> Result<Option<DevRange>, SimError> {
        let Some(r) = self.range_ref(addr, len, what)? else {
            return Ok(None);
        };
        let file = self.mem().file_of(r.alloc.file)?;
        Ok(Some(DevRange {
            alloc: r.alloc.with_file(file),
            base: r.base,
            addr,
            off: r.off,
            len,
        }))
    }
}

/// What [`Sim::alloc_at`] found at an address.
pub(super) enum At<'s> {
    /// The allocation covering it, and the allocation's device address.
    Alloc(usize, AllocRef<'s>),
    /// In no device-memory file's reservation: host memory.
    Host,
    /// Maybe a device address (in a file's reservation, or not told without a lock), but in
    /// no allocation.
    Unallocated,
}

/// The allocation of `allocs` (a process's table, [`MemState::allocs`]) covering `addr`, and
/// its device address.
#[inline(always)]
pub(super) fn covering(allocs: &BTreeMap<usize, Alloc>, addr: usize) -> Option<(usize, &Alloc)> {
    let (&base, a) = allocs.range(..=addr).next_back()?;
    ((addr - base) < a.size as usize).then_some((base, a))
}

/// The arena offset of the range `[addr, addr + len)` of allocation `a` (at `base`, covering
/// `addr`): 107000 if the range ends past the allocation's end ([`leaves`]) or the allocation
/// is no longer the incarnation this process holds ([`stale`]). Every range check's end:
/// at the call ([`Sim::range_ref`]) and when an indirect task runs (`indirect`).
#[inline(always)]
pub(super) fn checked_offset(
    a: &AllocRef<'_>,
    base: usize,
    addr: usize,
    len: usize,
    what: &str,
) -> Result<u64, SimError> {
    let offset = addr - base;
    if len as u64 > a.size - offset as u64 {
        return Err(leaves(a, base, addr, len, what));
    }
    if !a.current() {
        return Err(stale(a, base, addr, len, what));
    }
    a.file
        .offset_of(addr)
        .ok_or_else(|| SimError::new(Error::DrvInternalError, "device address lost"))
}

/// 107000 for a range `[addr, addr + len)` at offset `addr - base` of allocation `a` (at
/// `base`) that ends past the allocation's end.
#[cold]
fn leaves(a: &AllocRef<'_>, base: usize, addr: usize, len: usize, what: &str) -> SimError {
    let offset = addr - base;
    SimError::new(
        Error::ParamInvalid,
        format!(
            "{what} [{addr:#x}, {:#x}) ({len} bytes) leaves allocation {base:#x} ({} bytes, \
             device {}): it starts at offset {offset} and ends {} bytes past the allocation's \
             end",
            addr.wrapping_add(len),
            a.size,
            a.file.device(),
            len as u64 - (a.size - offset as u64)
        ),
    )
}

/// 107000 for a range in allocation `a` (at `base`) whose shared slot is no longer the
/// incarnation this process holds.
#[cold]
fn stale(a: &AllocRef<'_>, base: usize, addr: usize, len: usize, what: &str) -> SimError {
    let why = if a.owner_freed() {
        "which its owner freed (an importer may not use memory after the owner's aclrtFree; \
         close the mapping with aclrtIpcMemClose)"
    } else {
        "which is no longer live (its owner freed it, or died, and it was reclaimed)"
    };
    SimError::new(
        Error::ParamInvalid,
        format!(
            "{what} [{addr:#x}, {:#x}) is in allocation {base:#x} ({} bytes, device {}), {why}",
            addr.wrapping_add(len),
            a.size,
            a.file.device()
        ),
    )
}

/// 107000 unless `count` is at most the caller's `max` (`what`: the C parameter's name, as
/// `destMax` of a copy or `maxCount` of a set).
pub(crate) fn within(count: usize, max: usize, what: &str) -> Result<(), SimError> {
    if count > max {
        return Err(SimError::new(
            Error::ParamInvalid,
            format!("count {count} is larger than {what} {max}"),
        ));
    }
    Ok(())
}

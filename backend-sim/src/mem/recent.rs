//! A thread's last few allocations looked up by a copy or set, so that a range in one of them
//! is checked without the allocation table's lock.
//!
//! Why: every device side of a copy was looked up under the table's read lock (two locked
//! read-modify-writes) and its entry cloned (the file's `Arc`: two more, the decrement when
//! the copy is done) — about 175 instructions a side, a third of what queuing a 64-byte
//! `aclrtMemcpyAsync` cost (callgrind), and 8 locked operations per copy. A hit here takes
//! none: the entry is plain data, its file a pointer.
//!
//! Validity ([`crate::tagged_cache`]): an entry is tagged with its `Sim`'s serial and with
//! the epoch of the `Sim`'s allocation table read before the lookup that found it; every
//! removal from the table (`aclrtFree`, `aclrtIpcMemClose` of an import, the end of the
//! session) bumps the epoch right after. So after a free, or a free and a new allocation at
//! the same address, the entry misses and the table answers, with the same errors as ever.
//! What the table does not know — the owner of an import freeing it, a dead owner's memory
//! reclaimed, the shared slot reused — is caught as before by the check of the slot's
//! incarnation that every lookup, hit or miss, is followed by.
//!
//! The file: an entry points at its allocation's [`MemFile`] without a reference. Its `Sim`
//! keeps every file its allocations were ever in until the `Sim` is dropped
//! ([`super::MemState`]'s `files` never shrinks), and an entry is only used by a call on
//! that `Sim` (same serial), which borrows it for the call: so the file is mapped for as long
//! as the reference handed out ([`Recent::view`]) lives. An entry of a `Sim` that is gone is
//! never used, and holds nothing.

use std::cell::RefCell;
use std::ptr::NonNull;

use super::file::MemFile;
use super::state::{Alloc, AllocOf, AllocRef};
use crate::tagged_cache::{self, Tag, Ways};

/// Entries per thread: a copy names two allocations, and a program usually works through a
/// few buffers in turn.
pub(crate) const WAYS: usize = 4;

/// One allocation of the table: its device address and what a check needs of it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Recent {
    pub(super) base: usize,
    alloc: AllocOf<NonNull<MemFile>>,
}

impl Recent {
    /// The table's entry `a` at device address `base`.
    pub(super) fn of(base: usize, a: &Alloc) -> Recent {
        Recent {
            base,
            alloc: a.with_file(NonNull::from(&*a.file)),
        }
    }

    /// Whether `addr` is inside the allocation.
    #[inline]
    fn covers(&self, addr: usize) -> bool {
        addr.wrapping_sub(self.base) < self.alloc.size as usize
    }

    /// The allocation, its file borrowed for `'s`.
    ///
    /// # Safety
    ///
    /// The entry was made from the table of a `Sim` that is borrowed for `'s` (its files are
    /// kept while it lives: see the module docs).
    #[inline]
    pub(super) unsafe fn view<'s>(&self) -> AllocRef<'s> {
        // SAFETY: the caller's contract: the file is one of the borrowed `Sim`'s files.
        self.alloc.with_file(unsafe { self.alloc.file.as_ref() })
    }
}

thread_local! {
    static CACHE: RefCell<Ways<Recent, WAYS>> = const { RefCell::new(Ways::new()) };
}

/// The allocation covering `addr` if this thread looked it up under `tag`.
#[inline]
pub(super) fn find(tag: Tag, addr: usize) -> Option<Recent> {
    tagged_cache::read(&CACHE, |c| c.find(tag, |r| r.covers(addr)).copied())
}

/// Keeps `r`, found under `tag` (the epoch read before the lookup).
pub(super) fn put(tag: Tag, r: Recent) {
    tagged_cache::write(&CACHE, |c| c.put(tag, |o| o.base == r.base, r));
}

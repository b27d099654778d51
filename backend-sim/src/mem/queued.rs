//! What a queued copy keeps of its two sides until it runs: for a device side, the allocation
//! it lies in and that allocation's address — the range itself is the task's own address and
//! count — so that the task is small enough for the allocator's fast path.
//!
//! The task is boxed on the enqueuing thread and freed on the stream's worker. glibc serves
//! such a hand-over cheaply for blocks of up to 120 bytes (its per-thread caches and fast
//! bins); a larger block is freed under the arena's lock into its unsorted bin and found
//! again by the next `malloc` after a search. With both sides as checked ranges the copy's
//! task took 152 bytes, and `malloc` plus `free` cost about 340 instructions of the 1,080
//! that queuing and running a 64-byte copy took (callgrind); with these sides it takes 104.

use acl_notify_core::Error;

use super::{Alloc, Side};
use crate::error::SimError;

/// A side of a queued copy.
#[derive(Debug)]
pub(super) enum QueuedSide {
    /// Host memory at this address (the caller's contract keeps it valid until the task ran).
    Host(usize),
    /// Device memory in `alloc`, whose device address is `base`.
    Device { alloc: Alloc, base: usize },
}

// Two sides and the task's three words fit the allocator's fast path (see the module docs).
const _: () = assert!(2 * std::mem::size_of::<QueuedSide>() + 3 * 8 <= 120);

impl From<Side> for QueuedSide {
    fn from(side: Side) -> QueuedSide {
        match side {
            Side::Host(addr) => QueuedSide::Host(addr),
            Side::Device(r) => QueuedSide::Device {
                alloc: r.alloc,
                base: r.base,
            },
        }
    }
}

impl QueuedSide {
    /// At run time: is the range `[addr, addr + len)` still in the same allocation?
    pub(super) fn still(&self, addr: usize, len: usize, what: &str) -> Result<(), SimError> {
        match self {
            QueuedSide::Device { alloc, base } if !alloc.current() => {
                Err(freed_before_run(alloc, *base, addr, len, what))
            }
            _ => Ok(()),
        }
    }

    /// The bytes of `[addr, addr + len)`, for the copy (checked when queued).
    pub(super) fn ptr(&self, addr: usize, len: usize) -> Result<*mut u8, SimError> {
        match self {
            QueuedSide::Host(a) => Ok(std::ptr::with_exposed_provenance_mut(*a)),
            QueuedSide::Device { alloc, .. } => {
                let off = alloc
                    .file
                    .offset_of(addr)
                    .ok_or_else(|| SimError::new(Error::DrvInternalError, "device address lost"))?;
                Ok(alloc.file.bytes(off, len))
            }
        }
    }

    /// After the task touched it: 507899 if its file was found cut short (the bytes went to
    /// or came from a private zero page; see [`crate::lost`]).
    pub(super) fn intact(&self) -> Result<(), SimError> {
        match self {
            QueuedSide::Host(_) => Ok(()),
            QueuedSide::Device { alloc, .. } => alloc.file.intact(),
        }
    }
}

/// 107000 for a queued task whose range `[addr, addr + len)` in allocation `base` was freed
/// before the task ran.
pub(super) fn freed_before_run(
    alloc: &Alloc,
    base: usize,
    addr: usize,
    len: usize,
    what: &str,
) -> SimError {
    SimError::new(
        Error::ParamInvalid,
        format!(
            "{what} [{addr:#x}, {:#x}) is in allocation {base:#x} ({} bytes, device {}), which \
             was freed before the queued task ran",
            addr + len,
            alloc.size,
            alloc.file.device()
        ),
    )
}

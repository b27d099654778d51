//! What a queued copy or set keeps of its sides until it runs: for a device side, the
//! allocation's slot (file, id, generation) and what an error message names — the range
//! itself is the task's own address and count — so that the task is small enough for the
//! allocator's fast path, and holds no reference count.
//!
//! The task is boxed on the enqueuing thread and freed on the stream's worker. glibc serves
//! such a hand-over cheaply for blocks of up to 120 bytes (its per-thread caches and fast
//! bins); a larger block is freed under the arena's lock into its unsorted bin and found
//! again by the next `malloc` after a search. With both sides as checked ranges the copy's
//! task took 152 bytes, and `malloc` plus `free` cost about 340 instructions of the 1,080
//! that queuing and running a 64-byte copy took (callgrind).
//!
//! The device-memory file is not held by the task but by the stream
//! ([`crate::stream::Stream::keep_alive`], called before the task is queued): an
//! `Arc<MemFile>` per side made the enqueuing thread increment, and the worker on another CPU
//! decrement, the same counter for every copy, and the worker's reads of the file's fields
//! shared that line. Bursts of 64 async copies of 64 KiB: 0.84–0.85× of `memcpy` with the
//! references, 0.89× without the worker's decrements (one A/B, same binary, slow minutes);
//! 1.08× against 1.11× in fast ones.

use std::ptr::NonNull;
use std::sync::Arc;

use acl_notify_core::Error;

use super::file::MemFile;
use super::host::{HostBlock, HostTable};
use super::reserved::MapMark;
use super::state::AllocOf;
use super::{Alloc, Side};
use crate::error::SimError;

/// A device-memory file that a stream keeps alive for its queued tasks (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(super) struct KeptFile(NonNull<MemFile>);

// SAFETY: a shared reference to a `MemFile` (which is `Sync`), valid while the stream that
// keeps the file exists; the tasks that hold it run on that stream's worker only.
unsafe impl Send for KeptFile {}

impl KeptFile {
    fn get(&self) -> &MemFile {
        // SAFETY: the stream the task is queued on keeps the file (`Stream::keep_alive`,
        // called before the task was queued), and a task runs only while its stream's queue
        // exists (see the module docs).
        unsafe { self.0.as_ref() }
    }
}

/// A side of a queued copy or set.
#[derive(Debug)]
pub(super) enum QueuedSide {
    /// Host memory at this address: in `aclrtMallocHost` memory, the block, held until the
    /// task has run (see [`super::host`]); elsewhere the caller's contract keeps it valid.
    Host(usize, Option<Arc<HostBlock>>),
    /// Device memory in allocation `alloc`, whose device address is `base`.
    Device {
        alloc: AllocOf<KeptFile>,
        base: usize,
    },
    /// A side reached through a mapping of a reserved range (`aclrtMapMem`): the side in the
    /// physical allocation, and the mapping's mark, checked first (boxed: rare, and the
    /// task stays small).
    Mapped(Box<(QueuedSide, Arc<MapMark>)>),
}

// Two sides and the task's four words fit the allocator's fast path (see the module docs).
const _: () = assert!(2 * std::mem::size_of::<QueuedSide>() + 4 * 8 <= 120);

impl QueuedSide {
    /// `side` as a queued task keeps it (a host side in `aclrtMallocHost` memory holds its
    /// block, found in `host`); the stream the task goes to must keep the file ([`file_of`])
    /// alive.
    pub(super) fn new(side: &Side<'_>, host: &HostTable) -> QueuedSide {
        match side {
            Side::Host(addr) => QueuedSide::Host(*addr, host.block_at(*addr)),
            Side::Device(r) => QueuedSide::Device {
                alloc: r.alloc.with_file(KeptFile(NonNull::from(r.alloc.file))),
                base: r.base,
            },
        }
    }

    /// This side reached through the mapping `mark` stands for, if any.
    pub(super) fn through(self, mark: Option<Arc<MapMark>>) -> QueuedSide {
        match mark {
            Some(m) => QueuedSide::Mapped(Box::new((self, m))),
            None => self,
        }
    }

    /// At run time: is the range `[addr, addr + len)` still in the same allocation (or
    /// `aclrtMallocHost` block), and still mapped where it was reached through a mapping?
    pub(super) fn still(&self, addr: usize, len: usize, what: &str) -> Result<(), SimError> {
        match self {
            QueuedSide::Mapped(m) => {
                m.1.still(addr, len, what)?;
                m.0.still(addr, len, what)
            }
            QueuedSide::Host(_, Some(block)) => block.still(addr, len, what),
            QueuedSide::Device { alloc: a, base }
                if !Alloc::is_current(a.file.get(), a.id, a.generation, a.imported) =>
            {
                Err(freed_before_run(
                    a.size,
                    a.file.get().device(),
                    *base,
                    addr,
                    len,
                    what,
                ))
            }
            _ => Ok(()),
        }
    }

    /// The bytes of `[addr, addr + len)`, for the copy (checked when queued).
    pub(super) fn ptr(&self, addr: usize, len: usize) -> Result<*mut u8, SimError> {
        match self {
            QueuedSide::Mapped(m) => m.0.ptr(addr, len),
            QueuedSide::Host(a, _) => Ok(std::ptr::with_exposed_provenance_mut(*a)),
            QueuedSide::Device { alloc, .. } => {
                let file = alloc.file.get();
                let off = file
                    .offset_of(addr)
                    .ok_or_else(|| SimError::new(Error::DrvInternalError, "device address lost"))?;
                Ok(file.bytes(off, len))
            }
        }
    }

    /// After the task touched it: 507899 if its file was found cut short (the bytes went to
    /// or came from a private zero page; see [`crate::lost`]).
    pub(super) fn intact(&self) -> Result<(), SimError> {
        match self {
            QueuedSide::Mapped(m) => m.0.intact(),
            QueuedSide::Host(..) => Ok(()),
            QueuedSide::Device { alloc, .. } => alloc.file.get().intact(),
        }
    }
}

/// The file a queued task on `side` uses, which its stream must keep alive.
pub(super) fn file_of<'s>(side: &Side<'s>) -> Option<&'s MemFile> {
    match side {
        Side::Host(_) => None,
        Side::Device(r) => Some(r.alloc.file),
    }
}

/// 107000 for a queued task whose range `[addr, addr + len)` in allocation `base` (`size`
/// bytes on `device`) was freed before the task ran.
pub(super) fn freed_before_run(
    size: u64,
    device: u32,
    base: usize,
    addr: usize,
    len: usize,
    what: &str,
) -> SimError {
    SimError::new(
        Error::ParamInvalid,
        format!(
            "{what} [{addr:#x}, {:#x}) is in allocation {base:#x} ({size} bytes, device \
             {device}), which was freed before the queued task ran",
            addr + len,
        ),
    )
}

//! The table behind [`super::vmm`]: this process's reserved ranges of device addresses,
//! the mappings in them, and its physical allocations (what a `Sim`'s memory state keeps).
//! Plain data under one lock; the rules are [`super::vmm`]'s.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use acl_notify_core::Error;
use acl_notify_core::key::ExportKey;

use crate::error::SimError;
use crate::locks::lock;

/// A physical allocation of this `Sim` (`aclrtDrvMemHandle`): an id, never reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PhysMem(pub u64);

/// The page size of a physical allocation, which fixes its granularity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum PageSize {
    /// The device's normal page: 4 KiB (hicann/runtime's FAQ on IPC page alignment,
    /// `docs/zh/FAQ/`: normal pages 4K, huge pages 2M or 1G; no figure per SoC found).
    Normal,
    /// A huge page: 2 MiB (CANN documents ACL_MEM_HUGE and ACL_MEM_P2P_HUGE as 2 MiB
    /// granular, and ACL_HBM_MEM_NORMAL as allocated as huge pages).
    Huge,
    /// A 1 GiB page (ACL_MEM_HUGE1G and its HBM and P2P forms).
    Huge1G,
}

impl PageSize {
    /// The page size a code of [`code`](Self::code) stands for.
    pub(super) fn from_code(c: u32) -> Option<PageSize> {
        Some(match c {
            0 => PageSize::Normal,
            1 => PageSize::Huge,
            2 => PageSize::Huge1G,
            _ => return None,
        })
    }

    /// Its code in an allocation's slot.
    pub(super) fn code(self) -> u32 {
        self as u32
    }

    /// The granularity, in bytes: what sizes and addresses of mappings are multiples of.
    pub const fn bytes(self) -> u64 {
        match self {
            PageSize::Normal => 4 << 10,
            PageSize::Huge => 2 << 20,
            PageSize::Huge1G => 1 << 30,
        }
    }
}

/// One physical allocation.
#[derive(Clone, Debug)]
pub(super) struct Physical {
    /// Its device address (in the file's reservation; private).
    pub(super) addr: usize,
    /// Its size: the size asked for rounded up to the granularity (mappings are this size).
    pub(super) size: u64,
    pub(super) device: u32,
    pub(super) page: PageSize,
    /// The caller's code of its properties ([`super::vmm::Props`]), answered back.
    pub(super) props: u32,
    /// Mappings of it.
    pub(super) maps: u32,
    /// Live handles of it (`aclrtMallocPhysical`'s or the import's, and one per
    /// `aclrtMemRetainAllocationHandle`): at 0 it is released, at its last unmap if mapped.
    pub(super) handles: u32,
    /// Its export (by the allocating process).
    pub(super) export: Option<ExportKey>,
    /// Imported by key (else allocated here).
    pub(super) imported: Option<ExportKey>,
}

/// A location that `aclrtMemSetAccess` gives access to: the host, or a device by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessLoc {
    /// `ACL_MEM_LOCATION_TYPE_HOST` (id 0).
    Host,
    /// `ACL_MEM_LOCATION_TYPE_DEVICE` and its id.
    Device(u32),
}

/// The access a location has to a mapping (`aclrtMemAccessFlags`; the values are CANN's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Access {
    /// `ACL_RT_MEM_ACCESS_FLAGS_NONE`.
    None = 0,
    /// `ACL_RT_MEM_ACCESS_FLAGS_READ`.
    Read = 1,
    /// `ACL_RT_MEM_ACCESS_FLAGS_READWRITE`.
    ReadWrite = 3,
}

impl Access {
    /// The access of CANN's flag value, if it is one.
    pub fn from_flags(f: u64) -> Option<Access> {
        Some(match f {
            0 => Access::None,
            1 => Access::Read,
            3 => Access::ReadWrite,
            _ => return None,
        })
    }
}

impl std::fmt::Display for AccessLoc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccessLoc::Host => f.write_str("the host"),
            AccessLoc::Device(d) => write!(f, "device {d}"),
        }
    }
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::None => "ACL_RT_MEM_ACCESS_FLAGS_NONE",
            Access::Read => "ACL_RT_MEM_ACCESS_FLAGS_READ",
            Access::ReadWrite => "ACL_RT_MEM_ACCESS_FLAGS_READWRITE",
        })
    }
}

/// One mapping: `len` bytes of physical allocation `phys`, whose device address is `addr`,
/// and the access each location was given to it (its owner device's, read-write, from the
/// start).
#[derive(Clone, Debug)]
pub(super) struct Mapping {
    pub(super) phys: PhysMem,
    pub(super) addr: usize,
    pub(super) len: usize,
    pub(super) access: BTreeMap<AccessLoc, Access>,
    /// Held by the tasks queued through it, which find it unmapped when they run.
    pub(super) mark: Arc<MapMark>,
}

/// What a queued copy or set that went through a mapping keeps of it (see
/// [`super::queued`]): where the mapping was, and whether `aclrtUnmapMem` took it away since.
/// The task was given the physical allocation's address when queued; without this it would
/// write the physical memory after the unmap, where a device's copy engine faults on the
/// unmapped address. The task fails with 107000, as one whose allocation was freed before it
/// ran does ([`super::queued::freed_before_run`]).
#[derive(Debug)]
pub(super) struct MapMark {
    /// The mapping's address and length, and the device address of what it maps.
    va: usize,
    len: usize,
    phys: usize,
    unmapped: AtomicBool,
}

impl MapMark {
    pub(super) fn new(va: usize, len: usize, phys: usize) -> Arc<MapMark> {
        Arc::new(MapMark {
            va,
            len,
            phys,
            unmapped: AtomicBool::new(false),
        })
    }

    /// `aclrtUnmapMem` (or the session's end) took the mapping away.
    pub(super) fn unmap(&self) {
        self.unmapped.store(true, Ordering::Release);
    }

    /// At run time of a queued task on `[addr, addr + len)` (physical addresses, in this
    /// mapping when queued): 107000 naming the range by its mapped address if the mapping
    /// is gone.
    pub(super) fn still(&self, addr: usize, len: usize, what: &str) -> Result<(), SimError> {
        if !self.unmapped.load(Ordering::Acquire) {
            return Ok(());
        }
        let at = self.va.wrapping_add(addr.wrapping_sub(self.phys));
        Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "{what} [{at:#x}, {:#x}) was in the mapping at {:#x} ({} bytes), which was \
                 unmapped (aclrtUnmapMem) before the queued task ran; the task touched nothing \
                 (synchronize the stream before unmapping)",
                at.wrapping_add(len),
                self.va,
                self.len
            ),
        ))
    }
}

/// One reserved range and its mappings by address.
#[derive(Debug, Default)]
pub(super) struct Reservation {
    pub(super) size: usize,
    pub(super) maps: BTreeMap<usize, Mapping>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) reserves: BTreeMap<usize, Reservation>,
    pub(super) phys: HashMap<PhysMem, Physical>,
    pub(super) next: u64,
}

/// This process's reserved ranges and physical allocations (kept in its `MemState`).
#[derive(Debug, Default)]
pub(crate) struct Vmm {
    pub(super) state: Mutex<State>,
    /// Live reserved ranges: 0 means no copy needs translating (read without the lock).
    pub(super) reserved: AtomicUsize,
}

impl Vmm {
    /// Unreserves every range (the session ends; its allocations are freed with the rest);
    /// returns the device addresses of the physical allocations it made (not imported).
    pub(super) fn clear(&self) -> HashSet<usize> {
        let mut st = lock(&self.state);
        for (base, r) in std::mem::take(&mut st.reserves) {
            for m in r.maps.values() {
                m.mark.unmap();
            }
            unreserve(base, r.size);
        }
        let own = st
            .phys
            .drain()
            .filter(|(_, p)| p.imported.is_none())
            .map(|(_, p)| p.addr)
            .collect();
        self.reserved.store(0, Relaxed);
        own
    }
}

/// Reserves `len` bytes aligned to `align` (a power of two): `len + align` reserved, the
/// ends cut off.
pub(super) fn reserve_aligned(len: usize, align: usize) -> Result<usize, SimError> {
    let total = len
        .checked_add(align)
        .ok_or_else(|| SimError::new(Error::ParamInvalid, "size too large"))?;
    let p = mmap_none(std::ptr::null_mut(), total, 0)?;
    let start = p.next_multiple_of(align);
    if start > p {
        unreserve(p, start - p);
    }
    let tail = p + total - (start + len);
    if tail > 0 {
        unreserve(start + len, tail);
    }
    Ok(start)
}

/// A `PROT_NONE` reservation of `len` bytes (at `hint` with `flags`), 207001 when there is
/// no address space ([`reserve_none`]).
pub(super) fn mmap_none(
    hint: *mut libc::c_void,
    len: usize,
    flags: libc::c_int,
) -> Result<usize, SimError> {
    // SAFETY: the callers pass no flag or MAP_FIXED_NOREPLACE, which never replaces a
    // mapping.
    unsafe { reserve_none(hint, len, flags) }.map_err(|e| {
        SimError::new(
            Error::MemoryAllocation,
            format!("cannot reserve {len} bytes of device addresses: {e}"),
        )
    })
}

/// A private anonymous `PROT_NONE` reservation of `len` bytes at `hint` with `flags`
/// (`MAP_NORESERVE`: it costs address space only), its address: how the simulator reserves
/// device addresses, for a reserved range (`aclrtReserveMemAddress`), a device-memory file's
/// arena ([`super::file`]) and an import of another host's memory ([`super::remote`]);
/// [`unreserve`] gives it back.
///
/// # Safety
///
/// With `MAP_FIXED` in `flags`, `[hint, hint + len)` is the caller's own, which nothing uses
/// any more (it is replaced). Without it (or with `MAP_FIXED_NOREPLACE`) no existing mapping
/// is affected.
pub(super) unsafe fn reserve_none(
    hint: *mut libc::c_void,
    len: usize,
    flags: libc::c_int,
) -> std::io::Result<usize> {
    // SAFETY: a private anonymous reservation; the caller's contract for MAP_FIXED.
    let p = unsafe {
        libc::mmap(
            hint,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(p.expose_provenance())
}

/// Gives reserved range `[base, base + size)` back.
pub(super) fn unreserve(base: usize, size: usize) {
    // SAFETY: a range [`reserve_none`] reserved that its owner gives back once (`vmm` removed
    // it from the table, a `MemFile` or `Reservation` is dropped); nothing of the process's
    // own lives there.
    unsafe { libc::munmap(std::ptr::with_exposed_provenance_mut(base), size) };
}

//! Allocation: device memory (`aclrtMalloc` and its variants, `aclrtFree`: CANN's rounding,
//! the placement in the device's memory file, the frees remembered for messages about stale
//! pointers) and host memory for copies (`aclrtMallocHost`, `aclrtFreeHost`).

use acl_notify_core::{BackendError as _, Error};

use super::components;
use super::file::{ALLOC_ALIGN, Importers};
use super::state::{Alloc, Gone};
use crate::Sim;
use crate::error::SimError;
use crate::locks::lock;

/// How many of this process's frees are remembered, to say "freed" rather than "never
/// allocated" about a stale pointer.
const FREED_KEPT: usize = 256;

/// How CANN rounds an allocation's size (`GetAlignedAndPaddingSize` and `DevMalloc` in
/// hicann/runtime `src/acl/aclrt_impl/memory.cpp` and `src/runtime/api/impl/api_impl.cc`).
/// The simulator then rounds to [`ALLOC_ALIGN`] so that allocations start aligned. The
/// rounding decides how much capacity an allocation takes; the bytes a copy may touch are
/// always the ones asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// `aclrtMalloc` and `aclrtMallocCached`: 32 bytes of padding added, then up to a
    /// multiple of 32.
    Padded,
    /// `aclrtMallocAlign32`, `aclrtMallocWithCfg`, and `aclrtMalloc` with a 1 GiB huge-page
    /// policy: up to a multiple of 32, no padding.
    Align32,
}

impl Rounding {
    /// `aclrtMalloc`'s rounding for `policy`: padded, except for
    /// `ACL_MEM_MALLOC_HUGE1G_ONLY` (6) and `_HUGE1G_ONLY_P2P` (7).
    pub fn of_malloc(policy: u32) -> Rounding {
        match policy {
            6 | 7 => Rounding::Align32,
            _ => Rounding::Padded,
        }
    }
}

/// The arena bytes an allocation of `size` takes.
pub(super) fn span_of(size: u64, rounding: Rounding) -> Option<u64> {
    let pad = match rounding {
        Rounding::Padded => 32,
        Rounding::Align32 => 0,
    };
    let rounded = size.checked_add(pad + 32 - 1)? / 32 * 32;
    rounded.checked_next_multiple_of(ALLOC_ALIGN)
}

impl Sim {
    /// `aclrtMalloc`: `size` bytes (> 0) of device memory on `device`; returns the device
    /// pointer. `policy` is recorded only (every policy is served by the same memory), and
    /// decides the rounding ([`Rounding::of_malloc`]).
    ///
    /// Errors: 107000 size 0 or too large; 107001 bad device; 207001 out of device memory (no
    /// free range, no free allocation slot, or no room in `/dev/shm`).
    pub fn malloc(&self, device: u32, size: usize, policy: u32) -> Result<usize, SimError> {
        self.malloc_rounded(device, size, policy, Rounding::of_malloc(policy))
    }

    /// [`malloc`](Self::malloc) with the size rounded as `rounding` says (the variants of
    /// `aclrtMalloc`). The bits of `policy` the simulator uses to mark its own kinds of
    /// allocation in the slot (physical, managed, pool) are dropped.
    pub fn malloc_rounded(
        &self,
        device: u32,
        size: usize,
        policy: u32,
        rounding: Rounding,
    ) -> Result<usize, SimError> {
        let marks = components::PHYS_MARK | components::MANAGED_MARK | components::POOL_MARK;
        self.malloc_marked(device, size, policy & !marks, rounding)
    }

    /// [`malloc_rounded`](Self::malloc_rounded) with `policy` kept as given (a physical
    /// allocation's mark, [`vmm`]).
    pub(super) fn malloc_marked(
        &self,
        device: u32,
        size: usize,
        policy: u32,
        rounding: Rounding,
    ) -> Result<usize, SimError> {
        self.mem_checked(|| {
            self.device_ok(device)?;
            if size == 0 {
                return Err(SimError::new(Error::ParamInvalid, "size is 0"));
            }
            let size = size as u64;
            let span = span_of(size, rounding)
                .filter(|s| *s <= self.mem().capacity)
                .ok_or_else(|| {
                    SimError::new(
                        Error::MemoryAllocation,
                        format!(
                            "cannot allocate {size} bytes on device {device}: more than its \
                             capacity of {} bytes (set by {})",
                            self.mem().capacity,
                            crate::ENV_DEVICE_MEMORY
                        ),
                    )
                })?;
            Ok(self.place(device, size, span, policy)?.0)
        })
    }

    /// Places an allocation of `size` bytes taking `span` bytes of `device`'s memory, owned by
    /// this process, and enters it in the process's allocations: its device address and
    /// entry (`aclrtMalloc`'s and a memory pool's blocks, [`pool`]). 207001 when the device
    /// has no room.
    pub(super) fn place(
        &self,
        device: u32,
        size: u64,
        span: u64,
        policy: u32,
    ) -> Result<(usize, Alloc), SimError> {
        self.place_aligned(device, size, span, (policy, ALLOC_ALIGN))
    }

    /// [`place`](Self::place) at an arena offset that is a multiple of `align` (managed
    /// memory's 2 MiB pages, [`managed`]).
    pub(super) fn place_aligned(
        &self,
        device: u32,
        size: u64,
        span: u64,
        policy: (u32, u64),
    ) -> Result<(usize, Alloc), SimError> {
        let f = self
            .mem_file(self.inner.server_id, device, true)?
            .ok_or_else(|| SimError::new(Error::DrvInternalError, "device-memory file vanished"))?;
        let me = self.mem_identity();
        let l = f.lock()?;
        let placed = match f.allocate(&l, size, span, policy, me) {
            Ok(p) => p,
            Err(e) if e.kind() == Error::MemoryAllocation => {
                // Memory of dead processes first, then once more.
                if f.reclaim_dead(&l) == 0 {
                    return Err(e);
                }
                f.allocate(&l, size, span, policy, me)?
            }
            Err(e) => return Err(e),
        };
        drop(l);
        let addr = f.addr(placed.off);
        let alloc = Alloc {
            file: f,
            id: placed.id,
            generation: placed.generation,
            size,
            imported: false,
            used_on: device,
        };
        self.mem().insert(addr, alloc.clone());
        Ok((addr, alloc))
    }

    /// `aclrtFree`: frees an allocation of this process by its device pointer. Processes that
    /// imported it keep their mappings until they close them, but their copies and sets
    /// through them fail from now on (107000, "its owner freed it"; SPEC §8).
    ///
    /// Errors: 107000 not the start of a live allocation of this process (with what it is).
    pub fn free(&self, ptr: usize) -> Result<(), SimError> {
        self.free_as(ptr, Importers::Refused)
    }

    /// [`free`](Self::free), leaving the processes that import the allocation what
    /// `importers` says (also the free of a physical allocation, [`vmm`]).
    pub(super) fn free_as(&self, ptr: usize, importers: Importers) -> Result<(), SimError> {
        self.mem_checked(|| {
            self.refuse_pool_block(ptr, "aclrtFree")?;
            let a = self.mem().remove_if(ptr, |a| {
                if !a.imported {
                    return Ok(());
                }
                Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "{ptr:#x} is an imported allocation ({} bytes, device {}): close it \
                         with aclrtIpcMemClose, not aclrtFree",
                        a.size,
                        a.file.device()
                    ),
                ))
            })?;
            let Some(a) = a else {
                let mut msg =
                    format!("{ptr:#x} is not the start of a live allocation of this process");
                if let Some(m) = self.remote_import_at(ptr) {
                    msg = format!("{ptr:#x} is in {m}: close it with aclrtIpcMemClose");
                } else {
                    self.explain(&mut msg, ptr);
                }
                return Err(SimError::new(Error::ParamInvalid, msg));
            };
            self.forget_managed(ptr, &a);
            self.free_owned_shared(&a, importers)?;
            self.note_freed(ptr, a.size, a.file.device(), Gone::Freed);
            Ok(())
        })
    }

    /// Remembers a freed (or closed) range, for messages about stale pointers.
    pub(super) fn note_freed(&self, addr: usize, size: u64, device: u32, how: Gone) {
        let mut freed = lock(&self.mem().freed);
        if freed.len() == FREED_KEPT {
            freed.pop_front();
        }
        freed.push_back((addr, size, device, how));
    }

    /// `aclrtMallocHost`: `size` bytes of page-aligned host memory.
    ///
    /// Errors: 107000 size 0; 207001 no memory.
    pub fn malloc_host(&self, size: usize) -> Result<usize, SimError> {
        if size == 0 {
            return Err(SimError::new(Error::ParamInvalid, "size is 0"));
        }
        self.mem().host.alloc(size).ok_or_else(|| {
            SimError::new(
                Error::MemoryAllocation,
                format!("cannot allocate {size} bytes of host memory"),
            )
        })
    }

    /// `aclrtFreeHost`: frees memory of [`malloc_host`](Self::malloc_host); a queued task that
    /// would still touch it fails when it runs (107000) instead of touching freed memory.
    ///
    /// Errors: 107000 not an `aclrtMallocHost` pointer of this process.
    pub fn free_host(&self, ptr: usize) -> Result<(), SimError> {
        if self.mem().host.free(ptr) {
            return Ok(());
        }
        let what = if self.is_device_addr(ptr) {
            "a device address (free it with aclrtFree)"
        } else {
            "not memory of aclrtMallocHost in this process (freed already, or from elsewhere)"
        };
        Err(SimError::new(
            Error::ParamInvalid,
            format!("{ptr:#x} is {what}"),
        ))
    }
}

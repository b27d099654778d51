//! Virtual memory management, CANN's `aclrtReserveMemAddress` family (hicann/runtime
//! `docs/zh/api_ref/11-04_virtual_memory_management.md`): device address ranges reserved in
//! the process, physical allocations that have no address yet, mappings of physical
//! allocations into reserved ranges, and the sharing of physical allocations with other
//! processes by a 64-bit shareable handle.
//!
//! # How it rides on device memory
//!
//! - A reserved range is address space of the process reserved `PROT_NONE`, as every device
//!   pointer's is ([`crate::mem`]): host code that dereferences it faults, as on an NPU.
//! - A physical allocation is an ordinary allocation of the device's memory file
//!   ([`Sim::malloc_rounded`]): the same slots, pages, capacity accounting and reclaim of dead
//!   processes. Its address in the file's reservation stays private; callers hold a
//!   [`PhysMem`] id, never reused in the `Sim`.
//! - A mapping says which physical allocation backs `[va, va + len)`. The copy and set paths
//!   translate the addresses of reserved ranges into the physical allocations' own before
//!   their usual checks (`Sim::vmm_memcpy`, `Sim::vmm_memset`; the translation is
//!   `vmm/translate.rs`): a copy that spans two mappings becomes one copy per piece, all
//!   pieces checked before any byte moves, and an address of a reserved range that no
//!   mapping covers is 107000.
//! - A queued copy or set is given the physical addresses when it is queued, and holds the
//!   mark of each mapping it went through (`reserved::MapMark`): unmapped before the task
//!   runs, the task fails (107000) and touches nothing, where a device would fault on the
//!   unmapped address; so do value tasks and reduces.
//! - Sharing with other processes is [`super::shareable`]: IPC memory of the whole physical
//!   allocation, by a 64-bit shareable handle.
//!
//! # CANN's rules followed (the documentation above; the driver's own checks are not in
//! hicann/runtime, whose `NpuDriver` passes the driver's codes on: an invalid value is
//! 107000, an invalid handle 107017, out of memory 207001, `errcode_manage.cc`)
//!
//! - `aclrtMapMem` maps a whole physical allocation (`size` equal to its size, `offset` 0),
//!   at an address and size aligned to its granularity; one reserved range maps memory of
//!   one device, and not both allocated and imported memory.
//! - `aclrtFreePhysical` of a mapped allocation succeeds and frees it at its last
//!   `aclrtUnmapMem`; `aclrtReleaseMemAddress` of a range that still maps something is
//!   refused (ours: 107000; CANN says to unmap first).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

use acl_notify_core::{Error, Soc};

use super::file::Importers;
pub use super::reserved::{Access, AccessLoc, PageSize, PhysMem};
use super::reserved::{
    MapMark, Mapping, Physical, Reservation, State, Vmm, mmap_none, reserve_aligned, unreserve,
};
use super::{Rounding, lock};
use crate::Sim;
use crate::error::SimError;

/// The caller's code of a physical allocation's properties (the C library's: CANN's page and
/// memory types), kept with it and in its slot, so that an importer reads them too.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Props(pub u8);

pub(super) use super::components::PHYS_MARK;
pub(super) use translate::Piece;

mod translate;

/// Whether `soc` has virtual memory management (every SoC but IPV350, per CANN's
/// documentation of each function).
pub fn has_vmm(soc: Soc) -> bool {
    soc != Soc::IPV350
}

/// Whether `soc` has 1 GiB pages: CANN documents ACL_MEM_HUGE1G on Atlas A2 and A3
/// (Ascend910B, Ascend910_93) only, and ACL_HBM_MEM_HUGE1G (`hbm`) on those and Ascend950.
pub fn has_huge1g(soc: Soc, hbm: bool) -> bool {
    matches!(soc, Soc::Ascend910B | Soc::Ascend910_93)
        || (hbm && matches!(soc, Soc::Ascend950PR | Soc::Ascend950DT))
}

/// CANN's range for an address asked of `aclrtReserveMemAddress`: 16 TiB to 24 TiB.
const EXPECT_RANGE: std::ops::Range<usize> = (16 << 40)..(24 << 40);

pub(super) fn invalid(msg: impl Into<String>) -> SimError {
    SimError::new(Error::ParamInvalid, msg.into())
}

pub(super) fn not_live(h: PhysMem) -> SimError {
    SimError::new(
        Error::InvalidHandle,
        format!(
            "physical memory handle {} is not a live handle of this process (freed already, or \
             never allocated here)",
            h.0
        ),
    )
}

impl Sim {
    pub(super) fn vmm(&self) -> &Vmm {
        &self.mem().vmm
    }

    /// 207000 unless this SoC has virtual memory management.
    pub fn require_vmm(&self, what: &str) -> Result<(), SimError> {
        self.require_soc(has_vmm(self.inner.soc), what)
    }

    /// `aclrtReserveMemAddress`: reserves `size` bytes of device addresses (rounded up to a
    /// page), at `expect` if given, else where the system likes; aligned to 2 MiB, or 1 GiB
    /// from 1 GiB on (CANN's rule for an asked address). Nothing is mapped yet: a copy into it
    /// is 107000 until [`vmm_map`](Self::vmm_map).
    ///
    /// Errors: 207000 no virtual memory management on this SoC; 107000 size 0, `alignment`
    /// not 0 (CANN: reserved, only 0), an asked address outside 16–24 TiB, unaligned, in use,
    /// or asked on Ascend950 (NULL only there); 207001 no address space left.
    pub fn vmm_reserve(
        &self,
        size: usize,
        alignment: usize,
        expect: Option<usize>,
    ) -> Result<usize, SimError> {
        self.require_vmm("reserving device addresses")?;
        if size == 0 {
            return Err(invalid("size is 0"));
        }
        if alignment != 0 {
            return Err(invalid(format!(
                "alignment {alignment}: reserved, CANN takes only 0"
            )));
        }
        let align = if size < 1 << 30 { 2 << 20 } else { 1 << 30 };
        let len = size
            .checked_next_multiple_of(crate::mapfile::PAGE)
            .ok_or_else(|| invalid(format!("size {size} is too large")))?;
        let base = match expect {
            Some(at) => {
                if matches!(self.inner.soc, Soc::Ascend950PR | Soc::Ascend950DT) {
                    return Err(invalid(format!(
                        "expectPtr {at:#x}: {} takes only NULL (the system chooses)",
                        self.inner.soc.name()
                    )));
                }
                if !EXPECT_RANGE.contains(&at)
                    || at.checked_add(len).is_none_or(|e| e > EXPECT_RANGE.end)
                {
                    return Err(invalid(format!(
                        "expectPtr {at:#x}: an asked range must lie in [16 TiB, 24 TiB)"
                    )));
                }
                if !at.is_multiple_of(align) {
                    return Err(invalid(format!(
                        "expectPtr {at:#x} is not aligned to {align:#x} (a multiple of 2 MiB below \
                         1 GiB of size, of 1 GiB from there on)"
                    )));
                }
                reserve_at(at, len)?
            }
            None => reserve_aligned(len, align)?,
        };
        let mut st = lock(&self.vmm().state);
        st.reserves.insert(
            base,
            Reservation {
                size: len,
                maps: BTreeMap::new(),
            },
        );
        self.vmm().reserved.fetch_add(1, Relaxed);
        Ok(base)
    }

    /// `aclrtReleaseMemAddress`: gives a reserved range back, by its start.
    ///
    /// Errors: 107000 not the start of a reserved range, or one that still maps physical
    /// memory (unmap it first).
    pub fn vmm_release(&self, va: usize) -> Result<(), SimError> {
        let mut st = lock(&self.vmm().state);
        let Some(r) = st.reserves.get(&va) else {
            return Err(invalid(match reservation_at(&st, va) {
                Some((base, _)) => format!(
                    "{va:#x} is offset {} in reserved range {base:#x}: release it by its start",
                    va - base
                ),
                None => format!("{va:#x} is not a range of aclrtReserveMemAddress of this process"),
            }));
        };
        if !r.maps.is_empty() {
            return Err(invalid(format!(
                "reserved range {va:#x} ({} bytes) still maps {} physical allocation(s), the \
                 first at {:#x}: aclrtUnmapMem them before releasing it",
                r.size,
                r.maps.len(),
                r.maps.keys().next().copied().unwrap_or(va)
            )));
        }
        let size = r.size;
        st.reserves.remove(&va);
        self.vmm().reserved.fetch_sub(1, Relaxed);
        drop(st);
        unreserve(va, size);
        Ok(())
    }

    /// `aclrtMemGetAllocationGranularity`: the granularity of `page` on `device` (the minimum
    /// and the recommended one are the same here).
    ///
    /// Errors: 207000; 107001 no such device.
    pub fn vmm_granularity(&self, device: u32, page: PageSize) -> Result<u64, SimError> {
        self.require_vmm("querying the allocation granularity")?;
        self.device_ok(device)?;
        Ok(page.bytes())
    }

    /// `aclrtMallocPhysical`: `size` bytes of `device`'s memory with pages of `page`, not
    /// mapped anywhere yet; its pages are reserved now. A size that is not a multiple of the
    /// granularity is rounded up to one, and the allocation is that large (mapped, exported
    /// and answered with that size): CANN documents the rounding (hicann/runtime
    /// `docs/zh/api_ref/25-02_Enumerations.md`, aclrtMemAttr) and asks for aligned sizes only
    /// to save memory (`11-04_virtual_memory_management.md`, aclrtMallocPhysical).
    /// `props` is answered back by [`vmm_properties`](Self::vmm_properties), here and to the
    /// processes that import it.
    ///
    /// Errors: 207000; 107001 no such device; 107000 size 0; 207001 out of device memory.
    pub fn vmm_malloc_physical(
        &self,
        device: u32,
        size: usize,
        page: PageSize,
        props: Props,
    ) -> Result<PhysMem, SimError> {
        self.require_vmm("allocating physical memory")?;
        self.device_ok(device)?;
        if size == 0 {
            return Err(invalid("size is 0"));
        }
        let span = (size as u64)
            .checked_next_multiple_of(page.bytes())
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| {
                SimError::new(
                    Error::MemoryAllocation,
                    format!("cannot allocate {size} bytes of physical memory"),
                )
            })?;
        let policy = PHYS_MARK | page.code() << 8 | u32::from(props.0);
        let addr = self.malloc_marked(device, span, policy, Rounding::Align32)?;
        Ok(self.vmm_insert(Physical {
            addr,
            size: span as u64,
            device,
            page,
            props: u32::from(props.0),
            maps: 0,
            handles: 1,
            export: None,
            imported: None,
        }))
    }

    pub(super) fn vmm_insert(&self, p: Physical) -> PhysMem {
        let mut st = lock(&self.vmm().state);
        st.next += 1;
        let h = PhysMem(st.next);
        st.phys.insert(h, p);
        h
    }

    /// `aclrtFreePhysical`: frees a handle of a physical allocation; with its last handle the
    /// allocation is freed (or an imported one closed), or at its last unmap if it is still
    /// mapped, as CANN documents. Other processes that imported it keep it until they free
    /// their handles.
    ///
    /// Errors: 107017 not a live handle (a second free).
    pub fn vmm_free_physical(&self, h: PhysMem) -> Result<(), SimError> {
        let mut st = lock(&self.vmm().state);
        let p = st
            .phys
            .get_mut(&h)
            .filter(|p| p.handles > 0)
            .ok_or_else(|| not_live(h))?;
        p.handles -= 1;
        if p.handles > 0 || p.maps > 0 {
            return Ok(());
        }
        let p = st.phys.remove(&h).ok_or_else(|| not_live(h))?;
        drop(st);
        self.vmm_release_physical(&p)
    }

    fn vmm_release_physical(&self, p: &Physical) -> Result<(), SimError> {
        match &p.imported {
            // Another host's memory (a FABRIC handle's import, in cluster mode) is closed
            // in the cluster's table, the rest in this process's.
            Some(key) if self.mem_close_remote(key) => Ok(()),
            Some(key) => self.close_import(key).map(|_| ()),
            // Importers keep it: CANN frees shared physical memory once every process
            // sharing it has freed its handle.
            None => self.free_as(p.addr, Importers::Served),
        }
    }

    /// `aclrtMapMem`: maps physical allocation `h`, whole (`size` its size, `offset` 0), at
    /// `va` in a reserved range.
    ///
    /// Errors: 107017 `h` not live; 107000 offset not 0, `va` in no reserved range, a size
    /// other than the allocation's, `va` or `size` not a multiple of its granularity, a range
    /// that leaves the reserved range or overlaps a mapping, a reserved range mapping memory
    /// of two devices or both allocated and imported memory.
    pub fn vmm_map(
        &self,
        va: usize,
        size: usize,
        offset: usize,
        h: PhysMem,
    ) -> Result<(), SimError> {
        let mut st = lock(&self.vmm().state);
        let p = st
            .phys
            .get(&h)
            .filter(|p| p.handles > 0)
            .cloned()
            .ok_or_else(|| not_live(h))?;
        if offset != 0 {
            return Err(invalid(format!(
                "offset {offset}: CANN maps physical memory from offset 0 only"
            )));
        }
        let (base, r) = reserved(&st, va)?;
        let rsize = r.size;
        if size as u64 != p.size {
            return Err(invalid(format!(
                "size {size} is not the size of the physical allocation ({} bytes): it is \
                 mapped whole",
                p.size
            )));
        }
        let g = p.page.bytes() as usize;
        if !va.is_multiple_of(g) || !size.is_multiple_of(g) {
            return Err(invalid(format!(
                "address {va:#x} and size {size} must be multiples of the allocation's \
                 granularity, {g} bytes (aclrtMemGetAllocationGranularity)"
            )));
        }
        if size > rsize - (va - base) {
            return Err(invalid(format!(
                "[{va:#x}, +{size}) leaves reserved range {base:#x} ({rsize} bytes)"
            )));
        }
        let before = r.maps.range(..=va).next_back();
        let after = r.maps.range(va..).next();
        for (at, m) in before.into_iter().chain(after) {
            if *at < va + size && va < at + m.len {
                return Err(invalid(format!(
                    "[{va:#x}, +{size}) overlaps the mapping at {at:#x} ({} bytes): unmap it first",
                    m.len
                )));
            }
        }
        if let Some(other) = r.maps.values().find_map(|m| st.phys.get(&m.phys)) {
            if other.device != p.device {
                return Err(invalid(format!(
                    "reserved range {base:#x} maps memory of device {} already: one reserved \
                     range maps the memory of one device",
                    other.device
                )));
            }
            if other.imported.is_some() != p.imported.is_some() {
                return Err(invalid(format!(
                    "reserved range {base:#x} maps {} memory already: one reserved range does not \
                     map both allocated and imported memory",
                    if other.imported.is_some() {
                        "imported"
                    } else {
                        "allocated"
                    }
                )));
            }
        }
        // The owner (the device the memory was allocated or imported on) reads and writes
        // from the start (hicann/runtime `pkg_inc/driver/ascend_hal_base.h`, halMemSetAccess).
        let m = Mapping {
            phys: h,
            addr: p.addr,
            len: size,
            access: BTreeMap::from([(AccessLoc::Device(p.device), Access::ReadWrite)]),
            mark: MapMark::new(va, size, p.addr),
        };
        if let Some(r) = st.reserves.get_mut(&base) {
            r.maps.insert(va, m);
        }
        if let Some(p) = st.phys.get_mut(&h) {
            p.maps += 1;
        }
        Ok(())
    }

    /// `aclrtMemMapNoAccess`: as [`vmm_map`](Self::vmm_map), but no location, the owner
    /// included, has access to the mapping until `aclrtMemSetAccess` gives it (hicann/runtime
    /// `include/external/acl/acl_rt.h`: the mapping's access is set afterwards, and
    /// `src/runtime/api/impl/api_impl.cc`, `MemMapNoAccess`, passes it to the driver as is).
    pub fn vmm_map_no_access(
        &self,
        va: usize,
        size: usize,
        offset: usize,
        h: PhysMem,
    ) -> Result<(), SimError> {
        self.vmm_map(va, size, offset, h)?;
        if let Some((_, m)) = mapping_mut(&mut lock(&self.vmm().state), va) {
            m.access.clear();
        }
        Ok(())
    }

    /// `aclrtMemSetAccess`: gives each location of `descs` its access to the mapping that is
    /// exactly `[va, va + size)`; all are checked before any is kept. A location keeps the
    /// access it was given first (its owner device: read-write from the mapping on); the same
    /// access again is accepted.
    ///
    /// Rules of hicann/runtime `pkg_inc/driver/ascend_hal_base.h` (halMemSetAccess: the range
    /// is a mapping's; a location set again with another type is DRV_ERROR_BUSY, which
    /// `src/runtime/core/src/common/errcode_manage.cc` does not map, so 507899).
    ///
    /// Errors: 207000 no virtual memory management on this SoC; 107000 no descriptor,
    /// `[va, va + size)` not a mapping, a device id this `Sim` does not have; 507899 a location
    /// given another access before.
    pub fn vmm_set_access(
        &self,
        va: usize,
        size: usize,
        descs: &[(AccessLoc, Access)],
    ) -> Result<(), SimError> {
        self.require_vmm("aclrtMemSetAccess")?;
        if descs.is_empty() {
            return Err(invalid("count is 0: no access descriptor"));
        }
        let devices = self.inner.devices;
        let mut st = lock(&self.vmm().state);
        let m = mapping_mut(&mut st, va)
            .filter(|(start, m)| *start == va && m.len == size)
            .map(|(_, m)| m)
            .ok_or_else(|| {
                invalid(format!(
                    "[{va:#x}, +{size}) is not a mapping (aclrtMapMem): access is set on a \
                     mapping's whole range"
                ))
            })?;
        for (i, &(loc, acc)) in descs.iter().enumerate() {
            if let AccessLoc::Device(d) = loc
                && d >= devices
            {
                return Err(invalid(format!(
                    "desc[{i}]: device {d}, of {devices} devices"
                )));
            }
            let before = m
                .access
                .get(&loc)
                .copied()
                .or_else(|| descs[..i].iter().find(|(l, _)| *l == loc).map(|d| d.1));
            if let Some(had) = before.filter(|had| *had != acc) {
                return Err(SimError::new(
                    Error::DrvInternalError,
                    format!(
                        "desc[{i}]: {loc} has {had} access to the mapping at {va:#x} \
                         already; it is not set again to {acc}"
                    ),
                ));
            }
        }
        m.access.extend(descs.iter().copied());
        Ok(())
    }

    /// `aclrtMemGetAccess`: the access `loc` was given to the mapping `va` is in; `None`
    /// when it was given none (CANN answers `MEM_ACCESS_TYPE_MAX` then, halMemGetAccess).
    ///
    /// Errors: 207000 no virtual memory management on this SoC; 107000 `va` in no mapping.
    pub fn vmm_get_access(&self, va: usize, loc: AccessLoc) -> Result<Option<Access>, SimError> {
        self.require_vmm("aclrtMemGetAccess")?;
        let mut st = lock(&self.vmm().state);
        let (_, m) = mapping_mut(&mut st, va).ok_or_else(|| {
            invalid(format!(
                "{va:#x} is in no mapping of a reserved range (aclrtMapMem)"
            ))
        })?;
        Ok(m.access.get(&loc).copied())
    }

    /// `aclrtUnmapMem`: removes the mapping that starts at `va`; a physical allocation freed
    /// while mapped is freed at its last unmap. A copy or set queued through the mapping that
    /// has not run yet fails when it runs.
    ///
    /// Errors: 107000 `va` is not the start of a mapping.
    pub fn vmm_unmap(&self, va: usize) -> Result<(), SimError> {
        let mut st = lock(&self.vmm().state);
        let (base, r) = reserved_mut(&mut st, va)?;
        let Some(m) = r.maps.remove(&va) else {
            let inside = r
                .maps
                .range(..=va)
                .next_back()
                .filter(|(at, m)| va < *at + m.len)
                .map(|(at, _)| *at);
            return Err(invalid(match inside {
                Some(at) => format!(
                    "{va:#x} is offset {} in the mapping at {at:#x}: unmap it by its start",
                    va - at
                ),
                None => format!("nothing is mapped at {va:#x} (reserved range {base:#x})"),
            }));
        };
        m.mark.unmap();
        let Some(p) = st.phys.get_mut(&m.phys) else {
            return Ok(());
        };
        p.maps = p.maps.saturating_sub(1);
        if !(p.handles == 0 && p.maps == 0) {
            return Ok(());
        }
        let p = st.phys.remove(&m.phys);
        drop(st);
        p.map_or(Ok(()), |p| self.vmm_release_physical(&p))
    }

    /// `aclrtMemRetainAllocationHandle`: another handle of the physical allocation mapped at
    /// `va` (the start of a mapping); each handle is freed on its own.
    ///
    /// Errors: 107000 no mapping starts at `va`.
    pub fn vmm_retain(&self, va: usize) -> Result<PhysMem, SimError> {
        let mut st = lock(&self.vmm().state);
        let m = reservation_at(&st, va)
            .and_then(|(_, r)| r.maps.get(&va).cloned())
            .ok_or_else(|| {
                invalid(format!(
                    "no mapping starts at {va:#x}: aclrtMemRetainAllocationHandle takes the \
                     address aclrtMapMem mapped"
                ))
            })?;
        let p = st.phys.get_mut(&m.phys).ok_or_else(|| not_live(m.phys))?;
        p.handles += 1;
        Ok(m.phys)
    }

    /// `aclrtMemGetAllocationPropertiesFromHandle`: the device and the properties the
    /// allocation was made with ([`vmm_malloc_physical`](Self::vmm_malloc_physical); an
    /// import has its exporter's).
    ///
    /// Errors: 107017 `h` not live.
    pub fn vmm_properties(&self, h: PhysMem) -> Result<(u32, PageSize, Props), SimError> {
        let st = lock(&self.vmm().state);
        let p = st
            .phys
            .get(&h)
            .filter(|p| p.handles > 0)
            .ok_or_else(|| not_live(h))?;
        Ok((p.device, p.page, Props(p.props as u8)))
    }

    /// `aclrtMemGetAddressRange`: the block `addr` is in, as (start, size): a mapping of a
    /// reserved range, an allocation of `aclrtMalloc` (or an import; the size asked for) or of
    /// `aclrtMallocHost`.
    ///
    /// Errors: 107000 an address of none of them (an unmapped part of a reserved range, freed
    /// memory, an address of no allocation).
    pub fn vmm_address_range(&self, addr: usize) -> Result<(usize, usize), SimError> {
        {
            let st = lock(&self.vmm().state);
            if let Some((base, r)) = reservation_at(&st, addr) {
                return r
                    .maps
                    .range(..=addr)
                    .next_back()
                    .filter(|(at, m)| addr < *at + m.len)
                    .map(|(at, m)| (*at, m.len))
                    .ok_or_else(|| {
                        invalid(format!(
                            "{addr:#x} is in reserved range {base:#x}, but nothing is mapped there"
                        ))
                    });
            }
        }
        let allocs = self
            .mem()
            .allocs
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((base, a)) = allocs.range(..=addr).next_back()
            && addr - base < a.size as usize
        {
            return Ok((*base, a.size as usize));
        }
        drop(allocs);
        if let Some(b) = self.mem().host.block_at(addr) {
            return Ok(b.span());
        }
        let mut msg = format!("{addr:#x} is in no memory block of this process");
        self.explain(&mut msg, addr);
        Err(invalid(msg))
    }
}

/// The mapping `addr` is in, and its start.
fn mapping_mut(st: &mut State, addr: usize) -> Option<(usize, &mut Mapping)> {
    reservation_at_mut(st, addr)?
        .1
        .maps
        .range_mut(..=addr)
        .next_back()
        .filter(|(start, m)| addr - **start < m.len)
        .map(|(start, m)| (*start, m))
}

/// The reserved range that covers `addr`, if any.
fn reservation_at(st: &State, addr: usize) -> Option<(usize, &Reservation)> {
    st.reserves
        .range(..=addr)
        .next_back()
        .filter(|(b, r)| addr - **b < r.size)
        .map(|(b, r)| (*b, r))
}

/// [`reservation_at`], to change.
fn reservation_at_mut(st: &mut State, addr: usize) -> Option<(usize, &mut Reservation)> {
    st.reserves
        .range_mut(..=addr)
        .next_back()
        .filter(|(b, r)| addr - **b < r.size)
        .map(|(b, r)| (*b, r))
}

/// The reserved range that covers `va`, and its start; 107000 if none does.
fn reserved(st: &State, va: usize) -> Result<(usize, &Reservation), SimError> {
    reservation_at(st, va).ok_or_else(|| no_reservation(va))
}

/// [`reserved`], to change.
fn reserved_mut(st: &mut State, va: usize) -> Result<(usize, &mut Reservation), SimError> {
    reservation_at_mut(st, va).ok_or_else(|| no_reservation(va))
}

fn no_reservation(va: usize) -> SimError {
    invalid(format!(
        "{va:#x} is in no range of aclrtReserveMemAddress of this process"
    ))
}

/// Reserves `len` bytes at `at` exactly; 107000 if any of it is in use.
fn reserve_at(at: usize, len: usize) -> Result<usize, SimError> {
    let p = mmap_none(
        std::ptr::with_exposed_provenance_mut(at),
        len,
        libc::MAP_FIXED_NOREPLACE,
    )
    .map_err(|e| {
        invalid(format!(
            "expectPtr {at:#x}: the range is not free ({})",
            e.message()
        ))
    })?;
    if p != at {
        // An old kernel without MAP_FIXED_NOREPLACE treats it as a hint.
        unreserve(p, len);
        return Err(invalid(format!("expectPtr {at:#x}: the range is in use")));
    }
    Ok(p)
}

#[cfg(test)]
mod tests;

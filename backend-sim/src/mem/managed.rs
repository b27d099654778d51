//! Managed (unified) memory (`aclrtMemAllocManaged`, `aclrtMemManagedAdvise`,
//! `aclrtMemManagedGetAttr[s]`, `aclrtMemManagedPrefetch[Batch]Async`): memory that host code
//! and the device's tasks both address at the same pointer.
//!
//! # What it is here
//!
//! A managed allocation is an allocation of the device's memory file like any other — in the
//! one allocation table, counted by `aclrtGetMemInfo`, copied and set by the checked paths,
//! freed by `aclrtFree` — placed at a 2 MiB-aligned arena offset and sized up to 2 MiB pages
//! as CANN sizes it (hicann/runtime `src/runtime/api/impl/api_impl.cc`, `ManagedMemAlloc`:
//! `RT_MEMORY_ATTACH_GLOBAL` rounds to 2 MiB). What differs is its device addresses: where
//! other device memory is a `PROT_NONE` reservation that host code faults on, a managed
//! allocation's range of the reservation is mapped to the file's own pages, readable and
//! writable, so host code reads and writes the very bytes the stream tasks copy and set. Its
//! slot carries `MANAGED_MARK` (so `aclrtPointerGetAttributes` says
//! `ACL_MEM_LOCATION_TYPE_MANAGED`, and a copy whose kind calls it host memory is served). At
//! free the range becomes `PROT_NONE` again before the slot is released. A forked child does
//! not inherit the range's mapping (`MADV_DONTFORK`, `MemFile::open_to_host`): the memory is
//! the parent's, and through a copy of the shared mapping a child's writes would change the
//! parent's bytes (a child uses nothing it inherited: README, `fork()`).
//!
//! The simulated device has one memory, so there is no migration: prefetching moves no byte
//! and a preferred location places none. What a program can observe is kept truly: the advice
//! each 2 MiB page was given and where it was last prefetched to, as
//! `aclrtMemManagedGetAttr` reads them back (hicann/runtime
//! `docs/zh/api_ref/25-02_Enumerations.md`, `aclrtMemManagedRangeAttribute`: the value of a
//! range whose pages disagree is -2 / `ACL_MEM_LOCATIONTYPE_INVALID`). A prefetch is a task
//! on its stream (CANN queues it as a host function, `src/runtime/api/impl/api_impl_uvm.cc`,
//! whose driver call records the location when the stream reaches it): its location shows
//! once the stream ran it.
//!
//! The driver's own checks (the range is managed memory, 2 MiB-aligned sizes) run in CANN when
//! the stream reaches a prefetch, and their failure is only logged
//! (`src/runtime/core/src/uvm/uvm_callback.cc`); the simulator makes them at the call and
//! answers 107000, where the caller sees them.

use std::sync::Arc;

use acl_notify_core::{Error, RawStream};

use super::file::ALLOC_ALIGN;
pub use super::managed_table::{Advice, INVALID, MANAGED_PAGE, Place, RangeAttr};
use super::managed_table::{ManagedRange, PageAdvice, attr_values, forget};
use super::state::{Alloc, AllocRef};
use crate::Sim;
use crate::error::SimError;
use crate::job::SimJob;
use crate::locks::lock;

pub(super) use super::components::MANAGED_MARK;

/// 107000 with `msg`.
fn invalid(msg: String) -> SimError {
    SimError::new(Error::ParamInvalid, msg)
}

/// What a prefetch task records when its stream reaches it: the allocation (address,
/// incarnation), the range's offset in it and length, and the location.
type PrefetchRec = (usize, u32, u64, u64, Place);

impl Sim {
    /// `aclrtMemAllocManaged`: `size` bytes (> 0) of managed memory on `device`, rounded up to
    /// 2 MiB pages; returns the address host code and tasks both use.
    ///
    /// Errors: 107000 size 0; 107001 bad device; 207001 out of device memory.
    pub fn malloc_managed(&self, device: u32, size: u64) -> Result<usize, SimError> {
        self.mem_checked(|| {
            self.device_ok(device)?;
            if size == 0 {
                return Err(invalid("size is 0".into()));
            }
            let span = size
                .checked_next_multiple_of(MANAGED_PAGE)
                .filter(|s| *s <= self.mem().capacity)
                .ok_or_else(|| {
                    SimError::new(
                        Error::MemoryAllocation,
                        format!(
                            "cannot allocate {size} bytes of managed memory on device {device}: \
                             more than its capacity of {} bytes (set by {})",
                            self.mem().capacity,
                            crate::ENV_DEVICE_MEMORY
                        ),
                    )
                })?;
            debug_assert!(MANAGED_PAGE.is_multiple_of(ALLOC_ALIGN));
            let (addr, a) = self.place_aligned(device, span, span, (MANAGED_MARK, MANAGED_PAGE))?;
            // A placed allocation's address is in its file; were it not, an error and the
            // allocation freed, not a panic.
            let Some(off) = a.file.offset_of(addr) else {
                let _ = self.free(addr);
                return Err(SimError::new(
                    Error::DrvInternalError,
                    format!("managed memory at {addr:#x} is in no device file (address lost)"),
                ));
            };
            if let Err(e) = a.file.open_to_host(off, span) {
                let _ = self.free(addr);
                return Err(SimError::new(
                    Error::MemoryAllocation,
                    format!("cannot map {span} bytes of managed memory for the host: {e}"),
                ));
            }
            let pages = vec![PageAdvice::default(); (span / MANAGED_PAGE) as usize];
            let generation = a.generation;
            lock(&self.mem().managed).insert(
                addr,
                ManagedRange {
                    generation,
                    off,
                    span,
                    pages,
                },
            );
            Ok(addr)
        })
    }

    /// Whether `a` is managed memory.
    pub(super) fn is_managed(a: &AllocRef<'_>) -> bool {
        a.file
            .slot(a.id)
            .is_some_and(|s| s.flag_bits() & MANAGED_MARK != 0)
    }

    /// The managed allocation `[ptr, ptr + len)` lies in: its address, incarnation and the
    /// offset of `ptr` in it. 107000 if the range is not all managed memory of this process.
    fn managed_range(
        &self,
        ptr: usize,
        len: u64,
        what: &str,
    ) -> Result<(usize, u32, u64), SimError> {
        let not_managed = |is: String| {
            invalid(format!(
                "{what} {ptr:#x} (+{len}) is not managed memory (aclrtMemAllocManaged): {is}"
            ))
        };
        let r = self
            .device_range(ptr, len as usize, what)?
            .ok_or_else(|| not_managed("it is host memory".into()))?;
        if !Self::is_managed(&r.alloc.view()) {
            return Err(not_managed(format!(
                "it is in device allocation {:#x} ({} bytes, device {})",
                r.base,
                r.alloc.size,
                r.alloc.file.device()
            )));
        }
        Ok((r.base, r.alloc.generation, (ptr - r.base) as u64))
    }

    /// 107000 unless `size` is whole 2 MiB pages (CANN documents it for advice and prefetches).
    fn whole_pages(size: u64, what: &str) -> Result<(), SimError> {
        if size == 0 || !size.is_multiple_of(MANAGED_PAGE) {
            return Err(invalid(format!(
                "{what} {size} is not a multiple of 2 MiB, as CANN requires of managed memory"
            )));
        }
        Ok(())
    }

    /// `f` on the advice of the pages of the managed range `[ptr, ptr + size)`, the table
    /// locked: 107000 as [`managed_range`](Self::managed_range), or if the range was freed
    /// between that look-up and the lock.
    fn managed_pages<R>(
        &self,
        ptr: usize,
        size: u64,
        f: impl FnOnce(&mut [PageAdvice]) -> R,
    ) -> Result<R, SimError> {
        let (base, generation, off) = self.managed_range(ptr, size, "range")?;
        let mut t = lock(&self.mem().managed);
        let m = t
            .get_mut(&base)
            .filter(|m| m.generation == generation)
            .ok_or_else(|| invalid(format!("{ptr:#x} was freed meanwhile")))?;
        Ok(f(m.pages_mut(off, size)))
    }

    /// `aclrtMemManagedAdvise`: gives the pages of `[ptr, ptr + size)` (managed memory, `size`
    /// whole 2 MiB pages) `advice`.
    ///
    /// Errors: 107000 the range is not managed memory of this process, or `size` not whole
    /// pages.
    pub fn managed_advise(&self, ptr: usize, size: u64, advice: Advice) -> Result<(), SimError> {
        self.mem_checked(|| {
            Self::whole_pages(size, "size")?;
            self.managed_pages(ptr, size, |pages| {
                for p in pages {
                    match advice {
                        Advice::SetReadMostly => p.read_mostly = true,
                        Advice::UnsetReadMostly => p.read_mostly = false,
                        Advice::SetPreferred(l) => p.preferred = Some(l),
                        Advice::UnsetPreferred => p.preferred = None,
                        Advice::SetAccessedBy(l) if !p.accessed_by.contains(&l) => {
                            p.accessed_by.push(l)
                        }
                        Advice::SetAccessedBy(_) => {}
                        Advice::UnsetAccessedBy(l) => p.accessed_by.retain(|x| *x != l),
                    }
                }
            })
        })
    }

    /// `aclrtMemManagedGetAttr`: attribute `attr` of the managed range `[ptr, ptr + size)`, as
    /// `data_size` bytes of 32-bit integers (4 for every attribute but `AccessedBy`, which
    /// takes a positive multiple of 4).
    ///
    /// Errors: 107000 the range is not managed memory of this process, `data_size` wrong.
    pub fn managed_attr(
        &self,
        attr: RangeAttr,
        ptr: usize,
        size: u64,
        data_size: usize,
    ) -> Result<Vec<i32>, SimError> {
        self.mem_checked(|| {
            let n = data_size / 4;
            let ok = match attr {
                RangeAttr::AccessedBy => data_size > 0 && data_size.is_multiple_of(4),
                _ => data_size == 4,
            };
            if !ok {
                let want = match attr {
                    RangeAttr::AccessedBy => "a positive multiple of 4 (an int32 per location)",
                    _ => "4 (one int32)",
                };
                return Err(invalid(format!(
                    "dataSize {data_size} for attribute {attr:?}: it must be {want}"
                )));
            }
            if size == 0 {
                return Err(invalid("size is 0".into()));
            }
            self.managed_pages(ptr, size, |pages| attr_values(pages, attr, n))
        })
    }

    /// `aclrtMemManagedPrefetch[Batch]Async`: queues on `stream` the prefetch of each managed
    /// range `(ptr, size)` (whole 2 MiB pages) to its location; when the stream reaches it,
    /// the ranges' pages record the location (`ACL_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_*`).
    /// The simulated device has one memory: no byte moves.
    ///
    /// Errors: 107000 a range that is not managed memory of this process, a size not whole
    /// pages (`index` in the message for a batch); the stream's (107003, 107017, ...). The
    /// task fails the stream (107000) if a range was freed before it ran.
    pub fn managed_prefetch(
        &self,
        ranges: &[(usize, u64, Place)],
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            let mut recs: Vec<PrefetchRec> = Vec::with_capacity(ranges.len());
            for (i, &(ptr, size, place)) in ranges.iter().enumerate() {
                let what = if ranges.len() == 1 {
                    "size".to_string()
                } else {
                    format!("sizes[{i}]")
                };
                Self::whole_pages(size, &what)?;
                let (base, generation, off) = self.managed_range(ptr, size, "range")?;
                recs.push((base, generation, off, size, place));
            }
            let table = Arc::clone(&self.mem().managed);
            let task = Box::new(move |_: &crate::stream::TaskCtx| {
                let mut t = lock(&table);
                for &(base, generation, off, size, place) in &recs {
                    let Some(m) = t.get_mut(&base).filter(|m| m.generation == generation) else {
                        return Err(invalid(format!(
                            "managed memory {:#x} (+{size}) was freed before its prefetch ran",
                            base + off as usize
                        )));
                    };
                    for p in m.pages_mut(off, size) {
                        p.last_prefetch = Some(place);
                    }
                }
                Ok(())
            });
            self.enqueue_checked(stream, SimJob::Bulk(task), |_, _| Ok(()))
        })
    }

    /// Before the free of `a` at `addr` (still live): a managed allocation's host mapping is
    /// undone and its advice dropped. Nothing for other memory.
    pub(super) fn forget_managed(&self, addr: usize, a: &Alloc) {
        forget(&self.mem().managed, addr, &a.file);
    }
}

#[cfg(test)]
mod tests {
    use acl_notify_core::{BackendError as _, StreamOps as _, SyncWait};

    use super::*;
    use crate::NamespaceGuard;
    use crate::mem::MemcpyKind;
    use crate::mem::location::MemLocation;

    fn open(tag: &str) -> (Sim, NamespaceGuard) {
        crate::mem::tests::test_sim(
            "managed",
            tag,
            acl_notify_core::Soc::Ascend910B,
            2,
            64 << 20,
        )
    }

    fn host<'a>(addr: usize, len: usize) -> &'a mut [u8] {
        // SAFETY: the tests pass live managed memory of at least `len` bytes.
        unsafe { std::slice::from_raw_parts_mut(std::ptr::with_exposed_provenance_mut(addr), len) }
    }

    #[test]
    fn host_and_device_address_the_same_bytes_counted_as_device_memory() {
        let (sim, _ns) = open("bytes");
        let (free0, total) = sim.mem_info(0).unwrap();
        let m = sim.malloc_managed(0, 100).unwrap();
        let (free1, _) = sim.mem_info(0).unwrap();
        assert_eq!(
            free0 - free1,
            MANAGED_PAGE,
            "rounded up to a 2 MiB page ({total})"
        );
        assert!(matches!(
            sim.mem_location(m + 5),
            MemLocation::Device { device: 0, managed: true, page_size, .. } if page_size == 2 << 20
        ));
        // The host writes, a copy of any kind reads; a set on the device, the host reads.
        host(m, 4).copy_from_slice(&[1, 2, 3, 4]);
        let d = sim.malloc(0, 4096, 0).unwrap();
        let mut back = [0u8; 4];
        for kind in [
            MemcpyKind::DeviceToDevice,
            MemcpyKind::HostToDevice,
            MemcpyKind::Default,
        ] {
            sim.memset(d, 4096, 0, 4096).unwrap();
            // SAFETY: device ranges checked; `back` is 4 bytes.
            unsafe {
                sim.memcpy(d, 4096, m, 4, kind).unwrap();
                sim.memcpy(
                    back.as_mut_ptr().expose_provenance(),
                    4,
                    d,
                    4,
                    MemcpyKind::DeviceToHost,
                )
                .unwrap();
            }
            assert_eq!(back, [1, 2, 3, 4], "{kind:?}");
        }
        sim.memset(m + 8, 8, 0x5A, 8).unwrap();
        assert_eq!(host(m + 8, 8), &[0x5A; 8]);
        // The whole page is the allocation (CANN sizes it so); past it is refused.
        sim.memset(m, MANAGED_PAGE as usize, 7, MANAGED_PAGE as usize)
            .unwrap();
        let e = sim
            .memset(m + MANAGED_PAGE as usize - 4, 8, 7, 8)
            .unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{e}");
        // IPC export is refused; free releases the memory and the host mapping.
        let e = sim.ipc_mem_export(m, 4096, true).unwrap_err();
        assert!(e.message().contains("managed memory"), "{e}");
        let before = sim.mem_info(0).unwrap().0;
        sim.free(m).unwrap();
        assert_eq!(sim.mem_info(0).unwrap().0 - before, MANAGED_PAGE);
        assert!(matches!(sim.mem_location(m), MemLocation::Unregistered));
        assert_eq!(sim.free(m).unwrap_err().kind(), Error::ParamInvalid);
        // A new allocation at the same place is device memory again: not mapped for the host.
        let again = sim.malloc(0, 4096, 0).unwrap();
        assert!(matches!(
            sim.mem_location(again),
            MemLocation::Device { managed: false, .. }
        ));
        sim.free(again).unwrap();
        sim.free(d).unwrap();
    }

    #[test]
    fn advice_reads_back_per_page_and_disagreeing_pages_read_invalid() {
        let (sim, _ns) = open("advice");
        let m = sim.malloc_managed(0, 3 * MANAGED_PAGE).unwrap();
        let page = MANAGED_PAGE;
        let all = 3 * page;
        let get = |attr, at: usize, len, n| sim.managed_attr(attr, at, len, n).unwrap();
        use RangeAttr::*;
        assert_eq!(get(ReadMostly, m, all, 4), [0]);
        assert_eq!(get(PreferredLocation, m, all, 4), [INVALID]);
        assert_eq!(get(PreferredLocationType, m, all, 4), [0]);
        assert_eq!(get(AccessedBy, m, all, 8), [INVALID, INVALID]);
        sim.managed_advise(m, all, Advice::SetReadMostly).unwrap();
        sim.managed_advise(m, page, Advice::UnsetReadMostly)
            .unwrap();
        assert_eq!(get(ReadMostly, m, all, 4), [0]);
        assert_eq!(get(ReadMostly, m + page as usize, 2 * page, 4), [1]);
        sim.managed_advise(m, 2 * page, Advice::SetPreferred(Place::Device(1)))
            .unwrap();
        sim.managed_advise(
            m + 2 * page as usize,
            page,
            Advice::SetPreferred(Place::Host),
        )
        .unwrap();
        assert_eq!(get(PreferredLocation, m, 2 * page, 4), [1]);
        assert_eq!(get(PreferredLocationType, m + 100, 10, 4), [1]);
        assert_eq!(get(PreferredLocationId, m, 2 * page, 4), [1]);
        assert_eq!(
            get(PreferredLocation, m, all, 4),
            [INVALID],
            "pages disagree"
        );
        assert_eq!(get(PreferredLocation, m + 2 * page as usize, page, 4), [-1]);
        assert_eq!(
            get(PreferredLocationType, m + 2 * page as usize, page, 4),
            [2]
        );
        assert_eq!(
            get(PreferredLocationId, m + 2 * page as usize, page, 4),
            [INVALID]
        );
        sim.managed_advise(m, all, Advice::SetAccessedBy(Place::Device(0)))
            .unwrap();
        sim.managed_advise(m, page, Advice::SetAccessedBy(Place::Host))
            .unwrap();
        assert_eq!(get(AccessedBy, m, all, 12), [0, INVALID, INVALID]);
        assert_eq!(get(AccessedBy, m, page, 8), [0, -1]);
        sim.managed_advise(m, all, Advice::UnsetAccessedBy(Place::Device(0)))
            .unwrap();
        assert_eq!(get(AccessedBy, m, page, 8), [-1, INVALID]);
        sim.managed_advise(m, 2 * page, Advice::UnsetPreferred)
            .unwrap();
        assert_eq!(get(PreferredLocation, m, page, 4), [INVALID]);
        // Bad input: sizes not whole pages, ranges past the allocation, dataSize, memory
        // that is not managed.
        let bad = |e: SimError, what: &str| {
            assert_eq!(e.kind(), Error::ParamInvalid, "{e}");
            assert!(e.message().contains(what), "{e}");
        };
        bad(
            sim.managed_advise(m, 4096, Advice::SetReadMostly)
                .unwrap_err(),
            "2 MiB",
        );
        bad(
            sim.managed_advise(m, 4 * page, Advice::SetReadMostly)
                .unwrap_err(),
            "leaves",
        );
        bad(
            sim.managed_attr(ReadMostly, m, page, 8).unwrap_err(),
            "dataSize 8",
        );
        bad(
            sim.managed_attr(AccessedBy, m, page, 6).unwrap_err(),
            "dataSize 6",
        );
        let d = sim.malloc(0, 4 << 20, 0).unwrap();
        bad(
            sim.managed_advise(d, page, Advice::SetReadMostly)
                .unwrap_err(),
            "not managed",
        );
        let x = [0u8; 16];
        let h = x.as_ptr().expose_provenance();
        bad(
            sim.managed_attr(ReadMostly, h, 16, 4).unwrap_err(),
            "host memory",
        );
        sim.free(d).unwrap();
        sim.free(m).unwrap();
        bad(sim.managed_attr(ReadMostly, m, 16, 4).unwrap_err(), "freed");
    }

    #[test]
    fn a_prefetch_is_a_task_of_its_stream_whose_location_reads_back_once_it_ran() {
        let (sim, _ns) = open("prefetch");
        let m = sim.malloc_managed(0, 2 * MANAGED_PAGE).unwrap();
        let page = MANAGED_PAGE;
        let s = sim.create_stream(0).unwrap();
        // Holds the stream until the host writes the managed word itself.
        host(m, 8).copy_from_slice(&0u64.to_ne_bytes());
        sim.value_wait(m, 1, crate::mem::ValueCondition::Equal, s)
            .unwrap();
        sim.managed_prefetch(&[(m, 2 * page, Place::Device(1))], s)
            .unwrap();
        sim.managed_prefetch(&[(m + page as usize, page, Place::Host)], s)
            .unwrap();
        let last = |at: usize| sim.managed_attr(RangeAttr::LastPrefetchLocation, at, page, 4);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(last(m).unwrap(), [INVALID], "the stream has not reached it");
        host(m, 8).copy_from_slice(&1u64.to_ne_bytes());
        sim.synchronize(s, SyncWait::Forever).unwrap();
        assert_eq!(last(m).unwrap(), [1]);
        assert_eq!(last(m + page as usize).unwrap(), [-1]);
        let both = sim
            .managed_attr(RangeAttr::LastPrefetchLocationType, m, 2 * page, 4)
            .unwrap();
        assert_eq!(both, [0], "the pages disagree");
        // Refused at the call: not managed, not whole pages (with the batch index).
        let d = sim.malloc(0, 4 << 20, 0).unwrap();
        let e = sim
            .managed_prefetch(&[(d, page, Place::Host)], s)
            .unwrap_err();
        assert!(e.message().contains("not managed"), "{e}");
        let e = sim
            .managed_prefetch(&[(m, page, Place::Host), (m, 4096, Place::Host)], s)
            .unwrap_err();
        assert!(e.message().contains("sizes[1]"), "{e}");
        // Freed before it ran: the task fails the stream.
        let w = sim.malloc(0, 4096, 0).unwrap();
        sim.memset(w, 8, 0, 8).unwrap();
        sim.value_wait(w, 1, crate::mem::ValueCondition::Equal, s)
            .unwrap();
        sim.managed_prefetch(&[(m, page, Place::Host)], s).unwrap();
        sim.free(m).unwrap();
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes of `one` to the device word.
        unsafe {
            sim.memcpy(
                w,
                8,
                one.as_ptr().expose_provenance(),
                8,
                MemcpyKind::HostToDevice,
            )
        }
        .unwrap();
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert!(e.message().contains("freed before its prefetch ran"), "{e}");
        sim.free(w).unwrap();
        sim.destroy_stream(s, acl_notify_core::StreamDestroy::Discard)
            .ok();
        sim.free(d).unwrap();
    }
}

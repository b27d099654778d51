//! Device memory on the simulated devices: allocation, checked copies and sets (synchronous
//! and ordered on streams), memory information, and host memory for copies.
//!
//! # The memory model
//!
//! Each device's memory is one sparse file of the namespace ([`file`]), so that another
//! process can map what is shared with it (IPC memory). A process maps the file once, and
//! hands out device pointers from a separate reservation of the same size that is mapped
//! `PROT_NONE`: a device pointer is `reservation + offset in the device's arena`, unique in
//! the process, and **host code that dereferences it faults at once (`SIGSEGV`)**, as it
//! would on hardware, where device memory is not in the host's address space. A simulator
//! that let host code read device memory would pass programs that crash on an NPU. The
//! simulator itself moves the bytes through its own mapping of the file.
//!
//! # Checked memory
//!
//! Every device range a call names (copy source and destination, set, export) must lie inside
//! one live allocation of this process, or one it imported: the range is looked up in the
//! process's allocations and the allocation's slot in the shared file is checked to be the
//! same incarnation. Anything else is 107000 with a message naming the allocation (its
//! address and size), the offset of the range in it and the caller's range, or saying that
//! the address was freed, or was never allocated. Never a silent write. The checked size is
//! the size the caller asked for, not the size CANN rounds it up to: a copy into the padding
//! works on hardware but is a bug the simulator reports.
//!
//! Host memory cannot be checked (any address may be valid); a host range is used as the
//! caller's contract says.

mod backend;
pub mod backup;
pub(crate) mod capacity;
pub mod components;
pub mod device_area;
mod direction;
pub mod fabric;
pub(crate) mod file;
mod fill32;
pub mod half;
mod host;
pub mod indirect;
pub mod inspect;
pub mod ipc;
pub mod location;
pub mod managed;
mod managed_table;
pub mod overflow;
pub mod pitched;
mod plain_host;
pub mod pool;
mod pool_state;
mod precheck;
mod queued;
mod recent;
pub mod reduce;
pub mod registered;
pub(crate) mod remote;
mod reserved;
mod run_or_drop;
pub mod shareable;
pub(crate) mod state;
pub mod unqueued;
pub mod usage;
mod value;
pub mod vmm;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, PoisonError};

use acl_notify_core::{BackendError as _, Error, RawStream};

use crate::Sim;
use crate::error::SimError;
use crate::job::SimJob;
use crate::job::SimStream;
use crate::locks::lock;
use crate::stream::TaskCtx;
use crate::tagged_cache::Tag;
use file::{Importers, MemFile};
use queued::QueuedSide;
use state::Gone;

pub use capacity::{DEFAULT_DEVICE_MEMORY, parse_size};
pub(crate) use capacity::{MAX_DEVICE_MEMORY, check_capacity};
pub(crate) use state::{Alloc, AllocRef, MemState};

pub use file::{ALLOC_ALIGN, MAX_ALLOCS, mem_file_path, remove_mem_files};
pub use unqueued::AsyncCopy;
pub use value::ValueCondition;

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
fn span_of(size: u64, rounding: Rounding) -> Option<u64> {
    let pad = match rounding {
        Rounding::Padded => 32,
        Rounding::Align32 => 0,
    };
    let rounded = size.checked_add(pad + 32 - 1)? / 32 * 32;
    rounded.checked_next_multiple_of(ALLOC_ALIGN)
}

/// The direction of a copy (`aclrtMemcpyKind`, after the C layer refused the kinds CANN's
/// `aclrtMemcpy` refuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemcpyKind {
    /// Both host memory.
    HostToHost,
    /// Host to device.
    HostToDevice,
    /// Device to host.
    DeviceToHost,
    /// Both device memory.
    DeviceToDevice,
    /// Each side is what its address is.
    Default,
}

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
    fn ptr(&self) -> *mut u8 {
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
    fn ptr(&self) -> *mut u8 {
        self.alloc.file.bytes(self.off, self.len)
    }

    /// At run time of a queued task: still the same allocation?
    fn still(&self, what: &str) -> Result<(), SimError> {
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

/// One side of a copy.
#[derive(Clone, Copy, Debug)]
enum Side<'s> {
    Host(usize),
    Device(RangeRef<'s>),
}

impl Side<'_> {
    fn ptr(&self) -> *mut u8 {
        match self {
            Side::Host(a) => std::ptr::with_exposed_provenance_mut(*a),
            Side::Device(r) => r.ptr(),
        }
    }
}

impl Sim {
    pub(crate) fn mem(&self) -> &MemState {
        &self.inner.mem
    }

    /// This process's identity in allocation slots: (pid, start time).
    pub(crate) fn mem_identity(&self) -> (i32, u64) {
        self.inner.file.identity()
    }

    /// The device-memory file of `device` on `server`, opened (and created if `create`) on
    /// first use.
    pub(crate) fn mem_file(
        &self,
        server: u32,
        device: u32,
        create: bool,
    ) -> Result<Option<Arc<MemFile>>, SimError> {
        let mut files = lock(&self.mem().files);
        if let Some(f) = files.get(&(server, device)) {
            return Ok(Some(Arc::clone(f)));
        }
        let Some(f) = MemFile::open(
            &self.inner.namespace,
            server,
            device,
            self.mem().capacity,
            create,
        )?
        else {
            return Ok(None);
        };
        self.mem().note_file(&f);
        files.insert((server, device), Arc::clone(&f));
        Ok(Some(f))
    }

    /// Device memory per device, in bytes.
    pub fn device_memory(&self) -> u64 {
        self.mem().capacity
    }

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
    fn note_freed(&self, addr: usize, size: u64, device: u32, how: Gone) {
        let mut freed = lock(&self.mem().freed);
        if freed.len() == FREED_KEPT {
            freed.pop_front();
        }
        freed.push_back((addr, size, device, how));
    }

    /// Adds to `msg` what `addr` is: inside or near an allocation, freed, or no device address.
    fn explain(&self, msg: &mut String, addr: usize) {
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
    fn is_device_addr(&self, addr: usize) -> bool {
        lock(&self.mem().files)
            .values()
            .any(|f| f.offset_of(addr).is_some())
    }

    /// The allocation of this process (its own or an import) that covers `addr`, and its
    /// device address: from this thread's cache of recent ones ([`recent`]), else from the
    /// table (and then cached); or that `addr` is host memory, or a device address in no
    /// allocation.
    #[inline(always)]
    fn alloc_at(&self, addr: usize) -> At<'_> {
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
    fn range_ref(
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

    /// Keeps `file` alive for the tasks of `stream` (see `queued`): found among the stream's
    /// kept values without a lock once it is there.
    #[inline]
    fn keep_file(&self, stream: &SimStream, file: &MemFile) -> Result<(), SimError> {
        if stream.keeps(file) {
            return Ok(());
        }
        self.keep_file_slow(stream, file)
    }

    #[inline(never)]
    fn keep_file_slow(&self, stream: &SimStream, file: &MemFile) -> Result<(), SimError> {
        stream.keep_alive(&self.mem().file_of(file)?);
        Ok(())
    }

    /// One side of a copy, as its address is: device memory (a range of a live allocation,
    /// checked) or host memory. What the copy's kind says of it is judged from both sides
    /// ([`direction`]).
    #[inline(always)]
    fn side(&self, addr: usize, len: usize, what: &str) -> Result<Side<'_>, SimError> {
        match self.range_ref(addr, len, what)? {
            Some(r) => Ok(Side::Device(r)),
            None => {
                self.mem().host.alias_refused(addr, what)?;
                Ok(Side::Host(addr))
            }
        }
    }

    /// The kind CANN's runtime makes of a copy between the checked sides `d` (at `dst`,
    /// placed `pd`) and `s` ([`direction::resolve`]).
    fn copy_kind(
        kind: MemcpyKind,
        (d, pd, dst): (&Side<'_>, unqueued::Place, usize),
        (s, ps, src): (&Side<'_>, unqueued::Place, usize),
    ) -> Result<MemcpyKind, SimError> {
        let managed = |x: &Side<'_>| matches!(x, Side::Device(r) if Self::is_managed(&r.alloc));
        direction::resolve(kind, (pd, dst), (ps, src), || managed(d) || managed(s))
    }

    #[inline(always)]
    fn copy_sides(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
    ) -> Result<(Side<'_>, Side<'_>), SimError> {
        within(count, dest_max, "destMax")?;
        self.copy_sides_of(dst, count, src, count, kind)
    }

    /// The sides of a copy whose destination spans `dst_len` bytes and source `src_len`
    /// (different for a 2-D copy; [`pitched`]), each as its address is; `kind` is the
    /// caller's, for the rule of imported memory below.
    #[inline(always)]
    fn copy_sides_of(
        &self,
        dst: usize,
        dst_len: usize,
        src: usize,
        src_len: usize,
        kind: MemcpyKind,
    ) -> Result<(Side<'_>, Side<'_>), SimError> {
        let d = self.side(dst, dst_len, "destination")?;
        let s = self.side(src, src_len, "source")?;
        // CANN documents (hicann/runtime docs/zh/api_ref/11-07_IPC_memory_sharing.md) that
        // memory imported onto another device than its own takes no host-to-device or
        // device-to-host copy, and no ACL_MEMCPY_DEFAULT: on hardware such a copy fails, so
        // here it does too.
        let cross = |x: &Side<'_>| match x {
            Side::Device(r) if r.alloc.cross_device() => {
                Some((r.addr, r.alloc.file.device(), r.alloc.used_on))
            }
            _ => None,
        };
        if let Some((side, what)) = cross(&d)
            .map(|c| (c, "destination"))
            .or_else(|| cross(&s).map(|c| (c, "source")))
            && (kind != MemcpyKind::DeviceToDevice
                || matches!((&d, &s), (Side::Host(_), _) | (_, Side::Host(_))))
        {
            return Err(cross_device_refused(side, what));
        }
        Ok((d, s))
    }

    /// `aclrtMemcpy`: copies `count` bytes from `src` to `dst` (`count <= dest_max`), each
    /// side as its address is, whatever `kind` says (CANN's synchronous copy does not look at
    /// it: `mem::direction`). Overlapping ranges are copied as `memmove` does.
    ///
    /// Errors: 107000 count > dest_max, a device range outside this process's live
    /// allocations.
    ///
    /// # Safety
    ///
    /// Every host side must be valid for `count` bytes (read for the source, written for the
    /// destination) for the duration of the call.
    pub unsafe fn memcpy(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(());
            }
            // Memory of another host (cluster mode) goes through the cluster.
            if let Some(r) = self.remote_memcpy(dst, dest_max, src, count, kind, None) {
                return r;
            }
            if let Some(r) = self.vmm_memcpy(dst, dest_max, src, count, kind, None, false) {
                return r.map(drop);
            }
            let (d, s) = self.copy_sides(dst, dest_max, src, count, kind)?;
            self.peer_copy_ok(&d, &s)?;
            // SAFETY: device sides are checked ranges of mapped allocations; host sides are the
            // caller's contract. `copy` allows overlap. Other processes may write the same device
            // bytes meanwhile, as on hardware: the bytes are plain data, never references.
            unsafe { std::ptr::copy(s.ptr(), d.ptr(), count) };
            Ok(())
        })
    }

    /// A copy from the memory of one device to another's, synchronous or queued
    /// (`aclrtMemcpy`, `aclrtMemcpyAsync`, `aclrtMemcpy2dAsync`): on the SoCs whose
    /// `aclrtMemcpy` CANN documents as needing peer access first
    /// ([`Soc::copy_needs_peer_access`](acl_notify_core::Soc::copy_needs_peer_access)), the
    /// source's device must have enabled access to the destination's (CANN's access is
    /// one-way, from the device that enabled it: `04_device_management.md`). An import onto
    /// another device enabled it both ways, as CANN's driver does. The queued copies follow
    /// the same rule, refused when queued: CANN's guide asks for peer access before any
    /// cross-device copy, `aclrtMemcpyAsync` named with `aclrtMemcpy` (hicann/runtime
    /// `docs/zh/dev_guide/02-01_data_copy.md`, 跨Device复制), and its runtime asks the driver
    /// for the path between the two addresses when the task is built, before it is sent
    /// (`src/runtime/core/src/task/task_info/memory/memory_memcpy_async_task.cc`,
    /// `ConvertD2DCpyType`), so a refusal is the queueing call's code, not the stream's.
    ///
    /// Errors: 207006 access not enabled (CANN documents no code; the one an import without
    /// peer access gets here).
    fn peer_copy_ok(&self, d: &Side<'_>, s: &Side<'_>) -> Result<(), SimError> {
        let (Side::Device(d), Side::Device(s)) = (d, s) else {
            return Ok(());
        };
        let (to, from) = (d.alloc.file.device(), s.alloc.file.device());
        if to == from || !self.inner.soc.copy_needs_peer_access() {
            return Ok(());
        }
        if lock(&self.inner.peers)[from as usize] & (1u64 << to) != 0 {
            return Ok(());
        }
        Err(SimError::new(
            Error::NoPermission,
            format!(
                "a copy from device {from}'s memory ({:#x}) to device {to}'s ({:#x}) needs peer \
                 access from device {from} to device {to} first on {}: \
                 aclrtDeviceEnablePeerAccess({to}, 0) with device {from} current",
                s.addr,
                d.addr,
                self.inner.soc.name()
            ),
        ))
    }

    /// `aclrtMemset`: sets `count` bytes at `dst` (`count <= max`) to `value`: device memory,
    /// or host memory of [`malloc_host`](Self::malloc_host) (CANN tells them apart by the
    /// address).
    ///
    /// Errors: 107000 count > max, `dst` neither a device range of this process's live
    /// allocations nor within one `aclrtMallocHost` allocation.
    pub fn memset(&self, dst: usize, max: usize, value: u8, count: usize) -> Result<(), SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(());
            }
            if let Some(r) = self.remote_memset(dst, max, value, count, None) {
                return r;
            }
            if let Some(r) = self.vmm_memset(dst, max, value, count, None) {
                return r;
            }
            let r = match self.set_side(dst, max, count) {
                Ok(r) => r,
                // Not device memory nor `aclrtMallocHost`'s, yet writable here (CANN's own
                // sample clears a stack variable so): set at once, as hardware does.
                Err(e)
                    if e.kind() == Error::ParamInvalid
                        && count <= max
                        && !self.mem().may_be_device(dst)
                        && self.mem().host.block_at(dst).is_none()
                        && plain_host::writable(dst, count) =>
                {
                    // SAFETY: `[dst, dst + count)` lies in writable mappings of this process
                    // (checked just now); what the bytes are for is the caller's business.
                    unsafe { std::ptr::write_bytes(dst as *mut u8, value, count) };
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            // SAFETY: a checked range of a mapped allocation, or of an `aclrtMallocHost`
            // allocation of this process (its table's lock is not held: freeing host memory
            // while setting it is the caller's race, as with `memset`).
            unsafe { std::ptr::write_bytes(r.ptr(), value, count) };
            Ok(())
        })
    }

    /// What an `aclrtMemset[Async]` of `count` bytes at `dst` sets. CANN tells host from
    /// device memory by the address, and takes host memory of `aclrtMallocHost` (other host
    /// memory is undefined behaviour there; here it is refused, and a synchronous
    /// [`memset`](Self::memset) then sets it only where this process has it mapped writable:
    /// [`plain_host`]): hicann/runtime `docs/zh/api_ref/11-03_memory_copy_and_set.md`,
    /// aclrtMemset and aclrtMemsetAsync.
    fn set_side(&self, dst: usize, max: usize, count: usize) -> Result<Side<'_>, SimError> {
        within(count, max, "maxCount")?;
        if let Some(r) = self.range_ref(dst, count, "range")? {
            return Ok(Side::Device(r));
        }
        self.mem().host.range(dst, count)?;
        Ok(Side::Host(dst))
    }

    /// `aclrtMemcpyAsync`: [`memcpy`](Self::memcpy) queued on `stream`, after the tasks before
    /// it (records, waits, host functions, copies). The ranges are checked now, and the
    /// device ones again when the task runs (a range freed meanwhile fails the stream's task
    /// instead of writing freed memory).
    ///
    /// # Safety
    ///
    /// Every host side must stay valid for `count` bytes until the task has run.
    pub unsafe fn memcpy_async(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: RawStream,
    ) -> Result<(), SimError> {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.memcpy_async_through(dst, dest_max, src, count, kind, stream, [None, None], false)
        }
        .map(drop)
    }

    /// [`memcpy_async`](Self::memcpy_async) as CANN's `aclrtMemcpyAsync` queues it: a copy it
    /// does not queue (with pageable host memory, or within the host) is checked as the queued
    /// copy is and then answered instead, nothing queued ([`unqueued`]).
    ///
    /// # Safety
    ///
    /// As [`memcpy_async`](Self::memcpy_async).
    pub unsafe fn memcpy_async_as_cann(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: RawStream,
    ) -> Result<AsyncCopy, SimError> {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.memcpy_async_through(dst, dest_max, src, count, kind, stream, [None, None], true)
        }
    }

    /// [`memcpy_async`](Self::memcpy_async) of sides reached through the mappings `marks`
    /// (destination, source) of reserved ranges, if any: the task fails if one was unmapped
    /// before it ran ([`vmm`]). `leave_unqueued`: a copy CANN does not queue ([`unqueued`]) is
    /// answered instead.
    ///
    /// # Safety
    ///
    /// As [`memcpy_async`](Self::memcpy_async).
    #[allow(clippy::too_many_arguments)]
    unsafe fn memcpy_async_through(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: RawStream,
        marks: [Option<Arc<reserved::MapMark>>; 2],
        leave_unqueued: bool,
    ) -> Result<AsyncCopy, SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(AsyncCopy::Queued);
            }
            if let Some(r) = self.remote_memcpy(dst, dest_max, src, count, kind, Some(stream)) {
                return r.map(|()| AsyncCopy::Queued);
            }
            let vmm = self.vmm_memcpy(
                dst,
                dest_max,
                src,
                count,
                kind,
                Some(stream),
                leave_unqueued,
            );
            if let Some(r) = vmm {
                return r;
            }
            let (sd, ss) = self.copy_sides(dst, dest_max, src, count, kind)?;
            let (d, s) = (
                QueuedSide::new(&sd, &self.mem().host),
                QueuedSide::new(&ss, &self.mem().host),
            );
            let (pd, ps) = (
                unqueued::Place::of_queued(&d),
                unqueued::Place::of_queued(&s),
            );
            let kind = Self::copy_kind(kind, (&sd, pd, dst), (&ss, ps, src))?;
            self.peer_copy_ok(&sd, &ss)?;
            if leave_unqueued {
                let v = unqueued::verdict(kind, pd, ps);
                if v != AsyncCopy::Queued {
                    return Ok(v);
                }
            }
            // Both sides are mostly in one file: kept once.
            let (fd, fs) = (queued::file_of(&sd), queued::file_of(&ss));
            let fs = fs.filter(|s| !fd.is_some_and(|d| std::ptr::eq(d, *s)));
            let [md, ms] = marks;
            let (d, s) = (d.through(md), s.through(ms));
            let cpu = crate::placement::current_cpu();
            let task = Box::new(move |ctx: &TaskCtx| {
                crate::placement::beside_enqueuer(cpu, || ctx.note_moved());
                let run = || {
                    d.still(dst, count, "destination")?;
                    s.still(src, count, "source")?;
                    let (to, from) = (d.ptr(dst, count)?, s.ptr(src, count)?);
                    // SAFETY: as in `memcpy`; the host sides are the caller's contract until the
                    // task has run, and the device ones were checked just now.
                    unsafe { std::ptr::copy(from, to, count) };
                    Ok(())
                };
                let args = || serde_json::json!({"dst": dst, "src": src, "bytes": count});
                let r = crate::trace::span("memory", "memcpy", args, run);
                // What it read may have been zeros of a cut-off page (see `crate::lost`).
                d.intact()?;
                s.intact()?;
                r
            });
            // Queued under the stream table's read lock, without a reference to the stream,
            // which keeps the files the task uses.
            self.enqueue_checked(stream, SimJob::Bulk(task), |e, _| {
                if let Some(f) = fd {
                    self.keep_file(&e.stream, f)?;
                }
                if let Some(f) = fs {
                    self.keep_file(&e.stream, f)?;
                }
                Ok(())
            })?;
            Ok(AsyncCopy::Queued)
        })
    }

    /// `aclrtMemsetAsync`: [`memset`](Self::memset) queued on `stream` (checked as
    /// [`memcpy_async`](Self::memcpy_async) is).
    pub fn memset_async(
        &self,
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.memset_async_through(dst, max, value, count, stream, None)
    }

    /// [`memset_async`](Self::memset_async) of a range reached through the mapping `mark`
    /// of a reserved range, if any (see [`memcpy_async_through`](Self::memcpy_async_through)).
    fn memset_async_through(
        &self,
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
        stream: RawStream,
        mark: Option<Arc<reserved::MapMark>>,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(());
            }
            if let Some(r) = self.remote_memset(dst, max, value, count, Some(stream)) {
                return r;
            }
            if let Some(r) = self.vmm_memset(dst, max, value, count, Some(stream)) {
                return r;
            }
            let r = self.set_side(dst, max, count)?;
            let file = queued::file_of(&r);
            let q = QueuedSide::new(&r, &self.mem().host).through(mark);
            let cpu = crate::placement::current_cpu();
            let task = Box::new(move |ctx: &TaskCtx| {
                crate::placement::beside_enqueuer(cpu, || ctx.note_moved());
                let args = || serde_json::json!({"dst": dst, "value": value, "bytes": count});
                let done = crate::trace::span("memory", "memset", args, || {
                    q.still(dst, count, "range")?;
                    let to = q.ptr(dst, count)?;
                    // SAFETY: a range of a mapped allocation, checked just now.
                    unsafe { std::ptr::write_bytes(to, value, count) };
                    Ok(())
                });
                // As in `memcpy_async`.
                q.intact()?;
                done
            });
            // As in `memcpy_async`.
            self.enqueue_checked(stream, SimJob::Bulk(task), |e, _| {
                file.map_or(Ok(()), |f| self.keep_file(&e.stream, f))
            })
        })
    }

    /// `aclrtGetMemInfo`: (free, total) bytes of `device`'s memory. What only dead processes
    /// held is free (a device's driver frees a process's memory when it dies; here an
    /// allocation that runs short would reclaim it): reclaimed before counting, as
    /// `notifies_free` does with notify ids.
    pub fn mem_info(&self, device: u32) -> Result<(u64, u64), SimError> {
        self.mem_checked(|| {
            self.device_ok(device)?;
            let total = self.mem().capacity;
            let used = match self.mem_file(self.inner.server_id, device, false)? {
                Some(f) if f.used() > 0 => {
                    f.reclaim_dead(&f.lock()?);
                    f.used()
                }
                _ => 0,
            };
            Ok((total - used.min(total), total))
        })
    }
}

impl Sim {
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

/// What [`Sim::alloc_at`] found at an address.
enum At<'s> {
    /// The allocation covering it, and the allocation's device address.
    Alloc(usize, AllocRef<'s>),
    /// In no device-memory file's reservation: host memory.
    Host,
    /// Maybe a device address (in a file's reservation, or not told without a lock), but in
    /// no allocation.
    Unallocated,
}

/// 107000 for a copy side in memory imported onto another device than its own, in a copy
/// that is not an explicit device-to-device one between two device sides.
/// `side`: its address, the device the memory is on and the one it was imported onto.
#[cold]
fn cross_device_refused((addr, device, used_on): (usize, u32, u32), what: &str) -> SimError {
    SimError::new(
        Error::ParamInvalid,
        format!(
            "the {what} {:#x} is IPC memory of device {} imported onto device {}: CANN copies \
             such memory only device to device with an explicit kind (no ACL_MEMCPY_DEFAULT, no \
             copy to or from the host)",
            addr, device, used_on
        ),
    )
}

/// The allocation of `allocs` (a process's table, [`MemState::allocs`]) covering `addr`, and
/// its device address.
#[inline(always)]
fn covering(allocs: &BTreeMap<usize, Alloc>, addr: usize) -> Option<(usize, &Alloc)> {
    let (&base, a) = allocs.range(..=addr).next_back()?;
    ((addr - base) < a.size as usize).then_some((base, a))
}

/// The arena offset of the range `[addr, addr + len)` of allocation `a` (at `base`, covering
/// `addr`): 107000 if the range ends past the allocation's end ([`leaves`]) or the allocation
/// is no longer the incarnation this process holds ([`stale`]). Every range check's end:
/// at the call ([`Sim::range_ref`]) and when an indirect task runs (`indirect`).
#[inline(always)]
fn checked_offset(
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

#[cfg(test)]
mod tests;

//! The device-memory file of one simulated device: its layout on the shared-file layer
//! ([`crate::mapfile`]), its allocation table and the allocator that places allocations in
//! its arena.
//!
//! # File
//!
//! `/dev/shm/acl-notify-sim.<namespace>.mem<server>d<device>`, created on the first
//! allocation on the device (same creation rules as every shared file: `O_EXCL`, mode 0600,
//! owner and header checked on open). Sparse: the arena is sized to the device's capacity
//! ([`crate::ENV_DEVICE_MEMORY`]) but an allocation's pages are only backed while it lives
//! (`fallocate` at allocation, so a full `/dev/shm` is an allocation failure and never a
//! `SIGBUS` later; hole punched at free).
//!
//! | region | size |
//! |---|---|
//! | header | 4 KiB |
//! | allocation slots | [`MAX_ALLOCS`] × 512 B |
//! | whitelists | [`MAX_ALLOCS`] × `shm::WHITELIST_BYTES` (touched only by exports) |
//! | arena | the capacity, 2 MiB aligned |
//!
//! # Allocation
//!
//! Allocations, frees, imports, closes and the reclaim of dead processes change slots under
//! the file lock: a process-local mutex plus `flock` on the file (released by the kernel if
//! the holder dies, so a crash never wedges the device). Placement is first fit over the
//! live ranges sorted by offset: O(n log n) in the live allocations of the device, which is
//! cheap for the hundreds a program keeps. A slot's fields are written before its state word
//! makes it live, so the copy paths, which read slots without the lock, see whole slots.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use acl_notify_core::Error;
use acl_notify_core::slot::{Owner, Payload, Slot, SlotState};
use acl_notify_core::waiter::Waiter;

use super::components::Component;
use super::reserved::{reserve_none, unreserve};
use crate::error::SimError;
use crate::mapfile::SHM_DIR;
use crate::mapfile::{
    Field, INIT_WAIT, Kind, LIMITED, Map, Open, PAGE, Registry, Shared, align_up, field,
    fill_fields, mapping_failed,
};
use crate::shm::{ShmWhitelist, WHITELIST_BYTES};
use crate::sys;

const MAGIC: u64 = u64::from_le_bytes(*b"ACLNMEM\x01");
/// Bumped whenever the device-memory file layout changes (2: the slots are the core's shared
/// `Slot` with the allocation as payload; 4: a whitelist entry holds both a start time and a
/// pidfs identity, 24 bytes, as the notify file's layout 10; 5: 64 importers a slot; 6: a
/// whitelist entry's `sdid` is an sdid (`acl_notify_core::sdid`), as the notify file's layout
/// 13).
pub const MEM_LAYOUT_VERSION: u32 = 6;
/// Allocations (live, or freed but still imported) per device at once.
pub const MAX_ALLOCS: u32 = 16384;
/// Processes that can have one allocation imported at once: as many as a namespace has (its
/// registry's 64), since CANN documents no such limit. At 24, an all-to-all of 32 processes,
/// each importing every other's buffer, failed with 207005 (`tests/c/all_to_all.c`).
pub const MAX_IMPORTERS: usize = 64;
/// Where allocations start: every device pointer is a multiple of this (CANN documents at
/// least 32-byte alignment; the driver hands out larger, page-like alignment).
pub const ALLOC_ALIGN: u64 = 512;
/// Alignment of the arena within the file (a huge page).
const ARENA_ALIGN: usize = 2 << 20;

const KIND: Kind = Kind("device-memory file");

/// `e`, and when it is a mapping of this file refused for its size ([`LIMITED`]), the setting
/// that makes the file smaller.
fn name_size_setting(e: SimError) -> SimError {
    if !e.message().contains(LIMITED) {
        return e;
    }
    SimError::new(
        acl_notify_core::BackendError::kind(&e),
        format!(
            "{}; {} sets each device's memory (every process of a namespace must give the same \
             value)",
            e.message(),
            crate::config::ENV_DEVICE_MEMORY
        ),
    )
}

/// The file header. Atomics only: other processes write this memory.
#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    ready: AtomicU32,
    creator_pid: AtomicI32,
    server: AtomicU32,
    device: AtomicU32,
    max_allocs: AtomicU32,
    slot_size: AtomicU32,
    wl_size: AtomicU32,
    pid_ns: AtomicU64,
    capacity: AtomicU64,
    slots_off: AtomicU64,
    wls_off: AtomicU64,
    data_off: AtomicU64,
    total: AtomicU64,
    /// Bytes of the arena taken by allocations (their spans), for `aclrtGetMemInfo`.
    used: AtomicU64,
    /// One past the highest slot ever used (bounds scans, so untouched slot pages stay
    /// unbacked).
    high_water: AtomicU32,
}

// SAFETY: `Header` is atomics only (every field above); the macro asserts that it fits in a
// page.
crate::mapfile::file_header!(unsafe Header, MAGIC, MEM_LAYOUT_VERSION);

/// What a slot of the shared [`Slot`] machine holds for one allocation (the lifecycle —
/// state word, owner, policy as its create flags, export and nonce — is the core's).
#[repr(C)]
pub(crate) struct MemPayload {
    /// Offset in the arena.
    pub(crate) off: AtomicU64,
    /// The size the caller asked for: the checked range.
    pub(crate) size: AtomicU64,
    /// The bytes reserved (the size rounded as CANN rounds it, then to [`ALLOC_ALIGN`]).
    pub(crate) span: AtomicU64,
    /// The exported range: offset in the allocation and length.
    pub(crate) export_off: AtomicU64,
    pub(crate) export_len: AtomicU64,
    /// 1 once the owner's `aclrtFree` orphaned the allocation: importers may no longer use it
    /// (SPEC §8), though their mappings stay until they close. An owner that died leaves it 0:
    /// what it shared stays usable for its importers until they close.
    pub(crate) owner_freed: AtomicU64,
    /// Importers: `(pid, start time)` pairs, pid 0 = empty.
    pub(crate) importers: [[AtomicU64; 2]; MAX_IMPORTERS],
}

impl Payload for MemPayload {
    const NEW: Self = MemPayload {
        off: AtomicU64::new(0),
        size: AtomicU64::new(0),
        span: AtomicU64::new(0),
        export_off: AtomicU64::new(0),
        export_len: AtomicU64::new(0),
        owner_freed: AtomicU64::new(0),
        importers: [const { [AtomicU64::new(0), AtomicU64::new(0)] }; MAX_IMPORTERS],
    };

    /// No export range, no importers (the placement is the claim's `fill`).
    fn claimed(&self, _generation: u32) {
        self.export_off.store(0, SeqCst);
        self.export_len.store(0, SeqCst);
        self.owner_freed.store(0, SeqCst);
        for e in &self.importers {
            e[0].store(0, SeqCst);
            e[1].store(0, SeqCst);
        }
    }

    fn retired(&self, _next: u32) {}

    /// Nobody sleeps on an allocation.
    fn wake_all<W: Waiter>(&self, _w: &W) {}
}

/// What an owner's letting go of an allocation leaves the processes that import it
/// ([`MemFile::free_owned`]); either way their mappings stay until they let go, and the
/// allocation is released at the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Importers {
    /// `aclrtFree`: their copies and sets through it fail from then on (SPEC §8).
    Refused,
    /// The owner died, or freed physical memory it shared by shareable handle (CANN frees
    /// that once every process sharing it has freed its handle, hicann/runtime
    /// `docs/zh/api_ref/11-04_virtual_memory_management.md`): their use goes on.
    Served,
}

/// One allocation: the core's slot with a [`MemPayload`]. All-zero is a free slot. Its
/// transitions are made under the file lock; the copy paths read it without.
pub(crate) type MemSlot = Slot<MemPayload>;

const SLOT_BYTES: usize = std::mem::size_of::<MemSlot>();
const _: () = assert!(SLOT_BYTES == 1152);

// SAFETY: atomics only (the core's slot and the payload above).
unsafe impl Shared for MemSlot {}

/// The owner's identity as slots record it: (pid, start time).
pub(crate) fn owner_of(s: &MemSlot) -> (i32, u64) {
    let o = s.owner();
    (o.pid, o.start_time)
}

/// How many processes import the allocation.
pub(crate) fn importer_count(s: &MemSlot) -> usize {
    s.sync
        .importers
        .iter()
        .filter(|e| e[0].load(SeqCst) != 0)
        .count()
}

/// Region offsets of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    capacity: u64,
    slots_off: usize,
    wls_off: usize,
    data_off: usize,
    total: usize,
}

impl Layout {
    /// Allocation slot `id` of the file mapped at `map`.
    fn slot<'m>(&self, map: &'m Map, id: u32) -> Option<&'m MemSlot> {
        (id < MAX_ALLOCS).then(|| map.at(self.slots_off + id as usize * SLOT_BYTES))
    }

    /// The whitelist of slot `id`.
    fn whitelist<'m>(&self, map: &'m Map, id: u32) -> Option<&'m ShmWhitelist> {
        (id < MAX_ALLOCS).then(|| map.at(self.wls_off + id as usize * WHITELIST_BYTES))
    }

    fn new(capacity: u64) -> Layout {
        let slots_off = PAGE;
        let wls_off = align_up(slots_off + MAX_ALLOCS as usize * SLOT_BYTES, PAGE);
        let data_off = align_up(wls_off + MAX_ALLOCS as usize * WHITELIST_BYTES, ARENA_ALIGN);
        let total = data_off + capacity as usize;
        Layout {
            capacity,
            slots_off,
            wls_off,
            data_off,
            total,
        }
    }
}

/// The path of the device-memory file of `device` on `server` in `namespace`.
pub fn mem_file_path(namespace: &str, server: u32, device: u32) -> PathBuf {
    crate::mapfile::file_path(namespace, "mem", format_args!("{server}d{device}"))
}

/// One mapped device-memory file, plus this process's reservation of device addresses for it.
///
/// Aligned to two cache lines so that in an `Arc<MemFile>` the reference counts are not on
/// the lines of the fields a stream's worker reads for every queued copy or set (the mapping,
/// the layout, the address reservation). Checked copies and sets no longer write the counts
/// (they borrow the file: `recent`, `Stream::keeps`); a reduce, a remote copy and an open of
/// the file still clone it. Kept from when every lookup cloned the allocation's entry; not
/// measured again since.
#[repr(align(128))]
pub(crate) struct MemFile {
    path: PathBuf,
    map: Map,
    layout: Layout,
    server: u32,
    device: u32,
    /// The device addresses of this process for this device: `capacity` bytes reserved
    /// `PROT_NONE` (see the module docs of [`crate::mem`]); arena offset `o` is address
    /// `reserve + o`.
    reserve: usize,
    /// The process that mapped it (a forked child must not use it).
    pid: i32,
    /// Serialises this process's threads on the file lock (`flock` excludes other processes
    /// only).
    lock: Mutex<()>,
    /// What this process's own allocations in the file take, by kind ([`super::usage`]).
    usage: super::components::Usage,
}

// SAFETY: the mappings are owned by this value until drop; the shared part is accessed through
// atomics, the arena through raw copies the callers range-check.
unsafe impl Send for MemFile {}
// SAFETY: as above.
unsafe impl Sync for MemFile {}

impl fmt::Debug for MemFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFile")
            .field("path", &self.path)
            .field("device", &self.device)
            .field("capacity", &self.layout.capacity)
            .finish_non_exhaustive()
    }
}

static REGISTRY: Registry<MemFile> = Registry::new();

/// The file lock: held while slots change.
pub(crate) struct Locked<'a> {
    file: &'a MemFile,
    _local: MutexGuard<'a, ()>,
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        if let Some(fd) = self.file.map.fd() {
            // SAFETY: an open descriptor of ours; unlocking takes plain integers.
            unsafe { libc::flock(fd.raw(), libc::LOCK_UN) };
        }
    }
}

/// Where a new allocation went.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Placed {
    pub(crate) id: u32,
    pub(crate) generation: u32,
    pub(crate) off: u64,
}

impl MemFile {
    /// Opens (creating it if `create`) the device-memory file of `device`, shared within the
    /// process. `Ok(None)` if it does not exist and `create` is off.
    ///
    /// Errors: 107000 the file was made with another capacity; 507899 it is corrupt, foreign,
    /// not ours or not mode 0600, or the address space could not be reserved.
    pub(crate) fn open(
        namespace: &str,
        server: u32,
        device: u32,
        capacity: u64,
        create: bool,
    ) -> Result<Option<Arc<MemFile>>, SimError> {
        let path = mem_file_path(namespace, server, device);
        let pid = sys::getpid();
        REGISTRY.get_or_open(
            &path,
            |f| f.pid == pid,
            || Self::open_file(&path, server, device, capacity, create),
        )
    }

    fn open_file(
        path: &Path,
        server: u32,
        device: u32,
        capacity: u64,
        create: bool,
    ) -> Result<Option<MemFile>, SimError> {
        let layout = Layout::new(capacity);
        let open = Open {
            path,
            kind: KIND,
            create,
            writable: true,
            total: layout.total,
            init_wait: INIT_WAIT,
            keep_fd: true,
        };
        let fill = |h: &Header| fill_fields(&header_fields(h, &layout, server, device));
        let check = |h: &Header, size| validate(h, path, &layout, server, device, size);
        let Some(map) = open.open(fill, check).map_err(name_size_setting)? else {
            return Ok(None);
        };
        // SAFETY: no MAP_FIXED: no existing mapping is affected.
        let reserve =
            unsafe { reserve_none(std::ptr::null_mut(), capacity as usize, 0) }.map_err(|e| {
                let what = mapping_failed(capacity as usize, &e);
                name_size_setting(KIND.os_err(
                    path,
                    &format!("reserving device addresses: {what}"),
                    e,
                ))
            })?;
        // Under valgrind's memcheck, the leak check must not read the arena: reading its
        // holes would back the whole sparse file in /dev/shm (`crate::valgrind`).
        // SAFETY: data_off + capacity == total, the mapping's length (`Layout::new`).
        let arena = unsafe { map.base().add(layout.data_off) };
        crate::valgrind::hide_arena(arena.addr(), capacity as usize);
        Ok(Some(MemFile {
            path: path.to_owned(),
            map,
            layout,
            server,
            device,
            reserve,
            pid: sys::getpid(),
            lock: Mutex::new(()),
            usage: Default::default(),
        }))
    }

    /// What this process's own allocations in the file take ([`super::usage`]).
    pub(super) fn usage(&self) -> &super::components::Usage {
        &self.usage
    }

    /// The device.
    pub(crate) fn device(&self) -> u32 {
        self.device
    }

    /// Bytes taken by allocations.
    pub(crate) fn used(&self) -> u64 {
        self.header().used.load(SeqCst).min(self.layout.capacity)
    }

    /// One past the highest slot ever used, clamped.
    pub(crate) fn high_water(&self) -> u32 {
        self.header().high_water.load(SeqCst).min(MAX_ALLOCS)
    }

    fn header(&self) -> &Header {
        self.map.header::<Header>()
    }

    /// This process's device address of arena offset `off`.
    pub(crate) fn addr(&self, off: u64) -> usize {
        self.reserve + off as usize
    }

    /// Whether `addr` is one of this process's device addresses for this device; its arena
    /// offset if so.
    pub(crate) fn offset_of(&self, addr: usize) -> Option<u64> {
        let off = addr.checked_sub(self.reserve)?;
        (off < self.layout.capacity as usize).then_some(off as u64)
    }

    /// The bytes at arena offset `off`, `len` long, for the copy paths.
    ///
    /// Panics if the range leaves the arena (the callers check it against an allocation that
    /// lies inside it).
    pub(crate) fn bytes(&self, off: u64, len: usize) -> *mut u8 {
        assert!(
            off.checked_add(len as u64)
                .is_some_and(|end| end <= self.layout.capacity),
            "device range {off:#x}+{len} outside the arena of {}",
            self.path.display()
        );
        // SAFETY: in bounds of the mapping (data_off + capacity == total, checked above).
        unsafe { self.map.base().add(self.layout.data_off + off as usize) }
    }

    /// The slot `id`.
    pub(crate) fn slot(&self, id: u32) -> Option<&MemSlot> {
        self.layout.slot(&self.map, id)
    }

    /// `Ok` unless this file shrank under the mapping (507899 saying so; see
    /// [`crate::lost`]).
    pub(crate) fn intact(&self) -> Result<(), SimError> {
        self.map.intact(&self.path)
    }

    /// Whether this file shrank under the mapping.
    pub(crate) fn is_lost(&self) -> bool {
        self.map.lost()
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The server.
    pub(crate) fn server(&self) -> u32 {
        self.server
    }

    /// The whitelist of allocation `id` (meaningful while it is exported with PID validation).
    pub(crate) fn whitelist(&self, id: u32) -> Option<&ShmWhitelist> {
        self.layout.whitelist(&self.map, id)
    }

    /// Adds importer `who` to slot `id`. Under the lock. 207005 when the slot has
    /// [`MAX_IMPORTERS`] already.
    pub(crate) fn join(&self, _l: &Locked<'_>, id: u32, who: (i32, u64)) -> Result<(), SimError> {
        let s = self.slot(id).ok_or_else(|| {
            SimError::new(
                Error::ParamInvalid,
                format!("allocation id {id} out of range"),
            )
        })?;
        for e in &s.sync.importers {
            if e[0].load(SeqCst) == 0 {
                e[1].store(who.1, SeqCst);
                e[0].store(u64::from(who.0 as u32), SeqCst);
                return Ok(());
            }
        }
        Err(SimError::new(
            Error::ResourceAllocFail,
            format!(
                "allocation {id} on device {} is already imported by {MAX_IMPORTERS} processes",
                self.device
            ),
        ))
    }

    /// Takes the file lock.
    pub(crate) fn lock(&self) -> Result<Locked<'_>, SimError> {
        let local = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let fd = self.map.fd().ok_or_else(|| {
            SimError::new(
                Error::DrvInternalError,
                "device-memory file without descriptor",
            )
        })?;
        loop {
            // SAFETY: an open descriptor of ours; flock takes plain integers.
            if unsafe { libc::flock(fd.raw(), libc::LOCK_EX) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(KIND.os_err(&self.path, "flock", e));
            }
        }
        Ok(Locked {
            file: self,
            _local: local,
        })
    }

    /// Places a new allocation of `size` bytes (`span` reserved) owned by this process at an
    /// arena offset that is a multiple of `align` (a multiple of [`ALLOC_ALIGN`]), and backs
    /// its pages. Under the lock. 207001 when no range or slot is free, or the machine has no
    /// memory left for it.
    pub(crate) fn allocate(
        &self,
        _l: &Locked<'_>,
        size: u64,
        span: u64,
        (policy, align): (u32, u64),
        owner: (i32, u64),
    ) -> Result<Placed, SimError> {
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut free_slot = None;
        let hw = self.high_water();
        for id in 0..hw {
            let Some(s) = self.slot(id) else { break };
            if !matches!(s.state(), Some(SlotState::Live | SlotState::Orphaned)) {
                // Under the lock, a slot half claimed or released was left so by a process
                // that died holding it (the kernel dropped its lock): start it afresh.
                if s.state() != Some(SlotState::Free) {
                    s.clear_stray_holders(u64::MAX);
                    s.retire_orphan();
                }
                if free_slot.is_none() && s.state() == Some(SlotState::Free) {
                    free_slot = Some(id);
                }
                continue;
            }
            live.push((s.sync.off.load(SeqCst), s.sync.span.load(SeqCst)));
        }
        let Some(id) = free_slot.or((hw < MAX_ALLOCS).then_some(hw)) else {
            return Err(self.oom(
                size,
                format_args!("all {MAX_ALLOCS} allocation slots of the device are in use"),
            ));
        };
        live.sort_unstable();
        let mut at = 0u64;
        let mut found = None;
        for (off, len) in live.iter().copied().chain([(self.layout.capacity, 0)]) {
            let start = at.next_multiple_of(align);
            if off >= start && off - start >= span {
                found = Some(start);
                break;
            }
            at = at.max(off.saturating_add(len).next_multiple_of(ALLOC_ALIGN));
        }
        let Some(off) = found else {
            return Err(self.oom(
                size,
                format_args!(
                    "no free range of {span} bytes is left ({} of {} bytes in use by {} \
                     allocations)",
                    self.used(),
                    self.layout.capacity,
                    live.len()
                ),
            ));
        };
        self.back(off, span).map_err(|e| {
            self.oom(
                size,
                format_args!("{SHM_DIR} has no room for its pages ({e}); free some or enlarge it"),
            )
        })?;
        let s = self.slot(id).expect("id < MAX_ALLOCS");
        if id >= hw {
            self.header().high_water.store(id + 1, SeqCst);
        }
        let owner = Owner {
            pid: owner.0,
            start_time: owner.1,
            server: self.server,
            device: self.device,
            // No process table here: importers are listed by identity in the payload.
            proc: 0,
        };
        let generation = s
            .claim_raw(owner, policy, |p| {
                p.off.store(off, SeqCst);
                p.size.store(size, SeqCst);
                p.span.store(span, SeqCst);
                self.header().used.fetch_add(span, SeqCst);
            })
            .inspect(|_| self.usage.add(Component::of_policy(policy), span))
            .map_err(|_| {
                SimError::new(
                    Error::DrvInternalError,
                    format!(
                        "device-memory file {}: slot {id} was chosen free but is not",
                        self.path.display()
                    ),
                )
            })?;
        Ok(Placed {
            id,
            generation,
            off,
        })
    }

    fn oom(&self, size: u64, why: fmt::Arguments<'_>) -> SimError {
        SimError::new(
            Error::MemoryAllocation,
            format!(
                "cannot allocate {size} bytes on device {} (capacity {} bytes, set by {}): {why}",
                self.device,
                self.layout.capacity,
                crate::ENV_DEVICE_MEMORY
            ),
        )
    }

    /// Backs `[off, off + len)` of the arena with pages (so that a full `/dev/shm` shows here,
    /// not as a `SIGBUS` on first write).
    fn back(&self, off: u64, len: u64) -> std::io::Result<()> {
        let fd = self.map.fd().ok_or(std::io::ErrorKind::NotFound)?;
        let start = (self.layout.data_off as u64 + off) as libc::off_t;
        // SAFETY: an open descriptor of ours; plain integers.
        let r = unsafe { libc::fallocate(fd.raw(), 0, start, len as libc::off_t) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Maps arena `[off, off + len)` (page-aligned) readable and writable at this process's
    /// device addresses of it, over their `PROT_NONE` reservation, sharing the file's pages:
    /// memory the host addresses as well as the device (managed memory, [`super::managed`]).
    /// A forked child does not inherit the mapping (`MADV_DONTFORK`): the range is unmapped
    /// there.
    pub(crate) fn open_to_host(&self, off: u64, len: u64) -> std::io::Result<()> {
        let fd = self.map.fd().ok_or(std::io::ErrorKind::NotFound)?;
        self.host_range(off, len)?;
        // SAFETY: `[addr, addr + len)` lies in this file's reservation (checked by
        // `host_range`), which nothing else maps: replacing it affects no other mapping.
        let r = unsafe {
            libc::mmap(
                std::ptr::with_exposed_provenance_mut(self.addr(off)),
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_FIXED,
                fd.raw(),
                (self.layout.data_off as u64 + off) as libc::off_t,
            )
        };
        if r == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // Not inherited by a forked child: the bytes are this process's managed memory, and a
        // child writing through a copy of this shared mapping would change them (a forked
        // child uses nothing it inherited: README, `fork()`).
        // SAFETY: advice on the mapping just made; it changes what a fork copies, nothing here.
        if unsafe { libc::madvise(r, len as usize, libc::MADV_DONTFORK) } != 0 {
            let e = std::io::Error::last_os_error();
            self.close_to_host(off, len);
            return Err(e);
        }
        Ok(())
    }

    /// Makes arena `[off, off + len)` a `PROT_NONE` reservation again (undoes
    /// [`open_to_host`](Self::open_to_host)).
    pub(crate) fn close_to_host(&self, off: u64, len: u64) {
        if self.host_range(off, len).is_err() {
            return;
        }
        // SAFETY: as in `open_to_host`: `[addr, addr + len)` lies in this file's reservation,
        // which nothing else maps; it becomes the reservation `open_file` made again.
        let _ = unsafe {
            reserve_none(
                std::ptr::with_exposed_provenance_mut(self.addr(off)),
                len as usize,
                libc::MAP_FIXED,
            )
        };
    }

    /// `Ok` if arena `[off, off + len)` is whole pages inside the arena.
    fn host_range(&self, off: u64, len: u64) -> std::io::Result<()> {
        let page = PAGE as u64;
        let inside = off
            .checked_add(len)
            .is_some_and(|e| e <= self.layout.capacity);
        if !inside || !off.is_multiple_of(page) || !len.is_multiple_of(page) || len == 0 {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        Ok(())
    }

    /// Gives the pages of `[off, off + len)` back (they read as zero afterwards).
    fn unback(&self, off: u64, len: u64) {
        let Some(fd) = self.map.fd() else { return };
        let start = (self.layout.data_off as u64 + off) as libc::off_t;
        // SAFETY: as in `back`. A failure only leaves the pages allocated.
        unsafe {
            libc::fallocate(
                fd.raw(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                start,
                len as libc::off_t,
            )
        };
    }

    /// Retires slot `id` of generation `generation` (state `from`): pages back, generation
    /// bumped, slot free. Under the lock.
    pub(crate) fn release(
        &self,
        _l: &Locked<'_>,
        id: u32,
        generation: u32,
        from: SlotState,
    ) -> bool {
        let Some(s) = self.slot(id) else { return false };
        if !s.is_in(generation, from) {
            return false;
        }
        let (off, span) = (s.sync.off.load(SeqCst), s.sync.span.load(SeqCst));
        if off
            .checked_add(span)
            .is_some_and(|e| e <= self.layout.capacity)
        {
            self.unback(off, span);
        }
        let used = &self.header().used;
        let _ = used.fetch_update(SeqCst, SeqCst, |u| Some(u.saturating_sub(span)));
        s.retire(generation)
    }

    /// The owner's free of slot `id`: released at once, or orphaned while importers still map
    /// it, their use of it from then on as `importers` says. Under the lock. `false` if the
    /// slot is not this live incarnation.
    pub(crate) fn free_owned(
        &self,
        l: &Locked<'_>,
        id: u32,
        generation: u32,
        importers: Importers,
    ) -> bool {
        let Some(s) = self.slot(id) else { return false };
        if !s.is_live(generation) {
            return false;
        }
        if importer_count(s) == 0 {
            return self.release(l, id, generation, SlotState::Live);
        }
        if importers == Importers::Refused {
            // Before the orphaning: an importer that sees the slot orphaned by this free also
            // sees the mark.
            s.sync.owner_freed.store(1, SeqCst);
        }
        s.orphan(generation)
    }

    /// Drops importer `who` from slot `id`; releases an orphaned slot that nobody imports
    /// any more. Under the lock. Whether `who` was an importer.
    pub(crate) fn leave(&self, l: &Locked<'_>, id: u32, generation: u32, who: (i32, u64)) -> bool {
        let Some(s) = self.slot(id) else { return false };
        if !s.holds(generation) {
            return false;
        }
        let mut was = false;
        for e in &s.sync.importers {
            if e[0].load(SeqCst) == u64::from(who.0 as u32) && e[1].load(SeqCst) == who.1 {
                e[0].store(0, SeqCst);
                e[1].store(0, SeqCst);
                was = true;
                break;
            }
        }
        if importer_count(s) == 0 {
            self.release(l, id, generation, SlotState::Orphaned);
        }
        was
    }

    /// Reclaims for dead processes: a dead owner's live allocations are freed (orphaned if
    /// imported), dead importers are dropped. Under the lock. Returns how many allocations
    /// were released.
    pub(crate) fn reclaim_dead(&self, l: &Locked<'_>) -> u32 {
        let mut n = 0;
        let mut alive = std::collections::HashMap::new();
        let mut is_alive = |pid: i32, start: u64| {
            *alive
                .entry((pid, start))
                .or_insert_with(|| sys::pid_alive(pid, start))
        };
        for id in 0..self.high_water() {
            let Some(s) = self.slot(id) else { break };
            let (generation, state) = (s.generation(), s.state());
            if state == Some(SlotState::Free) {
                continue;
            }
            for e in &s.sync.importers {
                let pid = e[0].load(SeqCst) as u32 as i32;
                if pid != 0 && !is_alive(pid, e[1].load(SeqCst)) {
                    e[0].store(0, SeqCst);
                    e[1].store(0, SeqCst);
                }
            }
            let owner = owner_of(s);
            if state == Some(SlotState::Live) && !is_alive(owner.0, owner.1) {
                // What a dead owner shared stays usable for its importers until they let go
                // (the `owner_freed` field's rule).
                self.free_owned(l, id, generation, Importers::Served);
            }
            let g = s.generation();
            let released = s.state() == Some(SlotState::Free)
                || (importer_count(s) == 0 && self.release(l, id, g, SlotState::Orphaned));
            if released {
                n += 1;
            }
        }
        n
    }
}

/// A read-only mapping of a device-memory file, for the inspector ([`crate::mem::inspect`]):
/// the header, slots and whitelists; no address reservation, no lock, nothing written, no
/// registration anywhere.
pub(crate) struct MemFileView {
    map: Map,
    layout: Layout,
    server: u32,
    device: u32,
}

impl MemFileView {
    /// Maps the file at `path` read-only, its layout taken from its own header (and then
    /// checked like any opener checks it). `Ok(None)` if it does not exist.
    ///
    /// Errors: 507899 not a readable, whole device-memory file of this layout version.
    pub(crate) fn open(path: &Path) -> Result<Option<MemFileView>, SimError> {
        use std::io::Read as _;
        let mut head = [0u8; std::mem::size_of::<Header>()];
        match std::fs::File::open(path) {
            Ok(mut f) => f
                .read_exact(&mut head)
                .map_err(|e| KIND.os_err(path, "reading the header", e))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(KIND.os_err(path, "opening", e)),
        }
        let field = |off: usize, len: usize| {
            let mut b = [0u8; 8];
            b[..len].copy_from_slice(&head[off..off + len]);
            u64::from_ne_bytes(b)
        };
        let capacity = field(std::mem::offset_of!(Header, capacity), 8);
        let server = field(std::mem::offset_of!(Header, server), 4) as u32;
        let device = field(std::mem::offset_of!(Header, device), 4) as u32;
        super::capacity::check_capacity(capacity).map_err(|why| KIND.bad_file(path, why))?;
        let layout = Layout::new(capacity);
        let open = Open {
            path,
            kind: KIND,
            create: false,
            writable: false,
            total: layout.total,
            init_wait: INIT_WAIT,
            keep_fd: false,
        };
        let check = |h: &Header, size| validate(h, path, &layout, server, device, size);
        Ok(open.open(|_: &Header| {}, check)?.map(|map| MemFileView {
            map,
            layout,
            server,
            device,
        }))
    }

    /// The server and device the file simulates.
    pub(crate) fn server_device(&self) -> (u32, u32) {
        (self.server, self.device)
    }

    /// Device memory, in bytes.
    pub(crate) fn capacity(&self) -> u64 {
        self.layout.capacity
    }

    /// Bytes taken by allocations.
    pub(crate) fn used(&self) -> u64 {
        let h = self.map.header::<Header>();
        h.used.load(SeqCst).min(self.layout.capacity)
    }

    /// One past the highest slot ever used, clamped.
    pub(crate) fn high_water(&self) -> u32 {
        let h = self.map.header::<Header>();
        h.high_water.load(SeqCst).min(MAX_ALLOCS)
    }

    /// Allocation slot `id`.
    pub(crate) fn slot(&self, id: u32) -> Option<&MemSlot> {
        self.layout.slot(&self.map, id)
    }

    /// The whitelist of slot `id`.
    pub(crate) fn whitelist(&self, id: u32) -> Option<&ShmWhitelist> {
        self.layout.whitelist(&self.map, id)
    }
}

impl Drop for MemFile {
    fn drop(&mut self) {
        // The arena is unmapped with `map` below: its addresses are checked again.
        crate::valgrind::unhide_arena(self.bytes(0, 0).addr(), self.layout.capacity as usize);
        // The reservation made in `open_file`, given back only here.
        unreserve(self.reserve, self.layout.capacity as usize);
    }
}

/// The header words layout `l` of `device` on `server` fixes: written by the creator and
/// checked by every opener.
fn header_fields<'h>(h: &'h Header, l: &Layout, server: u32, device: u32) -> [Field<'h>; 10] {
    [
        field("server", &h.server, u64::from(server)),
        field("device", &h.device, u64::from(device)),
        field(
            "allocations per device",
            &h.max_allocs,
            u64::from(MAX_ALLOCS),
        ),
        field("slot size", &h.slot_size, SLOT_BYTES as u64),
        field("whitelist size", &h.wl_size, WHITELIST_BYTES as u64),
        field("capacity", &h.capacity, l.capacity),
        field("slot offset", &h.slots_off, l.slots_off as u64),
        field("whitelist offset", &h.wls_off, l.wls_off as u64),
        field("arena offset", &h.data_off, l.data_off as u64),
        field("total size", &h.total, l.total as u64),
    ]
}

fn validate(
    h: &Header,
    path: &Path,
    l: &Layout,
    server: u32,
    device: u32,
    size: u64,
) -> Result<(), SimError> {
    let cap = h.capacity.load(SeqCst);
    if cap != l.capacity {
        return Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "device-memory file {} simulates {cap} bytes of device memory, but this process \
                 asked for {} ({}): give every process of the namespace the same value",
                path.display(),
                l.capacity,
                crate::ENV_DEVICE_MEMORY
            ),
        ));
    }
    KIND.check_fields(path, &header_fields(h, l, server, device), size, l.total)
}

/// Deletes the device-memory files of `namespace`; returns how many were removed.
pub fn remove_mem_files(namespace: &str) -> Result<usize, SimError> {
    crate::mapfile::remove_files(namespace, Some("mem"))
}

//! The notify file's layout: header, process-table entry and device header types, the id
//! pool of a device (of the SoC table's capacity), where each region lies for a SoC and device count ([`Layout`]), and the
//! checks of a header another process wrote.

use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

use acl_notify_core::pool::AtomicIdPool;
use acl_notify_core::soc::AtomicPoolVisitor;
use acl_notify_core::table::{MAX_PROCS, NotifySlot};
use acl_notify_core::{Error, Soc};

use crate::error::SimError;
use crate::mapfile::{Field, Map, PAGE, Shared, align_up, field, soc_from_index, soc_index};

use super::*;

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"ACLNSIM\x01");
/// Bumped whenever the layout changes (2: the id pools' 4-byte slot words and in-use count in
/// the head, replacing the link and state arrays and the bump and in-use counters; notify
/// slots padded to 192 bytes on 64-byte lines; 3: the id pools became bitmaps with "full"
/// hints; 4: a process-table entry being reclaimed names its reclaimer, not the dead process;
/// the header names the creator's PID namespace; 5: the notify slot is the core's shared
/// `Slot`: the record diagnostics follow the flag and queue, the lifecycle comes last; 6: the
/// header's count of busy stream workers and each process-table entry's part of it, which a
/// build of layout 5 would neither keep nor give back on reclaim; 7: each process-table
/// entry's part of the header's count of spinners, likewise; 8: a notify's queue entry in
/// state 3, a lone place (`acl_notify_core::table`'s queue), which a build of layout 7 would
/// take for corruption and whose `try_consume` would take the lone place's record; 9: the
/// notify slot's reserved word is the pid of the owner that destroyed it
/// (`Slot::destroyed_by`), which a build of layout 8 would neither clear at a claim nor set;
/// 10: a whitelist entry holds both a start time and a pidfs identity (24 bytes, was 16), so
/// that a process that cannot open pidfds is checked by its start time); 11: a notify's
/// `shared` word after its diagnostics (in the slot's former padding) and its flag's value 3, a head waiter asleep on a private futex, which a build of layout 10 would not
/// wake); 12: that word's bits 1–31 count the queue's turns, and the waiters queued behind
/// a notify's head sleep on it instead of on the head (a stop can move it:
/// `NotifySync::wake_all`), which a build of layout 11 would neither move nor sleep on, and
/// whose `shared` test (`!= 0`) would take a count for an export; 13: a whitelist entry's
/// `sdid` is an sdid (`acl_notify_core::sdid`: one device, or any device of a server for a
/// same-server entry), where a build of layout 12 wrote the server id, so neither would admit
/// the importers the other whitelisted.
pub const LAYOUT_VERSION: u32 = 13;

/// Process-table entry states (high 32 bits of `ProcEntry::word`; low 32 bits: pid).
pub(crate) const P_FREE: u32 = 0;
pub(crate) const P_CLAIMING: u32 = 1;
pub(crate) const P_ALIVE: u32 = 2;
pub(crate) const P_RECLAIMING: u32 = 3;

/// The file header. Atomics only: other processes write this memory.
#[repr(C)]
pub(crate) struct Header {
    pub(crate) magic: AtomicU64,
    pub(crate) version: AtomicU32,
    pub(crate) ready: AtomicU32,
    pub(crate) header_size: AtomicU32,
    pub(crate) slot_size: AtomicU32,
    pub(crate) proc_entry_size: AtomicU32,
    pub(crate) max_procs: AtomicU32,
    pub(crate) device_header_size: AtomicU32,
    pub(crate) pool_size: AtomicU32,
    pub(crate) whitelist_size: AtomicU32,
    pub(crate) soc: AtomicU32,
    pub(crate) devices: AtomicU32,
    pub(crate) server: AtomicU32,
    pub(crate) max_notifies: AtomicU32,
    pub(crate) creator_pid: AtomicI32,
    pub(crate) total_size: AtomicU64,
    pub(crate) procs_off: AtomicU64,
    pub(crate) devs_off: AtomicU64,
    pub(crate) pools_off: AtomicU64,
    pub(crate) slots_off: AtomicU64,
    pub(crate) whitelists_off: AtomicU64,
    /// The creator's PID namespace (see [`FileHeader::pid_ns`]).
    pub(crate) pid_ns: AtomicU64,
    /// Keeps `spinners`, written by every waiter that spins for long, off the lines above,
    /// which every process reads.
    pub(crate) _pad: [AtomicU64; 16],
    /// Waiters of this namespace and server spinning past their first microsecond right now
    /// (see [`crate::spin`]).
    pub(crate) spinners: AtomicU32,
    /// Stream workers of this namespace and server that want a CPU right now, and threads
    /// woken by a record that have not run yet (see [`crate::spin`]).
    pub(crate) busy: AtomicU32,
}

/// One registered process.
#[repr(C)]
pub(crate) struct ProcEntry {
    /// `state << 32 | pid as u32`; while the entry is being reclaimed, the pid is the
    /// reclaimer's (the dead process's is no longer needed).
    pub(crate) word: AtomicU64,
    pub(crate) start_time: AtomicU64,
    pub(crate) server: AtomicU32,
    /// This process's part of the header's `busy` count: its stream workers counted busy
    /// (see the `busy` module), given back by whoever reclaims the entry.
    pub(crate) busy: AtomicU32,
    /// The process reclaiming this entry: `pid as u32 | (start_time as u32) << 32`, written
    /// after it took the entry; its start time counts while its pid matches the word's.
    pub(crate) reclaimer: AtomicU64,
    /// This process's part of the header's `spinners` count: its waiters counted spinning
    /// (see [`crate::spin`]), given back by whoever reclaims the entry.
    pub(crate) spinners: AtomicU32,
    pub(crate) _r0: AtomicU32,
    pub(crate) _r1: [AtomicU64; 3],
}

/// Per-device bookkeeping.
#[repr(C)]
pub(crate) struct DeviceHeader {
    /// One past the highest id ever allocated (bounds GC scans).
    pub(crate) high_water: AtomicU32,
    pub(crate) _r: [AtomicU32; 15],
}

const _: () = assert!(std::mem::size_of::<ProcEntry>() == 64);
const _: () = assert!(std::mem::size_of::<DeviceHeader>() == 64);
// SAFETY: `Header` is atomics only (every field above); the macro asserts that it fits in a
// page.
crate::mapfile::file_header!(unsafe Header, MAGIC, LAYOUT_VERSION);

/// Whitelist bytes per exported notify.
pub const WHITELIST_BYTES: usize = std::mem::size_of::<ShmWhitelist>();
/// Notify-table bytes per notify (touched only for ids in use).
pub const SLOT_BYTES: usize = std::mem::size_of::<NotifySlot>();

/// What the simulator asks of a device's shared id pool, whatever its capacity: the core's
/// [`AtomicIdPool`] of the size the SoC table gives the file's SoC.
trait SharedPool: Sync {
    fn alloc(&self) -> Result<u32, Error>;
    fn free(&self, id: u32) -> Result<(), Error>;
    fn in_use(&self) -> u32;
    fn capacity(&self) -> u32;
    fn is_allocated(&self, id: u32) -> bool;
    fn end(&self) -> u32;
}

impl<const N: usize, const W: usize> SharedPool for AtomicIdPool<N, W> {
    fn alloc(&self) -> Result<u32, Error> {
        AtomicIdPool::alloc(self)
    }
    fn free(&self, id: u32) -> Result<(), Error> {
        AtomicIdPool::free(self, id)
    }
    fn in_use(&self) -> u32 {
        AtomicIdPool::in_use(self)
    }
    fn capacity(&self) -> u32 {
        AtomicIdPool::capacity(self)
    }
    fn is_allocated(&self, id: u32) -> bool {
        AtomicIdPool::is_allocated(self, id)
    }
    fn end(&self) -> u32 {
        AtomicIdPool::end(self)
    }
}

/// The id pool of one device, of the capacity the SoC table gives the file's SoC
/// ([`Soc::with_atomic_pool`]): creates and destroys go through it, records and waits never.
#[derive(Clone, Copy)]
pub struct PoolRef<'a>(&'a dyn SharedPool);

impl std::fmt::Debug for PoolRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolRef")
            .field("capacity", &self.capacity())
            .field("in_use", &self.in_use())
            .finish()
    }
}

impl PoolRef<'_> {
    /// Takes an id (207009 when full, 507899 when corrupt).
    pub fn alloc(&self) -> Result<u32, Error> {
        self.0.alloc()
    }
    /// Gives an id back.
    pub fn free(&self, id: u32) -> Result<(), Error> {
        self.0.free(id)
    }
    /// Ids allocated.
    pub fn in_use(&self) -> u32 {
        self.0.in_use()
    }
    /// Capacity.
    pub fn capacity(&self) -> u32 {
        self.0.capacity()
    }
    /// Whether `id` is allocated.
    pub fn is_allocated(&self, id: u32) -> bool {
        self.0.is_allocated(id)
    }
    /// One past the highest allocated id (0 if none).
    pub fn end(&self) -> u32 {
        self.0.end()
    }
}

/// Bytes of the id pool of one device of `soc` (0 for a SoC without notifies).
pub(crate) fn pool_size(soc: Soc) -> usize {
    struct Size;
    impl AtomicPoolVisitor for Size {
        type Out = usize;
        fn visit<const N: usize, const W: usize>(self) -> usize {
            if N == 0 {
                0
            } else {
                std::mem::size_of::<AtomicIdPool<N, W>>()
            }
        }
    }
    soc.with_atomic_pool(Size)
}

/// Most devices a simulated machine can have (one bit each in the per-process peer masks and
/// a device header each in the file).
pub const MAX_DEVICES: u32 = 64;

/// Region offsets for one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) soc: Soc,
    pub(crate) devices: u32,
    pub(crate) max: u32,
    pub(crate) pool_size: usize,
    pub(crate) pool_stride: usize,
    pub(crate) wl_size: usize,
    pub(crate) procs_off: usize,
    pub(crate) devs_off: usize,
    pub(crate) pools_off: usize,
    pub(crate) slots_off: usize,
    pub(crate) whitelists_off: usize,
    pub(crate) total: usize,
}

impl Layout {
    pub(crate) fn new(soc: Soc, devices: u32) -> Result<Layout, SimError> {
        let max = soc.max_notifies();
        let pool_size = pool_size(soc);
        let d = devices as usize;
        let n = max as usize;
        let pool_stride = align_up(pool_size, 64);
        let wl_size = if soc.caps().ipc { WHITELIST_BYTES } else { 0 };
        let procs_off = PAGE;
        let devs_off = align_up(procs_off + MAX_PROCS as usize * 64, PAGE);
        let pools_off = align_up(devs_off + d * 64, PAGE);
        let slots_off = align_up(pools_off + d * pool_stride, PAGE);
        let whitelists_off = align_up(slots_off + d * n * SLOT_BYTES, PAGE);
        let total = align_up(whitelists_off + d * n * wl_size, PAGE);
        Ok(Layout {
            soc,
            devices,
            max,
            pool_size,
            pool_stride,
            wl_size,
            procs_off,
            devs_off,
            pools_off,
            slots_off,
            whitelists_off,
            total,
        })
    }

    /// The layout a published header `h` describes, checked field by field against the one
    /// this build computes for its SoC and device count (see [`validate_header`]), `size` being
    /// the file's size: for a reader that does not know the machine's configuration (the
    /// inspector).
    pub(crate) fn read(
        h: &Header,
        path: &Path,
        server: u32,
        size: u64,
    ) -> Result<Layout, SimError> {
        let soc = soc_from_index(h.soc.load(SeqCst))
            .ok_or_else(|| bad_file(path, "corrupt header (unknown SoC)"))?;
        let devices = h.devices.load(SeqCst);
        if !(1..=MAX_DEVICES).contains(&devices) {
            return Err(bad_file(
                path,
                format_args!("corrupt header ({devices} devices)"),
            ));
        }
        let l = Layout::new(soc, devices)?;
        validate_header(h, path, &l, server, size)?;
        Ok(l)
    }

    // ---- the regions, in a mapping of a file of this layout --------------------------------

    /// The process-table entry `i`.
    pub(crate) fn proc_entry<'m>(&self, m: &'m Map, i: u32) -> Option<&'m ProcEntry> {
        (i < MAX_PROCS).then(|| m.at(self.procs_off + i as usize * 64))
    }

    /// The bookkeeping of `dev`.
    pub(crate) fn device_header<'m>(&self, m: &'m Map, dev: u32) -> Option<&'m DeviceHeader> {
        (dev < self.devices).then(|| m.at(self.devs_off + dev as usize * 64))
    }

    /// The id pool of `dev`.
    pub(crate) fn pool<'m>(&self, m: &'m Map, dev: u32) -> Option<PoolRef<'m>> {
        if dev >= self.devices {
            return None;
        }
        if self.max == 0 {
            return None;
        }
        /// The pool at `off` of `m`, as the type the SoC table gives.
        struct At<'m>(&'m Map, usize);
        impl<'m> AtomicPoolVisitor for At<'m> {
            type Out = PoolRef<'m>;
            fn visit<const N: usize, const W: usize>(self) -> PoolRef<'m> {
                PoolRef(self.0.at::<AtomicIdPool<N, W>>(self.1))
            }
        }
        let off = self.pools_off + dev as usize * self.pool_stride;
        Some(self.soc.with_atomic_pool(At(m, off)))
    }

    /// Where the slot of notify `id` on `dev` is in the file (`None` out of range).
    pub(crate) fn slot_offset(&self, dev: u32, id: u32) -> Option<usize> {
        if dev >= self.devices || id >= self.max {
            return None;
        }
        let i = dev as usize * self.max as usize + id as usize;
        Some(self.slots_off + i * SLOT_BYTES)
    }

    /// The slot of notify `id` on `dev`.
    pub(crate) fn slot<'m>(&self, m: &'m Map, dev: u32, id: u32) -> Option<&'m NotifySlot> {
        self.slot_offset(dev, id).map(|off| m.at(off))
    }

    /// The whitelist of notify `id` on `dev` (`None` on a SoC without whitelists).
    pub(crate) fn whitelist<'m>(&self, m: &'m Map, dev: u32, id: u32) -> Option<&'m ShmWhitelist> {
        if self.wl_size == 0 || dev >= self.devices || id >= self.max {
            return None;
        }
        let i = dev as usize * self.max as usize + id as usize;
        Some(m.at(self.whitelists_off + i * WHITELIST_BYTES))
    }
}

// SAFETY: `repr(C)`, atomics only (its definition above).
unsafe impl Shared for Header {}
// SAFETY: `repr(C)`, atomics only (its definition above).
unsafe impl Shared for ProcEntry {}
// SAFETY: `repr(C)`, atomics only (its definition above).
unsafe impl Shared for DeviceHeader {}
// SAFETY: the core's notify slot is made for shared memory: `repr(C)`, atomics and padding
// only (its docs).
unsafe impl Shared for NotifySlot {}

/// The header words this build's layout `l` of server `server` fixes: written by the creator
/// and checked by every opener ([`crate::mapfile::Field`]).
pub(crate) fn header_fields<'h>(h: &'h Header, l: &Layout, server: u32) -> [Field<'h>; 17] {
    use std::mem::size_of;
    [
        field("header size", &h.header_size, size_of::<Header>() as u64),
        field("notify slot size", &h.slot_size, SLOT_BYTES as u64),
        field(
            "process entry size",
            &h.proc_entry_size,
            size_of::<ProcEntry>() as u64,
        ),
        field("process table length", &h.max_procs, u64::from(MAX_PROCS)),
        field(
            "device header size",
            &h.device_header_size,
            size_of::<DeviceHeader>() as u64,
        ),
        field("SoC", &h.soc, u64::from(soc_index(l.soc))),
        field("devices", &h.devices, u64::from(l.devices)),
        field("server id", &h.server, u64::from(server)),
        field("notifies per device", &h.max_notifies, u64::from(l.max)),
        field("pool size", &h.pool_size, l.pool_size as u64),
        field("whitelist size", &h.whitelist_size, l.wl_size as u64),
        field("total size", &h.total_size, l.total as u64),
        field("process table offset", &h.procs_off, l.procs_off as u64),
        field("device table offset", &h.devs_off, l.devs_off as u64),
        field("pool offset", &h.pools_off, l.pools_off as u64),
        field("slot offset", &h.slots_off, l.slots_off as u64),
        field(
            "whitelist offset",
            &h.whitelists_off,
            l.whitelists_off as u64,
        ),
    ]
}

/// Checks a published header (of this kind and version: see [`crate::mapfile::Open::open`])
/// against layout `l` of server `server`, `size` being the file's size: 107000 for another
/// machine, 507899 for any other difference.
pub(crate) fn validate_header(
    h: &Header,
    path: &Path,
    l: &Layout,
    server: u32,
    size: u64,
) -> Result<(), SimError> {
    let machine = (h.soc.load(SeqCst), h.devices.load(SeqCst));
    KIND.check_machine(path, machine, (l.soc, l.devices))?;
    KIND.check_fields(path, &header_fields(h, l, server), size, l.total)
}

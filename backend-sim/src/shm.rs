//! The shared state of one simulated SuperPod server: a file under `/dev/shm` mapped
//! `MAP_SHARED` by every process of the namespace, holding a versioned header, the process
//! table, per-device id pools and high-water marks, the notify table (core [`NotifySlot`]s)
//! and a whitelist slab.
//!
//! # File
//!
//! `/dev/shm/acl-notify-sim.<namespace>.srv<server>` — one file per server id, so SuperPod
//! servers are separate device sets. Created with `O_CREAT|O_EXCL|O_CLOEXEC|O_NOFOLLOW`, mode
//! 0600 (forced with `fchmod` against a restrictive umask), sized with `ftruncate` (sparse: all
//! regions are valid when zero, so nothing is initialised per notify and opening is O(1) even
//! for 8 × 65535 notifies). Exactly one racing creator wins `O_EXCL` and initialises the
//! header; the others wait (bounded) for its ready flag. Every open checks the owner uid, the
//! mode, the size and every header field; any mismatch is a [`SimError`] naming the file.
//!
//! # Layout (all offsets 4 KiB aligned)
//!
//! | region | size |
//! |---|---|
//! | header | 4 KiB |
//! | process table | [`MAX_PROCS`] × 64 B |
//! | device headers | devices × 64 B |
//! | id pools | devices × `size_of::<AtomicIdPool<N>>()` (N = SoC maximum) |
//! | notify slots | devices × N × 192 B |
//! | whitelists (IPC SoCs only) | devices × N × 1040 B, indexed by notify id |
//!
//! The whitelist slab is indexed by notify id rather than allocated from a pool: its pages are
//! touched only when a notify is exported, so the memory cost is the same as an allocating
//! slab, with no allocation failure and nothing to leak when a process dies mid-export.
//!
//! # Processes
//!
//! Each process that maps the file registers in the process table (pid, start time, server).
//! Its table index is the bit it sets in the holder bitmap of every notify it references.
//! [`ShmFile::gc`] finds registered processes that died (pid gone, or start time differs:
//! recycled) and reclaims for them: cancels their queued waits, drops their references, frees
//! ids nobody holds any more, and frees their process-table entry.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use acl_notify_core::pool::{AtomicIdPool, words};
use acl_notify_core::table::{ExportState, Leave, MAX_PROCS, NotifySlot, SlotState, Waiter};
use acl_notify_core::whitelist::Whitelist;
use acl_notify_core::{Error, Soc};

use crate::error::SimError;
use crate::mapfile::{INIT_WAIT, Kind, Open, PAGE, Registry};
use crate::repair::{LeakRepair, all_ids};
use crate::sigbus::Registration;
use crate::sys;

pub use crate::mapfile::{FILE_PREFIX, SHM_DIR};

pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"ACLNSIM\x01");
/// Bumped whenever the layout changes (2: the id pools' 4-byte slot words and in-use count in
/// the head, replacing the link and state arrays and the bump and in-use counters; notify
/// slots padded to 192 bytes on 64-byte lines; 3: the id pools became bitmaps with "full"
/// hints; 4: a process-table entry being reclaimed names its reclaimer, not the dead process;
/// the header names the creator's PID namespace; 5: the notify slot is the core's shared
/// `Slot`: the record diagnostics follow the flag and queue, the lifecycle comes last).
pub const LAYOUT_VERSION: u32 = 5;

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
}

/// One registered process.
#[repr(C)]
pub(crate) struct ProcEntry {
    /// `state << 32 | pid as u32`; while the entry is being reclaimed, the pid is the
    /// reclaimer's (the dead process's is no longer needed).
    pub(crate) word: AtomicU64,
    pub(crate) start_time: AtomicU64,
    pub(crate) server: AtomicU32,
    pub(crate) _r0: AtomicU32,
    /// The process reclaiming this entry: `pid as u32 | (start_time as u32) << 32`, written
    /// after it took the entry; its start time counts while its pid matches the word's.
    pub(crate) reclaimer: AtomicU64,
    pub(crate) _r1: [AtomicU64; 4],
}

/// Per-device bookkeeping.
#[repr(C)]
struct DeviceHeader {
    /// One past the highest id ever allocated (bounds GC scans).
    high_water: AtomicU32,
    _r: [AtomicU32; 15],
}

/// A whitelist in shared memory: a seqlock around the bytes of a core [`Whitelist`].
/// Only the owner process writes it (its threads serialised by a local mutex); importers read.
/// Used for exported notifies here and for exported device memory ([`crate::mem`]).
#[repr(C)]
pub(crate) struct ShmWhitelist {
    seq: AtomicU64,
    words: [AtomicU64; WL_WORDS],
}

const WL_WORDS: usize = std::mem::size_of::<Whitelist>() / 8;

/// The words of a shared whitelist as a [`Whitelist`] (no seqlock check: the caller's).
fn load_whitelist(wl: &ShmWhitelist) -> Whitelist {
    let mut words = [0u64; WL_WORDS];
    for (w, a) in words.iter_mut().zip(&wl.words) {
        *w = a.load(SeqCst);
    }
    // SAFETY: `Whitelist` is `#[repr(C)]`, exactly `WL_WORDS * 8` bytes with alignment ≤ 8
    // (checked at compile time), and made only of integers with no padding, so every bit
    // pattern is a valid value; its length is clamped on every read.
    unsafe { std::mem::transmute::<[u64; WL_WORDS], Whitelist>(words) }
}
// SAFETY: atomics only.
unsafe impl crate::mapfile::Shared for ShmWhitelist {}

impl ShmWhitelist {
    /// A consistent snapshot; `None` if the memory stays inconsistent (a writer died
    /// mid-update).
    pub(crate) fn read(&self) -> Option<Whitelist> {
        for i in 0..10_000 {
            let s1 = self.seq.load(SeqCst);
            if s1 % 2 == 1 {
                if i > 100 {
                    std::thread::yield_now();
                }
                continue;
            }
            let list = load_whitelist(self);
            if self.seq.load(SeqCst) == s1 {
                return Some(list);
            }
        }
        None
    }

    /// Replaces the list after applying `f` to the current one. The caller is the only
    /// writer (its process's threads serialised by the caller's lock), so the current list is
    /// never guessed: a sequence word that is odd, or moves under the only writer, means a
    /// writer died mid-update or another process scribbled on the memory: `Err` says which
    /// (for the caller's 507899), and the stored list is left as it is (rebuilding it from
    /// empty would silently drop every process already whitelisted).
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut Whitelist) -> R) -> Result<R, String> {
        let seq = self.seq.load(SeqCst);
        if seq % 2 == 1 {
            return Err(format!("odd ({seq})"));
        }
        let mut cur = load_whitelist(self);
        let r = f(&mut cur);
        // Nobody else may write between our read and our write: if the word moved, someone did.
        if let Err(now) = self
            .seq
            .compare_exchange(seq, seq.wrapping_add(1), SeqCst, SeqCst)
        {
            return Err(format!("changed from {seq} to {now} under its only writer"));
        }
        self.store(seq.wrapping_add(1), cur);
        Ok(r)
    }

    /// Starts the list afresh (consistent and empty), whatever was left in it. For the only
    /// writer, before anyone else can reach the list.
    pub(crate) fn reset(&self) {
        // Odd while we write, even (and past any value it held) after.
        let odd = self.seq.load(SeqCst) | 1;
        self.seq.store(odd, SeqCst);
        self.store(odd, Whitelist::new());
    }

    /// Writes `list`, with the sequence word set to the odd `odd` by this writer, and
    /// publishes it (sequence `odd + 1`).
    fn store(&self, odd: u64, list: Whitelist) {
        // SAFETY: the same layout argument as in `load_whitelist`, in the other direction:
        // a plain-integer `#[repr(C)]` value of exactly `WL_WORDS * 8` bytes.
        let words = unsafe { std::mem::transmute::<Whitelist, [u64; WL_WORDS]>(list) };
        for (a, w) in self.words.iter().zip(words) {
            a.store(w, SeqCst);
        }
        self.seq.store(odd.wrapping_add(1), SeqCst);
    }
}
const _: () = assert!(std::mem::size_of::<Whitelist>() == WL_WORDS * 8);
const _: () = assert!(std::mem::align_of::<Whitelist>() <= 8);
const _: () = assert!(std::mem::size_of::<ProcEntry>() == 64);
const _: () = assert!(std::mem::size_of::<DeviceHeader>() == 64);
// SAFETY: `Header` is atomics only (every field above); the macro asserts that it fits in a
// page.
crate::mapfile::file_header!(unsafe Header);

/// Whitelist bytes per exported notify.
pub const WHITELIST_BYTES: usize = std::mem::size_of::<ShmWhitelist>();
/// Notify-table bytes per notify (touched only for ids in use).
pub const SLOT_BYTES: usize = std::mem::size_of::<NotifySlot>();

/// The shared id pool of a 950-family device (65535 ids).
pub type Pool65535 = AtomicIdPool<65535, { words(65535) }>;
/// The shared id pool of a 910B / 910_93 device (8192 ids).
pub type Pool8192 = AtomicIdPool<8192, { words(8192) }>;
/// The shared id pool of a 310B device (2048 ids).
pub type Pool2048 = AtomicIdPool<2048, { words(2048) }>;
/// The shared id pool of a 310P / 910 device (1024 ids).
pub type Pool1024 = AtomicIdPool<1024, { words(1024) }>;

/// The id pool of one device, dispatched at run time on the SoC's capacity.
#[derive(Clone, Copy, Debug)]
pub enum PoolRef<'a> {
    /// 65535 ids (950 family).
    P65535(&'a Pool65535),
    /// 8192 ids (910B, 910_93).
    P8192(&'a Pool8192),
    /// 2048 ids (310B).
    P2048(&'a Pool2048),
    /// 1024 ids (310P, 910).
    P1024(&'a Pool1024),
}

macro_rules! pool_dispatch {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            PoolRef::P65535($p) => $e,
            PoolRef::P8192($p) => $e,
            PoolRef::P2048($p) => $e,
            PoolRef::P1024($p) => $e,
        }
    };
}

impl PoolRef<'_> {
    /// Takes an id (207009 when full, 507899 when corrupt).
    pub fn alloc(&self) -> Result<u32, Error> {
        pool_dispatch!(self, p => p.alloc())
    }
    /// Gives an id back.
    pub fn free(&self, id: u32) -> Result<(), Error> {
        pool_dispatch!(self, p => p.free(id))
    }
    /// Ids allocated.
    pub fn in_use(&self) -> u32 {
        pool_dispatch!(self, p => p.in_use())
    }
    /// Capacity.
    pub fn capacity(&self) -> u32 {
        pool_dispatch!(self, p => p.capacity())
    }
    /// Whether `id` is allocated.
    pub fn is_allocated(&self, id: u32) -> bool {
        pool_dispatch!(self, p => p.is_allocated(id))
    }
    /// One past the highest allocated id (0 if none).
    pub fn end(&self) -> u32 {
        pool_dispatch!(self, p => p.end())
    }
}

/// Size of the pool type for `max` ids, or `None` if no pool type exists for it.
pub(crate) fn pool_size(max: u32) -> Option<usize> {
    Some(match max {
        65535 => std::mem::size_of::<Pool65535>(),
        8192 => std::mem::size_of::<Pool8192>(),
        2048 => std::mem::size_of::<Pool2048>(),
        1024 => std::mem::size_of::<Pool1024>(),
        0 => 0,
        _ => return None,
    })
}

const fn align_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// Region offsets for one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    soc: Soc,
    devices: u32,
    max: u32,
    pool_size: usize,
    pool_stride: usize,
    wl_size: usize,
    procs_off: usize,
    devs_off: usize,
    pools_off: usize,
    slots_off: usize,
    whitelists_off: usize,
    total: usize,
}

impl Layout {
    fn new(soc: Soc, devices: u32) -> Result<Layout, SimError> {
        let max = soc.max_notifies();
        let pool_size = pool_size(max).ok_or_else(|| {
            SimError::new(
                Error::DrvInternalError,
                format!("no id pool type for {max} notifies ({soc})"),
            )
        })?;
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
}

/// The path of a namespace's file for `server`.
pub fn file_path(namespace: &str, server: u32) -> PathBuf {
    crate::mapfile::file_path(namespace, "srv", format_args!("{server}"))
}

/// Deletes every notify file of `namespace`; returns how many were removed.
pub fn remove_namespace(namespace: &str) -> Result<usize, SimError> {
    crate::mapfile::remove_files(namespace, Some("srv"))
}

/// Whether to create the file if it does not exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Create it (this process's own server).
    CreateOrOpen,
    /// Only open an existing file (another server, reached through an import key);
    /// `Ok(None)` if it does not exist.
    OpenExisting,
}

/// What a GC pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GcReport {
    /// Dead processes whose references were reclaimed.
    pub processes: u32,
    /// Notify ids freed because their last holder was dead (or leaked by a process that died
    /// half-way through a create or destroy).
    pub notifies_freed: u32,
    /// Queued waits of dead processes that were cancelled.
    pub waits_cancelled: u32,
    /// Count-notify ids freed because their owner was dead (or leaked by a process that died
    /// half-way through a create or destroy). Filled in by `Sim::gc`.
    pub cnt_freed: u32,
}

impl std::ops::AddAssign for GcReport {
    fn add_assign(&mut self, o: GcReport) {
        self.processes += o.processes;
        self.notifies_freed += o.notifies_freed;
        self.waits_cancelled += o.waits_cancelled;
        self.cnt_freed += o.cnt_freed;
    }
}

/// One mapped server file, registered as this process. Shared by every `Sim` of the process
/// that uses the file (see [`open_shared`]).
pub struct ShmFile {
    path: PathBuf,
    base: *mut u8,
    /// The mapping's entry in the `SIGBUS` table (see [`crate::sigbus`]).
    sigbus: Registration,
    layout: Layout,
    server: u32,
    /// This process's index in the process table.
    me: u32,
    pid: i32,
    start_time: u64,
    /// Serialises this process's whitelist writers.
    wl_lock: Mutex<()>,
    /// Leak repair (see [`crate::repair`]): snapshots are (generation, state, holder bits),
    /// the holder bits being strays (of free process-table entries) or none.
    repair: LeakRepair<(u32, Option<SlotState>, u64)>,
    /// This process's live references, for deduplication (see [`SlotRef`]).
    refs: Mutex<RefMap>,
}

/// This process's live [`SlotRef`]s by (device, id, generation).
type RefMap = HashMap<(u32, u32, u32), Weak<SlotRef>, BuildSlotHasher>;

/// The hasher of [`RefMap`]: a multiply-xorshift of the three words, keyed per process.
/// `std`'s SipHash took about 30% of a create+destroy pair; SipHash guards against keys an
/// attacker picks to collide, and these keys are slot coordinates of this process's own
/// notifies (at most 65,535 ids per device), hashed with a random per-process key.
#[derive(Clone, Copy)]
struct BuildSlotHasher(u64);

impl Default for BuildSlotHasher {
    fn default() -> Self {
        // Raced for, not a `OnceLock`: a child forked while another thread initialised one
        // would wait for it for ever (see [`crate::fork`]). 0: not drawn yet.
        static KEY: AtomicU64 = AtomicU64::new(0);
        let key = KEY.load(Relaxed);
        if key != 0 {
            return BuildSlotHasher(key);
        }
        let mut b = [0u8; 8];
        // Without OS randomness the map still works; only its spread is predictable.
        let _ = sys::fill_random(&mut b);
        let drawn = u64::from_ne_bytes(b) | 1;
        // The first draw to land wins; every map of the process uses the same key.
        BuildSlotHasher(match KEY.compare_exchange(0, drawn, Relaxed, Relaxed) {
            Ok(_) => drawn,
            Err(first) => first,
        })
    }
}

impl std::hash::BuildHasher for BuildSlotHasher {
    type Hasher = SlotHasher;
    fn build_hasher(&self) -> SlotHasher {
        SlotHasher(self.0)
    }
}

struct SlotHasher(u64);

impl std::hash::Hasher for SlotHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(4) {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u32(u32::from_ne_bytes(w));
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0 ^ u64::from(v))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        h ^ (h >> 32)
    }
}

// SAFETY: `base` points to a MAP_SHARED mapping owned by this value until drop; all access to
// the mapped memory goes through atomics (the table, pool and header types contain only
// atomics), so sharing the pointer between threads is sound.
unsafe impl Send for ShmFile {}
// SAFETY: as above — every access through `&ShmFile` is an atomic operation or a read of
// immutable local fields.
unsafe impl Sync for ShmFile {}

impl fmt::Debug for ShmFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmFile")
            .field("path", &self.path)
            .field("soc", &self.layout.soc)
            .field("devices", &self.layout.devices)
            .field("server", &self.server)
            .field("proc_index", &self.me)
            .finish_non_exhaustive()
    }
}

const KIND: Kind = Kind("shared memory file");

fn bad_file(path: &Path, problem: impl fmt::Display) -> SimError {
    KIND.bad_file(path, problem)
}

/// The process-wide registry: one mapping and registration per file per process (a forked
/// child starts with an empty one, see [`Registry`]).
pub(crate) static REGISTRY: Registry<ShmFile> = Registry::new();

fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Opens (or reuses this process's mapping of) the file of `namespace`/`server`.
pub fn open_shared(
    namespace: &str,
    server: u32,
    soc: Soc,
    devices: u32,
    mode: OpenMode,
) -> Result<Option<Arc<ShmFile>>, SimError> {
    let path = file_path(namespace, server);
    // A mapping inherited across fork() belongs to the parent's registration: never reuse it
    // (a child starts with an empty registry; this is for a child made without the handler).
    let Some(f) = REGISTRY.get_or_open(
        &path,
        |f| f.pid == sys::getpid(),
        || ShmFile::open(&path, server, soc, devices, mode),
    )?
    else {
        return Ok(None);
    };
    // A mapping this process had already: the same machine must be asked for.
    f.intact()?;
    if f.layout.soc != soc || f.layout.devices != devices {
        return Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "namespace {namespace} (file {}) is already open in this process as {} with {} \
                 devices, not {soc} with {devices}",
                path.display(),
                f.layout.soc,
                f.layout.devices
            ),
        ));
    }
    Ok(Some(f))
}

impl ShmFile {
    /// `Ok` unless the file shrank under this process's mapping (another process truncated
    /// it): then 507899 saying so, for every call from then on (see [`crate::sigbus`]).
    #[inline]
    pub(crate) fn intact(&self) -> Result<(), SimError> {
        self.sigbus.intact(&self.path)
    }

    /// Every size boundary of the layout: where each region starts (the header's end
    /// included), where the second page of each per-device array starts, the end of the
    /// first device's part of each, and the file's end. For truncation tests.
    #[cfg(test)]
    pub(crate) fn layout_boundaries(&self) -> Vec<(&'static str, usize)> {
        let l = &self.layout;
        let n = l.max as usize;
        vec![
            ("nothing kept", 0),
            ("process table", l.procs_off),
            ("device headers", l.devs_off),
            ("id pools", l.pools_off),
            ("id pool page 2", l.pools_off + PAGE),
            ("device 1's id pool", l.pools_off + l.pool_stride),
            ("notify slots", l.slots_off),
            ("notify slots page 2", l.slots_off + PAGE),
            ("device 1's notify slots", l.slots_off + n * SLOT_BYTES),
            ("whitelists", l.whitelists_off),
            ("whitelists page 2", l.whitelists_off + PAGE),
            ("device 1's whitelists", l.whitelists_off + n * l.wl_size),
            ("end (nothing cut)", l.total),
        ]
    }

    /// Whether the file shrank under this process's mapping (see [`intact`](Self::intact)).
    #[inline]
    pub(crate) fn is_lost(&self) -> bool {
        self.sigbus.lost()
    }

    fn open(
        path: &Path,
        server: u32,
        soc: Soc,
        devices: u32,
        mode: OpenMode,
    ) -> Result<Option<ShmFile>, SimError> {
        let layout = Layout::new(soc, devices)?;
        let open = Open {
            path,
            kind: KIND,
            create: mode == OpenMode::CreateOrOpen,
            writable: true,
            total: layout.total,
            init_wait: INIT_WAIT,
            keep_fd: false,
        };
        let fill = |h: &Header| Self::fill_header(h, &layout, server);
        let validate = |h: &Header, size| validate_header(h, path, &layout, server, size);
        let Some(map) = open.open(fill, validate)? else {
            return Ok(None);
        };
        let pid = sys::getpid();
        let start_time = sys::proc_start_time(pid).unwrap_or(0);
        let (base, sigbus) = map.into_raw();
        let mut f = ShmFile {
            path: path.to_owned(),
            base,
            sigbus,
            layout,
            server,
            me: u32::MAX,
            pid,
            start_time,
            wl_lock: Mutex::new(()),
            repair: LeakRepair::new(),
            refs: Mutex::new(RefMap::default()),
        };
        f.me = match f.register() {
            Some(i) => i,
            None => {
                f.gc();
                f.register().ok_or_else(|| {
                    SimError::new(
                        Error::ResourceAllocFail,
                        format!(
                            "{}: {MAX_PROCS} processes are already registered (the maximum per \
                             namespace and server)",
                            path.display()
                        ),
                    )
                })?
            }
        };
        f.gc();
        Ok(Some(f))
    }

    /// The creator's header fields (the creation protocol in [`crate::mapfile`] writes the
    /// creator pid before and publishes the header after).
    fn fill_header(h: &Header, l: &Layout, server: u32) {
        h.magic.store(MAGIC, SeqCst);
        h.version.store(LAYOUT_VERSION, SeqCst);
        h.header_size
            .store(std::mem::size_of::<Header>() as u32, SeqCst);
        h.slot_size.store(SLOT_BYTES as u32, SeqCst);
        h.proc_entry_size
            .store(std::mem::size_of::<ProcEntry>() as u32, SeqCst);
        h.max_procs.store(MAX_PROCS, SeqCst);
        h.device_header_size
            .store(std::mem::size_of::<DeviceHeader>() as u32, SeqCst);
        h.pool_size.store(l.pool_size as u32, SeqCst);
        h.whitelist_size.store(l.wl_size as u32, SeqCst);
        h.soc.store(soc_index(l.soc), SeqCst);
        h.devices.store(l.devices, SeqCst);
        h.server.store(server, SeqCst);
        h.max_notifies.store(l.max, SeqCst);
        h.total_size.store(l.total as u64, SeqCst);
        h.procs_off.store(l.procs_off as u64, SeqCst);
        h.devs_off.store(l.devs_off as u64, SeqCst);
        h.pools_off.store(l.pools_off as u64, SeqCst);
        h.slots_off.store(l.slots_off as u64, SeqCst);
        h.whitelists_off.store(l.whitelists_off as u64, SeqCst);
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The SoC.
    pub fn soc(&self) -> Soc {
        self.layout.soc
    }

    /// Devices.
    pub fn devices(&self) -> u32 {
        self.layout.devices
    }

    /// Notify ids per device.
    pub fn max_notifies(&self) -> u32 {
        self.layout.max
    }

    /// The server id this file simulates.
    pub fn server(&self) -> u32 {
        self.server
    }

    /// This process's index in the process table.
    pub fn me(&self) -> u32 {
        self.me
    }

    /// This process's pid and start time.
    pub fn identity(&self) -> (i32, u64) {
        (self.pid, self.start_time)
    }

    /// The address of `off`, checked to leave room for `size` bytes.
    fn at<T>(&self, off: usize) -> &T {
        crate::mapfile::check_span::<T>(off, self.layout.total);
        // SAFETY: every caller computes `off` from the validated layout with an in-range index,
        // so `off + size_of::<T>() <= total` and `off` is aligned for `T` (regions are page
        // aligned, strides are multiples of the alignment). `T` is one of the shared types,
        // which contain only atomics (any bit pattern valid) and are only accessed atomically.
        unsafe { &*self.base.add(off).cast::<T>() }
    }

    pub(crate) fn proc_entry(&self, i: u32) -> Option<&ProcEntry> {
        (i < MAX_PROCS).then(|| self.at(self.layout.procs_off + i as usize * 64))
    }

    fn device_header(&self, dev: u32) -> Option<&DeviceHeader> {
        (dev < self.layout.devices).then(|| self.at(self.layout.devs_off + dev as usize * 64))
    }

    /// The id pool of `dev`.
    pub fn pool(&self, dev: u32) -> Option<PoolRef<'_>> {
        if dev >= self.layout.devices {
            return None;
        }
        let off = self.layout.pools_off + dev as usize * self.layout.pool_stride;
        Some(match self.layout.max {
            65535 => PoolRef::P65535(self.at(off)),
            8192 => PoolRef::P8192(self.at(off)),
            2048 => PoolRef::P2048(self.at(off)),
            1024 => PoolRef::P1024(self.at(off)),
            _ => return None,
        })
    }

    /// The slot of notify `id` on `dev`.
    pub fn slot(&self, dev: u32, id: u32) -> Option<&NotifySlot> {
        self.slot_offset(dev, id).map(|off| self.at(off))
    }

    /// Where the slot of notify `id` on `dev` is in the file (`None` out of range).
    fn slot_offset(&self, dev: u32, id: u32) -> Option<usize> {
        if dev >= self.layout.devices || id >= self.layout.max {
            return None;
        }
        let i = dev as usize * self.layout.max as usize + id as usize;
        Some(self.layout.slots_off + i * SLOT_BYTES)
    }

    fn shm_whitelist(&self, dev: u32, id: u32) -> Option<&ShmWhitelist> {
        if self.layout.wl_size == 0 || dev >= self.layout.devices || id >= self.layout.max {
            return None;
        }
        let i = dev as usize * self.layout.max as usize + id as usize;
        Some(self.at(self.layout.whitelists_off + i * WHITELIST_BYTES))
    }

    /// Notes that `id` was handed out on `dev` (bounds GC scans).
    pub fn note_allocated(&self, dev: u32, id: u32) {
        if let Some(d) = self.device_header(dev) {
            d.high_water.fetch_max(id.saturating_add(1), SeqCst);
        }
    }

    /// The bound of GC scans on `dev`: past every id ever noted allocated, and past every id
    /// the pool has allocated now (a process killed between allocating an id and noting it,
    /// or a high-water mark written low by another process, must not hide an id from them).
    fn high_water(&self, dev: u32) -> u32 {
        let noted = self
            .device_header(dev)
            .map_or(0, |d| d.high_water.load(SeqCst).min(self.layout.max));
        noted.max(self.pool(dev).map_or(0, |p| p.end()))
    }

    /// The count of this file's waiters that are spinning (see [`crate::spin`]).
    pub(crate) fn spinners(&self) -> &AtomicU32 {
        &self.at::<Header>(0).spinners
    }

    /// The waiter (futex, clock, liveness) for this file's table.
    pub fn waiter(&self) -> SimWaiter<'_> {
        SimWaiter { file: self }
    }

    /// Shared lock held by creates and destroys against the leak-repair pass.
    pub fn op_guard(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.repair.op_guard()
    }

    // ---- whitelists ------------------------------------------------------------------

    /// Reads the whitelist of notify `id` on `dev` (a consistent snapshot). `None` if this
    /// SoC has no whitelists or the memory stays inconsistent (a writer died mid-update).
    pub fn read_whitelist(&self, dev: u32, id: u32) -> Option<Whitelist> {
        self.shm_whitelist(dev, id)?.read()
    }

    /// Replaces the whitelist of notify `id` on `dev` after applying `f` to the current one.
    /// Only the owner process calls this; its threads are serialised here (see
    /// `ShmWhitelist::update`): an inconsistent list is 507899 naming the notify and the
    /// file, and is left as it is.
    pub fn update_whitelist<R>(
        &self,
        dev: u32,
        id: u32,
        f: impl FnOnce(&mut Whitelist) -> R,
    ) -> Result<R, SimError> {
        let wl = self.whitelist_storage(dev, id)?;
        let _g = lock(&self.wl_lock);
        wl.update(f)
            .map_err(|seq| self.inconsistent_whitelist(dev, id, seq))
    }

    /// Starts the whitelist of notify `id` on `dev` afresh (consistent and empty), whatever a
    /// previous use of the id, a dead writer or another process left in it. For the owner
    /// when it exports: until then nobody else can reach the whitelist (no key exists), and
    /// the list is first needed then. (Not at create: that would touch a whitelist page for
    /// every notify; the slab is only paged in for exported notifies.) Called only by the
    /// export call that won the slot's export word (`NotifySlot::export_with`), before it
    /// publishes, so no refused export reaches it; it still does nothing once the notify is
    /// published as exported, against a caller that breaks that rule.
    pub fn reset_whitelist(&self, dev: u32, id: u32) -> Result<(), SimError> {
        let wl = self.whitelist_storage(dev, id)?;
        let _g = lock(&self.wl_lock);
        if self
            .slot(dev, id)
            .is_some_and(|s| s.export_state() != Some(ExportState::None))
        {
            return Ok(());
        }
        wl.reset();
        Ok(())
    }

    /// The whitelist memory of notify `id` on `dev` (507899 if this SoC has none or the id is
    /// out of range: the callers checked both).
    fn whitelist_storage(&self, dev: u32, id: u32) -> Result<&ShmWhitelist, SimError> {
        self.shm_whitelist(dev, id).ok_or_else(|| {
            SimError::new(
                Error::DrvInternalError,
                format!(
                    "no whitelist storage for notify {id} on device {dev} in {} ({} has no IPC, \
                     or the id is out of range)",
                    self.path.display(),
                    self.layout.soc
                ),
            )
        })
    }

    /// 507899: the whitelist of notify `id` on `dev` cannot be trusted (`seq` says why).
    fn inconsistent_whitelist(&self, dev: u32, id: u32, seq: impl fmt::Display) -> SimError {
        SimError::new(
            Error::DrvInternalError,
            format!(
                "the whitelist memory of notify {id} on device {dev} in shared memory file {} is \
                 inconsistent (its sequence word is {seq}): a writer died mid-update or another \
                 process corrupted it; the whitelist was left unchanged (destroy the notify and \
                 create a new one)",
                self.path.display()
            ),
        )
    }

    // ---- processes ---------------------------------------------------------------------

    /// Takes a free entry by a CAS from 0 (so two processes never share one), fills it in and
    /// publishes it alive last; a reclaimer meanwhile sees it claiming, by a live pid.
    fn register(&self) -> Option<u32> {
        let claiming = (u64::from(P_CLAIMING) << 32) | u64::from(self.pid as u32);
        for i in 0..MAX_PROCS {
            let e = self.proc_entry(i)?;
            if e.word.compare_exchange(0, claiming, SeqCst, SeqCst).is_ok() {
                e.start_time.store(self.start_time, SeqCst);
                e.server.store(self.server, SeqCst);
                e.reclaimer.store(0, SeqCst);
                e.word.store(
                    (u64::from(P_ALIVE) << 32) | u64::from(self.pid as u32),
                    SeqCst,
                );
                return Some(i);
            }
        }
        None
    }

    /// Whether the process in table slot `i` is alive (ourselves included).
    pub fn proc_alive(&self, i: u32) -> bool {
        if i == self.me {
            return true;
        }
        let Some(e) = self.proc_entry(i) else {
            return false;
        };
        let w = e.word.load(SeqCst);
        let pid = w as u32 as i32;
        match (w >> 32) as u32 {
            P_CLAIMING => sys::pid_alive(pid, 0),
            P_ALIVE => sys::pid_alive(pid, e.start_time.load(SeqCst)),
            _ => false,
        }
    }

    /// `Ok` while this process's process-table entry still names it. Another process that took
    /// it for dead (its entry's start time or state overwritten) has dropped its references
    /// and may have handed the entry to a newcomer: then 507899, rather than taking new
    /// references under an index that is no longer this process's.
    pub(crate) fn still_registered(&self) -> Result<(), SimError> {
        let mine = (u64::from(P_ALIVE) << 32) | u64::from(self.pid as u32);
        match self.proc_entry(self.me) {
            Some(e)
                if e.word.load(SeqCst) == mine && e.start_time.load(SeqCst) == self.start_time =>
            {
                Ok(())
            }
            _ => Err(SimError::new(
                Error::DrvInternalError,
                format!(
                    "{}: this process's entry {} in the process table no longer names it \
                     (another process overwrote it, or took this process for dead and \
                     reclaimed it); its notifies are no longer tracked: remove the namespace",
                    self.path.display(),
                    self.me
                ),
            )),
        }
    }

    /// Pid (and whether alive) of every registered process, for messages.
    pub fn registered(&self) -> Vec<(i32, bool)> {
        (0..MAX_PROCS)
            .filter_map(|i| {
                let e = self.proc_entry(i)?;
                let w = e.word.load(SeqCst);
                ((w >> 32) as u32 != P_FREE).then(|| (w as u32 as i32, self.proc_alive(i)))
            })
            .collect()
    }

    /// The pid of the process in table slot `i` (0 if free).
    pub fn proc_pid(&self, i: u32) -> i32 {
        self.proc_entry(i)
            .map_or(0, |e| e.word.load(SeqCst) as u32 as i32)
    }

    /// Reclaims for every dead registered process; then repairs ids leaked by processes that
    /// died between two steps of a create or destroy, or kept by stray holder bits (allocated
    /// in the pool, no holder but bits of free process-table entries, in the same state for
    /// longer than the repair grace period, 10 s).
    pub fn gc(&self) -> GcReport {
        let mut report = self.reclaim_dead();
        report.notifies_freed += self.repair_leaks();
        report
    }

    /// The first half of [`gc`](Self::gc): drops the references of every registered process
    /// that is dead (a few `/proc` reads, one per registered process; a scan of the slots only
    /// when one is dead).
    pub fn reclaim_dead(&self) -> GcReport {
        let mut report = GcReport::default();
        let me_word = u64::from(self.pid as u32) | ((self.start_time & 0xffff_ffff) << 32);
        // A reclaimed entry's state word names its reclaimer, so that taking the entry and
        // saying who took it are one compare-and-swap: a second pass never finds an entry
        // being reclaimed without knowing by whom (and so never reclaims it a second time
        // alongside the first). `reclaimer` adds the reclaimer's start time, written by the
        // winner after the swap; it counts only while its pid matches the word's.
        let reclaiming = (u64::from(P_RECLAIMING) << 32) | u64::from(self.pid as u32);
        let take = |e: &ProcEntry, w: u64| {
            let won = e
                .word
                .compare_exchange(w, reclaiming, SeqCst, SeqCst)
                .is_ok();
            if won {
                e.reclaimer.store(me_word, SeqCst);
            }
            won
        };
        for i in 0..MAX_PROCS {
            if i == self.me {
                continue;
            }
            let Some(e) = self.proc_entry(i) else { break };
            let w = e.word.load(SeqCst);
            let state = (w >> 32) as u32;
            let pid = w as u32 as i32;
            let taken = match state {
                P_FREE => false,
                // Decided by /proc, taken by a CAS from the word read: an entry that changed
                // meanwhile (freed, re-registered) is left alone. The liveness test is by pid
                // and start time in ticks, so a dead process whose pid was given, within the
                // same tick, to a process of another kind keeps its entry until that one dies
                // too: a late reclaim, never a live process's references dropped.
                P_CLAIMING | P_ALIVE => !self.proc_alive(i) && take(e, w),
                P_RECLAIMING => {
                    // Taken over only if the reclaimer (the word's pid) itself died.
                    let r = e.reclaimer.load(SeqCst);
                    let rstart = if r as u32 == pid as u32 { r >> 32 } else { 0 };
                    let alive = sys::proc_start_time(pid)
                        .is_some_and(|s| rstart == 0 || (s & 0xffff_ffff) == rstart);
                    !alive && take(e, w)
                }
                // A state no build writes (corruption): reclaimed only once its pid is gone,
                // so that a scribbled word cannot get a live process's notifies freed under it.
                _ => !sys::pid_alive(pid, 0) && take(e, w),
            };
            if !taken {
                continue;
            }
            report += self.reclaim_proc(i);
            report.processes += 1;
            e.start_time.store(0, SeqCst);
            // Only ours to free while it still names us.
            let _ = e.word.compare_exchange(reclaiming, 0, SeqCst, SeqCst);
        }
        report
    }

    /// Drops every reference process-table slot `i` holds, on every device.
    pub(crate) fn reclaim_proc(&self, i: u32) -> GcReport {
        let mut r = GcReport::default();
        let w = self.waiter();
        for dev in 0..self.layout.devices {
            let Some(pool) = self.pool(dev) else { continue };
            for id in 0..self.high_water(dev) {
                let Some(slot) = self.slot(dev, id) else {
                    break;
                };
                if slot.holders() & (1u64 << i) == 0 {
                    continue;
                }
                r.waits_cancelled += slot.sync.cancel_proc_tickets(&w, i);
                if slot.leave(i) == Leave::Last && pool.free(id).is_ok() {
                    r.notifies_freed += 1;
                }
            }
        }
        r
    }

    /// Frees ids that are allocated in a pool but whose slot has had no holder, in an
    /// unchanged state, for the whole grace period: left behind by a process killed between
    /// allocating and claiming, between dropping its last reference and retiring, or between
    /// retiring and freeing. This process's own creates and destroys are held off meanwhile.
    ///
    /// Holder bits of process-table entries that are free count as no holder: nobody reclaims
    /// them (only registered dead processes are reclaimed), so such a stray bit (corrupt
    /// memory, or a reference that outlived its process's entry) would keep the id allocated
    /// for ever. They are part of the observed state, so they too must stay the same for the
    /// grace period, and are cleared (exactly those bits) only while the repair holds their
    /// entries, so that no process can register there and join meanwhile.
    fn repair_leaks(&self) -> u32 {
        let ids = all_ids(self.layout.devices, |dev| self.high_water(dev));
        let free = self.free_procs();
        self.repair.sweep(
            ids,
            |dev, id| {
                let slot = self.slot(dev, id)?;
                let pool = self.pool(dev)?;
                let holders = slot.holders();
                (pool.is_allocated(id) && holders & !free == 0)
                    .then(|| (slot.generation(), slot.state(), holders))
            },
            |dev, id| self.repair_orphan(dev, id),
        )
    }

    /// Retires and frees an id the repair pass found orphaned for the grace period, after
    /// clearing its stray holder bits (see [`repair_leaks`](Self::repair_leaks)). `false` if
    /// it is not an orphan any more (a bit is of an occupied entry, or someone joined).
    fn repair_orphan(&self, dev: u32, id: u32) -> bool {
        let (Some(slot), Some(pool)) = (self.slot(dev, id), self.pool(dev)) else {
            return false;
        };
        let stray = slot.holders();
        // Held until the slot is retired: a process cannot register in these entries (and so
        // cannot join with one of these bits) before the bits are gone.
        let _hold = if stray == 0 {
            None
        } else {
            let Some(hold) = self.hold_free_procs(stray) else {
                return false;
            };
            if slot.clear_stray_holders(stray) != 0 {
                return false;
            }
            Some(hold)
        };
        slot.retire_orphan() && pool.free(id).is_ok()
    }

    /// The bits of the process-table entries that no process occupies (state free).
    fn free_procs(&self) -> u64 {
        (0..MAX_PROCS)
            .filter(|&i| {
                self.proc_entry(i)
                    .is_some_and(|e| (e.word.load(SeqCst) >> 32) as u32 == P_FREE)
            })
            .fold(0, |m, i| m | (1u64 << i))
    }

    /// Occupies the free process-table entries of `mask` as this process would while
    /// registering (state claiming, this pid), so that nobody registers there until the
    /// returned hold is dropped (which frees them). `None` (nothing held) if any of them is
    /// not free. Should this process die meanwhile, the entries are reclaimed like those of
    /// any process that died while registering.
    fn hold_free_procs(&self, mask: u64) -> Option<ProcHold<'_>> {
        let word = (u64::from(P_CLAIMING) << 32) | u64::from(self.pid as u32);
        let mut hold = ProcHold {
            file: self,
            word,
            held: 0,
        };
        for i in (0..MAX_PROCS).filter(|&i| mask & (1u64 << i) != 0) {
            let e = self.proc_entry(i)?;
            let w = e.word.load(SeqCst);
            if (w >> 32) as u32 != P_FREE
                || e.word.compare_exchange(w, word, SeqCst, SeqCst).is_err()
            {
                return None;
            }
            hold.held |= 1u64 << i;
        }
        Some(hold)
    }

    // ---- references ---------------------------------------------------------------------

    /// Lock of the reference map (used by `SlotRef` creation and drop).
    fn refs(&self) -> std::sync::MutexGuard<'_, RefMap> {
        lock(&self.refs)
    }
}

/// Free process-table entries occupied by a repair pass (see [`ShmFile::hold_free_procs`]);
/// freed again on drop.
struct ProcHold<'a> {
    file: &'a ShmFile,
    /// The word the entries hold (state claiming, this pid).
    word: u64,
    held: u64,
}

impl Drop for ProcHold<'_> {
    fn drop(&mut self) {
        for i in (0..MAX_PROCS).filter(|&i| self.held & (1u64 << i) != 0) {
            if let Some(e) = self.file.proc_entry(i) {
                // Unless someone else took the entry over meanwhile (it would have had to
                // think this process dead).
                let _ = e.word.compare_exchange(self.word, 0, SeqCst, SeqCst);
            }
        }
    }
}

impl Drop for ShmFile {
    fn drop(&mut self) {
        // No `SlotRef` is left (each holds an `Arc<ShmFile>`), so this process holds nothing;
        // clear any stray bit anyway, then free the process-table entry. In a child forked
        // with this mapping, the registration is the parent's: leave it alone.
        if self.pid == sys::getpid() {
            let _ = self.reclaim_proc(self.me);
            if let Some(e) = self.proc_entry(self.me) {
                e.start_time.store(0, SeqCst);
                e.word.store(0, SeqCst);
            }
        }
        self.sigbus.release();
        // SAFETY: `base`/`total` describe our mapping; nothing borrows it any more (`&self`
        // borrows ended, and `SlotRef`s keep the `Arc` alive while they exist).
        unsafe { libc::munmap(self.base.cast(), self.layout.total) };
    }
}

fn soc_index(soc: Soc) -> u32 {
    Soc::ALL.iter().position(|s| *s == soc).unwrap_or(0) as u32 + 1
}

fn soc_from_index(i: u32) -> Option<Soc> {
    Soc::ALL.get((i as usize).checked_sub(1)?).copied()
}

fn validate_header(
    h: &Header,
    path: &Path,
    l: &Layout,
    server: u32,
    size: u64,
) -> Result<(), SimError> {
    if h.magic.load(SeqCst) != MAGIC {
        return Err(bad_file(
            path,
            "bad magic: not an acl-notify simulator file",
        ));
    }
    let v = h.version.load(SeqCst);
    if v != LAYOUT_VERSION {
        return Err(bad_file(
            path,
            format_args!("layout version {v}, this build reads version {LAYOUT_VERSION}"),
        ));
    }
    let sizes = [
        (
            "header size",
            h.header_size.load(SeqCst),
            std::mem::size_of::<Header>(),
        ),
        ("notify slot size", h.slot_size.load(SeqCst), SLOT_BYTES),
        ("process entry size", h.proc_entry_size.load(SeqCst), 64),
        (
            "process table length",
            h.max_procs.load(SeqCst),
            MAX_PROCS as usize,
        ),
        ("device header size", h.device_header_size.load(SeqCst), 64),
    ];
    for (what, got, want) in sizes {
        if got as usize != want {
            return Err(bad_file(
                path,
                format_args!("{what} is {got}, this build uses {want}"),
            ));
        }
    }
    let soc = soc_from_index(h.soc.load(SeqCst));
    let devices = h.devices.load(SeqCst);
    match soc {
        None => return Err(bad_file(path, "corrupt header (unknown SoC)")),
        Some(s) if s != l.soc || devices != l.devices => {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "shared memory file {} simulates {s} with {devices} devices, but this \
                     process asked for {} with {} devices: set ACL_NOTIFY_SIM_SOC and \
                     ACL_NOTIFY_SIM_DEVICES alike in every process of a namespace, or use \
                     another ACL_NOTIFY_SIM_NAMESPACE",
                    path.display(),
                    l.soc,
                    l.devices
                ),
            ));
        }
        Some(_) => {}
    }
    let fields = [
        (
            "server id",
            u64::from(h.server.load(SeqCst)),
            u64::from(server),
        ),
        (
            "notifies per device",
            u64::from(h.max_notifies.load(SeqCst)),
            u64::from(l.max),
        ),
        (
            "pool size",
            u64::from(h.pool_size.load(SeqCst)),
            l.pool_size as u64,
        ),
        (
            "whitelist size",
            u64::from(h.whitelist_size.load(SeqCst)),
            l.wl_size as u64,
        ),
        ("total size", h.total_size.load(SeqCst), l.total as u64),
        (
            "process table offset",
            h.procs_off.load(SeqCst),
            l.procs_off as u64,
        ),
        (
            "device table offset",
            h.devs_off.load(SeqCst),
            l.devs_off as u64,
        ),
        ("pool offset", h.pools_off.load(SeqCst), l.pools_off as u64),
        ("slot offset", h.slots_off.load(SeqCst), l.slots_off as u64),
        (
            "whitelist offset",
            h.whitelists_off.load(SeqCst),
            l.whitelists_off as u64,
        ),
        ("file size", size, l.total as u64),
    ];
    for (what, got, want) in fields {
        if got != want {
            return Err(bad_file(
                path,
                format_args!("corrupt header: {what} is {got}, expected {want}"),
            ));
        }
    }
    Ok(())
}

/// The [`Waiter`] of a mapped file: shared futexes, `CLOCK_MONOTONIC`, and liveness from the
/// process table.
#[derive(Clone, Copy, Debug)]
pub struct SimWaiter<'a> {
    file: &'a ShmFile,
}

impl<'a> SimWaiter<'a> {
    /// The count of the file's waiters that are spinning (see [`crate::spin`]).
    pub(crate) fn spinners(&self) -> &'a AtomicU32 {
        self.file.spinners()
    }
}

impl Waiter for SimWaiter<'_> {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        sys::futex_wait(word, expected, timeout);
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        // Linux often puts a thread it wakes on the waker's CPU, where it waits until the waker
        // sleeps or yields — and a stream worker goes on to spin for its next task. Yield once
        // when someone was woken (a sleeper's wake-up costs microseconds anyway), so that the
        // woken thread runs now if it landed here; with nothing else runnable here the yield
        // returns at once.
        if sys::futex_wake(word, n) > 0 {
            std::thread::yield_now();
        }
    }
    fn now_ns(&self) -> u64 {
        sys::now_ns()
    }
    fn stamp_ns(&self) -> u64 {
        sys::coarse_now_ns()
    }
    fn relax(&self) {
        std::thread::yield_now();
    }
    fn proc_alive(&self, proc: u32) -> bool {
        self.file.proc_alive(proc)
    }
}

/// This process's reference to one notify (its bit in the holder bitmap). Shared by every
/// handle and queued task of the process that uses the notify; the bit is cleared when the
/// last `Arc<SlotRef>` goes, and the id freed if no other process holds it.
pub struct SlotRef {
    file: Arc<ShmFile>,
    /// `file.slot_offset(dev, id)`, worked out once: records and waits ask for the slot on
    /// every task.
    slot_off: usize,
    dev: u32,
    id: u32,
    generation: u32,
}

impl fmt::Debug for SlotRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotRef")
            .field("server", &self.file.server)
            .field("device", &self.dev)
            .field("id", &self.id)
            .field("generation", &self.generation)
            .finish()
    }
}

/// How [`SlotRef::create`] failed.
#[derive(Debug)]
pub enum CreateError {
    /// The pool is full (after a GC pass).
    Exhausted,
    /// Another error.
    Other(SimError),
}

impl SlotRef {
    /// Allocates an id on `dev` and claims it for this process. The caller has checked `dev`.
    pub fn create(
        file: &Arc<ShmFile>,
        dev: u32,
        flags: acl_notify_core::CreateFlags,
    ) -> Result<Arc<SlotRef>, CreateError> {
        let pool = file.pool(dev).ok_or_else(|| {
            CreateError::Other(SimError::new(
                Error::InvalidDeviceId,
                format!("no device {dev}"),
            ))
        })?;
        let _g = file.op_guard();
        // Taken before the alloc so that nothing can block between allocating the id and
        // claiming its slot: a process killed in between leaks the id until the repair grace
        // period ends (see `crate::repair`), so that window is kept as short as it can be.
        let mut refs = file.refs();
        let id = match pool.alloc() {
            Ok(id) => id,
            Err(Error::NoNotifyResource) => return Err(CreateError::Exhausted),
            Err(e) => {
                return Err(CreateError::Other(SimError::new(
                    e,
                    format!("notify id pool of device {dev} in {}", file.path.display()),
                )));
            }
        };
        file.note_allocated(dev, id);
        let corrupt = |what: &str| {
            CreateError::Other(SimError::new(
                Error::DrvInternalError,
                format!(
                    "notify table of device {dev} in {} is corrupt: {what} for id {id}",
                    file.path.display()
                ),
            ))
        };
        let slot_off = file
            .slot_offset(dev, id)
            .ok_or_else(|| corrupt("id out of range"))?;
        let slot: &NotifySlot = file.at(slot_off);
        let owner = acl_notify_core::table::Owner {
            pid: file.pid,
            start_time: file.start_time,
            server: file.server,
            device: dev,
            proc: file.me,
        };
        let generation = match slot.claim(owner, flags) {
            Ok(g) => g,
            Err(_) => {
                // Leave the id allocated: its slot is in an unknown state.
                return Err(corrupt("slot handed out while in use"));
            }
        };
        let r = Arc::new(SlotRef {
            file: Arc::clone(file),
            slot_off,
            dev,
            id,
            generation,
        });
        refs.insert((dev, id, generation), Arc::downgrade(&r));
        Ok(r)
    }

    /// Joins the notify `id` on `dev` of generation `generation` as this process (an import),
    /// reusing this process's existing reference if it has one. `None` = stale (107017).
    pub fn join(file: &Arc<ShmFile>, dev: u32, id: u32, generation: u32) -> Option<Arc<SlotRef>> {
        let slot_off = file.slot_offset(dev, id)?;
        let slot: &NotifySlot = file.at(slot_off);
        let _g = file.op_guard();
        let mut refs = file.refs();
        if let Some(r) = refs.get(&(dev, id, generation)).and_then(Weak::upgrade) {
            return Some(r);
        }
        match slot.join(file.me, generation) {
            Ok(_) => {}
            Err(Some(Leave::Last)) => {
                if let Some(p) = file.pool(dev) {
                    let _ = p.free(id);
                }
                return None;
            }
            Err(_) => return None,
        }
        let r = Arc::new(SlotRef {
            file: Arc::clone(file),
            slot_off,
            dev,
            id,
            generation,
        });
        refs.insert((dev, id, generation), Arc::downgrade(&r));
        Some(r)
    }

    /// The slot.
    #[inline]
    pub fn slot(&self) -> &NotifySlot {
        // `slot_off` was checked against the file's layout at construction.
        self.file.at(self.slot_off)
    }

    /// The mapped file.
    pub fn file(&self) -> &Arc<ShmFile> {
        &self.file
    }

    /// Device of the notify (the owner's device).
    pub fn device(&self) -> u32 {
        self.dev
    }

    /// Notify id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Generation of the id this reference holds.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Whether the slot is still the incarnation this reference holds (one load, on the
    /// flag's line: see [`NotifySlot::is_current`]).
    #[inline]
    pub fn is_live(&self) -> bool {
        self.slot().is_current(self.generation)
    }

    /// `Ok` while the slot is still the incarnation this reference holds. It stops being so
    /// only if another process took this one for dead and dropped its references (its
    /// process-table entry was overwritten): then 507899, before a record or wait touches
    /// what may by now be another process's notify.
    #[inline]
    pub fn live(&self) -> Result<(), SimError> {
        if self.is_live() {
            Ok(())
        } else {
            Err(self.gone())
        }
    }

    #[cold]
    fn gone(&self) -> SimError {
        // Zeros read from a page a truncation cut off are not another process's doing.
        if let Err(e) = self.file.intact() {
            return e;
        }
        SimError::new(
            Error::DrvInternalError,
            format!(
                "notify {} of device {} in {}: this process no longer holds it: another process \
                 dropped this process's references (it found this process's process-table \
                 entry {} dead or overwritten), and the id may now be another notify's; \
                 remove the namespace",
                self.id,
                self.dev,
                self.file.path.display(),
                self.file.me
            ),
        )
    }
}

impl Drop for SlotRef {
    fn drop(&mut self) {
        let file = &self.file;
        if file.pid != sys::getpid() {
            // Inherited across fork(): the bit is the parent's.
            return;
        }
        let _g = file.op_guard();
        let mut refs = file.refs();
        let key = (self.dev, self.id, self.generation);
        match refs.get(&key) {
            // A newer reference of this process to the same notify exists (created after our
            // strong count hit zero): it relies on the bit, keep it.
            Some(w)
                if !std::ptr::eq(w.as_ptr(), self as *const SlotRef) && w.strong_count() > 0 =>
            {
                return;
            }
            Some(w) if std::ptr::eq(w.as_ptr(), self as *const SlotRef) => {
                refs.remove(&key);
            }
            _ => {}
        }
        let Some(slot) = file.slot(self.dev, self.id) else {
            return;
        };
        if !slot.is_live(self.generation) {
            // Our references were dropped for us (see `live`): the bit at our index, if set,
            // is not ours.
            return;
        }
        if slot.leave(file.me) == Leave::Last
            && let Some(p) = file.pool(self.dev)
        {
            let _ = p.free(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use acl_notify_core::{BackendError, CreateFlags};

    fn ns(tag: &str) -> String {
        format!("unit-shm-{tag}-{}", sys::getpid())
    }

    #[test]
    fn the_reference_map_hash_spreads_slot_coordinates() {
        use std::hash::BuildHasher;
        let b = BuildSlotHasher::default();
        // Ids of one device and generation, then one id over many generations and devices:
        // the low 16 bits (what a map of this size indexes by) must look random. 65,536 random
        // draws from 65,536 values give about 41,400 distinct ones.
        let low = |keys: &mut dyn Iterator<Item = (u32, u32, u32)>| {
            keys.map(|k| b.hash_one(k) & 0xffff)
                .collect::<std::collections::HashSet<_>>()
                .len()
        };
        let ids = low(&mut (0..65536).map(|id| (0, id, 7)));
        let gens = low(&mut (0..65536).map(|g| (g % 8, 42, g / 8)));
        assert!(
            ids > 39_000 && gens > 39_000,
            "poor spread: {ids}, {gens} of 65536"
        );
        // Keyed: another key orders the same coordinates differently.
        let other = BuildSlotHasher(b.0 ^ 0x5555_0000_0000_0000);
        assert_ne!(b.hash_one((0, 1, 1)), other.hash_one((0, 1, 1)));
    }
    #[test]
    fn layout_sizes() {
        assert_eq!(SLOT_BYTES, 192);
        assert_eq!(WHITELIST_BYTES, 1040);
        let l = Layout::new(Soc::Ascend950PR, 8).unwrap();
        assert!(l.total > 8 * 65535 * (SLOT_BYTES + WHITELIST_BYTES));
        let l = Layout::new(Soc::Ascend310B, 1).unwrap();
        assert_eq!(l.wl_size, 0);
        assert!(Layout::new(Soc::IPV350, 2).is_ok());
    }

    #[test]
    fn create_join_release_frees_the_id() {
        let n = ns("cjr");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 2, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let st = std::fs::metadata(f.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(st.permissions().mode() & 0o777, 0o600);
        let pool = f.pool(1).unwrap();
        assert_eq!(pool.capacity(), 8192);
        let r = SlotRef::create(&f, 1, CreateFlags::empty()).unwrap();
        assert_eq!(pool.in_use(), 1);
        let again = SlotRef::join(&f, 1, r.id(), r.generation()).unwrap();
        assert!(Arc::ptr_eq(&r, &again));
        assert!(SlotRef::join(&f, 1, r.id(), r.generation() + 1).is_none());
        let (id, g) = (r.id(), r.generation());
        drop(r);
        assert_eq!(pool.in_use(), 1, "still referenced by `again`");
        drop(again);
        assert_eq!(pool.in_use(), 0);
        assert_eq!(f.slot(1, id).unwrap().generation(), g + 1);
        // Whitelists round-trip through the seqlock.
        let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        f.reset_whitelist(0, r.id()).unwrap();
        f.update_whitelist(0, r.id(), |wl| wl.add_pids(0, &[5, 6]))
            .unwrap()
            .unwrap();
        let wl = f.read_whitelist(0, r.id()).unwrap();
        assert_eq!(wl.len(), 2);
        assert!(wl.matches(0, 6, 0));
        drop(r);
        drop(f);
        assert_eq!(remove_namespace(&n).unwrap(), 1);
    }

    /// Only this process writes its whitelists, so a sequence word that is odd, or moves,
    /// while its writer lock is held is a dead writer or another process scribbling: the update
    /// fails with 507899 naming the notify and the file, and the stored list is kept (it used
    /// to be rebuilt from empty, dropping every process already whitelisted).
    #[test]
    fn an_inconsistent_whitelist_is_reported_and_kept_not_rebuilt_from_empty() {
        let n = ns("wlseq");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 2, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let r = SlotRef::create(&f, 1, CreateFlags::empty()).unwrap();
        let id = r.id();
        f.reset_whitelist(1, id).unwrap();
        f.update_whitelist(1, id, |wl| wl.add_pids(0, &[5]))
            .unwrap()
            .unwrap();
        let seq = &f.shm_whitelist(1, id).unwrap().seq;
        let even = seq.load(SeqCst);
        assert_eq!(even % 2, 0);
        // A writer died mid-update (or someone wrote the word): odd under the lock.
        seq.store(even + 1, SeqCst);
        let e = f
            .update_whitelist(1, id, |wl| wl.add_pids(0, &[424242]))
            .unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError);
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("notify {id} on device 1"))
                && msg.contains("inconsistent")
                && msg.contains("a writer died mid-update or another process corrupted it")
                && msg.contains(f.path().to_str().unwrap()),
            "{msg}"
        );
        assert_eq!(seq.load(SeqCst), even + 1, "the word is left as found");
        // Nothing was lost or added: with the word even again, the list is the old one.
        seq.store(even, SeqCst);
        let wl = f.read_whitelist(1, id).unwrap();
        assert!(wl.matches(0, 5, 0) && !wl.matches(0, 424242, 0));
        // Another writer between our read and our write: refused too, list unchanged.
        let e = f
            .update_whitelist(1, id, |wl| {
                seq.fetch_add(2, SeqCst);
                wl.add_pids(0, &[424242])
            })
            .unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError);
        assert!(e.to_string().contains("under its only writer"), "{e}");
        assert_eq!(f.read_whitelist(1, id).unwrap().len(), 1);
        // A consistent word again: updates work and keep the old entry.
        f.update_whitelist(1, id, |wl| wl.add_pids(0, &[6]))
            .unwrap()
            .unwrap();
        let wl = f.read_whitelist(1, id).unwrap();
        assert!(wl.matches(0, 5, 0) && wl.matches(0, 6, 0));
        drop(r);
        drop(f);
        remove_namespace(&n).unwrap();
    }

    /// A notify starts its whitelist afresh when exported, whatever a previous use of its slot
    /// left there (a half-written list with an odd sequence word, or stale entries); once
    /// exported, a reset (a second, refused export) leaves the list alone.
    #[test]
    fn a_new_export_resets_a_whitelist_left_inconsistent_by_a_previous_use() {
        let n = ns("wlreset");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        let id = r.id();
        f.reset_whitelist(0, id).unwrap();
        f.update_whitelist(0, id, |wl| wl.add_pids(0, &[5]))
            .unwrap()
            .unwrap();
        let seq = &f.shm_whitelist(0, id).unwrap().seq;
        seq.fetch_add(1, SeqCst);
        drop(r);
        // The next use of the id inherits the odd word and the stale entry until its export.
        let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        assert_eq!(r.id(), id);
        assert!(f.update_whitelist(0, id, |_| ()).is_err());
        f.reset_whitelist(0, id).unwrap();
        assert_eq!(seq.load(SeqCst) % 2, 0);
        assert!(f.read_whitelist(0, id).unwrap().is_empty());
        assert!(r.slot().export([7; 16], ExportState::Enforced));
        f.update_whitelist(0, id, |wl| wl.add_pids(0, &[6]))
            .unwrap()
            .unwrap();
        f.reset_whitelist(0, id).unwrap();
        assert!(f.read_whitelist(0, id).unwrap().matches(0, 6, 0));
        drop(r);
        drop(f);
        remove_namespace(&n).unwrap();
    }

    /// Bytes of `/dev/shm` actually allocated to a file.
    fn allocated(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().blocks() * 512
    }

    /// Opening the largest machine (8 × 65535 notifies) touches almost nothing, and each
    /// notify in use costs its slot (plus a few pool bytes); a whitelist page only on export.
    #[test]
    fn sparse_file_and_bytes_per_notify() {
        let n = ns("mem");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend950PR, 8, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let at_open = allocated(f.path());
        let size = std::fs::metadata(f.path()).unwrap().len();
        assert!(at_open <= 256 * 1024, "{at_open} bytes allocated at open");
        let count = 8192u64;
        let refs: Vec<_> = (0..count)
            .map(|_| SlotRef::create(&f, 3, CreateFlags::empty()).unwrap())
            .collect();
        let used = allocated(f.path());
        let per_notify = (used - at_open) as f64 / count as f64;
        // Export (with a whitelist) the first 256.
        for r in &refs[..256] {
            f.reset_whitelist(3, r.id()).unwrap();
        }
        let per_export = (allocated(f.path()) - used) as f64 / 256.0;
        eprintln!(
            "950PR x 8 devices: file {size} bytes (sparse), {at_open} allocated at open; \
             {per_notify:.1} bytes per notify in use; {per_export:.1} more per exported notify"
        );
        assert!(per_notify < 200.0, "{per_notify} bytes per notify");
        assert!(per_export <= 1100.0, "{per_export} bytes per export");
        drop(refs);
        assert_eq!(f.pool(3).unwrap().in_use(), 0);
        drop(f);
        remove_namespace(&n).unwrap();
    }

    /// A pid that is not alive: a child that has exited and been reaped.
    fn dead_pid() -> i32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id() as i32;
        c.wait().unwrap();
        assert!(!sys::pid_alive(pid, 0));
        pid
    }

    /// A gc takes a process-table entry only from the dead: an entry in a state no build
    /// writes (corruption) only once its pid is gone, an entry being reclaimed only once the
    /// reclaimer its word names is gone. Until then the notifies it holds stay held.
    #[test]
    fn gc_takes_an_entry_only_from_the_dead() {
        let n = ns("gcdead");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        let slot = f.slot(0, r.id()).unwrap();
        let j = (0..MAX_PROCS)
            .find(|&i| f.proc_entry(i).unwrap().word.load(SeqCst) == 0)
            .unwrap();
        let e = f.proc_entry(j).unwrap();
        let (live, dead) = (sys::getpid() as u32 as u64, dead_pid() as u32 as u64);
        for (state, what) in [
            (7u64, "a corrupt state"),
            (u64::from(P_RECLAIMING), "reclaiming"),
        ] {
            assert_eq!(slot.join(j, r.generation()), Ok(true));
            e.word.store(state << 32 | live, SeqCst);
            assert_eq!(f.gc().processes, 0, "{what}, live pid");
            assert_ne!(slot.holders() & (1 << j), 0, "{what}, live pid: bit kept");
            e.word.store(state << 32 | dead, SeqCst);
            assert_eq!(f.gc().processes, 1, "{what}, dead pid");
            assert_eq!(
                slot.holders() & (1 << j),
                0,
                "{what}, dead pid: bit dropped"
            );
            assert_eq!(e.word.load(SeqCst), 0, "{what}: entry freed");
        }
        // This process's own entry: intact, then overwritten.
        f.still_registered().unwrap();
        let me = f.proc_entry(f.me()).unwrap();
        me.start_time.fetch_add(1, SeqCst);
        let err = f.still_registered().unwrap_err();
        assert_eq!(err.kind(), Error::DrvInternalError);
        assert!(err.to_string().contains("no longer names it"), "{err}");
        me.start_time.fetch_sub(1, SeqCst);
        drop(r);
        drop(f);
        remove_namespace(&n).unwrap();
    }

    /// Ids leaked by a process that died half-way through a create or destroy are freed by a
    /// later GC once they stayed orphaned for the grace period.
    #[test]
    fn leaked_ids_are_repaired_after_the_grace_period() {
        let n = ns("leak");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let pool = f.pool(0).unwrap();
        // Died between alloc and claim.
        let leaked = pool.alloc().unwrap();
        f.note_allocated(0, leaked);
        // Died between retiring and freeing.
        let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        let (id, g) = (r.id(), r.generation());
        assert_eq!(f.slot(0, id).unwrap().leave(f.me()), Leave::Last);
        std::mem::forget(r);
        let live = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        // Died between alloc and noting the id in the high-water mark, which another process
        // then wrote low: the pool's own record still bounds the scans.
        let hidden = pool.alloc().unwrap();
        f.device_header(0).unwrap().high_water.store(0, SeqCst);
        assert_eq!(pool.in_use(), 4);
        // Within the grace period nothing is touched.
        assert_eq!(f.gc().notifies_freed, 0);
        assert_eq!(pool.in_use(), 4);
        // Past it (grace shortened for the test), the three leaks are freed, the live one kept.
        f.repair.set_grace(Duration::ZERO);
        assert_eq!(f.gc().notifies_freed, 3);
        assert_eq!(pool.in_use(), 1);
        assert!(!pool.is_allocated(leaked) && !pool.is_allocated(id));
        assert!(!pool.is_allocated(hidden));
        assert!(pool.is_allocated(live.id()));
        assert_eq!(f.slot(0, id).unwrap().generation(), g + 1);
        let live_id = live.id();
        drop(live);
        assert!(!pool.is_allocated(live_id));
        drop(f);
        remove_namespace(&n).unwrap();
    }

    /// A holder bit of a free process-table entry (nobody reclaims it: only registered dead
    /// processes are) kept a destroyed notify's id allocated for ever. The leak repair treats
    /// such bits as no holder, once they and the slot stayed unchanged for the grace period,
    /// and clears exactly them before retiring and freeing the id.
    #[test]
    fn stray_holder_bits_of_free_process_entries_are_repaired_after_the_grace_period() {
        let n = ns("stray");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let pool = f.pool(0).unwrap();
        let stray = 40;
        assert_ne!(stray, f.me());
        let entry = f.proc_entry(stray).unwrap();
        assert_eq!(entry.word.load(SeqCst), 0, "entry {stray} is free");
        let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        let (id, g) = (r.id(), r.generation());
        assert_eq!(r.slot().join(stray, g), Ok(true));
        let live = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        // Destroyed by its only real holder: the stray bit keeps it allocated.
        drop(r);
        let slot = f.slot(0, id).unwrap();
        assert_eq!(slot.holders(), 1 << stray);
        assert!(pool.is_allocated(id) && slot.is_live(g));
        // Within the grace period nothing is touched.
        assert_eq!(f.gc().notifies_freed, 0);
        let grace = Duration::from_millis(50);
        f.repair.set_grace(grace);
        // A process registers in that entry: the bit may be its reference, not repaired.
        let alive = (u64::from(P_ALIVE) << 32) | u64::from(f.pid as u32);
        entry.start_time.store(f.start_time, SeqCst);
        entry.word.store(alive, SeqCst);
        assert_eq!(f.gc().notifies_freed, 0);
        std::thread::sleep(grace + Duration::from_millis(10));
        assert_eq!(f.gc().notifies_freed, 0);
        assert!(pool.is_allocated(id));
        // A repair holds the entries it clears: nobody registers there meanwhile.
        assert!(f.hold_free_procs(1 << stray).is_none(), "entry occupied");
        entry.word.store(0, SeqCst);
        entry.start_time.store(0, SeqCst);
        {
            let hold = f.hold_free_procs(1 << stray).unwrap();
            assert_eq!((entry.word.load(SeqCst) >> 32) as u32, P_CLAIMING);
            assert!(f.proc_alive(stray));
            drop(hold);
            assert_eq!(entry.word.load(SeqCst), 0);
        }
        // Free again: suspected anew (the stray mask is part of the state), repaired only
        // once it stayed so for the grace period.
        assert_eq!(f.gc().notifies_freed, 0);
        assert!(pool.is_allocated(id));
        std::thread::sleep(grace + Duration::from_millis(10));
        assert_eq!(f.gc().notifies_freed, 1);
        assert!(!pool.is_allocated(id));
        assert_eq!(slot.holders(), 0);
        assert_eq!(slot.state(), Some(SlotState::Free));
        assert_eq!(slot.generation(), g + 1);
        assert_eq!(entry.word.load(SeqCst), 0, "the hold was released");
        // The notify held by this (live) process is untouched.
        assert!(pool.is_allocated(live.id()) && live.slot().is_live(live.generation()));
        assert_eq!(live.slot().holders(), 1 << f.me());
        let live_id = live.id();
        drop(live);
        assert!(!pool.is_allocated(live_id));
        drop(f);
        remove_namespace(&n).unwrap();
    }

    /// The table's no-lost-wake-up stress, with the real shared futexes: waiters (some with
    /// tiny timeouts) and a recorder that records only when the flag is clear; every record is
    /// consumed exactly once or still pending at the end.
    #[test]
    fn futex_stress_no_lost_or_double_consumption() {
        use acl_notify_core::table::{WaitArgs, WaitOutcome};
        use std::sync::atomic::AtomicU32;
        let n = ns("stress");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
        let consumed = Arc::new(AtomicU32::new(0));
        let per_waiter = 400;
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let (r, c) = (Arc::clone(&r), Arc::clone(&consumed));
                std::thread::spawn(move || {
                    let never = || false;
                    for k in 0..per_waiter {
                        let t = if k % 5 == 0 {
                            Duration::from_micros(20)
                        } else {
                            Duration::from_secs(20)
                        };
                        let out = r.slot().sync.wait_and_reset(
                            &r.file().waiter(),
                            WaitArgs {
                                proc: r.file().me(),
                                timeout: Some(t),
                                cancel: &never,
                            },
                        );
                        match out {
                            Ok(WaitOutcome::Consumed) => {
                                c.fetch_add(1, SeqCst);
                            }
                            Ok(WaitOutcome::TimedOut) => {}
                            other => panic!("{other:?}"),
                        }
                    }
                })
            })
            .collect();
        let mut records = 0u32;
        let end = std::time::Instant::now() + Duration::from_secs(60);
        while waiters.iter().any(|h| !h.is_finished()) {
            assert!(std::time::Instant::now() < end, "stress stuck");
            if !r.slot().sync.is_set() {
                r.slot().record(&f.waiter(), 1);
                records += 1;
            } else {
                std::thread::yield_now();
            }
        }
        for h in waiters {
            h.join().unwrap();
        }
        let pending = u32::from(r.slot().sync.is_set());
        assert_eq!(consumed.load(SeqCst) + pending, records);
        assert_eq!(r.slot().sync.waiters(), 0);
        drop(r);
        drop(f);
        remove_namespace(&n).unwrap();
    }

    #[test]
    fn mismatched_config_and_corrupt_header_are_refused() {
        let n = ns("bad");
        let _ = remove_namespace(&n);
        let f = open_shared(&n, 0, Soc::Ascend910B, 2, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let path = f.path().to_owned();
        drop(f);
        // Not held by this process any more: a fresh open validates the header.
        let e = open_shared(&n, 0, Soc::Ascend310P, 2, OpenMode::CreateOrOpen).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
        assert!(e.to_string().contains("Ascend910B with 2 devices"), "{e}");
        // Corrupt the magic.
        {
            use std::io::{Seek, SeekFrom, Write};
            let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.seek(SeekFrom::Start(0)).unwrap();
            file.write_all(b"garbage!").unwrap();
        }
        let e = open_shared(&n, 0, Soc::Ascend910B, 2, OpenMode::CreateOrOpen).unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError);
        assert!(e.to_string().contains("bad magic"), "{e}");
        assert!(e.to_string().contains(path.to_str().unwrap()), "{e}");
        // Wrong mode.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = open_shared(&n, 0, Soc::Ascend910B, 2, OpenMode::CreateOrOpen).unwrap_err();
        assert!(e.to_string().contains("mode is 0644"), "{e}");
        // Open-only of a missing server file.
        assert!(
            open_shared(&n, 9, Soc::Ascend910B, 2, OpenMode::OpenExisting)
                .unwrap()
                .is_none()
        );
        remove_namespace(&n).unwrap();
    }
}

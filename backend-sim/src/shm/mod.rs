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
//! Its table index is the bit it sets in the holder bitmap of every notify it references, and
//! of every IPC event of the server (`crate::ipc_event`).
//! [`ShmFile::gc`] finds registered processes that died (pid gone, or start time differs:
//! recycled) and reclaims for them: cancels their queued waits, drops their references (IPC
//! events included), frees ids nobody holds any more, and frees their process-table entry.

mod busy;
mod counts;
mod layout;
mod procs;
mod slot_ref;
#[cfg(test)]
mod tests;
mod whitelist;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use acl_notify_core::table::{MAX_PROCS, NotifySlot, SlotState, Waiter};
use acl_notify_core::{Error, Soc};

use crate::error::SimError;
use crate::mapfile::{INIT_WAIT, Kind, Map, Open, Registry, Shared};
use crate::repair::LeakRepair;
use crate::sys;

pub use crate::mapfile::{FILE_PREFIX, SHM_DIR};

pub(crate) use busy::{blocked, busy_now, count_worker, no_cpu_free, uncount_worker};
use counts::Count;
pub(crate) use counts::{Share, non_negative};
pub(crate) use layout::Layout;
use layout::{DeviceHeader, validate_header};
pub(crate) use layout::{Header, P_ALIVE, P_CLAIMING, P_FREE, P_RECLAIMING, ProcEntry};
pub use layout::{LAYOUT_VERSION, MAX_DEVICES, PoolRef, SLOT_BYTES, WHITELIST_BYTES};
use slot_ref::RefMap;
pub use slot_ref::{CreateError, SlotRef};
pub(crate) use whitelist::ShmWhitelist;

/// The path of a namespace's file for `server`.
pub fn file_path(namespace: &str, server: u32) -> PathBuf {
    crate::mapfile::file_path(namespace, "srv", format_args!("{server}"))
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
    /// IPC events freed because their last holder was dead.
    pub ipc_events_freed: u32,
    /// Count-notify ids freed because their owner was dead (or leaked by a process that died
    /// half-way through a create or destroy). Filled in by `Sim::gc`.
    pub cnt_freed: u32,
    /// Device-memory allocations released because only dead processes held them (their
    /// owners' and importers'). Filled in by `Sim::gc`.
    pub mem_freed: u32,
}

impl std::ops::AddAssign for GcReport {
    fn add_assign(&mut self, o: GcReport) {
        self.processes += o.processes;
        self.notifies_freed += o.notifies_freed;
        self.waits_cancelled += o.waits_cancelled;
        self.ipc_events_freed += o.ipc_events_freed;
        self.cnt_freed += o.cnt_freed;
        self.mem_freed += o.mem_freed;
    }
}

/// One mapped server file, registered as this process. Shared by every `Sim` of the process
/// that uses the file (see [`open_shared`]).
pub struct ShmFile {
    path: PathBuf,
    /// The namespace (the other files of this server are named from it).
    namespace: String,
    /// The mapping (bounds-checked access, and its entry in the `SIGBUS` table: see
    /// [`crate::sigbus`]).
    map: Map,
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
    /// What the garbage collection of the open reclaimed ([`ShmFile::reclaimed_at_open`]).
    at_open: GcReport,
}

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

pub(crate) const KIND: Kind = Kind("shared memory file");

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
        || ShmFile::open(namespace, &path, server, soc, devices, mode),
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
        self.map.intact(&self.path)
    }

    /// Every size boundary of the layout: where each region starts (the header's end
    /// included), where the second page of each per-device array starts, the end of the
    /// first device's part of each, and the file's end. For truncation tests.
    #[cfg(test)]
    pub(crate) fn layout_boundaries(&self) -> Vec<(&'static str, usize)> {
        use crate::mapfile::PAGE;
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
        self.map.lost()
    }

    fn open(
        namespace: &str,
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
        let mut f = ShmFile {
            path: path.to_owned(),
            namespace: namespace.to_owned(),
            map,
            layout,
            server,
            me: u32::MAX,
            pid,
            start_time,
            wl_lock: Mutex::new(()),
            repair: LeakRepair::new(),
            refs: Mutex::new(RefMap::default()),
            at_open: GcReport::default(),
        };
        let mut at_open = GcReport::default();
        f.me = match f.register() {
            Some(i) => i,
            None => {
                at_open += f.gc();
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
        at_open += f.gc();
        f.at_open = at_open;
        Ok(Some(f))
    }

    /// The creator's header fields (the creation protocol in [`crate::mapfile`] writes the
    /// creator pid before and publishes the header after).
    fn fill_header(h: &Header, l: &Layout, server: u32) {
        crate::mapfile::fill_fields(&layout::header_fields(h, l, server));
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

    /// The namespace of this file.
    pub(crate) fn namespace(&self) -> &str {
        &self.namespace
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

    /// The shared value at byte `off` (bounds-checked: see [`Map::at`]).
    #[inline]
    pub(crate) fn at<T: Shared>(&self, off: usize) -> &T {
        self.map.at(off)
    }

    /// [`at`](Self::at) for a span it has checked already ([`Map::at_checked_before`]).
    ///
    /// # Safety
    ///
    /// `self.at::<T>(off)` has returned before (on this file: its mapping never changes).
    #[inline(always)]
    pub(crate) unsafe fn at_checked_before<T: Shared>(&self, off: usize) -> &T {
        // SAFETY: the caller's contract is `Map::at_checked_before`'s.
        unsafe { self.map.at_checked_before(off) }
    }

    pub(crate) fn proc_entry(&self, i: u32) -> Option<&ProcEntry> {
        self.layout.proc_entry(&self.map, i)
    }

    fn device_header(&self, dev: u32) -> Option<&DeviceHeader> {
        self.layout.device_header(&self.map, dev)
    }

    /// The id pool of `dev`.
    pub fn pool(&self, dev: u32) -> Option<PoolRef<'_>> {
        self.layout.pool(&self.map, dev)
    }

    /// The slot of notify `id` on `dev`.
    pub fn slot(&self, dev: u32, id: u32) -> Option<&NotifySlot> {
        self.layout.slot(&self.map, dev, id)
    }

    /// Where the slot of notify `id` on `dev` is in the file (`None` out of range).
    fn slot_offset(&self, dev: u32, id: u32) -> Option<usize> {
        self.layout.slot_offset(dev, id)
    }

    fn shm_whitelist(&self, dev: u32, id: u32) -> Option<&ShmWhitelist> {
        self.layout.whitelist(&self.map, dev, id)
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

    /// The count of this file's busy stream workers (see the `busy` module).
    pub(crate) fn busy(&self) -> &AtomicU32 {
        Count::Busy.total(self)
    }

    /// This process's part of [`busy`](Self::busy) (`None` if its entry is out of range).
    pub(crate) fn own_busy(&self) -> Option<&AtomicU32> {
        Count::Busy.share(self).part
    }

    /// The waiter (futex, clock, liveness) for this file's table.
    pub fn waiter(&self) -> SimWaiter<'_> {
        SimWaiter { file: self }
    }

    /// Shared lock held by creates and destroys against the leak-repair pass.
    pub fn op_guard(&self) -> std::sync::RwLockReadGuard<'_, ()> {
        self.repair.op_guard()
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
        // The mapping goes with `self.map`, after this: nothing borrows it any more (`&self`
        // borrows ended, and `SlotRef`s keep the `Arc` alive while they exist).
    }
}

/// The [`Waiter`] of a mapped file: futexes (shared, and private for a notify no other process
/// reaches), `CLOCK_MONOTONIC`, and liveness from the process table.
#[derive(Clone, Copy, Debug)]
pub struct SimWaiter<'a> {
    file: &'a ShmFile,
}

impl<'a> SimWaiter<'a> {
    /// The count of the file's waiters that are spinning and this process's part of it (see
    /// [`crate::spin`]).
    pub(crate) fn spinners(&self) -> Share<'a> {
        Count::Spinners.share(self.file)
    }

    /// The count of the file's busy stream workers (see the `busy` module).
    pub(crate) fn busy(&self) -> &'a AtomicU32 {
        self.file.busy()
    }

    /// After a wake-up call that woke `woken` threads. Linux often puts a thread it wakes on
    /// the waker's CPU, where it waits until the waker sleeps or yields — and a stream worker
    /// goes on to spin for its next task. Yield once when someone was woken (a sleeper's
    /// wake-up costs microseconds anyway), so that the woken thread runs now if it landed
    /// here; with nothing else runnable here the yield returns at once. The yield is under
    /// the slice guard of every stream-side yield ([`crate::yielding::offer_cpu`]): beside a
    /// thread that keeps the CPU busy, each plain yield here gave it a whole slice, 4–12 ms
    /// on this project's VM, before the waker went on (bench/README.md History, wake19).
    fn woke(&self, woken: usize) {
        if woken > 0 {
            busy::woke(self.file, woken);
            let _ = crate::yielding::offer_cpu();
        }
        // After the hand-over, not before it: a thread that slept with the short slice gives
        // it back here, off the woken thread's way (`crate::wake_slice`).
        crate::wake_slice::restore();
    }
}

impl Waiter for SimWaiter<'_> {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        busy::sleep(self.file, || sys::futex_wait(word, expected, timeout));
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        self.woke(sys::futex_wake(word, n));
    }
    fn wait_private(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        busy::sleep(self.file, || {
            sys::futex_wait_private(word, expected, timeout)
        });
    }
    fn wake_private(&self, word: &AtomicU32, n: u32) {
        self.woke(sys::futex_wake_private(word, n));
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

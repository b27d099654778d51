//! Count notifies (SPEC §6) on the simulated device: a shared-memory file per namespace and
//! server, `/dev/shm/acl-notify-sim.<namespace>.cnt<server>`, holding per-device count-notify
//! id pools (separate from notify ids) and a table of core [`CntSlot`]s, plus the
//! state a `Sim` keeps for them; the [`CntNotifyOps`](acl_notify_core::CntNotifyOps) calls
//! of `Sim` on top of it are in `cnt::sim`.
//!
//! # File
//!
//! Created on first use (only on SoCs with count notifies), with the same rules as the notify
//! file (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, owner and header checked on every open,
//! sparse). Layout, all offsets page aligned and written into the header:
//!
//! | region | size |
//! |---|---|
//! | header | 4 KiB |
//! | high-water marks | 4 KiB (one `u32` per device) |
//! | id pools | devices × `size_of::<AtomicCntIdPool>()` (64-byte stride) |
//! | slots | devices × [`MAX_CNT_NOTIFIES`] × 128 B |
//!
//! # Ownership
//!
//! A count notify belongs to the process that created it (there is no export). Its handle and
//! every queued task that uses it share one [`CntRef`]; the slot is released and the id freed
//! when the last of them goes. A process that dies leaves its slots live with a dead owner:
//! [`CntFile::gc`] (run when the file is opened, before a create answers 207009, and by
//! [`Sim::gc`](crate::Sim::gc)) releases them.
//!
//! # Limits
//!
//! A process killed in the few instructions between taking an id from the pool and claiming
//! its slot leaks that id until the namespace is removed.

use std::collections::HashMap;
use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use acl_notify_core::cnt::{AtomicCntIdPool, CntRecord, CntSlot, CntWait, MAX_CNT_NOTIFIES};
use acl_notify_core::slot::{Owner, SlotState};
use acl_notify_core::waiter::{TableError, WaitArgs, WaitOutcome, Waiter};
use acl_notify_core::{Error, Feature, RawCntNotify, Soc};

use crate::error::SimError;
use crate::mapfile::{
    Field, INIT_WAIT, Kind, Map, Open, PAGE, Registry, Shared, align_up, field, fill_fields,
    soc_index,
};
use crate::repair::{LeakRepair, all_ids};
use crate::stream::TaskCtx;
use crate::sys;
use acl_notify_handles::Slab;

mod sim;

const MAGIC: u64 = u64::from_le_bytes(*b"ACLNCNT\x01");
/// Bumped whenever the count-notify file layout changes (2: the new `AtomicIdPool` layout of
/// the id pools; 3: the id pools became bitmaps with "full" hints; 4: the header names the
/// creator's PID namespace; 5: the slots are the core's shared `Slot` with a count payload,
/// 128 bytes).
pub const CNT_LAYOUT_VERSION: u32 = 5;
/// Bytes per count notify in the table.
pub const CNT_SLOT_BYTES: usize = std::mem::size_of::<CntSlot>();
const POOL_BYTES: usize = std::mem::size_of::<AtomicCntIdPool>();

/// The count-notify file header. Atomics only: other processes write this memory.
#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    ready: AtomicU32,
    soc: AtomicU32,
    devices: AtomicU32,
    max: AtomicU32,
    slot_size: AtomicU32,
    pool_size: AtomicU32,
    creator_pid: AtomicI32,
    hw_off: AtomicU64,
    pools_off: AtomicU64,
    slots_off: AtomicU64,
    total: AtomicU64,
    /// The creator's PID namespace (see [`FileHeader::pid_ns`]).
    pid_ns: AtomicU64,
}

// SAFETY: `Header` is atomics only (every field above); the macro asserts that it fits in a
// page.
crate::mapfile::file_header!(unsafe Header, MAGIC, CNT_LAYOUT_VERSION);

/// Region offsets of one configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layout {
    soc: Soc,
    devices: u32,
    pool_stride: usize,
    hw_off: usize,
    pools_off: usize,
    slots_off: usize,
    total: usize,
}

impl Layout {
    fn new(soc: Soc, devices: u32) -> Layout {
        let d = devices as usize;
        let pool_stride = align_up(POOL_BYTES, 64);
        let hw_off = PAGE;
        let pools_off = align_up(hw_off + d * 4, PAGE);
        let slots_off = align_up(pools_off + d * pool_stride, PAGE);
        let total = align_up(
            slots_off + d * MAX_CNT_NOTIFIES as usize * CNT_SLOT_BYTES,
            PAGE,
        );
        Layout {
            soc,
            devices,
            pool_stride,
            hw_off,
            pools_off,
            slots_off,
            total,
        }
    }
}

/// The path of a namespace's count-notify file for `server`.
pub fn cnt_file_path(namespace: &str, server: u32) -> PathBuf {
    crate::mapfile::file_path(namespace, "cnt", format_args!("{server}"))
}

/// Deletes the count-notify files of `namespace`; returns how many were removed.
pub fn remove_cnt_files(namespace: &str) -> Result<usize, SimError> {
    crate::mapfile::remove_files(namespace, Some("cnt"))
}

const KIND: Kind = Kind("count-notify file");

/// Whether an open may create the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CntOpen {
    /// Create it if missing; map read-write.
    CreateOrOpen,
    /// Only an existing file, mapped read-only (the inspector): `Ok(None)` if there is none.
    ReadOnly,
}

/// One mapped count-notify file.
pub struct CntFile {
    path: PathBuf,
    map: Map,
    layout: Layout,
    writable: bool,
    /// The process that mapped it (a child forked with the mapping must not act for it).
    pid: i32,
    start_time: u64,
    /// Leak repair (see [`crate::repair`]): snapshots are (generation, state).
    repair: LeakRepair<(u32, Option<SlotState>)>,
    /// Ids the collection on open freed (reported by the next [`Sim::cnt_gc`]).
    freed_on_open: AtomicU32,
}

// SAFETY: the mapping is owned by this value until drop and only accessed through atomics
// (the header, pool and slot types contain only atomics), so it may be shared across threads.
unsafe impl Send for CntFile {}
// SAFETY: as above.
unsafe impl Sync for CntFile {}

impl fmt::Debug for CntFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CntFile")
            .field("path", &self.path)
            .field("soc", &self.layout.soc)
            .field("devices", &self.layout.devices)
            .field("writable", &self.writable)
            .finish_non_exhaustive()
    }
}

/// One mapping per file per process (the `Sim`s of a process share it). A forked child starts
/// with an empty one (see [`crate::fork`]).
pub(crate) static REGISTRY: Registry<CntFile> = Registry::new();

// SAFETY: core's count-notify slot is atomics only (its `repr(C)` docs). (Its id pool is
// `Shared` as every `AtomicIdPool` is: see `mapfile`.)
unsafe impl Shared for CntSlot {}

fn lock<T: ?Sized>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl CntFile {
    /// `Ok` unless the file shrank under this process's mapping: then 507899 saying so (see
    /// [`crate::sigbus`]).
    pub(crate) fn intact(&self) -> Result<(), SimError> {
        self.map.intact(&self.path)
    }

    /// Opens the count-notify file of `namespace`/`server` for a machine of `soc` with
    /// `devices` devices. Read-write opens are shared within the process.
    ///
    /// Errors: 207000 `soc` has no count notifies; 107000 the file describes another machine;
    /// 507899 it is corrupt, foreign, not ours or not mode 0600.
    pub fn open(
        namespace: &str,
        server: u32,
        soc: Soc,
        devices: u32,
        mode: CntOpen,
    ) -> Result<Option<Arc<CntFile>>, SimError> {
        if !soc.has(Feature::CntNotify) {
            return Err(SimError::new(
                Error::FeatureNotSupport,
                format!("count notifies are not supported on {soc}"),
            ));
        }
        let path = cnt_file_path(namespace, server);
        if mode == CntOpen::ReadOnly {
            return Ok(Self::open_file(&path, soc, devices, mode)?.map(Arc::new));
        }
        let pid = sys::getpid();
        REGISTRY.get_or_open(
            &path,
            |f| f.pid == pid,
            || {
                let f = Self::open_file(&path, soc, devices, mode)?;
                if let Some(f) = &f {
                    f.freed_on_open.store(f.gc(), SeqCst);
                }
                Ok(f)
            },
        )
    }

    fn open_file(
        path: &Path,
        soc: Soc,
        devices: u32,
        mode: CntOpen,
    ) -> Result<Option<CntFile>, SimError> {
        let layout = Layout::new(soc, devices);
        let writable = mode == CntOpen::CreateOrOpen;
        let open = Open {
            path,
            kind: KIND,
            create: writable,
            writable,
            total: layout.total,
            init_wait: INIT_WAIT,
            keep_fd: false,
        };
        let fill = |h: &Header| Self::fill_header(h, &layout);
        let check = |h: &Header, size| validate(h, path, &layout, size);
        let Some(map) = open.open(fill, check)? else {
            return Ok(None);
        };
        let pid = sys::getpid();
        Ok(Some(CntFile {
            path: path.to_owned(),
            map,
            layout,
            writable,
            pid,
            start_time: sys::proc_start_time(pid).unwrap_or(0),
            repair: LeakRepair::new(),
            freed_on_open: AtomicU32::new(0),
        }))
    }

    /// The creator's header fields (the creation protocol in [`crate::mapfile`] writes the
    /// creator pid before and publishes the header after).
    fn fill_header(h: &Header, l: &Layout) {
        fill_fields(&header_fields(h, l));
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Devices.
    pub fn devices(&self) -> u32 {
        self.layout.devices
    }

    fn at<T: Shared>(&self, off: usize) -> &T {
        self.map.at(off)
    }

    /// The count-notify id pool of `dev`.
    pub fn pool(&self, dev: u32) -> Option<&AtomicCntIdPool> {
        (dev < self.layout.devices)
            .then(|| self.at(self.layout.pools_off + dev as usize * self.layout.pool_stride))
    }

    /// The slot of count notify `id` on `dev`.
    pub fn slot(&self, dev: u32, id: u32) -> Option<&CntSlot> {
        if dev >= self.layout.devices || id >= MAX_CNT_NOTIFIES {
            return None;
        }
        let i = dev as usize * MAX_CNT_NOTIFIES as usize + id as usize;
        Some(self.at(self.layout.slots_off + i * CNT_SLOT_BYTES))
    }

    /// The offset in the file of the slot of `id` on `dev` (for matching futex addresses).
    pub fn slot_offset(&self, dev: u32, id: u32) -> usize {
        self.layout.slots_off
            + (dev as usize * MAX_CNT_NOTIFIES as usize + id as usize) * CNT_SLOT_BYTES
    }

    fn hw(&self, dev: u32) -> Option<&AtomicU32> {
        (dev < self.layout.devices).then(|| self.at(self.layout.hw_off + dev as usize * 4))
    }

    /// One past the highest id ever handed out on `dev`, clamped, and past every id the pool
    /// has allocated now (bounds scans; see the notify file's `high_water`).
    pub fn high_water(&self, dev: u32) -> u32 {
        let noted = self
            .hw(dev)
            .map_or(0, |h| h.load(SeqCst).min(MAX_CNT_NOTIFIES));
        noted.max(self.pool(dev).map_or(0, |p| p.end()))
    }

    /// The waiter (futexes on the shared words, monotonic clock).
    pub fn waiter(&self) -> CntWaiter {
        CntWaiter
    }

    /// Releases the live slots whose owner process is dead and frees their ids; then frees ids
    /// leaked by processes that died half-way through a create or destroy (allocated, slot not
    /// live, unchanged for the repair grace period; see the simulator's `repair` module).
    /// Returns how many ids were freed. A no-op on a read-only mapping.
    pub fn gc(&self) -> u32 {
        if !self.writable || self.pid != sys::getpid() {
            return 0;
        }
        self.reclaim_dead(0..self.layout.devices) + self.repair_leaks()
    }

    /// The first half of [`gc`](Self::gc), on the devices `devs` only: releases the live slots
    /// whose owner process is dead and frees their ids. Returns how many. A no-op on a
    /// read-only mapping or in a forked child.
    pub fn reclaim_dead(&self, devs: std::ops::Range<u32>) -> u32 {
        if !self.writable || self.pid != sys::getpid() {
            return 0;
        }
        let w = self.waiter();
        let mut n = 0;
        // One /proc lookup per owner, not per slot.
        let mut alive: HashMap<(i32, u64), bool> = HashMap::new();
        for dev in devs.start..devs.end.min(self.layout.devices) {
            let Some(pool) = self.pool(dev) else { continue };
            for id in 0..self.high_water(dev) {
                let Some(slot) = self.slot(dev, id) else {
                    break;
                };
                let dead = |o: &Owner| {
                    !*alive
                        .entry((o.pid, o.start_time))
                        .or_insert_with(|| sys::pid_alive(o.pid, o.start_time))
                };
                if slot.reclaim_if(&w, dead) && pool.free(id).is_ok() {
                    n += 1;
                }
            }
        }
        n
    }

    fn repair_leaks(&self) -> u32 {
        let ids = all_ids(self.layout.devices, |dev| self.high_water(dev));
        self.repair.sweep(
            ids,
            |dev, id| {
                let slot = self.slot(dev, id)?;
                let pool = self.pool(dev)?;
                let state = slot.state();
                (pool.is_allocated(id) && state != Some(SlotState::Live))
                    .then(|| (slot.generation(), state))
            },
            |dev, id| {
                self.slot(dev, id).is_some_and(CntSlot::retire_abandoned)
                    && self.pool(dev).is_some_and(|p| p.free(id).is_ok())
            },
        )
    }
}

/// The header words layout `l` fixes: written by the creator and checked by every opener.
fn header_fields<'h>(h: &'h Header, l: &Layout) -> [Field<'h>; 9] {
    [
        field("SoC", &h.soc, u64::from(soc_index(l.soc))),
        field("devices", &h.devices, u64::from(l.devices)),
        field("ids per device", &h.max, u64::from(MAX_CNT_NOTIFIES)),
        field("slot size", &h.slot_size, CNT_SLOT_BYTES as u64),
        field("pool size", &h.pool_size, POOL_BYTES as u64),
        field("high-water offset", &h.hw_off, l.hw_off as u64),
        field("pool offset", &h.pools_off, l.pools_off as u64),
        field("slot offset", &h.slots_off, l.slots_off as u64),
        field("total size", &h.total, l.total as u64),
    ]
}

fn validate(h: &Header, path: &Path, l: &Layout, size: u64) -> Result<(), SimError> {
    let machine = (h.soc.load(SeqCst), h.devices.load(SeqCst));
    KIND.check_machine(path, machine, (l.soc, l.devices))?;
    KIND.check_fields(path, &header_fields(h, l), size, l.total)
}

/// The [`Waiter`] of a count-notify file: shared futexes and `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug)]
pub struct CntWaiter;

impl Waiter for CntWaiter {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        // A stream worker counted busy is not, asleep here (see `shm::busy`).
        crate::shm::blocked(|| sys::futex_wait(word, expected, timeout));
    }
    fn wake(&self, word: &AtomicU32, n: u32) {
        sys::futex_wake(word, n);
    }
    fn now_ns(&self) -> u64 {
        sys::now_ns()
    }
}

/// This process's hold on one count notify: shared by its handle and its queued tasks; the
/// slot is released and the id freed when the last one goes.
pub struct CntRef {
    file: Arc<CntFile>,
    dev: u32,
    id: u32,
    generation: u32,
}

impl fmt::Debug for CntRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CntRef")
            .field("device", &self.dev)
            .field("id", &self.id)
            .field("generation", &self.generation)
            .finish()
    }
}

#[cold]
fn spare_slot() -> &'static CntSlot {
    static SPARE: CntSlot = CntSlot::new();
    &SPARE
}

/// How [`CntRef::create`] failed.
enum CreateFail {
    Exhausted,
    Other(SimError),
}

impl CntRef {
    fn create(file: &Arc<CntFile>, dev: u32) -> Result<Arc<CntRef>, CreateFail> {
        let _g = file.repair.op_guard();
        let pool = file.pool(dev).ok_or_else(|| {
            CreateFail::Other(SimError::new(
                Error::InvalidDeviceId,
                format!("no device {dev}"),
            ))
        })?;
        let id = match pool.alloc() {
            Ok(id) => id,
            Err(Error::NoNotifyResource) => return Err(CreateFail::Exhausted),
            Err(e) => {
                return Err(CreateFail::Other(SimError::new(
                    e,
                    format!(
                        "count-notify id pool of device {dev} in {}",
                        file.path.display()
                    ),
                )));
            }
        };
        if let Some(h) = file.hw(dev) {
            h.fetch_max(id.saturating_add(1), SeqCst);
        }
        let corrupt = || {
            CreateFail::Other(SimError::new(
                Error::DrvInternalError,
                format!(
                    "count-notify table of device {dev} in {} is corrupt: id {id} was handed \
                     out while in use",
                    file.path.display()
                ),
            ))
        };
        let slot = file.slot(dev, id).ok_or_else(corrupt)?;
        let generation = slot
            .claim(Owner {
                pid: file.pid,
                start_time: file.start_time,
                // The file is the server's; the slot need not repeat it.
                server: 0,
                device: dev,
                // A count notify has one holder, its owner; the bit is the same for all.
                proc: 0,
            })
            .map_err(|_| corrupt())?;
        Ok(Arc::new(CntRef {
            file: Arc::clone(file),
            dev,
            id,
            generation,
        }))
    }

    /// The slot.
    pub fn slot(&self) -> &CntSlot {
        self.file
            .slot(self.dev, self.id)
            .unwrap_or_else(|| spare_slot())
    }

    /// `Ok` while the slot is still the live incarnation this reference holds (same cache
    /// line as the count). Otherwise another process took this one's count notify from it
    /// (its owner entry was found dead or overwritten): 507899, before a record touches what
    /// may by now be another process's count notify.
    fn live(&self) -> Result<(), SimError> {
        let s = self.slot();
        if s.generation() == self.generation && s.state() == Some(SlotState::Live) {
            return Ok(());
        }
        // Zeros read from a page a truncation cut off are not another process's doing.
        self.file.intact()?;
        Err(SimError::new(
            Error::DrvInternalError,
            format!(
                "count notify {} of device {} in {}: this process no longer holds it (another \
                 process reclaimed it, taking this one for dead), and the id may now be \
                 another count notify's; remove the namespace",
                self.id,
                self.dev,
                self.file.path.display()
            ),
        ))
    }
}

impl Drop for CntRef {
    fn drop(&mut self) {
        if self.file.pid != sys::getpid() {
            // Inherited across fork(): the slot is the parent's.
            return;
        }
        let _g = self.file.repair.op_guard();
        let w = self.file.waiter();
        if self.slot().release(&w, self.generation)
            && let Some(p) = self.file.pool(self.dev)
        {
            let _ = p.free(self.id);
        }
    }
}

/// What a `Sim` keeps about count notifies: the file (opened on first use) and this process's
/// handles.
pub(crate) struct CntState {
    file: Mutex<Option<Arc<CntFile>>>,
    /// By handle. Nothing else keeps a count notify by its handle's value (tasks hold the
    /// `CntRef`), so a value that comes back after its slot's generation wrapped finds only
    /// the count notify now in the slot.
    handles: RwLock<Slab<CntEntry>>,
}

struct CntEntry {
    r: Arc<CntRef>,
}

impl CntState {
    /// Empty; `seed` salts the handles (see [`Slab::new`]).
    pub(crate) fn new(seed: u64) -> Self {
        CntState {
            file: Mutex::new(None),
            handles: RwLock::new(Slab::new(acl_notify_handles::Kind::CntNotify, seed)),
        }
    }

    /// Drops every handle (the `Sim` is going away).
    pub(crate) fn clear(&self) {
        // Dropped after the lock is released: a handle's drop may take other locks.
        let all = crate::locks::write(&self.handles).drain();
        drop(all);
    }

    /// The mapped file if this process opened it.
    pub(crate) fn opened(&self) -> Option<Arc<CntFile>> {
        lock(&self.file).clone()
    }
}

impl fmt::Debug for CntState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CntState").finish_non_exhaustive()
    }
}

fn bad_cnt(h: RawCntNotify) -> SimError {
    crate::error::not_live("count notify", h.0)
}

/// A count-notify record as its stream runs it ([`SimJob::CntRecord`]).
pub(crate) fn run_record(r: &CntRef, record: CntRecord, pid: i32) -> Result<(), SimError> {
    r.live()?;
    r.slot().record(&r.file.waiter(), record, pid);
    // A record into a page a truncation cut off went nowhere (see `lost`).
    r.file.intact()
}

/// What a satisfied count-notify wait on `r` took: the count it cleared (0: none, a wait
/// that keeps the count), given back if its stream's stop, abort or discarding destroy had
/// begun by then (`job::took`): a stopped stream's count wait consumes nothing, as a notify
/// wait does (`crate::waiters::give_back`). Without it, a clearing wait the stop cut short
/// where it next asked (before it sleeps) but that found its count first — woken by a record
/// made after the stop returned, before the stop's own wake-up ran, or started past the
/// worker's look at the stop — cleared that record's count, and another stream's wait on it
/// waited for ever (`parked::tests::a_parked_stream_stopped`, count notifies).
pub(crate) struct Cleared<'a>(&'a CntRef, u32);

impl crate::waiters::Taken for Cleared<'_> {
    #[cold]
    #[inline(never)]
    fn give_back(self) -> Result<(), SimError> {
        let Cleared(r, count) = self;
        r.slot().give_back(&r.file.waiter(), count);
        Err(cut_short(r))
    }
}

/// The error of a count-notify stream wait on `r` cut short by its stream's stop, abort or
/// discarding destroy, having consumed nothing.
#[cold]
fn cut_short(r: &CntRef) -> SimError {
    crate::waiters::cut_short_on("count notify", r.id, r.dev)
}

/// A count-notify wait as its stream runs it ([`SimJob::CntWait`]; its timeout was resolved
/// when it was queued): what it took ([`Cleared`]), or why it failed.
pub(crate) fn run_wait<'a>(
    r: &'a Arc<CntRef>,
    wait: &CntWait,
    ctx: &TaskCtx,
) -> Result<Cleared<'a>, SimError> {
    let t = wait.timeout.duration();
    // As for a notify wait: the waker is registered only when the wait would block.
    let lazy = ctx.lazy_cancel(|| {
        let r2 = Arc::clone(r);
        move || r2.slot().wake_all(&r2.file.waiter())
    });
    let noted = std::cell::Cell::new(false);
    let cancel = || {
        // Asked right before each sleep: note on what, for a queue that stays full.
        if !noted.replace(true) {
            ctx.set_blocked_on(
                crate::blocked::Blocked::CntWait {
                    dev: r.dev,
                    id: r.id,
                    forever: t.is_none(),
                }
                .note(),
            );
        }
        lazy.check() || r.file.map.lost()
    };
    let out = r.slot().wait_clearing(
        &r.file.waiter(),
        r.generation,
        wait.mode,
        wait.value,
        wait.on_satisfied,
        WaitArgs {
            proc: 0,
            timeout: t,
            cancel: &cancel,
        },
    );
    if noted.get() {
        ctx.set_blocked_on(0);
    }
    r.file.intact()?;
    let (out, count) = match out {
        Ok((out, count)) => (Ok(out), count),
        Err(e) => (Err(e), 0),
    };
    cnt_outcome(out, r, wait, t).map(|()| Cleared(r, count))
}

/// Explains a count wait that ended unsatisfied.
fn describe_cnt_wait(r: &CntRef, wait: &CntWait, t: Option<Duration>, what: &str) -> String {
    let slot = r.slot();
    let mut s = String::new();
    let _ = write!(s, "{what} on count notify {} (device {}) ", r.id, r.dev);
    match t {
        Some(t) => {
            let _ = write!(s, "was not satisfied within {} s", t.as_secs_f64());
        }
        None => s.push_str("was not satisfied"),
    }
    let _ = write!(
        s,
        ": waiting for {} ({}) with value {:#x}, count is {:#x}",
        wait.mode.formula(),
        wait.mode.name(),
        wait.value,
        slot.count()
    );
    let o = slot.owner();
    let _ = write!(
        s,
        "; owner pid {} ({})",
        o.pid,
        crate::diag::alive(o.pid, o.start_time)
    );
    match slot.last_record() {
        None => s.push_str("; never recorded"),
        Some(l) => {
            let ago = sys::now_ns().saturating_sub(l.at_ns) as f64 / 1e9;
            let mode = l.mode.map_or("an unknown mode", |m| m.name());
            let _ = write!(
                s,
                "; last record {mode} {:#x} by pid {} {ago:.3} s ago",
                l.value, l.pid
            );
        }
    }
    let _ = write!(s, "; {} wait(s) in progress", slot.waiters());
    s
}

fn cnt_outcome(
    out: Result<WaitOutcome, TableError>,
    r: &CntRef,
    wait: &CntWait,
    t: Option<Duration>,
) -> Result<(), SimError> {
    match out {
        Ok(WaitOutcome::Consumed) => Ok(()),
        Ok(WaitOutcome::TimedOut) => Err(SimError::new(
            Error::TaskTimeout,
            describe_cnt_wait(r, wait, t, "stream wait"),
        )),
        Ok(WaitOutcome::Cancelled) => Err(cut_short(r)),
        Err(e) => Err(SimError::new(
            Error::DrvInternalError,
            format!(
                "count notify {} of device {} in {}: the shared table is corrupt ({e:?})",
                r.id,
                r.dev,
                r.file.path.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests;

//! Count notifies (SPEC §6) on the simulated device: a shared-memory file per namespace and
//! server, `/dev/shm/acl-notify-sim.<namespace>.cnt<server>`, holding per-device count-notify
//! id pools (separate from notify ids) and a table of core [`CntSlot`]s, plus the
//! [`CntNotifyOps`] implementation of [`Sim`] on top of it.
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
//! [`Sim::gc`]) releases them.
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
use acl_notify_core::{CntNotifyOps, Error, Feature, RawCntNotify, RawStream, Soc};

use crate::error::SimError;
use crate::job::SimJob;
use crate::mapfile::{INIT_WAIT, Kind, Map, Open, PAGE, Registry, Shared};
use crate::repair::{LeakRepair, all_ids};
use crate::stream::TaskCtx;
use crate::{Sim, sys};
use acl_notify_handles::Slab;

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
crate::mapfile::file_header!(unsafe Header);

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

const fn align_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
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

fn bad_file(path: &Path, problem: impl fmt::Display) -> SimError {
    KIND.bad_file(path, problem)
}

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

fn soc_index(soc: Soc) -> u32 {
    Soc::ALL.iter().position(|s| *s == soc).unwrap_or(0) as u32 + 1
}

fn soc_from_index(i: u32) -> Option<Soc> {
    Soc::ALL.get((i as usize).checked_sub(1)?).copied()
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
        h.magic.store(MAGIC, SeqCst);
        h.version.store(CNT_LAYOUT_VERSION, SeqCst);
        h.soc.store(soc_index(l.soc), SeqCst);
        h.devices.store(l.devices, SeqCst);
        h.max.store(MAX_CNT_NOTIFIES, SeqCst);
        h.slot_size.store(CNT_SLOT_BYTES as u32, SeqCst);
        h.pool_size.store(POOL_BYTES as u32, SeqCst);
        h.hw_off.store(l.hw_off as u64, SeqCst);
        h.pools_off.store(l.pools_off as u64, SeqCst);
        h.slots_off.store(l.slots_off as u64, SeqCst);
        h.total.store(l.total as u64, SeqCst);
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

fn validate(h: &Header, path: &Path, l: &Layout, size: u64) -> Result<(), SimError> {
    KIND.check_identity(
        path,
        "count-notify file",
        (h.magic.load(SeqCst), MAGIC),
        (h.version.load(SeqCst), CNT_LAYOUT_VERSION),
    )?;
    match soc_from_index(h.soc.load(SeqCst)) {
        None => return Err(bad_file(path, "corrupt header (unknown SoC)")),
        Some(s) if s != l.soc || h.devices.load(SeqCst) != l.devices => {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "count-notify file {} simulates {s} with {} devices, but this process \
                     asked for {} with {}",
                    path.display(),
                    h.devices.load(SeqCst),
                    l.soc,
                    l.devices
                ),
            ));
        }
        Some(_) => {}
    }
    let fields = [
        (
            "ids per device",
            u64::from(h.max.load(SeqCst)),
            u64::from(MAX_CNT_NOTIFIES),
        ),
        (
            "slot size",
            u64::from(h.slot_size.load(SeqCst)),
            CNT_SLOT_BYTES as u64,
        ),
        (
            "pool size",
            u64::from(h.pool_size.load(SeqCst)),
            POOL_BYTES as u64,
        ),
        ("high-water offset", h.hw_off.load(SeqCst), l.hw_off as u64),
        ("pool offset", h.pools_off.load(SeqCst), l.pools_off as u64),
        ("slot offset", h.slots_off.load(SeqCst), l.slots_off as u64),
        ("total size", h.total.load(SeqCst), l.total as u64),
        ("file size", size, l.total as u64),
    ];
    KIND.check_fields(path, &fields)?;
    Ok(())
}

/// The [`Waiter`] of a count-notify file: shared futexes and `CLOCK_MONOTONIC`.
#[derive(Clone, Copy, Debug)]
pub struct CntWaiter;

impl Waiter for CntWaiter {
    fn wait(&self, word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
        sys::futex_wait(word, expected, timeout);
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
        let all = self
            .handles
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .drain();
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
    SimError::new(
        Error::InvalidHandle,
        format!(
            "count notify handle {:#x} is not a live count notify of this process (destroyed, \
             stale, of another Sim, or garbage)",
            h.0
        ),
    )
}

impl Sim {
    fn cnt_require(&self) -> Result<(), SimError> {
        self.require(Feature::CntNotify, "count notifies (aclrtCntNotify*)")
    }

    /// The count-notify file of this machine (created on first use).
    fn cnt_file(&self) -> Result<Arc<CntFile>, SimError> {
        let st = &self.inner.cnt;
        let mut f = lock(&st.file);
        if let Some(f) = &*f {
            f.intact()?;
            return Ok(Arc::clone(f));
        }
        let opened = CntFile::open(
            &self.inner.namespace,
            self.inner.server_id,
            self.inner.soc,
            self.inner.devices,
            CntOpen::CreateOrOpen,
        )?
        .ok_or_else(|| SimError::new(Error::DrvInternalError, "count-notify file vanished"))?;
        *f = Some(Arc::clone(&opened));
        Ok(opened)
    }

    fn cnt(&self, h: RawCntNotify) -> Result<Arc<CntRef>, SimError> {
        let t = self
            .inner
            .cnt
            .handles
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let r = t
            .get(h.0)
            .map(|e| Arc::clone(&e.r))
            .ok_or_else(|| bad_cnt(h))?;
        r.file.intact()?;
        Ok(r)
    }

    /// Releases the count notifies of dead processes (see [`CntFile::gc`]) and returns how
    /// many ids were freed; opens the machine's count-notify file for that if it exists (and
    /// does not create it). 0 when this machine's SoC has none or there is no file.
    pub fn cnt_gc(&self) -> u32 {
        if let Some(f) = self.inner.cnt.opened() {
            return f.gc();
        }
        if !self.inner.soc.has(Feature::CntNotify)
            || !cnt_file_path(&self.inner.namespace, self.inner.server_id).exists()
        {
            return 0;
        }
        // Opening collects once already; count what that pass freed too.
        match self.cnt_file() {
            Ok(f) => f.freed_on_open.swap(0, SeqCst) + f.gc(),
            Err(_) => 0,
        }
    }
}

/// A count-notify record as its stream runs it ([`SimJob::CntRecord`]).
pub(crate) fn run_record(r: &CntRef, record: CntRecord, pid: i32) -> Result<(), SimError> {
    r.live()?;
    r.slot().record(&r.file.waiter(), record, pid);
    // A record into a page a truncation cut off went nowhere (see `lost`).
    r.file.intact()
}

/// A count-notify wait as its stream runs it ([`SimJob::CntWait`]; its timeout was resolved
/// when it was queued).
pub(crate) fn run_wait(r: &Arc<CntRef>, wait: &CntWait, ctx: &TaskCtx) -> Result<(), SimError> {
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
                crate::job::Blocked::CntWait {
                    dev: r.dev,
                    id: r.id,
                    forever: t.is_none(),
                }
                .note(),
            );
        }
        lazy.check() || r.file.map.lost()
    };
    let out = r.slot().wait(
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
    cnt_outcome(out, r, wait, t)
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
        if sys::pid_alive(o.pid, o.start_time) {
            "alive"
        } else {
            "dead"
        }
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
        Ok(WaitOutcome::Cancelled) => Err(SimError::new(
            Error::TaskTimeout,
            format!(
                "stream wait on count notify {} cancelled: its stream was destroyed with tasks \
                 discarded",
                r.id
            ),
        )),
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

impl CntNotifyOps for Sim {
    fn cnt_create(&self, device: u32) -> Result<RawCntNotify, SimError> {
        self.checked(|| {
            self.cnt_require()?;
            self.device_ok(device)?;
            let file = self.cnt_file()?;
            let r = match CntRef::create(&file, device) {
                Ok(r) => r,
                Err(CreateFail::Other(e)) => return Err(e),
                Err(CreateFail::Exhausted) => {
                    file.gc();
                    match CntRef::create(&file, device) {
                        Ok(r) => r,
                        Err(CreateFail::Other(e)) => return Err(e),
                        Err(CreateFail::Exhausted) => {
                            return Err(SimError::new(
                                Error::NoNotifyResource,
                                cnt_exhausted_message(&file, device),
                            ));
                        }
                    }
                }
            };
            self.inner
                .cnt
                .handles
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(CntEntry { r })
                .ok()
                .map(RawCntNotify)
                .ok_or_else(|| {
                    SimError::new(
                        Error::ResourceAllocFail,
                        "count notify handle table is full",
                    )
                })
        })
    }

    fn cnt_destroy(&self, cnt: RawCntNotify) -> Result<(), SimError> {
        self.checked(|| {
            self.cnt_require()?;
            let e = self
                .inner
                .cnt
                .handles
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(cnt.0)
                .ok_or_else(|| bad_cnt(cnt))?;
            drop(e);
            Ok(())
        })
    }

    fn cnt_id(&self, cnt: RawCntNotify) -> Result<u32, SimError> {
        self.checked(|| {
            self.cnt_require()?;
            Ok(self.cnt(cnt)?.id)
        })
    }

    fn cnt_record(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        record: CntRecord,
    ) -> Result<(), SimError> {
        self.checked(|| {
            self.cnt_require()?;
            let r = self.cnt(cnt)?;
            let (s, _) = self.stream(stream)?;
            let pid = self.inner.pid;
            self.enqueue_job(&s, stream, SimJob::CntRecord(Box::new((r, record, pid))))
        })
    }

    fn cnt_wait(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        wait: CntWait,
    ) -> Result<(), SimError> {
        self.checked(|| {
            self.cnt_require()?;
            let r = self.cnt(cnt)?;
            let (s, sdev) = self.stream(stream)?;
            if sdev != r.dev {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "count notify {} lives on device {}; it can only be waited on from that \
                     device, not from a stream of device {sdev}",
                        r.id, r.dev
                    ),
                ));
            }
            let wait = wait.with_timeout(
                wait.timeout.resolve(
                    self.inner
                        .op_wait_timeout
                        .load(std::sync::atomic::Ordering::Relaxed),
                ),
            );
            self.enqueue_job(&s, stream, SimJob::CntWait(Box::new((r, wait))))
        })
    }

    fn cnt_reset(&self, cnt: RawCntNotify, stream: RawStream) -> Result<(), SimError> {
        self.checked(|| self.cnt_record(cnt, stream, CntRecord::set(0)))
    }

    fn cnt_notifies_free(&self, device: u32) -> Result<u32, SimError> {
        self.checked(|| {
            self.cnt_require()?;
            self.device_ok(device)?;
            let file = self.cnt_file()?;
            // Ids that only dead owners hold are as good as free: a create would reclaim them.
            file.reclaim_dead(device..device + 1);
            let pool = file
                .pool(device)
                .ok_or_else(|| SimError::new(Error::DrvInternalError, "no count-notify id pool"))?;
            Ok(pool.capacity().saturating_sub(pool.in_use()))
        })
    }
}

/// Explains an exhausted count-notify pool: who holds the ids (live owners with counts).
fn cnt_exhausted_message(file: &CntFile, device: u32) -> String {
    let mut owners: HashMap<i32, (u32, bool)> = HashMap::new();
    for id in 0..file.high_water(device) {
        let Some(slot) = file.slot(device, id) else {
            break;
        };
        if slot.state() == Some(SlotState::Live) {
            let o = slot.owner();
            let e = owners
                .entry(o.pid)
                .or_insert((0, sys::pid_alive(o.pid, o.start_time)));
            e.0 += 1;
        }
    }
    let mut v: Vec<_> = owners.into_iter().collect();
    v.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    let list: Vec<String> = v
        .iter()
        .take(8)
        .map(|(pid, (n, alive))| {
            format!(
                "pid {pid} ({}) holds {n}",
                if *alive { "alive" } else { "dead" }
            )
        })
        .collect();
    format!(
        "device {device} has no count-notify id left: all {MAX_CNT_NOTIFIES} are in use ({})",
        if list.is_empty() {
            "no live owner found".to_owned()
        } else {
            list.join(", ")
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::cnt::CntWaitMode;
    use acl_notify_core::{BackendError, StreamOps, SyncWait, Timeout};

    use crate::NamespaceGuard as Ns;

    fn open(tag: &str, soc: Soc) -> (Sim, Ns) {
        let ns = format!("unit-cnt-{tag}-{}", std::process::id());
        let _ = Sim::remove_namespace(&ns);
        let sim = Sim::builder()
            .soc(soc)
            .devices(2)
            .namespace(&ns)
            .open()
            .unwrap();
        (sim, Ns(ns))
    }

    #[test]
    fn layout_fits() {
        let l = Layout::new(Soc::Ascend950PR, 64);
        assert!(l.pools_off >= l.hw_off + 64 * 4);
        assert!(l.total >= l.slots_off + 64 * 8192 * 128);
        assert_eq!(CNT_SLOT_BYTES, 128);
    }

    /// Ids leaked by a process that died half-way through a create or destroy are freed by a
    /// later collection once they stayed orphaned for the grace period; live ones are kept.
    /// Another process took this one's count notify from it (as its gc does for an owner it
    /// finds dead) and the id went back to the pool: a record on the old handle fails with
    /// 507899 instead of counting on whatever count notify has the id now.
    #[test]
    fn a_record_on_a_count_notify_taken_from_this_process_fails() {
        let (sim, _ns) = open("taken", Soc::Ascend950PR);
        let c = sim.cnt_create(1).unwrap();
        let s = sim.create_stream(1).unwrap();
        let f = sim.inner.cnt.opened().unwrap();
        let r = sim.cnt(c).unwrap();
        assert!(r.slot().release(&f.waiter(), r.generation));
        f.pool(1).unwrap().free(r.id).unwrap();
        let other = CntRef::create(&f, 1).map_err(|_| "create").unwrap();
        assert_eq!(other.id, r.id, "the id is reused");
        sim.cnt_record(c, s, CntRecord::add(5)).unwrap();
        let e = sim
            .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
        assert!(e.to_string().contains("no longer holds it"), "{e}");
        assert_eq!(other.slot().count(), 0, "the new count notify is untouched");
    }

    #[test]
    fn leaked_count_ids_are_repaired_after_the_grace_period() {
        let (sim, _ns) = open("leak", Soc::Ascend950PR);
        let live = sim.cnt_create(1).unwrap();
        let f = sim.inner.cnt.opened().unwrap();
        let pool = f.pool(1).unwrap();
        // Died between allocating and claiming.
        let leaked = pool.alloc().unwrap();
        f.hw(1).unwrap().fetch_max(leaked + 1, SeqCst);
        // Died between releasing the slot and freeing the id.
        let r = CntRef::create(&f, 1).map_err(|_| "create").unwrap();
        let id = r.id;
        assert!(r.slot().release(&f.waiter(), r.generation));
        std::mem::forget(r);
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 3);
        // Within the grace period nothing is touched.
        assert_eq!(sim.gc().unwrap().cnt_freed, 0);
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 3);
        // Past it, both leaks are freed and the live one is kept.
        f.repair.set_grace(Duration::ZERO);
        assert_eq!(sim.gc().unwrap().cnt_freed, 2);
        assert!(!pool.is_allocated(leaked) && !pool.is_allocated(id));
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 1);
        sim.cnt_destroy(live).unwrap();
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES);
    }

    /// The free count does not count a count notify whose owner died: it reclaims such ids
    /// first, as a create that ran out would. Another device's are left to their own count.
    #[test]
    fn the_free_count_reclaims_dead_owners_first() {
        let (sim, _ns) = open("cntfreedead", Soc::Ascend950PR);
        let mine = sim.cnt_create(0).unwrap();
        let f = sim.inner.cnt.opened().unwrap();
        // Count notifies created on both devices by a process that has since exited and been
        // reaped (its create, done by hand: allocate, note, claim).
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let dead = c.id() as i32;
        c.wait().unwrap();
        let mut theirs = Vec::new();
        for dev in [0, 1] {
            let id = f.pool(dev).unwrap().alloc().unwrap();
            f.hw(dev).unwrap().fetch_max(id + 1, SeqCst);
            let owner = Owner {
                pid: dead,
                start_time: 1,
                server: 0,
                device: dev,
                proc: 0,
            };
            f.slot(dev, id).unwrap().claim(owner).unwrap();
            theirs.push((dev, id));
        }
        assert_eq!(
            sim.cnt_notifies_free(0).unwrap(),
            MAX_CNT_NOTIFIES - 1,
            "only ours"
        );
        assert!(
            !f.pool(0).unwrap().is_allocated(theirs[0].1),
            "the dead owner's id was freed"
        );
        assert!(
            f.pool(1).unwrap().is_allocated(theirs[1].1),
            "device 1 was not asked about"
        );
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES);
        sim.cnt_destroy(mine).unwrap();
        assert_eq!(sim.cnt_notifies_free(0).unwrap(), MAX_CNT_NOTIFIES);
    }

    /// `Sim::gc` reaches the count-notify file even when this process never used it.
    #[test]
    fn gc_opens_an_existing_count_file_without_creating_one() {
        let (sim, ns) = open("gcopen", Soc::Ascend950PR);
        assert_eq!(sim.gc().unwrap().cnt_freed, 0);
        assert!(!cnt_file_path(&ns.0, 0).exists(), "gc created the file");
        let other = Sim::builder()
            .soc(Soc::Ascend950PR)
            .devices(2)
            .namespace(&ns.0)
            .open()
            .unwrap();
        other.cnt_create(0).unwrap();
        assert!(sim.inner.cnt.opened().is_none());
        assert_eq!(sim.gc().unwrap().cnt_freed, 0, "the owner is alive");
        assert!(sim.inner.cnt.opened().is_some());
        drop(other);
    }

    #[test]
    fn only_on_950() {
        let (sim, _ns) = open("soc", Soc::Ascend910B);
        assert_eq!(
            sim.cnt_create(0).unwrap_err().kind(),
            Error::FeatureNotSupport
        );
        assert_eq!(
            sim.cnt_notifies_free(0).unwrap_err().kind(),
            Error::FeatureNotSupport
        );
        assert!(!cnt_file_path(sim.namespace(), 0).exists());
    }

    #[test]
    fn wrap_clear_budget_and_timeout_message() {
        let (sim, ns) = open("flow", Soc::Ascend950PR);
        let free = sim.cnt_notifies_free(1).unwrap();
        assert_eq!(free, MAX_CNT_NOTIFIES);
        let c = sim.cnt_create(1).unwrap();
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), free - 1);
        assert_eq!(sim.cnt_notifies_free(0).unwrap(), MAX_CNT_NOTIFIES);
        let s = sim.create_stream(1).unwrap();
        sim.cnt_record(c, s, CntRecord::set(u32::MAX)).unwrap();
        sim.cnt_record(c, s, CntRecord::add(3)).unwrap();
        sim.cnt_wait(c, s, CntWait::new(CntWaitMode::Equal, 2).clearing())
            .unwrap();
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        let one = Timeout::from_c(1);
        sim.cnt_wait(c, s, CntWait::new(CntWaitMode::Bigger, 0).with_timeout(one))
            .unwrap();
        let e = sim
            .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap_err();
        assert_eq!(e.kind(), Error::TaskTimeout);
        let m = e.to_string();
        for want in [
            "count notify 0 (device 1)",
            "count > value",
            "count is 0x0",
            &format!("owner pid {} (alive)", std::process::id()),
            "last record ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE 0x3",
        ] {
            assert!(m.contains(want), "{want:?} missing from {m}");
        }
        // Another device's stream may not wait.
        let s0 = sim.create_stream(0).unwrap();
        assert_eq!(
            sim.cnt_wait(c, s0, CntWait::new(CntWaitMode::Less, 1))
                .unwrap_err()
                .kind(),
            Error::ParamInvalid
        );
        sim.cnt_destroy(c).unwrap();
        assert_eq!(sim.cnt_destroy(c).unwrap_err().kind(), Error::InvalidHandle);
        assert_eq!(sim.cnt_id(c).unwrap_err().kind(), Error::InvalidHandle);
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), free);
        // The budget is machine-wide: a second Sim of another process would see it; here a
        // read-only view of the same file agrees.
        let ro = CntFile::open(&ns.0, 0, Soc::Ascend950PR, 2, CntOpen::ReadOnly)
            .unwrap()
            .unwrap();
        assert_eq!(ro.pool(1).unwrap().in_use(), 0);
    }

    #[test]
    fn destroy_with_a_queued_wait_keeps_the_slot_until_it_ran() {
        let (sim, _ns) = open("queued", Soc::Ascend950DT);
        let c = sim.cnt_create(0).unwrap();
        let id = sim.cnt_id(c).unwrap();
        let s = sim.create_stream(0).unwrap();
        sim.cnt_wait(c, s, CntWait::new(CntWaitMode::BiggerOrEqual, 2))
            .unwrap();
        sim.cnt_destroy(c).unwrap();
        // The queued wait still uses the slot: the id stays taken.
        assert_eq!(sim.cnt_notifies_free(0).unwrap(), MAX_CNT_NOTIFIES - 1);
        // No handle is left to record with, so record on the shared slot directly (as the
        // device would).
        let f = sim.inner.cnt.opened().unwrap();
        let slot = f.slot(0, id).unwrap();
        assert_eq!(slot.state(), Some(SlotState::Live));
        slot.record(&f.waiter(), CntRecord::add(2), 1);
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
            .unwrap();
        // The queued task was the last user: the id is free again.
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while sim.cnt_notifies_free(0).unwrap() != MAX_CNT_NOTIFIES {
            assert!(
                std::time::Instant::now() < end,
                "id not freed after the wait ran"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

//! What one process holds of device memory ([`MemState`], kept in a `Sim`): the device files
//! it mapped, its allocations and imports ([`Alloc`]), the frees it remembers and its host
//! memory.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use acl_notify_core::key::ExportKey;

use super::file::{Importers, Locked, MemFile};
use crate::error::SimError;
use crate::locks::lock;
use crate::sys;

/// How a range of the recently freed list ([`MemState::freed`]) went away, for the message
/// about a stale pointer into it: the importer that closed its import did not free the memory
/// (its owner may still use it), and a message saying "freed" sent the user after the owner.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Gone {
    /// `aclrtFree` (or a pool's free) of this process.
    Freed,
    /// `aclrtIpcMemClose` of this process's import.
    Closed,
}

/// One allocation (its slot in a device-memory file, and what a check needs of it), with its
/// file held as `F`: by reference count ([`Alloc`]: the table's entries, and the ranges of
/// tasks that outlive the call), borrowed ([`AllocRef`]: what a lookup hands out), or by
/// pointer (this thread's cache of recent ones, [`super::recent`], and a queued copy's
/// side, [`super::queued`], each with its own reason why the file is still mapped).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AllocOf<F> {
    pub(crate) file: F,
    pub(crate) id: u32,
    pub(crate) generation: u32,
    pub(crate) size: u64,
    /// Imported through IPC (else owned).
    pub(crate) imported: bool,
    /// The device this process uses it on: the owner's own, or the one it was imported onto.
    pub(crate) used_on: u32,
}

impl<F> AllocOf<F> {
    /// The same allocation with its file held as `file` (the same file).
    #[inline(always)]
    pub(super) fn with_file<G>(&self, file: G) -> AllocOf<G> {
        AllocOf {
            file,
            id: self.id,
            generation: self.generation,
            size: self.size,
            imported: self.imported,
            used_on: self.used_on,
        }
    }
}

/// One allocation this process may touch: its own, or one it imported.
pub(crate) type Alloc = AllocOf<Arc<MemFile>>;

impl Alloc {
    /// The allocation as a lookup hands it out: the file borrowed, no reference count.
    pub(super) fn view(&self) -> AllocRef<'_> {
        self.with_file(&*self.file)
    }

    /// The owner's free of this allocation in its file (`MemFile::free_owned`), whatever is
    /// no longer in this process's table (a memory pool's kept blocks).
    pub(super) fn release_owned(&self, importers: Importers) {
        if let Ok(l) = self.file.lock() {
            self.free_owned(&l, importers);
        }
    }

    /// The owner's free of this allocation in its file (`MemFile::free_owned`, under its lock
    /// `l`), its span no longer counted for its kind ([`super::usage`]).
    pub(super) fn free_owned(&self, l: &Locked<'_>, importers: Importers) -> bool {
        if let Some(s) = self
            .file
            .slot(self.id)
            .filter(|s| s.is_live(self.generation))
        {
            let kind = super::components::Component::of_policy(s.flag_bits());
            self.file.usage().sub(kind, s.sync.span.load(SeqCst));
        }
        self.file.free_owned(l, self.id, self.generation, importers)
    }
}

/// An allocation as the copy paths see it ([`Alloc`] with its file borrowed): found in the
/// table or in this thread's cache of recent ones ([`super::recent`]).
pub(crate) type AllocRef<'f> = AllocOf<&'f MemFile>;

impl AllocRef<'_> {
    /// Imported onto another device than the one the memory is on.
    pub(super) fn cross_device(&self) -> bool {
        self.imported && self.used_on != self.file.device()
    }

    /// An import whose owner has freed it (this incarnation, still orphaned).
    pub(super) fn owner_freed(&self) -> bool {
        self.imported
            && self
                .file
                .slot(self.id)
                .is_some_and(|s| s.holds(self.generation) && s.sync.owner_freed.load(SeqCst) != 0)
    }

    /// Whether the shared slot is still this incarnation, as this process holds it. An
    /// importer holds it while it is live, and after its owner died (until the importer
    /// closes), but not after its owner freed it (SPEC §8: an importer's use after the
    /// owner's free is an error).
    pub(super) fn current(&self) -> bool {
        Alloc::is_current(self.file, self.id, self.generation, self.imported)
    }
}

impl<F> AllocOf<F> {
    /// Whether allocation `id` (this `generation`) of `file` is still the incarnation this
    /// process holds (see [`AllocRef::current`]).
    pub(super) fn is_current(file: &MemFile, id: u32, generation: u32, imported: bool) -> bool {
        file.slot(id).is_some_and(|s| {
            if imported {
                s.holds(generation) && s.sync.owner_freed.load(SeqCst) == 0
            } else {
                s.is_live(generation)
            }
        })
    }
}

/// This process's device memory of one [`Sim`]: the files it mapped and the allocations it
/// may touch.
#[derive(Debug)]
pub(crate) struct MemState {
    pub(super) capacity: u64,
    /// By (server, device). Never shrinks while the `MemState` lives: a lookup through this
    /// thread's cache of recent allocations ([`super::recent`]) borrows the file of an
    /// allocation from here for as long as the `Sim` is borrowed, even after the allocation
    /// is gone.
    pub(super) files: Mutex<HashMap<(u32, u32), Arc<MemFile>>>,
    /// By device address (an address, like a handle, comes back: a new allocation at a freed
    /// one's address; each entry also names its slot's incarnation, `id` and `generation`,
    /// which every use checks). Entries are removed only by [`remove_if`](Self::remove_if),
    /// [`remove`](Self::remove) and [`clear`](Self::clear), which bump
    /// [`epoch`](Self::epoch).
    /// Shared with the queued tasks that resolve device addresses when they run (`indirect`).
    pub(super) allocs: Arc<RwLock<BTreeMap<usize, Alloc>>>,
    /// Bumped after every removal from `allocs`, so that the threads' caches of recent
    /// allocations ([`super::recent`]) made before it miss from then on.
    epoch: AtomicU64,
    /// The first [`RESERVES_FAST`] files' device addresses (their reservations' starts; each
    /// is [`capacity`](Self::capacity) long), and how many files there are: so that a copy's
    /// host side is told from device memory without a lock ([`may_be_device`](Self::may_be_device)).
    reserves: [AtomicUsize; RESERVES_FAST],
    reserves_n: AtomicUsize,
    /// Recently freed or closed (address, size, device, how), newest last.
    pub(super) freed: Mutex<VecDeque<(usize, u64, u32, Gone)>>,
    /// `aclrtMallocHost` allocations.
    pub(super) host: super::host::HostTable,
    /// IPC imports of this process: key → device address.
    pub(super) imports: Mutex<HashMap<ExportKey, usize>>,
    /// Reserved ranges and physical allocations (`vmm`).
    pub(super) vmm: super::reserved::Vmm,
    /// Stream-ordered memory pools (`pool`).
    pub(super) pools: super::pool_state::Pools<Alloc>,
    /// Each device's runtime areas (`device_area`: the overflow status…), by kind (an `Area`
    /// as `u8`: this module names no module that names it back) and device.
    pub(super) areas: Mutex<HashMap<(u8, u32), usize>>,
    /// The advice of this process's managed allocations (`managed`).
    pub(super) managed: super::managed_table::ManagedTable,
    /// What this process imported takes, by the device it is imported onto (`usage`).
    pub(super) import_usage: Mutex<HashMap<u32, super::components::Usage>>,
}

impl MemState {
    pub(crate) fn new(capacity: u64) -> MemState {
        MemState {
            capacity,
            files: Mutex::new(HashMap::new()),
            allocs: Arc::new(RwLock::new(BTreeMap::new())),
            epoch: AtomicU64::new(0),
            reserves: [const { AtomicUsize::new(0) }; RESERVES_FAST],
            reserves_n: AtomicUsize::new(0),
            freed: Mutex::new(VecDeque::new()),
            host: Default::default(),
            imports: Mutex::new(HashMap::new()),
            vmm: Default::default(),
            pools: Default::default(),
            areas: Default::default(),
            managed: Default::default(),
            import_usage: Default::default(),
        }
    }

    /// Counts import `a` (`held`: just made; else closed) on the device it is imported onto.
    pub(super) fn count_import(&self, a: &Alloc, held: bool) {
        let mut u = lock(&self.import_usage);
        let u = u.entry(a.used_on).or_default();
        if held {
            u.add(super::components::Component::Import, a.size);
        } else {
            u.sub(super::components::Component::Import, a.size);
        }
    }

    /// Records an allocation or import of this process at device address `addr`.
    ///
    /// It never replaces an entry (an address is reused only after its entry was removed),
    /// which is why an insert does not bump the epoch that threads' caches of lookups check.
    pub(super) fn insert(&self, addr: usize, a: Alloc) {
        let old = self
            .allocs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(addr, a);
        debug_assert!(
            old.is_none(),
            "device address {addr:#x} entered twice: a cached lookup of it would be stale"
        );
    }

    /// The epoch of `allocs` (see [`super::recent`]): read before a lookup whose result a
    /// thread caches.
    #[inline]
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Acquire)
    }

    /// Notes the device addresses of `file`, just added to `files` (under its lock, before any
    /// allocation in it is handed out).
    pub(super) fn note_file(&self, file: &MemFile) {
        let n = self.reserves_n.load(Relaxed);
        if let Some(r) = self.reserves.get(n) {
            r.store(file.addr(0), Relaxed);
        }
        self.reserves_n.store(n + 1, Release);
    }

    /// Whether `addr` may be a device address of this process: `false` only if it is in no
    /// file's reservation (host memory), told without a lock while there are at most
    /// [`RESERVES_FAST`] files. A device address reaches a caller only after its file was
    /// noted ([`note_file`](Self::note_file), before the allocation or import that returned
    /// it), so it is never taken for host memory.
    #[inline]
    pub(super) fn may_be_device(&self, addr: usize) -> bool {
        let n = self.reserves_n.load(Acquire);
        self.reserves.get(..n).is_none_or(|rs| {
            rs.iter()
                .any(|r| addr.wrapping_sub(r.load(Relaxed)) < self.capacity as usize)
        })
    }

    /// Marks a removal from `allocs` for the threads' caches; called right after it.
    fn removed(&self) {
        self.epoch.fetch_add(1, Release);
    }

    /// Removes the allocation or import at device address `addr` if there is one and `take`
    /// accepts it (an `Err` from `take` is returned, nothing removed).
    pub(super) fn remove_if<E>(
        &self,
        addr: usize,
        take: impl FnOnce(&Alloc) -> Result<(), E>,
    ) -> Result<Option<Alloc>, E> {
        let a = {
            let mut allocs = self.allocs.write().unwrap_or_else(PoisonError::into_inner);
            match allocs.get(&addr) {
                Some(a) => {
                    take(a)?;
                    allocs.remove(&addr)
                }
                None => None,
            }
        };
        if a.is_some() {
            self.removed();
        }
        Ok(a)
    }

    /// Removes the allocation or import at device address `addr`, if there is one.
    pub(super) fn remove(&self, addr: usize) -> Option<Alloc> {
        let Ok(a) = self.remove_if(addr, |_| Ok::<(), std::convert::Infallible>(()));
        a
    }

    /// Frees what this process owns and closes what it imported (the session ends).
    pub(crate) fn clear(&self, pid: i32) {
        if sys::getpid() != pid {
            return;
        }
        lock(&self.imports).clear();
        // Kept pool blocks are in no table entry; blocks in use are freed with the rest.
        self.pools
            .clear(&|a: &Alloc| a.release_owned(Importers::Refused));
        // Physical memory it shared by shareable handle stays with its importers.
        let physical = self.vmm.clear();
        let allocs =
            std::mem::take(&mut *self.allocs.write().unwrap_or_else(PoisonError::into_inner));
        self.removed();
        let me = (pid, sys::proc_start_time(pid).unwrap_or(0));
        for (addr, a) in allocs {
            super::managed_table::forget(&self.managed, addr, &a.file);
            if let Ok(l) = a.file.lock() {
                if a.imported {
                    self.count_import(&a, false);
                    a.file.leave(&l, a.id, a.generation, me);
                } else if physical.contains(&addr) {
                    a.free_owned(&l, Importers::Served);
                } else {
                    a.free_owned(&l, Importers::Refused);
                }
            }
        }
        self.host.clear();
    }

    /// Reclaims what dead processes held in the device files this process mapped (see
    /// [`MemFile::reclaim_dead`]) and, given `also` = (namespace, server, devices), in that
    /// server's other device files too, mapped for the scan only (what a dead process left on
    /// a device no process still here ever touched); a file that cannot be mapped or locked
    /// is left as it is. How many allocations were released.
    pub(crate) fn reclaim_dead(&self, also: Option<(&str, u32, u32)>) -> u32 {
        let mut files: Vec<Arc<MemFile>> = Vec::new();
        {
            let mapped = lock(&self.files);
            files.extend(mapped.values().cloned());
            if let Some((namespace, server, devices)) = also {
                for device in (0..devices).filter(|d| !mapped.contains_key(&(server, *d))) {
                    if let Ok(Some(f)) =
                        MemFile::open(namespace, server, device, self.capacity, false)
                    {
                        files.push(f);
                    }
                }
            }
        }
        files
            .iter()
            .filter_map(|f| f.lock().ok().map(|l| f.reclaim_dead(&l)))
            .sum()
    }
}

/// Files whose device addresses [`MemState::may_be_device`] checks without a lock (one per
/// device of each server this process maps memory of).
const RESERVES_FAST: usize = 32;

impl MemState {
    /// The reference this process keeps to `file`, one of its device-memory files (507899 if
    /// it is not: never, as files are kept for the `MemState`'s life).
    pub(super) fn file_of(&self, file: &MemFile) -> Result<Arc<MemFile>, SimError> {
        lock(&self.files)
            .values()
            .find(|f| std::ptr::eq(&***f, file))
            .cloned()
            .ok_or_else(|| {
                SimError::new(
                    acl_notify_core::Error::DrvInternalError,
                    format!(
                        "device-memory file {} is not among this process's files",
                        file.path().display()
                    ),
                )
            })
    }

    /// Whether one of the device-memory files this process mapped shrank under it.
    pub(crate) fn any_lost(&self) -> bool {
        lock(&self.files).values().any(|f| f.is_lost())
    }

    /// 507899 naming the first device-memory file found cut short; `None` if all are intact.
    pub(crate) fn lost_file(&self) -> Option<SimError> {
        lock(&self.files).values().find_map(|f| f.intact().err())
    }
}

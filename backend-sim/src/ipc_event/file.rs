//! The IPC event file of one namespace and server: its layout on the shared-file layer
//! ([`crate::mapfile`]), its table of core [`Slot`]s, and who holds them — each process by its
//! bit in the slot's holder bitmap, at its index in the process table of the server's notify
//! file ([`crate::shm`]), so that a dead process's references are dropped with its notify
//! references ([`reclaim_proc`]).
//!
//! This module names nothing of the process table: callers pass the index. It is the layer the
//! process table's reclaim calls down into, so it must not call back up.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};

use acl_notify_core::Error;
use acl_notify_core::slot::{Leave, MAX_PROCS, Owner, Payload, Slot, SlotState};
use acl_notify_core::waiter::Waiter;

use crate::error::SimError;
use crate::mapfile::{
    Field, INIT_WAIT, Kind, Map, Open, PAGE, Registry, Shared, align_up, field, fill_fields,
};
use crate::repair::{LeakRepair, all_ids, retire_orphan_slot};
use crate::sys;

const MAGIC: u64 = u64::from_le_bytes(*b"ACLNEVT\x01");
/// Bumped whenever the layout changes (2: the slots are the core's shared `Slot` with the
/// event as payload; 3: holders are the slot's bitmap of process-table indices, not a count in
/// the payload, and the header keeps a high-water mark; 4: a discarded record has a bit of its
/// own in the latest-record word, `DROPPED` (bit 24), which a build of layout 3 would read as
/// part of the issuer's pid and never set).
pub const EVT_LAYOUT_VERSION: u32 = 4;
/// IPC events per device and server (ours).
pub const MAX_IPC_EVENTS: u32 = 1024;

const KIND: Kind = Kind("IPC event file");

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    ready: AtomicU32,
    devices: AtomicU32,
    max: AtomicU32,
    creator_pid: AtomicI32,
    slot_size: AtomicU32,
    slots_off: AtomicU64,
    total: AtomicU64,
    pid_ns: AtomicU64,
    /// One past the highest slot index ever claimed on any device (bounds the reclaim scans,
    /// so untouched slot pages stay unbacked).
    high_water: AtomicU32,
    _pad: AtomicU32,
}

// SAFETY: `Header` is atomics only (every field above); the macro asserts that it fits in a
// page.
crate::mapfile::file_header!(unsafe Header, MAGIC, EVT_LAYOUT_VERSION);

/// What a slot of the core's [`Slot`] machine holds for one IPC event (the lifecycle — state
/// word with the generation, owner, holder bitmap — is the core's).
#[repr(C)]
pub(crate) struct EvtPayload {
    /// Records enqueued by any holder.
    pub(crate) issued: AtomicU32,
    /// The latest record number that has run (as serial numbers go: they wrap at 2^32): a futex word (waits sleep on it, records wake
    /// it).
    pub(crate) done: AtomicU32,
    /// When the latest record ran (ns, 0: never).
    pub(crate) stamp_ns: AtomicU64,
    /// Who issued the latest record: `(number << 32) | (process-table index << 26) | pid`,
    /// bit 25 set once it was counted as done without having run, bit 24 too when that was
    /// because its issuer's stream discarded it, not because its issuer died (0: not known), raised
    /// to a later record number only (as serial numbers go: they wrap at 2^32). A wait for a record that is still not done
    /// when this process has died counts it as done: it will never run (see
    /// `IpcRef::dead_issuer`).
    pub(crate) latest_by: AtomicU64,
}

impl Payload for EvtPayload {
    const NEW: Self = EvtPayload {
        issued: AtomicU32::new(0),
        done: AtomicU32::new(0),
        stamp_ns: AtomicU64::new(0),
        latest_by: AtomicU64::new(0),
    };

    /// No record yet.
    fn claimed(&self, _generation: u32) {
        self.issued.store(0, SeqCst);
        self.done.store(0, SeqCst);
        self.stamp_ns.store(0, SeqCst);
        self.latest_by.store(0, SeqCst);
    }

    fn retired(&self, _next: u32) {}

    /// Waits sleep on `done`.
    fn wake_all<W: Waiter>(&self, w: &W) {
        w.wake(&self.done, u32::MAX);
    }
}

/// One IPC event in the file: the core's slot with an [`EvtPayload`]. All-zero is a free
/// slot.
pub(crate) type EvtSlot = Slot<EvtPayload>;

const SLOT_BYTES: usize = std::mem::size_of::<EvtSlot>();
const _: () = assert!(SLOT_BYTES == 128);

// SAFETY: atomics only (the core's slot and the payload above).
unsafe impl Shared for EvtSlot {}

fn layout_total(devices: u32) -> usize {
    align_up(
        PAGE + devices as usize * MAX_IPC_EVENTS as usize * SLOT_BYTES,
        PAGE,
    )
}

/// The path of a namespace's IPC event file for `server`.
pub fn evt_file_path(namespace: &str, server: u32) -> PathBuf {
    crate::mapfile::file_path(namespace, "evt", format_args!("{server}"))
}

/// One incarnation of one slot: (device, index, generation).
pub(crate) type EvtKey = (u32, u32, u32);

/// One mapped IPC event file.
pub(crate) struct EvtFile {
    path: PathBuf,
    map: Map,
    devices: u32,
    server: u32,
    /// The process that mapped it (a forked child must not use it).
    pid: i32,
    /// This process's references by incarnation: its holder bit in a slot is set while the
    /// count is above zero. Every change of this process's bits is made under this lock, so
    /// a count and its bit never disagree.
    held: Mutex<HashMap<EvtKey, u32>>,
    /// Leak repair (see [`crate::repair`]): snapshots are (generation, state, holder bits),
    /// the holder bits being strays (of free process-table entries) or none.
    repair: LeakRepair<(u32, Option<SlotState>, u64)>,
}

// SAFETY: the mapping is owned by this value until drop and only accessed through atomics.
unsafe impl Send for EvtFile {}
// SAFETY: as above.
unsafe impl Sync for EvtFile {}

impl fmt::Debug for EvtFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvtFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// One mapping per file per process; a forked child starts with an empty registry.
static REGISTRY: Registry<EvtFile> = Registry::new();

/// Whether [`EvtFile::open`] may create the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EvtOpen {
    /// Create it if missing (a process that uses IPC events).
    CreateOrOpen,
    /// Only an existing one: `Ok(None)` if there is none (the reclaim of a dead process, which
    /// held nothing if the file does not exist).
    Existing,
}

/// How [`EvtFile::claim`] failed.
#[derive(Debug)]
pub(crate) enum ClaimError {
    /// Every slot of the device is in use.
    Full,
    /// Another error.
    Other(SimError),
}

/// How [`EvtFile::hold`] failed: the incarnation is gone (every holder let it go, or the slot
/// was reused).
#[derive(Debug)]
pub(crate) struct Gone;

impl EvtFile {
    /// Opens the IPC event file of `namespace`/`server` (creating it if `mode` says so),
    /// shared within the process.
    ///
    /// Errors: 107000 the file was made for another number of devices; 507899 it is corrupt,
    /// foreign, not ours or not mode 0600.
    pub(crate) fn open(
        namespace: &str,
        server: u32,
        devices: u32,
        mode: EvtOpen,
    ) -> Result<Option<Arc<EvtFile>>, SimError> {
        let path = evt_file_path(namespace, server);
        let me = sys::getpid();
        REGISTRY.get_or_open(
            &path,
            |f| f.pid == me,
            || {
                let total = layout_total(devices);
                let open = Open {
                    path: &path,
                    kind: KIND,
                    create: mode == EvtOpen::CreateOrOpen,
                    writable: true,
                    total,
                    init_wait: INIT_WAIT,
                    keep_fd: false,
                };
                let fill = |h: &Header| fill_fields(&header_fields(h, devices, total));
                let check = |h: &Header, size: u64| validate(h, &path, devices, total, size);
                Ok(open.open(fill, check)?.map(|map| EvtFile {
                    path: path.clone(),
                    map,
                    devices,
                    server,
                    pid: me,
                    held: Mutex::new(HashMap::new()),
                    repair: LeakRepair::new(),
                }))
            },
        )
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The server the file simulates.
    pub(crate) fn server(&self) -> u32 {
        self.server
    }

    /// `Ok` unless the file shrank under the mapping (507899 saying so).
    pub(crate) fn intact(&self) -> Result<(), SimError> {
        self.map.intact(&self.path)
    }

    /// Whether the file shrank under the mapping.
    pub(crate) fn lost(&self) -> bool {
        self.map.lost()
    }

    /// Whether this mapping is this process's own (not one inherited across `fork()`).
    pub(crate) fn mine(&self) -> bool {
        self.pid == sys::getpid()
    }

    /// The slot `idx` of device `dev`.
    pub(crate) fn slot(&self, dev: u32, idx: u32) -> Option<&EvtSlot> {
        if dev >= self.devices || idx >= MAX_IPC_EVENTS {
            return None;
        }
        let off = PAGE + (dev as usize * MAX_IPC_EVENTS as usize + idx as usize) * SLOT_BYTES;
        // Bounds and alignment checked in release builds too.
        Some(self.map.at(off))
    }

    fn high_water(&self) -> u32 {
        self.map
            .header::<Header>()
            .high_water
            .load(SeqCst)
            .min(MAX_IPC_EVENTS)
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<EvtKey, u32>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Claims a free slot on `dev` for a new IPC event owned by this process, process-table
    /// entry `proc` its only holder. Returns its key; the caller owns one reference (give it
    /// back with [`release`](Self::release)).
    pub(crate) fn claim(&self, proc: u32, start_time: u64, dev: u32) -> Result<EvtKey, ClaimError> {
        self.intact().map_err(ClaimError::Other)?;
        let owner = Owner {
            pid: self.pid,
            start_time,
            server: self.server,
            device: dev,
            proc,
        };
        if proc >= MAX_PROCS {
            return Err(ClaimError::Other(SimError::new(
                Error::DrvInternalError,
                format!("process-table index {proc} out of range"),
            )));
        }
        // A repair pass of this process never sees one of its claims half-way.
        let _g = self.repair.op_guard();
        let mut held = self.held();
        let hw = self.high_water();
        for idx in 0..MAX_IPC_EVENTS {
            let Some(s) = self.slot(dev, idx) else { break };
            if idx >= hw {
                // Before the claim: the scans of the reclaim and the repair must reach every
                // slot a process may have taken, also one killed right after taking it.
                self.map
                    .header::<Header>()
                    .high_water
                    .fetch_max(idx + 1, SeqCst);
            }
            // A slot that is not free is refused untouched: try the next one.
            let Ok(generation) = s.claim_raw(owner, 0, |_| {}) else {
                continue;
            };
            held.insert((dev, idx, generation), 1);
            return Ok((dev, idx, generation));
        }
        Err(ClaimError::Full)
    }

    /// Takes one more reference of this process (process-table entry `proc`) to incarnation
    /// `key`: sets the process's holder bit if it held none yet. `Err(Gone)` if the
    /// incarnation no longer exists.
    pub(crate) fn hold(&self, proc: u32, key: EvtKey) -> Result<(), Gone> {
        let (dev, idx, generation) = key;
        let s = self.slot(dev, idx).ok_or(Gone)?;
        let mut held = self.held();
        if let Some(n) = held.get_mut(&key) {
            // Our bit keeps the incarnation alive, unless another process took this one for
            // dead and dropped it.
            if !s.is_live(generation) {
                return Err(Gone);
            }
            *n += 1;
            return Ok(());
        }
        match s.join(proc, generation) {
            Ok(_) => {
                held.insert(key, 1);
                Ok(())
            }
            // Stale; if our join was the last reference of a retired incarnation, the leave
            // inside `join` retired it again already.
            Err(_) => Err(Gone),
        }
    }

    /// Gives back one reference of this process (process-table entry `proc`) to `key`; the
    /// last one clears the process's holder bit, and the last holder's retires the slot.
    /// `proc` is `None` when the entry no longer names this process (another process took it
    /// for dead and dropped its bits): then only the count goes.
    pub(crate) fn release(&self, proc: Option<u32>, key: EvtKey) {
        if !self.mine() || self.lost() {
            // Inherited across fork(): the bit is the parent's. Or the file is gone.
            return;
        }
        let (dev, idx, generation) = key;
        let _g = self.repair.op_guard();
        let mut held = self.held();
        match held.get_mut(&key) {
            Some(n) if *n > 1 => {
                *n -= 1;
                return;
            }
            Some(_) => {
                held.remove(&key);
            }
            None => return,
        }
        let (Some(proc), Some(s)) = (proc, self.slot(dev, idx)) else {
            return;
        };
        // Not this incarnation any more: another process took this one for dead and dropped
        // its references; the bit at our index, if set, is not ours.
        if s.is_live(generation) {
            let _: Leave = s.leave(proc);
        }
    }

    /// Test hook: the leak repair's grace period.
    #[cfg(test)]
    pub(crate) fn set_repair_grace(&self, grace: std::time::Duration) {
        self.repair.set_grace(grace);
    }

    /// Forgets this process's count of `key` without touching the slot (a test standing in
    /// for another process, whose counts go with it).
    #[cfg(test)]
    pub(crate) fn forget(&self, key: EvtKey) {
        self.held().remove(&key);
    }

    /// Retires slots that no process holds but that are not free, unchanged for the repair
    /// grace period: left by a process killed between taking a free slot and marking itself
    /// its holder, or while retiring it, or kept by stray holder bits of process-table entries
    /// that no process occupies (`free`: such a bit is nobody's reference, and nobody
    /// reclaims it). `hold(mask)` occupies those entries while a slot's bits are cleared, so
    /// that nobody registers there and joins meanwhile (`None`: one was taken). Returns how
    /// many slots were freed.
    fn repair_leaks<H>(&self, free: u64, hold: impl Fn(u64) -> Option<H>) -> u32 {
        let hw = self.high_water();
        self.repair.sweep(
            all_ids(self.devices, |_| hw),
            |dev, idx| {
                let s = self.slot(dev, idx)?;
                let (state, holders) = (s.state(), s.holders());
                (state != Some(SlotState::Free) && holders & !free == 0)
                    .then(|| (s.generation(), state, holders))
            },
            |dev, idx| {
                self.slot(dev, idx)
                    .is_some_and(|s| retire_orphan_slot(s, &hold))
            },
        )
    }

    /// Drops every reference process-table entry `proc` holds (its holder bit in every slot);
    /// a slot it held last is retired. Returns how many were.
    fn drop_proc(&self, proc: u32) -> u32 {
        let hw = self.high_water();
        let mut n = 0;
        for dev in 0..self.devices {
            for idx in 0..hw {
                let Some(s) = self.slot(dev, idx) else { break };
                if s.holders() & (1u64 << proc) != 0 && s.leave(proc) == Leave::Last {
                    n += 1;
                }
            }
        }
        n
    }
}

/// Drops what process-table entry `proc` of the notify file of `namespace`/`server` holds in
/// the IPC event file of the same server (if there is one), for the process table's reclaim of
/// a dead process (or of an entry given up): to be called before the entry is freed, so that a
/// newcomer there never inherits the bits. Returns how many IPC events were freed.
pub(crate) fn reclaim_proc(namespace: &str, server: u32, devices: u32, proc: u32) -> u32 {
    match EvtFile::open(namespace, server, devices, EvtOpen::Existing) {
        Ok(Some(f)) if !f.lost() => f.drop_proc(proc),
        // No file: nobody held an IPC event. A file that cannot be opened (another machine's,
        // corrupt) cannot be used by anyone either.
        _ => 0,
    }
}

/// The header words the layout of `devices` devices (`total` bytes) fixes: written by the
/// creator and checked by every opener.
fn header_fields(h: &Header, devices: u32, total: usize) -> [Field<'_>; 5] {
    [
        field("devices", &h.devices, u64::from(devices)),
        field("events per device", &h.max, u64::from(MAX_IPC_EVENTS)),
        field("slot size", &h.slot_size, SLOT_BYTES as u64),
        field("slot offset", &h.slots_off, PAGE as u64),
        field("total size", &h.total, total as u64),
    ]
}

/// The leak repair of the IPC event file of `namespace`/`server`, for the process table's
/// garbage collection: see [`EvtFile::repair_leaks`]. Only where this process has the file
/// mapped already: the repair state (its suspects, and when each was first seen) lives with
/// the mapping, so a mapping opened for one pass and dropped after it could only suspect,
/// never repair, and would map, scan and unmap the file at every garbage collection for
/// nothing. A process that uses IPC events keeps the mapping, and repairs.
pub(crate) fn repair_leaks<H>(
    namespace: &str,
    server: u32,
    free: u64,
    hold: impl Fn(u64) -> Option<H>,
) -> u32 {
    let me = sys::getpid();
    match REGISTRY.find(&evt_file_path(namespace, server), |f| f.pid == me) {
        Some(f) if !f.lost() => f.repair_leaks(free, hold),
        _ => 0,
    }
}

fn validate(
    h: &Header,
    path: &Path,
    devices: u32,
    total: usize,
    size: u64,
) -> Result<(), SimError> {
    if h.devices.load(SeqCst) != devices {
        return Err(SimError::new(
            Error::ParamInvalid,
            format!(
                "IPC event file {} simulates {} devices, but this process asked for {devices}",
                path.display(),
                h.devices.load(SeqCst)
            ),
        ));
    }
    KIND.check_fields(path, &header_fields(h, devices, total), size, total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::BackendError;

    /// The creator writes the header words of `header_fields` and an opener checks each: a
    /// word that differs is refused, named, with both values.
    #[test]
    fn a_header_word_that_differs_is_refused_by_name() {
        use std::os::unix::fs::FileExt as _;
        let ns = format!("evt-file-word-{}", std::process::id());
        let path = evt_file_path(&ns, 0);
        drop(EvtFile::open(&ns, 0, 1, EvtOpen::CreateOrOpen).unwrap());
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let at = std::mem::offset_of!(Header, slot_size) as u64;
        file.write_all_at(&64u32.to_le_bytes(), at).unwrap();
        let e = EvtFile::open(&ns, 0, 1, EvtOpen::CreateOrOpen).unwrap_err();
        assert_eq!(e.kind(), Error::DrvInternalError);
        assert!(
            e.to_string().contains(&format!(
                "corrupt header: slot size is 64, expected {SLOT_BYTES}"
            )),
            "{e}"
        );
        crate::mapfile::remove_files(&ns, Some("evt")).unwrap();
    }
}

//! IPC events (`ACL_EVENT_IPC`) across processes: a shared-memory file per namespace and server,
//! `/dev/shm/acl-notify-sim.<namespace>.evt<server>`, made and attached with the shared-file
//! machinery of [`crate::mapfile`] (the creation protocol, owner and mode checks, `SIGBUS`
//! safety), holding one [`EvtSlot`] per IPC event and device.
//!
//! # One slot
//!
//! Each event is a core [`Slot`] (its lifecycle: the state word with the generation, the
//! owner) with an [`EvtPayload`]. `issued` counts the records enqueued by any holder (owner or
//! opener), `done` the highest record number that has run (a futex word: waits sleep on it,
//! records wake it). A stream wait captures `issued` when it is enqueued and stalls until
//! `done` reaches it — the Ex semantics of `acl_notify_core::event` — and a wait on an event
//! never recorded does nothing. `holders` counts the handles (the creator's and each opened
//! one, in any process): a count in the payload rather than the core's holder bitmap, as the
//! device-memory file lists its importers in its payload, because this file has no process
//! table. The last handle to go retires the slot, whose generation then moves on, so a handle
//! of a freed event is told apart (107017). Events are not exported with a key and have no
//! whitelist: the slot's export fields stay unused.
//!
//! # Limits (ours)
//!
//! 1,024 IPC events per device and server. Records that run out of order on different
//! streams raise `done` to the highest number (a wait for an earlier one may then pass early).
//! A slot held only by processes that died is not reclaimed until the namespace's files are
//! removed. A handle names its server's file: opening one of another server is 107000.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use acl_notify_core::Error;
use acl_notify_core::event::{IPC_EVENT_HANDLE_SIZE, IpcEventHandle, LatestRecord};
use acl_notify_core::slot::{Owner, Payload, Slot};
use acl_notify_core::waiter::Waiter;

use crate::error::SimError;
use crate::mapfile::{INIT_WAIT, Kind, Map, Open, PAGE, Registry, Shared};
use crate::stream::TaskCtx;
use crate::sys;

const MAGIC: u64 = u64::from_le_bytes(*b"ACLNEVT\x01");
/// Bumped whenever the layout changes (2: the slots are the core's shared `Slot` with the
/// event as payload).
pub const EVT_LAYOUT_VERSION: u32 = 2;
/// IPC events per device and server (ours).
pub const MAX_IPC_EVENTS: u32 = 1024;
/// The first bytes of every handle this simulator writes.
const HANDLE_MAGIC: [u8; 8] = *b"ACLNIPCE";
/// How long a wait sleeps on the futex before it looks at its stream's cancel flag again.
const SLICE: Duration = Duration::from_millis(20);

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
}

// SAFETY: `Header` is atomics only (every field above); the macro asserts that it fits in a
// page.
crate::mapfile::file_header!(unsafe Header, MAGIC, EVT_LAYOUT_VERSION);

/// What a slot of the core's [`Slot`] machine holds for one IPC event (the lifecycle — state
/// word with the generation, owner — is the core's).
#[repr(C)]
pub(crate) struct EvtPayload {
    /// Handles to the event in any process (the creator's and each opened one): a count, not
    /// the core's holder bitmap, because the event file has no process table and one process
    /// may open a handle several times. The last to go retires the slot.
    holders: AtomicU32,
    /// Records enqueued by any holder.
    issued: AtomicU32,
    /// The highest record number that has run: a futex word (waits sleep on it, records wake
    /// it).
    done: AtomicU32,
    _pad: AtomicU32,
    /// When the latest record ran (ns, 0: never).
    stamp_ns: AtomicU64,
}

impl Payload for EvtPayload {
    const NEW: Self = EvtPayload {
        holders: AtomicU32::new(0),
        issued: AtomicU32::new(0),
        done: AtomicU32::new(0),
        _pad: AtomicU32::new(0),
        stamp_ns: AtomicU64::new(0),
    };

    /// No record yet (the creator's reference is the claim's `fill`).
    fn claimed(&self, _generation: u32) {
        self.issued.store(0, SeqCst);
        self.done.store(0, SeqCst);
        self.stamp_ns.store(0, SeqCst);
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
    (PAGE + devices as usize * MAX_IPC_EVENTS as usize * SLOT_BYTES).div_ceil(PAGE) * PAGE
}

/// The path of a namespace's IPC event file for `server`.
pub fn evt_file_path(namespace: &str, server: u32) -> PathBuf {
    crate::mapfile::file_path(namespace, "evt", format_args!("{server}"))
}

/// One mapped IPC event file.
pub(crate) struct EvtFile {
    path: PathBuf,
    map: Map,
    devices: u32,
    server: u32,
    /// The namespace's tag in handles (see [`ns_tag`]).
    ns_tag: u64,
    pid: i32,
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

/// FNV-1a of the namespace: a handle of another namespace is refused, not misread.
fn ns_tag(namespace: &str) -> u64 {
    namespace.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn bad_file(path: &Path, problem: impl fmt::Display) -> SimError {
    KIND.bad_file(path, problem)
}

/// Gives back one reference to `s`; the last one retires the incarnation that is there (the
/// count belongs to it: nobody takes a reference from zero, so none can be claimed meanwhile).
fn drop_holder(s: &EvtSlot) {
    if s.sync.holders.fetch_sub(1, SeqCst) == 1 {
        s.retire(s.generation());
    }
}

impl EvtFile {
    /// Opens (creating it if missing) the IPC event file of `namespace`/`server`, shared
    /// within the process.
    pub(crate) fn open(
        namespace: &str,
        server: u32,
        devices: u32,
    ) -> Result<Arc<EvtFile>, SimError> {
        let path = evt_file_path(namespace, server);
        let me = sys::getpid();
        let f = REGISTRY.get_or_open(
            &path,
            |f| f.pid == me,
            || {
                let total = layout_total(devices);
                let open = Open {
                    path: &path,
                    kind: KIND,
                    create: true,
                    writable: true,
                    total,
                    init_wait: INIT_WAIT,
                    keep_fd: false,
                };
                let fill = |h: &Header| {
                    h.magic.store(MAGIC, SeqCst);
                    h.version.store(EVT_LAYOUT_VERSION, SeqCst);
                    h.devices.store(devices, SeqCst);
                    h.max.store(MAX_IPC_EVENTS, SeqCst);
                    h.slot_size.store(SLOT_BYTES as u32, SeqCst);
                    h.slots_off.store(PAGE as u64, SeqCst);
                    h.total.store(total as u64, SeqCst);
                };
                let check = |h: &Header, size: u64| validate(h, &path, devices, total, size);
                let map = open
                    .open(fill, check)?
                    .ok_or_else(|| bad_file(&path, "it vanished while it was opened"))?;
                Ok(Some(EvtFile {
                    path: path.clone(),
                    map,
                    devices,
                    server,
                    ns_tag: ns_tag(namespace),
                    pid: me,
                }))
            },
        )?;
        f.ok_or_else(|| bad_file(&path, "it vanished while it was opened"))
    }

    fn slot(&self, dev: u32, idx: u32) -> Option<&EvtSlot> {
        if dev >= self.devices || idx >= MAX_IPC_EVENTS {
            return None;
        }
        let off = PAGE + (dev as usize * MAX_IPC_EVENTS as usize + idx as usize) * SLOT_BYTES;
        // Bounds and alignment checked in release builds too.
        Some(self.map.at(off))
    }

    /// Claims a free slot on `dev` for a new IPC event owned by this process.
    pub(crate) fn claim(self: &Arc<Self>, dev: u32) -> Result<IpcRef, SimError> {
        self.map.intact(&self.path)?;
        let pid = sys::getpid();
        let owner = Owner {
            pid,
            start_time: sys::proc_start_time(pid).unwrap_or(0),
            server: self.server,
            device: dev,
            // No process table here: holders are counted in the payload.
            proc: 0,
        };
        for idx in 0..MAX_IPC_EVENTS {
            let Some(s) = self.slot(dev, idx) else { break };
            // A slot that is not free is refused untouched: try the next one.
            let Ok(generation) = s.claim_raw(owner, 0, |p| p.holders.store(1, SeqCst)) else {
                continue;
            };
            return Ok(IpcRef {
                file: Arc::clone(self),
                dev,
                idx,
                generation,
            });
        }
        Err(SimError::new(
            Error::NoEventResource,
            format!(
                "device {dev} has no IPC event left ({MAX_IPC_EVENTS} per device in {})",
                self.path.display()
            ),
        ))
    }

    /// Opens the IPC event a handle names (another holder of it).
    pub(crate) fn open_handle(self: &Arc<Self>, h: &IpcEventHandle) -> Result<IpcRef, SimError> {
        self.map.intact(&self.path)?;
        let p = parse(h)?;
        if p.ns_tag != self.ns_tag || p.server != self.server {
            return Err(SimError::new(
                Error::ParamInvalid,
                "the IPC event handle belongs to another simulated machine (namespace or \
                 server)",
            ));
        }
        let gone = || {
            SimError::new(
                Error::InvalidHandle,
                format!(
                    "the IPC event of the handle (device {}, owner pid {}) no longer exists: \
                     every process holding it destroyed it",
                    p.dev, p.owner
                ),
            )
        };
        let s = self.slot(p.dev, p.idx).ok_or_else(|| {
            SimError::new(
                Error::ParamInvalid,
                format!(
                    "the IPC event handle names device {} slot {}, outside this machine",
                    p.dev, p.idx
                ),
            )
        })?;
        // Take a reference only while someone still holds it.
        let mut n = s.sync.holders.load(SeqCst);
        loop {
            if n == 0 {
                return Err(gone());
            }
            match s.sync.holders.compare_exchange(n, n + 1, SeqCst, SeqCst) {
                Ok(_) => break,
                Err(now) => n = now,
            }
        }
        if !s.is_live(p.generation) {
            // Another incarnation of the slot: give the reference back.
            drop_holder(s);
            return Err(gone());
        }
        Ok(IpcRef {
            file: Arc::clone(self),
            dev: p.dev,
            idx: p.idx,
            generation: p.generation,
        })
    }
}

fn validate(
    h: &Header,
    path: &Path,
    devices: u32,
    total: usize,
    size: u64,
) -> Result<(), SimError> {
    KIND.check_identity(
        path,
        "IPC event file",
        (h.magic.load(SeqCst), MAGIC),
        (h.version.load(SeqCst), EVT_LAYOUT_VERSION),
    )?;
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
    let fields = [
        (
            "events per device",
            u64::from(h.max.load(SeqCst)),
            u64::from(MAX_IPC_EVENTS),
        ),
        (
            "slot size",
            u64::from(h.slot_size.load(SeqCst)),
            SLOT_BYTES as u64,
        ),
        ("slot offset", h.slots_off.load(SeqCst), PAGE as u64),
        ("total size", h.total.load(SeqCst), total as u64),
        ("file size", size, total as u64),
    ];
    KIND.check_fields(path, &fields)?;
    Ok(())
}

/// What a handle says.
struct Parsed {
    server: u32,
    dev: u32,
    idx: u32,
    generation: u32,
    owner: i32,
    ns_tag: u64,
}

fn word(h: &IpcEventHandle, at: usize) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&h.0[at..at + 4]);
    u32::from_le_bytes(b)
}

fn parse(h: &IpcEventHandle) -> Result<Parsed, SimError> {
    if h.0[..8] != HANDLE_MAGIC || h.0[36..].iter().any(|&b| b != 0) {
        return Err(SimError::new(
            Error::ParamInvalid,
            "the IPC event handle is malformed (not one aclrtIpcGetEventHandle wrote)",
        ));
    }
    let mut tag = [0u8; 8];
    tag.copy_from_slice(&h.0[28..36]);
    Ok(Parsed {
        server: word(h, 8),
        dev: word(h, 12),
        idx: word(h, 16),
        generation: word(h, 20),
        owner: word(h, 24) as i32,
        ns_tag: u64::from_le_bytes(tag),
    })
}

/// One holder's reference to an IPC event slot; the last one frees the slot.
pub(crate) struct IpcRef {
    file: Arc<EvtFile>,
    dev: u32,
    idx: u32,
    generation: u32,
}

impl fmt::Debug for IpcRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IpcRef")
            .field("dev", &self.dev)
            .field("idx", &self.idx)
            .field("generation", &self.generation)
            .finish()
    }
}

impl Drop for IpcRef {
    fn drop(&mut self) {
        if self.file.map.lost() {
            return;
        }
        if let Some(s) = self.file.slot(self.dev, self.idx) {
            drop_holder(s);
        }
    }
}

impl IpcRef {
    fn slot(&self) -> Result<&EvtSlot, SimError> {
        self.file.map.intact(&self.file.path)?;
        self.file.slot(self.dev, self.idx).ok_or_else(|| {
            SimError::new(Error::DrvInternalError, "IPC event slot outside the file")
        })
    }

    /// The handle another process opens.
    pub(crate) fn handle(&self) -> Result<IpcEventHandle, SimError> {
        let s = self.slot()?;
        let mut h = [0u8; IPC_EVENT_HANDLE_SIZE];
        h[..8].copy_from_slice(&HANDLE_MAGIC);
        h[8..12].copy_from_slice(&self.file.server.to_le_bytes());
        h[12..16].copy_from_slice(&self.dev.to_le_bytes());
        h[16..20].copy_from_slice(&self.idx.to_le_bytes());
        h[20..24].copy_from_slice(&self.generation.to_le_bytes());
        h[24..28].copy_from_slice(&s.owner().pid.to_le_bytes());
        h[28..36].copy_from_slice(&self.file.ns_tag.to_le_bytes());
        Ok(IpcEventHandle(h))
    }

    /// A record is enqueued: its number.
    pub(crate) fn issue(&self) -> Result<u32, SimError> {
        Ok(self
            .slot()?
            .sync
            .issued
            .fetch_add(1, SeqCst)
            .wrapping_add(1))
    }

    /// A record enqueued as `n` was not queued after all (only the latest one can be taken
    /// back).
    pub(crate) fn unissue(&self, n: u32) {
        if let Ok(s) = self.slot() {
            let _ = s
                .sync
                .issued
                .compare_exchange(n, n.wrapping_sub(1), SeqCst, SeqCst);
        }
    }

    /// Record `n` ran: stamps it and wakes the waits.
    pub(crate) fn complete(&self, n: u32) -> Result<(), SimError> {
        let s = self.slot()?;
        s.sync.stamp_ns.store(sys::now_ns().max(1), SeqCst);
        s.sync.done.fetch_max(n, SeqCst);
        sys::futex_wake(&s.sync.done, u32::MAX);
        Ok(())
    }

    /// The number of the latest record enqueued (0: none).
    pub(crate) fn issued(&self) -> Result<u32, SimError> {
        Ok(self.slot()?.sync.issued.load(SeqCst))
    }

    /// The state of the latest record.
    pub(crate) fn latest(&self) -> Result<LatestRecord, SimError> {
        let s = self.slot()?;
        let issued = s.sync.issued.load(SeqCst);
        Ok(if issued == 0 {
            LatestRecord::None
        } else if s.sync.done.load(SeqCst) >= issued {
            LatestRecord::Done
        } else {
            LatestRecord::Pending
        })
    }

    /// Waits until record `n` has run, for at most `timeout`; `stop` is asked between
    /// slices. `Ok(false)` when the timeout passed or `stop` said so.
    pub(crate) fn wait_done(
        &self,
        n: u32,
        timeout: Option<Duration>,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, SimError> {
        let s = self.slot()?;
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let cur = s.sync.done.load(SeqCst);
            if cur >= n {
                return Ok(true);
            }
            if stop() || self.file.map.lost() {
                return Ok(false);
            }
            let slice = match deadline {
                None => SLICE,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(false);
                    }
                    left.min(SLICE)
                }
            };
            sys::futex_wait(&s.sync.done, cur, Some(slice));
        }
    }

    /// A stream wait: until record `n` has run, the timeout passes (107020) or the stream is
    /// cancelled.
    /// The event as the wait-for graph names it.
    pub(crate) fn target(&self) -> crate::waitgraph::Target {
        crate::waitgraph::Target {
            kind: crate::waitgraph::TargetKind::IpcEvent,
            server: 0,
            device: self.dev,
            id: self.idx,
        }
    }

    pub(crate) fn stream_wait(
        &self,
        n: u32,
        timeout: Option<Duration>,
        ctx: &TaskCtx,
    ) -> Result<(), SimError> {
        // Published in the wait-for graph for the length of the wait (see `waitgraph`).
        let published =
            crate::waitgraph::Blocked::publish(self.target(), ctx.task_number(), timeout);
        if self.wait_done(n, timeout, &|| ctx.is_cancelled())? {
            return Ok(());
        }
        self.file.map.intact(&self.file.path)?;
        let cycle = published
            .deadlock()
            .map_or_else(String::new, |c| format!("; {c}"));
        Err(SimError::new(
            Error::TaskTimeout,
            if ctx.is_cancelled() {
                "wait for an IPC event cancelled: its stream was destroyed with tasks \
                 discarded, or aborted"
                    .to_owned()
            } else {
                format!(
                    "wait for IPC event (device {}, slot {}) record {n} timed out after {} \
                     s{cycle}",
                    self.dev,
                    self.idx,
                    timeout.unwrap_or_default().as_secs()
                )
            },
        ))
    }
}

/// The process's open IPC event file, if any.
pub(crate) struct EvtState {
    file: Mutex<Option<Arc<EvtFile>>>,
}

impl EvtState {
    pub(crate) fn new() -> Self {
        EvtState {
            file: Mutex::new(None),
        }
    }

    /// The file, opened on first use.
    pub(crate) fn file(
        &self,
        namespace: &str,
        server: u32,
        devices: u32,
    ) -> Result<Arc<EvtFile>, SimError> {
        let mut f = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = f.as_ref() {
            return Ok(Arc::clone(f));
        }
        let opened = EvtFile::open(namespace, server, devices)?;
        *f = Some(Arc::clone(&opened));
        Ok(opened)
    }
}

impl fmt::Debug for EvtState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvtState").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::BackendError;

    #[test]
    fn handles_round_trip_and_garbage_is_refused() {
        let ns = format!("evt-unit-{}", std::process::id());
        let f = EvtFile::open(&ns, 0, 2).unwrap();
        let a = f.claim(1).unwrap();
        let h = a.handle().unwrap();
        let b = f.open_handle(&h).unwrap();
        assert_eq!(a.latest().unwrap(), LatestRecord::None);
        let n = b.issue().unwrap();
        assert_eq!(a.latest().unwrap(), LatestRecord::Pending);
        assert!(
            !a.wait_done(n, Some(Duration::from_millis(30)), &|| false)
                .unwrap()
        );
        a.complete(n).unwrap();
        assert_eq!(b.latest().unwrap(), LatestRecord::Done);
        let mut bad = h;
        bad.0[0] ^= 1;
        assert_eq!(f.open_handle(&bad).unwrap_err().kind(), Error::ParamInvalid);
        drop(a);
        drop(b);
        // Every holder gone: the handle names nothing.
        assert_eq!(f.open_handle(&h).unwrap_err().kind(), Error::InvalidHandle);
        // The slot is reused under a new generation; the old handle stays dead.
        let c = f.claim(1).unwrap();
        assert_eq!(f.open_handle(&h).unwrap_err().kind(), Error::InvalidHandle);
        drop(c);
        drop(f);
        crate::mapfile::remove_files(&ns, Some("evt")).unwrap();
    }

    /// The holder count belongs to the incarnation that is there: an opener with a stale
    /// handle that counted itself in on a reused slot, and gives its reference back after the
    /// creator left, must retire that incarnation (not look for its own, long gone), or the
    /// slot would stay live with no holder for ever.
    #[test]
    fn the_last_reference_retires_the_incarnation_there() {
        let ns = format!("evt-unit-last-{}", std::process::id());
        let f = EvtFile::open(&ns, 0, 1).unwrap();
        let stale = f.claim(0).unwrap();
        let old = stale.handle().unwrap();
        let idx = stale.idx;
        drop(stale);
        let c = f.claim(0).unwrap();
        assert_eq!(c.idx, idx, "the freed slot is reused first");
        let s = f.slot(0, idx).unwrap();
        // An opener of `old` between its count and its generation check.
        s.sync.holders.fetch_add(1, SeqCst);
        let generation = c.generation;
        drop(c);
        assert!(s.is_live(generation), "the opener still counts");
        drop_holder(s);
        assert_eq!(s.state(), Some(acl_notify_core::slot::SlotState::Free));
        assert_eq!(s.generation(), generation.wrapping_add(1));
        assert_eq!(
            f.open_handle(&old).unwrap_err().kind(),
            Error::InvalidHandle
        );
        // The slot is claimable again.
        assert_eq!(f.claim(0).unwrap().idx, idx);
        drop(f);
        crate::mapfile::remove_files(&ns, Some("evt")).unwrap();
    }

    /// The event file of layout 1 (64-byte slots of its own) that an older build left, and
    /// no process maps, is replaced by the next open rather than refused.
    #[test]
    fn a_layout_1_file_nobody_maps_is_replaced() {
        use std::os::unix::fs::FileExt as _;
        let ns = format!("evt-unit-v1-{}", std::process::id());
        let path = evt_file_path(&ns, 0);
        drop(EvtFile::open(&ns, 0, 1).unwrap());
        let old = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        old.write_all_at(&1u32.to_le_bytes(), 8).unwrap();
        old.set_len((PAGE + MAX_IPC_EVENTS as usize * 64) as u64)
            .unwrap();
        let f = EvtFile::open(&ns, 0, 1).unwrap();
        let mut v = [0u8; 4];
        std::fs::File::open(&path)
            .unwrap()
            .read_exact_at(&mut v, 8)
            .unwrap();
        assert_eq!(u32::from_le_bytes(v), EVT_LAYOUT_VERSION);
        assert_eq!(f.claim(0).unwrap().latest().unwrap(), LatestRecord::None);
        drop(f);
        crate::mapfile::remove_files(&ns, Some("evt")).unwrap();
    }
}

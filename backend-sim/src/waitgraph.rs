//! The namespace's wait-for graph: each stream publishes, in a shared file, what the wait at
//! its head is blocked on and which notify records it has queued, so that any process (a wait
//! that times out, the inspector) can find streams that wait on each other in a cycle and say
//! where each record that would release one of them sits.
//!
//! # File
//!
//! `/dev/shm/acl-notify-sim.<namespace>.wfg0`: one per namespace (every server's streams, so a
//! cycle across SuperPod servers is seen too; the 0 is no server number: a namespace whose
//! processes are all on server 1, such as a host of a cluster, has its `wfg0` as well, holding
//! that machine's streams, since hosts share no file), created and attached through
//! `crate::mapfile`: a header page, [`PROCS`] process records of 64 bytes (pid, start time,
//! label, and whether it exited normally), then [`ENTRIES`] stream entries of 256 bytes
//! (sparse: a page is touched only once an entry on it is used).
//!
//! # Processes
//!
//! Each process that opens the file writes a record with its label ([`process_label`]); when it
//! exits through `exit()` (or returns from `main`), or drops its last `Sim`, it marks the record
//! exited, so that the inspector can show a process that ended normally as exited rather than
//! dead (one that crashed or was killed leaves its record running).
//!
//! # What a stream publishes, and what it costs
//!
//! - **Queued records** (the hot path): after a record is queued, the enqueuing thread stores
//!   one word into the stream's entry — the notify and the queue ticket the stream had issued
//!   by then — in a ring of [`RECS`] words indexed by that ticket. No read-modify-write, no
//!   fence, and the line is written by the stream's enqueuers only (the worker never touches
//!   it), so it stays in their cache. A record counts as queued while its ticket is later than
//!   the ticket of the wait blocking the stream's head; older words are simply stale. At most
//!   the [`RECS`] latest records per stream are known (an older one overwritten by a newer is
//!   not shown).
//! - **The blocked head** (cold: only a wait about to sleep): the notify, the wait's own
//!   ticket and when it started sleeping; cleared when it wakes.
//!
//! Readers take no lock: every word is read with one atomic load, and a torn view (a record
//! overwritten between two loads) can only make one snapshot miss or misplace one record,
//! which is why a cycle is only ever reported for waits that are asleep while it is seen.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::path::PathBuf;
use std::sync::atomic::Ordering::{Relaxed, Release, SeqCst};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};
use std::sync::{Arc, PoisonError, Weak};

use crate::error::SimError;
use crate::fork::PerProcess;
use crate::mapfile::{INIT_WAIT, Kind, Map, Open, PAGE, Shared};
use crate::sys;

/// Stream entries in the file (streams created beyond this many at once are not published).
pub const ENTRIES: usize = 4096;
/// Process records in the file (the oldest records of processes that are gone are reused).
pub const PROCS: usize = 256;
/// Queued records remembered per stream.
pub const RECS: usize = 16;
/// Bytes of a label kept per stream.
pub const LABEL_BYTES: usize = 32;

/// Sets this process's label (shown by the inspector and in deadlock reports).
pub const ENV_LABEL: &str = "ACL_NOTIFY_SIM_LABEL";
/// `fail`: a wait found blocked in a deadlock cycle fails at once instead of at its timeout.
pub const ENV_DEADLOCK: &str = "ACL_NOTIFY_SIM_DEADLOCK";

const MAGIC: u64 = u64::from_le_bytes(*b"ACLNWFG\x01");
/// 2: the process records.
const VERSION: u32 = 2;
const KIND: Kind = Kind("wait-for graph file");

#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    ready: AtomicU32,
    entries: AtomicU32,
    entry_size: AtomicU32,
    creator_pid: AtomicI32,
    /// One past the highest entry ever claimed (bounds every scan).
    high_water: AtomicU32,
    pid_ns: AtomicU64,
}

// SAFETY: `Header` is atomics only (every field above); the macro asserts that it fits in a
// page.
crate::mapfile::file_header!(unsafe Header, MAGIC, VERSION);

/// One stream's entry. The first line is written by its owner's control calls and by the
/// worker when the head blocks; the record words (the last two lines) by its enqueuers.
#[repr(C, align(64))]
struct Entry {
    /// `1 << 32 | pid` while a stream owns the entry; 0 when free.
    owner: AtomicU64,
    /// The owner's start time ([`sys::proc_start_time`]).
    start: AtomicU64,
    /// The stream handle as its caller sees it (the C handle in the C library).
    handle: AtomicU64,
    /// `server << 32 | device`.
    place: AtomicU64,
    label: [AtomicU64; LABEL_BYTES / 8],
    /// The blocked head's notify ([`Target::wait_word`]); 0: the head is not blocked.
    head: AtomicU64,
    /// The blocked head's ticket (its number in the stream's enqueue order).
    head_ticket: AtomicU64,
    /// When the head started sleeping (`CLOCK_MONOTONIC`, ns).
    head_since: AtomicU64,
    /// The blocked wait's timeout in ms (`u64::MAX`: none).
    head_timeout_ms: AtomicU64,
    _r: [AtomicU64; 4],
    recs: [AtomicU64; RECS],
}

/// One process that opened the file.
#[repr(C, align(64))]
struct ProcRecord {
    /// `state << 32 | pid` ([`P_RUNNING`], [`P_EXITED`]); 0: free.
    owner: AtomicU64,
    start: AtomicU64,
    label: [AtomicU64; LABEL_BYTES / 8],
    _r: [AtomicU64; 2],
}

const P_RUNNING: u64 = 1;
const P_EXITED: u64 = 2;

const ENTRY_BYTES: usize = std::mem::size_of::<Entry>();
const _: () = assert!(ENTRY_BYTES == 256);
const _: () = assert!(std::mem::size_of::<ProcRecord>() == 64);
const PROCS_OFF: usize = PAGE;
const ENTRIES_OFF: usize = PAGE + PROCS * 64;
const TOTAL: usize = ENTRIES_OFF + ENTRIES * ENTRY_BYTES;

// SAFETY: atomics only.
unsafe impl Shared for ProcRecord {}

// SAFETY: atomics only.
unsafe impl Shared for Entry {}
// SAFETY: atomics only.
unsafe impl Shared for Header {}

const OWNED: u64 = 1 << 32;

/// What a [`Target`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TargetKind {
    /// A notify (`id` is its notify id).
    Notify,
    /// An IPC event (`id` is its slot in the namespace's IPC event file).
    IpcEvent,
    /// An event of one process (`id` is its event id): only that process's streams match it.
    Event,
}

/// What a wait blocks on or a record sets: notify (or event) `id` of `device` on `server`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Notify or event.
    pub kind: TargetKind,
    /// The notify's server.
    pub server: u32,
    /// The notify's device.
    pub device: u32,
    /// The notify's id.
    pub id: u32,
}

// Record words: valid 63 | ticket 43..63 (20 bits) | kind 41..43 | server 24..40 |
// device 16..24 | id 0..16.
const REC_VALID: u64 = 1 << 63;
const TICKET_BITS: u32 = 20;
const TICKET_MASK: u64 = (1 << TICKET_BITS) - 1;

impl TargetKind {
    fn bits(self) -> u64 {
        match self {
            TargetKind::Notify => 1,
            TargetKind::IpcEvent => 2,
            TargetKind::Event => 3,
        }
    }

    fn from_bits(b: u64) -> Option<TargetKind> {
        match b {
            1 => Some(TargetKind::Notify),
            2 => Some(TargetKind::IpcEvent),
            3 => Some(TargetKind::Event),
            _ => None,
        }
    }
}

impl Target {
    /// Notify `id` of `device` on `server`.
    pub fn notify(server: u32, device: u32, id: u32) -> Target {
        Target {
            kind: TargetKind::Notify,
            server,
            device,
            id,
        }
    }

    /// The word a blocked head publishes (never 0).
    fn wait_word(self) -> u64 {
        self.kind.bits() << 60
            | u64::from(self.server & 0xffff) << 40
            | u64::from(self.device & 0xff) << 32
            | u64::from(self.id)
    }

    fn from_wait_word(w: u64) -> Option<Target> {
        Some(Target {
            kind: TargetKind::from_bits(w >> 60)?,
            server: ((w >> 40) & 0xffff) as u32,
            device: ((w >> 32) & 0xff) as u32,
            id: w as u32,
        })
    }

    /// A record word (ids above 65535 do not occur: no SoC has that many notifies).
    #[inline]
    fn rec_word(self, ticket: u64) -> u64 {
        with_ticket(self.rec_base(), ticket)
    }

    /// A record word without its ticket, for a cache to keep (`pair_cache`): the record of
    /// ticket `t` is noted as this with `t` in bits 43 and up ([`RecNotes::note`]).
    #[inline]
    pub(crate) fn rec_base(self) -> u64 {
        REC_VALID
            | self.kind.bits() << 41
            | u64::from(self.server & 0xffff) << 24
            | u64::from(self.device & 0xff) << 16
            | u64::from(self.id & 0xffff)
    }

    fn from_rec_word(w: u64) -> Option<(Target, u64)> {
        if w & REC_VALID == 0 {
            return None;
        }
        Some((
            Target {
                kind: TargetKind::from_bits((w >> 41) & 3)?,
                server: ((w >> 24) & 0xffff) as u32,
                device: ((w >> 16) & 0xff) as u32,
                id: (w & 0xffff) as u32,
            },
            (w >> 43) & TICKET_MASK,
        ))
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            TargetKind::Notify => "notify",
            TargetKind::IpcEvent => "IPC event slot",
            TargetKind::Event => "event",
        };
        write!(f, "{what} {} of device {}", self.id, self.device)?;
        if self.server != 0 {
            write!(f, " (server {})", self.server)?;
        }
        Ok(())
    }
}

/// The path of a namespace's wait-for graph file.
pub fn graph_path(namespace: &str) -> PathBuf {
    crate::mapfile::file_path(namespace, "wfg", format_args!("0"))
}

/// This process's label: `ACL_NOTIFY_SIM_LABEL`, else the launcher's rank (`RANK`, `RANK_ID`,
/// `LOCAL_RANK`, the first one set), else none.
pub fn process_label() -> Option<String> {
    let var = |n: &str| std::env::var(n).ok().filter(|v| !v.trim().is_empty());
    if let Some(l) = var(ENV_LABEL) {
        return Some(l.trim().to_owned());
    }
    ["RANK", "RANK_ID", "LOCAL_RANK"]
        .iter()
        .find_map(|n| var(n).map(|v| format!("{} {}", n.to_ascii_lowercase(), v.trim())))
}

/// The wait-for graphs this process has open (one per namespace it joined), for
/// [`label_of`]: messages built where no `Sim` is at hand (a wait's timeout) name processes by
/// their labels through it. A [`PerProcess`]: a child forked while another thread of the
/// parent held it gets a fresh one (a plain static `Mutex` left the child's first `aclInit`
/// hanging, about once in 400 forks of `fork_busy cycle` under load).
pub(crate) static OPEN: PerProcess<Vec<Weak<WaitGraph>>> = PerProcess::new(Vec::new);

/// The label another process of a namespace this process joined gave itself (see
/// [`process_label`]); `None` when it has none or left no record.
pub fn label_of(pid: i32) -> Option<String> {
    records_of(pid)
        .into_iter()
        .find_map(|p| (!p.label.is_empty()).then_some(p.label))
}

/// Whether a process of a namespace this process joined that is no longer alive ended
/// normally: its records in the open graphs say exited, none says running (a record left
/// running is of a process killed or crashed, also when an earlier process of the same pid
/// exited). For messages that tell a process that finished from one that died.
pub fn exited(pid: i32) -> bool {
    let records = records_of(pid);
    !records.is_empty() && records.iter().all(|p| p.exited)
}

/// The records `pid` left in the wait-for graphs this process has open.
fn records_of(pid: i32) -> Vec<ProcView> {
    let graphs: Vec<Arc<WaitGraph>> = OPEN
        .get()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect();
    graphs
        .iter()
        .flat_map(|g| g.processes().into_iter().filter(|p| p.pid == pid))
        .collect()
}

/// Whether a detected cycle fails the waits at once (`ACL_NOTIFY_SIM_DEADLOCK=fail`).
pub(crate) fn fail_at_once() -> bool {
    static MODE: AtomicU32 = AtomicU32::new(0);
    match MODE.load(Relaxed) {
        0 => {
            let fail = std::env::var(ENV_DEADLOCK).is_ok_and(|v| v.trim() == "fail");
            MODE.store(1 + u32::from(fail), Relaxed);
            fail
        }
        m => m == 2,
    }
}

/// One mapped wait-for graph file.
pub struct WaitGraph {
    path: PathBuf,
    map: Map,
    writable: bool,
    pid: i32,
    start: u64,
    label: [u64; LABEL_BYTES / 8],
    /// This process's record + 1 (0: none).
    record: std::sync::atomic::AtomicUsize,
}

impl Drop for WaitGraph {
    /// The process's last `Sim` of the namespace is gone: it has left (normally).
    fn drop(&mut self) {
        if let Some(i) = self.record.load(Relaxed).checked_sub(1) {
            let r = self.proc_record(i);
            exit_marks::remove(&r.owner);
            let me = P_RUNNING << 32 | u64::from(self.pid as u32);
            let _ = r.owner.compare_exchange(
                me,
                P_EXITED << 32 | u64::from(self.pid as u32),
                SeqCst,
                Relaxed,
            );
        }
    }
}

/// A process record as read ([`WaitGraph::processes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcView {
    /// Its pid.
    pub pid: i32,
    /// Its start time (as `/proc/<pid>/stat` gives it).
    pub start: u64,
    /// Its label (empty: none).
    pub label: String,
    /// It exited normally (or dropped its last `Sim` of the namespace).
    pub exited: bool,
}

/// The records to mark exited when the process calls `exit()`: the owner words of this
/// process's records in every mapped graph file, as raw pointers so that the `atexit` handler
/// takes no lock (a thread that held one at the exit would make it hang). A record's mapping
/// outlives its pointer here: [`WaitGraph`]'s drop removes the pointer before the unmap.
mod exit_marks {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64};

    const SLOTS: usize = 16;
    static MARKS: [AtomicPtr<AtomicU64>; SLOTS] =
        [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];

    extern "C" fn at_exit() {
        for m in &MARKS {
            let p = m.swap(std::ptr::null_mut(), SeqCst);
            if !p.is_null() {
                // SAFETY: a pointer in `MARKS` points into a live mapping (see the module
                // docs); the swap took it, so nobody else uses it.
                let w = unsafe { &*p };
                let cur = w.load(SeqCst);
                if cur >> 32 == super::P_RUNNING && cur as u32 as i32 == crate::sys::getpid() {
                    let _ = w.compare_exchange(
                        cur,
                        super::P_EXITED << 32 | (cur & 0xffff_ffff),
                        SeqCst,
                        SeqCst,
                    );
                }
            }
        }
    }

    pub(super) fn add(w: &AtomicU64) {
        // Registered once per process image (a forked child inherits it, and its records are
        // told apart by pid in `at_exit`); a flag, not a `Once`, which a child forked while
        // another thread ran it would wait on for ever (see `crate::fork`).
        static HOOKED: AtomicBool = AtomicBool::new(false);
        if !HOOKED.swap(true, SeqCst) {
            // SAFETY: `at_exit` is an `extern "C" fn()` that does not unwind.
            unsafe { libc::atexit(at_exit) };
        }
        let p = std::ptr::from_ref(w).cast_mut();
        for m in &MARKS {
            if m.compare_exchange(std::ptr::null_mut(), p, SeqCst, SeqCst)
                .is_ok()
            {
                return;
            }
        }
    }

    pub(super) fn remove(w: &AtomicU64) {
        let p = std::ptr::from_ref(w).cast_mut();
        for m in &MARKS {
            let _ = m.compare_exchange(p, std::ptr::null_mut(), SeqCst, SeqCst);
        }
    }
}

impl fmt::Debug for WaitGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGraph")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl WaitGraph {
    /// Shares `self` and makes its process records available to [`label_of`].
    pub fn shared(self) -> Arc<WaitGraph> {
        let g = Arc::new(self);
        // Fails only without the fork handler, which opening the `Sim` checked.
        if let Ok(mut open) = OPEN.lock() {
            open.retain(|w| w.strong_count() > 0);
            open.push(Arc::downgrade(&g));
        }
        g
    }

    /// Creates or attaches to the namespace's file (`writable`), or attaches read-only
    /// (`Ok(None)` if there is none).
    pub fn open(namespace: &str, writable: bool) -> Result<Option<WaitGraph>, SimError> {
        let path = graph_path(namespace);
        let open = Open {
            path: &path,
            kind: KIND,
            create: writable,
            writable,
            total: TOTAL,
            init_wait: INIT_WAIT,
            keep_fd: false,
        };
        let fill = |h: &Header| {
            h.entries.store(ENTRIES as u32, SeqCst);
            h.entry_size.store(ENTRY_BYTES as u32, SeqCst);
        };
        let check = |h: &Header, size: u64| {
            let ok = h.entries.load(SeqCst) == ENTRIES as u32
                && h.entry_size.load(SeqCst) == ENTRY_BYTES as u32
                && size >= TOTAL as u64;
            if ok {
                Ok(())
            } else {
                Err(KIND.bad_file(&path, "not a wait-for graph file of this version"))
            }
        };
        let Some(map) = open.open(fill, check)? else {
            return Ok(None);
        };
        let pid = sys::getpid();
        let mut label = [0u64; LABEL_BYTES / 8];
        if let Some(l) = process_label() {
            let mut bytes = [0u8; LABEL_BYTES];
            // Cut at a character boundary so that readers always decode whole characters.
            let mut n = l.len().min(LABEL_BYTES);
            while !l.is_char_boundary(n) {
                n -= 1;
            }
            bytes[..n].copy_from_slice(&l.as_bytes()[..n]);
            for (w, c) in label.iter_mut().zip(bytes.chunks_exact(8)) {
                *w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            }
        }
        let g = WaitGraph {
            path,
            map,
            writable,
            pid,
            start: sys::proc_start_time(pid).unwrap_or(0),
            label,
            record: std::sync::atomic::AtomicUsize::new(0),
        };
        if writable {
            g.register();
        }
        Ok(Some(g))
    }

    fn header(&self) -> &Header {
        self.map.header()
    }

    fn entry(&self, i: usize) -> &Entry {
        self.map.at(ENTRIES_OFF + i * ENTRY_BYTES)
    }

    fn proc_record(&self, i: usize) -> &ProcRecord {
        self.map.at(PROCS_OFF + i * 64)
    }

    /// Writes this process's record (running, with its label); remembers it for the exit
    /// marks. Nothing when every record belongs to a running process.
    fn register(&self) {
        let mine = |w: u64| w as u32 as i32 == self.pid && w >> 32 != 0;
        let gone = |r: &ProcRecord, w: u64| {
            !sys::pid_alive(w as u32 as i32, r.start.load(Relaxed)) && w as u32 as i32 != self.pid
        };
        // Our own record (a second open in this process), else a free one, else one of a
        // process that is gone (exited ones last, so that they are shown as long as possible).
        let pick = (0..PROCS)
            .find(|&i| {
                let w = self.proc_record(i).owner.load(SeqCst);
                mine(w) && self.proc_record(i).start.load(Relaxed) == self.start
            })
            .map(|i| (i, self.proc_record(i).owner.load(SeqCst)))
            .into_iter()
            .chain((0..PROCS).filter_map(|i| {
                let r = self.proc_record(i);
                let w = r.owner.load(SeqCst);
                (w == 0).then_some((i, w))
            }))
            .chain((0..PROCS).filter_map(|i| {
                let r = self.proc_record(i);
                let w = r.owner.load(SeqCst);
                (w >> 32 == P_RUNNING && gone(r, w)).then_some((i, w))
            }))
            .chain((0..PROCS).filter_map(|i| {
                let r = self.proc_record(i);
                let w = r.owner.load(SeqCst);
                (w >> 32 == P_EXITED && gone(r, w)).then_some((i, w))
            }));
        let me = P_RUNNING << 32 | u64::from(self.pid as u32);
        for (i, cur) in pick {
            let r = self.proc_record(i);
            if r.owner.compare_exchange(cur, me, SeqCst, Relaxed).is_ok() {
                r.start.store(self.start, SeqCst);
                for (w, v) in r.label.iter().zip(self.label) {
                    w.store(v, Relaxed);
                }
                self.record.store(i + 1, Relaxed);
                exit_marks::add(&r.owner);
                return;
            }
        }
    }

    /// The processes that left a record: pid, start time, label, whether it exited normally.
    pub fn processes(&self) -> Vec<ProcView> {
        (0..PROCS)
            .filter_map(|i| {
                let r = self.proc_record(i);
                let w = r.owner.load(SeqCst);
                let state = w >> 32;
                (state == P_RUNNING || state == P_EXITED).then(|| ProcView {
                    pid: w as u32 as i32,
                    start: r.start.load(SeqCst),
                    label: read_label(&r.label),
                    exited: state == P_EXITED,
                })
            })
            .collect()
    }

    /// Claims an entry for a stream of this process: a free one, or one whose owner died.
    /// `None` when every entry is in use (the stream is then not published).
    pub(crate) fn claim(
        self: &Arc<Self>,
        handle: u64,
        server: u32,
        device: u32,
    ) -> Option<Arc<StreamSlot>> {
        if !self.writable {
            return None;
        }
        let me = OWNED | u64::from(self.pid as u32);
        for i in 0..ENTRIES {
            let e = self.entry(i);
            let cur = e.owner.load(Relaxed);
            let free = cur == 0
                || (i < self.high_water() && {
                    let pid = cur as u32 as i32;
                    pid != self.pid && !sys::pid_alive(pid, e.start.load(Relaxed))
                });
            if !free || e.owner.compare_exchange(cur, me, SeqCst, Relaxed).is_err() {
                continue;
            }
            e.start.store(self.start, Relaxed);
            e.handle.store(handle, Relaxed);
            e.place
                .store(u64::from(server) << 32 | u64::from(device), Relaxed);
            for (w, v) in e.label.iter().zip(self.label) {
                w.store(v, Relaxed);
            }
            e.head.store(0, Relaxed);
            for r in &e.recs {
                r.store(0, Relaxed);
            }
            self.header().high_water.fetch_max(i as u32 + 1, SeqCst);
            return Some(Arc::new(StreamSlot {
                graph: Arc::clone(self),
                index: i,
            }));
        }
        None
    }

    fn high_water(&self) -> usize {
        (self.header().high_water.load(SeqCst) as usize).min(ENTRIES)
    }

    /// Every published stream whose owner is alive.
    pub fn snapshot(&self) -> Vec<StreamView> {
        let now = sys::now_ns();
        let mut out = Vec::new();
        for i in 0..self.high_water() {
            let e = self.entry(i);
            let owner = e.owner.load(SeqCst);
            if owner & OWNED == 0 {
                continue;
            }
            let pid = owner as u32 as i32;
            if !sys::pid_alive(pid, e.start.load(Relaxed)) {
                continue;
            }
            let head = Target::from_wait_word(e.head.load(SeqCst)).map(|t| Head {
                target: t,
                ticket: e.head_ticket.load(SeqCst),
                blocked_ns: now.saturating_sub(e.head_since.load(SeqCst)),
                timeout_ms: e.head_timeout_ms.load(SeqCst),
            });
            // With a blocked head, a record counts while its ticket is past the head's; without
            // one the stream is running, and what it has queued will run.
            let queued = head
                .map(|h| {
                    e.recs
                        .iter()
                        .filter_map(|r| Target::from_rec_word(r.load(SeqCst)))
                        .filter(|&(_, t)| behind(t, h.ticket))
                        .map(|(target, _)| target)
                        .collect()
                })
                .unwrap_or_default();
            let place = e.place.load(Relaxed);
            out.push(StreamView {
                entry: i,
                pid,
                label: read_label(&e.label),
                handle: e.handle.load(Relaxed),
                server: (place >> 32) as u32,
                device: place as u32,
                head,
                queued,
            });
        }
        out
    }
}

/// A label as stored (NUL-padded UTF-8).
fn read_label(words: &[AtomicU64; LABEL_BYTES / 8]) -> String {
    let mut label = [0u8; LABEL_BYTES];
    for (c, w) in label.chunks_exact_mut(8).zip(words) {
        c.copy_from_slice(&w.load(Relaxed).to_le_bytes());
    }
    let end = label.iter().position(|&b| b == 0).unwrap_or(LABEL_BYTES);
    String::from_utf8_lossy(&label[..end]).into_owned()
}

/// Record word `base` ([`Target::rec_base`]) with its ticket. The ticket's bits past
/// [`TICKET_BITS`] need no mask: bit 20 lands on [`REC_VALID`], which `base` has set, and the
/// rest shift out.
#[inline(always)]
fn with_ticket(base: u64, ticket: u64) -> u64 {
    const { assert!(43 + TICKET_BITS == 63 && REC_VALID == 1 << 63) };
    debug_assert!(base & REC_VALID != 0);
    base | ticket << 43
}

/// Whether a record noted with `noted` (the tickets issued right after it was queued, so at
/// least its own ticket + 1) was queued behind the head wait numbered `head`.
fn behind(noted: u64, head: u64) -> bool {
    let d = noted.wrapping_sub(head.wrapping_add(2)) & TICKET_MASK;
    d < 1 << (TICKET_BITS - 1)
}

/// A stream's entry, held by the stream's table entry and by its worker thread.
pub(crate) struct StreamSlot {
    graph: Arc<WaitGraph>,
    index: usize,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let e = self.entry();
        e.head.store(0, SeqCst);
        e.owner.store(0, SeqCst);
    }
}

/// The address of a stream's entry in the graph, to note records in
/// ([`StreamSlot::note_record`] without a reference to the [`StreamSlot`]).
#[derive(Clone, Copy)]
pub(crate) struct RecNotes(std::ptr::NonNull<Entry>);

impl RecNotes {
    /// [`StreamSlot::note_record`] of the target whose record word without its ticket is
    /// `base` ([`Target::rec_base`]).
    ///
    /// # Safety
    ///
    /// The graph the entry is in must still be mapped: a `Sim` holding it (the one whose
    /// stream this is) must be alive.
    ///
    /// The stream may have been destroyed meanwhile on another thread (a record queued while
    /// its stream is destroyed): the note then goes to an entry its stream released, harmless
    /// unless the entry was claimed again, by a stream made (in any process) after the
    /// destroy's worker exited. That stream's next records overwrite the note; until then an
    /// inspector lists a record it did not queue. It takes a record queued while another
    /// thread destroys the record's stream (a program error), and that destroy's whole run,
    /// worker exit included, between two instructions of the recording thread.
    #[inline(always)]
    pub(crate) unsafe fn note(self, base: u64, issued: u64) {
        // SAFETY: mapped (the caller's promise); every field is an atomic.
        let e = unsafe { self.0.as_ref() };
        e.recs[(issued as usize) % RECS].store(with_ticket(base, issued), Relaxed);
    }
}

thread_local! {
    /// The entry of the stream whose worker this thread is (looked up in [`WORKERS`] by the
    /// thread's first wait that sleeps).
    static WORKER: RefCell<Option<Arc<StreamSlot>>> = const { RefCell::new(None) };
}

/// Stream worker threads (by thread id) and their entries, filled when a stream is created.
/// Only a wait about to sleep reads it, once per worker thread.
static WORKERS: PerProcess<Vec<(i32, Weak<StreamSlot>)>> = PerProcess::new(Vec::new);

/// The calling thread's id.
fn gettid() -> i32 {
    // SAFETY: gettid(2) has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

impl StreamSlot {
    fn entry(&self) -> &Entry {
        self.graph.entry(self.index)
    }

    /// Where this stream's records are noted, for a thread's pair cache (`pair_cache`),
    /// which holds no reference to this entry.
    pub(crate) fn rec_notes(&self) -> RecNotes {
        RecNotes(std::ptr::NonNull::from(self.entry()))
    }

    /// Makes the stream's worker thread `tid` publish for this entry.
    pub(crate) fn bind_worker(self: &Arc<Self>, tid: i32) {
        // Fails only without the fork handler, which opening the `Sim` checked.
        if let Ok(mut w) = WORKERS.lock() {
            w.retain(|(t, s)| *t != tid && s.strong_count() > 0);
            w.push((tid, Arc::downgrade(self)));
        }
    }

    /// The handle shown for the stream (the C library's, once it has one).
    pub(crate) fn set_handle(&self, handle: u64) {
        self.entry().handle.store(handle, Relaxed);
    }

    /// Notes a record of `t` queued; `issued`: the stream's tickets issued after the push.
    #[inline]
    pub(crate) fn note_record(&self, t: Target, issued: u64) {
        let e = self.entry();
        e.recs[(issued as usize) % RECS].store(t.rec_word(issued), Relaxed);
    }

    /// How long the wait the stream's head sleeps in, if it published one, has left before
    /// its timeout: `Some(None)` for a wait with no timeout, `None` when no wait is published.
    pub(crate) fn head_wait_left(&self) -> Option<Option<std::time::Duration>> {
        let e = self.entry();
        Target::from_wait_word(e.head.load(SeqCst))?;
        Some(match e.head_timeout_ms.load(SeqCst) {
            u64::MAX => None,
            ms => {
                let slept = sys::now_ns().saturating_sub(e.head_since.load(SeqCst));
                Some(std::time::Duration::from_nanos(
                    ms.saturating_mul(1_000_000).saturating_sub(slept),
                ))
            }
        })
    }

    /// How long ago the wait the stream's head sleeps in, if it published one, reached its
    /// timeout, and that wait's task number (its ticket, as `TaskCtx::task_number` gives it):
    /// `None` for no wait, a wait with no timeout, or one whose timeout is to come.
    pub(crate) fn head_wait_overdue(&self) -> Option<(std::time::Duration, u64)> {
        let e = self.entry();
        Target::from_wait_word(e.head.load(SeqCst))?;
        let task = e.head_ticket.load(SeqCst);
        let ms = e.head_timeout_ms.load(SeqCst);
        if ms == u64::MAX {
            return None;
        }
        let due = e
            .head_since
            .load(SeqCst)
            .saturating_add(ms.saturating_mul(1_000_000));
        let now = sys::now_ns();
        (now > due).then(|| (std::time::Duration::from_nanos(now - due), task))
    }

    /// What the wait at the stream's head sleeps on, if it published one.
    pub(crate) fn head_target(&self) -> Option<Target> {
        Target::from_wait_word(self.entry().head.load(SeqCst))
    }

    /// The wait the stream's head sleeps in, if it published one: "a wait on notify 3 of
    /// device 1, asleep for 12.0 s (timeout 60.0 s)".
    pub(crate) fn describe_head(&self) -> Option<String> {
        let e = self.entry();
        let t = Target::from_wait_word(e.head.load(SeqCst))?;
        let slept = sys::now_ns().saturating_sub(e.head_since.load(SeqCst)) as f64 / 1e9;
        let mut s = format!("a wait on {t}, asleep for {slept:.1} s");
        match e.head_timeout_ms.load(SeqCst) {
            u64::MAX => s.push_str(" (no timeout)"),
            ms => {
                let _ = write!(s, " (timeout {:.1} s)", ms as f64 / 1e3);
            }
        }
        Some(s)
    }

    /// The published streams, with this one's position in the list.
    fn snapshot_with_me(&self) -> (Vec<StreamView>, Option<usize>) {
        let views = self.graph.snapshot();
        let me = views.iter().position(|v| v.entry == self.index);
        (views, me)
    }
}

/// What the worker thread publishes while its head wait sleeps; unpublished on drop.
pub(crate) struct Blocked(Option<Arc<StreamSlot>>);

impl Blocked {
    /// Publishes that the wait numbered `ticket` in the calling worker's stream sleeps on `t`.
    #[cold]
    pub(crate) fn publish(t: Target, ticket: u64, timeout: Option<std::time::Duration>) -> Self {
        let slot = WORKER.with(|w| {
            let mut w = w.borrow_mut();
            if w.is_none() {
                let tid = gettid();
                *w = WORKERS
                    .get()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .find(|(t, _)| *t == tid)
                    .and_then(|(_, s)| s.upgrade());
            }
            w.clone()
        });
        if let Some(s) = &slot {
            let e = s.entry();
            e.head_ticket.store(ticket, SeqCst);
            e.head_since.store(sys::now_ns(), SeqCst);
            e.head_timeout_ms
                .store(timeout.map_or(u64::MAX, |d| d.as_millis() as u64), SeqCst);
            e.head.store(t.wait_word(), SeqCst);
        }
        Blocked(slot)
    }

    /// The entry of the stream whose own thread is `tid` (looked up in [`WORKERS`] under its
    /// lock; empty if there is none), for a parked wait's stream to keep
    /// (`TaskCtx::graph_slot`).
    #[cold]
    pub(crate) fn find_worker(tid: i32) -> Weak<StreamSlot> {
        #[cfg(test)]
        LOOKED_UP
            .get()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tid);
        WORKERS
            .get()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(w, _)| *w == tid)
            .map_or_else(Weak::new, |(_, s)| Weak::clone(s))
    }

    /// The deadlock cycle through this stream, described, if there is one now.
    pub(crate) fn deadlock(&self) -> Option<String> {
        let s = self.0.as_ref()?;
        let (views, me) = s.snapshot_with_me();
        let cycle = find_cycle(&views, me?)?;
        Some(describe_cycle(&views, &cycle))
    }
}

impl Drop for Blocked {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            s.entry().head.store(0, SeqCst);
        }
    }
}

/// What a parked wait publishes (`crate::parked`), unpublished on drop: [`Blocked`] without
/// a reference to the entry and with release stores instead of sequentially consistent
/// ones. A parked wait never looks for a cycle through itself (it goes home to its thread
/// within `HOME_AFTER` and does so there, publishing as a sleeping wait), so nothing orders
/// its publication before a load of its own; and a reader could read the entry before or
/// after either store anyway. The reference count and the two `xchg`s cost the runner four
/// locked instructions a park (pipeline bench, `perf`, 2026-12-05).
pub(crate) struct ParkedBlocked(Option<std::ptr::NonNull<Entry>>);

// SAFETY: a pointer to atomics in a shared mapping, used only through `&Entry`.
unsafe impl Send for ParkedBlocked {}
// SAFETY: as above.
unsafe impl Sync for ParkedBlocked {}

impl ParkedBlocked {
    /// Publishes that the wait numbered `ticket` of the stream whose entry is `slot` waits on
    /// `t` (for at most `timeout`), parked since `since_ns` (`sys::now_ns`'s clock; the
    /// calling thread may be the runner). The entry's other words are written before `head`, whose release store
    /// publishes them (a reader loads `head` first).
    ///
    /// # Safety
    ///
    /// `slot` must outlive the value returned (the stream's task context holds it until the
    /// stream's worker exits, when no task of the stream is left: `TaskCtx::graph_slot`).
    #[inline]
    pub(crate) unsafe fn publish(
        slot: Option<&StreamSlot>,
        t: Target,
        ticket: u64,
        since_ns: u64,
        timeout: Option<std::time::Duration>,
    ) -> Self {
        ParkedBlocked(slot.map(|s| {
            let e = s.entry();
            e.head_ticket.store(ticket, Relaxed);
            e.head_since.store(since_ns, Relaxed);
            e.head_timeout_ms
                .store(timeout.map_or(u64::MAX, |d| d.as_millis() as u64), Relaxed);
            e.head.store(t.wait_word(), Release);
            std::ptr::NonNull::from(e)
        }))
    }
}

impl Drop for ParkedBlocked {
    fn drop(&mut self) {
        if let Some(e) = self.0 {
            // SAFETY: the entry outlives this (`publish`'s contract).
            unsafe { e.as_ref() }.head.store(0, Release);
        }
    }
}

/// Tests: the threads [`Blocked::find_worker`] looked up, in order.
#[cfg(test)]
pub(crate) static LOOKED_UP: PerProcess<Vec<i32>> = PerProcess::new(Vec::new);

/// A blocked head wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    /// What it waits on.
    pub target: Target,
    ticket: u64,
    /// How long it has slept.
    pub blocked_ns: u64,
    /// Its timeout in ms (`u64::MAX`: none).
    pub timeout_ms: u64,
}

/// One published stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamView {
    entry: usize,
    /// The owning process.
    pub pid: i32,
    /// The owner's label (empty: none).
    pub label: String,
    /// The stream's handle as its caller sees it.
    pub handle: u64,
    /// Its server.
    pub server: u32,
    /// Its device.
    pub device: u32,
    /// The wait its head sleeps in, if any.
    pub head: Option<Head>,
    /// The records queued behind a blocked head (none when the head is not blocked).
    pub queued: Vec<Target>,
}

impl StreamView {
    /// "stream 0x5a.. of pid 12 (rank 0), device 1".
    pub fn name(&self) -> String {
        let mut s = format!("stream {:#x} of pid {}", self.handle, self.pid);
        if !self.label.is_empty() {
            let _ = write!(s, " ({})", self.label);
        }
        let _ = write!(s, ", device {}", self.device);
        if self.server != 0 {
            let _ = write!(s, " of server {}", self.server);
        }
        s
    }
}

/// A cycle of blocked streams through `start`, each waiting on a notify whose record is queued
/// behind the next one's blocked head (as indexes into `views`, `start` first), if any.
pub fn find_cycle(views: &[StreamView], start: usize) -> Option<Vec<usize>> {
    // Breadth first from `start` along "my record is queued behind your head".
    let next = |i: usize| -> Vec<usize> {
        let Some(h) = views[i].head else {
            return Vec::new();
        };
        views
            .iter()
            .enumerate()
            // An event of one process is recorded only by that process's streams.
            .filter(|(_, v)| {
                v.head.is_some()
                    && v.queued.contains(&h.target)
                    && (h.target.kind != TargetKind::Event || v.pid == views[i].pid)
            })
            .map(|(j, _)| j)
            .collect()
    };
    let mut parent: Vec<Option<usize>> = vec![None; views.len()];
    let mut queue = std::collections::VecDeque::from([start]);
    let mut seen = vec![false; views.len()];
    seen[start] = true;
    while let Some(i) = queue.pop_front() {
        for j in next(i) {
            if j == start {
                let mut cycle = vec![i];
                let mut k = i;
                while let Some(p) = parent[k] {
                    cycle.push(p);
                    k = p;
                }
                cycle.reverse();
                return Some(cycle);
            }
            if !seen[j] {
                seen[j] = true;
                parent[j] = Some(i);
                queue.push_back(j);
            }
        }
    }
    None
}

/// Every distinct cycle among `views` (each listed once, from its lowest index).
pub fn all_cycles(views: &[StreamView]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    for i in 0..views.len() {
        if let Some(c) = find_cycle(views, i)
            && c.iter().min() == Some(&i)
            && !out.iter().any(|o| o.contains(&i))
        {
            out.push(c);
        }
    }
    out
}

/// The report of a cycle: every member, what it waits on, and where its record sits.
pub fn describe_cycle(views: &[StreamView], cycle: &[usize]) -> String {
    let mut s = format!(
        "deadlock: {} streams wait on each other in a cycle, each for a record that is queued \
         behind another one's wait:",
        cycle.len()
    );
    for (k, &i) in cycle.iter().enumerate() {
        let v = &views[i];
        let Some(h) = v.head else { continue };
        let j = cycle[(k + 1) % cycle.len()];
        let w = &views[j];
        let _ = write!(
            s,
            " [{}] {} waits on {} for {:.1} s; the record that would release it is queued on \
             {} behind its wait on {}.",
            k + 1,
            v.name(),
            h.target,
            h.blocked_ns as f64 / 1e9,
            w.name(),
            w.head.map_or_else(String::new, |h| h.target.to_string()),
        );
    }
    s.push_str(
        " No stream of the cycle can go on until one of these notifies is recorded from \
         elsewhere: record before waiting on one side, or wait on a stream that queues no \
         record the other side needs",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(entry: usize, waits: Option<u32>, queued: &[u32]) -> StreamView {
        let t = |id| Target::notify(0, 0, id);
        StreamView {
            entry,
            pid: 100 + entry as i32,
            label: String::new(),
            handle: entry as u64,
            server: 0,
            device: 0,
            head: waits.map(|id| Head {
                target: t(id),
                ticket: 0,
                blocked_ns: 0,
                timeout_ms: u64::MAX,
            }),
            queued: queued.iter().map(|&i| t(i)).collect(),
        }
    }

    #[test]
    fn words_round_trip_and_tickets_order() {
        for kind in [TargetKind::Notify, TargetKind::IpcEvent, TargetKind::Event] {
            let t = Target {
                kind,
                server: 3,
                device: 7,
                id: 65534,
            };
            assert_eq!(Target::from_wait_word(t.wait_word()), Some(t));
            assert_eq!(Target::from_rec_word(t.rec_word(12)), Some((t, 12)));
            // A ticket past the word's 20 bits keeps its low bits, and the target intact.
            let far = (5 << TICKET_BITS) | (TICKET_MASK - 3);
            assert_eq!(
                Target::from_rec_word(t.rec_word(far)),
                Some((t, TICKET_MASK - 3))
            );
        }
        assert_eq!(Target::from_rec_word(0), None);
        // The wait is ticket 10: a record noted with 12 (ticket 11) is behind it, 11 (ticket
        // 10 or earlier) is not.
        assert!(behind(12, 10));
        assert!(!behind(11, 10));
        assert!(!behind(3, 10));
        assert!(behind(TICKET_MASK & 5, TICKET_MASK - 1));
    }

    #[test]
    fn a_cycle_is_found_only_when_it_closes() {
        // 0 waits on 1, whose record is queued behind 1's wait on 2, whose record is queued
        // behind 2's wait on 0: a cycle of three.
        let mut v = vec![
            view(0, Some(1), &[0]),
            view(1, Some(2), &[1]),
            view(2, Some(0), &[2]),
        ];
        // From 0: the stream holding 0's record (1), then the one holding 1's (2).
        assert_eq!(find_cycle(&v, 0), Some(vec![0, 1, 2]));
        assert_eq!(all_cycles(&v).len(), 1);
        let text = describe_cycle(&v, &find_cycle(&v, 1).unwrap_or_default());
        assert!(text.contains("deadlock") && text.contains("pid 100") && text.contains("pid 102"));
        // Stream 2 not blocked: its record will run; no cycle.
        v[2].head = None;
        v[2].queued.clear();
        assert_eq!(find_cycle(&v, 0), None);
        assert!(all_cycles(&v).is_empty());
    }
}

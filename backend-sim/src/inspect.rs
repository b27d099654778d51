//! Read-only inspection of a simulated machine: [`snapshot`] maps a namespace's shared files
//! `PROT_READ` (no registration in the process table, no garbage collection, nothing written)
//! and returns a [`MachineSnapshot`] — every registered process (alive or dead), each device's
//! id budgets, and each live notify and count notify with its state, owner, holders, whitelist,
//! pending waiters (down to the stream threads blocked on it) and last recorder. Rendered as a
//! table ([`MachineSnapshot::to_text`]) or JSON ([`MachineSnapshot::to_json`]); used by the
//! `acl-notify-inspect` binary and `cargo xtask inspect`.
//!
//! # Trust
//!
//! The files are written by other processes, so everything is validated: the header (magic,
//! layout version, sizes, offsets, file size) before any offset is used, process-table states,
//! holder and whitelist entries. A corrupt entry is reported in [`MachineSnapshot::problems`]
//! and skipped; nothing here panics on bad memory. The header and process-table types are the
//! simulator's own (`shm.rs`, layout version [`LAYOUT_VERSION`]); a file of another version is
//! refused.
//!
//! # Waiting threads
//!
//! A stream stalled in a wait sleeps in `futex(2)` on a word of the notify's slot. For every
//! live registered process, the stream threads (`/proc/<pid>/task/*`) are sampled: a thread in
//! `futex` on an address inside that process's mapping of the file is waiting on the slot the
//! offset names. This needs the right to read `/proc/<pid>/task/<tid>/syscall` (same user, and
//! ptrace not restricted); without it, the waiters are counted but not named, and
//! [`MachineSnapshot::problems`] says why.

use std::collections::HashMap;
use std::ffi::CString;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use acl_notify_core::table::{ExportState, MAX_PROCS, NotifySlot, SlotState};
use acl_notify_core::whitelist::Whitelist;
use acl_notify_core::{CreateFlags, Error, Soc};

use crate::cnt::{CntFile, CntOpen};
use crate::error::SimError;
use crate::mapfile::{PAGE, READY};
use crate::shm::{
    FILE_PREFIX, Header, LAYOUT_VERSION, MAGIC, P_ALIVE, P_CLAIMING, P_FREE, P_RECLAIMING,
    Pool1024, Pool2048, Pool8192, Pool65535, ProcEntry, SHM_DIR, SLOT_BYTES, WHITELIST_BYTES,
    pool_size,
};
use crate::sigbus::Registration;
use crate::sys;

const WL_WORDS: usize = std::mem::size_of::<Whitelist>() / 8;
const _: () = assert!(std::mem::size_of::<Whitelist>() == WL_WORDS * 8);
const _: () = assert!(WHITELIST_BYTES == 8 + WL_WORDS * 8);

/// Whether a process is alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// Running (and, where its start time is known, the same process, not a recycled PID).
    Alive,
    /// Gone (or its PID now belongs to another process).
    Dead,
    /// Gone after it ended normally (`exit()`, a return from `main`, or its last `Sim` of the
    /// namespace dropped), as it noted in the wait-for graph's process records.
    Exited,
    /// Cannot be told from here (a process on another SuperPod server).
    Unknown,
}

impl Liveness {
    fn of(pid: i32, start_time: u64) -> Liveness {
        if sys::pid_alive(pid, start_time) {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }

    /// A whitelist entry's process (`identity` as `sys::process_identity` made it).
    fn of_entry(pid: i32, identity: u64) -> Liveness {
        if sys::identity_alive(pid, identity) {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }

    /// Not running any more, whether it exited normally or died.
    pub fn is_gone(self) -> bool {
        matches!(self, Liveness::Dead | Liveness::Exited)
    }

    /// `"alive"`, `"dead"`, `"exited"` or `"unknown"`.
    pub fn word(self) -> &'static str {
        match self {
            Liveness::Alive => "alive",
            Liveness::Dead => "dead",
            Liveness::Exited => "exited",
            Liveness::Unknown => "unknown",
        }
    }
}

/// A process as the machine knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcSnap {
    /// Its slot in the process table.
    pub index: u32,
    /// Process id.
    pub pid: i32,
    /// Registration state: `"registering"`, `"registered"`, `"being reclaimed (pid: the reclaimer's)"`.
    pub state: &'static str,
    /// Whether it runs.
    pub alive: Liveness,
    /// Its label (`ACL_NOTIFY_SIM_LABEL`, or the launcher's rank; empty: none).
    pub label: String,
}

/// A process referred to by a notify (owner, holder, whitelisted, recorder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidRef {
    /// Process id.
    pub pid: i32,
    /// Whether it runs.
    pub alive: Liveness,
}

/// One device's id budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSnap {
    /// Device number.
    pub device: u32,
    /// Notify ids in use (all processes).
    pub notifies_in_use: u32,
    /// Notify ids per device.
    pub notifies_max: u32,
    /// Count-notify ids in use, when the SoC has count notifies and the file exists.
    pub cnt_in_use: Option<u32>,
    /// Count-notify ids per device (0 without count notifies).
    pub cnt_max: u32,
}

/// A stream thread found sleeping on a notify or count notify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingThread {
    /// Its process.
    pub pid: i32,
    /// Its thread id.
    pub tid: i32,
    /// Its name (a simulator stream is `acl-sim-d<device>-s<n>` or `acl-sim-d<device>-default`).
    pub name: String,
    /// What it sleeps on: `"the flag (first in line)"`, `"its turn (queued)"`, `"the count"`.
    pub on: &'static str,
}

/// How a notify was exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportSnap {
    /// Not exported.
    No,
    /// Exported; importers must be whitelisted.
    Whitelist,
    /// Exported with `DISABLE_PID_VALIDATION`.
    Open,
    /// The stored value is invalid.
    Corrupt,
}

impl ExportSnap {
    fn word(self) -> &'static str {
        match self {
            ExportSnap::No => "not exported",
            ExportSnap::Whitelist => "exported (whitelist)",
            ExportSnap::Open => "exported (open)",
            ExportSnap::Corrupt => "corrupt export state",
        }
    }
}

/// One whitelist entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WhitelistSnap {
    /// SuperPod server.
    pub server: u32,
    /// Process id.
    pub pid: i32,
    /// Whether it runs (unknown on another server).
    pub alive: Liveness,
}

/// The last record of a notify.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordSnap {
    /// Who recorded.
    pub by: PidRef,
    /// How long before the snapshot.
    pub ago: Duration,
}

/// One live notify.
#[derive(Clone, Debug, PartialEq)]
pub struct NotifySnap {
    /// Owner's device.
    pub device: u32,
    /// Notify id.
    pub id: u32,
    /// Generation of the id.
    pub generation: u32,
    /// Create flags.
    pub flags: CreateFlags,
    /// Export state.
    pub export: ExportSnap,
    /// Whether a record is pending (the flag is set).
    pub flag_set: bool,
    /// Waiters holding a ticket (queued or being served).
    pub waiters: u32,
    /// Of those, the ones of processes that are dead (their tickets go at the next GC, or
    /// when a live waiter behind them cancels them).
    pub dead_waiters: u32,
    /// Stream threads found sleeping on it.
    pub waiting_threads: Vec<WaitingThread>,
    /// The creating process.
    pub owner: PidRef,
    /// Processes holding a reference (owner and importers), dead ones included until GC.
    pub holders: Vec<PidRef>,
    /// Whitelisted importers.
    pub whitelist: Vec<WhitelistSnap>,
    /// The last record, if any.
    pub last_record: Option<RecordSnap>,
    /// Records that merged into an already-set flag (since the last wait, in all).
    pub merged: crate::MergedRecords,
}

/// One live count notify.
#[derive(Clone, Debug, PartialEq)]
pub struct CntSnap {
    /// Device.
    pub device: u32,
    /// Count-notify id.
    pub id: u32,
    /// Generation of the id.
    pub generation: u32,
    /// The count.
    pub count: u32,
    /// Waits in progress.
    pub waiters: u32,
    /// Stream threads found sleeping on it.
    pub waiting_threads: Vec<WaitingThread>,
    /// The creating process.
    pub owner: PidRef,
    /// The last record: who, mode name, value, how long ago.
    pub last_record: Option<(PidRef, &'static str, u32, Duration)>,
}

/// Everything [`snapshot`] saw.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineSnapshot {
    /// Namespace.
    pub namespace: String,
    /// SuperPod server.
    pub server: u32,
    /// The notify file.
    pub path: PathBuf,
    /// SoC family.
    pub soc: Soc,
    /// Devices.
    pub devices: u32,
    /// Registered processes.
    pub processes: Vec<ProcSnap>,
    /// Per-device budgets.
    pub device_budgets: Vec<DeviceSnap>,
    /// Live notifies, by device then id.
    pub notifies: Vec<NotifySnap>,
    /// Live count notifies, by device then id.
    pub cnt_notifies: Vec<CntSnap>,
    /// The streams of the namespace (every server) that publish in its wait-for graph.
    pub streams: Vec<crate::waitgraph::StreamView>,
    /// Every cycle of streams waiting on each other, described ([`crate::waitgraph`]).
    pub deadlocks: Vec<String>,
    /// What could not be read or was inconsistent.
    pub problems: Vec<String>,
}

fn bad(path: &Path, why: impl std::fmt::Display) -> SimError {
    SimError::new(
        Error::DrvInternalError,
        format!("{}: {why}", path.display()),
    )
}

/// A read-only mapping of a whole file.
struct RoMap {
    base: *const u8,
    len: usize,
    /// A simulator process that truncates the file while we read it must not kill the
    /// inspector with SIGBUS: the lost pages read as zero and the snapshot is refused.
    sigbus: Registration,
}

impl RoMap {
    fn open(path: &Path) -> Result<RoMap, SimError> {
        let c = CString::new(path.as_os_str().as_bytes()).map_err(|_| bad(path, "NUL in path"))?;
        // SAFETY: valid C string; plain flags.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            )
        };
        if fd < 0 {
            let e = std::io::Error::last_os_error();
            return Err(if e.kind() == std::io::ErrorKind::NotFound {
                SimError::new(
                    Error::InvalidDeviceId,
                    format!(
                        "{} does not exist: no process has opened this namespace/server (or it \
                         was removed)",
                        path.display()
                    ),
                )
            } else {
                bad(path, format_args!("open: {e}"))
            });
        }
        // SAFETY: `stat` is plain data; zeroed is a valid value to be overwritten.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open, `st` a valid out-pointer.
        let r = unsafe { libc::fstat(fd, &mut st) };
        let result = if r != 0 {
            Err(bad(
                path,
                format_args!("fstat: {}", std::io::Error::last_os_error()),
            ))
        } else if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            Err(bad(path, "not a regular file"))
        } else if st.st_uid != sys::geteuid() {
            Err(bad(
                path,
                format_args!("owned by uid {}, not by this user", st.st_uid),
            ))
        } else if (st.st_size as u64) < PAGE as u64 {
            Err(bad(path, format_args!("only {} bytes long", st.st_size)))
        } else {
            let len = st.st_size as usize;
            // SAFETY: a fresh read-only shared mapping of an open fd, no address hint.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                Err(bad(
                    path,
                    format_args!("mmap: {}", std::io::Error::last_os_error()),
                ))
            } else {
                Ok(RoMap {
                    base: p.cast::<u8>().cast_const(),
                    len,
                    sigbus: Registration::new(p.cast::<u8>(), len),
                })
            }
        };
        // SAFETY: we own `fd`; the mapping (if any) stays valid after close.
        unsafe { libc::close(fd) };
        result
    }

    /// A `T` at `off`, if it fits and is aligned.
    fn at<T>(&self, off: usize) -> Option<&T> {
        let end = off.checked_add(std::mem::size_of::<T>())?;
        if end > self.len || !off.is_multiple_of(std::mem::align_of::<T>()) {
            return None;
        }
        // SAFETY: in bounds and aligned (checked above); every `T` used here contains only
        // atomics and plain integers, for which any bit pattern is valid, and they are only
        // loaded (the mapping is read-only; atomic loads of at most 8 bytes on read-only
        // memory are plain loads on the targets we support).
        Some(unsafe { &*self.base.add(off).cast::<T>() })
    }
}

impl Drop for RoMap {
    fn drop(&mut self) {
        self.sigbus.release();
        // SAFETY: `base`/`len` describe our mapping, unmapped only here.
        unsafe { libc::munmap(self.base.cast_mut().cast(), self.len) };
    }
}

/// The validated layout of a mapped notify file.
struct Layout {
    soc: Soc,
    devices: u32,
    max: u32,
    pool_stride: usize,
    wl_size: usize,
    procs_off: usize,
    devs_off: usize,
    pools_off: usize,
    slots_off: usize,
    whitelists_off: usize,
}

fn validate(m: &RoMap, path: &Path, server: u32) -> Result<Layout, SimError> {
    let h: &Header = m.at(0).ok_or_else(|| bad(path, "no header"))?;
    if h.magic.load(SeqCst) != MAGIC {
        return Err(bad(path, "bad magic: not an acl-notify simulator file"));
    }
    let v = h.version.load(SeqCst);
    if v != LAYOUT_VERSION {
        return Err(bad(
            path,
            format_args!("layout version {v}; this inspector reads version {LAYOUT_VERSION}"),
        ));
    }
    if h.ready.load(SeqCst) != READY {
        return Err(bad(
            path,
            "not initialised (its creator is still writing it, or died)",
        ));
    }
    let soc = Soc::ALL
        .get((h.soc.load(SeqCst) as usize).wrapping_sub(1))
        .copied()
        .ok_or_else(|| bad(path, "unknown SoC in the header"))?;
    let devices = h.devices.load(SeqCst);
    let max = h.max_notifies.load(SeqCst);
    let psize =
        pool_size(max).ok_or_else(|| bad(path, format_args!("{max} notifies per device")))?;
    let off = |a: &AtomicU64| usize::try_from(a.load(SeqCst)).unwrap_or(usize::MAX);
    let l = Layout {
        soc,
        devices,
        max,
        pool_stride: psize.div_ceil(64) * 64,
        wl_size: h.whitelist_size.load(SeqCst) as usize,
        procs_off: off(&h.procs_off),
        devs_off: off(&h.devs_off),
        pools_off: off(&h.pools_off),
        slots_off: off(&h.slots_off),
        whitelists_off: off(&h.whitelists_off),
    };
    let d = devices as usize;
    let n = max as usize;
    let checks: [(&str, bool); 9] = [
        ("devices", (1..=64).contains(&devices)),
        ("notifies per device", max == soc.max_notifies()),
        ("server", h.server.load(SeqCst) == server),
        ("slot size", h.slot_size.load(SeqCst) as usize == SLOT_BYTES),
        ("pool size", h.pool_size.load(SeqCst) as usize == psize),
        (
            "whitelist size",
            l.wl_size == 0 || l.wl_size == WHITELIST_BYTES,
        ),
        ("process table size", h.max_procs.load(SeqCst) == MAX_PROCS),
        ("total size", off(&h.total_size) == m.len),
        (
            "region bounds",
            l.procs_off.saturating_add(MAX_PROCS as usize * 64) <= l.devs_off
                && l.devs_off.saturating_add(d * 64) <= l.pools_off
                && l.pools_off.saturating_add(d * l.pool_stride) <= l.slots_off
                && l.slots_off.saturating_add(d * n * SLOT_BYTES) <= l.whitelists_off
                && l.whitelists_off.saturating_add(d * n * l.wl_size) <= m.len
                && [
                    l.procs_off,
                    l.devs_off,
                    l.pools_off,
                    l.slots_off,
                    l.whitelists_off,
                ]
                .iter()
                .all(|o| o.is_multiple_of(PAGE)),
        ),
    ];
    if let Some((what, _)) = checks.iter().find(|c| !c.1) {
        return Err(bad(path, format_args!("corrupt header ({what})")));
    }
    Ok(l)
}

/// Reads a pool's usage at `off` for capacity `max`.
fn pool_in_use(m: &RoMap, off: usize, max: u32) -> Option<u32> {
    Some(match max {
        65535 => m.at::<Pool65535>(off)?.in_use(),
        8192 => m.at::<Pool8192>(off)?.in_use(),
        2048 => m.at::<Pool2048>(off)?.in_use(),
        1024 => m.at::<Pool1024>(off)?.in_use(),
        _ => return None,
    })
}

/// A consistent copy of a whitelist (seqlock), or `None` if a writer keeps it busy.
fn read_whitelist(m: &RoMap, off: usize) -> Option<Whitelist> {
    let seq: &AtomicU64 = m.at(off)?;
    let words: &[AtomicU64; WL_WORDS] = m.at(off + 8)?;
    for _ in 0..1000 {
        let s1 = seq.load(SeqCst);
        if s1 % 2 == 1 {
            std::thread::yield_now();
            continue;
        }
        let mut w = [0u64; WL_WORDS];
        for (o, a) in w.iter_mut().zip(words) {
            *o = a.load(SeqCst);
        }
        if seq.load(SeqCst) == s1 {
            // SAFETY: `Whitelist` is `#[repr(C)]`, exactly `WL_WORDS * 8` bytes (checked at
            // compile time), made only of integers, so any bit pattern is a valid value; its
            // length field is clamped by every accessor.
            return Some(unsafe { std::mem::transmute::<[u64; WL_WORDS], Whitelist>(w) });
        }
    }
    None
}

/// The path of a namespace's notify file for `server` (as the simulator names it).
pub fn notify_file_path(namespace: &str, server: u32) -> PathBuf {
    crate::shm::file_path(namespace, server)
}

/// Every (namespace, server) with a notify file under `/dev/shm`, sorted.
pub fn namespaces() -> Vec<(String, u32)> {
    let mut v = Vec::new();
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else {
        return v;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(FILE_PREFIX)) else {
            continue;
        };
        let Some((ns, srv)) = rest.rsplit_once(".srv") else {
            continue;
        };
        if let Ok(s) = srv.parse::<u32>()
            && !ns.is_empty()
        {
            v.push((ns.to_owned(), s));
        }
    }
    v.sort();
    v
}

/// Takes a read-only snapshot of `namespace`'s machine on `server`.
///
/// Errors: 107001 no such file (nobody opened the namespace); 507899 an unusable file (another
/// layout version, corrupt header, not ours).
pub fn snapshot(namespace: &str, server: u32) -> Result<MachineSnapshot, SimError> {
    let path = notify_file_path(namespace, server);
    let m = RoMap::open(&path)?;
    let l = validate(&m, &path, server)?;
    let now = sys::now_ns();
    let mut problems = Vec::new();

    // Processes.
    let mut procs = Vec::new();
    let mut by_index: HashMap<u32, (i32, u64, Liveness)> = HashMap::new();
    for i in 0..MAX_PROCS {
        let Some(e) = m.at::<ProcEntry>(l.procs_off + i as usize * 64) else {
            break;
        };
        let w = e.word.load(SeqCst);
        let pid = w as u32 as i32;
        let start = e.start_time.load(SeqCst);
        let state = match (w >> 32) as u32 {
            P_FREE => continue,
            P_CLAIMING => "registering",
            P_ALIVE => "registered",
            // The word names the reclaimer while it works; the entry's process is dead.
            P_RECLAIMING => "being reclaimed (pid: the reclaimer's)",
            other => {
                problems.push(format!("process table entry {i}: invalid state {other}"));
                continue;
            }
        };
        let alive = if (w >> 32) as u32 == P_RECLAIMING {
            Liveness::Dead
        } else {
            Liveness::of(pid, start)
        };
        by_index.insert(i, (pid, start, alive));
        procs.push(ProcSnap {
            index: i,
            pid,
            state,
            alive,
            label: String::new(),
        });
    }
    let pid_liveness = |pid: i32| -> Liveness {
        by_index
            .values()
            .find(|(p, _, _)| *p == pid)
            .map_or_else(|| Liveness::of(pid, 0), |(_, _, a)| *a)
    };

    // The count-notify file, if any.
    let cnt = if l.soc.has(acl_notify_core::Feature::CntNotify) {
        match CntFile::open(namespace, server, l.soc, l.devices, CntOpen::ReadOnly) {
            Ok(f) => f,
            Err(e) => {
                problems.push(format!("count notifies: {e}"));
                None
            }
        }
    } else {
        None
    };

    // Budgets.
    let cnt_max = acl_notify_core::cnt::max_cnt_notifies(l.soc);
    let mut budgets = Vec::new();
    for dev in 0..l.devices {
        let in_use =
            pool_in_use(&m, l.pools_off + dev as usize * l.pool_stride, l.max).unwrap_or(0);
        budgets.push(DeviceSnap {
            device: dev,
            notifies_in_use: in_use,
            notifies_max: l.max,
            cnt_in_use: cnt.as_ref().and_then(|f| f.pool(dev)).map(|p| p.in_use()),
            cnt_max,
        });
    }

    // Who sleeps where.
    let sleepers = find_sleepers(&path, cnt.as_ref().map(|f| f.path()), &procs, &mut problems);

    // Notifies.
    let mut notifies = Vec::new();
    for dev in 0..l.devices {
        let hw = m
            .at::<AtomicU32>(l.devs_off + dev as usize * 64)
            .map_or(0, |a| a.load(SeqCst).min(l.max));
        for id in 0..hw {
            let i = dev as usize * l.max as usize + id as usize;
            let Some(slot) = m.at::<NotifySlot>(l.slots_off + i * SLOT_BYTES) else {
                break;
            };
            match slot.state() {
                Some(SlotState::Live) => {}
                Some(_) => continue,
                None => {
                    problems.push(format!("notify {id} of device {dev}: corrupt state word"));
                    continue;
                }
            }
            let owner = slot.owner();
            let holders_bits = slot.holders();
            let holders = (0..MAX_PROCS)
                .filter(|p| holders_bits & (1u64 << p) != 0)
                .map(|p| match by_index.get(&p) {
                    Some((pid, _, alive)) => PidRef {
                        pid: *pid,
                        alive: *alive,
                    },
                    None => PidRef {
                        pid: 0,
                        alive: Liveness::Dead,
                    },
                })
                .collect();
            let export = match slot.export_state() {
                Some(ExportState::None) => ExportSnap::No,
                Some(ExportState::Enforced) => ExportSnap::Whitelist,
                Some(ExportState::Open) => ExportSnap::Open,
                None => ExportSnap::Corrupt,
            };
            let mut whitelist = Vec::new();
            if export == ExportSnap::Whitelist && l.wl_size != 0 {
                match read_whitelist(&m, l.whitelists_off + i * l.wl_size) {
                    Some(wl) => {
                        for e in wl.iter() {
                            let alive = if e.sdid == server {
                                Liveness::of_entry(e.pid, e.start_time)
                            } else {
                                Liveness::Unknown
                            };
                            whitelist.push(WhitelistSnap {
                                server: e.sdid,
                                pid: e.pid,
                                alive,
                            });
                        }
                    }
                    None => problems.push(format!(
                        "notify {id} of device {dev}: whitelist unreadable (a writer died mid-update?)"
                    )),
                }
            }
            let (rpid, rns) = slot.last_record();
            let last_record = (rpid != 0).then(|| RecordSnap {
                by: PidRef {
                    pid: rpid,
                    alive: pid_liveness(rpid),
                },
                ago: Duration::from_nanos(now.saturating_sub(rns)),
            });
            let slot_off = l.slots_off + i * SLOT_BYTES;
            let waiting_threads = sleepers
                .iter()
                .filter(|s| !s.cnt && s.offset >= slot_off && s.offset < slot_off + SLOT_BYTES)
                .map(|s| WaitingThread {
                    pid: s.pid,
                    tid: s.tid,
                    name: s.name.clone(),
                    on: if s.offset == slot_off {
                        "the flag (first in line)"
                    } else {
                        "its turn (queued)"
                    },
                })
                .collect();
            notifies.push(NotifySnap {
                device: dev,
                id,
                generation: slot.generation(),
                flags: slot.create_flags(),
                export,
                flag_set: slot.sync.is_set(),
                waiters: slot.sync.waiters(),
                dead_waiters: slot
                    .sync
                    .ticket_holders()
                    .filter(|p| by_index.get(p).is_none_or(|(_, _, alive)| alive.is_gone()))
                    .count() as u32,
                waiting_threads,
                owner: PidRef {
                    pid: owner.pid,
                    alive: Liveness::of(owner.pid, owner.start_time),
                },
                holders,
                whitelist,
                last_record,
                merged: slot.merged_records(),
            });
        }
    }

    // Count notifies.
    let mut cnt_notifies = Vec::new();
    if let Some(f) = &cnt {
        for dev in 0..l.devices {
            for id in 0..f.high_water(dev) {
                let Some(slot) = f.slot(dev, id) else { break };
                if slot.state() != Some(acl_notify_core::slot::SlotState::Live) {
                    continue;
                }
                let o = slot.owner();
                let slot_off = f.slot_offset(dev, id);
                cnt_notifies.push(CntSnap {
                    device: dev,
                    id,
                    generation: slot.generation(),
                    count: slot.count(),
                    waiters: slot.waiters(),
                    waiting_threads: sleepers
                        .iter()
                        .filter(|s| s.cnt && s.offset >= slot_off && s.offset < slot_off + 64)
                        .map(|s| WaitingThread {
                            pid: s.pid,
                            tid: s.tid,
                            name: s.name.clone(),
                            on: "the count",
                        })
                        .collect(),
                    owner: PidRef {
                        pid: o.pid,
                        alive: Liveness::of(o.pid, o.start_time),
                    },
                    last_record: slot.last_record().map(|r| {
                        (
                            PidRef {
                                pid: r.pid,
                                alive: pid_liveness(r.pid),
                            },
                            r.mode.map_or("?", |m| m.name()),
                            r.value,
                            Duration::from_nanos(now.saturating_sub(r.at_ns)),
                        )
                    }),
                });
            }
        }
    }

    // The wait-for graph (absent before the first stream of the namespace is created).
    let (streams, deadlocks, records) = match crate::waitgraph::WaitGraph::open(namespace, false) {
        Ok(Some(g)) => {
            let views = g.snapshot();
            let cycles = crate::waitgraph::all_cycles(&views)
                .iter()
                .map(|c| crate::waitgraph::describe_cycle(&views, c))
                .collect();
            (views, cycles, g.processes())
        }
        Ok(None) => (Vec::new(), Vec::new(), Vec::new()),
        Err(e) => {
            problems.push(format!("wait-for graph: {e}"));
            (Vec::new(), Vec::new(), Vec::new())
        }
    };
    // Labels, and "exited" for the processes that noted a normal end.
    let exited = |pid: i32| records.iter().any(|r| r.pid == pid && r.exited);
    let fix = |l: &mut Liveness, pid: i32| {
        if *l == Liveness::Dead && exited(pid) {
            *l = Liveness::Exited;
        }
    };
    for p in &mut procs {
        fix(&mut p.alive, p.pid);
        if let Some(r) = records
            .iter()
            .find(|r| r.pid == p.pid && !r.label.is_empty())
        {
            p.label.clone_from(&r.label);
        }
    }
    for n in &mut notifies {
        fix(&mut n.owner.alive, n.owner.pid);
        for h in &mut n.holders {
            fix(&mut h.alive, h.pid);
        }
        for w in &mut n.whitelist {
            fix(&mut w.alive, w.pid);
        }
        if let Some(r) = &mut n.last_record {
            fix(&mut r.by.alive, r.by.pid);
        }
    }
    for c in &mut cnt_notifies {
        fix(&mut c.owner.alive, c.owner.pid);
    }

    // Pages cut off while we read came back as zeros: what we read is not the file.
    m.sigbus.intact(&path)?;
    Ok(MachineSnapshot {
        streams,
        deadlocks,
        namespace: namespace.to_owned(),
        server,
        path,
        soc: l.soc,
        devices: l.devices,
        processes: procs,
        device_budgets: budgets,
        notifies,
        cnt_notifies,
        problems,
    })
}

/// A thread found in `futex` on a word of one of the files.
struct Sleeper {
    pid: i32,
    tid: i32,
    name: String,
    /// Offset of the futex word in the file.
    offset: usize,
    /// In the count-notify file (else the notify file).
    cnt: bool,
}

/// The mappings of `path` in process `pid`: (start, end, file offset).
fn mappings(pid: i32, path: &Path) -> Vec<(usize, usize, usize)> {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return Vec::new();
    };
    let want = path.to_string_lossy();
    let mut v = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(off), Some(_dev), Some(_inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let file: Vec<&str> = f.collect();
        let file = file.join(" ");
        let file = file.strip_suffix(" (deleted)").unwrap_or(&file);
        if file != want {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        if let (Ok(a), Ok(b), Ok(o)) = (
            usize::from_str_radix(a, 16),
            usize::from_str_radix(b, 16),
            usize::from_str_radix(off, 16),
        ) {
            v.push((a, b, o));
        }
    }
    v
}

/// `(syscall number, first argument)` from `/proc/<pid>/task/<tid>/syscall`, `Err` if it
/// cannot be read (permissions), `Ok(None)` if the thread is not in a system call.
fn syscall_of(pid: i32, tid: i32) -> std::io::Result<Option<(i64, usize)>> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall"))?;
    let mut f = s.split_ascii_whitespace();
    let Some(nr) = f.next().and_then(|n| n.parse::<i64>().ok()) else {
        return Ok(None);
    };
    let arg = f
        .next()
        .and_then(|a| usize::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    Ok(arg.map(|a| (nr, a)))
}

fn find_sleepers(
    path: &Path,
    cnt_path: Option<&Path>,
    procs: &[ProcSnap],
    problems: &mut Vec<String>,
) -> Vec<Sleeper> {
    let mut out = Vec::new();
    let mut denied = Vec::new();
    for p in procs.iter().filter(|p| p.alive == Liveness::Alive) {
        let maps = mappings(p.pid, path);
        let cnt_maps = cnt_path.map(|c| mappings(p.pid, c)).unwrap_or_default();
        if maps.is_empty() && cnt_maps.is_empty() {
            continue;
        }
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", p.pid)) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let name = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", p.pid))
                .map(|s| s.trim_end().to_owned())
                .unwrap_or_default();
            // Waits sleep in chunks of at most 50 ms: a few samples catch them in futex.
            for attempt in 0..6 {
                match syscall_of(p.pid, tid) {
                    Err(_) => {
                        if !denied.contains(&p.pid) {
                            denied.push(p.pid);
                        }
                        break;
                    }
                    Ok(Some((nr, addr))) if nr == libc::SYS_futex => {
                        let hit = |ms: &[(usize, usize, usize)]| {
                            ms.iter()
                                .find(|(a, b, _)| (*a..*b).contains(&addr))
                                .map(|(a, _, o)| addr - a + o)
                        };
                        if let Some(offset) = hit(&maps) {
                            out.push(Sleeper {
                                pid: p.pid,
                                tid,
                                name: name.clone(),
                                offset,
                                cnt: false,
                            });
                        } else if let Some(offset) = hit(&cnt_maps) {
                            out.push(Sleeper {
                                pid: p.pid,
                                tid,
                                name: name.clone(),
                                offset,
                                cnt: true,
                            });
                        }
                        break;
                    }
                    _ if attempt < 5 => std::thread::sleep(Duration::from_millis(2)),
                    _ => {}
                }
            }
        }
    }
    if !denied.is_empty() {
        problems.push(format!(
            "cannot read /proc/<pid>/task/*/syscall of pid(s) {denied:?} (ptrace restrictions): \
             their waiting threads are counted but not named"
        ));
    }
    out
}

// ---- rendering ------------------------------------------------------------------------------

fn pid_text(p: &PidRef) -> String {
    if p.pid == 0 {
        "? (free process entry)".to_owned()
    } else {
        format!("{} ({})", p.pid, p.alive.word())
    }
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

impl NotifySnap {
    /// A one-line diagnosis when the notify looks stuck: waiters, no pending record, and no
    /// live process other than the waiters' that could record it.
    pub fn diagnosis(&self) -> Option<String> {
        if self.waiters == 0 || self.flag_set {
            return None;
        }
        if self.dead_waiters == self.waiters {
            return Some(format!(
                "{} waiter(s), all of dead processes: nothing waits on it any more (the \
                 tickets go at the next gc)",
                self.waiters
            ));
        }
        let waiting_pids: Vec<i32> = self.waiting_threads.iter().map(|t| t.pid).collect();
        let mut recorders: Vec<PidRef> = self.holders.clone();
        for w in &self.whitelist {
            if !recorders.iter().any(|r| r.pid == w.pid) {
                recorders.push(PidRef {
                    pid: w.pid,
                    alive: w.alive,
                });
            }
        }
        let others: Vec<&PidRef> = recorders
            .iter()
            .filter(|r| !waiting_pids.contains(&r.pid) && r.pid != self.owner.pid)
            .collect();
        let dead: Vec<String> = others
            .iter()
            .filter(|r| r.alive.is_gone())
            .map(|r| format!("{} {}", r.pid, r.alive.word()))
            .collect();
        if others.is_empty() {
            Some(format!(
                "{} waiter(s) and no other process holds or may import it: only the owner \
                 (pid {}) can record it",
                self.waiters, self.owner.pid
            ))
        } else if others.iter().all(|r| r.alive.is_gone()) {
            Some(format!(
                "STUCK: {} waiter(s), no record pending, and every other process that holds or \
                 may import it is dead or exited (pid {}): nobody left to record it",
                self.waiters,
                dead.join(", ")
            ))
        } else {
            None
        }
    }
}

impl MachineSnapshot {
    /// A human-readable report.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "namespace {} server {}: {} with {} devices ({})",
            self.namespace,
            self.server,
            self.soc,
            self.devices,
            self.path.display()
        );
        let dead = self
            .processes
            .iter()
            .filter(|p| p.alive == Liveness::Dead)
            .count();
        let exited = self
            .processes
            .iter()
            .filter(|p| p.alive == Liveness::Exited)
            .count();
        let _ = writeln!(
            s,
            "\nprocesses: {} registered, {dead} dead{}{}",
            self.processes.len(),
            if exited > 0 {
                format!(", {exited} exited")
            } else {
                String::new()
            },
            if dead + exited > 0 {
                " (reclaim with `acl-notify-inspect gc`)"
            } else {
                ""
            }
        );
        for p in &self.processes {
            let _ = writeln!(
                s,
                "  #{:<3} pid {:<8} {:<16} {}{}",
                p.index,
                p.pid,
                p.state,
                p.alive.word(),
                if p.label.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", p.label)
                }
            );
        }
        let _ = writeln!(
            s,
            "\ndevices:\n  {:<7}{:<22}count-notify ids used/max",
            "device", "notify ids used/max"
        );
        for d in &self.device_budgets {
            let cnt = match (d.cnt_max, d.cnt_in_use) {
                (0, _) => "-".to_owned(),
                (m, Some(u)) => format!("{u}/{m}"),
                (m, None) => format!("0/{m}"),
            };
            let _ = writeln!(
                s,
                "  {:<7}{:<22}{cnt}",
                d.device,
                format!("{}/{}", d.notifies_in_use, d.notifies_max)
            );
        }
        let _ = writeln!(s, "\nnotifies: {} live", self.notifies.len());
        if !self.notifies.is_empty() {
            let _ = writeln!(
                s,
                "  {:<5}{:<7}{:<5}{:<22}{:<7}{:<9}{:<18}last record",
                "dev", "id", "gen", "export", "flag", "waiters", "owner"
            );
        }
        for n in &self.notifies {
            let last = n.last_record.map_or("never".to_owned(), |r| {
                format!("pid {} {} ago", pid_text(&r.by), secs(r.ago))
            });
            let _ = writeln!(
                s,
                "  {:<5}{:<7}{:<5}{:<22}{:<7}{:<9}{:<18}{}",
                n.device,
                n.id,
                n.generation,
                n.export.word(),
                if n.flag_set { "set" } else { "clear" },
                n.waiters,
                pid_text(&n.owner),
                last
            );
            let holders: Vec<String> = n.holders.iter().map(pid_text).collect();
            let _ = writeln!(s, "       holders: {}", holders.join(", "));
            if n.merged.total > 0 {
                let _ = writeln!(
                    s,
                    "       merged records{}",
                    crate::diag::merged_text(n.merged).replacen(';', ":", 1)
                );
            }
            if n.dead_waiters > 0 {
                let _ = writeln!(
                    s,
                    "       waiters of dead processes: {} (their tickets go at the next gc)",
                    n.dead_waiters
                );
            }
            if n.export == ExportSnap::Whitelist {
                let wl: Vec<String> = n
                    .whitelist
                    .iter()
                    .map(|w| {
                        if w.server == self.server {
                            format!("pid {} ({})", w.pid, w.alive.word())
                        } else {
                            format!("pid {} on server {} ({})", w.pid, w.server, w.alive.word())
                        }
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    "       whitelist: {}",
                    if wl.is_empty() {
                        "(empty)".to_owned()
                    } else {
                        wl.join(", ")
                    }
                );
            }
            for t in &n.waiting_threads {
                let _ = writeln!(
                    s,
                    "       waiting: stream thread \"{}\" (pid {} tid {}) sleeps on {}",
                    t.name, t.pid, t.tid, t.on
                );
            }
            if let Some(d) = n.diagnosis() {
                let _ = writeln!(s, "       diagnosis: {d}");
            }
        }
        if self.soc.has(acl_notify_core::Feature::CntNotify) {
            let _ = writeln!(s, "\ncount notifies: {} live", self.cnt_notifies.len());
            for c in &self.cnt_notifies {
                let last = c
                    .last_record
                    .map_or("never recorded".to_owned(), |(p, m, v, ago)| {
                        format!(
                            "last record {m} {v:#x} by pid {} {} ago",
                            pid_text(&p),
                            secs(ago)
                        )
                    });
                let _ = writeln!(
                    s,
                    "  device {} id {} gen {}: count {:#x}, {} wait(s), owner pid {}; {last}",
                    c.device,
                    c.id,
                    c.generation,
                    c.count,
                    c.waiters,
                    pid_text(&c.owner)
                );
                for t in &c.waiting_threads {
                    let _ = writeln!(
                        s,
                        "       waiting: stream thread \"{}\" (pid {} tid {}) sleeps on {}",
                        t.name, t.pid, t.tid, t.on
                    );
                }
            }
        }
        if !self.streams.is_empty() {
            let blocked = self.streams.iter().filter(|v| v.head.is_some()).count();
            let _ = writeln!(
                s,
                "\nstreams: {} published, {blocked} blocked in a wait",
                self.streams.len()
            );
            for v in &self.streams {
                match v.head {
                    None => {
                        let _ = writeln!(s, "  {}: not blocked", v.name());
                    }
                    Some(h) => {
                        let _ = write!(
                            s,
                            "  {}: waits on {} for {:.1} s",
                            v.name(),
                            h.target,
                            h.blocked_ns as f64 / 1e9
                        );
                        if h.timeout_ms != u64::MAX {
                            let _ = write!(s, " (timeout {:.1} s)", h.timeout_ms as f64 / 1e3);
                        }
                        if !v.queued.is_empty() {
                            let q: Vec<String> = v.queued.iter().map(|t| t.to_string()).collect();
                            let _ = write!(s, "; records queued behind it: {}", q.join(", "));
                        }
                        s.push('\n');
                    }
                }
            }
        }
        for d in &self.deadlocks {
            let _ = writeln!(s, "\nDEADLOCK: {d}");
        }
        if !self.problems.is_empty() {
            let _ = writeln!(s, "\nproblems:");
            for p in &self.problems {
                let _ = writeln!(s, "  {p}");
            }
        }
        s
    }

    /// The same as JSON (one object; strings escaped).
    pub fn to_json(&self) -> String {
        let pid = |p: &PidRef| {
            format!(
                "{{\"pid\":{},\"alive\":{}}}",
                p.pid,
                json_str(p.alive.word())
            )
        };
        let threads = |v: &[WaitingThread]| {
            let items: Vec<String> = v
                .iter()
                .map(|t| {
                    format!(
                        "{{\"pid\":{},\"tid\":{},\"name\":{},\"on\":{}}}",
                        t.pid,
                        t.tid,
                        json_str(&t.name),
                        json_str(t.on)
                    )
                })
                .collect();
            format!("[{}]", items.join(","))
        };
        let procs: Vec<String> = self
            .processes
            .iter()
            .map(|p| {
                format!(
                    "{{\"index\":{},\"pid\":{},\"state\":{},\"alive\":{},\"label\":{}}}",
                    p.index,
                    p.pid,
                    json_str(p.state),
                    json_str(p.alive.word()),
                    json_str(&p.label)
                )
            })
            .collect();
        let devs: Vec<String> = self
            .device_budgets
            .iter()
            .map(|d| {
                format!(
                    "{{\"device\":{},\"notifies_in_use\":{},\"notifies_max\":{},\"cnt_in_use\":{},\"cnt_max\":{}}}",
                    d.device,
                    d.notifies_in_use,
                    d.notifies_max,
                    d.cnt_in_use.map_or("null".to_owned(), |u| u.to_string()),
                    d.cnt_max
                )
            })
            .collect();
        let notifies: Vec<String> = self
            .notifies
            .iter()
            .map(|n| {
                let holders: Vec<String> = n.holders.iter().map(pid).collect();
                let wl: Vec<String> = n
                    .whitelist
                    .iter()
                    .map(|w| {
                        format!(
                            "{{\"server\":{},\"pid\":{},\"alive\":{}}}",
                            w.server,
                            w.pid,
                            json_str(w.alive.word())
                        )
                    })
                    .collect();
                let last = n.last_record.map_or("null".to_owned(), |r| {
                    format!(
                        "{{\"pid\":{},\"alive\":{},\"ago_s\":{:.6}}}",
                        r.by.pid,
                        json_str(r.by.alive.word()),
                        r.ago.as_secs_f64()
                    )
                });
                format!(
                    "{{\"device\":{},\"id\":{},\"generation\":{},\"flags\":{},\"export\":{},\"flag_set\":{},\"waiters\":{},\"dead_waiters\":{},\"waiting_threads\":{},\"owner\":{},\"holders\":[{}],\"whitelist\":[{}],\"last_record\":{},\"merged_records\":{{\"since_last_wait\":{},\"total\":{}}},\"diagnosis\":{}}}",
                    n.device,
                    n.id,
                    n.generation,
                    n.flags.bits(),
                    json_str(n.export.word()),
                    n.flag_set,
                    n.waiters,
                    n.dead_waiters,
                    threads(&n.waiting_threads),
                    pid(&n.owner),
                    holders.join(","),
                    wl.join(","),
                    last,
                    n.merged.since_wait,
                    n.merged.total,
                    n.diagnosis().map_or("null".to_owned(), |d| json_str(&d))
                )
            })
            .collect();
        let cnts: Vec<String> = self
            .cnt_notifies
            .iter()
            .map(|c| {
                let last = c.last_record.map_or("null".to_owned(), |(p, m, v, ago)| {
                    format!(
                        "{{\"pid\":{},\"alive\":{},\"mode\":{},\"value\":{v},\"ago_s\":{:.6}}}",
                        p.pid,
                        json_str(p.alive.word()),
                        json_str(m),
                        ago.as_secs_f64()
                    )
                });
                format!(
                    "{{\"device\":{},\"id\":{},\"generation\":{},\"count\":{},\"waiters\":{},\"waiting_threads\":{},\"owner\":{},\"last_record\":{}}}",
                    c.device,
                    c.id,
                    c.generation,
                    c.count,
                    c.waiters,
                    threads(&c.waiting_threads),
                    pid(&c.owner),
                    last
                )
            })
            .collect();
        let problems: Vec<String> = self.problems.iter().map(|p| json_str(p)).collect();
        let target = |t: &crate::waitgraph::Target| {
            format!(
                "{{\"server\":{},\"device\":{},\"id\":{}}}",
                t.server, t.device, t.id
            )
        };
        let streams: Vec<String> = self
            .streams
            .iter()
            .map(|v| {
                let head = v.head.map_or_else(
                    || "null".to_owned(),
                    |h| {
                        format!(
                            "{{\"notify\":{},\"blocked_s\":{:.3},\"timeout_s\":{}}}",
                            target(&h.target),
                            h.blocked_ns as f64 / 1e9,
                            if h.timeout_ms == u64::MAX {
                                "null".to_owned()
                            } else {
                                format!("{:.3}", h.timeout_ms as f64 / 1e3)
                            }
                        )
                    },
                );
                let queued: Vec<String> = v.queued.iter().map(target).collect();
                format!(
                    "{{\"pid\":{},\"label\":{},\"handle\":{},\"server\":{},\"device\":{},\"waits_on\":{head},\"queued_records\":[{}]}}",
                    v.pid,
                    json_str(&v.label),
                    json_str(&format!("{:#x}", v.handle)),
                    v.server,
                    v.device,
                    queued.join(",")
                )
            })
            .collect();
        let deadlocks: Vec<String> = self.deadlocks.iter().map(|d| json_str(d)).collect();
        format!(
            "{{\"namespace\":{},\"server\":{},\"file\":{},\"soc\":{},\"devices\":{},\"processes\":[{}],\"device_budgets\":[{}],\"notifies\":[{}],\"cnt_notifies\":[{}],\"streams\":[{}],\"deadlocks\":[{}],\"problems\":[{}]}}",
            json_str(&self.namespace),
            self.server,
            json_str(&self.path.to_string_lossy()),
            json_str(self.soc.name()),
            self.devices,
            procs.join(","),
            devs.join(","),
            notifies.join(","),
            cnts.join(","),
            streams.join(","),
            deadlocks.join(","),
            problems.join(",")
        )
    }
}

/// A JSON string literal: quotes, backslashes and control characters escaped.
pub fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sim;
    use acl_notify_core::{
        CntNotifyOps, CntRecord, ExportFlags, NotifyResources, StreamOps, Timeout,
    };

    use crate::NamespaceGuard as Ns;

    /// A file truncated by another process while the inspector has it mapped: the pages cut
    /// off read as zero instead of killing the inspector with SIGBUS, and the mapping says it
    /// lost them (so a snapshot is refused).
    #[test]
    fn a_file_truncated_under_the_inspector_reads_zero_and_is_reported() {
        let path = PathBuf::from(format!("/dev/shm/unit-inspect-trunc-{}", sys::getpid()));
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(3 * PAGE as u64).unwrap();
        use std::os::unix::fs::FileExt;
        f.write_all_at(&7u64.to_le_bytes(), 2 * PAGE as u64)
            .unwrap();
        let m = RoMap::open(&path).unwrap();
        let word = m.at::<AtomicU64>(2 * PAGE).unwrap();
        assert_eq!(word.load(SeqCst), 7);
        assert!(!m.sigbus.lost());
        f.set_len(PAGE as u64).unwrap();
        assert_eq!(word.load(SeqCst), 0, "a lost page reads as zero");
        assert!(m.sigbus.lost());
        let e = m.sigbus.intact(&path).unwrap_err();
        assert!(e.to_string().contains("507899"), "{e}");
        drop(m);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }

    #[test]
    fn missing_namespace_is_a_clear_error() {
        let e = snapshot("unit-inspect-none-xyz", 0).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
    }

    /// The inspector reads exactly what the simulator wrote: budgets, notifies, owner,
    /// whitelist (with a dead PID), last recorder, count notifies, and a waiting stream thread
    /// named by its futex address.
    #[test]
    fn snapshot_agrees_with_a_live_machine() {
        let ns = Ns(format!("unit-inspect-{}", std::process::id()));
        let _ = Sim::remove_namespace(&ns.0);
        let sim = Sim::builder()
            .soc(Soc::Ascend950PR)
            .devices(2)
            .namespace(&ns.0)
            .open()
            .unwrap();
        let me = std::process::id() as i32;
        let n = sim.create_notify(1, CreateFlags::empty()).unwrap();
        let _other = sim.create_notify(1, CreateFlags::empty()).unwrap();
        sim.export_key(n, ExportFlags::empty()).unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id() as i32;
        child.wait().unwrap();
        sim.set_import_pids(n, &[dead, me]).unwrap();
        let s = sim.create_stream(1).unwrap();
        sim.record(n, s).unwrap();
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        // This one stays stuck until the end of the test.
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        let c = sim.cnt_create(0).unwrap();
        let s0 = sim.create_stream(0).unwrap();
        sim.cnt_record(c, s0, CntRecord::add(5)).unwrap();
        sim.synchronize(s0, acl_notify_core::SyncWait::Forever)
            .unwrap();

        let snap = snapshot(&ns.0, 0).unwrap();
        assert_eq!(snap.soc, Soc::Ascend950PR);
        assert_eq!(snap.devices, 2);
        assert!(snap.problems.is_empty(), "{:?}", snap.problems);
        assert!(
            snap.processes
                .iter()
                .any(|p| p.pid == me && p.alive == Liveness::Alive)
        );
        assert_eq!(snap.device_budgets[1].notifies_in_use, 2);
        assert_eq!(snap.device_budgets[0].cnt_in_use, Some(1));
        assert_eq!(snap.notifies.len(), 2);
        let id = sim.notify_info(n).unwrap().id;
        let ns_ = snap.notifies.iter().find(|x| x.id == id).unwrap();
        assert_eq!(ns_.device, 1);
        assert_eq!(ns_.export, ExportSnap::Whitelist);
        assert_eq!(ns_.owner.pid, me);
        assert_eq!(ns_.owner.alive, Liveness::Alive);
        assert_eq!(
            ns_.holders,
            vec![PidRef {
                pid: me,
                alive: Liveness::Alive
            }]
        );
        assert!(
            ns_.whitelist
                .iter()
                .any(|w| w.pid == dead && w.alive == Liveness::Dead)
        );
        assert!(
            ns_.whitelist
                .iter()
                .any(|w| w.pid == me && w.alive == Liveness::Alive)
        );
        assert_eq!(ns_.last_record.unwrap().by.pid, me);
        // The second wait holds a ticket, and its stream thread is found asleep on the flag.
        let end = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let snap = snapshot(&ns.0, 0).unwrap();
            let x = snap.notifies.iter().find(|x| x.id == id).unwrap();
            if x.waiters == 1 && !x.flag_set && !x.waiting_threads.is_empty() {
                let t = &x.waiting_threads[0];
                assert_eq!(t.pid, me);
                assert!(t.name.starts_with("acl-sim-d1-s"), "{t:?}");
                assert!(
                    snap.to_text()
                        .contains("waiting: stream thread \"acl-sim-d1-s")
                );
                break;
            }
            assert!(
                std::time::Instant::now() < end,
                "the wait was never seen: {x:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(snap.cnt_notifies.len(), 1);
        let cs = &snap.cnt_notifies[0];
        assert_eq!((cs.device, cs.count, cs.owner.pid), (0, 5, me));
        assert_eq!(
            cs.last_record.unwrap().1,
            "ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE"
        );
        let text = snap.to_text();
        for want in [
            format!("pid {dead} (dead)"),
            format!("pid {me} (alive)"),
            "exported (whitelist)".to_owned(),
            "count notifies: 1 live".to_owned(),
        ] {
            assert!(text.contains(&want), "{want:?} missing from\n{text}");
        }
        let json = snap.to_json();
        assert!(json.starts_with('{') && json.ends_with('}'));
        assert!(
            json.contains(&format!(
                "{{\"server\":0,\"pid\":{dead},\"alive\":\"dead\"}}"
            )),
            "{json}"
        );
        // Release the stuck wait (from another stream: `s` is stalled) so the Sim drops
        // cleanly.
        let r = sim.create_stream(1).unwrap();
        sim.record(n, r).unwrap();
        sim.synchronize(s, acl_notify_core::SyncWait::Forever)
            .unwrap();
    }
}

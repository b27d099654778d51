//! Reading a machine: the notify and count-notify files mapped read-only, validated, and
//! turned into a [`MachineSnapshot`].

use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use acl_notify_core::table::{ExportState, MAX_PROCS, NotifySlot, SlotState};
use acl_notify_core::whitelist::Whitelist;
use acl_notify_core::{Error, Soc};

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

use super::procscan::find_sleepers;
use super::*;

const WL_WORDS: usize = std::mem::size_of::<Whitelist>() / 8;
const _: () = assert!(std::mem::size_of::<Whitelist>() == WL_WORDS * 8);
const _: () = assert!(WHITELIST_BYTES == 8 + WL_WORDS * 8);

fn bad(path: &Path, why: impl std::fmt::Display) -> SimError {
    SimError::new(
        Error::DrvInternalError,
        format!("{}: {why}", path.display()),
    )
}

/// A read-only mapping of a whole file.
pub(super) struct RoMap {
    base: *const u8,
    len: usize,
    /// A simulator process that truncates the file while we read it must not kill the
    /// inspector with SIGBUS: the lost pages read as zero and the snapshot is refused.
    pub(super) sigbus: Registration,
}

impl RoMap {
    pub(super) fn open(path: &Path) -> Result<RoMap, SimError> {
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
    pub(super) fn at<T>(&self, off: usize) -> Option<&T> {
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

    let memory = crate::mem::inspect::memory_snapshot(namespace, server).unwrap_or_else(|e| {
        problems.push(format!("device memory: {e}"));
        Vec::new()
    });

    // Pages cut off while we read came back as zeros: what we read is not the file.
    m.sigbus.intact(&path)?;
    Ok(MachineSnapshot {
        memory,
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

//! Device memory in the inspector: for each device-memory file of a namespace, mapped
//! read-only (`MemFileView`), the capacity and what is allocated, and every allocation
//! with its owner, size, and IPC export (range, mode, whitelist) and importers, each process
//! marked alive or gone. Text ([`memory_text`]) and JSON ([`memory_json`]); the inspector
//! ([`crate::inspect`]) shows them below the notifies.
//!
//! Everything is read from memory other processes write: values are clamped or reported in
//! [`DeviceMemorySnap::problems`], never trusted to index anything.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use acl_notify_core::slot::{ExportState, SlotState};

use super::file::{MAX_ALLOCS, MemFileView, owner_of};
use crate::error::SimError;
use crate::inspect::liveness::{Liveness, WhitelistSnap};
use crate::shm::{FILE_PREFIX, SHM_DIR};
use crate::sys;

/// One device's memory.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceMemorySnap {
    /// SuperPod server.
    pub server: u32,
    /// Device.
    pub device: u32,
    /// Bytes of device memory (`ACL_NOTIFY_SIM_DEVICE_MEMORY` of its creator).
    pub capacity: u64,
    /// Bytes the allocations take (their rounded spans).
    pub used: u64,
    /// Live allocations, and freed ones kept for their importers.
    pub allocations: Vec<AllocSnap>,
    /// Entries that could not be read.
    pub problems: Vec<String>,
}

/// One allocation.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocSnap {
    /// Slot id (an IPC key names it).
    pub id: u32,
    /// Incarnation of the slot.
    pub generation: u32,
    /// Offset in the device's arena.
    pub offset: u64,
    /// The size asked for.
    pub size: u64,
    /// The bytes it takes.
    pub span: u64,
    /// Its owner.
    pub owner_pid: i32,
    /// Whether the owner runs.
    pub owner: Liveness,
    /// Freed by its owner (or its owner died), kept while importers hold it.
    pub orphaned: bool,
    /// Its IPC export, if any.
    pub export: Option<ExportSnap>,
    /// Processes that imported it.
    pub importers: Vec<(i32, Liveness)>,
}

/// An allocation's IPC export.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportSnap {
    /// Without PID validation (anyone with the key imports).
    pub open: bool,
    /// The exported range: offset in the allocation and length.
    pub offset: u64,
    /// Length of the exported range.
    pub len: u64,
    /// Whitelisted processes (with PID validation).
    pub whitelist: Vec<WhitelistSnap>,
}

/// The device-memory files of `namespace` on `server`, by device.
pub fn memory_snapshot(namespace: &str, server: u32) -> Result<Vec<DeviceMemorySnap>, SimError> {
    let prefix = format!("{FILE_PREFIX}{namespace}.mem{server}d");
    let mut devices: Vec<u32> = std::fs::read_dir(SHM_DIR)
        .map(|dir| {
            dir.filter_map(Result::ok)
                .filter_map(|e| {
                    let name = e.file_name();
                    name.to_str()?.strip_prefix(&prefix)?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    devices.sort_unstable();
    let mut out = Vec::new();
    for d in devices {
        let path = super::mem_file_path(namespace, server, d);
        if let Some(view) = MemFileView::open(&path)? {
            out.push(device_snap(&view, &path));
        }
    }
    Ok(out)
}

fn alive(pid: i32, start: u64) -> Liveness {
    if sys::pid_alive(pid, start) {
        Liveness::Alive
    } else {
        Liveness::Dead
    }
}

fn device_snap(v: &MemFileView, path: &Path) -> DeviceMemorySnap {
    let (server, device) = v.server_device();
    let mut problems = Vec::new();
    let mut allocations = Vec::new();
    for id in 0..v.high_water().min(MAX_ALLOCS) {
        let Some(s) = v.slot(id) else { break };
        let (generation, state) = (s.generation(), s.state());
        match state {
            Some(SlotState::Free) => continue,
            Some(SlotState::Live | SlotState::Orphaned) => {}
            Some(other) => {
                problems.push(format!(
                    "allocation {id}: left {other:?} (its process died in the middle of an \
                     allocation or free; the next allocation on the device repairs it)"
                ));
                continue;
            }
            None => {
                problems.push(format!("allocation {id}: unknown state"));
                continue;
            }
        }
        let ld = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::SeqCst);
        let (owner_pid, owner_start) = owner_of(s);
        let export = match s.export_state() {
            Some(ExportState::None) => None,
            Some(mode) => {
                let mut whitelist = Vec::new();
                if mode == ExportState::Enforced {
                    match v.whitelist(id).and_then(|w| w.read()) {
                        Some(wl) => whitelist.extend(wl.iter().map(|e| {
                            let snap = WhitelistSnap::new(e.sdid, e.pid, Liveness::Unknown);
                            let alive = if snap.server != server {
                                Liveness::Unknown
                            } else if sys::identity_alive(e.pid, e.start_time, e.identity) {
                                Liveness::Alive
                            } else {
                                Liveness::Dead
                            };
                            WhitelistSnap { alive, ..snap }
                        })),
                        None => problems.push(format!(
                            "allocation {id}: whitelist unreadable (a writer died mid-update?)"
                        )),
                    }
                }
                Some(ExportSnap {
                    open: mode == ExportState::Open,
                    offset: ld(&s.sync.export_off),
                    len: ld(&s.sync.export_len),
                    whitelist,
                })
            }
            None => {
                problems.push(format!("allocation {id}: unknown export state"));
                None
            }
        };
        let importers = s
            .sync
            .importers
            .iter()
            .filter_map(|e| {
                let pid = ld(&e[0]) as u32 as i32;
                (pid != 0).then(|| (pid, alive(pid, ld(&e[1]))))
            })
            .collect();
        allocations.push(AllocSnap {
            id,
            generation,
            offset: ld(&s.sync.off),
            size: ld(&s.sync.size),
            span: ld(&s.sync.span),
            owner_pid,
            owner: alive(owner_pid, owner_start),
            orphaned: state == Some(SlotState::Orphaned),
            export,
            importers,
        });
    }
    if v.high_water() >= MAX_ALLOCS {
        problems.push(format!(
            "{}: every allocation slot used once",
            path.display()
        ));
    }
    DeviceMemorySnap {
        server,
        device,
        capacity: v.capacity(),
        used: v.used(),
        allocations,
        problems,
    }
}

fn pids(list: &[(i32, Liveness)]) -> String {
    let v: Vec<String> = list
        .iter()
        .map(|(p, l)| format!("{p} ({})", l.word()))
        .collect();
    v.join(", ")
}

/// The memory part of the inspector's table: per device, capacity and use, then one line per
/// allocation and, under it, its export and importers.
pub fn memory_text(devices: &[DeviceMemorySnap]) -> String {
    let mut t = String::new();
    if devices.is_empty() {
        t.push_str("device memory: none allocated\n");
        return t;
    }
    for d in devices {
        let _ = writeln!(
            t,
            "device memory, server {} device {}: {} of {} bytes used, {} allocations",
            d.server,
            d.device,
            d.used,
            d.capacity,
            d.allocations.len()
        );
        for a in &d.allocations {
            let _ = writeln!(
                t,
                "  alloc {:>5}  offset {:#x}  size {}  owner {} ({}){}",
                a.id,
                a.offset,
                a.size,
                a.owner_pid,
                a.owner.word(),
                if a.orphaned {
                    "  freed, kept for importers"
                } else {
                    ""
                }
            );
            if let Some(e) = &a.export {
                let who = if e.open {
                    "open (no PID validation)".to_owned()
                } else if e.whitelist.is_empty() {
                    "whitelist empty".to_owned()
                } else {
                    let w: Vec<String> = e
                        .whitelist
                        .iter()
                        .map(|w| format!("{}:{} ({})", w.server, w.pid, w.alive.word()))
                        .collect();
                    format!("whitelist {}", w.join(", "))
                };
                let _ = writeln!(t, "         exported [{}, +{}): {who}", e.offset, e.len);
            }
            if !a.importers.is_empty() {
                let _ = writeln!(t, "         imported by {}", pids(&a.importers));
            }
        }
        for p in &d.problems {
            let _ = writeln!(t, "  problem: {p}");
        }
    }
    t
}

/// The memory part of the inspector's JSON: an array, one object per device.
pub fn memory_json(devices: &[DeviceMemorySnap]) -> Value {
    let who = |l: Liveness| l.word();
    Value::Array(
        devices
            .iter()
            .map(|d| {
                json!({
                    "server": d.server,
                    "device": d.device,
                    "capacity": d.capacity,
                    "used": d.used,
                    "allocations": d.allocations.iter().map(|a| json!({
                        "id": a.id,
                        "generation": a.generation,
                        "offset": a.offset,
                        "size": a.size,
                        "span": a.span,
                        "owner": {"pid": a.owner_pid, "state": who(a.owner)},
                        "orphaned": a.orphaned,
                        "export": a.export.as_ref().map(|e| json!({
                            "open": e.open,
                            "offset": e.offset,
                            "len": e.len,
                            "whitelist": e.whitelist.iter().map(|w| json!({
                                "sdid": w.sdid, "server": w.server, "pid": w.pid,
                                "state": who(w.alive)
                            })).collect::<Vec<_>>(),
                        })),
                        "importers": a.importers.iter().map(|(p, l)| json!({
                            "pid": p, "state": who(*l)
                        })).collect::<Vec<_>>(),
                    })).collect::<Vec<_>>(),
                    "problems": d.problems,
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NamespaceGuard as Ns;
    use crate::Sim;
    use acl_notify_core::Soc;

    /// An owner with two allocations, one exported with a whitelist, the other open and
    /// imported by a child process: the snapshot shows sizes, use, the export's range and
    /// whitelist, and the importer.
    #[test]
    fn shows_allocations_exports_whitelists_and_importers() {
        let ns = Ns(format!("unit-mem-inspect-{}", std::process::id()));
        let sim = Sim::builder()
            .soc(Soc::Ascend910B)
            .devices(2)
            .namespace(&ns.0)
            .device_memory(8 << 20)
            .open()
            .unwrap();
        let a = sim.malloc(0, 1000, 0).unwrap();
        let b = sim.malloc(0, 4096, 0).unwrap();
        sim.ipc_mem_export(a + 200, 500, false).unwrap();
        let kb = sim.ipc_mem_export(b, 4096, true).unwrap();
        let k = sim.ipc_mem_export(a + 200, 500, false).unwrap();
        sim.ipc_mem_set_pids(&k, &[std::process::id() as i32])
            .unwrap();
        // The importer: a forked child (a process does not import its own export), which
        // imports, says so through a pipe, and waits for a byte on the other.
        let (mut up, mut down) = ([0i32; 2], [0i32; 2]);
        // SAFETY: two fresh pipes, written into arrays of two descriptors.
        assert!(unsafe { libc::pipe(up.as_mut_ptr()) == 0 && libc::pipe(down.as_mut_ptr()) == 0 });
        let name = ns.0.clone();
        // SAFETY: the child opens a Sim of its own and `_exit`s; it uses nothing of the
        // parent's but the descriptors.
        let child = unsafe { libc::fork() };
        assert!(child >= 0);
        if child == 0 {
            let ok = Sim::builder()
                .soc(Soc::Ascend910B)
                .devices(2)
                .namespace(&name)
                .device_memory(8 << 20)
                .open()
                .ok()
                .map(|c| (c.ipc_mem_import(0, &kb, false).is_ok(), c));
            let byte = [u8::from(ok.as_ref().is_some_and(|(ok, _)| *ok))];
            let mut sink = [0u8; 1];
            // SAFETY: writes one byte from, and reads at most one byte into, local buffers;
            // then ends the child.
            unsafe {
                libc::write(up[1], byte.as_ptr().cast(), 1);
                libc::read(down[0], sink.as_mut_ptr().cast(), 1);
                libc::_exit(0)
            };
        }
        let mut got = [0u8; 1];
        // SAFETY: reads at most one byte into a local buffer from our pipe.
        let n = unsafe { libc::read(up[0], got.as_mut_ptr().cast(), 1) };
        assert_eq!((n, got[0]), (1, 1), "the child could not import");
        let snap = memory_snapshot(&ns.0, 0).unwrap();
        assert_eq!(snap.len(), 1, "{snap:?}");
        let d = &snap[0];
        assert_eq!((d.server, d.device, d.capacity), (0, 0, 8 << 20));
        assert_eq!(d.used, 1536 + 4608);
        let by_size = |n| d.allocations.iter().find(|a| a.size == n).unwrap();
        let (sa, sb) = (by_size(1000), by_size(4096));
        let e = sa.export.as_ref().unwrap();
        assert_eq!((e.open, e.offset, e.len), (false, 200, 500));
        assert_eq!(e.whitelist.len(), 1);
        assert_eq!(e.whitelist[0].pid, std::process::id() as i32);
        assert!(sb.export.as_ref().unwrap().open);
        assert_eq!(sb.importers.len(), 1);
        assert_eq!(sb.importers[0].1, Liveness::Alive);
        assert_eq!(sa.owner, Liveness::Alive);
        let text = memory_text(&snap);
        assert!(
            text.contains("6144 of 8388608 bytes used, 2 allocations"),
            "{text}"
        );
        assert!(
            text.contains("exported [200, +500): whitelist 0:"),
            "{text}"
        );
        assert!(text.contains("open (no PID validation)"), "{text}");
        assert!(text.contains("imported by"), "{text}");
        let j = memory_json(&snap);
        assert_eq!(j[0]["allocations"].as_array().unwrap().len(), 2);
        assert_eq!(j[0]["used"], 6144);
        // The inspector shows it, text and JSON.
        let m = crate::inspect::snapshot(&ns.0, 0).unwrap();
        assert_eq!(m.memory, snap);
        assert!(
            m.to_text().contains("device memory, server 0 device 0"),
            "{}",
            m.to_text()
        );
        let j: Value = serde_json::from_str(&m.to_json()).unwrap();
        assert_eq!(
            j["memory"][0]["allocations"][1]["importers"][0]["state"],
            "alive"
        );
        // SAFETY: one byte from a local buffer tells the child to end; it is reaped, and our
        // descriptors closed.
        unsafe {
            libc::write(down[1], got.as_ptr().cast(), 1);
            for fd in [up[0], up[1], down[0], down[1]] {
                libc::close(fd);
            }
            libc::waitpid(child, std::ptr::null_mut(), 0);
        }
    }
}

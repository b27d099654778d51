//! Reading a machine: the notify and count-notify files mapped read-only, validated, and
//! turned into a [`MachineSnapshot`].

use std::cell::Cell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::SeqCst;
use std::time::Duration;

use acl_notify_core::Error;
use acl_notify_core::table::{ExportState, MAX_PROCS, SlotState};

use crate::cnt::{CntFile, CntOpen};
use crate::error::SimError;
use crate::mapfile::{Map, Open};
use crate::shm::{self, Header, Layout, P_ALIVE, P_CLAIMING, P_FREE, P_RECLAIMING, SLOT_BYTES};
use crate::sys;

use super::procscan::find_sleepers;
use super::*;

/// Maps the notify file at `path` read-only through the shared-file layer (the checks every
/// opener makes: owner, type, mode, a published header of this layout version) and reads its
/// layout from the header (every field checked as the simulator checks it).
pub(super) fn open_notify_file(path: &Path, server: u32) -> Result<(Map, Layout), SimError> {
    let layout = Cell::new(None);
    let open = Open {
        path,
        kind: shm::KIND,
        create: false,
        writable: false,
        // Learnt from the file, and checked against its header by `Layout::read`.
        total: 0,
        // A reader does not wait for a creator: an unpublished file is reported as it is.
        init_wait: Duration::from_millis(100),
        keep_fd: false,
    };
    let validate = |h: &Header, size| {
        layout.set(Some(Layout::read(h, path, server, size)?));
        Ok(())
    };
    let map = open.open(|_: &Header| {}, validate)?.ok_or_else(|| {
        SimError::new(
            Error::InvalidDeviceId,
            format!(
                "{} does not exist: no process has opened this namespace/server (or it was \
                 removed)",
                path.display()
            ),
        )
    })?;
    let l = layout
        .get()
        .ok_or_else(|| shm::KIND.bad_file(path, "its header was not read"))?;
    Ok((map, l))
}

/// The path of a namespace's notify file for `server` (as the simulator names it).
pub fn notify_file_path(namespace: &str, server: u32) -> PathBuf {
    crate::shm::file_path(namespace, server)
}

/// Every (namespace, server) with a notify file under `/dev/shm`, sorted.
pub fn namespaces() -> Vec<(String, u32)> {
    let mut v: Vec<(String, u32)> = crate::mapfile::sim_files()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.kind == "srv")
        .filter_map(|f| Some((f.namespace, f.number.parse().ok()?)))
        .collect();
    v.sort();
    v
}

/// Takes a read-only snapshot of `namespace`'s machine on `server`.
///
/// Errors: 107001 no such file (nobody opened the namespace); 507899 an unusable file (another
/// layout version, corrupt header, not ours).
pub fn snapshot(namespace: &str, server: u32) -> Result<MachineSnapshot, SimError> {
    let path = notify_file_path(namespace, server);
    let (m, l) = open_notify_file(&path, server)?;
    let now = sys::now_ns();
    let mut problems = Vec::new();

    // Processes.
    let mut procs = Vec::new();
    let mut by_index: HashMap<u32, (i32, u64, Liveness)> = HashMap::new();
    for i in 0..MAX_PROCS {
        let Some(e) = l.proc_entry(&m, i) else {
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
        let in_use = l.pool(&m, dev).map_or(0, |p| p.in_use());
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
        let hw = l
            .device_header(&m, dev)
            .map_or(0, |d| d.high_water.load(SeqCst).min(l.max));
        for id in 0..hw {
            let Some(slot) = l.slot(&m, dev, id) else {
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
            if export == ExportSnap::Whitelist
                && let Some(shared) = l.whitelist(&m, dev, id)
            {
                match shared.read() {
                    Some(wl) => {
                        for e in wl.iter() {
                            let snap = WhitelistSnap::new(e.sdid, e.pid, Liveness::Unknown);
                            whitelist.push(if snap.server == server {
                                WhitelistSnap {
                                    alive: Liveness::of_entry(e.pid, e.start_time, e.identity),
                                    ..snap
                                }
                            } else {
                                snap
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
            let slot_off = l.slot_offset(dev, id).unwrap_or(usize::MAX - SLOT_BYTES);
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
                destroyed_by: slot.destroyed_by(),
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
    m.intact(&path)?;
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

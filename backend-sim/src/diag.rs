//! Self-explaining errors: the facts about a notify that a wait timeout, a refused import or an
//! exhausted device reports in its message (and so in `Display` and, through the C library,
//! `aclGetRecentErrMsg()`): owner and whether it is alive, whitelisted PIDs and which are
//! alive, who recorded last and when, who holds references; and for an exhausted device, who
//! owns its ids.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use acl_notify_core::table::{ExportState, MAX_PROCS, NotifySlot, SlotState};

use crate::shm::ShmFile;
use crate::sys;

fn alive(pid: i32, start_time: u64) -> &'static str {
    if sys::pid_alive(pid, start_time) {
        "alive"
    } else {
        "dead"
    }
}

/// `"; owner pid P (alive); whitelisted: …; last recorded by pid R (alive) 0.123 s ago; held
/// by pid A (alive), pid B (dead)"` for notify `id` on `dev` of `file`.
pub(crate) fn notify_facts(file: &ShmFile, dev: u32, id: u32, slot: &NotifySlot) -> String {
    let mut s = String::new();
    let owner = slot.owner();
    let _ = write!(
        s,
        "; owner pid {} ({})",
        owner.pid,
        alive(owner.pid, owner.start_time)
    );
    match slot.export_state() {
        Some(ExportState::None) => s.push_str("; not exported"),
        Some(ExportState::Open) => s.push_str("; exported without PID validation"),
        Some(ExportState::Enforced) => match file.read_whitelist(dev, id) {
            Some(wl) if wl.is_empty() => s.push_str("; exported, no PID whitelisted yet"),
            Some(wl) => {
                s.push_str("; whitelisted:");
                for (i, e) in wl.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    if e.sdid == file.server() {
                        let _ = write!(s, "{sep}pid {} ({})", e.pid, alive(e.pid, e.start_time));
                    } else {
                        let _ = write!(
                            s,
                            "{sep}pid {} on server {} (liveness unknown)",
                            e.pid, e.sdid
                        );
                    }
                }
            }
            None => s.push_str("; whitelist unreadable"),
        },
        None => s.push_str("; export state corrupt"),
    }
    let (rpid, rns) = slot.last_record();
    if rpid == 0 {
        s.push_str("; never recorded");
    } else {
        let ago = sys::now_ns().saturating_sub(rns) as f64 / 1e9;
        let _ = write!(
            s,
            "; last recorded by pid {rpid} ({}) {ago:.3} s ago",
            alive(rpid, 0)
        );
    }
    let holders = slot.holders();
    let held: Vec<String> = (0..MAX_PROCS)
        .filter(|i| holders & (1u64 << i) != 0)
        .map(|i| {
            let pid = file.proc_pid(i);
            let a = if file.proc_alive(i) { "alive" } else { "dead" };
            format!("pid {pid} ({a})")
        })
        .collect();
    let _ = write!(s, "; held by {}", held.join(", "));
    s
}

/// Who owns the live notifies of `dev` (for a 207009): `"pid 10 (alive) owns 1000, pid 11
/// (dead) owns 24"`, most first, at most eight owners.
pub(crate) fn owners_of_device(file: &ShmFile, dev: u32) -> String {
    let mut owners: BTreeMap<i32, (u32, &'static str)> = BTreeMap::new();
    for id in 0..file.max_notifies() {
        let Some(slot) = file.slot(dev, id) else {
            break;
        };
        if slot.state() != Some(SlotState::Live) {
            continue;
        }
        let o = slot.owner();
        owners
            .entry(o.pid)
            .or_insert((0, alive(o.pid, o.start_time)))
            .0 += 1;
    }
    let mut v: Vec<_> = owners.into_iter().collect();
    v.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    let n = v.len();
    let mut parts: Vec<String> = v
        .iter()
        .take(8)
        .map(|(pid, (count, a))| format!("pid {pid} ({a}) owns {count}"))
        .collect();
    if n > 8 {
        parts.push(format!("{} more owners", n - 8));
    }
    if parts.is_empty() {
        "no live notify found (ids leaked by crashed processes are repaired by gc)".to_owned()
    } else {
        parts.join(", ")
    }
}

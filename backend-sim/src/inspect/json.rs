//! The inspector's JSON report ([`MachineSnapshot::to_json`]): the snapshot as `serde` report
//! structs. The field names are the report's interface (scripts read them): they stay as they
//! are; durations are seconds, rounded as the text report rounds them.

use serde::Serialize;

use super::*;
use crate::waitgraph::Target;

/// A JSON string literal: quotes, backslashes and control characters escaped.
pub fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// `secs` rounded to `digits` decimals.
fn round(secs: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (secs * scale).round() / scale
}

#[derive(Serialize)]
struct Report<'a> {
    namespace: &'a str,
    server: u32,
    file: String,
    soc: &'static str,
    devices: u32,
    processes: Vec<Proc<'a>>,
    device_budgets: Vec<Budget>,
    notifies: Vec<Notify<'a>>,
    cnt_notifies: Vec<Cnt<'a>>,
    streams: Vec<StreamJson<'a>>,
    deadlocks: &'a [String],
    memory: serde_json::Value,
    problems: &'a [String],
}

#[derive(Serialize)]
struct Proc<'a> {
    index: u32,
    pid: i32,
    state: &'static str,
    alive: &'static str,
    label: &'a str,
}

#[derive(Serialize)]
struct Pid {
    pid: i32,
    alive: &'static str,
}

impl From<&PidRef> for Pid {
    fn from(p: &PidRef) -> Pid {
        Pid {
            pid: p.pid,
            alive: p.alive.word(),
        }
    }
}

#[derive(Serialize)]
struct Budget {
    device: u32,
    notifies_in_use: u32,
    notifies_max: u32,
    cnt_in_use: Option<u32>,
    cnt_max: u32,
}

#[derive(Serialize)]
struct Thread<'a> {
    pid: i32,
    tid: i32,
    name: &'a str,
    on: &'static str,
}

fn threads(v: &[WaitingThread]) -> Vec<Thread<'_>> {
    v.iter()
        .map(|t| Thread {
            pid: t.pid,
            tid: t.tid,
            name: &t.name,
            on: t.on,
        })
        .collect()
}

#[derive(Serialize)]
struct Entry {
    sdid: u32,
    server: u32,
    pid: i32,
    alive: &'static str,
}

#[derive(Serialize)]
struct LastRecord {
    pid: i32,
    alive: &'static str,
    ago_s: f64,
}

#[derive(Serialize)]
struct Merged {
    since_last_wait: u32,
    total: u32,
}

#[derive(Serialize)]
struct Notify<'a> {
    device: u32,
    id: u32,
    generation: u32,
    flags: u64,
    export: &'static str,
    flag_set: bool,
    waiters: u32,
    dead_waiters: u32,
    waiting_threads: Vec<Thread<'a>>,
    owner: Pid,
    destroyed_by: Option<i32>,
    holders: Vec<Pid>,
    whitelist: Vec<Entry>,
    last_record: Option<LastRecord>,
    merged_records: Merged,
    diagnosis: Option<String>,
}

#[derive(Serialize)]
struct CntRecord {
    pid: i32,
    alive: &'static str,
    mode: &'static str,
    value: u32,
    ago_s: f64,
}

#[derive(Serialize)]
struct Cnt<'a> {
    device: u32,
    id: u32,
    generation: u32,
    count: u32,
    waiters: u32,
    waiting_threads: Vec<Thread<'a>>,
    owner: Pid,
    last_record: Option<CntRecord>,
}

#[derive(Serialize)]
struct NotifyName {
    server: u32,
    device: u32,
    id: u32,
}

impl From<&Target> for NotifyName {
    fn from(t: &Target) -> NotifyName {
        NotifyName {
            server: t.server,
            device: t.device,
            id: t.id,
        }
    }
}

#[derive(Serialize)]
struct Head {
    notify: NotifyName,
    blocked_s: f64,
    /// `None`: no timeout.
    timeout_s: Option<f64>,
}

#[derive(Serialize)]
struct StreamJson<'a> {
    pid: i32,
    label: &'a str,
    handle: String,
    server: u32,
    device: u32,
    waits_on: Option<Head>,
    queued_records: Vec<NotifyName>,
}

impl MachineSnapshot {
    /// The same as JSON (one object).
    pub fn to_json(&self) -> String {
        let report = Report {
            namespace: &self.namespace,
            server: self.server,
            file: self.path.to_string_lossy().into_owned(),
            soc: self.soc.name(),
            devices: self.devices,
            processes: self
                .processes
                .iter()
                .map(|p| Proc {
                    index: p.index,
                    pid: p.pid,
                    state: p.state,
                    alive: p.alive.word(),
                    label: &p.label,
                })
                .collect(),
            device_budgets: self
                .device_budgets
                .iter()
                .map(|d| Budget {
                    device: d.device,
                    notifies_in_use: d.notifies_in_use,
                    notifies_max: d.notifies_max,
                    cnt_in_use: d.cnt_in_use,
                    cnt_max: d.cnt_max,
                })
                .collect(),
            notifies: self.notifies.iter().map(notify).collect(),
            cnt_notifies: self
                .cnt_notifies
                .iter()
                .map(|c| Cnt {
                    device: c.device,
                    id: c.id,
                    generation: c.generation,
                    count: c.count,
                    waiters: c.waiters,
                    waiting_threads: threads(&c.waiting_threads),
                    owner: (&c.owner).into(),
                    last_record: c.last_record.map(|(p, mode, value, ago)| CntRecord {
                        pid: p.pid,
                        alive: p.alive.word(),
                        mode,
                        value,
                        ago_s: round(ago.as_secs_f64(), 6),
                    }),
                })
                .collect(),
            streams: self
                .streams
                .iter()
                .map(|v| StreamJson {
                    pid: v.pid,
                    label: &v.label,
                    handle: format!("{:#x}", v.handle),
                    server: v.server,
                    device: v.device,
                    waits_on: v.head.map(|h| Head {
                        notify: (&h.target).into(),
                        blocked_s: round(h.blocked_ns as f64 / 1e9, 3),
                        timeout_s: (h.timeout_ms != u64::MAX)
                            .then(|| round(h.timeout_ms as f64 / 1e3, 3)),
                    }),
                    queued_records: v.queued.iter().map(NotifyName::from).collect(),
                })
                .collect(),
            deadlocks: &self.deadlocks,
            memory: crate::mem::inspect::memory_json(&self.memory),
            problems: &self.problems,
        };
        // Serialising these plain structs (strings, numbers, options) cannot fail; an error
        // here would be a bug, reported as a JSON string rather than a panic.
        serde_json::to_string(&report)
            .unwrap_or_else(|e| json_str(&format!("the report could not be serialised: {e}")))
    }
}

fn notify(n: &NotifySnap) -> Notify<'_> {
    Notify {
        device: n.device,
        id: n.id,
        generation: n.generation,
        flags: n.flags.bits(),
        export: n.export.word(),
        flag_set: n.flag_set,
        waiters: n.waiters,
        dead_waiters: n.dead_waiters,
        waiting_threads: threads(&n.waiting_threads),
        owner: (&n.owner).into(),
        destroyed_by: n.destroyed_by,
        holders: n.holders.iter().map(Pid::from).collect(),
        whitelist: n
            .whitelist
            .iter()
            .map(|w| Entry {
                sdid: w.sdid,
                server: w.server,
                pid: w.pid,
                alive: w.alive.word(),
            })
            .collect(),
        last_record: n.last_record.map(|r| LastRecord {
            pid: r.by.pid,
            alive: r.by.alive.word(),
            ago_s: round(r.ago.as_secs_f64(), 6),
        }),
        merged_records: Merged {
            since_last_wait: n.merged.since_wait,
            total: n.merged.total,
        },
        diagnosis: n.diagnosis(),
    }
}

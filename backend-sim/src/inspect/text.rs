//! The inspector's text report ([`MachineSnapshot::to_text`]).

use std::fmt::Write as _;
use std::time::Duration;

use super::*;

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
            if let Some(pid) = n.destroyed_by {
                let _ = writeln!(s, "       {}", destroyed_text(pid));
            }
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
        s.push('\n');
        s.push_str(&crate::mem::inspect::memory_text(&self.memory));
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
}

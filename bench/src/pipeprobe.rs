//! Diagnostic probe of the pipeline case (`ACL_NOTIFY_BENCH_PIPE_PROBE=1`; off, it costs one
//! bool test a sample): per sample, each thread of this process's CPU time, migrations and
//! context switches (from `/proc/self/task/*/sched`), the CPU it was last on, the CPUs the
//! host thread was on at each chunk, and each CPU's idle share over the sample (the sum of
//! `/sys/devices/system/cpu/cpuN/cpuidle/state*/time`, µs; else `/proc/stat`'s idle ticks,
//! 10 ms each: coarse), printed to stderr beside the sample's rate.

use std::collections::BTreeMap;

#[derive(Clone, Copy, Default, Debug)]
struct T {
    run_ns: f64,
    migr: u64,
    vcs: u64,
    ics: u64,
    cpu: i64,
}

fn read_task(tid: &str) -> Option<T> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
    let mut t = T::default();
    for l in s.lines() {
        let mut it = l.split(':');
        let (Some(k), Some(v)) = (it.next(), it.next()) else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "se.sum_exec_runtime" => t.run_ns = v.parse::<f64>().unwrap_or(0.0) * 1e6,
            "se.nr_migrations" => t.migr = v.parse().unwrap_or(0),
            "nr_voluntary_switches" => t.vcs = v.parse().unwrap_or(0),
            "nr_involuntary_switches" => t.ics = v.parse().unwrap_or(0),
            _ => {}
        }
    }
    let st = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let rest = &st[st.rfind(')')? + 2..];
    // Field 39 (processor) is the 37th after the comm's closing parenthesis.
    t.cpu = rest.split(' ').nth(36)?.parse().ok()?;
    Some(t)
}

fn snapshot() -> BTreeMap<u32, T> {
    let mut m = BTreeMap::new();
    if let Ok(d) = std::fs::read_dir("/proc/self/task") {
        for e in d.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let (Ok(tid), Some(t)) = (n.parse::<u32>(), read_task(&n)) {
                m.insert(tid, t);
            }
        }
    }
    m
}

/// Idle time of each CPU so far (ns), by CPU number.
fn idle_ns() -> Vec<u64> {
    let mut out = Vec::new();
    for cpu in 0.. {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle");
        let Ok(states) = std::fs::read_dir(&dir) else {
            break;
        };
        let us: u64 = states
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("time")).ok())
            .filter_map(|t| t.trim().parse::<u64>().ok())
            .sum();
        out.push(us * 1000);
    }
    if !out.is_empty() {
        return out;
    }
    let Ok(text) = std::fs::read_to_string("/proc/stat") else {
        return out;
    };
    for line in text.lines().skip(1) {
        let Some(rest) = line.strip_prefix("cpu") else {
            break;
        };
        let f: Vec<u64> = rest
            .split_whitespace()
            .skip(1)
            .filter_map(|x| x.parse().ok())
            .collect();
        out.push(f.get(3).copied().unwrap_or(0) * 10_000_000);
    }
    out
}

/// One sample's probe.
pub struct Probe {
    before: BTreeMap<u32, T>,
    idle: Vec<u64>,
    host_cpu: [u32; 4],
}

impl Probe {
    pub fn enabled() -> bool {
        std::env::var_os("ACL_NOTIFY_BENCH_PIPE_PROBE").is_some()
    }

    pub fn start() -> Probe {
        Probe {
            before: snapshot(),
            idle: idle_ns(),
            host_cpu: [0; 4],
        }
    }

    /// The host thread's CPU now (once a chunk).
    pub fn chunk(&mut self) {
        // SAFETY: no arguments; returns the CPU or -1.
        let c = unsafe { libc::sched_getcpu() };
        self.host_cpu[(c.clamp(0, 3)) as usize] += 1;
    }

    pub fn end(self, rate: f64, dt_ns: u64) {
        let after = snapshot();
        let idle: Vec<String> = idle_ns()
            .iter()
            .zip(&self.idle)
            .map(|(a, b)| format!("{:.0}%", a.saturating_sub(*b) as f64 / dt_ns as f64 * 100.0))
            .collect();
        // SAFETY: no arguments.
        let me = unsafe { libc::gettid() } as u32;
        let mut line = format!(
            "probe rate {:.2} M dt {:.1} ms cpus idle {} host chunks on cpu0/1 {}/{} |",
            rate / 1e6,
            dt_ns as f64 / 1e6,
            idle.join("/"),
            self.host_cpu[0],
            self.host_cpu[1]
        );
        for (tid, a) in &after {
            let b = self.before.get(tid).copied().unwrap_or_default();
            let run = (a.run_ns - b.run_ns) / dt_ns as f64 * 100.0;
            if a.vcs == b.vcs && a.ics == b.ics && run < 0.1 {
                continue;
            }
            line += &format!(
                " {}{}: run {:.1}% migr {} vcs {} ics {} cpu {} |",
                if *tid == me { "HOST " } else { "" },
                tid,
                run,
                a.migr - b.migr,
                a.vcs - b.vcs,
                a.ics - b.ics,
                a.cpu
            );
        }
        eprintln!("{line}");
    }
}

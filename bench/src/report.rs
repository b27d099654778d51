//! Output: the printed tables (median, min, max, and each case's ratio to each baseline), the
//! target verdicts, and the result files (`results.json`, `results.csv`).

use std::fmt::Write as _;
use std::path::Path;

use crate::harness::{Better, GroupResult, Kind};

/// A single measured quantity that is not a timed, interleaved sample (sizes, memory).
#[derive(Clone, Debug)]
pub struct Fact {
    /// Section it belongs to.
    pub section: &'static str,
    /// What it is.
    pub name: String,
    /// The value (`None` if it could not be measured).
    pub value: Option<f64>,
    /// Unit.
    pub unit: &'static str,
    /// How it was obtained, or why it is missing.
    pub note: String,
}

/// A target's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The figures of this run meet it.
    Met,
    /// They do not.
    Missed,
    /// A figure it needs is missing (variant skipped or broken).
    NotMeasured,
    /// A retired target, kept as information: the figure is shown, nothing is judged.
    Info,
    /// Its figures would meet it, but the group ran in a slow stretch of the machine (its
    /// floor read well above the run's best, or the run's best above what this machine's
    /// CPUs do): a baseline slowed by the machine flatters the case, so no verdict.
    Unjudged,
}

impl Verdict {
    /// The tag printed before the target.
    pub fn tag(self) -> &'static str {
        match self {
            Verdict::Met => "met",
            Verdict::Missed => "MISSED",
            Verdict::NotMeasured => "not measured",
            Verdict::Info => "info",
            Verdict::Unjudged => "unjudged",
        }
    }
}

/// One target of the issue, judged on this run's figures.
#[derive(Clone, Debug)]
pub struct TargetResult {
    /// The target, in words.
    pub name: String,
    /// Met, missed, not measured.
    pub verdict: Verdict,
    /// The figures behind the verdict.
    pub detail: String,
    /// For an [`Unjudged`](Verdict::Unjudged) verdict, the group to measure again.
    pub group: Option<String>,
}

/// Formats a value with a precision suited to its size.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// Prints one group's table to stdout.
pub fn print_group(g: &GroupResult) {
    let reps = g.reps;
    let better = match g.better {
        Better::Lower => "lower is better",
        Better::Higher => "higher is better",
    };
    println!();
    println!(
        "== [{}] {} — {} ({better}); {reps} interleaved reps, {:.1} s ==",
        g.id,
        g.title,
        g.unit,
        g.wall.as_secs_f64()
    );
    let cases: Vec<_> = g
        .variants
        .iter()
        .filter(|v| v.kind == Kind::Case)
        .filter_map(|v| v.summary().map(|s| (v.name.as_str(), s.median)))
        .collect();
    let has_baselines = g.variants.iter().any(|v| v.kind == Kind::Baseline);
    let ratio_cols = if has_baselines { cases.len() } else { 0 };
    let mut head = format!(
        "  {:<44} {:<8} {:>10} {:>10} {:>10} {:>9}",
        "variant", "kind", "median", "min", "max", "iters"
    );
    for i in 0..ratio_cols {
        let _ = write!(head, " {:>10}", format!("[c{}]÷this", i + 1));
    }
    println!("{head}");
    for v in &g.variants {
        let mut line = format!("  {:<44} {:<8}", v.name, v.kind.name());
        if let Some(s) = v.summary() {
            let _ = write!(
                line,
                " {:>10} {:>10} {:>10} {:>9}",
                num(s.median),
                num(s.min),
                num(s.max),
                v.iters
            );
            if v.kind == Kind::Baseline {
                for (_, c) in cases.iter().take(ratio_cols) {
                    let _ = write!(line, " {:>10}", format!("{}×", num(c / s.median)));
                }
            }
        }
        if let Some(e) = &v.error {
            let _ = write!(line, "  BROKEN: {e}");
        }
        if let Some(why) = &v.skipped {
            let _ = write!(line, "  skipped: {why}");
        }
        println!("{line}");
    }
    for (i, (name, _)) in cases.iter().enumerate().take(ratio_cols) {
        println!("  [c{}] = {name}", i + 1);
    }
    if !g.note.is_empty() {
        println!("  note: {}", g.note);
    }
}

/// Prints the facts (sizes, memory).
pub fn print_facts(facts: &[Fact]) {
    if facts.is_empty() {
        return;
    }
    println!();
    println!("== [memory] Memory and sizes (single measurements) ==");
    for f in facts {
        match f.value {
            Some(v) => println!("  {:<58} {:>14} {:<6} {}", f.name, num(v), f.unit, f.note),
            None => println!("  {:<58} {:>14} {:<6} {}", f.name, "—", "", f.note),
        }
    }
}

/// Prints the target verdicts.
pub fn print_targets(targets: &[TargetResult]) {
    println!();
    println!("== Targets (issues #6 and #25), judged on this run's medians ==");
    for t in targets {
        println!("  [{:<12}] {}", t.verdict.tag(), t.name);
        println!("                 {}", t.detail);
    }
    let met = targets.iter().filter(|t| t.verdict == Verdict::Met).count();
    let missed = targets
        .iter()
        .filter(|t| t.verdict == Verdict::Missed)
        .count();
    let info = targets
        .iter()
        .filter(|t| t.verdict == Verdict::Info)
        .count();
    let unjudged = targets
        .iter()
        .filter(|t| t.verdict == Verdict::Unjudged)
        .count();
    let nm = targets.len() - met - missed - info - unjudged;
    println!(
        "  {met} met, {missed} missed, {unjudged} unjudged (baseline unstable), {nm} not \
         measured ({info} retired, shown as info)"
    );
}

/// Conditions of the run, recorded in the files and printed in the header.
#[derive(Clone, Debug)]
pub struct Conditions {
    /// `quick` or `full`.
    pub mode: &'static str,
    /// Repetitions per variant.
    pub reps: usize,
    /// Per-sample time budget (ms).
    pub sample_ms: u64,
    /// Online CPUs.
    pub cpus: usize,
    /// 1-minute load average and runnable tasks at the start.
    pub load_start: (f64, u32),
    /// The same at the end.
    pub load_end: (f64, u32),
    /// Unix time at the start.
    pub started_unix: u64,
    /// Total wall time (s).
    pub wall_s: f64,
}

/// A tiny JSON value, enough for the result file.
enum J {
    Null,
    Num(f64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(&'static str, J)>),
}

impl J {
    fn opt(x: Option<f64>) -> J {
        x.map_or(J::Null, J::Num)
    }
    fn s(x: impl Into<String>) -> J {
        J::Str(x.into())
    }
    fn opt_s(x: &Option<String>) -> J {
        x.as_ref().map_or(J::Null, |s| J::Str(s.clone()))
    }
    fn write(&self, out: &mut String, indent: usize) {
        let pad = "  ".repeat(indent);
        match self {
            J::Null => out.push_str("null"),
            J::Num(x) if x.is_finite() => {
                let _ = write!(out, "{x}");
            }
            J::Num(_) => out.push_str("null"),
            J::Str(s) => {
                out.push('"');
                for c in s.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(out, "\\u{:04x}", c as u32);
                        }
                        c => out.push(c),
                    }
                }
                out.push('"');
            }
            J::Arr(v) => {
                if v.is_empty() {
                    out.push_str("[]");
                    return;
                }
                out.push_str("[\n");
                for (i, x) in v.iter().enumerate() {
                    out.push_str(&pad);
                    out.push_str("  ");
                    x.write(out, indent + 1);
                    out.push_str(if i + 1 < v.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad);
                out.push(']');
            }
            J::Obj(v) => {
                out.push_str("{\n");
                for (i, (k, x)) in v.iter().enumerate() {
                    let _ = write!(out, "{pad}  \"{k}\": ");
                    x.write(out, indent + 1);
                    out.push_str(if i + 1 < v.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad);
                out.push('}');
            }
        }
    }
}

/// Writes `results.json` and `results.csv` into `dir` (created if needed).
pub fn write_files(
    dir: &Path,
    cond: &Conditions,
    groups: &[GroupResult],
    facts: &[Fact],
    targets: &[TargetResult],
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let better = |b: Better| match b {
        Better::Lower => "lower",
        Better::Higher => "higher",
    };
    let doc = J::Obj(vec![
        (
            "conditions",
            J::Obj(vec![
                ("mode", J::s(cond.mode)),
                ("reps", J::Num(cond.reps as f64)),
                ("sample_budget_ms", J::Num(cond.sample_ms as f64)),
                ("cpus", J::Num(cond.cpus as f64)),
                ("loadavg1_start", J::Num(cond.load_start.0)),
                ("runnable_start", J::Num(cond.load_start.1 as f64)),
                ("loadavg1_end", J::Num(cond.load_end.0)),
                ("runnable_end", J::Num(cond.load_end.1 as f64)),
                ("started_unix", J::Num(cond.started_unix as f64)),
                ("wall_s", J::Num(cond.wall_s)),
            ]),
        ),
        (
            "groups",
            J::Arr(
                groups
                    .iter()
                    .map(|g| {
                        J::Obj(vec![
                            ("id", J::s(g.id)),
                            ("title", J::s(g.title.clone())),
                            ("unit", J::s(g.unit)),
                            ("better", J::s(better(g.better))),
                            ("note", J::s(g.note.clone())),
                            (
                                "variants",
                                J::Arr(
                                    g.variants
                                        .iter()
                                        .map(|v| {
                                            let s = v.summary();
                                            J::Obj(vec![
                                                ("name", J::s(v.name.clone())),
                                                ("kind", J::s(v.kind.name())),
                                                ("iters", J::Num(v.iters as f64)),
                                                ("median", J::opt(s.map(|s| s.median))),
                                                ("min", J::opt(s.map(|s| s.min))),
                                                ("max", J::opt(s.map(|s| s.max))),
                                                (
                                                    "samples",
                                                    J::Arr(
                                                        v.samples
                                                            .iter()
                                                            .map(|&x| J::Num(x))
                                                            .collect(),
                                                    ),
                                                ),
                                                ("error", J::opt_s(&v.error)),
                                                ("skipped", J::opt_s(&v.skipped)),
                                            ])
                                        })
                                        .collect(),
                                ),
                            ),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "facts",
            J::Arr(
                facts
                    .iter()
                    .map(|f| {
                        J::Obj(vec![
                            ("section", J::s(f.section)),
                            ("name", J::s(f.name.clone())),
                            ("value", J::opt(f.value)),
                            ("unit", J::s(f.unit)),
                            ("note", J::s(f.note.clone())),
                        ])
                    })
                    .collect(),
            ),
        ),
        (
            "targets",
            J::Arr(
                targets
                    .iter()
                    .map(|t| {
                        J::Obj(vec![
                            ("target", J::s(t.name.clone())),
                            ("verdict", J::s(t.verdict.tag())),
                            ("detail", J::s(t.detail.clone())),
                        ])
                    })
                    .collect(),
            ),
        ),
    ]);
    let mut json = String::new();
    doc.write(&mut json, 0);
    json.push('\n');
    let jp = dir.join("results.json");
    std::fs::write(&jp, json).map_err(|e| format!("{}: {e}", jp.display()))?;

    let mut csv = String::from("group,variant,kind,unit,better,median,min,max,reps,iters,status\n");
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    for g in groups {
        for v in &g.variants {
            let s = v.summary();
            let f = |x: Option<f64>| x.map(|x| format!("{x}")).unwrap_or_default();
            let status = match (&v.error, &v.skipped) {
                (Some(e), _) => format!("broken: {e}"),
                (None, Some(w)) => format!("skipped: {w}"),
                (None, None) => "ok".into(),
            };
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{},{},{},{},{}",
                g.id,
                q(&v.name),
                v.kind.name(),
                q(g.unit),
                better(g.better),
                f(s.map(|s| s.median)),
                f(s.map(|s| s.min)),
                f(s.map(|s| s.max)),
                v.samples.len(),
                v.iters,
                q(&status)
            );
        }
    }
    for fct in facts {
        let _ = writeln!(
            csv,
            "memory,{},fact,{},lower,{},,,1,,{}",
            q(&fct.name),
            q(fct.unit),
            fct.value.map(|x| format!("{x}")).unwrap_or_default(),
            q(&fct.note)
        );
    }
    let cp = dir.join("results.csv");
    std::fs::write(&cp, csv).map_err(|e| format!("{}: {e}", cp.display()))?;
    Ok(())
}

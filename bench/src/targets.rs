//! The targets, judged on the medians of this run (ratios from the same run only).

use crate::capi::{self, Op};
use crate::groups::rows;
use crate::harness::GroupResult;
use crate::pingpong::Mech;
use crate::report::{Fact, TargetResult, Verdict, num};

/// Idle CPU below this share of one core counts as "near zero".
const IDLE_CPU_MAX_PCT: f64 = 1.0;

/// How much the pool's worst-pattern cost may grow from 1,024 to 65,535 ids and still count
/// as bounded: the working set grows 64× (L1 → L2), so some growth is the cache, while any
/// scan over the ids would grow about 64×.
const POOL_GROWTH_MAX: f64 = 3.0;

/// The row of `id` that did better — `base`, or the same with its threads placed (if that
/// row exists and ran) — and its median. `lower` says which way is better. Used for
/// baselines, and for the idle wake-up's case, which is measured in both placements too.
fn best_placement(
    groups: &[GroupResult],
    id: &str,
    base: &str,
    placed: &str,
    lower: bool,
) -> Result<(String, f64), String> {
    let plain = median(groups, id, base)?;
    let has_placed = group(groups, id)
        .ok()
        .and_then(|g| g.variant(placed))
        .is_some_and(|v| v.error.is_none() && v.skipped.is_none());
    if has_placed {
        let p = median(groups, id, placed)?;
        if (lower && p < plain) || (!lower && p > plain) {
            return Ok((placed.to_owned(), p));
        }
    }
    Ok((base.to_owned(), plain))
}

/// The result of group `id`, if it ran.
fn group<'a>(groups: &'a [GroupResult], id: &str) -> Result<&'a GroupResult, String> {
    groups
        .iter()
        .find(|g| g.id == id)
        .ok_or_else(|| format!("group {id} not run"))
}

fn median(groups: &[GroupResult], id: &str, row: &str) -> Result<f64, String> {
    let g = group(groups, id)?;
    let v = g
        .variant(row)
        .ok_or_else(|| format!("no row `{row}` in {id}"))?;
    if let Some(e) = &v.error {
        return Err(format!("`{row}` broke: {e}"));
    }
    if let Some(w) = &v.skipped {
        return Err(format!("`{row}` skipped: {w}"));
    }
    g.median(row)
        .ok_or_else(|| format!("`{row}` has no samples"))
}

/// The smallest sample of a row: the least-disturbed repetition on a shared machine.
fn best(groups: &[GroupResult], id: &str, row: &str) -> Option<f64> {
    group(groups, id)
        .ok()
        .and_then(|g| g.variant(row))
        .and_then(|v| v.summary())
        .map(|s| s.min)
}

/// How far apart a row's fastest and slowest repetitions may be before a ratio against it is
/// flagged as resting on an unsteady row.
const UNSTEADY: f64 = 10.0;

/// `"; <row> unsteady: …"` when the row's repetitions spread over more than [`UNSTEADY`]×
/// (e.g. a baseline that fell into sleeping wake-ups in some repetitions): the verdict then
/// says more about the machine than about the code.
fn steadiness(groups: &[GroupResult], id: &str, row: &str) -> String {
    group(groups, id)
        .ok()
        .and_then(|g| g.variant(row))
        .and_then(|v| v.summary())
        .filter(|s| s.min > 0.0 && s.max / s.min > UNSTEADY)
        .map(|s| {
            format!(
                "; `{row}` unsteady (repetitions from {} to {}): treat this verdict with care",
                num(s.min),
                num(s.max)
            )
        })
        .unwrap_or_default()
}

fn judge_one(name: String, figures: Result<(bool, String), String>, out: &mut Vec<TargetResult>) {
    out.push(match figures {
        Ok((ok, detail)) => TargetResult {
            name,
            verdict: if ok { Verdict::Met } else { Verdict::Missed },
            detail,
        },
        Err(why) => TargetResult {
            name,
            verdict: Verdict::NotMeasured,
            detail: why,
        },
    });
}

/// A retired target (issue #25): its figures are shown, as information, with what the old
/// verdict would have been.
fn info_one(name: String, figures: Result<(bool, String), String>, out: &mut Vec<TargetResult>) {
    out.push(match figures {
        Ok((ok, detail)) => TargetResult {
            name: format!("(retired) {name}"),
            verdict: Verdict::Info,
            detail: format!("{detail}; would be {}", if ok { "met" } else { "missed" }),
        },
        Err(why) => TargetResult {
            name: format!("(retired) {name}"),
            verdict: Verdict::Info,
            detail: why,
        },
    });
}

/// All targets.
pub fn judge(groups: &[GroupResult], _facts: &[Fact]) -> Vec<TargetResult> {
    let mut out = Vec::new();
    for (gid, case, label, limit) in [
        ("xproc", rows::XPROC, "Cross-process", 1.5),
        ("inproc", rows::INPROC, "In-process", 2.0),
    ] {
        judge_one(
            format!(
                "{label} round trip, default settings, host(s) feeding: within {limit}× the \
                 spin-then-futex hybrid"
            ),
            (|| {
                let c = median(groups, gid, case)?;
                let (hrow, h) = best_placement(
                    groups,
                    gid,
                    Mech::Hybrid.name(),
                    &rows::placed(Mech::Hybrid.name()),
                    true,
                )?;
                let r = c / h;
                // On a loaded machine the hybrid drops out of its spin phase and both sides
                // pay for sleeping wake-ups; the fastest repetitions show the spinning regime.
                let bests = best(groups, gid, case)
                    .zip(best(groups, gid, &hrow))
                    .map(|(c, h)| {
                        format!(
                            "; fastest reps: {} vs {} ns = {}×",
                            num(c),
                            num(h),
                            num(c / h)
                        )
                    })
                    .unwrap_or_default();
                let shaky = steadiness(groups, gid, &hrow);
                Ok((
                    r <= limit,
                    format!(
                        "notify {} ns vs `{hrow}` {} ns = {}× (limit {limit}×){bests}{shaky}",
                        num(c),
                        num(h),
                        num(r)
                    ),
                ))
            })(),
            &mut out,
        );
        for m in [Mech::EventFd, Mech::Sem] {
            info_one(
                format!("{label} round trip ≥ 50× faster than {}", m.name()),
                (|| {
                    let c = median(groups, gid, case)?;
                    let placed = rows::placed(m.name());
                    let (brow, b) = best_placement(groups, gid, m.name(), &placed, true)?;
                    let r = b / c;
                    // The verdict takes the baseline's faster placement. When that is the
                    // kernel's, which can put both sides on one CPU taking turns, the figure
                    // with each side on a CPU of its own (as our case runs) is shown too.
                    let alike = if brow == placed {
                        String::new()
                    } else {
                        median(groups, gid, &placed)
                            .map(|p| {
                                format!(
                                    "; with each side on a CPU of its own, as ours runs: \
                                     `{placed}` {} ns = {}×",
                                    num(p),
                                    num(p / c)
                                )
                            })
                            .unwrap_or_default()
                    };
                    Ok((
                        r >= 50.0,
                        format!(
                            "`{}` {} ns / notify {} ns = {}× faster (needs ≥ 50×){alike}",
                            brow,
                            num(b),
                            num(c),
                            num(r)
                        ),
                    ))
                })(),
                &mut out,
            );
        }
    }
    judge_one(
        "Idle-waiter wake-up within 1.2× of a raw futex wake".into(),
        (|| {
            // Each side in its faster placement: as the kernel places it, or on one CPU.
            let (crow, c) = best_placement(groups, "wake", rows::WAKE, rows::WAKE_ONE_CPU, true)?;
            let (brow, b) = best_placement(
                groups,
                "wake",
                rows::WAKE_FUTEX,
                rows::WAKE_FUTEX_ONE_CPU,
                true,
            )?;
            let r = c / b;
            let shaky = steadiness(groups, "wake", &brow);
            Ok((
                r <= 1.2,
                format!(
                    "`{crow}` {} ns vs `{brow}` {} ns = {}× (limit 1.2×){shaky}",
                    num(c),
                    num(b),
                    num(r)
                ),
            ))
        })(),
        &mut out,
    );
    judge_one(
        "Handoff throughput, default settings, host feeding: ≥ 50% of the hybrid's lossless \
         handoffs"
            .into(),
        (|| {
            let c = median(groups, "handoff", rows::HANDOFF)?;
            let (brow, b) = best_placement(
                groups,
                "handoff",
                rows::HANDOFF_HYBRID,
                rows::HANDOFF_HYBRID_PLACED,
                false,
            )?;
            let r = c / b;
            let shaky = steadiness(groups, "handoff", &brow);
            Ok((
                r >= 0.5,
                format!(
                    "notify {} M/s vs `{brow}` {} M/s = {}% (needs ≥ 50%){shaky}",
                    num(c),
                    num(b),
                    num(r * 100.0)
                ),
            ))
        })(),
        &mut out,
    );
    info_one(
        "Id pool under 10 ns per alloc+free pair (65,535 ids, every pattern)".into(),
        (|| {
            let g = group(groups, "pool")?;
            let mut worst: Option<(f64, &str)> = None;
            for v in g
                .variants
                .iter()
                .filter(|v| v.kind == crate::harness::Kind::Case)
            {
                let m = median(groups, "pool", &v.name)?;
                if worst.is_none_or(|(w, _)| m > w) {
                    worst = Some((m, &v.name));
                }
            }
            let (w, name) = worst.ok_or("no pool rows")?;
            Ok((
                w < 10.0,
                format!("worst: {name} {} ns/pair (limit 10)", num(w)),
            ))
        })(),
        &mut out,
    );
    judge_one(
        format!(
            "Id pool worst case bounded (worst patterns at 65,535 ids ≤ {POOL_GROWTH_MAX}× \
             the same at 1,024)"
        ),
        (|| {
            let mut parts = Vec::new();
            let mut ok = true;
            for pool in ["AtomicIdPool", "IdPool"] {
                for pat in crate::poolbench::WORST_PATTERNS {
                    let big = median(groups, "pool", &format!("{pool}<65535> {pat}"))?;
                    let small = median(groups, "pool", &format!("{pool}<1024> {pat}"))?;
                    let r = big / small;
                    ok &= r <= POOL_GROWTH_MAX;
                    parts.push(format!("{pool} {pat} {}×", num(r)));
                }
            }
            Ok((ok, parts.join(", ")))
        })(),
        &mut out,
    );
    for op in Op::ALL {
        judge_one(
            format!("C ABI overhead < 10%: {}", op.name()),
            (|| {
                let (crow, rrow) = (capi::c_row(op), capi::rust_row(op));
                let c = median(groups, op.id(), &crow)?;
                let r = median(groups, op.id(), &rrow)?;
                let g = group(groups, op.id())?;
                // Judged on the per-repetition pairs (see `paired_ratio`); the ratio of the
                // two medians is printed next to it.
                let paired = g
                    .paired_ratio(&crow, &rrow)
                    .ok_or("the two rows do not have a sample of every repetition")?;
                let o = (paired - 1.0) * 100.0;
                Ok((
                    o < 10.0,
                    format!(
                        "{:+.1}% over {} paired repetitions (limit +10%); medians C {} µs vs \
                         Rust {} µs = {:+.1}%",
                        o,
                        g.reps,
                        num(c),
                        num(r),
                        (c / r - 1.0) * 100.0
                    ),
                ))
            })(),
            &mut out,
        );
    }
    load_targets(groups, &mut out);
    judge_one(
        format!("An idle waiting stream burns < {IDLE_CPU_MAX_PCT}% of a core"),
        (|| {
            let c = median(groups, "idlecpu", rows::IDLE)?;
            Ok((
                c < IDLE_CPU_MAX_PCT,
                format!(
                    "{}% of one core while waiting (limit {IDLE_CPU_MAX_PCT}%)",
                    num(c)
                ),
            ))
        })(),
        &mut out,
    );
    out
}

/// Issue #25's targets for what users get under load: the enqueue, the pipeline and the ring.
fn load_targets(groups: &[GroupResult], out: &mut Vec<TargetResult>) {
    judge_one(
        format!("Enqueue into a running stream ≤ {ENQUEUE_MAX_NS} ns"),
        (|| {
            let c = median(groups, "enqueue", rows::ENQUEUE)?;
            Ok((
                c <= ENQUEUE_MAX_NS,
                format!("{} ns per record call (limit {ENQUEUE_MAX_NS})", num(c)),
            ))
        })(),
        out,
    );
    judge_one(
        format!(
            "4-stream pipeline, one ready/free pair per link: ≥ {} M items/s",
            PIPELINE_MIN / 1e6
        ),
        (|| {
            let c = median(groups, "pipeline", rows::PIPELINE)?;
            // The threads' floor, for the reader: the target itself is absolute.
            let floor = [rows::PIPELINE_HYBRID, rows::PIPELINE_FUTEX]
                .into_iter()
                .filter_map(|row| median(groups, "pipeline", row).ok())
                .reduce(f64::max)
                .map(|b| {
                    format!(
                        "; the same protocol on 4 threads with no host, the faster of hybrid \
                         and futex flags: {} items/s (notify = {}× that)",
                        num(b),
                        num(c / b)
                    )
                })
                .unwrap_or_default();
            Ok((
                c >= PIPELINE_MIN,
                format!("{} items/s (needs ≥ {}){floor}", num(c), num(PIPELINE_MIN)),
            ))
        })(),
        out,
    );
    let cpus = std::thread::available_parallelism().map_or(1, |c| c.get());
    for n in crate::ring::RANKS {
        let gid = crate::groups::ring_id(n);
        let (case, sem) = (rows::ring(n), rows::ring_sem(n));
        judge_one(
            format!("Ring of {n} processes: ≤ 1.0× the POSIX-semaphore ring"),
            (|| {
                let c = median(groups, gid, &case)?;
                let b = median(groups, gid, &sem)?;
                let shaky = steadiness(groups, gid, &sem);
                Ok((
                    c <= b,
                    format!(
                        "notify {} ns vs semaphores {} ns per round = {}×{shaky}",
                        num(c),
                        num(b),
                        num(c / b)
                    ),
                ))
            })(),
            out,
        );
        if n <= cpus {
            judge_one(
                format!("Ring of {n} processes (≤ {cpus} CPUs): ≥ 3× faster than semaphores"),
                (|| {
                    let c = median(groups, gid, &case)?;
                    let b = median(groups, gid, &sem)?;
                    Ok((
                        b / c >= 3.0,
                        format!(
                            "semaphores {} ns / notify {} ns = {}× faster (needs ≥ 3×)",
                            num(b),
                            num(c),
                            num(b / c)
                        ),
                    ))
                })(),
                out,
            );
        }
    }
}

/// Issue #25: an enqueue into a running stream, in nanoseconds.
const ENQUEUE_MAX_NS: f64 = 50.0;

/// Issue #25: the 4-stream pipeline, in items per second.
const PIPELINE_MIN: f64 = 2e6;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::{Better, Kind, VariantResult};
    use std::time::Duration;

    fn group(samples: Vec<f64>) -> GroupResult {
        GroupResult {
            id: "g",
            title: String::new(),
            unit: "ns",
            better: Better::Lower,
            variants: vec![row("hybrid".into(), Kind::Baseline, samples)],
            note: String::new(),
            wall: Duration::ZERO,
            reps: 0,
        }
    }

    #[test]
    fn a_row_whose_repetitions_spread_widely_is_flagged() {
        let steady = [group(vec![130.0, 139.0, 150.0])];
        assert_eq!(steadiness(&steady, "g", "hybrid"), "");
        let shaky = [group(vec![130.0, 139.0, 42_000.0])];
        let note = steadiness(&shaky, "g", "hybrid");
        assert!(note.contains("unsteady"), "{note}");
        assert!(note.contains("42,000") || note.contains("42000"), "{note}");
        // Rows that are missing say nothing.
        assert_eq!(steadiness(&shaky, "g", "nope"), "");
    }

    fn row(name: String, kind: Kind, samples: Vec<f64>) -> VariantResult {
        VariantResult {
            name,
            kind,
            iters: 1,
            samples,
            error: None,
            skipped: None,
        }
    }

    /// The 50× verdicts of one in-process group whose eventfd rows read `kernel` and `placed`
    /// ns against our 200 ns (semaphores missing: not measured).
    fn fifty_times(kernel: f64, placed: f64) -> TargetResult {
        let g = GroupResult {
            id: "inproc",
            title: String::new(),
            unit: "ns",
            better: Better::Lower,
            variants: vec![
                row(rows::INPROC.into(), Kind::Case, vec![200.0]),
                row(Mech::EventFd.name().into(), Kind::Baseline, vec![kernel]),
                row(
                    rows::placed(Mech::EventFd.name()),
                    Kind::Baseline,
                    vec![placed],
                ),
            ],
            note: String::new(),
            wall: Duration::ZERO,
            reps: 1,
        };
        judge(&[g], &[])
            .into_iter()
            .find(|t| t.name == "(retired) In-process round trip ≥ 50× faster than eventfd")
            .expect("the eventfd target is judged")
    }

    #[test]
    fn a_fifty_times_verdict_takes_the_faster_placement_and_shows_the_other() {
        // The kernel's placement is the faster baseline: judged on it, and the placement like
        // ours is shown next to it.
        let t = fifty_times(6_000.0, 30_000.0);
        assert_eq!(t.verdict, Verdict::Info, "{}", t.detail);
        assert!(t.detail.ends_with("would be missed"), "{}", t.detail);
        assert!(t.detail.contains("= 30.0× faster"), "{}", t.detail);
        assert!(t.detail.contains("as ours runs"), "{}", t.detail);
        assert!(t.detail.contains("= 150×"), "{}", t.detail);
        // The placed baseline is the faster one: judged on it, nothing more to show.
        let t = fifty_times(40_000.0, 30_000.0);
        assert_eq!(t.verdict, Verdict::Info, "{}", t.detail);
        assert!(t.detail.ends_with("would be met"), "{}", t.detail);
        assert!(t.detail.contains("= 150× faster"), "{}", t.detail);
        assert!(!t.detail.contains("as ours runs"), "{}", t.detail);
    }
}

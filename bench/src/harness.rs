//! The interleaved runner: a [`Group`] holds one or more cases (ours) and their baselines;
//! every variant is calibrated once, then the variants take turns (A, B1, B2, …, A, B1, …) for
//! several repetitions, so that slow phases of a shared machine hit all of them alike.

use std::time::{Duration, Instant};

/// What a variant is, for the table and the ratios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Our implementation: ratios are computed against every baseline.
    Case,
    /// An operating-system (or reference) mechanism: the yardstick.
    Baseline,
    /// Shown for context; neither compared nor a yardstick.
    Info,
    /// The machine's own floor (a raw spin round trip between two CPUs), sampled in every
    /// round of a judged group: not compared, but it tells whether the group ran in one of
    /// the machine's slow stretches (see `targets`' guard).
    Floor,
}

impl Kind {
    /// The word used in the table and the result files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Case => "case",
            Kind::Baseline => "baseline",
            Kind::Info => "info",
            Kind::Floor => "floor",
        }
    }
}

/// Which direction of the unit is good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Latencies, costs, sizes.
    Lower,
    /// Throughputs.
    Higher,
}

/// How many iterations one sample runs.
#[derive(Clone, Copy, Debug)]
pub enum Iters {
    /// Always this many (slow events such as sleeping wake-ups).
    Fixed(u64),
    /// A probe run of `probe` iterations estimates the cost per iteration; samples then run as
    /// many as fit the per-sample time budget, clamped to `min..=max`.
    Scaled {
        /// Iterations of the probe run.
        probe: u64,
        /// Fewest iterations of a sample.
        min: u64,
        /// Most iterations of a sample.
        max: u64,
    },
}

/// One sample's function: runs `iters` iterations, returns the value in the group's unit.
pub type RunFn = Box<dyn FnMut(u64) -> Result<f64, String>>;

/// One thing being measured.
pub struct Variant {
    /// Row name.
    pub name: String,
    /// Case, baseline or info.
    pub kind: Kind,
    iters: Iters,
    run: Option<RunFn>,
    skipped: Option<String>,
}

impl std::fmt::Debug for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variant")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Variant {
    /// A variant measured by `run`.
    pub fn new(
        name: impl Into<String>,
        kind: Kind,
        iters: Iters,
        run: impl FnMut(u64) -> Result<f64, String> + 'static,
    ) -> Variant {
        Variant {
            name: name.into(),
            kind,
            iters,
            run: Some(Box::new(run)),
            skipped: None,
        }
    }

    /// A variant that cannot run in this build (e.g. the simulator is not available yet).
    pub fn skipped(name: impl Into<String>, kind: Kind, why: impl Into<String>) -> Variant {
        Variant {
            name: name.into(),
            kind,
            iters: Iters::Fixed(0),
            run: None,
            skipped: Some(why.into()),
        }
    }
}

/// A case and its baselines, measured interleaved.
#[derive(Debug)]
pub struct Group {
    /// Short id used in result files and targets.
    pub id: &'static str,
    /// Heading.
    pub title: String,
    /// Unit of every value in the group.
    pub unit: &'static str,
    /// Which direction is good.
    pub better: Better,
    /// Variants, in table order.
    pub variants: Vec<Variant>,
    /// A line printed under the table (method, caveats).
    pub note: String,
    /// Fewest repetitions this group runs, whatever the plan says (0: the plan's). For cheap
    /// groups whose target sits close to the noise of one repetition.
    pub min_reps: usize,
}

/// How a group is run.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    /// Repetitions of each variant.
    pub reps: usize,
    /// Target wall time of one sample of a scaled variant.
    pub sample_budget: Duration,
}

/// The outcome of one variant.
#[derive(Clone, Debug)]
pub struct VariantResult {
    /// Row name.
    pub name: String,
    /// Case, baseline or info.
    pub kind: Kind,
    /// Iterations per sample.
    pub iters: u64,
    /// One value per repetition, in run order.
    pub samples: Vec<f64>,
    /// Set when a sample failed (the benchmark itself broke).
    pub error: Option<String>,
    /// Set when the variant could not run in this build.
    pub skipped: Option<String>,
}

impl VariantResult {
    /// Median, min and max of the samples, if any.
    pub fn summary(&self) -> Option<Summary> {
        Summary::of(&self.samples)
    }
}

/// Median, min, max of a sample set.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    /// The median.
    pub median: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
}

impl Summary {
    /// `None` for an empty set.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let median = if n % 2 == 1 {
            s[n / 2]
        } else {
            (s[n / 2 - 1] + s[n / 2]) / 2.0
        };
        Some(Summary {
            median,
            min: s[0],
            max: s[n - 1],
        })
    }
}

/// The outcome of a group.
#[derive(Clone, Debug)]
pub struct GroupResult {
    /// Short id.
    pub id: &'static str,
    /// Heading.
    pub title: String,
    /// Unit.
    pub unit: &'static str,
    /// Which direction is good.
    pub better: Better,
    /// Per-variant outcomes, in table order.
    pub variants: Vec<VariantResult>,
    /// Note printed under the table.
    pub note: String,
    /// Wall time the group took.
    pub wall: Duration,
    /// Repetitions run (rounds of the interleaving).
    pub reps: usize,
}

impl GroupResult {
    /// The median of the variant named `name`, if it produced samples.
    pub fn median(&self, name: &str) -> Option<f64> {
        self.variants
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.summary())
            .map(|s| s.median)
    }

    /// The variant named `name`.
    pub fn variant(&self, name: &str) -> Option<&VariantResult> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The median over repetitions of `a`'s sample divided by `b`'s sample of the same
    /// repetition. In a group of two variants, run A B, B A, …, the two samples of a
    /// repetition are taken back to back, so a machine that is slower for a few seconds slows
    /// both and leaves their ratio alone, where the ratio of two medians can take its
    /// numerator from a slow stretch and its denominator from a fast one. `None` unless both
    /// have a sample of every repetition.
    pub fn paired_ratio(&self, a: &str, b: &str) -> Option<f64> {
        let (a, b) = (self.variant(a)?, self.variant(b)?);
        if a.samples.len() != b.samples.len() || a.samples.is_empty() {
            return None;
        }
        let ratios: Vec<f64> = a
            .samples
            .iter()
            .zip(&b.samples)
            .map(|(x, y)| x / y)
            .collect();
        Summary::of(&ratios).map(|s| s.median)
    }
}

/// Calibrates every variant, then runs `plan.reps` interleaved rounds.
pub fn run(mut group: Group, plan: Plan) -> GroupResult {
    let start = Instant::now();
    eprintln!("  [{}] {}", group.id, group.title);
    let mut results: Vec<VariantResult> = group
        .variants
        .iter()
        .map(|v| VariantResult {
            name: v.name.clone(),
            kind: v.kind,
            iters: 0,
            samples: Vec::new(),
            error: None,
            skipped: v.skipped.clone(),
        })
        .collect();

    // Calibration (doubles as warm-up: code paths, page faults, thread stacks).
    for (v, r) in group.variants.iter_mut().zip(results.iter_mut()) {
        let Some(run) = v.run.as_mut() else { continue };
        let iters = match v.iters {
            Iters::Fixed(n) => {
                // A short warm-up for fixed-count variants too.
                if let Err(e) = run(n.clamp(1, 3)) {
                    r.error = Some(e);
                    continue;
                }
                n
            }
            Iters::Scaled { probe, min, max } => {
                let t = Instant::now();
                match run(probe) {
                    Ok(_) => {
                        let per = t.elapsed().as_nanos() as f64 / probe as f64;
                        let want = plan.sample_budget.as_nanos() as f64 / per.max(1.0);
                        (want as u64).clamp(min, max)
                    }
                    Err(e) => {
                        r.error = Some(e);
                        continue;
                    }
                }
            }
        };
        r.iters = iters;
    }

    // Interleaved repetitions, in table order on even rounds and in reverse on odd ones
    // (A B, B A, …): a machine that speeds up or slows down over a round then favours no
    // variant by its place in the round, and a variant's sample of round `i` and its
    // neighbour's stay back to back (the pairing `paired_ratio` reads).
    let n = group.variants.len();
    let reps = plan.reps.max(group.min_reps);
    for rep in 0..reps {
        for step in 0..n {
            let i = if rep % 2 == 0 { step } else { n - 1 - step };
            let (v, r) = (&mut group.variants[i], &mut results[i]);
            if r.error.is_some() {
                continue;
            }
            let Some(run) = v.run.as_mut() else { continue };
            match run(r.iters) {
                Ok(x) if x.is_finite() => r.samples.push(x),
                Ok(x) => r.error = Some(format!("non-finite sample {x}")),
                Err(e) => r.error = Some(e),
            }
        }
    }
    for r in &results {
        if let Some(e) = &r.error {
            eprintln!("    ! {}: {e}", r.name);
        }
    }
    GroupResult {
        id: group.id,
        title: group.title,
        unit: group.unit,
        better: group.better,
        variants: results,
        note: group.note,
        wall: start.elapsed(),
        reps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// A variant that logs its name each time it is sampled and returns `value`.
    fn logged(name: &'static str, log: &Rc<RefCell<Vec<&'static str>>>, value: f64) -> Variant {
        let log = Rc::clone(log);
        Variant::new(name, Kind::Case, Iters::Fixed(1), move |_| {
            log.borrow_mut().push(name);
            Ok(value)
        })
    }

    #[test]
    fn rounds_alternate_order_and_min_reps_wins_over_the_plan() {
        let log = Rc::new(RefCell::new(Vec::new()));
        let group = Group {
            id: "t",
            title: String::new(),
            unit: "ns",
            better: Better::Lower,
            variants: vec![logged("a", &log, 2.0), logged("b", &log, 1.0)],
            note: String::new(),
            min_reps: 4,
        };
        let plan = Plan {
            reps: 2,
            sample_budget: Duration::from_millis(1),
        };
        let r = run(group, plan);
        assert_eq!(r.reps, 4);
        // One warm-up call each (fixed-count variants), then A B, B A, A B, B A.
        assert_eq!(
            *log.borrow(),
            ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]
        );
        assert_eq!(r.variant("a").map(|v| v.samples.len()), Some(4));
        assert_eq!(r.paired_ratio("a", "b"), Some(2.0));
    }

    #[test]
    fn paired_ratio_is_the_median_of_per_repetition_ratios() {
        let row = |name: &str, samples: Vec<f64>| VariantResult {
            name: name.into(),
            kind: Kind::Case,
            iters: 1,
            samples,
            error: None,
            skipped: None,
        };
        let mut g = GroupResult {
            id: "t",
            title: String::new(),
            unit: "ns",
            better: Better::Lower,
            // Per repetition: 1.1, 1.05, 1.0 (a slow stretch in the middle slows both rows).
            variants: vec![
                row("c", vec![110.0, 210.0, 100.0]),
                row("r", vec![100.0, 200.0, 100.0]),
            ],
            note: String::new(),
            wall: Duration::ZERO,
            reps: 3,
        };
        let p = g.paired_ratio("c", "r").unwrap();
        assert!((p - 1.05).abs() < 1e-12, "{p}");
        // The ratio of the medians would read 110 / 100 here.
        assert_eq!(g.median("c"), Some(110.0));
        assert_eq!(g.paired_ratio("c", "missing"), None);
        g.variants[1].samples.pop();
        assert_eq!(g.paired_ratio("c", "r"), None, "unequal sample counts");
    }
}

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
}

impl Kind {
    /// The word used in the table and the result files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Case => "case",
            Kind::Baseline => "baseline",
            Kind::Info => "info",
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

    // Interleaved repetitions.
    for _rep in 0..plan.reps {
        for (v, r) in group.variants.iter_mut().zip(results.iter_mut()) {
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
    }
}

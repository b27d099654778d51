//! `acl-notify-bench`: acl-notify's latency, throughput, control-plane and memory costs next
//! to the operating system's own mechanisms, measured interleaved in one run.
//!
//! Run through `cargo xtask bench` (release build, C library built first). Options:
//!
//! ```text
//! acl-notify-bench [--quick] [--reps N] [--sample-ms N] [--only ID,ID…] [--match TEXT]
//!                  [--out DIR] [--capi PATH/libascendcl.so|none] [--remeasure N]
//! ```
//!
//! Group ids: `xproc`, `inproc`, `enqueue`, `pipeline`, `ring`, `wake`, `idlecpu`, `handoff`, `control`, `pool`, `copy`, `memory`.
//! `ring-busy` (info rows, selected with `ring` or on its own) runs at the end, after every
//! judged group and its re-measures (`groups::LAST`).
//! The process exits 0 unless a benchmark itself broke (a failed call, a lost message, a
//! watchdog timeout); slow figures and missed targets never fail it. Internally the binary
//! re-executes itself as `acl-notify-bench --role <name> …` for child processes.

mod capi;
mod child;
mod cleanup;
mod copy;
mod enqueue;
mod groups;
mod handoff;
mod harness;
mod notify;
mod pingpong;
mod pipeline;
mod pipeprobe;
mod poolbench;
mod report;
mod ring;
mod sys;
mod targets;
mod wake;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use harness::Plan;
use report::Conditions;

/// Every group id, in run order.
const GROUPS: [&str; 12] = [
    "xproc", "inproc", "enqueue", "pipeline", "ring", "wake", "idlecpu", "handoff", "control",
    "pool", "copy", "memory",
];

/// Parsed command line of the driver.
#[derive(Debug)]
struct Opts {
    quick: bool,
    reps: usize,
    sample_ms: u64,
    only: Vec<String>,
    matching: Option<String>,
    out: PathBuf,
    capi: Option<PathBuf>,
    remeasure: usize,
}

const USAGE: &str = "usage: acl-notify-bench [--quick] [--reps N] [--sample-ms N] \
[--only ID,ID…] [--match TEXT] [--out DIR] [--capi PATH] [--remeasure N]
  --quick        short run (a few seconds): fewer reps, shorter samples
  --reps N       repetitions of each variant (default 11, quick 3)
  --sample-ms N  target duration of one sample (default 80, quick 15)
  --only IDS     run only these groups: xproc,inproc,enqueue,pipeline,ring,wake,idlecpu,handoff,control,pool,copy,memory
                 (`ring` also runs `ring-busy`, the info group of rings beside busy threads, at
                 the run's end; `ring-busy` alone runs only that)
  --match TEXT   run only the variants whose name contains TEXT (for profiling one variant)
  --out DIR      where results.json / results.csv go (default target/acl-notify/bench)
  --capi PATH    the C library to measure the C ABI through (default: next to this binary;
                 `none` skips the C ABI rows)
  --remeasure N  measure a judged group again, up to N times, while its floor says the
                 machine was in a slow stretch and a verdict is withheld (default 1, quick 0)";

fn parse(args: &[String]) -> Result<Opts, String> {
    let mut quick = false;
    let mut reps = None;
    let mut sample_ms = None;
    let mut only = Vec::new();
    let mut matching = None;
    let mut out = None;
    let mut capi = None;
    let mut remeasure = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--quick" => quick = true,
            "--reps" => {
                reps = Some(
                    val("--reps")?
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or("--reps: a number ≥ 1")?,
                )
            }
            "--sample-ms" => {
                sample_ms = Some(
                    val("--sample-ms")?
                        .parse::<u64>()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or("--sample-ms: a number ≥ 1")?,
                )
            }
            "--only" => {
                for id in val("--only")?.split(',') {
                    if !GROUPS.contains(&id) && !groups::LAST.iter().any(|&(l, _)| l == id) {
                        return Err(format!("unknown group `{id}`"));
                    }
                    only.push(id.to_string());
                }
            }
            "--match" => matching = Some(val("--match")?),
            "--out" => out = Some(PathBuf::from(val("--out")?)),
            "--capi" => capi = Some(PathBuf::from(val("--capi")?)),
            "--remeasure" => {
                remeasure = Some(
                    val("--remeasure")?
                        .parse::<usize>()
                        .ok()
                        .filter(|&n| n <= 5)
                        .ok_or("--remeasure: a number from 0 to 5")?,
                )
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument `{other}`")),
        }
    }
    Ok(Opts {
        quick,
        reps: reps.unwrap_or(if quick { 3 } else { 11 }),
        sample_ms: sample_ms.unwrap_or(if quick { 15 } else { 80 }),
        only,
        matching,
        out: out.unwrap_or_else(default_out),
        capi,
        remeasure: remeasure.unwrap_or(if quick { 0 } else { 1 }),
    })
}

/// `<target dir>/acl-notify/bench`, the target dir being the one this binary was built in.
fn default_out() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // …/target/release/acl-notify-bench → …/target
    exe.parent()
        .and_then(|p| p.parent())
        .map(|t| t.join("acl-notify").join("bench"))
        .unwrap_or_else(|| PathBuf::from("target/acl-notify/bench"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--role") {
        return role_main(&args[1..]);
    }
    // SAFETY: nothing has started a thread yet.
    unsafe { capi::set_env() };
    // Before any other thread: the signals it waits for must be blocked in all of them.
    // SAFETY: still the only thread.
    let _files = match unsafe { cleanup::RunFiles::start() } {
        Ok(f) => f,
        Err(e) => {
            eprintln!("acl-notify-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    let (dead, files) = cleanup::sweep_dead_runs();
    if files > 0 {
        eprintln!(
            "  (removed {files} shared files that killed bench runs left in /dev/shm: pids {dead:?})"
        );
    }
    let opts = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("acl-notify-bench: {e}");
            }
            eprintln!("{USAGE}");
            return if e.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    match run(&opts) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("acl-notify-bench: some benchmarks broke (see BROKEN rows above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("acl-notify-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A child process: `--role <name> --key value …`. Prints its results on stdout.
fn role_main(args: &[String]) -> ExitCode {
    cleanup::unblock_in_child();
    sys::die_with_parent();
    let Some(role) = args.first() else {
        eprintln!("--role needs a name");
        return ExitCode::from(2);
    };
    let r = child::RoleArgs::parse(&args[1..]).and_then(|a| groups::role(role, &a));
    match r {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("acl-notify-bench role {role}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs group `g` (only the variants `--match` names, none if it names none) and prints its
/// table.
fn run_group(mut g: harness::Group, opts: &Opts, plan: Plan) -> Option<harness::GroupResult> {
    if let Some(m) = &opts.matching {
        g.variants.retain(|v| v.name.contains(m.as_str()));
        if g.variants.is_empty() {
            return None;
        }
    }
    let r = harness::run(g, plan);
    report::print_group(&r);
    Some(r)
}

/// Runs the selected groups; `Ok(false)` if a benchmark broke.
fn run(opts: &Opts) -> Result<bool, String> {
    let t0 = Instant::now();
    let started_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let load_start = sys::load();
    let plan = Plan {
        reps: opts.reps,
        sample_budget: Duration::from_millis(opts.sample_ms),
    };
    let mode = if opts.quick { "quick" } else { "full" };
    println!(
        "acl-notify-bench: {mode} run, {} reps per variant, ~{} ms per sample, {cpus} CPUs, \
         load average {:.2} ({} runnable) at start",
        plan.reps, opts.sample_ms, load_start.0, load_start.1
    );
    if load_start.0 > 0.5 * cpus as f64 {
        println!(
            "  note: the machine is busy (load {:.2} on {cpus} CPUs): figures are noisy; \
             ratios within the run stay meaningful because variants are interleaved",
            load_start.0
        );
    }
    let selected = |id: &str| opts.only.is_empty() || opts.only.iter().any(|o| o == id);
    let ctx = groups::Ctx::new(opts.quick, opts.capi.clone());

    let mut results = Vec::new();
    let mut facts = Vec::new();
    for id in GROUPS {
        if !selected(id) {
            continue;
        }
        if id == "memory" {
            eprintln!("  [memory] sizes and resident memory");
            facts = groups::memory(&ctx);
            continue;
        }
        for g in groups::build(id, &ctx) {
            if let Some(r) = run_group(g, opts, plan) {
                results.push(r);
            }
        }
    }
    report::print_facts(&facts);
    let mut targets = targets::judge(&results, &facts);
    // The groups whose verdicts were withheld because the machine was in a slow stretch
    // (`targets::unsteady_floor`) are measured again, at the end of the run; the targets
    // then take their last measurement, and the floor's best over every one.
    for attempt in 1..=opts.remeasure {
        let mut again: Vec<String> = targets.iter().filter_map(|t| t.group.clone()).collect();
        again.sort();
        again.dedup();
        if again.is_empty() {
            break;
        }
        println!();
        println!(
            "== measuring {} again (attempt {attempt} of {}): the floor says the machine was in a \
             slow stretch, and a verdict was withheld ==",
            again.join(", "),
            opts.remeasure
        );
        for id in &again {
            let parent = id.split('.').next().unwrap_or(id);
            for mut g in groups::build(parent, &ctx) {
                if g.id != id.as_str() {
                    continue;
                }
                g.title = format!("{} (measured again, attempt {attempt})", g.title);
                if let Some(r) = run_group(g, opts, plan) {
                    results.push(r);
                }
            }
        }
        targets = targets::judge(&results, &facts);
    }
    // The info groups that could change how fast a row after them runs come last, after every
    // judged group and its re-measures (`groups::LAST`). They have no target.
    for (id, with) in groups::LAST {
        if !(selected(id) || selected(with)) {
            continue;
        }
        for g in groups::build(id, &ctx) {
            if let Some(r) = run_group(g, opts, plan) {
                results.push(r);
            }
        }
    }
    report::print_targets(&targets);

    let cond = Conditions {
        mode,
        reps: plan.reps,
        sample_ms: opts.sample_ms,
        cpus,
        load_start,
        load_end: sys::load(),
        started_unix,
        wall_s: t0.elapsed().as_secs_f64(),
    };
    println!();
    println!(
        "run took {:.1} s; load average {:.2} ({} runnable) at the end",
        cond.wall_s, cond.load_end.0, cond.load_end.1
    );
    report::write_files(&opts.out, &cond, &results, &facts, &targets)?;
    println!(
        "results: {} and results.csv",
        opts.out.join("results.json").display()
    );
    let broken = results
        .iter()
        .flat_map(|g| g.variants.iter())
        .any(|v| v.error.is_some());
    Ok(!broken)
}

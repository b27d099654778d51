//! `cargo xtask ci-long`: the checks too slow for every `cargo xtask test` — loom model
//! checking of the shared-memory protocols with a higher preemption bound, the core's unit
//! tests under Miri, each fuzz target for minutes, a longer stress run with faults, and the
//! conformance suite against each broken simulator of `tests/src/fault.rs` (every one must be
//! caught by at least one case), and the demo's timeline page drawn by a headless browser.
//! Each step has a hard deadline; every step runs, then failures are summarised.
//!
//! Also the loom and Miri steps on their own, for `cargo xtask test` to call
//! ([`loom`], [`miri`]).

use std::time::Duration;

use argh::FromArgs;

use crate::fuzz::{FuzzArgs, nightly_cargo, run_with_deadline};
use crate::run::{Steps, cargo, root, status};
use crate::stress::StressArgs;

/// Run the long reliability checks: loom, Miri, minutes of fuzzing per target, a long stress
/// run with faults.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "ci-long")]
pub struct CiLongArgs {
    /// loom preemption bound (default 3)
    #[argh(option, default = "3")]
    pub preemptions: u32,
    /// seconds of fuzzing per target (default 600)
    #[argh(option, default = "600")]
    pub fuzz_seconds: u64,
    /// stress runs (default 40)
    #[argh(option, default = "40")]
    pub stress_runs: u32,
    /// skip the Miri step
    #[argh(switch)]
    pub no_miri: bool,
    /// run only this step: loom, miri, fuzz, stress, faults or timeline
    #[argh(option)]
    pub only: Option<String>,
}

/// Core unit tests too slow under Miri (an interpreter ~1000× slower than native): the
/// 65535-, 8192- and 2048-id pools filled to the brim three times (the 1024-id one takes 15 s,
/// the 2048-id one over 10 minutes), thread hammering with tens of thousands of rounds, the
/// 60 s stress of the notify table, and the exhaustive one-character key tampering (64 × 15
/// parses × 20 keys). Their logic is the same as the smaller tests that do run (the 1024-id
/// pools, the double-free race, every table test).
pub const MIRI_SKIP: [&str; 6] = [
    "pool_65535",
    "pool_8192",
    "pool_2048",
    "hammered",
    "stress_no_lost_or_double_consumption",
    "any_single_character_change_is_rejected",
];

pub fn ci_long(a: &CiLongArgs) -> Result<(), String> {
    const STEPS: [&str; 6] = ["loom", "miri", "fuzz", "stress", "faults", "timeline"];
    if let Some(o) = &a.only
        && !STEPS.contains(&o.as_str())
    {
        return Err(format!(
            "unknown step `{o}`: expected one of {}",
            STEPS.join(", ")
        ));
    }
    let want = |s: &str| a.only.as_deref().is_none_or(|o| o == s);
    let mut steps = Steps::default();
    if want("loom") {
        steps.run(
            &format!("loom (preemption bound {})", a.preemptions),
            || loom(a.preemptions),
        );
    }
    if want("miri") && !a.no_miri {
        steps.run("miri: core unit tests", miri);
    }
    if want("fuzz") {
        steps.run(&format!("fuzz ({} s per target)", a.fuzz_seconds), || {
            crate::fuzz::fuzz(&FuzzArgs {
                seconds: a.fuzz_seconds,
                smoke: false,
                target: None,
            })
        });
    }
    if want("faults") {
        steps.run("conformance suite against broken simulators", faults);
    }
    if want("timeline") {
        steps.run(
            "the demo's timeline drawn in headless chromium",
            crate::timeline::ci_step,
        );
    }
    if !want("stress") {
        return steps.finish("ci-long");
    }
    steps.run(&format!("stress ({} runs)", a.stress_runs), || {
        crate::stress::stress(&StressArgs {
            processes: 4,
            streams: 2,
            notifies: 4,
            handoffs: 20000,
            faults: 2,
            runs: a.stress_runs,
            seed: None,
            timeout: 240,
        })
    });
    steps.finish("ci-long")
}

/// How long (wall seconds) the simulator's stream queue models may explore at a preemption
/// bound of 3 or more ([`ring_model_env`]).
const RING_MODEL_SECONDS: u64 = 900;

/// The simulator's stream queue models (`ring::loom_tests`), each time-boxed to
/// [`RING_MODEL_SECONDS`] at a bound of 3 or more.
const RING_MODELS: u64 = 7;

/// The simulator's models of a stream turn's hand-overs (`stream::baton::loom_tests`), run
/// and time-boxed with the ring's.
const BATON_MODELS: u64 = 2;

/// The test filters of the simulator's loom models.
const SIM_MODEL_FILTERS: [&str; 2] = ["ring::loom_tests::", "stream::baton::loom_tests::"];

/// The loom limits of the simulator's stream queue models at `preemptions`, beyond the bound
/// itself. Up to 2, none: the models are explored in full (about half a second of CPU at 2).
/// At 3, the three-thread model (`no_task_lost_or_reordered_and_no_lost_wake_up`, two
/// producers and the worker's sleep handshake) has executions of more than loom's default
/// 1,000 branches, which fails the model; with the limit at 100,000 it ran 15 minutes of CPU
/// (2026-12-05) without finishing and without a failure. So at 3 and over the exploration is
/// time-boxed: [`RING_MODEL_SECONDS`] per model, then the model passes with what was explored
/// (not exhaustive; a failure found before is still a failure).
fn ring_model_env(preemptions: u32) -> Vec<(&'static str, String)> {
    let mut env = vec![("LOOM_MAX_PREEMPTIONS", preemptions.to_string())];
    if preemptions >= 3 {
        env.push(("LOOM_MAX_BRANCHES", "100000".into()));
        env.push(("LOOM_MAX_DURATION", RING_MODEL_SECONDS.to_string()));
    }
    env
}

/// One of the two loom builds: the simulator's stream queue and turn models
/// (`backend-sim/src/ring.rs`, `backend-sim/src/stream/baton.rs`; [`SIM_MODEL_FILTERS`];
/// `--cfg sim_loom`: under `--cfg loom` the core's atomics become loom's, which the simulator
/// is not written for), and the models of `core/tests/loom.rs` (`--cfg loom`). Release
/// builds, each in a target directory of its own so that neither RUSTFLAGS rebuilds the
/// other's build or the normal one. Its tests and its clippy ([`loom_build`]) are commands of
/// the same build.
struct LoomBuild {
    package: &'static str,
    /// The targets the models are in.
    tests: &'static [&'static str],
    /// The targets clippy lints: the models', and what the cfg leaves unused around them.
    lints: &'static [&'static str],
    rustflags: &'static str,
    target_dir: std::path::PathBuf,
}

/// The simulator's loom build, then the core's ([`LoomBuild`]).
fn loom_builds() -> [LoomBuild; 2] {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => std::path::PathBuf::from(d).join("loom"),
        None => root().join("target").join("loom"),
    };
    [
        LoomBuild {
            package: "acl-notify-sim",
            tests: &["--lib"],
            lints: &["--lib", "--tests"],
            rustflags: "--cfg sim_loom",
            target_dir: target.with_file_name("loom-sim"),
        },
        LoomBuild {
            package: "acl-notify-core",
            tests: &["--test", "loom"],
            lints: &["--test", "loom"],
            rustflags: "--cfg loom",
            target_dir: target,
        },
    ]
}

impl LoomBuild {
    /// `cargo <sub> --release -p <package> <targets> --target-dir <its dir>` under its cfg.
    fn command(&self, sub: &str, targets: &[&str]) -> std::process::Command {
        let mut c = cargo();
        c.args([sub, "--release", "-p", self.package])
            .args(targets)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .env("RUSTFLAGS", self.rustflags);
        c
    }
}

/// The loom models' test commands, built ([`loom_build`]) or run ([`loom`]) alike: the
/// simulator's, then the core's ([`loom_builds`]).
fn loom_commands() -> [std::process::Command; 2] {
    loom_builds().map(|b| b.command("test", b.tests))
}

/// Builds what [`loom`] runs, without running it: clippy of each loom build (warnings are
/// errors), then both models' test binaries. `cargo xtask test` runs it beside its workspace
/// tests ([`crate::run::Steps::beside`]); the loom step then only runs the models.
///
/// The workspace's clippy step never sees `--cfg sim_loom` or `--cfg loom`: what the
/// simulator's models leave unused (the prefetch, the tests' push) and `core/tests/loom.rs`
/// with the core's `cfg(loom)` code (a `forget_non_drop` there went unseen through session
/// 22) are linted only here. In the release profile and target directory of the models'
/// build: the proc macros and build scripts both need are built once (neither crate has
/// `cfg(debug_assertions)` code for the profile to hide from the lints).
pub fn loom_build() -> Result<(), String> {
    for b in loom_builds() {
        let mut c = b.command("clippy", b.lints);
        status(c.arg("--quiet").args(["--", "-D", "warnings"]))?;
    }
    for mut c in loom_commands() {
        c.arg("--no-run");
        run_with_deadline(&mut c, Duration::from_secs(1800))?;
    }
    Ok(())
}

/// The loom models at `preemptions` ([`loom_commands`]), after [`loom_build`] (nothing left
/// to build when it ran before); at a bound of 3 or more the simulator's models are
/// time-boxed, see [`ring_model_env`].
pub fn loom(preemptions: u32) -> Result<(), String> {
    loom_build()?;
    let [mut sim, mut core] = loom_commands();
    sim.arg("--")
        .args(SIM_MODEL_FILTERS)
        .arg("--test-threads=1")
        .envs(ring_model_env(preemptions));
    if preemptions >= 3 {
        eprintln!(
            "    (the stream queue models at preemption bound {preemptions}: each explores for at \
             most {RING_MODEL_SECONDS} s, not exhaustively)"
        );
    }
    run_with_deadline(
        &mut sim,
        Duration::from_secs(1800 + (RING_MODELS + BATON_MODELS) * RING_MODEL_SECONDS),
    )?;
    core.args(["--", "--test-threads=1"])
        .env("LOOM_MAX_PREEMPTIONS", preemptions.to_string());
    run_with_deadline(&mut core, Duration::from_secs(3600))
}

/// The core's unit tests under Miri (nightly), minus [`MIRI_SKIP`].
pub fn miri() -> Result<(), String> {
    // CI does not run Miri: the component is added on first use.
    crate::run::status(std::process::Command::new("rustup").args([
        "component",
        "add",
        "--toolchain",
        "nightly",
        "miri",
        "rust-src",
    ]))?;
    let mut c = nightly_cargo();
    c.args(["miri", "test", "-p", "acl-notify-core", "--lib", "--"]);
    for s in MIRI_SKIP {
        c.args(["--skip", s]);
    }
    run_with_deadline(&mut c, Duration::from_secs(3600))
}

/// The faults of `tests/src/fault.rs` (`ACL_NOTIFY_TEST_FAULT`).
pub const FAULTS: [&str; 8] = [
    "record_lost",
    "wait_no_reset",
    "timeout_forever",
    "stale_destroy_ok",
    "batch_reset_noop",
    "export_twice_ok",
    "whitelist_open",
    "ids_leak",
];

/// Checks the suite itself: the simulator trials of one SoC with every IPC and count-notify
/// feature (Ascend950PR) run against each broken simulator, and each run must fail — some
/// case must catch the broken rule. Prints how many cases caught each.
pub fn faults() -> Result<(), String> {
    const SOC_FILTER: &str = "sim::Ascend950PR::";
    let mut build = cargo();
    build.args([
        "test",
        "--no-run",
        "-p",
        "acl-notify-tests",
        "--test",
        "conformance",
    ]);
    run_with_deadline(&mut build, Duration::from_secs(1800))?;
    let log_dir = root().join("target").join("acl-notify").join("faults");
    std::fs::create_dir_all(&log_dir).map_err(|e| format!("{}: {e}", log_dir.display()))?;
    let mut missed = Vec::new();
    for fault in FAULTS {
        let log = log_dir.join(format!("{fault}.log"));
        let out = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut c = cargo();
        c.args([
            "test",
            "-q",
            "-p",
            "acl-notify-tests",
            "--test",
            "conformance",
            "--",
        ])
        .arg(SOC_FILTER)
        .env("ACL_NOTIFY_TEST_FAULT", fault)
        .stdout(out)
        .stderr(err);
        let shown = format!("conformance with {fault}");
        let st = crate::fuzz::wait_with_deadline(
            crate::fuzz::spawn_group(&mut c, &shown)?,
            Duration::from_secs(600),
            &shown,
        )?;
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let failed = text
            .lines()
            .filter(|l| l.starts_with("test ") && l.trim_end().ends_with("FAILED"))
            .count();
        if st.success() || failed == 0 {
            println!("  {fault:<18} NOT CAUGHT (log: {})", log.display());
            missed.push(fault);
        } else {
            println!("  {fault:<18} caught by {failed} case(s)");
        }
    }
    if missed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the conformance suite passes against a simulator with these rules broken: {}",
            missed.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The normal CI's bound (2) explores the stream queue models in full, with loom's own
    /// limits; 3 and over raise the branch limit and time-box them.
    #[test]
    fn the_ring_models_are_time_boxed_only_from_bound_3() {
        let keys = |p| -> Vec<&str> { ring_model_env(p).into_iter().map(|(k, _)| k).collect() };
        assert_eq!(keys(2), ["LOOM_MAX_PREEMPTIONS"]);
        assert_eq!(
            keys(3),
            [
                "LOOM_MAX_PREEMPTIONS",
                "LOOM_MAX_BRANCHES",
                "LOOM_MAX_DURATION"
            ]
        );
        assert!(ring_model_env(3).contains(&("LOOM_MAX_DURATION", "900".to_string())));
    }

    /// The loom steps' cfgs (`loom`, `sim_loom`) are declared to the compiler in the
    /// workspace's lints, and no source silences the check with `allow(unexpected_cfgs)`
    /// (which also hid any misspelt cfg in the same file).
    #[test]
    fn the_loom_cfgs_are_declared_not_allowed() {
        let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
        let lint = manifest
            .lines()
            .find(|l| l.starts_with("unexpected_cfgs"))
            .expect("the workspace's lints declare unexpected_cfgs");
        assert!(
            lint.contains("'cfg(loom)'") && lint.contains("'cfg(sim_loom)'"),
            "{lint}"
        );
        for file in [
            "backend-sim/src/ring.rs",
            "core/src/sync.rs",
            "core/tests/loom.rs",
        ] {
            let src = std::fs::read_to_string(root().join(file)).unwrap();
            assert!(
                !src.contains("allow(unexpected_cfgs)"),
                "{file} allows unexpected cfgs"
            );
        }
    }

    /// The loom step's deadline counts every model of `ring::loom_tests` (two were added for
    /// the parked streams' hand-over, `a_turn_home_*`, two for the host's fast claim,
    /// `a_fast_claim_*`): a model past [`RING_MODELS`] could
    /// use its whole time box at bound 3 and the step would be killed before its end.
    #[test]
    fn ring_models_counts_the_ring_s_loom_models() {
        let src = std::fs::read_to_string(root().join("backend-sim/src/ring.rs")).unwrap();
        let module = src
            .split_once("mod loom_tests {")
            .expect("ring.rs has a loom_tests module")
            .1;
        let models = module.matches("#[test]").count() as u64;
        assert!(module.contains("fn a_turn_home_asleep_loses_no_wake_up"));
        assert!(module.contains("fn a_turn_home_awake_loses_no_wake_up"));
        assert!(module.contains("fn a_fast_claim_loses_no_task_and_no_wake_up"));
        assert_eq!(models, RING_MODELS, "ring::loom_tests has {models} models");
    }

    /// The same for the baton's models (`stream::baton::loom_tests`), which the loom step's
    /// filters name.
    #[test]
    fn baton_models_counts_the_baton_s_loom_models() {
        let src = std::fs::read_to_string(root().join("backend-sim/src/stream/baton.rs")).unwrap();
        let module = src
            .split_once("mod loom_tests {")
            .expect("baton.rs has a loom_tests module")
            .1;
        let models = module.matches("#[test]").count() as u64;
        assert_eq!(
            models, BATON_MODELS,
            "stream::baton::loom_tests has {models} models"
        );
        assert!(SIM_MODEL_FILTERS.contains(&"stream::baton::loom_tests::"));
    }
}

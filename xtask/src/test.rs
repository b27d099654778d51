//! `cargo xtask test` (everything the README promises; `.ci/run` runs it) and `cargo xtask ci`
//! (the same).

use std::time::Duration;

use argh::FromArgs;

use crate::BackendArg;
use crate::run::{Steps, cargo, status};

/// Run the whole test suite: formatting, clippy, rustdoc, the no_std build, the examples, unit,
/// conformance, multi-process, compile-fail and C tests, loom, stress and the fuzz targets
/// replayed. Installs what it needs first (C/C++ compilers, valgrind, etcd, the toolchain's
/// parts).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "test")]
pub struct TestArgs {
    /// backend(s) the conformance suite runs against: sim, driver or all (default all)
    #[argh(option, default = "BackendArg::All")]
    pub backend: BackendArg,
}

/// Run exactly what CI runs (`.ci/run`): `cargo xtask test` on every backend.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "ci")]
pub struct CiArgs {}

pub fn ci(_: &CiArgs) -> Result<(), String> {
    test(&TestArgs {
        backend: BackendArg::All,
    })
}

pub fn test(args: &TestArgs) -> Result<(), String> {
    crate::setup::for_test()?;
    let mut steps = Steps::default();
    steps.run("cargo fmt --check", || {
        status(cargo().args(["fmt", "--all", "--check"]))
    });
    steps.run("cargo clippy -D warnings", || {
        status(cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--",
            "-D",
            "warnings",
        ]))
    });
    // Broken intra-doc links and stray HTML in doc comments (the xtask's own included: its doc
    // comments are its `--help`).
    steps.run("cargo doc -D warnings", || {
        status(
            cargo()
                .args(["doc", "--workspace", "--no-deps", "--quiet"])
                .env("RUSTDOCFLAGS", "-D warnings"),
        )
    });
    steps.run("check-nostd", || {
        crate::nostd::check_nostd(&crate::nostd::CheckNostdArgs {})
    });
    // The driver trials of the conformance suite load the simulator's C library from the
    // target directory: build it first so they never test a stale copy.
    steps.run("build libascendcl.so (acl-notify-capi)", || {
        status(cargo().args(["build", "--quiet", "-p", "acl-notify-capi"]))
    });
    // The release builds of the loom and stress steps, at the lowest CPU priority while the
    // examples, the demo and the workspace tests run: those leave a CPU idle for minutes
    // (tests waiting on timeouts, leases and their children), and the builds took 2 of the
    // suite's 14 minutes when they ran alone (2026-12-07). Each builds in a target directory
    // of its own, so no step here waits for cargo's lock on theirs.
    steps.beside(LOOM_BUILD, crate::longci::loom_build);
    let stress_target = crate::build::target_dir().map(|t| t.join("stress"));
    if let Ok(t) = stress_target.clone() {
        steps.beside(STRESS_BUILD, move || crate::stress::build(Some(&t)));
    }
    steps.run("examples run", run_examples);
    // The README's first command, with its traced run merged into one valid timeline.
    steps.run("demo (two C processes; their timeline merged)", || {
        crate::build::demo(&crate::build::DemoArgs {
            no_whitelist: false,
            release: false,
            hosts: None,
        })
    });
    steps.run("cargo test (workspace)", || {
        status(
            cargo()
                .arg("test")
                .args(WORKSPACE_STEP)
                .args([
                    "--no-fail-fast",
                    "--",
                    // Its own step below.
                    "--skip",
                    PAIRS_TEST,
                ])
                // Tools `for_test` installed: the tests that use them must not skip.
                .env("ACL_NOTIFY_REQUIRE_TOOLS", "1")
                .env("ACL_NOTIFY_TEST_BACKEND", backend_env(args.backend)),
        )
    });
    steps.run(
        "every test binary lists its tests as cargo-nextest reads them",
        list_tests,
    );
    // The simulator's other stream placement (workers pinned to CPUs in turn, as the
    // benchmarks use it) must pass the same contract.
    if args.backend != BackendArg::Driver {
        steps.run("conformance, streams pinned", || {
            status(
                cargo()
                    .args([
                        "test",
                        "--quiet",
                        "-p",
                        "acl-notify-tests",
                        "--test",
                        "conformance",
                    ])
                    .env("ACL_NOTIFY_TEST_BACKEND", "sim")
                    .env("ACL_NOTIFY_SIM_STREAM_CPUS", "spread"),
            )
        });
    }
    // Model checking of the record/wait protocol, FIFO release, the lock-free id pool and the
    // stream queue.
    steps.join(LOOM_BUILD);
    steps.run("loom (preemption bound 2)", || crate::longci::loom(2));
    // Every pair of control-plane calls at once on one notify, from threads and processes.
    steps.run("stress: concurrent control-plane pairs", || {
        status(cargo().args([
            "test",
            "--quiet",
            "-p",
            "acl-notify-stress",
            "--test",
            "pairs",
            "--",
            "--exact",
            PAIRS_TEST,
        ]))
    });
    // P processes x S streams x K notifies with SIGKILL faults: prints `lost: 0`.
    steps.join(STRESS_BUILD);
    steps.run("stress (8 runs, SIGKILL faults)", || {
        crate::stress::stress_in(
            &crate::stress::StressArgs {
                processes: 4,
                streams: 2,
                notifies: 4,
                handoffs: 20000,
                faults: 2,
                runs: 8,
                seed: None,
                timeout: 240,
            },
            Some(&stress_target?),
        )
    });
    // Every fuzz target's properties over its checked-in seeds and 3000 generated inputs, on
    // the pinned stable toolchain (libFuzzer runs are `cargo xtask fuzz` and `ci-long`).
    steps.run("fuzz targets replayed (seeds + 3000 inputs each)", || {
        status(cargo().args([
            "test",
            "--quiet",
            "-p",
            "acl-notify-fuzz-targets",
            "--no-fail-fast",
        ]))
    });
    steps.finish("test")
}

/// The step building the loom models beside the others ([`crate::longci::loom_build`]).
const LOOM_BUILD: &str = "loom: release builds (beside the steps before)";

/// The step building the stress binary beside the others ([`crate::stress::build`]).
const STRESS_BUILD: &str = "stress: release build (beside the steps before)";

/// Runs every test binary of the workspace with `--list --format terse`, as cargo-nextest
/// does to learn its tests, and checks each answers only `name: test` lines ([`list_lines`]):
/// a `harness = false` binary that ignored the arguments and ran (or printed) anything else
/// would leave `cargo nextest run --workspace` unable to list the workspace.
///
/// Listed in the package sets ([`LIST_SETS`]) that the other steps build, so the listing reuses
/// their builds: one `cargo test --workspace` over every package resolves features differently
/// (`arbitrary`'s derive of the fuzz targets and `argh` of the xtask turn on `syn`'s
/// `extra-traits`), which rebuilt every proc macro and every crate using one (35 s of a 12-minute
/// run, 2026-12-06). The same binaries, in three calls.
fn list_tests() -> Result<(), String> {
    for (set, targets) in LIST_SETS.iter().zip(LIST_TARGETS) {
        let shown = format!(
            "cargo test {} {} -- --list --format terse",
            set.join(" "),
            targets.join(" ")
        );
        let out = cargo()
            .args(["test", "--quiet"])
            .args(*set)
            .args(targets)
            .args(["--", "--list", "--format", "terse"])
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("could not start {shown}: {e}"))?;
        if !out.status.success() {
            return Err(format!("{shown} failed with {}", out.status));
        }
        list_lines(&String::from_utf8_lossy(&out.stdout))?;
    }
    Ok(())
}

/// The workspace step's packages (every one but the xtask and the fuzz targets), the fuzz
/// step's, and the xtask's own (`cargo xtask` builds it with `-p xtask`): together, every
/// package of the workspace (the unit test `the_listing_covers_every_workspace_member`).
const LIST_SETS: [&[&str]; 3] = [
    WORKSPACE_STEP,
    &["-p", "acl-notify-fuzz-targets"],
    &["-p", "xtask"],
];

/// The test targets each of [`LIST_SETS`] lists: libraries, binaries and integration tests,
/// as `--workspace --lib --bins --tests` did; `-p xtask --lib` is an error (the xtask has no
/// library: "no library targets found"), so its set asks for binaries and tests only.
const LIST_TARGETS: [&[&str]; 3] = [
    &["--lib", "--bins", "--tests"],
    &["--lib", "--bins", "--tests"],
    &["--bins", "--tests"],
];

/// The packages of the workspace step: all but the xtask and the fuzz targets (their own step).
const WORKSPACE_STEP: &[&str] = &[
    "--workspace",
    "--exclude",
    "xtask",
    "--exclude",
    "acl-notify-fuzz-targets",
];

/// The tests of a `--list --format terse` answer (libtest's: one `name: test` or
/// `name: benchmark` line per test, blank lines between binaries), or the first line that is
/// not one.
fn list_lines(listing: &str) -> Result<usize, String> {
    let mut tests = 0;
    for line in listing.lines().filter(|l| !l.trim().is_empty()) {
        match line.rsplit_once(": ") {
            Some((name, "test" | "benchmark")) if !name.is_empty() => tests += 1,
            _ => {
                return Err(format!(
                    "a test binary answered `--list --format terse` with {line:?}, which is not                      `name: test` (cargo-nextest could not list it)"
                ));
            }
        }
    }
    Ok(tests)
}

/// The test of `stress/tests/pairs.rs`: every pair of control-plane calls run at once on one
/// notify (a step of its own; the workspace step skips it).
const PAIRS_TEST: &str = "every_pair_of_control_plane_calls_on_one_notify";

/// The simulator's examples, and the arguments that keep each short: they are documentation,
/// so they must keep working, not only compiling.
const EXAMPLES: [(&str, &[&str]); 6] = [
    ("quickstart", &[]),
    ("fed_probe", &["inproc", "20"]),
    ("ipc", &[]),
    ("pingpong", &["2000"]),
    ("stream_handoff", &["200"]),
    // Starts a loopback etcd cluster (cluster mode); the C ring is the demo's.
    ("superpod", &["--samples", "50", "--mem-mib", "2"]),
];

/// Builds the simulator's examples and runs each to its end (at most 2 minutes each). Each
/// example opens a namespace of its own, named after its pid, and removes it at its end
/// (`stream_handoff` opens none); none reads `ACL_NOTIFY_SIM_NAMESPACE`.
fn run_examples() -> Result<(), String> {
    status(cargo().args(["build", "--quiet", "-p", "acl-notify-sim", "--examples"]))?;
    let dir = crate::build::target_dir()?.join("debug").join("examples");
    let mut failed = Vec::new();
    for (name, args) in EXAMPLES {
        eprintln!("--> {name} {}", args.join(" "));
        let mut cmd = std::process::Command::new(dir.join(name));
        cmd.args(args);
        // Its own process group, killed whole at the limit (`pingpong` starts a peer process).
        if let Err(e) = crate::fuzz::run_with_deadline(&mut cmd, Duration::from_secs(120)) {
            failed.push(e);
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("examples failed:\n  {}", failed.join("\n  ")))
    }
}

fn backend_env(b: BackendArg) -> &'static str {
    match b {
        BackendArg::Sim => "sim",
        BackendArg::Driver => "driver",
        BackendArg::All => "all",
    }
}

#[cfg(test)]
mod tests {
    use super::{LIST_SETS, list_lines};

    /// The listing's `-p` sets are exactly what its first (the workspace step's) excludes:
    /// no package is left unlisted, none listed twice.
    #[test]
    fn the_listing_covers_every_workspace_member() {
        let excluded: Vec<&str> = LIST_SETS[0]
            .windows(2)
            .filter(|w| w[0] == "--exclude")
            .map(|w| w[1])
            .collect();
        let alone: Vec<&str> = LIST_SETS[1..]
            .iter()
            .map(|s| match s {
                ["-p", name] => *name,
                other => panic!("not a `-p NAME` set: {other:?}"),
            })
            .collect();
        assert_eq!(LIST_SETS[0][0], "--workspace");
        let (mut excluded, mut alone) = (excluded, alone);
        excluded.sort_unstable();
        alone.sort_unstable();
        assert_eq!(excluded, alone);
    }

    #[test]
    fn a_listing_is_only_name_test_lines() {
        let ok = "a::b: test\nc: benchmark\n\nd: test\n";
        assert_eq!(list_lines(ok), Ok(3));
        // What the fuzz targets' replay binaries printed before they took libtest's arguments.
        let ran = "a: test\nreplay key_parse: 3009 inputs checked, 0 not decodable, in 0.1 s\n";
        let e = list_lines(ran).unwrap_err();
        assert!(e.contains("replay key_parse"), "{e}");
        assert!(list_lines(": test").is_err());
    }
}

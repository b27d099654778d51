//! `cargo xtask test` (everything the README promises) and `cargo xtask ci` (what `.ci/run`
//! runs: the same).

use argh::FromArgs;

use crate::BackendArg;
use crate::run::{Steps, cargo, status};

/// Run the whole test suite: formatting, clippy, the no_std build, unit, conformance,
/// multi-process, compile-fail and C tests.
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
    steps.run("check-nostd", || {
        crate::nostd::check_nostd(&crate::nostd::CheckNostdArgs {})
    });
    // The driver trials of the conformance suite load the simulator's C library from the
    // target directory: build it first so they never test a stale copy.
    steps.run("build libascendcl.so (acl-notify-capi)", || {
        status(cargo().args(["build", "--quiet", "-p", "acl-notify-capi"]))
    });
    steps.run("cargo test (workspace)", || {
        status(
            cargo()
                .args(["test", "--workspace", "--exclude", "xtask", "--no-fail-fast"])
                .env("ACL_NOTIFY_TEST_BACKEND", backend_env(args.backend)),
        )
    });
    steps.finish("test")
}

fn backend_env(b: BackendArg) -> &'static str {
    match b {
        BackendArg::Sim => "sim",
        BackendArg::Driver => "driver",
        BackendArg::All => "all",
    }
}

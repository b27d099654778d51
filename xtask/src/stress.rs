//! `cargo xtask stress`: builds and runs `acl-notify-stress` (release) — P worker processes ×
//! S streams × K notify channels handing records back and forth for M rounds, with SIGKILL
//! faults — and fails unless it reports `lost: 0`.

use std::path::Path;
use std::time::Duration;

use argh::FromArgs;

use crate::fuzz::run_with_deadline;
use crate::run::cargo;

/// Load with nothing lost: processes × streams × notifies × handoffs, with processes killed
/// (SIGKILL) at random points; exact accounting of records vs released waits; every id free
/// afterwards.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "stress")]
pub struct StressArgs {
    /// worker processes per run (default 4)
    #[argh(option, default = "4")]
    pub processes: u32,
    /// streams per process (default 2)
    #[argh(option, default = "2")]
    pub streams: u32,
    /// notify channels per stream pair (default 4)
    #[argh(option, default = "4")]
    pub notifies: u32,
    /// handoffs per channel (default 20000)
    #[argh(option, default = "20000")]
    pub handoffs: u64,
    /// processes killed with SIGKILL per run (default 2)
    #[argh(option, default = "2")]
    pub faults: u32,
    /// runs, each with the next seed and its own namespace (default 8)
    #[argh(option, default = "8")]
    pub runs: u32,
    /// random seed (default: from the clock; printed, so a failure can be replayed)
    #[argh(option)]
    pub seed: Option<u64>,
    /// hard limit per run in seconds (default 240)
    #[argh(option, default = "240")]
    pub timeout: u64,
}

pub fn stress(a: &StressArgs) -> Result<(), String> {
    stress_in(a, None)
}

/// Builds `acl-notify-stress` (release) in `target_dir` (cargo's own when `None`).
pub fn build(target_dir: Option<&Path>) -> Result<(), String> {
    let mut c = cargo();
    c.args(["build", "--release", "--quiet", "-p", "acl-notify-stress"]);
    if let Some(d) = target_dir {
        c.arg("--target-dir").arg(d);
    }
    run_with_deadline(&mut c, Duration::from_secs(1800))
}

/// [`stress`], built and run in `target_dir` (cargo's own when `None`): `cargo xtask test`
/// gives it one of its own, to build it beside the workspace tests
/// ([`crate::run::Steps::beside`]).
pub fn stress_in(a: &StressArgs, target_dir: Option<&Path>) -> Result<(), String> {
    build(target_dir)?;
    let mut args = vec![
        format!("--processes={}", a.processes),
        format!("--streams={}", a.streams),
        format!("--notifies={}", a.notifies),
        format!("--handoffs={}", a.handoffs),
        format!("--faults={}", a.faults),
        format!("--runs={}", a.runs),
        format!("--timeout={}", a.timeout),
    ];
    if let Some(s) = a.seed {
        args.push(format!("--seed={s}"));
    }
    let mut cmd = cargo();
    cmd.args(["run", "--release", "--quiet", "-p", "acl-notify-stress"]);
    if let Some(d) = target_dir {
        cmd.arg("--target-dir").arg(d);
    }
    cmd.arg("--").args(&args);
    // Every run is bounded by the binary itself; this is the backstop.
    let limit = Duration::from_secs(a.timeout.saturating_add(60) * u64::from(a.runs.max(1)));
    run_with_deadline(&mut cmd, limit)
        .map_err(|e| format!("stress run failed (it prints `lost: N` and why): {e}"))
}

//! `cargo xtask bench`: builds the benchmark binary and the C library in release mode, then
//! runs every benchmark case interleaved with its OS baselines and prints the tables and the
//! targets; results land in `target/acl-notify/bench/results.{json,csv}`. The `cluster` group
//! then runs `backend-sim/examples/superpod.rs` (release): a loopback etcd cluster, its
//! put→watch floor beside the cross-host record→wake latency of the cluster mode.
//!
//! Slow figures and missed targets never fail the command: only a build failure or a
//! benchmark that breaks (a failed call, a lost message, a watchdog timeout) does.

use std::path::PathBuf;

use argh::FromArgs;

use crate::run::{cargo, root, status};

/// Run the benchmarks (release build) against their OS baselines and print a table.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "bench")]
pub struct BenchArgs {
    /// short run (a few seconds): 3 repetitions, 15 ms samples
    #[argh(switch)]
    pub quick: bool,
    /// repetitions of each variant (default 11, quick 3)
    #[argh(option)]
    pub reps: Option<usize>,
    /// target duration of one sample in milliseconds (default 80, quick 15)
    #[argh(option)]
    pub sample_ms: Option<u64>,
    /// run only these groups (comma-separated): xproc, inproc, enqueue, pipeline, ring, wake,
    /// idlecpu, handoff, control, pool, memory, cluster
    #[argh(option)]
    pub only: Option<String>,
}

/// The cargo target directory (`CARGO_TARGET_DIR`, else `<root>/target`).
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => {
            let p = PathBuf::from(d);
            if p.is_absolute() { p } else { root().join(p) }
        }
        None => root().join("target"),
    }
}

pub fn bench(args: &BenchArgs) -> Result<(), String> {
    // `cluster` is not a group of the bench binary: it runs the superpod example after it.
    let groups: Option<Vec<&str>> = args
        .only
        .as_deref()
        .map(|o| o.split(',').map(str::trim).collect());
    let cluster = groups.as_ref().is_none_or(|g| g.contains(&"cluster"));
    let others = groups.as_ref().map(|g| {
        g.iter()
            .filter(|x| **x != "cluster")
            .copied()
            .collect::<Vec<_>>()
            .join(",")
    });
    if others.as_deref() != Some("") {
        bench_binary(args, others.as_deref())?;
    }
    if cluster {
        crate::setup::for_cluster_demo()?;
        eprintln!("==> cluster mode: etcd's floor and the cross-host record (release)");
        let samples = if args.quick { "100" } else { "500" };
        status(cargo().args([
            "run",
            "--release",
            "--quiet",
            "-p",
            "acl-notify-sim",
            "--example",
            "superpod",
            "--",
            "--samples",
            samples,
        ]))?;
    }
    Ok(())
}

fn bench_binary(args: &BenchArgs, only: Option<&str>) -> Result<(), String> {
    eprintln!("==> building acl-notify-bench (release)");
    status(cargo().args(["build", "--release", "--quiet", "-p", "acl-notify-bench"]))?;
    let target = target_dir();
    eprintln!("==> building the C library acl-notify-capi (release)");
    let capi =
        match status(cargo().args(["build", "--release", "--quiet", "-p", "acl-notify-capi"])) {
            Ok(()) => target.join("release").join("libascendcl.so"),
            Err(e) => {
                eprintln!("warning: {e}; the C ABI rows will be skipped");
                PathBuf::from("none")
            }
        };
    let exe = target.join("release").join("acl-notify-bench");
    let mut cmd = std::process::Command::new(&exe);
    cmd.current_dir(root())
        .arg("--out")
        .arg(target.join("acl-notify").join("bench"))
        .arg("--capi")
        .arg(&capi);
    if args.quick {
        cmd.arg("--quick");
    }
    if let Some(r) = args.reps {
        cmd.arg("--reps").arg(r.to_string());
    }
    if let Some(ms) = args.sample_ms {
        cmd.arg("--sample-ms").arg(ms.to_string());
    }
    if let Some(o) = only {
        cmd.arg("--only").arg(o);
    }
    eprintln!("==> running {}", exe.display());
    status(&mut cmd)
}

//! The second part of `cargo xtask demo`: the ring all-reduce of `tests/c/ring_allreduce.c`
//! on 8 processes, each on its own simulated device — device memory shared by IPC key,
//! reduce-scatter then all-gather, every step ordered only by IPC notifies, chunks moved with
//! `aclrtMemcpyAsync` and added with `aclrtReduceAsync`; each rank checks the exact sum
//! itself and the program says `ok` only if all did.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::build::{Installed, compile_c, remove_namespace_files, run_all, spawn};

/// Ranks (= devices) of the demo's ring.
const RANKS: u32 = 8;
/// Floats per chunk: each rank's buffer is RANKS chunks (32 KiB each).
const CHUNK: u32 = 8192;
/// The ring's time limit (it takes well under a second on an idle machine).
const LIMIT: Duration = Duration::from_secs(30);

/// Builds and runs the ring; `Ok` with a one-line summary when it printed its own `ok` and
/// exited 0, else `Err` saying what happened (its output included).
pub fn run(inst: &Installed, ns: &str) -> Result<String, String> {
    let ring = compile_c(inst, "ring_allreduce")?;
    let dir = std::env::temp_dir().join(format!("{ns}-ring"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut cmd = Command::new(&ring);
    cmd.arg(&dir)
        .arg(RANKS.to_string())
        .arg(CHUNK.to_string())
        .env("ACL_NOTIFY_SIM_NAMESPACE", ns)
        .env("ACL_NOTIFY_SIM_DEVICES", RANKS.to_string())
        .env("ACL_NOTIFY_SIM_SOC", "Ascend910B")
        .env_remove("ACL_NOTIFY_SIM_TRACE");
    println!(
        "ring all-reduce (tests/c/ring_allreduce.c): {RANKS} processes, one per device, each with \
         {} floats; reduce-scatter then all-gather over imported device buffers, every step \
         ordered only by IPC notifies",
        RANKS * CHUNK
    );
    let started = Instant::now();
    let results = spawn("ring_allreduce", &mut cmd).map(|p| run_all(vec![p], LIMIT));
    let elapsed = started.elapsed();
    remove_namespace_files(ns);
    let _ = std::fs::remove_dir_all(&dir);
    let results = results?;
    let Some((_, status, out, err)) = results.into_iter().next() else {
        return Err("the ring did not run".into());
    };
    let want = format!("ring_allreduce N={RANKS}: ok");
    match status {
        Some(s) if s.success() && out.contains(&want) => Ok(format!(
            "ring all-reduce: all {RANKS} ranks hold the exact sum ({:.0} ms)",
            elapsed.as_secs_f64() * 1e3
        )),
        Some(s) => Err(format!(
            "the ring all-reduce exited with {s}:\n{}{}",
            out,
            err.trim_end()
        )),
        None => Err(format!(
            "the ring all-reduce did not finish in {} s and was stopped:\n{}",
            LIMIT.as_secs(),
            err.trim_end()
        )),
    }
}

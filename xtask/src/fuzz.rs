//! `cargo xtask fuzz`: runs the cargo-fuzz targets in `fuzz/` (key parser, shared-memory file
//! validation, C ABI call sequences), each for a bounded time, plus the helpers the other
//! reliability commands share (a child process run under a hard deadline).

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use argh::FromArgs;

use crate::run::{Steps, root};

/// Every fuzz target, in the order they run.
pub const TARGETS: [&str; 3] = ["key_parse", "shm_open", "capi_calls"];

/// Inputs per target in a smoke run (from the checked-in seeds, no kept corpus).
pub const SMOKE_RUNS: u32 = 3000;

/// Run the fuzz targets in fuzz/ (cargo-fuzz on nightly), each for a bounded time.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "fuzz")]
pub struct FuzzArgs {
    /// seconds per target (default 60); the corpus under `fuzz/corpus/<target>` is kept
    #[argh(option, default = "60")]
    pub seconds: u64,
    /// a quick corpus-free run of each target instead (a few thousand inputs each)
    #[argh(switch)]
    pub smoke: bool,
    /// run only this target (key_parse, shm_open or capi_calls)
    #[argh(option)]
    pub target: Option<String>,
}

/// How much time building one target may take before it is considered hung.
const BUILD_BUDGET: Duration = Duration::from_secs(1800);

pub fn fuzz(args: &FuzzArgs) -> Result<(), String> {
    let targets: Vec<&str> = match &args.target {
        None => TARGETS.to_vec(),
        Some(t) => match TARGETS.iter().find(|x| **x == t.as_str()) {
            Some(x) => vec![*x],
            None => {
                return Err(format!(
                    "unknown fuzz target `{t}`: expected one of {}",
                    TARGETS.join(", ")
                ));
            }
        },
    };
    ensure_cargo_fuzz()?;
    let mut steps = Steps::default();
    for t in targets {
        let name = if args.smoke {
            format!("fuzz smoke {t} ({SMOKE_RUNS} runs)")
        } else {
            format!("fuzz {t} ({} s)", args.seconds)
        };
        steps.run(&name, || run_target(t, args));
    }
    steps.finish(if args.smoke { "fuzz --smoke" } else { "fuzz" })
}

/// `cargo +nightly` through rustup, with the variables the pinned toolchain's cargo set
/// removed so that nightly is really used.
pub fn nightly_cargo() -> Command {
    let mut c = Command::new("cargo");
    c.arg("+nightly");
    for v in [
        "RUSTUP_TOOLCHAIN",
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
    ] {
        c.env_remove(v);
    }
    c.current_dir(root());
    c
}

fn cargo_fuzz_present() -> bool {
    nightly_cargo()
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs nightly and cargo-fuzz when missing (the first time takes a few minutes): only
/// this command and `ci-long` need them; `cargo xtask test` replays the targets on stable.
fn ensure_cargo_fuzz() -> Result<(), String> {
    if cargo_fuzz_present() {
        return Ok(());
    }
    eprintln!("==> installing nightly and cargo-fuzz (needed by libFuzzer runs only)");
    let mut rustup = Command::new("rustup");
    rustup.args(["toolchain", "install", "nightly", "--profile", "minimal"]);
    crate::run::status(&mut rustup)?;
    crate::run::status(crate::run::cargo().args(["install", "cargo-fuzz", "--locked"]))?;
    if cargo_fuzz_present() {
        Ok(())
    } else {
        Err(
            "`cargo +nightly fuzz` is still not available after installing nightly and \
             cargo-fuzz (is ~/.cargo/bin on PATH?)"
                .into(),
        )
    }
}

fn fuzz_target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("fuzz"),
        None => root().join("target").join("fuzz"),
    }
}

fn run_target(target: &str, args: &FuzzArgs) -> Result<(), String> {
    let fuzz_dir = root().join("fuzz");
    let target_dir = fuzz_target_dir();
    // Build first (its own, generous deadline), so the run's deadline measures fuzzing only.
    let mut build = nightly_cargo();
    build
        .args(["fuzz", "build", "--debug-assertions", "--fuzz-dir"])
        .arg(&fuzz_dir)
        .arg("--target-dir")
        .arg(&target_dir)
        .arg(target);
    run_with_deadline(&mut build, BUILD_BUDGET)?;

    // Each run gets its own simulator namespace, removed afterwards.
    let ns = format!("fuzz-{target}-{}", std::process::id());
    let corpus = if args.smoke {
        let d = target_dir.join("smoke-corpus").join(target);
        let _ = std::fs::remove_dir_all(&d);
        d
    } else {
        fuzz_dir.join("corpus").join(target)
    };
    std::fs::create_dir_all(&corpus)
        .map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
    let artifacts = fuzz_dir.join("artifacts").join(target);
    std::fs::create_dir_all(&artifacts)
        .map_err(|e| format!("cannot create {}: {e}", artifacts.display()))?;

    let mut run = nightly_cargo();
    run.args(["fuzz", "run", "--debug-assertions", "--fuzz-dir"])
        .arg(&fuzz_dir)
        .arg("--target-dir")
        .arg(&target_dir)
        .arg(target)
        .arg(&corpus)
        // The checked-in seeds (read only: libFuzzer writes new inputs to the first folder).
        .arg(fuzz_dir.join("seeds").join(target))
        .arg("--")
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        // One input may take a few seconds (a wait that times out, a slow open); more is a hang.
        .arg("-timeout=20")
        .arg("-rss_limit_mb=3072")
        .arg("-print_final_stats=1")
        .env("ACL_NOTIFY_SIM_NAMESPACE", &ns)
        .env("ACL_NOTIFY_FUZZ_NAMESPACE", &ns);
    let deadline = if args.smoke {
        run.arg(format!("-runs={SMOKE_RUNS}"));
        // Corpus-free smoke runs must not depend on what earlier runs found.
        Duration::from_secs(300)
    } else {
        run.arg(format!("-max_total_time={}", args.seconds));
        Duration::from_secs(args.seconds + 300)
    };
    let r = run_with_deadline(&mut run, deadline);
    remove_namespace_files(&ns);
    r
}

/// Deletes `/dev/shm/acl-notify-sim.<ns>.*` (what a fuzz or stress run left behind).
pub fn remove_namespace_files(ns: &str) {
    let prefix = format!("acl-notify-sim.{ns}.");
    if let Ok(rd) = std::fs::read_dir("/dev/shm") {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// Runs `cmd` in its own process group, inheriting stdio; kills the whole group if it runs
/// past `limit`. `Err` names the command on failure, timeout or a spawn error.
pub fn run_with_deadline(cmd: &mut Command, limit: Duration) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let st = wait_with_deadline(spawn_group(cmd, &shown)?, limit, &shown)?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {st}"))
    }
}

/// Spawns `cmd` as the leader of a new process group.
pub fn spawn_group(cmd: &mut Command, shown: &str) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0)
        .spawn()
        .map_err(|e| format!("could not start {shown}: {e}"))
}

/// Waits for `child` (a process-group leader) while its group makes progress; kills the
/// group once it could run for `limit` without ending, or stayed asleep without using CPU
/// for a minute of looks ([`crate::progress::Watch`]: time it was stopped or waiting for a
/// CPU does not count). So a build at nice 19 on a machine at load ~30, which ran past a
/// 1,800 s limit of wall time while compiling, goes on; a stuck one still fails.
pub fn wait_with_deadline(
    mut child: Child,
    limit: Duration,
    shown: &str,
) -> Result<ExitStatus, String> {
    let mut watch = crate::progress::Watch::new(&[child.id()], Some(limit));
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Ok(st),
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for {shown}: {e}")),
        }
        if let Err(hang) = watch.step() {
            kill_group(child.id());
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{shown} {hang}, and was killed"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends SIGKILL to process group `pgid` (the `kill` utility: xtask has no libc dependency).
pub fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

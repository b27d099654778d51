//! A bench run leaves no files in `/dev/shm`, however it ends: an error return, a signal; and
//! what a run killed outright left, the next run removes.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

const BENCH: &str = env!("CARGO_BIN_EXE_acl-notify-bench");

/// The files of the bench run of process `pid` (its namespace and those of its groups).
fn files_of_run(pid: u32) -> Vec<PathBuf> {
    let ours = format!("acl-notify-sim.acl-notify-bench-{pid}");
    let mut v: Vec<PathBuf> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.strip_prefix(&ours)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('-'))
        })
        .map(|e| e.path())
        .collect();
    v.sort();
    v
}

/// Waits at most `limit` for `child` to exit; kills it and fails if it does not.
fn wait_limited(child: &mut Child, limit: Duration) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the bench did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Polls `cond` for at most `limit`.
fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// The direct children of process `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether process `pid` is gone (exited and reaped).
fn gone(pid: u32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// The signals blocked in process `pid` (its main thread), from `/proc`; `None` if it is gone
/// or a zombie (whose status shows no mask).
fn blocked(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let state = s.lines().find_map(|l| l.strip_prefix("State:"))?;
    if state.trim_start().starts_with(['Z', 'X']) {
        return None;
    }
    let hex = s.lines().find_map(|l| l.strip_prefix("SigBlk:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// A bench run that measures nothing and fails at its end: its results directory cannot be
/// made (under `/proc`). Its stderr is piped.
fn failing_run() -> Command {
    let mut c = Command::new(BENCH);
    c.args([
        "--only",
        "pool",
        "--match",
        "no such variant",
        "--capi",
        "none",
    ])
    .args(["--out", "/proc/acl-notify-bench-no-such-dir/out"])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    c
}

/// A run that ends by an error return (here: its results directory cannot be made) still
/// removes the namespace the simulator probe made at its start.
#[test]
fn a_run_that_fails_leaves_no_files() {
    let out = failing_run().spawn().unwrap();
    let pid = out.id();
    let out = out.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("acl-notify-bench-no-such-dir"), "{err}");
    // The probe ran (else there was nothing to leave).
    assert!(!err.contains("simulator not usable"), "{err}");
    assert_eq!(files_of_run(pid), Vec::<PathBuf>::new());
}

/// A run ended by SIGTERM in the middle of a group with child processes kills them, removes
/// its files and dies of the signal.
#[test]
fn a_run_stopped_by_a_signal_leaves_no_files_and_no_children() {
    let mut child = Command::new(BENCH)
        .args(["--only", "ring", "--capi", "none", "--reps", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The run blocks these signals for its signal thread; its children must not keep them
    // blocked once they run their role (a child seen just after its start still has the
    // parent's mask: wait for one that has got going).
    let term = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
        .iter()
        .fold(0u64, |m, &s| m | 1 << (s - 1));
    let mut kids = Vec::new();
    let mut masks = Vec::new();
    let started = eventually(Duration::from_secs(60), || {
        kids = children_of(pid);
        masks = kids.iter().map(|&k| blocked(k).map(|b| b & term)).collect();
        !files_of_run(pid).is_empty() && masks.contains(&Some(0))
    });
    // SAFETY: kill(2) has no memory effects; `pid` is our unreaped child.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let st = wait_limited(&mut child, Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(
        started,
        "within 60 s, no files or no child with SIGINT/SIGTERM/SIGHUP unblocked (children \
         {kids:?}, their masks of those {masks:?}): {err}"
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGTERM),
        "{st}: {err}"
    );
    assert!(err.contains("children killed"), "{err}");
    assert_eq!(files_of_run(pid), Vec::<PathBuf>::new(), "{err}");
    assert!(
        eventually(Duration::from_secs(5), || kids.iter().all(|&k| gone(k))),
        "children {kids:?} outlived the run (or were left unreaped)"
    );
}

/// A run started with SIGHUP ignored (as `nohup` starts it) keeps running when SIGHUP comes,
/// and still ends cleanly by SIGTERM.
#[test]
fn a_run_started_with_sighup_ignored_outlives_sighup() {
    let mut cmd = Command::new(BENCH);
    cmd.args(["--only", "ring", "--capi", "none", "--reps", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    // SAFETY: signal(2) is async-signal-safe, as a pre_exec hook must be.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGHUP, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let started = eventually(Duration::from_secs(60), || !files_of_run(pid).is_empty());
    // SAFETY: kill(2) has no memory effects; `pid` is our unreaped child.
    unsafe { libc::kill(pid as i32, libc::SIGHUP) };
    std::thread::sleep(Duration::from_millis(500));
    let after_hup = child.try_wait().unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let st = wait_limited(&mut child, Duration::from_secs(30));
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(started, "within 60 s, the run made no files: {err}");
    assert!(
        after_hup.is_none(),
        "an ignored SIGHUP ended the run ({after_hup:?}): {err}"
    );
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGTERM),
        "{st}: {err}"
    );
    assert_eq!(files_of_run(pid), Vec::<PathBuf>::new(), "{err}");
}

/// What a run killed outright (SIGKILL: no handler runs) left, the next run removes; a live
/// run's files it leaves alone.
#[test]
fn the_next_run_removes_what_a_killed_run_left() {
    // A process id that is gone: a child that has exited and been reaped.
    let gone = Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    let _ = gone.wait_with_output();
    let planted = [
        PathBuf::from(format!(
            "/dev/shm/acl-notify-sim.acl-notify-bench-{gone_pid}.srv0"
        )),
        PathBuf::from(format!(
            "/dev/shm/acl-notify-sim.acl-notify-bench-{gone_pid}-cp1.mem0d0"
        )),
    ];
    // A live process's: this test's own pid.
    let live = PathBuf::from(format!(
        "/dev/shm/acl-notify-sim.acl-notify-bench-{}-x.srv0",
        std::process::id()
    ));
    for p in planted.iter().chain([&live]) {
        std::fs::write(p, b"").unwrap();
    }
    let out = failing_run().output().unwrap();
    let live_left = live.exists();
    let dead_left = files_of_run(gone_pid);
    let _ = std::fs::remove_file(&live);
    for p in &planted {
        let _ = std::fs::remove_file(p);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(live_left, "a live process's file was removed: {err}");
    assert_eq!(dead_left, Vec::<PathBuf>::new(), "{err}");
}

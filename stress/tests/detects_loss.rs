//! The stress checker can fail: with `--sabotage 1` one recorder counts a record it never
//! issues, and the run must end non-zero reporting the loss (and the stalled round), within
//! its bounds. Without this control, `lost: 0` would prove nothing.

use std::process::Command;

/// Runs the stress binary with `args`. Its own `--timeout` is the hang guard (a run past it
/// is stopped and fails); until 2026-12-07 the whole run also had to end within 90 s of wall
/// time here, a check of speed made after the run, which a loaded machine could fail.
fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_acl-notify-stress"))
        .args(args)
        .output()
        .expect("the stress binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn lost(text: &str) -> u64 {
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("lost: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no `lost:` line in:\n{text}"))
}

#[test]
fn a_record_that_was_never_issued_is_reported_lost() {
    let (ok, text) = run(&[
        "--sabotage=1",
        "--faults=0",
        "--runs=1",
        "--handoffs=50",
        "--round-limit=2",
        "--timeout=60",
        "--seed=7",
    ]);
    assert!(!ok, "a sabotaged run passed:\n{text}");
    assert!(
        lost(&text) >= 1,
        "the skipped record is not counted:\n{text}"
    );
    assert!(
        text.contains("made no progress"),
        "the stalled round is not reported:\n{text}"
    );
}

#[test]
fn a_clean_small_run_loses_nothing() {
    let (ok, text) = run(&[
        "--faults=1",
        "--runs=2",
        "--handoffs=200",
        "--timeout=60",
        "--seed=11",
    ]);
    assert!(ok, "a clean run failed:\n{text}");
    assert_eq!(lost(&text), 0, "{text}");
    assert!(text.contains("faults injected: 1"), "{text}");
}

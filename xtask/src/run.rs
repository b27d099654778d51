//! Running commands: the workspace root, `cargo` invocations, and a step list that collects
//! every failure before reporting.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The workspace root (the parent of `xtask/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// The cargo the xtask was started with.
pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

/// Runs `cmd`, inheriting stdio; an error names the command and its exit status.
pub fn status(cmd: &mut Command) -> Result<(), String> {
    let shown = format!("{cmd:?}");
    let st = cmd
        .status()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed with {st}"))
    }
}

/// A list of named steps: each runs even if an earlier one failed; [`Steps::finish`] reports.
#[derive(Default)]
pub struct Steps {
    results: Vec<(String, Result<(), String>, f64)>,
}

impl Steps {
    /// Runs one step and records its outcome.
    pub fn run(&mut self, name: &str, f: impl FnOnce() -> Result<(), String>) {
        eprintln!("\n==> xtask step: {name}");
        let t = Instant::now();
        let r = f();
        let secs = t.elapsed().as_secs_f64();
        if let Err(e) = &r {
            eprintln!("==> FAILED: {name}: {e}");
        }
        self.results.push((name.to_string(), r, secs));
    }

    /// Prints a summary and a closing `N passed, M failed` line; `Err` if any step failed.
    pub fn finish(self, what: &str) -> Result<(), String> {
        eprintln!("\n==> {what} summary");
        let mut failed = 0;
        for (name, r, secs) in &self.results {
            match r {
                Ok(()) => eprintln!("    ok      {name:<40} {secs:7.1}s"),
                Err(e) => {
                    failed += 1;
                    eprintln!("    FAILED  {name:<40} {secs:7.1}s  {e}");
                }
            }
        }
        let passed = self.results.len() - failed;
        println!("xtask {what}: {passed} passed, {failed} failed");
        if failed == 0 {
            Ok(())
        } else {
            Err(format!("{failed} step(s) of `{what}` failed"))
        }
    }
}

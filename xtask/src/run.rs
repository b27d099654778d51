//! Running commands: the workspace root, `cargo` invocations, and a step list that collects
//! every failure before reporting; a step may build beside the others ([`Steps::beside`]).

use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::Instant;

/// The workspace root (the parent of `xtask/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

thread_local! {
    /// Where the cargo commands of a step run [`Steps::beside`] write their output (a file,
    /// printed when the step is joined), and that they run at the lowest CPU priority.
    static BESIDE: RefCell<Option<File>> = const { RefCell::new(None) };
}

/// The cargo the xtask was started with. On a step's thread of [`Steps::beside`], it runs
/// under `nice -n 19` with its output going to the step's log.
pub fn cargo() -> Command {
    let exe = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let log = BESIDE.with(|b| b.borrow().as_ref().map(File::try_clone));
    let mut c = match log {
        Some(log) => {
            let mut c = Command::new("nice");
            c.args(["-n", "19"]).arg(exe);
            if let Ok(log) = log
                && let Ok(err) = log.try_clone()
            {
                c.stdout(Stdio::from(log)).stderr(Stdio::from(err));
            }
            c
        }
        None => Command::new(exe),
    };
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
    /// Steps started by [`Steps::beside`] and not joined yet: name, log, start, thread.
    beside: Vec<Beside>,
}

/// A step running on a thread of its own ([`Steps::beside`]).
struct Beside {
    name: String,
    log: PathBuf,
    start: Instant,
    /// The step's outcome and how long it ran (seconds).
    thread: JoinHandle<(Result<(), String>, f64)>,
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

    /// Starts a step that only builds on a thread of its own, while the next steps run: its
    /// cargo commands ([`cargo`]) run under `nice -n 19`, so they take the CPU time the other
    /// steps leave idle (their tests waiting on timeouts, children and each other) rather than
    /// theirs, and write to a log of their own, printed by [`Steps::join`]. It must use a
    /// target directory no other step builds in while it runs: cargo's lock on it would make
    /// that step wait for a build at the lowest priority.
    pub fn beside(&mut self, name: &str, f: impl FnOnce() -> Result<(), String> + Send + 'static) {
        let opened = crate::build::target_dir().and_then(|t| {
            let dir = t.join("xtask-beside");
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let log = dir.join(format!("{}.log", self.beside.len()));
            let file = File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
            Ok((log, file))
        });
        let (log, file) = match opened {
            Ok(o) => o,
            Err(e) => {
                eprintln!("==> FAILED: {name}: {e}");
                self.results.push((name.to_string(), Err(e), 0.0));
                return;
            }
        };
        eprintln!(
            "\n==> xtask step, beside the next ones (nice 19, output in {}): {name}",
            log.display()
        );
        let thread = std::thread::spawn(move || {
            BESIDE.with(|b| *b.borrow_mut() = Some(file));
            let t = Instant::now();
            let r = f();
            (r, t.elapsed().as_secs_f64())
        });
        self.beside.push(Beside {
            name: name.to_string(),
            log,
            start: Instant::now(),
            thread,
        });
    }

    /// Waits for the step [`Steps::beside`] started as `name`, prints its output and records
    /// its outcome (its time: from its start to its end), and how long the join waited for it.
    /// Nothing if no such step is running.
    pub fn join(&mut self, name: &str) {
        let Some(i) = self.beside.iter().position(|b| b.name == name) else {
            return;
        };
        let b = self.beside.remove(i);
        let waited = Instant::now();
        let (r, secs) = b.thread.join().unwrap_or_else(|_| {
            let secs = b.start.elapsed().as_secs_f64();
            (Err("the step's thread panicked".into()), secs)
        });
        eprintln!(
            "\n==> xtask step (ran beside the ones before, {secs:.1} s; its join waited {:.1} s): {}",
            waited.elapsed().as_secs_f64(),
            b.name
        );
        match std::fs::read(&b.log) {
            Ok(out) => eprint!("{}", String::from_utf8_lossy(&out)),
            Err(e) => eprintln!("(its log {} could not be read: {e})", b.log.display()),
        }
        if let Err(e) = &r {
            eprintln!("==> FAILED: {}: {e}", b.name);
        }
        self.results.push((b.name, r, secs));
    }

    /// Prints a summary and a closing `N passed, M failed` line; `Err` if any step failed.
    pub fn finish(mut self, what: &str) -> Result<(), String> {
        let left: Vec<String> = self.beside.iter().map(|b| b.name.clone()).collect();
        for name in left {
            self.join(&name);
        }
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

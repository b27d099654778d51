//! Running commands: the workspace root, `cargo` invocations, and a step list that collects
//! every failure before reporting; a step may build beside the others ([`Steps::beside`]).

use std::cell::RefCell;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The workspace root (the parent of `xtask/`).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

thread_local! {
    /// On the thread of a step run [`Steps::beside`]: the file its commands write their output
    /// to (printed when the step is joined) and the step's tag ([`TAG`]).
    static BESIDE: RefCell<Option<(File, String)>> = const { RefCell::new(None) };
}

/// The environment variable that marks every process a step run [`Steps::beside`] started,
/// its children included (they inherit it), with the step's number: [`Steps::join`] finds
/// them by it to end them.
const TAG: &str = "XTASK_BESIDE_STEP";

/// The cargo the xtask was started with ([`command`]).
pub fn cargo() -> Command {
    let mut c = command(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

/// `program`; on the thread of a step run [`Steps::beside`], under `nice -n 19`, with its
/// output going to the step's log and the step's [`TAG`] in its environment.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let beside = BESIDE.with(|b| {
        b.borrow()
            .as_ref()
            .map(|(log, tag)| (log.try_clone(), tag.clone()))
    });
    let Some((log, tag)) = beside else {
        return Command::new(program);
    };
    let mut c = Command::new("nice");
    c.args(["-n", "19"]).arg(program).env(TAG, tag);
    if let Ok(log) = log
        && let Ok(err) = log.try_clone()
    {
        c.stdout(Stdio::from(log)).stderr(Stdio::from(err));
    }
    c
}

/// The processes whose environment holds `TAG=tag` (own processes only: /proc shows no other
/// user's environment).
fn tagged(tag: &str) -> Vec<String> {
    let want = format!("{TAG}={tag}");
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == want.as_bytes()))
        })
        .collect()
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
    /// Its [`TAG`] value.
    tag: String,
    /// The step itself, run again in the foreground if it is still running at its join.
    f: Arc<dyn Fn() -> Result<(), String> + Send + Sync>,
}

/// The number of the next step run [`Steps::beside`] (its [`TAG`]).
static NEXT_TAG: AtomicUsize = AtomicUsize::new(0);

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
    /// that step wait for a build at the lowest priority. It must be a build, which cargo
    /// resumes where it was stopped: at the join, a step still running is stopped and run again
    /// in the foreground at the normal priority ([`Steps::join`]).
    pub fn beside(
        &mut self,
        name: &str,
        f: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) {
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
        let f: Arc<dyn Fn() -> Result<(), String> + Send + Sync> = Arc::new(f);
        let tag = NEXT_TAG.fetch_add(1, Ordering::Relaxed).to_string();
        let (run, thread_tag) = (Arc::clone(&f), tag.clone());
        let thread = std::thread::spawn(move || {
            BESIDE.with(|b| *b.borrow_mut() = Some((file, thread_tag)));
            let t = Instant::now();
            let r = run();
            (r, t.elapsed().as_secs_f64())
        });
        self.beside.push(Beside {
            name: name.to_string(),
            log,
            start: Instant::now(),
            thread,
            tag,
            f,
        });
    }

    /// Joins the step [`Steps::beside`] started as `name`: prints its output and records its
    /// outcome and time. A step still running is stopped (its processes, found by their
    /// [`TAG`], killed) and run again here, at the normal priority: when the steps before left
    /// it too little idle CPU (other work on the machine), the suite would otherwise wait for a
    /// build that runs only when nothing else wants a CPU. Nothing if no such step is running.
    pub fn join(&mut self, name: &str) {
        let Some(i) = self.beside.iter().position(|b| b.name == name) else {
            return;
        };
        let b = self.beside.remove(i);
        let stopped = !b.thread.is_finished();
        while stopped && !b.thread.is_finished() {
            let pids = tagged(&b.tag);
            if !pids.is_empty() {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .args(&pids)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (r, secs) = b.thread.join().unwrap_or_else(|_| {
            let secs = b.start.elapsed().as_secs_f64();
            (Err("the step's thread panicked".into()), secs)
        });
        eprintln!(
            "\n==> xtask step (ran beside the ones before, {secs:.1} s{}): {}",
            if stopped {
                "; still running at its join, so stopped and finished here"
            } else {
                ""
            },
            b.name
        );
        match std::fs::read(&b.log) {
            Ok(out) => eprint!("{}", String::from_utf8_lossy(&out)),
            Err(e) => eprintln!("(its log {} could not be read: {e})", b.log.display()),
        }
        let (r, secs) = if stopped {
            let t = Instant::now();
            let r = (b.f)();
            (r, secs + t.elapsed().as_secs_f64())
        } else {
            (r, secs)
        };
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{Steps, command, status, tagged};

    /// A step still running at its join (here a `sleep` that would last ten minutes) is
    /// stopped, its processes gone, and run again in the foreground, whose outcome counts.
    #[test]
    fn a_beside_step_still_running_at_its_join_is_stopped_and_run_again() {
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&runs);
        let mut steps = Steps::default();
        steps.beside("sleeper", move || {
            if counted.fetch_add(1, Ordering::SeqCst) == 0 {
                status(command("sleep").arg("600"))
            } else {
                Ok(())
            }
        });
        let tag = steps.beside[0].tag.clone();
        while tagged(&tag).is_empty() && !steps.beside[0].thread.is_finished() {
            std::thread::yield_now();
        }
        steps.join("sleeper");
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert!(tagged(&tag).is_empty());
        assert_eq!(steps.results.len(), 1);
        assert!(steps.results[0].1.is_ok(), "{:?}", steps.results[0].1);
    }
}

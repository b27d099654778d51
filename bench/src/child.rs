//! Child processes and watchdogs: the bench re-executes itself with `--role <name>` to get a
//! second process, and every wait on a child or a peer is bounded by a watchdog that kills the
//! child and unblocks the waiter, so no benchmark can hang.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The environment variable that gives a child its parent's process id, so that a child
/// whose parent died before it asked for `PR_SET_PDEATHSIG` ends too
/// ([`crate::sys::die_with_parent`]).
pub const PARENT_ENV: &str = "ACL_NOTIFY_BENCH_PARENT";

/// This run's children that are not reaped yet, by pid. Spawns, reaps and kills by pid all
/// take its lock, so a pid in it is still this run's child (an unreaped pid is never reused);
/// once `exiting` is set (the run is ending on a signal) no child starts.
#[derive(Debug)]
struct Registry {
    pids: Vec<i32>,
    exiting: bool,
}

static CHILDREN: Mutex<Registry> = Mutex::new(Registry {
    pids: Vec::new(),
    exiting: false,
});

fn registry() -> MutexGuard<'static, Registry> {
    CHILDREN.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Registry {
    fn forget(&mut self, pid: i32) {
        self.pids.retain(|&p| p != pid);
    }
}

/// Kills every child of this run and reaps each (so none is left over, not even as a
/// zombie): for the signal thread, before it removes the run's files (a child left running
/// could make them again) and ends the process. The registry stays locked until the process
/// has ended: no child starts, and no other thread touches a reaped child's pid.
pub fn kill_all_for_exit() {
    let mut reg = registry();
    reg.exiting = true;
    for &p in &reg.pids {
        // SAFETY: kill(2) has no memory effects; `p` is an unreaped child of ours.
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
    for p in std::mem::take(&mut reg.pids) {
        let mut status = 0;
        // SAFETY: `status` is valid for the write; `p` is an unreaped child of ours.
        while unsafe { libc::waitpid(p, &mut status, 0) } < 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
        {}
    }
    std::mem::forget(reg);
}

/// A child process running this binary in another role. Killed and reaped on drop if it is
/// still running.
#[derive(Debug)]
pub struct Child {
    child: std::process::Child,
    reaped: bool,
}

impl Child {
    /// Starts `<this executable> --role <role> <args…>` with extra environment variables. Its
    /// stdout is captured (children print `key=value` result lines); stderr is inherited.
    pub fn spawn(role: &str, args: &[String], envs: &[(&str, &str)]) -> Result<Child, String> {
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.arg("--role")
            .arg(role)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        cmd.env(PARENT_ENV, std::process::id().to_string());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let mut reg = registry();
        if reg.exiting {
            return Err(format!("spawning role {role}: the run is ending"));
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawning role {role}: {e}"))?;
        reg.pids.push(child.id() as i32);
        Ok(Child {
            child,
            reaped: false,
        })
    }

    /// `try_wait`, which reaps an exited child: under the registry's lock, and the pid leaves
    /// the registry once reaped.
    fn try_reap(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let mut reg = registry();
        let r = self.child.try_wait();
        if let Ok(Some(_)) = r {
            self.reaped = true;
            reg.forget(self.pid());
        }
        r
    }

    /// The child's process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether the child has exited; one that has is reaped (and leaves the registry).
    pub fn exited(&mut self) -> bool {
        matches!(self.try_reap(), Ok(Some(_)))
    }

    /// Waits at most `limit` for the child to exit; kills it if it does not. Returns its
    /// captured stdout, or an error naming how it ended.
    pub fn finish(mut self, limit: Duration) -> Result<String, String> {
        let status = self.wait_limited(limit)?;
        let mut out = String::new();
        if let Some(mut o) = self.child.stdout.take() {
            let _ = o.read_to_string(&mut out);
        }
        if status.success() {
            Ok(out)
        } else {
            Err(format!(
                "child exited with {status}; output: {}",
                out.trim()
            ))
        }
    }

    fn wait_limited(&mut self, limit: Duration) -> Result<ExitStatus, String> {
        let start = Instant::now();
        loop {
            match self.try_reap() {
                Ok(Some(st)) => return Ok(st),
                Ok(None) if start.elapsed() < limit => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Ok(None) => {
                    self.kill();
                    return Err(format!("child did not exit within {limit:?}; killed"));
                }
                Err(e) => return Err(format!("waiting for child: {e}")),
            }
        }
    }

    /// Kills (SIGKILL, by pid) and reaps the child.
    pub fn kill(&mut self) {
        if !self.reaped {
            let mut reg = registry();
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
            reg.forget(self.pid());
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends SIGKILL to a child of this run, if it is not reaped yet (a watchdog that fires late
/// must not hit a process that has reused the pid).
pub fn kill_pid(pid: i32) {
    let reg = registry();
    if pid > 0 && reg.pids.contains(&pid) {
        // SAFETY: kill(2) has no memory effects; `pid` is an unreaped child of ours.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// Runs `on_fire` on a helper thread if it is not dropped within `limit`.
#[derive(Debug)]
pub struct Watchdog {
    done: Arc<(Mutex<bool>, Condvar)>,
    fired: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Arms a watchdog.
    pub fn start(limit: Duration, on_fire: impl FnOnce() + Send + 'static) -> Watchdog {
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let fired = Arc::new(AtomicBool::new(false));
        let (d, f) = (done.clone(), fired.clone());
        let handle = std::thread::spawn(move || {
            let deadline = Instant::now() + limit;
            let (m, cv) = &*d;
            let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
            while !*g {
                let now = Instant::now();
                if now >= deadline {
                    f.store(true, Ordering::SeqCst);
                    drop(g);
                    on_fire();
                    return;
                }
                g = cv
                    .wait_timeout(g, deadline - now)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        });
        Watchdog {
            done,
            fired,
            handle: Some(handle),
        }
    }

    /// Whether the watchdog has fired.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        {
            let (m, cv) = &*self.done;
            *m.lock().unwrap_or_else(|e| e.into_inner()) = true;
            cv.notify_all();
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Parses `--key value` pairs of a child's command line.
#[derive(Debug)]
pub struct RoleArgs {
    pairs: Vec<(String, String)>,
}

impl RoleArgs {
    /// From the arguments after `--role <name>`.
    pub fn parse(args: &[String]) -> Result<RoleArgs, String> {
        let mut pairs = Vec::new();
        let mut it = args.iter();
        while let Some(k) = it.next() {
            let key = k
                .strip_prefix("--")
                .ok_or_else(|| format!("role argument `{k}` is not --key"))?;
            let v = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
            pairs.push((key.to_string(), v.clone()));
        }
        Ok(RoleArgs { pairs })
    }

    /// The value of `--key`.
    pub fn get(&self, key: &str) -> Result<&str, String> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .ok_or_else(|| format!("missing --{key}"))
    }

    /// The value of `--key`, parsed.
    pub fn num<T: std::str::FromStr>(&self, key: &str) -> Result<T, String> {
        let v = self.get(key)?;
        v.parse()
            .map_err(|_| format!("--{key}: `{v}` is not a number"))
    }

    /// The value of an optional `--key`, parsed (`None` if absent).
    pub fn opt_num<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, String> {
        if self.pairs.iter().any(|(k, _)| k == key) {
            self.num(key).map(Some)
        } else {
            Ok(None)
        }
    }
}

//! Child processes and watchdogs: the bench re-executes itself with `--role <name>` to get a
//! second process, and every wait on a child or a peer is bounded by a watchdog that kills the
//! child and unblocks the waiter, so no benchmark can hang.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
        for (k, v) in envs {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawning role {role}: {e}"))?;
        Ok(Child {
            child,
            reaped: false,
        })
    }

    /// The child's process id.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Whether the child has exited (without reaping it).
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
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
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    self.reaped = true;
                    return Ok(st);
                }
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
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.reaped = true;
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Sends SIGKILL to a process this program started.
pub fn kill_pid(pid: i32) {
    if pid > 0 {
        // SAFETY: kill(2) has no memory effects; callers pass the pid of their own child.
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

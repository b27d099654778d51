//! The runner: turns the case list into libtest-mimic trials named
//! `<backend>::<SoC>::<case>`, runs each trial in a child process of the test binary (so the
//! driver's process-global C library is configured once per trial from the environment), with a
//! unique simulator namespace, a hard timeout and cleanup; and the child side that opens the
//! backend and runs one case (or one role of a multi-process case).
//!
//! Environment of the parent: `ACL_NOTIFY_TEST_BACKEND` = `sim` | `driver` | `all` (default
//! `all`). Everything else is set by the harness for its children.

use std::fmt;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use acl_notify_core::{
    Backend, BackendError, CntNotifyOps, DeviceMemory, Error, EventOps, HostOps, NotifyResources,
    Soc, StreamControl, StreamOps,
};
use acl_notify_sim::Sim;
use libtest_mimic::{Arguments, Completion, Failed, Trial};

use crate::check::{CaseResult, SKIP_PREFIX};
use crate::leftovers;
use crate::pause::PauseWatch;
use crate::progress::{Hang, LOOK, Watch};

/// Which backends the parent runs (`sim`, `driver` or `all`).
pub const ENV_TEST_BACKEND: &str = "ACL_NOTIFY_TEST_BACKEND";
/// Set in a child: the case it runs.
pub const ENV_CASE: &str = "ACL_NOTIFY_CONF_CASE";
/// Set in a role process of a multi-process case: the role it plays.
pub const ENV_ROLE: &str = "ACL_NOTIFY_CONF_ROLE";
/// Set in a role process: a free-form argument for the role.
pub const ENV_ROLE_ARG: &str = "ACL_NOTIFY_CONF_ROLE_ARG";
/// Set in children: the backend kind (`sim` or `driver`).
pub const ENV_BACKEND: &str = "ACL_NOTIFY_CONF_BACKEND";
/// Set in children: the trial's scratch directory (keys, PIDs, logs).
pub const ENV_DIR: &str = "ACL_NOTIFY_CONF_DIR";
/// The driver backend's library override.
pub const ENV_DRIVER_LIB: &str = "ACL_NOTIFY_DRIVER_LIB";

/// Devices every trial's simulated machine has (SPEC §7's flow uses devices 2 and 3).
pub const DEVICES: u32 = 4;

/// Line a child prints on stdout when its case passed.
const PASS_MARK: &str = "acl-notify-conformance: PASS";
/// Exit code of a child whose case does not apply to this backend (see [`SKIP_PREFIX`]).
const SKIP_EXIT: i32 = 77;

/// Everything a case needs from a backend.
pub trait TestBackend:
    Backend
    + NotifyResources
    + StreamOps
    + HostOps
    + CntNotifyOps
    + EventOps
    + StreamControl
    + DeviceMemory
    + Send
    + Sync
    + 'static
{
}
impl<
    T: Backend
        + NotifyResources
        + StreamOps
        + HostOps
        + CntNotifyOps
        + EventOps
        + StreamControl
        + DeviceMemory
        + Send
        + Sync
        + 'static,
> TestBackend for T
{
}

/// The backend a trial runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// `acl_notify_sim::Sim`, in process.
    Sim,
    /// `acl_notify_driver::Driver` over the simulator's `libascendcl.so`.
    Driver,
}

impl BackendKind {
    /// The name used in trial names and environment variables.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Sim => "sim",
            BackendKind::Driver => "driver",
        }
    }

    fn parse(s: &str) -> Option<BackendKind> {
        match s {
            "sim" => Some(BackendKind::Sim),
            "driver" => Some(BackendKind::Driver),
            _ => None,
        }
    }
}

/// One conformance case, generic over the backend.
pub struct Case<B> {
    /// Name (unique; `mp::` prefix for multi-process cases).
    pub name: &'static str,
    /// Whether the case applies to a SoC.
    pub applies: fn(Soc) -> bool,
    /// Hard limit for the child process running it: the time the trial's processes could run
    /// ([`crate::progress::Watch`]), not wall time.
    pub timeout: Duration,
    /// Runs only on the simulator (it uses a simulator-only test hook).
    pub sim_only: bool,
    /// The case.
    pub run: fn(&Ctx<'_, B>) -> CaseResult,
}

impl<B> fmt::Debug for Case<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// A role of a multi-process case: the code one of its processes runs.
pub struct Role<B> {
    /// Name the coordinator spawns it by.
    pub name: &'static str,
    /// The role.
    pub run: fn(&Ctx<'_, B>) -> CaseResult,
}

impl<B> fmt::Debug for Role<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Role")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What a case or role sees: the opened backend and the trial's configuration.
pub struct Ctx<'a, B> {
    /// The backend, opened from the environment.
    pub b: &'a B,
    /// Which backend it is.
    pub kind: BackendKind,
    /// The SoC the trial asked for (checked against `b.soc()` before the case runs).
    pub soc: Soc,
    /// The trial's scratch directory, shared by every process of the trial.
    pub dir: PathBuf,
    /// The simulator namespace of the trial.
    pub namespace: String,
    /// The role's argument (empty outside roles).
    pub arg: String,
    roles_spawned: AtomicU32,
}

impl<B> fmt::Debug for Ctx<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx")
            .field("kind", &self.kind)
            .field("soc", &self.soc)
            .field("dir", &self.dir)
            .field("namespace", &self.namespace)
            .field("arg", &self.arg)
            .finish_non_exhaustive()
    }
}

impl<B: TestBackend> Ctx<'_, B> {
    /// Progress note: printed on the child's stdout, shown when the trial fails.
    pub fn note(&self, msg: impl fmt::Display) {
        println!("[{}] {msg}", self.who());
    }

    fn who(&self) -> String {
        if self.arg.is_empty() && std::env::var_os(ENV_ROLE).is_none() {
            format!("case pid {}", std::process::id())
        } else {
            format!(
                "role {} pid {}",
                std::env::var(ENV_ROLE).unwrap_or_default(),
                std::process::id()
            )
        }
    }

    /// Checks that the backend offers the `HostOps` extension. The simulator must; the driver
    /// may answer 207000 when its C library lacks the extension, and then the case is reported
    /// as ignored (not passed) for the driver.
    pub fn host_ops(&self) -> CaseResult {
        let probe = self.b.notifies_free(0);
        match (&probe, self.kind) {
            (Err(e), BackendKind::Driver)
                if e.kind() == Error::FeatureNotSupport && self.soc.max_notifies() > 0 =>
            {
                Err(format!(
                    "{SKIP_PREFIX}the driver's library lacks the HostOps extension \
                     (notifies_free answered {e})"
                ))
            }
            _ => Ok(()),
        }
    }

    /// Writes `contents` to the file `name` of the trial directory, atomically (a reader never
    /// sees a partial file).
    pub fn put(&self, name: &str, contents: &str) -> CaseResult {
        let tmp = self.dir.join(format!(".{name}.tmp.{}", std::process::id()));
        fs::write(&tmp, contents).map_err(|e| format!("writing {}: {e}", tmp.display()))?;
        fs::rename(&tmp, self.dir.join(name)).map_err(|e| format!("renaming to {name}: {e}"))
    }

    /// Waits for the file `name` written by another process of the trial, giving up once the
    /// trial's processes could run for `timeout` (see `Bound`).
    pub fn take(&self, name: &str, timeout: Duration) -> Result<String, String> {
        self.take_inner(name, timeout, None)
    }

    /// Like [`take`](Self::take), but gives up as soon as `peer` exits without writing it.
    pub fn take_from(
        &self,
        name: &str,
        timeout: Duration,
        peer: &mut RoleProc,
    ) -> Result<String, String> {
        self.take_inner(name, timeout, Some(peer))
    }

    fn take_inner(
        &self,
        name: &str,
        timeout: Duration,
        mut peer: Option<&mut RoleProc>,
    ) -> Result<String, String> {
        let path = self.dir.join(name);
        let mut watch = Bound::trial(timeout);
        loop {
            if let Ok(s) = fs::read_to_string(&path) {
                return Ok(s);
            }
            if let Some(p) = peer.as_deref_mut()
                && let Some(status) = p.poll()?
            {
                // It may have written the file just before exiting.
                if let Ok(s) = fs::read_to_string(&path) {
                    return Ok(s);
                }
                return Err(format!(
                    "waiting for file `{name}`: role `{}` (pid {}) exited ({}) without writing it\n{}",
                    p.name,
                    p.pid,
                    describe(status),
                    p.output()
                ));
            }
            if let Err(hang) = watch.step() {
                return Err(format!(
                    "waited for file `{name}` from another process of the trial, which {hang}"
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Starts another process of the trial playing `role` (same backend, SoC, namespace and
    /// directory), with `arg` and extra environment variables.
    pub fn spawn_role(
        &self,
        role: &str,
        arg: &str,
        env: &[(&str, String)],
    ) -> Result<RoleProc, String> {
        let n = self.roles_spawned.fetch_add(1, Ordering::Relaxed);
        let tag = format!("{role}-{}-{n}", std::process::id());
        let out = self.dir.join(format!("{tag}.out"));
        let err = self.dir.join(format!("{tag}.err"));
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.env(ENV_ROLE, role)
            .env(ENV_ROLE_ARG, arg)
            .env_remove(ENV_CASE)
            .stdin(Stdio::null())
            .stdout(open_log(&out)?)
            .stderr(open_log(&err)?);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("spawning role {role}: {e}"))?;
        Ok(RoleProc {
            name: role.to_owned(),
            pid: child.id() as i32,
            child,
            status: None,
            out,
            err,
        })
    }
}

/// A role process started by [`Ctx::spawn_role`]. Dropping it kills and reaps it if it is
/// still running, so no process outlives a failed case.
#[derive(Debug)]
pub struct RoleProc {
    /// The role's name.
    pub name: String,
    /// Its process id.
    pub pid: i32,
    child: Child,
    status: Option<ExitStatus>,
    out: PathBuf,
    err: PathBuf,
}

impl RoleProc {
    /// Reaps the process if it has exited.
    pub fn poll(&mut self) -> Result<Option<ExitStatus>, String> {
        if self.status.is_none() {
            self.status = self
                .child
                .try_wait()
                .map_err(|e| format!("waiting for role {}: {e}", self.name))?;
        }
        Ok(self.status)
    }

    /// Waits for the process to exit; kills it once the trial's processes could run for
    /// `timeout` (see `Bound`) without its exit.
    pub fn wait_status(&mut self, timeout: Duration) -> Result<ExitStatus, String> {
        let mut watch = Bound::trial(timeout);
        let mut nap = Duration::from_millis(1);
        loop {
            if let Some(s) = self.poll()? {
                return Ok(s);
            }
            if let Err(hang) = watch.step() {
                self.kill()?;
                return Err(format!(
                    "role `{}` (pid {}) still running when the trial's processes {hang}; \
                     killed\n{}",
                    self.name,
                    self.pid,
                    self.output()
                ));
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(20));
        }
    }

    /// Waits at most `timeout`; the role must have passed (exit 0).
    pub fn wait_ok(&mut self, timeout: Duration) -> CaseResult {
        let s = self.wait_status(timeout)?;
        if s.success() {
            Ok(())
        } else {
            Err(format!(
                "role `{}` (pid {}) failed ({})\n{}",
                self.name,
                self.pid,
                describe(s),
                self.output()
            ))
        }
    }

    /// SIGKILLs the process (by its pid) and reaps it.
    pub fn kill(&mut self) -> CaseResult {
        if self.poll()?.is_none() {
            // SAFETY: `kill` has no memory-safety preconditions; the pid is our own unreaped
            // child, so it cannot name another process.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            self.status = Some(
                self.child
                    .wait()
                    .map_err(|e| format!("reaping role {}: {e}", self.name))?,
            );
        }
        Ok(())
    }

    /// The role's stdout and stderr, for failure messages.
    pub fn output(&self) -> String {
        format!(
            "--- role `{}` stderr ---\n{}--- role `{}` stdout ---\n{}",
            self.name,
            tail(&self.err, 4000),
            self.name,
            tail(&self.out, 2000)
        )
    }
}

impl Drop for RoleProc {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

fn open_log(path: &Path) -> Result<fs::File, String> {
    fs::File::create(path).map_err(|e| format!("creating {}: {e}", path.display()))
}

fn tail(path: &Path, max: usize) -> String {
    let Ok(mut f) = fs::File::open(path) else {
        return "(no output file)\n".to_owned();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let skip = len.saturating_sub(max as u64);
    let _ = f.seek(SeekFrom::Start(skip));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    let mut s = String::from_utf8_lossy(&buf).into_owned();
    if skip > 0 {
        s.insert(0, '…');
    }
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => format!("{s:?}"),
    }
}

/// A limit on a trial, or on a wait of one of its processes for another: `limit` of the time
/// the processes of `group` could run ([`Watch`]), not wall time, which a loaded machine or a
/// paused trial ran out (robust26: the cases' 60 and 90 s, the fill check's 40 s and the role
/// waits' 20 s ran out only when the trial was nearly starved). A hang still ends within
/// `limit`, or after [`crate::progress::STILL_LOOKS`] looks of sleep. The watch, which reads
/// `/proc` at each look, starts only once the wait has gone on for a [`LOOK`] of wall time
/// (most trials and waits end sooner), its limit less that [`LOOK`]: the time before counts
/// as one look, as a look that comes late does (the processes, and this one, stopped or
/// starved then).
pub(crate) struct Bound {
    group: u32,
    limit: Duration,
    start: Instant,
    watch: Option<Watch>,
}

impl Bound {
    /// `limit` on process group `group`, from now.
    pub(crate) fn new(group: u32, limit: Duration) -> Bound {
        Bound {
            group,
            limit,
            start: Instant::now(),
            watch: None,
        }
    }

    /// `limit` on this process's group, the trial's (the case's child leads it, its roles
    /// are in it).
    pub(crate) fn trial(limit: Duration) -> Bound {
        // SAFETY: `getpgrp` has no preconditions and cannot fail.
        let group = unsafe { libc::getpgrp() };
        Bound::new(group as u32, limit)
    }

    /// `Err` once the processes should be taken for hung (call it often: it looks at most
    /// once a [`LOOK`]).
    pub(crate) fn step(&mut self) -> Result<(), Hang> {
        let Some(w) = &mut self.watch else {
            if self.start.elapsed() >= LOOK {
                let left = self.limit.saturating_sub(LOOK);
                self.watch = Some(Watch::new(&[self.group], Some(left)));
            }
            return Ok(());
        };
        w.step().map_err(|h| match h {
            Hang::Ran(_) => Hang::Ran(self.limit),
            still => still,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Parent side.

/// Entry point of the `conformance` test binary: a child runs its case or role; the parent
/// builds the trials and runs them.
pub fn main() -> ! {
    if let Ok(role) = std::env::var(ENV_ROLE) {
        child_main(Job::Role(role));
    }
    if let Ok(case) = std::env::var(ENV_CASE) {
        child_main(Job::Case(case));
    }
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        // Trials mostly wait on their child (device-side timeouts are whole seconds), so run
        // more of them than there are cores; `--test-threads` or RUST_TEST_THREADS override.
        args.test_threads = Some(
            std::env::var("RUST_TEST_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(8),
        );
    }
    let backends = match std::env::var(ENV_TEST_BACKEND).as_deref() {
        Err(_) | Ok("all") | Ok("") => vec![BackendKind::Sim, BackendKind::Driver],
        Ok(s) => match BackendKind::parse(s) {
            Some(k) => vec![k],
            None => {
                eprintln!("{ENV_TEST_BACKEND}={s:?}: expected `sim`, `driver` or `all`");
                std::process::exit(2);
            }
        },
    };
    // What killed runs of this binary left: their trials' folders and namespaces.
    leftovers::sweep_dirs(&std::env::temp_dir(), |name| {
        name.strip_prefix("acl-notify-").and_then(trial_owner)
    });
    leftovers::sweep_namespaces(trial_owner);
    let mut trials = Vec::new();
    for &kind in &backends {
        // The case list is the same generic function for every backend; `Sim` only serves to
        // instantiate it for the names.
        for case in crate::cases::all::<Sim>() {
            for &soc in Soc::ALL {
                if !(case.applies)(soc) || (case.sim_only && kind != BackendKind::Sim) {
                    continue;
                }
                let name = format!("{}::{}::{}", kind.name(), soc.name(), case.name);
                let (case_name, timeout) = (case.name, case.timeout);
                trials.push(Trial::ignorable_test(name, move || {
                    run_trial(kind, soc, case_name, timeout)
                }));
            }
        }
    }
    libtest_mimic::run(&args, trials).exit()
}

static TRIAL_SEQ: AtomicU32 = AtomicU32::new(0);

/// The namespace of a trial of this process: `conf-<pid>-<seq>`; its folder is
/// `$TMPDIR/acl-notify-<namespace>`.
fn trial_namespace(seq: u32) -> String {
    format!("conf-{}-{seq}", std::process::id())
}

/// The test process that made trial namespace `ns` ([`trial_namespace`]), if it is one.
fn trial_owner(ns: &str) -> Option<i32> {
    let (pid, seq) = ns.strip_prefix("conf-")?.split_once('-')?;
    seq.parse::<u32>().ok()?;
    pid.parse().ok().filter(|p| *p > 0)
}

/// The `libascendcl.so` cargo built next to the test binary (`target/<profile>/`).
pub fn driver_lib_path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    // target/<profile>/deps/conformance-<hash> → target/<profile>/libascendcl.so
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("unexpected test binary location {}", exe.display()))?;
    Ok(profile_dir.join("libascendcl.so"))
}

fn run_trial(
    kind: BackendKind,
    soc: Soc,
    case: &'static str,
    timeout: Duration,
) -> Result<Completion, Failed> {
    let seq = TRIAL_SEQ.fetch_add(1, Ordering::Relaxed);
    let namespace = trial_namespace(seq);
    let dir = std::env::temp_dir().join(format!("acl-notify-{namespace}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let out = dir.join("case.out");
    let err = dir.join("case.err");

    let mut cmd = Command::new(exe);
    cmd.env(ENV_CASE, case)
        .env_remove(ENV_ROLE)
        .env(ENV_BACKEND, kind.name())
        .env(ENV_DIR, &dir)
        .env(acl_notify_sim::ENV_SOC, soc.name())
        .env(acl_notify_sim::ENV_DEVICES, DEVICES.to_string())
        .env(acl_notify_sim::ENV_NAMESPACE, &namespace)
        .env(acl_notify_sim::ENV_SERVER_ID, "0")
        .stdin(Stdio::null())
        .stdout(open_log(&out)?)
        .stderr(open_log(&err)?)
        // Its own process group, so that a timeout kills the roles it started too.
        .process_group(0);
    if kind == BackendKind::Driver {
        let lib = driver_lib_path()?;
        if !lib.exists() {
            return Err(format!(
                "driver backend: {} does not exist — build the simulator's C library first \
                 with `cargo build -p acl-notify-capi` (same profile and target dir as the tests)",
                lib.display()
            )
            .into());
        }
        cmd.env(ENV_DRIVER_LIB, lib);
    }

    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("spawning the case child: {e}"))?;
    let pid = child.id() as i32;
    let mut nap = Duration::from_millis(1);
    let mut pauses = PauseWatch::new(start);
    // The case's limit is the time its processes could run (the child leads its own process
    // group, its roles in it), not wall time, which a starved machine or a paused trial ran
    // out (robust26: the 60 and 90 s ran out only when nearly starved); a hang still ends
    // within it, or after `progress::STILL_LOOKS` looks of sleep.
    let mut watch = Bound::new(pid as u32, timeout);
    let status = loop {
        pauses.look(Instant::now());
        match child.try_wait() {
            Ok(Some(s)) => break Ok(s),
            Ok(None) => {
                if let Err(hang) = watch.step() {
                    // SAFETY: no memory-safety preconditions; `pid` is our unreaped child and
                    // the leader of its own process group, so `-pid` names only that group.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                    let _ = child.wait();
                    break Err(format!(
                        "TIMEOUT: the case's processes {hang}; its process group was killed"
                    ));
                }
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(20));
            }
            Err(e) => break Err(format!("waiting for the case child: {e}")),
        }
    };
    let elapsed = start.elapsed();
    let removed = Sim::remove_namespace(&namespace);

    let stdout = fs::read_to_string(&out).unwrap_or_default();
    let verdict = match status {
        Ok(s) if s.success() && stdout.lines().any(|l| l == PASS_MARK) => Ok(Completion::Completed),
        Ok(s) if s.code() == Some(SKIP_EXIT) => {
            let reason = fs::read_to_string(&err).unwrap_or_default();
            Ok(Completion::ignored_with(reason.trim().to_owned()))
        }
        Ok(s) => Err(format!(
            "the case failed ({}) after {elapsed:.2?}",
            describe(s)
        )),
        Err(e) => Err(e),
    };
    // The folder goes whatever the verdict: what a failure needs from it (the ends of the
    // case's and every role's logs) is in the failure message; the rest (keys, PID files,
    // data) is the trial's own scratch. A killed run's folders go at the next run's start.
    let verdict = match verdict {
        Ok(c) => match removed {
            Ok(_) => Ok(c),
            Err(e) => Err(format!(
                "the case passed, but removing namespace {namespace} failed: {e}"
            )),
        },
        Err(head) => Err(format!(
            "{head}\n--- failure (child stderr) ---\n{}--- progress (child stdout) ---\n{}{}\
             (backend {}, SoC {}, namespace {namespace}; the trial's folder {} is removed: the \
             ends of its logs are above){}{}",
            tail(&err, 8000),
            tail(&out, 3000),
            role_logs(&dir),
            kind.name(),
            soc.name(),
            dir.display(),
            if kind == BackendKind::Driver {
                stale_lib_hint()
            } else {
                ""
            },
            pauses.note(start + elapsed).unwrap_or_default()
        )),
    };
    let _ = fs::remove_dir_all(&dir);
    verdict.map_err(Failed::from)
}

/// The ends of the logs of every role process a trial started (its folder's `<role>-<pid>-<n>
/// .err` and `.out`, by name), for its failure message: a role the case was waiting for when
/// it failed or timed out may say why.
fn role_logs(dir: &Path) -> String {
    let Ok(entries) = fs::read_dir(dir) else {
        return String::new();
    };
    let mut logs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == "err" || x == "out")
                && p.file_stem().is_some_and(|s| s != "case")
        })
        .collect();
    logs.sort();
    logs.iter()
        .map(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            format!("--- role log {name} ---\n{}", tail(p, 2000))
        })
        .collect()
}

/// For driver failures: a hint when `libascendcl.so` is older than the simulator's or the
/// core's sources (a stale C library is a common cause of driver-only failures).
fn stale_lib_hint() -> &'static str {
    static HINT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HINT.get_or_init(|| {
        let Ok(lib) = driver_lib_path() else {
            return String::new();
        };
        let Ok(lib_time) = fs::metadata(&lib).and_then(|m| m.modified()) else {
            return String::new();
        };
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut newest = None;
        for d in ["backend-sim/src", "backend-sim/capi/src", "core/src"] {
            newest_mtime(&root.join(d), &mut newest);
        }
        match newest {
            Some((t, path)) if t > lib_time => format!(
                "\nnote: {} is older than {} — rebuild it with `cargo build -p acl-notify-capi`",
                lib.display(),
                path.display()
            ),
            _ => String::new(),
        }
    })
}

fn newest_mtime(dir: &Path, newest: &mut Option<(std::time::SystemTime, PathBuf)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            newest_mtime(&p, newest);
        } else if let Ok(t) = e.metadata().and_then(|m| m.modified())
            && newest.as_ref().is_none_or(|(n, _)| t > *n)
        {
            *newest = Some((t, p));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Child side.

/// What a child process runs.
pub(crate) enum Job {
    /// A case (the trial's main process, coordinator of multi-process cases).
    Case(String),
    /// A role of a multi-process case.
    Role(String),
}

fn child_main(job: Job) -> ! {
    // A child must not outlive the thread that started it (a killed test run, a killed
    // coordinator): the kernel SIGKILLs it when that thread exits.
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes plain integers and touches no memory of ours.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    let result = child_run(&job);
    // Exit without dropping the backend: a stream still blocked on a wait of a failed case
    // must not keep the process alive.
    match result {
        Ok(()) => {
            println!("{PASS_MARK}");
            std::process::exit(0);
        }
        Err(msg) => match msg.strip_prefix(SKIP_PREFIX) {
            Some(reason) => {
                eprintln!("{reason}");
                std::process::exit(SKIP_EXIT);
            }
            None => {
                eprintln!("{msg}");
                std::process::exit(1);
            }
        },
    }
}

fn child_run(job: &Job) -> CaseResult {
    let kind = std::env::var(ENV_BACKEND)
        .ok()
        .and_then(|s| BackendKind::parse(&s))
        .ok_or_else(|| format!("{ENV_BACKEND} not set to sim or driver"))?;
    let soc_name = std::env::var(acl_notify_sim::ENV_SOC).unwrap_or_default();
    let soc = Soc::from_name(&soc_name).map_err(|e| format!("bad SoC {soc_name:?}: {e}"))?;
    match kind {
        BackendKind::Sim => {
            let b = Sim::from_env()
                .map_err(|e| format!("opening the simulator (Sim::from_env): {e}"))?;
            match std::env::var(crate::fault::ENV_FAULT) {
                Ok(f) if !f.is_empty() => {
                    let fault = crate::fault::Fault::parse(&f)
                        .ok_or_else(|| format!("unknown {}={f:?}", crate::fault::ENV_FAULT))?;
                    run_job(&crate::fault::Faulty::new(b, fault), kind, soc, job)
                }
                _ => run_job(&b, kind, soc, job),
            }
        }
        BackendKind::Driver => crate::driver::run(kind, soc, job),
    }
}

/// Runs a job against an opened backend: checks the backend's identity, then runs the case or
/// role, turning a panic into a failure.
pub(crate) fn run_job<B: TestBackend>(b: &B, kind: BackendKind, soc: Soc, job: &Job) -> CaseResult {
    if b.soc() != soc {
        return Err(format!(
            "the backend reports SoC {}, the trial configured {}",
            b.soc(),
            soc
        ));
    }
    if b.device_count() != DEVICES {
        return Err(format!(
            "the backend reports {} devices, the trial configured {DEVICES}",
            b.device_count()
        ));
    }
    let ctx = Ctx {
        b,
        kind,
        soc,
        dir: PathBuf::from(std::env::var_os(ENV_DIR).ok_or("ACL_NOTIFY_CONF_DIR not set")?),
        namespace: std::env::var(acl_notify_sim::ENV_NAMESPACE).unwrap_or_default(),
        arg: std::env::var(ENV_ROLE_ARG).unwrap_or_default(),
        roles_spawned: AtomicU32::new(0),
    };
    let run = match job {
        Job::Case(name) => {
            crate::cases::all::<B>()
                .into_iter()
                .find(|c| c.name == name)
                .ok_or_else(|| format!("no case named {name}"))?
                .run
        }
        Job::Role(name) => {
            crate::cases::roles::<B>()
                .into_iter()
                .find(|r| r.name == name)
                .ok_or_else(|| format!("no role named {name}"))?
                .run
        }
    };
    match catch_unwind(AssertUnwindSafe(|| run(&ctx))) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(non-string panic payload)".to_owned());
            Err(format!("the case panicked: {msg}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether process `pid` is stopped (`T` in `/proc/PID/stat`).
    fn stopped(pid: i32) -> bool {
        fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| Some(s[s.rfind(')')? + 1..].trim_start().starts_with('T')))
            .unwrap_or(false)
    }

    /// A role stopped (SIGSTOP: a script pausing processes for a quiet benchmark window) for
    /// over twice its bound is waited for, and passes once continued: the bound is the time
    /// the trial's processes could run (its first second counted whole: see [`Bound`]).
    /// Before, the wait gave up on wall time after 2 s and killed it.
    #[test]
    fn a_role_stopped_past_its_bound_is_waited_for() {
        let child = Command::new("sh")
            .args(["-c", "kill -STOP $$; exit 0"])
            .spawn()
            .expect("sh");
        let pid = child.id() as i32;
        let mut role = RoleProc {
            name: "stopped".into(),
            pid,
            child,
            status: None,
            out: PathBuf::from("/dev/null"),
            err: PathBuf::from("/dev/null"),
        };
        // A bound that only turns a hang into a failure.
        let t = Instant::now();
        while !stopped(pid) {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the role never stopped"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let bound = Duration::from_secs(2);
        let cont = std::thread::spawn(move || {
            std::thread::sleep(bound * 5 / 2);
            // SAFETY: no memory-safety preconditions; `pid` is this test's unreaped child.
            unsafe { libc::kill(pid, libc::SIGCONT) };
        });
        let r = role.wait_status(bound);
        cont.join().unwrap();
        assert!(r.as_ref().is_ok_and(ExitStatus::success), "{r:?}");
    }
}

//! Nothing left behind: a run's simulator namespaces (its files in `/dev/shm`) are removed
//! however the run ends.
//!
//! - **Normally, by an error return or a panic:** [`RunFiles`] removes them when dropped, and
//!   `main` holds it for the whole run.
//! - **By SIGINT, SIGTERM or SIGHUP** (Ctrl-C, `timeout`, a closed terminal): [`RunFiles::start`]
//!   blocks those signals and waits for them on a thread of its own, which kills the run's
//!   child processes first (a child that opened a namespace after the files went would make
//!   them again), removes the files, and ends the process by the same signal.
//! - **By SIGKILL** (or anything else no handler sees): the next run removes the namespaces of
//!   runs whose process is gone ([`sweep_dead_runs`]).
//!
//! A run's namespaces are found by name, not from a list: `acl-notify-bench-<pid>` and every
//! `acl-notify-bench-<pid>-<suffix>`, so a group with a namespace of its own needs no line here.

use acl_notify_sim::Sim;

use crate::child;

/// The start of every bench namespace's name; the run's process id follows.
const PREFIX: &str = "acl-notify-bench-";

/// The signals after which the run cleans up and ends.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The namespace of the run of process `pid` (the groups' own ones add `-<suffix>`).
pub fn namespace(pid: u32) -> String {
    format!("{PREFIX}{pid}")
}

/// The process id of the run a namespace belongs to, if it is a bench namespace.
fn run_pid(ns: &str) -> Option<u32> {
    let rest = ns.strip_prefix(PREFIX)?;
    let digits = rest.split_once('-').map_or(rest, |(d, _)| d);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Removes the namespaces of the run of process `pid`; returns how many files went.
fn remove_run(pid: u32) -> usize {
    let Ok(all) = Sim::namespaces_with_files() else {
        return 0;
    };
    all.iter()
        .filter(|ns| run_pid(ns) == Some(pid))
        .map(|ns| Sim::remove_namespace(ns).unwrap_or(0))
        .sum()
}

/// Whether process `pid` exists (in this PID namespace).
fn alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Removes what earlier runs left because they were killed outright: the namespaces of bench
/// runs whose process no longer exists. Returns the process ids and how many files went.
pub fn sweep_dead_runs() -> (Vec<u32>, usize) {
    let me = std::process::id();
    let Ok(all) = Sim::namespaces_with_files() else {
        return (Vec::new(), 0);
    };
    let mut dead: Vec<u32> = all
        .iter()
        .filter_map(|ns| run_pid(ns))
        .filter(|&p| p != me && !alive(p))
        .collect();
    dead.sort_unstable();
    dead.dedup();
    let files = dead.iter().map(|&p| remove_run(p)).sum();
    (dead, files)
}

/// Unblocks the signals [`RunFiles::start`] blocked, in a child process (`--role`): it
/// inherits the mask, and must die of them as any program does.
pub fn unblock_in_child() {
    // SAFETY: a zeroed sigset_t is valid storage; sigemptyset initialises it; unblocking
    // signals has no memory effects.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// Whether signal `s` is set to be ignored (`SIG_IGN`).
fn ignored(s: libc::c_int) -> bool {
    // SAFETY: a zeroed sigaction is valid storage for the kernel to fill; a null new action
    // only reads the current one.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(s, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// The run's files: removed when this is dropped, or when a signal of [`SIGNALS`] comes
/// (unless the run was started with it ignored).
#[derive(Debug)]
pub struct RunFiles {
    pid: u32,
}

impl RunFiles {
    /// Starts guarding this process's namespaces.
    ///
    /// # Safety
    ///
    /// No other thread may exist yet: the signals must be blocked in every thread, and threads
    /// inherit the mask of the one that starts them. (So do child processes: a `--role` child
    /// unblocks them first thing, [`unblock_in_child`].)
    pub unsafe fn start() -> Result<RunFiles, String> {
        // SAFETY: a zeroed sigset_t is valid storage; sigemptyset initialises it.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is valid, the signal numbers are.
        unsafe {
            libc::sigemptyset(&mut set);
            // A signal the run was started to ignore (`nohup`'s SIGHUP, the SIGINT of a job a
            // script put in the background) stays ignored: blocked, it would be queued and
            // taken by `sigwait` all the same, and end the run.
            for s in SIGNALS.into_iter().filter(|&s| !ignored(s)) {
                libc::sigaddset(&mut set, s);
            }
        }
        // SAFETY: `set` is initialised; the caller guarantees this is the only thread.
        let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if r != 0 {
            return Err(format!(
                "blocking SIGINT/SIGTERM/SIGHUP: {}",
                std::io::Error::from_raw_os_error(r)
            ));
        }
        let pid = std::process::id();
        std::thread::Builder::new()
            .name("bench-signals".into())
            .spawn(move || on_signal(set, pid))
            .map_err(|e| format!("starting the signal thread: {e}"))?;
        Ok(RunFiles { pid })
    }
}

impl Drop for RunFiles {
    fn drop(&mut self) {
        remove_run(self.pid);
    }
}

/// The signal thread: waits for one of `set`, then kills the children, removes the run's
/// files and ends the process by that signal.
fn on_signal(set: libc::sigset_t, pid: u32) {
    let mut sig: libc::c_int = 0;
    // SAFETY: `set` is initialised and `sig` is valid for the write; sigwait blocks until one
    // of the (blocked) signals is pending.
    while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
    child::kill_all_for_exit();
    let files = remove_run(pid);
    eprintln!("acl-notify-bench: signal {sig}: children killed, {files} shared files removed");
    // Die of the signal itself, as if there had been no handler (the caller's shell or
    // `timeout` sees the same status).
    // SAFETY: resetting a signal's action, unblocking it for this thread and raising it there
    // have no memory effects; the default action ends the process.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut one: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut one);
        libc::sigaddset(&mut one, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_found_by_its_namespaces_name() {
        assert_eq!(run_pid("acl-notify-bench-123"), Some(123));
        assert_eq!(run_pid("acl-notify-bench-123-cp1"), Some(123));
        assert_eq!(run_pid("acl-notify-bench-123-capi"), Some(123));
        assert_eq!(run_pid("acl-notify-bench-"), None);
        assert_eq!(run_pid("acl-notify-bench-x1"), None);
        assert_eq!(run_pid("acl-notify-bench-12x"), None);
        assert_eq!(run_pid("other-123"), None);
        assert_eq!(run_pid(&namespace(77)), Some(77));
    }
}

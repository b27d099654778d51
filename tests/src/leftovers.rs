//! What test runs that were killed leave behind, and sweeping it at the start of the next run.
//!
//! A test process killed by a deadline or by hand runs no `Drop` and no clean-up: its scratch
//! directories under `$TMPDIR` and its simulator namespaces under `/dev/shm` stay. Each name
//! carries the pid of the test process that made it, so a later run removes those whose
//! process is gone ([`sweep_dirs`], [`sweep_namespaces`]) and leaves those of runs still going
//! (another test binary of the same `cargo test`, another worktree's run) alone.

use std::path::Path;

use acl_notify_sim::Sim;

/// Whether process `pid` exists (a zombie counts: it is not gone yet).
pub fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 sends nothing; kill(2) only checks that the process exists.
    let sent = unsafe { libc::kill(pid, 0) } == 0;
    sent || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Removes every entry of `dir` (with what is in it) whose name `owner` maps to a process that
/// is gone; returns how many went. Names `owner` maps to `None` are not the caller's.
pub fn sweep_dirs(dir: &Path, owner: impl Fn(&str) -> Option<i32>) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        if name
            .to_str()
            .and_then(&owner)
            .is_some_and(|pid| !alive(pid))
        {
            let p = e.path();
            let gone = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            n += usize::from(gone.is_ok());
        }
    }
    n
}

/// Removes the simulator namespaces (their `/dev/shm` files, device memory included) whose
/// name `owner` maps to a process that is gone and which no live process uses
/// (`inspect::remove_unused` refuses while one of its processes lives); returns them.
pub fn sweep_namespaces(owner: impl Fn(&str) -> Option<i32>) -> Vec<String> {
    let Ok(all) = Sim::namespaces_with_files() else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|ns| owner(ns).is_some_and(|pid| !alive(pid)))
        .filter(|ns| acl_notify_sim::inspect::remove_unused(ns).is_ok())
        .collect()
}

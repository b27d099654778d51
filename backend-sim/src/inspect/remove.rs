//! Removing a namespace nobody uses: its shared files under `/dev/shm` stay after its last
//! process ends (a later process joins the same machine), and `acl-notify-inspect rm` deletes
//! them once no process of the namespace is alive.

use super::{Liveness, namespaces, snapshot};
use crate::Sim;

/// Deletes `namespace`'s shared files (every server's, every kind) if none of its registered
/// processes is alive; returns how many files went. Refused, with the processes named, while
/// one is alive or cannot be told from here, or when a server's file cannot be read (another
/// layout version, damage) and some process maps it; one that cannot be read and no process
/// maps goes with the rest (an upgrade's leftovers). A process that opens the namespace
/// meanwhile keeps working on its copy, which nobody else then sees.
pub fn remove_unused(namespace: &str) -> Result<usize, String> {
    let mut alive = Vec::new();
    for (ns, server) in namespaces() {
        if ns != namespace {
            continue;
        }
        let snap = match snapshot(namespace, server) {
            Ok(snap) => snap,
            // A file this build cannot read (another layout version, left by an older build,
            // or damaged) that no process maps has no live process: every process of a server
            // maps its file while it lives. Removed with the rest; one that some process maps
            // is refused as before.
            Err(_) if unmapped(&crate::shm::file_path(namespace, server)) => continue,
            Err(e) => {
                return Err(format!(
                    "namespace {namespace} server {server}: {e}; nothing removed"
                ));
            }
        };
        alive.extend(
            snap.processes
                .iter()
                .filter(|p| !p.alive.is_gone())
                .map(|p| match p.alive {
                    Liveness::Unknown => format!("{} (server {server}, not known)", p.pid),
                    _ => format!("{} (server {server})", p.pid),
                }),
        );
    }
    if !alive.is_empty() {
        return Err(format!(
            "namespace {namespace} is in use by process(es) {}; nothing removed",
            alive.join(", ")
        ));
    }
    Sim::remove_namespace(namespace).map_err(|e| e.to_string())
}

/// Whether no process maps the file at `path` (`false` when that cannot be told).
fn unmapped(path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata(path)
        .is_ok_and(|st| crate::sys::file_mapped(st.dev(), st.ino()) == Some(false))
}

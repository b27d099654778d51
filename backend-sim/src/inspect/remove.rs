//! Removing a namespace nobody uses: its shared files under `/dev/shm` stay after its last
//! process ends (a later process joins the same machine), and `acl-notify-inspect rm` deletes
//! them once no process of the namespace is alive.

use super::{Liveness, namespaces, snapshot};
use crate::Sim;

/// Deletes `namespace`'s shared files (every server's, every kind) if none of its registered
/// processes is alive; returns how many files went. Refused, with the processes named, while
/// one is alive or cannot be told from here, or when a server's file cannot be read (it is
/// then left alone: delete it by hand if it is not in use). A process that opens the
/// namespace meanwhile keeps working on its copy, which nobody else then sees.
pub fn remove_unused(namespace: &str) -> Result<usize, String> {
    let mut alive = Vec::new();
    for (ns, server) in namespaces() {
        if ns != namespace {
            continue;
        }
        let snap = snapshot(namespace, server)
            .map_err(|e| format!("namespace {namespace} server {server}: {e}; nothing removed"))?;
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

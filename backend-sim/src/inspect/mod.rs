//! Read-only inspection of a simulated machine: [`snapshot`] maps a namespace's shared files
//! `PROT_READ` (no registration in the process table, no garbage collection, nothing written)
//! and returns a [`MachineSnapshot`] — every registered process (alive or dead), each device's
//! id budgets, and each live notify and count notify with its state, owner, holders, whitelist,
//! pending waiters (down to the stream threads blocked on it) and last recorder. Rendered as a
//! table ([`MachineSnapshot::to_text`]) or JSON ([`MachineSnapshot::to_json`]); used by the
//! `acl-notify-inspect` binary and `cargo xtask inspect`.
//!
//! # Trust
//!
//! The files are written by other processes, so everything is validated: the header (magic,
//! layout version, sizes, offsets, file size) before any offset is used, process-table states,
//! holder and whitelist entries. A corrupt entry is reported in [`MachineSnapshot::problems`]
//! and skipped; nothing here panics on bad memory. The header and process-table types are the
//! simulator's own (`shm.rs`, layout version [`LAYOUT_VERSION`](crate::shm::LAYOUT_VERSION)); a file of another version is
//! refused.
//!
//! # Waiting threads
//!
//! A stream stalled in a wait sleeps in `futex(2)` on a word of the notify's slot. For every
//! live registered process, the stream threads (`/proc/<pid>/task/*`) are sampled: a thread in
//! `futex` on an address inside that process's mapping of the file is waiting on the slot the
//! offset names. This needs the right to read `/proc/<pid>/task/<tid>/syscall` (same user, and
//! ptrace not restricted); without it, the waiters are counted but not named, and
//! [`MachineSnapshot::problems`] says why.
//!
//! # Where things are
//!
//! This module holds the snapshot's types (and the diagnosis of a stuck notify); `read` maps
//! and reads the files, `procscan` finds the sleeping stream threads in `/proc`, `text` and
//! `json` render a snapshot, `remove` deletes a namespace nobody uses. A new kind of resource adds its snapshot type here, its reading
//! to `read` (or a module of its own) and a section to each renderer.

mod json;
pub(crate) mod liveness;
mod procscan;
mod read;
mod remove;
#[cfg(test)]
mod tests;
mod text;

pub use json::json_str;
pub use liveness::{Liveness, WhitelistSnap};
pub use read::{namespaces, notify_file_path, snapshot};
pub use remove::remove_unused;

use std::path::PathBuf;
use std::time::Duration;

use acl_notify_core::{CreateFlags, Soc};

/// A process as the machine knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcSnap {
    /// Its slot in the process table.
    pub index: u32,
    /// Process id.
    pub pid: i32,
    /// Registration state: `"registering"`, `"registered"`, `"being reclaimed (pid: the reclaimer's)"`.
    pub state: &'static str,
    /// Whether it runs.
    pub alive: Liveness,
    /// Its label (`ACL_NOTIFY_SIM_LABEL`, or the launcher's rank; empty: none).
    pub label: String,
}

/// A process referred to by a notify (owner, holder, whitelisted, recorder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidRef {
    /// Process id.
    pub pid: i32,
    /// Whether it runs.
    pub alive: Liveness,
}

/// One device's id budgets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSnap {
    /// Device number.
    pub device: u32,
    /// Notify ids in use (all processes).
    pub notifies_in_use: u32,
    /// Notify ids per device.
    pub notifies_max: u32,
    /// Count-notify ids in use, when the SoC has count notifies and the file exists.
    pub cnt_in_use: Option<u32>,
    /// Count-notify ids per device (0 without count notifies).
    pub cnt_max: u32,
}

/// A stream thread found sleeping on a notify or count notify.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingThread {
    /// Its process.
    pub pid: i32,
    /// Its thread id.
    pub tid: i32,
    /// Its name (a simulator stream is `acl-sim-d<device>-s<n>` or `acl-sim-d<device>-default`).
    pub name: String,
    /// What it sleeps on: `"the flag (first in line)"`, `"its turn (queued)"`, `"the count"`.
    pub on: &'static str,
}

/// How a notify was exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportSnap {
    /// Not exported.
    No,
    /// Exported; importers must be whitelisted.
    Whitelist,
    /// Exported with `DISABLE_PID_VALIDATION`.
    Open,
    /// The stored value is invalid.
    Corrupt,
}

impl ExportSnap {
    fn word(self) -> &'static str {
        match self {
            ExportSnap::No => "not exported",
            ExportSnap::Whitelist => "exported (whitelist)",
            ExportSnap::Open => "exported (open)",
            ExportSnap::Corrupt => "corrupt export state",
        }
    }
}

/// The last record of a notify.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecordSnap {
    /// Who recorded.
    pub by: PidRef,
    /// How long before the snapshot.
    pub ago: Duration,
}

/// One live notify.
#[derive(Clone, Debug, PartialEq)]
pub struct NotifySnap {
    /// Owner's device.
    pub device: u32,
    /// Notify id.
    pub id: u32,
    /// Generation of the id.
    pub generation: u32,
    /// Create flags.
    pub flags: CreateFlags,
    /// Export state.
    pub export: ExportSnap,
    /// Whether a record is pending (the flag is set).
    pub flag_set: bool,
    /// Waiters holding a ticket (queued or being served).
    pub waiters: u32,
    /// Of those, the ones of processes that are dead (their tickets go at the next GC, or
    /// when a live waiter behind them cancels them).
    pub dead_waiters: u32,
    /// Stream threads found sleeping on it.
    pub waiting_threads: Vec<WaitingThread>,
    /// The creating process.
    pub owner: PidRef,
    /// The owner's pid once it destroyed its handle (the notify lives on for the tasks queued
    /// before and for importers).
    pub destroyed_by: Option<i32>,
    /// Processes holding a reference (owner and importers), dead ones included until GC.
    pub holders: Vec<PidRef>,
    /// Whitelisted importers.
    pub whitelist: Vec<WhitelistSnap>,
    /// The last record, if any.
    pub last_record: Option<RecordSnap>,
    /// Records that merged into an already-set flag (since the last wait, in all).
    pub merged: crate::MergedRecords,
}

/// One live count notify.
#[derive(Clone, Debug, PartialEq)]
pub struct CntSnap {
    /// Device.
    pub device: u32,
    /// Count-notify id.
    pub id: u32,
    /// Generation of the id.
    pub generation: u32,
    /// The count.
    pub count: u32,
    /// Waits in progress.
    pub waiters: u32,
    /// Stream threads found sleeping on it.
    pub waiting_threads: Vec<WaitingThread>,
    /// The creating process.
    pub owner: PidRef,
    /// The last record: who, mode name, value, how long ago.
    pub last_record: Option<(PidRef, &'static str, u32, Duration)>,
}

/// Everything [`snapshot`] saw.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineSnapshot {
    /// Namespace.
    pub namespace: String,
    /// SuperPod server.
    pub server: u32,
    /// The notify file.
    pub path: PathBuf,
    /// SoC family.
    pub soc: Soc,
    /// Devices.
    pub devices: u32,
    /// Registered processes.
    pub processes: Vec<ProcSnap>,
    /// Per-device budgets.
    pub device_budgets: Vec<DeviceSnap>,
    /// Live notifies, by device then id.
    pub notifies: Vec<NotifySnap>,
    /// Live count notifies, by device then id.
    pub cnt_notifies: Vec<CntSnap>,
    /// The streams of the namespace (every server) that publish in its wait-for graph.
    pub streams: Vec<crate::waitgraph::StreamView>,
    /// Every cycle of streams waiting on each other, described ([`crate::waitgraph`]).
    pub deadlocks: Vec<String>,
    /// Device memory, by device ([`crate::mem::inspect`]).
    pub memory: Vec<crate::mem::inspect::DeviceMemorySnap>,
    /// What could not be read or was inconsistent.
    pub problems: Vec<String>,
}

/// What the inspector says of a notify whose owner, `pid`, destroyed its handle.
pub(crate) fn destroyed_text(pid: i32) -> String {
    format!(
        "destroyed by its owner pid {pid} (aclrtDestroyNotify): only the tasks queued before \
         that and importers' handles still hold it"
    )
}

impl NotifySnap {
    /// A one-line diagnosis when the notify looks stuck: waiters, no pending record, and no
    /// live process other than the waiters' that could record it; or its owner destroyed it.
    pub fn diagnosis(&self) -> Option<String> {
        if self.waiters == 0 || self.flag_set {
            return None;
        }
        if let Some(pid) = self.destroyed_by {
            return Some(format!(
                "{} waiter(s) on a notify {}: what records it now is a record queued before \
                 the destroy, or an importer",
                self.waiters,
                destroyed_text(pid)
            ));
        }
        if self.dead_waiters == self.waiters {
            return Some(format!(
                "{} waiter(s), all of dead processes: nothing waits on it any more (the \
                 tickets go at the next gc)",
                self.waiters
            ));
        }
        let waiting_pids: Vec<i32> = self.waiting_threads.iter().map(|t| t.pid).collect();
        let mut recorders: Vec<PidRef> = self.holders.clone();
        for w in &self.whitelist {
            if !recorders.iter().any(|r| r.pid == w.pid) {
                recorders.push(PidRef {
                    pid: w.pid,
                    alive: w.alive,
                });
            }
        }
        let others: Vec<&PidRef> = recorders
            .iter()
            .filter(|r| !waiting_pids.contains(&r.pid) && r.pid != self.owner.pid)
            .collect();
        let dead: Vec<String> = others
            .iter()
            .filter(|r| r.alive.is_gone())
            .map(|r| format!("{} {}", r.pid, r.alive.word()))
            .collect();
        if others.is_empty() {
            Some(format!(
                "{} waiter(s) and no other process holds or may import it: only the owner \
                 (pid {}) can record it",
                self.waiters, self.owner.pid
            ))
        } else if others.iter().all(|r| r.alive.is_gone()) {
            Some(format!(
                "STUCK: {} waiter(s), no record pending, and every other process that holds or \
                 may import it is dead or exited (pid {}): nobody left to record it",
                self.waiters,
                dead.join(", ")
            ))
        } else {
            None
        }
    }
}

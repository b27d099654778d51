//! Whether a process the inspector names is alive ([`Liveness`]), and a whitelist entry with
//! its process's liveness ([`WhitelistSnap`]): shared by the notify, count-notify and device
//! memory parts of a snapshot.

use crate::sys;

/// Whether a process is alive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Liveness {
    /// Running (and, where its start time is known, the same process, not a recycled PID).
    Alive,
    /// Gone (or its PID now belongs to another process).
    Dead,
    /// Gone after it ended normally (`exit()`, a return from `main`, or its last `Sim` of the
    /// namespace dropped), as it noted in the wait-for graph's process records.
    Exited,
    /// Cannot be told from here (a process on another SuperPod server).
    Unknown,
}

impl Liveness {
    pub(super) fn of(pid: i32, start_time: u64) -> Liveness {
        if sys::pid_alive(pid, start_time) {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }

    /// A whitelist entry's process (`start_time` and `identity` as `sys::process_identity`
    /// made them).
    pub(super) fn of_entry(pid: i32, start_time: u64, identity: u64) -> Liveness {
        if sys::identity_alive(pid, start_time, identity) {
            Liveness::Alive
        } else {
            Liveness::Dead
        }
    }

    /// Not running any more, whether it exited normally or died.
    pub fn is_gone(self) -> bool {
        matches!(self, Liveness::Dead | Liveness::Exited)
    }

    /// `"alive"`, `"dead"`, `"exited"` or `"unknown"`.
    pub fn word(self) -> &'static str {
        match self {
            Liveness::Alive => "alive",
            Liveness::Dead => "dead",
            Liveness::Exited => "exited",
            Liveness::Unknown => "unknown",
        }
    }
}

/// One whitelist entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WhitelistSnap {
    /// Where it admits its process ([`acl_notify_core::sdid`]): a device's sdid, any device
    /// of a server (a same-server entry), or anywhere.
    pub sdid: u32,
    /// The SuperPod server of `sdid`; `u32::MAX` for an entry of any server.
    pub server: u32,
    /// Process id.
    pub pid: i32,
    /// Whether it runs (unknown on another server).
    pub alive: Liveness,
}

impl WhitelistSnap {
    /// The entry of sdid `sdid` for `pid`, alive as `alive` says.
    pub fn new(sdid: u32, pid: i32, alive: Liveness) -> WhitelistSnap {
        WhitelistSnap {
            sdid,
            server: acl_notify_core::sdid::server_of(sdid).unwrap_or(u32::MAX),
            pid,
            alive,
        }
    }
}

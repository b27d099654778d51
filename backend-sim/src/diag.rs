//! Self-explaining errors: the facts about a notify that a wait timeout, a refused import or an
//! exhausted device reports in its message (and so in `Display` and, through the C library,
//! `aclGetRecentErrMsg()`): owner and whether it is alive, whitelisted PIDs and which are
//! alive, who recorded last and when, who holds references; and for an exhausted device, who
//! owns its ids, which process-table entries hold them, and how many have no live notify.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{PoisonError, Weak};

use acl_notify_core::sdid;
use acl_notify_core::table::{ExportState, LastReset, MAX_PROCS, NotifySlot, SlotState};
use acl_notify_core::whitelist::WhitelistEntry;

use crate::fork::PerProcess;
use crate::shm::{P_ALIVE, P_CLAIMING, P_FREE, P_RECLAIMING, ShmFile};
use crate::sys;

/// What a membership of an etcd cluster (cluster mode, `crate::cluster`) knows of the
/// processes of other hosts: for the messages below, which name whitelisted processes of other
/// servers.
pub(crate) trait RemoteLiveness: Send + Sync {
    /// What the cluster knows of each process `(server, pid)` of `procs`, in the same order;
    /// `None` when the cluster does not answer. At most two requests to the cluster for all
    /// of them (the liveness of all, then whether those gone left), so a message waits at
    /// most two bounds of the cluster's client (3 s by default) however many processes it
    /// names.
    fn alive(&self, procs: &[(u32, i32)]) -> Option<Vec<RemoteState>>;

    /// `"; this process's own cluster lease expired …"` if the lease this process published
    /// notify `id` of device `dev` under was found expired (the other hosts took it for dead
    /// meanwhile, and their imports of it went stale), else nothing (also for a notify it
    /// published only after it joined again, or never): a message about that notify that
    /// names other hosts' processes adds it, so that it does not blame only them.
    fn own_lapse(&self, dev: u32, id: u32) -> String {
        let _ = (dev, id);
        String::new()
    }
}

/// A process of another host as the cluster knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RemoteState {
    /// Its lease is live.
    Live,
    /// It left the cluster normally (`aclFinalize`, or its `Sim` dropped): it marked so as it
    /// left.
    Exited,
    /// Its lease expired without such a mark: it was killed, crashed, or was cut off.
    Dead,
}

impl RemoteState {
    /// The words a message gives it.
    pub(crate) fn words(self) -> &'static str {
        match self {
            RemoteState::Live => "its cluster lease is live",
            RemoteState::Exited => "exited: it left the cluster",
            RemoteState::Dead => "dead: its cluster lease expired",
        }
    }
}

/// This process's cluster memberships, by namespace (a forked child starts with none: its
/// parent's are the parent's).
static REMOTE: PerProcess<Vec<(String, Weak<dyn RemoteLiveness>)>> = PerProcess::new(Vec::new);

/// Lists `membership` as what the files of `namespace` ask about other hosts' processes (and
/// forgets memberships that ended).
pub(crate) fn register_remote_liveness(namespace: &str, membership: Weak<dyn RemoteLiveness>) {
    // Fails only without the fork handler, which opening the `Sim` checked.
    if let Ok(mut r) = REMOTE.lock() {
        r.retain(|(_, w)| w.strong_count() > 0);
        r.push((namespace.to_owned(), membership));
    }
}

/// This process's cluster membership through the files of `namespace`, if it has one.
fn membership(namespace: &str) -> Option<std::sync::Arc<dyn RemoteLiveness>> {
    REMOTE
        .get()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(ns, _)| ns == namespace)
        .find_map(|(_, w)| w.upgrade())
}

/// [`RemoteLiveness::own_lapse`] of this process's membership through `namespace` for notify
/// `id` of device `dev` (nothing outside cluster mode).
fn own_lapse(namespace: &str, dev: u32, id: u32) -> String {
    membership(namespace).map_or_else(String::new, |m| m.own_lapse(dev, id))
}

/// Processes `(server, pid, start_time)` (`start_time` 0 if not known) of other servers as
/// the notify file of `namespace` names them, in order: in cluster mode, `"its cluster lease
/// is live"`, `"exited: it left the cluster"`, `"dead: its cluster lease expired"`
/// ([`RemoteState`]) or `"liveness unknown"` (the cluster did not answer), from one or two
/// requests ([`RemoteLiveness::alive`]); outside it every server of the
/// namespace is on this machine, so `"alive"`, `"exited"` or `"dead"` as for this server's
/// ([`state_of`]).
fn server_pids_alive(namespace: &str, procs: &[(u32, i32, u64)]) -> Vec<&'static str> {
    let Some(m) = membership(namespace) else {
        return procs
            .iter()
            .map(|&(_, pid, start)| identity_alive(pid, start, 0))
            .collect();
    };
    if procs.is_empty() {
        return Vec::new();
    }
    let asked: Vec<(u32, i32)> = procs.iter().map(|&(s, p, _)| (s, p)).collect();
    match m.alive(&asked) {
        Some(live) if live.len() == procs.len() => {
            live.into_iter().map(RemoteState::words).collect()
        }
        _ => vec!["liveness unknown"; procs.len()],
    }
}

/// How a process of this machine that is no longer alive ended, as every message that names
/// one says it: it exited normally (`exit()`, a return from `main`, or its last `Sim` of a
/// namespace this process joined dropped: its record in the namespace's wait-for graph says
/// so, [`crate::waitgraph::exited`]), or it died (killed, crashed, or it left no record).
/// When a rank of a job is killed, the others fail one after another and end normally: the
/// timeouts of the last ones named those "dead" beside the one killed (a ring of 64 processes
/// with one killed: two others named dead), and a whitelisted process of another server of
/// the machine was "dead" however it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// It ended normally.
    Exited,
    /// It was killed or crashed (or is not known to have ended normally).
    Died,
}

impl Ended {
    /// How process `pid` (gone) ended.
    pub(crate) fn of(pid: i32) -> Ended {
        if crate::waitgraph::exited(pid) {
            Ended::Exited
        } else {
            Ended::Died
        }
    }

    /// `"exited"` or `"dead"`.
    pub(crate) fn state(self) -> &'static str {
        match self {
            Ended::Exited => "exited",
            Ended::Died => "dead",
        }
    }

    /// `"exited"` or `"died"`.
    pub(crate) fn verb(self) -> &'static str {
        match self {
            Ended::Exited => "exited",
            Ended::Died => "died",
        }
    }
}

/// `"alive"` if process `pid` is, else `"exited"` or `"dead"` ([`Ended`]).
pub(crate) fn state_of(pid: i32, alive: bool) -> &'static str {
    if alive {
        "alive"
    } else {
        Ended::of(pid).state()
    }
}

/// [`state_of`] the process a whitelist entry names as `pid`, `start_time` and `identity` (0 if
/// not known) on this machine.
fn identity_alive(pid: i32, start_time: u64, identity: u64) -> &'static str {
    state_of(pid, sys::identity_alive(pid, start_time, identity))
}

/// [`state_of`] process `pid` started at `start_time` (0 if not known) on this machine.
pub(crate) fn alive(pid: i32, start_time: u64) -> &'static str {
    state_of(pid, sys::pid_alive(pid, start_time))
}

/// `"pid 12 (rank 0, alive)"`, or `"pid 12 (alive)"` for a process without a label
/// ([`crate::waitgraph::label_of`]); `state` from [`state_of`].
fn who(pid: i32, state: &str) -> String {
    match crate::waitgraph::label_of(pid) {
        Some(l) => format!("pid {pid} ({l}, {state})"),
        None => format!("pid {pid} ({state})"),
    }
}

/// Why a key of a notify its owner (process `pid`) destroyed imports nothing, on its host or
/// another (`Sim::import_parsed`, the cluster's import).
pub(crate) fn destroyed_by_owner(pid: i32) -> String {
    format!(
        "its owner (pid {pid}) destroyed the notify, which invalidates the key; importers that \
         opened it before keep it until they destroy their handles"
    )
}

/// Why a key of a notify whose owner (process `pid`) ended without destroying it imports
/// nothing while importers still hold it (`Sim::import_parsed`): a death, or an exit without
/// the destroy, counts as the owner's destroy (SPEC §2).
pub(crate) fn owner_ended(pid: i32) -> String {
    let how = match Ended::of(pid) {
        Ended::Exited => "exited without destroying it",
        Ended::Died => "died",
    };
    format!(
        "its owner (pid {pid}) {how}, which invalidates the key as its destroy would; \
         importers that opened it before keep it until they destroy their handles"
    )
}

/// `"; owner pid P (alive); whitelisted: …; last recorded by pid R (alive) 0.123 s ago; held
/// by pid A (alive), pid B (dead)"` for notify `id` on `dev` of `file` (with `"; destroyed by
/// its owner pid P …"` after the owner once the owner destroyed its handle, and the last
/// batch reset after the last record, [`reset_text`]).
pub(crate) fn notify_facts(file: &ShmFile, dev: u32, id: u32, slot: &NotifySlot) -> String {
    let mut s = String::new();
    let owner = slot.owner();
    let _ = write!(
        s,
        "; owner {}",
        who(owner.pid, alive(owner.pid, owner.start_time))
    );
    if let Some(pid) = slot.destroyed_by() {
        let _ = write!(
            s,
            "; destroyed by its owner pid {pid} (aclrtDestroyNotify): only the tasks queued \
             before that and importers' handles still hold it"
        );
    }
    match slot.export_state() {
        Some(ExportState::None) => s.push_str("; not exported"),
        Some(ExportState::Open) => s.push_str("; exported without PID validation"),
        Some(ExportState::Enforced) => match file.read_whitelist(dev, id) {
            Some(wl) if wl.is_empty() => s.push_str("; exported, no PID whitelisted yet"),
            Some(wl) => {
                // Other servers' processes: on other hosts in cluster mode (known to the etcd
                // cluster, asked once for all of them), else on this machine.
                // (A notify's entries name a device or a server: `sdid::server_of` is `Some`.)
                let server_of = |e: &WhitelistEntry| sdid::server_of(e.sdid).unwrap_or(u32::MAX);
                let others: Vec<(u32, i32, u64)> = wl
                    .iter()
                    .filter(|e| server_of(e) != file.server())
                    .map(|e| (server_of(e), e.pid, e.start_time))
                    .collect();
                let mut remote = server_pids_alive(file.namespace(), &others).into_iter();
                s.push_str("; whitelisted:");
                for (i, e) in wl.iter().enumerate() {
                    let sep = if i == 0 { " " } else { ", " };
                    if server_of(e) == file.server() {
                        let live = identity_alive(e.pid, e.start_time, e.identity);
                        let _ = write!(s, "{sep}{}", who(e.pid, live));
                    } else {
                        let live = remote.next().unwrap_or("liveness unknown");
                        let _ = write!(s, "{sep}pid {} on server {} ({live})", e.pid, server_of(e));
                    }
                }
            }
            None => s.push_str("; whitelist unreadable"),
        },
        None => s.push_str("; export state corrupt"),
    }
    let (rpid, rns) = slot.last_record();
    let now = sys::now_ns();
    if rpid == 0 {
        s.push_str("; never recorded");
    } else {
        let ago = now.saturating_sub(rns) as f64 / 1e9;
        let _ = write!(
            s,
            "; last recorded by {} {ago:.3} s ago",
            who(rpid, alive(rpid, 0))
        );
    }
    s.push_str(&reset_text(slot.last_reset(now), rpid != 0));
    s.push_str(&merged_text(slot.merged_records()));
    let holders = slot.holders();
    let held: Vec<String> = (0..MAX_PROCS)
        .filter(|i| holders & (1u64 << i) != 0)
        .map(|i| {
            let pid = file.proc_pid(i);
            who(pid, state_of(pid, file.proc_alive(i)))
        })
        .collect();
    let _ = write!(s, "; held by {}", held.join(", "));
    // Records from other hosts that did not come may be this process's fault: the cluster
    // took it for dead while its own lease was lapsed.
    s.push_str(&own_lapse(file.namespace(), dev, id));
    s
}

/// `"; reset by aclrtNotifyBatchReset 0.120 s ago, after its last record, which the reset cleared: \
/// a wait gets only a record made after the reset"`, for a notify reset since it was created
/// (`reset`: [`NotifySlot::last_reset`]; `recorded`: whether it was ever recorded).
fn reset_text(reset: Option<LastReset>, recorded: bool) -> String {
    let Some(r) = reset else {
        return String::new();
    };
    let mut s = format!(
        "; reset by aclrtNotifyBatchReset {:.3} s ago",
        r.ago_ns as f64 / 1e9
    );
    s.push_str(match (r.after_record, recorded, r.cleared) {
        (false, _, _) => ", before its last record",
        (true, false, _) => " (it was never recorded)",
        (true, true, true) => {
            ", after its last record, which the reset cleared: a wait gets only a record made \
             after the reset"
        }
        (true, true, false) => {
            ", after its last record (a wait had taken it before): a wait gets only a record \
             made after the reset"
        }
    });
    s
}

/// Who owns the live notifies of `dev` (for a 207009): `"pid 10 (alive) owns 1000, pid 11
/// (dead) owns 24"`, most first, at most eight owners.
pub(crate) fn owners_of_device(file: &ShmFile, dev: u32) -> String {
    let mut owners: BTreeMap<i32, (u32, &'static str)> = BTreeMap::new();
    for id in 0..file.max_notifies() {
        let Some(slot) = file.slot(dev, id) else {
            break;
        };
        if slot.state() != Some(SlotState::Live) {
            continue;
        }
        let o = slot.owner();
        owners
            .entry(o.pid)
            .or_insert((0, alive(o.pid, o.start_time)))
            .0 += 1;
    }
    let mut v: Vec<_> = owners.into_iter().collect();
    v.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(&b.0)));
    let n = v.len();
    let mut parts: Vec<String> = v
        .iter()
        .take(8)
        .map(|(pid, (count, a))| format!("{} owns {count}", who(*pid, a)))
        .collect();
    if n > 8 {
        parts.push(format!("{} more owners", n - 8));
    }
    if parts.is_empty() {
        "no live notify found (ids leaked by crashed processes are repaired by gc)".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Which process-table entries keep the live notifies of `dev` alive, and how many of its
/// allocated ids have no live notify or no holder (for a 207009): `"held through process-table
/// entries 2 (pid 10, registered, alive, this process) on 1000, 5 (pid 11, registered, dead)
/// on 24; 3 allocated ids have no live notify or no holder (…)"`, most first, at most eight
/// entries. The owners of
/// [`owners_of_device`] cannot say this: an importer keeps a notify alive after its creator
/// destroyed it, and a holder bit stands for whichever process has its entry now. So a dead
/// process here is one whose references were not reclaimed, and a free entry holds stray bits.
pub(crate) fn holders_of_device(file: &ShmFile, dev: u32) -> String {
    let mut held = [0u32; MAX_PROCS as usize];
    let mut nobody = 0u32;
    let pool = file.pool(dev);
    for id in 0..file.max_notifies() {
        let Some(slot) = file.slot(dev, id) else {
            break;
        };
        let mut bits = slot.holders();
        if slot.state() != Some(SlotState::Live) || bits == 0 {
            nobody += u32::from(pool.is_some_and(|p| p.is_allocated(id)));
            continue;
        }
        while bits != 0 {
            held[bits.trailing_zeros() as usize] += 1;
            bits &= bits - 1;
        }
    }
    let mut v: Vec<(u32, u32)> = (0..MAX_PROCS)
        .map(|i| (i, held[i as usize]))
        .filter(|&(_, n)| n > 0)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut s = String::from("held through process-table entries ");
    if v.is_empty() {
        s.push_str("(none)");
    }
    for (k, &(i, n)) in v.iter().take(8).enumerate() {
        let sep = if k == 0 { "" } else { ", " };
        let _ = write!(s, "{sep}{i} ({}) on {n}", entry_facts(file, i));
    }
    if v.len() > 8 {
        let _ = write!(s, ", {} more entries", v.len() - 8);
    }
    if nobody > 0 {
        let _ = write!(
            s,
            "; {nobody} allocated id{} no live notify or no holder (a create or destroy in \
             progress, or left half-way by a process that died: gc frees those once they have \
             stayed so for {} s)",
            if nobody == 1 { " has" } else { "s have" },
            crate::repair::REPAIR_GRACE.as_secs()
        );
    }
    s
}

/// `"pid 10, registered, alive, this process"` for process-table entry `i` of `file`.
fn entry_facts(file: &ShmFile, i: u32) -> String {
    let Some(e) = file.proc_entry(i) else {
        return "no such entry".to_owned();
    };
    let w = e.word.load(std::sync::atomic::Ordering::SeqCst);
    let pid = w as u32 as i32;
    let mut s = match (w >> 32) as u32 {
        P_FREE => return "free: stray bits".to_owned(),
        P_CLAIMING => format!("pid {pid}, registering"),
        P_ALIVE => format!("pid {pid}, registered"),
        P_RECLAIMING => return format!("being reclaimed by pid {pid}"),
        other => format!("pid {pid}, invalid state {other}"),
    };
    let _ = write!(s, ", {}", state_of(pid, file.proc_alive(i)));
    if i == file.me() {
        s.push_str(", this process");
    }
    s
}

/// "; the last 2 records merged into 1 …" for a notify that merged records, else
/// nothing.
pub(crate) fn merged_text(m: acl_notify_core::table::MergedRecords) -> String {
    if m.total == 0 {
        return String::new();
    }
    let mut s = String::new();
    if m.since_wait > 0 {
        let _ = write!(
            s,
            "; the last {} records merged into 1 (all landed before a wait took one)",
            u64::from(m.since_wait) + 1
        );
    }
    let ago = sys::now_ns().saturating_sub(m.last_ns) as f64 / 1e9;
    let _ = write!(
        s,
        "; {} record{} of this notify landed on an already-set flag and merged into the \
         pending record (the last {ago:.3} s ago): a protocol that records twice before a wait \
         needs an acknowledgement notify",
        m.total,
        if m.total == 1 { "" } else { "s" }
    );
    s
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use acl_notify_core::sdid::PodDevice;
    use acl_notify_core::{CreateFlags, ExportFlags, HostOps, NotifyResources, ServerPid, Soc};

    use crate::NamespaceGuard;

    /// A wait's timeout names a whitelisted process of another server of the same machine
    /// alive or dead, as it does this server's (it said "liveness unknown").
    #[test]
    fn a_timeout_says_whether_another_server_s_whitelisted_process_is_alive() {
        let (sim, _ns) = NamespaceGuard::open_sim(
            format!("unit-diag-{}", std::process::id()),
            Soc::Ascend910_93,
            1,
        )
        .expect("opening a test Sim");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id() as i32;
        child.wait().unwrap();
        let me = std::process::id() as i32;
        let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
        sim.export_key(h, ExportFlags::empty()).unwrap();
        let s1 = |pid| ServerPid {
            sdid: PodDevice::new(1, 0).unwrap().sdid(),
            pid,
        };
        let entries = [s1(dead), s1(me)];
        sim.set_import_server_pids(h, &entries).unwrap();
        let e = sim.host_wait(h, Duration::from_millis(10)).unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(&format!("pid {dead} on server 1 (dead)")),
            "{text}"
        );
        assert!(
            text.contains(&format!("pid {me} on server 1 (alive)")),
            "{text}"
        );
    }

    /// A cluster that answers from a list and counts what it is asked.
    struct Fake {
        live: Vec<(u32, i32)>,
        /// Gone, having left normally (the others are dead).
        left: Vec<(u32, i32)>,
        asked: std::sync::Mutex<Vec<Vec<(u32, i32)>>>,
    }

    impl super::RemoteLiveness for Fake {
        fn alive(&self, procs: &[(u32, i32)]) -> Option<Vec<super::RemoteState>> {
            use super::RemoteState;
            self.asked.lock().unwrap().push(procs.to_vec());
            Some(
                procs
                    .iter()
                    .map(|p| match (self.live.contains(p), self.left.contains(p)) {
                        (true, _) => RemoteState::Live,
                        (false, true) => RemoteState::Exited,
                        (false, false) => RemoteState::Dead,
                    })
                    .collect(),
            )
        }

        fn own_lapse(&self, dev: u32, id: u32) -> String {
            format!(
                "; this process's own cluster lease expired (fake: notify {id} of device {dev})"
            )
        }
    }

    /// A wait's timeout in cluster mode asks the cluster once about all the whitelisted
    /// processes of other servers (it asked once per process: a whitelist of 64 on a silent
    /// cluster made the message wait 64 client bounds), and names each with its answer: a
    /// process that left the cluster normally "exited", one whose lease expired "dead".
    #[test]
    fn a_timeout_asks_the_cluster_once_for_every_whitelisted_process() {
        let (sim, _ns) = NamespaceGuard::open_sim(
            format!("unit-diag-once-{}", std::process::id()),
            Soc::Ascend910_93,
            1,
        )
        .expect("opening a test Sim");
        let fake = std::sync::Arc::new(Fake {
            live: vec![(1, 101), (2, 203)],
            left: vec![(2, 204)],
            asked: std::sync::Mutex::new(Vec::new()),
        });
        let weak = std::sync::Arc::downgrade(&fake);
        super::register_remote_liveness(sim.namespace(), weak as _);
        let h = sim.create_notify(0, CreateFlags::empty()).unwrap();
        sim.export_key(h, ExportFlags::empty()).unwrap();
        let me = std::process::id() as i32;
        let at = |server, pid| ServerPid {
            sdid: PodDevice::new(server, 0).unwrap().sdid(),
            pid,
        };
        let entries = [at(1, 101), at(0, me), at(1, 102), at(2, 203), at(2, 204)];
        sim.set_import_server_pids(h, &entries).unwrap();
        let text = sim
            .host_wait(h, Duration::from_millis(10))
            .unwrap_err()
            .to_string();
        assert_eq!(
            *fake.asked.lock().unwrap(),
            [vec![(1, 101), (1, 102), (2, 203), (2, 204)]],
            "{text}"
        );
        for part in [
            "pid 101 on server 1 (its cluster lease is live)",
            &format!("pid {me} (alive)"),
            "pid 102 on server 1 (dead: its cluster lease expired)",
            "pid 203 on server 2 (its cluster lease is live)",
            "pid 204 on server 2 (exited: it left the cluster)",
            // This process's own lapse, beside the peers it names.
            "; this process's own cluster lease expired (fake: notify ",
            " of device 0)",
        ] {
            assert!(text.contains(part), "{part:?} not in {text}");
        }
    }
}

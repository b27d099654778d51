//! A throw-away etcd cluster on loopback for tests, demos and benchmarks: N members of
//! Debian's `etcd` (package `etcd-server`, which `cargo xtask` installs: see [`ensure_etcd`]),
//! on free ports, with data directories in a fresh temporary directory, started with a
//! bounded wait for every member to be healthy, and killed (by the process ids it started)
//! and deleted when dropped.

use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::etcd::{Etcd, RunDeadline};

/// How long the members may take to elect a leader and answer.
const START_WAIT: Duration = Duration::from_secs(20);

/// The bound on a probe of the whole cluster (a put), and on one of a single member (a get).
const PROBE: Duration = Duration::from_millis(500);
const MEMBER_PROBE: Duration = Duration::from_millis(300);

/// The pause between two probes.
const NAP: Duration = Duration::from_millis(50);

/// A hang guard on reading one member's `/metrics` (a loopback answer of a few hundred
/// kilobytes): it only turns a member that never answers into an error.
const METRICS_TIMEOUT: Duration = Duration::from_secs(30);

/// A running loopback etcd cluster (see the module doc).
#[derive(Debug)]
pub struct EtcdCluster {
    members: Vec<Member>,
    dir: PathBuf,
}

#[derive(Debug)]
struct Member {
    name: String,
    client: SocketAddr,
    child: Option<Child>,
    /// Its command line (a restart reuses it, and its data directory).
    args: Vec<String>,
}

impl Member {
    fn spawn(&mut self, dir: &std::path::Path) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(format!("{}.log", self.name)))
            .map_err(|e| format!("etcd log: {e}"))?;
        let mut cmd = Command::new("etcd");
        // SAFETY: the closure runs in the child between fork and exec and calls only prctl and
        // setsid, which are async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                // The member dies with the thread that started it, also when this process is
                // killed before its drop runs (a test at its deadline).
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // A session of its own: the cluster stands for other machines, which the
                // processes of a test (rank programs whose stream workers spin) do not slow
                // down. In the tests' session it shared their scheduling group (the kernel's
                // autogroup, one per session), and at load 20-25 answered a 2 s lease's
                // renewals too late: the lease of a healthy process expired. Its process
                // group is its own too (its pid), which a test's progress watch looks at
                // ([`EtcdCluster::member_pid`]).
                libc::setsid();
                Ok(())
            });
        }
        let child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("could not start etcd: {e}"))?;
        self.child = Some(child);
        Ok(())
    }
}

/// Checks that the `etcd` binary is there, or says how to install it. Installing is the
/// xtask's job (`xtask/src/setup.rs`: `cargo xtask test`, `demo --hosts 2` and `bench` install
/// Debian's `etcd-server` before anything starts a cluster), so a test or example run by hand
/// on a machine without etcd fails here, at once, naming the command.
pub fn ensure_etcd() -> Result<(), String> {
    let present = Command::new("etcd")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        Ok(())
    } else {
        Err(
            "etcd is not installed (the cluster tests and examples start a loopback etcd \
             cluster): run `sudo apt-get install etcd-server`, or `cargo xtask test`, which \
             installs it"
                .into(),
        )
    }
}

/// Removes the data directories of harnesses whose process is gone (killed before its drop).
fn remove_stale_dirs(base: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("acl-notify-etcd.")
            .and_then(|r| r.split('.').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let gone = unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// A port that was free a moment ago (bound to port 0, then released).
fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

impl EtcdCluster {
    /// Starts `n` members and waits until each answers and the cluster has a leader. Ports
    /// are picked free; a member that lost its port to another process makes the whole start
    /// fail, and it is tried again (three times) on new ports.
    pub fn start(n: usize) -> Result<EtcdCluster, String> {
        Self::start_timed(n, true)
    }

    /// [`start`](Self::start) with etcd's own election timing (a heartbeat every 100 ms, an
    /// election after 1–2 s without one), as the README's commands run the members, instead
    /// of the fast elections the fault tests use otherwise.
    pub fn start_with_etcd_timing(n: usize) -> Result<EtcdCluster, String> {
        Self::start_timed(n, false)
    }

    fn start_timed(n: usize, fast: bool) -> Result<EtcdCluster, String> {
        ensure_etcd()?;
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(n, fast) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn try_start(n: usize, fast: bool) -> Result<EtcdCluster, String> {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        remove_stale_dirs(&base);
        let dir = base.join(format!("acl-notify-etcd.{}.{seq}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut ports = Vec::new();
        for _ in 0..n {
            ports.push((free_port()?, free_port()?));
        }
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        let token = format!("acl-notify-{}-{seq}", std::process::id());
        let mut cluster = EtcdCluster {
            members: Vec::new(),
            dir,
        };
        for (i, (client, peer)) in ports.iter().enumerate() {
            let name = format!("m{i}");
            let mut args: Vec<String> = [
                "--name".to_owned(),
                name.clone(),
                "--data-dir".to_owned(),
                cluster.dir.join(&name).to_string_lossy().into_owned(),
                "--listen-client-urls".to_owned(),
                format!("http://127.0.0.1:{client}"),
                "--advertise-client-urls".to_owned(),
                format!("http://127.0.0.1:{client}"),
                "--listen-peer-urls".to_owned(),
                format!("http://127.0.0.1:{peer}"),
                "--initial-advertise-peer-urls".to_owned(),
                format!("http://127.0.0.1:{peer}"),
                "--initial-cluster".to_owned(),
                initial.join(","),
                "--initial-cluster-state".to_owned(),
                "new".to_owned(),
                "--initial-cluster-token".to_owned(),
                token.clone(),
                "--log-level".to_owned(),
                "warn".to_owned(),
            ]
            .into();
            if fast {
                // Fast elections on loopback (and leases as short as 1 s): the fault tests
                // kill members.
                args.extend(
                    ["--heartbeat-interval", "50", "--election-timeout", "500"].map(String::from),
                );
            }
            let mut m = Member {
                name,
                client: SocketAddr::from(([127, 0, 0, 1], *client)),
                child: None,
                args,
            };
            m.spawn(&cluster.dir)?;
            cluster.members.push(m);
        }
        // In time this process could run: a test paused (a quiet benchmark window) or starved
        // while it probed found a wall-time bound gone on the resume, the members up meanwhile.
        let mut deadline = RunDeadline::new(START_WAIT);
        let probe = Etcd::new(cluster.client_addrs(), PROBE);
        loop {
            // A put needs a leader and a quorum; each member must also answer on its own.
            let all_up = cluster.members.iter().all(|m| {
                let up = Etcd::new(vec![m.client], MEMBER_PROBE).get(b"/").is_ok();
                deadline.step(MEMBER_PROBE);
                up
            });
            let put = all_up && probe.put(b"/acl-notify-harness", b"up", 0).is_ok();
            deadline.step(PROBE);
            if put {
                return Ok(cluster);
            }
            for m in &mut cluster.members {
                if let Some(Ok(Some(status))) = m.child.as_mut().map(Child::try_wait) {
                    let log = std::fs::read_to_string(cluster.dir.join(format!("{}.log", m.name)))
                        .unwrap_or_default();
                    let tail: String = log.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
                    return Err(format!("etcd member {} exited ({status}): {tail}", m.name));
                }
            }
            if deadline.left().is_zero() {
                return Err(format!(
                    "etcd cluster did not come up within {START_WAIT:?}{} (logs in {})",
                    deadline.not_counted(),
                    cluster.dir.display()
                ));
            }
            std::thread::sleep(NAP);
            deadline.step(NAP);
        }
    }

    /// The members' client addresses.
    pub fn client_addrs(&self) -> Vec<SocketAddr> {
        self.members.iter().map(|m| m.client).collect()
    }

    /// The cluster as `ACL_NOTIFY_SIM_CLUSTER` names it, with SuperPod name `pod`:
    /// `etcd://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/pod`.
    pub fn url(&self, pod: &str) -> String {
        let all: Vec<usize> = (0..self.members.len()).collect();
        self.url_in_order(&all, pod)
    }

    /// [`url`](Self::url) listing members `order` (indices), in that order: a client tries
    /// the first one first.
    pub fn url_in_order(&self, order: &[usize], pod: &str) -> String {
        let list: Vec<String> = order
            .iter()
            .filter_map(|&i| self.members.get(i))
            .map(|m| m.client.to_string())
            .collect();
        format!("etcd://{}/{pod}", list.join(","))
    }

    /// The index of the member that leads now, as the running members say (`None` while
    /// they have none, or before one answers).
    pub fn leader(&self) -> Option<usize> {
        self.members.iter().position(|m| {
            m.child.is_some()
                && Etcd::new(vec![m.client], Duration::from_millis(500))
                    .status()
                    .is_ok_and(|(id, leader)| id != 0 && id == leader)
        })
    }

    /// Kills member `i` (SIGKILL) and reaps it.
    pub fn kill_member(&mut self, i: usize) {
        if let Some(mut c) = self.members.get_mut(i).and_then(|m| m.child.take()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits at most `within` (of the time this process could run) until the members still
    /// running have a leader and a quorum (a put through them succeeds): after
    /// [`kill_member`](Self::kill_member) of the leader, the others elect another first.
    pub fn wait_for_quorum(&self, within: Duration) -> Result<(), String> {
        let running = self.members.iter().filter(|m| m.child.is_some());
        let probe = Etcd::new(running.map(|m| m.client).collect(), PROBE);
        // In time this process could run (see `start`'s wait).
        let mut deadline = RunDeadline::new(within);
        loop {
            let put = probe.put(b"/acl-notify-harness", b"up", 0);
            deadline.step(PROBE);
            if put.is_ok() {
                return Ok(());
            }
            if deadline.left().is_zero() {
                return Err(format!(
                    "the running etcd members had no quorum within {within:?}{}",
                    deadline.not_counted()
                ));
            }
            std::thread::sleep(NAP);
            deadline.step(NAP);
        }
    }

    /// The process id of member `i` (also its process group's: a member runs in a session
    /// of its own), while it runs.
    pub fn member_pid(&self, i: usize) -> Option<u32> {
        self.members.get(i)?.child.as_ref().map(Child::id)
    }

    /// Starts member `i` again (after [`kill_member`](Self::kill_member)), on its data.
    pub fn restart_member(&mut self, i: usize) -> Result<(), String> {
        let dir = self.dir.clone();
        match self.members.get_mut(i) {
            Some(m) if m.child.is_none() => m.spawn(&dir),
            Some(_) => Ok(()),
            None => Err(format!("no member {i}")),
        }
    }

    /// Stops (`SIGSTOP`) or continues (`SIGCONT`) every member: stopped, a member accepts
    /// connections (the kernel does) and answers nothing, as a hung or partitioned one.
    pub fn pause_all(&mut self, pause: bool) {
        for i in 0..self.members.len() {
            self.pause_member(i, pause);
        }
    }

    /// [`pause_all`](Self::pause_all) for member `i` only: a member that hangs while the
    /// others serve.
    pub fn pause_member(&mut self, i: usize, pause: bool) {
        let sig = if pause { libc::SIGSTOP } else { libc::SIGCONT };
        if let Some(c) = self.members.get(i).and_then(|m| m.child.as_ref()) {
            // SAFETY: signalling a child this harness started and has not reaped.
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }

    /// Kills every member.
    pub fn kill_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill_member(i);
        }
    }

    /// The calls the running members have served, by gRPC method (`Txn`, `Range`,
    /// `LeaseGrant`, `LeaseRevoke`, `Put`, …; every outcome), summed over the members, from
    /// their `/metrics` (the JSON gateway's requests are gRPC calls inside etcd). For a test
    /// that counts what clients ask; `LeaseKeepAlive`, a stream, counts its messages.
    pub fn calls(&self) -> Result<std::collections::BTreeMap<String, u64>, String> {
        let agent = super::etcd::agent();
        let mut calls = std::collections::BTreeMap::new();
        for m in self.members.iter().filter(|m| m.child.is_some()) {
            let url = format!("http://{}/metrics", m.client);
            let mut resp = agent
                .get(&url)
                .config()
                .timeout_global(Some(METRICS_TIMEOUT))
                .build()
                .call()
                .map_err(|e| format!("{url}: {e}"))?;
            let status = resp.status();
            let text = resp
                .body_mut()
                .read_to_string()
                .map_err(|e| format!("{url}: {e}"))?;
            if !status.is_success() {
                return Err(format!("{url}: HTTP {status}: {text}"));
            }
            for line in text.lines() {
                let wanted = if line.contains("grpc_method=\"LeaseKeepAlive\"") {
                    "grpc_server_msg_received_total{"
                } else {
                    "grpc_server_handled_total{"
                };
                if !line.starts_with(wanted) {
                    continue;
                }
                let method = line
                    .split_once("grpc_method=\"")
                    .and_then(|(_, rest)| rest.split_once('"'))
                    .map(|(m, _)| m.to_owned());
                let n = line
                    .rsplit_once(' ')
                    .and_then(|(_, n)| n.parse::<f64>().ok());
                if let (Some(method), Some(n)) = (method, n) {
                    *calls.entry(method).or_insert(0) += n as u64;
                }
            }
        }
        Ok(calls)
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

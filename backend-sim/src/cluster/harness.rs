//! A throw-away etcd cluster on loopback for tests, demos and benchmarks: N members of
//! Debian's `etcd` (package `etcd-server`, installed here when missing and running as root),
//! on free ports, with data directories in a fresh temporary directory, started with a
//! bounded wait for every member to be healthy, and killed (by the process ids it started)
//! and deleted when dropped.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::etcd::Etcd;

/// How long the members may take to elect a leader and answer.
const START_WAIT: Duration = Duration::from_secs(20);

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
}

/// Makes sure the `etcd` binary is there: installs Debian's `etcd-server` as root when it is
/// missing (as `cargo xtask test` installs its other tools), or says what to run.
pub fn ensure_etcd() -> Result<(), String> {
    let present = || {
        Command::new("etcd")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if present() {
        return Ok(());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Err(
            "etcd is not installed: run `sudo apt-get install etcd-server` (cargo xtask test \
             installs it when run as root)"
                .into(),
        );
    }
    eprintln!("==> installing Debian's etcd-server (the cluster tests run etcd)");
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .map_err(|e| format!("apt-get: {e}"))
    };
    apt(&["update", "-qq"])?;
    let s = apt(&[
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "etcd-server",
    ])?;
    if !s.success() || !present() {
        return Err(format!("apt-get install etcd-server failed ({s})"));
    }
    Ok(())
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
        ensure_etcd()?;
        let mut last = String::new();
        for _ in 0..3 {
            match Self::try_start(n) {
                Ok(c) => return Ok(c),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn try_start(n: usize) -> Result<EtcdCluster, String> {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
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
            let log = std::fs::File::create(cluster.dir.join(format!("{name}.log")))
                .map_err(|e| format!("etcd log: {e}"))?;
            let child = Command::new("etcd")
                .args(["--name", &name])
                .arg("--data-dir")
                .arg(cluster.dir.join(&name))
                .args([
                    "--listen-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                ])
                .args([
                    "--advertise-client-urls",
                    &format!("http://127.0.0.1:{client}"),
                ])
                .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
                .args([
                    "--initial-advertise-peer-urls",
                    &format!("http://127.0.0.1:{peer}"),
                ])
                .args(["--initial-cluster", &initial.join(",")])
                .args(["--initial-cluster-state", "new"])
                .args(["--initial-cluster-token", &token])
                // Fast elections on loopback (and leases as short as 1 s): the fault tests
                // kill members.
                .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
                .args(["--log-level", "warn"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .map_err(|e| format!("could not start etcd: {e}"))?;
            cluster.members.push(Member {
                name,
                client: SocketAddr::from(([127, 0, 0, 1], *client)),
                child: Some(child),
            });
        }
        let deadline = Instant::now() + START_WAIT;
        let probe = Etcd::new(cluster.client_addrs(), Duration::from_millis(500));
        loop {
            // A put needs a leader and a quorum; each member must also answer on its own.
            let all_up = cluster.members.iter().all(|m| {
                Etcd::new(vec![m.client], Duration::from_millis(300))
                    .get(b"/")
                    .is_ok()
            });
            if all_up && probe.put(b"/acl-notify-harness", b"up", 0).is_ok() {
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
            if Instant::now() > deadline {
                return Err(format!(
                    "etcd cluster did not come up within {START_WAIT:?} (logs in {})",
                    cluster.dir.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The members' client addresses.
    pub fn client_addrs(&self) -> Vec<SocketAddr> {
        self.members.iter().map(|m| m.client).collect()
    }

    /// The cluster as `ACL_NOTIFY_SIM_CLUSTER` names it, with SuperPod name `pod`:
    /// `etcd://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3/pod`.
    pub fn url(&self, pod: &str) -> String {
        let list: Vec<String> = self.client_addrs().iter().map(|a| a.to_string()).collect();
        format!("etcd://{}/{pod}", list.join(","))
    }

    /// Kills member `i` (SIGKILL) and reaps it.
    pub fn kill_member(&mut self, i: usize) {
        if let Some(mut c) = self.members.get_mut(i).and_then(|m| m.child.take()) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills every member.
    pub fn kill_all(&mut self) {
        for i in 0..self.members.len() {
            self.kill_member(i);
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.kill_all();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

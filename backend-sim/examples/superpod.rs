//! A simulated SuperPod across hosts on one machine, measured: starts a 3-member etcd cluster
//! on loopback, then prints etcd's own put→watch latency (the floor of the cross-host design),
//! the latency from a record on one host to the wake of the owner's wait on another, and,
//! given the C ring program (`tests/c/superpod_ring.c`, built against `libascendcl.so`), runs
//! it as 2 hosts × 4 ranks and prints its rounds per second, then `verdict: OK` or what
//! failed. `cargo xtask demo --hosts 2` builds and runs it all.
//!
//! Run: `cargo run -p acl-notify-sim --example superpod -- [--ring <superpod_ring binary>]
//! [--rounds N] [--samples N] [--mem-mib N]`

use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use acl_notify_core::{
    Backend, CreateFlags, ExportFlags, HostOps, ImportFlags, NotifyResources, ServerPid, Soc,
    StreamOps, SyncWait,
};
use acl_notify_sim::cluster::ClusterConfig;
use acl_notify_sim::cluster::etcd::Etcd;
use acl_notify_sim::cluster::harness::EtcdCluster;
use acl_notify_sim::mem::MemcpyKind;
use acl_notify_sim::{NamespaceGuard, Sim};

type Res<T> = Result<T, String>;

/// The bound of one etcd call, in seconds, for every host this example starts (its own and the
/// C ring's processes): the simulator's default (3 s) is a fault detector, and a machine loaded
/// by other work (the test suite runs this example beside its other steps) can stall a healthy
/// call past it; a hung etcd still fails the example, later. The figures it prints do not
/// depend on it.
const CALL_BOUND_SECS: u32 = 15;

/// The cluster configuration of pod `url` with [`CALL_BOUND_SECS`].
fn config(url: &str) -> Res<ClusterConfig> {
    ClusterConfig::parse(url)?.with_timeout(CALL_BOUND_SECS)
}

fn main() {
    let mut ring = None;
    let (mut rounds, mut samples, mut mem_mib) = (200u32, 300usize, 32usize);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_default();
        match a.as_str() {
            "--ring" => ring = Some(val()),
            "--rounds" => rounds = val().parse().unwrap_or(rounds),
            "--samples" => samples = val().parse().unwrap_or(samples),
            "--mem-mib" => mem_mib = val().parse().unwrap_or(mem_mib).max(1),
            other => {
                eprintln!("unknown argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    match run(ring.as_deref(), rounds, samples, mem_mib) {
        Ok(()) => println!("verdict: OK"),
        Err(e) => {
            println!("verdict: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

fn micros(mut v: Vec<Duration>) -> (f64, f64) {
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
    (at(0.5), at(0.99))
}

fn run(ring: Option<&str>, rounds: u32, samples: usize, mem_mib: usize) -> Res<()> {
    let cluster = EtcdCluster::start(3)?;
    println!(
        "etcd cluster: 3 members on {}",
        cluster
            .client_addrs()
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    floor(&cluster, samples)?;
    remote_record(&cluster, samples)?;
    remote_memory(&cluster, samples, mem_mib << 20)?;
    if let Some(bin) = ring {
        c_ring(&cluster, bin, rounds)?;
    }
    Ok(())
}

/// etcd's own put→watch delivery, through the same client: the floor of a remote record.
fn floor(cluster: &EtcdCluster, samples: usize) -> Res<()> {
    let etcd = std::sync::Arc::new(Etcd::new(
        cluster.client_addrs(),
        Duration::from_secs(CALL_BOUND_SECS.into()),
    ));
    let prefix = b"/bench/floor/".to_vec();
    let (_, rev) = etcd.get_prefix(&prefix).map_err(|e| e.to_string())?;
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (tx, rx) = channel();
    let w = {
        let (etcd, stop, prefix) = (etcd.clone(), stop.clone(), prefix.clone());
        std::thread::spawn(move || {
            let _ = etcd.watch(&prefix, rev + 1, &stop, Duration::from_millis(50), |ev| {
                let _ = tx.send(ev.kv.mod_revision);
            });
        })
    };
    let mut put = Vec::new();
    let mut seen = Vec::new();
    for i in 0..samples {
        let t = Instant::now();
        etcd.put(b"/bench/floor/k", i.to_string().as_bytes(), 0)
            .map_err(|e| e.to_string())?;
        put.push(t.elapsed());
        rx.recv_timeout(Duration::from_secs(5))
            .map_err(|_| "a watch event did not come")?;
        seen.push(t.elapsed());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = w.join();
    let (pm, p99) = micros(put);
    let (wm, w99) = micros(seen);
    println!("etcd put (the txn a remote record is):    median {pm:7.0} µs   p99 {p99:7.0} µs");
    println!("etcd put -> watch event (the floor):      median {wm:7.0} µs   p99 {w99:7.0} µs");
    Ok(())
}

/// One simulated host of the SuperPod in this process: an Ascend910_93 with `devices` devices
/// as server `server`, in a namespace of its own (`<ns>-<pid>`, removed when the guard drops).
fn host(cfg: &ClusterConfig, ns: &str, server: u32, devices: u32) -> Res<(Sim, NamespaceGuard)> {
    let ns = format!("{ns}-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let sim = Sim::builder()
        .soc(Soc::Ascend910_93)
        .devices(devices)
        .namespace(&ns)
        .server_id(server)
        .cluster(Some(cfg.clone()))
        .open()
        .map_err(|e| e.to_string())?;
    Ok((sim, NamespaceGuard(ns)))
}

/// A record on host B of a notify host A owns, to the wake of A's host wait: ping-pong
/// between two simulated hosts (two namespaces, servers 0 and 1) in this process.
fn remote_record(cluster: &EtcdCluster, samples: usize) -> Res<()> {
    let cfg = config(&cluster.url(&format!("bench-{}", std::process::id())))?;
    let (a, _ga) = host(&cfg, "superpod-a", 0, 2)?;
    let (b, _gb) = host(&cfg, "superpod-b", 1, 2)?;
    let e = |e: acl_notify_sim::SimError| e.to_string();
    let pid = std::process::id() as i32;
    // Each host owns one notify and imports the other's on its device 0, whitelisted by that
    // device's SuperPOD device id (what the importer would send beside its PID).
    let share = |owner: &Sim, other: &Sim| -> Res<_> {
        let n = owner.create_notify(0, CreateFlags::empty()).map_err(e)?;
        let key = owner.export_key(n, ExportFlags::empty()).map_err(e)?;
        let sdid = other.super_pod_device_id(0).map_err(e)?;
        owner
            .set_import_server_pids(n, &[ServerPid { sdid, pid }])
            .map_err(e)?;
        let imp = other.import_key(0, &key, ImportFlags::empty()).map_err(e)?;
        Ok((n, imp))
    };
    let (na, na_in_b) = share(&a, &b)?;
    let (nb, nb_in_a) = share(&b, &a)?;
    let (sa, sb) = (
        a.create_stream(0).map_err(e)?,
        b.create_stream(0).map_err(e)?,
    );
    // A's side: each wake answers with a record on B's notify.
    let echo = {
        let a = a.clone();
        std::thread::spawn(move || -> Res<()> {
            for _ in 0..samples {
                a.host_wait(na, Duration::from_secs(10)).map_err(e)?;
                a.record(nb_in_a, sa).map_err(e)?;
            }
            a.synchronize(sa, SyncWait::Forever).map_err(e)
        })
    };
    let mut rtt = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        b.record(na_in_b, sb).map_err(e)?;
        b.host_wait(nb, Duration::from_secs(10)).map_err(e)?;
        rtt.push(t.elapsed() / 2);
    }
    b.synchronize(sb, SyncWait::Forever).map_err(e)?;
    echo.join().map_err(|_| "echo thread panicked")??;
    let (m, p99) = micros(rtt);
    println!(
        "remote record -> owner's wait wakes:      median {m:7.0} µs   p99 {p99:7.0} µs   \
         (half a cross-host ping-pong, {samples} rounds)"
    );
    Ok(())
}

/// Copies through an import of another host's memory (one simulated host per namespace, in
/// this process): the latency of a 4 KiB write and read, and the throughput of `big` bytes
/// each way (1 MiB per etcd value).
fn remote_memory(cluster: &EtcdCluster, samples: usize, big: usize) -> Res<()> {
    const SMALL: usize = 4096;
    let cfg = config(&cluster.url(&format!("mem-{}", std::process::id())))?;
    let e = |e: acl_notify_sim::SimError| e.to_string();
    let (a, _ga) = host(&cfg, "superpod-mem-a", 0, 1)?;
    let (b, _gb) = host(&cfg, "superpod-mem-b", 1, 1)?;
    let owned = a.malloc(0, big, 0).map_err(e)?;
    let key = a.ipc_mem_export(owned, big, false).map_err(e)?;
    let pid = std::process::id() as i32;
    let sdid = b.super_pod_device_id(0).map_err(e)?;
    a.ipc_mem_set_server_pids(&key, &[ServerPid { sdid, pid }])
        .map_err(e)?;
    let remote = b.ipc_mem_import(0, &key, false).map_err(e)?;
    let local = b.malloc(0, big, 0).map_err(e)?;
    let copy = |dst: usize, src: usize, n: usize| {
        // SAFETY: both sides are device addresses (no host memory is named).
        unsafe { b.memcpy(dst, n, src, n, MemcpyKind::DeviceToDevice) }.map_err(e)
    };
    let (mut w, mut r) = (Vec::new(), Vec::new());
    for _ in 0..samples.min(200) {
        let t = Instant::now();
        copy(remote, local, SMALL)?;
        w.push(t.elapsed());
        let t = Instant::now();
        copy(local, remote, SMALL)?;
        r.push(t.elapsed());
    }
    let (wm, w99) = micros(w);
    let (rm, r99) = micros(r);
    println!("remote memory, 4 KiB write (one txn):     median {wm:7.0} µs   p99 {w99:7.0} µs");
    println!("remote memory, 4 KiB read (request+answer): median {rm:5.0} µs   p99 {r99:7.0} µs");
    let t = Instant::now();
    copy(remote, local, big)?;
    let wt = t.elapsed();
    let t = Instant::now();
    copy(local, remote, big)?;
    let rt = t.elapsed();
    let mbs = |d: Duration| big as f64 / d.as_secs_f64() / 1e6;
    println!(
        "remote memory, {} MiB: write {:.1} MB/s, read {:.1} MB/s (1 MiB per etcd value)",
        big >> 20,
        mbs(wt),
        mbs(rt)
    );
    Ok(())
}

/// The C ring: 2 hosts × 4 ranks of `superpod_ring`, through `libascendcl.so`.
fn c_ring(cluster: &EtcdCluster, bin: &str, rounds: u32) -> Res<()> {
    const RANKS: usize = 8;
    let url = cluster.url(&format!("ring-{}", std::process::id()));
    let dir = std::env::temp_dir().join(format!("acl-notify-superpod-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let hosts: Vec<NamespaceGuard> = (0..2)
        .map(|h| NamespaceGuard(format!("superpod-ring-{h}-{}", std::process::id())))
        .collect();
    let children: Vec<_> = (0..RANKS)
        .map(|r| {
            Command::new(bin)
                .arg(&dir)
                .arg(r.to_string())
                .arg(RANKS.to_string())
                .arg(rounds.to_string())
                .env("ACL_NOTIFY_SIM_SOC", "Ascend910_93")
                .env("ACL_NOTIFY_SIM_DEVICES", "4")
                .env("ACL_NOTIFY_SIM_NAMESPACE", &hosts[r / 4].0)
                .env("ACL_NOTIFY_SIM_SERVER_ID", (r / 4).to_string())
                .env("ACL_NOTIFY_SIM_CLUSTER", &url)
                .env(
                    "ACL_NOTIFY_SIM_CLUSTER_TIMEOUT",
                    CALL_BOUND_SECS.to_string(),
                )
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run {bin}: {e}"))
        })
        .collect::<Res<_>>()?;
    let mut total = None;
    let mut failed = Vec::new();
    for (r, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            failed.push(format!(
                "rank {r} ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        if r == 0 && !text.contains("RING DATA OK") {
            failed.push(format!(
                "rank 0 did not get its messages back: {}",
                text.trim()
            ));
        }
        if r == 0 {
            total = text
                .lines()
                .find_map(|l| l.strip_prefix("RING 0 "))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !failed.is_empty() {
        return Err(failed.join("; "));
    }
    let ns = total.ok_or("rank 0 printed no RING line")?;
    let per = Duration::from_nanos(ns) / rounds;
    println!(
        "ring, 2 hosts x 4 ranks (C, libascendcl): {:.0} rounds/s ({per:?} a round, 2 of its 8 \
         hops cross hosts; {rounds} rounds, each hop a 4 KiB copy into the next rank's memory \
         then a record; every message back intact)",
        f64::from(rounds) / Duration::from_nanos(ns).as_secs_f64()
    );
    Ok(())
}

//! The timeline with real processes: two processes hand records back and forth through each
//! other's notifies with `ACL_NOTIFY_SIM_TRACE` set; their files merge into one valid timeline
//! whose every arrow runs from the record to the wait it released, and a record that merged
//! into an earlier one gets no arrow. The test binary re-executes itself as the two processes
//! (`ACL_SIM_TRACE_ROLE=a|b`), which swap export keys through files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use acl_notify_core::{
    CreateFlags, ExportFlags, ImportFlags, NotifyResources, StreamOps, SyncWait, Timeout,
};
use acl_notify_sim::trace::{ENV_TRACE, merge};
use acl_notify_sim::{NamespaceGuard, Sim};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

const ROLE: &str = "ACL_SIM_TRACE_ROLE";
const SHARE: &str = "ACL_SIM_TRACE_SHARE";
const ROUNDS: usize = 4;

fn main() {
    if let Some(role) = std::env::var_os(ROLE) {
        let share = PathBuf::from(std::env::var_os(SHARE).expect("share dir"));
        if let Err(e) = child(role.to_str().unwrap_or(""), &share) {
            eprintln!("trace child: {e}");
            std::process::exit(1);
        }
        return;
    }
    let trials = vec![Trial::test(
        "two_processes_arrows_link_each_record_to_the_wait_it_released",
        two_processes,
    )];
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}

/// Waits (at most 30 s) for the other process's key file.
fn read_key(path: &Path) -> Result<String, String> {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(k) = std::fs::read_to_string(path) {
            return Ok(k);
        }
        if Instant::now() > until {
            return Err(format!("no key at {}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn write_key(path: &Path, key: &str) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, key).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

/// Process `a` (device 0) records b's notify then waits on its own, `ROUNDS` times; `b`
/// (device 1) waits on its own then records a's. Then `b` records a notify of its own twice
/// before one wait takes it: the second record merges into the first.
fn child(role: &str, share: &Path) -> Result<(), String> {
    let e = |e: acl_notify_sim::SimError| e.to_string();
    let sim = Sim::from_env().map_err(e)?;
    let (dev, other) = if role == "a" { (0, "b") } else { (1, "a") };
    let mine = sim.create_notify(dev, CreateFlags::empty()).map_err(e)?;
    let key = sim
        .export_key(mine, ExportFlags::DISABLE_PID_VALIDATION)
        .map_err(e)?;
    write_key(&share.join(format!("{role}.key")), key.as_str())?;
    let theirs_key = read_key(&share.join(format!("{other}.key")))?;
    let theirs = sim
        .import_by_key(dev, &theirs_key, ImportFlags::ENABLE_PEER_ACCESS)
        .map_err(e)?;
    let s = sim.create_stream(dev).map_err(e)?;
    let wait = Timeout::from_c(30);
    for _ in 0..ROUNDS {
        if role == "a" {
            sim.record(theirs, s).map_err(e)?;
            sim.wait_and_reset(mine, s, wait).map_err(e)?;
        } else {
            sim.wait_and_reset(mine, s, wait).map_err(e)?;
            sim.record(theirs, s).map_err(e)?;
        }
    }
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(60)))
        .map_err(e)?;
    if role == "b" {
        let local = sim.create_notify(dev, CreateFlags::empty()).map_err(e)?;
        sim.record(local, s).map_err(e)?;
        sim.record(local, s).map_err(e)?;
        sim.synchronize(s, SyncWait::Forever).map_err(e)?;
        sim.wait_and_reset(local, s, wait).map_err(e)?;
        sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(60)))
            .map_err(e)?;
    }
    // Both are done before either goes away (b's notify must live until a's last record).
    write_key(&share.join(format!("{role}.done")), "done")?;
    read_key(&share.join(format!("{other}.done")))?;
    drop(sim);
    Ok(())
}

fn args(e: &Value) -> &Value {
    &e["args"]
}

fn two_processes() -> Result<(), Failed> {
    let ns = format!("trace-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let _guard = NamespaceGuard(ns.clone());
    let share = std::env::temp_dir().join(format!("acl-notify-trace-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&share);
    std::fs::create_dir_all(&share)?;
    let dir = share.join("trace");
    let spawn = |role: &str, label: &str| {
        Command::new(std::env::current_exe().expect("test binary"))
            .env(ROLE, role)
            .env(SHARE, &share)
            .env(ENV_TRACE, &dir)
            .env(acl_notify_sim::ENV_NAMESPACE, &ns)
            .env(acl_notify_sim::ENV_SOC, "Ascend910B")
            .env(acl_notify_sim::ENV_DEVICES, "2")
            .env(acl_notify_sim::waitgraph::ENV_LABEL, label)
            .spawn()
    };
    let mut a = spawn("a", "rank0")?;
    let mut b = spawn("b", "rank1")?;
    let (ra, rb) = (a.wait()?, b.wait()?);
    if !ra.success() || !rb.success() {
        return Err(format!("children failed: a {ra}, b {rb}").into());
    }
    let (pa, pb) = (a.id() as i64, b.id() as i64);

    let t = merge::merge_dir(&dir)?;
    let doc: Value = serde_json::from_str(&t.to_json())?;
    let checked = merge::validate(&doc)?;
    assert_eq!(t.files, 2, "one file per process");
    assert_eq!(checked.tracks, 2, "one stream in each process: {checked:?}");
    let events = doc["traceEvents"].as_array().ok_or("no events")?;
    // Metadata names the processes by label and the streams by handle.
    let pname = |pid: i64| {
        events
            .iter()
            .find(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap_or("").to_owned())
            .unwrap_or_default()
    };
    assert!(pname(pa).contains("rank0"), "{}", pname(pa));
    assert!(pname(pb).contains("rank1"), "{}", pname(pb));
    assert!(
        events.iter().any(|e| e["ph"] == "M"
            && e["name"] == "thread_name"
            && e["args"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("stream 0x"))),
        "stream tracks are named by handle"
    );

    // Each arrow: its start sits on a record, its finish at the end of a wait, of one notify.
    let xs: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let at = |pid: &Value, tid: &Value, pred: &dyn Fn(&Value) -> bool| -> Option<&Value> {
        xs.iter()
            .copied()
            .find(|e| &e["pid"] == pid && &e["tid"] == tid && pred(e))
    };
    let mut links: Vec<(&Value, &Value)> = Vec::new();
    for s in events.iter().filter(|e| e["ph"] == "s") {
        let f = events
            .iter()
            .find(|e| e["ph"] == "f" && e["id"] == s["id"])
            .ok_or("flow without finish")?;
        let ts = s["ts"].as_f64().unwrap_or(-1.0);
        let fts = f["ts"].as_f64().unwrap_or(-1.0);
        let rec = at(&s["pid"], &s["tid"], &|e| {
            e["ts"].as_f64() == Some(ts)
                && e["name"].as_str().is_some_and(|n| n.starts_with("record"))
        })
        .ok_or("an arrow that starts on no record")?;
        let wait = at(&f["pid"], &f["tid"], &|e| {
            let end = e["ts"].as_f64().unwrap_or(0.0) + e["dur"].as_f64().unwrap_or(0.0);
            (end - fts).abs() < 1e-3 && e["name"].as_str().is_some_and(|n| n.starts_with("wait"))
        })
        .ok_or("an arrow that ends on no wait")?;
        assert_eq!(args(rec)["notify_key"], args(wait)["notify_key"]);
        links.push((rec, wait));
    }
    assert_eq!(links.len(), 2 * ROUNDS + 1, "{} arrows", links.len());
    assert_eq!(t.arrows, links.len());
    // Across the processes: the k-th record of a notify released its k-th wait.
    for (from, to) in [(pa, pb), (pb, pa)] {
        let mut ls: Vec<&(&Value, &Value)> = links
            .iter()
            .filter(|(r, w)| r["pid"] == from && w["pid"] == to)
            .collect();
        assert_eq!(ls.len(), ROUNDS, "arrows from {from} to {to}");
        ls.sort_by(|x, y| x.1["ts"].as_f64().partial_cmp(&y.1["ts"].as_f64()).unwrap());
        for (k, (r, w)) in ls.iter().enumerate() {
            assert_eq!(args(r)["seq"], (k + 1) as u64, "record {r} → wait {w}");
            assert!(
                r["ts"].as_f64() <= Some(w["ts"].as_f64().unwrap() + w["dur"].as_f64().unwrap())
            );
        }
    }
    // In b alone: the first of the two records released the wait; the second merged.
    let local: Vec<&(&Value, &Value)> = links
        .iter()
        .filter(|(r, w)| r["pid"] == pb && w["pid"] == pb)
        .collect();
    assert_eq!(local.len(), 1);
    let (r, _) = local[0];
    assert_eq!(args(r)["seq"], 1, "the first record released the wait: {r}");
    let key = &args(r)["notify_key"];
    let second = xs
        .iter()
        .find(|e| &args(e)["notify_key"] == key && args(e)["seq"] == 2)
        .ok_or("the second record is in the timeline")?;
    assert_eq!(args(second)["merged"], true, "{second}");
    assert_eq!(t.merged, 1);

    // The page draws from the same data.
    let page = acl_notify_sim::trace::html::render(&t, &checked, "test");
    assert!(page.contains("data-tracks-expected=\"2\"") && !page.contains("src=\"http"));
    let _ = std::fs::remove_dir_all(&share);
    Ok(())
}

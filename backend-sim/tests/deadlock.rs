//! Deadlock reports with real processes: streams of two or three processes that wait on each
//! other in a cycle (each one's record queued behind its own wait) get 107020 with the word
//! "deadlock" and every member of the cycle, at the first timeout or, with
//! `ACL_NOTIFY_SIM_DEADLOCK=fail`, at once. The test binary re-executes itself as agents
//! (`ACL_SIM_DEADLOCK_AGENT=1`) that obey one-line commands on stdin.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use acl_notify_core::{
    BackendError, CreateFlags, Error, ExportFlags, ImportFlags, NotifyResources, RawNotify,
    RawStream, StreamOps, SyncWait, Timeout,
};
use acl_notify_sim::{Sim, SimError};
use libtest_mimic::{Arguments, Failed, Trial};

mod common;
use common::{Agent, Ns, num};

const AGENT: &str = "ACL_SIM_DEADLOCK_AGENT";
const ANSWER: Duration = Duration::from_secs(60);

type TestFn = fn() -> Result<(), Failed>;

fn main() {
    if std::env::var_os(AGENT).is_some() {
        agent();
        return;
    }
    let tests: Vec<(&str, TestFn)> = vec![
        ("two_process_deadlock", two_process_deadlock),
        ("three_process_cycle", three_process_cycle),
        (
            "cycle_through_an_imported_notify",
            cycle_through_an_imported_notify,
        ),
        (
            "fail_at_once_ends_the_waits_before_their_timeout",
            fail_at_once_ends_the_waits_before_their_timeout,
        ),
        (
            "a_plain_timeout_is_not_called_a_deadlock",
            a_plain_timeout_is_not_called_a_deadlock,
        ),
        (
            "a_bad_deadlock_option_is_refused",
            a_bad_deadlock_option_is_refused,
        ),
        (
            "a_timeout_names_processes_by_their_labels",
            a_timeout_names_processes_by_their_labels,
        ),
        (
            "labels_and_a_normal_exit_are_shown",
            labels_and_a_normal_exit_are_shown,
        ),
        (
            "an_event_cycle_in_one_process",
            an_event_cycle_in_one_process,
        ),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, f)| Trial::test(name, f))
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}

// ---- the agent ---------------------------------------------------------------------------

fn agent() {
    common::serve(command);
}

fn command(sim: &Sim, streams: &mut [Option<RawStream>], w: &[&str]) -> Result<String, SimError> {
    let mut stream = |dev: u32| -> Result<RawStream, SimError> {
        let slot = streams
            .get_mut(dev as usize)
            .ok_or_else(|| SimError::new(Error::ParamInvalid, "bad device"))?;
        if let Some(s) = slot {
            return Ok(*s);
        }
        let s = sim.create_stream(dev)?;
        *slot = Some(s);
        Ok(s)
    };
    match w.first().copied().unwrap_or("") {
        // create DEV → handle
        "create" => Ok(sim
            .create_notify(num(w, 1)?, CreateFlags::empty())?
            .0
            .to_string()),
        // export HANDLE → key (no PID validation)
        "export" => Ok(sim
            .export_key(RawNotify(num(w, 1)?), ExportFlags::DISABLE_PID_VALIDATION)?
            .as_str()
            .to_owned()),
        // import DEV KEY → handle
        "import" => Ok(sim
            .import_by_key(
                num(w, 1)?,
                w.get(2).copied().unwrap_or(""),
                ImportFlags::ENABLE_PEER_ACCESS,
            )?
            .0
            .to_string()),
        // wait HANDLE DEV SECONDS (queued only)
        "wait" => {
            let s = stream(num(w, 2)?)?;
            sim.wait_and_reset(RawNotify(num(w, 1)?), s, Timeout::Seconds(num(w, 3)?))?;
            Ok(String::new())
        }
        // record HANDLE DEV (queued only)
        "record" => {
            let s = stream(num(w, 2)?)?;
            sim.record(RawNotify(num(w, 1)?), s)?;
            Ok(String::new())
        }
        // exit0: exit(0) at once, without dropping the Sim (as a C program that returns from
        // main without aclFinalize)
        "exit0" => std::process::exit(0),
        // sync DEV → the stream's result
        "sync" => {
            let s = stream(num(w, 1)?)?;
            sim.synchronize(s, SyncWait::AtMost(ANSWER))?;
            Ok(String::new())
        }
        other => Err(SimError::new(
            Error::ParamInvalid,
            format!("unknown agent command {other:?}"),
        )),
    }
}

// ---- the parent --------------------------------------------------------------------------

/// An agent of namespace `ns` on a 4-device Ascend910B, labelled `label`, with `env` on top.
fn spawn(ns: &str, label: &str, env: &[(&str, &str)]) -> Agent {
    let mut cmd = Agent::command(AGENT);
    cmd.env(acl_notify_sim::ENV_NAMESPACE, ns)
        .env(acl_notify_sim::ENV_SOC, "Ascend910B")
        .env(acl_notify_sim::ENV_DEVICES, "4")
        .env(acl_notify_sim::waitgraph::ENV_LABEL, label)
        .env_remove(acl_notify_sim::waitgraph::ENV_DEADLOCK);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Agent::spawn(cmd, label, ANSWER)
}

/// The message of a synchronize that must fail with 107020.
fn timeout_message(a: &mut Agent, dev: u32) -> Result<String, Failed> {
    a.send(&format!("sync {dev}"));
    match a.answer() {
        Err((107020, msg)) => Ok(msg),
        other => Err(format!("pid {}: expected 107020, got {other:?}", a.pid).into()),
    }
}

/// `msg` reports a deadlock naming every agent (pid and label).
fn names_the_cycle(msg: &str, members: &[&Agent]) -> Result<(), Failed> {
    if !msg.contains("deadlock") {
        return Err(format!("no \"deadlock\" in: {msg}").into());
    }
    if !msg.contains(&format!("{} streams wait on each other", members.len())) {
        return Err(format!("not a cycle of {} in: {msg}", members.len()).into());
    }
    for a in members {
        if !msg.contains(&format!("of pid {} ({})", a.pid, a.label)) {
            return Err(format!("pid {} ({}) missing from: {msg}", a.pid, a.label).into());
        }
    }
    Ok(())
}

/// Agents in a ring: agent i owns notify i on device i and waits on it (timeout
/// `timeouts[i]` s), then records the next agent's notify, imported.
fn ring(ns: &Ns, timeouts: &[u32], env: &[(&str, &str)]) -> Vec<Agent> {
    let n = timeouts.len();
    let mut agents: Vec<Agent> = (0..n)
        .map(|i| spawn(&ns.0, &format!("rank {i}"), env))
        .collect();
    let own: Vec<String> = (0..n)
        .map(|i| agents[i].ok(&format!("create {i}")))
        .collect();
    let keys: Vec<String> = (0..n)
        .map(|i| agents[i].ok(&format!("export {}", own[i])))
        .collect();
    let next: Vec<String> = (0..n)
        .map(|i| agents[i].ok(&format!("import {i} {}", keys[(i + 1) % n])))
        .collect();
    for i in 0..n {
        agents[i].ok(&format!("wait {} {i} {}", own[i], timeouts[i]));
    }
    // Every wait is asleep before the records queue behind them (the cycle is closed by the
    // last record).
    std::thread::sleep(Duration::from_millis(300));
    for i in 0..n {
        agents[i].ok(&format!("record {} {i}", next[i]));
    }
    agents
}

fn two_process_deadlock() -> Result<(), Failed> {
    let ns = Ns::new("dl", "two");
    let mut a = ring(&ns, &[3, 30], &[]);
    // Agent 0 times out first; agent 1's wait is then released by 0's record.
    let msg = timeout_message(&mut a[0], 0)?;
    names_the_cycle(&msg, &[&a[0], &a[1]])?;
    if !msg.contains("behind its wait on notify") {
        return Err(format!("no record position in: {msg}").into());
    }
    a[1].ok("sync 1");
    Ok(())
}

fn three_process_cycle() -> Result<(), Failed> {
    let ns = Ns::new("dl", "three");
    let mut a = ring(&ns, &[30, 8, 30], &[]);
    // The inspector sees the cycle while it lasts.
    let end = Instant::now() + Duration::from_secs(6);
    let snap = loop {
        let snap = acl_notify_sim::inspect::snapshot(&ns.0, 0).map_err(|e| e.to_string())?;
        if !snap.deadlocks.is_empty() || Instant::now() > end {
            break snap;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = snap.to_text();
    let json = snap.to_json();
    if snap.deadlocks.len() != 1 || !text.contains("DEADLOCK: deadlock") {
        return Err(format!("the inspector shows no single cycle: {text}").into());
    }
    names_the_cycle(&snap.deadlocks[0], &[&a[0], &a[1], &a[2]])?;
    if !json.contains("\"deadlocks\":[\"deadlock: 3 streams")
        || !json.contains("\"label\":\"rank 2\"")
    {
        return Err(format!("the JSON shows no cycle: {json}").into());
    }
    let msg = timeout_message(&mut a[1], 1)?;
    names_the_cycle(&msg, &[&a[0], &a[1], &a[2]])?;
    a[0].ok("sync 0");
    a[2].ok("sync 2");
    Ok(())
}

/// Both notifies are agent 0's; agent 1 imports them on the same device and waits on one of
/// them: the cycle goes through an imported notify's wait.
fn cycle_through_an_imported_notify() -> Result<(), Failed> {
    let ns = Ns::new("dl", "imp");
    let mut a = spawn(&ns.0, "owner", &[]);
    let mut b = spawn(&ns.0, "importer", &[]);
    let n1 = a.ok("create 0");
    let n2 = a.ok("create 0");
    let k1 = a.ok(&format!("export {n1}"));
    let k2 = a.ok(&format!("export {n2}"));
    let m1 = b.ok(&format!("import 0 {k1}"));
    let m2 = b.ok(&format!("import 0 {k2}"));
    a.ok(&format!("wait {n2} 0 30"));
    b.ok(&format!("wait {m1} 0 3"));
    std::thread::sleep(Duration::from_millis(300));
    a.ok(&format!("record {n1} 0"));
    b.ok(&format!("record {m2} 0"));
    let msg = timeout_message(&mut b, 0)?;
    names_the_cycle(&msg, &[&a, &b])?;
    a.ok("sync 0");
    Ok(())
}

fn fail_at_once_ends_the_waits_before_their_timeout() -> Result<(), Failed> {
    let ns = Ns::new("dl", "fail");
    let started = Instant::now();
    let mut a = ring(
        &ns,
        &[60, 60, 60],
        &[(acl_notify_sim::waitgraph::ENV_DEADLOCK, "fail")],
    );
    // Each member looks for the cycle while it sleeps, so whichever finds it first fails and
    // its record then releases the next one: at least one fails, every failure names the
    // cycle, and nobody waits for its 60 s timeout.
    let mut failed = 0;
    for i in 0..a.len() {
        a[i].send(&format!("sync {i}"));
        match a[i].answer() {
            Ok(_) => {}
            Err((107020, msg)) => {
                let all: Vec<&Agent> = a.iter().collect();
                names_the_cycle(&msg, &all)?;
                if !msg.contains("before its timeout") {
                    return Err(format!("does not say it ended early: {msg}").into());
                }
                failed += 1;
            }
            Err(e) => return Err(format!("agent {i}: {e:?}").into()),
        }
    }
    if failed == 0 {
        return Err("no wait of the cycle failed".into());
    }
    if started.elapsed() > Duration::from_secs(30) {
        return Err(format!("the deadlock took {:?} to end", started.elapsed()).into());
    }
    Ok(())
}

fn a_plain_timeout_is_not_called_a_deadlock() -> Result<(), Failed> {
    let ns = Ns::new("dl", "plain");
    let mut a = spawn(&ns.0, "alone", &[]);
    let mut b = spawn(&ns.0, "other", &[]);
    let n = a.ok("create 0");
    let k = a.ok(&format!("export {n}"));
    let m = b.ok(&format!("import 1 {k}"));
    let other = b.ok("create 1");
    // Agent b's record of a's notify is queued behind a wait that nobody in a cycle blocks:
    // a's wait times out without a cycle.
    b.ok(&format!("wait {other} 1 30"));
    b.ok(&format!("record {m} 1"));
    a.ok(&format!("wait {n} 0 2"));
    let msg = timeout_message(&mut a, 0)?;
    if msg.contains("deadlock") {
        return Err(format!("a timeout without a cycle called a deadlock: {msg}").into());
    }
    drop(b);
    Ok(())
}

/// An ordinary 107020 (no cycle) names the processes it mentions by their labels: the owner
/// and the holders of the notify.
fn a_timeout_names_processes_by_their_labels() -> Result<(), Failed> {
    let ns = Ns::new("dl", "labels");
    let mut a = spawn(&ns.0, "trainer-0", &[]);
    let mut b = spawn(&ns.0, "trainer-1", &[]);
    let n = a.ok("create 0");
    let k = a.ok(&format!("export {n}"));
    // b holds the notify through its import; a's own wait on it times out.
    b.ok(&format!("import 1 {k}"));
    a.ok(&format!("wait {n} 0 1"));
    let msg = timeout_message(&mut a, 0)?;
    let owner = format!("owner pid {} (trainer-0, alive)", a.pid);
    let holder = format!("pid {} (trainer-1, alive)", b.pid);
    if !msg.contains(&owner) || !msg.contains(&holder) {
        return Err(format!("expected {owner:?} and {holder:?} in: {msg}").into());
    }
    drop(b);
    Ok(())
}

fn a_bad_deadlock_option_is_refused() -> Result<(), Failed> {
    let ns = Ns::new("dl", "opt");
    let out = Command::new(std::env::current_exe()?)
        .env(AGENT, "1")
        .env(acl_notify_sim::ENV_NAMESPACE, &ns.0)
        .env(acl_notify_sim::waitgraph::ENV_DEADLOCK, "yes")
        .stdin(Stdio::null())
        .output()?;
    let first = String::from_utf8_lossy(&out.stdout);
    if !first.starts_with("err 107000") || !first.contains("ACL_NOTIFY_SIM_DEADLOCK") {
        return Err(format!(
            "a bad {} was not refused: {first}",
            "ACL_NOTIFY_SIM_DEADLOCK"
        )
        .into());
    }
    Ok(())
}

/// A process labelled by the launcher's RANK and one by ACL_NOTIFY_SIM_LABEL both hold a
/// notify; the first ends with exit(0) without letting go, the second is killed. The inspector
/// shows the labels, the first as exited and the second as dead.
fn labels_and_a_normal_exit_are_shown() -> Result<(), Failed> {
    let ns = Ns::new("dl", "exit");
    let mut owner = spawn(&ns.0, "owner", &[]);
    let mut ranked = spawn(&ns.0, "", &[("RANK", "3")]);
    let mut killed = spawn(&ns.0, "victim", &[]);
    let n = owner.ok("create 0");
    let key = owner.ok(&format!("export {n}"));
    ranked.ok(&format!("import 1 {key}"));
    killed.ok(&format!("import 1 {key}"));
    let snap = acl_notify_sim::inspect::snapshot(&ns.0, 0).map_err(|e| e.to_string())?;
    let label = |pid: i32| {
        snap.processes
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.label.clone())
    };
    if label(ranked.pid).as_deref() != Some("rank 3")
        || label(owner.pid).as_deref() != Some("owner")
    {
        return Err(format!("labels not shown: {}", snap.to_text()).into());
    }
    ranked.send("exit0");
    ranked.wait();
    killed.kill();
    let snap = acl_notify_sim::inspect::snapshot(&ns.0, 0).map_err(|e| e.to_string())?;
    let word = |pid: i32| {
        snap.processes
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.alive.word())
    };
    let text = snap.to_text();
    if word(ranked.pid) != Some("exited") || word(killed.pid) != Some("dead") {
        return Err(format!("exited/dead not told apart: {text}").into());
    }
    let holders = &snap.notifies.first().ok_or("no notify")?.holders;
    if !holders
        .iter()
        .any(|h| h.pid == ranked.pid && h.alive.word() == "exited")
    {
        return Err(format!("the holder that exited is not shown as exited: {text}").into());
    }
    if !text.contains("1 dead, 1 exited") || !text.contains("(rank 3)") {
        return Err(format!("the process table does not say so: {text}").into());
    }
    Ok(())
}

/// Two streams of one process wait on each other's events (classic events, each recorded once
/// and reset, so that a wait waits): the first wait to time out says deadlock and names the
/// events.
fn an_event_cycle_in_one_process() -> Result<(), Failed> {
    use acl_notify_core::event::{EventFlags, EventOps, EventSpec};
    let ns = Ns::new("dl", "evt");
    let sim = Sim::builder()
        .devices(1)
        .namespace(&ns.0)
        .open()
        .map_err(|e| e.to_string())?;
    let s0 = sim.create_stream(0).map_err(|e| e.to_string())?;
    let (a, b) = (
        sim.create_stream(0).map_err(|e| e.to_string())?,
        sim.create_stream(0).map_err(|e| e.to_string())?,
    );
    // Events of one id for life (ACL_EVENT_SYNC), whose later record releases a wait enqueued
    // before it: an aclrtCreateEvent event's wait waits for the record latest when it was
    // enqueued (here the reset one), which no later record releases, so there is no cycle.
    let spec = EventSpec::with_flag(EventFlags::SYNC.bits(), acl_notify_core::Soc::Ascend910B)
        .map_err(|e| format!("{e:?}"))?;
    let e1 = sim.event_create(0, spec).map_err(|e| e.to_string())?;
    let e2 = sim.event_create(0, spec).map_err(|e| e.to_string())?;
    for e in [e1, e2] {
        sim.event_record(e, s0).map_err(|e| e.to_string())?;
        sim.event_reset(e, s0).map_err(|e| e.to_string())?;
    }
    sim.synchronize(s0, SyncWait::AtMost(ANSWER))
        .map_err(|e| e.to_string())?;
    let secs = |n| Timeout::from_c(n);
    sim.stream_wait_event(a, e1, secs(2))
        .map_err(|e| e.to_string())?;
    sim.stream_wait_event(b, e2, secs(30))
        .map_err(|e| e.to_string())?;
    std::thread::sleep(Duration::from_millis(200));
    sim.event_record(e2, a).map_err(|e| e.to_string())?;
    sim.event_record(e1, b).map_err(|e| e.to_string())?;
    let msg = match sim.synchronize(a, SyncWait::AtMost(ANSWER)) {
        Err(e) if e.kind() == Error::TaskTimeout => e.to_string(),
        other => return Err(format!("expected 107020, got {other:?}").into()),
    };
    if !msg.contains("deadlock: 2 streams wait on each other")
        || !msg.contains("waits on event")
        || !msg.contains("behind its wait on event")
    {
        return Err(format!("no event cycle in: {msg}").into());
    }
    sim.synchronize(b, SyncWait::AtMost(ANSWER))
        .map_err(|e| e.to_string())?;
    Ok(())
}

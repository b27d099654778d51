//! Multi-process tests of the simulator with real processes: this test binary re-executes
//! itself as an "agent" child (`ACL_SIM_AGENT=1`) that opens the namespace it is given and
//! obeys one-line commands on stdin, answering one line on stdout. The parent drives agents,
//! kills them with SIGKILL mid-flight, and checks what survivors and fresh processes see.
//!
//! Every wait has a timeout, every agent is killed when its handle drops, and every test uses
//! its own namespace (removed at the end), so the tests run in parallel.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use acl_notify_core::event::{
    EventFlags, EventOps, EventSpec, IPC_EVENT_HANDLE_SIZE, IpcEventHandle, StreamControl,
};
use acl_notify_core::sdid::PodDevice;
use acl_notify_core::{
    BackendError, CreateFlags, Error, ExportFlags, HostOps, ImportFlags, NotifyResources,
    RawNotify, RawStream, ServerPid, Soc, StreamOps, StreamStatus, SyncWait, Timeout,
};
use acl_notify_sim::Sim;
use libtest_mimic::{Arguments, Failed, Trial};

mod common;
use common::{Agent, Ns, check, num, poll_until};

const AGENT: &str = "ACL_SIM_AGENT";

type TestFn = fn() -> Result<(), Failed>;
/// Upper bound for any single agent answer.
const ANSWER: Duration = Duration::from_secs(30);

fn main() {
    if std::env::var_os(AGENT).is_some() {
        agent();
        return;
    }
    let tests: Vec<(&str, TestFn)> = vec![
        (
            "cross_process_record_wakes_a_waiting_stream",
            cross_process_record_wakes_a_waiting_stream,
        ),
        (
            "sigkill_of_an_importer_mid_flight",
            sigkill_of_an_importer_mid_flight,
        ),
        (
            "sigkill_of_the_owner_mid_flight",
            sigkill_of_the_owner_mid_flight,
        ),
        (
            "sigkill_of_an_ipc_event_holder_gives_its_events_back",
            sigkill_of_an_ipc_event_holder_gives_its_events_back,
        ),
        (
            "an_ipc_event_record_another_process_dropped_fails_the_waits_for_it",
            an_ipc_event_record_another_process_dropped_fails_the_waits_for_it,
        ),
        (
            "non_whitelisted_process_gets_207006",
            non_whitelisted_process_gets_207006,
        ),
        ("recycled_pid_is_refused", recycled_pid_is_refused),
        (
            "a_process_that_cannot_open_pidfds_is_checked_by_start_time",
            a_process_that_cannot_open_pidfds_is_checked_by_start_time,
        ),
        (
            "inter_server_whitelist_on_superpod",
            inter_server_whitelist_on_superpod,
        ),
        (
            "shm_file_is_0600_and_corrupt_header_is_refused",
            shm_file_is_0600_and_corrupt_header_is_refused,
        ),
        (
            "racing_creators_share_one_machine",
            racing_creators_share_one_machine,
        ),
        (
            "bad_environment_names_the_variable",
            bad_environment_names_the_variable,
        ),
        (
            "a_process_leaving_reclaims_what_a_killed_one_left",
            a_process_leaving_reclaims_what_a_killed_one_left,
        ),
        (
            "a_timeout_tells_a_process_that_ended_from_one_killed",
            a_timeout_tells_a_process_that_ended_from_one_killed,
        ),
        (
            "a_timeout_tells_another_server_s_process_that_ended_from_one_killed",
            a_timeout_tells_another_server_s_process_that_ended_from_one_killed,
        ),
    ];
    let trials = tests
        .into_iter()
        .map(|(name, f)| Trial::test(name, f))
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}

// ---- the agent (child side) ----------------------------------------------------------------

fn agent() {
    common::serve(run_command);
}

fn run_command(
    sim: &Sim,
    streams: &mut [Option<RawStream>],
    w: &[&str],
) -> Result<String, acl_notify_sim::SimError> {
    let mut stream = |dev: u32| -> Result<RawStream, acl_notify_sim::SimError> {
        let slot = &mut streams[dev as usize];
        if let Some(s) = slot {
            return Ok(*s);
        }
        let s = sim.create_stream(dev)?;
        *slot = Some(s);
        Ok(s)
    };
    match w.first().copied().unwrap_or("") {
        "create" => Ok(sim
            .create_notify(num(w, 1)?, CreateFlags::empty())?
            .0
            .to_string()),
        "export_open" => Ok(sim
            .export_key(RawNotify(num(w, 1)?), ExportFlags::DISABLE_PID_VALIDATION)?
            .as_str()
            .to_owned()),
        "import" => {
            let key = w.get(2).copied().unwrap_or("");
            Ok(sim
                .import_by_key(num(w, 1)?, key, ImportFlags::ENABLE_PEER_ACCESS)?
                .0
                .to_string())
        }
        "record" => {
            let s = stream(num(w, 2)?)?;
            sim.record(RawNotify(num(w, 1)?), s)?;
            sim.synchronize(s, SyncWait::AtMost(ANSWER))?;
            Ok(String::new())
        }
        // Enqueue a wait that never times out, and report once it is queued in the table.
        "waitq" => {
            let s = stream(num(w, 2)?)?;
            sim.wait_and_reset(RawNotify(num(w, 1)?), s, Timeout::Forever)?;
            std::thread::sleep(Duration::from_millis(100));
            Ok(format!("{:?}", sim.query(s)?))
        }
        "free" => Ok(sim.notifies_free(num(w, 1)?)?.to_string()),
        "malloc" => Ok(sim.malloc(num(w, 1)?, num(w, 2)?, 0)?.to_string()),
        "gc" => {
            let r = sim.gc()?;
            Ok(format!("{} {}", r.processes, r.notifies_freed))
        }
        // Creates IPC events on a device until it has none left; answers how many.
        "evfill" => {
            let dev: u32 = num(w, 1)?;
            let mut n = 0u32;
            loop {
                match sim.event_create(dev, ipc_spec()) {
                    Ok(_) => n += 1,
                    Err(e) if e.kind() == Error::NoEventResource => return Ok(n.to_string()),
                    Err(e) => return Err(e),
                }
            }
        }
        // Opens the IPC event of a handle (in hex) on a device.
        "evopen" => {
            let h = from_hex(w.get(2).copied().unwrap_or(""))?;
            Ok(sim.ipc_open_event(num(w, 1)?, &h)?.0.to_string())
        }
        // Opens the IPC event of a handle (in hex) on a device and records it on a stream
        // behind a wait that never ends, then aborts the stream: the record is dropped unrun.
        "evdrop" => {
            let dev: u32 = num(w, 1)?;
            let h = from_hex(w.get(2).copied().unwrap_or(""))?;
            let ev = sim.ipc_open_event(dev, &h)?;
            let gate = sim.create_notify(dev, CreateFlags::empty())?;
            let s = sim.create_stream(dev)?;
            sim.wait_and_reset(gate, s, Timeout::Forever)?;
            sim.event_record(ev, s)?;
            sim.abort(s)?;
            let _ = sim.synchronize(s, SyncWait::AtMost(ANSWER));
            Ok(String::new())
        }
        "exit" => Ok(String::new()),
        other => Err(acl_notify_sim::SimError::new(
            Error::ParamInvalid,
            format!("unknown agent command {other:?}"),
        )),
    }
}

/// `aclrtCreateEventExWithFlag(ACL_EVENT_IPC)` on a 910B.
fn ipc_spec() -> EventSpec {
    EventSpec::ex_with_flag(EventFlags::IPC.bits(), Soc::Ascend910B).expect("IPC event spec")
}

fn to_hex(h: &IpcEventHandle) -> String {
    h.0.iter().map(|b| format!("{b:02x}")).collect()
}

fn from_hex(s: &str) -> Result<IpcEventHandle, acl_notify_sim::SimError> {
    let bad = || acl_notify_sim::SimError::new(Error::ParamInvalid, "bad IPC event handle text");
    let mut h = IpcEventHandle([0; IPC_EVENT_HANDLE_SIZE]);
    if s.len() != 2 * h.0.len() {
        return Err(bad());
    }
    for (i, b) in h.0.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16).map_err(|_| bad())?;
    }
    Ok(h)
}

// ---- the parent side ---------------------------------------------------------------------

/// An agent of namespace `ns` on a 2-device `soc` machine, as server `server`.
fn spawn(ns: &str, soc: Soc, server: u32) -> Agent {
    let mut cmd = Agent::command(AGENT);
    cmd.env(acl_notify_sim::ENV_NAMESPACE, ns)
        .env(acl_notify_sim::ENV_SOC, soc.name())
        .env(acl_notify_sim::ENV_DEVICES, "2")
        .env(acl_notify_sim::ENV_SERVER_ID, server.to_string());
    Agent::spawn(cmd, "", ANSWER)
}

/// A 2-device `soc` machine in namespace `ns`, opened by this process.
fn open(ns: &Ns, soc: Soc) -> Sim {
    Sim::builder()
        .soc(soc)
        .devices(2)
        .namespace(&ns.0)
        .open()
        .expect("open namespace")
}

fn cross_process_record_wakes_a_waiting_stream() -> Result<(), Failed> {
    let ns = Ns::new("mp", "xrec");
    let sim = open(&ns, Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::DISABLE_PID_VALIDATION)?;
    let s = sim.create_stream(0)?;
    sim.wait_and_reset(n, s, Timeout::from_c(30))?;
    std::thread::sleep(Duration::from_millis(50));
    check(sim.query(s)? == StreamStatus::NotReady, || {
        "the wait should stall the stream until the other process records".into()
    })?;
    let mut b = spawn(&ns.0, Soc::Ascend910B, 0);
    // The importer is on device 1 and records there.
    let h = b.ok(&format!("import 1 {key}"));
    b.ok(&format!("record {h} 1"));
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))?;
    check(sim.query(s)? == StreamStatus::Complete, || {
        "stream not complete".into()
    })?;
    // Exactly one record was consumed: nothing is left.
    check(!sim.try_consume(n)?, || {
        "the record was consumed twice or left".into()
    })?;
    b.ok("exit");
    Ok(())
}

fn sigkill_of_an_importer_mid_flight() -> Result<(), Failed> {
    let ns = Ns::new("mp", "killimp");
    let sim = open(&ns, Soc::Ascend910B);
    let total = sim.notifies_free(0)?;
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::DISABLE_PID_VALIDATION)?;
    let mut b = spawn(&ns.0, Soc::Ascend910B, 0);
    // The importer, on the owner's device, queues a wait that never times out: it holds the
    // head ticket of the notify's waiter queue when it dies.
    let h = b.ok(&format!("import 0 {key}"));
    check(b.ok(&format!("waitq {h} 0")) == "NotReady", || {
        "importer wait not queued".into()
    })?;
    let s = sim.create_stream(0)?;
    sim.wait_and_reset(n, s, Timeout::from_c(30))?;
    std::thread::sleep(Duration::from_millis(50));
    b.kill();
    // The survivor's wait is not blocked by the dead process's ticket: a record reaches it.
    let d = sim.default_stream(1)?;
    sim.record(n, d)?;
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))
        .map_err(|e| format!("survivor's wait: {e}"))?;
    // The survivor destroys its handle; the dead importer's reference must not keep the id.
    sim.destroy_notify(n)?;
    let mut fresh = spawn(&ns.0, Soc::Ascend910B, 0);
    let free: u32 = fresh.ok("free 0").parse()?;
    check(free == total, || {
        format!("fresh process sees {free} of {total} ids free")
    })?;
    fresh.ok("exit");
    Ok(())
}

fn sigkill_of_the_owner_mid_flight() -> Result<(), Failed> {
    let ns = Ns::new("mp", "killown");
    let sim = open(&ns, Soc::Ascend910B);
    let total = sim.notifies_free(1)?;
    let mut a = spawn(&ns.0, Soc::Ascend910B, 0);
    let h = a.ok("create 1");
    let key = a.ok(&format!("export_open {h}"));
    // The owner holds a queued wait on its device, then dies.
    check(a.ok(&format!("waitq {h} 1")) == "NotReady", || {
        "owner wait not queued".into()
    })?;
    let imp = sim.import_by_key(1, &key, ImportFlags::empty())?;
    check(sim.notifies_free(1)? == total - 1, || {
        "id not in use".into()
    })?;
    a.kill();
    // The importer (same device) can still record and wait: the notify outlives its owner.
    let s = sim.create_stream(1)?;
    sim.record(imp, s)?;
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(20)))?;
    sim.host_wait(imp, Duration::from_secs(20))
        .map_err(|e| format!("importer wait after owner death: {e}"))?;
    let r = sim.gc()?;
    check(r.processes >= 1, || format!("gc reclaimed nothing: {r:?}"))?;
    check(sim.notifies_free(1)? == total - 1, || {
        "importer still holds the id".into()
    })?;
    sim.destroy_notify(imp)?;
    check(sim.notifies_free(1)? == total, || {
        "id not freed by the last holder".into()
    })?;
    drop(sim);
    let mut fresh = spawn(&ns.0, Soc::Ascend910B, 0);
    let free: u32 = fresh.ok("free 1").parse()?;
    check(free == total, || {
        format!("fresh process sees {free} of {total} ids free")
    })?;
    // The key is stale now.
    let e = fresh.cmd(&format!("import 1 {key}"));
    check(matches!(e, Err((107017, _))), || {
        format!("stale key import gave {e:?}")
    })?;
    fresh.ok("exit");
    Ok(())
}

/// A process that dies, even by SIGKILL, holding IPC events (its own and one it opened) is
/// treated as having destroyed them: the slots it held alone come back (the survivor can fill
/// the device again), and an event it held last is gone (its handle names nothing).
fn sigkill_of_an_ipc_event_holder_gives_its_events_back() -> Result<(), Failed> {
    let ns = Ns::new("mp", "killevt");
    let sim = open(&ns, Soc::Ascend910B);
    let mine = sim.event_create(0, ipc_spec())?;
    let h = sim.ipc_event_handle(mine)?;
    let mut a = spawn(&ns.0, Soc::Ascend910B, 0);
    let filled: u32 = a.ok("evfill 0").parse()?;
    check(filled > 0, || "the agent created no IPC event".into())?;
    a.ok(&format!("evopen 0 {}", to_hex(&h)));
    let full = sim.event_create(0, ipc_spec());
    check(
        matches!(&full, Err(e) if e.kind() == Error::NoEventResource),
        || format!("device 0 should be full while the agent lives: {full:?}"),
    )?;
    // The agent's reference keeps the event after this process, its creator, destroyed its
    // handle, but the handle opens nothing more (CANN's creator frees the event's shared
    // memory at its release).
    sim.event_destroy(mine)?;
    let again = sim.ipc_open_event(0, &h);
    check(
        matches!(&again, Err(e) if e.kind() == Error::InvalidHandle),
        || format!("a handle whose creator destroyed the event should open nothing: {again:?}"),
    )?;
    a.kill();
    // Every slot comes back: the survivor fills the whole device (the first create that
    // finds it full reclaims the dead process).
    let mut made = Vec::new();
    loop {
        match sim.event_create(0, ipc_spec()) {
            Ok(e) => made.push(e),
            Err(e) if e.kind() == Error::NoEventResource => break,
            Err(e) => return Err(format!("create after the agent died: {e}").into()),
        }
    }
    check(made.len() as u32 == filled + 1, || {
        format!(
            "after the agent died the survivor created {} IPC events, not {}",
            made.len(),
            filled + 1
        )
    })?;
    for e in made {
        sim.event_destroy(e)?;
    }
    // The event the agent held last went with it.
    let stale = sim.ipc_open_event(0, &h);
    check(
        matches!(&stale, Err(e) if e.kind() == Error::InvalidHandle),
        || format!("the dead holder's last event should be gone: {stale:?}"),
    )?;
    Ok(())
}

/// A record of an IPC event that the recording process's stream dropped unrun (aborted
/// behind a wait that never ends) fails another process's synchronize and stream wait for it
/// with 107023 naming that process, as it fails the recording process's own, while it is the
/// event's latest record; a record issued after it is waited for as usual. Until 2026-12-05
/// the other process's waits passed with 0 as if it had run.
fn an_ipc_event_record_another_process_dropped_fails_the_waits_for_it() -> Result<(), Failed> {
    let ns = Ns::new("mp", "evdrop");
    let sim = open(&ns, Soc::Ascend910B);
    let mine = sim.event_create(0, ipc_spec())?;
    let h = sim.ipc_event_handle(mine)?;
    let mut a = spawn(&ns.0, Soc::Ascend910B, 0);
    a.ok(&format!("evdrop 0 {}", to_hex(&h)));
    let synced = sim.event_synchronize(mine, SyncWait::AtMost(ANSWER));
    check(
        matches!(&synced, Err(e) if e.kind() == Error::StreamAbort
            && e.to_string().contains(&format!("pid {}", a.pid))),
        || format!("the synchronize of the dropped record gave {synced:?}"),
    )?;
    let s = sim.create_stream(0)?;
    sim.stream_wait_event(s, mine, Timeout::Forever)?;
    let waited = sim.synchronize(s, SyncWait::AtMost(ANSWER));
    check(
        matches!(&waited, Err(e) if e.kind() == Error::StreamAbort),
        || format!("the stream wait for the dropped record gave {waited:?}"),
    )?;
    // A record after it (this process's own) is waited for and passes.
    sim.event_record(mine, s)?;
    sim.event_synchronize(mine, SyncWait::AtMost(ANSWER))?;
    a.ok("exit");
    Ok(())
}

fn non_whitelisted_process_gets_207006() -> Result<(), Failed> {
    let ns = Ns::new("mp", "wl");
    let sim = open(&ns, Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::empty())?;
    let mut b = spawn(&ns.0, Soc::Ascend910B, 0);
    let mut c = spawn(&ns.0, Soc::Ascend910B, 0);
    sim.set_import_pids(n, &[c.pid])?;
    let e = b.cmd(&format!("import 1 {key}"));
    match &e {
        Err((207006, msg)) => check(
            msg.contains("not whitelisted") && msg.contains(&c.pid.to_string()),
            || format!("message should name the whitelist: {msg}"),
        )?,
        other => return Err(format!("non-whitelisted import gave {other:?}").into()),
    }
    // The whitelisted one gets in, and its record reaches the owner.
    let h = c.ok(&format!("import 1 {key}"));
    c.ok(&format!("record {h} 1"));
    sim.host_wait(n, Duration::from_secs(20))?;
    b.ok("exit");
    c.ok("exit");
    Ok(())
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`, clock ticks).
fn start_time_of(pid: i32) -> Result<u64, Failed> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    Ok(stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().nth(19))
        .and_then(|s| s.parse().ok())
        .ok_or("cannot read the agent's start time")?)
}

fn recycled_pid_is_refused() -> Result<(), Failed> {
    let ns = Ns::new("mp", "recycle");
    let sim = open(&ns, Soc::Ascend910B);
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::empty())?;
    let mut b = spawn(&ns.0, Soc::Ascend910B, 0);
    // The whitelist names b's PID but a process that started at another time: what the owner
    // would have recorded for an earlier process whose PID b now reuses.
    let start = start_time_of(b.pid)?;
    sim.set_import_pid_with_start_time(n, b.pid, start + 1)?;
    let e = b.cmd(&format!("import 0 {key}"));
    match &e {
        Err((207006, msg)) => check(msg.contains("recycled"), || msg.clone())?,
        other => return Err(format!("recycled-PID import gave {other:?}").into()),
    }
    // With the right start time (what set_import_pids records) it is let in.
    sim.set_import_pids(n, &[b.pid])?;
    b.ok(&format!("import 0 {key}"));
    b.ok("exit");
    Ok(())
}

/// An agent whose `pidfd_open` fails with ENOSYS, as it does under valgrind (memcheck does
/// not know the call): a seccomp filter installed before the agent runs, kept across exec.
fn spawn_without_pidfds(ns: &str, soc: Soc, server: u32) -> Agent {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Agent::command(AGENT);
    cmd.env(acl_notify_sim::ENV_NAMESPACE, ns)
        .env(acl_notify_sim::ENV_SOC, soc.name())
        .env(acl_notify_sim::ENV_DEVICES, "2")
        .env(acl_notify_sim::ENV_SERVER_ID, server.to_string());
    // Load the syscall number; pidfd_open → ENOSYS; anything else allowed.
    let filter = [
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: 0, // offsetof(struct seccomp_data, nr)
        },
        libc::sock_filter {
            code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
            jt: 0,
            jf: 1,
            k: libc::SYS_pidfd_open as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        },
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ALLOW,
        },
    ];
    // SAFETY: the closure runs in the forked child before exec and calls only prctl, which is
    // async-signal-safe; `filter` outlives the call (the closure owns a copy), and the kernel
    // copies the program at PR_SET_SECCOMP.
    unsafe {
        cmd.pre_exec(move || {
            let prog = libc::sock_fprog {
                len: filter.len() as u16,
                filter: filter.as_ptr().cast_mut(),
            };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &prog as *const libc::sock_fprog,
                ) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Agent::spawn(cmd, "", ANSWER)
}

/// A process that cannot open pidfds (under valgrind) among native ones: the native owner's
/// entry for it holds its start time beside the pidfs number, so it is let in, by the start
/// time, and refused when the start time is another process's (a recycled PID). Before, the
/// entry held only the pidfs number, and the process was refused though rightly whitelisted.
fn a_process_that_cannot_open_pidfds_is_checked_by_start_time() -> Result<(), Failed> {
    let ns = Ns::new("mp", "nopidfd");
    let sim = open(&ns, Soc::Ascend910B);
    let mut b = spawn_without_pidfds(&ns.0, Soc::Ascend910B, 0);
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::empty())?;
    let start = start_time_of(b.pid)?;
    sim.set_import_pid_with_start_time(n, b.pid, start + 1)?;
    let e = b.cmd(&format!("import 0 {key}"));
    match &e {
        Err((207006, msg)) => check(msg.contains("recycled"), || msg.clone())?,
        other => return Err(format!("recycled-PID import gave {other:?}").into()),
    }
    sim.set_import_pids(n, &[b.pid])?;
    let h = b.ok(&format!("import 0 {key}"));
    b.ok(&format!("record {h} 0"));
    sim.host_wait(n, Duration::from_secs(20))?;
    b.ok("exit");
    Ok(())
}

/// Ascend910_93: a process of server 1 is not covered by a same-server entry, nor by an
/// entry naming its server id (not an sdid: 107000), nor by an entry for another device of
/// its server (refused on device 1 when device 0 is whitelisted, both sdids named); the entry
/// for the device it imports on admits it.
fn inter_server_whitelist_on_superpod() -> Result<(), Failed> {
    let ns = Ns::new("mp", "superpod");
    let sim = open(&ns, Soc::Ascend910_93);
    let n = sim.create_notify(1, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::empty())?;
    let mut b = spawn(&ns.0, Soc::Ascend910_93, 1);
    // A same-server PID entry does not cover a process on server 1.
    sim.set_import_pids(n, &[b.pid])?;
    let e = b.cmd(&format!("import 0 {key}"));
    check(matches!(e, Err((207006, _))), || {
        format!("server-1 import with a server-0 entry: {e:?}")
    })?;
    // The server id is not an sdid: refused (107000), naming the entry.
    let e = sim
        .set_import_server_pids(
            n,
            &[ServerPid {
                sdid: 1,
                pid: b.pid,
            }],
        )
        .unwrap_err();
    check(e.kind() == Error::ParamInvalid, || format!("{e}"))?;
    check(e.to_string().contains("names no device"), || format!("{e}"))?;
    // An entry for device 0 of server 1 (its sdid): the process on device 1 of that server
    // is refused, with both sdids named; on device 0 it is admitted.
    let dev0 = PodDevice::new(1, 0).map(PodDevice::sdid).ok_or("sdid")?;
    sim.set_import_server_pids(
        n,
        &[ServerPid {
            sdid: dev0,
            pid: b.pid,
        }],
    )?;
    let e = b.cmd(&format!("import 1 {key}"));
    check(
        matches!(&e, Err((207006, m)) if m.contains("0x5d000100 (server 1, device 0)")
            && m.contains("0x5d000101 (server 1, device 1)")),
        || format!("device-1 import with a device-0 entry: {e:?}"),
    )?;
    let h = b.ok(&format!("import 0 {key}"));
    b.ok(&format!("record {h} 0"));
    sim.host_wait(n, Duration::from_secs(20))?;
    // On a SoC without SuperPod support the inter-server call is 207000.
    let ns2 = Ns::new("mp", "nosuperpod");
    let plain = open(&ns2, Soc::Ascend910B);
    let m = plain.create_notify(0, CreateFlags::empty())?;
    plain.export_key(m, ExportFlags::empty())?;
    let e = plain
        .set_import_server_pids(m, &[ServerPid { sdid: 1, pid: 1 }])
        .unwrap_err();
    check(e.kind() == Error::FeatureNotSupport, || format!("{e}"))?;
    b.ok("exit");
    Ok(())
}

fn shm_file_is_0600_and_corrupt_header_is_refused() -> Result<(), Failed> {
    let ns = Ns::new("mp", "file");
    let path = {
        let sim = open(&ns, Soc::Ascend910B);
        sim.shm_path().to_owned()
    };
    let mode = std::fs::metadata(&path)?.permissions().mode() & 0o7777;
    check(mode == 0o600, || format!("mode {mode:o}"))?;
    // Another process with another SoC is refused with a message naming the file.
    let sim_err = Sim::builder()
        .soc(Soc::Ascend950PR)
        .devices(2)
        .namespace(&ns.0)
        .open()
        .unwrap_err();
    check(
        sim_err.to_string().contains(path.to_str().unwrap_or("?")),
        || sim_err.to_string(),
    )?;
    // Corrupt the layout version (bytes 8..12 of the header), in place, and keep the file
    // mapped, as a live process of a build of that version would: it is refused (a file of
    // another version that nobody maps is replaced instead; see the end).
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)?;
    {
        use std::os::unix::fs::FileExt;
        let mut v = [0u8; 4];
        f.read_exact_at(&mut v, 8)?;
        v[0] ^= 0x55;
        f.write_all_at(&v, 8)?;
    }
    let mapping = Mapping::of(&f)?;
    let e = Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(2)
        .namespace(&ns.0)
        .open()
        .unwrap_err();
    check(e.kind() == Error::DrvInternalError, || e.to_string())?;
    check(e.to_string().contains("layout version"), || e.to_string())?;
    // And in a fresh process too (nothing cached): a clear error, not a crash.
    let mut child = Command::new(std::env::current_exe()?)
        .env(AGENT, "1")
        .env(acl_notify_sim::ENV_NAMESPACE, &ns.0)
        .env(acl_notify_sim::ENV_DEVICES, "2")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()?;
    let out = child.stdout.take().map(|o| {
        let mut s = String::new();
        let _ = BufReader::new(o).read_line(&mut s);
        s
    });
    let status = child.wait()?;
    let line = out.unwrap_or_default();
    check(status.success() && line.starts_with("err 507899"), || {
        format!("{status:?}: {line}")
    })?;
    // Nobody maps it any more: the next open replaces it with a file of this build's layout.
    drop(mapping);
    let sim = open(&ns, Soc::Ascend910B);
    check(
        sim.notifies_free(0)? == Soc::Ascend910B.max_notifies(),
        || "a fresh file".to_owned(),
    )?;
    Ok(())
}

/// A read-only mapping of a file's first page, unmapped on drop.
struct Mapping(*mut libc::c_void);

impl Mapping {
    fn of(f: &std::fs::File) -> Result<Mapping, Failed> {
        use std::os::unix::io::AsRawFd as _;
        // SAFETY: maps one page of an open file of at least a page, read-only; unmapped in
        // `drop`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err("mmap failed".into());
        }
        Ok(Mapping(p))
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the page mapped in `of`.
        unsafe { libc::munmap(self.0, 4096) };
    }
}

fn racing_creators_share_one_machine() -> Result<(), Failed> {
    let ns = Ns::new("mp", "race");
    let mut agents: Vec<Agent> = Vec::new();
    // Spawn without waiting for each to open: they race for O_EXCL.
    let kids: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn({
                let ns = ns.0.clone();
                move || spawn(&ns, Soc::Ascend310P, 0)
            })
        })
        .collect();
    for k in kids {
        agents.push(k.join().map_err(|_| "agent failed to open")?);
    }
    let mut ids = Vec::new();
    for a in &mut agents {
        a.ok("create 0");
        ids.push(a.ok("free 0").parse::<u32>()?);
    }
    // All four see one machine: the last answer counts all four creates.
    check(ids.last() == Some(&(1024 - 4)), || {
        format!("free counts {ids:?}")
    })?;
    for a in &mut agents {
        a.kill();
    }
    let sim = open(&ns, Soc::Ascend310P);
    poll_until("ids reclaimed", Duration::from_secs(10), || {
        let _ = sim.gc();
        sim.notifies_free(0).ok() == Some(1024)
    })?;
    Ok(())
}

/// Runs an agent with `env` and returns its first output line (it exits when stdin closes).
fn first_line(env: &[(&str, &str)]) -> Result<String, Failed> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.env(AGENT, "1")
        .env_remove(acl_notify_sim::ENV_SOC)
        .env_remove(acl_notify_sim::ENV_DEVICES)
        .env_remove(acl_notify_sim::ENV_SERVER_ID)
        .env_remove(acl_notify_sim::ENV_NAMESPACE);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).spawn()?;
    let mut line = String::new();
    if let Some(o) = child.stdout.take() {
        BufReader::new(o).read_line(&mut line)?;
    }
    let _ = child.kill();
    child.wait()?;
    Ok(line)
}

fn bad_environment_names_the_variable() -> Result<(), Failed> {
    let ns = Ns::new("mp", "env");
    let ns_var = (acl_notify_sim::ENV_NAMESPACE, ns.0.as_str());
    let cases = [
        (acl_notify_sim::ENV_SOC, "Ascend9000"),
        (acl_notify_sim::ENV_DEVICES, "0"),
        (acl_notify_sim::ENV_DEVICES, "eight"),
        (acl_notify_sim::ENV_DEVICES, "65"),
        (acl_notify_sim::ENV_SERVER_ID, "-1"),
        // Ascend910B (the default SoC) has no SuperPod: only server 0 exists.
        (acl_notify_sim::ENV_SERVER_ID, "3"),
        (acl_notify_sim::ENV_NAMESPACE, "../etc"),
        (acl_notify_sim::ENV_NAMESPACE, ""),
    ];
    for (var, val) in cases {
        let env: Vec<(&str, &str)> = if var == acl_notify_sim::ENV_NAMESPACE {
            vec![(var, val)]
        } else {
            vec![ns_var, (var, val)]
        };
        let line = first_line(&env)?;
        check(line.starts_with("err 107000") && line.contains(var), || {
            format!("{var}={val:?} gave {line:?}")
        })?;
    }
    // The defaults (only the namespace set) open an Ascend910B machine with 8 devices ...
    let line = first_line(&[ns_var])?;
    check(line.starts_with("ok "), || {
        format!("defaults gave {line:?}")
    })?;
    // ... so opening it as a 2-device machine is refused, naming the variables to align.
    let e = Sim::builder()
        .devices(2)
        .namespace(&ns.0)
        .open()
        .err()
        .ok_or("a 2-device open of an 8-device machine succeeded")?;
    check(
        e.kind() == Error::ParamInvalid && e.to_string().contains("ACL_NOTIFY_SIM_DEVICES"),
        || e.to_string(),
    )?;
    Ok(())
}

/// A job that lost a process leaves the namespace clean once the others have left: the last
/// survivor's leaving (its `Sim` dropped, as at `aclFinalize`) reclaims the killed process's
/// notify id and its device memory, also on a device the survivor never touched. Before,
/// both stayed taken in `/dev/shm` (the process registered "dead") until a process opened
/// the namespace again or ran a gc.
fn a_process_leaving_reclaims_what_a_killed_one_left() -> Result<(), Failed> {
    let ns = Ns::new("mp", "leave");
    let mut survivor = spawn(&ns.0, Soc::Ascend910B, 0);
    let mut victim = spawn(&ns.0, Soc::Ascend910B, 0);
    victim.ok("create 1");
    victim.ok("malloc 1 1048576");
    victim.kill();
    survivor.ok("dropsim");
    let snap = acl_notify_sim::inspect::snapshot(&ns.0, 0)?;
    let dead: Vec<i32> = snap
        .processes
        .iter()
        .filter(|p| p.alive == acl_notify_sim::inspect::Liveness::Dead)
        .map(|p| p.pid)
        .collect();
    check(dead.is_empty(), || {
        format!("still registered dead: {dead:?}")
    })?;
    check(snap.notifies.is_empty(), || {
        format!("notifies left: {:?}", snap.notifies)
    })?;
    for d in &snap.memory {
        check(d.used == 0 && d.allocations.is_empty(), || {
            format!(
                "device {} keeps {} bytes: {:?}",
                d.device, d.used, d.allocations
            )
        })?;
    }
    Ok(())
}

/// A wait's timeout names a whitelisted process that ended its session normally "exited",
/// and only one killed "dead": in a job where a rank is killed, the others fail and end one
/// after another, and the last timeouts named those dead too, beside the one killed.
fn a_timeout_tells_a_process_that_ended_from_one_killed() -> Result<(), Failed> {
    timeout_tells_ended_from_killed("ended", Soc::Ascend910B, 0, |sim, n, pids| {
        sim.set_import_pids(n, &pids)
    })
}

/// The same for whitelisted processes of another server of this machine (SuperPod servers
/// sharing the namespace's files, outside cluster mode): one that ended its session normally
/// is "exited", only the killed one "dead" (both were named "dead", where the same processes
/// on this server, and on another host in cluster mode, were told apart).
fn a_timeout_tells_another_server_s_process_that_ended_from_one_killed() -> Result<(), Failed> {
    timeout_tells_ended_from_killed("ended-sdid", Soc::Ascend910_93, 1, |sim, n, pids| {
        let sdid = PodDevice::new(1, 0).map_or(0, PodDevice::sdid);
        sim.set_import_server_pids(n, &pids.map(|pid| ServerPid { sdid, pid }))
    })
}

/// Two processes of server `server`, whitelisted for an exported notify by `whitelist` (the
/// ended one's pid first), one ending its session normally, then both killed: a timeout of
/// a wait on the notify names the first "exited" and the second "dead" (with "on server N"
/// for another server's).
fn timeout_tells_ended_from_killed(
    tag: &str,
    soc: Soc,
    server: u32,
    whitelist: impl FnOnce(&Sim, RawNotify, [i32; 2]) -> Result<(), acl_notify_sim::SimError>,
) -> Result<(), Failed> {
    let ns = Ns::new("mp", tag);
    let sim = open(&ns, soc);
    let n = sim.create_notify(0, CreateFlags::empty())?;
    sim.export_key(n, ExportFlags::empty())?;
    let mut ended = spawn(&ns.0, soc, server);
    let mut killed = spawn(&ns.0, soc, server);
    whitelist(&sim, n, [ended.pid, killed.pid])?;
    ended.ok("dropsim");
    ended.kill();
    killed.kill();
    let text = sim
        .host_wait(n, Duration::from_millis(10))
        .expect_err("nothing records")
        .to_string();
    let on = if server == 0 {
        String::new()
    } else {
        format!(" on server {server}")
    };
    for part in [
        format!("pid {}{on} (exited)", ended.pid),
        format!("pid {}{on} (dead)", killed.pid),
    ] {
        check(text.contains(&part), || format!("{part:?} not in {text}"))?;
    }
    Ok(())
}

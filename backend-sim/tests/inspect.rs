//! The inspector explains a stuck wait, with real processes: an owner exports a notify,
//! whitelists an importer, and enqueues a wait that can never end once the importer is killed
//! (SIGKILL) after importing. `acl-notify-inspect` (the installed binary, run as a separate
//! process) must name the notify, the owner's stream thread sleeping on it, the whitelist with
//! the importer marked dead, and say that nobody is left to record it; `gc` must then reclaim
//! the importer.
//!
//! The test binary plays the roles itself (`INSPECT_ROLE=owner|importer`); every wait is
//! bounded, and the children end on their own after a minute if the parent disappears.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use acl_notify_core::event::{EventFlags, EventOps, EventSpec};
use acl_notify_core::{
    Backend, CreateFlags, ExportFlags, ImportFlags, NotifyResources, Soc, StreamOps, Timeout,
};
use acl_notify_sim::{NamespaceGuard, Sim};

mod common;
use common::{put, take};

const ROLE: &str = "INSPECT_ROLE";
const DIR: &str = "INSPECT_DIR";
const NS: &str = "INSPECT_NS";
const LIFETIME: Duration = Duration::from_secs(60);

fn open(ns: &str) -> Sim {
    Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(2)
        .namespace(ns)
        .open()
        .expect("open the simulator")
}

fn owner(dir: &Path, ns: &str) {
    let sim = open(ns);
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let key = sim.export_key(n, ExportFlags::empty()).unwrap();
    let importer: i32 = take(dir, "importer.pid").parse().unwrap();
    sim.set_import_pids(n, &[importer]).unwrap();
    put(dir, "id", sim.notify_info(n).unwrap().id);
    put(dir, "key", key.as_str());
    let s = sim.create_stream(0).unwrap();
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    put(dir, "waiting", sim.bare_tgid());
    // "Forever": until the parent kills us (bounded in case it never does).
    std::thread::sleep(LIFETIME);
}

fn importer(dir: &Path, ns: &str) {
    let sim = open(ns);
    put(dir, "importer.pid", sim.bare_tgid());
    let key = take(dir, "key");
    let _n = sim
        .import_by_key(1, &key, ImportFlags::ENABLE_PEER_ACCESS)
        .unwrap();
    // An IPC event only this process holds: freed by the gc once it is dead.
    let spec = EventSpec::ex_with_flag(EventFlags::IPC.bits(), Soc::Ascend910B).unwrap();
    let _e = sim.event_create(0, spec).unwrap();
    put(dir, "imported", "yes");
    std::thread::sleep(LIFETIME);
}

/// A child process killed (SIGKILL) and reaped on drop.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(role: &str, dir: &Path, ns: &str) -> Kid {
    Kid(Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "inspector_explains_a_stuck_wait", "--nocapture"])
        .env(ROLE, role)
        .env(DIR, dir)
        .env(NS, ns)
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn role"))
}

fn inspect(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_acl-notify-inspect"))
        .args(args)
        .output()
        .expect("run acl-notify-inspect");
    assert!(
        out.status.success(),
        "acl-notify-inspect {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `acl-notify-inspect args`, sampled until its output contains `want` (a thread's state is
/// read from /proc, and a thread asleep in 50 ms chunks is caught between two of them now and
/// then); `never` and the last output if that does not happen within 20 s.
fn inspect_until(args: &[&str], want: &str, never: &str) -> String {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let out = inspect(args);
        if out.contains(want) {
            return out;
        }
        assert!(Instant::now() < end, "{never}:\n{out}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn inspector_explains_a_stuck_wait() {
    if let Ok(role) = std::env::var(ROLE) {
        let dir = PathBuf::from(std::env::var_os(DIR).unwrap());
        let ns = std::env::var(NS).unwrap();
        match role.as_str() {
            "owner" => owner(&dir, &ns),
            "importer" => importer(&dir, &ns),
            _ => panic!("unknown role {role}"),
        }
        return;
    }
    let ns = format!("it-inspect-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    // Removes the namespace also when the test fails (after the children, bound later, are
    // killed).
    let _guard = NamespaceGuard(ns.clone());
    let dir = std::env::temp_dir().join(&ns);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let mut imp = spawn("importer", &dir, &ns);
    let own = spawn("owner", &dir, &ns);
    let imp_pid: i32 = take(&dir, "importer.pid").parse().unwrap();
    let id = take(&dir, "id");
    take(&dir, "imported");
    let own_pid: i32 = take(&dir, "waiting").parse().unwrap();
    // The importer dies holding the notify; nobody else can record it now.
    imp.0.kill().unwrap();
    imp.0.wait().unwrap();

    // The owner's stream thread is asleep on the notify (sampled from /proc), seen within
    // a few seconds.
    let text = inspect_until(
        &["show", "--namespace", &ns],
        "waiting: stream thread",
        "no waiting stream thread reported",
    );
    eprintln!("acl-notify-inspect show:\n{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("0    ") && l.contains(&format!("{own_pid} (alive)")))
        .unwrap_or_else(|| panic!("no table row for the notify on device 0:\n{text}"));
    assert!(
        line.split_whitespace().nth(1) == Some(id.as_str()),
        "row {line:?} is not notify {id}"
    );
    for want in [
        "notifies: 1 live".to_owned(),
        format!("waiting: stream thread \"acl-sim-d0-s0\" (pid {own_pid} tid"),
        "sleeps on the flag (first in line)".to_owned(),
        format!("whitelist: pid {imp_pid} (dead)"),
        format!("{imp_pid} (dead)"),
        "diagnosis: STUCK".to_owned(),
        "exported (whitelist)".to_owned(),
        "1 dead (reclaim with `acl-notify-inspect gc`)".to_owned(),
    ] {
        assert!(text.contains(&want), "{want:?} missing from:\n{text}");
    }
    // The JSON samples the threads from /proc again: the waiting thread is listed only while
    // it sleeps, and a loaded machine can catch it between two of its sleeps (its waits sleep
    // in 50 ms chunks, `core::waiter::CHUNK`; user23 saw `waiting_threads: []` at load ~30), so
    // it is sampled until seen asleep, as the text was above.
    let json = inspect_until(
        &["--namespace", &ns, "--json"],
        "\"name\":\"acl-sim-d0-s0\"",
        "the JSON never listed the waiting stream thread",
    );
    assert!(
        json.contains(&format!(
            "\"whitelist\":[{{\"sdid\":{},\"server\":0,\"pid\":{imp_pid},\"alive\":\"dead\"}}]",
            acl_notify_core::sdid::server_wide(0)
        )),
        "{json}"
    );

    // gc reclaims the importer: its holder bit goes, the notify stays (the owner holds it),
    // its IPC event is freed (and counted, though the gc's open reclaimed it).
    let gc = inspect(&["gc", "--namespace", &ns]);
    assert!(
        gc.contains(&format!("reclaimed 1 dead process(es) [{imp_pid}]")),
        "{gc}"
    );
    assert!(gc.contains("and 1 IPC event(s)"), "{gc}");
    let after = inspect(&["--namespace", &ns]);
    assert!(after.contains("0 dead"), "{after}");
    assert!(
        after.contains(&format!("holders: {own_pid} (alive)\n")),
        "the dead importer still holds the notify:\n{after}"
    );
    // The owner dies too, its stream still waiting: the waiter is counted as a dead one, and
    // the diagnosis says nothing waits any more (not STUCK).
    let mut own = own;
    own.0.kill().unwrap();
    own.0.wait().unwrap();
    let text = inspect(&["show", "--namespace", &ns]);
    for want in [
        "waiters of dead processes: 1",
        "all of dead processes: nothing waits on it any more",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    assert!(!text.contains("STUCK"), "{text}");
    let json = inspect(&["--namespace", &ns, "--json"]);
    assert!(json.contains("\"waiters\":1,\"dead_waiters\":1"), "{json}");
    drop(own);
    let _ = Sim::remove_namespace(&ns);
    let _ = std::fs::remove_dir_all(&dir);
}

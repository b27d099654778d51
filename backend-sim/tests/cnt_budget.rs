//! Count notifies across real processes: the count-notify budget
//! ([`CntNotifyOps::cnt_notifies_free`]) is the whole machine's, not one process's, and the
//! count notifies of a process killed with SIGKILL are given back by garbage collection.
//!
//! The test binary plays the child itself (`CNT_BUDGET_ROLE=child`); every wait is bounded.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use acl_notify_core::cnt::MAX_CNT_NOTIFIES;
use acl_notify_core::{CntNotifyOps, Soc};
use acl_notify_sim::{NamespaceGuard, Sim};

mod common;
use common::{put, take};

const ROLE: &str = "CNT_BUDGET_ROLE";
const DIR: &str = "CNT_BUDGET_DIR";
const NS: &str = "CNT_BUDGET_NS";

fn open(ns: &str) -> Sim {
    Sim::builder()
        .soc(Soc::Ascend950DT)
        .devices(2)
        .namespace(ns)
        .open()
        .expect("open the simulator")
}

fn child(dir: &Path, ns: &str) {
    let sim = open(ns);
    put(dir, "seen", sim.cnt_notifies_free(1).unwrap());
    let _held: Vec<_> = (0..2).map(|_| sim.cnt_create(1).unwrap()).collect();
    put(dir, "created", 2);
    // Until the parent kills it (bounded).
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
fn budget_is_machine_wide_and_dead_owners_are_reclaimed() {
    if std::env::var(ROLE).is_ok() {
        let dir = PathBuf::from(std::env::var_os(DIR).unwrap());
        child(&dir, &std::env::var(NS).unwrap());
        return;
    }
    let ns = format!("it-cnt-budget-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    // Removes the namespace also when the test fails.
    let _guard = NamespaceGuard(ns.clone());
    let dir = std::env::temp_dir().join(&ns);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    let sim = open(&ns);
    let mine: Vec<_> = (0..3).map(|_| sim.cnt_create(1).unwrap()).collect();
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 3);

    let mut kid = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "budget_is_machine_wide_and_dead_owners_are_reclaimed",
            "--nocapture",
        ])
        .env(ROLE, "child")
        .env(DIR, &dir)
        .env(NS, &ns)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let seen: u32 = take(&dir, "seen").parse().unwrap();
    take(&dir, "created");
    // The child saw this process's three; this process sees the child's two.
    assert_eq!(seen, MAX_CNT_NOTIFIES - 3);
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 5);
    assert_eq!(sim.cnt_notifies_free(0).unwrap(), MAX_CNT_NOTIFIES);

    kid.kill().unwrap();
    kid.wait().unwrap();
    assert_eq!(sim.cnt_gc(), 2, "the killed child's count notifies");
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 3);
    for c in mine {
        sim.cnt_destroy(c).unwrap();
    }
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES);
    drop(sim);
    let _ = Sim::remove_namespace(&ns);
    let _ = std::fs::remove_dir_all(&dir);
}

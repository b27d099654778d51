//! The fresh-process check at the end of a stress run must tell an id orphaned by a kill
//! between two steps of a create (allocated, its slot never claimed: the simulator frees it
//! once the repair grace period has passed) from an id that stays taken (a leak). Both cases
//! are staged here directly in the shared file, then `acl-notify-stress check` is run on it.

use std::process::Command;

use acl_notify_core::{CreateFlags, HostOps, NotifyResources, Soc};
use acl_notify_sim::shm::{OpenMode, open_shared};
use acl_notify_sim::{NamespaceGuard, Sim};

const SOC: Soc = Soc::Ascend910B;

fn check(namespace: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_acl-notify-stress"))
        .args([
            "check",
            "--soc=Ascend910B",
            "--devices=1",
            &format!("--namespace={namespace}"),
        ])
        .output()
        .expect("the stress binary runs");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn sim(namespace: &str) -> Sim {
    Sim::builder()
        .soc(SOC)
        .devices(1)
        .namespace(namespace)
        .open()
        .expect("open the simulator")
}

#[test]
fn an_id_allocated_but_never_claimed_is_freed_after_the_grace_period() {
    // Every file of the namespace (notify file, wait-for graph) goes when the test ends,
    // also when it fails.
    let guard = NamespaceGuard(format!("orphan-check-{}", std::process::id()));
    let ns = &guard.0;
    let sim = sim(ns);
    let file = open_shared(ns, 0, SOC, 1, OpenMode::OpenExisting)
        .expect("open the file")
        .expect("the file exists");
    // What a process killed right after the alloc leaves: an id taken in the pool, no slot.
    let id = file.pool(0).expect("device 0").alloc().expect("an id");
    file.note_allocated(0, id);
    assert_eq!(sim.notifies_free(0).unwrap(), SOC.max_notifies() - 1);

    let (ok, text) = check(ns);
    drop((file, sim));
    assert!(ok, "the orphaned id was not repaired:\n{text}");
    assert!(
        text.contains("repaired after the grace period: 1"),
        "the late repair is not reported:\n{text}"
    );
}

#[test]
fn an_id_that_stays_taken_is_reported_leaked() {
    // As above: the namespace goes with the guard.
    let guard = NamespaceGuard(format!("leak-check-{}", std::process::id()));
    let ns = &guard.0;
    let sim = sim(ns);
    // A live notify: its id is held all along, so no grace period frees it.
    let n = sim
        .create_notify(0, CreateFlags::default())
        .expect("create a notify");

    let (ok, text) = check(ns);
    let _ = sim.destroy_notify(n);
    drop(sim);
    assert!(!ok, "a held id passed the check:\n{text}");
    assert!(
        text.contains("leaked: 1"),
        "the leak is not counted:\n{text}"
    );
}

//! Tests of the inspector: snapshots of live machines, text and JSON, and bad files.

use super::*;
use acl_notify_core::table::SlotState;

use super::read::open_notify_file;
use crate::mapfile::PAGE;
use crate::{Sim, sys};
use acl_notify_core::{CntNotifyOps, CntRecord, ExportFlags, NotifyResources, StreamOps, Timeout};

use crate::NamespaceGuard as Ns;

/// A file truncated by another process while the inspector has it mapped: the pages cut
/// off read as zero instead of killing the inspector with SIGBUS, and the mapping says it
/// lost them (so a snapshot is refused).
#[test]
fn a_file_truncated_under_the_inspector_reads_zero_and_is_reported() {
    let ns = format!("unit-inspect-trunc-{}", sys::getpid());
    let _ = Sim::remove_namespace(&ns);
    let _g = Ns(ns.clone());
    let sim = Sim::builder().devices(1).namespace(&ns).open().unwrap();
    let n = sim
        .create_notify(0, acl_notify_core::CreateFlags::empty())
        .unwrap();
    let id = sim.notify_info(n).unwrap().id;
    let path = notify_file_path(&ns, 0);
    let (m, l) = open_notify_file(&path, 0).unwrap();
    let slot = l.slot(&m, 0, id).unwrap();
    assert_eq!(slot.state(), Some(SlotState::Live));
    assert!(m.intact(&path).is_ok());
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(PAGE as u64).unwrap();
    assert_eq!(
        slot.state(),
        Some(SlotState::Free),
        "a lost page reads as zero"
    );
    let e = m.intact(&path).unwrap_err();
    assert!(e.to_string().contains("507899"), "{e}");
    drop(m);
    drop(sim);
}

#[test]
fn json_strings_are_escaped() {
    assert_eq!(json_str("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

#[test]
fn missing_namespace_is_a_clear_error() {
    let e = snapshot("unit-inspect-none-xyz", 0).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}

/// The inspector reads exactly what the simulator wrote: budgets, notifies, owner,
/// whitelist (with a dead PID), last recorder, count notifies, and a waiting stream thread
/// named by its futex address.
#[test]
fn snapshot_agrees_with_a_live_machine() {
    let (sim, ns) = Ns::open_sim(
        format!("unit-inspect-{}", std::process::id()),
        Soc::Ascend950PR,
        2,
    )
    .expect("opening a test Sim");
    let me = std::process::id() as i32;
    let n = sim.create_notify(1, CreateFlags::empty()).unwrap();
    let _other = sim.create_notify(1, CreateFlags::empty()).unwrap();
    sim.export_key(n, ExportFlags::empty()).unwrap();
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id() as i32;
    child.wait().unwrap();
    sim.set_import_pids(n, &[dead, me]).unwrap();
    let s = sim.create_stream(1).unwrap();
    sim.record(n, s).unwrap();
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    // This one stays stuck until the end of the test.
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    let c = sim.cnt_create(0).unwrap();
    let s0 = sim.create_stream(0).unwrap();
    sim.cnt_record(c, s0, CntRecord::add(5)).unwrap();
    sim.synchronize(s0, acl_notify_core::SyncWait::Forever)
        .unwrap();

    let snap = snapshot(&ns.0, 0).unwrap();
    assert_eq!(snap.soc, Soc::Ascend950PR);
    assert_eq!(snap.devices, 2);
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);
    assert!(
        snap.processes
            .iter()
            .any(|p| p.pid == me && p.alive == Liveness::Alive)
    );
    assert_eq!(snap.device_budgets[1].notifies_in_use, 2);
    assert_eq!(snap.device_budgets[0].cnt_in_use, Some(1));
    assert_eq!(snap.notifies.len(), 2);
    let id = sim.notify_info(n).unwrap().id;
    let ns_ = snap.notifies.iter().find(|x| x.id == id).unwrap();
    assert_eq!(ns_.device, 1);
    assert_eq!(ns_.export, ExportSnap::Whitelist);
    assert_eq!(ns_.owner.pid, me);
    assert_eq!(ns_.owner.alive, Liveness::Alive);
    assert_eq!(
        ns_.holders,
        vec![PidRef {
            pid: me,
            alive: Liveness::Alive
        }]
    );
    assert!(
        ns_.whitelist
            .iter()
            .any(|w| w.pid == dead && w.alive == Liveness::Dead)
    );
    assert!(
        ns_.whitelist
            .iter()
            .any(|w| w.pid == me && w.alive == Liveness::Alive)
    );
    assert_eq!(ns_.last_record.unwrap().by.pid, me);
    // The second wait holds a ticket, and its stream thread is found asleep on the flag
    // (looked for until then; 60 s is a hang guard, 5 s until 2026-12-07).
    let end = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let snap = snapshot(&ns.0, 0).unwrap();
        let x = snap.notifies.iter().find(|x| x.id == id).unwrap();
        if x.waiters == 1 && !x.flag_set && !x.waiting_threads.is_empty() {
            let t = &x.waiting_threads[0];
            assert_eq!(t.pid, me);
            assert!(t.name.starts_with("acl-sim-d1-s"), "{t:?}");
            assert!(
                snap.to_text()
                    .contains("waiting: stream thread \"acl-sim-d1-s")
            );
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "hang guard: the wait was never seen: {x:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(snap.cnt_notifies.len(), 1);
    let cs = &snap.cnt_notifies[0];
    assert_eq!((cs.device, cs.count, cs.owner.pid), (0, 5, me));
    assert_eq!(
        cs.last_record.unwrap().1,
        "ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE"
    );
    let text = snap.to_text();
    for want in [
        format!("pid {dead} (dead)"),
        format!("pid {me} (alive)"),
        "exported (whitelist)".to_owned(),
        "count notifies: 1 live".to_owned(),
    ] {
        assert!(text.contains(&want), "{want:?} missing from\n{text}");
    }
    let json = snap.to_json();
    assert!(json.starts_with('{') && json.ends_with('}'));
    assert!(
        json.contains(&format!(
            "{{\"sdid\":{},\"server\":0,\"pid\":{dead},\"alive\":\"dead\"}}",
            acl_notify_core::sdid::server_wide(0)
        )),
        "{json}"
    );
    // Release the stuck wait (from another stream: `s` is stalled) so the Sim drops
    // cleanly.
    let r = sim.create_stream(1).unwrap();
    sim.record(n, r).unwrap();
    sim.synchronize(s, acl_notify_core::SyncWait::Forever)
        .unwrap();
}

/// An allocation shows in the snapshot's device memory with its size and live owner.
#[test]
fn snapshot_shows_device_memory() {
    let (sim, ns) = Ns::open_sim(
        format!("unit-inspect-mem-{}", sys::getpid()),
        Soc::Ascend910B,
        1,
    )
    .expect("opening a test Sim");
    let _p = sim.malloc(0, 3 << 20, 0).unwrap();
    let snap = snapshot(&ns.0, 0).unwrap();
    let dev = snap
        .memory
        .iter()
        .find(|d| d.device == 0)
        .unwrap_or_else(|| panic!("no device memory in {:?}", snap.memory));
    assert!(dev.problems.is_empty(), "{:?}", dev.problems);
    let a = dev.allocations.first().expect("the allocation");
    assert_eq!(
        (a.size, a.owner_pid, a.owner, a.orphaned),
        (3 << 20, sys::getpid(), Liveness::Alive, false)
    );
    assert!(a.export.is_none());
}

/// `rm`: refused while a process of the namespace is alive (the files stay), done once its
/// last `Sim` is dropped (every file of the namespace goes, and `list` no longer names it).
#[test]
fn a_namespace_is_removed_only_once_no_process_of_it_is_alive() {
    let ns = Ns(format!("unit-inspect-rm-{}", std::process::id()));
    let sim = Sim::builder().devices(1).namespace(&ns.0).open().unwrap();
    let e = remove_unused(&ns.0).unwrap_err();
    assert!(e.contains(&format!("{} (server 0)", sys::getpid())), "{e}");
    assert!(
        notify_file_path(&ns.0, 0).exists(),
        "files kept while in use"
    );
    drop(sim);
    let n = remove_unused(&ns.0).unwrap();
    assert!(n >= 1, "removed {n} files");
    assert!(!notify_file_path(&ns.0, 0).exists());
    assert!(namespaces().iter().all(|(x, _)| *x != ns.0));
    assert_eq!(remove_unused(&ns.0), Ok(0), "nothing left to remove");
}

/// `rm` of a namespace whose file this build cannot read (another layout version, left by an
/// older build): removed once no process maps it, refused while one does (an upgrade's
/// leftovers were refused for good, "nothing removed", and only Rust code could delete them).
#[test]
fn a_namespace_of_another_layout_version_is_removed_once_nobody_maps_it() {
    let ns = Ns(format!("unit-inspect-rm-old-{}", std::process::id()));
    drop(Sim::builder().devices(1).namespace(&ns.0).open().unwrap());
    let path = notify_file_path(&ns.0, 0);
    // A live process of the previous build maps it (here: this one, by hand): refused.
    let held = crate::mapfile::held_at_version(&path, crate::shm::LAYOUT_VERSION - 1);
    let e = remove_unused(&ns.0).unwrap_err();
    assert!(
        e.contains("layout version") && e.contains("nothing removed"),
        "{e}"
    );
    assert!(path.exists(), "a mapped file was removed");
    drop(held);
    let n = remove_unused(&ns.0).unwrap();
    assert!(n >= 1, "removed {n} files");
    assert!(!path.exists());
}

/// A notify its owner destroyed while a wait of its stream was still queued: the inspector
/// says it was destroyed and by whom (its text and its diagnosis), where it listed the owner as
/// a live holder of a notify merely never recorded.
#[test]
fn a_destroyed_notify_kept_by_a_queued_wait_is_shown_destroyed() {
    let (sim, ns) = Ns::open_sim(
        format!("unit-inspect-destroyed-{}", std::process::id()),
        Soc::Ascend910B,
        1,
    )
    .expect("opening a test Sim");
    let me = std::process::id() as i32;
    let s = sim.create_stream(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let id = sim.notify_info(n).unwrap().id;
    sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
    sim.destroy_notify(n).unwrap();
    let snap = snapshot(&ns.0, 0).unwrap();
    let found = snap.notifies.iter().find(|x| x.id == id).cloned();
    let text = snap.to_text();
    sim.destroy_stream(s, acl_notify_core::StreamDestroy::Discard)
        .unwrap();
    let n = found.expect("the notify kept by the queued wait is not listed");
    assert_eq!(n.destroyed_by, Some(me));
    let said = format!("destroyed by its owner pid {me}");
    assert!(text.contains(&said), "{text}");
    let d = n.diagnosis().unwrap_or_default();
    assert!(d.contains(&said), "diagnosis: {d}");
}

//! Unit tests of count notifies: the shared file, its slots and ids, and the `Sim` calls.

use super::*;
use acl_notify_core::cnt::CntWaitMode;
use acl_notify_core::{BackendError, StreamOps, SyncWait, Timeout};

use crate::NamespaceGuard as Ns;
use crate::Sim;
use acl_notify_core::CntNotifyOps;

fn open(tag: &str, soc: Soc) -> (Sim, Ns) {
    Ns::open_sim(format!("unit-cnt-{tag}-{}", std::process::id()), soc, 2)
        .expect("opening a test Sim")
}

#[test]
fn layout_fits() {
    let l = Layout::new(Soc::Ascend950PR, 64);
    assert!(l.pools_off >= l.hw_off + 64 * 4);
    assert!(l.total >= l.slots_off + 64 * 8192 * 128);
    assert_eq!(CNT_SLOT_BYTES, 128);
}

/// Ids leaked by a process that died half-way through a create or destroy are freed by a
/// later collection once they stayed orphaned for the grace period; live ones are kept.
/// Another process took this one's count notify from it (as its gc does for an owner it
/// finds dead) and the id went back to the pool: a record on the old handle fails with
/// 507899 instead of counting on whatever count notify has the id now.
#[test]
fn a_record_on_a_count_notify_taken_from_this_process_fails() {
    let (sim, _ns) = open("taken", Soc::Ascend950PR);
    let c = sim.cnt_create(1).unwrap();
    let s = sim.create_stream(1).unwrap();
    let f = sim.inner.cnt.opened().unwrap();
    let r = sim.cnt(c).unwrap();
    assert!(r.slot().release(&f.waiter(), r.generation));
    f.pool(1).unwrap().free(r.id).unwrap();
    let other = CntRef::create(&f, 1).map_err(|_| "create").unwrap();
    assert_eq!(other.id, r.id, "the id is reused");
    sim.cnt_record(c, s, CntRecord::add(5)).unwrap();
    let e = sim
        .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError, "{e}");
    assert!(e.to_string().contains("no longer holds it"), "{e}");
    assert_eq!(other.slot().count(), 0, "the new count notify is untouched");
}

#[test]
fn leaked_count_ids_are_repaired_after_the_grace_period() {
    let (sim, _ns) = open("leak", Soc::Ascend950PR);
    let live = sim.cnt_create(1).unwrap();
    let f = sim.inner.cnt.opened().unwrap();
    let pool = f.pool(1).unwrap();
    // Died between allocating and claiming.
    let leaked = pool.alloc().unwrap();
    f.hw(1).unwrap().fetch_max(leaked + 1, SeqCst);
    // Died between releasing the slot and freeing the id.
    let r = CntRef::create(&f, 1).map_err(|_| "create").unwrap();
    let id = r.id;
    assert!(r.slot().release(&f.waiter(), r.generation));
    std::mem::forget(r);
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 3);
    // Within the grace period nothing is touched.
    assert_eq!(sim.gc().unwrap().cnt_freed, 0);
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 3);
    // Past it, both leaks are freed and the live one is kept.
    f.repair.set_grace(Duration::ZERO);
    assert_eq!(sim.gc().unwrap().cnt_freed, 2);
    assert!(!pool.is_allocated(leaked) && !pool.is_allocated(id));
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 1);
    sim.cnt_destroy(live).unwrap();
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES);
}

/// The free count does not count a count notify whose owner died: it reclaims such ids
/// first, as a create that ran out would. Another device's are left to their own count.
#[test]
fn the_free_count_reclaims_dead_owners_first() {
    let (sim, _ns) = open("cntfreedead", Soc::Ascend950PR);
    let mine = sim.cnt_create(0).unwrap();
    let f = sim.inner.cnt.opened().unwrap();
    // Count notifies created on both devices by a process that has since exited and been
    // reaped (its create, done by hand: allocate, note, claim).
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let dead = c.id() as i32;
    c.wait().unwrap();
    let mut theirs = Vec::new();
    for dev in [0, 1] {
        let id = f.pool(dev).unwrap().alloc().unwrap();
        f.hw(dev).unwrap().fetch_max(id + 1, SeqCst);
        let owner = Owner {
            pid: dead,
            start_time: 1,
            server: 0,
            device: dev,
            proc: 0,
        };
        f.slot(dev, id).unwrap().claim(owner).unwrap();
        theirs.push((dev, id));
    }
    assert_eq!(
        sim.cnt_notifies_free(0).unwrap(),
        MAX_CNT_NOTIFIES - 1,
        "only ours"
    );
    assert!(
        !f.pool(0).unwrap().is_allocated(theirs[0].1),
        "the dead owner's id was freed"
    );
    assert!(
        f.pool(1).unwrap().is_allocated(theirs[1].1),
        "device 1 was not asked about"
    );
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES);
    sim.cnt_destroy(mine).unwrap();
    assert_eq!(sim.cnt_notifies_free(0).unwrap(), MAX_CNT_NOTIFIES);
}

/// `Sim::gc` reaches the count-notify file even when this process never used it.
#[test]
fn gc_opens_an_existing_count_file_without_creating_one() {
    let (sim, ns) = open("gcopen", Soc::Ascend950PR);
    assert_eq!(sim.gc().unwrap().cnt_freed, 0);
    assert!(!cnt_file_path(&ns.0, 0).exists(), "gc created the file");
    let other = Sim::builder()
        .soc(Soc::Ascend950PR)
        .devices(2)
        .namespace(&ns.0)
        .open()
        .unwrap();
    other.cnt_create(0).unwrap();
    assert!(sim.inner.cnt.opened().is_none());
    assert_eq!(sim.gc().unwrap().cnt_freed, 0, "the owner is alive");
    assert!(sim.inner.cnt.opened().is_some());
    drop(other);
}

#[test]
fn only_on_950() {
    let (sim, _ns) = open("soc", Soc::Ascend910B);
    assert_eq!(
        sim.cnt_create(0).unwrap_err().kind(),
        Error::FeatureNotSupport
    );
    assert_eq!(
        sim.cnt_notifies_free(0).unwrap_err().kind(),
        Error::FeatureNotSupport
    );
    assert!(!cnt_file_path(sim.namespace(), 0).exists());
}

#[test]
fn wrap_clear_budget_and_timeout_message() {
    let (sim, ns) = open("flow", Soc::Ascend950PR);
    let free = sim.cnt_notifies_free(1).unwrap();
    assert_eq!(free, MAX_CNT_NOTIFIES);
    let c = sim.cnt_create(1).unwrap();
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), free - 1);
    assert_eq!(sim.cnt_notifies_free(0).unwrap(), MAX_CNT_NOTIFIES);
    let s = sim.create_stream(1).unwrap();
    sim.cnt_record(c, s, CntRecord::set(u32::MAX)).unwrap();
    sim.cnt_record(c, s, CntRecord::add(3)).unwrap();
    sim.cnt_wait(c, s, CntWait::new(CntWaitMode::Equal, 2).clearing())
        .unwrap();
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    let one = Timeout::from_c(1);
    sim.cnt_wait(c, s, CntWait::new(CntWaitMode::Bigger, 0).with_timeout(one))
        .unwrap();
    let e = sim
        .synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap_err();
    assert_eq!(e.kind(), Error::TaskTimeout);
    let m = e.to_string();
    for want in [
        "count notify 0 (device 1)",
        "count > value",
        "count is 0x0",
        &format!("owner pid {} (alive)", std::process::id()),
        "last record ACL_RT_CNT_NOTIFY_RECORD_ADD_MODE 0x3",
    ] {
        assert!(m.contains(want), "{want:?} missing from {m}");
    }
    // Another device's stream may not wait.
    let s0 = sim.create_stream(0).unwrap();
    assert_eq!(
        sim.cnt_wait(c, s0, CntWait::new(CntWaitMode::Less, 1))
            .unwrap_err()
            .kind(),
        Error::ParamInvalid
    );
    sim.cnt_destroy(c).unwrap();
    assert_eq!(sim.cnt_destroy(c).unwrap_err().kind(), Error::InvalidHandle);
    assert_eq!(sim.cnt_id(c).unwrap_err().kind(), Error::InvalidHandle);
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), free);
    // The budget is machine-wide: a second Sim of another process would see it; here a
    // read-only view of the same file agrees.
    let ro = CntFile::open(&ns.0, 0, Soc::Ascend950PR, 2, CntOpen::ReadOnly)
        .unwrap()
        .unwrap();
    assert_eq!(ro.pool(1).unwrap().in_use(), 0);
}

#[test]
fn destroy_with_a_queued_wait_keeps_the_slot_until_it_ran() {
    let (sim, _ns) = open("queued", Soc::Ascend950DT);
    let c = sim.cnt_create(0).unwrap();
    let id = sim.cnt_id(c).unwrap();
    let s = sim.create_stream(0).unwrap();
    sim.cnt_wait(c, s, CntWait::new(CntWaitMode::BiggerOrEqual, 2))
        .unwrap();
    sim.cnt_destroy(c).unwrap();
    // The queued wait still uses the slot: the id stays taken.
    assert_eq!(sim.cnt_notifies_free(0).unwrap(), MAX_CNT_NOTIFIES - 1);
    // No handle is left to record with, so record on the shared slot directly (as the
    // device would).
    let f = sim.inner.cnt.opened().unwrap();
    let slot = f.slot(0, id).unwrap();
    assert_eq!(slot.state(), Some(SlotState::Live));
    slot.record(&f.waiter(), CntRecord::add(2), 1);
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    // The queued task was the last user: the id is free again (looked for until then; 60 s
    // is a hang guard, 5 s until 2026-12-07).
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while sim.cnt_notifies_free(0).unwrap() != MAX_CNT_NOTIFIES {
        assert!(
            std::time::Instant::now() < end,
            "hang guard: id not freed after the wait ran"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

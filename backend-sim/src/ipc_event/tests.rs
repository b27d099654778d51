//! Tests of IPC events: handles round-tripped and refused, record numbers across the wrap,
//! discarded records, the holders' bits with their reclaim and repair, and files of other
//! layout versions.

use super::*;
use crate::mapfile::PAGE;
use crate::shm::{OpenMode, open_shared};
use acl_notify_core::slot::SlotState;
use acl_notify_core::{BackendError, Soc};
use file::EVT_LAYOUT_VERSION;

/// This process's IPC event files of a throwaway namespace (removed on drop).
struct Machine {
    ns: String,
    files: EvtFiles,
}

impl Machine {
    fn new(tag: &str, devices: u32) -> Machine {
        let ns = format!("evt-unit-{tag}-{}", std::process::id());
        let reg = open_shared(&ns, 0, Soc::Ascend910B, devices, OpenMode::CreateOrOpen)
            .unwrap()
            .unwrap();
        let files = EvtState::new().files(&ns, &reg).unwrap();
        Machine { ns, files }
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        let _ = crate::mapfile::remove_files(&self.ns, None);
    }
}

#[test]
fn handles_round_trip_and_garbage_is_refused() {
    let m = Machine::new("rt", 2);
    let f = &m.files;
    let a = f.claim(1).unwrap();
    let h = a.handle().unwrap();
    let b = f.open_handle(&h).unwrap();
    assert_eq!(a.latest().unwrap(), LatestRecord::None);
    let n = b.issue().unwrap();
    assert_eq!(a.latest().unwrap(), LatestRecord::Pending);
    assert!(
        !a.wait_done(n, Some(Duration::from_millis(30)), &|| false)
            .unwrap()
    );
    a.complete(n).unwrap();
    assert_eq!(b.latest().unwrap(), LatestRecord::Done);
    let mut bad = h;
    bad.0[0] ^= 1;
    assert_eq!(f.open_handle(&bad).unwrap_err().kind(), Error::ParamInvalid);
    drop(a);
    drop(b);
    // Every holder gone: the handle names nothing.
    assert_eq!(f.open_handle(&h).unwrap_err().kind(), Error::InvalidHandle);
    // The slot is reused under a new generation; the old handle stays dead.
    let c = f.claim(1).unwrap();
    assert_eq!(f.open_handle(&h).unwrap_err().kind(), Error::InvalidHandle);
    drop(c);
}

/// Record numbers wrap at 2^32: a record issued after the wrap is pending until it runs,
/// although `done` holds the number of one from before it, and an issuer that died with
/// a record from before the wrap latest does not release the waits for later ones.
#[test]
fn record_numbers_that_wrap_still_order_the_records() {
    let m = Machine::new("wrap", 1);
    let f = &m.files;
    let a = f.claim(0).unwrap();
    let b = f.open_handle(&a.handle().unwrap()).unwrap();
    let s = a.slot().unwrap();
    s.sync.issued.store(u32::MAX - 1, SeqCst);
    s.sync.done.store(u32::MAX - 1, SeqCst);
    let last = b.issue().unwrap();
    assert_eq!(last, u32::MAX);
    a.complete(last).unwrap();
    let n = b.issue().unwrap();
    assert_eq!(n, 1, "0 (never recorded) is skipped");
    assert_eq!(a.latest().unwrap(), LatestRecord::Pending);
    let short = Some(Duration::from_millis(30));
    assert!(!a.wait_done(n, short, &|| false).unwrap());
    a.complete(n).unwrap();
    assert_eq!(a.latest().unwrap(), LatestRecord::Done);
    assert!(a.wait_done(n, short, &|| false).unwrap());
    assert!(
        a.wait_done(last, short, &|| false).unwrap(),
        "an earlier one"
    );

    // The latest record before the wrap was issued by a process that is gone (table
    // entry 63, which nobody holds, and no such pid); a record issued after the wrap by a
    // live one is the latest: its issuer is the one watched, and the dead issuer's record
    // must not count it as done.
    let dead = (u64::from(u32::MAX) << 32) | (63 << PROC_SHIFT) | (PID_MASK - 1);
    s.sync.issued.store(u32::MAX, SeqCst);
    s.sync.done.store(u32::MAX - 1, SeqCst);
    s.sync.latest_by.store(dead, SeqCst);
    let n = b.issue().unwrap();
    assert_eq!(n, 1);
    // Its issuer is the latest one's (were it to die, the waits would be released).
    assert_eq!(s.sync.latest_by.load(SeqCst), b.issued_by(n));
    assert_eq!(a.latest().unwrap(), LatestRecord::Pending);
    assert!(!a.wait_done(n, short, &|| false).unwrap());
    assert_eq!(a.never_ran(n), None);
    a.complete(n).unwrap();
    assert_eq!(a.latest().unwrap(), LatestRecord::Done);
}

/// A process none of whose streams discarded an IPC record asks whether one was discarded
/// with one load: not under the process-wide lock of the discarded records (held here by
/// another thread, a lookup that took it would not return until that thread let it go).
/// Once a record was discarded, the lookup finds it through any reference.
#[test]
fn asking_for_a_discarded_record_takes_no_lock_until_one_was_discarded() {
    let m = Machine::new("unrun-fast", 1);
    let f = &m.files;
    let a = f.claim(0).unwrap();
    let b = f.open_handle(&a.handle().unwrap()).unwrap();
    let n = a.issue().unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let unrun = Arc::clone(&f.unrun);
    let holder = std::thread::spawn(move || {
        let _kept = unrun.kept.lock().unwrap();
        held_tx.send(()).unwrap();
        // Held until the answer came, or past the asker's hang guard below.
        let _ = go_rx.recv_timeout(Duration::from_secs(120));
    });
    held_rx.recv().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let asker = std::thread::spawn(move || {
        let _ = tx.send(b.was_unrun(n));
        b
    });
    // The lock stays held until the answer comes: a lookup that took it could answer only once
    // this hang guard let the holder go (2 s until 2026-12-07, which a starved asker could
    // outlast without taking any lock).
    let answer = rx.recv_timeout(Duration::from_secs(60));
    go_tx.send(()).unwrap();
    holder.join().unwrap();
    let b = asker.join().unwrap();
    assert_eq!(
        answer,
        Ok(false),
        "was_unrun waited for the lock of the discarded records though none was discarded"
    );
    a.complete_unrun(n);
    assert!(b.was_unrun(n) && a.was_unrun(n));
    assert!(!b.was_unrun(n.wrapping_add(1)));
}

/// The records a process discarded are remembered while the event's incarnation is alive
/// anywhere, not only while the process holds a reference: a process that let its last
/// reference go and opens the handle again (another process kept the event) still finds
/// its discarded record; once the incarnation is freed, it is forgotten.
#[test]
fn discarded_records_are_kept_while_the_event_lives_anywhere() {
    let m = Machine::new("unrun-kept", 1);
    let f = &m.files;
    let a = f.claim(0).unwrap();
    let key = a.key;
    // Entry 60 stands for another process holding the event.
    f.file.slot(key.0, key.1).unwrap().join(60, key.2).unwrap();
    let n = a.issue().unwrap();
    a.complete_unrun(n);
    drop(a);
    // Another event's discard makes the process look over what it keeps.
    let c = f.claim(0).unwrap();
    let cn = c.issue().unwrap();
    c.complete_unrun(cn);
    // Held again, as a process that is not the event's creator reopens it (a creator
    // that let go opens it no more: `open_handle`'s `creator_holds`).
    f.file.hold(f.reg.me(), key).unwrap();
    let b = IpcRef {
        files: f.clone(),
        key,
    };
    assert!(b.was_unrun(n), "the discarded record was forgotten");
    drop(b);
    // Freed (the other holder gone): forgotten at the next look.
    assert_eq!(file::reclaim_proc(&m.ns, 0, 1, 60), 1);
    let d = f.claim(0).unwrap();
    let dn = d.issue().unwrap();
    d.complete_unrun(dn);
    let kept = f.unrun.kept.lock().unwrap();
    assert!(!kept.contains_key(&key), "a freed incarnation is kept");
    assert!(kept.contains_key(&c.key) && kept.contains_key(&d.key));
}

/// A record its issuer's stream discarded stays "discarded" for the other holders when
/// that process dies afterwards (its table entry freed, here entry 63's, which nobody
/// holds): the waits that fail for it name the discard, not a recorder that "died first"
/// (which the mark was read as once the issuer was gone).
#[test]
fn a_discarded_record_stays_discarded_once_its_issuer_dies() {
    let m = Machine::new("unrun-then-dead", 1);
    let f = &m.files;
    let a = f.claim(0).unwrap();
    let b = f.open_handle(&a.handle().unwrap()).unwrap();
    let n = a.issue().unwrap();
    a.complete_unrun(n);
    let s = a.slot().unwrap();
    let by = s.sync.latest_by.load(SeqCst);
    let pid = (by & PID_MASK) as i32;
    assert_eq!(b.never_ran(n), Some(NeverRan::Dropped(pid)));
    // The issuer's entry is freed, as when it dies.
    let gone = (by & !(PROC_MASK << PROC_SHIFT)) | (63 << PROC_SHIFT);
    s.sync.latest_by.store(gone, SeqCst);
    assert_eq!(b.never_ran(n), Some(NeverRan::Dropped(pid)));
}

/// The references of one process share its holder bit: the slot lives until the last of
/// them goes, whichever it is, and is then free under the next generation.
#[test]
fn a_process_holds_by_one_bit_until_its_last_reference_goes() {
    let m = Machine::new("bit", 1);
    let f = &m.files;
    let a = f.claim(0).unwrap();
    let (dev, idx, generation) = a.key;
    let h = a.handle().unwrap();
    let b = f.open_handle(&h).unwrap();
    let c = f.open_handle(&h).unwrap();
    let s = f.file.slot(dev, idx).unwrap();
    assert_eq!(s.holders(), 1u64 << f.reg.me());
    drop(a);
    drop(b);
    assert!(s.is_live(generation), "a reference is left");
    assert_eq!(c.latest().unwrap(), LatestRecord::None);
    drop(c);
    assert_eq!(s.state(), Some(SlotState::Free));
    assert_eq!(s.generation(), generation.wrapping_add(1));
    assert_eq!(s.holders(), 0);
}

/// The process table's reclaim of an entry drops that entry's bits in the IPC event file:
/// an event it held alone is freed, one held with a live process stays.
#[test]
fn reclaiming_a_process_entry_drops_its_bits() {
    let m = Machine::new("reclaim", 1);
    let f = &m.files;
    let mine = f.claim(0).unwrap();
    // Entry 60 stands for another process: one event its own, one shared with us.
    let (dev, idx, g) = f.file.claim(60, 0, 0).map_err(|_| ()).unwrap();
    let shared = mine.key;
    f.file
        .slot(shared.0, shared.1)
        .unwrap()
        .join(60, shared.2)
        .unwrap();
    assert_eq!(file::reclaim_proc(&m.ns, 0, 1, 60), 1);
    let s = f.file.slot(dev, idx).unwrap();
    assert!(!s.is_live(g), "its own event is freed");
    let t = f.file.slot(shared.0, shared.1).unwrap();
    assert!(t.is_live(shared.2), "the shared one is still ours");
    assert_eq!(t.holders(), 1u64 << f.reg.me());
    // Its count in this process's table (the claim above went through it) is ours to
    // drop: forget it, as a dead process's table goes with it.
    f.file.forget((dev, idx, g));
    drop(mine);
    assert_eq!(t.state(), Some(SlotState::Free));
}

/// A slot held only by the bit of a process-table entry that no process occupies (nobody
/// reclaims such a bit: only registered dead processes are reclaimed) is retired by the
/// leak repair of the process table's garbage collection, once the grace period is over;
/// a slot also held by a live process is not.
#[test]
fn a_slot_held_only_by_a_stray_bit_is_repaired() {
    let m = Machine::new("stray", 1);
    let f = &m.files;
    let stray = 50;
    assert_ne!(stray, f.reg.me());
    let (dev, idx, g) = f.file.claim(stray, 0, 0).map_err(|_| ()).unwrap();
    f.file.forget((dev, idx, g));
    let mine = f.claim(0).unwrap();
    let shared = mine.key;
    let t = f.file.slot(shared.0, shared.1).unwrap();
    assert_eq!(t.join(stray, shared.2), Ok(true));
    let s = f.file.slot(dev, idx).unwrap();
    // Within the grace period nothing is touched.
    assert_eq!(f.reg.gc().ipc_events_freed, 0);
    assert!(s.is_live(g));
    f.file.set_repair_grace(Duration::ZERO);
    assert_eq!(f.reg.gc().ipc_events_freed, 1);
    assert_eq!(s.state(), Some(SlotState::Free));
    assert_eq!(s.holders(), 0);
    assert_eq!(s.generation(), g.wrapping_add(1));
    // Ours stays (with the stray bit: not ours to clear while we hold it).
    assert!(t.is_live(shared.2));
    drop(mine);
    assert!(t.is_live(shared.2), "the stray bit still holds it");
    assert_eq!(f.reg.gc().ipc_events_freed, 1);
    assert_eq!(t.state(), Some(SlotState::Free));
}

/// Layout 4 marks a discarded record with a bit of its own (`DROPPED`, bit 24 of the
/// latest-record word), which a build of layout 3 would read as part of the issuer's pid
/// and never set: a file of layout 3 that such a build still maps is refused.
#[test]
fn a_file_of_layout_3_which_knows_no_dropped_bit_is_refused() {
    let ns = format!("evt-unit-v3-{}", std::process::id());
    let path = evt_file_path(&ns, 0);
    let f = EvtFile::open(&ns, 0, 1, EvtOpen::CreateOrOpen).unwrap();
    let held = crate::mapfile::held_at_version(&path, 3);
    drop(f);
    let e = EvtFile::open(&ns, 0, 1, EvtOpen::CreateOrOpen)
        .map(|_| ())
        .unwrap_err();
    let want = format!("layout version 3, this build reads version {EVT_LAYOUT_VERSION}");
    assert!(e.to_string().contains(&want), "{e}");
    drop(held);
    crate::mapfile::remove_files(&ns, Some("evt")).unwrap();
}

/// The event file of layout 1 (64-byte slots of its own) that an older build left, and
/// no process maps, is replaced by the next open rather than refused.
#[test]
fn a_layout_1_file_nobody_maps_is_replaced() {
    use std::os::unix::fs::FileExt as _;
    let ns = format!("evt-unit-v1-{}", std::process::id());
    let path = evt_file_path(&ns, 0);
    drop(EvtFile::open(&ns, 0, 1, EvtOpen::CreateOrOpen).unwrap());
    let old = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    old.write_all_at(&1u32.to_le_bytes(), 8).unwrap();
    old.set_len((PAGE + MAX_IPC_EVENTS as usize * 64) as u64)
        .unwrap();
    let f = EvtFile::open(&ns, 0, 1, EvtOpen::CreateOrOpen)
        .unwrap()
        .unwrap();
    let mut v = [0u8; 4];
    std::fs::File::open(&path)
        .unwrap()
        .read_exact_at(&mut v, 8)
        .unwrap();
    assert_eq!(u32::from_le_bytes(v), EVT_LAYOUT_VERSION);
    let key = f.claim(0, 0, 0).map_err(|_| ()).unwrap();
    f.release(Some(0), key);
    drop(f);
    crate::mapfile::remove_files(&ns, Some("evt")).unwrap();
}

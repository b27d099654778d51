//! Tests of the notify file: layout, processes, whitelists, references, GC and repair.

use super::slot_ref::BuildSlotHasher;
use super::*;
use acl_notify_core::table::{ExportState, Leave};

use acl_notify_core::{BackendError, CreateFlags};

fn ns(tag: &str) -> String {
    format!("unit-shm-{tag}-{}", sys::getpid())
}

/// A namespace of this test's own, emptied of what an earlier run left, and the guard that
/// removes its files when the test ends (also when it fails).
fn fresh(tag: &str) -> (String, crate::NamespaceGuard) {
    let n = ns(tag);
    let _ = crate::Sim::remove_namespace(&n);
    (n.clone(), crate::NamespaceGuard(n))
}

/// Creates this server's notify file of namespace `n`.
fn create(n: &str, soc: Soc, devices: u32) -> Arc<ShmFile> {
    open_shared(n, 0, soc, devices, OpenMode::CreateOrOpen)
        .unwrap()
        .unwrap()
}

/// This server's notify file in a fresh namespace of this test's own (see [`fresh`]).
fn fresh_file(tag: &str, soc: Soc, devices: u32) -> (Arc<ShmFile>, crate::NamespaceGuard) {
    let (n, guard) = fresh(tag);
    (create(&n, soc, devices), guard)
}

#[test]
fn the_reference_map_hash_spreads_slot_coordinates() {
    use std::hash::BuildHasher;
    let b = BuildSlotHasher::default();
    // Ids of one device and generation, then one id over many generations and devices:
    // the low 16 bits (what a map of this size indexes by) must look random. 65,536 random
    // draws from 65,536 values give about 41,400 distinct ones.
    let low = |keys: &mut dyn Iterator<Item = (u32, u32, u32)>| {
        keys.map(|k| b.hash_one(k) & 0xffff)
            .collect::<std::collections::HashSet<_>>()
            .len()
    };
    let ids = low(&mut (0..65536).map(|id| (0, id, 7)));
    let gens = low(&mut (0..65536).map(|g| (g % 8, 42, g / 8)));
    assert!(
        ids > 39_000 && gens > 39_000,
        "poor spread: {ids}, {gens} of 65536"
    );
    // Keyed: another key orders the same coordinates differently.
    let other = BuildSlotHasher(b.0 ^ 0x5555_0000_0000_0000);
    assert_ne!(b.hash_one((0, 1, 1)), other.hash_one((0, 1, 1)));
}
#[test]
fn layout_sizes() {
    assert_eq!(SLOT_BYTES, 192);
    assert_eq!(WHITELIST_BYTES, 1552);
    let l = Layout::new(Soc::Ascend950PR, 8).unwrap();
    assert!(l.total > 8 * 65535 * (SLOT_BYTES + WHITELIST_BYTES));
    let l = Layout::new(Soc::Ascend310B, 1).unwrap();
    assert_eq!(l.wl_size, 0);
    assert!(Layout::new(Soc::IPV350, 2).is_ok());
}

/// The pools are the core's, of the capacity the SoC table gives each SoC: the layout sizes
/// them as `SocType::AtomicNotifyPool` and a file's pool holds `max_notifies` ids.
#[test]
fn each_socs_pool_is_the_one_the_soc_table_gives() {
    use acl_notify_core::SocType;
    use acl_notify_core::soc::*;
    fn bytes<C: SocType>() -> (Soc, usize) {
        (C::SOC, std::mem::size_of::<C::AtomicNotifyPool>())
    }
    let typed = [
        bytes::<Ascend950PR>(),
        bytes::<Ascend950DT>(),
        bytes::<Ascend910_93>(),
        bytes::<Ascend910B>(),
        bytes::<Ascend310B>(),
        bytes::<Ascend310P>(),
        bytes::<Ascend910>(),
    ];
    assert_eq!(typed.len() + 1, Soc::ALL.len(), "a SoC missing here");
    for (soc, size) in typed {
        let l = Layout::new(soc, 1).unwrap();
        assert_eq!(l.pool_size, size, "{soc}");
        let (n, _ns) = fresh(&format!("pool{}", soc.name()));
        let f = create(&n, soc, 1);
        let pool = f.pool(0).unwrap();
        assert_eq!(pool.capacity(), soc.max_notifies(), "{soc}");
        let id = pool.alloc().unwrap();
        assert!(pool.is_allocated(id) && pool.in_use() == 1 && pool.end() == id + 1);
        pool.free(id).unwrap();
        drop(f);
        crate::Sim::remove_namespace(&n).unwrap();
    }
    let l = Layout::new(Soc::IPV350, 1).unwrap();
    assert_eq!((l.max, l.pool_size), (0, 0));
}

/// Layout 9 gave the notify slot's reserved word a meaning (the pid of the owner that
/// destroyed it, `Slot::destroyed_by`), which a build of layout 8 neither clears at a claim
/// nor sets: a file of layout 8 that such a build still maps is refused, not shared.
#[test]
fn a_file_of_layout_8_which_knows_no_destroyed_by_word_is_refused() {
    let (n, _ns) = fresh("layout8");
    let path = create(&n, Soc::Ascend910B, 1).path().to_path_buf();
    let held = crate::mapfile::held_at_version(&path, 8);
    let e = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen).unwrap_err();
    assert_eq!(e.kind(), acl_notify_core::Error::DrvInternalError, "{e}");
    let want = format!("layout version 8, this build reads version {LAYOUT_VERSION}");
    assert!(e.to_string().contains(&want), "{e}");
    drop(held);
}

/// Layout 10 made a whitelist entry 24 bytes (a start time beside the pidfs identity): a
/// build of layout 9 reads 16-byte entries, so a file of layout 9 that such a build still
/// maps is refused, not shared.
#[test]
fn a_file_of_layout_9_with_16_byte_whitelist_entries_is_refused() {
    let (n, _ns) = fresh("layout9");
    let path = create(&n, Soc::Ascend910B, 1).path().to_path_buf();
    let held = crate::mapfile::held_at_version(&path, 9);
    let e = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen).unwrap_err();
    assert_eq!(e.kind(), acl_notify_core::Error::DrvInternalError, "{e}");
    let want = format!("layout version 9, this build reads version {LAYOUT_VERSION}");
    assert!(e.to_string().contains(&want), "{e}");
    drop(held);
}

/// A notify file of another layout version (left by an older build) that no process maps
/// is removed and created afresh by the next read-write open, instead of 507899 asking the
/// user to remove it; while a process maps it, it is kept and refused as before.
#[test]
fn a_file_of_another_layout_version_is_replaced_once_nobody_maps_it() {
    use std::os::unix::fs::{FileExt as _, MetadataExt as _};
    let (n, _ns) = fresh("oldversion");
    let path = create(&n, Soc::Ascend910B, 1).path().to_path_buf();
    let version = |p: &Path| {
        let mut b = [0u8; 4];
        std::fs::File::open(p)
            .unwrap()
            .read_exact_at(&mut b, 8)
            .unwrap();
        u32::from_le_bytes(b)
    };
    assert_eq!(version(&path), LAYOUT_VERSION);
    let st = std::fs::metadata(&path).unwrap();
    assert_eq!(sys::file_mapped(st.dev(), st.ino()), Some(false));
    // What a live process of the previous layout's build leaves: its version in the header,
    // and a mapping of the file (here: this one, by hand): kept and refused.
    let held = crate::mapfile::held_at_version(&path, LAYOUT_VERSION - 1);
    assert_eq!(sys::file_mapped(st.dev(), st.ino()), Some(true));
    let e = open_shared(&n, 0, Soc::Ascend910B, 1, OpenMode::CreateOrOpen).unwrap_err();
    let want = format!("layout version {}, this build reads", LAYOUT_VERSION - 1);
    assert!(e.to_string().contains(&want), "{e}");
    assert_eq!(version(&path), LAYOUT_VERSION - 1, "kept");
    // Nobody maps it any more: replaced by a file of this build's layout.
    drop(held);
    assert_eq!(sys::file_mapped(st.dev(), st.ino()), Some(false));
    let f = create(&n, Soc::Ascend910B, 1);
    assert_eq!(version(&path), LAYOUT_VERSION);
    assert_ne!(
        std::fs::metadata(&path).unwrap().ino(),
        st.ino(),
        "a new file"
    );
    assert_eq!(f.pool(0).unwrap().in_use(), 0);
}

#[test]
fn create_join_release_frees_the_id() {
    let (n, _ns) = fresh("cjr");
    let f = create(&n, Soc::Ascend910B, 2);
    let st = std::fs::metadata(f.path()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(st.permissions().mode() & 0o777, 0o600);
    let pool = f.pool(1).unwrap();
    assert_eq!(pool.capacity(), 8192);
    let r = SlotRef::create(&f, 1, CreateFlags::empty()).unwrap();
    assert_eq!(pool.in_use(), 1);
    let again = SlotRef::join(&f, 1, r.id(), r.generation()).unwrap();
    assert!(Arc::ptr_eq(&r, &again));
    assert!(SlotRef::join(&f, 1, r.id(), r.generation() + 1).is_none());
    let (id, g) = (r.id(), r.generation());
    drop(r);
    assert_eq!(pool.in_use(), 1, "still referenced by `again`");
    drop(again);
    assert_eq!(pool.in_use(), 0);
    assert_eq!(f.slot(1, id).unwrap().generation(), g + 1);
    // Whitelists round-trip through the seqlock.
    let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    f.reset_whitelist(0, r.id()).unwrap();
    f.update_whitelist(0, r.id(), |wl| wl.add_pids(0, &[5, 6]))
        .unwrap()
        .unwrap();
    let wl = f.read_whitelist(0, r.id()).unwrap();
    assert_eq!(wl.len(), 2);
    assert!(wl.matches(0, 6, 0, 0));
    drop(r);
    drop(f);
    assert_eq!(crate::Sim::remove_namespace(&n).unwrap(), 1);
}

/// Only this process writes its whitelists, so a sequence word that is odd, or moves,
/// while its writer lock is held is a dead writer or another process scribbling: the update
/// fails with 507899 naming the notify and the file, and the stored list is kept (it used
/// to be rebuilt from empty, dropping every process already whitelisted).
#[test]
fn an_inconsistent_whitelist_is_reported_and_kept_not_rebuilt_from_empty() {
    let (f, _ns) = fresh_file("wlseq", Soc::Ascend910B, 2);
    let r = SlotRef::create(&f, 1, CreateFlags::empty()).unwrap();
    let id = r.id();
    f.reset_whitelist(1, id).unwrap();
    f.update_whitelist(1, id, |wl| wl.add_pids(0, &[5]))
        .unwrap()
        .unwrap();
    let seq = &f.shm_whitelist(1, id).unwrap().seq;
    let even = seq.load(SeqCst);
    assert_eq!(even % 2, 0);
    // A writer died mid-update (or someone wrote the word): odd under the lock.
    seq.store(even + 1, SeqCst);
    let e = f
        .update_whitelist(1, id, |wl| wl.add_pids(0, &[424242]))
        .unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError);
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("notify {id} on device 1"))
            && msg.contains("inconsistent")
            && msg.contains("a writer died mid-update or another process corrupted it")
            && msg.contains(f.path().to_str().unwrap()),
        "{msg}"
    );
    assert_eq!(seq.load(SeqCst), even + 1, "the word is left as found");
    // Nothing was lost or added: with the word even again, the list is the old one.
    seq.store(even, SeqCst);
    let wl = f.read_whitelist(1, id).unwrap();
    assert!(wl.matches(0, 5, 0, 0) && !wl.matches(0, 424242, 0, 0));
    // Another writer between our read and our write: refused too, list unchanged.
    let e = f
        .update_whitelist(1, id, |wl| {
            seq.fetch_add(2, SeqCst);
            wl.add_pids(0, &[424242])
        })
        .unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError);
    assert!(e.to_string().contains("under its only writer"), "{e}");
    assert_eq!(f.read_whitelist(1, id).unwrap().len(), 1);
    // A consistent word again: updates work and keep the old entry.
    f.update_whitelist(1, id, |wl| wl.add_pids(0, &[6]))
        .unwrap()
        .unwrap();
    let wl = f.read_whitelist(1, id).unwrap();
    assert!(wl.matches(0, 5, 0, 0) && wl.matches(0, 6, 0, 0));
    drop(r);
}

/// A notify starts its whitelist afresh when exported, whatever a previous use of its slot
/// left there (a half-written list with an odd sequence word, or stale entries); once
/// exported, a reset (a second, refused export) leaves the list alone.
#[test]
fn a_new_export_resets_a_whitelist_left_inconsistent_by_a_previous_use() {
    let (f, _ns) = fresh_file("wlreset", Soc::Ascend910B, 1);
    let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    let id = r.id();
    f.reset_whitelist(0, id).unwrap();
    f.update_whitelist(0, id, |wl| wl.add_pids(0, &[5]))
        .unwrap()
        .unwrap();
    let seq = &f.shm_whitelist(0, id).unwrap().seq;
    seq.fetch_add(1, SeqCst);
    drop(r);
    // The next use of the id inherits the odd word and the stale entry until its export.
    let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    assert_eq!(r.id(), id);
    assert!(f.update_whitelist(0, id, |_| ()).is_err());
    f.reset_whitelist(0, id).unwrap();
    assert_eq!(seq.load(SeqCst) % 2, 0);
    assert!(f.read_whitelist(0, id).unwrap().is_empty());
    assert!(r.slot().export([7; 16], ExportState::Enforced));
    f.update_whitelist(0, id, |wl| wl.add_pids(0, &[6]))
        .unwrap()
        .unwrap();
    f.reset_whitelist(0, id).unwrap();
    assert!(f.read_whitelist(0, id).unwrap().matches(0, 6, 0, 0));
    drop(r);
}

/// Bytes of `/dev/shm` actually allocated to a file.
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// Opening the largest machine (8 × 65535 notifies) touches almost nothing, and each
/// notify in use costs its slot (plus a few pool bytes); a whitelist page only on export.
#[test]
fn sparse_file_and_bytes_per_notify() {
    let (f, _ns) = fresh_file("mem", Soc::Ascend950PR, 8);
    let at_open = allocated(f.path());
    let size = std::fs::metadata(f.path()).unwrap().len();
    assert!(at_open <= 256 * 1024, "{at_open} bytes allocated at open");
    let count = 8192u64;
    let refs: Vec<_> = (0..count)
        .map(|_| SlotRef::create(&f, 3, CreateFlags::empty()).unwrap())
        .collect();
    let used = allocated(f.path());
    let per_notify = (used - at_open) as f64 / count as f64;
    // Export (with a whitelist) the first 256.
    for r in &refs[..256] {
        f.reset_whitelist(3, r.id()).unwrap();
    }
    let per_export = (allocated(f.path()) - used) as f64 / 256.0;
    eprintln!(
        "950PR x 8 devices: file {size} bytes (sparse), {at_open} allocated at open; \
         {per_notify:.1} bytes per notify in use; {per_export:.1} more per exported notify"
    );
    assert!(per_notify < 200.0, "{per_notify} bytes per notify");
    assert!(
        per_export <= 1600.0,
        "{per_export} bytes per export (a 1552-byte whitelist)"
    );
    drop(refs);
    assert_eq!(f.pool(3).unwrap().in_use(), 0);
}

/// A pid that is not alive: a child that has exited and been reaped.
fn dead_pid() -> i32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    c.wait().unwrap();
    assert!(!sys::pid_alive(pid, 0));
    pid
}

/// A gc takes a process-table entry only from the dead: an entry in a state no build
/// writes (corruption) only once its pid is gone, an entry being reclaimed only once the
/// reclaimer its word names is gone. Until then the notifies it holds stay held.
#[test]
fn gc_takes_an_entry_only_from_the_dead() {
    let (f, _ns) = fresh_file("gcdead", Soc::Ascend910B, 1);
    let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    let slot = f.slot(0, r.id()).unwrap();
    let j = (0..MAX_PROCS)
        .find(|&i| f.proc_entry(i).unwrap().word.load(SeqCst) == 0)
        .unwrap();
    let e = f.proc_entry(j).unwrap();
    let (live, dead) = (sys::getpid() as u32 as u64, dead_pid() as u32 as u64);
    for (state, what) in [
        (7u64, "a corrupt state"),
        (u64::from(P_RECLAIMING), "reclaiming"),
    ] {
        assert_eq!(slot.join(j, r.generation()), Ok(true));
        e.word.store(state << 32 | live, SeqCst);
        assert_eq!(f.gc().processes, 0, "{what}, live pid");
        assert_ne!(slot.holders() & (1 << j), 0, "{what}, live pid: bit kept");
        e.word.store(state << 32 | dead, SeqCst);
        assert_eq!(f.gc().processes, 1, "{what}, dead pid");
        assert_eq!(
            slot.holders() & (1 << j),
            0,
            "{what}, dead pid: bit dropped"
        );
        assert_eq!(e.word.load(SeqCst), 0, "{what}: entry freed");
    }
    // This process's own entry: intact, then overwritten.
    f.still_registered().unwrap();
    let me = f.proc_entry(f.me()).unwrap();
    me.start_time.fetch_add(1, SeqCst);
    let err = f.still_registered().unwrap_err();
    assert_eq!(err.kind(), Error::DrvInternalError);
    assert!(err.to_string().contains("no longer names it"), "{err}");
    me.start_time.fetch_sub(1, SeqCst);
    drop(r);
}

/// Ids leaked by a process that died half-way through a create or destroy are freed by a
/// later GC once they stayed orphaned for the grace period.
#[test]
fn leaked_ids_are_repaired_after_the_grace_period() {
    let (f, _ns) = fresh_file("leak", Soc::Ascend910B, 1);
    let pool = f.pool(0).unwrap();
    // Died between alloc and claim.
    let leaked = pool.alloc().unwrap();
    f.note_allocated(0, leaked);
    // Died between retiring and freeing.
    let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    let (id, g) = (r.id(), r.generation());
    assert_eq!(f.slot(0, id).unwrap().leave(f.me()), Leave::Last);
    std::mem::forget(r);
    let live = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    // Died between alloc and noting the id in the high-water mark, which another process
    // then wrote low: the pool's own record still bounds the scans.
    let hidden = pool.alloc().unwrap();
    f.device_header(0).unwrap().high_water.store(0, SeqCst);
    assert_eq!(pool.in_use(), 4);
    // Within the grace period nothing is touched.
    assert_eq!(f.gc().notifies_freed, 0);
    assert_eq!(pool.in_use(), 4);
    // Past it (grace shortened for the test), the three leaks are freed, the live one kept.
    f.repair.set_grace(Duration::ZERO);
    assert_eq!(f.gc().notifies_freed, 3);
    assert_eq!(pool.in_use(), 1);
    assert!(!pool.is_allocated(leaked) && !pool.is_allocated(id));
    assert!(!pool.is_allocated(hidden));
    assert!(pool.is_allocated(live.id()));
    assert_eq!(f.slot(0, id).unwrap().generation(), g + 1);
    let live_id = live.id();
    drop(live);
    assert!(!pool.is_allocated(live_id));
}

/// A holder bit of a free process-table entry (nobody reclaims it: only registered dead
/// processes are) kept a destroyed notify's id allocated for ever. The leak repair treats
/// such bits as no holder, once they and the slot stayed unchanged for the grace period,
/// and clears exactly them before retiring and freeing the id.
#[test]
fn stray_holder_bits_of_free_process_entries_are_repaired_after_the_grace_period() {
    let (f, _ns) = fresh_file("stray", Soc::Ascend910B, 1);
    let pool = f.pool(0).unwrap();
    let stray = 40;
    assert_ne!(stray, f.me());
    let entry = f.proc_entry(stray).unwrap();
    assert_eq!(entry.word.load(SeqCst), 0, "entry {stray} is free");
    let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    let (id, g) = (r.id(), r.generation());
    assert_eq!(r.slot().join(stray, g), Ok(true));
    let live = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    // Destroyed by its only real holder: the stray bit keeps it allocated.
    drop(r);
    let slot = f.slot(0, id).unwrap();
    assert_eq!(slot.holders(), 1 << stray);
    assert!(pool.is_allocated(id) && slot.is_live(g));
    // Within the grace period nothing is touched.
    assert_eq!(f.gc().notifies_freed, 0);
    let grace = Duration::from_millis(50);
    f.repair.set_grace(grace);
    // A process registers in that entry: the bit may be its reference, not repaired.
    let alive = (u64::from(P_ALIVE) << 32) | u64::from(f.pid as u32);
    entry.start_time.store(f.start_time, SeqCst);
    entry.word.store(alive, SeqCst);
    assert_eq!(f.gc().notifies_freed, 0);
    std::thread::sleep(grace + Duration::from_millis(10));
    assert_eq!(f.gc().notifies_freed, 0);
    assert!(pool.is_allocated(id));
    // A repair holds the entries it clears: nobody registers there meanwhile.
    assert!(f.hold_free_procs(1 << stray).is_none(), "entry occupied");
    entry.word.store(0, SeqCst);
    entry.start_time.store(0, SeqCst);
    {
        let hold = f.hold_free_procs(1 << stray).unwrap();
        assert_eq!((entry.word.load(SeqCst) >> 32) as u32, P_CLAIMING);
        assert!(f.proc_alive(stray));
        drop(hold);
        assert_eq!(entry.word.load(SeqCst), 0);
    }
    // Free again: suspected anew (the stray mask is part of the state), repaired only
    // once it stayed so for the grace period.
    assert_eq!(f.gc().notifies_freed, 0);
    assert!(pool.is_allocated(id));
    std::thread::sleep(grace + Duration::from_millis(10));
    assert_eq!(f.gc().notifies_freed, 1);
    assert!(!pool.is_allocated(id));
    assert_eq!(slot.holders(), 0);
    assert_eq!(slot.state(), Some(SlotState::Free));
    assert_eq!(slot.generation(), g + 1);
    assert_eq!(entry.word.load(SeqCst), 0, "the hold was released");
    // The notify held by this (live) process is untouched.
    assert!(pool.is_allocated(live.id()) && live.slot().is_live(live.generation()));
    assert_eq!(live.slot().holders(), 1 << f.me());
    let live_id = live.id();
    drop(live);
    assert!(!pool.is_allocated(live_id));
}

/// The table's no-lost-wake-up stress, with the real shared futexes: waiters (some with
/// tiny timeouts) and a recorder that records only when the flag is clear; every record is
/// consumed exactly once or still pending at the end.
#[test]
fn futex_stress_no_lost_or_double_consumption() {
    use acl_notify_core::table::{WaitArgs, WaitOutcome};
    use std::sync::atomic::AtomicU32;
    let (f, _ns) = fresh_file("stress", Soc::Ascend910B, 1);
    let r = SlotRef::create(&f, 0, CreateFlags::empty()).unwrap();
    let consumed = Arc::new(AtomicU32::new(0));
    let per_waiter = 400;
    let waiters: Vec<_> = (0..4)
        .map(|_| {
            let (r, c) = (Arc::clone(&r), Arc::clone(&consumed));
            std::thread::spawn(move || {
                let never = || false;
                for k in 0..per_waiter {
                    let t = if k % 5 == 0 {
                        Duration::from_micros(20)
                    } else {
                        Duration::from_secs(20)
                    };
                    let out = r.slot().sync.wait_and_reset(
                        &r.file().waiter(),
                        WaitArgs {
                            proc: r.file().me(),
                            timeout: Some(t),
                            cancel: &never,
                        },
                    );
                    match out {
                        Ok(WaitOutcome::Consumed) => {
                            c.fetch_add(1, SeqCst);
                        }
                        Ok(WaitOutcome::TimedOut) => {}
                        other => panic!("{other:?}"),
                    }
                }
            })
        })
        .collect();
    let mut records = 0u32;
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while waiters.iter().any(|h| !h.is_finished()) {
        assert!(std::time::Instant::now() < end, "stress stuck");
        if !r.slot().sync.is_set() {
            r.slot().record(&f.waiter(), 1);
            records += 1;
        } else {
            std::thread::yield_now();
        }
    }
    for h in waiters {
        h.join().unwrap();
    }
    let pending = u32::from(r.slot().sync.is_set());
    assert_eq!(consumed.load(SeqCst) + pending, records);
    assert_eq!(r.slot().sync.waiters(), 0);
    drop(r);
}

#[test]
fn mismatched_config_and_corrupt_header_are_refused() {
    let (n, _ns) = fresh("bad");
    let f = create(&n, Soc::Ascend910B, 2);
    let path = f.path().to_owned();
    drop(f);
    // Not held by this process any more: a fresh open validates the header.
    let e = open_shared(&n, 0, Soc::Ascend310P, 2, OpenMode::CreateOrOpen).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert!(e.to_string().contains("Ascend910B with 2 devices"), "{e}");
    // Corrupt the magic.
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.seek(SeekFrom::Start(0)).unwrap();
        file.write_all(b"garbage!").unwrap();
    }
    let e = open_shared(&n, 0, Soc::Ascend910B, 2, OpenMode::CreateOrOpen).unwrap_err();
    assert_eq!(e.kind(), Error::DrvInternalError);
    assert!(e.to_string().contains("bad magic"), "{e}");
    assert!(e.to_string().contains(path.to_str().unwrap()), "{e}");
    // Wrong mode.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = open_shared(&n, 0, Soc::Ascend910B, 2, OpenMode::CreateOrOpen).unwrap_err();
    assert!(e.to_string().contains("mode is 0644"), "{e}");
    // Open-only of a missing server file.
    assert!(
        open_shared(&n, 9, Soc::Ascend910B, 2, OpenMode::OpenExisting)
            .unwrap()
            .is_none()
    );
}

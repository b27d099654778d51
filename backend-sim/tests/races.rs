//! Races found by adversarial testing (issue 22): concurrent exports of one handle must leave
//! exactly one winner whose key imports; a namespace file left empty by a creator that died
//! (or by anyone) is taken over at once, not after the 5 s wait for a creator at work.

use std::sync::{Arc, Barrier};
use std::thread;

use acl_notify_core::{
    Backend, BackendError, CreateFlags, Error, ExportFlags, HostOps, ImportFlags, NotifyResources,
    Soc,
};
use acl_notify_sim::Sim;

/// Bounds by the time this process could run, not by wall time (the tests crate's watch,
/// one rule for the project's tests: see there).
#[path = "../../tests/src/progress.rs"]
#[allow(dead_code)] // Its groups' watch is for other processes; this test watches its own.
mod progress;

/// A namespace removed when the test ends, however it ends.
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Ns {
        Ns(format!("races-{tag}-{}", std::process::id()))
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Sim::remove_namespace(&self.0);
    }
}

/// Six threads export one handle at once, 300 times (the adversarial C suite saw 13–162
/// broken notifies in 20,000 such rounds): exactly one export succeeds each time, the others
/// get 507000, and the winner's key imports (before the fix, a loser's nonce replaced the
/// winner's and the import failed with 107017).
#[test]
fn concurrent_exports_of_one_handle_have_one_winner_whose_key_imports() {
    let ns = Ns::new("export");
    let sim = Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(2)
        .namespace(&ns.0)
        .open()
        .unwrap();
    let threads = 6;
    let barrier = Arc::new(Barrier::new(threads));
    let me = sim.bare_tgid();
    for round in 0..300 {
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let flags = if round % 2 == 0 {
            ExportFlags::empty()
        } else {
            ExportFlags::DISABLE_PID_VALIDATION
        };
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                let (sim, barrier) = (sim.clone(), barrier.clone());
                thread::spawn(move || {
                    barrier.wait();
                    sim.export_key(n, flags)
                })
            })
            .collect();
        let mut keys = Vec::new();
        for h in hs {
            match h.join().unwrap() {
                Ok(k) => keys.push(k),
                Err(e) => assert_eq!(e.kind(), Error::InternalError, "round {round}: {e}"),
            }
        }
        assert_eq!(
            keys.len(),
            1,
            "round {round}: {} exports succeeded",
            keys.len()
        );
        if flags.is_empty() {
            sim.set_import_pids(n, &[me]).unwrap();
        }
        let imp = sim
            .import_by_key(1, keys[0].as_str(), ImportFlags::ENABLE_PEER_ACCESS)
            .unwrap_or_else(|e| panic!("round {round}: the winning key does not import: {e}"));
        sim.destroy_notify(imp).unwrap();
        sim.destroy_notify(n).unwrap();
    }
    assert_eq!(sim.notifies_free(0).unwrap(), 8192, "no id leaked");
}

/// An empty namespace file (what a creator killed between its create and its sizing leaves,
/// or a stray `touch`) no longer makes the first open wait 5 s for a creator: nobody holds
/// its init lock, so it is removed and created afresh at once.
#[test]
fn an_empty_namespace_file_is_taken_over_at_once() {
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    let ns = Ns::new("empty-file");
    let path = acl_notify_sim::inspect::notify_file_path(&ns.0, 0);
    let _ = std::fs::remove_file(&path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    // The open runs on a thread of its own and must end before this process could run for
    // 3 s (less than the 5 s wait for a creator it must not make): time it was stopped or
    // waited for a CPU does not count, so a loaded machine cannot fail it. (Until 2026-12-07:
    // under 1 s of wall time.)
    let (tx, rx) = std::sync::mpsc::channel();
    let name = ns.0.clone();
    thread::spawn(move || {
        let _ = tx.send(
            Sim::builder()
                .soc(Soc::Ascend910B)
                .devices(2)
                .namespace(&name)
                .open(),
        );
    });
    let limit = std::time::Duration::from_secs(3);
    let mut watch = progress::Watch::this_process(limit);
    let sim = loop {
        match rx.recv_timeout(std::time::Duration::from_millis(10)) {
            Ok(r) => break r.unwrap(),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Err(e) => panic!("the open's thread: {e}"),
        }
        if let Err(hang) = watch.step() {
            panic!("the open waited for a creator: this process {hang}");
        }
    };
    sim.create_notify(0, CreateFlags::empty()).unwrap();
}

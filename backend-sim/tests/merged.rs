//! Merged-record accounting: records that land on an already-set flag are counted, and the
//! 107020 of the wait that then finds nothing says so.

use std::time::Duration;

use acl_notify_core::{
    BackendError, CreateFlags, Error, NotifyResources, StreamOps, SyncWait, Timeout,
};
use acl_notify_sim::{MergedRecords, NamespaceGuard, Sim};

#[test]
fn two_records_before_a_wait_are_counted_and_the_timeout_says_so() {
    let ns = format!("merged-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let _guard = NamespaceGuard(ns.clone());
    let sim = Sim::builder()
        .devices(1)
        .namespace(&ns)
        .open()
        .expect("open");
    let (a, b) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    assert_eq!(sim.merged_records(n).unwrap().total, 0);
    // "Record, record, then two waits": the second record merges into the first.
    sim.record(n, a).unwrap();
    sim.record(n, a).unwrap();
    sim.synchronize(a, SyncWait::Forever).unwrap();
    let m = sim.merged_records(n).unwrap();
    assert_eq!((m.since_wait, m.total), (1, 1), "{m:?}");
    assert_ne!(m, MergedRecords::default());
    sim.wait_and_reset(n, b, Timeout::from_c(1)).unwrap();
    sim.wait_and_reset(n, b, Timeout::from_c(1)).unwrap();
    let e = sim
        .synchronize(b, SyncWait::AtMost(Duration::from_secs(30)))
        .expect_err("the second wait has no record left");
    assert_eq!(e.kind(), Error::TaskTimeout);
    let msg = e.to_string();
    assert!(
        msg.contains("the last 2 records merged into 1")
            && msg.contains("1 record of this notify landed on an already-set flag")
            && msg.contains("acknowledgement notify"),
        "{msg}"
    );
    // A record that finds the flag clear ends the run; the total stays.
    sim.record(n, a).unwrap();
    sim.synchronize(a, SyncWait::Forever).unwrap();
    let m = sim.merged_records(n).unwrap();
    assert_eq!((m.since_wait, m.total), (0, 1), "{m:?}");
}

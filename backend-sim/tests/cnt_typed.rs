//! The typed count-notify API over the simulator: created from a 950 device, recorded and
//! waited on through typed streams, destroyed on drop (the id comes back); `AnySoc` answers
//! 207000 at run time on a SoC without count notifies.

use std::time::Duration;

use acl_notify_core::cnt::MAX_CNT_NOTIFIES;
use acl_notify_core::soc::{AnySoc, Ascend950PR};
use acl_notify_core::typed::Device;
use acl_notify_core::{BackendError, CntNotifyOps, CntRecord, CntWait, CntWaitMode, Error, Soc};
use acl_notify_sim::{NamespaceGuard, Sim};

/// A `Sim` on a namespace of its own, and the guard that removes the namespace (also when
/// the test fails): bind the guard first, so that it goes after the `Sim`.
fn open(soc: Soc, tag: &str) -> (NamespaceGuard, Sim) {
    let ns = format!("it-cnt-typed-{tag}-{}", std::process::id());
    let _ = Sim::remove_namespace(&ns);
    let guard = NamespaceGuard(ns.clone());
    let sim = Sim::builder()
        .soc(soc)
        .devices(2)
        .namespace(&ns)
        .open()
        .unwrap();
    (guard, sim)
}

#[test]
fn typed_count_notify_round_trip() {
    let (_ns, sim) = open(Soc::Ascend950PR, "rt");
    {
        let d = Device::<Ascend950PR, _>::new(&sim, 1).unwrap();
        let c = d.create_cnt_notify().unwrap();
        assert_eq!(c.device(), 1);
        assert!(c.id().unwrap() < MAX_CNT_NOTIFIES);
        assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES - 1);
        let w = d.create_stream().unwrap();
        let r = d.create_stream().unwrap();
        c.wait(&w, CntWait::new(CntWaitMode::Equal, 7).clearing())
            .unwrap();
        assert_eq!(
            w.synchronize_within(Duration::from_millis(100))
                .unwrap_err()
                .kind(),
            Error::StreamSyncTimeout
        );
        c.record(&r, CntRecord::add(3)).unwrap();
        c.record(&r, CntRecord::add(4)).unwrap();
        w.synchronize_within(Duration::from_secs(10)).unwrap();
        c.reset(&r).unwrap();
        r.synchronize_within(Duration::from_secs(10)).unwrap();
        // Dropped here (streams first, then the count notify).
    }
    assert_eq!(sim.cnt_notifies_free(1).unwrap(), MAX_CNT_NOTIFIES);
}

#[test]
fn any_soc_checks_at_run_time() {
    let (_ns, sim) = open(Soc::Ascend910B, "any");
    let d = Device::<AnySoc, _>::new(&sim, 0).unwrap();
    assert_eq!(
        d.create_cnt_notify().unwrap_err().kind(),
        Error::FeatureNotSupport
    );
    let (_ns2, sim2) = open(Soc::Ascend950DT, "any2");
    let d2 = Device::<AnySoc, _>::new(&sim2, 0).unwrap();
    let c = d2.create_cnt_notify().unwrap();
    c.destroy().unwrap();
    drop((sim, sim2));
}

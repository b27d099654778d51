//! `HostOps` consume-once races (issue #8, beyond `host.rs`): one record releases exactly one
//! of two host waiters, and exactly one of a host wait and a stream wait racing for it; the
//! loser times out (107019 on the host, 107020 on the stream). A driver whose library lacks
//! the extension reports these cases as ignored.

use std::time::Duration;

use acl_notify_core::{BackendError, CreateFlags, Error};

use super::{case, notify};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, TestBackend};
use crate::util::{at_most, pause, secs, sync_ok};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case(
            "host::one_record_releases_one_of_two_host_waits",
            notify,
            two_host_waits,
        ),
        case(
            "host::host_and_stream_wait_share_one_record",
            notify,
            host_vs_stream,
        ),
    ]
}

/// How long each racing waiter waits: the loser always waits this long, and the record is
/// queued 150 ms in, so the rest is the margin a loaded machine has to run it (1.5 s once ran
/// out with the load average at 25).
const WAIT: Duration = Duration::from_secs(3);

fn two_host_waits<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    ctx.host_ops()?;
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let s = ok!(b.create_stream(0));
    let results = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| b.host_wait(n, WAIT).map_err(|e| (e.kind(), e.to_string()))))
            .collect();
        pause(150);
        let rec = b.record(n, s);
        let rs: Vec<_> = hs
            .into_iter()
            .map(|h| h.join().map_err(|_| "a host waiter panicked".to_owned()))
            .collect();
        (rec, rs)
    });
    ok!(results.0);
    let mut released = 0;
    for r in results.1 {
        match r? {
            Ok(()) => released += 1,
            Err((Error::WaitTimeout, _)) => {}
            Err((k, m)) => return Err(format!("a host wait failed with {k} — {m}")),
        }
    }
    ensure_eq!(released, 1, "host waits released by one record");
    ensure_eq!(
        ok!(b.try_consume(n)),
        false,
        "a record left after it was consumed"
    );
    Ok(())
}

fn host_vs_stream<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    ctx.host_ops()?;
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let w = ok!(b.create_stream(0));
    let r = ok!(b.create_stream(0));
    ok!(b.wait_and_reset(n, w, secs(WAIT.as_secs() as u32)));
    let (host, rec) = std::thread::scope(|scope| {
        let h = scope.spawn(|| b.host_wait(n, WAIT).map_err(|e| (e.kind(), e.to_string())));
        pause(150);
        let rec = b.record(n, r);
        (h.join(), rec)
    });
    ok!(rec);
    sync_ok(ctx, r, Duration::from_secs(10), "the record")?;
    let host_got = match host.map_err(|_| "the host waiter panicked".to_owned())? {
        Ok(()) => true,
        Err((Error::WaitTimeout, _)) => false,
        Err((k, m)) => return Err(format!("the host wait failed with {k} — {m}")),
    };
    let stream_got = match b.synchronize(w, at_most(Duration::from_secs(10))) {
        Ok(()) => true,
        Err(e) if e.kind() == Error::TaskTimeout => false,
        Err(e) => return Err(format!("the stream wait failed with {} — {e}", e.kind())),
    };
    ensure!(
        host_got != stream_got,
        "one record must release exactly one waiter (host: {host_got}, stream: {stream_got})"
    );
    Ok(())
}

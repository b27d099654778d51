//! `HostOps` (beyond CANN's C API): host-side waits that consume a record exactly as a stream
//! wait does, a non-blocking consume, and the per-device id budget. The simulator must offer
//! them; a driver whose library lacks the extension reports these cases as ignored.

use std::time::{Duration, Instant};

use acl_notify_core::{CreateFlags, Error, ExportFlags, Feature, ImportFlags};

use super::{case, notify};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, DEVICES, TestBackend};
use crate::util::{pause, secs, sync_ok};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("host::wait_and_try_consume", notify, wait_and_try_consume),
        case("host::notifies_free", notify, notifies_free),
    ]
}

const LONG: Duration = Duration::from_secs(10);

fn wait_and_try_consume<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    ctx.host_ops()?;
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let s = ok!(b.create_stream(0));
    ensure_eq!(ok!(b.try_consume(n)), false, "try_consume of a clear flag");
    ok!(b.record(n, s));
    sync_ok(ctx, s, LONG, "record")?;
    ensure_eq!(ok!(b.try_consume(n)), true, "try_consume of a set flag");
    ensure_eq!(
        ok!(b.try_consume(n)),
        false,
        "try_consume right after consuming"
    );

    let t = Instant::now();
    fails!(
        b.host_wait(n, Duration::from_millis(200)),
        Error::WaitTimeout
    );
    let el = t.elapsed();
    // A lower bound only (a loaded machine makes a timeout late, never early).
    ensure!(
        el >= Duration::from_millis(190),
        "host_wait(200 ms) timed out after {el:.2?}"
    );
    // A record from a stream, 100 ms later, releases a blocked host wait.
    std::thread::scope(|scope| -> CaseResult {
        scope.spawn(|| {
            pause(100);
            let _ = b.record(n, s);
        });
        ok!(b.host_wait(n, Duration::from_secs(5)));
        Ok(())
    })?;
    // It consumed the record: a stream wait now times out.
    let w = ok!(b.create_stream(0));
    ok!(b.wait_and_reset(n, w, secs(1)));
    crate::util::sync_err(
        ctx,
        w,
        LONG,
        Error::TaskTimeout,
        "stream wait after a host wait",
    )?;

    // Only on the owner's device.
    if ctx.soc.has(Feature::Ipc) {
        let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
        let imp = ok!(b.import_by_key(1, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS));
        fails!(
            b.host_wait(imp, Duration::from_millis(10)),
            Error::ParamInvalid
        );
        fails!(b.try_consume(imp), Error::ParamInvalid);
        // Same-device import may.
        let imp0 = ok!(b.import_by_key(0, key.as_str(), ImportFlags::empty()));
        ok!(b.record(imp, ok!(b.create_stream(1))));
        ok!(b.host_wait(imp0, Duration::from_secs(5)));
    }
    Ok(())
}

fn notifies_free<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    ctx.host_ops()?;
    let b = ctx.b;
    let max = ctx.soc.max_notifies();
    for dev in 0..DEVICES {
        ensure_eq!(
            ok!(b.notifies_free(dev)),
            max,
            "notifies_free({dev}) of a fresh machine"
        );
    }
    let v: Vec<_> = (0..3)
        .map(|_| b.create_notify(1, CreateFlags::empty()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("create: {e}"))?;
    ensure_eq!(
        ok!(b.notifies_free(1)),
        max - 3,
        "after 3 creates on device 1"
    );
    ensure_eq!(
        ok!(b.notifies_free(0)),
        max,
        "device 0 after creates on device 1"
    );
    ok!(b.destroy_notify(v[0]));
    ensure_eq!(ok!(b.notifies_free(1)), max - 2, "after a destroy");
    fails!(b.notifies_free(DEVICES), Error::InvalidDeviceId);
    Ok(())
}

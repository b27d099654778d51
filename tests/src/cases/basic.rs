//! Identity, create/destroy/id, per-device ids, exhaustion and reuse (SPEC §3 create/destroy/
//! get-id rows, §4 max notifies), and invalid or stale handles → 107017 for every call.

use std::collections::HashSet;
use std::time::Duration;

use acl_notify_core::{
    CreateFlags, Error, ExportFlags, Feature, Lifecycle, RawStream, ServerPid, StreamDestroy,
};

use super::{any, case, notify};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, DEVICES, TestBackend};
use crate::util::{GARBAGE_NOTIFIES, GARBAGE_STREAMS, Probe, at_most, destroy_all, fill, secs};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("identity", any, identity),
        case("create_destroy_id", notify, create_destroy_id),
        case("bad_device", notify, bad_device),
        case("ids_unique_per_device", notify, ids_unique_per_device),
        case("exhaustion_and_reuse", notify, exhaustion_and_reuse),
        case("invalid_notify_handles", notify, invalid_notify_handles),
        case("invalid_stream_handles", any, invalid_stream_handles),
    ]
}

/// `soc`, `device_count`, `bare_tgid` (`aclrtDeviceGetBareTgid` returns the caller's process
/// id) and `server_id` as configured.
fn identity<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    ensure_eq!(ctx.b.soc(), ctx.soc, "soc()");
    ensure_eq!(ctx.b.device_count(), DEVICES, "device_count()");
    ensure_eq!(
        ctx.b.bare_tgid(),
        std::process::id() as i32,
        "bare_tgid() must be the caller's process id"
    );
    ensure_eq!(
        ctx.b.server_id(),
        0,
        "server_id() with ACL_NOTIFY_SIM_SERVER_ID=0"
    );
    Ok(())
}

/// Create → info (id, devices, state, flags) → destroy; a destroyed handle is 107017.
fn create_destroy_id<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    ensure!(n.0 != 0, "create_notify returned the never-valid handle 0");
    let info = ok!(b.notify_info(n));
    ensure_eq!(info.device, 0, "info.device");
    ensure_eq!(info.owner_device, 0, "info.owner_device of the owner");
    ensure_eq!(info.owner_server, 0, "info.owner_server");
    ensure_eq!(info.state, Lifecycle::Created, "state of a new notify");
    ensure_eq!(info.flags, CreateFlags::empty(), "info.flags");
    // The id is stable.
    ensure_eq!(ok!(b.notify_info(n)).id, info.id, "id read twice");

    let m = ok!(b.create_notify(0, CreateFlags::empty()));
    ensure!(m != n, "two creates returned the same handle {n:?}");
    ensure!(
        ok!(b.notify_info(m)).id != info.id,
        "two live notifies on device 0 share id {}",
        info.id
    );

    let d3 = ok!(b.create_notify(DEVICES - 1, CreateFlags::empty()));
    let i3 = ok!(b.notify_info(d3));
    ensure_eq!(
        i3.device,
        DEVICES - 1,
        "device of a notify created on the last device"
    );
    ensure_eq!(i3.owner_device, DEVICES - 1, "owner_device");

    ok!(b.destroy_notify(n));
    fails!(b.destroy_notify(n), Error::InvalidHandle);
    fails!(b.notify_info(n), Error::InvalidHandle);
    // Destroying one does not disturb another.
    ensure_eq!(
        ok!(b.notify_info(m)).state,
        Lifecycle::Created,
        "the other notify"
    );
    ok!(b.destroy_notify(m));
    ok!(b.destroy_notify(d3));
    Ok(())
}

/// A device that does not exist is 107001 (the trait's explicit device argument; in C it is
/// the current device, set by `aclrtSetDevice`, which rejects it with the same code).
fn bad_device<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    fails!(
        b.create_notify(DEVICES, CreateFlags::empty()),
        Error::InvalidDeviceId
    );
    fails!(
        b.create_notify(u32::MAX, CreateFlags::empty()),
        Error::InvalidDeviceId
    );
    fails!(b.create_stream(DEVICES), Error::InvalidDeviceId);
    fails!(b.default_stream(DEVICES), Error::InvalidDeviceId);
    fails!(b.can_access_peer(DEVICES, 0), Error::InvalidDeviceId);
    fails!(b.can_access_peer(0, DEVICES), Error::InvalidDeviceId);
    fails!(b.enable_peer_access(DEVICES, 0), Error::InvalidDeviceId);
    Ok(())
}

/// Ids are unique among the live notifies of one device; each device has its own pool.
fn ids_unique_per_device<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let per_device = 100.min(ctx.soc.max_notifies());
    for dev in [0, 1] {
        let mut ids = HashSet::new();
        for i in 0..per_device {
            let n = ok!(b.create_notify(dev, CreateFlags::empty()));
            let info = ok!(b.notify_info(n));
            ensure_eq!(info.device, dev, "device of notify #{i}");
            ensure!(
                ids.insert(info.id),
                "device {dev}: notify #{i} got id {} which a live notify already has",
                info.id
            );
        }
    }
    Ok(())
}

/// Exactly the SoC's maximum per device, then 207009 (also with DEVICE_USE_ONLY where that
/// flag exists); other devices are unaffected; a destroyed id is reusable.
fn exhaustion_and_reuse<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let max = ctx.soc.max_notifies();
    let all = fill(ctx, 0, max)?;
    ensure_eq!(
        all.len() as u32,
        max,
        "notifies created on device 0 before ACL_ERROR_RT_NO_NOTIFY_RESOURCE (SPEC §4 max)"
    );
    ctx.note(format!("created {max} notifies on device 0"));
    fails!(
        b.create_notify(0, CreateFlags::empty()),
        Error::NoNotifyResource
    );
    if ctx.soc.has(Feature::DeviceOnly) {
        fails!(
            b.create_notify(0, CreateFlags::DEVICE_USE_ONLY),
            Error::NoNotifyResource
        );
    }
    let mut ids = HashSet::new();
    for &n in &all {
        ensure!(
            ids.insert(ok!(b.notify_info(n)).id),
            "two live notifies share an id"
        );
    }
    // Another device has its own pool.
    let other = ok!(b.create_notify(1, CreateFlags::empty()));

    // Free one: exactly one create succeeds again. The pool holds exactly `max` ids, so the
    // only free id is the one just released.
    let victim = all[all.len() / 2];
    let victim_id = ok!(b.notify_info(victim)).id;
    ok!(b.destroy_notify(victim));
    let again = ok!(b.create_notify(0, CreateFlags::empty()));
    ensure_eq!(
        ok!(b.notify_info(again)).id,
        victim_id,
        "id of the notify created after freeing one in a full pool"
    );
    fails!(
        b.create_notify(0, CreateFlags::empty()),
        Error::NoNotifyResource
    );
    if ctx.host_ops().is_ok() {
        ensure_eq!(
            ok!(b.notifies_free(0)),
            0,
            "notifies_free(0) of a full device"
        );
        ensure_eq!(
            ok!(b.notifies_free(1)),
            max - 1,
            "notifies_free(1) with one notify on device 1"
        );
    }
    // Freeing everything makes the whole pool available again.
    let rest: Vec<_> = all.iter().copied().filter(|&n| n != victim).collect();
    destroy_all(ctx, &rest)?;
    ok!(b.destroy_notify(again));
    ok!(b.destroy_notify(other));
    let again = fill(ctx, 0, max)?;
    ensure_eq!(
        again.len() as u32,
        max,
        "notifies after destroying all of them"
    );
    Ok(())
}

/// Every notify call with a destroyed or garbage handle answers 107017 — except where the
/// SPEC's check order puts a SoC capability check first (then 207000).
fn invalid_notify_handles<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(0));
    let stale = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.destroy_notify(stale));
    // A live notify, so a backend cannot answer 107017 just because nothing exists.
    let live = ok!(b.create_notify(0, CreateFlags::empty()));
    let host = ctx.host_ops().is_ok();
    let entry = [ServerPid {
        sdid: crate::util::sdid(b.server_id(), 0),
        pid: std::process::id() as i32,
    }];
    for h in std::iter::once(stale).chain(GARBAGE_NOTIFIES) {
        ctx.note(format!("handle {h:?}"));
        fails!(b.destroy_notify(h), Error::InvalidHandle);
        fails!(b.notify_info(h), Error::InvalidHandle);
        fails!(b.record(h, s), Error::InvalidHandle);
        fails!(b.wait_and_reset(h, s, secs(1)), Error::InvalidHandle);
        // Batch reset: "per element, in order: SoC without batch reset → 207000; …; bad handle
        // → 107017".
        if ctx.soc.has(Feature::BatchReset) {
            fails!(b.batch_reset(&[h]), Error::InvalidHandle);
        } else {
            fails!(b.batch_reset(&[h]), Error::FeatureNotSupport);
        }
        // Export: "107017; len; SoC without IPC → 207000": the handle check comes first.
        fails!(b.export_key(h, ExportFlags::empty()), Error::InvalidHandle);
        // Set import PID: "SoC without IPC → 207000; 107017": the SoC check comes first.
        if ctx.soc.has(Feature::Ipc) {
            fails!(b.set_import_pids(h, &[1]), Error::InvalidHandle);
        } else {
            fails!(b.set_import_pids(h, &[1]), Error::FeatureNotSupport);
        }
        // Inter-server: "num == 0 → 107000; 107017; per entry …": the handle check precedes
        // every per-entry check, including the SoC one.
        fails!(b.set_import_server_pids(h, &entry), Error::InvalidHandle);
        if host {
            fails!(
                b.host_wait(h, Duration::from_millis(10)),
                Error::InvalidHandle
            );
            fails!(b.try_consume(h), Error::InvalidHandle);
        }
    }
    // The live notify and the stream still work.
    ok!(b.record(live, s));
    ok!(b.wait_and_reset(live, s, secs(5)));
    ok!(b.synchronize(s, at_most(Duration::from_secs(10))));
    Ok(())
}

/// Every stream call with a destroyed or garbage stream handle answers 107017.
fn invalid_stream_handles<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let dead = ok!(b.create_stream(0));
    ok!(b.destroy_stream(dead, StreamDestroy::Drain));
    let live_notify = if ctx.soc.has(Feature::Notify) {
        Some(ok!(b.create_notify(0, CreateFlags::empty())))
    } else {
        None
    };
    let p = Probe::new();
    let handles: Vec<RawStream> = std::iter::once(dead).chain(GARBAGE_STREAMS).collect();
    for s in handles {
        ctx.note(format!("stream {s:?}"));
        if let Some(n) = live_notify {
            fails!(b.record(n, s), Error::InvalidHandle);
            fails!(b.wait_and_reset(n, s, secs(1)), Error::InvalidHandle);
        }
        fails!(
            b.synchronize(s, at_most(Duration::from_secs(1))),
            Error::InvalidHandle
        );
        fails!(b.query(s), Error::InvalidHandle);
        fails!(b.launch_host_func(s, p.call()), Error::InvalidHandle);
        fails!(
            b.destroy_stream(s, StreamDestroy::Drain),
            Error::InvalidHandle
        );
        fails!(
            b.destroy_stream(s, StreamDestroy::Discard),
            Error::InvalidHandle
        );
        fails!(b.stream_device(s), Error::InvalidHandle);
    }
    crate::util::pause(50);
    ensure_eq!(p.count(), 0, "host functions run after being refused");
    Ok(())
}

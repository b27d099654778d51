//! The typestate API (`acl_notify_core::typed`) over each real backend: the SoC check of
//! `Device::new`, the IPC flow through typed transitions (drop destroys), `AnySoc`'s run-time
//! 207000 answers, and the partial-whitelist hand-back of an inter-server call.

use std::time::Duration;

use acl_notify_core::soc::Ipc;
use acl_notify_core::soc::{
    Ascend310B, Ascend310P, Ascend910, Ascend910_93, Ascend910B, Ascend950PR,
};
use acl_notify_core::typed::{AllowFailed, AnySoc, Device, Notify, Stream};
use acl_notify_core::{BackendError, Error, ImportFlags, Lifecycle, ServerPid, Soc, Timeout};

use super::{any, case, inter_server, ipc};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, TestBackend};
use crate::util::{Probe, fill, secs};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("typed::device_soc_checked", any, device_soc_checked),
        case("typed::ipc_flow_and_drop", ipc, ipc_flow_and_drop),
        case("typed::any_soc_runtime_checks", any, any_soc_runtime_checks),
        case(
            "typed::partial_whitelist_handed_back",
            inter_server,
            partial_whitelist_handed_back,
        ),
    ]
}

const LONG: Duration = Duration::from_secs(10);

fn code<T, E: BackendError>(r: &Result<T, E>) -> Option<Error> {
    r.as_ref().err().map(|e| e.kind())
}

/// `Device::<C, _>::new` accepts exactly the backend's SoC (107000 otherwise) and checks the
/// device number (107001).
fn device_soc_checked<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let r = Device::<Ascend910B, _>::new(b, 0);
    let want = if ctx.soc == Soc::Ascend910B {
        None
    } else {
        Some(Error::ParamInvalid)
    };
    ensure_eq!(
        code(&r),
        want,
        "Device::<Ascend910B, _>::new on {}",
        ctx.soc
    );
    let r = Device::<Ascend310B, _>::new(b, 0);
    let want = if ctx.soc == Soc::Ascend310B {
        None
    } else {
        Some(Error::ParamInvalid)
    };
    ensure_eq!(
        code(&r),
        want,
        "Device::<Ascend310B, _>::new on {}",
        ctx.soc
    );
    let r = Device::<AnySoc, _>::new(b, crate::harness::DEVICES);
    ensure_eq!(
        code(&r),
        Some(Error::InvalidDeviceId),
        "Device::new on a missing device"
    );
    let d = ok!(Device::<AnySoc, _>::new(b, 1));
    ensure_eq!(d.soc(), ctx.soc, "AnySoc device's run-time SoC");
    Ok(())
}

fn ipc_flow_and_drop<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    match ctx.soc {
        Soc::Ascend950PR => flow::<Ascend950PR, B>(ctx),
        Soc::Ascend910_93 => flow::<Ascend910_93, B>(ctx),
        Soc::Ascend910B => flow::<Ascend910B, B>(ctx),
        Soc::Ascend310P => flow::<Ascend310P, B>(ctx),
        Soc::Ascend910 => flow::<Ascend910, B>(ctx),
        other => Err(format!("no IPC SoC type for {other}")),
    }
}

/// create → export → allow_pids → import (same process) → record through the import, wait
/// through the owner; dropping the handles destroys them (the raw handles go stale and the
/// whole pool is free again).
fn flow<C: Ipc, B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let dev = ok!(Device::<C, _>::new(b, 0));
    let s = ok!(dev.create_stream());
    let w = ok!(Stream::create(b, 0));
    let n = ok!(dev.create_notify());
    ensure_eq!(
        ok!(n.info()).state,
        Lifecycle::Created,
        "typed Created state"
    );
    let (n, key) = match n.export() {
        Ok(x) => x,
        Err((_, e)) => return Err(format!("export: {e}")),
    };
    ensure_eq!(
        ok!(n.info()).state,
        Lifecycle::Exported,
        "typed Exported state"
    );
    let n = match n.allow_pids(&[b.bare_tgid()]) {
        Ok(n) => n,
        Err((_, e)) => return Err(format!("allow_pids: {e}")),
    };
    ensure_eq!(
        ok!(n.info()).state,
        Lifecycle::Whitelisted,
        "typed Whitelisted state"
    );
    let imp = ok!(dev.import(&key, ImportFlags::empty()));
    ensure_eq!(ok!(imp.id()), ok!(n.id()), "imported id");
    let p = Probe::new();
    ok!(n.wait_and_reset(&w, secs(5)));
    ok!(w.launch_host_func(p.call()));
    ok!(imp.record(&s));
    ok!(w.synchronize_within(LONG));
    ensure_eq!(p.count(), 1, "host function after the typed wait");
    ok!(n.wait_and_reset(&w, Timeout::Forever));
    ok!(imp.record(&s));
    ok!(w.synchronize_within(LONG));

    // Drop destroys: the raw handles become stale.
    let raw_imp = imp.into_raw();
    let imp = ok!(Notify::<C, acl_notify_core::typed::Imported, B>::from_raw(
        dev, raw_imp
    ));
    drop(imp);
    fails!(b.notify_info(raw_imp), Error::InvalidHandle);
    let raw_n = n.into_raw();
    let n = ok!(Notify::<C, acl_notify_core::typed::Whitelisted, B>::from_raw(dev, raw_n));
    // from_raw checks the state: the wrong state is refused and the handle is not destroyed.
    let wrong = Notify::<C, acl_notify_core::typed::Created, B>::from_raw(dev, raw_n);
    ensure_eq!(
        code(&wrong),
        Some(Error::ParamInvalid),
        "from_raw with the wrong state"
    );
    drop(n);
    fails!(b.notify_info(raw_n), Error::InvalidHandle);
    drop((s, w));
    let all = fill(ctx, 0, ctx.soc.max_notifies())?;
    ensure_eq!(
        all.len() as u32,
        ctx.soc.max_notifies(),
        "free ids after every typed handle was dropped"
    );
    Ok(())
}

/// `Device<AnySoc>`: every method exists; what the SoC lacks answers 207000 at run time, and
/// a refused export hands the handle back.
fn any_soc_runtime_checks<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let dev = ok!(Device::<AnySoc, _>::new(b, 0));
    let soc = ctx.soc;
    let n = dev.create_notify();
    if !soc.has(acl_notify_core::Feature::Notify) {
        ensure_eq!(
            code(&n),
            Some(Error::FeatureNotSupport),
            "create_notify on {soc}"
        );
        return Ok(());
    }
    let n = ok!(n);
    let d = dev.create_device_only_notify();
    let want = (!soc.has(acl_notify_core::Feature::DeviceOnly)).then_some(Error::FeatureNotSupport);
    ensure_eq!(code(&d), want, "create_device_only_notify on {soc}");
    let r = dev.batch_reset(&[n.reset_ref()]);
    let want = (!soc.has(acl_notify_core::Feature::BatchReset)).then_some(Error::FeatureNotSupport);
    ensure_eq!(code(&r), want, "batch_reset on {soc}");
    match n.export_open() {
        Ok((n, _key)) => {
            ensure!(
                soc.has(acl_notify_core::Feature::Ipc),
                "export succeeded on {soc}"
            );
            ensure_eq!(ok!(n.info()).state, Lifecycle::ExportedOpen, "state");
        }
        Err((n, e)) => {
            ensure!(
                !soc.has(acl_notify_core::Feature::Ipc),
                "export_open failed on {soc}: {e}"
            );
            ensure_eq!(e.kind(), Error::FeatureNotSupport, "export_open on {soc}");
            // The handle came back usable.
            let s = ok!(dev.create_stream());
            ok!(n.record(&s));
            ok!(n.wait_and_reset(&s, secs(5)));
            ok!(s.synchronize_within(LONG));
        }
    }
    Ok(())
}

/// Ascend910_93: a device answers its sdid; a 65-entry inter-server call applies 64 then
/// fails with 207012; the typed API hands back a `Whitelisted` handle (following the
/// backend's state).
fn partial_whitelist_handed_back<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let dev = ok!(Device::<Ascend910_93, _>::new(b, 0));
    // The typed device answers its own sdid: device 0 of this server.
    ensure_eq!(
        ok!(dev.super_pod_device_id()),
        crate::util::sdid(b.server_id(), 0),
        "Device::super_pod_device_id of device 0"
    );
    let n = ok!(dev.create_notify());
    let (n, _key) = match n.export() {
        Ok(x) => x,
        Err((_, e)) => return Err(format!("export: {e}")),
    };
    let many: Vec<_> = (0..65)
        .map(|i| ServerPid {
            sdid: crate::util::sdid(1, 0),
            pid: 3_100_000 + i,
        })
        .collect();
    match n.allow_server_pids(&many) {
        Ok(_) => Err("65 inter-server entries were accepted (limit 64)".to_owned()),
        Err((left, e)) => {
            ensure_eq!(e.kind(), Error::OverLimit, "65 entries");
            match left {
                AllowFailed::Whitelisted(n) => {
                    let r = n.allow_pids(&[3_200_000]);
                    ensure_eq!(
                        code(&r),
                        Some(Error::OverLimit),
                        "one more after 64 applied"
                    );
                    Ok(())
                }
                AllowFailed::Exported(_) => Err(
                    "after 64 of 65 entries were applied, the handle came back Exported, not \
                     Whitelisted (the backend's notify_info state does not follow the applied \
                     entries)"
                        .to_owned(),
                ),
            }
        }
    }
}

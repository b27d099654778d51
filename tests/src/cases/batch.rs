//! `aclrtNotifyBatchReset`: resets set flags; stops at the first failure with earlier elements
//! reset; IPC notifies as the real runtime treats them per SoC; SoCs without it → 207000;
//! empty → 107000.

use std::time::Duration;

use acl_notify_core::{CreateFlags, Error, ExportFlags, ImportFlags, Soc};

use super::{batch, batch_ipc, case, notify_no_batch};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, TestBackend};
use crate::util::{flags_set, secs, sync_ok};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("batch::resets_set_flags", batch, resets_set_flags),
        case(
            "batch::stops_at_first_failure",
            batch,
            stops_at_first_failure,
        ),
        case(
            "batch::ipc_notifies_per_soc",
            batch_ipc,
            ipc_notifies_per_soc,
        ),
        case("batch::unsupported", notify_no_batch, unsupported),
    ]
}

fn record_all<B: TestBackend>(ctx: &Ctx<'_, B>, ns: &[acl_notify_core::RawNotify]) -> CaseResult {
    let s = ok!(ctx.b.create_stream(0));
    for &n in ns {
        ok!(ctx.b.record(n, s));
    }
    // Generous: a loaded machine may not run the stream for seconds.
    sync_ok(ctx, s, Duration::from_secs(30), "records")?;
    Ok(())
}

/// The listed set flags become 0; a set flag not in the list stays set; resetting clear flags
/// is fine; an empty list → 107000.
fn resets_set_flags<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let ns: Vec<_> = (0..3)
        .map(|_| b.create_notify(0, CreateFlags::empty()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("create: {e}"))?;
    let clear = ok!(b.create_notify(0, CreateFlags::empty()));
    record_all(ctx, &ns)?;
    ok!(b.batch_reset(&[ns[0], ns[1], clear]));
    ensure_eq!(
        flags_set(ctx, &[ns[0], ns[1], ns[2], clear])?,
        vec![false, false, true, false],
        "flags [reset, reset, not in the batch, never set] after batch_reset"
    );
    fails!(b.batch_reset(&[]), Error::ParamInvalid);
    // A notify on another device can be in the same batch.
    let d1 = ok!(b.create_notify(1, CreateFlags::empty()));
    let s1 = ok!(b.create_stream(1));
    ok!(b.record(d1, s1));
    sync_ok(ctx, s1, Duration::from_secs(10), "record on device 1")?;
    ok!(b.batch_reset(&[d1]));
    ensure_eq!(
        flags_set(ctx, &[d1])?,
        vec![false],
        "device-1 notify after batch_reset"
    );
    // And a reset notify still works.
    let s = ok!(b.create_stream(0));
    ok!(b.record(ns[0], s));
    ok!(b.wait_and_reset(ns[0], s, secs(5)));
    sync_ok(
        ctx,
        s,
        Duration::from_secs(10),
        "wait after a record following a reset",
    )?;
    Ok(())
}

/// "Stops at the first failure; earlier elements stay reset": [set, set, stale, set] → 107017,
/// the first two reset, the last still set.
fn stops_at_first_failure<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let ns: Vec<_> = (0..3)
        .map(|_| b.create_notify(0, CreateFlags::empty()))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("create: {e}"))?;
    let stale = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.destroy_notify(stale));
    record_all(ctx, &ns)?;
    fails!(
        b.batch_reset(&[ns[0], ns[1], stale, ns[2]]),
        Error::InvalidHandle
    );
    ensure_eq!(
        flags_set(ctx, &[ns[0], ns[1], ns[2]])?,
        vec![false, false, true],
        "flags [before the bad element, before, after] after a failed batch_reset"
    );
    Ok(())
}

/// IPC notifies in a batch, as CANN's runtime treats them per SoC (hicann/runtime
/// `api_impl.cc`, `notify.cc`, `notify_c.cc`): on the Ascend 950 family every IPC notify is
/// refused with 507009 — an imported one, and the owner's own once exported — and the elements
/// before it stay reset; on Ascend910B and Ascend910_93 the runtime makes no IPC check, so both
/// are reset like any other notify. (In-process import of one's own exported key.)
fn ipc_notifies_per_soc<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let refused = match b.soc() {
        Soc::Ascend950PR | Soc::Ascend950DT => true,
        Soc::Ascend910B | Soc::Ascend910_93 => false,
        other => return Err(format!("no expectation written for {other}")),
    };
    let owner = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(owner, ExportFlags::DISABLE_PID_VALIDATION));
    let imp = ok!(b.import_by_key(0, key.as_str(), ImportFlags::empty()));
    let (a, z) = (
        ok!(b.create_notify(0, CreateFlags::empty())),
        ok!(b.create_notify(0, CreateFlags::empty())),
    );
    record_all(ctx, &[a, owner, z])?;
    if refused {
        fails!(b.batch_reset(&[a, imp, z]), Error::TaskTypeNotSupport);
        fails!(b.batch_reset(&[imp]), Error::TaskTypeNotSupport);
        fails!(b.batch_reset(&[owner]), Error::TaskTypeNotSupport);
        ensure_eq!(
            flags_set(ctx, &[a, z, owner])?,
            vec![false, true, true],
            "flags [before the IPC element, after it, the exported owner's] on the 950 family"
        );
    } else {
        ok!(b.batch_reset(&[a, imp, z]));
        ensure_eq!(
            flags_set(ctx, &[a, z, owner])?,
            vec![false, false, false],
            "flags [a, z, the imported notify's] after a batch reset with an imported element"
        );
        record_all(ctx, &[owner])?;
        ok!(b.batch_reset(&[owner]));
        ensure_eq!(
            flags_set(ctx, &[owner])?,
            vec![false],
            "the exported owner's flag after its batch reset"
        );
    }
    Ok(())
}

/// SoCs without batch reset (Ascend310B, Ascend310P, Ascend910): 207000 per element; an empty
/// list is still 107000 (that check comes first); nothing is reset.
fn unsupported<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    record_all(ctx, &[n])?;
    fails!(b.batch_reset(&[n]), Error::FeatureNotSupport);
    fails!(b.batch_reset(&[]), Error::ParamInvalid);
    ensure_eq!(
        flags_set(ctx, &[n])?,
        vec![true],
        "flag after a refused batch_reset"
    );
    Ok(())
}

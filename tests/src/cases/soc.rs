//! SPEC §4, row by row: what each SoC lacks answers 207000 (`ACL_ERROR_RT_FEATURE_NOT_SUPPORT`),
//! in the place the SPEC §3 check order gives it; plus the flag-word validation rows.

use acl_notify_core::{
    CreateFlags, Error, ExportFlags, ExportKey, Feature, ImportFlags, KeyFields, RawNotify,
    ServerPid, StreamDestroy,
};

use super::{case, ipc_no_inter_server, no_notify, notify, notify_no_ipc};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, TestBackend};
use crate::util::{GARBAGE_NOTIFIES, at_most, secs};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("soc::device_only_flag", notify, device_only_flag),
        case("soc::unknown_flag_bits", notify, unknown_flag_bits),
        case("soc::ipv350_everything_unsupported", no_notify, ipv350),
        case("soc::ipc_unsupported", notify_no_ipc, ipc_unsupported),
        case(
            "soc::inter_server_unsupported",
            ipc_no_inter_server,
            inter_server_unsupported,
        ),
    ]
}

/// `ACL_NOTIFY_DEVICE_USE_ONLY`: accepted (and reported back) where the SoC has it, 207000
/// where it does not (Ascend910, Ascend310B).
fn device_only_flag<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    if ctx.soc.has(Feature::DeviceOnly) {
        let n = ok!(b.create_notify(0, CreateFlags::DEVICE_USE_ONLY));
        ensure_eq!(
            ok!(b.notify_info(n)).flags,
            CreateFlags::DEVICE_USE_ONLY,
            "flags of a DEVICE_USE_ONLY notify"
        );
        // It is a working notify for device-side tasks.
        let s = ok!(b.create_stream(0));
        ok!(b.record(n, s));
        ok!(b.wait_and_reset(n, s, secs(5)));
        ok!(b.synchronize(s, at_most(std::time::Duration::from_secs(10))));
        ok!(b.destroy_notify(n));
    } else {
        fails!(
            b.create_notify(0, CreateFlags::DEVICE_USE_ONLY),
            Error::FeatureNotSupport
        );
        // The refusal allocated nothing: the whole pool is still there.
        let all = crate::util::fill(ctx, 0, ctx.soc.max_notifies())?;
        ensure_eq!(
            all.len() as u32,
            ctx.soc.max_notifies(),
            "pool size after refused DEVICE_USE_ONLY creates"
        );
    }
    Ok(())
}

/// The flag words' unknown bits → 107000. SPEC §3 says "flag ∉ {0, 1} → 107000" (create),
/// "flags ∉ {0, 0x2} → 107000" (export), "low 32 bits of flags > 3 → 107000" (import). The
/// flag types hold defined bits only (`tests/ui/flags_cannot_hold_unknown_bits.rs`), so a
/// backend never sees an unknown bit: the one place they are refused is `from_raw`, which the
/// C ABI uses on the caller's word. Every defined word reaches the backend and is accepted.
fn unknown_flag_bits<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    for raw in [2, 3, 0x100, u64::MAX] {
        ensure_eq!(
            CreateFlags::from_raw(raw).err(),
            Some(Error::ParamInvalid),
            "CreateFlags::from_raw({raw:#x})"
        );
    }
    for raw in [1, 3, 4, 1 << 40] {
        ensure_eq!(
            ExportFlags::from_raw(raw).err(),
            Some(Error::ParamInvalid),
            "ExportFlags::from_raw({raw:#x})"
        );
    }
    for raw in [4, 5, 0xffff_ffff, 0x1_0000_0004] {
        ensure_eq!(
            ImportFlags::from_raw(raw).err(),
            Some(Error::ParamInvalid),
            "ImportFlags::from_raw({raw:#x})"
        );
    }
    if ctx.soc.has(Feature::Ipc) {
        let n = ok!(b.create_notify(0, ok!(CreateFlags::from_raw(0))));
        let key = ok!(b.export_key(n, ok!(ExportFlags::from_raw(2))));
        // Values up to 3 are valid (bit 0 is accepted and has no effect), upper half ignored.
        let imp = ok!(b.import_by_key(
            0,
            key.as_str(),
            ok!(ImportFlags::from_raw(0xdead_0000_0000_0001))
        ));
        ok!(b.destroy_notify(imp));
    }
    Ok(())
}

/// IPV350: "every notify call → 207000". Read: the SoC check precedes handle validation, so
/// even calls with garbage handles answer 207000 (there is no valid handle to give them).
fn ipv350<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    fails!(
        b.create_notify(0, CreateFlags::empty()),
        Error::FeatureNotSupport
    );
    fails!(
        b.create_notify(0, CreateFlags::DEVICE_USE_ONLY),
        Error::FeatureNotSupport
    );
    let key = ExportKey::encode(&KeyFields {
        server: 0,
        device: 0,
        id: 1,
        generation: 1,
        nonce: [7; 16],
    });
    fails!(
        b.import_by_key(0, key.as_str(), ImportFlags::empty()),
        Error::FeatureNotSupport
    );
    let s = ok!(b.create_stream(0));
    let h = RawNotify(1);
    for h in std::iter::once(h).chain(GARBAGE_NOTIFIES) {
        fails!(b.destroy_notify(h), Error::FeatureNotSupport);
        fails!(b.notify_info(h), Error::FeatureNotSupport);
        fails!(b.record(h, s), Error::FeatureNotSupport);
        fails!(b.wait_and_reset(h, s, secs(1)), Error::FeatureNotSupport);
        fails!(b.batch_reset(&[h]), Error::FeatureNotSupport);
        fails!(
            b.export_key(h, ExportFlags::empty()),
            Error::FeatureNotSupport
        );
        fails!(b.set_import_pids(h, &[1]), Error::FeatureNotSupport);
        fails!(
            b.set_import_server_pids(h, &[ServerPid { sdid: 0, pid: 1 }]),
            Error::FeatureNotSupport
        );
    }
    // HostOps' budget: "207000 notifies unsupported" (also what a driver without the
    // extension answers).
    fails!(b.notifies_free(0), Error::FeatureNotSupport);
    // Streams themselves are not notify calls and work.
    ok!(b.synchronize(s, at_most(std::time::Duration::from_secs(5))));
    ok!(b.destroy_stream(s, StreamDestroy::Drain));
    Ok(())
}

/// SoCs without IPC (Ascend950DT, Ascend310B): export, whitelist, import → 207000, in the
/// places the check order gives.
fn ipc_unsupported<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    fails!(
        b.export_key(n, ExportFlags::empty()),
        Error::FeatureNotSupport
    );
    fails!(
        b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION),
        Error::FeatureNotSupport
    );
    fails!(b.set_import_pids(n, &[1]), Error::FeatureNotSupport);
    // "SoC without IPC → 207000" comes before "107017" and "num == 0" for set-import-pid.
    let stale = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.destroy_notify(stale));
    fails!(b.set_import_pids(stale, &[1]), Error::FeatureNotSupport);
    fails!(b.set_import_pids(n, &[]), Error::FeatureNotSupport);
    // Inter-server: per entry, "SoC without inter-server support → 207000".
    fails!(
        b.set_import_server_pids(n, &[ServerPid { sdid: 1, pid: 1 }]),
        Error::FeatureNotSupport
    );
    // Import: "SoC without IPC → 207000" precedes the flag and key checks.
    let key = ExportKey::encode(&KeyFields {
        server: 0,
        device: 0,
        id: 0,
        generation: 1,
        nonce: [9; 16],
    });
    fails!(
        b.import_by_key(0, key.as_str(), ImportFlags::empty()),
        Error::FeatureNotSupport
    );
    fails!(
        b.import_by_key(0, "not a key", ImportFlags::empty()),
        Error::FeatureNotSupport
    );
    fails!(
        b.import_by_key(0, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS),
        Error::FeatureNotSupport
    );
    // The notify itself is fine.
    let s = ok!(b.create_stream(0));
    ok!(b.record(n, s));
    ok!(b.wait_and_reset(n, s, secs(5)));
    ok!(b.synchronize(s, at_most(std::time::Duration::from_secs(10))));
    Ok(())
}

/// IPC SoCs other than Ascend910_93: inter-server entries → 207000 (after the count and
/// handle checks).
fn inter_server_unsupported<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.export_key(n, ExportFlags::empty()));
    fails!(b.set_import_server_pids(n, &[]), Error::ParamInvalid);
    fails!(
        b.set_import_server_pids(n, &[ServerPid { sdid: 1, pid: 1 }]),
        Error::FeatureNotSupport
    );
    fails!(
        b.set_import_server_pids(
            n,
            &[ServerPid {
                sdid: 0,
                pid: std::process::id() as i32
            }]
        ),
        Error::FeatureNotSupport
    );
    // Plain whitelisting works.
    ok!(b.set_import_pids(n, &[std::process::id() as i32]));
    Ok(())
}

//! IPC within one process (SPEC §2, §3 export / set-import-pid / import rows): key format,
//! lifecycle codes, whitelist rules and limits, import errors, waiting only on the owner's
//! device, peer access enabled by the import itself, holder counting, inter-server entries. Importing one's own
//! exported key in-process stands in for a second process here; `mp.rs` does it for real.

use std::time::Duration;

use acl_notify_core::{
    CreateFlags, Error, ExportFlags, ExportKey, ImportFlags, KeyFields, Lifecycle, ServerPid,
};

use super::{case, inter_server, ipc};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, DEVICES, TestBackend};
use crate::util::{fill, secs, sync_ok};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("ipc::export_key_format", ipc, export_key_format),
        case("ipc::export_rules", ipc, export_rules),
        case("ipc::set_import_pids_rules", ipc, set_import_pids_rules),
        case("ipc::import_errors", ipc, import_errors),
        case("ipc::import_whitelisted", ipc, import_whitelisted),
        case("ipc::import_open", ipc, import_open),
        case(
            "ipc::other_device_record_only",
            ipc,
            other_device_record_only,
        ),
        case(
            "ipc::import_enables_peer_access_itself",
            ipc,
            import_enables_peer_access_itself,
        ),
        case("ipc::holder_counting", ipc, holder_counting),
        case("ipc::inter_server_rules", inter_server, inter_server_rules),
    ]
}

const LONG: Duration = Duration::from_secs(10);

fn me<B: TestBackend>(ctx: &Ctx<'_, B>) -> i32 {
    ctx.b.bare_tgid()
}

/// PIDs that no test process has (for counting whitelist entries).
fn fake_pids(from: i32, n: i32) -> Vec<i32> {
    (from..from + n).collect()
}

/// A key is at most 64 printable characters (ours: exactly 64, the core's `an2-` format) and
/// names the notify: its id, device and server.
fn export_key_format<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(1, CreateFlags::empty()));
    let info = ok!(b.notify_info(n));
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    let text = key.as_str();
    ensure_eq!(text.len(), 64, "key length ({text:?})");
    ensure!(
        text.bytes().all(|c| c.is_ascii_graphic()),
        "key has non-printable characters: {text:?}"
    );
    ensure_eq!(
        ExportKey::parse(text.as_bytes()).ok(),
        Some(key),
        "the key re-parsed by the core"
    );
    let Some(f) = key.fields() else {
        return Err(format!(
            "export_key gave a key with no readable fields: {key:?}"
        ));
    };
    ensure_eq!(u32::from(f.id), info.id, "the key's id field");
    ensure_eq!(u32::from(f.device), 1, "the key's device field");
    ensure_eq!(u32::from(f.server), 0, "the key's server field");
    ensure_eq!(
        ok!(b.notify_info(n)).state,
        Lifecycle::Exported,
        "state after export"
    );

    let m = ok!(b.create_notify(1, CreateFlags::empty()));
    let key2 = ok!(b.export_key(m, ExportFlags::DISABLE_PID_VALIDATION));
    ensure_eq!(
        ok!(b.notify_info(m)).state,
        Lifecycle::ExportedOpen,
        "state after export with DISABLE_PID_VALIDATION"
    );
    ensure!(key2 != key, "two notifies exported with the same key");
    ensure!(
        key2.fields().map(|k| k.nonce) != Some(f.nonce),
        "two exports share a nonce (it must come from the OS's randomness)"
    );
    ensure!(f.nonce != [0; 16], "all-zero nonce");
    Ok(())
}

/// Export again → 507000 (either flag); export of an imported handle → 507000; bad flags →
/// 107000 from `ExportFlags::from_raw`, before any backend sees them.
fn export_rules<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    fails!(b.export_key(n, ExportFlags::empty()), Error::InternalError);
    fails!(
        b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION),
        Error::InternalError
    );
    // A bad flag word never reaches the backend: `from_raw` refuses it where it comes in
    // (the C ABI checks it before the export state, SPEC §3).
    ensure_eq!(
        ExportFlags::from_raw(1).err(),
        Some(Error::ParamInvalid),
        "ExportFlags::from_raw(1)"
    );
    ok!(b.set_import_pids(n, &[me(ctx)]));
    fails!(b.export_key(n, ExportFlags::empty()), Error::InternalError);
    let imp = ok!(b.import_by_key(0, key.as_str(), ImportFlags::empty()));
    fails!(
        b.export_key(imp, ExportFlags::empty()),
        Error::InternalError
    );
    fails!(
        b.export_key(imp, ExportFlags::DISABLE_PID_VALIDATION),
        Error::InternalError
    );
    let m = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.export_key(m, ExportFlags::DISABLE_PID_VALIDATION));
    fails!(b.export_key(m, ExportFlags::empty()), Error::InternalError);
    Ok(())
}

/// Whitelist rules in check order: num == 0 → 107000; not exported → 107000 [ours]; open
/// export or an importer → 207006; more than 64 in total → 207012; repeated calls add.
fn set_import_pids_rules<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    fails!(b.set_import_pids(n, &[3_000_000]), Error::ParamInvalid);
    fails!(b.set_import_pids(n, &[]), Error::ParamInvalid);
    ensure_eq!(
        ok!(b.notify_info(n)).state,
        Lifecycle::Created,
        "state after refused calls"
    );
    let key_n = ok!(b.export_key(n, ExportFlags::empty()));
    fails!(b.set_import_pids(n, &[]), Error::ParamInvalid);
    ensure_eq!(
        ok!(b.notify_info(n)).state,
        Lifecycle::Exported,
        "state before whitelisting"
    );
    ok!(b.set_import_pids(n, &fake_pids(3_000_000, 32)));
    ensure_eq!(
        ok!(b.notify_info(n)).state,
        Lifecycle::Whitelisted,
        "state after whitelisting"
    );
    ok!(b.set_import_pids(n, &fake_pids(3_000_100, 31)));
    // 63 so far; the 64th is fine, a 65th is over the limit: the calls add up.
    ok!(b.set_import_pids(n, &[me(ctx)]));
    fails!(b.set_import_pids(n, &[3_000_500]), Error::OverLimit);
    fails!(
        b.set_import_pids(n, &fake_pids(3_000_600, 2)),
        Error::OverLimit
    );
    // The last PID added (ours), in a later call, is on the list: importing works.
    ok!(b.import_by_key(0, key_n.as_str(), ImportFlags::empty()));
    let w = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(w, ExportFlags::empty()));
    ok!(b.set_import_pids(w, &[3_000_000]));
    fails!(
        b.import_by_key(0, key.as_str(), ImportFlags::empty()),
        Error::NoPermission
    );
    ok!(b.set_import_pids(w, &[me(ctx)]));
    let imp = ok!(b.import_by_key(0, key.as_str(), ImportFlags::empty()));
    fails!(b.set_import_pids(imp, &[3_000_001]), Error::NoPermission);

    // More than 64 in one call is refused whole, after the state checks (a notify not yet
    // exported is 107000 however many PIDs are named), and nothing of it is applied.
    let big = ok!(b.create_notify(0, CreateFlags::empty()));
    fails!(
        b.set_import_pids(big, &fake_pids(3_001_000, 65)),
        Error::ParamInvalid
    );
    let key_big = ok!(b.export_key(big, ExportFlags::empty()));
    fails!(
        b.set_import_pids(big, &fake_pids(3_001_000, 65)),
        Error::OverLimit
    );
    fails!(b.set_import_pids(big, &[me(ctx); 65]), Error::OverLimit);
    ensure_eq!(
        ok!(b.notify_info(big)).state,
        Lifecycle::Exported,
        "state after a refused 65-PID call"
    );
    ok!(b.set_import_pids(big, &fake_pids(3_001_000, 64)));
    fails!(
        b.import_by_key(0, key_big.as_str(), ImportFlags::empty()),
        Error::NoPermission
    );

    let open = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.export_key(open, ExportFlags::DISABLE_PID_VALIDATION));
    fails!(b.set_import_pids(open, &[me(ctx)]), Error::NoPermission);
    fails!(b.set_import_pids(open, &[]), Error::ParamInvalid);
    ensure_eq!(
        ok!(b.notify_info(open)).state,
        Lifecycle::ExportedOpen,
        "state of an open export after a refused whitelist"
    );
    Ok(())
}

/// Import errors: malformed key → 107000 [ours]; forged or stale key → 107017; bad flags →
/// 107000; no such device → 107001; not whitelisted → 207006.
fn import_errors<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let none = ImportFlags::empty();
    for bad in ["", "hello", &"a".repeat(64), &"a".repeat(65)] {
        fails!(b.import_by_key(0, bad, none), Error::ParamInvalid);
    }
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    // One nonce digit changed: the checksum no longer matches → malformed.
    let mut bytes = key.as_str().as_bytes().to_vec();
    bytes[30] = if bytes[30] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(bytes).map_err(|e| e.to_string())?;
    fails!(b.import_by_key(0, &flipped, none), Error::ParamInvalid);
    // Truncated and padded keys.
    fails!(
        b.import_by_key(0, &key.as_str()[..63], none),
        Error::ParamInvalid
    );
    fails!(
        b.import_by_key(0, &format!("{}x", key.as_str()), none),
        Error::ParamInvalid
    );
    // Bad flags are refused where the word comes in (`from_raw`), before the key and the
    // device: no backend sees them.
    ensure_eq!(
        ImportFlags::from_raw(4).err(),
        Some(Error::ParamInvalid),
        "ImportFlags::from_raw(4)"
    );
    // Device before key lookup and whitelist (C: "no current device" comes before the key).
    fails!(
        b.import_by_key(DEVICES, key.as_str(), none),
        Error::InvalidDeviceId
    );
    // Not whitelisted (the list is empty): refused.
    fails!(b.import_by_key(0, key.as_str(), none), Error::NoPermission);
    ok!(b.set_import_pids(n, &[3_000_000]));
    fails!(b.import_by_key(0, key.as_str(), none), Error::NoPermission);

    // A well-formed key with the right id and generation but another nonce: no live notify has
    // that key. Reading: "key of a notify that no longer exists → 107017" covers a key that
    // names no live notify at all (a guessed key opens nothing).
    let Some(f) = key.fields() else {
        return Err(format!(
            "export_key gave a key with no readable fields: {key:?}"
        ));
    };
    let forged = ExportKey::encode(&KeyFields {
        nonce: f.nonce.map(|x| x ^ 0xa5),
        ..f
    });
    fails!(
        b.import_by_key(0, forged.as_str(), none),
        Error::InvalidHandle
    );
    // A key naming an id nobody holds.
    let unused = ExportKey::encode(&KeyFields {
        id: f.id ^ 0x40,
        ..f
    });
    fails!(
        b.import_by_key(0, unused.as_str(), none),
        Error::InvalidHandle
    );

    // The key of a destroyed notify → 107017, also after its id was reused.
    let m = ok!(b.create_notify(0, CreateFlags::empty()));
    let m_id = ok!(b.notify_info(m)).id;
    let key_m = ok!(b.export_key(m, ExportFlags::DISABLE_PID_VALIDATION));
    ok!(b.destroy_notify(m));
    fails!(
        b.import_by_key(0, key_m.as_str(), none),
        Error::InvalidHandle
    );
    let mut reused = false;
    for _ in 0..16 {
        let x = ok!(b.create_notify(0, CreateFlags::empty()));
        ok!(b.export_key(x, ExportFlags::DISABLE_PID_VALIDATION));
        if ok!(b.notify_info(x)).id == m_id {
            reused = true;
            break;
        }
    }
    ctx.note(format!("id {m_id} reused by a new open export: {reused}"));
    fails!(
        b.import_by_key(0, key_m.as_str(), none),
        Error::InvalidHandle
    );
    Ok(())
}

/// Whitelisted in-process import: the importer sees the owner's id, state Imported; a record
/// through either handle releases a wait through the other (same device).
fn import_whitelisted<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let id = ok!(b.notify_info(n)).id;
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    ok!(b.set_import_pids(n, &[me(ctx)]));
    let imp = ok!(b.import_by_key(0, key.as_str(), ImportFlags::empty()));
    ensure!(imp != n, "the imported handle equals the owner's handle");
    let info = ok!(b.notify_info(imp));
    ensure_eq!(
        info.id,
        id,
        "importer's id (SPEC: an importer gets the owner's id)"
    );
    ensure_eq!(info.state, Lifecycle::Imported, "importer's state");
    ensure_eq!(
        (info.device, info.owner_device),
        (0, 0),
        "(device, owner_device)"
    );
    ensure_eq!(
        ok!(b.notify_info(n)).state,
        Lifecycle::Whitelisted,
        "owner's state after the import"
    );
    let (s, w) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    ok!(b.wait_and_reset(n, w, secs(5)));
    ok!(b.record(imp, s));
    sync_ok(
        ctx,
        w,
        LONG,
        "owner's wait released by the importer's record",
    )?;
    ok!(b.wait_and_reset(imp, w, secs(5)));
    ok!(b.record(n, s));
    sync_ok(
        ctx,
        w,
        LONG,
        "importer's wait (same device) released by the owner's record",
    )?;
    // Two imports are two handles.
    let imp2 = ok!(b.import_by_key(0, key.as_str(), ImportFlags::empty()));
    ensure!(imp2 != imp, "two imports returned the same handle");
    ok!(b.destroy_notify(imp));
    fails!(b.destroy_notify(imp), Error::InvalidHandle);
    fails!(b.record(imp, s), Error::InvalidHandle);
    // The owner and the other importer are unaffected.
    ok!(b.record(imp2, s));
    ok!(b.wait_and_reset(n, w, secs(5)));
    sync_ok(
        ctx,
        w,
        LONG,
        "owner after one importer destroyed its handle",
    )?;
    Ok(())
}

/// `DISABLE_PID_VALIDATION`: anyone with the key imports, no whitelist needed.
fn import_open<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(2, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    let imp = ok!(b.import_by_key(2, key.as_str(), ImportFlags::empty()));
    let info = ok!(b.notify_info(imp));
    ensure_eq!(info.state, Lifecycle::Imported, "state");
    ensure_eq!(info.owner_device, 2, "owner_device");
    let s = ok!(b.create_stream(2));
    ok!(b.record(imp, s));
    ok!(b.wait_and_reset(n, s, secs(5)));
    sync_ok(ctx, s, LONG, "owner's wait after the importer's record")?;
    Ok(())
}

/// Import on another device (with ENABLE_PEER_ACCESS): the importer may record, not wait
/// (107000).
fn other_device_record_only<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    let imp = ok!(b.import_by_key(1, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS));
    let info = ok!(b.notify_info(imp));
    ensure_eq!(
        (info.device, info.owner_device),
        (1, 0),
        "(device, owner_device)"
    );
    let s1 = ok!(b.create_stream(1));
    fails!(b.wait_and_reset(imp, s1, secs(1)), Error::ParamInvalid);
    fails!(
        b.wait_and_reset(imp, s1, acl_notify_core::Timeout::Forever),
        Error::ParamInvalid
    );
    let w = ok!(b.create_stream(0));
    ok!(b.wait_and_reset(n, w, secs(5)));
    ok!(b.record(imp, s1));
    sync_ok(
        ctx,
        w,
        LONG,
        "owner's wait released by a record on another device",
    )?;
    sync_ok(
        ctx,
        s1,
        LONG,
        "the importer's stream (its refused waits enqueued nothing)",
    )?;
    Ok(())
}

/// Devices that differ need peer access, and the import enables it itself, as the real driver
/// does when the physical devices differ (hicann/runtime `npu_driver.cc`,
/// `NpuDriver::EnableP2PNotify`): without ENABLE_PEER_ACCESS and without
/// `enable_peer_access` the import still succeeds, on the importer's device. Enabling peer
/// access towards the device itself is refused (100000); the same device needs nothing.
fn import_enables_peer_access_itself<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    let none = ImportFlags::empty();
    // CANN's ACL layer refuses it first (100000, hicann/runtime `src/acl/aclrt_impl/
    // memory.cpp`); the simulator's own call says the same.
    fails!(b.enable_peer_access(2, 2), Error::InvalidParam);
    for dev in [2, 3] {
        let imp = ok!(b.import_by_key(dev, key.as_str(), none));
        ensure_eq!(
            ok!(b.notify_info(imp)).device,
            dev,
            "device of the import without peer access"
        );
    }
    // Enabled beforehand, or asked for by the flag: the same.
    ok!(b.enable_peer_access(1, 0));
    ok!(b.import_by_key(1, key.as_str(), none));
    ok!(b.import_by_key(1, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS));
    ok!(b.import_by_key(0, key.as_str(), none));
    Ok(())
}

/// The id is released only when the last holder destroyed its handle: after the owner's
/// destroy, the importer's handle still works and the id is still taken.
fn holder_counting<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let max = ctx.soc.max_notifies();
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let id = ok!(b.notify_info(n)).id;
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    let imp = ok!(b.import_by_key(0, key.as_str(), ImportFlags::empty()));
    ok!(b.destroy_notify(n));
    fails!(b.notify_info(n), Error::InvalidHandle);
    let info = ok!(b.notify_info(imp));
    ensure_eq!(info.id, id, "importer's id after the owner destroyed");
    let (s, w) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    ok!(b.record(imp, s));
    ok!(b.wait_and_reset(imp, w, secs(5)));
    sync_ok(
        ctx,
        w,
        LONG,
        "record/wait through the importer after the owner's destroy",
    )?;
    // The recording stream too: until it has retired its record, that task's reference keeps
    // the id taken (a busy machine can leave its worker between the two for a while).
    sync_ok(ctx, s, LONG, "the importer's record")?;
    let others = fill(ctx, 0, max)?;
    ensure_eq!(
        others.len() as u32,
        max - 1,
        "notifies creatable while an importer still holds one (its id must stay taken)"
    );
    ok!(b.destroy_notify(imp));
    let last = ok!(b.create_notify(0, CreateFlags::empty()));
    ensure_eq!(
        ok!(b.notify_info(last)).id,
        id,
        "id of the one notify creatable after the last holder destroyed"
    );
    fails!(
        b.create_notify(0, CreateFlags::empty()),
        Error::NoNotifyResource
    );
    Ok(())
}

/// Ascend910_93 inter-server entries: count and handle checks, lifecycle checks as
/// set-import-pid, a shared 64-entry limit, and "applied entries stay" on failure.
fn inter_server_rules<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    // Entries for processes of servers 1 and 2 (device 0), by their sdids.
    let e = |server, pid| ServerPid {
        sdid: crate::util::sdid(server, 0),
        pid,
    };
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    fails!(b.set_import_server_pids(n, &[]), Error::ParamInvalid);
    // Not exported: "then as SetImportPid" → 107000.
    fails!(
        b.set_import_server_pids(n, &[e(1, 3_000_000)]),
        Error::ParamInvalid
    );
    ok!(b.export_key(n, ExportFlags::empty()));
    ok!(b.set_import_server_pids(n, &[e(1, 3_000_000)]));
    ensure_eq!(ok!(b.notify_info(n)).state, Lifecycle::Whitelisted, "state");
    // Both kinds of entry count towards one limit of 64.
    ok!(b.set_import_pids(n, &fake_pids(3_000_100, 62)));
    ok!(b.set_import_server_pids(n, &[e(2, 3_000_001)]));
    fails!(
        b.set_import_server_pids(n, &[e(1, 3_000_002)]),
        Error::OverLimit
    );
    fails!(b.set_import_pids(n, &[3_000_003]), Error::OverLimit);

    // 65 entries in one call: the first 64 are applied, then 207012; they stay.
    let m = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.export_key(m, ExportFlags::empty()));
    let many: Vec<_> = (0..65).map(|i| e(1, 3_100_000 + i)).collect();
    fails!(b.set_import_server_pids(m, &many), Error::OverLimit);
    ensure_eq!(
        ok!(b.notify_info(m)).state,
        Lifecycle::Whitelisted,
        "state after a partly applied inter-server call"
    );
    fails!(b.set_import_pids(m, &[3_200_000]), Error::OverLimit);

    let open = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.export_key(open, ExportFlags::DISABLE_PID_VALIDATION));
    fails!(
        b.set_import_server_pids(open, &[e(1, 3_000_000)]),
        Error::NoPermission
    );
    Ok(())
}

//! Multi-process cases with real processes: the case's child process coordinates and starts
//! role processes (re-executions of the test binary with `ACL_NOTIFY_CONF_ROLE`), all on the
//! trial's namespace; keys, PIDs and go-signals travel through files in the trial directory,
//! as in SPEC §7. Every wait is bounded; a role still running at the end is killed.

use std::time::{Duration, Instant};

use acl_notify_core::{
    CreateFlags, Error, ExportFlags, ImportFlags, ServerPid, StreamStatus, Timeout,
};

use super::{inter_server, ipc};
use crate::check::CaseResult;
use crate::harness::{Case, Ctx, Role, TestBackend};
use crate::util::{FileCheck, Probe, at_most, fill, pause, secs, sync_err, sync_ok};

/// How long a process of a multi-process case waits for a file from another, or for a role to
/// end: of the time the trial's processes could run (`harness::Bound`), a hang guard
/// (the answers come in milliseconds), not wall time, which a starved or paused trial ran out.
pub(super) const T: Duration = Duration::from_secs(20);
const LONG: Duration = Duration::from_secs(10);
/// How long a coordinator waits for a `fill_check` role (a fill of up to 65,535 ids per
/// device), in the same time: a hang guard. A role that waits for the coordinator's next file
/// across such a check waits [`T`] more than this: with only `T` it gave up first when the
/// check took over 20 s (a paused trial, seen under `cargo xtask test`'s load, when these were
/// wall time) though the coordinator still had time.
const FILL: Duration = Duration::from_secs(40);

/// A multi-process case (a longer limit than one process's, in the time its processes could
/// run: a hang guard).
pub(super) fn mp<B>(
    name: &'static str,
    applies: fn(acl_notify_core::Soc) -> bool,
    run: fn(&Ctx<'_, B>) -> CaseResult,
) -> Case<B> {
    Case {
        name,
        applies,
        timeout: Duration::from_secs(90),
        sim_only: false,
        run,
    }
}

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        mp("mp::two_process_whitelist", ipc, two_process_whitelist),
        mp("mp::two_process_open", ipc, two_process_open),
        mp("mp::not_whitelisted_refused", ipc, not_whitelisted_refused),
        mp("mp::recycled_pid_refused", ipc, recycled_pid_refused),
        mp("mp::sigkill_owner_mid_wait", ipc, sigkill_owner_mid_wait),
        mp(
            "mp::sigkill_importer_mid_record",
            ipc,
            sigkill_importer_mid_record,
        ),
        mp("mp::holder_counting", ipc, holder_counting),
        mp(
            "mp::import_after_the_owner_destroyed",
            ipc,
            import_after_the_owner_destroyed,
        ),
        mp(
            "mp::import_after_the_owner_died",
            ipc,
            import_after_the_owner_died,
        ),
        mp("mp::inter_server", inter_server, inter_server_flow),
        mp("mp::ping_pong_loses_nothing", ipc, ping_pong),
        Case {
            sim_only: true,
            ..mp("mp::start_time_mismatch_refused", ipc, start_time_mismatch)
        },
    ]
}

pub fn roles<B: TestBackend>() -> Vec<Role<B>> {
    vec![
        Role {
            name: "flow_importer",
            run: flow_importer,
        },
        Role {
            name: "refused_then_admitted",
            run: refused_then_admitted,
        },
        Role {
            name: "recycle_first",
            run: recycle_first,
        },
        Role {
            name: "recycle_second",
            run: recycle_second,
        },
        Role {
            name: "owner_killed",
            run: owner_killed,
        },
        Role {
            name: "survivor_importer",
            run: survivor_importer,
        },
        Role {
            name: "recorder_killed",
            run: recorder_killed,
        },
        Role {
            name: "holder",
            run: holder,
        },
        Role {
            name: "gone_owner",
            run: gone_owner,
        },
        Role {
            name: "gone_holder",
            run: gone_holder,
        },
        Role {
            name: "fill_check",
            run: fill_check,
        },
        Role {
            name: "server1_importer",
            run: server1_importer,
        },
        Role {
            name: "pong",
            run: pong,
        },
    ]
}

pub(super) fn parse_pid(s: &str) -> Result<i32, String> {
    s.trim()
        .parse()
        .map_err(|e| format!("bad pid {s:?} in file: {e}"))
}

// ---------------------------------------------------------------------------------------------
// SPEC §7: the reference two-process flow.

/// SPEC §7 with whitelist: A (this process, device 2) creates, exports, whitelists B's PID and
/// waits; B (device 3, peer access enabled) imports, "writes data", records. A's stream stays
/// blocked until B records, and the task after the wait sees B's data.
fn two_process_whitelist<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    two_process(ctx, "whitelist")
}

/// SPEC §7 without whitelist: export with DISABLE_PID_VALIDATION, no PID exchange; B imports
/// with ENABLE_PEER_ACCESS instead of enabling peer access itself.
fn two_process_open<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    two_process(ctx, "open")
}

fn two_process<B: TestBackend>(ctx: &Ctx<'_, B>, mode: &str) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(2));
    ok!(b.can_access_peer(2, 3));
    if mode == "whitelist" {
        ok!(b.enable_peer_access(2, 3));
    }
    let n = ok!(b.create_notify(2, CreateFlags::empty()));
    let flags = if mode == "whitelist" {
        ExportFlags::empty()
    } else {
        ExportFlags::DISABLE_PID_VALIDATION
    };
    let key = ok!(b.export_key(n, flags));
    let mut importer = ctx.spawn_role("flow_importer", mode, &[])?;
    if mode == "whitelist" {
        let pid = parse_pid(&ctx.take_from("importer.pid", T, &mut importer)?)?;
        ensure_eq!(
            pid,
            importer.pid,
            "the importer's bare_tgid (must be its process id)"
        );
        ok!(b.set_import_pids(n, &[pid]));
    }
    ctx.put("key", key.as_str())?;
    let data = FileCheck::new(ctx.dir.join("data"));
    let p = Probe::new();
    ok!(b.wait_and_reset(n, s, Timeout::Forever));
    ok!(b.launch_host_func(s, data.call()));
    ok!(b.launch_host_func(s, p.call()));
    // B has imported and written its data, but not recorded yet: A stays blocked.
    ctx.take_from("imported", T, &mut importer)?;
    pause(300);
    ensure_eq!(
        p.count(),
        0,
        "owner's stream got past its wait before the importer recorded"
    );
    ensure_eq!(
        ok!(b.query(s)),
        StreamStatus::NotReady,
        "owner's stream status"
    );
    ctx.put("go", "")?;
    sync_ok(ctx, s, LONG, "owner's stream after the importer's record")?;
    ensure_eq!(
        data.seen(),
        1,
        "the task after the wait saw the importer's data (1 = present, 2 = absent, 0 = not run)"
    );
    importer.wait_ok(T)?;
    ok!(b.destroy_notify(n));
    Ok(())
}

fn flow_importer<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let whitelist = ctx.arg == "whitelist";
    let s = ok!(b.create_stream(3));
    if whitelist {
        ok!(b.enable_peer_access(3, 2));
        ctx.put("importer.pid", &b.bare_tgid().to_string())?;
    }
    let key = ctx.take("key", T)?;
    let flags = if whitelist {
        ImportFlags::empty()
    } else {
        ImportFlags::ENABLE_PEER_ACCESS
    };
    let imp = ok!(b.import_by_key(3, key.trim(), flags));
    let info = ok!(b.notify_info(imp));
    ensure_eq!(
        (info.device, info.owner_device),
        (3, 2),
        "(device, owner_device) of the import"
    );
    // Waiting is for the owner's device only.
    fails!(b.wait_and_reset(imp, s, secs(1)), Error::ParamInvalid);
    std::fs::write(ctx.dir.join("data"), "written by the importer")
        .map_err(|e| format!("writing data: {e}"))?;
    ctx.put("imported", "")?;
    ctx.take("go", T)?;
    ok!(b.record(imp, s));
    sync_ok(ctx, s, LONG, "importer's record")?;
    ok!(b.destroy_notify(imp));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Whitelist enforcement across processes.

/// A process not on the whitelist is refused (207006); once its PID is added (repeated calls
/// add), it is admitted.
fn not_whitelisted_refused<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    // Someone else (this process) is on the list.
    ok!(b.set_import_pids(n, &[b.bare_tgid()]));
    let mut r = ctx.spawn_role("refused_then_admitted", "", &[])?;
    let pid = parse_pid(&ctx.take_from("r.pid", T, &mut r)?)?;
    ctx.put("key", key.as_str())?;
    ctx.take_from("r.refused", T, &mut r)?;
    ok!(b.set_import_pids(n, &[pid]));
    let s = ok!(b.create_stream(0));
    ok!(b.wait_and_reset(n, s, secs(15)));
    ctx.put("r.added", "")?;
    sync_ok(
        ctx,
        s,
        Duration::from_secs(20),
        "owner's wait for the admitted importer",
    )?;
    r.wait_ok(T)
}

fn refused_then_admitted<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    ctx.put("r.pid", &b.bare_tgid().to_string())?;
    let key = ctx.take("key", T)?;
    fails!(
        b.import_by_key(0, key.trim(), ImportFlags::empty()),
        Error::NoPermission
    );
    ctx.put("r.refused", "")?;
    ctx.take("r.added", T)?;
    let imp = ok!(b.import_by_key(0, key.trim(), ImportFlags::empty()));
    let s = ok!(b.create_stream(0));
    ok!(b.record(imp, s));
    sync_ok(ctx, s, LONG, "record")?;
    ok!(b.destroy_notify(imp));
    Ok(())
}

/// A whitelist entry is for one process, not one PID number: a whitelisted child imports, exits;
/// a new process with the SAME PID (forced through /proc/sys/kernel/ns_last_pid where that is
/// writable, i.e. with CAP_CHECKPOINT_RESTORE or root) is refused. Where the PID cannot be
/// recycled, a new process (another PID) is shown to be refused, and the note says so.
fn recycled_pid_refused<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    ctx.put("key", key.as_str())?;
    let first_started = Instant::now();
    let mut first = ctx.spawn_role("recycle_first", "", &[])?;
    let pid1 = parse_pid(&ctx.take_from("first.pid", T, &mut first)?)?;
    ensure_eq!(pid1, first.pid, "bare_tgid of the first process");
    ok!(b.set_import_pids(n, &[pid1]));
    ctx.put("first.go", "")?;
    first.wait_ok(T)?;

    // A process's start time (what the whitelist remembers besides the PID) has clock-tick
    // resolution (USER_HZ, 10 ms). A real recycle happens after the PID space wrapped, long
    // after; here it takes milliseconds, so keep the two start times a few ticks apart to
    // model it (otherwise the two processes are indistinguishable to any start-time check).
    let gap = Duration::from_millis(50);
    if let Some(rest) = gap.checked_sub(first_started.elapsed()) {
        std::thread::sleep(rest);
    }
    // Start processes until one gets pid1 again.
    let mut chosen = None;
    let mut recycled = false;
    const LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";
    let last_pid = || {
        std::fs::read_to_string(LAST_PID)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
    };
    for _attempt in 0..200 {
        let high = last_pid();
        if std::fs::write(LAST_PID, (pid1 - 1).to_string()).is_err() {
            break;
        }
        let spawned = ctx.spawn_role("recycle_second", "", &[]);
        // Wind the counter forward again at once: until it passes `high` by itself, every
        // process started on the machine would get a recently freed PID, and other trials
        // running alongside count on a dead process's PID staying dead for a while.
        if let (Some(high), Some(now)) = (high, last_pid())
            && now < high
        {
            let _ = std::fs::write(LAST_PID, high.to_string());
        }
        let mut c = spawned?;
        if c.pid == pid1 {
            recycled = true;
            chosen = Some(c);
            break;
        }
        c.kill()?;
    }
    let mut second = match chosen {
        Some(c) => c,
        None => ctx.spawn_role("recycle_second", "", &[])?,
    };
    ctx.note(format!(
        "second process pid {} (first was {pid1}): {}",
        second.pid,
        if recycled {
            "PID recycled"
        } else {
            "could NOT recycle the PID here; showing only that a dead process's entry admits \
             no one else"
        }
    ));
    ctx.put(&format!("second.go.{}", second.pid), "")?;
    second.wait_ok(T)?;
    Ok(())
}

fn recycle_first<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    ctx.put("first.pid", &b.bare_tgid().to_string())?;
    ctx.take("first.go", T)?;
    let key = ctx.take("key", T)?;
    // Whitelisted and alive: admitted.
    let imp = ok!(b.import_by_key(0, key.trim(), ImportFlags::empty()));
    ok!(b.destroy_notify(imp));
    Ok(())
}

fn recycle_second<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    ctx.take(&format!("second.go.{}", b.bare_tgid()), T)?;
    let key = ctx.take("key", T)?;
    fails!(
        b.import_by_key(0, key.trim(), ImportFlags::empty()),
        Error::NoPermission
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Processes killed in mid-flight.

/// SIGKILL of the owner while its stream is blocked in a wait: the importer (same device) is
/// not harmed — its record and wait work and nothing hangs — and once it has destroyed its
/// handle, a fresh process finds every id of the device free again (the owner's too).
fn sigkill_owner_mid_wait<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let max = ctx.soc.max_notifies();
    let mut owner = ctx.spawn_role("owner_killed", "", &[])?;
    ctx.take_from("owner.key", T, &mut owner)?;
    let mut importer = ctx.spawn_role("survivor_importer", "", &[])?;
    ctx.take_from("imported", T, &mut importer)?;
    ctx.take_from("owner.waiting", T, &mut owner)?;
    pause(200);
    owner.kill()?;
    ctx.note("owner SIGKILLed while waiting");
    ctx.put("owner-dead", "")?;
    importer.wait_ok(Duration::from_secs(40))?;
    let mut fresh = ctx.spawn_role("fill_check", &format!("0={max}"), &[])?;
    fresh.wait_ok(FILL)
}

fn owner_killed<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    // Notifies only this process holds: they must be reclaimed after its death.
    for _ in 0..10 {
        ok!(b.create_notify(0, CreateFlags::empty()));
    }
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    let s = ok!(b.create_stream(0));
    ctx.put("owner.key", key.as_str())?;
    ctx.take("imported", T)?;
    let p = Probe::new();
    ok!(b.wait_and_reset(n, s, Timeout::Forever));
    ok!(b.launch_host_func(s, p.call()));
    pause(100);
    ensure_eq!(p.count(), 0, "owner's wait ended without a record");
    ctx.put("owner.waiting", "")?;
    pause(60_000);
    Err("the owner was not killed".to_owned())
}

fn survivor_importer<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let key = ctx.take("owner.key", T)?;
    let imp = ok!(b.import_by_key(0, key.trim(), ImportFlags::empty()));
    ctx.put("imported", "")?;
    ctx.take("owner-dead", T)?;
    let (s, w) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    // The importer still holds a reference, so its handle stays valid.
    let t = Instant::now();
    ok!(b.record(imp, s));
    sync_ok(ctx, s, LONG, "the survivor's record after the owner died")?;
    // [ours] "no other process is harmed": the dead owner's queued wait must not swallow the
    // survivor's record.
    ok!(b.wait_and_reset(imp, w, secs(2)));
    sync_ok(
        ctx,
        w,
        LONG,
        "the survivor's wait after its own record (failure: the record was consumed by the \
         killed owner's queued wait, or the notify died with its owner)",
    )?;
    ctx.note(format!("survivor handoff done in {:.2?}", t.elapsed()));
    ok!(b.destroy_notify(imp));
    Ok(())
}

/// SIGKILL of an importer (on another device) while it records in a loop: the owner's later
/// waits time out (107020) within their timeout instead of hanging; the owner itself keeps
/// working; after the owner's destroy a fresh process finds every id free (the importer's
/// reference and its own notifies reclaimed).
fn sigkill_importer_mid_record<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let max = ctx.soc.max_notifies();
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    ctx.put("owner.key", key.as_str())?;
    let mut rec = ctx.spawn_role("recorder_killed", "", &[])?;
    ctx.take_from("recorder.ready", T, &mut rec)?;
    let s = ok!(b.create_stream(0));
    for _ in 0..3 {
        ok!(b.wait_and_reset(n, s, secs(5)));
    }
    sync_ok(
        ctx,
        s,
        Duration::from_secs(20),
        "waits fed by the recording importer",
    )?;
    rec.kill()?;
    ctx.note("importer SIGKILLed while recording");
    // At most one record can still be pending (they collapse), so of two waits at least one
    // times out — within its second, not never.
    let t = Instant::now();
    ok!(b.wait_and_reset(n, s, secs(1)));
    ok!(b.wait_and_reset(n, s, secs(1)));
    sync_err(
        ctx,
        s,
        LONG,
        Error::TaskTimeout,
        "two waits after the importer died",
    )?;
    // At least one timed out (a lower bound: a loaded machine makes it late, never early).
    ensure!(
        t.elapsed() >= Duration::from_millis(900),
        "two 1 s waits took {:.2?}",
        t.elapsed()
    );
    // The owner is unaffected.
    let r = ok!(b.create_stream(0));
    ok!(b.record(n, r));
    ok!(b.wait_and_reset(n, s, secs(5)));
    sync_ok(
        ctx,
        s,
        LONG,
        "the owner's own record/wait after the importer died",
    )?;
    // The record's stream holds the notify until its worker has dropped the finished task:
    // synchronize it too, or the id may still be taken when the fresh process counts.
    sync_ok(ctx, r, LONG, "the owner's record stream")?;
    ok!(b.destroy_notify(n));
    let mut fresh = ctx.spawn_role("fill_check", &format!("0={max},1={max}"), &[])?;
    fresh.wait_ok(FILL)
}

fn recorder_killed<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let key = ctx.take("owner.key", T)?;
    for _ in 0..5 {
        ok!(b.create_notify(0, CreateFlags::empty()));
    }
    ok!(b.create_notify(1, CreateFlags::empty()));
    let imp = ok!(b.import_by_key(1, key.trim(), ImportFlags::ENABLE_PEER_ACCESS));
    let s = ok!(b.create_stream(1));
    ctx.put("recorder.ready", "")?;
    // Records until the coordinator kills it; a hang guard in the time the trial could run.
    let mut watch = crate::harness::Bound::trial(Duration::from_secs(60));
    while watch.step().is_ok() {
        ok!(b.record(imp, s));
        ok!(b.synchronize(s, at_most(LONG)));
        pause(1);
    }
    Err("the recorder was not killed".to_owned())
}

// ---------------------------------------------------------------------------------------------
// Holder counting across processes.

/// The owner destroys while another process still holds an import: the importer's handle keeps
/// working and the id stays taken (a fresh process can create only max − 1); after the
/// importer's destroy, a fresh process can create max again.
fn holder_counting<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let max = ctx.soc.max_notifies();
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    ctx.put("owner.key", key.as_str())?;
    let mut h = ctx.spawn_role("holder", "", &[])?;
    ctx.take_from("holder.imported", T, &mut h)?;
    ok!(b.destroy_notify(n));
    ctx.put("owner-destroyed", "")?;
    ctx.take_from("holder.still-works", T, &mut h)?;
    let mut f = ctx.spawn_role("fill_check", &format!("0={}", max - 1), &[])?;
    f.wait_ok(FILL)?;
    ctx.put("release", "")?;
    ctx.take_from("holder.released", T, &mut h)?;
    let mut f = ctx.spawn_role("fill_check", &format!("0={max}"), &[])?;
    f.wait_ok(FILL)?;
    ctx.put("exit", "")?;
    h.wait_ok(T)
}

fn holder<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let key = ctx.take("owner.key", T)?;
    let imp = ok!(b.import_by_key(0, key.trim(), ImportFlags::empty()));
    let id = ok!(b.notify_info(imp)).id;
    ctx.put("holder.imported", "")?;
    ctx.take("owner-destroyed", T)?;
    ensure_eq!(
        ok!(b.notify_info(imp)).id,
        id,
        "importer's id after the owner destroyed"
    );
    let (s, w) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    ok!(b.record(imp, s));
    ok!(b.wait_and_reset(imp, w, secs(5)));
    sync_ok(
        ctx,
        w,
        LONG,
        "record/wait through the import after the owner's destroy",
    )?;
    ctx.put("holder.still-works", "")?;
    // The coordinator runs a fill check before each of these files.
    ctx.take("release", FILL + T)?;
    ok!(b.destroy_notify(imp));
    ctx.put("holder.released", "")?;
    ctx.take("exit", FILL + T)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Importing once the owner has let go.

/// The owner destroys its notify while another process still holds an import of it: the key
/// imports nothing any more (107017, SPEC §3's "key of a notify that no longer exists"; CANN's
/// owner destroy removes the shared id the key names), for a process that never held it and
/// for the importer alike, while the import already held keeps working (SPEC §2: the notify
/// lives until its last holder destroyed it).
fn import_after_the_owner_destroyed<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    import_after_the_owner_is_gone(ctx, "destroy")
}

/// As [`import_after_the_owner_destroyed`], the owner SIGKILLed instead: a process that dies
/// is treated as having destroyed what it held (SPEC §2), so its death invalidates the key as
/// its destroy would.
fn import_after_the_owner_died<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    import_after_the_owner_is_gone(ctx, "die")
}

/// The owner (role `gone_owner`, device 0) exports openly; an importer (role `gone_holder`)
/// imports, and this process imports too (the key works while the owner holds the notify) and
/// lets go; then the owner destroys (`how` = `destroy`) or is killed (`die`), and this
/// process's import of the key is refused, as the holder's is.
fn import_after_the_owner_is_gone<B: TestBackend>(ctx: &Ctx<'_, B>, how: &str) -> CaseResult {
    let b = ctx.b;
    let none = ImportFlags::empty();
    let mut owner = ctx.spawn_role("gone_owner", how, &[])?;
    let key = ctx.take_from("owner.key", T, &mut owner)?;
    let mut holder = ctx.spawn_role("gone_holder", "", &[])?;
    ctx.take_from("holder.imported", T, &mut holder)?;
    let early = ok!(b.import_by_key(0, key.trim(), none));
    ok!(b.destroy_notify(early));
    if how == "destroy" {
        ctx.put("owner.go", "")?;
        ctx.take_from("owner.destroyed", T, &mut owner)?;
    } else {
        owner.kill()?;
        ctx.note("owner SIGKILLed");
    }
    fails!(b.import_by_key(0, key.trim(), none), Error::InvalidHandle);
    ctx.put("owner-gone", "")?;
    holder.wait_ok(Duration::from_secs(40))?;
    if how == "destroy" {
        ctx.put("owner.exit", "")?;
        owner.wait_ok(T)?;
    }
    Ok(())
}

/// Role: creates a notify on device 0 and exports it openly (the key in `owner.key`); with
/// argument `destroy` it destroys it when told (`owner.go`, then `owner.destroyed`) and stays
/// alive until `owner.exit`; with `die` it waits to be killed.
fn gone_owner<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::DISABLE_PID_VALIDATION));
    ctx.put("owner.key", key.as_str())?;
    if ctx.arg != "destroy" {
        pause(60_000);
        return Err("the owner was not killed".to_owned());
    }
    ctx.take("owner.go", T)?;
    ok!(b.destroy_notify(n));
    ctx.put("owner.destroyed", "")?;
    ctx.take("owner.exit", T + LONG)?;
    Ok(())
}

/// Role: imports the owner's key on the owner's device; once the owner is gone
/// (`owner-gone`), its own import of the key again is refused (107017), while the handle it
/// holds keeps its id and its records still release its waits; then it destroys it.
fn gone_holder<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let key = ctx.take("owner.key", T)?;
    let imp = ok!(b.import_by_key(0, key.trim(), ImportFlags::empty()));
    let id = ok!(b.notify_info(imp)).id;
    ctx.put("holder.imported", "")?;
    ctx.take("owner-gone", T)?;
    fails!(
        b.import_by_key(0, key.trim(), ImportFlags::empty()),
        Error::InvalidHandle
    );
    ensure_eq!(
        ok!(b.notify_info(imp)).id,
        id,
        "the held import's id after the owner was gone"
    );
    let (s, w) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    ok!(b.record(imp, s));
    ok!(b.wait_and_reset(imp, w, secs(5)));
    sync_ok(
        ctx,
        w,
        LONG,
        "record/wait through the held import after the owner was gone",
    )?;
    sync_ok(ctx, s, LONG, "the held import's record")?;
    ok!(b.destroy_notify(imp));
    fails!(b.destroy_notify(imp), Error::InvalidHandle);
    Ok(())
}

/// Role: for each `device=count` in the argument, the device must give exactly `count`
/// notifies, then 207009; everything created is destroyed again before exiting.
fn fill_check<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    for item in ctx.arg.split(',') {
        let (dev, want) = item
            .split_once('=')
            .ok_or_else(|| format!("bad fill_check argument {item:?}"))?;
        let dev: u32 = dev.parse().map_err(|e| format!("{dev:?}: {e}"))?;
        let want: u32 = want.parse().map_err(|e| format!("{want:?}: {e}"))?;
        let v = fill(ctx, dev, ctx.soc.max_notifies())?;
        if v.len() as u32 != want {
            // The exhausted device's own message says who holds its ids: keep it with the
            // failure (a rare miss here is otherwise hard to explain after the fact).
            let why = match ctx.b.create_notify(dev, CreateFlags::empty()) {
                Err(e) => e.to_string(),
                Ok(_) => "(one more create succeeded)".to_owned(),
            };
            let _ = crate::util::destroy_all(ctx, &v);
            ensure_eq!(
                v.len() as u32,
                want,
                "notifies a fresh process can create on device {dev} (ids of dead or \
                 destroyed holders must be reclaimed; live holders' ids must not); the device \
                 says: {why}"
            );
        }
        crate::util::destroy_all(ctx, &v)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Inter-server (SuperPod) whitelists.

/// Ascend910_93: an importer on another server (ACL_NOTIFY_SIM_SERVER_ID=1) is not covered by
/// a same-server PID entry (207006) and is admitted by an inter-server (sdid, pid) entry, the
/// sdid the importer read for the device it imports on and sent beside its PID.
/// The import passes ENABLE_PEER_ACCESS as CANN's samples do (an import enables peer access
/// itself since the implicit-P2P change, so the flag no longer decides the outcome).
fn inter_server_flow<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    let mut r = ctx.spawn_role(
        "server1_importer",
        "",
        &[(acl_notify_sim::ENV_SERVER_ID, "1".to_owned())],
    )?;
    let pid = parse_pid(&ctx.take_from("s1.pid", T, &mut r)?)?;
    let sdid = ctx.take_from("s1.sdid", T, &mut r)?;
    let sdid: u32 = sdid
        .trim()
        .parse()
        .map_err(|_| format!("s1.sdid: {sdid:?}"))?;
    // A same-server entry with the importer's PID number.
    ok!(b.set_import_pids(n, &[pid]));
    ctx.put("key", key.as_str())?;
    ctx.take_from("s1.refused", T, &mut r)?;
    ok!(b.set_import_server_pids(n, &[ServerPid { sdid, pid }]));
    let s = ok!(b.create_stream(0));
    ok!(b.wait_and_reset(n, s, secs(15)));
    ctx.put("s1.added", "")?;
    sync_ok(
        ctx,
        s,
        Duration::from_secs(20),
        "owner's wait for the server-1 importer",
    )?;
    r.wait_ok(T)
}

fn server1_importer<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    ensure_eq!(
        b.server_id(),
        1,
        "server_id() with ACL_NOTIFY_SIM_SERVER_ID=1"
    );
    ctx.put("s1.pid", &b.bare_tgid().to_string())?;
    // The SuperPOD device id of the device it imports on (0), for the owner's entry.
    ctx.put("s1.sdid", &ok!(b.super_pod_device_id(0)).to_string())?;
    let key = ctx.take("key", T)?;
    fails!(
        b.import_by_key(0, key.trim(), ImportFlags::ENABLE_PEER_ACCESS),
        Error::NoPermission
    );
    ctx.put("s1.refused", "")?;
    ctx.take("s1.added", T)?;
    let imp = ok!(b.import_by_key(0, key.trim(), ImportFlags::ENABLE_PEER_ACCESS));
    ensure_eq!(
        ok!(b.notify_info(imp)).owner_server,
        0,
        "owner_server of the import"
    );
    let s = ok!(b.create_stream(0));
    ok!(b.record(imp, s));
    sync_ok(ctx, s, LONG, "record from server 1")?;
    ok!(b.destroy_notify(imp));
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Cross-process wake-ups lose nothing.

const ROUNDS: u32 = 300;

/// Two processes bounce a token ROUNDS times through two notifies, each waiting on the one it
/// owns and recording the other's import: every record is consumed by exactly one wait (none
/// times out), with wake-ups crossing the process boundary.
fn ping_pong<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let mine = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(mine, ExportFlags::DISABLE_PID_VALIDATION));
    ctx.put("a.key", key.as_str())?;
    let mut pong = ctx.spawn_role("pong", "", &[])?;
    let theirs = ctx.take_from("b.key", T, &mut pong)?;
    let imp = ok!(b.import_by_key(0, theirs.trim(), ImportFlags::empty()));
    let s = ok!(b.create_stream(0));
    let t = Instant::now();
    for _ in 0..ROUNDS {
        ok!(b.record(imp, s));
        ok!(b.wait_and_reset(mine, s, secs(5)));
    }
    sync_ok(ctx, s, Duration::from_secs(40), "ping side")?;
    ctx.note(format!(
        "{ROUNDS} cross-process round trips in {:.2?} ({:.1?} each)",
        t.elapsed(),
        t.elapsed() / ROUNDS
    ));
    pong.wait_ok(T)
}

fn pong<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let mine = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(mine, ExportFlags::DISABLE_PID_VALIDATION));
    let theirs = ctx.take("a.key", T)?;
    let imp = ok!(b.import_by_key(0, theirs.trim(), ImportFlags::empty()));
    let s = ok!(b.create_stream(0));
    for _ in 0..ROUNDS {
        ok!(b.wait_and_reset(mine, s, secs(5)));
        ok!(b.record(imp, s));
    }
    ctx.put("b.key", key.as_str())?;
    sync_ok(ctx, s, Duration::from_secs(40), "pong side")?;
    Ok(())
}

/// Simulator only (its `set_import_pid_with_start_time` test hook): a whitelist entry with the
/// importer's PID but another start time — what a recycled PID looks like — does not admit
/// the live process with that PID (207006); the real entry then does.
fn start_time_mismatch<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let sim = (b as &dyn std::any::Any)
        .downcast_ref::<acl_notify_sim::Sim>()
        .ok_or("this case needs the simulator backend")?;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    let mut r = ctx.spawn_role("refused_then_admitted", "", &[])?;
    let pid = parse_pid(&ctx.take_from("r.pid", T, &mut r)?)?;
    // Start time 1 tick after boot: certainly not this child's.
    ok!(sim.set_import_pid_with_start_time(n, pid, 1));
    ctx.put("key", key.as_str())?;
    ctx.take_from("r.refused", T, &mut r)?;
    ok!(b.set_import_pids(n, &[pid]));
    let s = ok!(b.create_stream(0));
    ok!(b.wait_and_reset(n, s, secs(15)));
    ctx.put("r.added", "")?;
    sync_ok(
        ctx,
        s,
        Duration::from_secs(20),
        "owner's wait for the admitted importer",
    )?;
    r.wait_ok(T)
}

//! **[ours]** Errors that explain themselves (issue #8): the text of a wait timeout (107020), a
//! refused import (207006) and an exhausted device (207009) names the notify id, the device,
//! the owner and whether it is alive, the whitelisted PIDs and which are alive, who recorded
//! last, and who holds references or owns the ids. On the simulator this is the error's
//! `Display`; on the driver it is what `aclGetRecentErrMsg()` said right after the failing call
//! (carried in the driver's error), so both paths are checked.

use std::time::Duration;

use acl_notify_core::{CreateFlags, Error, ExportFlags, ImportFlags};

use super::{case, ipc, notify};
use crate::check::{CaseResult, code_of};
use crate::harness::{Case, Ctx, TestBackend};
use crate::util::{at_most, fill, secs, sync_ok};

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("diag::timeout_names_owner_whitelist_recorder", ipc, timeout),
        case(
            "diag::refused_import_names_owner_whitelist_recorder",
            ipc,
            refused,
        ),
        case("diag::exhausted_device_names_owners", small_pool, exhausted),
    ]
}

/// SoCs with notifies and at most 8192 per device (filling the device stays quick).
fn small_pool(s: acl_notify_core::Soc) -> bool {
    notify(s) && s.max_notifies() <= 8192
}

const LONG: Duration = Duration::from_secs(10);

/// A process that has exited and is not reaped yet (a zombie): dead to every liveness check,
/// yet its PID cannot be handed to a new process until this guard reaps it on drop. A reaped
/// child's PID could come back within milliseconds: `mp::recycled_pid_refused`, which may run
/// alongside, winds the kernel's PID counter back, and the case would then find its "dead"
/// PID alive.
struct DeadPid(std::process::Child);

impl DeadPid {
    fn new() -> Result<DeadPid, String> {
        let c = std::process::Command::new("true")
            .spawn()
            .map_err(|e| format!("spawn `true`: {e}"))?;
        // Wait for the exit without reaping (WNOWAIT leaves the child waitable).
        // SAFETY: `siginfo_t` is plain data for which all-zero is valid; `waitid` writes it.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: `info` is a valid out-pointer; the pid is our own child's.
            let rc = unsafe {
                libc::waitid(
                    libc::P_PID,
                    c.id() as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            match rc {
                0 => return Ok(DeadPid(c)),
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => return Err(format!("waitid: {}", std::io::Error::last_os_error())),
            }
        }
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for DeadPid {
    fn drop(&mut self) {
        let _ = self.0.wait();
    }
}

fn must_contain(what: &str, text: &str, wants: &[String]) -> CaseResult {
    let missing: Vec<&String> = wants
        .iter()
        .filter(|w| !text.contains(w.as_str()))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("the {what} message lacks {missing:?}:\n    {text}"))
    }
}

fn timeout<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let me = b.bare_tgid();
    let zombie = DeadPid::new()?;
    let dead = zombie.pid();
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let id = ok!(b.notify_info(n)).id;
    ok!(b.export_key(n, ExportFlags::empty()));
    ok!(b.set_import_pids(n, &[dead, me]));
    let s = ok!(b.create_stream(0));
    ok!(b.record(n, s));
    ok!(b.wait_and_reset(n, s, secs(1)));
    sync_ok(ctx, s, LONG, "record then wait")?;
    ok!(b.wait_and_reset(n, s, secs(1)));
    let e = match b.synchronize(s, at_most(LONG)) {
        Err(e) if crate::util::kind_of(&e) == Error::TaskTimeout => e,
        other => return Err(format!("expected 107020, got {}", code_of(&other))),
    };
    let text = e.to_string();
    ctx.note(format!("107020: {text}"));
    must_contain(
        "107020",
        &text,
        &[
            format!("notify {id} (device 0"),
            "within 1 s".to_owned(),
            format!("owner pid {me} (alive)"),
            format!("pid {dead} (dead)"),
            format!("pid {me} (alive)"),
            format!("last recorded by pid {me} (alive)"),
            format!("held by pid {me} (alive)"),
        ],
    )
}

fn refused<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let me = b.bare_tgid();
    let zombie = DeadPid::new()?;
    let dead = zombie.pid();
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let id = ok!(b.notify_info(n)).id;
    let key = ok!(b.export_key(n, ExportFlags::empty()));
    ok!(b.set_import_pids(n, &[dead]));
    let s = ok!(b.create_stream(0));
    ok!(b.record(n, s));
    sync_ok(ctx, s, LONG, "record")?;
    // This process is not on the whitelist.
    let e = match b.import_by_key(0, key.as_str(), ImportFlags::empty()) {
        Err(e) if crate::util::kind_of(&e) == Error::NoPermission => e,
        other => return Err(format!("expected 207006, got {}", code_of(&other))),
    };
    let text = e.to_string();
    ctx.note(format!("207006: {text}"));
    must_contain(
        "207006",
        &text,
        &[
            format!("import of notify {id} (device 0"),
            format!("pid {me} on server 0 is not whitelisted"),
            format!("owner pid {me} (alive)"),
            format!("whitelisted: pid {dead} (dead)"),
            format!("last recorded by pid {me} (alive)"),
            format!("held by pid {me} (alive)"),
        ],
    )
}

fn exhausted<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let me = b.bare_tgid();
    let max = ctx.soc.max_notifies();
    let all = fill(ctx, 1, max)?;
    ensure_eq!(all.len() as u32, max, "notifies created before 207009");
    let e = match b.create_notify(1, CreateFlags::empty()) {
        Err(e) if crate::util::kind_of(&e) == Error::NoNotifyResource => e,
        other => return Err(format!("expected 207009, got {}", code_of(&other))),
    };
    let text = e.to_string();
    ctx.note(format!("207009: {text}"));
    must_contain(
        "207009",
        &text,
        &[
            format!("device 1 has no notify id left: all {max} ids"),
            format!("pid {me} (alive) owns {max}"),
        ],
    )
}

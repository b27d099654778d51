//! Process snapshots: `aclrtSnapShotProcessLock` / `Backup` / `Restore` / `Unlock` and the
//! stage callbacks (`aclrtSnapShotCallbackRegister` / `Unregister`).
//!
//! CANN's contract (hicann/runtime `docs/zh/api_ref/21_snapshot_management.md`,
//! `docs/zh/design/features/snapshot.md`, `src/acl/aclrt_impl/snapshot.cpp`,
//! `src/runtime/api/impl/api_impl.cc` and `api_error.cc` `SnapShotProcess*`,
//! `src/runtime/core/src/common/global_state_manager.cc`,
//! `src/runtime/feature/snapshot/snapshot_callback_manager.cc`):
//! - a state machine per process: RUNNING → `Lock` → LOCKED → `Backup` → BACKED_UP →
//!   `Restore` → LOCKED; `Unlock` from LOCKED or BACKED_UP → RUNNING. A call from another
//!   state fails: 507906 lock, 507908 backup, 507909 restore (no backup to restore), 507907
//!   unlock (without a lock);
//! - `pid` must be the caller's own process and `reserve`/`args` NULL (100000, the ACL layer);
//! - while locked, the calls that change device resources or queue work wait, on every thread,
//!   until the unlock (`GLOBAL_STATE_WAIT_IF_LOCKED`); queries and synchronizations do not.
//!   Here every C ABI call waits but the read-only ones on one explicit list
//!   (`snapshot_lock::READ_ONLY`: queries, getters, synchronizations, the
//!   thread's error state, the snapshot calls), so a new function waits by default;
//!   a waiting thread polls the state every millisecond (a condition variable would be a
//!   process-wide lock a forked child could find held). `aclFinalize` does not wait: it
//!   unlocks the process, as CANN's exit handler does (`ForceUnlocked`). The thread that locked
//!   waits like any other: it must unlock before it queues more work;
//! - `Backup` synchronizes every stream (no task runs), then saves the process's device
//!   memory on the host ([`acl_notify_sim::mem::backup`]); `Restore` writes it back. Streams,
//!   events and notifies are kept as they are (CANN re-creates their ids on its device; the
//!   simulated device never dropped them);
//! - callbacks: per stage, in registration order, each called once per device set in the
//!   process with the device id and its `args`, before the lock (`LOCK_PRE`), around the
//!   backup and the restore (`_PRE` before anything is done, `_POST` after, before the state
//!   changes), after the unlock (`UNLOCK_POST`). A callback returning non-zero stops the call
//!   with 507912. A second registration of the same function for a stage is 507913; a stage
//!   outside the enum, a NULL callback, one not registered → 107000.
//!
//! The SoCs are CANN's: Ascend 950PR, Atlas A2 and A3 (207000 elsewhere).

#![allow(non_camel_case_types)]

use std::ffi::c_void;
use std::sync::MutexGuard;

use acl_notify_core::{Backend as _, Error, Soc, StreamOps as _, SyncWait};
use acl_notify_sim::PerProcess;

use crate::errmsg::{CallError, param};
use crate::ffi::{aclError, api};
use crate::runtime::Runtime;
use crate::session::runtime;
use crate::snapshot_lock::{self, Lock, State};

/// `aclrtSnapShotCallBack`.
pub type aclrtSnapShotCallBack =
    Option<unsafe extern "C" fn(device: i32, args: *mut c_void) -> u32>;

/// The stages (`aclrtSnapShotStage`), by value.
const STAGES: [&str; 6] = [
    "ACL_RT_SNAPSHOT_LOCK_PRE",
    "ACL_RT_SNAPSHOT_BACKUP_PRE",
    "ACL_RT_SNAPSHOT_BACKUP_POST",
    "ACL_RT_SNAPSHOT_RESTORE_PRE",
    "ACL_RT_SNAPSHOT_RESTORE_POST",
    "ACL_RT_SNAPSHOT_UNLOCK_POST",
];
const LOCK_PRE: usize = 0;
const BACKUP_PRE: usize = 1;
const BACKUP_POST: usize = 2;
const RESTORE_PRE: usize = 3;
const RESTORE_POST: usize = 4;
const UNLOCK_POST: usize = 5;

/// The callbacks per stage (function and argument, as addresses).
type Callbacks = [Vec<(usize, usize)>; 6];

/// A forked child has none.
static CALLBACKS: PerProcess<Callbacks> = PerProcess::new(Default::default);

fn callbacks() -> Result<MutexGuard<'static, Callbacks>, CallError> {
    CALLBACKS.lock().map_err(CallError::backend)
}

fn lock() -> Result<MutexGuard<'static, Lock>, CallError> {
    snapshot_lock::lock().map_err(CallError::backend)
}

/// The state, checked to be one of `want`; else `code` saying what it is.
fn expect_state(want: &[State], code: Error, doing: &str) -> Result<(), CallError> {
    let st = lock()?.state();
    if want.contains(&st) {
        return Ok(());
    }
    Err(CallError::new(
        code,
        format!("{doing}: the process is {st:?}, it must be {want:?}"),
    ))
}

fn set_state(st: State) -> Result<(), CallError> {
    lock()?.set(st);
    Ok(())
}

/// The ACL layer's checks: `pid` the caller's, `what` (`reserve` or `args`) NULL.
fn own_pid(pid: i32, reserved: *const c_void, what: &str) -> Result<(), CallError> {
    if pid != std::process::id() as i32 {
        return Err(CallError::new(
            Error::InvalidParam,
            format!(
                "pid {pid}: it must be the current process's ({}); cross-process operation is \
                 not supported",
                std::process::id()
            ),
        ));
    }
    if !reserved.is_null() {
        return Err(CallError::new(
            Error::InvalidParam,
            format!("{what} is a reserved parameter and must be NULL"),
        ));
    }
    Ok(())
}

/// The runtime, on a SoC with snapshots (207000 elsewhere).
fn snapshot_runtime(call: &str) -> Result<std::sync::Arc<Runtime>, CallError> {
    let rt = runtime()?;
    let soc = rt.backend().soc();
    if !matches!(soc, Soc::Ascend950PR | Soc::Ascend910B | Soc::Ascend910_93) {
        return Err(CallError::new(
            Error::FeatureNotSupport,
            format!(
                "{call}: {} has no process snapshots (CANN documents them on Ascend 950PR, \
                 Atlas A2 and A3)",
                soc.name()
            ),
        ));
    }
    Ok(rt)
}

/// Calls the callbacks of `stage` (copied, called without the lock), each for every device set
/// in the process: 507912 at the first that returns non-zero.
fn invoke(rt: &Runtime, stage: usize) -> Result<(), CallError> {
    let cbs = callbacks()?[stage].clone();
    let devices: Vec<u32> = (0..rt.backend().device_count())
        .filter(|d| rt.device_is_set(*d))
        .collect();
    for (f, args) in cbs {
        // SAFETY: registered as an `aclrtSnapShotCallBack` (non-NULL, checked then).
        let f: unsafe extern "C" fn(i32, *mut c_void) -> u32 = unsafe { std::mem::transmute(f) };
        for &d in &devices {
            // SAFETY: the caller registered the function to be called with its argument.
            let r = unsafe { f(d as i32, std::ptr::with_exposed_provenance_mut(args)) };
            if r != 0 {
                return Err(CallError::new(
                    Error::SnapshotCallbackFailed,
                    format!(
                        "the {} callback {f:p} returned {r} for device {d}",
                        STAGES[stage]
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `aclError aclrtSnapShotProcessLock(int pid, void *reserve)`: `LOCK_PRE` callbacks, then
/// RUNNING → LOCKED; from then on calls that change device resources wait.
///
/// Codes: 100000 another pid, `reserve` not NULL; 207000 a SoC without snapshots; 507912 a
/// callback failed; 507906 the process is not running.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSnapShotProcessLock(pid: i32, reserve: *mut c_void) -> aclError {
    api("aclrtSnapShotProcessLock", || {
        own_pid(pid, reserve, "reserve")?;
        let rt = snapshot_runtime("aclrtSnapShotProcessLock")?;
        invoke(&rt, LOCK_PRE)?;
        let mut l = lock()?;
        if l.state() != State::Running {
            return Err(CallError::new(
                Error::SnapshotLockFailed,
                format!("the process is {:?} already, not running", l.state()),
            ));
        }
        l.set(State::Locked);
        Ok(())
    })
}

/// `aclError aclrtSnapShotProcessUnlock(int pid, void *reserve)`: LOCKED or BACKED_UP →
/// RUNNING (the waiting calls go on, the backup is dropped), then `UNLOCK_POST` callbacks.
///
/// Codes: 100000 as `Lock`; 207000; 507907 the process is not locked; 507912.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSnapShotProcessUnlock(pid: i32, reserve: *mut c_void) -> aclError {
    api("aclrtSnapShotProcessUnlock", || {
        own_pid(pid, reserve, "reserve")?;
        let rt = snapshot_runtime("aclrtSnapShotProcessUnlock")?;
        expect_state(
            &[State::Locked, State::BackedUp],
            Error::SnapshotUnlockFailed,
            "unlock",
        )?;
        set_state(State::Running)?;
        invoke(&rt, UNLOCK_POST)
    })
}

/// Synchronizes every stream of the process (no task runs during a backup).
fn quiesce(rt: &Runtime) -> Result<(), CallError> {
    for s in rt.streams.values_where(|_| true) {
        // A stream's failed task is the program's: the state saved is the memory as it is.
        let _ = rt.backend().synchronize(s.raw, SyncWait::Forever);
    }
    Ok(())
}

/// `aclError aclrtSnapShotProcessBackup(int pid, aclrtSnapShotBackupArgs *args)`: in the
/// LOCKED state, `BACKUP_PRE` callbacks, every stream synchronized, the process's device
/// memory saved on the host (a later backup replaces it), `BACKUP_POST` callbacks, then
/// BACKED_UP.
///
/// Codes: 100000 another pid, `args` not NULL; 207000; 507908 the process is not LOCKED;
/// 507912.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSnapShotProcessBackup(pid: i32, args: *mut c_void) -> aclError {
    api("aclrtSnapShotProcessBackup", || {
        own_pid(pid, args, "args")?;
        let rt = snapshot_runtime("aclrtSnapShotProcessBackup")?;
        expect_state(&[State::Locked], Error::SnapshotBackupFailed, "backup")?;
        invoke(&rt, BACKUP_PRE)?;
        quiesce(&rt)?;
        let b = rt.backend().mem_backup().map_err(CallError::backend)?;
        lock()?.backup = Some(b);
        invoke(&rt, BACKUP_POST)?;
        set_state(State::BackedUp)
    })
}

/// `aclError aclrtSnapShotProcessRestore(int pid, aclrtSnapShotRestoreArgs *args)`: in the
/// BACKED_UP state, `RESTORE_PRE` callbacks, the saved device memory written back,
/// `RESTORE_POST` callbacks, then LOCKED.
///
/// Codes: 100000 as `Backup`; 207000; 507909 no backup (the process is not BACKED_UP), or an
/// allocation of the backup freed since; 507912.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSnapShotProcessRestore(pid: i32, args: *mut c_void) -> aclError {
    api("aclrtSnapShotProcessRestore", || {
        own_pid(pid, args, "args")?;
        let rt = snapshot_runtime("aclrtSnapShotProcessRestore")?;
        expect_state(
            &[State::BackedUp],
            Error::SnapshotRestoreFailed,
            "restore (no backup to restore)",
        )?;
        invoke(&rt, RESTORE_PRE)?;
        let b = lock()?.backup.take();
        let r = match &b {
            Some(b) => rt.backend().mem_restore(b).map_err(CallError::backend),
            None => Err(CallError::new(Error::SnapshotRestoreFailed, "no backup")),
        };
        lock()?.backup = b;
        r?;
        invoke(&rt, RESTORE_POST)?;
        set_state(State::Locked)
    })
}

/// The stage `stage` names; 107000 outside the enum.
fn stage_of(stage: u32, doing: &str) -> Result<usize, CallError> {
    let s = stage as usize;
    if s >= STAGES.len() {
        return Err(param(format!(
            "{doing}: stage {stage} is not an aclrtSnapShotStage (0 to {})",
            STAGES.len() - 1
        )));
    }
    Ok(s)
}

/// `aclError aclrtSnapShotCallbackRegister(aclrtSnapShotStage stage, aclrtSnapShotCallBack
/// callback, void *args)`: `callback(deviceId, args)` at `stage`, after those registered
/// before it.
///
/// Codes: 107000 a stage outside the enum, `callback` NULL; 507913 registered for the stage
/// already.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSnapShotCallbackRegister(
    stage: u32,
    callback: aclrtSnapShotCallBack,
    args: *mut c_void,
) -> aclError {
    api("aclrtSnapShotCallbackRegister", || {
        let s = stage_of(stage, "registering a snapshot callback")?;
        let Some(f) = callback else {
            return Err(param("registering a snapshot callback: callback is NULL"));
        };
        let f = f as usize;
        let mut cbs = callbacks()?;
        if cbs[s].iter().any(|(g, _)| *g == f) {
            return Err(CallError::new(
                Error::SnapshotRegisterCallbackFailed,
                format!(
                    "the callback {f:#x} has been registered for stage {} and cannot be \
                     registered again",
                    STAGES[s]
                ),
            ));
        }
        cbs[s].push((f, args.expose_provenance()));
        Ok(())
    })
}

/// `aclError aclrtSnapShotCallbackUnregister(aclrtSnapShotStage stage, aclrtSnapShotCallBack
/// callback)`: `callback` no longer called at `stage`.
///
/// Codes: 107000 a stage outside the enum, `callback` NULL or not registered for the stage.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSnapShotCallbackUnregister(
    stage: u32,
    callback: aclrtSnapShotCallBack,
) -> aclError {
    api("aclrtSnapShotCallbackUnregister", || {
        let s = stage_of(stage, "unregistering a snapshot callback")?;
        let Some(f) = callback else {
            return Err(param("unregistering a snapshot callback: callback is NULL"));
        };
        let f = f as usize;
        let mut cbs = callbacks()?;
        let Some(i) = cbs[s].iter().position(|(g, _)| *g == f) else {
            return Err(param(format!(
                "the callback {f:#x} has not been registered for stage {}",
                STAGES[s]
            )));
        };
        cbs[s].remove(i);
        Ok(())
    })
}

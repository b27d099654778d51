//! The snapshot lock of this process (`aclrtSnapShotProcessLock`, [`crate::snapshot`]): its
//! state (RUNNING, LOCKED, BACKED_UP), its last backup, and the gate every C call passes
//! first, which holds back the calls that change device resources while the process is
//! locked (hicann/runtime `src/runtime/core/src/common/global_state_manager.cc`,
//! `WaitIfLocked`, `ForceUnlocked`).

use std::sync::MutexGuard;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use acl_notify_sim::PerProcess;
use acl_notify_sim::SimError;
use acl_notify_sim::mem::backup::MemBackup;

/// The process's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum State {
    #[default]
    Running,
    Locked,
    BackedUp,
}

/// The state and the last backup (dropped at the unlock).
#[derive(Default)]
pub(crate) struct Lock {
    state: State,
    pub(crate) backup: Option<MemBackup>,
}

impl Lock {
    pub(crate) fn state(&self) -> State {
        self.state
    }

    /// Moves to `st`; the gate holds calls back from a state other than RUNNING on.
    pub(crate) fn set(&mut self, st: State) {
        self.state = st;
        if st == State::Running {
            self.backup = None;
        }
        let pid = match st {
            State::Running => 0,
            _ => std::process::id() as i32,
        };
        LOCKED_BY.store(pid, Ordering::Release);
    }
}

/// A forked child starts running (CANN's state is its process's).
static LOCK: PerProcess<Lock> = PerProcess::new(Lock::default);

/// The pid of the process while it is locked (LOCKED or BACKED_UP), else 0: what every call
/// reads first (a forked child of a locked process sees its parent's pid, not its own).
static LOCKED_BY: AtomicI32 = AtomicI32::new(0);

/// The lock's state, locked.
pub(crate) fn lock() -> Result<MutexGuard<'static, Lock>, SimError> {
    LOCK.lock()
}

/// Waits while the process is locked, unless call `name` does not change device resources
/// (see [`crate::snapshot`]). One relaxed load when the process is running.
#[inline(always)]
pub(crate) fn gate(name: &str) {
    if LOCKED_BY.load(Ordering::Relaxed) != 0 {
        held(name);
    }
}

#[cold]
#[inline(never)]
fn held(name: &str) {
    // A "Get" that exports (a notify's or memory's export key, an event's IPC handle) or sets
    // (`aclrtAllocatorSetGetAddrFromBlockFuncToDesc`) changes resources: it waits too.
    let changes = ["Set", "ExportKey", "IpcGetEventHandle"]
        .iter()
        .any(|w| name.contains(w));
    if !changes
        && [
            "Get",
            "Query",
            "Synchronize",
            "Peek",
            "ErrMsg",
            "aclrtSnapShot",
        ]
        .iter()
        .any(|w| name.contains(w))
    {
        return;
    }
    let me = std::process::id() as i32;
    if name == "aclFinalize" {
        if LOCKED_BY.load(Ordering::Acquire) == me
            && let Ok(mut l) = LOCK.lock()
        {
            l.set(State::Running);
        }
        return;
    }
    while LOCKED_BY.load(Ordering::Acquire) == me {
        std::thread::sleep(Duration::from_millis(1));
    }
}

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

/// The C functions that only read (queries, getters, synchronizations, the thread's error
/// state) and the snapshot calls themselves: the only calls that run while the process is
/// locked. Every other call waits for the unlock, so a new function waits unless it is added
/// here (CANN marks each waiting runtime call instead, with `GLOBAL_STATE_WAIT_IF_LOCKED()`:
/// hicann/runtime `src/runtime/api/api_c*.cc`; it gates `rtHostGetDevicePointer` and
/// `rtMemPoolGetAttr` though their names say Get, and not `rtGetDeviceSatStatus`). Sorted: the
/// gate searches it by halves.
const READ_ONLY: &[&str] = &[
    "aclGetCannAttribute",
    "aclGetCannAttributeList",
    "aclGetDataBufferAddr",
    "aclGetDataBufferSize",
    "aclGetDataBufferSizeV2",
    "aclGetDeviceCapability",
    "aclGetRecentErrMsg",
    "aclmdlRICaptureGetInfo",
    "aclmdlRICondHandleGetCondPtr",
    "aclmdlRIGetId",
    "aclmdlRIGetName",
    "aclmdlRIGetStreams",
    "aclmdlRIGetTasksByStream",
    "aclmdlRITaskGetParams",
    "aclmdlRITaskGetSeqId",
    "aclmdlRITaskGetType",
    "aclnsimGetCntNotifyFreeCount",
    "aclnsimGetNotifyFreeCount",
    "aclnsimGetServerId",
    "aclnsimNotifyGetMergedRecords",
    "aclrtAllocatorGetByStream",
    "aclrtCheckArchCompatibility",
    "aclrtCmoGetDescSize",
    "aclrtCntNotifyGetId",
    "aclrtCtxGetCurrentDefaultStream",
    "aclrtCtxGetFloatOverflowAddr",
    "aclrtCtxGetSysParamOpt",
    "aclrtDeviceGetBareTgid",
    "aclrtDeviceGetByPCIBusId",
    "aclrtDeviceGetHostAtomicCapabilities",
    "aclrtDeviceGetLimit",
    "aclrtDeviceGetP2PAtomicCapabilities",
    "aclrtDeviceGetPCIBusId",
    "aclrtDeviceGetStreamPriorityRange",
    "aclrtDeviceGetUuid",
    "aclrtEventGetTimestamp",
    "aclrtGetAllGroupInfo",
    "aclrtGetArgsFromExceptionInfo",
    "aclrtGetBufChainNum",
    "aclrtGetBufData",
    "aclrtGetBufDataLen",
    "aclrtGetBufFromChain",
    "aclrtGetBufUserData",
    "aclrtGetCurrentContext",
    "aclrtGetDevice",
    "aclrtGetDeviceCapability",
    "aclrtGetDeviceCount",
    "aclrtGetDeviceIdFromExceptionInfo",
    "aclrtGetDeviceInfo",
    "aclrtGetDeviceResLimit",
    "aclrtGetDeviceSatMode",
    "aclrtGetDeviceUtilizationRate",
    "aclrtGetDevicesTopo",
    "aclrtGetErrorCodeFromExceptionInfo",
    "aclrtGetErrorVerbose",
    "aclrtGetEventAvailNum",
    "aclrtGetEventId",
    "aclrtGetFloatOverflowStatus",
    "aclrtGetFuncHandleFromExceptionInfo",
    "aclrtGetGroupCount",
    "aclrtGetGroupInfoDetail",
    "aclrtGetLastError",
    "aclrtGetLogicDevIdByPhyDevId",
    "aclrtGetLogicDevIdByUserDevId",
    "aclrtGetMemInfo",
    "aclrtGetMemUceInfo",
    "aclrtGetMemUsageInfo",
    "aclrtGetMemcpyDescSize",
    "aclrtGetNotifyId",
    "aclrtGetOpExecuteTimeout",
    "aclrtGetOpTimeOutInterval",
    "aclrtGetOverflowStatus",
    "aclrtGetPhyDevIdByLogicDevId",
    "aclrtGetPhyDevIdByUserDevId",
    "aclrtGetPrimaryCtxState",
    "aclrtGetResInCurrentThread",
    "aclrtGetRunMode",
    "aclrtGetSocName",
    "aclrtGetStreamAttribute",
    "aclrtGetStreamAvailableNum",
    "aclrtGetStreamIdFromExceptionInfo",
    "aclrtGetStreamOverflowSwitch",
    "aclrtGetStreamResLimit",
    "aclrtGetSysParamOpt",
    "aclrtGetTaskIdFromExceptionInfo",
    "aclrtGetThreadIdFromExceptionInfo",
    "aclrtGetThreadLastTaskId",
    "aclrtGetUserDevIdByLogicDevId",
    "aclrtGetUserDevIdByPhyDevId",
    "aclrtGetVersion",
    "aclrtMemGetAccess",
    "aclrtMemGetAddressRange",
    "aclrtMemGetAllocationGranularity",
    "aclrtMemGetAllocationPropertiesFromHandle",
    "aclrtMemManagedGetAttr",
    "aclrtMemManagedGetAttrs",
    "aclrtNpuGetFloatOverFlowStatus",
    "aclrtPeekAtLastError",
    "aclrtPointerGetAttributes",
    "aclrtQueryDeviceStatus",
    "aclrtQueryEvent",
    "aclrtQueryEventStatus",
    "aclrtQueryEventWaitStatus",
    "aclrtSnapShotCallbackRegister",
    "aclrtSnapShotCallbackUnregister",
    "aclrtSnapShotProcessBackup",
    "aclrtSnapShotProcessLock",
    "aclrtSnapShotProcessRestore",
    "aclrtSnapShotProcessUnlock",
    "aclrtStreamGetFlags",
    "aclrtStreamGetId",
    "aclrtStreamGetPriority",
    "aclrtStreamQuery",
    "aclrtSynchronizeDevice",
    "aclrtSynchronizeDeviceWithTimeout",
    "aclrtSynchronizeEvent",
    "aclrtSynchronizeEventWithTimeout",
    "aclrtSynchronizeStream",
    "aclrtSynchronizeStreamWithTimeout",
    "aclsysGetCANNVersion",
    "aclsysGetVersionNum",
    "aclsysGetVersionStr",
];

/// Whether C function `name` runs while the process is locked ([`READ_ONLY`]).
fn read_only(name: &str) -> bool {
    READ_ONLY.binary_search(&name).is_ok()
}

/// Waits while the process is locked, unless C function `name` is read-only
/// ([`READ_ONLY`]). One relaxed load when the process is running.
#[inline(always)]
pub(crate) fn gate(name: &str) {
    if LOCKED_BY.load(Ordering::Relaxed) != 0 {
        held(name);
    }
}

#[cold]
#[inline(never)]
fn held(name: &str) {
    if read_only(name) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_only_list_is_sorted_and_names_exported_functions() {
        assert!(
            READ_ONLY.windows(2).all(|w| w[0] < w[1]),
            "READ_ONLY must be sorted and without repeats"
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut text = String::new();
        let mut todo = vec![dir];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).expect("read src") {
                let p = e.expect("dir entry").path();
                if p.is_dir() {
                    todo.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    text.push_str(&std::fs::read_to_string(&p).expect("read source"));
                }
            }
        }
        for n in READ_ONLY {
            assert!(
                text.contains(&format!("extern \"C\" fn {n}(")),
                "{n} is in READ_ONLY but no C function has that name"
            );
        }
    }

    #[test]
    fn a_getter_that_changes_resources_is_not_read_only() {
        for n in [
            "aclrtIpcMemGetExportKey",
            "aclrtNotifyGetExportKey",
            "aclrtIpcGetEventHandle",
            "aclrtHostGetDevicePointer",
            "aclrtMemPoolGetAttr",
            "aclrtAllocatorSetGetAddrFromBlockFuncToDesc",
            "aclrtMemset",
            "aclFinalize",
        ] {
            assert!(!read_only(n), "{n} must wait under the snapshot lock");
        }
        for n in [
            "aclrtGetDevice",
            "aclrtSynchronizeStream",
            "aclrtSnapShotProcessUnlock",
        ] {
            assert!(read_only(n), "{n} must run under the snapshot lock");
        }
    }
}

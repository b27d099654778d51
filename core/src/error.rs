//! The CANN error codes this API returns, as one `#[repr(i32)]` enum.

use num_enum::{IntoPrimitive, TryFromPrimitive};

/// A CANN runtime error code (SPEC §5). `ACL_SUCCESS` (0) is not an error and has no variant:
/// success is `Ok(..)`.
///
/// The numeric value of each variant is the code CANN's C API returns, so
/// `i32::from(Error::InvalidHandle) == 107017`, and `Error::try_from(107017)` gives it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, IntoPrimitive, TryFromPrimitive)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(i32)]
pub enum Error {
    /// `ACL_ERROR_INVALID_PARAM` — a NULL pointer or otherwise invalid argument at the ACL layer.
    InvalidParam = 100000,
    /// `ACL_ERROR_UNINITIALIZE` — `aclInit` has not been called.
    Uninitialize = 100001,
    /// `ACL_ERROR_REPEAT_INITIALIZE` — `aclInit` called twice.
    RepeatInitialize = 100002,
    /// `ACL_ERROR_INVALID_FILE` — `aclInit`'s configuration file cannot be found or read.
    InvalidFile = 100003,
    /// `ACL_ERROR_PARSE_FILE` — `aclInit`'s configuration file is not the JSON it expects.
    ParseFile = 100006,
    /// `ACL_ERROR_INVALID_DUMP_CONFIG` — a dump configuration that is not a dump
    /// configuration (`aclmdlSetDump`).
    InvalidDumpConfig = 100009,
    /// `ACL_ERROR_REPEAT_FINALIZE` — `aclFinalize` called twice.
    RepeatFinalize = 100037,
    /// `ACL_ERROR_DUMP_NOT_RUN` — `aclmdlSetDump`/`aclmdlFinalizeDump` before
    /// `aclmdlInitDump`.
    DumpNotRun = 100045,
    /// `ACL_ERROR_FEATURE_UNSUPPORTED` — an ACL-layer refusal of a value the API reserves
    /// (`aclrtDeviceEnablePeerAccess` with flags ≠ 0).
    FeatureUnsupported = 200006,
    /// `ACL_ERROR_RT_PARAM_INVALID` — an argument the runtime rejects (flags, counts, keys).
    ParamInvalid = 107000,
    /// `ACL_ERROR_RT_INVALID_DEVICEID` — no such device.
    InvalidDeviceId = 107001,
    /// `ACL_ERROR_RT_CONTEXT_NULL` — the calling thread has no current device.
    ContextNull = 107002,
    /// `ACL_ERROR_RT_STREAM_CONTEXT` — the stream belongs to another device/context.
    StreamContext = 107003,
    /// `ACL_ERROR_RT_STREAM_MODEL` — the stream is not bound to that model, or bound to
    /// another.
    StreamModel = 107005,
    /// `ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID` — an event has no valid timestamp (created
    /// without `ACL_EVENT_TIME_LINE`, or its latest record has not run).
    EventTimestampInvalid = 107006,
    /// `ACL_ERROR_RT_STREAM_SUBSCRIBE` — a stream's callback subscription does not allow the
    /// call: no thread is subscribed to it (`aclrtLaunchCallback`), another one is
    /// (`aclrtSubscribeReport`), or not the one named (`aclrtUnSubscribeReport`).
    StreamSubscribe = 107011,
    /// `ACL_ERROR_RT_THREAD_SUBSCRIBE` — a thread's callback subscription does not allow the
    /// call: it processes another device's callbacks, or is subscribed to no stream
    /// (`aclrtProcessReport`).
    ThreadSubscribe = 107012,
    /// `ACL_ERROR_RT_GROUP_NOT_SET` — no device group was set.
    GroupNotSet = 107013,
    /// `ACL_ERROR_RT_GROUP_NOT_CREATE` — the device has no such group (or none at all:
    /// `aclrtSetGroup`, `aclrtGetAllGroupInfo`).
    GroupNotCreate = 107014,
    /// `ACL_ERROR_RT_INVALID_HANDLE` — a stale, destroyed, foreign or garbage handle.
    InvalidHandle = 107017,
    /// `ACL_ERROR_RT_WAIT_TIMEOUT` — a host-side wait ran out of time.
    WaitTimeout = 107019,
    /// `ACL_ERROR_RT_TASK_TIMEOUT` — a task on a stream (a wait) ran out of time.
    TaskTimeout = 107020,
    /// `ACL_ERROR_RT_SYSPARAMOPT_NOT_SET` — a system parameter was never set in the current
    /// context (`aclrtCtxGetSysParamOpt`).
    SysParamOptNotSet = 107021,
    /// `ACL_ERROR_RT_STREAM_ABORT` — the stream's tasks were aborted (`aclrtStreamAbort`).
    StreamAbort = 107023,
    /// `ACL_ERROR_RT_CAPTURE_DEPENDENCY` — a capturing stream waits on an event recorded
    /// outside the capture (hicann/runtime `ApiImpl::StreamWaitEvent`).
    CaptureDependency = 107024,
    /// `ACL_ERROR_RT_STREAM_UNJOINED` — a stream that joined a capture was not joined back to
    /// the capture's origin stream by an event before `aclmdlRICaptureEnd`.
    StreamUnjoined = 107025,
    /// `ACL_ERROR_RT_MODEL_CAPTURED` — the model runtime instance is still being captured
    /// (executed or destroyed before its `aclmdlRICaptureEnd`).
    ModelCaptured = 107026,
    /// `ACL_ERROR_RT_STREAM_CAPTURED` — the stream is capturing: begun twice, or a
    /// synchronize, query, destroy or uncapturable task on it.
    StreamCaptured = 107027,
    /// `ACL_ERROR_RT_EVENT_CAPTURED` — the event is recorded in a capture (synchronized or
    /// queried during it).
    EventCaptured = 107028,
    /// `ACL_ERROR_RT_STREAM_NOT_CAPTURED` — `aclmdlRICaptureEnd` on a stream not capturing.
    StreamNotCaptured = 107029,
    /// `ACL_ERROR_STREAM_TASK_GROUP_STATUS` — a task group begun twice, ended or updated out
    /// of turn.
    StreamTaskGroupStatus = 107033,
    /// `ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT` — a synchronous call that a capture's mode
    /// forbids while it runs (`aclrtMemcpy` under `ACL_MODEL_RI_CAPTURE_MODE_GLOBAL`).
    CaptureModeNotSupport = 107030,
    /// `ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED` — `aclmdlRICaptureEnd` on a stream that joined
    /// a capture begun on another stream.
    StreamCaptureUnmatched = 107036,
    /// `ACL_ERROR_RT_MODEL_RUNNING` — a model runtime instance whose executions did not
    /// finish in time to destroy it.
    ModelRunning = 107037,
    /// `ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD` — a capture of mode
    /// `ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL` ended by another thread.
    StreamCaptureWrongThread = 107038,
    /// `ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY` — the caller's array is shorter than the list
    /// it asked for (`aclmdlRIGetStreams`: the elements that fit are written).
    InsufficientInputArray = 107039,
    /// `ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC` — an asynchronous call that CANN makes
    /// synchronously (an `aclrtMemcpyAsync` with pageable host memory) while a capture's mode
    /// forbids synchronous calls.
    CaptureModeBlockAsync = 107041,
    /// `ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING` — `aclmdlRICaptureEnd` of a model one of
    /// whose conditional tasks' sub-models is not captured yet (or still capturing).
    SubAclgraphIsCapturing = 107045,
    /// `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` — this SoC does not have the feature.
    FeatureNotSupport = 207000,
    /// `ACL_ERROR_INTERNAL_ERROR` — the ACL layer itself failed (e.g. a package version
    /// file whose version it cannot parse, `aclsysGetVersionNum`).
    AclInternalError = 500000,
    /// `ACL_ERROR_FAILURE` — a failure without a more precise code (what an init or finalize
    /// callback of another library may return, `aclInitCallbackRegister`).
    Failure = 500001,
    /// `ACL_ERROR_RT_MEMORY_ALLOCATION` — out of memory.
    MemoryAllocation = 207001,
    /// `ACL_ERROR_RT_NO_DEVICE` — no device is present.
    NoDevice = 207004,
    /// `ACL_ERROR_RT_RESOURCE_ALLOC_FAIL` — a resource other than a notify id ran out.
    ResourceAllocFail = 207005,
    /// `ACL_ERROR_RT_NO_PERMISSION` — not whitelisted, or the operation is not allowed here.
    NoPermission = 207006,
    /// `ACL_ERROR_RT_NO_EVENT_RESOURCE` — the device is out of event ids.
    NoEventResource = 207007,
    /// `ACL_ERROR_RT_NO_STREAM_RESOURCE` — the device has no stream left (`aclrtCreateStream`
    /// beyond the chip's streams, `Soc::max_streams`).
    NoStreamResource = 207008,
    /// `ACL_ERROR_RT_NO_NOTIFY_RESOURCE` — the device is out of notify ids.
    NoNotifyResource = 207009,
    /// `ACL_ERROR_RT_OVER_LIMIT` — a fixed limit (64 whitelisted PIDs) would be exceeded.
    OverLimit = 207012,
    /// `ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED` — a link type this SoC does not have
    /// (`aclrtIpcMemSetAttr`'s UB paths on Ascend910_93).
    LinkTypeNotSupported = 207021,
    /// `ACL_ERROR_RT_INTERNAL_ERROR` — an operation not valid in the handle's state.
    InternalError = 507000,
    /// `ACL_ERROR_RT_STREAM_TASK_FULL` — a stream's task queue is full.
    StreamTaskFull = 507002,
    /// `ACL_ERROR_RT_EVENT_NOT_COMPLETE` — an event's latest record has not run yet.
    EventNotComplete = 507006,
    /// `ACL_ERROR_RT_CONTEXT_RELEASE_ERROR` — a device reset with nothing to release: the
    /// device's count of `aclrtSetDevice` calls is already 0.
    ContextReleaseError = 507007,
    /// `ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT` — the task type is not supported for this handle
    /// (batch reset of an imported notify).
    TaskTypeNotSupport = 507009,
    /// `ACL_ERROR_RT_REPORT_TIMEOUT` — no callback reached an `aclrtProcessReport` within its
    /// timeout.
    ReportTimeout = 507012,
    /// `ACL_ERROR_RT_IPC_ERROR` — inter-process communication failed.
    IpcError = 507022,
    /// `ACL_ERROR_RT_MODEL_ABORT_NORMAL` — a model execution was stopped by `aclmdlRIAbort`.
    ModelAbortNormal = 507023,
    /// `ACL_ERROR_RT_LABEL_CONTEXT` — the label is not of the stream's context (device).
    LabelContext = 507031,
    /// `ACL_ERROR_RT_DEV_SETUP_ERROR` — the device is not set up in this process (no
    /// `aclrtSetDevice` or context on it: `aclrtSetDeviceResLimit` and its neighbours).
    DevSetupError = 507033,
    /// `ACL_ERROR_RT_STREAM_SYNC_TIMEOUT` — a synchronize with a timeout expired.
    StreamSyncTimeout = 507046,
    /// `ACL_ERROR_RT_EVENT_SYNC_TIMEOUT` — an event synchronize with a timeout expired.
    EventSyncTimeout = 507047,
    /// `ACL_ERROR_RT_DRV_INTERNAL_ERROR` — the driver (or simulated device) failed.
    DrvInternalError = 507899,
    /// `ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED` — the capture failed part-way (a task it
    /// could not take): `aclmdlRICaptureEnd` ends it without a model.
    StreamCaptureInvalidated = 507903,
    /// `ACL_ERROR_SNAPSHOT_LOCK_FAILED` — `aclrtSnapShotProcessLock` of a process that is not
    /// running (locked already).
    SnapshotLockFailed = 507906,
    /// `ACL_ERROR_SNAPSHOT_UNLOCK_FAILED` — `aclrtSnapShotProcessUnlock` of a process not locked.
    SnapshotUnlockFailed = 507907,
    /// `ACL_ERROR_SNAPSHOT_BACKUP_FAILED` — `aclrtSnapShotProcessBackup` of a process not in
    /// the locked state.
    SnapshotBackupFailed = 507908,
    /// `ACL_ERROR_SNAPSHOT_RESTORE_FAILED` — `aclrtSnapShotProcessRestore` with no backup to
    /// restore (the process not backed up), or memory gone since the backup.
    SnapshotRestoreFailed = 507909,
    /// `ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED` — a host range overlapping one registered
    /// already (`aclrtHostRegister[V2]`).
    HostMemoryAlreadyRegistered = 507910,
    /// `ACL_ERROR_HOST_MEMORY_NOT_REGISTERED` — `aclrtHostUnregister` of memory not registered.
    HostMemoryNotRegistered = 507911,
    /// `ACL_ERROR_SNAPSHOT_CALLBACK_FAILED` — a snapshot stage's callback returned non-zero.
    SnapshotCallbackFailed = 507912,
    /// `ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED` — a callback registered twice for a stage.
    SnapshotRegisterCallbackFailed = 507913,
}

/// `Result` with the CANN [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

impl Error {
    /// Every variant, in code order.
    pub const ALL: [Error; 72] = [
        Error::InvalidParam,
        Error::Uninitialize,
        Error::RepeatInitialize,
        Error::InvalidFile,
        Error::ParseFile,
        Error::InvalidDumpConfig,
        Error::RepeatFinalize,
        Error::DumpNotRun,
        Error::ParamInvalid,
        Error::InvalidDeviceId,
        Error::ContextNull,
        Error::StreamContext,
        Error::StreamModel,
        Error::EventTimestampInvalid,
        Error::StreamSubscribe,
        Error::ThreadSubscribe,
        Error::GroupNotSet,
        Error::GroupNotCreate,
        Error::InvalidHandle,
        Error::WaitTimeout,
        Error::TaskTimeout,
        Error::SysParamOptNotSet,
        Error::StreamAbort,
        Error::CaptureDependency,
        Error::StreamUnjoined,
        Error::ModelCaptured,
        Error::StreamCaptured,
        Error::EventCaptured,
        Error::StreamNotCaptured,
        Error::CaptureModeNotSupport,
        Error::StreamTaskGroupStatus,
        Error::StreamCaptureUnmatched,
        Error::ModelRunning,
        Error::StreamCaptureWrongThread,
        Error::InsufficientInputArray,
        Error::CaptureModeBlockAsync,
        Error::SubAclgraphIsCapturing,
        Error::FeatureUnsupported,
        Error::FeatureNotSupport,
        Error::MemoryAllocation,
        Error::NoDevice,
        Error::ResourceAllocFail,
        Error::NoPermission,
        Error::NoEventResource,
        Error::NoStreamResource,
        Error::NoNotifyResource,
        Error::OverLimit,
        Error::LinkTypeNotSupported,
        Error::AclInternalError,
        Error::Failure,
        Error::InternalError,
        Error::StreamTaskFull,
        Error::EventNotComplete,
        Error::ContextReleaseError,
        Error::TaskTypeNotSupport,
        Error::ReportTimeout,
        Error::IpcError,
        Error::ModelAbortNormal,
        Error::LabelContext,
        Error::DevSetupError,
        Error::StreamSyncTimeout,
        Error::EventSyncTimeout,
        Error::DrvInternalError,
        Error::StreamCaptureInvalidated,
        Error::SnapshotLockFailed,
        Error::SnapshotUnlockFailed,
        Error::SnapshotBackupFailed,
        Error::SnapshotRestoreFailed,
        Error::HostMemoryAlreadyRegistered,
        Error::HostMemoryNotRegistered,
        Error::SnapshotCallbackFailed,
        Error::SnapshotRegisterCallbackFailed,
    ];

    /// The numeric CANN code (`aclError`).
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The CANN macro name, e.g. `"ACL_ERROR_RT_INVALID_HANDLE"`.
    pub const fn name(self) -> &'static str {
        match self {
            Error::InvalidParam => "ACL_ERROR_INVALID_PARAM",
            Error::Uninitialize => "ACL_ERROR_UNINITIALIZE",
            Error::RepeatInitialize => "ACL_ERROR_REPEAT_INITIALIZE",
            Error::InvalidFile => "ACL_ERROR_INVALID_FILE",
            Error::AclInternalError => "ACL_ERROR_INTERNAL_ERROR",
            Error::Failure => "ACL_ERROR_FAILURE",
            Error::ParseFile => "ACL_ERROR_PARSE_FILE",
            Error::InvalidDumpConfig => "ACL_ERROR_INVALID_DUMP_CONFIG",
            Error::DumpNotRun => "ACL_ERROR_DUMP_NOT_RUN",
            Error::RepeatFinalize => "ACL_ERROR_REPEAT_FINALIZE",
            Error::ParamInvalid => "ACL_ERROR_RT_PARAM_INVALID",
            Error::InvalidDeviceId => "ACL_ERROR_RT_INVALID_DEVICEID",
            Error::ContextNull => "ACL_ERROR_RT_CONTEXT_NULL",
            Error::StreamContext => "ACL_ERROR_RT_STREAM_CONTEXT",
            Error::StreamModel => "ACL_ERROR_RT_STREAM_MODEL",
            Error::EventTimestampInvalid => "ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID",
            Error::StreamSubscribe => "ACL_ERROR_RT_STREAM_SUBSCRIBE",
            Error::ThreadSubscribe => "ACL_ERROR_RT_THREAD_SUBSCRIBE",
            Error::InvalidHandle => "ACL_ERROR_RT_INVALID_HANDLE",
            Error::WaitTimeout => "ACL_ERROR_RT_WAIT_TIMEOUT",
            Error::TaskTimeout => "ACL_ERROR_RT_TASK_TIMEOUT",
            Error::SysParamOptNotSet => "ACL_ERROR_RT_SYSPARAMOPT_NOT_SET",
            Error::StreamAbort => "ACL_ERROR_RT_STREAM_ABORT",
            Error::CaptureDependency => "ACL_ERROR_RT_CAPTURE_DEPENDENCY",
            Error::StreamUnjoined => "ACL_ERROR_RT_STREAM_UNJOINED",
            Error::ModelCaptured => "ACL_ERROR_RT_MODEL_CAPTURED",
            Error::StreamCaptured => "ACL_ERROR_RT_STREAM_CAPTURED",
            Error::EventCaptured => "ACL_ERROR_RT_EVENT_CAPTURED",
            Error::StreamTaskGroupStatus => "ACL_ERROR_STREAM_TASK_GROUP_STATUS",
            Error::StreamNotCaptured => "ACL_ERROR_RT_STREAM_NOT_CAPTURED",
            Error::CaptureModeNotSupport => "ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT",
            Error::StreamCaptureUnmatched => "ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED",
            Error::ModelRunning => "ACL_ERROR_RT_MODEL_RUNNING",
            Error::StreamCaptureWrongThread => "ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD",
            Error::InsufficientInputArray => "ACL_ERROR_RT_INSUFFICIENT_INPUT_ARRAY",
            Error::CaptureModeBlockAsync => "ACL_ERROR_RT_CAPTURE_MODE_BLOCK_ASYNC",
            Error::SubAclgraphIsCapturing => "ACL_ERROR_RT_SUB_ACLGRAPH_IS_CAPTURING",
            Error::StreamCaptureInvalidated => "ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED",
            Error::FeatureUnsupported => "ACL_ERROR_FEATURE_UNSUPPORTED",
            Error::FeatureNotSupport => "ACL_ERROR_RT_FEATURE_NOT_SUPPORT",
            Error::MemoryAllocation => "ACL_ERROR_RT_MEMORY_ALLOCATION",
            Error::NoDevice => "ACL_ERROR_RT_NO_DEVICE",
            Error::ResourceAllocFail => "ACL_ERROR_RT_RESOURCE_ALLOC_FAIL",
            Error::NoPermission => "ACL_ERROR_RT_NO_PERMISSION",
            Error::NoEventResource => "ACL_ERROR_RT_NO_EVENT_RESOURCE",
            Error::NoStreamResource => "ACL_ERROR_RT_NO_STREAM_RESOURCE",
            Error::GroupNotSet => "ACL_ERROR_RT_GROUP_NOT_SET",
            Error::GroupNotCreate => "ACL_ERROR_RT_GROUP_NOT_CREATE",
            Error::NoNotifyResource => "ACL_ERROR_RT_NO_NOTIFY_RESOURCE",
            Error::OverLimit => "ACL_ERROR_RT_OVER_LIMIT",
            Error::LinkTypeNotSupported => "ACL_ERROR_RT_LINK_TYPE_NOT_SUPPORTED",
            Error::InternalError => "ACL_ERROR_RT_INTERNAL_ERROR",
            Error::StreamTaskFull => "ACL_ERROR_RT_STREAM_TASK_FULL",
            Error::EventNotComplete => "ACL_ERROR_RT_EVENT_NOT_COMPLETE",
            Error::ContextReleaseError => "ACL_ERROR_RT_CONTEXT_RELEASE_ERROR",
            Error::TaskTypeNotSupport => "ACL_ERROR_RT_TASK_TYPE_NOT_SUPPORT",
            Error::ReportTimeout => "ACL_ERROR_RT_REPORT_TIMEOUT",
            Error::IpcError => "ACL_ERROR_RT_IPC_ERROR",
            Error::ModelAbortNormal => "ACL_ERROR_RT_MODEL_ABORT_NORMAL",
            Error::LabelContext => "ACL_ERROR_RT_LABEL_CONTEXT",
            Error::DevSetupError => "ACL_ERROR_RT_DEV_SETUP_ERROR",
            Error::StreamSyncTimeout => "ACL_ERROR_RT_STREAM_SYNC_TIMEOUT",
            Error::EventSyncTimeout => "ACL_ERROR_RT_EVENT_SYNC_TIMEOUT",
            Error::DrvInternalError => "ACL_ERROR_RT_DRV_INTERNAL_ERROR",
            Error::SnapshotLockFailed => "ACL_ERROR_SNAPSHOT_LOCK_FAILED",
            Error::SnapshotUnlockFailed => "ACL_ERROR_SNAPSHOT_UNLOCK_FAILED",
            Error::SnapshotBackupFailed => "ACL_ERROR_SNAPSHOT_BACKUP_FAILED",
            Error::SnapshotRestoreFailed => "ACL_ERROR_SNAPSHOT_RESTORE_FAILED",
            Error::HostMemoryAlreadyRegistered => "ACL_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
            Error::HostMemoryNotRegistered => "ACL_ERROR_HOST_MEMORY_NOT_REGISTERED",
            Error::SnapshotCallbackFailed => "ACL_ERROR_SNAPSHOT_CALLBACK_FAILED",
            Error::SnapshotRegisterCallbackFailed => "ACL_ERROR_SNAPSHOT_REGISTER_CALLBACK_FAILED",
        }
    }

    /// Converts a C return code: `0` is `Ok(())`, a known code its variant, and an unknown
    /// non-zero code `Err(None)` carrying nothing (the caller reports the raw number).
    pub fn check(code: i32) -> core::result::Result<(), Option<Error>> {
        if code == 0 {
            Ok(())
        } else {
            Err(Error::try_from(code).ok())
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl core::error::Error for Error {}

/// What every backend's error type offers: the CANN code it stands for, and a way in from a
/// bare code. A backend may carry more (a message, the notify id, the PIDs involved) and show
/// it in `Display`; generic code only relies on [`BackendError::kind`].
pub trait BackendError: core::fmt::Debug + core::fmt::Display + From<Error> {
    /// The CANN code this error stands for (embedded-hal's `Error::kind()`).
    fn kind(&self) -> Error;

    /// An error of `kind` raised above the backend (by the typed layer) with an explanation.
    /// A backend that carries messages keeps it (formatting it is the backend's cost, paid
    /// only on this error path); the default drops it, so a bare code is all a
    /// message-less backend (or firmware) pays for.
    fn with_message(kind: Error, msg: core::fmt::Arguments<'_>) -> Self {
        let _ = msg;
        Self::from(kind)
    }
}

impl BackendError for Error {
    fn kind(&self) -> Error {
        *self
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::string::ToString;

    #[test]
    fn codes_round_trip_and_are_unique() {
        for (i, e) in Error::ALL.iter().enumerate() {
            assert_eq!(Error::try_from(e.code()), Ok(*e));
            for other in &Error::ALL[i + 1..] {
                assert!(e.code() < other.code(), "{e} not before {other}");
            }
        }
        assert!(Error::try_from(0).is_err());
        assert!(Error::try_from(123).is_err());
    }

    #[test]
    fn spec_values() {
        assert_eq!(Error::InvalidParam.code(), 100000);
        assert_eq!(Error::ParamInvalid.code(), 107000);
        assert_eq!(Error::InvalidHandle.code(), 107017);
        assert_eq!(Error::TaskTimeout.code(), 107020);
        assert_eq!(Error::FeatureNotSupport.code(), 207000);
        assert_eq!(Error::NoPermission.code(), 207006);
        assert_eq!(Error::NoNotifyResource.code(), 207009);
        assert_eq!(Error::OverLimit.code(), 207012);
        assert_eq!(Error::LinkTypeNotSupported.code(), 207021);
        assert_eq!(Error::InternalError.code(), 507000);
        assert_eq!(Error::TaskTypeNotSupport.code(), 507009);
        assert_eq!(Error::StreamSyncTimeout.code(), 507046);
    }

    #[test]
    fn display_names_the_code() {
        assert_eq!(
            Error::InvalidHandle.to_string(),
            "ACL_ERROR_RT_INVALID_HANDLE (107017)"
        );
        assert_eq!(Error::check(0), Ok(()));
        assert_eq!(Error::check(207009), Err(Some(Error::NoNotifyResource)));
        assert_eq!(Error::check(-1), Err(None));
    }
}

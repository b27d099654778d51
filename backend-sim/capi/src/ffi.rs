//! The exported C functions (`acl/acl.h`). Each one catches panics, runs SPEC §3's checks in
//! order — the argument checks here, the rest in `runtime::Runtime` — and
//! records a message for `aclGetRecentErrMsg` when it fails.
//!
//! C memory is only touched here: out-parameters are written once every check has passed,
//! arrays are read element by element as the checks reach them.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use acl_notify_core::cnt::{CntRecordInfo, CntWaitInfo};
use acl_notify_core::key::KEY_BUF_LEN;
use acl_notify_core::{
    Backend, CntRecord, CntWait, CreateFlags, Error, HostCall, ServerPid, StreamDestroy,
    StreamStatus, SyncWait,
};

use crate::errmsg::{self, CallError, null_arg, param};
use crate::session::{self, runtime, with_runtime};

/// `aclError`.
pub type aclError = c_int;
/// `aclrtNotify`.
pub type aclrtNotify = *mut c_void;
/// `aclrtStream`.
pub type aclrtStream = *mut c_void;
/// `aclrtCntNotify`.
pub type aclrtCntNotify = *mut c_void;
/// `aclrtCntNotifyRecordInfo` (`{ aclrtCntNotifyRecordMode mode; uint32_t value; }`, 8 bytes).
pub type aclrtCntNotifyRecordInfo = CntRecordInfo;
/// `aclrtCntNotifyWaitInfo` (`{ mode; value; timeout; uint8_t isClear; uint8_t rsv[3]; }`,
/// 16 bytes).
pub type aclrtCntNotifyWaitInfo = CntWaitInfo;
/// `aclrtHostFunc`.
pub type aclrtHostFunc = Option<unsafe extern "C" fn(*mut c_void)>;

/// `aclrtServerPid` (LP64: `sdid` at 0, `pid` at 8, `num` at 16; 24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct aclrtServerPid {
    /// SuperPod server id.
    pub sdid: u32,
    /// The PIDs (exactly one is accepted per entry).
    pub pid: *mut i32,
    /// Number of PIDs at `pid`.
    pub num: usize,
}

const _: () = assert!(std::mem::size_of::<aclrtServerPid>() == 24);
const _: () = assert!(std::mem::offset_of!(aclrtServerPid, pid) == 8);
const _: () = assert!(std::mem::offset_of!(aclrtServerPid, num) == 16);

/// `ACL_ERROR_RT_DRV_INTERNAL_ERROR`: what a call returns if the library panicked.
const PANIC_CODE: Error = Error::DrvInternalError;

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// Runs one C call: catches a panic, turns the result into a code, records a failure.
pub(crate) fn api(name: &str, f: impl FnOnce() -> Result<(), CallError>) -> aclError {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            errmsg::record(name, &e);
            e.code().code()
        }
        Err(payload) => {
            errmsg::note_code(PANIC_CODE);
            errmsg::push(format!(
                "{name} failed: {PANIC_CODE}: internal error in acl-notify (panic: {})",
                panic_text(&*payload)
            ));
            // Dropping a payload runs foreign code; do not let even that unwind out.
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            PANIC_CODE.code()
        }
    }
}

/// Runs a C call that returns a pointer: NULL on failure or panic.
fn api_ptr(name: &str, f: impl FnOnce() -> Result<*const c_char, CallError>) -> *const c_char {
    let mut out = std::ptr::null();
    api(name, || {
        out = f()?;
        Ok(())
    });
    out
}

pub(crate) fn handle(p: *mut c_void) -> usize {
    p.addr()
}

pub(crate) fn to_ptr(h: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(h)
}

// ---- initialisation ------------------------------------------------------------------------

/// `aclError aclInit(const char *configPath)`: opens the simulated machine the
/// `ACL_NOTIFY_SIM_*` variables describe. `configPath` may be NULL and is not read.
///
/// Codes: 100002 already initialised; the simulator's code if the environment is invalid.
#[unsafe(no_mangle)]
pub extern "C" fn aclInit(_config_path: *const c_char) -> aclError {
    api("aclInit", session::init)
}

/// `aclError aclFinalize(void)`: releases every stream and notify of the process.
///
/// Codes: 100037 already finalised.
#[unsafe(no_mangle)]
pub extern "C" fn aclFinalize() -> aclError {
    api("aclFinalize", session::finalize)
}

/// `const char *aclGetRecentErrMsg(void)`: this thread's messages since the last call, newest
/// first, or NULL. The string is valid until the next call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn aclGetRecentErrMsg() -> *const c_char {
    catch_unwind(errmsg::take_recent).unwrap_or(std::ptr::null())
}

// ---- devices ---------------------------------------------------------------------------------

/// `aclError aclrtSetDevice(int32_t deviceId)`: makes `deviceId` the calling thread's current
/// device.
///
/// Codes: 107001.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetDevice(device_id: i32) -> aclError {
    api("aclrtSetDevice", || runtime()?.set_device(device_id))
}

/// `aclError aclrtGetDevice(int32_t *deviceId)`.
///
/// Codes: 100000; 107002.
///
/// # Safety
///
/// `device_id` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDevice(device_id: *mut i32) -> aclError {
    api("aclrtGetDevice", || {
        if device_id.is_null() {
            return Err(null_arg("deviceId"));
        }
        let d = runtime()?.get_device()?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { device_id.write_unaligned(d) };
        Ok(())
    })
}

/// `aclError aclrtResetDevice(int32_t deviceId)`.
///
/// Codes: 107001.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDevice(device_id: i32) -> aclError {
    api("aclrtResetDevice", || {
        runtime()?.reset_device(device_id, false)
    })
}

/// `aclError aclrtResetDeviceForce(int32_t deviceId)`.
///
/// Codes: 107001.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtResetDeviceForce(device_id: i32) -> aclError {
    api("aclrtResetDeviceForce", || {
        runtime()?.reset_device(device_id, true)
    })
}

/// `aclError aclrtGetDeviceCount(uint32_t *count)`.
///
/// Codes: 100000.
///
/// # Safety
///
/// `count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
    api("aclrtGetDeviceCount", || {
        if count.is_null() {
            return Err(null_arg("count"));
        }
        let n = runtime()?.backend().device_count();
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { count.write_unaligned(n) };
        Ok(())
    })
}

/// `ACL_DEV_ATTR_PHY_CHIP_ID`, `ACL_DEV_ATTR_SUPER_POD_DEVICE_ID`,
/// `ACL_DEV_ATTR_SUPER_POD_SERVER_ID` and `ACL_DEV_ATTR_SUPER_POD_ID` (`aclrtDevAttr`): the
/// attributes the simulator answers.
const ATTR_PHY_CHIP_ID: i32 = 402;
const ATTR_SUPER_POD_DEVICE_ID: i32 = 403;
const ATTR_SUPER_POD_SERVER_ID: i32 = 404;
const ATTR_SUPER_POD_ID: i32 = 405;

/// `aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value)`, for the
/// attributes a notify program needs: a process's SuperPOD Device ID is what an owner puts in
/// `aclrtServerPid::sdid` to whitelist it, and the simulator keys inter-server whitelists by
/// the server (`ACL_NOTIFY_SIM_SERVER_ID`), so both 403 and 404 answer that; 402 answers the
/// device id and 405 (the SuperPOD's own id) 0.
///
/// Codes: 100000 value NULL; 107001 no such device; 207000 an attribute the simulator
/// does not model.
///
/// # Safety
///
/// `value` is NULL or valid for writing an `int64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetDeviceInfo(
    device_id: u32,
    attr: i32,
    value: *mut i64,
) -> aclError {
    api("aclrtGetDeviceInfo", || {
        if value.is_null() {
            return Err(null_arg("value"));
        }
        let v = with_runtime(|rt| {
            let dev = rt.device_id(device_id)?;
            Ok(match attr {
                ATTR_PHY_CHIP_ID => i64::from(dev),
                ATTR_SUPER_POD_DEVICE_ID | ATTR_SUPER_POD_SERVER_ID => {
                    i64::from(rt.backend().server_id())
                }
                ATTR_SUPER_POD_ID => 0,
                other => {
                    return Err(CallError::new(
                        Error::FeatureNotSupport,
                        format!(
                            "device attribute {other} is not modelled by the simulator (it \
                             answers 402, 403, 404 and 405: chip id, SuperPOD device id, server \
                             id, SuperPOD id)"
                        ),
                    ));
                }
            })
        })?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { value.write_unaligned(v) };
        Ok(())
    })
}

/// `const char *aclrtGetSocName(void)`: the exact chip name (static storage), e.g.
/// `Ascend910B3`: the session's, or before there is one the chip `ACL_NOTIFY_SIM_SOC` names
/// (a family stands for its first chip), without starting a session. CANN's reads the chip
/// without an initialisation check too (hicann/runtime
/// `src/acl/aclrt_impl/acl_rt_impl_base.cpp`, `aclrtGetSocNameImpl`). NULL (with a message)
/// only if `ACL_NOTIFY_SIM_SOC` names no chip.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtGetSocName() -> *const c_char {
    api_ptr("aclrtGetSocName", || {
        let chip = match session::existing_runtime() {
            Some(rt) => rt.backend().chip(),
            None => acl_notify_sim::Sim::chip_from_env().map_err(CallError::backend)?,
        };
        Ok(chip.c_name().as_ptr())
    })
}

/// `aclError aclrtDeviceCanAccessPeer(int32_t *canAccessPeer, int32_t deviceId,
/// int32_t peerDeviceId)`: writes 1 if `deviceId` can access `peerDeviceId`, else 0.
///
/// Codes: 100000; 107001; the backend's codes.
///
/// # Safety
///
/// `can_access_peer` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
    can_access_peer: *mut i32,
    device_id: i32,
    peer_device_id: i32,
) -> aclError {
    api("aclrtDeviceCanAccessPeer", || {
        if can_access_peer.is_null() {
            return Err(null_arg("canAccessPeer"));
        }
        let yes = runtime()?.can_access_peer(device_id, peer_device_id)?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { can_access_peer.write_unaligned(i32::from(yes)) };
        Ok(())
    })
}

/// `aclError aclrtDeviceEnablePeerAccess(int32_t peerDeviceId, uint32_t flags)`: between the
/// current device and `peerDeviceId`.
///
/// Codes: 107000 flags ≠ 0 (or the peer is the current device); 107002; 107001.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDeviceEnablePeerAccess(peer_device_id: i32, flags: u32) -> aclError {
    api("aclrtDeviceEnablePeerAccess", || {
        runtime()?.enable_peer_access(peer_device_id, flags)
    })
}

/// `aclError aclrtDeviceGetBareTgid(int32_t *pid)`: the calling process's id. Works before
/// `aclInit` too.
///
/// Codes: 100000.
///
/// # Safety
///
/// `pid` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError {
    api("aclrtDeviceGetBareTgid", || {
        if pid.is_null() {
            return Err(null_arg("pid"));
        }
        let me = match session::existing_runtime() {
            Some(rt) => rt.backend().bare_tgid(),
            None => std::process::id() as i32,
        };
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { pid.write_unaligned(me) };
        Ok(())
    })
}

// ---- streams ---------------------------------------------------------------------------------

/// `aclError aclrtCreateStream(aclrtStream *stream)`: a stream on the current device.
///
/// Codes: 100000; 107002; 207005.
///
/// # Safety
///
/// `stream` is NULL or valid for writing an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
    api("aclrtCreateStream", || {
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        let h = runtime()?.create_stream()?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { stream.write_unaligned(to_ptr(h)) };
        Ok(())
    })
}

fn destroy_stream(name: &str, stream: aclrtStream, mode: StreamDestroy) -> aclError {
    api(name, || {
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        runtime()?.destroy_stream(handle(stream), mode)
    })
}

/// `aclError aclrtDestroyStream(aclrtStream stream)`: waits for the queued tasks, then
/// destroys the stream.
///
/// Codes: 100000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
    destroy_stream("aclrtDestroyStream", stream, StreamDestroy::Drain)
}

/// `aclError aclrtDestroyStreamForce(aclrtStream stream)`: discards the queued tasks and
/// destroys the stream.
///
/// Codes: 100000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStreamForce(stream: aclrtStream) -> aclError {
    destroy_stream("aclrtDestroyStreamForce", stream, StreamDestroy::Discard)
}

/// `aclError aclrtSynchronizeStream(aclrtStream stream)`: blocks until every queued task ran.
///
/// Codes: 107017; 107002; 107003; 107020 a wait on the stream timed out (once).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
    api("aclrtSynchronizeStream", || {
        runtime()?.synchronize(handle(stream), SyncWait::Forever)
    })
}

/// `aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout)`: as
/// `aclrtSynchronizeStream`, for at most `timeout` ms (−1 forever, 0 poll).
///
/// Codes: 107000 timeout < −1; 107017; 107002; 107003; 107020; 507046 expired.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSynchronizeStreamWithTimeout(stream: aclrtStream, timeout: i32) -> aclError {
    api("aclrtSynchronizeStreamWithTimeout", || {
        let wait = SyncWait::from_c_ms(timeout)
            .ok_or_else(|| param(format!("timeout {timeout} ms is below -1")))?;
        runtime()?.synchronize(handle(stream), wait)
    })
}

/// `aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status)`.
///
/// Codes: 100000; 107017; 107002; 107003.
///
/// # Safety
///
/// `status` is NULL or valid for writing an `aclrtStreamStatus` (an `int`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtStreamQuery(stream: aclrtStream, status: *mut c_int) -> aclError {
    api("aclrtStreamQuery", || {
        if status.is_null() {
            return Err(null_arg("status"));
        }
        let s = runtime()?.query(handle(stream))?;
        let v = match s {
            StreamStatus::Complete => 0,
            StreamStatus::NotReady => 1,
        };
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { status.write_unaligned(v) };
        Ok(())
    })
}

/// `aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args)`: `fn(args)`
/// runs on a library thread when the stream reaches it.
///
/// Codes: 107000 `fn` NULL; 107017; 107002; 107003.
///
/// # Safety
///
/// `fn(args)` must be safe to call once from another thread at any time until the stream has
/// run it, and must not unwind.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtLaunchHostFunc(
    stream: aclrtStream,
    func: aclrtHostFunc,
    args: *mut c_void,
) -> aclError {
    api("aclrtLaunchHostFunc", || {
        let Some(func) = func else {
            return Err(param("`fn` is NULL"));
        };
        // SAFETY: the caller's contract is `HostCall::new`'s.
        let call = unsafe { HostCall::new(func, args) };
        runtime()?.launch_host_func(handle(stream), call)
    })
}

/// `aclError aclrtSetOpWaitTimeout(uint32_t timeout)`: the process default (seconds, 0 =
/// forever) for waits given `UINT32_MAX` on Ascend310P (elsewhere those wait for ever).
///
/// Codes: the simulator's, if the session cannot start.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetOpWaitTimeout(timeout: u32) -> aclError {
    api("aclrtSetOpWaitTimeout", || {
        runtime()?.set_op_wait_timeout(timeout)
    })
}

// ---- notifies --------------------------------------------------------------------------------

/// `aclError aclrtCreateNotify(aclrtNotify *notify, uint64_t flag)`.
///
/// Codes: 100000; 107000 flag ∉ {0, 1}; 107002; 207000; 207009.
///
/// # Safety
///
/// `notify` is NULL or valid for writing an `aclrtNotify`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError {
    api("aclrtCreateNotify", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        let flags = CreateFlags::from_raw(flag).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "flag {flag:#x} is neither ACL_NOTIFY_DEFAULT nor ACL_NOTIFY_DEVICE_USE_ONLY"
                ),
            )
        })?;
        let h = with_runtime(|rt| rt.create_notify(flags))?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { notify.write_unaligned(to_ptr(h)) };
        Ok(())
    })
}

/// `aclError aclrtDestroyNotify(aclrtNotify notify)`.
///
/// Codes: 100000; 107017.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyNotify(notify: aclrtNotify) -> aclError {
    api("aclrtDestroyNotify", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        with_runtime(|rt| rt.destroy_notify(handle(notify)))
    })
}

/// `aclError aclrtRecordNotify(aclrtNotify notify, aclrtStream stream)`.
///
/// Codes: 100000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtRecordNotify(notify: aclrtNotify, stream: aclrtStream) -> aclError {
    api("aclrtRecordNotify", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        runtime()?.record(handle(notify), handle(stream))
    })
}

/// `aclError aclrtWaitAndResetNotify(aclrtNotify notify, aclrtStream stream, uint32_t timeout)`.
///
/// Codes: 100000; 107017; 107002; 107003; 107000 not the owner's device.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtWaitAndResetNotify(
    notify: aclrtNotify,
    stream: aclrtStream,
    timeout: u32,
) -> aclError {
    api("aclrtWaitAndResetNotify", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        runtime()?.wait_and_reset(handle(notify), handle(stream), timeout)
    })
}

/// `aclError aclrtGetNotifyId(aclrtNotify notify, uint32_t *notifyId)`.
///
/// Codes: 100000; 107017.
///
/// # Safety
///
/// `notify_id` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetNotifyId(notify: aclrtNotify, notify_id: *mut u32) -> aclError {
    api("aclrtGetNotifyId", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        if notify_id.is_null() {
            return Err(null_arg("notifyId"));
        }
        let id = with_runtime(|rt| rt.notify_id(handle(notify)))?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { notify_id.write_unaligned(id) };
        Ok(())
    })
}

/// `aclError aclrtNotifyBatchReset(aclrtNotify *notifies, size_t num)`.
///
/// Codes: 100000; 107000 num 0; then per element: 207000; 107000 NULL; 107017; 507009.
///
/// # Safety
///
/// `notifies` is NULL or valid for reading `num` handles (elements after the first failing
/// one are not read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifyBatchReset(notifies: *mut aclrtNotify, num: usize) -> aclError {
    api("aclrtNotifyBatchReset", || {
        if notifies.is_null() {
            return Err(null_arg("notifies"));
        }
        if num == 0 {
            return Err(param("num is 0"));
        }
        with_runtime(|rt| {
            rt.batch_reset(num, |i| {
                // SAFETY: i < num, and the caller guarantees `num` readable elements.
                handle(unsafe { notifies.add(i).read_unaligned() })
            })
        })
    })
}

/// `aclError aclrtNotifyGetExportKey(aclrtNotify notify, char *key, size_t len,
/// uint64_t flags)`: writes the NUL-terminated key (64 characters) to `key`.
///
/// Codes: 100000; 107017; 107000 len < 65; 207000; 107000 flags; 507000.
///
/// # Safety
///
/// `key` is NULL or valid for writing `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifyGetExportKey(
    notify: aclrtNotify,
    key: *mut c_char,
    len: usize,
    flags: u64,
) -> aclError {
    api("aclrtNotifyGetExportKey", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        if key.is_null() {
            return Err(null_arg("key"));
        }
        // The key goes from the backend's answer straight into the caller's buffer, inside
        // the session's closure: no copy of it is moved out through the layers in between.
        with_runtime(|rt| {
            let k = rt.export_key(handle(notify), len, flags)?;
            // SAFETY: `export_key` checked len >= KEY_BUF_LEN, and the caller guarantees
            // `len` writable bytes at `key`; only the first KEY_BUF_LEN are touched.
            let buf = unsafe { std::slice::from_raw_parts_mut(key.cast::<u8>(), KEY_BUF_LEN) };
            k.write_c(buf).map_err(|e| CallError::new(e, "key buffer"))
        })
    })
}

/// `aclError aclrtNotifySetImportPid(aclrtNotify notify, int32_t *pid, size_t num)`.
///
/// Codes: 100000; 207000; 107017; 107000 num 0, num > INT32_MAX or not exported;
/// 207006; 207012.
///
/// # Safety
///
/// `pid` is NULL or valid for reading `num` `int32_t`s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifySetImportPid(
    notify: aclrtNotify,
    pid: *mut i32,
    num: usize,
) -> aclError {
    api("aclrtNotifySetImportPid", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        if pid.is_null() {
            return Err(null_arg("pid"));
        }
        with_runtime(|rt| {
            rt.set_import_pids(handle(notify), num, |take| {
                // SAFETY: non-NULL; `take <= num` (and at most 65, so in range for a slice),
                // and the caller guarantees `num` readable, initialised elements (aligned as
                // `int32_t *` is in C).
                unsafe { std::slice::from_raw_parts(pid.cast_const(), take) }
            })
        })
    })
}

/// `aclError aclrtNotifySetImportPidInterServer(aclrtNotify notify,
/// aclrtServerPid *serverPids, size_t num)`. No 100000 here: NULL arguments are 107000.
///
/// Codes: 107000 notify/serverPids NULL or num 0; 107017; per entry: 107000 pid NULL or
/// num ≠ 1; 207000; then as `aclrtNotifySetImportPid`.
///
/// # Safety
///
/// `server_pids` is NULL or valid for reading `num` entries, and each entry's `pid` is NULL or
/// valid for reading one `int32_t` (entries after the first failing one are not read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifySetImportPidInterServer(
    notify: aclrtNotify,
    server_pids: *mut aclrtServerPid,
    num: usize,
) -> aclError {
    api("aclrtNotifySetImportPidInterServer", || {
        if notify.is_null() {
            return Err(param("`notify` is NULL"));
        }
        if server_pids.is_null() {
            return Err(param("`serverPids` is NULL"));
        }
        if num == 0 {
            return Err(param("num is 0"));
        }
        let entry = |i: usize| {
            // SAFETY: callers pass i < num, and the caller guarantees `num` readable entries.
            unsafe { server_pids.add(i).read_unaligned() }
        };
        runtime()?.set_import_server_pids(
            handle(notify),
            num,
            |i| {
                let e = entry(i);
                (!e.pid.is_null(), e.num)
            },
            |i| {
                let e = entry(i);
                ServerPid {
                    sdid: e.sdid,
                    // SAFETY: the shape check saw a non-NULL `pid` with num == 1, which the
                    // caller guarantees readable.
                    pid: unsafe { e.pid.read_unaligned() },
                }
            },
        )
    })
}

/// `aclError aclrtNotifyImportByKey(aclrtNotify *notify, const char *key, uint64_t flags)`:
/// a handle, on the current device, to the notify another process exported.
///
/// Codes: 100000; 207000; 107000 flags; 107002; 107000 malformed key; 107017; 207006.
///
/// # Safety
///
/// `notify` is NULL or valid for writing an `aclrtNotify`; `key` is NULL or a NUL-terminated
/// string (at most 65 bytes of it are read).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtNotifyImportByKey(
    notify: *mut aclrtNotify,
    key: *const c_char,
    flags: u64,
) -> aclError {
    api("aclrtNotifyImportByKey", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        if key.is_null() {
            return Err(null_arg("key"));
        }
        // SAFETY: the caller guarantees a NUL-terminated string; `strnlen` stops at its NUL
        // and reads at most KEY_BUF_LEN bytes.
        let n = unsafe { libc::strnlen(key, KEY_BUF_LEN) };
        // SAFETY: the `n` bytes before the NUL are readable (strnlen just read them) and stay
        // so for the call; they are only read.
        let text =
            (n < KEY_BUF_LEN).then(|| unsafe { std::slice::from_raw_parts(key.cast::<u8>(), n) });
        let h = with_runtime(|rt| rt.import_by_key(text, flags))?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { notify.write_unaligned(to_ptr(h)) };
        Ok(())
    })
}

// ---- count notifies (SPEC §6) ----------------------------------------------------------------
//
// Check order: NULL info → 100000 (the ACL layer); NULL count-notify handle or out-pointer →
// 107000 (the runtime layer, as in CANN); flag ≠ 0 or an unknown mode → 107000; then (the
// session started if need be) 207000 on a SoC without count notifies; 107017; and for stream
// calls 107017/107002/107003.

fn cnt_null(what: &str) -> CallError {
    param(format!("`{what}` is NULL"))
}

/// `aclError aclrtCntNotifyCreate(aclrtCntNotify *cntNotify, uint64_t flag)`: a count notify
/// (count 0) on the current device.
///
/// Codes: 107000 `cntNotify` NULL or flag ≠ 0; 207000; 107002; 207009.
///
/// # Safety
///
/// `cnt_notify` is NULL or valid for writing an `aclrtCntNotify`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyCreate(
    cnt_notify: *mut aclrtCntNotify,
    flag: u64,
) -> aclError {
    api("aclrtCntNotifyCreate", || {
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        if flag != 0 {
            return Err(param(format!("flag {flag:#x} must be 0 (reserved)")));
        }
        let h = runtime()?.cnt_create()?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { cnt_notify.write_unaligned(to_ptr(h)) };
        Ok(())
    })
}

/// `aclError aclrtCntNotifyDestroy(aclrtCntNotify cntNotify)`. Queued tasks that use it still
/// run.
///
/// Codes: 107000 NULL; 207000; 107017.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCntNotifyDestroy(cnt_notify: aclrtCntNotify) -> aclError {
    api("aclrtCntNotifyDestroy", || {
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        runtime()?.cnt_destroy(handle(cnt_notify))
    })
}

/// `aclError aclrtCntNotifyRecord(aclrtCntNotify cntNotify, aclrtStream stream,
/// aclrtCntNotifyRecordInfo *info)`: when the stream reaches it, applies `info` to the count.
///
/// Codes: 100000 `info` NULL; 107000 `cntNotify` NULL or mode ∉ {0, 1, 2, 4}; 207000;
/// 107017; 107002; 107003.
///
/// # Safety
///
/// `info` is NULL or valid for reading an `aclrtCntNotifyRecordInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyRecord(
    cnt_notify: aclrtCntNotify,
    stream: aclrtStream,
    info: *mut aclrtCntNotifyRecordInfo,
) -> aclError {
    api("aclrtCntNotifyRecord", || {
        if info.is_null() {
            return Err(null_arg("info"));
        }
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        // SAFETY: non-NULL, and the caller guarantees one readable struct; any bytes are a
        // valid `CntRecordInfo` (two `u32`s).
        let raw = unsafe { info.read_unaligned() };
        let record = CntRecord::from_info(&raw).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "info->mode {} is not a record mode (SET_VALUE 0, ADD 1, BIT_OR 2, BIT_AND 4)",
                    raw.mode
                ),
            )
        })?;
        runtime()?.cnt_record(handle(cnt_notify), handle(stream), record)
    })
}

/// `aclError aclrtCntNotifyWaitWithTimeout(aclrtCntNotify cntNotify, aclrtStream stream,
/// aclrtCntNotifyWaitInfo *info)`: when the stream reaches it, stalls until the condition
/// holds (then clears the count if `info->isClear`). `info->timeout` in seconds, 0 = forever;
/// expiry is reported by the next synchronize (107020).
///
/// Codes: 100000 `info` NULL; 107000 `cntNotify` NULL or mode ≥ 5; 207000; 107017;
/// 107002; 107003; 107000 the stream is not on the count notify's device.
///
/// # Safety
///
/// `info` is NULL or valid for reading an `aclrtCntNotifyWaitInfo`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyWaitWithTimeout(
    cnt_notify: aclrtCntNotify,
    stream: aclrtStream,
    info: *mut aclrtCntNotifyWaitInfo,
) -> aclError {
    api("aclrtCntNotifyWaitWithTimeout", || {
        if info.is_null() {
            return Err(null_arg("info"));
        }
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        // SAFETY: non-NULL, and the caller guarantees one readable struct; every field of
        // `CntWaitInfo` is an integer (`isClear` is read as a byte, not a Rust `bool`), so any
        // bytes are a valid value.
        let raw = unsafe { info.read_unaligned() };
        let wait = CntWait::from_info(&raw).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "info->mode {} is not a wait mode (LESS 0, EQUAL 1, BIGGER 2, \
                     BIGGER_OR_EQUAL 3, EQUAL_WITH_BITMASK 4)",
                    raw.mode
                ),
            )
        })?;
        runtime()?.cnt_wait(handle(cnt_notify), handle(stream), wait)
    })
}

/// `aclError aclrtCntNotifyReset(aclrtCntNotify cntNotify, aclrtStream stream)`: when the
/// stream reaches it, sets the count to 0.
///
/// Codes: 107000 NULL; 207000; 107017; 107002; 107003.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCntNotifyReset(cnt_notify: aclrtCntNotify, stream: aclrtStream) -> aclError {
    api("aclrtCntNotifyReset", || {
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        runtime()?.cnt_record(handle(cnt_notify), handle(stream), CntRecord::set(0))
    })
}

/// `aclError aclrtCntNotifyGetId(aclrtCntNotify cntNotify, uint32_t *notifyId)`.
///
/// Codes: 107000 either argument NULL; 207000; 107017.
///
/// # Safety
///
/// `notify_id` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCntNotifyGetId(
    cnt_notify: aclrtCntNotify,
    notify_id: *mut u32,
) -> aclError {
    api("aclrtCntNotifyGetId", || {
        if cnt_notify.is_null() {
            return Err(cnt_null("cntNotify"));
        }
        if notify_id.is_null() {
            return Err(cnt_null("notifyId"));
        }
        let id = runtime()?.cnt_id(handle(cnt_notify))?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { notify_id.write_unaligned(id) };
        Ok(())
    })
}

// ---- extensions (`acl/aclnsim.h`): host-side waits and budgets, beyond CANN -------------------

/// `aclError aclnsimNotifyHostWait(aclrtNotify notify, uint64_t timeoutUs)`: blocks the calling
/// thread until the notify is recorded, then resets it (consuming the record as a stream wait
/// would). `UINT64_MAX` waits forever.
///
/// Codes: 100000; 107017; 107002; 107000 the current device is not the owner's; 107019
/// timed out.
#[unsafe(no_mangle)]
pub extern "C" fn aclnsimNotifyHostWait(notify: aclrtNotify, timeout_us: u64) -> aclError {
    api("aclnsimNotifyHostWait", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        let t = (timeout_us != u64::MAX).then(|| std::time::Duration::from_micros(timeout_us));
        runtime()?.host_wait(handle(notify), t)
    })
}

/// `aclError aclnsimNotifyTryConsume(aclrtNotify notify, int32_t *consumed)`: if the flag is
/// set, resets it and writes 1, else writes 0. Never blocks.
///
/// Codes: 100000; 107017; 107002; 107000 the current device is not the owner's.
///
/// # Safety
///
/// `consumed` is NULL or valid for writing an `int32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimNotifyTryConsume(
    notify: aclrtNotify,
    consumed: *mut i32,
) -> aclError {
    api("aclnsimNotifyTryConsume", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        if consumed.is_null() {
            return Err(null_arg("consumed"));
        }
        let yes = runtime()?.try_consume(handle(notify))?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { consumed.write_unaligned(i32::from(yes)) };
        Ok(())
    })
}

/// `aclError aclnsimNotifyGetMergedRecords(aclrtNotify notify, uint32_t *sinceLastWait,
/// uint32_t *total)`: how many records of the notify landed on an already-set flag and merged
/// into the pending record (SPEC §1), since the last wait took a record and in the notify's
/// life, across every process that records it.
///
/// Codes: 100000; 107017.
///
/// # Safety
///
/// `since_last_wait` and `total` are each NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimNotifyGetMergedRecords(
    notify: aclrtNotify,
    since_last_wait: *mut u32,
    total: *mut u32,
) -> aclError {
    api("aclnsimNotifyGetMergedRecords", || {
        if notify.is_null() {
            return Err(null_arg("notify"));
        }
        if since_last_wait.is_null() {
            return Err(null_arg("sinceLastWait"));
        }
        if total.is_null() {
            return Err(null_arg("total"));
        }
        let (run, all) = runtime()?.merged_records(handle(notify))?;
        // SAFETY: both non-NULL, and the caller guarantees they are writable.
        unsafe {
            since_last_wait.write_unaligned(run);
            total.write_unaligned(all);
        }
        Ok(())
    })
}

/// `aclError aclnsimGetNotifyFreeCount(int32_t deviceId, uint32_t *count)`: notify ids still
/// free on the device, across every process of the simulated machine.
///
/// Codes: 100000; 107001; 207000 notifies unsupported.
///
/// # Safety
///
/// `count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimGetNotifyFreeCount(device_id: i32, count: *mut u32) -> aclError {
    api("aclnsimGetNotifyFreeCount", || {
        if count.is_null() {
            return Err(null_arg("count"));
        }
        let n = runtime()?.notifies_free(device_id)?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { count.write_unaligned(n) };
        Ok(())
    })
}

/// `aclError aclnsimGetCntNotifyFreeCount(int32_t deviceId, uint32_t *count)`: count-notify ids
/// still free on the device, across every process of the simulated machine.
///
/// Codes: 100000; 207000 count notifies unsupported; 107001.
///
/// # Safety
///
/// `count` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimGetCntNotifyFreeCount(device_id: i32, count: *mut u32) -> aclError {
    api("aclnsimGetCntNotifyFreeCount", || {
        if count.is_null() {
            return Err(null_arg("count"));
        }
        let n = runtime()?.cnt_notifies_free(device_id)?;
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { count.write_unaligned(n) };
        Ok(())
    })
}

/// `aclError aclnsimGetServerId(uint32_t *serverId)`: the SuperPod server this process runs on
/// (`ACL_NOTIFY_SIM_SERVER_ID`).
///
/// Codes: 100000.
///
/// # Safety
///
/// `server_id` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclnsimGetServerId(server_id: *mut u32) -> aclError {
    api("aclnsimGetServerId", || {
        if server_id.is_null() {
            return Err(null_arg("serverId"));
        }
        let id = runtime()?.backend().server_id();
        // SAFETY: non-NULL, and the caller guarantees it is writable.
        unsafe { server_id.write_unaligned(id) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn recent() -> String {
        let p = aclGetRecentErrMsg();
        assert!(!p.is_null(), "no message recorded");
        // SAFETY: non-NULL messages are NUL-terminated and live until the next call.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    #[test]
    fn null_checks_come_before_the_session_start() {
        // These run without a session and start none: the argument checks come first (a
        // call that passes them would start the process's session, which the C tests do).
        // SAFETY: NULL pointers are valid arguments.
        unsafe {
            assert_eq!(aclrtCreateNotify(std::ptr::null_mut(), 0), 100000);
            assert!(recent().contains("aclrtCreateNotify failed: ACL_ERROR_INVALID_PARAM"));
            assert_eq!(aclrtGetNotifyId(to_ptr(1), std::ptr::null_mut()), 100000);
            assert_eq!(aclrtNotifyBatchReset(std::ptr::null_mut(), 1), 100000);
            let mut n = std::ptr::null_mut();
            assert_eq!(aclrtNotifyBatchReset(&mut n, 0), 107000);
            assert_eq!(
                aclrtNotifySetImportPidInterServer(std::ptr::null_mut(), std::ptr::null_mut(), 0),
                107000
            );
            let mut pid = 0;
            assert_eq!(aclrtDeviceGetBareTgid(&mut pid), 0);
            assert_eq!(pid, std::process::id() as i32);
        }
        // The chip name is answered without a session.
        let chip = acl_notify_sim::Sim::chip_from_env().unwrap();
        // SAFETY: aclrtGetSocName returns NULL or a static NUL-terminated string.
        let name = unsafe { std::ffi::CStr::from_ptr(aclrtGetSocName()) };
        assert_eq!(name, chip.c_name());
        assert!(
            session::existing_runtime().is_none(),
            "a session was started"
        );
    }

    #[test]
    fn cnt_argument_checks_come_first() {
        let mut info = CntRecordInfo { mode: 3, value: 0 };
        let mut wait = CntWaitInfo {
            mode: 5,
            ..CntWaitInfo::default()
        };
        let mut id = 0u32;
        // SAFETY: NULL or valid pointers to live locals.
        unsafe {
            assert_eq!(aclrtCntNotifyCreate(std::ptr::null_mut(), 0), 107000);
            let mut c = std::ptr::null_mut();
            assert_eq!(aclrtCntNotifyCreate(&mut c, 1), 107000);
            assert_eq!(aclrtCntNotifyDestroy(std::ptr::null_mut()), 107000);
            assert_eq!(
                aclrtCntNotifyRecord(to_ptr(1), std::ptr::null_mut(), std::ptr::null_mut()),
                100000
            );
            assert_eq!(
                aclrtCntNotifyRecord(std::ptr::null_mut(), std::ptr::null_mut(), &mut info),
                107000
            );
            assert_eq!(
                aclrtCntNotifyRecord(to_ptr(1), std::ptr::null_mut(), &mut info),
                107000,
                "mode 3"
            );
            assert!(recent().contains("info->mode 3"));
            assert_eq!(
                aclrtCntNotifyWaitWithTimeout(
                    to_ptr(1),
                    std::ptr::null_mut(),
                    std::ptr::null_mut()
                ),
                100000
            );
            assert_eq!(
                aclrtCntNotifyWaitWithTimeout(to_ptr(1), std::ptr::null_mut(), &mut wait),
                107000,
                "mode 5"
            );
            assert_eq!(
                aclrtCntNotifyReset(std::ptr::null_mut(), std::ptr::null_mut()),
                107000
            );
            assert_eq!(aclrtCntNotifyGetId(std::ptr::null_mut(), &mut id), 107000);
            assert_eq!(aclrtCntNotifyGetId(to_ptr(1), std::ptr::null_mut()), 107000);
        }
        assert_eq!(std::mem::size_of::<aclrtCntNotifyRecordInfo>(), 8);
        assert_eq!(std::mem::size_of::<aclrtCntNotifyWaitInfo>(), 16);
    }

    #[test]
    fn server_pid_layout() {
        assert_eq!(std::mem::size_of::<aclrtServerPid>(), 24);
        assert_eq!(std::mem::offset_of!(aclrtServerPid, sdid), 0);
    }

    #[test]
    fn a_panic_becomes_a_code_and_a_message() {
        let code = api("aclrtTest", || panic!("boom"));
        assert_eq!(code, 507899);
        let m = recent();
        assert!(m.contains("aclrtTest failed") && m.contains("boom"), "{m}");
    }
}

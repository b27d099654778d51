//! The C side: CANN's types as they are laid out in `acl_rt.h`, and every function this binding
//! calls, resolved once from the loaded library into a struct of function pointers ([`Api`]).
//!
//! Required symbols are the notify API of SPEC §3 plus the supporting calls this binding uses;
//! a library missing any of them is refused at load, with every missing name listed. Optional
//! symbols (`aclFinalizeReference` and the `aclnsim*` extensions) are looked up too, and their
//! absence only turns the corresponding feature off.

use core::ffi::{c_char, c_int, c_void};

use libloading::Library;

/// `aclError`.
pub(crate) type AclError = c_int;

/// `aclrtServerPid` (`acl_rt.h`): one whitelist entry of `aclrtNotifySetImportPidInterServer`.
/// `pid` points at `num` process ids on server `sdid`; this binding always uses `num == 1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct AclrtServerPid {
    pub sdid: u32,
    pub pid: *mut i32,
    pub num: usize,
}

/// `entries` as CANN's `aclrtServerPid` array, one PID per element (`num == 1`): the PIDs,
/// and the elements pointing into them. Both get one spare element so that every pointer is
/// in bounds even for no entries; pass `entries.len()` as the count. The PID vector must
/// outlive every use of the elements (moving it keeps its buffer in place).
pub(crate) fn server_pid_array(
    entries: &[acl_notify_core::ServerPid],
) -> (Vec<i32>, Vec<AclrtServerPid>) {
    let mut pids: Vec<i32> = entries.iter().map(|s| s.pid).collect();
    pids.push(0);
    let base = pids.as_mut_ptr();
    let sdids = entries.iter().map(|s| s.sdid).chain([0]);
    let elems = sdids
        .enumerate()
        .map(|(k, sdid)| AclrtServerPid {
            sdid,
            pid: base.wrapping_add(k),
            num: 1,
        })
        .collect();
    (pids, elems)
}

// The LP64 layout SPEC §3 fixes (offsets 0/8/16, size 24). CANN only ships for 64-bit Linux.
#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(core::mem::size_of::<AclrtServerPid>() == 24);
    assert!(core::mem::align_of::<AclrtServerPid>() == 8);
    assert!(core::mem::offset_of!(AclrtServerPid, sdid) == 0);
    assert!(core::mem::offset_of!(AclrtServerPid, pid) == 8);
    assert!(core::mem::offset_of!(AclrtServerPid, num) == 16);
};

/// `aclrtStreamStatus` values.
pub(crate) const ACL_STREAM_STATUS_COMPLETE: i32 = 0;
pub(crate) const ACL_STREAM_STATUS_NOT_READY: i32 = 1;

/// `ACL_DEV_ATTR_SUPER_POD_DEVICE_ID` (`aclrtDevAttr`, 403): a device's SuperPOD Device ID
/// (SDID), the value `aclrtServerPid::sdid` holds. Not `ACL_DEV_ATTR_SUPER_POD_SERVER_ID`
/// (404), the id of the server the device is in.
pub(crate) const ACL_DEV_ATTR_SUPER_POD_DEVICE_ID: i32 = 403;

/// `aclrtHostFunc`.
pub(crate) type HostFn = unsafe extern "C" fn(*mut c_void);

macro_rules! api {
    (
        required { $( $(#[$rdoc:meta])* $rf:ident : $rty:ty = $rname:literal, )* }
        optional { $( $(#[$odoc:meta])* $of:ident : $oty:ty = $oname:literal, )* }
    ) => {
        /// Every C function this binding calls, resolved once at load.
        #[allow(non_snake_case)]
        pub(crate) struct Api {
            $( $(#[$rdoc])* pub $rf: $rty, )*
            $( $(#[$odoc])* pub $of: Option<$oty>, )*
        }

        impl Api {
            /// The names a library must export.
            pub const REQUIRED: &'static [&'static str] = &[$($rname),*];
            /// The names that are used when present.
            pub const OPTIONAL: &'static [&'static str] = &[$($oname),*];

            /// Resolves every symbol. On failure returns each missing required symbol with the
            /// `dlsym` error text.
            ///
            /// # Safety
            ///
            /// `lib` must be a CANN runtime library (or one exporting the same C ABI): each symbol
            /// found under one of these names must be a function with the C signature this
            /// struct gives it. The pointers are only valid while `lib` stays loaded.
            #[allow(non_snake_case)]
            pub unsafe fn resolve(lib: &Library) -> Result<Api, Vec<(&'static str, String)>> {
                let mut missing: Vec<(&'static str, String)> = Vec::new();
                $(
                    let $rf = match lookup(lib, concat!($rname, "\0")) {
                        Ok(p) => Some(p),
                        Err(e) => {
                            missing.push(($rname, e));
                            None
                        }
                    };
                )*
                $( let Some($rf) = $rf else { return Err(missing) }; )*
                Ok(Api {
                    $(
                        // SAFETY: the symbol is non-null and, by this function's contract, a C
                        // function of exactly this signature; a data pointer and a function
                        // pointer have the same size and representation on every target CANN
                        // supports (POSIX requires it for `dlsym`).
                        $rf: unsafe { core::mem::transmute::<*mut c_void, $rty>($rf) },
                    )*
                    $(
                        $of: lookup(lib, concat!($oname, "\0")).ok().map(|p| {
                            // SAFETY: as for the required symbols above.
                            unsafe { core::mem::transmute::<*mut c_void, $oty>(p) }
                        }),
                    )*
                })
            }

            /// The optional symbols the library exports.
            pub fn optional_present(&self) -> Vec<&'static str> {
                let mut v = Vec::new();
                $( if self.$of.is_some() { v.push($oname); } )*
                v
            }
        }
    };
}

/// Looks up one NUL-terminated symbol name; a null address counts as missing.
fn lookup(lib: &Library, name: &'static str) -> Result<*mut c_void, String> {
    // SAFETY: the symbol is read as an address (`*mut c_void`), which is what `dlsym` returns;
    // nothing is called or dereferenced here.
    let sym = unsafe { lib.get::<*mut c_void>(name) };
    match sym {
        Ok(sym) => {
            let p: *mut c_void = *sym;
            if p.is_null() {
                Err("symbol resolves to a null address".to_owned())
            } else {
                Ok(p)
            }
        }
        Err(e) => Err(e.to_string()),
    }
}

api! {
    required {
        aclInit: unsafe extern "C" fn(*const c_char) -> AclError = "aclInit",
        aclFinalize: unsafe extern "C" fn() -> AclError = "aclFinalize",
        aclGetRecentErrMsg: unsafe extern "C" fn() -> *const c_char = "aclGetRecentErrMsg",
        aclrtGetSocName: unsafe extern "C" fn() -> *const c_char = "aclrtGetSocName",
        aclrtGetDeviceCount: unsafe extern "C" fn(*mut u32) -> AclError = "aclrtGetDeviceCount",
        aclrtSetDevice: unsafe extern "C" fn(i32) -> AclError = "aclrtSetDevice",
        aclrtDeviceGetBareTgid: unsafe extern "C" fn(*mut i32) -> AclError =
            "aclrtDeviceGetBareTgid",
        aclrtDeviceCanAccessPeer: unsafe extern "C" fn(*mut i32, i32, i32) -> AclError =
            "aclrtDeviceCanAccessPeer",
        aclrtDeviceEnablePeerAccess: unsafe extern "C" fn(i32, u32) -> AclError =
            "aclrtDeviceEnablePeerAccess",
        aclrtCreateStream: unsafe extern "C" fn(*mut *mut c_void) -> AclError = "aclrtCreateStream",
        aclrtDestroyStream: unsafe extern "C" fn(*mut c_void) -> AclError = "aclrtDestroyStream",
        aclrtDestroyStreamForce: unsafe extern "C" fn(*mut c_void) -> AclError =
            "aclrtDestroyStreamForce",
        aclrtSynchronizeStream: unsafe extern "C" fn(*mut c_void) -> AclError =
            "aclrtSynchronizeStream",
        aclrtSynchronizeStreamWithTimeout: unsafe extern "C" fn(*mut c_void, i32) -> AclError =
            "aclrtSynchronizeStreamWithTimeout",
        aclrtStreamQuery: unsafe extern "C" fn(*mut c_void, *mut i32) -> AclError =
            "aclrtStreamQuery",
        aclrtLaunchHostFunc: unsafe extern "C" fn(*mut c_void, HostFn, *mut c_void) -> AclError =
            "aclrtLaunchHostFunc",
        aclrtSetOpWaitTimeout: unsafe extern "C" fn(u32) -> AclError = "aclrtSetOpWaitTimeout",
        aclrtCreateNotify: unsafe extern "C" fn(*mut *mut c_void, u64) -> AclError =
            "aclrtCreateNotify",
        aclrtDestroyNotify: unsafe extern "C" fn(*mut c_void) -> AclError = "aclrtDestroyNotify",
        aclrtRecordNotify: unsafe extern "C" fn(*mut c_void, *mut c_void) -> AclError =
            "aclrtRecordNotify",
        aclrtWaitAndResetNotify: unsafe extern "C" fn(*mut c_void, *mut c_void, u32) -> AclError =
            "aclrtWaitAndResetNotify",
        aclrtGetNotifyId: unsafe extern "C" fn(*mut c_void, *mut u32) -> AclError =
            "aclrtGetNotifyId",
        aclrtNotifyBatchReset: unsafe extern "C" fn(*mut *mut c_void, usize) -> AclError =
            "aclrtNotifyBatchReset",
        aclrtNotifyGetExportKey:
            unsafe extern "C" fn(*mut c_void, *mut c_char, usize, u64) -> AclError =
            "aclrtNotifyGetExportKey",
        aclrtNotifySetImportPid: unsafe extern "C" fn(*mut c_void, *mut i32, usize) -> AclError =
            "aclrtNotifySetImportPid",
        aclrtNotifySetImportPidInterServer:
            unsafe extern "C" fn(*mut c_void, *mut AclrtServerPid, usize) -> AclError =
            "aclrtNotifySetImportPidInterServer",
        aclrtNotifyImportByKey:
            unsafe extern "C" fn(*mut *mut c_void, *const c_char, u64) -> AclError =
            "aclrtNotifyImportByKey",
    }
    optional {
        /// `aclError aclFinalizeReference(uint64_t *refCount)` (recent CANN): drops one
        /// `aclInit` reference instead of tearing the runtime down for everybody.
        aclFinalizeReference: unsafe extern "C" fn(*mut u64) -> AclError = "aclFinalizeReference",
        /// `aclError aclrtGetDeviceInfo(uint32_t deviceId, aclrtDevAttr attr, int64_t *value)`
        /// (recent CANN): used for `ACL_DEV_ATTR_SUPER_POD_DEVICE_ID`.
        aclrtGetDeviceInfo: unsafe extern "C" fn(u32, i32, *mut i64) -> AclError =
            "aclrtGetDeviceInfo",
        /// `aclError aclnsimNotifyHostWait(aclrtNotify notify, uint64_t timeoutUs)`: blocks the
        /// calling thread until the notify is recorded, then resets it; the current device must
        /// be the owner's (else 107000); 107019 after `timeoutUs` microseconds
        /// (`UINT64_MAX` = forever).
        aclnsimNotifyHostWait: unsafe extern "C" fn(*mut c_void, u64) -> AclError =
            "aclnsimNotifyHostWait",
        /// `aclError aclnsimNotifyTryConsume(aclrtNotify notify, int32_t *consumed)`: if the flag
        /// is set, resets it and writes 1, else writes 0; never blocks. Same device rule.
        aclnsimNotifyTryConsume: unsafe extern "C" fn(*mut c_void, *mut i32) -> AclError =
            "aclnsimNotifyTryConsume",
        /// `aclError aclnsimGetNotifyFreeCount(int32_t deviceId, uint32_t *count)`: notify ids
        /// still free on the device, across every process (107001 bad device; 207000 notifies
        /// unsupported).
        aclnsimGetNotifyFreeCount: unsafe extern "C" fn(i32, *mut u32) -> AclError =
            "aclnsimGetNotifyFreeCount",
        /// `aclError aclnsimGetServerId(uint32_t *serverId)`: the SuperPod server (sdid) this
        /// process runs on.
        aclnsimGetServerId: unsafe extern "C" fn(*mut u32) -> AclError = "aclnsimGetServerId",
        /// `aclError aclrtCntNotifyCreate(aclrtCntNotify *cntNotify, uint64_t flag)` (CANN for
        /// the 950 family; all `aclrtCntNotify*` below likewise).
        aclrtCntNotifyCreate: unsafe extern "C" fn(*mut *mut c_void, u64) -> AclError =
            "aclrtCntNotifyCreate",
        /// `aclError aclrtCntNotifyDestroy(aclrtCntNotify cntNotify)`.
        aclrtCntNotifyDestroy: unsafe extern "C" fn(*mut c_void) -> AclError =
            "aclrtCntNotifyDestroy",
        /// `aclError aclrtCntNotifyRecord(aclrtCntNotify, aclrtStream,
        /// aclrtCntNotifyRecordInfo *)`.
        aclrtCntNotifyRecord: unsafe extern "C" fn(
            *mut c_void,
            *mut c_void,
            *mut acl_notify_core::cnt::CntRecordInfo,
        ) -> AclError = "aclrtCntNotifyRecord",
        /// `aclError aclrtCntNotifyWaitWithTimeout(aclrtCntNotify, aclrtStream,
        /// aclrtCntNotifyWaitInfo *)`.
        aclrtCntNotifyWaitWithTimeout: unsafe extern "C" fn(
            *mut c_void,
            *mut c_void,
            *mut acl_notify_core::cnt::CntWaitInfo,
        ) -> AclError = "aclrtCntNotifyWaitWithTimeout",
        /// `aclError aclrtCntNotifyReset(aclrtCntNotify, aclrtStream)`.
        aclrtCntNotifyReset: unsafe extern "C" fn(*mut c_void, *mut c_void) -> AclError =
            "aclrtCntNotifyReset",
        /// `aclError aclrtCntNotifyGetId(aclrtCntNotify, uint32_t *notifyId)`.
        aclrtCntNotifyGetId: unsafe extern "C" fn(*mut c_void, *mut u32) -> AclError =
            "aclrtCntNotifyGetId",
        /// `aclError aclnsimGetCntNotifyFreeCount(int32_t deviceId, uint32_t *count)`:
        /// count-notify ids still free on the device, across every process.
        aclnsimGetCntNotifyFreeCount: unsafe extern "C" fn(i32, *mut u32) -> AclError =
            "aclnsimGetCntNotifyFreeCount",
        /// `aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy)`;
        /// the memory calls below are optional: without them every `DeviceMemory` call is
        /// 207000.
        aclrtMalloc: unsafe extern "C" fn(*mut *mut c_void, usize, u32) -> AclError =
            "aclrtMalloc",
        /// `aclError aclrtFree(void *devPtr)`.
        aclrtFree: unsafe extern "C" fn(*mut c_void) -> AclError = "aclrtFree",
        /// `aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
        /// aclrtMemcpyKind kind)`.
        aclrtMemcpy: unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, u32)
            -> AclError = "aclrtMemcpy",
        /// `aclError aclrtIpcMemGetExportKey(void *devPtr, size_t size, char *key, size_t len,
        /// uint64_t flags)`.
        aclrtIpcMemGetExportKey: unsafe extern "C" fn(*mut c_void, usize, *mut c_char, usize, u64)
            -> AclError = "aclrtIpcMemGetExportKey",
        /// `aclError aclrtIpcMemSetImportPid(const char *key, int32_t *pid, size_t num)`.
        aclrtIpcMemSetImportPid: unsafe extern "C" fn(*const c_char, *mut i32, usize)
            -> AclError = "aclrtIpcMemSetImportPid",
        /// `aclError aclrtIpcMemImportByKey(void **devPtr, const char *key, uint64_t flags)`.
        aclrtIpcMemImportByKey: unsafe extern "C" fn(*mut *mut c_void, *const c_char, u64)
            -> AclError = "aclrtIpcMemImportByKey",
        /// `aclError aclrtIpcMemClose(const char *key)`.
        aclrtIpcMemClose: unsafe extern "C" fn(*const c_char) -> AclError = "aclrtIpcMemClose",
        /// `aclError aclrtIpcMemImportPidInterServer(const char *key, aclrtServerPid
        /// *serverPids, size_t num)`.
        aclrtIpcMemImportPidInterServer: unsafe extern "C" fn(
            *const c_char,
            *mut AclrtServerPid,
            usize,
        ) -> AclError = "aclrtIpcMemImportPidInterServer",
        /// `aclError aclrtIpcMemSetAttr(const char *key, aclrtIpcMemAttrType type, uint64_t
        /// attr)`.
        aclrtIpcMemSetAttr: unsafe extern "C" fn(*const c_char, u32, u64) -> AclError =
            "aclrtIpcMemSetAttr",
        /// `aclError aclrtCreateEvent(aclrtEvent *event)`; the event calls below are optional so
        /// that a library without them (an old mock) still loads: without them every
        /// `EventOps` call is 207000.
        aclrtCreateEvent: unsafe extern "C" fn(*mut *mut c_void) -> AclError = "aclrtCreateEvent",
        /// `aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag)`.
        aclrtCreateEventWithFlag: unsafe extern "C" fn(*mut *mut c_void, u32) -> AclError =
            "aclrtCreateEventWithFlag",
        /// `aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag)`.
        aclrtCreateEventExWithFlag: unsafe extern "C" fn(*mut *mut c_void, u32) -> AclError =
            "aclrtCreateEventExWithFlag",
        /// `aclError aclrtDestroyEvent(aclrtEvent event)`.
        aclrtDestroyEvent: unsafe extern "C" fn(*mut c_void) -> AclError = "aclrtDestroyEvent",
        /// `aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream)`.
        aclrtRecordEvent: unsafe extern "C" fn(*mut c_void, *mut c_void) -> AclError =
            "aclrtRecordEvent",
        /// `aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream)`.
        aclrtResetEvent: unsafe extern "C" fn(*mut c_void, *mut c_void) -> AclError =
            "aclrtResetEvent",
        /// `aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event)`.
        aclrtStreamWaitEvent: unsafe extern "C" fn(*mut c_void, *mut c_void) -> AclError =
            "aclrtStreamWaitEvent",
        /// `aclError aclrtStreamWaitEventWithTimeout(aclrtStream, aclrtEvent, int32_t timeout)`.
        aclrtStreamWaitEventWithTimeout: unsafe extern "C" fn(*mut c_void, *mut c_void, i32)
            -> AclError = "aclrtStreamWaitEventWithTimeout",
        /// `aclError aclrtQueryEventStatus(aclrtEvent, aclrtEventRecordedStatus *)`.
        aclrtQueryEventStatus: unsafe extern "C" fn(*mut c_void, *mut i32) -> AclError =
            "aclrtQueryEventStatus",
        /// `aclError aclrtQueryEventWaitStatus(aclrtEvent, aclrtEventWaitStatus *)`.
        aclrtQueryEventWaitStatus: unsafe extern "C" fn(*mut c_void, *mut i32) -> AclError =
            "aclrtQueryEventWaitStatus",
        /// `aclError aclrtSynchronizeEvent(aclrtEvent event)`.
        aclrtSynchronizeEvent: unsafe extern "C" fn(*mut c_void) -> AclError =
            "aclrtSynchronizeEvent",
        /// `aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout)`.
        aclrtSynchronizeEventWithTimeout: unsafe extern "C" fn(*mut c_void, i32) -> AclError =
            "aclrtSynchronizeEventWithTimeout",
        /// `aclError aclrtEventElapsedTime(float *ms, aclrtEvent start, aclrtEvent end)`.
        aclrtEventElapsedTime: unsafe extern "C" fn(*mut f32, *mut c_void, *mut c_void)
            -> AclError = "aclrtEventElapsedTime",
        /// `aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp)` (µs).
        aclrtEventGetTimestamp: unsafe extern "C" fn(*mut c_void, *mut u64) -> AclError =
            "aclrtEventGetTimestamp",
        /// `aclError aclrtGetEventId(aclrtEvent event, uint32_t *eventId)`.
        aclrtGetEventId: unsafe extern "C" fn(*mut c_void, *mut u32) -> AclError =
            "aclrtGetEventId",
        /// `aclError aclrtIpcGetEventHandle(aclrtEvent, aclrtIpcEventHandle *)`.
        aclrtIpcGetEventHandle: unsafe extern "C" fn(
            *mut c_void,
            *mut acl_notify_core::IpcEventHandle,
        ) -> AclError = "aclrtIpcGetEventHandle",
        /// `aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event)`
        /// (the 64-byte handle by value).
        aclrtIpcOpenEventHandle: unsafe extern "C" fn(
            acl_notify_core::IpcEventHandle,
            *mut *mut c_void,
        ) -> AclError = "aclrtIpcOpenEventHandle",
        /// `aclError aclrtGetEventAvailNum(uint32_t *eventCount)` (the current device's).
        aclrtGetEventAvailNum: unsafe extern "C" fn(*mut u32) -> AclError =
            "aclrtGetEventAvailNum",
        /// `aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode)`.
        aclrtSetStreamFailureMode: unsafe extern "C" fn(*mut c_void, u64) -> AclError =
            "aclrtSetStreamFailureMode",
        /// `aclError aclrtStreamAbort(aclrtStream stream)`.
        aclrtStreamAbort: unsafe extern "C" fn(*mut c_void) -> AclError = "aclrtStreamAbort",
    }
}

impl core::fmt::Debug for Api {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Api")
            .field("required", &Api::REQUIRED.len())
            .field("optional_present", &self.optional_present())
            .finish()
    }
}

/// Copies a C string the library owns, reading at most `max` bytes (never past a missing NUL
/// further than that). `None` for a NULL pointer.
///
/// # Safety
///
/// `p` must be NULL or point at memory readable up to its first NUL or `max` bytes, whichever
/// comes first, for the duration of the call.
pub(crate) unsafe fn copy_c_str(p: *const c_char, max: usize) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees `p` is readable up to its NUL or `max` bytes; `strnlen`
    // reads no further than either.
    let len = unsafe { libc::strnlen(p, max) };
    // SAFETY: `len` bytes starting at `p` were just found readable (and contain no NUL).
    let bytes = unsafe { core::slice::from_raw_parts(p.cast::<u8>(), len) };
    Some(String::from_utf8_lossy(bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_pid_layout_is_lp64() {
        assert_eq!(core::mem::size_of::<AclrtServerPid>(), 24);
        assert_eq!(core::mem::offset_of!(AclrtServerPid, num), 16);
    }

    #[test]
    fn symbol_lists_have_no_duplicates() {
        let mut all: Vec<&str> = Api::REQUIRED.iter().chain(Api::OPTIONAL).copied().collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
        assert!(Api::REQUIRED.contains(&"aclrtNotifyImportByKey"));
        assert!(Api::OPTIONAL.iter().all(|s| !Api::REQUIRED.contains(s)));
    }

    #[test]
    fn copy_c_str_is_bounded() {
        let unterminated = *b"abcdef";
        // SAFETY: 6 readable bytes and max 6, so strnlen stops at the end.
        let s = unsafe { copy_c_str(unterminated.as_ptr().cast(), 6) };
        assert_eq!(s.as_deref(), Some("abcdef"));
        let terminated = *b"ab\0cd";
        // SAFETY: NUL within the buffer.
        let s = unsafe { copy_c_str(terminated.as_ptr().cast(), 64) };
        assert_eq!(s.as_deref(), Some("ab"));
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { copy_c_str(core::ptr::null(), 8) }, None);
    }
}

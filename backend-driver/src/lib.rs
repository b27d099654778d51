//! `acl-notify-driver`: the core's backend traits over a CANN runtime library loaded at run time.
//!
//! [`Driver::load`] finds `libascendcl.so` (see [`load`](crate::Driver::load) for the search
//! order), resolves every function it needs once, calls `aclInit(NULL)`, and reads the SoC
//! (`aclrtGetSocName`), the device count, this process's bare TGID and its SuperPod server id.
//! Nothing is linked at build time, so the crate builds on any machine; on a machine without
//! the toolkit, loading fails with a [`DriverError`] naming every path tried.
//!
//! # How calls are marshalled
//!
//! - **Handles.** A [`RawNotify`]/[`RawStream`] is a handle of a table this driver owns (the
//!   slab of `acl_notify_handles`, with its guards: kind, random per-driver salt, generation
//!   and index), mapping to the C pointer and what the driver knows about it (device, owner,
//!   lifecycle state, flags). A stale, destroyed, foreign or garbage handle is answered with
//!   107017 from the table and never reaches C. Each C object is destroyed exactly once:
//!   destruction first makes the handle invalid, waits for calls already using it to return,
//!   then calls C. Dropping the last clone of a `Driver` destroys what is left (streams with
//!   `aclrtDestroyStreamForce`, then notifies).
//! - **Current device.** CANN's current device is per thread. Before every call that depends
//!   on it the driver sets the device the stream (record, wait, synchronize, …) or notify
//!   (export, whitelist, id, destroy, …) belongs to, or the device passed in (create, import,
//!   peer access). A thread-local cache skips the `aclrtSetDevice` when the thread is already
//!   there. *If your own code calls `aclrtSetDevice` on the same library from a thread that
//!   also uses a `Driver`, call [`Driver::forget_current_device`] afterwards.*
//! - **The default stream** of a device is a handle like any other whose C pointer is NULL.
//! - **Keys** travel in a 65-byte buffer, NUL-terminated; what the library wrote is taken with
//!   [`ExportKey::from_runtime_c`], which never reads past the buffer and carries a real
//!   runtime's own key format opaquely (acl-notify keys stay readable).
//! - **`aclrtServerPid`** is built with `num = 1` per entry, the PIDs in a separate array that
//!   outlives the call; its LP64 layout (size 24) is checked at compile time.
//! - **Errors.** Every non-zero code becomes a [`DriverError`] carrying the mapped
//!   [`Error`], the raw number, the function's name and the text of
//!   `aclGetRecentErrMsg()` read on the same thread right after the call.
//!
//! # `aclInit` / `aclFinalize`
//!
//! All drivers bound to the same library in a process share one ACL session: the first calls
//! `aclInit(NULL)` (a `100002` "repeat initialize" answer — someone else initialised ACL — is
//! fine), and dropping the last one undoes it: with `aclFinalizeReference` when the library
//! exports it (drops only our reference), otherwise `aclFinalize` if our `aclInit` was the one
//! that initialised ACL, otherwise nothing. A program that creates and drops drivers
//! repeatedly therefore initialises and finalises ACL repeatedly; keep one `Driver` (it is
//! `Clone`, `Send` and `Sync`) for the life of the program if your runtime dislikes that.
//!
//! # Host-side waits
//!
//! CANN's C API has no host-side wait. [`HostOps`] answers 207000 (`FeatureNotSupport`) unless
//! the library exports the optional `aclnsim*` extension symbols (the simulator's library
//! does): `aclnsimNotifyHostWait`, `aclnsimNotifyTryConsume`, `aclnsimGetNotifyFreeCount`;
//! `aclnsimGetServerId` supplies [`Backend::server_id`]. None of them is needed to load.
//!
//! # Count notifies
//!
//! [`CntNotifyOps`](acl_notify_core::CntNotifyOps) (SPEC §6) uses the optional
//! `aclrtCntNotify*` symbols of CANN releases for the 950 family (and the simulator's
//! `aclnsimGetCntNotifyFreeCount` for the budget); without them, or on another SoC, every call
//! is 207000. See `cnt.rs`.

mod cnt;
mod error;
mod event;
mod ffi;
mod load;
mod mem;
mod soc;

use std::collections::HashMap;
use std::ffi::{CString, OsStr, OsString, c_char, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use acl_notify_core::{
    Backend, CreateFlags, Error, ExportFlags, ExportKey, Feature, HostCall, HostOps, ImportFlags,
    Lifecycle, NotifyInfo, NotifyResources, Op, RawNotify, RawStream, ServerPid, Soc,
    StreamDestroy, StreamOps, StreamStatus, SyncWait, Timeout, key::KEY_BUF_LEN,
};
use libloading::Library;

pub use error::{DriverError, classify};
pub use load::{
    DEFAULT_CANN_DIR, DEFAULT_CANN_LIB, DEFAULT_TOOLKIT_DIR, DEFAULT_TOOLKIT_LIB, ENV_ASCEND_HOME,
    ENV_LIB, LIB_NAME, LIB_NAME_RT,
};
pub use soc::{SocNaming, family_of};

use acl_notify_handles::{Guard, Kind, Lookup, Table};
use ffi::Api;

/// Environment variable forcing the SoC family (a name from the SPEC's table, e.g.
/// `Ascend910B`) when `aclrtGetSocName` returns a chip this binding does not know.
pub const ENV_SOC: &str = "ACL_NOTIFY_DRIVER_SOC";
/// Environment variable giving this process's SuperPod server id (overrides the library): on
/// a CANN runtime, the SDID (SuperPOD Device ID) of the device it imports on, which is what
/// `aclrtServerPid::sdid` whitelist entries name.
pub const ENV_SERVER_ID: &str = "ACL_NOTIFY_DRIVER_SERVER_ID";

/// Longest runtime message copied from `aclGetRecentErrMsg()`.
const MAX_MSG: usize = 16 * 1024;

/// A C handle pointer. Opaque to this binding; CANN allows using it from any thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CPtr(*mut c_void);

// SAFETY: CANN's notify and stream handles are process-wide objects, usable from any thread of
// the process (the runtime locks internally); this binding never dereferences them.
unsafe impl Send for CPtr {}
// SAFETY: as above; sharing the pointer value across threads is just copying a number.
unsafe impl Sync for CPtr {}

/// What the driver knows about one notify handle.
#[derive(Clone, Copy, Debug)]
struct NotifyEntry {
    ptr: CPtr,
    device: u32,
    owner_device: u32,
    owner_server: u32,
    state: Lifecycle,
    flags: CreateFlags,
    id: Option<u32>,
}

/// What the driver knows about one stream handle.
#[derive(Clone, Copy, Debug)]
struct StreamEntry {
    ptr: CPtr,
    device: u32,
    is_default: bool,
}

/// A CANN runtime library, bound. Cheap to clone (the clones share handles and the ACL
/// session); `Send + Sync`.
#[derive(Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

struct Inner {
    api: Api,
    /// Kept so the library is (conceptually) owned; it is opened with `RTLD_NODELETE`, so the
    /// code stays mapped even after this is dropped.
    _lib: Library,
    opened: OsString,
    file: Option<PathBuf>,
    session: u64,
    soc: Soc,
    soc_name: String,
    devices: u32,
    tgid: i32,
    server_id: u32,
    notifies: Table<NotifyEntry>,
    streams: Table<StreamEntry>,
    cnts: Table<cnt::CntEntry>,
    events: Table<event::EventEntry>,
    defaults: Mutex<HashMap<u32, u64>>,
}

thread_local! {
    /// (session, device) this thread last set successfully.
    static CURRENT_DEVICE: std::cell::Cell<Option<(u64, i32)>> = const { std::cell::Cell::new(None) };
}

impl Driver {
    /// Loads the CANN runtime library: `ACL_NOTIFY_DRIVER_LIB` if set (and only that), else
    /// `libascendcl.so` or `libacl_rt.so` (in that order at each place) through the loader's
    /// search path, else in `$ASCEND_HOME_PATH/lib64/`, else in
    /// `/usr/local/Ascend/ascend-toolkit/latest/lib64/`, else in
    /// `/usr/local/Ascend/cann/lib64/`.
    ///
    /// Errors: `DrvInternalError` (507899) naming every path tried and the loader's message
    /// (function `dlopen`), or the library and each missing symbol (function `dlsym`);
    /// `FeatureNotSupport` (207000) for a SoC name outside the SPEC's table (set
    /// `ACL_NOTIFY_DRIVER_SOC`); the code of `aclInit`, `aclrtGetDeviceCount` or
    /// `aclrtDeviceGetBareTgid` if one of them fails.
    pub fn load() -> Result<Driver, DriverError> {
        let (cands, notes) = load::candidates();
        let (lib, opened) = load::open_first(&cands, &notes)?;
        Driver::bind(lib, opened)
    }

    /// Loads the library at `path` (a bare file name is searched by the loader). Same errors
    /// as [`load`](Self::load).
    pub fn load_from(path: impl AsRef<Path>) -> Result<Driver, DriverError> {
        let path = path.as_ref().as_os_str().to_owned();
        let (lib, opened) = load::open_first(
            &[load::Candidate {
                path,
                origin: "Driver::load_from",
            }],
            &[],
        )?;
        Driver::bind(lib, opened)
    }

    fn bind(lib: Library, opened: OsString) -> Result<Driver, DriverError> {
        let api = load::resolve(&lib, &opened)?;
        let file = load::file_of(api.aclInit as *const c_void);
        let recent = || recent_message(&api);
        let session = load::acquire(&api, recent)?;
        match query_identity(&api) {
            Ok(id) => {
                // Salts this driver's handle tables: another driver's handles are refused.
                let seed = acl_notify_handles::random_seed();
                Ok(Driver {
                    inner: Arc::new(Inner {
                        api,
                        _lib: lib,
                        opened,
                        file,
                        session,
                        soc: id.soc,
                        soc_name: id.soc_name,
                        devices: id.devices,
                        tgid: id.tgid,
                        server_id: id.server_id,
                        notifies: Table::new(Kind::Notify, seed),
                        streams: Table::new(Kind::Stream, seed),
                        cnts: Table::new(Kind::CntNotify, seed),
                        events: Table::new(Kind::Event, seed),
                        defaults: Mutex::new(HashMap::new()),
                    }),
                })
            }
            Err(e) => {
                load::release(&api);
                Err(e.context(format!("loading {}", opened.to_string_lossy())))
            }
        }
    }

    /// The name `aclrtGetSocName()` returned (the concrete chip, e.g. `Ascend910B3`).
    pub fn soc_name(&self) -> &str {
        &self.inner.soc_name
    }

    /// What was passed to the loader (a path, or the bare `libascendcl.so`).
    pub fn library(&self) -> &OsStr {
        &self.inner.opened
    }

    /// The file the loader actually mapped, when it can tell.
    pub fn library_file(&self) -> Option<&Path> {
        self.inner.file.as_deref()
    }

    /// Whether the library exports the host-side wait extension (see [`HostOps`]).
    pub fn has_host_extension(&self) -> bool {
        self.inner.api.aclnsimNotifyHostWait.is_some()
    }

    /// The C functions a library must export to be loaded.
    pub fn required_symbols() -> &'static [&'static str] {
        Api::REQUIRED
    }

    /// The C functions used when the library exports them (`aclFinalizeReference` and the
    /// `aclnsim*` extensions); none is needed to load.
    pub fn optional_symbols() -> &'static [&'static str] {
        Api::OPTIONAL
    }

    /// Forgets this thread's cached current device, so the next call sets it again. Needed
    /// only if code outside this driver changes the thread's device on the same library.
    pub fn forget_current_device() {
        CURRENT_DEVICE.with(|c| c.set(None));
    }
}

/// Checks a C function runs before its handle check (SPEC §3), which this driver must answer
/// itself for a handle it never passes to C.
#[derive(Clone, Copy, Debug)]
enum Before {
    Nothing,
    /// `aclrtNotifySetImportPid`: "SoC without IPC → 207000" precedes "107017".
    IpcSupport,
    /// `aclrtNotifyBatchReset`, per element: "SoC without batch reset → 207000" precedes
    /// "107017".
    BatchReset,
    /// `aclrtNotifySetImportPidInterServer`: "num == 0 → 107000" precedes "107017".
    NonEmpty(usize),
}

struct Identity {
    soc: Soc,
    soc_name: String,
    devices: u32,
    tgid: i32,
    server_id: u32,
}

fn recent_message(api: &Api) -> Option<String> {
    // SAFETY: `aclGetRecentErrMsg` takes no arguments and returns NULL or a NUL-terminated
    // string owned by the runtime (thread-local), valid until the next ACL call on this thread.
    let p = unsafe { (api.aclGetRecentErrMsg)() };
    // SAFETY: as above; the copy is bounded by MAX_MSG.
    unsafe { ffi::copy_c_str(p, MAX_MSG) }
}

fn check(api: &Api, func: &'static str, code: i32) -> Result<(), DriverError> {
    if code == 0 {
        Ok(())
    } else {
        Err(DriverError::from_call(func, code, recent_message(api)))
    }
}

fn query_identity(api: &Api) -> Result<Identity, DriverError> {
    // SAFETY: no arguments; returns NULL or a NUL-terminated string owned by the runtime.
    let p = unsafe { (api.aclrtGetSocName)() };
    // SAFETY: as above; bounded read.
    let soc_name = unsafe { ffi::copy_c_str(p, 256) }.ok_or_else(|| {
        DriverError::load(
            Error::DrvInternalError,
            "aclrtGetSocName",
            format!(
                "aclrtGetSocName returned NULL{}",
                recent_message(api)
                    .map(|m| format!(" (the runtime says: {m})"))
                    .unwrap_or_default()
            ),
        )
    })?;
    let soc = match std::env::var(ENV_SOC).ok().filter(|v| !v.is_empty()) {
        Some(forced) => Soc::from_name(&forced).map_err(|_| {
            DriverError::load(
                Error::ParamInvalid,
                "aclrtGetSocName",
                format!(
                    "{ENV_SOC}={forced:?} is not a SoC family of the table ({})",
                    soc_list()
                ),
            )
        })?,
        None => family_of(&soc_name, soc_naming(api)).ok_or_else(|| {
            DriverError::load(
                Error::FeatureNotSupport,
                "aclrtGetSocName",
                format!(
                    "the runtime reports SoC {soc_name:?}, which this binding does not know; \
                     if it belongs to a family of the table ({}), set {ENV_SOC} to that family",
                    soc_list()
                ),
            )
        })?,
    };
    let mut devices = 0u32;
    // SAFETY: valid out-pointer to a u32.
    check(api, "aclrtGetDeviceCount", unsafe {
        (api.aclrtGetDeviceCount)(&mut devices)
    })?;
    let mut tgid = 0i32;
    // SAFETY: valid out-pointer to an i32.
    check(api, "aclrtDeviceGetBareTgid", unsafe {
        (api.aclrtDeviceGetBareTgid)(&mut tgid)
    })?;
    let server_id = match std::env::var(ENV_SERVER_ID).ok().filter(|v| !v.is_empty()) {
        Some(v) => v.trim().parse::<u32>().map_err(|_| {
            DriverError::load(
                Error::ParamInvalid,
                "getenv",
                format!("{ENV_SERVER_ID}={v:?} is not a server id (an unsigned 32-bit number)"),
            )
        })?,
        None => match api.aclnsimGetServerId {
            Some(f) => {
                let mut id = 0u32;
                // SAFETY: valid out-pointer to a u32.
                check(api, "aclnsimGetServerId", unsafe { f(&mut id) })?;
                id
            }
            None => super_pod_device_id(api, devices).unwrap_or(0),
        },
    };
    Ok(Identity {
        soc,
        soc_name,
        devices,
        tgid,
        server_id,
    })
}

/// How the library names its SoC: one that exports acl-notify's `aclnsim*` extensions is the
/// simulator (or written to its contract) and returns SPEC §4's family names; a CANN runtime
/// returns chip names, where a bare `Ascend910B` is a first-generation Ascend 910.
fn soc_naming(api: &Api) -> SocNaming {
    if api
        .optional_present()
        .iter()
        .any(|s| s.starts_with("aclnsim"))
    {
        SocNaming::Family
    } else {
        SocNaming::Chip
    }
}

/// `aclrtGetDeviceInfo(0, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)`, when the library has it and
/// answers (outside a SuperPod it may fail: then `None`, and its message is drained so it does
/// not end up in the next error).
///
/// This is what stands for the process's "server" here, because it is what an owner must put
/// in `aclrtServerPid::sdid` to whitelist this process: CANN documents `sdid` as the SuperPOD
/// Device ID obtained from `aclrtGetDeviceInfo`, and its runtime hands it to the driver's
/// `halShrIdSetPodPid` unchanged (attribute 403 is the driver's `INFO_TYPE_SDID`; 404,
/// `ACL_DEV_ATTR_SUPER_POD_SERVER_ID`, is `INFO_TYPE_SERVER_ID`, another number). The SDID is
/// a device's: device 0's is taken, which is right for a process that imports on device 0
/// (e.g. one device per process via `ASCEND_RT_VISIBLE_DEVICES`); otherwise set
/// [`ENV_SERVER_ID`] to the importing device's SDID.
fn super_pod_device_id(api: &Api, devices: u32) -> Option<u32> {
    let f = api.aclrtGetDeviceInfo?;
    if devices == 0 {
        return None;
    }
    let mut v = 0i64;
    // SAFETY: integer arguments and a valid out-pointer to an i64.
    let code = unsafe { f(0, ffi::ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &mut v) };
    if code != 0 {
        let _ = recent_message(api);
        return None;
    }
    u32::try_from(v).ok()
}

fn soc_list() -> String {
    Soc::ALL
        .iter()
        .map(|s| s.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn stale_notify(n: RawNotify) -> DriverError {
    DriverError::local(
        Error::InvalidHandle,
        format!(
            "notify handle {:#x} is not a live notify of this driver (destroyed, stale, foreign \
             or garbage)",
            n.0
        ),
    )
}

fn stale_stream(s: RawStream) -> DriverError {
    DriverError::local(
        Error::InvalidHandle,
        format!(
            "stream handle {:#x} is not a live stream of this driver (destroyed, stale, foreign \
             or garbage)",
            s.0
        ),
    )
}

/// What a SoC without [`Feature::Ipc`] lacks, in its 207000.
const NOTIFY_IPC: &str = "notify IPC (export, import, whitelists)";

fn device_arg(device: u32) -> Result<i32, DriverError> {
    i32::try_from(device).map_err(|_| {
        DriverError::local(
            Error::InvalidDeviceId,
            format!("device {device} does not fit CANN's int32_t device id"),
        )
    })
}

impl Inner {
    fn check(&self, func: &'static str, code: i32) -> Result<(), DriverError> {
        check(&self.api, func, code)
    }

    /// 207000: the SoC has no `what` (a [`Feature`] it lacks).
    fn lacks(&self, what: &str) -> DriverError {
        DriverError::local(
            Error::FeatureNotSupport,
            format!("{} has no {what}", self.soc),
        )
    }

    /// 207000 unless the SoC has `feature` (`what` names it).
    fn require(&self, feature: Feature, what: &str) -> Result<(), DriverError> {
        if !self.soc.has(feature) {
            return Err(self.lacks(what));
        }
        Ok(())
    }

    /// `f`, the optional entry point `symbol`, if the loaded library exports it; else 207000
    /// (`note` after the explanation).
    fn exported<F: Copy>(&self, f: Option<F>, symbol: &str, note: &str) -> Result<F, DriverError> {
        f.ok_or_else(|| {
            DriverError::local(
                Error::FeatureNotSupport,
                format!(
                    "the loaded library ({}) does not export {symbol}{note}",
                    self.opened.to_string_lossy()
                ),
            )
        })
    }

    /// Makes `device` the calling thread's current device (skipped when already so).
    fn ensure_device(&self, device: u32) -> Result<(), DriverError> {
        let dev = device_arg(device)?;
        if CURRENT_DEVICE.with(|c| c.get()) == Some((self.session, dev)) {
            return Ok(());
        }
        // SAFETY: plain integer argument.
        let code = unsafe { (self.api.aclrtSetDevice)(dev) };
        if code != 0 {
            CURRENT_DEVICE.with(|c| c.set(None));
            return Err(
                DriverError::from_call("aclrtSetDevice", code, recent_message(&self.api))
                    .context(format!("making device {device} current")),
            );
        }
        CURRENT_DEVICE.with(|c| c.set(Some((self.session, dev))));
        Ok(())
    }

    fn notify(&self, n: RawNotify) -> Result<Guard<'_, NotifyEntry>, DriverError> {
        self.notify_for(n, Before::Nothing)
    }

    /// A use of a notify handle. For a handle that is not live the answer is the one the
    /// runtime's check order (SPEC §3) gives for an invalid handle: a SoC without notifies
    /// (IPV350) answers 207000 to every notify call, and `before` names the checks the
    /// function runs ahead of its handle check; only then 107017.
    fn notify_for(
        &self,
        n: RawNotify,
        before: Before,
    ) -> Result<Guard<'_, NotifyEntry>, DriverError> {
        self.notifies
            .acquire(n.0)
            .map_err(|_| self.invalid_notify(n, before))
    }

    fn invalid_notify(&self, n: RawNotify, before: Before) -> DriverError {
        if !self.soc.has(Feature::Notify) {
            return self.lacks("notifies");
        }
        match before {
            Before::IpcSupport if !self.soc.has(Feature::Ipc) => self.lacks(NOTIFY_IPC),
            Before::BatchReset if !self.soc.has(Feature::BatchReset) => {
                self.lacks("aclrtNotifyBatchReset")
            }
            Before::NonEmpty(0) => {
                DriverError::local(Error::ParamInvalid, "the entry list is empty")
            }
            _ => stale_notify(n),
        }
    }

    fn stream(&self, s: RawStream) -> Result<Guard<'_, StreamEntry>, DriverError> {
        self.streams.acquire(s.0).map_err(|_| stale_stream(s))
    }

    fn unsupported(&self, symbol: &str, what: &str) -> DriverError {
        DriverError::local(
            Error::FeatureNotSupport,
            format!(
                "{what} is not part of CANN's C API, and the loaded library ({}) does not \
                 export the optional extension {symbol}",
                self.opened.to_string_lossy()
            ),
        )
    }

    fn insert_notify(&self, e: NotifyEntry) -> Result<RawNotify, DriverError> {
        match self.notifies.insert(e) {
            Some(h) => Ok(RawNotify(h)),
            None => {
                // SAFETY: `e.ptr` was just returned by the library and is not in any table, so
                // this is its one destruction.
                let _ = unsafe { (self.api.aclrtDestroyNotify)(e.ptr.0) };
                Err(DriverError::local(
                    Error::ResourceAllocFail,
                    "the driver's notify table is full",
                ))
            }
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Streams first (force: their queued tasks may wait on notifies nobody will record),
        // then notifies. Errors are ignored: there is nobody to report them to.
        for s in self.streams.drain() {
            if s.is_default || self.ensure_device(s.device).is_err() {
                continue;
            }
            // SAFETY: the pointer came from aclrtCreateStream and leaves the table here, so
            // this is its one destruction.
            let _ = unsafe { (self.api.aclrtDestroyStreamForce)(s.ptr.0) };
        }
        self.drain_cnts();
        self.drain_events();
        for n in self.notifies.drain() {
            if self.ensure_device(n.device).is_err() {
                continue;
            }
            // SAFETY: as above, for a notify from aclrtCreateNotify/aclrtNotifyImportByKey.
            let _ = unsafe { (self.api.aclrtDestroyNotify)(n.ptr.0) };
        }
        load::release(&self.api);
    }
}

impl fmt::Debug for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner;
        f.debug_struct("Driver")
            .field("library", &i.opened)
            .field("file", &i.file)
            .field("soc", &i.soc)
            .field("soc_name", &i.soc_name)
            .field("devices", &i.devices)
            .field("bare_tgid", &i.tgid)
            .field("server_id", &i.server_id)
            .field("extensions", &i.api.optional_present())
            .finish()
    }
}

impl Backend for Driver {
    type Error = DriverError;

    fn soc(&self) -> Soc {
        self.inner.soc
    }

    fn device_count(&self) -> u32 {
        self.inner.devices
    }

    fn bare_tgid(&self) -> i32 {
        self.inner.tgid
    }

    fn server_id(&self) -> u32 {
        self.inner.server_id
    }
}

impl NotifyResources for Driver {
    fn create_notify(&self, device: u32, flags: CreateFlags) -> Result<RawNotify, DriverError> {
        let i = &*self.inner;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; the flag word is passed through for the runtime to check.
        let code = unsafe { (i.api.aclrtCreateNotify)(&mut p, flags.bits()) };
        i.check("aclrtCreateNotify", code)
            .map_err(|e| e.context(format!("creating a notify on device {device}")))?;
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "aclrtCreateNotify reported success but returned a NULL notify",
            ));
        }
        i.insert_notify(NotifyEntry {
            ptr: CPtr(p),
            device,
            owner_device: device,
            owner_server: i.server_id,
            state: Lifecycle::Created,
            flags,
            id: None,
        })
    }

    fn destroy_notify(&self, notify: RawNotify) -> Result<(), DriverError> {
        let i = &*self.inner;
        let e = i
            .notifies
            .begin_close(notify.0, |_| true)
            .map_err(|_| i.invalid_notify(notify, Before::Nothing))?;
        let result = i.ensure_device(e.device).and_then(|()| {
            // SAFETY: the handle is closing and no call is using it; the pointer is live.
            let code = unsafe { (i.api.aclrtDestroyNotify)(e.ptr.0) };
            i.check("aclrtDestroyNotify", code)
        });
        i.notifies.finish_close(notify.0, result.is_ok());
        result.map_err(|e| e.context(format!("notify handle {:#x}", notify.0)))
    }

    fn notify_info(&self, notify: RawNotify) -> Result<NotifyInfo, DriverError> {
        let i = &*self.inner;
        let g = i.notify(notify)?;
        let e = g.get();
        let id = match e.id {
            Some(id) => id,
            None => {
                i.ensure_device(e.device)?;
                let mut id = 0u32;
                // SAFETY: live pointer (guarded), valid out-pointer.
                let code = unsafe { (i.api.aclrtGetNotifyId)(e.ptr.0, &mut id) };
                i.check("aclrtGetNotifyId", code)
                    .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
                let _ = i.notifies.update(notify.0, |v| v.id = Some(id));
                id
            }
        };
        // Read the state again: it may have changed while the id was fetched.
        let state = i
            .notifies
            .update(notify.0, |_| {})
            .map(|v| v.state)
            .unwrap_or(e.state);
        Ok(NotifyInfo {
            id,
            device: e.device,
            owner_device: e.owner_device,
            owner_server: e.owner_server,
            state,
            flags: e.flags,
        })
    }

    fn export_key(&self, notify: RawNotify, flags: ExportFlags) -> Result<ExportKey, DriverError> {
        let i = &*self.inner;
        let g = i.notify(notify)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut buf = [0u8; KEY_BUF_LEN];
        // SAFETY: live pointer; `buf` is writable for exactly the `len` passed.
        let code = unsafe {
            (i.api.aclrtNotifyGetExportKey)(
                e.ptr.0,
                buf.as_mut_ptr().cast::<c_char>(),
                buf.len(),
                flags.bits(),
            )
        };
        i.check("aclrtNotifyGetExportKey", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
        let _ = i.notifies.update(notify.0, |v| {
            v.state = match v.state.apply(Op::Export(flags.pid_validation())) {
                Ok(s) => s,
                // The runtime exported it although our record disagrees: trust the runtime.
                Err(_) if flags.pid_validation() == acl_notify_core::PidValidation::Disabled => {
                    Lifecycle::ExportedOpen
                }
                Err(_) => Lifecycle::Exported,
            }
        });
        // A real runtime writes its own key format: carry it opaquely (`from_runtime_c`
        // keeps our own keys native, so their fields stay readable).
        ExportKey::from_runtime_c(&buf).map_err(|_| {
            let terminated = buf.contains(&0);
            DriverError::local(
                Error::DrvInternalError,
                format!(
                    "aclrtNotifyGetExportKey succeeded for notify handle {:#x}, but the key it \
                     wrote is {}. The notify is exported on the C side; destroy it if the key \
                     cannot be used",
                    notify.0,
                    if terminated {
                        "empty or has characters outside printable ASCII"
                    } else {
                        "not NUL-terminated within the 65-byte buffer"
                    }
                ),
            )
        })
    }

    fn set_import_pids(&self, notify: RawNotify, pids: &[i32]) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.notify_for(notify, Before::IpcSupport)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        // The C prototype takes `int32_t *`; give it memory of our own rather than casting away
        // the slice's constness. An empty list still gets a valid pointer (num = 0).
        let mut owned: Vec<i32> = if pids.is_empty() {
            vec![0]
        } else {
            pids.to_vec()
        };
        // SAFETY: live pointer; `owned` holds at least `pids.len()` elements.
        let code =
            unsafe { (i.api.aclrtNotifySetImportPid)(e.ptr.0, owned.as_mut_ptr(), pids.len()) };
        i.check("aclrtNotifySetImportPid", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
        let _ = i.notifies.update(notify.0, |v| {
            v.state = v
                .state
                .apply(Op::SetImportPid)
                .unwrap_or(Lifecycle::Whitelisted);
        });
        Ok(())
    }

    fn set_import_server_pids(
        &self,
        notify: RawNotify,
        entries: &[ServerPid],
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.notify_for(notify, Before::NonEmpty(entries.len()))?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let (pids, mut c_entries) = ffi::server_pid_array(entries);
        // SAFETY: live pointer; `c_entries` has `entries.len()` (+1 spare) elements whose `pid`
        // pointers each point at one element of `pids`, which is neither moved nor resized
        // until after the call.
        let code = unsafe {
            (i.api.aclrtNotifySetImportPidInterServer)(
                e.ptr.0,
                c_entries.as_mut_ptr(),
                entries.len(),
            )
        };
        drop(c_entries);
        drop(pids);
        let result = i.check("aclrtNotifySetImportPidInterServer", code);
        // The runtime applies entries in order and keeps those applied before a failure. The
        // only failure that can follow applied entries is 207012 (the checks before it are the
        // same for every entry, so they fail on the first): from Exported (an empty list) that
        // means 64 entries went in, so the handle is Whitelisted either way.
        let applied = match &result {
            Ok(()) => true,
            Err(err) => err.kind() == Error::OverLimit && e.state == Lifecycle::Exported,
        };
        if applied {
            let _ = i.notifies.update(notify.0, |v| {
                v.state = v
                    .state
                    .apply(Op::SetImportPid)
                    .unwrap_or(Lifecycle::Whitelisted);
            });
        }
        result.map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))
    }

    /// The runtime takes the key's text: a parsed key is handed on as it reads.
    fn import_key(
        &self,
        device: u32,
        key: &ExportKey,
        flags: ImportFlags,
    ) -> Result<RawNotify, DriverError> {
        self.import_by_key(device, key.as_str(), flags)
    }

    /// Text goes to the runtime as it is (not parsed here): malformed keys are the runtime's
    /// 107000 to give, after its own earlier checks.
    fn import_by_key(
        &self,
        device: u32,
        key: &str,
        flags: ImportFlags,
    ) -> Result<RawNotify, DriverError> {
        let i = &*self.inner;
        // A C string cannot carry an interior NUL; anything else goes to the runtime, which
        // decides (malformed keys are its 107000 to give, after its own earlier checks).
        let c_key = CString::new(key).map_err(|_| {
            // The runtime's order: "SoC without IPC → 207000" precedes the key checks.
            if i.soc.has(Feature::Ipc) {
                DriverError::local(Error::ParamInvalid, "the key contains a NUL byte")
            } else {
                i.lacks(NOTIFY_IPC)
            }
        })?;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; `c_key` is NUL-terminated and outlives the call.
        let code = unsafe {
            (i.api.aclrtNotifyImportByKey)(&mut p, c_key.as_ptr(), u64::from(flags.bits()))
        };
        i.check("aclrtNotifyImportByKey", code)
            .map_err(|e| e.context(format!("importing a key onto device {device}")))?;
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "aclrtNotifyImportByKey reported success but returned a NULL notify",
            ));
        }
        // The owner's device and server come from the key. A key this binding cannot parse (a
        // runtime with its own key format) leaves them unknown: they are reported as this
        // handle's device and this process's server.
        let (owner_device, owner_server) = match ExportKey::parse(key.as_bytes())
            .ok()
            .and_then(|k| k.fields())
        {
            Some(f) => (u32::from(f.device), u32::from(f.server)),
            None => (device, i.server_id),
        };
        i.insert_notify(NotifyEntry {
            ptr: CPtr(p),
            device,
            owner_device,
            owner_server,
            state: Lifecycle::Imported,
            flags: CreateFlags::empty(),
            id: None,
        })
    }

    fn can_access_peer(&self, device: u32, peer: u32) -> Result<bool, DriverError> {
        let i = &*self.inner;
        let (d, p) = (device_arg(device)?, device_arg(peer)?);
        let mut can = 0i32;
        // SAFETY: valid out-pointer; integer arguments.
        let code = unsafe { (i.api.aclrtDeviceCanAccessPeer)(&mut can, d, p) };
        i.check("aclrtDeviceCanAccessPeer", code)
            .map_err(|e| e.context(format!("devices {device} → {peer}")))?;
        Ok(can != 0)
    }

    fn enable_peer_access(&self, device: u32, peer: u32) -> Result<(), DriverError> {
        let i = &*self.inner;
        let p = device_arg(peer)?;
        // aclrtDeviceEnablePeerAccess enables access from the *current* device.
        i.ensure_device(device)?;
        // SAFETY: integer arguments; flags must be 0.
        let code = unsafe { (i.api.aclrtDeviceEnablePeerAccess)(p, 0) };
        i.check("aclrtDeviceEnablePeerAccess", code)
            .map_err(|e| e.context(format!("devices {device} → {peer}")))
    }
}

impl StreamOps for Driver {
    fn create_stream(&self, device: u32) -> Result<RawStream, DriverError> {
        let i = &*self.inner;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let code = unsafe { (i.api.aclrtCreateStream)(&mut p) };
        i.check("aclrtCreateStream", code)
            .map_err(|e| e.context(format!("creating a stream on device {device}")))?;
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "aclrtCreateStream reported success but returned a NULL stream",
            ));
        }
        match i.streams.insert(StreamEntry {
            ptr: CPtr(p),
            device,
            is_default: false,
        }) {
            Some(h) => Ok(RawStream(h)),
            None => {
                // SAFETY: the pointer is in no table; this is its one destruction.
                let _ = unsafe { (i.api.aclrtDestroyStreamForce)(p) };
                Err(DriverError::local(
                    Error::ResourceAllocFail,
                    "the driver's stream table is full",
                ))
            }
        }
    }

    fn default_stream(&self, device: u32) -> Result<RawStream, DriverError> {
        let i = &*self.inner;
        // Validates the device (107001 from the runtime) and creates its context if needed.
        i.ensure_device(device)?;
        let mut defaults = i.defaults.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = defaults.get(&device) {
            return Ok(RawStream(*h));
        }
        let h = i
            .streams
            .insert(StreamEntry {
                ptr: CPtr(core::ptr::null_mut()),
                device,
                is_default: true,
            })
            .ok_or_else(|| {
                DriverError::local(
                    Error::ResourceAllocFail,
                    "the driver's stream table is full",
                )
            })?;
        defaults.insert(device, h);
        Ok(RawStream(h))
    }

    fn stream_device(&self, stream: RawStream) -> Result<u32, DriverError> {
        Ok(self.inner.stream(stream)?.get().device)
    }

    fn destroy_stream(&self, stream: RawStream, mode: StreamDestroy) -> Result<(), DriverError> {
        let i = &*self.inner;
        let e = i
            .streams
            .begin_close(stream.0, |e| !e.is_default)
            .map_err(|why| match why {
                Lookup::Refused => DriverError::local(
                    Error::InvalidHandle,
                    format!(
                        "stream handle {:#x} is a device's default stream, which cannot be \
                         destroyed",
                        stream.0
                    ),
                ),
                Lookup::Invalid => stale_stream(stream),
            })?;
        let result = i.ensure_device(e.device).and_then(|()| {
            let (func, name) = match mode {
                StreamDestroy::Drain => (i.api.aclrtDestroyStream, "aclrtDestroyStream"),
                StreamDestroy::Discard => {
                    (i.api.aclrtDestroyStreamForce, "aclrtDestroyStreamForce")
                }
            };
            // SAFETY: the handle is closing and unused; the pointer is a live stream.
            let code = unsafe { func(e.ptr.0) };
            i.check(name, code)
        });
        i.streams.finish_close(stream.0, result.is_ok());
        result.map_err(|e| e.context(format!("stream handle {:#x}", stream.0)))
    }

    fn record(&self, notify: RawNotify, stream: RawStream) -> Result<(), DriverError> {
        let i = &*self.inner;
        let n = i.notify(notify)?;
        let s = i.stream(stream)?;
        let (n, s) = (n.get(), s.get());
        i.ensure_device(s.device)?;
        // SAFETY: both pointers are live (guarded); NULL stream = the device's default stream.
        let code = unsafe { (i.api.aclrtRecordNotify)(n.ptr.0, s.ptr.0) };
        i.check("aclrtRecordNotify", code).map_err(|e| {
            e.context(format!(
                "notify handle {:#x} on stream handle {:#x} (device {})",
                notify.0, stream.0, s.device
            ))
        })
    }

    fn wait_and_reset(
        &self,
        notify: RawNotify,
        stream: RawStream,
        timeout: Timeout,
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let n = i.notify(notify)?;
        let s = i.stream(stream)?;
        let (n, s) = (n.get(), s.get());
        i.ensure_device(s.device)?;
        // SAFETY: both pointers are live (guarded).
        let code = unsafe { (i.api.aclrtWaitAndResetNotify)(n.ptr.0, s.ptr.0, timeout.to_c()) };
        i.check("aclrtWaitAndResetNotify", code).map_err(|e| {
            e.context(format!(
                "notify handle {:#x} (owner device {}) on stream handle {:#x} (device {})",
                notify.0, n.owner_device, stream.0, s.device
            ))
        })
    }

    fn batch_reset(&self, notifies: &[RawNotify]) -> Result<(), DriverError> {
        let i = &*self.inner;
        // Take a guard on each element in order, up to the first one that is not live.
        let mut guards = Vec::with_capacity(notifies.len());
        let mut bad = None;
        for (k, n) in notifies.iter().enumerate() {
            match i.notifies.acquire(n.0) {
                Ok(g) => guards.push(g),
                Err(_) => {
                    bad = Some(k);
                    break;
                }
            }
        }
        // The runtime checks elements in order and stops at the first failure, earlier ones
        // staying reset. A dead handle must not reach it, so it gets the live prefix, and the
        // dead element is answered here, after the prefix succeeded (which also proves the SoC
        // has batch reset). With no live prefix, the element's own check order decides.
        if bad == Some(0) {
            return Err(i
                .invalid_notify(notifies[0], Before::BatchReset)
                .context("element 0 of the batch"));
        }
        if let Some(first) = guards.first() {
            i.ensure_device(first.get().device)?;
        }
        let mut ptrs: Vec<*mut c_void> = guards.iter().map(|g| g.get().ptr.0).collect();
        let n = ptrs.len();
        if ptrs.is_empty() {
            ptrs.push(core::ptr::null_mut()); // a valid array pointer for num == 0
        }
        // SAFETY: `ptrs` holds `n` live notify pointers (each guarded until after the call).
        let code = unsafe { (i.api.aclrtNotifyBatchReset)(ptrs.as_mut_ptr(), n) };
        i.check("aclrtNotifyBatchReset", code)
            .map_err(|e| e.context(format!("batch of {} notifies", notifies.len())))?;
        drop(guards);
        match bad {
            Some(k) => Err(stale_notify(notifies[k]).context(format!(
                "element {k} of the batch (elements before it were reset)"
            ))),
            None => Ok(()),
        }
    }

    fn synchronize(&self, stream: RawStream, wait: SyncWait) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.stream(stream)?;
        let s = g.get();
        i.ensure_device(s.device)?;
        let (code, func) = match wait {
            // SAFETY: live stream pointer (guarded) or NULL for the default stream.
            SyncWait::Forever => (
                unsafe { (i.api.aclrtSynchronizeStream)(s.ptr.0) },
                "aclrtSynchronizeStream",
            ),
            SyncWait::AtMost(d) => {
                // Round up so the call never gives up before `d` has passed; -1 is "forever",
                // so the longest finite wait is i32::MAX ms (about 24.8 days).
                let ms = d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
                (
                    // SAFETY: as above.
                    unsafe { (i.api.aclrtSynchronizeStreamWithTimeout)(s.ptr.0, ms) },
                    "aclrtSynchronizeStreamWithTimeout",
                )
            }
        };
        i.check(func, code).map_err(|e| {
            e.context(format!(
                "stream handle {:#x} (device {})",
                stream.0, s.device
            ))
        })
    }

    fn query(&self, stream: RawStream) -> Result<StreamStatus, DriverError> {
        let i = &*self.inner;
        let g = i.stream(stream)?;
        let s = g.get();
        i.ensure_device(s.device)?;
        let mut status = -1i32;
        // SAFETY: live stream pointer (or NULL = default); valid out-pointer. The C enum is an
        // `int`.
        let code = unsafe { (i.api.aclrtStreamQuery)(s.ptr.0, &mut status) };
        i.check("aclrtStreamQuery", code)
            .map_err(|e| e.context(format!("stream handle {:#x}", stream.0)))?;
        match status {
            ffi::ACL_STREAM_STATUS_COMPLETE => Ok(StreamStatus::Complete),
            ffi::ACL_STREAM_STATUS_NOT_READY => Ok(StreamStatus::NotReady),
            other => Err(DriverError::local(
                Error::DrvInternalError,
                format!("aclrtStreamQuery returned an unknown status {other}"),
            )),
        }
    }

    fn launch_host_func(&self, stream: RawStream, call: HostCall) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.stream(stream)?;
        let s = g.get();
        i.ensure_device(s.device)?;
        let boxed = Box::into_raw(Box::new(call));
        // SAFETY: live stream pointer; `trampoline` takes ownership of `boxed` when the stream
        // runs it (once). A task the runtime discards (force-destroy) leaks the box, which is
        // only a few bytes.
        let code =
            unsafe { (i.api.aclrtLaunchHostFunc)(s.ptr.0, trampoline, boxed.cast::<c_void>()) };
        if code != 0 {
            // SAFETY: the runtime refused the task, so it never got `boxed`; reclaim it.
            drop(unsafe { Box::from_raw(boxed) });
        }
        i.check("aclrtLaunchHostFunc", code)
            .map_err(|e| e.context(format!("stream handle {:#x}", stream.0)))
    }

    fn set_op_wait_timeout(&self, seconds: u32) -> Result<(), DriverError> {
        let i = &*self.inner;
        // SAFETY: integer argument.
        let code = unsafe { (i.api.aclrtSetOpWaitTimeout)(seconds) };
        i.check("aclrtSetOpWaitTimeout", code)
    }
}

/// Runs a boxed [`HostCall`] handed to `aclrtLaunchHostFunc`.
///
/// # Safety
///
/// `arg` must be NULL or a `Box<HostCall>` leaked by `launch_host_func`, passed exactly once.
unsafe extern "C" fn trampoline(arg: *mut c_void) {
    if arg.is_null() {
        return;
    }
    // SAFETY: `arg` is the `Box<HostCall>` leaked by `launch_host_func`, passed back exactly
    // once by the runtime.
    let call = unsafe { Box::from_raw(arg.cast::<HostCall>()) };
    call.call();
}

impl HostOps for Driver {
    fn host_wait(&self, notify: RawNotify, timeout: Duration) -> Result<(), DriverError> {
        let i = &*self.inner;
        let Some(f) = i.api.aclnsimNotifyHostWait else {
            return Err(i.unsupported("aclnsimNotifyHostWait", "a host-side wait on a notify"));
        };
        let g = i.notify(notify)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        // u64::MAX means forever to the extension; a Duration is always finite.
        let us = timeout.as_micros().min(u128::from(u64::MAX - 1)) as u64;
        // SAFETY: live pointer (guarded); integer argument.
        let code = unsafe { f(e.ptr.0, us) };
        i.check("aclnsimNotifyHostWait", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))
    }

    fn try_consume(&self, notify: RawNotify) -> Result<bool, DriverError> {
        let i = &*self.inner;
        let Some(f) = i.api.aclnsimNotifyTryConsume else {
            return Err(i.unsupported(
                "aclnsimNotifyTryConsume",
                "consuming a record from the host",
            ));
        };
        let g = i.notify(notify)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut consumed = 0i32;
        // SAFETY: live pointer (guarded); valid out-pointer.
        let code = unsafe { f(e.ptr.0, &mut consumed) };
        i.check("aclnsimNotifyTryConsume", code)
            .map_err(|err| err.context(format!("notify handle {:#x}", notify.0)))?;
        Ok(consumed != 0)
    }

    fn notifies_free(&self, device: u32) -> Result<u32, DriverError> {
        let i = &*self.inner;
        let Some(f) = i.api.aclnsimGetNotifyFreeCount else {
            return Err(i.unsupported(
                "aclnsimGetNotifyFreeCount",
                "counting a device's free notify ids",
            ));
        };
        let d = device_arg(device)?;
        let mut n = 0u32;
        // SAFETY: integer argument, valid out-pointer.
        let code = unsafe { f(d, &mut n) };
        i.check("aclnsimGetNotifyFreeCount", code)
            .map_err(|e| e.context(format!("device {device}")))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn driver_is_send_sync() {
        assert_send_sync::<Driver>();
        assert_send_sync::<DriverError>();
    }

    #[test]
    fn device_ids_past_i32_are_invalid_device() {
        assert_eq!(device_arg(3).ok(), Some(3));
        let e = device_arg(u32::MAX).err().unwrap();
        assert_eq!(e.kind(), Error::InvalidDeviceId);
    }
}

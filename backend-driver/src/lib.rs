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
mod identity;
mod load;
mod mem;
mod notify;
mod soc;
mod stream;

use std::collections::HashMap;
use std::ffi::{OsStr, OsString, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use acl_notify_core::{Backend, CreateFlags, Error, Feature, Lifecycle, Soc};
// The crate docs' links to the items the submodules implement.
#[cfg(doc)]
use acl_notify_core::{ExportKey, HostOps, RawNotify, RawStream};
use libloading::Library;

pub use error::{DriverError, classify};
pub use load::{
    DEFAULT_CANN_DIR, DEFAULT_CANN_LIB, DEFAULT_TOOLKIT_DIR, DEFAULT_TOOLKIT_LIB, ENV_ASCEND_HOME,
    ENV_LIB, LIB_NAME, LIB_NAME_RT,
};
pub use soc::{SocNaming, family_of};

use acl_notify_handles::{Kind, Table};
use ffi::Api;
use identity::query_identity;

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

fn device_arg(device: u32) -> Result<i32, DriverError> {
    i32::try_from(device).map_err(|_| {
        DriverError::local(
            Error::InvalidDeviceId,
            format!("device {device} does not fit CANN's int32_t device id"),
        )
    })
}

/// Enters `entry` in `table`: a C object the library has just created or opened, in no table
/// yet (NULL for a device's default stream). Its handle; or, the table full, the object given
/// to `destroy` (its one destruction) and `ResourceAllocFail` naming the table (`what`).
fn enter<T: Copy>(
    table: &Table<T>,
    entry: T,
    what: &str,
    destroy: impl FnOnce(),
) -> Result<u64, DriverError> {
    table.insert(entry).ok_or_else(|| {
        destroy();
        DriverError::local(
            Error::ResourceAllocFail,
            format!("the driver's {what} table is full"),
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

    /// `aclrtGetDeviceInfo(device, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)`, as the library answers
    /// it (207000 if it has no `aclrtGetDeviceInfo`).
    fn super_pod_device_id(&self, device: u32) -> Result<u32, DriverError> {
        let i = &self.inner;
        let Some(f) = i.api.aclrtGetDeviceInfo else {
            return Err(DriverError::local(
                Error::FeatureNotSupport,
                "the library has no aclrtGetDeviceInfo (the SuperPOD device id is its answer)",
            ));
        };
        let mut v = 0i64;
        // SAFETY: integer arguments and a valid out-pointer to an i64.
        let code = unsafe { f(device, ffi::ACL_DEV_ATTR_SUPER_POD_DEVICE_ID, &mut v) };
        i.check("aclrtGetDeviceInfo", code)?;
        u32::try_from(v).map_err(|_| {
            DriverError::local(
                Error::DrvInternalError,
                format!("aclrtGetDeviceInfo answered SuperPOD device id {v}, not a uint32_t"),
            )
        })
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

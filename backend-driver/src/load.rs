//! Finding and opening the CANN runtime library, and the process-wide `aclInit`/`aclFinalize`
//! bookkeeping shared by every [`Driver`](crate::Driver) bound to the same library.
//!
//! Search order for [`Driver::load`](crate::Driver::load):
//!
//! 1. `ACL_NOTIFY_DRIVER_LIB`, if set and non-empty — and then *only* that (an explicit choice
//!    never silently falls back to another library);
//! 2. `libascendcl.so`, then `libacl_rt.so`, through the dynamic loader's search path
//!    (`LD_LIBRARY_PATH`, the `ld.so` cache, …; CANN's `set_env.sh` puts the toolkit there);
//! 3. both names in `$ASCEND_HOME_PATH/lib64/`, if `ASCEND_HOME_PATH` is set;
//! 4. both names in `/usr/local/Ascend/ascend-toolkit/latest/lib64/` (the toolkit's layout up
//!    to CANN 8);
//! 5. both names in `/usr/local/Ascend/cann/lib64/` (the default root install of recent CANN,
//!    whose API reference puts the libraries in `${INSTALL_DIR}/lib64` with `INSTALL_DIR`
//!    `/usr/local/Ascend/cann`).
//!
//! CANN's API reference names `libacl_rt.so` as the library of the `acl/acl_rt.h` functions
//! and keeps `libascendcl.so` for compatibility, to be retired in a later release; recent
//! runtimes install both. `libascendcl.so` is tried first at each place because every CANN
//! release this binding supports has it; `libacl_rt.so` keeps the search working once it is
//! gone.
//!
//! The first library that opens is used. It is opened with `RTLD_NOW` (every undefined symbol
//! resolved up front, so a broken install fails here with the loader's message instead of
//! killing the process at the first call), `RTLD_LOCAL` (its symbols do not interpose on, or
//! get interposed by, another library loaded later — e.g. a second runtime copy) and
//! `RTLD_NODELETE` (a runtime that started threads or registered exit handlers is never
//! unmapped under them).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use acl_notify_core::Error;
use libloading::Library;

use crate::error::DriverError;
use crate::ffi::Api;

/// Environment variable naming the library to load.
pub const ENV_LIB: &str = "ACL_NOTIFY_DRIVER_LIB";
/// CANN's toolkit root (set by the toolkit's `set_env.sh`).
pub const ENV_ASCEND_HOME: &str = "ASCEND_HOME_PATH";
/// The library name looked up first at each place (CANN's long-standing name).
pub const LIB_NAME: &str = "libascendcl.so";
/// The name CANN's API reference gives the runtime library (`acl/acl_rt.h`), looked up after
/// [`LIB_NAME`] at each place.
pub const LIB_NAME_RT: &str = "libacl_rt.so";
/// The toolkit's conventional library folder (CANN 8 and earlier).
pub const DEFAULT_TOOLKIT_DIR: &str = "/usr/local/Ascend/ascend-toolkit/latest/lib64";
/// Where a root install of recent CANN puts its libraries (`/usr/local/Ascend/cann`, its API
/// reference's default `${INSTALL_DIR}`, then `lib64`).
pub const DEFAULT_CANN_DIR: &str = "/usr/local/Ascend/cann/lib64";
/// [`LIB_NAME`] in [`DEFAULT_TOOLKIT_DIR`].
pub const DEFAULT_TOOLKIT_LIB: &str =
    "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so";
/// [`LIB_NAME`] in [`DEFAULT_CANN_DIR`].
pub const DEFAULT_CANN_LIB: &str = "/usr/local/Ascend/cann/lib64/libascendcl.so";

/// One place to look, and why it is on the list.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub path: OsString,
    pub origin: &'static str,
}

/// The candidates [`Driver::load`](crate::Driver::load) tries, in order, plus notes about
/// candidates that were skipped (so the error can say why).
pub(crate) fn candidates() -> (Vec<Candidate>, Vec<String>) {
    candidates_from(
        std::env::var_os(ENV_LIB).filter(|v| !v.is_empty()),
        std::env::var_os(ENV_ASCEND_HOME).filter(|v| !v.is_empty()),
    )
}

/// [`candidates`] for the given `ACL_NOTIFY_DRIVER_LIB` and `ASCEND_HOME_PATH` values (`None`
/// when unset or empty).
fn candidates_from(
    explicit: Option<OsString>,
    ascend_home: Option<OsString>,
) -> (Vec<Candidate>, Vec<String>) {
    let mut notes = Vec::new();
    if let Some(explicit) = explicit {
        return (
            vec![Candidate {
                path: explicit,
                origin: ENV_LIB,
            }],
            notes,
        );
    }
    let mut v = Vec::new();
    let mut both_in = |dir: Option<&Path>, origin: &'static str| {
        for name in [LIB_NAME, LIB_NAME_RT] {
            v.push(Candidate {
                path: dir.map_or_else(|| name.into(), |d| d.join(name).into_os_string()),
                origin,
            });
        }
    };
    both_in(None, "loader search path");
    match ascend_home {
        Some(home) => both_in(
            Some(&Path::new(&home).join("lib64")),
            "$ASCEND_HOME_PATH/lib64",
        ),
        None => notes.push(format!("{ENV_ASCEND_HOME} is not set")),
    }
    both_in(
        Some(Path::new(DEFAULT_TOOLKIT_DIR)),
        "default toolkit location",
    );
    both_in(
        Some(Path::new(DEFAULT_CANN_DIR)),
        "default CANN install location",
    );
    (v, notes)
}

/// Opens one library file (or bare name, searched by the loader).
pub(crate) fn open(path: &OsString) -> Result<Library, String> {
    #[cfg(unix)]
    {
        use libloading::os::unix::{RTLD_LOCAL, RTLD_NOW};
        // SAFETY: loading runs the library's initialisers; a CANN runtime library (or the
        // simulator's) is written to be loaded into an arbitrary process. RTLD_NODELETE keeps
        // its code mapped for the rest of the process, so the function pointers resolved from
        // it can never dangle.
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(path.as_os_str()),
                RTLD_NOW | RTLD_LOCAL | libc::RTLD_NODELETE,
            )
        };
        lib.map(Library::from).map_err(|e| error_text(&e))
    }
    #[cfg(not(unix))]
    {
        // SAFETY: as above; CANN only ships for Linux, so this path only serves to keep the
        // crate building everywhere.
        unsafe { Library::new(path.as_os_str()) }.map_err(|e| error_text(&e))
    }
}

/// The loader's message, including its source chain.
fn error_text(e: &libloading::Error) -> String {
    use std::error::Error as _;
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

/// Opens the first candidate that loads; the error lists every attempt.
pub(crate) fn open_first(
    cands: &[Candidate],
    notes: &[String],
) -> Result<(Library, OsString), DriverError> {
    let mut tried = Vec::new();
    for c in cands {
        match open(&c.path) {
            Ok(lib) => return Ok((lib, c.path.clone())),
            Err(e) => tried.push(format!(
                "  {} ({}): {e}",
                c.path.to_string_lossy(),
                c.origin
            )),
        }
    }
    let mut msg = String::from("could not load a CANN runtime library; tried:\n");
    msg.push_str(&tried.join("\n"));
    for n in notes {
        msg.push_str(&format!("\n  (note: {n})"));
    }
    msg.push_str(&format!(
        "\nset {ENV_LIB} to the full path of libascendcl.so (or libacl_rt.so), or source the \
         toolkit's set_env.sh"
    ));
    Err(DriverError::load(Error::DrvInternalError, "dlopen", msg))
}

/// Resolves the API from an opened library; the error names the path and every missing symbol.
pub(crate) fn resolve(lib: &Library, path: &OsString) -> Result<Api, DriverError> {
    // SAFETY: the library was found under a CANN runtime's name (or named explicitly by the
    // user as one); its `acl*` symbols are CANN's C functions with the signatures in `Api`.
    unsafe { Api::resolve(lib) }.map_err(|missing| {
        let names: Vec<&str> = missing.iter().map(|(n, _)| *n).collect();
        let first_err = missing.first().map(|(_, e)| e.as_str()).unwrap_or("");
        DriverError::load(
            Error::DrvInternalError,
            "dlsym",
            format!(
                "{} does not export {} required symbol(s): {} (first error: {first_err}); \
                 is it a CANN runtime library (libascendcl.so or libacl_rt.so) recent enough \
                 for the notify API?",
                path.to_string_lossy(),
                names.len(),
                names.join(", ")
            ),
        )
    })
}

/// The file the loader actually mapped for a symbol (resolves a bare `libascendcl.so`).
pub(crate) fn file_of(addr: *const core::ffi::c_void) -> Option<PathBuf> {
    #[cfg(unix)]
    {
        let mut info = core::mem::MaybeUninit::<libc::Dl_info>::zeroed();
        // SAFETY: `dladdr` only inspects the address and fills `info`; any address is allowed.
        let ok = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
        if ok == 0 {
            return None;
        }
        // SAFETY: `dladdr` succeeded, so it initialised `info`.
        let info = unsafe { info.assume_init() };
        // SAFETY: `dli_fname` is NULL or a NUL-terminated path owned by the loader, valid while
        // the object stays loaded (forever: RTLD_NODELETE); 4096 bounds the read.
        let name = unsafe { crate::ffi::copy_c_str(info.dli_fname, 4096) }?;
        Some(PathBuf::from(name))
    }
    #[cfg(not(unix))]
    {
        let _ = addr;
        None
    }
}

/// How this process's `aclInit` went for one library.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InitOutcome {
    /// `aclInit` returned 0: this binding initialised ACL.
    Initialized,
    /// `aclInit` returned 100002: someone else in the process had already initialised it.
    AlreadyInitialized,
}

#[derive(Debug)]
struct Session {
    /// Address of the library's `aclInit`: the same library gives the same address.
    key: usize,
    drivers: usize,
    outcome: InitOutcome,
    id: u64,
}

static SESSIONS: Mutex<Vec<Session>> = Mutex::new(Vec::new());
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// Registers one more driver on `api`'s library, calling `aclInit(NULL)` if it is the first.
/// Returns the session id (new after every `aclInit`, so per-thread caches from an earlier,
/// finalised session are never trusted).
pub(crate) fn acquire(api: &Api, recent: impl Fn() -> Option<String>) -> Result<u64, DriverError> {
    let key = api.aclInit as usize;
    let mut sessions = SESSIONS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(s) = sessions.iter_mut().find(|s| s.key == key) {
        s.drivers += 1;
        return Ok(s.id);
    }
    // SAFETY: `aclInit` accepts NULL (no configuration file).
    let code = unsafe { (api.aclInit)(core::ptr::null()) };
    let outcome = match code {
        0 => InitOutcome::Initialized,
        c if c == Error::RepeatInitialize.code() => InitOutcome::AlreadyInitialized,
        c => return Err(DriverError::from_call("aclInit", c, recent())),
    };
    let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    sessions.push(Session {
        key,
        drivers: 1,
        outcome,
        id,
    });
    Ok(id)
}

/// Unregisters a driver; the last one out undoes this binding's `aclInit`:
/// `aclFinalizeReference` when the library has it (drops exactly the reference our `aclInit`
/// took, whoever else holds one), else `aclFinalize` if our `aclInit` was the one that
/// initialised ACL, else nothing (whoever initialised it finalises it).
pub(crate) fn release(api: &Api) {
    let key = api.aclInit as usize;
    let mut sessions = SESSIONS.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(pos) = sessions.iter().position(|s| s.key == key) else {
        return;
    };
    sessions[pos].drivers -= 1;
    if sessions[pos].drivers > 0 {
        return;
    }
    let s = sessions.swap_remove(pos);
    // Errors cannot be reported from a drop; the runtime logs its own.
    if let Some(fin_ref) = api.aclFinalizeReference {
        // SAFETY: NULL is allowed for the count pointer.
        let _ = unsafe { fin_ref(core::ptr::null_mut()) };
    } else if s.outcome == InitOutcome::Initialized {
        // SAFETY: no driver on this library is left, and this binding's aclInit succeeded.
        let _ = unsafe { (api.aclFinalize)() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_order_ends_with_both_default_install_locations() {
        let paths = |c: Vec<Candidate>| -> Vec<String> {
            c.iter()
                .map(|c| c.path.to_string_lossy().into_owned())
                .collect()
        };
        let (c, notes) = candidates_from(None, Some("/opt/cann".into()));
        assert_eq!(
            paths(c),
            [
                LIB_NAME,
                LIB_NAME_RT,
                "/opt/cann/lib64/libascendcl.so",
                "/opt/cann/lib64/libacl_rt.so",
                DEFAULT_TOOLKIT_LIB,
                "/usr/local/Ascend/ascend-toolkit/latest/lib64/libacl_rt.so",
                DEFAULT_CANN_LIB,
                "/usr/local/Ascend/cann/lib64/libacl_rt.so",
            ]
        );
        assert!(notes.is_empty());
        let (c, notes) = candidates_from(None, None);
        assert_eq!(
            paths(c),
            [
                LIB_NAME,
                LIB_NAME_RT,
                DEFAULT_TOOLKIT_LIB,
                "/usr/local/Ascend/ascend-toolkit/latest/lib64/libacl_rt.so",
                DEFAULT_CANN_LIB,
                "/usr/local/Ascend/cann/lib64/libacl_rt.so",
            ]
        );
        assert_eq!(notes.len(), 1, "{notes:?}");
        let (c, _) = candidates_from(Some("/x/libascendcl.so".into()), Some("/opt/cann".into()));
        assert_eq!(paths(c), ["/x/libascendcl.so"], "an explicit choice only");
    }

    #[test]
    fn a_missing_file_is_reported_with_its_path() {
        let cands = [Candidate {
            path: "/nonexistent/acl-notify/libascendcl.so".into(),
            origin: ENV_LIB,
        }];
        let e = open_first(&cands, &["a note".into()]).err().unwrap();
        let text = e.to_string();
        assert!(
            text.contains("/nonexistent/acl-notify/libascendcl.so"),
            "{text}"
        );
        assert!(text.contains("a note"), "{text}");
        assert_eq!(e.function(), Some("dlopen"));
        assert_eq!(e.kind(), Error::DrvInternalError);
    }
}

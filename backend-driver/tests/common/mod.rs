//! Shared test helpers: building the strict mock `libascendcl.so` (`tests/mock/mock_acl.c`)
//! and giving each test its own copy, so its process-global state is the test's alone.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Which build of the mock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mock {
    /// Only CANN's functions.
    Plain,
    /// Also `aclFinalizeReference` and the `aclnsim*` extensions.
    Ext,
}

fn build(variant: Mock) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("acl-notify-driver-mock");
    std::fs::create_dir_all(&dir).expect("create the mock's build directory");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mock/mock_acl.c");
    let (name, define) = match variant {
        Mock::Plain => ("libmockacl.so", None),
        Mock::Ext => ("libmockacl_ext.so", Some("-DMOCK_EXT")),
    };
    let out = dir.join(format!("{}-{name}", std::process::id()));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let mut cmd = Command::new(&cc);
    cmd.args([
        "-shared", "-fPIC", "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
    ])
    .args(define)
    .arg("-o")
    .arg(&out)
    .arg(&src);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("could not run the C compiler `{cc}` ({e}); set CC"));
    assert!(
        status.success(),
        "building the mock library failed: {cmd:?}"
    );
    out
}

/// A fresh copy of the mock, private to `test` (a different file is a different library to
/// the loader, with its own globals).
pub fn mock_copy(variant: Mock, test: &str) -> PathBuf {
    static PLAIN: OnceLock<PathBuf> = OnceLock::new();
    static EXT: OnceLock<PathBuf> = OnceLock::new();
    let built = match variant {
        Mock::Plain => PLAIN.get_or_init(|| build(Mock::Plain)),
        Mock::Ext => EXT.get_or_init(|| build(Mock::Ext)),
    };
    let copy = built.with_file_name(format!(
        "{}-{test}-{}",
        std::process::id(),
        built
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("mock.so")
    ));
    std::fs::copy(built, &copy).expect("copy the mock library");
    copy
}

/// The mock's test hooks, resolved from the same (already loaded) library.
pub struct Hooks {
    lib: libloading::Library,
}

impl Hooks {
    pub fn open(path: &Path) -> Hooks {
        // SAFETY: the mock library has no initialisers; it is the file the test just built.
        let lib = unsafe { libloading::Library::new(path) }.expect("open the mock for its hooks");
        Hooks { lib }
    }

    fn int_fn(&self, name: &str) -> i32 {
        // SAFETY: every mock_* hook used here has the C type `int (void)`.
        let f = unsafe { self.lib.get::<unsafe extern "C" fn() -> i32>(name) }
            .unwrap_or_else(|e| panic!("mock hook {name}: {e}"));
        // SAFETY: takes no arguments, touches only the mock's counters.
        unsafe { f() }
    }

    /// Pointers the driver passed that the mock never handed out or already destroyed, and
    /// calls made on the wrong device or with a short key buffer.
    pub fn violations(&self) -> i32 {
        self.int_fn("mock_violations")
    }

    /// `aclrtSetDevice` calls made by the calling thread.
    pub fn set_device_calls_here(&self) -> i32 {
        self.int_fn("mock_set_device_calls_here")
    }

    pub fn init_calls(&self) -> i32 {
        self.int_fn("mock_init_calls")
    }

    /// `aclFinalize` + `aclFinalizeReference` calls.
    pub fn finalize_calls(&self) -> i32 {
        self.int_fn("mock_finalize_calls")
    }

    /// Live C objects of a kind (1 notifies, 2 streams).
    pub fn live(&self, kind: i32) -> i32 {
        // SAFETY: `int mock_live(int)`.
        let f = unsafe {
            self.lib
                .get::<unsafe extern "C" fn(i32) -> i32>("mock_live")
        }
        .expect("mock_live");
        // SAFETY: plain integer argument.
        unsafe { f(kind) }
    }

    /// The flag of the notify with this id (owner's object), or -1.
    pub fn flag(&self, id: u32) -> i32 {
        // SAFETY: `int mock_flag(uint32_t)`.
        let f = unsafe {
            self.lib
                .get::<unsafe extern "C" fn(u32) -> i32>("mock_flag")
        }
        .expect("mock_flag");
        // SAFETY: plain integer argument.
        unsafe { f(id) }
    }

    /// The whitelist of the notify with this id, as (sdid, pid) pairs.
    pub fn whitelist(&self, id: u32) -> Vec<(u32, i32)> {
        type F = unsafe extern "C" fn(u32, *mut u32, *mut i32, i32) -> i32;
        // SAFETY: `int mock_whitelist(uint32_t, uint32_t *, int32_t *, int)`.
        let f = unsafe { self.lib.get::<F>("mock_whitelist") }.expect("mock_whitelist");
        let mut sdids = [0u32; 64];
        let mut pids = [0i32; 64];
        // SAFETY: both arrays hold 64 elements, the max passed.
        let n = unsafe { f(id, sdids.as_mut_ptr(), pids.as_mut_ptr(), 64) };
        assert!(n >= 0, "mock has no notify with id {id}");
        (0..n as usize).map(|k| (sdids[k], pids[k])).collect()
    }

    /// Sets the name `aclrtGetSocName` returns (a static C string).
    pub fn set_soc(&self, name: &'static std::ffi::CStr) {
        // SAFETY: `void mock_set_soc(const char *)`; the string is 'static.
        let f = unsafe {
            self.lib
                .get::<unsafe extern "C" fn(*const std::ffi::c_char)>("mock_set_soc")
        }
        .expect("mock_set_soc");
        // SAFETY: valid NUL-terminated string that lives forever.
        unsafe { f(name.as_ptr()) }
    }

    /// What `aclrtGetDeviceInfo(_, ACL_DEV_ATTR_SUPER_POD_DEVICE_ID)` answers (-1: it fails;
    /// `ACL_DEV_ATTR_SUPER_POD_SERVER_ID` then answers another number).
    pub fn set_sdid(&self, id: i64) {
        // SAFETY: `void mock_set_sdid(int64_t)`.
        let f = unsafe { self.lib.get::<unsafe extern "C" fn(i64)>("mock_set_sdid") }
            .expect("mock_set_sdid");
        // SAFETY: plain integer argument.
        unsafe { f(id) }
    }

    /// Makes `aclrtNotifyGetExportKey` write keys in a format of its own.
    pub fn set_foreign_keys(&self, on: bool) {
        // SAFETY: `void mock_set_foreign_keys(int)`.
        let f = unsafe {
            self.lib
                .get::<unsafe extern "C" fn(i32)>("mock_set_foreign_keys")
        }
        .expect("mock_set_foreign_keys");
        // SAFETY: plain integer argument.
        unsafe { f(i32::from(on)) }
    }
}

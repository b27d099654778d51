//! Control-plane costs per operation, through the Rust API (the simulator's trait methods) and
//! through the C ABI (`libascendcl.so`, loaded with `libloading`): create+destroy,
//! export+import+close, a whitelist of 64 PIDs, a batch reset of 1,000 notifies. Each operation
//! is its own group, so the case ÷ baseline ratio is exactly the C ABI's overhead.
//!
//! Setup that is not part of an operation (creating the notifies a whitelist is set on, say)
//! runs untimed, in batches between timed stretches.

use std::ffi::{c_char, c_int, c_void};
use std::path::PathBuf;
use std::rc::Rc;

use acl_notify_core::{
    CreateFlags, ExportFlags, ExportKey, ImportFlags, NotifyResources, RawNotify, Soc, StreamOps,
};
use acl_notify_sim::Sim;

use crate::groups::Ctx;
use crate::harness::{Better, Group, Iters, Kind, Variant};
use crate::notify;
use crate::sys::now_ns;

/// Notifies prepared per untimed batch.
const BATCH: usize = 64;
/// Size of the batch reset.
const RESET_N: usize = 1000;
/// The device.
const DEV: u32 = 0;
/// Fewest repetitions of a full run's control-plane groups. A repetition of one takes about
/// 0.15 s, and one repetition's C/Rust ratio spreads ±10 % on this project's VM (the machine
/// has slower stretches of a few seconds): 31 pairs put the median's own noise well inside
/// the 10 % the target allows, for about 5 s a group.
const CONTROL_REPS: usize = 31;

/// The simulator namespace the C library uses in this run (set in the environment before
/// `aclInit`).
pub fn namespace() -> String {
    format!("{}-capi", crate::cleanup::namespace(std::process::id()))
}

/// Points the C library at this run's namespace. Called first thing in `main`.
///
/// # Safety
///
/// No other thread may exist yet (environment writes race with reads on other threads).
pub unsafe fn set_env() {
    // SAFETY: the caller guarantees the process is still single-threaded.
    unsafe {
        std::env::set_var(acl_notify_sim::ENV_NAMESPACE, namespace());
        std::env::set_var(acl_notify_sim::ENV_SOC, Soc::Ascend910B.name());
        std::env::set_var(acl_notify_sim::ENV_DEVICES, "2");
    }
}

/// The operations measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `create` + `destroy`.
    CreateDestroy,
    /// `export` (PID validation disabled) + `import` + `destroy` of the import.
    ExportImportClose,
    /// `set_import_pids` with 64 PIDs on a freshly exported notify.
    Whitelist64,
    /// `batch_reset` of 1,000 notifies.
    BatchReset1000,
}

impl Op {
    /// Every operation, in table order.
    pub const ALL: [Op; 4] = [
        Op::CreateDestroy,
        Op::ExportImportClose,
        Op::Whitelist64,
        Op::BatchReset1000,
    ];

    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Op::CreateDestroy => "create+destroy",
            Op::ExportImportClose => "export+import+close",
            Op::Whitelist64 => "whitelist of 64 PIDs",
            Op::BatchReset1000 => "batch reset of 1,000",
        }
    }

    /// Group id.
    pub fn id(self) -> &'static str {
        match self {
            Op::CreateDestroy => "control.create",
            Op::ExportImportClose => "control.ipc",
            Op::Whitelist64 => "control.whitelist",
            Op::BatchReset1000 => "control.reset",
        }
    }
}

/// Row name of the C ABI variant of `op`.
pub fn c_row(op: Op) -> String {
    format!("C ABI: {}", op.name())
}

/// Row name of the Rust variant of `op`.
pub fn rust_row(op: Op) -> String {
    format!("Rust API: {}", op.name())
}

fn pids64() -> Vec<i32> {
    (0..64).map(|i| 4_000_000 + i).collect()
}

/// The same operations over either API.
trait Api {
    type N: Copy;
    /// An export key in the API's own form (no conversion in the timed path).
    type Key;
    fn create(&self) -> Result<Self::N, String>;
    fn destroy(&self, n: Self::N) -> Result<(), String>;
    /// Exports without PID validation; returns the key.
    fn export(&self, n: Self::N) -> Result<Self::Key, String>;
    /// Exports with PID validation.
    fn export_validated(&self, n: Self::N) -> Result<(), String>;
    fn import(&self, key: &Self::Key) -> Result<Self::N, String>;
    fn whitelist(&self, n: Self::N, pids: &[i32]) -> Result<(), String>;
    fn batch_reset(&self, ns: &[Self::N]) -> Result<(), String>;
}

struct RustApi {
    sim: Sim,
}

impl Api for RustApi {
    type N = RawNotify;
    type Key = ExportKey;
    fn create(&self) -> Result<RawNotify, String> {
        self.sim
            .create_notify(DEV, CreateFlags::empty())
            .map_err(|e| e.to_string())
    }
    fn destroy(&self, n: RawNotify) -> Result<(), String> {
        self.sim.destroy_notify(n).map_err(|e| e.to_string())
    }
    fn export(&self, n: RawNotify) -> Result<ExportKey, String> {
        self.sim
            .export_key(n, ExportFlags::DISABLE_PID_VALIDATION)
            .map_err(|e| e.to_string())
    }
    fn export_validated(&self, n: RawNotify) -> Result<(), String> {
        self.sim
            .export_key(n, ExportFlags::empty())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn import(&self, key: &ExportKey) -> Result<RawNotify, String> {
        self.sim
            .import_by_key(DEV, key.as_str(), ImportFlags::empty())
            .map_err(|e| e.to_string())
    }
    fn whitelist(&self, n: RawNotify, pids: &[i32]) -> Result<(), String> {
        self.sim.set_import_pids(n, pids).map_err(|e| e.to_string())
    }
    fn batch_reset(&self, ns: &[RawNotify]) -> Result<(), String> {
        self.sim.batch_reset(ns).map_err(|e| e.to_string())
    }
}

type AclNotify = *mut c_void;

/// The C entry points used, copied out of the loaded library (which `_lib` keeps loaded).
struct CApi {
    _lib: libloading::Library,
    create: unsafe extern "C" fn(*mut AclNotify, u64) -> c_int,
    destroy: unsafe extern "C" fn(AclNotify) -> c_int,
    export: unsafe extern "C" fn(AclNotify, *mut c_char, usize, u64) -> c_int,
    import: unsafe extern "C" fn(*mut AclNotify, *const c_char, u64) -> c_int,
    set_pids: unsafe extern "C" fn(AclNotify, *mut i32, usize) -> c_int,
    batch_reset: unsafe extern "C" fn(*mut AclNotify, usize) -> c_int,
}

fn check(what: &str, rc: c_int) -> Result<(), String> {
    if rc == 0 {
        Ok(())
    } else {
        Err(format!("{what} returned {rc}"))
    }
}

impl CApi {
    fn load(path: &PathBuf) -> Result<CApi, String> {
        // SAFETY: loading the project's own C library, whose initialisers only set up Rust
        // statics; it is built from this workspace for this purpose.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("loading {}: {e}", path.display()))?;
        macro_rules! sym {
            ($name:literal, $ty:ty) => {{
                // SAFETY: the symbol is one of CANN's C functions with exactly this signature
                // (SPEC §3); the pointer is copied out and used only while `lib` lives.
                let s: libloading::Symbol<$ty> = unsafe { lib.get($name) }
                    .map_err(|e| format!("symbol {}: {e}", String::from_utf8_lossy($name)))?;
                *s
            }};
        }
        let init = sym!(b"aclInit\0", unsafe extern "C" fn(*const c_char) -> c_int);
        let set_device = sym!(b"aclrtSetDevice\0", unsafe extern "C" fn(i32) -> c_int);
        let api = CApi {
            create: sym!(
                b"aclrtCreateNotify\0",
                unsafe extern "C" fn(*mut AclNotify, u64) -> c_int
            ),
            destroy: sym!(
                b"aclrtDestroyNotify\0",
                unsafe extern "C" fn(AclNotify) -> c_int
            ),
            export: sym!(
                b"aclrtNotifyGetExportKey\0",
                unsafe extern "C" fn(AclNotify, *mut c_char, usize, u64) -> c_int
            ),
            import: sym!(
                b"aclrtNotifyImportByKey\0",
                unsafe extern "C" fn(*mut AclNotify, *const c_char, u64) -> c_int
            ),
            set_pids: sym!(
                b"aclrtNotifySetImportPid\0",
                unsafe extern "C" fn(AclNotify, *mut i32, usize) -> c_int
            ),
            batch_reset: sym!(
                b"aclrtNotifyBatchReset\0",
                unsafe extern "C" fn(*mut AclNotify, usize) -> c_int
            ),
            _lib: lib,
        };
        // SAFETY: aclInit accepts NULL (no config file); the library was just loaded.
        let rc = unsafe { init(std::ptr::null()) };
        if rc != 0 && rc != 100002 {
            return Err(format!("aclInit returned {rc}"));
        }
        // SAFETY: plain C call with an integer argument.
        check("aclrtSetDevice(0)", unsafe { set_device(DEV as i32) })?;
        Ok(api)
    }
}

impl Api for CApi {
    type N = AclNotify;
    type Key = [c_char; 65];
    fn create(&self) -> Result<AclNotify, String> {
        let mut n: AclNotify = std::ptr::null_mut();
        // SAFETY: `n` is a valid out-pointer.
        check("aclrtCreateNotify", unsafe { (self.create)(&mut n, 0) })?;
        Ok(n)
    }
    fn destroy(&self, n: AclNotify) -> Result<(), String> {
        // SAFETY: `n` is a handle this library returned and that was not destroyed yet.
        check("aclrtDestroyNotify", unsafe { (self.destroy)(n) })
    }
    fn export(&self, n: AclNotify) -> Result<[c_char; 65], String> {
        let mut buf = [0 as c_char; 65];
        // SAFETY: `buf` has the 65 bytes the key needs, `len` says so.
        check("aclrtNotifyGetExportKey", unsafe {
            (self.export)(n, buf.as_mut_ptr(), buf.len(), 0x2)
        })?;
        Ok(buf)
    }
    fn export_validated(&self, n: AclNotify) -> Result<(), String> {
        let mut buf = [0 as c_char; 65];
        // SAFETY: as in `export`.
        check("aclrtNotifyGetExportKey", unsafe {
            (self.export)(n, buf.as_mut_ptr(), buf.len(), 0)
        })
    }
    fn import(&self, key: &[c_char; 65]) -> Result<AclNotify, String> {
        if key[64] != 0 {
            return Err("export key buffer is not NUL-terminated".into());
        }
        let mut n: AclNotify = std::ptr::null_mut();
        // SAFETY: `key` is NUL-terminated (checked); `n` is an out-pointer.
        check("aclrtNotifyImportByKey", unsafe {
            (self.import)(&mut n, key.as_ptr(), 0)
        })?;
        Ok(n)
    }
    fn whitelist(&self, n: AclNotify, pids: &[i32]) -> Result<(), String> {
        // SAFETY: `pids` holds `pids.len()` PIDs for the duration of the call; CANN's
        // signature takes `int32_t *` but the function only reads the array.
        check("aclrtNotifySetImportPid", unsafe {
            (self.set_pids)(n, pids.as_ptr().cast_mut(), pids.len())
        })
    }
    fn batch_reset(&self, ns: &[AclNotify]) -> Result<(), String> {
        // SAFETY: `ns` holds `ns.len()` live handles for the duration of the call; the
        // function only reads the array despite its non-const C signature.
        check("aclrtNotifyBatchReset", unsafe {
            (self.batch_reset)(ns.as_ptr().cast_mut(), ns.len())
        })
    }
}

/// Runs about `iters` operations of `op`; µs per operation (setup excluded).
fn run_op<A: Api>(api: &A, op: Op, iters: u64, reset_set: &[A::N]) -> Result<f64, String> {
    let pids = pids64();
    let mut timed = 0u64;
    let mut done = 0u64;
    while done < iters {
        let b = ((iters - done) as usize).min(BATCH);
        match op {
            Op::CreateDestroy => {
                let t0 = now_ns();
                for _ in 0..b {
                    let n = api.create()?;
                    api.destroy(n)?;
                }
                timed += now_ns() - t0;
            }
            Op::ExportImportClose => {
                let owners = (0..b)
                    .map(|_| api.create())
                    .collect::<Result<Vec<_>, _>>()?;
                let t0 = now_ns();
                let mut r = Ok(());
                for &n in &owners {
                    r = api
                        .export(n)
                        .and_then(|k| api.import(&k))
                        .and_then(|i| api.destroy(i));
                    if r.is_err() {
                        break;
                    }
                }
                timed += now_ns() - t0;
                for n in owners {
                    let _ = api.destroy(n);
                }
                r?;
            }
            Op::Whitelist64 => {
                let owners = (0..b)
                    .map(|_| {
                        let n = api.create()?;
                        api.export_validated(n)?;
                        Ok(n)
                    })
                    .collect::<Result<Vec<_>, String>>()?;
                let t0 = now_ns();
                let mut r = Ok(());
                for &n in &owners {
                    r = api.whitelist(n, &pids);
                    if r.is_err() {
                        break;
                    }
                }
                timed += now_ns() - t0;
                for n in owners {
                    let _ = api.destroy(n);
                }
                r?;
            }
            Op::BatchReset1000 => {
                let t0 = now_ns();
                for _ in 0..b {
                    api.batch_reset(reset_set)?;
                }
                timed += now_ns() - t0;
            }
        }
        done += b as u64;
    }
    Ok(timed as f64 / 1e3 / iters as f64)
}

fn variant<A: Api + 'static>(name: String, kind: Kind, api: Rc<A>, op: Op) -> Variant {
    let set = if op == Op::BatchReset1000 {
        match (0..RESET_N)
            .map(|_| api.create())
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(v) => v,
            Err(e) => return Variant::skipped(name, kind, format!("setup: {e}")),
        }
    } else {
        Vec::new()
    };
    let iters = match op {
        Op::BatchReset1000 => Iters::Scaled {
            probe: 20,
            min: 20,
            max: 100_000,
        },
        _ => Iters::Scaled {
            probe: 256,
            min: 256,
            max: 1_000_000,
        },
    };
    Variant::new(name, kind, iters, move |n| run_op(&*api, op, n, &set))
}

/// The C library's default location: next to this executable (`target/<profile>/`).
fn default_lib() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.join("libascendcl.so")))
        .unwrap_or_else(|| PathBuf::from("libascendcl.so"))
}

/// One group per operation: the C ABI (case) next to the Rust API (baseline).
pub fn groups(ctx: &Ctx) -> Vec<Group> {
    let rust: Result<Rc<RustApi>, String> = match &ctx.sim {
        Err(e) => Err(e.clone()),
        Ok(()) => notify::open(&format!("{}-ctl", ctx.ns), Soc::Ascend910B)
            .map(|sim| Rc::new(RustApi { sim })),
    };
    let path = ctx.capi.clone().unwrap_or_else(default_lib);
    let c: Result<Rc<CApi>, String> = match &ctx.sim {
        Err(e) => Err(e.clone()),
        Ok(()) if path.as_os_str() == "none" => Err("no C library (--capi none)".into()),
        Ok(()) => CApi::load(&path).map(Rc::new),
    };
    if let Err(e) = &c {
        eprintln!("  (C ABI not measured: {e})");
    }
    Op::ALL
        .into_iter()
        .map(|op| {
            let cv = match &c {
                Ok(api) => variant(c_row(op), Kind::Case, api.clone(), op),
                Err(e) => Variant::skipped(c_row(op), Kind::Case, e.clone()),
            };
            let rv = match &rust {
                Ok(api) => variant(rust_row(op), Kind::Baseline, api.clone(), op),
                Err(e) => Variant::skipped(rust_row(op), Kind::Baseline, e.clone()),
            };
            Group {
                id: op.id(),
                title: format!("Control plane: {}", op.name()),
                unit: "µs/op",
                better: Better::Lower,
                variants: vec![cv, rv],
                min_reps: if ctx.quick { 0 } else { CONTROL_REPS },
                note: format!(
                    "C library {}; ratio = the C ABI's overhead; notifies an op needs are \
                     prepared untimed in batches of {BATCH}",
                    path.display()
                ),
            }
        })
        .collect()
}

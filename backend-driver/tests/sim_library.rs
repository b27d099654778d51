//! Smoke test against the simulator's C library (`backend-sim/capi`, `libascendcl.so`): the
//! driver loads it like a CANN runtime and a whole notify round trip works. The library is the
//! one cargo builds next to this test binary (`target/<profile>/libascendcl.so`); this test
//! first runs `cargo build -p acl-notify-capi` (same profile and target directory, a no-op
//! when the library is up to date) and fails with the build's output if that does not work —
//! it never skips, and never tests a stale library.
//!
//! One test in this binary: it sets process environment variables (the simulator's
//! namespace), which must not race with other threads.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use acl_notify_core::{
    Backend, CreateFlags, Error, ExportFlags, HostOps, ImportFlags, Lifecycle, NotifyResources,
    RawNotify, StreamDestroy, StreamOps, SyncWait, Timeout,
};
use acl_notify_driver::Driver;

/// Longest a build of the C library may take before the test gives up (2 shared cores).
const BUILD_LIMIT: Duration = Duration::from_secs(20 * 60);

fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/sim_library-<hash> → target/<profile>
    exe.parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("unexpected test binary location {}", exe.display()))
        .to_path_buf()
}

/// The simulator's `libascendcl.so`, brought up to date by cargo (a no-op when it is).
fn sim_library() -> PathBuf {
    let dir = profile_dir();
    let lib = dir.join("libascendcl.so");
    let target_dir = dir.parent().expect("a target directory above the profile");
    let profile = dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("profile directory name");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(&cargo);
    cmd.args(["build", "--quiet", "-p", "acl-notify-capi", "--target-dir"])
        .arg(target_dir)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match profile {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| {
        panic!(
            "building {}: `{cargo}` could not be run: {e}",
            lib.display()
        )
    });
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > BUILD_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "building {}: `cargo build -p acl-notify-capi` did not finish within \
                     {BUILD_LIMIT:?}; build it first",
                    lib.display()
                );
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => panic!("waiting for cargo: {e}"),
        }
    }
    let out = child.wait_with_output().expect("cargo's output");
    assert!(
        out.status.success() && lib.exists(),
        "building {}: `cargo build -p acl-notify-capi` failed ({}):\n{}",
        lib.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    lib
}

#[test]
fn the_driver_runs_a_notify_round_trip_on_the_simulator_library() {
    let lib = sim_library();
    let namespace = format!("driver-smoke-{}", std::process::id());
    // SAFETY: this binary has exactly one test; no other thread reads the environment.
    unsafe {
        std::env::set_var(acl_notify_sim::ENV_NAMESPACE, &namespace);
        std::env::set_var(acl_notify_sim::ENV_SOC, "Ascend910B");
        std::env::set_var(acl_notify_sim::ENV_DEVICES, "4");
        std::env::remove_var(acl_notify_sim::ENV_SERVER_ID);
        std::env::remove_var("ACL_NOTIFY_DRIVER_SOC");
        std::env::remove_var("ACL_NOTIFY_DRIVER_SERVER_ID");
    }
    let d = Driver::load_from(&lib).unwrap_or_else(|e| panic!("loading {}: {e}", lib.display()));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        round_trip(&d);
        device_buffers(&d);
    }));
    drop(d);
    let _ = acl_notify_sim::Sim::remove_namespace(&namespace);
    if let Err(p) = result {
        std::panic::resume_unwind(p);
    }
}

fn round_trip(d: &Driver) {
    assert_eq!(d.soc(), acl_notify_core::Soc::Ascend910B);
    assert_eq!(d.device_count(), 4);
    assert_eq!(d.bare_tgid(), std::process::id() as i32);

    // Wait first, record later, on two streams of one device.
    let n = d.create_notify(0, CreateFlags::empty()).expect("create");
    let waiter = d.create_stream(0).expect("stream");
    let recorder = d.default_stream(0).expect("default stream");
    d.wait_and_reset(n, waiter, Timeout::Forever).expect("wait");
    d.record(n, recorder).expect("record");
    d.synchronize(waiter, SyncWait::AtMost(Duration::from_secs(30)))
        .expect("the wait is released by the record");

    // IPC within the process: export, whitelist ourselves, import onto device 1, record there.
    let key = d.export_key(n, ExportFlags::empty()).expect("export");
    let info = d.notify_info(n).expect("info");
    assert_eq!(info.state, Lifecycle::Exported);
    assert_eq!(
        u32::from(key.fields().expect("the simulator writes native keys").id),
        info.id
    );
    d.set_import_pids(n, &[d.bare_tgid()]).expect("whitelist");
    assert_eq!(d.notify_info(n).unwrap().state, Lifecycle::Whitelisted);
    let imp = d
        .import_by_key(1, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS)
        .expect("import");
    let ii = d.notify_info(imp).expect("imported info");
    assert_eq!(
        (ii.id, ii.device, ii.owner_device, ii.state),
        (info.id, 1, 0, Lifecycle::Imported)
    );
    let s1 = d.create_stream(1).expect("stream on device 1");
    d.wait_and_reset(n, waiter, Timeout::Forever)
        .expect("wait 2");
    d.record(imp, s1).expect("record from the importer");
    d.synchronize(waiter, SyncWait::AtMost(Duration::from_secs(30)))
        .expect("released by the importer's record");

    // Errors come back with the code, the function and the library's explanation.
    let e = d
        .wait_and_reset(imp, s1, Timeout::Forever)
        .expect_err("waiting on an imported notify from another device");
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert_eq!(e.function(), Some("aclrtWaitAndResetNotify"));
    assert!(
        e.recent_message().is_some(),
        "no aclGetRecentErrMsg text: {e}"
    );
    let e = d
        .export_key(n, ExportFlags::empty())
        .expect_err("exported twice");
    assert_eq!(e.kind(), Error::InternalError);

    // The simulator's library exports the host-side extensions.
    assert!(d.has_host_extension(), "{d:?}");
    let free = d.notifies_free(0).expect("free ids");
    assert!(!d.try_consume(n).expect("try_consume"));
    d.record(n, recorder).expect("record");
    d.synchronize(recorder, SyncWait::AtMost(Duration::from_secs(30)))
        .expect("record ran");
    assert!(d.try_consume(n).expect("try_consume after a record"));
    let e = d
        .host_wait(n, Duration::from_millis(20))
        .expect_err("nothing recorded");
    assert_eq!(e.kind(), Error::WaitTimeout);
    d.record(n, recorder).expect("record");
    d.host_wait(n, Duration::from_secs(30)).expect("host wait");
    let extra = d.create_notify(0, CreateFlags::empty()).expect("create");
    assert_eq!(d.notifies_free(0).expect("free ids"), free - 1);
    d.destroy_notify(extra).expect("destroy");

    // Handles die exactly once.
    d.destroy_notify(imp).expect("destroy imported");
    assert_eq!(
        d.destroy_notify(imp).unwrap_err().kind(),
        Error::InvalidHandle
    );
    d.destroy_stream(s1, StreamDestroy::Drain)
        .expect("destroy stream");
    d.destroy_notify(n).expect("destroy");
    assert_eq!(
        d.record(n, recorder).unwrap_err().kind(),
        Error::InvalidHandle
    );
    assert_eq!(
        d.record(RawNotify(0xdead_beef), recorder)
            .unwrap_err()
            .kind(),
        Error::InvalidHandle
    );
    // Left for the drop of the driver to destroy.
    d.create_notify(2, CreateFlags::empty()).expect("create");
}

/// The typed device buffers through the library's `aclrtMalloc`, `aclrtMemcpy`,
/// `aclrtIpcMem*` and `aclrtFree`: bytes round-trip, a range past the end is the library's
/// 107000, an export whitelists, and a drop frees.
fn device_buffers(d: &Driver) {
    use acl_notify_core::soc::Ascend910B;
    use acl_notify_core::typed::Device;
    let dev = Device::<Ascend910B, _>::new(d, 1).expect("device 1");
    let b = dev.alloc(4096).expect("alloc");
    b.write(8, &[5u8; 32]).expect("write");
    let mut out = [0u8; 32];
    b.read(8, &mut out).expect("read");
    assert_eq!(out, [5u8; 32]);
    let e = b.write(4090, &[0u8; 16]).expect_err("past the end");
    assert_eq!(e.kind(), Error::ParamInvalid, "{e}");
    let (exported, key) = b.export().map_err(|(_, e)| e).expect("export");
    assert_eq!(key.as_str().len(), 64);
    let shared = exported
        .allow_pids(&[d.bare_tgid() + 1])
        .map_err(|(_, e)| e)
        .expect("whitelist");
    shared.free().expect("free");
    let c = dev.alloc(64).expect("alloc");
    drop(c);
}

//! The driver against a strict mock `libascendcl.so` (`tests/mock/mock_acl.c`) that counts
//! every pointer it did not hand out, every call on the wrong device and every short key
//! buffer: marshalling, handle lifetimes, per-thread devices, error capture, the optional
//! extensions and drop. Each test loads its own copy of the mock.

mod common;

use std::time::Duration;

use acl_notify_core::{
    Backend, CreateFlags, Error, ExportFlags, ExportKey, HostCall, HostOps, ImportFlags, Lifecycle,
    NotifyResources, RawNotify, RawStream, ServerPid, Soc, StreamDestroy, StreamOps, StreamStatus,
    SyncWait, Timeout,
};
use acl_notify_driver::Driver;
use common::{Hooks, Mock, mock_copy};

const NOTIFY: i32 = 1;
const STREAM: i32 = 2;

fn load(variant: Mock, test: &str) -> (Driver, Hooks) {
    let path = mock_copy(variant, test);
    let hooks = Hooks::open(&path);
    let d = Driver::load_from(&path).unwrap_or_else(|e| panic!("loading the mock: {e}"));
    (d, hooks)
}

#[test]
fn identity_comes_from_the_library() {
    let (d, hooks) = load(Mock::Plain, "identity");
    assert_eq!(d.soc(), Soc::Ascend910B, "Ascend910B3 is an Ascend910B");
    assert_eq!(d.soc_name(), "Ascend910B3");
    assert_eq!(d.device_count(), 4);
    assert_eq!(d.bare_tgid(), std::process::id() as i32);
    assert_eq!(d.server_id(), 0, "no extension, no override: server 0");
    assert!(!d.has_host_extension());
    assert_eq!(hooks.init_calls(), 1);
    let file = d.library_file().expect("dladdr names the mapped file");
    assert!(file.to_string_lossy().contains("identity"), "{file:?}");
    assert_eq!(hooks.violations(), 0);
}

#[test]
fn a_bare_ascend910b_is_a_first_generation_910_unless_the_library_is_the_simulator() {
    // A CANN runtime names a 30-core first-generation Ascend 910 `Ascend910B`: no batch reset,
    // 1024 notifies (SPEC §4 `Ascend910`), not the Atlas A2 family.
    let path = mock_copy(Mock::Plain, "bare_910b");
    let hooks = Hooks::open(&path);
    hooks.set_soc(c"Ascend910B");
    let d = Driver::load_from(&path).unwrap();
    assert_eq!(d.soc(), Soc::Ascend910, "CANN's chip name Ascend910B");
    assert_eq!(d.soc_name(), "Ascend910B");
    drop(d);

    // A library with the aclnsim* extensions names families as SPEC §4 does.
    let path = mock_copy(Mock::Ext, "bare_910b_ext");
    let hooks = Hooks::open(&path);
    hooks.set_soc(c"Ascend910B");
    let d = Driver::load_from(&path).unwrap();
    assert_eq!(
        d.soc(),
        Soc::Ascend910B,
        "the simulator's family name Ascend910B"
    );
}

#[test]
fn the_server_id_is_the_super_pod_device_id_that_whitelists_name() {
    // aclrtServerPid.sdid is the SuperPOD Device ID (attribute 403), not the server id (404).
    let path = mock_copy(Mock::Plain, "server_id");
    let hooks = Hooks::open(&path);
    hooks.set_sdid(37);
    let d = Driver::load_from(&path).unwrap();
    assert_eq!(d.server_id(), 37);
}

#[test]
fn invalid_handles_get_the_answer_of_the_runtime_check_order() {
    // A SoC without notifies answers 207000 to every notify call, whatever the handle.
    let path = mock_copy(Mock::Plain, "order_ipv350");
    let hooks = Hooks::open(&path);
    hooks.set_soc(c"IPV350");
    let d = Driver::load_from(&path).unwrap();
    let s = d.create_stream(0).unwrap();
    for h in [RawNotify(1), RawNotify(0), RawNotify(u64::MAX)] {
        let entry = [ServerPid { sdid: 0, pid: 1 }];
        for e in [
            d.destroy_notify(h).unwrap_err(),
            d.notify_info(h).unwrap_err(),
            d.record(h, s).unwrap_err(),
            d.wait_and_reset(h, s, Timeout::Forever).unwrap_err(),
            d.batch_reset(&[h]).unwrap_err(),
            d.export_key(h, ExportFlags::empty()).unwrap_err(),
            d.set_import_pids(h, &[1]).unwrap_err(),
            d.set_import_server_pids(h, &entry).unwrap_err(),
        ] {
            assert_eq!(e.kind(), Error::FeatureNotSupport, "{e}");
        }
    }
    drop(d);

    // No IPC: set-import-pid checks the SoC before the handle; export checks the handle first.
    let path = mock_copy(Mock::Plain, "order_310b");
    let hooks = Hooks::open(&path);
    hooks.set_soc(c"Ascend310B1");
    let d = Driver::load_from(&path).unwrap();
    assert_eq!(d.soc(), Soc::Ascend310B);
    let stale = d.create_notify(0, CreateFlags::empty()).unwrap();
    d.destroy_notify(stale).unwrap();
    let kind = |r: Result<(), acl_notify_driver::DriverError>| r.unwrap_err().kind();
    assert_eq!(
        kind(d.set_import_pids(stale, &[1])),
        Error::FeatureNotSupport
    );
    assert_eq!(
        d.import_by_key(0, "an2\0", ImportFlags::empty())
            .unwrap_err()
            .kind(),
        Error::FeatureNotSupport
    );
    assert_eq!(
        d.export_key(stale, ExportFlags::empty())
            .unwrap_err()
            .kind(),
        Error::InvalidHandle
    );
    assert_eq!(kind(d.batch_reset(&[stale])), Error::FeatureNotSupport);
    // Inter-server: "num == 0 → 107000" first, then 107017 before every per-entry check.
    assert_eq!(
        kind(d.set_import_server_pids(stale, &[])),
        Error::ParamInvalid
    );
    assert_eq!(
        kind(d.set_import_server_pids(stale, &[ServerPid { sdid: 1, pid: 1 }])),
        Error::InvalidHandle
    );
}

#[test]
fn a_partly_applied_inter_server_call_leaves_the_handle_whitelisted() {
    let (d, hooks) = load(Mock::Plain, "partial");
    let n = d.create_notify(0, CreateFlags::empty()).unwrap();
    d.export_key(n, ExportFlags::empty()).unwrap();
    let many: Vec<ServerPid> = (0..65)
        .map(|k| ServerPid {
            sdid: 1,
            pid: 1000 + k,
        })
        .collect();
    let e = d.set_import_server_pids(n, &many).unwrap_err();
    assert_eq!(e.kind(), Error::OverLimit);
    assert_eq!(hooks.whitelist(d.notify_info(n).unwrap().id).len(), 64);
    assert_eq!(d.notify_info(n).unwrap().state, Lifecycle::Whitelisted);
    // A call that fails on its first entry applies nothing.
    let m = d.create_notify(0, CreateFlags::empty()).unwrap();
    d.export_key(m, ExportFlags::empty()).unwrap();
    d.set_import_pids(m, &[]).unwrap_err();
    assert_eq!(d.notify_info(m).unwrap().state, Lifecycle::Exported);
}

#[test]
fn unknown_soc_names_are_refused_at_load() {
    let path = mock_copy(Mock::Plain, "unknown_soc");
    let hooks = Hooks::open(&path);
    hooks.set_soc(c"Ascend610");
    let e = Driver::load_from(&path).expect_err("an unknown SoC must not load");
    assert_eq!(e.kind(), Error::FeatureNotSupport);
    let text = e.to_string();
    assert!(text.contains("Ascend610"), "{text}");
    assert!(text.contains("ACL_NOTIFY_DRIVER_SOC"), "{text}");
    // The failed load gave its aclInit back.
    assert_eq!(hooks.finalize_calls(), 1);
}

#[test]
fn stale_foreign_and_garbage_handles_never_reach_c() {
    let (d, hooks) = load(Mock::Plain, "stale");
    let n = d.create_notify(0, CreateFlags::empty()).unwrap();
    let s = d.create_stream(0).unwrap();
    d.record(n, s).unwrap();
    d.destroy_notify(n).unwrap();
    assert_eq!(hooks.live(NOTIFY), 0);

    let e = d.destroy_notify(n).unwrap_err();
    assert_eq!(e.kind(), Error::InvalidHandle);
    assert_eq!(e.function(), None, "answered from the table, not by C");
    assert_eq!(d.record(n, s).unwrap_err().kind(), Error::InvalidHandle);
    assert_eq!(d.notify_info(n).unwrap_err().kind(), Error::InvalidHandle);
    for garbage in [
        RawNotify(0),
        RawNotify(1),
        RawNotify(u64::MAX),
        RawNotify(s.0),
    ] {
        assert_eq!(
            d.record(garbage, s).unwrap_err().kind(),
            Error::InvalidHandle,
            "{garbage:?}"
        );
    }
    assert_eq!(
        d.synchronize(RawStream(n.0), SyncWait::Forever)
            .unwrap_err()
            .kind(),
        Error::InvalidHandle
    );
    // Another driver's handles are foreign here, even on the same library.
    let (other, _h2) = load(Mock::Plain, "stale_other");
    let theirs = other.create_notify(0, CreateFlags::empty()).unwrap();
    assert_eq!(
        d.record(theirs, s).unwrap_err().kind(),
        Error::InvalidHandle
    );

    d.destroy_stream(s, StreamDestroy::Drain).unwrap();
    assert_eq!(
        d.destroy_stream(s, StreamDestroy::Drain)
            .unwrap_err()
            .kind(),
        Error::InvalidHandle
    );
    let def = d.default_stream(0).unwrap();
    let e = d.destroy_stream(def, StreamDestroy::Drain).unwrap_err();
    assert_eq!(e.kind(), Error::InvalidHandle);
    assert!(e.to_string().contains("default stream"), "{e}");
    assert_eq!(hooks.violations(), 0);
}

#[test]
fn batch_reset_resets_the_live_prefix_and_reports_the_dead_element() {
    let (d, hooks) = load(Mock::Plain, "batch");
    let s = d.default_stream(0).unwrap();
    let a = d.create_notify(0, CreateFlags::empty()).unwrap();
    let dead = d.create_notify(0, CreateFlags::empty()).unwrap();
    let c = d.create_notify(0, CreateFlags::empty()).unwrap();
    d.destroy_notify(dead).unwrap();
    let (ia, ic) = (d.notify_info(a).unwrap().id, d.notify_info(c).unwrap().id);
    d.record(a, s).unwrap();
    d.record(c, s).unwrap();
    assert_eq!((hooks.flag(ia), hooks.flag(ic)), (1, 1));

    let e = d.batch_reset(&[a, dead, c]).unwrap_err();
    assert_eq!(e.kind(), Error::InvalidHandle);
    assert!(e.to_string().contains("element 1"), "{e}");
    assert_eq!(
        hooks.flag(ia),
        0,
        "the element before the dead one is reset"
    );
    assert_eq!(hooks.flag(ic), 1, "the element after it is not");

    assert_eq!(
        d.batch_reset(&[dead]).unwrap_err().kind(),
        Error::InvalidHandle
    );
    let e = d.batch_reset(&[]).unwrap_err();
    assert_eq!(
        e.kind(),
        Error::ParamInvalid,
        "num == 0 is the runtime's 107000"
    );
    assert_eq!(e.function(), Some("aclrtNotifyBatchReset"));
    d.batch_reset(&[c, a, c]).unwrap();
    assert_eq!(hooks.flag(ic), 0);
    assert_eq!(hooks.violations(), 0);
}

#[test]
fn current_device_follows_the_handle_and_is_cached_per_thread() {
    let (d, hooks) = load(Mock::Plain, "device");
    // Objects on devices 1 and 2; the mock answers 107003 (and counts a violation) if a call
    // arrives while another device is current.
    let n1 = d.create_notify(1, CreateFlags::empty()).unwrap();
    let n2 = d.create_notify(2, CreateFlags::empty()).unwrap();
    let s1 = d.create_stream(1).unwrap();
    let s2 = d.create_stream(2).unwrap();
    for _ in 0..3 {
        d.record(n1, s1).unwrap();
        d.wait_and_reset(n1, s1, Timeout::Forever).unwrap();
        d.record(n2, s2).unwrap();
        d.synchronize(s2, SyncWait::AtMost(Duration::from_micros(1500)))
            .unwrap();
        assert_eq!(d.query(s1).unwrap(), StreamStatus::Complete);
        d.notify_info(n2).unwrap();
    }
    assert_eq!(d.stream_device(s2).unwrap(), 2);
    // Same device again and again: no aclrtSetDevice after the first.
    d.record(n1, s1).unwrap();
    let before = hooks.set_device_calls_here();
    for _ in 0..10 {
        d.record(n1, s1).unwrap();
        d.wait_and_reset(n1, s1, Timeout::ProcessDefault).unwrap();
    }
    assert_eq!(
        hooks.set_device_calls_here(),
        before,
        "the device cache was not used"
    );

    // Other threads start with no current device; the driver sets theirs.
    std::thread::scope(|sc| {
        for (n, s) in [(n1, s1), (n2, s2), (n1, s1)] {
            let d = &d;
            sc.spawn(move || {
                for _ in 0..50 {
                    d.record(n, s).unwrap();
                    d.wait_and_reset(n, s, Timeout::Forever).unwrap();
                }
            });
        }
    });
    let e = d.create_stream(9).unwrap_err();
    assert_eq!(e.kind(), Error::InvalidDeviceId);
    assert_eq!(e.function(), Some("aclrtSetDevice"));
    assert_eq!(hooks.violations(), 0);
}

#[test]
fn keys_and_whitelists_are_marshalled_faithfully() {
    let (d, hooks) = load(Mock::Plain, "ipc");
    let n = d.create_notify(0, CreateFlags::empty()).unwrap();
    let info = d.notify_info(n).unwrap();
    assert_eq!(info.state, Lifecycle::Created);
    let key = d.export_key(n, ExportFlags::empty()).unwrap();
    let fields = key.fields().expect("the mock writes acl-notify keys");
    assert_eq!((fields.device, u32::from(fields.id)), (0, info.id));
    assert_eq!(ExportKey::parse(key.as_str().as_bytes()), Ok(key));
    assert_eq!(d.notify_info(n).unwrap().state, Lifecycle::Exported);
    assert_eq!(
        d.export_key(n, ExportFlags::empty()).unwrap_err().kind(),
        Error::InternalError
    );

    d.set_import_pids(n, &[41, 42]).unwrap();
    d.set_import_server_pids(
        n,
        &[
            ServerPid { sdid: 3, pid: 100 },
            ServerPid { sdid: 4, pid: 101 },
        ],
    )
    .unwrap();
    assert_eq!(
        hooks.whitelist(info.id),
        vec![(0, 41), (0, 42), (3, 100), (4, 101)],
        "PIDs and aclrtServerPid entries arrive intact"
    );
    assert_eq!(d.notify_info(n).unwrap().state, Lifecycle::Whitelisted);
    let e = d.set_import_server_pids(n, &[]).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    let e = d.set_import_pids(n, &[]).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);

    // Import on device 2: the owner's device comes from the key.
    let imp = d
        .import_by_key(2, key.as_str(), ImportFlags::ENABLE_PEER_ACCESS)
        .unwrap();
    let ii = d.notify_info(imp).unwrap();
    assert_eq!(
        (ii.id, ii.device, ii.owner_device, ii.owner_server, ii.state),
        (info.id, 2, 0, 0, Lifecycle::Imported)
    );
    let s2 = d.create_stream(2).unwrap();
    d.record(imp, s2).unwrap();
    assert_eq!(hooks.flag(info.id), 1);
    let e = d.wait_and_reset(imp, s2, Timeout::Forever).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert_eq!(e.function(), Some("aclrtWaitAndResetNotify"));
    assert!(
        e.recent_message()
            .unwrap_or_default()
            .contains("not on the owner's device"),
        "{e}"
    );
    let e = d
        .import_by_key(0, "an2-not-a-key", ImportFlags::empty())
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.function()),
        (Error::ParamInvalid, Some("aclrtNotifyImportByKey"))
    );
    let e = d
        .import_by_key(0, "an2\0", ImportFlags::empty())
        .unwrap_err();
    assert_eq!((e.kind(), e.function()), (Error::ParamInvalid, None));
    d.destroy_notify(imp).unwrap();
    d.destroy_notify(n).unwrap();
    assert_eq!(
        hooks.violations(),
        0,
        "short key buffer, bad entry or pointer"
    );
}

#[test]
fn errors_carry_code_function_and_runtime_message() {
    let (d, _hooks) = load(Mock::Plain, "errors");
    let n = d.create_notify(0, CreateFlags::empty()).unwrap();
    let e = d.set_import_pids(n, &[1]).unwrap_err();
    assert_eq!(e.kind(), Error::ParamInvalid);
    assert_eq!(e.code(), 107_000);
    assert_eq!(e.function(), Some("aclrtNotifySetImportPid"));
    assert_eq!(e.recent_message(), Some("mock: not exported"));
    let text = e.to_string();
    for part in [
        "aclrtNotifySetImportPid",
        "107000",
        "not exported",
        &format!("{:#x}", n.0),
    ] {
        assert!(text.contains(part), "{text:?} lacks {part:?}");
    }
    // The message was taken right after the failing call: the next failure has only its own.
    let e = d.enable_peer_access(1, 1).unwrap_err();
    assert_eq!(e.recent_message(), Some("mock: bad peer or flags"));
    assert!(d.can_access_peer(0, 1).unwrap());
    assert!(!d.can_access_peer(1, 1).unwrap());
    d.enable_peer_access(0, 1).unwrap();
}

#[test]
fn foreign_key_formats_are_carried_opaquely() {
    let (d, hooks) = load(Mock::Plain, "foreign");
    hooks.set_foreign_keys(true);
    let n = d.create_notify(1, CreateFlags::empty()).unwrap();
    // A real runtime writes its own key format: it comes back as an opaque runtime key.
    let key = d
        .export_key(n, ExportFlags::DISABLE_PID_VALIDATION)
        .unwrap();
    let id = d.notify_info(n).unwrap().id;
    assert!(!key.is_native());
    assert_eq!(key.fields(), None);
    assert_eq!(key.as_str(), format!("foreign-key-{id}"));
    assert_eq!(d.notify_info(n).unwrap().state, Lifecycle::ExportedOpen);
    // The importer rebuilds it from the text it received; the owner is then unknown to us and
    // reported as local.
    let received = ExportKey::from_runtime(key.as_str().as_bytes()).unwrap();
    assert_eq!(received, key);
    let imp = d
        .import_by_key(3, received.as_str(), ImportFlags::empty())
        .unwrap();
    let ii = d.notify_info(imp).unwrap();
    assert_eq!((ii.id, ii.device, ii.owner_device), (id, 3, 3));
    assert_eq!(hooks.violations(), 0);
}

extern "C" fn bump(arg: *mut std::ffi::c_void) {
    // SAFETY: `arg` is the AtomicU32 the test keeps alive until after the stream ran.
    let counter = unsafe { &*arg.cast::<std::sync::atomic::AtomicU32>() };
    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn host_functions_run_on_the_stream() {
    let (d, hooks) = load(Mock::Plain, "hostfn");
    let counter = std::sync::atomic::AtomicU32::new(0);
    let s = d.create_stream(3).unwrap();
    let arg = std::ptr::from_ref(&counter).cast_mut().cast();
    for _ in 0..3 {
        // SAFETY: `bump` only touches the counter, which outlives the synchronize below.
        d.launch_host_func(s, unsafe { HostCall::new(bump, arg) })
            .unwrap();
    }
    d.synchronize(s, SyncWait::Forever).unwrap();
    assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 3);
    d.set_op_wait_timeout(5).unwrap();
    assert_eq!(hooks.violations(), 0);
}

#[test]
fn host_ops_without_the_extension_are_feature_not_supported() {
    let (d, _hooks) = load(Mock::Plain, "noext");
    let n = d.create_notify(0, CreateFlags::empty()).unwrap();
    for e in [
        d.host_wait(n, Duration::from_millis(1)).unwrap_err(),
        d.try_consume(n).unwrap_err(),
        d.notifies_free(0).unwrap_err(),
    ] {
        assert_eq!(e.kind(), Error::FeatureNotSupport);
        assert!(e.to_string().contains("aclnsim"), "{e}");
    }
}

#[test]
fn host_ops_use_the_extension_when_exported() {
    let (d, hooks) = load(Mock::Ext, "ext");
    assert!(d.has_host_extension());
    assert_eq!(d.server_id(), 7, "from aclnsimGetServerId");
    let n = d.create_notify(1, CreateFlags::empty()).unwrap();
    let s = d.default_stream(1).unwrap();
    assert!(!d.try_consume(n).unwrap());
    d.record(n, s).unwrap();
    assert!(d.try_consume(n).unwrap());
    assert!(!d.try_consume(n).unwrap());
    let e = d.host_wait(n, Duration::from_millis(5)).unwrap_err();
    assert_eq!(
        (e.kind(), e.function()),
        (Error::WaitTimeout, Some("aclnsimNotifyHostWait"))
    );
    d.record(n, s).unwrap();
    d.host_wait(n, Duration::from_secs(5)).unwrap();
    let free = d.notifies_free(1).unwrap();
    d.create_notify(1, CreateFlags::empty()).unwrap();
    assert_eq!(d.notifies_free(1).unwrap(), free - 1);
    assert_eq!(
        d.notifies_free(8).unwrap_err().kind(),
        Error::InvalidDeviceId
    );
    assert_eq!(hooks.violations(), 0);
}

#[test]
fn dropping_the_last_driver_destroys_everything_once_and_finalizes() {
    let path = mock_copy(Mock::Plain, "drop");
    let hooks = Hooks::open(&path);
    let d = Driver::load_from(&path).unwrap();
    let second = Driver::load_from(&path).unwrap();
    assert_eq!(hooks.init_calls(), 1, "one aclInit per library");
    let clone = d.clone();
    for dev in 0..3 {
        let n = d.create_notify(dev, CreateFlags::empty()).unwrap();
        let s = clone.create_stream(dev).unwrap();
        d.default_stream(dev).unwrap();
        d.record(n, s).unwrap();
    }
    let gone = d.create_notify(0, CreateFlags::empty()).unwrap();
    d.destroy_notify(gone).unwrap();
    second.create_notify(3, CreateFlags::empty()).unwrap();
    assert_eq!((hooks.live(NOTIFY), hooks.live(STREAM)), (4, 3));
    drop(d);
    assert_eq!(hooks.live(NOTIFY), 4, "a clone is still alive");
    drop(clone);
    assert_eq!(
        (hooks.live(NOTIFY), hooks.live(STREAM)),
        (1, 0),
        "the first driver's objects are destroyed, the second's are not"
    );
    assert_eq!(
        hooks.finalize_calls(),
        0,
        "another driver still uses the library"
    );
    drop(second);
    assert_eq!(hooks.live(NOTIFY), 0);
    assert_eq!(hooks.finalize_calls(), 1);
    assert_eq!(
        hooks.violations(),
        0,
        "something was destroyed twice or on the wrong device"
    );
    // A new driver starts a new session.
    let again = Driver::load_from(&path).unwrap();
    assert_eq!(hooks.init_calls(), 2);
    let n = again.create_notify(0, CreateFlags::empty()).unwrap();
    again.destroy_notify(n).unwrap();
    assert_eq!(hooks.violations(), 0);
}

#[test]
fn concurrent_destroy_and_use_never_pass_a_dead_pointer() {
    let (d, hooks) = load(Mock::Plain, "race");
    let s = d.create_stream(0).unwrap();
    for _ in 0..200 {
        let n = d.create_notify(0, CreateFlags::empty()).unwrap();
        std::thread::scope(|sc| {
            let d = &d;
            let users: Vec<_> = (0..2)
                .map(|_| {
                    sc.spawn(move || {
                        for _ in 0..20 {
                            match d.record(n, s) {
                                Ok(()) => {}
                                Err(e) => assert_eq!(e.kind(), Error::InvalidHandle),
                            }
                        }
                    })
                })
                .collect();
            let closers: Vec<_> = (0..2)
                .map(|_| sc.spawn(move || d.destroy_notify(n).is_ok()))
                .collect();
            for u in users {
                u.join().unwrap();
            }
            let destroyed: usize = closers
                .into_iter()
                .map(|c| usize::from(c.join().unwrap()))
                .sum();
            assert_eq!(destroyed, 1, "exactly one destroy succeeds");
        });
    }
    assert_eq!(hooks.live(NOTIFY), 0);
    assert_eq!(hooks.violations(), 0);
}

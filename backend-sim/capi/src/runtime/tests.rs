//! Unit tests of [`Runtime`] over a real simulator: handles named in errors, batch reset.

use super::*;
use std::time::Duration;

use acl_notify_core::{CreateFlags, Soc, StreamDestroy, SyncWait};

use acl_notify_sim::NamespaceGuard as Ns;

/// A bound that only turns a hang into a failure (a wait for something that does not come),
/// never a measure of speed: a healthy run takes milliseconds, a loaded machine (2 CPUs
/// beside other builds) any time. Also the resets' drain bound in the tests below: a drain
/// that waits for a deadlocked thread ends at it with 507046.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Whether a reset began releasing `device` before [`HANG_GUARD`] (polled): what the tests
/// below wait for before the call that must meet the reset, where they slept 200-300 ms
/// until 2026-12-07 (a reset that had not begun by then, on a loaded machine, let the call
/// succeed, and the test fail).
fn releasing_within_guard(rt: &Runtime, device: u32) -> bool {
    let t0 = std::time::Instant::now();
    while !rt.releasing(device) {
        if t0.elapsed() >= HANG_GUARD {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

fn runtime(tag: &str) -> (Runtime, Ns) {
    let (sim, ns) = Ns::open_sim(
        format!("unit-capi-{tag}-{}", std::process::id()),
        Soc::Ascend910B,
        2,
    )
    .expect("opening a test Sim");
    (Runtime::new(sim, 1, 42), ns)
}

/// A record blocked for room in a full stream that is then destroyed: the 107017 names
/// the caller's stream handle, not the backend's.
#[test]
fn a_stream_destroyed_under_a_blocked_record_is_named_by_its_c_handle() {
    let (rt, _ns) = runtime("gone");
    let rt = std::sync::Arc::new(rt);
    rt.set_device(0).unwrap();
    let s = rt.create_stream().unwrap();
    let (gate, n) = (
        rt.create_notify(CreateFlags::empty()).unwrap(),
        rt.create_notify(CreateFlags::empty()).unwrap(),
    );
    rt.wait_and_reset(gate, s, 0).unwrap();
    let rt2 = std::sync::Arc::clone(&rt);
    let filler = std::thread::spawn(move || {
        rt2.set_device(0).unwrap();
        // Fills the queue behind the gate, then blocks for room until the destroy.
        for _ in 0..4096 {
            if let Err(e) = rt2.record(n, s) {
                return Some(e);
            }
        }
        None
    });
    let queued = std::time::Instant::now();
    while !filler.is_finished() && queued.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!filler.is_finished(), "the filler never blocked");
    rt.destroy_stream(s, StreamDestroy::Discard).unwrap();
    let e = filler
        .join()
        .unwrap()
        .expect("the blocked record succeeded");
    assert_eq!(e.code(), Error::InvalidHandle);
    assert!(e.text().contains(&format!("stream {s:#x}")), "{}", e.text());
}

#[test]
fn batch_reset_resets_the_prefix_and_stops_reading_at_the_failure() {
    let (rt, _ns) = runtime("batch");
    rt.set_device(0).unwrap();
    let h: Vec<usize> = (0..3)
        .map(|_| rt.create_notify(CreateFlags::empty()).unwrap())
        .collect();
    for &n in &h {
        rt.record(n, 0).unwrap();
    }
    rt.synchronize(0, SyncWait::Forever).unwrap();
    // [h0, NULL, h2]: h0 is reset, then 107000; h2 is never read.
    let batch = [h[0], 0, h[2]];
    let mut read = Vec::new();
    let e = rt
        .batch_reset(3, |i| {
            read.push(i);
            batch[i]
        })
        .unwrap_err();
    assert_eq!(e.code(), Error::ParamInvalid);
    assert_eq!(read, [0, 1]);
    assert!(!rt.try_consume(h[0]).unwrap(), "element 0 was not reset");
    assert!(rt.try_consume(h[2]).unwrap(), "element 2 was reset");
    // A dead handle in the middle: 107017, the ones before it reset.
    rt.record(h[0], 0).unwrap();
    rt.record(h[2], 0).unwrap();
    rt.synchronize(0, SyncWait::Forever).unwrap();
    rt.destroy_notify(h[1]).unwrap();
    let batch = [h[0], h[1], h[2]];
    let e = rt.batch_reset(3, |i| batch[i]).unwrap_err();
    assert_eq!(e.code(), Error::InvalidHandle);
    assert!(!rt.try_consume(h[0]).unwrap());
    assert!(rt.try_consume(h[2]).unwrap());
    // All live: every one reset.
    rt.record(h[0], 0).unwrap();
    rt.record(h[2], 0).unwrap();
    rt.synchronize(0, SyncWait::Forever).unwrap();
    rt.batch_reset(2, |i| [h[0], h[2]][i]).unwrap();
    assert!(!rt.try_consume(h[0]).unwrap());
    assert!(!rt.try_consume(h[2]).unwrap());
    for n in [h[0], h[2]] {
        rt.destroy_notify(n).unwrap();
    }
    assert_eq!(
        rt.destroy_notify(h[0]).unwrap_err().code(),
        Error::InvalidHandle
    );
}

/// A context handle that comes back (its slot's generation wrapped after 2²⁰ destroys) must
/// not find the default-stream handle a destroyed context left behind (as a
/// `aclrtCtxGetCurrentDefaultStream` racing the destroy could leave it): it gets a handle of
/// its own default stream.
#[test]
fn a_context_handle_that_comes_back_gets_its_own_default_stream() {
    let (rt, _ns) = runtime("ctxwrap");
    rt.set_device(0).unwrap();
    let old = rt.create_context(0).unwrap();
    let stale = rt.current_default_stream().unwrap();
    let old_raw = rt.stream(stale).unwrap().raw;
    rt.destroy_context(old).unwrap();
    // What the race leaves: the dead context's entry, and its C stream entry.
    let left = rt
        .streams
        .insert(StreamEntry {
            raw: old_raw,
            device: 0,
            ctx: old,
            default: true,
        })
        .unwrap();
    lock(&rt.contexts.default_handles).insert(old, left);
    // A new context, moved through the slot until its handle is the old one's.
    let mut ctx = rt.create_context(0).unwrap();
    for _ in 0..(1u32 << 20) + 2 {
        if ctx == old {
            break;
        }
        ctx = rt.contexts.table.renew(ctx);
    }
    assert_eq!(ctx, old, "the handle came back");
    rt.set_current_context(ctx).unwrap();
    let h = rt.current_default_stream().unwrap();
    assert_ne!(h, left, "the dead context's default stream");
    assert_ne!(rt.stream(h).unwrap().raw, old_raw);
    assert_eq!(
        rt.current_default_stream().unwrap(),
        h,
        "the same handle every time"
    );
    rt.destroy_context(ctx).unwrap();
}

#[test]
fn the_reset_timeout_is_seconds_with_fractions_and_zero_waits_for_ever() {
    use super::drain::parse_reset_timeout;
    use std::ffi::OsStr;
    use std::time::Duration;
    assert_eq!(
        parse_reset_timeout(OsStr::new(" 2 ")).unwrap(),
        Some(Duration::from_secs(2))
    );
    assert_eq!(
        parse_reset_timeout(OsStr::new("0.25")).unwrap(),
        Some(Duration::from_millis(250))
    );
    assert_eq!(parse_reset_timeout(OsStr::new("0")).unwrap(), None);
    for bad in ["", "-1", "soon", "NaN", "inf", "1e12"] {
        let e = parse_reset_timeout(OsStr::new(bad)).unwrap_err();
        assert_eq!(e.code(), Error::ParamInvalid, "{bad:?}");
        assert!(
            e.text().contains("ACL_NOTIFY_SIM_RESET_TIMEOUT"),
            "{}",
            e.text()
        );
    }
}

/// The reset's drain (one drain with `aclFinalize`'s, `runtime::drain`, with its own policy):
/// it waits for its device's streams only — a slow host function there, not another device's
/// stream stuck for ever — and, unlike `aclFinalize`, does not give up on a stream of its
/// device that waits for ever after `aclFinalize`'s 100 ms: it waits out its bound and answers
/// 507046 naming it, releasing the device anyway.
#[test]
fn a_reset_drains_its_device_only_and_waits_out_its_bound_for_a_stream_stuck_for_ever() {
    let (rt, _ns) = runtime("reset-policy");
    // First a drain that must end by itself: its bound only a hang guard (it was the 2 s
    // below until 2026-12-07, which a loaded machine running the 300 ms host function could
    // pass).
    let rt = rt.with_reset_timeout(Some(HANG_GUARD));
    rt.set_device(0).unwrap();
    let (stuck0, rec0) = (rt.create_stream().unwrap(), rt.create_stream().unwrap());
    let n0 = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n0, stuck0, 0).unwrap();
    rt.set_device(1).unwrap();
    let s1 = rt.create_stream().unwrap();
    static SLOW: Duration = Duration::from_millis(300);
    // SAFETY: `SLOW` is a static.
    let call = unsafe {
        acl_notify_core::HostCall::new(host_slow, std::ptr::from_ref(&SLOW).cast_mut().cast())
    };
    rt.launch_host_func(s1, call).unwrap();
    let t0 = std::time::Instant::now();
    // Ok, not the 507046 of a drain that waited out its bound for device 0's stuck stream
    // (not its to wait for; how long it took is no proof on a loaded machine).
    rt.reset_device(1, false).unwrap();
    let took = t0.elapsed();
    assert!(
        took >= SLOW,
        "the reset of device 1 took {took:?}, less than its host function's {SLOW:?}"
    );
    // Then one that must wait out its bound: past aclFinalize's 100 ms stuck rule.
    let bound = Duration::from_secs(2);
    let rt = rt.with_reset_timeout(Some(bound));
    rt.set_device(1).unwrap();
    let s1 = rt.create_stream().unwrap();
    let n1 = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n1, s1, 0).unwrap();
    let t0 = std::time::Instant::now();
    let e = rt.reset_device(1, false).unwrap_err();
    let took = t0.elapsed();
    assert_eq!(e.code(), Error::StreamSyncTimeout, "{}", e.text());
    assert!(
        took >= bound,
        "the reset gave up after {took:?}, before its bound {bound:?}"
    );
    assert!(
        e.text().contains("device 1 was reset") && e.text().contains("released anyway"),
        "{}",
        e.text()
    );
    // Device 0 is untouched: its stream still waits, and the record releases it.
    rt.set_device(0).unwrap();
    rt.record(n0, rec0).unwrap();
    rt.synchronize(stuck0, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    rt.reset_device(0, true).unwrap();
}

/// A reset of one device that waits for its streams does not hold up `aclrtSetDevice` of
/// another device: there the thread whose work the reset waits for may be setting up first.
/// Until 2026-12-05 one process-wide gate made that set wait for the reset, which waited for
/// the set's thread until its timeout (507046; for ever with `ACL_NOTIFY_SIM_RESET_TIMEOUT=0`).
#[test]
fn a_reset_draining_one_device_does_not_hold_up_setting_another() {
    let (rt, _ns) = runtime("reset-gate");
    let rt = std::sync::Arc::new(rt.with_reset_timeout(Some(HANG_GUARD)));
    rt.set_device(1).unwrap();
    let ctx1 = rt.current_context().unwrap();
    let (s, rec) = (rt.create_stream().unwrap(), rt.create_stream().unwrap());
    let n = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n, s, 0).unwrap();
    let rt2 = std::sync::Arc::clone(&rt);
    let recorder = std::thread::spawn(move || {
        // Once the reset below is releasing device 1.
        let met = releasing_within_guard(&rt2, 1);
        rt2.set_device(0).unwrap();
        // The record the reset waits for, from device 1's context (alive until released).
        let recorded = rt2
            .set_current_context(ctx1)
            .and_then(|()| rt2.record(n, rec));
        rt2.reset_device(0, false).unwrap();
        (met, recorded)
    });
    let reset = rt.reset_device(1, false);
    let (met, recorded) = recorder.join().unwrap();
    assert!(met, "hang guard: the reset never began releasing device 1");
    // The set did not wait for the reset: the record made after it is what the reset's
    // drain waited for, and so the reset succeeded. A set that waited for the reset would
    // have held that record back until the drain's bound (507046). (Until 2026-12-07 this
    // was also read from a clock, the set under 2 s and the reset under 4.)
    recorded.unwrap();
    reset.expect("the reset, drained by the record made after aclrtSetDevice(0)");
}

/// `aclrtDestroyContext` discards the context's default stream and forgets its limits with it:
/// a thread that used that stream's limits answers its device's afterwards (a stale entry
/// would also be inherited by a later stream given the same backend handle).
#[test]
fn destroying_a_context_forgets_its_default_streams_limits() {
    let (rt, _ns) = runtime("ctxreslimit");
    rt.set_device(0).unwrap();
    let full = rt.res_in_current_thread(0).unwrap();
    assert!(full > 1);
    let ctx = rt.create_context(0).unwrap();
    let raw = rt.context_default_stream(0, ctx).unwrap();
    rt.set_stream_res_limit(0, 0, 1).unwrap();
    rt.use_stream_res(0).unwrap();
    assert_eq!(rt.res_in_current_thread(0).unwrap(), 1);
    rt.destroy_context(ctx).unwrap();
    assert!(
        lock(&rt.res_limits.streams).get(&raw).is_none(),
        "the discarded default stream's limits are forgotten"
    );
    rt.set_device(0).unwrap();
    assert_eq!(rt.res_in_current_thread(0).unwrap(), full);
}

/// What [`host_set`] shares with the test that queues it.
struct HostSet {
    rt: std::sync::Arc<Runtime>,
    got: std::sync::Mutex<Option<Result<(), CallError>>>,
}

/// A host function that sets device 1 once the reset made after its launch is releasing it.
unsafe extern "C" fn host_set(arg: *mut std::ffi::c_void) {
    // SAFETY: the test keeps its `HostSet` alive until the stream has run this.
    let h = unsafe { &*(arg as *const HostSet) };
    // (No panic here, in a C callback: a reset that never began lets the set succeed, and the
    // test fails at its answer.)
    releasing_within_guard(&h.rt, 1);
    *lock(&h.got) = Some(h.rt.set_device(1));
}

/// An `aclrtSetDevice` made by a host function while another thread's reset releases that
/// device (the reset waiting for the host function's own stream) neither deadlocks nor counts
/// a set whose context the release then destroys: it fails at once with 507033 saying why.
/// Until 2026-12-05 a host function skipped the device's gate: its set counted 1 and took the
/// context being released, and the device was left set with its context gone.
#[test]
fn a_host_function_setting_a_device_being_released_fails_instead_of_keeping_a_dead_context() {
    let (rt, _ns) = runtime("hostfn-set");
    let rt = std::sync::Arc::new(rt.with_reset_timeout(Some(HANG_GUARD)));
    rt.set_device(1).unwrap();
    let s = rt.create_stream().unwrap();
    let h = std::sync::Arc::new(HostSet {
        rt: std::sync::Arc::clone(&rt),
        got: std::sync::Mutex::new(None),
    });
    // SAFETY: `h` outlives the stream's run of the call (the reset below drains it).
    let call =
        unsafe { acl_notify_core::HostCall::new(host_set, std::sync::Arc::as_ptr(&h) as *mut _) };
    rt.launch_host_func(s, call).unwrap();
    // Succeeds: a set that waited for the reset, which waits for the host function, would
    // have held it until its drain's bound (507046). (Until 2026-12-07 also read from a
    // clock: under 4 s.)
    rt.reset_device(1, false).unwrap();
    let got = lock(&h.got)
        .take()
        .expect("the host function ran before the reset returned");
    let e = got.expect_err("a set of a device being released, from a host function");
    assert_eq!(e.code(), Error::DevSetupError, "{}", e.text());
    assert!(e.text().contains("being reset"), "{}", e.text());
    // The failed set counted nothing: the device is not set.
    assert_eq!(
        rt.reset_device(1, false).unwrap_err().code(),
        Error::ContextReleaseError
    );
    rt.set_device(1).unwrap();
    rt.create_stream().unwrap();
    rt.reset_device(1, true).unwrap();
}

/// What [`host_set_other`] shares with the test that queues it.
struct HostSetOther {
    rt: std::sync::Arc<Runtime>,
    /// When the host function's set returned, and what it returned.
    got: std::sync::Mutex<Option<(std::time::Instant, Result<(), CallError>)>>,
}

/// A host function that sets device 1 once the reset of device 1 is releasing it.
unsafe extern "C" fn host_set_other(arg: *mut std::ffi::c_void) {
    // SAFETY: the test keeps its `HostSetOther` alive until the stream has run this.
    let h = unsafe { &*(arg as *const HostSetOther) };
    // (No panic here, in a C callback: a reset that never began lets the set return before
    // the record, and the test fails at its answer.)
    releasing_within_guard(&h.rt, 1);
    let set = h.rt.set_device(1);
    *lock(&h.got) = Some((std::time::Instant::now(), set));
}

/// An `aclrtSetDevice(1)` made by a host function of a device-0 stream while another thread's
/// reset releases device 1 waits for the release to end, as a set outside host functions does
/// (CANN's set waits: hicann/runtime `reference.hpp` `RefObject::IncRef`), and then counts:
/// the reset does not wait for that host function, so nothing deadlocks. Until 2026-12-05
/// every host function's set failed at once with 507033, whatever its stream's device.
#[test]
fn a_host_function_of_another_device_waits_for_a_release_to_set_the_device() {
    let (rt, _ns) = runtime("hostfn-set-other");
    let rt = std::sync::Arc::new(rt.with_reset_timeout(Some(HANG_GUARD)));
    rt.set_device(1).unwrap();
    let ctx1 = rt.current_context().unwrap();
    let (s, rec) = (rt.create_stream().unwrap(), rt.create_stream().unwrap());
    let n = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n, s, 0).unwrap();
    rt.set_device(0).unwrap();
    let s0 = rt.create_stream().unwrap();
    let h = std::sync::Arc::new(HostSetOther {
        rt: std::sync::Arc::clone(&rt),
        got: std::sync::Mutex::new(None),
    });
    // SAFETY: `h` outlives the stream's run of the call (synchronized below).
    let call = unsafe {
        acl_notify_core::HostCall::new(host_set_other, std::sync::Arc::as_ptr(&h) as *mut _)
    };
    rt.launch_host_func(s0, call).unwrap();
    let resetter = {
        let rt = std::sync::Arc::clone(&rt);
        std::thread::spawn(move || rt.reset_device(1, false))
    };
    // Well after the host function's set began to wait: the record the reset's drain waits
    // for, from device 1's context (alive until released).
    std::thread::sleep(Duration::from_millis(900));
    let recorded_at = std::time::Instant::now();
    let ctx0 = rt.current_context().unwrap();
    rt.set_current_context(ctx1)
        .and_then(|()| rt.record(n, rec))
        .unwrap();
    resetter.join().unwrap().unwrap();
    rt.set_current_context(ctx0).unwrap();
    rt.synchronize(s0, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    let (at, set) = lock(&h.got)
        .take()
        .expect("the host function ran before its stream was synchronized");
    set.expect("a host function of a device-0 stream waits for device 1's release");
    assert!(
        at >= recorded_at,
        "the set returned before the release it had to wait for ended"
    );
    // The set counted once, on a device whose context was made again.
    rt.set_device(1).unwrap();
    rt.create_stream().unwrap();
    rt.reset_device(1, false).unwrap();
    rt.reset_device(1, false).unwrap();
    assert_eq!(
        rt.reset_device(1, false).unwrap_err().code(),
        Error::ContextReleaseError
    );
    rt.reset_device(0, true).unwrap();
}

/// What the host functions of [`a_host_function_resetting_another_device_drains_it`] share.
struct HostResetOther {
    rt: std::sync::Arc<Runtime>,
    /// Whether device 1's task queued behind its slow host function has run.
    ran: std::sync::atomic::AtomicBool,
    /// What the device-0 host function's reset of device 1 returned, and whether device 1's
    /// queued task had run when it returned.
    got: std::sync::Mutex<Option<(Result<(), CallError>, bool)>>,
}

/// A slow host function: sleeps for the `Duration` its argument points to.
unsafe extern "C" fn host_slow(arg: *mut std::ffi::c_void) {
    // SAFETY: the tests keep the `Duration` alive until the stream has run this.
    std::thread::sleep(unsafe { *(arg as *const Duration) });
}

/// The host function queued behind [`host_slow`]: notes that it ran.
unsafe extern "C" fn host_ran(arg: *mut std::ffi::c_void) {
    // SAFETY: the test keeps its `HostResetOther` alive until the streams have run this.
    let h = unsafe { &*(arg as *const HostResetOther) };
    h.ran.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// A host function on device 0's stream that resets device 1.
unsafe extern "C" fn host_reset_other(arg: *mut std::ffi::c_void) {
    // SAFETY: the test keeps its `HostResetOther` alive until the stream has run this.
    let h = unsafe { &*(arg as *const HostResetOther) };
    let reset = h.rt.reset_device(1, false);
    let ran = h.ran.load(std::sync::atomic::Ordering::SeqCst);
    *lock(&h.got) = Some((reset, ran));
}

/// An `aclrtResetDevice(1)` made by a host function of a device-0 stream drains device 1's
/// queued tasks as any other reset does: only a host function of the reset device's own
/// streams skips the drain (it would wait for itself). Until 2026-12-05 a reset from any host
/// function skipped it, and device 1's queued tasks were discarded unrun.
#[test]
fn a_host_function_resetting_another_device_drains_it() {
    static SLOW: Duration = Duration::from_millis(400);
    let (rt, _ns) = runtime("hostfn-reset-other");
    let rt = std::sync::Arc::new(rt.with_reset_timeout(Some(HANG_GUARD)));
    let h = std::sync::Arc::new(HostResetOther {
        rt: std::sync::Arc::clone(&rt),
        ran: std::sync::atomic::AtomicBool::new(false),
        got: std::sync::Mutex::new(None),
    });
    let arg = std::sync::Arc::as_ptr(&h) as *mut std::ffi::c_void;
    rt.set_device(1).unwrap();
    let s1 = rt.create_stream().unwrap();
    // SAFETY: `h` outlives the streams' runs of the calls (device 1's are drained or
    // discarded by the reset, device 0's stream is synchronized below).
    let (slow, ran, reset) = unsafe {
        (
            acl_notify_core::HostCall::new(host_slow, &SLOW as *const Duration as *mut _),
            acl_notify_core::HostCall::new(host_ran, arg),
            acl_notify_core::HostCall::new(host_reset_other, arg),
        )
    };
    rt.launch_host_func(s1, slow).unwrap();
    rt.launch_host_func(s1, ran).unwrap();
    rt.set_device(0).unwrap();
    let s0 = rt.create_stream().unwrap();
    rt.launch_host_func(s0, reset).unwrap();
    rt.synchronize(s0, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    let (reset, ran) = lock(&h.got)
        .take()
        .expect("the host function ran before its stream was synchronized");
    reset.expect("a reset of device 1 from a host function of device 0");
    assert!(
        ran,
        "the reset returned before device 1's queued host function had run"
    );
    // The reset released device 1.
    assert_eq!(
        rt.reset_device(1, false).unwrap_err().code(),
        Error::ContextReleaseError
    );
    rt.reset_device(0, true).unwrap();
}

/// A reset whose drain waits for ever (`ACL_NOTIFY_SIM_RESET_TIMEOUT=0`, as CANN's teardown)
/// does not hold another thread's `aclrtSetDevice` of that device for ever: the set gives up
/// after its own bound with 507033 naming the reset (CANN's set spins for as long as the
/// release runs, hicann/runtime `src/runtime/core/inc/reference.hpp`, `RefObject::IncRef`).
#[test]
fn a_set_during_a_reset_that_waits_for_ever_ends_at_its_bound() {
    let (rt, _ns) = runtime("set-bound");
    let rt = std::sync::Arc::new(
        rt.with_reset_timeout(None)
            .with_set_bound(Duration::from_millis(500)),
    );
    rt.set_device(1).unwrap();
    let ctx1 = rt.current_context().unwrap();
    let (s, rec) = (rt.create_stream().unwrap(), rt.create_stream().unwrap());
    let n = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n, s, 0).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let rt2 = std::sync::Arc::clone(&rt);
    let setter = std::thread::spawn(move || {
        // Once the reset below is releasing device 1 (else the set succeeds, and the test
        // fails at its answer).
        releasing_within_guard(&rt2, 1);
        let t0 = std::time::Instant::now();
        let set = rt2.set_device(1);
        let _ = tx.send((set, t0.elapsed()));
        // Let the reset finish: the record its drain waits for, from device 1's context.
        rt2.set_current_context(ctx1)
            .and_then(|()| rt2.record(n, rec))
            .unwrap();
    });
    let resetter = {
        let rt = std::sync::Arc::clone(&rt);
        std::thread::spawn(move || rt.reset_device(1, false))
    };
    let answer = rx.recv_timeout(HANG_GUARD);
    if answer.is_err() {
        // The set still waits: end the reset so that the test fails instead of hanging.
        rt.set_current_context(ctx1).unwrap();
        rt.record(n, rec).unwrap();
    }
    let (set, took) = answer.expect("hang guard: aclrtSetDevice did not return");
    let e = set.expect_err("a set while the reset still drains");
    assert_eq!(e.code(), Error::DevSetupError, "{}", e.text());
    assert!(e.text().contains("being reset"), "{}", e.text());
    // Its own bound ended it: not before (a lower bound only; its 507033 names the bound, and
    // a set that waited for the reset would never have returned: the hang guard above). Until
    // 2026-12-07 an upper bound of 3 s stood here.
    assert!(
        took >= Duration::from_millis(500),
        "the set gave up after {took:?}"
    );
    setter.join().unwrap();
    resetter.join().unwrap().unwrap();
    rt.set_device(1).unwrap();
    rt.reset_device(1, false).unwrap();
}

/// A call that sets `aclInit`'s default device implicitly (a thread with no current device
/// creating a stream) while another thread's reset releases that device fails with 507033
/// naming that implicit set, not an `aclrtSetDevice` the caller never made (the message is
/// recorded as "aclrtCreateStream failed: …"). Until 2026-12-05 it read "aclrtSetDevice(1):
/// device 1 is being reset…".
#[test]
fn an_implicit_default_device_set_during_a_reset_names_itself_not_aclrtsetdevice() {
    let (rt, _ns) = runtime("implicit-set");
    let rt = std::sync::Arc::new(
        rt.with_reset_timeout(None)
            .with_set_bound(Duration::from_millis(300)),
    );
    rt.default_device
        .store(1, std::sync::atomic::Ordering::Relaxed);
    rt.set_device(1).unwrap();
    let ctx1 = rt.current_context().unwrap();
    let (s, rec) = (rt.create_stream().unwrap(), rt.create_stream().unwrap());
    let n = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n, s, 0).unwrap();
    let resetter = {
        let rt = std::sync::Arc::clone(&rt);
        std::thread::spawn(move || rt.reset_device(1, false))
    };
    let rt2 = std::sync::Arc::clone(&rt);
    // A thread of its own: no current device, so its call sets device 1 implicitly.
    let got = std::thread::spawn(move || {
        // Once the reset is releasing device 1 (else the implicit set succeeds, and the test
        // fails at its answer).
        releasing_within_guard(&rt2, 1);
        rt2.create_stream()
    })
    .join()
    .unwrap();
    // End the reset's drain: the record it waits for.
    rt.set_current_context(ctx1)
        .and_then(|()| rt.record(n, rec))
        .unwrap();
    resetter.join().unwrap().unwrap();
    let e = got.expect_err("an implicit set while the reset still drains");
    assert_eq!(e.code(), Error::DevSetupError, "{}", e.text());
    assert!(
        e.text().contains("implicit set of the default device 1")
            && !e.text().contains("aclrtSetDevice(1)"),
        "{}",
        e.text()
    );
}

/// What [`host_sync_timed`] shares with the test that queues it.
struct HostSync {
    rt: std::sync::Arc<Runtime>,
    ctx: usize,
    stream: usize,
    /// The synchronize's timeout.
    timeout: Duration,
    got: std::sync::Mutex<Option<Result<(), CallError>>>,
}

/// A host function that synchronizes another stream with its `HostSync`'s timeout.
unsafe extern "C" fn host_sync_timed(arg: *mut std::ffi::c_void) {
    // SAFETY: the test keeps its `HostSync` alive until the stream has run this.
    let h = unsafe { &*(arg as *const HostSync) };
    let r =
        h.rt.set_current_context(h.ctx)
            .and_then(|()| h.rt.synchronize(h.stream, SyncWait::AtMost(h.timeout)));
    *lock(&h.got) = Some(r);
}

/// A host function blocked in a synchronize: on fresh stream `a` of `rt`'s current device it
/// synchronizes a fresh stream (timeout `timeout`) whose head waits on notify `n`, which nothing
/// records until the test records it on stream `r`.
struct BlockedHostSync {
    a: usize,
    r: usize,
    n: usize,
    h: std::sync::Arc<HostSync>,
}

fn block_host_function_in_sync(rt: &std::sync::Arc<Runtime>, timeout: Duration) -> BlockedHostSync {
    let (a, b, r) = (
        rt.create_stream().unwrap(),
        rt.create_stream().unwrap(),
        rt.create_stream().unwrap(),
    );
    let n = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n, b, 0).unwrap();
    let h = std::sync::Arc::new(HostSync {
        rt: std::sync::Arc::clone(rt),
        ctx: rt.current_context().unwrap(),
        stream: b,
        timeout,
        got: std::sync::Mutex::new(None),
    });
    // SAFETY: `h` is returned to the test, which keeps it until the stream has run the call.
    let call = unsafe {
        acl_notify_core::HostCall::new(host_sync_timed, std::sync::Arc::as_ptr(&h) as *mut _)
    };
    rt.launch_host_func(a, call).unwrap();
    BlockedHostSync { a, r, n, h }
}

impl BlockedHostSync {
    /// Waits until the host function is inside its synchronize, as the drain sees it
    /// (`Sim::host_function_waits_on` its stream `a`; bounded only to turn a hang into a
    /// failure).
    fn wait_until_inside(&self, rt: &Runtime) {
        let raw = rt.stream(self.a).unwrap().raw;
        let t0 = std::time::Instant::now();
        while rt.backend.host_function_waits_on(raw).is_empty() {
            assert!(
                t0.elapsed() < Duration::from_secs(60) && lock(&self.h.got).is_none(),
                "the host function did not enter its synchronize"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// `aclFinalize`'s drain takes a host function blocked in a synchronize *with a timeout* as
/// one that makes progress, as it does a stream's head wait with a timeout: the synchronize
/// ends by itself and what follows the host function runs, as on CANN's device. It took it as
/// waiting for ever (counted in `host_functions_waiting`) and returned after `STUCK_FOR`, with
/// the host function still inside its synchronize and the tasks behind it to be discarded.
#[test]
fn finalize_waits_for_a_host_function_in_a_timed_synchronize() {
    let (rt, _ns) = runtime("fin-timed-hostfn");
    let rt = std::sync::Arc::new(rt.with_reset_timeout(Some(HANG_GUARD)));
    rt.set_device(0).unwrap();
    // `b` waits for a record nothing queues before the drain.
    let blocked = block_host_function_in_sync(&rt, Duration::from_millis(600));
    blocked.wait_until_inside(&rt);
    let BlockedHostSync { a, r, n, h } = blocked;
    let drained = rt.drain_for_finalize();
    let got = lock(&h.got).take();
    // Let everything end before checking.
    rt.record(n, r).unwrap();
    rt.synchronize(a, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    drained.unwrap();
    let got =
        got.expect("the drain returned while the host function was still in its timed synchronize");
    assert_eq!(
        got.unwrap_err().code(),
        Error::StreamSyncTimeout,
        "the host function's synchronize"
    );
}

/// A host function that sets the `AtomicBool` its argument points to.
unsafe extern "C" fn host_set_flag(arg: *mut std::ffi::c_void) {
    // SAFETY: the test keeps the flag alive until the stream has run this.
    let flag = unsafe { &*(arg as *const std::sync::atomic::AtomicBool) };
    flag.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// `aclFinalize`'s drain weighs the host functions running on the streams it waits for against
/// those of *them* blocked in a synchronize or host wait: a host function blocked on a stream
/// the drain does not wait for (here another runtime's, in the same process) does not make a
/// merely slow host function of a busy stream look stuck. The drain compared the busy streams'
/// host functions with the blocked ones of the whole process, took the slow one as waiting for
/// ever after `STUCK_FOR`, and returned with the task queued behind it still to run.
#[test]
fn finalize_waits_for_a_slow_host_function_while_another_runtime_s_is_blocked() {
    static SLOW: Duration = Duration::from_millis(2000);
    // Another runtime (its own epoch: the thread's current context is per runtime) with a
    // host function blocked in a synchronize past this drain's bound.
    let (sim2, _ns2) = Ns::open_sim(
        format!("unit-capi-fin-other2-{}", std::process::id()),
        Soc::Ascend910B,
        2,
    )
    .expect("opening a test Sim");
    let rt2 = std::sync::Arc::new(Runtime::new(sim2, 2, 42));
    rt2.set_device(0).unwrap();
    let blocked = block_host_function_in_sync(&rt2, Duration::from_secs(20));
    blocked.wait_until_inside(&rt2);
    let BlockedHostSync {
        a: x,
        r: r2,
        n: n2,
        h: h2,
    } = blocked;
    let ctx2 = rt2.current_context().unwrap();

    let (rt, _ns) = runtime("fin-slow-hostfn");
    // A bound the slow host function cannot reach however loaded the machine (the drain that
    // gives up on it does so after `STUCK_FOR`, long before): it only turns a hang into a
    // failure.
    let rt = std::sync::Arc::new(rt.with_reset_timeout(Some(Duration::from_secs(60))));
    rt.set_device(0).unwrap();
    let b = rt.create_stream().unwrap();
    let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // SAFETY: `SLOW` is static; `ran` outlives the stream's run of the call (synchronized
    // below).
    let (slow, flag) = unsafe {
        (
            acl_notify_core::HostCall::new(host_slow, &SLOW as *const Duration as *mut _),
            acl_notify_core::HostCall::new(host_set_flag, std::sync::Arc::as_ptr(&ran) as *mut _),
        )
    };
    rt.launch_host_func(b, slow).unwrap();
    rt.launch_host_func(b, flag).unwrap();
    let t0 = std::time::Instant::now();
    let drained = rt.drain_for_finalize();
    let took = t0.elapsed();
    let ran_when_drained = ran.load(std::sync::atomic::Ordering::SeqCst);
    // Let everything end before checking.
    rt.synchronize(b, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    rt2.set_current_context(ctx2)
        .and_then(|()| rt2.record(n2, r2))
        .unwrap();
    rt2.synchronize(x, SyncWait::AtMost(Duration::from_secs(10)))
        .unwrap();
    drained.unwrap();
    lock(&h2.got)
        .take()
        .expect("the other runtime's host function ran")
        .expect("its synchronize ended with the record");
    assert!(
        ran_when_drained,
        "the drain returned after {took:?}, before the slow host function's stream had run \
         the task queued behind it"
    );
}

/// A stream's id stays taken while an `aclrtDestroyStream` drains it: a stream created
/// meanwhile gets another id (CANN frees the id when the stream is gone), and the id comes back
/// once the destroy has finished. It was freed when the destroy started, so the new stream got
/// the id of the one still running its tasks.
#[test]
fn a_draining_stream_keeps_its_id_until_its_destroy_ends() {
    let (rt, _ns) = runtime("id-drain");
    rt.set_device(0).unwrap();
    let (draining, rec) = (rt.create_stream().unwrap(), rt.create_stream().unwrap());
    let id = rt.stream_info(draining, false).unwrap().id;
    let n = rt.create_notify(CreateFlags::empty()).unwrap();
    rt.wait_and_reset(n, draining, 0).unwrap();
    std::thread::scope(|s| {
        let destroy = s.spawn(|| {
            rt.set_device(0)?;
            rt.destroy_stream(draining, StreamDestroy::Drain)
        });
        // The destroy has begun once the handle is dead for other callers.
        let t0 = std::time::Instant::now();
        while rt.stream(draining).is_ok() {
            assert!(
                t0.elapsed() < Duration::from_secs(30) && !destroy.is_finished(),
                "the destroy did not start"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let meanwhile = rt.create_stream().map(|h| rt.stream_info(h, false));
        // Let the destroy end before any assertion (a failed one would leave it waiting).
        rt.record(n, rec).unwrap();
        destroy.join().unwrap().unwrap();
        let other = meanwhile.unwrap().unwrap().id;
        assert_ne!(
            other, id,
            "a stream created while stream id {id} drained got its id"
        );
    });
    let after = rt.create_stream().unwrap();
    assert_eq!(
        rt.stream_info(after, false).unwrap().id,
        id,
        "the id did not come back once the destroy ended"
    );
    rt.reset_device(0, true).unwrap();
}

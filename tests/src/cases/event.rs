//! Events and stream modes (CANN's event chapter; `acl_notify_core::event`): record, query,
//! synchronize (with its timeout), stream waits on classic and Ex events, reset, elapsed time,
//! ids, destroy with tasks queued, stale handles, and the stop-on-failure and abort modes of a
//! stream; 207000 on the SoC without events.
//!
//! A stream is held back by a notify wait that a record on another stream releases, so a case
//! can see an event "recorded, not yet run" and then run.

use std::ffi::c_void;
use std::time::Duration;

use acl_notify_core::event::{
    EventFlags, EventSpec, EventWaitStatus, FailureMode, LatestRecord, RawEvent,
};
use acl_notify_core::{
    CreateFlags, Error, Feature, HostCall, RawNotify, RawStream, Soc, StreamDestroy, SyncWait,
    Timeout,
};

use super::case;
use crate::check::CaseResult;
use crate::harness::{BackendKind, Case, Ctx, TestBackend};
use crate::util::{Probe, at_most, secs, sync_err, sync_ok};

/// SoCs with events (all but IPV350).
pub fn events(s: Soc) -> bool {
    s.has(Feature::Event)
}

/// SoCs with IPC events.
pub fn ipc_events(s: Soc) -> bool {
    s.has(Feature::IpcEvent)
}

/// SoCs with events but without IPC events.
pub fn events_no_ipc(s: Soc) -> bool {
    events(s) && !ipc_events(s)
}

/// SoCs without events.
pub fn no_events(s: Soc) -> bool {
    !events(s)
}

pub fn cases<B: TestBackend>() -> Vec<Case<B>> {
    vec![
        case("event::not_supported", no_events, not_supported),
        case("event::record_query_synchronize", events, record_query_sync),
        case("event::stream_wait_orders_two_streams", events, wait_orders),
        case(
            "event::classic_wait_needs_a_record",
            events,
            wait_needs_record,
        ),
        case("event::reset_clears_the_flag", events, reset_clears),
        case(
            "event::ex_wait_captures_the_latest_record",
            events,
            ex_captures,
        ),
        case("event::elapsed_time_and_timestamps", events, elapsed),
        case("event::ids", events, ids),
        case("event::destroy_with_tasks_queued", events, destroy_queued),
        case("event::stale_handles", events, stale),
        case("event::typed_api", events, typed_api),
        case("event::ipc_handle_round_trip", ipc_events, ipc_round_trip),
        case("event::ipc_not_supported", events_no_ipc, ipc_not_supported),
        case("stream::stop_on_failure", events, stop_on_failure),
        case("stream::abort", events, abort),
    ]
}

const LONG: Duration = Duration::from_secs(20);

/// A stream held back by a notify wait (10 s timeout): `release` records the notify from
/// another stream.
struct Gate {
    n: RawNotify,
    other: RawStream,
}

fn gate<B: TestBackend>(ctx: &Ctx<'_, B>, s: RawStream) -> Result<Gate, String> {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    let other = ok!(b.create_stream(0));
    ok!(b.wait_and_reset(n, s, secs(10)));
    Ok(Gate { n, other })
}

impl Gate {
    fn release<B: TestBackend>(&self, ctx: &Ctx<'_, B>) -> CaseResult {
        ok!(ctx.b.record(self.n, self.other));
        Ok(())
    }
}

fn classic<B: TestBackend>(ctx: &Ctx<'_, B>) -> Result<RawEvent, String> {
    Ok(ok!(ctx.b.event_create(0, EventSpec::classic())))
}

fn ex<B: TestBackend>(ctx: &Ctx<'_, B>, flags: EventFlags) -> Result<RawEvent, String> {
    let spec = ok!(EventSpec::ex_with_flag(flags.bits(), ctx.soc));
    Ok(ok!(ctx.b.event_create(0, spec)))
}

/// IPV350: creating an event is 207000.
fn not_supported<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    fails!(
        ctx.b.event_create(0, EventSpec::classic()),
        Error::FeatureNotSupport
    );
    Ok(())
}

/// Never recorded → recorded, not run (a synchronize with a timeout expires: 507047) → run.
fn record_query_sync<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(0));
    let e = classic(ctx)?;
    ensure_eq!(
        ok!(b.event_latest(e)),
        LatestRecord::None,
        "before a record"
    );
    // Synchronizing an event never recorded returns at once.
    ok!(b.event_synchronize(e, at_most(Duration::from_secs(5))));
    let g = gate(ctx, s)?;
    ok!(b.event_record(e, s));
    ensure_eq!(
        ok!(b.event_latest(e)),
        LatestRecord::Pending,
        "recorded behind a wait that has not been released"
    );
    fails!(
        b.event_synchronize(e, at_most(Duration::from_millis(50))),
        Error::EventSyncTimeout
    );
    g.release(ctx)?;
    ok!(b.event_synchronize(e, at_most(LONG)));
    ensure_eq!(ok!(b.event_latest(e)), LatestRecord::Done, "after it ran");
    sync_ok(ctx, s, LONG, "the gated stream")?;
    ok!(b.event_destroy(e));
    Ok(())
}

/// `stream_wait_event`: the waiting stream's later task runs only after the event's record.
fn wait_orders<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let (s1, s2) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    let e = classic(ctx)?;
    let g = gate(ctx, s1)?;
    ok!(b.event_record(e, s1));
    ok!(b.stream_wait_event(s2, e, Timeout::Forever));
    let p = Probe::new();
    ok!(b.launch_host_func(s2, p.call()));
    std::thread::sleep(Duration::from_millis(100));
    ensure_eq!(
        p.count(),
        0,
        "a task behind the wait ran before the event's record"
    );
    ensure_eq!(
        ok!(b.event_wait_status(e)),
        EventWaitStatus::NotReady,
        "wait status while the wait is pending"
    );
    g.release(ctx)?;
    ensure_eq!(
        p.wait_for(1, LONG),
        1,
        "the task behind the wait after the record"
    );
    sync_ok(ctx, s2, LONG, "the waiting stream")?;
    ensure_eq!(
        ok!(b.event_wait_status(e)),
        EventWaitStatus::Complete,
        "wait status after the wait ran"
    );
    // One record releases every later wait (a classic event is not reset by a wait).
    ok!(b.stream_wait_event(s2, e, secs(2)));
    ok!(b.stream_wait_event(s1, e, secs(2)));
    sync_ok(ctx, s2, LONG, "a second wait on a recorded event")?;
    sync_ok(ctx, s1, LONG, "a third wait on a recorded event")?;
    Ok(())
}

/// A classic event never recorded cannot be waited on (107000); an Ex one is a no-op.
fn wait_needs_record<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(0));
    let e = classic(ctx)?;
    fails!(
        b.stream_wait_event(s, e, Timeout::Forever),
        Error::ParamInvalid
    );
    let x = ex(ctx, EventFlags::SYNC)?;
    ok!(b.stream_wait_event(s, x, Timeout::Forever));
    sync_ok(
        ctx,
        s,
        Duration::from_secs(5),
        "a wait on an Ex event never recorded",
    )?;
    // An event without SYNC has no wait task.
    let spec = ok!(EventSpec::with_flag(EventFlags::TIME_LINE.bits(), ctx.soc));
    let t = ok!(b.event_create(0, spec));
    ok!(b.event_record(t, s));
    fails!(
        b.stream_wait_event(s, t, Timeout::Forever),
        Error::FeatureNotSupport
    );
    fails!(b.event_reset(t, s), Error::FeatureNotSupport);
    Ok(())
}

/// A reset clears the flag: a later wait times out (107020 at synchronize). Ex events cannot
/// be reset (207000).
fn reset_clears<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let (s1, s2) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    let e = classic(ctx)?;
    ok!(b.event_record(e, s1));
    sync_ok(ctx, s1, LONG, "record")?;
    ok!(b.event_reset(e, s1));
    sync_ok(ctx, s1, LONG, "reset")?;
    ok!(b.stream_wait_event(s2, e, secs(1)));
    sync_err(ctx, s2, LONG, Error::TaskTimeout, "a wait on a reset event")?;
    // Recorded again: the wait passes.
    ok!(b.event_record(e, s1));
    ok!(b.stream_wait_event(s2, e, secs(5)));
    sync_ok(ctx, s2, LONG, "a wait after a new record")?;
    let x = ex(ctx, EventFlags::SYNC)?;
    fails!(b.event_reset(x, s1), Error::FeatureNotSupport);
    Ok(())
}

/// An Ex wait waits for the record that was latest when it was enqueued, not a later one.
fn ex_captures<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let (s1, s2, s3) = (
        ok!(b.create_stream(0)),
        ok!(b.create_stream(0)),
        ok!(b.create_stream(0)),
    );
    let x = ex(ctx, EventFlags::SYNC | EventFlags::TIME_LINE)?;
    let g = gate(ctx, s1)?;
    ok!(b.event_record(x, s1));
    ok!(b.stream_wait_event(s2, x, Timeout::Forever));
    let p = Probe::new();
    ok!(b.launch_host_func(s2, p.call()));
    // A later record that runs at once does not release the earlier wait.
    ok!(b.event_record(x, s3));
    sync_ok(ctx, s3, LONG, "the later record")?;
    std::thread::sleep(Duration::from_millis(100));
    ensure_eq!(
        p.count(),
        0,
        "the Ex wait was released by a record enqueued after it"
    );
    g.release(ctx)?;
    ensure_eq!(p.wait_for(1, LONG), 1, "after the captured record ran");
    sync_ok(ctx, s2, LONG, "the waiting stream")?;
    Ok(())
}

/// # Safety
///
/// `arg` is unused.
unsafe extern "C" fn sleep_30ms(_arg: *mut c_void) {
    std::thread::sleep(Duration::from_millis(30));
}

/// Two records around a 30 ms task: at least ~30 ms apart. No TIME_LINE → 107006; never
/// recorded → 507000.
fn elapsed<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(0));
    let (a, z) = (classic(ctx)?, classic(ctx)?);
    fails!(b.event_elapsed(a, z), Error::InternalError);
    ok!(b.event_record(a, s));
    // SAFETY: `sleep_30ms` ignores its argument and only sleeps.
    ok!(b.launch_host_func(s, unsafe {
        HostCall::new(sleep_30ms, std::ptr::null_mut())
    }));
    ok!(b.event_record(z, s));
    sync_ok(ctx, s, LONG, "records and the sleeping task")?;
    let ms = ok!(b.event_elapsed(a, z));
    ensure!(
        (25.0..10_000.0).contains(&ms),
        "elapsed time across a 30 ms task: {ms} ms"
    );
    let back = ok!(b.event_elapsed(z, a));
    ensure!(
        back.is_sign_negative() && back != 0.0,
        "end before start must be negative, got {back}"
    );
    let (t0, t1) = (ok!(b.event_timestamp(a)), ok!(b.event_timestamp(z)));
    ensure!(t1 > t0, "timestamps in record order: {t0:?} then {t1:?}");
    let spec = ok!(EventSpec::with_flag(EventFlags::SYNC.bits(), ctx.soc));
    let n = ok!(b.event_create(0, spec));
    ok!(b.event_record(n, s));
    sync_ok(ctx, s, LONG, "record")?;
    fails!(b.event_elapsed(a, n), Error::EventTimestampInvalid);
    Ok(())
}

/// An `aclrtCreateEvent` event gets its id at its first record (507000 before); one with a
/// flag word at create; live events of a device have distinct ids.
fn ids<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(0));
    let e = classic(ctx)?;
    fails!(b.event_id(e), Error::InternalError);
    ok!(b.event_record(e, s));
    let id = ok!(b.event_id(e));
    ensure_eq!(ok!(b.event_id(e)), id, "an id read twice");
    let spec = ok!(EventSpec::with_flag(EventFlags::SYNC.bits(), ctx.soc));
    let f = ok!(b.event_create(0, spec));
    let fid = ok!(b.event_id(f));
    ensure!(fid != id, "two live events share id {id}");
    sync_ok(ctx, s, LONG, "record")?;
    Ok(())
}

/// Destroying an event whose record is still queued is allowed; the stream still runs it.
fn destroy_queued<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let (s1, s2) = (ok!(b.create_stream(0)), ok!(b.create_stream(0)));
    let e = classic(ctx)?;
    let g = gate(ctx, s1)?;
    ok!(b.event_record(e, s1));
    ok!(b.stream_wait_event(s2, e, Timeout::Forever));
    ok!(b.event_destroy(e));
    g.release(ctx)?;
    sync_ok(
        ctx,
        s1,
        LONG,
        "the stream holding the destroyed event's record",
    )?;
    sync_ok(ctx, s2, LONG, "the stream waiting on the destroyed event")?;
    Ok(())
}

/// A destroyed event is 107017 for every call.
fn stale<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(0));
    let e = classic(ctx)?;
    ok!(b.event_destroy(e));
    fails!(b.event_destroy(e), Error::InvalidHandle);
    fails!(b.event_record(e, s), Error::InvalidHandle);
    fails!(b.event_reset(e, s), Error::InvalidHandle);
    fails!(
        b.stream_wait_event(s, e, Timeout::Forever),
        Error::InvalidHandle
    );
    fails!(b.event_latest(e), Error::InvalidHandle);
    fails!(
        b.event_synchronize(e, SyncWait::Forever),
        Error::InvalidHandle
    );
    fails!(b.event_id(e), Error::InvalidHandle);
    fails!(b.event_timestamp(e), Error::InvalidHandle);
    Ok(())
}

/// In `ACL_STOP_ON_FAILURE` mode the tasks after a failed one are discarded and the failure
/// is reported by the next synchronize; in the default mode they run. Through a CANN runtime
/// the failure then fails the stream's context for good.
fn stop_on_failure<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    for (mode, runs) in [(FailureMode::Continue, 1), (FailureMode::StopOnFailure, 0)] {
        let s = ok!(b.create_stream(0));
        ok!(b.set_failure_mode(s, mode));
        ok!(b.wait_and_reset(n, s, secs(1)));
        let p = Probe::new();
        ok!(b.launch_host_func(s, p.call()));
        sync_err(ctx, s, LONG, Error::TaskTimeout, "a timed-out wait")?;
        ensure_eq!(p.count(), runs, "tasks after a failed one in {mode:?} mode");
        let q = Probe::new();
        if ctx.kind == BackendKind::Driver && mode == FailureMode::StopOnFailure {
            // Through a CANN runtime (the driver backend, on CANN's or the simulator's C
            // library) the stream's context is in stop mode and the failure fails it for
            // good: its launches and synchronizes answer the failure, reported or not
            // (hicann/runtime `Context::CheckTaskSend`, `Context::CheckStatus`;
            // tests/c/stop_mode.c). The Rust API's streams have no context.
            fails!(b.launch_host_func(s, q.call()), Error::TaskTimeout);
            sync_err(ctx, s, LONG, Error::TaskTimeout, "a failed context, again")?;
            ensure_eq!(q.count(), 0, "a task launched in a failed context");
            ok!(b.destroy_stream(s, StreamDestroy::Drain));
            continue;
        }
        // Reported: the stream runs new tasks again.
        ok!(b.launch_host_func(s, q.call()));
        sync_ok(ctx, s, LONG, "after the failure was reported")?;
        ensure_eq!(q.count(), 1, "a task after the report in {mode:?} mode");
        ok!(b.destroy_stream(s, StreamDestroy::Drain));
    }
    Ok(())
}

/// `abort` drops the queued tasks, ends the running wait and keeps the stream usable.
fn abort<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let s = ok!(b.create_stream(0));
    let n = ok!(b.create_notify(0, CreateFlags::empty()));
    ok!(b.wait_and_reset(n, s, Timeout::Forever));
    let p = Probe::new();
    ok!(b.launch_host_func(s, p.call()));
    ok!(b.abort(s));
    // The wait (for ever) ended: the synchronize returns.
    sync_ok(ctx, s, LONG, "a stream after abort")?;
    ensure_eq!(p.count(), 0, "a task queued before the abort ran");
    let q = Probe::new();
    ok!(b.launch_host_func(s, q.call()));
    sync_ok(ctx, s, LONG, "a task after the abort")?;
    ensure_eq!(q.count(), 1, "a task queued after the abort");
    Ok(())
}

/// The typed API: `Event<C, Classic | Ex, B>` over the backend, and the typed stream modes.
fn typed_api<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    use acl_notify_core::EventRecordedStatus;
    use acl_notify_core::typed::{AnySoc, Device};
    let dev = ok!(Device::<AnySoc, _>::new(ctx.b, 0));
    let (producer, consumer) = (ok!(dev.create_stream()), ok!(dev.create_stream()));
    let start = ok!(dev.create_event());
    let done = ok!(dev.create_event());
    ensure_eq!(
        ok!(done.status()),
        EventRecordedStatus::NotReady,
        "a classic event never recorded"
    );
    ok!(start.record(&producer));
    // SAFETY: `sleep_30ms` ignores its argument and only sleeps.
    ok!(producer.launch_host_func(unsafe { HostCall::new(sleep_30ms, std::ptr::null_mut()) }));
    ok!(done.record(&producer));
    ok!(done.block(&consumer));
    let p = Probe::new();
    ok!(consumer.launch_host_func(p.call()));
    ok!(done.synchronize_within(LONG));
    ensure_eq!(
        ok!(done.status()),
        EventRecordedStatus::Complete,
        "after synchronize"
    );
    ok!(consumer.synchronize_within(LONG));
    ensure_eq!(p.count(), 1, "the task behind the typed wait");
    let ms = ok!(done.elapsed_since(&start));
    ensure!(
        (25.0..10_000.0).contains(&ms),
        "typed elapsed time across a 30 ms task: {ms} ms"
    );
    ok!(done.reset(&producer));
    ensure!(
        ok!(done.id()) != ok!(start.id()),
        "two live events share an id"
    );
    let x = ok!(dev.create_event_ex(EventFlags::SYNC));
    ensure_eq!(
        ok!(x.status()),
        EventRecordedStatus::Complete,
        "an Ex event never recorded"
    );
    fails!(dev.create_event_ex(EventFlags::IPC), Error::ParamInvalid);
    ok!(consumer.set_failure_mode(FailureMode::StopOnFailure));
    ok!(consumer.abort());
    ok!(consumer.synchronize_within(LONG));
    ok!(x.destroy());
    Ok(())
}

/// An IPC event's handle opens it again (here in the same process; `tests/c/ipc_event.c` does
/// it across two): a record through one handle releases a wait through the other, and once
/// every holder destroyed it the handle opens nothing (107017).
fn ipc_round_trip<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    let b = ctx.b;
    let (s1, s2) = (ok!(b.create_stream(0)), ok!(b.create_stream(1)));
    let spec = ok!(EventSpec::ex_with_flag(EventFlags::IPC.bits(), ctx.soc));
    let e = ok!(b.event_create(0, spec));
    let h = ok!(b.ipc_event_handle(e));
    let o = ok!(b.ipc_open_event(1, &h));
    // Never recorded: not pending (CANN's C API cannot tell "no record" from "ran" for an
    // IPC event, so the driver reports the latter).
    ensure!(
        ok!(b.event_latest(o)) != LatestRecord::Pending,
        "an IPC event never recorded is pending"
    );
    let g = gate(ctx, s1)?;
    ok!(b.event_record(e, s1));
    ensure_eq!(
        ok!(b.event_latest(o)),
        LatestRecord::Pending,
        "seen through the other handle"
    );
    ok!(b.stream_wait_event(s2, o, Timeout::Forever));
    let p = Probe::new();
    ok!(b.launch_host_func(s2, p.call()));
    std::thread::sleep(Duration::from_millis(100));
    ensure_eq!(
        p.count(),
        0,
        "a task behind the IPC wait ran before the record"
    );
    g.release(ctx)?;
    ensure_eq!(
        p.wait_for(1, LONG),
        1,
        "the task behind the IPC wait after the record"
    );
    ok!(b.event_synchronize(o, at_most(LONG)));
    // A task holds the event until its stream retires it, which can come just after the
    // event's synchronize returns: synchronize both streams before counting the handles.
    ok!(b.synchronize(s1, at_most(LONG)));
    ok!(b.synchronize(s2, at_most(LONG)));
    fails!(b.event_id(e), Error::FeatureNotSupport);
    fails!(b.event_reset(e, s1), Error::FeatureNotSupport);
    let plain = classic(ctx)?;
    fails!(b.ipc_event_handle(plain), Error::ParamInvalid);
    let mut bad = h;
    bad.0[0] ^= 0xff;
    fails!(b.ipc_open_event(0, &bad), Error::ParamInvalid);
    ok!(b.event_destroy(e));
    // The opened handle keeps it alive.
    let again = ok!(b.ipc_open_event(0, &h));
    ok!(b.event_destroy(again));
    ok!(b.event_destroy(o));
    fails!(b.ipc_open_event(0, &h), Error::InvalidHandle);
    Ok(())
}

/// SoCs without IPC events: 207000 for the IPC flag and both handle calls.
fn ipc_not_supported<B: TestBackend>(ctx: &Ctx<'_, B>) -> CaseResult {
    fails!(
        EventSpec::ex_with_flag(EventFlags::IPC.bits(), ctx.soc),
        Error::FeatureNotSupport
    );
    let e = classic(ctx)?;
    fails!(ctx.b.ipc_event_handle(e), Error::FeatureNotSupport);
    let h = acl_notify_core::IpcEventHandle([0; 64]);
    fails!(ctx.b.ipc_open_event(0, &h), Error::FeatureNotSupport);
    Ok(())
}

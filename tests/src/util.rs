//! Helpers shared by cases: host-function probes (observe when a stream gets past a task),
//! timeouts, synchronising with a bound, reading flags through timed waits, filling a device's
//! id pool.

use std::ffi::c_void;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use acl_notify_core::{
    BackendError, CreateFlags, Error, HostCall, RawNotify, RawStream, StreamDestroy, SyncWait,
    Timeout,
};

use crate::harness::{Ctx, TestBackend};

/// A counter a stream bumps when it reaches a host-function task: it shows whether (and how
/// often) the stream got past the tasks enqueued before it.
#[derive(Clone, Copy, Debug)]
pub struct Probe(&'static AtomicU32);

/// # Safety
///
/// `arg` must point to a live `AtomicU32`.
unsafe extern "C" fn bump(arg: *mut c_void) {
    // SAFETY: `Probe::call` passes a pointer to a leaked (so 'static) AtomicU32.
    let c = unsafe { &*(arg as *const AtomicU32) };
    c.fetch_add(1, Ordering::SeqCst);
}

impl Probe {
    /// A new probe at 0. (Leaked: a child process runs one case and exits.)
    pub fn new() -> Probe {
        Probe(Box::leak(Box::new(AtomicU32::new(0))))
    }

    /// The host function to enqueue.
    pub fn call(self) -> HostCall {
        // SAFETY: the counter is leaked, so it stays valid for any thread at any later time;
        // `bump` only performs an atomic add on it.
        unsafe { HostCall::new(bump, self.0 as *const AtomicU32 as *mut c_void) }
    }

    /// How many times the stream ran it.
    pub fn count(self) -> u32 {
        self.0.load(Ordering::SeqCst)
    }

    /// Waits for the count to reach `n`, giving up once this process could run for `timeout`
    /// (a bound by progress, [`crate::progress::Watch::this_process`]: a loaded machine or a
    /// pause does not run it out; it was wall time until 2026-12-07); returns the final count.
    pub fn wait_for(self, n: u32, timeout: Duration) -> u32 {
        let mut watch = crate::progress::Watch::this_process(timeout);
        while self.count() < n && watch.step().is_ok() {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.count()
    }
}

impl Default for Probe {
    fn default() -> Self {
        Probe::new()
    }
}

/// A host function that records whether a file existed at the moment the stream ran it:
/// 0 not run yet, 1 present, 2 absent.
#[derive(Debug)]
pub struct FileCheck {
    path: PathBuf,
    seen: AtomicU32,
}

/// # Safety
///
/// `arg` must point to a live `FileCheck`.
unsafe extern "C" fn check_file(arg: *mut c_void) {
    // SAFETY: `FileCheck::new` leaks the value, so the pointer stays valid.
    let fc = unsafe { &*(arg as *const FileCheck) };
    let v = if fc.path.exists() { 1 } else { 2 };
    fc.seen.store(v, Ordering::SeqCst);
}

impl FileCheck {
    /// A check of `path` (leaked, like [`Probe`]).
    pub fn new(path: PathBuf) -> &'static FileCheck {
        Box::leak(Box::new(FileCheck {
            path,
            seen: AtomicU32::new(0),
        }))
    }

    /// The host function to enqueue.
    pub fn call(&'static self) -> HostCall {
        // SAFETY: `self` is 'static and `check_file` only reads the path and stores an atomic.
        unsafe { HostCall::new(check_file, self as *const FileCheck as *mut c_void) }
    }

    /// 0 not run yet, 1 the file was there, 2 it was not.
    pub fn seen(&self) -> u32 {
        self.seen.load(Ordering::SeqCst)
    }
}

/// `Timeout::Seconds(n)`.
pub fn secs(n: u32) -> Timeout {
    match NonZeroU32::new(n) {
        Some(s) => Timeout::Seconds(s),
        None => Timeout::Forever,
    }
}

/// The SuperPOD device id of device `device` of server `server`, laid out as the simulator
/// lays it out (`acl_notify_core::sdid`; both backends of this suite are the simulator, in
/// process or through its C library): for whitelist entries naming processes a case does not
/// start. A process the case starts sends its own (`Backend::super_pod_device_id`).
pub fn sdid(server: u32, device: u32) -> u32 {
    acl_notify_core::sdid::PodDevice::new(server, device).map_or(
        acl_notify_core::sdid::ANYWHERE,
        acl_notify_core::sdid::PodDevice::sdid,
    )
}

/// `SyncWait::AtMost`.
pub fn at_most(d: Duration) -> SyncWait {
    SyncWait::AtMost(d)
}

/// `synchronize(s)` bounded by `bound` of the time this process could run (so a broken backend
/// fails the case instead of hanging it, and a loaded machine or a paused process does not):
/// in slices of [`crate::progress::LOOK`] while a [`crate::progress::Watch`] of this process
/// allows, a slice that runs out (507046) clearing nothing; the last answer. A bound of one
/// slice or less is one `synchronize` with that bound. (Until 2026-12-07 every bound was one
/// `synchronize` of that much wall time: a stream starved for 10 s failed its case.)
pub fn synchronize_within<B: TestBackend>(
    ctx: &Ctx<'_, B>,
    s: RawStream,
    bound: Duration,
) -> Result<(), B::Error> {
    let slice = crate::progress::LOOK;
    if bound <= slice {
        return ctx.b.synchronize(s, at_most(bound));
    }
    let mut watch = crate::progress::Watch::this_process(bound);
    loop {
        match ctx.b.synchronize(s, at_most(slice)) {
            Err(e) if e.kind() == Error::StreamSyncTimeout => {
                if watch.step().is_err() {
                    return Err(e);
                }
            }
            r => return r,
        }
    }
}

/// Synchronizes with a bound ([`synchronize_within`]) and returns the result's code (`None` =
/// success) and how long it took.
pub fn sync_code<B: TestBackend>(
    ctx: &Ctx<'_, B>,
    s: RawStream,
    bound: Duration,
) -> (Option<Error>, Duration) {
    let t = Instant::now();
    let r = synchronize_within(ctx, s, bound);
    (r.err().map(|e| e.kind()), t.elapsed())
}

/// The stream must synchronize successfully within `bound` ([`synchronize_within`]).
pub fn sync_ok<B: TestBackend>(
    ctx: &Ctx<'_, B>,
    s: RawStream,
    bound: Duration,
    what: &str,
) -> Result<Duration, String> {
    let t = Instant::now();
    match synchronize_within(ctx, s, bound) {
        Ok(()) => Ok(t.elapsed()),
        Err(e) => Err(format!(
            "{what}: synchronize(stream, at most {bound:?})\n    expected: success\n    got:      \
             {} — {e} (after {:.2?})",
            e.kind(),
            t.elapsed()
        )),
    }
}

/// The stream's synchronize (bounded: [`synchronize_within`]) must fail with `want`; returns
/// how long it took.
pub fn sync_err<B: TestBackend>(
    ctx: &Ctx<'_, B>,
    s: RawStream,
    bound: Duration,
    want: Error,
    what: &str,
) -> Result<Duration, String> {
    let t = Instant::now();
    let r = synchronize_within(ctx, s, bound);
    let el = t.elapsed();
    match r {
        Err(e) if e.kind() == want => Ok(el),
        Err(e) => Err(format!(
            "{what}: synchronize(stream, at most {bound:?})\n    expected: {want}\n    got:      \
             {} — {e} (after {el:.2?})",
            e.kind()
        )),
        Ok(()) => Err(format!(
            "{what}: synchronize(stream, at most {bound:?})\n    expected: {want}\n    got:      \
             success (after {el:.2?})"
        )),
    }
}

/// Reads (and consumes) the flags of several notifies at once, through the public stream
/// semantics only: one fresh stream per notify on its owner's device, a 1-second
/// wait-and-reset on each, then synchronize. Success = the flag was set; 107020 = it was not.
/// All waits run in parallel, so this costs about one second when any flag is clear.
pub fn flags_set<B: TestBackend>(
    ctx: &Ctx<'_, B>,
    notifies: &[RawNotify],
) -> Result<Vec<bool>, String> {
    let mut streams = Vec::new();
    for &n in notifies {
        let info = ok!(ctx.b.notify_info(n));
        let s = ok!(ctx.b.create_stream(info.owner_device));
        ok!(ctx.b.wait_and_reset(n, s, secs(1)));
        streams.push(s);
    }
    let mut out = Vec::new();
    for (i, &s) in streams.iter().enumerate() {
        // Generous: a loaded machine may not run the stream for seconds.
        let (code, el) = sync_code(ctx, s, Duration::from_secs(30));
        match code {
            None => out.push(true),
            Some(Error::TaskTimeout) => out.push(false),
            Some(other) => {
                return Err(format!(
                    "reading the flag of notify #{i} with a 1 s wait: synchronize gave {other} \
                     after {el:.2?} (expected success or ACL_ERROR_RT_TASK_TIMEOUT)"
                ));
            }
        }
        ok!(ctx.b.destroy_stream(s, StreamDestroy::Drain));
    }
    Ok(out)
}

/// Creates notifies on `device` until the backend answers 207009, and returns them. Any other
/// error fails; so does getting more than `limit` (a pool larger than the SoC's maximum).
pub fn fill<B: TestBackend>(
    ctx: &Ctx<'_, B>,
    device: u32,
    limit: u32,
) -> Result<Vec<RawNotify>, String> {
    let mut v = Vec::with_capacity(limit as usize);
    loop {
        match ctx.b.create_notify(device, CreateFlags::empty()) {
            Ok(n) => {
                v.push(n);
                if v.len() as u64 > u64::from(limit) {
                    return Err(format!(
                        "device {device} gave more than {limit} notifies (the SoC's maximum \
                         for this state); 207009 never came"
                    ));
                }
            }
            Err(e) if e.kind() == Error::NoNotifyResource => return Ok(v),
            Err(e) => {
                return Err(format!(
                    "create_notify #{} on device {device} failed with {} — {e} (expected \
                     success until ACL_ERROR_RT_NO_NOTIFY_RESOURCE)",
                    v.len() + 1,
                    e.kind()
                ));
            }
        }
    }
}

/// Destroys every handle (ignoring nothing: each must succeed).
pub fn destroy_all<B: TestBackend>(ctx: &Ctx<'_, B>, v: &[RawNotify]) -> Result<(), String> {
    for &n in v {
        ok!(ctx.b.destroy_notify(n));
    }
    Ok(())
}

/// A garbage-but-plausible set of handles no backend should accept.
pub const GARBAGE_NOTIFIES: [RawNotify; 3] = [
    RawNotify(0),
    RawNotify(u64::MAX),
    RawNotify(0x5a5a_5a5a_5a5a_5a5a),
];

/// Garbage stream handles.
pub const GARBAGE_STREAMS: [RawStream; 3] = [
    RawStream(0),
    RawStream(u64::MAX),
    RawStream(0x5a5a_5a5a_5a5a_5a5a),
];

/// Sleeps (named for what the pause is for at the call site).
pub fn pause(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// Shorthand for a backend error's code.
pub fn kind_of<E: BackendError>(e: &E) -> Error {
    e.kind()
}

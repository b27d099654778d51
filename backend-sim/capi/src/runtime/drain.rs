//! The wait for streams to run their queued tasks before the session releases them: one
//! drain, with a policy per caller ([`Drain`]) — `aclFinalize` (every stream of the session)
//! and a device reset (the device's streams) — and its bound, `ACL_NOTIFY_SIM_RESET_TIMEOUT`
//! ([`reset_timeout_from_env`]).
//!
//! Both wait for the tasks queued on each stream when the drain began (what other threads
//! queue meanwhile is not waited for), at most the reset's bound (`ACL_NOTIFY_SIM_RESET_TIMEOUT`,
//! [`Runtime::reset_timeout`]; for `aclFinalize` at least [`MIN_BOUND`]), and then answer
//! 507046 naming the streams still busy and their head tasks (the caller releases them
//! anyway). A task's failure is not the drain's: the stream is released with it, as CANN's
//! teardown does. They differ in what they do with streams that can make no progress:
//!
//! - **A reset** waits for them until its bound. CANN's reset waits for the tasks of the
//!   default context and its streams before releasing them (hicann/runtime
//!   `docs/api_docs/aclrtResetDevice.md`, `aclrtResetDeviceForce.md`), with no bound (its
//!   stream teardown loops while tasks are pending and the device runs,
//!   `src/runtime/core/src/stream/stream.cc`, `Stream::TearDown`).
//! - **`aclFinalize`** tells streams stuck for ever from busy ones and gives up on the former.
//!   CANN's `aclFinalize` leaves the devices and their streams alone: it resets no device and
//!   only disables the default device (hicann/runtime `src/acl/aclrt_impl/acl.cpp`,
//!   `aclFinalizeInternal`), so what was queued before it goes on running on the device, or
//!   waits there for ever. Ours ends the session, which releases every stream, so it first
//!   lets the queued tasks run, and returns once the streams still busy can make no progress
//!   on their own — each one's head sleeps in a wait with no timeout (of a notify, count
//!   notify, event or IPC event; a wait with a timeout ends by itself, and what follows it
//!   runs) and every host function running is itself blocked in a synchronize or host wait
//!   (one whose timeout comes within the bound ends by itself too, and the host function
//!   returns), with no task finished for [`STUCK_FOR`] ([`STUCK_LOOKS`] looks). Those tasks
//!   are discarded and a note for `aclGetRecentErrMsg` names them, and it returns 0 — or
//!   507046 if one of those waits had a timeout past the bound (the device would have run
//!   what follows it).
//!
//! Both give up at once on streams that nothing can ever let go on: each held by a blocking
//! callback (`aclrtLaunchCallback`) queued for the calling thread, which cannot run it
//! (`aclrtProcessReport`) while it drains — a note and 0 for `aclFinalize`, 507046 for a reset
//! (`runtime::callbacks`, `Subscriptions::held_for_this_thread`).

use std::time::{Duration, Instant};

use acl_notify_core::{Backend, Error, RawStream, StreamOps, StreamStatus};
use acl_notify_sim::Head;

use super::Runtime;
use crate::errmsg::{self, CallError};

/// Whose drain: which streams, how long, and what becomes of streams stuck for ever (see the
/// module's documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Drain {
    /// `aclFinalize`: every stream of the session; streams waiting for ever are given up.
    Finalize,
    /// A reset of this device: its streams, waited for until the bound whatever they wait for.
    Reset(u32),
}

/// How long the busy streams must all have been waiting, with no task finished, before
/// `aclFinalize` takes them as waiting for ever.
const STUCK_FOR: Duration = Duration::from_millis(100);

/// ... and in at least this many looks in a row ([`POLL`] apart), so that a pause of the
/// whole process (a loaded machine) that outlasts [`STUCK_FOR`] between two looks does not
/// count: a wait whose record came is given the time to wake.
const STUCK_LOOKS: u32 = 10;

/// The least `aclFinalize` waits before its 507046, whatever `ACL_NOTIFY_SIM_RESET_TIMEOUT`
/// says: time to tell streams that wait for ever ([`STUCK_FOR`]) first.
const MIN_BOUND: Duration = Duration::from_millis(250);

/// How often the streams are looked at: first after [`FIRST_POLL`], then twice as long each
/// time up to this (most drains find the streams done within a few microseconds).
const POLL: Duration = Duration::from_millis(5);
const FIRST_POLL: Duration = Duration::from_micros(20);

impl Runtime {
    /// `aclFinalize`'s drain ([`Drain::Finalize`]). Not from a host function, whose own stream
    /// would never be idle: returns at once.
    pub(crate) fn drain_for_finalize(&self) -> Result<(), CallError> {
        if acl_notify_sim::in_host_function() {
            return Ok(());
        }
        self.drain(Drain::Finalize)
    }

    /// Waits until the streams `policy` names have run what they can of the tasks queued on
    /// them now (see the module's documentation).
    pub(crate) fn drain(&self, policy: Drain) -> Result<(), CallError> {
        let bound = match policy {
            Drain::Finalize => self.reset_timeout.map(|t| t.max(MIN_BOUND)),
            Drain::Reset(_) => self.reset_timeout,
        };
        let deadline = bound.and_then(|t| Instant::now().checked_add(t));
        let streams = match policy {
            Drain::Finalize => self.streams_where(|_| true),
            Drain::Reset(d) => self.streams_where(|device| device == d),
        };
        // The tasks queued so far on each stream: those are waited for, not what other
        // threads go on queueing meanwhile.
        let queued: Vec<(RawStream, u64)> = streams
            .into_iter()
            .filter_map(|r| Some((r, self.backend.stream_head(r)?.enqueued)))
            .collect();
        let mut stuck = StuckSince::default();
        let mut poll = FIRST_POLL;
        loop {
            let busy: Vec<RawStream> = queued
                .iter()
                .filter(|&&(r, before)| {
                    matches!(self.backend.query(r), Ok(StreamStatus::NotReady))
                        && self
                            .backend
                            .stream_head(r)
                            .is_some_and(|h| h.completed.saturating_add(h.discarded) < before)
                })
                .map(|&(r, _)| r)
                .collect();
            if busy.is_empty() {
                return Ok(());
            }
            if self.callbacks.held_for_this_thread(&busy) {
                return self.held_for_caller(policy, &busy);
            }
            let now = Instant::now();
            if policy == Drain::Finalize {
                let left = deadline.map(|d| d.saturating_duration_since(now));
                if let Some(late) = stuck.look(self.progress(&busy, left), now) {
                    return self.gave_up(&busy, late, bound);
                }
            }
            if deadline.is_some_and(|d| now >= d) {
                return Err(self.timed_out(policy, &busy, bound));
            }
            std::thread::sleep(poll);
            poll = (poll * 2).min(POLL);
        }
    }

    /// What the busy streams are doing, for [`Drain::Finalize`]'s judgement of what waits for
    /// ever; `left`: the drain's time left (`None`: no bound).
    fn progress(&self, busy: &[RawStream], left: Option<Duration>) -> Progress {
        let mut p = Progress::default();
        let (mut host_fns, mut waiting) = (0usize, 0usize);
        let within = |t: Duration| left.is_none_or(|b| t < b);
        for (r, h) in busy
            .iter()
            .filter_map(|&r| Some((r, self.backend.stream_head(r)?)))
        {
            p.completed = p.completed.wrapping_add(h.completed);
            match h.head {
                Head::Waiting { left: None } => {}
                // A wait that times out within the bound ends by itself, and what follows it
                // runs (continue on failure), as on CANN's device.
                Head::Waiting { left: Some(t) } => {
                    if within(t) {
                        p.running = true;
                    } else {
                        p.late = true;
                    }
                }
                // The host functions blocked in a synchronize or a host wait: one whose wait
                // times out within the bound returns by itself, and what follows it runs. Only
                // the busy streams' own count: a host function blocked on a stream this drain
                // does not wait for (another runtime's, say) tells nothing about a busy
                // stream's, which may merely be slow.
                Head::HostFunction => {
                    host_fns += 1;
                    for t in self.backend.host_function_waits_on(r) {
                        match t {
                            Some(t) if within(t) => p.running = true,
                            _ => waiting += 1,
                        }
                    }
                }
                Head::Running => p.running = true,
            }
        }
        p.stuck = !p.running && host_fns <= waiting;
        p
    }

    /// [`Drain::Finalize`] gives up on `busy`, which wait for ever: a note and 0, or 507046
    /// if some wait had a timeout past the drain's bound (`late`).
    fn gave_up(
        &self,
        busy: &[RawStream],
        late: bool,
        bound: Option<Duration>,
    ) -> Result<(), CallError> {
        if late {
            // CANN's device would have run what follows those waits once they timed out: not
            // a silent loss.
            return Err(CallError::new(
                Error::StreamSyncTimeout,
                format!(
                    "aclFinalize: streams wait for records nothing in this process was going to \
                     make, some with a timeout past the drain's bound {:?} ({ENV_RESET_TIMEOUT}); \
                     they were released anyway and their tasks discarded: {}",
                    bound.unwrap_or_default(),
                    self.reports(busy)
                ),
            ));
        }
        errmsg::push(format!(
            "aclFinalize: discarded the tasks still queued on {} stream(s) that wait for a \
             record nothing in this process was going to make, or for a thread that does not \
             take their callbacks (CANN's device would wait for ever): {}",
            busy.len(),
            self.reports(busy)
        ));
        Ok(())
    }

    /// Gives up at once on `busy`, each held by a blocking callback (`aclrtLaunchCallback`)
    /// queued for the calling thread, which cannot run it while it drains: `aclFinalize` as it
    /// gives up streams waiting for ever (a note and 0), a reset with its 507046, the streams
    /// released anyway.
    fn held_for_caller(&self, policy: Drain, busy: &[RawStream]) -> Result<(), CallError> {
        let why = "each is held by a blocking callback (aclrtLaunchCallback, ACL_CALLBACK_BLOCK) \
                   queued for this very thread, which cannot run it (aclrtProcessReport) while \
                   it is in this call; the callbacks never run";
        match policy {
            Drain::Finalize => {
                errmsg::push(format!(
                    "aclFinalize: discarded the tasks still queued on {} stream(s): {why}: {}",
                    busy.len(),
                    self.reports(busy)
                ));
                Ok(())
            }
            Drain::Reset(d) => Err(CallError::new(
                Error::StreamSyncTimeout,
                format!(
                    "device {d} was reset, but {} stream(s) of it could not finish their \
                     queued tasks: {why}; they were released at once and their tasks \
                     discarded: {}",
                    busy.len(),
                    self.reports(busy)
                ),
            )),
        }
    }

    /// The drain's 507046 at its bound.
    fn timed_out(&self, policy: Drain, busy: &[RawStream], bound: Option<Duration>) -> CallError {
        let bound = bound.unwrap_or_default();
        let what = match policy {
            Drain::Finalize => "aclFinalize: the streams still had queued tasks".to_owned(),
            Drain::Reset(d) => format!(
                "device {d} was reset, but {} stream(s) of it still had queued tasks",
                busy.len()
            ),
        };
        CallError::new(
            Error::StreamSyncTimeout,
            format!(
                "{what} after {bound:?} ({ENV_RESET_TIMEOUT}); they were released anyway and \
                 their tasks discarded: {}",
                self.reports(busy)
            ),
        )
    }

    /// The session's streams on the devices `which` picks (those a release of them
    /// discards): the C streams, the contexts' default streams and the devices' NULL streams.
    fn streams_where(&self, which: impl Fn(u32) -> bool) -> Vec<RawStream> {
        let mut raws: Vec<RawStream> = self
            .streams
            .values_where(|s| which(s.device))
            .into_iter()
            .map(|s| s.raw)
            .collect();
        for device in (0..self.backend.device_count()).filter(|&d| which(d)) {
            raws.extend(self.contexts.default_streams_on(device));
            raws.extend(self.backend.made_default_stream(device));
        }
        raws.sort_unstable_by_key(|r| r.0);
        raws.dedup();
        raws
    }

    /// What each of `streams` is doing, as the simulator reports it.
    fn reports(&self, streams: &[RawStream]) -> String {
        streams
            .iter()
            .map(|&r| {
                let why = self.stream_report(r).unwrap_or_else(|| "busy".to_owned());
                format!("stream {:#x}: {why}", r.0)
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// One look at the busy streams ([`Runtime::progress`]).
#[derive(Default)]
struct Progress {
    /// Tasks they have finished, summed.
    completed: u64,
    /// One of them runs, or waits for something that ends within the bound.
    running: bool,
    /// One of them waits with a timeout past the bound.
    late: bool,
    /// None can make progress on its own.
    stuck: bool,
}

/// Since when, at which count of finished tasks and over how many looks every busy stream has
/// been stuck.
#[derive(Default)]
struct StuckSince(Option<(Instant, u64, u32)>);

impl StuckSince {
    /// Takes look `p` at `now`: `Some(late)` once the streams count as waiting for ever.
    fn look(&mut self, p: Progress, now: Instant) -> Option<bool> {
        self.0 = match self.0 {
            Some((since, c, looks)) if p.stuck && c == p.completed => Some((since, c, looks + 1)),
            _ => p.stuck.then_some((now, p.completed, 1)),
        };
        self.0
            .is_some_and(|(since, _, looks)| {
                looks >= STUCK_LOOKS && now.duration_since(since) >= STUCK_FOR
            })
            .then_some(p.late)
    }
}

/// `ACL_NOTIFY_SIM_RESET_TIMEOUT`: how long a device reset waits for the device's streams to
/// run their queued tasks (seconds, fractions allowed; `0` waits for ever, as CANN does).
pub(crate) const ENV_RESET_TIMEOUT: &str = "ACL_NOTIFY_SIM_RESET_TIMEOUT";

/// The reset's wait when [`ENV_RESET_TIMEOUT`] is not set: the same 60 s as a full stream's
/// enqueue (`ACL_NOTIFY_SIM_ENQUEUE_TIMEOUT`).
pub(crate) const DEFAULT_RESET_TIMEOUT: Duration = Duration::from_secs(60);

/// [`ENV_RESET_TIMEOUT`] as the session reads it when it starts: `None` waits for ever; a
/// value that is not a number of seconds is 107000.
pub(crate) fn reset_timeout_from_env() -> Result<Option<Duration>, CallError> {
    match std::env::var_os(ENV_RESET_TIMEOUT) {
        None => Ok(Some(DEFAULT_RESET_TIMEOUT)),
        Some(v) => parse_reset_timeout(&v),
    }
}

/// A value of [`ENV_RESET_TIMEOUT`].
pub(crate) fn parse_reset_timeout(v: &std::ffi::OsStr) -> Result<Option<Duration>, CallError> {
    let secs = v
        .to_str()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| (0.0..=f64::from(u32::MAX)).contains(s))
        .ok_or_else(|| {
            CallError::new(
                Error::ParamInvalid,
                format!(
                    "{ENV_RESET_TIMEOUT}={v:?} is not a number of seconds (0 to {}, fractions \
                     allowed; 0 waits for ever)",
                    u32::MAX
                ),
            )
        })?;
    Ok((secs != 0.0).then(|| Duration::from_secs_f64(secs)))
}

//! `aclFinalize`'s wait for the tasks the process's streams still have queued.
//!
//! CANN's `aclFinalize` leaves the devices and their streams alone: it resets no device and
//! only disables the default device (hicann/runtime `src/acl/aclrt_impl/acl.cpp`,
//! `aclFinalizeInternal`), so what was queued before it goes on running on the device. Ours
//! ends the session, which releases every stream, so it first lets the queued tasks run: it
//! returns once every stream has run the tasks queued before it (what other threads queue
//! meanwhile is not waited for), or once the streams still busy can make no progress on their
//! own — each one's head sleeps in a wait with no timeout (of a notify, count notify, event or
//! IPC event; a wait with a timeout ends by itself, and what follows it runs) and every host
//! function running is itself blocked in a synchronize or host wait (one whose timeout comes
//! within the bound ends by itself too, and the host function returns), with no task finished for
//! [`STUCK_FOR`] ([`STUCK_LOOKS`] looks) — since CANN's device would wait for ever there (those tasks are discarded,
//! and a note for `aclGetRecentErrMsg` names them), or at the reset's bound
//! (`ACL_NOTIFY_SIM_RESET_TIMEOUT`, at least [`MIN_BOUND`]) with 507046.

use std::time::{Duration, Instant};

use acl_notify_core::{Backend, Error, RawStream, StreamOps, StreamStatus};
use acl_notify_sim::Head;

use super::Runtime;
use super::device::ENV_RESET_TIMEOUT;
use crate::errmsg::{self, CallError};

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
/// time up to this (most finalizes find the streams done within a few microseconds).
const POLL: Duration = Duration::from_millis(5);
const FIRST_POLL: Duration = Duration::from_micros(20);

impl Runtime {
    /// Waits until the process's streams have run what they can of their queued tasks (see
    /// the module's documentation). Not from a host function, whose own stream would never
    /// be idle.
    pub(crate) fn drain_for_finalize(&self) -> Result<(), CallError> {
        if acl_notify_sim::in_host_function() {
            return Ok(());
        }
        let deadline = self
            .reset_timeout
            .and_then(|t| Instant::now().checked_add(t.max(MIN_BOUND)));
        // The tasks queued so far on each stream: those are waited for, not what other
        // threads go on queueing meanwhile.
        let queued: Vec<(RawStream, u64)> = self
            .all_streams()
            .into_iter()
            .filter_map(|r| Some((r, self.backend.stream_head(r)?.enqueued)))
            .collect();
        // Since when, and at which count of finished tasks, every busy stream waits.
        let mut stuck_since: Option<(Instant, u64, u32)> = None;
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
            let now = Instant::now();
            let bound_left = deadline.map(|d| d.saturating_duration_since(now));
            let (mut completed, mut host_fns, mut running, mut late) = (0u64, 0usize, false, false);
            // The host functions of the busy streams blocked in a synchronize or a host wait:
            // one whose wait times out within the bound returns by itself, and what follows it
            // runs, as a head wait with a timeout does. Only the busy streams' own count: a
            // host function blocked on a stream this drain does not wait for (another
            // runtime's, say) tells nothing about a busy stream's, which may merely be slow.
            let mut waiting = 0usize;
            for (r, h) in busy
                .iter()
                .filter_map(|&r| Some((r, self.backend.stream_head(r)?)))
            {
                completed = completed.wrapping_add(h.completed);
                match h.head {
                    Head::Waiting { left: None } => {}
                    // A wait that times out within the bound ends by itself, and what follows
                    // it runs (continue on failure), as on CANN's device.
                    Head::Waiting { left: Some(left) } => {
                        if bound_left.is_none_or(|b| left < b) {
                            running = true;
                        } else {
                            late = true;
                        }
                    }
                    Head::HostFunction => {
                        host_fns += 1;
                        for left in self.backend.host_function_waits_on(r) {
                            match left {
                                Some(left) if bound_left.is_none_or(|b| left < b) => {
                                    running = true;
                                }
                                _ => waiting += 1,
                            }
                        }
                    }
                    Head::Running => running = true,
                }
            }
            let stuck = !running && host_fns <= waiting;
            stuck_since = match stuck_since {
                Some((since, c, looks)) if stuck && c == completed => Some((since, c, looks + 1)),
                _ => stuck.then_some((now, completed, 1)),
            };
            if stuck_since.is_some_and(|(since, _, looks)| {
                looks >= STUCK_LOOKS && now.duration_since(since) >= STUCK_FOR
            }) {
                if late {
                    // CANN's device would have run what follows those waits once they timed
                    // out: not a silent loss.
                    return Err(CallError::new(
                        Error::StreamSyncTimeout,
                        format!(
                            "aclFinalize: streams wait for records nothing in this process was \
                             going to make, some with a timeout past the drain's bound {:?} \
                             ({ENV_RESET_TIMEOUT}); they were released anyway and their tasks \
                             discarded: {}",
                            self.reset_timeout.unwrap_or_default().max(MIN_BOUND),
                            self.reports(&busy)
                        ),
                    ));
                }
                errmsg::push(format!(
                    "aclFinalize: discarded the tasks still queued on {} stream(s) that wait for \
                     a record nothing in this process was going to make (CANN's device would \
                     wait for ever): {}",
                    busy.len(),
                    self.reports(&busy)
                ));
                return Ok(());
            }
            if deadline.is_some_and(|d| now >= d) {
                return Err(CallError::new(
                    Error::StreamSyncTimeout,
                    format!(
                        "aclFinalize: the streams still had queued tasks after {:?} \
                         ({ENV_RESET_TIMEOUT}); they were released anyway and their tasks \
                         discarded: {}",
                        self.reset_timeout.unwrap_or_default().max(MIN_BOUND),
                        self.reports(&busy)
                    ),
                ));
            }
            std::thread::sleep(poll);
            poll = (poll * 2).min(POLL);
        }
    }

    /// Every stream of the session: the C streams, the contexts' default streams and the
    /// devices' NULL streams.
    fn all_streams(&self) -> Vec<RawStream> {
        let mut raws: Vec<RawStream> = self
            .streams
            .values_where(|_| true)
            .into_iter()
            .map(|s| s.raw)
            .collect();
        for device in 0..self.backend.device_count() {
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
                let why = self
                    .backend
                    .stream_report(r)
                    .unwrap_or_else(|| "busy".to_owned());
                format!("stream {:#x}: {why}", r.0)
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

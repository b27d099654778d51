//! Events on the simulated device: a process-local table of events, each a small state machine
//! under one mutex, with the classic and Ex semantics described in [`acl_notify_core::event`].
//! The `Sim` calls ([`EventOps`] and [`StreamControl`]) are in `event::sim`.
//!
//! # State of one event
//!
//! - `flag` — the classic event's device flag: set by a record task, cleared by a reset task;
//!   a classic wait stalls until it is set. An `aclrtCreateEvent` event's records each take an
//!   id of their own ([`EventSpec::id_at_create`] is false): its waits and resets act on the
//!   flag of the record latest when they were enqueued ([`Mark::flag`]), not on `flag`.
//! - `latest` — the latest record enqueued (a [`Mark`], shared with its task). Queries,
//!   synchronize and the timestamp look at it; an Ex wait captures it when it is enqueued and
//!   stalls until that record has run.
//! - `waits` / `waits_done` — wait tasks enqueued and finished (`aclrtQueryEventWaitStatus`).
//!
//! A record task dropped unrun (its stream destroyed with its tasks discarded, aborted, its
//! device reset or the session finalized) marks its record discarded and wakes the event's
//! waiters: a synchronize, or an Ex wait, that waited for that record fails with 107023
//! instead of waiting for ever (an IPC event's record counts as done for every holder, and
//! this process notes its number).
//!
//! A record or wait task holds the event (an `Arc`), so destroying a handle while its tasks
//! are queued is allowed (as CANN documents for `aclrtDestroyEvent`): the id is freed when the
//! last task is done. A waiting task registers a cancel waker that takes the event's lock and
//! wakes the condition variable, so a discarding destroy or an abort of its stream ends it.
//!
//! Timestamps are `CLOCK_MONOTONIC` nanoseconds, the same clock in every process.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use acl_notify_core::event::{
    EventKind, EventOps, EventSpec, EventWaitStatus, FailureMode, IpcEventHandle, LatestRecord,
    RawEvent, StreamControl,
};
use acl_notify_core::{Backend, BackendError as _, Error, Feature, RawStream, SyncWait, Timeout};

use crate::error::{SimError, err};
use crate::ipc_event::{EvtState, IpcRef, NeverRan};
use crate::locks::lock;
use crate::stream::TaskCtx;
use crate::{sys, waitgraph};
use acl_notify_handles::{Kind, Slab};

mod sim;
#[cfg(test)]
mod tests;

/// One record task's outcome, shared by the task, the event and the Ex waits that captured it.
#[derive(Debug, Default)]
struct Mark {
    /// `CLOCK_MONOTONIC` ns when the record ran; 0 while it has not. Written under the
    /// event's lock.
    at_ns: AtomicU64,
    /// The task was dropped unrun (its stream destroyed with its tasks discarded, aborted,
    /// its device reset or the session finalized): it never runs. Written under the event's
    /// lock.
    discarded: AtomicBool,
    /// A reset task enqueued while this was the latest record has run: the flag of this
    /// record's id is clear again (an `aclrtCreateEvent` event, whose records each take an id
    /// of their own). Written under the event's lock.
    cleared: AtomicBool,
    /// Set with `discarded` when the record was dropped because a task before it failed on a
    /// stream that stops on failure: that failure, what a synchronize of the record answers.
    failed_before: OnceLock<SimError>,
}

impl Mark {
    fn ran(&self) -> bool {
        self.at_ns.load(Ordering::Relaxed) != 0
    }

    fn discarded(&self) -> bool {
        self.discarded.load(Ordering::Relaxed)
    }

    /// The flag of this record's id: set once it ran, until a reset of it ran.
    fn flag(&self) -> bool {
        self.ran() && !self.cleared.load(Ordering::Relaxed)
    }

    /// A synchronize's, a query's or a wait's error now that this record was dropped unrun
    /// (the record of an event of `device`).
    fn discarded_error(&self, device: u32) -> SimError {
        match self.failed_before.get() {
            // CANN's answer: once a stream stops on failure, its context's checks
            // (`Context::CheckStatus`, which `ApiImpl::EventSynchronize` and
            // `EventQueryStatus` call first) answer with that failure (hicann/runtime
            // `src/runtime/core/src/context/context.cc`, `stream.cc` `SetFailMode`,
            // `EnterFailureAbort`). A failure that is itself a dropped record's (a wait on
            // it, on a stream of another context) names that one in turn.
            Some(cause) => err(
                cause.kind(),
                format!(
                    "the event's record (device {device}) never ran: its stream stops on failure \
                     (ACL_STOP_ON_FAILURE) and a task before the record failed: {}",
                    cause.message()
                ),
            ),
            None => discarded_error(device),
        }
    }
}

/// A synchronize's or a wait's error when the record it waited for was dropped unrun (by an
/// abort, a discarding destroy, a reset or a finalize; see [`Mark::discarded_error`]).
fn discarded_error(device: u32) -> SimError {
    err(
        Error::StreamAbort,
        format!(
            "the event's record (device {device}) was discarded unrun: its stream was aborted, \
             destroyed with aclrtDestroyStreamForce, its device reset or the session finalized"
        ),
    )
}

/// An event record task (`SimJob::EventRecord`): when it is dropped without having run, its
/// [`Mark`] says so and the event's waiters (synchronize, Ex waits) are woken, instead of
/// waiting for ever for a record that will not come. Its stream hands it the failure it was
/// dropped behind, if that is why ([`RecordTask::drop_after_failure`]).
pub(crate) struct RecordTask {
    ev: Arc<SimEvent>,
    mark: Arc<Mark>,
    /// The event's handle, for the timeline.
    event: RawEvent,
}

impl RecordTask {
    /// Runs the record: the event's flag set, the record's time noted, its waiters woken.
    pub(crate) fn run(self) -> Result<(), SimError> {
        let args = || serde_json::json!({"event": self.event.0});
        crate::trace::span("event", "event record", args, || {
            let now = sys::now_ns().max(1);
            let mut st = lock(&self.ev.st);
            st.flag = true;
            self.mark.at_ns.store(now, Ordering::Relaxed);
            EvState::wake(st, &self.ev.cv);
            Ok(())
        })
    }

    /// Drops the record unrun because a task before it failed (`cause`, what its stream
    /// stored) on a stream that stops on failure: its synchronize and query answer `cause`
    /// ([`Mark::discarded_error`]).
    pub(crate) fn drop_after_failure(self, cause: Option<SimError>) {
        if let Some(cause) = cause {
            // Before `Drop` marks the record discarded under the event's lock, which every
            // reader takes before it looks at `failed_before`.
            let _ = self.mark.failed_before.set(cause);
        }
    }
}

/// An IPC event's record task, as it goes: [`QUEUEING`] until the thread that queues it
/// knows the queueing worked ([`QUEUED`]), [`RAN`] once it has run, [`DROPPED`] when it was
/// dropped unrun while still [`QUEUEING`] (a failed queueing, or a discard that came first:
/// the queueing thread tells which). A task dropped unrun once [`QUEUED`] counts its record as
/// done ([`IpcRef::complete_unrun`]), so that no holder waits for ever for it, and notes its
/// number for this process's synchronize and waits.
struct IpcRecordTask {
    ev: Arc<SimEvent>,
    n: u32,
    state: Arc<AtomicU8>,
}

const QUEUEING: u8 = 0;
const QUEUED: u8 = 1;
const RAN: u8 = 2;
const DROPPED: u8 = 3;

impl IpcRecordTask {
    /// Record `n` of the event will not run: it counts as done, and this process notes it.
    fn unrun(ev: &SimEvent, n: u32) {
        if let Some(r) = &ev.ipc {
            r.complete_unrun(n);
        }
    }
}

impl Drop for IpcRecordTask {
    fn drop(&mut self) {
        let unrun = match self.state.compare_exchange(
            QUEUEING,
            DROPPED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            // The queueing thread decides (see `Sim::event_record`).
            Ok(_) => false,
            Err(s) => s == QUEUED,
        };
        if unrun {
            Self::unrun(&self.ev, self.n);
        }
    }
}

impl Drop for RecordTask {
    fn drop(&mut self) {
        if self.mark.ran() {
            return;
        }
        let st = lock(&self.ev.st);
        self.mark.discarded.store(true, Ordering::Relaxed);
        drop(st);
        self.ev.cv.notify_all();
    }
}

#[derive(Debug, Default)]
struct EvState {
    /// The event id, once it has one.
    id: Option<u32>,
    /// Classic: set by a record, cleared by a reset.
    flag: bool,
    /// The latest record enqueued: published once its task is in its stream's queue, so that
    /// a wait another thread queues on the same stream meanwhile is queued behind the record it
    /// pairs with (published before, such a wait could sit ahead of its own record for ever).
    latest: Option<Arc<Mark>>,
    /// Records enqueued so far.
    records: u64,
    /// Records begun (each takes the next number before its task is queued), and the number
    /// of the one `latest` holds: of two records queued by two threads at once, the later
    /// begun stays the latest, whichever publishes last.
    begun: u64,
    published: u64,
    waits: u64,
    waits_done: u64,
    /// Threads asleep on the event's condition variable (a synchronize, a stream's wait): a
    /// record or a finished wait notifies it only if there are any (each `notify_all` is a
    /// `FUTEX_WAKE` system call, sleepers or not).
    sleepers: u32,
}

impl EvState {
    /// Sleeps on `cv` (counted in `sleepers`) until notified or until `timeout`.
    fn sleep<'a>(
        mut st: MutexGuard<'a, EvState>,
        cv: &Condvar,
        timeout: Option<Duration>,
    ) -> MutexGuard<'a, EvState> {
        st.sleepers += 1;
        let mut st = match timeout {
            None => cv.wait(st).unwrap_or_else(PoisonError::into_inner),
            Some(t) => {
                cv.wait_timeout(st, t)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
        st.sleepers -= 1;
        st
    }

    /// Wakes the sleepers of `cv`, if any, letting the lock go first.
    fn wake(st: MutexGuard<'_, EvState>, cv: &Condvar) {
        let any = st.sleepers > 0;
        drop(st);
        if any {
            cv.notify_all();
        }
    }
}

/// One event. Shared by its handle and its queued tasks.
#[derive(Debug)]
pub(crate) struct SimEvent {
    device: u32,
    spec: EventSpec,
    /// An IPC event's shared slot (its state lives there, not in `st`).
    ipc: Option<IpcRef>,
    st: Mutex<EvState>,
    cv: Condvar,
    ids: Arc<IdPools>,
}

impl SimEvent {
    /// 107023 if IPC record `n` was dropped unrun by this process, or by the process that
    /// recorded it (while it is the event's latest record), or its recorder died before it ran
    /// (a synchronize or wait passed because the record counts as done).
    fn ipc_unrun(&self, n: u32) -> Result<(), SimError> {
        // Dropped by this process's stream, through any of its handles of the event.
        if n != 0 && self.ipc.as_ref().is_some_and(|r| r.was_unrun(n)) {
            return Err(discarded_error(self.device));
        }
        match self.ipc.as_ref().and_then(|r| r.never_ran(n)) {
            Some(NeverRan::IssuerDied(pid)) => Err(err(
                Error::StreamAbort,
                format!(
                    "the IPC event's record (device {}) never ran: the process that recorded \
                     it, pid {pid}, {} first",
                    self.device,
                    crate::diag::Ended::of(pid).verb()
                ),
            )),
            Some(NeverRan::Dropped(pid)) => Err(err(
                Error::StreamAbort,
                format!(
                    "the IPC event's record (device {}) was discarded unrun by the process \
                     that recorded it, pid {pid}: its stream was aborted, destroyed with \
                     aclrtDestroyStreamForce, its device reset or its session finalized",
                    self.device
                ),
            )),
            None => Ok(()),
        }
    }
}

impl Drop for SimEvent {
    fn drop(&mut self) {
        if let Some(id) = lock(&self.st).id {
            self.ids.free(self.device, id);
        }
    }
}

/// Per-device event id pools of this process.
#[derive(Debug)]
struct IdPools {
    max: u32,
    devices: Mutex<Vec<(u32, Vec<u32>)>>,
}

impl IdPools {
    /// The lowest free id of `device`, or `None` when all `max` are taken.
    fn take(&self, device: u32) -> Option<u32> {
        let mut d = lock(&self.devices);
        let (next, free) = d.get_mut(device as usize)?;
        if let Some(id) = free.pop() {
            return Some(id);
        }
        if *next >= self.max {
            return None;
        }
        *next += 1;
        Some(*next - 1)
    }

    /// Ids of `device` not in use.
    fn free_count(&self, device: u32) -> u32 {
        let d = lock(&self.devices);
        d.get(device as usize).map_or(0, |(next, free)| {
            self.max.saturating_sub(*next) + u32::try_from(free.len()).unwrap_or(u32::MAX)
        })
    }

    fn free(&self, device: u32, id: u32) {
        if let Some((_, free)) = lock(&self.devices).get_mut(device as usize) {
            free.push(id);
        }
    }
}

/// The process's events (a field of the simulator).
#[derive(Debug)]
pub(crate) struct EventState {
    /// By handle. Nothing else keeps an event by its handle's value (tasks hold the `Arc`),
    /// so a value that comes back after its slot's generation wrapped finds only the event
    /// now in the slot.
    handles: RwLock<Slab<Arc<SimEvent>>>,
    ids: Arc<IdPools>,
    /// The IPC event file, opened on first use.
    ipc: EvtState,
}

impl EventState {
    pub(crate) fn new(seed: u64, devices: u32, max: u32) -> Self {
        EventState {
            handles: RwLock::new(Slab::new(Kind::Event, seed)),
            ids: Arc::new(IdPools {
                max,
                devices: Mutex::new(vec![(0, Vec::new()); devices as usize]),
            }),
            ipc: EvtState::new(),
        }
    }

    /// Drops every handle (the simulator is going away).
    pub(crate) fn clear(&self) {
        // Dropped after the lock is released: a handle's drop may take other locks.
        let all = crate::locks::write(&self.handles).drain();
        drop(all);
    }
}

fn bad_event(h: RawEvent) -> SimError {
    crate::error::not_live("event", h.0)
}

fn device_only(ev: &SimEvent, what: &str) -> Result<(), SimError> {
    if ev.spec.device_only() {
        // hicann/runtime `api_error.cc`: device-only (MC2) events are refused on the host.
        return Err(err(
            Error::ParamInvalid,
            format!("event was created with ACL_EVENT_DEVICE_USE_ONLY: the host cannot {what} it"),
        ));
    }
    Ok(())
}

fn ipc_refused(ev: &SimEvent, what: &str) -> Result<(), SimError> {
    if ev.spec.ipc() {
        return Err(err(
            Error::FeatureNotSupport,
            format!("{what} does not take an IPC event (ACL_EVENT_IPC)"),
        ));
    }
    Ok(())
}

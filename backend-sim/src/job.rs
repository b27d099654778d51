//! What a simulator stream runs ([`SimJob`]) and how jobs are queued on it: enqueue, worker
//! placement, the wait-for graph entry, and what a blocked head task is doing ([`Blocked`]).

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use acl_notify_core::{BackendError, CntRecord, CntWait, Error, HostCall, RawStream};

use crate::cnt::CntRef;
use crate::config::ENV_ENQUEUE_TIMEOUT;
use crate::entries::{StreamPin, bad_stream};
use crate::error::SimError;
use crate::sim::{Sim, err, read};
use crate::stream::{Job, Stream, StreamConfig, Task, TaskCtx};
use crate::waiters::{StampedWaiter, next_spin, prefetch_for_write, wait_slow};
use crate::{spin, trace, waitgraph};

/// A simulator stream: its queue holds [`SimJob`]s.
pub(crate) type SimStream = Stream<SimError, SimJob>;

/// What a simulator stream runs: notify records and waits and host functions as plain values
/// (no allocation per task), count-notify records and waits as boxed values the worker matches
/// like them (boxed so that every job stays 24 bytes), anything else as a boxed closure.
pub(crate) enum SimJob {
    Record {
        pin: Arc<StreamPin>,
        pid: i32,
    },
    Wait {
        pin: Arc<StreamPin>,
        timeout: Option<Duration>,
    },
    /// The count notify, the record and the recording process's pid.
    CntRecord(Box<(Arc<CntRef>, CntRecord, i32)>),
    /// The count notify and the wait, its timeout resolved when queued (as a notify wait's).
    CntWait(Box<(Arc<CntRef>, CntWait)>),
    Host(HostCall),
    Other(Task<SimError>),
}

// The queue holds jobs by value: a larger job is more cache lines per record+wait pair. At 32
// bytes (count-notify jobs held inline, 1bfbb87) one stream's record+wait pair took 74-82 ns
// instead of 47-59 (`bench --only inproc`, A/B of the same minutes); boxing them brought it back
// to 47-48 ns.
const _: () = assert!(std::mem::size_of::<SimJob>() <= 24);

impl From<Task<SimError>> for SimJob {
    fn from(task: Task<SimError>) -> Self {
        SimJob::Other(task)
    }
}

impl Job<SimError> for SimJob {
    /// The task's reference to the notify: its counter is shared with the enqueuing thread,
    /// so its drop waits until the worker is between jobs (see [`Job::run`]).
    type Remains = Option<Arc<StreamPin>>;

    #[inline(always)]
    fn run(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
    ) -> (Result<(), SimError>, Self::Remains) {
        self.run_plain(ctx, before_block)
    }

    /// A record is one swap (and a wake-up call if a waiter sleeps): it runs the moment the
    /// job before it (typically a wait) ends.
    fn chains(&self) -> bool {
        matches!(self, SimJob::Record { .. })
    }

    /// Records never block; waits call `before_block` before they sleep.
    fn may_block(&self) -> bool {
        !matches!(self, SimJob::Record { .. } | SimJob::Wait { .. })
    }

    /// Starts pulling the notify's flag line in for writing while the task before runs: a
    /// record or a wait mostly finds that line in the cache of the stream at the other end
    /// (it recorded or consumed last), and the transfer then overlaps the task before
    /// instead of stalling this one's read-modify-write (two streams handing records through
    /// a ring of notifies move about a quarter more items per second).
    fn prefetch(&self) {
        if let SimJob::Record { pin, .. } | SimJob::Wait { pin, .. } = self {
            prefetch_for_write(std::ptr::from_ref(pin.0.slot()).cast());
        }
    }
}

impl SimJob {
    /// [`Job::run`] without the timeline.
    #[inline(always)]
    pub(crate) fn run_plain(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
    ) -> (Result<(), SimError>, Option<Arc<StreamPin>>) {
        match self {
            SimJob::Record { pin, pid } => {
                let r = &pin.0;
                if let Err(e) = r.live() {
                    return (Err(e), Some(pin));
                }
                let w = StampedWaiter {
                    inner: r.file().waiter(),
                    ctx,
                };
                r.slot().record(&w, pid);
                // A record that went into a page a truncation cut off went nowhere (see
                // `lost`): one load of the mapping's flag.
                (r.file().intact(), Some(pin))
            }
            SimJob::Wait { pin, timeout } => {
                let r = &pin.0;
                if let Err(e) = r.live() {
                    return (Err(e), Some(pin));
                }
                let sync = &r.slot().sync;
                let hint = ctx.spin_hint();
                // The record is there and nobody queued: take it before setting anything up
                // (the table's own fast path, which it would try first as well). The flag is
                // read before the CAS, so a wait that must wait pays for no extra CAS.
                if sync.is_set() && sync.try_consume() {
                    hint.set(next_spin(hint.get(), None));
                    return (r.file().intact(), Some(pin));
                }
                let result = wait_slow(&pin, timeout, ctx, before_block);
                (result, Some(pin))
            }
            SimJob::CntRecord(job) => {
                let (r, record, pid) = *job;
                (crate::cnt::run_record(&r, record, pid), None)
            }
            SimJob::CntWait(job) => (crate::cnt::run_wait(&job.0, &job.1, ctx), None),
            SimJob::Host(call) => {
                ctx.set_blocked_on(Blocked::HostFunction.note());
                call.call();
                ctx.set_blocked_on(0);
                (Ok(()), None)
            }
            SimJob::Other(task) => (task(ctx), None),
        }
    }
}

/// What a stream's running task blocks on, as noted for the stream engine
/// ([`TaskCtx::set_blocked_on`]) so that a queue that stays full can say why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// A wait on notify `id` of device `dev` (`forever`: with no timeout).
    Wait { dev: u32, id: u32, forever: bool },
    /// A count-notify wait on count notify `id` of device `dev`.
    CntWait { dev: u32, id: u32, forever: bool },
    /// A host function that has not returned.
    HostFunction,
}

impl Blocked {
    /// Bits 60–62 the kind, 59 "no timeout", 32–47 the device, 0–31 the id (never 0).
    pub(crate) fn note(self) -> u64 {
        let (kind, dev, id, forever) = match self {
            Blocked::Wait { dev, id, forever } => (1, dev, id, forever),
            Blocked::CntWait { dev, id, forever } => (2, dev, id, forever),
            Blocked::HostFunction => (3, 0, 0, false),
        };
        (kind << 60) | (u64::from(forever) << 59) | (u64::from(dev & 0xffff) << 32) | u64::from(id)
    }

    pub(crate) fn from_note(note: u64) -> Option<Blocked> {
        let (dev, id, forever) = (
            ((note >> 32) & 0xffff) as u32,
            note as u32,
            note & (1 << 59) != 0,
        );
        match note >> 60 {
            1 => Some(Blocked::Wait { dev, id, forever }),
            2 => Some(Blocked::CntWait { dev, id, forever }),
            3 => Some(Blocked::HostFunction),
            _ => None,
        }
    }

    /// "a wait on notify 17 of device 0 with no timeout" and the like.
    pub(crate) fn describe(note: u64) -> String {
        let timeout = |forever| {
            if forever {
                "with no timeout"
            } else {
                "with a timeout"
            }
        };
        match Blocked::from_note(note) {
            Some(Blocked::Wait { dev, id, forever }) => format!(
                "is a wait on notify id {id} of device {dev} {}, asleep until that notify is \
                 recorded",
                timeout(forever)
            ),
            Some(Blocked::CntWait { dev, id, forever }) => format!(
                "is a wait on count notify id {id} of device {dev} {}, asleep until its \
                 condition holds",
                timeout(forever)
            ),
            Some(Blocked::HostFunction) => "is a host function that has not returned".into(),
            None => "has not finished".into(),
        }
    }
}

impl Sim {
    /// The CPU a stream's worker is restricted to ([`StreamCpus`](crate::StreamCpus)), or `None` when the kernel
    /// places it.
    ///
    /// Codes: 107017 for a handle that is not a live stream of this `Sim`.
    pub fn stream_cpu(&self, stream: RawStream) -> Result<Option<usize>, SimError> {
        Ok(self.stream(stream)?.0.cpu())
    }

    /// Starts a stream worker, on the next CPU of the placement list if there is one.
    pub(crate) fn spawn_stream(&self, name: String) -> Result<SimStream, SimError> {
        let cpus = &self.inner.cpus;
        let cpu = (!cpus.is_empty()).then(|| {
            cpus[self.inner.cpu_seq.fetch_add(1, Ordering::Relaxed) as usize % cpus.len()]
        });
        let mut config = StreamConfig::new(name)
            .cpu(cpu)
            .adaptive_cpu(cpu.is_none() && self.inner.adaptive_cpus)
            .enqueue_timeout(self.inner.enqueue_timeout);
        if !spin::Spinner::may_spin() {
            config = config.spin(Duration::ZERO);
        }
        Stream::spawn(config).map_err(|e: SimError| match cpu {
            Some(c) => err(
                e.kind(),
                format!("the stream's worker thread could not be started on CPU {c}"),
            ),
            None => e,
        })
    }

    pub(crate) fn enqueue(
        &self,
        stream: &SimStream,
        h: RawStream,
        task: impl FnOnce(&TaskCtx) -> Result<(), SimError> + Send + 'static,
    ) -> Result<(), SimError> {
        self.enqueue_job(stream, h, SimJob::Other(Box::new(task)))
    }

    /// Queues `job` on stream `h` after `check` accepts the stream's device (and the job). The
    /// common case queues under the stream table's read lock, without taking a reference to
    /// the stream (two atomic read-modify-writes fewer); a full queue is waited for outside
    /// the lock.
    pub(crate) fn enqueue_checked(
        &self,
        h: RawStream,
        job: SimJob,
        check: impl FnOnce(u32, &SimJob) -> Result<(), SimError>,
    ) -> Result<(), SimError> {
        // A record is published in the wait-for graph (one store; see `waitgraph`).
        let target = match &job {
            SimJob::Record { pin, .. } => Some(pin.target()),
            _ => None,
        };
        let (s, job, graph) = {
            let t = read(&self.inner.streams);
            let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
            check(e.device, &job)?;
            // The timeline follows a job wrapped when it is queued (see `trace::job`).
            let job = if trace::on() {
                trace::job::traced(job)
            } else {
                job
            };
            match e.stream.try_enqueue_job(job) {
                Ok(Ok(())) => {
                    if let (Some(t), Some(g)) = (target, &e.graph) {
                        g.note_record(t, e.stream.issued());
                    }
                    return Ok(());
                }
                Ok(Err(err)) => return Err(self.enqueue_error(&e.stream, h, err)),
                Err(job) => (Arc::clone(&e.stream), job, e.graph.clone()),
            }
        };
        self.enqueue_job(&s, h, job)?;
        if let (Some(t), Some(g)) = (target, graph) {
            g.note_record(t, s.issued());
        }
        Ok(())
    }

    /// Claims the stream's entry in the wait-for graph for the stream's worker thread, which
    /// publishes in it what a blocked wait waits on.
    pub(crate) fn publish_stream(
        &self,
        stream: &SimStream,
        device: u32,
    ) -> Option<Arc<waitgraph::StreamSlot>> {
        let slot = self
            .inner
            .graph
            .as_ref()?
            .claim(0, self.inner.server_id, device)?;
        slot.bind_worker(stream.worker_tid());
        Some(slot)
    }

    /// Why stream `stream` is not done, for a caller that sees it not ready: what its head
    /// task is doing ("its head task is a wait on notify 3 of device 1, asleep for 12.0 s
    /// (timeout 60.0 s)") and the failure stored on it, if any; `None` when it has no stored
    /// failure and its head is not blocked (or the stream is not a live stream of this `Sim`).
    pub fn stream_report(&self, stream: RawStream) -> Option<String> {
        let (s, graph) = {
            let t = read(&self.inner.streams);
            let e = t.get(stream.0)?;
            (Arc::clone(&e.stream), e.graph.clone())
        };
        let head = graph.and_then(|g| g.describe_head()).or_else(|| {
            let note = s.blocked_on();
            (note != 0).then(|| Blocked::describe(note).trim_start_matches("is ").to_owned())
        });
        let stored = s.stored_error();
        let mut text = String::new();
        if let Some(h) = head {
            let _ = write!(text, "its head task is {h}");
        }
        if let Some(e) = stored {
            if !text.is_empty() {
                text.push_str("; ");
            }
            let _ = write!(
                text,
                "a failure is stored on it, which the next synchronize reports: {e}"
            );
        }
        (!text.is_empty()).then_some(text)
    }

    /// Notes in the wait-for graph a record of `t` just queued on stream `stream` (for records
    /// that are not notify records, which note theirs as they are queued).
    pub(crate) fn note_record_on(&self, stream: RawStream, t: waitgraph::Target) {
        let st = read(&self.inner.streams);
        if let Some(e) = st.get(stream.0)
            && let Some(g) = &e.graph
        {
            g.note_record(t, e.stream.issued());
        }
    }

    /// Shows stream `stream` as `handle` in the wait-for graph (the inspector's and the
    /// deadlock reports' name for it): the C library passes the handle its callers see.
    ///
    /// Codes: 107017 for a handle that is not a live stream of this `Sim`.
    pub fn set_stream_alias(&self, stream: RawStream, handle: u64) -> Result<(), SimError> {
        let t = read(&self.inner.streams);
        let e = t.get(stream.0).ok_or_else(|| bad_stream(stream))?;
        if let Some(g) = &e.graph {
            g.set_handle(handle);
        }
        if trace::on() {
            trace::name_track(
                e.stream.worker_tid(),
                trace::stream_name(handle, e.device, e.default),
            );
        }
        Ok(())
    }

    pub(crate) fn enqueue_job(
        &self,
        stream: &SimStream,
        h: RawStream,
        job: SimJob,
    ) -> Result<(), SimError> {
        stream
            .enqueue_job(job)
            .map_err(|e| self.enqueue_error(stream, h, e))
    }

    #[cold]
    pub(crate) fn enqueue_error(&self, stream: &SimStream, h: RawStream, e: SimError) -> SimError {
        match e.kind() {
            Error::InvalidHandle => bad_stream(h),
            Error::StreamTaskFull => err(
                Error::StreamTaskFull,
                format!(
                    "stream {:#x}: its queue of {} tasks stayed full for {:?}, so this task was \
                     not queued. The task running at its head {}. Usually that is a wait for a \
                     record nobody has queued yet (or that this thread meant to queue next), or \
                     a host function that does not return: record from another stream first, \
                     give the wait a timeout, or synchronize before queuing more. The bound is \
                     SimBuilder::enqueue_timeout, or {} in seconds (0 waits for ever)",
                    h.0,
                    stream.capacity(),
                    stream.enqueue_timeout().unwrap_or_default(),
                    Blocked::describe(stream.blocked_on()),
                    ENV_ENQUEUE_TIMEOUT,
                ),
            ),
            _ => e,
        }
    }
}

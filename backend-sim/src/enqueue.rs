//! Queuing jobs on a [`Sim`]'s streams: spawning a stream's worker (CPU placement), enqueue
//! with its checks, the wait-for graph entry of a stream, and the reports of a stream that is
//! stuck.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use acl_notify_core::{BackendError, Error, RawNotify, RawStream};

use crate::blocked::Blocked;
use crate::config::ENV_ENQUEUE_TIMEOUT;
use crate::entries::StreamEntry;
use crate::entries::bad_stream;
use crate::error::{SimError, err};
use crate::job::{SimJob, SimStream};
use crate::locks::{read, write};
use crate::lookup::PinLease;
use crate::pin::NotifyName;
use crate::sim::Sim;
use crate::stream::{Stream, StreamConfig, TaskCtx, WorkerPolicy, allowed_cpus};
use crate::{spin, stream_cache, trace, waitgraph};

/// A job as it is queued: wrapped to be followed on the timeline if that is on (see
/// `trace::job`). In the queue's `on_claim`, after the pin's check: the wrapper holds the
/// job's pin.
#[inline(always)]
fn traced(job: SimJob) -> SimJob {
    if trace::on() {
        trace::job::traced(job)
    } else {
        job
    }
}

/// What [`Sim::push_checked`] did with a job.
enum Pushed {
    /// Queued (`Ok`), or refused.
    Done(Result<(), SimError>),
    /// The queue is full: the stream and the job, to wait for room.
    Full(Arc<SimStream>, SimJob),
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
        let here = allowed_cpus();
        if here.len() == 1 && cpu.is_none_or(|c| c == here[0]) {
            // A process limited to one CPU (`taskset -c 0`), and a worker that stays there
            // (not placed on another CPU by `StreamCpus`): the worker and the threads that
            // feed it and synchronize with it take turns on it. Spinning for each other
            // cannot help there, and the spins' `sched_yield`s hurt beside another process
            // on that CPU: under EEVDF each yield moves the yielder's deadline a slice later,
            // so the other process ran a whole slice (about 3.9 ms) at every turn — bursts of
            // 64 copies of 64 KiB ran at 0.05× of `memcpy`, a 64-byte copy took 22 µs. Without
            // the spins, though, a worker woken by a burst's first task would take the CPU
            // from the host queuing the rest, run one task and sleep again (0.17–0.67× alone
            // on the CPU, from 0.86×): so the worker also waits for its turn when woken
            // (`SCHED_BATCH`). Measured with this: 0.77× alone (0.78–0.79× before, 64-byte
            // copy 0.28 µs from 0.30), 0.63× beside a busy loop (64-byte copy 0.57–0.59 µs).
            config = config.spin(Duration::ZERO).policy(WorkerPolicy::Batch);
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

    /// Queues `job` (not a record or wait: see [`enqueue_pinned`](Self::enqueue_pinned)) on
    /// stream `h` after `check` accepts the stream (its device) and the job, under the
    /// stream table's read lock, without taking a reference to the stream. A full queue is
    /// waited for outside the lock.
    pub(crate) fn enqueue_checked(
        &self,
        h: RawStream,
        job: SimJob,
        check: impl FnOnce(&StreamEntry, &SimJob) -> Result<(), SimError>,
    ) -> Result<(), SimError> {
        self.enqueue_with(h, job, false, (None, &Cell::new(false)), check, |j| j)
    }

    /// Queues record or wait `job`, which uses the pin of `lease` (notify `n`), on stream `h`
    /// after `check` accepts the stream and the job; `Ok(false)` if the pin went before the
    /// job's ticket was claimed (nothing useful queued: look the notify up again; see
    /// `crate::pin`). A stream this thread queued on before is found in the thread's stream
    /// cache (`stream_cache`: no lock, no reference count); otherwise the job is queued
    /// under the stream table's read lock, without taking a reference to the stream (two
    /// atomic read-modify-writes fewer). A full queue is waited for outside the lock.
    #[inline(always)]
    pub(crate) fn enqueue_pinned(
        &self,
        h: RawStream,
        n: RawNotify,
        lease: &PinLease,
        job: SimJob,
        check: impl FnOnce(&StreamEntry, &SimJob) -> Result<(), SimError>,
    ) -> Result<bool, SimError> {
        // A record is published in the wait-for graph (one store; see `waitgraph`).
        let target = matches!(job, SimJob::Record { .. }).then_some(lease.target);
        let refused = Cell::new(false);
        let claim = |j| self.claim_pinned(j, lease.epoch, n, h, &refused);
        self.enqueue_with(h, job, true, (target, &refused), check, claim)?;
        Ok(!refused.get())
    }

    /// [`enqueue_checked`](Self::enqueue_checked) and [`enqueue_pinned`](Self::enqueue_pinned):
    /// `cached`, look in the thread's stream cache first; `note`, the notify a record sets,
    /// noted in the wait-for graph once queued unless the queue's `on_claim`, `claim`,
    /// refused the job (the flag).
    #[inline(always)]
    fn enqueue_with(
        &self,
        h: RawStream,
        job: SimJob,
        cached: bool,
        note: (Option<NotifyName>, &Cell<bool>),
        check: impl FnOnce(&StreamEntry, &SimJob) -> Result<(), SimError>,
        mut claim: impl FnMut(SimJob) -> SimJob,
    ) -> Result<(), SimError> {
        let noted = || note.0.filter(|_| !note.1.get()).map(NotifyName::target);
        // Read before the lookup: a removal after it makes the entry stale (`stream_cache`).
        let epoch = stream_cache::epoch();
        let mut args = Some((job, check));
        if cached {
            // What the hit path did past the common case (a refusal, an error, a full queue),
            // handed out of the cache's borrow: the common case returns no `Pushed` (about
            // 20 instructions a record of moves and tests of it, callgrind).
            let mut other = None;
            let hit = stream_cache::with(self.inner.serial, epoch, h.0, |e, notes| {
                let (job, check) = args.take().expect("called once");
                match self.push_checked(e, h, job, check, &mut claim) {
                    Pushed::Done(Ok(())) => {
                        if let Some(n) = notes
                            && let Some(t) = noted()
                        {
                            // SAFETY: the graph is this `Sim`'s (`inner.graph`), and `self`
                            // lives.
                            unsafe { n.note_record(t, e.stream.issued()) };
                        }
                    }
                    pushed => other = Some(pushed),
                }
            });
            if hit.is_some() {
                return match other {
                    None => Ok(()),
                    Some(pushed) => self.pushed_other(pushed, h, noted, claim),
                };
            }
        }
        let (job, check) = args.take().expect("not taken on a miss");
        self.enqueue_uncached(h, job, cached.then_some(epoch), note, check, claim)
    }

    /// [`enqueue_with`](Self::enqueue_with) after a cached stream's push that did not simply
    /// queue: its result, or the wait for room in a full queue (`noted`: the notify a record
    /// sets, to note in the wait-for graph once queued).
    #[cold]
    #[inline(never)]
    fn pushed_other(
        &self,
        pushed: Pushed,
        h: RawStream,
        noted: impl Fn() -> Option<waitgraph::Target>,
        claim: impl FnMut(SimJob) -> SimJob,
    ) -> Result<(), SimError> {
        match pushed {
            Pushed::Done(r) => r,
            Pushed::Full(s, job) => {
                self.enqueue_job_with(&s, h, job, claim)?;
                if let Some(t) = noted() {
                    self.note_record_on(h, t);
                }
                Ok(())
            }
        }
    }

    /// [`enqueue_with`](Self::enqueue_with) past the thread's stream cache (not looked in, or
    /// missed): under the stream table's read lock, the entry kept in the cache if `cache`
    /// gives the stream epoch read before the lookup. Out of line: inlined, its handle
    /// decoding and lock were set up ahead of the cache's hit path on every call (about 20
    /// instructions a record, callgrind).
    #[inline(never)]
    fn enqueue_uncached(
        &self,
        h: RawStream,
        job: SimJob,
        cache: Option<u64>,
        note: (Option<NotifyName>, &Cell<bool>),
        check: impl FnOnce(&StreamEntry, &SimJob) -> Result<(), SimError>,
        mut claim: impl FnMut(SimJob) -> SimJob,
    ) -> Result<(), SimError> {
        let noted = || note.0.filter(|_| !note.1.get()).map(NotifyName::target);
        let (s, job, graph) = {
            let t = read(&self.inner.streams);
            let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
            if let Some(epoch) = cache {
                stream_cache::put(self.inner.serial, epoch, h.0, e);
            }
            match self.push_checked(e, h, job, check, &mut claim) {
                Pushed::Done(r) => {
                    if let (Ok(()), Some(g)) = (&r, &e.graph)
                        && let Some(t) = noted()
                    {
                        g.note_record(t, e.stream.issued());
                    }
                    return r;
                }
                Pushed::Full(s, job) => (s, job, e.graph.clone()),
            }
        };
        self.enqueue_job_with(&s, h, job, claim)?;
        if let (Some(t), Some(g)) = (noted(), graph) {
            g.note_record(t, s.issued());
        }
        Ok(())
    }

    /// `check`, then the job queued on `e`'s stream unless its queue is full (then handed
    /// back with a reference to the stream, to wait for room without a lock).
    #[inline(always)]
    fn push_checked(
        &self,
        e: &StreamEntry,
        h: RawStream,
        job: SimJob,
        check: impl FnOnce(&StreamEntry, &SimJob) -> Result<(), SimError>,
        claim: &mut impl FnMut(SimJob) -> SimJob,
    ) -> Pushed {
        if let Err(err) = check(e, &job) {
            return Pushed::Done(Err(err));
        }
        match e.stream.try_enqueue_job_with(job, |j| traced(claim(j))) {
            Ok(Ok(())) => Pushed::Done(Ok(())),
            Ok(Err(err)) => Pushed::Done(Err(self.enqueue_error(&e.stream, h, err))),
            Err(job) => Pushed::Full(Arc::clone(&e.stream), job),
        }
    }

    /// Marks the removal of stream handles for the threads' stream caches and pin caches;
    /// called right after the removal (the streams unlisted), under the stream table's write
    /// lock, before the stream is destroyed. The notify epoch's bump makes every pin cache
    /// entry and every record or wait between its pin lookup and its claim look the pin up
    /// again, which skips the pins of unlisted streams (`NotifyEntry::pin`): a stream
    /// handle's value comes back once its slot's generation has wrapped, and a pin found
    /// under it must be the new stream's.
    pub(crate) fn streams_removed(&self) {
        stream_cache::streams_removed();
        self.inner.notify_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// A stream on `device` with a worker thread called `name`, entered in the stream table
    /// (and the wait-for graph and the timeline): the common part of a created stream and a
    /// device's default stream.
    pub(crate) fn new_stream(
        &self,
        device: u32,
        name: String,
        default: bool,
    ) -> Result<RawStream, SimError> {
        let stream = self.spawn_stream(name)?;
        #[cfg(test)]
        if self.inner.force_parking.load(Ordering::Relaxed) {
            stream.force_parking();
        }
        let graph = self.publish_stream(&stream, device);
        let h = write(&self.inner.streams)
            .insert(StreamEntry {
                stream: Arc::new(stream),
                device,
                default,
                graph: graph.clone(),
            })
            .ok()
            .map(RawStream)
            .ok_or_else(|| err(Error::ResourceAllocFail, "stream table is full"))?;
        if let Some(g) = graph {
            g.set_handle(h.0);
        }
        if trace::on() {
            self.name_track(h);
        }
        Ok(h)
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

    /// [`enqueue_job`](Self::enqueue_job) with the queue's `on_claim` (see
    /// `Stream::enqueue_job_with`), then the timeline's wrapper if it is on.
    fn enqueue_job_with(
        &self,
        stream: &SimStream,
        h: RawStream,
        job: SimJob,
        mut claim: impl FnMut(SimJob) -> SimJob,
    ) -> Result<(), SimError> {
        stream
            .enqueue_job_with(job, |j| traced(claim(j)))
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
                     SimBuilder::enqueue_timeout, or {} in seconds (0 waits for ever). If the \
                     waits are for a process that died (a rank of a job), each holds the queue \
                     until its own timeout: with aclrtSetStreamFailureMode(stream, \
                     ACL_STOP_ON_FAILURE) (FailureMode::StopOnFailure in Rust) the first wait \
                     that fails discards the tasks queued after it and the next synchronize \
                     reports it",
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

//! Queuing jobs on a [`Sim`]'s streams: spawning a stream's worker (CPU placement), enqueue
//! with its checks, the wait-for graph entry of a stream, and the reports of a stream that is
//! stuck.

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use acl_notify_core::{BackendError, Error, RawNotify, RawStream, SyncWait};

use crate::blocked::Blocked;
use crate::config::ENV_ENQUEUE_TIMEOUT;
use crate::entries::StreamEntry;
use crate::entries::bad_stream;
use crate::error::{SimError, err};
use crate::job::{SimJob, SimStream};
use crate::locks::{read, write};
use crate::pin::{NotifyName, PinRef};
use crate::sim::Sim;
use crate::stream::{Stream, StreamConfig, TaskCtx, WorkerPolicy, allowed_cpus};
use crate::{pair_cache, sigbus, spin, trace, waitgraph};

/// How long past its own limit a synchronize waits at most for a stream's thread to fail a
/// head wait whose timeout came before that limit ([`Sim::sync_past_overdue_waits`]; no longer
/// than the limit itself). It sleeps until that wait's task retires (`Stream::wait_task_retired`,
/// woken by the retire as a synchronize is), not in slices.
const OVERDUE_GRACE: Duration = Duration::from_secs(1);

/// Once the head is no longer that wait, how long it waits at most (within the grace) for the
/// thread to finish failing it and run what follows.
const OVERDUE_AFTER: Duration = Duration::from_millis(50);

#[cfg(test)]
std::thread_local! {
    /// How many times a synchronize of this thread went to sleep in
    /// [`Sim::sync_past_overdue_waits`] (tests: it sleeps until something happens, not in
    /// slices). The thread's own: `cargo test` runs other tests' synchronizes beside it.
    static OVERDUE_LOOKS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Tests: this thread's [`OVERDUE_LOOKS`].
#[cfg(test)]
pub(crate) fn overdue_looks() -> u32 {
    OVERDUE_LOOKS.with(std::cell::Cell::get)
}

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

/// What [`Sim::enqueue_pair`]'s probe did.
#[derive(Clone, Copy)]
enum Fast {
    /// Queued.
    Queued,
    /// Nothing done: not in the thread's pair cache, or not a case for the fast path.
    Miss,
    /// The pin went before the claim: a no-op was queued in the job's place; look again.
    Refused,
}

/// How [`Sim::enqueue_uncached`] keeps a record's or wait's pair in the thread's cache.
#[derive(Clone, Copy)]
struct PairKey<'a> {
    /// The handle epoch read before the lookups.
    epoch: u64,
    notify: RawNotify,
    pin: PinRef,
    name: NotifyName,
    /// Whether a wait on the stream of this entry may take the notify.
    waitable: &'a dyn Fn(&StreamEntry) -> bool,
}

impl Sim {
    /// The CPU a stream's worker is restricted to ([`StreamCpus`](crate::StreamCpus)), or `None` when the kernel
    /// places it.
    ///
    /// Codes: 107017 for a handle that is not a live stream of this `Sim`.
    pub fn stream_cpu(&self, stream: RawStream) -> Result<Option<usize>, SimError> {
        Ok(self.stream(stream)?.0.cpu())
    }

    /// Starts a stream worker of `device`, on the next CPU of the placement list if there is
    /// one.
    pub(crate) fn spawn_stream(&self, name: String, device: u32) -> Result<SimStream, SimError> {
        let cpus = &self.inner.cpus;
        let cpu = (!cpus.is_empty()).then(|| {
            cpus[self.inner.cpu_seq.fetch_add(1, Ordering::Relaxed) as usize % cpus.len()]
        });
        let mut config = StreamConfig::new(name)
            .device(device)
            .cpu(cpu)
            .adaptive_cpu(cpu.is_none() && self.inner.adaptive_cpus)
            .enqueue_timeout(self.inner.enqueue_timeout);
        // A producer spins for room only while a CPU is free for it: fewer busy stream
        // workers in the namespace than the spin budget (`crate::spin`). With one per CPU or
        // more (a ring of processes, each with its host and its worker), its spin took the
        // CPU from the workers that would make room: the ring of 4 read 14.8 → 24.3 µs a
        // round, the ring of 2 779 → 968 ns (`bench/README.md` History, speed23).
        let file = Arc::downgrade(&self.inner.file);
        config = config.room_spin_if(move || {
            file.upgrade()
                .is_some_and(|f| crate::shm::busy_now(f.busy()) < spin::budget())
        });
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
        // A process refused a thread learns, besides which limits there are, where it stands
        // against them (user26 met it at 32,350 streams of one process, kernel.pid_max 32768,
        // below the 910B's 32,768 streams; and at RLIMIT_NPROC).
        Stream::spawn(config).map_err(|e: SimError| {
            let advice = if e.message().starts_with(crate::stream::THREAD_REFUSED) {
                format!(" ({})", crate::sys::thread_limits())
            } else {
                String::new()
            };
            let why = match cpu {
                Some(c) => format!(
                    "the stream's worker thread could not be started on CPU {c}: {}",
                    e.message()
                ),
                None => e.message().to_owned(),
            };
            err(e.kind(), format!("{why}{advice}"))
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

    /// Queues `job` (not a record or wait: see [`enqueue_pair`](Self::enqueue_pair)) on
    /// stream `h` after `check` accepts the stream (its device) and the job, under the
    /// stream table's read lock, without taking a reference to the stream. A full queue is
    /// waited for outside the lock.
    pub(crate) fn enqueue_checked(
        &self,
        h: RawStream,
        job: SimJob,
        check: impl FnOnce(&StreamEntry, &SimJob) -> Result<(), SimError>,
    ) -> Result<(), SimError> {
        self.enqueue_uncached(h, job, None, (None, &Cell::new(false)), check, |j| j)
    }

    /// A record (`wait` `None`) or a wait (`Some` with its resolved timeout) of notify `n` on
    /// stream `h`: [`Sim::record`](acl_notify_core::StreamOps::record) and
    /// [`Sim::wait_and_reset`](acl_notify_core::StreamOps::wait_and_reset) after their own
    /// checks.
    ///
    /// The usual case takes one probe of the thread's pair cache (`pair_cache`: the stream,
    /// the pin, the checks' answers and the wait-for graph's note, no lock, no reference
    /// count), the queue's claim and the pin's check after it (`claim_pinned`), with every
    /// check of every notify call (the 507899 and 207000 guards, the timeline) folded into
    /// loads of flags that are set only on the rare paths. Anything else — a miss, a refused
    /// pin, a full or closed queue, a claim lost to another thread, a fault, the timeline on
    /// — goes through the tables ([`enqueue_pair_slow`](Self::enqueue_pair_slow)), out of
    /// line, as every call did before the cache.
    #[inline(always)]
    pub(crate) fn enqueue_pair(
        &self,
        n: RawNotify,
        h: RawStream,
        wait: Option<Option<Duration>>,
    ) -> Result<(), SimError> {
        // No fault yet in this process (so no file lost: `checked`) and no timeline to wrap
        // the job for. (Notify calls are allowed, `notify_calls`: a `Sim` whose SoC has no
        // notifies never puts a pair in the cache, so the probe misses.)
        if sigbus::faults() == 0 && !trace::on() {
            let fast = match wait {
                None => self.pair_fast::<false>(n, h, None),
                Some(t) => self.pair_fast::<true>(n, h, t),
            };
            match fast {
                Fast::Queued if sigbus::faults() == 0 => return Ok(()),
                Fast::Queued => return self.fault_during_call(),
                Fast::Refused | Fast::Miss => {}
            }
        }
        self.enqueue_pair_slow(n, h, wait)
    }

    /// [`enqueue_pair`](Self::enqueue_pair)'s probe of the thread's pair cache and, on a hit,
    /// its push: a record (`WAIT` false) or a wait with timeout `timeout`. A function of its
    /// own for each, so that the closure given to the queue is too (one closure called from
    /// both was not inlined: 17 instructions and a frame a record, callgrind).
    #[inline(always)]
    fn pair_fast<const WAIT: bool>(
        &self,
        n: RawNotify,
        h: RawStream,
        timeout: Option<Duration>,
    ) -> Fast {
        // Read before the probe: a removal after it makes the entry stale (`pair_cache`).
        let epoch = pair_cache::epoch();
        // SAFETY: the borrow ends with this function.
        let Some(p) = (unsafe { pair_cache::probe(self.inner.serial, epoch, n.0, h.0) }) else {
            return Fast::Miss;
        };
        if WAIT && !p.waitable {
            // A notify of another device or server: the table's path says why not.
            return Fast::Miss;
        }
        let job = || match WAIT {
            false => SimJob::Record {
                pin: p.pin,
                pid: self.inner.pid,
            },
            true => SimJob::Wait {
                pin: p.pin,
                timeout,
            },
        };
        let Some(claim) = p.stream.claim_fast() else {
            // Nothing claimed: the usual way.
            return Fast::Miss;
        };
        let ticket = claim.ticket();
        // The pin's check after the claim (`claim_pinned`, `crate::pin`), the job made in
        // each branch: made before and handed through, it was copied three times.
        if pair_cache::epoch() == epoch {
            p.stream.publish(claim, job());
        } else {
            let refused = Cell::new(false);
            p.stream
                .publish(claim, self.reclaim_pinned(job(), n, h, &refused));
            if refused.get() {
                return Fast::Refused;
            }
        }
        // A record is published in the wait-for graph (one store; see `waitgraph`), noted
        // with the tickets issued through its own.
        if !WAIT && let Some((notes, base)) = p.notes {
            // SAFETY: the graph is this `Sim`'s (`inner.graph`), and `self` lives.
            unsafe { notes.note(base, ticket + 1) };
        }
        Fast::Queued
    }

    /// [`enqueue_pair`](Self::enqueue_pair) after a record or wait was queued during which a
    /// fault was handled (none before it): as `checked`, the call fails if a file it uses
    /// was found cut short. Out of line.
    #[cold]
    #[inline(never)]
    fn fault_during_call(&self) -> Result<(), SimError> {
        self.notify_lost_file().map_or(Ok(()), Err)
    }

    /// [`enqueue_pair`](Self::enqueue_pair) through the tables: the notify's pin under the
    /// notify table's lock, the stream under the stream table's, the pair kept in the
    /// thread's cache; again while the pin goes before the task's claim (`crate::pin`).
    #[inline(never)]
    pub(crate) fn enqueue_pair_slow(
        &self,
        n: RawNotify,
        h: RawStream,
        wait: Option<Option<Duration>>,
    ) -> Result<(), SimError> {
        self.checked(|| {
            self.notify_calls()?;
            loop {
                // Read before the lookups: a removal after them makes the entry stale.
                let epoch = pair_cache::epoch();
                let (pin, name) = match self.pin_from_table(n, h) {
                    Ok(found) => found,
                    Err(e) => {
                        return match wait {
                            None => self.record_remote(n, h).unwrap_or(Err(e)),
                            Some(_) => Err(self.not_waitable_remote(n).unwrap_or(e)),
                        };
                    }
                };
                let job = match wait {
                    None => SimJob::Record {
                        pin,
                        pid: self.inner.pid,
                    },
                    Some(timeout) => SimJob::Wait { pin, timeout },
                };
                let waitable = |e: &StreamEntry| {
                    name.server == self.inner.server_id && name.device == e.device
                };
                let check = |e: &StreamEntry, _: &SimJob| match wait {
                    Some(_) if !waitable(e) => Err(self.wrong_device_of(name.target(), e.device)),
                    _ => Ok(()),
                };
                let refused = Cell::new(false);
                let claim = |j| self.claim_pinned(j, epoch, n, h, &refused);
                let cache = PairKey {
                    epoch,
                    notify: n,
                    pin,
                    name,
                    waitable: &waitable,
                };
                let target = wait.is_none().then_some(name);
                self.enqueue_uncached(h, job, Some(cache), (target, &refused), check, claim)?;
                if !refused.get() {
                    return Ok(());
                }
            }
        })
    }

    /// A record or wait (or another job: `cache` `None`) queued under the stream table's read
    /// lock, the pair kept in the thread's cache if `cache` says how. `note`: the notify a
    /// record sets, noted in the wait-for graph once queued unless `claim` refused the job
    /// (the flag). A full queue is waited for outside the lock.
    fn enqueue_uncached(
        &self,
        h: RawStream,
        job: SimJob,
        cache: Option<PairKey<'_>>,
        note: (Option<NotifyName>, &Cell<bool>),
        check: impl FnOnce(&StreamEntry, &SimJob) -> Result<(), SimError>,
        mut claim: impl FnMut(SimJob) -> SimJob,
    ) -> Result<(), SimError> {
        let noted = || note.0.filter(|_| !note.1.get()).map(NotifyName::target);
        let (s, job, graph) = {
            let t = read(&self.inner.streams);
            let e = t.get(h.0).ok_or_else(|| bad_stream(h))?;
            if let Some(k) = cache {
                let found = pair_cache::Found {
                    stream: &e.stream,
                    pin: k.pin,
                    name: k.name,
                    waitable: (k.waitable)(e),
                    notes: e.graph.as_ref().map(|g| g.rec_notes()),
                };
                pair_cache::put(self.inner.serial, k.epoch, k.notify.0, h.0, found);
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

    /// Marks the removal of stream handles for the threads' pair caches; called right after
    /// the removal (the streams unlisted), under the stream table's write lock, before the
    /// stream is destroyed. The handle epoch's bump makes every pair cache entry and every
    /// record or wait between its pin lookup and its claim look the pin up again, which skips
    /// the pins of unlisted streams (`NotifyEntry::pin`): a stream handle's value comes back
    /// once its slot's generation has wrapped, and a pin found under it must be the new
    /// stream's.
    pub(crate) fn streams_removed(&self) {
        pair_cache::removed();
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
        let stream = self.spawn_stream(name, device)?;
        #[cfg(test)]
        if self.inner.force_parking.load(Ordering::Relaxed) {
            stream.force_parking();
        }
        let graph = self.publish_stream(&stream, device);
        let stream = Arc::new(stream);
        let hooked = Arc::clone(&stream);
        // A device's default streams share the device's scope slot; another stream starts
        // bound to none (`crate::failure_scope`).
        let scope = match self.inner.default_scopes.get(device as usize) {
            Some(slot) if default => Arc::clone(slot),
            _ => Arc::default(),
        };
        let h = write(&self.inner.streams)
            .insert(StreamEntry {
                stream,
                device,
                default,
                graph: graph.clone(),
                scope: Arc::clone(&scope),
            })
            .ok()
            .map(RawStream)
            .ok_or_else(|| err(Error::ResourceAllocFail, "stream table is full"))?;
        if let Some(g) = graph {
            g.set_handle(h.0);
        }
        // Before any task can be queued (the handle is not out yet); a new stream has no hook
        // yet, so it cannot be refused.
        let _ = hooked.on_failure(self.inner.failures.hook(device, h, default, scope));
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
        // A notify wait of this server: what the notify's slot says of who could record it
        // (owner, whitelist, last recorder, holders, alive or dead), as a wait's timeout does.
        let facts = graph
            .as_ref()
            .and_then(|g| g.head_target())
            .filter(|t| {
                t.kind == waitgraph::TargetKind::Notify && t.server == self.inner.file.server()
            })
            .and_then(|t| {
                let slot = self.inner.file.slot(t.device, t.id)?;
                Some(crate::diag::notify_facts(
                    &self.inner.file,
                    t.device,
                    t.id,
                    slot,
                ))
            });
        let head = graph
            .and_then(|g| g.describe_head())
            .map(|h| h + facts.as_deref().unwrap_or(""))
            .or_else(|| {
                let note = s.blocked_on();
                (note != 0).then(|| Blocked::describe(note).trim_start_matches("is ").to_owned())
            });
        let stored = s.stored_error();
        let mut text = String::new();
        if s.is_stopped() {
            text.push_str(
                "it is stopped (aclrtStreamStop): its tasks do not run until aclrtStreamAbort \
                 drops them",
            );
        } else if let Some(h) = head {
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

    /// [`host_function_waits`](crate::host_function_waits) of the host functions that stream
    /// `stream` runs (its head, when it is [`Head::HostFunction`]): empty when none of them is
    /// blocked, or when `stream` is not a live stream of this `Sim`.
    pub fn host_function_waits_on(&self, stream: RawStream) -> Vec<Option<Duration>> {
        let key = {
            let t = read(&self.inner.streams);
            match t.get(stream.0) {
                Some(e) => e.stream.key(),
                None => return Vec::new(),
            }
        };
        crate::job::host_function_waits_of(key)
    }

    /// A synchronize of stream `s` (handle `stream`) reached its limit `deadline` with tasks
    /// left. CANN's device fails a wait at its timeout whatever the host does, and its
    /// synchronize answers 507046 only when its time is up with no report in: a report that
    /// came first, a wait's timeout among them, is processed and answered (hicann/runtime
    /// `src/runtime/core/src/engine/stars/stars_engine.cc`, the task-wait loop:
    /// `RT_ERROR_STREAM_SYNC_TIMEOUT` only when `remainTime == 0` and `cnt == 0`). Here the
    /// stream's thread keeps its waits' timeouts, and a loaded machine or a paused process
    /// may run it late: while the head task is a wait whose timeout came before `deadline`,
    /// the synchronize gives the thread up to its own `limit` again, at most
    /// [`OVERDUE_GRACE`], to fail it and go on, and answers what the stream then says (the
    /// wait's code once every task has run); a poll (`limit` 0) does not wait. `None` when
    /// the head is no such wait, or still is one after the grace and a last look of at most
    /// [`OVERDUE_AFTER`] begun once the grace has ended (a process paused through the grace's
    /// end is judged by what its stream's thread does when both run again): the caller's
    /// 507046 stands.
    #[cold]
    pub(crate) fn sync_past_overdue_waits(
        &self,
        s: &SimStream,
        stream: RawStream,
        deadline: std::time::Instant,
        limit: Duration,
    ) -> Option<Result<(), SimError>> {
        let grace = limit.min(OVERDUE_GRACE);
        if grace.is_zero() {
            return None;
        }
        let graph = read(&self.inner.streams).get(stream.0)?.graph.clone()?;
        let mut grace_end = std::time::Instant::now().checked_add(grace)?;
        let mut granted = false;
        // The overdue wait's task once it has retired.
        let mut retired = None;
        // Whether the grace's last look (below) has begun.
        let mut last_look = false;
        loop {
            let now = std::time::Instant::now();
            if now >= grace_end {
                // The grace is wall time, and this process may have been paused (SIGSTOP, a
                // debugger, a starved VM) through its end: then this thread and the stream's
                // come back due at once, and the answer is what the stream's thread does once
                // it runs again, not how long the pause took. One last look, of at most
                // OVERDUE_AFTER from now, in which the thread may fail the wait and go on.
                if last_look || !granted {
                    return None;
                }
                last_look = true;
                grace_end = now + OVERDUE_AFTER;
            }
            #[cfg(test)]
            OVERDUE_LOOKS.with(|n| n.set(n.get() + 1));
            match graph.head_wait_overdue() {
                // Due before the synchronize's limit (overdue by more than the limit is past):
                // asleep until the thread has failed it (its task retired), no polling.
                Some((overdue, task))
                    if overdue >= now.saturating_duration_since(deadline)
                        && retired != Some(task) =>
                {
                    granted = true;
                    if s.wait_task_retired(task, grace_end) {
                        // A note still naming it next time is stale: taken as gone.
                        retired = Some(task);
                    }
                    continue;
                }
                // A stale note of the wait that has retired: as gone, below.
                Some((_, t)) if retired == Some(t) => {
                    grace_end = grace_end.min(now + OVERDUE_AFTER);
                }
                // A wait due after the limit, or no overdue wait to begin with: 507046.
                Some(_) => return None,
                None if !granted => return None,
                // The overdue wait is gone: the thread failed it (its head note cleared before
                // the task is counted) and goes on; what follows has a short while to finish.
                None => grace_end = grace_end.min(now + OVERDUE_AFTER),
            }
            let left = grace_end.saturating_duration_since(now);
            match s.synchronize(SyncWait::AtMost(left)) {
                Err(e) if e.kind() == Error::StreamSyncTimeout && e.message().is_empty() => {}
                r => return Some(r),
            }
        }
    }

    /// What stream `stream` is doing, for a caller that waits for it to run its queued tasks
    /// and must tell a stream that makes progress from one that waits for something else
    /// (`aclFinalize`); `None` when it is not a live stream of this `Sim`.
    pub fn stream_head(&self, stream: RawStream) -> Option<StreamHead> {
        let (s, graph) = {
            let t = read(&self.inner.streams);
            let e = t.get(stream.0)?;
            (Arc::clone(&e.stream), e.graph.clone())
        };
        let published = graph.and_then(|g| g.head_wait_left());
        let head = match Blocked::from_note(s.blocked_on()) {
            _ if let Some(left) = published => Head::Waiting { left },
            Some(Blocked::Wait { forever, .. } | Blocked::CntWait { forever, .. }) => {
                Head::Waiting {
                    // How long a timed one has left is not known: as one that ends at once.
                    left: (!forever).then_some(Duration::ZERO),
                }
            }
            Some(Blocked::HostFunction) => Head::HostFunction,
            Some(Blocked::ValueWait { .. }) => Head::Waiting { left: None },
            None => Head::Running,
        };
        let stats = s.stats();
        Some(StreamHead {
            enqueued: stats.enqueued,
            completed: stats.completed,
            discarded: stats.discarded,
            head,
        })
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
    pub(crate) fn enqueue_job_with(
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

/// What a stream is doing ([`Sim::stream_head`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamHead {
    /// Tasks queued on it so far.
    pub enqueued: u64,
    /// Tasks it has dropped unrun so far (a discarding destroy, an abort).
    pub discarded: u64,
    /// Tasks it has run so far.
    pub completed: u64,
    /// What its head task does.
    pub head: Head,
}

/// What a stream's head task does ([`StreamHead`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Sleeps in a wait (a notify's, a count notify's, an event's or an IPC event's) until a
    /// record comes, or until its timeout, `left` from now (`None`: no timeout).
    Waiting { left: Option<Duration> },
    /// Runs a host function (which may itself be blocked: [`Sim::host_function_waits_on`]).
    HostFunction,
    /// Runs something else, or nothing (idle).
    Running,
}

//! Putting tasks on a stream's queue: the lock-free fast path into the ring and the slow
//! path that waits for room in a full queue (or, from the stream's own worker, grows it).

use std::sync::PoisonError;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use acl_notify_core::Error;

use super::{Job, Stream, Task, TaskCtx, drop_quietly, lock};
use crate::ring::{Claimed, Push};

impl<E: From<Error> + Send + 'static, J: Job<E>> Stream<E, J> {
    /// Queues `task`; returns once it is queued (waiting for room if the queue is full).
    ///
    /// Codes: 107017 (`InvalidHandle`) the stream is being or has been destroyed; 507002
    /// (`StreamTaskFull`) the queue stayed full for the whole
    /// [`enqueue_timeout`](super::StreamConfig::enqueue_timeout). Either way the task is dropped
    /// unrun.
    pub fn enqueue<F>(&self, task: F) -> Result<(), E>
    where
        F: FnOnce(&TaskCtx) -> Result<(), E> + Send + 'static,
        J: From<Task<E>>,
    {
        self.enqueue_job(J::from(Box::new(task)))
    }

    /// [`enqueue`](Self::enqueue) for an already boxed task.
    ///
    /// Codes: as [`enqueue`](Self::enqueue).
    pub fn enqueue_boxed(&self, task: Task<E>) -> Result<(), E>
    where
        J: From<Task<E>>,
    {
        self.enqueue_job(J::from(task))
    }

    /// [`enqueue`](Self::enqueue) for a job of the stream's own job type (no allocation).
    ///
    /// Codes: as [`enqueue`](Self::enqueue).
    pub fn enqueue_job(&self, task: J) -> Result<(), E> {
        self.enqueue_job_with(task, |t| t)
    }

    /// [`enqueue_job`](Self::enqueue_job) that hands the job to `on_claim` the moment its
    /// ticket is claimed (after a sequentially consistent read-modify-write of the queue's
    /// tail) and queues what `on_claim` returns instead. Called exactly once if the job is
    /// queued, never otherwise. It must not panic or block: the worker waits for the ticket
    /// meanwhile. For a job that uses a value through a plain pointer whose owner may let it
    /// go once the tasks issued so far have run ([`Keeper::keep_until_done`](super::Keeper::keep_until_done)): `on_claim`
    /// checks that the value was not let go before the claim, and swaps the job for another
    /// if it was.
    ///
    /// Codes: as [`enqueue`](Self::enqueue).
    pub fn enqueue_job_with(&self, task: J, mut on_claim: impl FnMut(J) -> J) -> Result<(), E> {
        let s = &*self.shared;
        match s.ring.push_with(task, &mut on_claim) {
            Push::Queued { wake } => {
                if wake {
                    self.wake_worker();
                }
                Ok(())
            }
            Push::Full(task) => self.enqueue_slow(task, on_claim),
            Push::Closed(task) | Push::Spill(_, task) => {
                drop_quietly(task);
                Err(E::from(Error::InvalidHandle))
            }
        }
    }

    /// Tasks queued so far (tickets issued, taken or not): read right after a task was
    /// queued, at least that task's number plus one ([`TaskCtx::task_number`]).
    #[inline]
    pub fn issued(&self) -> u64 {
        self.shared.ring.issued()
    }

    /// [`enqueue_job`](Self::enqueue_job) that never waits: a full queue hands the job back
    /// (`Err`), for a caller that holds a lock it must not keep while it waits for room.
    /// Otherwise `Ok` with what `enqueue_job` would have returned.
    #[inline]
    pub fn try_enqueue_job(&self, task: J) -> Result<Result<(), E>, J> {
        self.try_enqueue_job_with(task, |t| t)
    }

    /// The common case of [`try_enqueue_job_with`](Self::try_enqueue_job_with)'s claim, for
    /// a hot caller (`Ring::claim_fast`): `None` in every other case (a full or closed queue,
    /// another producer's claim first), nothing claimed, for the caller to queue its task the
    /// usual way. The caller publishes its task at once ([`Stream::publish`]).
    #[inline(always)]
    pub(crate) fn claim_fast(&self) -> Option<Claimed<'_, J>> {
        self.shared.ring.claim_fast()
    }

    /// Publishes `task` as the ticket `claim` ([`claim_fast`](Self::claim_fast)), waking the
    /// worker if it slept.
    #[inline(always)]
    pub(crate) fn publish(&self, claim: Claimed<'_, J>, task: J) {
        if claim.publish(task) {
            self.wake_worker();
        }
    }

    /// [`try_enqueue_job`](Self::try_enqueue_job) with an `on_claim` as
    /// [`enqueue_job_with`](Self::enqueue_job_with)'s (not called when the job is handed
    /// back).
    #[inline]
    pub fn try_enqueue_job_with(
        &self,
        task: J,
        on_claim: impl FnOnce(J) -> J,
    ) -> Result<Result<(), E>, J> {
        match self.shared.ring.push_with(task, on_claim) {
            Push::Queued { wake } => {
                if wake {
                    self.wake_worker();
                }
                Ok(Ok(()))
            }
            Push::Full(task) => Err(task),
            Push::Closed(task) | Push::Spill(_, task) => {
                drop_quietly(task);
                Ok(Err(E::from(Error::InvalidHandle)))
            }
        }
    }

    #[cold]
    fn wake_worker(&self) {
        self.shared.wakeups.fetch_add(1, Ordering::Relaxed);
        self.shared.control.unpark_worker();
    }

    /// `enqueue` into a full queue: from the worker itself the task is queued past the
    /// capacity; from any other thread it waits for room, at most `enqueue_timeout`, looking
    /// again at least every [`RECHECK`].
    #[cold]
    #[inline(never)]
    fn enqueue_slow(&self, mut task: J, mut on_claim: impl FnMut(J) -> J) -> Result<(), E> {
        let s = &*self.shared;
        if s.control.on_worker() {
            // Waiting for room would wait for ourselves.
            return match s.ring.taker().push_own(task, &mut on_claim) {
                Push::Queued { .. } => Ok(()),
                Push::Closed(task) | Push::Full(task) | Push::Spill(_, task) => {
                    drop_quietly(task);
                    Err(E::from(Error::InvalidHandle))
                }
            };
        }
        let until = s
            .enqueue_timeout
            .and_then(|t| Instant::now().checked_add(t));
        // First spin, for as long as the worker takes to free half the queue (see
        // `ROOM_SPIN`); then sleep until it has.
        let half = (s.capacity / 2) as u64;
        if !s.spin.is_zero()
            && s.room_spin.as_ref().is_some_and(|may| (may.0)())
            && super::worker::spin_until(ROOM_SPIN, || s.ring.has_room(half) || s.ring.is_closed())
        {
            task = match self.try_enqueue_job_with(task, &mut on_claim) {
                Ok(done) => return done,
                // Taken by another producer meanwhile: wait the sleeping way.
                Err(task) => task,
            };
        }
        let mut g = lock(&s.room);
        // Dekker handshake with `Shared::next`: announce, then look at the slots.
        s.blocked.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let result = loop {
            task = match self.try_enqueue_job_with(task, &mut on_claim) {
                Ok(done) => break done,
                Err(task) => task,
            };
            // Woken by the worker once the queue is down to half (`Shared::next`), else
            // after `RECHECK`: a stream that stalls with the queue more than half full (a
            // task waiting for something this thread has yet to queue elsewhere) has room
            // that no wake-up announces.
            let now = Instant::now();
            let nap = match until {
                None => RECHECK,
                Some(until) => {
                    let left = until.saturating_duration_since(now);
                    if left.is_zero() {
                        drop_quietly(task);
                        break Err(E::from(Error::StreamTaskFull));
                    }
                    left.min(RECHECK)
                }
            };
            g = s
                .not_full
                .wait_timeout(g, nap)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        s.blocked.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

/// How long a producer that finds the queue full spins before it sleeps, looking for half the
/// queue free (what the worker wakes a sleeping producer for, `Shared::next`), yielding the
/// CPU between looks and giving up early when a yield shows another thread wants this CPU
/// (`worker::spin_until`, as every spin of the engine); only when the stream's
/// `StreamConfig::room_spin_if` says a CPU is free for it (the simulator's streams: fewer busy
/// stream workers in the namespace than the spin budget, `crate::enqueue`), and not at all
/// when the stream may not spin (a spin budget of 0).
///
/// Why: the worker's wake-up of a sleeping producer puts it on the worker's CPU on this
/// project's 2-vCPU KVM machine (the kernel wakes a thread beside its waker; see
/// `crate::placement`), and the two then take turns there while the other CPU idles. In the
/// 4-stream pipeline bench, whose host keeps a queue full, that was the slow mode of its
/// samples: the runner preempted by the host 400–1,000 times a sample, both CPUs 20–60 %
/// idle, 1.1–1.5 M items/s against 1.7–1.9 M with the two apart; the runner's move away
/// (`placement::runner_tick`) did not part them, the host's next wake-up put it beside the
/// runner again within 0.1 ms (ftrace, `bench/README.md` History, speed23). A producer that
/// spins is not woken, and stays where it is: 1.31 → 1.87 M items/s (medians of four
/// alternations). Half a queue of the pipeline's records and waits takes the runner 60–130 µs.
const ROOM_SPIN: Duration = Duration::from_micros(250);

/// The longest a producer waiting for room sleeps before it looks at the queue again. The
/// worker wakes it only once the queue is down to half its capacity (`Shared::next`: one
/// wake-up per half a queue, not per batch taken); this bounds how late it sees room in a
/// queue that stopped draining above that (until 2026-12-05 it then slept for its whole
/// `enqueue_timeout`, 60 s by default, and failed). Ten wake-ups a second of a thread that
/// is blocked anyway cost next to nothing; with 1 ms the pipeline bench (whose host waits
/// on full queues all the time) read 7–8 % slower in four alternations (1.42–1.46 against
/// 1.55–1.57 M items/s), with 10 ms and with 1 s as before.
const RECHECK: Duration = Duration::from_millis(10);

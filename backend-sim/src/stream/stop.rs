//! A stopped stream (`aclrtStreamStop`): its worker runs none of its tasks. The running one is
//! cut short as an abort cuts it (its failure is not stored; a wait parked on the runner is
//! the running one too, dropped with its place in the notify's queue: `Shared::keep_stopped`;
//! a notify wait cut short consumes nothing: one that takes its record once the stop has
//! begun gives it back, and one that starts then takes no place, `crate::waiters::give_back`;
//! a clearing count-notify wait puts back the count it cleared, `crate::cnt::Cleared`),
//! the queued ones and those queued later are kept, unrun, until an abort ([`Stream::abort`]: they are dropped and the
//! stream runs again) or a destroy (they are discarded, a `Drain` included: they will never
//! run, so a destroy that waited for them would wait for ever).
//!
//! CANN (hicann/runtime `src/runtime/core/src/stream/stream.cc` `Stream::StreamStop`, and
//! `src/runtime/core/src/context/context.cc` `Context::StreamClear` with `RT_STREAM_STOP`):
//! the task scheduler stops the stream's submission queue, whose tasks are not cleaned (the
//! API page, `docs/zh/api_ref/06_stream_management.md`: it stops the running task only and
//! does not clean the tasks); the runtime's own stream state (its abort status) is not
//! touched, so later launches are accepted and a synchronize waits for tasks that do not run.
//! `Stream::StreamAbort` cleans the queue and puts the stream back in its normal state.
//!
//! The hook in the worker is one: the per-task load of `Shared::halted` that the
//! stop-on-failure mode already paid; a stopped stream's worker waits in
//! [`Shared::wait_while_stopped`] (woken by the abort's or the destroy's unpark).

use std::sync::atomic::Ordering;
use std::thread;

use acl_notify_core::{Error, StreamDestroy};

use super::worker::{HALT_STOPPED, Shared};
use super::{Job, OPEN, Stream};

impl<E: From<Error> + Send + 'static, J: Job<E>> Stream<E, J> {
    /// Stops the stream (`aclrtStreamStop`): the running task is interrupted as
    /// [`abort`](Self::abort) interrupts it (its failure is not stored), and no task runs
    /// from here on — those queued and those queued later are kept, unrun (`queued` and
    /// [`query`](Self::query) count them; a [`synchronize`](Self::synchronize) waits for them
    /// until its deadline) — until an [`abort`](Self::abort) drops them and the stream runs
    /// again, or a destroy discards them. Returns at once; stopping a stopped stream again
    /// changes nothing.
    ///
    /// Codes: 107017 the stream is being or has been destroyed.
    pub fn stop(&self) -> Result<(), E> {
        let s = &*self.shared;
        {
            // `state` changes under the consumer's lock, and `destroy_mode` reads the bit there.
            let _k = s.ring.taker();
            if s.state.load(Ordering::Relaxed) != OPEN {
                return Err(E::from(Error::InvalidHandle));
            }
            s.halted.fetch_or(HALT_STOPPED, Ordering::SeqCst);
        }
        // The running task: cut short (the bit is up first, so its failure is not stored).
        s.control.interrupt();
        Ok(())
    }

    /// Whether the stream is stopped ([`stop`](Self::stop)) and not aborted since.
    pub fn is_stopped(&self) -> bool {
        self.shared.is_stopped()
    }
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Shared<E, J> {
    pub(super) fn is_stopped(&self) -> bool {
        self.halted.load(Ordering::SeqCst) & HALT_STOPPED != 0
    }

    /// Whether the worker keeps the task it took, unrun: the stream is stopped and not
    /// discarded (a discard drops it).
    #[cold]
    pub(super) fn keeps_stopped(&self) -> bool {
        self.is_stopped() && !self.control.cancelled.load(Ordering::SeqCst)
    }

    /// The stream's own thread waits while the stream stays stopped: until an abort lowers
    /// the bit or a discard cancels the stream (both unpark this thread after; the park token
    /// keeps an unpark that comes between the check and the park). Out of the busy count
    /// meanwhile, as any blocked worker.
    #[cold]
    #[inline(never)]
    pub(super) fn wait_while_stopped(&self) {
        crate::shm::blocked(|| {
            while self.keeps_stopped() {
                thread::park();
            }
        });
    }
}

/// The mode a destroy asked for `mode` goes by: a `Drain` of a stopped stream is a
/// `Discard`. Called under the ring's consumer lock, under which [`Stream::stop`] sets the bit.
pub(super) fn destroy_mode<E, J: Job<E>>(s: &Shared<E, J>, mode: StreamDestroy) -> StreamDestroy
where
    E: From<Error> + Send + 'static,
{
    if s.is_stopped() {
        StreamDestroy::Discard
    } else {
        mode
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::thread;
    use std::time::{Duration, Instant};

    use acl_notify_core::{Error, StreamDestroy, StreamStatus, SyncWait};

    use crate::stream::tests::{count_on, eventually};
    use crate::stream::{Stream, StreamConfig};

    type S = Stream<Error>;

    const LONG: Duration = Duration::from_secs(20);

    /// Queues a task that says it started, then sleeps (cancellably) for [`LONG`] and fails
    /// if cut short: the failure a stop must not store.
    /// Queues a task on `s` that sleeps [`LONG`]; the flags: it started, and its sleep was
    /// cut short.
    fn sleeper(s: &S) -> (Arc<AtomicBool>, Arc<AtomicBool>) {
        let started = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        let (st, c) = (Arc::clone(&started), Arc::clone(&cut));
        s.enqueue(move |ctx| {
            st.store(true, Ordering::SeqCst);
            ctx.sleep(LONG).map_err(|_| {
                c.store(true, Ordering::SeqCst);
                Error::InternalError
            })
        })
        .unwrap();
        (started, cut)
    }

    #[test]
    fn a_stopped_stream_keeps_its_tasks_unrun_until_an_abort_drops_them() {
        let s = S::spawn(StreamConfig::new("stop-keep")).unwrap();
        let (started, cut) = sleeper(&s);
        assert!(eventually(LONG, || started.load(Ordering::SeqCst)));
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            count_on(&s, &ran);
        }
        s.stop().unwrap();
        assert!(s.is_stopped());
        // The sleeping task was cut short (it would sleep 20 s): the stream's completions
        // count it, and nothing after it ran. (Its sleep says so, where the wall time from the
        // stop, under 20 s, stood until 2026-12-07.)
        assert!(eventually(LONG, || s.stats().completed == 1));
        assert!(cut.load(Ordering::SeqCst), "the sleep was not cut short");
        for _ in 0..2 {
            count_on(&s, &ran);
        }
        thread::sleep(Duration::from_millis(30));
        assert_eq!(ran.load(Ordering::SeqCst), 0, "a stopped stream ran a task");
        assert_eq!(s.query(), StreamStatus::NotReady);
        assert_eq!(
            s.synchronize(SyncWait::AtMost(Duration::from_millis(30))),
            Err(Error::StreamSyncTimeout)
        );
        // Stopping again changes nothing.
        s.stop().unwrap();
        assert_eq!(s.stats().completed, 1);
        // The abort drops the five kept tasks, and the stream runs again; the cut-short
        // task's failure was the stop's, not stored.
        s.abort().unwrap();
        assert!(!s.is_stopped());
        assert_eq!(s.synchronize(SyncWait::AtMost(LONG)), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        assert_eq!(s.stats().discarded, 5);
        count_on(&s, &ran);
        assert_eq!(s.synchronize(SyncWait::AtMost(LONG)), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        s.destroy(StreamDestroy::Drain).unwrap();
    }

    #[test]
    fn a_synchronize_waiting_on_a_stopped_stream_returns_at_the_abort() {
        let s = Arc::new(S::spawn(StreamConfig::new("stop-sync")).unwrap());
        s.stop().unwrap();
        let ran = Arc::new(AtomicUsize::new(0));
        count_on(&s, &ran);
        let waiter = {
            let s = Arc::clone(&s);
            thread::spawn(move || s.synchronize(SyncWait::Forever))
        };
        thread::sleep(Duration::from_millis(30));
        assert!(
            !waiter.is_finished(),
            "a synchronize returned with a task kept"
        );
        s.abort().unwrap();
        assert!(eventually(LONG, || waiter.is_finished()));
        assert_eq!(waiter.join().unwrap(), Ok(()));
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_destroy_of_a_stopped_stream_discards_its_tasks_and_what_they_hold() {
        for mode in [StreamDestroy::Drain, StreamDestroy::Discard] {
            let s = S::spawn(StreamConfig::new("stop-destroy")).unwrap();
            let ran = Arc::new(AtomicUsize::new(0));
            count_on(&s, &ran);
            assert_eq!(s.synchronize(SyncWait::AtMost(LONG)), Ok(()));
            s.stop().unwrap();
            let held = Arc::new(());
            for _ in 0..4 {
                let (r, h) = (Arc::clone(&ran), Arc::clone(&held));
                s.enqueue(move |_| {
                    let _h = &h;
                    r.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
                .unwrap();
            }
            let t = Instant::now();
            assert_eq!(s.destroy(mode), Ok(()), "{mode:?}");
            assert!(
                t.elapsed() < LONG,
                "hang guard: the destroy ({mode:?}) of a stopped stream took {:?}",
                t.elapsed()
            );
            assert!(s.has_exited());
            assert_eq!(ran.load(Ordering::SeqCst), 1, "{mode:?}: a kept task ran");
            assert_eq!(
                Arc::strong_count(&held),
                1,
                "{mode:?}: a kept task was not freed"
            );
            assert_eq!(s.stats().discarded, 4);
            assert_eq!(s.stop(), Err(Error::InvalidHandle));
        }
    }
}

//! The simulator's failed tasks, as CANN reports them: each task of a simulator stream that
//! fails (a wait that times out, a copy that finds its memory gone, a task that panics…) is
//! told to the listener the owner set ([`Sim::on_task_failure`]), with what CANN's exception
//! record holds (`rtExceptionInfo`: device, stream, task, thread, code; `TaskFailCallBack` in
//! hicann/runtime `src/runtime/core/src/task/task_info/task_manager.cc`). The C library keeps
//! its `aclrtSetExceptionInfoCallback` there. Built on the stream engine's failure hook
//! (`crate::stream::failure`): nothing on any task's success path.
//!
//! As CANN, which tells its callbacks from the threads that read the device's reports
//! (`DeviceErrorProc::ProcessReportFastRingBuffer`, `Engine::ReportStatusFailProc` in
//! `src/runtime/core/src/device/v200_base/device_error_proc.cc` and `engine/engine.cc`), never
//! from the device's stream: the stream's worker hands each failure to this `Sim`'s reporting
//! thread (one, made at the first failure with a listener set, so the failures are told in
//! the order they happened) and goes on. So a listener may synchronize any stream, the failed
//! one included. A synchronize that reports a task's failure returns once the listener was
//! told of every failure handed over before it (unless it is called from the listener, or
//! from a host function, which would then wait for itself).

use std::cell::Cell;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use acl_notify_core::{BackendError, Error, RawStream};

use crate::error::SimError;
use crate::failure_scope::ScopeSlot;
use crate::stream::FailureHook;

/// A failed task ([`Sim::on_task_failure`](crate::Sim::on_task_failure)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskFailure {
    /// The device of its stream.
    pub device: u32,
    /// Its stream.
    pub stream: RawStream,
    /// Whether that is a device's default stream.
    pub default: bool,
    /// Its number on the stream (counted from 0), as CANN's 32-bit task id.
    pub task: u32,
    /// The kernel thread id of the thread that queued on the stream last (`crate::submitted`).
    pub thread: u32,
    /// What it failed with: the code the stream's next synchronize reports, if it is the first.
    pub error: Error,
}

/// What is told of each failed task.
pub type FailureListener = Arc<dyn Fn(&TaskFailure) + Send + Sync>;

/// A failure on its way to the reporting thread, with the listener set when it happened.
type Report = (FailureListener, TaskFailure);

thread_local! {
    /// On a reporting thread: the address of its `Sim`'s [`Told`] (0 elsewhere).
    static REPORTING_FOR: Cell<usize> = const { Cell::new(0) };
}

/// How many failures were handed to the reporting thread, and how many it has told; and the
/// thread, while there is one.
#[derive(Default)]
struct Told {
    counts: Mutex<(u64, u64)>,
    changed: Condvar,
    reporter: Mutex<Option<Reporter>>,
}

/// How long the reporting thread waits for another failure before it ends (the next failure
/// makes a new one): a `Sim` with nothing failing keeps no thread of its own.
const IDLE: Duration = Duration::from_millis(100);

/// The reporting thread: where failures are sent, and the thread to join.
struct Reporter {
    send: Sender<Report>,
    thread: JoinHandle<()>,
}

/// A `Sim`'s listener and reporting thread, shared with its streams' hooks.
#[derive(Default)]
pub(crate) struct Failures {
    listener: RwLock<Option<FailureListener>>,
    told: Arc<Told>,
}

impl Failures {
    /// The hook of stream `h` on `device` (a default stream or not), telling its failures
    /// to the failure scope it is bound to (`scope`: `crate::failure_scope`), then handing
    /// them to the reporting thread.
    pub(crate) fn hook(
        self: &Arc<Self>,
        device: u32,
        h: RawStream,
        default: bool,
        scope: Arc<ScopeSlot>,
    ) -> FailureHook<SimError> {
        let failures = Arc::clone(self);
        Box::new(move |f| {
            scope.task_failed(h, f.error);
            let listener = failures
                .listener
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(listener) = listener {
                failures.hand_over(
                    listener,
                    TaskFailure {
                        device,
                        stream: h,
                        default,
                        task: f.task as u32,
                        thread: f.thread as u32,
                        error: f.error.kind(),
                    },
                );
            }
        })
    }

    /// Sends `failure` to the reporting thread (made now if there is none yet). If no thread
    /// can be made, the listener is told here, on the stream's thread, rather than never.
    #[cold]
    fn hand_over(&self, listener: FailureListener, failure: TaskFailure) {
        let mut reporter = self
            .told
            .reporter
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if reporter.is_none() {
            let (send, receive) = std::sync::mpsc::channel();
            let told = Arc::clone(&self.told);
            let made = std::thread::Builder::new()
                .name("acl-notify-failures".into())
                .spawn(move || report(&told, &receive));
            match made {
                Ok(thread) => *reporter = Some(Reporter { send, thread }),
                Err(_) => {
                    drop(reporter);
                    listener(&failure);
                    return;
                }
            }
        }
        let Some(r) = reporter.as_ref() else {
            return;
        };
        // Counted before it is sent, under the lock that orders the sends: a synchronize
        // that sees the failure stored finds it counted.
        self.told
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0 += 1;
        if r.send.send((listener, failure)).is_err() {
            // The thread is gone (it cannot end while `send` lives): count it told.
            self.told.tell_one();
        }
    }

    /// Sets or removes the listener ([`Sim::on_task_failure`](crate::Sim::on_task_failure)).
    pub(crate) fn set(&self, listener: Option<FailureListener>) {
        *self
            .listener
            .write()
            .unwrap_or_else(PoisonError::into_inner) = listener;
    }

    /// Waits until the listener was told of every failure handed over so far, or `deadline`
    /// passes. Returns at once on the reporting thread itself or in a host function (a
    /// listener that waits for that host function's stream would then wait for it).
    #[cold]
    pub(crate) fn settle(&self, deadline: Option<Instant>) {
        let me = Arc::as_ptr(&self.told) as usize;
        if REPORTING_FOR.with(Cell::get) == me || crate::job::in_host_function() {
            return;
        }
        let mut counts = self
            .told
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let target = counts.0;
        while counts.1 < target {
            counts = match deadline {
                None => self
                    .told
                    .changed
                    .wait(counts)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(d) => {
                    let Some(left) = d.checked_duration_since(Instant::now()) else {
                        return;
                    };
                    self.told
                        .changed
                        .wait_timeout(counts, left)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0
                }
            };
        }
    }
}

impl Told {
    fn tell_one(&self) {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner).1 += 1;
        self.changed.notify_all();
    }
}

/// The reporting thread's loop: tells each failure, in the order sent, until the `Sim` is gone
/// or none came for [`IDLE`]. It ends holding the lock the senders send under, after a last
/// look at the channel, so that no failure is sent to a thread that is ending.
fn report(told: &Arc<Told>, receive: &Receiver<Report>) {
    REPORTING_FOR.with(|r| r.set(Arc::as_ptr(told) as usize));
    loop {
        let next = match receive.recv_timeout(IDLE) {
            Ok(r) => r,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let mut slot = told.reporter.lock().unwrap_or_else(PoisonError::into_inner);
                match receive.try_recv() {
                    Ok(r) => r,
                    Err(_) => {
                        // Its own handle is dropped here: the thread detaches and ends.
                        *slot = None;
                        return;
                    }
                }
            }
        };
        let (listener, failure) = next;
        // A listener that panics does not end the reporting of the next failures.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(&failure)));
        told.tell_one();
    }
}

impl Drop for Failures {
    /// Ends the reporting thread after it told what it was sent (unless this runs on it: a
    /// listener that dropped the last reference to its `Sim`).
    fn drop(&mut self) {
        let reporter = self
            .told
            .reporter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Reporter { send, thread }) = reporter {
            drop(send);
            if REPORTING_FOR.with(Cell::get) != Arc::as_ptr(&self.told) as usize {
                let _ = thread.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use acl_notify_core::{
        BackendError, CreateFlags, Error, NotifyResources, Soc, StreamOps, SyncWait, Timeout,
    };

    use super::TaskFailure;
    use crate::NamespaceGuard;

    #[test]
    fn a_wait_that_times_out_is_told_with_its_stream_task_thread_and_code() {
        let name = format!("unit-taskfail-{}", std::process::id());
        let (sim, _ns) = NamespaceGuard::open_sim(name, Soc::Ascend910B, 2).unwrap();
        let seen: Arc<Mutex<Vec<TaskFailure>>> = Arc::default();
        let into = Arc::clone(&seen);
        sim.on_task_failure(Some(Arc::new(move |f: &TaskFailure| {
            into.lock().unwrap().push(*f);
        })));
        let n = sim.create_notify(1, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(1).unwrap();
        sim.record(n, s).unwrap();
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        assert!(
            seen.lock().unwrap().is_empty(),
            "tasks that succeeded were told"
        );
        sim.wait_and_reset(n, s, Timeout::from_c(1)).unwrap();
        assert_eq!(
            sim.synchronize(s, SyncWait::Forever).unwrap_err().kind(),
            Error::TaskTimeout
        );
        // SAFETY: gettid(2) has no preconditions.
        let me = unsafe { libc::gettid() } as u32;
        assert_eq!(
            *seen.lock().unwrap(),
            [TaskFailure {
                device: 1,
                stream: s,
                default: false,
                task: 2,
                thread: me,
                error: Error::TaskTimeout,
            }]
        );
        assert_eq!(crate::thread_last_task(), 2);
        sim.on_task_failure(None);
        sim.wait_and_reset(n, s, Timeout::from_c(1)).unwrap();
        let _ = sim.synchronize(s, SyncWait::Forever);
        assert_eq!(seen.lock().unwrap().len(), 1, "a removed listener was told");
    }

    /// The listener runs off the streams' threads: one that synchronizes the failed stream,
    /// or a stream that waits for the failed one, gets its answer (it got 507000, "called from
    /// this very stream", and waited out the other stream's wait while it held the failed
    /// stream's thread, until 2026-12-06); the failures are told in the order they happened.
    #[test]
    fn a_listener_may_synchronize_the_failed_stream_and_the_streams_behind_it() {
        let name = format!("unit-taskfail-sync-{}", std::process::id());
        let (sim, _ns) = NamespaceGuard::open_sim(name, Soc::Ascend910B, 1).unwrap();
        let (a, b) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
        let (never, go) = (
            sim.create_notify(0, CreateFlags::empty()).unwrap(),
            sim.create_notify(0, CreateFlags::empty()).unwrap(),
        );
        type Told = (u32, Result<(), Error>, Result<(), Error>);
        let (tx, rx) = std::sync::mpsc::channel::<Told>();
        let tx = Mutex::new(tx);
        let in_listener = sim.clone();
        let bound = SyncWait::AtMost(Duration::from_secs(20));
        sim.on_task_failure(Some(Arc::new(move |f: &TaskFailure| {
            let own = in_listener
                .synchronize(f.stream, bound)
                .map_err(|e| e.kind());
            let behind = in_listener.synchronize(b, bound).map_err(|e| e.kind());
            let _ = tx.lock().unwrap().send((f.task, own, behind));
        })));
        // b waits for a record that a queues after its failed wait.
        sim.wait_and_reset(go, b, Timeout::Forever).unwrap();
        sim.wait_and_reset(never, a, Timeout::from_c(1)).unwrap();
        sim.record(go, a).unwrap();
        sim.wait_and_reset(never, a, Timeout::from_c(1)).unwrap();
        let mut told = Vec::new();
        for _ in 0..2 {
            told.push(
                rx.recv_timeout(Duration::from_secs(60))
                    .expect("the listener is stuck"),
            );
        }
        sim.on_task_failure(None);
        let (tasks, own): (Vec<u32>, Vec<_>) = told.iter().map(|t| (t.0, t.1)).unzip();
        assert_eq!(tasks, [0, 2], "{told:?}");
        for r in own {
            assert!(
                matches!(r, Ok(()) | Err(Error::TaskTimeout)),
                "the failed stream's synchronize in the listener: {told:?}"
            );
        }
        assert!(told.iter().all(|t| t.2.is_ok()), "stream b: {told:?}");
        // With nothing failing, the reporting thread ends (a device reset or aclFinalize
        // that counts the process's threads finds none left over).
        let ended = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            sim.inner.failures.told.reporter.lock().unwrap().is_none()
        });
        assert!(ended, "the reporting thread is still there after 5 s idle");
    }
}

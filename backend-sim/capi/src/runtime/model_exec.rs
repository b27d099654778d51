//! Executions and destroys of model runtime instances (`aclmdlRIExecute[Async]`,
//! `aclmdlRIDestroy`, a device's release): queueing one replay of a ready model on a stream
//! (all its tasks, or the driver of `flow` when they branch), counting the executions in
//! flight, and releasing a model's streams and events when it goes (`capture`'s module doc).

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use acl_notify_core::{Error, EventOps, HostCall, StreamDestroy, StreamOps, SyncWait};

use super::Runtime;
use super::cond::refuse_sub;
use super::model::{Model, Phase, Replay, bad_model};
use crate::errmsg::{CallError, param};

/// How long a destroy waits for a model's executions to finish (`Context::ModelDestroy`:
/// 10,000 checks 1 ms apart).
const DESTROY_WAIT: Duration = Duration::from_secs(10);

/// Decrements an execution count when the execution's last task has run or was discarded.
///
/// # Safety
///
/// `arg` is an `Arc<AtomicU32>` made by `Arc::into_raw`, used once.
unsafe extern "C" fn finished(arg: *mut c_void) {
    // SAFETY: the caller's contract.
    let running = unsafe { Arc::from_raw(arg.cast_const().cast::<AtomicU32>()) };
    running.fetch_sub(1, Ordering::AcqRel);
}

/// [`finished`] as a discard function.
///
/// # Safety
///
/// As [`finished`].
unsafe fn finished_unrun(arg: *mut c_void) {
    // SAFETY: passed on.
    unsafe { finished(arg) }
}

impl Runtime {
    pub(super) fn drop_replay(&self, replay: &Replay) {
        if replay.owned() {
            for &s in &replay.streams {
                let _ = self.destroy_stream(s, StreamDestroy::Discard);
            }
        }
        self.drop_replay_events(replay);
    }

    /// Destroys the model's own events.
    pub(super) fn drop_replay_events(&self, replay: &Replay) {
        let raws = replay.events.iter().map(|&(_, raw)| raw);
        for raw in raws.chain(replay.joins.iter().copied()) {
            let _ = self.backend.event_destroy(raw);
        }
        let _ = self.backend.event_destroy(replay.start);
        let _ = self.backend.event_destroy(replay.done);
    }

    pub(super) fn tear_down(&self, model: &Model) {
        if let Phase::Ready(r) = &model.phase {
            self.drop_replay(r);
        }
        if let Some(s) = model.exec_stream {
            let _ = self.destroy_stream(s, StreamDestroy::Discard);
        }
    }

    /// At the release of the devices `which` names (a device reset, `aclFinalize`): their
    /// models go, captures running or not, as a context's teardown destroys its models in
    /// CANN (hicann/runtime `model.cc`, `Model::TearDown`, which runs the destroy callbacks).
    /// Their streams are the release's to discard (it already removed their handles); their
    /// handles are dead from now on (107017), and a stream that was capturing captures no
    /// more (the capture counter drops with it).
    pub(crate) fn drop_models_where(&self, which: &impl Fn(u32) -> bool) {
        let gone: Vec<Model> = {
            let mut st = self.captures.lock();
            let ids: Vec<usize> = st
                .models
                .values()
                .filter(|m| which(m.device))
                .map(|m| m.handle)
                .collect();
            // Their conditions' words went with the devices' memory.
            Self::drop_conds_of(&mut st, &ids);
            ids.into_iter()
                .filter_map(|id| {
                    self.release_streams(&mut st, id);
                    st.models.remove(id)
                })
                .collect()
        };
        for m in gone {
            self.forget_task_handles(&m);
            if let Phase::Ready(r) = &m.phase {
                self.drop_replay_events(r);
            }
            for &(f, data) in &m.on_destroy {
                // SAFETY: the caller registered `f` to be called with `data` at the destroy.
                unsafe { f(data as *mut c_void) };
            }
        }
    }

    /// `aclmdlRIExecuteAsync`: queues one replay on `stream`.
    pub(crate) fn execute_async(&self, handle: usize, stream: usize) -> Result<(), CallError> {
        self.model_live(handle)?;
        let exec = self.resolve_task_stream(stream)?;
        let replay = {
            let st = self.captures.lock();
            let m = st.models.get(handle).ok_or_else(|| bad_model(handle))?;
            if m.destroying {
                return Err(bad_model(handle));
            }
            refuse_sub(m, "aclmdlRIExecuteAsync")?;
            match &m.phase {
                Phase::Ready(r) => {
                    Self::all_bound(m, handle)?;
                    if r.streams.contains(&stream) {
                        return Err(param(format!(
                            "stream {stream:#x} is a stream of model {handle:#x} itself"
                        )));
                    }
                    if r.branches {
                        self.write_cond_defaults(&st, handle)?;
                    }
                    r.running.fetch_add(1, Ordering::AcqRel);
                    Arc::clone(r)
                }
                Phase::Capturing { .. } => {
                    return Err(CallError::new(
                        Error::ModelCaptured,
                        format!("model {handle:#x} is still being captured"),
                    ));
                }
                Phase::Building { .. } => {
                    return Err(param(format!(
                        "model {handle:#x} is being built: end the build with aclmdlRIBuildEnd \
                         first"
                    )));
                }
                Phase::Empty => return Err(bad_model(handle)),
            }
        };
        let arg = Arc::into_raw(Arc::clone(&replay.running))
            .cast_mut()
            .cast::<c_void>();
        // SAFETY: `finished` takes the reference `arg` holds, once, from any thread.
        let done = unsafe { HostCall::with_discard(finished, arg, finished_unrun) };
        let issued = if replay.branches {
            self.execute_flow(&replay, exec)
        } else {
            self.issue(&replay, exec)
        };
        // Counted as running until the stream has run (or dropped) what was queued.
        match self.backend.launch_host_func(exec, done) {
            Ok(()) => issued,
            Err(e) => issued.and(Err(CallError::backend(e))),
        }
    }

    /// `aclmdlRIExecute`: one replay on the model's own stream, waited for at most `timeout`
    /// ms (-1: for ever; 0 and below -1: 107000, `ApiErrorDecorator::ModelExecute`).
    pub(crate) fn execute(&self, handle: usize, timeout: i32) -> Result<(), CallError> {
        let wait = match timeout {
            -1 => SyncWait::Forever,
            t if t > 0 => SyncWait::AtMost(Duration::from_millis(t as u64)),
            t => {
                return Err(param(format!(
                    "timeout {t}: -1 (no limit) or a number of milliseconds above 0"
                )));
            }
        };
        self.model_live(handle)?;
        let existing = self
            .captures
            .lock()
            .models
            .get(handle)
            .and_then(|m| m.exec_stream);
        let stream = match existing {
            Some(s) => s,
            None => {
                let s = self.create_stream()?;
                let mut st = self.captures.lock();
                match st.models.get_mut(handle) {
                    Some(m) if m.exec_stream.is_none() => {
                        m.exec_stream = Some(s);
                        s
                    }
                    Some(m) => {
                        let other = m.exec_stream.unwrap_or(s);
                        drop(st);
                        let _ = self.destroy_stream(s, StreamDestroy::Discard);
                        other
                    }
                    None => {
                        drop(st);
                        let _ = self.destroy_stream(s, StreamDestroy::Discard);
                        return Err(bad_model(handle));
                    }
                }
            }
        };
        self.execute_async(handle, stream)?;
        self.synchronize(stream, wait)
    }

    /// `aclmdlRIDestroy`: waits (at most 10 s) for the model's executions, runs its destroy
    /// callbacks, releases its streams and events.
    pub(crate) fn destroy_model(&self, handle: usize) -> Result<(), CallError> {
        let running = {
            let mut st = self.captures.lock();
            let m = st.models.get_mut(handle).ok_or_else(|| bad_model(handle))?;
            if m.destroying {
                return Err(bad_model(handle));
            }
            refuse_sub(m, "aclmdlRIDestroy")?;
            let running = match &m.phase {
                Phase::Ready(r) => Arc::clone(&r.running),
                // Its bound streams are the caller's again (CANN unbinds them at the destroy).
                Phase::Building { .. } | Phase::Empty => Arc::new(AtomicU32::new(0)),
                Phase::Capturing { .. } => {
                    return Err(CallError::new(
                        Error::ModelCaptured,
                        format!("model {handle:#x} is still being captured"),
                    ));
                }
            };
            m.destroying = true;
            if matches!(m.phase, Phase::Building { .. }) {
                self.release_streams(&mut st, handle);
            }
            running
        };
        let deadline = Instant::now() + DESTROY_WAIT;
        while running.load(Ordering::Acquire) != 0 {
            if Instant::now() >= deadline {
                if let Some(m) = self.captures.lock().models.get_mut(handle) {
                    m.destroying = false;
                }
                return Err(CallError::new(
                    Error::ModelRunning,
                    format!(
                        "model {handle:#x} still has {} executions queued after {DESTROY_WAIT:?}",
                        running.load(Ordering::Acquire)
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let model = self.captures.lock().models.remove(handle);
        if let Some(m) = model {
            self.forget_task_handles(&m);
            self.tear_down(&m);
            self.forget_conds(m.handle);
            for &(f, data) in &m.on_destroy {
                // SAFETY: the caller registered `f` to be called with `data` at the destroy.
                unsafe { f(data as *mut c_void) };
            }
        }
        Ok(())
    }
}

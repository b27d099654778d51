//! Replays of a model's stored tasks: what one execution queues on the model's streams when
//! its tasks do not branch (all of them at once, between the model's start and done events,
//! `capture`'s module doc), and how each stored task is queued again, for that replay and
//! for the blocks an execution with control flow queues (`model_flow`).

use std::sync::PoisonError;

use acl_notify_core::{Error, EventOps, RawEvent, RawStream, StreamOps, Timeout};

use super::Runtime;
use super::capture::Captured;
use super::model::Replay;
use crate::errmsg::CallError;

impl Runtime {
    /// Queues `replay`'s tasks, the origin's on `exec`.
    pub(super) fn issue(&self, replay: &Replay, exec: RawStream) -> Result<(), CallError> {
        let _one_at_a_time = replay
            .issuing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut raws = Vec::with_capacity(replay.streams.len());
        for &s in &replay.streams {
            raws.push(self.stream(s)?.raw);
        }
        let origin = raws[0];
        let b = &self.backend;
        let gate = |from: RawStream, to: RawStream, e: RawEvent| {
            b.event_record(e, from)
                .and_then(|()| b.stream_wait_event(to, e, Timeout::Forever))
                .map_err(CallError::backend)
        };
        if replay.joins.is_empty() {
            gate(exec, origin, replay.start)?;
        } else {
            // A built model: every bound stream starts with the execution.
            b.event_record(replay.start, exec)
                .map_err(CallError::backend)?;
            for &s in &raws {
                b.stream_wait_event(s, replay.start, Timeout::Forever)
                    .map_err(CallError::backend)?;
            }
        }
        let tasks = replay.tasks();
        for &(i, t) in tasks.iter() {
            self.issue_one(replay, raws[i], t)?;
        }
        for (&s, &e) in raws[1..].iter().zip(&replay.joins) {
            gate(s, origin, e)?;
        }
        gate(origin, exec, replay.done)
    }

    /// Queues replayed task `t` of `replay` on `s`.
    pub(super) fn issue_one(
        &self,
        replay: &Replay,
        s: RawStream,
        t: Captured,
    ) -> Result<(), CallError> {
        let b = &self.backend;
        let event = |e: usize| {
            replay
                .events
                .iter()
                .find(|(u, _)| *u == e)
                .map(|&(_, raw)| raw)
                .ok_or_else(|| CallError::new(Error::InternalError, "internal error: no event"))
        };
        let r = match t {
            Captured::Memcpy {
                dst,
                dest_max,
                src,
                count,
                kind,
            } => {
                // SAFETY: the capture's caller keeps the host sides valid for the model's
                // life (CANN's rule 7 of capture: resources stay valid until the model is
                // destroyed).
                unsafe { b.memcpy_async(dst, dest_max, src, count, kind, s) }
                    .map_err(CallError::backend)
            }
            Captured::Memset {
                dst,
                max,
                value,
                count,
            } => b
                .memset_async(dst, max, value, count, s)
                .map_err(CallError::backend),
            Captured::NotifyRecord(n) => b.record(n, s).map_err(CallError::backend),
            Captured::NotifyWait(n, t) => b.wait_and_reset(n, s, t).map_err(CallError::backend),
            Captured::EventRecord(e) => b.event_record(event(e)?, s).map_err(CallError::backend),
            Captured::EventWait(e, t) => b
                .stream_wait_event(s, event(e)?, t)
                .map_err(CallError::backend),
            // The model's events are Ex events, which have no reset (the replay failed with
            // 207000 here before): each wait pairs with the latest record queued before it,
            // so the flag a reset clears for the next round (CANN's captured reset writes
            // it to 0, `GetCaptureResetTaskParams`) is never read. A wait after a reset and
            // before any new record would wait for ever in CANN; here it pairs with the
            // record before the reset.
            Captured::EventReset(e) => event(e).map(|_| ()),
            Captured::ExternalRecord(_) | Captured::ExternalWait(_) => self.external(t, s),
            Captured::ValueWrite { addr, value } => {
                b.value_write(addr, value, s).map_err(CallError::backend)
            }
            Captured::ValueWait { addr, value, cond } => b
                .value_wait(addr, value, cond, s)
                .map_err(CallError::backend),
            Captured::Control(c) => Err(CallError::new(
                Error::InternalError,
                format!("internal error: {} queued as a task", c.name()),
            )),
        };
        r.map_err(|e| e.in_context(&format!("replaying {}", t.name())))
    }
}

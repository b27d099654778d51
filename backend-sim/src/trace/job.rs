//! The simulator's stream jobs with the timeline on: each record, wait and host function
//! becomes a complete event on its stream's track, records numbered on the notify's slot and
//! waits noting the number they saw (see [`super::merge`]). Reached only when
//! [`super::on`]; out of line, and given the job's parts rather than the job, so that the
//! plain path stays as it was.

use std::time::Duration;

use acl_notify_core::{BackendError, HostCall};
use serde_json::{Value, json};

use crate::SimError;
use crate::job::SimJob;
use crate::pin::{PinRef, StreamPin};
use crate::stream::TaskCtx;

/// The key that names a notify incarnation across processes (server, device, id, generation).
fn key(pin: &StreamPin) -> String {
    let r = &pin.0;
    format!(
        "{}/{}/{}/{}",
        r.file().server(),
        r.device(),
        r.id(),
        r.generation()
    )
}

fn code(r: &Result<(), SimError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => e.kind().code(),
    }
}

fn notify_args(pin: &StreamPin, r: &Result<(), SimError>) -> Value {
    json!({
        "notify_key": key(pin),
        "notify": pin.0.id(),
        "device": pin.0.device(),
        "result": code(r),
    })
}

type Out = (Result<(), SimError>, ());

/// `job` as the timeline follows it: a boxed task (the worker's generic path) that runs it
/// and writes it down. Wrapped when it is queued, so the worker's path for plain records and
/// waits has no timeline check at all: a check there, even a branch on a static flag,
/// cost the record+wait pair about 10 ns (a fifth) in the benchmark. As a boxed task it
/// may block, so the worker retires what ran before it first (`before_block` is then empty)
/// and a traced record does not chain.
#[cold]
#[inline(never)]
pub(crate) fn traced(job: SimJob) -> SimJob {
    // An event record writes its own span, and stays a job of its own kind (its stream hands
    // it the failure it may be dropped behind).
    if matches!(job, SimJob::EventRecord(_)) {
        return job;
    }
    SimJob::Other(Box::new(move |ctx: &TaskCtx| {
        let before_block = &mut || {};
        match job {
            SimJob::Record { pin, pid } => record(pin, pid, ctx, before_block).0,
            SimJob::Wait { pin, timeout } => wait(pin, timeout, ctx, before_block).0,
            SimJob::Host(call) => host(call, ctx, before_block).0,
            other => other.run_plain(ctx, before_block).0,
        }
    }))
}

/// A record, timed and written to the timeline: numbered on the notify's slot before it
/// lands (a wait that takes it reads at least this number back).
fn record(pin: PinRef, pid: i32, ctx: &TaskCtx, before_block: &mut dyn FnMut()) -> Out {
    // SAFETY: run by the worker as this task, before it retires (see `SimJob::run_plain`).
    let p = unsafe { pin.get() };
    let t0 = super::now_ns();
    let seq = p.0.slot().trace_record_seq();
    let out = SimJob::Record { pin, pid }.run_plain(ctx, before_block);
    let t1 = super::now_ns();
    let mut args = notify_args(p, &out.0);
    args["seq"] = json!(seq);
    let name = format!("record notify {}", p.0.id());
    super::complete("notify", &name, t0, t1.saturating_sub(t0), args);
    out
}

/// A wait, timed and written to the timeline with the record number it saw once it had
/// taken the flag (see the merge module).
fn wait(
    pin: PinRef,
    timeout: Option<Duration>,
    ctx: &TaskCtx,
    before_block: &mut dyn FnMut(),
) -> Out {
    // SAFETY: as in `record`.
    let p = unsafe { pin.get() };
    let t0 = super::now_ns();
    let out = SimJob::Wait { pin, timeout }.run_plain(ctx, before_block);
    let seen = p.0.slot().trace_seq();
    let t1 = super::now_ns();
    let mut args = notify_args(p, &out.0);
    args["seen"] = json!(seen);
    let name = format!("wait notify {}", p.0.id());
    super::complete("notify", &name, t0, t1.saturating_sub(t0), args);
    out
}

/// A host function, timed and written to the timeline.
fn host(call: Box<HostCall>, ctx: &TaskCtx, before_block: &mut dyn FnMut()) -> Out {
    let t0 = super::now_ns();
    let out = SimJob::Host(call).run_plain(ctx, before_block);
    let t1 = super::now_ns();
    let args = json!({"result": code(&out.0)});
    super::complete("host", "host function", t0, t1.saturating_sub(t0), args);
    out
}

impl crate::Sim {
    /// Names stream `h`'s track in the timeline by its handle (the C library renames it with
    /// the handle its callers see, through `set_stream_alias`).
    #[cold]
    pub(crate) fn name_track(&self, h: acl_notify_core::RawStream) {
        let t = crate::locks::read(&self.inner.streams);
        if let Some(e) = t.get(h.0) {
            super::name_track(
                e.stream.worker_tid(),
                super::stream_name(h.0, e.device, e.default),
            );
        }
    }
}

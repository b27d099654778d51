//! The simulator's stream jobs with the timeline on: each record, wait and host function
//! becomes a complete event on its stream's track, records numbered on the notify's slot and
//! waits noting the number they saw (see [`super::merge`]). Reached only when
//! [`super::on`]; kept out of line so the plain path stays as it was.

use std::sync::Arc;

use acl_notify_core::BackendError;
use serde_json::{Value, json};

use crate::SimError;
use crate::entries::StreamPin;
use crate::job::SimJob;
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

impl SimJob {
    /// [`SimJob::run_plain`], timed and written to the timeline.
    #[cold]
    #[inline(never)]
    pub(crate) fn run_traced(
        self,
        ctx: &TaskCtx,
        before_block: &mut dyn FnMut(),
    ) -> (Result<(), SimError>, Option<Arc<StreamPin>>) {
        let t0 = super::now_ns();
        match &self {
            SimJob::Record { pin, .. } => {
                let pin = Arc::clone(pin);
                // Numbered before it lands: a wait that takes it reads at least this number.
                let seq = pin.0.slot().trace_record_seq();
                let out = self.run_plain(ctx, before_block);
                let t1 = super::now_ns();
                let mut args = notify_args(&pin, &out.0);
                args["seq"] = json!(seq);
                let name = format!("record notify {}", pin.0.id());
                super::complete("notify", &name, t0, t1.saturating_sub(t0), args);
                out
            }
            SimJob::Wait { pin, .. } => {
                let pin = Arc::clone(pin);
                let out = self.run_plain(ctx, before_block);
                // Read right after the flag was taken (see the merge module).
                let seen = pin.0.slot().trace_seq();
                let t1 = super::now_ns();
                let mut args = notify_args(&pin, &out.0);
                args["seen"] = json!(seen);
                let name = format!("wait notify {}", pin.0.id());
                super::complete("notify", &name, t0, t1.saturating_sub(t0), args);
                out
            }
            SimJob::Host(_) => {
                let out = self.run_plain(ctx, before_block);
                let t1 = super::now_ns();
                let args = json!({"result": code(&out.0)});
                super::complete("host", "host function", t0, t1.saturating_sub(t0), args);
                out
            }
            // Boxed tasks (memory copies, events, …) write their own spans.
            SimJob::Other(_) => self.run_plain(ctx, before_block),
        }
    }
}

impl crate::Sim {
    /// Names stream `h`'s track in the timeline by its handle (the C library renames it with
    /// the handle its callers see, through `set_stream_alias`).
    #[cold]
    pub(crate) fn name_track(&self, h: acl_notify_core::RawStream) {
        let t = crate::sim::read(&self.inner.streams);
        if let Some(e) = t.get(h.0) {
            super::name_track(
                e.stream.worker_tid(),
                super::stream_name(h.0, e.device, e.default),
            );
        }
    }
}

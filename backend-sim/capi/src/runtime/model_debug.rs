//! A model's description for debugging (`aclmdlRIDebugPrint`, `aclmdlRIDebugJsonPrint`): its
//! streams, in order, and each stream's stored tasks with their arguments, control tasks and
//! labels included. The formats are the simulator's own (CANN's are its firmware task
//! descriptors, hicann/runtime `src/runtime/feature/aclgraph/model_aclgraph.cc`
//! `Model::ModelDebugDotPrint`/`ModelDebugJsonPrint`):
//!
//! - text, one line per item (`aclmdlRIDebugPrint`, to standard error):
//!   `model <id> device <d> <phase> streams <n> tasks <n>`, then per stream
//!   `stream <i> <handle> head|started tasks <n>`, then its tasks
//!   `  task <seq> <call> <arguments>` (`seq`: the task's place among the model's tasks,
//!   `aclmdlRITaskGetSeqId`'s; an `aclrtSetLabel` is a task whose argument is the label);
//! - JSON (`aclmdlRIDebugJsonPrint`, to the file `path`): a Chrome trace-event array, one
//!   complete event per task (`"ph": "X"`, `"pid"` the model id, `"tid"` the stream's index,
//!   `"ts"` the task's place on its stream, `"dur"` 1, `"name"` the call, `"args"` with
//!   `"seq"`, `"stream"` (its handle, hex), `"task"` (the arguments) and, once
//!   `aclrtCacheLastTaskExtendInfo` gave the task some, `"extend_info"` (its bytes as text,
//!   invalid UTF-8 replaced)), so
//!   `chrome://tracing` shows each stream's tasks in order, as CANN's page suggests.
//!
//! CANN's checks (`src/acl/aclrt_impl/model_ri.cpp`: NULL model or path 100000;
//! `api_c_standard_soc.cc` `rtModelDebugDotPrint`/`JsonPrint`: the SoCs with ACL Graph, else
//! 207000; `model_aclgraph.cc`: a path that cannot be opened 107000); the API page allows
//! printing after the capture's end: a model still captured is 107026.

use acl_notify_core::Error;

use super::Runtime;
use super::model::{Model, Phase};
use crate::errmsg::{CallError, param};

impl Runtime {
    /// The stored tasks of live model `handle`, for printing, after CANN's checks.
    fn described<R>(&self, handle: usize, f: impl FnOnce(&Model) -> R) -> Result<R, CallError> {
        self.require(acl_notify_core::Feature::ModelCapture)?;
        self.current()?;
        self.with_model(handle, |m| {
            if matches!(m.phase, Phase::Capturing { .. }) {
                return Err(CallError::new(
                    Error::ModelCaptured,
                    format!("model {handle:#x} is still being captured: end the capture first"),
                ));
            }
            Ok(f(m))
        })
    }

    /// `aclmdlRIDebugPrint`: the text description, written to standard error.
    pub(crate) fn debug_print(&self, handle: usize) -> Result<String, CallError> {
        self.described(handle, text)
    }

    /// `aclmdlRIDebugJsonPrint`: the JSON description written to `path` (`flags` unused).
    pub(crate) fn debug_json_print(&self, handle: usize, path: &str) -> Result<(), CallError> {
        let doc = self.described(handle, json)?;
        std::fs::write(path, doc)
            .map_err(|e| param(format!("path {path:?} cannot be written: {e}")))
    }
}

/// Each stream's tasks: (stream index, [(seq, call, arguments)]). The tasks
/// `aclrtPersistentTaskClean` dropped are no longer their stream's (`persistent_clean`).
fn per_stream(m: &Model) -> Vec<Vec<(usize, &'static str, String)>> {
    let mut out = vec![Vec::new(); m.streams.len()];
    for (seq, (i, t)) in m.tasks.iter().enumerate() {
        if m.cleaned(seq) {
            continue;
        }
        if let Some(s) = out.get_mut(*i) {
            s.push((seq, t.name(), format!("{t:?}")));
        }
    }
    out
}

fn phase(m: &Model) -> &'static str {
    match m.phase {
        Phase::Capturing { .. } => "capturing",
        Phase::Building { .. } => "building",
        Phase::Ready(_) => "ready",
        Phase::Empty => "empty (a conditional task's sub-model not captured yet)",
    }
}

fn text(m: &Model) -> String {
    let streams = per_stream(m);
    let mut s = format!(
        "model {} device {} {} streams {} tasks {}\n",
        m.number,
        m.device,
        phase(m),
        m.streams.len(),
        streams.iter().map(Vec::len).sum::<usize>()
    );
    for (i, tasks) in streams.iter().enumerate() {
        let head = if m.heads.get(i).copied().unwrap_or(true) {
            "head"
        } else {
            "started"
        };
        s += &format!(
            "stream {i} {:#x} {head} tasks {}\n",
            m.streams[i],
            tasks.len()
        );
        for (seq, call, args) in tasks {
            s += &format!("  task {seq} {call} {args}\n");
        }
    }
    s
}

fn json(m: &Model) -> String {
    let events: Vec<serde_json::Value> = per_stream(m)
        .into_iter()
        .enumerate()
        .flat_map(|(i, tasks)| {
            let stream = format!("{:#x}", m.streams[i]);
            tasks
                .into_iter()
                .enumerate()
                .map(move |(at, (seq, call, args))| {
                    let mut event = serde_json::json!({
                        "name": call, "ph": "X", "pid": m.number, "tid": i, "ts": at, "dur": 1,
                        "args": {"seq": seq, "stream": stream, "task": args},
                    });
                    // As CANN's trace adds "ExtendInfo" (`stream.cc`): the bytes as text.
                    if let Some(extend) = m.task_info.get(&seq).and_then(|t| t.extend.as_ref()) {
                        event["args"]["extend_info"] =
                            String::from_utf8_lossy(extend).into_owned().into();
                    }
                    event
                })
        })
        .collect();
    serde_json::Value::Array(events).to_string()
}

//! Models built on bound streams (`aclmdlRIBuildBegin`, `aclmdlRIBindStream`,
//! `aclmdlRIEndTask`, `aclmdlRIBuildEnd`, `aclmdlRIUnbindStream`): the other way to make a
//! model runtime instance than stream capture (`capture`), sharing its state, its stored
//! calls and its replay. Between a stream's bind and the build's end, the calls that queue a
//! task on the stream store it in the model instead of running it (the same calls a capture
//! stores; others are refused with 107005); each execution replays them.
//!
//! CANN's rules followed (hicann/runtime `src/acl/aclrt_impl/model_ri.cpp`,
//! `src/runtime/api/impl/api_error.cc` `ApiErrorDecorator::ModelBindStream`/`UnbindStream`/
//! `LoadComplete`/`ModelEndGraph`, `src/runtime/feature/model/model.cc` `Model::BindStream`,
//! `CheckBindStream`, `UnbindStream`, and the API pages of
//! `docs/zh/api_ref/15_model_running_instance__management.md`):
//!
//! - a captured model takes no bind, unbind, end task or build end: 107000 ("ACL Graph mode
//!   is not supported"); a capturing stream is not bound or unbound: 107027;
//! - a stream bound to a model already is not bound again: 107005 (`ACL_ERROR_RT_STREAM_MODEL`);
//!   unbinding or ending a stream not bound to that model: 107005;
//! - the build's flag is unused (`ApiImpl::ModelCreate`); the bind's `ACL_MODEL_STREAM_FLAG_HEAD`
//!   (0) makes the stream one that starts with each execution, `ACL_MODEL_STREAM_FLAG_DEFAULT`
//!   one that a task of the model starts (`model_flow`); on the Ascend 950 chips only a
//!   stream made with `ACL_STREAM_PERSISTENT` is bound (107000), as the API page asks of
//!   every stream.
//!
//! The simulator's own choices (CANN's model streams run on its task scheduler, whose rules
//! are not public source): a bind flag other than those two is refused with 107000; without
//! control tasks every head stream starts with each execution and the execution ends when
//! all of them have run (joined back to the first bound); a task queued on a stream after
//! its `aclmdlRIEndTask` is refused (107000: it would not run in the model); a bound stream is
//! not synchronized, queried or destroyed while the model is built (107005); the build's end
//! needs a bound stream (107000). After the build's end the bound streams stay the model's
//! (`aclmdlRIGetStreams` lists them) and each execution queues on them; an unbound one takes
//! the caller's tasks again, and a model with a stream unbound no longer executes (107005).

use acl_notify_core::{Backend as _, Error, Soc, StreamOps};

use super::Runtime;
use super::capture::{InCapture, State};
use super::model::{Model, Phase, bad_model};
use crate::errmsg::{CallError, param};

/// `ACL_MODEL_STREAM_FLAG_HEAD`.
const HEAD: u32 = 0;
/// `ACL_MODEL_STREAM_FLAG_DEFAULT`: a stream a task of the model starts (`model_flow`).
const STARTED: u32 = 0x7FFF_FFFF;
/// `ACL_STREAM_PERSISTENT`.
const PERSISTENT: u32 = 0x4;

fn graph_model(handle: usize, what: &str) -> CallError {
    param(format!(
        "{what}: model {handle:#x} was made by stream capture (ACL Graph mode is not supported: \
         only a model of aclmdlRIBuildBegin takes bound streams)"
    ))
}

fn not_bound(stream: usize, handle: usize) -> CallError {
    CallError::new(
        Error::StreamModel,
        format!("stream {stream:#x} is not bound to model {handle:#x} (aclmdlRIBindStream)"),
    )
}

impl Runtime {
    /// Whether model `model` is being built (for the stream checks of `capture`).
    pub(super) fn building(&self, model: usize) -> bool {
        self.building_in(&self.captures.lock(), model)
    }

    /// [`building`](Self::building) under the state's lock.
    pub(super) fn building_in(&self, st: &State, model: usize) -> bool {
        st.models
            .get(model)
            .is_some_and(|m| matches!(m.phase, Phase::Building { .. }))
    }

    /// The model of `aclmdlRIBuildBegin` that `stream` is bound to, being built or built
    /// (CANN's stream bind flag, `Stream::GetBindFlag`), if any.
    pub(crate) fn bound_model(&self, stream: usize) -> Option<usize> {
        let st = self.captures.lock();
        st.models
            .values()
            .find(|m| match &m.phase {
                Phase::Building { .. } => m.streams.contains(&stream),
                Phase::Ready(r) if !r.owned() => r.streams.contains(&stream),
                _ => false,
            })
            .map(|m| m.handle)
    }

    /// The refusal of a call that names a stream bound to model `model` being built and that
    /// the model cannot store.
    pub(super) fn bound_refusal(&self, stream: usize, model: usize) -> CallError {
        CallError::new(
            Error::StreamModel,
            format!(
                "stream {stream:#x} is bound to model {model:#x}, which is being built: until \
                 aclmdlRIBuildEnd it takes only the tasks the model stores (aclrtMemcpyAsync, \
                 aclrtMemsetAsync, aclrtRecordNotify, aclrtWaitAndResetNotify, \
                 aclrtRecordEvent, aclrtStreamWaitEvent, aclrtResetEvent, aclrtValueWrite, \
                 aclrtValueWait) and cannot be synchronized, queried or destroyed"
            ),
        )
    }

    /// `aclmdlRIBuildBegin`: a new empty model of the current device (`flag` unused, as
    /// CANN's).
    pub(crate) fn build_begin(&self, _flag: u32) -> Result<usize, CallError> {
        self.require(acl_notify_core::Feature::ModelBuild)?;
        let (device, _) = self.current()?;
        let mut st = self.captures.lock();
        let phase = Phase::Building { ended: Vec::new() };
        let m = st.add_model(device, Vec::new(), phase)?;
        Ok(m.handle)
    }

    /// The model `handle` names, for a call that needs it being built (`what` names the
    /// call): 107000 for a captured model or one whose build ended.
    fn built_model<'a>(
        &self,
        st: &'a mut State,
        handle: usize,
        what: &str,
    ) -> Result<&'a mut Model, CallError> {
        let m = st.models.get_mut(handle).ok_or_else(|| bad_model(handle))?;
        match &m.phase {
            Phase::Building { .. } => Ok(m),
            Phase::Capturing { .. } => Err(graph_model(handle, what)),
            Phase::Ready(r) if r.owned() => Err(graph_model(handle, what)),
            Phase::Empty => Err(graph_model(handle, what)),
            Phase::Ready(_) => Err(param(format!(
                "{what}: the build of model {handle:#x} has ended (aclmdlRIBuildEnd)"
            ))),
        }
    }

    /// `aclmdlRIBindStream`.
    pub(crate) fn bind_stream(
        &self,
        handle: usize,
        stream: usize,
        flag: u32,
    ) -> Result<(), CallError> {
        let entry = self.stream(stream)?;
        self.resolve_stream_any(stream)?;
        let mut st = self.captures.lock();
        if let Some(c) = st.streams.get(&stream).copied() {
            let e = if self.building_in(&st, c.model) {
                CallError::new(
                    Error::StreamModel,
                    format!(
                        "stream {stream:#x} is bound to model {:#x} already",
                        c.model
                    ),
                )
            } else {
                CallError::new(
                    Error::StreamCaptured,
                    format!("stream {stream:#x} is capturing: a capturing stream is not bound"),
                )
            };
            return Err(e);
        }
        let m = self.built_model(&mut st, handle, "aclmdlRIBindStream")?;
        if entry.default {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "stream {stream:#x} is a context's default stream: the simulator binds \
                         only streams of aclrtCreateStream"
                ),
            ));
        }
        if flag != HEAD && flag != STARTED {
            return Err(param(format!(
                "flag {flag:#x}: ACL_MODEL_STREAM_FLAG_HEAD (0, starts with each execution) or \
                 ACL_MODEL_STREAM_FLAG_DEFAULT ({STARTED:#x}, started by a task of the model)"
            )));
        }
        // `ApiErrorDecorator::ModelBindStream`: where the chip has `RT_FEATURE_MODEL_STREAM_DOT_SYNC`
        // (hicann/runtime `config/950/dev_info_reg.cc`), only a persistent stream is bound.
        let soc = self.backend.soc();
        let persistent = self
            .stream_infos
            .get(entry.raw)
            .is_some_and(|i| i.flags & PERSISTENT != 0);
        if matches!(soc, Soc::Ascend950PR | Soc::Ascend950DT) && !persistent {
            return Err(param(format!(
                "stream {stream:#x} is not persistent: on {} a model binds only streams made \
                 with ACL_STREAM_PERSISTENT (aclrtCreateStreamWithConfig)",
                soc.name()
            )));
        }
        if entry.device != m.device {
            return Err(CallError::new(
                Error::StreamContext,
                format!(
                    "stream {stream:#x} is of device {}, model {handle:#x} of device {}",
                    entry.device, m.device
                ),
            ));
        }
        let index = m.streams.len();
        m.streams.push(stream);
        m.heads.push(flag == HEAD);
        if let Phase::Building { ended } = &mut m.phase {
            ended.push(false);
        }
        st.streams.insert(
            stream,
            InCapture {
                model: handle,
                index,
            },
        );
        self.captures
            .active
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        Ok(())
    }

    /// The index of `stream` among model `m`'s bound streams: 107005 if it is not one.
    fn bound_index(m: &Model, stream: usize, handle: usize) -> Result<usize, CallError> {
        m.streams
            .iter()
            .position(|&s| s == stream && s != 0)
            .ok_or_else(|| not_bound(stream, handle))
    }

    /// `aclmdlRIEndTask`: the stream's part of the model ends here.
    pub(crate) fn end_task(&self, handle: usize, stream: usize) -> Result<(), CallError> {
        self.stream(stream)?;
        let mut st = self.captures.lock();
        let m = self.built_model(&mut st, handle, "aclmdlRIEndTask")?;
        let i = Self::bound_index(m, stream, handle)?;
        if let Phase::Building { ended } = &mut m.phase {
            ended[i] = true;
        }
        Ok(())
    }

    /// `aclmdlRIBuildEnd`: the model becomes executable; its bound streams take the caller's
    /// tasks again (each execution queues the model's on them).
    pub(crate) fn build_end(&self, handle: usize) -> Result<(), CallError> {
        let mut st = self.captures.lock();
        let m = self.built_model(&mut st, handle, "aclmdlRIBuildEnd")?;
        if m.streams.iter().all(|&s| s == 0) {
            return Err(param(format!(
                "model {handle:#x} has no bound stream: bind one with aclmdlRIBindStream \
                 before aclmdlRIBuildEnd"
            )));
        }
        // Streams unbound while it was built are gone from it: the rest keep their order.
        let keep: Vec<usize> = m.streams.iter().copied().filter(|&s| s != 0).collect();
        let renumber: Vec<Option<usize>> = m
            .streams
            .iter()
            .scan(0, |n, &s| {
                Some((s != 0).then(|| {
                    *n += 1;
                    *n - 1
                }))
            })
            .collect();
        m.tasks = m
            .tasks
            .iter()
            .filter_map(|&(i, t)| renumber[i].map(|j| (j, t)))
            .collect();
        m.heads = m
            .heads
            .iter()
            .zip(&renumber)
            .filter_map(|(&h, r)| r.map(|_| h))
            .collect();
        m.streams = keep;
        self.release_streams(&mut st, handle);
        let replay = {
            let m = st.models.get(handle).ok_or_else(|| bad_model(handle))?;
            self.build(m, false)?
        };
        if let Some(m) = st.models.get_mut(handle) {
            m.phase = Phase::Ready(std::sync::Arc::new(replay));
        }
        Ok(())
    }

    /// `aclmdlRIUnbindStream`: while the model is built, the stream and its stored tasks
    /// leave it; after, the stream's queued work is waited for and the model, which would
    /// replay on it, no longer executes.
    pub(crate) fn unbind_stream(&self, handle: usize, stream: usize) -> Result<(), CallError> {
        self.stream(stream)?;
        let raw = self.resolve_stream_any(stream)?;
        let mut st = self.captures.lock();
        let m = st.models.get_mut(handle).ok_or_else(|| bad_model(handle))?;
        match &m.phase {
            Phase::Capturing { .. } => return Err(graph_model(handle, "aclmdlRIUnbindStream")),
            Phase::Ready(r) if r.owned() => {
                return Err(graph_model(handle, "aclmdlRIUnbindStream"));
            }
            _ => {}
        }
        let i = Self::bound_index(m, stream, handle)?;
        m.streams[i] = 0;
        if let Phase::Building { .. } = m.phase {
            super::task_info::drop_stream_tasks(m, i);
            if st.streams.remove(&stream).is_some() {
                self.captures
                    .active
                    .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            }
            return Ok(());
        }
        drop(st);
        // `Model::ModelUnBindTaskSubmit`: the stream's tasks finish first.
        self.backend
            .synchronize(raw, acl_notify_core::SyncWait::Forever)
            .map_err(CallError::backend)
    }

    /// 107005 if a stream of built model `m` was unbound since its build ended.
    pub(super) fn all_bound(m: &Model, handle: usize) -> Result<(), CallError> {
        if !m.streams.contains(&0) {
            return Ok(());
        }
        Err(CallError::new(
            Error::StreamModel,
            format!(
                "a stream of model {handle:#x} was unbound (aclmdlRIUnbindStream): the model no \
                 longer executes"
            ),
        ))
    }
}

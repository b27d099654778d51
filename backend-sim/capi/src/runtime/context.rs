//! Contexts (CANN's context chapter) and the stream calls that depend on them: each thread has a
//! current context (which fixes its current device); `aclrtSetDevice` makes the device's
//! *primary* context current, `aclrtCreateContext` a new one with a default stream of its own.
//! A stream belongs to the context it was created in and is used only there (107003
//! elsewhere, as hicann/runtime `api_impl.cc` checks); a NULL stream means the current
//! context's default stream. Also here: `aclrtCreateStreamWithConfig`, failure modes, abort
//! and device synchronize, which act on the current context's streams.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use acl_notify_core::{
    BackendError, Error, FailureMode, RawStream, StreamControl, StreamDestroy, StreamOps, SyncWait,
};

use super::statecb::{self, StreamState};
use super::{Runtime, StreamEntry};
use crate::errmsg::{CallError, param};
use crate::handle::{CTable, Kind};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether [`Runtime::primary_context`] made the context or found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Made {
    Now,
    Before,
}

/// What a context handle stands for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CtxEntry {
    device: u32,
    /// The backend stream a NULL stream means here: `None` for a primary context (the
    /// backend's default stream of the device), a stream of its own for a created one.
    default: Option<RawStream>,
    /// Its system parameters (`sysparam`).
    pub(super) sys_params: super::sysparam::CtxParams,
}

/// The session's contexts.
pub(crate) struct Contexts {
    pub(super) table: CTable<CtxEntry>,
    /// The primary context of each device, once made.
    primaries: Mutex<Vec<Option<usize>>>,
    /// The C stream handle of each context's default stream, once handed out. Keyed by
    /// context handle, whose value comes back after 2²⁰ destroys of its slot: an entry is
    /// removed with its context (`destroy_context`, `forget_where`), is made only while its
    /// context is live (checked under this lock), and is used only if it names the context's
    /// default stream.
    pub(super) default_handles: Mutex<HashMap<usize, usize>>,
    /// How many times contexts were removed (destroyed, or released with their device): a
    /// thread whose current context was known live at another count looks it up again.
    pub(super) gone: AtomicU64,
    /// Each context's failure in stop-on-failure mode (`ctx_failure`).
    pub(super) scopes: super::ctx_failure::Scopes,
}

impl Contexts {
    pub(crate) fn new(seed: u64, devices: usize) -> Self {
        Contexts {
            table: CTable::new(Kind::Context, "contexts", seed),
            primaries: Mutex::new(vec![None; devices]),
            default_handles: Mutex::new(HashMap::new()),
            gone: AtomicU64::new(0),
            scopes: Default::default(),
        }
    }

    fn get(&self, ctx: usize) -> Option<CtxEntry> {
        self.table.get(ctx)
    }

    /// Whether `ctx` is a live context.
    pub(super) fn is_live(&self, ctx: usize) -> bool {
        self.table.get(ctx).is_some()
    }

    /// Whether a context of `device` is alive (the device is set up in the process).
    pub(crate) fn on_device(&self, device: u32) -> bool {
        !self.table.values_where(|c| c.device == device).is_empty()
    }

    /// The default streams of the contexts created on `device` (a primary context's is the
    /// backend's default stream of the device).
    pub(crate) fn default_streams_on(&self, device: u32) -> Vec<RawStream> {
        self.table
            .values_where(|c| c.device == device)
            .into_iter()
            .filter_map(|c| c.default)
            .collect()
    }

    /// Forgets every context of the devices `which` picks (their streams are the caller's to
    /// discard).
    pub(crate) fn forget_where(&self, which: &impl Fn(u32) -> bool) {
        let mut primaries = lock(&self.primaries);
        for (d, p) in primaries.iter_mut().enumerate() {
            if which(d as u32) {
                *p = None;
            }
        }
        drop(primaries);
        let _ = self.table.remove_where(|c| which(c.device));
        self.scopes.retain(|ctx| self.table.get(ctx).is_some());
        self.gone.fetch_add(1, Ordering::AcqRel);
        lock(&self.default_handles).retain(|ctx, _| self.table.get(*ctx).is_some());
    }
}

fn bad_context(ctx: usize) -> CallError {
    CallError::new(
        Error::InvalidHandle,
        format!(
            "context {ctx:#x} is not a live context of this process (destroyed, its device reset, \
             from another process or session, or not a context)"
        ),
    )
}

/// `aclrtCreateStreamWithConfig` flags (`ACL_STREAM_*`): every bit CANN defines is accepted;
/// the simulator runs every stream the same way.
const STREAM_FLAGS: u32 = 0x3f;

impl Runtime {
    /// The primary context of `device`, made on first use.
    pub(crate) fn primary_context(&self, device: u32) -> Result<(usize, Made), CallError> {
        let mut p = lock(&self.contexts.primaries);
        if let Some(Some(ctx)) = p.get(device as usize) {
            return Ok((*ctx, Made::Before));
        }
        let ctx = self.contexts.table.insert(CtxEntry {
            device,
            default: None,
            sys_params: Default::default(),
        })?;
        if let Some(slot) = p.get_mut(device as usize) {
            *slot = Some(ctx);
        }
        // Its default stream is the device's: bound through the device (`ctx_failure`).
        let scope = self.contexts.scopes.make(ctx);
        self.backend()
            .set_default_failure_scope(device, Some(scope));
        Ok((ctx, Made::Now))
    }

    /// Device `device`'s primary context, if it has one now.
    pub(crate) fn primary_of(&self, device: u32) -> Option<usize> {
        lock(&self.contexts.primaries)
            .get(device as usize)
            .copied()
            .flatten()
    }

    /// The backend stream a NULL stream means in context `ctx` of `device`.
    pub(crate) fn context_default_stream(
        &self,
        device: u32,
        ctx: usize,
    ) -> Result<RawStream, CallError> {
        match self.contexts.get(ctx) {
            Some(CtxEntry {
                default: Some(s), ..
            }) => Ok(s),
            Some(_) => self
                .backend()
                .default_stream(device)
                .map_err(CallError::backend),
            None => Err(CallError::new(
                Error::ContextNull,
                "the calling thread's current context was destroyed (set another one)",
            )),
        }
    }

    /// `aclrtCreateContext`: a context on `device` with a default stream of its own, made
    /// current on the calling thread.
    pub(crate) fn create_context(&self, device: i32) -> Result<usize, CallError> {
        let d = self.device_id(device)?;
        let raw = self
            .backend()
            .create_stream(d)
            .map_err(CallError::backend)?;
        let ctx = self
            .contexts
            .table
            .insert(CtxEntry {
                device: d,
                default: Some(raw),
                sys_params: Default::default(),
            })
            .inspect_err(|_| {
                let _ = self.backend().destroy_stream(raw, StreamDestroy::Discard);
            })?;
        self.contexts.scopes.make(ctx);
        self.bind_to_context(raw, ctx);
        self.make_current(d, ctx);
        self.default_stream_state(d, ctx, StreamState::CreatePost);
        Ok(ctx)
    }

    /// `aclrtDestroyContext`: discards the context's streams (its default stream included)
    /// and forgets it; a thread whose current context it was has none afterwards.
    pub(crate) fn destroy_context(&self, ctx: usize) -> Result<(), CallError> {
        let entry = self.contexts.get(ctx).ok_or_else(|| bad_context(ctx))?;
        let Some(default) = entry.default else {
            return Err(param(format!(
                "context {ctx:#x} is device {}'s primary context: aclrtResetDevice releases it",
                entry.device
            )));
        };
        self.default_stream_state(entry.device, ctx, StreamState::DestroyPre);
        for h in self.streams.handles_where(|s| s.ctx == ctx && !s.default) {
            statecb::stream_state(h, StreamState::DestroyPre);
        }
        if self.contexts.table.remove(ctx).is_none() {
            return Err(bad_context(ctx));
        }
        self.contexts.gone.fetch_add(1, Ordering::AcqRel);
        self.contexts.scopes.forget(ctx);
        lock(&self.contexts.default_handles).remove(&ctx);
        let streams = self.streams.remove_where(|s| s.ctx == ctx);
        let mut raws: Vec<RawStream> = streams.iter().map(|s| s.raw).collect();
        if !raws.contains(&default) {
            raws.push(default);
        }
        for raw in raws {
            // Its limits go with it: a later stream with the same backend handle starts with none.
            self.res_limits.forget_stream(raw);
            let id = self.stream_infos.forget_stream(raw);
            let _ = self.backend().destroy_stream(raw, StreamDestroy::Discard);
            self.stream_infos.free_id(id);
        }
        self.forget_current(ctx);
        Ok(())
    }

    /// `aclrtSetCurrentContext`.
    pub(crate) fn set_current_context(&self, ctx: usize) -> Result<(), CallError> {
        let entry = self.contexts.get(ctx).ok_or_else(|| bad_context(ctx))?;
        self.make_current(entry.device, ctx);
        Ok(())
    }

    /// `aclrtGetCurrentContext`.
    pub(crate) fn current_context(&self) -> Result<usize, CallError> {
        let (_, ctx) = self.current()?;
        if self.contexts.get(ctx).is_none() {
            return Err(CallError::new(
                Error::ContextNull,
                "the calling thread's current context was destroyed or its device reset",
            ));
        }
        Ok(ctx)
    }

    /// `aclrtCtxGetCurrentDefaultStream`: a C handle for the current context's default stream
    /// (the same handle every time).
    pub(crate) fn current_default_stream(&self) -> Result<usize, CallError> {
        let (device, ctx) = self.current()?;
        self.default_stream_handle(device, ctx)
    }

    /// Tells the stream state callbacks, if any are registered, that context `ctx`'s default
    /// stream was made (`CreatePost`) or is about to go (`DestroyPre`), with `ctx` current on
    /// the calling thread meanwhile, under the C handle `aclrtCtxGetCurrentDefaultStream`
    /// answers there (made now if none was asked for yet). CANN reports a context's default
    /// stream as any stream: from `Stream::Setup` when the context is made, and before it goes
    /// from `Runtime::PrimaryContextCallBack` (a primary context's, before `RESET_PRE`) and
    /// `ApiImpl::ContextDestroy` (first), hicann/runtime `src/runtime/core/src/stream/stream.cc`,
    /// `src/runtime/core/src/runtime.cc`, `src/runtime/api/impl/api_impl.cc`.
    pub(crate) fn default_stream_state(&self, device: u32, ctx: usize, state: StreamState) {
        if statecb::STREAMS.is_empty() {
            return;
        }
        let before = super::CURRENT.with(std::cell::Cell::get);
        self.make_current(device, ctx);
        if let Ok(h) = self.default_stream_handle(device, ctx) {
            statecb::stream_state(h, state);
        }
        super::CURRENT.with(|c| c.set(before));
    }

    /// The C handle of context `ctx`'s default stream, made on first use (see
    /// [`current_default_stream`](Self::current_default_stream)).
    fn default_stream_handle(&self, device: u32, ctx: usize) -> Result<usize, CallError> {
        let raw = self.context_default_stream(device, ctx)?;
        let mut handles = lock(&self.contexts.default_handles);
        // Asked again under the lock: `destroy_context` removes the context, then its entry
        // here, then its streams, so a context destroyed since the look above must not get
        // an entry (nor a stream entry) that nothing would remove.
        if self.contexts.get(ctx).is_none() {
            return Err(CallError::new(
                Error::ContextNull,
                "the calling thread's current context was destroyed (set another one)",
            ));
        }
        // The handle kept must be this context's default stream's: a context's handle value
        // comes back after its slot's generation wrapped (2²⁰ destroys), and an entry left for
        // the dead context would name its destroyed stream.
        if let Some(h) = handles.get(&ctx)
            && self
                .stream(*h)
                .is_ok_and(|e| e.default && e.ctx == ctx && e.raw == raw)
        {
            return Ok(*h);
        }
        let h = self.streams.insert(StreamEntry {
            raw,
            device,
            ctx,
            default: true,
        })?;
        handles.insert(ctx, h);
        Ok(h)
    }

    /// `aclrtCreateStreamWithConfig` (priority and flags are kept for the stream's getters,
    /// `streaminfo`, and not modelled otherwise).
    pub(crate) fn create_stream_with_config(
        &self,
        priority: u32,
        flags: u32,
    ) -> Result<usize, CallError> {
        if flags & !STREAM_FLAGS != 0 {
            return Err(param(format!(
                "flag {flags:#x} has bits no ACL_STREAM_* flag defines (known: {STREAM_FLAGS:#x})"
            )));
        }
        self.create_stream_with(priority, flags)
    }

    /// `aclrtSetStreamFailureMode`.
    /// Stop mode puts the stream's context in stop mode (`ctx_failure`).
    pub(crate) fn set_failure_mode(&self, stream: usize, mode: u64) -> Result<(), CallError> {
        let raw = self.resolve_stream(stream)?;
        let (_, ctx) = self.current()?;
        self.refuse_aborted(ctx, raw)?;
        let mode = FailureMode::from_c(mode);
        self.backend()
            .set_failure_mode(raw, mode)
            .map_err(CallError::backend)?;
        if mode == FailureMode::StopOnFailure {
            self.context_stops(ctx);
        }
        Ok(())
    }

    /// `aclrtStreamAbort`.
    pub(crate) fn abort_stream(&self, stream: usize) -> Result<(), CallError> {
        let raw = self.resolve_stream(stream)?;
        self.backend().abort(raw).map_err(CallError::backend)
    }

    /// `aclrtSynchronizeDevice[WithTimeout]`: synchronizes every stream of the current
    /// context (hicann/runtime `ApiImpl::DeviceSynchronize`: `curCtx->Synchronize`), its
    /// default stream included, within one deadline; the first stream error is returned after
    /// all of them are done. Expiry: 507046.
    /// A failed context (`ctx_failure`) answers its failure at once, and so does one whose
    /// failure came while this waited (CANN's `Context::Synchronize` checks the context first,
    /// and its streams' synchronizes check it again).
    pub(crate) fn synchronize_device(&self, wait: SyncWait) -> Result<(), CallError> {
        let (device, ctx) = self.current()?;
        self.context_failure(ctx)?;
        let synced = self.synchronize_context_streams(device, ctx, wait);
        self.context_failure(ctx)?;
        synced
    }

    fn synchronize_context_streams(
        &self,
        device: u32,
        ctx: usize,
        wait: SyncWait,
    ) -> Result<(), CallError> {
        // (C handle, backend stream): the handle names a stream that does not finish.
        let mut raws = vec![(0, self.context_default_stream(device, ctx)?)];
        raws.extend(
            self.streams
                .entries_where(|s| s.ctx == ctx && !s.default)
                .into_iter()
                .map(|(h, s)| (h, s.raw)),
        );
        let deadline = match wait {
            SyncWait::Forever => None,
            SyncWait::AtMost(d) => Instant::now().checked_add(d),
        };
        let mut first: Option<CallError> = None;
        for (handle, raw) in raws {
            let w = match deadline {
                None => SyncWait::Forever,
                Some(d) => SyncWait::AtMost(d.saturating_duration_since(Instant::now())),
            };
            if let Err(e) = self.backend().synchronize(raw, w) {
                if e.kind() == Error::StreamSyncTimeout {
                    // Which stream, and what it waits for (as `aclrtSynchronizeStreamWithTimeout`
                    // says it).
                    let why = self
                        .stream_report(raw)
                        .map_or_else(String::new, |r| format!(": {r}"));
                    return Err(CallError::new(
                        Error::StreamSyncTimeout,
                        format!(
                            "device {device}: {} of the current context still has tasks after \
                             {} ms{why}",
                            super::stream_name(handle),
                            wait_ms(wait)
                        ),
                    ));
                }
                // A stream destroyed meanwhile is no longer the device's to wait for.
                if e.kind() != Error::InvalidHandle && first.is_none() {
                    first = Some(CallError::backend(e));
                }
            }
        }
        first.map_or(Ok(()), Err)
    }
}

fn wait_ms(wait: SyncWait) -> u128 {
    match wait {
        SyncWait::Forever => u128::MAX,
        SyncWait::AtMost(d) => d.as_millis(),
    }
}

//! [`Runtime`]: what CANN's C API adds on top of a backend — handle tables, the per-thread
//! current device, device reference counts, the NULL-means-default-stream rule and the
//! SPEC §3 check order. Generic over any `B: NotifyResources + StreamOps + CntNotifyOps`; the
//! exported functions in [`crate::ffi`] plug in the simulator.
//!
//! Methods here take decoded C arguments (handles as `usize`, counts, flags) and return
//! [`CallError`]s; reading and writing C memory stays in `ffi`.

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use acl_notify_core::whitelist::MAX_ENTRIES as WHITELIST_MAX;
use acl_notify_core::{
    Backend, BackendError, CntNotifyOps, CntRecord, CntWait, CreateFlags, Error, EventOps,
    ExportFlags, ExportKey, Feature, HostCall, HostOps, ImportFlags, NotifyResources, RawCntNotify,
    RawNotify, RawStream, ServerPid, StreamControl, StreamDestroy, StreamOps, StreamStatus,
    SyncWait, Timeout,
};

use crate::errmsg::{CallError, param};
use crate::handle::{HandleTable, Kind, MAX_HANDLES, NotifyCodec};

/// What a count-notify handle stands for.
#[derive(Clone, Copy, Debug)]
struct CntEntry {
    raw: RawCntNotify,
    /// The device it was created on.
    device: u32,
}

/// What a stream handle stands for.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StreamEntry {
    pub(crate) raw: RawStream,
    pub(crate) device: u32,
    /// The context it was created in (a context handle, see `context`).
    pub(crate) ctx: usize,
    /// A context's default stream, handed out by `aclrtCtxGetCurrentDefaultStream`: it is
    /// not destroyed through its handle.
    pub(crate) default: bool,
}

thread_local! {
    /// This thread's current device and context, tagged with the epoch of the [`Runtime`]
    /// they were set in (a device set before `aclFinalize` is not current after the next
    /// `aclInit`).
    static CURRENT: Cell<Option<(u64, u32, usize)>> = const { Cell::new(None) };
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// 107017 for a notify handle that is not a live one of this session.
fn bad_notify(handle: usize) -> CallError {
    CallError::new(
        Error::InvalidHandle,
        format!(
            "notify {handle:#x} is not a live notify of this process \
             (destroyed, from another process or session, or not a notify)"
        ),
    )
}

fn bad_stream(handle: usize) -> CallError {
    CallError::new(
        Error::InvalidHandle,
        format!(
            "stream {handle:#x} is not a live stream of this process \
             (destroyed, from another process or session, or not a stream)"
        ),
    )
}

/// "stream 0x…" for a C stream handle, "the default stream" for NULL.
fn stream_name(stream: usize) -> String {
    if stream == 0 {
        "the default stream".to_owned()
    } else {
        format!("stream {stream:#x}")
    }
}

/// A backend error of a call on C stream `stream`: a 107017 names the caller's handle, not the
/// backend's own (the stream was destroyed, or discarded by a device reset or `aclFinalize`,
/// while the call used it).
fn stream_error<E: BackendError>(stream: usize, e: E) -> CallError {
    if e.kind() != Error::InvalidHandle {
        return CallError::backend(e);
    }
    if stream == 0 {
        CallError::new(
            Error::InvalidHandle,
            "the default stream was discarded while this call used it (its device was reset, \
             or aclFinalize ran)",
        )
    } else {
        bad_stream(stream)
    }
}

/// One `aclInit` … `aclFinalize` session of the process over backend `B`.
pub(crate) struct Runtime<B> {
    backend: B,
    epoch: u64,
    /// Notify handles are the backend's own, encoded (no table here: see [`crate::handle`]).
    notifies: NotifyCodec,
    pub(crate) streams: RwLock<HandleTable<StreamEntry>>,
    cnts: RwLock<HandleTable<CntEntry>>,
    /// Contexts and events (`context`, `event` modules).
    pub(crate) contexts: crate::context::Contexts,
    pub(crate) events: RwLock<HandleTable<crate::event::EventEntry>>,
    /// `aclrtSetDevice` minus `aclrtResetDevice` calls, per device, over the whole process.
    device_refs: Mutex<Vec<u32>>,
    /// The process that called `aclInit` (named to a child forked from it, whose calls the
    /// session does not serve: see `session`).
    pid: i32,
}

impl<B> core::fmt::Debug for Runtime<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Runtime")
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

impl<B: NotifyResources + StreamOps + CntNotifyOps + EventOps + StreamControl + NotifyHandles>
    Runtime<B>
{
    /// A session over `backend`. `epoch` must differ from every earlier session's in this
    /// process; `seed` should be random (it salts the handles).
    pub(crate) fn new(backend: B, epoch: u64, seed: u64) -> Self {
        let devices = backend.device_count() as usize;
        let pid = backend.bare_tgid();
        let notifies = NotifyCodec::new(seed, backend.notify_tag());
        Runtime {
            backend,
            epoch,
            notifies,
            streams: RwLock::new(HandleTable::new(Kind::Stream, seed.rotate_left(17))),
            cnts: RwLock::new(HandleTable::new(Kind::CntNotify, seed.rotate_left(41))),
            contexts: crate::context::Contexts::new(seed.rotate_left(23), devices),
            events: RwLock::new(HandleTable::new(Kind::Event, seed.rotate_left(29))),
            device_refs: Mutex::new(vec![0; devices]),
            pid,
        }
    }

    /// The process that opened this session.
    pub(crate) fn pid(&self) -> i32 {
        self.pid
    }

    /// The backend.
    pub(crate) fn backend(&self) -> &B {
        &self.backend
    }

    // ---- handles -------------------------------------------------------------------------

    /// The backend handle a C notify handle stands for, without asking the backend.
    #[inline]
    fn decode_notify(&self, handle: usize) -> Result<RawNotify, CallError> {
        self.notifies
            .decode(handle)
            .map(RawNotify)
            .ok_or_else(|| bad_notify(handle))
    }

    /// The live backend notify a C handle stands for (checked before the other arguments,
    /// as SPEC §3 orders).
    fn notify(&self, handle: usize) -> Result<RawNotify, CallError> {
        let raw = self.decode_notify(handle)?;
        if self.backend.notify_is_live(raw) {
            Ok(raw)
        } else {
            Err(bad_notify(handle))
        }
    }

    pub(crate) fn stream(&self, handle: usize) -> Result<StreamEntry, CallError> {
        self.streams
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(handle)
            .ok_or_else(|| bad_stream(handle))
    }

    #[inline]
    fn add_notify(&self, raw: RawNotify) -> Result<usize, CallError> {
        self.notifies.encode(raw.0).ok_or_else(|| {
            let _ = self.backend.destroy_notify(raw);
            CallError::new(
                Error::ResourceAllocFail,
                format!("the process already holds {MAX_HANDLES} notify handles"),
            )
        })
    }

    // ---- devices -------------------------------------------------------------------------

    /// The calling thread's current device (107002 if none).
    #[inline]
    pub(crate) fn current_device(&self) -> Result<u32, CallError> {
        self.current().map(|(device, _)| device)
    }

    /// The calling thread's current device and context (107002 if none).
    #[inline]
    pub(crate) fn current(&self) -> Result<(u32, usize), CallError> {
        match CURRENT.with(Cell::get) {
            Some((epoch, device, ctx)) if epoch == self.epoch => Ok((device, ctx)),
            _ => Err(CallError::new(
                Error::ContextNull,
                "the calling thread has no current device (call aclrtSetDevice first)",
            )),
        }
    }

    /// `device` as a device of this machine (C passes `int32_t` or `uint32_t`): 107001 if
    /// there is no such device.
    pub(crate) fn device_id(&self, device: impl Into<i64>) -> Result<u32, CallError> {
        let device = device.into();
        let count = self.backend.device_count();
        u32::try_from(device)
            .ok()
            .filter(|d| *d < count)
            .ok_or_else(|| {
                CallError::new(
                    Error::InvalidDeviceId,
                    format!("device {device} does not exist (this machine has {count} devices)"),
                )
            })
    }

    /// `aclrtSetDevice`.
    pub(crate) fn set_device(&self, device: i32) -> Result<(), CallError> {
        let d = self.device_id(device)?;
        if let Some(n) = lock(&self.device_refs).get_mut(d as usize) {
            *n = n.saturating_add(1);
        }
        let ctx = self.primary_context(d)?;
        CURRENT.with(|c| c.set(Some((self.epoch, d, ctx))));
        Ok(())
    }

    /// Makes `ctx` (a live context on `device`) current on the calling thread.
    pub(crate) fn make_current(&self, device: u32, ctx: usize) {
        CURRENT.with(|c| c.set(Some((self.epoch, device, ctx))));
    }

    /// Forgets the calling thread's current context if it is `ctx`.
    pub(crate) fn forget_current(&self, ctx: usize) {
        CURRENT.with(|c| {
            if matches!(c.get(), Some((e, _, x)) if e == self.epoch && x == ctx) {
                c.set(None);
            }
        });
    }

    /// `aclrtResetDevice` (`force`: `aclrtResetDeviceForce`). When the process's count of
    /// `aclrtSetDevice` calls for the device drops to 0, its streams are discarded and its
    /// notify handles destroyed, as CANN does when the device's context goes away.
    pub(crate) fn reset_device(&self, device: i32, force: bool) -> Result<(), CallError> {
        let d = self.device_id(device)?;
        let release = {
            let mut refs = lock(&self.device_refs);
            match refs.get_mut(d as usize) {
                Some(n) if *n > 0 => {
                    *n = if force { 0 } else { *n - 1 };
                    *n == 0
                }
                _ => false,
            }
        };
        CURRENT.with(|c| {
            if matches!(c.get(), Some((e, dev, _)) if e == self.epoch && dev == d) {
                c.set(None);
            }
        });
        if release {
            self.release(|dev| dev == d);
        }
        Ok(())
    }

    /// Discards the streams and destroys the notify handles on devices chosen by `which`:
    /// the C stream handles, the devices' default streams, and streams still draining in an
    /// `aclrtDestroyStream` on another thread. All of them are cancelled before any is waited
    /// for (a host function on one may be synchronizing another).
    pub(crate) fn release(&self, which: impl Fn(u32) -> bool) {
        self.streams
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove_where(|s| which(s.device));
        self.backend.discard_streams_where(&which);
        self.backend.destroy_notifies_where(&which);
        let cnts = self
            .cnts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove_where(|c| which(c.device));
        for c in cnts {
            let _ = self.backend.cnt_destroy(c.raw);
        }
        self.contexts.forget_where(&which);
        let events = self
            .events
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove_where(|e| which(e.device));
        for e in events {
            let _ = self.backend.event_destroy(e.raw);
        }
    }

    /// `aclrtGetDevice`.
    pub(crate) fn get_device(&self) -> Result<i32, CallError> {
        self.current_device().map(|d| d as i32)
    }

    /// `aclrtDeviceCanAccessPeer`.
    pub(crate) fn can_access_peer(&self, device: i32, peer: i32) -> Result<bool, CallError> {
        let d = self.device_id(device)?;
        let p = self.device_id(peer)?;
        self.backend
            .can_access_peer(d, p)
            .map_err(CallError::backend)
    }

    /// `aclrtDeviceEnablePeerAccess` (from the current device to `peer`).
    pub(crate) fn enable_peer_access(&self, peer: i32, flags: u32) -> Result<(), CallError> {
        if flags != 0 {
            return Err(param(format!("flags {flags:#x} must be 0")));
        }
        let d = self.current_device()?;
        let p = self.device_id(peer)?;
        self.backend
            .enable_peer_access(d, p)
            .map_err(CallError::backend)
    }

    // ---- streams -------------------------------------------------------------------------

    /// The backend stream a C stream argument means on the calling thread: a live stream of
    /// the current device, or that device's default stream for NULL. Checks: 107017 bad
    /// handle; 107002 no current device; 107003 a stream of another device.
    pub(crate) fn resolve_stream(&self, stream: usize) -> Result<RawStream, CallError> {
        let entry = match stream {
            0 => None,
            h => Some(self.stream(h)?),
        };
        let (device, ctx) = self.current()?;
        match entry {
            Some(s) if s.device != device => Err(CallError::new(
                Error::StreamContext,
                format!(
                    "stream {stream:#x} belongs to device {}, but the current device is {device}",
                    s.device
                ),
            )),
            // hicann/runtime `api_impl.cc`: a stream is used only in the context it belongs to.
            Some(s) if s.ctx != ctx => Err(CallError::new(
                Error::StreamContext,
                format!(
                    "stream {stream:#x} belongs to context {:#x}, but the current context is \
                     {ctx:#x}",
                    s.ctx
                ),
            )),
            Some(s) => Ok(s.raw),
            None => self.context_default_stream(device, ctx),
        }
    }

    /// `aclrtCreateStream`.
    pub(crate) fn create_stream(&self) -> Result<usize, CallError> {
        let (device, ctx) = self.current()?;
        let raw = self
            .backend
            .create_stream(device)
            .map_err(CallError::backend)?;
        let h = self
            .streams
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(StreamEntry {
                raw,
                device,
                ctx,
                default: false,
            });
        if let Some(h) = h {
            // Deadlock reports and the inspector name the stream as the C caller sees it.
            self.backend.set_stream_alias(raw, h as u64);
        }
        h.ok_or_else(|| {
            let _ = self.backend.destroy_stream(raw, StreamDestroy::Discard);
            CallError::new(
                Error::ResourceAllocFail,
                format!("the process already holds {MAX_HANDLES} streams"),
            )
        })
    }

    /// `aclrtDestroyStream` / `aclrtDestroyStreamForce` (`stream` is not NULL).
    pub(crate) fn destroy_stream(
        &self,
        stream: usize,
        mode: StreamDestroy,
    ) -> Result<(), CallError> {
        let raw = self.resolve_stream(stream)?;
        if self.stream(stream).is_ok_and(|s| s.default) {
            return Err(param(format!(
                "stream {stream:#x} is a context's default stream: it goes with its context"
            )));
        }
        // Dead for every other caller from now on, even while a drain is still running. Only
        // the caller that removes it destroys it: a racing destroy is told the handle is dead.
        if self
            .streams
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(stream)
            .is_none()
        {
            return Err(bad_stream(stream));
        }
        self.backend.destroy_stream(raw, mode).map_err(|e| {
            // With the handle ours alone, a drain refused as dead was overtaken by a discard.
            if e.kind() == Error::InvalidHandle && mode == StreamDestroy::Drain {
                CallError::new(
                    Error::InvalidHandle,
                    format!(
                        "stream {stream:#x} was discarded while it drained (its device was \
                         reset, or aclFinalize ran): the tasks still queued did not run"
                    ),
                )
            } else {
                stream_error(stream, e)
            }
        })
    }

    /// `aclrtSynchronizeStream[WithTimeout]`.
    pub(crate) fn synchronize(&self, stream: usize, wait: SyncWait) -> Result<(), CallError> {
        let raw = self.resolve_stream(stream)?;
        self.backend.synchronize(raw, wait).map_err(|e| {
            if e.kind() == Error::StreamSyncTimeout {
                let why = self
                    .backend
                    .stream_report(raw)
                    .map_or_else(String::new, |r| format!(": {r}"));
                CallError::new(
                    Error::StreamSyncTimeout,
                    format!("{} still has tasks after {wait}{why}", stream_name(stream)),
                )
            } else if e.kind() == Error::InvalidHandle || e.kind() == Error::InternalError {
                stream_error(stream, e)
            } else {
                // A failure a task stored on the stream, reported now: say on which stream.
                CallError::backend(e)
                    .in_context(&format!("{}: a task on it failed", stream_name(stream)))
            }
        })
    }

    /// `aclrtStreamQuery`.
    pub(crate) fn query(&self, stream: usize) -> Result<StreamStatus, CallError> {
        let raw = self.resolve_stream(stream)?;
        let status = self
            .backend
            .query(raw)
            .map_err(|e| stream_error(stream, e))?;
        // Not a failure, but the caller polling a stream that does not finish wants to know
        // why: a note for `aclGetRecentErrMsg`.
        if status == StreamStatus::NotReady
            && let Some(why) = self.backend.stream_report(raw)
        {
            crate::errmsg::note_throttled(stream, || {
                format!(
                    "aclrtStreamQuery: {} is not ready: {why}",
                    stream_name(stream)
                )
            });
        }
        Ok(status)
    }

    /// `aclrtLaunchHostFunc`.
    pub(crate) fn launch_host_func(&self, stream: usize, call: HostCall) -> Result<(), CallError> {
        let raw = self.resolve_stream(stream)?;
        self.backend
            .launch_host_func(raw, call)
            .map_err(|e| stream_error(stream, e))
    }

    /// `aclrtSetOpWaitTimeout`.
    pub(crate) fn set_op_wait_timeout(&self, seconds: u32) -> Result<(), CallError> {
        self.backend
            .set_op_wait_timeout(seconds)
            .map_err(CallError::backend)
    }

    // ---- notifies ------------------------------------------------------------------------

    /// `aclrtCreateNotify` (after the NULL and flag checks).
    #[inline]
    pub(crate) fn create_notify(&self, flags: CreateFlags) -> Result<usize, CallError> {
        let device = self.current_device()?;
        let raw = self
            .backend
            .create_notify(device, flags)
            .map_err(CallError::backend)?;
        self.add_notify(raw)
    }

    /// `aclrtDestroyNotify` (`notify` is not NULL): the backend's own slot check (one lock
    /// round trip in all) tells a live handle from a destroyed or stale one.
    #[inline]
    pub(crate) fn destroy_notify(&self, notify: usize) -> Result<(), CallError> {
        let raw = self.decode_notify(notify)?;
        self.backend.destroy_notify(raw).map_err(|e| {
            if e.kind() == Error::InvalidHandle {
                bad_notify(notify)
            } else {
                CallError::backend(e)
            }
        })
    }

    /// `aclrtRecordNotify`.
    pub(crate) fn record(&self, notify: usize, stream: usize) -> Result<(), CallError> {
        let n = self.decode_notify(notify)?;
        let s = self
            .resolve_stream(stream)
            .map_err(|e| self.notify_first(n, notify, e))?;
        self.backend
            .record(n, s)
            .map_err(|e| self.task_error(n, notify, stream, e))
    }

    /// `aclrtWaitAndResetNotify`.
    pub(crate) fn wait_and_reset(
        &self,
        notify: usize,
        stream: usize,
        timeout: u32,
    ) -> Result<(), CallError> {
        let n = self.decode_notify(notify)?;
        let s = self
            .resolve_stream(stream)
            .map_err(|e| self.notify_first(n, notify, e))?;
        self.backend
            .wait_and_reset(n, s, Timeout::from_c(timeout))
            .map_err(|e| self.task_error(n, notify, stream, e))
    }

    /// For the stream calls, which leave the notify's liveness to the backend (one table
    /// lookup, not two): a stream error `e` stands only if the notify is live — a dead
    /// notify is reported first, as SPEC §3 orders. Runs on the error path only.
    fn notify_first(&self, n: RawNotify, handle: usize, e: CallError) -> CallError {
        if self.backend.notify_is_live(n) {
            e
        } else {
            bad_notify(handle)
        }
    }

    /// A backend error of a stream call: a 107017 for a notify that is not live is reported
    /// with the C handle the caller passed.
    /// A failed record or wait: a 107017 names the handle, notify or stream, in the caller's
    /// terms (a stream destroyed while the call waited for room in its queue gets here).
    fn task_error(&self, n: RawNotify, notify: usize, stream: usize, e: B::Error) -> CallError {
        if e.kind() == Error::InvalidHandle && self.backend.notify_is_live(n) {
            bad_stream(stream)
        } else {
            self.notify_error(n, notify, e)
        }
    }

    fn notify_error(&self, n: RawNotify, handle: usize, e: B::Error) -> CallError {
        if e.kind() == Error::InvalidHandle && !self.backend.notify_is_live(n) {
            bad_notify(handle)
        } else {
            CallError::backend(e)
        }
    }

    /// `aclrtGetNotifyId`.
    pub(crate) fn notify_id(&self, notify: usize) -> Result<u32, CallError> {
        let n = self.notify(notify)?;
        self.backend
            .notify_info(n)
            .map(|i| i.id)
            .map_err(CallError::backend)
    }

    #[inline]
    pub(crate) fn require(&self, feature: Feature) -> Result<(), CallError> {
        let soc = self.backend.soc();
        if soc.has(feature) {
            return Ok(());
        }
        let what = match feature {
            Feature::Notify => "notifies",
            Feature::Ipc => "IPC notifies (export, import, whitelists)",
            Feature::BatchReset => "aclrtNotifyBatchReset",
            Feature::InterServer => "inter-server whitelists",
            Feature::DeviceOnly => "ACL_NOTIFY_DEVICE_USE_ONLY",
            Feature::CntNotify => "count notifies",
            Feature::Event => "events",
            Feature::IpcEvent => "IPC events",
        };
        Err(CallError::new(
            Error::FeatureNotSupport,
            format!("{soc} does not support {what}"),
        ))
    }

    /// `aclrtNotifyGetExportKey` after the NULL checks; returns the key to write.
    #[inline]
    pub(crate) fn export_key(
        &self,
        notify: usize,
        len: usize,
        flags: u64,
    ) -> Result<ExportKey, CallError> {
        let n = self.decode_notify(notify)?;
        // SPEC §3 puts the handle's check before these; when they pass, the backend's own
        // first check of the handle stands for it, so a good call looks the notify up once.
        let flags = self
            .export_args(len, flags)
            .map_err(|e| self.notify_first(n, notify, e))?;
        self.backend
            .export_key(n, flags)
            .map_err(|e| self.notify_error(n, notify, e))
    }

    /// The checks of `aclrtNotifyGetExportKey` that follow the handle's: `len`, the SoC,
    /// the flags.
    #[inline]
    fn export_args(&self, len: usize, flags: u64) -> Result<ExportFlags, CallError> {
        if len < acl_notify_core::key::KEY_BUF_LEN {
            return Err(param(format!(
                "len {len} is too small: a key needs {} bytes with its NUL",
                acl_notify_core::key::KEY_BUF_LEN
            )));
        }
        self.require(Feature::Ipc)?;
        ExportFlags::from_raw(flags).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "flags {flags:#x} are neither ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT nor \
                     ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION"
                ),
            )
        })
    }

    /// `aclrtNotifySetImportPid` after the NULL checks; `pids` is read only when `num > 0`.
    pub(crate) fn set_import_pids<'a>(
        &self,
        notify: usize,
        num: usize,
        pids: impl FnOnce(usize) -> &'a [i32],
    ) -> Result<(), CallError> {
        self.require(Feature::Ipc)?;
        let n = self.notify(notify)?;
        if num == 0 {
            return Err(param("num is 0"));
        }
        // The real runtime passes `num` on as an `int32_t` (hicann/runtime
        // `src/acl/aclrt_impl/notify.cpp`, `aclrtNotifySetImportPidImpl`): a count no int32
        // holds is an invalid argument there, not an over-long whitelist.
        if i32::try_from(num).is_err() {
            return Err(param(format!(
                "num {num} is more than INT32_MAX (the runtime takes the count as an int32_t)"
            )));
        }
        // More than a whitelist holds is refused whole (207012, after the notify's state
        // checks): the backend is handed one PID past the limit, never the rest of the
        // array, so a `num` larger than the caller's array is not read past the limit either.
        let take = num.min(WHITELIST_MAX + 1);
        self.backend
            .set_import_pids(n, pids(take))
            .map_err(|e| match e.kind() {
                Error::OverLimit if num > WHITELIST_MAX => CallError::new(
                    Error::OverLimit,
                    format!("num {num}: a whitelist holds at most {WHITELIST_MAX} processes"),
                ),
                _ => CallError::backend(e),
            })
    }

    /// `aclrtNotifySetImportPidInterServer` after the argument checks. `shape(i)` tells
    /// whether entry `i`'s `pid` is non-NULL and its `num`; `read(i)` reads the entry (called
    /// only once its shape is valid). Entries are checked in order and applied up to the first
    /// failing one.
    pub(crate) fn set_import_server_pids(
        &self,
        notify: usize,
        num: usize,
        mut shape: impl FnMut(usize) -> (bool, usize),
        mut read: impl FnMut(usize) -> ServerPid,
    ) -> Result<(), CallError> {
        let n = self.notify(notify)?;
        let mut ok = Vec::new();
        let mut failure = None;
        for i in 0..num {
            let checked = match shape(i) {
                (false, _) => Err(param(format!("serverPids[{i}].pid is NULL"))),
                (true, count) if count != 1 => Err(param(format!(
                    "serverPids[{i}].num is {count}; each entry must carry exactly 1 PID"
                ))),
                (true, _) => self.require(Feature::InterServer).map(|()| read(i)),
            };
            match checked {
                Ok(e) => ok.push(e),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        if !ok.is_empty() {
            self.backend
                .set_import_server_pids(n, &ok)
                .map_err(CallError::backend)?;
        }
        failure.map_or(Ok(()), Err)
    }

    /// `aclrtNotifyImportByKey` after the NULL checks; `key` is the C string's bytes (at most
    /// 65 read, without the NUL) or `None` if no NUL came within 65 bytes.
    #[inline]
    pub(crate) fn import_by_key(&self, key: Option<&[u8]>, flags: u64) -> Result<usize, CallError> {
        self.require(Feature::Ipc)?;
        let flags = ImportFlags::from_raw(flags).map_err(|e| {
            CallError::new(
                e,
                format!(
                    "flags {:#x}: the low 32 bits must be at most 3",
                    flags & 0xffff_ffff
                ),
            )
        })?;
        let device = self.current_device()?;
        let key = key
            .ok_or(Error::ParamInvalid)
            .and_then(ExportKey::parse)
            .map_err(|e| {
                CallError::new(
                    e,
                    "the key is malformed (not a key aclrtNotifyGetExportKey wrote)",
                )
            })?;
        let raw = self
            .backend
            .import_key(device, &key, flags)
            .map_err(CallError::backend)?;
        self.add_notify(raw)
    }
}

/// A backend whose notify handles the C layer encodes ([`NotifyCodec`]) instead of keeping a
/// table of its own: the backend's table checks them on every call.
pub(crate) trait NotifyHandles {
    /// The tag in bits 48‥63 of every notify handle this backend hands out.
    fn notify_tag(&self) -> u16;
    /// Whether `notify` is a live notify handle of this backend.
    fn notify_is_live(&self, notify: RawNotify) -> bool;
    /// Destroys every notify handle whose device satisfies `which`.
    fn destroy_notifies_where(&self, which: impl FnMut(u32) -> bool);
    /// Discards every stream of the backend whose device satisfies `which` (default streams
    /// and streams being drained included), cancelling them all before waiting for any.
    fn discard_streams_where(&self, which: impl FnMut(u32) -> bool);
    /// Names backend stream `raw` by its C handle in the backend's diagnostics (the wait-for
    /// graph); a backend without them ignores it.
    fn set_stream_alias(&self, _raw: RawStream, _handle: u64) {}
    /// Records of `notify` merged into an already-set flag: (since the last wait, in all).
    fn merged_records(&self, notify: RawNotify) -> Result<(u32, u32), CallError>;
    /// Why backend stream `raw` is not done (its blocked head task, its stored failure), if
    /// the backend can say.
    fn stream_report(&self, _raw: RawStream) -> Option<String> {
        None
    }
}

impl NotifyHandles for acl_notify_sim::Sim {
    fn notify_tag(&self) -> u16 {
        acl_notify_sim::Sim::notify_tag(self)
    }
    fn notify_is_live(&self, notify: RawNotify) -> bool {
        acl_notify_sim::Sim::notify_is_live(self, notify)
    }
    fn destroy_notifies_where(&self, which: impl FnMut(u32) -> bool) {
        acl_notify_sim::Sim::destroy_notifies_where(self, which);
    }
    fn discard_streams_where(&self, which: impl FnMut(u32) -> bool) {
        acl_notify_sim::Sim::discard_streams_where(self, which);
    }
    fn set_stream_alias(&self, raw: RawStream, handle: u64) {
        // The stream was created a moment ago by this thread: it is live.
        let _ = acl_notify_sim::Sim::set_stream_alias(self, raw, handle);
    }
    fn merged_records(&self, notify: RawNotify) -> Result<(u32, u32), CallError> {
        let m = acl_notify_sim::Sim::merged_records(self, notify).map_err(CallError::backend)?;
        Ok((m.since_wait, m.total))
    }
    fn stream_report(&self, raw: RawStream) -> Option<String> {
        acl_notify_sim::Sim::stream_report(self, raw)
    }
}

/// A backend that resets a batch of handles produced one at a time, so the C layer can
/// translate its handles as the backend walks the batch: no intermediate array, one pass.
pub(crate) trait BatchResetWith: Backend {
    /// `batch_reset` where `next(i)` yields element `i` of `num`, or `None` to end the batch
    /// there (the caller's own check failed); see `Sim::batch_reset_with`.
    fn batch_reset_with(
        &self,
        num: usize,
        next: impl FnMut(usize) -> Option<RawNotify>,
    ) -> Result<(), Self::Error>;
}

impl BatchResetWith for acl_notify_sim::Sim {
    fn batch_reset_with(
        &self,
        num: usize,
        next: impl FnMut(usize) -> Option<RawNotify>,
    ) -> Result<(), Self::Error> {
        acl_notify_sim::Sim::batch_reset_with(self, num, next)
    }
}

impl<
    B: NotifyResources
        + StreamOps
        + CntNotifyOps
        + EventOps
        + StreamControl
        + NotifyHandles
        + BatchResetWith,
> Runtime<B>
{
    /// `aclrtNotifyBatchReset` after the array and count checks: `next(i)` yields element `i`
    /// (`num` ≥ 1 of them). Elements are checked in order; the ones before the first failing
    /// element are reset, then that element's code is returned. Element `i` is read only
    /// once the elements before it have passed every check.
    ///
    /// The SoC check (the same for every element) is made once, before element 0 is read;
    /// the handles are decoded as the backend walks the batch, and the backend's own check
    /// of an element's slot stands for the table lookup (its 107017 is reported as this
    /// layer's, naming the C handle).
    pub(crate) fn batch_reset(
        &self,
        num: usize,
        mut next: impl FnMut(usize) -> usize,
    ) -> Result<(), CallError> {
        self.require(Feature::BatchReset)?;
        let mut failure = None;
        let mut last = 0;
        let r = self.backend.batch_reset_with(num, |i| match next(i) {
            0 => {
                failure = Some(param(format!("notifies[{i}] is NULL")));
                None
            }
            h => {
                last = h;
                let raw = self.notifies.decode(h).map(RawNotify);
                if raw.is_none() {
                    failure = Some(bad_notify(h));
                }
                raw
            }
        });
        r.map_err(|e| {
            if e.kind() == Error::InvalidHandle {
                bad_notify(last)
            } else {
                CallError::backend(e)
            }
        })?;
        failure.map_or(Ok(()), Err)
    }
}

/// Count notifies (SPEC §6). The C layer has already checked the pointer arguments, the flag
/// and the info structs; what remains runs here in this order: 207000 on a SoC without count
/// notifies; 107017 bad count-notify handle; then, for stream calls, the stream (107017,
/// 107002, 107003).
impl<B: NotifyResources + StreamOps + CntNotifyOps + EventOps + StreamControl + NotifyHandles>
    Runtime<B>
{
    fn cnt(&self, handle: usize) -> Result<CntEntry, CallError> {
        self.require(Feature::CntNotify)?;
        self.cnts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(handle)
            .ok_or_else(|| {
                CallError::new(
                    Error::InvalidHandle,
                    format!(
                        "count notify {handle:#x} is not a live count notify of this process \
                         (destroyed, from another process or session, or not a count notify)"
                    ),
                )
            })
    }

    /// `aclrtCntNotifyCreate` (after the pointer and flag checks).
    pub(crate) fn cnt_create(&self) -> Result<usize, CallError> {
        self.require(Feature::CntNotify)?;
        let device = self.current_device()?;
        let raw = self
            .backend
            .cnt_create(device)
            .map_err(CallError::backend)?;
        let h = self
            .cnts
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(CntEntry { raw, device });
        h.ok_or_else(|| {
            let _ = self.backend.cnt_destroy(raw);
            CallError::new(
                Error::ResourceAllocFail,
                format!("the process already holds {MAX_HANDLES} count-notify handles"),
            )
        })
    }

    /// `aclrtCntNotifyDestroy`.
    pub(crate) fn cnt_destroy(&self, cnt: usize) -> Result<(), CallError> {
        let c = self.cnt(cnt)?;
        let r = self.backend.cnt_destroy(c.raw);
        if r.is_ok() || r.as_ref().is_err_and(|e| e.kind() == Error::InvalidHandle) {
            self.cnts
                .write()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(cnt);
        }
        r.map_err(CallError::backend)
    }

    /// `aclrtCntNotifyRecord` (and `aclrtCntNotifyReset` as `SET 0`).
    pub(crate) fn cnt_record(
        &self,
        cnt: usize,
        stream: usize,
        record: CntRecord,
    ) -> Result<(), CallError> {
        let c = self.cnt(cnt)?;
        let s = self.resolve_stream(stream)?;
        self.backend
            .cnt_record(c.raw, s, record)
            .map_err(CallError::backend)
    }

    /// `aclrtCntNotifyWaitWithTimeout`.
    pub(crate) fn cnt_wait(
        &self,
        cnt: usize,
        stream: usize,
        wait: CntWait,
    ) -> Result<(), CallError> {
        let c = self.cnt(cnt)?;
        let s = self.resolve_stream(stream)?;
        self.backend
            .cnt_wait(c.raw, s, wait)
            .map_err(CallError::backend)
    }

    /// `aclrtCntNotifyGetId`.
    pub(crate) fn cnt_id(&self, cnt: usize) -> Result<u32, CallError> {
        let c = self.cnt(cnt)?;
        self.backend.cnt_id(c.raw).map_err(CallError::backend)
    }

    /// `aclnsimGetCntNotifyFreeCount`.
    pub(crate) fn cnt_notifies_free(&self, device: i32) -> Result<u32, CallError> {
        self.require(Feature::CntNotify)?;
        let d = self.device_id(device)?;
        self.backend
            .cnt_notifies_free(d)
            .map_err(CallError::backend)
    }
}

/// The simulator's extensions beyond CANN's API (`aclnsim*`), for backends with [`HostOps`].
impl<
    B: NotifyResources + StreamOps + CntNotifyOps + EventOps + StreamControl + NotifyHandles + HostOps,
> Runtime<B>
{
    /// The notify's backend handle, after checking the calling thread's current device is the
    /// owner's: 107017; 107002; 107000.
    fn owner_side(&self, notify: usize) -> Result<RawNotify, CallError> {
        let n = self.notify(notify)?;
        let device = self.current_device()?;
        let info = self.backend.notify_info(n).map_err(CallError::backend)?;
        if info.owner_device != device {
            return Err(param(format!(
                "notify {} is owned by device {}; host-side waits are only possible with the \
                 owner's device current (the current device is {device})",
                info.id, info.owner_device
            )));
        }
        Ok(n)
    }

    /// `aclnsimNotifyHostWait`: `None` waits forever.
    pub(crate) fn host_wait(
        &self,
        notify: usize,
        timeout: Option<Duration>,
    ) -> Result<(), CallError> {
        let raw = self.owner_side(notify)?;
        // "Forever" as a wait the process will not outlive (and that no deadline overflows).
        let t = timeout.unwrap_or(Duration::from_secs(100 * 365 * 24 * 3600));
        self.backend.host_wait(raw, t).map_err(|e| {
            if e.kind() == Error::InvalidHandle {
                CallError::new(
                    Error::InvalidHandle,
                    format!(
                        "notify {notify:#x} was destroyed (by another thread, a reset of its \
                         device, or aclFinalize) while this host wait waited on it"
                    ),
                )
            } else {
                CallError::backend(e)
            }
        })
    }

    /// `aclnsimNotifyTryConsume`.
    pub(crate) fn try_consume(&self, notify: usize) -> Result<bool, CallError> {
        let raw = self.owner_side(notify)?;
        self.backend.try_consume(raw).map_err(CallError::backend)
    }

    /// `aclnsimNotifyGetMergedRecords`: any holder may ask, from any device.
    pub(crate) fn merged_records(&self, notify: usize) -> Result<(u32, u32), CallError> {
        let n = self.notify(notify)?;
        self.backend.merged_records(n)
    }

    /// `aclnsimGetNotifyFreeCount`.
    pub(crate) fn notifies_free(&self, device: i32) -> Result<u32, CallError> {
        let d = self.device_id(device)?;
        self.backend.notifies_free(d).map_err(CallError::backend)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::Soc;
    use acl_notify_sim::Sim;

    use acl_notify_sim::NamespaceGuard as Ns;

    fn runtime(tag: &str) -> (Runtime<Sim>, Ns) {
        let ns = format!("unit-capi-{tag}-{}", std::process::id());
        let _ = Sim::remove_namespace(&ns);
        let sim = Sim::builder()
            .soc(Soc::Ascend910B)
            .devices(2)
            .namespace(&ns)
            .open()
            .unwrap();
        (Runtime::new(sim, 1, 42), Ns(ns))
    }

    /// A record blocked for room in a full stream that is then destroyed: the 107017 names
    /// the caller's stream handle, not the backend's.
    #[test]
    fn a_stream_destroyed_under_a_blocked_record_is_named_by_its_c_handle() {
        let (rt, _ns) = runtime("gone");
        let rt = std::sync::Arc::new(rt);
        rt.set_device(0).unwrap();
        let s = rt.create_stream().unwrap();
        let (gate, n) = (
            rt.create_notify(CreateFlags::empty()).unwrap(),
            rt.create_notify(CreateFlags::empty()).unwrap(),
        );
        rt.wait_and_reset(gate, s, 0).unwrap();
        let rt2 = std::sync::Arc::clone(&rt);
        let filler = std::thread::spawn(move || {
            rt2.set_device(0).unwrap();
            // Fills the queue behind the gate, then blocks for room until the destroy.
            for _ in 0..4096 {
                if let Err(e) = rt2.record(n, s) {
                    return Some(e);
                }
            }
            None
        });
        let queued = std::time::Instant::now();
        while !filler.is_finished() && queued.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!filler.is_finished(), "the filler never blocked");
        rt.destroy_stream(s, StreamDestroy::Discard).unwrap();
        let e = filler
            .join()
            .unwrap()
            .expect("the blocked record succeeded");
        assert_eq!(e.code(), Error::InvalidHandle);
        assert!(e.text().contains(&format!("stream {s:#x}")), "{}", e.text());
    }

    #[test]
    fn batch_reset_resets_the_prefix_and_stops_reading_at_the_failure() {
        let (rt, _ns) = runtime("batch");
        rt.set_device(0).unwrap();
        let h: Vec<usize> = (0..3)
            .map(|_| rt.create_notify(CreateFlags::empty()).unwrap())
            .collect();
        for &n in &h {
            rt.record(n, 0).unwrap();
        }
        rt.synchronize(0, SyncWait::Forever).unwrap();
        // [h0, NULL, h2]: h0 is reset, then 107000; h2 is never read.
        let batch = [h[0], 0, h[2]];
        let mut read = Vec::new();
        let e = rt
            .batch_reset(3, |i| {
                read.push(i);
                batch[i]
            })
            .unwrap_err();
        assert_eq!(e.code(), Error::ParamInvalid);
        assert_eq!(read, [0, 1]);
        assert!(!rt.try_consume(h[0]).unwrap(), "element 0 was not reset");
        assert!(rt.try_consume(h[2]).unwrap(), "element 2 was reset");
        // A dead handle in the middle: 107017, the ones before it reset.
        rt.record(h[0], 0).unwrap();
        rt.record(h[2], 0).unwrap();
        rt.synchronize(0, SyncWait::Forever).unwrap();
        rt.destroy_notify(h[1]).unwrap();
        let batch = [h[0], h[1], h[2]];
        let e = rt.batch_reset(3, |i| batch[i]).unwrap_err();
        assert_eq!(e.code(), Error::InvalidHandle);
        assert!(!rt.try_consume(h[0]).unwrap());
        assert!(rt.try_consume(h[2]).unwrap());
        // All live: every one reset.
        rt.record(h[0], 0).unwrap();
        rt.record(h[2], 0).unwrap();
        rt.synchronize(0, SyncWait::Forever).unwrap();
        rt.batch_reset(2, |i| [h[0], h[2]][i]).unwrap();
        assert!(!rt.try_consume(h[0]).unwrap());
        assert!(!rt.try_consume(h[2]).unwrap());
        for n in [h[0], h[2]] {
            rt.destroy_notify(n).unwrap();
        }
        assert_eq!(
            rt.destroy_notify(h[0]).unwrap_err().code(),
            Error::InvalidHandle
        );
    }
}

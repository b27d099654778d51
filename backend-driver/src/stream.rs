//! Streams ([`StreamOps`]) over the library's `aclrt*Stream*` functions: the stream table's
//! entries (the default stream of a device is one whose C pointer is NULL), create, destroy,
//! synchronize, query, records and waits of notifies on streams, and host functions
//! (`aclrtLaunchHostFunc` through a trampoline).

use std::ffi::c_void;
use std::sync::PoisonError;

use acl_notify_core::{
    Error, HostCall, RawNotify, RawStream, StreamDestroy, StreamOps, StreamStatus, SyncWait,
    Timeout,
};
use acl_notify_handles::{Guard, Lookup};

use crate::ffi;
use crate::notify::Before;
use crate::{CPtr, Driver, DriverError, Inner, StreamEntry, enter};

impl Inner {
    pub(crate) fn stream(&self, s: RawStream) -> Result<Guard<'_, StreamEntry>, DriverError> {
        self.streams
            .acquire(s.0)
            .map_err(|_| DriverError::stale("stream", s.0))
    }
}

impl StreamOps for Driver {
    fn create_stream(&self, device: u32) -> Result<RawStream, DriverError> {
        let i = &*self.inner;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer.
        let code = unsafe { (i.api.aclrtCreateStream)(&mut p) };
        i.check("aclrtCreateStream", code)
            .map_err(|e| e.context(format!("creating a stream on device {device}")))?;
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "aclrtCreateStream reported success but returned a NULL stream",
            ));
        }
        let e = StreamEntry {
            ptr: CPtr(p),
            device,
            is_default: false,
        };
        enter(&i.streams, e, "stream", || {
            // SAFETY: the pointer is in no table; this is its one destruction.
            let _ = unsafe { (i.api.aclrtDestroyStreamForce)(p) };
        })
        .map(RawStream)
    }

    fn default_stream(&self, device: u32) -> Result<RawStream, DriverError> {
        let i = &*self.inner;
        // Validates the device (107001 from the runtime) and creates its context if needed.
        i.ensure_device(device)?;
        let mut defaults = i.defaults.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(h) = defaults.get(&device) {
            return Ok(RawStream(*h));
        }
        let e = StreamEntry {
            ptr: CPtr(core::ptr::null_mut()),
            device,
            is_default: true,
        };
        // A default stream's pointer is NULL: nothing to destroy.
        let h = enter(&i.streams, e, "stream", || {})?;
        defaults.insert(device, h);
        Ok(RawStream(h))
    }

    fn stream_device(&self, stream: RawStream) -> Result<u32, DriverError> {
        Ok(self.inner.stream(stream)?.get().device)
    }

    fn destroy_stream(&self, stream: RawStream, mode: StreamDestroy) -> Result<(), DriverError> {
        let i = &*self.inner;
        let e = i
            .streams
            .begin_close(stream.0, |e| !e.is_default)
            .map_err(|why| match why {
                Lookup::Refused => DriverError::local(
                    Error::InvalidHandle,
                    format!(
                        "stream handle {:#x} is a device's default stream, which cannot be \
                         destroyed",
                        stream.0
                    ),
                ),
                Lookup::Invalid => DriverError::stale("stream", stream.0),
            })?;
        let result = i.ensure_device(e.device).and_then(|()| {
            let (func, name) = match mode {
                StreamDestroy::Drain => (i.api.aclrtDestroyStream, "aclrtDestroyStream"),
                StreamDestroy::Discard => {
                    (i.api.aclrtDestroyStreamForce, "aclrtDestroyStreamForce")
                }
            };
            // SAFETY: the handle is closing and unused; the pointer is a live stream.
            let code = unsafe { func(e.ptr.0) };
            i.check(name, code)
        });
        i.streams.finish_close(stream.0, result.is_ok());
        result.map_err(|e| e.context(format!("stream handle {:#x}", stream.0)))
    }

    fn record(&self, notify: RawNotify, stream: RawStream) -> Result<(), DriverError> {
        let i = &*self.inner;
        let n = i.notify(notify)?;
        let s = i.stream(stream)?;
        let (n, s) = (n.get(), s.get());
        i.ensure_device(s.device)?;
        // SAFETY: both pointers are live (guarded); NULL stream = the device's default stream.
        let code = unsafe { (i.api.aclrtRecordNotify)(n.ptr.0, s.ptr.0) };
        i.check("aclrtRecordNotify", code).map_err(|e| {
            e.context(format!(
                "notify handle {:#x} on stream handle {:#x} (device {})",
                notify.0, stream.0, s.device
            ))
        })
    }

    fn wait_and_reset(
        &self,
        notify: RawNotify,
        stream: RawStream,
        timeout: Timeout,
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let n = i.notify(notify)?;
        let s = i.stream(stream)?;
        let (n, s) = (n.get(), s.get());
        i.ensure_device(s.device)?;
        // SAFETY: both pointers are live (guarded).
        let code = unsafe { (i.api.aclrtWaitAndResetNotify)(n.ptr.0, s.ptr.0, timeout.to_c()) };
        i.check("aclrtWaitAndResetNotify", code).map_err(|e| {
            e.context(format!(
                "notify handle {:#x} (owner device {}) on stream handle {:#x} (device {})",
                notify.0, n.owner_device, stream.0, s.device
            ))
        })
    }

    fn batch_reset(&self, notifies: &[RawNotify]) -> Result<(), DriverError> {
        let i = &*self.inner;
        // Take a guard on each element in order, up to the first one that is not live.
        let mut guards = Vec::with_capacity(notifies.len());
        let mut bad = None;
        for (k, n) in notifies.iter().enumerate() {
            match i.notifies.acquire(n.0) {
                Ok(g) => guards.push(g),
                Err(_) => {
                    bad = Some(k);
                    break;
                }
            }
        }
        // The runtime checks elements in order and stops at the first failure, earlier ones
        // staying reset. A dead handle must not reach it, so it gets the live prefix, and the
        // dead element is answered here, after the prefix succeeded (which also proves the SoC
        // has batch reset). With no live prefix, the element's own check order decides.
        if bad == Some(0) {
            return Err(i
                .invalid_notify(notifies[0], Before::BatchReset)
                .context("element 0 of the batch"));
        }
        if let Some(first) = guards.first() {
            i.ensure_device(first.get().device)?;
        }
        let mut ptrs: Vec<*mut c_void> = guards.iter().map(|g| g.get().ptr.0).collect();
        let n = ptrs.len();
        if ptrs.is_empty() {
            ptrs.push(core::ptr::null_mut()); // a valid array pointer for num == 0
        }
        // SAFETY: `ptrs` holds `n` live notify pointers (each guarded until after the call).
        let code = unsafe { (i.api.aclrtNotifyBatchReset)(ptrs.as_mut_ptr(), n) };
        i.check("aclrtNotifyBatchReset", code)
            .map_err(|e| e.context(format!("batch of {} notifies", notifies.len())))?;
        drop(guards);
        match bad {
            Some(k) => Err(DriverError::stale("notify", notifies[k].0).context(format!(
                "element {k} of the batch (elements before it were reset)"
            ))),
            None => Ok(()),
        }
    }

    fn synchronize(&self, stream: RawStream, wait: SyncWait) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.stream(stream)?;
        let s = g.get();
        i.ensure_device(s.device)?;
        let (code, func) = match wait {
            // SAFETY: live stream pointer (guarded) or NULL for the default stream.
            SyncWait::Forever => (
                unsafe { (i.api.aclrtSynchronizeStream)(s.ptr.0) },
                "aclrtSynchronizeStream",
            ),
            SyncWait::AtMost(d) => {
                // Round up so the call never gives up before `d` has passed; -1 is "forever",
                // so the longest finite wait is i32::MAX ms (about 24.8 days).
                let ms = d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
                (
                    // SAFETY: as above.
                    unsafe { (i.api.aclrtSynchronizeStreamWithTimeout)(s.ptr.0, ms) },
                    "aclrtSynchronizeStreamWithTimeout",
                )
            }
        };
        i.check(func, code).map_err(|e| {
            e.context(format!(
                "stream handle {:#x} (device {})",
                stream.0, s.device
            ))
        })
    }

    fn query(&self, stream: RawStream) -> Result<StreamStatus, DriverError> {
        let i = &*self.inner;
        let g = i.stream(stream)?;
        let s = g.get();
        i.ensure_device(s.device)?;
        let mut status = -1i32;
        // SAFETY: live stream pointer (or NULL = default); valid out-pointer. The C enum is an
        // `int`.
        let code = unsafe { (i.api.aclrtStreamQuery)(s.ptr.0, &mut status) };
        i.check("aclrtStreamQuery", code)
            .map_err(|e| e.context(format!("stream handle {:#x}", stream.0)))?;
        match status {
            ffi::ACL_STREAM_STATUS_COMPLETE => Ok(StreamStatus::Complete),
            ffi::ACL_STREAM_STATUS_NOT_READY => Ok(StreamStatus::NotReady),
            other => Err(DriverError::local(
                Error::DrvInternalError,
                format!("aclrtStreamQuery returned an unknown status {other}"),
            )),
        }
    }

    fn launch_host_func(&self, stream: RawStream, call: HostCall) -> Result<(), DriverError> {
        let i = &*self.inner;
        let g = i.stream(stream)?;
        let s = g.get();
        i.ensure_device(s.device)?;
        let boxed = Box::into_raw(Box::new(call));
        // SAFETY: live stream pointer; `trampoline` takes ownership of `boxed` when the stream
        // runs it (once). A task the runtime discards (force-destroy) leaks the box, which is
        // only a few bytes.
        let code =
            unsafe { (i.api.aclrtLaunchHostFunc)(s.ptr.0, trampoline, boxed.cast::<c_void>()) };
        if code != 0 {
            // SAFETY: the runtime refused the task, so it never got `boxed`; reclaim it.
            drop(unsafe { Box::from_raw(boxed) });
        }
        i.check("aclrtLaunchHostFunc", code)
            .map_err(|e| e.context(format!("stream handle {:#x}", stream.0)))
    }

    fn set_op_wait_timeout(&self, seconds: u32) -> Result<(), DriverError> {
        let i = &*self.inner;
        // SAFETY: integer argument.
        let code = unsafe { (i.api.aclrtSetOpWaitTimeout)(seconds) };
        i.check("aclrtSetOpWaitTimeout", code)
    }
}

/// Runs a boxed [`HostCall`] handed to `aclrtLaunchHostFunc`.
///
/// # Safety
///
/// `arg` must be NULL or a `Box<HostCall>` leaked by `launch_host_func`, passed exactly once.
unsafe extern "C" fn trampoline(arg: *mut c_void) {
    if arg.is_null() {
        return;
    }
    // SAFETY: `arg` is the `Box<HostCall>` leaked by `launch_host_func`, passed back exactly
    // once by the runtime.
    let call = unsafe { Box::from_raw(arg.cast::<HostCall>()) };
    call.call();
}

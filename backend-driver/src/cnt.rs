//! Count notifies (SPEC §6) over the library's `aclrtCntNotify*` functions. They exist only in
//! CANN releases for the 950 family, so every symbol is optional: a library without them, like
//! a SoC without count notifies, answers 207000 (`FeatureNotSupport`) to every call, before
//! any handle is looked at.
//!
//! Handles live in their own table (kind `CntNotify`), so a notify or stream handle passed as a
//! count notify is 107017 without reaching C. The record and wait infos are the core's
//! `#[repr(C)]` [`CntRecordInfo`]/[`CntWaitInfo`], whose layouts (8 and 16 bytes) are CANN's.

use core::ffi::c_void;

use acl_notify_core::cnt::{CntRecordInfo, CntWaitInfo};
use acl_notify_core::{CntNotifyOps, CntRecord, CntWait, Error, Feature, RawCntNotify, RawStream};

use crate::{CPtr, Driver, DriverError, Inner, device_arg, enter};

/// What the driver knows about one count-notify handle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CntEntry {
    pub(crate) ptr: CPtr,
    pub(crate) device: u32,
}

impl Inner {
    /// 207000 unless the SoC has count notifies; then `Some(f)` if the library exports `f`.
    fn cnt_fn<F: Copy>(&self, f: Option<F>, symbol: &str) -> Result<F, DriverError> {
        self.require(Feature::CntNotify, "count notifies")?;
        self.exported(
            f,
            symbol,
            " (count notifies need a CANN release for the Ascend 950 family)",
        )
    }

    fn cnt_guard(
        &self,
        c: RawCntNotify,
    ) -> Result<acl_notify_handles::Guard<'_, CntEntry>, DriverError> {
        self.cnts
            .acquire(c.0)
            .map_err(|_| DriverError::stale("count notify", c.0))
    }

    /// Destroys every count notify left (the driver is being dropped).
    pub(crate) fn drain_cnts(&self) {
        let Some(destroy) = self.api.aclrtCntNotifyDestroy else {
            return;
        };
        for c in self.cnts.drain() {
            if self.ensure_device(c.device).is_err() {
                continue;
            }
            // SAFETY: the pointer came from aclrtCntNotifyCreate and leaves the table here, so
            // this is its one destruction.
            let _ = unsafe { destroy(c.ptr.0) };
        }
    }
}

impl CntNotifyOps for Driver {
    fn cnt_create(&self, device: u32) -> Result<RawCntNotify, DriverError> {
        let i = &*self.inner;
        let f = i.cnt_fn(i.api.aclrtCntNotifyCreate, "aclrtCntNotifyCreate")?;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; the reserved flag is 0.
        let code = unsafe { f(&mut p, 0) };
        i.check("aclrtCntNotifyCreate", code)
            .map_err(|e| e.context(format!("creating a count notify on device {device}")))?;
        if p.is_null() {
            return Err(DriverError::local(
                Error::DrvInternalError,
                "aclrtCntNotifyCreate reported success but returned NULL",
            ));
        }
        let e = CntEntry {
            ptr: CPtr(p),
            device,
        };
        enter(&i.cnts, e, "count-notify", || {
            if let Some(destroy) = i.api.aclrtCntNotifyDestroy {
                // SAFETY: `p` was just created and is in no table: its one destruction.
                let _ = unsafe { destroy(p) };
            }
        })
        .map(RawCntNotify)
    }

    fn cnt_destroy(&self, cnt: RawCntNotify) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.cnt_fn(i.api.aclrtCntNotifyDestroy, "aclrtCntNotifyDestroy")?;
        let e = i
            .cnts
            .begin_close(cnt.0, |_| true)
            .map_err(|_| DriverError::stale("count notify", cnt.0))?;
        let result = i.ensure_device(e.device).and_then(|()| {
            // SAFETY: the handle is closing and no call is using it; the pointer is live.
            let code = unsafe { f(e.ptr.0) };
            i.check("aclrtCntNotifyDestroy", code)
        });
        i.cnts.finish_close(cnt.0, result.is_ok());
        result.map_err(|e| e.context(format!("count notify handle {:#x}", cnt.0)))
    }

    fn cnt_id(&self, cnt: RawCntNotify) -> Result<u32, DriverError> {
        let i = &*self.inner;
        let f = i.cnt_fn(i.api.aclrtCntNotifyGetId, "aclrtCntNotifyGetId")?;
        let g = i.cnt_guard(cnt)?;
        let e = g.get();
        i.ensure_device(e.device)?;
        let mut id = 0u32;
        // SAFETY: live pointer (guarded), valid out-pointer.
        let code = unsafe { f(e.ptr.0, &mut id) };
        i.check("aclrtCntNotifyGetId", code)
            .map_err(|err| err.context(format!("count notify handle {:#x}", cnt.0)))?;
        Ok(id)
    }

    fn cnt_record(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        record: CntRecord,
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.cnt_fn(i.api.aclrtCntNotifyRecord, "aclrtCntNotifyRecord")?;
        let c = i.cnt_guard(cnt)?;
        let s = i.stream(stream)?;
        let (c, s) = (c.get(), s.get());
        i.ensure_device(s.device)?;
        let mut info: CntRecordInfo = record.to_info();
        // SAFETY: live pointers (guarded); `info` is CANN's 8-byte layout and outlives the call.
        let code = unsafe { f(c.ptr.0, s.ptr.0, &mut info) };
        i.check("aclrtCntNotifyRecord", code).map_err(|e| {
            e.context(format!(
                "count notify handle {:#x} on stream handle {:#x} (device {})",
                cnt.0, stream.0, s.device
            ))
        })
    }

    fn cnt_wait(
        &self,
        cnt: RawCntNotify,
        stream: RawStream,
        wait: CntWait,
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.cnt_fn(
            i.api.aclrtCntNotifyWaitWithTimeout,
            "aclrtCntNotifyWaitWithTimeout",
        )?;
        let c = i.cnt_guard(cnt)?;
        let s = i.stream(stream)?;
        let (c, s) = (c.get(), s.get());
        i.ensure_device(s.device)?;
        let mut info: CntWaitInfo = wait.to_info();
        // SAFETY: live pointers (guarded); `info` is CANN's 16-byte layout (isClear 0 or 1:
        // also a valid `bool` for runtimes that read it through their internal
        // `rtCntNotifyWaitInfo_t`) and outlives the call.
        let code = unsafe { f(c.ptr.0, s.ptr.0, &mut info) };
        i.check("aclrtCntNotifyWaitWithTimeout", code).map_err(|e| {
            e.context(format!(
                "count notify handle {:#x} (device {}) on stream handle {:#x} (device {})",
                cnt.0, c.device, stream.0, s.device
            ))
        })
    }

    fn cnt_reset(&self, cnt: RawCntNotify, stream: RawStream) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.cnt_fn(i.api.aclrtCntNotifyReset, "aclrtCntNotifyReset")?;
        let c = i.cnt_guard(cnt)?;
        let s = i.stream(stream)?;
        let (c, s) = (c.get(), s.get());
        i.ensure_device(s.device)?;
        // SAFETY: live pointers (guarded).
        let code = unsafe { f(c.ptr.0, s.ptr.0) };
        i.check("aclrtCntNotifyReset", code).map_err(|e| {
            e.context(format!(
                "count notify handle {:#x} on stream handle {:#x}",
                cnt.0, stream.0
            ))
        })
    }

    fn cnt_notifies_free(&self, device: u32) -> Result<u32, DriverError> {
        let i = &*self.inner;
        let f = i.cnt_fn(
            i.api.aclnsimGetCntNotifyFreeCount,
            "aclnsimGetCntNotifyFreeCount",
        )?;
        let d = device_arg(device)?;
        let mut n = 0u32;
        // SAFETY: integer argument, valid out-pointer.
        let code = unsafe { f(d, &mut n) };
        i.check("aclnsimGetCntNotifyFreeCount", code)
            .map_err(|e| e.context(format!("device {device}")))?;
        Ok(n)
    }
}

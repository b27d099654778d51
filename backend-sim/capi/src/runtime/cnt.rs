//! The count-notify calls of [`Runtime`] (SPEC §6).

use acl_notify_core::{
    BackendError, CntNotifyOps, CntRecord, CntWait, Error, Feature, RawCntNotify,
};

use crate::errmsg::CallError;
use crate::handle::not_live;

use super::Runtime;

/// What a count-notify handle stands for.
#[derive(Clone, Copy, Debug)]
pub(super) struct CntEntry {
    pub(super) raw: RawCntNotify,
    /// The device it was created on.
    pub(super) device: u32,
}

/// Count notifies (SPEC §6). The C layer has already checked the pointer arguments, the flag
/// and the info structs; what remains runs here in this order: 207000 on a SoC without count
/// notifies; 107017 bad count-notify handle; then, for stream calls, the stream (107017,
/// 107002, 107003).
impl Runtime {
    fn cnt(&self, handle: usize) -> Result<CntEntry, CallError> {
        self.require(Feature::CntNotify)?;
        self.cnts
            .get(handle)
            .ok_or_else(|| not_live("count notify", "a count notify", handle))
    }

    /// `aclrtCntNotifyCreate` (after the pointer and flag checks).
    pub(crate) fn cnt_create(&self) -> Result<usize, CallError> {
        self.require(Feature::CntNotify)?;
        let device = self.current_device()?;
        let raw = self
            .backend
            .cnt_create(device)
            .map_err(CallError::backend)?;
        self.cnts.insert(CntEntry { raw, device }).inspect_err(|_| {
            let _ = self.backend.cnt_destroy(raw);
        })
    }

    /// `aclrtCntNotifyDestroy`.
    pub(crate) fn cnt_destroy(&self, cnt: usize) -> Result<(), CallError> {
        let c = self.cnt(cnt)?;
        let r = self.backend.cnt_destroy(c.raw);
        if r.is_ok() || r.as_ref().is_err_and(|e| e.kind() == Error::InvalidHandle) {
            self.cnts.remove(cnt);
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
        let s = self.resolve_task_stream(stream)?;
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
        let s = self.resolve_task_stream(stream)?;
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

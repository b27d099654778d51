//! The simulator's extensions of [`Runtime`] (`aclnsim*`): host-side waits, merged records,
//! budgets.

use std::time::Duration;

use acl_notify_core::{BackendError, Error, HostOps, NotifyResources, RawNotify};

use crate::errmsg::{CallError, param};

use super::Runtime;

/// The simulator's extensions beyond CANN's API (`aclnsim*`), for backends with [`HostOps`].
impl Runtime {
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
        let m = self.backend.merged_records(n).map_err(CallError::backend)?;
        Ok((m.since_wait, m.total))
    }

    /// `aclnsimGetNotifyFreeCount`.
    pub(crate) fn notifies_free(&self, device: i32) -> Result<u32, CallError> {
        let d = self.device_id(device)?;
        self.backend.notifies_free(d).map_err(CallError::backend)
    }
}

//! Typed count notifies (SPEC §6): [`Device::create_cnt_notify`] exists only for SoC types with
//! count notifies (the 950 family, and [`AnySoc`](crate::soc::AnySoc), which checks at run
//! time), so asking an Ascend 910B for one does not compile. A [`CntNotify`] destroys itself
//! when dropped.

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use crate::backend::{CntNotifyOps, NotifyResources, RawCntNotify, StreamOps};
use crate::cnt::{CntRecord, CntWait};
use crate::soc::{Feature, SocType};

use super::{Device, Stream};

/// A count notify on a device of SoC type `C`, created through [`Device::create_cnt_notify`].
pub struct CntNotify<'b, C: SocType, B: CntNotifyOps> {
    backend: &'b B,
    device: u32,
    raw: RawCntNotify,
    _soc: PhantomData<C>,
}

impl<'b, C: crate::soc::CntNotify, B: NotifyResources + StreamOps + CntNotifyOps> Device<'b, C, B> {
    /// Creates a count notify (count 0) on this device.
    ///
    /// Codes: 207000 (only for [`AnySoc`](crate::soc::AnySoc) on a SoC without count
    /// notifies); 207009 the device is out of count-notify ids.
    pub fn create_cnt_notify(&self) -> Result<CntNotify<'b, C, B>, B::Error> {
        if C::FIXED.is_none() {
            self.soc
                .require(Feature::CntNotify)
                .map_err(B::Error::from)?;
        }
        let raw = self.backend.cnt_create(self.id)?;
        Ok(CntNotify {
            backend: self.backend,
            device: self.id,
            raw,
            _soc: PhantomData,
        })
    }
}

impl<'b, C: SocType, B: CntNotifyOps> CntNotify<'b, C, B> {
    /// The device it lives on.
    pub fn device(&self) -> u32 {
        self.device
    }

    /// Its id (`aclrtCntNotifyGetId`).
    pub fn id(&self) -> Result<u32, B::Error> {
        self.backend.cnt_id(self.raw)
    }

    /// Enqueues a record on `stream` (any device's).
    pub fn record(&self, stream: &Stream<'b, B>, record: CntRecord) -> Result<(), B::Error> {
        self.backend.cnt_record(self.raw, stream.raw, record)
    }

    /// Enqueues a wait on `stream`, which must be on this count notify's device (else 107000).
    pub fn wait(&self, stream: &Stream<'b, B>, wait: CntWait) -> Result<(), B::Error> {
        self.backend.cnt_wait(self.raw, stream.raw, wait)
    }

    /// Enqueues a reset (count = 0) on `stream`.
    pub fn reset(&self, stream: &Stream<'b, B>) -> Result<(), B::Error> {
        self.backend.cnt_reset(self.raw, stream.raw)
    }

    /// The backend handle; the caller now destroys it.
    pub fn into_raw(self) -> RawCntNotify {
        ManuallyDrop::new(self).raw
    }

    /// Destroys it and reports the result (dropping does the same, silently).
    pub fn destroy(self) -> Result<(), B::Error> {
        let me = ManuallyDrop::new(self);
        me.backend.cnt_destroy(me.raw)
    }
}

impl<C: SocType, B: CntNotifyOps> Drop for CntNotify<'_, C, B> {
    fn drop(&mut self) {
        let _ = self.backend.cnt_destroy(self.raw);
    }
}

impl<C: SocType, B: CntNotifyOps> fmt::Debug for CntNotify<'_, C, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CntNotify")
            .field("device", &self.device)
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

//! Device buffers in the typed API: `DeviceBuffer<C, S, B>`, with the lifecycle states of
//! notifies. An owner's buffer is [`Created`], then [`Exported`] (importers must be
//! whitelisted) or [`ExportedOpen`] (anyone with the key), [`Exported`] becomes
//! [`Whitelisted`] once a PID is allowed; another process's buffer is [`Imported`].
//!
//! What CANN's API allows and the types do not: whitelisting a buffer that was not exported,
//! or one exported without PID validation; exporting or whitelisting an imported buffer;
//! freeing an imported buffer (it is closed instead) or any buffer twice. An import takes an
//! [`ExportKey`], which only an export makes (or a key's text parsed back), so an unexported
//! buffer cannot be imported by construction.

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use super::{Created, Device, Exported, ExportedOpen, Imported, State, Whitelisted};
use crate::backend::{DeviceMemory, NotifyResources, StreamOps};
use crate::key::ExportKey;
use crate::soc::SocType;

/// What an export returns: the buffer in its new state and the key, or, on failure, the
/// buffer unchanged and the error.
pub type ExportResult<'b, C, T, S, B> = Result<
    (DeviceBuffer<'b, C, T, B>, ExportKey),
    (
        DeviceBuffer<'b, C, S, B>,
        <B as crate::backend::Backend>::Error,
    ),
>;

/// States whose buffer this process owns (it frees it; it may export it).
pub trait OwnedBuffer: State {}
impl OwnedBuffer for Created {}
impl OwnedBuffer for Exported {}
impl OwnedBuffer for ExportedOpen {}
impl OwnedBuffer for Whitelisted {}

/// A device allocation (or another process's, imported) of `size` bytes on a device of SoC
/// `C`, in lifecycle state `S`, over backend `B`. Dropping it frees it (an owner's; its export
/// withdrawn first) or closes it (an import), ignoring the result.
pub struct DeviceBuffer<'b, C: SocType, S: State, B: DeviceMemory + NotifyResources + StreamOps> {
    device: Device<'b, C, B>,
    ptr: u64,
    size: usize,
    key: Option<ExportKey>,
    _state: PhantomData<S>,
}

impl<C: SocType, S: State, B: DeviceMemory + NotifyResources + StreamOps> fmt::Debug
    for DeviceBuffer<'_, C, S, B>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &self.ptr)
            .field("size", &self.size)
            .field("state", &S::KIND)
            .finish_non_exhaustive()
    }
}

impl<C: SocType, S: State, B: DeviceMemory + NotifyResources + StreamOps> Drop
    for DeviceBuffer<'_, C, S, B>
{
    fn drop(&mut self) {
        let b = self.device.backend;
        if let Some(k) = &self.key {
            let _ = b.mem_close(self.device.id, k);
        }
        if S::KIND != crate::lifecycle::Lifecycle::Imported {
            let _ = b.mem_free(self.device.id, self.ptr);
        }
    }
}

impl<'b, C: SocType, B: DeviceMemory + NotifyResources + StreamOps> Device<'b, C, B> {
    /// `size` bytes of device memory on this device (`aclrtMalloc`).
    ///
    /// Codes: 107000 size 0; 207001 out of device memory.
    pub fn alloc(&self, size: usize) -> Result<DeviceBuffer<'b, C, Created, B>, B::Error> {
        let ptr = self.backend.mem_alloc(self.id, size)?;
        Ok(DeviceBuffer::wrap(*self, ptr, size, None))
    }

    /// Maps another process's exported buffer for use on this device
    /// (`aclrtIpcMemImportByKey`); `enable_peer` is the import flag ENABLE_PEER_ACCESS.
    ///
    /// Codes: 207000 no IPC memory; 107000 no such export; 207006 not whitelisted or no peer
    /// access.
    pub fn import_buffer(
        &self,
        key: &ExportKey,
        size: usize,
        enable_peer: bool,
    ) -> Result<DeviceBuffer<'b, C, Imported, B>, B::Error> {
        let flags = if enable_peer {
            crate::backend::MEM_IMPORT_ENABLE_PEER_ACCESS
        } else {
            0
        };
        let ptr = self.backend.mem_import(self.id, key, flags)?;
        Ok(DeviceBuffer::wrap(*self, ptr, size, Some(*key)))
    }
}

impl<'b, C: SocType, S: State, B: DeviceMemory + NotifyResources + StreamOps>
    DeviceBuffer<'b, C, S, B>
{
    fn wrap(device: Device<'b, C, B>, ptr: u64, size: usize, key: Option<ExportKey>) -> Self {
        DeviceBuffer {
            device,
            ptr,
            size,
            key,
            _state: PhantomData,
        }
    }

    fn into_state<T: State>(self, key: Option<ExportKey>) -> DeviceBuffer<'b, C, T, B> {
        let me = ManuallyDrop::new(self);
        DeviceBuffer::wrap(me.device, me.ptr, me.size, key)
    }

    /// The device address (opaque: host code must not dereference it).
    pub const fn ptr(&self) -> u64 {
        self.ptr
    }

    /// Size in bytes (for an import: what the importer said it expects).
    pub const fn size(&self) -> usize {
        self.size
    }

    /// Copies `src` into the buffer at byte `offset` (`aclrtMemcpy` host to device).
    ///
    /// Codes: 107000 the range leaves the buffer.
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), B::Error> {
        self.device
            .backend
            .mem_write(self.device.id, self.ptr + offset as u64, src)
    }

    /// Copies from the buffer at byte `offset` into `dst` (`aclrtMemcpy` device to host).
    ///
    /// Codes: 107000 the range leaves the buffer.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), B::Error> {
        self.device
            .backend
            .mem_read(self.device.id, self.ptr + offset as u64, dst)
    }
}

impl<'b, C: SocType, S: OwnedBuffer, B: DeviceMemory + NotifyResources + StreamOps>
    DeviceBuffer<'b, C, S, B>
{
    /// Frees the buffer (`aclrtFree`; an export is withdrawn first). The handle is gone
    /// whatever the result.
    pub fn free(self) -> Result<(), B::Error> {
        let me = ManuallyDrop::new(self);
        let b = me.device.backend;
        if let Some(k) = &me.key {
            b.mem_close(me.device.id, k)?;
        }
        b.mem_free(me.device.id, me.ptr)
    }
}

impl<'b, C: SocType, B: DeviceMemory + NotifyResources + StreamOps>
    DeviceBuffer<'b, C, Created, B>
{
    /// Exports the whole buffer with PID validation (`aclrtIpcMemGetExportKey`, flags 0).
    /// On failure the buffer comes back unchanged.
    pub fn export(self) -> ExportResult<'b, C, Exported, Created, B> {
        match self
            .device
            .backend
            .mem_export(self.device.id, self.ptr, self.size, 0)
        {
            Ok(k) => Ok((self.into_state(Some(k)), k)),
            Err(e) => Err((self, e)),
        }
    }

    /// Exports the whole buffer without PID validation (anyone with the key may import).
    pub fn export_open(self) -> ExportResult<'b, C, ExportedOpen, Created, B> {
        match self.device.backend.mem_export(
            self.device.id,
            self.ptr,
            self.size,
            crate::backend::MEM_EXPORT_DISABLE_PID_VALIDATION,
        ) {
            Ok(k) => Ok((self.into_state(Some(k)), k)),
            Err(e) => Err((self, e)),
        }
    }
}

impl<'b, C: SocType, B: DeviceMemory + NotifyResources + StreamOps>
    DeviceBuffer<'b, C, Exported, B>
{
    /// Whitelists importers (`aclrtIpcMemSetImportPid`).
    pub fn allow_pids(
        self,
        pids: &[i32],
    ) -> Result<DeviceBuffer<'b, C, Whitelisted, B>, (Self, B::Error)> {
        let Some(k) = self.key else {
            return Ok(self.into_state(None));
        };
        match self.device.backend.mem_allow_pids(self.device.id, &k, pids) {
            Ok(()) => Ok(self.into_state(Some(k))),
            Err(e) => Err((self, e)),
        }
    }
}

impl<'b, C: SocType, B: DeviceMemory + NotifyResources + StreamOps>
    DeviceBuffer<'b, C, Whitelisted, B>
{
    /// Whitelists more importers.
    pub fn allow_more_pids(&self, pids: &[i32]) -> Result<(), B::Error> {
        match &self.key {
            Some(k) => self.device.backend.mem_allow_pids(self.device.id, k, pids),
            None => Ok(()),
        }
    }
}

impl<'b, C: SocType, B: DeviceMemory + NotifyResources + StreamOps>
    DeviceBuffer<'b, C, Imported, B>
{
    /// Closes the import (`aclrtIpcMemClose`). The handle is gone whatever the result.
    pub fn close(self) -> Result<(), B::Error> {
        let me = ManuallyDrop::new(self);
        match &me.key {
            Some(k) => me.device.backend.mem_close(me.device.id, k),
            None => Ok(()),
        }
    }
}

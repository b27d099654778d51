//! The core's device-memory interface ([`acl_notify_core::DeviceMemory`]) on the simulator:
//! the typed API's buffers and the conformance suite's memory rows. Arguments are checked in
//! the C ABI's order (`backend-sim/capi/src/ipc_memory.rs`): sizes, flags and counts first,
//! then the SoC, then the key.

use acl_notify_core::key::ExportKey;
use acl_notify_core::{
    Error, MEM_EXPORT_DISABLE_PID_VALIDATION, MEM_IMPORT_ENABLE_PEER_ACCESS, ServerPid,
};

use super::MemcpyKind;
use crate::Sim;
use crate::error::SimError;

/// 107000 unless `flags` is 0 or `one` (CANN's flag words have one flag each).
fn flags_ok(flags: u64, one: u64, what: &str) -> Result<bool, SimError> {
    match flags {
        0 => Ok(false),
        f if f == one => Ok(true),
        f => Err(SimError::new(
            Error::ParamInvalid,
            format!("{what} flags {f:#x}: only 0 and {one:#x} exist"),
        )),
    }
}

fn none_given(count: usize) -> Result<(), SimError> {
    if count == 0 {
        return Err(SimError::new(Error::ParamInvalid, "no PIDs given"));
    }
    Ok(())
}

impl acl_notify_core::DeviceMemory for Sim {
    fn mem_alloc(&self, device: u32, size: usize) -> Result<u64, SimError> {
        self.malloc(device, size, 0).map(|p| p as u64)
    }

    fn mem_free(&self, _device: u32, ptr: u64) -> Result<(), SimError> {
        self.free(ptr as usize)
    }

    fn mem_write(&self, _device: u32, dst: u64, src: &[u8]) -> Result<(), SimError> {
        // SAFETY: the host side is `src`, valid for its length during the call.
        unsafe {
            self.memcpy(
                dst as usize,
                src.len(),
                src.as_ptr().expose_provenance(),
                src.len(),
                MemcpyKind::HostToDevice,
            )
        }
    }

    fn mem_read(&self, _device: u32, src: u64, dst: &mut [u8]) -> Result<(), SimError> {
        // SAFETY: the host side is `dst`, valid for writing its length during the call.
        unsafe {
            self.memcpy(
                dst.as_mut_ptr().expose_provenance(),
                dst.len(),
                src as usize,
                dst.len(),
                MemcpyKind::DeviceToHost,
            )
        }
    }

    fn mem_copy(&self, _device: u32, dst: u64, src: u64, len: usize) -> Result<(), SimError> {
        // SAFETY: both sides are device ranges, checked by `memcpy` (no host side).
        unsafe {
            self.memcpy(
                dst as usize,
                len,
                src as usize,
                len,
                MemcpyKind::DeviceToDevice,
            )
        }
    }

    fn mem_export(
        &self,
        _device: u32,
        ptr: u64,
        size: usize,
        flags: u64,
    ) -> Result<ExportKey, SimError> {
        if size == 0 {
            return Err(SimError::new(Error::ParamInvalid, "size is 0"));
        }
        let open = flags_ok(flags, MEM_EXPORT_DISABLE_PID_VALIDATION, "export")?;
        self.ipc_mem_export(ptr as usize, size, open)
    }

    fn mem_allow_pids(&self, _device: u32, key: &ExportKey, pids: &[i32]) -> Result<(), SimError> {
        none_given(pids.len())?;
        self.ipc_mem_set_pids(key, pids)
    }

    fn mem_allow_server_pids(
        &self,
        _device: u32,
        key: &ExportKey,
        entries: &[ServerPid],
    ) -> Result<(), SimError> {
        none_given(entries.len())?;
        self.ipc_mem_set_server_pids(key, entries)
    }

    fn mem_import(&self, device: u32, key: &ExportKey, flags: u64) -> Result<u64, SimError> {
        let peer = flags_ok(flags, MEM_IMPORT_ENABLE_PEER_ACCESS, "import")?;
        self.ipc_mem_import(device, key, peer).map(|p| p as u64)
    }

    fn mem_close(&self, _device: u32, key: &ExportKey) -> Result<(), SimError> {
        self.ipc_mem_close(key)
    }

    fn mem_set_attr(
        &self,
        _device: u32,
        key: &ExportKey,
        kind: u32,
        attr: u64,
    ) -> Result<(), SimError> {
        self.ipc_mem_set_attr(key, kind, attr)
    }
}

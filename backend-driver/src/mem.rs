//! Device memory and IPC memory ([`DeviceMemory`]) over the library's `aclrtMalloc`,
//! `aclrtFree`, `aclrtMemcpy` and `aclrtIpcMem*`. The symbols are optional (see `ffi.rs`):
//! without one, its calls answer 207000. Device addresses are the library's pointers, passed
//! back unchanged and never dereferenced here.

use core::ffi::{c_char, c_void};

use acl_notify_core::key::{ExportKey, KEY_BUF_LEN};
use acl_notify_core::{DeviceMemory, ServerPid};

use crate::{Driver, DriverError};

/// `ACL_MEMCPY_HOST_TO_DEVICE`, `ACL_MEMCPY_DEVICE_TO_HOST` and `ACL_MEMCPY_DEVICE_TO_DEVICE`.
const H2D: u32 = 1;
const D2H: u32 = 2;
const D2D: u32 = 3;

/// The key as a NUL-terminated C string.
fn c_key(key: &ExportKey) -> [u8; KEY_BUF_LEN] {
    let mut buf = [0u8; KEY_BUF_LEN];
    let b = key.as_bytes();
    buf[..b.len()].copy_from_slice(b);
    buf
}

fn ptr(addr: u64) -> *mut c_void {
    core::ptr::with_exposed_provenance_mut(addr as usize)
}

impl DeviceMemory for Driver {
    fn mem_alloc(&self, device: u32, size: usize) -> Result<u64, DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtMalloc, "aclrtMalloc", "")?;
        i.ensure_device(device)?;
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer; policy 0 is ACL_MEM_MALLOC_HUGE_FIRST.
        i.check("aclrtMalloc", unsafe { f(&mut p, size, 0) })?;
        Ok(p.expose_provenance() as u64)
    }

    fn mem_free(&self, device: u32, addr: u64) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtFree, "aclrtFree", "")?;
        i.ensure_device(device)?;
        // SAFETY: an address the library handed out (it checks it).
        i.check("aclrtFree", unsafe { f(ptr(addr)) })
    }

    fn mem_write(&self, device: u32, dst: u64, src: &[u8]) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtMemcpy, "aclrtMemcpy", "")?;
        i.ensure_device(device)?;
        // SAFETY: the host side is `src`, valid for its length; the device side is checked
        // by the library.
        let code = unsafe { f(ptr(dst), src.len(), src.as_ptr().cast(), src.len(), H2D) };
        i.check("aclrtMemcpy", code)
    }

    fn mem_read(&self, device: u32, src: u64, dst: &mut [u8]) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtMemcpy, "aclrtMemcpy", "")?;
        i.ensure_device(device)?;
        // SAFETY: the host side is `dst`, valid for writing its length.
        let code = unsafe { f(dst.as_mut_ptr().cast(), dst.len(), ptr(src), dst.len(), D2H) };
        i.check("aclrtMemcpy", code)
    }

    fn mem_copy(&self, device: u32, dst: u64, src: u64, len: usize) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtMemcpy, "aclrtMemcpy", "")?;
        i.ensure_device(device)?;
        // SAFETY: both sides are device addresses, checked by the library.
        i.check("aclrtMemcpy", unsafe {
            f(ptr(dst), len, ptr(src), len, D2D)
        })
    }

    fn mem_export(
        &self,
        device: u32,
        addr: u64,
        size: usize,
        flags: u64,
    ) -> Result<ExportKey, DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtIpcMemGetExportKey, "aclrtIpcMemGetExportKey", "")?;
        i.ensure_device(device)?;
        let mut buf = [0u8; KEY_BUF_LEN];
        // SAFETY: `buf` holds KEY_BUF_LEN bytes, the length passed.
        let code = unsafe {
            f(
                ptr(addr),
                size,
                buf.as_mut_ptr().cast::<c_char>(),
                buf.len(),
                flags,
            )
        };
        i.check("aclrtIpcMemGetExportKey", code)?;
        let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        ExportKey::from_runtime(&buf[..n]).map_err(|e| {
            DriverError::local(
                e,
                "aclrtIpcMemGetExportKey wrote a key that is not printable",
            )
        })
    }

    fn mem_allow_pids(
        &self,
        device: u32,
        key: &ExportKey,
        pids: &[i32],
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtIpcMemSetImportPid, "aclrtIpcMemSetImportPid", "")?;
        i.ensure_device(device)?;
        let k = c_key(key);
        let mut pids = pids.to_vec();
        // SAFETY: a NUL-terminated key and `pids.len()` readable PIDs.
        let code = unsafe { f(k.as_ptr().cast(), pids.as_mut_ptr(), pids.len()) };
        i.check("aclrtIpcMemSetImportPid", code)
    }

    fn mem_allow_server_pids(
        &self,
        device: u32,
        key: &ExportKey,
        entries: &[ServerPid],
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(
            i.api.aclrtIpcMemImportPidInterServer,
            "aclrtIpcMemImportPidInterServer",
            "",
        )?;
        i.ensure_device(device)?;
        let k = c_key(key);
        let (pids, mut elems) = crate::ffi::server_pid_array(entries);
        // SAFETY: a NUL-terminated key; `elems` has `entries.len()` (+1 spare) elements, each
        // pointing at one PID of `pids`, which lives until after the call.
        let code = unsafe { f(k.as_ptr().cast(), elems.as_mut_ptr(), entries.len()) };
        drop(elems);
        drop(pids);
        i.check("aclrtIpcMemImportPidInterServer", code)
    }

    fn mem_import(&self, device: u32, key: &ExportKey, flags: u64) -> Result<u64, DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtIpcMemImportByKey, "aclrtIpcMemImportByKey", "")?;
        i.ensure_device(device)?;
        let k = c_key(key);
        let mut p: *mut c_void = core::ptr::null_mut();
        // SAFETY: valid out-pointer and a NUL-terminated key.
        let code = unsafe { f(&mut p, k.as_ptr().cast(), flags) };
        i.check("aclrtIpcMemImportByKey", code)?;
        Ok(p.expose_provenance() as u64)
    }

    fn mem_close(&self, device: u32, key: &ExportKey) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtIpcMemClose, "aclrtIpcMemClose", "")?;
        i.ensure_device(device)?;
        let k = c_key(key);
        // SAFETY: a NUL-terminated key.
        i.check("aclrtIpcMemClose", unsafe { f(k.as_ptr().cast()) })
    }

    fn mem_set_attr(
        &self,
        device: u32,
        key: &ExportKey,
        kind: u32,
        attr: u64,
    ) -> Result<(), DriverError> {
        let i = &*self.inner;
        let f = i.exported(i.api.aclrtIpcMemSetAttr, "aclrtIpcMemSetAttr", "")?;
        i.ensure_device(device)?;
        let k = c_key(key);
        // SAFETY: a NUL-terminated key.
        i.check("aclrtIpcMemSetAttr", unsafe {
            f(k.as_ptr().cast(), kind, attr)
        })
    }
}

//! `aclrtMemsetD32` / `aclrtMemsetD32Async`: memory filled with a 32-bit word, done as CANN's
//! runtime does it (hicann/runtime `src/runtime/api/impl/api_impl_standard_soc.cc`,
//! `ApiImpl::MemsetD32[Async]`, and `src/runtime/core/src/memory/common_memset_d32.cpp`):
//! host memory the runtime knows is written at once, by the calling thread, even by the
//! asynchronous form (which then does not wait for the stream's earlier tasks); device memory
//! gets a host buffer filled with the word, copied host to device — synchronously, or as a
//! copy task queued on the stream that holds the buffer until it has run. So the copy paths
//! check and move the bytes (VMM mappings, IPC memory), and a failed check writes nothing.

use acl_notify_core::{Error, RawStream};

use super::location::MemLocation;
use super::{MemcpyKind, within};
use crate::Sim;
use crate::error::SimError;

/// Writes `n` copies of `value` at `to`.
///
/// # Safety
///
/// `to` is 4-byte aligned and valid for writing `n * 4` bytes.
unsafe fn fill(to: *mut u32, value: u32, n: usize) {
    for i in 0..n {
        // SAFETY: within the `n` words the caller guarantees.
        unsafe { to.add(i).write(value) };
    }
}

impl Sim {
    /// `aclrtMemsetD32` (`stream` `None`) or `aclrtMemsetD32Async`: `n` 32-bit words of
    /// `value` (native byte order, as the device's) from `dst`, which must be 4-byte aligned,
    /// with `n * 4 <= max`. Host memory of `aclrtMallocHost` is written at once (see the
    /// module docs); device memory through a host-to-device copy of a filled buffer.
    ///
    /// Errors: 107000 `dst` not 4-byte aligned, `n * 4` above `max`, memory that is neither
    /// (host memory the runtime does not know, freed memory), a range outside its allocation
    /// (or the copy path's own refusals: IPC memory of another device or host takes no
    /// host-to-device copy); 207001 no host memory for the buffer; with a stream 107017,
    /// 107003, 507002.
    pub fn memset_d32(
        &self,
        dst: usize,
        max: usize,
        value: u32,
        n: usize,
        stream: Option<RawStream>,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            if n == 0 {
                return Ok(());
            }
            if !dst.is_multiple_of(4) {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!("{dst:#x} is not 4-byte aligned"),
                ));
            }
            let bytes = n.checked_mul(4).ok_or_else(|| {
                SimError::new(Error::ParamInvalid, format!("N {n} words overflow a size"))
            })?;
            within(bytes, max, "memSize")?;
            match self.mem_location(dst) {
                MemLocation::Host { .. } => {
                    self.mem().host.range(dst, bytes)?;
                    // SAFETY: 4-byte aligned (checked), inside one `aclrtMallocHost` block of
                    // this process (checked just now); freeing it meanwhile is the caller's
                    // race, as for `aclrtMemset`.
                    unsafe { fill(std::ptr::with_exposed_provenance_mut(dst), value, n) };
                    Ok(())
                }
                MemLocation::Device { .. } => self.fill_device(dst, max, value, n, bytes, stream),
                MemLocation::Unmapped | MemLocation::Unregistered => {
                    let mut msg = format!(
                        "{dst:#x} is neither memory of aclrtMalloc nor of aclrtMallocHost (the \
                         memory aclrtMemsetD32 takes)"
                    );
                    self.explain(&mut msg, dst);
                    Err(SimError::new(Error::ParamInvalid, msg))
                }
            }
        })
    }

    /// The device side of [`memset_d32`](Self::memset_d32): a buffer of `bytes` host bytes
    /// filled with `value`, copied to `dst`.
    fn fill_device(
        &self,
        dst: usize,
        max: usize,
        value: u32,
        n: usize,
        bytes: usize,
        stream: Option<RawStream>,
    ) -> Result<(), SimError> {
        // No allocation is larger than a device: refused before a buffer of that size is made.
        if bytes as u64 > self.device_memory() {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "N {n} words ({bytes} bytes) is more than a device's memory ({} bytes): no \
                     allocation holds them",
                    self.device_memory()
                ),
            ));
        }
        let host = &self.mem().host;
        let buf = host.alloc(bytes).ok_or_else(|| {
            SimError::new(
                Error::MemoryAllocation,
                format!("cannot allocate the {bytes}-byte host buffer of aclrtMemsetD32"),
            )
        })?;
        // SAFETY: a fresh block of `bytes` bytes, page aligned.
        unsafe { fill(std::ptr::with_exposed_provenance_mut(buf), value, n) };
        // SAFETY: the buffer is a live block of `bytes` bytes; a queued copy holds it (its
        // host side's block, `queued::QueuedSide`) until it has run.
        let r = unsafe {
            match stream {
                None => self.memcpy(dst, max, buf, bytes, MemcpyKind::HostToDevice),
                Some(s) => self.memcpy_async(dst, max, buf, bytes, MemcpyKind::HostToDevice, s),
            }
        };
        // Out of the table (the program never saw it); freed once no queued copy holds it.
        host.release(buf);
        r
    }
}

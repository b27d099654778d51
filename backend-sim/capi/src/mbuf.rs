//! The exported shared-buffer functions (`acl_rt.h`: `aclrtAllocBuf`, `aclrtFreeBuf`,
//! `aclrtGetBufData`, `aclrtGetBufDataLen`, `aclrtSetBufDataLen`, `aclrtGetBufUserData`,
//! `aclrtSetBufUserData`, `aclrtCopyBufRef`, `aclrtAppendBufChain`, `aclrtGetBufChainNum`,
//! `aclrtGetBufFromChain`) over the session's table of buffers (`runtime::mbufs`, which says
//! what a buffer is and which of its rules are CANN's and which the simulator's). A buffer's
//! data region is device memory of the current device, allocated as `aclrtMallocAlign32`
//! allocates, so it counts in `aclrtGetMemInfo` and copies reach it.
//!
//! Check order, from hicann/runtime `src/acl/aclrt_impl/memory.cpp` (`aclrt*BufImpl`): for
//! the user-data calls `size + offset` above 96 first, then NULL pointers (100000), and a size
//! of 0 for `aclrtAllocBuf` (100000); then `src/runtime/api/api_c_mbuf.cc` and the driver: a
//! handle that is not a live buffer of this session is 107017 (`RT_ERROR_DRV_INVALID_HANDLE`,
//! `src/runtime/core/src/common/errcode_manage.cc`), a bad value 107000, no memory 207001.

use std::ffi::c_void;

use acl_notify_core::Error;
use acl_notify_sim::mem::Rounding;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Out, OutArray, aclError, api};
use crate::runtime::mbufs::{DATA_MAX, PRIV_SIZE};
use crate::session::runtime;

/// The user-data calls' first check: 100000 when `offset + size` passes the 96-byte private
/// area.
fn user_range(size: usize, offset: usize) -> Result<std::ops::Range<usize>, CallError> {
    match offset.checked_add(size) {
        Some(end) if end <= PRIV_SIZE => Ok(offset..end),
        _ => Err(CallError::new(
            Error::InvalidParam,
            format!(
                "the sum of size ({size}) and offset ({offset}) is greater than {PRIV_SIZE}, \
                 the size of a buffer's private data area"
            ),
        )),
    }
}

/// `aclError aclrtAllocBuf(aclrtMbuf *buf, size_t size)`: a buffer whose data region is
/// `size` bytes of the current device's memory.
///
/// Codes: 100000 buf NULL, size 0; 107000 size above 4 GiB; 107002 no current device; 207001
/// out of device memory.
///
/// # Safety
///
/// `buf` is NULL or valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtAllocBuf(buf: *mut *mut c_void, size: usize) -> aclError {
    api("aclrtAllocBuf", || {
        // SAFETY: `buf` is NULL or writable, by the caller's contract.
        unsafe { Out::new(buf) }.write(
            || null_arg("buf"),
            || {
                if size == 0 {
                    return Err(CallError::new(Error::InvalidParam, "size is 0"));
                }
                if size > DATA_MAX {
                    return Err(param(format!(
                        "size {size} is more than 4 GiB, the largest data region of a buffer"
                    )));
                }
                let rt = runtime()?;
                let device = rt.current_device()?;
                let sim = rt.backend();
                let data = sim
                    .malloc_rounded(device, size, 0, Rounding::Align32)
                    .map_err(CallError::backend)?;
                let h = rt.mbufs.insert(data, size, |d| {
                    let _ = sim.free(d);
                })?;
                Ok(std::ptr::without_provenance_mut(h as usize))
            },
        )
    })
}

/// Frees data regions no buffer names any more; a region that cannot be freed (`aclrtFree`
/// refuses a region, but a device reset may have taken it) is reported, not fatal (the
/// buffer is gone either way).
fn free_regions(call: &str, sim: &acl_notify_sim::Sim, regions: Vec<usize>) {
    for d in regions {
        if let Err(e) = sim.free(d) {
            crate::errmsg::push(format!(
                "{call} warning: the data region {d:#x} could not be freed: {e}"
            ));
        }
    }
}

/// `aclError aclrtFreeBuf(aclrtMbuf buf)`: frees `buf` and, if it heads a chain, the chain's
/// buffers; a data region is freed with the last buffer naming it (`aclrtCopyBufRef`).
///
/// Codes: 100000 NULL; 107017 not a live buffer of this session; 107000 a buffer of another
/// buffer's chain (freed with its head).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtFreeBuf(buf: *mut c_void) -> aclError {
    api("aclrtFreeBuf", || {
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        let rt = runtime()?;
        let mut last = Vec::new();
        rt.mbufs.free(buf.addr() as u64, |d| last.push(d))?;
        free_regions("aclrtFreeBuf", rt.backend(), last);
        Ok(())
    })
}

/// `aclError aclrtGetBufData(const aclrtMbuf buf, void **dataPtr, size_t *size)`: the data
/// region's device address and size.
///
/// Codes: 100000 NULL; 107017.
///
/// # Safety
///
/// `data_ptr` and `size` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetBufData(
    buf: *mut c_void,
    data_ptr: *mut *mut c_void,
    size: *mut usize,
) -> aclError {
    // SAFETY: each NULL or writable, by the caller's contract.
    let (data_ptr, size) = unsafe { (Out::new(data_ptr), Out::new(size)) };
    api("aclrtGetBufData", || {
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        let data_ptr = data_ptr.check(|| null_arg("dataPtr"))?;
        let size = size.check(|| null_arg("size"))?;
        let d = runtime()?.mbufs.data(buf.addr() as u64)?;
        data_ptr.put(std::ptr::with_exposed_provenance_mut(d.addr));
        size.put(d.size);
        Ok(())
    })
}

/// `aclError aclrtGetBufDataLen(aclrtMbuf buf, size_t *len)`: the valid data length (0 until
/// `aclrtSetBufDataLen`).
///
/// Codes: 100000 NULL; 107017.
///
/// # Safety
///
/// `len` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetBufDataLen(buf: *mut c_void, len: *mut usize) -> aclError {
    api("aclrtGetBufDataLen", || {
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        // SAFETY: `len` is NULL or writable, by the caller's contract.
        unsafe { Out::new(len) }.write(
            || null_arg("len"),
            || runtime()?.mbufs.len(buf.addr() as u64),
        )
    })
}

/// `aclError aclrtSetBufDataLen(aclrtMbuf buf, size_t len)`.
///
/// Codes: 100000 NULL; 107017; 107000 len above the data region's size.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtSetBufDataLen(buf: *mut c_void, len: usize) -> aclError {
    api("aclrtSetBufDataLen", || {
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        runtime()?.mbufs.set_len(buf.addr() as u64, len)
    })
}

/// `aclError aclrtGetBufUserData(const aclrtMbuf buf, void *dataPtr, size_t size, size_t
/// offset)`: `size` bytes of the private data area from `offset`, into `dataPtr`.
///
/// Codes: 100000 offset + size above 96, NULL; 107017.
///
/// # Safety
///
/// `data_ptr` is NULL or valid for writing `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetBufUserData(
    buf: *mut c_void,
    data_ptr: *mut c_void,
    size: usize,
    offset: usize,
) -> aclError {
    // SAFETY: NULL or writable for `size` bytes, by the caller's contract.
    let out = unsafe { OutArray::new(data_ptr.cast::<u8>(), size) };
    api("aclrtGetBufUserData", || {
        let range = user_range(size, offset)?;
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        let out = out.check(|| null_arg("dataPtr"))?;
        runtime()?
            .mbufs
            .with_private(buf.addr() as u64, |p| out.put_slice(&p[range]))
    })
}

/// `aclError aclrtSetBufUserData(aclrtMbuf buf, const void *dataPtr, size_t size, size_t
/// offset)`: `size` bytes from `dataPtr` into the private data area from `offset`.
///
/// Codes: 100000 offset + size above 96, NULL; 107017.
///
/// # Safety
///
/// `data_ptr` is NULL or valid for reading `size` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetBufUserData(
    buf: *mut c_void,
    data_ptr: *const c_void,
    size: usize,
    offset: usize,
) -> aclError {
    api("aclrtSetBufUserData", || {
        let range = user_range(size, offset)?;
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        if data_ptr.is_null() {
            return Err(null_arg("dataPtr"));
        }
        runtime()?.mbufs.with_private(buf.addr() as u64, |p| {
            let to = &mut p[range];
            // SAFETY: the caller guarantees `size` readable bytes, which cannot overlap the
            // table's own memory.
            unsafe { std::ptr::copy_nonoverlapping(data_ptr.cast(), to.as_mut_ptr(), to.len()) }
        })
    })
}

/// `aclError aclrtCopyBufRef(const aclrtMbuf buf, aclrtMbuf *newBuf)`: a new buffer on the
/// same data region (which lives until both are freed), starting with `buf`'s private data
/// and data length, in no chain.
///
/// Codes: 100000 NULL; 107017; 207001 the process holds the most buffers it can.
///
/// # Safety
///
/// `new_buf` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCopyBufRef(buf: *mut c_void, new_buf: *mut *mut c_void) -> aclError {
    api("aclrtCopyBufRef", || {
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        // SAFETY: `new_buf` is NULL or writable, by the caller's contract.
        unsafe { Out::new(new_buf) }.write(
            || null_arg("newBuf"),
            || {
                let h = runtime()?.mbufs.copy_ref(buf.addr() as u64)?;
                Ok(std::ptr::without_provenance_mut(h as usize))
            },
        )
    })
}

/// `aclError aclrtAppendBufChain(aclrtMbuf headBuf, aclrtMbuf buf)`: `buf` becomes the last
/// buffer of `headBuf`'s chain (at most 128), and is freed with it.
///
/// Codes: 100000 NULL; 107017 either not live; 107000 headBuf in another buffer's chain, buf
/// headBuf itself, in a chain or heading one, a full chain.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAppendBufChain(head_buf: *mut c_void, buf: *mut c_void) -> aclError {
    api("aclrtAppendBufChain", || {
        if head_buf.is_null() {
            return Err(null_arg("headBuf"));
        }
        if buf.is_null() {
            return Err(null_arg("buf"));
        }
        runtime()?
            .mbufs
            .append(head_buf.addr() as u64, buf.addr() as u64)
    })
}

/// `aclError aclrtGetBufChainNum(aclrtMbuf headBuf, uint32_t *num)`: the buffers of
/// `headBuf`'s chain, `headBuf` included (1 for a buffer on its own).
///
/// Codes: 100000 NULL; 107017; 107000 headBuf in another buffer's chain.
///
/// # Safety
///
/// `num` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetBufChainNum(head_buf: *mut c_void, num: *mut u32) -> aclError {
    api("aclrtGetBufChainNum", || {
        if head_buf.is_null() {
            return Err(null_arg("headBuf"));
        }
        // SAFETY: `num` is NULL or writable, by the caller's contract.
        unsafe { Out::new(num) }.write(
            || null_arg("num"),
            || runtime()?.mbufs.chain_len(head_buf.addr() as u64),
        )
    })
}

/// `aclError aclrtGetBufFromChain(aclrtMbuf headBuf, uint32_t index, aclrtMbuf *buf)`:
/// buffer `index` of `headBuf`'s chain (0: `headBuf`).
///
/// Codes: 100000 NULL; 107017; 107000 index past the chain's end, headBuf in another
/// buffer's chain.
///
/// # Safety
///
/// `buf` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtGetBufFromChain(
    head_buf: *mut c_void,
    index: u32,
    buf: *mut *mut c_void,
) -> aclError {
    api("aclrtGetBufFromChain", || {
        if head_buf.is_null() {
            return Err(null_arg("headBuf"));
        }
        // SAFETY: `buf` is NULL or writable, by the caller's contract.
        unsafe { Out::new(buf) }.write(
            || null_arg("buf"),
            || {
                let h = runtime()?.mbufs.chain_get(head_buf.addr() as u64, index)?;
                Ok(std::ptr::without_provenance_mut(h as usize))
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_data_range_is_checked_first_against_96_bytes() {
        assert_eq!(user_range(96, 0).unwrap(), 0..96);
        assert_eq!(user_range(0, 96).unwrap(), 96..96);
        assert_eq!(user_range(90, 7).unwrap_err().code().code(), 100000);
        assert_eq!(user_range(usize::MAX, 2).unwrap_err().code().code(), 100000);
        // Before the NULL checks, as CANN orders them.
        // SAFETY: NULL pointers are valid arguments (refused before any use).
        let rc = unsafe { aclrtSetBufUserData(std::ptr::null_mut(), std::ptr::null(), 97, 0) };
        assert_eq!(rc, 100000);
        // SAFETY: take_recent returns a NUL-terminated string alive until its next call.
        let msg = unsafe { std::ffi::CStr::from_ptr(crate::errmsg::take_recent()) };
        assert!(msg.to_string_lossy().contains("greater than 96"), "{msg:?}");
    }
}

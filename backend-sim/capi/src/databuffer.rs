//! `aclDataBuffer`: an address and a size, kept for the caller (`aclCreateDataBuffer`,
//! `aclDestroyDataBuffer`, `aclUpdateDataBuffer`, `aclGetDataBufferAddr`,
//! `aclGetDataBufferSize[V2]`), as CANN's ACL layer keeps them (hicann/runtime
//! `src/acl/aclrt_impl/data_buffer.cpp`): nothing is checked about the address or the size (a
//! NULL address is a valid buffer, for an output to be filled later), no session is needed
//! (they work before `aclInit` and after `aclFinalize`), and a NULL buffer is 100000 for
//! destroy and update, NULL or 0 for the getters.
//!
//! CANN hands out a pointer to its object, so a destroyed or forged one is undefined
//! behaviour there; here an `aclDataBuffer *` is a handle of the crate's handle slab (one
//! process-wide table, [`crate::handle`]), so such a pointer is answered as a NULL one is,
//! with a message naming it, and a caller who dereferences one faults at once.

use acl_notify_core::Error;

use crate::errmsg::{self, CallError, null_arg};
use crate::ffi::{aclError, api};
use crate::handle::{Kind, ProcessTable, process_table};

/// What a data buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DataBuffer {
    /// The caller's address, kept as a number: it is only handed back.
    data: usize,
    size: usize,
}

/// The process's data buffers (a forked child's are its parent's, copied at its first call;
/// see [`ProcessTable`]).
static BUFFERS: ProcessTable<DataBuffer> = process_table!(Kind::DataBuffer, "data buffers");

/// 100000 for a pointer that is not a live data buffer of this process.
fn not_live(handle: usize) -> CallError {
    CallError::new(
        Error::InvalidParam,
        format!(
            "dataBuffer {handle:#x} is not a live aclDataBuffer of this process (destroyed, \
             or not made by aclCreateDataBuffer)"
        ),
    )
}

/// The live data buffer `handle`; 100000 for NULL or anything else.
fn buffer(handle: usize) -> Result<DataBuffer, CallError> {
    if handle == 0 {
        return Err(null_arg("dataBuffer"));
    }
    BUFFERS.get(handle).ok_or_else(|| not_live(handle))
}

/// A getter's answer: the buffer's field, or `none` (recording why) for NULL or a dead handle.
fn read<T>(call: &str, handle: usize, none: T, field: impl FnOnce(DataBuffer) -> T) -> T {
    match buffer(handle) {
        Ok(b) => field(b),
        Err(e) => {
            errmsg::record(call, &e);
            none
        }
    }
}

/// `aclDataBuffer *aclCreateDataBuffer(void *data, size_t size)`: a buffer describing
/// `size` bytes at `data` (either may be 0). NULL only when the process already holds
/// [`crate::handle::MAX_HANDLES`] data buffers (the message says so, 207001).
#[unsafe(no_mangle)]
pub extern "C" fn aclCreateDataBuffer(
    data: *mut core::ffi::c_void,
    size: usize,
) -> *mut core::ffi::c_void {
    let mut out = 0;
    api("aclCreateDataBuffer", || {
        out = BUFFERS.insert(DataBuffer {
            data: data.addr(),
            size,
        })?;
        Ok(())
    });
    crate::ffi::to_ptr(out)
}

/// `aclError aclDestroyDataBuffer(const aclDataBuffer *dataBuffer)`: forgets the buffer (not
/// the memory it describes, which stays the caller's).
///
/// Codes: 100000 NULL, or not a live data buffer.
#[unsafe(no_mangle)]
pub extern "C" fn aclDestroyDataBuffer(data_buffer: *const core::ffi::c_void) -> aclError {
    api("aclDestroyDataBuffer", || {
        let h = data_buffer.addr();
        if h == 0 {
            return Err(null_arg("dataBuffer"));
        }
        BUFFERS.remove(h).map(drop).ok_or_else(|| not_live(h))
    })
}

/// `aclError aclUpdateDataBuffer(aclDataBuffer *dataBuffer, void *data, size_t size)`: the
/// buffer describes `size` bytes at `data` from now on.
///
/// Codes: 100000 NULL, or not a live data buffer.
#[unsafe(no_mangle)]
pub extern "C" fn aclUpdateDataBuffer(
    data_buffer: *mut core::ffi::c_void,
    data: *mut core::ffi::c_void,
    size: usize,
) -> aclError {
    api("aclUpdateDataBuffer", || {
        let h = data_buffer.addr();
        if h == 0 {
            return Err(null_arg("dataBuffer"));
        }
        BUFFERS
            .update(h, |b| {
                *b = DataBuffer {
                    data: data.addr(),
                    size,
                }
            })
            .ok_or_else(|| not_live(h))
    })
}

/// `void *aclGetDataBufferAddr(const aclDataBuffer *dataBuffer)`: its address; NULL for a
/// NULL or dead buffer (with a message).
#[unsafe(no_mangle)]
pub extern "C" fn aclGetDataBufferAddr(
    data_buffer: *const core::ffi::c_void,
) -> *mut core::ffi::c_void {
    let data = read("aclGetDataBufferAddr", data_buffer.addr(), 0, |b| b.data);
    // The caller's own pointer, handed back: the address is all it had (C gave it as a
    // number of its own memory), so it gets its provenance back where C uses it.
    std::ptr::with_exposed_provenance_mut(data)
}

/// `uint32_t aclGetDataBufferSize(const aclDataBuffer *dataBuffer)` (deprecated): its size
/// cut to 32 bits, as CANN's `static_cast<uint32_t>`; 0 for a NULL or dead buffer (with a
/// message).
#[unsafe(no_mangle)]
pub extern "C" fn aclGetDataBufferSize(data_buffer: *const core::ffi::c_void) -> u32 {
    read("aclGetDataBufferSize", data_buffer.addr(), 0, |b| {
        b.size as u32
    })
}

/// `size_t aclGetDataBufferSizeV2(const aclDataBuffer *dataBuffer)`: its size; 0 for a NULL
/// or dead buffer (with a message).
#[unsafe(no_mangle)]
pub extern "C" fn aclGetDataBufferSizeV2(data_buffer: *const core::ffi::c_void) -> usize {
    read("aclGetDataBufferSizeV2", data_buffer.addr(), 0, |b| b.size)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_void;

    fn ptr(n: usize) -> *mut c_void {
        crate::ffi::to_ptr(n)
    }

    #[test]
    fn a_buffer_keeps_what_it_was_given_until_destroyed() {
        let mut bytes = [0u8; 64];
        let p = bytes.as_mut_ptr().cast::<c_void>();
        let b = aclCreateDataBuffer(p, 64);
        assert!(!b.is_null());
        assert_eq!(aclGetDataBufferAddr(b), p);
        assert_eq!(aclGetDataBufferSizeV2(b), 64);
        assert_eq!(aclGetDataBufferSize(b), 64);
        let big = (1usize << 32) + 5;
        assert_eq!(aclUpdateDataBuffer(b, p.wrapping_add(8), big), 0);
        assert_eq!(aclGetDataBufferAddr(b), p.wrapping_add(8));
        assert_eq!(aclGetDataBufferSizeV2(b), big);
        assert_eq!(aclGetDataBufferSize(b), 5, "cut to 32 bits, as CANN's cast");
        assert_eq!(aclDestroyDataBuffer(b), 0);
        // Gone: every call refuses it as a NULL one.
        assert_eq!(aclDestroyDataBuffer(b), 100_000);
        assert_eq!(aclUpdateDataBuffer(b, p, 1), 100_000);
        assert!(aclGetDataBufferAddr(b).is_null());
        assert_eq!(aclGetDataBufferSizeV2(b), 0);
        let msg = crate::errmsg::take_recent();
        assert!(!msg.is_null());
    }

    #[test]
    fn null_and_forged_buffers_are_refused() {
        // A NULL address with size 0 is a valid buffer (an output filled later).
        let empty = aclCreateDataBuffer(std::ptr::null_mut(), 0);
        assert!(!empty.is_null());
        assert!(aclGetDataBufferAddr(empty).is_null());
        assert_eq!(aclDestroyDataBuffer(empty), 0);
        let _ = crate::errmsg::take_recent();
        for bad in [0usize, 0x1000, usize::MAX] {
            assert_eq!(aclDestroyDataBuffer(ptr(bad)), 100_000, "{bad:#x}");
            assert_eq!(aclUpdateDataBuffer(ptr(bad), ptr(1), 1), 100_000);
            assert!(aclGetDataBufferAddr(ptr(bad)).is_null());
            assert_eq!(aclGetDataBufferSize(ptr(bad)), 0);
            assert_eq!(aclGetDataBufferSizeV2(ptr(bad)), 0);
        }
        // SAFETY: take_recent returns a NUL-terminated string valid until the next call.
        let msg = unsafe { std::ffi::CStr::from_ptr(crate::errmsg::take_recent()) }
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("aclGetDataBufferSizeV2 failed"), "{msg}");
        assert!(msg.contains("not a live aclDataBuffer"), "{msg}");
        assert!(msg.contains("`dataBuffer` is NULL"), "{msg}");
    }

    /// A child forked while another thread of the parent is inside a data buffer call (holds
    /// the table's lock) makes and reads buffers of its own instead of waiting for ever for
    /// the parent's lock (it did: a plain process-wide table); a child forked while the table
    /// is free still finds the parent's buffers.
    #[test]
    fn a_child_forked_while_the_table_is_locked_does_not_wait_for_it() {
        let mine = aclCreateDataBuffer(ptr(0x1000), 16);
        assert!(!mine.is_null());
        let ok = crate::forked::in_child_while_held(
            || BUFFERS.held(),
            || {
                let b = aclCreateDataBuffer(ptr(0x2000), 32);
                !b.is_null() && aclGetDataBufferSizeV2(b) == 32 && aclDestroyDataBuffer(b) == 0
            },
        );
        assert_eq!(
            ok,
            Some(true),
            "the child waited 20 s for its parent's lock"
        );
        let inherited = crate::forked::in_child(|| aclGetDataBufferSizeV2(mine) == 16);
        assert_eq!(
            inherited,
            Some(true),
            "the child lost its parent's data buffer"
        );
        assert_eq!(aclDestroyDataBuffer(mine), 0);
    }
}

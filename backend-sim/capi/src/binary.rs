//! `aclrtBinary`: the description of a kernel binary held in the caller's memory
//! (`aclrtCreateBinary`, `aclrtDestroyBinary`), as CANN's ACL layer keeps it (hicann/runtime
//! `src/acl/aclrt_impl/kernel.cpp`: the address and the length are kept, nothing of the bytes
//! is read or copied, a length of 0 is accepted; a NULL `data` is NULL, a NULL binary to
//! destroy 100000). Host-side only: loading it (`aclrtBinaryLoad`) needs a device kernel,
//! which the simulator does not run (207000).
//!
//! As for data buffers, an `aclrtBinary` here is a handle of the crate's handle slab, so a
//! destroyed or forged one is refused with 100000 and a message instead of freed twice.

use acl_notify_core::Error;

use crate::errmsg::{CallError, null_arg};
use crate::ffi::{aclError, api};
use crate::handle::{Kind, ProcessTable, process_table};

/// What a binary description holds: the caller's bytes, kept as numbers (only handed on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Binary {
    data: usize,
    len: usize,
}

/// The process's binary descriptions (a forked child's are its parent's, copied at its
/// first call; see [`ProcessTable`]).
static BINARIES: ProcessTable<Binary> = process_table!(Kind::Binary, "binaries");

/// `aclrtBinary aclrtCreateBinary(const void *data, size_t dataLen)`: a description of the
/// `dataLen` bytes at `data`, which stay the caller's (and must stay valid while it is used).
/// NULL for a NULL `data` (with a message), or when the process already holds
/// [`crate::handle::MAX_HANDLES`] of them (207001).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCreateBinary(
    data: *const core::ffi::c_void,
    data_len: usize,
) -> *mut core::ffi::c_void {
    let mut out = 0;
    api("aclrtCreateBinary", || {
        if data.is_null() {
            return Err(null_arg("data"));
        }
        out = BINARIES.insert(Binary {
            data: data.addr(),
            len: data_len,
        })?;
        Ok(())
    });
    crate::ffi::to_ptr(out)
}

/// `aclError aclrtDestroyBinary(aclrtBinary binary)`: forgets the description (not the bytes
/// it describes).
///
/// Codes: 100000 NULL, or not a live binary of this process.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyBinary(binary: *mut core::ffi::c_void) -> aclError {
    api("aclrtDestroyBinary", || {
        let h = binary.addr();
        if h == 0 {
            return Err(null_arg("binary"));
        }
        BINARIES.remove(h).map(drop).ok_or_else(|| {
            CallError::new(
                Error::InvalidParam,
                format!(
                    "binary {h:#x} is not a live aclrtBinary of this process (destroyed, or not \
                     made by aclrtCreateBinary)"
                ),
            )
        })
    })
}

//! Streams created from a configuration object (`aclrtCreateStreamConfigHandle`,
//! `aclrtSetStreamConfigOpt`, `aclrtCreateStreamV2`, `aclrtDestroyStreamConfigHandle`): IPV350
//! only, as CANN documents them (hicann/runtime `docs/zh/api_ref/24_other_APIs.md`,
//! `25-03_Operation_APIs.md`; elsewhere 207000, NULL from the create).
//!
//! As hicann/runtime `src/acl/aclrt_c/runtime/stream.c`: the object is the header's plain
//! struct (the caller may read it), zeroed at creation; `aclrtSetStreamConfigOpt` takes an
//! attribute below 4 with a value of its exact size (`void *` for the work address, `size_t`
//! for the work size and the flag, `uint32_t` for the priority, at most 7), else 100000, as is a
//! NULL object or value; `aclrtCreateStreamV2` makes a stream of the current context with the
//! object's priority (NULL object: the defaults). The work memory the compact runtime lends the
//! stream means nothing to the simulator: it is kept in the object and not used.
//!
//! Ours: the objects this library made are remembered, so that one it did not make, or one
//! destroyed already, is 100000 instead of memory corruption. The record is a set of their
//! addresses, not the handle slab (`handle`): the caller holds the header's struct itself, so
//! the handle must be its address. The set's lock is a [`PerProcess`] one: a forked child
//! keeps the parent's objects (memory it has, as CANN's would be), unless another thread of
//! the parent held the lock at the fork; then the child gets an empty set instead of waiting
//! for ever (the parent's objects are 100000 there). The flag goes to the stream as
//! `aclrtCreateStreamWithConfig`'s does (unknown `ACL_STREAM_*` bits 107000; CANN's compact
//! runtime drops it).
#![allow(non_camel_case_types)]

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::MutexGuard;

use acl_notify_core::{Error, Feature};
use acl_notify_sim::PerProcess;

use crate::errmsg::{self, CallError, null_arg};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::session::runtime;

/// `aclrtStreamConfigHandle` (the header's layout).
#[repr(C)]
#[derive(Debug)]
pub struct aclrtStreamConfigHandle {
    pub workptr: *mut c_void,
    pub work_size: usize,
    pub flag: usize,
    pub priority: u32,
}

/// The objects made and not destroyed in this process (their addresses).
static LIVE: PerProcess<HashSet<usize>> = PerProcess::inheriting(HashSet::new, HashSet::clone);

/// This process's set of live objects (the fork handler in place first, see [`PerProcess`]).
fn live() -> Result<MutexGuard<'static, HashSet<usize>>, CallError> {
    LIVE.lock().map_err(CallError::backend)
}

/// 100000 unless `handle` is an object this library made and has not destroyed.
fn check_live(handle: *const aclrtStreamConfigHandle) -> Result<(), CallError> {
    if handle.is_null() {
        return Err(null_arg("handle"));
    }
    if live()?.contains(&handle.addr()) {
        return Ok(());
    }
    Err(CallError::new(
        Error::InvalidParam,
        format!(
            "handle {handle:p} is not a stream configuration made by \
             aclrtCreateStreamConfigHandle, or was destroyed"
        ),
    ))
}

/// 207000 on a SoC without configuration objects.
fn require() -> Result<(), CallError> {
    let rt = runtime()?;
    rt.require(Feature::StreamConfig)
}

/// `aclrtStreamConfigHandle *aclrtCreateStreamConfigHandle(void)`: a zeroed configuration, or
/// NULL (with a message) on a SoC without them.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtCreateStreamConfigHandle() -> *mut aclrtStreamConfigHandle {
    let mut out = std::ptr::null_mut();
    api("aclrtCreateStreamConfigHandle", || {
        require()?;
        let mut set = live()?;
        let h = Box::into_raw(Box::new(aclrtStreamConfigHandle {
            workptr: std::ptr::null_mut(),
            work_size: 0,
            flag: 0,
            priority: 0,
        }));
        set.insert(h.addr());
        out = h;
        Ok(())
    });
    out
}

/// `aclError aclrtDestroyStreamConfigHandle(aclrtStreamConfigHandle *handle)`.
///
/// Codes: 207000; 100000 NULL, or not a live configuration.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtDestroyStreamConfigHandle(handle: *mut aclrtStreamConfigHandle) -> aclError {
    api("aclrtDestroyStreamConfigHandle", || {
        require()?;
        check_live(handle)?;
        // Taken out first: a racing destroy of the same object is told it is not live.
        if !live()?.remove(&handle.addr()) {
            return check_live(handle);
        }
        // SAFETY: made by `Box::into_raw` in `aclrtCreateStreamConfigHandle`, and taken out of
        // `LIVE` by this call only.
        drop(unsafe { Box::from_raw(handle) });
        Ok(())
    })
}

/// `aclError aclrtSetStreamConfigOpt(aclrtStreamConfigHandle *handle, aclrtStreamConfigAttr
/// attr, const void *attrValue, size_t valueSize)`.
///
/// Codes: 207000; 100000 NULL or dead handle, NULL value, unknown attribute, a size other than
/// the attribute's, a priority above 7.
///
/// # Safety
///
/// `attrValue` is NULL or valid for reading `valueSize` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtSetStreamConfigOpt(
    handle: *mut aclrtStreamConfigHandle,
    attr: i32,
    value: *const c_void,
    size: usize,
) -> aclError {
    api("aclrtSetStreamConfigOpt", || {
        require()?;
        check_live(handle)?;
        if value.is_null() {
            return Err(null_arg("attrValue"));
        }
        let (name, want) = match attr {
            0 => ("ACL_RT_STREAM_WORK_ADDR_PTR", size_of::<*mut c_void>()),
            1 => ("ACL_RT_STREAM_WORK_SIZE", size_of::<usize>()),
            2 => ("ACL_RT_STREAM_FLAG", size_of::<usize>()),
            3 => ("ACL_RT_STREAM_PRIORITY", size_of::<u32>()),
            _ => {
                return Err(CallError::new(
                    Error::InvalidParam,
                    format!("attribute {attr} is no aclrtStreamConfigAttr (0 to 3)"),
                ));
            }
        };
        if size != want {
            return Err(CallError::new(
                Error::InvalidParam,
                format!("{name}'s value is {want} bytes, not {size}"),
            ));
        }
        // SAFETY: a live object of ours (checked; the caller does not destroy it meanwhile,
        // as with any handle), and `value` is readable for `size` bytes (the caller's
        // contract), which is the size read.
        unsafe {
            let h = &mut *handle;
            match attr {
                0 => h.workptr = value.cast::<*mut c_void>().read_unaligned(),
                1 => h.work_size = value.cast::<usize>().read_unaligned(),
                2 => h.flag = value.cast::<usize>().read_unaligned(),
                _ => {
                    let p = value.cast::<u32>().read_unaligned();
                    if p > 7 {
                        return Err(CallError::new(
                            Error::InvalidParam,
                            format!("priority {p} is not in [0, 7]"),
                        ));
                    }
                    h.priority = p;
                }
            }
        }
        Ok(())
    })
}

/// `aclError aclrtCreateStreamV2(aclrtStream *stream, const aclrtStreamConfigHandle *handle)`:
/// a stream of the current context with `handle`'s priority and flag (NULL: the defaults).
///
/// Codes: 207000; 100000 `stream` NULL, `handle` not a live configuration; 107000 a flag
/// with unknown bits; 107002.
///
/// # Safety
///
/// `stream` is NULL or valid for writing an `aclrtStream`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtCreateStreamV2(
    stream: *mut aclrtStream,
    handle: *const aclrtStreamConfigHandle,
) -> aclError {
    api("aclrtCreateStreamV2", || {
        require()?;
        // SAFETY: `stream` is NULL or writable, by the caller's contract.
        unsafe { Out::new(stream) }.handle(
            || null_arg("stream"),
            || {
                let (priority, flag) = if handle.is_null() {
                    (0, 0)
                } else {
                    check_live(handle)?;
                    // SAFETY: a live object of ours (checked).
                    let h = unsafe { &*handle };
                    (h.priority, h.flag)
                };
                let flag = u32::try_from(flag).map_err(|_| {
                    errmsg::param(format!(
                        "flag {flag:#x} has bits no ACL_STREAM_* flag defines"
                    ))
                })?;
                let h = runtime()?.create_stream_with_config(priority, flag)?;
                Ok(h)
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forked::{in_child, in_child_while_held};

    /// A child forked while the set's lock is free keeps the parent's objects: they are
    /// memory it has, and CANN's would be valid there.
    #[test]
    fn a_child_keeps_the_parent_s_objects() {
        let h = Box::into_raw(Box::new(aclrtStreamConfigHandle {
            workptr: std::ptr::null_mut(),
            work_size: 0,
            flag: 0,
            priority: 0,
        }));
        live().unwrap().insert(h.addr());
        let kept = in_child(|| check_live(h).is_ok());
        live().unwrap().remove(&h.addr());
        // SAFETY: made above by `Box::into_raw`, out of the set again.
        drop(unsafe { Box::from_raw(h) });
        assert_eq!(kept, Some(true), "the child lost the parent's object");
    }

    /// A child forked while another thread of the parent holds the set's lock gets a set of
    /// its own: its check answers (100000: it knows no object) instead of waiting for ever
    /// for a lock no thread of the child will give back.
    #[test]
    fn a_child_forked_while_the_set_is_locked_does_not_wait_for_it() {
        let answered = in_child_while_held(
            || live().unwrap(),
            || {
                let forged = std::ptr::dangling::<aclrtStreamConfigHandle>();
                check_live(forged).is_err_and(|e| e.code() == Error::InvalidParam)
            },
        );
        assert_eq!(
            answered,
            Some(true),
            "the child waited 20 s for its parent's lock"
        );
    }
}

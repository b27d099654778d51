//! Registration of a program's own memory allocator with a stream (`acl/acl_rt_allocator.h`:
//! `aclrtAllocator*`), kept as CANN's ACL layer keeps it (hicann/runtime
//! `src/acl/aclrt_impl/allocator.cpp`): a descriptor holds the allocator object and its four
//! callbacks, each set once non-NULL (100000 for a NULL descriptor or function); a
//! registration copies the descriptor under the stream (the object, alloc, free and
//! get-address callbacks must be set; the advise callback may not be), replacing an earlier
//! one, and `aclrtAllocatorGetByStream` answers the descriptor and the copy (100000 for a
//! stream with none). Like CANN's, the registrations are keyed by the stream's value and
//! checked no further, and no session is needed.
//!
//! The simulator never calls the callbacks: CANN's runtime calls them for the workspace memory
//! of the operators it launches on the stream, and the simulator launches no operators, so it
//! has no allocation of its own to make with them.
//!
//! CANN hands out a pointer to its descriptor, so a destroyed or forged one is undefined
//! behaviour there; here an `aclrtAllocatorDesc` is a handle of the crate's handle slab (one
//! process-wide table, `crate::handle`), answered as a NULL one (100000) with a message.

use acl_notify_core::Error;
use acl_notify_sim::PerProcess;
use std::collections::HashMap;
use std::ffi::c_void;

use crate::errmsg::{self, CallError, null_arg};
use crate::ffi::{Out, aclError, aclrtStream, api};
use crate::handle::{Kind, ProcessTable, process_table};

/// `aclrtAllocatorAllocFunc` and its neighbours, as C function pointers.
type AllocFn = unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void, *mut c_void);
type AdviseFn = unsafe extern "C" fn(*mut c_void, usize, *mut c_void) -> *mut c_void;
type AddrFn = unsafe extern "C" fn(*mut c_void) -> *mut c_void;

/// What a descriptor holds: the caller's object and functions, kept as numbers (they are only
/// handed back; 0 for not set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Desc {
    obj: usize,
    alloc: usize,
    free: usize,
    advise: usize,
    addr: usize,
}

/// The process's descriptors (a forked child's are its parent's, copied at its first call;
/// see [`ProcessTable`]).
static DESCS: ProcessTable<Desc> = process_table!(Kind::AllocatorDesc, "allocator descriptors");

/// Stream value → (the descriptor's handle, the copy registered).
type Registrations = HashMap<usize, (usize, Desc)>;

/// The registrations. A forked child's are its parent's, copied, unless a thread of the
/// parent was changing them at the fork (then none).
static REGISTERED: PerProcess<Registrations> = PerProcess::inheriting(HashMap::new, HashMap::clone);

/// The registrations, locked; 207001 without the fork handler.
fn registered() -> Result<std::sync::MutexGuard<'static, Registrations>, CallError> {
    REGISTERED.lock().map_err(CallError::backend)
}

/// 100000 for a descriptor that is not a live one of this process.
fn not_live(handle: usize) -> CallError {
    CallError::new(
        Error::InvalidParam,
        format!(
            "allocatorDesc {handle:#x} is not a live aclrtAllocatorDesc of this process \
             (destroyed, or not made by aclrtAllocatorCreateDesc)"
        ),
    )
}

/// The live descriptor `desc`; 100000 for NULL or anything else.
fn desc_of(desc: *mut c_void) -> Result<Desc, CallError> {
    if desc.is_null() {
        return Err(null_arg("allocatorDesc"));
    }
    DESCS.get(desc.addr()).ok_or_else(|| not_live(desc.addr()))
}

/// Sets one field of descriptor `desc` to `value` (100000 for a NULL descriptor, a dead one
/// or a NULL value, named `what`).
fn set(
    name: &str,
    desc: *mut c_void,
    value: usize,
    what: &str,
    field: fn(&mut Desc) -> &mut usize,
) -> aclError {
    api(name, || {
        if desc.is_null() {
            return Err(null_arg("allocatorDesc"));
        }
        if value == 0 {
            return Err(null_arg(what));
        }
        DESCS
            .update(desc.addr(), |d| *field(d) = value)
            .ok_or_else(|| not_live(desc.addr()))
    })
}

/// `aclrtAllocatorDesc aclrtAllocatorCreateDesc()`: an empty descriptor; NULL only when the
/// process holds `MAX_HANDLES` of them (the message says so, 207001).
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorCreateDesc() -> *mut c_void {
    match DESCS.insert(Desc::default()) {
        Ok(h) => std::ptr::without_provenance_mut(h),
        Err(e) => {
            errmsg::record("aclrtAllocatorCreateDesc", &e);
            std::ptr::null_mut()
        }
    }
}

/// `aclError aclrtAllocatorDestroyDesc(aclrtAllocatorDesc allocatorDesc)`: ends the
/// descriptor (a registration keeps its copy, and answers the dead handle, as CANN's keeps
/// the dangling pointer). Codes: 100000 NULL or not a live descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorDestroyDesc(allocator_desc: *mut c_void) -> aclError {
    api("aclrtAllocatorDestroyDesc", || {
        if allocator_desc.is_null() {
            return Err(null_arg("allocatorDesc"));
        }
        DESCS
            .remove(allocator_desc.addr())
            .map(|_| ())
            .ok_or_else(|| not_live(allocator_desc.addr()))
    })
}

/// `aclError aclrtAllocatorSetObjToDesc(aclrtAllocatorDesc allocatorDesc, aclrtAllocator
/// allocator)`. Codes: 100000 either NULL, or not a live descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorSetObjToDesc(
    allocator_desc: *mut c_void,
    allocator: *mut c_void,
) -> aclError {
    set(
        "aclrtAllocatorSetObjToDesc",
        allocator_desc,
        allocator.addr(),
        "allocator",
        |d| &mut d.obj,
    )
}

/// `aclError aclrtAllocatorSetAllocFuncToDesc(aclrtAllocatorDesc, aclrtAllocatorAllocFunc)`.
/// Codes: 100000 either NULL, or not a live descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorSetAllocFuncToDesc(
    allocator_desc: *mut c_void,
    func: Option<AllocFn>,
) -> aclError {
    let f = func.map_or(0, |f| f as usize);
    set(
        "aclrtAllocatorSetAllocFuncToDesc",
        allocator_desc,
        f,
        "func",
        |d| &mut d.alloc,
    )
}

/// `aclError aclrtAllocatorSetFreeFuncToDesc(aclrtAllocatorDesc, aclrtAllocatorFreeFunc)`.
/// Codes: 100000 either NULL, or not a live descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorSetFreeFuncToDesc(
    allocator_desc: *mut c_void,
    func: Option<FreeFn>,
) -> aclError {
    let f = func.map_or(0, |f| f as usize);
    set(
        "aclrtAllocatorSetFreeFuncToDesc",
        allocator_desc,
        f,
        "func",
        |d| &mut d.free,
    )
}

/// `aclError aclrtAllocatorSetAllocAdviseFuncToDesc(aclrtAllocatorDesc,
/// aclrtAllocatorAllocAdviseFunc)`. Codes: 100000 either NULL, or not a live descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorSetAllocAdviseFuncToDesc(
    allocator_desc: *mut c_void,
    func: Option<AdviseFn>,
) -> aclError {
    let f = func.map_or(0, |f| f as usize);
    set(
        "aclrtAllocatorSetAllocAdviseFuncToDesc",
        allocator_desc,
        f,
        "func",
        |d| &mut d.advise,
    )
}

/// `aclError aclrtAllocatorSetGetAddrFromBlockFuncToDesc(aclrtAllocatorDesc,
/// aclrtAllocatorGetAddrFromBlockFunc)`. Codes: 100000 either NULL, or not a live descriptor.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorSetGetAddrFromBlockFuncToDesc(
    allocator_desc: *mut c_void,
    func: Option<AddrFn>,
) -> aclError {
    let f = func.map_or(0, |f| f as usize);
    set(
        "aclrtAllocatorSetGetAddrFromBlockFuncToDesc",
        allocator_desc,
        f,
        "func",
        |d| &mut d.addr,
    )
}

/// `aclError aclrtAllocatorRegister(aclrtStream stream, aclrtAllocatorDesc allocatorDesc)`:
/// registers a copy of the descriptor under `stream`, replacing an earlier registration.
/// Codes: 100000 stream or allocatorDesc NULL, not a live descriptor, or one without the
/// object, the alloc, free or get-address function.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorRegister(
    stream: aclrtStream,
    allocator_desc: *mut c_void,
) -> aclError {
    api("aclrtAllocatorRegister", || {
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        let d = desc_of(allocator_desc)?;
        for (v, what) in [
            (d.obj, "allocatorDesc->obj"),
            (d.alloc, "allocatorDesc->allocFunc"),
            (d.free, "allocatorDesc->freeFunc"),
            (d.addr, "allocatorDesc->getAddrFromBlockFunc"),
        ] {
            if v == 0 {
                return Err(CallError::new(
                    Error::InvalidParam,
                    format!("`{what}` is NULL: set it before registering"),
                ));
            }
        }
        registered()?.insert(stream.addr(), (allocator_desc.addr(), d));
        Ok(())
    })
}

/// `aclError aclrtAllocatorGetByStream(aclrtStream stream, aclrtAllocatorDesc
/// *allocatorDesc, aclrtAllocator *allocator, aclrtAllocatorAllocFunc *allocFunc,
/// aclrtAllocatorFreeFunc *freeFunc, aclrtAllocatorAllocAdviseFunc *allocAdviseFunc,
/// aclrtAllocatorGetAddrFromBlockFunc *getAddrFromBlockFunc)`: what `stream` registered (the
/// outputs after `allocatorDesc` may each be NULL). Codes: 100000 allocatorDesc or stream
/// NULL, a stream with no registration.
///
/// # Safety
///
/// Each output is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtAllocatorGetByStream(
    stream: aclrtStream,
    allocator_desc: *mut *mut c_void,
    allocator: *mut *mut c_void,
    alloc_func: *mut usize,
    free_func: *mut usize,
    alloc_advise_func: *mut usize,
    get_addr_from_block_func: *mut usize,
) -> aclError {
    // SAFETY: each NULL or writable, by the caller's contract (a function pointer output
    // holds a pointer-sized value, 0 for NULL).
    let (allocator_desc, allocator, funcs) = unsafe {
        (
            Out::new(allocator_desc),
            Out::new(allocator).given(),
            [
                alloc_func,
                free_func,
                alloc_advise_func,
                get_addr_from_block_func,
            ]
            .map(|p| Out::new(p).given()),
        )
    };
    api("aclrtAllocatorGetByStream", || {
        let allocator_desc = allocator_desc.check(|| null_arg("allocatorDesc"))?;
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        let Some((h, d)) = registered()?.get(&stream.addr()).copied() else {
            return Err(CallError::new(
                Error::InvalidParam,
                format!("stream {stream:p} is not registered with any allocator"),
            ));
        };
        allocator_desc.put(std::ptr::without_provenance_mut(h));
        if let Some(out) = allocator {
            out.put(std::ptr::with_exposed_provenance_mut(d.obj));
        }
        for (out, v) in funcs.into_iter().zip([d.alloc, d.free, d.advise, d.addr]) {
            if let Some(out) = out {
                out.put(v);
            }
        }
        Ok(())
    })
}

/// `aclError aclrtAllocatorUnregister(aclrtStream stream)`: forgets `stream`'s registration
/// (none is no error). Codes: 100000 NULL.
#[unsafe(no_mangle)]
pub extern "C" fn aclrtAllocatorUnregister(stream: aclrtStream) -> aclError {
    api("aclrtAllocatorUnregister", || {
        if stream.is_null() {
            return Err(null_arg("stream"));
        }
        registered()?.remove(&stream.addr());
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn alloc(_: *mut c_void, _: usize) -> *mut c_void {
        std::ptr::null_mut()
    }
    unsafe extern "C" fn free(_: *mut c_void, _: *mut c_void) {}
    unsafe extern "C" fn addr(_: *mut c_void) -> *mut c_void {
        std::ptr::null_mut()
    }

    /// A descriptor with everything a registration needs set, or NULL.
    fn full_desc() -> *mut c_void {
        let d = aclrtAllocatorCreateDesc();
        let set = !d.is_null()
            && aclrtAllocatorSetObjToDesc(d, std::ptr::without_provenance_mut(8)) == 0
            && aclrtAllocatorSetAllocFuncToDesc(d, Some(alloc)) == 0
            && aclrtAllocatorSetFreeFuncToDesc(d, Some(free)) == 0
            && aclrtAllocatorSetGetAddrFromBlockFuncToDesc(d, Some(addr)) == 0;
        if set { d } else { std::ptr::null_mut() }
    }

    /// Registers a full descriptor under stream value `stream` and reads it back: whether
    /// both worked and answered that descriptor.
    fn register_and_read_back(stream: usize) -> bool {
        let d = full_desc();
        let s = std::ptr::without_provenance_mut(stream);
        let mut got = std::ptr::null_mut();
        let none = std::ptr::null_mut::<usize>();
        let ok = !d.is_null()
            && aclrtAllocatorRegister(s, d) == 0
            // SAFETY: `got` is writable; the other outputs are NULL.
            && unsafe { aclrtAllocatorGetByStream(s, &mut got, std::ptr::null_mut(), none, none, none, none) }
                == 0
            && got == d
            && aclrtAllocatorUnregister(s) == 0;
        ok && aclrtAllocatorDestroyDesc(d) == 0
    }

    /// A child forked while another thread of the parent is inside a descriptor call (holds
    /// the descriptors' lock) makes, registers and reads its own instead of waiting for ever
    /// for the parent's lock (it did: a plain process-wide table).
    #[test]
    fn a_child_forked_while_the_descriptors_are_locked_does_not_wait_for_them() {
        let ok =
            crate::forked::in_child_while_held(|| DESCS.held(), || register_and_read_back(0x51));
        assert_eq!(
            ok,
            Some(true),
            "the child waited 20 s for its parent's lock"
        );
    }

    /// The same for the registrations' lock (a thread inside `aclrtAllocatorRegister`); a
    /// child forked while both are free keeps its parent's registration.
    #[test]
    fn a_child_forked_while_the_registrations_are_locked_does_not_wait_for_them() {
        let ok = crate::forked::in_child_while_held(registered, || register_and_read_back(0x52));
        assert_eq!(
            ok,
            Some(true),
            "the child waited 20 s for its parent's lock"
        );
        let d = full_desc();
        let s = std::ptr::without_provenance_mut(0x53);
        assert_eq!(aclrtAllocatorRegister(s, d), 0);
        let inherited = crate::forked::in_child(|| {
            let mut got = std::ptr::null_mut();
            let none = std::ptr::null_mut::<usize>();
            // SAFETY: `got` is writable; the other outputs are NULL.
            let r = unsafe {
                aclrtAllocatorGetByStream(s, &mut got, std::ptr::null_mut(), none, none, none, none)
            };
            r == 0 && got == d
        });
        assert_eq!(
            inherited,
            Some(true),
            "the child lost its parent's registration"
        );
        assert_eq!(aclrtAllocatorUnregister(s), 0);
        assert_eq!(aclrtAllocatorDestroyDesc(d), 0);
    }
}

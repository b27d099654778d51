//! The exported C functions (`acl/acl.h`). Each one catches panics, runs SPEC §3's checks in
//! order — the argument checks here, the rest in `runtime::Runtime` — and
//! records a message for `aclGetRecentErrMsg` when it fails.
//!
//! C memory is only touched here: out-parameters are written once every check has passed,
//! arrays are read element by element as the checks reach them. Every write to a caller's
//! memory goes through `Out` (one value; its bytes for a struct written field by field,
//! `put_field!`, or a value whose type another argument chooses, `Checked::sized`) or
//! `OutArray` (an array, string or buffer of a length the caller or the API gives): each
//! checked for NULL with the call's code where the call checks it, each write bounded by the
//! value's or the array's length.
//!
//! This file holds the C types and the one panic firewall (`api`); the functions are in one
//! module per chapter of the API: `device` (initialisation and devices), `devquery` (device
//! queries: id mappings, UUIDs, peer access status, saturation mode), `sysparam` (system
//! parameters), `stream`, `notify`
//! (local and IPC), `cnt` (count notifies), `ext` (the `aclnsim*` extensions). Events and
//! contexts are in [`crate::ffi_event`], device memory in [`crate::memory`] and IPC memory in
//! [`crate::ipc_memory`].
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use acl_notify_core::Error;
use acl_notify_core::cnt::{CntRecordInfo, CntWaitInfo};

use crate::errmsg::{self, CallError};

/// `aclError`.
pub type aclError = c_int;
/// `aclrtNotify`.
pub type aclrtNotify = *mut c_void;
/// `aclrtStream`.
pub type aclrtStream = *mut c_void;
/// `aclrtCntNotify`.
pub type aclrtCntNotify = *mut c_void;
/// `aclrtCntNotifyRecordInfo` (`{ aclrtCntNotifyRecordMode mode; uint32_t value; }`, 8 bytes).
pub type aclrtCntNotifyRecordInfo = CntRecordInfo;
/// `aclrtCntNotifyWaitInfo` (`{ mode; value; timeout; uint8_t isClear; uint8_t rsv[3]; }`,
/// 16 bytes).
pub type aclrtCntNotifyWaitInfo = CntWaitInfo;
/// `aclrtHostFunc`.
pub type aclrtHostFunc = Option<unsafe extern "C" fn(*mut c_void)>;

/// `aclrtServerPid` (LP64: `sdid` at 0, `pid` at 8, `num` at 16; 24 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct aclrtServerPid {
    /// SuperPod server id.
    pub sdid: u32,
    /// The PIDs (exactly one is accepted per entry).
    pub pid: *mut i32,
    /// Number of PIDs at `pid`.
    pub num: usize,
}

const _: () = assert!(std::mem::size_of::<aclrtServerPid>() == 24);
const _: () = assert!(std::mem::offset_of!(aclrtServerPid, pid) == 8);
const _: () = assert!(std::mem::offset_of!(aclrtServerPid, num) == 16);

/// `ACL_ERROR_RT_DRV_INTERNAL_ERROR`: what a call returns if the library panicked.
const PANIC_CODE: Error = Error::DrvInternalError;

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// Runs one C call: catches a panic, turns the result into a code, records a failure.
///
/// Inlined into each exported function, so that its arguments reach the call's body in
/// registers rather than through a closure of references; the failure paths stay out of line.
#[inline(always)]
pub(crate) fn api(name: &str, f: impl FnOnce() -> Result<(), CallError>) -> aclError {
    // A locked process's calls that change device resources wait (`snapshot`).
    crate::snapshot_lock::gate(name);
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => failed(name, e),
        Err(payload) => panicked(name, payload),
    }
}

/// Records a failed call; its code.
#[cold]
#[inline(never)]
fn failed(name: &str, e: CallError) -> aclError {
    if e.code() == Error::StreamCaptured {
        crate::runtime::capture::after_refusal(name, &e);
    }
    errmsg::record(name, &e);
    e.code().code()
}

/// Records a call that panicked; [`PANIC_CODE`].
#[cold]
#[inline(never)]
fn panicked(name: &str, payload: Box<dyn std::any::Any + Send>) -> aclError {
    errmsg::note_code(PANIC_CODE);
    errmsg::push(format!(
        "{name} failed: {PANIC_CODE}: internal error in acl-notify (panic: {})",
        panic_text(&*payload)
    ));
    // Dropping a payload runs foreign code; do not let even that unwind out.
    let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
    PANIC_CODE.code()
}

/// Runs a C call that returns a pointer: NULL on failure or panic.
fn api_ptr(name: &str, f: impl FnOnce() -> Result<*const c_char, CallError>) -> *const c_char {
    let mut out = std::ptr::null();
    api(name, || {
        out = f()?;
        Ok(())
    });
    out
}

pub(crate) fn handle(p: *mut c_void) -> usize {
    p.addr()
}

pub(crate) fn to_ptr(h: usize) -> *mut c_void {
    std::ptr::without_provenance_mut(h)
}

/// A C out-parameter: a pointer the caller promised to be NULL or writable. The promise is
/// made once, unsafely, by [`Out::new`]; [`Out::write`] then checks and writes it, so that a
/// call's own checks and work (in `make`) stay outside the `unsafe` block.
pub(crate) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// # Safety
    ///
    /// `p` is NULL or valid for writing a `T` until the call returns.
    #[inline(always)]
    pub(crate) unsafe fn new(p: *mut T) -> Out<T> {
        Out(p)
    }

    /// The end of a call that writes this out-parameter: `null()` if it is NULL, checked
    /// before `make` runs (the call's checks before this one come first, those in `make`
    /// after it: each call keeps CANN's order); else the value `make` gives, written
    /// (unaligned: C memory). Nothing is written if `make` fails.
    #[inline(always)]
    pub(crate) fn write(
        self,
        null: impl FnOnce() -> CallError,
        make: impl FnOnce() -> Result<T, CallError>,
    ) -> Result<(), CallError> {
        let to = self.check(null)?;
        to.put(make()?);
        Ok(())
    }

    /// The check of [`write`](Self::write) alone, for a call that writes several
    /// out-parameters, or writes this one on some paths only: each checked where the call
    /// checks it (in CANN's order), then written by [`Checked::put`] once the call's other
    /// checks and work have passed, so that nothing is written when the call fails.
    #[inline(always)]
    pub(crate) fn check(self, null: impl FnOnce() -> CallError) -> Result<Checked<T>, CallError> {
        if self.0.is_null() {
            return Err(null());
        }
        Ok(Checked(self.0))
    }

    /// For an optional out-parameter: `None` if it is NULL.
    #[inline(always)]
    pub(crate) fn given(self) -> Option<Checked<T>> {
        (!self.0.is_null()).then_some(Checked(self.0))
    }
}

/// An [`Out`] found not NULL: writable by [`Out::new`]'s contract.
pub(crate) struct Checked<T>(*mut T);

// Not derived: a `Checked<T>` is a pointer, copyable whatever `T` is.
impl<T> Clone for Checked<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Checked<T> {}

impl<T> Checked<T> {
    /// Reads the caller's value of an in/out parameter (unaligned: C memory).
    ///
    /// # Safety
    ///
    /// The pointer is readable too (an in/out parameter, by the caller's contract).
    #[inline(always)]
    pub(crate) unsafe fn read(&self) -> T {
        // SAFETY: not NULL (checked), readable by the caller's contract.
        unsafe { self.0.read_unaligned() }
    }

    /// Writes `v` (unaligned: C memory); again, for a call that writes a first value early.
    #[inline(always)]
    pub(crate) fn put(&self, v: T) {
        // SAFETY: not NULL (checked), and writable by `Out::new`'s contract.
        unsafe { self.0.write_unaligned(v) };
    }
}

impl<T> Checked<T> {
    /// The `T`'s bytes, as a checked buffer of `size_of::<T>()` bytes: for a struct written
    /// field by field (its reserved fields left as the caller has them, with [`put_field!`]),
    /// or a union written as the member another argument chooses.
    #[inline(always)]
    pub(crate) fn bytes(&self) -> CheckedArray<u8> {
        CheckedArray {
            p: self.0.cast(),
            len: std::mem::size_of::<T>(),
        }
    }
}

impl Checked<c_void> {
    /// A `void *` out-parameter as the `len` bytes the call's other arguments decide (an
    /// attribute's type, a share type): writes to it are bounded by `len`.
    ///
    /// # Safety
    ///
    /// `len` is what the call's arguments make the caller's promise ([`Out::new`]'s) cover.
    #[inline(always)]
    pub(crate) unsafe fn sized(&self, len: usize) -> CheckedArray<u8> {
        CheckedArray {
            p: self.0.cast(),
            len,
        }
    }
}

/// A C output array: `len` `T`s at a pointer the caller promised to be NULL or writable for
/// them (the length is the caller's, or fixed by the API). The promise is made once,
/// unsafely, by [`OutArray::new`]; [`OutArray::check`] checks the pointer with the call's
/// code; every write after is bounded by the length.
pub(crate) struct OutArray<T> {
    p: *mut T,
    len: usize,
}

impl<T> OutArray<T> {
    /// # Safety
    ///
    /// `p` is NULL, or valid for writing `len` `T`s (unaligned) until the call returns.
    #[inline(always)]
    pub(crate) unsafe fn new(p: *mut T, len: usize) -> OutArray<T> {
        OutArray { p, len }
    }

    /// `null()` if the pointer is NULL; else the array, to write once the call's other checks
    /// and work have passed (checked where the call checks it, in CANN's order). A length no
    /// memory can hold needs no check of its own here: nothing is written past the values the
    /// call has, and a caller keeping `new`'s promise has memory for `len`.
    #[inline(always)]
    pub(crate) fn check(
        self,
        null: impl FnOnce() -> CallError,
    ) -> Result<CheckedArray<T>, CallError> {
        if self.p.is_null() {
            return Err(null());
        }
        Ok(CheckedArray {
            p: self.p,
            len: self.len,
        })
    }

    /// For an optional array: `None` if it is NULL.
    #[inline(always)]
    pub(crate) fn given(self) -> Option<CheckedArray<T>> {
        (!self.p.is_null()).then_some(CheckedArray {
            p: self.p,
            len: self.len,
        })
    }
}

/// An [`OutArray`] found not NULL: `len` writable `T`s.
/// Every write is bounded by `len`; one past it is a defect of this library, refused by a
/// panic (which [`api`] turns into its code and message), never made.
pub(crate) struct CheckedArray<T> {
    p: *mut T,
    len: usize,
}

// Not derived: a pointer and a length, copyable whatever `T` is.
impl<T> Clone for CheckedArray<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for CheckedArray<T> {}

impl<T> CheckedArray<T> {
    /// How many `T`s the caller's array holds.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Element `i`, as a checked out-parameter (for a struct written field by field).
    #[inline(always)]
    pub(crate) fn at(&self, i: usize) -> Checked<T> {
        assert!(
            i < self.len,
            "element {i} written past the caller's array of {}",
            self.len
        );
        // SAFETY: i < len, and the array holds `len` `T`s (`OutArray::new`'s contract).
        Checked(unsafe { self.p.add(i) })
    }

    /// Writes `v` as element `i` (unaligned: C memory).
    #[inline(always)]
    pub(crate) fn put(&self, i: usize, v: T) {
        self.at(i).put(v);
    }

    /// Writes the values from element 0 on, at most [`len`](Self::len) of them; how many.
    pub(crate) fn put_all(&self, values: impl IntoIterator<Item = T>) -> usize {
        let mut n = 0;
        for v in values.into_iter().take(self.len) {
            self.put(n, v);
            n += 1;
        }
        n
    }

    /// Writes `values` from element 0 on (all of them: more than the array holds is a defect).
    pub(crate) fn put_slice(&self, values: &[T])
    where
        T: Copy,
    {
        assert!(
            values.len() <= self.len,
            "{} elements written to the caller's array of {}",
            values.len(),
            self.len
        );
        // SAFETY: `values.len() <= len` writable `T`s (`OutArray::new`'s contract); the
        // caller's memory is not the library's, so the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(values.as_ptr(), self.p, values.len());
        }
    }
}

impl CheckedArray<u8> {
    /// Writes `v` at byte `at` (unaligned), within the buffer (past it is a defect).
    #[inline(always)]
    pub(crate) fn put_at<V>(&self, at: usize, v: V) {
        let size = std::mem::size_of::<V>();
        assert!(
            at.checked_add(size).is_some_and(|end| end <= self.len),
            "{size} bytes written at {at} of the caller's {} bytes",
            self.len
        );
        // SAFETY: bytes `at..at + size` are inside the caller's buffer (checked).
        unsafe { self.p.add(at).cast::<V>().write_unaligned(v) };
    }

    /// Reads a `V` at byte `at` (unaligned), within the buffer (past it is a defect): a
    /// field of an in/out struct, read alone (the others may hold anything).
    ///
    /// # Safety
    ///
    /// The bytes are readable and hold a `V` (an in/out parameter, by the caller's contract).
    #[inline(always)]
    pub(crate) unsafe fn read_at<V>(&self, at: usize) -> V {
        let size = std::mem::size_of::<V>();
        assert!(
            at.checked_add(size).is_some_and(|end| end <= self.len),
            "{size} bytes read at {at} of the caller's {} bytes",
            self.len
        );
        // SAFETY: inside the buffer (checked); readable and a `V` by the caller's contract.
        unsafe { self.p.add(at).cast::<V>().read_unaligned() }
    }
}

impl CheckedArray<c_char> {
    /// Writes `s` and a NUL (the call has checked that they fit, with its code: not fitting
    /// here is a defect).
    pub(crate) fn put_cstr(&self, s: &[u8]) {
        assert!(
            s.len() < self.len,
            "a string of {} bytes and its NUL written to the caller's {} bytes",
            s.len(),
            self.len
        );
        // SAFETY: s.len() + 1 <= len writable bytes; `c_char` and `u8` have one layout.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), self.p, s.len());
            self.p.add(s.len()).write(0);
        }
    }
}

/// Writes `value` to field `field` of the struct `T` whose bytes `bytes` (a
/// `CheckedArray<u8>`, from [`Checked::bytes`]) are, leaving the other fields as they are:
/// `put_field!(bytes, T, field, value)`. The value must have the field's type (checked by
/// the compiler) and the write is bounded by the buffer.
macro_rules! put_field {
    ($bytes:expr, $T:ty, $field:ident, $value:expr) => {{
        let value = $value;
        // The value has the field's type (a closure that is never run, only type-checked).
        let _ = |t: &$T| {
            fn same<F>(_: &F, _: &F) {}
            same(&t.$field, &value)
        };
        $bytes.put_at(::std::mem::offset_of!($T, $field), value)
    }};
}
pub(crate) use put_field;

impl Out<*mut c_void> {
    /// [`write`](Self::write) for a call that hands out a new handle: the handle `make`
    /// gives, as a pointer.
    #[inline(always)]
    pub(crate) fn handle(
        self,
        null: impl FnOnce() -> CallError,
        make: impl FnOnce() -> Result<usize, CallError>,
    ) -> Result<(), CallError> {
        self.write(null, || make().map(to_ptr))
    }
}

/// Refuses (`code`) a C array of `len` `T`s that no memory can hold (more than `isize::MAX`
/// bytes): a count no caller can mean, which Rust's slices must never be given (the length
/// of [`c_array`], or the bound of a loop reading `what` element by element).
pub(crate) fn array_fits<T>(len: usize, what: &str, code: Error) -> Result<(), CallError> {
    let size = std::mem::size_of::<T>();
    if len
        .checked_mul(size)
        .is_some_and(|b| isize::try_from(b).is_ok())
    {
        return Ok(());
    }
    Err(CallError::new(
        code,
        format!("{what}: {len} elements of {size} bytes cannot be in memory"),
    ))
}

/// The caller's C array `p` of `len` `T`s as a slice, once [`array_fits`] holds (`p` may be
/// NULL when `len` is 0).
///
/// # Safety
///
/// `p` is NULL with `len` 0, or aligned and valid for reading `len` `T`s for `'a`.
pub(crate) unsafe fn c_array<'a, T>(
    p: *const T,
    len: usize,
    what: &str,
    code: Error,
) -> Result<&'a [T], CallError> {
    array_fits::<T>(len, what, code)?;
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: not NULL (len > 0, by the contract), `len` readable, and at most isize::MAX
    // bytes (checked).
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

mod cnt;
mod device;
mod devquery;
mod ext;
pub(crate) mod ipc_args;
mod notify;
mod reslimit;
mod stream;
mod sysparam;

pub use cnt::*;
pub use device::*;
pub use devquery::*;
pub use ext::*;
pub use notify::*;
pub use reslimit::*;
pub use stream::*;
pub use sysparam::*;

#[cfg(test)]
mod tests;

//! A shared file's mapping ([`Map`]: a whole file mapped shared, unmapped on drop, with its
//! `SIGBUS` registration and, when asked for, its descriptor), the types that may be viewed
//! in one ([`Shared`]) and the bounds check every accessor of shared memory makes
//! ([`check_span`]).

use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64};

use super::{FileHeader, Kind};
use crate::error::SimError;
use crate::sigbus::Registration;

/// The page size the layouts are aligned to; every file is at least one page.
pub(crate) const PAGE: usize = 4096;

/// Checks, in release builds too, that a `T` at `off` lies inside `len` bytes and is aligned:
/// the test every safe accessor of shared memory makes before it forms a reference. A wrong
/// offset is a bug of ours; a panic (which the C ABI catches) beats an access outside the
/// mapping. The check is two compares and a mask on the hot path; the message is built out of
/// line, in a cold function, so none of its formatting code sits on that path.
#[inline(always)]
pub(crate) fn check_span<T>(off: usize, len: usize) {
    let fits = off
        .checked_add(std::mem::size_of::<T>())
        .is_some_and(|end| end <= len);
    if !(fits && off.is_multiple_of(std::mem::align_of::<T>())) {
        out_of_span(off, std::mem::size_of::<T>(), len);
    }
}

#[cold]
#[inline(never)]
fn out_of_span(off: usize, size: usize, len: usize) -> ! {
    panic!(
        "shared-memory access of {size} bytes at {off:#x} outside the {len}-byte mapping or misaligned"
    )
}

/// A file descriptor closed on drop.
pub(crate) struct Fd(pub(super) libc::c_int);

impl Fd {
    /// The raw descriptor (valid while `self` lives).
    pub(crate) fn raw(&self) -> libc::c_int {
        self.0
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor and close it once.
        unsafe { libc::close(self.0) };
    }
}

/// A shared mapping of a whole file, unmapped on drop.
pub(crate) struct Map {
    base: *mut u8,
    len: usize,
    /// The mapping's entry in the `SIGBUS` table (see [`crate::sigbus`]).
    sigbus: Registration,
    /// The file's descriptor, kept when [`Open::keep_fd`](super::Open::keep_fd) asked for it
    /// (to allocate or punch ranges of the file, or lock it).
    pub(super) fd: Option<Fd>,
}

/// Types that may be viewed in a shared mapping through [`Map::at`].
///
/// # Safety
///
/// Implementors must be made of atomics only (every bit pattern valid, shared access from any
/// thread or process sound), so that a reference into memory another process writes is sound.
pub(crate) unsafe trait Shared: Sized {}

// SAFETY: an atomic.
unsafe impl Shared for AtomicU32 {}
// SAFETY: an atomic.
unsafe impl Shared for AtomicU64 {}
// SAFETY: the core's shared-memory id pool: `repr(C)`, atomics only, any bit pattern a pool
// (its docs); the notify, count-notify and event files all keep theirs in shared memory.
unsafe impl<const N: usize, const W: usize> Shared for acl_notify_core::pool::AtomicIdPool<N, W> {}

// SAFETY: the mapping is owned by this value and only accessed through atomics by its users.
unsafe impl Send for Map {}
// SAFETY: as above.
unsafe impl Sync for Map {}

/// What failed when mapping `len` bytes failed with `e`: a large mapping refused with ENOMEM
/// or EINVAL says the address space may be limited (valgrind manages a limited one, `ulimit
/// -v` limits it), with [`LIMITED`] in the text for a caller that names its size setting.
pub(crate) fn mapping_failed(len: usize, e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOMEM | libc::EINVAL) if len >= 1 << 30 => {
            format!("mmap of {len} bytes ({LIMITED}, e.g. under valgrind or `ulimit -v`)")
        }
        _ => "mmap".into(),
    }
}

/// In the message of [`mapping_failed`] for a mapping refused for its size.
pub(crate) const LIMITED: &str = "the address space may be limited";

impl Map {
    pub(super) fn new(
        fd: &Fd,
        len: usize,
        writable: bool,
        path: &Path,
        kind: Kind,
    ) -> Result<Map, SimError> {
        let prot = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a fresh shared mapping of `len` bytes of an open fd, without an address
        // hint, so no existing mapping is affected.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.0, 0) };
        if p == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(kind.os_err(path, &mapping_failed(len, &e), e));
        }
        Ok(Map {
            base: p.cast(),
            len,
            sigbus: Registration::new(p.cast(), len),
            fd: None,
        })
    }

    /// The file's descriptor, if the open kept it ([`Open::keep_fd`](super::Open::keep_fd)).
    pub(crate) fn fd(&self) -> Option<&Fd> {
        self.fd.as_ref()
    }

    /// The shared value at byte `off`. Checked in release builds too: a wrong offset is a bug
    /// of ours, and a panic (which the C ABI catches) is better than an access outside the
    /// mapping.
    pub(crate) fn at<T: Shared>(&self, off: usize) -> &T {
        check_span::<T>(off, self.len);
        // SAFETY: `off + size_of::<T>() <= len` and `off` is aligned for `T` (checked above;
        // the mapping is page aligned); `T: Shared` is atomics only, so any bit pattern is
        // valid and shared access is sound; a read-only mapping is only read through atomics'
        // loads by callers that opened it so.
        unsafe { &*self.base.add(off).cast::<T>() }
    }

    /// [`at`](Self::at) for a span [`at`](Self::at) has checked already: no check (two
    /// compares, a mask and the mapping's length loaded on every call of a hot accessor).
    ///
    /// # Safety
    ///
    /// `self.at::<T>(off)` has returned (not panicked) before, on this same mapping: a
    /// mapping's start and length never change, so the span still fits and is aligned.
    #[inline(always)]
    pub(crate) unsafe fn at_checked_before<T: Shared>(&self, off: usize) -> &T {
        // SAFETY: as in `at`; the span was checked by an earlier `at` on this mapping (the
        // caller's contract), and neither `base` nor `len` changes.
        unsafe { &*self.base.add(off).cast::<T>() }
    }

    /// The start of the mapping.
    pub(crate) fn base(&self) -> *mut u8 {
        self.base
    }

    /// The file's header.
    pub(crate) fn header<H: FileHeader>(&self) -> &H {
        // SAFETY: every mapping is at least one page (the opener checks the size first) and
        // page aligned; `FileHeader` types are atomics only and fit in a page.
        unsafe { &*self.base.cast::<H>() }
    }

    /// Whether the file shrank under this mapping (see [`crate::sigbus`]).
    #[inline]
    pub(crate) fn lost(&self) -> bool {
        self.sigbus.lost()
    }

    /// `Ok` unless the file at `path` shrank under this mapping: then 507899 saying so.
    #[inline]
    pub(crate) fn intact(&self, path: &Path) -> Result<(), SimError> {
        self.sigbus.intact(path)
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        self.sigbus.release();
        // SAFETY: `base`/`len` describe a mapping created by `Map::new`, unmapped only here.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

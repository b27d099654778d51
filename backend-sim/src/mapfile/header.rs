//! A shared file's header: the words the creation protocol needs ([`FileHeader`], implemented
//! by [`file_header!`]), the fields a kind's layout fixes, written by the creator and checked
//! by every opener ([`Field`]), and what a file is called in messages with the checks that
//! refuse a file ([`Kind`]).

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};

use acl_notify_core::{Error, Soc};

use crate::error::SimError;

/// The value of a published header's ready word ("REDY").
pub(crate) const READY: u32 = 0x5245_4459;

/// The first bytes of a shared file: the words the creation protocol needs.
///
/// # Safety
///
/// Implementors must be made of atomics only (every bit pattern valid, shared access sound)
/// and fit in [`PAGE`](super::PAGE) bytes with an alignment of at most a page.
pub(crate) unsafe trait FileHeader {
    /// Written last by the creator: [`READY`] once the header is complete.
    fn ready(&self) -> &AtomicU32;
    /// The creating process, written first.
    fn creator_pid(&self) -> &AtomicI32;
    /// The creator's PID namespace ([`crate::sys::pid_namespace`]), written with its pid: every
    /// process of a file must share it, or pids (and so liveness) mean nothing to the others.
    fn pid_ns(&self) -> &AtomicU64;
    /// The kind's magic word and the layout version this build writes and reads.
    const IDENTITY: (u64, u32);
    /// Writes [`IDENTITY`](Self::IDENTITY) (the creator, before its own fields).
    fn set_identity(&self);
    /// The magic word and layout version the creator wrote (the first 12 bytes of every
    /// kind's header).
    fn identity(&self) -> (u64, u32);
}

/// Implements [`FileHeader`] for a file kind's header struct whose fields include `magic`,
/// `version`, `ready`, `creator_pid` and `pid_ns` (with the kind's magic word and layout
/// version), and asserts at compile time that it fits in a page. The
/// `unsafe` in the call is the caller's promise that the struct is atomics only (write a
/// `// SAFETY:` comment above it), which the macro cannot check.
macro_rules! file_header {
    (unsafe $header:ty, $magic:expr, $version:expr) => {
        const _: () = assert!(std::mem::size_of::<$header>() <= $crate::mapfile::PAGE);

        // SAFETY: the invoker promised atomics only (see the macro's docs); the size is
        // asserted just above.
        unsafe impl $crate::mapfile::FileHeader for $header {
            fn ready(&self) -> &std::sync::atomic::AtomicU32 {
                &self.ready
            }
            fn creator_pid(&self) -> &std::sync::atomic::AtomicI32 {
                &self.creator_pid
            }
            fn pid_ns(&self) -> &std::sync::atomic::AtomicU64 {
                &self.pid_ns
            }
            const IDENTITY: (u64, u32) = ($magic, $version);
            fn set_identity(&self) {
                use std::sync::atomic::Ordering::SeqCst;
                self.magic.store($magic, SeqCst);
                self.version.store($version, SeqCst);
            }
            fn identity(&self) -> (u64, u32) {
                use std::sync::atomic::Ordering::SeqCst;
                (self.magic.load(SeqCst), self.version.load(SeqCst))
            }
        }
    };
}
pub(crate) use file_header;

/// `v` rounded up to a multiple of `a` (region offsets in a layout).
pub(crate) const fn align_up(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

/// How a header stores a SoC: its position in the core's table, from 1 (0 is no SoC).
pub(crate) fn soc_index(soc: Soc) -> u32 {
    Soc::ALL.iter().position(|s| *s == soc).unwrap_or(0) as u32 + 1
}

/// The SoC a header's [`soc_index`] names, if any.
pub(crate) fn soc_from_index(i: u32) -> Option<Soc> {
    Soc::ALL.get((i as usize).checked_sub(1)?).copied()
}

/// What a file is called in messages ("shared memory file", "count-notify file").
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kind(pub &'static str);

impl Kind {
    /// An operating-system call on the file failed.
    pub(crate) fn os_err(self, path: &Path, what: &str, e: std::io::Error) -> SimError {
        SimError::new(
            Error::DrvInternalError,
            format!("{} {}: {what}: {e}", self.0, path.display()),
        )
    }

    /// The file exists but cannot be used; says how to get rid of it.
    pub(crate) fn bad_file(self, path: &Path, problem: impl fmt::Display) -> SimError {
        SimError::new(
            Error::DrvInternalError,
            format!(
                "{} {} is not usable: {problem} (remove it, e.g. with Sim::remove_namespace, \
                 or use another ACL_NOTIFY_SIM_NAMESPACE)",
                self.0,
                path.display()
            ),
        )
    }
}

impl Kind {
    /// The machine a header describes (its SoC, as [`soc_index`] stores it, and its device
    /// count) is the one this process asked for: 507899 for an unknown SoC (a corrupt
    /// header), 107000 naming both machines when they differ.
    pub(crate) fn check_machine(
        self,
        path: &Path,
        (soc, devices): (u32, u32),
        (want_soc, want_devices): (Soc, u32),
    ) -> Result<(), SimError> {
        match soc_from_index(soc) {
            None => Err(self.bad_file(path, "corrupt header (unknown SoC)")),
            Some(s) if s != want_soc || devices != want_devices => Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{} {} simulates {s} with {devices} devices, but this process asked for \
                     {want_soc} with {want_devices} devices: set ACL_NOTIFY_SIM_SOC and \
                     ACL_NOTIFY_SIM_DEVICES alike in every process of a namespace, or use \
                     another ACL_NOTIFY_SIM_NAMESPACE",
                    self.0,
                    path.display(),
                ),
            )),
            Some(_) => Ok(()),
        }
    }

    /// Every header word of `fields` holds the value this build's layout gives it, and the
    /// file is `total` bytes long (`size`): else 507899 naming the first that does not
    /// ("corrupt header: slot size is 0, expected 192").
    pub(crate) fn check_fields(
        self,
        path: &Path,
        fields: &[Field<'_>],
        size: u64,
        total: usize,
    ) -> Result<(), SimError> {
        let mut all = fields.iter().map(|f| (f.0, f.1.load(), f.2)).chain([(
            "file size",
            size,
            total as u64,
        )]);
        match all.find(|(_, got, want)| got != want) {
            None => Ok(()),
            Some((what, got, want)) => Err(self.bad_file(
                path,
                format_args!("corrupt header: {what} is {got}, expected {want}"),
            )),
        }
    }
}

/// A word of a file kind's header.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Word<'h> {
    U32(&'h AtomicU32),
    U64(&'h AtomicU64),
}

impl Word<'_> {
    fn load(self) -> u64 {
        match self {
            Word::U32(w) => u64::from(w.load(SeqCst)),
            Word::U64(w) => w.load(SeqCst),
        }
    }

    /// Stores `v` (cut to 32 bits in a 32-bit word: [`Kind::check_fields`] then refuses the
    /// file, so a layout value too large for its word is found by its first opener).
    fn store(self, v: u64) {
        match self {
            Word::U32(w) => w.store(v as u32, SeqCst),
            Word::U64(w) => w.store(v, SeqCst),
        }
    }
}

impl<'h> From<&'h AtomicU32> for Word<'h> {
    fn from(w: &'h AtomicU32) -> Self {
        Word::U32(w)
    }
}

impl<'h> From<&'h AtomicU64> for Word<'h> {
    fn from(w: &'h AtomicU64) -> Self {
        Word::U64(w)
    }
}

/// A header word that a kind's layout fixes, its name in messages and its value: one list per
/// kind, which the creator writes ([`fill_fields`]) and every opener checks
/// ([`Kind::check_fields`]), so a field is described once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Field<'h>(pub(crate) &'static str, pub(crate) Word<'h>, pub(crate) u64);

/// The field `what` of a header: `word`, which holds `value`.
pub(crate) fn field<'h>(what: &'static str, word: impl Into<Word<'h>>, value: u64) -> Field<'h> {
    Field(what, word.into(), value)
}

/// The creator writes its layout's `fields`.
pub(crate) fn fill_fields(fields: &[Field<'_>]) {
    for f in fields {
        f.1.store(f.2);
    }
}

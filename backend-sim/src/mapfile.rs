//! The shared-file machinery common to the notify file ([`crate::shm`]), the count-notify
//! file ([`crate::cnt`]) and the device-memory files ([`crate::mem`]): creating a file
//! exclusively and publishing its header, or attaching to one another process created —
//! checking owner, type and mode, waiting (bounded) for its creator, validating the header —
//! the mappings and descriptors that close themselves, bounds-checked access to the shared
//! types in a mapping ([`Map::at`]), and the per-process registry of open files
//! ([`Registry`]) that a forked child starts afresh.
//!
//! # The creation protocol
//!
//! The creator opens the path with `O_CREAT | O_EXCL` (so exactly one process creates), sets
//! mode 0600, sizes the file with one `ftruncate` (so its size is 0 or the full size, never
//! anything between), maps it, writes its pid and the header fields, and publishes the header
//! by storing the ready word last. From its create until it has published, the creator holds
//! an exclusive `flock` on the file (the *init lock*), taken right after the create; once it
//! holds it, it checks that the path still names its file (see below) before it goes on.
//!
//! An opener that finds the file unpublished (size 0, or the ready word not set) tries the init
//! lock without blocking. Held: a creator is at work, so the opener waits for it, at most
//! [`INIT_WAIT`]. Free: nobody is initialising the file (its creator died, or something else
//! made an empty file there); looked at again under the lock, a file still unpublished is
//! abandoned, and a read-write opener removes it at once (if the path still names that file)
//! and creates it afresh — the look and the removal under one hold of the lock, kept until
//! the opener closes the file, so that no creator can publish in between. A lock is released
//! by the kernel when its holder dies, so a dead creator costs no wait. A creator that has not
//! taken its lock yet when an opener finds the file may see it removed: the check after its
//! lock sends it back to the start (again and again while within [`INIT_WAIT`], as when many
//! processes start at once), so nobody initialises or attaches to a file that is no longer at
//! the path (an opener attaches only to a published file, and a published file is never
//! removed this way). A size that is neither 0 nor at least a page cannot come from a creator
//! and is reported at once. An opener judges each read of the ready word as read (0: wait;
//! [`READY`]: published; anything else: corrupt), never a second read of a word the creator
//! may be storing meanwhile.
//!
//! The tests make each interleaving of two processes that matters happen, through a hook
//! that runs at the protocol's [`Step`]s.
//!
//! A published file of the same kind but of another layout version (a build of another
//! version left it) is replaced the same way by a read-write opener when no live process maps
//! it (`sys::file_mapped`, from `/proc/<pid>/maps`); while one does, it is refused with
//! 507899, as a file this build cannot read.

use std::collections::HashMap;
use std::ffi::CString;
use std::fmt;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use acl_notify_core::{Error, Soc};

use crate::error::SimError;
use crate::fork::PerProcess;
use crate::sigbus::Registration;
use crate::sys;

/// Where the shared files live.
pub const SHM_DIR: &str = "/dev/shm";
/// The start of every shared file's name: `acl-notify-sim.<namespace>.<kind><n>`, where `kind`
/// is the file kind's tag (`srv`, `cnt`, `evt`, `mem`, `wfg`) and `n` the server, or
/// `<server>d<device>` for a per-device kind; a kind with one file per namespace numbers it 0
/// whatever the servers (`wfg0`, the wait-for graph: a namespace of server 1 only has one too).
pub const FILE_PREFIX: &str = "acl-notify-sim.";

/// The path of `namespace`'s file of kind `kind` (lowercase ASCII letters, a tag of its own),
/// numbered `number` (digits: a server, or `<server>d<device>`). Every kind names its files
/// so, which is what lets [`remove_files`] find the files of kinds it has never heard of.
pub(crate) fn file_path(namespace: &str, kind: &str, number: fmt::Arguments<'_>) -> PathBuf {
    debug_assert!(!kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase()));
    Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{namespace}.{kind}{number}"))
}

/// The kind of a file whose name, after `<prefix><namespace>.`, is `rest`: `Some(kind)` if it
/// has the shape [`file_path`] gives (`<kind><digits>` or `<kind><digits>d<digits>`), else
/// `None` (another namespace's file whose name goes on with a dot, or not ours).
fn kind_of(rest: &str) -> Option<&str> {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let split = rest.find(|c: char| !c.is_ascii_lowercase())?;
    let (kind, number) = rest.split_at(split);
    let ok = match number.split_once('d') {
        Some((server, device)) => digits(server) && digits(device),
        None => digits(number),
    };
    (!kind.is_empty() && ok).then_some(kind)
}

/// A file under [`SHM_DIR`] named the way [`file_path`] names them.
pub(crate) struct SimFile {
    pub(crate) path: PathBuf,
    /// What comes before the name's last dot (a namespace may have dots of its own).
    pub(crate) namespace: String,
    pub(crate) kind: String,
    /// The digits after the kind: a server, or `<server>d<device>`.
    pub(crate) number: String,
}

/// Every file under [`SHM_DIR`] named the way [`file_path`] names them, of every namespace
/// and kind: the one listing that [`namespaces`], [`remove_files`] and the inspector's
/// namespace list read.
pub(crate) fn sim_files() -> Result<Vec<SimFile>, SimError> {
    let dir = std::fs::read_dir(SHM_DIR).map_err(|e| {
        SimError::new(
            Error::DrvInternalError,
            format!("cannot list {SHM_DIR}: {e}"),
        )
    })?;
    Ok(dir
        .flatten()
        .filter_map(|ent| {
            let name = ent.file_name();
            let rest = name.to_str()?.strip_prefix(FILE_PREFIX)?;
            let (ns, tail) = rest.rsplit_once('.')?;
            let kind = kind_of(tail).filter(|_| !ns.is_empty())?;
            Some(SimFile {
                path: ent.path(),
                namespace: ns.to_owned(),
                kind: kind.to_owned(),
                number: tail[kind.len()..].to_owned(),
            })
        })
        .collect())
}

/// Every namespace with at least one file under [`SHM_DIR`] named the way [`file_path`]
/// names them (whatever its kind), sorted, each once.
pub(crate) fn namespaces() -> Result<Vec<String>, SimError> {
    let mut v: Vec<String> = sim_files()?.into_iter().map(|f| f.namespace).collect();
    v.sort();
    v.dedup();
    Ok(v)
}

/// Deletes `namespace`'s files of kind `kind`, or of every kind (`None`: whatever kinds there
/// are, as [`file_path`] names them); returns how many were removed.
pub(crate) fn remove_files(namespace: &str, kind: Option<&str>) -> Result<usize, SimError> {
    let mut n = 0;
    for f in sim_files()? {
        if f.namespace != namespace || kind.is_some_and(|want| f.kind != want) {
            continue;
        }
        match std::fs::remove_file(&f.path) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(SimError::new(
                    Error::DrvInternalError,
                    format!("cannot remove {}: {e}", f.path.display()),
                ));
            }
        }
    }
    Ok(n)
}

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

/// A point of the creation protocol at which, in a test, the thread's [`on_step`] hook runs:
/// where another process's step (a creator publishing, say) can fall in between two of an
/// opener's, so that a test makes that interleaving happen rather than hope for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A creator has created the file (empty) and not yet taken its init lock.
    Created,
    /// An opener waiting for a sized file's header has read its ready word once.
    ReadyRead,
    /// An opener has found the file abandoned (never published, its init lock free) and is
    /// about to remove it.
    FoundAbandoned,
}

#[cfg(test)]
type StepHook = Option<Box<dyn FnMut(Step)>>;

#[cfg(test)]
thread_local! {
    static STEP_HOOK: std::cell::RefCell<StepHook> = const { std::cell::RefCell::new(None) };
}

/// For tests: runs `hook` at every [`Step`] this thread's opens pass, until the guard is
/// dropped.
#[cfg(test)]
pub(crate) fn on_step(hook: impl FnMut(Step) + 'static) -> impl Drop {
    struct Unhook;
    impl Drop for Unhook {
        fn drop(&mut self) {
            STEP_HOOK.with(|h| h.borrow_mut().take());
        }
    }
    STEP_HOOK.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
    Unhook
}

/// Marks a [`Step`]: nothing outside tests.
#[inline(always)]
fn step(_s: Step) {
    #[cfg(test)]
    STEP_HOOK.with(|h| {
        if let Some(f) = h.borrow_mut().as_mut() {
            f(_s)
        }
    });
}

/// How long an opener waits for a creator to size the file and publish its header.
pub(crate) const INIT_WAIT: Duration = Duration::from_secs(5);

/// The value of a published header's ready word ("REDY").
pub(crate) const READY: u32 = 0x5245_4459;

/// The first bytes of a shared file: the words the creation protocol needs.
///
/// # Safety
///
/// Implementors must be made of atomics only (every bit pattern valid, shared access sound)
/// and fit in [`PAGE`] bytes with an alignment of at most a page.
pub(crate) unsafe trait FileHeader {
    /// Written last by the creator: [`READY`] once the header is complete.
    fn ready(&self) -> &AtomicU32;
    /// The creating process, written first.
    fn creator_pid(&self) -> &AtomicI32;
    /// The creator's PID namespace ([`sys::pid_namespace`]), written with its pid: every
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
    /// The header's magic word and layout version are this build's: else 507899 saying the
    /// file is not an acl-notify file of this kind, or of which version it is. Made by every
    /// opener ([`Open::open`]) before the kind's own checks.
    fn check_identity(
        self,
        path: &Path,
        (magic, version): (u64, u32),
        (want_magic, want_version): (u64, u32),
    ) -> Result<(), SimError> {
        if magic != want_magic {
            return Err(self.bad_file(
                path,
                format_args!("bad magic: not an acl-notify {}", self.0),
            ));
        }
        if version != want_version {
            return Err(self.bad_file(
                path,
                format_args!("layout version {version}, this build reads version {want_version}"),
            ));
        }
        Ok(())
    }

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

/// A file descriptor closed on drop.
pub(crate) struct Fd(libc::c_int);

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

fn fstat(fd: &Fd, path: &Path, kind: Kind) -> Result<libc::stat, SimError> {
    // SAFETY: `stat` is plain data; zeroed is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open, `st` a valid out-pointer.
    if unsafe { libc::fstat(fd.0, &mut st) } != 0 {
        return Err(kind.os_err(path, "fstat", std::io::Error::last_os_error()));
    }
    Ok(st)
}

/// A shared mapping of a whole file, unmapped on drop.
pub(crate) struct Map {
    base: *mut u8,
    len: usize,
    /// The mapping's entry in the `SIGBUS` table (see [`crate::sigbus`]).
    sigbus: Registration,
    /// The file's descriptor, kept when [`Open::keep_fd`] asked for it (to allocate or punch
    /// ranges of the file, or lock it).
    fd: Option<Fd>,
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
    fn new(fd: &Fd, len: usize, writable: bool, path: &Path, kind: Kind) -> Result<Map, SimError> {
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

    /// The file's descriptor, if the open kept it ([`Open::keep_fd`]).
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

/// How to open a shared file.
pub(crate) struct Open<'a> {
    pub(crate) path: &'a Path,
    pub(crate) kind: Kind,
    /// Create the file if it is missing (implies `writable`).
    pub(crate) create: bool,
    /// Map read-write (else read-only).
    pub(crate) writable: bool,
    /// The file's full size; 0 for an opener that learns it from the file (a reader such as
    /// the inspector, whose `validate` checks the size against the header).
    pub(crate) total: usize,
    /// How long to wait for a racing creator ([`INIT_WAIT`]).
    pub(crate) init_wait: Duration,
    /// Keep the file's descriptor open with the mapping ([`Map::fd`]).
    pub(crate) keep_fd: bool,
}

impl Open<'_> {
    /// Creates the file (see the module docs) or attaches to it. `fill` writes the creator's
    /// header fields (between the creator pid, magic word and version, and the ready word);
    /// `validate` checks a published header of this kind and version (checked before it)
    /// against what this process expects, given the file's size.
    /// `Ok(None)` only when the file does not exist and `create` is off. A file abandoned
    /// uninitialised by a dead creator is re-created when `create` is on, else it is an
    /// error. A file removed under this process (taken for abandoned by another opener
    /// before its creator locked it) sends it back to the start: once, and again while
    /// within [`init_wait`](Self::init_wait) of the first try — each removal is another
    /// process's step forwards, as when many start at once.
    pub(crate) fn open<H: FileHeader>(
        &self,
        fill: impl Fn(&H),
        validate: impl Fn(&H, u64) -> Result<(), SimError>,
    ) -> Result<Option<Map>, SimError> {
        let (path, kind) = (self.path, self.kind);
        let cpath = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| kind.bad_file(path, "its path contains NUL"))?;
        let start = Instant::now();
        let mut tries = 0u32;
        let mut again = || {
            tries += 1;
            tries == 1 || start.elapsed() <= self.init_wait
        };
        loop {
            if self.create {
                // SAFETY: `cpath` is a valid C string; flags and mode are plain integers.
                let fd = unsafe {
                    libc::open(
                        cpath.as_ptr(),
                        libc::O_RDWR
                            | libc::O_CREAT
                            | libc::O_EXCL
                            | libc::O_CLOEXEC
                            | libc::O_NOFOLLOW,
                        0o600 as libc::c_uint,
                    )
                };
                if fd >= 0 {
                    let fd = Fd(fd);
                    step(Step::Created);
                    // SAFETY: flock on a descriptor we own; blocks only while an opener that
                    // found the file first holds it for its look (microseconds).
                    unsafe { libc::flock(fd.0, libc::LOCK_EX) };
                    if !names(path, &fd) {
                        // Taken for abandoned and removed before we locked it: start again.
                        if !again() {
                            return Err(kind.bad_file(
                                path,
                                format_args!(
                                    "it was removed {tries} times while this process created \
                                     it"
                                ),
                            ));
                        }
                        continue;
                    }
                    let m = self.initialise(&fd, fill);
                    // Published (or removed on failure): the init lock has done its work (a
                    // descriptor kept with the map would otherwise hold it for ever).
                    // SAFETY: as above.
                    unsafe { libc::flock(fd.0, libc::LOCK_UN) };
                    return m.map(|m| Some(self.keep(m, fd)));
                }
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EEXIST) {
                    return Err(kind.os_err(path, "create", e));
                }
            }
            let flags = if self.writable || self.create {
                libc::O_RDWR
            } else {
                libc::O_RDONLY
            };
            // SAFETY: as above.
            let fd =
                unsafe { libc::open(cpath.as_ptr(), flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) };
            if fd < 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ENOENT) if !self.create => return Ok(None),
                    // Removed between our create attempt and this open: try again.
                    Some(libc::ENOENT) if again() => continue,
                    _ => return Err(kind.os_err(path, "open", e)),
                }
            }
            let fd = Fd(fd);
            match self.attach(&fd, &validate)? {
                Some(m) => return Ok(Some(self.keep(m, fd))),
                // Abandoned by a creator that died before initialising it, and removed by
                // `attach`: create afresh.
                None if self.create && again() => {}
                None => {
                    return Err(kind.bad_file(
                        path,
                        "it was never initialised (its creator died while creating it)",
                    ));
                }
            }
        }
    }

    fn keep(&self, mut m: Map, fd: Fd) -> Map {
        if self.keep_fd {
            m.fd = Some(fd);
        }
        m
    }

    /// The creator's part: mode, size, header, publish. The file is removed on failure.
    fn initialise<H: FileHeader>(&self, fd: &Fd, fill: impl Fn(&H)) -> Result<Map, SimError> {
        let (path, kind) = (self.path, self.kind);
        let fail = |what: &str, e: std::io::Error| {
            let _ = std::fs::remove_file(path);
            kind.os_err(path, what, e)
        };
        // SAFETY: `fd` is open; fchmod takes plain integers.
        if unsafe { libc::fchmod(fd.0, 0o600) } != 0 {
            return Err(fail("fchmod", std::io::Error::last_os_error()));
        }
        // SAFETY: as above, for ftruncate.
        if unsafe { libc::ftruncate(fd.0, self.total as libc::off_t) } != 0 {
            return Err(fail("ftruncate", std::io::Error::last_os_error()));
        }
        let map = Map::new(fd, self.total, true, path, kind).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })?;
        let h = map.header::<H>();
        h.creator_pid().store(sys::getpid(), SeqCst);
        h.pid_ns().store(sys::pid_namespace(), SeqCst);
        h.set_identity();
        fill(h);
        h.ready().store(READY, SeqCst);
        Ok(map)
    }

    /// An opener's part: owner, type and mode; wait (bounded) for the creator; validate.
    /// `Ok(None)` if the file was abandoned uninitialised.
    fn attach<H: FileHeader>(
        &self,
        fd: &Fd,
        validate: &impl Fn(&H, u64) -> Result<(), SimError>,
    ) -> Result<Option<Map>, SimError> {
        let (path, kind) = (self.path, self.kind);
        let st = fstat(fd, path, kind)?;
        let uid = sys::geteuid();
        if st.st_uid != uid {
            return Err(kind.bad_file(
                path,
                format_args!(
                    "it is owned by uid {}, not by this user (uid {uid})",
                    st.st_uid
                ),
            ));
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err(kind.bad_file(path, "it is not a regular file"));
        }
        if st.st_mode & 0o7777 != 0o600 {
            return Err(kind.bad_file(
                path,
                format_args!("its mode is {:04o}, expected 0600", st.st_mode & 0o7777),
            ));
        }
        let start = Instant::now();
        let mut size = st.st_size as u64;
        // A creator sizes the file in one step: only 0 (not sized yet) is worth waiting for,
        // and only while a creator holds the init lock.
        while size == 0 {
            if self.give_up_if_abandoned(fd, |size| size == 0)? || start.elapsed() > self.init_wait
            {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(1));
            size = fstat(fd, path, kind)?.st_size as u64;
        }
        if size < PAGE as u64 {
            return Err(kind.bad_file(path, format_args!("it is only {size} bytes long")));
        }
        let mut head = Map::new(fd, PAGE, false, path, kind)?;
        let mut h = head.header::<H>();
        loop {
            // One read, judged as read: the creator may publish at any moment, so a second
            // read could see READY where the first saw 0 (a header just published taken for
            // a corrupt one).
            let ready = h.ready().load(SeqCst);
            step(Step::ReadyRead);
            match ready {
                READY => break,
                0 => {}
                _ => {
                    return Err(kind.bad_file(
                        path,
                        format_args!("corrupt header (bad ready word {ready:#010x})"),
                    ));
                }
            }
            let unpublished = |_| h.ready().load(SeqCst) != READY;
            if self.give_up_if_abandoned(fd, unpublished)? {
                return Ok(None);
            }
            if start.elapsed() > self.init_wait {
                let creator = h.creator_pid().load(SeqCst);
                if creator > 0
                    && !sys::pid_alive(creator, 0)
                    && self.give_up_if_abandoned(fd, unpublished)?
                {
                    return Ok(None);
                }
                return Err(kind.bad_file(
                    path,
                    format_args!(
                        "its creator (pid {creator}) has not finished initialising it after {:?}",
                        self.init_wait
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        same_pid_namespace(h.pid_ns().load(SeqCst), path, kind)?;
        // A file of this kind but of another layout version (left by a build of another
        // version) that no live process maps: a read-write opener removes it and creates it
        // afresh, rather than asking the user to. One that some process maps is kept, and
        // `validate` refuses it (507899 naming both versions).
        if self.create && h.identity() != H::IDENTITY && h.identity().0 == H::IDENTITY.0 {
            // This look at its header must not count as a mapping.
            drop(head);
            if sys::file_mapped(st.st_dev, st.st_ino) == Some(false) {
                self.give_up_if_abandoned(fd, |_| true)?;
                return Ok(None);
            }
            head = Map::new(fd, PAGE, false, path, kind)?;
            h = head.header::<H>();
        }
        kind.check_identity(path, h.identity(), H::IDENTITY)?;
        validate(h, size)?;
        drop(head);
        let total = match self.total {
            0 => usize::try_from(size).map_err(|_| kind.bad_file(path, "it is too large"))?,
            t => t,
        };
        Ok(Some(Map::new(fd, total, self.writable, path, kind)?))
    }
}

impl Open<'_> {
    /// Whether the file behind `fd` is abandoned — nobody holds its init lock and, looked at
    /// while this process holds it, `unfinished(size)` says it is not published — and if so,
    /// gives it up: a read-write opener removes it (if the path still names it: another
    /// opener may have replaced it already), so that it can be created afresh. The look and
    /// the removal are made under one hold of the lock, which is kept until `fd` is closed:
    /// a creator cannot lock and publish the file in between (it would go on with a file
    /// removed under it while the others made another), and one that locks it afterwards
    /// finds the path no longer names it and starts again. Not abandoned: the lock is
    /// released at once.
    fn give_up_if_abandoned(
        &self,
        fd: &Fd,
        unfinished: impl Fn(u64) -> bool,
    ) -> Result<bool, SimError> {
        // SAFETY: flock on a descriptor we own, without blocking.
        if unsafe { libc::flock(fd.0, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Ok(false); // a creator is at work (or another opener is looking)
        }
        let abandoned = fstat(fd, self.path, self.kind).map(|st| unfinished(st.st_size as u64));
        if abandoned != Ok(true) {
            // SAFETY: as above; releases the lock taken just now.
            unsafe { libc::flock(fd.0, libc::LOCK_UN) };
            return abandoned;
        }
        step(Step::FoundAbandoned);
        if self.create && names(self.path, fd) {
            let _ = std::fs::remove_file(self.path);
        }
        Ok(true)
    }
}

/// Whether `path` still names the file open as `fd` (same device and inode).
fn names(path: &Path, fd: &Fd) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return false;
    };
    // SAFETY: all-zero bytes are a valid `stat`; fstat fills it from a descriptor we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::fstat(fd.0, &mut st) == 0 && m.dev() == st.st_dev && m.ino() == st.st_ino }
}

/// Refuses a file whose processes live in another PID namespace than this one (a container
/// sharing `/dev/shm` but not the pid space): to them this process's pid would look dead or
/// recycled, and theirs to it, so each would reclaim the other's live notifies. 0 (a
/// namespace that could not be read) is not checked.
fn same_pid_namespace(theirs: u64, path: &Path, kind: Kind) -> Result<(), SimError> {
    let mine = sys::pid_namespace();
    if theirs == 0 || mine == 0 || theirs == mine {
        return Ok(());
    }
    Err(SimError::new(
        Error::ParamInvalid,
        format!(
            "{} {} belongs to processes of another PID namespace (pid:[{theirs}]; this process \
             is in pid:[{mine}]): the simulator tells live processes from dead ones by pid, \
             which cannot be seen across PID namespaces; give each container its own \
             ACL_NOTIFY_SIM_NAMESPACE, or run them in one PID namespace (e.g. docker \
             --pid=host)",
            kind.0,
            path.display()
        ),
    ))
}

/// One mapping per file per process, shared by the users in the process; a forked child starts
/// with an empty registry (its parent's mappings and lock are not its own: see
/// [`crate::fork`]; a [`PerProcess`] sees to it, so no fork handler names a registry). For a
/// `static`.
pub(crate) struct Registry<T: 'static>(PerProcess<HashMap<PathBuf, Weak<T>>>);

impl<T: Send + Sync + 'static> Registry<T> {
    /// An empty registry.
    pub(crate) const fn new() -> Self {
        Registry(PerProcess::new(HashMap::new))
    }

    /// This process's mapping of `path` if it has one that `usable` accepts (a mapping
    /// inherited across `fork()` is the parent's, which `usable` refuses by its pid), else the
    /// one `open` makes (`Ok(None)` from `open` is passed on). Opens are serialised, so two
    /// threads never map one file twice.
    pub(crate) fn get_or_open(
        &self,
        path: &Path,
        usable: impl Fn(&T) -> bool,
        open: impl FnOnce() -> Result<Option<T>, SimError>,
    ) -> Result<Option<Arc<T>>, SimError> {
        let mut reg = self.0.lock()?;
        if let Some(f) = reg.get(path).and_then(Weak::upgrade).filter(|f| usable(f)) {
            return Ok(Some(f));
        }
        let Some(f) = open()? else {
            return Ok(None);
        };
        let f = Arc::new(f);
        reg.retain(|_, w| w.strong_count() > 0);
        reg.insert(path.to_owned(), Arc::downgrade(&f));
        Ok(Some(f))
    }

    /// This process's mapping of `path` if it has one that `usable` accepts; never opens
    /// the file.
    pub(crate) fn find(&self, path: &Path, usable: impl Fn(&T) -> bool) -> Option<Arc<T>> {
        let reg = self.0.lock().ok()?;
        reg.get(path).and_then(Weak::upgrade).filter(|f| usable(f))
    }

    /// This process's lock (for the fork tests).
    #[cfg(test)]
    pub(crate) fn get(&self) -> &std::sync::Mutex<HashMap<PathBuf, Weak<T>>> {
        self.0.get()
    }
}

/// For tests of the layout version: the file at `path` as a live process of a build of
/// layout `version` leaves it — that version in its header, and a mapping of it held (a
/// page, read-only) until the guard is dropped, so that an opener keeps it and must refuse
/// it rather than replace it.
#[cfg(test)]
pub(crate) fn held_at_version(path: &Path, version: u32) -> impl Drop {
    use std::os::unix::fs::FileExt as _;
    use std::os::unix::io::AsRawFd as _;
    struct Held(*mut libc::c_void);
    impl Drop for Held {
        fn drop(&mut self) {
            // SAFETY: the mapping made below, of that length, unmapped once.
            unsafe { libc::munmap(self.0, PAGE) };
        }
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("the test's file");
    f.write_all_at(&version.to_le_bytes(), 8)
        .expect("the header's version");
    // SAFETY: maps one page of a file of at least a page (a header), read-only, shared;
    // unmapped by the guard.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    assert_ne!(map, libc::MAP_FAILED);
    Held(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
    use std::path::PathBuf;

    #[repr(C)]
    struct TestHeader {
        ready: AtomicU32,
        creator: AtomicI32,
        value: AtomicU64,
        pid_ns: AtomicU64,
    }

    // SAFETY: atomics only, 24 bytes.
    unsafe impl FileHeader for TestHeader {
        fn ready(&self) -> &AtomicU32 {
            &self.ready
        }
        fn creator_pid(&self) -> &AtomicI32 {
            &self.creator
        }
        fn pid_ns(&self) -> &AtomicU64 {
            &self.pid_ns
        }
        // No magic word or version: never taken for another version's file.
        const IDENTITY: (u64, u32) = (0, 0);
        fn set_identity(&self) {}
        fn identity(&self) -> (u64, u32) {
            Self::IDENTITY
        }
    }

    /// A namespace's files are found by the shape of their names, whatever their kind: one of
    /// a kind nobody registered goes too, and so do per-device ones; a namespace whose name
    /// goes on after a dot, and names of another shape, are left alone.
    #[test]
    fn remove_files_finds_every_kind_by_its_name_alone() {
        let ns = format!("unit-mapfile-rm-{}", std::process::id());
        let ours = [
            file_path(&ns, "srv", format_args!("0")),
            file_path(&ns, "zzz", format_args!("17")),
            file_path(&ns, "mem", format_args!("0d3")),
        ];
        let theirs = [
            file_path(&format!("{ns}.srv0"), "srv", format_args!("1")),
            Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}.srv")),
            Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}.srv0x")),
            Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}.0")),
        ];
        // Each file goes when the test ends, also when it fails.
        let _guards: Vec<TempPath> = ours
            .iter()
            .chain(&theirs)
            .map(|p| {
                std::fs::write(p, b"").unwrap();
                TempPath(p.clone())
            })
            .collect();
        assert_eq!(remove_files(&ns, Some("cnt")).unwrap(), 0);
        assert_eq!(remove_files(&ns, Some("zzz")).unwrap(), 1);
        assert_eq!(remove_files(&ns, None).unwrap(), 2);
        let left: Vec<bool> = theirs.iter().map(|p| p.exists()).collect();
        assert!(ours.iter().all(|p| !p.exists()));
        assert_eq!(left, [true; 4], "{theirs:?}");
    }

    /// Namespaces are listed by their files' names: each once, whatever its kinds, and one
    /// whose name has dots in it whole.
    #[test]
    fn namespaces_are_found_by_their_files_names() {
        let ns = format!("unit-mapfile-ls-{}", std::process::id());
        let dotted = format!("{ns}.x");
        let paths = [
            file_path(&ns, "srv", format_args!("0")),
            file_path(&ns, "mem", format_args!("0d1")),
            file_path(&dotted, "zzz", format_args!("3")),
            // Not a simulator file's shape: no namespace of its own.
            Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{ns}-odd.srv")),
        ];
        let _guards: Vec<TempPath> = paths
            .iter()
            .map(|p| {
                std::fs::write(p, b"").unwrap();
                TempPath(p.clone())
            })
            .collect();
        let found: Vec<String> = namespaces()
            .unwrap()
            .into_iter()
            .filter(|n| n.starts_with(&ns))
            .collect();
        assert_eq!(found, [ns.clone(), dotted]);
    }

    struct TempPath(PathBuf);
    impl TempPath {
        fn new(tag: &str) -> TempPath {
            let p = PathBuf::from(format!(
                "/dev/shm/acl-notify-sim.unit-mapfile-{tag}-{}",
                std::process::id()
            ));
            let _ = std::fs::remove_file(&p);
            TempPath(p)
        }
        fn open(&self, create: bool, writable: bool) -> Open<'_> {
            Open {
                path: &self.0,
                kind: Kind("test file"),
                create,
                writable,
                total: 2 * PAGE,
                init_wait: Duration::from_millis(100),
                keep_fd: false,
            }
        }
        /// Plants a 0600 file with `bytes`.
        fn plant(&self, bytes: &[u8]) {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&self.0)
                .unwrap();
            f.write_all(bytes).unwrap();
            std::fs::set_permissions(&self.0, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
    }
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn fill(h: &TestHeader) {
        h.value.store(42, SeqCst);
    }

    fn check(h: &TestHeader, size: u64) -> Result<(), SimError> {
        if h.value.load(SeqCst) == 42 && size == 2 * PAGE as u64 {
            Ok(())
        } else {
            Err(SimError::new(Error::DrvInternalError, "header mismatch"))
        }
    }

    fn err_text(r: Result<Option<Map>, SimError>) -> String {
        match r {
            Err(e) => e.to_string(),
            Ok(m) => panic!("opened: {:?}", m.is_some()),
        }
    }

    #[test]
    fn create_then_attach_read_only_and_missing_without_create() {
        let p = TempPath::new("basic");
        assert!(p.open(false, true).open(fill, check).unwrap().is_none());
        let created = p.open(true, true).open(fill, check).unwrap().unwrap();
        let h = created.header::<TestHeader>();
        assert_eq!(h.ready.load(SeqCst), READY);
        assert_eq!(h.creator.load(SeqCst), sys::getpid());
        let ro = p.open(false, false).open(fill, check).unwrap().unwrap();
        assert_eq!(ro.header::<TestHeader>().value.load(SeqCst), 42);
        let meta = std::fs::metadata(&p.0).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
        assert_eq!(meta.len(), 2 * PAGE as u64);
        // The validator's verdict is passed on.
        h.value.store(7, SeqCst);
        assert!(err_text(p.open(true, true).open(fill, check)).contains("header mismatch"));
    }

    /// A file created in another PID namespace is refused with a message that says so and
    /// what to do; one whose creator could not read its namespace (0) is not checked.
    #[test]
    fn a_file_of_another_pid_namespace_is_refused() {
        let p = TempPath::new("pidns");
        let created = p.open(true, true).open(fill, check).unwrap().unwrap();
        let h = created.header::<TestHeader>();
        assert_eq!(h.pid_ns.load(SeqCst), sys::pid_namespace());
        assert_ne!(sys::pid_namespace(), 0, "this test needs /proc/self/ns/pid");
        h.pid_ns.store(sys::pid_namespace() + 1, SeqCst);
        let msg = err_text(p.open(true, true).open(fill, check));
        assert!(msg.contains("107000"), "{msg}");
        assert!(
            msg.contains("another PID namespace") && msg.contains("ACL_NOTIFY_SIM_NAMESPACE"),
            "{msg}"
        );
        h.pid_ns.store(0, SeqCst);
        assert!(p.open(false, true).open(fill, check).unwrap().is_some());
    }

    /// A size no creator produces is refused at once, not after the creator wait.
    #[test]
    fn a_short_file_is_refused_at_once() {
        let p = TempPath::new("short");
        p.plant(&[1u8; 100]);
        let t0 = Instant::now();
        let e = err_text(p.open(true, true).open(fill, check));
        assert!(
            e.contains("only 100 bytes long") && e.contains("test file"),
            "{e}"
        );
        assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    }

    #[test]
    fn a_bad_ready_word_is_corruption() {
        let p = TempPath::new("ready");
        let mut page = vec![0u8; 2 * PAGE];
        page[..4].copy_from_slice(&0xdead_beef_u32.to_ne_bytes());
        p.plant(&page);
        let e = err_text(p.open(true, true).open(fill, check));
        assert!(e.contains("bad ready word"), "{e}");
    }

    /// An empty file nobody is initialising (a creator that died before sizing it, or any
    /// process that made an empty file there) is re-created at once by a read-write opener,
    /// without the wait for a creator at work, and refused at once by a read-only one.
    #[test]
    fn an_empty_file_nobody_initialises_is_taken_over_without_waiting() {
        let p = TempPath::new("empty-fast");
        for create in [false, true] {
            p.plant(&[]);
            let o = Open {
                init_wait: INIT_WAIT,
                ..p.open(create, create)
            };
            let t0 = Instant::now();
            let r = o.open(fill, check);
            let took = t0.elapsed();
            assert!(took < INIT_WAIT / 5, "create {create}: took {took:?}");
            if create {
                let m = r.unwrap().unwrap();
                assert_eq!(m.header::<TestHeader>().value.load(SeqCst), 42);
            } else {
                assert!(err_text(r).contains("never initialised"));
            }
            let _ = std::fs::remove_file(&p.0);
        }
    }

    /// An empty file whose init lock is held (a creator at work) is waited for, and not
    /// removed when the wait ends: its creator is alive.
    #[test]
    fn an_empty_file_whose_creator_holds_the_init_lock_is_waited_for() {
        let p = TempPath::new("empty-held");
        p.plant(&[]);
        let creator = std::fs::File::open(&p.0).unwrap();
        use std::os::fd::AsRawFd as _;
        // SAFETY: flock on a descriptor `creator` owns.
        let locked = unsafe { libc::flock(creator.as_raw_fd(), libc::LOCK_EX) };
        assert_eq!(locked, 0);
        let t0 = Instant::now();
        let e = err_text(p.open(true, true).open(fill, check));
        assert!(e.contains("never initialised"), "{e}");
        assert!(
            t0.elapsed() >= Duration::from_millis(100),
            "{:?}",
            t0.elapsed()
        );
        assert!(p.0.exists(), "a file whose creator is at work was removed");
        drop(creator);
        // Released (the creator died): taken over. A child another test of this process forks
        // (some run their body in one) holds a copy of `creator`'s descriptor, and so its
        // lock, until it exits or execs: on a loaded machine that can take a while, so the
        // take-over is polled for (it must come).
        let t0 = Instant::now();
        let m = loop {
            match p.open(true, true).open(fill, check) {
                Ok(m) => break m.unwrap(),
                Err(e) if e.to_string().contains("never initialised") => {
                    assert!(
                        t0.elapsed() < Duration::from_secs(30),
                        "never taken over: {e}"
                    );
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("{e}"),
            }
        };
        assert_eq!(m.header::<TestHeader>().value.load(SeqCst), 42);
    }

    /// What a creator writes into a sized file to publish it (a [`TestHeader`] that `check`
    /// accepts, its ready word last), through `f`'s descriptor.
    fn publish_as_creator(f: &std::fs::File) {
        use std::os::unix::fs::FileExt as _;
        f.write_all_at(&sys::getpid().to_ne_bytes(), 4).unwrap();
        f.write_all_at(&42u64.to_ne_bytes(), 8).unwrap();
        f.write_all_at(&READY.to_ne_bytes(), 0).unwrap();
    }

    fn flock(f: &std::fs::File, how: libc::c_int) -> bool {
        use std::os::fd::AsRawFd as _;
        // SAFETY: flock on a descriptor `f` owns.
        unsafe { libc::flock(f.as_raw_fd(), how) == 0 }
    }

    /// The creator publishes its header just after an opener that waits for it read the
    /// ready word as 0: the opener attaches (it judges the word it read, not a second read
    /// of a word that may have changed meanwhile — which once took a just-published header
    /// for a corrupt one, "bad ready word", when two processes started at once).
    #[test]
    fn a_header_published_just_after_its_ready_word_was_read_is_attached() {
        let p = TempPath::new("ready-race");
        p.plant(&vec![0u8; 2 * PAGE]);
        // The creator at work: sized, not published, its init lock held.
        let creator = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&p.0)
            .unwrap();
        assert!(flock(&creator, libc::LOCK_EX));
        let creator = std::rc::Rc::new(creator);
        let steps = std::rc::Rc::new(std::cell::Cell::new(0));
        let _hook = on_step({
            let (creator, steps) = (creator.clone(), steps.clone());
            move |s| {
                if s == Step::ReadyRead && steps.replace(steps.get() + 1) == 0 {
                    publish_as_creator(&creator);
                    assert!(flock(&creator, libc::LOCK_UN));
                }
            }
        });
        let m = p.open(true, true).open(fill, check).unwrap().unwrap();
        assert!(steps.get() >= 1, "the opener never waited for the header");
        let h = m.header::<TestHeader>();
        assert_eq!((h.ready.load(SeqCst), h.value.load(SeqCst)), (READY, 42));
    }

    /// An opener finds a file unpublished and its init lock free (its creator made it and
    /// has not locked it yet); before the opener removes it, the creator locks it and
    /// publishes: it must not be able to, for the opener would then remove a published file,
    /// and the two processes would go on with two different files of one namespace. The
    /// opener decides and removes under one hold of the lock, so the creator is shut out
    /// (and, in the protocol, finds its file gone and starts again).
    #[test]
    fn a_creator_cannot_publish_between_an_opener_s_look_and_its_removal() {
        use std::os::unix::fs::MetadataExt as _;
        let p = TempPath::new("abandon-race");
        p.plant(&[]);
        let planted = std::fs::metadata(&p.0).unwrap().ino();
        // None: the hook did not run; Some(true): the creator published in between.
        let outcome = std::rc::Rc::new(std::cell::Cell::new(None));
        let _hook = on_step({
            let (path, outcome) = (p.0.clone(), outcome.clone());
            move |s| {
                if s != Step::FoundAbandoned || outcome.get().is_some() {
                    return;
                }
                let creator = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&path)
                    .unwrap();
                let locked = flock(&creator, libc::LOCK_EX | libc::LOCK_NB);
                if locked {
                    creator.set_len(2 * PAGE as u64).unwrap();
                    publish_as_creator(&creator);
                }
                outcome.set(Some(locked));
            }
        });
        let m = p.open(true, true).open(fill, check).unwrap().unwrap();
        assert_eq!(m.header::<TestHeader>().value.load(SeqCst), 42);
        let now = std::fs::metadata(&p.0).unwrap().ino();
        assert_eq!(
            outcome.get(),
            Some(false),
            "published meanwhile: {}",
            if now == planted {
                "kept"
            } else {
                "and removed"
            }
        );
        assert_ne!(now, planted, "the abandoned file was not replaced");
    }

    /// Processes starting at once: each creator's new file, empty and not yet locked, is
    /// taken for abandoned and removed by another process before its creator locks it, three
    /// times over. The creator starts again each time (within the creator wait) and gets a
    /// published file, rather than failing for a race it did not lose for good.
    #[test]
    fn a_creator_whose_file_is_removed_before_it_locks_it_starts_again() {
        let p = TempPath::new("created-race");
        let removed = std::rc::Rc::new(std::cell::Cell::new(0));
        let _hook = on_step({
            let (path, removed) = (p.0.clone(), removed.clone());
            move |s| {
                if s == Step::Created && removed.get() < 3 {
                    std::fs::remove_file(&path).unwrap();
                    removed.set(removed.get() + 1);
                }
            }
        });
        let m = p.open(true, true).open(fill, check).unwrap().unwrap();
        assert_eq!(removed.get(), 3);
        assert_eq!(m.header::<TestHeader>().ready.load(SeqCst), READY);
        assert!(p.0.exists());
    }

    /// An empty file (a creator that died before sizing it) is re-created by a read-write
    /// opener, and refused by a read-only one.
    #[test]
    fn an_abandoned_empty_file_is_recreated() {
        let p = TempPath::new("empty");
        p.plant(&[]);
        let e = err_text(p.open(false, false).open(fill, check));
        assert!(e.contains("never initialised"), "{e}");
        let m = p.open(true, true).open(fill, check).unwrap().unwrap();
        assert_eq!(m.header::<TestHeader>().value.load(SeqCst), 42);
    }
}

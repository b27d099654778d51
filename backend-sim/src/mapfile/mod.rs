//! The shared-file machinery common to the notify file ([`crate::shm`]), the count-notify
//! file ([`crate::cnt`]) and the device-memory files ([`crate::mem`]): creating a file
//! exclusively and publishing its header, or attaching to one another process created —
//! checking owner, type and mode, waiting (bounded) for its creator, validating the header —
//! the mappings and descriptors that close themselves, bounds-checked access to the shared
//! types in a mapping ([`Map::at`]), and the per-process registry of open files
//! ([`Registry`]) that a forked child starts afresh.
//!
//! # Where each part lives
//!
//! - this module: the creation protocol below ([`Open`]), with its test hooks ([`Step`]);
//! - [`header`]: the header words every kind has ([`FileHeader`], [`file_header!`]), the
//!   fields a kind's layout fixes ([`Field`]), and the checks and messages that refuse a file
//!   ([`Kind`]);
//! - [`map`]: the mapping ([`Map`], [`Fd`]), the types viewed in it ([`Shared`]) and the
//!   bounds check of every access ([`check_span`](map::check_span));
//! - [`names`]: the files' names under [`SHM_DIR`], listed and removed by name alone;
//! - [`registry`]: one mapping per file per process ([`Registry`]).
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

mod header;
mod map;
mod names;
mod registry;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use acl_notify_core::Error;

use crate::error::SimError;
use crate::sys;

pub(crate) use header::{
    Field, FileHeader, Kind, READY, align_up, field, file_header, fill_fields, soc_from_index,
    soc_index,
};
pub(crate) use map::{Fd, LIMITED, Map, PAGE, Shared, mapping_failed};
pub use names::{FILE_PREFIX, SHM_DIR};
pub(crate) use names::{file_path, namespaces, remove_files, sim_files};
pub(crate) use registry::Registry;

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

fn fstat(fd: &Fd, path: &Path, kind: Kind) -> Result<libc::stat, SimError> {
    // SAFETY: `stat` is plain data; zeroed is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open, `st` a valid out-pointer.
    if unsafe { libc::fstat(fd.0, &mut st) } != 0 {
        return Err(kind.os_err(path, "fstat", std::io::Error::last_os_error()));
    }
    Ok(st)
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
mod tests;

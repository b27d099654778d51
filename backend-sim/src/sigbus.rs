//! Surviving a shared file that shrinks under its mappings.
//!
//! A process of the same uid may truncate a namespace's file while others have it mapped.
//! Touching a mapped page past the new end then raises `SIGBUS`, which would kill every
//! process of the namespace. Instead, each mapping of a shared file is registered here, and a
//! `SIGBUS` handler (installed once, at the first registration) that finds the faulting address
//! in a registered mapping maps a private zero page over it and lets the access go on; the
//! mapping is marked *lost*, and the simulator answers its calls with an error from then on
//! ([`Registration::lost`]). A fault anywhere else goes to the handler that was installed
//! before ours (or, if that was the default, the process dies of it as it would have).
//!
//! A later handler installed by the host program replaces ours; truncation then kills as
//! before. The zero pages are this process's alone: the state in them is gone, which is why the
//! mapping is reported lost rather than used.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use acl_notify_core::Error;

use crate::error::SimError;
use crate::sys;

/// Mappings that can be registered at once (each open namespace file is one; a process
/// rarely has more than a few). Past this, a mapping simply goes unprotected.
const SLOTS: usize = 128;

struct Region {
    start: AtomicUsize,
    len: AtomicUsize,
    lost: AtomicBool,
}

static REGIONS: [Region; SLOTS] = [const {
    Region {
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        lost: AtomicBool::new(false),
    }
}; SLOTS];

/// Cut-off pages this process's handler has found (and replaced with zero pages), ever,
/// each counted before its zero page is mapped: a call that reads it before and after
/// touching shared files knows whether it hit a cut-off page meanwhile ([`crate::lost`]).
static FAULTS: AtomicU64 = AtomicU64::new(0);

/// How many cut-off pages the handler has found so far (see [`FAULTS`]).
#[inline]
pub(crate) fn faults() -> u64 {
    FAULTS.load(Ordering::SeqCst)
}

/// Whether our handler is installed: [`NONE`], [`INSTALLED`], or [`INSTALLING`] in bits 0‥1
/// with the fork generation ([`sys::fork_generation`]) of the installing process above them
/// (see [`installing`]). Not a `Once`: a child forked while another thread ran it would wait
/// for ever (see [`crate::fork`]).
static INSTALL: AtomicU64 = AtomicU64::new(NONE);
const NONE: u64 = 0;
const INSTALLING: u64 = 1;
const INSTALLED: u64 = 2;

/// The value of [`INSTALL`] while a thread of the process of fork generation `generation`
/// installs the handler. A forked child (a later generation) that finds it knows the
/// installation was cut short by the fork (the installing thread is not in the child).
const fn installing(generation: u64) -> u64 {
    INSTALLING | generation << 2
}
/// The page size, read once at installation (the handler must not call `sysconf`).
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// The `SIGBUS` action that was in place before ours, written once before ours is installed.
struct Prev(UnsafeCell<Option<libc::sigaction>>);
// SAFETY: written only by the one thread that moved `INSTALL` to INSTALLING, before it
// installs the handler that reads it (in a forked child, again only if that handler is not
// installed), then only read.
unsafe impl Sync for Prev {}
static PREV: Prev = Prev(UnsafeCell::new(None));

/// A mapping's entry in the table; [`release`](Registration::release) it before unmapping.
#[derive(Debug)]
pub(crate) struct Registration {
    slot: Option<usize>,
}

impl Registration {
    /// Registers the mapping `[start, start + len)`.
    pub(crate) fn new(start: *mut u8, len: usize) -> Registration {
        ensure_installed();
        let start = start.addr();
        for (i, r) in REGIONS.iter().enumerate() {
            if r.start
                .compare_exchange(0, start, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                r.lost.store(false, Ordering::SeqCst);
                r.len.store(len, Ordering::SeqCst);
                return Registration { slot: Some(i) };
            }
        }
        Registration { slot: None }
    }

    /// Whether a page of the mapping was found cut off (the file shrank) and replaced by a
    /// private zero page in this process.
    #[inline]
    pub(crate) fn lost(&self) -> bool {
        // Only the handler marks a region lost, and it counts each page it replaces after
        // (`FAULTS`, never lowered): with none counted, nothing is lost — one load of a line
        // nobody writes, instead of the region's index checked and its flag loaded. A record
        // or wait task asks after every notify access (`SimJob::run_plain`); a fault of its
        // own ran the handler on its own thread, so it sees the count.
        faults() != 0
            && self
                .slot
                .is_some_and(|i| REGIONS[i].lost.load(Ordering::Relaxed))
    }

    /// `Ok` unless [`lost`](Self::lost): then 507899 saying that the file at `path` was cut
    /// short and the machine's state is gone.
    #[inline]
    pub(crate) fn intact(&self, path: &Path) -> Result<(), SimError> {
        if self.lost() {
            return Err(lost_error(path));
        }
        Ok(())
    }

    /// Takes the mapping out of the table (before it is unmapped).
    pub(crate) fn release(&mut self) {
        if let Some(i) = self.slot.take() {
            REGIONS[i].len.store(0, Ordering::SeqCst);
            REGIONS[i].start.store(0, Ordering::SeqCst);
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.release();
    }
}

/// Below this many free bytes, the file system holding a lost mapping's file is taken to be
/// full: the likelier cause of the fault than a truncation.
const FULL_BELOW: u64 = 1 << 20;

#[cold]
pub(crate) fn lost_error(path: &Path) -> SimError {
    lost_error_with(path, free_bytes(path))
}

/// The error for a lost mapping of the file at `path`, `free` being the bytes its file system
/// had free when asked (`None`: not known). A page of a `tmpfs` file (`/dev/shm`) gets its
/// memory when it is first touched; with the file system full, that touch raises the same
/// `SIGBUS` as a page past a truncated file's end, so the handler cannot tell the two apart and
/// the free space decides what the message names.
fn lost_error_with(path: &Path, free: Option<u64>) -> SimError {
    let (cause, remedy) = match free {
        Some(free) if free < FULL_BELOW => (
            format!(
                "a page of the shared file could not be given memory: the file system holding \
                 it is full ({free} bytes free)"
            ),
            "Free space there (a namespace no process uses: acl-notify-inspect rm), then remove \
             this namespace (Sim::remove_namespace, or delete the file) and start again",
        ),
        _ => (
            "the shared file was truncated by another process while mapped here".to_string(),
            "Remove the namespace (Sim::remove_namespace, or delete the file) and start again",
        ),
    };
    SimError::new(
        Error::DrvInternalError,
        format!(
            "{}: {cause}; the simulated machine's state is lost (the pages that faulted read as \
             zeros in this process). {remedy}",
            path.display()
        ),
    )
}

/// The bytes free to this process on the file system holding `path` (`statvfs`).
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: a NUL-terminated path, and a structure `statvfs` fills when it returns 0.
    if unsafe { libc::statvfs(name.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: `statvfs` returned 0, so it filled the structure.
    let st = unsafe { st.assume_init() };
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Installs our handler unless it is, or another thread is installing it. A thread that
/// finds another one installing goes on without waiting: its mapping is unprotected for the
/// microseconds that takes, once per process.
///
/// An installation that a fork cut short (claimed by a thread of an earlier fork generation,
/// which the child does not have) is done again by the child; `install` notices if the
/// handler had got in already.
fn ensure_installed() {
    let now = INSTALL.load(Ordering::Acquire);
    if now == INSTALLED {
        return;
    }
    let generation = sys::fork_generation();
    let cut_short = now & 3 == INSTALLING && now != installing(generation);
    let expected = if cut_short { now } else { NONE };
    if INSTALL
        .compare_exchange(
            expected,
            installing(generation),
            Ordering::Acquire,
            Ordering::Acquire,
        )
        .is_ok()
    {
        install();
        INSTALL.store(INSTALLED, Ordering::Release);
    }
}

fn install() {
    // SAFETY: `sysconf` is safe to call; a failure (-1) keeps the default.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page > 0 {
        PAGE.store(page as usize, Ordering::SeqCst);
    }
    // SAFETY: plain `sigaction` calls with valid, zero-initialised structures; `PREV` is
    // written before our handler is installed, so the handler always sees it written.
    unsafe {
        let mut prev: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut prev) != 0 {
            return;
        }
        if prev.sa_sigaction == on_sigbus as *const () as usize {
            // Installed by the parent of this forked child, whose installing thread the fork
            // cut short: `PREV` was written before, and keeps the handler before ours.
            return;
        }
        *PREV.0.get() = Some(prev);
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sigbus as *const () as usize;
        act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGBUS, &act, std::ptr::null_mut());
    }
}

/// The handler: async-signal-safe (atomics, `mmap`, `sigaction`, `raise` only).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: the kernel passes a valid `siginfo_t` to an SA_SIGINFO handler.
    let (addr, code) = unsafe { ((*info).si_addr().addr(), (*info).si_code) };
    // Only a fault (si_code > 0) names an address; a SIGBUS sent with kill() does not.
    if code > 0 {
        for r in &REGIONS {
            let (start, len) = (r.start.load(Ordering::SeqCst), r.len.load(Ordering::SeqCst));
            if start != 0 && addr >= start && addr - start < len {
                let page = addr & !(PAGE.load(Ordering::Relaxed) - 1);
                // Marked and counted before the zero page goes in: another thread may touch
                // the page (without a fault of its own) as soon as it is mapped, and its
                // check after that access ([`Registration::lost`]: the count, then the flag)
                // must find the loss. Marked lost even if the mapping below fails: the file
                // did shrink under it, whoever handles the fault then.
                r.lost.store(true, Ordering::SeqCst);
                FAULTS.fetch_add(1, Ordering::SeqCst);
                // SAFETY: replaces one page of our own registered mapping (the faulting one)
                // with a private zero page; nothing else is mapped there.
                let p = unsafe {
                    libc::mmap(
                        std::ptr::without_provenance_mut(page),
                        PAGE.load(Ordering::Relaxed),
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_FIXED | libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    )
                };
                if p != libc::MAP_FAILED {
                    return;
                }
                break;
            }
        }
    }
    // Not ours: what would have happened without us.
    // SAFETY: `PREV` was written before this handler was installed.
    let prev = unsafe { *PREV.0.get() };
    match prev {
        Some(p) if p.sa_sigaction != libc::SIG_DFL && p.sa_sigaction != libc::SIG_IGN => {
            if p.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: an SA_SIGINFO handler has this signature; we pass on our arguments.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                    unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: a plain handler takes the signal number.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(p.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // The default action: reinstate it and raise again (a fault would repeat on
            // return anyway; a sent signal would not).
            // SAFETY: plain `sigaction`/`raise` calls, both async-signal-safe.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut dfl.sa_mask);
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
                libc::raise(libc::SIGBUS);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file mapped for 4 pages, cut to 1 page: touching page 3 reads zero instead of killing
    /// the process, and the mapping is reported lost.
    #[test]
    fn a_truncated_mapping_reads_zero_pages_and_is_reported_lost() {
        let dir = std::env::temp_dir().join(format!("acl-notify-sigbus-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&dir)
            .unwrap();
        let page = 4096 * 4;
        f.set_len(page as u64).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: a fresh shared mapping of our own file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let base = p.cast::<u8>();
        let mut reg = Registration::new(base, page);
        // SAFETY: in-bounds writes to the mapping.
        unsafe {
            base.write_volatile(7);
            base.add(3 * 4096).write_volatile(9);
        }
        assert!(!reg.lost());
        f.set_len(4096).unwrap();
        // SAFETY: in bounds of the mapping; past the file's end now, which is the point.
        let (first, cut) = unsafe { (base.read_volatile(), base.add(3 * 4096).read_volatile()) };
        assert_eq!(first, 7, "the page still backed by the file keeps its data");
        assert_eq!(cut, 0, "the cut-off page reads as zero");
        assert!(reg.lost());
        reg.release();
        // SAFETY: our mapping, no longer used.
        unsafe { libc::munmap(p, page) };
        let _ = std::fs::remove_file(&dir);
    }

    /// A lost mapping is put down to a full file system when its file system has (almost) no
    /// space left, else to a truncation; and the free space is read from the real file system.
    #[test]
    fn a_lost_mapping_on_a_full_file_system_is_reported_as_full_not_truncated() {
        let p = Path::new("/dev/shm/acl-notify-sim.sigbus-test.srv0");
        let full = lost_error_with(p, Some(4096)).to_string();
        assert!(
            full.contains("is full (4096 bytes free)") && !full.contains("truncated"),
            "{full}"
        );
        for free in [Some(1 << 30), None] {
            let cut = lost_error_with(p, free).to_string();
            assert!(cut.contains("truncated by another process"), "{cut}");
        }
        let dir = std::env::temp_dir();
        assert!(free_bytes(&dir).is_some(), "statvfs of {}", dir.display());
        assert_eq!(free_bytes(Path::new("/no/such/acl-notify/dir")), None);
    }

    /// The SIGBUS handler now in place.
    fn current_handler() -> usize {
        // SAFETY: a query-only `sigaction` into a zeroed structure.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut now), 0);
            now.sa_sigaction
        }
    }

    /// Runs `body` in a forked child (so the process-wide handler state of this test binary is
    /// not touched) and requires it to succeed.
    fn in_child(what: &str, body: fn() -> bool) {
        if let Err(status) = crate::fork::run_in_child(body) {
            panic!("{what} (status {status:#x})");
        }
    }

    /// A fork that cut an installation short, before or after its `sigaction`: the child's
    /// fork handler lets the next mapping install it again, and the child ends up with our
    /// handler, and with the handler before ours kept for signals that are not ours.
    #[test]
    fn a_child_finishes_an_installation_the_fork_cut_short() {
        in_child("cut before the handler went in", || {
            // As the fork found it: another thread had claimed the installation and had not
            // called `sigaction` yet; the handler in place is the default.
            // SAFETY: sets SIGBUS to its default action in this child only.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut dfl.sa_mask);
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
            INSTALL.store(installing(sys::fork_generation()), Ordering::SeqCst);
            ensure_installed();
            let skipped = current_handler() == libc::SIG_DFL;
            sys::as_if_forked();
            ensure_installed();
            // SAFETY: `PREV` was written by `install` above, in this thread.
            let prev = unsafe { *PREV.0.get() };
            skipped
                && INSTALL.load(Ordering::SeqCst) == INSTALLED
                && current_handler() == on_sigbus as *const () as usize
                && prev.is_some_and(|p| p.sa_sigaction == libc::SIG_DFL)
        });
        in_child("cut after the handler went in", || {
            // As the fork found it: the handler is ours and `PREV` written, but the installing
            // thread had not marked it installed.
            INSTALL.store(NONE, Ordering::SeqCst);
            ensure_installed();
            // SAFETY: `PREV` was written by `install` above, in this thread.
            let before = unsafe { *PREV.0.get() }.map(|p| p.sa_sigaction);
            INSTALL.store(installing(sys::fork_generation()), Ordering::SeqCst);
            sys::as_if_forked();
            ensure_installed();
            // SAFETY: as above.
            let after = unsafe { *PREV.0.get() }.map(|p| p.sa_sigaction);
            INSTALL.load(Ordering::SeqCst) == INSTALLED
                && current_handler() == on_sigbus as *const () as usize
                && before.is_some()
                && after == before
                && after != Some(on_sigbus as *const () as usize)
        });
    }
}

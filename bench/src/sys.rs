//! Thin, checked wrappers over the Linux calls the benchmarks use: futexes, shared memory
//! (a memfd mapped `MAP_SHARED`, inherited by child processes), clocks and CPU-time counters.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Whether a futex is used between processes (a shared mapping) or only between the threads of
/// one process (the kernel's cheaper private futex).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Between processes: plain `FUTEX_WAIT` / `FUTEX_WAKE`.
    Process,
    /// Between threads of this process: `FUTEX_PRIVATE_FLAG`.
    Thread,
}

impl Scope {
    fn flag(self) -> i32 {
        match self {
            Scope::Process => 0,
            Scope::Thread => libc::FUTEX_PRIVATE_FLAG,
        }
    }
}

/// Where the threads of a case run: as the kernel places them, or each on a CPU of its own —
/// the same placement the simulator's `StreamCpus::Spread` gives stream workers, so a
/// placed case is measured against baselines placed alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The kernel places the threads.
    Kernel,
    /// Thread `i` of the case runs on the `i`-th CPU this process may use (in turn).
    Spread,
}

impl Place {
    /// The CPU for the case's thread `i` (`None`: the kernel places it).
    pub fn cpu(self, i: usize) -> Option<usize> {
        match self {
            Place::Kernel => None,
            Place::Spread => {
                let cpus = acl_notify_sim::stream::allowed_cpus();
                (!cpus.is_empty()).then(|| cpus[i % cpus.len()])
            }
        }
    }

    /// `Err(why)` if this placement cannot put two threads on different CPUs here.
    pub fn usable(self) -> Result<(), String> {
        match self {
            Place::Kernel => Ok(()),
            Place::Spread => match acl_notify_sim::stream::allowed_cpus().len() {
                n if n >= 2 => Ok(()),
                n => Err(format!(
                    "placing two threads needs two CPUs; this process may use {n}"
                )),
            },
        }
    }

    /// Row-name suffix.
    pub fn suffix(self) -> &'static str {
        match self {
            Place::Kernel => "",
            Place::Spread => ", threads placed",
        }
    }
}

/// Runs `f` on a thread restricted to `cpu`, or on this thread if `cpu` is `None` (so this
/// thread's own affinity never changes).
pub fn run_on<R: Send>(cpu: Option<usize>, f: impl FnOnce() -> R + Send) -> Result<R, String> {
    match cpu {
        None => Ok(f()),
        Some(c) => std::thread::scope(|s| {
            s.spawn(move || {
                pin_current(c)?;
                Ok(f())
            })
            .join()
            .map_err(|_| "placed thread panicked".to_string())?
        }),
    }
}

/// Restricts the calling thread to `cpu`.
pub fn pin_current(cpu: usize) -> Result<(), String> {
    acl_notify_sim::stream::pin_current_thread(cpu)
        .map_err(|e| format!("sched_setaffinity(CPU {cpu}): {e}"))
}

/// Blocks while `*word == expected`, at most `timeout` (forever if `None`). Spurious returns
/// are possible; callers re-check the word.
pub fn futex_wait(word: &AtomicU32, expected: u32, scope: Scope, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned 4-byte atomic for the duration of the call; the kernel
    // only reads it and the optional timespec, which lives on this stack frame.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | scope.flag(),
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// Wakes up to `n` waiters blocked on `word`.
pub fn futex_wake(word: &AtomicU32, n: i32, scope: Scope) {
    // SAFETY: FUTEX_WAKE only uses the address as a key; `word` is live for the call.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | scope.flag(),
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: one clock for every thread and process of the machine.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time (user + system) this process has used so far, all threads, in nanoseconds.
pub fn process_cpu_ns() -> u64 {
    // SAFETY: an all-zero `rusage` is a valid out-value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// This process's resident set size in bytes (`/proc/self/statm`).
pub fn rss_bytes() -> Result<u64, String> {
    let s = std::fs::read_to_string("/proc/self/statm").map_err(|e| format!("statm: {e}"))?;
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("statm: unexpected `{s}`"))?;
    Ok(pages * page_size())
}

/// The page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// One-minute load average and the number of runnable tasks (`/proc/loadavg`), to record the
/// conditions a run was taken under.
pub fn load() -> (f64, u32) {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = s.split_whitespace();
    let l1 = it.next().and_then(|v| v.parse().ok()).unwrap_or(-1.0);
    let running = it
        .nth(2)
        .and_then(|v| v.split('/').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (l1, running)
}

/// Makes `fd` survive `exec` (clears `FD_CLOEXEC`), so a re-executed child inherits it.
pub fn inheritable(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor we own; F_GETFD/F_SETFD touch only its flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Closes a descriptor this process owns (errors are irrelevant for the benchmarks).
pub fn close(fd: RawFd) {
    if fd >= 0 {
        // SAFETY: callers pass descriptors they own and do not use afterwards.
        unsafe { libc::close(fd) };
    }
}

/// Asks the kernel to kill this process when its parent dies, so an orphaned benchmark child
/// never spins or sleeps forever.
pub fn die_with_parent() {
    // SAFETY: PR_SET_PDEATHSIG with a valid signal number has no memory effects.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // A parent that died before that call sends nothing: end now if it is gone already.
    let parent = std::env::var(crate::child::PARENT_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok());
    if parent.is_some_and(|p| p != std::os::unix::process::parent_id()) {
        std::process::exit(1);
    }
}

/// A type that may live in a [`Shm`] mapping and be seen through `&T` by several processes.
///
/// # Safety
///
/// All-zero bytes must be a valid `T`, and every mutation of a `T` must go through interior
/// mutability that is sound between processes (atomics; `sem_t` initialised `pshared`).
pub unsafe trait ShmSafe: Sync {}

/// A `MAP_SHARED` mapping of a memfd. The creating process passes [`Shm::fd`] to children,
/// which map the same pages with [`Shm::from_fd`].
#[derive(Debug)]
pub struct Shm {
    fd: RawFd,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every use of its contents goes through atomics
// or process-shared primitives (sem_t) designed for concurrent access.
unsafe impl Send for Shm {}
// SAFETY: as above.
unsafe impl Sync for Shm {}

impl Shm {
    /// Creates a zero-filled memfd of `len` bytes, inheritable by children, and maps it.
    pub fn create(name: &str, len: usize) -> Result<Shm, String> {
        let cname = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
        // SAFETY: `cname` is a valid NUL-terminated string; flags 0 = no CLOEXEC, so children
        // inherit the descriptor (which is the point).
        let fd = unsafe { libc::memfd_create(cname.as_ptr(), 0) };
        if fd < 0 {
            return Err(format!("memfd_create: {}", io::Error::last_os_error()));
        }
        // SAFETY: `fd` is the memfd we just created.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } < 0 {
            let e = io::Error::last_os_error();
            close(fd);
            return Err(format!("ftruncate: {e}"));
        }
        Shm::map(fd, len)
    }

    /// Maps an inherited memfd of `len` bytes (in a child process).
    pub fn from_fd(fd: RawFd, len: usize) -> Result<Shm, String> {
        Shm::map(fd, len)
    }

    fn map(fd: RawFd, len: usize) -> Result<Shm, String> {
        // SAFETY: mapping `len` bytes of a descriptor sized to at least `len`; the result is
        // checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            close(fd);
            return Err(format!("mmap: {e}"));
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or("mmap returned NULL")?;
        Ok(Shm { fd, ptr, len })
    }

    /// The memfd (inheritable).
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// A shared reference to the `T` at the start of the mapping.
    pub fn get<T: ShmSafe>(&self) -> &T {
        assert!(std::mem::size_of::<T>() <= self.len, "mapping too small");
        assert!(self.ptr.as_ptr().align_offset(std::mem::align_of::<T>()) == 0);
        // SAFETY: the mapping is aligned for `T` (checked above), large enough, lives as long
        // as `self`, and was zero-filled at creation; `ShmSafe` guarantees all-zero bytes are a
        // valid `T` and that `T` is only mutated through interior mutability made for sharing.
        unsafe { &*self.ptr.as_ptr().cast::<T>() }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the range mapped in `map`; no references outlive `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        close(self.fd);
    }
}

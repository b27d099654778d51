//! Thin, checked wrappers over the Linux calls the simulator needs: futexes (shared and private), the
//! monotonic clock, OS randomness, process identity (PID + start time from `/proc`), the
//! limits on the threads a process may start,
//! with the one `pthread_atfork` child handler that keeps the last two right in a forked
//! child ([`fork_generation`]) and runs what the libraries built on the simulator add to it
//! ([`on_fork_child`]). Depends on nothing else of the crate.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64};
use std::time::Duration;

/// `FUTEX_WAIT` on a word that may live in a `MAP_SHARED` mapping (no `FUTEX_PRIVATE_FLAG`):
/// blocks while `*word == expected`, at most `timeout`. Returns on wake-up, timeout, signal or
/// value mismatch alike; callers re-check. `true` if a `FUTEX_WAKE` ended the sleep (the call
/// returned 0: the kernel also returns 0 on the rare spurious wake-up), `false` if it did not
/// sleep (value mismatch), timed out or was interrupted.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
    futex_wait_op(word, expected, timeout, libc::FUTEX_WAIT)
}

/// [`futex_wait`] with `FUTEX_PRIVATE_FLAG`: only [`futex_wake_private`] from a thread of this
/// process wakes it (the kernel keys the sleep on this process's address space, skipping the
/// lookup of the shared mapping's page).
pub fn futex_wait_private(word: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
    futex_wait_op(
        word,
        expected,
        timeout,
        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
    )
}

fn futex_wait_op(
    word: &AtomicU32,
    expected: u32,
    timeout: Option<Duration>,
    op: libc::c_int,
) -> bool {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned 4-byte atomic for the duration of the call; the
    // kernel only reads it (and compares). `ts_ptr` is null or points to a live timespec.
    // The remaining arguments are unused by FUTEX_WAIT.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    rc == 0
}

/// `FUTEX_WAKE` (shared): wakes up to `n` waiters on `word` in any process.
pub fn futex_wake(word: &AtomicU32, n: u32) -> usize {
    futex_wake_op(word, n, libc::FUTEX_WAKE)
}

/// `FUTEX_WAKE` with `FUTEX_PRIVATE_FLAG`: wakes up to `n` of this process's threads asleep
/// in [`futex_wait_private`] on `word`.
pub fn futex_wake_private(word: &AtomicU32, n: u32) -> usize {
    futex_wake_op(word, n, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG)
}

fn futex_wake_op(word: &AtomicU32, n: u32, op: libc::c_int) -> usize {
    let n = n.min(i32::MAX as u32) as i32;
    // SAFETY: `word` is a valid, aligned atomic; FUTEX_WAKE only uses its address as a key.
    let woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    usize::try_from(woken).unwrap_or(0)
}

/// `CLOCK_MONOTONIC` in nanoseconds (the same clock in every process of the machine).
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds: the same clock as [`now_ns`] at the resolution of
/// the scheduler tick (a few ms), read without touching the clock source — for time stamps
/// kept for diagnostics.
pub fn coarse_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; both clocks used here exist on every Linux this
    // runs on (COARSE since 2.6.32), so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Fills `buf` from the kernel's CSPRNG (`getrandom(2)`), retrying on `EINTR` and short reads.
pub fn fill_random(buf: &mut [u8]) -> std::io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is a valid writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

/// 16 bytes from the kernel's CSPRNG, for an export key's nonce. Drawn from a per-thread buffer
/// refilled by one `getrandom(2)` per [`NONCE_BUF`] bytes (a call costs about 400 ns here,
/// most of an export). The bytes are the kernel's, each handed out once and wiped as it goes;
/// a buffer filled before a `fork()` is dropped by the child, which would otherwise hand out
/// its parent's nonces.
pub fn nonce16() -> std::io::Result<[u8; 16]> {
    struct Buf {
        pid: i32,
        used: usize,
        bytes: [u8; NONCE_BUF],
    }
    thread_local! {
        static BUF: std::cell::RefCell<Buf> = const {
            std::cell::RefCell::new(Buf { pid: 0, used: NONCE_BUF, bytes: [0; NONCE_BUF] })
        };
    }
    let take = |b: &mut Buf| -> std::io::Result<[u8; 16]> {
        let me = getpid();
        if b.pid != me || b.used + 16 > NONCE_BUF {
            fill_random(&mut b.bytes)?;
            b.pid = me;
            b.used = 0;
        }
        let mut out = [0u8; 16];
        let part = &mut b.bytes[b.used..b.used + 16];
        out.copy_from_slice(part);
        part.fill(0);
        b.used += 16;
        Ok(out)
    };
    match BUF.try_with(|b| b.try_borrow_mut().map(|mut b| take(&mut b))) {
        Ok(Ok(r)) => r,
        // Thread teardown (or re-entry): no buffer, straight from the kernel.
        _ => {
            let mut out = [0u8; 16];
            fill_random(&mut out)?;
            Ok(out)
        }
    }
}

/// Bytes of randomness a thread buffers for [`nonce16`] (32 nonces).
const NONCE_BUF: usize = 512;

/// This process's id, cached: `getpid` is a real system call (glibc stopped caching it), about
/// 190 ns on the VMs this runs on, and destroying a notify asks for it to tell its own process
/// from a forked child. A child made by `fork()` clears the cache in the simulator's
/// `pthread_atfork` handler ([`fork_hook`]) before any of its code runs, so it reads its own
/// id. (A child made by a raw `clone` system call skips the handlers; nothing here does that,
/// and `vfork`/`posix_spawn` children exec.)
pub fn getpid() -> i32 {
    let pid = PID.load(Relaxed);
    if pid != 0 {
        return pid;
    }
    getpid_slow()
}

/// The cached id (0: not known yet, or cleared in a forked child).
static PID: AtomicI32 = AtomicI32::new(0);

#[cold]
fn getpid_slow() -> i32 {
    let pid = std::process::id() as i32;
    // Cached only with the fork handler in place (it fails only with ENOMEM): without it a
    // forked child would read its parent's id.
    if fork_hook() {
        PID.store(pid, Relaxed);
    }
    pid
}

/// How many `fork()`s lie between this process and the first process of its line that used
/// the simulator: 0 there, one more in each forked child (the child handler bumps it before
/// the child's own code runs). Process-wide state made by another generation was made by
/// another process — the parent's, inherited with its memory — and is not this one's to use
/// ([`crate::fork::PerProcess`], [`crate::sigbus`]).
#[inline]
pub fn fork_generation() -> u64 {
    FORK_GENERATION.load(Acquire)
}

static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);

/// Whether [`in_forked_child`] is registered with `pthread_atfork` in this process.
static HOOKED: AtomicBool = AtomicBool::new(false);

/// Registers the child handler, once per process; whether it is in place. Without it a
/// forked child would read its parent's pid and [`fork_generation`].
///
/// Not a `Once`: a child forked while another thread ran the `Once` would wait for it for
/// ever. Threads that race here on first use may each register the handler; what it does
/// twice in a child (a second bump of the generation) is as good as once. (glibc registers
/// and forks under one lock: a child has the handler registered, and runs it, or not at all.)
pub(crate) fn fork_hook() -> bool {
    if HOOKED.load(Acquire) {
        return true;
    }
    register_fork_hook()
}

#[cold]
fn register_fork_hook() -> bool {
    // SAFETY: registers a child handler that only stores to atomics (nothing that could wait
    // for a thread the child does not have). Fails only with ENOMEM.
    let ok = unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) } == 0;
    if ok {
        HOOKED.store(true, Release);
    }
    ok
}

/// What the child handler runs after its own work, in the order added ([`on_fork_child`]):
/// filled from the front, never emptied (null: free, and so are the slots after it).
static CHILD_HOOKS: [AtomicPtr<()>; 4] = [const { AtomicPtr::new(std::ptr::null_mut()) }; 4];

/// Has the child handler also run `hook` in every child forked from now on, after its own
/// work: for a library built on the simulator that keeps process-wide state of its own (the C
/// library's session), so that a process has one fork handler. Adding a hook again changes
/// nothing. `false` if the handler cannot be registered (ENOMEM) or [`CHILD_HOOKS`] is full.
///
/// `hook` runs where the handler does (in the child, before `fork()` returns there, maybe
/// after a fork from a signal handler, or while threads of the parent held any lock): it must
/// only store to atomics.
pub(crate) fn on_fork_child(hook: fn()) -> bool {
    if !fork_hook() {
        return false;
    }
    let p = hook as *mut ();
    // Every caller tries the slots from the front: a hook two threads add at once is taken
    // once, by the first free slot.
    for slot in &CHILD_HOOKS {
        match slot.compare_exchange(std::ptr::null_mut(), p, AcqRel, Acquire) {
            Ok(_) => return true,
            Err(q) if q == p => return true,
            Err(_) => {}
        }
    }
    false
}

/// The child handler: run by the forking thread, in the child, before `fork()` returns there
/// (no other thread exists yet). Stores to atomics only, and runs the hooks added with
/// [`on_fork_child`], which do the same. This is the only fork handler of the process:
/// everything else of the simulator that a child must not inherit compares
/// [`fork_generation`].
extern "C" fn in_forked_child() {
    HOOKED.store(true, Release);
    PID.store(0, Relaxed);
    FORK_GENERATION.fetch_add(1, Release);
    for slot in &CHILD_HOOKS {
        let p = slot.load(Acquire);
        if p.is_null() {
            break;
        }
        // SAFETY: a slot that is not null holds a `fn()`, stored by `on_fork_child`.
        let hook = unsafe { std::mem::transmute::<*mut (), fn()>(p) };
        hook();
    }
}

/// For tests: what a fork does to this process's state, without forking (run in a forked
/// child, so that the test binary's own state is untouched).
#[cfg(test)]
pub(crate) fn as_if_forked() {
    in_forked_child();
}

/// This process's PID namespace: the inode of `/proc/self/ns/pid` (0 if it cannot be read).
/// Pids, and so liveness checks by pid, mean something only within one PID namespace.
pub fn pid_namespace() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
}

/// What limits the threads this process may start, for a message when one could not be
/// started: "this process runs N threads; RLIMIT_NPROC (threads of its user) S,
/// kernel.threads-max T, kernel.pid_max P" (a part that cannot be read is left out).
pub fn thread_limits() -> String {
    let threads = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .map(|v| v.trim().to_owned())
        });
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit for getrlimit(2) to fill.
    let nproc = (unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut lim) } == 0).then(|| {
        if lim.rlim_cur == libc::RLIM_INFINITY {
            "unlimited".to_owned()
        } else {
            lim.rlim_cur.to_string()
        }
    });
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()
            .map(|v| v.trim().to_owned())
    };
    let mut parts = Vec::new();
    if let Some(t) = threads {
        parts.push(format!("this process runs {t} threads"));
    }
    let mut limits = Vec::new();
    if let Some(n) = nproc {
        limits.push(format!("RLIMIT_NPROC (threads of its user) {n}"));
    }
    for name in ["threads-max", "pid_max"] {
        if let Some(v) = sysctl(name) {
            limits.push(format!("kernel.{name} {v}"));
        }
    }
    if !limits.is_empty() {
        parts.push(format!("limits: {}", limits.join(", ")));
    }
    parts.join("; ")
}

/// The effective user id.
pub fn geteuid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The start time of process `pid` (field 22 of `/proc/<pid>/stat`, clock ticks since boot),
/// or `None` if it does not exist, is a zombie, or the file cannot be parsed.
pub fn proc_start_time(pid: i32) -> Option<u64> {
    if pid <= 0 {
        return None;
    }
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_start_time(&text)
}

/// Parses the start time out of a `/proc/<pid>/stat` line; `None` for zombies (state `Z` or
/// `X`), which count as dead.
fn parse_stat_start_time(text: &str) -> Option<u64> {
    // `comm` (field 2) is in parentheses and may contain spaces and ')'; the fields after the
    // last ')' are space separated, starting with field 3 (state).
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    // Field 22 is the 20th after field 3.
    fields.nth(18)?.parse().ok()
}

/// Whether process `pid` is alive and, if `start_time` is non-zero, is the same process that
/// started then (not a recycled PID).
pub fn pid_alive(pid: i32, start_time: u64) -> bool {
    match proc_start_time(pid) {
        None => false,
        Some(s) => start_time == 0 || s == start_time,
    }
}

/// Tag of a process identity that is a pidfs inode number (see [`process_identity`]), so that
/// the identity is never 0 (none).
pub const IDENTITY_PIDFS: u64 = 1 << 63;

/// `PID_FS_MAGIC` (linux/magic.h): the file system of pidfds since Linux 6.9.
const PID_FS_MAGIC: i64 = 0x5049_4446;

/// What a whitelist entry records for a process of this machine (the words of
/// `acl_notify_core::whitelist::WhitelistEntry`), and what an importer presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// The start time in clock ticks ([`proc_start_time`]): a PID recycled within the same
    /// tick (10 ms at the usual 100 Hz) has the same one.
    pub start_time: u64,
    /// Where pidfds live on pidfs (Linux 6.9 and later) and this process may open them, the
    /// inode number of a pidfd of the process tagged with [`IDENTITY_PIDFS`]: the kernel
    /// numbers each process's `struct pid` from a 64-bit counter it never reuses while the
    /// machine runs, so a later process given the same PID has another number, however soon
    /// it comes. 0 elsewhere: on older kernels, and in a process that cannot open pidfds
    /// (under valgrind, whose memcheck does not know `pidfd_open`, or a seccomp filter).
    pub pidfs: u64,
}

/// The identity of process `pid` of this machine (see [`ProcessIdentity`]), or `None` if no
/// such process is running, a zombie included (a whitelist entry then matches nobody).
/// Every process records both kinds it can take, so that processes of either ability share
/// notifies: the whitelist compares the strongest kind both sides know.
pub fn process_identity(pid: i32) -> Option<ProcessIdentity> {
    if pid <= 0 {
        return None;
    }
    let pidfs = match pidfs_inode(pid) {
        Ok(ino) => ino.map_or(0, |ino| IDENTITY_PIDFS | ino),
        Err(()) => return None,
    };
    // A zombie keeps its pidfs inode until it is reaped, but it has exited: it is not running
    // (its `/proc` state is Z or X, for which `proc_start_time` answers `None`).
    let start_time = proc_start_time(pid)?;
    Some(ProcessIdentity { start_time, pidfs })
}

/// The pidfs inode number of `pid`: `Ok(None)` if pidfds are not on pidfs here, this process
/// cannot open them, or `pid` is not a thread-group leader; `Err` if there is no such
/// process. A zombie still has its number: it keeps its `struct pid` until it is reaped, and
/// a later process never gets it.
fn pidfs_inode(pid: i32) -> Result<Option<u64>, ()> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ESRCH) => Err(()),
            _ => Ok(None),
        };
    }
    let fd = fd as libc::c_int;
    // SAFETY: all-zero bytes are valid for these plain C structs; fstatfs and fstat fill them
    // from the descriptor we own, which is closed right after.
    let (fs, st, ok) = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        let mut st: libc::stat = std::mem::zeroed();
        let ok = libc::fstatfs(fd, &mut fs) == 0 && libc::fstat(fd, &mut st) == 0;
        libc::close(fd);
        (fs, st, ok)
    };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between architectures
    let pidfs = ok && fs.f_type as i64 == PID_FS_MAGIC;
    Ok(pidfs.then_some(st.st_ino & !IDENTITY_PIDFS))
}

/// A whitelist entry's identity in words, for messages: `pidfs inode N, started at tick M`,
/// `started at tick M`, `identity unknown`, `not running`.
pub fn describe_identity(start_time: u64, identity: u64) -> String {
    let start = match start_time {
        0 => None,
        t if t == acl_notify_core::whitelist::NOT_RUNNING => return "not running".to_string(),
        t => Some(format!("started at tick {t}")),
    };
    let strong = (identity != 0).then(|| match identity {
        i if i & IDENTITY_PIDFS != 0 => format!("pidfs inode {}", i & !IDENTITY_PIDFS),
        i => format!("identity {i}"),
    });
    match (strong, start) {
        (Some(i), Some(s)) => format!("{i}, {s}"),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => "identity unknown".to_string(),
    }
}

/// Whether the process a whitelist entry recorded as `start_time` and `identity` (see
/// [`ProcessIdentity`]; both 0: any process with that PID) is still running under `pid`: the
/// entry's own rule (`WhitelistEntry::matches`) applied to what this process can take of it
/// now — the pidfs number where both have one, else the start time.
pub fn identity_alive(pid: i32, start_time: u64, identity: u64) -> bool {
    let Some(now) = process_identity(pid) else {
        return false;
    };
    acl_notify_core::whitelist::WhitelistEntry::with_identity(0, pid, start_time, identity).matches(
        0,
        pid,
        now.start_time,
        now.pidfs,
    )
}

/// Whether some process maps the file of device `dev` and inode `ino`, read from the
/// `/proc/<pid>/maps` of this user's processes (the only ones that can open a file of mode
/// 0600). A process whose maps this user may not read (a non-dumpable one, or a container's
/// init) is taken not to map it: the simulator's processes are ordinary, dumpable ones.
/// `None` if `/proc` cannot be listed.
pub fn file_mapped(dev: u64, ino: u64) -> Option<bool> {
    use std::os::unix::fs::MetadataExt as _;
    let want_dev = format!("{:02x}:{:02x}", libc::major(dev), libc::minor(dev));
    let want_ino = ino.to_string();
    let me = geteuid();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        match e.metadata() {
            Ok(m) if m.uid() == me => {}
            // Another user's process, or one that has exited meanwhile.
            _ => continue,
        }
        // Exited between the listing and the read, or not readable (see above).
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        let hit = maps.lines().any(|l| {
            let mut f = l.split_ascii_whitespace().skip(3);
            f.next() == Some(want_dev.as_str()) && f.next() == Some(want_ino.as_str())
        });
        if hit {
            return Some(true);
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests;

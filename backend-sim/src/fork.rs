//! What a child forked from a process that uses the simulator starts with.
//!
//! `fork()` copies the calling thread only. Whatever the parent's other threads held at that
//! moment (a lock, a `Once` they were running) stays held in the child for ever, and the
//! data under it may be half-updated. The simulator's process-wide state is built so that a
//! child never needs any of it:
//!
//! - every process-wide lock is a [`PerProcess`], which remembers the fork generation
//!   ([`sys::fork_generation`]) that made it: a child (one generation on) finds the parent's
//!   and makes a fresh one on its first use. The parent's lock, and whatever it guards, is
//!   left as it is in the child's memory, unused and never freed (but reachable from the
//!   child's, so that a leak checker does not blame the child for it). So a module that keeps
//!   process-wide state (a file kind's registry of mappings, say) declares a `PerProcess`
//!   and nothing else: no fork handler names it;
//! - nothing lazily initialised blocks: no `Once` or `OnceLock` that a child could find
//!   half-run. Lazy values are raced for instead (`shm`'s hasher key, `sigbus`'s handler, the
//!   CPU feature probe);
//! - the cached pid is cleared, so the child reads its own.
//!
//! The one `pthread_atfork` child handler lives in [`sys`] (it clears the pid cache and bumps
//! the generation). A library built on the simulator whose process-wide state a child must
//! forget too adds to that handler ([`also_in_child`]: the C library's session) rather than
//! registering one of its own. There is no `prepare` handler: the parent never waits for a
//! lock at a fork, so a fork from any thread (a host function on a stream's worker, a thread
//! inside a call) cannot deadlock here, and a fork costs the parent nothing.
//!
//! A host function that forks and returns in the child (`aclrtLaunchHostFunc`'s callback:
//! the child is a copy of the stream's worker, with nothing of its own to return to) ends the
//! child there ([`child_returned_from_a_host_function`]: `stdout` flushed if it can be, then
//! `_exit(0)`, running none of the parent program's exit handlers): the
//! tasks queued after the host function are the parent's, its copy of the queue holds them,
//! and their records and waits act on notifies the parent shares. Run in the child too, a
//! record landed twice (merged on the set flag), a wait would take a record meant for the
//! parent's stream, and then the child's worker waited for ever for the parent's next tasks.
//!
//! What a child can do: open a new [`Sim`](crate::Sim) (also while other threads of the parent
//! were inside the simulator at the fork) and use it like any process. What it cannot do: use
//! anything it inherited — a `Sim`, its streams, handles and notify references are the
//! parent's, their worker threads are not in the child, and their own locks may be held by
//! threads that are gone. Not even drop them: `std::mem::forget` an inherited `Sim` (or leave
//! it alone and exit).

use std::sync::atomic::AtomicPtr;
use std::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::{Mutex, MutexGuard, PoisonError, TryLockError};

use acl_notify_core::Error;

use crate::error::SimError;
use crate::sys;

/// The fork handler (`sys::fork_hook`) is in place, or 207001 saying that a forked child
/// could not be made safe. A process that uses a [`PerProcess`] lock must have it.
pub fn required() -> Result<(), SimError> {
    if sys::fork_hook() {
        return Ok(());
    }
    Err(SimError::new(
        Error::MemoryAllocation,
        "pthread_atfork failed (out of memory): without its fork handler a child forked from \
         this process could hang in the simulator",
    ))
}

/// Has the one child handler (`sys`'s) also run `hook` in every child forked from now on, after
/// the simulator's own work; or 207001 saying that a forked child could not be made safe.
/// Adding a hook again changes nothing. `hook` must only store to atomics (it runs in the
/// child before `fork()` returns there, while any lock may be held for ever by a thread the
/// child does not have, and maybe after a fork from a signal handler).
pub fn also_in_child(hook: fn()) -> Result<(), SimError> {
    if sys::on_fork_child(hook) {
        return Ok(());
    }
    Err(SimError::new(
        Error::MemoryAllocation,
        "pthread_atfork failed (out of memory), or the fork handler has no room for another \
         hook: without it a child forked from this process could hang",
    ))
}

/// A host function forked and returned in the child (see the module documentation): the
/// child flushes C's `stdout` if its lock is free, then ends with `_exit(0)`.
///
/// Not `exit`: the `atexit` handlers, C++ static destructors and `fini` functions it would run
/// are the parent program's, written for that program's own end. They may join threads or
/// wait for locks that do not exist, or are held for ever, in the child (a copy of one thread
/// of the parent), and they may act on shared state (files, sockets, a simulator namespace) as
/// if the parent had ended; the child has ended nothing of the parent's. A host function that
/// wants them to run calls `exit` itself (as `tests/c/fork_busy.c`'s child does).
///
/// `stdout` is flushed, so that what the host function printed in the child is not lost when
/// stdout is a pipe or a file (fully buffered) — but only if its lock can be taken at once: a
/// C library may leave a lock that another thread of the parent held at the fork held for ever
/// in the child (glibc resets the stream locks at a fork; musl does not), and a flush waiting
/// for it would hang the child. Like `exit`'s flush, it writes again what the parent had
/// buffered and not written at the fork (a C program flushes before it forks). `stderr` is
/// unbuffered. Other `FILE`s are not flushed (there is no way to try their locks all), nor is
/// Rust's `stdout` (line-buffered, so only a line not yet ended is lost; its lock has no
/// try-lock one could call here).
#[cold]
#[inline(never)]
pub(crate) fn child_returned_from_a_host_function() -> ! {
    // SAFETY: `stdout` is the C library's stream, valid for the whole process; the lock is
    // taken without waiting and released after the flush, on this thread.
    unsafe {
        let out = stdio::stdout;
        if !out.is_null() && stdio::ftrylockfile(out) == 0 {
            stdio::fflush(out);
            stdio::funlockfile(out);
        }
    }
    // SAFETY: ends the process at once; nothing of the parent's program runs after it (see
    // above).
    unsafe { libc::_exit(0) }
}

/// The C library's `stdout` and its lock calls (POSIX; not in the `libc` crate for Linux).
mod stdio {
    unsafe extern "C" {
        pub(super) static stdout: *mut libc::FILE;
        pub(super) fn ftrylockfile(f: *mut libc::FILE) -> libc::c_int;
        pub(super) fn funlockfile(f: *mut libc::FILE);
        #[cfg(test)]
        pub(super) fn flockfile(f: *mut libc::FILE);
        pub(super) fn fflush(f: *mut libc::FILE) -> libc::c_int;
    }
}

/// A process-wide `Mutex<T>`, made on first use, of which a forked child gets a fresh one (see
/// the module documentation). For statics: the locks it makes are never freed.
///
/// Costs two atomic loads and a compare more than a `static Mutex<T>` on each
/// [`get`](Self::get).
pub struct PerProcess<T> {
    /// The lock of the latest process that used it: null before the first use, else a leaked
    /// `Box`. In a forked child, until its first use, the parent's.
    current: AtomicPtr<Made<T>>,
    new: fn() -> T,
    /// How a child's lock takes its value from the parent's, when that one was free at the
    /// fork ([`inheriting`](Self::inheriting)); `None`: a child starts from `new()`.
    inherit: Option<fn(&T) -> T>,
}

impl<T> std::fmt::Debug for PerProcess<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The lock may be another process's (a forked child's inherited one): not looked at.
        f.debug_struct("PerProcess").finish_non_exhaustive()
    }
}

/// A lock and the fork generation of the process that made it.
struct Made<T> {
    generation: u64,
    lock: Mutex<T>,
    /// The lock this one replaced (an ancestor process's; null for none): never used nor
    /// freed, but kept reachable, so that a leak checker in a forked child (valgrind's
    /// memcheck) does not count the parent's state as lost by the child.
    _parent: *mut Made<T>,
}

impl<T: Send> PerProcess<T> {
    /// A lock made on first use with `new()` inside.
    pub const fn new(new: fn() -> T) -> Self {
        PerProcess {
            current: AtomicPtr::new(std::ptr::null_mut()),
            new,
            inherit: None,
        }
    }

    /// A lock made on first use with `new()` inside, of which a forked child's takes
    /// `inherit(parent's value)` when the parent's lock was free at the fork (its value whole:
    /// it is changed only under the lock), else `new()` (a thread of the parent held it, so
    /// its value may be half-changed).
    pub const fn inheriting(new: fn() -> T, inherit: fn(&T) -> T) -> Self {
        PerProcess {
            current: AtomicPtr::new(std::ptr::null_mut()),
            new,
            inherit: Some(inherit),
        }
    }

    /// This process's lock, unlocked. [`lock`](Self::lock) is what users call; this one
    /// assumes [`required`] was called once, so that a child forked while the lock is held
    /// gets its own.
    #[inline]
    pub fn get(&self) -> &Mutex<T> {
        let p = self.current.load(Acquire);
        // SAFETY: a non-null `current` is a pointer from `Box::into_raw` published by `make`,
        // never freed.
        if let Some(m) = unsafe { p.as_ref() }
            && m.generation == sys::fork_generation()
        {
            return &m.lock;
        }
        self.make(p)
    }

    /// This process's lock, locked: the fork handler checked to be in place first ([`required`]:
    /// 207001 without it), a poisoned lock used as it is (each user changes its value in one
    /// step). What every user of a `PerProcess` lock calls, rather than [`get`](Self::get).
    pub fn lock(&self) -> Result<MutexGuard<'_, T>, SimError> {
        required()?;
        Ok(self.get().lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Makes and publishes this process's lock, `seen` being what `current` held (null, or
    /// another generation's lock); a thread of this process that publishes one first wins.
    #[cold]
    fn make(&self, mut seen: *mut Made<T>) -> &Mutex<T> {
        let generation = sys::fork_generation();
        // SAFETY: as in `get`: a published pointer is never freed.
        let value = match (self.inherit, unsafe { seen.as_ref() }) {
            // The parent's lock (no thread of this process uses it): free at the fork, its
            // value is whole; held, it never will be free here.
            (Some(inherit), Some(parent)) => match parent.lock.try_lock() {
                Ok(v) => inherit(&v),
                Err(TryLockError::Poisoned(p)) => inherit(&p.into_inner()),
                Err(TryLockError::WouldBlock) => (self.new)(),
            },
            _ => (self.new)(),
        };
        let fresh = Box::into_raw(Box::new(Made {
            generation,
            lock: Mutex::new(value),
            _parent: seen,
        }));
        loop {
            // SAFETY: `fresh` is not published yet: this thread's alone.
            unsafe { (*fresh)._parent = seen };
            match self.current.compare_exchange(seen, fresh, AcqRel, Acquire) {
                // SAFETY: just published; never freed from now on. (The lock it replaced, if
                // any, was another process's: left as it is, never freed.)
                Ok(_) => return unsafe { &(*fresh).lock },
                Err(won) => {
                    // SAFETY: as in `get`: a published pointer is never freed.
                    match unsafe { won.as_ref() } {
                        Some(m) if m.generation == generation => {
                            // SAFETY: `fresh` lost the race, so no one else has seen it: ours
                            // to free.
                            unsafe { drop(Box::from_raw(fresh)) };
                            return &m.lock;
                        }
                        _ => seen = won,
                    }
                }
            }
        }
    }
}

/// Set in a child [`run_in_child`] forked (its own copy of this static), never in the test
/// process itself.
#[cfg(test)]
static IN_FORKED_CHILD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// For tests: runs `body` in a child forked from this process and waits for it. `Err` holds
/// the wait status unless the child ran `body` to the end and it returned `true`. The child
/// `_exit`s, running none of the parent's destructors; `body` must not need a lock another
/// thread of the test process may hold (atomics and system calls are fine). A panic of `body`
/// fails the child like a `false` (it is caught: unwound into the test harness's copy in the
/// child, it would go on running other tests there), and a panic of any of the child's threads
/// is printed to its stderr (the harness's capture of the forking thread's output is never
/// shown from the child).
///
/// The panic hook that prints it is installed once, in the test process, before its first
/// fork: a child that set a hook itself would take std's hook lock for writing, and a copy of
/// that lock taken by another test's panicking thread at the fork is never released in the
/// child (user25 saw a `--lib` run hang so, the child in `set_hook`). The hook writes with one
/// `write(2)`, not through stderr's lock, for the same reason.
#[cfg(test)]
pub(crate) fn run_in_child(body: impl FnOnce() -> bool) -> Result<(), i32> {
    wait_child(fork_child(body))
}

/// For tests: [`run_in_child`]'s fork, without the wait: the child's pid, for a test that
/// signals it while it runs (SIGSTOP, SIGCONT) before [`wait_child`]. Every rule of
/// [`run_in_child`] holds for `body`.
#[cfg(test)]
pub(crate) fn fork_child(body: impl FnOnce() -> bool) -> libc::pid_t {
    use std::sync::atomic::{AtomicU8, Ordering};
    // 0: no hook yet, 1: a thread installs it, 2: installed (an atomic, not a `Once`: see
    // `no_static_is_a_lock_a_forked_child_could_find_held`). No fork before 2.
    static HOOK: AtomicU8 = AtomicU8::new(0);
    if HOOK
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_FORKED_CHILD.load(Ordering::Relaxed) {
                return before(info);
            }
            let line = format!("in a test's forked child: {info}\n");
            // SAFETY: writes the bytes of a live String to this process's stderr.
            let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
        }));
        HOOK.store(2, Ordering::Release);
    }
    while HOOK.load(Ordering::Acquire) != 2 {
        std::thread::yield_now();
    }
    // SAFETY: the child only runs `body` (see above) and `_exit`s.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        IN_FORKED_CHILD.store(true, Ordering::Relaxed);
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or(false);
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    child
}

/// For tests: waits for child `child` of [`fork_child`]: `Err` holds the wait status unless
/// it ran its body to the end and the body returned `true`.
#[cfg(test)]
pub(crate) fn wait_child(child: libc::pid_t) -> Result<(), i32> {
    let mut status = 0;
    // SAFETY: waits for a child of this process (`fork_child`'s), not yet reaped.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use acl_notify_core::{
        CreateFlags, HostCall, HostOps, NotifyResources, Soc, StreamOps, SyncWait, Timeout,
    };

    /// How often [`counts`] ran in this process.
    static HOOK_RAN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    fn counts() {
        HOOK_RAN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// A hook added to the one child handler runs in a forked child, once however often it
    /// was added, and never in the parent.
    #[test]
    fn a_hook_added_to_the_child_handler_runs_once_in_a_forked_child() {
        also_in_child(counts).unwrap();
        also_in_child(counts).unwrap();
        let child = run_in_child(|| HOOK_RAN.load(std::sync::atomic::Ordering::SeqCst) == 1);
        if let Err(status) = child {
            panic!("the child did not run the hook once (status {status:#x})");
        }
        assert_eq!(HOOK_RAN.load(std::sync::atomic::Ordering::SeqCst), 0);
    }

    /// The registries' locks held by another thread at the fork: the child gets fresh, free
    /// ones (the parent's would never be released there), and the parent keeps its own.
    #[test]
    fn a_child_forked_while_another_thread_holds_the_registries_gets_fresh_ones() {
        required().unwrap();
        let parents = crate::shm::REGISTRY.get() as *const _;
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            let shm = crate::shm::REGISTRY.get().lock().unwrap();
            let cnt = crate::cnt::REGISTRY.get().lock().unwrap();
            let graphs = crate::waitgraph::OPEN.get().lock().unwrap();
            held_tx.send(()).unwrap();
            let _ = done_rx.recv();
            drop((shm, cnt, graphs));
        });
        held_rx.recv().unwrap();
        let child = run_in_child(|| {
            crate::shm::REGISTRY.get().try_lock().is_ok()
                && crate::cnt::REGISTRY.get().try_lock().is_ok()
                && crate::waitgraph::OPEN.get().try_lock().is_ok()
        });
        done_tx.send(()).unwrap();
        holder.join().unwrap();
        if let Err(status) = child {
            panic!("the child found a registry locked (status {status:#x})");
        }
        // Not a `try_lock`: other tests of this binary may hold it now.
        assert!(
            std::ptr::eq(crate::shm::REGISTRY.get(), parents),
            "the parent's registry lock was replaced by the fork"
        );
    }

    /// The module documentation's rule, checked on the source of this crate and of the C ABI
    /// library built on it (`capi`): no `static` is a plain lock or a blocking lazy cell
    /// (`Mutex`, `RwLock`, `Condvar`, `Once`, `OnceLock`, `LazyLock`) — a child forked while a
    /// thread of the parent held one would hang on it. A plain `static Mutex` in the wait-for
    /// graph did exactly that (`fork_busy cycle`), and the C library's init callbacks, data
    /// buffers and allocator descriptors did the same until 2026-12-06.
    #[test]
    fn no_static_is_a_lock_a_forked_child_could_find_held() {
        let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut dirs = vec![here.join("src"), here.join("capi/src")];
        let mut bad = Vec::new();
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    dirs.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "rs") || p.ends_with("tests.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
                for (n, line) in code.lines().enumerate() {
                    let l = line.trim_start();
                    let l = l
                        .strip_prefix("pub(crate) ")
                        .or(l.strip_prefix("pub "))
                        .unwrap_or(l);
                    let Some(rest) = l.strip_prefix("static ") else {
                        continue;
                    };
                    let Some((_, ty)) = rest.split_once(':') else {
                        continue;
                    };
                    let ty = ty.trim_start().trim_start_matches("std::sync::");
                    if [
                        "Mutex<",
                        "RwLock<",
                        "Condvar",
                        "Once ",
                        "Once=",
                        "Once;",
                        "OnceLock<",
                        "LazyLock<",
                    ]
                    .iter()
                    .any(|t| ty.starts_with(t))
                    {
                        bad.push(format!("{}:{}: {}", p.display(), n + 1, line.trim()));
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "statics a forked child could find held (use fork::PerProcess):\n{}",
            bad.join("\n")
        );
    }

    /// A `Sim` of one device on a fresh namespace of its own.
    fn open(tag: &str) -> (crate::Sim, crate::NamespaceGuard) {
        crate::NamespaceGuard::open_sim(
            format!("unit-fork-{tag}-{}", std::process::id()),
            Soc::Ascend910B,
            1,
        )
        .expect("opening a test Sim")
    }

    /// The child of [`a_child_forked_from_a_worker_that_exits_leaves_the_parent_alone`]: a
    /// `Sim` of its own on namespace `ns`, a record and a wait there, the `Sim` dropped.
    fn child_uses_a_sim_of_its_own(ns: &str) -> bool {
        let Ok(sim) = crate::Sim::builder()
            .soc(Soc::Ascend910B)
            .devices(1)
            .namespace(ns)
            .open()
        else {
            return false;
        };
        let (Ok(n), Ok(s)) = (
            sim.create_notify(0, CreateFlags::empty()),
            sim.create_stream(0),
        ) else {
            return false;
        };
        sim.record(n, s).is_ok()
            && sim.wait_and_reset(n, s, Timeout::Forever).is_ok()
            && sim
                .synchronize(s, SyncWait::AtMost(std::time::Duration::from_secs(10)))
                .is_ok()
    }

    /// The wait status of the child [`forks`] made (-1: none yet).
    static CHILD_STATUS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

    /// A host function that forks: the child uses a `Sim` of its own on the namespace `arg`
    /// names (a `String`) and ends with `exit` (not `_exit`: the `atexit` handlers the parent
    /// registered and this thread's thread-local destructors run, as in a C program's child);
    /// the parent's worker waits for it (at most 20 s) and keeps its status.
    unsafe extern "C" fn forks(arg: *mut std::ffi::c_void) {
        // SAFETY: the test passes a `String` that outlives the stream's run of this call.
        let ns = unsafe { &*arg.cast::<String>() };
        // SAFETY: the child runs only the code below and ends in `exit`.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let ok = child_uses_a_sim_of_its_own(ns);
            // SAFETY: ends the child normally (see above).
            unsafe { libc::exit(if ok { 0 } else { 1 }) };
        }
        CHILD_STATUS.store(wait_at_most(child, 20), std::sync::atomic::Ordering::SeqCst);
    }

    /// A child forked from a stream's worker thread (a host function that forks, on a stream
    /// whose worker has slept in a wait, so that the thread holds its busy-count marker and
    /// its wait-for-graph entry: `Arc`s of the parent's file and stream) that uses a `Sim` of
    /// its own and ends normally drops what the thread held, and runs the parent's exit
    /// handlers: none of it may touch the parent's state. After it, the parent is still
    /// registered, its streams are still in the wait-for graph as its own, the child left no
    /// process-table entry, and the parent's streams and notify still work.
    #[test]
    fn a_child_forked_from_a_worker_that_exits_leaves_the_parent_alone() {
        let (sim, ns) = open("exit");
        let long = SyncWait::AtMost(std::time::Duration::from_secs(30));
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(0).unwrap();
        let r = sim.create_stream(0).unwrap();
        // `s`'s worker sleeps in a wait (counted busy, bound to its graph entry), is released.
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        sim.record(n, r).unwrap();
        sim.synchronize(s, long).unwrap();
        let name = Box::new(ns.0.clone());
        // SAFETY: `forks` reads the `String`, which lives until after the synchronize below.
        let call = unsafe { HostCall::new(forks, std::ptr::from_ref(&*name).cast_mut().cast()) };
        sim.launch_host_func(s, call).unwrap();
        sim.synchronize(s, long).unwrap();
        drop(name);
        let status = CHILD_STATUS.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child failed (status {status:#x})"
        );
        let me = std::process::id() as i32;
        let snap = crate::inspect::snapshot(&ns.0, 0).unwrap();
        let mine: Vec<_> = snap.processes.iter().filter(|p| p.pid == me).collect();
        assert!(
            mine.len() == 1 && mine[0].state == "registered",
            "the parent's registration: {:?}",
            snap.processes
        );
        assert!(
            snap.processes.iter().all(|p| p.pid == me),
            "the child left an entry: {:?}",
            snap.processes
        );
        for st in [s, r] {
            assert!(
                snap.streams.iter().any(|v| v.handle == st.0 && v.pid == me),
                "stream {st:?} is no longer the parent's in the graph: {:?}",
                snap.streams
            );
        }
        sim.wait_and_reset(n, s, Timeout::Forever).unwrap();
        sim.record(n, r).unwrap();
        sim.synchronize(s, long).unwrap();
    }

    /// The wait status of the child [`forks_and_returns`] made (-1: none yet).
    static RETURNED_STATUS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

    /// A host function that forks, the child returning from it at once; the parent's worker
    /// waits for the child (at most 5 s, then kills it) and keeps its status.
    unsafe extern "C" fn forks_and_returns(_: *mut std::ffi::c_void) {
        // SAFETY: the child returns from this host function (what the test is about).
        let child = unsafe { libc::fork() };
        if child == 0 {
            return;
        }
        RETURNED_STATUS.store(wait_at_most(child, 5), std::sync::atomic::Ordering::SeqCst);
    }

    /// Waits for child `child` at most `seconds`, then kills it; its wait status (-2 if
    /// there was no child).
    fn wait_at_most(child: libc::pid_t, seconds: u64) -> i32 {
        if child < 0 {
            return -2;
        }
        let end = std::time::Instant::now() + std::time::Duration::from_secs(seconds);
        let mut status = 0;
        // SAFETY: polls the caller's child.
        while unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == 0 {
            if std::time::Instant::now() > end {
                // SAFETY: the caller's child, hung: killed, then reaped.
                unsafe {
                    libc::kill(child, libc::SIGKILL);
                    libc::waitpid(child, &mut status, 0);
                }
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        status
    }

    /// A child forked inside a host function that returns from it is back in its copy of the
    /// stream's worker, with the parent's queued tasks in its copy of the queue: it ends there
    /// (as if its `main` had returned) and runs none of them. It ran them: the record queued
    /// after the host function was recorded by the child and again by the parent (merged on
    /// the set flag), and then the child waited for ever for more of the parent's tasks.
    #[test]
    fn a_child_that_returns_from_a_host_function_runs_none_of_the_parents_tasks() {
        let (sim, _ns) = open("return");
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(0).unwrap();
        // SAFETY: `forks_and_returns` ignores its argument.
        let call = unsafe { HostCall::new(forks_and_returns, std::ptr::null_mut()) };
        sim.launch_host_func(s, call).unwrap();
        sim.record(n, s).unwrap();
        sim.synchronize(s, SyncWait::AtMost(std::time::Duration::from_secs(30)))
            .unwrap();
        let status = RETURNED_STATUS.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child did not end when it returned from the host function (status {status:#x})"
        );
        assert_eq!(
            sim.merged_records(n).unwrap().total,
            0,
            "the record after the host function ran twice"
        );
        assert!(sim.host_wait(n, std::time::Duration::from_secs(5)).is_ok());
    }

    /// Set only in the child of [`forks_prints_and_returns`] (in its copy of memory):
    /// [`exit_handler`] ends that child with status 3 if it runs there.
    static IN_PRINTING_CHILD: std::sync::atomic::AtomicBool =
        std::sync::atomic::AtomicBool::new(false);

    /// An `atexit` handler of the test process: the parent program's, which a child returning
    /// from a host function must not run.
    extern "C" fn exit_handler() {
        if IN_PRINTING_CHILD.load(std::sync::atomic::Ordering::SeqCst) {
            // SAFETY: ends the child that ran the handler, with the status the test looks for.
            unsafe { libc::_exit(3) };
        }
    }

    /// What [`forks_prints_and_returns`] shares with its test.
    struct Printing {
        /// The write end of the pipe the child makes its stdout.
        pipe_w: libc::c_int,
        /// The child's wait status (-1: none yet).
        status: std::sync::atomic::AtomicI32,
    }

    /// A host function that forks; the child points its stdout at the test's pipe, prints a
    /// line it does not end (so that it stays in C's buffer) and returns from the host function.
    /// The parent's worker waits for the child (at most 5 s, then kills it).
    unsafe extern "C" fn forks_prints_and_returns(arg: *mut std::ffi::c_void) {
        // SAFETY: the test keeps its `Printing` alive until the stream has run this.
        let p = unsafe { &*arg.cast::<Printing>() };
        // SAFETY: the child only redirects its stdout, prints, and returns (the test's point).
        let child = unsafe { libc::fork() };
        if child == 0 {
            IN_PRINTING_CHILD.store(true, std::sync::atomic::Ordering::SeqCst);
            // SAFETY: the pipe's write end is open in the child; printf of a C string.
            unsafe {
                libc::dup2(p.pipe_w, 1);
                libc::printf(c"printed by the child".as_ptr());
            }
            return;
        }
        p.status
            .store(wait_at_most(child, 5), std::sync::atomic::Ordering::SeqCst);
    }

    /// A child that returns from a host function while another thread of the parent holds C's
    /// `stdout` lock ends (it neither waits for the lock nor runs the parent program's `atexit`
    /// handlers, which may wait for threads the child does not have), what it printed reaches
    /// its stdout, and the parent's stdout and simulator still work. Until 2026-12-05 the child
    /// ended with `exit(0)`: the parent's exit handler ran in it (status 3 here).
    #[test]
    fn a_child_returning_from_a_host_function_flushes_stdout_and_runs_none_of_the_parents_exit_handlers()
     {
        // SAFETY: `exit_handler` does nothing outside the test's child and does not unwind.
        assert_eq!(unsafe { libc::atexit(exit_handler) }, 0);
        let mut fds = [0; 2];
        // SAFETY: a pipe into `fds`.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let holder = std::thread::spawn(move || {
            // SAFETY: C's stdout, locked and unlocked on this thread.
            unsafe { stdio::flockfile(stdio::stdout) };
            held_tx.send(()).unwrap();
            let _ = done_rx.recv();
            // SAFETY: as above.
            unsafe { stdio::funlockfile(stdio::stdout) };
        });
        held_rx.recv().unwrap();
        let (sim, _ns) = open("stdout");
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let s = sim.create_stream(0).unwrap();
        let p = Printing {
            pipe_w: fds[1],
            status: std::sync::atomic::AtomicI32::new(-1),
        };
        // SAFETY: `p` lives until after the synchronize below.
        let call = unsafe {
            HostCall::new(
                forks_prints_and_returns,
                std::ptr::from_ref(&p).cast_mut().cast(),
            )
        };
        sim.launch_host_func(s, call).unwrap();
        sim.record(n, s).unwrap();
        let synced = sim.synchronize(s, SyncWait::AtMost(std::time::Duration::from_secs(30)));
        done_tx.send(()).unwrap();
        holder.join().unwrap();
        synced.unwrap();
        // SAFETY: the parent's copy of the write end, closed so that the read below ends.
        unsafe { libc::close(fds[1]) };
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        loop {
            // SAFETY: reads into `buf`, at most its length.
            let r = unsafe { libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len()) };
            if r <= 0 {
                break;
            }
            got.extend_from_slice(&buf[..r as usize]);
        }
        // SAFETY: the read end, no longer used.
        unsafe { libc::close(fds[0]) };
        let status = p.status.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child did not end cleanly (status {status:#x}; exit status 3: it ran the \
             parent's exit handler; killed: it hung)"
        );
        let got = String::from_utf8_lossy(&got);
        assert!(
            got.contains("printed by the child"),
            "the child's stdout was not flushed: {got:?}"
        );
        // The parent: its stdout lock is free and flushes, its notify and stream work.
        // SAFETY: C's stdout, on this thread.
        assert_eq!(unsafe { stdio::fflush(stdio::stdout) }, 0);
        assert_eq!(sim.merged_records(n).unwrap().total, 0);
        assert!(sim.host_wait(n, std::time::Duration::from_secs(5)).is_ok());
    }
}

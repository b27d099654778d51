//! Operating-system baselines for a round trip: two parties (two processes, or two threads of
//! one process) bounce a sequence number back and forth through a pair of one-way channels,
//! built from one mechanism: spinning on shared memory, a futex, spin-then-futex, `eventfd`,
//! POSIX semaphores (`sem_init` pshared), a Unix socket pair, or a `std` `Condvar`.
//!
//! Every receive checks the value it gets, so a lost or garbled message is an error, not a
//! fast result. A watchdog unblocks both parties (and kills a child) if a sample overruns.

use std::cell::UnsafeCell;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::child::{Child, RoleArgs, Watchdog, kill_pid};
use crate::sys::{
    self, Place, Scope, Shm, ShmSafe, futex_wait, futex_wake, now_ns, pin_current, run_on,
};

/// How long the hybrid spins before it sleeps in the kernel: "a few µs".
pub const HYBRID_SPIN_NS: u64 = acl_notify_core::table::SPIN.as_nanos() as u64;

/// Value sent to unblock a party that must give up (never a valid sequence number).
const ABORT: u32 = u32::MAX;

/// Longest a whole sample may take before the watchdog ends it.
const SAMPLE_LIMIT: Duration = Duration::from_secs(30);

/// A synchronisation mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mech {
    /// Busy-wait on a shared word.
    Spin,
    /// `FUTEX_WAIT` / `FUTEX_WAKE` on a shared word, no spinning.
    Futex,
    /// Spin for [`HYBRID_SPIN_NS`], then `FUTEX_WAIT`; the waker only calls `FUTEX_WAKE` when
    /// someone sleeps.
    Hybrid,
    /// One `eventfd` per direction, blocking `read`/`write`.
    EventFd,
    /// One process-shared POSIX semaphore per direction (`sem_post` / `sem_wait`).
    Sem,
    /// A `socketpair(AF_UNIX, SOCK_STREAM)`, 4-byte messages.
    Socket,
    /// `std::sync::Mutex` + `Condvar` (threads only).
    Condvar,
}

impl Mech {
    /// Every mechanism, for argument parsing.
    pub const ALL: [Mech; 7] = [
        Mech::Spin,
        Mech::Futex,
        Mech::Hybrid,
        Mech::EventFd,
        Mech::Sem,
        Mech::Socket,
        Mech::Condvar,
    ];

    /// Short name, used in role arguments and row names.
    pub fn name(self) -> &'static str {
        match self {
            Mech::Spin => "spin",
            Mech::Futex => "futex",
            Mech::Hybrid => "hybrid",
            Mech::EventFd => "eventfd",
            Mech::Sem => "posix-sem",
            Mech::Socket => "unix-socketpair",
            Mech::Condvar => "std-condvar",
        }
    }

    /// Parses [`Mech::name`].
    pub fn parse(s: &str) -> Result<Mech, String> {
        Mech::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("unknown mechanism `{s}`"))
    }
}

/// A cache line holding one message word and a count of sleepers on it.
#[repr(C, align(64))]
#[derive(Debug, Default)]
pub struct Line {
    /// The word (sequence number, flag, timestamp…).
    pub v: AtomicU32,
    /// How many parties sleep (or are about to) in `FUTEX_WAIT` on `v`.
    pub sleepers: AtomicU32,
}

// SAFETY: atomics only; all-zero is a valid value.
unsafe impl ShmSafe for Line {}

impl Line {
    /// Spin-then-futex wait until `v != last`; returns the new value.
    pub fn hybrid_wait(&self, last: u32, scope: Scope) -> u32 {
        let start = now_ns();
        let mut n = 0u32;
        loop {
            let x = self.v.load(Ordering::Acquire);
            if x != last {
                return x;
            }
            std::hint::spin_loop();
            n = n.wrapping_add(1);
            if n.is_multiple_of(16) && now_ns() - start > HYBRID_SPIN_NS {
                break;
            }
        }
        self.sleep_wait(last, scope)
    }

    /// The hybrid's second half alone: `FUTEX_WAIT` until `v != last`, without spinning
    /// first; returns the new value. [`Line::hybrid_set`] wakes it.
    pub fn sleep_wait(&self, last: u32, scope: Scope) -> u32 {
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let x = loop {
            let x = self.v.load(Ordering::SeqCst);
            if x != last {
                break x;
            }
            futex_wait(&self.v, last, scope, None);
        };
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        x
    }

    /// Publishes `x` and wakes a sleeper if there is one.
    pub fn hybrid_set(&self, x: u32, scope: Scope) {
        self.v.store(x, Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            futex_wake(&self.v, i32::MAX, scope);
        }
    }
}

#[repr(C, align(64))]
pub(crate) struct SemCell(pub(crate) UnsafeCell<libc::sem_t>);

// SAFETY: a `sem_t` initialised with `pshared = 1` is made to be used concurrently, including
// from other processes; it is only touched through `sem_*` calls.
unsafe impl Sync for SemCell {}

/// The shared page of a ping-pong pair.
#[repr(C)]
struct PpShared {
    ready: Line,
    dir: [Line; 2],
    sem: [SemCell; 2],
}

// SAFETY: atomics and process-shared semaphores (initialised before any use); all-zero is a
// valid (uninitialised, unused) value.
unsafe impl ShmSafe for PpShared {}

/// A direction: `Ping` goes from the driver to the peer, `Pong` back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Ping = 0,
    Pong = 1,
}

#[derive(Debug, Default)]
struct CvChan {
    m: Mutex<u32>,
    cv: Condvar,
}

/// Both channels of a pair, for one mechanism.
#[derive(Debug)]
struct Chans {
    mech: Mech,
    scope: Scope,
    shm: Shm,
    /// eventfds (one per direction) or socket ends (driver's, peer's); -1 when unused.
    fds: [RawFd; 2],
    owns_fds: bool,
    cv: [CvChan; 2],
}

impl Chans {
    fn create(mech: Mech, scope: Scope) -> Result<Chans, String> {
        if mech == Mech::Condvar && scope == Scope::Process {
            return Err("a std Condvar cannot cross processes".into());
        }
        let shm = Shm::create("acl-notify-bench-pingpong", 4096)?;
        let mut fds = [-1, -1];
        match mech {
            Mech::EventFd => {
                for fd in &mut fds {
                    // SAFETY: eventfd with an initial value and no flags (inheritable).
                    *fd = unsafe { libc::eventfd(0, 0) };
                    if *fd < 0 {
                        return Err(format!("eventfd: {}", std::io::Error::last_os_error()));
                    }
                }
            }
            Mech::Socket => {
                let mut sv = [0 as libc::c_int; 2];
                // SAFETY: `sv` is a valid out-array of two ints.
                if unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, sv.as_mut_ptr()) }
                    < 0
                {
                    return Err(format!("socketpair: {}", std::io::Error::last_os_error()));
                }
                fds = sv;
            }
            Mech::Sem => {
                let sh: &PpShared = shm.get();
                for s in &sh.sem {
                    // SAFETY: the semaphore lives in a MAP_SHARED mapping, is initialised once,
                    // before any other process or thread can see it.
                    if unsafe { libc::sem_init(s.0.get(), 1, 0) } < 0 {
                        return Err(format!("sem_init: {}", std::io::Error::last_os_error()));
                    }
                }
            }
            _ => {}
        }
        Ok(Chans {
            mech,
            scope,
            shm,
            fds,
            owns_fds: true,
            cv: Default::default(),
        })
    }

    /// The peer process's view, from inherited descriptors.
    fn inherit(mech: Mech, shm_fd: RawFd, fds: [RawFd; 2]) -> Result<Chans, String> {
        Ok(Chans {
            mech,
            scope: Scope::Process,
            shm: Shm::from_fd(shm_fd, 4096)?,
            fds,
            owns_fds: false,
            cv: Default::default(),
        })
    }

    fn shared(&self) -> &PpShared {
        self.shm.get()
    }

    fn send(&self, dir: Dir, v: u32) -> Result<(), String> {
        let d = dir as usize;
        let line = &self.shared().dir[d];
        match self.mech {
            Mech::Spin => line.v.store(v, Ordering::Release),
            Mech::Futex => {
                line.v.store(v, Ordering::Release);
                futex_wake(&line.v, 1, self.scope);
            }
            Mech::Hybrid => line.hybrid_set(v, self.scope),
            Mech::EventFd => {
                let x = v as u64 + 1;
                write_all(self.fds[d], &x.to_ne_bytes())?;
            }
            Mech::Sem => {
                line.v.store(v, Ordering::Release);
                // SAFETY: initialised pshared semaphore in the live mapping.
                if unsafe { libc::sem_post(self.shared().sem[d].0.get()) } < 0 {
                    return Err(format!("sem_post: {}", std::io::Error::last_os_error()));
                }
            }
            Mech::Socket => {
                // The driver writes on its end (0) for Ping, the peer on its end (1) for Pong.
                write_all(self.fds[d], &v.to_ne_bytes())?;
            }
            Mech::Condvar => {
                *self.cv[d].m.lock().unwrap_or_else(|e| e.into_inner()) = v;
                self.cv[d].cv.notify_one();
            }
        }
        Ok(())
    }

    /// Waits for the next message on `dir`; `last` is the previous value seen there.
    fn recv(&self, dir: Dir, last: u32) -> Result<u32, String> {
        let d = dir as usize;
        let line = &self.shared().dir[d];
        let v = match self.mech {
            Mech::Spin => loop {
                let x = line.v.load(Ordering::Acquire);
                if x != last {
                    break x;
                }
                std::hint::spin_loop();
            },
            Mech::Futex => loop {
                let x = line.v.load(Ordering::Acquire);
                if x != last {
                    break x;
                }
                futex_wait(&line.v, last, self.scope, None);
            },
            Mech::Hybrid => line.hybrid_wait(last, self.scope),
            Mech::EventFd => {
                let mut b = [0u8; 8];
                read_exact(self.fds[d], &mut b)?;
                let x = u64::from_ne_bytes(b);
                u32::try_from(x.wrapping_sub(1)).unwrap_or(ABORT)
            }
            Mech::Sem => {
                loop {
                    // SAFETY: initialised pshared semaphore in the live mapping.
                    if unsafe { libc::sem_wait(self.shared().sem[d].0.get()) } == 0 {
                        break;
                    }
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(format!("sem_wait: {e}"));
                    }
                }
                line.v.load(Ordering::Acquire)
            }
            Mech::Socket => {
                let mut b = [0u8; 4];
                read_exact(self.fds[1 - d], &mut b)?;
                u32::from_ne_bytes(b)
            }
            Mech::Condvar => {
                let c = &self.cv[d];
                let mut g = c.m.lock().unwrap_or_else(|e| e.into_inner());
                while *g == last {
                    g = c.cv.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                *g
            }
        };
        if v == ABORT {
            Err("aborted by the watchdog".into())
        } else {
            Ok(v)
        }
    }

    /// Unblocks both parties, whatever they wait on.
    fn abort(&self) {
        let _ = self.send(Dir::Ping, ABORT);
        let _ = self.send(Dir::Pong, ABORT);
    }
}

impl Drop for Chans {
    fn drop(&mut self) {
        if self.owns_fds {
            for fd in self.fds {
                sys::close(fd);
            }
            if self.mech == Mech::Sem {
                for s in &self.shared().sem {
                    // SAFETY: every user of the semaphores has finished (peer joined or
                    // reaped) before the last owner drops the channels.
                    unsafe { libc::sem_destroy(s.0.get()) };
                }
            }
        }
    }
}

fn write_all(fd: RawFd, b: &[u8]) -> Result<(), String> {
    let mut off = 0;
    while off < b.len() {
        // SAFETY: writing from a live slice range.
        let n = unsafe { libc::write(fd, b[off..].as_ptr().cast(), b.len() - off) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("write: {e}"));
        }
        off += n as usize;
    }
    Ok(())
}

fn read_exact(fd: RawFd, b: &mut [u8]) -> Result<(), String> {
    let mut off = 0;
    while off < b.len() {
        // SAFETY: reading into a live, writable slice range.
        let n = unsafe { libc::read(fd, b[off..].as_mut_ptr().cast(), b.len() - off) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(format!("read: {e}"));
        }
        if n == 0 {
            return Err("read: peer closed".into());
        }
        off += n as usize;
    }
    Ok(())
}

/// The peer's side: echo `total` messages.
fn peer_loop(c: &Chans, total: u64) -> Result<(), String> {
    for i in 1..=total as u32 {
        let v = c.recv(Dir::Ping, i - 1)?;
        if v != i {
            return Err(format!("peer expected {i}, got {v}"));
        }
        c.send(Dir::Pong, i)?;
    }
    Ok(())
}

/// The driver's side: `warmup` untimed then `iters` timed round trips; ns per round trip.
fn driver_loop(c: &Chans, warmup: u64, iters: u64) -> Result<f64, String> {
    let total = (warmup + iters) as u32;
    let mut t0 = now_ns();
    for i in 1..=total {
        if i == warmup as u32 + 1 {
            t0 = now_ns();
        }
        c.send(Dir::Ping, i)?;
        let v = c.recv(Dir::Pong, i - 1)?;
        if v != i {
            return Err(format!("driver expected {i}, got {v}"));
        }
    }
    Ok((now_ns() - t0) as f64 / iters as f64)
}

fn warmup_of(iters: u64) -> u64 {
    (iters / 10).clamp(50, 10_000)
}

/// One sample: `iters` round trips between this thread and a peer (thread or process).
pub fn round_trip(mech: Mech, scope: Scope, iters: u64) -> Result<f64, String> {
    round_trip_placed(mech, scope, Place::Kernel, iters)
}

/// [`round_trip`] with the two sides placed by `place`: the driver on the case's CPU 0, the
/// peer (thread or child process) on its CPU 1.
pub fn round_trip_placed(
    mech: Mech,
    scope: Scope,
    place: Place,
    iters: u64,
) -> Result<f64, String> {
    let iters = iters.max(1);
    let warmup = warmup_of(iters);
    let total = warmup + iters;
    if total >= ABORT as u64 {
        return Err("too many iterations".into());
    }
    let chans = Arc::new(Chans::create(mech, scope)?);
    match scope {
        Scope::Thread => {
            let peer_chans = chans.clone();
            let wd_chans = chans.clone();
            let wd = Watchdog::start(SAMPLE_LIMIT, move || wd_chans.abort());
            let peer_cpu = place.cpu(1);
            let peer = std::thread::spawn(move || match peer_cpu.map(pin_current) {
                Some(Err(e)) => {
                    peer_chans.abort();
                    Err(e)
                }
                _ => peer_loop(&peer_chans, total),
            });
            let r = run_on(place.cpu(0), || driver_loop(&chans, warmup, iters)).and_then(|r| r);
            if r.is_err() {
                chans.abort();
            }
            let p = peer
                .join()
                .map_err(|_| "peer thread panicked".to_string())?;
            let fired = wd.fired();
            drop(wd);
            if fired {
                return Err(format!(
                    "{} round trip overran {SAMPLE_LIMIT:?}",
                    mech.name()
                ));
            }
            p?;
            r
        }
        Scope::Process => {
            for fd in [chans.shm.fd(), chans.fds[0], chans.fds[1]] {
                if fd >= 0 {
                    sys::inheritable(fd).map_err(|e| format!("fcntl: {e}"))?;
                }
            }
            let mut args = vec![
                "--mech".into(),
                mech.name().into(),
                "--total".into(),
                total.to_string(),
                "--shm".into(),
                chans.shm.fd().to_string(),
                "--fd0".into(),
                chans.fds[0].to_string(),
                "--fd1".into(),
                chans.fds[1].to_string(),
            ];
            if let Some(c) = place.cpu(1) {
                args.extend(["--cpu".into(), c.to_string()]);
            }
            let mut child = Child::spawn("pingpong-peer", &args, &[])?;
            let pid = child.pid();
            let wd_chans = chans.clone();
            let wd = Watchdog::start(SAMPLE_LIMIT, move || {
                kill_pid(pid);
                wd_chans.abort();
            });
            wait_ready(&chans.shared().ready, &mut child)?;
            let r = run_on(place.cpu(0), || driver_loop(&chans, warmup, iters)).and_then(|r| r);
            if r.is_err() {
                child.kill();
            }
            let fired = wd.fired();
            drop(wd);
            if fired {
                return Err(format!(
                    "{} round trip overran {SAMPLE_LIMIT:?}",
                    mech.name()
                ));
            }
            let r = r?;
            child.finish(Duration::from_secs(5))?;
            Ok(r)
        }
    }
}

/// Waits (bounded) until a child has set `ready` to 1.
pub fn wait_ready(ready: &Line, child: &mut Child) -> Result<(), String> {
    let deadline = now_ns() + 10_000_000_000;
    loop {
        match ready.v.load(Ordering::Acquire) {
            1 => return Ok(()),
            0 => {}
            x => return Err(format!("child reported setup failure {x}")),
        }
        if child.exited() {
            return Err("child exited before it was ready".into());
        }
        if now_ns() > deadline {
            return Err("child not ready within 10 s".into());
        }
        futex_wait(&ready.v, 0, Scope::Process, Some(Duration::from_millis(5)));
    }
}

/// The child role `pingpong-peer`.
pub fn peer_main(args: &RoleArgs) -> Result<String, String> {
    let mech = Mech::parse(args.get("mech")?)?;
    let total: u64 = args.num("total")?;
    let c = Chans::inherit(mech, args.num("shm")?, [args.num("fd0")?, args.num("fd1")?])?;
    let ready = &c.shared().ready;
    if let Some(cpu) = args.opt_num("cpu")?
        && let Err(e) = pin_current(cpu)
    {
        ready.v.store(2, Ordering::Release);
        futex_wake(&ready.v, 1, Scope::Process);
        return Err(e);
    }
    ready.v.store(1, Ordering::Release);
    futex_wake(&ready.v, 1, Scope::Process);
    peer_loop(&c, total)?;
    Ok(String::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_mechanism_round_trips() {
        for m in Mech::ALL {
            let ns = round_trip(m, Scope::Thread, 200).unwrap();
            assert!(ns > 0.0, "{}", m.name());
        }
    }

    #[test]
    fn placed_thread_round_trips_run_and_leave_the_caller_alone() {
        if Place::Spread.usable().is_ok() {
            for m in [Mech::Hybrid, Mech::Futex] {
                let ns = round_trip_placed(m, Scope::Thread, Place::Spread, 200).unwrap();
                assert!(ns > 0.0, "{}", m.name());
            }
        }
        // The calling thread's own affinity is left alone.
        let before = acl_notify_sim::stream::allowed_cpus();
        round_trip_placed(Mech::Spin, Scope::Thread, Place::Spread, 50).unwrap();
        assert_eq!(acl_notify_sim::stream::allowed_cpus(), before);
    }
}

//! Tests of the system-call wrappers: process identity and liveness, `/proc` stat parsing, the
//! cached pid and nonces across fork, futex waits, randomness.

use super::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

#[test]
fn an_identity_is_the_process_s_and_a_dead_pid_has_none() {
    let me = process_identity(getpid()).expect("own identity");
    assert_eq!(process_identity(getpid()), Some(me), "stable");
    assert!(identity_alive(getpid(), me.start_time, me.pidfs));
    let mut kid = std::process::Command::new("true").spawn().unwrap();
    let pid = kid.id() as i32;
    let theirs = process_identity(pid);
    kid.wait().unwrap();
    assert_eq!(process_identity(pid), None, "reaped: not running");
    let (start, pidfs) = theirs.map_or((1, 0), |t| (t.start_time, t.pidfs));
    assert!(!identity_alive(pid, start, pidfs));
    assert!(!identity_alive(
        getpid(),
        acl_notify_core::whitelist::NOT_RUNNING,
        me.pidfs
    ));
    // Linux 6.9 and later: a pidfs number, distinct per process.
    if me.pidfs != 0 {
        assert_ne!(theirs.map(|t| t.pidfs), Some(me.pidfs));
    }
}

/// An entry recorded by start time only (what a process that cannot open pidfds, such as one
/// under valgrind, records) is alive while that process runs, whatever kind this process
/// could take; another start time is not. An entry with both kinds is checked by the pidfs
/// number where this process has one: another number is not alive though the start time
/// agrees (a PID recycled within the tick).
#[test]
fn a_start_time_identity_is_checked_by_start_time() {
    let me = process_identity(getpid()).expect("own identity");
    assert!(identity_alive(getpid(), me.start_time, 0));
    assert!(!identity_alive(getpid(), me.start_time + 1, 0));
    if me.pidfs != 0 {
        assert!(!identity_alive(getpid(), me.start_time, me.pidfs + 1));
    }
}

/// A child that has exited but is not reaped yet (a zombie) is not running: whitelisting
/// it gives an entry that admits nobody, and an identity taken while it ran is not alive.
#[test]
fn a_zombie_has_no_identity_and_is_not_alive() {
    let mut kid = std::process::Command::new("true").spawn().unwrap();
    let pid = kid.id() as i32;
    let running = process_identity(pid);
    // Wait until it has exited without reaping it (WNOWAIT keeps the zombie).
    // SAFETY: all-zero is a valid siginfo_t; waitid fills it for our own child.
    let rc = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    assert_eq!(rc, 0, "waitid: {}", std::io::Error::last_os_error());
    assert_eq!(process_identity(pid), None, "a zombie is not running");
    if let Some(id) = running {
        assert!(
            !identity_alive(pid, id.start_time, id.pidfs),
            "a zombie is not alive"
        );
    }
    kid.wait().unwrap();
}

#[test]
fn stat_parsing() {
    let line = "1234 (a b) c) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 19 20";
    assert_eq!(parse_stat_start_time(line), Some(987654));
    let zombie = "1234 (x) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 19";
    assert_eq!(parse_stat_start_time(zombie), None);
    assert_eq!(parse_stat_start_time("garbage"), None);
    assert_eq!(parse_stat_start_time("1 (x) S 1 2"), None);
}

#[test]
fn own_process_is_alive_and_start_time_is_checked() {
    let me = getpid();
    let start = proc_start_time(me).expect("own start time");
    assert!(start > 0);
    assert!(pid_alive(me, start));
    assert!(pid_alive(me, 0));
    assert!(!pid_alive(me, start + 1));
    assert!(!pid_alive(-1, 0));
    assert!(!pid_alive(0, 0));
}

#[test]
fn the_cached_pid_is_the_kernels_and_a_forked_child_sees_its_own() {
    assert_eq!(getpid(), std::process::id() as i32);
    assert_eq!(getpid(), std::process::id() as i32, "second (cached) read");
    // The child only reads atomics and makes a system call: nothing that needs a lock
    // another thread of this test process might have held at the fork.
    let child = crate::fork::run_in_child(|| {
        // SAFETY: `getpid` cannot fail.
        let kernel = unsafe { libc::getpid() };
        getpid() == kernel && kernel != 0
    });
    if let Err(status) = child {
        panic!("the forked child read its parent's pid from the cache (status {status:#x})");
    }
    assert_eq!(
        getpid(),
        std::process::id() as i32,
        "the parent's cache changed"
    );
}

#[test]
fn nonces_are_never_repeated_and_a_forked_child_draws_its_own() {
    let mut seen = std::collections::HashSet::new();
    for _ in 0..200 {
        let n = nonce16().unwrap();
        assert_ne!(n, [0; 16]);
        assert!(seen.insert(n), "a nonce came out twice");
    }
    // The child's next nonce must not be the one the parent draws next from its buffer.
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: the child draws a nonce (its buffer is its own copy; refilling it is one
    // system call), writes it to the pipe and `_exit`s.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let n = nonce16().unwrap_or([0; 16]);
        // SAFETY: writes the 16 bytes of `n` to the pipe, then ends the child.
        unsafe {
            libc::write(fds[1], n.as_ptr().cast(), 16);
            libc::_exit(0);
        }
    }
    let mut theirs = [0u8; 16];
    // SAFETY: reads at most 16 bytes into `theirs`.
    let got = unsafe { libc::read(fds[0], theirs.as_mut_ptr().cast(), 16) };
    let mut status = 0;
    // SAFETY: waits for the child forked above; closes the pipe made above.
    unsafe {
        libc::waitpid(child, &mut status, 0);
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    assert_eq!(got, 16);
    let mine = nonce16().unwrap();
    assert_ne!(theirs, [0; 16], "the child failed to draw a nonce");
    assert_ne!(
        theirs, mine,
        "the forked child handed out its parent's next nonce"
    );
    assert!(!seen.contains(&theirs));
}

/// A futex wait ends by its timeout (not before it), at once on a value that is not the
/// expected one, and by a wake. Each is told by the wait's outcome (its errno, the count
/// the wake returns), not by how long it took, so a loaded machine, or a process paused
/// meanwhile, changes nothing; the only time bound is a lower one.
#[test]
fn futex_wait_times_out_and_wakes() {
    let errno = || std::io::Error::last_os_error().raw_os_error();
    let w = Arc::new(AtomicU32::new(0));
    let t0 = Instant::now();
    assert!(!futex_wait(&w, 0, Some(Duration::from_millis(20))));
    assert_eq!(errno(), Some(libc::ETIMEDOUT));
    assert!(t0.elapsed() >= Duration::from_millis(15));
    // Value mismatch: returns because of it (EAGAIN), not at the end of its timeout.
    assert!(!futex_wait(&w, 1, Some(Duration::from_secs(60))));
    assert_eq!(errno(), Some(libc::EAGAIN));
    // A wake: the waiter counts the waits a wake ended (in 1 s waits, which a long pause
    // only turns into more of them).
    let w2 = w.clone();
    let h = std::thread::spawn(move || {
        let mut woken = 0;
        while w2.load(Ordering::SeqCst) == 0 {
            woken += u32::from(futex_wait(&w2, 0, Some(Duration::from_secs(1))));
        }
        woken
    });
    // Wake (without changing the word) until the wake finds the waiter asleep: the kernel
    // says it woke one. Bounded, generously.
    let t0 = Instant::now();
    while futex_wake(&w, u32::MAX) != 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no waiter was ever woken"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    w.store(1, Ordering::SeqCst);
    futex_wake(&w, u32::MAX);
    assert!(
        h.join().unwrap() >= 1,
        "the waiter saw no wait ended by a wake"
    );
}

#[test]
fn randomness_differs() {
    let mut a = [0u8; 16];
    let mut b = [0u8; 16];
    fill_random(&mut a).unwrap();
    fill_random(&mut b).unwrap();
    assert_ne!(a, b);
    assert!(now_ns() > 0);
}

//! For tests: running a check in a child forked from the test process, also while another
//! thread of the parent holds a lock (what a process-wide lock must survive: see
//! `acl_notify_sim::PerProcess`).

use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Tests that fork take turns (a child copies whatever the other forking tests hold). A
/// `PerProcess` like every process-wide lock of the crates (`acl_notify_sim`'s `fork` tests
/// check the source for plain ones).
static SERIAL: acl_notify_sim::PerProcess<()> = acl_notify_sim::PerProcess::new(|| ());

/// Runs `body` in a child forked from this process: whether it returned true, or `None` if
/// it had not ended after 20 s (killed then). `body` must not need a lock another thread of
/// the test process may hold but the one under test.
pub(crate) fn in_child(body: impl FnOnce() -> bool) -> Option<bool> {
    let _one = SERIAL.lock().expect("the fork handler");
    fork_and_wait(body)
}

/// As [`in_child`], the fork made while another thread holds what `hold` returns (a lock's
/// guard), given back once the child has ended.
pub(crate) fn in_child_while_held<G>(
    hold: impl FnOnce() -> G + Send + 'static,
    body: impl FnOnce() -> bool,
) -> Option<bool> {
    let _one = SERIAL.lock().expect("the fork handler");
    let (locked, release) = (mpsc::channel(), mpsc::channel::<()>());
    let holder = std::thread::spawn(move || {
        let _held = hold();
        locked.0.send(()).expect("the test waits for the lock");
        let _ = release.1.recv();
    });
    locked.1.recv().expect("the holder took the lock");
    let ended = fork_and_wait(body);
    release.0.send(()).expect("the holder waits");
    holder.join().expect("the holder ends");
    ended
}

fn fork_and_wait(body: impl FnOnce() -> bool) -> Option<bool> {
    // SAFETY: the child runs `body` and `_exit`s; the parent only waits for it.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork failed");
    if child == 0 {
        let ok = body();
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut status = 0;
    loop {
        // SAFETY: polls the child forked above.
        if unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) } == child {
            return Some(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        }
        if Instant::now() > deadline {
            // SAFETY: our own child, killed and reaped.
            unsafe {
                libc::kill(child, libc::SIGKILL);
                libc::waitpid(child, &mut status, 0);
            }
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

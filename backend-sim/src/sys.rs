//! Thin, checked wrappers over the Linux calls the simulator needs: shared futexes, the
//! monotonic clock, OS randomness, and process identity (PID + start time from `/proc`).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// `FUTEX_WAIT` on a word that may live in a `MAP_SHARED` mapping (no `FUTEX_PRIVATE_FLAG`):
/// blocks while `*word == expected`, at most `timeout`. Returns on wake-up, timeout, signal or
/// value mismatch alike; callers re-check.
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout: Option<Duration>) {
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
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

/// `FUTEX_WAKE` (shared): wakes up to `n` waiters on `word` in any process.
pub fn futex_wake(word: &AtomicU32, n: u32) -> usize {
    let n = n.min(i32::MAX as u32) as i32;
    // SAFETY: `word` is a valid, aligned atomic; FUTEX_WAKE only uses its address as a key.
    let woken = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
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

/// This process's id.
pub fn getpid() -> i32 {
    std::process::id() as i32
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Instant;

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
    fn futex_wait_times_out_and_wakes() {
        let w = Arc::new(AtomicU32::new(0));
        let t0 = Instant::now();
        futex_wait(&w, 0, Some(Duration::from_millis(20)));
        assert!(t0.elapsed() >= Duration::from_millis(15));
        // Value mismatch returns at once.
        let t0 = Instant::now();
        futex_wait(&w, 1, Some(Duration::from_secs(5)));
        assert!(t0.elapsed() < Duration::from_secs(1));
        let w2 = w.clone();
        let h = std::thread::spawn(move || {
            let t0 = Instant::now();
            while w2.load(Ordering::SeqCst) == 0 {
                futex_wait(&w2, 0, Some(Duration::from_secs(10)));
            }
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(20));
        w.store(1, Ordering::SeqCst);
        futex_wake(&w, u32::MAX);
        assert!(h.join().unwrap() < Duration::from_secs(5));
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
}

//! Idle-waiter baselines: how long a raw `FUTEX_WAKE` takes to get a thread that has slept
//! long enough to have stopped spinning back on a CPU, and how much CPU a thread blocked in
//! `FUTEX_WAIT` burns (the floor for "a waiter with nothing to do must not burn a core").

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::sys::{Scope, futex_wait, futex_wake, now_ns, process_cpu_ns, run_on};

/// How long the waiter is left alone before each wake: far beyond any spin phase.
pub const IDLE_SLEEP: Duration = Duration::from_millis(2);

/// Longest any single wait of these benchmarks may take before it is declared lost.
const EVENT_LIMIT_NS: u64 = 5_000_000_000;

#[derive(Debug, Default)]
struct WakeShared {
    seq: AtomicU32,
    ack: AtomicU32,
    t1: AtomicU64,
    stop: AtomicU32,
}

/// Waits (bounded) until `word` holds `want`, sleeping in the kernel.
pub fn wait_for(word: &AtomicU32, want: u32, scope: Scope) -> Result<(), String> {
    let deadline = now_ns() + EVENT_LIMIT_NS;
    loop {
        let x = word.load(Ordering::Acquire);
        if x == want {
            return Ok(());
        }
        if now_ns() > deadline {
            return Err(format!("waited 5 s for {want}, word is {x}"));
        }
        futex_wait(word, x, scope, Some(Duration::from_millis(100)));
    }
}

/// The median of a latency list (ns).
pub fn median(mut v: Vec<u64>) -> f64 {
    v.sort_unstable();
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] + v[n / 2]) as f64 / 2.0
    }
}

/// `events` wake-ups of a thread blocked in `FUTEX_WAIT` for [`IDLE_SLEEP`]: from just before
/// `FUTEX_WAKE` to the waiter running again. With `cpu`, the waker and the sleeper both run
/// on that CPU (the calling thread's affinity is left alone). Returns the median over the
/// events (ns).
///
/// The waker wakes the sleeper as soon as its own sleep ends. (Letting it run for 20 µs first,
/// as the case's recording worker has been running when it records, made the wake-up slower
/// here, not faster: 5.0–5.8 µs against 4.2–4.8; the baseline is kept in its faster form.)
pub fn futex_idle_wake(events: u64, cpu: Option<usize>) -> Result<f64, String> {
    // A thread created by a placed thread inherits its CPU, so the sleeper is placed too.
    run_on(cpu, || futex_idle_wake_here(events))?
}

fn futex_idle_wake_here(events: u64) -> Result<f64, String> {
    let sh = Arc::new(WakeShared::default());
    let w = sh.clone();
    let waiter = std::thread::spawn(move || -> Result<(), String> {
        for k in 1..=events as u32 {
            let deadline = now_ns() + EVENT_LIMIT_NS;
            loop {
                if w.stop.load(Ordering::Acquire) != 0 {
                    return Err("stopped".into());
                }
                if w.seq.load(Ordering::Acquire) == k {
                    break;
                }
                if now_ns() > deadline {
                    return Err("no wake within 5 s".into());
                }
                futex_wait(
                    &w.seq,
                    k - 1,
                    Scope::Thread,
                    Some(Duration::from_millis(100)),
                );
            }
            w.t1.store(now_ns(), Ordering::Release);
            w.ack.store(k, Ordering::Release);
            futex_wake(&w.ack, 1, Scope::Thread);
        }
        Ok(())
    });
    let mut lat = Vec::with_capacity(events as usize);
    let mut result = Ok(());
    for k in 1..=events as u32 {
        std::thread::sleep(IDLE_SLEEP);
        let t0 = now_ns();
        sh.seq.store(k, Ordering::Release);
        futex_wake(&sh.seq, 1, Scope::Thread);
        if let Err(e) = wait_for(&sh.ack, k, Scope::Thread) {
            result = Err(e);
            break;
        }
        lat.push(sh.t1.load(Ordering::Acquire).saturating_sub(t0));
    }
    if result.is_err() {
        sh.stop.store(1, Ordering::Release);
        sh.seq.store(u32::MAX, Ordering::Release);
        futex_wake(&sh.seq, 1, Scope::Thread);
    }
    let w = waiter
        .join()
        .map_err(|_| "waiter thread panicked".to_string())?;
    result?;
    w?;
    Ok(median(lat))
}

/// CPU time (ns) the whole process uses while one thread sits in `FUTEX_WAIT` for `span`.
pub fn futex_idle_cpu(span: Duration) -> Result<f64, String> {
    let word = Arc::new(AtomicU32::new(0));
    let w = word.clone();
    let waiter = std::thread::spawn(move || wait_for(&w, 1, Scope::Thread));
    std::thread::sleep(Duration::from_millis(5));
    let c0 = process_cpu_ns();
    std::thread::sleep(span);
    let c1 = process_cpu_ns();
    word.store(1, Ordering::Release);
    futex_wake(&word, 1, Scope::Thread);
    waiter
        .join()
        .map_err(|_| "waiter thread panicked".to_string())??;
    Ok(c1.saturating_sub(c0) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn futex_wake_is_measured() {
        for cpu in [None, crate::sys::Place::Spread.cpu(0)] {
            let ns = futex_idle_wake(3, cpu).unwrap();
            assert!(ns > 0.0 && ns < 1e9, "{cpu:?}: {ns}");
        }
    }
}

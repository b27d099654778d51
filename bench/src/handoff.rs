//! Lossless handoff throughput baseline: a producer thread and a consumer thread pass numbered
//! items through a ring of [`SLOTS`] slots, each slot a pair of spin-then-futex words ("full"
//! and "empty", like a pair of notifies), so no item can be overwritten before it is consumed.
//! The consumer checks every item's number: a loss or duplicate is an error.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::child::Watchdog;
use crate::pingpong::Line;
use crate::sys::{Place, Scope, now_ns, pin_current, run_on};

/// Items in flight at most: the ring size, shared with the notify case (one notify pair per
/// slot), so both sides of the comparison have the same pipelining.
pub const SLOTS: usize = 8;

#[derive(Debug, Default)]
struct Ring {
    full: [Line; SLOTS],
    empty: [Line; SLOTS],
}

/// Written into every word by the watchdog to stop both threads.
pub(crate) const POISON: u32 = u32::MAX;

/// Longest a sample may take.
pub(crate) const SAMPLE_LIMIT: Duration = Duration::from_secs(30);

impl Line {
    /// Spin-then-futex wait until the word equals `want`; `Err` if the watchdog poisoned it.
    pub(crate) fn hybrid_wait_for(&self, want: u32, scope: Scope) -> Result<(), String> {
        self.wait_for_with(want, |l, x| l.hybrid_wait(x, scope))
    }

    /// [`Line::hybrid_wait_for`] without the spin phase.
    pub(crate) fn sleep_wait_for(&self, want: u32, scope: Scope) -> Result<(), String> {
        self.wait_for_with(want, |l, x| l.sleep_wait(x, scope))
    }

    fn wait_for_with(&self, want: u32, wait: impl Fn(&Line, u32) -> u32) -> Result<(), String> {
        let mut x = self.v.load(Ordering::Acquire);
        while x != want {
            if x == POISON {
                return Err("stopped by the watchdog".into());
            }
            x = wait(self, x);
        }
        Ok(())
    }
}

impl Ring {
    fn poison(&self) {
        for l in self.full.iter().chain(self.empty.iter()) {
            l.hybrid_set(POISON, Scope::Thread);
        }
    }
}

fn consume(r: &Ring, n: u32) -> Result<u64, String> {
    let mut got = 0u64;
    for i in 1..=n {
        let s = i as usize % SLOTS;
        r.full[s].hybrid_wait_for(i, Scope::Thread)?;
        let v = r.full[s].v.load(Ordering::Acquire);
        if v != i {
            return Err(format!("consumer expected item {i}, slot holds {v}"));
        }
        got += 1;
        r.empty[s].hybrid_set(i, Scope::Thread);
    }
    Ok(got)
}

/// One sample: `iters` items through the ring; returns millions of items per second.
pub fn hybrid_ring(iters: u64) -> Result<f64, String> {
    hybrid_ring_placed(Place::Kernel, iters)
}

/// [`hybrid_ring`] with the producer on the case's CPU 0 and the consumer on its CPU 1.
pub fn hybrid_ring_placed(place: Place, iters: u64) -> Result<f64, String> {
    let n = u32::try_from(iters)
        .ok()
        .filter(|&n| n < POISON)
        .ok_or_else(|| "too many items".to_string())?;
    let ring = Arc::new(Ring::default());
    let r = ring.clone();
    let t0 = now_ns();
    let consumer_cpu = place.cpu(1);
    let consumer = std::thread::spawn(move || {
        let res = match consumer_cpu.map(pin_current) {
            Some(Err(e)) => Err(e),
            _ => consume(&r, n),
        };
        if res.is_err() {
            r.poison();
        }
        res
    });

    let wr = ring.clone();
    let wd = Watchdog::start(SAMPLE_LIMIT, move || wr.poison());
    let produced = run_on(place.cpu(0), || {
        for i in 1..=n {
            let s = i as usize % SLOTS;
            if i as usize > SLOTS {
                ring.empty[s].hybrid_wait_for(i - SLOTS as u32, Scope::Thread)?;
            }
            ring.full[s].hybrid_set(i, Scope::Thread);
        }
        Ok(())
    })
    .and_then(|r| r);
    if produced.is_err() {
        ring.poison();
    }
    let got = consumer.join().map_err(|_| "consumer panicked".to_string());
    let dt = now_ns() - t0;
    drop(wd);
    produced?;
    let got = got??;
    if got != iters {
        return Err(format!("lost items: produced {iters}, consumed {got}"));
    }
    Ok(iters as f64 * 1e3 / dt as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_is_lossless() {
        assert!(hybrid_ring(10_000).unwrap() > 0.0);
        if Place::Spread.usable().is_ok() {
            assert!(hybrid_ring_placed(Place::Spread, 10_000).unwrap() > 0.0);
        }
    }
}

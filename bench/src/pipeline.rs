//! A 4-stream pipeline in one process, one *ready*/*free* notify pair per link: stage k waits
//! for item i on link k−1's ready notify, frees that link's slot, waits (from the second item
//! on) until the next stage has freed link k's slot, and says ready on it. The host thread
//! enqueues every stage's tasks, in chunks, while the streams run them (default settings):
//! the figure is items through all four stages per second.
//!
//! [`flag_pipeline`] runs the same protocol on four OS threads and futex flags (spinning first
//! or not), with no host thread at all: what this machine's CPUs allow a pipeline of four
//! parties that hand every item over one at a time, the floor beside the absolute target.

use acl_notify_core::{
    CreateFlags, HostOps, NotifyResources, RawNotify, RawStream, Soc, StreamDestroy, StreamOps,
    SyncWait, Timeout,
};
use acl_notify_sim::Sim;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::child::Watchdog;
use crate::handoff::{POISON, SAMPLE_LIMIT};
use crate::notify::{DEV, SYNC_LIMIT, e2s, open_default};
use crate::pingpong::Line;
use crate::pipeprobe::Probe;
use crate::sys::{Scope, now_ns};

/// Stages (streams).
pub const STAGES: usize = 4;

/// Items the host enqueues per stage before it moves to the next stage.
pub const CHUNK: u64 = 64;

/// Four streams and the notifies of their three links.
pub struct Pipeline {
    sim: Sim,
    s: [RawStream; STAGES],
    ready: [RawNotify; STAGES - 1],
    free: [RawNotify; STAGES - 1],
    /// [`Probe::enabled`], read once.
    probe: bool,
}

impl Pipeline {
    /// Opens the simulator on `ns` with the defaults and sets the pipeline up.
    pub fn new(ns: &str) -> Result<Pipeline, String> {
        let sim = open_default(ns, Soc::Ascend910B)?;
        let mut s = [RawStream(0); STAGES];
        for x in &mut s {
            *x = sim.create_stream(DEV).map_err(e2s)?;
        }
        let mut ready = [RawNotify(0); STAGES - 1];
        let mut free = [RawNotify(0); STAGES - 1];
        for x in ready.iter_mut().chain(free.iter_mut()) {
            *x = sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?;
        }
        Ok(Pipeline {
            sim,
            s,
            ready,
            free,
            probe: Probe::enabled(),
        })
    }

    /// Stage `k`'s tasks for item `i`.
    fn stage(&self, k: usize, i: u64) -> Result<(), String> {
        let (sim, s) = (&self.sim, self.s[k]);
        if k > 0 {
            sim.wait_and_reset(self.ready[k - 1], s, Timeout::Forever)
                .map_err(e2s)?;
            sim.record(self.free[k - 1], s).map_err(e2s)?;
        }
        if k < STAGES - 1 {
            if i > 0 {
                sim.wait_and_reset(self.free[k], s, Timeout::Forever)
                    .map_err(e2s)?;
            }
            sim.record(self.ready[k], s).map_err(e2s)?;
        }
        Ok(())
    }

    /// One sample: items per second over `items` items (a fresh run: every link's slot starts
    /// free).
    pub fn sample(&mut self, items: u64) -> Result<f64, String> {
        let mut probe = self.probe.then(Probe::start);
        let t0 = now_ns();
        let r = (|| {
            let mut start = 0;
            while start < items {
                let end = (start + CHUNK).min(items);
                if let Some(p) = &mut probe {
                    p.chunk();
                }
                for k in 0..STAGES {
                    for i in start..end {
                        self.stage(k, i)?;
                    }
                }
                start = end;
            }
            // The last item's free records are left set: consume them for the next sample.
            for &s in &self.s {
                self.sim
                    .synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
                    .map_err(e2s)?;
            }
            Ok(())
        })();
        let dt = now_ns() - t0;
        if let Err(e) = r {
            self.reset();
            return Err(e);
        }
        for &f in &self.free {
            if !self.sim.try_consume(f).map_err(e2s)? {
                return Err("a link's last free record is missing".into());
            }
        }
        let rate = items as f64 * 1e9 / dt as f64;
        if let Some(p) = probe {
            p.end(rate, dt);
        }
        Ok(rate)
    }

    fn reset(&mut self) {
        for s in &mut self.s {
            let _ = self.sim.destroy_stream(*s, StreamDestroy::Discard);
            if let Ok(n) = self.sim.create_stream(DEV) {
                *s = n;
            }
        }
        for &n in self.ready.iter().chain(&self.free) {
            let _ = self.sim.try_consume(n);
        }
    }
}

/// The flags of the baseline's three links: `ready[k]` holds the number of the last item
/// stage k handed to stage k+1, `free[k]` the last one stage k+1 took from it.
#[derive(Debug, Default)]
struct Links {
    ready: [Line; STAGES - 1],
    free: [Line; STAGES - 1],
}

impl Links {
    fn poison(&self) {
        for l in self.ready.iter().chain(&self.free) {
            l.hybrid_set(POISON, Scope::Thread);
        }
    }

    /// Stage `k`'s loop over items 1..=n, the notify case's `stage` on flags. Each wait
    /// wants one exact item number, so a lost or repeated hand-over stops the sample (the
    /// watchdog poisons the flags) instead of counting.
    fn stage(&self, k: usize, n: u32, spin: bool) -> Result<(), String> {
        let wait = |l: &Line, want: u32| {
            if spin {
                l.hybrid_wait_for(want, Scope::Thread)
            } else {
                l.sleep_wait_for(want, Scope::Thread)
            }
        };
        for i in 1..=n {
            if k > 0 {
                wait(&self.ready[k - 1], i)?;
                self.free[k - 1].hybrid_set(i, Scope::Thread);
            }
            if k < STAGES - 1 {
                if i > 1 {
                    wait(&self.free[k], i - 1)?;
                }
                self.ready[k].hybrid_set(i, Scope::Thread);
            }
        }
        Ok(())
    }
}

/// One sample of the baseline: `items` items through four threads (as the kernel places
/// them), one ready/free pair of futex flags per link, each wait spinning first for
/// [`HYBRID_SPIN_NS`](crate::pingpong::HYBRID_SPIN_NS) (`spin`) or going straight to sleep;
/// items per second, timed from the threads' start to the last one's end.
pub fn flag_pipeline(items: u64, spin: bool) -> Result<f64, String> {
    let n = u32::try_from(items)
        .ok()
        .filter(|&n| n < POISON)
        .ok_or_else(|| "too many items".to_string())?;
    let links = Arc::new(Links::default());
    let w = links.clone();
    let wd = Watchdog::start(SAMPLE_LIMIT, move || w.poison());
    let t0 = now_ns();
    let threads: Vec<_> = (0..STAGES)
        .map(|k| {
            let l = links.clone();
            std::thread::spawn(move || {
                let r = l.stage(k, n, spin);
                if r.is_err() {
                    l.poison();
                }
                r
            })
        })
        .collect();
    let mut r = Ok(());
    for t in threads {
        let done = t.join().map_err(|_| "a stage thread panicked".to_string());
        if r.is_ok() {
            r = done.and_then(|x| x);
        }
    }
    let dt = now_ns() - t0;
    let fired = wd.fired();
    drop(wd);
    r?;
    if fired {
        return Err("the baseline pipeline overran its time limit".into());
    }
    for k in 0..STAGES - 1 {
        let (rd, fr) = (
            links.ready[k].v.load(Ordering::Acquire),
            links.free[k].v.load(Ordering::Acquire),
        );
        if rd != n || fr != n {
            return Err(format!("link {k} ended at ready {rd}, free {fr}, not {n}"));
        }
    }
    Ok(items as f64 * 1e9 / dt as f64)
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        for s in self.s {
            let _ = self.sim.destroy_stream(s, StreamDestroy::Discard);
        }
        for &n in self.ready.iter().chain(&self.free) {
            let _ = self.sim.destroy_notify(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_pipeline_moves_every_item_through_every_link() {
        for spin in [true, false] {
            assert!(flag_pipeline(5_000, spin).unwrap() > 0.0);
        }
    }
}

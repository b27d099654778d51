//! A 4-stream pipeline in one process, one *ready*/*free* notify pair per link: stage k waits
//! for item i on link k−1's ready notify, frees that link's slot, waits (from the second item
//! on) until the next stage has freed link k's slot, and says ready on it. The host thread
//! enqueues every stage's tasks, in chunks, while the streams run them (default settings):
//! the figure is items through all four stages per second.

use acl_notify_core::{
    CreateFlags, HostOps, NotifyResources, RawNotify, RawStream, Soc, StreamDestroy, StreamOps,
    SyncWait, Timeout,
};
use acl_notify_sim::Sim;

use crate::notify::{DEV, SYNC_LIMIT, e2s, open_default};
use crate::sys::now_ns;

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
        let t0 = now_ns();
        let r = (|| {
            let mut start = 0;
            while start < items {
                let end = (start + CHUNK).min(items);
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
        Ok(items as f64 * 1e9 / dt as f64)
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

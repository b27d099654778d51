//! What one enqueue costs the host thread when the stream is running: the host queues records
//! in bursts while the stream's worker takes and runs them (it is awake, having just finished
//! the previous burst). Only the enqueue calls are timed; the stream is synchronized between
//! bursts, untimed.

use acl_notify_core::{
    CreateFlags, Error, HostOps, NotifyResources, RawNotify, RawStream, Soc, StreamDestroy,
    StreamOps, SyncWait,
};
use acl_notify_sim::Sim;
use acl_notify_sim::stream::{Job, Stream, StreamConfig, TaskCtx};

use crate::notify::{DEV, SYNC_LIMIT, e2s, open_default};
use crate::sys::now_ns;

/// Enqueues per timed burst: well inside the default queue of 1,024, so a burst never waits
/// for room.
pub const BURST: u64 = 256;

/// A stream of the simulator with a notify to record on it, opened with default settings.
pub struct SimEnqueue {
    sim: Sim,
    s: RawStream,
    n: RawNotify,
}

impl SimEnqueue {
    /// Opens the simulator on `ns` with the defaults and makes one stream and one notify.
    pub fn new(ns: &str) -> Result<SimEnqueue, String> {
        let sim = open_default(ns, Soc::Ascend910B)?;
        let s = sim.create_stream(DEV).map_err(e2s)?;
        let n = sim.create_notify(DEV, CreateFlags::empty()).map_err(e2s)?;
        Ok(SimEnqueue { sim, s, n })
    }

    /// ns per `record` call over about `iters` calls, in bursts of [`BURST`].
    pub fn sample(&mut self, iters: u64) -> Result<f64, String> {
        let (sim, s, n) = (&self.sim, self.s, self.n);
        let sync = || {
            sim.synchronize(s, SyncWait::AtMost(SYNC_LIMIT))
                .map_err(e2s)
        };
        let bursts = iters.div_ceil(BURST).max(1);
        let mut dt = 0;
        for _ in 0..bursts {
            // The worker has just run the previous burst and is awake.
            sync()?;
            let t0 = now_ns();
            for _ in 0..BURST {
                sim.record(n, s).map_err(e2s)?;
            }
            dt += now_ns() - t0;
        }
        sync()?;
        sim.try_consume(n).map_err(e2s)?;
        Ok(dt as f64 / (bursts * BURST) as f64)
    }
}

impl Drop for SimEnqueue {
    fn drop(&mut self) {
        let _ = self.sim.destroy_stream(self.s, StreamDestroy::Discard);
        let _ = self.sim.destroy_notify(self.n);
    }
}

/// A job that does nothing: the engine's own enqueue→run cost, no allocation.
struct Nop;

impl Job<Error> for Nop {
    type Remains = ();
    fn run(self, _: &TaskCtx, _: &mut dyn FnMut()) -> (Result<(), Error>, ()) {
        (Ok(()), ())
    }
    fn may_block(&self) -> bool {
        false
    }
}

/// The stream engine alone (`acl_notify_sim::stream`), default configuration.
pub struct EngineEnqueue {
    s: Stream<Error, Nop>,
}

impl EngineEnqueue {
    /// Starts a stream.
    pub fn new() -> Result<EngineEnqueue, String> {
        Ok(EngineEnqueue {
            s: Stream::spawn(StreamConfig::new("bench-enq")).map_err(e2s)?,
        })
    }

    /// ns per `enqueue_job` over about `iters` calls, in bursts of [`BURST`].
    pub fn sample(&mut self, iters: u64) -> Result<f64, String> {
        let s = &self.s;
        let bursts = iters.div_ceil(BURST).max(1);
        let mut dt = 0;
        for _ in 0..bursts {
            s.synchronize(SyncWait::AtMost(SYNC_LIMIT)).map_err(e2s)?;
            let t0 = now_ns();
            for _ in 0..BURST {
                s.enqueue_job(Nop).map_err(e2s)?;
            }
            dt += now_ns() - t0;
        }
        s.synchronize(SyncWait::AtMost(SYNC_LIMIT)).map_err(e2s)?;
        Ok(dt as f64 / (bursts * BURST) as f64)
    }
}

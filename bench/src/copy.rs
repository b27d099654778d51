//! Device-memory copies on the simulator against the host's own `memcpy` of the same sizes:
//! the bandwidth of `aclrtMemcpy` device to device and of `aclrtMemcpyAsync` (a burst queued on
//! a stream, then a synchronize), and the per-call cost of a small asynchronous copy.

use acl_notify_core::{RawStream, Soc, StreamDestroy, StreamOps, SyncWait};
use acl_notify_sim::Sim;
use acl_notify_sim::mem::MemcpyKind;

use crate::notify::{DEV, SYNC_LIMIT, e2s};
use crate::sys::now_ns;

/// Sizes of the bandwidth groups (the target, ≥ 80% of `memcpy`, is from 64 KiB up).
pub const SIZES: [(usize, &str); 3] = [
    (64 << 10, "64 KiB"),
    (1 << 20, "1 MiB"),
    (16 << 20, "16 MiB"),
];

/// Async copies queued per burst before a synchronize.
pub const BURST: u64 = 64;

/// Two device buffers of `size` bytes on device 0 and a stream.
pub struct SimCopy {
    sim: Sim,
    s: RawStream,
    a: usize,
    b: usize,
    size: usize,
}

impl SimCopy {
    /// Opens the simulator on `ns` and allocates the buffers (filled, so their pages exist).
    pub fn new(ns: &str, size: usize) -> Result<SimCopy, String> {
        let sim = Sim::builder()
            .soc(Soc::Ascend910B)
            .devices(1)
            .namespace(ns)
            .device_memory(1 << 30)
            .open()
            .map_err(e2s)?;
        let a = sim.malloc(DEV, size, 0).map_err(e2s)?;
        let b = sim.malloc(DEV, size, 0).map_err(e2s)?;
        sim.memset(a, size, 1, size).map_err(e2s)?;
        sim.memset(b, size, 2, size).map_err(e2s)?;
        let s = sim.create_stream(DEV).map_err(e2s)?;
        Ok(SimCopy { sim, s, a, b, size })
    }

    /// One device-to-device copy of the whole buffer: synchronous, or queued on the stream.
    fn copy(&self, queued: bool) -> Result<(), String> {
        let (dst, src, n) = (self.b, self.a, self.size);
        let k = MemcpyKind::DeviceToDevice;
        // SAFETY: device to device, no host side.
        let r = unsafe {
            if queued {
                self.sim.memcpy_async(dst, n, src, n, k, self.s)
            } else {
                self.sim.memcpy(dst, n, src, n, k)
            }
        };
        r.map_err(e2s)
    }

    /// Runs at least `iters` copies, timed: synchronous ones one after the other, or queued
    /// ones in bursts of [`BURST`] each followed by a synchronize. Returns (copies, ns).
    fn timed(&mut self, iters: u64, queued: bool) -> Result<(u64, u64), String> {
        let (bursts, per_burst) = if queued {
            (iters.div_ceil(BURST).max(1), BURST)
        } else {
            (1, iters)
        };
        let t0 = now_ns();
        for _ in 0..bursts {
            for _ in 0..per_burst {
                self.copy(queued)?;
            }
            if queued {
                self.sim
                    .synchronize(self.s, SyncWait::AtMost(SYNC_LIMIT))
                    .map_err(e2s)?;
            }
        }
        Ok((bursts * per_burst, now_ns() - t0))
    }

    /// GB/s of `iters` synchronous device-to-device copies.
    pub fn sync(&mut self, iters: u64) -> Result<f64, String> {
        let (n, ns) = self.timed(iters, false)?;
        Ok(gbps(self.size, n, ns))
    }

    /// GB/s of `iters` asynchronous device-to-device copies, in bursts of [`BURST`] each
    /// followed by a synchronize (both timed).
    pub fn asynchronous(&mut self, iters: u64) -> Result<f64, String> {
        let (n, ns) = self.timed(iters, true)?;
        Ok(gbps(self.size, n, ns))
    }

    /// ns per asynchronous copy of `self.size` bytes, queued and run (bursts of [`BURST`],
    /// each followed by a synchronize; all timed).
    pub fn per_call(&mut self, iters: u64) -> Result<f64, String> {
        let (n, ns) = self.timed(iters, true)?;
        Ok(ns as f64 / n as f64)
    }
}

impl Drop for SimCopy {
    fn drop(&mut self) {
        let _ = self.sim.destroy_stream(self.s, StreamDestroy::Discard);
        let _ = self.sim.free(self.a);
        let _ = self.sim.free(self.b);
    }
}

fn gbps(size: usize, iters: u64, ns: u64) -> f64 {
    (size as f64 * iters as f64) / ns.max(1) as f64
}

/// The host's `memcpy` between two buffers of `size` bytes (the baseline).
pub struct HostCopy {
    a: Vec<u8>,
    b: Vec<u8>,
}

impl HostCopy {
    /// Two filled buffers.
    pub fn new(size: usize) -> HostCopy {
        HostCopy {
            a: vec![1; size],
            b: vec![2; size],
        }
    }

    /// GB/s of `iters` copies.
    pub fn run(&mut self, iters: u64) -> Result<f64, String> {
        let t0 = now_ns();
        for _ in 0..iters {
            self.b.copy_from_slice(&self.a);
            std::hint::black_box(&mut self.b);
        }
        Ok(gbps(self.a.len(), iters, now_ns() - t0))
    }
}

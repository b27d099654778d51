//! enq27 probe: per-enqueue cycle counts of the engine (no-op job) and the simulator's record
//! into a running stream, bursts of 256 as the bench's `enqueue` group; where the slow calls
//! fall (position in the burst, slot parity) and how often the worker caught up (spin hits).
use acl_notify_core::{
    CreateFlags, Error, HostOps, NotifyResources, Soc, StreamDestroy, StreamOps, SyncWait,
};
use acl_notify_sim::Sim;
use acl_notify_sim::stream::{Job, Stream, StreamConfig, TaskCtx};
use std::time::{Duration, Instant};

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

const BURST: usize = 256;
const LIM: SyncWait = SyncWait::AtMost(Duration::from_secs(30));

fn tsc() -> u64 {
    // SAFETY: `rdtsc` reads the time-stamp counter; no memory is touched, every x86_64 has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn report(name: &str, d: &[[u64; BURST]], ns_per_tick: f64, extra: String) {
    let bursts = d.len();
    let mut all: Vec<u64> = d.iter().flat_map(|b| b.iter().copied()).collect();
    all.sort_unstable();
    let med = all[all.len() / 2];
    let thr = med * 3;
    let total: u64 = all.iter().sum();
    let mut slow_n = 0u64;
    let mut slow_t = 0u64;
    let (mut par, mut part) = ([0u64; 2], [0u64; 2]);
    let mut pos = [0u64; 8]; // slow count by burst position /32
    for b in d {
        for (i, &x) in b.iter().enumerate() {
            if x > thr {
                slow_n += 1;
                slow_t += x - med;
                par[i % 2] += 1;
                part[i % 2] += x - med;
                pos[i / 32] += 1;
            }
        }
    }
    let f = |t: u64| t as f64 * ns_per_tick;
    println!(
        "{name}: mean {:.1} ns, median {:.1}, slow(>3x med) {:.1}/burst costing {:.1} ns/enqueue; even/odd slot slow {}/{} ({:.0}/{:.0} ns each); by 32-pos {:?}; {extra}",
        f(total) / all.len() as f64,
        f(med),
        slow_n as f64 / bursts as f64,
        f(slow_t) / all.len() as f64,
        par[0],
        par[1],
        f(part[0]) / par[0].max(1) as f64,
        f(part[1]) / par[1].max(1) as f64,
        pos.map(|p| p / bursts as u64)
    );
}

fn main() {
    let t0 = Instant::now();
    let c0 = tsc();
    std::thread::sleep(Duration::from_millis(50));
    let ns_per_tick = t0.elapsed().as_nanos() as f64 / (tsc() - c0) as f64;
    let bursts: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);

    let whole = std::env::var("ENQ27_WHOLE").is_ok();
    let ns = format!("enq27-probe{}", std::process::id());
    let sim = Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(2)
        .namespace(&ns)
        .open()
        .unwrap();
    let st = sim.create_stream(0).unwrap();
    let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
    let s: Stream<Error, Nop> = Stream::spawn(StreamConfig::new("enq27-eng")).unwrap();
    for _rep in 0..2 {
        let mut d = vec![[0u64; BURST]; bursts];
        let st0 = s.stats();
        let b0 = acl_notify_sim::enq27_batches();
        for b in d.iter_mut() {
            s.synchronize(LIM).unwrap();
            if whole {
                let t = tsc();
                for _ in 0..BURST {
                    s.enqueue_job(Nop).unwrap();
                }
                let dt = tsc() - t;
                b.fill(dt / BURST as u64);
            } else {
                for x in b.iter_mut() {
                    let t = tsc();
                    s.enqueue_job(Nop).unwrap();
                    *x = tsc() - t;
                }
            }
        }
        s.synchronize(LIM).unwrap();
        let st1 = s.stats();
        let b1 = acl_notify_sim::enq27_batches();
        report(
            "engine",
            &d,
            ns_per_tick,
            format!(
                "spin_hits/burst {:.1} sleeps/burst {:.2} batches/burst {:.1} (short {:.1}) tasks/batch {:.2}",
                (st1.spin_hits - st0.spin_hits) as f64 / bursts as f64,
                (st1.sleeps - st0.sleeps) as f64 / bursts as f64,
                (b1[0] - b0[0]) as f64 / bursts as f64,
                (b1[2] - b0[2]) as f64 / bursts as f64,
                (b1[1] - b0[1]) as f64 / (b1[0] - b0[0]).max(1) as f64
            ),
        );
        let b0 = acl_notify_sim::enq27_batches();
        for b in d.iter_mut() {
            sim.synchronize(st, LIM).unwrap();
            if whole {
                let t = tsc();
                for _ in 0..BURST {
                    sim.record(n, st).unwrap();
                }
                let dt = tsc() - t;
                b.fill(dt / BURST as u64);
            } else {
                for x in b.iter_mut() {
                    let t = tsc();
                    sim.record(n, st).unwrap();
                    *x = tsc() - t;
                }
            }
        }
        sim.synchronize(st, LIM).unwrap();
        let _ = sim.try_consume(n);
        let b1 = acl_notify_sim::enq27_batches();
        report(
            "record",
            &d,
            ns_per_tick,
            format!(
                "batches/burst {:.1} (short {:.1}) tasks/batch {:.2}",
                (b1[0] - b0[0]) as f64 / bursts as f64,
                (b1[2] - b0[2]) as f64 / bursts as f64,
                (b1[1] - b0[1]) as f64 / (b1[0] - b0[0]).max(1) as f64
            ),
        );
    }
    drop(s);
    let _ = sim.destroy_stream(st, StreamDestroy::Discard);
    let _ = sim.destroy_notify(n);
}

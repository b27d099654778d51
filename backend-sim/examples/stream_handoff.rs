//! Micro-benchmark: enqueue→execution latency of an empty task on a stream, against a raw
//! futex wake between two threads (the OS floor for waking a sleeping thread).
//!
//! Run: `cargo run --release -p acl-notify-sim --example stream_handoff [samples]`.
//!
//! Each sample: wait `gap` after the previous task finished, take `t0`, enqueue a task that
//! takes `t1`; the figure is `t1 - t0`. With gap 0 the next task arrives while the worker is
//! still spinning (no syscall); with gaps beyond the spin budget the worker is parked and the
//! enqueue pays a futex wake, which is what the raw futex baseline measures.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use acl_notify_core::{Error, StreamDestroy, SyncWait};
use acl_notify_sim::stream::{DEFAULT_SPIN, Stream, StreamConfig};

const STOP: u32 = u32::MAX;
const BOUND: Duration = Duration::from_secs(5);

/// Waits `gap`: busy for short gaps (sleep overshoots by tens of µs), sleeping for long ones.
fn pause(gap: Duration) {
    if gap >= Duration::from_micros(500) {
        thread::sleep(gap);
    } else {
        let end = Instant::now() + gap;
        while Instant::now() < end {
            std::hint::spin_loop();
        }
    }
}

fn ns(base: Instant) -> u64 {
    base.elapsed().as_nanos() as u64
}

/// How the benchmark thread waits for the task it enqueued.
#[derive(Clone, Copy, Debug)]
enum Wait {
    /// `Stream::synchronize` (spins briefly, then sleeps on a condition variable).
    Synchronize,
    /// Polls the task's timestamp with `sched_yield`, exactly as the futex baseline waits.
    Poll,
}

/// A stream plus the slot its benchmark task writes its start time into.
struct StreamBench {
    stream: Stream<Error>,
    base: Instant,
    ran_at: Arc<AtomicU64>,
}

impl StreamBench {
    fn new(spin: Duration) -> Self {
        let stream: Stream<Error> =
            Stream::spawn(StreamConfig::new("bench-stream").spin(spin)).expect("stream");
        // Warm up: make the stream "recently active".
        for _ in 0..100 {
            stream.enqueue(|_| Ok(())).expect("enqueue");
        }
        stream
            .synchronize(SyncWait::AtMost(BOUND))
            .expect("warm-up");
        StreamBench {
            stream,
            base: Instant::now(),
            ran_at: Arc::new(AtomicU64::new(0)),
        }
    }

    /// One enqueue→task-start latency (ns), `gap` after the previous task finished; the
    /// caller then waits for the task as `how` says.
    fn sample(&self, gap: Duration, how: Wait) -> u64 {
        pause(gap);
        let (r, base) = (Arc::clone(&self.ran_at), self.base);
        self.ran_at.store(0, Ordering::Relaxed);
        let t0 = ns(base);
        self.stream
            .enqueue(move |_| {
                r.store(ns(base), Ordering::Release);
                Ok(())
            })
            .expect("enqueue");
        match how {
            Wait::Synchronize => self
                .stream
                .synchronize(SyncWait::AtMost(BOUND))
                .expect("task ran within the bound"),
            Wait::Poll => {
                let deadline = Instant::now() + BOUND;
                while self.ran_at.load(Ordering::Acquire) == 0 {
                    assert!(Instant::now() < deadline, "task did not run");
                    thread::yield_now();
                }
                // Let the worker retire it, so the next sample starts from an idle stream.
                self.stream
                    .synchronize(SyncWait::AtMost(BOUND))
                    .expect("task ran within the bound");
            }
        }
        self.ran_at.load(Ordering::Acquire).saturating_sub(t0)
    }
}

fn futex_wait(word: &AtomicU32, expected: u32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic for the duration of the call; a private
    // FUTEX_WAIT with no timeout only reads it and may return spuriously (callers loop).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: `word` is a live, aligned 32-bit atomic; FUTEX_WAKE only uses its address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1,
        );
    }
}

/// A thread asleep in FUTEX_WAIT on `word`, recording when it wakes to a new value.
struct FutexBench {
    word: Arc<AtomicU32>,
    seen: Arc<AtomicU32>,
    seen_at: Arc<AtomicU64>,
    base: Instant,
    next: u32,
    waiter: Option<thread::JoinHandle<()>>,
}

impl FutexBench {
    fn new() -> Self {
        let word = Arc::new(AtomicU32::new(0));
        let seen = Arc::new(AtomicU32::new(0));
        let seen_at = Arc::new(AtomicU64::new(0));
        let base = Instant::now();
        let (w, s, sa) = (Arc::clone(&word), Arc::clone(&seen), Arc::clone(&seen_at));
        let waiter = thread::spawn(move || {
            let mut last = 0;
            loop {
                let v = w.load(Ordering::Acquire);
                if v == STOP {
                    return;
                }
                if v != last {
                    sa.store(ns(base), Ordering::Relaxed);
                    s.store(v, Ordering::Release);
                    last = v;
                    continue;
                }
                futex_wait(&w, v);
            }
        });
        FutexBench {
            word,
            seen,
            seen_at,
            base,
            next: 1,
            waiter: Some(waiter),
        }
    }

    /// One wake-call→waiter-running latency (ns), `gap` after the waiter went back to sleep.
    fn sample(&mut self, gap: Duration) -> u64 {
        let i = self.next;
        self.next += 1;
        pause(gap);
        let t0 = ns(self.base);
        self.word.store(i, Ordering::Release);
        futex_wake(&self.word);
        let deadline = Instant::now() + BOUND;
        while self.seen.load(Ordering::Acquire) != i {
            assert!(Instant::now() < deadline, "futex waiter did not wake");
            thread::yield_now();
        }
        self.seen_at.load(Ordering::Relaxed).saturating_sub(t0)
    }
}

impl Drop for FutexBench {
    fn drop(&mut self) {
        self.word.store(STOP, Ordering::Release);
        futex_wake(&self.word);
        if let Some(w) = self.waiter.take() {
            let _ = w.join();
        }
    }
}

fn report(label: &str, mut lat: Vec<u64>, extra: &str) {
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize] as f64 / 1000.0;
    println!(
        "{label:<46} median {:>7.2} µs   p90 {:>7.2} µs   p99 {:>8.2} µs  (n={}){extra}",
        q(0.5),
        q(0.9),
        q(0.99),
        lat.len()
    );
}

fn main() {
    let samples: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().unwrap_or_else(|_| {
            eprintln!("usage: stream_handoff [samples]");
            std::process::exit(2)
        }),
        None => 2000,
    };
    let cores = thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "enqueue → task start (empty task) vs raw futex wake; {samples} samples per row, \
         rows of one gap interleaved sample by sample; {cores} CPUs; spin budget {DEFAULT_SPIN:?}"
    );
    let stream = StreamBench::new(DEFAULT_SPIN);
    let mut futex = FutexBench::new();

    // Back-to-back: the next task arrives while the worker still spins.
    let w0 = stream.stream.stats().wakeups;
    let lat: Vec<u64> = (0..samples)
        .map(|_| stream.sample(Duration::ZERO, Wait::Synchronize))
        .collect();
    let w = stream.stream.stats().wakeups - w0;
    report(
        "stream, back-to-back (worker spinning)",
        lat,
        &format!("  wakes={w}"),
    );

    for (gap, name) in [
        (Duration::from_micros(200), "200 µs"),
        (Duration::from_millis(1), "1 ms"),
    ] {
        let w0 = stream.stream.stats().wakeups;
        let (mut s_sync, mut s_poll, mut f_lat) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..samples {
            s_sync.push(stream.sample(gap, Wait::Synchronize));
            s_poll.push(stream.sample(gap, Wait::Poll));
            f_lat.push(futex.sample(gap));
        }
        let w = stream.stream.stats().wakeups - w0;
        report(
            &format!("stream, {name} idle, caller synchronizes"),
            s_sync,
            "",
        );
        report(
            &format!("stream, {name} idle, caller polls"),
            s_poll,
            &format!("  wakes={w}"),
        );
        report(&format!("raw futex wake, {name} idle"), f_lat, "");
    }
    stream
        .stream
        .destroy(StreamDestroy::Drain)
        .expect("destroy");
}

//! Adaptive placement of stream workers ([`StreamCpus::Adaptive`](crate::StreamCpus), the
//! default): a worker whose waits keep finding their CPU taken moves itself to another CPU,
//! now and then, and is otherwise left to the kernel.
//!
//! Why: on KVM guests (this project's 2-vCPU machine among them) the kernel wakes a thread on
//! the CPU of the thread that woke it, and two stream workers that hand records to each other
//! end up on one CPU while the other is idle or busy with something that could move. There
//! they take turns through `sched_yield`: every hand-off is a context switch, 5–6 µs a round
//! trip each way instead of about 0.2 µs (a two-stream round trip measured 10–24 µs
//! kernel-placed against 0.2 µs with one worker per CPU, and the kernel's load balancer did not
//! part them within a whole 80 ms sample). Pinning each worker to a CPU of its own
//! (`StreamCpus::Spread`) fixes that pair but is wrong as a default: a pinned worker cannot
//! leave a CPU that something else keeps busy, and sixteen processes' workers pinned in turn
//! cannot be balanced at all.
//!
//! So a worker is pinned for a moment only. The signal builds on the one the spin budget
//! reads ([`crate::spin`]): a spinning wait's `sched_yield` that did not return at once ran
//! another thread on this CPU — and if the wait then finds its record without having slept,
//! that thread was most likely the recorder, sharing this CPU with the worker that waits for
//! it. (A yield lost to some other thread — the host enqueuing its next chunk on this CPU —
//! leaves the wait without its record, and it sleeps: that does not count. Moving away from
//! the host would put the worker on the CPU of the stream it hands records to.) A worker
//! whose waits are crowded so [`STREAK`] times within [`WINDOW`] (a few round trips of the
//! shared-CPU mode; a one-off preemption does not qualify) asks the kernel to run it on
//! another CPU it may use (`sched_setaffinity` to that CPU, which migrates it there before it
//! returns) and at once gives its affinity back, so the kernel is free to place it from then
//! on. Two workers that keep handing records to each other without sleeping then stay apart
//! until a sleep and a wake-up put them together again (a host feeding them in chunks does
//! that now and then), and the worker moves again — at most every [`GAP`]. A move after which
//! the worker's waits were crowded again at once (`CLEAN_RUN` waits did not find their record
//! while spinning on a CPU of their own in between) did not help — more busy threads than CPUs, where moving cannot help — and the gap doubles,
//! up to about 100 ms; a move that helped resets it. Moving costs two system calls and a
//! migration, a few microseconds.
//!
//! The thread that feeds a stream is moved too, once in a while, the same way: a host thread
//! that keeps queuing host functions from another CPU than the one their worker runs them on,
//! while no CPU is free, moves to the worker's CPU, where their wake-ups find it from then on
//! ([`beside_worker`]). Bulk tasks move a worker *away* from its enqueuer
//! ([`beside_enqueuer`]): they keep a CPU busy, a host function's wake-up is short.
//!
//! Workers placed on CPUs ([`StreamCpus::Spread`](crate::StreamCpus) or a list, which pin
//! with [`pin_current_thread`]) and `ACL_NOTIFY_SIM_STREAM_CPUS=off` never move.

use std::cell::Cell;
use std::time::Duration;

/// Crowded waits, within [`WINDOW`], that make a worker move.
pub(crate) const STREAK: u32 = 4;
/// The window of a streak.
pub(crate) const WINDOW: Duration = Duration::from_millis(1);
/// The shortest time between two moves of one worker.
pub(crate) const GAP: Duration = Duration::from_micros(200);
/// The gap doubles, up to `GAP << MAX_BACKOFF` (about 100 ms), with every move after which
/// fewer than [`CLEAN_RUN`] waits found their record spinning, uncrowded.
const MAX_BACKOFF: u32 = 9;
/// Waits after a move that found their record while spinning on a CPU of their own: enough
/// of them show the move helped.
const CLEAN_RUN: u32 = 8;
/// A bulk task that found no idle CPU asks again after `GAP << n` for the `n`-th "no" in a
/// row, `n` at most this (3.2 ms).
const MAX_BUSY_BACKOFF: u32 = 4;
/// Host functions a host thread queues in a row from another CPU than the one their worker
/// runs them on, while no CPU is free, that move the host thread there ([`beside_worker`]).
pub(crate) const JOIN_STREAK: u32 = 2;

/// Restricts the calling thread to `cpu` (what a placed worker does first).
pub fn pin_current_thread(cpu: usize) -> std::io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `cpu_set_t` is plain data for which all-zero is the empty set; `CPU_SET` writes
    // bit `cpu` < CPU_SETSIZE (checked above); `sched_setaffinity(0, …)` only reads the set.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The CPUs the calling thread may run on, in ascending order (empty if the kernel does not
/// say).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: all-zero is the empty set; `sched_getaffinity(0, …)` writes at most
    // `size_of::<cpu_set_t>()` bytes into it; `CPU_ISSET` reads bits below CPU_SETSIZE.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// One worker's record of how crowded its CPU has been.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Crowding {
    /// Crowded waits in the current streak, and when the streak began (ns).
    streak: u32,
    streak_start: u64,
    /// When the worker last moved (0: never), and the current backoff.
    last_move: u64,
    backoff: u32,
    /// Waits that went by without crowding since the last move, and bulk tasks that ran on
    /// another CPU than their enqueuer's.
    clean: u32,
    /// When a bulk task last found no idle CPU to move to (0: not since the last move), and
    /// how many times in a row (see [`Crowding::shared_with_enqueuer`]).
    busy_at: u64,
    busy: u32,
    /// A bulk task decided to move the worker; the next one beside its enqueuer does (see
    /// [`beside_enqueuer`]).
    move_pending: bool,
}

impl Crowding {
    /// A wait found its record after giving the CPU away, at `now` (ns, monotonic): whether
    /// to move now.
    pub(crate) fn lost_yield(&mut self, now: u64) -> bool {
        let window = WINDOW.as_nanos() as u64;
        if self.streak == 0 || now.saturating_sub(self.streak_start) > window {
            self.streak = 1;
            self.streak_start = now;
            return STREAK <= 1 && self.may_move(now);
        }
        self.streak += 1;
        self.streak >= STREAK && self.may_move(now)
    }

    /// A bulk task (a copy) found the worker on the CPU its enqueuer was on when it queued
    /// it, at `now`: whether to move now. One such task is enough (see
    /// [`beside_enqueuer`]); the gap and its backoff bound how often, and a move is made
    /// only if `idle()` says another CPU had time to spare — else the worker would trade
    /// its host for a busier neighbour (measured with a busy loop on the other CPU: 0.04–0.93×
    /// of `memcpy` at 64 KiB with the move, 0.27–0.88× without).
    ///
    /// A "no" from `idle()` (a file read, see [`idle_elsewhere`]) is asked again only after
    /// [`GAP`], doubling with every "no" in a row up to [`MAX_BUSY_BACKOFF`] (3.2 ms), and
    /// does not count as a move that did not help. When it did (and `idle()` read the
    /// kernel's count of runnable threads, which under EEVDF also counts sleeping threads
    /// whose dequeue is delayed: on this project's VM, with nothing running but the reader,
    /// 2,000 reads in a row said 1 about half the time and 3 for most of the rest), the gap
    /// reached its 100 ms cap after a few reads, and a copy stream's worker woken beside its
    /// host (the kernel wakes it there, see the module docs) stayed there for whole 80 ms
    /// bench samples: bursts of 64 async copies of 64 KiB took 50–53 µs instead of 34–36 µs
    /// (a probe: 8 samples of 40 bursts, the worker parked between samples).
    pub(crate) fn shared_with_enqueuer(&mut self, now: u64, idle: impl FnOnce() -> bool) -> bool {
        let gap = GAP.as_nanos() as u64;
        if self.last_move != 0 && now.saturating_sub(self.last_move) < gap << self.backoff {
            return false;
        }
        if self.busy != 0 && now.saturating_sub(self.busy_at) < gap << self.busy {
            return false;
        }
        if !idle() {
            self.busy = (self.busy + 1).min(MAX_BUSY_BACKOFF);
            self.busy_at = now;
            return false;
        }
        self.busy = 0;
        self.may_move(now)
    }

    /// A bulk task ran on another CPU than its enqueuer's: the worker is apart from its host,
    /// which a move made after a wake-up put it beside that host is meant to achieve (counted
    /// as an uncrowded wait: without it a stream of copies, which never waits, made every
    /// move look useless, and the gap grew to its cap).
    pub(crate) fn apart(&mut self) {
        if self.clean < CLEAN_RUN {
            self.clean += 1;
        }
    }

    /// A wait went by without crowding.
    pub(crate) fn clean_wait(&mut self) {
        self.clean = self.clean.saturating_add(1);
    }

    /// A streak is complete: moves unless the last move was too recent.
    fn may_move(&mut self, now: u64) -> bool {
        let gap = (GAP.as_nanos() as u64) << self.backoff;
        if self.last_move != 0 && now.saturating_sub(self.last_move) < gap {
            return false;
        }
        // The last move helped if the worker then ran a while uncrowded (the kernel put it
        // back beside its peer later, on some wake-up): move again as soon as the gap allows.
        // If the crowding came right back, moving does not help (more busy threads than
        // CPUs): wait ever longer.
        self.backoff = if self.last_move == 0 || self.clean >= CLEAN_RUN {
            0
        } else {
            (self.backoff + 1).min(MAX_BACKOFF)
        };
        self.streak = 0;
        self.clean = 0;
        self.last_move = now;
        true
    }
}

/// A host thread's record of where it queues host functions from, against the CPU their
/// worker runs them on ([`beside_worker`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Joining {
    /// Host functions queued in a row from another CPU than their worker's.
    away: u32,
    /// Host functions queued from their worker's CPU since the last move.
    beside: u32,
    /// When the thread last moved (ns; 0: never), and the current backoff.
    last_move: u64,
    backoff: u32,
}

impl Joining {
    /// A host function is queued, from the CPU its worker runs host functions on
    /// (`beside`) or from another: whether to move to the worker's CPU now (`now` gives the
    /// time, read only when a move is due). The gap and its backoff are the crowded
    /// worker's: a move after which the thread did not queue [`CLEAN_RUN`] host functions
    /// beside the worker did not help, and the gap doubles, up to about 100 ms.
    pub(crate) fn queued(&mut self, beside: bool, now: impl FnOnce() -> u64) -> bool {
        if beside {
            self.beside = self.beside.saturating_add(1);
            self.away = 0;
            return false;
        }
        self.away = self.away.saturating_add(1);
        if self.away < JOIN_STREAK {
            return false;
        }
        let now = now();
        let gap = (GAP.as_nanos() as u64) << self.backoff;
        if self.last_move != 0 && now.saturating_sub(self.last_move) < gap {
            return false;
        }
        self.backoff = if self.last_move == 0 || self.beside >= CLEAN_RUN {
            0
        } else {
            (self.backoff + 1).min(MAX_BACKOFF)
        };
        self.away = 0;
        self.beside = 0;
        self.last_move = now;
        true
    }
}

thread_local! {
    /// `None`: this thread does not move (not a worker with adaptive placement).
    static CROWDING: Cell<Option<Crowding>> = const { Cell::new(None) };
}

thread_local! {
    /// Where a host thread queues host functions from ([`beside_worker`]).
    static JOINING: Cell<Joining> = const {
        Cell::new(Joining {
            away: 0,
            beside: 0,
            last_move: 0,
            backoff: 0,
        })
    };
}

/// Lets the calling thread (a stream worker the kernel places) move when crowded.
pub(crate) fn enable_on_this_thread() {
    CROWDING.with(|c| c.set(Some(Crowding::default())));
}

/// Called by a stream wait that had to wait and found its record while spinning, without
/// giving its CPU away (see [`crowded`]).
pub(crate) fn clean_wait() {
    CROWDING.with(|cell| {
        if let Some(mut c) = cell.get() {
            c.clean_wait();
            cell.set(Some(c));
        }
    });
}

/// Called by a wait that gave its CPU to another thread in a `sched_yield` and then found its
/// record without sleeping: moves the calling worker to another CPU if that keeps happening
/// (see the module docs). Does nothing on a thread that did not [`enable_on_this_thread`].
pub(crate) fn crowded() {
    let Some(mut c) = CROWDING.with(Cell::get) else {
        return;
    };
    let go = c.lost_yield(crate::sys::now_ns());
    CROWDING.with(|cell| cell.set(Some(c)));
    if go {
        let _ = move_to_another_cpu();
    }
}

/// Called by a host function (`aclrtLaunchHostFunc`) as it starts on its worker: what to note
/// for the thread that queues the stream's host functions ([`beside_worker`]) — the CPU the
/// worker runs it on if `no_cpu_free()` (the namespace's busy stream workers are at least the
/// CPUs this process may use: `shm::busy`), `u32::MAX` (nothing to join) otherwise. `None`
/// on a worker placed on CPUs or left to the kernel (not [`enable_on_this_thread`]), which
/// notes nothing: where the user placed the workers, their host threads stay where the
/// kernel puts them.
pub(crate) fn host_function(no_cpu_free: impl FnOnce() -> bool) -> Option<u32> {
    CROWDING.with(Cell::get)?;
    Some(if no_cpu_free() {
        current_cpu()
    } else {
        u32::MAX
    })
}

/// Called by a thread that queues a host function, with the CPU the stream's worker ran its
/// last one on while no CPU was free ([`host_function`]; `u32::MAX`: none such, and nothing
/// happens). A thread that queues [`JOIN_STREAK`] of them in a row from another CPU moves to
/// the worker's (`sched_setaffinity` to that CPU, then at once back to every CPU it may use,
/// as a crowded worker's move does; the same gap and backoff). Stream workers themselves
/// never move this way (an adaptive one returns at once; the caller does not call this from
/// inside a host function). Otherwise one [`current_cpu`].
///
/// Why (bench/README.md History, wake24 and xproc25): a host function that wakes its host
/// thread (how a host keeps a running stream fed: it queues a chunk, sleeps until the
/// chunk's host function wakes it, and queues the next) wakes it on the host's previous
/// CPU. With two processes each feeding a stream on two CPUs, the first wake-ups decide for
/// a whole run whether each host sits beside its own worker or beside the *other*
/// process's ("crossed"): crossed, each host arrives by a remote wake-up, takes that worker's
/// CPU at a yield of its spinning wait for 7–21 µs, and the wait sleeps; the round trip
/// read 550–900 ns against 380–430 ns with each host beside its own worker (where the host
/// takes the CPU inside the host function that woke it, at the chunk's end its own worker
/// chose). Moved beside its worker once, the host is woken there from then on (the waker's
/// CPU is its previous one). Only while no CPU is free: with a CPU to spare the kernel's own
/// choice (the host alone on a CPU) is the better one.
pub(crate) fn beside_worker(worker_cpu: u32) {
    if worker_cpu == u32::MAX || CROWDING.with(Cell::get).is_some() {
        return;
    }
    let beside = current_cpu() == worker_cpu;
    let go = JOINING.with(|j| {
        let mut s = j.get();
        let go = s.queued(beside, crate::sys::now_ns);
        j.set(s);
        go
    });
    if go {
        let _ = move_to_cpu(worker_cpu as usize);
    }
}

/// The CPU the calling thread runs on (`u32::MAX` if the kernel does not say): what an
/// enqueuer of a bulk task notes in it for [`beside_enqueuer`]. No system call: glibc reads
/// it from the thread's `rseq` area or the vDSO (4 ns a call here).
pub(crate) fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu(3) has no preconditions.
    u32::try_from(unsafe { libc::sched_getcpu() }).unwrap_or(u32::MAX)
}

/// Called by a bulk task — a copy or a set of device memory, which keeps a CPU busy for as
/// long as it runs — as it starts on the worker, with the CPU its enqueuer was on
/// ([`current_cpu`] when it was queued). A worker that runs it on that same CPU moves to
/// another one (see the module docs for how; at most once a [`GAP`], less often while moves
/// do not help). Does nothing on a thread that did not [`enable_on_this_thread`]; on another
/// CPU than the enqueuer's it costs one [`current_cpu`].
///
/// Why: the kernel wakes a parked worker on the CPU of the thread that woke it (see the
/// module docs), and a host thread that queues a burst of copies and synchronizes then
/// shares that CPU with the worker that runs them: it queues while the worker waits for the
/// CPU, and the worker copies while the host sleeps in `synchronize`, which wakes it on that
/// CPU again — the pair stays together while the other CPU idles, and the burst takes the
/// time of the queuing plus the copies instead of the longer of the two. Measured on this
/// project's 2-vCPU machine (bursts of 64 copies of 64 KiB and a synchronize): 52–58 µs a
/// burst with the pair on one CPU, 45 µs apart; which of the two a run got was down to
/// chance at its first wake-up. Records and waits do not move their worker this way: for
/// them the host's CPU is often the better of two busy ones (the module docs).
///
/// The task that decides to move does not move: the next bulk task found beside its
/// enqueuer does, once the worker has counted the first one as finished. The host then
/// sits in `synchronize`, spinning, and gave the CPU to the worker in a `sched_yield`; a
/// yield that returns late shows the spin that another thread wants its CPU, and it keeps
/// spinning only if a task finished meanwhile. With the move in the deciding task (a
/// `/proc` read or two and the migration, 10–40 µs) none had: the host went to sleep, and
/// the worker's wake-up at the end of the burst put it on the worker's new CPU — together
/// again (a probe: 12–15 of every 40 bursts so, 52 µs a burst; see also
/// `stream::sync_spin::SYNC_MIN_WINDOW`). `moving` is called just before a move (the task
/// tells its stream, [`crate::stream::TaskCtx::note_moved`]: the migration to an idle vCPU
/// takes 20–35 µs, which the host's synchronize is to wait through spinning).
pub(crate) fn beside_enqueuer(enqueuer_cpu: u32, moving: impl FnOnce()) {
    let Some(mut c) = CROWDING.with(Cell::get) else {
        return;
    };
    if current_cpu() != enqueuer_cpu {
        if c.clean < CLEAN_RUN || c.move_pending {
            c.move_pending = false;
            c.apart();
            CROWDING.with(|cell| cell.set(Some(c)));
        }
        return;
    }
    if c.move_pending {
        // Decided by the task before, which has been counted as finished since.
        c.move_pending = false;
        CROWDING.with(|cell| cell.set(Some(c)));
        moving();
        let _ = move_to_another_cpu();
        return;
    }
    let now = crate::sys::now_ns();
    c.move_pending = c.shared_with_enqueuer(now, || {
        // The window first: asked again after 200 µs, the question is mostly too early,
        // and then costs neither the CPU list nor the read of `/proc/stat`.
        idle_look_due(now) && {
            let cpus = allowed_cpus();
            cpus.len() >= 2 && idle_elsewhere(now, &cpus)
        }
    });
    CROWDING.with(|cell| cell.set(Some(c)));
}

/// Involuntary context switches of the runner's thread within one of its ticks (about 1 ms,
/// [`runner_tick`]) that show another thread keeps taking its CPU.
pub(crate) const RUNNER_PREEMPTED: u64 = 4;

/// The longest gap between two of the runner's ticks that still counts as one tick (a thread
/// that stopped being the runner and became it again starts afresh).
const RUNNER_TICK_MAX: Duration = Duration::from_millis(4);

impl Crowding {
    /// One of the runner's ticks at `now`: its thread lost its CPU `preempted` times since
    /// the tick before, and the other CPUs had time to spare over the last look (`idle`).
    /// Whether to move now (gap and backoff as for a bulk task beside its enqueuer).
    pub(crate) fn runner_tick(&mut self, now: u64, preempted: u64, idle: bool) -> bool {
        if preempted < RUNNER_PREEMPTED {
            self.apart();
            return false;
        }
        self.shared_with_enqueuer(now, || idle)
    }
}

thread_local! {
    /// The runner's last tick on this thread: when (ns), its involuntary context switches
    /// then, and whether the other CPUs had time to spare over the last look.
    static RUNNER_LOOK: Cell<(u64, u64, bool)> = const { Cell::new((0, 0, false)) };
}

/// The calling thread's involuntary context switches so far (`getrusage`, a system call).
fn involuntary_switches() -> Option<u64> {
    // SAFETY: all-zero is a valid `rusage`; `getrusage` only writes it.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) } != 0 {
        return None;
    }
    u64::try_from(u.ru_nivcsw).ok()
}

/// Called by the process's runner (`crate::stream::runner`) about once a millisecond while it
/// runs parked streams: moves its thread to another CPU when another thread keeps taking
/// its CPU ([`RUNNER_PREEMPTED`] involuntary switches within a tick) while another CPU had
/// time to spare (read from `/proc/stat`, about 15 µs, at most every [`IDLE_WINDOW`] on
/// ticks that lost the CPU at all, and otherwise every [`IDLE_BASELINE`]). Does nothing on a
/// thread that did not [`enable_on_this_thread`]; otherwise costs a `getrusage` a tick.
///
/// Why: the runner runs every parked stream's records and waits on one thread and hardly
/// ever sleeps, while the host thread that feeds those streams sleeps whenever a queue is
/// full and is woken by the runner — and the kernel wakes it on the runner's CPU (see the
/// module docs). Once there, the two stay together (each wake-up puts the host back beside
/// the runner) while the other CPU idles: the host preempts the runner at every wake-up.
/// Measured in the 4-stream pipeline bench (per-thread `/proc/self/task/*/sched`, 11 samples
/// of 100,000 items): samples with the runner alone on its CPU ran 2.3–2.4 M items/s with
/// 0–14 involuntary switches of the runner a sample; samples with the host on the runner's
/// CPU 1.5–1.7 M, the runner preempted 300–1,450 times (as often as the host slept) and
/// the other CPU idle. Workers that only wait are moved by [`crowded`], not this.
pub(crate) fn runner_tick() {
    let Some(mut c) = CROWDING.with(Cell::get) else {
        return;
    };
    let Some(n) = involuntary_switches() else {
        return;
    };
    let now = crate::sys::now_ns();
    let (then, before, mut idle) = RUNNER_LOOK.with(Cell::get);
    let tick = then != 0 && now.saturating_sub(then) <= RUNNER_TICK_MAX.as_nanos() as u64;
    let preempted = if tick { n.saturating_sub(before) } else { 0 };
    // `/proc/stat` only when the answer may count: on a tick that lost its CPU at all (at
    // most every [`IDLE_WINDOW`], as before), so that a tick preempted often, which the
    // answer is for, finds a look of the last window or two to judge against; and, with no
    // preemption, every [`IDLE_BASELINE`] for a baseline.
    if idle_look_due(now) && (preempted > 0 || idle_look_older_than(now, IDLE_BASELINE)) {
        let cpus = allowed_cpus();
        idle = cpus.len() >= 2 && idle_elsewhere(now, &cpus);
    }
    RUNNER_LOOK.with(|l| l.set((now, n, idle)));
    if !tick {
        return;
    }
    let go = c.runner_tick(now, preempted, idle);
    CROWDING.with(|cell| cell.set(Some(c)));
    if go {
        let _ = move_to_another_cpu();
    }
}

/// Whether [`idle_elsewhere`] would read the CPUs' idle time at `now`: this thread has no
/// look yet, or its last one is at least [`IDLE_WINDOW`] old (else it answers no at once).
fn idle_look_due(now: u64) -> bool {
    idle_look_older_than(now, IDLE_WINDOW)
}

/// Whether this thread has no look at the CPUs' idle time yet, or its last one is at least
/// `age` old at `now`.
fn idle_look_older_than(now: u64, age: Duration) -> bool {
    LAST_IDLE
        .with(Cell::get)
        .is_none_or(|l| now.saturating_sub(l.at) >= age.as_nanos() as u64)
}

/// How old the runner lets its last look at the CPUs' idle time grow while it is not
/// preempted at all ([`runner_tick`]): the baseline a preempted tick judges against, over at
/// most this window (then over [`IDLE_WINDOW`]s while it is preempted). Four reads a second
/// instead of one every [`IDLE_WINDOW`].
const IDLE_BASELINE: Duration = Duration::from_millis(250);

/// The shortest window over which [`idle_elsewhere`] judges the other CPUs' idle time
/// (`/proc/stat` counts it in ticks of 10 ms).
const IDLE_WINDOW: Duration = Duration::from_millis(20);

/// CPUs whose idle time a look keeps one by one, by CPU number (0 to 63); the CPUs numbered
/// from here on that the thread may use are kept as one sum (see [`IdleLook`]).
const LOOK_CPUS: usize = 64;

/// The CPUs' idle time at a moment (see [`idle_elsewhere`]). Of fixed size, without heap
/// memory: a thread's last look lives in a thread-local, and a look that owned heap memory
/// (the `Vec` of one entry per CPU this was until 2026-12-07) leaked it whenever its thread's
/// thread-local outlived the thread for the C library: in the child of a `fork` (only the
/// forking thread goes on; the others' thread-locals stay in the child's copy of memory,
/// unreachable) and where the thread's stack is reused without its destructors having run.
/// Memcheck counted 32 bytes "definitely lost" in `tests/c/managed.c`'s forked child at a load
/// of about 10, when the workers had been preempted and looked; now there is nothing to lose.
#[derive(Clone, Copy)]
struct IdleLook {
    /// When (ns).
    at: u64,
    /// Idle plus I/O-wait ticks of CPUs `0..LOOK_CPUS`, by CPU number (0 for a CPU the kernel
    /// did not list).
    ticks: [u64; LOOK_CPUS],
    /// The same summed over the CPUs numbered `LOOK_CPUS` and up that the thread may use.
    rest: u64,
    /// How many CPUs `/proc/stat` listed (one line each).
    listed: usize,
}

impl IdleLook {
    /// The ticks the CPUs in `cpus` other than `here` were idle between `before` and this
    /// look. On a CPU numbered `LOOK_CPUS` or more, `here`'s own ticks count too (they are
    /// one sum with the others there): a thread running on it keeps them few.
    fn idle_since(&self, before: &IdleLook, cpus: &[usize], here: usize) -> u64 {
        let by_cpu: u64 = cpus
            .iter()
            .filter(|&&c| c != here && c < LOOK_CPUS)
            .map(|&c| self.ticks[c].saturating_sub(before.ticks[c]))
            .sum();
        by_cpu + self.rest.saturating_sub(before.rest)
    }
}

thread_local! {
    /// The calling thread's last look at the CPUs' idle time (see [`idle_elsewhere`]). Plain
    /// data without a destructor (see [`IdleLook`]).
    static LAST_IDLE: Cell<Option<IdleLook>> = const { Cell::new(None) };
}

/// Whether the CPUs in `cpus` other than the calling thread's were idle for at least a
/// quarter of the time since this thread last asked (at least [`IDLE_WINDOW`] ago; `false`
/// when it asked more recently, or first). A thread busy on another CPU keeps that CPU's
/// idle time from growing. Reads `/proc/stat` (about 15 µs).
///
/// Not the kernel's count of runnable threads (`/proc/loadavg`), which the first version
/// read: besides its noise (see [`Crowding::shared_with_enqueuer`]) it said "room" whenever
/// the host slept in a `synchronize` at that moment, and with a busy loop on the other CPU
/// the worker then moved beside the loop: 0.13–0.65× of `memcpy` at 64 KiB, against
/// 0.81–0.82× for the build before this round, which asked it at most once in 100 ms (three
/// alternations, quiet). The price: a worker that kept the other CPU busy itself, apart from
/// its host, until a wake-up put it beside the host again sees that CPU as busy, and stays
/// until a window without its own work there says otherwise (about 20 ms).
fn idle_elsewhere(now: u64, cpus: &[usize]) -> bool {
    if !idle_look_due(now) {
        return false;
    }
    let Some(look) = idle_ticks(now, cpus) else {
        return false;
    };
    // SAFETY: sysconf(3) has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let tick = 1_000_000_000 / u64::try_from(hz).unwrap_or(100).max(1);
    let here = current_cpu() as usize;
    let before = match LAST_IDLE.with(Cell::get) {
        Some(before) if now.saturating_sub(before.at) >= IDLE_WINDOW.as_nanos() as u64 => before,
        // Too recent to judge: keep the older look for the next question.
        Some(_) => return false,
        None => {
            LAST_IDLE.with(|l| l.set(Some(look)));
            return false;
        }
    };
    LAST_IDLE.with(|l| l.set(Some(look)));
    look.idle_since(&before, cpus, here) * tick * 4 >= now - before.at
}

#[cfg(test)]
thread_local! {
    /// How many times this thread read `/proc/stat` ([`idle_ticks`]).
    static IDLE_READS: Cell<u32> = const { Cell::new(0) };
}

/// Idle plus I/O-wait ticks of each CPU from `/proc/stat`, as a look at `now` for a thread
/// that may use `cpus` (see [`IdleLook`]).
fn idle_ticks(now: u64, cpus: &[usize]) -> Option<IdleLook> {
    #[cfg(test)]
    IDLE_READS.with(|r| r.set(r.get() + 1));
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let mut look = IdleLook {
        at: now,
        ticks: [0; LOOK_CPUS],
        rest: 0,
        listed: 0,
    };
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            break;
        };
        // "cpu3 …"; the first line, "cpu  …", sums all CPUs.
        if !rest.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let mut f = rest.split_whitespace();
        let Some(Ok(cpu)) = f.next().map(str::parse::<usize>) else {
            return None;
        };
        // user nice system idle iowait …
        let v: Vec<u64> = f.take(5).filter_map(|x| x.parse().ok()).collect();
        if v.len() < 5 {
            return None;
        }
        let idle = v[3] + v[4];
        if cpu < LOOK_CPUS {
            look.ticks[cpu] = idle;
        } else if cpus.contains(&cpu) {
            look.rest += idle;
        }
        look.listed += 1;
    }
    (look.listed > 0).then_some(look)
}

/// Moves the calling thread to the next CPU after its current one among those it may use,
/// then gives it back every one of them. Returns the CPUs it moved from and to, or `None` if
/// it did not move (one CPU only, or the kernel refused).
pub(crate) fn move_to_another_cpu() -> Option<(usize, usize)> {
    let allowed = allowed_cpus();
    if allowed.len() < 2 {
        return None;
    }
    // SAFETY: sched_getcpu(3) has no preconditions.
    let here = usize::try_from(unsafe { libc::sched_getcpu() }).ok()?;
    let i = allowed.iter().position(|&c| c == here).unwrap_or(0);
    let to = allowed[(i + 1) % allowed.len()];
    pin_current_thread(to).ok()?;
    // Back to every CPU it could use: the kernel leaves it where it now is until it has a
    // reason to move it.
    set_allowed(&allowed);
    Some((here, to))
}

/// Moves the calling thread to `to` if it may use it, then gives it back every CPU it may
/// use. Returns whether it moved.
pub(crate) fn move_to_cpu(to: usize) -> bool {
    let allowed = allowed_cpus();
    if allowed.len() < 2 || !allowed.contains(&to) {
        return false;
    }
    if pin_current_thread(to).is_err() {
        return false;
    }
    set_allowed(&allowed);
    true
}

/// Restricts the calling thread to `cpus` (all below `CPU_SETSIZE`, as `allowed_cpus` gives
/// them).
fn set_allowed(cpus: &[usize]) {
    // SAFETY: all-zero is the empty set; `CPU_SET` writes only bits below CPU_SETSIZE (the
    // filter); `sched_setaffinity(0, …)` only reads the set. A failure leaves the thread on
    // the one CPU it moved to, which is still one it may use.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A full streak of crowded waits starting at `t` (1 µs apart): whether it moved.
    fn streak(c: &mut Crowding, t: u64) -> bool {
        (0..u64::from(STREAK)).any(|k| c.lost_yield(t + k * 1000))
    }

    #[test]
    fn a_streak_moves_and_moves_that_do_not_help_back_off() {
        let gap = GAP.as_nanos() as u64;
        let mut c = Crowding::default();
        // Crowded waits spread wider than the window never make a streak.
        for k in 0..20 {
            assert!(!c.lost_yield(10 * MS + k * 2 * MS));
        }
        // STREAK of them within the window do, at the last one.
        let t1 = 100 * MS;
        let moved: Vec<bool> = (0..u64::from(STREAK))
            .map(|k| c.lost_yield(t1 + k * 1000))
            .collect();
        assert_eq!(moved.iter().filter(|&&m| m).count(), 1);
        assert!(moved[STREAK as usize - 1]);
        // Another streak before the gap has passed: no move.
        assert!(!streak(&mut c, t1 + gap / 2));
        // Crowded again right after the move (no clean waits between): the next move comes
        // after the gap, and the one after that only after a gap twice as long.
        let t2 = t1 + 2 * gap;
        assert!(streak(&mut c, t2));
        assert!(!streak(&mut c, t2 + gap + gap / 2), "the gap did not grow");
        let t3 = t2 + 2 * gap + MS;
        assert!(streak(&mut c, t3));
        assert_eq!(c.backoff, 2);
        // A move after which the worker ran uncrowded for a while helped: the backoff resets.
        for _ in 0..CLEAN_RUN {
            c.clean_wait();
        }
        let t4 = t3 + (gap << 2) + MS;
        assert!(streak(&mut c, t4));
        assert_eq!(c.backoff, 0);
        assert!(streak(&mut c, t4 + gap + MS));
        // The backoff is bounded.
        let mut t = t4 + 2 * gap + MS;
        for _ in 0..40 {
            t += (gap << MAX_BACKOFF) + MS;
            assert!(streak(&mut c, t));
        }
        assert_eq!(c.backoff, MAX_BACKOFF);
    }

    /// `/proc/stat` gives every CPU's idle ticks; a second look within the window says no,
    /// and does not replace the first.
    #[test]
    fn idle_time_is_read_per_cpu_and_judged_over_a_window() {
        let cpus = allowed_cpus();
        let look = idle_ticks(7, &cpus).expect("/proc/stat");
        assert_eq!(look.at, 7);
        assert!(look.listed >= cpus.len(), "{} listed", look.listed);
        // One entry per CPU the kernel lists, not one for the line that sums them all.
        // SAFETY: sysconf(3) has no preconditions.
        let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        assert!(
            look.listed <= usize::try_from(configured).unwrap().max(1),
            "{}",
            look.listed
        );
        std::thread::spawn(|| {
            let cpus = allowed_cpus();
            assert!(!idle_elsewhere(1_000_000_000, &cpus), "first look");
            assert!(!idle_elsewhere(1_010_000_000, &cpus), "within the window");
            let kept = LAST_IDLE.with(Cell::get).map(|l| l.at);
            assert_eq!(kept, Some(1_000_000_000));
        })
        .join()
        .unwrap();
    }

    /// What a look judges: the idle ticks of the thread's CPUs other than its own, by CPU
    /// number below [`LOOK_CPUS`], and the sum of those above.
    #[test]
    fn a_look_counts_the_other_cpus_idle_time() {
        let mut before = IdleLook {
            at: 0,
            ticks: [0; LOOK_CPUS],
            rest: 5,
            listed: 3,
        };
        before.ticks[..3].copy_from_slice(&[10, 20, 30]);
        let mut after = before;
        after.ticks[..3].copy_from_slice(&[11, 24, 38]);
        after.rest = 105;
        // On CPU 1 of 0, 1, 2 and 70: 1 + 8 from CPUs 0 and 2, 100 from the rest.
        assert_eq!(after.idle_since(&before, &[0, 1, 2, 70], 1), 109);
        // A CPU below `LOOK_CPUS` that the thread may not use does not count (those above
        // are summed at the look, over the CPUs it may use then).
        assert_eq!(after.idle_since(&before, &[1, 2, 70], 1), 108);
        // Counters that went back (a CPU brought offline and back) count nothing.
        assert_eq!(before.idle_since(&after, &[0, 1, 2], 2), 0);
    }

    /// A look is plain data: a thread's last one in its thread-local has no destructor to
    /// run and owns no heap memory that a fork could strand in the child (see [`IdleLook`]).
    #[test]
    fn a_look_owns_no_heap_memory() {
        assert!(!std::mem::needs_drop::<Option<IdleLook>>());
    }

    #[test]
    fn a_move_lands_on_another_cpu_and_gives_the_affinity_back() {
        let before = allowed_cpus();
        // SAFETY: sched_getcpu(3) has no preconditions.
        let here = usize::try_from(unsafe { libc::sched_getcpu() }).unwrap();
        match move_to_another_cpu() {
            None => assert!(before.len() < 2, "did not move with CPUs {before:?}"),
            Some((from, to)) => {
                assert_ne!(from, to);
                assert!(before.contains(&to));
                // Moved (the kernel may have moved us again since, but not often this soon).
                // SAFETY: as above.
                let now = usize::try_from(unsafe { libc::sched_getcpu() }).unwrap();
                assert!(
                    now == to || now != here || before.len() > 2,
                    "still on {here}"
                );
            }
        }
        assert_eq!(allowed_cpus(), before, "the affinity was not given back");
    }

    /// A bulk task that finds its worker on its enqueuer's CPU moves it at once, then not
    /// again within the gap; the backoff of moves that did not help applies as to crowded
    /// waits.
    #[test]
    fn a_bulk_task_beside_its_enqueuer_moves_once_a_gap() {
        let gap = GAP.as_nanos() as u64;
        let idle = || true;
        let mut c = Crowding::default();
        let t1 = 100 * MS;
        assert!(c.shared_with_enqueuer(t1, idle));
        assert!(!c.shared_with_enqueuer(t1 + gap / 2, idle));
        assert!(c.shared_with_enqueuer(t1 + gap + 1, idle));
        assert_eq!(c.backoff, 1, "a move right after a move that did not help");
        assert!(!c.shared_with_enqueuer(t1 + 2 * gap + gap / 2, idle));
        assert!(c.shared_with_enqueuer(t1 + 4 * gap, idle));
    }

    /// The runner moves on a tick in which another thread took its CPU often enough, only
    /// if another CPU had time to spare, then not again within the gap; quiet ticks after a
    /// move show it helped, so the next move comes after a gap, not a growing one.
    #[test]
    fn a_runner_moves_only_when_preempted_often_with_room_elsewhere() {
        let gap = GAP.as_nanos() as u64;
        let mut c = Crowding::default();
        let t1 = 100 * MS;
        assert!(
            !c.runner_tick(t1, RUNNER_PREEMPTED - 1, true),
            "preempted too rarely"
        );
        assert!(!c.runner_tick(t1 + MS, 1_000, false), "no CPU with room");
        let t2 = t1 + 10 * MS;
        assert!(c.runner_tick(t2, RUNNER_PREEMPTED, true));
        assert!(!c.runner_tick(t2 + gap / 2, 1_000, true), "within the gap");
        for k in 1..=u64::from(CLEAN_RUN) {
            assert!(!c.runner_tick(t2 + k * MS, 0, true));
        }
        assert!(c.runner_tick(t2 + 20 * MS, 1_000, true));
        assert_eq!(c.backoff, 0, "quiet ticks after the move made it back off");
        // Preempted again at once after that move: it moves after the gap, then waits a
        // gap twice as long.
        let t3 = t2 + 20 * MS + gap + 1;
        assert!(c.runner_tick(t3, 1_000, true));
        assert_eq!(c.backoff, 1);
        assert!(!c.runner_tick(t3 + gap + 1, 1_000, true));
        assert!(c.runner_tick(t3 + 2 * gap + 1, 1_000, true));
    }

    /// A host thread moves to its worker's CPU after a streak of host functions queued from
    /// another CPU, once a gap; a move after which it did not stay beside the worker backs
    /// off, one after which it did does not.
    #[test]
    fn a_host_joins_its_worker_after_a_streak_once_a_gap() {
        let gap = GAP.as_nanos() as u64;
        let mut j = Joining::default();
        let t1 = 100 * MS;
        let never = || -> u64 { panic!("the clock was read with no move due") };
        assert!(!j.queued(true, never));
        for _ in 1..JOIN_STREAK {
            assert!(!j.queued(false, never));
        }
        // One beside in between starts the streak again.
        assert!(!j.queued(true, never));
        for _ in 1..JOIN_STREAK {
            assert!(!j.queued(false, never));
        }
        assert!(j.queued(false, || t1));
        // Away again at once: the next move after the gap, the one after that after two.
        for _ in 0..JOIN_STREAK {
            assert!(!j.queued(false, || t1 + gap / 2));
        }
        assert!(j.queued(false, || t1 + gap + 1));
        assert_eq!(j.backoff, 1);
        for _ in 0..JOIN_STREAK {
            assert!(!j.queued(false, || t1 + 2 * gap + 2));
        }
        assert!(j.queued(false, || t1 + 3 * gap + 2));
        assert_eq!(j.backoff, 2);
        // A move after which the host stayed beside its worker helped: the backoff resets.
        for _ in 0..CLEAN_RUN {
            assert!(!j.queued(true, never));
        }
        let t2 = t1 + 10 * MS;
        for _ in 1..JOIN_STREAK {
            assert!(!j.queued(false, never));
        }
        assert!(j.queued(false, || t2));
        assert_eq!(j.backoff, 0);
    }

    /// A move to a named CPU lands there and gives the affinity back; nothing is counted
    /// for a worker that names no CPU, nor for a stream worker queuing host functions.
    #[test]
    fn a_host_moves_to_the_cpu_its_worker_names_and_keeps_its_affinity() {
        std::thread::spawn(|| {
            let before = allowed_cpus();
            beside_worker(u32::MAX);
            assert_eq!(JOINING.with(Cell::get), Joining::default());
            assert!(!move_to_cpu(usize::MAX), "moved to a CPU it may not use");
            let here = current_cpu() as usize;
            let Some(&to) = before.iter().find(|&&c| c != here) else {
                return;
            };
            assert!(move_to_cpu(to));
            let now = current_cpu() as usize;
            // The kernel may have moved it again since, but not often this soon.
            assert!(
                now == to || now != here || before.len() > 2,
                "still on {here}"
            );
            assert_eq!(allowed_cpus(), before, "the affinity was not given back");
        })
        .join()
        .unwrap();
        std::thread::spawn(|| {
            enable_on_this_thread();
            for _ in 0..4 * JOIN_STREAK {
                beside_worker(u32::MAX - 1);
            }
            assert_eq!(JOINING.with(Cell::get), Joining::default());
        })
        .join()
        .unwrap();
    }

    /// With no idle CPU the worker stays; the busy answer is asked for again after a gap,
    /// then after ever longer ones (up to 3.2 ms), and does not make a later move back off.
    #[test]
    fn a_bulk_task_does_not_move_its_worker_to_a_busy_cpu() {
        let gap = GAP.as_nanos() as u64;
        let mut c = Crowding::default();
        let asked = Cell::new(0);
        let busy = || {
            asked.set(asked.get() + 1);
            false
        };
        let t1 = 100 * MS;
        assert!(!c.shared_with_enqueuer(t1, busy));
        assert!(!c.shared_with_enqueuer(t1 + gap, busy));
        assert_eq!(asked.get(), 1, "asked within the gap");
        assert!(!c.shared_with_enqueuer(t1 + 2 * gap + 1, busy));
        assert_eq!(asked.get(), 2);
        let mut t = t1 + 2 * gap + 1;
        for _ in 0..20 {
            t += (gap << MAX_BUSY_BACKOFF) + 1;
            assert!(!c.shared_with_enqueuer(t, busy));
        }
        assert_eq!(asked.get(), 22, "the busy backoff is bounded");
        assert!(!c.shared_with_enqueuer(t + gap, || true));
        assert!(c.shared_with_enqueuer(t + (gap << MAX_BUSY_BACKOFF) + 1, || true));
        assert_eq!(c.backoff, 0, "busy answers made the move back off");
    }

    /// Bulk tasks that ran apart from their enqueuer after a move show that it helped: the
    /// next move (after a wake-up beside the host) comes a gap later, not a growing one.
    #[test]
    fn bulk_tasks_run_apart_keep_the_gap_short() {
        let gap = GAP.as_nanos() as u64;
        let idle = || true;
        let mut c = Crowding::default();
        let mut t = 100 * MS;
        assert!(c.shared_with_enqueuer(t, idle));
        for _ in 0..10 {
            for _ in 0..CLEAN_RUN {
                c.apart();
            }
            t += gap + 1;
            assert!(c.shared_with_enqueuer(t, idle));
            assert_eq!(c.backoff, 0);
        }
    }

    /// A runner that is not preempted reads `/proc/stat` for a baseline now and then
    /// ([`IDLE_BASELINE`]), not every [`IDLE_WINDOW`] (about 15 µs each, 50 times a second):
    /// the answer only counts on a tick that lost its CPU often. The thread sleeps between its
    /// ticks (voluntary switches); a tick that lost its CPU anyway (a loaded machine) may
    /// read once more, and is allowed for.
    #[test]
    fn a_runner_not_preempted_seldom_reads_the_cpus_idle_time() {
        std::thread::spawn(|| {
            enable_on_this_thread();
            let reads = IDLE_READS.with(Cell::get);
            let t0 = std::time::Instant::now();
            let (mut preempted_ticks, mut last) = (0, involuntary_switches().unwrap_or(0));
            while t0.elapsed() < Duration::from_millis(400) {
                runner_tick();
                let n = involuntary_switches().unwrap_or(0);
                if n > last {
                    preempted_ticks += 1;
                }
                last = n;
                std::thread::sleep(Duration::from_millis(1));
            }
            let reads = IDLE_READS.with(Cell::get) - reads;
            assert!(
                reads <= 2 + preempted_ticks,
                "{reads} reads of /proc/stat in 400 ms of ticks, {preempted_ticks} of them \
                 preempted"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn only_enabled_threads_move() {
        std::thread::spawn(|| {
            let before = allowed_cpus();
            for _ in 0..10 * STREAK {
                crowded();
                beside_enqueuer(current_cpu(), || panic!("a thread not enabled moved"));
            }
            assert_eq!(CROWDING.with(Cell::get), None);
            assert_eq!(allowed_cpus(), before);
        })
        .join()
        .unwrap();
    }

    /// A copy that runs on another CPU than its enqueuer's counts as apart; the one beside
    /// it does not.
    #[test]
    fn beside_enqueuer_counts_copies_run_apart() {
        std::thread::spawn(|| {
            enable_on_this_thread();
            let clean = || CROWDING.with(Cell::get).map(|c| c.clean);
            beside_enqueuer(u32::MAX - 1, || {});
            assert_eq!(clean(), Some(1));
            for _ in 0..2 * CLEAN_RUN {
                beside_enqueuer(u32::MAX - 1, || {});
            }
            assert_eq!(clean(), Some(CLEAN_RUN));
        })
        .join()
        .unwrap();
    }
}

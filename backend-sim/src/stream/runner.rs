//! The process's runner (issue #25, stage 2: a wait parks its stream, not its thread). A
//! stream wait that would block parks its stream instead (`crate::parked` says when: a wait
//! with no timeout, while the namespace has more busy stream workers than the spin budget or
//! a runner runs): its turn stays with the wait on top, the ring's *away* bit says the turn
//! is not with its thread, and the stream goes on this process's list. Its thread becomes
//! the runner if there is none, else waits for the bit to clear. The runner takes the
//! streams from that list onto its own (no lock), and runs the parked streams whose waits
//! can go on (it polls their probes, in a fixed round: see `run`), on its own thread, without
//! a context switch: records
//! and waits, until one parks again (it stays on the runner's list); it runs its own stream
//! the same way when that gets work. A stream comes back to its thread when a job only that thread
//! may run is on top, when it exits, when its queue runs dry (asleep, in the same step of
//! the ring's tail word: the next enqueue wakes the thread), when it stayed parked for
//! [`HOME_AFTER`] (so that its wait blocks on its thread, which looks for a deadlock through
//! it), or when the runner, with
//! nothing runnable for [`RUNNER_SPIN`], gives up: every parked stream goes back to its
//! thread, whose next wait then blocks there (tests' held streams excepted: they stay parked
//! and a thread of their own runs them, see `give_up`). Whoever clears the *away* bit wakes the
//! thread (or the enqueue that finds it asleep does), so no hand-over is lost and the
//! thread waits with no timeout (the ring's loom models `a_turn_home_*`).
//! A runner whose thread unwinds (a panic outside the tasks' unwind guards) hands every
//! stream it holds home, the one it was running included, and stops being the runner
//! ([`Mine`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::lock;
use crate::fork::PerProcess;

/// A parked stream, as the runner sees it.
pub(super) trait Borrow: Send + Sync {
    fn can_go_on(&self) -> bool;
    /// Runs the stream's turn on the runner: it parked again or deferred a wait (the runner
    /// keeps it on its own list), or it went home. `stamp`: the runner's reading of the coarse
    /// clock (`sys::coarse_now_ns`, 0: none), the time stamp of the turn's first batch of
    /// tasks (`TaskCtx::coarse_now_ns`) instead of a clock read of its own; set to 0 if
    /// the turn ran more than one batch (its reading may then be old).
    fn run_borrowed(&self, stamp: &mut u64, defer: Defer) -> Turned;
    fn hand_home(&self);
    fn is_home_with_work(&self) -> bool;
    /// The runner's own stream, home with work, is taken away from its thread (the runner
    /// itself) to be run as a parked one: the thread then waits for it as for any.
    fn take_away(&self);
    /// Whether the stream came home for its own thread to run (a job only it may run, or
    /// its exit).
    fn needs_home(&self) -> bool;
    /// Tests: the stream stays parked (`Stream::force_parking`).
    #[cfg(test)]
    fn held(&self) -> bool;
}

/// How a borrowed turn ended ([`Borrow::run_borrowed`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Turned {
    /// The stream went home.
    Home,
    /// A wait parked it again, holding its place in the notify's queue.
    Parked,
    /// A wait that found no record went back unbegun (`Parking::Defer`): its probe reads the
    /// notify's flag.
    Deferred,
}

/// Whether a borrowed turn's waits that find no record go back unbegun
/// (`Parking::Defer`) instead of taking their place and parking.
///
/// Why (issue #25, the 4-stream pipeline bench): a runner running every stage of a
/// pipeline parks each stage's wait until the stage after it has run, about four parks an
/// item, and a park with its place (`crate::parked`) costs the runner three locked
/// instructions (the lone place taken and given back, the record consumed), the parked
/// wait's box, its wait-for graph entry and note, and a call through its probe: 36 % of the
/// runner's samples (`perf`, 2026-12-07). A wait held back unbegun costs none of them, and
/// the stage that records it, on this runner, runs before the round comes back to it; run
/// again, it takes its record with the wait's fast path (one locked instruction).
///
/// A wait held back has not begun: as for a stream whose thread has yet to reach it, a waiter
/// that comes meanwhile (in any process) queues ahead of it, and a `try_consume` may take a
/// record it was not given (SPEC's FIFO is among waits that have begun). It begins (takes its
/// place, with its note and wait-for graph entry, or its record) as soon as the runner finds
/// nothing else to run — so that it never waits unqueued while nothing happens — or when
/// its stream goes home (`HOME_AFTER`, the runner's give-up: the home thread runs it as
/// any wait).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Defer {
    /// The turn's first job (the wait deferred last, run again) may be deferred.
    pub(super) first: bool,
    /// The turn's later waits may be deferred.
    pub(super) rest: bool,
}

/// The streams parked by their own threads, not yet taken by the runner, and whether a
/// runner runs. A [`PerProcess`] lock, so that a child forked while a thread held it gets a
/// fresh one (`crate::fork`); the child's first park then finds no runner, and becomes it.
/// The streams the runner took from here or parked again itself are on its own list
/// ([`Parked`], no lock: the lock and a scan under it per park cost the runner about a
/// tenth of its instructions in the pipeline bench, 2026-12-05).
static LIST: PerProcess<Runner> = PerProcess::new(Runner::default);

/// Parked streams, each with the runner's tick when it was parked and whether its last
/// turn deferred a wait ([`Turned::Deferred`]).
type Parked = Vec<(Arc<dyn Borrow>, u64, bool)>;

/// A hint that [`LIST`] holds streams the runner has not taken: set under its lock by
/// [`park`], cleared under it by the runner as it takes them (so none is missed: the runner
/// reads the hint without the lock, and sees a set one a moment later at worst).
static INBOX: AtomicBool = AtomicBool::new(false);

#[derive(Default)]
struct Runner {
    /// The streams parked by their own threads since the runner last took them.
    parked: Parked,
    running: bool,
    /// Counts [`HOME_AFTER`] periods while a runner runs (it reads the clock, not the
    /// threads that park).
    tick: u64,
}

/// A stream parked this long (one to two ticks) without its record goes back to its own
/// thread, which waits the blocking way. A parked wait is in the wait-for graph
/// (`crate::waitgraph`) and the stream's `blocked_on` note from when it parks, so the
/// inspector and other processes' waits see a cycle through it at once; but only a sleeping
/// wait looks for a cycle through itself and fails on one (`ACL_NOTIFY_SIM_DEADLOCK=fail`),
/// and a runner busy with other streams would otherwise keep it parked for ever. Also what a
/// parked wait costs the runner's scans.
const HOME_AFTER: Duration = Duration::from_millis(1);

/// A hint of `Runner::running` without the lock, for a wait deciding whether to park (a
/// forked child may read its parent's `true` until its first runner gives up: it then parks
/// a wait it would have spun on, which is slower, never wrong).
static RUNNER: AtomicBool = AtomicBool::new(false);

/// How long a runner with nothing runnable keeps looking before it gives up.
const RUNNER_SPIN: Duration = Duration::from_micros(50);

/// Tests: stream `s` stays parked: the runner neither sends it home after [`HOME_AFTER`]
/// nor gives up while it is parked (`Stream::force_parking`; per stream, since the unit
/// tests share a process and its runner).
#[inline(always)]
fn held(s: &dyn Borrow) -> bool {
    #[cfg(test)]
    return s.held();
    #[cfg(not(test))]
    {
        let _ = s;
        false
    }
}

/// Tests: whether a parked stream is held (see [`held`]), so that the runner does not give
/// up.
#[inline(always)]
fn any_held(mine: &Parked) -> bool {
    #[cfg(test)]
    return mine.iter().any(|(s, _, _)| held(&**s))
        || lock(LIST.get()).parked.iter().any(|(s, _, _)| held(&**s));
    #[cfg(not(test))]
    {
        let _ = mine;
        false
    }
}

/// Whether a runner is running.
pub(super) fn active() -> bool {
    RUNNER.load(Ordering::Relaxed)
}

/// The home thread of `me` parked it: puts it on the list and becomes the runner if there is
/// none. Returns when this thread is no longer the runner.
pub(super) fn park(me: Arc<dyn Borrow>) {
    let become_runner = {
        let mut l = lock(LIST.get());
        let tick = l.tick;
        l.parked.push((Arc::clone(&me), tick, false));
        INBOX.store(true, Ordering::Relaxed);
        !std::mem::replace(&mut l.running, true)
    };
    if become_runner {
        RUNNER.store(true, Ordering::SeqCst);
        run(Some(&me));
    }
}

/// The runner's own list ([`run`]), the stream it is running among them (run in its place
/// on the list): if the runner's thread unwinds (a panic outside the tasks' unwind guards, a
/// bug of ours), the drop gives them up as [`give_up`] does (home, with the streams parked
/// on [`LIST`] not taken yet, and the runner's state cleared), so that no stream stays parked
/// for ever and the next park finds no runner and becomes it.
struct Mine<'a> {
    parked: Parked,
    /// The runner's thread's own stream, and whether it is being run on the runner.
    me: Option<&'a Arc<dyn Borrow>>,
    me_running: bool,
}

impl Drop for Mine<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.unwound();
        }
    }
}

impl Mine<'_> {
    /// See [`Mine`]. Must not panic: it runs while the thread unwinds.
    #[cold]
    fn unwound(&mut self) {
        let mut all = std::mem::take(&mut self.parked);
        if self.me_running
            && let Some(me) = self.me
        {
            all.push((Arc::clone(me), 0, false));
        }
        // As a runner that gives up: held streams (tests) stay parked with a runner of their
        // own; another test's held stream handed home by this one made that test fail.
        give_up(all);
    }
}

/// Ends the runner: clears its state and hands `all` home, with every stream parked on
/// [`LIST`] not taken yet.
#[cold]
fn stop_and_hand_home(mut all: Parked) {
    {
        let mut l = lock(LIST.get());
        all.append(&mut l.parked);
        l.running = false;
        RUNNER.store(false, Ordering::SeqCst);
        INBOX.store(false, Ordering::Relaxed);
    }
    for (s, _, _) in all {
        s.hand_home();
    }
}

/// Moves the streams parked by their own threads to the runner's list.
#[inline(never)]
fn take_inbox(mine: &mut Parked) {
    let mut l = lock(LIST.get());
    INBOX.store(false, Ordering::Relaxed);
    mine.append(&mut l.parked);
}

/// Runs parked streams until there are none or nothing was runnable for [`RUNNER_SPIN`]
/// (then [`give_up`]). `me`: the stream of the thread that runs this (its worker), which
/// ends the run when that stream needs its own thread; `None` for a runner thread of its
/// own (tests: see [`give_up`]).
fn run(me: Option<&Arc<dyn Borrow>>) {
    // The streams this runner holds parked: taken from `LIST`, or parked again as it ran
    // them. Only this thread touches it.
    let mut mine = Mine {
        parked: Vec::new(),
        me,
        me_running: false,
    };
    let mut tick = lock(LIST.get()).tick;
    let mut idle: Option<Instant> = None;
    let mut i = 0u32;
    let mut picks = 0u32;
    // Where the next look for a stream that can go on starts: just after the one run last
    // (see below).
    let mut next = 0usize;
    let mut tick_at = Instant::now();
    // The coarse clock's reading for the turns' time stamps (`Borrow::run_borrowed`), read
    // again every 64 looks, after a yield and after a turn that ran more than one batch
    // (its age bounded by 64 looks' worth of quick turns, as a batch's own reading is by
    // its 16 tasks): one clock read a
    // turn was 2 % of the runner's time in the pipeline bench (`perf`, 2026-12-06), for a
    // clock that ticks every few milliseconds.
    let mut stamp = 0u64;
    loop {
        picks = picks.wrapping_add(1);
        if picks.is_multiple_of(64) {
            stamp = 0;
        }
        if picks.is_multiple_of(64) && tick_at.elapsed() >= HOME_AFTER {
            tick_at = Instant::now();
            tick = send_home_long_parked(&mut mine.parked);
            // Apart from a host that keeps taking its CPU, if another one has room.
            crate::placement::runner_tick();
        }
        if INBOX.load(Ordering::Relaxed) {
            take_inbox(&mut mine.parked);
        }
        if let Some(me) = me.filter(|me| me.is_home_with_work()) {
            if me.needs_home() {
                break;
            }
            // This thread's own stream got work while it ran others: run it here too
            // (going back to the worker's loop would hand every parked stream home).
            mine.me_running = true;
            me.take_away();
            let turned = me.run_borrowed(
                fresh_stamp(&mut stamp),
                Defer {
                    first: !mine.parked.is_empty(),
                    rest: !mine.parked.is_empty(),
                },
            );
            mine.me_running = false;
            if turned != Turned::Home {
                mine.parked
                    .push((Arc::clone(me), tick, turned == Turned::Deferred));
            }
            idle = None;
            continue;
        }
        if mine.parked.is_empty() {
            take_inbox(&mut mine.parked);
            if mine.parked.is_empty() {
                break;
            }
        }
        // The parked streams keep their places on the list, and each look starts after the
        // stream run last, in turn (round robin): every stream that can go on runs within one
        // round, and the streams of a pipeline run in the order their items flow. Until
        // 2026-12-06 the stream run was taken off the list and put back at its end, with each
        // look starting at the front: the order changed at every turn (of three streams that
        // could always go on, one never ran: `parked_streams_take_turns_in_a_fixed_round`),
        // and the 4-stream pipeline bench took 4.8 turns an item instead of 3.9 (callgrind;
        // 1.58 → 1.83 M items/s, `bench/README.md` History, pipe13). Run in its place, the
        // stream is not moved off the list and back (two stores of its fat pointer a turn).
        let n = mine.parked.len();
        // A wait is deferred (`Defer`) only while another stream is parked here, one that may
        // record it.
        let others = n > 1;
        let found = (0..n)
            .map(|j| (next + j) % n)
            .find(|&k| mine.parked[k].0.can_go_on())
            .map(|k| {
                // Run again, a deferred wait takes its record, or its place behind a waiter
                // that queued before it (it is not deferred a second time).
                let first = others && !mine.parked[k].2;
                (
                    k,
                    Defer {
                        first,
                        rest: others,
                    },
                )
            })
            .or_else(|| {
                // Nothing can go on: a deferred wait begins (takes its place and parks), so
                // that no wait stays unqueued while the runner has nothing to run.
                mine.parked.iter().position(|p| p.2).map(|k| {
                    (
                        k,
                        Defer {
                            first: false,
                            rest: others,
                        },
                    )
                })
            });
        if let Some((k, defer)) = found {
            match mine.parked[k]
                .0
                .run_borrowed(fresh_stamp(&mut stamp), defer)
            {
                Turned::Home => {
                    mine.parked.swap_remove(k);
                    next = k;
                }
                turned => {
                    mine.parked[k].1 = tick;
                    mine.parked[k].2 = turned == Turned::Deferred;
                    next = k + 1;
                }
            }
            idle = None;
            continue;
        }
        i = i.wrapping_add(1);
        std::hint::spin_loop();
        if i.is_multiple_of(16) {
            let t = *idle.get_or_insert_with(Instant::now);
            if t.elapsed() >= RUNNER_SPIN && !any_held(&mine.parked) {
                break;
            }
            if t.elapsed() >= Duration::from_micros(2) {
                // Under the slice guard of every stream-side yield
                // (`crate::yielding::offer_cpu`): with a busy thread beside, spin on without
                // yielding.
                if crate::yielding::offer_cpu().is_some() {
                    // Another thread may have had the CPU for a while.
                    stamp = 0;
                }
            }
        }
    }
    give_up(std::mem::take(&mut mine.parked));
}

/// `stamp`, read from the coarse clock if it holds none (see `run`).
#[inline(always)]
fn fresh_stamp(stamp: &mut u64) -> &mut u64 {
    if *stamp == 0 {
        *stamp = crate::sys::coarse_now_ns().max(1);
    }
    stamp
}

/// A tick has passed: the streams parked two ticks ago or earlier go home (see
/// [`HOME_AFTER`]). Returns the new tick.
#[cold]
fn send_home_long_parked(mine: &mut Parked) -> u64 {
    let (home, now) = {
        let mut l = lock(LIST.get());
        INBOX.store(false, Ordering::Relaxed);
        mine.append(&mut l.parked);
        l.tick += 1;
        let now = l.tick;
        let (home, stay): (Vec<_>, Vec<_>) = std::mem::take(mine)
            .into_iter()
            .partition(|(s, t, _)| t + 2 <= now && !held(&**s));
        *mine = stay;
        (home, now)
    };
    for (s, _, _) in home {
        s.hand_home();
    }
    now
}

/// Stops being the runner: every parked stream (`mine` and those not taken yet) goes back
/// to its home thread, except held ones (tests, [`held`]): they stay parked, and a thread of
/// its own becomes the runner for them (the unit tests share the process's runner; a test's
/// held stream handed home by another test's runner going home made checks of it fail now
/// and then, 2026-12-05).
fn give_up(mine: Parked) {
    let (home, runner_left) = {
        let mut l = lock(LIST.get());
        let mut all = mine;
        all.append(&mut l.parked);
        let (stay, home): (Vec<_>, Vec<_>) = all.into_iter().partition(|(s, _, _)| held(&**s));
        l.parked = stay;
        let runner_left = !l.parked.is_empty();
        INBOX.store(runner_left, Ordering::Relaxed);
        if !runner_left {
            l.running = false;
            RUNNER.store(false, Ordering::SeqCst);
        }
        (home, runner_left)
    };
    for (s, _, _) in home {
        s.hand_home();
    }
    if runner_left {
        let spawned = std::thread::Builder::new()
            .name("acl-notify-runner".into())
            .spawn(|| run(None));
        if spawned.is_err() {
            // No thread for them: they go home after all (the runner's state with them).
            stop_and_hand_home(Vec::new());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst};
    use std::time::{Duration, Instant};

    use super::Borrow;

    /// A stand-in stream: what the runner asked of it.
    #[derive(Default)]
    struct Fake {
        ready: AtomicBool,
        held: bool,
        needs_home: AtomicBool,
        ran: AtomicBool,
        handed: AtomicBool,
        /// Its turns on the runner park again (and wait for `ready` again, unless
        /// `stays_ready`).
        parks_again: AtomicBool,
        /// It can go on again at once after a turn that parked again (and not after one
        /// that went home).
        stays_ready: bool,
        /// Its name and where its turns are logged, in the order they run.
        log: Option<(char, Arc<std::sync::Mutex<Vec<char>>>)>,
        runs: AtomicU32,
        /// Its turn on the runner panics (as code of ours outside the tasks' unwind guards
        /// could) when run on this thread (the unit tests share the process's runner: another
        /// test's must not unwind).
        panics_on: std::sync::OnceLock<std::thread::ThreadId>,
    }

    impl Borrow for Fake {
        fn can_go_on(&self) -> bool {
            self.ready.load(SeqCst)
        }
        fn run_borrowed(&self, _: &mut u64, _: super::Defer) -> super::Turned {
            let again = self.parks_again.load(SeqCst);
            if again != self.stays_ready {
                // Parked again and waits for `ready`; or, one that stays ready, gone home.
                // Before the run is counted: a test that sees the count sets `ready` for the
                // next turn, which a later store here would undo (the next turn then never
                // came: `a_stream_parked_again_on_the_runner_stays_with_it` failed 1 of 30
                // runs alone, 2026-12-07).
                self.ready.store(false, SeqCst);
            }
            self.runs.fetch_add(1, SeqCst);
            self.ran.store(true, SeqCst);
            if let Some((name, log)) = &self.log {
                log.lock().unwrap().push(*name);
            }
            if self.panics_on.get() == Some(&std::thread::current().id()) {
                panic!("test: the runner's thread unwinds outside the tasks");
            }
            if again {
                super::Turned::Parked
            } else {
                super::Turned::Home
            }
        }
        fn hand_home(&self) {
            self.handed.store(true, SeqCst);
        }
        fn is_home_with_work(&self) -> bool {
            self.needs_home.load(SeqCst)
        }
        fn take_away(&self) {}
        fn needs_home(&self) -> bool {
            self.needs_home.load(SeqCst)
        }
        fn held(&self) -> bool {
            self.held
        }
    }

    /// Runs a test of these fakes in a forked child of its own, where it owns the process's
    /// runner. In the test binary's process, another unit test's real stream could become the
    /// runner of these fakes' streams, or these fakes' runner run its stream: a mix no real
    /// process has (a fake's thread is not woken by `hand_home` as a real stream's is), which
    /// stalled both tests — `a_stream_parked_again_on_the_runner_stays_with_it` beside
    /// `crate::tests::a_worker_asleep_in_other_waits_is_not_counted_busy` failed 6–8 of 30 runs
    /// on 2026-12-07 (lead), and one CI run. A panic in the child is printed to its stderr
    /// ([`crate::fork::run_in_child`]) and fails the test here with the child's status.
    fn alone(what: &str, body: fn()) {
        if let Err(status) = crate::fork::run_in_child(|| {
            body();
            true
        }) {
            panic!("{what} failed in its own process (status {status:#x}; its panic above)");
        }
    }

    /// A runner whose own stream must go home leaves a held stream parked, with a runner
    /// that runs it once it can go on (until 2026-12-05 it handed it home with the rest).
    #[test]
    fn a_held_stream_stays_parked_when_the_runner_goes_home() {
        alone(
            "a_held_stream_stays_parked_when_the_runner_goes_home",
            a_held_stream_stays_parked_when_the_runner_goes_home_here,
        );
    }

    fn a_held_stream_stays_parked_when_the_runner_goes_home_here() {
        // Both held, so that the runner does not give up for want of work meanwhile.
        let me = Arc::new(Fake {
            held: true,
            ..Fake::default()
        });
        let held = Arc::new(Fake {
            held: true,
            ..Fake::default()
        });
        let runner = {
            let me = Arc::clone(&me);
            std::thread::spawn(move || super::park(me as Arc<dyn Borrow>))
        };
        // The thread above is the runner (or another test's runner runs): either way one runs.
        let t0 = Instant::now();
        while !super::active() {
            assert!(t0.elapsed() < Duration::from_secs(10), "no runner");
            std::thread::yield_now();
        }
        {
            let mut l = super::lock(super::LIST.get());
            l.parked
                .push((Arc::clone(&held) as Arc<dyn Borrow>, 0, false));
            super::INBOX.store(true, SeqCst);
        }
        me.needs_home.store(true, SeqCst);
        runner.join().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(!held.handed.load(SeqCst), "the held stream was handed home");
        held.ready.store(true, SeqCst);
        let t0 = Instant::now();
        while !held.ran.load(SeqCst) {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "no runner ran the held stream"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(!held.handed.load(SeqCst), "the held stream was handed home");
        // `me` is still parked (held), so that a runner runs: let it go too.
        me.ready.store(true, SeqCst);
        let t0 = Instant::now();
        while !me.ran.load(SeqCst) {
            assert!(t0.elapsed() < Duration::from_secs(10), "`me` never ran");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Waits (at most 10 s) until `f` holds.
    fn until(what: &str, f: impl Fn() -> bool) {
        let t0 = Instant::now();
        while !f() {
            assert!(t0.elapsed() < Duration::from_secs(10), "never: {what}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// A stream that parks again on the runner stays with the runner (on its own list: the
    /// stream's turn no longer puts itself on the shared one) and runs again when it can go
    /// on; fails (never ran again) if the runner drops it.
    #[test]
    fn a_stream_parked_again_on_the_runner_stays_with_it() {
        alone(
            "a_stream_parked_again_on_the_runner_stays_with_it",
            a_stream_parked_again_on_the_runner_stays_with_it_here,
        );
    }

    fn a_stream_parked_again_on_the_runner_stays_with_it_here() {
        let s = Arc::new(Fake {
            held: true,
            parks_again: AtomicBool::new(true),
            ..Fake::default()
        });
        let me = Arc::new(Fake {
            held: true,
            ..Fake::default()
        });
        let runner = {
            let me = Arc::clone(&me);
            std::thread::spawn(move || super::park(me as Arc<dyn Borrow>))
        };
        until("a runner runs", super::active);
        {
            let mut l = super::lock(super::LIST.get());
            l.parked.push((Arc::clone(&s) as Arc<dyn Borrow>, 0, false));
            super::INBOX.store(true, SeqCst);
        }
        let on_shared_list = || {
            super::lock(super::LIST.get())
                .parked
                .iter()
                .any(|(p, _, _)| std::ptr::addr_eq(Arc::as_ptr(p), Arc::as_ptr(&s)))
        };
        for k in 1..=3 {
            s.ready.store(true, SeqCst);
            until("the stream ran", || s.runs.load(SeqCst) == k);
            assert!(!on_shared_list(), "parked again onto the shared list");
            assert!(!s.handed.load(SeqCst));
        }
        // Let both go: the stream's next turn goes home, `me` needs its thread.
        s.parks_again.store(false, SeqCst);
        s.ready.store(true, SeqCst);
        until("the stream ran", || s.runs.load(SeqCst) == 4);
        me.ready.store(true, SeqCst);
        me.needs_home.store(true, SeqCst);
        runner.join().unwrap();
    }

    /// Parked streams that can go on take turns in a fixed round: of three that can always
    /// go on, each runs once in every three turns. Fails on the runner before 2026-12-06,
    /// which took the stream it ran off its list, put it back at the end and looked from the
    /// front each time: the order changed every turn and one of the three never ran.
    #[test]
    fn parked_streams_take_turns_in_a_fixed_round() {
        alone(
            "parked_streams_take_turns_in_a_fixed_round",
            parked_streams_take_turns_in_a_fixed_round_here,
        );
    }

    fn parked_streams_take_turns_in_a_fixed_round_here() {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let streams: Vec<Arc<Fake>> = ['a', 'b', 'c']
            .into_iter()
            .map(|name| {
                Arc::new(Fake {
                    held: true,
                    ready: AtomicBool::new(true),
                    parks_again: AtomicBool::new(true),
                    stays_ready: true,
                    log: Some((name, Arc::clone(&log))),
                    ..Fake::default()
                })
            })
            .collect();
        // Held, never ready: the runner neither gives up nor runs it meanwhile.
        let me = Arc::new(Fake {
            held: true,
            ..Fake::default()
        });
        {
            // All three on the list at once, before the runner starts (or another test's
            // runner takes them, in this order).
            let mut l = super::lock(super::LIST.get());
            for s in &streams {
                l.parked.push((Arc::clone(s) as Arc<dyn Borrow>, 0, false));
            }
            super::INBOX.store(true, SeqCst);
        }
        let runner = {
            let me = Arc::clone(&me);
            std::thread::spawn(move || super::park(me as Arc<dyn Borrow>))
        };
        until("90 turns", || log.lock().unwrap().len() >= 90);
        for s in &streams {
            s.parks_again.store(false, SeqCst);
        }
        // Each one's next turn goes home (and clears `ready`).
        until("every stream went home", || {
            streams.iter().all(|s| !s.ready.load(SeqCst))
        });
        let first: Vec<char> = log.lock().unwrap()[..90].to_vec();
        for name in ['a', 'b', 'c'] {
            let n = first.iter().filter(|&&c| c == name).count();
            assert_eq!(n, 30, "{name} ran {n} of the first 90 turns: {first:?}");
        }
        me.ready.store(true, SeqCst);
        me.needs_home.store(true, SeqCst);
        runner.join().unwrap();
    }

    /// A runner whose thread unwinds while it runs a stream (outside the tasks' unwind
    /// guards) hands every stream home, the one it ran included, and stops being the runner:
    /// the next park becomes the runner. Fails (streams never handed home, the next park
    /// finds a runner that does not exist) if the runner's list is just dropped.
    #[test]
    fn a_runner_that_unwinds_hands_its_streams_home() {
        alone(
            "a_runner_that_unwinds_hands_its_streams_home",
            a_runner_that_unwinds_hands_its_streams_home_here,
        );
    }

    fn a_runner_that_unwinds_hands_its_streams_home_here() {
        // Nothing here is held: an unwinding runner keeps held streams parked, as one that
        // gives up does. The streams are on the list before `me` parks, so that its runner
        // takes them at once.
        let me = Arc::new(Fake::default());
        let other = Arc::new(Fake::default());
        let boom = Arc::new(Fake {
            ready: AtomicBool::new(true),
            ..Fake::default()
        });
        let (go, gate) = std::sync::mpsc::channel::<()>();
        let runner = {
            let me = Arc::clone(&me);
            std::thread::spawn(move || {
                let _ = gate.recv();
                super::park(me as Arc<dyn Borrow>)
            })
        };
        boom.panics_on.set(runner.thread().id()).unwrap();
        {
            let mut l = super::lock(super::LIST.get());
            l.parked
                .push((Arc::clone(&other) as Arc<dyn Borrow>, 0, false));
            l.parked
                .push((Arc::clone(&boom) as Arc<dyn Borrow>, 0, false));
            super::INBOX.store(true, SeqCst);
        }
        go.send(()).unwrap();
        if runner.join().is_ok() {
            // Another test's runner ran when `me` parked (`cargo test` shares the process):
            // it runs them, no panic. Let `me` go.
            eprintln!("skipped: another test's runner took the streams");
            me.ready.store(true, SeqCst);
            other.ready.store(true, SeqCst);
            return;
        }
        assert!(boom.ran.load(SeqCst));
        for (what, s) in [
            ("the one it ran", &boom),
            ("a parked one", &other),
            ("its own", &me),
        ] {
            assert!(s.handed.load(SeqCst), "{what} was not handed home");
        }
        // The next park becomes the runner (or another test's runner runs it), finds nothing
        // runnable and hands it home.
        let next = Arc::new(Fake::default());
        super::park(Arc::clone(&next) as Arc<dyn Borrow>);
        until("the next park found a runner", || next.handed.load(SeqCst));
    }
}

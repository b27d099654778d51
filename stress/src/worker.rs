//! One worker process: opens the simulator, creates/exports/whitelists the notifies it owns,
//! imports its partners', then drives each of its streams through the handoff rounds with a
//! thread per stream, and finally destroys everything. Counters go to the board, so the
//! coordinator can account for a worker that was killed at any point.
//!
//! Exit codes: 0 done (possibly having abandoned channels whose partner was killed), 2 an
//! invariant violation was seen, 3 setup failed.

use std::ffi::c_void;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::{Duration, Instant};

use acl_notify_core::{
    BackendError, CreateFlags, Error, ExportFlags, HostCall, ImportFlags, NotifyResources,
    RawNotify, RawStream, StreamDestroy, StreamOps, SyncWait, Timeout,
};
use acl_notify_sim::Sim;

use crate::board::{Board, cw, hdr, phase, pw};
use crate::plan::{Cfg, End, Pair, Rng};

/// How long a worker waits for a partner's key or the start signal.
const SETUP_WAIT: Duration = Duration::from_secs(60);
/// One bounded synchronize; a round that does not finish in it is re-checked.
const SYNC_SLICE: Duration = Duration::from_secs(1);

/// This worker's side of one pair.
struct Side {
    pair: usize,
    partner: End,
    waiter: bool,
    /// Notifies this side owns (D if waiter, A if recorder), one per channel.
    own: Vec<RawNotify>,
    /// Notifies imported from the partner (A if waiter, D if recorder); `None` if abandoned.
    imported: Vec<RawNotify>,
    stream: Option<RawStream>,
    abandoned: bool,
}

struct Ctx<'a> {
    cfg: &'a Cfg,
    board: &'a Board,
    me: usize,
    sim: Sim,
}

impl Ctx<'_> {
    fn set_phase(&self, p: u64) {
        self.board.proc(self.me, pw::PHASE).store(p, SeqCst);
    }

    fn partner_dead(&self, e: End) -> bool {
        self.board.proc(e.proc, pw::DEAD).load(SeqCst) != 0
    }

    fn aborted(&self) -> bool {
        self.board.hdr(hdr::ABORT).load(SeqCst) != 0
    }

    fn count(&self, w: usize) {
        self.board.proc(self.me, w).fetch_add(1, SeqCst);
    }

    fn violation(&self, what: &str) {
        eprintln!("stress worker {}: VIOLATION: {what}", self.me);
        self.count(pw::VIOLATIONS);
    }

    /// A short random pause, so kills land inside setup and teardown steps too.
    fn jitter(&self, rng: &mut Rng) {
        if rng.below(4) == 0 {
            std::thread::sleep(Duration::from_micros(200 + rng.below(1500)));
        }
    }
}

/// Host-function arguments live for the whole process (leaked; a worker runs one test).
struct Released {
    released: &'static AtomicU64,
    started: &'static AtomicU64,
    spurious: &'static AtomicU64,
}

/// # Safety
///
/// `arg` points to a leaked `Released`.
unsafe extern "C" fn on_released(arg: *mut c_void) {
    // SAFETY: the caller passes a pointer to a leaked `Released`.
    let r = unsafe { &*(arg as *const Released) };
    let n = r.released.fetch_add(1, SeqCst) + 1;
    // The recorder bumps `started` on its stream before its record task runs, so a wait
    // released by that record sees it: more releases than starts = a wait without a record.
    if n > r.started.load(SeqCst) {
        r.spurious.fetch_add(1, SeqCst);
    }
}

/// # Safety
///
/// `arg` points to a leaked `AtomicU64` (a board word).
unsafe extern "C" fn on_started(arg: *mut c_void) {
    // SAFETY: the caller passes a pointer to a board word, mapped for the process lifetime.
    let c = unsafe { &*(arg as *const AtomicU64) };
    c.fetch_add(1, SeqCst);
}

struct Reset {
    sim: Sim,
    notifies: Vec<RawNotify>,
    done: &'static AtomicU64,
    errors: &'static AtomicU64,
}

/// # Safety
///
/// `arg` points to a leaked `Reset`.
unsafe extern "C" fn on_reset(arg: *mut c_void) {
    // SAFETY: the caller passes a pointer to a leaked `Reset`.
    let r = unsafe { &*(arg as *const Reset) };
    // The waiter has consumed every data notify of this round and not yet acknowledged, so
    // no record can be pending on them: the reset must change nothing (a lost record would
    // stall the next round and be counted).
    match r.sim.batch_reset(&r.notifies) {
        Ok(()) => r.done.fetch_add(1, SeqCst),
        Err(e) => {
            eprintln!("stress: batch reset from a host function failed: {e}");
            r.errors.fetch_add(1, SeqCst)
        }
    };
}

/// # Safety
///
/// `arg` is unused.
unsafe extern "C" fn noop(_arg: *mut c_void) {}

fn host(f: unsafe extern "C" fn(*mut c_void), arg: *const c_void) -> HostCall {
    // SAFETY: every `arg` passed here is leaked or a board word (valid for the process
    // lifetime, usable from any thread), and each function only does atomic operations or
    // calls the thread-safe `Sim`.
    unsafe { HostCall::new(f, arg.cast_mut()) }
}

/// Runs worker `me`; returns the exit code.
pub fn run(cfg: &Cfg, me: usize) -> i32 {
    let board = match Board::open(&cfg.board_path(), cfg.procs, cfg.channels()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("stress worker {me}: {e}");
            return 3;
        }
    };
    board.proc(me, pw::PHASE).store(phase::OPEN, SeqCst);
    let sim = match Sim::builder()
        .soc(cfg.soc)
        .devices(cfg.devices)
        .namespace(&cfg.namespace)
        .open()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stress worker {me}: open: {e}");
            return 3;
        }
    };
    let ctx = Ctx {
        cfg,
        board: &board,
        me,
        sim,
    };
    match work(&ctx) {
        Ok(()) if board.proc(me, pw::VIOLATIONS).load(SeqCst) == 0 => 0,
        Ok(()) => 2,
        Err(e) => {
            eprintln!("stress worker {me}: {e}");
            3
        }
    }
}

fn work(ctx: &Ctx<'_>) -> Result<(), String> {
    let cfg = ctx.cfg;
    let me = ctx.me;
    let dev = cfg.device_of(me);
    let mut rng = Rng(cfg.seed ^ 0x5157_0000 ^ me as u64);
    let pairs: Vec<Pair> = cfg.pairs();
    let mut sides: Vec<Side> = Vec::new();
    for (i, p) in pairs.iter().enumerate() {
        for (mine, other, waiter) in [(p.waiter, p.recorder, true), (p.recorder, p.waiter, false)] {
            if mine.proc == me {
                sides.push(Side {
                    pair: i,
                    partner: other,
                    waiter,
                    own: Vec::new(),
                    imported: Vec::new(),
                    stream: None,
                    abandoned: false,
                });
            }
        }
    }

    // Export: create the notifies this side owns, whitelist the partner, publish the keys.
    ctx.set_phase(phase::EXPORT);
    for side in &mut sides {
        let pid = wait_for(ctx, side.partner, "its pid", || {
            let v = ctx.board.proc(side.partner.proc, pw::PID).load(SeqCst);
            (v != 0).then_some(v as i32)
        })?;
        let Some(pid) = pid else {
            side.abandoned = true;
            continue;
        };
        for k in 0..cfg.notifies {
            let c = side.pair * cfg.notifies + k;
            let n = ctx
                .sim
                .create_notify(dev, CreateFlags::empty())
                .map_err(|e| format!("create: {e}"))?;
            side.own.push(n);
            ctx.jitter(&mut rng);
            let key = ctx
                .sim
                .export_key(n, ExportFlags::empty())
                .map_err(|e| format!("export: {e}"))?;
            ctx.sim
                .set_import_pids(n, &[pid])
                .map_err(|e| format!("whitelist: {e}"))?;
            let (at, ready) = if side.waiter {
                (cw::D_KEY, cw::D_READY)
            } else {
                (cw::A_KEY, cw::A_READY)
            };
            let text: &[u8; 64] = key
                .as_bytes()
                .try_into()
                .map_err(|_| format!("export gave a key of {} bytes", key.as_bytes().len()))?;
            ctx.board.put_key(c, at, ready, text);
        }
    }

    // Import the partner's notifies.
    ctx.set_phase(phase::IMPORT);
    for side in &mut sides {
        if side.abandoned {
            continue;
        }
        let peer_dev = cfg.device_of(side.partner.proc);
        let flags = if peer_dev == dev {
            ImportFlags::empty()
        } else {
            ImportFlags::ENABLE_PEER_ACCESS
        };
        for k in 0..cfg.notifies {
            let c = side.pair * cfg.notifies + k;
            let (at, ready) = if side.waiter {
                (cw::A_KEY, cw::A_READY)
            } else {
                (cw::D_KEY, cw::D_READY)
            };
            let key = wait_for(ctx, side.partner, "its key", || {
                ctx.board.get_key(c, at, ready)
            })?;
            let Some(key) = key else {
                side.abandoned = true;
                break;
            };
            ctx.jitter(&mut rng);
            match ctx.sim.import_by_key(dev, &key, flags) {
                Ok(n) => side.imported.push(n),
                // The partner died after publishing: its notify may be gone already.
                Err(e) if ctx.partner_dead(side.partner) => {
                    eprintln!("stress worker {me}: import from a dead partner: {e}");
                    side.abandoned = true;
                    break;
                }
                Err(e) => return Err(format!("import: {e}")),
            }
        }
    }
    for side in &mut sides {
        side.stream = Some(
            ctx.sim
                .create_stream(dev)
                .map_err(|e| format!("create stream: {e}"))?,
        );
    }

    ctx.set_phase(phase::READY);
    let start = Instant::now();
    while ctx.board.hdr(hdr::GO).load(SeqCst) == 0 {
        if start.elapsed() > SETUP_WAIT || ctx.aborted() {
            return Err("no start signal".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }

    ctx.set_phase(phase::RUN);
    let abandoned: Vec<AtomicBool> = sides.iter().map(|s| AtomicBool::new(s.abandoned)).collect();
    std::thread::scope(|sc| {
        for (i, side) in sides.iter().enumerate() {
            if side.abandoned {
                continue;
            }
            let seed = rng.next();
            let ab = &abandoned[i];
            sc.spawn(move || {
                if !drive(ctx, side, Rng(seed)) {
                    ab.store(true, SeqCst);
                }
            });
        }
    });
    for (s, a) in sides.iter_mut().zip(&abandoned) {
        s.abandoned = a.load(SeqCst);
    }

    // Teardown: streams (discarding waits stuck on a dead partner), then every notify.
    ctx.set_phase(phase::DESTROY);
    for side in &sides {
        if let Some(s) = side.stream {
            let mode = if side.abandoned {
                StreamDestroy::Discard
            } else {
                StreamDestroy::Drain
            };
            if let Err(e) = ctx.sim.destroy_stream(s, mode) {
                ctx.count(pw::ERRORS);
                eprintln!("stress worker {me}: destroy stream: {e}");
            }
        }
        for n in side.own.iter().chain(&side.imported) {
            ctx.jitter(&mut rng);
            if let Err(e) = ctx.sim.destroy_notify(*n) {
                ctx.violation(&format!("destroy of a live handle failed: {e}"));
            }
        }
    }
    ctx.set_phase(phase::DONE);
    Ok(())
}

/// Polls `f` until it gives a value, the partner is reported dead (`Ok(None)`), or
/// [`SETUP_WAIT`] passes (an error: a live partner that never answers).
fn wait_for<T>(
    ctx: &Ctx<'_>,
    partner: End,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> Result<Option<T>, String> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(Some(v));
        }
        if ctx.partner_dead(partner) {
            return Ok(None);
        }
        if ctx.aborted() {
            return Err("aborted".into());
        }
        if start.elapsed() > SETUP_WAIT {
            return Err(format!(
                "partner process {} never published {what}",
                partner.proc
            ));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Drives one side through its rounds. `false` if it abandoned (partner dead, or an error).
fn drive(ctx: &Ctx<'_>, side: &Side, mut rng: Rng) -> bool {
    let cfg = ctx.cfg;
    let Some(stream) = side.stream else {
        return false;
    };
    let k = cfg.notifies;
    let chans: Vec<usize> = (0..k).map(|i| side.pair * k + i).collect();
    let released: Vec<&'static Released> = chans
        .iter()
        .map(|&c| {
            &*Box::leak(Box::new(Released {
                released: ctx.board.chan(c, cw::RELEASED),
                started: ctx.board.chan(c, cw::STARTED),
                spurious: ctx.board.chan(c, cw::SPURIOUS),
            }))
        })
        .collect();
    let reset: &'static Reset = Box::leak(Box::new(Reset {
        sim: ctx.sim.clone(),
        notifies: side.own.clone(),
        done: ctx.board.proc(ctx.me, pw::BATCH_RESETS),
        errors: ctx.board.proc(ctx.me, pw::ERRORS),
    }));
    let enq = |r: Result<(), acl_notify_sim::SimError>| -> Result<(), String> {
        r.map_err(|e| format!("enqueue: {e}"))
    };
    let round_limit = Duration::from_secs(cfg.round_limit);
    for round in 0..cfg.handoffs {
        if ctx.aborted() {
            return false;
        }
        let r: Result<(), String> = (|| {
            if side.waiter {
                for i in rng.perm(k) {
                    enq(ctx
                        .sim
                        .wait_and_reset(side.own[i], stream, Timeout::Forever))?;
                    let arg = released[i] as *const Released as *const c_void;
                    enq(ctx.sim.launch_host_func(stream, host(on_released, arg)))?;
                }
                if rng.below(8) == 0 {
                    let arg = reset as *const Reset as *const c_void;
                    enq(ctx.sim.launch_host_func(stream, host(on_reset, arg)))?;
                }
                for i in rng.perm(k) {
                    enq(ctx.sim.record(side.imported[i], stream))?;
                }
            } else {
                for i in rng.perm(k) {
                    let arg = ctx.board.chan(chans[i], cw::STARTED) as *const AtomicU64;
                    enq(ctx
                        .sim
                        .launch_host_func(stream, host(on_started, arg.cast())))?;
                    if rng.below(16) == 0 {
                        std::thread::yield_now();
                    }
                    if cfg.sabotage && side.pair == 0 && i == 0 && round == 3 {
                        // Control experiment: a record counted but never issued.
                        continue;
                    }
                    enq(ctx.sim.record(side.imported[i], stream))?;
                }
                for i in rng.perm(k) {
                    enq(ctx
                        .sim
                        .wait_and_reset(side.own[i], stream, Timeout::Forever))?;
                }
                if rng.below(8) == 0 {
                    enq(ctx
                        .sim
                        .launch_host_func(stream, host(noop, std::ptr::null())))?;
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            if ctx.partner_dead(side.partner) {
                return false;
            }
            ctx.count(pw::ERRORS);
            ctx.violation(&format!("pair {}: {e}", side.pair));
            return false;
        }
        // Wait for the round, in bounded slices: a dead partner means abandon.
        let start = Instant::now();
        loop {
            match ctx.sim.synchronize(stream, SyncWait::AtMost(SYNC_SLICE)) {
                Ok(()) => break,
                Err(e) if e.kind() == Error::StreamSyncTimeout => {
                    ctx.count(pw::TIMEOUTS);
                    if ctx.partner_dead(side.partner) || ctx.aborted() {
                        return false;
                    }
                    if start.elapsed() > round_limit {
                        ctx.violation(&format!(
                            "pair {}: a round made no progress for {round_limit:?} with the \
                             partner (process {}) alive",
                            side.pair, side.partner.proc
                        ));
                        return false;
                    }
                }
                Err(e) => {
                    ctx.count(pw::ERRORS);
                    if !ctx.partner_dead(side.partner) {
                        ctx.violation(&format!("pair {}: synchronize: {e}", side.pair));
                    }
                    return false;
                }
            }
        }
        ctx.count(pw::ROUNDS);
    }
    true
}

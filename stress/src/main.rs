//! `acl-notify-stress` (run by `cargo xtask stress`): P worker processes × S streams × K
//! notify channels hand records back and forth through the simulator for M rounds each, while
//! the coordinator kills some workers with SIGKILL at random points (export, import, mid-run,
//! destroy). Afterwards it checks that every record was consumed by exactly one wait, that no
//! wait was released without a record, that every survivor finished (errors or timeouts, no
//! hang, no crash), and that a fresh process finds every notify id free again (an id orphaned
//! by a kill between allocating it and claiming its slot is freed only after the simulator's
//! repair grace period: the check waits for that, and reports it, before calling anything
//! leaked).
//!
//! Usage: `acl-notify-stress [--processes P] [--streams S] [--notifies K] [--handoffs M]
//! [--faults F] [--runs N] [--seed N] [--soc NAME] [--devices D] [--timeout SECS]`
//! (defaults 4, 2, 4, 20000, 2, 8 runs, time-based seed, Ascend910B, 2 devices, 240 s).
//! Each run uses the next seed and its own namespace. `--sabotage 1` is the control experiment:
//! one recorder counts a record it never issues, and the run must report the loss.
//! Exit status 0 only if nothing was lost and nothing else went wrong; the last line is
//! `lost: N`.

mod board;
mod plan;
mod worker;

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitCode};
use std::sync::atomic::Ordering::SeqCst;
use std::time::{Duration, Instant};

use acl_notify_core::{HostOps, Soc};
use acl_notify_sim::Sim;

use board::{Board, cw, hdr, phase, pw};
use plan::{Cfg, Rng};

fn usage() -> &'static str {
    "usage: acl-notify-stress [--processes P] [--streams S] [--notifies K] [--handoffs M] \
     [--faults F] [--runs N] [--seed N] [--soc NAME] [--devices D] [--timeout SECS] \
     [--round-limit SECS] [--namespace NS] [--sabotage 1]"
}

fn parse(args: &[String]) -> Result<(Cfg, Option<usize>, u64), String> {
    let mut cfg = Cfg {
        procs: 4,
        streams: 2,
        notifies: 4,
        handoffs: 20000,
        faults: 2,
        seed: 0,
        soc: Soc::Ascend910B,
        devices: 2,
        namespace: format!("stress-{}", std::process::id()),
        timeout: 240,
        round_limit: 30,
        sabotage: false,
    };
    let mut runs = 8u64;
    let mut worker = None;
    let mut check = false;
    let mut seed_given = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "worker" {
            let i = it.next().ok_or("worker needs an index")?;
            worker = Some(i.parse().map_err(|_| format!("bad worker index {i}"))?);
            continue;
        }
        if a == "check" {
            check = true;
            continue;
        }
        if a == "--help" || a == "-h" {
            return Err(usage().into());
        }
        let (k, v) = match a.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => (
                a.clone(),
                it.next()
                    .ok_or_else(|| format!("{a} needs a value"))?
                    .clone(),
            ),
        };
        let num = |v: &str| {
            v.parse::<u64>()
                .map_err(|_| format!("{k}: `{v}` is not a number"))
        };
        match k.as_str() {
            "--processes" => cfg.procs = num(&v)? as usize,
            "--streams" => cfg.streams = num(&v)? as usize,
            "--notifies" => cfg.notifies = num(&v)? as usize,
            "--handoffs" => cfg.handoffs = num(&v)?,
            "--faults" => cfg.faults = num(&v)? as usize,
            "--seed" => {
                cfg.seed = num(&v)?;
                seed_given = true;
            }
            "--soc" => cfg.soc = Soc::from_name(&v).map_err(|_| format!("unknown SoC {v}"))?,
            "--devices" => cfg.devices = num(&v)? as u32,
            "--namespace" => cfg.namespace = v,
            "--timeout" => cfg.timeout = num(&v)?,
            "--round-limit" => cfg.round_limit = num(&v)?,
            "--sabotage" => cfg.sabotage = num(&v)? != 0,
            "--runs" => runs = num(&v)?,
            _ => return Err(format!("unknown option {k}\n{}", usage())),
        }
    }
    if !seed_given && worker.is_none() {
        cfg.seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
    }
    if cfg.procs < 2 || cfg.streams == 0 || cfg.notifies == 0 || cfg.devices == 0 {
        return Err("need at least 2 processes, 1 stream, 1 notify and 1 device".into());
    }
    if !(cfg.procs * cfg.streams).is_multiple_of(2) {
        return Err("processes × streams must be even (streams are paired)".into());
    }
    if cfg.faults >= cfg.procs {
        return Err("at most processes − 1 faults".into());
    }
    if check {
        // `check`: the fresh process that looks at the namespace after a run.
        worker = Some(usize::MAX);
    }
    Ok((cfg, worker, runs.max(1)))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cfg, worker, runs) = match parse(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if worker == Some(usize::MAX) {
        return fresh_check(&cfg);
    }
    if let Some(i) = worker {
        return ExitCode::from(worker::run(&cfg, i) as u8);
    }
    let mut total = Outcome::default();
    let started = Instant::now();
    for r in 0..runs {
        let mut c = cfg.clone();
        c.seed = cfg.seed.wrapping_add(r);
        c.namespace = format!("{}-{r}", cfg.namespace);
        println!("\n== run {} of {runs}", r + 1);
        match coordinate(&c) {
            Ok(o) => total += o,
            Err(e) => {
                eprintln!("acl-notify-stress: {e}");
                total.problems += 1;
            }
        }
    }
    println!(
        "\nstress: {runs} runs in {:.1} s: processes: {} per run, streams: {} per process, \
         notifies: {} per stream pair, handoffs: {}, faults injected: {}, problems: {}",
        started.elapsed().as_secs_f64(),
        cfg.procs,
        cfg.streams,
        cfg.notifies,
        total.handoffs,
        total.faults,
        total.problems
    );
    println!("lost: {}", total.lost);
    if total.lost == 0 && total.problems == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// What one run found.
#[derive(Clone, Copy, Debug, Default)]
struct Outcome {
    handoffs: u64,
    faults: u64,
    lost: u64,
    /// Everything else that went wrong (crashes, hangs, violations, leaked ids).
    problems: u64,
}

impl std::ops::AddAssign for Outcome {
    fn add_assign(&mut self, o: Outcome) {
        self.handoffs += o.handoffs;
        self.faults += o.faults;
        self.lost += o.lost;
        self.problems += o.problems;
    }
}

/// Where a victim is to be killed.
#[derive(Clone, Copy, Debug)]
enum KillAt {
    /// While creating/exporting/whitelisting.
    Export,
    /// While importing.
    Import,
    /// After this many of its rounds (all its streams together).
    Rounds(u64),
    /// While destroying.
    Destroy,
}

struct Victim {
    proc: usize,
    at: KillAt,
    /// Phase and rounds when killed.
    killed: Option<(u64, u64)>,
}

/// Runs one stress run and reports it.
fn coordinate(cfg: &Cfg) -> Result<Outcome, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let pairs = cfg.pairs();
    let chans = cfg.channels();
    let _ = Sim::remove_namespace(&cfg.namespace);
    let board = Board::create(&cfg.board_path(), cfg.procs, chans)?;
    let cleanup = Cleanup(cfg.clone());
    // An observer connection (holds nothing): after the run its gc shows what the dead left.
    let observer = open_sim(cfg).map_err(|e| format!("open: {e}"))?;
    let mut rng = Rng(cfg.seed);
    println!(
        "acl-notify-stress: seed {}, {} with {} devices, namespace {}",
        cfg.seed, cfg.soc, cfg.devices, cfg.namespace
    );

    // Victims and their kill points.
    let streams_per_proc = cfg.streams as u64;
    let mut victims: Vec<Victim> = Vec::new();
    for p in rng.perm(cfg.procs).into_iter().take(cfg.faults) {
        let at = match rng.below(4) {
            0 => KillAt::Export,
            1 => KillAt::Import,
            2 => KillAt::Destroy,
            _ => KillAt::Rounds(1 + rng.below(cfg.handoffs * streams_per_proc)),
        };
        victims.push(Victim {
            proc: p,
            at,
            killed: None,
        });
    }

    let mut children: Vec<Option<Child>> = Vec::new();
    for i in 0..cfg.procs {
        let child = Command::new(&exe)
            .arg("worker")
            .arg(i.to_string())
            .args(cfg.to_args())
            .spawn()
            .map_err(|e| format!("spawn worker {i}: {e}"))?;
        board.proc(i, pw::PID).store(u64::from(child.id()), SeqCst);
        children.push(Some(child));
    }

    let start = Instant::now();
    let deadline = start + Duration::from_secs(cfg.timeout);
    let mut statuses: Vec<Option<std::process::ExitStatus>> = vec![None; cfg.procs];
    let mut problems = 0u32;
    let mut hung = Vec::new();
    loop {
        // Start once every worker is ready or gone.
        if board.hdr(hdr::GO).load(SeqCst) == 0
            && (0..cfg.procs).all(|p| {
                statuses[p].is_some() || board.proc(p, pw::PHASE).load(SeqCst) >= phase::READY
            })
        {
            board.hdr(hdr::GO).store(1, SeqCst);
        }
        for v in &mut victims {
            if v.killed.is_some() || statuses[v.proc].is_some() {
                continue;
            }
            let ph = board.proc(v.proc, pw::PHASE).load(SeqCst);
            let rounds = board.proc(v.proc, pw::ROUNDS).load(SeqCst);
            let due = match v.at {
                KillAt::Export => ph >= phase::EXPORT,
                KillAt::Import => ph >= phase::IMPORT,
                KillAt::Rounds(n) => ph > phase::RUN || (ph == phase::RUN && rounds >= n),
                KillAt::Destroy => ph >= phase::DESTROY,
            };
            if due && let Some(child) = children[v.proc].as_mut() {
                // Marked dead before the kill: a partner that meets an effect of the death
                // (its notify reclaimed, so an import fails with 107017) must find the mark
                // already, not race the reaping below for it.
                board.proc(v.proc, pw::DEAD).store(1, SeqCst);
                let _ = child.kill(); // SIGKILL
                let st = child.wait().map_err(|e| format!("reap: {e}"))?;
                statuses[v.proc] = Some(st);
                v.killed = Some((ph, rounds));
            }
        }
        for p in 0..cfg.procs {
            if statuses[p].is_none()
                && let Some(child) = children[p].as_mut()
                && let Ok(Some(st)) = child.try_wait()
            {
                statuses[p] = Some(st);
                // A worker that died on its own is reported below; partners must not wait.
                if st.code() != Some(0) {
                    board.proc(p, pw::DEAD).store(1, SeqCst);
                }
            }
        }
        if statuses.iter().all(Option::is_some) {
            break;
        }
        if Instant::now() > deadline {
            board.hdr(hdr::ABORT).store(1, SeqCst);
            for p in 0..cfg.procs {
                if statuses[p].is_none()
                    && let Some(child) = children[p].as_mut()
                {
                    let _ = child.kill();
                    statuses[p] = child.wait().ok();
                    hung.push(p);
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let elapsed = start.elapsed();

    // ---- accounting -------------------------------------------------------------------
    let killed: Vec<usize> = victims
        .iter()
        .filter(|v| v.killed.is_some())
        .map(|v| v.proc)
        .collect();
    let mut issued = 0u64;
    let mut released = 0u64;
    let mut lost = 0u64;
    let mut lost_to_kills = 0u64;
    let mut spurious = 0u64;
    for (g, pair) in pairs.iter().enumerate() {
        let faulted = killed.contains(&pair.waiter.proc) || killed.contains(&pair.recorder.proc);
        for k in 0..cfg.notifies {
            let c = g * cfg.notifies + k;
            let s = board.chan(c, cw::STARTED).load(SeqCst);
            let r = board.chan(c, cw::RELEASED).load(SeqCst);
            issued += s;
            released += r;
            spurious += board.chan(c, cw::SPURIOUS).load(SeqCst);
            if r > s {
                println!("channel {c}: {r} waits released for {s} records");
            }
            let missing = s.saturating_sub(r);
            if faulted {
                // At most the one handoff in flight when a process died.
                if missing > 1 {
                    println!(
                        "channel {c} (pair {g}, faulted): {missing} records not consumed, more \
                         than the one in flight"
                    );
                    lost += missing - 1;
                    lost_to_kills += 1;
                } else {
                    lost_to_kills += missing;
                }
            } else {
                if missing > 0 || s != cfg.handoffs {
                    println!(
                        "channel {c} (pair {g}, healthy): {s} records issued, {r} waits \
                         released, {} expected",
                        cfg.handoffs
                    );
                }
                lost += missing.max(cfg.handoffs.saturating_sub(r));
            }
        }
    }

    // Survivors: clean exits, what they saw.
    let mut timeouts = 0;
    let mut errors = 0;
    let mut violations = 0;
    let mut batch_resets = 0;
    let mut survivors_ok = 0;
    for (p, status) in statuses.iter().enumerate() {
        timeouts += board.proc(p, pw::TIMEOUTS).load(SeqCst);
        errors += board.proc(p, pw::ERRORS).load(SeqCst);
        violations += board.proc(p, pw::VIOLATIONS).load(SeqCst);
        batch_resets += board.proc(p, pw::BATCH_RESETS).load(SeqCst);
        if killed.contains(&p) {
            continue;
        }
        match status {
            Some(st) if st.success() => survivors_ok += 1,
            Some(st) => {
                problems += 1;
                let how = match st.signal() {
                    Some(sig) => format!("crashed with signal {sig}"),
                    None => format!("exited with {st}"),
                };
                println!(
                    "worker {p} {how} (phase {})",
                    phase::name(board.proc(p, pw::PHASE).load(SeqCst))
                );
            }
            None => problems += 1,
        }
    }
    for p in &hung {
        println!(
            "worker {p} HUNG past the {} s limit (phase {})",
            cfg.timeout,
            phase::name(board.proc(*p, pw::PHASE).load(SeqCst))
        );
    }

    // What the killed processes left behind, reclaimed now (the survivors may have done part
    // of it already, on their own opens and creates).
    let gc = observer.gc().map_err(|e| format!("gc: {e}"))?;
    drop(observer);
    // A fresh process finds every id of every device free.
    let max = cfg.soc.max_notifies();
    let out = Command::new(&exe)
        .arg("check")
        .args(cfg.to_args())
        .output()
        .map_err(|e| format!("fresh check process: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    let leaked: u32 = if out.status.success() {
        0
    } else {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        1
    };
    let repaired_late: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("repaired after the grace period: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);

    // ---- report -------------------------------------------------------------------------
    println!(
        "processes: {}  streams: {} per process  notifies: {} per stream pair ({} channels, {} \
         notifies)",
        cfg.procs,
        cfg.streams,
        cfg.notifies,
        chans,
        chans * 2
    );
    println!(
        "handoffs: {released} completed of {} planned (records issued {issued}, waits released \
         {released}, acknowledged likewise), {batch_resets} batch resets from host functions, \
         {:.1} s",
        chans as u64 * cfg.handoffs,
        elapsed.as_secs_f64()
    );
    let kills: Vec<String> = victims
        .iter()
        .filter_map(|v| {
            v.killed.map(|(ph, rounds)| {
                format!(
                    "worker {} during {} ({:?}, {rounds} rounds done)",
                    v.proc,
                    phase::name(ph),
                    v.at
                )
            })
        })
        .collect();
    println!("faults injected: {} ({})", kills.len(), kills.join("; "));
    println!(
        "survivors: {survivors_ok} of {} exited cleanly; they saw {timeouts} synchronize \
         timeouts and {errors} errors (waiting on killed partners), {violations} violations",
        cfg.procs - killed.len()
    );
    println!(
        "ids: {} in a fresh process after exit (the observer's gc reclaimed {} processes, {} \
         ids, {} queued waits)",
        if leaked == 0 && repaired_late == 0 {
            format!("all {max} free on each of {} devices", cfg.devices)
        } else if leaked == 0 {
            format!(
                "all {max} free on each of {} devices, {repaired_late} of them only after the \
                 repair grace period (orphaned by a kill between two steps of a create or \
                 destroy)",
                cfg.devices
            )
        } else {
            "NOT ALL FREE".to_owned()
        },
        gc.processes,
        gc.notifies_freed,
        gc.waits_cancelled
    );
    println!("lost to killed processes: {lost_to_kills} (in flight when they died; expected)");
    println!("waits released without a record: {spurious}");
    println!("lost in this run: {lost}");
    drop(cleanup);
    Ok(Outcome {
        handoffs: released,
        faults: kills.len() as u64,
        lost,
        problems: u64::from(problems) + spurious + violations + u64::from(leaked),
    })
}

fn open_sim(cfg: &Cfg) -> Result<Sim, acl_notify_sim::SimError> {
    Sim::builder()
        .soc(cfg.soc)
        .devices(cfg.devices)
        .namespace(&cfg.namespace)
        .open()
}

/// `check` mode: a process that opens the namespace afresh (its open runs the gc) and checks
/// that every device has all its ids free. A worker killed between two steps of a create or
/// destroy (after allocating an id, before claiming its slot) leaves an id that no reclaim can
/// attribute to it; the simulator frees such an id once it stayed orphaned for
/// [`acl_notify_sim::LEAK_REPAIR_GRACE`]. So if ids are missing, this waits that long, runs the
/// gc again and counts again: only ids still missing then are leaked. It prints
/// `repaired after the grace period: N` when it had to.
fn fresh_check(cfg: &Cfg) -> ExitCode {
    let sim = match open_sim(cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("fresh check: open: {e}");
            return ExitCode::FAILURE;
        }
    };
    let max = cfg.soc.max_notifies();
    // Free ids per device; the missing ones are what `max` minus those leaves.
    let free = |sim: &Sim| -> Result<Vec<u32>, String> {
        (0..cfg.devices)
            .map(|d| {
                sim.notifies_free(d)
                    .map_err(|e| format!("device {d}: notifies_free: {e}"))
            })
            .collect()
    };
    let missing = |free: &[u32]| -> u32 { free.iter().map(|&n| max.saturating_sub(n)).sum() };
    let first = match free(&sim) {
        Ok(f) if missing(&f) == 0 => return ExitCode::SUCCESS,
        Ok(f) => missing(&f),
        Err(e) => {
            println!("{e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "{first} ids not free after every worker exited; waiting out the simulator's {} s \
         repair grace period for ids orphaned mid-create or mid-destroy",
        acl_notify_sim::LEAK_REPAIR_GRACE.as_secs()
    );
    std::thread::sleep(acl_notify_sim::LEAK_REPAIR_GRACE + Duration::from_millis(500));
    if let Err(e) = sim.gc() {
        println!("gc: {e}");
        return ExitCode::FAILURE;
    }
    match free(&sim) {
        Ok(f) if missing(&f) == 0 => {
            println!("repaired after the grace period: {first}");
            ExitCode::SUCCESS
        }
        Ok(f) => {
            for (d, n) in f.iter().enumerate().filter(|&(_, &n)| n != max) {
                println!("device {d}: {n} of {max} ids free after the grace period");
            }
            println!("leaked: {} ids", missing(&f));
            ExitCode::FAILURE
        }
        Err(e) => {
            println!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Removes the namespace and the board file however the run ends.
struct Cleanup(Cfg);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = Sim::remove_namespace(&self.0.namespace);
        let _ = std::fs::remove_file(self.0.board_path());
    }
}

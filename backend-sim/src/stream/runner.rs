//! PROTOTYPE (issue #25, stage 2): in-process runners. A stream whose wait cannot go on
//! parks (its turn stays with the wait on top) and its home thread becomes the process's
//! runner if there is none: it runs the parked streams whose waits can go on, on its own
//! thread, without a context switch. A runner with nothing runnable for a while gives up and
//! hands every parked stream back to its home thread, which then waits the classic way.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use acl_notify_core::Error;

use super::worker::{BORROWED, HANDED, HOME, PARKED, Shared};
use super::{Job, lock};

/// A parked stream, as the runner sees it.
pub(super) trait Borrow: Send + Sync {
    fn can_go_on(&self) -> bool;
    fn run_borrowed(self: Arc<Self>);
    fn hand_home(&self);
    fn is_home_with_work(&self) -> bool;
}

impl<E: From<Error> + Send + 'static, J: Job<E>> Borrow for Shared<E, J> {
    fn can_go_on(&self) -> bool {
        self.parked_can_go_on()
    }
    fn run_borrowed(self: Arc<Self>) {
        self.run.store(BORROWED, Ordering::SeqCst);
        Shared::run_borrowed(&self);
    }
    fn hand_home(&self) {
        self.run.store(HANDED, Ordering::SeqCst);
        self.control.unpark_worker();
    }
    fn is_home_with_work(&self) -> bool {
        self.run.load(Ordering::SeqCst) == HOME && !self.ring.is_sleeping()
    }
}

pub(super) static STATS: [std::sync::atomic::AtomicU64; 12] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 12];
pub(crate) fn stat(i: usize) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if !*ON.get_or_init(|| std::env::var_os("PROTO_STATS").is_some()) {
        return;
    }
    STATS[i].fetch_add(1, Ordering::Relaxed);
    static START: std::sync::Once = std::sync::Once::new();
    START.call_once(|| {
        if std::env::var_os("PROTO_STATS").is_some() {
            std::thread::spawn(|| loop {
                std::thread::sleep(Duration::from_millis(300));
                use std::io::Write;
                let v: Vec<u64> = STATS.iter().map(|a| a.load(Ordering::Relaxed)).collect();
                let mut f = std::fs::OpenOptions::new().append(true).create(true).open("/tmp/engine/proto.log").unwrap();
                let _ = writeln!(f, "{} parks {} runs {} borrowed {} giveups {} handed {} ownwork {} | enqwake {} homepark {} homeneeded {} exitunpark {} raceunpark {} turnbusy {}", std::process::id(), v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11]);
            });
        }
    });
}

static LIST: Mutex<Vec<Arc<dyn Borrow>>> = Mutex::new(Vec::new());
static RUNNER: AtomicBool = AtomicBool::new(false);

/// How long a runner with nothing runnable keeps looking before it gives up.
const RUNNER_SPIN: Duration = Duration::from_micros(50);

/// Whether a runner is running.
pub(super) fn active() -> bool {
    RUNNER.load(Ordering::Relaxed)
}

/// Puts a stream (state `PARKED`) on the list (a runner exists: the list is not empty only
/// while one does, see `give_up`).
pub(super) fn push(s: Arc<dyn Borrow>) {
    lock(&LIST).push(s);
}

/// The home thread of `me` parked it: puts it on the list and becomes the runner if there is
/// none. Returns when this thread is no longer the runner.
pub(super) fn park(me: Arc<dyn Borrow>) {
    stat(0);
    lock(&LIST).push(Arc::clone(&me));
    if RUNNER
        .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        stat(1);
        run(&me);
    }
}

fn run(me: &Arc<dyn Borrow>) {
    let mut idle: Option<Instant> = None;
    let mut i = 0u32;
    loop {
        let pick = {
            let mut l = lock(&LIST);
            if l.is_empty() && !me.is_home_with_work() {
                break;
            }
            l.iter()
                .position(|s| s.can_go_on())
                .map(|i| l.swap_remove(i))
        };
        if let Some(s) = pick {
            stat(2);
            s.run_borrowed();
            idle = None;
            continue;
        }
        if me.is_home_with_work() {
            // Our own stream has new work: its home thread (this one) is busy running.
            stat(5);
            break;
        }
        i = i.wrapping_add(1);
        std::hint::spin_loop();
        if i.is_multiple_of(16) {
            let t = *idle.get_or_insert_with(Instant::now);
            if t.elapsed() >= RUNNER_SPIN {
                break;
            }
            if t.elapsed() >= Duration::from_micros(2) {
                std::thread::yield_now();
            }
        }
    }
    give_up();
    let _ = PARKED;
}

/// Stops being the runner: every parked stream goes back to its home thread.
fn give_up() {
    RUNNER.store(false, Ordering::SeqCst);
    let all = std::mem::take(&mut *lock(&LIST));
    stat(3);
    for s in all {
        stat(4);
        s.hand_home();
    }
}

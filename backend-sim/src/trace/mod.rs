//! The timeline: with `ACL_NOTIFY_SIM_TRACE=DIR` every process writes what its streams do
//! (records, waits, host functions, memory copies and sets, event records and waits) as
//! Chrome trace events, one file per process; [`merge`] joins a run's files into one timeline
//! with an arrow from each record to the wait it released, and [`html`] draws it as a page.
//!
//! # Writing
//!
//! Each thread appends its events, one JSON object a line, to a buffer of its own (a stream's
//! events are written on its worker thread, so per thread is per stream). A buffer goes to the
//! process's file `DIR/acl-notify-trace-<pid>.json` when it passes [`FLUSH_BYTES`], when its
//! thread exits (a stream's destroy joins its worker) and at process exit (`atexit`). The
//! file is in the trace format's array form without its closing bracket, which the format
//! allows so that a process that dies still leaves a readable file: a process killed with
//! SIGKILL loses only what its threads had not flushed yet (at most [`FLUSH_BYTES`] a thread).
//!
//! Time stamps are `CLOCK_MONOTONIC` (the same clock in every process of the machine) in
//! microseconds. A track is a stream's worker thread: `pid` the process, `tid` the worker's
//! kernel thread id; metadata events name the process (its label, see
//! [`crate::waitgraph::process_label`]) and each stream (its handle as the C caller sees it).
//!
//! # Cost when off
//!
//! Tracing is decided once, when the first `Sim` of the process starts. Off, queueing a
//! record, a wait or a host function pays one relaxed load of a static flag and a branch
//! ([`on`]); on, the job is queued wrapped (as a boxed task that writes it down), so the stream's worker runs the
//! same code with the timeline off as without it. Memory and event tasks check the flag in
//! [`span`].

pub mod cli;
pub mod html;
pub(crate) mod job;
pub mod merge;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::{Value, json};

use crate::fork::PerProcess;

/// The environment variable that turns the timeline on: the directory the files go to.
pub const ENV_TRACE: &str = "ACL_NOTIFY_SIM_TRACE";

/// A thread's buffer goes to the file once it holds this many bytes.
pub const FLUSH_BYTES: usize = 64 * 1024;

/// The prefix of every trace file's name (`<prefix><pid>.json`).
pub const FILE_PREFIX: &str = "acl-notify-trace-";

/// Whether this process writes a timeline.
static ON: AtomicBool = AtomicBool::new(false);

/// Whether [`init`] has looked at the environment.
static CHECKED: AtomicBool = AtomicBool::new(false);

/// Where the files go: set once, by [`init`], to a leaked `PathBuf` (a pointer and not a
/// `OnceLock`, so that a child forked while [`init`] ran never blocks on it).
static DIR: AtomicPtr<PathBuf> = AtomicPtr::new(std::ptr::null_mut());

/// The directory [`init`] set, if any.
fn dir() -> Option<&'static PathBuf> {
    // SAFETY: a non-null `DIR` is a `Box::into_raw` published once by `init`, never freed.
    unsafe { DIR.load(Ordering::Acquire).as_ref() }
}

/// Whether this process writes a timeline: one relaxed load, for the hot path.
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Reads [`ENV_TRACE`] once per process (every `Sim` calls it; only the first looks). A
/// directory that cannot be created turns tracing off with a note on stderr: a timeline is
/// a diagnostic and must not stop the program.
pub fn init() {
    if CHECKED.swap(true, Ordering::SeqCst) {
        return;
    }
    let Some(dir) = std::env::var_os(ENV_TRACE).filter(|d| !d.is_empty()) else {
        return;
    };
    let dir = PathBuf::from(dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!(
            "acl-notify: {ENV_TRACE}={}: cannot create the directory ({e}); no timeline is written",
            dir.display()
        );
        return;
    }
    DIR.store(Box::into_raw(Box::new(dir)), Ordering::Release);
    // SAFETY: `at_exit` is an `extern "C" fn()` that catches every panic, so it never unwinds.
    unsafe { libc::atexit(at_exit) };
    ON.store(true, Ordering::SeqCst);
}

/// A thread's pending events.
struct Buf {
    /// The process the events were written in (a forked child drops its parent's).
    pid: i32,
    /// The thread: the track the events belong to.
    tid: i32,
    data: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Every live thread's buffer, for the exit handler. This and the two below are
/// [`PerProcess`] locks, so that a child forked while another thread held one gets its own.
static BUFS: PerProcess<Vec<Arc<Mutex<Buf>>>> = PerProcess::new(Vec::new);

/// Track names: worker thread id → the stream's name (updated when the C library names the
/// stream by its handle).
static TRACKS: PerProcess<BTreeMap<i32, String>> = PerProcess::new(BTreeMap::new);

/// The open file, with the pid it belongs to.
static FILE: PerProcess<Option<(i32, File)>> = PerProcess::new(|| None);

/// This thread's buffer; its drop (at thread exit) flushes it.
struct Mine(Arc<Mutex<Buf>>);

impl Drop for Mine {
    fn drop(&mut self) {
        flush_buf(&mut lock(&self.0));
        lock(BUFS.get()).retain(|b| !Arc::ptr_eq(b, &self.0));
    }
}

thread_local! {
    static MINE: RefCell<Option<Mine>> = const { RefCell::new(None) };
}

fn gettid() -> i32 {
    // SAFETY: gettid(2) has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Appends one event (its `pid` and `tid` filled in) to this thread's buffer.
fn push(mut event: Value) {
    let pid = crate::sys::getpid();
    let _ = MINE.try_with(|m| {
        let mut m = m.borrow_mut();
        let mine = m.get_or_insert_with(|| {
            let b = Arc::new(Mutex::new(Buf {
                pid,
                tid: gettid(),
                data: Vec::new(),
            }));
            lock(BUFS.get()).push(Arc::clone(&b));
            Mine(b)
        });
        let mut b = lock(&mine.0);
        if b.pid != pid {
            // A forked child: what the parent had buffered is the parent's to write.
            b.data.clear();
            b.pid = pid;
            b.tid = gettid();
        }
        event["pid"] = json!(pid);
        event["tid"] = json!(b.tid);
        if serde_json::to_writer(&mut b.data, &event).is_ok() {
            b.data.extend_from_slice(b",\n");
        }
        if b.data.len() >= FLUSH_BYTES {
            flush_buf(&mut b);
        }
    });
}

/// Microseconds (the format's unit) from nanoseconds, keeping the nanoseconds.
fn us(ns: u64) -> Value {
    json!(ns as f64 / 1000.0)
}

/// A complete event (`ph: "X"`) on the calling thread's track: `name` from `start_ns` for
/// `dur_ns` (`CLOCK_MONOTONIC`, [`now_ns`]), with `args`.
pub fn complete(cat: &str, name: &str, start_ns: u64, dur_ns: u64, args: Value) {
    push(json!({
        "ph": "X",
        "cat": cat,
        "name": name,
        "ts": us(start_ns),
        "dur": us(dur_ns),
        "args": args,
    }));
}

/// The trace clock: `CLOCK_MONOTONIC` in nanoseconds.
#[inline]
pub fn now_ns() -> u64 {
    crate::sys::now_ns()
}

/// Times `f` and writes it as a complete event on the calling thread's track (nothing, and
/// no clock read, when tracing is off).
#[inline]
pub fn span<R>(cat: &str, name: &str, args: impl FnOnce() -> Value, f: impl FnOnce() -> R) -> R {
    if !on() {
        return f();
    }
    let t0 = now_ns();
    let r = f();
    let t1 = now_ns();
    complete(cat, name, t0, t1.saturating_sub(t0), args());
    r
}

/// Names the track of worker thread `tid` (a stream) in this process's timeline.
pub fn name_track(tid: i32, name: String) {
    if on() {
        lock(TRACKS.get()).insert(tid, name);
    }
}

/// A stream's track name: its handle as the C caller sees it, and its device.
pub fn stream_name(handle: u64, device: u32, default: bool) -> String {
    if default {
        format!("default stream {handle:#x} (device {device})")
    } else {
        format!("stream {handle:#x} (device {device})")
    }
}

/// The metadata lines that name this process and its tracks.
fn metadata(pid: i32) -> Vec<u8> {
    let label = crate::waitgraph::process_label();
    let pname = match &label {
        Some(l) => format!("{l} (pid {pid})"),
        None => format!("pid {pid}"),
    };
    let mut out = Vec::new();
    let mut line = |v: Value| {
        if serde_json::to_writer(&mut out, &v).is_ok() {
            out.extend_from_slice(b",\n");
        }
    };
    line(
        json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                "args": {"name": pname, "label": label.unwrap_or_default()}}),
    );
    for (tid, name) in lock(TRACKS.get()).iter() {
        line(
            json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": name}}),
        );
    }
    out
}

/// Writes `bytes` to this process's file (opening it, and writing the array's opening
/// bracket, on first use in this process).
fn write_file(pid: i32, bytes: &[u8]) {
    let Some(dir) = dir() else { return };
    let mut f = lock(FILE.get());
    if f.as_ref().is_none_or(|(p, _)| *p != pid) {
        let path = dir.join(format!("{FILE_PREFIX}{pid}.json"));
        let fresh = !path.exists();
        match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(mut file) => {
                if fresh {
                    let _ = file.write_all(b"[\n");
                }
                *f = Some((pid, file));
            }
            Err(e) => {
                eprintln!(
                    "acl-notify: cannot write the timeline to {} ({e})",
                    path.display()
                );
                return;
            }
        }
    }
    if let Some((_, file)) = f.as_mut() {
        // One write per flush: the lines of one buffer stay together.
        let mut all = metadata(pid);
        all.extend_from_slice(bytes);
        let _ = file.write_all(&all);
    }
}

fn flush_buf(b: &mut Buf) {
    if b.data.is_empty() {
        return;
    }
    let pid = crate::sys::getpid();
    if b.pid != pid {
        b.data.clear();
        return;
    }
    let data = std::mem::take(&mut b.data);
    write_file(pid, &data);
    b.data = data;
    b.data.clear();
}

/// Flushes every thread's buffer (threads busy appending are skipped: they flush at their
/// own exit, or lose what they hold if the process is ending under them).
pub fn flush_all() {
    let Ok(bufs) = BUFS.get().try_lock() else {
        return;
    };
    for b in bufs.iter() {
        if let Ok(mut b) = b.try_lock() {
            flush_buf(&mut b);
        }
    }
}

extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(flush_all);
}

#[cfg(test)]
mod tests;

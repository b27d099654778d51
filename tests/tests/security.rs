//! Security tests of the simulator, with real processes: the whitelist keeps out processes not
//! on it (207006), a recycled PID is not let in, tampered and guessed keys open nothing, the
//! shared state is created mode 0600 and refused when its owner or mode is wrong, and no file
//! descriptor or mapping of the shared state leaks into child processes.
//!
//! The test binary plays every part: run normally it lists the trials (libtest-mimic); run with
//! `ACL_SEC_ROLE` set it is a child process playing that role (an importer that reads keys on
//! stdin and prints the codes, an opener, a file creator with umask 0, an inspector of its own
//! `/proc/self`). Every child has a hard deadline and is killed on failure.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use acl_notify_core::{
    Backend, BackendError, CreateFlags, ExportFlags, ExportKey, ImportFlags, KeyFields,
    NotifyResources, Soc, StreamOps, SyncWait,
};
use acl_notify_sim::Sim;
use libtest_mimic::{Arguments, Failed, Trial};

const ENV_ROLE: &str = "ACL_SEC_ROLE";
const ENV_NS: &str = "ACL_SEC_NAMESPACE";
const SOC: Soc = Soc::Ascend910B;
const DEVICES: u32 = 2;
/// How long any one answer from a child may take, in time the child could run
/// ([`acl_notify_tests::progress::Watch`]: not while it is stopped, nor the share it waited for
/// a CPU; a bound of wall time broke when the machine paused or starved it).
const STEP: Duration = Duration::from_secs(20);

/// A watch on child `pid` (its own process group) with the limit [`STEP`].
fn watch(pid: u32) -> acl_notify_tests::progress::Watch {
    acl_notify_tests::progress::Watch::new(&[pid], Some(STEP))
}

type R = Result<(), Failed>;

fn main() {
    if let Ok(role) = std::env::var(ENV_ROLE) {
        std::process::exit(child_main(&role));
    }
    let args = Arguments::from_args();
    let trials = vec![
        Trial::test("whitelist_keeps_out_unlisted_processes", whitelist),
        Trial::test("recycled_pid_is_not_let_in", recycled_pid),
        Trial::test("tampered_and_guessed_keys_open_nothing", keys),
        Trial::test(
            "shared_state_is_0600_and_refused_if_owner_or_mode_wrong",
            file_mode,
        ),
        Trial::test("no_fd_or_mapping_leaks_into_children", no_leaks),
    ];
    libtest_mimic::run(&args, trials).exit();
}

// ---- helpers -------------------------------------------------------------------------------

fn fail(msg: impl Into<String>) -> Failed {
    Failed::from(msg.into())
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(fail(format!($($fmt)*)));
        }
    };
}

/// A namespace removed when the test ends (also on failure).
struct Ns(String);

impl Ns {
    fn new(tag: &str) -> Ns {
        let ns = format!("sec-{tag}-{}", std::process::id());
        let _ = Sim::remove_namespace(&ns);
        Ns(ns)
    }

    fn open(&self) -> Result<Sim, Failed> {
        open_ns(&self.0).map_err(|e| fail(format!("open {}: {e}", self.0)))
    }

    /// The shared file of server 0 (its name is the simulator's documented layout).
    fn file(&self) -> PathBuf {
        PathBuf::from(format!("/dev/shm/acl-notify-sim.{}.srv0", self.0))
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Sim::remove_namespace(&self.0);
    }
}

fn open_ns(ns: &str) -> Result<Sim, acl_notify_sim::SimError> {
    Sim::builder()
        .soc(SOC)
        .devices(DEVICES)
        .namespace(ns)
        .open()
}

/// A child process playing a role, with its stdout read line by line on a thread.
struct Kid {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    role: String,
}

impl Kid {
    fn spawn(role: &str, ns: &str) -> Result<Kid, Failed> {
        let exe = std::env::current_exe().map_err(|e| fail(format!("current_exe: {e}")))?;
        let mut child = Command::new(exe)
            // Its own process group, which its watch looks at.
            .process_group(0)
            .env(ENV_ROLE, role)
            .env(ENV_NS, ns)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| fail(format!("spawn {role}: {e}")))?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Kid {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            role: role.to_owned(),
        })
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// The next line the child prints (bounded wait).
    fn line(&self) -> Result<String, Failed> {
        // Made once the first slice passed (a look reads `/proc`).
        let mut w = None;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => return Ok(l),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(hang) = w.get_or_insert_with(|| watch(self.child.id())).step() {
                        return Err(fail(format!(
                            "{} (pid {}) gave no answer: it {hang}",
                            self.role,
                            self.pid()
                        )));
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(fail(format!(
                        "{} (pid {}) exited without answering",
                        self.role,
                        self.pid()
                    )));
                }
            }
        }
    }

    /// Reads lines until one starts with `prefix`; returns the rest.
    fn expect(&self, prefix: &str) -> Result<String, Failed> {
        loop {
            let l = self.line()?;
            if let Some(rest) = l.strip_prefix(prefix) {
                return Ok(rest.trim().to_owned());
            }
        }
    }

    fn send(&mut self, line: &str) -> R {
        let w = self.stdin.as_mut().ok_or_else(|| fail("stdin closed"))?;
        writeln!(w, "{line}").map_err(|e| fail(format!("write to {}: {e}", self.role)))?;
        w.flush().map_err(|e| fail(format!("flush: {e}")))
    }

    /// Asks an importer child to import `key`; returns its code (0 = success) and message.
    fn import(&mut self, key: &str) -> Result<(i32, String), Failed> {
        self.send(&format!("import {key}"))?;
        let rest = self.expect("code ")?;
        let (code, msg) = rest.split_once(' ').unwrap_or((&rest, ""));
        let code = code
            .parse()
            .map_err(|_| fail(format!("bad answer `{rest}`")))?;
        Ok((code, msg.to_owned()))
    }

    /// Closes stdin and waits (bounded) for a clean exit.
    fn finish(mut self) -> R {
        drop(self.stdin.take());
        let mut w = watch(self.child.id());
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) if st.success() => return Ok(()),
                Ok(Some(st)) => return Err(fail(format!("{} exited with {st}", self.role))),
                Ok(None) => {
                    if let Err(hang) = w.step() {
                        return Err(fail(format!("{} did not exit: it {hang}", self.role)));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(fail(format!("wait: {e}"))),
            }
        }
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn start_time(pid: i32) -> Result<u64, Failed> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| fail(format!("/proc/{pid}/stat: {e}")))?;
    let rest = &text[text.rfind(')').ok_or_else(|| fail("bad stat"))? + 1..];
    rest.split_ascii_whitespace()
        .nth(19)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| fail("no start time in stat"))
}

/// An importer child, started and reporting its pid.
fn importer(ns: &Ns) -> Result<Kid, Failed> {
    let kid = Kid::spawn("importer", &ns.0)?;
    let pid: i32 = kid
        .expect("pid ")?
        .parse()
        .map_err(|_| fail("bad pid line"))?;
    ensure!(
        pid == kid.pid(),
        "importer reports pid {pid}, spawned {}",
        kid.pid()
    );
    Ok(kid)
}

// ---- child roles ---------------------------------------------------------------------------

fn child_main(role: &str) -> i32 {
    let ns = std::env::var(ENV_NS).unwrap_or_default();
    let out = std::io::stdout();
    let mut out = out.lock();
    let r = match role {
        "importer" => role_importer(&ns, &mut out),
        "open" => {
            match open_ns(&ns) {
                Ok(_) => {
                    let _ = writeln!(out, "open ok");
                }
                Err(e) => {
                    let _ = writeln!(out, "open err {} {e}", e.kind().code());
                }
            }
            Ok(())
        }
        "create-umask0" => {
            // SAFETY: umask only changes this process's file-creation mask.
            unsafe { libc::umask(0) };
            match open_ns(&ns) {
                Ok(sim) => {
                    let md = std::fs::metadata(sim.shm_path());
                    match md {
                        Ok(md) => {
                            let _ = writeln!(
                                out,
                                "created mode {:o} uid {}",
                                md.permissions().mode() & 0o7777,
                                md.uid()
                            );
                        }
                        Err(e) => {
                            let _ = writeln!(out, "created stat-failed {e}");
                        }
                    }
                    Ok(())
                }
                Err(e) => Err(format!("open: {e}")),
            }
        }
        "inspect" => {
            for e in std::fs::read_dir("/proc/self/fd")
                .into_iter()
                .flatten()
                .flatten()
            {
                let target = std::fs::read_link(e.path()).unwrap_or_default();
                let _ = writeln!(
                    out,
                    "fd {} {}",
                    e.file_name().to_string_lossy(),
                    target.display()
                );
            }
            for l in std::fs::read_to_string("/proc/self/maps")
                .unwrap_or_default()
                .lines()
            {
                let _ = writeln!(out, "map {l}");
            }
            let _ = writeln!(out, "inspect done");
            Ok(())
        }
        other => Err(format!("unknown role {other}")),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("security child {role}: {e}");
            1
        }
    }
}

fn role_importer(ns: &str, out: &mut impl Write) -> Result<(), String> {
    let sim = open_ns(ns).map_err(|e| format!("open: {e}"))?;
    writeln!(out, "pid {}", sim.bare_tgid()).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    let mut held = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let Some(key) = line.strip_prefix("import ") else {
            continue;
        };
        let answer = match sim.import_by_key(0, key, ImportFlags::empty()) {
            Ok(n) => {
                held.push(n);
                "code 0 ok".to_owned()
            }
            Err(e) => format!("code {} {e}", e.kind().code()),
        };
        writeln!(out, "{answer}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    for n in held {
        sim.destroy_notify(n).map_err(|e| format!("destroy: {e}"))?;
    }
    Ok(())
}

// ---- tests ---------------------------------------------------------------------------------

/// A process not on the whitelist gets 207006; one on it gets in; an open export needs none.
fn whitelist() -> R {
    let ns = Ns::new("wl");
    let sim = ns.open()?;
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::empty())?;
    let mut a = importer(&ns)?;
    let mut b = importer(&ns)?;

    let (c, msg) = a.import(key.as_str())?;
    ensure!(c == 207006, "import before any whitelist: {c} {msg}");
    sim.set_import_pids(n, &[b.pid()])?;
    let (c, msg) = a.import(key.as_str())?;
    ensure!(c == 207006, "unlisted process imported: {c} {msg}");
    ensure!(
        msg.contains(&a.pid().to_string()) && msg.contains("not whitelisted"),
        "the refusal does not say who and why: {msg}"
    );
    let (c, msg) = b.import(key.as_str())?;
    ensure!(c == 0, "whitelisted process refused: {c} {msg}");
    // Control: once listed, `a` gets in too.
    sim.set_import_pids(n, &[a.pid()])?;
    let (c, msg) = a.import(key.as_str())?;
    ensure!(c == 0, "after whitelisting: {c} {msg}");

    // An export with DISABLE_PID_VALIDATION needs no whitelist (and accepts none).
    let open = sim.create_notify(0, CreateFlags::empty())?;
    let okey = sim.export_key(open, ExportFlags::DISABLE_PID_VALIDATION)?;
    let e = sim.set_import_pids(open, &[a.pid()]).err();
    ensure!(
        e.as_ref().map(|e| e.kind().code()) == Some(207006),
        "whitelist on an open export: {e:?}"
    );
    let (c, msg) = a.import(okey.as_str())?;
    ensure!(c == 0, "open export refused: {c} {msg}");
    a.finish()?;
    b.finish()?;
    sim.destroy_notify(n)?;
    sim.destroy_notify(open)?;
    Ok(())
}

/// A whitelist entry for the same PID but another start time (the PID of a process that
/// exited, now reused by a new process) does not let the new process in.
///
/// The kernel cannot be made to recycle a PID on demand, so the owner writes the entry the
/// simulator would have written for the earlier process (same pid, its start time) through the
/// simulator's test hook `set_import_pid_with_start_time`; the importer is the real process
/// now holding that PID.
fn recycled_pid() -> R {
    let ns = Ns::new("pid");
    let sim = ns.open()?;
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::empty())?;
    let mut a = importer(&ns)?;
    let real = start_time(a.pid())?;
    for earlier in [real.saturating_sub(1), real / 2, 1] {
        if earlier == real {
            continue;
        }
        sim.set_import_pid_with_start_time(n, a.pid(), earlier)?;
        let (c, msg) = a.import(key.as_str())?;
        ensure!(
            c == 207006,
            "recycled pid let in (entry start {earlier}, real {real}): {c} {msg}"
        );
        ensure!(
            msg.contains("recycled"),
            "the refusal does not name the cause: {msg}"
        );
    }
    // Control: the entry written for this very process (its real start time) lets it in.
    sim.set_import_pids(n, &[a.pid()])?;
    let (c, msg) = a.import(key.as_str())?;
    ensure!(c == 0, "the real process refused: {c} {msg}");
    a.finish()?;
    sim.destroy_notify(n)?;
    Ok(())
}

/// SplitMix64 for reproducible "random" keys.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Flipping any field of a real key (re-encoded, so the checksum is right), breaking any
/// character, or guessing well-formed keys gives 107017 or 107000 — never a handle — to a
/// process that is whitelisted and holds the real key (which, as the control, does open).
fn keys() -> R {
    let ns = Ns::new("key");
    let sim = ns.open()?;
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let key = sim.export_key(n, ExportFlags::empty())?;
    let mut a = importer(&ns)?;
    sim.set_import_pids(n, &[a.pid()])?;
    let f = key
        .fields()
        .ok_or("the simulator's key has no readable fields")?;

    let mut bad: Vec<(String, String)> = Vec::new();
    let mut variant = |what: String, k: KeyFields| {
        bad.push((what, ExportKey::encode(&k).as_str().to_owned()));
    };
    variant(
        "server ^ 1".into(),
        KeyFields {
            server: f.server ^ 1,
            ..f
        },
    );
    variant(
        "device ^ 1".into(),
        KeyFields {
            device: f.device ^ 1,
            ..f
        },
    );
    variant("device 200".into(), KeyFields { device: 200, ..f });
    variant("id ^ 1".into(), KeyFields { id: f.id ^ 1, ..f });
    variant("id 65535".into(), KeyFields { id: u16::MAX, ..f });
    variant(
        "generation + 1".into(),
        KeyFields {
            generation: f.generation.wrapping_add(1),
            ..f
        },
    );
    variant(
        "generation - 1".into(),
        KeyFields {
            generation: f.generation.wrapping_sub(1),
            ..f
        },
    );
    for byte in 0..16 {
        for bit in [0u8, 7] {
            let mut nonce = f.nonce;
            nonce[byte] ^= 1 << bit;
            variant(
                format!("nonce byte {byte} bit {bit}"),
                KeyFields { nonce, ..f },
            );
        }
    }
    // Guesses: everything public right (server, device, id, generation), the nonce random.
    let mut rng = Rng(0x5eed_0000 ^ u64::from(f.id));
    for i in 0..100 {
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&rng.next().to_le_bytes());
        nonce[8..].copy_from_slice(&rng.next().to_le_bytes());
        variant(format!("guessed nonce #{i}"), KeyFields { nonce, ..f });
    }
    // Guesses with every field random (ids near the real one to hit live slots).
    for i in 0..100 {
        let r = rng.next();
        let mut nonce = [0u8; 16];
        nonce[..8].copy_from_slice(&rng.next().to_le_bytes());
        nonce[8..].copy_from_slice(&rng.next().to_le_bytes());
        variant(
            format!("random key #{i}"),
            KeyFields {
                server: if i % 2 == 0 { 0 } else { r as u16 },
                device: (r >> 16) as u8 % 3,
                id: ((r >> 24) as u16) % 8,
                generation: (r >> 40) as u32 % 4,
                nonce,
            },
        );
    }
    // Every character broken (another hex digit, or a non-hex byte): malformed, 107000.
    let text = key.as_str().as_bytes();
    let mut malformed = Vec::new();
    for pos in 0..text.len() {
        let mut t = text.to_vec();
        t[pos] = if t[pos] == b'0' { b'1' } else { b'0' };
        if pos % 5 == 0 {
            t[pos] = b'x';
        }
        malformed.push(String::from_utf8_lossy(&t).into_owned());
    }
    ensure!(bad.len() > 230, "built {} tampered keys", bad.len());

    for (what, k) in &bad {
        let (c, msg) = a.import(k)?;
        ensure!(c != 0, "tampered key ({what}) opened a notify: {k}");
        ensure!(
            c == 107017 || c == 107000,
            "tampered key ({what}): code {c} {msg}"
        );
    }
    for k in &malformed {
        let (c, msg) = a.import(k)?;
        ensure!(c == 107000, "malformed key {k}: code {c} {msg}");
    }
    // Control: the real key opens.
    let (c, msg) = a.import(key.as_str())?;
    ensure!(c == 0, "the real key was refused: {c} {msg}");
    a.finish()?;

    // A key of a destroyed notify (and of an id reused since) opens nothing either.
    sim.destroy_notify(n)?;
    let mut b = importer(&ns)?;
    let (c, msg) = b.import(key.as_str())?;
    ensure!(c == 107017, "key of a destroyed notify: {c} {msg}");
    let again = sim.create_notify(0, CreateFlags::empty())?;
    let k2 = sim.export_key(again, ExportFlags::DISABLE_PID_VALIDATION)?;
    let f2 = k2
        .fields()
        .ok_or("the simulator's key has no readable fields")?;
    if f2.id == f.id {
        ensure!(
            f2.generation != f.generation,
            "reused id kept its generation"
        );
    }
    let (c, msg) = b.import(key.as_str())?;
    ensure!(c == 107017, "old key after the id may be reused: {c} {msg}");
    b.finish()?;
    sim.destroy_notify(again)?;
    Ok(())
}

/// The shared file is created 0600 (even under umask 0) and owned by the user; an opener
/// refuses it, with a message naming the file and the problem, when its mode or owner is wrong
/// or when it is a symbolic link.
fn file_mode() -> R {
    let ns = Ns::new("mode");
    let kid = Kid::spawn("create-umask0", &ns.0)?;
    let created = kid.expect("created ")?;
    kid.finish()?;
    let euid = std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .unwrap_or(u32::MAX);
    ensure!(
        created == format!("mode 600 uid {euid}"),
        "created with umask 0: {created} (want mode 600 uid {euid})"
    );
    let path = ns.file();
    ensure!(path.exists(), "{} does not exist", path.display());

    let open_in_child = || -> Result<String, Failed> {
        let kid = Kid::spawn("open", &ns.0)?;
        let r = kid.expect("open ")?;
        kid.finish()?;
        Ok(r)
    };
    ensure!(
        open_in_child()? == "ok",
        "control: a 0600 file of ours opens"
    );

    for mode in [0o644, 0o640, 0o666, 0o700, 0o400] {
        set_mode(&path, mode)?;
        let r = open_in_child()?;
        ensure!(
            r.starts_with("err ") && r.contains(&format!("{mode:04o}")) && r.contains("0600"),
            "mode {mode:o}: {r}"
        );
        ensure!(
            r.contains(&path.display().to_string()),
            "message does not name the file: {r}"
        );
    }
    set_mode(&path, 0o600)?;
    ensure!(open_in_child()? == "ok", "back to 0600 opens again");

    // Owner: only root can give the file away; elsewhere this part cannot be staged.
    if euid == 0 {
        chown(&path, 65534)?;
        let r = open_in_child()?;
        chown(&path, 0)?;
        ensure!(
            r.starts_with("err ") && r.contains("owned by uid 65534"),
            "foreign-owned file: {r}"
        );
    } else {
        eprintln!("note: not root, the foreign-owner case is not staged");
    }

    // A symbolic link planted in place of the file is not followed.
    let real = path.with_extension("moved");
    std::fs::rename(&path, &real).map_err(|e| fail(format!("rename: {e}")))?;
    std::os::unix::fs::symlink(&real, &path).map_err(|e| fail(format!("symlink: {e}")))?;
    let r = open_in_child()?;
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::rename(&real, &path);
    ensure!(r.starts_with("err "), "a symlink was followed: {r}");
    Ok(())
}

fn set_mode(p: &Path, mode: u32) -> R {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode))
        .map_err(|e| fail(format!("chmod {mode:o} {}: {e}", p.display())))
}

fn chown(p: &Path, uid: u32) -> R {
    std::os::unix::fs::chown(p, Some(uid), None)
        .map_err(|e| fail(format!("chown {uid} {}: {e}", p.display())))
}

/// With the simulator open and busy (a notify exported, a stream that ran tasks), a child
/// started with `Command` sees no descriptor and no mapping of the shared state; and every
/// descriptor the parent itself keeps on it is close-on-exec.
fn no_leaks() -> R {
    let ns = Ns::new("leak");
    let sim = ns.open()?;
    let n = sim.create_notify(0, CreateFlags::empty())?;
    let _key = sim.export_key(n, ExportFlags::DISABLE_PID_VALIDATION)?;
    let s = sim.create_stream(0)?;
    sim.record(n, s)?;
    sim.synchronize(s, SyncWait::AtMost(Duration::from_secs(10)))?;
    let name = format!("acl-notify-sim.{}", ns.0);

    // The check can see the mapping: the parent has it.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    ensure!(
        maps.contains(&name),
        "control: the parent's maps do not show {name}"
    );
    // Parent descriptors on the file, if any, carry O_CLOEXEC.
    for e in std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
    {
        let target = std::fs::read_link(e.path()).unwrap_or_default();
        if target.to_string_lossy().contains(&name) {
            let fd = e.file_name().to_string_lossy().into_owned();
            let info =
                std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap_or_default();
            let flags = info
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok())
                .unwrap_or(0);
            ensure!(
                flags & libc::O_CLOEXEC as u32 != 0,
                "fd {fd} on {} is not close-on-exec (flags {flags:o})",
                target.display()
            );
        }
    }

    let kid = Kid::spawn("inspect", &ns.0)?;
    let mut lines = Vec::new();
    loop {
        let l = kid.line()?;
        if l == "inspect done" {
            break;
        }
        lines.push(l);
    }
    kid.finish()?;
    ensure!(
        lines.iter().any(|l| l.starts_with("map ")),
        "the child printed no maps"
    );
    let leaked: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains(&name) || l.contains("/dev/shm/acl-notify"))
        .collect();
    ensure!(leaked.is_empty(), "leaked into the child: {leaked:?}");
    sim.destroy_stream(s, acl_notify_core::StreamDestroy::Drain)?;
    sim.destroy_notify(n)?;
    Ok(())
}

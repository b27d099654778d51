//! Whitelist entries name a process, not a PID (issue 22, item 4): an entry made for a PID
//! that no process had at the time admits nobody, and a process that gets a whitelisted PID
//! after its first holder died does not inherit the entry, even within the same clock tick.
//!
//! The later process is made with exactly the PID wanted: `clone3` with `set_tid`, which needs
//! CAP_SYS_ADMIN over the PID namespace (without it the test fails saying so, rather than
//! passing without checking anything). The child execs this test binary, which imports the
//! key and reports through its exit code.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::time::Duration;

use acl_notify_core::{
    BackendError, CreateFlags, Error, ExportFlags, ImportFlags, NotifyResources, Soc,
};
use acl_notify_sim::Sim;

const ROLE: &str = "IDENTITY_ROLE";
const NS: &str = "IDENTITY_NS";
const KEY: &str = "IDENTITY_KEY";
const TEST: &str = "a_whitelisted_pid_given_to_a_later_process_admits_nobody";

/// Exit codes of the importing child.
const REFUSED: i32 = 0;
const IMPORTED: i32 = 1;
const OTHER: i32 = 2;

fn open(ns: &str) -> Sim {
    Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(1)
        .namespace(ns)
        .open()
        .expect("open the simulator")
}

/// The importing child: 0 if refused with 207006, 1 if it imported, 2 otherwise.
fn importer() -> i32 {
    let sim = open(&std::env::var(NS).unwrap());
    match sim.import_by_key(0, &std::env::var(KEY).unwrap(), ImportFlags::empty()) {
        Ok(_) => IMPORTED,
        Err(e) if e.kind() == Error::NoPermission => REFUSED,
        Err(e) => {
            eprintln!("import failed otherwise: {e}");
            OTHER
        }
    }
}

/// `struct clone_args` of linux/sched.h, up to `set_tid_size` (CLONE_ARGS_SIZE_VER1).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
}

/// Runs this binary as the importer with PID `pid`; `Err(errno)` if the kernel would not give
/// that PID (EEXIST: taken again meanwhile; EPERM: not privileged). Returns the child's exit
/// code and its start time in ticks (read while it is a zombie, before it is reaped).
fn importer_with_pid(pid: i32, ns: &str, key: &str) -> Result<(i32, u64), i32> {
    let exe = CString::new(std::env::current_exe().unwrap().as_os_str().as_bytes()).unwrap();
    let args: Vec<CString> = [exe.to_bytes(), b"--exact", TEST.as_bytes(), b"--nocapture"]
        .iter()
        .map(|a| CString::new(*a).unwrap())
        .collect();
    let mut env: Vec<CString> = std::env::vars_os()
        .map(|(k, v)| {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            CString::new(kv).unwrap()
        })
        .collect();
    for (k, v) in [(ROLE, "import"), (NS, ns), (KEY, key)] {
        env.push(CString::new(format!("{k}={v}")).unwrap());
    }
    let mut argv: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let tid = [pid];
    let ca = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        set_tid: tid.as_ptr() as u64,
        set_tid_size: 1,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM is a fork; the child only calls execve (async-signal
    // safe) on memory prepared before the call, then _exit if that fails.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &ca as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if r == 0 {
        // SAFETY: see above.
        unsafe {
            libc::execve(exe.as_ptr(), argv.as_ptr(), envp.as_ptr());
            libc::_exit(127);
        }
    }
    if r < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    assert_eq!(r as i32, pid, "clone3 gave another PID");
    // Until it has exited (a zombie keeps its stat), then its start time, then reap it.
    // SAFETY: all-zero bytes are a valid siginfo_t (a plain C struct).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid with WNOWAIT fills `info` and leaves the child to be reaped below.
    let w = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    assert_eq!(w, 0, "waitid");
    let start = start_ticks(pid).unwrap_or(0);
    let mut status = 0;
    // SAFETY: reaps the child waited for above.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "the importer died: {status:#x}");
    Ok((libc::WEXITSTATUS(status), start))
}

/// Field 22 of `/proc/<pid>/stat` (also of a zombie's).
fn start_ticks(pid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(19)?.parse().ok()
}

struct Ns(String);
impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Sim::remove_namespace(&self.0);
    }
}

#[test]
fn a_whitelisted_pid_given_to_a_later_process_admits_nobody() {
    if std::env::var(ROLE).is_ok() {
        std::process::exit(importer());
    }
    let ns = Ns(format!("identity-{}", std::process::id()));
    let sim = open(&ns.0);
    let (mut same_tick, mut rounds) = (0, 0);
    for round in 0..6 {
        let dead_first = round % 2 == 0;
        // The first holder of the PID: dead before it is whitelisted, or whitelisted while it
        // runs and killed just before the PID is handed on.
        let mut first = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = first.id() as i32;
        let first_start = start_ticks(pid).unwrap();
        let n = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let key = sim.export_key(n, ExportFlags::empty()).unwrap();
        if dead_first {
            first.kill().unwrap();
            first.wait().unwrap();
            sim.set_import_pids(n, &[pid]).unwrap();
        } else {
            sim.set_import_pids(n, &[pid]).unwrap();
            first.kill().unwrap();
            first.wait().unwrap();
        }
        match importer_with_pid(pid, &ns.0, key.as_str()) {
            Ok((code, start)) => {
                rounds += 1;
                if start == first_start {
                    same_tick += 1;
                }
                assert_eq!(
                    code,
                    REFUSED,
                    "round {round}: the later process with pid {pid} ({}) was {} (first holder \
                     {}, started at tick {first_start}; the later one at tick {start})",
                    if dead_first {
                        "whitelisted after the first died"
                    } else {
                        "whitelisted while the first ran"
                    },
                    if code == IMPORTED {
                        "let in"
                    } else {
                        "refused with another code"
                    },
                    if dead_first { "dead" } else { "killed" },
                );
            }
            Err(libc::EEXIST) => {} // another process took the PID first: try another round
            Err(e) => panic!(
                "clone3 with set_tid failed (errno {e}): this test needs CAP_SYS_ADMIN over \
                 its PID namespace to give a process a chosen PID"
            ),
        }
        sim.destroy_notify(n).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(rounds >= 3, "only {rounds} rounds got the PID back");
    eprintln!("{rounds} rounds, {same_tick} with the same start tick as the first holder");
}

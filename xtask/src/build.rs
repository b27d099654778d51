//! `cargo xtask build` (the C library `libascendcl.so` and its header, installed under
//! `target/acl-notify/`) and `cargo xtask demo` (CANN's two-process notify sample, run as two
//! real C processes on the simulator, shown as one timeline with a verdict).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use argh::FromArgs;

use crate::BackendArg;
use crate::run::{cargo, root, status};

/// Build the C library `target/acl-notify/lib/libascendcl.so` and its header
/// `target/acl-notify/include/acl/acl.h`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "build")]
pub struct BuildArgs {
    /// backend the library runs on (only `sim` builds a libascendcl.so)
    #[argh(option, default = "BackendArg::Sim")]
    pub backend: BackendArg,
    /// build with optimisations
    #[argh(switch)]
    pub release: bool,
}

/// Build and run the two-process notify flow of SPEC §7 on the simulator, printing a
/// timeline and a verdict; with `--hosts 2`, a SuperPod across two simulated hosts instead.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "demo")]
pub struct DemoArgs {
    /// export with DISABLE_PID_VALIDATION and skip the PID exchange (SPEC §7's second variant)
    #[argh(switch)]
    pub no_whitelist: bool,
    /// build the library with optimisations
    #[argh(switch)]
    pub release: bool,
    /// simulated hosts (2): start a 3-member etcd cluster on loopback, measure etcd's
    /// put→watch floor and the cross-host record→wake latency, and run a C ring of notifies
    /// over 2 hosts x 4 ranks (`backend-sim/examples/superpod.rs`, `tests/c/superpod_ring.c`)
    #[argh(option)]
    pub hosts: Option<u32>,
}

/// `cargo xtask demo --hosts 2`: the SuperPod across hosts (cluster mode), through the C
/// library and the `superpod` example, which prints the numbers and `verdict: OK`.
fn demo_hosts(args: &DemoArgs, hosts: u32) -> Result<(), String> {
    if hosts != 2 {
        return Err(format!(
            "--hosts {hosts}: the demo runs 2 hosts x 4 ranks (give --hosts 2)"
        ));
    }
    crate::setup::for_cluster_demo()?;
    let inst = install(args.release)?;
    let ring = compile_c(&inst, "superpod_ring")?;
    let mut run = cargo();
    run.args([
        "run",
        "--quiet",
        "-p",
        "acl-notify-sim",
        "--example",
        "superpod",
    ]);
    if args.release {
        run.arg("--release");
    }
    run.arg("--").arg("--ring").arg(&ring);
    println!(
        "acl-notify demo: a SuperPod across 2 simulated hosts (namespaces, servers 0 and 1) \
         coordinated through etcd"
    );
    status(&mut run)
}

/// Where `cargo xtask build` put the library and the header.
#[derive(Debug)]
pub struct Installed {
    /// `target/acl-notify`.
    pub prefix: PathBuf,
    /// `target/acl-notify/lib` (holds `libascendcl.so`, and `libacl_rt.so` linking to it).
    pub lib: PathBuf,
    /// `target/acl-notify/include` (holds `acl/acl.h`).
    pub include: PathBuf,
}

pub fn build(args: &BuildArgs) -> Result<(), String> {
    match args.backend {
        BackendArg::Sim => {}
        BackendArg::Driver | BackendArg::All => {
            return Err(
                "only `--backend sim` builds a C library. The driver backend \
                 (acl-notify-driver) is a Rust crate that itself loads a CANN libascendcl.so \
                 at run time; there is nothing to link a C program against. Use \
                 `cargo xtask build --backend sim`."
                    .into(),
            );
        }
    }
    crate::setup::for_demo()?;
    // The build is quiet (cargo's --quiet): say what the wait is for, as the demo does.
    eprintln!("building the C library and the inspector (a first build takes minutes)");
    let inst = install(args.release)?;
    let lib = inst.lib.display();
    let inc = inst.include.display();
    println!("library: {lib}/libascendcl.so (and libacl_rt.so, a link to it)");
    println!("header:  {inc}/acl/acl.h");
    println!("inspect: {}/bin/acl-notify-inspect", inst.prefix.display());
    println!("link:    cc prog.c -I {inc} -L {lib} -lascendcl -Wl,-rpath,{lib}");
    Ok(())
}

/// The workspace's target directory as cargo sees it (`CARGO_TARGET_DIR`, config, or
/// `<root>/target`).
pub fn target_dir() -> Result<PathBuf, String> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("could not run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed with {}", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let tag = "\"target_directory\":\"";
    let start = text
        .find(tag)
        .ok_or("cargo metadata did not report target_directory")?
        + tag.len();
    let mut dir = String::new();
    let mut chars = text[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Ok(PathBuf::from(dir)),
            '\\' => dir.extend(chars.next()),
            c => dir.push(c),
        }
    }
    Err("cargo metadata: unterminated target_directory".into())
}

/// Copies `from` to `to` through a temporary file and a rename, so a program that has the old
/// file mapped keeps running.
fn copy_atomic(from: &Path, to: &Path) -> Result<(), String> {
    let tmp = beside(to)?;
    std::fs::copy(from, &tmp)
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), tmp.display()))?;
    std::fs::rename(&tmp, to).map_err(|e| format!("cannot rename to {}: {e}", to.display()))
}

/// A temporary name next to `to` (its folder made if missing), to be renamed over `to`.
fn beside(to: &Path) -> Result<PathBuf, String> {
    let dir = to.parent().ok_or("no parent directory")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir.join(format!(
        ".{}.tmp{}",
        to.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    )))
}

/// Makes `link` a symbolic link to `target` (a name in the same folder), replacing whatever
/// was there in one step.
fn symlink_atomic(target: &str, link: &Path) -> Result<(), String> {
    let tmp = beside(link)?;
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .map_err(|e| format!("cannot create the link {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, link).map_err(|e| format!("cannot rename to {}: {e}", link.display()))
}

/// Copies every `.h` file under `from` to `to`, subfolders included: CANN programs include
/// `acl/error_codes/rt_error_codes.h` as well as `acl/acl.h`.
fn copy_headers(from: &Path, to: &Path) -> Result<(), String> {
    let entries =
        std::fs::read_dir(from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path.file_name().ok_or("header without a name")?;
        if path.is_dir() {
            copy_headers(&path, &to.join(name))?;
        } else if path.extension().is_some_and(|x| x == "h") {
            copy_atomic(&path, &to.join(name))?;
        }
    }
    Ok(())
}

/// Builds `acl-notify-capi` and the inspector, and installs the library, the headers and
/// `bin/acl-notify-inspect` under `<target>/acl-notify/`.
pub fn install(release: bool) -> Result<Installed, String> {
    let mut cmd = cargo();
    cmd.args([
        "build",
        "--quiet",
        "-p",
        "acl-notify-capi",
        "-p",
        "acl-notify-sim",
        // `--bin` alone would select only binaries, leaving the C library as it was.
        "--lib",
        "--bin",
        "acl-notify-inspect",
    ]);
    if release {
        cmd.arg("--release");
    }
    status(&mut cmd)?;
    let target = target_dir()?;
    let built = target
        .join(if release { "release" } else { "debug" })
        .join("libascendcl.so");
    if !built.is_file() {
        return Err(format!("cargo did not produce {}", built.display()));
    }
    let prefix = target.join("acl-notify");
    let lib = prefix.join("lib");
    let include = prefix.join("include");
    copy_atomic(&built, &lib.join("libascendcl.so"))?;
    // CANN's newer name for the same runtime (its samples link `-lacl_rt`). A link, not a
    // copy: a program that names both libraries then gets one library, one session.
    symlink_atomic("libascendcl.so", &lib.join("libacl_rt.so"))?;
    copy_headers(
        &root().join("backend-sim/capi/include/acl"),
        &include.join("acl"),
    )?;
    // The inspector, for C users who never run cargo themselves.
    let inspect = target
        .join(if release { "release" } else { "debug" })
        .join("acl-notify-inspect");
    copy_atomic(&inspect, &prefix.join("bin").join("acl-notify-inspect"))?;
    Ok(Installed {
        prefix,
        lib,
        include,
    })
}

/// Compiles one C program of `tests/c/` against the installed header and library.
pub(crate) fn compile_c(inst: &Installed, name: &str) -> Result<PathBuf, String> {
    let src = root().join("tests/c").join(format!("{name}.c"));
    let out = inst.prefix.join("bin").join(name);
    std::fs::create_dir_all(inst.prefix.join("bin")).map_err(|e| e.to_string())?;
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let mut cmd = Command::new(&cc);
    cmd.args(["-std=c11", "-O1", "-Wall", "-pthread", "-I"])
        .arg(&inst.include)
        .arg("-I")
        .arg(root().join("tests/c"))
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .arg("-L")
        .arg(&inst.lib)
        .arg("-lascendcl")
        .arg(format!("-Wl,-rpath,{}", inst.lib.display()));
    status(&mut cmd).map_err(|e| format!("compiling {name}.c failed (is a C compiler installed? `cargo xtask demo` and `test` install one): {e}"))?;
    Ok(out)
}

/// One line `EVENT <role> <pid> <device> <step> <ns> <detail>` printed by a C program.
#[derive(Debug, Clone)]
struct Event {
    role: String,
    pid: i32,
    device: i32,
    step: String,
    t_ns: i64,
    detail: String,
}

fn parse_events(out: &str) -> Vec<Event> {
    out.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("EVENT ")?;
            let mut f = rest.splitn(6, ' ');
            Some(Event {
                role: f.next()?.to_owned(),
                pid: f.next()?.parse().ok()?,
                device: f.next()?.parse().ok()?,
                step: f.next()?.to_owned(),
                t_ns: f.next()?.parse().ok()?,
                detail: f.next().unwrap_or("").to_owned(),
            })
        })
        .collect()
}

/// A running program whose output is collected by a reader thread.
pub(crate) struct Proc {
    name: &'static str,
    child: Child,
    out: Option<std::thread::JoinHandle<String>>,
    err: Option<std::thread::JoinHandle<String>>,
    status: Option<ExitStatus>,
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

pub(crate) fn spawn(name: &'static str, cmd: &mut Command) -> Result<Proc, String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    let out = child.stdout.take().map(reader);
    let err = child.stderr.take().map(reader);
    Ok(Proc {
        name,
        child,
        out,
        err,
        status: None,
    })
}

/// Waits for every process; if one fails or `limit` passes, kills the others. Returns each
/// process's (name, status or None if killed, stdout, stderr).
pub(crate) fn run_all(
    mut procs: Vec<Proc>,
    limit: Duration,
) -> Vec<(&'static str, Option<ExitStatus>, String, String)> {
    let deadline = Instant::now() + limit;
    loop {
        let mut running = 0;
        let mut failed = false;
        for p in procs.iter_mut() {
            if p.status.is_none() {
                match p.child.try_wait() {
                    Ok(Some(st)) => {
                        failed |= !st.success();
                        p.status = Some(st);
                    }
                    Ok(None) => running += 1,
                    Err(_) => failed = true,
                }
            } else {
                failed |= !p.status.is_some_and(|s| s.success());
            }
        }
        if running == 0 || failed || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    procs
        .into_iter()
        .map(|mut p| {
            if p.status.is_none() {
                let _ = p.child.kill();
                let _ = p.child.wait();
            }
            let out = p.out.take().and_then(|h| h.join().ok()).unwrap_or_default();
            let err = p.err.take().and_then(|h| h.join().ok()).unwrap_or_default();
            (p.name, p.status, out, err)
        })
        .collect()
}

/// Deletes the simulator's shared-memory files of namespace `ns` (every `/dev/shm` entry
/// whose name contains it; `ns` is unique to this run).
pub(crate) fn remove_namespace_files(ns: &str) {
    if let Ok(entries) = std::fs::read_dir("/dev/shm") {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().contains(ns) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

fn describe(e: &Event) -> String {
    let d = e.detail.trim();
    match e.step.as_str() {
        "started" => format!("initialised, set device, created a stream ({d})"),
        "created" => format!("created the notify ({d})"),
        "exported" => format!("exported its key ({d})"),
        "sent-pid" => format!("sent its PID to the owner ({d})"),
        "whitelisted" => format!("whitelisted the importer ({d})"),
        "imported" => format!("imported the notify by key ({d})"),
        "waiting" => format!("enqueued wait-and-reset (timeout 0 = forever) + host function ({d})"),
        "blocked" => format!("stream is blocked on the wait: {d}"),
        "recorded" => format!("records the notify on its stream ({d})"),
        "released" => format!("wait released; host function after it ran, read {d}"),
        "finished" => "destroyed notify and stream, reset device, aclFinalize".to_owned(),
        other => format!("{other} {d}"),
    }
}

pub fn demo(args: &DemoArgs) -> Result<(), String> {
    if let Some(hosts) = args.hosts {
        return demo_hosts(args, hosts);
    }
    crate::setup::for_demo()?;
    // The build is quiet: say why nothing shows for a while on a first run.
    eprintln!("building the C library and the demo's programs (a first build takes minutes)");
    let inst = install(args.release)?;
    let owner = compile_c(&inst, "ipc_owner")?;
    let importer = compile_c(&inst, "ipc_importer")?;

    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let ns = format!("acl-notify-demo-{}-{nanos}", std::process::id());
    let dir = std::env::temp_dir().join(&ns);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mode = if args.no_whitelist {
        "open"
    } else {
        "whitelist"
    };
    let soc = std::env::var("ACL_NOTIFY_SIM_SOC").unwrap_or_else(|_| "Ascend910B".into());
    // Both processes write their timeline here; it is merged after the run.
    let trace_dir = dir.join("trace");
    let env = |c: &mut Command| {
        c.arg(&dir)
            .arg(mode)
            .env("ACL_NOTIFY_SIM_TRACE", &trace_dir)
            .env("ACL_NOTIFY_SIM_NAMESPACE", &ns)
            .env("ACL_NOTIFY_SIM_DEVICES", "4")
            .env("ACL_NOTIFY_SIM_SOC", &soc);
    };
    let mut a = Command::new(&owner);
    env(&mut a);
    let mut b = Command::new(&importer);
    env(&mut b);

    println!(
        "acl-notify demo: CANN's two-process notify sample (SPEC §7) as two C programs on the simulator"
    );
    println!(
        "  SoC {soc}, 4 devices, namespace {ns}, {}",
        if args.no_whitelist {
            "export without PID validation (no whitelist)"
        } else {
            "PID whitelist on"
        }
    );
    println!();

    let started = Instant::now();
    let results = match spawn("owner", &mut a).and_then(|pa| {
        spawn("importer", &mut b)
            .map(|pb| run_all(vec![pa, pb], Duration::from_secs(15)))
            .map_err(|e| e.to_string())
    }) {
        Ok(r) => r,
        Err(e) => {
            remove_namespace_files(&ns);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    let elapsed = started.elapsed();
    remove_namespace_files(&ns);
    let timeline = crate::timeline::merge_demo(
        &inst.prefix.join("bin").join("acl-notify-inspect"),
        &trace_dir,
        &inst.prefix,
    );
    let _ = std::fs::remove_dir_all(&dir);

    let mut events: Vec<Event> = results.iter().flat_map(|r| parse_events(&r.2)).collect();
    events.sort_by_key(|e| e.t_ns);
    let t0 = events.first().map_or(0, |e| e.t_ns);
    println!("   time (ms)  process    pid      dev  step");
    for e in &events {
        println!(
            "  {:>10.3}  {:<9}  {:<7}  {:>3}  {}",
            (e.t_ns - t0) as f64 / 1e6,
            e.role,
            e.pid,
            e.device,
            describe(e)
        );
    }
    println!();

    let mut problems = Vec::new();
    for (name, st, _, err) in &results {
        match st {
            Some(s) if s.success() => {}
            Some(s) => problems.push(format!("{name} exited with {s}:\n{}", err.trim_end())),
            None => problems.push(format!(
                "{name} was stopped (it did not finish in 15 s, or the other process failed):\n{}",
                err.trim_end()
            )),
        }
    }
    let find = |role: &str, step: &str| events.iter().find(|e| e.role == role && e.step == step);
    let verdict = match (
        find("owner", "blocked"),
        find("importer", "recorded"),
        find("owner", "released"),
    ) {
        _ if !problems.is_empty() => Err(problems.join("\n")),
        (Some(blocked), Some(rec), Some(rel)) => {
            let id = |e: Option<&Event>| e.map(|e| e.detail.trim().to_owned());
            if id(find("owner", "created")) != id(find("importer", "imported")) {
                Err("the importer's notify id differs from the owner's".into())
            } else if blocked.t_ns > rec.t_ns {
                Err("the importer recorded before the owner had shown its stream blocked".into())
            } else if rel.t_ns < rec.t_ns {
                Err(format!(
                    "the owner's wait was released {:.3} ms BEFORE the importer recorded",
                    (rec.t_ns - rel.t_ns) as f64 / 1e6
                ))
            } else if rel.detail.trim() != "data=123" {
                Err(format!(
                    "the owner's host function read {} instead of the data=123 the importer wrote",
                    rel.detail.trim()
                ))
            } else {
                Ok(format!(
                    "owner (pid {}) on device {} stayed blocked until the importer's record \
                     (pid {}, device {}) and was released {:.3} ms after it",
                    rel.pid,
                    rel.device,
                    rec.pid,
                    rec.device,
                    (rel.t_ns - rec.t_ns) as f64 / 1e6
                ))
            }
        }
        _ => Err("the timeline is missing steps (see the messages above)".into()),
    };
    // The trace the two processes wrote: one valid timeline, with the importer's record
    // linked to the owner's wait.
    let verdict = verdict.and_then(|msg| match timeline {
        Ok(m) if m.files == 2 && m.tracks >= 2 && m.arrows >= 1 => {
            let (json, html) = crate::timeline::demo_outputs(&inst.prefix);
            println!(
                "timeline: {} tracks, {} record→wait arrows; open {} in a browser, or {} in \
                 Perfetto",
                m.tracks,
                m.arrows,
                html.display(),
                json.display()
            );
            Ok(msg)
        }
        Ok(m) => Err(format!(
            "the merged timeline is incomplete: {m:?} (expected 2 files, 2 tracks, an arrow)"
        )),
        Err(e) => Err(format!("the timeline did not merge: {e}")),
    });
    // Part two: the ring all-reduce, shown whatever part one gave (its own verdict line);
    // the demo's verdict is OK only if both are.
    println!();
    let ring = crate::ring_demo::run(&inst, &format!("{ns}-ring"));
    match &ring {
        Ok(msg) => println!("  {msg}"),
        Err(why) => println!("  ring all-reduce FAILED: {why}"),
    }
    println!();
    let verdict = verdict.and_then(|msg| ring.map(|r| format!("{msg}; {r}")));
    match verdict {
        Ok(msg) => {
            println!(
                "verdict: OK — {msg} (notify flow {:.0} ms)",
                elapsed.as_secs_f64() * 1e3
            );
            Ok(())
        }
        Err(why) => {
            println!("verdict: FAILED — {why}");
            Err("the demo flow failed".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_parse() {
        let out = "noise\nEVENT owner 12 2 created 1000 id=5\nEVENT importer 13 3 finished 2000 \n";
        let ev = parse_events(out);
        assert_eq!(ev.len(), 2);
        assert_eq!(
            (ev[0].role.as_str(), ev[0].pid, ev[0].device),
            ("owner", 12, 2)
        );
        assert_eq!((ev[0].step.as_str(), ev[0].t_ns), ("created", 1000));
        assert_eq!(ev[0].detail, "id=5");
        assert_eq!(ev[1].step, "finished");
    }
}

//! `acl-notify-inspect`: shows a simulated machine (read-only) or reclaims what dead processes
//! left in it. Installed with `cargo install --path backend-sim`; also `cargo xtask inspect`.
//!
//! ```text
//! acl-notify-inspect [show] [--namespace NS] [--server N] [--json]
//! acl-notify-inspect gc     [--namespace NS] [--server N] [--json]
//! acl-notify-inspect list   [--json]
//! acl-notify-inspect rm     [--namespace NS]
//! acl-notify-inspect trace  DIR [-o MERGED.json] [--html OUT.html]
//! ```
//!
//! `show` (the default) maps the namespace's files read-only and prints every registered
//! process, each device's id budget and each live notify and count notify: state, owner (alive
//! or dead), holders, whitelist, waiters down to the stream threads blocked on it, and the last
//! recorder — with a diagnosis when a wait can no longer be satisfied. `gc` joins the machine
//! like any process would, reclaims dead processes' references, waits and ids (and their count
//! notifies), and reports what went away. `list` names every namespace found under `/dev/shm`.
//! `rm` deletes a namespace's shared files once none of its processes is alive (they stay
//! after the last process ends, for the next one to join; `gc` does not delete them).
//!
//! The namespace defaults to `ACL_NOTIFY_SIM_NAMESPACE`, else the simulator's default
//! (`acl-notify-<uid>-default`); the server to `ACL_NOTIFY_SIM_SERVER_ID`, else 0.
//! Exit status: 0 done, 1 the machine could not be read or changed, 2 bad usage.

use std::process::ExitCode;

use acl_notify_sim::Sim;
use acl_notify_sim::inspect::{self, MachineSnapshot};
use serde_json::json;

const USAGE: &str =
    "usage: acl-notify-inspect [show|gc|list|rm] [--namespace NS] [--server N] [--json]
       acl-notify-inspect trace DIR [-o MERGED.json] [--html OUT.html]

  show   (default) print the machine read-only: processes, id budgets, live notifies and
         count notifies with owner, holders, whitelist, waiting stream threads, last recorder
  gc     reclaim what dead processes left (references, queued waits, ids, IPC events,
         count notifies, device memory)
  list   list the namespaces found under /dev/shm
  rm     delete the namespace's files under /dev/shm (every server's) once none of its
         processes is alive; refused, naming them, while one is
  trace DIR [-o MERGED.json] [--html OUT.html]
         merge the timeline a run wrote with ACL_NOTIFY_SIM_TRACE=DIR (see trace --help)

  --namespace NS   default: $ACL_NOTIFY_SIM_NAMESPACE, else acl-notify-<uid>-default
  --server N       SuperPod server id (default: $ACL_NOTIFY_SIM_SERVER_ID, else 0)
  --json           machine-readable output";

#[derive(Debug, PartialEq, Eq)]
enum Cmd {
    Show,
    Gc,
    List,
    Rm,
}

#[derive(Debug)]
struct Args {
    cmd: Cmd,
    namespace: String,
    server: u32,
    json: bool,
}

fn default_namespace() -> String {
    match std::env::var(acl_notify_sim::ENV_NAMESPACE) {
        Ok(v) if !v.is_empty() => v,
        // SAFETY: geteuid(2) has no preconditions and cannot fail.
        _ => format!("acl-notify-{}-default", unsafe { libc::geteuid() }),
    }
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        cmd: Cmd::Show,
        namespace: default_namespace(),
        server: match std::env::var(acl_notify_sim::ENV_SERVER_ID) {
            Ok(v) if !v.is_empty() => v.trim().parse().map_err(|_| {
                format!("{}={v:?} is not a server id", acl_notify_sim::ENV_SERVER_ID)
            })?,
            _ => 0,
        },
        json: false,
    };
    let mut first = true;
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "show" | "gc" | "list" | "rm" if first => {
                a.cmd = match arg.as_str() {
                    "gc" => Cmd::Gc,
                    "list" => Cmd::List,
                    "rm" => Cmd::Rm,
                    _ => Cmd::Show,
                };
            }
            "--namespace" | "-n" => {
                a.namespace = it.next().ok_or("--namespace needs a value")?;
            }
            "--server" => {
                let v = it.next().ok_or("--server needs a value")?;
                a.server = v
                    .parse()
                    .map_err(|_| format!("--server {v:?} is not a number"))?;
            }
            "--json" => a.json = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
        first = false;
    }
    Ok(a)
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some("trace") {
        return ExitCode::from(acl_notify_sim::trace::cli::main(std::env::args().skip(2)));
    }
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if e.is_empty() {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            eprintln!("acl-notify-inspect: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let r = match args.cmd {
        Cmd::Show => show(&args),
        Cmd::Gc => gc(&args),
        Cmd::List => list(&args),
        Cmd::Rm => rm(&args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acl-notify-inspect: {e}");
            ExitCode::FAILURE
        }
    }
}

fn show(a: &Args) -> Result<(), String> {
    let snap = inspect::snapshot(&a.namespace, a.server).map_err(|e| e.to_string())?;
    if a.json {
        println!("{}", snap.to_json());
    } else {
        print!("{}", snap.to_text());
    }
    Ok(())
}

fn list(a: &Args) -> Result<(), String> {
    let all = inspect::namespaces();
    if a.json {
        let items: Vec<_> = all
            .iter()
            .map(|(ns, s)| json!({"namespace": ns, "server": s}))
            .collect();
        println!("{}", serde_json::Value::from(items));
    } else if all.is_empty() {
        println!("no simulated machine under /dev/shm");
    } else {
        for (ns, s) in all {
            println!("{ns}  server {s}");
        }
    }
    Ok(())
}

fn rm(a: &Args) -> Result<(), String> {
    let n = inspect::remove_unused(&a.namespace)?;
    println!("namespace {}: removed {n} file(s)", a.namespace);
    Ok(())
}

fn gc(a: &Args) -> Result<(), String> {
    let before = inspect::snapshot(&a.namespace, a.server).map_err(|e| e.to_string())?;
    let sim = Sim::builder()
        .soc(before.soc)
        .devices(before.devices)
        .namespace(&a.namespace)
        .server_id(a.server)
        .open()
        .map_err(|e| format!("joining namespace {}: {e}", a.namespace))?;
    // Opening already reclaims; these passes catch anything that died meanwhile.
    let report = sim.gc().map_err(|e| e.to_string())?;
    let cnt_freed = report.cnt_freed;
    let mem_freed = report.mem_freed;
    // What is not in the snapshots (IPC events, cancelled waits) comes from the reports of
    // both: the open's and this pass's.
    let mut total = sim.reclaimed_at_open();
    total += report;
    let ipc_events = total.ipc_events_freed;
    drop(sim);
    let after = inspect::snapshot(&a.namespace, a.server).map_err(|e| e.to_string())?;
    let dead_before = dead_pids(&before);
    let reclaimed: Vec<i32> = dead_before
        .iter()
        .copied()
        .filter(|p| !after.processes.iter().any(|q| q.pid == *p))
        .collect();
    let freed = before.notifies.len().saturating_sub(after.notifies.len());
    let cnt = before
        .cnt_notifies
        .len()
        .saturating_sub(after.cnt_notifies.len());
    let still_dead = dead_pids(&after);
    if a.json {
        let doc = json!({
            "namespace": a.namespace,
            "server": a.server,
            "reclaimed_pids": reclaimed,
            "notifies_freed": freed,
            "cnt_notifies_freed": cnt,
            "ipc_events_freed": ipc_events,
            "waits_cancelled": total.waits_cancelled,
            "mem_allocations_freed": mem_freed,
            "still_dead_pids": still_dead,
        });
        println!("{doc}");
    } else {
        println!(
            "namespace {} server {}: reclaimed {} dead process(es) {reclaimed:?}; freed {freed} \
             notify id(s), {cnt} count-notify id(s), {mem_freed} device-memory \
             allocation(s) and {ipc_events} IPC event(s){}",
            a.namespace,
            a.server,
            reclaimed.len(),
            if total.waits_cancelled > 0 {
                format!("; cancelled {} queued wait(s)", total.waits_cancelled)
            } else {
                String::new()
            }
        );
        if cnt_freed > 0 {
            println!("  (count notifies released by the last pass: {cnt_freed})");
        }
        if !still_dead.is_empty() {
            println!(
                "  still registered but dead (being reclaimed by another process?): {still_dead:?}"
            );
        }
    }
    Ok(())
}

fn dead_pids(s: &MachineSnapshot) -> Vec<i32> {
    s.processes
        .iter()
        .filter(|p| p.alive.is_gone())
        .map(|p| p.pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn arguments() {
        let a = p(&["gc", "--namespace", "x", "--server", "2", "--json"]).unwrap();
        assert_eq!(
            (a.cmd, a.namespace.as_str(), a.server, a.json),
            (Cmd::Gc, "x", 2, true)
        );
        assert_eq!(p(&["--json"]).unwrap().cmd, Cmd::Show);
        assert_eq!(p(&["list"]).unwrap().cmd, Cmd::List);
        assert_eq!(p(&["rm", "-n", "x"]).unwrap().cmd, Cmd::Rm);
        assert!(p(&["--server", "x"]).unwrap_err().contains("not a number"));
        assert!(p(&["--namespace"]).is_err());
        assert!(p(&["show", "gc"]).unwrap_err().contains("unknown argument"));
        assert_eq!(p(&["--help"]).unwrap_err(), "");
    }
}

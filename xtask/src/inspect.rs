//! `cargo xtask inspect`: runs the simulator's `acl-notify-inspect` binary (built on demand),
//! which shows a simulated machine read-only — processes, id budgets, live notifies and count
//! notifies with owner, holders, whitelist, waiting stream threads and last recorder — or, with
//! `--gc`, reclaims what dead processes left.

use argh::FromArgs;

use crate::run::{cargo, status};

/// Show a simulated machine (read-only), or reclaim what dead processes left (`--gc`).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "inspect")]
pub struct InspectArgs {
    /// namespace (default: `$ACL_NOTIFY_SIM_NAMESPACE`, else `acl-notify-<uid>-default`)
    #[argh(option)]
    pub namespace: Option<String>,
    /// superPod server id (default: $ACL_NOTIFY_SIM_SERVER_ID, else 0)
    #[argh(option)]
    pub server: Option<u32>,
    /// print JSON instead of a table
    #[argh(switch)]
    pub json: bool,
    /// reclaim the references, queued waits and ids of dead processes, then report
    #[argh(switch)]
    pub gc: bool,
    /// list the namespaces found under /dev/shm
    #[argh(switch)]
    pub list: bool,
}

/// The binary's arguments for `a`.
fn binary_args(a: &InspectArgs) -> Result<Vec<String>, String> {
    if a.gc && a.list {
        return Err("--gc and --list exclude each other".into());
    }
    let mut v = vec![
        if a.gc {
            "gc"
        } else if a.list {
            "list"
        } else {
            "show"
        }
        .to_owned(),
    ];
    if let Some(ns) = &a.namespace {
        v.push("--namespace".into());
        v.push(ns.clone());
    }
    if let Some(s) = a.server {
        v.push("--server".into());
        v.push(s.to_string());
    }
    if a.json {
        v.push("--json".into());
    }
    Ok(v)
}

pub fn inspect(a: &InspectArgs) -> Result<(), String> {
    let args = binary_args(a)?;
    status(
        cargo()
            .args([
                "run",
                "--quiet",
                "-p",
                "acl-notify-sim",
                "--bin",
                "acl-notify-inspect",
                "--",
            ])
            .args(&args),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_pass_through() {
        let a = InspectArgs {
            namespace: Some("ns".into()),
            server: Some(1),
            json: true,
            gc: true,
            list: false,
        };
        assert_eq!(
            binary_args(&a).unwrap(),
            ["gc", "--namespace", "ns", "--server", "1", "--json"]
        );
        let b = InspectArgs {
            namespace: None,
            server: None,
            json: false,
            gc: false,
            list: false,
        };
        assert_eq!(binary_args(&b).unwrap(), ["show"]);
        let c = InspectArgs {
            gc: true,
            list: true,
            ..b
        };
        assert!(binary_args(&c).is_err());
    }
}

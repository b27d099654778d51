//! Two processes share one notify through the typed API (the flow of SPEC §7). The owner, on
//! device 0, creates the notify, exports it, whitelists the importer's PID and waits on it.
//! The importer, on device 1, imports the key and records. Run with
//! `cargo run -p acl-notify-sim --example ipc`.
//!
//! The example starts itself a second time as the importer. The importer's PID and the key
//! travel over the child's stdout and stdin; any channel will do.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use acl_notify_core::key::ExportKey;
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::Device;
use acl_notify_core::{Backend, ImportFlags, Soc, Timeout};
use acl_notify_sim::{Sim, SimError};

/// Set in the importer's environment: the namespace it joins.
const IMPORTER_NAMESPACE: &str = "ACL_NOTIFY_IPC_EXAMPLE_NAMESPACE";

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Both processes open the same namespace, so they see the same simulated machine.
fn open(namespace: &str) -> Result<Sim, SimError> {
    Sim::builder()
        .soc(Soc::Ascend910B)
        .devices(2)
        .namespace(namespace)
        .open()
}

fn main() -> Res<()> {
    match std::env::var(IMPORTER_NAMESPACE) {
        Ok(namespace) => importer(&namespace),
        Err(_) => {
            let namespace = format!("ipc-example-{}", std::process::id());
            let result = owner(&namespace);
            Sim::remove_namespace(&namespace)?;
            result
        }
    }
}

fn owner(namespace: &str) -> Res<()> {
    let sim = open(namespace)?;
    let dev = Device::<Ascend910B, _>::new(&sim, 0)?;
    let stream = dev.create_stream()?;
    let notify = dev.create_notify()?;
    let (exported, key) = notify.export().map_err(|(_, e)| e)?;

    let mut child = Command::new(std::env::current_exe()?)
        .env(IMPORTER_NAMESPACE, namespace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut from_importer = BufReader::new(child.stdout.take().ok_or("no pipe")?);
    let mut line = String::new();
    from_importer.read_line(&mut line)?;
    let importer_pid: i32 = line.trim().parse().map_err(|e| {
        format!("the importer sent {line:?} instead of its PID ({e}); its error is above")
    })?;

    // Whitelist the importer before it gets the key, then wait first: the stream stalls
    // until the importer's record lands (10 s at most).
    let shared = exported.allow_pids(&[importer_pid]).map_err(|(_, e)| e)?;
    shared.wait_and_reset(&stream, Timeout::from_c(10))?;
    // Dropping the pipe after the line closes the importer's stdin.
    writeln!(child.stdin.take().ok_or("no pipe")?, "{key}")?;
    stream.synchronize()?;
    println!("owner: the wait on device 0 was released by pid {importer_pid}'s record");

    let status = child.wait()?;
    if !status.success() {
        return Err(format!("importer failed: {status}").into());
    }
    Ok(())
}

fn importer(namespace: &str) -> Res<()> {
    let sim = open(namespace)?;
    let dev = Device::<Ascend910B, _>::new(&sim, 1)?;
    let stream = dev.create_stream()?;

    // The PID the owner whitelists (what aclrtDeviceGetBareTgid gives in C).
    let mut to_owner = std::io::stdout();
    writeln!(to_owner, "{}", sim.bare_tgid())?;
    to_owner.flush()?;

    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    // from_runtime takes the simulator's keys and a real CANN runtime's opaque ones.
    let key = ExportKey::from_runtime(line.trim().as_bytes())?;
    // The notify lives on device 0 and this process works on device 1: without peer access
    // between the two devices the import is refused with 207006.
    let notify = dev.import(&key, ImportFlags::ENABLE_PEER_ACCESS)?;
    notify.record(&stream)?;
    stream.synchronize()?;
    eprintln!("importer: recorded notify {} from device 1", notify.id()?);
    Ok(())
}

//! The README's Rust quick start: a notify ordering two streams of one process on the
//! simulator, through the typed API. Run with `cargo run -p acl-notify-sim --example quickstart`.

use acl_notify_core::Timeout;
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::Device;
use acl_notify_sim::Sim;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A simulated machine of its own (shared memory under /dev/shm), removed at the end.
    let namespace = format!("quickstart-{}", std::process::id());
    let result = run(&namespace);
    // Removed whether or not the run succeeded.
    Sim::remove_namespace(&namespace)?;
    result
}

fn run(namespace: &str) -> Result<(), Box<dyn std::error::Error>> {
    let sim = Sim::builder()
        .soc(acl_notify_core::Soc::Ascend910B)
        .devices(2)
        .namespace(namespace)
        .open()?;

    // The SoC is a type: methods the SoC lacks do not exist (no batch reset on a 310B...).
    let dev = Device::<Ascend910B, _>::new(&sim, 0)?;
    let waiter = dev.create_stream()?;
    let recorder = dev.create_stream()?;
    let notify = dev.create_notify()?;
    println!("created notify id {}", notify.id()?);

    // Wait first, record later: the waiting stream stalls until the record lands.
    notify.wait_and_reset(&waiter, Timeout::from_c(5))?;
    notify.record(&recorder)?;
    waiter.synchronize()?;
    recorder.synchronize()?;
    println!("the waiting stream was released by the record");

    // Export it for another process (which would import the key and record it).
    let (exported, key) = notify.export().map_err(|(_, e)| e)?;
    let whitelisted = exported
        .allow_pids(&[std::process::id() as i32])
        .map_err(|(_, e)| e)?;
    println!("exported as {key}; whitelist set");
    whitelisted.destroy()?; // also done by Drop
    Ok(())
}

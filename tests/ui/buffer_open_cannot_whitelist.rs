// A buffer exported without PID validation (anyone with the key imports) takes no whitelist
// (207006 at run time), so an `ExportedOpen` buffer has no `allow_pids`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{DeviceBuffer, ExportedOpen};
use acl_notify_core::{DeviceMemory, NotifyResources, StreamOps};

fn whitelist<B: DeviceMemory + NotifyResources + StreamOps>(b: DeviceBuffer<'_, Ascend910B, ExportedOpen, B>) {
    let _ = b.allow_pids(&[1234]);
}

fn main() {}

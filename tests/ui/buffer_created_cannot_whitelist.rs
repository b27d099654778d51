// A device buffer's whitelist exists only once it is exported (CANN answers 107000 at run
// time), so a `Created` buffer has no `allow_pids`: export it first.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Created, DeviceBuffer};
use acl_notify_core::{DeviceMemory, NotifyResources, StreamOps};

fn whitelist<B: DeviceMemory + NotifyResources + StreamOps>(b: DeviceBuffer<'_, Ascend910B, Created, B>) {
    let _ = b.allow_pids(&[1234]);
}

fn main() {}

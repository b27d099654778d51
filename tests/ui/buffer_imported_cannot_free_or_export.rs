// An imported buffer is another process's memory: it is closed, not freed (`aclrtFree` of
// it is 107000), and only its owner exports it.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{DeviceBuffer, Imported};
use acl_notify_core::{DeviceMemory, NotifyResources, StreamOps};

fn misuse<B: DeviceMemory + NotifyResources + StreamOps>(b: DeviceBuffer<'_, Ascend910B, Imported, B>) {
    let _ = b.free();
}

fn misuse2<B: DeviceMemory + NotifyResources + StreamOps>(b: DeviceBuffer<'_, Ascend910B, Imported, B>) {
    let _ = b.export();
}

fn main() {}

// `free` consumes the buffer, so freeing it twice (107000 at run time, or worse: another
// allocation at the same address) does not compile.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Created, DeviceBuffer};
use acl_notify_core::{DeviceMemory, NotifyResources, StreamOps};

fn twice<B: DeviceMemory + NotifyResources + StreamOps>(b: DeviceBuffer<'_, Ascend910B, Created, B>) {
    let _ = b.free();
    let _ = b.free();
}

fn main() {}

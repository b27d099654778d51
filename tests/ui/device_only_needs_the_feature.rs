// Ascend910 does not support ACL_NOTIFY_DEVICE_USE_ONLY (SPEC §4: 207000 there), so its
// devices have no `create_device_only_notify`.
use acl_notify_core::soc::Ascend910;
use acl_notify_core::typed::Device;
use acl_notify_core::{NotifyResources, StreamOps};

fn create<B: NotifyResources + StreamOps>(d: Device<'_, Ascend910, B>) {
    let _ = d.create_device_only_notify();
}

fn main() {}

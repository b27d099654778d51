// Ascend910 has no batch reset (SPEC §4: 207000 there), so its devices have no `batch_reset`.
use acl_notify_core::soc::Ascend910;
use acl_notify_core::typed::Device;
use acl_notify_core::{NotifyResources, StreamOps};

fn reset_all<B: NotifyResources + StreamOps>(d: Device<'_, Ascend910, B>) {
    let _ = d.batch_reset(&[]);
}

fn main() {}

// A batch-reset element borrows its notify, so it cannot be kept past the notify's
// destruction and reset a dead (possibly reused) id.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Created, Device, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn stale_reset<B: NotifyResources + StreamOps>(
    d: Device<'_, Ascend910B, B>,
    n: Notify<'_, Ascend910B, Created, B>,
) {
    let r = n.reset_ref();
    let _ = n.destroy();
    let _ = d.batch_reset(&[r]);
}

fn main() {}

// Batch reset of an imported notify is 507009 at run time, so even on a SoC with batch reset
// (Ascend910B) an imported notify has no `reset`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Imported, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn reset<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, Imported, B>) {
    let _ = n.reset();
}

fn main() {}

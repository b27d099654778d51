// One handle is one reference, destroyed once (on drop): a notify handle cannot be cloned,
// or two drops would destroy one reference twice.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Created, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn twice<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, Created, B>) {
    let _m = n.clone();
}

fn main() {}

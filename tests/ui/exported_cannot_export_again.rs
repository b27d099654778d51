// A notify is exported once (507000 at run time for a second export); an `Exported` handle
// has no `export`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Exported, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn export_twice<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, Exported, B>) {
    let _ = n.export();
}

fn main() {}

// Only the owner sets the whitelist; an importer calling it is 207006 at run time, so
// `allow_pids` must not exist for an imported notify.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Imported, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn whitelist<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, Imported, B>) {
    let _ = n.allow_pids(&[1234]);
}

fn main() {}

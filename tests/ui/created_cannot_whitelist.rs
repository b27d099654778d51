// A whitelist only makes sense for an exported notify (107000 at run time before export), so
// a `Created` notify has no `allow_pids`: export it first.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Created, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn whitelist<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, Created, B>) {
    let _ = n.allow_pids(&[1234]);
}

fn main() {}

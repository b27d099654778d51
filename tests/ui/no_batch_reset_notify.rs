// Ascend310P has no batch reset (SPEC §4: 207000 there), so its notifies have no `reset`.
use acl_notify_core::soc::Ascend310P;
use acl_notify_core::typed::{Created, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn reset<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend310P, Created, B>) {
    let _ = n.reset();
}

fn main() {}

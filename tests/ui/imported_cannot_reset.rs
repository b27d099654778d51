// On the Ascend 950 family a batch reset refuses every IPC notify (507009 at run time, as
// CANN's runtime does), so there an imported notify has no `reset`.
use acl_notify_core::soc::Ascend950PR;
use acl_notify_core::typed::{Imported, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn reset<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend950PR, Imported, B>) {
    let _ = n.reset();
}

fn main() {}

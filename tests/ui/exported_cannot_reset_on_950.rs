// On the Ascend 950 family a batch reset refuses the owner's own notify once exported
// (507009 at run time, as CANN's runtime does), so an exported notify has no `reset_ref`
// there (a `Created` one has).
use acl_notify_core::soc::Ascend950PR;
use acl_notify_core::typed::{Exported, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn reset<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend950PR, Exported, B>) {
    let _ = n.reset_ref();
}

fn main() {}

// An imported notify cannot be exported again (SPEC §3: 507000 at run time); only a freshly
// created notify has `export`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Imported, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn re_export<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, Imported, B>) {
    let _ = n.export();
}

fn main() {}

// Ascend310B has no IPC (SPEC §4: export is 207000 there), so its notifies have no `export`.
use acl_notify_core::soc::Ascend310B;
use acl_notify_core::typed::{Created, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn export<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend310B, Created, B>) {
    let _ = n.export();
}

fn main() {}

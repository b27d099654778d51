// Ascend950DT has no IPC (SPEC §4: import is 207000 there), so its devices have no `import`.
use acl_notify_core::soc::Ascend950DT;
use acl_notify_core::typed::Device;
use acl_notify_core::{ExportKey, ImportFlags, NotifyResources, StreamOps};

fn import<B: NotifyResources + StreamOps>(d: Device<'_, Ascend950DT, B>, key: &ExportKey) {
    let _ = d.import(key, ImportFlags::empty());
}

fn main() {}

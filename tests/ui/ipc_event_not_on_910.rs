// Ascend910 (Atlas training series) has no IPC events (CANN's event chapter lists
// aclrtIpcGetEventHandle as unsupported there), so its devices have no `create_ipc_event`.
use acl_notify_core::soc::Ascend910;
use acl_notify_core::typed::Device;
use acl_notify_core::{EventOps, NotifyResources, StreamOps};

fn shared<B: NotifyResources + StreamOps + EventOps>(d: Device<'_, Ascend910, B>) {
    let _ = d.create_ipc_event();
}

fn main() {}

// CANN refuses aclrtEventElapsedTime on IPC events (207000, hicann/runtime `api_error.cc`), so
// an `Event<_, IpcShared, _>` has no `elapsed_since`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::Device;
use acl_notify_core::{EventOps, NotifyResources, StreamOps};

fn timed<B: NotifyResources + StreamOps + EventOps>(d: Device<'_, Ascend910B, B>) {
    let a = d.create_ipc_event().unwrap();
    let b = d.create_event().unwrap();
    let _ = a.elapsed_since(&b);
}

fn main() {}

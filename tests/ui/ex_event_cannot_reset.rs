// An event of aclrtCreateEventExWithFlag cannot be reset (CANN answers 207000: hicann/runtime
// `ApiImpl::EventReset`), so a typed `Event<_, Ex, _>` has no `reset`.
use acl_notify_core::event::EventFlags;
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::Device;
use acl_notify_core::{EventOps, NotifyResources, StreamOps};

fn reset_ex<B: NotifyResources + StreamOps + EventOps>(d: Device<'_, Ascend910B, B>) {
    let e = d.create_event_ex(EventFlags::SYNC).unwrap();
    let s = d.create_stream().unwrap();
    let _ = e.reset(&s);
}

fn main() {}

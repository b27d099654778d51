// IPV350 answers every notify call with 207000 (SPEC §4), so its devices cannot create one.
use acl_notify_core::soc::IPV350;
use acl_notify_core::typed::Device;
use acl_notify_core::{NotifyResources, StreamOps};

fn create<B: NotifyResources + StreamOps>(d: Device<'_, IPV350, B>) {
    let _ = d.create_notify();
}

fn main() {}

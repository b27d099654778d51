// An imported notify belongs to another process's device: only the owner may wait on it
// (SPEC §2), so `wait_and_reset` must not exist for `Notify<_, _, Imported, _>`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Imported, Notify, Stream};
use acl_notify_core::{NotifyResources, StreamOps, Timeout};

fn wait<'b, B: NotifyResources + StreamOps>(
    n: Notify<'b, Ascend910B, Imported, B>,
    s: &Stream<'b, B>,
) {
    let _ = n.wait_and_reset(s, Timeout::Forever);
}

fn main() {}

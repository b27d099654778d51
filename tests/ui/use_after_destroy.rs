// `destroy` takes the handle by value: a destroyed notify cannot be recorded (or used in any
// way) afterwards.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Created, Notify, Stream};
use acl_notify_core::{NotifyResources, StreamOps};

fn use_after_destroy<'b, B: NotifyResources + StreamOps>(
    n: Notify<'b, Ascend910B, Created, B>,
    s: &Stream<'b, B>,
) {
    let _ = n.destroy();
    let _ = n.record(s);
}

fn main() {}

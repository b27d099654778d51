// Ascend910B has no count notifies (SPEC §4/§6: 207000 there), so its devices have no
// `create_cnt_notify`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::Device;
use acl_notify_core::{CntNotifyOps, NotifyResources, StreamOps};

fn counter<B: NotifyResources + StreamOps + CntNotifyOps>(d: Device<'_, Ascend910B, B>) {
    let _ = d.create_cnt_notify();
}

fn main() {}

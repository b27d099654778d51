// Inter-server (SuperPod) whitelists exist only on Ascend910_93 (SPEC §4); on Ascend910B the
// call is 207000, so `allow_server_pids` must not exist there.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{Exported, Notify};
use acl_notify_core::{NotifyResources, ServerPid, StreamOps};

fn superpod<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, Exported, B>) {
    let _ = n.allow_server_pids(&[ServerPid { sdid: 1, pid: 1234 }]);
}

fn main() {}

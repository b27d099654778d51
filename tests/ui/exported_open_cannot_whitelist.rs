// A notify exported with DISABLE_PID_VALIDATION can be imported by anyone holding the key;
// setting a whitelist on it is 207006 at run time, so `ExportedOpen` has no `allow_pids`.
use acl_notify_core::soc::Ascend910B;
use acl_notify_core::typed::{ExportedOpen, Notify};
use acl_notify_core::{NotifyResources, StreamOps};

fn whitelist<B: NotifyResources + StreamOps>(n: Notify<'_, Ascend910B, ExportedOpen, B>) {
    let _ = n.allow_pids(&[1234]);
}

fn main() {}

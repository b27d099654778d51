// The lifecycle states are sealed: a user-defined state could claim any `KIND` and bypass
// every rule above, so `State` cannot be implemented outside the core.
use acl_notify_core::typed::State;
use acl_notify_core::Lifecycle;

enum Forged {}

impl State for Forged {
    const KIND: Lifecycle = Lifecycle::Created;
}

fn main() {}

// `HostCall::new`'s contract allows one call of `func(arg)`: `call` consumes the value and
// `HostCall` is neither `Copy` nor `Clone`, so safe code cannot run it a second time.
use acl_notify_core::HostCall;

fn twice(c: HostCall) {
    c.call();
    c.call();
}

fn main() {}

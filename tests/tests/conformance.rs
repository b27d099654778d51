//! The conformance suite runner: `cargo test -p acl-notify-tests --test conformance`, with
//! `ACL_NOTIFY_TEST_BACKEND` = `sim` | `driver` | `all` (default) and the usual libtest filters
//! (trial names are `<backend>::<SoC>::<case>`, e.g. `sim::Ascend910B::sem::collapse`).

fn main() {
    acl_notify_tests::main()
}

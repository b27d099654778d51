//! Replays the `capi_calls` fuzz target's seeds and generated inputs (see `replay`).

mod common;

use acl_notify_fuzz_targets::{capi_calls, replay};

fn main() {
    common::main_for("capi_calls", || {
        replay::replay("capi_calls", capi_calls::generate, capi_calls::check)
    });
}

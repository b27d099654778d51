//! Replays the `capi_calls` fuzz target's seeds and generated inputs (see `replay`).

use libtest_mimic::{Arguments, Trial};

use acl_notify_fuzz_targets::{capi_calls, replay};

fn main() {
    let mut args = Arguments::from_args();
    // The replay sets the namespace variables: it runs on the main thread.
    args.test_threads = Some(1);
    let trial = Trial::test("capi_calls", || {
        Ok(replay::run_target("capi_calls", || {
            replay::replay("capi_calls", capi_calls::generate, capi_calls::check)
        })?)
    });
    libtest_mimic::run(&args, vec![trial]).exit();
}

//! Replays the `shm_open` fuzz target's seeds and generated inputs (see `replay`).

use libtest_mimic::{Arguments, Trial};

use acl_notify_fuzz_targets::{replay, shm_open};

fn main() {
    let mut args = Arguments::from_args();
    // The replay sets the namespace variables: it runs on the main thread.
    args.test_threads = Some(1);
    let trial = Trial::test("shm_open", || {
        Ok(replay::run_target("shm_open", || {
            replay::replay("shm_open", shm_open::generate, shm_open::check)
        })?)
    });
    libtest_mimic::run(&args, vec![trial]).exit();
}

//! Replays the `key_parse` fuzz target's seeds and generated inputs (see `replay`).

use libtest_mimic::{Arguments, Trial};

use acl_notify_fuzz_targets::{key_parse, replay};

fn main() {
    let mut args = Arguments::from_args();
    // The replay sets the namespace variables: it runs on the main thread.
    args.test_threads = Some(1);
    let trial = Trial::test("key_parse", || {
        Ok(replay::run_target("key_parse", || {
            replay::replay_bytes("key_parse", |b, _| {
                key_parse::check(b);
                true
            })
        })?)
    });
    libtest_mimic::run(&args, vec![trial]).exit();
}

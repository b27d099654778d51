//! The `main` of every replay test binary (see `acl_notify_fuzz_targets::replay`).

use libtest_mimic::{Arguments, Trial};

use acl_notify_fuzz_targets::replay::{self, Ran};

/// Runs the replay of `target` as the binary's one test, named after it, through
/// libtest-mimic: `cargo test`'s and cargo-nextest's arguments (`--list`, filters, `--exact`)
/// work as for any test. One test thread, so the replay runs on the main thread (it sets the
/// namespace variables: `replay::run_target`).
pub fn main_for(target: &'static str, run: fn() -> Result<Ran, String>) {
    let mut args = Arguments::from_args();
    args.test_threads = Some(1);
    let trial = Trial::test(target, move || Ok(replay::run_target(target, run)?));
    libtest_mimic::run(&args, vec![trial]).exit();
}

//! libFuzzer entry point of the `shm_open` target: validation of a damaged namespace file. The
//! properties live in `acl_notify_fuzz_targets::shm_open` (tests/fuzz), which `cargo test` also
//! replays.
#![no_main]

use acl_notify_fuzz_targets::shm_open;

libfuzzer_sys::fuzz_target!(|input: shm_open::Input| shm_open::check(input));

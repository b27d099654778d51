//! libFuzzer entry point of the `capi_calls` target: random sequences of C ABI calls. The
//! properties live in `acl_notify_fuzz_targets::capi_calls` (tests/fuzz), which `cargo test`
//! also replays.
#![no_main]

use acl_notify_fuzz_targets::capi_calls;

libfuzzer_sys::fuzz_target!(|ops: Vec<capi_calls::Op>| capi_calls::check(ops));

//! libFuzzer entry point of the `key_parse` target: the export-key parser. The properties live
//! in `acl_notify_fuzz_targets::key_parse` (tests/fuzz), which `cargo test` also replays.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| acl_notify_fuzz_targets::key_parse::check(data));

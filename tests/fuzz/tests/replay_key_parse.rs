//! Replays the `key_parse` fuzz target's seeds and generated inputs (see `replay`).

mod common;

use acl_notify_fuzz_targets::{key_parse, replay};

fn main() {
    common::main_for("key_parse", || {
        replay::replay_bytes("key_parse", |b, _| {
            key_parse::check(b);
            true
        })
    });
}

//! Replays the `shm_open` fuzz target's seeds and generated inputs (see `replay`).

mod common;

use acl_notify_fuzz_targets::{replay, shm_open};

fn main() {
    common::main_for("shm_open", || {
        replay::replay("shm_open", shm_open::generate, shm_open::check)
    });
}

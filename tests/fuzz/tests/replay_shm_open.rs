//! Replays the `shm_open` fuzz target's seeds and generated inputs (see `replay`).

use acl_notify_fuzz_targets::{replay, shm_open};

fn main() {
    replay::main_for("shm_open", || {
        replay::replay("shm_open", shm_open::generate, shm_open::check)
    });
}

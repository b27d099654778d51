//! Conformance suite runner (placeholder; filled by the simulator issue).
fn main() {}

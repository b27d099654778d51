//! Benchmarks (placeholder; filled by the benchmark issue).
fn main() {}

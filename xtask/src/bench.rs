//! `cargo xtask bench` (placeholder; filled by the benchmark issue).

use argh::FromArgs;

/// Run the benchmarks (release build) against their OS baselines and print a table.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "bench")]
pub struct BenchArgs {}

pub fn bench(_: &BenchArgs) -> Result<(), String> {
    Err("bench is not implemented yet (issue #6)".into())
}

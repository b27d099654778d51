//! `cargo xtask check-nostd` and `cargo xtask size` (placeholder; filled by the core issue).

use argh::FromArgs;

/// Build the core for aarch64-unknown-none (with and without defmt) and fail if anything
/// pulls in std.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "check-nostd")]
pub struct CheckNostdArgs {}

/// Print the code size of the core built for aarch64-unknown-none, as linked by a small
/// firmware-style user of its whole API.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "size")]
pub struct SizeArgs {}

pub fn check_nostd(_: &CheckNostdArgs) -> Result<(), String> {
    Err("check-nostd is not implemented yet (issue #2)".into())
}

pub fn size(_: &SizeArgs) -> Result<(), String> {
    Err("size is not implemented yet (issue #2)".into())
}

//! `cargo xtask build` (the C library and header) and `cargo xtask demo` (placeholder; filled
//! by the C ABI issue).

use argh::FromArgs;

use crate::BackendArg;

/// Build the C library `target/acl-notify/lib/libascendcl.so` and its header
/// `target/acl-notify/include/acl/acl.h`.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "build")]
pub struct BuildArgs {
    /// backend the library runs on (only `sim` builds a libascendcl.so)
    #[argh(option, default = "BackendArg::Sim")]
    pub backend: BackendArg,
    /// build with optimisations
    #[argh(switch)]
    pub release: bool,
}

/// Build and run the two-process notify flow of SPEC §7 on the simulator, printing a
/// timeline and a verdict.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "demo")]
pub struct DemoArgs {}

pub fn build(_: &BuildArgs) -> Result<(), String> {
    Err("build is not implemented yet (issue #4)".into())
}

pub fn demo(_: &DemoArgs) -> Result<(), String> {
    Err("demo is not implemented yet (issue #4)".into())
}

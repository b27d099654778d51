//! `cargo xtask stubs`: writes README's list of the functions the headers declare and the
//! simulator does not implement (the ones `backend-sim/capi/build.rs` generates stubs for),
//! using the same generator (`backend-sim/capi/stubgen.rs`).

use argh::FromArgs;

use crate::run::root;
use crate::stubgen;

/// Rewrite README.md's list of unimplemented functions from the headers and the C library's
/// sources (`--check`: only say whether it is current).
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "stubs")]
pub struct StubsArgs {
    /// fail if the list is stale instead of rewriting it
    #[argh(switch)]
    check: bool,
}

pub fn stubs(args: &StubsArgs) -> Result<(), String> {
    let capi = root().join("backend-sim/capi");
    let stubs = stubgen::unimplemented(&capi.join("include"), &capi.join("src"))?;
    let path = root().join("README.md");
    let readme = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let current = stubgen::splice_readme(&readme, &stubgen::render_list(&stubs))?;
    if current == readme {
        println!(
            "README.md lists the {} unimplemented functions",
            stubs.len()
        );
        Ok(())
    } else if args.check {
        Err("README.md's list of unimplemented functions is stale: run `cargo xtask stubs`".into())
    } else {
        std::fs::write(&path, current).map_err(|e| format!("{}: {e}", path.display()))?;
        println!(
            "README.md: wrote the list of {} unimplemented functions",
            stubs.len()
        );
        Ok(())
    }
}

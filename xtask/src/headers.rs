//! `cargo xtask headers`: compares our C headers with the pinned facts of CANN's
//! (`backend-sim/capi/cann_headers.facts`, read by `backend-sim/capi/headerfacts.rs`), or
//! rewrites that list from a CANN include directory (`--refresh`).

use argh::FromArgs;

use crate::headerfacts;
use crate::run::root;

/// Say what our headers lack or state differently from CANN's (the pinned fact list), or
/// rewrite the list from CANN's headers.
#[derive(FromArgs, Debug)]
#[argh(subcommand, name = "headers")]
pub struct HeadersArgs {
    /// a CANN include directory (the one holding `acl/`, e.g. hicann/runtime's
    /// `include/external`): rewrite the pinned list from its headers that ours mirror
    #[argh(option)]
    refresh: Option<std::path::PathBuf>,
    /// with --refresh: where the headers came from, written into the list (e.g.
    /// "hicann/runtime 681ef7610")
    #[argh(
        option,
        default = "String::from(\"an unnamed CANN include directory\")"
    )]
    source: String,
}

pub fn headers(args: &HeadersArgs) -> Result<(), String> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let include = root().join("backend-sim/capi/include");
    let pinned = root().join("backend-sim/capi/cann_headers.facts");
    if let Some(cann) = &args.refresh {
        let theirs = headerfacts::headers_in(cann)?;
        let ours = headerfacts::headers_in(&include)?;
        let both: std::collections::BTreeSet<String> =
            theirs.intersection(&ours).cloned().collect();
        for h in theirs.difference(&ours) {
            println!("not mirrored here (left out of the list): {h}");
        }
        let facts = headerfacts::extract(&cc, cann, &both)?;
        std::fs::write(&pinned, headerfacts::render(&facts, &args.source))
            .map_err(|e| format!("{}: {e}", pinned.display()))?;
        println!(
            "{}: {} facts of {} headers",
            pinned.display(),
            facts.len(),
            both.len()
        );
    }
    let text =
        std::fs::read_to_string(&pinned).map_err(|e| format!("{}: {e}", pinned.display()))?;
    let cann = headerfacts::parse(&text)?;
    let diffs = headerfacts::compare(&cc, &include, &cann)?;
    for d in &diffs {
        println!("{d}");
    }
    if diffs.is_empty() {
        println!("our headers state all {} facts of CANN's", cann.len());
        Ok(())
    } else {
        Err(format!(
            "{} of CANN's {} header facts differ here",
            diffs.len(),
            cann.len()
        ))
    }
}

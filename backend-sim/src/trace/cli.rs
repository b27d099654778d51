//! `acl-notify-inspect trace DIR [-o merged.json] [--html out.html]`: merges a run's trace
//! files into one timeline, checks it against the format, and writes it as JSON (for
//! Perfetto or chrome://tracing) and, if asked, as a self-contained HTML page.

use std::path::PathBuf;

use super::{html, merge};

/// The subcommand's usage text.
pub const USAGE: &str = "usage: acl-notify-inspect trace DIR [-o MERGED.json] [--html OUT.html]

  Merges the timeline files a run wrote with ACL_NOTIFY_SIM_TRACE=DIR (one per process) into
  one timeline: a track per process and stream, an arrow from each record to the wait it
  released. Writes it to MERGED.json (default DIR/timeline.json) and, with --html, as a page
  that draws it without any network access.";

struct Args {
    dir: PathBuf,
    out: Option<PathBuf>,
    html: Option<PathBuf>,
}

fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut dir, mut out, mut page) = (None, None, None);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" | "--output" => out = Some(it.next().ok_or("-o needs a file")?.into()),
            "--html" => page = Some(it.next().ok_or("--html needs a file")?.into()),
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown argument {s:?}")),
            _ if dir.is_none() => dir = Some(PathBuf::from(a)),
            _ => return Err(format!("unexpected argument {a:?}")),
        }
    }
    Ok(Args {
        dir: dir.ok_or("trace needs the directory the run wrote to")?,
        out,
        html: page,
    })
}

/// Runs the subcommand on its arguments (those after `trace`); the exit status: 0 done, 1
/// the files could not be read or the timeline is not valid, 2 bad usage.
pub fn main(args: impl Iterator<Item = String>) -> u8 {
    let a = match parse(args) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("acl-notify-inspect trace: {e}\n{USAGE}");
            return 2;
        }
    };
    match run(&a) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("acl-notify-inspect trace: {e}");
            1
        }
    }
}

fn run(a: &Args) -> Result<(), String> {
    let t = merge::merge_dir(&a.dir)?;
    let json = t.to_json();
    let doc: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("the merged timeline is not JSON: {e}"))?;
    let checked =
        merge::validate(&doc).map_err(|e| format!("the merged timeline is invalid: {e}"))?;
    let out = a.out.clone().unwrap_or_else(|| a.dir.join("timeline.json"));
    std::fs::write(&out, &json).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    println!(
        "{} files merged: {} events on {} tracks, {} arrows (record → wait), {} merged records{}",
        t.files,
        checked.events,
        checked.tracks,
        t.arrows,
        t.merged,
        if t.skipped > 0 {
            format!(", {} unreadable lines skipped", t.skipped)
        } else {
            String::new()
        }
    );
    println!("timeline: {}", out.display());
    if let Some(p) = &a.html {
        let title = format!("acl-notify timeline of {}", a.dir.display());
        std::fs::write(p, html::render(&t, &checked, &title))
            .map_err(|e| format!("cannot write {}: {e}", p.display()))?;
        println!("page: {}", p.display());
    }
    Ok(())
}

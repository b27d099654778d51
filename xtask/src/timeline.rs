//! The demo's timeline: `cargo xtask demo` runs its two processes with
//! `ACL_NOTIFY_SIM_TRACE` set and merges what they wrote with the installed
//! `acl-notify-inspect trace` into `target/acl-notify/demo-timeline.{json,html}`; `cargo xtask
//! ci-long` then opens the page in a real headless browser (Debian's chromium) and checks
//! that it drew every track.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What `acl-notify-inspect trace` said it merged.
#[derive(Debug, PartialEq, Eq)]
pub struct Merged {
    pub files: u64,
    pub tracks: u64,
    pub arrows: u64,
}

/// Reads the inspector's summary line ("2 files merged: 40 events on 2 tracks, 1 arrows …").
fn parse_summary(out: &str) -> Option<Merged> {
    let line = out.lines().find(|l| l.contains(" files merged: "))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let before = |w: &str| -> Option<u64> {
        let i = words.iter().position(|x| x.trim_end_matches(',') == w)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    Some(Merged {
        files: words.first()?.parse().ok()?,
        tracks: before("tracks")?,
        arrows: before("arrows")?,
    })
}

/// Where the demo's merged timeline and page go.
pub fn demo_outputs(prefix: &Path) -> (PathBuf, PathBuf) {
    (
        prefix.join("demo-timeline.json"),
        prefix.join("demo-timeline.html"),
    )
}

/// Merges the trace files in `dir` with `inspect` (which checks the result against the
/// format and fails otherwise) into the demo's outputs under `prefix`.
pub fn merge_demo(inspect: &Path, dir: &Path, prefix: &Path) -> Result<Merged, String> {
    let (json, html) = demo_outputs(prefix);
    let out = Command::new(inspect)
        .arg("trace")
        .arg(dir)
        .arg("-o")
        .arg(&json)
        .arg("--html")
        .arg(&html)
        .output()
        .map_err(|e| format!("could not run {}: {e}", inspect.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "acl-notify-inspect trace failed ({}): {}{}",
            out.status,
            stdout,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    parse_summary(&stdout).ok_or_else(|| format!("no summary in the inspector's output: {stdout}"))
}

/// The value of attribute `name` on the first element that has it, in `dom`.
fn attr(dom: &str, name: &str) -> Option<u64> {
    let at = dom.find(&format!("{name}=\""))? + name.len() + 2;
    dom[at..].split('"').next()?.parse().ok()
}

/// Opens `page` in headless chromium and checks, in the DOM it dumps after the page's
/// script ran, that the script drew as many tracks (and arrows) as the page says there are.
pub fn check_in_browser(page: &Path) -> Result<String, String> {
    crate::setup::for_browser()?;
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(page)
        .output()
        .map_err(|e| format!("could not run chromium: {e}"))?;
    let dom = String::from_utf8_lossy(&out.stdout);
    let expected = attr(&dom, "data-tracks-expected").ok_or_else(|| {
        format!(
            "the page states no track count ({} bytes of DOM)",
            dom.len()
        )
    })?;
    let Some(drawn) = attr(&dom, "data-tracks-drawn") else {
        return Err(format!(
            "the page's script did not finish drawing (no data-tracks-drawn); chromium said: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .take(5)
                .collect::<Vec<_>>()
                .join(" | ")
        ));
    };
    let groups = dom.matches("data-track=\"").count() as u64;
    let arrows = (
        attr(&dom, "data-arrows-expected"),
        attr(&dom, "data-arrows-drawn"),
    );
    if expected == 0 || drawn != expected || groups != expected {
        return Err(format!(
            "expected {expected} tracks; the script says it drew {drawn}, the DOM has {groups}"
        ));
    }
    if arrows.0 != arrows.1 {
        return Err(format!(
            "arrows: expected {:?}, drawn {:?}",
            arrows.0, arrows.1
        ));
    }
    Ok(format!(
        "chromium drew all {drawn} tracks and {} arrows of {}",
        arrows.1.unwrap_or(0),
        page.display()
    ))
}

/// `cargo xtask ci-long`'s timeline step: the demo (which merges its timeline), then the
/// page in the browser.
pub fn ci_step() -> Result<(), String> {
    crate::build::demo(&crate::build::DemoArgs {
        no_whitelist: false,
        release: false,
        hosts: None,
    })?;
    let prefix = crate::build::target_dir()?.join("acl-notify");
    let msg = check_in_browser(&demo_outputs(&prefix).1)?;
    eprintln!("{msg}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_attributes_parse() {
        let out =
            "2 files merged: 31 events on 2 tracks, 1 arrows (record → wait), 0 merged records\n";
        assert_eq!(
            parse_summary(out),
            Some(Merged {
                files: 2,
                tracks: 2,
                arrows: 1
            })
        );
        assert_eq!(parse_summary("nothing"), None);
        let dom = r#"<body data-tracks-expected="3" data-tracks-drawn="3">"#;
        assert_eq!(attr(dom, "data-tracks-drawn"), Some(3));
        assert_eq!(attr(dom, "data-arrows-drawn"), None);
    }
}

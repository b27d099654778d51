//! House rules of the source files of the simulator, the C library, the core and the handle
//! slab, checked on the files: each starts with a `//!` line saying what it is for, none
//! holds more than 1,000 lines of code (test modules, blank lines and comments not counted),
//! and no string literal holds the indentation of a lost line continuation.

use std::path::{Path, PathBuf};

const CRATES: &[&str] = &["src", "capi/src", "../core/src", "../handles/src"];

/// Most lines of code a file may hold.
const MAX_CODE_LINES: usize = 1000;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read source dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn all_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for c in CRATES {
        rust_files(&root.join(c), &mut files);
    }
    assert!(files.len() > 50, "only {} files found", files.len());
    files
}

/// Lines of `text` that are code: before its `#[cfg(test)] mod tests {` (if any), neither blank
/// nor a comment.
fn code_lines(text: &str) -> usize {
    let code = text
        .split("#[cfg(test)]\nmod tests {")
        .next()
        .unwrap_or(text);
    code.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

#[test]
fn every_file_says_what_it_is_for() {
    let missing: Vec<String> = all_files()
        .iter()
        .filter(|p| {
            !std::fs::read_to_string(p)
                .unwrap()
                .trim_start()
                .starts_with("//!")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` line: {missing:?}"
    );
}

#[test]
fn no_file_holds_more_than_a_thousand_lines_of_code() {
    let big: Vec<String> = all_files()
        .iter()
        .filter(|p| !p.ends_with("tests.rs"))
        .filter_map(|p| {
            let n = code_lines(&std::fs::read_to_string(p).unwrap());
            (n > MAX_CODE_LINES).then(|| format!("{}: {n}", p.display()))
        })
        .collect();
    assert!(
        big.is_empty(),
        "files over {MAX_CODE_LINES} lines of code: {big:?}"
    );
}

#[test]
fn the_counts_leave_out_tests_blanks_and_comments() {
    let text =
        "//! doc\n\nfn a() {}\n// note\n    let x = 1;\n#[cfg(test)]\nmod tests {\nfn t() {}\n}\n";
    assert_eq!(code_lines(text), 2);
}

/// The one-line string literals of `line` that hold a run of 8 or more spaces between two
/// words: a literal whose line continuation (`\` at the end of a line) was lost when it was
/// joined onto one line, so that a message reads "... until aclrtStreamAbort                  drops
/// them". (Naive about escaped quotes: a literal holding `\"` is split there.)
fn broken_continuations(line: &str) -> Vec<&str> {
    if line.trim_start().starts_with("//") {
        return Vec::new();
    }
    line.split('"')
        .skip(1)
        .step_by(2)
        .filter(|lit| {
            let t = lit.trim();
            t.contains("        ") && !t.starts_with(' ')
        })
        .collect()
}

#[test]
fn no_string_literal_lost_its_line_continuation() {
    assert_eq!(
        broken_continuations(r#"    "until aclrtStreamAbort                  drops them","#),
        ["until aclrtStreamAbort                  drops them"]
    );
    assert!(broken_continuations(r#"    "until aclrtStreamAbort \"#).is_empty());
    assert!(broken_continuations(r#"    // "a comment          with spaces""#).is_empty());
    let mut found = Vec::new();
    for p in all_files() {
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, line) in text.lines().enumerate() {
            for lit in broken_continuations(line) {
                found.push(format!("{}:{}: {lit:?}", p.display(), i + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "string literals with a run of spaces inside (a lost `\\` line continuation):\n  {}",
        found.join("\n  ")
    );
}

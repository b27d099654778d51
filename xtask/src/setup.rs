//! What a command needs on the machine, installed by the command itself: the README promises
//! that `cargo xtask demo` and `cargo xtask test` work on a fresh machine with nothing run
//! first but git, rustup and a C compiler. The compiler cannot be installed from here: Rust
//! links every program through `cc`, this one's build too, so without it `cargo xtask` stops at
//! "linker `cc` not found" before it runs (the README says so). The pinned toolchain itself
//! comes from `rust-toolchain.toml` (rustup installs it, with its components and targets, when
//! cargo is first run here); this module adds what rustup may have skipped and the Debian
//! packages.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::run::status;

/// A tool found on `PATH` by running it, and the Debian packages that bring it.
struct Tool {
    exe: &'static str,
    args: &'static [&'static str],
    /// Fed to the tool's standard input: a compiler is asked to compile a file that includes
    /// the system headers the tests use, since Debian's `gcc` only recommends `libc6-dev`, so a
    /// `cc` that runs (`--version`) may still have no `<stdio.h>`.
    input: Option<&'static str>,
    packages: &'static [&'static str],
}

/// The C compiler: the demo and the C tests build programs against the installed library.
const CC: Tool = Tool {
    exe: "cc",
    args: &["-x", "c", "-fsyntax-only", "-"],
    input: Some(
        "#include <stdio.h>\n#include <pthread.h>\n#include <dlfcn.h>\nint main(void) { return 0; }\n",
    ),
    packages: &["gcc", "libc6-dev"],
};

/// The C++ compiler: the C ABI tests compile the headers as C++ too.
const CXX: Tool = Tool {
    exe: "c++",
    args: &["-x", "c++", "-fsyntax-only", "-"],
    input: Some("#include <cstdio>\n#include <atomic>\nint main() { return 0; }\n"),
    packages: &["g++"],
};

/// Memcheck runs `tests/c/finalize_race.c` in the C ABI tests.
const VALGRIND: Tool = Tool {
    exe: "valgrind",
    args: &["--version"],
    input: None,
    packages: &["valgrind"],
};

/// A real browser: `cargo xtask ci-long` opens the demo's timeline page in it, headless.
const CHROMIUM: Tool = Tool {
    exe: "chromium",
    args: &["--version"],
    input: None,
    packages: &["chromium"],
};

/// etcd (Debian's 3.4 server): the cluster tests (`backend-sim/tests/cluster.rs`), the C
/// library's SuperPod ring and the `superpod` example start a 3-member cluster of it on
/// loopback. Installed only here: the simulator's harness (`cluster::harness::ensure_etcd`)
/// only checks for it.
const ETCD: Tool = Tool {
    exe: "etcd",
    args: &["--version"],
    input: None,
    packages: &["etcd-server"],
};

/// Whether the tool runs and does its job (for a compiler: compiles `input`).
fn present(t: &Tool) -> bool {
    let child = Command::new(t.exe)
        .args(t.args)
        .stdin(if t.input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut child) = child else {
        return false;
    };
    if let (Some(text), Some(mut stdin)) = (t.input, child.stdin.take()) {
        // A write error (the tool exited early) shows in its status.
        let _ = stdin.write_all(text.as_bytes());
    }
    child.wait().is_ok_and(|s| s.success())
}

/// The tools of `tools` that do not run (or, for a compiler, do not compile).
fn absent<'t>(tools: &[&'t Tool]) -> Vec<&'t Tool> {
    tools.iter().copied().filter(|t| !present(t)).collect()
}

/// Installs the Debian packages of every missing tool (as root; otherwise says what to run),
/// then checks the tools again: a package that installed but left its tool off `PATH` (or a
/// compiler still without its headers) is an error naming the tool here, not a failure of a
/// later step that tells the user to install what was just installed.
fn ensure_tools(tools: &[&Tool]) -> Result<(), String> {
    let before = absent(tools);
    let missing: Vec<&str> = before
        .iter()
        .flat_map(|t| t.packages.iter().copied())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if !is_root {
        return Err(format!(
            "missing system packages: {} (run `sudo apt-get install {}`)",
            missing.join(" "),
            missing.join(" ")
        ));
    }
    eprintln!("==> installing Debian packages: {}", missing.join(" "));
    status(Command::new("apt-get").args(["update", "-qq"]))?;
    status(
        Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"),
    )?;
    let after = absent(&before);
    if after.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = after.iter().map(|t| t.exe).collect();
    Err(format!(
        "installed {} but `{}` still does not run: is the package's folder (/usr/bin) on PATH?",
        missing.join(" "),
        names.join("`, `")
    ))
}

/// The rustup components and targets of `rust-toolchain.toml`, in case the toolchain was
/// installed without them (a `--profile minimal` install does that).
fn ensure_rust_parts() -> Result<(), String> {
    let toolchain = std::env::var("RUSTUP_TOOLCHAIN").ok();
    let rustup = |args: &[&str]| {
        let mut c = Command::new("rustup");
        c.args(args);
        if let Some(t) = &toolchain {
            c.args(["--toolchain", t]);
        }
        c
    };
    let listed = |args: &[&str]| -> Result<String, String> {
        let out = rustup(args)
            .output()
            .map_err(|e| format!("could not run rustup: {e}"))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let targets = listed(&["target", "list", "--installed"])?;
    if !targets.lines().any(|l| l.trim() == "aarch64-unknown-none") {
        status(&mut rustup(&["target", "add", "aarch64-unknown-none"]))?;
    }
    let components = listed(&["component", "list", "--installed"])?;
    for c in ["rustfmt", "clippy"] {
        if !components.lines().any(|l| l.starts_with(c)) {
            status(&mut rustup(&["component", "add", c]))?;
        }
    }
    Ok(())
}

/// What `cargo xtask demo` (and `build`) needs: a C compiler that compiles against the C
/// library's headers (`cc` itself is there, or this program would not have linked, but Debian's
/// `gcc` only recommends `libc6-dev`).
pub fn for_demo() -> Result<(), String> {
    ensure_tools(&[&CC])
}

/// What `cargo xtask demo --hosts 2` needs: a C compiler and etcd.
pub fn for_cluster_demo() -> Result<(), String> {
    ensure_tools(&[&CC, &ETCD])
}

/// What `cargo xtask test` needs: the toolchain's parts, C and C++ compilers, valgrind, etcd.
pub fn for_test() -> Result<(), String> {
    ensure_rust_parts()?;
    ensure_tools(&[&CC, &CXX, &VALGRIND, &ETCD])
}

/// What the timeline step of `cargo xtask ci-long` needs: Debian's chromium.
pub fn for_browser() -> Result<(), String> {
    ensure_tools(&[&CHROMIUM])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tool is present when it runs and succeeds, absent when it is not found or fails: the
    /// check that decides what to install and, after the install, whether it worked.
    #[test]
    fn a_tool_that_is_not_on_path_or_fails_is_absent() {
        let runs = Tool {
            exe: "true",
            args: &[],
            input: None,
            packages: &["coreutils"],
        };
        let missing = Tool {
            exe: "acl-notify-no-such-tool",
            args: &["--version"],
            input: None,
            packages: &["none"],
        };
        let fails = Tool {
            exe: "false",
            args: &[],
            input: None,
            packages: &["coreutils"],
        };
        let names: Vec<&str> = absent(&[&runs, &missing, &fails])
            .iter()
            .map(|t| t.exe)
            .collect();
        assert_eq!(names, ["acl-notify-no-such-tool", "false"]);
    }
}

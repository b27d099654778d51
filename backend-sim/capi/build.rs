//! Writes the stubs of the functions the headers declare and no Rust source implements
//! (`stubgen.rs`) into `OUT_DIR/stubs.rs`, which `src/stubs.rs` includes. Runs again whenever
//! a header or a source changes, so implementing a function in Rust drops its stub.

#[path = "stubgen.rs"]
mod stubgen;

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    for watched in ["include", "src", "stubgen.rs"] {
        println!("cargo::rerun-if-changed={watched}");
    }
    let stubs = match stubgen::unimplemented(&dir.join("include"), &dir.join("src")) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot generate the stubs: {e}");
            std::process::exit(1);
        }
    };
    let path = out.join("stubs.rs");
    if let Err(e) = std::fs::write(&path, stubgen::render_stubs(&stubs)) {
        eprintln!("cannot write {}: {e}", path.display());
        std::process::exit(1);
    }
}

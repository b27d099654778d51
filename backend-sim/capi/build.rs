//! Writes the stubs of the functions the headers declare and no Rust source implements
//! (`stubgen.rs`) into `OUT_DIR/stubs.rs`, which `src/stubs.rs` includes. Runs again whenever
//! a header or a source changes, so implementing a function in Rust drops its stub. Also
//! compiles the C half of the library (`src/*.c`: `aclAppLog`, which is variadic) with the C
//! compiler (`CC`, else `cc`) into a static archive linked into it, and exports what it
//! defines from the shared library (rustc's version script exports only Rust's functions).

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
    if let Err(e) = compile_c(&dir, &out) {
        eprintln!("cannot compile the C sources: {e}");
        std::process::exit(1);
    }
    let path = out.join("stubs.rs");
    if let Err(e) = std::fs::write(&path, stubgen::render_stubs(&stubs)) {
        eprintln!("cannot write {}: {e}", path.display());
        std::process::exit(1);
    }
}

/// Compiles `src/*.c` into `OUT_DIR/libascendcl_c.a`, links it whole into the library, and
/// exports the functions the headers declare that it defines.
fn compile_c(dir: &std::path::Path, out: &std::path::Path) -> Result<(), String> {
    use std::process::Command;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let ar = std::env::var("AR").unwrap_or_else(|_| "ar".into());
    let mut sources = Vec::new();
    for e in std::fs::read_dir(dir.join("src")).map_err(|e| e.to_string())? {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.extension().is_some_and(|x| x == "c") {
            sources.push(p);
        }
    }
    sources.sort();
    let mut objects = Vec::new();
    let mut exported = Vec::new();
    for src in &sources {
        let text = std::fs::read_to_string(src).map_err(|e| format!("{}: {e}", src.display()))?;
        exported.extend(stubgen::defined_in_c(&text));
        let obj = out.join(src.with_extension("o").file_name().ok_or("no file name")?);
        let st = Command::new(&cc)
            .args([
                "-c", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I",
            ])
            .arg(dir.join("include"))
            .arg(src)
            .arg("-o")
            .arg(&obj)
            .status()
            .map_err(|e| format!("{cc}: {e}"))?;
        if !st.success() {
            return Err(format!("{cc} failed on {}", src.display()));
        }
        objects.push(obj);
    }
    let lib = out.join("libascendcl_c.a");
    let _ = std::fs::remove_file(&lib);
    let st = Command::new(&ar)
        .arg("crs")
        .arg(&lib)
        .args(&objects)
        .status()
        .map_err(|e| format!("{ar}: {e}"))?;
    if !st.success() {
        return Err(format!("{ar} failed"));
    }
    println!("cargo::rustc-link-search=native={}", out.display());
    println!("cargo::rustc-link-lib=static:+whole-archive=ascendcl_c");
    // A second version script adds these to rustc's exported list (GNU ld merges them).
    let map = out.join("c_exports.map");
    let globals: String = exported.iter().map(|n| format!("{n}; ")).collect();
    std::fs::write(&map, format!("{{ global: {globals}}};\n")).map_err(|e| e.to_string())?;
    println!(
        "cargo::rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
    Ok(())
}

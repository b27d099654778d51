//! The simulator's module layering, checked on its source: the shared-memory layer (the
//! mapped files, their processes and the stream engine) imports nothing of the `Sim` facade
//! above it and has no cycle of imports, and `sys` imports nothing of the crate. Reads the
//! `use crate::…` and `crate::…` paths of `src/` (test code left out).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The modules below the facade: they may use each other (without a cycle), never a module
/// outside this list.
const LAYER: &[&str] = &[
    "diag",
    "error",
    "fork",
    "ipc_event",
    "mapfile",
    "placement",
    "repair",
    "ring",
    "shm",
    "sigbus",
    "spin",
    "stream",
    "sys",
    "waitgraph",
];

/// Module → the crate's modules it names (top-level modules; a directory is one module).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut dirs = vec![src.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read src").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_owned();
        if module == "lib" || module == "bin" || rel.ends_with("tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let deps = g.entry(module.clone()).or_default();
        for line in code.lines() {
            let line = line.split("//").next().unwrap();
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap()
                        .split(',')
                        .map(|n| n.trim().split("::").next().unwrap())
                        .collect(),
                    None => vec![
                        rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                            .next()
                            .unwrap(),
                    ],
                };
                for n in names {
                    // Lowercase names are modules; others are re-exports of the root.
                    if n.starts_with(|c: char| c.is_ascii_lowercase()) && n != module {
                        deps.insert(n.to_owned());
                    }
                }
            }
        }
    }
    g
}

#[test]
fn sys_imports_nothing_of_the_crate() {
    let g = graph();
    assert_eq!(g["sys"], BTreeSet::new(), "sys imports {:?}", g["sys"]);
}

#[test]
fn the_shared_memory_layer_imports_nothing_above_it_and_has_no_cycle() {
    let g = graph();
    for m in LAYER {
        let deps = g.get(*m).unwrap_or_else(|| panic!("no module {m}"));
        let above: Vec<&String> = deps
            .iter()
            .filter(|d| !LAYER.contains(&d.as_str()))
            .collect();
        assert!(above.is_empty(), "{m} imports {above:?}, above the layer");
    }
    // Depth-first search from every module of the layer; a module seen again on the current
    // path closes a cycle.
    fn visit<'a>(
        g: &'a BTreeMap<String, BTreeSet<String>>,
        m: &'a str,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) {
        if let Some(i) = path.iter().position(|p| *p == m) {
            panic!("import cycle: {} -> {m}", path[i..].join(" -> "));
        }
        if !done.insert(m) {
            return;
        }
        path.push(m);
        for d in g.get(m).into_iter().flatten() {
            visit(g, d, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for m in LAYER {
        visit(&g, m, &mut Vec::new(), &mut done);
    }
}

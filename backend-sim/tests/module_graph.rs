//! The import graph of the simulator's, the core's and the C library's modules, read from their
//! source: no module imports, through any chain, a module that imports it back; the simulator's
//! shared-memory layer imports nothing of the `Sim` facade above it; `sys` imports nothing of
//! the crate.
//!
//! A node is a module (a file: `shm/layout.rs` is `shm::layout`, `shm/mod.rs` is `shm`). An edge
//! is any `crate::`, `super::` or `self::` path (in a `use` or inline) or `use child::…` that
//! names another module, or a root re-export (`crate::Sim` names `sim`); test code
//! (`#[cfg(test)] mod tests` and `tests.rs` files) and comments are left out. A module naming one
//! of its own submodules is not an edge: that is how a directory puts its parts together (a
//! submodule naming its parent is one, so a parent and child that need each other's items still
//! close a cycle through any third module).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path below the crate root (`[]` is the root).
type ModPath = Vec<String>;

/// Module → the other modules it names (its own submodules left out).
type Graph = BTreeMap<ModPath, BTreeSet<ModPath>>;

/// Every module file of `src` (binaries under `bin/` left out), by module path.
fn module_files(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).expect("read src").flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut m: ModPath = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if m.first().is_some_and(|f| f == "bin") {
                continue;
            }
            if m.last().is_some_and(|l| l == "mod" || l == "lib") {
                m.pop();
            }
            out.insert(m, p);
        }
    }
    out
}

/// `text` without comments and without `#[cfg(test)] mod tests { … }` blocks.
fn code(text: &str) -> String {
    let mut s: String = text
        .lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    while let Some(start) = s.find("#[cfg(test)]\nmod tests {") {
        let body = start + "#[cfg(test)]\nmod tests {".len();
        let mut depth = 1;
        let mut end = s.len();
        for (i, c) in s[body..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = body + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        s.replace_range(start..end, "");
    }
    s
}

/// The paths a `use` tree stands for (`a::{b, c::{d}}` is `a::b` and `a::c::d`).
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap().trim().to_owned()];
    };
    let prefix = &tree[..open];
    let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let (mut items, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    items.push(cur);
    items
        .iter()
        .filter(|i| !i.trim().is_empty())
        .flat_map(|i| expand(i))
        .map(|p| format!("{prefix}{p}"))
        .collect()
}

/// Every `crate::…`/`super::…`/`self::…` path of `code`, and every path of its `use` items.
fn paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("use ") {
        // A `use` item starts its line (after `pub`, `pub(crate)` and the like).
        let line_start = rest[..i].rfind('\n').map_or(0, |n| n + 1);
        let lead = rest[line_start..i].trim();
        rest = &rest[i + 4..];
        if !(lead.is_empty() || lead.starts_with("pub")) {
            continue;
        }
        let Some(end) = rest.find(';') else { break };
        out.extend(expand(&rest[..end].replace(char::is_whitespace, "")));
    }
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            if i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
                continue;
            }
            let len = code[i..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(code.len() - i);
            out.push(code[i..i + len].trim_end_matches(':').to_owned());
        }
    }
    out
}

/// The module `path` (named in module `me`) refers to: the longest module its segments name,
/// or the module a root re-export comes from; `None` for paths outside the crate.
fn resolve(
    me: &ModPath,
    path: &str,
    mods: &BTreeMap<ModPath, PathBuf>,
    reexports: &BTreeMap<String, ModPath>,
) -> Option<ModPath> {
    let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, mut i): (ModPath, usize) = match segs.first()? {
        &"crate" => (Vec::new(), 1),
        &"super" | &"self" => (me.clone(), 0),
        first => {
            let mut child = me.clone();
            child.push((*first).to_owned());
            if !mods.contains_key(&child) {
                return None;
            }
            (me.clone(), 0)
        }
    };
    while let Some(s) = segs.get(i) {
        match *s {
            "super" => {
                base.pop();
            }
            "self" => {}
            _ => break,
        }
        i += 1;
    }
    let full: ModPath = base
        .iter()
        .cloned()
        .chain(segs[i..].iter().map(|s| (*s).to_owned()))
        .collect();
    for k in (1..=full.len()).rev() {
        if mods.contains_key(&full[..k]) {
            return Some(full[..k].to_vec());
        }
    }
    if base.is_empty() {
        return full.first().and_then(|n| reexports.get(n)).cloned();
    }
    None
}

/// The import graph of the crate whose sources are in `src`.
fn graph(src: &Path) -> Graph {
    let mods = module_files(src);
    let root = code(&std::fs::read_to_string(src.join("lib.rs")).expect("lib.rs"));
    let mut reexports = BTreeMap::new();
    for p in paths(&root) {
        let name = p.rsplit("::").next().unwrap().to_owned();
        if let Some(m) = resolve(&Vec::new(), &p, &mods, &BTreeMap::new()) {
            reexports.entry(name).or_insert(m);
        }
    }
    let mut g = Graph::new();
    for (m, file) in &mods {
        if m.is_empty() || m.iter().any(|s| s == "tests") {
            continue;
        }
        let text = code(&std::fs::read_to_string(file).unwrap());
        let deps = g.entry(m.clone()).or_default();
        for p in paths(&text) {
            if let Some(d) = resolve(m, &p, &mods, &reexports)
                // Itself, one of its submodules, or the crate root (the root's own items are
                // re-exports, resolved above).
                && !d.starts_with(m)
                && !d.is_empty()
            {
                deps.insert(d);
            }
        }
    }
    g
}

/// A cycle of `g`, as the modules along it (the first repeated at the end), if there is one.
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit<'a>(
        g: &'a Graph,
        m: &'a ModPath,
        path: &mut Vec<&'a ModPath>,
        done: &mut BTreeSet<&'a ModPath>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| *p == m) {
            let mut c: Vec<String> = path[i..].iter().map(|p| p.join("::")).collect();
            c.push(m.join("::"));
            return Some(c);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m);
        for d in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(g, d, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m);
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|m| visit(g, m, &mut Vec::new(), &mut done))
}

fn crate_src(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn m(s: &str) -> ModPath {
    s.split("::").map(str::to_owned).collect()
}

fn assert_acyclic(rel: &str) {
    let g = graph(&crate_src(rel));
    assert!(g.len() > 5, "{rel}: only {} modules read", g.len());
    if let Some(c) = find_cycle(&g) {
        panic!("{rel}: import cycle {}", c.join(" -> "));
    }
}

#[test]
fn the_simulator_has_no_import_cycle() {
    assert_acyclic("src");
}

#[test]
fn the_c_library_has_no_import_cycle() {
    assert_acyclic("capi/src");
}

#[test]
fn the_core_has_no_import_cycle() {
    assert_acyclic("../core/src");
}

/// The checks above can fail: the reader sees `use`, inline and relative paths, root
/// re-exports and child-to-parent edges, and the search finds a cycle through them.
#[test]
fn the_reader_sees_edges_and_the_search_finds_cycles() {
    let src = crate_src("src");
    let mods = module_files(&src);
    let reexports = BTreeMap::from([("Sim".to_owned(), m("sim"))]);
    let found = |me: &str, text: &str| -> BTreeSet<ModPath> {
        paths(&code(text))
            .iter()
            .filter_map(|p| resolve(&m(me), p, &mods, &reexports))
            .collect()
    };
    assert_eq!(
        found(
            "cnt",
            "use crate::{Sim, shm::{self, SlotRef}};\nfn f() { crate::sys::getpid(); }\n\
             // crate::mem::x\n#[cfg(test)]\nmod tests {\n use crate::trace;\n}"
        ),
        BTreeSet::from([m("sim"), m("shm"), m("sys")])
    );
    assert_eq!(
        found("shm", "use layout::Layout;\nuse super::mapfile::Map;"),
        BTreeSet::from([m("shm::layout"), m("mapfile")])
    );
    assert_eq!(
        found("shm::layout", "use super::*;"),
        BTreeSet::from([m("shm")])
    );
    let mut g = Graph::new();
    g.insert(m("a"), BTreeSet::from([m("b")]));
    g.insert(m("b"), BTreeSet::from([m("c")]));
    g.insert(m("c"), BTreeSet::new());
    assert_eq!(find_cycle(&g), None);
    g.get_mut(&m("c")).unwrap().insert(m("a"));
    assert_eq!(
        find_cycle(&g).unwrap(),
        ["a", "b", "c", "a"].map(str::to_owned)
    );
}

#[test]
fn sys_imports_nothing_of_the_crate() {
    let g = graph(&crate_src("src"));
    assert_eq!(
        g[&m("sys")],
        BTreeSet::new(),
        "sys imports {:?}",
        g[&m("sys")]
    );
}

/// The modules below the facade: they (and their submodules) may use each other, never a
/// module outside this list.
const LAYER: &[&str] = &[
    "diag",
    "error",
    "fork",
    "ipc_event",
    "locks",
    "mapfile",
    "placement",
    "prefetch",
    "repair",
    "ring",
    "shm",
    "sigbus",
    "spin",
    "stream",
    "submitted",
    "sys",
    "waitgraph",
    "wake_slice",
    "yielding",
];

#[test]
fn the_shared_memory_layer_imports_nothing_above_it() {
    let g = graph(&crate_src("src"));
    for (module, deps) in &g {
        if !LAYER.contains(&module[0].as_str()) {
            continue;
        }
        let above: Vec<String> = deps
            .iter()
            .filter(|d| !LAYER.contains(&d[0].as_str()))
            .map(|d| d.join("::"))
            .collect();
        assert!(
            above.is_empty(),
            "{} imports {above:?}, above the layer",
            module.join("::")
        );
    }
}

//! The header checker: reads the facts a set of C headers states — each function's prototype
//! (types only), each enumerator's and integer macro's value, each other macro's presence, each
//! typedef's and struct's size and alignment, each struct field's offset, each deprecation
//! mark — and compares ours
//! (`include/acl/*.h`) with a pinned list of CANN's (`cann_headers.facts`).
//!
//! The facts are read by the C compiler, not by hand: `gcc -aux-info` writes the prototypes,
//! `gcc -E -dD` says which header each enum, struct, typedef and macro comes from, and a small
//! generated C program prints the values, sizes and offsets. So the pinned list holds names,
//! numbers and signatures only (no CANN prose or code), and a value written `1U << 2` in one
//! header and `4` in the other compares equal.
//!
//! Used twice with `#[path]` (std only, no dependencies): `cargo xtask headers` (check, or
//! `--refresh DIR` to rewrite the pinned list from a CANN include directory) and the
//! `cann_headers` test.
#![allow(dead_code)] // each includer uses a part

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One fact: its kind (`fn`, `value`, `macro`, `size`, `field`, `deprecated`), the header stating it
/// (relative to the include directory, e.g. `acl/acl_rt.h`), its name and its value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Fact {
    pub kind: String,
    pub header: String,
    pub name: String,
    pub value: String,
}

impl Fact {
    fn line(&self) -> String {
        format!("{} {} {} {}", self.kind, self.header, self.name, self.value)
    }
}

/// The headers (relative paths) of `dir` ending in `.h`, recursively.
pub fn headers_in(dir: &Path) -> Result<BTreeSet<String>, String> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeSet<String>) -> Result<(), String> {
        for e in std::fs::read_dir(d).map_err(|e| format!("{}: {e}", d.display()))? {
            let p = e.map_err(|e| e.to_string())?.path();
            if p.is_dir() {
                walk(root, &p, out)?;
            } else if p.extension().is_some_and(|x| x == "h") {
                let rel = p.strip_prefix(root).map_err(|e| e.to_string())?;
                out.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
        Ok(())
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Self, String> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let d = std::env::temp_dir().join(format!(
            "acl-headerfacts-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        Ok(Scratch(d))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(cmd: &mut Command) -> Result<(bool, String, String), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    Ok((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Splits `s` at `sep` where no bracket of any kind is open.
fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            c if c == sep && depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

/// The identifiers of `s`, in order.
fn idents(s: &str) -> Vec<&str> {
    s.split(|c: char| !is_ident(c))
        .filter(|t| {
            t.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        })
        .collect()
}

/// The name a declarator declares: `(*name)(...)`, `name[4]`, `*name`, `name : 3`.
fn declarator_name(d: &str) -> Option<&str> {
    if let Some(at) = d.find("(*") {
        return idents(&d[at + 2..]).first().copied();
    }
    let d = d.split('[').next()?.split(':').next()?;
    idents(d).last().copied()
}

/// The text after `open` (an index of `{`) up to its matching `}`, and the index after it.
fn braced(s: &str, open: usize) -> Option<(&str, usize)> {
    let mut depth = 0;
    for (i, c) in s[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some((&s[open + 1..open + i], open + i + 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// What the C program is asked to print for a header, before it is known which compile.
enum Probe {
    /// An enumerator or an object-like macro: its integer value, else `defined`.
    Value(String),
    /// A typedef or a struct: `sizeof`/`_Alignof`, else `incomplete`.
    Size(String),
    /// A struct field: `offsetof`.
    Field(String, String),
}

/// The enums, structs and typedefs of one header's preprocessed code.
fn scan_code(code: &str, probes: &mut Vec<Probe>) {
    for stmt in split_top(code, ';') {
        let stmt = stmt.trim();
        let words = idents(stmt);
        let Some(&first) = words.first() else {
            continue;
        };
        let typedef = first == "typedef";
        let body_kind = words
            .iter()
            .take(if typedef { 3 } else { 2 })
            .find(|w| matches!(**w, "enum" | "struct" | "union"))
            .copied();
        let open = stmt.find('{');
        match (body_kind, open) {
            (Some(kind), Some(open)) => {
                let Some((body, after)) = braced(stmt, open) else {
                    continue;
                };
                let head = idents(&stmt[..open]);
                let tag = head
                    .iter()
                    .skip_while(|w| **w != kind)
                    .nth(1)
                    .map(|t| format!("{kind} {t}"));
                let name = if typedef {
                    split_top(&stmt[after..], ',')
                        .into_iter()
                        .find(|d| !d.contains('*'))
                        .and_then(declarator_name)
                        .map(str::to_owned)
                } else {
                    tag
                };
                if kind == "enum" {
                    for e in split_top(body, ',') {
                        if let Some(n) = idents(e).first() {
                            probes.push(Probe::Value((*n).to_owned()));
                        }
                    }
                    if let Some(n) = name {
                        probes.push(Probe::Size(n));
                    }
                    continue;
                }
                let Some(name) = name else { continue };
                probes.push(Probe::Size(name.clone()));
                for field in split_top(body, ';') {
                    let field = field.trim();
                    if field.is_empty() || split_top(field, ':').len() > 1 {
                        continue; // bit-fields have no offset
                    }
                    // A nested struct or union: its declarators follow its body.
                    let decls = match field.rfind('}') {
                        Some(at) => &field[at + 1..],
                        None => field,
                    };
                    for (i, d) in split_top(decls, ',').into_iter().enumerate() {
                        let d = if i == 0 && field.find('}').is_none() {
                            d
                        } else {
                            d.trim_start_matches(|c: char| c == '*' || c.is_whitespace())
                        };
                        let n = if i == 0 || d.contains("(*") {
                            declarator_name(d)
                        } else {
                            idents(d.split('[').next().unwrap_or("")).first().copied()
                        };
                        if let Some(n) = n {
                            probes.push(Probe::Field(name.clone(), n.to_owned()));
                        }
                    }
                }
            }
            _ if typedef => {
                if let Some(n) = declarator_name(stmt) {
                    probes.push(Probe::Size(n.to_owned()));
                }
            }
            _ => {}
        }
    }
}

fn is_guard(name: &str) -> bool {
    name.ends_with("_H") || name.ends_with("_H_") || name.ends_with("_H__")
}

/// Reads the facts of `headers` (paths relative to `include`) with the C compiler `cc`.
pub fn extract(cc: &str, include: &Path, headers: &BTreeSet<String>) -> Result<Vec<Fact>, String> {
    let s = Scratch::new()?;
    let all = s.0.join("all.c");
    let includes: String = headers
        .iter()
        .map(|h| format!("#include \"{h}\"\n"))
        .collect();
    std::fs::write(&all, &includes).map_err(|e| e.to_string())?;
    let inc = include
        .canonicalize()
        .map_err(|e| format!("{}: {e}", include.display()))?;
    let header_of = |path: &str| -> Option<String> {
        let p = Path::new(path);
        let rel = p.strip_prefix(&inc).ok()?.to_string_lossy().into_owned();
        headers.contains(&rel).then_some(rel)
    };
    let mut facts = Vec::new();

    // Prototypes, as the compiler reads them.
    let aux = s.0.join("aux.txt");
    let (ok, _, err) = run(Command::new(cc)
        .args(["-fsyntax-only", "-std=c11", "-w", "-I"])
        .arg(&inc)
        .arg("-aux-info")
        .arg(&aux)
        .arg(&all))?;
    if !ok {
        return Err(format!(
            "{cc} cannot compile the headers of {}:\n{err}",
            inc.display()
        ));
    }
    let text = std::fs::read_to_string(&aux).map_err(|e| e.to_string())?;
    for l in text.lines() {
        let Some(rest) = l.strip_prefix("/* ") else {
            continue;
        };
        let Some((loc, decl)) = rest.split_once(" */ ") else {
            continue;
        };
        let Some(h) = loc.split(':').next().and_then(header_of) else {
            continue;
        };
        let decl = squash(decl.trim_end_matches(';').trim_start_matches("extern "));
        let Some(open) = decl.find(" (") else {
            continue;
        };
        let Some(name) = decl[..open].rsplit([' ', '*']).next() else {
            continue;
        };
        facts.push(Fact {
            kind: "fn".into(),
            header: h,
            name: name.to_owned(),
            value: decl.clone(),
        });
    }

    // Enums, structs, typedefs and macros, each attributed to its header by the line markers.
    let (ok, pre, err) = run(Command::new(cc)
        .args(["-E", "-dD", "-std=c11", "-I"])
        .arg(&inc)
        .arg(&all))?;
    if !ok {
        return Err(format!("{cc} -E failed:\n{err}"));
    }
    let mut code: BTreeMap<String, String> = BTreeMap::new();
    let mut macros: Vec<(String, String, String)> = Vec::new(); // header, name, body
    let mut current: Option<String> = None;
    for l in pre.lines() {
        if let Some(m) = l.strip_prefix("# ") {
            let file = m.split('"').nth(1).unwrap_or("");
            current = header_of(file);
        } else if let Some(def) = l.strip_prefix("#define ") {
            let Some(h) = &current else { continue };
            let end = def.find(|c: char| !is_ident(c)).unwrap_or(def.len());
            let name = &def[..end];
            if def[end..].starts_with('(') {
                let params = def[end..].split(')').next().unwrap_or("");
                facts.push(Fact {
                    kind: "macro".into(),
                    header: h.clone(),
                    name: name.to_owned(),
                    value: format!("function-like {})", squash(params)),
                });
            } else if !is_guard(name) {
                macros.push((h.clone(), name.to_owned(), def[end..].trim().to_owned()));
            }
        } else if l.starts_with('#') {
            continue;
        } else if let Some(h) = &current {
            let c = code.entry(h.clone()).or_default();
            c.push_str(l);
            c.push('\n');
        }
    }
    let mut probes: Vec<(String, Probe)> = Vec::new();
    for (h, c) in &code {
        let mut p = Vec::new();
        scan_code(c, &mut p);
        probes.extend(p.into_iter().map(|p| (h.clone(), p)));
    }
    for (h, name, body) in macros {
        if body.is_empty() {
            facts.push(Fact {
                kind: "macro".into(),
                header: h,
                name,
                value: "defined".into(),
            });
        } else {
            probes.push((h, Probe::Value(name)));
        }
    }
    facts.extend(evaluate(cc, &inc, &includes, &s.0, &probes)?);
    let marked = deprecations(cc, &inc, &includes, &s.0, &facts)?;
    facts.extend(marked);
    facts.sort();
    facts.dedup();
    Ok(facts)
}

/// Compiles and runs a program printing each probe; a probe whose lines do not compile is
/// dropped and the program built again (a macro that is not an integer, an opaque struct).
fn evaluate(
    cc: &str,
    inc: &Path,
    includes: &str,
    dir: &Path,
    probes: &[(String, Probe)],
) -> Result<Vec<Fact>, String> {
    let mut alive = vec![true; probes.len()];
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    let prelude = format!(
        "#include <stdio.h>\n#include <stddef.h>\n{includes}\
         #define V(n, x) do {{ if ((x) < 0) printf(\"%d %lld\\n\", n, (long long)(x)); \
         else printf(\"%d %llu\\n\", n, (unsigned long long)(x)); }} while (0)\n"
    );
    let prelude_lines = prelude.lines().count();
    for _ in 0..200 {
        // Line of the file -> probe index: each probe has one line at file scope (a check that
        // it is an integer constant or a complete type) and one in main.
        let mut lines: Vec<Option<usize>> = vec![None; prelude_lines];
        let mut text = prelude.clone();
        let mut body = String::new();
        let mut body_map = Vec::new();
        for (i, (_, p)) in probes.iter().enumerate() {
            if !alive[i] {
                continue;
            }
            let (check, print) = match p {
                Probe::Value(n) => (
                    format!("enum {{ probe_{i} = (int)(({n}) != 0) }};"),
                    format!("V({i}, {n});"),
                ),
                Probe::Size(t) => (
                    format!("typedef char probe_{i}[sizeof({t})];"),
                    format!("printf(\"%d %zu %zu\\n\", {i}, sizeof({t}), _Alignof({t}));"),
                ),
                Probe::Field(t, f) => (
                    format!("typedef char probe_{i}[offsetof({t}, {f}) + 1];"),
                    format!("printf(\"%d %zu\\n\", {i}, offsetof({t}, {f}));"),
                ),
            };
            text.push_str(&check);
            text.push('\n');
            lines.push(Some(i));
            body.push_str(&print);
            body.push('\n');
            body_map.push(Some(i));
        }
        text.push_str("int main(void) {\n");
        lines.push(None);
        text.push_str(&body);
        lines.extend(body_map);
        text.push_str("return 0;\n}\n");
        std::fs::write(&src, &text).map_err(|e| e.to_string())?;
        let (ok, _, err) = run(Command::new(cc)
            .args(["-std=c11", "-w", "-fmax-errors=0", "-I"])
            .arg(inc)
            .arg("-o")
            .arg(&exe)
            .arg(&src))?;
        if ok {
            let (ok, out, err) = run(&mut Command::new(&exe))?;
            if !ok {
                return Err(format!("the probe program failed: {err}"));
            }
            let mut facts = Vec::new();
            let mut seen = vec![false; probes.len()];
            for l in out.lines() {
                let (i, v) = l.split_once(' ').ok_or("probe output")?;
                let i: usize = i.parse().map_err(|_| "probe output")?;
                seen[i] = true;
                let (h, p) = &probes[i];
                let (kind, name) = match p {
                    Probe::Value(n) => ("value", n.clone()),
                    Probe::Size(t) => ("size", t.replace(' ', "_")),
                    Probe::Field(t, f) => ("field", format!("{}.{f}", t.replace(' ', "_"))),
                };
                facts.push(Fact {
                    kind: kind.into(),
                    header: h.clone(),
                    name,
                    value: v.to_owned(),
                });
            }
            for (i, (h, p)) in probes.iter().enumerate() {
                if seen[i] {
                    continue;
                }
                let (kind, name, value) = match p {
                    Probe::Value(n) => ("macro", n.clone(), "defined"),
                    Probe::Size(t) => ("size", t.replace(' ', "_"), "incomplete"),
                    Probe::Field(..) => continue,
                };
                facts.push(Fact {
                    kind: kind.into(),
                    header: h.clone(),
                    name,
                    value: value.into(),
                });
            }
            return Ok(facts);
        }
        let name = src.to_string_lossy().into_owned();
        let mut dropped = false;
        for l in err.lines() {
            let Some(rest) = l.strip_prefix(&format!("{name}:")) else {
                continue;
            };
            if !rest.contains("error") {
                continue;
            }
            let Some(n) = rest.split(':').next().and_then(|n| n.parse::<usize>().ok()) else {
                continue;
            };
            if let Some(Some(i)) = lines.get(n - 1) {
                alive[*i] = false;
                dropped = true;
            }
        }
        if !dropped {
            return Err(format!("the probe program does not compile:\n{err}"));
        }
    }
    Err("the probe program still does not compile after 200 rounds".into())
}

/// The functions, enumerators and fields the compiler warns of as deprecated (CANN marks them
/// with `ACL_DEPRECATED_MESSAGE`), each a `deprecated … marked` fact: one line of a probe
/// function uses each function, value and field of `facts`, and the compiler's
/// `-Wdeprecated-declarations` warnings name the lines. Only the mark is kept, not its text.
fn deprecations(
    cc: &str,
    inc: &Path,
    includes: &str,
    dir: &Path,
    facts: &[Fact],
) -> Result<Vec<Fact>, String> {
    let src = dir.join("deprecated.c");
    let prelude = format!("#include <stddef.h>\n{includes}void acl_probe_deprecations(void) {{\n");
    let first = prelude.lines().count() + 1;
    let mut used: Vec<&Fact> = Vec::new();
    let mut text = prelude;
    for f in facts {
        let line = match f.kind.as_str() {
            "fn" => format!("(void)&{};", f.name),
            "value" => format!("(void)({});", f.name),
            "field" => {
                let Some((t, field)) = f.name.rsplit_once('.') else {
                    continue;
                };
                // `struct_x` is how a tag is named in a fact (`struct x` in C).
                let t = match t.split_once('_') {
                    Some((tag @ ("struct" | "union"), rest)) => format!("{tag} {rest}"),
                    _ => t.to_owned(),
                };
                format!("(void)offsetof({t}, {field});")
            }
            _ => continue,
        };
        text.push_str(&line);
        text.push('\n');
        used.push(f);
    }
    text.push_str("}\n");
    std::fs::write(&src, &text).map_err(|e| e.to_string())?;
    let (ok, _, err) = run(Command::new(cc)
        .args([
            "-fsyntax-only",
            "-std=c11",
            "-Wdeprecated-declarations",
            "-I",
        ])
        .arg(inc)
        .arg(&src))?;
    if !ok {
        return Err(format!("the deprecation probe does not compile:\n{err}"));
    }
    let name = src.to_string_lossy().into_owned();
    let mut out = Vec::new();
    for l in err.lines() {
        let Some(rest) = l.strip_prefix(&format!("{name}:")) else {
            continue;
        };
        if !rest.contains("[-Wdeprecated-declarations]") {
            continue;
        }
        let Some(n) = rest.split(':').next().and_then(|n| n.parse::<usize>().ok()) else {
            continue;
        };
        if let Some(f) = n.checked_sub(first).and_then(|i| used.get(i)) {
            out.push(Fact {
                kind: "deprecated".into(),
                header: f.header.clone(),
                name: f.name.clone(),
                value: "marked".into(),
            });
        }
    }
    Ok(out)
}

/// The header of the pinned list: how it was made and how to make it again.
pub fn render(facts: &[Fact], source: &str) -> String {
    let mut out = format!(
        "# Facts of CANN's public runtime headers (names, values, prototypes, sizes; no prose or code),\n\
         # read by backend-sim/capi/headerfacts.rs with the C compiler from {source}.\n\
         # The `cann_headers` test checks that our include/acl states each of them.\n\
         # Refresh from a newer CANN: `cargo xtask headers --refresh <CANN>/include/external --source '<what>'`\n\
         # (e.g. hicann/runtime at a commit); then `cargo xtask headers` says what ours lacks.\n\
         # One fact a line: kind header name value. Kinds: fn (prototype as gcc -aux-info writes it),\n\
         # value (enumerator or integer macro), macro (other macro: defined / function-like),\n\
         # size (typedef or struct: sizeof alignof, or incomplete), field (struct field: offset),\n\
         # deprecated (a function, enumerator or field the compiler warns of: marked).\n"
    );
    for f in facts {
        out.push_str(&f.line());
        out.push('\n');
    }
    out
}

/// Reads a pinned list written by [`render`].
pub fn parse(text: &str) -> Result<Vec<Fact>, String> {
    let mut out = Vec::new();
    for (n, l) in text.lines().enumerate() {
        if l.starts_with('#') || l.trim().is_empty() {
            continue;
        }
        let mut it = l.splitn(4, ' ');
        let (Some(kind), Some(header), Some(name), Some(value)) =
            (it.next(), it.next(), it.next(), it.next())
        else {
            return Err(format!(
                "line {}: `{l}` is not `kind header name value`",
                n + 1
            ));
        };
        out.push(Fact {
            kind: kind.into(),
            header: header.into(),
            name: name.into(),
            value: value.into(),
        });
    }
    Ok(out)
}

/// The headers each header includes (directly or not), read from `#include "..."` lines.
fn reach(include: &Path, headers: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut direct: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for h in headers {
        let text = std::fs::read_to_string(include.join(h)).unwrap_or_default();
        let dir = Path::new(h).parent().unwrap_or(Path::new(""));
        let mut inc = Vec::new();
        for l in text.lines() {
            let Some(rest) = l.trim_start().strip_prefix("#include \"") else {
                continue;
            };
            let name = rest.split('"').next().unwrap_or("");
            let beside = dir.join(name).to_string_lossy().into_owned();
            if headers.contains(&beside) {
                inc.push(beside);
            } else if headers.contains(name) {
                inc.push(name.to_owned());
            }
        }
        direct.insert(h.clone(), inc);
    }
    let mut out = BTreeMap::new();
    for h in headers {
        let mut seen = BTreeSet::from([h.clone()]);
        let mut todo = vec![h.clone()];
        while let Some(x) = todo.pop() {
            for y in direct.get(&x).into_iter().flatten() {
                if seen.insert(y.clone()) {
                    todo.push(y.clone());
                }
            }
        }
        out.insert(h.clone(), seen);
    }
    out
}

/// The differences between CANN's pinned facts and ours (`include`): each CANN fact must be
/// stated by ours with the same value, in the same header or one that header includes.
/// Facts only ours states are not differences (aclnsim.h, our additions).
pub fn compare(cc: &str, include: &Path, cann: &[Fact]) -> Result<Vec<String>, String> {
    let headers: BTreeSet<String> = cann.iter().map(|f| f.header.clone()).collect();
    let present = headers_in(include)?;
    let mut diffs = Vec::new();
    let mut readable = BTreeSet::new();
    for h in &headers {
        if present.contains(h) {
            readable.insert(h.clone());
        } else {
            diffs.push(format!("{h}: CANN has this header, we do not"));
        }
    }
    let ours = extract(cc, include, &readable)?;
    let by_name: BTreeMap<(&str, &str), &Fact> = ours
        .iter()
        .map(|f| ((f.kind.as_str(), f.name.as_str()), f))
        .collect();
    let reach = reach(include, &readable);
    for c in cann {
        if !readable.contains(&c.header) {
            continue;
        }
        match by_name.get(&(c.kind.as_str(), c.name.as_str())) {
            None => diffs.push(format!(
                "{}: missing {} {} (CANN: {})",
                c.header, c.kind, c.name, c.value
            )),
            Some(o) if o.value != c.value => diffs.push(format!(
                "{}: {} {} differs: CANN `{}`, ours `{}`",
                c.header, c.kind, c.name, c.value, o.value
            )),
            Some(o) if !reach[&c.header].contains(&o.header) => diffs.push(format!(
                "{}: {} {} is in {} here, which {} does not include",
                c.header, c.kind, c.name, o.header, c.header
            )),
            Some(_) => {}
        }
    }
    Ok(diffs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarators_name_what_they_declare() {
        assert_eq!(declarator_name("void (*fn)(int a)"), Some("fn"));
        assert_eq!(declarator_name("char name[32]"), Some("name"));
        assert_eq!(declarator_name("const void *ptr"), Some("ptr"));
        assert_eq!(declarator_name("uint32_t flag : 3"), Some("flag"));
    }

    #[test]
    fn structs_enums_and_typedefs_become_probes() {
        let mut p = Vec::new();
        scan_code(
            "typedef struct t { int a, *b; union { int x; } u; void (*f)(void); int bits : 3; } T;\n\
             typedef enum { A = 1, B } E; typedef void *H; int f(int);",
            &mut p,
        );
        let names: Vec<String> = p
            .iter()
            .map(|p| match p {
                Probe::Value(n) => format!("v {n}"),
                Probe::Size(t) => format!("s {t}"),
                Probe::Field(t, f) => format!("f {t}.{f}"),
            })
            .collect();
        assert_eq!(
            names,
            [
                "s T", "f T.a", "f T.b", "f T.u", "f T.f", "v A", "v B", "s E", "s H"
            ]
        );
    }
}

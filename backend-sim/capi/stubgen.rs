//! The stub generator: reads the function declarations out of the C headers
//! (`include/acl/*.h`), finds which of them the Rust sources of this crate implement (an
//! `extern "C" fn` of that name anywhere under `src/`, or a C function defined in a `.c` file
//! there), and writes the rest as stubs that
//! answer `ACL_ERROR_RT_FEATURE_NOT_SUPPORT`.
//!
//! One file, used three ways so they cannot disagree: the crate's build script (`build.rs`)
//! writes the stubs into `OUT_DIR` on every build, so implementing a function in Rust removes
//! its stub without touching anything else; `cargo xtask stubs` writes README's list of the
//! functions not implemented; the C ABI test reads the header declarations with it. std only,
//! no dependencies (a build script and xtask both include it with `#[path]`).
#![allow(dead_code)] // each includer uses a part

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

/// One function declared in a header (`ACL_FUNC_VISIBILITY <ret> <name>(<params>);`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decl {
    /// The function's name.
    pub name: String,
    /// The return type as written (whitespace normalised), e.g. `const char *`.
    pub ret: String,
    /// The parameter list as written (whitespace normalised), without the parentheses.
    pub params: String,
    /// The header's path under `include/`, e.g. `acl/acl_rt.h`.
    pub header: String,
}

impl Decl {
    /// The C prototype on one line.
    pub fn prototype(&self) -> String {
        let sep = if self.ret.ends_with('*') { "" } else { " " };
        format!("{}{sep}{}({})", self.ret, self.name, self.params)
    }
}

/// Removes `/* */` and `//` comments, keeping string and character literals intact.
pub fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            i += 2;
            while i < b.len() && !b[i..].starts_with(b"*/") {
                i += 1;
            }
            i = (i + 2).min(b.len());
            out.push(b' ');
        } else if b[i] == b'"' || b[i] == b'\'' {
            let q = b[i];
            out.push(q);
            i += 1;
            while i < b.len() && b[i] != q {
                if b[i] == b'\\' && i + 1 < b.len() {
                    out.push(b[i]);
                    i += 1;
                }
                out.push(b[i]);
                i += 1;
            }
            if i < b.len() {
                out.push(q);
                i += 1;
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    // Only ASCII delimiters were removed or kept whole, so the bytes are still UTF-8.
    String::from_utf8_lossy(&out).into_owned()
}

fn squash(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("( ", "(")
        .replace(" )", ")")
        .replace(" *", "*")
        .replace('*', " *")
        .replace("* ", "*")
        .replace(" ,", ",")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The functions `src` (a header's text) declares with `ACL_FUNC_VISIBILITY`, in order.
/// Preprocessor lines are skipped, so the macro's own `#define` is not a declaration.
pub fn declarations(header: &str, src: &str) -> Result<Vec<Decl>, String> {
    let code: String = strip_comments(src)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("ACL_FUNC_VISIBILITY") {
        rest = &rest[at + "ACL_FUNC_VISIBILITY".len()..];
        let end = rest
            .find(';')
            .ok_or_else(|| format!("{header}: a declaration without `;`"))?;
        let text = &rest[..end];
        rest = &rest[end..];
        if text.contains('{') {
            return Err(format!(
                "{header}: a function body after ACL_FUNC_VISIBILITY"
            ));
        }
        let open = text
            .find('(')
            .ok_or_else(|| format!("{header}: no `(` in `{}`", squash(text)))?;
        let close = text
            .rfind(')')
            .ok_or_else(|| format!("{header}: no `)` in `{}`", squash(text)))?;
        let head = text[..open].trim_end();
        let name_start = head.rfind(|c: char| !is_ident(c)).map_or(0, |i| i + 1);
        let name = &head[name_start..];
        let ret = squash(&head[..name_start]);
        if name.is_empty() || ret.is_empty() {
            return Err(format!("{header}: cannot read `{}`", squash(text)));
        }
        out.push(Decl {
            name: name.to_owned(),
            ret,
            params: squash(&text[open + 1..close]),
            header: header.to_owned(),
        });
    }
    Ok(out)
}

/// The names of the `typedef void *X;` handle types `src` declares (returned by pointer).
pub fn pointer_typedefs(src: &str) -> Vec<String> {
    strip_comments(src)
        .split(';')
        .filter_map(|s| {
            let s = squash(s);
            s.strip_prefix("typedef void *")
                .filter(|n| !n.is_empty() && n.chars().all(is_ident))
                .map(str::to_owned)
        })
        .collect()
}

/// The names of the functions a Rust source defines as `extern "C" fn <name>` (lines that
/// are comments are skipped, so a mention in documentation does not count).
pub fn implemented(rust_src: &str) -> Vec<String> {
    const MARK: &str = "extern \"C\" fn ";
    let mut out = Vec::new();
    for line in rust_src.lines() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut l = line;
        while let Some(at) = l.find(MARK) {
            l = &l[at + MARK.len()..];
            let name: String = l.chars().take_while(|c| is_ident(*c)).collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// The names of the functions a C source defines: a line at the start of the line (not a
/// comment, preprocessor line or declaration) holding `<name>(` and not ending in `;`. Enough
/// for this crate's own C sources, which define their functions in that one style.
pub fn defined_in_c(c_src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in c_src.lines() {
        let t = line.trim_end();
        let first = t.chars().next();
        if first.is_none_or(|c| c.is_whitespace() || matches!(c, '#' | '/' | '*' | '}' | '{'))
            || t.ends_with(';')
            || t.starts_with("extern ")
            || t.starts_with("static ")
        {
            continue;
        }
        let Some(open) = t.find('(') else { continue };
        let name: String = t[..open]
            .chars()
            .rev()
            .take_while(|c| is_ident(*c))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// What a stub returns, decided by the C return type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ret {
    /// `aclError`: ACL_ERROR_RT_FEATURE_NOT_SUPPORT.
    Code,
    /// A pointer or a handle: NULL.
    Null,
    /// `void`.
    Nothing,
    /// An integer of this Rust type: 0.
    Zero(&'static str),
    /// `float`: 0.0.
    Float,
}

/// How a stub returning `ret` is written; an unknown type is an error, so that a new header
/// cannot get a stub with a wrong return ABI.
pub fn classify(ret: &str, handles: &BTreeSet<String>) -> Result<Ret, String> {
    let bare = ret.trim_start_matches("const ").trim();
    Ok(match bare {
        "aclError" => Ret::Code,
        "void" => Ret::Nothing,
        "float" => Ret::Float,
        "uint32_t" => Ret::Zero("u32"),
        "int32_t" | "int" => Ret::Zero("i32"),
        "uint64_t" => Ret::Zero("u64"),
        "int64_t" => Ret::Zero("i64"),
        "size_t" => Ret::Zero("usize"),
        "uint16_t" | "aclFloat16" => Ret::Zero("u16"),
        _ if bare.ends_with('*') || handles.contains(bare) => Ret::Null,
        other => return Err(format!("no stub return value for the C type `{other}`")),
    })
}

fn read(p: &Path) -> Result<String, String> {
    std::fs::read_to_string(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
}

fn files(dir: &Path, ext: &str, out: &mut Vec<std::path::PathBuf>) -> Result<(), String> {
    let rd = std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    for e in rd {
        let p = e.map_err(|e| e.to_string())?.path();
        if p.is_dir() {
            files(&p, ext, out)?;
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
    out.sort();
    Ok(())
}

/// Every function declared by the headers under `include` (the directory holding `acl/`),
/// sorted by name, and the handle typedefs they declare.
pub fn all_declarations(include: &Path) -> Result<(Vec<Decl>, BTreeSet<String>), String> {
    let mut headers = Vec::new();
    files(include, "h", &mut headers)?;
    let mut decls = Vec::new();
    let mut handles = BTreeSet::new();
    for h in &headers {
        let text = read(h)?;
        let rel = h
            .strip_prefix(include)
            .map_err(|e| e.to_string())?
            .to_string_lossy()
            .into_owned();
        decls.extend(declarations(&rel, &text)?);
        handles.extend(pointer_typedefs(&text));
    }
    decls.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = decls.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(format!("{} is declared twice", w[0].name));
    }
    Ok((decls, handles))
}

/// The declared functions no `extern "C" fn` under `src` implements, sorted by name, with
/// what their stub returns.
pub fn unimplemented(include: &Path, src: &Path) -> Result<Vec<(Decl, Ret)>, String> {
    let (decls, handles) = all_declarations(include)?;
    let mut sources = Vec::new();
    files(src, "rs", &mut sources)?;
    let mut done = BTreeSet::new();
    for s in &sources {
        done.extend(implemented(&read(s)?));
    }
    let mut c_sources = Vec::new();
    files(src, "c", &mut c_sources)?;
    for s in &c_sources {
        done.extend(defined_in_c(&read(s)?));
    }
    decls
        .into_iter()
        .filter(|d| !done.contains(&d.name))
        .map(|d| {
            let r = classify(&d.ret, &handles).map_err(|e| format!("{}: {e}", d.name))?;
            Ok((d, r))
        })
        .collect()
}

/// The Rust source of the stubs (included by `src/stubs.rs`) and the list of their names.
pub fn render_stubs(stubs: &[(Decl, Ret)]) -> String {
    let mut s = String::from(
        "// Generated by build.rs from the headers (stubgen.rs); do not edit.\n\n\
         /// The functions declared in the headers that no Rust source implements, by name.\n\
         #[cfg(test)]\n\
         pub const UNIMPLEMENTED: &[&str] = &[\n",
    );
    for (d, _) in stubs {
        let _ = writeln!(s, "    {:?},", d.name);
    }
    s.push_str("];\n");
    for (d, r) in stubs {
        let name = &d.name;
        let (ty, body) = match r {
            Ret::Code => (" -> aclError".to_owned(), format!("unsupported({name:?})")),
            Ret::Null => (
                " -> *mut c_void".to_owned(),
                format!("note({name:?});\n    core::ptr::null_mut()"),
            ),
            Ret::Nothing => (String::new(), format!("note({name:?});")),
            Ret::Zero(t) => (format!(" -> {t}"), format!("note({name:?});\n    0")),
            Ret::Float => (" -> f32".to_owned(), format!("note({name:?});\n    0.0")),
        };
        let _ = write!(
            s,
            "\n/// `{}` (`{}`): not simulated.\n#[unsafe(no_mangle)]\npub extern \"C\" fn {name}(){ty} {{\n    {body}\n}}\n",
            d.prototype().replace('`', "'"),
            d.header,
        );
    }
    s
}

/// The Markdown list README shows: one line per header with its unimplemented functions.
pub fn render_list(stubs: &[(Decl, Ret)]) -> String {
    let mut by_header: Vec<(&str, Vec<&str>)> = Vec::new();
    for (d, _) in stubs {
        match by_header.iter_mut().find(|(h, _)| *h == d.header) {
            Some((_, v)) => v.push(&d.name),
            None => by_header.push((&d.header, vec![&d.name])),
        }
    }
    by_header.sort();
    let mut s = format!(
        "{} functions, each returning `ACL_ERROR_RT_FEATURE_NOT_SUPPORT` (207000), or NULL/0 \
         when it does not return `aclError`, with a message naming it:\n",
        stubs.len()
    );
    for (h, names) in by_header {
        let list: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
        let _ = write!(s, "\n- `{h}` ({}): {}.\n", names.len(), list.join(", "));
    }
    s
}

/// Where README's generated list starts and ends.
pub const README_BEGIN: &str = "<!-- unimplemented functions: generated by `cargo xtask stubs` -->";
/// See [`README_BEGIN`].
pub const README_END: &str = "<!-- end of the generated list -->";

/// `readme` with the text between the markers replaced by `list`; an error if a marker is
/// missing.
pub fn splice_readme(readme: &str, list: &str) -> Result<String, String> {
    let b = readme
        .find(README_BEGIN)
        .ok_or("README.md lacks the marker where the list of unimplemented functions begins")?
        + README_BEGIN.len();
    let e = readme[b..]
        .find(README_END)
        .ok_or("README.md lacks the marker where the list of unimplemented functions ends")?
        + b;
    Ok(format!(
        "{}\n{}\n{}",
        &readme[..b],
        list.trim_end(),
        &readme[e..]
    ))
}

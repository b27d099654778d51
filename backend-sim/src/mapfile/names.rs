//! The names of the shared files under [`SHM_DIR`] (`acl-notify-sim.<namespace>.<kind><n>`):
//! the path of a kind's file, and the listing and removal of a namespace's files by their
//! names alone, whatever their kind.

use std::fmt;
use std::path::{Path, PathBuf};

use acl_notify_core::Error;

use crate::error::SimError;

/// Where the shared files live.
pub const SHM_DIR: &str = "/dev/shm";
/// The start of every shared file's name: `acl-notify-sim.<namespace>.<kind><n>`, where `kind`
/// is the file kind's tag (`srv`, `cnt`, `evt`, `mem`, `wfg`) and `n` the server, or
/// `<server>d<device>` for a per-device kind; a kind with one file per namespace numbers it 0
/// whatever the servers (`wfg0`, the wait-for graph: a namespace of server 1 only has one too).
pub const FILE_PREFIX: &str = "acl-notify-sim.";

/// The path of `namespace`'s file of kind `kind` (lowercase ASCII letters, a tag of its own),
/// numbered `number` (digits: a server, or `<server>d<device>`). Every kind names its files
/// so, which is what lets [`remove_files`] find the files of kinds it has never heard of.
pub(crate) fn file_path(namespace: &str, kind: &str, number: fmt::Arguments<'_>) -> PathBuf {
    debug_assert!(!kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase()));
    Path::new(SHM_DIR).join(format!("{FILE_PREFIX}{namespace}.{kind}{number}"))
}

/// The kind of a file whose name, after `<prefix><namespace>.`, is `rest`: `Some(kind)` if it
/// has the shape [`file_path`] gives (`<kind><digits>` or `<kind><digits>d<digits>`), else
/// `None` (another namespace's file whose name goes on with a dot, or not ours).
fn kind_of(rest: &str) -> Option<&str> {
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let split = rest.find(|c: char| !c.is_ascii_lowercase())?;
    let (kind, number) = rest.split_at(split);
    let ok = match number.split_once('d') {
        Some((server, device)) => digits(server) && digits(device),
        None => digits(number),
    };
    (!kind.is_empty() && ok).then_some(kind)
}

/// A file under [`SHM_DIR`] named the way [`file_path`] names them.
pub(crate) struct SimFile {
    pub(crate) path: PathBuf,
    /// What comes before the name's last dot (a namespace may have dots of its own).
    pub(crate) namespace: String,
    pub(crate) kind: String,
    /// The digits after the kind: a server, or `<server>d<device>`.
    pub(crate) number: String,
}

/// Every file under [`SHM_DIR`] named the way [`file_path`] names them, of every namespace
/// and kind: the one listing that [`namespaces`], [`remove_files`] and the inspector's
/// namespace list read.
pub(crate) fn sim_files() -> Result<Vec<SimFile>, SimError> {
    let dir = std::fs::read_dir(SHM_DIR).map_err(|e| {
        SimError::new(
            Error::DrvInternalError,
            format!("cannot list {SHM_DIR}: {e}"),
        )
    })?;
    Ok(dir
        .flatten()
        .filter_map(|ent| {
            let name = ent.file_name();
            let rest = name.to_str()?.strip_prefix(FILE_PREFIX)?;
            let (ns, tail) = rest.rsplit_once('.')?;
            let kind = kind_of(tail).filter(|_| !ns.is_empty())?;
            Some(SimFile {
                path: ent.path(),
                namespace: ns.to_owned(),
                kind: kind.to_owned(),
                number: tail[kind.len()..].to_owned(),
            })
        })
        .collect())
}

/// Every namespace with at least one file under [`SHM_DIR`] named the way [`file_path`]
/// names them (whatever its kind), sorted, each once.
pub(crate) fn namespaces() -> Result<Vec<String>, SimError> {
    let mut v: Vec<String> = sim_files()?.into_iter().map(|f| f.namespace).collect();
    v.sort();
    v.dedup();
    Ok(v)
}

/// Deletes `namespace`'s files of kind `kind`, or of every kind (`None`: whatever kinds there
/// are, as [`file_path`] names them); returns how many were removed.
pub(crate) fn remove_files(namespace: &str, kind: Option<&str>) -> Result<usize, SimError> {
    let mut n = 0;
    for f in sim_files()? {
        if f.namespace != namespace || kind.is_some_and(|want| f.kind != want) {
            continue;
        }
        match std::fs::remove_file(&f.path) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(SimError::new(
                    Error::DrvInternalError,
                    format!("cannot remove {}: {e}", f.path.display()),
                ));
            }
        }
    }
    Ok(n)
}

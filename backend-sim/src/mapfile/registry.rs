//! The per-process registry of open shared files ([`Registry`]): one mapping per file per
//! process, which a forked child starts afresh.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use crate::error::SimError;
use crate::fork::PerProcess;

/// One mapping per file per process, shared by the users in the process; a forked child starts
/// with an empty registry (its parent's mappings and lock are not its own: see
/// [`crate::fork`]; a [`PerProcess`] sees to it, so no fork handler names a registry). For a
/// `static`.
pub(crate) struct Registry<T: 'static>(PerProcess<HashMap<PathBuf, Weak<T>>>);

impl<T: Send + Sync + 'static> Registry<T> {
    /// An empty registry.
    pub(crate) const fn new() -> Self {
        Registry(PerProcess::new(HashMap::new))
    }

    /// This process's mapping of `path` if it has one that `usable` accepts (a mapping
    /// inherited across `fork()` is the parent's, which `usable` refuses by its pid), else the
    /// one `open` makes (`Ok(None)` from `open` is passed on). Opens are serialised, so two
    /// threads never map one file twice.
    pub(crate) fn get_or_open(
        &self,
        path: &Path,
        usable: impl Fn(&T) -> bool,
        open: impl FnOnce() -> Result<Option<T>, SimError>,
    ) -> Result<Option<Arc<T>>, SimError> {
        let mut reg = self.0.lock()?;
        if let Some(f) = reg.get(path).and_then(Weak::upgrade).filter(|f| usable(f)) {
            return Ok(Some(f));
        }
        let Some(f) = open()? else {
            return Ok(None);
        };
        let f = Arc::new(f);
        reg.retain(|_, w| w.strong_count() > 0);
        reg.insert(path.to_owned(), Arc::downgrade(&f));
        Ok(Some(f))
    }

    /// This process's mapping of `path` if it has one that `usable` accepts; never opens
    /// the file.
    pub(crate) fn find(&self, path: &Path, usable: impl Fn(&T) -> bool) -> Option<Arc<T>> {
        let reg = self.0.lock().ok()?;
        reg.get(path).and_then(Weak::upgrade).filter(|f| usable(f))
    }

    /// This process's lock (for the fork tests).
    #[cfg(test)]
    pub(crate) fn get(&self) -> &std::sync::Mutex<HashMap<PathBuf, Weak<T>>> {
        self.0.get()
    }
}

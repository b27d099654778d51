//! The handles C sees (`aclrtNotify`, `aclrtStream`, `aclrtCntNotify`, `aclrtContext`,
//! `aclrtEvent`): handles of the one slab of acl-notify ([`acl_notify_handles`], whose module
//! doc draws the bit layout), never addresses of Rust memory, so that a stale, destroyed,
//! foreign, forged or garbage handle is answered with 107017 instead of being dereferenced,
//! and a C caller who dereferences one faults at once (they are non-canonical addresses).
//!
//! - Notify handles are the simulator's own [`RawNotify`](acl_notify_core::RawNotify)s, handed
//!   to C as they are: the simulator is opened anew for each session (`session`), so its
//!   tables' random salt is a per-session salt, and its table checks the handle on every
//!   call. The C layer keeps no notify table; [`Stamp`] rejects another kind's, session's or
//!   process's handle before any other check, as SPEC §3 orders.
//! - Streams, count notifies, contexts and events have a [`CTable`] here, because the C layer
//!   keeps more about them than the simulator does (the context of a stream, the device).

use acl_notify_handles::Slab;
pub(crate) use acl_notify_handles::{Kind, MAX_LIVE as MAX_HANDLES, Stamp};

/// One table of C handles of one [`Kind`]: the shared [`Slab`] with its handles typed as what
/// a `void *` holds (`usize`; the library is LP64 only, so no bit is lost).
pub(crate) struct CTable<T>(Slab<T>);

impl<T: Copy> CTable<T> {
    /// An empty table; `seed` should be random per session (it salts the handles).
    pub(crate) fn new(kind: Kind, seed: u64) -> Self {
        CTable(Slab::new(kind, seed))
    }

    /// Stores `value` and returns its handle; `None` if [`MAX_HANDLES`] are live.
    pub(crate) fn insert(&mut self, value: T) -> Option<usize> {
        self.0.insert(value).ok().map(|h| h as usize)
    }

    /// The value behind a live handle.
    pub(crate) fn get(&self, handle: usize) -> Option<T> {
        self.0.get(handle as u64).copied()
    }

    /// Removes a live handle and returns its value; the handle is dead from now on.
    pub(crate) fn remove(&mut self, handle: usize) -> Option<T> {
        self.0.remove(handle as u64)
    }

    /// Removes every live handle whose value satisfies `pred`, returning the values.
    pub(crate) fn remove_where(&mut self, pred: impl FnMut(&T) -> bool) -> Vec<T> {
        self.0.remove_where(pred)
    }

    /// Every live value.
    pub(crate) fn values(&self) -> impl Iterator<Item = T> + '_ {
        self.0.values().copied()
    }
}

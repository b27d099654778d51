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
//! - Handles that live without a session (data buffers, allocator descriptors) are a
//!   [`ProcessTable`]: a `static` [`CTable`] whose slab is a [`PerProcess`] lock, so that a
//!   child forked while another thread was inside one of its calls gets a table of its own
//!   instead of waiting for ever for its parent's lock (`acl_notify_sim`'s `fork` module).

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::{PoisonError, RwLock};

use acl_notify_sim::PerProcess;

use acl_notify_core::Error;
use acl_notify_handles::Slab;
pub(crate) use acl_notify_handles::{Kind, MAX_LIVE as MAX_HANDLES, Stamp};

use crate::errmsg::CallError;

/// 107017 for a handle that is not a live `noun` of this session: "notify 0x… is not a live
/// notify of this process (…, or not a notify)"; `a_noun` is the noun with its article.
pub(crate) fn not_live(noun: &str, a_noun: &str, handle: usize) -> CallError {
    CallError::new(
        Error::InvalidHandle,
        format!(
            "{noun} {handle:#x} is not a live {noun} of this process (destroyed, from another \
             process or session, or not {a_noun})"
        ),
    )
}

/// Stores `value` in `slab` and returns its handle as C holds it; 207001 if [`MAX_HANDLES`]
/// are live (`what`: the handles, plural, for the message).
fn insert<T>(slab: &mut Slab<T>, value: T, what: &str) -> Result<usize, CallError> {
    slab.insert(value).map(|h| h as usize).map_err(|_| {
        CallError::new(
            Error::ResourceAllocFail,
            format!("the process already holds {MAX_HANDLES} {what}"),
        )
    })
}

/// A table of C handles of one [`Kind`] whose values live in a state the caller locks with
/// others (a session's captures: its models, label lists and conditions, `runtime::capture`),
/// the shared [`Slab`] with no lock of its own: the handle is the value's only name.
#[derive(Debug)]
pub(crate) struct Handles<T> {
    slab: Slab<T>,
    /// What the handles are, plural, for the message of a full table.
    what: &'static str,
}

impl<T> Handles<T> {
    /// An empty table of `what` (plural, for messages); `seed` salts the handles.
    pub(crate) fn new(kind: Kind, what: &'static str, seed: u64) -> Self {
        Handles {
            slab: Slab::new(kind, seed),
            what,
        }
    }

    /// Stores `value` and returns its handle; 207001 if [`MAX_HANDLES`] are live.
    pub(crate) fn insert(&mut self, value: T) -> Result<usize, CallError> {
        insert(&mut self.slab, value, self.what)
    }

    /// The value behind a live handle.
    pub(crate) fn get(&self, handle: usize) -> Option<&T> {
        self.slab.get(handle as u64)
    }

    /// The value behind a live handle, mutably.
    pub(crate) fn get_mut(&mut self, handle: usize) -> Option<&mut T> {
        self.slab.get_mut(handle as u64)
    }

    /// Removes a live handle and returns its value; the handle is dead from now on.
    pub(crate) fn remove(&mut self, handle: usize) -> Option<T> {
        self.slab.remove(handle as u64)
    }

    /// Removes every live handle whose value satisfies `pred`, returning the values.
    pub(crate) fn remove_where(&mut self, pred: impl FnMut(&T) -> bool) -> Vec<T> {
        self.slab.remove_where(pred)
    }

    /// Every live handle with its value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (usize, &T)> + '_ {
        self.slab.iter().map(|(h, v)| (h as usize, v))
    }

    /// Every live value.
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> + '_ {
        self.slab.values()
    }

    /// Every live value, mutably.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut T> + '_ {
        self.slab.values_mut()
    }
}

/// One table of C handles of one [`Kind`]: the shared [`Slab`] behind a lock `L` (a session's
/// own [`RwLock`], or a process-wide [`PerProcess`] one: [`ProcessTable`]), with its handles
/// typed as what a `void *` holds (`usize`; the library is LP64 only, so no bit is lost). A
/// panic while the lock is held leaves the slab consistent (each change is one step of it), so
/// a poisoned lock is used as it is.
pub(crate) struct CTable<T, L = RwLock<Slab<T>>> {
    slab: L,
    /// What the handles are, plural, for the message of a full table ("streams").
    what: &'static str,
    values: PhantomData<fn() -> T>,
}

/// A process-wide table of handles that need no session: a forked child gets its parent's
/// table copied if no thread of the parent was changing it at the fork, else an empty one
/// (the parent's handles are then dead in the child: answered as such, never waited for).
pub(crate) type ProcessTable<T> = CTable<T, PerProcess<Slab<T>>>;

/// The lock a [`CTable`] keeps its slab behind.
pub(crate) trait SlabLock<T> {
    /// 207001 if the lock cannot be used safely (the fork handler could not be registered).
    fn usable(&self) -> Result<(), CallError> {
        Ok(())
    }
    fn read(&self) -> impl Deref<Target = Slab<T>> + '_;
    fn write(&self) -> impl DerefMut<Target = Slab<T>> + '_;
}

impl<T> SlabLock<T> for RwLock<Slab<T>> {
    fn read(&self) -> impl Deref<Target = Slab<T>> + '_ {
        RwLock::read(self).unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> impl DerefMut<Target = Slab<T>> + '_ {
        RwLock::write(self).unwrap_or_else(PoisonError::into_inner)
    }
}

/// A [`PerProcess`] slab. Each use registers the fork handler first if it is not yet (a child
/// forked while a thread holds the lock must find it replaced, also when that thread is
/// looking up a handle in a table no one has inserted into); if it cannot be registered
/// (`pthread_atfork` out of memory) the lock is used as a plain one, and
/// [`usable`](SlabLock::usable) makes `insert`, where every handle comes from, answer 207001.
impl<T: Send> SlabLock<T> for PerProcess<Slab<T>> {
    fn usable(&self) -> Result<(), CallError> {
        acl_notify_sim::fork_required().map_err(CallError::backend)
    }

    fn read(&self) -> impl Deref<Target = Slab<T>> + '_ {
        self.write()
    }

    fn write(&self) -> impl DerefMut<Target = Slab<T>> + '_ {
        self.lock()
            .unwrap_or_else(|_| self.get().lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl<T: Copy> CTable<T> {
    /// An empty table of `what` (plural, for messages); `seed` should be random per session
    /// (it salts the handles).
    pub(crate) fn new(kind: Kind, what: &'static str, seed: u64) -> Self {
        CTable {
            slab: RwLock::new(Slab::new(kind, seed)),
            what,
            values: PhantomData,
        }
    }
}

impl<T: Copy + Send> ProcessTable<T> {
    /// A process-wide table of `what` (plural, for messages) over `slab`: what
    /// [`process_table!`] writes (a slab of one kind, randomly seeded, a forked child's copied
    /// from its parent's at its first call).
    pub(crate) const fn process_wide(slab: PerProcess<Slab<T>>, what: &'static str) -> Self {
        CTable {
            slab,
            what,
            values: PhantomData,
        }
    }
}

/// `process_table!(Kind::X, "what")`: a process-wide [`ProcessTable`] of handles of kind `X`
/// (`what`, plural, for messages), for a `static`: its slab randomly seeded in each process,
/// a forked child's copied from its parent's at its first call (`PerProcess::inheriting`).
/// A macro because the slab's maker is a `fn` pointer, which cannot hold the kind.
macro_rules! process_table {
    ($kind:expr, $what:expr) => {
        $crate::handle::ProcessTable::process_wide(
            ::acl_notify_sim::PerProcess::inheriting(
                || ::acl_notify_handles::Slab::new($kind, ::acl_notify_handles::random_seed()),
                ::acl_notify_handles::Slab::clone,
            ),
            $what,
        )
    };
}
pub(crate) use process_table;

impl<T: Copy, L: SlabLock<T>> CTable<T, L> {
    fn read(&self) -> impl Deref<Target = Slab<T>> + '_ {
        self.slab.read()
    }

    fn write(&self) -> impl DerefMut<Target = Slab<T>> + '_ {
        self.slab.write()
    }

    /// Tests: the table's lock, held (for a fork while another thread holds it).
    #[cfg(test)]
    pub(crate) fn held(&self) -> impl Deref<Target = Slab<T>> + '_ {
        self.write()
    }

    /// Stores `value` and returns its handle; 207001 if [`MAX_HANDLES`] are live.
    pub(crate) fn insert(&self, value: T) -> Result<usize, CallError> {
        self.slab.usable()?;
        insert(&mut self.write(), value, self.what)
    }

    /// The value behind a live handle.
    pub(crate) fn get(&self, handle: usize) -> Option<T> {
        self.read().get(handle as u64).copied()
    }

    /// Tests: moves live handle `handle`'s value to a new handle of the same slot (one
    /// generation on), as a destroy and a create would.
    #[cfg(test)]
    pub(crate) fn renew(&self, handle: usize) -> usize {
        let mut t = self.write();
        let v = t.remove(handle as u64).expect("live");
        t.insert(v).ok().expect("room") as usize
    }

    /// Changes a live handle's value in place (`None`: not live).
    pub(crate) fn update<R>(&self, handle: usize, f: impl FnOnce(&mut T) -> R) -> Option<R> {
        self.write().get_mut(handle as u64).map(f)
    }

    /// Removes a live handle and returns its value; the handle is dead from now on.
    pub(crate) fn remove(&self, handle: usize) -> Option<T> {
        self.write().remove(handle as u64)
    }

    /// Removes every live handle whose value satisfies `pred`, returning the values.
    pub(crate) fn remove_where(&self, pred: impl FnMut(&T) -> bool) -> Vec<T> {
        self.write().remove_where(pred)
    }

    /// Every live value whose value satisfies `pred`.
    pub(crate) fn values_where(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<T> {
        self.read().values().filter(|v| pred(v)).copied().collect()
    }

    /// Every live handle whose value satisfies `pred`, with its value.
    pub(crate) fn entries_where(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<(usize, T)> {
        self.read()
            .iter()
            .filter(|(_, v)| pred(v))
            .map(|(h, v)| (h as usize, *v))
            .collect()
    }

    /// Every live handle whose value satisfies `pred`.
    pub(crate) fn handles_where(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<usize> {
        self.read()
            .iter()
            .filter(|(_, v)| pred(v))
            .map(|(h, _)| h as usize)
            .collect()
    }
}

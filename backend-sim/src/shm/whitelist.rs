//! Whitelists in shared memory: the seqlock around a core [`Whitelist`] (also used by the
//! device-memory files), and a notify's whitelist in the notify file.

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;

use acl_notify_core::Error;
use acl_notify_core::table::ExportState;
use acl_notify_core::whitelist::Whitelist;

use crate::error::SimError;

use super::*;

/// A whitelist in shared memory: a seqlock around the bytes of a core [`Whitelist`].
/// Only the owner process writes it (its threads serialised by a local mutex); importers read.
/// Used for exported notifies here and for exported device memory ([`crate::mem`]).
#[repr(C)]
pub(crate) struct ShmWhitelist {
    pub(crate) seq: AtomicU64,
    pub(crate) words: [AtomicU64; WL_WORDS],
}

pub(crate) const WL_WORDS: usize = std::mem::size_of::<Whitelist>() / 8;

/// The words of a shared whitelist as a [`Whitelist`] (no seqlock check: the caller's).
pub(crate) fn load_whitelist(wl: &ShmWhitelist) -> Whitelist {
    let mut words = [0u64; WL_WORDS];
    for (w, a) in words.iter_mut().zip(&wl.words) {
        *w = a.load(SeqCst);
    }
    // SAFETY: `Whitelist` is `#[repr(C)]`, exactly `WL_WORDS * 8` bytes with alignment ≤ 8
    // (checked at compile time), and made only of integers with no padding, so every bit
    // pattern is a valid value; its length is clamped on every read.
    unsafe { std::mem::transmute::<[u64; WL_WORDS], Whitelist>(words) }
}
// SAFETY: atomics only.
unsafe impl crate::mapfile::Shared for ShmWhitelist {}

impl ShmWhitelist {
    /// A consistent snapshot; `None` if the memory stays inconsistent (a writer died
    /// mid-update).
    pub(crate) fn read(&self) -> Option<Whitelist> {
        for i in 0..10_000 {
            let s1 = self.seq.load(SeqCst);
            if s1 % 2 == 1 {
                if i > 100 {
                    std::thread::yield_now();
                }
                continue;
            }
            let list = load_whitelist(self);
            if self.seq.load(SeqCst) == s1 {
                return Some(list);
            }
        }
        None
    }

    /// Replaces the list after applying `f` to the current one. The caller is the only
    /// writer (its process's threads serialised by the caller's lock), so the current list is
    /// never guessed: a sequence word that is odd, or moves under the only writer, means a
    /// writer died mid-update or another process scribbled on the memory: `Err` says which
    /// (for the caller's 507899), and the stored list is left as it is (rebuilding it from
    /// empty would silently drop every process already whitelisted).
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut Whitelist) -> R) -> Result<R, String> {
        let seq = self.seq.load(SeqCst);
        if seq % 2 == 1 {
            return Err(format!("odd ({seq})"));
        }
        let mut cur = load_whitelist(self);
        let r = f(&mut cur);
        // Nobody else may write between our read and our write: if the word moved, someone did.
        if let Err(now) = self
            .seq
            .compare_exchange(seq, seq.wrapping_add(1), SeqCst, SeqCst)
        {
            return Err(format!("changed from {seq} to {now} under its only writer"));
        }
        self.store(seq.wrapping_add(1), cur);
        Ok(r)
    }

    /// Starts the list afresh (consistent and empty), whatever was left in it. For the only
    /// writer, before anyone else can reach the list.
    pub(crate) fn reset(&self) {
        // Odd while we write, even (and past any value it held) after.
        let odd = self.seq.load(SeqCst) | 1;
        self.seq.store(odd, SeqCst);
        self.store(odd, Whitelist::new());
    }

    /// Writes `list`, with the sequence word set to the odd `odd` by this writer, and
    /// publishes it (sequence `odd + 1`).
    pub(crate) fn store(&self, odd: u64, list: Whitelist) {
        // SAFETY: the same layout argument as in `load_whitelist`, in the other direction:
        // a plain-integer `#[repr(C)]` value of exactly `WL_WORDS * 8` bytes.
        let words = unsafe { std::mem::transmute::<Whitelist, [u64; WL_WORDS]>(list) };
        for (a, w) in self.words.iter().zip(words) {
            a.store(w, SeqCst);
        }
        self.seq.store(odd.wrapping_add(1), SeqCst);
    }
}
const _: () = assert!(std::mem::size_of::<Whitelist>() == WL_WORDS * 8);
const _: () = assert!(std::mem::align_of::<Whitelist>() <= 8);

impl ShmFile {
    // ---- whitelists ------------------------------------------------------------------

    /// Reads the whitelist of notify `id` on `dev` (a consistent snapshot). `None` if this
    /// SoC has no whitelists or the memory stays inconsistent (a writer died mid-update).
    pub fn read_whitelist(&self, dev: u32, id: u32) -> Option<Whitelist> {
        self.shm_whitelist(dev, id)?.read()
    }

    /// Replaces the whitelist of notify `id` on `dev` after applying `f` to the current one.
    /// Only the owner process calls this; its threads are serialised here (see
    /// `ShmWhitelist::update`): an inconsistent list is 507899 naming the notify and the
    /// file, and is left as it is.
    pub fn update_whitelist<R>(
        &self,
        dev: u32,
        id: u32,
        f: impl FnOnce(&mut Whitelist) -> R,
    ) -> Result<R, SimError> {
        let wl = self.whitelist_storage(dev, id)?;
        let _g = lock(&self.wl_lock);
        wl.update(f)
            .map_err(|seq| self.inconsistent_whitelist(dev, id, seq))
    }

    /// Starts the whitelist of notify `id` on `dev` afresh (consistent and empty), whatever a
    /// previous use of the id, a dead writer or another process left in it. For the owner
    /// when it exports: until then nobody else can reach the whitelist (no key exists), and
    /// the list is first needed then. (Not at create: that would touch a whitelist page for
    /// every notify; the slab is only paged in for exported notifies.) Called only by the
    /// export call that won the slot's export word (`NotifySlot::export_with`), before it
    /// publishes, so no refused export reaches it; it still does nothing once the notify is
    /// published as exported, against a caller that breaks that rule.
    pub fn reset_whitelist(&self, dev: u32, id: u32) -> Result<(), SimError> {
        let wl = self.whitelist_storage(dev, id)?;
        let _g = lock(&self.wl_lock);
        if self
            .slot(dev, id)
            .is_some_and(|s| s.export_state() != Some(ExportState::None))
        {
            return Ok(());
        }
        wl.reset();
        Ok(())
    }

    /// The whitelist memory of notify `id` on `dev` (507899 if this SoC has none or the id is
    /// out of range: the callers checked both).
    pub(crate) fn whitelist_storage(&self, dev: u32, id: u32) -> Result<&ShmWhitelist, SimError> {
        self.shm_whitelist(dev, id).ok_or_else(|| {
            SimError::new(
                Error::DrvInternalError,
                format!(
                    "no whitelist storage for notify {id} on device {dev} in {} ({} has no IPC, \
                     or the id is out of range)",
                    self.path.display(),
                    self.layout.soc
                ),
            )
        })
    }

    /// 507899: the whitelist of notify `id` on `dev` cannot be trusted (`seq` says why).
    pub(crate) fn inconsistent_whitelist(
        &self,
        dev: u32,
        id: u32,
        seq: impl fmt::Display,
    ) -> SimError {
        SimError::new(
            Error::DrvInternalError,
            format!(
                "the whitelist memory of notify {id} on device {dev} in shared memory file {} is \
                 inconsistent (its sequence word is {seq}): a writer died mid-update or another \
                 process corrupted it; the whitelist was left unchanged (destroy the notify and \
                 create a new one)",
                self.path.display()
            ),
        )
    }
}

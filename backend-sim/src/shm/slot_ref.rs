//! Slot references: this process's counted reference to one notify (its bit in the holder
//! bitmap), deduplicated per process, and creating and joining notifies through them.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Weak};

use acl_notify_core::Error;
use acl_notify_core::table::{Leave, NotifySlot};

use crate::error::SimError;
use crate::sys;

use super::*;

/// This process's live [`SlotRef`]s by (device, id, generation).
pub(crate) type RefMap = HashMap<(u32, u32, u32), Weak<SlotRef>, BuildSlotHasher>;

/// The hasher of [`RefMap`]: a multiply-xorshift of the three words, keyed per process.
/// `std`'s SipHash took about 30% of a create+destroy pair; SipHash guards against keys an
/// attacker picks to collide, and these keys are slot coordinates of this process's own
/// notifies (at most 65,535 ids per device), hashed with a random per-process key.
#[derive(Clone, Copy)]
pub(crate) struct BuildSlotHasher(pub(crate) u64);

impl Default for BuildSlotHasher {
    fn default() -> Self {
        // Raced for, not a `OnceLock`: a child forked while another thread initialised one
        // would wait for it for ever (see [`crate::fork`]). 0: not drawn yet.
        static KEY: AtomicU64 = AtomicU64::new(0);
        let key = KEY.load(Relaxed);
        if key != 0 {
            return BuildSlotHasher(key);
        }
        let mut b = [0u8; 8];
        // Without OS randomness the map still works; only its spread is predictable.
        let _ = sys::fill_random(&mut b);
        let drawn = u64::from_ne_bytes(b) | 1;
        // The first draw to land wins; every map of the process uses the same key.
        BuildSlotHasher(match KEY.compare_exchange(0, drawn, Relaxed, Relaxed) {
            Ok(_) => drawn,
            Err(first) => first,
        })
    }
}

impl std::hash::BuildHasher for BuildSlotHasher {
    type Hasher = SlotHasher;
    fn build_hasher(&self) -> SlotHasher {
        SlotHasher(self.0)
    }
}

pub(crate) struct SlotHasher(u64);

impl std::hash::Hasher for SlotHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(4) {
            let mut w = [0u8; 4];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u32(u32::from_ne_bytes(w));
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0 ^ u64::from(v))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(29);
    }
    #[inline]
    fn finish(&self) -> u64 {
        let h = self.0.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        h ^ (h >> 32)
    }
}

impl ShmFile {
    // ---- references ---------------------------------------------------------------------

    /// Lock of the reference map (used by `SlotRef` creation and drop).
    pub(crate) fn refs(&self) -> std::sync::MutexGuard<'_, RefMap> {
        lock(&self.refs)
    }
}

/// This process's reference to one notify (its bit in the holder bitmap). Shared by every
/// handle and queued task of the process that uses the notify; the bit is cleared when the
/// last `Arc<SlotRef>` goes, and the id freed if no other process holds it.
///
/// The fields are private to this module and never written after `recorded`,
/// the one constructor, checked `slot_off` against `file`: the unchecked [`slot`](Self::slot)
/// relies on it.
pub struct SlotRef {
    file: Arc<ShmFile>,
    /// `file.slot_offset(dev, id)`, worked out once: records and waits ask for the slot on
    /// every task.
    slot_off: usize,
    dev: u32,
    id: u32,
    generation: u32,
}

impl fmt::Debug for SlotRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotRef")
            .field("server", &self.file.server)
            .field("device", &self.dev)
            .field("id", &self.id)
            .field("generation", &self.generation)
            .finish()
    }
}

/// How [`SlotRef::create`] failed.
#[derive(Debug)]
pub enum CreateError {
    /// The pool is full (after a GC pass).
    Exhausted,
    /// Another error.
    Other(SimError),
}

impl SlotRef {
    /// Allocates an id on `dev` and claims it for this process. The caller has checked `dev`.
    pub fn create(
        file: &Arc<ShmFile>,
        dev: u32,
        flags: acl_notify_core::CreateFlags,
    ) -> Result<Arc<SlotRef>, CreateError> {
        let pool = file.pool(dev).ok_or_else(|| {
            CreateError::Other(SimError::new(
                Error::InvalidDeviceId,
                format!("no device {dev}"),
            ))
        })?;
        let _g = file.op_guard();
        // Taken before the alloc so that nothing can block between allocating the id and
        // claiming its slot: a process killed in between leaks the id until the repair grace
        // period ends (see `crate::repair`), so that window is kept as short as it can be.
        let mut refs = file.refs();
        let id = match pool.alloc() {
            Ok(id) => id,
            Err(Error::NoNotifyResource) => return Err(CreateError::Exhausted),
            Err(e) => {
                return Err(CreateError::Other(SimError::new(
                    e,
                    format!("notify id pool of device {dev} in {}", file.path.display()),
                )));
            }
        };
        file.note_allocated(dev, id);
        let corrupt = |what: &str| {
            CreateError::Other(SimError::new(
                Error::DrvInternalError,
                format!(
                    "notify table of device {dev} in {} is corrupt: {what} for id {id}",
                    file.path.display()
                ),
            ))
        };
        let slot_off = file
            .slot_offset(dev, id)
            .ok_or_else(|| corrupt("id out of range"))?;
        let slot: &NotifySlot = file.at(slot_off);
        let owner = acl_notify_core::table::Owner {
            pid: file.pid,
            start_time: file.start_time,
            server: file.server,
            device: dev,
            proc: file.me,
        };
        let generation = match slot.claim(owner, flags) {
            Ok(g) => g,
            Err(_) => {
                // Leave the id allocated: its slot is in an unknown state.
                return Err(corrupt("slot handed out while in use"));
            }
        };
        Ok(Self::recorded(
            file,
            &mut refs,
            slot_off,
            (dev, id, generation),
        ))
    }

    /// Joins the notify `id` on `dev` of generation `generation` as this process (an import),
    /// reusing this process's existing reference if it has one. `None` = stale (107017).
    pub fn join(file: &Arc<ShmFile>, dev: u32, id: u32, generation: u32) -> Option<Arc<SlotRef>> {
        let slot_off = file.slot_offset(dev, id)?;
        let slot: &NotifySlot = file.at(slot_off);
        let _g = file.op_guard();
        let mut refs = file.refs();
        if let Some(r) = refs.get(&(dev, id, generation)).and_then(Weak::upgrade) {
            return Some(r);
        }
        match slot.join(file.me, generation) {
            Ok(_) => {}
            Err(Some(Leave::Last)) => {
                if let Some(p) = file.pool(dev) {
                    let _ = p.free(id);
                }
                return None;
            }
            Err(_) => return None,
        }
        Some(Self::recorded(
            file,
            &mut refs,
            slot_off,
            (dev, id, generation),
        ))
    }

    /// A new reference to the slot at `slot_off` (notify `id` on `dev`, of `generation`),
    /// recorded in this process's map so that the next create or join of it finds it.
    fn recorded(
        file: &Arc<ShmFile>,
        refs: &mut RefMap,
        slot_off: usize,
        (dev, id, generation): (u32, u32, u32),
    ) -> Arc<SlotRef> {
        // The span checked once, here, for every later `slot()` (panics on a bug of ours).
        let _: &NotifySlot = file.at(slot_off);
        let r = Arc::new(SlotRef {
            file: Arc::clone(file),
            slot_off,
            dev,
            id,
            generation,
        });
        refs.insert((dev, id, generation), Arc::downgrade(&r));
        r
    }

    /// The slot. Every record and wait task asks for it two or three times: its span is
    /// checked once, when the reference is made, not at each call (about 35 instructions a
    /// record+wait pair on the worker, callgrind).
    #[inline(always)]
    pub fn slot(&self) -> &NotifySlot {
        // SAFETY: `recorded`, the only constructor (the fields are private to this module
        // and never written after it), checked `slot_off` with `file.at::<NotifySlot>`, and
        // `file` is the same file (held by this reference).
        unsafe { self.file.at_checked_before(self.slot_off) }
    }

    /// The mapped file.
    pub fn file(&self) -> &Arc<ShmFile> {
        &self.file
    }

    /// Device of the notify (the owner's device).
    pub fn device(&self) -> u32 {
        self.dev
    }

    /// Notify id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// Generation of the id this reference holds.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// Whether the slot is still the incarnation this reference holds (one load, on the
    /// flag's line: see [`NotifySlot::is_current`]).
    #[inline]
    pub fn is_live(&self) -> bool {
        self.slot().is_current(self.generation)
    }

    /// `Ok` while the slot is still the incarnation this reference holds. It stops being so
    /// only if another process took this one for dead and dropped its references (its
    /// process-table entry was overwritten): then 507899, before a record or wait touches
    /// what may by now be another process's notify.
    #[inline]
    pub fn live(&self) -> Result<(), SimError> {
        if self.is_live() {
            Ok(())
        } else {
            Err(self.gone())
        }
    }

    #[cold]
    pub(crate) fn gone(&self) -> SimError {
        // Zeros read from a page a truncation cut off are not another process's doing.
        if let Err(e) = self.file.intact() {
            return e;
        }
        SimError::new(
            Error::DrvInternalError,
            format!(
                "notify {} of device {} in {}: this process no longer holds it: another process \
                 dropped this process's references (it found this process's process-table \
                 entry {} dead or overwritten), and the id may now be another notify's; \
                 remove the namespace",
                self.id,
                self.dev,
                self.file.path.display(),
                self.file.me
            ),
        )
    }
}

impl Drop for SlotRef {
    fn drop(&mut self) {
        let file = &self.file;
        if file.pid != sys::getpid() {
            // Inherited across fork(): the bit is the parent's.
            return;
        }
        let _g = file.op_guard();
        let mut refs = file.refs();
        let key = (self.dev, self.id, self.generation);
        match refs.get(&key) {
            // A newer reference of this process to the same notify exists (created after our
            // strong count hit zero): it relies on the bit, keep it.
            Some(w)
                if !std::ptr::eq(w.as_ptr(), self as *const SlotRef) && w.strong_count() > 0 =>
            {
                return;
            }
            Some(w) if std::ptr::eq(w.as_ptr(), self as *const SlotRef) => {
                refs.remove(&key);
            }
            _ => {}
        }
        let Some(slot) = file.slot(self.dev, self.id) else {
            return;
        };
        if !slot.is_live(self.generation) {
            // Our references were dropped for us (see `live`): the bit at our index, if set,
            // is not ours.
            return;
        }
        if slot.leave(file.me) == Leave::Last
            && let Some(p) = file.pool(self.dev)
        {
            let _ = p.free(self.id);
        }
    }
}

//! The handle tables: what a [`RawNotify`](acl_notify_core::RawNotify) or
//! [`RawStream`](acl_notify_core::RawStream) (or count-notify or event handle) given out by
//! this driver stands for.
//!
//! A handle is `slot index + 1` (bits 0..22), a kind tag (bits 22..24), the driver instance
//! (bits 24..32) and the slot's generation (bits 32..64). A lookup checks all four, so a stale,
//! destroyed, foreign (another driver's, or a stream used as a notify) or garbage number never
//! reaches C: it is answered with 107017 from the table.
//!
//! Use and destruction are ordered without holding a lock across a C call: a lookup takes a
//! [`Guard`] (a use count on the slot); destruction marks the slot *closing* (new lookups fail
//! with 107017 at once), waits for the guards still out to drop, calls C, then frees the slot.
//! So the C pointer is destroyed exactly once and never used after (or while) it is destroyed,
//! and no lookup ever blocks.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

const INDEX_BITS: u32 = 22;
const KIND_SHIFT: u32 = 22;
const INSTANCE_SHIFT: u32 = 24;
const GEN_SHIFT: u32 = 32;
/// Most slots one table holds (index + 1 must fit in 22 bits).
pub(crate) const MAX_SLOTS: usize = (1 << INDEX_BITS) - 1;

/// Which table a handle belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The kind tag is two bits: events take the value left.
    Event = 0,
    Notify = 1,
    Stream = 2,
    CntNotify = 3,
}

/// Why a lookup failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// Not a live handle of this table (stale, destroyed, foreign, garbage, or being destroyed).
    Invalid,
    /// Live, but the caller's predicate refused it (e.g. destroying a default stream).
    Refused,
}

#[derive(Debug)]
struct Entry<T> {
    value: T,
    users: u32,
    closing: bool,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    entry: Option<Entry<T>>,
}

#[derive(Debug)]
struct Slots<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
}

/// One table of handles.
#[derive(Debug)]
pub(crate) struct Table<T> {
    kind: Kind,
    instance: u8,
    inner: Mutex<Slots<T>>,
    released: Condvar,
}

/// A use of a live handle: the slot cannot be destroyed while this exists.
#[derive(Debug)]
pub(crate) struct Guard<'t, T: Copy> {
    table: &'t Table<T>,
    index: usize,
    value: T,
}

impl<T: Copy> Guard<'_, T> {
    /// The slot's value when the guard was taken.
    pub(crate) fn get(&self) -> T {
        self.value
    }
}

impl<T: Copy> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        let mut s = self.table.lock();
        if let Some(e) = s.slots.get_mut(self.index).and_then(|s| s.entry.as_mut()) {
            e.users = e.users.saturating_sub(1);
            if e.users == 0 && e.closing {
                self.table.released.notify_all();
            }
        }
    }
}

impl<T: Copy> Table<T> {
    pub(crate) fn new(kind: Kind, instance: u8) -> Self {
        Table {
            kind,
            instance,
            inner: Mutex::new(Slots {
                slots: Vec::new(),
                free: Vec::new(),
            }),
            released: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots<T>> {
        // A panic while the lock is held leaves the table consistent (every mutation is a
        // single assignment), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn encode(&self, index: usize, generation: u32) -> u64 {
        (index as u64 + 1)
            | ((self.kind as u64) << KIND_SHIFT)
            | (u64::from(self.instance) << INSTANCE_SHIFT)
            | (u64::from(generation) << GEN_SHIFT)
    }

    /// The slot index a handle names if its kind, instance and generation match a live slot.
    fn decode(&self, s: &Slots<T>, handle: u64) -> Option<usize> {
        let low = (handle & ((1 << INDEX_BITS) - 1)) as usize;
        let kind = (handle >> KIND_SHIFT) & 0b11;
        let instance = ((handle >> INSTANCE_SHIFT) & 0xff) as u8;
        let generation = (handle >> GEN_SHIFT) as u32;
        if low == 0 || kind != self.kind as u64 || instance != self.instance {
            return None;
        }
        let index = low - 1;
        let slot = s.slots.get(index)?;
        (slot.generation == generation && slot.entry.is_some()).then_some(index)
    }

    /// Stores a value and returns its handle; `None` if the table is full.
    pub(crate) fn insert(&self, value: T) -> Option<u64> {
        let mut s = self.lock();
        let entry = Entry {
            value,
            users: 0,
            closing: false,
        };
        let index = match s.free.pop() {
            Some(i) => i as usize,
            None => {
                if s.slots.len() >= MAX_SLOTS {
                    return None;
                }
                s.slots.push(Slot {
                    generation: 1,
                    entry: None,
                });
                s.slots.len() - 1
            }
        };
        let slot = &mut s.slots[index];
        slot.entry = Some(entry);
        Some(self.encode(index, slot.generation))
    }

    /// A use of a live handle.
    pub(crate) fn acquire(&self, handle: u64) -> Result<Guard<'_, T>, Lookup> {
        let mut s = self.lock();
        let index = self.decode(&s, handle).ok_or(Lookup::Invalid)?;
        let e = s.slots[index].entry.as_mut().ok_or(Lookup::Invalid)?;
        if e.closing {
            return Err(Lookup::Invalid);
        }
        e.users += 1;
        Ok(Guard {
            table: self,
            index,
            value: e.value,
        })
    }

    /// Changes a live handle's value (lifecycle state, cached id). Returns the new value.
    pub(crate) fn update(&self, handle: u64, f: impl FnOnce(&mut T)) -> Result<T, Lookup> {
        let mut s = self.lock();
        let index = self.decode(&s, handle).ok_or(Lookup::Invalid)?;
        let e = s.slots[index].entry.as_mut().ok_or(Lookup::Invalid)?;
        f(&mut e.value);
        Ok(e.value)
    }

    /// Starts destroying a handle: from now on lookups fail; waits until every guard taken
    /// before has dropped, then returns the value for the C call. `allow` may refuse.
    /// Must be followed by [`finish_close`](Self::finish_close).
    pub(crate) fn begin_close(
        &self,
        handle: u64,
        allow: impl FnOnce(&T) -> bool,
    ) -> Result<T, Lookup> {
        let mut s = self.lock();
        let index = self.decode(&s, handle).ok_or(Lookup::Invalid)?;
        {
            let e = s.slots[index].entry.as_mut().ok_or(Lookup::Invalid)?;
            if e.closing {
                return Err(Lookup::Invalid);
            }
            if !allow(&e.value) {
                return Err(Lookup::Refused);
            }
            e.closing = true;
        }
        loop {
            let users = s.slots[index].entry.as_ref().map_or(0, |e| e.users);
            if users == 0 {
                break;
            }
            s = self
                .released
                .wait(s)
                .unwrap_or_else(PoisonError::into_inner);
        }
        s.slots[index]
            .entry
            .as_ref()
            .map(|e| e.value)
            .ok_or(Lookup::Invalid)
    }

    /// Ends a destruction begun by [`begin_close`](Self::begin_close): `destroyed` frees the
    /// slot (bumping its generation, so the old handle is stale forever after); otherwise the
    /// handle becomes usable again (the C call failed and the object still exists).
    pub(crate) fn finish_close(&self, handle: u64, destroyed: bool) {
        let mut s = self.lock();
        let low = (handle & ((1 << INDEX_BITS) - 1)) as usize;
        let Some(index) = low.checked_sub(1) else {
            return;
        };
        let generation = (handle >> GEN_SHIFT) as u32;
        let Some(slot) = s.slots.get_mut(index) else {
            return;
        };
        if slot.generation != generation {
            return;
        }
        if destroyed {
            slot.entry = None;
            slot.generation = slot.generation.wrapping_add(1);
            s.free.push(index as u32);
        } else if let Some(e) = slot.entry.as_mut() {
            e.closing = false;
        }
    }

    /// Takes every live value out (the driver is being dropped, so no guard can exist).
    pub(crate) fn drain(&self) -> Vec<T> {
        let mut s = self.lock();
        let mut out = Vec::new();
        let Slots { slots, free } = &mut *s;
        for (i, slot) in slots.iter_mut().enumerate() {
            if let Some(e) = slot.entry.take() {
                out.push(e.value);
                slot.generation = slot.generation.wrapping_add(1);
                free.push(i as u32);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    #[test]
    fn stale_foreign_and_garbage_handles_are_invalid() {
        let t = Table::<u32>::new(Kind::Notify, 7);
        let other = Table::<u32>::new(Kind::Notify, 8);
        let streams = Table::<u32>::new(Kind::Stream, 7);
        let h = t.insert(10).unwrap();
        assert_ne!(h, 0);
        assert_eq!(t.acquire(h).unwrap().get(), 10);
        assert_eq!(other.acquire(h).err(), Some(Lookup::Invalid));
        assert_eq!(streams.acquire(h).err(), Some(Lookup::Invalid));
        for garbage in [0, 1, u64::MAX, h ^ (1 << 40), h + 1] {
            assert_eq!(
                t.acquire(garbage).err(),
                Some(Lookup::Invalid),
                "{garbage:#x}"
            );
        }
        assert_eq!(t.begin_close(h, |_| true), Ok(10));
        t.finish_close(h, true);
        assert_eq!(t.acquire(h).err(), Some(Lookup::Invalid));
        assert_eq!(t.begin_close(h, |_| true), Err(Lookup::Invalid));
        // The slot is reused under a new generation; the old handle stays stale.
        let h2 = t.insert(11).unwrap();
        assert_ne!(h, h2);
        assert_eq!(t.acquire(h).err(), Some(Lookup::Invalid));
        assert_eq!(t.acquire(h2).unwrap().get(), 11);
    }

    #[test]
    fn refused_and_failed_close_keep_the_handle() {
        let t = Table::<bool>::new(Kind::Stream, 1);
        let h = t.insert(true).unwrap();
        assert_eq!(t.begin_close(h, |v| !*v), Err(Lookup::Refused));
        assert!(t.acquire(h).is_ok());
        assert_eq!(t.begin_close(h, |_| true), Ok(true));
        assert_eq!(t.acquire(h).err(), Some(Lookup::Invalid));
        t.finish_close(h, false);
        assert!(t.acquire(h).is_ok());
        assert_eq!(t.update(h, |v| *v = false), Ok(false));
        assert_eq!(t.drain(), vec![false]);
        assert_eq!(t.acquire(h).err(), Some(Lookup::Invalid));
    }

    #[test]
    fn close_waits_for_guards_and_rejects_new_users() {
        let t = Arc::new(Table::<u32>::new(Kind::Notify, 1));
        let h = t.insert(5).unwrap();
        let guard = t.acquire(h).unwrap();
        let closed = Arc::new(AtomicBool::new(false));
        let closer = {
            let t = Arc::clone(&t);
            let closed = Arc::clone(&closed);
            std::thread::spawn(move || {
                let v = t.begin_close(h, |_| true);
                closed.store(true, Ordering::SeqCst);
                t.finish_close(h, true);
                v
            })
        };
        // Wait until the closer has marked the slot (new lookups fail), without sleeping
        // forever if something is wrong.
        let mut marked = false;
        for _ in 0..2000 {
            if t.acquire(h).is_err() {
                marked = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(marked, "begin_close never marked the slot");
        assert!(
            !closed.load(Ordering::SeqCst),
            "close did not wait for the guard"
        );
        drop(guard);
        assert_eq!(closer.join().unwrap(), Ok(5));
        assert!(closed.load(Ordering::SeqCst));
    }
}

//! [`Table`]: a locked [`Slab`] whose handles are *used* through guards, for values that must
//! not be destroyed while a call uses them (the driver's pointers into a C runtime).
//!
//! Use and destruction are ordered without holding the lock across the user's call: a lookup
//! takes a [`Guard`] (a use count on the slot); destruction marks the slot *closing* (new
//! lookups fail at once), waits for the guards still out to drop, lets the caller destroy the
//! value, then frees the slot. So the value is destroyed exactly once and never used after
//! (or while) it is destroyed, and no lookup ever blocks.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::{Kind, Slab};

/// Why a lookup failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Not a live handle of this table (stale, destroyed, foreign, garbage, or being
    /// destroyed).
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

/// One table of handles whose uses are counted.
#[derive(Debug)]
pub struct Table<T> {
    slab: Mutex<Slab<Entry<T>>>,
    released: Condvar,
}

/// A use of a live handle: it cannot be destroyed while this exists.
#[derive(Debug)]
pub struct Guard<'t, T: Copy> {
    table: &'t Table<T>,
    handle: u64,
    value: T,
}

impl<T: Copy> Guard<'_, T> {
    /// The handle's value when the guard was taken.
    pub fn get(&self) -> T {
        self.value
    }
}

impl<T: Copy> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        let mut s = self.table.lock();
        if let Some(e) = s.get_mut(self.handle) {
            e.users = e.users.saturating_sub(1);
            if e.users == 0 && e.closing {
                self.table.released.notify_all();
            }
        }
    }
}

impl<T: Copy> Table<T> {
    /// An empty table of `kind` handles (see [`Slab::new`] for `seed`).
    pub fn new(kind: Kind, seed: u64) -> Self {
        Table {
            slab: Mutex::new(Slab::new(kind, seed)),
            released: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slab<Entry<T>>> {
        // A panic while the lock is held leaves the table consistent (every mutation is a
        // single step of the slab), so a poisoned lock is still usable.
        self.slab.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores a value and returns its handle; `None` if the table is full
    /// ([`MAX_LIVE`](crate::MAX_LIVE)).
    pub fn insert(&self, value: T) -> Option<u64> {
        self.lock()
            .insert(Entry {
                value,
                users: 0,
                closing: false,
            })
            .ok()
    }

    /// A use of a live handle.
    pub fn acquire(&self, handle: u64) -> Result<Guard<'_, T>, Lookup> {
        let mut s = self.lock();
        let e = s.get_mut(handle).ok_or(Lookup::Invalid)?;
        if e.closing {
            return Err(Lookup::Invalid);
        }
        e.users += 1;
        Ok(Guard {
            table: self,
            handle,
            value: e.value,
        })
    }

    /// Changes a live handle's value (lifecycle state, cached id). Returns the new value.
    pub fn update(&self, handle: u64, f: impl FnOnce(&mut T)) -> Result<T, Lookup> {
        let mut s = self.lock();
        let e = s.get_mut(handle).ok_or(Lookup::Invalid)?;
        f(&mut e.value);
        Ok(e.value)
    }

    /// Starts destroying a handle: from now on lookups fail; waits until every guard taken
    /// before has dropped, then returns the value for the caller to destroy. `allow` may
    /// refuse. Must be followed by [`finish_close`](Self::finish_close).
    pub fn begin_close(&self, handle: u64, allow: impl FnOnce(&T) -> bool) -> Result<T, Lookup> {
        let mut s = self.lock();
        {
            let e = s.get_mut(handle).ok_or(Lookup::Invalid)?;
            if e.closing {
                return Err(Lookup::Invalid);
            }
            if !allow(&e.value) {
                return Err(Lookup::Refused);
            }
            e.closing = true;
        }
        loop {
            let e = s.get(handle).ok_or(Lookup::Invalid)?;
            if e.users == 0 {
                return Ok(e.value);
            }
            s = self
                .released
                .wait(s)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Ends a destruction begun by [`begin_close`](Self::begin_close): `destroyed` frees the
    /// slot (so the old handle is stale forever after); otherwise the handle becomes usable
    /// again (the destruction failed and the object still exists).
    pub fn finish_close(&self, handle: u64, destroyed: bool) {
        let mut s = self.lock();
        if destroyed {
            s.remove(handle);
        } else if let Some(e) = s.get_mut(handle) {
            e.closing = false;
        }
    }

    /// Takes every live value out (for the owner's drop, when no guard can exist).
    pub fn drain(&self) -> Vec<T> {
        self.lock().drain().into_iter().map(|e| e.value).collect()
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
        for garbage in [0, 1, u64::MAX, h ^ (1 << 40), h ^ (1 << 20), h + 1] {
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

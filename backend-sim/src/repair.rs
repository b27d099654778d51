//! Repair of ids leaked by processes that died half-way through a create or destroy, shared by
//! the notify file ([`crate::shm`]), the count-notify file ([`crate::cnt`]) and the IPC event
//! file ([`crate::ipc_event`], whose slots have no id pool: there the leak is a slot left not
//! free with no holder).
//!
//! A create allocates an id in a shared pool and then claims the id's slot; a destroy retires
//! the slot and then frees the id. A process killed between two of those steps leaves an id
//! allocated whose slot nobody will ever use. No single observation can tell such an orphan
//! from another process's create or destroy in flight, so a repair pass only *suspects* an id
//! the first time it sees it orphaned, remembers the slot's state then, and repairs it on a
//! later pass if the state has not changed for the whole grace period. This process's own
//! creates and destroys hold [`LeakRepair::op_guard`], so a pass never sees one of them
//! half-way.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use acl_notify_core::slot::{Payload, Slot};

/// A process between two steps of a create or destroy is never stalled this long in
/// practice; an id that stays orphaned for longer was left by a dead process.
pub(crate) const REPAIR_GRACE: Duration = Duration::from_secs(10);

/// The suspects of one shared file and the lock that keeps this process's own operations out
/// of a repair pass. `S` is a snapshot of a slot's state (e.g. generation and state): an id is
/// repaired only if its snapshot stayed equal for the grace period.
pub(crate) struct LeakRepair<S> {
    ops: RwLock<()>,
    /// (device, id) → snapshot when first seen orphaned, and when.
    suspects: Mutex<HashMap<(u32, u32), (S, Instant)>>,
    grace_ms: AtomicU64,
}

impl<S: Copy + PartialEq> LeakRepair<S> {
    pub(crate) fn new() -> Self {
        LeakRepair {
            ops: RwLock::new(()),
            suspects: Mutex::new(HashMap::new()),
            grace_ms: AtomicU64::new(REPAIR_GRACE.as_millis() as u64),
        }
    }

    /// Held (shared) by this process's creates and destroys for their duration.
    pub(crate) fn op_guard(&self) -> RwLockReadGuard<'_, ()> {
        self.ops.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Test hook: shortens (or lengthens) the grace period.
    #[cfg(test)]
    pub(crate) fn set_grace(&self, grace: Duration) {
        self.grace_ms.store(grace.as_millis() as u64, SeqCst);
    }

    /// One repair pass over `ids`. `orphan(dev, id)` returns the slot's snapshot if the id
    /// looks orphaned now (allocated, and its slot not in use), else `None`;
    /// `repair(dev, id)` frees an id that stayed orphaned in the same state for the grace
    /// period and returns whether it did. Returns how many ids were repaired.
    pub(crate) fn sweep(
        &self,
        ids: impl Iterator<Item = (u32, u32)>,
        mut orphan: impl FnMut(u32, u32) -> Option<S>,
        mut repair: impl FnMut(u32, u32) -> bool,
    ) -> u32 {
        let _excl = self.ops.write().unwrap_or_else(PoisonError::into_inner);
        let mut suspects = self.suspects.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let grace = Duration::from_millis(self.grace_ms.load(SeqCst));
        let mut seen = HashMap::new();
        let mut repaired = 0;
        for (dev, id) in ids {
            let Some(snap) = orphan(dev, id) else {
                continue;
            };
            let since = match suspects.get(&(dev, id)) {
                Some(&(s, t)) if s == snap => t,
                _ => now,
            };
            if now.duration_since(since) >= grace && repair(dev, id) {
                repaired += 1;
                continue;
            }
            seen.insert((dev, id), (snap, since));
        }
        *suspects = seen;
        repaired
    }
}

/// Retires `slot`, which a repair pass found orphaned for the grace period, after clearing its
/// stray holder bits (bits of process-table entries nobody occupies): `hold(mask)` occupies
/// those entries until the slot is retired, so that nobody registers there and joins with one
/// of the bits meanwhile (`None`: an entry was taken). `false` if it is not an orphan any more
/// (an entry was taken, someone joined, or the slot changed). The one retire of the notify and
/// IPC event files' leak repairs, which share the core's [`Slot`].
pub(crate) fn retire_orphan_slot<P: Payload, H>(
    slot: &Slot<P>,
    hold: impl FnOnce(u64) -> Option<H>,
) -> bool {
    let stray = slot.holders();
    let _held = if stray == 0 {
        None
    } else {
        let Some(h) = hold(stray) else {
            return false;
        };
        if slot.clear_stray_holders(stray) != 0 {
            return false;
        }
        Some(h)
    };
    slot.retire_orphan()
}

/// Every (device, id) below each device's high-water mark.
pub(crate) fn all_ids(
    devices: u32,
    high_water: impl Fn(u32) -> u32,
) -> impl Iterator<Item = (u32, u32)> {
    (0..devices).flat_map(move |dev| (0..high_water(dev)).map(move |id| (dev, id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_repaired_only_after_staying_orphaned_in_one_state_for_the_grace_period() {
        let r: LeakRepair<u32> = LeakRepair::new();
        let ids = || all_ids(1, |_| 3);
        let mut state = [Some(7u32), None, Some(1)];
        let mut freed = Vec::new();
        // First sight: suspected, not repaired.
        assert_eq!(r.sweep(ids(), |_, id| state[id as usize], |_, _| true), 0);
        // Grace over, but id 2 changed state meanwhile: only id 0 is repaired.
        r.set_grace(Duration::ZERO);
        state[2] = Some(2);
        let n = r.sweep(
            ids(),
            |_, id| state[id as usize],
            |_, id| {
                freed.push(id);
                true
            },
        );
        // With a zero grace, a changed state is repaired on first sight too.
        assert_eq!((n, freed.clone()), (2, vec![0, 2]));
        // A repair that fails keeps the id suspected; an id no longer orphaned is forgotten.
        r.set_grace(Duration::from_secs(3600));
        state = [Some(7), None, None];
        assert_eq!(r.sweep(ids(), |_, id| state[id as usize], |_, _| true), 0);
        r.set_grace(Duration::ZERO);
        assert_eq!(r.sweep(ids(), |_, id| state[id as usize], |_, _| false), 0);
        assert_eq!(r.suspects.lock().unwrap().len(), 1);
        state = [None, None, None];
        assert_eq!(r.sweep(ids(), |_, id| state[id as usize], |_, _| true), 0);
        assert!(r.suspects.lock().unwrap().is_empty());
    }

    #[test]
    fn a_long_grace_period_holds_repairs_off() {
        let r: LeakRepair<u32> = LeakRepair::new();
        for _ in 0..3 {
            assert_eq!(r.sweep(all_ids(2, |_| 2), |_, _| Some(0), |_, _| true), 0);
        }
        assert_eq!(r.suspects.lock().unwrap().len(), 4);
    }
}

//! The ids a driver hands out for one device's resources, as the simulator does: unique
//! among the live resources, the lowest free id first, an id coming back once its resource
//! is destroyed. CANN's runtime takes such ids from the driver (hicann/runtime
//! `src/runtime/driver/npu_driver_res.cc`: `NpuDriver::ModelIdAlloc` / `ModelIdFree` and the
//! stream ids, through `halResourceIdAlloc` / `halResourceIdFree`), whose pools are per
//! device; stream ids (`streaminfo`) and model runtime ids (`model`) use one each.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The ids of one device: the next never used, and the freed ones (lowest first).
#[derive(Debug, Default)]
pub(crate) struct LowestFreeIds {
    next: u32,
    free: BinaryHeap<Reverse<u32>>,
}

impl LowestFreeIds {
    /// The lowest free id (`u32::MAX` live resources of one device cannot exist: the handle
    /// tables hold far fewer).
    pub(crate) fn take(&mut self) -> u32 {
        if let Some(Reverse(id)) = self.free.pop() {
            return id;
        }
        let id = self.next;
        self.next = self.next.saturating_add(1);
        id
    }

    /// Id `id`, taken from this pool, is free again.
    pub(crate) fn give_back(&mut self, id: u32) {
        self.free.push(Reverse(id));
    }
}

#[cfg(test)]
mod tests {
    use super::LowestFreeIds;

    #[test]
    fn ids_come_back_lowest_first() {
        let mut p = LowestFreeIds::default();
        assert_eq!([p.take(), p.take(), p.take()], [0, 1, 2]);
        p.give_back(2);
        p.give_back(0);
        assert_eq!([p.take(), p.take(), p.take()], [0, 2, 3]);
    }
}

//! The namespace-wide counts in a file's header of which each process also keeps its own part
//! in its process-table entry, so that what a process killed (`SIGKILL`) while counted leaves
//! behind goes when its entry is reclaimed: the busy stream workers (the `busy` module) and
//! the waiters spinning past their first microsecond (`crate::spin`), both read by every
//! spinning wait of the namespace.
//!
//! A place is added to the header's total first and then to the process's part, and taken out
//! of the part first and then out of the total ([`Share`]), so a process killed between the
//! two leaves at most the total one too high, as does anything else a process counts in the
//! total only (the busy count's wake-ups). Whoever reclaims a dead process's entry gives its
//! parts back ([`reclaim`]) and, once every dead entry of a pass is done, lowers each total
//! to the sum of the live entries' parts if it is above it ([`recount`]). It only ever
//! lowers: a place added to the total and not yet to its part is missing from the sum for a
//! moment, and a total raised to the sum then would end one too high for good, which stops
//! spins; one lowered then ends one too low for good (nothing raises it), which only lets one
//! more waiter spin past the budget.
//!
//! Other processes write these words: a part read as below zero counts as none, a part given
//! back is at most the total, and the totals are read as signed (a total below zero, for a
//! moment or after such a lowering, is none). A corrupt total can stop spinning (every wait
//! then sleeps until its record wakes it) or allow more of it (each spin still ends at its
//! limit); nothing waits on these counts.

use std::sync::atomic::{AtomicU32, Ordering};

use acl_notify_core::table::MAX_PROCS;

use super::{ProcEntry, ShmFile};

/// One of the counts (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Count {
    /// Busy stream workers and woken threads that have not run yet (the `busy` module).
    Busy,
    /// Waiters spinning past their first microsecond (`crate::spin`).
    Spinners,
}

impl Count {
    const ALL: [Count; 2] = [Count::Busy, Count::Spinners];

    /// The count's total in `file`'s header.
    pub(crate) fn total(self, file: &ShmFile) -> &AtomicU32 {
        let h = file.map.header::<super::Header>();
        match self {
            Count::Busy => &h.busy,
            Count::Spinners => &h.spinners,
        }
    }

    /// A process's part of the count, in its entry.
    fn part(self, e: &ProcEntry) -> &AtomicU32 {
        match self {
            Count::Busy => &e.busy,
            Count::Spinners => &e.spinners,
        }
    }

    /// The count as this process changes it in `file`: the total and this process's part
    /// (none if its entry is out of range).
    pub(crate) fn share(self, file: &ShmFile) -> Share<'_> {
        Share {
            total: self.total(file),
            part: file.proc_entry(file.me).map(|e| self.part(e)),
        }
    }
}

/// A count's total and this process's part of it (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Share<'a> {
    pub(crate) total: &'a AtomicU32,
    pub(crate) part: Option<&'a AtomicU32>,
}

impl Share<'_> {
    /// Adds `n` to the total, then to this process's part; returns the total before.
    pub(crate) fn add(self, n: u32) -> u32 {
        // Relaxed: the counts are advice; what matters is that every place is taken out again.
        let before = self.total.fetch_add(n, Ordering::Relaxed);
        if let Some(p) = self.part {
            p.fetch_add(n, Ordering::Relaxed);
        }
        before
    }

    /// Takes `n` out of this process's part, then out of the total (wrapping: see
    /// `busy::give_back`).
    pub(crate) fn sub(self, n: u32) {
        if let Some(p) = self.part {
            p.fetch_sub(n, Ordering::Relaxed);
        }
        self.total.fetch_sub(n, Ordering::Relaxed);
    }
}

/// A count read as signed: below zero is none.
pub(crate) fn non_negative(v: u32) -> u32 {
    u32::try_from(v as i32).unwrap_or(0)
}

/// Entry `e` of `file` (a dead process's, being reclaimed) holds nothing any more: gives
/// each count's part back, at most what the total holds.
pub(crate) fn reclaim(file: &ShmFile, e: &ProcEntry) {
    for c in Count::ALL {
        let part = non_negative(c.part(e).swap(0, Ordering::SeqCst));
        let total = c.total(file);
        let held = non_negative(total.load(Ordering::Relaxed));
        total.fetch_sub(part.min(held), Ordering::Relaxed);
    }
}

/// After dead processes' entries were reclaimed: lowers each count's total to the sum of the
/// entries' parts if it is above it (see the module docs).
pub(crate) fn recount(file: &ShmFile) {
    for c in Count::ALL {
        let parts: u64 = (0..MAX_PROCS)
            .map_while(|i| file.proc_entry(i))
            .map(|e| u64::from(non_negative(c.part(e).load(Ordering::Relaxed))))
            .sum();
        let parts = u32::try_from(parts)
            .unwrap_or(u32::MAX)
            .min(i32::MAX as u32);
        let total = c.total(file);
        let mut seen = total.load(Ordering::Relaxed);
        // Compared as signed: a total below zero is not above anything.
        while (seen as i32) > (parts as i32) {
            match total.compare_exchange_weak(seen, parts, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => seen = now,
            }
        }
    }
}

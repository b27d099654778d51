//! The process table: registering this process, telling live processes from dead ones,
//! and reclaiming what dead processes held (garbage collection, leak repair).

use std::sync::atomic::Ordering::SeqCst;

use acl_notify_core::Error;
use acl_notify_core::table::{Leave, MAX_PROCS};

use crate::error::SimError;
use crate::ipc_event::file::{
    reclaim_proc as reclaim_ipc_events, repair_leaks as repair_ipc_events,
};
use crate::repair::{all_ids, retire_orphan_slot};
use crate::sys;

use super::*;

impl ShmFile {
    // ---- processes ---------------------------------------------------------------------

    /// Takes a free entry by a CAS from 0 (so two processes never share one), fills it in and
    /// publishes it alive last; a reclaimer meanwhile sees it claiming, by a live pid.
    pub(crate) fn register(&self) -> Option<u32> {
        let claiming = (u64::from(P_CLAIMING) << 32) | u64::from(self.pid as u32);
        for i in 0..MAX_PROCS {
            let e = self.proc_entry(i)?;
            if e.word.compare_exchange(0, claiming, SeqCst, SeqCst).is_ok() {
                e.start_time.store(self.start_time, SeqCst);
                e.server.store(self.server, SeqCst);
                e.reclaimer.store(0, SeqCst);
                e.word.store(
                    (u64::from(P_ALIVE) << 32) | u64::from(self.pid as u32),
                    SeqCst,
                );
                return Some(i);
            }
        }
        None
    }

    /// Whether the process in table slot `i` is alive (ourselves included).
    pub fn proc_alive(&self, i: u32) -> bool {
        if i == self.me {
            return true;
        }
        let Some(e) = self.proc_entry(i) else {
            return false;
        };
        let w = e.word.load(SeqCst);
        let pid = w as u32 as i32;
        match (w >> 32) as u32 {
            P_CLAIMING => sys::pid_alive(pid, 0),
            P_ALIVE => sys::pid_alive(pid, e.start_time.load(SeqCst)),
            _ => false,
        }
    }

    /// `Ok` while this process's process-table entry still names it. Another process that took
    /// it for dead (its entry's start time or state overwritten) has dropped its references
    /// and may have handed the entry to a newcomer: then 507899, rather than taking new
    /// references under an index that is no longer this process's.
    pub(crate) fn still_registered(&self) -> Result<(), SimError> {
        let mine = (u64::from(P_ALIVE) << 32) | u64::from(self.pid as u32);
        match self.proc_entry(self.me) {
            Some(e)
                if e.word.load(SeqCst) == mine && e.start_time.load(SeqCst) == self.start_time =>
            {
                Ok(())
            }
            _ => Err(SimError::new(
                Error::DrvInternalError,
                format!(
                    "{}: this process's entry {} in the process table no longer names it \
                     (another process overwrote it, or took this process for dead and \
                     reclaimed it); its notifies are no longer tracked: remove the namespace",
                    self.path.display(),
                    self.me
                ),
            )),
        }
    }

    /// Pid (and whether alive) of every registered process, for messages.
    pub fn registered(&self) -> Vec<(i32, bool)> {
        (0..MAX_PROCS)
            .filter_map(|i| {
                let e = self.proc_entry(i)?;
                let w = e.word.load(SeqCst);
                ((w >> 32) as u32 != P_FREE).then(|| (w as u32 as i32, self.proc_alive(i)))
            })
            .collect()
    }

    /// The pid of the process in table slot `i` (0 if free).
    pub fn proc_pid(&self, i: u32) -> i32 {
        self.proc_entry(i)
            .map_or(0, |e| e.word.load(SeqCst) as u32 as i32)
    }

    /// What the garbage collection that opening this file runs reclaimed (dead processes,
    /// notify ids, queued waits, IPC events), which a later [`gc`](Self::gc) does not count
    /// again.
    pub fn reclaimed_at_open(&self) -> GcReport {
        self.at_open
    }

    /// Reclaims for every dead registered process; then repairs ids leaked by processes that
    /// died between two steps of a create or destroy, or kept by stray holder bits (allocated
    /// in the pool, no holder but bits of free process-table entries, in the same state for
    /// longer than the repair grace period, 10 s).
    pub fn gc(&self) -> GcReport {
        let mut report = self.reclaim_dead();
        report.notifies_freed += self.repair_leaks();
        report.ipc_events_freed +=
            repair_ipc_events(&self.namespace, self.server, self.free_procs(), |mask| {
                self.hold_free_procs(mask)
            });
        report
    }

    /// The first half of [`gc`](Self::gc): drops the references of every registered process
    /// that is dead (a few `/proc` reads, one per registered process; a scan of the slots only
    /// when one is dead).
    pub fn reclaim_dead(&self) -> GcReport {
        let mut report = GcReport::default();
        let me_word = u64::from(self.pid as u32) | ((self.start_time & 0xffff_ffff) << 32);
        // A reclaimed entry's state word names its reclaimer, so that taking the entry and
        // saying who took it are one compare-and-swap: a second pass never finds an entry
        // being reclaimed without knowing by whom (and so never reclaims it a second time
        // alongside the first). `reclaimer` adds the reclaimer's start time, written by the
        // winner after the swap; it counts only while its pid matches the word's.
        let reclaiming = (u64::from(P_RECLAIMING) << 32) | u64::from(self.pid as u32);
        let take = |e: &ProcEntry, w: u64| {
            let won = e
                .word
                .compare_exchange(w, reclaiming, SeqCst, SeqCst)
                .is_ok();
            if won {
                e.reclaimer.store(me_word, SeqCst);
            }
            won
        };
        for i in 0..MAX_PROCS {
            if i == self.me {
                continue;
            }
            let Some(e) = self.proc_entry(i) else { break };
            let w = e.word.load(SeqCst);
            let state = (w >> 32) as u32;
            let pid = w as u32 as i32;
            let taken = match state {
                P_FREE => false,
                // Decided by /proc, taken by a CAS from the word read: an entry that changed
                // meanwhile (freed, re-registered) is left alone. The liveness test is by pid
                // and start time in ticks, so a dead process whose pid was given, within the
                // same tick, to a process of another kind keeps its entry until that one dies
                // too: a late reclaim, never a live process's references dropped.
                P_CLAIMING | P_ALIVE => !self.proc_alive(i) && take(e, w),
                P_RECLAIMING => {
                    // Taken over only if the reclaimer (the word's pid) itself died.
                    let r = e.reclaimer.load(SeqCst);
                    let rstart = if r as u32 == pid as u32 { r >> 32 } else { 0 };
                    let alive = sys::proc_start_time(pid)
                        .is_some_and(|s| rstart == 0 || (s & 0xffff_ffff) == rstart);
                    !alive && take(e, w)
                }
                // A state no build writes (corruption): reclaimed only once its pid is gone,
                // so that a scribbled word cannot get a live process's notifies freed under it.
                _ => !sys::pid_alive(pid, 0) && take(e, w),
            };
            if !taken {
                continue;
            }
            report += self.reclaim_proc(i);
            report.processes += 1;
            e.start_time.store(0, SeqCst);
            // Only ours to free while it still names us.
            let _ = e.word.compare_exchange(reclaiming, 0, SeqCst, SeqCst);
        }
        if report.processes > 0 {
            // What a dead process left in the counts that its entry did not hold.
            super::counts::recount(self);
        }
        report
    }

    /// Drops every reference process-table slot `i` holds, on every device: its notifies
    /// here, and its IPC events in the server's IPC event file (whose holder bits are this
    /// table's indices too; see [`crate::ipc_event`]).
    pub(crate) fn reclaim_proc(&self, i: u32) -> GcReport {
        let mut r = GcReport {
            ipc_events_freed: reclaim_ipc_events(
                &self.namespace,
                self.server,
                self.layout.devices,
                i,
            ),
            ..GcReport::default()
        };
        // The entry's stream workers counted busy and waiters counted spinning are gone with
        // their process.
        if let Some(e) = self.proc_entry(i) {
            super::counts::reclaim(self, e);
        }
        let w = self.waiter();
        for dev in 0..self.layout.devices {
            let Some(pool) = self.pool(dev) else { continue };
            for id in 0..self.high_water(dev) {
                let Some(slot) = self.slot(dev, id) else {
                    break;
                };
                if slot.holders() & (1u64 << i) == 0 {
                    continue;
                }
                r.waits_cancelled += slot.sync.cancel_proc_tickets(&w, i);
                if slot.leave(i) == Leave::Last && pool.free(id).is_ok() {
                    r.notifies_freed += 1;
                }
            }
        }
        r
    }

    /// Frees ids that are allocated in a pool but whose slot has had no holder, in an
    /// unchanged state, for the whole grace period: left behind by a process killed between
    /// allocating and claiming, between dropping its last reference and retiring, or between
    /// retiring and freeing. This process's own creates and destroys are held off meanwhile.
    ///
    /// Holder bits of process-table entries that are free count as no holder: nobody reclaims
    /// them (only registered dead processes are reclaimed), so such a stray bit (corrupt
    /// memory, or a reference that outlived its process's entry) would keep the id allocated
    /// for ever. They are part of the observed state, so they too must stay the same for the
    /// grace period, and are cleared (exactly those bits) only while the repair holds their
    /// entries, so that no process can register there and join meanwhile.
    pub(crate) fn repair_leaks(&self) -> u32 {
        let ids = all_ids(self.layout.devices, |dev| self.high_water(dev));
        let free = self.free_procs();
        self.repair.sweep(
            ids,
            |dev, id| {
                let slot = self.slot(dev, id)?;
                let pool = self.pool(dev)?;
                let holders = slot.holders();
                (pool.is_allocated(id) && holders & !free == 0)
                    .then(|| (slot.generation(), slot.state(), holders))
            },
            |dev, id| self.repair_orphan(dev, id),
        )
    }

    /// Retires and frees an id the repair pass found orphaned for the grace period, after
    /// clearing its stray holder bits (see [`repair_leaks`](Self::repair_leaks)). `false` if
    /// it is not an orphan any more (a bit is of an occupied entry, or someone joined).
    pub(crate) fn repair_orphan(&self, dev: u32, id: u32) -> bool {
        let (Some(slot), Some(pool)) = (self.slot(dev, id), self.pool(dev)) else {
            return false;
        };
        retire_orphan_slot(slot, |m| self.hold_free_procs(m)) && pool.free(id).is_ok()
    }

    /// The bits of the process-table entries that no process occupies (state free).
    pub(crate) fn free_procs(&self) -> u64 {
        (0..MAX_PROCS)
            .filter(|&i| {
                self.proc_entry(i)
                    .is_some_and(|e| (e.word.load(SeqCst) >> 32) as u32 == P_FREE)
            })
            .fold(0, |m, i| m | (1u64 << i))
    }

    /// Occupies the free process-table entries of `mask` as this process would while
    /// registering (state claiming, this pid), so that nobody registers there until the
    /// returned hold is dropped (which frees them). `None` (nothing held) if any of them is
    /// not free. Should this process die meanwhile, the entries are reclaimed like those of
    /// any process that died while registering.
    pub(crate) fn hold_free_procs(&self, mask: u64) -> Option<ProcHold<'_>> {
        let word = (u64::from(P_CLAIMING) << 32) | u64::from(self.pid as u32);
        let mut hold = ProcHold {
            file: self,
            word,
            held: 0,
        };
        for i in (0..MAX_PROCS).filter(|&i| mask & (1u64 << i) != 0) {
            let e = self.proc_entry(i)?;
            let w = e.word.load(SeqCst);
            if (w >> 32) as u32 != P_FREE
                || e.word.compare_exchange(w, word, SeqCst, SeqCst).is_err()
            {
                return None;
            }
            hold.held |= 1u64 << i;
        }
        Some(hold)
    }
}

/// Free process-table entries occupied by a repair pass (see [`ShmFile::hold_free_procs`]);
/// freed again on drop.
pub(crate) struct ProcHold<'a> {
    pub(crate) file: &'a ShmFile,
    /// The word the entries hold (state claiming, this pid).
    pub(crate) word: u64,
    pub(crate) held: u64,
}

impl Drop for ProcHold<'_> {
    fn drop(&mut self) {
        for i in (0..MAX_PROCS).filter(|&i| self.held & (1u64 << i) != 0) {
            if let Some(e) = self.file.proc_entry(i) {
                // Unless someone else took the entry over meanwhile (it would have had to
                // think this process dead).
                let _ = e.word.compare_exchange(self.word, 0, SeqCst, SeqCst);
            }
        }
    }
}

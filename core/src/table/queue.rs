//! The notify's waiter queue: tickets handed out from `tail`, served at `head`, and a ring of
//! [`RING`] entries (`round | state | process`) through which a waiter gives its ticket up
//! and whoever moves the head skips it, plus the repairs a queued waiter makes when the
//! process that should have moved the head on is gone. Every move is a compare-and-swap.

use crate::sync::{Ordering::SeqCst, dekker};

use super::{NotifySync, RING, STUCK_LIMIT};
use crate::waiter::{Clock, TableError, WaitArgs, WaitOutcome, Waiter};

/// Ring entry layout: `round (16 bits) | state (2 bits) | process index (14 bits)`.
pub(super) const ST_FREE: u32 = 0;
pub(super) const ST_TAKEN: u32 = 1;
pub(super) const ST_CANCELLED: u32 = 2;
const PROC_MASK: u32 = (1 << 14) - 1;

pub(super) const fn round16(ticket: u32) -> u32 {
    (ticket / RING as u32) & 0xffff
}

pub(super) const fn entry(round: u32, state: u32, proc: u32) -> u32 {
    (round << 16) | (state << 14) | (proc & PROC_MASK)
}

pub(super) const fn entry_round(e: u32) -> u32 {
    e >> 16
}

pub(super) const fn entry_state(e: u32) -> u32 {
    (e >> 14) & 0x3
}

pub(super) const fn entry_proc(e: u32) -> u32 {
    e & PROC_MASK
}

impl NotifySync {
    /// Takes a ticket: `Ok(Ok(t))`, or `Ok(Err(outcome))` if the deadline or cancel fired
    /// while the ring was full.
    pub(super) fn acquire<W: Waiter>(
        &self,
        w: &W,
        clock: &Clock<'_, W>,
        args: &WaitArgs<'_>,
    ) -> Result<Result<u32, WaitOutcome>, TableError> {
        let mut last_full_head = None;
        let mut stuck = 0u32;
        self.acquire_with(
            args.proc,
            |h| {
                if let Some(outcome) = clock.stop(args.cancel) {
                    return Ok(Some(outcome));
                }
                if last_full_head == Some(h) {
                    self.repair_stuck_head(w, h, &mut stuck)?;
                } else {
                    stuck = 0;
                }
                last_full_head = Some(h);
                w.wait(&self.head, h, Some(clock.chunk()));
                Ok(None)
            },
            w,
        )
    }

    /// Takes a ticket for process `proc`: `Ok(Ok(t))`; while the ring is full, `full(head)`
    /// says what to do: `Ok(None)` look again (it slept, or repaired), `Ok(Some(outcome))`
    /// stop with `Ok(Err(outcome))`.
    pub(super) fn acquire_with<W: Waiter>(
        &self,
        proc: u32,
        mut full: impl FnMut(u32) -> Result<Option<WaitOutcome>, TableError>,
        w: &W,
    ) -> Result<Result<u32, WaitOutcome>, TableError> {
        // Consecutive observations that break an invariant; a few are a stale view under
        // concurrency, many in a row are corruption.
        let mut odd = 0u32;
        loop {
            if odd > 100_000 {
                return Err(TableError::Corrupt);
            }
            let h = self.head.load(SeqCst);
            let t = self.tail.load(SeqCst);
            let used = t.wrapping_sub(h);
            if used > RING as u32 {
                odd += 1;
                core::hint::spin_loop();
                continue;
            }
            if used == RING as u32 {
                if let Some(outcome) = full(h)? {
                    return Ok(Err(outcome));
                }
                continue;
            }
            let slot = &self.ring[t as usize % RING];
            let e = slot.load(SeqCst);
            let r = round16(t);
            if e == entry(r, ST_FREE, 0) {
                if slot
                    .compare_exchange(e, entry(r, ST_TAKEN, proc), SeqCst, SeqCst)
                    .is_ok()
                {
                    // Publish the ticket (someone may have helped already); the head is read
                    // next (Dekker with `finish`: it stores the head, then reads the tail).
                    let _ = self
                        .tail
                        .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
                    dekker();
                    return Ok(Ok(t));
                }
                continue;
            }
            if entry_round(e) == r && matches!(entry_state(e), ST_TAKEN | ST_CANCELLED) {
                // Ticket `t` is taken but `tail` not yet moved: help.
                let _ = self
                    .tail
                    .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
                continue;
            }
            if e == entry(r.wrapping_add(1) & 0xffff, ST_FREE, 0) {
                // Ticket `t` was served, or given up and skipped, but `tail` (and maybe
                // `head`) was not moved past it: the processes between those steps died (or
                // are slow, or our read of `tail` is stale). Help both on, as
                // `repair_stuck_head` does for the head.
                let _ = self
                    .tail
                    .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
                self.pass_head(w, t);
                continue;
            }
            odd += 1;
            core::hint::spin_loop();
        }
    }

    /// Hands the head on after ticket `t` (ours, at the head) is done.
    pub(super) fn finish<W: Waiter>(&self, w: &W, t: u32, proc: u32) {
        let slot = &self.ring[t as usize % RING];
        let mine = entry(round16(t), ST_TAKEN, proc);
        if slot
            .compare_exchange(
                mine,
                entry(round16(t).wrapping_add(1) & 0xffff, ST_FREE, 0),
                SeqCst,
                SeqCst,
            )
            .is_err()
        {
            // Someone cancelled our ticket on our behalf (they took us for dead); they move
            // the head.
            return;
        }
        // A compare-and-swap, not a store: a waiter that found the head stuck here for a whole
        // chunk (it took us for dead between the two steps) may have moved it on already, and
        // a late store would move it back.
        self.pass_head(w, t);
    }

    /// Moves the head from `t` (a ticket that is done) to `t + 1` by compare-and-swap, then
    /// skips the cancelled tickets after it and wakes the queue (`skip_cancelled`). Does
    /// nothing if the head is no longer `t`: whoever moved it does the rest.
    pub(super) fn pass_head<W: Waiter>(&self, w: &W, t: u32) {
        if self
            .head
            .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst)
            .is_ok()
        {
            dekker();
            self.skip_cancelled(w, t.wrapping_add(1));
        }
    }

    /// With `head == from`: moves the head past every cancelled ticket, then wakes sleepers
    /// on the head word if any ticket is outstanding.
    pub(super) fn skip_cancelled<W: Waiter>(&self, w: &W, from: u32) {
        let mut t = from;
        for _ in 0..RING {
            let r = round16(t);
            let slot = &self.ring[t as usize % RING];
            // A plain read first: usually the next ticket is not cancelled, and a failed CAS
            // costs as much as a successful one. Safe to skip the CAS on it: a canceller marks
            // the entry and then reads `head` (already `t`, stored before this read), so if
            // it marked after our read it sees `head == t` and skips the ticket itself.
            if slot.load(SeqCst) != entry(r, ST_CANCELLED, 0)
                || slot
                    .compare_exchange(
                        entry(r, ST_CANCELLED, 0),
                        entry(r.wrapping_add(1) & 0xffff, ST_FREE, 0),
                        SeqCst,
                        SeqCst,
                    )
                    .is_err()
            {
                break;
            }
            let _ = self
                .tail
                .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
            // As in `finish`: whoever repaired a stuck head may have moved it on meanwhile.
            if self
                .head
                .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst)
                .is_err()
            {
                return;
            }
            t = t.wrapping_add(1);
            dekker();
        }
        if self.tail.load(SeqCst) != t {
            w.wake(&self.head, u32::MAX);
        }
    }

    /// Gives up ticket `t` whose entry is `expected` (TAKEN by some process): marks it
    /// cancelled and, if it is at the head, moves the head on. Returns whether this call did
    /// the cancelling.
    pub(super) fn cancel_ticket<W: Waiter>(&self, w: &W, t: u32, expected: u32) -> bool {
        let slot = &self.ring[t as usize % RING];
        // Cancelled entries carry no process index, so the skip CAS needs no knowledge of it.
        if slot
            .compare_exchange(expected, entry(round16(t), ST_CANCELLED, 0), SeqCst, SeqCst)
            .is_err()
        {
            return false;
        }
        // The ticket was taken, so `tail` must be past it.
        let _ = self
            .tail
            .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
        // If the head already reached `t`, whoever moved it may have looked at the entry
        // before we marked it: race them for the skip (exactly one CAS wins).
        dekker();
        if self.head.load(SeqCst) == t {
            self.skip_cancelled(w, t);
        }
        true
    }

    /// Called by a queued waiter that has seen the head stay at `h` for a whole chunk. Moves
    /// it on if whoever should have is gone:
    ///
    /// - the head ticket belongs to a dead process: cancel it;
    /// - it was cancelled but not skipped (the canceller died between the two steps): skip it;
    /// - it was finished but the head not moved on (the waiter died between freeing its entry
    ///   and moving the head): move the head on;
    /// - it was never taken although `tail` is past it (a phantom ticket, which only a
    ///   corrupting write makes): cancel it.
    ///
    /// A head entry that fits none of these, or that stays in one of the repairable states
    /// chunk after chunk without the repair taking, is corruption: after [`STUCK_LIMIT`]
    /// such chunks in a row, `Err(Corrupt)` (`stuck` counts them; the caller resets it when the
    /// head moves). A live process that holds the head ticket is waited for (its own wait
    /// has a timeout, or can be cancelled): that is not corruption.
    pub(super) fn repair_stuck_head<W: Waiter>(
        &self,
        w: &W,
        h: u32,
        stuck: &mut u32,
    ) -> Result<(), TableError> {
        let r = round16(h);
        let next = r.wrapping_add(1) & 0xffff;
        let slot = &self.ring[h as usize % RING];
        // `tail` first: an entry is taken before `tail` moves past it.
        let tail = self.tail.load(SeqCst);
        let e = slot.load(SeqCst);
        if e == entry(r, ST_TAKEN, entry_proc(e)) {
            if w.proc_alive(entry_proc(e)) {
                *stuck = 0;
                return Ok(());
            }
            self.cancel_ticket(w, h, e);
        } else if e == entry(r, ST_CANCELLED, 0) {
            self.skip_cancelled(w, h);
        } else if e == entry(next, ST_FREE, 0) {
            self.pass_head(w, h);
        } else if e == entry(r, ST_FREE, 0)
            && tail.wrapping_sub(h).wrapping_sub(1) < RING as u32
            && slot
                .compare_exchange(e, entry(r, ST_CANCELLED, 0), SeqCst, SeqCst)
                .is_ok()
            && self.head.load(SeqCst) == h
        {
            self.skip_cancelled(w, h);
        }
        *stuck += 1;
        if *stuck > STUCK_LIMIT {
            return Err(TableError::Corrupt);
        }
        Ok(())
    }

    /// Cancels every ticket held by process `proc` (which is dead). Returns how many.
    pub fn cancel_proc_tickets<W: Waiter>(&self, w: &W, proc: u32) -> u32 {
        let mut n = 0;
        for i in 0..RING {
            let e = self.ring[i].load(SeqCst);
            if entry_state(e) != ST_TAKEN || entry_proc(e) != proc {
                continue;
            }
            // The outstanding tickets are head..head+RING, one per ring index.
            let h = self.head.load(SeqCst);
            let t = h.wrapping_add((i as u32).wrapping_sub(h) % RING as u32);
            if round16(t) == entry_round(e) && self.cancel_ticket(w, t, e) {
                n += 1;
            }
        }
        n
    }
}

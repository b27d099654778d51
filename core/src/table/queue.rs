//! The notify's waiter queue: tickets handed out from `tail`, served at `head`, and a ring of
//! [`RING`] entries (`round | state | process`) through which a waiter gives its ticket up
//! and whoever moves the head skips it, plus the repairs a queued waiter makes when the
//! process that should have moved the head on is gone. Every move is a compare-and-swap.
//!
//! A *lone place* ([`ST_SOLO`]): a resumable wait that finds nobody queued (`head == tail`)
//! takes ticket `head` by marking its entry alone, leaving `tail` where it is, and gives it
//! back by unmarking it (the same round: the ticket number is used again), so it neither takes
//! nor hands on the head: one compare-and-swap each way instead of two. While the entry is
//! marked, [`try_consume`](NotifySync::try_consume) (which checks the head's entry) takes
//! nothing, and a waiter that comes makes the place an ordinary one
//! ([`ST_SOLO`] → [`ST_TAKEN`], then `tail` on), queues behind it and is served after it: the
//! lone holder then ends its place as any holder does. A dead process's lone place is given
//! back by [`cancel_proc_tickets`](NotifySync::cancel_proc_tickets), or made ordinary by the
//! next waiter and repaired as any.

use crate::sync::{Ordering::SeqCst, dekker};

use super::{NotifySync, RING, STUCK_LIMIT};
use crate::waiter::{Clock, TableError, WaitArgs, WaitOutcome, Waiter};

/// Ring entry layout: `round (16 bits) | state (2 bits) | process index (14 bits)`.
pub(super) const ST_FREE: u32 = 0;
pub(super) const ST_TAKEN: u32 = 1;
pub(super) const ST_CANCELLED: u32 = 2;
/// A lone place: ticket `head`, taken with `tail` left at `head` (see the module docs).
pub(super) const ST_SOLO: u32 = 3;
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
                // Asleep on `turns`, read before the head is looked at again (see
                // `NotifySync::turns`): a place freed or a stop after this read ends the sleep.
                let turns = self.turns.load(SeqCst);
                if self.head.load(SeqCst) != h {
                    return Ok(None);
                }
                if let Some(outcome) = clock.stop(args.cancel) {
                    return Ok(Some(outcome));
                }
                if last_full_head == Some(h) {
                    self.repair_stuck_head(w, h, &mut stuck)?;
                } else {
                    stuck = 0;
                }
                last_full_head = Some(h);
                w.wait(&self.turns, turns, Some(clock.chunk()));
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
            if e == entry(r, ST_SOLO, entry_proc(e)) {
                // Ticket `t` is a lone place (`tail` left at it): make it an ordinary one,
                // then move `tail` past it as for any taken ticket, and queue behind it. The
                // holder hands the head on once it is done (`end_solo`).
                if slot
                    .compare_exchange(e, entry(r, ST_TAKEN, entry_proc(e)), SeqCst, SeqCst)
                    .is_ok()
                {
                    let _ = self
                        .tail
                        .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
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

    /// Takes ticket `head` as a lone place for process `proc` if nobody is queued (see the
    /// module docs): one compare-and-swap. `None`: somebody is (or the entry is not free), take
    /// an ordinary ticket.
    #[inline]
    pub(super) fn take_solo(&self, proc: u32) -> Option<u32> {
        let h = self.head.load(SeqCst);
        if self.tail.load(SeqCst) != h {
            return None;
        }
        let slot = &self.ring[h as usize % RING];
        let free = entry(round16(h), ST_FREE, 0);
        // The entry free in ticket `h`'s round means `tail` has not passed `h` (an entry is
        // taken before `tail` moves past it, and freed for the next round once served), so
        // a compare-and-swap that succeeds took `h` with `head == tail == h`.
        (slot.load(SeqCst) == free
            && slot
                .compare_exchange(free, entry(round16(h), ST_SOLO, proc), SeqCst, SeqCst)
                .is_ok())
        .then_some(h)
    }

    /// Ends lone place `t` of process `proc` after its wait consumed: unmarks it, or, if a
    /// waiter made it ordinary meanwhile, moves `tail` past it (if that waiter has not yet)
    /// and hands the head on ([`finish`](Self::finish)). Nothing if it was given up on our
    /// behalf (they took us for dead).
    pub(super) fn end_solo<W: Waiter>(&self, w: &W, t: u32, proc: u32) {
        match self.unmark_solo(t, proc) {
            Ok(()) => {}
            Err(e) if e == entry(round16(t), ST_TAKEN, proc) => {
                let _ = self
                    .tail
                    .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
                self.finish(w, t, proc);
            }
            Err(_) => {}
        }
    }

    /// Gives lone place `t` of process `proc` up, consuming nothing: unmarks it, or cancels
    /// it as an ordinary ticket if a waiter made it one. Returns whether this call gave it up.
    pub(super) fn give_up_solo<W: Waiter>(&self, w: &W, t: u32, proc: u32) -> bool {
        match self.unmark_solo(t, proc) {
            Ok(()) => true,
            Err(e) if e == entry(round16(t), ST_TAKEN, proc) => self.cancel_ticket(w, t, e),
            Err(_) => false,
        }
    }

    /// Frees lone place `t` of process `proc` if it is still marked alone (one
    /// compare-and-swap); `Err` with the entry found otherwise (made ordinary by a waiter
    /// that came, or no longer ours).
    #[inline(always)]
    fn unmark_solo(&self, t: u32, proc: u32) -> Result<(), u32> {
        let r = round16(t);
        self.ring[t as usize % RING]
            .compare_exchange(
                entry(r, ST_SOLO, proc),
                entry(r, ST_FREE, 0),
                SeqCst,
                SeqCst,
            )
            .map(|_| ())
    }

    /// Makes lone place `t` of process `proc` an ordinary ticket (for the blocking rest of
    /// its wait, `NotifySync::wait_held`): `false` if it is no longer ours
    /// (given up on our behalf).
    pub(super) fn solo_to_ticket(&self, t: u32, proc: u32) -> bool {
        let r = round16(t);
        let taken = entry(r, ST_TAKEN, proc);
        match self.ring[t as usize % RING].compare_exchange(
            entry(r, ST_SOLO, proc),
            taken,
            SeqCst,
            SeqCst,
        ) {
            Ok(_) => {}
            Err(e) if e == taken => {}
            Err(_) => return false,
        }
        let _ = self
            .tail
            .compare_exchange(t, t.wrapping_add(1), SeqCst, SeqCst);
        true
    }

    /// Whether lone place `t` is still process `proc`'s (marked alone, or made ordinary by a
    /// waiter that came).
    #[inline]
    pub(super) fn solo_is_ours(&self, t: u32, proc: u32) -> bool {
        let e = self.ring[t as usize % RING].load(SeqCst);
        let r = round16(t);
        e == entry(r, ST_SOLO, proc) || e == entry(r, ST_TAKEN, proc)
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

    /// With `head == from`: moves the head past every cancelled ticket, then, if any ticket is
    /// outstanding, moves `turns` on and wakes the waiters asleep on it (the queued ones).
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
            self.turns.fetch_add(super::TURN, SeqCst);
            w.wake(&self.turns, u32::MAX);
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

    /// Cancels every ticket held by process `proc` (which is dead), lone places included.
    /// Returns how many.
    pub fn cancel_proc_tickets<W: Waiter>(&self, w: &W, proc: u32) -> u32 {
        let mut n = 0;
        for i in 0..RING {
            let e = self.ring[i].load(SeqCst);
            let state = entry_state(e);
            if !matches!(state, ST_TAKEN | ST_SOLO) || entry_proc(e) != proc {
                continue;
            }
            // The outstanding tickets are head..head+RING, one per ring index.
            let h = self.head.load(SeqCst);
            let t = h.wrapping_add((i as u32).wrapping_sub(h) % RING as u32);
            if round16(t) != entry_round(e) {
                continue;
            }
            let gave_up = if state == ST_SOLO {
                self.give_up_solo(w, t, proc)
            } else {
                self.cancel_ticket(w, t, e)
            };
            if gave_up {
                n += 1;
            }
        }
        n
    }
}

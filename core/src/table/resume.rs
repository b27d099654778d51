//! A resumable wait: the steps of [`NotifySync::wait_and_reset`] for a caller that must not
//! block its thread while the record is not there (the simulator's stream engine parks a
//! stream on such a wait and polls it from another thread). The wait takes its place in the
//! FIFO queue at once ([`wait_begin`](NotifySync::wait_begin): a [`Ticket`]), so while it is
//! parked a [`try_consume`](NotifySync::try_consume) never takes its record and a waiter that
//! comes later queues behind it, as with a blocking wait; then any number of
//! [`wait_poll`](NotifySync::wait_poll)s (never block), and at the end either a poll that
//! consumed, [`wait_abandon`](NotifySync::wait_abandon) (gives the place up, consuming
//! nothing: a record there stays for the next waiter), or
//! [`wait_resume`](NotifySync::wait_resume) (the blocking rest of an ordinary wait, from the
//! held ticket).
//!
//! A ticket must end in one of those three: one dropped without them keeps its place at the
//! head of the queue until its process dies (the survivors then cancel it, see
//! [`NotifySlot::reclaim_proc`](super::NotifySlot::reclaim_proc)), and every waiter behind it
//! waits that long. So [`Ticket`] is neither `Copy` nor `Clone`.

use crate::sync::Ordering::SeqCst;

use super::queue::{ST_TAKEN, entry, round16};
use super::{FLAG_SET, MAX_PROCS, NotifySync, RING};
use crate::waiter::{Clock, TableError, WaitArgs, WaitOutcome, Waiter};

/// A resumable wait's place in a notify's queue ([`NotifySync::wait_begin`]): the ticket
/// number, the process-table slot and whether it is a lone place, packed in one word (the
/// one [`into_raw`](Ticket::into_raw) gives). One word, so that `wait_begin`'s answer comes
/// back in registers: as three fields it came back through memory, its two `u32`s stored
/// apart and read back as one word by `into_raw`, a load this VM's CPUs cannot forward from
/// the two stores (`perf`: two fifths of the simulator's park's samples on that load in the
/// pipeline bench, 2026-12-06).
#[must_use = "a ticket must be polled to the end, abandoned or resumed (see the module docs)"]
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket(u64);

/// [`Ticket`]'s bit for a lone place (`queue`'s module docs: taken with `tail` left at it).
const RAW_SOLO: u64 = 1 << 62;

impl Ticket {
    #[inline(always)]
    fn new(t: u32, proc: u32, solo: bool) -> Ticket {
        Ticket((u64::from(proc) << 32) | u64::from(t) | if solo { RAW_SOLO } else { 0 })
    }

    /// The ticket number.
    #[inline(always)]
    fn t(&self) -> u32 {
        self.0 as u32
    }

    /// The process-table slot the ticket was taken for.
    #[inline(always)]
    pub fn proc(&self) -> u32 {
        ((self.0 & !RAW_SOLO) >> 32) as u32
    }

    /// The ticket as one word, for a caller that keeps it in a packed value (the
    /// simulator's 24-byte stream job). Never `u64::MAX` (process slots are below
    /// [`MAX_PROCS`]), so that value is free to mean "no ticket".
    #[inline(always)]
    pub fn into_raw(self) -> u64 {
        self.0
    }

    /// The ticket [`into_raw`](Self::into_raw) gave. The caller must pass each such word
    /// back at most once (a ticket is one place in one notify's queue).
    #[inline(always)]
    pub fn from_raw(raw: u64) -> Ticket {
        Ticket(raw)
    }

    /// Whether the place is a lone one (see `NotifySync::wait_begin`).
    #[inline(always)]
    pub fn is_solo(&self) -> bool {
        self.0 & RAW_SOLO != 0
    }
}

/// How [`NotifySync::wait_begin`] went.
#[derive(Debug, PartialEq, Eq)]
pub enum Begin {
    /// A record was pending and nobody queued: consumed, the wait is over.
    Consumed,
    /// The wait holds a place in the queue.
    Queued(Ticket),
    /// All [`RING`] places are held: no ticket taken, nothing consumed (the caller waits
    /// the blocking way, [`NotifySync::wait_and_reset`], which sleeps until one frees up).
    Full,
}

impl NotifySync {
    /// Begins a resumable wait for process `proc`: consumes a pending record if nobody is
    /// queued (as the blocking wait's fast path does), else takes a ticket without blocking:
    /// a lone place if nobody is queued (`queue`'s module docs; the wait's other steps tell
    /// the two apart by the ticket).
    /// `Err` if the memory is corrupt or `proc` out of range.
    pub fn wait_begin<W: Waiter>(&self, w: &W, proc: u32) -> Result<Begin, TableError> {
        if proc >= MAX_PROCS {
            return Err(TableError::BadProc);
        }
        // The flag read first: a compare-and-swap that fails is still a locked instruction,
        // and a caller about to park has usually just found the flag clear (the simulator's
        // runner: one in six of its locked instructions a park, 2026-12-05). A record that
        // lands after this read is taken by the first poll (the ticket is at the head).
        if self.flag.load(SeqCst) == FLAG_SET && self.try_consume() {
            return Ok(Begin::Consumed);
        }
        // Nobody queued (the usual case: one waiter per notify): a lone place, one
        // compare-and-swap now and one when it ends, where an ordinary ticket costs two each
        // (`queue`'s module docs).
        if let Some(t) = self.take_solo(proc) {
            return Ok(Begin::Queued(Ticket::new(t, proc, true)));
        }
        // `Cancelled` stands for "full" here: the closure's only outcome.
        Ok(
            match self.acquire_with(proc, |_| Ok(Some(WaitOutcome::Cancelled)), w)? {
                Ok(t) => Begin::Queued(Ticket::new(t, proc, false)),
                Err(_) => Begin::Full,
            },
        )
    }

    /// Whether the wait holding `ticket` can take its record now: if it is at the head of
    /// the queue and the flag is set, consumes it and hands the head on (`Ok(Ok(()))`, the
    /// wait is over); else `Ok(Err(ticket))`, changing nothing. Never blocks. `Err` (the
    /// ticket is gone) if the head passed the ticket: someone cancelled it, taking this
    /// process for dead, or the memory is corrupt (the blocking wait reports the same).
    #[inline]
    pub fn wait_poll<W: Waiter>(
        &self,
        w: &W,
        ticket: Ticket,
    ) -> Result<Result<(), Ticket>, TableError> {
        let h = self.head.load(SeqCst);
        if h != ticket.t() {
            return if ticket.t().wrapping_sub(h) > RING as u32 {
                Err(TableError::Corrupt)
            } else {
                Ok(Err(ticket))
            };
        }
        if self.flag.load(SeqCst) == FLAG_SET {
            if ticket.is_solo() {
                // A lone place keeps the head where it is, so a head that did not move says
                // nothing: the entry says whether the place is still ours.
                if !self.solo_is_ours(ticket.t(), ticket.proc()) {
                    return Err(TableError::Corrupt);
                }
                if self.consume() {
                    self.end_solo(w, ticket.t(), ticket.proc());
                    return Ok(Ok(()));
                }
            } else if self.consume() {
                self.finish(w, ticket.t(), ticket.proc());
                return Ok(Ok(()));
            }
        }
        Ok(Err(ticket))
    }

    /// Whether a poll could go on now without the queue's head moving: the ticket is at the
    /// head and the flag is set, or the head passed the ticket. One or two loads, no write:
    /// for a thread that watches many parked waits.
    #[inline]
    pub fn wait_ready(&self, ticket: &Ticket) -> bool {
        let h = self.head.load(SeqCst);
        h != ticket.t() || self.flag.load(SeqCst) == FLAG_SET
    }

    /// Gives the wait's place up, consuming nothing: a record that is there stays for the
    /// next waiter (or the next wait), as when a blocking wait times out without a record.
    pub fn wait_abandon<W: Waiter>(&self, w: &W, ticket: Ticket) {
        // `false`: someone already cancelled it on our behalf (and moved the head).
        let _ = if ticket.is_solo() {
            self.give_up_solo(w, ticket.t(), ticket.proc())
        } else {
            self.cancel_ticket(
                w,
                ticket.t(),
                entry(round16(ticket.t()), ST_TAKEN, ticket.proc()),
            )
        };
    }

    /// The blocking rest of the wait holding `ticket`, as [`wait_and_reset`](Self::wait_and_reset)
    /// would go on after taking it: `args.timeout` runs from now, `args.proc` must be the
    /// ticket's (else `Err(BadProc)`, and the ticket is abandoned).
    pub fn wait_resume<W: Waiter>(
        &self,
        w: &W,
        ticket: Ticket,
        args: WaitArgs<'_>,
    ) -> Result<WaitOutcome, TableError> {
        if args.proc != ticket.proc() {
            self.wait_abandon(w, ticket);
            return Err(TableError::BadProc);
        }
        // The blocking rest sleeps on the head and hands it on: an ordinary ticket.
        if ticket.is_solo() && !self.solo_to_ticket(ticket.t(), ticket.proc()) {
            // Given up on our behalf, as a head that passed an ordinary ticket.
            return Err(TableError::Corrupt);
        }
        let clock = Clock::start(w, args.timeout);
        self.wait_held(w, &clock, &args, ticket.t())
    }
}

//! IPC events (`ACL_EVENT_IPC`) across processes: a shared-memory file per namespace and server,
//! `/dev/shm/acl-notify-sim.<namespace>.evt<server>` ([`file`]), holding one core [`Slot`] per
//! IPC event and device, and this process's references to them ([`IpcRef`]). The bytes of
//! the handle another process opens are `handle.rs`'s.
//!
//! # One slot
//!
//! Each event is a core [`Slot`] (its lifecycle: the state word with the generation, the
//! owner, the holder bitmap) with an [`EvtPayload`](file::EvtPayload). `issued` counts the
//! records enqueued by any holder (owner or opener), `done` the highest record number that
//! has run (a futex word: waits sleep on it, records wake it). A stream wait captures
//! `issued` when it is enqueued and stalls until `done` reaches it — the Ex semantics of
//! `acl_notify_core::event` — and a wait on an event never recorded does nothing. Events are
//! not exported with a key and have no whitelist: the slot's export fields stay unused.
//!
//! # Holders
//!
//! A process holds an event as notifies are held: by its bit in the slot's holder bitmap, at
//! its index in the process table of the server's notify file ([`crate::shm`]); its handles
//! (the creator's and each opened one, any number) are counted within the process and share
//! the bit. The last holder to let go retires the slot, whose generation then moves on, so a
//! handle of a freed event is told apart (107017). A handle opens only while its creator
//! holds the event (its handle or a task it queued, and it lives): CANN's creator frees the
//! event's shared memory at its release, so an open after it is 107017, while the handles
//! opened before go on. A process that dies, even by SIGKILL, is
//! treated as having destroyed what it held: the process table's reclaim of a dead process
//! (on open, when a device runs out of IPC events, and on `Sim::gc`) clears its bit in every
//! IPC event slot too, and retires those it held last. A slot left not free with no holder
//! (its creator killed between taking it and marking itself its holder, or a holder killed
//! while retiring it), or held only by bits of process-table entries nobody occupies, is
//! retired by the leak repair once it has stayed so for the grace period ([`crate::repair`],
//! 10 s).
//!
//! # Limits (ours)
//!
//! 1,024 IPC events per device and server. Records that run out of order on different
//! streams raise `done` to the latest number (a wait for an earlier one may then pass early).
//! So does a record that will never run: one its process's stream discarded, or the latest
//! one when the process that issued it died before it ran (a holder SIGKILLed with a record
//! queued), which the waits see within a slice (20 ms) instead of waiting for ever. A wait of
//! the process whose stream dropped the record it waited for fails (107023), through any of
//! the process's handles, for the latest 4,096 records it dropped of each event. A wait in
//! another process learns it from the slot (the latest record's issuer word, marked as
//! discarded, which it stays when that process dies later) and fails too while that record is
//! still the event's latest; once a
//! later record was issued, by any holder, the word is that one's and such a wait passes
//! (a record of each would take a list in shared memory per event, or a protocol of our own).
//! Record numbers wrap at 2^32 and are compared as serial numbers: a wait whose record is more
//! than 2^31 records behind the latest that ran is taken as waiting for a later one.
//! A handle names its server's file: opening one of another server is 107000.

pub(crate) mod file;
mod handle;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use acl_notify_core::Error;
use acl_notify_core::event::{IpcEventHandle, LatestRecord};
#[cfg(doc)]
use acl_notify_core::slot::Slot;

use crate::error::SimError;
use crate::shm::ShmFile;
use crate::stream::TaskCtx;
use crate::sys;
use file::{ClaimError, EvtFile, EvtKey, EvtOpen, EvtSlot, MAX_IPC_EVENTS, evt_file_path};
use handle::{ns_tag, parse};

/// How long a wait sleeps on the futex before it looks at its stream's cancel flag (and at
/// the latest record's issuer) again.
const SLICE: Duration = Duration::from_millis(20);
/// Why a record counts as done without having run ([`IpcRef::never_ran`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NeverRan {
    /// The process (this pid) that issued it died before it ran.
    IssuerDied(i32),
    /// The stream of the process (this pid) that issued it dropped it unrun.
    Dropped(i32),
}

/// How many of the latest records an event's references in one process remember as dropped
/// unrun ([`IpcRef::note_unrun`]).
const UNRUN_KEPT: usize = 4096;
/// Where [`EvtPayload::latest_by`](file::EvtPayload) keeps the issuer's process-table index
/// (6 bits: [`MAX_PROCS`](acl_notify_core::slot::MAX_PROCS) is 64), its pid (24 bits, above
/// Linux's largest `pid_max`, 2^22) and, in between, whether the record was counted as done
/// without having run ([`UNRUN`]) and, if so, whether because its issuer's stream discarded it
/// ([`DROPPED`]; else its issuer died before it ran): the mark says which for good, whatever
/// becomes of the issuer afterwards.
const PROC_SHIFT: u32 = 26;
const PROC_MASK: u64 = 0x3f;
const UNRUN: u64 = 1 << 25;
const DROPPED: u64 = 1 << 24;
const PID_MASK: u64 = DROPPED - 1;

/// Whether record number `a` is `b` or a later one. Record numbers wrap at 2^32 (`issued`
/// counts on through it), so they are compared as serial numbers: `a` is later when it is
/// less than 2^31 records ahead of `b`.
fn at_or_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

/// Raises `done` to record `n` unless it is already there or later ([`at_or_after`]: not
/// `fetch_max`, which would keep a number from before the wrap above every later one).
fn raise_done(done: &AtomicU32, n: u32) {
    let _ = done.fetch_update(SeqCst, SeqCst, |cur| (!at_or_after(cur, n)).then_some(n));
}

/// The IPC event file of this process's server, with the registration its references use.
#[derive(Clone)]
pub(crate) struct EvtFiles {
    file: Arc<EvtFile>,
    /// This process's entry in the server's process table: the holder bit of its references.
    reg: Arc<ShmFile>,
    ns_tag: u64,
    /// The records this process's streams dropped unrun (see [`IpcRef::note_unrun`]), shared
    /// by all the process's references.
    unrun: Arc<Unrun>,
}

/// The records a process's streams dropped unrun, per event incarnation.
#[derive(Default)]
struct Unrun {
    kept: Mutex<HashMap<EvtKey, VecDeque<u32>>>,
    /// How many incarnations `kept` has (written under its lock): while 0, which is always
    /// unless a stream of the process discarded an IPC record, [`IpcRef::was_unrun`] is this
    /// one load, not the process-wide lock and a hash lookup at every completed IPC event
    /// wait or synchronize.
    events: AtomicUsize,
}

impl fmt::Debug for EvtFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvtFiles")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl EvtFiles {
    /// Claims a free slot on `dev` for a new IPC event owned by this process. When the device
    /// has none left, garbage is collected first (what dead processes held comes back; see
    /// [`ShmFile::gc`]).
    pub(crate) fn claim(&self, dev: u32) -> Result<IpcRef, SimError> {
        self.reg.still_registered()?;
        let start_time = self.reg.identity().1;
        let claim = || match self.file.claim(self.reg.me(), start_time, dev) {
            Ok(key) => Ok(Some(key)),
            Err(ClaimError::Full) => Ok(None),
            Err(ClaimError::Other(e)) => Err(e),
        };
        let key = match claim()? {
            Some(key) => key,
            None => {
                self.reg.gc();
                claim()?.ok_or_else(|| {
                    SimError::new(
                        Error::NoEventResource,
                        format!(
                            "device {dev} has no IPC event left ({MAX_IPC_EVENTS} per device in \
                             {})",
                            self.file.path().display()
                        ),
                    )
                })?
            }
        };
        Ok(IpcRef {
            files: self.clone(),
            key,
        })
    }

    /// Opens the IPC event a handle names (another reference of this process to it).
    pub(crate) fn open_handle(&self, h: &IpcEventHandle) -> Result<IpcRef, SimError> {
        self.file.intact()?;
        self.reg.still_registered()?;
        let p = parse(h)?;
        if p.ns_tag != self.ns_tag || p.server != self.file.server() {
            return Err(SimError::new(
                Error::ParamInvalid,
                "the IPC event handle belongs to another simulated machine (namespace or \
                 server)",
            ));
        }
        if self.file.slot(p.dev, p.idx).is_none() {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "the IPC event handle names device {} slot {}, outside this machine",
                    p.dev, p.idx
                ),
            ));
        }
        let key = (p.dev, p.idx, p.generation);
        if let Some(slot) = self.file.slot(p.dev, p.idx)
            && slot.is_live(p.generation)
        {
            self.creator_holds(slot, p.generation, p.dev)?;
        }
        self.file.hold(self.reg.me(), key).map_err(|_| {
            SimError::new(
                Error::InvalidHandle,
                format!(
                    "the IPC event of the handle (device {}, owner pid {}) no longer exists: \
                     every process holding it destroyed it or died",
                    p.dev, p.owner
                ),
            )
        })?;
        Ok(IpcRef {
            files: self.clone(),
            key,
        })
    }

    /// 107017 unless the creator of the event in `slot` (incarnation `generation`) still
    /// holds it. CANN's creator frees the event's shared memory when it releases the event
    /// (its destroy, once its queued tasks ran; its death): a handle then opens nothing,
    /// though the processes that opened it before keep their mappings, records and waits
    /// (hicann/runtime `src/runtime/core/src/event/ipc_event.cc`: `ReleaseDrvResource` frees
    /// both physical allocations the handle exports; `IpcOpenEventHandle` imports them). The
    /// creator holds the event while its bit is set (its handle, or a task it queued through
    /// it) and it lives. Asked before this process joins, so that its own bit counts only
    /// if it held the event already.
    fn creator_holds(&self, slot: &EvtSlot, generation: u32, dev: u32) -> Result<(), SimError> {
        let o = slot.owner();
        let holds = slot.is_live(generation)
            && o.proc < 64
            && slot.holders() & (1u64 << o.proc) != 0
            && (o.pid == sys::getpid() || sys::pid_alive(o.pid, o.start_time));
        if holds {
            return Ok(());
        }
        Err(SimError::new(
            Error::InvalidHandle,
            format!(
                "the IPC event of the handle (device {dev}) was released by its creator (pid {}: \
                 destroyed, or the process died): CANN frees an IPC event's shared memory at \
                 its creator's release, so its handle opens nothing any more; the processes that \
                 opened it before keep their handles",
                o.pid
            ),
        ))
    }
}

/// What a handle says.
struct Parsed {
    server: u32,
    dev: u32,
    idx: u32,
    generation: u32,
    owner: i32,
    ns_tag: u64,
}

/// One reference of this process to an IPC event (a handle's, or a queued task's through it):
/// counted in the process, which holds the slot by its bit while it has any (see the module
/// docs).
pub(crate) struct IpcRef {
    files: EvtFiles,
    key: EvtKey,
}

impl fmt::Debug for IpcRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IpcRef")
            .field("dev", &self.key.0)
            .field("idx", &self.key.1)
            .field("generation", &self.key.2)
            .finish()
    }
}

impl Drop for IpcRef {
    fn drop(&mut self) {
        let reg = &self.files.reg;
        let proc = reg.still_registered().is_ok().then(|| reg.me());
        self.files.file.release(proc, self.key);
    }
}

impl IpcRef {
    /// The slot, while it is still the incarnation this reference holds. It stops being so
    /// only if another process took this one for dead and dropped its references: then
    /// 507899, before a record or wait touches what may by now be another process's event.
    fn slot(&self) -> Result<&EvtSlot, SimError> {
        let f = &self.files.file;
        f.intact()?;
        let (dev, idx, generation) = self.key;
        let s = f.slot(dev, idx).ok_or_else(|| {
            SimError::new(Error::DrvInternalError, "IPC event slot outside the file")
        })?;
        if !s.holds(generation) {
            return Err(SimError::new(
                Error::DrvInternalError,
                format!(
                    "IPC event (device {dev}, slot {idx}) in {}: this process no longer holds \
                     it: another process dropped this process's references (it found this \
                     process's process-table entry {} dead or overwritten); remove the \
                     namespace",
                    f.path().display(),
                    self.files.reg.me()
                ),
            ));
        }
        Ok(s)
    }

    /// The handle another process opens.
    pub(crate) fn handle(&self) -> Result<IpcEventHandle, SimError> {
        let s = self.slot()?;
        let (dev, idx, generation) = self.key;
        Ok(Parsed {
            server: self.files.file.server(),
            dev,
            idx,
            generation,
            owner: s.owner().pid,
            ns_tag: self.files.ns_tag,
        }
        .write())
    }

    /// A record is enqueued: its number.
    pub(crate) fn issue(&self) -> Result<u32, SimError> {
        let s = self.slot()?;
        let mut n = s.sync.issued.fetch_add(1, SeqCst).wrapping_add(1);
        if n == 0 {
            // 0 means "never recorded" (a wait for it does nothing): skipped at the wrap.
            n = s.sync.issued.fetch_add(1, SeqCst).wrapping_add(1);
        }
        let by = self.issued_by(n);
        // The latest record's issuer, as record numbers go ([`at_or_after`]).
        let _ = s.sync.latest_by.fetch_update(SeqCst, SeqCst, |cur| {
            (cur == 0 || !at_or_after((cur >> 32) as u32, n)).then_some(by)
        });
        Ok(n)
    }

    /// [`EvtPayload::latest_by`](file::EvtPayload) for record `n` issued by this process.
    fn issued_by(&self, n: u32) -> u64 {
        let reg = &self.files.reg;
        (u64::from(n) << 32)
            | (u64::from(reg.me()) << PROC_SHIFT)
            | (u64::from(reg.identity().0 as u32) & PID_MASK)
    }

    /// A record enqueued as `n` was not queued after all (only the latest one can be taken
    /// back).
    pub(crate) fn unissue(&self, n: u32) {
        if let Ok(s) = self.slot() {
            let _ = s
                .sync
                .issued
                .compare_exchange(n, n.wrapping_sub(1), SeqCst, SeqCst);
            let _ = s
                .sync
                .latest_by
                .compare_exchange(self.issued_by(n), 0, SeqCst, SeqCst);
        }
    }

    /// The number of the latest record issued, when it has not run and the process that
    /// issued it is dead (its entry in the process table free, taken by another process, or
    /// its process gone): that record will never run. Counted as done (without a timestamp),
    /// as a record a live process's stream discarded is ([`complete_unrun`](Self::complete_unrun)),
    /// it releases every wait for it or an earlier record (see the limits in the module docs).
    fn dead_issuer(&self, s: &EvtSlot) -> Option<(u32, u64)> {
        let by = s.sync.latest_by.load(SeqCst);
        let n = (by >> 32) as u32;
        if by == 0 || by & UNRUN != 0 || at_or_after(s.sync.done.load(SeqCst), n) {
            return None;
        }
        self.issuer_gone(by).then_some((n, by))
    }

    /// Whether the process that issued the record `by` (a [`EvtPayload::latest_by`](file::EvtPayload)
    /// word) is gone: its entry in the process table free, taken by another process, or its
    /// process dead.
    fn issuer_gone(&self, by: u64) -> bool {
        let proc = ((by >> PROC_SHIFT) & PROC_MASK) as u32;
        let pid = (by & PID_MASK) as i32;
        let reg = &self.files.reg;
        proc != reg.me()
            && ((reg.proc_pid(proc) as u32 as u64 & PID_MASK) as i32 != pid
                || !reg.proc_alive(proc))
    }

    /// Why record `n` counts as done without having run, when the event's latest record is
    /// `n` and is marked so: its issuer died first ([`settle_dead_issuer`](Self::settle_dead_issuer)),
    /// or its issuer's stream dropped it ([`complete_unrun`](Self::complete_unrun)); a wait
    /// for `n` passed, but not because it ran. One load when it is neither (the waits' path).
    pub(crate) fn never_ran(&self, n: u32) -> Option<NeverRan> {
        let by = self.slot().ok()?.sync.latest_by.load(SeqCst);
        if by & UNRUN == 0 || (by >> 32) as u32 != n {
            return None;
        }
        let pid = (by & PID_MASK) as i32;
        Some(if by & DROPPED != 0 {
            NeverRan::Dropped(pid)
        } else {
            NeverRan::IssuerDied(pid)
        })
    }

    /// Counts the latest record as done if its issuer died before it ran ([`dead_issuer`](Self::dead_issuer)).
    fn settle_dead_issuer(&self, s: &EvtSlot) {
        if let Some((n, by)) = self.dead_issuer(s) {
            // Marked first, so that a wait it releases can tell why (`never_ran`); a record
            // issued meanwhile leaves it to the next look.
            if s.sync
                .latest_by
                .compare_exchange(by, by | UNRUN, SeqCst, SeqCst)
                .is_ok()
            {
                raise_done(&s.sync.done, n);
                sys::futex_wake(&s.sync.done, u32::MAX);
            }
        }
    }

    /// Record `n` ran: stamps it and wakes the waits.
    pub(crate) fn complete(&self, n: u32) -> Result<(), SimError> {
        let s = self.slot()?;
        s.sync.stamp_ns.store(sys::now_ns().max(1), SeqCst);
        raise_done(&s.sync.done, n);
        sys::futex_wake(&s.sync.done, u32::MAX);
        Ok(())
    }

    /// Record `n` was dropped unrun by this process (its stream aborted or destroyed with its
    /// tasks discarded): noted for every reference of the process ([`was_unrun`](Self::was_unrun)),
    /// marked in the slot for the other holders if it is still the event's latest record
    /// ([`never_ran`](Self::never_ran): the word of the latest record's issuer, marked as a
    /// dead issuer's is; once a later record was issued the word is that one's, and their
    /// waits for `n` pass, the limit in the module docs), then counted as done, without a
    /// timestamp, so that no holder waits for ever for it.
    pub(crate) fn complete_unrun(&self, n: u32) {
        self.note_unrun(n);
        if let Ok(s) = self.slot() {
            // Before `done`: a wait that sees the record done sees the mark.
            let by = self.issued_by(n);
            let _ = s
                .sync
                .latest_by
                .compare_exchange(by, by | UNRUN | DROPPED, SeqCst, SeqCst);
            raise_done(&s.sync.done, n);
            sys::futex_wake(&s.sync.done, u32::MAX);
        }
    }

    /// Notes record `n` as dropped unrun by this process, keeping the latest [`UNRUN_KEPT`]
    /// per event (a wait further behind passes as if its record had ran: the limit in the
    /// module docs). Incarnations that are alive nowhere any more (their slot freed or reused,
    /// whoever held them) are forgotten; one whose last reference in this process went but
    /// that another process still holds is kept, since this process may open its handle again
    /// and wait for a record it discarded, which must still answer 107023.
    fn note_unrun(&self, n: u32) {
        let f = &self.files;
        let mut unrun = f.unrun.kept.lock().unwrap_or_else(PoisonError::into_inner);
        if !unrun.contains_key(&self.key) {
            unrun.retain(|&(dev, idx, generation), _| {
                f.file.slot(dev, idx).is_some_and(|s| s.holds(generation))
            });
        }
        let kept = unrun.entry(self.key).or_default();
        if kept.len() == UNRUN_KEPT {
            kept.pop_front();
        }
        kept.push_back(n);
        // Before the record counts as done (`complete_unrun`): a wait that sees it done sees
        // this count (at least 1 while this incarnation is kept, which it is while it lives).
        f.unrun.events.store(unrun.len(), Release);
    }

    /// Whether record `n` was dropped unrun by this process, through any reference
    /// ([`note_unrun`](Self::note_unrun)).
    pub(crate) fn was_unrun(&self, n: u32) -> bool {
        if self.files.unrun.events.load(Acquire) == 0 {
            return false;
        }
        self.files
            .unrun
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&self.key)
            .is_some_and(|kept| kept.contains(&n))
    }

    /// The number of the latest record enqueued (0: none).
    pub(crate) fn issued(&self) -> Result<u32, SimError> {
        Ok(self.slot()?.sync.issued.load(SeqCst))
    }

    /// The state of the latest record.
    pub(crate) fn latest(&self) -> Result<LatestRecord, SimError> {
        let s = self.slot()?;
        self.settle_dead_issuer(s);
        let issued = s.sync.issued.load(SeqCst);
        Ok(if issued == 0 {
            LatestRecord::None
        } else if at_or_after(s.sync.done.load(SeqCst), issued) {
            LatestRecord::Done
        } else {
            LatestRecord::Pending
        })
    }

    /// Waits until record `n` has run, for at most `timeout`; `stop` is asked between
    /// slices. `Ok(false)` when the timeout passed or `stop` said so.
    pub(crate) fn wait_done(
        &self,
        n: u32,
        timeout: Option<Duration>,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, SimError> {
        let s = self.slot()?;
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let cur = s.sync.done.load(SeqCst);
            if at_or_after(cur, n) {
                return Ok(true);
            }
            if stop() || self.files.file.lost() {
                return Ok(false);
            }
            self.settle_dead_issuer(s);
            let slice = match deadline {
                None => SLICE,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(false);
                    }
                    left.min(SLICE)
                }
            };
            // A stream worker counted busy is not, asleep here (see `shm::busy`).
            crate::shm::blocked(|| sys::futex_wait(&s.sync.done, cur, Some(slice)));
        }
    }

    /// The event as the wait-for graph names it.
    pub(crate) fn target(&self) -> crate::waitgraph::Target {
        crate::waitgraph::Target {
            kind: crate::waitgraph::TargetKind::IpcEvent,
            server: 0,
            device: self.key.0,
            id: self.key.1,
        }
    }

    /// A stream wait: until record `n` has run, the timeout passes (107020) or the stream is
    /// cancelled.
    pub(crate) fn stream_wait(
        &self,
        n: u32,
        timeout: Option<Duration>,
        ctx: &TaskCtx,
    ) -> Result<(), SimError> {
        // Published in the wait-for graph for the length of the wait (see `waitgraph`).
        let published =
            crate::waitgraph::Blocked::publish(self.target(), ctx.task_number(), timeout);
        if self.wait_done(n, timeout, &|| ctx.is_cancelled())? {
            return Ok(());
        }
        self.files.file.intact()?;
        let cycle = published
            .deadlock()
            .map_or_else(String::new, |c| format!("; {c}"));
        Err(SimError::new(
            Error::TaskTimeout,
            if ctx.is_cancelled() {
                "wait for an IPC event cancelled: its stream was destroyed with tasks \
                 discarded, or aborted"
                    .to_owned()
            } else {
                format!(
                    "wait for IPC event (device {}, slot {}) record {n} timed out after {} \
                     s{cycle}",
                    self.key.0,
                    self.key.1,
                    timeout.unwrap_or_default().as_secs()
                )
            },
        ))
    }
}

/// The process's open IPC event file, if any.
pub(crate) struct EvtState {
    files: Mutex<Option<EvtFiles>>,
}

impl EvtState {
    pub(crate) fn new() -> Self {
        EvtState {
            files: Mutex::new(None),
        }
    }

    /// The file of `reg`'s server, opened on first use; `reg` is this process's registration
    /// in that server's process table.
    pub(crate) fn files(&self, namespace: &str, reg: &Arc<ShmFile>) -> Result<EvtFiles, SimError> {
        let mut f = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(f) = f.as_ref() {
            return Ok(f.clone());
        }
        let file = EvtFile::open(
            namespace,
            reg.server(),
            reg.devices(),
            EvtOpen::CreateOrOpen,
        )?
        .ok_or_else(|| {
            SimError::new(
                Error::DrvInternalError,
                format!(
                    "IPC event file {} vanished while it was opened",
                    evt_file_path(namespace, reg.server()).display()
                ),
            )
        })?;
        let opened = EvtFiles {
            file,
            reg: Arc::clone(reg),
            ns_tag: ns_tag(namespace),
            unrun: Arc::default(),
        };
        *f = Some(opened.clone());
        Ok(opened)
    }
}

impl fmt::Debug for EvtState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvtState").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;

//! Import whitelists: up to [`MAX_ENTRIES`] (64) processes allowed to import one exported
//! notify, each named by the device it imports on (an sdid, [`crate::sdid`]: one device, every
//! device of one server, or anywhere), PID, process start time and an optional stronger
//! identity.
//!
//! A [`Whitelist`] is `#[repr(C)]`, fixed-size and pointer-free, and all-zero bytes are an
//! empty list, so it can sit in shared memory next to the notify it guards. Because such memory
//! may be written by other processes, every reader clamps the stored length to the capacity.
//!
//! Two words defend against PID reuse. `start_time` is the process's start time (clock ticks;
//! a PID recycled within the same tick has the same one), 0 if unknown, [`NOT_RUNNING`] if no
//! process had the PID when it was whitelisted. `identity` is a stronger, backend-defined
//! number a recycled PID never shares (the simulator: a pidfs inode number), 0 if the recorder
//! could not take one. Not every process can take the stronger kind (one under valgrind cannot
//! open pidfds), so an importer presents both, and the strongest kind both sides know decides
//! ([`WhitelistEntry::matches`]).

use crate::backend::ServerPid;
use crate::error::{Error, Result};
use crate::sdid;

/// The identity of an entry whose PID named no running process when it was whitelisted: it
/// matches no importer, so a process given that PID later does not inherit the entry.
pub const NOT_RUNNING: u64 = u64::MAX;

/// Most entries a whitelist holds (SPEC: "more than 64 PIDs in total → 207012").
pub const MAX_ENTRIES: usize = 64;

/// One process allowed to import.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(C)]
pub struct WhitelistEntry {
    /// Where the process imports: a device's sdid (an inter-server entry), a
    /// [`sdid::server_wide`] one (any device of its server: a same-server entry) or
    /// [`sdid::ANYWHERE`] ([`sdid::admits`] decides).
    pub sdid: u32,
    /// Process id on that server (`aclrtDeviceGetBareTgid`).
    pub pid: i32,
    /// The process's start time in clock ticks as the backend recorded it; 0 = unknown;
    /// [`NOT_RUNNING`] matches no importer.
    pub start_time: u64,
    /// A stronger identity the backend recorded (backend-defined: a number a recycled PID
    /// never shares, however soon it comes); 0 = none recorded.
    pub identity: u64,
}

impl WhitelistEntry {
    /// An entry with an unknown start time and identity.
    pub const fn new(sdid: u32, pid: i32) -> Self {
        WhitelistEntry::with_identity(sdid, pid, 0, 0)
    }

    /// An entry with a recorded start time and no stronger identity.
    pub const fn with_start_time(sdid: u32, pid: i32, start_time: u64) -> Self {
        WhitelistEntry::with_identity(sdid, pid, start_time, 0)
    }

    /// An entry with a recorded start time and stronger identity (either 0 if unknown).
    pub const fn with_identity(sdid: u32, pid: i32, start_time: u64, identity: u64) -> Self {
        WhitelistEntry {
            sdid,
            pid,
            start_time,
            identity,
        }
    }

    /// Whether the process `pid` importing on the device of sdid `sdid` (started at
    /// `start_time`, of stronger `identity`, each 0 if that process cannot tell) is the one
    /// this entry names: a device the entry admits ([`sdid::admits`]), the same PID,
    /// and the strongest kind both know agrees — the identities if both have one (then the
    /// start times are not consulted: a PID recycled within one tick shares the start time),
    /// else the start times if the entry recorded one. A recorded start time or identity is
    /// never waived: an importer that cannot present the kind the entry holds does not match.
    /// An entry that recorded neither matches any process with that PID; one recorded as
    /// [`NOT_RUNNING`] matches nobody.
    pub const fn matches(&self, sdid: u32, pid: i32, start_time: u64, identity: u64) -> bool {
        if !sdid::admits(self.sdid, sdid) || self.pid != pid || self.start_time == NOT_RUNNING {
            return false;
        }
        if self.identity != 0 && identity != 0 {
            return self.identity == identity;
        }
        if self.start_time != 0 {
            return self.start_time == start_time;
        }
        self.identity == 0
    }
}

impl From<ServerPid> for WhitelistEntry {
    fn from(sp: ServerPid) -> Self {
        WhitelistEntry::new(sp.sdid, sp.pid)
    }
}

/// The processes allowed to import one notify: at most [`MAX_ENTRIES`], no duplicates.
///
/// All-zero bytes are an empty whitelist. Adding is all-or-nothing per call: if the new
/// distinct entries would push the total past 64, nothing is added and the answer is
/// `OverLimit` (207012). Re-adding an identical entry (same sdid, PID and both identities) is a
/// no-op that does not count again.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct Whitelist {
    /// Entries in use (`entries[..len]`); clamped to `MAX_ENTRIES` on every read.
    len: u32,
    /// Explicit padding so the `#[repr(C)]` layout has no uninitialised bytes.
    _reserved: u32,
    entries: [WhitelistEntry; MAX_ENTRIES],
}

impl Whitelist {
    /// An empty whitelist.
    pub const fn new() -> Self {
        Whitelist {
            len: 0,
            _reserved: 0,
            entries: [WhitelistEntry::new(0, 0); MAX_ENTRIES],
        }
    }

    /// The capacity, [`MAX_ENTRIES`].
    pub const fn capacity(&self) -> usize {
        MAX_ENTRIES
    }

    /// Number of entries.
    pub const fn len(&self) -> usize {
        let n = self.len as usize;
        if n > MAX_ENTRIES { MAX_ENTRIES } else { n }
    }

    /// Whether the whitelist is empty.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entries, in the order they were added.
    pub fn as_slice(&self) -> &[WhitelistEntry] {
        &self.entries[..self.len()]
    }

    /// Iterates over the entries.
    pub fn iter(&self) -> core::slice::Iter<'_, WhitelistEntry> {
        self.as_slice().iter()
    }

    /// Whether this exact entry (sdid, PID, start time and identity) is present.
    pub fn contains(&self, entry: &WhitelistEntry) -> bool {
        self.as_slice().contains(entry)
    }

    /// Whether the process `pid` importing on the device of sdid `sdid` (`start_time`,
    /// `identity`) may import: some entry
    /// [`matches`](WhitelistEntry::matches) it.
    pub fn matches(&self, sdid: u32, pid: i32, start_time: u64, identity: u64) -> bool {
        self.iter()
            .any(|e| e.matches(sdid, pid, start_time, identity))
    }

    /// Adds entries, all or nothing.
    ///
    /// Codes: 207012 `OverLimit` if the distinct new entries (not already present, duplicates
    /// within `entries` counted once) would make more than 64; nothing is added then.
    pub fn add_entries(&mut self, entries: &[WhitelistEntry]) -> Result<()> {
        // Count first (O(64 × n), no allocation), then apply, so a failure changes nothing.
        let mut new = 0usize;
        for (i, e) in entries.iter().enumerate() {
            if !self.contains(e) && !entries[..i].contains(e) {
                new += 1;
            }
        }
        if self.len() + new > MAX_ENTRIES {
            debug!(
                "whitelist: {} + {} entries exceed {}",
                self.len(),
                new,
                MAX_ENTRIES
            );
            return Err(Error::OverLimit);
        }
        let mut len = self.len();
        for e in entries {
            if !self.entries[..len].contains(e) {
                self.entries[len] = *e;
                len += 1;
            }
        }
        // `len <= MAX_ENTRIES` by the check above.
        self.len = len as u32;
        Ok(())
    }

    /// Adds one entry. Codes: 207012 if the whitelist is full and `entry` is not in it.
    pub fn add(&mut self, entry: WhitelistEntry) -> Result<()> {
        self.add_entries(core::slice::from_ref(&entry))
    }

    /// Adds PIDs of processes importing where `sdid` admits (for `aclrtNotifySetImportPid`,
    /// [`sdid::server_wide`] of this server) whose start times are unknown (0), all or
    /// nothing (repeated calls add to the list).
    ///
    /// Codes: 207012 as [`add_entries`](Self::add_entries).
    pub fn add_pids(&mut self, sdid: u32, pids: &[i32]) -> Result<()> {
        self.add_pids_with(sdid, pids, |_| 0)
    }

    /// Adds PIDs of processes importing where `sdid` admits, recording each one's start time as
    /// `start_time(pid)` returns it (0 if unknown), all or nothing.
    ///
    /// Codes: 207012 as [`add_entries`](Self::add_entries).
    pub fn add_pids_with(
        &mut self,
        sdid: u32,
        pids: &[i32],
        mut start_time: impl FnMut(i32) -> u64,
    ) -> Result<()> {
        // Entries are built in chunks on the stack (no allocation); each chunk is checked
        // against what is already in, so the all-or-nothing rule needs a dry run first.
        let mut trial = *self;
        for chunk in pids.chunks(MAX_ENTRIES) {
            let mut buf = [WhitelistEntry::default(); MAX_ENTRIES];
            for (slot, &pid) in buf.iter_mut().zip(chunk) {
                *slot = WhitelistEntry::with_start_time(sdid, pid, start_time(pid));
            }
            trial.add_entries(&buf[..chunk.len()])?;
        }
        *self = trial;
        Ok(())
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl Default for Whitelist {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for Whitelist {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Whitelist {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "Whitelist {=[?]}", self.as_slice())
    }
}

impl<'a> IntoIterator for &'a Whitelist {
    type Item = &'a WhitelistEntry;
    type IntoIter = core::slice::Iter<'a, WhitelistEntry>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    fn pids(r: core::ops::Range<i32>) -> Vec<i32> {
        r.collect()
    }

    #[test]
    fn sixty_four_fit_the_sixty_fifth_is_over_limit() {
        let mut w = Whitelist::new();
        assert_eq!(w.add_pids(0, &pids(100..164)), Ok(()));
        assert_eq!(w.len(), 64);
        assert_eq!(w.add_pids(0, &[999]), Err(Error::OverLimit));
        assert_eq!(w.add(WhitelistEntry::new(1, 100)), Err(Error::OverLimit));
        assert_eq!(w.len(), 64);
        assert!(!w.matches(0, 999, 0, 0));
        // Re-adding present entries when full is fine: they do not count twice.
        assert_eq!(w.add_pids(0, &[100, 163]), Ok(()));
        assert_eq!(w.len(), 64);
    }

    #[test]
    fn over_limit_adds_nothing() {
        let mut w = Whitelist::new();
        w.add_pids(0, &pids(0..60)).unwrap();
        // 5 new ones (and one already present): 60 + 5 > 64, so none is added.
        assert_eq!(
            w.add_pids(0, &[0, 1000, 1001, 1002, 1003, 1004]),
            Err(Error::OverLimit)
        );
        assert_eq!(w.len(), 60);
        assert!(!w.matches(0, 1000, 0, 0));
        // Exactly 4 new ones fit.
        assert_eq!(w.add_pids(0, &[0, 1000, 1001, 1002, 1003]), Ok(()));
        assert_eq!(w.len(), 64);
    }

    #[test]
    fn repeated_calls_add_and_duplicates_count_once() {
        let mut w = Whitelist::new();
        w.add_pids(0, &[7, 8]).unwrap();
        w.add_pids(0, &[8, 9, 9, 9]).unwrap();
        assert_eq!(
            w.iter().map(|e| e.pid).collect::<Vec<_>>(),
            std::vec![7, 8, 9]
        );
        // 64 copies of one new PID in one call count as one.
        w.add_pids(0, &[42; 64]).unwrap();
        assert_eq!(w.len(), 4);
        // A long call (more than one internal chunk) with 60 distinct new PIDs fits exactly.
        let mut long = pids(1000..1060);
        long.extend_from_slice(&pids(1000..1060));
        assert_eq!(w.add_pids(0, &long), Ok(()));
        assert_eq!(w.len(), 64);
    }

    #[test]
    fn long_call_over_limit_changes_nothing() {
        let mut w = Whitelist::new();
        w.add_pids(3, &[1]).unwrap();
        // 64 already-present-or-repeated PIDs in the first chunk, one too many in the second.
        let mut long = std::vec![1; 64];
        long.extend(pids(2..66));
        assert_eq!(w.add_pids(3, &long), Err(Error::OverLimit));
        assert_eq!(w.as_slice(), &[WhitelistEntry::new(3, 1)]);
    }

    #[test]
    fn server_and_start_time_matter() {
        let mut w = Whitelist::new();
        w.add_entries(&[
            WhitelistEntry::with_start_time(1, 500, 12345),
            WhitelistEntry::new(2, 500),
        ])
        .unwrap();
        // Server 1, PID 500: only the process started at 12345.
        assert!(w.matches(1, 500, 12345, 0));
        assert!(
            !w.matches(1, 500, 99999, 0),
            "PID reused by a later process"
        );
        assert!(
            !w.matches(1, 500, 0, 0),
            "a recorded start time is not waived"
        );
        // Server 2, PID 500: start time unknown, any process with that PID.
        assert!(w.matches(2, 500, 0, 0));
        assert!(w.matches(2, 500, 777, 0));
        // Same PID on another server is someone else.
        assert!(!w.matches(3, 500, 0, 0));
        assert!(w.contains(&WhitelistEntry::with_start_time(1, 500, 12345)));
        assert!(!w.contains(&WhitelistEntry::new(1, 500)));
        // Same (sdid, pid) with another start time is a distinct entry.
        w.add(WhitelistEntry::with_start_time(1, 500, 99999))
            .unwrap();
        assert_eq!(w.len(), 3);
    }

    /// The strongest kind both sides know decides: identities when both have one (a PID
    /// recycled within one tick shares the start time but not the identity), else start
    /// times; a kind the entry recorded and the importer cannot present is not waived.
    #[test]
    fn the_strongest_identity_both_know_decides() {
        let e = WhitelistEntry::with_identity(0, 7, 500, 9000);
        assert!(e.matches(0, 7, 500, 9000));
        assert!(!e.matches(0, 7, 500, 9001), "same tick, another process");
        assert!(!e.matches(0, 7, 600, 9001));
        // An importer that cannot take the stronger identity (under valgrind): start time.
        assert!(e.matches(0, 7, 500, 0));
        assert!(!e.matches(0, 7, 501, 0), "recycled PID");
        assert!(!e.matches(0, 7, 0, 0), "neither kind presented");
        // A recorder that could take only the start time: the importer's start time decides.
        let s = WhitelistEntry::with_start_time(0, 7, 500);
        assert!(s.matches(0, 7, 500, 9000));
        assert!(!s.matches(0, 7, 501, 9000));
        // An identity only (no start time recorded) is never waived.
        let i = WhitelistEntry::with_identity(0, 7, 0, 9000);
        assert!(i.matches(0, 7, 500, 9000));
        assert!(!i.matches(0, 7, 500, 0));
        // Neither recorded: any process with the PID.
        assert!(WhitelistEntry::new(0, 7).matches(0, 7, 123, 456));
        assert!(!WhitelistEntry::with_identity(0, 7, NOT_RUNNING, 9000).matches(0, 7, 500, 9000));
    }

    #[test]
    fn an_entry_for_a_pid_not_running_matches_nobody() {
        let mut w = Whitelist::new();
        w.add(WhitelistEntry::with_start_time(0, 42, NOT_RUNNING))
            .unwrap();
        for identity in [0, 1, 12345, NOT_RUNNING - 1, NOT_RUNNING] {
            assert!(!w.matches(0, 42, identity, 0), "identity {identity}");
        }
    }

    #[test]
    fn add_pids_with_records_start_times() {
        let mut w = Whitelist::new();
        w.add_pids_with(0, &[10, 11], |pid| 1000 + pid as u64)
            .unwrap();
        assert!(w.matches(0, 10, 1010, 0));
        assert!(!w.matches(0, 10, 1011, 0));
        assert!(w.matches(0, 11, 1011, 0));
    }

    /// An entry for one device admits its PID on that device only; a same-server entry on
    /// every device of its server; an entry for anywhere on every device.
    #[test]
    fn the_device_an_importer_imports_on_matters() {
        let dev = |s, d| sdid::PodDevice::new(s, d).unwrap().sdid();
        let mut w = Whitelist::new();
        w.add_entries(&[
            WhitelistEntry::new(dev(3, 0), 500),
            WhitelistEntry::new(sdid::server_wide(0), 600),
            WhitelistEntry::new(sdid::ANYWHERE, 700),
        ])
        .unwrap();
        assert!(w.matches(dev(3, 0), 500, 0, 0));
        assert!(
            !w.matches(dev(3, 1), 500, 0, 0),
            "another device of server 3"
        );
        assert!(
            !w.matches(dev(4, 0), 500, 0, 0),
            "device 0 of another server"
        );
        assert!(w.matches(dev(0, 0), 600, 0, 0));
        assert!(w.matches(dev(0, 7), 600, 0, 0));
        assert!(
            !w.matches(dev(1, 0), 600, 0, 0),
            "a same-server entry of server 0"
        );
        assert!(w.matches(dev(9, 3), 700, 0, 0));
        assert!(w.matches(dev(0, 0), 700, 0, 0));
    }

    #[test]
    fn server_pid_converts() {
        let e: WhitelistEntry = ServerPid { sdid: 4, pid: 9 }.into();
        assert_eq!(e, WhitelistEntry::new(4, 9));
    }

    #[test]
    fn zeroed_is_empty_and_garbage_length_is_clamped() {
        // SAFETY: `Whitelist` is integers only, so all-zero bytes are a valid value.
        let mut w: Whitelist = unsafe { core::mem::zeroed() };
        assert!(w.is_empty());
        assert_eq!(w, Whitelist::new());
        // Another process wrote a nonsense length into shared memory.
        w.len = 0xdead_beef;
        assert_eq!(w.len(), MAX_ENTRIES);
        assert_eq!(w.iter().count(), MAX_ENTRIES);
        assert_eq!(w.add_pids(0, &[1]), Err(Error::OverLimit));
        w.clear();
        assert!(w.is_empty());
    }

    #[test]
    fn layout_is_fixed() {
        assert_eq!(core::mem::size_of::<WhitelistEntry>(), 24);
        assert_eq!(core::mem::size_of::<Whitelist>(), 8 + 64 * 24);
        assert_eq!(core::mem::align_of::<Whitelist>(), 8);
    }
}

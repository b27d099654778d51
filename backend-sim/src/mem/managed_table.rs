//! The advice of this process's managed allocations ([`super::managed`]): per 2 MiB page,
//! what `aclrtMemManagedAdvise` set and where the last prefetch went, and how
//! `aclrtMemManagedGetAttr` reads a range of pages back (hicann/runtime
//! `docs/zh/api_ref/25-02_Enumerations.md`, `aclrtMemManagedRangeAttribute`). Entries are
//! keyed by the allocation's address in the one allocation table (`MemState::allocs`), with
//! its incarnation.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::file::MemFile;
use crate::locks::lock;

/// Managed memory's page: sizes round up to it, advice and prefetches apply to whole pages.
pub const MANAGED_PAGE: u64 = 2 << 20;

/// A location of managed memory (`aclrtMemManagedLocation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    Host,
    Device(u32),
    /// A host NUMA node (the simulated host has node 0 only).
    HostNuma(u32),
}

impl Place {
    /// The location as `ACL_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION` and
    /// `_LAST_PREFETCH_LOCATION` give it: the device or node id, -1 for the host.
    fn code(self) -> i32 {
        match self {
            Place::Host => -1,
            Place::Device(d) | Place::HostNuma(d) => d as i32,
        }
    }

    /// `aclrtMemManagedLocationType`: DEVICE 1, HOST 2, HOST_NUMA 3.
    fn type_code(self) -> i32 {
        match self {
            Place::Device(_) => 1,
            Place::Host => 2,
            Place::HostNuma(_) => 3,
        }
    }

    /// The id `_LOCATION_ID` gives: a device's or node's; the host has none.
    fn id(self) -> Option<i32> {
        match self {
            Place::Host => None,
            Place::Device(d) | Place::HostNuma(d) => Some(d as i32),
        }
    }
}

/// The value of a location attribute whose pages disagree or have none (CANN's -2).
pub const INVALID: i32 = -2;

/// An `aclrtMemManagedAdviseType` with its location (where it takes one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advice {
    SetReadMostly,
    /// The location (which copy stays) changes nothing the simulator keeps.
    UnsetReadMostly,
    SetPreferred(Place),
    UnsetPreferred,
    SetAccessedBy(Place),
    UnsetAccessedBy(Place),
}

/// An `aclrtMemManagedRangeAttribute`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeAttr {
    ReadMostly,
    PreferredLocation,
    AccessedBy,
    PreferredLocationType,
    PreferredLocationId,
    LastPrefetchLocation,
    LastPrefetchLocationType,
    LastPrefetchLocationId,
}

impl RangeAttr {
    /// The attribute of value `v` (1 to 8), if it is one.
    pub fn from_code(v: u32) -> Option<RangeAttr> {
        use RangeAttr::*;
        Some(match v {
            1 => ReadMostly,
            2 => PreferredLocation,
            3 => AccessedBy,
            4 => PreferredLocationType,
            5 => PreferredLocationId,
            6 => LastPrefetchLocation,
            7 => LastPrefetchLocationType,
            8 => LastPrefetchLocationId,
            _ => return None,
        })
    }
}

/// What one 2 MiB page was told and where it was last prefetched to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct PageAdvice {
    pub(super) read_mostly: bool,
    pub(super) preferred: Option<Place>,
    pub(super) accessed_by: Vec<Place>,
    pub(super) last_prefetch: Option<Place>,
}

/// One managed allocation of this process: where its host mapping is, and its pages' advice.
#[derive(Debug)]
pub(super) struct ManagedRange {
    pub(super) generation: u32,
    pub(super) off: u64,
    pub(super) span: u64,
    pub(super) pages: Vec<PageAdvice>,
}

/// This process's managed allocations, by device address (the advice of entries of the one
/// allocation table; shared with the prefetch tasks).
pub(super) type ManagedTable = Arc<Mutex<HashMap<usize, ManagedRange>>>;

/// The one value the pages give through `f`, or `None` when they disagree.
fn common<T: PartialEq>(pages: &[PageAdvice], f: impl Fn(&PageAdvice) -> T) -> Option<T> {
    let mut it = pages.iter().map(f);
    let first = it.next()?;
    it.all(|v| v == first).then_some(first)
}

/// The values of attribute `attr` over `pages`, `n` of them (1 but for `AccessedBy`).
pub(super) fn attr_values(pages: &[PageAdvice], attr: RangeAttr, n: usize) -> Vec<i32> {
    use RangeAttr::*;
    let place = |f: fn(&PageAdvice) -> Option<Place>| common(pages, f).flatten();
    let preferred = || place(|p| p.preferred);
    let prefetched = || place(|p| p.last_prefetch);
    let one = match attr {
        ReadMostly => i32::from(pages.iter().all(|p| p.read_mostly)),
        PreferredLocation => preferred().map_or(INVALID, Place::code),
        PreferredLocationType => preferred().map_or(0, Place::type_code),
        PreferredLocationId => preferred().and_then(Place::id).unwrap_or(INVALID),
        LastPrefetchLocation => prefetched().map_or(INVALID, Place::code),
        LastPrefetchLocationType => prefetched().map_or(0, Place::type_code),
        LastPrefetchLocationId => prefetched().and_then(Place::id).unwrap_or(INVALID),
        AccessedBy => {
            // The locations every page of the range was told it is accessed by.
            let mut all: Vec<i32> = pages
                .first()
                .map(|p| p.accessed_by.clone())
                .unwrap_or_default()
                .into_iter()
                .filter(|l| pages.iter().all(|p| p.accessed_by.contains(l)))
                .map(Place::code)
                .collect();
            all.resize(n, INVALID);
            return all;
        }
    };
    vec![one]
}

impl ManagedRange {
    /// The pages `[off, off + len)` of the allocation covers (`len` > 0).
    pub(super) fn pages_mut(&mut self, off: u64, len: u64) -> &mut [PageAdvice] {
        let (first, last) = (off / MANAGED_PAGE, (off + len - 1) / MANAGED_PAGE);
        &mut self.pages[first as usize..=last as usize]
    }
}

/// Drops the advice of the managed allocation at `addr` of `file`, if it is one, and undoes
/// its host mapping: before its free (also the end of a session, `MemState::clear`).
pub(super) fn forget(table: &ManagedTable, addr: usize, file: &MemFile) {
    if let Some(m) = lock(table).remove(&addr) {
        file.close_to_host(m.off, m.span);
    }
}

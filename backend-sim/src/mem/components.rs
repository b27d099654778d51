//! The kinds of device memory a process holds, as `aclrtGetMemUsageInfo` reports them
//! ([`Component`]), and the current and peak bytes of each kind on one device (`Usage`);
//! [`super::usage`] says where the figures come from.

use std::sync::Mutex;

use crate::locks::lock;

/// The marks of the slot policy word that say an owned allocation's kind (the low bits are
/// `aclrtMalloc`'s policies, which `Sim::malloc_rounded` keeps clear of these).
///
/// A physical allocation (`vmm`): its page code in bits 8–15, its `vmm::Props` in bits 0–7.
pub(super) const PHYS_MARK: u32 = 1 << 31;
/// A managed allocation (`managed`).
pub(super) const MANAGED_MARK: u32 = 1 << 30;
/// A memory pool's block (`pool`).
pub(super) const POOL_MARK: u32 = 1 << 29;

/// A kind of device memory a program allocates, named by the call that allocates it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component {
    /// `aclrtMalloc` and its variants.
    Malloc,
    /// The blocks a stream-ordered memory pool holds, in use or kept for reuse.
    Pool,
    /// `aclrtMemAllocManaged`.
    Managed,
    /// `aclrtMallocPhysical`.
    Physical,
    /// Memory of another process (or device) this process imported.
    Import,
}

impl Component {
    const ALL: [Component; 5] = [
        Component::Malloc,
        Component::Pool,
        Component::Managed,
        Component::Physical,
        Component::Import,
    ];

    /// The name `aclrtMemUsageInfo::name` carries (shorter than its 32 bytes with the NUL).
    pub fn name(self) -> &'static str {
        match self {
            Component::Malloc => "aclrtMalloc",
            Component::Pool => "aclrtMemPoolMallocAsync",
            Component::Managed => "aclrtMemAllocManaged",
            Component::Physical => "aclrtMallocPhysical",
            Component::Import => "aclrtIpcMemImport",
        }
    }

    /// The kind of an owned allocation placed with slot policy `policy`.
    pub(super) fn of_policy(policy: u32) -> Component {
        if policy & PHYS_MARK != 0 {
            Component::Physical
        } else if policy & MANAGED_MARK != 0 {
            Component::Managed
        } else if policy & POOL_MARK != 0 {
            Component::Pool
        } else {
            Component::Malloc
        }
    }
}

/// One component's figures on one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemUsage {
    pub component: Component,
    /// Bytes it holds now.
    pub current: u64,
    /// The most it held at once.
    pub peak: u64,
}

/// The figures of each [`Component`] of one device (this process's).
#[derive(Debug, Default)]
pub(crate) struct Usage {
    /// (current, peak) by `Component as usize`.
    figures: Mutex<[(u64, u64); Component::ALL.len()]>,
}

impl Usage {
    /// `bytes` more held by `c`.
    pub(super) fn add(&self, c: Component, bytes: u64) {
        let mut f = lock(&self.figures);
        let (cur, peak) = &mut f[c as usize];
        *cur = cur.saturating_add(bytes);
        *peak = (*peak).max(*cur);
    }

    /// `bytes` fewer held by `c`.
    pub(super) fn sub(&self, c: Component, bytes: u64) {
        let mut f = lock(&self.figures);
        let cur = &mut f[c as usize].0;
        debug_assert!(*cur >= bytes, "{c:?} frees {bytes} bytes of {cur}");
        *cur = cur.saturating_sub(bytes);
    }

    /// The components holding memory now, appended to `out`.
    pub(super) fn report(&self, out: &mut Vec<MemUsage>) {
        let f = *lock(&self.figures);
        out.extend(Component::ALL.iter().filter_map(|&c| {
            let (current, peak) = f[c as usize];
            (current > 0).then_some(MemUsage {
                component: c,
                current,
                peak,
            })
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_stays_when_the_current_figure_falls_and_empty_components_are_not_reported() {
        let u = Usage::default();
        u.add(Component::Malloc, 4 << 20);
        u.add(Component::Malloc, 2 << 20);
        u.sub(Component::Malloc, 4 << 20);
        u.add(Component::Managed, 2 << 20);
        u.sub(Component::Managed, 2 << 20);
        let mut out = Vec::new();
        u.report(&mut out);
        assert_eq!(
            out,
            [MemUsage {
                component: Component::Malloc,
                current: 2 << 20,
                peak: 6 << 20
            }]
        );
    }

    #[test]
    fn each_mark_of_the_slot_policy_names_its_component() {
        assert_eq!(Component::of_policy(0), Component::Malloc);
        assert_eq!(Component::of_policy(2 | 0x100), Component::Malloc);
        assert_eq!(
            Component::of_policy(PHYS_MARK | 1 << 8),
            Component::Physical
        );
        assert_eq!(Component::of_policy(MANAGED_MARK), Component::Managed);
        assert_eq!(Component::of_policy(POOL_MARK), Component::Pool);
        assert!(Component::ALL.iter().all(|c| c.name().len() < 32));
    }
}

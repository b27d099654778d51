//! Copies with pageable host memory: host memory the runtime does not know (`malloc`'s, the
//! stack; neither `aclrtMallocHost`'s nor registered with `aclrtHostRegister`).
//!
//! CANN's runtime does not queue an `aclrtMemcpyAsync` between device memory and such
//! memory: it synchronizes the stream and copies at once, so that the device never reads or
//! writes pageable pages later, and refuses the copy in a stream capture (hicann/runtime
//! `src/runtime/api/impl/api_error.cc`, `ApiErrorDecorator::MemcpyAsync` and
//! `JudgeIsInvolvePageableMemory`: a copy whose kind is neither host to host nor device to
//! device, judged after the kind and the sides' locations were checked; the API page,
//! `docs/zh/api_ref/11-03_memory_copy_and_set.md`: with host memory that is not page-locked
//! the call returns once the copy is done). A device-to-device copy may name memory imported
//! from another host, which this process's tables do not place: never one.
//!
//! The test is made on the sides the queued copy classified anyway (one lookup per address),
//! and the copy is then left to the caller ([`AsyncCopy::Pageable`]): synchronizing a stream
//! is the C layer's (its errors are the call's).

use super::host::HostTable;
use super::queued::QueuedSide;
use super::{MemcpyKind, Side};

/// What [`Sim::memcpy_async_unless_pageable`](crate::Sim::memcpy_async_unless_pageable) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncCopy {
    /// Queued on the stream.
    Queued,
    /// Nothing queued: the copy moves bytes between device memory and pageable host memory
    /// at this address; CANN synchronizes the stream and copies at once (see the module
    /// docs).
    Pageable(usize),
}

/// What a copy's side is, for the test: device memory, or host memory at `at` that the
/// runtime knows (`known`: `aclrtMallocHost`'s or registered) or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Place {
    Device,
    Host { at: usize, known: bool },
}

impl Place {
    /// A side as a queued copy keeps it (a host side holds its block when the runtime knows
    /// it; a side reached through a mapping is device memory).
    pub(super) fn of_queued(side: &QueuedSide) -> Place {
        match side {
            QueuedSide::Host(at, block) => Place::Host {
                at: *at,
                known: block.is_some(),
            },
            QueuedSide::Device { .. } | QueuedSide::Mapped(_) => Place::Device,
        }
    }

    /// A side as the copy's checks found it, its host memory looked up in `host`.
    pub(super) fn of_side(side: &Side<'_>, host: &HostTable) -> Place {
        match side {
            Side::Host(at) => Place::Host {
                at: *at,
                known: host.block_at(*at).is_some(),
            },
            Side::Device(_) => Place::Device,
        }
    }
}

/// The pageable host address of a copy of `kind` from `s` to `d`, if the copy is one CANN
/// makes at once (see the module docs).
pub(super) fn pageable_side(kind: MemcpyKind, d: Place, s: Place) -> Option<usize> {
    if matches!(kind, MemcpyKind::HostToHost | MemcpyKind::DeviceToDevice) {
        return None;
    }
    match (d, s) {
        (Place::Host { at, known: false }, Place::Device)
        | (Place::Device, Place::Host { at, known: false }) => Some(at),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use acl_notify_core::{StreamOps as _, SyncWait};

    use super::*;
    use crate::mem::ValueCondition;
    use crate::mem::registered::HostReg;

    /// The copy's own classification answers what CANN makes at once: device memory with
    /// host memory the runtime does not know, whatever the kind says (explicit or default),
    /// never with `aclrtMallocHost`'s or registered memory, never device to device; nothing
    /// is queued for it, and the precheck of a capture answers the same.
    #[test]
    fn only_copies_between_device_and_unknown_host_memory_are_left_to_the_caller() {
        let (sim, _ns) = crate::mem::tests::test_sim(
            "pageable",
            "sides",
            acl_notify_core::Soc::Ascend910B,
            1,
            64 << 20,
        );
        let s = sim.create_stream(0).unwrap();
        let (word, d, e) = (
            sim.malloc(0, 4096, 0).unwrap(),
            sim.malloc(0, 4096, 0).unwrap(),
            sim.malloc(0, 4096, 0).unwrap(),
        );
        sim.memset(d, 4096, 0x11, 4096).unwrap();
        // Holds the stream: nothing queued runs before the word is written.
        sim.value_wait(word, 1, ValueCondition::Equal, s).unwrap();
        let pinned = sim.malloc_host(4096).unwrap();
        // SAFETY: 4096 bytes of `aclrtMallocHost` memory.
        unsafe {
            std::ptr::write_bytes(
                std::ptr::with_exposed_provenance_mut::<u8>(pinned),
                0x44,
                4096,
            )
        };
        let pages = vec![[0x22u8; 4096]; 3];
        let registered = pages.as_ptr().expose_provenance().next_multiple_of(4096);
        sim.host_register(registered, 4096, HostReg::PINNED)
            .unwrap();
        let pageable = vec![0x33u8; 4096];
        let p = pageable.as_ptr().addr();
        let (h2d, d2h) = (MemcpyKind::HostToDevice, MemcpyKind::DeviceToHost);
        let cases = [
            (d, p, h2d, Some(p)),
            (p, d, d2h, Some(p)),
            (d, p, MemcpyKind::Default, Some(p)),
            (p, d, MemcpyKind::Default, Some(p)),
            (d, pinned, h2d, None),
            (registered, d, d2h, None),
            (d, registered, MemcpyKind::Default, None),
            (e, d, MemcpyKind::DeviceToDevice, None),
            (e, d, MemcpyKind::Default, None),
        ];
        for (dst, src, kind, want) in cases {
            let what = format!("{dst:#x} <- {src:#x} {kind:?}");
            assert_eq!(
                sim.memcpy_check(dst, 64, src, 64, kind).unwrap(),
                want,
                "{what}"
            );
            // SAFETY: the host sides live until the synchronize below.
            let done = unsafe { sim.memcpy_async_unless_pageable(dst, 64, src, 64, kind, s) };
            let want = want.map_or(AsyncCopy::Queued, AsyncCopy::Pageable);
            assert_eq!(done.unwrap(), want, "{what}");
        }
        // A host-to-host copy is never one.
        assert_eq!(
            sim.memcpy_check(p, 64, pinned, 64, MemcpyKind::HostToHost)
                .unwrap(),
            None
        );
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes of `one` to the device word.
        unsafe { sim.memcpy(word, 8, one.as_ptr().addr(), 8, h2d) }.unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        // The queued copies ran (the pinned bytes to d, to the registered page, back to d, to
        // e); the pageable ones were not queued: no 0x33 reached d, none of d's bytes p.
        for at in [d, e] {
            let mut back = [0u8; 64];
            // SAFETY: 64 bytes of `back`.
            unsafe { sim.memcpy(back.as_mut_ptr().addr(), 64, at, 64, d2h) }.unwrap();
            assert_eq!(back, [0x44; 64], "{at:#x}");
        }
        assert!(pageable.iter().all(|&b| b == 0x33));
        sim.host_unregister(registered).unwrap();
        sim.free_host(pinned).unwrap();
        for a in [word, d, e] {
            sim.free(a).unwrap();
        }
    }
}

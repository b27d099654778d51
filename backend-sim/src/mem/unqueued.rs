//! The asynchronous copies CANN's runtime does not queue, judged on the sides the queued copy
//! classifies anyway (one lookup per address) and left to the caller ([`AsyncCopy`]), which
//! synchronizes a stream or refuses the call (the C layer's: its errors are the call's).
//!
//! - **Pageable host memory**: host memory the runtime does not know (`malloc`'s, the stack;
//!   neither `aclrtMallocHost`'s nor registered with `aclrtHostRegister`) on one side, device
//!   memory on the other. CANN synchronizes the stream and copies at once, so that the device
//!   never reads or writes pageable pages later, and refuses the copy in a stream capture
//!   (hicann/runtime `src/runtime/api/impl/api_error.cc`, `ApiErrorDecorator::MemcpyAsync` and
//!   `JudgeIsInvolvePageableMemory`: a copy whose kind is neither host to host nor device to
//!   device, judged after the kind and the sides' locations were checked; the API page,
//!   `docs/zh/api_ref/11-03_memory_copy_and_set.md`: with host memory that is not page-locked
//!   the call returns once the copy is done). A device-to-device copy may name memory imported
//!   from another host, which this process's tables do not place: never one.
//! - **Within the host**: a copy whose kind, as CANN's `MemcpyKindAutoCorrect` corrected it
//!   (`mem::direction`), is host to host: any kind between two page-locked host
//!   addresses, `ACL_MEMCPY_DEFAULT` or `ACL_MEMCPY_HOST_TO_HOST` with a pageable one (or with
//!   managed memory, whose kind stays). CANN's runtime on a
//!   host with its devices attached (the EP form, online run mode) refuses it (207000: the
//!   same `ApiErrorDecorator::MemcpyAsync`, "H2H is not supported", after the location check;
//!   `11-03_memory_copy_and_set.md`, aclrtMemcpyAsync: in the EP form the call does not copy
//!   within the host asynchronously and returns ACL_ERROR_RT_FEATURE_NOT_SUPPORT).

use super::host::HostTable;
use super::queued::QueuedSide;
use super::{MemcpyKind, Side};

/// What [`Sim::memcpy_async_as_cann`](crate::Sim::memcpy_async_as_cann) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncCopy {
    /// Queued on the stream.
    Queued,
    /// Nothing queued: the copy moves bytes between device memory and pageable host memory
    /// at this address; CANN synchronizes the stream and copies at once (see the module
    /// docs).
    Pageable(usize),
    /// Nothing queued: both sides are host memory, which CANN refuses (see the module docs).
    WithinHost,
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

/// What CANN's `aclrtMemcpyAsync` does with a copy of `kind` from `s` to `d` (see the module
/// docs), `kind` as its runtime corrected it (`mem::direction`): host to host refused,
/// device to device queued, another kind with pageable host memory on a side made at once;
/// [`AsyncCopy::Queued`] for a copy it queues.
pub(super) fn verdict(kind: MemcpyKind, d: Place, s: Place) -> AsyncCopy {
    match (kind, d, s) {
        (MemcpyKind::HostToHost, _, _) => AsyncCopy::WithinHost,
        (MemcpyKind::DeviceToDevice, _, _) => AsyncCopy::Queued,
        (_, Place::Host { at, known: false }, _) | (_, _, Place::Host { at, known: false }) => {
            AsyncCopy::Pageable(at)
        }
        _ => AsyncCopy::Queued,
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
    /// never with `aclrtMallocHost`'s or registered memory, never device to device; and what
    /// it refuses: two host sides. Nothing is queued for either, and the precheck of a
    /// capture answers the same.
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
        let within = [
            (p, pinned, MemcpyKind::HostToHost),
            (pinned, registered, MemcpyKind::Default),
            (p, p + 64, MemcpyKind::Default),
        ];
        for (dst, src, kind, want) in cases {
            let what = format!("{dst:#x} <- {src:#x} {kind:?}");
            let want = want.map_or(AsyncCopy::Queued, AsyncCopy::Pageable);
            let check = sim.memcpy_check(dst, 64, src, 64, kind).unwrap();
            assert_eq!(check, want, "{what}");
            // SAFETY: the host sides live until the synchronize below.
            let done = unsafe { sim.memcpy_async_as_cann(dst, 64, src, 64, kind, s) };
            assert_eq!(done.unwrap(), want, "{what}");
        }
        for (dst, src, kind) in within {
            let what = format!("{dst:#x} <- {src:#x} {kind:?}");
            let want = AsyncCopy::WithinHost;
            let check = sim.memcpy_check(dst, 64, src, 64, kind).unwrap();
            assert_eq!(check, want, "{what}");
            // SAFETY: as above.
            let done = unsafe { sim.memcpy_async_as_cann(dst, 64, src, 64, kind, s) };
            assert_eq!(done.unwrap(), want, "{what}");
        }
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

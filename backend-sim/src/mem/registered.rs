//! Host memory registered with the runtime (`aclrtHostRegister[V2]`, `aclrtHostUnregister`,
//! `aclrtHostGetDevicePointer`): the caller's page-aligned range becomes host memory the
//! runtime knows, as `aclrtMallocHost`'s is — `aclrtPointerGetAttributes` says host, a queued
//! copy or set holds it and fails instead of writing if it is unregistered before the task
//! runs (the table and the holding are `mem::host`'s) — and, registered
//! `ACL_HOST_REG_MAPPED`, gets a device address.
//!
//! CANN documents the device address for the device's own use only (a kernel's argument):
//! "it cannot be used for memory operations such as copies; host-side processing uses the
//! host address" (hicann/runtime `docs/zh/api_ref/11-02_host_memory_management.md`). The
//! simulated device runs no kernels, so the address is kept for what a program can do with
//! it: hand it back to `aclrtHostGetDevicePointer`'s caller, fault when host code
//! dereferences it (a `PROT_NONE` reservation, as device memory), and be refused by copies.
//!
//! Codes follow hicann/runtime: the ACL layer's NULL and size checks (`src/acl/aclrt_impl/
//! memory.cpp`) are the C ABI's; here the runtime's and driver's — `src/runtime/api/impl/
//! api_impl.cc` (`HostRegisterV2`, `HostUnregister`, `HostGetDevicePointer`),
//! `src/runtime/core/src/common/register_memory.cc` (overlap, lookups by start),
//! `errcode_manage.cc` (507910, 507911). CANN's doc asks for a 4 KiB-aligned address; the
//! simulator refuses another with 107000 (the driver's check; its code is not in the source).

use acl_notify_core::Error;

use super::host::HOST_ALIGN;
pub use super::host::HostReg;
use crate::Sim;
use crate::error::SimError;

impl Sim {
    /// Registers `[ptr, ptr + size)` of the caller's host memory as `how` says; returns its
    /// device address when `how` has `MAPPED`.
    ///
    /// Errors: 107000 `ptr` not 4 KiB-aligned, size 0, `PINNED` over `aclrtMallocHost`
    /// memory; 507910 a range overlapping one registered already; 207001 no address space
    /// for the device address.
    pub fn host_register(
        &self,
        ptr: usize,
        size: usize,
        how: HostReg,
    ) -> Result<Option<usize>, SimError> {
        if !ptr.is_multiple_of(HOST_ALIGN) {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{ptr:#x} is not aligned to a 4 KiB page, as CANN requires of host memory to register"
                ),
            ));
        }
        if size == 0 {
            return Err(SimError::new(Error::ParamInvalid, "size is 0"));
        }
        if ptr.checked_add(size).is_none() {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!("[{ptr:#x}, +{size}) wraps around the address space"),
            ));
        }
        if self.is_device_addr(ptr) {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!("{ptr:#x} is a device address, not host memory"),
            ));
        }
        self.mem().host.register(ptr, size, how)
    }

    /// Unregisters the host memory registered at `ptr` (its start).
    ///
    /// Errors: 507911 nothing registered starts at `ptr`.
    pub fn host_unregister(&self, ptr: usize) -> Result<(), SimError> {
        self.mem().host.unregister(ptr)
    }

    /// The device address of the host memory registered `MAPPED` at `ptr` (its start).
    ///
    /// Errors: 107000 nothing registered starts there, or it was registered `PINNED` only.
    pub fn host_device_pointer(&self, ptr: usize) -> Result<usize, SimError> {
        self.mem().host.device_address(ptr)
    }
}

#[cfg(test)]
mod tests {
    use acl_notify_core::{BackendError as _, StreamOps as _, SyncWait};

    use super::*;
    use crate::NamespaceGuard;
    use crate::mem::MemcpyKind;
    use crate::mem::location::MemLocation;

    fn open(tag: &str) -> (Sim, NamespaceGuard) {
        crate::mem::tests::test_sim(
            "hostreg",
            tag,
            acl_notify_core::Soc::Ascend910B,
            1,
            64 << 20,
        )
    }

    /// Page-aligned memory of the test's own (a `Vec` of pages).
    fn pages(n: usize) -> (Vec<[u8; 4096]>, usize) {
        let v = vec![[0u8; 4096]; n + 1];
        let at = v.as_ptr().expose_provenance().next_multiple_of(4096);
        (v, at)
    }

    #[test]
    fn registered_memory_is_known_host_memory_with_a_device_address_copies_refuse() {
        let (sim, _ns) = open("basic");
        let (_keep, at) = pages(2);
        let dev = sim
            .host_register(at, 8192, HostReg::MAPPED)
            .unwrap()
            .unwrap();
        assert_ne!(dev, at);
        assert!(matches!(
            sim.mem_location(at + 100),
            MemLocation::Host { .. }
        ));
        assert_eq!(sim.host_device_pointer(at).unwrap(), dev);
        assert_eq!(
            sim.host_device_pointer(at + 4096).unwrap_err().kind(),
            Error::ParamInvalid
        );
        // A copy through the host address works, byte by byte.
        let d = sim.malloc(0, 8192, 0).unwrap();
        let src: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
        // SAFETY: `src` and the registered pages are valid for 8192 bytes.
        unsafe {
            sim.memcpy(
                d,
                8192,
                src.as_ptr().expose_provenance(),
                8192,
                MemcpyKind::HostToDevice,
            )
            .unwrap();
            sim.memcpy(at, 8192, d, 8192, MemcpyKind::DeviceToHost)
                .unwrap();
        }
        // SAFETY: the registered pages, 8192 bytes.
        let got = unsafe {
            std::slice::from_raw_parts(std::ptr::with_exposed_provenance::<u8>(at), 8192)
        };
        assert_eq!(got, &src[..]);
        // The device address is refused by copies, of any kind.
        for kind in [
            MemcpyKind::DeviceToHost,
            MemcpyKind::Default,
            MemcpyKind::HostToHost,
        ] {
            // SAFETY: refused before any byte moves.
            let e = unsafe { sim.memcpy(at, 8192, dev, 16, kind) }.unwrap_err();
            assert_eq!(e.kind(), Error::ParamInvalid, "{kind:?}");
        }
        // Overlap and duplicates: 507910; unregistering inside or twice: 507911.
        for (p, n) in [(at, 8192), (at + 4096, 4096), (at - 4096, 8192)] {
            let e = sim.host_register(p, n, HostReg::PINNED).unwrap_err();
            assert_eq!(e.kind(), Error::HostMemoryAlreadyRegistered, "{p:#x} {n}");
        }
        assert_eq!(
            sim.host_unregister(at + 4096).unwrap_err().kind(),
            Error::HostMemoryNotRegistered
        );
        sim.host_unregister(at).unwrap();
        assert_eq!(
            sim.host_unregister(at).unwrap_err().kind(),
            Error::HostMemoryNotRegistered
        );
        assert!(matches!(sim.mem_location(at), MemLocation::Unregistered));
        // Pinned only: no device address; unaligned refused.
        assert_eq!(sim.host_register(at, 4096, HostReg::PINNED).unwrap(), None);
        assert_eq!(
            sim.host_device_pointer(at).unwrap_err().kind(),
            Error::ParamInvalid
        );
        sim.host_unregister(at).unwrap();
        assert_eq!(
            sim.host_register(at + 1, 4096, HostReg::MAPPED)
                .unwrap_err()
                .kind(),
            Error::ParamInvalid
        );
        sim.free(d).unwrap();
    }

    /// A copy queued into registered memory that is unregistered before it runs fails the
    /// task and writes nothing (the caller may free the memory at once).
    #[test]
    fn a_copy_queued_into_memory_unregistered_before_it_runs_writes_nothing() {
        let (sim, _ns) = open("queued");
        let (keep, at) = pages(1);
        sim.host_register(at, 4096, HostReg::MAPPED_PINNED).unwrap();
        let s = sim.create_stream(0).unwrap();
        let word = sim.malloc(0, 4096, 0).unwrap();
        let d = sim.malloc(0, 4096, 0).unwrap();
        sim.memset(d, 4096, 0xAB, 4096).unwrap();
        // Holds the stream until the word is written.
        sim.value_wait(word, 1, crate::mem::ValueCondition::Equal, s)
            .unwrap();
        // SAFETY: the registered page, held by the task.
        unsafe { sim.memcpy_async(at, 4096, d, 4096, MemcpyKind::DeviceToHost, s) }.unwrap();
        sim.host_unregister(at).unwrap();
        let one = 1u64.to_ne_bytes();
        // SAFETY: 8 bytes of `one` to the device word.
        unsafe {
            sim.memcpy(
                word,
                8,
                one.as_ptr().expose_provenance(),
                8,
                MemcpyKind::HostToDevice,
            )
        }
        .unwrap();
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
        assert!(
            e.message().contains("unregistered (aclrtHostUnregister)"),
            "{e}"
        );
        // SAFETY: the page, 4096 bytes.
        let got = unsafe {
            std::slice::from_raw_parts(std::ptr::with_exposed_provenance::<u8>(at), 4096)
        };
        assert!(got.iter().all(|b| *b == 0));
        drop(keep);
        sim.destroy_stream(s, acl_notify_core::StreamDestroy::Discard)
            .ok();
        sim.free(word).unwrap();
        sim.free(d).unwrap();
    }
}

//! What this process holds of each device's memory, by component (`aclrtGetMemUsageInfo`):
//! the bytes each kind of allocation takes now and the most it took since the process mapped
//! the device's memory.
//!
//! CANN's runtime hands the query to its driver (`halGetMemUsageInfo`; hicann/runtime
//! `src/runtime/driver/npu_driver_mem.cc`, `NpuDriver::GetMemUsageInfo`), which reports, per
//! module that allocated device memory, its current and peak bytes; only modules that hold a
//! non-zero amount are listed (`pkg_inc/driver/ascend_hal_base.h`, `halGetMemUsageInfo`), the
//! largest first (CANN's `aclrtGetMemUsageInfo` page). The driver's modules are CANN's own
//! components (runtime, HCCL, …); the simulator has no such modules, so its components are
//! the kinds of allocation a program makes, each named by the call that makes it
//! ([`Component`](super::components::Component)). The figures come from the one place each kind is made and ended:
//!
//! - memory this process owns: a slot of the device's memory file, counted by its span
//!   (what `aclrtGetMemInfo` counts as used) when the slot is placed and when the owner frees
//!   it (`MemFile::allocate` and the owner's `free_owned`); the slot's policy word says
//!   the kind (a physical allocation's, managed memory's and a memory pool's mark);
//! - memory it imported (`aclrtIpcMemImportByKey`, a shareable handle's import): counted on
//!   the device it was imported onto, from the import to its close.
//!
//! Host memory (`aclrtMallocHost`) is not device memory: CANN's driver reports it only under
//! the host's own id, which `aclrtGetMemUsageInfo`'s device check refuses, so no component
//! reports it here either.

use super::components::MemUsage;
use crate::locks::lock;

impl crate::Sim {
    /// `aclrtGetMemUsageInfo`: what this process holds of `device`'s memory, by component,
    /// only the components that hold some now, the largest first (equal ones by name).
    ///
    /// Errors: 107001 bad device.
    pub fn mem_usage(&self, device: u32) -> Result<Vec<MemUsage>, crate::error::SimError> {
        self.mem_checked(|| {
            self.device_ok(device)?;
            let mut out = Vec::new();
            if let Some(f) = self.mem_file(self.inner.server_id, device, false)? {
                f.usage().report(&mut out);
            }
            if let Some(u) = lock(&self.mem().import_usage).get(&device) {
                u.report(&mut out);
            }
            out.sort_by(|a, b| {
                b.current
                    .cmp(&a.current)
                    .then(a.component.name().cmp(b.component.name()))
            });
            Ok(out)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::components::Component;

    /// An import counts on the device it is imported onto, from the import to its close; the
    /// owner's allocation stays the owner's.
    #[test]
    fn an_import_counts_on_the_importing_device_until_it_is_closed() {
        let (sim, ns) = super::super::tests::test_sim(
            "usage",
            "import",
            acl_notify_core::Soc::Ascend910B,
            2,
            64 << 20,
        );
        let a = sim.malloc(0, 8192, 0).unwrap();
        let owned = sim.mem_usage(0).unwrap();
        assert_eq!(owned.len(), 1);
        assert_eq!(owned[0].component, Component::Malloc);
        let key = sim.ipc_mem_export(a, 8192, true).unwrap();
        super::super::tests::in_other_process(&ns, |child| {
            let import = |d: u32| {
                child
                    .mem_usage(d)
                    .unwrap()
                    .iter()
                    .find(|u| u.component == Component::Import)
                    .map(|u| (u.current, u.peak))
            };
            child.ipc_mem_import(0, &key, false).is_ok()
                && import(0) == Some((8192, 8192))
                && import(1).is_none()
                && child.mem_usage(0).unwrap().len() == 1
                && child.ipc_mem_close(&key).is_ok()
                && import(0).is_none()
        })
        .unwrap();
        assert_eq!(
            sim.mem_usage(0).unwrap(),
            owned,
            "the owner's figures are its own"
        );
        sim.free(a).unwrap();
        assert!(sim.mem_usage(0).unwrap().is_empty());
    }
}

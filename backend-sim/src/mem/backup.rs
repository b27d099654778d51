//! A process's device memory saved on the host and put back (the memory part of
//! `aclrtSnapShotProcessBackup` / `aclrtSnapShotProcessRestore`): CANN's backup "saves the
//! process's device resources on the host side, for a later restore" (hicann/runtime
//! `docs/zh/api_ref/21_snapshot_management.md`; `src/runtime/feature/snapshot/
//! snapshot_process_helper.cc`, `SnapShotProcessBackup`: the contexts synchronized, then the
//! driver's `ProcessResBackup`). Here that is the bytes of every allocation this process owns
//! in the one allocation table (`aclrtMalloc`'s, managed and physical memory, on every device;
//! not memory it imported, which its owner saves), copied out through the simulator's mapping
//! of the device files, and written back over the same allocations at restore.

use std::sync::Arc;

use acl_notify_core::Error;

use super::file::MemFile;
use super::state::Alloc;
use crate::Sim;
use crate::error::SimError;

/// One allocation's bytes as saved.
#[derive(Debug)]
struct Saved {
    addr: usize,
    file: Arc<MemFile>,
    id: u32,
    generation: u32,
    bytes: Vec<u8>,
}

/// Device memory of this process saved by [`Sim::mem_backup`].
#[derive(Debug, Default)]
pub struct MemBackup {
    saved: Vec<Saved>,
}

impl MemBackup {
    /// How many allocations, and how many bytes, it holds.
    pub fn size(&self) -> (usize, usize) {
        (
            self.saved.len(),
            self.saved.iter().map(|s| s.bytes.len()).sum(),
        )
    }
}

impl Sim {
    /// Copies the bytes of every live allocation this process owns (see the module docs). The
    /// caller has made sure no task of this process writes them meanwhile (its streams are
    /// synchronized and new work held back).
    pub fn mem_backup(&self) -> Result<MemBackup, SimError> {
        self.mem_checked(|| {
            let owned: Vec<(usize, Alloc)> = self
                .mem()
                .allocs
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .iter()
                .filter(|(_, a)| !a.imported)
                .map(|(addr, a)| (*addr, a.clone()))
                .collect();
            let mut saved = Vec::with_capacity(owned.len());
            for (addr, a) in owned {
                if !a.view().current() {
                    continue;
                }
                let off = a
                    .file
                    .offset_of(addr)
                    .ok_or_else(|| SimError::new(Error::DrvInternalError, "device address lost"))?;
                let len = a.size as usize;
                let mut bytes = vec![0u8; len];
                // SAFETY: a live allocation of this process, `len` bytes inside the arena.
                unsafe {
                    std::ptr::copy_nonoverlapping(a.file.bytes(off, len), bytes.as_mut_ptr(), len)
                };
                saved.push(Saved {
                    addr,
                    file: a.file,
                    id: a.id,
                    generation: a.generation,
                    bytes,
                });
            }
            Ok(MemBackup { saved })
        })
    }

    /// Writes `b`'s bytes back over the allocations they were saved from.
    ///
    /// Errors: 507909 an allocation of the backup no longer lives (nothing is written then).
    pub fn mem_restore(&self, b: &MemBackup) -> Result<(), SimError> {
        self.mem_checked(|| {
            if let Some(gone) = b
                .saved
                .iter()
                .find(|s| !Alloc::is_current(&s.file, s.id, s.generation, false))
            {
                return Err(SimError::new(
                    Error::SnapshotRestoreFailed,
                    format!(
                        "allocation {:#x} ({} bytes, device {}) of the backup was freed since",
                        gone.addr,
                        gone.bytes.len(),
                        gone.file.device()
                    ),
                ));
            }
            for s in &b.saved {
                let off = s
                    .file
                    .offset_of(s.addr)
                    .ok_or_else(|| SimError::new(Error::DrvInternalError, "device address lost"))?;
                let len = s.bytes.len();
                // SAFETY: checked live just now; `len` bytes inside the arena.
                unsafe {
                    std::ptr::copy_nonoverlapping(s.bytes.as_ptr(), s.file.bytes(off, len), len)
                };
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use acl_notify_core::BackendError as _;

    use super::*;
    use crate::mem::tests::{d2h, test_sim};

    #[test]
    fn saved_bytes_come_back_over_the_same_allocations() {
        let (sim, _ns) = test_sim(
            "backup",
            "restore",
            acl_notify_core::Soc::Ascend910B,
            2,
            64 << 20,
        );
        let a = sim.malloc(0, 1000, 0).unwrap();
        let b = sim.malloc(1, 64, 0).unwrap();
        sim.memset(a, 1000, 0x11, 1000).unwrap();
        sim.memset(b, 64, 0x22, 64).unwrap();
        let saved = sim.mem_backup().unwrap();
        assert_eq!(saved.size(), (2, 1064));
        sim.memset(a, 1000, 0xEE, 1000).unwrap();
        sim.memset(b, 64, 0xEE, 64).unwrap();
        sim.mem_restore(&saved).unwrap();
        let mut got = vec![0u8; 1000];
        d2h(&sim, &mut got, a).unwrap();
        assert!(got.iter().all(|x| *x == 0x11));
        d2h(&sim, &mut got[..64], b).unwrap();
        assert!(got[..64].iter().all(|x| *x == 0x22));
        // An allocation freed since: refused, nothing written.
        sim.memset(a, 1000, 0xEE, 1000).unwrap();
        sim.free(b).unwrap();
        let e = sim.mem_restore(&saved).unwrap_err();
        assert_eq!(e.kind(), Error::SnapshotRestoreFailed, "{e}");
        d2h(&sim, &mut got, a).unwrap();
        assert!(got.iter().all(|x| *x == 0xEE));
        sim.free(a).unwrap();
    }
}

//! Device memory on the simulated devices: allocation, checked copies and sets (synchronous
//! and ordered on streams), memory information, and host memory for copies.
//!
//! # The memory model
//!
//! Each device's memory is one sparse file of the namespace ([`file`]), so that another
//! process can map what is shared with it (IPC memory). A process maps the file once, and
//! hands out device pointers from a separate reservation of the same size that is mapped
//! `PROT_NONE`: a device pointer is `reservation + offset in the device's arena`, unique in
//! the process, and **host code that dereferences it faults at once (`SIGSEGV`)**, as it
//! would on hardware, where device memory is not in the host's address space. A simulator
//! that let host code read device memory would pass programs that crash on an NPU. The
//! simulator itself moves the bytes through its own mapping of the file.
//!
//! # Checked memory
//!
//! Every device range a call names (copy source and destination, set, export) must lie inside
//! one live allocation of this process, or one it imported: the range is looked up in the
//! process's allocations and the allocation's slot in the shared file is checked to be the
//! same incarnation. Anything else is 107000 with a message naming the allocation (its
//! address and size), the offset of the range in it and the caller's range, or saying that
//! the address was freed, or was never allocated. Never a silent write. The checked size is
//! the size the caller asked for, not the size CANN rounds it up to: a copy into the padding
//! works on hardware but is a bug the simulator reports.
//!
//! Host memory cannot be checked (any address may be valid); a host range is used as the
//! caller's contract says.
//!
//! # Where each part lives
//!
//! This module keeps the process's memory state and files (`Sim::mem_file`) and
//! `aclrtGetMemInfo`; `alloc` allocates and frees (device memory and `aclrtMallocHost`'s),
//! `range` checks a device range against the process's allocations (the checked memory
//! above), `copy` copies and sets, synchronous and queued. The device-memory file is
//! `file`; the other kinds of memory and of copy (IPC, virtual memory management, pools,
//! managed memory, 2-D copies, …) have a module each, below.

mod alloc;
mod backend;
pub mod backup;
pub(crate) mod capacity;
pub mod components;
mod copy;
pub mod device_area;
mod direction;
pub mod fabric;
pub(crate) mod file;
mod fill32;
pub mod half;
mod host;
pub mod indirect;
pub mod inspect;
pub mod ipc;
pub mod location;
pub mod managed;
mod managed_table;
pub mod overflow;
pub mod pitched;
mod plain_host;
pub mod pool;
mod pool_state;
mod precheck;
mod queued;
mod range;
mod recent;
pub mod reduce;
pub mod registered;
pub(crate) mod remote;
mod reserved;
mod run_or_drop;
pub mod shareable;
pub(crate) mod state;
pub mod unqueued;
pub mod usage;
mod value;
pub mod vmm;

use std::sync::Arc;

use crate::Sim;
use crate::error::SimError;
use crate::locks::lock;
use file::MemFile;

pub use capacity::{DEFAULT_DEVICE_MEMORY, parse_size};
pub(crate) use capacity::{MAX_DEVICE_MEMORY, check_capacity};
pub(crate) use state::{Alloc, MemState};

pub use alloc::Rounding;
pub use copy::MemcpyKind;
pub use file::{ALLOC_ALIGN, MAX_ALLOCS, mem_file_path, remove_mem_files};
pub(crate) use range::{DevRange, within};
// For the other mem modules, which name them as `super::X` (the module graph's edges go up
// to `mem`, not across to a sibling that imports them back).
use copy::Side;
use range::{At, checked_offset, covering};
pub use unqueued::AsyncCopy;
pub use value::ValueCondition;

impl Sim {
    pub(crate) fn mem(&self) -> &MemState {
        &self.inner.mem
    }

    /// This process's identity in allocation slots: (pid, start time).
    pub(crate) fn mem_identity(&self) -> (i32, u64) {
        self.inner.file.identity()
    }

    /// The device-memory file of `device` on `server`, opened (and created if `create`) on
    /// first use.
    pub(crate) fn mem_file(
        &self,
        server: u32,
        device: u32,
        create: bool,
    ) -> Result<Option<Arc<MemFile>>, SimError> {
        let mut files = lock(&self.mem().files);
        if let Some(f) = files.get(&(server, device)) {
            return Ok(Some(Arc::clone(f)));
        }
        let Some(f) = MemFile::open(
            &self.inner.namespace,
            server,
            device,
            self.mem().capacity,
            create,
        )?
        else {
            return Ok(None);
        };
        self.mem().note_file(&f);
        files.insert((server, device), Arc::clone(&f));
        Ok(Some(f))
    }

    /// Device memory per device, in bytes.
    pub fn device_memory(&self) -> u64 {
        self.mem().capacity
    }

    /// `aclrtGetMemInfo`: (free, total) bytes of `device`'s memory. What only dead processes
    /// held is free (a device's driver frees a process's memory when it dies; here an
    /// allocation that runs short would reclaim it): reclaimed before counting, as
    /// `notifies_free` does with notify ids.
    pub fn mem_info(&self, device: u32) -> Result<(u64, u64), SimError> {
        self.mem_checked(|| {
            self.device_ok(device)?;
            let total = self.mem().capacity;
            let used = match self.mem_file(self.inner.server_id, device, false)? {
                Some(f) if f.used() > 0 => {
                    f.reclaim_dead(&f.lock()?);
                    f.used()
                }
                _ => 0,
            };
            Ok((total - used.min(total), total))
        })
    }
}

#[cfg(test)]
mod tests;

//! What an address is to this process — device memory of which device, host memory the
//! runtime knows, or memory it does not — as CANN's driver answers `aclrtPointerGetAttributes`
//! (hicann/runtime `src/runtime/driver/npu_driver_mem.cc`, `NpuDriver::PtrGetAttributes`:
//! locked device memory is `DEVICE` with its device's id, locked host memory and registered
//! user memory `HOST` with id 0, other user memory `UNREGISTERED`), and what
//! `aclrtCheckMemType` and `aclrtMemsetD32` ask of it.

use super::At;
use super::vmm::PHYS_MARK;
use crate::Sim;
use crate::mem::vmm::PageSize;

/// Where an address is, as `aclrtPtrAttributes` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemLocation {
    /// In live device memory this process may use (its allocation, an import, a mapping of
    /// a reserved range, another host's memory it imported): the memory's device and page
    /// size. `reserved`: the address is in a reserved range (`aclrtReserveMemAddress`);
    /// `managed`: managed memory (`aclrtMemAllocManaged`, [`super::managed`]), which host code
    /// addresses too.
    Device {
        device: u32,
        page_size: u32,
        reserved: bool,
        managed: bool,
    },
    /// Host memory the runtime knows: `aclrtMallocHost` memory.
    Host { page_size: u32 },
    /// A part of a reserved range that nothing is mapped at: unregistered memory to
    /// `aclrtPointerGetAttributes`, reserved memory to `aclrtCheckMemType`.
    Unmapped,
    /// Anything else: host memory the runtime does not know, freed memory, a device address
    /// no live allocation covers.
    Unregistered,
}

/// Host pages.
const HOST_PAGE: u32 = 4096;

/// The page size of device memory allocated with `policy` (the word kept in its slot): a
/// physical allocation's own page size; for `aclrtMalloc`'s policies (hicann/runtime
/// `acl_rt.h`, `aclrtMemMallocPolicy`) huge pages unless `_NORMAL_ONLY` (ours: the simulated
/// device always has huge pages, so `_HUGE_FIRST` gets them), 1 GiB for `_HUGE1G_ONLY`.
fn page_of(policy: u32) -> u32 {
    let page = if policy & PHYS_MARK != 0 {
        PageSize::from_code((policy >> 8) & 0xFF).unwrap_or(PageSize::Normal)
    } else {
        match policy & 0xFF {
            2 | 5 => PageSize::Normal,
            6 | 7 => PageSize::Huge1G,
            _ => PageSize::Huge,
        }
    };
    page.bytes() as u32
}

impl Sim {
    /// What `addr` is to this process (see [`MemLocation`]).
    pub fn mem_location(&self, addr: usize) -> MemLocation {
        let (at, reserved) = match self.vmm_pieces(addr, 1, "ptr") {
            Ok(Some(p)) => match p.first() {
                Some(p) => (p.at, true),
                None => return MemLocation::Unmapped,
            },
            Ok(None) => (addr, false),
            // In a reserved range, but nothing is mapped there.
            Err(_) => return MemLocation::Unmapped,
        };
        match self.alloc_at(at) {
            At::Alloc(_, a) if a.current() => {
                let policy = a.file.slot(a.id).map_or(0, |s| s.flag_bits());
                return MemLocation::Device {
                    device: a.file.device(),
                    page_size: page_of(policy),
                    reserved,
                    managed: policy & super::managed::MANAGED_MARK != 0,
                };
            }
            At::Alloc(..) | At::Unallocated => {
                if let Some(device) = self.remote_device_at(at) {
                    return MemLocation::Device {
                        device,
                        page_size: page_of(0),
                        reserved,
                        managed: false,
                    };
                }
                return MemLocation::Unregistered;
            }
            At::Host => {}
        }
        if self.mem().host.block_at(at).is_some() {
            return MemLocation::Host {
                page_size: HOST_PAGE,
            };
        }
        MemLocation::Unregistered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_follow_the_policy_or_the_physical_allocations_page() {
        assert_eq!(page_of(0), 2 << 20, "HUGE_FIRST");
        assert_eq!(page_of(2), 4096, "NORMAL_ONLY");
        assert_eq!(
            page_of(5 | 0x100),
            4096,
            "NORMAL_ONLY_P2P with a bandwidth bit"
        );
        assert_eq!(page_of(6), 1 << 30, "HUGE1G_ONLY");
        assert_eq!(
            page_of(PHYS_MARK),
            4096,
            "a physical allocation of normal pages"
        );
        assert_eq!(page_of(PHYS_MARK | 1 << 8 | 3), 2 << 20);
    }
}

//! Host memory a program did not get from `aclrtMallocHost` (its stack, `malloc`) handed to a
//! synchronous `aclrtMemset`. CANN documents only `aclrtMallocHost` memory there (other host
//! memory is undefined behaviour: hicann/runtime `docs/zh/api_ref/11-03_memory_copy_and_set.md`),
//! yet its own sample 12 (`example/1_basic_features/memory/12_cross_server_physical_memory_
//! sharing_withoutpid`, server.cpp and client.cpp) clears a `sockaddr_in` on its stack with it,
//! and succeeds on hardware. Such a range is accepted when the process's own memory map
//! (`/proc/self/maps`) shows it in writable mappings, so a wild pointer is still 107000, never
//! a fault.

/// Whether `[addr, addr + len)` lies in writable mappings of this process, end to end.
pub(super) fn writable(addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    // The maps are sorted: walk them, extending the covered run while they are contiguous.
    let mut at = addr;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
        else {
            continue;
        };
        if hi <= at {
            continue;
        }
        if lo > at || !perms.starts_with("rw") {
            return false;
        }
        at = hi;
        if at >= end {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_buffer_is_writable_and_a_wild_pointer_is_not() {
        let buf = [0u8; 64];
        assert!(writable(buf.as_ptr() as usize, buf.len()));
        assert!(!writable(8, 16));
        assert!(!writable(usize::MAX - 4, 16));
        // Code is mapped, but not writable.
        let code = writable as fn(usize, usize) -> bool as usize;
        assert!(!writable(code, 1));
    }
}

//! Valgrind's memcheck told that a device-memory arena is no host memory: the leak check at
//! the end of a process run under memcheck must not read it.
//!
//! # Why
//!
//! Memcheck's leak check reads every readable and writable mapping of the process for
//! pointers into the heap, word by word. A device-memory file's arena ([`crate::mem`]) is
//! such a mapping: shared, of a sparse `/dev/shm` file the size of the device's memory
//! (32 GiB by default), whose pages are backed only while allocations live. A read of a
//! hole in a shared mapping of a tmpfs file gives the hole a page, so the leak check of a
//! process that ends with a device file still mapped (one that never calls `aclFinalize`:
//! a failed check's `exit`, a forked child) filled `/dev/shm` with the whole arena: seen
//! with `model_flow` and `managed` under memcheck (3–20 GB backed when killed, the
//! machine's memory exhausted), and a 1 GiB arena fully backed by one such exit.
//!
//! # How
//!
//! Valgrind's client requests (`valgrind/valgrind.h`, `valgrind/memcheck.h`): a special
//! instruction sequence that does nothing on a real CPU (rotations of a register by 128 bits
//! in all, then a no-op exchange or `orr`) and that valgrind recognises, reading the request
//! from memory the second register points at. [`hide_arena`] marks the range inaccessible
//! (`MAKE_MEM_NOACCESS`: the leak check skips inaccessible memory without reading it) and
//! turns off the addressing errors the simulator's own copies into it would then raise
//! (`DISABLE_ADDR_ERROR_REPORTING_IN_RANGE`); [`unhide_arena`] turns them on again before
//! the range is unmapped. Outside valgrind each is a handful of register operations. On CPUs
//! other than x86-64 and AArch64 they do nothing.

/// `VG_USERREQ_TOOL_BASE('M', 'C')`: memcheck's first request.
const MEMCHECK: usize = ((b'M' as usize) << 24) | ((b'C' as usize) << 16);
/// `VG_USERREQ__MAKE_MEM_NOACCESS`.
const MAKE_MEM_NOACCESS: usize = MEMCHECK;
/// `VG_USERREQ__ENABLE_ADDR_ERROR_REPORTING_IN_RANGE`.
const ENABLE_ADDR_ERRORS: usize = MEMCHECK + 13;
/// `VG_USERREQ__DISABLE_ADDR_ERROR_REPORTING_IN_RANGE`.
const DISABLE_ADDR_ERRORS: usize = MEMCHECK + 14;

/// Marks `[addr, addr + len)` (a device-memory arena mapped by this process) as no memory
/// the leak check reads, and the simulator's accesses to it as no errors. No effect outside
/// valgrind.
pub(crate) fn hide_arena(addr: usize, len: usize) {
    request(DISABLE_ADDR_ERRORS, addr, len);
    request(MAKE_MEM_NOACCESS, addr, len);
}

/// Undoes [`hide_arena`]'s error suppression for a range about to be unmapped (the unmap
/// itself makes it inaccessible), so that a later mapping at those addresses is checked.
pub(crate) fn unhide_arena(addr: usize, len: usize) {
    request(ENABLE_ADDR_ERRORS, addr, len);
}

/// Valgrind client request `code` with two arguments; its answer (0 outside valgrind).
#[inline(never)]
fn request(code: usize, a1: usize, a2: usize) -> usize {
    let args: [usize; 6] = [code, a1, a2, 0, 0, 0];
    let mut answer: usize = 0;
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: on a CPU, the four rotations of rdi add up to 128 bits (rdi unchanged) and
    // `xchg rbx, rbx` changes nothing: only the flags change, which `asm!` assumes. Under
    // valgrind the sequence is a client request: valgrind reads the six words `args` (alive
    // and initialised here, read only) and writes its answer to rdx, declared as an output.
    unsafe {
        core::arch::asm!(
            "rol rdi, 3",
            "rol rdi, 13",
            "rol rdi, 61",
            "rol rdi, 51",
            "xchg rbx, rbx",
            inout("rdx") answer,
            in("rax") args.as_ptr(),
            options(nostack, readonly),
        );
    }
    #[cfg(all(target_arch = "aarch64", not(miri)))]
    // SAFETY: on a CPU, the four rotations of x12 add up to 128 bits (x12 unchanged) and
    // `orr x10, x10, x10` changes nothing. Under valgrind the sequence is a client request:
    // valgrind reads the six words `args` (alive, initialised, read only) through x4 and
    // writes its answer to x3, declared as an output.
    unsafe {
        core::arch::asm!(
            "ror x12, x12, #3",
            "ror x12, x12, #13",
            "ror x12, x12, #51",
            "ror x12, x12, #61",
            "orr x10, x10, x10",
            inout("x3") answer,
            in("x4") args.as_ptr(),
            options(nostack, readonly, preserves_flags),
        );
    }
    let _ = &args;
    answer
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Outside valgrind a request answers its default (0) and changes nothing: the ranges
    /// are plain numbers, never dereferenced.
    #[test]
    fn outside_valgrind_a_request_does_nothing() {
        let buf = [7u8; 64];
        hide_arena(buf.as_ptr().addr(), buf.len());
        unhide_arena(buf.as_ptr().addr(), buf.len());
        assert_eq!(buf, [7u8; 64]);
        assert_eq!(request(MAKE_MEM_NOACCESS, 0, 0), 0);
    }
}

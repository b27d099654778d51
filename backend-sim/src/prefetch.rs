//! A hint to the CPU to bring a cache line in for writing, ahead of a write (`prefetchw` on
//! x86-64 where the CPU has it, `prefetcht0` otherwise; `prfm pstl1keep` on AArch64). Used where
//! a line will be written soon that another CPU has most likely touched last: a notify's flag
//! before the task that records or waits on it (`job`), the slot a stream's queue will hand a
//! producer a few tasks later (`ring`). And its counterpart for a line that will be read
//! ([`prefetch_for_read`]: the slots a stream's worker takes next, `ring`).

use std::sync::atomic::Ordering;

/// Hints the CPU to bring `p`'s cache line in, exclusive (for a write). A hint only: it does
/// not access memory architecturally, cannot fault, and changes no register or flag.
#[inline(always)]
pub(crate) fn prefetch_for_write(p: *const u8) {
    prefetch_with(hint(), p);
}

/// Hints the CPU to bring `p`'s cache line in, shared (for a read: another CPU that writes the
/// line keeps it without a transfer back): `prefetcht0` on x86-64, `prfm pldl1keep` on
/// AArch64. A hint only, as [`prefetch_for_write`]. Not in the loom models (the ring there
/// does not prefetch).
#[cfg(not(sim_loom))]
#[inline(always)]
pub(crate) fn prefetch_for_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64; `prefetcht0` is a hint (see above).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `prfm` is a hint (see above).
    unsafe {
        core::arch::asm!(
            "prfm pldl1keep, [{0}]",
            in(reg) p,
            options(nostack, preserves_flags, readonly)
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

/// Which instruction [`prefetch_for_write`] uses on this CPU: for a hot caller that asks once
/// and keeps the answer beside what it reads anyway (a ring, `Ring::new`), instead of a load
/// of the process-wide answer and its tests at every prefetch (about 6 instructions a
/// record's push, callgrind).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hint {
    /// No prefetch.
    Off,
    /// `prefetcht0` (x86-64 without `prefetchw`).
    Read,
    /// `prefetchw` (x86-64), `prfm pstl1keep` (AArch64).
    Write,
}

/// The [`Hint`] for this CPU.
#[inline(always)]
pub(crate) fn hint() -> Hint {
    #[cfg(target_arch = "x86_64")]
    return if has_prefetchw() {
        Hint::Write
    } else {
        Hint::Read
    };
    #[cfg(target_arch = "aarch64")]
    return Hint::Write;
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    return Hint::Off;
}

/// [`prefetch_for_write`] with the instruction `hint` says (a hint only, as there).
#[inline(always)]
pub(crate) fn prefetch_with(hint: Hint, p: *const u8) {
    match hint {
        Hint::Off => {}
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `prefetchw` is a hint (see above); `Hint::Write` on x86-64 only when the CPU
        // has it (`hint`).
        Hint::Write => unsafe {
            core::arch::asm!(
                "prefetchw [{0}]",
                in(reg) p,
                options(nostack, preserves_flags, readonly)
            );
        },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: SSE is part of x86_64; `prefetcht0` is a hint (see above).
        Hint::Read => unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
        },
        #[cfg(target_arch = "aarch64")]
        // SAFETY: `prfm` is a hint (see above).
        Hint::Write | Hint::Read => unsafe {
            core::arch::asm!(
                "prfm pstl1keep, [{0}]",
                in(reg) p,
                options(nostack, preserves_flags, readonly)
            );
        },
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        Hint::Write | Hint::Read => {
            let _ = p;
        }
    }
}

/// Whether this x86 CPU has `prefetchw` (CPUID 8000_0001h, ECX bit 8), asked once. Inlined:
/// a record's push asks it, and a call cost the record 8 instructions (callgrind). The first
/// look is inline too (`cpuid`, no call): a call on its branch made the worker's job prefetch
/// save and restore five registers every time (19 → 31 instructions, callgrind).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn has_prefetchw() -> bool {
    // 0: not asked yet, 1: no, 2: yes. Not a `OnceLock`: a child forked while another thread
    // asked would wait for it for ever (see [`fork`]); threads that race each ask.
    static HAS: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
    match HAS.load(Ordering::Relaxed) {
        0 => {
            // Leaf 0x8000_0000 gives the highest extended leaf: 0x8000_0001 is only asked for
            // when it exists.
            let max = core::arch::x86_64::__cpuid(0x8000_0000).eax;
            let has =
                max >= 0x8000_0001 && core::arch::x86_64::__cpuid(0x8000_0001).ecx & (1 << 8) != 0;
            HAS.store(1 + u8::from(has), Ordering::Relaxed);
            has
        }
        v => v == 2,
    }
}

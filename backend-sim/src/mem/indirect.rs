//! Device-to-device copies, and cache maintenance operations, on a stream whose addresses and
//! sizes may be read from device memory when the task runs: CANN's "two-level pointer" copies (hicann/runtime
//! `docs/zh/api_ref/11-03_memory_copy_and_set.md`: `aclrtMemcpyAsyncWithOffset`, whose `dst`
//! and `src` point at device words holding the base addresses, and `aclrtMemcpyAsyncWithDesc`,
//! whose descriptor in device memory holds source, destination and count;
//! `src/runtime/api/api_c_standard_soc.cc` `rtMemcpyD2DAddrAsync`, the `ADDR_DEVICE_TO_DEVICE`
//! kind); and `aclrtCmoAsyncWithDesc`, whose descriptor holds the range of a cache operation
//! (`docs/zh/api_ref/11-06_CMO_memory_operation.md`). A task queued before this one may write
//! those words, so they are read when the task runs, in stream order, as on the device. The
//! simulator's memory is coherent: a cache operation moves nothing, but its range is checked
//! when it runs like a copy's.
//!
//! The words and the ranges they name are checked as every queued copy's are (a live
//! allocation, the range inside it, the slot still the same incarnation), against the
//! allocations this process holds when the task runs, as the device resolves them then: the
//! task shares the `Sim`'s table of allocations (not the `Sim`, which a task must not hold),
//! so memory allocated after the copy was queued is reached, and memory freed before it runs
//! fails the task with 107000.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use acl_notify_core::{Error, RawStream};

use super::state::Alloc;
use super::{checked_offset, covering, within};
use crate::Sim;
use crate::error::SimError;
use crate::job::SimJob;
use crate::stream::TaskCtx;

/// One operand of an indirect copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    /// This value, as given.
    Given(u64),
    /// The little-endian 64-bit word at this device address, read when the task runs, plus
    /// an offset.
    At(usize, u64),
    /// The little-endian 32-bit word at this device address, read when the task runs.
    At32(usize),
}

/// What [`Sim::produce_async`] runs: the words' values in, the bytes to write out.
pub type Produce = Box<dyn FnOnce(&[u64]) -> Result<Vec<u8>, SimError> + Send>;

/// What [`Sim::read_async`] hands the words' values to when its task runs.
pub type Reader = Box<dyn FnOnce(Result<&[u64], &SimError>) + Send>;

/// The most bytes one such copy moves (`MAX_MEMCPY_SIZE_OF_D2D`, hicann/runtime
/// `src/runtime/core/inc/spec/base_info.hpp`).
pub const INDIRECT_MAX: u64 = 4 << 30;

/// The process's device allocations by device address: the `Sim`'s table, looked up when
/// the task runs.
struct Table(Arc<RwLock<BTreeMap<usize, Alloc>>>);

impl Table {
    /// The allocation and offset of the device range `[addr, addr + len)`, checked as a
    /// call's range is ([`checked_offset`]) against the table when the task runs.
    fn range(&self, addr: usize, len: u64, what: &str) -> Result<(Alloc, u64), SimError> {
        let allocs = self.0.read().unwrap_or_else(PoisonError::into_inner);
        let Some((base, a)) = covering(&allocs, addr) else {
            return Err(SimError::new(
                Error::ParamInvalid,
                format!(
                    "{what} {addr:#x} is in no device allocation of this process when the task \
                     runs (freed before it ran, or never device memory)"
                ),
            ));
        };
        let a = a.clone();
        drop(allocs);
        let off = checked_offset(&a.view(), base, addr, len as usize, what)?;
        Ok((a, off))
    }

    /// An operand's value now.
    fn read(&self, w: Word, what: &str) -> Result<u64, SimError> {
        match w {
            Word::Given(v) => Ok(v),
            Word::At32(at) => {
                let (a, off) = self.range(at, 4, what)?;
                // SAFETY: 4 bytes of a checked range of a mapped allocation; read unaligned.
                let v = unsafe { a.file.bytes(off, 4).cast::<u32>().read_unaligned() };
                a.file.intact()?;
                Ok(u64::from(v))
            }
            Word::At(at, plus) => {
                let (a, off) = self.range(at, 8, what)?;
                // SAFETY: 8 bytes of a checked range of a mapped allocation; read unaligned.
                let v = unsafe { a.file.bytes(off, 8).cast::<u64>().read_unaligned() };
                a.file.intact()?;
                v.checked_add(plus).ok_or_else(|| {
                    SimError::new(
                        Error::ParamInvalid,
                        format!("{what} {v:#x} at {at:#x} plus the offset {plus} overflows"),
                    )
                })
            }
        }
    }
}

impl Sim {
    /// 107000 unless every word read from device memory is in a live allocation now.
    fn words_ok(&self, words: &[(Word, &str)]) -> Result<(), SimError> {
        for &(w, what) in words {
            let (at, len) = match w {
                Word::Given(_) => continue,
                Word::At(at, _) => (at, 8),
                Word::At32(at) => (at, 4),
            };
            self.range_ref(at, len, what)?.ok_or_else(|| {
                SimError::new(
                    Error::ParamInvalid,
                    format!("the {what} {at:#x} is not device memory"),
                )
            })?;
        }
        Ok(())
    }

    /// The process's device allocations, for a task to resolve addresses in when it runs.
    fn table(&self) -> Table {
        Table(Arc::clone(&self.mem().allocs))
    }

    /// Queues on `stream` a cache maintenance operation on the device range of `len` bytes
    /// at `src` (each given or read when the task runs, [`Word`]): nothing to do in coherent
    /// memory but to check, in stream order, that the range is in a live allocation. A given
    /// range is checked now too.
    ///
    /// Errors: 107000 a given range or a word outside live device memory; the stream's. The
    /// task fails with 107000 for a range outside the allocations held when it runs.
    pub fn cmo_async(&self, src: Word, len: Word, stream: RawStream) -> Result<(), SimError> {
        self.mem_checked(|| {
            self.words_ok(&[(src, "address word"), (len, "size word")])?;
            if let (Word::Given(a), Word::Given(l)) = (src, len) {
                self.range_ref(a as usize, l as usize, "range")?.ok_or_else(|| {
                    SimError::new(
                        Error::ParamInvalid,
                        format!("{a:#x} is not device memory (a cache operation takes device memory)"),
                    )
                })?;
            }
            let table = self.table();
            let task = Box::new(move |_: &TaskCtx| {
                let a = table.read(src, "address")? as usize;
                let l = table.read(len, "size")?;
                let args = || serde_json::json!({"addr": a, "bytes": l});
                crate::trace::span("memory", "cmo", args, || table.range(a, l, "range").map(drop))
            });
            self.enqueue_checked(stream, SimJob::Bulk(task), |_, _| Ok(()))
        })
    }

    /// Queues on `stream` a task that, when it runs, reads `words` ([`Word`]), hands their
    /// values to `make`, and writes the bytes it returns to device memory at `dst` (checked
    /// then: a live allocation holding them all). For device work whose result is computed
    /// from operands that earlier tasks of the stream may write (`aclrtRandomNumAsync`).
    ///
    /// Errors: 107000 `dst` or a word not in live device memory now; the stream's. The task
    /// fails with `make`'s error, or 107000 for a range outside the allocations held when it
    /// runs.
    pub fn produce_async(
        &self,
        dst: usize,
        words: Vec<(Word, &'static str)>,
        make: Produce,
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            self.range_ref(dst, 1, "destination")?.ok_or_else(|| {
                SimError::new(
                    Error::ParamInvalid,
                    format!("the destination {dst:#x} is not device memory"),
                )
            })?;
            self.words_ok(&words)?;
            let table = self.table();
            let task = Box::new(move |_: &TaskCtx| {
                let values = words
                    .iter()
                    .map(|&(w, what)| table.read(w, what))
                    .collect::<Result<Vec<u64>, SimError>>()?;
                let bytes = make(&values)?;
                if bytes.is_empty() {
                    return Ok(());
                }
                let (a, off) = table.range(dst, bytes.len() as u64, "destination")?;
                let args = || serde_json::json!({"dst": dst, "bytes": bytes.len()});
                crate::trace::span("memory", "produce", args, || {
                    // SAFETY: a checked range of a mapped allocation (kept by the table's
                    // files), `bytes.len()` long.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            bytes.as_ptr(),
                            a.file.bytes(off, bytes.len()),
                            bytes.len(),
                        )
                    };
                    Ok::<(), SimError>(())
                })?;
                a.file.intact()
            });
            self.enqueue_checked(stream, SimJob::Bulk(task), |_, _| Ok(()))
        })
    }

    /// Queues on `stream` a task that, when it runs, reads `words` ([`Word`]) and hands their
    /// values (or the error reading them) to `then`: for a decision the C layer takes in
    /// stream order from device memory earlier tasks may write (a model's run-time control
    /// flow, `aclrtSwitchStream`, `aclrtSwitchLabelByIndex`). `then` must not block.
    ///
    /// Errors: 107000 a word not in live device memory now; the stream's. The task fails with
    /// the read's error (107000: a word outside the allocations held when it was queued, or
    /// freed since); a task dropped unrun drops `then` uncalled.
    pub fn read_async(
        &self,
        words: Vec<(Word, &'static str)>,
        then: Reader,
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            self.words_ok(&words)?;
            let table = self.table();
            let task = Box::new(move |_: &TaskCtx| {
                let values = words
                    .iter()
                    .map(|&(w, what)| table.read(w, what))
                    .collect::<Result<Vec<u64>, SimError>>();
                match values {
                    Ok(v) => {
                        then(Ok(&v));
                        Ok(())
                    }
                    Err(e) => {
                        then(Err(&e));
                        Err(e)
                    }
                }
            });
            self.enqueue_checked(stream, SimJob::Other(task), |_, _| Ok(()))
        })
    }

    /// Queues on `stream` a device-to-device copy of `count` bytes from `src` to `dst`, each
    /// operand given or read from device memory when the task runs ([`Word`]); `dest_max`
    /// bounds the count (`None`: no bound but [`INDIRECT_MAX`]). Words at device addresses are
    /// checked now (8 bytes of a live allocation); what they hold, when the task runs.
    ///
    /// Errors: 107000 a word not in a live allocation, a given count above `dest_max` or
    /// [`INDIRECT_MAX`]; the stream's (107017, 107003, 507002). The task fails with 107000
    /// for a range outside the allocations held when it runs, or a
    /// count read above the bounds.
    pub fn memcpy_indirect_async(
        &self,
        dst: Word,
        dest_max: Option<usize>,
        src: Word,
        count: Word,
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            let bound = move |c: u64| -> Result<usize, SimError> {
                if c > INDIRECT_MAX {
                    return Err(SimError::new(
                        Error::ParamInvalid,
                        format!("count {c} is above {INDIRECT_MAX}, the most one copy moves"),
                    ));
                }
                let c = c as usize;
                if let Some(m) = dest_max {
                    within(c, m, "destMax")?;
                }
                Ok(c)
            };
            if let Word::Given(c) = count {
                bound(c)?;
            }
            for (w, what) in [
                (dst, "destination word"),
                (src, "source word"),
                (count, "count word"),
            ] {
                if let Word::At(at, _) = w {
                    self.range_ref(at, 8, what)?.ok_or_else(|| {
                        SimError::new(
                            Error::ParamInvalid,
                            format!("the {what} {at:#x} is not device memory"),
                        )
                    })?;
                }
            }
            let table = self.table();
            let task = Box::new(move |_: &TaskCtx| {
                let count = bound(table.read(count, "count")?)?;
                let d = table.read(dst, "destination address")? as usize;
                let s = table.read(src, "source address")? as usize;
                if count == 0 {
                    return Ok(());
                }
                let (da, doff) = table.range(d, count as u64, "destination")?;
                let (sa, soff) = table.range(s, count as u64, "source")?;
                let args = || serde_json::json!({"dst": d, "src": s, "bytes": count});
                crate::trace::span("memory", "memcpy", args, || {
                    // SAFETY: checked ranges of mapped allocations (kept by the table's
                    // files); `copy` allows overlap, as `memcpy` does.
                    unsafe {
                        std::ptr::copy(
                            sa.file.bytes(soff, count),
                            da.file.bytes(doff, count),
                            count,
                        )
                    };
                    Ok::<(), SimError>(())
                })?;
                da.file.intact()?;
                sa.file.intact()
            });
            self.enqueue_checked(stream, SimJob::Bulk(task), |_, _| Ok(()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::MemcpyKind;
    use crate::mem::tests::{d2h, h2d};
    use acl_notify_core::{BackendError as _, StreamOps, SyncWait};

    #[test]
    fn the_words_are_read_when_the_copy_runs_in_stream_order() {
        let (sim, _guard) = crate::mem::tests::test_sim(
            "indirect",
            "order",
            acl_notify_core::Soc::Ascend910B,
            1,
            16 << 20,
        );
        let s = sim.create_stream(0).unwrap();
        let (a, b, words) = (
            sim.malloc(0, 256, 0).unwrap(),
            sim.malloc(0, 256, 0).unwrap(),
            sim.malloc(0, 16, 0).unwrap(),
        );
        let data: Vec<u8> = (0..=255u8).collect();
        let zeros = [0u8; 16];
        h2d(&sim, a, &data).unwrap();
        h2d(&sim, words, &zeros).unwrap();
        // The words are 0 now; a copy queued before the indirect one writes them.
        let ptrs = [a as u64, b as u64];
        // SAFETY: `ptrs` outlives the synchronize.
        unsafe {
            sim.memcpy_async(
                words,
                16,
                ptrs.as_ptr().addr(),
                16,
                MemcpyKind::HostToDevice,
                s,
            )
            .unwrap();
        }
        sim.memcpy_indirect_async(
            Word::At(words + 8, 100),
            Some(28),
            Word::At(words, 10),
            Word::Given(28),
            s,
        )
        .unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        let mut out = [0u8; 256];
        d2h(&sim, &mut out, b).unwrap();
        assert_eq!(&out[100..128], &data[10..38]);
        assert!(out[..100].iter().chain(&out[128..]).all(|&x| x == 0));
        // A count above destMax is refused at the call; a range read past its allocation
        // fails the task.
        let e = sim
            .memcpy_indirect_async(
                Word::At(words + 8, 0),
                Some(8),
                Word::At(words, 0),
                Word::Given(9),
                s,
            )
            .unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
        sim.memcpy_indirect_async(
            Word::At(words + 8, 250),
            None,
            Word::At(words, 0),
            Word::Given(8),
            s,
        )
        .unwrap();
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert!(e.to_string().contains("leaves allocation"), "{e}");
        // A word outside device memory is refused at the call.
        let host = [0u64; 1];
        let e = sim
            .memcpy_indirect_async(
                Word::At(host.as_ptr().addr(), 0),
                None,
                Word::At(words, 0),
                Word::Given(8),
                s,
            )
            .unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid);
    }

    /// The addresses a copy reads are resolved among the allocations live when it runs, as the
    /// device resolves them: memory allocated after the copy was queued, whose address an
    /// earlier step wrote into the words, is reached (107000 "held when the copy was queued"
    /// until 2026-12-06); memory freed before it runs is refused.
    #[test]
    fn the_words_may_name_memory_allocated_after_the_copy_was_queued() {
        use acl_notify_core::{CreateFlags, NotifyResources as _, Timeout};
        let (sim, _guard) = crate::mem::tests::test_sim(
            "indirect",
            "late",
            acl_notify_core::Soc::Ascend910B,
            1,
            16 << 20,
        );
        let (s, gate) = (sim.create_stream(0).unwrap(), sim.create_stream(0).unwrap());
        let go = sim.create_notify(0, CreateFlags::empty()).unwrap();
        let (a, words) = (sim.malloc(0, 64, 0).unwrap(), sim.malloc(0, 16, 0).unwrap());
        let data: Vec<u8> = (1..=64u8).collect();
        h2d(&sim, a, &data).unwrap();
        sim.wait_and_reset(go, s, Timeout::Forever).unwrap();
        sim.memcpy_indirect_async(
            Word::At(words + 8, 0),
            None,
            Word::At(words, 0),
            Word::Given(64),
            s,
        )
        .unwrap();
        // Allocated after the copy was queued, named by the words before it runs.
        let late = sim.malloc(0, 64, 0).unwrap();
        let ptrs = [a as u64, late as u64];
        let ptrs: Vec<u8> = ptrs.iter().flat_map(|p| p.to_ne_bytes()).collect();
        h2d(&sim, words, &ptrs).unwrap();
        sim.record(go, gate).unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        let mut out = [0u8; 64];
        d2h(&sim, &mut out, late).unwrap();
        assert_eq!(&out[..], &data[..]);
        // Freed after the copy was queued, before it ran: refused when it runs.
        sim.wait_and_reset(go, s, Timeout::Forever).unwrap();
        sim.memcpy_indirect_async(
            Word::At(words + 8, 0),
            None,
            Word::At(words, 0),
            Word::Given(64),
            s,
        )
        .unwrap();
        sim.free(late).unwrap();
        sim.record(go, gate).unwrap();
        let e = sim.synchronize(s, SyncWait::Forever).unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{e}");
    }
}

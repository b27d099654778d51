//! Copies and sets, synchronous and queued on streams (`aclrtMemcpy[Async]`,
//! `aclrtMemset[Async]`): each side as its address is, the copy's kind judged from both
//! sides, the peer access a copy between devices needs, and the files a queued task keeps.

use std::sync::Arc;

use acl_notify_core::{BackendError as _, Error, RawStream};

use super::file::MemFile;
use super::queued::QueuedSide;
use super::range::RangeRef;
use super::{AsyncCopy, direction, plain_host, queued, reserved, unqueued, within};
use crate::Sim;
use crate::error::SimError;
use crate::job::{SimJob, SimStream};
use crate::locks::lock;
use crate::stream::TaskCtx;

/// The direction of a copy (`aclrtMemcpyKind`, after the C layer refused the kinds CANN's
/// `aclrtMemcpy` refuses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemcpyKind {
    /// Both host memory.
    HostToHost,
    /// Host to device.
    HostToDevice,
    /// Device to host.
    DeviceToHost,
    /// Both device memory.
    DeviceToDevice,
    /// Each side is what its address is.
    Default,
}

/// One side of a copy.
#[derive(Clone, Copy, Debug)]
pub(super) enum Side<'s> {
    Host(usize),
    Device(RangeRef<'s>),
}

impl Side<'_> {
    pub(super) fn ptr(&self) -> *mut u8 {
        match self {
            Side::Host(a) => std::ptr::with_exposed_provenance_mut(*a),
            Side::Device(r) => r.ptr(),
        }
    }
}

impl Sim {
    /// Keeps `file` alive for the tasks of `stream` (see `queued`): found among the stream's
    /// kept values without a lock once it is there.
    #[inline]
    pub(super) fn keep_file(&self, stream: &SimStream, file: &MemFile) -> Result<(), SimError> {
        if stream.keeps(file) {
            return Ok(());
        }
        self.keep_file_slow(stream, file)
    }

    #[inline(never)]
    fn keep_file_slow(&self, stream: &SimStream, file: &MemFile) -> Result<(), SimError> {
        stream.keep_alive(&self.mem().file_of(file)?);
        Ok(())
    }

    /// One side of a copy, as its address is: device memory (a range of a live allocation,
    /// checked) or host memory. What the copy's kind says of it is judged from both sides
    /// ([`direction`]).
    #[inline(always)]
    pub(super) fn side(&self, addr: usize, len: usize, what: &str) -> Result<Side<'_>, SimError> {
        match self.range_ref(addr, len, what)? {
            Some(r) => Ok(Side::Device(r)),
            None => {
                self.mem().host.alias_refused(addr, what)?;
                Ok(Side::Host(addr))
            }
        }
    }

    /// The kind CANN's runtime makes of a copy between the checked sides `d` (at `dst`,
    /// placed `pd`) and `s` ([`direction::resolve`]).
    pub(super) fn copy_kind(
        kind: MemcpyKind,
        (d, pd, dst): (&Side<'_>, unqueued::Place, usize),
        (s, ps, src): (&Side<'_>, unqueued::Place, usize),
    ) -> Result<MemcpyKind, SimError> {
        let managed = |x: &Side<'_>| matches!(x, Side::Device(r) if Self::is_managed(&r.alloc));
        direction::resolve(kind, (pd, dst), (ps, src), || managed(d) || managed(s))
    }

    #[inline(always)]
    pub(super) fn copy_sides(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
    ) -> Result<(Side<'_>, Side<'_>), SimError> {
        within(count, dest_max, "destMax")?;
        self.copy_sides_of(dst, count, src, count, kind)
    }

    /// The sides of a copy whose destination spans `dst_len` bytes and source `src_len`
    /// (different for a 2-D copy; [`pitched`]), each as its address is; `kind` is the
    /// caller's, for the rule of imported memory below.
    #[inline(always)]
    pub(super) fn copy_sides_of(
        &self,
        dst: usize,
        dst_len: usize,
        src: usize,
        src_len: usize,
        kind: MemcpyKind,
    ) -> Result<(Side<'_>, Side<'_>), SimError> {
        let d = self.side(dst, dst_len, "destination")?;
        let s = self.side(src, src_len, "source")?;
        // CANN documents (hicann/runtime docs/zh/api_ref/11-07_IPC_memory_sharing.md) that
        // memory imported onto another device than its own takes no host-to-device or
        // device-to-host copy, and no ACL_MEMCPY_DEFAULT: on hardware such a copy fails, so
        // here it does too.
        let cross = |x: &Side<'_>| match x {
            Side::Device(r) if r.alloc.cross_device() => {
                Some((r.addr, r.alloc.file.device(), r.alloc.used_on))
            }
            _ => None,
        };
        if let Some((side, what)) = cross(&d)
            .map(|c| (c, "destination"))
            .or_else(|| cross(&s).map(|c| (c, "source")))
            && (kind != MemcpyKind::DeviceToDevice
                || matches!((&d, &s), (Side::Host(_), _) | (_, Side::Host(_))))
        {
            return Err(cross_device_refused(side, what));
        }
        Ok((d, s))
    }

    /// `aclrtMemcpy`: copies `count` bytes from `src` to `dst` (`count <= dest_max`), each
    /// side as its address is, whatever `kind` says (CANN's synchronous copy does not look at
    /// it: `mem::direction`). Overlapping ranges are copied as `memmove` does.
    ///
    /// Errors: 107000 count > dest_max, a device range outside this process's live
    /// allocations.
    ///
    /// # Safety
    ///
    /// Every host side must be valid for `count` bytes (read for the source, written for the
    /// destination) for the duration of the call.
    pub unsafe fn memcpy(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(());
            }
            // Memory of another host (cluster mode) goes through the cluster.
            if let Some(r) = self.remote_memcpy(dst, dest_max, src, count, kind, None) {
                return r;
            }
            if let Some(r) = self.vmm_memcpy(dst, dest_max, src, count, kind, None, false) {
                return r.map(drop);
            }
            let (d, s) = self.copy_sides(dst, dest_max, src, count, kind)?;
            self.peer_copy_ok(&d, &s)?;
            // SAFETY: device sides are checked ranges of mapped allocations; host sides are the
            // caller's contract. `copy` allows overlap. Other processes may write the same device
            // bytes meanwhile, as on hardware: the bytes are plain data, never references.
            unsafe { std::ptr::copy(s.ptr(), d.ptr(), count) };
            Ok(())
        })
    }

    /// A copy from the memory of one device to another's, synchronous or queued
    /// (`aclrtMemcpy`, `aclrtMemcpyAsync`, `aclrtMemcpy2dAsync`): on the SoCs whose
    /// `aclrtMemcpy` CANN documents as needing peer access first
    /// ([`Soc::copy_needs_peer_access`](acl_notify_core::Soc::copy_needs_peer_access)), the
    /// source's device must have enabled access to the destination's (CANN's access is
    /// one-way, from the device that enabled it: `04_device_management.md`). An import onto
    /// another device enabled it both ways, as CANN's driver does. The queued copies follow
    /// the same rule, refused when queued: CANN's guide asks for peer access before any
    /// cross-device copy, `aclrtMemcpyAsync` named with `aclrtMemcpy` (hicann/runtime
    /// `docs/zh/dev_guide/02-01_data_copy.md`, 跨Device复制), and its runtime asks the driver
    /// for the path between the two addresses when the task is built, before it is sent
    /// (`src/runtime/core/src/task/task_info/memory/memory_memcpy_async_task.cc`,
    /// `ConvertD2DCpyType`), so a refusal is the queueing call's code, not the stream's.
    ///
    /// Errors: 207006 access not enabled (CANN documents no code; the one an import without
    /// peer access gets here).
    pub(super) fn peer_copy_ok(&self, d: &Side<'_>, s: &Side<'_>) -> Result<(), SimError> {
        let (Side::Device(d), Side::Device(s)) = (d, s) else {
            return Ok(());
        };
        let (to, from) = (d.alloc.file.device(), s.alloc.file.device());
        if to == from || !self.inner.soc.copy_needs_peer_access() {
            return Ok(());
        }
        if lock(&self.inner.peers)[from as usize] & (1u64 << to) != 0 {
            return Ok(());
        }
        Err(SimError::new(
            Error::NoPermission,
            format!(
                "a copy from device {from}'s memory ({:#x}) to device {to}'s ({:#x}) needs peer \
                 access from device {from} to device {to} first on {}: \
                 aclrtDeviceEnablePeerAccess({to}, 0) with device {from} current",
                s.addr,
                d.addr,
                self.inner.soc.name()
            ),
        ))
    }

    /// `aclrtMemset`: sets `count` bytes at `dst` (`count <= max`) to `value`: device memory,
    /// or host memory of [`malloc_host`](Self::malloc_host) (CANN tells them apart by the
    /// address).
    ///
    /// Errors: 107000 count > max, `dst` neither a device range of this process's live
    /// allocations nor within one `aclrtMallocHost` allocation.
    pub fn memset(&self, dst: usize, max: usize, value: u8, count: usize) -> Result<(), SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(());
            }
            if let Some(r) = self.remote_memset(dst, max, value, count, None) {
                return r;
            }
            if let Some(r) = self.vmm_memset(dst, max, value, count, None) {
                return r;
            }
            let r = match self.set_side(dst, max, count) {
                Ok(r) => r,
                // Not device memory nor `aclrtMallocHost`'s, yet writable here (CANN's own
                // sample clears a stack variable so): set at once, as hardware does.
                Err(e)
                    if e.kind() == Error::ParamInvalid
                        && count <= max
                        && !self.mem().may_be_device(dst)
                        && self.mem().host.block_at(dst).is_none()
                        && plain_host::writable(dst, count) =>
                {
                    // SAFETY: `[dst, dst + count)` lies in writable mappings of this process
                    // (checked just now); what the bytes are for is the caller's business.
                    unsafe { std::ptr::write_bytes(dst as *mut u8, value, count) };
                    return Ok(());
                }
                Err(e) => return Err(e),
            };
            // SAFETY: a checked range of a mapped allocation, or of an `aclrtMallocHost`
            // allocation of this process (its table's lock is not held: freeing host memory
            // while setting it is the caller's race, as with `memset`).
            unsafe { std::ptr::write_bytes(r.ptr(), value, count) };
            Ok(())
        })
    }

    /// What an `aclrtMemset[Async]` of `count` bytes at `dst` sets. CANN tells host from
    /// device memory by the address, and takes host memory of `aclrtMallocHost` (other host
    /// memory is undefined behaviour there; here it is refused, and a synchronous
    /// [`memset`](Self::memset) then sets it only where this process has it mapped writable:
    /// [`plain_host`]): hicann/runtime `docs/zh/api_ref/11-03_memory_copy_and_set.md`,
    /// aclrtMemset and aclrtMemsetAsync.
    pub(super) fn set_side(
        &self,
        dst: usize,
        max: usize,
        count: usize,
    ) -> Result<Side<'_>, SimError> {
        within(count, max, "maxCount")?;
        if let Some(r) = self.range_ref(dst, count, "range")? {
            return Ok(Side::Device(r));
        }
        self.mem().host.range(dst, count)?;
        Ok(Side::Host(dst))
    }

    /// `aclrtMemcpyAsync`: [`memcpy`](Self::memcpy) queued on `stream`, after the tasks before
    /// it (records, waits, host functions, copies). The ranges are checked now, and the
    /// device ones again when the task runs (a range freed meanwhile fails the stream's task
    /// instead of writing freed memory).
    ///
    /// # Safety
    ///
    /// Every host side must stay valid for `count` bytes until the task has run.
    pub unsafe fn memcpy_async(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: RawStream,
    ) -> Result<(), SimError> {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.memcpy_async_through(dst, dest_max, src, count, kind, stream, [None, None], false)
        }
        .map(drop)
    }

    /// [`memcpy_async`](Self::memcpy_async) as CANN's `aclrtMemcpyAsync` queues it: a copy it
    /// does not queue (with pageable host memory, or within the host) is checked as the queued
    /// copy is and then answered instead, nothing queued ([`unqueued`]).
    ///
    /// # Safety
    ///
    /// As [`memcpy_async`](Self::memcpy_async).
    pub unsafe fn memcpy_async_as_cann(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: RawStream,
    ) -> Result<AsyncCopy, SimError> {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            self.memcpy_async_through(dst, dest_max, src, count, kind, stream, [None, None], true)
        }
    }

    /// [`memcpy_async`](Self::memcpy_async) of sides reached through the mappings `marks`
    /// (destination, source) of reserved ranges, if any: the task fails if one was unmapped
    /// before it ran ([`vmm`]). `leave_unqueued`: a copy CANN does not queue ([`unqueued`]) is
    /// answered instead.
    ///
    /// # Safety
    ///
    /// As [`memcpy_async`](Self::memcpy_async).
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn memcpy_async_through(
        &self,
        dst: usize,
        dest_max: usize,
        src: usize,
        count: usize,
        kind: MemcpyKind,
        stream: RawStream,
        marks: [Option<Arc<reserved::MapMark>>; 2],
        leave_unqueued: bool,
    ) -> Result<AsyncCopy, SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(AsyncCopy::Queued);
            }
            if let Some(r) = self.remote_memcpy(dst, dest_max, src, count, kind, Some(stream)) {
                return r.map(|()| AsyncCopy::Queued);
            }
            let vmm = self.vmm_memcpy(
                dst,
                dest_max,
                src,
                count,
                kind,
                Some(stream),
                leave_unqueued,
            );
            if let Some(r) = vmm {
                return r;
            }
            let (sd, ss) = self.copy_sides(dst, dest_max, src, count, kind)?;
            let (d, s) = (
                QueuedSide::new(&sd, &self.mem().host),
                QueuedSide::new(&ss, &self.mem().host),
            );
            let (pd, ps) = (
                unqueued::Place::of_queued(&d),
                unqueued::Place::of_queued(&s),
            );
            let kind = Self::copy_kind(kind, (&sd, pd, dst), (&ss, ps, src))?;
            self.peer_copy_ok(&sd, &ss)?;
            if leave_unqueued {
                let v = unqueued::verdict(kind, pd, ps);
                if v != AsyncCopy::Queued {
                    return Ok(v);
                }
            }
            // Both sides are mostly in one file: kept once.
            let (fd, fs) = (queued::file_of(&sd), queued::file_of(&ss));
            let fs = fs.filter(|s| !fd.is_some_and(|d| std::ptr::eq(d, *s)));
            let [md, ms] = marks;
            let (d, s) = (d.through(md), s.through(ms));
            let cpu = crate::placement::current_cpu();
            let task = Box::new(move |ctx: &TaskCtx| {
                crate::placement::beside_enqueuer(cpu, || ctx.note_moved());
                let run = || {
                    d.still(dst, count, "destination")?;
                    s.still(src, count, "source")?;
                    let (to, from) = (d.ptr(dst, count)?, s.ptr(src, count)?);
                    // SAFETY: as in `memcpy`; the host sides are the caller's contract until the
                    // task has run, and the device ones were checked just now.
                    unsafe { std::ptr::copy(from, to, count) };
                    Ok(())
                };
                let args = || serde_json::json!({"dst": dst, "src": src, "bytes": count});
                let r = crate::trace::span("memory", "memcpy", args, run);
                // What it read may have been zeros of a cut-off page (see `crate::lost`).
                d.intact()?;
                s.intact()?;
                r
            });
            // Queued under the stream table's read lock, without a reference to the stream,
            // which keeps the files the task uses.
            self.enqueue_checked(stream, SimJob::Bulk(task), |e, _| {
                if let Some(f) = fd {
                    self.keep_file(&e.stream, f)?;
                }
                if let Some(f) = fs {
                    self.keep_file(&e.stream, f)?;
                }
                Ok(())
            })?;
            Ok(AsyncCopy::Queued)
        })
    }

    /// `aclrtMemsetAsync`: [`memset`](Self::memset) queued on `stream` (checked as
    /// [`memcpy_async`](Self::memcpy_async) is).
    pub fn memset_async(
        &self,
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.memset_async_through(dst, max, value, count, stream, None)
    }

    /// [`memset_async`](Self::memset_async) of a range reached through the mapping `mark`
    /// of a reserved range, if any (see [`memcpy_async_through`](Self::memcpy_async_through)).
    pub(super) fn memset_async_through(
        &self,
        dst: usize,
        max: usize,
        value: u8,
        count: usize,
        stream: RawStream,
        mark: Option<Arc<reserved::MapMark>>,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            if count == 0 {
                return Ok(());
            }
            if let Some(r) = self.remote_memset(dst, max, value, count, Some(stream)) {
                return r;
            }
            if let Some(r) = self.vmm_memset(dst, max, value, count, Some(stream)) {
                return r;
            }
            let r = self.set_side(dst, max, count)?;
            let file = queued::file_of(&r);
            let q = QueuedSide::new(&r, &self.mem().host).through(mark);
            let cpu = crate::placement::current_cpu();
            let task = Box::new(move |ctx: &TaskCtx| {
                crate::placement::beside_enqueuer(cpu, || ctx.note_moved());
                let args = || serde_json::json!({"dst": dst, "value": value, "bytes": count});
                let done = crate::trace::span("memory", "memset", args, || {
                    q.still(dst, count, "range")?;
                    let to = q.ptr(dst, count)?;
                    // SAFETY: a range of a mapped allocation, checked just now.
                    unsafe { std::ptr::write_bytes(to, value, count) };
                    Ok(())
                });
                // As in `memcpy_async`.
                q.intact()?;
                done
            });
            // As in `memcpy_async`.
            self.enqueue_checked(stream, SimJob::Bulk(task), |e, _| {
                file.map_or(Ok(()), |f| self.keep_file(&e.stream, f))
            })
        })
    }
}

/// 107000 for a copy side in memory imported onto another device than its own, in a copy
/// that is not an explicit device-to-device one between two device sides.
/// `side`: its address, the device the memory is on and the one it was imported onto.
#[cold]
fn cross_device_refused((addr, device, used_on): (usize, u32, u32), what: &str) -> SimError {
    SimError::new(
        Error::ParamInvalid,
        format!(
            "the {what} {:#x} is IPC memory of device {} imported onto device {}: CANN copies \
             such memory only device to device with an explicit kind (no ACL_MEMCPY_DEFAULT, no \
             copy to or from the host)",
            addr, device, used_on
        ),
    )
}

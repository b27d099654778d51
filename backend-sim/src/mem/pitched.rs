//! Two-dimensional copies (`aclrtMemcpy2d`, `aclrtMemcpy2dAsync`): `height` rows of `width`
//! bytes, row `i` read at `src + i * spitch` and written at `dst + i * dpitch` — a tile of a
//! matrix whose rows are padded, as CANN's samples move images and matrices.
//!
//! Each side is checked as one range, from its first row's first byte to its last row's last
//! byte (`pitch * (height - 1) + width` bytes): a device side must lie inside one live
//! allocation, as every copy's device range must (see [`super`]). The rules are CANN's
//! runtime's (hicann/runtime `src/runtime/api/impl/api_error.cc`, `MemCopy2DCheckParam`,
//! `MemCopy2DSync`, `MemCopy2DAsync`): at most [`MAX_HEIGHT`] rows of at most [`MAX_WIDTH`]
//! bytes (107000 past them); the synchronous copy moves host to device or device to host only
//! (an explicit device-to-device kind is 207000, a default kind that the addresses make
//! host-to-host or device-to-device 107000); the asynchronous one also device to device. An
//! asynchronous copy is one task: its rows land together, in stream order. Where a side is
//! in a reserved range of device addresses (`aclrtReserveMemAddress`, physical allocations
//! mapped back to back) or an import of another host's memory, both spans are checked whole
//! and then each row is one copy (queued in order), split at the mappings.

use acl_notify_core::{Error, RawStream};

use super::direction::{cann_name, resolve};
use super::queued::{self, QueuedSide};
use super::unqueued::{Place, verdict};
use super::vmm::Piece;
use super::{AsyncCopy, MemcpyKind, Side};
use crate::Sim;
use crate::error::SimError;
use crate::job::SimJob;
use crate::stream::TaskCtx;

/// Most rows a 2-D copy takes (`RT_MAX_MEMCPY2D_HEIGHT`, hicann/runtime
/// `src/runtime/core/inc/common/internal_error_define.hpp`).
pub const MAX_HEIGHT: usize = 5 * 1024 * 1024;

/// Most bytes a row of a 2-D copy takes (`RT_MAX_MEMCPY2D_WIDTH`, same file).
pub const MAX_WIDTH: usize = 5_000_000;

/// The shape of a 2-D copy: `height` rows of `width` bytes, `dpitch` / `spitch` bytes apart
/// on the destination / source side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pitched {
    /// Bytes from one destination row to the next.
    pub dpitch: usize,
    /// Bytes from one source row to the next.
    pub spitch: usize,
    /// Bytes per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

impl Pitched {
    /// The bytes a side with rows `pitch` apart spans; `None` when that overflows.
    fn span(&self, pitch: usize) -> Option<usize> {
        pitch.checked_mul(self.height - 1)?.checked_add(self.width)
    }

    /// The runtime's checks of the shape (`MemCopy2DCheckParam`), for a shape of at least one
    /// byte: the destination and source spans.
    fn check(&self) -> Result<(usize, usize), SimError> {
        let bad = |what: String| Err(SimError::new(Error::ParamInvalid, what));
        if self.width > self.dpitch || self.width > self.spitch {
            return bad(format!(
                "width {} is more than dpitch {} or spitch {}: a row must fit its pitch",
                self.width, self.dpitch, self.spitch
            ));
        }
        if self.height > MAX_HEIGHT {
            return bad(format!(
                "height {} is more than the {MAX_HEIGHT} rows a 2-D copy takes",
                self.height
            ));
        }
        if self.width > MAX_WIDTH {
            return bad(format!(
                "width {} is more than the {MAX_WIDTH} bytes a row of a 2-D copy takes",
                self.width
            ));
        }
        match (self.span(self.dpitch), self.span(self.spitch)) {
            (Some(d), Some(s)) => Ok((d, s)),
            _ => bad(format!(
                "{} rows of pitch {} (destination) or {} (source) do not fit the address space",
                self.height, self.dpitch, self.spitch
            )),
        }
    }

    /// Copies the rows from `from` to `to`.
    ///
    /// # Safety
    ///
    /// `from` is readable and `to` writable for their spans (see [`check`](Self::check)).
    unsafe fn copy(&self, to: *mut u8, from: *const u8) {
        for row in 0..self.height {
            // SAFETY: row `row` lies within both spans (the caller's contract); `copy`
            // allows overlap, as `aclrtMemcpy` does.
            unsafe {
                std::ptr::copy(
                    from.add(row * self.spitch),
                    to.add(row * self.dpitch),
                    self.width,
                );
            }
        }
    }
}

/// The directions CANN's 2-D copies take once the addresses are known: host to device and
/// device to host, and device to device when queued (`sync` false).
fn takes(sync: bool, kind: MemcpyKind, found: MemcpyKind) -> Result<(), SimError> {
    match (sync, found) {
        (_, MemcpyKind::HostToDevice | MemcpyKind::DeviceToHost) => Ok(()),
        (false, MemcpyKind::DeviceToDevice) => Ok(()),
        (true, _) => Err(wrong_direction(
            "aclrtMemcpy2d",
            kind,
            found,
            "host to device or device to host",
        )),
        (false, _) => Err(wrong_direction(
            "aclrtMemcpy2dAsync",
            kind,
            found,
            "host to device, device to host or device to device",
        )),
    }
}

/// 107000 for a copy whose addresses make it a `found` copy (`kind` corrected as CANN's
/// runtime corrects it: `mem::direction`), which `call` does not take.
fn wrong_direction(call: &str, kind: MemcpyKind, found: MemcpyKind, takes: &str) -> SimError {
    let (kind, found) = (cann_name(kind), cann_name(found));
    SimError::new(
        Error::ParamInvalid,
        format!(
            "{call} copies {takes} only; the addresses make this {kind} copy {found} (CANN's \
             runtime corrects a 2-D copy's kind by where its addresses are)"
        ),
    )
}

impl Sim {
    /// The sides (destination, source) once a side in one mapping of a reserved range
    /// (`aclrtMapMem`) is translated to the physical memory mapped there ([`super::vmm`]),
    /// with the mapping's mark; `None` when a side spans several mappings (then each row is
    /// a copy of its own: `vmm_rows`).
    ///
    /// Errors: 107000 a part of a reserved range where nothing is mapped.
    fn mapped_sides(
        &self,
        dst: usize,
        dspan: usize,
        src: usize,
        sspan: usize,
    ) -> Result<Option<(Piece, Piece)>, SimError> {
        let one = |addr: usize, len: usize, what: &str| -> Result<Option<Piece>, SimError> {
            match self.vmm_pieces(addr, len, what)? {
                None => Ok(Some(Piece {
                    at: addr,
                    len,
                    mark: None,
                })),
                Some(mut p) if p.len() == 1 => Ok(p.pop()),
                Some(_) => Ok(None),
            }
        };
        let d = one(dst, dspan, "destination")?;
        let s = one(src, sspan, "source")?;
        Ok(d.zip(s))
    }

    /// [`vmm_rows`](Self::vmm_rows) for sides that `mapped_sides` found spanning several
    /// mappings (so at least one is in a reserved range).
    ///
    /// # Safety
    ///
    /// As [`vmm_rows`](Self::vmm_rows).
    #[allow(clippy::too_many_arguments)]
    unsafe fn across_mappings(
        &self,
        dst: usize,
        dspan: usize,
        src: usize,
        sspan: usize,
        shape: Pitched,
        kind: MemcpyKind,
        stream: Option<(RawStream, bool)>,
    ) -> Result<AsyncCopy, SimError> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.vmm_rows(dst, dspan, src, sspan, shape, kind, stream) }.unwrap_or_else(|| {
            Err(SimError::new(
                Error::DrvInternalError,
                "a 2-D copy over several mappings found no reserved range",
            ))
        })
    }

    /// `aclrtMemcpy2d`: `shape.height` rows of `shape.width` bytes from `src` to `dst`,
    /// host to device or device to host (see the module docs for the checks).
    ///
    /// Errors: 107000 a shape past the limits, a side that is not what `kind` says, a device
    /// side outside this process's live allocations, a default kind whose addresses are both
    /// host or both device memory; 207000 `DeviceToDevice` or `HostToHost`.
    ///
    /// # Safety
    ///
    /// Every host side must be valid for its span for the duration of the call.
    pub unsafe fn memcpy2d(
        &self,
        dst: usize,
        src: usize,
        shape: Pitched,
        kind: MemcpyKind,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            if shape.width == 0 || shape.height == 0 {
                return Ok(());
            }
            let (dspan, sspan) = shape.check()?;
            if matches!(kind, MemcpyKind::DeviceToDevice | MemcpyKind::HostToHost) {
                return Err(SimError::new(
                    Error::FeatureNotSupport,
                    format!(
                        "aclrtMemcpy2d copies host to device or device to host only, not {}; \
                         aclrtMemcpy2dAsync also copies device to device",
                        cann_name(kind)
                    ),
                ));
            }
            let Some((d, s)) = self.mapped_sides(dst, dspan, src, sspan)? else {
                // SAFETY: the caller's contract, passed on.
                return unsafe { self.across_mappings(dst, dspan, src, sspan, shape, kind, None) }
                    .map(drop);
            };
            let (dst, src) = (d.at, s.at);
            let (d, s) = self.copy_sides_of(dst, dspan, src, sspan, kind)?;
            let host = &self.mem().host;
            let (pd, ps) = (Place::of_side(&d, host), Place::of_side(&s, host));
            let found = Self::copy_kind(kind, (&d, pd, dst), (&s, ps, src))?;
            takes(true, kind, found)?;
            // SAFETY: device sides are checked spans of mapped allocations; host sides are
            // the caller's contract.
            unsafe { shape.copy(d.ptr(), s.ptr()) };
            Ok(())
        })
    }

    /// `aclrtMemcpy2dAsync`: [`memcpy2d`](Self::memcpy2d) queued on `stream` as one task,
    /// device to device too; the device sides are checked now and again when the task runs
    /// (memory freed in between fails the stream's task). Between imports of another host's
    /// memory (cluster mode) each row is one remote copy, queued in order.
    ///
    /// Errors: as `memcpy2d`, but a device-to-device copy is taken, and a host-to-host one
    /// (explicit or found from the addresses) is 107000; the stream's (107017, 107003,
    /// 507002).
    ///
    /// # Safety
    ///
    /// Every host side must stay valid for its span until the task has run.
    pub unsafe fn memcpy2d_async(
        &self,
        dst: usize,
        src: usize,
        shape: Pitched,
        kind: MemcpyKind,
        stream: RawStream,
    ) -> Result<(), SimError> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.memcpy2d_async_through(dst, src, shape, kind, stream, false) }.map(drop)
    }

    /// [`memcpy2d_async`](Self::memcpy2d_async) as CANN's `aclrtMemcpy2dAsync` queues it: a
    /// copy with pageable host memory is checked as the queued copy is and then answered
    /// ([`AsyncCopy::Pageable`], nothing queued: CANN synchronizes the stream and copies at
    /// once, hicann/runtime `src/runtime/api/impl/api_error.cc`,
    /// `ApiErrorDecorator::MemCopy2DAsync`; [`super::unqueued`]).
    ///
    /// # Safety
    ///
    /// As [`memcpy2d_async`](Self::memcpy2d_async).
    pub unsafe fn memcpy2d_async_as_cann(
        &self,
        dst: usize,
        src: usize,
        shape: Pitched,
        kind: MemcpyKind,
        stream: RawStream,
    ) -> Result<AsyncCopy, SimError> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.memcpy2d_async_through(dst, src, shape, kind, stream, true) }
    }

    /// [`memcpy2d_async`](Self::memcpy2d_async); `leave_unqueued`: a copy with pageable host
    /// memory is answered instead of queued.
    ///
    /// # Safety
    ///
    /// As [`memcpy2d_async`](Self::memcpy2d_async).
    unsafe fn memcpy2d_async_through(
        &self,
        dst: usize,
        src: usize,
        shape: Pitched,
        kind: MemcpyKind,
        stream: RawStream,
        leave_unqueued: bool,
    ) -> Result<AsyncCopy, SimError> {
        self.mem_checked(|| {
            if shape.width == 0 || shape.height == 0 {
                return Ok(AsyncCopy::Queued);
            }
            let (dspan, sspan) = shape.check()?;
            if let Some(r) = self.remote_memcpy2d(dst, dspan, src, sspan, shape, kind, stream) {
                return r.map(|()| AsyncCopy::Queued);
            }
            let Some((md, ms)) = self.mapped_sides(dst, dspan, src, sspan)? else {
                let st = Some((stream, leave_unqueued));
                // SAFETY: the caller's contract, passed on.
                return unsafe { self.across_mappings(dst, dspan, src, sspan, shape, kind, st) };
            };
            let (dst, src) = (md.at, ms.at);
            let (d, s) = self.copy_sides_of(dst, dspan, src, sspan, kind)?;
            let (qd, qs) = (
                QueuedSide::new(&d, &self.mem().host),
                QueuedSide::new(&s, &self.mem().host),
            );
            let (pd, ps) = (Place::of_queued(&qd), Place::of_queued(&qs));
            let found = Self::copy_kind(kind, (&d, pd, dst), (&s, ps, src))?;
            takes(false, kind, found)?;
            // Between two devices' memory: peer access first, as `aclrtMemcpyAsync`.
            self.peer_copy_ok(&d, &s)?;
            let (fd, fs) = (queued::file_of(&d), queued::file_of(&s));
            if leave_unqueued {
                let v = verdict(found, pd, ps);
                if v != AsyncCopy::Queued {
                    return Ok(v);
                }
            }
            // Through a mapping, the task fails if it is unmapped before it runs.
            let (qd, qs) = (qd.through(md.mark), qs.through(ms.mark));
            let task = Box::new(move |_: &TaskCtx| {
                let run = || {
                    qd.still(dst, dspan, "destination")?;
                    qs.still(src, sspan, "source")?;
                    let (to, from) = (qd.ptr(dst, dspan)?, qs.ptr(src, sspan)?);
                    // SAFETY: as in `memcpy2d`; the host sides are the caller's contract until
                    // the task has run, and the device ones were checked just now.
                    unsafe { shape.copy(to, from) };
                    Ok(())
                };
                let args = || {
                    serde_json::json!({"dst": dst, "src": src, "width": shape.width,
                        "height": shape.height, "dpitch": shape.dpitch, "spitch": shape.spitch})
                };
                let r = crate::trace::span("memory", "memcpy2d", args, run);
                // What it read may have been zeros of a cut-off page (see `crate::lost`).
                qd.intact()?;
                qs.intact()?;
                r
            });
            // The stream keeps the files the task uses, as for `memcpy_async`.
            self.enqueue_checked(stream, SimJob::Bulk(task), |e, _| {
                for f in [fd, fs].into_iter().flatten() {
                    self.keep_file(&e.stream, f)?;
                }
                Ok(())
            })?;
            Ok(AsyncCopy::Queued)
        })
    }

    /// A 2-D copy with a side in a reserved range of device addresses
    /// (`aclrtReserveMemAddress`, where physical allocations are mapped back to back): both
    /// spans checked whole first (every part mapped, or the other side's allocation), then
    /// each row copied by [`memcpy`](Self::memcpy) or queued by
    /// [`memcpy_async`](Self::memcpy_async) on `stream`, which split it at the mappings.
    /// `None` when neither span starts in a reserved range. With `stream`'s `true`, a copy
    /// with pageable host memory is answered instead of queued ([`super::unqueued`]).
    ///
    /// # Safety
    ///
    /// As [`memcpy2d`](Self::memcpy2d) and [`memcpy2d_async`](Self::memcpy2d_async).
    #[allow(clippy::too_many_arguments)]
    unsafe fn vmm_rows(
        &self,
        dst: usize,
        dspan: usize,
        src: usize,
        sspan: usize,
        shape: Pitched,
        kind: MemcpyKind,
        stream: Option<(RawStream, bool)>,
    ) -> Option<Result<AsyncCopy, SimError>> {
        let run = || -> Result<Option<AsyncCopy>, SimError> {
            let d = self.vmm_pieces(dst, dspan, "destination")?;
            let s = self.vmm_pieces(src, sspan, "source")?;
            if d.is_none() && s.is_none() {
                return Ok(None);
            }
            // A reserved range is device memory; any other side is checked as one range.
            let host = &self.mem().host;
            let place = |pieces: bool, addr, len, what| -> Result<(Place, bool), SimError> {
                if pieces {
                    return Ok((Place::Device, false));
                }
                let side = self.side(addr, len, what)?;
                let managed = matches!(side, Side::Device(r) if Self::is_managed(&r.alloc));
                Ok((Place::of_side(&side, host), managed))
            };
            let (pd, md) = place(d.is_some(), dst, dspan, "destination")?;
            let (ps, ms) = place(s.is_some(), src, sspan, "source")?;
            let found = resolve(kind, (pd, dst), (ps, src), || md || ms)?;
            takes(stream.is_none(), kind, found)?;
            if let Some((_, true)) = stream {
                let v = verdict(found, pd, ps);
                if v != AsyncCopy::Queued {
                    return Ok(Some(v));
                }
            }
            for row in 0..shape.height {
                let (to, from) = (dst + row * shape.dpitch, src + row * shape.spitch);
                let n = shape.width;
                // SAFETY: the caller's contract for the host sides; device rows are checked
                // (and split at the mappings) by the copy.
                unsafe {
                    match stream {
                        None => self.memcpy(to, n, from, n, found),
                        Some((st, _)) => self.memcpy_async(to, n, from, n, found, st),
                    }
                }?;
            }
            Ok(Some(AsyncCopy::Queued))
        };
        run().transpose()
    }
}

#[cfg(test)]
mod tests {
    use acl_notify_core::BackendError as _;

    use super::*;

    /// One device of `capacity` bytes ([`test_sim`](crate::mem::tests::test_sim)).
    fn open(tag: &str, capacity: u64) -> (Sim, crate::NamespaceGuard) {
        crate::mem::tests::test_sim("2d", tag, acl_notify_core::Soc::Ascend910B, 1, capacity)
    }

    #[test]
    fn a_side_spans_its_rows_and_the_last_row_s_width() {
        let p = Pitched {
            dpitch: 16,
            spitch: 8,
            width: 5,
            height: 3,
        };
        assert_eq!(p.check().unwrap(), (16 * 2 + 5, 8 * 2 + 5));
        let one_row = Pitched { height: 1, ..p };
        assert_eq!(one_row.check().unwrap(), (5, 5));
    }

    #[test]
    fn shapes_past_cann_s_limits_or_the_address_space_are_refused() {
        let ok = Pitched {
            dpitch: 8,
            spitch: 8,
            width: 8,
            height: 2,
        };
        let code = |p: Pitched| p.check().unwrap_err().kind();
        assert_eq!(code(Pitched { width: 9, ..ok }), Error::ParamInvalid);
        assert_eq!(
            code(Pitched {
                height: MAX_HEIGHT + 1,
                ..ok
            }),
            Error::ParamInvalid
        );
        assert!(
            Pitched {
                height: MAX_HEIGHT,
                ..ok
            }
            .check()
            .is_ok()
        );
        let wide = Pitched {
            dpitch: MAX_WIDTH + 1,
            spitch: MAX_WIDTH + 1,
            width: MAX_WIDTH + 1,
            height: 1,
        };
        assert_eq!(code(wide), Error::ParamInvalid);
        let huge = Pitched {
            dpitch: usize::MAX / 2,
            ..ok
        };
        assert_eq!(code(Pitched { height: 3, ..huge }), Error::ParamInvalid);
    }

    #[test]
    fn a_queued_2d_copy_between_device_buffers_keeps_the_gaps_and_checks_its_spans() {
        use acl_notify_core::{StreamOps, SyncWait};
        let (sim, _ns) = open("queued", 8 << 20);
        let (a, b) = (sim.malloc(0, 64, 0).unwrap(), sim.malloc(0, 64, 0).unwrap());
        let data: Vec<u8> = (0..64).collect();
        let up = Pitched {
            dpitch: 64,
            spitch: 64,
            width: 64,
            height: 1,
        };
        // SAFETY: `data` is 64 live bytes.
        unsafe { sim.memcpy2d(a, data.as_ptr().addr(), up, MemcpyKind::HostToDevice) }.unwrap();
        sim.memset(b, 64, 0xee, 64).unwrap();
        let s = sim.create_stream(0).unwrap();
        // Rows of 4 bytes, every 16th byte of a into every 8th of b.
        let shape = Pitched {
            dpitch: 8,
            spitch: 16,
            width: 4,
            height: 4,
        };
        // SAFETY: device to device, no host side.
        unsafe { sim.memcpy2d_async(b, a, shape, MemcpyKind::DeviceToDevice, s) }.unwrap();
        // A fifth row would leave a (its span: 16 * 4 + 4 bytes of 64).
        let over = Pitched { height: 5, ..shape };
        // SAFETY: as above.
        let e = unsafe { sim.memcpy2d_async(b, a, over, MemcpyKind::DeviceToDevice, s) };
        assert_eq!(e.unwrap_err().kind(), Error::ParamInvalid);
        sim.synchronize(s, SyncWait::Forever).unwrap();
        let mut out = vec![0u8; 64];
        let down = Pitched { height: 1, ..up };
        // SAFETY: `out` is 64 live bytes.
        unsafe { sim.memcpy2d(out.as_mut_ptr().addr(), b, down, MemcpyKind::DeviceToHost) }
            .unwrap();
        for (i, &v) in out.iter().enumerate() {
            let (row, col) = (i / 8, i % 8);
            let want = if row < 4 && col < 4 {
                (row * 16 + col) as u8
            } else {
                0xee
            };
            assert_eq!(v, want, "byte {i}");
        }
        // The synchronous copy has no device to device (207000), and a default kind between
        // two device buffers is refused (107000).
        // SAFETY: no host side.
        let e = unsafe { sim.memcpy2d(b, a, shape, MemcpyKind::DeviceToDevice) };
        assert_eq!(e.unwrap_err().kind(), Error::FeatureNotSupport);
        // SAFETY: no host side.
        let e = unsafe { sim.memcpy2d(b, a, shape, MemcpyKind::Default) };
        assert_eq!(e.unwrap_err().kind(), Error::ParamInvalid);
        sim.destroy_stream(s, acl_notify_core::StreamDestroy::Drain)
            .unwrap();
    }

    #[test]
    fn rows_are_copied_at_their_pitches_and_the_gaps_kept() {
        let src: Vec<u8> = (0..24).collect();
        let mut dst = vec![0xffu8; 30];
        let p = Pitched {
            dpitch: 10,
            spitch: 8,
            width: 3,
            height: 3,
        };
        // SAFETY: both spans (23 and 19 bytes) lie in the vectors.
        unsafe { p.copy(dst.as_mut_ptr(), src.as_ptr()) };
        let mut want = vec![0xffu8; 30];
        for row in 0..3 {
            for i in 0..3 {
                want[row * 10 + i] = (row * 8 + i) as u8;
            }
        }
        assert_eq!(dst, want);
    }

    /// A side in a mapping of a reserved range (`aclrtMapMem`) is the physical memory mapped
    /// there, as any device address: rows land in it, synchronously and queued; a span over
    /// two mappings lands row by row; one past the range is refused (107000).
    #[test]
    fn a_side_in_a_mapped_reserved_range_copies_through_its_physical_memory() {
        use super::super::vmm::PageSize;
        use acl_notify_core::{BackendError as _, StreamOps, SyncWait};
        let (sim, _ns) = open("vmm", 16 << 20);
        let g = PageSize::Huge.bytes() as usize;
        let va = sim.vmm_reserve(2 * g, 0, None).unwrap();
        let (a, b) = (
            sim.vmm_malloc_physical(0, g, PageSize::Huge, Default::default())
                .unwrap(),
            sim.vmm_malloc_physical(0, g, PageSize::Huge, Default::default())
                .unwrap(),
        );
        sim.vmm_map(va, g, 0, a).unwrap();
        sim.vmm_map(va + g, g, 0, b).unwrap();
        let data: Vec<u8> = (0..64).collect();
        let shape = Pitched {
            dpitch: 32,
            spitch: 16,
            width: 16,
            height: 4,
        };
        // SAFETY: `data` spans the source's 64 bytes.
        unsafe {
            sim.memcpy2d(
                va + 64,
                data.as_ptr().addr(),
                shape,
                MemcpyKind::HostToDevice,
            )
        }
        .unwrap();
        let s = sim.create_stream(0).unwrap();
        let back = Pitched {
            dpitch: 16,
            spitch: 32,
            width: 16,
            height: 4,
        };
        // SAFETY: device to device.
        unsafe { sim.memcpy2d_async(va + g + 128, va + 64, back, MemcpyKind::Default, s) }.unwrap();
        sim.synchronize(s, SyncWait::Forever).unwrap();
        let mut out = vec![0u8; 64];
        // SAFETY: `out` is 64 bytes.
        unsafe {
            sim.memcpy(
                out.as_mut_ptr().addr(),
                64,
                va + g + 128,
                64,
                MemcpyKind::DeviceToHost,
            )
        }
        .unwrap();
        assert_eq!(out, data, "the rows, packed again in the second mapping");
        // A span over the seam of the two mappings: the reserved range is contiguous device
        // memory, as on hardware, so the rows land on both sides of it (one copy a row).
        // SAFETY: `data` spans the source.
        unsafe {
            sim.memcpy2d(
                va + g - 64,
                data.as_ptr().addr(),
                shape,
                MemcpyKind::HostToDevice,
            )
        }
        .unwrap();
        let mut seam = vec![0u8; 128];
        // SAFETY: `seam` is 128 bytes.
        unsafe {
            sim.memcpy(
                seam.as_mut_ptr().addr(),
                128,
                va + g - 64,
                128,
                MemcpyKind::DeviceToHost,
            )
        }
        .unwrap();
        for row in 0..4 {
            assert_eq!(
                &seam[row * 32..row * 32 + 16],
                &data[row * 16..row * 16 + 16]
            );
        }
        // A span past the reserved range's end is refused, nothing written.
        // SAFETY: `data` spans the source.
        let e = unsafe {
            sim.memcpy2d(
                va + 2 * g - 64,
                data.as_ptr().addr(),
                shape,
                MemcpyKind::HostToDevice,
            )
        }
        .unwrap_err();
        assert_eq!(e.kind(), Error::ParamInvalid, "{}", e.message());
        sim.destroy_stream(s, acl_notify_core::StreamDestroy::Drain)
            .unwrap();
    }
}

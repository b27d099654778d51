//! `aclrtMemcpyBatch[V2]` / `aclrtMemcpyBatchAsync[V2]`: many host-to-device and
//! device-to-host copies in one call, each pair's locations stated by an attribute, done
//! through the ordinary copy paths (`Sim::memcpy` / `Sim::memcpy_async`, so VMM mappings and
//! IPC memory work as for `aclrtMemcpy`).
//!
//! CANN's rules, in its order (hicann/runtime `src/acl/aclrt_impl/memory.cpp`,
//! `MemcpyBatchImpl` and `ValidateMemcpyBatchParams`; `src/runtime/api/api_c_memory.cc`,
//! `rtsMemcpyBatch[Async]`; `src/runtime/api/impl/api_error.cc`,
//! `ApiErrorDecorator::MemcpyBatch[Async]`; `src/runtime/api/impl/api_impl.cc`,
//! `ApiImpl::MemcpyBatch`, `LoopMemcpyAsync`, `CheckMemCpyAttr`):
//! - ACL layer, 100000: `failIndex` NULL (the forms that have it), `sizes` NULL, no batch;
//!   then every size 0 succeeds with `*failIndex = SIZE_MAX`; then `dsts`, `destMaxs`,
//!   `srcs`, `attrs`, `attrsIndexes` NULL, a `destMaxs[i]` below `sizes[i]`, an attribute's
//!   reserved bytes not 0.
//! - Runtime: 207000 off Ascend910B, Ascend910_93 and Ascend950PR/DT; `*failIndex =
//!   SIZE_MAX`; 107000 no attribute, more attributes than copies, more than 4,096 copies (the
//!   synchronous form), `attrsIndexes[0]` not 0, indexes not increasing or past the last copy.
//!   Copy `i` takes the last attribute whose index is at most `i`.
//! - Per copy, 107000 with `*failIndex = i`: each side's location as
//!   `aclrtPointerGetAttributes` says it (unregistered memory counting as host memory; an
//!   attribute's `ACL_MEM_LOCATION_TYPE_HOST_NUMA` as host) must be the attribute's, and a
//!   device side's device its `id`; host to host and device to device are refused (only
//!   host to device and device to host). The asynchronous form refuses a size of 0 or a NULL
//!   side too, and copies to or from unregistered host memory by synchronizing the stream and
//!   copying at once (CANN's `LoopMemcpyAsync`); the others are queued.
//! - Ours: the synchronous form checks every pair before it copies any, and a copy the copy
//!   path refuses (a range outside its allocation) is 107000 with `*failIndex` at it, the
//!   copies before it done.

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc, SyncWait};
use acl_notify_sim::mem::MemcpyKind;
use acl_notify_sim::mem::location::MemLocation;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{Checked, Out, aclError, aclrtStream, api, c_array};
use crate::memquery::{LOC_DEVICE, LOC_HOST, LOC_UNREGISTERED, Location, location_of};
use crate::session::runtime;

/// `aclrtMemcpyBatchAttr` (`acl_rt.h`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct BatchAttr {
    dst: Location,
    src: Location,
    rsv: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<BatchAttr>() == 32);

/// `ACL_MEM_LOCATION_TYPE_HOST_NUMA`.
const LOC_HOST_NUMA: u32 = 4;

/// `DEVMM_MEMCPY_BATCH_MAX_COUNT` (hicann/runtime `pkg_inc/driver/ascend_hal_define.h`): the
/// most copies of one synchronous batch.
const MAX_SYNC_BATCH: usize = 4096;

/// The caller's arrays, read once the ACL layer found them non-NULL.
struct Batch<'a> {
    dsts: &'a [*mut c_void],
    dest_maxs: &'a [usize],
    srcs: &'a [*mut c_void],
    sizes: &'a [usize],
    attrs: &'a [BatchAttr],
    indexes: &'a [usize],
}

/// Where `*failIndex` goes (NULL for the V2 forms).
#[derive(Clone, Copy)]
struct FailIndex(Option<Checked<usize>>);

impl FailIndex {
    fn set(self, i: usize) {
        if let Some(out) = self.0 {
            out.put(i);
        }
    }
}

/// The arrays every form passes, as the caller passed them (unchecked).
#[derive(Clone, Copy)]
struct Args {
    dsts: *const *mut c_void,
    dest_maxs: *const usize,
    srcs: *const *mut c_void,
    sizes: *const usize,
    num_batches: usize,
    attrs: *const c_void,
    attrs_indexes: *const usize,
    num_attrs: usize,
}

/// The checks of `MemcpyBatchImpl` (ACL layer) and the runtime's argument checks; `None` when
/// every size is 0 (nothing to do).
///
/// # Safety
///
/// Each non-NULL array is valid for reading `num_batches` elements (`attrs` and
/// `attrs_indexes`: `num_attrs`).
unsafe fn batch_args<'a>(args: Args, fail: FailIndex) -> Result<Option<Batch<'a>>, CallError> {
    let Args {
        dsts,
        dest_maxs,
        srcs,
        sizes,
        num_batches: num,
        attrs,
        attrs_indexes,
        num_attrs,
    } = args;
    let attrs = attrs.cast::<BatchAttr>();
    if sizes.is_null() {
        return Err(null_arg("sizes"));
    }
    if num == 0 {
        return Err(CallError::new(Error::InvalidParam, "numBatches is 0"));
    }
    const IP: Error = Error::InvalidParam;
    // SAFETY: non-NULL, `num` readable (the caller's contract).
    let sizes = unsafe { c_array(sizes, num, "numBatches", IP)? };
    if sizes.iter().all(|s| *s == 0) {
        fail.set(usize::MAX);
        return Ok(None);
    }
    for (p, what) in [
        (dsts.cast::<c_void>(), "dsts"),
        (dest_maxs.cast(), "destMaxs"),
        (srcs.cast(), "srcs"),
        (attrs.cast(), "attrs"),
        (attrs_indexes.cast(), "attrsIndexes"),
    ] {
        if p.is_null() {
            return Err(null_arg(what));
        }
    }
    // SAFETY: non-NULL (checked), lengths by the caller's contract.
    let b = unsafe {
        Batch {
            dsts: c_array(dsts, num, "numBatches", IP)?,
            dest_maxs: c_array(dest_maxs, num, "numBatches", IP)?,
            srcs: c_array(srcs, num, "numBatches", IP)?,
            sizes,
            attrs: c_array(attrs, num_attrs, "numAttrs", IP)?,
            indexes: c_array(attrs_indexes, num_attrs, "numAttrs", IP)?,
        }
    };
    if let Some(i) = (0..num).find(|&i| b.dest_maxs[i] < b.sizes[i]) {
        return Err(CallError::new(
            Error::InvalidParam,
            format!(
                "the copy size {} at index {i} exceeds the size {} of its destination (destMaxs)",
                b.sizes[i], b.dest_maxs[i]
            ),
        ));
    }
    if let Some(i) = b.attrs.iter().position(|a| a.rsv.iter().any(|r| *r != 0)) {
        return Err(CallError::new(
            Error::InvalidParam,
            format!("attrs[{i}].rsv must be all 0"),
        ));
    }
    Ok(Some(b))
}

/// The runtime's checks of the attribute indexes (`ApiErrorDecorator::MemcpyBatch[Async]`).
fn check_indexes(b: &Batch<'_>, sync: bool) -> Result<(), CallError> {
    let (num, n_attrs) = (b.sizes.len(), b.attrs.len());
    if n_attrs == 0 {
        return Err(param("numAttrs is 0"));
    }
    if n_attrs > num {
        return Err(param(format!(
            "numAttrs {n_attrs} is more than numBatches {num}"
        )));
    }
    if sync && num > MAX_SYNC_BATCH {
        return Err(param(format!(
            "numBatches {num} is more than {MAX_SYNC_BATCH}, the most of one synchronous batch"
        )));
    }
    if b.indexes[0] != 0 {
        return Err(param(format!(
            "attrsIndexes[0] is {}: it must be 0",
            b.indexes[0]
        )));
    }
    for i in 1..n_attrs {
        if b.indexes[i] <= b.indexes[i - 1] || b.indexes[i] >= num {
            return Err(param(format!(
                "attrsIndexes[{i}] is {} (attrsIndexes[{}] is {}): each must be greater than the \
                 one before and less than numBatches {num}",
                b.indexes[i],
                i - 1,
                b.indexes[i - 1]
            )));
        }
    }
    Ok(())
}

/// The attribute of copy `i`: the last whose index is at most `i`.
fn attr_of(b: &Batch<'_>, i: usize) -> BatchAttr {
    let k = b.indexes.partition_point(|&x| x <= i);
    b.attrs[k.saturating_sub(1)]
}

/// `CheckMemCpyAttr` and the direction check for copy `i`: its kind (host to device when the
/// destination is device memory) and whether a side is unregistered host memory.
fn check_pair(
    dst: MemLocation,
    src: MemLocation,
    attr: BatchAttr,
    i: usize,
) -> Result<(MemcpyKind, bool), CallError> {
    let side = |at: MemLocation, want: Location, what: &str| -> Result<(u32, bool), CallError> {
        let (loc, _) = location_of(at);
        let real = if loc.kind == LOC_UNREGISTERED {
            LOC_HOST
        } else {
            loc.kind
        };
        let asked = if want.kind == LOC_HOST_NUMA {
            LOC_HOST
        } else {
            want.kind
        };
        if real != asked || (real == LOC_DEVICE && loc.id != want.id) {
            return Err(param(format!(
                "copy {i}: the {what} is memory of location type {} (id {}), but its attribute \
                 says type {} (id {})",
                loc.kind, loc.id, want.kind, want.id
            )));
        }
        Ok((real, loc.kind == LOC_UNREGISTERED))
    };
    let (d, d_unreg) = side(dst, attr.dst, "destination")?;
    let (s, s_unreg) = side(src, attr.src, "source")?;
    if d == s {
        return Err(param(format!(
            "copy {i}: both sides are {} memory; a batch copies host to device or device to \
             host only",
            if d == LOC_DEVICE { "device" } else { "host" }
        )));
    }
    let kind = if d == LOC_DEVICE {
        MemcpyKind::HostToDevice
    } else {
        MemcpyKind::DeviceToHost
    };
    Ok((kind, d_unreg || s_unreg))
}

/// 207000 off the SoCs whose runtime has batch copies (`RT_FEATURE_TASK_MEMORY_BATCH_COPY`:
/// hicann/runtime `src/runtime/config/910_B_93/` and `950/dev_info_reg.cc`).
fn require_batch(soc: Soc, call: &str) -> Result<(), CallError> {
    match soc {
        Soc::Ascend910B | Soc::Ascend910_93 | Soc::Ascend950PR | Soc::Ascend950DT => Ok(()),
        other => Err(CallError::new(
            Error::FeatureNotSupport,
            format!("{call}: {} has no batch copies", other.name()),
        )),
    }
}

/// Both forms after [`batch_args`]: `stream` is the async form's.
fn run_batch(
    call: &str,
    b: &Batch<'_>,
    fail: FailIndex,
    stream: Option<aclrtStream>,
) -> Result<(), CallError> {
    let rt = runtime()?;
    let sim = rt.backend();
    require_batch(sim.soc(), call)?;
    fail.set(usize::MAX);
    check_indexes(b, stream.is_none())?;
    let failed = |i: usize, e: CallError| {
        fail.set(i);
        e
    };
    let Some(stream) = stream else {
        rt.current_device()?;
        let mut kinds = Vec::with_capacity(b.sizes.len());
        for i in 0..b.sizes.len() {
            let dst = sim.mem_location(b.dsts[i].addr());
            let src = sim.mem_location(b.srcs[i].addr());
            let (kind, _) = check_pair(dst, src, attr_of(b, i), i).map_err(|e| failed(i, e))?;
            kinds.push(kind);
        }
        for (i, kind) in kinds.into_iter().enumerate() {
            // SAFETY: host sides valid for their sizes by the caller's contract (CANN's);
            // device sides are checked by the copy.
            unsafe {
                sim.memcpy(
                    b.dsts[i].addr(),
                    b.dest_maxs[i],
                    b.srcs[i].addr(),
                    b.sizes[i],
                    kind,
                )
            }
            .map_err(|e| failed(i, CallError::backend(e)))?;
        }
        return Ok(());
    };
    let s = rt.resolve_task_stream(stream.addr())?;
    for i in 0..b.sizes.len() {
        let (dst, src, size) = (b.dsts[i], b.srcs[i], b.sizes[i]);
        let check = || -> Result<(MemcpyKind, bool), CallError> {
            if size == 0 || size > b.dest_maxs[i] {
                return Err(param(format!(
                    "copy {i}: size {size} must be more than 0 and at most destMaxs {}",
                    b.dest_maxs[i]
                )));
            }
            if src.is_null() || dst.is_null() {
                return Err(param(format!("copy {i}: a NULL side")));
            }
            check_pair(
                sim.mem_location(dst.addr()),
                sim.mem_location(src.addr()),
                attr_of(b, i),
                i,
            )
        };
        let (kind, unregistered) = check().map_err(|e| failed(i, e))?;
        let r = if unregistered {
            // CANN's `LoopMemcpyAsync`: the stream synchronized, then the copy made at once.
            rt.synchronize(stream.addr(), SyncWait::Forever)?;
            // SAFETY: as for the synchronous form.
            unsafe { sim.memcpy(dst.addr(), b.dest_maxs[i], src.addr(), size, kind) }
        } else {
            // SAFETY: host sides stay valid until the copy has run (the caller's contract).
            unsafe { sim.memcpy_async(dst.addr(), b.dest_maxs[i], src.addr(), size, kind, s) }
        };
        r.map_err(|e| failed(i, CallError::backend(e)))?;
    }
    Ok(())
}

/// `*failIndex` of the forms that report it, or none (the V2 forms).
#[derive(Clone, Copy)]
enum Report {
    FailIndex(*mut usize),
    Nothing,
}

/// Every form: `failIndex` checked where the form has it, [`batch_args`], then [`run_batch`]
/// (`stream` is the async forms').
///
/// # Safety
///
/// As for `aclrtMemcpyBatch` (and `aclrtMemcpyBatchAsync` with a stream).
unsafe fn batch(call: &str, args: Args, report: Report, stream: Option<aclrtStream>) -> aclError {
    api(call, || {
        let fail = match report {
            // SAFETY: NULL or writable, by the caller's contract.
            Report::FailIndex(p) => FailIndex(Some(
                unsafe { Out::new(p) }.check(|| null_arg("failIndex"))?,
            )),
            Report::Nothing => FailIndex(None),
        };
        // SAFETY: the caller's contract.
        let Some(b) = (unsafe { batch_args(args, fail) })? else {
            return Ok(());
        };
        run_batch(call, &b, fail, stream)
    })
}

/// `aclError aclrtMemcpyBatch(void **dsts, size_t *destMaxs, void **srcs, size_t *sizes,
/// size_t numBatches, aclrtMemcpyBatchAttr *attrs, size_t *attrsIndexes, size_t numAttrs,
/// size_t *failIndex)`: `numBatches` copies, each host to device or device to host as its
/// attribute says (see the module docs); `*failIndex` the copy that failed, `SIZE_MAX` when
/// none.
///
/// # Safety
///
/// Arrays valid for `numBatches` elements (`attrs`, `attrsIndexes`: `numAttrs`); host sides
/// valid for their sizes; `failIndex` writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyBatch(
    dsts: *const *mut c_void,
    dest_maxs: *const usize,
    srcs: *const *mut c_void,
    sizes: *const usize,
    num_batches: usize,
    attrs: *const c_void,
    attrs_indexes: *const usize,
    num_attrs: usize,
    fail_index: *mut usize,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        batch(
            "aclrtMemcpyBatch",
            Args {
                dsts,
                dest_maxs,
                srcs,
                sizes,
                num_batches,
                attrs,
                attrs_indexes,
                num_attrs,
            },
            Report::FailIndex(fail_index),
            None,
        )
    }
}

/// `aclError aclrtMemcpyBatchV2(...)`: [`aclrtMemcpyBatch`] without `failIndex`.
///
/// # Safety
///
/// As for `aclrtMemcpyBatch`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyBatchV2(
    dsts: *const *mut c_void,
    dest_maxs: *const usize,
    srcs: *const *mut c_void,
    sizes: *const usize,
    num_batches: usize,
    attrs: *const c_void,
    attrs_indexes: *const usize,
    num_attrs: usize,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        batch(
            "aclrtMemcpyBatchV2",
            Args {
                dsts,
                dest_maxs,
                srcs,
                sizes,
                num_batches,
                attrs,
                attrs_indexes,
                num_attrs,
            },
            Report::Nothing,
            None,
        )
    }
}

/// `aclError aclrtMemcpyBatchAsync(..., size_t *failIndex, aclrtStream stream)`: the copies of
/// [`aclrtMemcpyBatch`] queued on `stream` (NULL: the default stream), in order; a copy with
/// unregistered host memory synchronizes the stream and is made at once, as CANN's runtime
/// does.
///
/// # Safety
///
/// As for `aclrtMemcpyBatch`; host sides valid until the copies have run.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyBatchAsync(
    dsts: *const *mut c_void,
    dest_maxs: *const usize,
    srcs: *const *mut c_void,
    sizes: *const usize,
    num_batches: usize,
    attrs: *const c_void,
    attrs_indexes: *const usize,
    num_attrs: usize,
    fail_index: *mut usize,
    stream: aclrtStream,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        batch(
            "aclrtMemcpyBatchAsync",
            Args {
                dsts,
                dest_maxs,
                srcs,
                sizes,
                num_batches,
                attrs,
                attrs_indexes,
                num_attrs,
            },
            Report::FailIndex(fail_index),
            Some(stream),
        )
    }
}

/// `aclError aclrtMemcpyBatchAsyncV2(..., aclrtStream stream)`: [`aclrtMemcpyBatchAsync`]
/// without `failIndex`.
///
/// # Safety
///
/// As for `aclrtMemcpyBatchAsync`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtMemcpyBatchAsyncV2(
    dsts: *const *mut c_void,
    dest_maxs: *const usize,
    srcs: *const *mut c_void,
    sizes: *const usize,
    num_batches: usize,
    attrs: *const c_void,
    attrs_indexes: *const usize,
    num_attrs: usize,
    stream: aclrtStream,
) -> aclError {
    // SAFETY: the caller's contract.
    unsafe {
        batch(
            "aclrtMemcpyBatchAsyncV2",
            Args {
                dsts,
                dest_maxs,
                srcs,
                sizes,
                num_batches,
                attrs,
                attrs_indexes,
                num_attrs,
            },
            Report::Nothing,
            Some(stream),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_takes_the_last_attribute_whose_index_is_at_most_its_own() {
        let a = |id| BatchAttr {
            dst: Location { id, kind: 1 },
            src: Location { id, kind: 0 },
            rsv: [0; 16],
        };
        let attrs = [a(0), a(1), a(2)];
        let indexes = [0, 2, 5];
        let sizes = [1usize; 7];
        let b = Batch {
            dsts: &[],
            dest_maxs: &[],
            srcs: &[],
            sizes: &sizes,
            attrs: &attrs,
            indexes: &indexes,
        };
        let ids: Vec<u32> = (0..7).map(|i| attr_of(&b, i).dst.id).collect();
        assert_eq!(ids, [0, 0, 1, 1, 1, 2, 2]);
        check_indexes(&b, true).unwrap();
        let bad = [0, 5, 5];
        let b2 = Batch { indexes: &bad, ..b };
        assert_eq!(check_indexes(&b2, true).unwrap_err().code().code(), 107000);
    }
}

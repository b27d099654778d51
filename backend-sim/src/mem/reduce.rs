//! `aclrtReduceAsync` on the simulated device: `dst[i] = op(dst[i], src[i])` over device
//! memory, in stream order — what a collective's reduce step runs on the device's DMA engine
//! (hicann/runtime `docs/zh/api_ref/12_execution_control.md`). Each SoC reduces the types
//! that documentation lists for its product ([`reduces`]); CANN's runtime refuses the others
//! by the device's capability bits with `RT_ERROR_FEATURE_NOT_SUPPORT`, 207000
//! (`src/runtime/core/src/launch/memory_stars.cc`).

use acl_notify_core::{Error, RawStream, Soc};

use super::DevRange;
use super::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use super::vmm::Piece;
use crate::Sim;
use crate::error::SimError;
use crate::job::SimJob;
use crate::stream::TaskCtx;

/// The operation (`aclrtReduceKind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM`.
    Sum,
    /// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX`.
    Max,
    /// `ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN`.
    Min,
}

/// The element type (`aclDataType`), of those the simulator reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceType {
    /// `ACL_FLOAT`.
    F32,
    /// `ACL_INT32`.
    I32,
    /// `ACL_UINT32`.
    U32,
    /// `ACL_INT16`.
    I16,
    /// `ACL_INT8`.
    I8,
    /// `ACL_FLOAT16` (IEEE half precision).
    F16,
    /// `ACL_BF16` (bfloat16).
    BF16,
}

impl ReduceType {
    fn size(self) -> usize {
        match self {
            ReduceType::F32 | ReduceType::I32 | ReduceType::U32 => 4,
            ReduceType::I16 | ReduceType::F16 | ReduceType::BF16 => 2,
            ReduceType::I8 => 1,
        }
    }
}

/// Whether `soc` reduces `ty`: the types hicann/runtime's documentation of `aclrtReduceAsync`
/// (`docs/zh/api_ref/12_execution_control.md`, 约束说明) lists for the product — the 950
/// family int8, int16, int32, uint32, fp16, fp32, bf16; Atlas A3 and A2 the same without
/// uint32; Atlas 200I/500 A2 without bf16 too; the inference series fp32, fp16, int16; the
/// training series fp32 only; IPV350 none (it has no `aclrtReduceAsync`). CANN's ACL layer
/// also passes uint8, uint16 and int4, which no product lists (so no [`ReduceType`] is made
/// for them).
pub fn reduces(soc: Soc, ty: ReduceType) -> bool {
    use ReduceType::*;
    match soc {
        Soc::Ascend950PR | Soc::Ascend950DT => true,
        Soc::Ascend910_93 | Soc::Ascend910B => ty != U32,
        Soc::Ascend310B => !matches!(ty, U32 | BF16),
        Soc::Ascend310P => matches!(ty, F32 | F16 | I16),
        Soc::Ascend910 => ty == F32,
        Soc::IPV350 => false,
    }
}

/// `dst[i] = op(dst[i], src[i])` for `n` elements of `T`. Integers wrap on overflow (as the
/// hardware's adders do); floats follow IEEE (fp16 and bf16: computed in `f32` and rounded
/// once to nearest even, which is their correctly rounded result; see [`super::half`]).
/// Whether some element overflowed: `over(a, b, result)` said so (the floats: an infinite or
/// NaN result of finite operands, `overflow`).
///
/// # Safety
///
/// `dst` and `src` are valid for `n` elements (unaligned allowed).
unsafe fn apply<T: Copy>(
    dst: *mut u8,
    src: *const u8,
    n: usize,
    f: impl Fn(T, T) -> T,
    over: impl Fn(T, T, T) -> bool,
) -> bool {
    let (d, s) = (dst.cast::<T>(), src.cast::<T>());
    let mut overflowed = false;
    for i in 0..n {
        // SAFETY: i < n, in the ranges the caller vouches for.
        unsafe {
            let (a, b) = (d.add(i).read_unaligned(), s.add(i).read_unaligned());
            let v = f(a, b);
            overflowed |= over(a, b, v);
            d.add(i).write_unaligned(v);
        }
    }
    overflowed
}

/// The integers: they wrap, no overflow is noted.
fn never<T>(_: T, _: T, _: T) -> bool {
    false
}

/// A float overflow: finite operands, a result that is not.
fn float_over(a: f32, b: f32, r: f32) -> bool {
    a.is_finite() && b.is_finite() && !r.is_finite()
}

fn combine<T: PartialOrd>(op: ReduceOp, a: T, b: T, sum: impl Fn(T, T) -> T) -> T {
    match op {
        ReduceOp::Sum => sum(a, b),
        ReduceOp::Max => {
            if b > a {
                b
            } else {
                a
            }
        }
        ReduceOp::Min => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}

/// Reduces; whether a float element overflowed (`apply`).
fn run(dst: &DevRange, src: &DevRange, op: ReduceOp, ty: ReduceType) -> bool {
    let n = dst.len / ty.size();
    let (d, s) = (dst.ptr(), src.ptr().cast_const());
    macro_rules! go {
        ($t:ty, $sum:expr, $over:expr) => {
            // SAFETY: both ranges are `dst.len` bytes of live device memory (checked).
            unsafe { apply::<$t>(d, s, n, |a, b| combine(op, a, b, $sum), $over) }
        };
    }
    macro_rules! narrow {
        ($wide:expr, $back:expr) => {
            // SAFETY: as `go`.
            unsafe {
                apply::<u16>(
                    d,
                    s,
                    n,
                    |a, b| $back(combine(op, $wide(a), $wide(b), |x: f32, y| x + y)),
                    |a, b, r| float_over($wide(a), $wide(b), $wide(r)),
                )
            }
        };
    }
    match ty {
        ReduceType::F32 => go!(f32, |a, b| a + b, float_over),
        ReduceType::I32 => go!(i32, i32::wrapping_add, never),
        ReduceType::U32 => go!(u32, u32::wrapping_add, never),
        ReduceType::I16 => go!(i16, i16::wrapping_add, never),
        ReduceType::I8 => go!(i8, i8::wrapping_add, never),
        ReduceType::F16 => narrow!(f16_to_f32, f32_to_f16),
        ReduceType::BF16 => narrow!(bf16_to_f32, f32_to_bf16),
    }
}

impl Sim {
    /// `aclrtReduceAsync`: queues `dst = op(dst, src)` over `count` bytes of device memory on
    /// `stream`. Both ranges must be device memory of this process on the stream's device,
    /// checked when queued and again when the task runs.
    ///
    /// A range in a mapping of a reserved range (`aclrtMapMem`) is the physical memory mapped
    /// there.
    ///
    /// Errors: 207000 a type the SoC does not reduce ([`reduces`]); 107000 a count that is not
    /// a whole number of elements, a range outside the live allocations, host memory, memory
    /// of another device than the stream's, a range of a reserved range where nothing is
    /// mapped or over two mappings; 107017 bad stream; 507002.
    pub fn reduce_async(
        &self,
        dst: usize,
        src: usize,
        count: usize,
        op: ReduceOp,
        ty: ReduceType,
        stream: RawStream,
    ) -> Result<(), SimError> {
        self.mem_checked(|| {
            let soc = self.inner.soc;
            if !reduces(soc, ty) {
                return Err(SimError::new(
                    Error::FeatureNotSupport,
                    format!(
                        "the {} ({}) does not reduce {ty:?} (CANN documents aclrtReduceAsync's \
                         types per product)",
                        soc.product(),
                        soc.name()
                    ),
                ));
            }
            if count == 0 {
                return Ok(());
            }
            if !count.is_multiple_of(ty.size()) {
                return Err(SimError::new(
                    Error::ParamInvalid,
                    format!(
                        "count {count} is not a whole number of {}-byte elements",
                        ty.size()
                    ),
                ));
            }
            let (st, device) = self.stream(stream)?;
            let side = |addr: usize, what: &str| -> Result<(DevRange, Piece), SimError> {
                // A range in a mapping of a reserved range stands for its physical memory, as
                // for the copies and value tasks, and the task holds the mapping's mark.
                let piece = self.vmm_span(addr, count, what)?;
                let addr = piece.at;
                let r = self.device_range(addr, count, what)?.ok_or_else(|| {
                    SimError::new(
                        Error::ParamInvalid,
                        format!("the {what} {addr:#x} is not device memory of this process"),
                    )
                })?;
                if r.alloc.file.device() != device {
                    return Err(SimError::new(
                        Error::ParamInvalid,
                        format!(
                            "the {what} {addr:#x} is memory of device {}, but the stream \
                             is on device {device} (both sides of a reduce must be on the \
                             stream's device)",
                            r.alloc.file.device()
                        ),
                    ));
                }
                Ok((r, piece))
            };
            let ((d, dp), (s, sp)) = (side(dst, "destination")?, side(src, "source")?);
            // Where an overflow is noted (`overflow`): for the float types only.
            let status = match ty {
                ReduceType::F32 | ReduceType::F16 | ReduceType::BF16 => {
                    Some(self.overflow_range(device)?)
                }
                _ => None,
            };
            let task = Box::new(move |_: &TaskCtx| {
                let args = || serde_json::json!({"dst": dst, "src": src});
                crate::trace::span("memory", "reduce", args, || {
                    for (p, what) in [(&dp, "destination"), (&sp, "source")] {
                        if let Some(m) = &p.mark {
                            m.still(p.at, p.len, what)?;
                        }
                    }
                    d.still("destination")?;
                    s.still("source")?;
                    if run(&d, &s, op, ty)
                        && let Some(status) = &status
                    {
                        status.note_overflow();
                    }
                    Ok(())
                })
            });
            self.enqueue_job(&st, stream, SimJob::Other(task))
        })
    }
}

//! `aclrtRandomNumAsync` (`acl_rt.h`): a stream task that fills device memory with random
//! numbers of a distribution CANN documents — a dropout bitmask, uniform, normal, or truncated
//! normal — from a seed and a counter, as the device's random number generator does
//! (hicann/runtime `src/runtime/core/src/task/task_info/random_num_task.cc` names Philox4_32_10
//! for all four). The simulator generates with Philox4x32-10 too, keyed by the seed, its
//! counter starting at the 64-bit word at `randomCounterAddr`: the same seed and counter give
//! the same numbers. Operands given by address (`isAddr` 1), the counter among them, are read
//! from device memory when the task runs (`Sim::produce_async`).
//!
//! CANN's order and codes (`src/acl/aclrt_impl/kernel.cpp` `aclrtRandomNumAsyncImpl`, then
//! `src/runtime/api/api_c_kernel.cc`, `api/impl/api_error.cc` and `random_num_task.cc`):
//! taskInfo NULL or a data type outside int32, int64, uint32, uint64, bf16, fp16, fp32 →
//! 100000; a SoC without the generator (all but Ascend910_93 and Ascend910B; CANN's
//! documentation, `docs/zh/api_ref/12_execution_control.md`) → 207000; the stream; reserve not
//! NULL, a data type the function does not take (the bitmask and the normal distributions take
//! floating point only), NULL counter or result address, an operand whose `isAddr` is not 0 or
//! 1 or whose `size` is 0 or above its type's → 107000.
//!
//! What CANN leaves to its hardware is the simulator's choice, said here: a bitmask has one bit
//! per number (least significant first, `ceil(num / 8)` bytes), 1 with probability
//! `1 − ratio` (kept); uniform numbers lie in `[min, max)`; a truncated normal number lies
//! within two standard deviations of the mean (redrawn beyond, as TensorFlow's does).

use std::ffi::c_void;

use acl_notify_core::{Backend as _, Error, Soc};
use acl_notify_sim::SimError;
use acl_notify_sim::mem::half::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
use acl_notify_sim::mem::indirect::Word;

use crate::errmsg::{CallError, null_arg, param};
use crate::ffi::{aclError, aclrtStream, api};
use crate::session::runtime;

/// `aclrtRandomParaInfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ParaInfo {
    is_addr: u8,
    value_or_addr: [u8; 8],
    size: u8,
    rsv: [u8; 6],
}

/// `aclrtRandomNumTaskInfo`; the function's parameters (`aclrtRandomNumFuncParaInfo`'s union)
/// as two [`ParaInfo`]s (the bitmask's ratio is the first).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TaskInfo {
    data_type: i32,
    func_type: u32,
    params: [ParaInfo; 2],
    para_addr: *mut c_void,
    result_addr: *mut c_void,
    counter_addr: *mut c_void,
    seed: ParaInfo,
    num: ParaInfo,
    rsv: [u8; 8],
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(std::mem::size_of::<ParaInfo>() == 16);
    assert!(std::mem::offset_of!(TaskInfo, para_addr) == 40);
    assert!(std::mem::offset_of!(TaskInfo, seed) == 64);
    assert!(std::mem::size_of::<TaskInfo>() == 104);
};

/// The data types (`aclDataType`) CANN generates, with their sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    I32,
    I64,
    U32,
    U64,
    Bf16,
    F16,
    F32,
}

impl Ty {
    fn of(t: i32) -> Option<Ty> {
        Some(match t {
            3 => Ty::I32,
            9 => Ty::I64,
            8 => Ty::U32,
            10 => Ty::U64,
            27 => Ty::Bf16,
            1 => Ty::F16,
            0 => Ty::F32,
            _ => return None,
        })
    }

    fn size(self) -> usize {
        match self {
            Ty::Bf16 | Ty::F16 => 2,
            Ty::I32 | Ty::U32 | Ty::F32 => 4,
            Ty::I64 | Ty::U64 => 8,
        }
    }

    fn float(self) -> bool {
        matches!(self, Ty::Bf16 | Ty::F16 | Ty::F32)
    }

    /// A value of this type from its little-endian bits, as f64.
    fn value(self, bits: u64) -> f64 {
        match self {
            Ty::I32 => f64::from(bits as u32 as i32),
            Ty::I64 => bits as i64 as f64,
            Ty::U32 => f64::from(bits as u32),
            Ty::U64 => bits as f64,
            Ty::Bf16 => f64::from(bf16_to_f32(bits as u16)),
            Ty::F16 => f64::from(f16_to_f32(bits as u16)),
            Ty::F32 => f64::from(f32::from_bits(bits as u32)),
        }
    }

    /// `x` in this type's little-endian bytes.
    fn push(self, out: &mut Vec<u8>, x: f64) {
        match self {
            Ty::I32 => out.extend_from_slice(&(x as i32).to_le_bytes()),
            Ty::I64 => out.extend_from_slice(&(x as i64).to_le_bytes()),
            Ty::U32 => out.extend_from_slice(&(x as u32).to_le_bytes()),
            Ty::U64 => out.extend_from_slice(&(x as u64).to_le_bytes()),
            Ty::Bf16 => out.extend_from_slice(&f32_to_bf16(x as f32).to_le_bytes()),
            Ty::F16 => out.extend_from_slice(&f32_to_f16(x as f32).to_le_bytes()),
            Ty::F32 => out.extend_from_slice(&(x as f32).to_le_bytes()),
        }
    }
}

/// `aclrtRandomNumFuncType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Func {
    Dropout,
    Uniform,
    Normal,
    TruncatedNormal,
}

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC11).
fn philox(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let (mut c, mut k) = (counter, key);
    for _ in 0..10 {
        let p0 = M0 * u64::from(c[0]);
        let p1 = M1 * u64::from(c[2]);
        c = [
            (p1 >> 32) as u32 ^ c[1] ^ k[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
    }
    c
}

/// 32-bit random words of the Philox stream keyed by `seed`, from block `counter` on.
struct Stream {
    key: [u32; 2],
    block: u64,
    buf: [u32; 4],
    used: usize,
}

impl Stream {
    fn new(seed: u64, counter: u64) -> Stream {
        Stream {
            key: [seed as u32, (seed >> 32) as u32],
            block: counter,
            buf: [0; 4],
            used: 4,
        }
    }

    fn next(&mut self) -> u32 {
        if self.used == 4 {
            let b = self.block;
            self.buf = philox([b as u32, (b >> 32) as u32, 0, 0], self.key);
            self.block = b.wrapping_add(1);
            self.used = 0;
        }
        self.used += 1;
        self.buf[self.used - 1]
    }

    /// Uniform in [0, 1), 53 bits.
    fn unit(&mut self) -> f64 {
        let x = (u64::from(self.next()) << 21) ^ u64::from(self.next() >> 11);
        x as f64 / (1u64 << 53) as f64
    }

    fn u64(&mut self) -> u64 {
        (u64::from(self.next()) << 32) | u64::from(self.next())
    }

    /// Standard normal (Box–Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The most numbers one task generates (the simulator's bound: the buffer is made on the host).
const MAX_NUM: u64 = 1 << 28;

fn task_error(msg: String) -> SimError {
    SimError::new(Error::ParamInvalid, msg)
}

/// The numbers, as bytes: `values` are the seed, the count, the counter, then the function's
/// two parameters' bits.
fn generate(ty: Ty, func: Func, values: &[u64]) -> Result<Vec<u8>, SimError> {
    let [seed, num, counter, a, b] = values else {
        return Err(task_error("operands missing".into()));
    };
    if *num > MAX_NUM {
        return Err(task_error(format!(
            "randomNum {num} is above {MAX_NUM}, the most the simulator generates in one task"
        )));
    }
    let n = *num as usize;
    let mut s = Stream::new(*seed, *counter);
    let (a, b) = (ty.value(*a), ty.value(*b));
    let mut out = Vec::with_capacity(n * ty.size());
    match func {
        Func::Dropout => {
            if !(0.0..=1.0).contains(&a) {
                return Err(task_error(format!("dropout ratio {a} is not in [0, 1]")));
            }
            out.resize(n.div_ceil(8), 0);
            for i in 0..n {
                if s.unit() >= a {
                    out[i / 8] |= 1 << (i % 8);
                }
            }
        }
        Func::Uniform if ty.float() => {
            if b < a {
                return Err(task_error(format!("max {b} is below min {a}")));
            }
            for _ in 0..n {
                ty.push(&mut out, a + (b - a) * s.unit());
            }
        }
        Func::Uniform => {
            // Integers: exact, in [min, max).
            let signed = matches!(ty, Ty::I32 | Ty::I64);
            let (lo, hi) = if signed {
                (values[3] as i64 as i128, values[4] as i64 as i128)
            } else {
                (i128::from(values[3]), i128::from(values[4]))
            };
            let (lo, hi) = match ty {
                Ty::I32 => (lo as i32 as i128, hi as i32 as i128),
                Ty::U32 => (lo as u32 as i128, hi as u32 as i128),
                _ => (lo, hi),
            };
            if hi <= lo {
                return Err(task_error(format!("max {hi} is not above min {lo}")));
            }
            let span = (hi - lo) as u128;
            for _ in 0..n {
                let v = lo + (u128::from(s.u64()) % span) as i128;
                match ty {
                    Ty::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
                    Ty::U32 => out.extend_from_slice(&(v as u32).to_le_bytes()),
                    Ty::I64 => out.extend_from_slice(&(v as i64).to_le_bytes()),
                    _ => out.extend_from_slice(&(v as u64).to_le_bytes()),
                }
            }
        }
        Func::Normal | Func::TruncatedNormal => {
            if b.is_nan() || b < 0.0 {
                return Err(task_error(format!("stddev {b} is negative")));
            }
            for _ in 0..n {
                let mut z = s.normal();
                while func == Func::TruncatedNormal && z.abs() > 2.0 {
                    z = s.normal();
                }
                ty.push(&mut out, a + b * z);
            }
        }
    }
    Ok(out)
}

/// An operand's [`Word`]: its value, or the address of a value of `bytes` bytes.
fn word(p: &ParaInfo, bytes: usize) -> Word {
    let v = u64::from_le_bytes(p.value_or_addr);
    match (p.is_addr, bytes) {
        (1, 8) => Word::At(v as usize, 0),
        (1, _) => Word::At32(v as usize),
        _ => {
            let keep = usize::from(p.size).min(8);
            let mask = if keep == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * keep)) - 1
            };
            Word::Given(v & mask)
        }
    }
}

/// 107000 unless `isAddr` is 0 or 1 and `size` is in [1, `max`] (8 for an address).
fn check_param(p: &ParaInfo, name: &str, max: usize) -> Result<(), CallError> {
    if p.is_addr > 1 {
        return Err(param(format!("{name}.isAddr is {}: 0 or 1", p.is_addr)));
    }
    let max = if p.is_addr == 1 { 8 } else { max };
    if p.size == 0 || usize::from(p.size) > max {
        return Err(param(format!(
            "{name}.size is {}: it must be in [1, {max}]",
            p.size
        )));
    }
    Ok(())
}

/// `aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo *taskInfo, const aclrtStream
/// stream, void *reserve)`.
///
/// Codes: see the module docs; the task fails with 107000 for a result range outside live
/// device memory, a count above 2²⁸, max not above min, a negative stddev, a ratio outside
/// [0, 1].
///
/// # Safety
///
/// `task_info` is NULL or readable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn aclrtRandomNumAsync(
    task_info: *const TaskInfo,
    stream: aclrtStream,
    reserve: *mut c_void,
) -> aclError {
    api("aclrtRandomNumAsync", || {
        // SAFETY: NULL or readable by the caller's contract.
        let Some(t) = (unsafe { task_info.as_ref() }).copied() else {
            return Err(null_arg("taskInfo"));
        };
        let ty = Ty::of(t.data_type).ok_or_else(|| {
            CallError::new(
                Error::InvalidParam,
                format!(
                    "taskInfo->dataType {} is not supported (ACL_INT32, ACL_INT64, ACL_UINT32, \
                     ACL_UINT64, ACL_BF16, ACL_FLOAT16, ACL_FLOAT)",
                    t.data_type
                ),
            )
        })?;
        let rt = runtime()?;
        let sim = rt.backend();
        if !matches!(sim.soc(), Soc::Ascend910_93 | Soc::Ascend910B) {
            return Err(CallError::new(
                Error::FeatureNotSupport,
                format!(
                    "aclrtRandomNumAsync is not supported on {}",
                    sim.soc().name()
                ),
            ));
        }
        let s = rt.resolve_task_stream(stream.addr())?;
        if !reserve.is_null() {
            return Err(param("reserve is a reserved parameter and must be NULL"));
        }
        let func = match t.func_type {
            0 => Func::Dropout,
            1 => Func::Uniform,
            2 => Func::Normal,
            3 => Func::TruncatedNormal,
            f => {
                return Err(param(format!(
                    "funcType {f} is not an aclrtRandomNumFuncType (0 to 3)"
                )));
            }
        };
        if func != Func::Uniform && !ty.float() {
            return Err(param(format!(
                "{func:?} takes bf16, fp16 or fp32 numbers, not dataType {}",
                t.data_type
            )));
        }
        if t.counter_addr.is_null() {
            return Err(param("taskInfo->randomCounterAddr is NULL"));
        }
        if t.result_addr.is_null() {
            return Err(param("taskInfo->randomResultAddr is NULL"));
        }
        check_param(&t.seed, "randomSeed", 8)?;
        check_param(&t.num, "randomNum", 8)?;
        let (first, second) = match func {
            Func::Dropout => ("dropoutRation", None),
            Func::Uniform => ("min", Some("max")),
            Func::Normal | Func::TruncatedNormal => ("mean", Some("stddev")),
        };
        check_param(&t.params[0], first, ty.size())?;
        if let Some(second) = second {
            check_param(&t.params[1], second, ty.size())?;
        }
        let b = if second.is_some() {
            word(&t.params[1], ty.size())
        } else {
            Word::Given(0)
        };
        let words = vec![
            (word(&t.seed, 8), "randomSeed"),
            (word(&t.num, 8), "randomNum"),
            (Word::At(t.counter_addr.addr(), 0), "randomCounter"),
            (word(&t.params[0], ty.size()), first),
            (b, second.unwrap_or("unused")),
        ];
        sim.produce_async(
            t.result_addr.addr(),
            words,
            Box::new(move |v| generate(ty, func, v)),
            s,
        )
        .map_err(CallError::backend)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_published_known_answers() {
        // Random123's kat_vectors for philox4x32_10.
        assert_eq!(
            philox([0, 0, 0, 0], [0, 0]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox(
                [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
                [0xa409_3822, 0x299f_31d0]
            ),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn the_distributions_have_their_moments() {
        let n = 200_000u64;
        let stats = |bytes: &[u8]| {
            let xs: Vec<f64> = bytes
                .chunks(4)
                .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
                .collect();
            let m = xs.iter().sum::<f64>() / xs.len() as f64;
            let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / xs.len() as f64;
            (m, v, xs)
        };
        let f = |x: f32| u64::from(x.to_bits());
        let u = generate(Ty::F32, Func::Uniform, &[7, n, 0, f(2.0), f(6.0)]).unwrap();
        let (m, v, xs) = stats(&u);
        assert!(
            (m - 4.0).abs() < 0.02 && (v - 16.0 / 12.0).abs() < 0.03,
            "{m} {v}"
        );
        assert!(xs.iter().all(|x| (2.0..6.0).contains(x)));
        let g = generate(Ty::F32, Func::Normal, &[7, n, 0, f(1.0), f(3.0)]).unwrap();
        let (m, v, _) = stats(&g);
        assert!((m - 1.0).abs() < 0.03 && (v - 9.0).abs() < 0.15, "{m} {v}");
        let t = generate(Ty::F32, Func::TruncatedNormal, &[7, n, 0, f(0.0), f(1.0)]).unwrap();
        let (m, v, xs) = stats(&t);
        assert!(m.abs() < 0.01 && (v - 0.7737).abs() < 0.01, "{m} {v}");
        assert!(xs.iter().all(|x| x.abs() <= 2.0));
        let d = generate(Ty::F32, Func::Dropout, &[7, n, 0, f(0.25), 0]).unwrap();
        let ones: u32 = d.iter().map(|b| b.count_ones()).sum();
        assert_eq!(d.len(), n.div_ceil(8) as usize);
        assert!((f64::from(ones) / n as f64 - 0.75).abs() < 0.01, "{ones}");
        // Same seed and counter, same numbers; another counter, others.
        assert_eq!(
            u,
            generate(Ty::F32, Func::Uniform, &[7, n, 0, f(2.0), f(6.0)]).unwrap()
        );
        assert_ne!(
            u,
            generate(Ty::F32, Func::Uniform, &[7, n, 1, f(2.0), f(6.0)]).unwrap()
        );
        // Integers in [min, max).
        let i = generate(
            Ty::I32,
            Func::Uniform,
            &[1, 1000, 0, (-3i32) as u32 as u64, 4],
        )
        .unwrap();
        let is: Vec<i32> = i
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert!(is.iter().all(|x| (-3..4).contains(x)) && is.contains(&-3) && is.contains(&3));
    }
}

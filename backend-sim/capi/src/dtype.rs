//! The data types of `acl_base_rt.h`: `aclDataTypeSize` and the `aclFloat16` conversions
//! `aclFloat16ToFloat` / `aclFloatToFloat16`, as CANN computes them (hicann/runtime
//! `src/acl/aclrt_impl/data_buffer.cpp`, `aclDataTypeSizeImpl`;
//! `src/acl/aclrt_impl/types/fp16_impl.cpp`, `Fp16ToFloat` / `FloatToFp16`; documented in
//! `docs/zh/api_ref/24_other_APIs.md`).
//!
//! The conversions are IEEE binary16 ↔ binary32 for every finite value — exact from half to
//! float, rounded to nearest with ties to even from float to half, subnormal halves included —
//! but, as CANN documents, *not* for infinities and NaNs:
//!
//! - float → half saturates: a float beyond the largest half (65504) after rounding, an
//!   infinity or a NaN becomes ±65504 (`0x7BFF` / `0xFBFF`, the sign of the input kept);
//! - half → float reads the all-ones exponent as an ordinary one: +Inf (`0x7C00`) is 65536.0,
//!   the quiet NaN `0x7E00` is 98304.0, `0x7C00 | m` is (1 + m/1024) · 2¹⁶.
//!
//! A program written for CANN sees the same numbers here as on the device's runtime.

use acl_notify_core::Error;
use acl_notify_sim::mem::half;

use crate::errmsg::{self, CallError};

/// The largest finite half, 65504, with the sign bit clear.
const HALF_MAX: u16 = 0x7BFF;

/// `aclFloat16ToFloat`'s value: `h` exactly, its all-ones exponent read as 2¹⁶ (see the
/// module). The finite halves are the simulator's IEEE widening (`mem::half`, which the
/// device's reduce uses).
pub(crate) fn half_to_float(h: u16) -> f32 {
    if h & 0x7C00 != 0x7C00 {
        return half::f16_to_f32(h);
    }
    // CANN's `Fp16ToFloat` rebiases exponent 31 as any other: 31 - 15 + 127 = 143, 2¹⁶.
    let sign = u32::from(h >> 15) << 31;
    let man = u32::from(h & 0x3FF);
    f32::from_bits(sign | (143 << 23) | (man << 13))
}

/// `aclFloatToFloat16`'s value: `x` rounded to the nearest half, ties to even, saturated at
/// ±65504 (infinities and NaNs too: see the module). IEEE narrowing (`mem::half`) gives the
/// same bits for every result that is finite, and an infinity or a NaN exactly where CANN
/// saturates (a float of 65520 or more in magnitude rounds to infinity there).
pub(crate) fn float_to_half(x: f32) -> u16 {
    let h = half::f32_to_f16(x);
    if h & 0x7C00 == 0x7C00 {
        (h & 0x8000) | HALF_MAX
    } else {
        h
    }
}

/// `aclDataType` values whose size CANN knows, with that size in bytes (`aclDataTypeSizeImpl`;
/// the 4-bit and 1-bit types take a byte).
const SIZES: &[(i32, usize)] = &[
    (-1, 0),  // ACL_DT_UNDEFINED
    (0, 4),   // ACL_FLOAT
    (1, 2),   // ACL_FLOAT16
    (2, 1),   // ACL_INT8
    (3, 4),   // ACL_INT32
    (4, 1),   // ACL_UINT8
    (6, 2),   // ACL_INT16
    (7, 2),   // ACL_UINT16
    (8, 4),   // ACL_UINT32
    (9, 8),   // ACL_INT64
    (10, 8),  // ACL_UINT64
    (11, 8),  // ACL_DOUBLE
    (12, 1),  // ACL_BOOL
    (13, 0),  // ACL_STRING
    (16, 8),  // ACL_COMPLEX64
    (17, 16), // ACL_COMPLEX128
    (27, 2),  // ACL_BF16
    (29, 1),  // ACL_INT4
    (30, 1),  // ACL_UINT1
    (33, 4),  // ACL_COMPLEX32
    (34, 1),  // ACL_HIFLOAT8
    (35, 1),  // ACL_FLOAT8_E5M2
    (36, 1),  // ACL_FLOAT8_E4M3FN
    (37, 1),  // ACL_FLOAT8_E8M0
    (38, 8),  // ACL_FLOAT6_E3M2: CANN's switch has no case for it (its default, 8)
    (39, 8),  // ACL_FLOAT6_E2M3: likewise
    (40, 8),  // ACL_FLOAT4_E2M1: likewise
    (41, 8),  // ACL_FLOAT4_E1M2: likewise
];

/// What CANN answers for a value outside `aclDataType` (its switch's `default`).
const UNKNOWN_SIZE: usize = 8;

/// `aclDataTypeSize`'s answer, and whether `data_type` is an `aclDataType` at all.
pub(crate) fn data_type_size(data_type: i32) -> (usize, bool) {
    SIZES
        .iter()
        .find(|(t, _)| *t == data_type)
        .map_or((UNKNOWN_SIZE, false), |&(_, s)| (s, true))
}

/// `float aclFloat16ToFloat(aclFloat16 value)`: see the module.
#[unsafe(no_mangle)]
pub extern "C" fn aclFloat16ToFloat(value: u16) -> f32 {
    half_to_float(value)
}

/// `aclFloat16 aclFloatToFloat16(float value)`: see the module.
#[unsafe(no_mangle)]
pub extern "C" fn aclFloatToFloat16(value: f32) -> u16 {
    float_to_half(value)
}

/// `size_t aclDataTypeSize(aclDataType dataType)`: the size of one element in bytes; 0 for
/// `ACL_DT_UNDEFINED` and `ACL_STRING`, 1 for the sub-byte types. A value that is no
/// `aclDataType` answers 8, as CANN's does, and records a message saying so.
#[unsafe(no_mangle)]
pub extern "C" fn aclDataTypeSize(data_type: i32) -> usize {
    let (size, known) = data_type_size(data_type);
    if !known {
        errmsg::record(
            "aclDataTypeSize",
            &CallError::new(
                Error::InvalidParam,
                format!(
                    "dataType {data_type} is not an aclDataType (answered {UNKNOWN_SIZE}, as \
                     CANN answers any value its table lacks)"
                ),
            ),
        );
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of half `h` by the definition of binary16, in f64 (exact), `None` for the
    /// all-ones exponent.
    fn half_value(h: u16) -> Option<f64> {
        let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let e = i32::from((h >> 10) & 0x1F);
        let m = f64::from(h & 0x3FF);
        match e {
            31 => None,
            0 => Some(s * m * 2f64.powi(-24)),
            _ => Some(s * (1024.0 + m) * 2f64.powi(e - 25)),
        }
    }

    #[test]
    fn every_half_converts_exactly_and_round_trips() {
        for h in 0..=u16::MAX {
            let f = half_to_float(h);
            match half_value(h) {
                Some(v) => {
                    assert_eq!(f64::from(f), v, "{h:#06x}");
                    assert_eq!(f.is_sign_negative(), h & 0x8000 != 0, "{h:#06x}: sign");
                    assert_eq!(float_to_half(f), h, "{h:#06x} did not round-trip");
                }
                None => {
                    // CANN's reading of Inf and NaN, then its saturation on the way back.
                    let m = f64::from(h & 0x3FF);
                    let s = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
                    assert_eq!(f64::from(f), s * (1.0 + m / 1024.0) * 65536.0, "{h:#06x}");
                    assert_eq!(float_to_half(f), (h & 0x8000) | HALF_MAX, "{h:#06x}");
                }
            }
        }
    }

    /// The nearest half to `x` (ties to the even mantissa), saturated, by searching the
    /// finite halves in exact arithmetic: an implementation independent of `float_to_half`.
    fn reference(x: f32) -> u16 {
        let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
        if !x.is_finite() {
            return sign | HALF_MAX;
        }
        let a = f64::from(x.abs());
        // Positive finite halves 0..=0x7BFF are increasing: the last one not above `a`.
        let (mut lo, mut hi) = (0u16, HALF_MAX);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if half_value(mid).unwrap() <= a {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        if lo == HALF_MAX {
            // Above 65504: 65520 (half way to 2¹⁶) and up would round to 2¹⁶; saturate.
            return sign | HALF_MAX;
        }
        let (below, above) = (half_value(lo).unwrap(), half_value(lo + 1).unwrap());
        let pick = if a - below < above - a || (a - below == above - a && lo & 1 == 0) {
            lo
        } else {
            lo + 1
        };
        sign | pick
    }

    #[test]
    fn floats_round_to_the_nearest_half_ties_to_even() {
        // Every float next to a boundary between two halves (the midpoints, one ulp either
        // side) and next to each half itself, then a stride through all the others.
        let mut checked = 0u64;
        let mut check = |x: f32| {
            assert_eq!(
                float_to_half(x),
                reference(x),
                "{x:e} ({:#010x})",
                x.to_bits()
            );
            checked += 1;
        };
        for h in 0..HALF_MAX {
            let (a, b) = (half_value(h).unwrap(), half_value(h + 1).unwrap());
            let mid = ((a + b) / 2.0) as f32; // exact: a midpoint has 12 significant bits
            for x in [mid, half_value(h).unwrap() as f32] {
                for d in [-2i32, -1, 0, 1, 2] {
                    let y = f32::from_bits(x.to_bits().wrapping_add_signed(d));
                    check(y);
                    check(-y);
                }
            }
        }
        for bits in (0..=u32::MAX).step_by(9973) {
            check(f32::from_bits(bits));
        }
        assert!(checked > 1_000_000);
    }

    #[test]
    fn known_values() {
        for (x, h) in [
            (0.0f32, 0x0000u16),
            (-0.0, 0x8000),
            (1.0, 0x3C00),
            (-2.0, 0xC000),
            (0.5, 0x3800),
            (65504.0, 0x7BFF),
            (65519.0, 0x7BFF),
            (65520.0, 0x7BFF), // IEEE would round to +Inf; CANN saturates
            (1e10, 0x7BFF),
            (f32::INFINITY, 0x7BFF),
            (f32::NEG_INFINITY, 0xFBFF),
            (f32::NAN, 0x7BFF),
            (-f32::NAN, 0xFBFF),
            (6.103_515_6e-5, 0x0400), // smallest normal, 2⁻¹⁴
            (5.960_464_5e-8, 0x0001), // smallest subnormal, 2⁻²⁴
            (2.980_232_2e-8, 0x0000), // 2⁻²⁵: a tie, to even (0)
            (2.980_233e-8, 0x0001),   // just above it
            (8.940_697e-8, 0x0002),   // 1.5 · 2⁻²⁴: a tie, to even (2)
            (0.1, 0x2E66),
            (1.0 / 3.0, 0x3555),
            (std::f32::consts::PI, 0x4248),
            (1.000_488_3, 0x3C00), // 1 + 2⁻¹¹: a tie, to even (1.0)
            (1.001_464_8, 0x3C02), // 1 + 3·2⁻¹¹: a tie, to even (1 + 2⁻⁹)
            (2048.0, 0x6800),
            (2049.0, 0x6800), // ties to even
            (2051.0, 0x6802),
        ] {
            assert_eq!(float_to_half(x), h, "{x:e}");
        }
        assert_eq!(half_to_float(0x7C00), 65536.0);
        assert_eq!(half_to_float(0xFC00), -65536.0);
        assert_eq!(half_to_float(0x7E00), 98304.0);
        assert_eq!(half_to_float(0x3555), 0.333_251_95);
        assert_eq!(half_to_float(0x0001), 2f32.powi(-24));
        assert_eq!(half_to_float(0x03FF), 1023.0 * 2f32.powi(-24));
    }

    #[test]
    fn data_type_sizes_are_canns() {
        assert_eq!(data_type_size(0), (4, true)); // ACL_FLOAT
        assert_eq!(data_type_size(1), (2, true)); // ACL_FLOAT16
        assert_eq!(data_type_size(17), (16, true)); // ACL_COMPLEX128
        assert_eq!(data_type_size(13), (0, true)); // ACL_STRING
        assert_eq!(data_type_size(-1), (0, true));
        assert_eq!(data_type_size(29), (1, true)); // ACL_INT4
        assert_eq!(data_type_size(5), (8, false)); // a gap in the enum
        assert_eq!(data_type_size(1000), (8, false));
    }
}

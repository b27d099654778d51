//! IEEE half precision (fp16) and bfloat16 to and from `f32`, for `aclrtReduceAsync` on those
//! types: widening is exact; narrowing rounds to nearest, ties to even, overflowing to
//! infinity, keeping NaNs NaN.
//!
//! A reduce computes in `f32` and narrows once. That gives the correctly rounded fp16 or
//! bf16 result of the sum, max or min of two values: the sum of two `p`-bit floats rounded to
//! `q >= 2p + 2` bits and then to `p` bits is the sum rounded once to `p` bits (no double
//! rounding error), and `f32`'s 24 bits are `2 * 11 + 2` for fp16 and more than `2 * 8 + 2`
//! for bf16.

/// fp16 bits → `f32` (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: man × 2⁻²⁴, exact in f32.
            let v = man as f32 * f32::from_bits(0x3380_0000);
            return if sign != 0 { -v } else { v };
        }
        (0x1f, _) => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// `f32` → fp16 bits, rounded to nearest, ties to even.
pub fn f32_to_f16(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        // Infinity, or a NaN kept quiet (and kept a NaN if its payload was all low bits).
        let nan = if man != 0 {
            0x200 | (man >> 13) as u16
        } else {
            0
        };
        return sign | 0x7c00 | nan;
    }
    // The biased fp16 exponent.
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let (kept, rest, half) = if e >= 1 {
        (((e as u32) << 10) | (man >> 13), man & 0x1fff, 0x1000)
    } else if e >= -10 {
        // Subnormal in fp16: the significand with its implicit bit, shifted into place.
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        (m >> shift, m & ((1 << shift) - 1), 1 << (shift - 1))
    } else {
        // Less than half the smallest subnormal.
        return sign;
    };
    let up = rest > half || (rest == half && kept & 1 == 1);
    // A carry out of the significand moves into the exponent, as it should (up to infinity).
    sign | (kept + u32::from(up)) as u16
}

/// bfloat16 bits → `f32` (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// `f32` → bfloat16 bits, rounded to nearest, ties to even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let b = x.to_bits();
    if x.is_nan() {
        return ((b >> 16) | 0x40) as u16;
    }
    let lsb = (b >> 16) & 1;
    (b.wrapping_add(0x7fff + lsb) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_f16_survives_the_round_trip() {
        for h in 0..=u16::MAX {
            let x = f16_to_f32(h);
            if x.is_nan() {
                assert!(f16_to_f32(f32_to_f16(x)).is_nan(), "{h:#06x}");
            } else {
                assert_eq!(f32_to_f16(x), h, "{h:#06x} → {x}");
            }
        }
    }

    #[test]
    fn every_bf16_survives_the_round_trip() {
        for h in 0..=u16::MAX {
            let x = bf16_to_f32(h);
            if x.is_nan() {
                assert!(bf16_to_f32(f32_to_bf16(x)).is_nan(), "{h:#06x}");
            } else {
                assert_eq!(f32_to_bf16(x), h, "{h:#06x} → {x}");
            }
        }
    }

    #[test]
    fn f16_values_and_rounding() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0x7bff), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f16_to_f32(0xc000), -2.0);
        // Ties to even: 1 + 2⁻¹¹ is halfway between 1 (even) and 1 + 2⁻¹⁰.
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11) + 2f32.powi(-20)), 0x3c01);
        // Overflow: 65520 is halfway between 65504 (odd) and 65536 (infinity).
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(-1e9), 0xfc00);
        // Subnormals, and the carry from the largest subnormal to the smallest normal.
        assert_eq!(f32_to_f16(3.0 * 2f32.powi(-25)), 0x0002);
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0x0000);
        assert_eq!(f32_to_f16(2f32.powi(-25) * 1.5), 0x0001);
        assert_eq!(f32_to_f16(1023.5 * 2f32.powi(-24)), 0x0400);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
        assert!(f16_to_f32(f32_to_f16(f32::NAN)).is_nan());
    }

    #[test]
    fn bf16_values_and_rounding() {
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)), 0x3f80);
        assert_eq!(f32_to_bf16(1.0 + 3.0 * 2f32.powi(-8)), 0x3f82);
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8) + 2f32.powi(-20)), 0x3f81);
        assert_eq!(f32_to_bf16(f32::MAX), 0x7f80);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
    }
}

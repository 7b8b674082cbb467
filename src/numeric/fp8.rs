//! float8 conversions with torch's exact rounding (c10 `Float8_e4m3fn.h`, `Float8_e5m2.h`):
//! float32 input, round to nearest even; e4m3fn has no infinity, so every value of magnitude
//! ≥ 480 (the first one that would round above 448), infinities and NaN become NaN (not saturated).

/// Encodes an f32 as float8_e4m3fn.
pub fn e4m3fn_from_f32(x: f32) -> u8 {
    const FP8_MAX: u32 = 1087 << 20; // 480.0
    const DENORM_MASK: u32 = 141 << 23;
    let mut bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    bits ^= sign;
    let code = if bits >= FP8_MAX {
        0x7f
    } else if bits < (121 << 23) {
        // Below 2^-6, the smallest normal: let float addition do the subnormal rounding.
        let sum = f32::from_bits(bits) + f32::from_bits(DENORM_MASK);
        sum.to_bits().wrapping_sub(DENORM_MASK) as u8
    } else {
        let mant_odd = (bits >> 20) & 1;
        bits = bits.wrapping_add((((7i32 - 127) as u32) << 23).wrapping_add(0x7FFFF));
        bits = bits.wrapping_add(mant_odd);
        (bits >> 20) as u8
    };
    code | (sign >> 24) as u8
}

/// Decodes a float8_e4m3fn code.
pub fn e4m3fn_to_f32(code: u8) -> f32 {
    let sign = if code & 0x80 != 0 { -1.0f32 } else { 1.0 };
    let exp = (code >> 3) & 0xf;
    let mant = (code & 0x7) as f32;
    if exp == 0xf && code & 0x7 == 0x7 {
        return f32::NAN;
    }
    let magnitude = if exp == 0 {
        mant / 8.0 * 2f32.powi(-6)
    } else {
        (1.0 + mant / 8.0) * 2f32.powi(exp as i32 - 7)
    };
    sign * magnitude
}

/// Encodes an f32 as float8_e5m2 (overflow becomes infinity, NaN stays NaN).
pub fn e5m2_from_f32(x: f32) -> u8 {
    const FP32_INF: u32 = 255 << 23;
    const FP8_MAX: u32 = 143 << 23;
    const DENORM_MASK: u32 = 134 << 23;
    let mut bits = x.to_bits();
    let sign = bits & 0x8000_0000;
    bits ^= sign;
    let code = if bits >= FP8_MAX {
        if bits > FP32_INF { 0x7f } else { 0x7c }
    } else if bits < (113 << 23) {
        let sum = f32::from_bits(bits) + f32::from_bits(DENORM_MASK);
        sum.to_bits().wrapping_sub(DENORM_MASK) as u8
    } else {
        let mant_odd = (bits >> 21) & 1;
        bits = bits.wrapping_add((((15i32 - 127) as u32) << 23).wrapping_add(0xFFFFF));
        bits = bits.wrapping_add(mant_odd);
        (bits >> 21) as u8
    };
    code | (sign >> 24) as u8
}

/// Decodes a float8_e5m2 code (the top byte of an IEEE half).
pub fn e5m2_to_f32(code: u8) -> f32 {
    half::f16::from_bits((code as u16) << 8).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e4m3fn_every_code_round_trips() {
        for code in 0u8..=255 {
            let x = e4m3fn_to_f32(code);
            if x.is_nan() {
                assert_eq!(code & 0x7f, 0x7f);
                continue;
            }
            // -0.0 encodes back to 0x80.
            assert_eq!(e4m3fn_from_f32(x), code, "code {code:#04x} value {x}");
        }
    }

    #[test]
    fn e4m3fn_neighbours_round_to_nearest_even() {
        // Walk the positive finite codes: a midpoint between two neighbours rounds to the one with
        // an even mantissa; just above or below it rounds to the nearer one.
        for code in 0u8..0x7e {
            let lo = e4m3fn_to_f32(code);
            let hi = e4m3fn_to_f32(code + 1);
            let mid = (lo + hi) / 2.0;
            let even = if code % 2 == 0 { code } else { code + 1 };
            assert_eq!(e4m3fn_from_f32(mid), even, "midpoint of {lo} and {hi}");
            assert_eq!(e4m3fn_from_f32(mid - (hi - lo) / 64.0), code);
            assert_eq!(e4m3fn_from_f32(mid + (hi - lo) / 64.0), code + 1);
            assert_eq!(e4m3fn_from_f32(-mid - (hi - lo) / 64.0), (code + 1) | 0x80);
        }
    }

    #[test]
    fn e4m3fn_overflow_is_nan_not_saturation() {
        assert_eq!(e4m3fn_to_f32(0x7e), 448.0);
        // 464 is the midpoint between 448 and the NaN code: ties go to 448 (even), anything
        // above becomes NaN, as in torch.
        assert_eq!(e4m3fn_from_f32(464.0), 0x7e);
        assert_eq!(e4m3fn_from_f32(465.0), 0x7f);
        assert_eq!(e4m3fn_from_f32(480.0), 0x7f);
        assert_eq!(e4m3fn_from_f32(f32::INFINITY), 0x7f);
        assert_eq!(e4m3fn_from_f32(f32::NEG_INFINITY), 0xff);
        assert_eq!(e4m3fn_from_f32(f32::NAN), 0x7f);
        // Smallest subnormal is 2^-9; half of it ties to zero (even).
        assert_eq!(e4m3fn_to_f32(0x01), 2f32.powi(-9));
        assert_eq!(e4m3fn_from_f32(2f32.powi(-10)), 0x00);
        assert_eq!(e4m3fn_from_f32(1.5 * 2f32.powi(-9)), 0x02);
    }

    #[test]
    fn e5m2_matches_half_truncation() {
        for code in 0u8..=255 {
            let x = e5m2_to_f32(code);
            if !x.is_nan() {
                assert_eq!(e5m2_from_f32(x), code);
            }
        }
        assert_eq!(e5m2_from_f32(1e6), 0x7c);
    }
}

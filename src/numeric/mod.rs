//! Rounding to the storage dtypes of the stacks: f16/bf16 through `half`, fp8 as torch converts.

mod fp8;

pub use fp8::{e4m3fn_from_f32, e4m3fn_to_f32, e5m2_from_f32, e5m2_to_f32};

use crate::call::Dtype;
use half::{bf16, f16};

/// The value `x` takes when stored in a tensor of `dtype` (round to nearest even; integers
/// truncate toward zero as `tensor.to(int)` does).
pub fn round_to(dtype: Dtype, x: f64) -> f64 {
    match dtype {
        Dtype::Float16 => f16::from_f64(x).to_f64(),
        Dtype::Bfloat16 => bf16::from_f64(x).to_f64(),
        // torch converts to fp8 from float32.
        Dtype::Float8E4m3fn => e4m3fn_to_f32(e4m3fn_from_f32(x as f32)) as f64,
        Dtype::Float8E5m2 => e5m2_to_f32(e5m2_from_f32(x as f32)) as f64,
        Dtype::Float32 => x as f32 as f64,
        Dtype::Float64 => x,
        Dtype::Bool => (x != 0.0) as u8 as f64,
        Dtype::Int8 => (x as i8) as f64,
        Dtype::Uint8 => (x as u8) as f64,
        Dtype::Int16 => (x as i16) as f64,
        Dtype::Int32 => (x as i32) as f64,
        Dtype::Int64 => (x as i64) as f64,
    }
}

/// The spacing of `dtype`'s values at `|x|`: the distance from `|x|` (rounded to `dtype`) to the
/// next larger value; 0 where there is none (the largest finite value, NaN) and for the types
/// without a rounding slack (fp8 is judged by its own tolerance, integers and f64 exactly).
pub fn ulp(dtype: Dtype, x: f64) -> f64 {
    let x = x.abs();
    let spacing = match dtype {
        Dtype::Float16 => {
            let v = f16::from_f64(x);
            f16::from_bits(v.to_bits() + 1).to_f64() - v.to_f64()
        }
        Dtype::Bfloat16 => {
            let v = bf16::from_f64(x);
            bf16::from_bits(v.to_bits() + 1).to_f64() - v.to_f64()
        }
        Dtype::Float32 => {
            let v = x as f32;
            f64::from(f32::from_bits(v.to_bits() + 1)) - f64::from(v)
        }
        _ => 0.0,
    };
    if spacing.is_finite() { spacing } else { 0.0 }
}

/// Rounds every element in place.
pub fn round_slice(dtype: Dtype, xs: &mut [f64]) {
    if dtype != Dtype::Float64 {
        xs.iter_mut().for_each(|x| *x = round_to(dtype, *x));
    }
}

/// The raw little-endian bytes of `xs` stored as `dtype` (for safetensors).
pub fn to_le_bytes(dtype: Dtype, xs: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(xs.len() * dtype.size_bytes());
    for &x in xs {
        match dtype {
            Dtype::Float16 => out.extend(f16::from_f64(x).to_le_bytes()),
            Dtype::Bfloat16 => out.extend(bf16::from_f64(x).to_le_bytes()),
            Dtype::Float8E4m3fn => out.push(e4m3fn_from_f32(x as f32)),
            Dtype::Float8E5m2 => out.push(e5m2_from_f32(x as f32)),
            Dtype::Float32 => out.extend((x as f32).to_le_bytes()),
            Dtype::Float64 => out.extend(x.to_le_bytes()),
            Dtype::Bool => out.push((x != 0.0) as u8),
            Dtype::Int8 => out.extend((x as i8).to_le_bytes()),
            Dtype::Uint8 => out.push(x as u8),
            Dtype::Int16 => out.extend((x as i16).to_le_bytes()),
            Dtype::Int32 => out.extend((x as i32).to_le_bytes()),
            Dtype::Int64 => out.extend((x as i64).to_le_bytes()),
        }
    }
    out
}

/// Decodes little-endian bytes of `dtype` into values.
pub fn from_le_bytes(dtype: Dtype, bytes: &[u8]) -> Vec<f64> {
    let size = dtype.size_bytes();
    bytes
        .chunks_exact(size)
        .map(|c| match dtype {
            Dtype::Float16 => f16::from_le_bytes([c[0], c[1]]).to_f64(),
            Dtype::Bfloat16 => bf16::from_le_bytes([c[0], c[1]]).to_f64(),
            Dtype::Float8E4m3fn => e4m3fn_to_f32(c[0]) as f64,
            Dtype::Float8E5m2 => e5m2_to_f32(c[0]) as f64,
            Dtype::Float32 => f32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
            Dtype::Float64 => f64::from_le_bytes(c.try_into().expect("8 bytes")),
            Dtype::Bool | Dtype::Uint8 => c[0] as f64,
            Dtype::Int8 => c[0] as i8 as f64,
            Dtype::Int16 => i16::from_le_bytes([c[0], c[1]]) as f64,
            Dtype::Int32 => i32::from_le_bytes(c.try_into().expect("4 bytes")) as f64,
            Dtype::Int64 => i64::from_le_bytes(c.try_into().expect("8 bytes")) as f64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_precision_rounds_to_nearest_even() {
        // 1 + 2^-11 is halfway between f16 neighbours 1 and 1 + 2^-10: ties to even (1).
        assert_eq!(round_to(Dtype::Float16, 1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(
            round_to(Dtype::Float16, 1.0 + 3.0 * 2f64.powi(-11)),
            1.0 + 2.0 * 2f64.powi(-10)
        );
        // bf16 keeps 8 significant bits.
        assert_eq!(round_to(Dtype::Bfloat16, 1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            round_to(Dtype::Bfloat16, 1.0 + 3.0 * 2f64.powi(-8)),
            1.0 + 2f64.powi(-6)
        );
        assert_eq!(round_to(Dtype::Int32, -2.7), -2.0);
    }

    #[test]
    fn bytes_round_trip() {
        for dtype in Dtype::ALL {
            let xs = [0.0, 1.0, 2.0, 3.0];
            assert_eq!(
                from_le_bytes(dtype, &to_le_bytes(dtype, &xs)),
                if dtype == Dtype::Bool {
                    vec![0.0, 1.0, 1.0, 1.0]
                } else {
                    xs.to_vec()
                }
            );
        }
    }

    #[test]
    fn ulp_is_the_spacing_above() {
        // bf16 has 8 significant bits: spacing 2^-9 in [0.25, 0.5); f16 11 bits; f32 24 bits.
        assert_eq!(ulp(Dtype::Bfloat16, -0.2578125), 2f64.powi(-9));
        assert_eq!(ulp(Dtype::Float16, 1.0), 2f64.powi(-10));
        assert_eq!(ulp(Dtype::Float32, 1.0), 2f64.powi(-23));
        // At the largest finite value there is no next value; fp8 gets no slack.
        assert_eq!(ulp(Dtype::Float16, 65504.0), 0.0);
        assert_eq!(ulp(Dtype::Float8E4m3fn, 1.0), 0.0);
    }
}

//! Rounding to the storage dtypes of the stacks as torch converts float64 tensors (floats through
//! float32; fp8 from float32), and the values' little-endian bytes.

mod fp8;

pub use fp8::{e4m3fn_from_f32, e4m3fn_to_f32, e5m2_from_f32, e5m2_to_f32};

use crate::call::Dtype;
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

/// `x` as f16, converted as torch converts a float64 tensor: to float32 first, then to f16, each
/// step rounding to nearest even (c10's `Half` is built from a `float`). Not `f16::from_f64`,
/// whose result depends on the machine: through float32 where the CPU has F16C, directly
/// elsewhere.
fn f16_of(x: f64) -> f16 {
    f16::from_f32(x as f32)
}

/// `x` as bf16, through float32 as torch converts (c10's `BFloat16` is built from a `float`):
/// round to nearest even, NaN quiet. Not `bf16::from_f64`, which drops the low 32 bits of the f64
/// mantissa before it rounds, and so rounds a value above a tie by less than a float32 spacing
/// down to even. Written out rather than `bf16::from_f32` (the same result) without integer
/// comparisons, which the fuzz targets' comparison tracing would record per element.
fn bf16_of(x: f64) -> bf16 {
    let x = x as f32;
    if x.is_nan() {
        return bf16::from_bits((x.to_bits() >> 16) as u16 | 0x0040);
    }
    let bits = x.to_bits();
    // Adding 0x7FFF, plus the kept part's lowest bit, carries into the kept part exactly when
    // the dropped half is above a tie, or a tie with an odd kept part; finite values past bf16's
    // largest carry into the exponent and give infinity, as they should.
    bf16::from_bits((bits.wrapping_add(0x7FFF + ((bits >> 16) & 1)) >> 16) as u16)
}

/// A bf16 value widened: bf16 is float32's upper half, so this is exact and needs no comparison.
fn bf16_value(x: bf16) -> f64 {
    f32::from_bits(u32::from(x.to_bits()) << 16) as f64
}

/// How many values the f16 conversions take at a time: `half`'s slice conversions look up the
/// CPU's F16C support once per slice, not per value.
const F16_BLOCK: usize = 64;

/// `xs` as f16 (as [`f16_of`]), a block at a time, each block handed to `use_block`.
fn f16_blocks(xs: &[f64], mut use_block: impl FnMut(&[f16])) {
    let (mut wide, mut half) = ([0f32; F16_BLOCK], [f16::ZERO; F16_BLOCK]);
    for block in xs.chunks(F16_BLOCK) {
        let (wide, half) = (&mut wide[..block.len()], &mut half[..block.len()]);
        for (w, &x) in wide.iter_mut().zip(block) {
            *w = x as f32;
        }
        half.convert_from_f32_slice(wide);
        use_block(half);
    }
}

/// The value `x` takes when stored in a tensor of `dtype` (torch's conversion from float64: floats
/// through float32, rounding to nearest even; integers truncate toward zero as `tensor.to(int)`
/// does).
pub fn round_to(dtype: Dtype, x: f64) -> f64 {
    match dtype {
        Dtype::Float16 => f16_of(x).to_f64(),
        Dtype::Bfloat16 => bf16_value(bf16_of(x)),
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
            let v = f16_of(x);
            f16::from_bits(v.to_bits() + 1).to_f64() - v.to_f64()
        }
        Dtype::Bfloat16 => {
            let v = bf16_of(x);
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

/// Rounds every element in place, as [`round_to`] does.
pub fn round_slice(dtype: Dtype, xs: &mut [f64]) {
    match dtype {
        Dtype::Float64 => {}
        Dtype::Float16 => {
            let mut rounded = [0f64; F16_BLOCK];
            for block in xs.chunks_mut(F16_BLOCK) {
                let rounded = &mut rounded[..block.len()];
                f16_blocks(block, |half| half.convert_to_f64_slice(rounded));
                block.copy_from_slice(rounded);
            }
        }
        _ => xs.iter_mut().for_each(|x| *x = round_to(dtype, *x)),
    }
}

/// The raw little-endian bytes of `xs` stored as `dtype` (safetensors, the kernel's buffers).
pub fn to_le_bytes(dtype: Dtype, xs: &[f64]) -> Vec<u8> {
    // One loop per dtype: the choice is made once, not per element.
    fn each<const N: usize>(xs: &[f64], encode: impl Fn(f64) -> [u8; N]) -> Vec<u8> {
        let mut out = vec![0; xs.len() * N];
        for (bytes, &x) in out.chunks_exact_mut(N).zip(xs) {
            bytes.copy_from_slice(&encode(x));
        }
        out
    }
    match dtype {
        Dtype::Float16 => {
            let mut out = Vec::with_capacity(xs.len() * 2);
            f16_blocks(xs, |half| {
                out.extend(half.iter().flat_map(|h| h.to_le_bytes()))
            });
            out
        }
        Dtype::Bfloat16 => each(xs, |x| bf16_of(x).to_le_bytes()),
        Dtype::Float8E4m3fn => each(xs, |x| [e4m3fn_from_f32(x as f32)]),
        Dtype::Float8E5m2 => each(xs, |x| [e5m2_from_f32(x as f32)]),
        Dtype::Float32 => each(xs, |x| (x as f32).to_le_bytes()),
        Dtype::Float64 => each(xs, f64::to_le_bytes),
        Dtype::Bool => each(xs, |x| [(x != 0.0) as u8]),
        Dtype::Int8 => each(xs, |x| (x as i8).to_le_bytes()),
        Dtype::Uint8 => each(xs, |x| [x as u8]),
        Dtype::Int16 => each(xs, |x| (x as i16).to_le_bytes()),
        Dtype::Int32 => each(xs, |x| (x as i32).to_le_bytes()),
        Dtype::Int64 => each(xs, |x| (x as i64).to_le_bytes()),
    }
}

/// Decodes little-endian bytes of `dtype` into values.
pub fn from_le_bytes(dtype: Dtype, bytes: &[u8]) -> Vec<f64> {
    fn each<const N: usize>(bytes: &[u8], decode: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        bytes
            .chunks_exact(N)
            .map(|c| decode(c.try_into().expect("chunks of N bytes")))
            .collect()
    }
    match dtype {
        Dtype::Float16 => {
            let mut out = vec![0.0; bytes.len() / 2];
            let mut half = [f16::ZERO; F16_BLOCK];
            for (block, values) in bytes.chunks(2 * F16_BLOCK).zip(out.chunks_mut(F16_BLOCK)) {
                let half = &mut half[..values.len()];
                for (h, c) in half.iter_mut().zip(block.chunks_exact(2)) {
                    *h = f16::from_le_bytes([c[0], c[1]]);
                }
                half.convert_to_f64_slice(values);
            }
            out
        }
        Dtype::Bfloat16 => each(bytes, |c| bf16_value(bf16::from_le_bytes(c))),
        Dtype::Float8E4m3fn => each(bytes, |[c]| e4m3fn_to_f32(c) as f64),
        Dtype::Float8E5m2 => each(bytes, |[c]| e5m2_to_f32(c) as f64),
        Dtype::Float32 => each(bytes, |c| f32::from_le_bytes(c) as f64),
        Dtype::Float64 => each(bytes, f64::from_le_bytes),
        Dtype::Bool | Dtype::Uint8 => each(bytes, |[c]| c as f64),
        Dtype::Int8 => each(bytes, |[c]| c as i8 as f64),
        Dtype::Int16 => each(bytes, |c| i16::from_le_bytes(c) as f64),
        Dtype::Int32 => each(bytes, |c| i32::from_le_bytes(c) as f64),
        Dtype::Int64 => each(bytes, |c| i64::from_le_bytes(c) as f64),
    }
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

    /// torch 2.15's `torch.tensor([x], dtype=torch.float64).to(dtype)`, which rounds to float32
    /// first: a value above a tie by less than a float32 spacing is a tie (to even, down); by more,
    /// it rounds up. `bf16::from_f64` rounded the second down too, and `f16::from_f64` rounds the
    /// first up on a CPU without F16C.
    #[test]
    fn float64_converts_through_float32_as_torch_does() {
        let p = |e: i32| 2f64.powi(e);
        assert_eq!(round_to(Dtype::Bfloat16, 1.0 + p(-8) + p(-40)), 1.0);
        assert_eq!(round_to(Dtype::Bfloat16, 1.0 + p(-8) + p(-22)), 1.0 + p(-7));
        assert_eq!(round_to(Dtype::Float16, 1.0 + p(-11) + p(-40)), 1.0);
        assert_eq!(
            round_to(Dtype::Float16, 1.0 + p(-11) + p(-22)),
            1.0 + p(-10)
        );
        let bytes = to_le_bytes(Dtype::Bfloat16, &[1.0 + p(-8) + p(-22)]);
        assert_eq!(from_le_bytes(Dtype::Bfloat16, &bytes), [1.0 + p(-7)]);
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

    /// The conversions written for speed give `half`'s results: bf16 rounding against
    /// `bf16::from_f32`, the block-wise f16 conversions against `f16::from_f32` one value at a
    /// time, on every class of value (ties, subnormals, overflow, infinities, NaN) and a million
    /// random bit patterns.
    #[test]
    fn fast_conversions_agree_with_half() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
        let special = [
            0.0,
            -0.0,
            1.0,
            1.0 + 2f64.powi(-8),
            1.0 + 3.0 * 2f64.powi(-8),
            65504.0,
            65520.0,
            3.3895e38,
            3.4e38,
            1e-40,
            -1e-45,
            2f64.powi(-24),
            2f64.powi(-25),
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MAX,
            f64::MIN_POSITIVE,
        ];
        let random = (0..1_000_000).map(|_| f32::from_bits(rng.r#gen()) as f64);
        let xs: Vec<f64> = special.into_iter().chain(random).collect();
        let same = |a: f64, b: f64| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
        for &x in &xs {
            let expected = bf16::from_f32(x as f32);
            assert_eq!(bf16_of(x).to_bits(), expected.to_bits(), "bf16 of {x:e}");
            assert!(same(bf16_value(expected), expected.to_f64()), "{x:e}");
        }
        for dtype in [Dtype::Float16, Dtype::Bfloat16] {
            let mut rounded = xs.clone();
            round_slice(dtype, &mut rounded);
            let decoded = from_le_bytes(dtype, &to_le_bytes(dtype, &xs));
            for ((&x, &r), &d) in xs.iter().zip(&rounded).zip(&decoded) {
                let expected = match dtype {
                    Dtype::Float16 => f16::from_f32(x as f32).to_f64(),
                    _ => bf16::from_f32(x as f32).to_f64(),
                };
                assert!(same(r, expected), "{dtype:?} round_slice({x:e}) = {r:e}");
                assert!(same(d, expected), "{dtype:?} bytes of {x:e} = {d:e}");
                assert!(
                    same(round_to(dtype, x), expected),
                    "{dtype:?} round_to({x:e})"
                );
            }
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

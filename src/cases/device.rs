//! Valid MUSA calls built to meet the device's departures from clean attention that
//! [`random_call`](super::random_call)'s small shapes and random data never reach
//! (docs/musa-device.md): fp16 causal prefills whose logits are all very negative, over more than
//! one key block (D1), and packed queries with rows no `cu_seqlens_q` segment covers (D2). Paged
//! appends with head dims that are not tile sizes (D4), rotary positions past the capacity (D5)
//! and V slots past the last key (D3) are among `random_call`'s own.

use super::{int32, offsets};
use crate::call::{Dtype, KvCacheCall, PyValue, TensorArg, TensorValues};
use rand::Rng;
use rand::seq::SliceRandom;

/// A valid MUSA call meeting one of the departures above.
pub fn device_quirk_call<R: Rng + ?Sized>(rng: &mut R) -> KvCacheCall {
    let mut call = KvCacheCall {
        seed: rng.r#gen(),
        ..KvCacheCall::default()
    };
    if rng.gen_bool(0.5) {
        clamped_prefill(rng, &mut call);
    } else {
        uncovered_rows(rng, &mut call);
    }
    call.set("return_softmax_lse", PyValue::Bool(true));
    call
}

fn filled(dtype: Dtype, shape: &[usize], value: f64) -> PyValue {
    PyValue::Tensor(TensorArg {
        values: Some(TensorValues::Float(vec![value; shape.iter().product()])),
        ..TensorArg::new(dtype, shape)
    })
}

/// D1: one fp16 causal prefill of 65..=200 queries over as many keys, so that the rows of each
/// m-block before its last 64 see no key in the first key block their tile processes. Every q
/// entry is 1 and every k entry −1, so every logit is −64·scale: −19.2 (below the zero threshold),
/// −15 (between the thresholds) or −2 (clean).
fn clamped_prefill<R: Rng + ?Sized>(rng: &mut R, call: &mut KvCacheCall) {
    let len = rng.gen_range(65..=200);
    let heads = rng.gen_range(1..=2);
    let scale = *[0.3, 15.0 / 64.0, 1.0 / 32.0]
        .choose(rng)
        .expect("non-empty");
    call.set("q", filled(Dtype::Float16, &[1, len, heads, 64], 1.0))
        .set("k_cache", filled(Dtype::Float16, &[1, len, 1, 64], -1.0))
        .set("v_cache", PyValue::tensor(Dtype::Float16, &[1, len, 1, 64]))
        .set("causal", PyValue::Bool(true))
        .set("softmax_scale", PyValue::Float(scale));
}

/// D2: packed queries with 0..=2 rows before the first segment and 0..=3 after the last (at
/// least one uncovered row), over a small contiguous cache.
fn uncovered_rows<R: Rng + ?Sized>(rng: &mut R, call: &mut KvCacheCall) {
    let dtype = *[Dtype::Float16, Dtype::Bfloat16]
        .choose(rng)
        .expect("non-empty");
    let b = rng.gen_range(1..=3);
    let hk = rng.gen_range(1..=2);
    let h = hk * rng.gen_range(1..=2);
    let d = *[64, 128].choose(rng).expect("non-empty");
    let lens: Vec<usize> = (0..b).map(|_| rng.gen_range(1..=8)).collect();
    let before = rng.gen_range(0..=2);
    let after = rng.gen_range(usize::from(before == 0)..=3);
    let capacity = rng.gen_range(1..=24);
    let seqused: Vec<i64> = (0..b).map(|_| rng.gen_range(0..=capacity as i64)).collect();
    let cu: Vec<i64> = offsets(&lens)
        .into_iter()
        .map(|o| o + before as i64)
        .collect();
    let total = before + lens.iter().sum::<usize>() + after;
    call.set("q", PyValue::tensor(dtype, &[total, h, d]))
        .set("k_cache", PyValue::tensor(dtype, &[b, capacity, hk, d]))
        .set("v_cache", PyValue::tensor(dtype, &[b, capacity, hk, d]))
        .set("cache_seqlens", int32(&[b], seqused))
        .set("cu_seqlens_q", int32(&[b + 1], cu))
        .set(
            "max_seqlen_q",
            PyValue::Int(lens.iter().copied().max().unwrap_or(1) as i64),
        )
        .set("causal", PyValue::Bool(rng.gen_bool(0.5)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::Profile;
    use crate::validate::profiles::MUSA;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn every_call_is_accepted_by_musa() {
        let mut rng = ChaCha8Rng::seed_from_u64(18);
        for _ in 0..200 {
            let call = device_quirk_call(&mut rng);
            let verdict = MUSA.validate(&call);
            assert!(verdict.resolved().is_some(), "{verdict:?}");
        }
    }
}

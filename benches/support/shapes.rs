//! The two shapes the issues set speed budgets for, shared by the reference and kernel benches so
//! that their figures compare the same work.

use fa3conform::call::{Dtype, KvCacheCall, PyValue, TensorArg};

/// b = 8, sq = 1, sk = 4096 through pages of 64 (in reverse order), h = 32, hk = 8, d = 128, bf16,
/// causal.
pub fn decode() -> KvCacheCall {
    let (b, sk, page, hk, d) = (8, 4096, 64, 8, 128);
    let pages_per_seq = sk / page;
    let mut call = KvCacheCall {
        seed: 1,
        ..KvCacheCall::default()
    };
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[b, 1, 32, d]))
        .set(
            "k_cache",
            PyValue::tensor(Dtype::Bfloat16, &[b * pages_per_seq, page, hk, d]),
        )
        .set(
            "v_cache",
            PyValue::tensor(Dtype::Bfloat16, &[b * pages_per_seq, page, hk, d]),
        )
        .set(
            "page_table",
            PyValue::Tensor(TensorArg::with_ints(
                Dtype::Int32,
                &[b, pages_per_seq],
                (0..(b * pages_per_seq) as i64).rev().collect(),
            )),
        )
        .set(
            "cache_seqlens",
            PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, &[b], vec![sk as i64; b])),
        )
        .set("causal", PyValue::Bool(true));
    call
}

/// b = 1, sq = sk = 2048, h = hk = 32, d = 128, bf16, causal.
pub fn prefill() -> KvCacheCall {
    let mut call = KvCacheCall {
        seed: 2,
        ..KvCacheCall::default()
    };
    call.set("q", PyValue::tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]))
        .set(
            "k_cache",
            PyValue::tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]),
        )
        .set(
            "v_cache",
            PyValue::tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]),
        )
        .set("causal", PyValue::Bool(true));
    call
}

//! Speed of the f64 reference on the two shapes the issue sets budgets for (on the 2-core CI
//! machine): paged GQA decode (≤ 0.5 s) and causal prefill (≤ 1.5 s). Tensors are materialised
//! once, outside the measurement.
//!
//! Measured 2026-11-30 on the 2-core development machine while other builds shared it (criterion
//! median): load average ≈ 7: decode 0.61 s, prefill 3.4 s; load ≈ 15: 0.83 s, 5.7 s. CPU time
//! per evaluation (`/usr/bin/time`, same shapes) was 0.63 s and 1.6 s; the work is split over
//! (batch, KV head) tasks, so two idle cores need about half: ≈ 0.32 s and ≈ 0.8 s (not measured
//! on an idle machine).

use criterion::{Criterion, criterion_group, criterion_main};
use fa3conform::call::{Dtype, KvCacheCall, PyValue, TensorArg};
use fa3conform::reference::{Precision, Stack, run};
use fa3conform::tensor::{DEFAULT_MEMORY_CAP, materialise};
use std::time::Duration;

fn tensor(dtype: Dtype, shape: &[usize]) -> PyValue {
    PyValue::Tensor(TensorArg::new(dtype, shape))
}

/// b = 8, sq = 1, sk = 4096 through pages of 64, h = 32, hk = 8, d = 128, bf16, causal.
fn decode() -> KvCacheCall {
    let (b, sk, page, hk, d) = (8, 4096, 64, 8, 128);
    let pages_per_seq = sk / page;
    let mut call = KvCacheCall {
        seed: 1,
        ..KvCacheCall::default()
    };
    call.set("q", tensor(Dtype::Bfloat16, &[b, 1, 32, d]))
        .set(
            "k_cache",
            tensor(Dtype::Bfloat16, &[b * pages_per_seq, page, hk, d]),
        )
        .set(
            "v_cache",
            tensor(Dtype::Bfloat16, &[b * pages_per_seq, page, hk, d]),
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
fn prefill() -> KvCacheCall {
    let mut call = KvCacheCall {
        seed: 2,
        ..KvCacheCall::default()
    };
    call.set("q", tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]))
        .set("k_cache", tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]))
        .set("v_cache", tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]))
        .set("causal", PyValue::Bool(true));
    call
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("reference");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for (name, call) in [
        ("decode_paged_gqa", decode()),
        ("prefill_causal", prefill()),
    ] {
        let tensors = materialise(&call, DEFAULT_MEMORY_CAP).expect("materialises");
        group.bench_function(name, |bench| {
            bench.iter(|| run(&call, &tensors, Stack::Fa3, Precision::Exact).expect("evaluates"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

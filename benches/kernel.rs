//! Speed of the kernel path (issue 4 targets, on the 2-core CI machine):
//! - prefill b=1, sq=sk=2048, h=32, d=128, causal, bf16: ≥ 30 GFLOP/s of useful flops
//!   4·sq·sk·d·h/2;
//! - decode b=8, sq=1, sk=4096, page 64, h=32, hk=8, d=128, bf16: ≤ 100 ms.
//!
//! Inputs are converted to their storage dtypes once ([`kernel::prepare`]), outside the
//! measurement, as they live on the device; each iteration runs the four steps
//! ([`kernel::Prepared::execute`]). Criterion reports time per call; GFLOP/s = 34.36 / (prefill
//! seconds).

use criterion::{Criterion, criterion_group, criterion_main};
use fa3conform::call::{Dtype, KvCacheCall, PyValue, TensorArg};
use fa3conform::kernel::{self, KernelOptions};
use fa3conform::tensor::{DEFAULT_MEMORY_CAP, materialise};
use std::time::Duration;

fn tensor(dtype: Dtype, shape: &[usize]) -> PyValue {
    PyValue::Tensor(TensorArg::new(dtype, shape))
}

fn prefill() -> KvCacheCall {
    let mut call = KvCacheCall {
        seed: 1,
        ..KvCacheCall::default()
    };
    call.set("q", tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]))
        .set("k_cache", tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]))
        .set("v_cache", tensor(Dtype::Bfloat16, &[1, 2048, 32, 128]))
        .set("causal", PyValue::Bool(true));
    call
}

fn decode() -> KvCacheCall {
    let mut call = KvCacheCall {
        seed: 2,
        ..KvCacheCall::default()
    };
    let pages_per_seq = 4096 / 64;
    call.set("q", tensor(Dtype::Bfloat16, &[8, 1, 32, 128]))
        .set(
            "k_cache",
            tensor(Dtype::Bfloat16, &[8 * pages_per_seq, 64, 8, 128]),
        )
        .set(
            "v_cache",
            tensor(Dtype::Bfloat16, &[8 * pages_per_seq, 64, 8, 128]),
        )
        .set("page_table", tensor(Dtype::Int32, &[8, pages_per_seq]))
        .set(
            "cache_seqlens",
            PyValue::Tensor(TensorArg::with_ints(Dtype::Int32, &[8], vec![4096; 8])),
        )
        .set("causal", PyValue::Bool(true));
    call
}

fn bench(c: &mut Criterion) {
    let options = KernelOptions::default();
    let mut group = c.benchmark_group("kernel");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    for (name, call) in [
        ("prefill_2048_causal_bf16", prefill()),
        ("decode_8x4096_paged_bf16", decode()),
    ] {
        let tensors = materialise(&call, DEFAULT_MEMORY_CAP).expect("materialise");
        let mut prepared = kernel::prepare(&call, &tensors, &options).expect("a valid call");
        group.bench_function(name, |b| b.iter(|| prepared.execute()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

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
use fa3conform::kernel::{self, KernelOptions};
use fa3conform::tensor::{DEFAULT_MEMORY_CAP, materialise};
use std::time::Duration;

#[path = "support/shapes.rs"]
mod shapes;

use shapes::{decode, prefill};

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

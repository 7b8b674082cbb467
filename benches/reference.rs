//! Speed of the f64 reference on the two shapes the issue sets budgets for (on the 2-core CI
//! machine): paged GQA decode (≤ 0.5 s) and causal prefill (≤ 1.5 s). Tensors are materialised
//! once, outside the measurement.
//!
//! Measured 2026-11-30 on the 2-core development machine with one other build sharing it
//! (criterion median): decode 138 ms, prefill 815 ms; under heavy load (≈ 15) up to 0.83 s and
//! 5.7 s. The shapes are the kernel bench's (`support/shapes.rs`).

use criterion::{Criterion, criterion_group, criterion_main};
use fa3conform::reference::{Precision, Stack, run};
use fa3conform::tensor::{DEFAULT_MEMORY_CAP, materialise};
use std::time::Duration;

#[path = "support/shapes.rs"]
mod shapes;

use shapes::{decode, prefill};

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

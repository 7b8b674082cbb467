//! The fuzz harnesses natively (no sanitizer, no coverage instrumentation), one committed corpus
//! per iteration: the cost of one fuzz input, which bounds what libFuzzer can reach (goals in
//! issue 6: call_spec 20k/s, validate 50k/s, differential and metadata 500/s).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fa3conform::fuzzing::harness;
use std::hint::black_box;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = format!("{}/fuzz/corpus/{target}", env!("CARGO_MANIFEST_DIR"));
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("readable directory").path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("readable corpus file"))
        .collect()
}

/// A fuzz target's harness: input bytes → whether libFuzzer keeps the input.
type Harness = fn(&[u8]) -> bool;

fn fuzz_harness(c: &mut Criterion) {
    harness::init();
    let targets: [(&str, Harness); 4] = [
        ("call_spec", harness::call_spec),
        ("validate", harness::validate),
        ("differential", harness::differential),
        ("metadata", harness::metadata),
    ];
    let mut group = c.benchmark_group("fuzz harness");
    group.sample_size(10);
    for (target, run) in targets {
        let inputs = corpus(target);
        group.throughput(Throughput::Elements(inputs.len() as u64));
        group.bench_function(target, |b| {
            b.iter(|| {
                for input in &inputs {
                    black_box(run(black_box(input)));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, fuzz_harness);
criterion_main!(benches);

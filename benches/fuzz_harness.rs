//! The fuzz harnesses natively (no sanitizer, no coverage instrumentation), one committed corpus
//! per iteration: the cost of one fuzz input, which bounds what libFuzzer can reach (goals in
//! issue 6: call_spec 20k/s, validate 50k/s, differential and metadata 500/s).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fa3conform::fuzzing::{harness, read_corpus};
use std::hint::black_box;
use std::path::Path;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    read_corpus(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .into_iter()
        .map(|(_, bytes)| bytes)
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

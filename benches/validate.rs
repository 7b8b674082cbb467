//! Validation of one call by one profile, over the catalogue (target: < 2 µs median).
//!
//! One criterion benchmark per profile validates every catalogue call once per iteration;
//! `Throughput::Elements` makes criterion report calls per second, and the per-call time is the
//! iteration time divided by the number of calls.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fa3conform::call::KvCacheCall;
use fa3conform::spec::parse_specs;
use fa3conform::validate::profiles;
use std::hint::black_box;

fn catalogue() -> Vec<KvCacheCall> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/catalog");
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("tests/catalog exists")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).expect("readable catalogue file");
            parse_specs(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        })
        .collect()
}

fn validate(c: &mut Criterion) {
    let calls = catalogue();
    let mut group = c.benchmark_group("validate catalogue");
    group.throughput(Throughput::Elements(calls.len() as u64));
    for profile in profiles::all() {
        group.bench_function(profile.name(), |b| {
            b.iter(|| {
                for call in &calls {
                    black_box(profile.validate(black_box(call)));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, validate);
criterion_main!(benches);

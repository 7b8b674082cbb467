//! `certify` without `--numerics` over a recorded-style JSON-lines file (goal: ≥ 20,000 calls/s on
//! one core): reading, parsing, de-duplicating, all four profiles, the stale-metadata findings
//! and the JSON document, as the command does them.
//!
//! The file holds the example calls (`examples/*.json`, `*.jsonl`: decode, paged, prefill with
//! append and rotary, sinks, fp8), each repeated with a distinct id and data seed and a
//! recorder's note, as `python -m fa3conform.record` writes them. Run with `RAYON_NUM_THREADS=1`
//! and `taskset -c 0` for the one-core figure; `Throughput::Elements` makes criterion report
//! calls per second.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fa3conform::certify::{CertifyOptions, certify};
use fa3conform::mate::DEFAULT_MP;
use fa3conform::report::{self, Format};
use fa3conform::tensor::DEFAULT_MEMORY_CAP;
use serde_json::Value;
use std::hint::black_box;
use std::path::Path;

/// Copies of each example call in the file.
const COPIES: usize = 200;

/// The single-call examples, one JSON object each.
fn example_calls() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/ exists")
        .map(|e| e.expect("readable directory").path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            !name.starts_with("forward-") && (name.ends_with(".json") || name.ends_with(".jsonl"))
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).expect("readable example");
            let values: Vec<Value> = match serde_json::from_str(&text) {
                Ok(Value::Array(items)) => items,
                Ok(one) => vec![one],
                Err(_) => text
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| serde_json::from_str(l).expect("a JSON line"))
                    .collect(),
            };
            values
        })
        .collect()
}

/// The recorded-style file: every example `COPIES` times, each copy a distinct call.
fn recording() -> String {
    let examples = example_calls();
    let mut lines = Vec::new();
    for copy in 0..COPIES {
        for example in &examples {
            let mut call = example.clone();
            call["id"] = format!("{}-{copy}", call["id"].as_str().unwrap_or("call")).into();
            call["recorded"] = serde_json::json!({"entry": "sglang.srt.layers.attention:forward"});
            // Another step of the same server: the data seed makes the copy a distinct call,
            // which de-duplication keeps.
            call["seed"] = copy.into();
            lines.push(call.to_string());
        }
    }
    lines.join("\n") + "\n"
}

fn certify_recording(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let path = dir.path().join("calls.jsonl");
    std::fs::write(&path, recording()).expect("the recording is written");
    let options = CertifyOptions {
        files: vec![path],
        profiles: Vec::new(),
        numerics: false,
        memory_cap: DEFAULT_MEMORY_CAP,
        mp: DEFAULT_MP,
        device_as: None,
    };
    let calls = certify(&options)
        .expect("the recording certifies")
        .reports
        .len();
    let mut group = c.benchmark_group("certify recording");
    group.throughput(Throughput::Elements(calls as u64));
    group.sample_size(10);
    group.bench_function("all profiles, json", |b| {
        b.iter(|| {
            let report = certify(black_box(&options)).expect("the recording certifies");
            report::write(&report, Format::Json, &mut std::io::sink()).expect("written");
        })
    });
    group.finish();
}

criterion_group!(benches, certify_recording);
criterion_main!(benches);

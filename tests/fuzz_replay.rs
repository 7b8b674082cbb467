//! Replays every committed fuzz corpus and regression file through the harness the fuzz target
//! runs, and every regression's decoded call spec (`<name>.json` beside the input, written by
//! `fuzz-decode`) through the same oracle, so that a regression keeps reproducing its bug when the
//! decoding of bytes into calls changes.

use fa3conform::bridge::verify::CaseStatus;
use fa3conform::call::KvCacheCall;
use fa3conform::fuzzing::oracles::metadata::Change;
use fa3conform::fuzzing::oracles::verdict::{Determinism, validate_all};
use fa3conform::fuzzing::{harness, read_corpus};
use fa3conform::spec::parse_specs;
use std::path::{Path, PathBuf};

fn fuzz_dir(kind: &str, target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz")
        .join(kind)
        .join(target)
}

fn is_spec(path: &Path) -> bool {
    path.extension().is_some_and(|x| x == "json")
}

/// Replays the fuzz inputs of a byte-driven target (the decoded specs of its regressions aside).
fn replay(target: &str, run: fn(&[u8]) -> bool) -> usize {
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        let dir = fuzz_dir(kind, target);
        if !dir.exists() {
            continue;
        }
        let files = read_corpus(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for (path, bytes) in files {
            if kind == "regressions" && target != "call_spec" && is_spec(&path) {
                continue;
            }
            // A panic here names the file through the test's output; run it with
            // `cargo fuzz run <target> <path>` to debug.
            eprintln!("replaying {}", path.display());
            run(&bytes);
            replayed += 1;
        }
    }
    replayed
}

/// The decoded call of every regression input of `target`; fails when one has none.
fn regression_specs(target: &str) -> Vec<KvCacheCall> {
    let dir = fuzz_dir("regressions", target);
    let files = read_corpus(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let inputs = files.iter().filter(|(path, _)| !is_spec(path));
    let specs: Vec<KvCacheCall> = inputs
        .map(|(input, _)| {
            let spec = input.with_extension("json");
            let text = std::fs::read_to_string(&spec).unwrap_or_else(|e| {
                panic!(
                    "{}: the regression's decoded call ({e}); write it with \
                     `cargo run --features internal-testing --bin fuzz-decode -- {target} {} > {}`",
                    input.display(),
                    input.display(),
                    spec.display()
                )
            });
            let mut calls =
                parse_specs(&text).unwrap_or_else(|e| panic!("{}: {e}", spec.display()));
            assert_eq!(calls.len(), 1, "{}: one call", spec.display());
            let call = calls.remove(0);
            let name = input.file_name().and_then(|n| n.to_str());
            assert_eq!(Some(call.id.as_str()), name, "{}: id", spec.display());
            eprintln!("replaying {}", spec.display());
            call
        })
        .collect();
    assert!(!specs.is_empty(), "{target} has no regressions");
    specs
}

#[test]
fn call_spec_corpus_replays() {
    assert!(
        replay("call_spec", harness::call_spec) > 0,
        "the call_spec seed corpus is missing"
    );
}

#[test]
fn bundle_corpus_replays() {
    assert!(
        replay("bundle", harness::bundle) > 0,
        "the bundle seed corpus is missing"
    );
}

/// The seeds are what a correct device leaves, so the fuzzer starts from bundles `verify` passes.
#[test]
fn bundle_seeds_are_judged_matched() {
    let seeds = read_corpus(&fuzz_dir("corpus", "bundle")).unwrap();
    assert!(!seeds.is_empty());
    for (path, bytes) in seeds {
        let status = harness::judge_bundle_bytes(&bytes);
        assert!(
            matches!(status, Ok(CaseStatus::Matched(_))),
            "{}: {status:?}",
            path.display()
        );
    }
}

#[test]
fn validate_corpus_replays() {
    assert!(
        replay("validate", harness::validate) > 0,
        "the validate seed corpus is missing"
    );
}

#[test]
fn differential_corpus_replays() {
    assert!(
        replay("differential", harness::differential) > 0,
        "the differential seed corpus is missing"
    );
}

#[test]
fn metadata_corpus_replays() {
    assert!(
        replay("metadata", harness::metadata) > 0,
        "the metadata seed corpus is missing"
    );
}

#[test]
fn validate_regressions_replay_as_calls() {
    for call in regression_specs("validate") {
        validate_all(&call, Determinism::Checked);
    }
}

#[test]
fn differential_regressions_replay_as_calls() {
    for call in regression_specs("differential") {
        assert!(
            harness::differential_call(&call),
            "{}: outside the differential oracle's domain, so it tests nothing",
            call.id
        );
    }
}

/// The input chose one changed argument; its decoded call is checked with every one, so that a
/// change in how bytes pick the argument loses nothing.
#[test]
fn metadata_regressions_replay_as_calls() {
    for call in regression_specs("metadata") {
        for change in Change::ALL {
            assert!(
                harness::metadata_call(&call, change),
                "{}: outside the metadata oracle's domain, so it tests nothing",
                call.id
            );
        }
    }
}

#[test]
fn scan_corpus_replays() {
    assert!(
        replay("scan", harness::scan) > 0,
        "the scan seed corpus is missing"
    );
}

/// The scan fixtures are the `scan` target's other seeds (.ci/fuzz-smoke passes their folder).
#[test]
fn scan_fixtures_replay() {
    let mut pending = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scan/fixtures")];
    let mut replayed = 0;
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a readable fixture entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            eprintln!("replaying {}", path.display());
            harness::scan(&std::fs::read(&path).expect("a readable fixture"));
            replayed += 1;
        }
    }
    assert!(replayed > 40, "only {replayed} scan fixtures found");
}

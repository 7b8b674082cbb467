//! Replays every committed fuzz corpus and regression file through the harness the fuzz target runs.

use fa3conform::fuzzing::{harness, read_corpus};
use std::path::Path;

fn replay(target: &str, run: fn(&[u8]) -> bool) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        let dir = root.join(kind).join(target);
        if !dir.exists() {
            continue;
        }
        let files = read_corpus(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for (path, bytes) in files {
            // A panic here names the file through the test's output; run it with
            // `cargo fuzz run <target> <path>` to debug.
            eprintln!("replaying {}", path.display());
            run(&bytes);
            replayed += 1;
        }
    }
    replayed
}

#[test]
fn call_spec_corpus_replays() {
    assert!(
        replay("call_spec", harness::call_spec) > 0,
        "the call_spec seed corpus is missing"
    );
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

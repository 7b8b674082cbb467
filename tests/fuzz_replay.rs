//! Replays every committed fuzz corpus and regression file through the harness the fuzz target runs.

use fa3conform::fuzzing::harness;
use std::path::Path;

fn replay(target: &str, run: fn(&[u8]) -> bool) -> usize {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut replayed = 0;
    for kind in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(kind).join(target)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("readable directory entry").path();
            let bytes = std::fs::read(&path).expect("readable corpus file");
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

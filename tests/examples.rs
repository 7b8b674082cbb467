//! The README's example call specs stay readable and distinct.

use fa3conform::spec::parse_specs;
use std::collections::BTreeSet;

#[test]
fn every_example_parses_with_a_unique_id() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut ids = BTreeSet::new();
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        // Forward passes (a different format) are checked by tests/scheduler_forward.rs.
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("forward-"))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let calls = parse_specs(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        files += 1;
        for call in calls {
            assert!(!call.id.is_empty(), "{}: a call without id", path.display());
            assert!(ids.insert(call.id.clone()), "duplicate id {}", call.id);
        }
    }
    assert!(files >= 5, "examples/ lost its files");
}

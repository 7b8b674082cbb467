//! The `metadata` conform suite is registered, deterministic, and passes its first cases.

use fa3conform::conform::{CaseResult, suites};

#[test]
fn metadata_suite_is_registered_and_passes() {
    let suite = suites()
        .into_iter()
        .find(|s| s.name() == "metadata")
        .expect("registered");
    for index in 0..14 {
        let outcome = suite.run_case(7, index);
        assert_eq!(outcome, suite.run_case(7, index), "deterministic");
        assert_eq!(outcome.result, CaseResult::Passed(None), "{}", outcome.name);
    }
    let call = suite.call(7, 3).unwrap();
    assert_eq!(call.id, "metadata-7-3");
    assert_eq!(suite.run_case(7, 3).name, "metadata-7-3/window");
}

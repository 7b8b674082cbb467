//! Campaigns split across runners (`--partition`, `merge-reports`): for every conform suite the
//! shards of a split are disjoint and together hold every case exactly once, and the shards'
//! merged JSON report is the unpartitioned run's, case for case (only the suites' `seconds`, a wall
//! time, differ). Both runs are on this machine, so the kernel's numbers are bit-identical; across
//! machines they agree within the tolerance rule, which is what each case's verdict checks.

use fa3conform::conform::{self, ConformOptions, DEFAULT_SEED, selected_cases};
use fa3conform::partition::Partition;
use fa3conform::report::merge::{Merged, Source, merge};
use fa3conform::report::{self, Format};
use serde_json::Value;
use std::collections::BTreeSet;

/// Splits tried on every suite: a single shard, more shards than some suites have cases, and
/// shard counts that do and do not divide the case count.
const SPLITS: [u64; 5] = [1, 2, 3, 7, 64];

#[test]
fn every_split_of_every_suite_is_disjoint_and_covers_the_campaign() {
    for suite in conform::suites() {
        let cases = 50;
        for total in SPLITS {
            for scheme in ["count", "hash"] {
                let mut seen = BTreeSet::new();
                for shard in 1..=total {
                    let partition: Partition = format!("{scheme}:{shard}/{total}").parse().unwrap();
                    for index in selected_cases(suite.name(), cases, Some(&partition)) {
                        assert!(
                            seen.insert(index),
                            "{}: case {index} is in two shards of {scheme}:_/{total}",
                            suite.name()
                        );
                    }
                }
                assert_eq!(
                    seen,
                    (0..cases).collect(),
                    "{}: {scheme}:_/{total} does not cover the campaign",
                    suite.name()
                );
            }
        }
        assert_eq!(
            selected_cases(suite.name(), cases, None),
            (0..cases).collect::<Vec<_>>()
        );
    }
}

#[test]
fn count_shards_deal_round_robin_and_hash_shards_spread() {
    let count_2_of_4: Partition = "count:2/4".parse().unwrap();
    assert_eq!(selected_cases("kernel", 10, Some(&count_2_of_4)), [1, 5, 9]);
    // A hash split is not round-robin, yet no shard of 4 is empty or holds most of 200 cases.
    for shard in 1..=4 {
        let hash: Partition = format!("hash:{shard}/4").parse().unwrap();
        let held = selected_cases("kernel", 200, Some(&hash)).len();
        assert!(
            (25..=75).contains(&held),
            "hash:{shard}/4 holds {held} of 200"
        );
    }
}

/// The campaign's JSON document for `suite` (`cases` cases), whole or one shard.
fn campaign_json(suite: &str, cases: usize, partition: Option<Partition>) -> Value {
    let report = conform::run(&ConformOptions {
        suites: vec![suite.to_string()],
        seed: DEFAULT_SEED,
        cases: Some(cases),
        partition,
    })
    .unwrap();
    let mut out = Vec::new();
    report::write(&report, Format::Json, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

/// The document with every suite's wall time removed.
fn without_seconds(mut document: Value) -> Value {
    for suite in document["suites"].as_array_mut().unwrap() {
        suite.as_object_mut().unwrap().remove("seconds").unwrap();
    }
    document
}

#[test]
fn merged_shards_equal_the_unpartitioned_run_for_every_suite() {
    for suite in conform::suites() {
        // Enough cases that every shard of 3 has some under either scheme, few enough to be quick.
        let cases = match suite.name() {
            "reference" | "metadata" => 6,
            _ => 12,
        };
        let whole = campaign_json(suite.name(), cases, None);
        assert!(whole.get("partition").is_none());
        for scheme in ["count", "hash"] {
            let shards: Vec<Source> = (1..=3)
                .map(|shard| {
                    let partition = format!("{scheme}:{shard}/3").parse().unwrap();
                    let document = campaign_json(suite.name(), cases, Some(partition));
                    assert_eq!(document["partition"], format!("{scheme}:{shard}/3"));
                    Source {
                        name: format!("shard {shard}"),
                        document,
                    }
                })
                // Shards may come in any order.
                .rev()
                .collect();
            let merged = merge(shards).unwrap();
            assert!(matches!(merged, Merged::Conform(_)));
            let mut out = Vec::new();
            report::write(&merged, Format::Json, &mut out).unwrap();
            let merged: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(
                without_seconds(merged),
                without_seconds(whole.clone()),
                "{} split by {scheme}",
                suite.name()
            );
        }
    }
}

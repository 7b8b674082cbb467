//! The fuzz harnesses reach what they exist for (a fuzzer that silently tests nothing is caught
//! here): seeded random inputs through the same functions the targets call.

use fa3conform::fuzzing::generators::{FuzzCall, Target};
use fa3conform::fuzzing::harness;
use fa3conform::fuzzing::oracles::verdict::{Determinism, validate_all};
use fa3conform::validate::Outcome;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeSet;

fn inputs(count: usize, len: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let mut bytes = vec![0u8; len];
            rng.fill_bytes(&mut bytes);
            bytes
        })
        .collect()
}

#[test]
fn validate_reaches_acceptance_and_many_error_sites() {
    let mut sites = BTreeSet::new();
    let mut accepted_by_musa = 0;
    let cases = inputs(400, 256, 1);
    for bytes in &cases {
        let mut u = arbitrary::Unstructured::new(bytes);
        let case = FuzzCall::decode(&mut u, Target::Validation).unwrap();
        for verdict in validate_all(&case.call, Determinism::Checked) {
            match verdict.outcome {
                Outcome::Rejected(r) => {
                    sites.insert(r.site);
                }
                Outcome::Accepted(_) if verdict.profile == "musa" => accepted_by_musa += 1,
                Outcome::Accepted(_) => {}
            }
        }
    }
    eprintln!(
        "{accepted_by_musa} of {} accepted by musa; {} distinct sites",
        cases.len(),
        sites.len()
    );
    assert!(
        accepted_by_musa >= cases.len() / 10,
        "too few calls reach the end of the musa checks"
    );
    assert!(
        sites.len() >= 25,
        "only {} distinct error sites reached: {sites:?}",
        sites.len()
    );
}

#[test]
fn differential_runs_the_kernel_on_most_inputs() {
    let cases = inputs(24, 256, 2);
    let judged = cases
        .iter()
        .filter(|bytes| harness::differential(bytes))
        .count();
    assert!(
        judged >= cases.len() / 2,
        "only {judged} of {} inputs reached the kernel",
        cases.len()
    );
}

#[test]
fn call_spec_accepts_examples_and_rejects_noise() {
    let example = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/decode-paged.json"
    ))
    .unwrap();
    assert!(harness::call_spec(&example));
    assert!(!harness::call_spec(
        b"{\"args\": {\"q\": {\"tensor\": {\"shape\": [1.5]}}}}"
    ));
}

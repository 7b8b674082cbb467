//! Property tests: every invariant of the reference holds on random valid calls of every stack.
#![cfg(feature = "internal-testing")]

use fa3conform::fuzzing::oracles::invariants::{self, Verdict};
use fa3conform::strategies::stack_and_call;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn holds(
    name: &str,
    stack: fa3conform::reference::Stack,
    seed: u64,
    call: &fa3conform::call::KvCacheCall,
) -> Result<(), TestCaseError> {
    let invariant = invariants::by_name(name).expect("known invariant");
    match invariant.check(call, stack, &mut ChaCha8Rng::seed_from_u64(seed)) {
        Verdict::Violated(e) => Err(TestCaseError::fail(format!(
            "{name} on {} (call seed {seed}): {e}",
            stack.name()
        ))),
        Verdict::Held | Verdict::NotApplicable => Ok(()),
    }
}

macro_rules! invariant_tests {
    ($($test:ident => $name:literal),* $(,)?) => {
        proptest! {
            #![proptest_config(ProptestConfig::with_cases(48))]
            $(
                #[test]
                fn $test((stack, seed, call) in stack_and_call()) {
                    holds($name, stack, seed, &call)?;
                }
            )*
        }

        #[test]
        fn every_invariant_has_a_property_test() {
            let all: Vec<&str> = invariants::ALL.iter().map(|i| i.name).collect();
            assert_eq!(all, [$($name),*]);
        }
    };
}

invariant_tests! {
    gqa_equals_explicit_head_repetition => "gqa-repeat",
    paged_equals_contiguous_under_page_permutation => "paged-permutation",
    leftpad_equals_shifted_cache => "leftpad-shift",
    batch_idx_equals_gathering => "batch-idx-gather",
    batch_equals_sequences_one_by_one => "per-sequence",
    append_then_attend_equals_concatenated_kv => "append-concat",
    scheduling_knobs_do_not_change_the_result => "scheduling-knobs",
    softcap_to_infinity_equals_no_softcap => "softcap-infinity",
    sink_of_minus_infinity_equals_no_sink => "sink-minus-inf",
}

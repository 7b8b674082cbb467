//! The `reference` suite: the reference's metamorphic invariants over seeded random calls.
//!
//! Case `i` of a campaign with seed `s` draws one call for stack `i mod 3` (MUSA, sgl-kernel,
//! FA3) from [`cases::random_call`] with a ChaCha8 stream keyed by `(s, i)`, then checks every
//! invariant of [`invariants::ALL`] on it.

use super::{CaseOutcome, Suite};
use crate::cases::{self, Options};
use crate::fuzzing::oracles::invariants::{self, Verdict};
use crate::reference::Stack;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub struct ReferenceSuite;

/// The rng of case `index` in a campaign seeded with `seed`.
fn case_rng(seed: u64, index: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index as u64);
    rng
}

impl Suite for ReferenceSuite {
    fn name(&self) -> &'static str {
        "reference"
    }

    fn description(&self) -> &'static str {
        "metamorphic invariants of the f64 reference (GQA, paging, leftpad, batch_idx, varlen, \
         append, scheduling knobs, softcap, sinks) over seeded random calls"
    }

    fn default_cases(&self) -> usize {
        5000
    }

    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome {
        let stack = Stack::ALL[index % Stack::ALL.len()];
        let mut rng = case_rng(seed, index);
        let call = cases::random_call(&mut rng, &Options::small(stack));
        let failures: Vec<String> = invariants::ALL
            .iter()
            .filter_map(|invariant| match invariant.check(&call, stack, &mut rng) {
                Verdict::Violated(e) => Some(format!("{}: {e}", invariant.name)),
                Verdict::Held | Verdict::NotApplicable => None,
            })
            .collect();
        let result = if failures.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}\ncall: {}",
                failures.join("\n"),
                crate::spec::call_to_json(&call)
            ))
        };
        CaseOutcome {
            index,
            name: format!("{}/{index}", stack.name()),
            result: result.into(),
        }
    }

    fn call(&self, seed: u64, index: usize) -> Option<crate::call::KvCacheCall> {
        let stack = Stack::ALL[index % Stack::ALL.len()];
        Some(cases::random_call(
            &mut case_rng(seed, index),
            &Options::small(stack),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::CaseResult;

    #[test]
    fn cases_are_deterministic_and_pass() {
        let suite = ReferenceSuite;
        for index in 0..6 {
            let a = suite.run_case(7, index);
            assert_eq!(a, suite.run_case(7, index));
            assert_eq!(a.result, CaseResult::Passed(None), "{}", a.name);
        }
        assert_eq!(suite.run_case(7, 4).name, "sgl-kernel/4");
    }
}

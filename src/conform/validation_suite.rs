//! The `validation` suite: every profile on the catalogue and on seeded random variations of it.
//!
//! A case passes when no profile panics, validating twice gives the same verdict, and every
//! rejection is one of the registered sites: its exception, and a message its template (plus the
//! stable front end's prefix and per-dimension shape texts) can produce; every hazard is registered.

use super::{CaseOutcome, Suite, catalogue};
use crate::call::KvCacheCall;
use crate::cases::Mutation;
use crate::fuzzing::oracles::verdict::verdict_checked;
use crate::spec::call_to_json;
use crate::validate::{Profile, profiles};
use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The suite registered in [`super::suites`].
pub struct ValidationSuite;

pub static VALIDATION: ValidationSuite = ValidationSuite;

/// Case `index`: the catalogue first, then seeded random calls.
fn case(seed: u64, index: usize) -> (String, KvCacheCall) {
    let calls = catalogue::calls();
    match calls.get(index) {
        Some(call) => (format!("catalogue/{}", call.id), call.clone()),
        None => (
            format!("random/{seed}/{index}"),
            random_call(seed, index, calls),
        ),
    }
}

impl Suite for ValidationSuite {
    fn name(&self) -> &'static str {
        "validation"
    }

    fn description(&self) -> &'static str {
        "catalogue and seeded random calls through every profile: no panic, deterministic, only registered sites and hazards"
    }

    fn default_cases(&self) -> usize {
        catalogue::calls().len() + 20_000
    }

    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome {
        let (name, call) = case(seed, index);
        let result = profiles::all()
            .into_iter()
            .try_for_each(|profile| check_profile(profile, &call))
            .map_err(|problem| format!("{problem}\ncall: {}", call_to_json(&call)));
        CaseOutcome {
            index,
            name,
            result: result.into(),
        }
    }

    fn call(&self, seed: u64, index: usize) -> Option<KvCacheCall> {
        Some(case(seed, index).1)
    }
}

fn check_profile(profile: &dyn Profile, call: &KvCacheCall) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| verdict_checked(profile, call))) {
        Ok(result) => result.map(|_| ()),
        Err(_) => Err(format!("{} panicked", profile.name())),
    }
}

/// A catalogue call with one to three random mutations, deterministic in `(seed, index)`.
fn random_call(seed: u64, index: usize, catalogue: &[KvCacheCall]) -> KvCacheCall {
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut call = catalogue
        .choose(&mut rng)
        .cloned()
        .expect("the catalogue has calls");
    call.id = format!("random-{seed}-{index}");
    for _ in 0..rng.gen_range(1..=3) {
        Mutation::draw(&mut rng, &call).apply(&mut call);
    }
    call
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::CaseResult;
    use std::collections::BTreeSet;

    /// The random calls reach mate's own arguments: its context-parallel asserts reject some, and
    /// some calls with a context-parallel world or an `s_aux` are accepted.
    #[test]
    fn random_cases_reach_mates_context_parallel_asserts() {
        let mate = profiles::by_name("mate").unwrap();
        let (mut sites, mut accepted) = (BTreeSet::new(), 0);
        for index in 0..4000 {
            let call = random_call(3, index, catalogue::calls());
            let verdict = mate.validate(&call);
            match verdict.rejection() {
                Some(r) => {
                    sites.insert(r.site);
                }
                None => {
                    let passes = |name: &str| call.passed(name).is_some_and(|v| !v.is_none());
                    accepted += usize::from(passes("s_aux") || passes("cp_tot_seqused_k"));
                }
            }
        }
        for site in [
            "musa.F-36",
            "musa.F-36.type",
            "musa.F-37",
            "musa.F-38",
            "musa.F-39",
        ] {
            assert!(sites.contains(site), "{site} not reached: {sites:?}");
        }
        assert!(accepted >= 10, "{accepted}");
    }

    #[test]
    fn random_cases_are_deterministic_and_pass() {
        for index in 0..200 {
            let a = VALIDATION.run_case(7, catalogue::calls().len() + index);
            let b = VALIDATION.run_case(7, catalogue::calls().len() + index);
            assert_eq!(a, b);
            assert_eq!(a.result, CaseResult::Passed(None), "{}", a.name);
        }
    }
}

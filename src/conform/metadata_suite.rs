//! Suite `metadata`: scheduler-metadata equivalence and sensitivity on seeded valid MUSA calls
//! ([`crate::fuzzing::oracles::metadata`]). Case `i` checks equivalence and one changed argument,
//! cycling through [`Change::ALL`].

use super::{CaseOutcome, Suite};
use crate::call::KvCacheCall;
use crate::cases::random_call;
use crate::fuzzing::oracles::metadata::{Change, PROPERTY_MEMORY_CAP, Subject, case_options};
use crate::mate::DEFAULT_MP;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

pub struct MetadataSuite;

pub static METADATA: MetadataSuite = MetadataSuite;

impl MetadataSuite {
    fn change(index: usize) -> Change {
        Change::ALL[index % Change::ALL.len()]
    }
}

impl Suite for MetadataSuite {
    fn name(&self) -> &'static str {
        "metadata"
    }

    fn description(&self) -> &'static str {
        "scheduler metadata: own-argument metadata equals none (bit for bit when unsplit), stale metadata is detected with the kernel path showing its consequence"
    }

    fn default_cases(&self) -> usize {
        300
    }

    fn call(&self, seed: u64, index: usize) -> Option<KvCacheCall> {
        let mut rng =
            ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut call = random_call(&mut rng, &case_options()).returning_lse();
        call.id = format!("metadata-{seed}-{index}");
        Some(call)
    }

    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome {
        let call = self.call(seed, index).expect("every case is a call");
        let change = Self::change(index);
        let result = Subject::of(&call, DEFAULT_MP, PROPERTY_MEMORY_CAP)
            .and_then(|subject| match subject {
                None => Ok(()),
                Some(subject) => subject
                    .equivalence()
                    .map_err(|e| format!("equivalence: {e}"))
                    .and_then(|_| {
                        subject
                            .sensitivity(change)
                            .map_err(|e| format!("sensitivity to {}: {e}", change.name()))
                    })
                    .map(|_| ()),
            })
            .map_err(|e| format!("{e}\n{}", crate::spec::call_to_json(&call)));
        CaseOutcome {
            index,
            name: format!("{}/{}", call.id, change.name()),
            result: result.into(),
        }
    }
}

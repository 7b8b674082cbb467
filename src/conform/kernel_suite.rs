//! The `kernel` conformance suite: seeded random valid MUSA calls through the whole MUSA stack
//! ([`crate::musa::flash_attn_with_kvcache_on`], the kernel path standing in for the device)
//! against the f64 reference under the tolerance rule — without metadata, with the call's own
//! `get_scheduler_metadata`, and with what SGLang's wrapper injects
//! ([`oracles::differential::musa_stack`]). Every fourth case is built to meet one of the
//! device's departures ([`cases::device_quirk_call`]).

use super::{CaseOutcome, Suite};
use crate::call::KvCacheCall;
use crate::cases::{self, Options};
use crate::fuzzing::oracles::{self, metadata::Subject};
use crate::mate::DEFAULT_MP;
use crate::reference::Stack;
use crate::tensor::DEFAULT_MEMORY_CAP;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The suite; see the module documentation.
pub struct KernelSuite;

/// The registered instance.
pub static KERNEL: KernelSuite = KernelSuite;

fn generate(seed: u64, index: usize) -> KvCacheCall {
    let options = Options {
        // The MLA branch runs a different kernel (musa-fa3.md §6.12), not this path.
        mla: false,
        ..Options::small(Stack::Musa)
    };
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    // Every fourth case meets one of the device's departures (docs/musa-device.md).
    let mut call = if index % 4 == 3 {
        cases::device_quirk_call(&mut rng)
    } else {
        cases::random_call(&mut rng, &options)
    };
    call.id = format!("kernel-{index}");
    call
}

fn check(call: &KvCacheCall) -> Result<(), String> {
    let Some(subject) = Subject::of(call, DEFAULT_MP, DEFAULT_MEMORY_CAP)? else {
        return Err("the generated call is outside the MUSA kernel path's domain".into());
    };
    oracles::differential::musa_stack(&subject)
}

impl Suite for KernelSuite {
    fn name(&self) -> &'static str {
        "kernel"
    }

    fn description(&self) -> &'static str {
        "the MUSA stack with the host kernel path (no metadata, own metadata, SGLang-injected) vs \
         the f64 reference"
    }

    fn default_cases(&self) -> usize {
        5000
    }

    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome {
        let call = generate(seed, index);
        CaseOutcome {
            index,
            name: call.id.clone(),
            result: check(&call)
                .map_err(|e| format!("{e}\ncall: {}", crate::spec::call_to_json(&call)))
                .into(),
        }
    }

    fn call(&self, seed: u64, index: usize) -> Option<KvCacheCall> {
        Some(generate(seed, index))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conform::CaseResult;

    /// The cases built to meet the device's departures (every fourth) pass the whole stack's
    /// check: the kernel path and the device expectation agree on them.
    #[test]
    fn device_quirk_cases_pass() {
        for index in (3..160).step_by(4) {
            let outcome = KERNEL.run_case(18, index);
            assert!(
                matches!(outcome.result, CaseResult::Passed(_)),
                "{:?}",
                outcome.result
            );
        }
    }
}

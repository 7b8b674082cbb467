//! The `kernel` conformance suite: the kernel path against the f64 reference on seeded random
//! valid MUSA calls, under the tolerance rule, with scheduler metadata computed for each call.

use super::{KernelOptions, MetadataSource};
use crate::call::KvCacheCall;
use crate::cases::{self, Options};
use crate::conform::{CaseOutcome, Suite};
use crate::reference::{self, Precision, Stack};
use crate::tensor::{DEFAULT_MEMORY_CAP, materialise};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The suite; see the module documentation.
pub struct KernelSuite;

/// The registered instance.
pub static KERNEL_SUITE: KernelSuite = KernelSuite;

fn generate(seed: u64, index: usize) -> KvCacheCall {
    let options = Options {
        // The MLA branch runs a different kernel (musa-fa3.md §6.12), not this path.
        mla: false,
        ..Options::small(Stack::Musa)
    };
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut call = cases::random_call(&mut rng, &options);
    call.id = format!("kernel-{index}");
    call
}

fn check(call: &KvCacheCall) -> Result<(), String> {
    let tensors = materialise(call, DEFAULT_MEMORY_CAP).map_err(|e| e.to_string())?;
    let ref64 =
        reference::run(call, &tensors, Stack::Musa, Precision::Exact).map_err(|e| e.to_string())?;
    let lowprec = reference::run(call, &tensors, Stack::Musa, Precision::LowPrecision)
        .map_err(|e| e.to_string())?;
    let options = KernelOptions {
        metadata: MetadataSource::Computed,
        ..KernelOptions::default()
    };
    super::run(call, &tensors, &options)
        .map_err(|e| e.to_string())?
        .judge(&ref64, &lowprec)
        .map(|_| ())
        .map_err(|m| m.to_string())
}

impl Suite for KernelSuite {
    fn name(&self) -> &'static str {
        "kernel"
    }

    fn description(&self) -> &'static str {
        "host kernel path (device decomposition, computed metadata) vs the f64 reference"
    }

    fn default_cases(&self) -> usize {
        500
    }

    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome {
        let call = generate(seed, index);
        CaseOutcome {
            name: call.id.clone(),
            result: check(&call)
                .map_err(|e| format!("{e}\ncall: {}", crate::spec::call_to_json(&call))),
        }
    }

    fn call(&self, seed: u64, index: usize) -> Option<KvCacheCall> {
        Some(generate(seed, index))
    }
}

//! Oracles: a case → "is this a bug?". A bug is reported by panicking with a reproducible message
//! (the call as JSON, the profile, the site). Cases outside what an oracle can judge are skipped
//! through [`Skip`], one named reason each — never by matching strings.

use crate::call::KvCacheCall;
use crate::conform::verdict_checked;
use crate::kernel::{self, KernelOptions, MetadataSource};
use crate::reference::{self, Precision, RefOutput, Stack};
use crate::spec::call_to_json;
use crate::tensor::{Tensors, materialise};
use crate::validate::{Verdict, profiles};

use super::harness::FUZZ_MEMORY_CAP;

/// Why an oracle could not judge a case (expected non-bugs, listed once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The call's tensors do not fit the fuzzing memory cap.
    OverMemoryCap,
    /// FA3's empty-KV fast path (`lse = +inf`, no kernel launch, cuda-fa3.md D.16): the kernel path
    /// models the device kernels, which never run for such a call.
    EmptyKvFastPath,
}

fn repro(call: &KvCacheCall) -> String {
    serde_json::to_string(&call_to_json(call)).expect("calls serialise")
}

/// Every profile's verdict on `call`, checked by
/// [`verdict_checked`](crate::conform::verdict_checked) (the `validation` suite's check): a
/// failure panics with the call.
pub fn validate_all(call: &KvCacheCall) -> Vec<Verdict> {
    profiles::all()
        .into_iter()
        .map(|profile| {
            verdict_checked(profile, call)
                .unwrap_or_else(|problem| panic!("{problem}, on {}", repro(call)))
        })
        .collect()
}

/// The reference's exact and low-precision results for a materialised call.
fn references(call: &KvCacheCall, tensors: &Tensors, stack: Stack) -> (RefOutput, RefOutput) {
    let run = |precision| {
        reference::run(call, tensors, stack, precision).unwrap_or_else(|e| {
            panic!(
                "the reference refused a valid {} call ({e}): {}",
                stack.name(),
                repro(call)
            )
        })
    };
    (run(Precision::Exact), run(Precision::LowPrecision))
}

/// The kernel path against the reference on a valid call of `stack`, once per metadata source:
/// outputs within the tolerance rule, caches after the append as the rule says.
pub fn differential(
    call: &KvCacheCall,
    stack: Stack,
    sources: &[MetadataSource],
) -> Result<(), Skip> {
    let tensors = materialise(call, FUZZ_MEMORY_CAP).map_err(|_| Skip::OverMemoryCap)?;
    let (ref64, lowprec) = references(call, &tensors, stack);
    if ref64.lse.iter().any(|&x| x == f64::INFINITY) {
        return Err(Skip::EmptyKvFastPath);
    }
    for &metadata in sources {
        let options = KernelOptions {
            metadata,
            stack,
            memory_cap: FUZZ_MEMORY_CAP,
            ..KernelOptions::default()
        };
        let out = kernel::run(call, &tensors, &options).unwrap_or_else(|e| {
            panic!(
                "the kernel refused a valid call ({e}) with {metadata:?}: {}",
                repro(call)
            )
        });
        if let Err(mismatch) = out.judge(&ref64, &lowprec) {
            panic!(
                "kernel ({metadata:?}) vs reference: {mismatch}\ncall: {}",
                repro(call)
            );
        }
    }
    Ok(())
}

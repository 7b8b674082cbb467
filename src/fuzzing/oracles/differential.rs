//! The differential oracle: the kernel path against the f64 reference under the tolerance rule,
//! outputs within the rule and caches after the append as the rule says.
//!
//! [`musa_stack`] is the `kernel` suite's and the `differential` fuzz target's check (the whole
//! modelled MUSA stack, metadata from none, the call's own and SGLang's injection);
//! [`kernel_vs_reference`] runs the kernel path alone for any stack's conventions (the kernel
//! property tests).

use super::metadata::Subject;
use super::{FUZZ_MEMORY_CAP, repro};
use crate::call::KvCacheCall;
use crate::device;
use crate::kernel::{self, KernelOptions, MetadataSource};
use crate::reference::{self, Precision, RefError, RefOutput, Stack};
use crate::tensor::{Tensors, materialise};

/// Why [`kernel_vs_reference`] could not judge a case (expected non-bugs, listed once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The call's tensors do not fit the fuzzing memory cap.
    OverMemoryCap,
    /// FA3's empty-KV fast path (`lse = +inf`, no kernel launch, cuda-fa3.md D.16): the kernel path
    /// models the device kernels, which never run for such a call.
    EmptyKvFastPath,
}

/// The whole modelled MUSA stack on `subject`'s call against the reference: without metadata and
/// with its own `get_scheduler_metadata` ([`Subject::equivalence`]), and with what SGLang's wrapper
/// injects ([`Subject::injection`]).
pub fn musa_stack(subject: &Subject) -> Result<(), String> {
    subject
        .equivalence()
        .map_err(|e| format!("equivalence: {e}"))?;
    subject.injection().map_err(|e| format!("injection: {e}"))?;
    Ok(())
}

/// The reference's exact and low-precision results for a materialised call; for MUSA with the
/// device's departures ([`device::expected`]).
fn references(call: &KvCacheCall, tensors: &Tensors, stack: Stack) -> (RefOutput, RefOutput) {
    let refuse = |e: RefError| -> (RefOutput, RefOutput) {
        panic!(
            "the reference refused a valid {} call ({e}): {}",
            stack.name(),
            repro(call)
        )
    };
    if stack == Stack::Musa {
        return device::musa_references(call, tensors).unwrap_or_else(refuse);
    }
    let run = |precision| reference::run(call, tensors, stack, precision);
    match (run(Precision::Exact), run(Precision::LowPrecision)) {
        (Ok(exact), Ok(low)) => (exact, low),
        (Err(e), _) | (_, Err(e)) => refuse(e),
    }
}

/// The kernel path against the reference on a valid call of `stack`, once per metadata source; a
/// mismatch panics with the call.
pub fn kernel_vs_reference(
    call: &KvCacheCall,
    stack: Stack,
    sources: &[MetadataSource],
) -> Result<(), Skip> {
    let tensors = materialise(call, FUZZ_MEMORY_CAP).map_err(|_| Skip::OverMemoryCap)?;
    let (ref64, lowprec) = references(call, &tensors, stack);
    if ref64.lse.iter().any(|&x| x == f64::INFINITY) {
        return Err(Skip::EmptyKvFastPath);
    }
    for metadata in sources {
        let options = KernelOptions {
            metadata: metadata.clone(),
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

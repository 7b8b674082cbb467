//! One function per fuzz target. Each returns whether the input is worth keeping in the corpus.

use super::generators::{FuzzCall, Target};
use super::oracles;
use crate::kernel::MetadataSource;
use crate::spec::parse_specs;
use crate::tensor::materialise;
use arbitrary::Unstructured;

/// Memory cap for materialising fuzzed calls: large enough for every real small case, small enough
/// that a fuzzer can never take the machine down.
pub const FUZZ_MEMORY_CAP: usize = 64 << 20;

/// Memory cap for materialising parsed specs in `call_spec`: small, so that the target stays fast
/// and every larger call exercises the refusal before allocation.
pub const SPEC_MEMORY_CAP: usize = 1 << 20;

/// `call_spec`: arbitrary bytes through the JSON call-spec parser, the materialiser and every
/// profile. Never panics; every parse error names a JSON path or says why the document as a whole
/// is unusable; nothing is allocated beyond [`SPEC_MEMORY_CAP`].
pub fn call_spec(bytes: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return false;
    };
    match parse_specs(text) {
        Ok(calls) => {
            for call in &calls {
                // Either materialises within the cap or refuses with an error; both are fine.
                let _ = materialise(call, SPEC_MEMORY_CAP);
                oracles::validate_all(call);
            }
            true
        }
        Err(e) => {
            let whole_document = e.path.is_empty()
                && (e.message.starts_with("invalid JSON")
                    || e.message.starts_with("expected a call object"));
            assert!(
                whole_document || !e.path.is_empty(),
                "spec error without a JSON path: {e}"
            );
            false
        }
    }
}

/// `validate`: a valid call with up to two mutations → every profile (see [`oracles::validate_all`]).
pub fn validate(bytes: &[u8]) -> bool {
    let mut u = Unstructured::new(bytes);
    let Ok(case) = FuzzCall::decode(&mut u, Target::Validation) else {
        return false;
    };
    oracles::validate_all(&case.call);
    true
}

/// `differential`: a valid small MUSA call → the kernel path (which models mate's forward)
/// against the reference.
pub fn differential(bytes: &[u8]) -> bool {
    let mut u = Unstructured::new(bytes);
    let Ok(case) = FuzzCall::decode(&mut u, Target::Kernel) else {
        return false;
    };
    oracles::differential(
        &case.call,
        case.stack,
        &[MetadataSource::None, MetadataSource::Computed],
    )
    .is_ok()
}

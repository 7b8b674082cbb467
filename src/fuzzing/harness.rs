//! One function per fuzz target. Each returns whether the input is worth keeping in the corpus.

use super::generators::{FuzzCall, Target};
use super::oracles;
use crate::kernel::MetadataSource;
use crate::scheduler::properties::{self, Change};
use crate::spec::parse_specs;
use crate::tensor::materialise;
use arbitrary::{Arbitrary, Unstructured};

/// Memory cap for materialising fuzzed calls: large enough for every real small case, small enough
/// that a fuzzer can never take the machine down.
pub const FUZZ_MEMORY_CAP: usize = 64 << 20;

/// Memory cap for materialising parsed specs in `call_spec`: small, so that the target stays fast
/// and every larger call exercises the refusal before allocation.
pub const SPEC_MEMORY_CAP: usize = 64 << 10;

/// Once per fuzzing process: one rayon thread. libFuzzer runs one input at a time (and one process
/// per core with `-jobs`), and on the fuzzers' small cases the kernel's and the reference's
/// parallel loops cost more in thread hand-offs than they save.
pub fn init() {
    // Fails only when a pool exists already (a second call): that pool is as good.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build_global();
}

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

/// The case of the `metadata` target: a call and the argument its metadata is computed without.
pub fn metadata_case(bytes: &[u8]) -> Option<(crate::call::KvCacheCall, Change)> {
    let mut u = Unstructured::new(bytes);
    let seed = u64::arbitrary(&mut u).ok()?;
    let change = u.choose(&Change::ALL).copied().ok()?;
    let options = properties::case_options();
    let mut call =
        crate::cases::random_call(&mut super::generators::InputRng::new(&mut u), &options);
    call.seed = seed;
    Some((properties::returning_lse(&call), change))
}

/// `metadata`: a valid MUSA call long enough to split, and one `get_scheduler_metadata` argument
/// changed away from the call's own → equivalence with its own metadata, detection (with the
/// consequence the kernel path shows) with the changed one; never a panic or an out-of-bounds
/// access in the kernel path.
pub fn metadata(bytes: &[u8]) -> bool {
    let Some((call, change)) = metadata_case(bytes) else {
        return false;
    };
    let failure = |property: &str, e: String| -> ! {
        panic!(
            "metadata {property}: {e}\ncall: {}",
            crate::spec::call_to_json(&call)
        )
    };
    let subject = match properties::Subject::of(&call, crate::mate::DEFAULT_MP) {
        Ok(Some(subject)) => subject,
        Ok(None) => return false,
        Err(e) => failure("domain", e),
    };
    if let Err(e) = subject.equivalence() {
        failure("equivalence", e);
    }
    if let Err(e) = subject.sensitivity(change) {
        failure(&format!("sensitivity ({})", change.name()), e);
    }
    true
}

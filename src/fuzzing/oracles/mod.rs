//! Oracles: a case → "is this a bug?", one module per question. The `conform` suites, the fuzz
//! harnesses and the property tests ask the same oracles, so a suite failure, a fuzz crash and a
//! proptest counterexample mean the same thing.
//!
//! - [`verdict`]: a profile's verdict is deterministic and made of registered sites and hazards;
//! - [`invariants`]: metamorphic invariants of the f64 reference;
//! - [`metadata`]: scheduler-metadata equivalence, sensitivity and SGLang's injection on the whole
//!   modelled MUSA stack;
//! - [`differential`]: the kernel path against the reference under the tolerance rule;
//! - [`scan`]: the Python scanner's output is located, bounded and well-formed.
//!
//! An oracle returns what it found (`Err` with a reproducible description); a fuzz harness turns
//! that into a panic. Cases outside what an oracle can judge are skipped through a named reason,
//! never by matching strings. Oracles draw no fuzz bytes, so they are part of the product build
//! (the release binary's `conform` runs them); only the byte decoders are behind
//! `internal-testing`.

pub mod differential;
pub mod invariants;
pub mod metadata;
pub mod scan;
pub mod verdict;

use crate::call::KvCacheCall;
use crate::spec::call_to_json;

/// Memory cap for materialising fuzzed calls: large enough for every real small case, small enough
/// that a fuzzer can never take the machine down.
pub const FUZZ_MEMORY_CAP: usize = 64 << 20;

/// `call` as one line of JSON, for a finding's message.
fn repro(call: &KvCacheCall) -> String {
    serde_json::to_string(&call_to_json(call)).expect("calls serialise")
}

//! One function per fuzz target. Each returns whether the input is worth keeping in the corpus.

use super::generators::{FuzzCall, InputRng, Target};
use super::oracles::metadata::{self, Change, Established, PROPERTY_MEMORY_CAP, Subject};
use super::oracles::verdict::{Determinism, validate_all};
use super::oracles::{FUZZ_MEMORY_CAP, differential};
use crate::bridge::BundleError;
use crate::bridge::verify::{CaseStatus, judge};
use crate::call::KvCacheCall;
use crate::spec::{call_to_json, parse_specs};
use crate::tensor::materialise;
use arbitrary::{Arbitrary, Unstructured};

/// Memory cap for materialising parsed specs in `call_spec`: small, so that the target stays fast
/// and every larger call exercises the refusal before allocation.
pub const SPEC_MEMORY_CAP: usize = 64 << 10;

/// Whether the validation targets check determinism on this input: one input in eight, picked by
/// its bytes' digest (so a replay repeats the check). Validating a call twice is half of what
/// `validate` costs per input; a verdict that depends on hash order or on state left by an earlier
/// call shows on any input, so a sample of millions finds it as surely. The `validation` suite and
/// `cargo test`'s replays of the regressions' calls check every call.
pub fn determinism_for(bytes: &[u8]) -> Determinism {
    if xxhash_rust::xxh3::xxh3_64(bytes) % 8 == 0 {
        Determinism::Checked
    } else {
        Determinism::Unchecked
    }
}

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
                validate_all(call, determinism_for(bytes));
            }
            true
        }
        Err(e) => {
            // Errors about the document as a whole have no path: not JSON, no call in it, or a
            // JSON value that is not a call.
            let whole_document = e.path.is_empty()
                && ["invalid JSON", "no call specs", "expected a call object"]
                    .iter()
                    .any(|start| e.message.starts_with(start));
            assert!(
                whole_document || !e.path.is_empty(),
                "spec error without a JSON path: {e}"
            );
            false
        }
    }
}

/// `validate`: a valid call with up to two mutations → every profile (see [`validate_all`]).
pub fn validate(bytes: &[u8]) -> bool {
    let mut u = Unstructured::new(bytes);
    let Ok(case) = FuzzCall::decode(&mut u, Target::Validation) else {
        return false;
    };
    validate_all(&case.call, determinism_for(bytes));
    true
}

/// `differential`: a valid small MUSA call → [`differential_call`].
pub fn differential(bytes: &[u8]) -> bool {
    let mut u = Unstructured::new(bytes);
    match FuzzCall::decode(&mut u, Target::Kernel) {
        Ok(case) => differential_call(&case.call),
        Err(_) => false,
    }
}

/// The `differential` target's check of one call: the whole MUSA stack
/// ([`crate::musa::flash_attn_with_kvcache_on`], the kernel path standing in for the device)
/// against the reference, without metadata, with the call's own `get_scheduler_metadata`, and
/// with what SGLang's wrapper injects ([`differential::musa_stack`]). `false` when the call is
/// outside the oracle's domain.
pub fn differential_call(call: &KvCacheCall) -> bool {
    let Some(subject) = subject(call, FUZZ_MEMORY_CAP) else {
        return false;
    };
    if let Err(e) = differential::musa_stack(&subject) {
        panic!("{e}\ncall: {}", call_to_json(call));
    }
    true
}

/// The metadata oracle's view of `call`; `None` outside its domain.
fn subject(call: &KvCacheCall, memory_cap: usize) -> Option<Subject> {
    Subject::of(call, crate::mate::DEFAULT_MP, memory_cap).unwrap_or_else(|e| {
        panic!(
            "materialising a valid call: {e}\ncall: {}",
            call_to_json(call)
        )
    })
}

/// A failed property is the fuzzer's finding: a panic naming it and the call.
fn holds(call: &KvCacheCall, property: &str, result: Result<Established, String>) {
    if let Err(e) = result {
        panic!("{property}: {e}\ncall: {}", call_to_json(call));
    }
}

/// The case of the `metadata` target: a call and the argument its metadata is computed without.
pub fn metadata_case(bytes: &[u8]) -> Option<(KvCacheCall, Change)> {
    let mut u = Unstructured::new(bytes);
    let seed = u64::arbitrary(&mut u).ok()?;
    let change = u.choose(&Change::ALL).copied().ok()?;
    let mut call = crate::cases::random_call(&mut InputRng::new(&mut u), &metadata::case_options());
    call.seed = seed;
    Some((call.returning_lse(), change))
}

/// `metadata`: a valid MUSA call long enough to split, and one `get_scheduler_metadata` argument
/// changed away from the call's own → [`metadata_call`].
pub fn metadata(bytes: &[u8]) -> bool {
    match metadata_case(bytes) {
        Some((call, change)) => metadata_call(&call, change),
        None => false,
    }
}

/// The `metadata` target's check of one call and changed argument: equivalence with its own
/// metadata, detection (with the consequence the kernel path shows) with the changed one; never a
/// panic or an out-of-bounds access in the kernel path. `false` when the call is outside the
/// oracle's domain.
pub fn metadata_call(call: &KvCacheCall, change: Change) -> bool {
    let Some(subject) = subject(call, PROPERTY_MEMORY_CAP) else {
        return false;
    };
    holds(call, "equivalence", subject.equivalence());
    holds(
        call,
        &format!("sensitivity ({})", change.name()),
        subject.sensitivity(change),
    );
    true
}

/// `scan`: arbitrary bytes as a small Python tree ([`super::generators::python_tree`]) through the
/// scanner with every rule on: no panic, locations inside the files, bounded and well-formed
/// output ([`super::oracles::scan::scan_output`]). Run with libFuzzer's `-rss_limit_mb`, so that memory
/// growing faster than the input is a finding too.
pub fn scan(bytes: &[u8]) -> bool {
    let sources = super::generators::python_tree(bytes);
    let result = crate::scan::scan_sources(
        &sources,
        &super::oracles::scan::every_rule(),
        crate::tensor::DEFAULT_MEMORY_CAP,
    );
    if let Err(e) = super::oracles::scan::scan_output(&sources, &result) {
        panic!("scan: {e}");
    }
    result.call_sites > 0 || !result.diagnostics.is_empty()
}

/// Memory cap of the `bundle` target's reads: small, so that every larger file or tensor
/// exercises the refusal before allocation.
pub const BUNDLE_MEMORY_CAP: usize = 1 << 20;

/// The scratch folder of this thread's `bundle` cases (test threads replay corpora side by side).
fn bundle_folder() -> std::path::PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static FOLDER: std::path::PathBuf = {
            let name = format!(
                "fa3conform-fuzz-bundle-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            );
            let dir = std::env::temp_dir().join(name);
            std::fs::create_dir_all(&dir).expect("a scratch folder in the temporary directory");
            dir
        };
    }
    FOLDER.with(Clone::clone)
}

/// `verify`'s judgement, as the `musa` profile, of the bundle folder whose files `bytes` holds
/// ([`super::generators::bundle_files`]), read within [`BUNDLE_MEMORY_CAP`] per file.
pub fn judge_bundle_bytes(bytes: &[u8]) -> Result<CaseStatus, BundleError> {
    let folder = bundle_folder();
    for name in super::generators::BUNDLE_FILES {
        match std::fs::remove_file(folder.join(name)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{name}: {e}"),
            _ => {}
        }
    }
    for (name, content) in super::generators::bundle_files(bytes) {
        std::fs::write(folder.join(name), content).expect("the scratch folder is writable");
    }
    judge(&folder, "musa", BUNDLE_MEMORY_CAP)
}

/// `bundle`: arbitrary bytes as the files of a bundle folder → the bundle reader and `verify`'s
/// judgement ([`judge_bundle_bytes`]). Never panics and reads nothing beyond the cap; a bundle it
/// cannot judge is an error that names a file of the folder. Keeps the inputs that are judged.
pub fn bundle(bytes: &[u8]) -> bool {
    match judge_bundle_bytes(bytes) {
        Ok(_) => true,
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains(&*bundle_folder().to_string_lossy()),
                "a bundle error names the file: {message}"
            );
            false
        }
    }
}

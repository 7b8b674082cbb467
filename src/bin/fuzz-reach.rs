//! How deep a fuzz corpus reaches: the share of a target's inputs that get past the JSON parser
//! (`call_spec`), past CPython's argument binding to a check of the stack or to acceptance
//! (`validate`, per profile), or to the kernel path (`differential`, `metadata`). Run it on the
//! corpus a fuzzing campaign grew (libFuzzer keeps only inputs the harness marks worth keeping, so
//! there the kernel targets reach the kernel by construction), or on `--random N` seeded random
//! inputs of 256 bytes, the share a blind input reaches:
//!
//! `cargo run --release --features internal-testing --bin fuzz-reach -- validate fuzz/corpus-work/validate`
//! `cargo run --release --features internal-testing --bin fuzz-reach -- differential --random 500`

use arbitrary::Unstructured;
use fa3conform::fuzzing::generators::{FuzzCall, Target};
use fa3conform::fuzzing::harness::{self, SPEC_MEMORY_CAP};
use fa3conform::fuzzing::read_corpus;
use fa3conform::spec::parse_specs;
use fa3conform::tensor::materialise;
use fa3conform::validate::{Exception, Outcome, Profile, profiles};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::process::ExitCode;

fn percent(part: usize, whole: usize) -> String {
    format!(
        "{part} of {whole} ({:.1}%)",
        100.0 * part as f64 / whole.max(1) as f64
    )
}

/// Where `validate`'s inputs end, per profile: binding error, a check of the stack, acceptance.
fn validate(inputs: &[Vec<u8>]) {
    let calls: Vec<_> = inputs
        .iter()
        .filter_map(|bytes| {
            FuzzCall::decode(&mut Unstructured::new(bytes), Target::Validation).ok()
        })
        .map(|case| case.call)
        .collect();
    for profile in profiles::all() {
        let (mut binding, mut checked, mut accepted) = (0, 0, 0);
        for call in &calls {
            match profile.validate(call).outcome {
                Outcome::Accepted(_) => accepted += 1,
                // CPython's binding errors name the function: `flash_attn_with_kvcache() got ...`.
                Outcome::Rejected(r)
                    if r.exception == Exception::TypeError
                        && r.message.starts_with("flash_attn_with_kvcache()") =>
                {
                    binding += 1
                }
                Outcome::Rejected(_) => checked += 1,
            }
        }
        let n = inputs.len();
        println!(
            "{:10}  binding error {}, rejected by a check {}, accepted {}",
            profile.name(),
            percent(binding, n),
            percent(checked, n),
            percent(accepted, n)
        );
    }
}

/// `call_spec`: parsed, materialised within the fuzzing cap, accepted by `musa`.
fn call_spec(inputs: &[Vec<u8>]) {
    let (mut parsed, mut materialised, mut accepted) = (0, 0, 0);
    for bytes in inputs {
        let Some(calls) = std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| parse_specs(text).ok())
        else {
            continue;
        };
        parsed += 1;
        if calls
            .iter()
            .all(|c| materialise(c, SPEC_MEMORY_CAP).is_ok())
        {
            materialised += 1;
        }
        if calls
            .iter()
            .any(|c| profiles::MUSA.validate(c).resolved().is_some())
        {
            accepted += 1;
        }
    }
    let n = inputs.len();
    println!("parsed {}", percent(parsed, n));
    println!("materialised within the cap {}", percent(materialised, n));
    println!("a call accepted by musa {}", percent(accepted, n));
}

/// `differential`, `metadata`: the harness says whether the input reached the kernel path.
fn kernel(inputs: &[Vec<u8>], run: fn(&[u8]) -> bool) {
    let reached = inputs.iter().filter(|bytes| run(bytes)).count();
    println!("reached the kernel path {}", percent(reached, inputs.len()));
}

/// The inputs in the corpus directories, or `--random N` seeded random inputs.
fn read_inputs(sources: &[String]) -> Result<Vec<Vec<u8>>, String> {
    if let [flag, count] = sources
        && flag == "--random"
    {
        let count: usize = count.parse().map_err(|_| "--random takes a count")?;
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        return Ok((0..count)
            .map(|_| {
                let mut bytes = vec![0u8; 256];
                rng.fill_bytes(&mut bytes);
                bytes
            })
            .collect());
    }
    let mut inputs = Vec::new();
    for dir in sources {
        let files = read_corpus(Path::new(dir)).map_err(|e| format!("{dir}: {e}"))?;
        inputs.extend(files.into_iter().map(|(_, bytes)| bytes));
    }
    Ok(inputs)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, target, sources @ ..] = args.as_slice() else {
        eprintln!(
            "usage: fuzz-reach <validate|differential|metadata|call_spec> <corpus dir>... | --random N"
        );
        return ExitCode::from(2);
    };
    let inputs = match read_inputs(sources) {
        Ok(inputs) => inputs,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    println!("{target}: {} inputs", inputs.len());
    // As in the fuzz targets.
    harness::init();
    match target.as_str() {
        "validate" => validate(&inputs),
        "call_spec" => call_spec(&inputs),
        "differential" => kernel(&inputs, harness::differential),
        "metadata" => kernel(&inputs, harness::metadata),
        other => {
            eprintln!("unknown target `{other}`");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

//! How deep a fuzz corpus reaches: the share of a target's inputs that get past the JSON parser
//! (`call_spec`), past CPython's argument binding to a check of the stack or to acceptance
//! (`validate`, per profile), or to the kernel path (`differential`, `metadata`). Run it on the
//! corpus a fuzzing campaign grew:
//!
//! `cargo run --release --features internal-testing --bin fuzz-reach -- validate fuzz/corpus-work/validate`

use arbitrary::Unstructured;
use fa3conform::fuzzing::generators::{FuzzCall, Target};
use fa3conform::fuzzing::harness::{self, SPEC_MEMORY_CAP};
use fa3conform::spec::parse_specs;
use fa3conform::tensor::materialise;
use fa3conform::validate::{Exception, Outcome, Profile, profiles};
use std::process::ExitCode;

fn percent(part: usize, whole: usize) -> String {
    format!(
        "{part} of {whole} ({:.1}%)",
        100.0 * part as f64 / whole.max(1) as f64
    )
}

/// Where `validate`'s inputs end, per profile: binding error, a check of the stack, acceptance.
fn validate(inputs: &[Vec<u8>]) {
    harness::init();
    for profile in profiles::all() {
        let (mut binding, mut checked, mut accepted) = (0, 0, 0);
        for bytes in inputs {
            let Ok(case) = FuzzCall::decode(&mut Unstructured::new(bytes), Target::Validation)
            else {
                continue;
            };
            match profile.validate(&case.call).outcome {
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
    harness::init();
    let reached = inputs.iter().filter(|bytes| run(bytes)).count();
    println!("reached the kernel path {}", percent(reached, inputs.len()));
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, target, dirs @ ..] = args.as_slice() else {
        eprintln!("usage: fuzz-reach <validate|differential|metadata|call_spec> <corpus dir>...");
        return ExitCode::from(2);
    };
    let mut inputs = Vec::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                eprintln!("{dir}: {e}");
                return ExitCode::from(2);
            }
        };
        for entry in entries.flatten() {
            if let Ok(bytes) = std::fs::read(entry.path()) {
                inputs.push(bytes);
            }
        }
    }
    println!("{target}: {} inputs", inputs.len());
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

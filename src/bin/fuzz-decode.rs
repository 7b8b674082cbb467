//! Turns a fuzz input (a crash artifact or a corpus file) of a byte-driven target into the call
//! spec it decodes to (its `id` the input's file name), so it can be replayed with
//! `fa3conform certify -` or `fa3conform run -`, and committed beside a regression input as
//! `<name>.json` (`tests/fuzz_replay.rs` replays both).
//!
//! `cargo run --features internal-testing --bin fuzz-decode -- validate fuzz/artifacts/validate/crash-…`

use arbitrary::Unstructured;
use fa3conform::fuzzing::generators::{FuzzCall, Target};
use fa3conform::spec::call_to_json;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (target, path) = match args.as_slice() {
        [_, target, path] => (target.as_str(), path),
        _ => {
            eprintln!("usage: fuzz-decode <validate|differential|metadata|call_spec> <input file>");
            return ExitCode::from(2);
        }
    };
    let name = std::path::Path::new(path)
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            eprintln!("reading {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let target = match target {
        // call_spec inputs are call specs already.
        "call_spec" => {
            print!("{}", String::from_utf8_lossy(&bytes));
            return ExitCode::SUCCESS;
        }
        "metadata" => {
            return match fa3conform::fuzzing::harness::metadata_case(&bytes) {
                Some((mut call, change)) => {
                    call.id = name;
                    println!("{}", call_to_json(&call));
                    eprintln!("metadata computed with another {}", change.name());
                    ExitCode::SUCCESS
                }
                None => {
                    eprintln!("the input does not decode");
                    ExitCode::from(1)
                }
            };
        }
        "validate" => Target::Validation,
        "differential" => Target::Kernel,
        other => {
            eprintln!("unknown target `{other}`");
            return ExitCode::from(2);
        }
    };
    match FuzzCall::decode(&mut Unstructured::new(&bytes), target) {
        Ok(mut case) => {
            case.call.id = name;
            println!("{}", call_to_json(&case.call));
            eprintln!(
                "stack: {}; mutations: {:?}",
                case.stack.name(),
                case.mutations
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("the input does not decode: {e}");
            ExitCode::from(1)
        }
    }
}

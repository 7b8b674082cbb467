//! How the tolerance rule (`src/tolerance.rs`) separates a correct kernel from a slightly wrong one
//! over random valid MUSA calls: the whole modelled stack (the kernel path) must be within the rule
//! on every call, and the same results with `out` 0.2 % too large should be refused as often as
//! the rule can tell. For both, how many verdicts the output-rounding floor decided (the kernel
//! within the rule only because a baseline counted as its floor, not as measured). The README's
//! "Tolerance rule" quotes its figures:
//!
//! `cargo run --release --features internal-testing --bin tolerance-calibration -- 100000 small`
//! `cargo run --release --features internal-testing --bin tolerance-calibration -- 10000 metadata`

use fa3conform::call::{Dtype, KvCacheCall};
use fa3conform::cases::{Options, random_call};
use fa3conform::device::musa_references;
use fa3conform::fuzzing::oracles::metadata::case_options;
use fa3conform::musa::{
    InjectionCache, MusaOptions, MusaOutput, Returned, flash_attn_with_kvcache_on,
};
use fa3conform::reference::{RefOutput, Stack};
use fa3conform::report::progress_bar;
use fa3conform::tensor::materialise;
use fa3conform::tolerance::Report;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::process::ExitCode;

/// The wrong kernel's relative error on every element of `out`.
const BIAS: f64 = 1.0 / 512.0;

/// Memory cap per call (the drawn calls stay far below it).
const MEMORY_CAP: usize = 1 << 28;

/// Verdicts on one kind of result.
#[derive(Default)]
struct Tally {
    within: usize,
    refused: usize,
    /// Within the rule, but not within it on the measured baselines alone.
    within_by_floor: usize,
}

impl Tally {
    fn add(&mut self, verdict: Result<Report, String>) {
        match verdict {
            Ok(report) => {
                self.within += 1;
                if report.out.within_by_floor || report.lse.within_by_floor {
                    self.within_by_floor += 1;
                }
            }
            Err(_) => self.refused += 1,
        }
    }
}

/// The kernel path's result with `out` `BIAS` too large.
fn biased(output: &MusaOutput) -> MusaOutput {
    let mut wrong = output.clone();
    let (Returned::OutLseAccum { out, .. } | Returned::Out(out)) = &mut wrong.returned;
    out.data.mapv_inplace(|x| x * (1.0 + BIAS));
    wrong
}

/// The kernel path and the references on `call`; `None` outside the domain (the stack raises,
/// MLA, fp8, over the cap).
fn evaluate(call: &KvCacheCall) -> Option<(MusaOutput, RefOutput, RefOutput)> {
    let tensors = materialise(call, MEMORY_CAP).ok()?;
    let (ref64, lowprec) = musa_references(call, &tensors).ok()?;
    if ref64.dtype == Dtype::Float8E4m3fn {
        return None;
    }
    let options = MusaOptions::default();
    let output =
        flash_attn_with_kvcache_on(call, &tensors, &mut InjectionCache::default(), &options)
            .ok()?;
    Some((output, ref64, lowprec))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(count), Some(domain)) = (args.first().and_then(|n| n.parse().ok()), args.get(1))
    else {
        eprintln!("usage: tolerance-calibration CALLS small|metadata");
        return ExitCode::from(2);
    };
    let options = match domain.as_str() {
        "small" => Options::small(Stack::Musa),
        "metadata" => case_options(),
        other => {
            eprintln!("tolerance-calibration: unknown domain {other:?} (small, metadata)");
            return ExitCode::from(2);
        }
    };
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (mut correct, mut wrong) = (Tally::default(), Tally::default());
    let bar = progress_bar(count as u64);
    let mut judged = 0;
    while judged < count {
        let call = random_call(&mut rng, &options).returning_lse();
        let Some((output, ref64, lowprec)) = evaluate(&call) else {
            continue;
        };
        wrong.add(biased(&output).judge(&ref64, &lowprec));
        correct.add(output.judge(&ref64, &lowprec));
        judged += 1;
        bar.inc(1);
    }
    bar.finish_and_clear();
    println!("{count} valid MUSA calls ({domain}, seed 7), f16 and bf16:");
    for (what, tally) in [
        ("the kernel path", &correct),
        ("the kernel path, out 0.2 % too large", &wrong),
    ] {
        println!(
            "  {what}: within the rule {} (by the output-rounding floor alone {}), refused {}",
            tally.within, tally.within_by_floor, tally.refused
        );
    }
    if correct.refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

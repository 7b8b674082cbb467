//! The `validation` suite: every profile on the catalogue and on seeded random variations of it.
//!
//! A case passes when no profile panics, validating twice gives the same verdict, and every
//! rejection is one of the registered sites: its exception, and a message its template (plus the
//! stable front end's prefix and per-dimension shape texts) can produce; every hazard is registered.

use super::{CaseOutcome, Suite, catalogue};
use crate::call::{Device, Dtype, KvCacheCall, PyValue, TensorArg};
use crate::fuzzing::oracles::verdict::verdict_checked;
use crate::spec::call_to_json;
use crate::validate::{Profile, profiles};
use rand::{Rng, SeedableRng, seq::SliceRandom};
use rand_chacha::ChaCha8Rng;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The suite registered in [`super::suites`].
pub struct ValidationSuite;

pub static VALIDATION: ValidationSuite = ValidationSuite;

/// Case `index`: the catalogue first, then seeded random calls.
fn case(seed: u64, index: usize) -> (String, KvCacheCall) {
    let calls = catalogue::calls();
    match calls.get(index) {
        Some(call) => (format!("catalogue/{}", call.id), call.clone()),
        None => (
            format!("random/{seed}/{index}"),
            random_call(seed, index, calls),
        ),
    }
}

impl Suite for ValidationSuite {
    fn name(&self) -> &'static str {
        "validation"
    }

    fn description(&self) -> &'static str {
        "catalogue and seeded random calls through every profile: no panic, deterministic, only registered sites and hazards"
    }

    fn default_cases(&self) -> usize {
        catalogue::calls().len() + 20_000
    }

    fn run_case(&self, seed: u64, index: usize) -> CaseOutcome {
        let (name, call) = case(seed, index);
        let result = profiles::all()
            .into_iter()
            .try_for_each(|profile| check_profile(profile, &call))
            .map_err(|problem| format!("{problem}\ncall: {}", call_to_json(&call)));
        CaseOutcome { name, result }
    }

    fn call(&self, seed: u64, index: usize) -> Option<KvCacheCall> {
        Some(case(seed, index).1)
    }
}

fn check_profile(profile: &dyn Profile, call: &KvCacheCall) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| verdict_checked(profile, call))) {
        Ok(result) => result.map(|_| ()),
        Err(_) => Err(format!("{} panicked", profile.name())),
    }
}

/// A catalogue call with one to three random mutations, deterministic in `(seed, index)`.
fn random_call(seed: u64, index: usize, catalogue: &[KvCacheCall]) -> KvCacheCall {
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut call = catalogue
        .choose(&mut rng)
        .cloned()
        .expect("the catalogue has calls");
    call.id = format!("random-{seed}-{index}");
    for _ in 0..rng.gen_range(1..=3) {
        mutate(&mut call, &mut rng);
    }
    call
}

/// Parameters a random tensor is put into: every tensor parameter of the canonical signature, and
/// `score_mod` (a callable, so a tensor there is a wrong type).
const TENSOR_PARAMS: [&str; 21] = [
    "q",
    "k_cache",
    "v_cache",
    "k",
    "v",
    "qv",
    "rotary_cos",
    "rotary_sin",
    "cache_seqlens",
    "cache_batch_idx",
    "cache_leftpad",
    "page_table",
    "cu_seqlens_q",
    "cu_seqlens_k_new",
    "rotary_seqlens",
    "q_descale",
    "k_descale",
    "v_descale",
    "scheduler_metadata",
    "sinks",
    "score_mod",
];

fn mutate(call: &mut KvCacheCall, rng: &mut ChaCha8Rng) {
    let existing: Vec<String> = call.keywords.iter().map(|(k, _)| k.clone()).collect();
    match rng.gen_range(0..7) {
        0 => {
            if let Some(name) = existing.choose(rng) {
                let value = if rng.gen_bool(0.5) {
                    PyValue::None
                } else {
                    call.unset(name);
                    return;
                };
                call.set(name, value);
            }
        }
        1..=3 => {
            let tensors: Vec<String> = call
                .keywords
                .iter()
                .filter(|(_, v)| v.as_tensor().is_some())
                .map(|(k, _)| k.clone())
                .collect();
            if let Some(name) = tensors.choose(rng) {
                if let Some(PyValue::Tensor(t)) = call.passed(name).cloned() {
                    call.set(name, PyValue::Tensor(mutate_tensor(t, rng)));
                }
            }
        }
        4 => {
            let name = TENSOR_PARAMS.choose(rng).expect("non-empty");
            let dtype = *Dtype::ALL.choose(rng).expect("non-empty");
            let rank = rng.gen_range(0..5);
            let shape: Vec<usize> = (0..rank).map(|_| small_dim(rng)).collect();
            call.set(name, PyValue::Tensor(TensorArg::new(dtype, &shape)));
        }
        _ => {
            let (name, value) = random_scalar(rng);
            call.set(name, value);
        }
    }
}

fn small_dim(rng: &mut ChaCha8Rng) -> usize {
    *[0, 1, 2, 3, 4, 5, 8, 13, 16, 64, 96, 128, 256, 512, 577]
        .choose(rng)
        .expect("non-empty")
}

fn mutate_tensor(mut t: TensorArg, rng: &mut ChaCha8Rng) -> TensorArg {
    match rng.gen_range(0..5) {
        0 => t.dtype = *Dtype::ALL.choose(rng).expect("non-empty"),
        1 => {
            t.device = Some(
                *[Device::Cpu, Device::Cuda, Device::Musa]
                    .choose(rng)
                    .expect("non-empty"),
            )
        }
        2 if !t.shape.is_empty() => {
            let i = rng.gen_range(0..t.shape.len());
            t.shape[i] = small_dim(rng);
            t.values = None;
            t.stride = None;
        }
        3 => {
            if rng.gen_bool(0.5) || t.shape.is_empty() {
                t.shape.push(small_dim(rng));
            } else {
                t.shape.pop();
            }
            t.values = None;
            t.stride = None;
        }
        _ => {
            let mut strides = TensorArg::contiguous_strides(&t.shape);
            if let Some(last) = strides.last_mut() {
                *last = 2;
            }
            t.stride = Some(strides);
        }
    }
    t
}

fn random_scalar(rng: &mut ChaCha8Rng) -> (&'static str, PyValue) {
    let int = |rng: &mut ChaCha8Rng| {
        PyValue::Int(
            *[-2, -1, 0, 1, 2, 3, 4, 7, 64, 300, 1 << 32]
                .choose(rng)
                .expect("non-empty"),
        )
    };
    match rng.gen_range(0..9) {
        0 => {
            let ver = [
                PyValue::Int(2),
                PyValue::Int(3),
                PyValue::Int(4),
                PyValue::Float(4.0),
                PyValue::Str("4".into()),
                PyValue::None,
            ];
            ("ver", ver.choose(rng).expect("non-empty").clone())
        }
        1 => ("causal", PyValue::Bool(rng.gen_bool(0.5))),
        2 => {
            let (l, r) = (int(rng), int(rng));
            let window = match rng.gen_range(0..4) {
                0 => PyValue::Tuple(vec![l, r]),
                1 => PyValue::List(vec![l, r]),
                2 => PyValue::Tuple(vec![l]),
                _ => PyValue::Float(1.5),
            };
            ("window_size", window)
        }
        3 => ("num_splits", int(rng)),
        4 => {
            let chunk = [
                PyValue::None,
                PyValue::Int(16),
                PyValue::Str("8".into()),
                PyValue::Float(f64::NAN),
            ];
            (
                "attention_chunk",
                chunk.choose(rng).expect("non-empty").clone(),
            )
        }
        5 => ("softcap", PyValue::Float(rng.gen_range(-5.0..50.0))),
        6 => ("pack_gqa", PyValue::Bool(rng.gen_bool(0.5))),
        7 => ("sm_margin", int(rng)),
        _ => ("cache_seqlens", int(rng)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn random_cases_are_deterministic_and_pass() {
        for index in 0..200 {
            let a = VALIDATION.run_case(7, catalogue::calls().len() + index);
            let b = VALIDATION.run_case(7, catalogue::calls().len() + index);
            assert_eq!(a, b);
            assert!(a.result.is_ok(), "{}: {:?}", a.name, a.result);
        }
    }
}

//! The reference never panics: calls whose shapes or index values disagree are errors.

use fa3conform::call::{PyValue, TensorValues};
use fa3conform::cases::{Options, random_call};
use fa3conform::reference::{Precision, Stack, run};
use fa3conform::tensor::materialise;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Breaks one argument of `call`: a scalar of the wrong type or range, a tensor dimension
/// changed, or index values out of range.
fn mutate(rng: &mut ChaCha8Rng, call: &mut fa3conform::call::KvCacheCall) {
    if rng.gen_bool(0.25) {
        let scalars = [
            ("window_size", PyValue::Str("left".into())),
            ("window_size", PyValue::Tuple(vec![PyValue::Int(5)])),
            ("attention_chunk", PyValue::Float(2.5)),
            ("cache_seqlens", PyValue::Int(-3)),
            ("cache_seqlens", PyValue::Int(1000)),
            ("softcap", PyValue::Str("0".into())),
            ("softmax_scale", PyValue::Object("dict".into())),
            ("max_seqlen_q", PyValue::Int(0)),
        ];
        let (name, value) = scalars.choose(rng).expect("non-empty").clone();
        call.set(name, value);
        return;
    }
    let names: Vec<String> = call.tensors().map(|(name, _)| name).collect();
    let name = names.choose(rng).expect("calls have tensors").clone();
    let Some(PyValue::Tensor(mut t)) = call.passed(&name).cloned() else {
        return;
    };
    match t.values.take() {
        Some(TensorValues::Int(values)) if rng.gen_bool(0.5) => {
            let broken = values.iter().map(|_| rng.gen_range(-3..40)).collect();
            t.values = Some(TensorValues::Int(broken));
        }
        _ if !t.shape.is_empty() => {
            let dim = rng.gen_range(0..t.shape.len());
            t.shape[dim] = match rng.gen_range(0..3) {
                0 => 0,
                1 => t.shape[dim] + 1,
                _ => t.shape[dim].saturating_sub(1),
            };
        }
        _ => {}
    }
    call.set(&name, PyValue::Tensor(t));
}

#[test]
fn broken_calls_are_errors_not_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let (mut evaluated, mut refused) = (0, 0);
    for i in 0..400 {
        let stack = Stack::ALL[i % 3];
        let mut call = random_call(&mut rng, &Options::small(stack));
        for _ in 0..rng.gen_range(1..=2) {
            mutate(&mut rng, &mut call);
        }
        let Ok(tensors) = materialise(&call, 1 << 28) else {
            continue;
        };
        for precision in [Precision::Exact, Precision::LowPrecision] {
            match run(&call, &tensors, stack, precision) {
                Ok(_) => evaluated += 1,
                Err(_) => refused += 1,
            }
        }
    }
    // Both outcomes occur: some breakages are harmless (e.g. a spare page), most are refused.
    assert!(
        evaluated > 0 && refused > 0,
        "{evaluated} evaluated, {refused} refused"
    );
}

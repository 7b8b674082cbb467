//! The mutator: one change that moves an argument of a valid call towards an error site.
//!
//! The `validation` suite draws mutations from a seeded rng over catalogue calls; the `validate`
//! fuzz target from the fuzz input (through `fuzzing::generators::InputRng`) over generated calls.
//! A [`Mutation`] is a value, so a fuzz case can say which changes made it.

use crate::call::{Device, Dtype, KvCacheCall, Param, PyValue, TensorArg, TensorValues, signature};
use rand::Rng;
use rand::seq::SliceRandom;

/// One change to a call's arguments.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    /// Pass `None` explicitly.
    PassNone(Param),
    /// Stop passing the argument (its default applies).
    Unset(Param),
    /// Pass a non-tensor Python value.
    Scalar(Param, PyValue),
    /// Pass a new tensor of any dtype and small shape (tensor parameters and `score_mod`).
    Tensor(Param, TensorArg),
    /// Change a tensor's dtype.
    Dtype(Param, Dtype),
    /// Change one extent of a tensor (or add / drop a dimension).
    Shape(Param, ShapeChange),
    /// Give a tensor a non-unit last stride and a non-dense leading stride.
    Stride(Param, usize),
    /// Move a tensor to another device.
    Device(Param, Device),
    /// Change one value of an index tensor.
    Value(Param, usize, i64),
    /// Pass a keyword no stack has, or one only some stacks have.
    Keyword(&'static str, PyValue),
    /// Pass the first `n` arguments positionally instead of by keyword.
    Positional(usize),
    /// Call mate's FA3 wrapper instead: drop the keywords its signature lacks (`ver`,
    /// `score_mod`) and pass one of its own (`s_aux` or a context-parallel argument).
    ForMate(&'static str, PyValue),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShapeChange {
    Resize { dim: usize, extent: usize },
    AddDim(usize),
    DropDim,
}

/// Keywords that exist in some stacks but not others, or nowhere.
const EXTRA_KEYWORDS: [&str; 8] = [
    "s_aux",
    "learnable_sink",
    "cp_world_size",
    "cp_rank",
    "cp_tot_seqused_k",
    "out",
    "only_qv",
    "softcapp",
];

/// Parameters a new tensor is put into: every tensor parameter of the canonical signature, and
/// `score_mod` (a callable, so a tensor there is a wrong type).
const TENSOR_PARAMS: [Param; 21] = [
    Param::Q,
    Param::KCache,
    Param::VCache,
    Param::K,
    Param::V,
    Param::Qv,
    Param::RotaryCos,
    Param::RotarySin,
    Param::CacheSeqlens,
    Param::CacheBatchIdx,
    Param::CacheLeftpad,
    Param::PageTable,
    Param::CuSeqlensQ,
    Param::CuSeqlensKNew,
    Param::RotarySeqlens,
    Param::QDescale,
    Param::KDescale,
    Param::VDescale,
    Param::SchedulerMetadata,
    Param::Sinks,
    Param::ScoreMod,
];

/// Extents that sit on the checks' boundaries (0, 1, head dims and their neighbours, mate's MLA
/// widths).
const EXTENTS: [usize; 15] = [0, 1, 2, 3, 4, 5, 8, 13, 16, 64, 96, 128, 256, 512, 577];

fn pick<T: Copy, R: Rng + ?Sized>(rng: &mut R, items: &[T]) -> T {
    *items.choose(rng).expect("non-empty")
}

/// An extent on a boundary or anywhere up to 600.
fn extent<R: Rng + ?Sized>(rng: &mut R) -> usize {
    if rng.gen_bool(0.5) {
        pick(rng, &EXTENTS)
    } else {
        rng.gen_range(0..=600)
    }
}

/// Any parameter of the canonical signature.
fn parameter<R: Rng + ?Sized>(rng: &mut R) -> Param {
    signature::SGLANG_MUSA
        .params
        .choose(rng)
        .expect("non-empty")
        .0
}

/// The parameters `call` passes by keyword, for which `wanted` holds.
fn passed_params(call: &KvCacheCall, wanted: impl Fn(&PyValue) -> bool) -> Vec<Param> {
    let mut params: Vec<Param> = call
        .keywords
        .iter()
        .filter(|(_, value)| wanted(value))
        .filter_map(|(name, _)| Param::from_name(name))
        .collect();
    // In `Param::ALL`'s order (the enum's), whatever the call's keyword order.
    params.sort_unstable();
    params.dedup();
    params
}

/// A Python value of any type, small or on a boundary.
fn small_scalar<R: Rng + ?Sized>(rng: &mut R) -> PyValue {
    match rng.gen_range(0..8) {
        0 => PyValue::Int(rng.gen_range(-3..=600)),
        1 => PyValue::Float(pick(rng, &[0.0, -1.0, 3.0, 0.5, f64::INFINITY, f64::NAN])),
        2 => PyValue::Bool(rng.r#gen()),
        3 => PyValue::Str(pick(rng, &["3", "4", ""]).to_string()),
        4 => PyValue::Tuple(vec![
            PyValue::Int(rng.gen_range(-2..=64)),
            PyValue::Int(rng.gen_range(-2..=64)),
        ]),
        5 => PyValue::List(vec![PyValue::Int(-1), PyValue::Int(-1)]),
        6 => match pick(rng, &["function", "dict", "tuple"]) {
            "dict" => PyValue::Dict(Vec::new()),
            name => PyValue::Object(name.to_string()),
        },
        _ => PyValue::None,
    }
}

/// A value of the kind a check of this parameter looks at (`ver`, window forms, chunk types, ...).
fn targeted_scalar<R: Rng + ?Sized>(rng: &mut R) -> (Param, PyValue) {
    let int = |rng: &mut R| PyValue::Int(pick(rng, &[-2, -1, 0, 1, 2, 3, 4, 7, 64, 300, 1 << 32]));
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
            (Param::Ver, ver.choose(rng).expect("non-empty").clone())
        }
        1 => (Param::Causal, PyValue::Bool(rng.gen_bool(0.5))),
        2 => {
            let (l, r) = (int(rng), int(rng));
            let window = match rng.gen_range(0..4) {
                0 => PyValue::Tuple(vec![l, r]),
                1 => PyValue::List(vec![l, r]),
                2 => PyValue::Tuple(vec![l]),
                _ => PyValue::Float(1.5),
            };
            (Param::WindowSize, window)
        }
        3 => (Param::NumSplits, int(rng)),
        4 => {
            let chunk = [
                PyValue::None,
                PyValue::Int(16),
                PyValue::Str("8".into()),
                PyValue::Float(f64::NAN),
            ];
            (
                Param::AttentionChunk,
                chunk.choose(rng).expect("non-empty").clone(),
            )
        }
        5 => (Param::Softcap, PyValue::Float(rng.gen_range(-5.0..50.0))),
        6 => (Param::PackGqa, PyValue::Bool(rng.gen_bool(0.5))),
        7 => (Param::SmMargin, int(rng)),
        _ => (Param::CacheSeqlens, int(rng)),
    }
}

/// A value for one of mate's own arguments that reaches its context-parallel asserts (F-36 … F-39)
/// and their boundaries, or an `s_aux` of the call's heads.
fn mate_argument<R: Rng + ?Sized>(rng: &mut R, call: &KvCacheCall) -> (&'static str, PyValue) {
    let tensor_shape = |param: Param| {
        call.passed(param.name())
            .and_then(PyValue::as_tensor)
            .map(|t| t.shape.clone())
    };
    match rng.gen_range(0..4) {
        0 => {
            let world = [-1, 0, 1, 2, 4];
            let value = match rng.gen_range(0..6) {
                0 => PyValue::Float(2.0),
                1 => PyValue::Tensor(TensorArg::with_ints(Dtype::Int64, &[2], vec![2, 2])),
                _ => PyValue::Int(pick(rng, &world)),
            };
            ("cp_world_size", value)
        }
        1 => ("cp_rank", PyValue::Int(pick(rng, &[-1, 0, 1, 3]))),
        2 => {
            // the global key counts, one per sequence like cache_seqlens (or of another length)
            let batch = tensor_shape(Param::CacheSeqlens)
                .and_then(|shape| shape.first().copied())
                .unwrap_or(1);
            let batch = if rng.gen_bool(0.8) {
                batch
            } else {
                extent(rng)
            };
            let dtype = if rng.gen_bool(0.8) {
                Dtype::Int32
            } else {
                pick(rng, &Dtype::ALL)
            };
            let totals = (0..batch).map(|_| rng.gen_range(0..=2048)).collect();
            let value = if dtype.is_floating_point() {
                PyValue::Tensor(TensorArg::new(dtype, &[batch]))
            } else {
                PyValue::Tensor(TensorArg::with_ints(dtype, &[batch], totals))
            };
            ("cp_tot_seqused_k", value)
        }
        _ => {
            let heads = tensor_shape(Param::Q)
                .and_then(|shape| shape.iter().rev().nth(1).copied())
                .unwrap_or(1);
            let dtype = pick(rng, &[Dtype::Bfloat16, Dtype::Float32, Dtype::Float16]);
            let value = match rng.gen_range(0..4) {
                0 => PyValue::None,
                1 => PyValue::Tensor(TensorArg::new(dtype, &[extent(rng)])),
                _ => PyValue::Tensor(TensorArg::new(dtype, &[heads])),
            };
            ("s_aux", value)
        }
    }
}

impl Mutation {
    /// Draws a mutation of `call`. Changes to an argument pick one the call passes where there is
    /// one, so that most mutations change something.
    pub fn draw<R: Rng + ?Sized>(rng: &mut R, call: &KvCacheCall) -> Mutation {
        let passed = passed_params(call, |_| true);
        let tensors = passed_params(call, |v| v.as_tensor().is_some());
        let argument = |rng: &mut R, among: &[Param]| match among.choose(rng) {
            Some(param) => *param,
            None => parameter(rng),
        };
        match rng.gen_range(0..13) {
            0 => Mutation::PassNone(if rng.gen_bool(0.5) {
                argument(rng, &passed)
            } else {
                parameter(rng)
            }),
            1 => Mutation::Unset(argument(rng, &passed)),
            2 => Mutation::Scalar(parameter(rng), small_scalar(rng)),
            3 => {
                let (param, value) = targeted_scalar(rng);
                Mutation::Scalar(param, value)
            }
            4 => {
                let param = pick(rng, &TENSOR_PARAMS);
                let dtype = pick(rng, &Dtype::ALL);
                let shape: Vec<usize> = (0..rng.gen_range(0..5)).map(|_| extent(rng)).collect();
                Mutation::Tensor(param, TensorArg::new(dtype, &shape))
            }
            5 => Mutation::Dtype(argument(rng, &tensors), pick(rng, &Dtype::ALL)),
            6 => {
                let param = argument(rng, &tensors);
                let change = match rng.gen_range(0..3) {
                    0 => ShapeChange::Resize {
                        dim: rng.gen_range(0..=4),
                        extent: extent(rng),
                    },
                    1 => ShapeChange::AddDim(extent(rng)),
                    _ => ShapeChange::DropDim,
                };
                Mutation::Shape(param, change)
            }
            7 => Mutation::Stride(argument(rng, &tensors), rng.gen_range(2..=3)),
            8 => Mutation::Device(
                argument(rng, &tensors),
                pick(rng, &[Device::Cpu, Device::Cuda, Device::Musa]),
            ),
            9 => Mutation::Value(
                argument(rng, &tensors),
                rng.gen_range(0..=15),
                rng.gen_range(-2..=5000),
            ),
            10 => Mutation::Keyword(pick(rng, &EXTRA_KEYWORDS), small_scalar(rng)),
            11 => {
                let (name, value) = mate_argument(rng, call);
                Mutation::ForMate(name, value)
            }
            _ => Mutation::Positional(rng.gen_range(1..=34)),
        }
    }

    /// Applies the mutation; one that does not apply (a tensor change on a non-tensor) is a no-op.
    pub fn apply(&self, call: &mut KvCacheCall) {
        let tensor_of = |call: &mut KvCacheCall, param: &Param| -> Option<TensorArg> {
            call.keywords
                .iter()
                .find(|(k, _)| k == param.name())
                .and_then(|(_, v)| v.as_tensor().cloned())
        };
        match self {
            Mutation::PassNone(param) => {
                call.set(param.name(), PyValue::None);
            }
            Mutation::Unset(param) => {
                call.unset(param.name());
            }
            Mutation::Scalar(param, value) => {
                call.set(param.name(), value.clone());
            }
            Mutation::Keyword(name, value) => {
                call.set(name, value.clone());
            }
            Mutation::ForMate(name, value) => {
                call.unset(Param::Ver.name());
                call.unset(Param::ScoreMod.name());
                call.set(name, value.clone());
            }
            Mutation::Tensor(param, tensor) => {
                call.set(param.name(), PyValue::Tensor(tensor.clone()));
            }
            Mutation::Dtype(param, dtype) => {
                if let Some(mut t) = tensor_of(call, param) {
                    // Values follow the dtype's kind, as a `.to(dtype)` would convert them.
                    t.values = t.values.map(|v| match dtype.is_floating_point() {
                        true => TensorValues::Float(v.to_f64()),
                        false => TensorValues::Int(v.to_i64()),
                    });
                    t.dtype = *dtype;
                    call.set(param.name(), PyValue::Tensor(t));
                }
            }
            Mutation::Shape(param, change) => {
                if let Some(mut t) = tensor_of(call, param) {
                    match *change {
                        ShapeChange::Resize { dim, extent } if dim < t.shape.len() => {
                            t.shape[dim] = extent
                        }
                        ShapeChange::Resize { .. } => return,
                        ShapeChange::AddDim(extent) => t.shape.push(extent),
                        ShapeChange::DropDim => {
                            t.shape.pop();
                        }
                    }
                    t.values = None;
                    t.stride = None;
                    call.set(param.name(), PyValue::Tensor(t));
                }
            }
            Mutation::Stride(param, factor) => {
                if let Some(mut t) = tensor_of(call, param) {
                    let mut strides = TensorArg::contiguous_strides(&t.shape);
                    if let Some(first) = strides.first_mut() {
                        *first *= factor;
                    }
                    if let Some(last) = strides.last_mut() {
                        *last = *factor;
                    }
                    t.stride = Some(strides);
                    call.set(param.name(), PyValue::Tensor(t));
                }
            }
            Mutation::Device(param, device) => {
                if let Some(mut t) = tensor_of(call, param) {
                    t.device = Some(*device);
                    call.set(param.name(), PyValue::Tensor(t));
                }
            }
            Mutation::Value(param, index, value) => {
                if let Some(mut t) = tensor_of(call, param) {
                    if let Some(TensorValues::Int(values)) = &mut t.values {
                        if let Some(slot) = values.get_mut(*index) {
                            *slot = *value;
                            call.set(param.name(), PyValue::Tensor(t));
                        }
                    }
                }
            }
            Mutation::Positional(n) => {
                // Move the first `n` canonical parameters that are passed by keyword into positional
                // slots, filling gaps with their defaults, as a caller writing them in order would.
                let params = signature::SGLANG_MUSA.params;
                let count = (*n).min(params.len());
                let mut positional = Vec::with_capacity(count);
                for (param, default) in &params[..count] {
                    let value = match call.keywords.iter().position(|(k, _)| k == param.name()) {
                        Some(i) => call.keywords.remove(i).1,
                        None => match default.value() {
                            Some(v) => v,
                            None => break,
                        },
                    };
                    positional.push(value);
                }
                call.positional = positional;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::{Options, random_call};
    use crate::reference::Stack;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn positional_mutation_keeps_the_binding() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut call = random_call(&mut rng, &Options::small(Stack::Musa));
        let before = call.bind_canonical().unwrap();
        Mutation::Positional(12).apply(&mut call);
        let after = call.bind_canonical().unwrap();
        for &(param, _) in signature::SGLANG_MUSA.params {
            assert_eq!(before.get(param), after.get(param), "{param}");
        }
    }

    #[test]
    fn most_mutations_change_the_call() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let options = Options::small(Stack::Fa3);
        let mut changed = 0;
        for _ in 0..200 {
            let call = random_call(&mut rng, &options);
            let mut mutated = call.clone();
            Mutation::draw(&mut rng, &call).apply(&mut mutated);
            changed += usize::from(format!("{mutated:?}") != format!("{call:?}"));
        }
        assert!(
            changed >= 150,
            "only {changed} of 200 mutations changed the call"
        );
    }
}

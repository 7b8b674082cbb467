//! Generators: raw fuzz bytes → structured cases.
//!
//! A case is built valid first — by [`crate::cases::random_call`], driven by the fuzz input itself
//! through [`InputRng`], so every choice the generator makes is a few input bytes the fuzzer can
//! mutate — and then, with some probability, one or two [`Mutation`]s push an argument away from
//! validity, so that both the deep checks and the kernel are reached.

use crate::call::{Device, Dtype, KvCacheCall, PyValue, TensorArg, TensorValues, signature};
use crate::cases::{self, Options};
use crate::reference::Stack;
use arbitrary::{Arbitrary, Result, Unstructured};
use rand::RngCore;

/// A random-number source that reads the fuzz input (zeros once it is exhausted), so that the
/// seeded case generator becomes a structural decoder of fuzz bytes.
pub struct InputRng<'a, 'b> {
    input: &'b mut Unstructured<'a>,
}

impl<'a, 'b> InputRng<'a, 'b> {
    pub fn new(input: &'b mut Unstructured<'a>) -> Self {
        InputRng { input }
    }
}

impl RngCore for InputRng<'_, '_> {
    fn next_u32(&mut self) -> u32 {
        u32::arbitrary(self.input).unwrap_or(0)
    }

    fn next_u64(&mut self) -> u64 {
        u64::arbitrary(self.input).unwrap_or(0)
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        if self.input.fill_buffer(dest).is_err() {
            dest.fill(0);
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// One change that moves an argument of a valid call towards an error site.
#[derive(Clone, Debug, PartialEq)]
pub enum Mutation {
    /// Pass `None` explicitly.
    PassNone(&'static str),
    /// Stop passing the argument (its default applies).
    Unset(&'static str),
    /// Pass a non-tensor Python value.
    Scalar(&'static str, PyValue),
    /// Change a tensor's dtype.
    Dtype(&'static str, Dtype),
    /// Change one extent of a tensor (or add / drop a dimension).
    Shape(&'static str, ShapeChange),
    /// Give a tensor a non-unit last stride or a non-dense leading stride.
    Stride(&'static str, usize),
    /// Move a tensor to another device.
    Device(&'static str, Device),
    /// Change one value of an index tensor.
    Value(&'static str, usize, i64),
    /// Pass a keyword no stack has, or one only some stacks have.
    Keyword(&'static str, PyValue),
    /// Pass the first `n` arguments positionally instead of by keyword.
    Positional(usize),
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

fn parameter(u: &mut Unstructured) -> Result<&'static str> {
    Ok(u.choose(signature::SGLANG_MUSA.params)?.0.name())
}

fn small_scalar(u: &mut Unstructured) -> Result<PyValue> {
    Ok(match u.int_in_range(0..=7)? {
        0 => PyValue::Int(u.int_in_range(-3..=600)?),
        1 => PyValue::Float(*u.choose(&[0.0, -1.0, 3.0, 0.5, f64::INFINITY, f64::NAN])?),
        2 => PyValue::Bool(u.arbitrary()?),
        3 => PyValue::Str(u.choose(&["3", "4", ""])?.to_string()),
        4 => PyValue::Tuple(vec![
            PyValue::Int(u.int_in_range(-2..=64)?),
            PyValue::Int(u.int_in_range(-2..=64)?),
        ]),
        5 => PyValue::List(vec![PyValue::Int(-1), PyValue::Int(-1)]),
        6 => PyValue::Object(u.choose(&["function", "dict", "tuple"])?.to_string()),
        _ => PyValue::None,
    })
}

impl Mutation {
    /// Draws a mutation of `call`: tensor changes pick one of the tensors the call passes, so that
    /// most mutations change something.
    pub fn draw(u: &mut Unstructured, call: &KvCacheCall) -> Result<Mutation> {
        let tensors: Vec<&'static str> = signature::SGLANG_MUSA
            .params
            .iter()
            .map(|(param, _)| param.name())
            .filter(|name| {
                call.keywords
                    .iter()
                    .any(|(k, v)| k == name && v.as_tensor().is_some())
            })
            .collect();
        let tensor = |u: &mut Unstructured| -> Result<&'static str> {
            if tensors.is_empty() {
                parameter(u)
            } else {
                Ok(*u.choose(&tensors)?)
            }
        };
        Ok(match u.int_in_range(0..=9)? {
            0 => Mutation::PassNone(parameter(u)?),
            1 => Mutation::Unset(parameter(u)?),
            2 => Mutation::Scalar(parameter(u)?, small_scalar(u)?),
            3 => Mutation::Dtype(tensor(u)?, *u.choose(&Dtype::ALL)?),
            4 => Mutation::Shape(
                tensor(u)?,
                match u.int_in_range(0..=2)? {
                    0 => ShapeChange::Resize {
                        dim: u.int_in_range(0..=4)?,
                        extent: u.int_in_range(0..=600)?,
                    },
                    1 => ShapeChange::AddDim(u.int_in_range(1..=3)?),
                    _ => ShapeChange::DropDim,
                },
            ),
            5 => Mutation::Stride(tensor(u)?, u.int_in_range(2..=3)?),
            6 => Mutation::Device(
                tensor(u)?,
                *u.choose(&[Device::Cpu, Device::Cuda, Device::Musa])?,
            ),
            7 => Mutation::Value(
                tensor(u)?,
                u.int_in_range(0..=15)?,
                u.int_in_range(-2..=5000)?,
            ),
            8 => Mutation::Keyword(u.choose(&EXTRA_KEYWORDS)?, small_scalar(u)?),
            _ => Mutation::Positional(u.int_in_range(1..=34)?),
        })
    }

    /// Applies the mutation; one that does not apply (a tensor change on a non-tensor) is a no-op.
    pub fn apply(&self, call: &mut KvCacheCall) {
        let tensor_of = |call: &mut KvCacheCall, name: &str| -> Option<TensorArg> {
            call.keywords
                .iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.as_tensor().cloned())
        };
        match self {
            Mutation::PassNone(name) => {
                call.set(name, PyValue::None);
            }
            Mutation::Unset(name) => {
                call.unset(name);
            }
            Mutation::Scalar(name, value) | Mutation::Keyword(name, value) => {
                call.set(name, value.clone());
            }
            Mutation::Dtype(name, dtype) => {
                if let Some(mut t) = tensor_of(call, name) {
                    // Values follow the dtype's kind, as a `.to(dtype)` would convert them.
                    t.values = t.values.map(|v| match dtype.is_floating_point() {
                        true => TensorValues::Float(v.to_f64()),
                        false => TensorValues::Int(v.to_i64()),
                    });
                    t.dtype = *dtype;
                    call.set(name, PyValue::Tensor(t));
                }
            }
            Mutation::Shape(name, change) => {
                if let Some(mut t) = tensor_of(call, name) {
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
                    call.set(name, PyValue::Tensor(t));
                }
            }
            Mutation::Stride(name, factor) => {
                if let Some(mut t) = tensor_of(call, name) {
                    let mut strides = TensorArg::contiguous_strides(&t.shape);
                    if let Some(first) = strides.first_mut() {
                        *first *= factor;
                    }
                    if let Some(last) = strides.last_mut() {
                        *last = *factor;
                    }
                    t.stride = Some(strides);
                    call.set(name, PyValue::Tensor(t));
                }
            }
            Mutation::Device(name, device) => {
                if let Some(mut t) = tensor_of(call, name) {
                    t.device = Some(*device);
                    call.set(name, PyValue::Tensor(t));
                }
            }
            Mutation::Value(name, index, value) => {
                if let Some(mut t) = tensor_of(call, name) {
                    if let Some(TensorValues::Int(values)) = &mut t.values {
                        if let Some(slot) = values.get_mut(*index) {
                            *slot = *value;
                            call.set(name, PyValue::Tensor(t));
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

/// What a decoded case is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Any stack, valid or mutated towards an error site, MLA shapes included.
    Validation,
    /// Valid MUSA calls the kernel path evaluates (mate's fmha forward, no MLA branch).
    Kernel,
}

/// A fuzz case: a valid call for a stack, then up to two mutations.
#[derive(Clone, Debug)]
pub struct FuzzCall {
    pub stack: Stack,
    pub call: KvCacheCall,
    pub mutations: Vec<Mutation>,
}

impl FuzzCall {
    /// Decodes a case for `target`.
    pub fn decode(u: &mut Unstructured, target: Target) -> Result<FuzzCall> {
        let (stacks, mutate): (&[Stack], bool) = match target {
            Target::Validation => (&Stack::ALL, true),
            Target::Kernel => (&[Stack::Musa], false),
        };
        let stack = *u.choose(stacks)?;
        let mut options = Options::small(stack);
        // MLA-shaped calls take mate's separate MLA kernel, which the kernel path does not model.
        options.mla &= target == Target::Validation && u.ratio(1u8, 8u8)?;
        let seed = u64::arbitrary(u)?;
        let mut call = cases::random_call(&mut InputRng::new(u), &options);
        call.seed = seed;
        let mut mutations = Vec::new();
        if mutate {
            let count = *u.choose(&[0usize, 1, 1, 1, 2, 2])?;
            for _ in 0..count {
                let mutation = Mutation::draw(u, &call)?;
                mutation.apply(&mut call);
                mutations.push(mutation);
            }
        }
        Ok(FuzzCall {
            stack,
            call,
            mutations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhausted_input_still_decodes_a_valid_call() {
        let mut u = Unstructured::new(&[]);
        let case = FuzzCall::decode(&mut u, Target::Validation).unwrap();
        assert!(case.call.bind_canonical().is_ok());
        assert!(case.mutations.is_empty());
    }

    #[test]
    fn positional_mutation_keeps_the_binding() {
        let mut u = Unstructured::new(&[7; 64]);
        let mut case = FuzzCall::decode(&mut u, Target::Kernel).unwrap();
        let before = case.call.bind_canonical().unwrap();
        Mutation::Positional(12).apply(&mut case.call);
        let after = case.call.bind_canonical().unwrap();
        for &(param, _) in signature::SGLANG_MUSA.params {
            assert_eq!(before.get(param), after.get(param), "{param}");
        }
    }
}
